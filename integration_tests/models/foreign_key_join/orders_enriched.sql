{#- The demo tables are tiny: full_recompute_above=0.9 keeps a one-customer change on the incremental path. -#}
{{ config(
    materialized='foreign_key_join',
    left_key='order_id',
    right_key='customer_id',
    foreign_key='customer_id',
    full_recompute_above=0.9,
    join_type='left',
) }}

select
  {{ incremental_joins.output_key() }},
  l.customer_id,
  l.amount,
  r.name as customer_name,
  r.country
from {{ incremental_joins.join(ref('orders'), ref('customers')) }}
