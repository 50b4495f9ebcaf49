{#- For any incremental_joins operator model: its current content equals a full recompute from its
    inputs as they are now (the SQL the model was created with). Fails with the differing rows.
    Run it right after `dbt run`: input changes since then make it differ until the next run.
    Under `dbt build --empty` (the model read as no rows) it compares with no rows of the
    recompute: its SQL and columns are checked, not its rows. The columns are the recompute's,
    taken by name from the output. -#}
{% test equals_full_recompute(model) %}
  {%- set recompute = 'select * from ' ~ model -%}
  {%- if execute -%}
    {%- set table = incremental_joins.without_empty_refs(model | string) -%}
    {%- set recompute = incremental_joins.table_property(table, 'incremental_joins.recompute_sql') -%}
    {%- if recompute is none -%}
      {{ exceptions.raise_compiler_error('equals_full_recompute: ' ~ table ~ ' has no incremental_joins.recompute_sql property; it is not built by an incremental_joins materialization, has a Python body (no SQL recompute to compare with), or was built by an older version (run it with --full-refresh).') }}
    {%- endif -%}
    {%- if flags.EMPTY -%}{%- set recompute = 'select * from (' ~ recompute ~ ') as r where false' -%}{%- endif -%}
    {#- Compared by the recompute's column names: with on_schema_change='append_new_columns' the
        output holds added columns last and keeps the ones the model no longer selects. -#}
    {%- set schema = incremental_joins.query_schema(recompute) -%}
    {%- set actual = 'select ' ~ incremental_joins.column_list(schema | map('first') | list) ~ ' from ' ~ model -%}
  {%- endif %}
  {{ incremental_joins.rowset_difference(actual if execute else 'select * from ' ~ model, recompute, schema if execute else none) }}
{% endtest %}
