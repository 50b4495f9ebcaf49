{#- KIP-655 deduplication: a customer's first order, then none within a day of it. All orders
    arrive in one commit (the seed), in order_id order: 100 and 101 are forwarded; 102 (customer 1,
    23.5 hours after 100) is a duplicate; 103 has no customer (null key) and is forwarded. -#}
{{ config(materialized='deduplicate', key='customer_id', interval='1 day', event_time='updated_at',
          arrival_order='order_id') }}
select * from {{ incremental_joins.stream(ref('orders')) }}
