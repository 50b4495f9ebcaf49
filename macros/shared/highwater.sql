{#- The highwater table (one per model, beside it, so that models running in parallel threads
    never write the same state table): per input, the Delta version the model has consumed
    (`version`) and the version the run in progress reads (`pending_version`).

    A run first pins its versions as pending; a retried run after a crash finds them and reads
    exactly the same versions again, so every write it repeats is a no-op; the last step of a run
    moves pending to consumed (`advance_highwater`).

    The table is append-only: each pin and each advance appends a row per input, and the newest
    row of an input is its state. A blind append is the cheapest Delta commit (it reads nothing
    and conflicts with nothing); an overwrite of even a two-row table costs several times as
    much. `read_highwater` compacts the table to its newest rows once it holds `compact_above` rows.

    On Spark, each write also records the whole state (the newest row of every input, and the
    table's row count) as its commit's user metadata (a write option of the statement itself,
    `insert into ... with ('userMetadata' = ...)`, Spark 4; not the session setting, which every
    model running in another thread of the same session would see), so a run reads it from
    `describe history ... limit 1` (Delta's newest commit file, no Spark job) instead of querying
    the rows: a table written twice a run is read at a new version every run, and Delta rebuilds a
    new version's snapshot with Spark jobs. Measured: 0.1-0.2 s instead of 1.1-1.6 s a run
    (README). The rows stay the record: when the newest commit carries no state (a table written
    before, an OPTIMIZE or DELETE of its own, Databricks, or the var
    `incremental_joins_highwater_notes: false` for Spark before 4.0), the rows are read. -#}

{% macro highwater_relation() %}
  {{ return(incremental_joins.state_relation('highwater')) }}
{% endmacro %}

{% macro create_highwater() %}
  {%- set relation = incremental_joins.highwater_relation() -%}
  {#- dbt's relation cache answers without a query. -#}
  {%- if load_cached_relation(relation) is not none -%}{{ return(none) }}{%- endif -%}
  {% call statement('create_highwater') -%}
    create table if not exists {{ relation }} (
      input string comment 'input relation',
      version bigint comment 'last Delta version of the input that the model consumed',
      pending_version bigint comment 'version the run in progress reads; null between runs',
      updated_at timestamp comment 'when the row was appended; the newest row of an input is its state'
    ) using delta {{ incremental_joins.location_of(relation) }} {{ incremental_joins.delta_tblproperties(state=true) }}
  {%- endcall %}
{% endmacro %}

{#- {input: {'version': v or none, 'pending': p or none}} for this model: the newest row of each
    input (an advance is appended after the pin of its run, so it also wins a tie). A table of
    `compact_above` rows or more with no run pending is first replaced by its newest rows. -#}
{% macro read_highwater(compact_above=64) %}
  {%- set known = incremental_joins.highwater_from_history() -%}
  {%- if known is none -%}
    {%- set rows = run_query("select input, version, pending_version, total from (select *, row_number() over (partition by input order by updated_at desc, pending_version is null desc) as recency, count(*) over () as total from " ~ incremental_joins.highwater_relation() ~ ") as h where recency = 1").rows -%}
    {%- set known = {'state': {}, 'rows': rows[0][3] | int if rows else 0} -%}
    {%- for r in rows -%}{%- do known.state.update({r[0]: incremental_joins.highwater_entry(r[1], r[2])}) -%}{%- endfor -%}
  {%- endif -%}
  {%- do model.update({'incremental_joins_highwater': known}) -%}
  {%- if known.rows >= compact_above and known.state.values() | map(attribute='pending') | reject('none') | list | length == 0 -%}
    {% do incremental_joins.write_highwater('compact', known.state, overwrite=true) %}
  {%- endif -%}
  {{ return(known.state) }}
{% endmacro %}

{#- One input's state as the run keeps it: {'version': v, 'pending': p, 'commit': c}, v and p an
    int or none, c the commit_mark of version v, or none (only the commits' notes carry it, not
    the rows: a run that read the rows, or a retried one, checks no commit). -#}
{% macro highwater_entry(version, pending, commit=none) %}
  {{ return({'version': version | int if version is not none else none, 'pending': pending | int if pending is not none else none, 'commit': commit}) }}
{% endmacro %}

{#- Whether the highwater's commits carry its state (see above). -#}
{% macro highwater_notes() %}
  {{ return(adapter.dispatch('highwater_notes', 'incremental_joins')()) }}
{% endmacro %}

{% macro default__highwater_notes() %}{{ return(false) }}{% endmacro %}

{% macro spark__highwater_notes() %}{{ return(var('incremental_joins_highwater_notes', true)) }}{% endmacro %}

{% macro databricks__highwater_notes() %}{{ return(false) }}{% endmacro %}

{#- The state the newest commit of the highwater table carries ({'state': ..., 'rows': n}), or
    none: when it carries none (see above), or where commits carry none (highwater_notes). Where
    they can, the version read is kept for assert_sole_run. -#}
{% macro highwater_from_history() %}
  {%- if not incremental_joins.highwater_notes() -%}{{ return(none) }}{%- endif -%}
  {%- set newest = incremental_joins.newest_commit(incremental_joins.highwater_relation()) -%}
  {%- do model.update({'incremental_joins_highwater_seen': {'version': newest['version'] | int, 'writes': 0}}) -%}  {#- for assert_sole_run -#}
  {{ return(incremental_joins.commit_note(newest, 'incremental_joins_highwater')) }}
{% endmacro %}

{#- What a commit (a row of `describe history`) of the package notes under `name` in its user
    metadata, or none: a highwater commit's state ('incremental_joins_highwater': {'state': ...,
    'rows': n}; write_highwater), an append's dbt invocation ('incremental_joins_append';
    append_once). -#}
{% macro commit_note(commit, name) %}
  {%- set note = commit['userMetadata'] -%}
  {{ return(fromjson(note)[name] if note and note.startswith('{"' ~ name ~ '"') else none) }}
{% endmacro %}

{#- Record the versions this run reads as pending, before its first write. -#}
{% macro pin_versions(run) %}
  {%- if flags.EMPTY -%}{{ return(none) }}{%- endif -%}  {#- nothing read (run_inputs) -#}
  {% do incremental_joins.inject_failure('before_pin') %}
  {% if run.sole %}{% do incremental_joins.assert_sole_run('pin', run) %}{% endif %}
  {% do incremental_joins.write_highwater('pin', incremental_joins.pin_rows(run)) %}
  {% do incremental_joins.inject_failure('after_pin') %}
{% endmacro %}

{#- The highwater rows of this run's pin: per input (and pinned state table), the version consumed
    and the one the run reads as pending. -#}
{% macro pin_rows(run) %}
  {%- set rows = {} -%}
  {%- for name, v in run.versions.items() -%}
    {%- do rows.update({name: {'version': run.highwater.get(name, {}).get('version'), 'pending': v, 'commit': run.highwater.get(name, {}).get('commit')}}) -%}
  {%- endfor -%}
  {{ return(rows) }}
{% endmacro %}

{#- The write option (`insert into <output> <append_once(v)> ...`) that makes a stream operator's
    append of its output happen once per pinned input version `version` (its stream input's):
    Delta's idempotent write, a transaction id recorded in the output's commit, with which Delta
    skips any later write of the same id and a version not above the recorded one — the same append
    of a retried run, or of another run that took this run's pin for an interrupted run's and
    repeated it (two runs of one model at the same time, assert_sole_run); of two committing at the
    same instant, Delta's conflict check fails the second (by its design; not reproduced). An
    output appends only records newer than the version of its last append, so the version grows
    with every append; `create or replace` (a full refresh) forgets the ids. The commit's user
    metadata names the dbt invocation (append_skipped). Where statements carry no write options
    (highwater_notes), none. -#}
{% macro append_once(version) %}
  {%- if version is none or not incremental_joins.highwater_notes() -%}{{ return('') }}{%- endif -%}
  {{ return("with ('txnAppId' = 'incremental_joins.append', 'txnVersion' = '" ~ version ~ "', 'userMetadata' = "
            ~ incremental_joins.string_literal(tojson({'incremental_joins_append': invocation_id})) ~ ")") }}
{% endmacro %}

{#- Whether Delta skipped this run's append (append_once) because another run of the model, on the
    same pinned versions at the same time (assert_sole_run), had committed it: none of the output's
    newest commits names this dbt invocation. Read only after such an overlap, so that the run
    log counts each appended record once. Where appends carry no options (highwater_notes), it
    cannot tell: false. -#}
{% macro append_skipped() %}
  {%- if not incremental_joins.highwater_notes() -%}{{ return(false) }}{%- endif -%}
  {%- for c in run_query('describe history ' ~ this ~ ' limit 10').rows if incremental_joins.commit_note(c, 'incremental_joins_append') == invocation_id -%}
    {{ return(false) }}
  {%- endfor -%}
  {{ return(true) }}
{% endmacro %}

{#- The last write of a run: the pinned versions become the consumed ones. -#}
{% macro advance_highwater(versions) %}
  {#- --empty read nothing (run_inputs): any input an earlier run consumed is forgotten. -#}
  {%- if flags.EMPTY -%}
    {%- set forgotten = {} -%}
    {%- for name in model.get('incremental_joins_highwater').state -%}{%- do forgotten.update({name: {'version': none, 'pending': none}}) -%}{%- endfor -%}
    {%- if forgotten -%}{%- do incremental_joins.write_highwater('advance', forgotten, overwrite=true) -%}{%- endif -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set rows = {} -%}
  {%- set marks = model.get('incremental_joins_commit_marks', {}) -%}
  {%- for name, v in versions.items() -%}{%- do rows.update({name: {'version': v, 'pending': none, 'commit': marks.get(name)}}) -%}{%- endfor -%}
  {% do incremental_joins.write_highwater('advance', rows) %}
{% endmacro %}

{#- Append one row per input ({input: {'version': v, 'pending': p}}), or with `overwrite`
    replace the table by them. Where highwater_notes, the commit carries the table's new state
    (the state read this run, updated by these rows) as user metadata. -#}
{% macro write_highwater(step, rows, overwrite=false) %}
  {%- set values = [] -%}
  {%- for name, row in rows.items() -%}
    {%- do values.append("('" ~ name ~ "', cast(" ~ (row.version if row.version is not none else 'null') ~ " as bigint), cast(" ~ (row.pending if row.pending is not none else 'null') ~ " as bigint), current_timestamp())") -%}
  {%- endfor -%}
  {%- set known = model.get('incremental_joins_highwater') -%}
  {%- set note = known is not none and incremental_joins.highwater_notes() -%}
  {%- if note -%}
    {%- set state = {} if overwrite else known.state.copy() -%}
    {%- for name, row in rows.items() -%}
      {%- do state.update({name: incremental_joins.highwater_entry(row.version, row.pending, row.get('commit'))}) -%}
    {%- endfor -%}
    {%- do known.update({'state': state, 'rows': (0 if overwrite else known.rows) + rows | length}) -%}
  {%- endif -%}
  {%- set seen = model.get('incremental_joins_highwater_seen') -%}
  {%- if seen -%}{%- do seen.update({'writes': seen.writes + 1}) -%}{%- endif -%}
  {% call statement(step ~ '_highwater') -%}
    insert {{ 'overwrite' if overwrite else 'into' }} {{ incremental_joins.highwater_relation() }}
    {% if note %}with ('userMetadata' = {{ incremental_joins.string_literal(tojson({'incremental_joins_highwater': known})) }}){% endif %}
    values {{ values | join(', ') }}
  {%- endcall %}
{% endmacro %}

{#- A stream operator's check that no other run of the model wrote the highwater table while this
    one ran: its newest version is the one this run read plus this run's own writes. Two runs of
    one deduplicate or stream_table_join model at the same time (overlapping jobs) can both append
    the same records: both read before either pinned, or the second takes the first's pin for an
    interrupted run's and repeats it. The second is harmless: the runs read the same versions and
    make the same writes, the appends once (append_once), so commits that pin exactly this run's
    versions or advance to them (same_pin) are not counted. Any other write is checked before the
    pin (`step` 'pin': a run that finds another's pin or advance since its read stops with nothing
    written) and before the advance ('advance': the overlaps the first check cannot see — another
    run pinned other versions in between — are told, though both may have appended by then). A table
    operator needs no check: both runs write the same change-minimal MERGE. Commits that write no
    rows (OPTIMIZE, VACUUM, table properties: optimize_tables and vacuum_tables at the same time)
    are not another run's. Where the highwater's commits carry no notes (highwater_notes) the
    version is not read, and nothing is checked. Reads the commits since this run's read with
    `history` (one `describe history`, no Spark job; a second when there are more than the run's
    own). Returns whether another run's commits of the same pin were found. -#}
{% macro assert_sole_run(step, run) %}
  {%- set seen = model.get('incremental_joins_highwater_seen') -%}
  {%- if not seen -%}{{ return(false) }}{%- endif -%}
  {%- set expected = seen.version + seen.writes -%}
  {%- set commits = incremental_joins.history(incremental_joins.highwater_relation(), seen.version, expected) -%}
  {%- set newest = commits[0]['version'] | int -%}
  {%- set maintenance = ['OPTIMIZE', 'VACUUM START', 'VACUUM END', 'SET TBLPROPERTIES', 'UNSET TBLPROPERTIES', 'REORG'] -%}
  {%- set writes = commits | selectattr('version', 'gt', seen.version) | rejectattr('operation', 'in', maintenance) | list -%}
  {#- newest < expected: fewer commits than the run's own, the table replaced. -#}
  {%- if newest < expected or (writes | length != seen.writes and not incremental_joins.same_pin(writes, incremental_joins.pin_rows(run))) -%}
    {%- set msg -%}
{{ model.name }}: another run of this model wrote its highwater table {{ incremental_joins.highwater_relation() }} while this run was running (it is at version {{ newest }}; this run read version {{ seen.version }} and wrote {{ seen.writes }} more): two runs of one {{ config.get('materialized') }} model at the same time can both append the same records.
      {%- if step == 'pin' %} This run stopped before its first write: nothing was written. Run the model from one job at a time.
      {%- else %} This run stopped before recording its progress, and its output {{ this }} may now hold records twice: run `dbt run --full-refresh --select {{ model.name }}` to rebuild it from its whole input, and run the model from one job at a time.
      {%- endif -%}
    {%- endset -%}
    {{ exceptions.raise_compiler_error(msg) }}
  {%- endif -%}
  {{ return(writes | length != seen.writes) }}
{% endmacro %}

{#- Whether every highwater commit of `commits` is a pin of exactly this run's versions `pin`
    (pin_rows) or an advance to them, by the state its note carries: the other run took this run's
    pin for an interrupted run's and repeated it, or both read the same versions, so that every
    write it made is one this run makes too — the MERGEs change-minimal, the appends once
    (append_once) — and the two runs end as one. A commit without a note is another's. -#}
{% macro same_pin(commits, pin) %}
  {%- for c in commits -%}
    {%- set note = incremental_joins.commit_note(c, 'incremental_joins_highwater') -%}
    {%- if note is none -%}{{ return(false) }}{%- endif -%}
    {%- for name, row in pin.items() -%}
      {%- set theirs = note.state.get(name, {}) -%}
      {%- set at = [theirs.get('version'), theirs.get('pending')] -%}
      {%- if at != [row.version, row.pending] and at != [row.pending, none] -%}{{ return(false) }}{%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
  {{ return(true) }}
{% endmacro %}
