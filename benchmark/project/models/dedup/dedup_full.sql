-- The same model, rebuilt from the whole stream (`--full-refresh`) each round: the full rebuild
-- baseline and the result the incremental runs must equal.
{{ config(materialized='deduplicate', id='msg_id', interval='10 minutes', event_time='ts',
          arrival_order='event_offset') }}
select * from {{ incremental_joins.stream(source('gen', 'events')) }}
