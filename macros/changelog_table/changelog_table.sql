{#- changelog_table (SPEC §1): CDC change events (Debezium c/r/u/d, insert/update/delete) to the
    current-state table. Latest sequence per key wins; a delete removes the row and leaves a
    tombstone, so an older event arriving later changes nothing; equal sequences: the later
    arrival wins (Delta commit version, then `arrival_order`).

    resolve config → this run's events, validated → the newest event per key → keep those newer
    than the key's stored sequence → the model's contract, if enforced → pin the input version →
    MERGE output → MERGE sequences (and purge expired tombstones) → advance highwater → log. -#}
{% materialization changelog_table, adapter='spark', supported_languages=['sql'] %}
  {%- set started_at = modules.datetime.datetime.utcnow() -%}
  {%- set cfg = incremental_joins.changelog_table_config() -%}
  {%- set inputs = incremental_joins.marked_inputs(sql, ['stream'], "select * from {{ incremental_joins.stream(source('cdc', 'customers')) }}") -%}
  {%- set inputs = incremental_joins.run_inputs(inputs) -%}
  {%- if inputs is none -%}{{ return({'relations': [this]}) }}{%- endif -%}  {#- dbt --empty, the output exists -#}
  {%- set name = inputs.stream -%}
  {%- set sequences = incremental_joins.state_relation('sequences') -%}
  {%- set run = incremental_joins.begin_run([name], state=[sequences],
                                            definition=incremental_joins.model_definition(cfg, ['key', 'sequence', 'operation', 'mapping', 'arrival_order', 'payload', 'value_columns']),
                                            merged=incremental_joins.merged_queries(inputs, sql)) -%}
  {%- set plan = incremental_joins.stream_plan(name, run, cfg.append_new_columns, [cfg.payload, 'before'] if cfg.payload else []) -%}
  {%- set events = incremental_joins.changelog_events(cfg, inputs, plan) -%}
  {%- set columns = incremental_joins.assert_output_columns(cfg.key + events['values'], cfg) if plan.mode != 'unchanged' else none -%}
  {%- if plan.mode == 'unchanged' -%}
    {%- do incremental_joins.pin_versions(run) -%}
    {%- call statement('main') -%}select 'no new change events' as outcome{%- endcall -%}
    {%- set stats = {'mode': 'incremental'} -%}
  {%- else -%}
    {%- set cutoff = (plan.to_timestamp or incremental_joins.timestamp_literal(plan.to_time)) ~ ' - ' ~ cfg.tombstone_retention -%}
    {%- set stats = incremental_joins.changelog_write(cfg, events, run, sequences, cutoff, columns) -%}
  {%- endif -%}
  {%- do incremental_joins.end_run('changelog_table', started_at, stats, run) -%}
  {{ return({'relations': [this]}) }}
{% endmaterialization %}

{#- This run's events, checked before anything is written and staged as: key columns,
    __ij_seq, __ij_commit, __ij_order, __ij_commit_ts (arrival), __ij_kind (upsert or delete),
    value columns. Returns {'relation', 'values', 'recompute_sql'}. -#}
{% macro changelog_events(cfg, inputs, plan) %}
  {%- set body = incremental_joins.with_inputs(sql, {'stream': incremental_joins.stream_records_sql(inputs.stream, plan)}) -%}
  {%- set columns = incremental_joins.query_columns(body) -%}
  {%- set lower_columns = columns | map('lower') | list -%}
  {%- for key, column in [('operation', cfg.operation), ('payload', cfg.payload)] + incremental_joins.named_columns(cfg, ['sequence', 'arrival_order']) if column and column | lower not in lower_columns -%}
    {{ incremental_joins.config_error(key, column, 'is not a column of the model body (' ~ columns | join(', ') ~ ')', 'name one of those columns, or select it in the body') }}
  {%- endfor -%}
  {%- for column in ['_ij_commit_version', '_ij_commit_timestamp'] if column not in lower_columns -%}
    {{ incremental_joins.config_error('(body)', column, 'is dropped by the select list; the arrival order needs it', 'select *, or add _ij_commit_version, _ij_commit_timestamp to the select list') }}
  {%- endfor -%}

  {#- Key and value columns: top-level columns, or fields of the payload struct (a delete's key
      from `before` when the payload is null). -#}
  {%- set payload_fields = [] -%}
  {%- if cfg.payload -%}
    {%- set payload_fields = run_query('select ' ~ adapter.quote(cfg.payload) ~ '.* from (' ~ body ~ ') as b limit 0').column_names | list -%}
  {%- endif -%}
  {%- set lower_fields = payload_fields | map('lower') | list -%}
  {%- set key_exprs = [] -%}
  {%- for k in cfg.key -%}
    {%- if k | lower in lower_columns -%}{%- do key_exprs.append(adapter.quote(k) ~ ' as ' ~ adapter.quote(k)) -%}
    {%- elif k | lower in lower_fields -%}
      {%- set inner = cfg.payload ~ '.' ~ adapter.quote(k) -%}
      {%- do key_exprs.append(('coalesce(' ~ inner ~ ', before.' ~ adapter.quote(k) ~ ')' if 'before' in lower_columns else inner) ~ ' as ' ~ adapter.quote(k)) -%}
    {%- else -%}
      {{ incremental_joins.config_error('key', k, 'is not a column of the model body (' ~ columns | join(', ') ~ ')' ~ (' nor a field of ' ~ cfg.payload if cfg.payload else ''), 'name the key column(s) of the changed rows') }}
    {%- endif -%}
  {%- endfor -%}
  {%- set sequence = incremental_joins._as_list(cfg.sequence) -%}
  {#- Columns each event is read through, and with the keys those no value takes. -#}
  {%- set read_through = ([cfg.operation, cfg.payload, 'before' if cfg.payload else none] + incremental_joins._as_list(cfg.arrival_order) + incremental_joins.commit_columns()) | reject('none') | map('lower') | list -%}
  {%- set reserved = (cfg.key | map('lower') | list) + read_through -%}
  {%- set values = [] -%}
  {%- set value_exprs = [] -%}
  {%- if cfg.value_columns -%}
    {#- A listed column the event is read through would be left out of the output: said, not
        dropped silently (a key listed is held by the output anyway). -#}
    {%- for c in cfg.value_columns -%}
      {%- if c | lower not in lower_columns and c | lower not in lower_fields -%}
        {{ incremental_joins.config_error('value_columns', c, 'is not a column of the model body (' ~ columns | join(', ') ~ ')', 'list columns the body selects') }}
      {%- elif c | lower in read_through -%}
        {{ incremental_joins.config_error('value_columns', c, "is read to apply each change event (the operation, the payload, the arrival order or the package's bookkeeping), not kept as a value", 'to keep it, select it under another name in the body (e.g. ' ~ c ~ ' as last_' ~ c ~ ') and list that name') }}
      {%- endif -%}
    {%- endfor -%}
    {%- set candidates = cfg.value_columns -%}
  {%- else -%}
    {%- set candidates = (sequence if cfg.payload else []) + (payload_fields if cfg.payload else columns) -%}
  {%- endif -%}
  {%- for c in candidates if c | lower not in reserved -%}
    {%- do reserved.append(c | lower) -%}  {#- a name taken once, in any case -#}
    {%- do values.append(c) -%}
    {%- set top_level = c | lower in lower_columns and not (cfg.payload and c | lower in lower_fields and c | lower not in sequence | map('lower') | list) -%}
    {%- do value_exprs.append((adapter.quote(c) if top_level else cfg.payload ~ '.' ~ adapter.quote(c)) ~ ' as ' ~ adapter.quote(c)) -%}
  {%- endfor -%}

  {%- set kinds = [] -%}
  {%- for value, kind in cfg.mapping.items() -%}{%- do kinds.append('when ' ~ incremental_joins.string_literal(value) ~ " then '" ~ kind ~ "'") -%}{%- endfor -%}
  {%- set events_sql -%}
    select {{ key_exprs | join(', ') }},
      {{ incremental_joins.changelog_ordering(cfg.sequence) }} as __ij_seq, _ij_commit_version as __ij_commit,
      {{ incremental_joins.changelog_ordering(cfg.arrival_order) }} as __ij_order, _ij_commit_timestamp as __ij_commit_ts,
      case lower(cast({{ adapter.quote(cfg.operation) }} as string)) {{ kinds | join(' ') }} end as __ij_kind,
      cast({{ adapter.quote(cfg.operation) }} as string) as __ij_op
      {%- for e in value_exprs %}, {{ e }}{% endfor %}
    from ({{ body }}) as b
  {%- endset -%}
  {%- set events = incremental_joins.stage('events', events_sql) -%}
  {%- do incremental_joins.check_changelog_events(cfg, events) -%}
  {#- For the equals_full_recompute test: the same events, read from the input as it is then. -#}
  {%- set records_sql = incremental_joins.stream_records_sql(inputs.stream, plan) -%}
  {%- set open_records = incremental_joins.stream_records_sql(inputs.stream, {'mode': 'cdf' if plan.mode == 'cdf' else 'snapshot', 'from': -1, 'to': none, 'to_timestamp': 'current_timestamp()', 'columns': plan.columns, 'rewrites': true}) -%}
  {{ return({'relation': events, 'values': values, 'recompute_sql': events_sql.replace(records_sql, open_records)}) }}
{% endmacro %}

{#- An event's sequence or arrival order within its commit (config `sequence`, `arrival_order`):
    its column; of several, a struct of them (compared field by field), null when one of them is;
    0 when unset. -#}
{% macro changelog_ordering(config) %}
  {%- set columns = incremental_joins._as_list(config) -%}
  {%- if columns | length < 2 -%}{{ return(adapter.quote(columns[0]) if columns else '0') }}{%- endif -%}
  {%- set fields = [] -%}
  {%- for c in columns -%}{%- do fields.append("'c" ~ loop.index ~ "', " ~ adapter.quote(c)) -%}{%- endfor -%}
  {{ return('case when ' ~ incremental_joins.any_null(columns) ~ ' then null else named_struct(' ~ fields | join(', ') ~ ') end') }}
{% endmacro %}

{#- Bad data fails before anything is written: an operation the mapping does not know, a null
    sequence, key or arrival order. -#}
{% macro check_changelog_events(cfg, events) %}
  {%- set keys = incremental_joins.column_list(cfg.key) -%}
  {%- set row = run_query(
      "select count_if(__ij_kind is null), array_join(slice(array_sort(collect_set(coalesce(__ij_op, 'null')) filter (where __ij_kind is null)), 1, 5), ', '),"
      ~ " count_if(__ij_seq is null), to_json(first(struct(" ~ keys ~ ")) filter (where __ij_seq is null)),"
      ~ " count_if(" ~ incremental_joins.any_null(cfg.key) ~ "), count_if(__ij_order is null), to_json(first(struct(" ~ keys ~ ")) filter (where __ij_order is null))"
      ~ " from " ~ events).rows[0] -%}
  {%- set problem = none -%}
  {%- if row[0] > 0 -%}
    {%- set problem = "has operation values that config 'operation_mapping' does not map: " ~ row[1] ~ " (mapping: " ~ tojson(cfg.mapping) ~ "). Add them to operation_mapping as upsert, delete or ignore, e.g. operation_mapping={'c': 'upsert', 'u': 'upsert', 'd': 'delete', 't': 'ignore'}" -%}
  {%- elif row[2] > 0 -%}
    {%- set problem = "has " ~ row[2] ~ " change events with a null sequence ('" ~ incremental_joins._as_list(cfg.sequence) | join(', ') ~ "'), e.g. key " ~ row[3] ~ ". Every event needs a sequence to be ordered: fill it upstream, or choose another 'sequence' column" -%}
  {%- elif row[4] > 0 -%}
    {%- set problem = "has " ~ row[4] ~ " change events with a null key (" ~ cfg.key | join(', ') ~ "). Filter them out in the model body, or fix 'key'" -%}
  {%- elif row[5] > 0 -%}
    {%- set problem = "has " ~ row[5] ~ " change events with a null arrival order ('" ~ incremental_joins._as_list(cfg.arrival_order) | join(', ') ~ "'), e.g. key " ~ row[6] ~ ". Fill it upstream or unset 'arrival_order'" -%}
  {%- endif -%}
  {%- if problem -%}
    {{ exceptions.raise_compiler_error(model.name ~ ': the input ' ~ problem ~ '. Nothing was written.') }}
  {%- endif -%}
{% endmacro %}

{#- Newest event per key among this run's events; then, incrementally, only those newer than the
    key's stored sequence (ties on the sequence: the later arrival wins). Writes the output and
    the sequence state change-minimally. -#}
{% macro changelog_write(cfg, events, run, sequences, cutoff, columns) %}
  {%- set full_reason = run.full_reason -%}
  {%- set keys = cfg.key -%}
  {%- set key_list = incremental_joins.column_list(keys) -%}
  {%- set value_list = incremental_joins.column_list(events['values']) -%}
  {%- set state_columns = keys + ['__ij_seq', '__ij_commit', '__ij_order', '__ij_commit_ts', '__ij_deleted'] -%}
  {%- set newest_sql = incremental_joins.newest_events_sql(keys, events['values'], events.relation) -%}
  {%- set newest = incremental_joins.stage('newest', newest_sql) -%}
  {%- set schema = incremental_joins.query_schema('select ' ~ key_list ~ (', ' ~ value_list if events['values'] else '') ~ ' from ' ~ newest) -%}
  {%- set key_schema, uncomparable = schema[:keys | length], incremental_joins.uncomparable(schema) -%}
  {%- set counts = run_query(incremental_joins.one_row(['select count(*) from ' ~ events.relation, 'select count(*), ' ~ incremental_joins.key_range_sql(key_schema) ~ ' from ' ~ newest])).rows[0] -%}
  {%- set output_sql = 'select ' ~ key_list ~ (', ' ~ value_list if events['values'] else '') ~ ' from ' -%}
  {%- set state_sql = 'select ' ~ key_list ~ ", __ij_seq, __ij_commit, __ij_order, __ij_commit_ts, __ij_kind = 'delete' as __ij_deleted from " -%}
  {%- set expired = "__ij_kind = 'delete' and __ij_commit_ts < " ~ cutoff -%}

  {%- if full_reason is none -%}
    {#- Equal to the stored state (sequence, commit, arrival order) is the same event, read again
        by a run retried after its sequences' MERGE committed: applied again (the writes change
        nothing then), so that the retry's run log counts it as the interrupted run would have. -#}
    {%- set newer = "s.__ij_seq is null or n.__ij_seq > s.__ij_seq or (n.__ij_seq = s.__ij_seq and (n.__ij_commit > s.__ij_commit or (n.__ij_commit = s.__ij_commit and n.__ij_order >= s.__ij_order)))" -%}
    {#- The run's keys' range, as literals, lets Delta skip the files of the sequences and of
        the output that hold none of them (key_range). -#}
    {%- set bounds = incremental_joins.key_range(key_schema, counts[2], 't') -%}
    {%- set in_range = ' where ' ~ bounds if bounds else '' -%}
    {%- set applied = incremental_joins.stage('applied', 'select n.* from ' ~ newest ~ ' as n left join (select * from ' ~ sequences ~ ' as t' ~ in_range ~ ') as s on ' ~ incremental_joins.keys_match(keys, 'n', 's') ~ ' where ' ~ newer) -%}
    {#- A retried run's MERGEs may change nothing (the interrupted run's did): its count, before them. -#}
    {%- set retried_count = incremental_joins.scalar('select count(*) from ' ~ applied) if run.retry else none -%}
  {%- endif -%}
  {#- The rows the output gets; versions pinned after their contract checks. -#}
  {%- set upserts = output_sql ~ (applied if full_reason is none else newest) ~ " where __ij_kind = 'upsert'" -%}
  {%- do incremental_joins.assert_contract(upserts) -%}
  {%- do incremental_joins.pin_versions(run) -%}
  {%- set columns = incremental_joins.add_output_columns(upserts, keys + events['values'], columns) -%}
  {%- if full_reason is none -%}
    {%- set written = incremental_joins.merge_changes(this, upserts,
          'select t.* from ' ~ this ~ ' as t left semi join (select * from ' ~ applied ~ " where __ij_kind = 'delete') as d on " ~ incremental_joins.keys_match(keys, 't', 'd') ~ in_range,
          keys, keys + events['values'], 'main', target_range=bounds, uncomparable=uncomparable) -%}
    {%- do incremental_joins.inject_failure('after_output_merge') -%}
    {#- Tombstones past retention go in the same MERGE: those of keys without events in this run
        (the others take their new state). -#}
    {%- set stored = incremental_joins.merge_changes(sequences, state_sql ~ applied, none, keys, state_columns, purge='t.__ij_deleted and t.__ij_commit_ts < ' ~ cutoff) -%}
    {#- The applied events, from that MERGE's counts: each is newer than its key's stored state
        (sequence, then arrival), so it inserts or updates exactly one row of it; the purge only
        deletes. Not a count of `applied` after the MERGE: Spark computes a staged view again after
        a write to a table it reads, and every applied event then equals the stored state. -#}
    {%- set applied_count = stored.inserted + stored.updated if retried_count is none else retried_count -%}
    {%- set mode = 'incremental' -%}
  {%- else -%}
    {%- set recompute = output_sql ~ '(' ~ incremental_joins.newest_events_sql(keys, events['values'], '(' ~ events.recompute_sql ~ ') as e') ~ ") as n where __ij_kind = 'upsert'" -%}
    {%- set written, mode = incremental_joins.write_all(upserts, keys, recompute, columns, uncomparable=uncomparable) -%}
    {%- do incremental_joins.inject_failure('after_output_merge') -%}
    {%- do incremental_joins.create_state_table(sequences, state_sql ~ newest ~ ' where not (' ~ expired ~ ')', keys, merged=true) -%}
    {%- set applied_count = counts[1] -%}
  {%- endif -%}
  {%- do incremental_joins.inject_failure('after_index_merge') -%}
  {{ return({'mode': mode, 'fallback_reason': full_reason, 'rows_read': counts[0], 'affected_keys': applied_count,
             'late_records': counts[1] - applied_count,
             'rows_inserted': written.inserted, 'rows_updated': written.updated, 'rows_deleted': written.deleted}) }}
{% endmacro %}

{#- The newest event per key (sequence, then arrival; an exact tie by the event's content, so the
    choice is deterministic). -#}
{% macro newest_events_sql(keys, values, events) %}
  {%- set content = 'to_json(struct(__ij_kind' ~ (', ' ~ incremental_joins.column_list(values) if values else '') ~ '))' -%}
  {{ return('select * except (__ij_rank) from (select *, row_number() over (partition by ' ~ incremental_joins.column_list(keys)
            ~ ' order by __ij_seq desc, __ij_commit desc, __ij_order desc, ' ~ content ~ ' desc) as __ij_rank from ' ~ events
            ~ " where __ij_kind <> 'ignore') as ranked where __ij_rank = 1") }}
{% endmacro %}
