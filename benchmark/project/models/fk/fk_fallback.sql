-- The operator's full-recompute path on every run (full_recompute_above=0): what the automatic
-- fallback costs, to place the threshold where the incremental path stops being cheaper.
{{ config(materialized='foreign_key_join', left_key='order_id', right_key='customer_id',
          foreign_key='customer_id', join_type='left', full_recompute_above=0) }}
select {{ incremental_joins.output_key() }}, l.customer_id, l.amount, l.status,
       r.name as customer_name, r.country, r.tier
from {{ incremental_joins.join(source('gen', 'orders'), source('gen', 'customers')) }}
