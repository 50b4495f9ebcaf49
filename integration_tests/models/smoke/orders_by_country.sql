{{ config(materialized='table') }}

select c.country, count(*) as orders, cast(sum(o.amount) as decimal(20,2)) as revenue
from {{ ref('orders') }} as o
join {{ ref('customers') }} as c on o.customer_id = c.customer_id
group by c.country
