{#- Fails when the model's Delta table does not have the Change Data Feed on (SPEC property 4:
    every output can be the input of another operator). -#}
{% test change_data_feed_enabled(model) %}
  {%- set found = namespace(value='unset') -%}
  {%- if execute -%}
    {%- for row in run_query('show tblproperties ' ~ incremental_joins.without_empty_refs(model | string)).rows -%}
      {%- if row[0] == 'delta.enableChangeDataFeed' -%}{%- set found.value = row[1] | lower -%}{%- endif -%}
    {%- endfor -%}
  {%- endif %}
  select '{{ model }}' as relation, '{{ found.value }}' as enable_change_data_feed
  from (select 1) as one
  where {{ 'false' if found.value == 'true' else 'true' }}
{% endtest %}
