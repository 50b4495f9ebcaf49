{#- foreign_key_join (KIP-213; SPEC §2): the output holds joiner(left row, right row by foreign key)
    for every left row, kept current by each run from the inputs' changes only.

    resolve config → pin input versions → read changes → affected left keys (left changes, plus
    right changes fanned out through the CombinedKey index) → recompute those rows → MERGE output
    → MERGE index → advance highwater → log. See README for the flowchart. -#}
{% materialization foreign_key_join, adapter='spark', supported_languages=['sql', 'python'] %}
  {%- set started_at = modules.datetime.datetime.utcnow() -%}
  {%- set cfg = incremental_joins.foreign_key_join_config() -%}
  {%- set inputs = incremental_joins.join_inputs() -%}
  {%- set existing = load_cached_relation(this) -%}
  {%- set index = incremental_joins.state_relation('index') -%}
  {%- do incremental_joins.check_foreign_key(cfg, inputs.left) -%}
  {{ run_hooks(pre_hooks) }}
  {% do incremental_joins.create_highwater() %}

  {%- set highwater = incremental_joins.read_highwater() -%}
  {%- set consumed = {} -%}
  {%- set versions = {} -%}
  {%- for name in inputs.values() | unique -%}
    {%- do consumed.update({name: highwater.get(name, {}).get('version')}) -%}
    {%- set pending = highwater.get(name, {}).get('pending') -%}
    {%- set use_pending = pending is not none and not should_full_refresh() -%}
    {%- if not incremental_joins.has_delta_history(name, cfg.on_missing_history) -%}
      {%- do versions.update({name: none}) -%}
    {%- else -%}
      {%- do versions.update({name: pending if use_pending else incremental_joins.latest_version(name)}) -%}
    {%- endif -%}
  {%- endfor -%}

  {%- set full_reason = none -%}
  {%- if existing is none -%}{%- set full_reason = 'first run' -%}
  {%- elif should_full_refresh() -%}{%- set full_reason = '--full-refresh' -%}
  {%- elif none in consumed.values() or not adapter.get_relation(database=none, schema=index.schema, identifier=index.identifier) -%}{%- set full_reason = 'no highwater' -%}
  {%- elif none in versions.values() -%}{%- set full_reason = "input without history, on_missing_history='recompute'" -%}
  {%- endif -%}

  {%- set plans = {} -%}
  {%- for name in versions if full_reason is none -%}
    {%- do plans.update({name: incremental_joins.change_plan(name, consumed[name], versions[name])}) -%}
  {%- endfor -%}
  {%- set plan = incremental_joins.fk_join_plan(cfg, inputs, consumed, versions, plans, existing, full_reason) -%}
  {%- set new_rows = none -%}
  {%- if plan.left_sql is not defined -%}
  {%- elif model.language == 'python' -%}
    {#- A Python body runs here, in the materialization itself, as dbt requires. -#}
    {%- call statement('python_body', language='python') -%}{{ incremental_joins.python_body(cfg, inputs, plan) }}{%- endcall -%}
    {%- set new_rows = 'select * from ' ~ incremental_joins.state_relation('python_rows') -%}
  {%- else -%}
    {%- set new_rows = incremental_joins.with_inputs(sql, inputs, plan.left_sql, plan.right_sql) -%}
  {%- endif -%}
  {%- set stats = incremental_joins.fk_join_write(cfg, plan, new_rows, existing, versions) -%}

  {% do incremental_joins.inject_failure('before_highwater') %}
  {% do incremental_joins.advance_highwater() %}
  {% do incremental_joins.release_staged() %}
  {% do stats.update({'versions_read': versions}) %}
  {% do incremental_joins.log_run('foreign_key_join', started_at, stats) %}
  {{ run_hooks(post_hooks) }}
  {% do persist_docs(this, model) %}
  {{ return({'relations': [this]}) }}
{% endmaterialization %}


{#- {'left': relation name, 'right': relation name} from the markers join() left in the SQL. -#}
{% macro join_inputs() %}
  {%- if model.language == 'python' -%}{{ return(incremental_joins.python_join_inputs()) }}{%- endif -%}
  {%- set found = {} -%}
  {%- for side in ['left', 'right'] -%}
    {%- set match = modules.re.search('/\\*ij:' ~ side ~ '\\*/\\s*(\\S+)', sql) -%}
    {%- if not match -%}
      {%- set msg -%}
{{ model.name }}: a foreign_key_join model selects from {{ '{{' }} incremental_joins.join(ref('left_model'), ref('right_model')) {{ '}}' }}; no such join was found in its SQL. Write the body as `select ... from {{ '{{' }} incremental_joins.join(ref('orders'), ref('customers')) {{ '}}' }}`.
      {%- endset -%}
      {{ exceptions.raise_compiler_error(msg) }}
    {%- endif -%}
    {%- do found.update({side: match.group(1)}) -%}
  {%- endfor -%}
  {{ return(found) }}
{% endmacro %}

{#- Every foreign-key expression must compile against the left input, checked before anything is
    written. EXPLAIN of EXECUTE IMMEDIATE reports parse and analysis errors as text instead of
    failing, so the message can name the config key and the fix. -#}
{% macro check_foreign_key(cfg, left) %}
  {%- for expr in cfg.foreign_key -%}
    {%- set probe = 'select (' ~ expr ~ ') from ' ~ left ~ ' where false' -%}
    {%- set plan = incremental_joins.scalar("explain extended execute immediate '" ~ probe | replace('\\', '\\\\') | replace("'", "\\'") ~ "'") -%}
    {%- set failure = modules.re.search('== Analyzed Logical Plan ==\\s*\\S*(?:Exception|Error):\\s*([^\\n]+)', plan) -%}
    {%- if failure -%}
      {%- set columns = adapter.get_columns_in_relation(incremental_joins.parse_relation(left)) | map(attribute='name') | list -%}
      {{ incremental_joins.config_error('foreign_key', expr, 'does not compile against the left input ' ~ left ~ ': ' ~ failure.group(1) | trim, 'write a column or an SQL expression over the left columns (' ~ columns | join(', ') ~ ')') }}
    {%- endif -%}
  {%- endfor -%}
{% endmacro %}

{#- The model SQL with each input replaced by the given subquery. -#}
{% macro with_inputs(sql, inputs, left_sql, right_sql) %}
  {%- set out = sql.replace('/*ij:left*/ ' ~ inputs.left, '(' ~ left_sql ~ ')') -%}
  {{ return(out.replace('/*ij:right*/ ' ~ inputs.right, '(' ~ right_sql ~ ')')) }}
{% endmacro %}

{#- Tests only: stop a run at a named step to prove that a re-run repairs it. -#}
{% macro inject_failure(step) %}
  {%- if var('incremental_joins_fail_at', none) == step -%}
    {{ exceptions.raise_compiler_error(model.name ~ ': injected failure at ' ~ step ~ ' (var incremental_joins_fail_at)') }}
  {%- endif -%}
{% endmacro %}
