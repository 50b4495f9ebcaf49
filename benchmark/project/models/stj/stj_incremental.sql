-- KIP-923: each purchase priced as of its own time; purchases wait one minute for late prices.
{{ config(materialized='stream_table_join', key='product_id', event_time='purchased_at',
          table_time='valid_from', history_retention='3650 days', grace_period='1 minute',
          join_type='left') }}
select s.purchase_id, s.product_id, s.purchased_at, s.qty, t.price
from {{ incremental_joins.as_of_join(source('gen', 'purchases'), source('gen', 'prices')) }}
