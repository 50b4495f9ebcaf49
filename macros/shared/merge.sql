{#- The change-minimal MERGE every operator writes its output and state with.

    `new_rows_sql` holds the target's rows for a region of keys, as they must be now;
    `stale_rows_sql` the target rows of that region that must go (their key is absent from the
    new rows). A row is updated only when some value differs (null-safe), so the target's Change
    Data Feed shows exactly the rows whose value changed. Its price: to test it Delta reads every
    column of the touched files' rows, not only the key (at 10M rows, 1% spread changes, the
    rewrite phase 12.7 s against 10.2 s unconditional; benchmark/README.md, 12-01). Keys match with `<=>`, so null key
    parts (an outer join's missing side) are keys like any other.

    `broadcast`: the caller knows the source is small (its bound, not Spark's guess: Delta
    materializes the source, and Spark then has no size for it). A BROADCAST hint on the source,
    which Delta keeps through materializing it, makes the MERGE's joins that find the touched
    files and the rows to mark deleted broadcast joins instead of sort-merge joins over the
    whole target. The phase writing the new rows keeps its outer join, whose source side cannot
    be the side broadcast.

    `purge`: a condition on the target's columns (alias `t`, constants only: Delta takes no
    subquery there) deleting the target rows the source does not name (`when not matched by
    source`), such as state entries that expired. The MERGE then joins every target row, which
    finds them in the same pass instead of a query of stale rows that scans the target again.
    `stale_rows_sql` may then be none.

    `uncomparable`: the columns among `columns` that Spark cannot compare (config.sql's
    uncomparable: maps, variants), compared by their JSON text. `columns` none: the target's own,
    described here (one `describe query`), with their uncomparable ones.

    `replace`: for a state table small enough that rewriting it whole is cheaper than a MERGE's
    two passes (a small table still pays the MERGE's fixed cost, about 1.5 s here): the same
    change written as one `insert overwrite` of the target's rows whose key is in neither the new
    nor the stale rows and that `purge` does not delete, plus the new rows, by column name. Not change-minimal
    (every row is rewritten), so never for an output; returns none instead of counts. -#}
{% macro merge_changes(target, new_rows_sql, stale_rows_sql, keys, columns, statement_name=none, broadcast=false, purge=none, replace=false, target_range=none, uncomparable=[]) %}
  {%- set name = statement_name or 'merge_' ~ target.identifier -%}
  {%- if columns is none -%}
    {%- set schema = incremental_joins.query_schema('select * from ' ~ target) -%}
    {%- set columns, uncomparable = schema | map('first') | list, incremental_joins.uncomparable(schema) -%}
  {%- endif -%}
  {%- if replace -%}
    {%- set named = ['select ' ~ incremental_joins.column_list(keys) ~ ' from (' ~ new_rows_sql ~ ') as n'] -%}
    {%- if stale_rows_sql is not none -%}{%- do named.append('select ' ~ incremental_joins.column_list(keys) ~ ' from (' ~ stale_rows_sql ~ ') as o') -%}{%- endif -%}
    {%- call statement(name) -%}
      insert overwrite {{ target }} ({{ incremental_joins.column_list(columns) }})
      select {{ incremental_joins.column_list(columns, 't') }} from {{ target }} as t
        left anti join ({{ named | join(' union all ') }}) as s on {{ incremental_joins.keys_match(keys, 't', 's') }}
        {% if purge %}where not coalesce(({{ purge }}), false){% endif %}
      union all
      select {{ incremental_joins.column_list(columns) }} from ({{ new_rows_sql }}) as n
    {%- endcall -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set assignments = [] -%}
  {%- for c in incremental_joins.non_keys(columns, keys) -%}
    {%- do assignments.append('t.' ~ adapter.quote(c) ~ ' = s.' ~ adapter.quote(c)) -%}
  {%- endfor -%}
  {%- call statement(name, fetch_result=true) -%}
    merge into {{ target }} as t
    using (
      select {% if broadcast %}/*+ BROADCAST */ {% endif %}* from (
      select {{ incremental_joins.column_list(columns) }}, false as __ij_delete from ({{ new_rows_sql }}) as n
      {%- if stale_rows_sql is not none %}
      union all
      select {{ incremental_joins.column_list(columns) }}, true as __ij_delete from ({{ stale_rows_sql }}) as o
      {%- endif %}
      ) as c
    ) as s
    on {{ incremental_joins.keys_match(keys, 't', 's') }}{% if target_range %} and {{ target_range }}{% endif %}
    when matched and s.__ij_delete then delete
    {% if assignments %}when matched and not {{ incremental_joins.same_values(columns, keys, 't', 's', uncomparable) }} then update set {{ assignments | join(', ') }}{% endif %}
    when not matched and not s.__ij_delete then insert ({{ incremental_joins.column_list(columns) }})
      values ({{ incremental_joins.column_list(columns, 's') }})
    {% if purge %}when not matched by source and ({{ purge }}) then delete{% endif %}
  {%- endcall -%}
  {#- Delta's MERGE returns its counts as its result (no commit at all when it changes nothing). -#}
  {%- set counts = load_result(name).table -%}
  {%- set row = counts.rows[0] if counts is not none and counts.rows | length > 0 else {} -%}
  {{ return({'inserted': (row.get('num_inserted_rows') or 0) | int, 'updated': (row.get('num_updated_rows') or 0) | int,
             'deleted': (row.get('num_deleted_rows') or 0) | int}) }}
{% endmacro %}

{#- Literal bounds of a set of keys, so that Delta skips by their statistics the files of a
    table that hold none of them: Delta prunes a MERGE's target, and a scan, by predicates on
    literals only, never by a join's keys. When the keys a run touches are close together (the
    newest orders, the rows inserted by the last runs), a MERGE then rewrites and reads the few
    files that hold them instead of every file of the output.

    key_range_sql(schema): an aggregate over the keys' relation, one JSON object holding, by
    name, each bounded key column's least and greatest value and whether a null is among them. `schema`:
    [name, Spark SQL type] of the key columns. Bounded are the types whose order Delta's
    statistics keep as Spark compares them (integers, decimals, plain strings, dates, timestamps);
    other key columns are left unbounded.
    key_range(schema, json, alias, nullable): the condition that every key of the set satisfies,
    on the key columns of `alias`, as literals — and a null key, with `nullable`; none when
    nothing is bounded. -#}
{% macro key_range_sql(schema) %}
  {%- set parts = [] -%}
  {%- for name, type in schema if incremental_joins.literal_affixes(type) is not none -%}
    {%- set c = adapter.quote(name) -%}
    {%- do parts.append(incremental_joins.string_literal(name) ~ ", named_struct('lo', " ~ incremental_joins.literal_text('min(' ~ c ~ ')', type) ~ ", 'hi', " ~ incremental_joins.literal_text('max(' ~ c ~ ')', type) ~ ", 'nulls', count(*) > count(" ~ c ~ "))") -%}
  {%- endfor -%}
  {{ return('to_json(named_struct(' ~ parts | join(', ') ~ '))' if parts else "'{}'") }}
{% endmacro %}

{% macro key_range(schema, json, alias, nullable=false) %}
  {%- set ranges = fromjson(json) -%}
  {%- set out = [] -%}
  {%- for name, type in schema if name in ranges -%}
    {#- An empty set has no least value: to_json leaves out the null 'lo' and 'hi'. -#}
    {%- set r, lo = ranges[name], ranges[name].get('lo') -%}
    {%- set c = alias ~ '.' ~ adapter.quote(name) -%}
    {%- set parts = [] -%}
    {%- if lo is not none -%}
      {%- do parts.append(c ~ ' between ' ~ incremental_joins.typed_literal(lo, type) ~ ' and ' ~ incremental_joins.typed_literal(r.hi, type)) -%}
    {%- endif -%}
    {%- if r.nulls or nullable -%}{%- do parts.append(c ~ ' is null') -%}{%- endif -%}
    {%- if lo is not none or r.nulls -%}{%- do out.append('(' ~ parts | join(' or ') ~ ')') -%}{%- endif -%}
  {%- endfor -%}
  {{ return(out | join(' and ') if out else none) }}
{% endmacro %}

{#- The literal syntax of a value of `type` (a Literal node in Spark's plan, which Delta's
    skipping needs: a cast of a string is not one), as prefix and suffix; none for a type
    key_range leaves unbounded. Timestamps travel as microseconds since the epoch and are written
    in UTC, so that no time zone's daylight-saving overlap can shift them. -#}
{% macro literal_affixes(type) %}
  {%- set affixes = {'tinyint': ['', 'Y'], 'smallint': ['', 'S'], 'int': ['', ''], 'bigint': ['', 'L'], 'string': ['', ''],
                     'date': ["date'", "'"], 'timestamp': ["timestamp'", "Z'"], 'timestamp_ntz': ["timestamp_ntz'", "'"]} -%}
  {%- if type in affixes -%}{{ return(affixes[type]) }}{%- endif -%}
  {{ return(['', 'BD'] if modules.re.fullmatch('decimal\\(\\d+,\\d+\\)', type) else none) }}
{% endmacro %}

{#- The text of a key value (the SQL expression `value`, of `type`) that typed_literal turns back
    into a literal: timestamps as microseconds since the epoch, other values as strings. -#}
{% macro literal_text(value, type) %}
  {{ return('cast(' ~ ('unix_micros(' ~ value ~ ')' if type == 'timestamp' else value) ~ ' as string)') }}
{% endmacro %}

{% macro typed_literal(value, type) %}
  {%- set prefix, suffix = incremental_joins.literal_affixes(type) -%}
  {%- if type == 'string' -%}{{ return(incremental_joins.string_literal(value)) }}{%- endif -%}
  {%- if type == 'timestamp' -%}
    {%- set value = (modules.datetime.datetime(1970, 1, 1) + modules.datetime.timedelta(microseconds=value | int)).isoformat(' ') -%}
  {%- endif -%}
  {{ return(prefix ~ value ~ suffix) }}
{% endmacro %}

{#- The `columns` that are not among `keys`, names compared ignoring case (as Spark resolves them:
    a key config may spell a column otherwise than the body selects it). -#}
{% macro non_keys(columns, keys) %}
  {%- set lowered, out = keys | map('lower') | list, [] -%}
  {%- for c in columns if c | lower not in lowered -%}{%- do out.append(c) -%}{%- endfor -%}
  {{ return(out) }}
{% endmacro %}

{#- (a.c1 <=> b.c1 and ...) over the `columns` not in `keys`: two rows of one key hold the same
    values (null-safe; `uncomparable` columns by their comparable value); none when every column
    is a key. -#}
{% macro same_values(columns, keys, a, b, uncomparable=[]) %}
  {%- set out = [] -%}
  {%- for c in incremental_joins.non_keys(columns, keys) -%}
    {%- do out.append(incremental_joins.comparable(c, a, uncomparable) ~ ' <=> ' ~ incremental_joins.comparable(c, b, uncomparable)) -%}
  {%- endfor -%}
  {{ return('(' ~ out | join(' and ') ~ ')' if out else none) }}
{% endmacro %}

{#- The stale rows of a region given by its keys (`region_keys_sql`: key columns only), for
    merge_changes: every region key without a new row, its value columns null. A MERGE fed this
    needs no scan of the target to find what must go: the MERGE's own join does that. -#}
{% macro stale_keys(region_keys_sql, new_rows_sql, keys, columns) %}
  {%- set select, values = [], incremental_joins.non_keys(columns, keys) -%}
  {%- for c in columns -%}{%- do select.append(('null as ' ~ adapter.quote(c)) if c in values else ('k.' ~ adapter.quote(c))) -%}{%- endfor -%}
  {{ return('select ' ~ select | join(', ') ~ ' from (' ~ region_keys_sql ~ ') as k left anti join (' ~ new_rows_sql ~ ') as n on ' ~ incremental_joins.keys_match(keys, 'k', 'n')) }}
{% endmacro %}

{#- Rows inserted/updated/deleted by the table's latest commit, from Delta's operation metrics;
    zero when there is no commit after `version_before` (Delta commits nothing for a MERGE that
    changes no row). -#}
{% macro last_write_metrics(relation, version_before) %}
  {%- set last = run_query('describe history ' ~ relation ~ ' limit 1').rows[0] -%}
  {%- if last['version'] == version_before -%}
    {{ return({'version': version_before, 'inserted': 0, 'updated': 0, 'deleted': 0}) }}
  {%- endif -%}
  {%- set m = incremental_joins.history_map(last, 'operationMetrics') -%}
  {{ return({
      'version': last['version'],
      'inserted': (m.get('numTargetRowsInserted') or m.get('numOutputRows') or 0) | int,
      'updated': (m.get('numTargetRowsUpdated') or 0) | int,
      'deleted': (m.get('numTargetRowsDeleted') or 0) | int,
  }) }}
{% endmacro %}
