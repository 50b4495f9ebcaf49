{#- changelog_table's config, resolved and validated once (SPEC §1). -#}
{% macro changelog_table_config() %}
  {%- set default_mapping = {'c': 'upsert', 'r': 'upsert', 'u': 'upsert', 'd': 'delete',
                             'insert': 'upsert', 'update': 'upsert', 'delete': 'delete'} -%}
  {%- set mapping = incremental_joins.config_value('operation_mapping', default_mapping) -%}
  {%- if mapping is not mapping or mapping | length == 0 -%}
    {{ incremental_joins.config_error('operation_mapping', mapping, 'must be a dict from operation value to upsert, delete or ignore', "e.g. {'c': 'upsert', 'u': 'upsert', 'd': 'delete', 't': 'ignore'}") }}
  {%- endif -%}
  {%- set normalized = {} -%}
  {%- for value, kind in mapping.items() -%}
    {%- if kind not in ['upsert', 'delete', 'ignore'] -%}
      {{ incremental_joins.config_error('operation_mapping', value ~ ': ' ~ kind, "maps an operation to '" ~ kind ~ "', which is not upsert, delete or ignore", 'map every operation value to one of those') }}
    {%- endif -%}
    {%- do normalized.update({value | string | lower: kind}) -%}
  {%- endfor -%}
  {%- set retention = incremental_joins.duration_config('tombstone_retention', '7 days', "'7 days', '12 hours' or '30 minutes'") -%}
  {{ return(incremental_joins.with_schema_change({
      'key': incremental_joins.require_config('key'),
      'sequence': incremental_joins.columns_config('sequence', required=true),
      'operation': incremental_joins.column_config('operation', default='op'),
      'mapping': normalized,
      'arrival_order': incremental_joins.columns_config('arrival_order'),
      'payload': incremental_joins.column_config('payload'),
      'value_columns': incremental_joins._as_list(incremental_joins.config_value('value_columns')),
      'tombstone_retention': retention.sql,
  })) }}
{% endmacro %}
