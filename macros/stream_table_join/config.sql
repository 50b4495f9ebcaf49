{#- stream_table_join's config, resolved and validated once (SPEC §4). -#}
{% macro stream_table_join_config() %}
  {%- set key = incremental_joins.require_config('key') -%}
  {%- set table_key = incremental_joins._as_list(incremental_joins.config_value('table_key')) or key -%}
  {%- if table_key | length != key | length -%}
    {{ incremental_joins.config_error('table_key', table_key | join(', '), 'has ' ~ table_key | length ~ ' columns but key has ' ~ key | length, 'name one table column per stream key column, in the same order') }}
  {%- endif -%}
  {%- set retention = incremental_joins.duration_config('history_retention', example="'7 days'") -%}
  {%- set grace = incremental_joins.duration_config('grace_period', example="'10 minutes'") -%}
  {%- if grace is not none and retention is none -%}
    {{ incremental_joins.config_error('grace_period', grace.text, 'needs a versioned table: config history_retention is not set, so a buffered record could not be joined as of its own time', "set history_retention to at least the grace period (e.g. history_retention='1 day'), or remove grace_period") }}
  {%- endif -%}
  {%- if grace is not none and grace.seconds > retention.seconds -%}
    {{ incremental_joins.config_error('grace_period', grace.text, 'is longer than config history_retention (' ~ retention.text ~ '): a record released at the end of its grace period would look up table versions already purged', 'make grace_period at most history_retention (equal is allowed)') }}
  {%- endif -%}
  {%- set table_time = incremental_joins.column_config('table_time') -%}
  {%- if retention is not none and not table_time -%}
    {{ incremental_joins.config_error('table_time', none, 'is required with history_retention: each table change needs its timestamp to be placed in the history', "name the table's timestamp column, e.g. table_time='valid_from'") }}
  {%- endif -%}
  {{ return(incremental_joins.with_schema_change({
      'key': key, 'table_key': table_key,
      'event_time': incremental_joins.column_config('event_time', required=true),
      'table_time': table_time,
      'table_deleted': incremental_joins.column_config('table_deleted'),
      'join_type': incremental_joins.require_choice('join_type', ['inner', 'left'], 'inner'),
      'grace': grace, 'retention': retention,
      'arrival_order': incremental_joins.columns_config('arrival_order'),
      'value_columns': incremental_joins._as_list(incremental_joins.config_value('value_columns')),
  })) }}
{% endmacro %}
