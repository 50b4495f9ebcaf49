-- Baseline 1, full rebuild: the same join as a plain table model.
{{ config(materialized='table') }}
select l.order_id, l.customer_id, l.amount, l.status, r.name as customer_name, r.country, r.tier
from {{ source('gen', 'orders') }} as l
left join {{ source('gen', 'customers') }} as r on l.customer_id = r.customer_id
