{#- foreign_key_join (KIP-213; SPEC §2): the output holds joiner(left row, right row by foreign key)
    for every left row, kept current by each run from the inputs' changes only.

    resolve config → pin input versions → read changes → affected left keys (left changes, plus
    right changes fanned out through the CombinedKey index) → recompute those rows → MERGE output
    → MERGE index → advance highwater → log. See README for the flowchart. -#}
{% materialization foreign_key_join, adapter='spark', supported_languages=['sql', 'python'] %}
  {%- set started_at = modules.datetime.datetime.utcnow() -%}
  {%- set cfg = incremental_joins.foreign_key_join_config() -%}
  {%- set inputs = incremental_joins.join_inputs(cfg.on_missing_history) -%}
  {%- set inputs = incremental_joins.run_inputs(inputs) -%}
  {%- if inputs is none -%}{{ return({'relations': [this]}) }}{%- endif -%}  {#- dbt --empty, the output exists -#}
  {%- do incremental_joins.check_foreign_key(cfg, inputs.left) -%}
  {%- set run = incremental_joins.begin_run(inputs.values(), cfg.on_missing_history, [incremental_joins.state_relation('index')],
                                            definition=incremental_joins.model_definition(cfg, ['left_key', 'right_key', 'foreign_key', 'join_type', 'output_key']),
                                            on_recreated='recompute', merged=incremental_joins.merged_queries(inputs, sql)) -%}
  {%- set consumed, versions, full_reason = run.consumed, run.versions, run.full_reason -%}

  {%- set plans = {} -%}
  {%- for name in versions if full_reason is none -%}
    {%- do plans.update({name: incremental_joins.change_plan(name, consumed[name], versions[name], run.commits.get(name), cfg.append_new_columns)}) -%}
  {%- endfor -%}
  {%- set plan = incremental_joins.fk_join_plan(cfg, inputs, consumed, versions, plans, full_reason) -%}
  {%- set new_rows = none -%}
  {%- if plan.left_sql is not defined -%}
  {%- elif model.language == 'python' -%}
    {#- A Python body runs here, in the materialization itself, as dbt requires. -#}
    {%- call statement('python_body', language='python') -%}{{ incremental_joins.python_body(cfg, plan) }}{%- endcall -%}
    {%- set new_rows = 'select * from ' ~ incremental_joins.state_relation('python_rows') -%}
  {%- else -%}
    {%- set new_rows = incremental_joins.with_inputs(sql, {'left': plan.left_sql, 'right': plan.right_sql}) -%}
  {%- endif -%}
  {%- set stats = incremental_joins.fk_join_write(cfg, plan, new_rows, run) -%}

  {% do incremental_joins.end_run('foreign_key_join', started_at, stats, run) %}
  {{ return({'relations': [this]}) }}
{% endmaterialization %}


{#- {'left': relation name, 'right': relation name}: from the join() markers, or for a Python
    body from its dbt.ref()/dbt.source() calls. -#}
{% macro join_inputs(on_missing_history) %}
  {%- if model.language == 'python' -%}{{ return(incremental_joins.python_join_inputs()) }}{%- endif -%}
  {{ return(incremental_joins.marked_inputs(sql, ['left', 'right'], "select ... from {{ incremental_joins.join(ref('orders'), ref('customers')) }}", on_missing_history)) }}
{% endmacro %}

{#- Every foreign-key expression must compile against the left input, checked before anything is
    written. EXPLAIN of EXECUTE IMMEDIATE reports parse and analysis errors as text instead of
    failing, so the message can name the config key and the fix. -#}
{% macro check_foreign_key(cfg, left) %}
  {%- for expr in cfg.foreign_key -%}
    {%- set probe = 'select (' ~ expr ~ ') from ' ~ left ~ ' where false' -%}
    {%- set plan = incremental_joins.scalar("explain extended execute immediate " ~ incremental_joins.string_literal(probe)) -%}
    {%- set failure = modules.re.search('== Analyzed Logical Plan ==\\s*\\S*(?:Exception|Error):\\s*([^\\n]+)', plan) -%}
    {%- if failure -%}
      {%- set columns = adapter.get_columns_in_relation(incremental_joins.parse_relation(left)) | map(attribute='name') | list -%}
      {{ incremental_joins.config_error('foreign_key', expr, 'does not compile against the left input ' ~ left ~ ': ' ~ failure.group(1) | trim, 'write a column or an SQL expression over the left columns (' ~ columns | join(', ') ~ ')') }}
    {%- endif -%}
  {%- endfor -%}
{% endmacro %}
