{#- The highwater table (one per model, beside it, so that models running in parallel threads
    never write the same state table): per input, the Delta version the model has consumed
    (`version`) and the version the run in progress reads (`pending_version`).

    A run first pins its versions as pending; a retried run after a crash finds them and reads
    exactly the same versions again, so every write it repeats is a no-op; the last step of a run
    moves pending to consumed (`advance_highwater`). -#}

{% macro highwater_relation() %}
  {{ return(incremental_joins.state_relation('highwater')) }}
{% endmacro %}

{% macro create_highwater() %}
  {%- set relation = incremental_joins.highwater_relation() -%}
  {#- dbt's relation cache answers without a query. -#}
  {%- if adapter.get_relation(database=none, schema=relation.schema, identifier=relation.identifier) is not none -%}{{ return(none) }}{%- endif -%}
  {% call statement('create_highwater') -%}
    create table if not exists {{ incremental_joins.highwater_relation() }} (
      input string comment 'input relation',
      version bigint comment 'last Delta version of the input that the model consumed',
      pending_version bigint comment 'version the run in progress reads; null between runs',
      updated_at timestamp
    ) using delta
  {%- endcall %}
{% endmacro %}

{#- {input: {'version': v or none, 'pending': p or none}} for this model. -#}
{% macro read_highwater() %}
  {%- set rows = run_query("select input, version, pending_version from " ~ incremental_joins.highwater_relation() ~ "").rows -%}
  {%- set out = {} -%}
  {%- for r in rows -%}{%- do out.update({r[0]: {'version': r[1], 'pending': r[2]}}) -%}{%- endfor -%}
  {{ return(out) }}
{% endmacro %}

{#- Record the versions this run reads as pending, before its first write. The table has a row
    per input, so a whole-table overwrite is the cheapest atomic write. -#}
{% macro pin_versions(versions) %}
  {%- set rows = [] -%}
  {%- for name, v in versions.items() -%}
    {%- do rows.append("('" ~ name ~ "', cast(" ~ (v if v is not none else 'null') ~ " as bigint))") -%}
  {%- endfor -%}
  {% call statement('pin_versions') -%}
    insert overwrite {{ incremental_joins.highwater_relation() }}
    select s.input, t.version, s.pending_version, current_timestamp()
    from (select col1 as input, col2 as pending_version from values {{ rows | join(', ') }}) as s
    left join {{ incremental_joins.highwater_relation() }} as t on t.input = s.input
  {%- endcall %}
{% endmacro %}

{% macro advance_highwater() %}
  {% call statement('advance_highwater') -%}
    insert overwrite {{ incremental_joins.highwater_relation() }}
    select input, pending_version, cast(null as bigint), current_timestamp()
    from {{ incremental_joins.highwater_relation() }}
  {%- endcall %}
{% endmacro %}
