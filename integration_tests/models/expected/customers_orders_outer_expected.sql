{{ config(materialized='view') }}
select * from values
  (1, 100, 25.00, 'Ada'),
  (2, 101, 40.00, 'Grace'),
  (1, 102, 15.50, 'Ada'),
  (cast(null as bigint), 103, 9.99, cast(null as string)),
  (3, cast(null as bigint), cast(null as decimal(10,2)), 'Linus')
  as expected(customer_id, order_id, amount, customer_name)
