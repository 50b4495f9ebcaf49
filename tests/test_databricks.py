"""The package under the `databricks` adapter, without a workspace (dbt Cloud on Databricks).

dbt-databricks pins another dbt-spark than this repository, so it gets its own virtualenv
(`.venv-databricks`, made once). There, `dbt parse` of a project with one model per operator —
keys under `config(meta=...)`, as README's Databricks section shows — must succeed offline with no
unknown-config-key warning, and every materialization and dispatched macro must resolve for
`databricks` through `spark` (which it inherits). The same models with the keys at the top level
of `config()` do warn: the check can fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT

# Needs no Spark at all: run once, not per test mode. One worker for both tests: each builds the
# Databricks venv when it is missing, and two workers building it at once replace its files under
# each other's running dbt (seen: the parse killed by SIGBUS).
pytestmark = [pytest.mark.session_only, pytest.mark.xdist_group("databricks_venv")]

VENV = ROOT / ".venv-databricks"
REQUIREMENTS = ["dbt-core~=1.11.0", "dbt-databricks~=1.11.0"]

OPERATORS = {
    "fk": ("foreign_key_join", {"left_key": "order_id", "right_key": "customer_id", "foreign_key": "customer_id",
                                "join_type": "left"},
           "select {{ incremental_joins.output_key() }}, r.name\n"
           "from {{ incremental_joins.join(source('raw', 'orders'), source('raw', 'customers')) }}"),
    "current": ("changelog_table", {"key": "customer_id", "sequence": "lsn"},
                "select * from {{ incremental_joins.stream(source('raw', 'customers_cdc')) }}"),
    "dedup": ("deduplicate", {"key": "event_id", "interval": "10 minutes", "event_time": "ts"},
              "select * from {{ incremental_joins.stream(source('raw', 'events')) }}"),
    "stj": ("stream_table_join", {"key": "customer_id", "event_time": "ts", "join_type": "left"},
            "select s.order_id, t.name\n"
            "from {{ incremental_joins.as_of_join(source('raw', 'orders'), source('raw', 'customers')) }}"),
}
PROFILE = """
scratch:
  target: dbx
  outputs:
    dbx:
      type: databricks
      host: example.cloud.databricks.com
      http_path: /sql/1.0/warehouses/0000000000000000
      token: not-a-token
      catalog: main
      schema: analytics
"""
SOURCES = """
version: 2
sources:
  - name: raw
    tables: [{name: orders}, {name: customers}, {name: customers_cdc}, {name: events}]
  - name: bronze           # a source in another Unity Catalog catalog than the target's (main)
    database: bronze
    schema: raw
    tables: [{name: orders}]
"""


@pytest.fixture(scope="module")
def databricks_python() -> Path:
    python = VENV / "bin" / "python"
    stamp = VENV / ".stamp"
    installed = stamp.read_text() if stamp.exists() else ""
    if not python.exists() or installed != repr(REQUIREMENTS):
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *REQUIREMENTS], check=True, timeout=900)
        stamp.write_text(repr(REQUIREMENTS))
    return python


def write_project(python: Path, project: Path, keys_under_meta: bool) -> dict:
    """The scratch project (one model per operator) with its packages installed; returns the
    environment to run dbt in."""
    (project / "models").mkdir(parents=True, exist_ok=True)
    (project / "profiles.yml").write_text(PROFILE)
    (project / "dbt_project.yml").write_text("name: scratch\nversion: '1.0'\nconfig-version: 2\nprofile: scratch\n")
    (project / "packages.yml").write_text(f"packages:\n  - local: {ROOT}\n")
    (project / "models" / "sources.yml").write_text(textwrap.dedent(SOURCES))
    for name, (materialized, keys, body) in OPERATORS.items():
        args = f"meta={keys!r}" if keys_under_meta else ", ".join(f"{k}={v!r}" for k, v in keys.items())
        (project / "models" / f"{name}.sql").write_text(f"{{{{ config(materialized={materialized!r}, {args}) }}}}\n{body}\n")
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    subprocess.run([str(python), "-m", "dbt.cli.main", "deps", "--quiet", "--project-dir", str(project),
                    "--profiles-dir", str(project)], check=True, env=env, cwd=project)
    return env


def parse(python: Path, project: Path, keys_under_meta: bool) -> dict:
    env = write_project(python, project, keys_under_meta)
    done = subprocess.run([str(python), str(ROOT / "tests" / "databricks_parse.py"), str(project)],
                          capture_output=True, text=True, env=env, cwd=project, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_package_parses_for_databricks_without_config_warnings_and_resolves_through_spark(databricks_python, tmp_path):
    out = parse(databricks_python, tmp_path / "meta", keys_under_meta=True)
    assert out["success"], out["exception"]
    assert out["warnings"] == []
    assert set(out["models"]) >= set(OPERATORS)
    assert out["adapter_chain"][:2] == ["databricks", "spark"]
    assert out["materializations"] == {
        materialized: f"macro.incremental_joins.materialization_{materialized}_spark"
        for materialized, _, _ in OPERATORS.values()}
    # Every adapter.dispatch of the package finds an implementation for databricks.
    assert set(out["dispatch"]) >= {"create_run_log", "create_state_table", "stage"}
    assert all(out["dispatch"].values()), out["dispatch"]


def test_keys_at_the_top_of_config_warn_under_databricks(databricks_python, tmp_path):
    out = parse(databricks_python, tmp_path / "top", keys_under_meta=False)
    assert out["success"], out["exception"]
    warned = {w["name"] for w in out["warnings"]}
    assert "CustomKeyInConfigDeprecation" in warned, out["warnings"]
    # Each of the operators' own keys is named (one warning per key and file); `event_time` is
    # also a dbt config (microbatch), so dbt knows it.
    messages = " ".join(w["msg"] for w in out["warnings"])
    for _, keys, _ in OPERATORS.values():
        for key in set(keys) - {"event_time"}:
            assert f"Custom key `{key}`" in messages, key
    assert "Custom key `event_time`" not in messages


# What the package makes of relation names under `databricks` (offline: a run-operation that sends
# no statement), for an input in another catalog (`bronze`) and a model in another catalog than the
# target's (`gold`).
PROBE = """
{% macro probe() %}
  {%- set input = source('bronze', 'orders') | string -%}
  {%- set output = ref('enriched') | string -%}
  {%- set parsed = incremental_joins.parse_relation(input) -%}
  {%- set state = incremental_joins.state_relation('index', incremental_joins.parse_relation(output)) -%}
  {{ print(tojson({'input': input, 'input_catalog': parsed.database, 'changes': incremental_joins.table_changes_sql(input, 6),
                   'output': output, 'state': state | string})) }}
{% endmacro %}
"""


def test_inputs_and_state_keep_their_unity_catalog_catalog(databricks_python, tmp_path):
    project = tmp_path / "catalogs"
    env = write_project(databricks_python, project, keys_under_meta=True)
    (project / "macros").mkdir()
    (project / "macros" / "probe.sql").write_text(PROBE)
    (project / "models" / "enriched.sql").write_text(
        "{{ config(materialized='deduplicate', database='gold', meta={'key': 'order_id', 'interval': '1 hour', "
        "'event_time': 'ts'}) }}\nselect * from {{ incremental_joins.stream(source('bronze', 'orders')) }}\n")
    done = subprocess.run([str(databricks_python), "-m", "dbt.cli.main", "run-operation", "probe", "--project-dir",
                           str(project), "--profiles-dir", str(project)],
                          capture_output=True, text=True, env=env, cwd=project, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    out = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("{")))
    assert out["input"] == "`bronze`.`raw`.`orders`"
    # The Change Data Feed of the input in its own catalog, not of `raw.orders` in the current one.
    assert out["input_catalog"] == "bronze"
    assert out["changes"] == "table_changes('bronze.raw.orders', 7)"
    # State tables beside the output, in the model's catalog.
    assert out["output"] == "`gold`.`analytics`.`enriched`"
    assert out["state"] == "`gold`.`analytics`.`enriched__ij_index`"
