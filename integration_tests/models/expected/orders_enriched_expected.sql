{#- Expected outputs with nulls in string columns are models, not seeds: dbt-spark loads an empty
    CSV string cell as the string 'None'. -#}
{{ config(materialized='view') }}
select * from values
  (100, 1, 25.00, 'Ada', 'UK'),
  (101, 2, 40.00, 'Grace', 'US'),
  (102, 1, 15.50, 'Ada', 'UK'),
  (103, cast(null as bigint), 9.99, cast(null as string), cast(null as string))
  as expected(order_id, customer_id, amount, customer_name, country)
