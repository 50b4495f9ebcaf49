{#- Every order with its customer, and every customer without orders (left side null). -#}
{{ config(
    materialized='foreign_key_join',
    left_key='order_id',
    right_key='customer_id',
    foreign_key='customer_id',
    full_recompute_above=0.9,
    join_type='outer',
    output_key='combined',
) }}

select {{ incremental_joins.output_key() }}, l.amount, r.name as customer_name
from {{ incremental_joins.join(ref('orders'), ref('customers')) }}
