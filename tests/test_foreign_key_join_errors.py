"""foreign_key_join: bad configuration and bad data fail with a message naming the model, the
config key or input, the value and the fix — and nothing already written changes."""

from __future__ import annotations

import pytest

from fk_join_harness import SOURCES, FkJoinProject, error_of, runnable_models, tblproperties


def model(**config) -> str:
    settings = {"left_key": "'k'", "right_key": "'rk'", "foreign_key": "'fk'", "join_type": "'left'"}
    settings.update(config)
    args = ", ".join(f"{k}={v}" for k, v in settings.items())
    return (f"{{{{ config(materialized='foreign_key_join', {args}) }}}}\n"
            "select {{ incremental_joins.output_key() }}, l.v, r.rv\n"
            "from {{ incremental_joins.join(source('t', 'lhs'), source('t', 'rhs')) }}\n")


@pytest.fixture
def project_with(scratch_project, spark):
    def make(**config) -> FkJoinProject:
        fk = FkJoinProject.create(scratch_project, spark, models=())
        (fk.project.path / "models" / "joined.sql").write_text(model(**config))
        return fk
    return make


@pytest.mark.parametrize("key, value, allowed", [
    ("join_type", "sideways", "inner, left, outer"),
    ("on_schema_change", "append_new_column", "fail, ignore, append_new_columns, sync_all_columns"),
])
def test_unknown_choice(project_with, spark, key, value, allowed):
    fk = project_with(**{key: f"'{value}'"})
    message = error_of(fk.run(check=False))
    assert f"joined: config '{key}' ({value}) is not one of {allowed}; use one of those" in message
    assert not spark.catalog.tableExists(f"{fk.schema}.joined")


def test_body_without_the_join_marker(project_with, spark):
    fk = project_with()
    model_file = fk.project.path / "models" / "joined.sql"
    model_file.write_text(model_file.read_text().replace("{{ incremental_joins.join(source('t', 'lhs'), source('t', 'rhs')) }}",
                                                         "{{ source('t', 'lhs') }} as l left join {{ source('t', 'rhs') }} as r on l.fk = r.rk"))
    message = error_of(fk.run(check=False))
    assert "joined: a foreign_key_join model reads its input through a marker macro, and none was found in its SQL." in message
    assert "Write the body as `select ... from {{ incremental_joins.join(ref('orders'), ref('customers')) }}`" in message
    assert not spark.catalog.tableExists(f"{fk.schema}.joined")


def test_an_input_sampled_by_dbt_sample_is_refused(scratch_project, spark):
    """dbt's --sample renders a source with an event_time as a filtered query (in a Python body's
    dbt.source() too): the model says so and how to run, and writes nothing."""
    python = runnable_models(("fk_outer_py",))
    fk = FkJoinProject.create(scratch_project, spark, models=python)
    (fk.project.path / "models" / "joined.sql").write_text(model())
    fk.put_right(("r1", "x"))
    fk.put_left(("k1", "a", "r1"))
    fk.run()
    sources = fk.project.path / "models" / "sources.yml"
    sources.write_text(SOURCES.replace("{name: lhs}", "{name: lhs, config: {event_time: v}}"))
    fk.put_left(("k2", "b", "r1"))
    message = error_of(fk.run("--sample", "3 days", check=False))
    for name in ("joined", *python):
        assert f"{name}: its left input is a query, not a table" in message, message
        assert f"run it without --sample (e.g. `--exclude {name}`)" in message, message
    assert "under --sample" in message
    assert {r.k: r.v for r in spark.table(f"{fk.schema}.joined").collect()} == {"k1": "a"}   # nothing written
    for name in python:
        assert fk.output(name) == {("r1", "k1"): ("a", "r1", "x")}, name


def test_outer_join_needs_the_combined_key(project_with):
    fk = project_with(join_type="'outer'")
    message = error_of(fk.run(check=False))
    assert "config 'output_key' (left) must be 'combined' when join_type is 'outer'" in message


def test_combined_key_needs_distinct_names_and_the_body_the_key_columns(project_with):
    fk = project_with(output_key="'combined'", right_key="'k'")
    message = error_of(fk.run(check=False))
    assert "joined: config 'output_key' (combined) needs distinct column names for the combined key (k, k)" in message
    assert "rename the left or right key columns upstream, or use output_key='left'" in message
    model_file = fk.project.path / "models" / "joined.sql"
    model_file.write_text(model().replace("{{ incremental_joins.output_key() }}, ", ""))
    message = error_of(fk.run(check=False))
    assert "joined: config 'output_key' (left) needs the output columns k, but the model does not select k" in message
    assert "start the select list with {{ incremental_joins.output_key() }}" in message


@pytest.mark.parametrize("key, value, rule", [
    ("broadcast_changes_below", "-1", "must be a number of rows, 0 or more"),
    ("full_recompute_above", "-0.5", "must be a fraction of the left table, 0 or more"),
    ("full_recompute_above", "'lots'", "must be a fraction of the left table, 0 or more"),
], ids=["negative_broadcast_bound", "negative_threshold", "threshold_not_a_number"])
def test_bounds_must_be_non_negative_numbers(project_with, key, value, rule):
    fk = project_with(**{key: value})
    message = error_of(fk.run(check=False))
    assert f"joined: config '{key}' ({value.strip(chr(39))}) {rule}" in message


def test_foreign_key_that_does_not_compile(project_with, spark):
    fk = project_with(foreign_key="'no_such_column'")
    fk.put_left(("k1", "a", "r1"))
    message = error_of(fk.run(check=False))
    assert "joined: config 'foreign_key' (no_such_column) does not compile against the left input" in message
    assert "no_such_column" in message.split("does not compile")[1]   # Spark's reason follows
    assert "over the left columns (k, v, fk)" in message
    assert not spark.catalog.tableExists(f"{fk.schema}.joined")

    # Built once with a good expression, then edited into one that does not parse: the run
    # fails naming the expression, and the output is left as it was.
    model_file = fk.project.path / "models" / "joined.sql"
    model_file.write_text(model(foreign_key="'upper(fk)'"))
    fk.put_right(("R1", "x"))
    fk.run()
    version = fk.output_version("joined")
    model_file.write_text(model(foreign_key="'upper(fk'"))
    message = error_of(fk.run(check=False))
    assert "joined: config 'foreign_key' (upper(fk) does not compile" in message
    assert "Syntax error" in message
    assert fk.output_version("joined") == version
    assert {r.k: r.rv for r in spark.table(f"{fk.schema}.joined").collect()} == {"k1": "x"}


# The duplicate right key arrives as a right change: with the default threshold the run recomputes
# everything (its one left row is affected) and checks the whole input; full_recompute_above=10
# keeps it on the incremental path, which checks the rows of the changed right keys.
@pytest.mark.parametrize("config", [{}, {"full_recompute_above": "10"}], ids=["full_recompute", "incremental"])
def test_duplicate_keys_in_an_input_fail_before_anything_is_written(project_with, spark, config):
    fk = project_with(**config)
    fk.put_left(("k1", "a", "r1"))
    fk.put_right(("r1", "x"))
    fk.run()
    version = fk.output_version("joined")
    spark.sql(f"insert into {fk.schema}.rhs values ('r1', 'again')")
    message = error_of(fk.run(check=False))
    assert "input" in message and "rhs" in message
    assert "duplicate values of config 'right_key' (rk): rk=r1 (2 rows)" in message
    assert fk.output_version("joined") == version
    assert {r.k: r.rv for r in spark.table(f"{fk.schema}.joined").collect()} == {"k1": "x"}
    # Duplicates in both inputs: the left input is checked, and named, first.
    spark.sql(f"insert into {fk.schema}.lhs values ('k2', 'b', 'r1'), ('k2', 'c', null)")
    message = error_of(fk.run(check=False))
    assert "lhs has duplicate values of config 'left_key' (k): k=k2 (2 rows)" in message and "right_key" not in message
    assert fk.output_version("joined") == version


# A null key (any part of it) is refused like a duplicate: an equality never matches it, so an
# outer join's run could not find a right row keyed null again, and a full refresh listed it.
@pytest.mark.parametrize("config", [{}, {"full_recompute_above": "10"}], ids=["full_recompute", "incremental"])
def test_null_keys_in_an_input_fail_before_anything_is_written(project_with, spark, config):
    fk = project_with(left_key="['k', 'fk']", **config)
    spark.sql(f"insert into {fk.schema}.lhs values ('k1', 'a', 'r1'), ('k2', 'b', null)")
    fk.put_right(("r1", "x"))
    message = error_of(fk.run(check=False))
    assert "joined: input" in message and "lhs has rows whose key, config 'left_key' (k, fk), is null: k=k2, fk=null (1 rows)" in message
    assert "where k is not null and fk is not null" in message and "Nothing was written" in message
    assert not spark.catalog.tableExists(f"{fk.schema}.joined")

    spark.sql(f"delete from {fk.schema}.lhs where k = 'k2'")
    fk.run()
    version = fk.output_version("joined")
    # Two right rows keyed null (one group of two) and a duplicate key: the null key is named.
    spark.sql(f"insert into {fk.schema}.rhs values (null, 'y'), (null, 'z'), ('r1', 'again')")
    message = error_of(fk.run(check=False))
    assert "rhs has rows whose key, config 'right_key' (rk), is null: rk=null (2 rows)." in message
    assert "duplicate" not in message
    assert fk.output_version("joined") == version
    assert {r.k: r.rv for r in spark.table(f"{fk.schema}.joined").collect()} == {"k1": "x"}


def test_input_without_history_is_an_error_unless_recompute_is_chosen(project_with, spark):
    """An input that is a view, or an ephemeral model (a CTE dbt inlines), has no Delta history:
    the model says so, names it and the fix; with a view, on_missing_history='recompute' runs."""
    fk = project_with()
    # An ephemeral model as the left input.
    (fk.project.path / "models" / "stg_lhs.sql").write_text("{{ config(materialized='ephemeral') }}\nselect k, upper(v) as v, fk from {{ source('t', 'lhs') }}")
    model_file = fk.project.path / "models" / "joined.sql"
    model_file.write_text(model_file.read_text().replace("source('t', 'lhs')", "ref('stg_lhs')"))
    message = error_of(fk.run(check=False))
    assert ("joined: its left input stg_lhs is an ephemeral model, which dbt inlines as a CTE (__dbt__cte__stg_lhs) and stores nowhere; "
            "a foreign_key_join model reads what changed in each input from the input's Delta table. Materialize stg_lhs as a table or an "
            "incremental model") in message, message
    assert "or as a view with on_missing_history='recompute' in joined (then recomputed whole every run). Nothing was written." in message
    assert not spark.catalog.tableExists(f"{fk.schema}.joined")
    (fk.project.path / "models" / "stg_lhs.sql").unlink()
    model_file.write_text(model())
    # A view.
    spark.sql(f"create or replace view {fk.schema}.lhs_view as select * from {fk.schema}.lhs")
    body = (fk.project.path / "models" / "joined.sql").read_text().replace("source('t', 'lhs')", "source('t', 'lhs_view')")
    (fk.project.path / "models" / "joined.sql").write_text(body)
    (fk.project.path / "models" / "sources.yml").write_text(SOURCES.replace("{name: rhs}", "{name: rhs}, {name: lhs_view}"))
    fk.put_left(("k1", "a", "r1"))
    message = error_of(fk.run(check=False))
    assert "joined: input" in message and "lhs_view" in message and "no Delta history" in message
    assert "on_missing_history" in message

    (fk.project.path / "models" / "joined.sql").write_text(body.replace("join_type='left'", "join_type='left', on_missing_history='recompute'"))
    fk.run()
    fk.put_right(("r1", "x"))
    fk.run()
    assert {r.k: r.rv for r in spark.table(f"{fk.schema}.joined").collect()} == {"k1": "x"}
    # The run log keeps the reason as the run gave it, quotes included.
    assert fk.last_run_log("joined")["fallback_reason"] == "input without history, on_missing_history='recompute'"
    # Edited, the model (recomputed on every run anyway) records the definition and recompute SQL
    # it computed: the equals_full_recompute test compares with the edited body.
    model_file = fk.project.path / "models" / "joined.sql"
    model_file.write_text(model_file.read_text().replace("r.rv", "upper(r.rv) as rv"))
    fk.run()
    assert {r.k: r.rv for r in spark.table(f"{fk.schema}.joined").collect()} == {"k1": "X"}
    assert "upper(r.rv)" in tblproperties(spark, f"{fk.schema}.joined")["incremental_joins.recompute_sql"]


def test_history_vacuumed_past_the_highwater_says_to_full_refresh(project_with, spark):
    fk = project_with()
    fk.put_left(("k1", "a", "r1"))
    fk.run()
    # The left input is re-created (as a dbt `table` model is) and its old files vacuumed away.
    spark.sql(f"create or replace table {fk.schema}.lhs using delta as select 'k2' as k, 'b' as v, 'r1' as fk")
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    spark.sql(f"vacuum {fk.schema}.lhs retain 0 hours")
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "true")
    version = fk.output_version("joined")
    message = error_of(fk.run(check=False))
    assert "no longer reaches back to version" in message
    assert "dbt run --full-refresh --select joined" in message
    assert fk.output_version("joined") == version
    fk.run("--full-refresh")
    assert {r.k for r in spark.table(f"{fk.schema}.joined").collect()} == {"k2"}


def test_input_dropped_and_created_again_is_recomputed_whole(project_with, spark):
    """An input dropped and created again is another Delta table under the same name: its
    versions start over, and the output records which table each input was (its Delta table id).
    Whether the new table's version is below the consumed one or has reached it again (dbt-spark's
    `dbt seed` drops and re-creates a seed: the same two commits every time), the run recomputes
    everything from the inputs and writes only the rows that differ, as the automatic fallback
    does. Before the ids, the first case stopped the run and the second read 'unchanged': the
    output kept the dropped table's values."""
    fk = project_with(full_recompute_above="10")      # no automatic fallback: a full recompute is the re-creation's
    fk.put_left(("k1", "a", "r1"), ("k2", "b", "r2"))
    fk.put_right(("r1", "x"), ("r2", "y"))
    fk.put_right(("r1", "y"))
    fk.run()                                    # consumed rhs at version 2

    def recreate(*rows: tuple) -> None:         # a CREATE TABLE (version 0), then one insert (version 1)
        spark.sql(f"drop table {fk.schema}.rhs")
        spark.sql(f"create table {fk.schema}.rhs (rk string, rv string) using delta")
        spark.sql(f"insert into {fk.schema}.rhs values " + ", ".join(f"('{k}', '{v}')" for k, v in rows))

    recreate(("r1", "z"), ("r2", "y"))          # version 1, below 2
    fk.run()
    assert {r.k: r.rv for r in spark.table(f"{fk.schema}.joined").collect()} == {"k1": "z", "k2": "y"}
    log = fk.last_run_log("joined")
    assert log["mode"] == "fallback" and "input" in log["fallback_reason"] and "rhs was dropped and created again" in log["fallback_reason"], log
    assert fk.output_changes("joined") == {("update_postimage", "k1")}     # k2 unchanged: not written
    recreate(("r1", "z"), ("r2", "w"))          # version 1 again: the version the model consumed
    fk.run()
    assert {r.k: r.rv for r in spark.table(f"{fk.schema}.joined").collect()} == {"k1": "z", "k2": "w"}
    assert fk.last_run_log("joined")["mode"] == "fallback"
    assert fk.output_changes("joined") == {("update_postimage", "k2")}
    fk.put_right(("r1", "v"))                   # then incremental again, on the new table's changes
    fk.run()
    assert {r.k: r.rv for r in spark.table(f"{fk.schema}.joined").collect()} == {"k1": "v", "k2": "w"}
    assert fk.last_run_log("joined")["mode"] == "incremental"


def test_model_columns_changed_says_to_full_refresh(project_with, spark):
    fk = project_with()
    fk.put_left(("k1", "a", "r1"))
    fk.put_right(("r1", "x"))
    fk.run()
    version = fk.output_version("joined")
    # The body now selects one more column and renames another: the existing output has neither.
    model_file = fk.project.path / "models" / "joined.sql"
    model_file.write_text(model_file.read_text().replace("l.v, r.rv", "l.v, l.fk, r.rv as right_value"))
    fk.put_right(("r1", "y"))
    message = error_of(fk.run(check=False))
    assert "joined: the model's columns changed since its output" in message
    assert "(added fk, right_value; removed rv)" in message
    assert "or set on_schema_change='append_new_columns' on the model" in message
    assert "dbt run --full-refresh --select joined" in message and "Nothing was written." in message
    assert fk.output_version("joined") == version
    fk.run("--full-refresh")
    assert [r.asDict() for r in spark.table(f"{fk.schema}.joined").collect()] == [{"k": "k1", "v": "a", "fk": "r1", "right_value": "y"}]


def test_on_schema_change_sync_all_columns_adds_columns_and_refuses_to_drop_one(project_with, spark):
    """dbt's sync_all_columns takes what append_new_columns takes — a column added to an input, one
    the body selects anew — and refuses a column the body stops selecting, as dbt-spark's own
    incremental models do on Delta (a column is dropped only from a table with column mapping):
    the run stops before anything is written, naming the column and both ways on."""
    fk = project_with(on_schema_change="'sync_all_columns'")
    fk.put_left(("k1", "a", "r1"))
    fk.put_right(("r1", "x"))
    fk.run()
    # The left input gains a column (read across its ADD COLUMNS), then the body selects it.
    spark.sql(f"alter table {fk.schema}.lhs add columns (w string)")
    spark.sql(f"insert into {fk.schema}.lhs values ('k2', 'b', 'r1', 'w2')")
    fk.run()
    assert {r.k: (r.v, r.rv) for r in spark.table(f"{fk.schema}.joined").collect()} == {"k1": ("a", "x"), "k2": ("b", "x")}
    model_file = fk.project.path / "models" / "joined.sql"
    model_file.write_text(model_file.read_text().replace("l.v, r.rv", "l.v, r.rv, l.w"))
    fk.run()
    rows = sorted((r.asDict() for r in spark.table(f"{fk.schema}.joined").collect()), key=lambda r: r["k"])
    assert rows == [{"k": "k1", "v": "a", "rv": "x", "w": None}, {"k": "k2", "v": "b", "rv": "x", "w": "w2"}]
    # The body no longer selects rv: the output would keep it, stale — refused.
    version = fk.output_version("joined")
    model_file.write_text(model_file.read_text().replace("l.v, r.rv, l.w", "l.v, l.w"))
    fk.put_right(("r1", "y"))
    message = error_of(fk.run(check=False))
    assert "joined: the model's columns changed since its output" in message and "(removed rv)" in message
    assert "on_schema_change='sync_all_columns' would drop rv from it, which Delta Lake does only on a table with column mapping" in message
    assert "dbt run --full-refresh --select joined" in message
    assert "or set on_schema_change='append_new_columns' to keep them in the output" in message and "Nothing was written." in message
    assert fk.output_version("joined") == version
    fk.run("--full-refresh")
    rows = sorted((r.asDict() for r in spark.table(f"{fk.schema}.joined").collect()), key=lambda r: r["k"])
    assert rows == [{"k": "k1", "v": "a", "w": None}, {"k": "k2", "v": "b", "w": "w2"}]


def test_input_columns_changed_say_to_full_refresh(project_with, spark):
    fk = project_with()
    fk.put_left(("k1", "a", "r1"))   # lhs version 1
    fk.put_right(("r1", "x"))
    fk.run()
    version = fk.output_version("joined")
    # A column added to the left input, then a row with it (versions 2 and 3).
    spark.sql(f"alter table {fk.schema}.lhs add columns (w string)")
    spark.sql(f"insert into {fk.schema}.lhs values ('k2', 'b', 'r1', 'w')")
    message = error_of(fk.run(check=False))
    assert "joined: input" in message
    assert "lhs changed its columns between version 1, which this model consumed last, and version 3 (added w (string))" in message
    assert "dbt run --full-refresh --select joined" in message and "Nothing was written." in message
    assert "or set on_schema_change='append_new_columns' on the model" in message
    assert fk.output_version("joined") == version
    fk.run("--full-refresh")
    assert {r.k: r.rv for r in spark.table(f"{fk.schema}.joined").collect()} == {"k1": "x", "k2": "x"}
    # The right input re-created as a plain `table` model is: a column added, the key retyped.
    spark.sql(f"create or replace table {fk.schema}.rhs using delta as select 1 as rk, 'z' as rv, 7 as rn")
    message = error_of(fk.run(check=False))
    assert "rhs changed its columns between version 1, which this model consumed last, and version 2 (added rn (int); retyped rk (string -> int))" in message
    assert "append_new_columns" not in message   # a retyped column is not taken by it
    assert {r.k: r.rv for r in spark.table(f"{fk.schema}.joined").collect()} == {"k1": "x", "k2": "x"}


def test_a_retyped_decimal_is_caught_whatever_the_connection(project_with, spark):
    """A retyping within one type family (decimal(10,2) -> decimal(12,2)) is schema drift too. The
    columns are compared by Spark's type names, which dbt-spark's `thrift` method would reduce to
    one code (DECIMAL_TYPE) for both."""
    fk = project_with()
    spark.sql(f"create or replace table {fk.schema}.rhs using delta as select 'r1' as rk, 'x' as rv, cast(1.5 as decimal(10,2)) as amt")
    fk.put_left(("k1", "a", "r1"))
    fk.run()
    version = fk.output_version("joined")
    spark.sql(f"create or replace table {fk.schema}.rhs using delta as select 'r1' as rk, 'y' as rv, cast(1.5 as decimal(12,2)) as amt")
    message = error_of(fk.run(check=False))
    assert "rhs changed its columns between version" in message
    assert "(retyped amt (decimal(10,2) -> decimal(12,2)))" in message
    assert fk.output_version("joined") == version
    assert {r.k: r.rv for r in spark.table(f"{fk.schema}.joined").collect()} == {"k1": "x"}
