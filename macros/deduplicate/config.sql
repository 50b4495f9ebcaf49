{#- deduplicate's config, resolved and validated once (SPEC §3). -#}
{% macro deduplicate_config() %}
  {%- set key = incremental_joins._as_list(incremental_joins.config_value('key')) -%}
  {%- set id = incremental_joins.config_value('id') -%}
  {%- set strategy = incremental_joins.require_choice('strategy', ['interval', 'tumbling', 'session'], 'interval') -%}
  {%- if not key and not id -%}
    {{ incremental_joins.config_error('key', none, 'or config id must be set: records are duplicates when they have the same key, the same key and id, or the same id', "set key='user_id', id='event_id', or both") }}
  {%- endif -%}
  {%- if strategy != 'interval' and id -%}
    {{ incremental_joins.config_error('id', id, "is for strategy 'interval'; windowed distinct ('" ~ strategy ~ "') keeps the first record per key and window", 'unset id, or put the id into key') }}
  {%- endif -%}
  {%- set interval = incremental_joins.duration_config('interval', example="'10 seconds'") -%}
  {%- if interval is none -%}
    {{ incremental_joins.config_error('interval', none, 'is required (' ~ {'interval': 'how long a forwarded record suppresses its duplicates', 'tumbling': 'the window size', 'session': 'the inactivity gap'}[strategy] ~ ')', "set e.g. interval='10 minutes'") }}
  {%- elif strategy != 'interval' and interval.seconds == 0 -%}
    {{ incremental_joins.config_error('interval', interval.text, "must be positive for strategy '" ~ strategy ~ "'", "e.g. interval='10 seconds'") }}
  {%- endif -%}
  {{ return(incremental_joins.with_schema_change({
      'key': key, 'id': id, 'strategy': strategy,
      'interval': interval.sql,
      'event_time': incremental_joins.column_config('event_time', required=true),
      'arrival_order': incremental_joins.columns_config('arrival_order'),
      'partition_by': incremental_joins.column_config('partition_by'),
      'replace_state_below': incremental_joins.non_negative_config('replace_state_below', 1000000, 'must be a number of store entries, 0 or more', 'e.g. 1000000 rewrites the store whole while it holds at most a million entries and MERGEs above; 0 always MERGEs'),
  })) }}
{% endmacro %}
