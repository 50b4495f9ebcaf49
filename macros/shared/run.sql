{#- The frame of every operator run: what it reads (each input at one pinned Delta version), why
    it must recompute fully if it must, and the bookkeeping after the writes (highwater advanced
    last, staged views released, run logged). Each materialization is this frame around its own
    plan and writes. -#}

{#- Create the highwater table if needed and pin a version per input (the pending version of an
    interrupted run, so a retry reads exactly what it read). Returns {'consumed': {input: version
    or none}, 'versions': {input: version or none (no Delta history)}, 'full_reason': none or why
    this run recomputes everything, 'retry': whether it repeats an interrupted run, 'highwater':
    what read_highwater read, 'commits': {input: its commits since the consumed version, newest
    first} for the inputs an incremental run reads at their newest version}.
    `on_missing_history`: the model's config of that name (foreign_key_join's; see
    has_delta_history), none for an operator without it. `state` are the
    operator's state tables the incremental path needs. `definition` (a table operator's:
    model_definition) is compared with the one its output was built with: another one (the body
    or the operator config edited since, or an output of an older version of the package that
    recorded none) makes the run recompute everything, written change-minimally into the output
    as the automatic fallback writes, so that the output is what the model now says; end_run
    records it (also after a recompute for another reason, e.g. every run of a model with
    on_missing_history='recompute').
    An input dropped and created again since the last run (a `DROP TABLE` and `CREATE TABLE`, as
    dbt-spark's `dbt seed` reloads a seed) is another table under the same name, whose versions
    start again from 0 and may reach the number the model consumed: it is told by its version
    (below the consumed one) or by its commit at the consumed version, which is not the one the
    highwater recorded (commit_mark; a `create or replace` keeps the history, so the commit is the
    same). `on_recreated`: 'recompute' (a table operator) recomputes everything, written
    change-minimally; 'warn' (a stream operator, which cannot tell which of the new table's
    records are new) stops the run before anything is written when the version is below the
    consumed one, as it did before it could tell, and otherwise warns and reads on from the
    consumed version (right for a seed reloaded with the same records, which `dbt build` does on
    every run) — an error there would stop every such run. `sole`: the pin and end_run check that no
    other run of the model wrote its highwater meanwhile (assert_sole_run; the stream operators,
    whose appends two overlapping runs can repeat). `merged`: what the operator's MERGEs keep
    (merged_queries), checked for CHAR columns whenever the run builds the output whole
    (refuse_char_columns). -#}
{% macro begin_run(input_names, on_missing_history=none, state=[], pin_state=false, definition=none, on_recreated='warn', sole=false, merged=none) %}
  {{ run_hooks(pre_hooks) }}
  {% do incremental_joins.release_staged() %}  {#- left over by an interrupted run -#}
  {% do incremental_joins.create_highwater() %}
  {%- set highwater = incremental_joins.read_highwater() -%}
  {%- set consumed, versions, commits, marks, recreated = {}, {}, {}, {}, {} -%}
  {%- for name in input_names | unique -%}
    {%- do consumed.update({name: highwater.get(name, {}).get('version')}) -%}
    {%- set pending = highwater.get(name, {}).get('pending') -%}
    {%- if not incremental_joins.has_delta_history(name, on_missing_history) -%}
      {%- do versions.update({name: none}) -%}
    {%- elif pending is not none and not should_full_refresh() -%}
      {%- do versions.update({name: pending}) -%}
    {%- elif consumed[name] is not none -%}
      {#- The commits since the last run, read once for the newest version, for the change plan
          and for the commit at the consumed version. -#}
      {%- do commits.update({name: incremental_joins.history(name, consumed[name])}) -%}
      {%- do versions.update({name: commits[name][0]['version']}) -%}
      {%- do marks.update({name: incremental_joins.commit_mark(commits[name][0])}) -%}
      {%- set was = commits[name] | selectattr('version', 'equalto', consumed[name]) | list -%}
      {%- set recorded = highwater[name].get('commit') -%}
      {%- if versions[name] < consumed[name] -%}
        {%- do recreated.update({name: 'it is at version ' ~ versions[name] ~ ', below version ' ~ consumed[name] ~ ' which this model consumed'}) -%}
      {%- elif recorded is not none and was and incremental_joins.commit_mark(was[0]) != recorded -%}
        {%- do recreated.update({name: 'its commit at version ' ~ consumed[name] ~ ', which this model consumed, is another one than it was'}) -%}
      {%- endif -%}
    {%- else -%}
      {%- set newest = incremental_joins.newest_commit(name) -%}
      {%- do versions.update({name: newest['version']}) -%}
      {%- do marks.update({name: incremental_joins.commit_mark(newest)}) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if recreated and not should_full_refresh() and load_cached_relation(this) is not none and on_recreated != 'recompute' -%}
    {%- for name, how in recreated.items() -%}
      {%- set msg -%}
{{ model.name }}: input {{ name }} was dropped and created again since this model's last run ({{ how }}; dbt-spark's `dbt seed` reloads a seed this way): the rows it held then are gone, so what changed since cannot be read
      {%- endset -%}
      {%- set fix = 'run `dbt run --full-refresh --select ' ~ model.name ~ '`, or feed the model from a table that is replaced rather than dropped (`create or replace` keeps the Delta history)' -%}
      {%- if versions[name] < consumed[name] -%}
        {{ exceptions.raise_compiler_error(msg ~ '. Nothing was written: ' ~ fix ~ '.') }}
      {%- endif -%}
      {%- do exceptions.warn(msg ~ '. Its records from version ' ~ consumed[name] ~ ' on are read as if it were the table consumed (right when it was reloaded with the same records); if its records changed, ' ~ fix ~ '.') -%}
    {%- endfor -%}
    {%- do recreated.clear() -%}
  {%- endif -%}
  {%- do model.update({'incremental_joins_commit_marks': marks}) -%}  {#- for advance_highwater -#}
  {#- With pin_state, the state tables are read at a pinned version too, so a retried run starts
      from the state the interrupted run started from. -#}
  {%- set missing_state = [] -%}
  {%- for relation in state -%}
    {%- if not load_cached_relation(relation) -%}
      {%- do missing_state.append(relation.identifier) -%}
    {%- elif pin_state -%}
      {%- set pending = highwater.get(relation | string, {}).get('pending') -%}
      {%- do versions.update({relation | string: pending if pending is not none and not should_full_refresh() else incremental_joins.latest_version(relation | string)}) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set full_reason, output = none, load_cached_relation(this) -%}
  {#- A run that writes into its output (not one that creates it) with another definition. -#}
  {%- set redefined = definition is not none and output is not none and not should_full_refresh()
                      and incremental_joins.table_property(this, 'incremental_joins.definition') != definition -%}
  {%- if output is none -%}{%- set full_reason = 'first run' -%}
  {%- elif should_full_refresh() -%}{%- set full_reason = '--full-refresh' -%}
  {#- An input without history is never recorded as consumed: its reason comes first. -#}
  {%- elif none in versions.values() -%}{%- set full_reason = "input without history, on_missing_history='recompute'" -%}
  {%- elif none in consumed.values() or missing_state -%}{%- set full_reason = 'no highwater or state' -%}
  {%- elif recreated -%}{%- set full_reason = 'input ' ~ recreated.keys() | join(', ') ~ ' was dropped and created again since the last run (' ~ recreated.values() | join('; ') ~ ')' -%}
  {%- elif redefined -%}{%- set full_reason = "the model's definition (its compiled code, its operator config) is not the one its output was built with" -%}
  {%- endif -%}
  {%- if merged and full_reason is not none -%}{%- do incremental_joins.refuse_char_columns(merged) -%}{%- endif -%}
  {%- do model.update({'incremental_joins_definition': definition, 'incremental_joins_definition_changed': redefined}) -%}
  {%- set retry = namespace(found=false) -%}
  {%- for name in versions if highwater.get(name, {}).get('pending') is not none -%}{%- set retry.found = true -%}{%- endfor -%}
  {{ return({'consumed': consumed, 'versions': versions, 'full_reason': full_reason, 'retry': retry.found and not should_full_refresh(), 'highwater': highwater,
              'commits': commits if full_reason is none else {}, 'sole': sole}) }}
{% endmacro %}

{#- The first step of every run, before anything is read or written: dbt's table configs checked
    (check_table_config), an output that is a view or not Delta dropped (drop_foreign_output), and
    under --full-refresh an output that location_root moves dropped with its state tables
    (relocate_tables). Returns the inputs to read ({side: relation name}), or none when the
    output is left as it is (--empty).
    Under dbt's --empty (`dbt run --empty`, `dbt build --empty`: the models' schemas without their
    rows, e.g. a CI check, or upstream models built before dbt unit tests). An output that exists
    is left as it is (nothing read, nothing written), unless --full-refresh says to rebuild it. A
    missing one (or one to rebuild) is built with no rows by the operator's own first run, over an
    empty Delta copy of each input (its columns, no rows), so that it has the columns, table
    properties and clustering a real first run gives it; the highwater then records nothing as
    consumed (advance_highwater), so the next run without --empty builds the output whole. -#}
{% macro run_inputs(inputs) %}
  {%- do incremental_joins.check_table_config() -%}
  {%- do incremental_joins.drop_foreign_output() -%}
  {%- do incremental_joins.relocate_tables() -%}
  {%- if not flags.EMPTY -%}{{ return(inputs) }}{%- endif -%}
  {%- if load_cached_relation(this) is not none and not should_full_refresh() -%}
    {{ run_hooks(pre_hooks) }}
    {%- call statement('main') -%}select 'dbt --empty: the existing output is left as it is' as outcome{%- endcall -%}
    {{ log(model.name ~ ': --empty, its output ' ~ this ~ ' exists and is left as it is', info=true) }}
    {{ run_hooks(post_hooks) }}
    {{ return(none) }}
  {%- endif -%}
  {%- set copies, reads = {}, {} -%}  {#- {input: its copy}, {side: copy}; a self-join reads one copy -#}
  {%- for side, name in inputs.items() -%}
    {%- if name not in copies -%}
      {%- set copy = incremental_joins.state_relation('empty_' ~ (copies | length + 1)) -%}
      {%- do incremental_joins.create_state_table(copy, 'select * from ' ~ name ~ ' where false') -%}
      {%- do adapter.cache_added(copy) -%}
      {%- do copies.update({name: copy | string}) -%}
    {%- endif -%}
    {%- do reads.update({side: copies[name]}) -%}
  {%- endfor -%}
  {%- do model.update({'incremental_joins_empty_copies': copies}) -%}
  {{ return(reads) }}
{% endmacro %}

{#- After the writes: advance the highwater (the last write of a run), release this run's staged
    views, record the run; then dbt's `grants` on the output (its state tables get none; grants
    an earlier run gave and the config no longer names are revoked, as dbt's `table` does). -#}
{% macro end_run(operator, started_at, stats, run) %}
  {% do incremental_joins.inject_failure('before_highwater') %}
  {#- Another run of the model on the same versions at the same time (found by the check, or
      this run took its pin for an interrupted run's): if its append came first, Delta skipped
      this run's, whose records are then that run's to count. -#}
  {% if run.sole and (incremental_joins.assert_sole_run('advance', run) or run.retry) and stats.mode == 'incremental' and stats.get('rows_inserted') and incremental_joins.append_skipped() %}
    {{ log(model.name ~ ': another run of this model on the same input versions appended the same ' ~ stats.rows_inserted ~ " records first; Delta skipped this run's append (rows_inserted 0)", info=true) }}
    {% do stats.update({'rows_inserted': 0}) %}
  {% endif %}
  {% do incremental_joins.record_definition() %}
  {% do incremental_joins.advance_highwater(run.versions) %}
  {% do incremental_joins.release_staged() %}
  {% do stats.update({'versions_read': run.versions}) %}
  {%- if flags.EMPTY -%}   {#- the versions read were those of the empty copies -#}
    {%- for copy in model.get('incremental_joins_empty_copies', {}).values() -%}{%- do adapter.drop_relation(incremental_joins.parse_relation(copy)) -%}{%- endfor -%}
    {%- do stats.update({'mode': 'empty', 'versions_read': {}, 'fallback_reason': 'dbt --empty: built with no rows, no input read or recorded as consumed'}) -%}
  {%- endif -%}
  {% do incremental_joins.log_run(operator, started_at, stats) %}
  {#- A first run created the output: no grant of an earlier run to revoke. -#}
  {% do apply_grants(this, config.get('grants'), should_revoke(run.full_reason != 'first run', full_refresh_mode=true)) %}
  {{ run_hooks(post_hooks) }}
  {% do persist_docs(this, model) %}
{% endmacro %}

{#- The fingerprint of what a table operator's output must equal: the model's compiled code (SQL or
    Python; a change of the body, of the refs it reads, of a var it renders) and the operator
    config `keys` of `cfg` that decide the result (not tuning such as full_recompute_above). -#}
{% macro model_definition(cfg, keys) %}
  {%- set decided = {} -%}
  {%- for k in keys -%}{%- do decided.update({k: cfg[k]}) -%}{%- endfor -%}
  {{ return(local_md5(incremental_joins.without_empty_refs(model.compiled_code) ~ '\n' ~ tojson(decided, sort_keys=true))) }}
{% endmacro %}

{#- After a run that recomputed its output for another definition (begin_run), the output records
    the new one, with the SQL of its recompute for the equals_full_recompute test: after every
    write of the run, so that a run interrupted before it recomputes again. -#}
{% macro record_definition() %}
  {%- if not model.get('incremental_joins_definition_changed') -%}{{ return(none) }}{%- endif -%}
  {%- set recorded = incremental_joins.definition_properties(model.get('incremental_joins_recompute_sql')) -%}
  {%- do run_query('alter table ' ~ this ~ ' set ' ~ incremental_joins.tblproperties_clause(recorded)) -%}
{% endmacro %}

{#- Tests only: stop a run at a named step to prove that a re-run repairs it
    (INCREMENTAL_JOINS_FAIL_AT), or run a statement there (INCREMENTAL_JOINS_SQL_AT and
    INCREMENTAL_JOINS_SQL: another run's write, or a pause that lets another run go by). Environment
    variables, not dbt vars: dbt parses the whole project again whenever --vars change (~2.5 s a
    run), and env_var() read while a model runs does not make it re-parse. -#}
{% macro inject_failure(step) %}
  {%- if env_var('INCREMENTAL_JOINS_FAIL_AT', '') == step -%}
    {{ exceptions.raise_compiler_error(model.name ~ ': injected failure at ' ~ step ~ ' (INCREMENTAL_JOINS_FAIL_AT)') }}
  {%- endif -%}
  {%- if env_var('INCREMENTAL_JOINS_SQL_AT', '') == step -%}
    {{ log(model.name ~ ': running INCREMENTAL_JOINS_SQL at ' ~ step, info=true) }}
    {%- do run_query(env_var('INCREMENTAL_JOINS_SQL')) -%}
  {%- endif -%}
{% endmacro %}
