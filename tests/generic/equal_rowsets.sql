{#- Fails with every row that is in one relation and not the other, counting duplicates
    (EXCEPT ALL both ways). Compares the columns of `compare_model`. -#}
{% test equal_rowsets(model, compare_model) %}
  {%- set columns = '*' -%}
  {%- if execute -%}
    {%- set columns = adapter.get_columns_in_relation(compare_model) | map(attribute='quoted') | join(', ') -%}
  {%- endif %}
  with actual as (select {{ columns }} from {{ model }}),
  expected as (select {{ columns }} from {{ compare_model }})
  select 'missing' as diff, missing.* from (select * from expected except all select * from actual) as missing
  union all
  select 'unexpected' as diff, unexpected.* from (select * from actual except all select * from expected) as unexpected
{% endtest %}
