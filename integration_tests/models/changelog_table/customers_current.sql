{#- Debezium-style change events (seed customers_cdc) to the current customers: the stale update of
    customer 1 (lsn 3 after lsn 4) and the late re-insert of deleted customer 3 are ignored. -#}
{{ config(materialized='changelog_table', key='customer_id', sequence='lsn', arrival_order='kafka_offset') }}
select * from {{ incremental_joins.stream(ref('customers_cdc')) }}
