{#- foreign_key_join's config, resolved and validated once (snapshot-strategy style): the
    materialization and the body macros read this dict and nothing else. Runs before any SQL. -#}
{% macro foreign_key_join_config() %}
  {%- set left_key = incremental_joins.require_config('left_key') -%}
  {%- set right_key = incremental_joins.require_config('right_key') -%}
  {%- set foreign_key = incremental_joins.require_config('foreign_key') -%}
  {%- set join_type = incremental_joins.require_choice('join_type', ['inner', 'left', 'outer'], 'inner') -%}
  {%- set output_key = incremental_joins.require_choice('output_key', ['left', 'combined'], 'left') -%}
  {%- if foreign_key | length != right_key | length -%}
    {{ incremental_joins.config_error('foreign_key', foreign_key | join(', '), 'has ' ~ foreign_key | length ~ ' expressions but right_key has ' ~ right_key | length ~ ' columns', 'give one foreign-key expression per right_key column, in the same order') }}
  {%- endif -%}
  {%- if join_type == 'outer' and output_key != 'combined' -%}
    {{ incremental_joins.config_error('output_key', output_key, "must be 'combined' when join_type is 'outer' (a right row no left row references has no left key)", "set output_key='combined'") }}
  {%- endif -%}
  {%- set key_columns = (right_key + left_key) if output_key == 'combined' else left_key -%}
  {%- if key_columns | map('lower') | unique | list | length != key_columns | length -%}
    {{ incremental_joins.config_error('output_key', output_key, 'needs distinct column names for the combined key (' ~ key_columns | join(', ') ~ ')', "rename the left or right key columns upstream, or use output_key='left'") }}
  {%- endif -%}
  {%- set threshold = incremental_joins.non_negative_config('full_recompute_above', 0.5, 'must be a fraction of the left table, 0 or more', 'e.g. 0.5 recomputes everything when over half of the left rows are affected') -%}
  {%- set broadcast_below = incremental_joins.non_negative_config('broadcast_changes_below', 1000000, 'must be a number of rows, 0 or more', 'e.g. 1000000 broadcasts the changes into the output MERGE when at most a million keys are affected; 0 never does') -%}
  {{ return(incremental_joins.with_schema_change({
      'left_key': left_key, 'right_key': right_key, 'foreign_key': foreign_key,
      'join_type': join_type, 'output_key': output_key, 'key_columns': key_columns,
      'full_recompute_above': threshold, 'broadcast_changes_below': broadcast_below,
      'on_missing_history': incremental_joins.require_choice('on_missing_history', ['error', 'recompute'], 'error'),
  })) }}
{% endmacro %}
