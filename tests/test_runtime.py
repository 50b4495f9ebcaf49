"""The embedded runtime: dbt on Spark + Delta in one process, Python models, clear set-up errors."""

from __future__ import annotations

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


def test_dbt_test_passes_on_integration_project(built):
    # dbt-spark's `dbt seed` drops and re-creates seed tables: the joins need a full refresh after it.
    built.invoke("seed", "--quiet")
    built.invoke("run", "--quiet", "--full-refresh")
    result = built.invoke("test", check=False)
    failures = [r.node.name for r in result.result.results if str(r.status) != "pass"]
    assert result.success, failures
    assert len(result.result.results) >= 8


def test_docs_generate_works(built):
    result = built.invoke("docs", "generate", "--quiet")
    assert "model.incremental_joins_integration_tests.orders_by_country" in result.result.nodes


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
