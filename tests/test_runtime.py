"""The embedded runtime: dbt on Spark + Delta in one process, Python models, clear set-up errors."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fk_join_harness import tblproperties
from incremental_joins.runtime import RuntimeSetupError, check_java, delta_jars

SCHEMA = "ij_demo"
# The integration project lives in the repository (its target/ and logs/ too): with several
# pytest workers (thrift mode, -n 2), all of this module runs in one of them.
pytestmark = pytest.mark.xdist_group("integration_project")


@pytest.fixture(scope="module")
def built(integration_project, spark):
    integration_project.invoke("seed", "--quiet", "--full-refresh")
    integration_project.invoke("run", "--quiet", "--full-refresh")
    return integration_project


@pytest.mark.parametrize("model", ["orders_by_country", pytest.param("customer_order_counts", marks=pytest.mark.session_only)])
def test_sql_and_python_models_build_as_delta_tables_with_change_data_feed(built, spark, model):
    detail = spark.sql(f"describe detail {SCHEMA}.{model}").first()
    assert detail["format"] == "delta"
    assert tblproperties(spark, f"{SCHEMA}.{model}")["delta.enableChangeDataFeed"] == "true"


@pytest.mark.session_only
def test_python_model_computes_in_session(built, spark):
    rows = {r.customer_id: r.orders for r in spark.table(f"{SCHEMA}.customer_order_counts").collect()}
    # seeds/orders.csv: customer 1 has orders 100 and 102, customer 2 has 101, customer 3 none.
    assert rows == {1: 2, 2: 1, 3: 0}


def test_incremental_rerun_merges_only_new_and_changed_rows(built, spark):
    spark.sql(f"insert into {SCHEMA}.orders values (104, 3, 12.00, timestamp'2026-11-03 08:00:00')")
    spark.sql(
        f"update {SCHEMA}.orders set amount = 30.00, updated_at = timestamp'2026-11-03 09:00:00' "
        "where order_id = 100"
    )
    built.invoke("run", "--quiet", "--select", "orders_incremental")
    rows = {r.order_id: float(r.amount) for r in spark.table(f"{SCHEMA}.orders_incremental").collect()}
    assert rows == {100: 30.0, 101: 40.0, 102: 15.5, 103: 9.99, 104: 12.0}
    history = spark.sql(f"describe history {SCHEMA}.orders_incremental").collect()
    assert history[0]["operation"] == "MERGE"


OPERATOR_MODELS = ["orders_enriched", "customers_orders_outer", "orders_current_customer", "customers_current",
                   "orders_first_per_customer", "orders_customer_on_arrival"]
STATE_SUFFIXES = ["index", "sequences", "state", "history", "buffer", "clock", "runs", "highwater"]


def test_optimize_and_vacuum_tables_compact_every_operator_table_and_later_runs_stay_incremental(built, spark, capsys):
    """`dbt run-operation incremental_joins.optimize_tables` compacts the output and the state
    tables of every operator model (and the run log) to one file each, `vacuum_tables` deletes the
    replaced files; the next run reads no change from those commits and stays incremental and
    right (equals_full_recompute)."""
    def files() -> dict[str, int]:
        tables = OPERATOR_MODELS + [f"{m}__ij_{s}" for m in OPERATOR_MODELS for s in STATE_SUFFIXES]
        return {t: int(spark.sql(f"describe detail {SCHEMA}.{t}").first()["numFiles"])
                for t in tables + ["incremental_joins_run_log"] if spark.catalog.tableExists(f"{SCHEMA}.{t}")}

    spark.sql(f"insert into {SCHEMA}.orders values (105, 2, 7.00, timestamp'2026-11-03 10:00:00')")
    spark.sql(f"update {SCHEMA}.customers set name = 'Grace H' where customer_id = 2")
    spark.sql(f"insert into {SCHEMA}.customers_cdc values (2, 'Bobby', 'DE', 'u', 5, 4)")
    built.invoke("run", "--quiet")
    before = files()
    # Every operator's state tables are there (one of each kind at least), several in many files.
    assert {t.split("__ij_")[-1] for t in before if "__ij_" in t} == set(STATE_SUFFIXES), sorted(before)
    assert sum(1 for n in before.values() if n > 1) >= 6, before

    capsys.readouterr()
    wrong = built.invoke("run-operation", "incremental_joins.optimize_tables", "--args", "{models: [orders_enriched, nope]}", check=False)
    message = capsys.readouterr().out  # run-operation reports its error in dbt's log only
    assert not wrong.success
    assert "optimize_tables: nope is not a model of this project" in message, message
    assert files() == before  # nothing optimized before the error

    built.invoke("run-operation", "incremental_joins.optimize_tables")
    after = files()
    assert after.keys() == before.keys()
    assert {t: n for t, n in after.items() if n > 1} == {}, after
    compacted = [t for t, n in before.items() if n > 1]
    ops = {t: spark.sql(f"describe history {SCHEMA}.{t} limit 1").first()["operation"] for t in compacted}
    assert set(ops.values()) == {"OPTIMIZE"}, ops

    # vacuum_tables deletes the files OPTIMIZE replaced — of the tables whose own retention allows
    # it (here 0 hours, set on orders_enriched's output and index); the highwater keeps the
    # default 7 days, so its replaced files stay. A bad retain_hours vacuums nothing.
    def parquet_on_disk(table: str) -> int:
        root = spark.sql(f"describe detail {SCHEMA}.{table}").first()["location"].removeprefix("file:")
        return sum(1 for p in Path(root).rglob("*.parquet") if not any(part.startswith("_") for part in p.relative_to(root).parts))

    vacuumed = ["orders_enriched", "orders_enriched__ij_index"]
    kept = "orders_enriched__ij_highwater"
    for t in vacuumed:
        spark.sql(f"alter table {SCHEMA}.{t} set tblproperties (delta.deletedFileRetentionDuration = 'interval 0 hours')")
    on_disk = {t: parquet_on_disk(t) for t in vacuumed + [kept]}
    assert all(n > 1 for n in on_disk.values()), on_disk   # the files OPTIMIZE replaced are still there
    capsys.readouterr()
    wrong = built.invoke("run-operation", "incremental_joins.vacuum_tables", "--args", "{retain_hours: -1}", check=False)
    message = capsys.readouterr().out
    assert not wrong.success
    assert "vacuum_tables: retain_hours (-1) must be a number of hours, 0 or more" in message, message
    assert {t: parquet_on_disk(t) for t in on_disk} == on_disk
    built.invoke("run-operation", "incremental_joins.vacuum_tables", "--args", "{models: [orders_enriched]}")
    assert {t: parquet_on_disk(t) for t in on_disk} == {**{t: 1 for t in vacuumed}, kept: on_disk[kept]}

    started = spark.sql(f"select max(finished_at) from {SCHEMA}.incremental_joins_run_log").first()[0]
    spark.sql(f"insert into {SCHEMA}.orders values (106, 1, 3.00, timestamp'2026-11-03 11:00:00')")
    spark.sql(f"update {SCHEMA}.customers set country = 'IE' where customer_id = 1")
    spark.sql(f"insert into {SCHEMA}.customers_cdc values (4, 'Dee', 'CA', 'u', 6, 5)")
    built.invoke("run", "--quiet")
    modes = {r.model: r.mode for r in spark.sql(f"select model, mode from {SCHEMA}.incremental_joins_run_log "
                                                 f"where finished_at > timestamp'{started}'").collect()}
    assert modes == {m: "incremental" for m in OPERATOR_MODELS}, modes
    result = built.invoke("test", "--select", "test_name:equals_full_recompute", check=False)
    assert result.success and len(result.result.results) >= 4, [(r.node.name, str(r.status)) for r in result.result.results]


def test_dbt_empty_builds_missing_outputs_without_rows_and_leaves_built_ones(built, spark, monkeypatch):
    """dbt's --empty (a build of the models' schemas without rows: CI checks, upstream models
    before dbt unit tests), in a schema of its own: every operator model's output is created with
    the columns and Change Data Feed a real build gives it and no rows, reads no input and records
    none as consumed; the next `dbt run` builds every output whole (dbt test: each equal to its
    expected rows and to its full recompute). `dbt build --empty` runs the data tests too: the
    package's generic tests read the empty form of a relation. Then --empty leaves the built
    outputs as they are; with --full-refresh it rebuilds them without rows, and the next run builds
    them whole again."""
    empty = "ij_empty"
    monkeypatch.setenv("DBT_SCHEMA", empty)
    spark.sql(f"drop schema if exists {empty} cascade")
    built.invoke("seed", "--quiet")
    result = built.invoke("build", "--quiet", "--empty", check=False)
    assert result.success, [(r.node.name, str(r.status), r.message) for r in result.result.results if str(r.status) not in ("pass", "success")]
    assert sum(1 for r in result.result.results if r.node.resource_type == "test") >= 20

    def schema_of(schema: str, table: str) -> list:
        return [(r.col_name, r.data_type) for r in spark.sql(f"describe {schema}.{table}").collect()]

    def check_built_empty() -> None:
        for m in OPERATOR_MODELS:
            assert spark.sql(f"select count(*) from {empty}.{m}").first()[0] == 0, m
            assert schema_of(empty, m) == schema_of(SCHEMA, m), m   # as the module's full build made it
            properties = tblproperties(spark, f"{empty}.{m}")
            assert properties["delta.enableChangeDataFeed"] == "true", m
            assert "where false" not in properties.get("incremental_joins.recompute_sql", ""), m
            consumed = spark.sql(f"select count(*) from {empty}.{m}__ij_highwater where version is not null or pending_version is not null").first()[0]
            assert consumed == 0, m
        tables = [r.tableName for r in spark.sql(f"show tables in {empty}").collect()]
        assert not [t for t in tables if "__ij_empty" in t], tables   # the empty copies of the inputs are gone

    def check_built_whole() -> None:
        built.invoke("run", "--quiet")
        for m in OPERATOR_MODELS:
            assert spark.sql(f"select count(*) from {empty}.{m}").first()[0] > 0, m
        result = built.invoke("test", "--select", *OPERATOR_MODELS, check=False)
        assert result.success and len(result.result.results) >= 10, [(r.node.name, str(r.status)) for r in result.result.results]

    def versions() -> dict:
        return {m: spark.sql(f"describe history {empty}.{m} limit 1").first()["version"] for m in OPERATOR_MODELS}

    check_built_empty()
    log = {r.model: r.mode for r in spark.sql(f"select model, mode from {empty}.incremental_joins_run_log").collect()}
    assert log == {m: "empty" for m in OPERATOR_MODELS}, log
    check_built_whole()

    before = versions()
    built.invoke("run", "--quiet", "--empty", "--select", *OPERATOR_MODELS)
    assert versions() == before
    built.invoke("run", "--quiet", "--empty", "--full-refresh", "--select", *OPERATOR_MODELS)
    check_built_empty()
    check_built_whole()
    spark.sql(f"drop schema {empty} cascade")


def test_dbt_test_passes_on_integration_project(built):
    # dbt-spark's `dbt seed` drops and re-creates seed tables: the joins need a full refresh after it.
    built.invoke("seed", "--quiet")
    built.invoke("run", "--quiet", "--full-refresh")
    result = built.invoke("test", check=False)
    failures = [r.node.name for r in result.result.results if str(r.status) != "pass"]
    assert result.success, failures
    assert len(result.result.results) >= 8


def test_docs_generate_works(built):
    """`dbt docs generate` works, and the docs show the package's public macros, materializations
    and generic tests with a description and their arguments, named as the macros name them
    (macros/incremental_joins.yml; dbt's validate_macro_args warns of a mismatch, made an error)."""
    result = built.invoke("docs", "generate", "--quiet", "--warn-error-options", '{"error": ["InvalidMacroAnnotation"]}')
    assert "model.incremental_joins_integration_tests.orders_by_country" in result.result.nodes
    macros = json.loads((built.path / "target" / "manifest.json").read_text())["macros"]
    public = {"stream": ["relation"], "join": ["left", "right", "left_alias", "right_alias"], "output_key": ["left_alias", "right_alias"],
              "as_of_join": ["stream", "table", "stream_alias", "table_alias"], "optimize_tables": ["models"],
              "vacuum_tables": ["models", "retain_hours"], "test_equals_full_recompute": [],
              "test_equal_rowsets": [], "test_change_data_feed_enabled": [],
              **{f"materialization_{m}_spark": None for m in ("foreign_key_join", "changelog_table", "deduplicate", "stream_table_join")}}
    for name, arguments in public.items():
        macro = macros[f"macro.incremental_joins.{name}"]
        assert macro["description"].strip(), name
        if arguments is not None:   # a materialization's are dbt's own
            assert [a["name"] for a in macro["arguments"]] == arguments, name
            assert all(a["description"] for a in macro["arguments"]), name


@pytest.mark.session_only
def test_failing_python_model_shows_its_traceback_with_file_and_line(scratch_project):
    project = scratch_project({
        "models/broken.py": """
            def model(dbt, spark):
                dbt.config(materialized="table")
                numbers = spark.range(3)
                return numbers.withColumn("ratio", 1 / len([]))
        """,
    })
    result = project.invoke("run", "--quiet", check=False)
    assert not result.success
    [message] = [r.message for r in result.result.results if r.node.name == "broken"]
    assert 'models/broken.py", line 4, in model' in message
    assert "ZeroDivisionError" in message
    assert 'return numbers.withColumn("ratio", 1 / len([]))' in message


# --- set-up errors: checked without starting a second JVM ---------------------------------------

def fake_java(tmp_path: Path, version_line: str) -> Path:
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return java.parent.parent


def test_no_java_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(RuntimeSetupError, match="No Java found.*JAVA_HOME"):
        check_java()


def test_old_java_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(fake_java(tmp_path, 'openjdk version "11.0.21" 2023-10-17')))
    with pytest.raises(RuntimeSetupError, match="Java 11 found, but Spark .* needs Java 17"):
        check_java()


def test_java_8_version_scheme_is_read_as_8(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(fake_java(tmp_path, 'java version "1.8.0_392"')))
    with pytest.raises(RuntimeSetupError, match="Java 8 found"):
        check_java()


def test_unreachable_jar_repository_is_a_clear_error(tmp_path):
    with pytest.raises(RuntimeSetupError, match="Could not download .*delta-spark.*INCREMENTAL_JOINS_MAVEN_REPO"):
        delta_jars(tmp_path / "jars", repo="http://127.0.0.1:9/maven2")
    assert not list((tmp_path / "jars").glob("*.jar")), "no partial jar may be left behind"


def test_runtime_check_command_exits_non_zero_with_the_message(tmp_path):
    env = {**os.environ, "JAVA_HOME": str(fake_java(tmp_path, 'openjdk version "11.0.2"'))}
    done = subprocess.run([sys.executable, "-m", "incremental_joins.runtime"], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert "Java 11 found" in done.stderr
