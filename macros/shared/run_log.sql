{#- The run log: one row per operator run (SPEC property 6, "visible work"). -#}

{% macro state_schema() %}
  {{ return(var('incremental_joins_state_schema', target.schema)) }}
{% endmacro %}

{% macro run_log_relation() %}
  {{ return(api.Relation.create(schema=incremental_joins.state_schema(), identifier='incremental_joins_run_log', type='table')) }}
{% endmacro %}

{% macro create_run_log() %}
  {{ return(adapter.dispatch('create_run_log', 'incremental_joins')()) }}
{% endmacro %}

{% macro default__create_run_log() %}
  {%- set relation = incremental_joins.run_log_relation() -%}
  create schema if not exists {{ relation.schema }};
  create table if not exists {{ relation }} (
    run_id string comment 'dbt invocation id',
    model string comment 'model name',
    relation string comment 'output relation',
    operator string comment 'materialization: foreign_key_join, changelog_table, deduplicate, stream_table_join',
    started_at timestamp,
    finished_at timestamp,
    duration_s double,
    mode string comment 'incremental, full_refresh or fallback',
    fallback_reason string comment 'why a full recompute was chosen instead of an incremental run',
    versions_read string comment 'JSON: relation -> the Delta version this run read (inputs and pinned state)',
    rows_read bigint comment 'change rows read from all inputs',
    affected_keys bigint comment 'output keys recomputed',
    rows_inserted bigint,
    rows_updated bigint,
    rows_deleted bigint,
    late_records bigint,
    dropped_duplicates bigint,
    fan_out bigint comment 'left rows reached through the index by right-side changes',
    ignored_records bigint comment 'records ignored: table changes older than the history horizon, stream records with a null key or value'
  ) using delta {{ incremental_joins.delta_tblproperties(state=true) }}
{% endmacro %}

{# Spark runs one statement per call: split the schema and table DDL. #}
{% macro spark__create_run_log() %}
  {%- set relation = incremental_joins.run_log_relation() -%}
  {% do run_query('create schema if not exists ' ~ relation.schema) %}
  {{ incremental_joins.default__create_run_log().split(';')[1] }}
{% endmacro %}

{#- Record one run (SPEC property 6) in the run log and in dbt's log output. `stats` keys are the
    run log's columns; missing counts are 0. -#}
{% macro log_run(operator, started_at, stats) %}
  {%- set duration = (modules.datetime.datetime.utcnow() - started_at).total_seconds() -%}
  {%- set counts = ['rows_read', 'affected_keys', 'rows_inserted', 'rows_updated', 'rows_deleted', 'late_records', 'dropped_duplicates', 'fan_out', 'ignored_records'] -%}
  {%- set values = [] -%}
  {%- for c in counts -%}{%- do values.append((stats.get(c) or 0) | int) -%}{%- endfor -%}
  {%- set summary = [] -%}
  {%- for c in counts if stats.get(c) -%}{%- do summary.append(c ~ '=' ~ stats.get(c)) -%}{%- endfor -%}
  {{ log(model.name ~ ': ' ~ operator ~ ' ' ~ stats.mode ~ (' (' ~ stats.fallback_reason ~ ')' if stats.get('fallback_reason') else '') ~ ', versions ' ~ tojson(stats.versions_read) ~ ', ' ~ summary | join(', ') ~ ', ' ~ '%.1f' | format(duration) ~ 's', info=true) }}
  {% call statement('log_run') -%}
    insert into {{ incremental_joins.run_log_relation() }} values (
      '{{ invocation_id }}', '{{ model.name }}', '{{ this }}', '{{ operator }}',
      {{ incremental_joins.timestamp_literal(modules.pytz.utc.localize(started_at)) }}, current_timestamp(), {{ duration }},
      '{{ stats.mode }}', {{ incremental_joins.string_literal(stats.get('fallback_reason') or none) }},
      '{{ tojson(stats.versions_read) }}', {{ values | join(', ') }}
    )
  {%- endcall %}
{% endmacro %}
