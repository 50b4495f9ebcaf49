-- Baseline 5, the full as-of recompute over the whole stream: every purchase gets the price
-- version with the largest valid_from at or before its time (a version sorts before a purchase
-- at the same instant), from the log of all price versions.
{{ config(materialized='table') }}
with timeline as (
  select purchase_id, product_id, purchased_at as at, qty, cast(null as double) as price, 1 as kind
  from {{ source('gen', 'purchases') }}
  union all
  select cast(null as bigint), product_id, valid_from, cast(null as int), price, 0
  from {{ source('gen', 'price_versions') }}
)
select purchase_id, product_id, purchased_at, qty, price
from (
  select purchase_id, product_id, at as purchased_at, qty, kind,
         last(price, true) over (partition by product_id order by at, kind
                                 rows between unbounded preceding and current row) as price
  from timeline
) as t
where kind = 1
