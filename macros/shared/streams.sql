{#- Reading a stream input (append-only; SPEC §0): the records committed after the highwater
    version, each with its arrival: the Delta commit (`_ij_commit_version`, `_ij_commit_timestamp`;
    Delta reserves `_commit_version` for tables with the Change Data Feed on). -#}

{#- How to read the records of input `name` this run reads (begin_run's `run`): those of
    (consumed version, pinned version], or on a full recompute every record the input holds.
    {'mode': 'unchanged' | 'cdf' | 'diff' | 'snapshot', 'from': v, 'to': v,
    'to_time': commit time of `to` as the connection gave it, 'to_timestamp': as an SQL literal
    (timestamp_literal, a query) — only when the records are not read from the feed, which gives
    each its own; a caller that needs it then makes it from `to_time`}. From the Change Data Feed when it
    covers the range (each record then has its own commit version); otherwise the difference of
    two versions, or the whole snapshot, whose records all count as arriving at `to_version`.
    Reads the input's history once, from the consumed version on (begin_run's read, if it made
    one). `append_new_columns`, `widens`: see change_plan; `added` lists the columns added to the
    input since the consumed version and `columns` its columns now (when read by versions);
    `rewrites`: see change_plan. -#}
{% macro stream_plan(name, run, append_new_columns=none, widens=[]) %}
  {%- set from_version = none if run.full_reason else run.consumed[name] -%}
  {%- set to_version = run.versions[name] -%}
  {%- if to_version is none -%}{{ return({'mode': 'snapshot', 'from': none, 'to': none, 'to_timestamp': 'current_timestamp()'}) }}{%- endif -%}
  {%- if from_version == to_version -%}{{ return({'mode': 'unchanged', 'from': from_version, 'to': to_version, 'to_timestamp': 'cast(null as timestamp)'}) }}{%- endif -%}
  {%- set rows = run.commits.get(name) or incremental_joins.history(name, from_version, to_version) -%}
  {%- set at = (rows | selectattr('version', 'equalto', to_version) | first)['timestamp'] -%}
  {%- set start = from_version if from_version is not none else -1 -%}
  {%- if start == -1 and rows[-1]['version'] != 0 -%}
    {{ return({'mode': 'snapshot', 'from': none, 'to': to_version, 'to_time': at, 'to_timestamp': incremental_joins.timestamp_literal(at)}) }}
  {%- endif -%}
  {%- set plan = incremental_joins.change_plan(name, start, to_version, rows, append_new_columns, widens) -%}
  {%- set mode = 'snapshot' if start == -1 and plan.mode == 'diff' else plan.mode -%}
  {{ return({'mode': mode, 'from': start, 'to': to_version, 'to_time': at, 'to_timestamp': none if mode == 'cdf' else incremental_joins.timestamp_literal(at),
             'added': plan.added, 'columns': plan.columns, 'rewrites': plan.rewrites}) }}
{% endmacro %}

{#- The columns the package adds to a stream's records — stream()'s commit columns, and the input
    commit a deduplicate output keeps (_ij_source_version), read by another operator downstream:
    bookkeeping, never a value of a record. -#}
{% macro commit_columns() %}
  {{ return(['_ij_commit_version', '_ij_commit_timestamp', '_ij_source_version']) }}
{% endmacro %}

{#- The records of the plan: the input's columns plus _ij_commit_version and _ij_commit_timestamp —
    in place of the input's own, when it has them: the output of a model that selected a
    stream's records with them (`select s.*, ...` in a stream_table_join, a model of the user's).
    A record's arrival here is its commit in this input. The input's columns: the plan's (read
    by versions), or asked for once and kept in the plan (a first read, an unchanged input). -#}
{% macro stream_records_sql(name, plan) %}
  {%- if not plan.get('columns') -%}{%- do plan.update({'columns': incremental_joins.query_schema('select * from ' ~ name)}) -%}{%- endif -%}
  {%- set columns = plan.columns -%}
  {%- set shadowed = [] -%}
  {%- for c in columns | map('first') if c | lower in incremental_joins.commit_columns()[:2] -%}{%- do shadowed.append(adapter.quote(c)) -%}{%- endfor -%}
  {%- set others = ('* except (' ~ shadowed | join(', ') ~ ')') if shadowed else '*' -%}
  {%- if plan.mode == 'cdf' -%}
    {%- set changes = incremental_joins.table_changes_sql(name, plan.from, plan.to) -%}
    {%- set records = changes ~ " as c where _change_type = 'insert'" -%}
    {#- Commits that may write rows again (plan.rewrites: their versions, or true for any): a
        record is a row they wrote that they did not remove — the difference of the two versions
        around the commit, duplicates counted. A row written again as it was (a partition
        overwritten, an update to the same values) is none; a row updated to other values is a
        new record, as a read by versions finds it. -#}
    {%- set rewrites = plan.get('rewrites') -%}
    {%- if rewrites -%}
      {%- set within = 'true' if rewrites is true else '_commit_version in (' ~ rewrites | join(', ') ~ ')' -%}
      {%- set side = 'select * except (_change_type) from ' ~ changes ~ ' where ' ~ within ~ ' and _change_type in ' -%}
      {%- set net = incremental_joins.rows_except(side ~ "('insert', 'update_postimage')", side ~ "('delete', 'update_preimage')",
                                                  columns + [['_commit_version', 'bigint'], ['_commit_timestamp', 'timestamp']], all=true) -%}
      {%- set records = '(select * from ' ~ records ~ ' and not (' ~ within ~ ') union all select * except (_commit_version, _commit_timestamp), '
                        ~ "'insert' as _change_type, _commit_version, _commit_timestamp from (" ~ net ~ ') as net) as c' -%}
    {%- endif -%}
    {{ return("select * except (" ~ (['_change_type', '_commit_version', '_commit_timestamp'] + shadowed) | join(', ') ~ "), _commit_version as _ij_commit_version, _commit_timestamp as _ij_commit_timestamp from " ~ records) }}
  {%- endif -%}
  {%- set arrival = 'cast(' ~ (plan.to if plan.to is not none else -1) ~ ' as bigint) as _ij_commit_version, ' ~ plan.to_timestamp ~ ' as _ij_commit_timestamp' -%}
  {%- if plan.mode == 'diff' -%}
    {{ return('select ' ~ others ~ ', ' ~ arrival ~ ' from (' ~ incremental_joins.rows_except('select * from ' ~ name ~ ' version as of ' ~ plan.to, incremental_joins.older_version(name, plan.from, plan), plan.columns, all=true) ~ ') as new_records') }}
  {%- elif plan.mode == 'snapshot' -%}
    {{ return('select ' ~ others ~ ', ' ~ arrival ~ ' from (' ~ incremental_joins.pinned(name, plan.to) ~ ') as records') }}
  {%- endif -%}
  {{ return('select ' ~ others ~ ', ' ~ arrival ~ ' from ' ~ name ~ ' where false') }}
{% endmacro %}

{#- The order a run numbers its stream records in: commit, then `arrival_order` within a commit,
    then the record's own values, so that records tied on both are numbered the same way by every
    run and by a full recompute (records equal in every value are interchangeable). `schema`: the
    records' [name, type] pairs (`query_schema`). A value whose order is its identity (integers,
    decimals, strings without a collation, binary, dates, timestamps, booleans) is compared as it
    is, any other as its JSON text (a map or a variant has no order; a float's -0.0 ties 0.0, a
    collated string ties on case). Comparing values costs nothing until two records tie; the
    whole record as JSON, the tie-break before, was built for every record. -#}
{% macro arrival_order_by(cfg, schema, alias) %}
  {%- set by = ['_ij_commit_version'] -%}
  {%- for c in incremental_joins._as_list(cfg.arrival_order) -%}{%- do by.append(adapter.quote(c)) -%}{%- endfor -%}
  {%- for name, type in schema -%}
    {%- set c = alias ~ '.' ~ adapter.quote(name) -%}
    {%- do by.append(c if modules.re.fullmatch('tinyint|smallint|int|bigint|decimal\\(\\d+,\\d+\\)|string|binary|boolean|date|timestamp|timestamp_ntz', type | lower) else 'to_json(struct(' ~ c ~ '))') -%}
  {%- endfor -%}
  {{ return(by | join(', ')) }}
{% endmacro %}

{#- The time column `column` (config `key`: event_time, table_time) of `schema` ([name, type]
    pairs of `where`, the relation it is read from) as a timestamp expression over `alias`: a
    timestamp as it is; a timestamp_ntz or a date read as UTC — a wall-clock time, so that no
    session time zone's daylight-saving gap or overlap moves it and intervals measure it exactly.
    A missing column or one of another type (epoch numbers, strings: their unit or format is
    not the package's to guess) is a configuration error, raised before anything is written. -#}
{% macro time_column(key, column, schema, where, alias) %}
  {%- set type, c = incremental_joins.by_name(schema).get(column | lower, [none, none])[1], alias ~ '.' ~ adapter.quote(column) -%}
  {%- if type is none -%}
    {{ incremental_joins.config_error(key, column, 'is not a column of ' ~ where ~ ' (' ~ schema | map('first') | join(', ') ~ ')', 'name one of those columns') }}
  {%- elif type == 'timestamp' -%}
    {{ return(c) }}
  {%- elif type in ['timestamp_ntz', 'date'] -%}
    {%- set clock = 'hour(' ~ c ~ '), minute(' ~ c ~ '), extract(SECOND FROM ' ~ c ~ ')' if type == 'timestamp_ntz' else '0, 0, 0' -%}
    {{ return('make_timestamp(year(' ~ c ~ '), month(' ~ c ~ '), day(' ~ c ~ '), ' ~ clock ~ ", 'UTC')") }}
  {%- endif -%}
  {{ incremental_joins.config_error(key, column, 'is a column of type ' ~ type ~ ' in ' ~ where ~ '; a time column must be a timestamp, timestamp_ntz or date',
       'convert it where the column is made, e.g. timestamp_millis(' ~ column ~ ') for epoch milliseconds, timestamp_seconds(' ~ column ~ ') for epoch seconds, to_timestamp(' ~ column ~ ", 'yyyy-MM-dd HH:mm:ss') for text") }}
{% endmacro %}
