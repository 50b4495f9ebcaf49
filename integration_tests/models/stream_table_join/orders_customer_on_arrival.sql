{#- A changelog_table as the table side of a stream_table_join: each order appended once, with its
    customer as the change events say it is when the order is joined (no history_retention: an
    unversioned table, the key's latest row). -#}
{{ config(materialized='stream_table_join', key='customer_id', event_time='updated_at', join_type='left') }}
select s.order_id, s.amount, t.name as customer_name, t.country
from {{ incremental_joins.as_of_join(ref('orders'), ref('customers_current')) }}
