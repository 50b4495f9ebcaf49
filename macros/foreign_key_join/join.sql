{#- The FROM clause of a foreign_key_join model: the left ("many") input joined to the right
    ("one") input on the configured foreign key. The model body is then an ordinary select list:

        select {{ incremental_joins.output_key() }}, l.amount, r.name as customer_name
        from {{ incremental_joins.join(ref('orders'), ref('customers')) }}

    Run as it is, the body is the full recompute. The markers let the materialization put
    version-pinned, key-restricted inputs in place of the two relations. -#}
{% macro join(left, right, left_alias='l', right_alias='r') %}
  {%- if not execute -%}{{ return(left ~ ' as ' ~ left_alias ~ ' cross join ' ~ right ~ ' as ' ~ right_alias) }}{%- endif -%}
  {%- set cfg = incremental_joins.foreign_key_join_config() -%}
  {%- set fk = [] -%}
  {%- for expr in cfg.foreign_key -%}{%- do fk.append('(' ~ expr ~ ') as __ij_fk' ~ loop.index) -%}{%- endfor -%}
  {%- set on = [] -%}
  {%- for rk in cfg.right_key -%}
    {%- do on.append(left_alias ~ '.__ij_fk' ~ loop.index ~ ' = ' ~ right_alias ~ '.' ~ adapter.quote(rk)) -%}
  {%- endfor -%}
  (select __ij_left.*, {{ fk | join(', ') }} from /*ij:left*/ {{ left }} as __ij_left) as {{ left_alias }}
  {{ {'inner': 'inner', 'left': 'left outer', 'outer': 'full outer'}[cfg.join_type] }} join /*ij:right*/ {{ right }} as {{ right_alias }}
    on {{ on | join(' and ') }}
{% endmacro %}

{#- The output key columns: the left key, or with output_key='combined' the foreign key (named as
    the right key; for an outer join's unreferenced right row, that row's key) and the left key. -#}
{% macro output_key(left_alias='l', right_alias='r') %}
  {%- if not execute -%}{{ return('1') }}{%- endif -%}
  {%- set cfg = incremental_joins.foreign_key_join_config() -%}
  {%- set cols = [] -%}
  {%- if cfg.output_key == 'combined' -%}
    {%- for rk in cfg.right_key -%}
      {%- do cols.append('coalesce(' ~ left_alias ~ '.__ij_fk' ~ loop.index ~ ', ' ~ right_alias ~ '.' ~ adapter.quote(rk) ~ ') as ' ~ adapter.quote(rk)) -%}
    {%- endfor -%}
  {%- endif -%}
  {%- for lk in cfg.left_key -%}{%- do cols.append(left_alias ~ '.' ~ adapter.quote(lk)) -%}{%- endfor -%}
  {{ return(cols | join(', ')) }}
{% endmacro %}
