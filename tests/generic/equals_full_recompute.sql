{#- For any incremental_joins operator model: its current content equals a full recompute from its
    inputs as they are now (the SQL the model was created with). Fails with the differing rows.
    Run it right after `dbt run`: input changes since then make it differ until the next run. -#}
{% test equals_full_recompute(model) %}
  {%- set recompute = 'select * from ' ~ model -%}
  {%- if execute -%}
    {%- set recompute = incremental_joins.table_property(model, 'incremental_joins.recompute_sql') -%}
    {%- if recompute is none -%}
      {{ exceptions.raise_compiler_error('equals_full_recompute: ' ~ model ~ ' has no incremental_joins.recompute_sql property; it is not built by an incremental_joins materialization, has a Python body (no SQL recompute to compare with), or was built by an older version (run it with --full-refresh).') }}
    {%- endif -%}
  {%- endif %}
  {{ incremental_joins.rowset_difference('select * from ' ~ model, recompute) }}
{% endtest %}
