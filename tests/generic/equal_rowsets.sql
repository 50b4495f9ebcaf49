{#- Fails with every row that is in one relation and not the other, counting duplicates
    (EXCEPT ALL both ways). Compares the columns of `compare_model`. -#}
{% test equal_rowsets(model, compare_model) %}
  {%- set columns, schema = '*', none -%}
  {%- if execute -%}
    {%- set schema = incremental_joins.query_schema('select * from ' ~ compare_model) -%}  {#- a relation or dbt --empty's subquery -#}
    {%- set columns = incremental_joins.column_list(schema | map('first') | list) -%}
  {%- endif %}
  {{ incremental_joins.rowset_difference('select ' ~ columns ~ ' from ' ~ model, 'select ' ~ columns ~ ' from ' ~ compare_model, schema) }}
{% endtest %}
