{{ config(materialized='view') }}
select * from values
  (cast(1 as bigint), 'Anne', 'NL', cast(4 as bigint)),
  (cast(2 as bigint), 'Bob', 'DE', cast(2 as bigint)),
  (cast(4 as bigint), 'Dee', 'US', cast(1 as bigint))
  as expected(customer_id, name, country, lsn)
