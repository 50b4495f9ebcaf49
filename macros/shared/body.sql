{#- Model bodies name their inputs with marker macros — incremental_joins.join(ref(..), ref(..))
    for the two sides of a join, incremental_joins.stream(ref(..)) for a stream — so that the
    refs sit in the body (dbt's DAG stays right) and, run as it is, the body is the full
    recompute. Each marker leaves `/*ij:<side>*/ <relation>` in the compiled SQL; the
    materialization puts a version-pinned, key-restricted subquery in its place. -#}

{#- A stream input (append-only; SPEC §0): `select ... from {{ incremental_joins.stream(ref('events')) }}`.
    Each run, the body sees the input's new records with Delta's `_ij_commit_version` and
    `_ij_commit_timestamp` columns (the arrival order; in place of the input's own, when it is
    an output that kept a stream's: stream_records_sql). A dbt unit test of a model that reads a
    stream this way (deduplicate, changelog_table) is refused: its rows are not a select of them. -#}
{% macro stream(relation) %}
  {%- if execute and incremental_joins.unit_tested_config() is not none -%}
    {%- set msg -%}
{{ model.name }} (a unit test of {{ model.tested_node_unique_id.split('.')[-1] }}): a dbt unit test runs the model's SQL once, as a plain select over the given rows, but a {{ incremental_joins.config_value('materialized') }} model's rows come from a fold over its stream in arrival order, started from the state its earlier runs stored — which that select does not compute, so the test could only check the rows before it. Test the built model instead, with data tests: incremental_joins.equal_rowsets against expected rows, incremental_joins.equals_full_recompute. foreign_key_join and stream_table_join models can be unit tested.
    {%- endset -%}
    {{ exceptions.raise_compiler_error(msg) }}
  {%- endif -%}
  /*ij:stream*/ {{ relation }}
{%- endmacro %}

{#- A relation as dbt's --empty renders it: `(select * from <name> where false limit 0)`, with an
    alias on adapters that require one (databricks). Group 1: the name. -#}
{% macro empty_ref_pattern() %}
  {{ return('\\(select \\* from (\\S+) where false limit 0\\)(?: _dbt_limit_subq_\\w+)?') }}
{% endmacro %}

{#- `sql` with every relation dbt's --empty rendered empty, and every empty copy of an input
    (run_inputs), named as it is: the full recompute an output built by --empty keeps
    (create_output). -#}
{% macro without_empty_refs(sql) %}
  {%- set out = namespace(sql=modules.re.sub(incremental_joins.empty_ref_pattern(), '\\1', sql)) -%}
  {%- for name, copy in model.get('incremental_joins_empty_copies', {}).items() -%}
    {%- set out.sql = out.sql.replace(copy, name) -%}
  {%- endfor -%}
  {{ return(out.sql) }}
{% endmacro %}

{#- The marker of input `side` and the relation after it (group 1 or 2: its name). -#}
{% macro marker_pattern(side) %}
  {{ return('/\\*ij:' ~ side ~ '\\*/\\s*(?:' ~ incremental_joins.empty_ref_pattern() ~ '|(\\S+))') }}
{% endmacro %}

{#- {side: relation name} for the markers `sides` found in the compiled SQL; `usage` shows how
    the body is written, for the error when one is missing. `on_missing_history`: the model's
    config of that name, none for an operator without it (as begin_run takes it). -#}
{% macro marked_inputs(sql, sides, usage, on_missing_history=none) %}
  {%- set found = {} -%}
  {%- for side in sides -%}
    {%- set match = modules.re.search(incremental_joins.marker_pattern(side), sql or '') -%}
    {%- if not match -%}
      {%- set msg -%}
{{ model.name }}: a {{ config.get('materialized') }} model reads its input through a marker macro, and none was found in its SQL. Write the body as `{{ usage }}`.
      {%- endset -%}
      {{ exceptions.raise_compiler_error(msg) }}
    {%- endif -%}
    {%- set name = match.group(1) or match.group(2) -%}
    {%- if name.startswith('(') -%}{%- do incremental_joins.refuse_query_input(side, sql[match.start(2):]) -%}{%- endif -%}
    {%- if name.startswith('__dbt__cte__') -%}{%- do incremental_joins.refuse_ephemeral_input(side, name, on_missing_history) -%}{%- endif -%}
    {%- do found.update({side: name}) -%}
  {%- endfor -%}
  {{ return(found) }}
{% endmacro %}

{#- An input dbt rendered as a query (`rendered`, from where it starts): a ref or source with an
    event_time under --sample. -#}
{% macro refuse_query_input(side, rendered) %}
  {%- set msg -%}
{{ model.name }}: its {{ side }} input is a query, not a table: `{{ (rendered | truncate(120, true, '...')) | replace('\n', ' ') }}` — dbt renders a ref or source that has an event_time this way under --sample (or for a microbatch model). A {{ config.get('materialized') }} model reads each input's Delta changes, so it runs over whole inputs: run it without --sample (e.g. `--exclude {{ model.name }}`).
  {%- endset -%}
  {{ exceptions.raise_compiler_error(msg) }}
{% endmacro %}

{#- An input that is an ephemeral model: dbt inlines it as a CTE named `__dbt__cte__<model>`,
    which has no table, so no Delta history to read changes from. -#}
{% macro refuse_ephemeral_input(side, cte, on_missing_history) %}
  {%- set upstream = cte | replace('__dbt__cte__', '', 1) -%}
  {%- set msg -%}
{{ model.name }}: its {{ side }} input {{ upstream }} is an ephemeral model, which dbt inlines as a CTE ({{ cte }}) and stores nowhere; a {{ config.get('materialized') }} model reads what changed in each input from the input's Delta table. Materialize {{ upstream }} as a table or an incremental model (e.g. config(materialized='incremental') in {{ upstream }}; a dbt `table` model is read by comparing two versions){{ ", or as a view with on_missing_history='recompute' in " ~ model.name ~ " (then recomputed whole every run)" if on_missing_history is not none else '' }}. Nothing was written.
  {%- endset -%}
  {{ exceptions.raise_compiler_error(msg) }}
{% endmacro %}

{#- The model SQL with each marked input (every occurrence of its marker) replaced by a subquery:
    {side: sql}. -#}
{% macro with_inputs(sql, replacements) %}
  {%- set out = namespace(sql=sql) -%}
  {%- for side, rows_sql in replacements.items() -%}
    {#- The subquery's backslashes escaped: re.sub reads them in its replacement. -#}
    {%- set out.sql = modules.re.sub(incremental_joins.marker_pattern(side), ('(' ~ rows_sql ~ ')').replace('\\', '\\\\'), out.sql) -%}
  {%- endfor -%}
  {{ return(out.sql) }}
{% endmacro %}
