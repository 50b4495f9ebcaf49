{#- The highwater table (one per model, beside it, so that models running in parallel threads
    never write the same state table): per input, the Delta version the model has consumed
    (`version`) and the version the run in progress reads (`pending_version`).

    A run first pins its versions as pending; a retried run after a crash finds them and reads
    exactly the same versions again, so every write it repeats is a no-op; the last step of a run
    moves pending to consumed (`advance_highwater`).

    The table is append-only: each pin and each advance appends a row per input, and the newest
    row of an input is its state. A blind append is the cheapest Delta commit (it reads nothing
    and conflicts with nothing); an overwrite of even a two-row table costs several times as
    much. `read_highwater` compacts the table to its newest rows once it holds `compact_above` rows. -#}

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
      updated_at timestamp comment 'when the row was appended; the newest row of an input is its state'
    ) using delta
  {%- endcall %}
{% endmacro %}

{#- {input: {'version': v or none, 'pending': p or none}} for this model: the newest row of each
    input (an advance is appended after the pin of its run, so it also wins a tie). A table of
    `compact_above` rows or more with no run pending is first replaced by its newest rows. -#}
{% macro read_highwater(compact_above=64) %}
  {%- set rows = run_query("select input, version, pending_version, total from (select *, row_number() over (partition by input order by updated_at desc, pending_version is null desc) as recency, count(*) over () as total from " ~ incremental_joins.highwater_relation() ~ ") as h where recency = 1").rows -%}
  {%- set out = {} -%}
  {%- for r in rows -%}{%- do out.update({r[0]: {'version': r[1], 'pending': r[2]}}) -%}{%- endfor -%}
  {%- if rows and rows[0][3] >= compact_above and out.values() | map(attribute='pending') | reject('none') | list | length == 0 -%}
    {% do incremental_joins.write_highwater('compact', out, overwrite=true) %}
  {%- endif -%}
  {{ return(out) }}
{% endmacro %}

{#- Record the versions this run reads as pending, before its first write. -#}
{% macro pin_versions(run) %}
  {%- set rows = {} -%}
  {%- for name, v in run.versions.items() -%}
    {%- do rows.update({name: {'version': run.highwater.get(name, {}).get('version'), 'pending': v}}) -%}
  {%- endfor -%}
  {% do incremental_joins.write_highwater('pin', rows) %}
{% endmacro %}

{#- The last write of a run: the pinned versions become the consumed ones. -#}
{% macro advance_highwater(versions) %}
  {%- set rows = {} -%}
  {%- for name, v in versions.items() -%}{%- do rows.update({name: {'version': v, 'pending': none}}) -%}{%- endfor -%}
  {% do incremental_joins.write_highwater('advance', rows) %}
{% endmacro %}

{#- Append one row per input ({input: {'version': v, 'pending': p}}), or with `overwrite`
    replace the table by them. -#}
{% macro write_highwater(step, rows, overwrite=false) %}
  {%- set values = [] -%}
  {%- for name, row in rows.items() -%}
    {%- do values.append("('" ~ name ~ "', cast(" ~ (row.version if row.version is not none else 'null') ~ " as bigint), cast(" ~ (row.pending if row.pending is not none else 'null') ~ " as bigint), current_timestamp())") -%}
  {%- endfor -%}
  {% call statement(step ~ '_highwater') -%}
    insert {{ 'overwrite' if overwrite else 'into' }} {{ incremental_joins.highwater_relation() }} values {{ values | join(', ') }}
  {%- endcall %}
{% endmacro %}
