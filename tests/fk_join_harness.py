"""A scratch dbt project with foreign_key_join models over two Delta tables the test edits.

left  `lhs` (k K, v string, fk K)   — the "many" side, keyed by k
right `rhs` (rk K, rv string)       — the "one" side, keyed by rk
where the key type K is string unless a test asks for another (FkJoinProject.create's key_type).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from conftest import THRIFT

def sources_yml(*tables: str) -> str:
    """dbt sources: the given tables of source 't', in the target schema."""
    return ("version: 2\nsources:\n  - name: t\n    schema: \"{{ target.schema }}\"\n"
            f"    tables: [{', '.join('{name: ' + t + '}' for t in tables)}]\n")


def recompute_tests_yml(*models: str) -> str:
    """The package's equals_full_recompute test on each of the given models."""
    return "version: 2\nmodels:\n" + "".join(f"  - {{name: {m}, data_tests: [incremental_joins.equals_full_recompute]}}\n" for m in models)


SOURCES = sources_yml("lhs", "rhs")

MODEL = """
{{{{ config(materialized='foreign_key_join', left_key='k', right_key='rk', foreign_key='fk',
            join_type='{join_type}', output_key='{output_key}', full_recompute_above={threshold}{extra}) }}}}
select {{{{ incremental_joins.output_key() }}}}, l.v, l.fk, r.rv
from {{{{ incremental_joins.join(source('t', 'lhs'), source('t', 'rhs')) }}}}
"""

# The same model with a Python body (dbt.join / dbt.output_key are provided by the materialization).
PY_MODEL = """
from pyspark.sql import functions as F


def model(dbt, session):
    dbt.config(materialized="foreign_key_join", left_key="k", right_key="rk", foreign_key="fk",
               join_type="{join_type}", output_key="{output_key}", full_recompute_above={threshold}{extra})
    joined = dbt.join(dbt.source("t", "lhs"), dbt.source("t", "rhs"))
    return joined.select(*dbt.output_key(), "l.v", "l.fk", F.col("r.rv"))
"""

# name -> (join_type, output_key, full_recompute_above). The examples test the incremental path,
# so the automatic fallback is off (10 = never) except in fk_left_fallback and fk_outer_fallback,
# which recompute everything on every run and must still write change-minimally.
MODELS = {
    "fk_inner": ("inner", "left", 10),
    "fk_left": ("left", "left", 10),
    "fk_outer": ("outer", "combined", 10),
    "fk_left_fallback": ("left", "left", 0),
    "fk_outer_fallback": ("outer", "combined", 0),
    "fk_outer_py": ("outer", "combined", 10),
}
# Models whose output MERGE never broadcasts the changes (broadcast_changes_below=0); the others
# always do (a test's changes are far below the default bound), so the randomized and crash tests
# check both ways of writing.
NO_BROADCAST = {"fk_left"}


def runnable_models(names: tuple[str, ...]) -> tuple[str, ...]:
    """The models the test mode can run: a Python body needs an adapter that runs Python models
    (spark_embedded, session mode); dbt-spark's thrift method runs none."""
    return tuple(n for n in names if not (THRIFT and n.endswith("_py")))


def tblproperties(spark, relation: str) -> dict[str, str]:
    return {r.key: r.value for r in spark.sql(f"show tblproperties {relation}").collect()}


def newest_version(spark, relation: str) -> int:
    return spark.sql(f"describe history {relation} limit 1").first()["version"]


def merge_metrics(spark, relation: str) -> dict[str, int]:
    """The operation metrics of the relation's newest commit, which must be a MERGE (a run's)."""
    last = spark.sql(f"describe history {relation} limit 1").first()
    assert last.operation == "MERGE", last.operation
    metrics = last.operationMetrics   # a JSON text over the Thrift server (PyHive), a dict in session
    return {k: int(v) for k, v in (json.loads(metrics) if isinstance(metrics, str) else metrics).items()}


@contextmanager
def files_hidden(spark, relation: str, where: str) -> Iterator[int]:
    """The data files of `relation` that hold a row `where` selects, moved aside for the block and
    back after it: a statement that reads one of them fails (file not found), so a run inside the
    block that succeeds read none of them. Yields how many were hidden. (Delta's MERGE metrics
    here carry no count of the files it skipped.)"""
    paths = [r.p for r in spark.sql(f"select distinct _metadata.file_path as p from {relation} where {where}").collect()]
    local = [p.removeprefix("file:") for p in paths]
    assert local and all(os.path.isfile(p) for p in local), paths
    for p in local:
        os.rename(p, p + ".hidden")
    try:
        yield len(local)
    finally:
        for p in local:
            os.rename(p + ".hidden", p)


def sql_literal(value: Any) -> str:
    """A Spark SQL literal of `value`: backslashes are escapes in Spark's string literals, and
    `${` is split into two adjacent literals (`'$' '{'`, one string to the parser), since Spark
    substitutes `${...}` in a statement's text before parsing it; an int is written as a bigint
    literal (`5L`), which Spark stores into any integral column."""
    if isinstance(value, int):
        return f"{value}L"
    return "null" if value is None else "'" + str(value).replace("\\", "\\\\").replace("'", "\\'").replace("${", "$' '{") + "'"


@dataclass
class FkJoinProject:
    project: Any
    spark: Any
    schema: str

    @classmethod
    def create(cls, scratch_project, spark, models: tuple[str, ...] = ("fk_inner", "fk_left"),
               key_type: str = "string") -> "FkJoinProject":
        files = {"models/sources.yml": SOURCES}
        for name in models:
            join_type, output_key, threshold = MODELS[name]
            template, ext = (PY_MODEL, "py") if name.endswith("_py") else (MODEL, "sql")
            extra = ", broadcast_changes_below=0" if name in NO_BROADCAST else ""
            files[f"models/{name}.{ext}"] = template.format(join_type=join_type, output_key=output_key, threshold=threshold, extra=extra)
        project = scratch_project(files)
        schema = project.schema
        spark.sql(f"create or replace table {schema}.lhs (k {key_type}, v string, fk {key_type}) using delta")
        spark.sql(f"create or replace table {schema}.rhs (rk {key_type}, rv string) using delta")
        return cls(project, spark, schema)

    # --- changes to the inputs: one Delta commit per call ---------------------------------------
    def _upsert(self, table: str, key: str, columns: list[str], rows: tuple[tuple, ...]) -> None:
        values = ", ".join("(" + ", ".join(sql_literal(v) for v in row) + ")" for row in rows)
        names = ", ".join(columns)
        self.spark.sql(
            f"merge into {self.schema}.{table} as t using (select * from values {values} as s({names})) as s "
            f"on t.{key} = s.{key} when matched then update set * when not matched then insert *"
        )

    def _delete(self, table: str, key: str, keys: tuple[str, ...]) -> None:
        self.spark.sql(f"delete from {self.schema}.{table} where {key} in ({', '.join(map(sql_literal, keys))})")

    def put_left(self, *rows: tuple) -> None:
        self._upsert("lhs", "k", ["k", "v", "fk"], rows)

    def put_right(self, *rows: tuple) -> None:
        self._upsert("rhs", "rk", ["rk", "rv"], rows)

    def delete_left(self, *keys: str) -> None:
        self._delete("lhs", "k", keys)

    def delete_right(self, *keys: str) -> None:
        self._delete("rhs", "rk", keys)

    # --- dbt -------------------------------------------------------------------------------------
    def run(self, *args: str, vars: dict | None = None, check: bool = True):
        return self.project.invoke("run", "--quiet", *args, vars=vars, check=check)

    # --- what the output holds -------------------------------------------------------------------
    def output(self, model: str) -> dict:
        rows = self.spark.table(f"{self.schema}.{model}").collect()
        if MODELS.get(model, ("", "left"))[1] == "combined":
            return {(r.rk, r.k): (r.v, r.fk, r.rv) for r in rows}
        out = {r.k: (r.v, r.fk, r.rv) for r in rows}
        assert len(out) == len(rows), f"{model} has duplicate keys"
        return out

    def index(self, model: str) -> tuple[dict, int]:
        """The model's CombinedKey index, read back by hand: {left key: foreign key} from each key's
        newest entry that has a foreign key, and how many entries the table holds."""
        rows = self.spark.table(f"{self.schema}.{model}__ij_index").collect()
        newest: dict = {}
        for r in rows:
            if r["k"] not in newest or r["__ij_version"] > newest[r["k"]]["__ij_version"]:
                newest[r["k"]] = r
        return {k: r["__ij_fk1"] for k, r in newest.items() if r["__ij_fk1"] is not None}, len(rows)

    def output_version(self, model: str) -> int:
        return newest_version(self.spark, f"{self.schema}.{model}")

    def output_changes(self, model: str, since_version: int | None = None) -> set[tuple[str, Any]]:
        """(change type, key) rows of the output's Change Data Feed after `since_version` (default:
        the versions written by the latest dbt run of the model, read from the run log)."""
        if since_version is None:
            since_version = self.last_run_log(model)["_version_before"]
        latest = self.output_version(model)
        if latest <= since_version:
            return set()
        rows = self.spark.sql(
            f"select * from table_changes('{self.schema}.{model}', {since_version + 1}, {latest})"
        ).collect()
        combined = MODELS.get(model, ("", "left"))[1] == "combined"
        return {(r._change_type, (r.rk, r.k) if combined else r.k)
                for r in rows if r._change_type != "update_preimage"}

    def last_run_log(self, model: str) -> dict:
        runs = self.spark.sql(
            f"select * from {self.schema}.incremental_joins_run_log where model = '{model}' "
            "order by finished_at desc limit 2"
        ).collect()
        latest = runs[0].asDict()
        latest["versions_read"] = json.loads(latest["versions_read"])
        latest["_version_before"] = self._version_at(model, runs[1].finished_at) if len(runs) > 1 else -1
        return latest

    def _version_at(self, model: str, when) -> int:
        history = self.spark.sql(f"describe history {self.schema}.{model}").collect()
        return max(h.version for h in history if h.timestamp <= when)


def random_seeds(*default: int) -> list[int]:
    """The seeds a randomized test runs: its own (CI's), or those of INCREMENTAL_JOINS_RANDOM_SEEDS
    (comma-separated, e.g. `21,22,23`) to try more random histories than CI has time for."""
    given = os.environ.get("INCREMENTAL_JOINS_RANDOM_SEEDS", "").replace(",", " ").split()
    if given and not all(s.lstrip("-").isdigit() for s in given):
        raise ValueError(f"INCREMENTAL_JOINS_RANDOM_SEEDS={os.environ['INCREMENTAL_JOINS_RANDOM_SEEDS']!r}: "
                         "write whole numbers separated by commas, e.g. 21,22,23")
    return [int(s) for s in given] or list(default)


def key_type_of(seed: int) -> str:
    """The key type a randomized test's history uses: bigint for an odd seed (every test's CI seed
    is odd), string for an even one — so that extra seeds cover both types' literals."""
    return "bigint" if seed % 2 else "string"


# The steps a run can be stopped at (macro inject_failure), in the order a run reaches them.
CRASH_STEPS = ["after_output_merge", "after_index_merge", "before_highwater"]


@contextmanager
def failing_at(step: str) -> Iterator[None]:
    """dbt runs inside stop at `step`: the environment variable INCREMENTAL_JOINS_FAIL_AT (a
    dbt var would make every other run parse the whole project again)."""
    os.environ["INCREMENTAL_JOINS_FAIL_AT"] = step
    try:
        yield
    finally:
        del os.environ["INCREMENTAL_JOINS_FAIL_AT"]


@contextmanager
def running_at(step: str, sql: str) -> Iterator[None]:
    """dbt runs inside run the statement `sql` at `step` (INCREMENTAL_JOINS_SQL_AT and
    INCREMENTAL_JOINS_SQL, read by the macro inject_failure): another run's write in the middle of
    a run, or a pause."""
    os.environ["INCREMENTAL_JOINS_SQL_AT"], os.environ["INCREMENTAL_JOINS_SQL"] = step, sql
    try:
        yield
    finally:
        del os.environ["INCREMENTAL_JOINS_SQL_AT"], os.environ["INCREMENTAL_JOINS_SQL"]


def run_paused_at(project, step: str, meanwhile: Callable[[], object]) -> tuple[int, str]:
    """Two runs of the project's models at the same time (thrift mode: two dbt processes on one
    cluster): run A, another process, pauses at `step` (the test hook's statement, a 45 s sleep on
    the Thrift server) while `meanwhile` runs (run B, and what comes before it). A's exit code and
    log."""
    log = project.path / f"run_a_{step}.log"
    env = {**os.environ, "INCREMENTAL_JOINS_SQL_AT": step,
           "INCREMENTAL_JOINS_SQL": "select reflect('java.lang.Thread', 'sleep', cast(45000 as bigint))"}
    with open(log, "w") as out:
        run_a = subprocess.Popen([sys.executable, "-m", "dbt.cli.main", "run", "--project-dir", str(project.path), "--profiles-dir", str(project.path),
                                  "--target", project.target], env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while f"running INCREMENTAL_JOINS_SQL at {step}" not in log.read_text():
            assert run_a.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        meanwhile()
        return run_a.wait(timeout=300), log.read_text()
    finally:
        run_a.kill()


def output_appends(spark, table: str) -> int:
    """How many appends (WRITE commits) the table's history holds."""
    return sum(r["operation"] == "WRITE" for r in spark.sql(f"describe history {table}").collect())


def logged_inserts(spark, schema: str, model: str, last: bool = False) -> int:
    """The rows the run log says the model's runs inserted, all runs together (or its last run)."""
    runs = f"select rows_inserted from {schema}.incremental_joins_run_log where model = '{model}'" + (" order by finished_at desc limit 1" if last else "")
    return spark.sql(f"select coalesce(sum(rows_inserted), 0) as n from ({runs}) as r").collect()[0]["n"]


def error_of(result) -> str:
    """The error messages of a failed dbt invocation."""
    assert not result.success
    return " ".join(str(r.message) for r in result.result.results if str(r.status) == "error")
