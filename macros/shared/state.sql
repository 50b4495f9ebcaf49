{#- State tables: where each operator keeps what it needs between runs (all Delta). -#}

{#- A per-model state table beside the model, e.g. orders_enriched__ij_index (`of`: the model's
    relation, by default the one being built), in its catalog too where there are catalogs. -#}
{% macro state_relation(suffix, of=none) %}
  {%- set of = of if of is not none else this -%}
  {{ return(api.Relation.create(database=of.database, schema=of.schema, identifier=of.identifier ~ '__ij_' ~ suffix, type='table')) }}
{% endmacro %}

{#- Properties of every table the package writes: deletion vectors (a MERGE marks deleted rows
    instead of rewriting whole files) and, on outputs, the Change Data Feed (SPEC property 4).
    `state`: a table only the package reads (state tables, the highwater, the run log). The
    Change Data Feed off, explicitly (the embedded runtime turns it on for every new table):
    nothing reads their changes, and with it on every MERGE that updates or deletes also writes
    the changed rows again as change files. And a Delta checkpoint every 100 commits instead of
    every 10: these tables take a commit or two every run (the shared run log one per run of
    every model), and the commit that writes a checkpoint takes 1.5-3 s more, while the snapshot
    of a small table replays a hundred small commit files in no time worth measuring (2026-11-29,
    120 runs of a read and an append on one table: 1.63 s a run with checkpoints every 10
    commits, 1.39 s every 30, 1.28 s every 100). Outputs keep Delta's default: their readers are
    not only this package.
    `merged`: a state table that a MERGE writes keeps deletion vectors (changelog_table's
    sequences); any other (appended or replaced whole: the CombinedKey index, the highwater, the
    run log, a clock; deduplicate's store and the stream-table join's history and buffer until a
    MERGE finds them large, ensure_deletion_vectors) has them off.
    Every read of a table with the feature plans its scan twice (Delta lists the files once more
    to look for vectors, with a Spark job, even when there are none): a read of a 1M-entry index
    with 1,047 right keys took 1.2-2.0 s with the feature, 0.7-1.0 s without, 2.5-3.4 s against
    1.4-1.8 s right after an append (2026-11-30, copies of the benchmark's index). -#}
{% macro delta_tblproperties(extra={}, state=false, merged=false) %}
  {%- set all = {'delta.enableChangeDataFeed': 'false' if state else 'true', 'delta.enableDeletionVectors': 'true' if merged or not state else 'false'} -%}
  {%- if state -%}{%- do all.update({'delta.checkpointInterval': '100'}) -%}{%- endif -%}
  {%- do all.update(extra) -%}
  {{ return(incremental_joins.tblproperties_clause(all)) }}
{% endmacro %}

{#- `tblproperties ('key' = 'value', ...)` of a dict. -#}
{% macro tblproperties_clause(properties) %}
  {%- set props = [] -%}
  {%- for key, value in properties.items() -%}
    {%- do props.append(incremental_joins.string_literal(key) ~ ' = ' ~ incremental_joins.string_literal(value)) -%}
  {%- endfor -%}
  {{ return('tblproperties (' ~ props | join(', ') ~ ')') }}
{% endmacro %}

{#- The output's properties that say what it equals: the SQL of a full recompute (for the
    equals_full_recompute test; none for a Python body) and the model's definition (begin_run;
    none for an operator without one). Written by create_output, and by record_definition after a
    recompute into the existing output. -#}
{% macro definition_properties(recompute_sql) %}
  {%- set properties = {} -%}
  {%- if recompute_sql -%}{%- do properties.update({'incremental_joins.recompute_sql': incremental_joins.without_empty_refs(recompute_sql)}) -%}{%- endif -%}
  {%- if model.get('incremental_joins_definition') -%}{%- do properties.update({'incremental_joins.definition': model.get('incremental_joins_definition')}) -%}{%- endif -%}
  {{ return(properties) }}
{% endmacro %}

{#- Deletion vectors on for a state table created without them that a MERGE is about to write
    (delta_tblproperties): one `alter table` the first time, a `show tblproperties` after. -#}
{% macro ensure_deletion_vectors(relation) %}
  {%- if incremental_joins.table_property(relation, 'delta.enableDeletionVectors') == 'true' -%}{{ return(false) }}{%- endif -%}
  {%- call statement('deletion_vectors_' ~ relation.identifier) -%}
    alter table {{ relation }} set tblproperties ('delta.enableDeletionVectors' = 'true')
  {%- endcall -%}
  {{ return(true) }}
{% endmacro %}

{#- create or replace table ... cluster by (keys) ... as select: the shape of every state and
    output table. Liquid clustering keeps the rows of one key in few files, so MERGE and key
    lookups prune files. `merged`: later runs write it with MERGE (delta_tblproperties). -#}
{% macro create_state_table(relation, sql, cluster_by=[], merged=false) %}
  {{ return(adapter.dispatch('create_state_table', 'incremental_joins')(relation, sql, cluster_by, merged)) }}
{% endmacro %}

{% macro default__create_state_table(relation, sql, cluster_by, merged) %}
  {%- call statement('create_' ~ relation.identifier) -%}
    create or replace table {{ relation }}
    using delta
    {{ incremental_joins.cluster_by(cluster_by, sql) }}
    {{ incremental_joins.location_of(relation) }}
    {{ incremental_joins.delta_tblproperties(state=true, merged=merged) }}
    as {{ sql }}
  {%- endcall -%}
{% endmacro %}

{#- `cluster by (...)` for a table created from query `sql`, on the first four of a key's `columns`
    that Delta can cluster by: the types it keeps statistics for (numbers, strings, dates,
    timestamps). Delta refuses a boolean, binary, struct or array column there
    (DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED), and a key of such a type — a Kafka
    message key as bytes, a composite key as a struct — is laid out unclustered instead; it
    clusters by at most four (a longer key failed the table's creation), and rows of one key
    prefix are still laid out together. Each named as `sql` spells it: Spark resolves a CLUSTER BY
    column case-sensitively as it creates a table (`cluster by (CID)` over a column `Cid` fails;
    ALTER TABLE takes it), where a key config may name it in any case, as everywhere else. Both
    probed on Spark 4.2 / Delta 4.4. One `describe query` of `sql`, when a key is given. -#}
{% macro cluster_by(columns, sql) %}
  {%- if not columns -%}{{ return('') }}{%- endif -%}
  {%- set types, out = incremental_joins.by_name(incremental_joins.query_schema(sql)), [] -%}
  {%- for c in columns if c | lower in types and modules.re.fullmatch('tinyint|smallint|int|bigint|float|double|decimal\\(\\d+,\\d+\\)|string|(var)?char\\(\\d+\\)|date|timestamp|timestamp_ntz', types[c | lower][1]) -%}
    {%- do out.append(types[c | lower][0]) -%}
  {%- endfor -%}
  {{ return('cluster by (' ~ incremental_joins.column_list(out[:4]) ~ ')' if out else '') }}
{% endmacro %}

{#- Names of this model's staged views begin with this. -#}
{% macro staged_prefix() %}
  {{ return('__ij_' ~ this.schema ~ '__' ~ this.identifier ~ '__') }}
{% endmacro %}

{#- An intermediate result of this run (changed keys, affected keys, recomputed rows), computed
    once and read by several statements. It is never state: a retried run computes it again from
    the same pinned versions. Returns the name to select from. `eager`: computed at once (a
    statement of its own) instead of by the first statement that reads it, so that Spark knows its
    size when it plans that statement and broadcasts a few keys into a join with a large table
    instead of shuffling the table. -#}
{% macro stage(suffix, sql, eager=false) %}
  {%- set name = incremental_joins.staged_prefix() ~ suffix -%}
  {% do adapter.dispatch('stage', 'incremental_joins')(name, sql, eager) %}
  {%- set staged = incremental_joins.staged_views() -%}
  {%- do staged.pop(name, none) -%}
  {%- do staged.update({name: sql}) -%}
  {{ return(name) }}
{% endmacro %}

{#- The views this run staged, {name: SQL} in the order it staged them: kept in the node's context
    (`model`, one dict per model run, shared by every macro the materialization calls). -#}
{% macro staged_views() %}
  {{ return(model.setdefault('incremental_joins_staged', {})) }}
{% endmacro %}

{#- Drop the staged views `names`, in that order. -#}
{% macro drop_staged(names) %}
  {% for name in names %}
    {% do run_query('drop view if exists ' ~ name) %}
    {% do incremental_joins.staged_views().pop(name, none) %}
  {% endfor %}
{% endmacro %}

{#- Call before the run writes `relation`: drops this run's staged views that read it (a view
    reads `relation` when its SQL names it or a view that does), except those that `keep` (the SQL
    of the write and of what the run still reads) names, directly or through another view; last
    staged first. Returns the names dropped. A write to a table makes Spark re-plan every cached
    view whose plan reads that table, whatever version it reads, each down to its Delta snapshots
    and file lists, and drop its cached rows, so that a later read computes them again. Measured
    on the 1M-row benchmark: the foreign_key_join index append took 5.0-10.6 s with the stages
    that read the index still cached, 1.7-3.1 s without (their drops: 0.1 s together). -#}
{% macro release_staged_reading(relation, keep='') %}
  {%- set staged = incremental_joins.staged_views() -%}
  {%- set kept = namespace(text=keep) -%}
  {%- for name in staged | reverse if incremental_joins.names(kept.text, name) -%}
    {%- set kept.text = kept.text ~ ' ' ~ staged[name] -%}
  {%- endfor -%}
  {%- set reads = [relation | string] -%}
  {%- set names = [] -%}
  {%- for name, sql in staged.items() -%}
    {%- set hit = namespace(found=false) -%}
    {%- for r in reads if incremental_joins.names(sql, r) -%}{%- set hit.found = true -%}{%- endfor -%}
    {%- if hit.found -%}
      {%- do reads.append(name) -%}
      {%- if not incremental_joins.names(kept.text, name) -%}{%- do names.append(name) -%}{%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {%- do incremental_joins.drop_staged(names | reverse) -%}
  {{ return(names) }}
{% endmacro %}

{#- Whether SQL `text` names the relation or view `name` (a whole name, any case). -#}
{% macro names(text, name) %}
  {{ return(modules.re.search('(?<![\\w.])' ~ modules.re.escape(name | string | lower | replace('`', '')) ~ '(?!\\w)', text | lower | replace('`', '')) is not none) }}
{% endmacro %}

{#- Spark: a cached temporary view (memory, no Delta commit), cached lazily unless `eager`: the
    first statement that reads it computes it, which saves a statement per stage. Every stage is
    read before the run writes any table it reads (stages read the inputs and state at pinned
    versions, or a state table before that table's MERGE), so lazy and eager caching hold the same
    rows. Not `CACHE TABLE x AS SELECT`: a view made that way loses track of the temporary views it
    reads, and a later statement that reads it fails with TABLE_OR_VIEW_NOT_FOUND.
    The view keeps its analyzed plan (spark.sql.legacy.storeAnalyzedPlanForView, set for its
    creation only, then reset to the session's default): by default a temporary view keeps its SQL
    text, and every statement that reads it parses and analyses it again, through every stage it
    reads and down to each Delta input's time-travel snapshot, so a run's analysis grew with its
    chain of stages. Same rows either way (the view is cached lazily, as above); measured on the
    stream_table_join crash test, the time of its dbt statements fell from 147 s to 113 s, on two
    foreign_key_join tests from 243 s to 221 s. -#}
{% macro spark__stage(name, sql, eager) %}
  {% do run_query('set spark.sql.legacy.storeAnalyzedPlanForView = true') %}
  {% call statement('stage_' ~ name) -%} create or replace temporary view {{ name }} as {{ sql }} {%- endcall %}
  {% do run_query('reset spark.sql.legacy.storeAnalyzedPlanForView') %}
  {% do run_query('cache ' ~ ('' if eager else 'lazy ') ~ 'table ' ~ name) %}
{% endmacro %}

{#- Databricks SQL warehouses do not support CACHE TABLE: a temporary view (Delta caching and
    Photon make the repeated reads cheap). -#}
{% macro databricks__stage(name, sql, eager) %}
  {% call statement('stage_' ~ name) -%} create or replace temporary view {{ name }} as {{ sql }} {%- endcall %}
{% endmacro %}

{#- Drop every staged view: dropping a cached temporary view also drops its cache entry (UNCACHE
    TABLE would re-analyse each view's definition first: a time-travel snapshot load per view,
    seconds on large inputs). Last staged first: Spark re-plans the cached views that read a view it
    uncaches, so dropping a view before the views that read it re-plans them, each down to its
    Delta snapshots (measured on the 1M-row foreign_key_join benchmark: the four drops took 5.4 s
    in name order, 0.3 s last staged first). Views left by an interrupted run, which this run did
    not stage, go in name order. -#}
{% macro release_staged() %}
  {%- set present = run_query("show views like '" ~ incremental_joins.staged_prefix() ~ "*'").columns['viewName'].values() | map('lower') | list -%}
  {%- set staged = incremental_joins.staged_views() -%}
  {%- set names = [] -%}
  {%- for name in staged | reverse | map('lower') | unique if name in present -%}{%- do names.append(name) -%}{%- endfor -%}
  {%- for name in present if name not in names -%}{%- do names.append(name) -%}{%- endfor -%}
  {%- do incremental_joins.drop_staged(names) -%}
  {%- do staged.clear() -%}
{% endmacro %}

{#- A Spark SQL string literal of `value` (null for none). Spark substitutes `${...}` in a
    statement's text before parsing it (with '' when no such variable is set): `${` is written as
    two adjacent literals, `'$' '{'`, which the parser joins into one string. -#}
{% macro string_literal(value) %}
  {{ return('null' if value is none else "'" ~ value | string | replace('\\', '\\\\') | replace("'", "\\'") | replace('${', "$' '{") ~ "'") }}
{% endmacro %}

{#- A timestamp a query returned (a commit's time from `describe history`) as a literal of the same
    instant. A value with a zone is written with its offset. A naive one is a wall-clock time in
    the zone the connection renders timestamps in: the dbt process's own under the `session`
    method (PySpark's collect), the session's over Thrift or HTTP — which a macro cannot tell
    apart (`target` has no `method`). So the connection renders the instant the value names read
    as UTC: shown as the value, that is the instant (a UTC zone: one query); else shown moved by
    the zone's offset there, and the instant is the value moved back by it — checked once more,
    as the offset can differ between the two instants around a daylight-saving change. Written
    as it was, in a dbt process in Tokyo with a New York session, changelog_table's tombstone
    retention counted from 14 hours after the commit. -#}
{% macro timestamp_literal(value) %}
  {%- if value.tzinfo is not none -%}{{ return("timestamp'" ~ value.isoformat(' ') ~ "'") }}{%- endif -%}
  {%- set as_utc = incremental_joins.epoch_micros(value) -%}
  {%- set guess = namespace(micros=as_utc) -%}
  {%- for _ in range(3) -%}
    {%- set shown = incremental_joins.scalar('select timestamp_micros(' ~ guess.micros ~ ')') -%}
    {%- if shown == value -%}{%- break -%}{%- endif -%}
    {%- set guess.micros = as_utc - (incremental_joins.epoch_micros(shown) - guess.micros) -%}
  {%- endfor -%}
  {{ return(incremental_joins.typed_literal(guess.micros, 'timestamp')) }}
{% endmacro %}

{#- Microseconds from 1970-01-01 00:00 to a naive datetime's wall-clock time. -#}
{% macro epoch_micros(value) %}
  {%- set d = value - modules.datetime.datetime(1970, 1, 1) -%}
  {{ return((d.days * 86400 + d.seconds) * 1000000 + d.microseconds) }}
{% endmacro %}

{#- Rows read to the driver (values as strings or none) as a query: `select ... from values`,
    each column cast to its type. A few rows inlined this way are a constant: no statement that
    reads them reads the table they came from. -#}
{% macro values_sql(rows, names, types) %}
  {%- set tuples = [] -%}
  {%- for row in rows -%}
    {%- set cells = [] -%}
    {%- for v in row -%}{%- do cells.append('cast(' ~ incremental_joins.string_literal(v) ~ ' as ' ~ types[loop.index0] ~ ')') -%}{%- endfor -%}
    {%- do tuples.append('(' ~ cells | join(', ') ~ ')') -%}
  {%- endfor -%}
  {%- set columns = [] -%}
  {%- for n in names -%}{%- do columns.append('col' ~ loop.index ~ ' as ' ~ adapter.quote(n)) -%}{%- endfor -%}
  {{ return('select ' ~ columns | join(', ') ~ ' from values ' ~ tuples | join(', ')) }}
{% endmacro %}

{#- One SQL value as a Jinja value (first column of the first row). -#}
{% macro scalar(sql) %}
  {%- set table = run_query(sql) -%}
  {{ return(table.rows[0][0] if table.rows | length > 0 else none) }}
{% endmacro %}

{#- The output table, created from `new_rows` with the SQL of a full recompute kept as a table
    property for the `equals_full_recompute` test (none: no such SQL, e.g. a Python body), and
    dbt's table configs (check_table_config). -#}
{% macro create_output(new_rows, key_columns, recompute_sql) %}
  {%- set properties = incremental_joins.user_tblproperties() -%}
  {%- do properties.update(incremental_joins.definition_properties(recompute_sql)) -%}
  {%- call statement('main') -%}
    create or replace table {{ this }}
    using delta
    {{ incremental_joins.cluster_by(key_columns, new_rows) }}
    {{ incremental_joins.location_of(this) }}
    {{ comment_clause() }}
    {{ incremental_joins.delta_tblproperties(properties) }}
    as {{ new_rows }}
  {%- endcall -%}
{% endmacro %}

{#- dbt's configs for where and how a model's table is created, applied as dbt-spark's `table` and
    `incremental` apply them, when a run creates the table (a first run, --full-refresh, a
    fallback that replaces a state table); a run that writes into an existing table leaves them:
    - `location_root`: every table the model creates is at `<location_root>/<its name>` — the
      output, its state tables and its highwater (not the run log, which the package's
      on-run-start creates for every model of the target schema). A --full-refresh that finds
      the output elsewhere moves it (relocate_tables);
    - `tblproperties`: added to the output's own (not to the state tables'); the output's Change
      Data Feed stays on, since downstream operator models read it;
    - `persist_docs: {relation: true}`: the model's description as the output's comment (columns:
      dbt's persist_docs after each run, end_run);
    - `file_format`: delta, or unset; every table the package writes is Delta.
    Checked before anything is read or written (run_inputs). -#}
{% macro check_table_config() %}
  {%- set file_format = config.get('file_format') -%}
  {%- if file_format is not none and file_format | lower != 'delta' -%}
    {{ incremental_joins.config_error('file_format', file_format, 'is not delta: a ' ~ config.get('materialized') ~ ' model writes its output and state as Delta tables (their versions and Change Data Feed are what the next run reads)', "set file_format='delta' for this model (e.g. `+file_format: delta` for its folder in dbt_project.yml), or leave it unset") }}
  {%- endif -%}
  {%- set properties = config.get('tblproperties') -%}
  {%- if properties is not none and properties is not mapping -%}
    {{ incremental_joins.config_error('tblproperties', properties, 'is not a dict', "write e.g. tblproperties={'delta.logRetentionDuration': 'interval 60 days'}") }}
  {%- endif -%}
  {%- for key, value in (properties or {}).items() -%}
    {%- if key | lower == 'delta.enablechangedatafeed' and value | string | lower != 'true' -%}
      {{ incremental_joins.config_error('tblproperties', key ~ ': ' ~ value, "turns off the output's Change Data Feed, which downstream operator models read its changes from (SPEC property 4)", 'leave delta.enableChangeDataFeed out of tblproperties') }}
    {%- elif (key | lower).startswith('incremental_joins.') -%}
      {{ incremental_joins.config_error('tblproperties', key ~ ': ' ~ value, 'sets a property the package keeps on the output', 'leave properties named incremental_joins.* out of tblproperties') }}
    {%- endif -%}
  {%- endfor -%}
  {%- set root = config.get('location_root') -%}
  {%- if root is not none and (root is not string or root | trim == '') -%}
    {{ incremental_joins.config_error('location_root', root, 'is not a path', "write e.g. location_root='s3://bucket/warehouse/marts' (each table goes to <location_root>/<its name>)") }}
  {%- endif -%}
{% endmacro %}

{#- The `tblproperties` config as {key: string value} (booleans as Delta writes them). -#}
{% macro user_tblproperties() %}
  {%- set out = {} -%}
  {%- for key, value in (config.get('tblproperties') or {}).items() -%}
    {%- do out.update({key: (value | string | lower) if value is sameas true or value is sameas false else value | string}) -%}
  {%- endfor -%}
  {{ return(out) }}
{% endmacro %}

{#- `location '<location_root>/<the table's name>'` for a table this model creates; '' without
    location_root (check_table_config). -#}
{% macro location_of(relation) %}
  {%- set path = incremental_joins.location_path(relation) -%}
  {{ return('location ' ~ incremental_joins.string_literal(path) if path else '') }}
{% endmacro %}

{#- `<location_root>/<the table's name>`, or none without location_root. -#}
{% macro location_path(relation) %}
  {%- set root = config.get('location_root') -%}
  {{ return((root | trim).rstrip('/') ~ '/' ~ relation.identifier if root else none) }}
{% endmacro %}

{#- A path as Delta writes it and as a config may: file:/a, file:///a and /a/ all /a. -#}
{% macro same_path(a, b) %}
  {%- set out = [] -%}
  {%- for p in [a, b] -%}{%- do out.append(modules.re.sub('^/+', '/', modules.re.sub('^file:(?=/)', '', p)).rstrip('/')) -%}{%- endfor -%}
  {{ return(out[0] == out[1]) }}
{% endmacro %}

{#- An output that is a view (the model was a `view` before, or `dbt clone` made it one), or a
    table that is not Delta (a parquet `table` before): an operator can neither MERGE into it nor
    read its history. A view is dropped, as dbt's `incremental` drops one, and the run builds the
    output as a first run (state tables an earlier operator run left are replaced by that run). A
    table that is not Delta (is_delta_table: dbt's relation cache, Delta asked when the cache does
    not say Delta) holds rows: it is dropped under --full-refresh, and without it the run fails
    saying so, before anything is read or written. An existing Delta output: no statement. -#}
{% macro drop_foreign_output() %}
  {%- set output = load_cached_relation(this) -%}
  {%- if output is none or (output.is_table and incremental_joins.is_delta_table(output, this | string)) -%}{{ return(none) }}{%- endif -%}
  {%- set what = 'a view' if not output.is_table else 'a table that is not Delta' -%}
  {%- if output.is_table and not should_full_refresh() -%}
    {{ exceptions.raise_compiler_error(model.name ~ ': its output ' ~ this ~ ' is ' ~ what ~ ' (the model was materialized otherwise before?), which a ' ~ config.get('materialized') ~ ' model cannot write into or read the history of. Run it once with --full-refresh (`dbt run --full-refresh --select ' ~ model.name ~ '`), which drops that table and builds the output as a Delta table. Nothing was written.') }}
  {%- endif -%}
  {{ log(model.name ~ ': its output ' ~ this ~ ' is ' ~ what ~ ', which a ' ~ config.get('materialized') ~ ' model cannot write into: it is dropped and built as a Delta table', info=true) }}
  {%- do adapter.drop_relation(output) -%}
{% endmacro %}

{#- --full-refresh of an output that location_root puts elsewhere than where it is (location_root
    added or changed since the output was created): Delta replaces a table only at its own location
    (DELTA_TABLE_LOCATION_MISMATCH), so the output and the model's state tables (`<model>__ij_*`)
    are dropped first, and the run creates them at the new location as a first run. The old
    location's files stay where an external table was. One `describe detail` on a --full-refresh
    with location_root; nothing otherwise. -#}
{% macro relocate_tables() %}
  {%- set root = config.get('location_root') -%}
  {%- set output = load_cached_relation(this) -%}
  {%- if not root or not should_full_refresh() or output is none -%}{{ return(none) }}{%- endif -%}
  {%- set found, wanted = run_query('describe detail ' ~ this).rows[0]['location'], incremental_joins.location_path(this) -%}
  {%- if incremental_joins.same_path(found, wanted) -%}{{ return(none) }}{%- endif -%}
  {{ log(model.name ~ ': --full-refresh with location_root ' ~ root ~ ': the output is at ' ~ found ~ ', so it and its state tables are dropped and created at ' ~ wanted, info=true) }}
  {%- for row in run_query('show tables in ' ~ this.without_identifier() ~ " like '" ~ this.identifier ~ "__ij_*'").rows if (row[2] | string | lower) != 'true' -%}
    {%- do adapter.drop_relation(api.Relation.create(database=this.database, schema=this.schema, identifier=row[1], type='table')) -%}
  {%- endfor -%}
  {%- do adapter.drop_relation(output) -%}
{% endmacro %}

{#- [name, Spark SQL type] of each column of a query (`describe query`: planned, never run; the
    types as Spark writes them, whatever the connection method, unlike dbt's
    get_column_schema_from_query). -#}
{% macro query_schema(sql) %}
  {%- set out = [] -%}
  {%- for row in run_query('describe query ' ~ sql).rows -%}{%- do out.append([row[0], row[1]]) -%}{%- endfor -%}
  {{ return(out) }}
{% endmacro %}

{#- `schema` ([name, type] pairs) by lower-case name: {name: [name as spelled, type lower-case]}. Spark
    resolves names ignoring case, and so do lookups of a configured column here. -#}
{% macro by_name(schema) %}
  {%- set out = {} -%}
  {%- for name, type in schema -%}{%- do out.setdefault(name | lower, [name, type | lower]) -%}{%- endfor -%}
  {{ return(out) }}
{% endmacro %}

{#- The column names of a query; for a table, cheaper than adapter.get_columns_in_relation's
    `describe extended`. -#}
{% macro query_columns(sql) %}
  {{ return(incremental_joins.query_schema(sql) | map('first') | list) }}
{% endmacro %}

{#- Schema drift of the output: a run that writes into the existing output (not a first run or
    --full-refresh, which create it) writes the body's `columns` into it by name, so they must be
    its columns. Fails before anything is written, naming the columns the body added and
    removed. With `cfg.append_new_columns` (with_schema_change) added and removed columns are
    taken — add_output_columns adds the new ones — except, with `cfg.sync_all_columns`, removed
    ones. Returns the output's columns (none when the run creates it). -#}
{% macro assert_output_columns(columns, cfg) %}
  {%- if load_cached_relation(this) is none or should_full_refresh() -%}{{ return(none) }}{%- endif -%}
  {%- set existing = incremental_joins.query_columns('select * from ' ~ this) -%}
  {%- set diff = incremental_joins.column_diff(existing, columns) -%}
  {%- set dropped = diff.removed if cfg.sync_all_columns and not diff.retyped else [] -%}
  {%- if cfg.append_new_columns and not diff.retyped and not dropped -%}{{ return(existing) }}{%- endif -%}
  {%- set changes = incremental_joins.column_changes(diff) -%}
  {%- if changes -%}
    {%- set rebuild = 'Run `dbt run --full-refresh --select ' ~ model.name ~ '` to rebuild it' -%}
    {%- if dropped -%}
      {%- set fix = "; on_schema_change='sync_all_columns' would drop " ~ dropped | map('first') | join(', ') ~ " from it, which Delta Lake does only on a table with column mapping (dbt-spark's incremental models refuse it too). " ~ rebuild ~ " without them, or set on_schema_change='append_new_columns' to keep them in the output (null in new records)" -%}
    {%- else -%}
      {%- set fix = '. ' ~ rebuild ~ ' with the new columns' ~ (", or set on_schema_change='append_new_columns' on the model to add the new columns to the output and keep the records it holds (they keep null in the new columns; columns the model no longer selects stay, null in new records)" if not cfg.append_new_columns and not diff.retyped else '') -%}
    {%- endif -%}
    {{ exceptions.raise_compiler_error(model.name ~ ": the model's columns changed since its output " ~ this ~ ' was built (' ~ changes ~ '), and a run writes into the existing output' ~ fix ~ '. Nothing was written.') }}
  {%- endif -%}
  {{ return(existing) }}
{% endmacro %}

{#- on_schema_change='append_new_columns': the columns of `rows_sql` (named `columns`) that the
    output lacks (`existing`, its column names) are added to it, typed as `rows_sql` types them:
    one ALTER TABLE, after the run pinned its versions and before it writes (a retried run finds
    them added); nothing when there are none. Returns the columns the run writes, as the output
    names them: `existing` without the columns the rows no longer have, then the added ones —
    `columns` itself when `existing` is none (the run creates the output). -#}
{% macro add_output_columns(rows_sql, columns, existing) %}
  {%- if existing is none -%}{{ return(columns) }}{%- endif -%}
  {%- set have, wanted = existing | map('lower') | list, columns | map('lower') | list -%}
  {%- set written = [] -%}
  {%- for c in existing if c | lower in wanted -%}{%- do written.append(c) -%}{%- endfor -%}
  {%- if wanted | reject('in', have) | list -%}
    {%- do written.extend(incremental_joins.add_columns(this, incremental_joins.query_schema(rows_sql), existing)) -%}
  {%- endif -%}
  {{ return(written) }}
{% endmacro %}

{#- ALTER TABLE `relation` ADD COLUMNS: the [name, type] pairs of `columns` it lacks (`existing`:
    its column names; none: asked). Nothing when it has them all. Returns the names added. -#}
{% macro add_columns(relation, columns, existing=none) %}
  {%- set have = (existing if existing is not none else incremental_joins.query_columns('select * from ' ~ relation)) | map('lower') | list -%}
  {%- set added, names = [], [] -%}
  {%- for name, type in columns if name | lower not in have -%}
    {%- do added.append(adapter.quote(name) ~ ' ' ~ type) -%}{%- do names.append(name) -%}
  {%- endfor -%}
  {%- if added -%}
    {% call statement('add_columns') -%}
      alter table {{ relation }} add columns ({{ added | join(', ') }})
    {%- endcall %}
  {%- endif -%}
  {{ return(names) }}
{% endmacro %}

{#- The rows of `sql` with the columns `columns` ([name, type] pairs), by name, in that order: a
    column `sql` lacks (one added to an input after a state table was written) is a typed null. -#}
{% macro with_columns(sql, columns) %}
  {%- set have = incremental_joins.query_columns(sql) | map('lower') | list -%}
  {{ return('select ' ~ incremental_joins.padded_columns(columns, have) ~ ' from (' ~ sql ~ ') as __ij_padded') }}
{% endmacro %}

{#- The select list of `columns` ([name, type] pairs): those named in `present` (lowercase names)
    as they are, the others as typed nulls. -#}
{% macro padded_columns(columns, present) %}
  {%- set exprs = [] -%}
  {%- for name, type in columns -%}
    {%- do exprs.append(adapter.quote(name) if name | lower in present else 'cast(null as ' ~ type ~ ') as ' ~ adapter.quote(name)) -%}
  {%- endfor -%}
  {{ return(exprs | join(', ')) }}
{% endmacro %}

{#- A dbt model contract (`contract: {enforced: true}`, columns in the model's YAML), checked
    before the run writes or pins anything: the rows it writes (`rows_sql`) must have exactly the
    contract's columns, each of its data_type as Spark parses it (`integer` is `int`), and no row
    may break a `not_null` constraint or a `check` constraint (a column's or the model's; a check
    that is null passes, as in SQL). Other constraint kinds are not enforced (dbt warns about them
    when it parses the project). The constraints are checked on the rows, not added to the Delta
    table: open-source Delta cannot make an existing column NOT NULL, and a constraint added after
    the output is written leaves a window in which a crash loses it. -#}
{% macro assert_contract(rows_sql) %}
  {%- set contract = config.get('contract') -%}
  {%- if not (contract and contract.enforced) -%}{{ return(none) }}{%- endif -%}
  {%- set declared = model.columns.values() | list -%}
  {%- set problems, casts, untyped = [], [], [] -%}
  {%- for c in declared -%}
    {%- if not c.data_type -%}
      {%- do problems.append('`' ~ c.name ~ '` has no data_type in the contract') -%}
      {%- do untyped.append(c.name | lower) -%}
    {%- else -%}{%- do casts.append('cast(null as ' ~ c.data_type ~ ') as ' ~ adapter.quote(c.name)) -%}{%- endif -%}
  {%- endfor -%}
  {%- set expected = {} -%}
  {%- if casts -%}
    {%- for name, type in incremental_joins.query_schema('select ' ~ casts | join(', ')) -%}{%- do expected.update({name | lower: type}) -%}{%- endfor -%}
  {%- endif -%}
  {%- set selected = {} -%}
  {%- for name, type in incremental_joins.query_schema(rows_sql) -%}
    {%- do selected.update({name | lower: type}) -%}
    {%- if name | lower not in expected and name | lower not in untyped -%}
      {%- do problems.append('`' ~ name ~ '` (' ~ type ~ ') is written but not in the contract') -%}
    {%- elif name | lower in expected and expected[name | lower] != type -%}
      {%- do problems.append('`' ~ name ~ '` is ' ~ type ~ ', the contract says ' ~ expected[name | lower]) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- for name in expected if name not in selected -%}{%- do problems.append('`' ~ name ~ '` of the contract is not written') -%}{%- endfor -%}
  {%- if problems -%}
    {{ exceptions.raise_compiler_error(model.name ~ ": the model's contract is enforced, and the rows this run would write do not match it: " ~ problems | join('; ') ~ ". Change the model's select (e.g. cast a column to its declared type) or the columns and their data_type in the model's YAML. Nothing was written.") }}
  {%- endif -%}
  {#- Each constraint, with its column (none for the model's), as a check on the rows. -#}
  {%- set constraints, checks = [], [] -%}
  {%- for c in declared -%}{%- for k in c.constraints -%}{%- do constraints.append([k, c.name]) -%}{%- endfor -%}{%- endfor -%}
  {%- for k in model.constraints -%}{%- do constraints.append([k, none]) -%}{%- endfor -%}
  {%- for k, column in constraints if k.type == 'check' or k.type == 'not_null' and column -%}
    {%- set what = 'the ' ~ k.type ~ ' constraint ' ~ (k.name ~ ' ' if k.name else '') ~ ('on `' ~ column ~ '` ' if column else '') ~ ('(' ~ k.expression ~ ') ' if k.type == 'check' else '') -%}
    {%- do checks.append(incremental_joins.rows_check('(' ~ rows_sql ~ ') as __ij_rows', adapter.quote(column) ~ ' is null' if k.type == 'not_null' else 'not (' ~ k.expression ~ ')',
                                                      'the rows this run would write break ' ~ what ~ "of the model's enforced contract ({n} of them)",
                                                      "Filter or fill such rows in the model body or upstream, or change the constraint in the model's YAML.")) -%}
  {%- endfor -%}
  {%- if checks -%}{%- do incremental_joins.checked_counts([], checks) -%}{%- endif -%}
{% endmacro %}

{#- The whole output from `new_rows`: created on a first run or --full-refresh; otherwise (a
    recompute chosen by the operator) merged change-minimally, so the change feed stays exact.
    `columns`: the output's, as assert_output_columns returned them; `uncomparable` those of them
    compared by their JSON text (merge_changes). Returns [write metrics, mode].

    The recompute is first compared with the output in one full outer join by key (values
    null-safe), and only the rows that differ go into the MERGE: new or changed rows, and output
    rows whose key the recompute lacks. A MERGE of the whole recompute made Delta materialize every
    recomputed row and join them all with the output twice (the benchmark's 10M rows, ~1% changed:
    that MERGE 109-123 s; the comparison and the MERGE of the difference 61-68 s). The difference
    is staged eagerly, so its size is known: up to `broadcast_below` rows it is broadcast into the
    MERGE (merge_changes). -#}
{% macro write_all(new_rows, key_columns, recompute_sql, columns, broadcast_below=1000000, uncomparable=[]) %}
  {%- if load_cached_relation(this) is none or should_full_refresh() -%}
    {%- do incremental_joins.create_output(new_rows, key_columns, recompute_sql) -%}
    {{ return([incremental_joins.last_write_metrics(this, -1), 'full_refresh']) }}
  {%- endif -%}
  {%- do model.update({'incremental_joins_recompute_sql': recompute_sql}) -%}  {#- for record_definition -#}
  {%- set picked = [] -%}
  {%- for c in columns -%}
    {%- do picked.append('if(n.__ij_new, n.' ~ adapter.quote(c) ~ ', t.' ~ adapter.quote(c) ~ ') as ' ~ adapter.quote(c)) -%}
  {%- endfor -%}
  {%- set same = incremental_joins.same_values(columns, key_columns, 'n', 't', uncomparable) -%}
  {%- set changes = incremental_joins.stage('changes', 'select ' ~ picked | join(', ') ~ ', n.__ij_new is null as __ij_gone'
        ~ ' from (select *, true as __ij_new from (' ~ new_rows ~ ') as r) as n full outer join (select *, true as __ij_old from ' ~ this ~ ') as t'
        ~ ' on ' ~ incremental_joins.keys_match(key_columns, 'n', 't')
        ~ ' where n.__ij_new is null or t.__ij_old is null' ~ (' or not ' ~ same if same else ''), eager=true) -%}
  {%- set changed = incremental_joins.scalar('select count(*) from ' ~ changes) -%}
  {%- set rows = 'select ' ~ incremental_joins.column_list(columns) ~ ' from ' ~ changes ~ ' where ' -%}
  {{ return([incremental_joins.merge_changes(this, rows ~ 'not __ij_gone', rows ~ '__ij_gone', key_columns, columns, 'main',
                                             broadcast=changed <= broadcast_below, uncomparable=uncomparable), 'fallback']) }}
{% endmacro %}
