-- The operator, always on its incremental path (the fallback threshold out of reach), so its cost
-- can be measured at every change fraction.
{{ config(materialized='foreign_key_join', left_key='order_id', right_key='customer_id',
          foreign_key='customer_id', join_type='left', full_recompute_above=10) }}
select {{ incremental_joins.output_key() }}, l.customer_id, l.amount, l.status,
       r.name as customer_name, r.country, r.tier
from {{ incremental_joins.join(source('gen', 'orders'), source('gen', 'customers')) }}
