{#- Reading a table input's changes between two Delta versions.

    `change_plan` decides how, before anything is written: from the Change Data Feed when it is on
    for the whole range, else by diffing the two versions (time travel), which is how an upstream
    plain `table` model (create-or-replace every run) is read. An input with neither, or whose
    history no longer reaches back to the highwater, is an error with the fix in the message. -#}

{#- The relation a rendered name stands for. Its catalog is kept where the adapter has catalogs
    (`catalog.schema.table` on Databricks: an input in another Unity Catalog catalog than the
    target's); the `spark` adapter's names have none (its relations refuse one). -#}
{% macro parse_relation(name) %}
  {%- set parts = name.replace('`', '').split('.') -%}
  {{ return(api.Relation.create(database=parts[-3] if parts | length > 2 and target.type != 'spark' else none, schema=parts[-2], identifier=parts[-1], type='table')) }}
{% endmacro %}

{#- The commits of `name`, newest first: with `since` (a version) only those from `since` on, so
    that a run reads the commits since its last run, not the table's whole history (each commit
    is a file read); `to`, the version the run reads, when it is known, else up to the newest
    (one statement when at most one commit came since). The commit `since` itself is included
    when it is still kept, which tells whether the history reaches back to it. -#}
{% macro history(name, since=none, to=none) %}
  {%- if since is none or since < 0 -%}{{ return(run_query('describe history ' ~ name).rows) }}{%- endif -%}
  {%- set newest = to if to is not none else since + 1 -%}
  {%- set rows = run_query('describe history ' ~ name ~ ' limit ' ~ (newest - since + 1)).rows -%}
  {#- Commits after it (a retried run, a write since the run pinned `to`, more than one commit
      since the last run): read as many more. -#}
  {%- if rows and rows[0]['version'] > newest -%}
    {%- set rows = run_query('describe history ' ~ name ~ ' limit ' ~ (rows[0]['version'] - since + 1)).rows -%}
  {%- endif -%}
  {{ return(rows) }}
{% endmacro %}

{% macro latest_version(name) %}
  {{ return(incremental_joins.newest_commit(name)['version']) }}
{% endmacro %}

{% macro newest_commit(name) %}
  {{ return(run_query('describe history ' ~ name ~ ' limit 1').rows[0]) }}
{% endmacro %}

{#- What tells one commit from another at the same version of a table dropped and created again
    (begin_run): its operation and its time's seconds and microseconds — not the whole time,
    which the adapter shows in a time zone (the session's, or the driver's) that may differ
    between runs, but shifts by whole quarter hours at most. -#}
{% macro commit_mark(row) %}
  {%- set at = row['timestamp'] -%}
  {{ return(row['operation'] ~ ' ' ~ (at.strftime('%S.%f') if at is not string else at)) }}
{% endmacro %}


{#- A select of `name` as of Delta version `version` (none: as it is now). -#}
{% macro pinned(name, version) %}
  {{ return('select * from ' ~ name ~ (' version as of ' ~ version if version is not none else '')) }}
{% endmacro %}

{#- {'mode': 'unchanged' | 'cdf' | 'diff', 'reason': why not cdf, 'added': columns added,
    'columns': the columns at to_version, when compared with from_version's, 'rewrites': the
    versions of the commits that may write rows again (rewrites_rows)} for
    versions (from_version, to_version]; from_version -1 reads from the table's creation.
    `append_new_columns`: whether the model takes columns added to the input (its
    `on_schema_change`; none for an operator that cannot) — then `added` lists them as [name,
    type] pairs, and the feed is read across the commits that added them. `widens`: struct
    columns that may gain fields too (changelog_table's payload), from the feed only (a diff of
    two versions cannot compare such rows). -#}
{% macro change_plan(name, from_version, to_version, rows=none, append_new_columns=none, widens=[]) %}
  {%- if from_version == to_version -%}{{ return({'mode': 'unchanged', 'reason': '', 'added': [], 'columns': none, 'rewrites': []}) }}{%- endif -%}
  {%- set rows = rows or incremental_joins.history(name, from_version, to_version) -%}
  {%- set oldest = rows[-1]['version'] -%}
  {%- set state = namespace(cdf=true, reason='', vacuumed=false, first_change=none) -%}
  {%- set rewrites = [] -%}
  {%- for r in rows | reverse if r['version'] > from_version -%}
    {%- if state.first_change is none -%}{%- set state.first_change = r['timestamp'] -%}{%- endif -%}
    {%- if r['version'] <= to_version and state.cdf and not incremental_joins.keeps_change_feed(r, append_new_columns) -%}
      {%- set state.cdf = false -%}{%- set state.reason = r['operation'] ~ ' at version ' ~ r['version'] -%}
    {%- endif -%}
    {%- if r['version'] <= to_version and incremental_joins.rewrites_rows(r) -%}{%- do rewrites.append(r['version']) -%}{%- endif -%}
    {#- VACUUM deletes files removed longer ago than its retention: if that reaches back to the
        first commit after the highwater, files of the consumed version may be gone. -#}
    {%- if r['operation'] == 'VACUUM START' -%}
      {%- set params = incremental_joins.history_map(r, 'operationParameters') -%}
      {%- set retention_ms = (params.get('specifiedRetentionMillis') or params.get('defaultRetentionMillis') or 604800000) | int -%}
      {%- if (r['timestamp'] - state.first_change).total_seconds() * 1000 > retention_ms -%}{%- set state.vacuumed = true -%}{%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if state.cdf and incremental_joins.table_property(name, 'delta.enableChangeDataFeed') != 'true' -%}
    {%- set state.cdf = false -%}{%- set state.reason = 'change data feed off' -%}
  {%- endif -%}
  {%- if oldest > [from_version, 0] | max or state.vacuumed -%}
    {%- set msg -%}
{{ model.name }}: the history of input {{ name }} no longer reaches back to version {{ from_version }}, which this model consumed last (oldest version kept: {{ oldest }}{{ ', and VACUUM removed files since' if state.vacuumed else '' }}). Run `dbt run --full-refresh --select {{ model.name }}` to rebuild it from the current inputs, and keep the input's history (delta.logRetentionDuration, VACUUM retention) longer than the time between runs.
    {%- endset -%}
    {{ exceptions.raise_compiler_error(msg) }}
  {%- endif -%}
  {%- set taken = incremental_joins.assert_input_columns(name, from_version, to_version, append_new_columns, widens) if from_version >= 0 else {'added': [], 'widened': [], 'columns': none} -%}
  {%- if taken.widened and not state.cdf -%}
    {{ exceptions.raise_compiler_error(model.name ~ ': fields were added inside ' ~ taken.widened | map('first') | join(', ') ~ ' of input ' ~ name ~ ', which is read by comparing versions ' ~ from_version ~ ' and ' ~ to_version ~ ' (' ~ state.reason ~ '): rows of two struct types do not compare. Turn its Change Data Feed on before such a change, or run `dbt run --full-refresh --select ' ~ model.name ~ '`. Nothing was written.') }}
  {%- endif -%}
  {%- if from_version >= 0 and not state.cdf -%}
    {{ log(model.name ~ ': input ' ~ name ~ ' read by comparing versions ' ~ from_version ~ ' and ' ~ to_version ~ ' (two reads of the whole table), not from its Change Data Feed: ' ~ state.reason ~ '. '
           ~ ('Turn the feed on: alter table ' ~ name ~ " set tblproperties ('delta.enableChangeDataFeed' = 'true')." if state.reason == 'change data feed off'
              else 'The feed is read only across data changes and commits that change no data; a re-created table (a dbt `table` model) is always read this way.'), info=true) }}
  {%- endif -%}
  {{ return({'mode': 'cdf' if state.cdf else 'diff', 'reason': state.reason, 'added': taken.added, 'columns': taken.columns, 'rewrites': rewrites}) }}
{% endmacro %}

{#- Whether the Change Data Feed reads across commit `commit` (a `describe history` row): the
    commit that created the table, a data change, table maintenance (OPTIMIZE, REORG, VACUUM, a
    new clustering) — or a commit that changes neither data nor how it is read: a column's
    comment or nullability (dbt's `persist_docs` on an incremental model comments its columns on
    every run), a table property that is not Delta's own (a table comment, a team's tag, this
    package's recorded definition), a CHECK constraint.
    Columns added (`ADD COLUMNS`) too, for a model that takes them (`append_new_columns`): the
    feed gives the older records null in them. Across any other commit (a `delta.` property can
    turn the feed off or change how files are read; a column moved, dropped or renamed) the run
    diffs two versions instead. -#}
{% macro keeps_change_feed(commit, append_new_columns=none) %}
  {%- set operation = commit['operation'] -%}
  {%- if commit['version'] == 0 and operation in ['CREATE TABLE', 'CREATE TABLE AS SELECT', 'CREATE OR REPLACE TABLE AS SELECT', 'REPLACE TABLE AS SELECT', 'CREATE OR REPLACE TABLE'] -%}{{ return(true) }}{%- endif -%}
  {%- if operation in ['WRITE', 'MERGE', 'UPDATE', 'DELETE', 'STREAMING UPDATE', 'OPTIMIZE', 'COPY INTO', 'TRUNCATE', 'VACUUM START', 'VACUUM END', 'REORG', 'CLUSTER BY', 'ADD CONSTRAINT', 'DROP CONSTRAINT'] -%}{{ return(true) }}{%- endif -%}
  {%- set text = incremental_joins.parameters_text(commit) -%}
  {%- if operation == 'ADD COLUMNS' -%}{{ return(append_new_columns is true) }}{%- endif -%}
  {%- if operation == 'CHANGE COLUMN' -%}{{ return('"position"' not in text) }}{%- endif -%}
  {%- if operation in ['SET TBLPROPERTIES', 'UNSET TBLPROPERTIES'] -%}{{ return('"delta.' not in text) }}{%- endif -%}
  {{ return(false) }}
{% endmacro %}

{#- Whether commit `commit` (a `describe history` row) read from the Change Data Feed may give a
    stream input rows it wrote again: an UPDATE, a MERGE that updated or deleted rows, an
    overwrite (INSERT OVERWRITE, replaceWhere, the partitions a dbt insert_overwrite or microbatch
    model replaces). The feed then has the rows it removed (deletes, old images) beside those it
    wrote (inserts, new images), and a row written again as it was is no new record
    (stream_records_sql). An append, a DELETE (it writes no row) and a commit that changes no data
    cannot. -#}
{% macro rewrites_rows(commit) %}
  {%- set operation = commit['operation'] -%}
  {%- if operation == 'UPDATE' -%}{{ return(true) }}{%- endif -%}
  {%- if operation == 'MERGE' -%}
    {%- set m = incremental_joins.history_map(commit, 'operationMetrics') -%}
    {{ return(not m or (m.get('numTargetRowsUpdated') or 0) | int > 0 or (m.get('numTargetRowsDeleted') or 0) | int > 0) }}
  {%- endif -%}
  {{ return(operation in ['WRITE', 'STREAMING UPDATE'] and not modules.re.search('"(output)?mode"\\s*:\\s*"append"', incremental_joins.parameters_text(commit))) }}
{% endmacro %}

{#- A map field of a `describe history` row (operationMetrics; operationParameters whose values
    hold no JSON of their own) as a dict: a dict in a session, JSON text over Thrift. -#}
{% macro history_map(commit, field) %}
  {%- set value = commit[field] -%}
  {{ return((fromjson(value) if value is string else value) or {}) }}
{% endmacro %}

{#- A commit's operationParameters as lower-case text, to search: over Thrift the map is rendered
    as JSON without escaping the JSON strings inside it (a partitionBy list), so it is not parsed. -#}
{% macro parameters_text(commit) %}
  {%- set params = commit['operationParameters'] or {} -%}
  {{ return((params if params is string else tojson(params)) | lower) }}
{% endmacro %}

{#- Schema drift of an input: its columns (names and types) at the version consumed last and at
    the version this run reads must be the same, or its changes cannot be read (two versions'
    rows do not compare; a state table holds the old columns). One statement, planned and never
    run: both versions side by side, split at a marker column. With `append_new_columns` (see
    change_plan) columns added, and fields added to the struct columns named in `widens`, are
    taken when nothing else changed. Returns the column_diff (empty when nothing changed), with
    `columns`: the newer version's [name, type] pairs. -#}
{% macro assert_input_columns(name, from_version, to_version, append_new_columns=none, widens=[]) %}
  {%- set both = incremental_joins.query_schema('select a.*, 1 as __ij_to, b.* from (select * from ' ~ name ~ ' version as of ' ~ from_version
                                                ~ ') as a cross join (select * from ' ~ name ~ ' version as of ' ~ to_version ~ ') as b') -%}
  {%- set cut = (both | map('first') | list).index('__ij_to') -%}
  {%- set diff = incremental_joins.column_diff(both[:cut], both[cut + 1:]) -%}
  {%- do diff.update({'columns': both[cut + 1:]}) -%}
  {%- set widenable = widens | map('lower') | list -%}
  {%- set only_added = (diff.added or diff.widened) and not diff.removed and not diff.retyped
                       and diff.widened | map('first') | map('lower') | reject('in', widenable) | list | length == 0 -%}
  {%- if only_added and append_new_columns -%}{{ return(diff) }}{%- endif -%}
  {%- set changes = incremental_joins.column_changes(diff) -%}
  {%- if changes -%}
    {%- set msg -%}
{{ model.name }}: input {{ name }} changed its columns between version {{ from_version }}, which this model consumed last, and version {{ to_version }} ({{ changes }}): its changes cannot be read across a change of columns. Run `dbt run --full-refresh --select {{ model.name }}` to rebuild the model from the current inputs{{ ", or set on_schema_change='append_new_columns' on the model to take the added columns (records already written keep null in them)" if only_added and append_new_columns is false }}. Nothing was written.
    {%- endset -%}
    {{ exceptions.raise_compiler_error(msg) }}
  {%- endif -%}
  {{ return(diff) }}
{% endmacro %}

{#- Delta's MERGE fails on a CHAR(n) column in its source or its target (delta-io/delta#3868, open:
    Spark pads such values as it reads them, and Delta's MERGE cannot resolve the padding — an
    `[INTERNAL_ERROR] ... DELTA_MERGE_RESOLVED_ATTRIBUTE_MISSING_FROM_INPUT`). Every operator keeps
    its output or state with MERGE, so a run that builds its output whole refuses, before it builds
    anything, CHAR columns that would reach one: `queries` (what its MERGEs keep: merged_queries)
    are planned, not run (EXPLAIN), and Spark's read-side padding in the plan names each CHAR
    column, which the plan's scans tie to its table (`describe` shows such a column as `string`). -#}
{% macro refuse_char_columns(queries) %}
  {%- set found = {} -%}  {#- 'column (char(n) of table)' -> column -#}
  {%- for query in queries -%}
    {%- set plan = incremental_joins.scalar('explain ' ~ query) -%}
    {%- set tables = {} -%}  {#- scanned column (name#id) -> its table -#}
    {%- for table, columns in modules.re.findall('Scan \\w+ ([^\\s\\[]+)\\[([^\\]]*)\\]', plan) -%}
      {%- for column in columns.split(',') -%}{%- do tables.update({column | trim: table}) -%}{%- endfor -%}
    {%- endfor -%}
    {%- for column, id, length in modules.re.findall('readSidePadding\\((.+?)(#\\d+), (\\d+)\\)', plan) -%}
      {%- do found.update({column ~ ' (char(' ~ length ~ ')' ~ (' of ' ~ tables[column ~ id] if column ~ id in tables else '') ~ ')': column}) -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- if found -%}
    {%- set first = (found.values() | list)[0] -%}
    {%- set msg -%}
{{ model.name }}: CHAR(n) column{{ 's' if found | length > 1 else '' }} {{ found.keys() | join(', ') }} would reach a MERGE into this {{ config.get('materialized') }} model's output or state tables, and Delta's MERGE fails on CHAR columns (delta-io/delta#3868: Spark pads their values as it reads them, which the MERGE cannot resolve). Cast {{ 'them' if found | length > 1 else 'it' }} to string where the input is built (`cast({{ first }} as string) as {{ first }}` in the upstream model: the value keeps its padding), or declare the column `string`. Nothing was written.
    {%- endset -%}
    {{ exceptions.raise_compiler_error(msg) }}
  {%- endif -%}
{% endmacro %}

{#- What an operator's MERGEs keep, for refuse_char_columns: the model body as it is (`body`, a SQL
    body: the columns it selects or joins on), or only its columns `kept` (SQL expressions), else
    every column of each input. -#}
{% macro merged_queries(inputs, body=none, kept=none) %}
  {%- if body is not none and model.language == 'sql' -%}
    {{ return([('select ' ~ kept | join(', ') ~ ' from (' ~ body ~ ') as b') if kept else body]) }}
  {%- endif -%}
  {%- set queries = [] -%}
  {%- for name in inputs.values() | unique -%}{%- do queries.append(incremental_joins.pinned(name, none)) -%}{%- endfor -%}
  {{ return(queries) }}
{% endmacro %}

{#- How two column lists differ: {'added': [[name, type]], 'removed': [[name, type]], 'retyped':
    [[name, old type, new type]], 'widened': the same, for a struct that gained fields after its
    last one (as Delta's ADD COLUMNS of a nested field does)}. Each column is a name or a [name, type] pair (`query_schema`);
    names compare case-insensitively, as Spark's do, and types only when both lists have them. -#}
{% macro column_diff(before, after) %}
  {%- set old, new = {}, {} -%}
  {%- for side, columns in [(old, before), (new, after)] -%}
    {%- for c in columns -%}
      {%- set pair = [c, none] if c is string else c -%}
      {%- do side.update({pair[0] | lower: pair}) -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- set diff = {'added': [], 'removed': [], 'retyped': [], 'widened': []} -%}
  {%- for key, c in new.items() -%}
    {%- if key not in old -%}{%- do diff.added.append(c) -%}
    {%- elif c[1] and old[key][1] and c[1] != old[key][1] -%}
      {%- do (diff.widened if old[key][1].startswith('struct<') and c[1].startswith(old[key][1][:-1] ~ ',') else diff.retyped).append([c[0], old[key][1], c[1]]) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- for key, c in old.items() if key not in new -%}{%- do diff.removed.append(c) -%}{%- endfor -%}
  {{ return(diff) }}
{% endmacro %}

{#- A column_diff in words ('' when nothing differs): 'added c (type); removed d; retyped e (int
    -> bigint)'. -#}
{% macro column_changes(diff) %}
  {%- set parts = [] -%}
  {%- set words = {'added': [], 'removed': [], 'retyped': [], 'widened': []} -%}
  {%- for c in diff.added -%}{%- do words.added.append(c[0] ~ (' (' ~ c[1] ~ ')' if c[1] else '')) -%}{%- endfor -%}
  {%- for c in diff.removed -%}{%- do words.removed.append(c[0]) -%}{%- endfor -%}
  {%- for word in ['retyped', 'widened'] -%}
    {%- for c in diff[word] -%}{%- do words[word].append(c[0] ~ ' (' ~ c[1] ~ ' -> ' ~ c[2] ~ ')') -%}{%- endfor -%}
  {%- endfor -%}
  {%- for word in ['added', 'removed', 'retyped', 'widened'] if words[word] -%}
    {%- do parts.append(word ~ ' ' ~ words[word] | join(', ')) -%}
  {%- endfor -%}
  {{ return(parts | join('; ')) }}
{% endmacro %}

{% macro table_property(name, key) %}
  {%- set found = namespace(value=none) -%}
  {%- for row in run_query('show tblproperties ' ~ name).rows if row[0] == key -%}{%- set found.value = row[1] -%}{%- endfor -%}
  {{ return(found.value) }}
{% endmacro %}

{#- Whether `found` (dbt's cached relation named `name`, or none) is a Delta table: as the cache
    says when it says Delta; a relation dbt created in this invocation is cached without its
    provider, so otherwise Delta is asked (one `describe detail`). -#}
{% macro is_delta_table(found, name) %}
  {%- if found is none or found.type == 'view' -%}{{ return(false) }}{%- endif -%}
  {{ return(found.is_delta or run_query('describe detail ' ~ name).columns['format'].values()[0] == 'delta') }}
{% endmacro %}

{#- Whether `name` is a Delta table, whose versions can be read. Without history, an input is an
    error unless the model opts into recomputing fully every run (`on_missing_history`:
    'recompute'; none for an operator that has no such option, whose message then offers none). -#}
{% macro has_delta_history(name, on_missing_history) %}
  {%- set relation = incremental_joins.parse_relation(name) -%}
  {%- set found = load_cached_relation(relation) -%}
  {%- set ok = incremental_joins.is_delta_table(found, name) -%}
  {%- if not ok and on_missing_history != 'recompute' -%}
    {%- set msg -%}
{{ model.name }}: input {{ name }} is {{ 'missing' if found is none else ('a view' if found.type == 'view' else 'a table that is not Delta') ~ ', so it has no Delta history' }}: its changes can be read neither from a Change Data Feed nor by comparing Delta versions. Materialize the upstream model as a Delta table (file_format='delta', materialized 'table' or 'incremental'){{ ", or set config 'on_missing_history' = 'recompute' to rebuild this model fully on every run" if on_missing_history is not none else '' }}. Nothing was written.
    {%- endset -%}
    {{ exceptions.raise_compiler_error(msg) }}
  {%- endif -%}
  {{ return(ok) }}
{% endmacro %}

{#- `table_changes(...)` of input `name` for the commits after `from_version`, up to `to_version`
    (to the latest when none): the Change Data Feed read every operator shares. -#}
{% macro table_changes_sql(name, from_version, to_version=none) %}
  {%- set relation = incremental_joins.parse_relation(name) -%}
  {{ return("table_changes('" ~ [relation.database, relation.schema, relation.identifier] | reject('none') | join('.') ~ "', " ~ (from_version + 1) ~ (", " ~ to_version if to_version is not none else "") ~ ")") }}
{% endmacro %}

{#- Every change row of a table input in (from_version, to_version]: its columns, plus __ij_commit
    (the commit's version; 0 for a difference) and __ij_present (the row is in the table after
    the change: an insert or an update's post-image, or a row of `to_version` not in
    `from_version`). From the Change Data Feed when the plan reads it, else the difference of the
    two versions. -#}
{% macro table_change_rows(name, plan, from_version, to_version) %}
  {%- if plan.mode == 'cdf' -%}
    {{ return("select *, _commit_version as __ij_commit, _change_type in ('insert', 'update_postimage') as __ij_present from " ~ incremental_joins.table_changes_sql(name, from_version, to_version)) }}
  {%- endif -%}
  {%- set now, before = incremental_joins.pinned(name, to_version), incremental_joins.older_version(name, from_version, plan) -%}
  {{ return('select *, 0 as __ij_commit, true as __ij_present from (' ~ incremental_joins.rows_except(now, before, plan.columns) ~ ') as n union all '
            ~ 'select *, 0 as __ij_commit, false as __ij_present from (' ~ incremental_joins.rows_except(before, now, plan.columns) ~ ') as o') }}
{% endmacro %}

{#- A select of `name` as of `version`, the older of the two versions a diff compares (a
    change_plan's or stream_plan's `plan`): with the columns added since (plan.added) as typed
    nulls, placed where the newer version has them, so that the two versions' rows compare. -#}
{% macro older_version(name, version, plan) %}
  {%- if not plan.get('added') -%}{{ return(incremental_joins.pinned(name, version)) }}{%- endif -%}
  {%- set added = plan.added | map('first') | map('lower') | list -%}
  {%- set present = plan.columns | map('first') | map('lower') | reject('in', added) | list -%}
  {{ return('select ' ~ incremental_joins.padded_columns(plan.columns, present) ~ ' from ' ~ name ~ ' version as of ' ~ version) }}
{% endmacro %}

{#- The keys of every row that changed in (from_version, to_version], each once. -#}
{% macro changed_keys_sql(name, keys, plan, from_version, to_version) %}
  {{ return('select distinct ' ~ incremental_joins.column_list(keys) ~ ' from (' ~ incremental_joins.table_change_rows(name, plan, from_version, to_version) ~ ') as changed') }}
{% endmacro %}

{#- Fails, before anything is written, when an input meant to have a unique key has a row whose
    key is null (any part: an equality never matches it, so an outer join's incremental run could
    not find such a right row, and Kafka Streams' tables drop null keys; two such rows would share
    one output key) or duplicates.
    `checks`: (input name, key columns, rows_sql, config key) each — the changed rows, or the
    whole table on a full recompute. One statement for all (see one_row: the checks' scans run side
    by side); the first check with either fails, naming up to three of its keys, null ones first. -#}
{% macro assert_unique_keys(checks) %}
  {%- set parts = [] -%}
  {%- for name, keys, rows_sql, config_key in checks -%}
    {%- set shown = [] -%}
    {%- for k in keys -%}{%- do shown.append('cast(' ~ adapter.quote(k) ~ ' as string)') -%}{%- endfor -%}
    {%- set has_null = incremental_joins.any_null(keys) -%}
    {%- do parts.append('select to_json(collect_list(array(' ~ shown | join(', ') ~ ', __ij_n))) from (select '
          ~ incremental_joins.column_list(keys) ~ ', cast(count(*) as string) as __ij_n from (' ~ rows_sql ~ ') as r group by all having count(*) > 1 or '
          ~ has_null ~ ' order by ' ~ has_null ~ ' desc limit 3) as d') -%}
  {%- endfor -%}
  {%- set row = run_query(incremental_joins.one_row(parts)).rows[0] -%}
  {%- for name, keys, rows_sql, config_key in checks -%}
    {%- set samples, nulls = [], [] -%}
    {%- for values in fromjson(row[loop.index0]) -%}
      {%- set shown = [] -%}
      {%- for k in keys -%}{%- do shown.append(k ~ '=' ~ ('null' if values[loop.index0] is none else values[loop.index0])) -%}{%- endfor -%}
      {%- do (nulls if none in values[:-1] else samples).append(shown | join(', ') ~ ' (' ~ values[-1] ~ ' rows)') -%}
    {%- endfor -%}
    {%- if nulls -%}
      {%- set msg -%}
{{ model.name }}: input {{ name }} has rows whose key, config '{{ config_key }}' ({{ keys | join(', ') }}), is null: {{ nulls | join('; ') }}. A table input needs a key in every row (a null never equals a foreign key): filter those rows out upstream (e.g. in a model that selects the input where {{ keys | join(' is not null and ') }} is not null), or set '{{ config_key }}' to columns that are never null. Nothing was written.
      {%- endset -%}
      {{ exceptions.raise_compiler_error(msg) }}
    {%- elif samples -%}
      {%- set msg -%}
{{ model.name }}: input {{ name }} has duplicate values of config '{{ config_key }}' ({{ keys | join(', ') }}): {{ samples | join('; ') }}. A table input needs one row per key: deduplicate it upstream (e.g. with changelog_table or deduplicate), or set '{{ config_key }}' to the columns that are unique. Nothing was written.
      {%- endset -%}
      {{ exceptions.raise_compiler_error(msg) }}
    {%- endif -%}
  {%- endfor -%}
{% endmacro %}

{#- A check for checked_counts: rows of `relation` matching `where` must not exist. The error:
    "<model>: <what, with {n} the count>, e.g. <a sample row>. <fix> Nothing was written." -#}
{% macro rows_check(relation, where, what, fix) %}
  {{ return({'relation': relation, 'where': where, 'what': what, 'fix': fix}) }}
{% endmacro %}

{#- One query whose one row holds the values of `queries` (each a query of one row, e.g. an
    aggregate without `group by`), in order: a cross join of them, so one statement runs them side
    by side. Not scalar subqueries: Spark runs every scalar subquery of a JVM on one pool of
    `spark.sql.subquery.maxThreadThreshold` threads (16 by default), and the counts of several
    models at once, over cached views whose building runs subqueries of its own, filled it and
    waited on each other for good (README, the tests section). -#}
{% macro one_row(queries) %}
  {%- set parts = [] -%}
  {%- for q in queries -%}{%- do parts.append('(' ~ q ~ ') as __ij_c' ~ loop.index) -%}{%- endfor -%}
  {{ return('select * from ' ~ parts | join(' cross join ')) }}
{% endmacro %}

{#- One statement: the one-row `queries` (the counts a run needs) and, per check, the count and a
    sample of the rows it forbids — not a statement per check (see one_row). Fails at the first
    check with rows, so it runs before the run's first write, the pinned versions included (a
    pinned run would read the bad rows again). Returns the values of `queries`, in order: each may
    have several columns — one aggregate per relation, so that a view is scanned once. -#}
{% macro checked_counts(queries, checks) %}
  {%- set parts = queries[:] -%}
  {%- for c in checks -%}
    {%- do parts.append("select to_json(named_struct('n', count(*), 'e', to_json(first(struct(*))))) from " ~ c.relation ~ ' where ' ~ c.where) -%}
  {%- endfor -%}
  {%- set row = run_query(incremental_joins.one_row(parts)).rows[0] -%}
  {%- set n = row | length - checks | length -%}
  {%- for c in checks -%}
    {%- set bad = fromjson(row[n + loop.index0]) -%}
    {%- if bad.n > 0 -%}
      {{ exceptions.raise_compiler_error(model.name ~ ': ' ~ c.what | replace('{n}', bad.n | string) ~ ', e.g. ' ~ bad.e ~ '. ' ~ c.fix ~ ' Nothing was written.') }}
    {%- endif -%}
  {%- endfor -%}
  {{ return(row[:n]) }}
{% endmacro %}
