"""`bash integration_tests/demo.sh`: build the integration project on the embedded runtime.

Runs `dbt deps`, `dbt seed`, `dbt run` and `dbt test` in one process on the embedded Spark + Delta
session and prints what each model became (materialization, rows, Delta version, Change Data Feed)
and how the tests went. Then it changes one customer (the "one" side of the orders → customers
foreign-key join), runs the join models again and prints what the incremental run read and wrote,
from the package's run log. Last, it compacts every operator model's tables
(`dbt run-operation incremental_joins.optimize_tables`) and prints their file counts.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from incremental_joins.project import DbtCommandFailed, DbtProject

INTEGRATION_PROJECT = Path(__file__).resolve().parents[2] / "integration_tests"


def _table_facts(spark, relation: str) -> tuple[int, int, str]:
    rows = spark.table(relation).count()
    version = spark.sql(f"describe history {relation} limit 1").first()["version"]
    props = {r.key: r.value for r in spark.sql(f"show tblproperties {relation}").collect()}
    return rows, version, props.get("delta.enableChangeDataFeed", "false")


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession

    project = DbtProject(INTEGRATION_PROJECT)
    started = time.time()
    try:
        project.invoke("deps", "--quiet")
        # dbt-spark's `dbt seed` drops and re-creates seed tables, so the joins over them start
        # from a full refresh; the incremental run comes after the change below.
        project.invoke("seed", "--quiet")
        run = project.invoke("run", "--full-refresh", *argv)
        test = project.invoke("test", "--quiet", check=False)
    except DbtCommandFailed as exc:
        print(exc, file=sys.stderr)
        return 1

    spark = SparkSession.builder.getOrCreate()
    print("\nincremental_joins demo — integration project on embedded Spark + Delta")
    print(f"{'model':<36} {'materialized':<18} {'status':<8} {'rows':>6} {'version':>7} {'CDF':>5} {'secs':>6}")
    for r in run.result.results:
        node = r.node
        if node.resource_type != "model":
            continue
        relation = f"{node.schema}.{node.alias}"
        rows, version, cdf = _table_facts(spark, relation) if node.config.materialized != "view" else ("-", "-", "-")
        print(f"{node.name:<36} {node.config.materialized:<18} {str(r.status):<8} {rows:>6} "
              f"{version:>7} {cdf:>5} {r.execution_time:>6.1f}")
    tests = [r for r in test.result.results if r.node.resource_type in ("test", "unit_test")]
    outcomes = [str(r.status) for r in tests]
    units = sum(r.node.resource_type == "unit_test" for r in tests)
    print(f"\ndbt test: {outcomes.count('pass')} passed, {len(outcomes) - outcomes.count('pass')} failed "
          f"({units} of them unit tests)")
    for r in tests:
        if str(r.status) != "pass":
            print(f"  {r.status}: {r.node.name}: {r.message}")
    if not test.success:
        return 1

    schema = run.result.results[-1].node.schema
    spark.sql(f"update {schema}.customers set country = 'FR' where customer_id = 1")
    print("\nchange: customer 1 moves to FR (one right-side row, referenced by two orders)")
    project.invoke("run", "--quiet", "--select", "orders_enriched", "customers_orders_outer")
    log = spark.sql(
        "select model, mode, rows_read, affected_keys, fan_out, rows_inserted, rows_updated, "
        f"rows_deleted, round(duration_s, 1) as secs from {schema}.incremental_joins_run_log "
        "where model in ('orders_enriched', 'customers_orders_outer') order by finished_at desc limit 2"
    )
    print("incremental run, from the run log:")
    print(f"{'model':<26} {'mode':<12} {'read':>5} {'keys':>5} {'fan-out':>8} {'ins':>4} {'upd':>4} {'del':>4} {'secs':>5}")
    for r in log.collect():
        print(f"{r.model:<26} {r.mode:<12} {r.rows_read:>5} {r.affected_keys:>5} {r.fan_out:>8} "
              f"{r.rows_inserted:>4} {r.rows_updated:>4} {r.rows_deleted:>4} {r.secs:>5}")
    countries = spark.sql(f"select order_id, country from {schema}.orders_enriched order by order_id").collect()
    print("orders_enriched now:", ", ".join(f"{r.order_id}→{r.country}" for r in countries))

    tables = [f"{schema}.orders_enriched", f"{schema}.orders_enriched__ij_index", f"{schema}.incremental_joins_run_log"]
    files = lambda: [spark.sql(f"describe detail {t}").first()["numFiles"] for t in tables]  # noqa: E731
    before = files()
    project.invoke("run-operation", "--quiet", "incremental_joins.optimize_tables")
    print("\ntable maintenance (dbt run-operation incremental_joins.optimize_tables), files before -> after:")
    print(", ".join(f"{t.split('.')[-1]} {b} -> {a}" for t, b, a in zip(tables, before, files())))
    print(f"\ndone in {time.time() - started:.0f}s; warehouse: {spark.conf.get('spark.sql.warehouse.dir')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
