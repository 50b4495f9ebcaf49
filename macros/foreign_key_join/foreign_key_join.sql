{#- foreign_key_join (KIP-213; SPEC §2): the output holds joiner(left row, right row by foreign key)
    for every left row, kept current by each run from the inputs' changes only.

    resolve config → pin input versions → read changes → affected left keys (left changes, plus
    right changes fanned out through the CombinedKey index) → recompute those rows → MERGE output
    → MERGE index → advance highwater → log. See README for the flowchart. -#}
{% materialization foreign_key_join, adapter='spark', supported_languages=['sql'] %}
  {%- set started_at = modules.datetime.datetime.utcnow() -%}
  {%- set cfg = incremental_joins.foreign_key_join_config() -%}
  {%- set inputs = incremental_joins.join_inputs(sql) -%}
  {%- set existing = load_cached_relation(this) -%}
  {%- set index = incremental_joins.state_relation('index') -%}
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
  {%- do incremental_joins.check_foreign_key(cfg, inputs.left) -%}

  {%- set full_reason = none -%}
  {%- if existing is none -%}{%- set full_reason = 'first run' -%}
  {%- elif should_full_refresh() -%}{%- set full_reason = '--full-refresh' -%}
  {%- elif none in consumed.values() or not adapter.get_relation(database=none, schema=index.schema, identifier=index.identifier) -%}{%- set full_reason = 'no highwater' -%}
  {%- elif none in versions.values() -%}{%- set full_reason = "input without history, on_missing_history='recompute'" -%}
  {%- endif -%}

  {%- if full_reason is none -%}
    {%- set plans = {} -%}
    {%- for name in versions -%}
      {%- do plans.update({name: incremental_joins.change_plan(name, consumed[name], versions[name])}) -%}
    {%- endfor -%}
    {%- set stats = incremental_joins.fk_join_incremental(cfg, inputs, consumed, versions, plans, existing, index) -%}
  {%- else -%}
    {%- set stats = incremental_joins.fk_join_full(cfg, inputs, versions, existing, index, full_reason) -%}
  {%- endif -%}

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
{% macro join_inputs(sql) %}
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

{#- A foreign key written as a plain column name must be a column of the left input. -#}
{% macro check_foreign_key(cfg, left) %}
  {%- set columns = adapter.get_columns_in_relation(incremental_joins.parse_relation(left)) | map(attribute='name') | map('lower') | list -%}
  {%- for expr in cfg.foreign_key if modules.re.match('^\\w+$', expr) and expr | lower not in columns -%}
    {{ incremental_joins.config_error('foreign_key', expr, 'is not a column of the left input ' ~ left ~ ' (' ~ columns | join(', ') ~ ')', 'name a left column, or write an SQL expression over the left columns') }}
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
