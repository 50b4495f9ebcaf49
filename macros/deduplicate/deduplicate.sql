{#- deduplicate (KIP-655; SPEC §3): the records of a stream with their duplicates removed, appended
    to the output exactly once. Strategies: 'interval' (KIP-655: a forwarded record suppresses
    records of the same key/id within `interval`, anchored on the last forwarded record; stream
    time kept across runs; late records forwarded but never stored), 'tumbling' and 'session'
    (seed 002's windowed distinct: the first record per key and epoch-aligned window, or per
    session of records no more than `interval` apart).

    resolve config → pin input and state versions → this run's records in arrival order, with
    stream time → one fold per dedup key over its records, starting from its stored state →
    append the forwarded records (once) → MERGE the store entries and stream times (one state
    table), purge expired entries → advance highwater → log. -#}
{% materialization deduplicate, adapter='spark', supported_languages=['sql'] %}
  {%- set started_at = modules.datetime.datetime.utcnow() -%}
  {%- set cfg = incremental_joins.deduplicate_config() -%}
  {%- set inputs = incremental_joins.marked_inputs(sql, ['stream'], "select * from {{ incremental_joins.stream(ref('events')) }}") -%}
  {%- set inputs = incremental_joins.run_inputs(inputs) -%}
  {%- if inputs is none -%}{{ return({'relations': [this]}) }}{%- endif -%}  {#- dbt --empty, the output exists -#}
  {%- set name = inputs.stream -%}
  {%- set state = incremental_joins.state_relation('state') -%}
  {#- The output is appended; the store, MERGEd above replace_state_below entries, keeps the key and id. -#}
  {%- set kept = [incremental_joins.column_list(cfg.key)] if cfg.key else [] -%}
  {%- if cfg.id -%}{%- do kept.append('(' ~ cfg.id ~ ')') -%}{%- endif -%}
  {%- set run = incremental_joins.begin_run([name], state=[state], pin_state=true, sole=true, merged=incremental_joins.merged_queries(inputs, sql, kept)) -%}
  {%- set full = run.full_reason is not none -%}
  {%- set plan = incremental_joins.stream_plan(name, run, cfg.append_new_columns) -%}
  {%- set pinned = none if full else incremental_joins.pinned(state, run.versions[state | string]) -%}
  {%- set records = incremental_joins.dedup_records(cfg, inputs, plan, none if full else incremental_joins.dedup_stored_times(pinned)) -%}
  {%- set folded = incremental_joins.dedup_fold(cfg, records.relation, none if full else 'select * from (' ~ pinned ~ ') as s where __ij_stream_time is null') -%}
  {%- set stats = incremental_joins.dedup_write(cfg, records, folded, plan, state, full, run) -%}
  {%- do stats.update({'fallback_reason': run.full_reason}) -%}
  {%- do incremental_joins.end_run('deduplicate', started_at, stats, run) -%}
  {{ return({'relations': [this]}) }}
{% endmaterialization %}

{#- The stored stream time of each partition (the clock rows of the state table at its pinned
    version, `pinned`), read once and returned as constants (`part`, `stream_time`), or none when
    there are none. As constants, the staged records that join them read no state table: a stage
    that reads a table is re-planned when the run writes that table (1M benchmark, 2026-11-28:
    the state write 4.4-4.8 s with the records reading the state table, 1.9-2.4 s with the
    constants, which cost a statement of 1.3 s that loads the state's snapshot, as the fold's
    stage did before). -#}
{% macro dedup_stored_times(pinned) %}
  {%- set rows = run_query('select __ij_part, cast(unix_micros(__ij_stream_time) as string) from (' ~ pinned ~ ') as s where __ij_stream_time is not null').rows -%}
  {{ return(incremental_joins.dedup_times_sql(rows) if rows else none) }}
{% endmacro %}

{#- Stream times read to the driver (rows of partition and epoch microseconds, as strings) as a
    query of constants: `part`, `stream_time`. -#}
{% macro dedup_times_sql(rows) %}
  {{ return('select part, timestamp_micros(micros) as stream_time from (' ~ incremental_joins.values_sql(rows, ['part', 'micros'], ['string', 'bigint']) ~ ') as c') }}
{% endmacro %}

{#- The dedup key columns of the store: the key columns and/or __ij_id. -#}
{% macro dedup_key_columns(cfg) %}
  {{ return(cfg.key + (['__ij_id'] if cfg.id else [])) }}
{% endmacro %}

{#- This run's records (the body over the new stream records), checked, in arrival order
    (__ij_rid), with the dedup key, event time (__ij_ts), partition and stream time (__ij_st:
    the largest event time of the partition so far, this record included). Returns the staged
    relation and the body's column names. -#}
{% macro dedup_records(cfg, inputs, plan, clock_sql) %}
  {%- set body = incremental_joins.with_inputs(sql, {'stream': incremental_joins.stream_records_sql(inputs.stream, plan)}) -%}
  {%- set schema = incremental_joins.query_schema(body) -%}
  {%- set names = schema | map('first') | list -%}
  {%- set columns = names | map('lower') | list -%}
  {%- for key, column in [('event_time', cfg.event_time), ('partition_by', cfg.partition_by)] + incremental_joins.named_columns(cfg, ['arrival_order', 'key']) if column and column | lower not in columns -%}
    {{ incremental_joins.config_error(key, column, 'is not a column of the model body (' ~ columns | join(', ') ~ ')', 'name one of those columns, or select it in the body') }}
  {%- endfor -%}
  {%- if '_ij_commit_version' not in columns -%}
    {{ incremental_joins.config_error('(body)', '_ij_commit_version', 'is dropped by the select list; arrival order and exactly-once output need it', 'select *, or keep _ij_commit_version in the select list') }}
  {%- endif -%}
  {%- set nulls = [] -%}
  {%- for k in cfg.key -%}{%- do nulls.append(adapter.quote(k) ~ ' is null') -%}{%- endfor -%}
  {%- if cfg.id -%}{%- do nulls.append('(' ~ cfg.id ~ ') is null') -%}{%- endif -%}
  {%- set part = adapter.quote(cfg.partition_by) if cfg.partition_by else "'all'" -%}
  {%- set ordered -%}
    select b.*, {{ '(' ~ cfg.id ~ ') as __ij_id, ' if cfg.id }}
      cast({{ part }} as string) as __ij_part, {{ nulls | join(' or ') }} as __ij_null_key,
      {{ incremental_joins.time_column('event_time', cfg.event_time, schema, 'the model body', 'b') }} as __ij_ts,
      cast(row_number() over (order by {{ incremental_joins.arrival_order_by(cfg, schema, 'b') }}) as bigint) as __ij_rid
    from ({{ body }}) as b
  {%- endset -%}
  {%- set with_time -%}
    {%- set running = 'max(r.__ij_ts) over (partition by r.__ij_part order by r.__ij_rid rows between unbounded preceding and current row)' %}
    select r.*, {{ 'greatest(c.stream_time, ' ~ running ~ ')' if clock_sql else running }} as __ij_st
    from ({{ ordered }}) as r
    {% if clock_sql %}left join ({{ clock_sql }}) as c on c.part <=> r.__ij_part{% endif %}
  {%- endset -%}
  {{ return({'relation': incremental_joins.stage('records', with_time), 'columns': names}) }}
{% endmacro %}

{#- One fold per dedup key over its records in arrival order (SPEC §3: each decision depends on
    the records forwarded before it), starting from the key's stored state. Returns the staged
    fold: dedup key columns, __ij_part, __ij_state (the state to store), __ij_forwarded (rids).
    A key with one record and no stored state (most keys, in a stream with few duplicates) takes
    the fold's one step as a plain expression: Spark interprets a lambda row by row (2026-11-28,
    500k of the 1M benchmark's events: the fold 2.35-2.8 s instead of 3.1-3.2 s; in its runs the
    counts, which compute the fold, 3.3-3.5 s instead of 4.0-4.2 s at 10% new, 8.5-9.9 s instead
    of 8.7-11.7 s at 50%). -#}
{% macro dedup_fold(cfg, records, store_sql) %}
  {%- set dk = incremental_joins.dedup_key_columns(cfg) -%}
  {%- set step = incremental_joins.dedup_step(cfg, 'acc.s', 'r') -%}
  {%- set first = incremental_joins.dedup_step(cfg, none, 'g.rs[0]') -%}
  {%- set fold -%}
    select {{ incremental_joins.column_list(dk, 'g') }}, g.__ij_part,
      case when size(g.rs) = 1 {{- ' and g.stored is null' if store_sql }}
        then named_struct('s', cast({{ first.next }} as {{ step.type }}), 'fwd', case when {{ first.forward }} then array(g.rs[0].rid) else cast(array() as array<bigint>) end)
        else aggregate(g.rs, named_struct('s', cast({{ 'g.stored' if store_sql else 'null' }} as {{ step.type }}), 'fwd', cast(array() as array<bigint>)),
          (acc, r) -> named_struct('s', cast({{ step.next }} as {{ step.type }}),
                                   'fwd', case when {{ step.forward }} then array_append(acc.fwd, r.rid) else acc.fwd end)) end as __ij_fold
    from (
      select {{ incremental_joins.column_list(dk, 'r') }}, r.__ij_part,
        {{ 'first(s.__ij_state) as stored,' if store_sql }}
        array_sort(collect_list(named_struct('rid', r.__ij_rid, 'ts', r.__ij_ts, 'st', r.__ij_st))) as rs
      from {{ records }} as r
      {% if store_sql %}left join ({{ store_sql }}) as s on s.__ij_part = r.__ij_part and {{ incremental_joins.keys_match(dk, 's', 'r') }}{% endif %}
      where not r.__ij_null_key
      group by all
    ) as g
  {%- endset -%}
  {{ return(incremental_joins.stage('folded', 'select * except (__ij_fold), __ij_fold.s as __ij_state, __ij_fold.fwd as __ij_forwarded from (' ~ fold ~ ') as f')) }}
{% endmacro %}

{#- One step of the fold for the record `r` (its fields rid, ts and st: event and stream time)
    from the key's state `s` (none: no state): {'type': the state's SQL type, 'forward': whether
    the record is forwarded, 'next': the state after it}. -#}
{% macro dedup_step(cfg, s, r) %}
  {%- set i = cfg.interval -%}
  {%- set type = {'interval': 'timestamp', 'tumbling': 'array<timestamp>'}.get(cfg.strategy, 'array<struct<start: timestamp, end: timestamp>>') -%}
  {%- set s = s or 'cast(null as ' ~ type ~ ')' -%}
  {%- if cfg.strategy == 'interval' -%}
    {#- state: the event time of the last stored forwarded record. Forward when there is none, it
        expired (ST - s > interval) or the record lies more than an interval before it; store
        a forwarded record unless it is late (ts < ST - interval). -#}
    {%- set forward = '(' ~ s ~ ' is null or ' ~ r ~ '.st > ' ~ s ~ ' + ' ~ i ~ ' or ' ~ s ~ ' > ' ~ r ~ '.ts + ' ~ i ~ ')' -%}
    {%- set next = 'case when ' ~ forward ~ ' and ' ~ r ~ '.ts >= ' ~ r ~ '.st - ' ~ i ~ ' then ' ~ r ~ '.ts else ' ~ s ~ ' end' -%}
  {%- elif cfg.strategy == 'tumbling' -%}
    {#- state: the start of every window that has had its first record. -#}
    {%- set w = 'timestamp_seconds(floor(unix_micros(' ~ r ~ '.ts) / unix_micros(timestamp_seconds(0) + ' ~ i ~ ')) * unix_micros(timestamp_seconds(0) + ' ~ i ~ ') / 1000000)' -%}
    {%- set forward = 'not array_contains(coalesce(' ~ s ~ ', array()), ' ~ w ~ ')' -%}
    {%- set next = 'case when ' ~ forward ~ ' then array_append(coalesce(' ~ s ~ ', array()), ' ~ w ~ ') else ' ~ s ~ ' end' -%}
  {%- else -%}
    {#- state: the key's sessions. A record within `interval` of a session (bounds inclusive)
        joins it, merging every session it touches; a record that touches none starts one and is
        forwarded. -#}
    {%- set touch = r ~ '.ts >= x.start - ' ~ i ~ ' and ' ~ r ~ '.ts <= x.end + ' ~ i -%}
    {%- set forward = 'not exists(coalesce(' ~ s ~ ', array()), x -> ' ~ touch ~ ')' -%}
    {%- set joined = 'filter(coalesce(' ~ s ~ ', array()), x -> ' ~ touch ~ ')' -%}
    {%- set merged = "named_struct('start', least(" ~ r ~ ".ts, array_min(transform(" ~ joined ~ ", x -> x.start))), 'end', greatest(" ~ r ~ ".ts, array_max(transform(" ~ joined ~ ", x -> x.end))))" -%}
    {%- set next = 'array_append(filter(coalesce(' ~ s ~ ', array()), x -> not (' ~ touch ~ ')), ' ~ merged ~ ')' -%}
  {%- endif -%}
  {{ return({'type': type, 'forward': forward, 'next': next}) }}
{% endmacro %}

{#- The run's counts and data check, then its versions pinned. Append the forwarded records —
    once: a retried run (and only it looks) finds its records already in the output (their
    _ij_source_version is in this run's range) and does not write them again, and Delta skips an
    append of the same stream version already committed (append_once: another run that repeated
    this run's pin at the same time) — then write the
    state table: the new state of each dedup key and each partition's stream time, in one write
    (one Delta table, so one snapshot to load and one commit a run). With strategy 'interval',
    entries older than stream time minus the interval are purged (SPEC §3 rule 5), so the store
    stays bounded.

    The state table's rows: store entries (dedup key columns, __ij_part, __ij_state;
    __ij_stream_time null) and one clock row per partition (__ij_part and __ij_stream_time; the
    dedup key columns and __ij_state null — no entry has a null key part, such records are never
    stored). Keys match null-safe, so a partition's new clock row replaces its old one. -#}
{% macro dedup_write(cfg, stream_records, folded, plan, state, full, run) %}
  {%- set records = stream_records.relation -%}
  {%- set dk = incremental_joins.dedup_key_columns(cfg) -%}
  {%- set key = ['__ij_part'] + dk -%}
  {#- Output columns: the body's but the package's commit_columns, with the input commit of each
      record as _ij_source_version (in place of the input's own, when the input is another
      deduplicate model's output). -#}
  {%- set user_columns, exprs, bookkeeping = [], [], incremental_joins.commit_columns() -%}
  {%- for c in stream_records.columns if not c.startswith('__ij_') and (c == '_ij_commit_version' or c | lower not in bookkeeping) -%}
    {%- set name = '_ij_source_version' if c == '_ij_commit_version' else c -%}
    {%- do user_columns.append(name) -%}
    {%- do exprs.append('r.' ~ adapter.quote(c) ~ ' as ' ~ adapter.quote(name)) -%}
  {%- endfor -%}
  {%- set forwarded = 'select ' ~ exprs | join(', ') ~ ' from ' ~ records ~ ' as r where r.__ij_null_key or r.__ij_rid in (select explode(__ij_forwarded) from ' ~ folded ~ ')' -%}
  {#- The counts, the new stream time per partition, and the check that every record has an event
      time, in one statement before the first write. The stream times are the constants that the
      expiry of new states, the store's purge and the new clock rows are written with. -#}
  {%- set read, late, forwarded_count, stored, times = incremental_joins.checked_counts(
        ['select count(*), count_if(__ij_ts < __ij_st - ' ~ cfg.interval ~ ') from ' ~ records, 'select count(*) from (' ~ forwarded ~ ') as f',
         'select 0' if full else 'select count(*) from ' ~ state,
         'select to_json(collect_list(array(part, cast(unix_micros(stream_time) as string)))) from (select __ij_part as part, max(__ij_st) as stream_time from ' ~ records ~ ' group by 1) as c'],
        [incremental_joins.rows_check(records, '__ij_ts is null', "the input has {n} records with a null event time ('" ~ cfg.event_time ~ "')",
                                      'Every record needs an event time: fill it upstream or filter such records out in the model body.')]) -%}
  {%- set existing = none if full else incremental_joins.assert_output_columns(user_columns, cfg) -%}
  {%- do incremental_joins.assert_contract(forwarded) -%}
  {%- do incremental_joins.pin_versions(run) -%}
  {%- do incremental_joins.add_output_columns(forwarded, user_columns, existing) -%}
  {%- set new_times = fromjson(times) -%}
  {%- set expired = incremental_joins.dedup_expired(cfg, 'x', new_times) -%}
  {#- Each dedup key's new state, and whether it expired (then it is not stored). -#}
  {%- set aged = 'select ' ~ incremental_joins.column_list(dk, 'x') ~ ', x.__ij_part, x.__ij_state, cast(null as timestamp) as __ij_stream_time, coalesce('
        ~ (expired or 'false') ~ ', false) as __ij_expired from ' ~ folded ~ ' as x where x.__ij_state is not null' -%}
  {%- set live = 'select * except (__ij_expired) from (' ~ aged ~ ') as a where not __ij_expired' -%}
  {#- The new clock rows, one per partition with records, as constants (a statement reading them
      reads no table). -#}
  {%- if new_times -%}
    {%- set nulls = [] -%}
    {%- for c in dk -%}{%- do nulls.append('null as ' ~ adapter.quote(c)) -%}{%- endfor -%}
    {%- set live = live ~ ' union all select ' ~ nulls | join(', ') ~ ', part as __ij_part, null as __ij_state, stream_time as __ij_stream_time from ('
          ~ incremental_joins.dedup_times_sql(new_times) ~ ') as c' -%}
  {%- endif -%}
  {%- if full -%}
    {#- An append-only output cannot be merged from a recompute: it is re-created. -#}
    {%- do incremental_joins.create_output(forwarded, [], none) -%}
    {%- set written, mode = incremental_joins.last_write_metrics(this, -1), 'full_refresh' -%}
    {%- do incremental_joins.inject_failure('after_output_merge') -%}
    {%- do incremental_joins.create_state_table(state, live, ['__ij_part']) -%}
  {%- else -%}
    {%- set mode = 'incremental' -%}
    {%- set range = '_ij_source_version > ' ~ plan.from ~ ' and _ij_source_version <= ' ~ plan.to -%}
    {%- if forwarded_count == 0 or (run.retry and incremental_joins.scalar('select count(*) from ' ~ this ~ ' where ' ~ range) > 0) -%}
      {%- call statement('main') -%}select 'nothing to append' as outcome{%- endcall -%}
      {%- set written = {'inserted': 0} -%}
    {%- else -%}
      {#- It appends exactly the forwarded records that the counts counted (both read the cached
          stages): no `describe history` before and after it for the number. -#}
      {%- call statement('main') -%}insert into {{ this }} {{ incremental_joins.append_once(plan.to) }} ({{ incremental_joins.column_list(user_columns) }}) {{ forwarded }}{%- endcall -%}
      {%- set written = {'inserted': forwarded_count} -%}
    {%- endif -%}
    {%- do incremental_joins.inject_failure('after_output_merge') -%}
  {%- endif -%}
  {#- The state changes only when records arrived. -#}
  {%- if not full and read > 0 -%}
    {#- Stale store entries: those of keys whose new state expired (they are in the source), and
        the expired entries of keys without records in this run (purged by the MERGE's pass over
        the store, against this run's stream time of their partition; a clock row, whose
        __ij_state is null, never expires). Partitions without records keep their clock row. -#}
    {%- set stale = 'select * except (__ij_expired) from (' ~ aged ~ ') as a where __ij_expired' if expired else none -%}
    {#- A store of at most replace_state_below entries is rewritten whole instead (cheaper). The
        store is created without deletion vectors (a small one is only ever rewritten whole); the
        first MERGE of a larger one turns them on (ensure_deletion_vectors). -#}
    {%- set replace = stored <= cfg.replace_state_below -%}
    {%- if not replace -%}{%- do incremental_joins.ensure_deletion_vectors(state) -%}{%- endif -%}
    {%- do incremental_joins.merge_changes(state, live, stale, key, dk + ['__ij_part', '__ij_state', '__ij_stream_time'], purge=incremental_joins.dedup_expired(cfg, 't', new_times),
                                           replace=replace) -%}
  {%- endif -%}
  {%- do incremental_joins.inject_failure('after_index_merge') -%}
  {{ return({'mode': mode, 'rows_read': read, 'rows_inserted': written.inserted,
             'dropped_duplicates': read - forwarded_count, 'late_records': late if cfg.strategy == 'interval' else 0}) }}
{% endmacro %}

{#- With strategy 'interval', whether the state of `alias`'s row expired against this run's stream
    time of its partition (`new_times`: rows of partition and epoch microseconds), as a condition
    on constants; none when nothing can expire (another strategy, or no records). -#}
{% macro dedup_expired(cfg, alias, new_times) %}
  {%- set whens = [] -%}
  {%- for part, micros in new_times -%}
    {%- do whens.append('when ' ~ incremental_joins.string_literal(part) ~ ' then timestamp_micros(' ~ micros ~ ')') -%}
  {%- endfor -%}
  {{ return(alias ~ '.__ij_state < (case ' ~ alias ~ '.__ij_part ' ~ whens | join(' ') ~ ' end) - ' ~ cfg.interval if cfg.strategy == 'interval' and whens else none) }}
{% endmacro %}
