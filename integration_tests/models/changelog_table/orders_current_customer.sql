{#- changelog_table output as the right input of a foreign_key_join: orders with their customer as
    the change events say it is now. -#}
{{ config(materialized='foreign_key_join', left_key='order_id', right_key='customer_id',
          foreign_key='customer_id', join_type='left', full_recompute_above=0.9) }}
select {{ incremental_joins.output_key() }}, l.amount, r.name as customer_name, r.country
from {{ incremental_joins.join(ref('orders'), ref('customers_current')) }}
