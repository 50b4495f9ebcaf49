{{ config(materialized='view') }}
select * from values
  (cast(100 as bigint), cast(1 as bigint)),
  (cast(101 as bigint), cast(2 as bigint)),
  (cast(103 as bigint), cast(null as bigint))
  as expected(order_id, customer_id)
