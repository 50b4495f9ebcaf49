-- Baseline 2, the incremental model users write today: merge the left rows updated since the
-- last run. It misses customer changes and order deletes (the benchmark counts the wrong rows).
{{ config(materialized='incremental', incremental_strategy='merge', unique_key='order_id') }}
select l.order_id, l.customer_id, l.amount, l.status, r.name as customer_name, r.country, r.tier,
       l.updated_at
from {{ source('gen', 'orders') }} as l
left join {{ source('gen', 'customers') }} as r on l.customer_id = r.customer_id
{% if is_incremental() %}
where l.updated_at > (select max(updated_at) from {{ this }})
{% endif %}
