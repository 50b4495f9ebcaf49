-- KIP-655: a redelivered message (same msg_id) within 10 minutes of the forwarded one is dropped.
{{ config(materialized='deduplicate', id='msg_id', interval='10 minutes', event_time='ts',
          arrival_order='event_offset') }}
select * from {{ incremental_joins.stream(source('gen', 'events')) }}
