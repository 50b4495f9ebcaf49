{#- The latest run of every incremental_joins model: what it read, what it wrote, how long it took. -#}
select
  model,
  relation,
  operator,
  finished_at as last_run_at,
  mode as last_run_mode,
  fallback_reason,
  versions_read,
  rows_read,
  affected_keys,
  rows_inserted,
  rows_updated,
  rows_deleted,
  duration_s
from (
  select *, row_number() over (partition by relation order by finished_at desc) as recency
  from {{ incremental_joins.run_log_relation() }}
) as runs
where recency = 1
