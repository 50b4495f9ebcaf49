{#- stream_table_join (KIP-923; SPEC §4): each stream record joined to the table as of its own
    event time, appended to the output exactly once.

    The table side is kept as a versioned history (`<model>__ij_history`: one row per key and
    timestamp, tombstones included) for `history_retention`; without a retention the table is
    unversioned and a record sees the key's latest row. With `grace_period`, records wait in
    `<model>__ij_buffer` until stream time has passed them by the grace period; `<model>__ij_clock`
    shows stream time, table time and the horizon.

    Runs are the unit of interleaving: all table changes of a run are applied before its stream
    records are joined. The whole computation is set-based over "cuts" (the input versions each
    run read): an incremental run is one cut on top of the stored state; a full refresh replays
    the recorded cuts from empty state (when both inputs' change feeds reach back to their
    creation), so it gives the output the incremental runs gave.

    resolve config → pin input and state versions → cuts → table changes (accepted or older than
    the horizon) → stream records (dropped, late, buffered) → which cut emits each record → as-of
    lookup → append once → MERGE history (purged) and buffer, replace clock → advance highwater. -#}
{% materialization stream_table_join, adapter='spark', supported_languages=['sql'] %}
  {%- set started_at = modules.datetime.datetime.utcnow() -%}
  {%- set cfg = incremental_joins.stream_table_join_config() -%}
  {%- set inputs = incremental_joins.marked_inputs(sql, ['stream', 'table'], "select s.*, t.price from {{ incremental_joins.as_of_join(ref('orders'), ref('prices')) }}") -%}
  {%- set inputs = incremental_joins.run_inputs(inputs) -%}
  {%- if inputs is none -%}{{ return({'relations': [this]}) }}{%- endif -%}  {#- dbt --empty, the output exists -#}
  {%- set st = {'history': incremental_joins.state_relation('history'), 'buffer': incremental_joins.state_relation('buffer'),
                'clock': incremental_joins.state_relation('clock'), 'cuts': incremental_joins.state_relation('runs')} -%}
  {#- The history (MERGEd) keeps the table's columns, the buffer (MERGEd, with a grace period) the stream's; the output is appended. -#}
  {%- set run = incremental_joins.begin_run([inputs.stream, inputs.table], state=[st.history, st.buffer, st.clock, this], pin_state=true, sole=true,
                                            merged=incremental_joins.merged_queries(inputs if cfg.grace else {'table': inputs.table})) -%}
  {%- set full = run.full_reason is not none -%}
  {%- set plans = {} -%}
  {%- for side in ['stream', 'table'] -%}
    {%- do plans.update({side: incremental_joins.stream_plan(inputs[side], run, cfg.append_new_columns)}) -%}
  {%- endfor -%}
  {%- set cuts = incremental_joins.stj_cuts(inputs, run.versions, plans, full, st.cuts) -%}
  {%- set pinned = {} -%}
  {%- for name in ['history', 'buffer', 'clock'] -%}
    {%- do pinned.update({name: none if full else incremental_joins.pinned(st[name], run.versions[st[name] | string])}) -%}
  {%- endfor -%}
  {%- set clock = {'st': 'cast(null as timestamp)', 'tst': 'cast(null as timestamp)'} -%}
  {%- if not full -%}
    {%- do clock.update({'st': '(select stream_time from (' ~ pinned.clock ~ ') as c)', 'tst': '(select table_time from (' ~ pinned.clock ~ ') as c)'}) -%}
  {%- endif -%}
  {%- set changes = incremental_joins.stj_table_changes(cfg, inputs.table, plans.table, cuts, clock.tst) -%}
  {%- set records = incremental_joins.stj_stream_records(cfg, inputs.stream, plans.stream, cuts, clock.st) -%}
  {%- set grown = {} -%}
  {%- if cfg.append_new_columns and not full -%}
    {#- State written before a column was added to an input lacks it (or, added since, holds it
        last): read by name, with null in it; this run's additions go into the state tables too. -#}
    {%- set history_columns = incremental_joins.query_schema('select * except (__ij_run, __ij_accepted) from ' ~ changes) -%}
    {%- do pinned.update({'history': incremental_joins.with_columns(pinned.history, history_columns)}) -%}
    {%- if plans.table.get('added') -%}{%- do grown.update({'history': history_columns}) -%}{%- endif -%}
    {%- if cfg.grace -%}
      {%- do pinned.update({'buffer': incremental_joins.with_columns(pinned.buffer, records.schema)}) -%}
      {%- if plans.stream.get('added') -%}{%- do grown.update({'buffer': records.schema}) -%}{%- endif -%}
    {%- endif -%}
  {%- endif -%}
  {%- set flow = incremental_joins.stj_flow(cfg, cuts, changes, records, pinned, clock) -%}
  {%- set stats = incremental_joins.stj_write(cfg, inputs, flow, st, full, run, grown) -%}
  {%- do stats.update({'fallback_reason': run.full_reason ~ (' (' ~ cuts.note ~ ')' if cuts.note else '') if full else none}) -%}
  {%- do incremental_joins.end_run('stream_table_join', started_at, stats, run) -%}
  {{ return({'relations': [this]}) }}
{% endmaterialization %}

{#- The FROM clause of a stream_table_join model: the stream joined to the table on the key, as
    of each record's event time. The model body is an ordinary select list:

        select s.order_id, s.product_id, s.ordered_at, t.price
        from {{ incremental_joins.as_of_join(ref('orders'), ref('prices')) }}

    Run as it is, the body joins the table's current rows; the materialization puts the emitted
    records and the table version each one looked up in place of the two relations. In a dbt unit
    test it is one run over the given rows (stj_unit_test_join). -#}
{% macro as_of_join(stream, table, stream_alias='s', table_alias='t') %}
  {%- if not execute -%}{{ return(stream ~ ' as ' ~ stream_alias ~ ' cross join ' ~ table ~ ' as ' ~ table_alias) }}{%- endif -%}
  {%- set cfg = incremental_joins.stream_table_join_config() -%}
  {%- set on = [] -%}
  {%- for k in cfg.key -%}
    {%- do on.append(stream_alias ~ '.' ~ adapter.quote(k) ~ ' = ' ~ table_alias ~ '.' ~ adapter.quote(cfg.table_key[loop.index0])) -%}
  {%- endfor -%}
  {%- if incremental_joins.unit_tested_config() is not none -%}
    {{ return(incremental_joins.stj_unit_test_join(cfg, stream, table, stream_alias, table_alias, on)) }}
  {%- endif -%}
  /*ij:stream*/ {{ stream }} as {{ stream_alias }}
  {{ 'left outer' if cfg.join_type == 'left' else 'inner' }} join /*ij:table*/ {{ table }} as {{ table_alias }}
    on /*ij:on {{ stream_alias }} {{ table_alias }}*/ {{ on | join(' and ') }} /*ij:end*/
{% endmacro %}

{#- as_of_join in a dbt unit test (`unit_tests:`): one run from empty state over the given rows,
    as one select (SPEC §4). The table's rows are its keys' only versions (a row flagged by
    `table_deleted` is a delete); the stream's records are dropped as a run drops them
    (stj_dropped); with a grace period only the kept records at or before the run's stream time
    minus the grace period are emitted (the later ones stay buffered); each joins its key's row as
    of its event time (versioned: the row if its `table_time` is not after it) or, unversioned, the
    key's row. -#}
{% macro stj_unit_test_join(cfg, stream, table, s, t, on) %}
  {%- set et = adapter.quote(cfg.event_time) -%}
  {%- set kept = '(select * from ' ~ stream ~ ' as __r where not (' ~ incremental_joins.stj_dropped(cfg, none, '__r') ~ '))' -%}
  {%- set emitted = ' where ' ~ et ~ ' <= (select max(' ~ et ~ ') from ' ~ kept ~ ' as __m) - ' ~ cfg.grace.sql if cfg.grace else '' -%}
  {%- set as_of = ' and ' ~ t ~ '.' ~ adapter.quote(cfg.table_time) ~ ' <= ' ~ s ~ '.' ~ et if cfg.retention else '' -%}
  {%- set live = ' where not coalesce(' ~ cfg.table_deleted ~ ', false)' if cfg.table_deleted else '' -%}
  {{ return('(select * from ' ~ kept ~ ' as __k' ~ emitted ~ ') as ' ~ s
            ~ (' left outer' if cfg.join_type == 'left' else ' inner') ~ ' join (select * from ' ~ table ~ ' as __v' ~ live ~ ') as ' ~ t
            ~ ' on ' ~ on | join(' and ') ~ as_of) }}
{% endmacro %}

{#- The cuts this run computes: {'sql': rows (run, stream_version, table_version) numbered from
    1, 'count': n, 'replay': whether runs are told apart by commit version, 'note': why a full
    refresh could not replay}. Incremental: one cut, this run's versions (run 0 is the stored
    state). Full refresh: the recorded cuts of earlier runs, then this run's versions. -#}
{% macro stj_cuts(inputs, versions, plans, full, cuts_relation) %}
  {%- set sv, tv = versions[inputs.stream], versions[inputs.table] -%}
  {%- set rows = [] -%}
  {%- set note = none -%}
  {%- if full and load_cached_relation(cuts_relation) -%}
    {%- set stored = run_query('select distinct stream_version, table_version from ' ~ cuts_relation ~ " where stream = '" ~ inputs.stream ~ "' and input_table = '" ~ inputs.table ~ "' order by stream_version, table_version").rows -%}
    {%- set recreated = stored | selectattr(0, 'gt', sv) | list + stored | selectattr(1, 'gt', tv) | list -%}
    {%- if recreated -%}
      {%- set note = 'an input was re-created since the recorded runs; treated as one run' -%}
    {%- elif stored and (plans.stream.mode != 'cdf' or plans.table.mode != 'cdf') -%}
      {%- set note = 'the change data feed of an input does not reach back to its creation; the inputs are treated as one run' -%}
    {%- else -%}
      {%- for r in stored if [r[0], r[1]] != [sv, tv] -%}{%- do rows.append([r[0], r[1]]) -%}{%- endfor -%}
    {%- endif -%}
  {%- endif -%}
  {%- do rows.append([sv, tv]) -%}
  {%- set values = [] -%}
  {%- for r in rows -%}{%- do values.append('(' ~ loop.index ~ ', cast(' ~ r[0] ~ ' as bigint), cast(' ~ r[1] ~ ' as bigint))') -%}{%- endfor -%}
  {{ return({'sql': 'select col1 as run, col2 as stream_version, col3 as table_version from values ' ~ values | join(', '),
             'count': rows | length, 'note': note, 'current': [sv, tv]}) }}
{% endmacro %}

{#- The cut a commit version belongs to: the first cut whose version of `side` reaches it. -#}
{% macro stj_cut_of(cuts, side, version_sql) %}
  {%- if cuts.count == 1 -%}{{ return('1') }}{%- endif -%}
  {{ return('(select min(c.run) from (' ~ cuts.sql ~ ') as c where c.' ~ side ~ '_version >= ' ~ version_sql ~ ')') }}
{% endmacro %}

{#- The table's changes in this run's range: every row a commit inserts or updates is a version
    (an append-only history table's commit may hold several versions of a key, as a first read of
    the whole table does), and a deleted row, or an updated row's old image, a tombstone only when
    its commit leaves its key no row (an overwrite's delete and re-insert of a key count as its new
    row; an update that changes a row's key takes the old key away, as a diff of two versions
    finds): the table's columns plus __ij_ts (the change's timestamp: table_time; a hard delete's
    or a key taken away by an update is its commit time), __ij_tomb, __ij_cv (commit),
    __ij_run (cut) and __ij_accepted (false for a change older than the horizon at its arrival,
    within one commit, changes count as arriving in timestamp order; and for a change whose key
    has a null part: no stream record's key equals it, and Kafka Streams' table source drops a
    null-key record before the versioned store sees its time, so it neither enters the history
    nor moves the table time and the horizon). -#}
{% macro stj_table_changes(cfg, name, plan, cuts, tst0) %}
  {%- set ts = cfg.table_time and incremental_joins.time_column('table_time', cfg.table_time, incremental_joins.query_schema('select * from ' ~ name), 'the table input ' ~ name, 'c') -%}
  {%- set deleted = 'coalesce(' ~ cfg.table_deleted ~ ', false)' if cfg.table_deleted else 'false' -%}
  {%- set keys = incremental_joins.column_list(cfg.table_key) -%}
  {%- if plan.mode == 'cdf' -%}
    {%- set raw -%}
      select * except (_change_type, _commit_version, _commit_timestamp, __ij_gone, __ij_pref) from (
        select c.*,
          case when __ij_gone then _commit_timestamp else {{ ts or '_commit_timestamp' }} end as __ij_ts,
          __ij_gone or {{ deleted }} as __ij_tomb, _commit_version as __ij_cv,
          row_number() over (partition by {{ keys }}, _commit_version order by __ij_gone) as __ij_pref
        from (select *, _change_type in ('delete', 'update_preimage') as __ij_gone from {{ incremental_joins.table_changes_sql(name, plan.from, plan.to) }}) as c
      ) as c where not __ij_gone or __ij_pref = 1
    {%- endset -%}
  {%- else -%}
    {%- set now = 'select *, ' ~ (ts or plan.to_timestamp) ~ ' as __ij_ts, ' ~ deleted ~ ' as __ij_tomb, cast(' ~ (plan.to if plan.to is not none else -1) ~ ' as bigint) as __ij_cv from ' -%}
    {%- if plan.mode == 'unchanged' -%}
      {%- set raw = now ~ name ~ ' as c where false' -%}
    {%- elif plan.mode == 'snapshot' -%}
      {%- set raw = now ~ '(' ~ incremental_joins.pinned(name, plan.to) ~ ') as c' -%}
    {%- else -%}
      {%- set raw -%}
        {%- set older = incremental_joins.older_version(name, plan.from, plan) %}
        {{ now }} ({{ incremental_joins.rows_except('select * from ' ~ name ~ ' version as of ' ~ plan.to, older, plan.columns) }}) as c
        union all
        select o.*, {{ plan.to_timestamp }}, true, cast({{ plan.to }} as bigint)
        from ({{ older }}) as o left anti join {{ name }} version as of {{ plan.to }} as n on {{ incremental_joins.keys_match(cfg.table_key, 'o', 'n') }}
      {%- endset -%}
    {%- endif -%}
  {%- endif -%}
  {%- set keyed = 'not ' ~ incremental_joins.any_null(cfg.table_key) -%}
  {%- set earlier = 'greatest(' ~ tst0 ~ ', max(case when ' ~ keyed ~ ' then __ij_ts end) over (order by __ij_cv range between unbounded preceding and 1 preceding))' -%}
  {%- set changes -%}
    select c.*, {{ incremental_joins.stj_cut_of(cuts, 'table', 'c.__ij_cv') }} as __ij_run,
      {{ keyed }}{{ (' and coalesce(c.__ij_ts >= ' ~ earlier ~ ' - ' ~ cfg.retention.sql ~ ', true)') if cfg.retention else '' }} as __ij_accepted
    from ({{ raw }}) as c
  {%- endset -%}
  {{ return(incremental_joins.stage('changes', changes)) }}
{% endmacro %}

{#- Whether a stream record is dropped (SPEC §4): its value is null — every one of
    `value_columns`, else every column of `columns` but the key, the event time, the arrival
    order and the package's commit_columns — or, in an inner join, its key is. With `columns`
    none (a dbt unit test, whose given rows cannot be described apart from its query), the
    columns are those of the row `alias` itself. Columns qualified by `alias` when given. -#}
{% macro stj_dropped(cfg, columns, alias=none) %}
  {%- set q = alias ~ '.' if alias else '' -%}
  {%- set fixed = (cfg.key + [cfg.event_time] + incremental_joins._as_list(cfg.arrival_order) + incremental_joins.commit_columns()) | map('lower') | list -%}
  {%- if cfg.value_columns or columns is not none -%}
    {%- set nulls = [] -%}
    {%- for c in cfg.value_columns or columns if cfg.value_columns or c | lower not in fixed -%}{%- do nulls.append(q ~ adapter.quote(c) ~ ' is null') -%}{%- endfor -%}
    {%- set drop = ['(' ~ (nulls | join(' and ') or 'false') ~ ')'] -%}
  {%- else -%}
    {%- set values = "map_filter(from_json(to_json(struct(" ~ q ~ "*), map('ignoreNullFields', 'false')), 'map<string, string>'), (k, v) -> lower(k) not in ('" ~ fixed | join("', '") ~ "'))" -%}
    {%- set drop = ['(size(' ~ values ~ ') > 0 and forall(map_values(' ~ values ~ '), v -> v is null))'] -%}
  {%- endif -%}
  {%- if cfg.join_type == 'inner' -%}
    {%- do drop.append(incremental_joins.any_null(cfg.key, alias)) -%}
  {%- endif -%}
  {{ return(drop | join(' or ')) }}
{% endmacro %}

{#- The stream's new records in arrival order (__ij_rid), with their event time (__ij_ts), cut
    (__ij_run), whether they are dropped (a null value; a null key in an inner join) and, among
    the kept ones, whether they are late (event time before stream time minus the grace period;
    stream time = the largest event time of the kept records before it). Returns the staged
    relation and the columns of a record as the output and the buffer hold it (the input's, then
    __ij_ts and __ij_rid): their names, and as `schema` [name, type] pairs. -#}
{% macro stj_stream_records(cfg, name, plan, cuts, st0) %}
  {%- set body = incremental_joins.stream_records_sql(name, plan) -%}
  {%- set schema = incremental_joins.query_schema(body) -%}
  {%- set columns = schema | map('first') | list -%}
  {%- set lowered = columns | map('lower') | list -%}
  {%- for key, column in [('event_time', cfg.event_time)] + incremental_joins.named_columns(cfg, ['arrival_order', 'key', 'value_columns']) if column and column | lower not in lowered -%}
    {{ incremental_joins.config_error(key, column, 'is not a column of the stream input ' ~ name ~ ' (' ~ columns | join(', ') ~ ')', 'name one of those columns') }}
  {%- endfor -%}
  {%- set numbered -%}
    select r.*, {{ incremental_joins.time_column('event_time', cfg.event_time, schema, 'the stream input ' ~ name, 'r') }} as __ij_ts,
      cast(row_number() over (order by {{ incremental_joins.arrival_order_by(cfg, schema, 'r') }}) as bigint) as __ij_rid,
      {{ incremental_joins.stj_cut_of(cuts, 'stream', 'r._ij_commit_version') }} as __ij_run,
      {{ incremental_joins.stj_dropped(cfg, columns) }} as __ij_drop
    from ({{ body }}) as r
  {%- endset -%}
  {%- set late = ('coalesce(__ij_ts < greatest(' ~ st0 ~ ', max(case when not __ij_drop then __ij_ts end) over (order by __ij_rid rows between unbounded preceding and 1 preceding)) - ' ~ cfg.grace.sql ~ ', false)') if cfg.grace else 'false' -%}
  {{ return({'relation': incremental_joins.stage('records', 'select n.*, not __ij_drop and ' ~ late ~ ' as __ij_late from (' ~ numbered ~ ') as n'),
             'columns': columns + ['__ij_ts', '__ij_rid'], 'schema': schema + [['__ij_ts', 'timestamp'], ['__ij_rid', 'bigint']]}) }}
{% endmacro %}

{#- The run as sets: per cut its stream time and table time; which cut emits each kept record (a
    late one at arrival; a buffered one, stored or new, at the first cut whose stream time minus
    the grace period reaches it; none: it stays buffered); the table version each emitted record
    looks up; the history after the run (same key and timestamp: the later arrival; purged up
    to the horizon). Returns the staged names and the output's select. -#}
{% macro stj_flow(cfg, cuts, changes, stream_records, pinned, clock) %}
  {%- set records = stream_records.relation -%}
  {%- set tk = incremental_joins.column_list(cfg.table_key) -%}
  {%- set cut_times -%}
    select c.*,
      greatest({{ clock.st }}, max(s.mx) over (order by c.run rows between unbounded preceding and current row)) as st,
      greatest({{ clock.tst }}, max(t.mx) over (order by c.run rows between unbounded preceding and current row)) as tst
    from ({{ cuts.sql }}) as c
    left join (select __ij_run, max(__ij_ts) as mx from {{ records }} where not __ij_drop group by 1) as s on s.__ij_run = c.run
    left join (select __ij_run, max(__ij_ts) as mx from {{ changes }} where __ij_accepted group by 1) as t on t.__ij_run = c.run
  {%- endset -%}
  {%- set rt = incremental_joins.stage('cut_times', cut_times) -%}
  {%- set cols = incremental_joins.column_list(stream_records.columns) -%}
  {%- set kept -%}
    select {{ cols }}, __ij_run, __ij_late from {{ records }} where not __ij_drop
    {% if pinned.buffer and cfg.grace %}union all select {{ cols }}, 0, false from ({{ pinned.buffer }}) as b{% endif %}
  {%- endset -%}
  {%- if cfg.grace -%}
    {%- set candidates -%}
      with x as ({{ kept }}),
      e as (
        select x._ij_commit_version as cv, x.__ij_rid as rid, min(c.run) as emit
        from x join {{ rt }} as c on c.run >= greatest(x.__ij_run, 1) and c.st - {{ cfg.grace.sql }} >= x.__ij_ts
        where not x.__ij_late group by 1, 2
      )
      select x.*, case when x.__ij_late then x.__ij_run else e.emit end as __ij_emit_run
      from x left join e on e.cv = x._ij_commit_version and e.rid = x.__ij_rid
    {%- endset -%}
  {%- else -%}
    {%- set candidates = 'select x.*, x.__ij_run as __ij_emit_run from (' ~ kept ~ ') as x' -%}
  {%- endif -%}
  {%- set candidates = incremental_joins.stage('candidates', candidates) -%}
  {#- Emitted records, numbered in release order: (event time, key, arrival). -#}
  {%- set emitted = incremental_joins.stage('emitted', 'select x.*, row_number() over (order by __ij_emit_run, __ij_ts, ' ~ incremental_joins.column_list(cfg.key) ~ ', _ij_commit_version, __ij_rid) as __ij_rec from ' ~ candidates ~ ' as x where __ij_emit_run is not null') -%}
  {#- Table versions: the stored history (cut 0) and this run's accepted changes. -#}
  {%- set versions = 'select * except (__ij_accepted) from ' ~ changes ~ ' where __ij_accepted' -%}
  {%- if pinned.history -%}{%- set versions = 'select *, 0 as __ij_run from (' ~ pinned.history ~ ') as h union all ' ~ versions -%}{%- endif -%}
  {%- set versions = '(' ~ versions ~ ')' -%}
  {#- As-of lookup (SPEC §4): the latest version at or before the record's time among those
      applied by its cut; before the horizon, the key's latest version if it is not newer. -#}
  {%- set on = [] -%}
  {%- for k in cfg.key -%}{%- do on.append('e.' ~ adapter.quote(k) ~ ' = v.' ~ adapter.quote(cfg.table_key[loop.index0])) -%}{%- endfor -%}
  {%- if cfg.retention -%}
    {%- set visible = 'and (e.__ij_ts < c.tst - ' ~ cfg.retention.sql ~ ' or v.__ij_ts <= e.__ij_ts)' -%}
    {%- set newest = 'v.__ij_ts desc, v.__ij_run desc, v.__ij_cv desc' -%}
    {%- set found = 'not __ij_tomb and __ij_ts <= __ij_at' -%}
  {%- else -%}
    {%- set visible, newest, found = '', 'v.__ij_run desc, v.__ij_cv desc, v.__ij_ts desc', 'not __ij_tomb' -%}
  {%- endif -%}
  {%- set matched -%}
    select * except (__ij_ts, __ij_tomb, __ij_cv, __ij_run, __ij_pick, __ij_at) from (
      select e.__ij_rec, e.__ij_ts as __ij_at, v.*, row_number() over (partition by e.__ij_rec order by {{ newest }}) as __ij_pick
      from {{ emitted }} as e join {{ rt }} as c on c.run = e.__ij_emit_run
      join {{ versions }} as v on {{ on | join(' and ') }} and v.__ij_run <= e.__ij_emit_run {{ visible }}
    ) as l where __ij_pick = 1 and {{ found }}
  {%- endset -%}
  {#- The history after the run: one row per key and timestamp (the later arrival); versioned,
      a version whose validity ended at or before the horizon is purged unless it is the key's
      latest; unversioned, only each key's latest live row stays (of one commit's rows, the one with
      the latest table_time: they count as arriving in that order). An incremental run computes it
      for the stored rows in play only (stj_in_play); the others stay as they are. -#}
  {%- if pinned.history -%}
    {%- set versions = '(select *, 0 as __ij_run from (' ~ incremental_joins.stj_in_play(cfg, pinned.history, changes, rt) ~ ') as h union all select * except (__ij_accepted) from ' ~ changes ~ ' where __ij_accepted)' -%}
  {%- endif -%}
  {%- if cfg.retention -%}
    {%- set history -%}
      select * except (__ij_next) from (
        select v.*, lead(__ij_ts) over (partition by {{ tk }} order by __ij_ts) as __ij_next
        from (select * from {{ versions }} qualify row_number() over (partition by {{ tk }}, __ij_ts order by __ij_run desc, __ij_cv desc) = 1) as v
      ) as h where __ij_next is null or __ij_next > (select max(tst) from {{ rt }}) - {{ cfg.retention.sql }}
    {%- endset -%}
  {%- else -%}
    {%- set history = 'select * from ' ~ versions ~ ' qualify row_number() over (partition by ' ~ tk ~ ' order by __ij_run desc, __ij_cv desc, __ij_ts desc) = 1 and not __ij_tomb' -%}
  {%- endif -%}
  {{ return({'records': records, 'changes': changes, 'rt': rt, 'candidates': candidates, 'emitted': emitted, 'matched': matched,
             'history_sql': history}) }}
{% endmacro %}

{#- The stored history rows (`rows`, a query of them) that this run's history write can change:
    the versions of keys with an accepted table change in the run and, versioned, those at or
    before the run's new horizon — a version is purged when the next one of its key is at or before
    the horizon, so it lies there too (and the window over these rows finds that next version
    whenever it does). Every other stored row stays as it is. Computing the history after the run
    from all stored rows instead (a window over every version) made the history's MERGE at 10M
    (1.6M stored versions, 0.1–1% of keys changed) spend 3.6–5.3 s materializing its source. -#}
{% macro stj_in_play(cfg, rows, changes, rt) %}
  {%- set keys = 'select distinct ' ~ incremental_joins.column_list(cfg.table_key) ~ ', true as __ij_changed from ' ~ changes ~ ' where __ij_accepted' -%}
  {%- set sql = 'select r.* from (' ~ rows ~ ') as r left join (' ~ keys ~ ') as k on ' ~ incremental_joins.keys_match(cfg.table_key, 'r', 'k') -%}
  {%- if cfg.retention -%}
    {{ return(sql ~ ' cross join (select max(tst) - ' ~ cfg.retention.sql ~ ' as __ij_hz from ' ~ rt ~ ') as z where k.__ij_changed or r.__ij_ts <= z.__ij_hz') }}
  {%- endif -%}
  {{ return(sql ~ ' where k.__ij_changed') }}
{% endmacro %}

{#- The run's counts and data checks, then its versions pinned; the model body over the emitted
    records and the versions they looked up; the output appended once (a retried run whose append
    already committed skips it, and Delta skips an append of the same stream version already
    committed: append_once), then the state: history MERGEd (new versions in, purged ones
    out), buffer MERGEd (new waiting records in, released ones out), clock replaced, this run's
    cut recorded. -#}
{% macro stj_write(cfg, inputs, flow, st, full, run, grown={}) %}
  {%- set body = incremental_joins.with_inputs(sql, {'stream': 'select * from ' ~ flow.emitted, 'table': flow.matched}) -%}
  {%- set body = modules.re.sub('/\\*ij:on (\\S+) (\\S+)\\*/.*?/\\*ij:end\\*/', '\\1.__ij_rec = \\2.__ij_rec', body, flags=modules.re.S) -%}
  {%- set output_columns = [] -%}
  {%- for c in incremental_joins.query_columns(body) if not c.startswith('__ij_') -%}{%- do output_columns.append(c) -%}{%- endfor -%}
  {%- set rows = 'select ' ~ incremental_joins.column_list(output_columns) ~ ' from (' ~ body ~ ') as b' -%}
  {#- The counts, and the checks that every table change and kept record has its time, before the
      first write. -#}
  {%- set new_records, late, buffer_moves, emitted, dropped, changed, rejected, history_size, buffer_size = incremental_joins.checked_counts(
        ['select count_if(__ij_run > 0), count_if(__ij_late), count_if(__ij_run = 0 and __ij_emit_run is not null or __ij_run > 0 and __ij_emit_run is null) from ' ~ flow.candidates,
         'select count(*) from ' ~ flow.emitted, 'select count_if(__ij_drop) from ' ~ flow.records,
         'select count(*), count_if(not __ij_accepted) from ' ~ flow.changes,
         'select 0, 0' if full else 'select (select count(*) from ' ~ st.history ~ '), ' ~ ('(select count(*) from ' ~ st.buffer ~ ')' if cfg.grace else '0')],
        [incremental_joins.rows_check(flow.changes, '__ij_ts is null and __ij_accepted', 'input ' ~ inputs.table ~ " has {n} changed rows with a null table_time ('" ~ cfg.table_time ~ "')", 'Each table change needs its timestamp: fill it upstream.'),
         incremental_joins.rows_check(flow.records, '__ij_ts is null and not __ij_drop', 'the stream input ' ~ inputs.stream ~ " has {n} records with a null event time ('" ~ cfg.event_time ~ "')", 'Every record needs an event time: fill it upstream.')]) -%}
  {%- set existing = none if full else incremental_joins.assert_output_columns(output_columns, cfg) -%}
  {%- do incremental_joins.assert_contract(rows) -%}
  {%- do incremental_joins.pin_versions(run) -%}
  {#- on_schema_change='append_new_columns': the output, and the state tables that hold an
      input's columns (`grown`, empty on a full refresh), gain the columns added (after the pin:
      a retried run finds them added). -#}
  {%- set output_columns = incremental_joins.add_output_columns(rows, output_columns, existing) -%}
  {%- set rows = 'select ' ~ incremental_joins.column_list(output_columns) ~ ' from (' ~ body ~ ') as b' -%}
  {%- for name, columns in grown.items() -%}{%- do incremental_joins.add_columns(st[name], columns) -%}{%- endfor -%}
  {%- set waiting = 'select * except (__ij_run, __ij_late, __ij_emit_run) from ' ~ flow.candidates ~ ' where __ij_emit_run is null' -%}
  {%- set clock_row = 'select st as stream_time, tst as table_time, ' ~ ('tst - ' ~ cfg.retention.sql if cfg.retention else 'cast(null as timestamp)') ~ ' as horizon from ' ~ flow.rt ~ ' where run = (select max(run) from ' ~ flow.rt ~ ')' -%}
  {#- The history after the run is computed (a pass over the stored history) only when written:
      on a full refresh, or when the run accepted table changes (the horizon moves only then). -#}
  {%- set history_changes = full or changed > rejected -%}
  {%- set history = incremental_joins.stage('history', flow.history_sql) if history_changes else none -%}
  {%- set history_rows = 'select * except (__ij_run) from ' ~ history -%}
  {%- if full -%}
    {%- do incremental_joins.create_output(rows, [], none) -%}
    {%- set written, mode = incremental_joins.last_write_metrics(this, -1), 'full_refresh' -%}
    {%- do incremental_joins.inject_failure('after_output_merge') -%}
    {#- Both created without deletion vectors; a MERGE into one grown large turns them on (below). -#}
    {%- do incremental_joins.create_state_table(st.history, history_rows, cfg.table_key) -%}
    {%- do incremental_joins.create_state_table(st.buffer, waiting) -%}
  {%- else -%}
    {%- set mode, version_before = 'incremental', run.versions[this | string] -%}
    {%- if emitted == 0 or (run.retry and incremental_joins.latest_version(this | string) > version_before) -%}
      {%- call statement('main') -%}select 'nothing to append' as outcome{%- endcall -%}
      {%- set written = {'inserted': 0} -%}
    {%- else -%}
      {%- call statement('main') -%}insert into {{ this }} {{ incremental_joins.append_once(run.versions[inputs.stream]) }} ({{ incremental_joins.column_list(output_columns) }}) {{ rows }}{%- endcall -%}
      {%- set written = incremental_joins.last_write_metrics(this, version_before) -%}
    {%- endif -%}
    {%- do incremental_joins.inject_failure('after_output_merge') -%}
    {%- set history_key = cfg.table_key + ['__ij_ts'] -%}
    {#- The history and the buffer have no deletion vectors while they are small: a MERGE then
        rewrites the files it touches, which costs little, and every read of a table with the
        feature lists its files twice (delta_tblproperties). At 1M (the benchmark, Intel,
        2026-11-30) the history's MERGE took 3.6-4.0 s without them against 4.1-5.8 s, the
        buffer's 1.8-2.1 s against 2.5-3.1 s. Above `incremental_joins_deletion_vectors_above`
        rows (a var, default a million; the stored tables, counted with the run's counts — the
        buffer only with a grace period, the only case that MERGEs it) the
        first MERGE turns them on (ensure_deletion_vectors), so that it marks rows instead of
        rewriting most of a large table. Sizes taken from the run's own stages instead cost more
        (benchmark/README.md, 157e13f). -#}
    {%- set dv_above = var('incremental_joins_deletion_vectors_above', 1000000) | int -%}
    {%- if history_changes -%}
      {%- set stale = 'select h.* from (' ~ incremental_joins.stj_in_play(cfg, 'select * from ' ~ st.history, flow.changes, flow.rt) ~ ') as h left anti join ' ~ history ~ ' as k on ' ~ incremental_joins.keys_match(history_key, 'h', 'k') -%}
      {%- if history_size > dv_above -%}{%- do incremental_joins.ensure_deletion_vectors(st.history) -%}{%- endif -%}
      {%- do incremental_joins.merge_changes(st.history, history_rows ~ ' where __ij_run > 0', stale, history_key, none) -%}
    {%- endif -%}
    {%- if cfg.grace and buffer_moves > 0 -%}
      {%- set released = 'select * except (__ij_run, __ij_late, __ij_emit_run) from ' ~ flow.candidates ~ ' where __ij_run = 0 and __ij_emit_run is not null' -%}
      {%- do incremental_joins.release_staged_reading(st.buffer, waiting ~ released) -%}
      {%- if buffer_size > dv_above -%}{%- do incremental_joins.ensure_deletion_vectors(st.buffer) -%}{%- endif -%}
      {%- do incremental_joins.merge_changes(st.buffer, waiting ~ ' and __ij_run > 0', released, ['_ij_commit_version', '__ij_rid'], none) -%}
    {%- endif -%}
  {%- endif -%}
  {#- The cut first, then the clock, from the stages that do not read the clock: those that do
      and are no longer needed are dropped before it is replaced (see release_staged_reading). -#}
  {%- do incremental_joins.stj_record_cuts(st.cuts, inputs, flow.rt, full) -%}
  {%- do incremental_joins.release_staged_reading(st.clock, clock_row) -%}
  {%- do incremental_joins.create_state_table(st.clock, clock_row) -%}
  {%- do incremental_joins.inject_failure('after_index_merge') -%}
  {{ return({'mode': mode, 'rows_read': new_records + dropped + changed, 'rows_inserted': written.inserted, 'affected_keys': emitted,
             'late_records': late, 'ignored_records': dropped + rejected}) }}
{% endmacro %}

{#- The input versions of every run, so that a full refresh can replay the same runs. -#}
{% macro stj_record_cuts(relation, inputs, rt, full) %}
  {%- set rows = "select '" ~ inputs.stream ~ "' as stream, '" ~ inputs.table ~ "' as input_table, stream_version, table_version from " ~ rt -%}
  {%- if full or not load_cached_relation(relation) -%}
    {%- do incremental_joins.create_state_table(relation, rows) -%}
  {%- else -%}
    {#- Appended (a retried run appends its cut again; cuts are read back distinct). -#}
    {%- call statement('record_cut') -%}insert into {{ relation }} {{ rows }}{%- endcall -%}
  {%- endif -%}
{% endmacro %}
