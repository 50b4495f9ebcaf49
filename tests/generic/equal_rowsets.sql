{#- Fails with every row that is in one relation and not the other, counting duplicates
    (EXCEPT ALL both ways). Compares the columns of `compare_model`. -#}
{% test equal_rowsets(model, compare_model) %}
  {%- set columns = '*' -%}
  {%- if execute -%}
    {%- set columns = adapter.get_columns_in_relation(compare_model) | map(attribute='quoted') | join(', ') -%}
  {%- endif %}
  {{ incremental_joins.rowset_difference('select ' ~ columns ~ ' from ' ~ model, 'select ' ~ columns ~ ' from ' ~ compare_model) }}
{% endtest %}
