{{ config(materialized='incremental', incremental_strategy='merge', unique_key='order_id') }}

select order_id, customer_id, amount, updated_at
from {{ ref('orders') }}
{% if is_incremental() %}
where updated_at > (select coalesce(max(updated_at), timestamp'1900-01-01') from {{ this }})
{% endif %}
