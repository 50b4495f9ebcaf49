{#- Table maintenance between runs. `dbt run-operation incremental_joins.optimize_tables`
    (optionally `--args '{models: [orders_enriched]}'`) runs Delta's OPTIMIZE on the output and
    every state table of each operator model (all of them when `models` is not given) and on the
    run log, and logs each table's file count before and after. Every run adds small files (a
    MERGE writes its changed rows to new files, an append a file or a few) and nothing in a run
    compacts them; Databricks' predictive optimization or auto compaction do it there, on Spark
    this does. OPTIMIZE changes no rows, so a run after it reads no changes from it and stays
    incremental. Run it between runs, not during one: a run and an OPTIMIZE of the same table
    conflict in Delta (whichever commits second fails; a failed run is rerun safely). -#}
{% macro optimize_tables(models=none) %}
  {%- for relation in incremental_joins._maintained_tables('optimize_tables', models) -%}
    {%- set before = run_query('describe detail ' ~ relation).columns['numFiles'].values()[0] -%}
    {%- do run_query('optimize ' ~ relation) -%}
    {%- set after = run_query('describe detail ' ~ relation).columns['numFiles'].values()[0] -%}
    {{ log('optimize_tables: ' ~ relation ~ ': ' ~ before ~ ' files -> ' ~ after, info=true) }}
  {%- endfor -%}
{% endmacro %}

{#- `dbt run-operation incremental_joins.vacuum_tables` (optionally `--args '{models: [...],
    retain_hours: 336}'`) runs Delta's VACUUM on the same tables as optimize_tables: it deletes
    the files no version younger than the retention needs (those a MERGE or an OPTIMIZE replaced,
    and old change-feed files). Without retain_hours each table keeps its own retention
    (`delta.deletedFileRetentionDuration`, 7 days by default); Delta refuses a retention below
    it. The operators never read their own tables' history; a downstream operator reading an
    output's changes needs the output's history back to its own last run. -#}
{% macro vacuum_tables(models=none, retain_hours=none) %}
  {%- if retain_hours is not none and not (retain_hours is number and retain_hours >= 0) -%}
    {{ exceptions.raise_compiler_error("vacuum_tables: retain_hours (" ~ retain_hours ~ ") must be a number of hours, 0 or more; e.g. --args '{retain_hours: 336}' keeps two weeks, or leave it out to keep each table's own retention (delta.deletedFileRetentionDuration, 7 days by default).") }}
  {%- endif -%}
  {%- for relation in incremental_joins._maintained_tables('vacuum_tables', models) -%}
    {%- do run_query('vacuum ' ~ relation ~ (' retain ' ~ retain_hours ~ ' hours' if retain_hours is not none else '')) -%}
    {{ log('vacuum_tables: ' ~ relation ~ ' vacuumed' ~ (', files replaced more than ' ~ retain_hours ~ ' hours ago deleted' if retain_hours is not none else ' (its own retention)'), info=true) }}
  {%- endfor -%}
{% endmacro %}

{#- The tables the maintenance operations work on: the output and every state table of each
    operator model named in `models` (all of them when not given), then the run log; only those
    that exist. A name that is not an operator model is an error naming `operation`. -#}
{% macro _maintained_tables(operation, models) %}
  {%- set operators = ['foreign_key_join', 'changelog_table', 'deduplicate', 'stream_table_join'] -%}
  {%- set wanted = incremental_joins._as_list(models) -%}
  {%- set outputs = {} -%}
  {%- for node in graph.nodes.values() if node.resource_type == 'model' and node.config.materialized in operators and (not wanted or node.name in wanted) -%}
    {%- do outputs.update({node.name: api.Relation.create(database=node.database, schema=node.schema, identifier=node.alias, type='table')}) -%}
  {%- endfor -%}
  {%- set unknown = wanted | reject('in', outputs) | list -%}
  {%- if unknown -%}
    {%- set msg -%}
{{ operation }}: {{ unknown | join(', ') }} {{ 'is not a model' if unknown | length == 1 else 'are not models' }} of this project materialized as {{ operators | join(', ') }}. Name those models in `models` (e.g. --args '{models: [orders_enriched]}'), or leave it out to work on them all.
    {%- endset -%}
    {{ exceptions.raise_compiler_error(msg) }}
  {%- endif -%}
  {%- set tables = [] -%}
  {%- for name, output in outputs | dictsort -%}
    {%- do tables.append(output) -%}
    {%- for suffix in ['index', 'sequences', 'state', 'history', 'buffer', 'clock', 'runs', 'highwater'] -%}
      {%- do tables.append(incremental_joins.state_relation(suffix, output)) -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- do tables.append(incremental_joins.run_log_relation()) -%}
  {%- set existing = [] -%}
  {%- for relation in tables if load_cached_relation(relation) is not none -%}
    {%- do existing.append(relation) -%}
  {%- endfor -%}
  {{ return(existing) }}
{% endmacro %}
