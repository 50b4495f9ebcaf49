{{ config(materialized='view') }}
select * from values
  (cast(100 as bigint), cast(25.00 as decimal(10,2)), 'Anne', 'NL'),
  (cast(101 as bigint), cast(40.00 as decimal(10,2)), 'Bob', 'DE'),
  (cast(102 as bigint), cast(15.50 as decimal(10,2)), 'Anne', 'NL'),
  (cast(103 as bigint), cast(9.99 as decimal(10,2)), cast(null as string), cast(null as string))
  as expected(order_id, amount, customer_name, country)
