"""The benchmark: every operator beside the baselines a user would otherwise run, on generated
data, in one process on the embedded Spark + Delta session; writes a markdown report, PNG plots
and the raw figures (results.json).

    bash benchmark/run.sh                          # the full grid: 1M and 10M rows, 0.1/1/10/50%
    bash benchmark/run.sh --sizes 100000 --fractions 0.01 --out /tmp/bench   # a quick look

Per size, the generator writes the inputs (orders -> customers, an event stream with
redeliveries and late records, purchases -> a versioned price table) and every model is built
once. Then each change fraction is one round: the same deterministic change is committed to the
inputs and every method processes it. Each round checks every method's result against the full
rebuild before its timing is reported: a wrong result stops the benchmark.

Timings are dbt's execution time of the model (what `dbt run` reports; parsing excluded), or
the wall time of the Spark job for the methods that are not dbt models (the MERGE floor,
Structured Streaming). Rows rewritten come from Delta's operation metrics of the commits the
run made (DESCRIBE HISTORY). Each operator's incremental run, and foreign_key_join's
full-recompute path, is profiled statement by statement from dbt's events (Statements), for the
report's "where the time goes".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECT_DIR = HERE / "project"
T0 = "timestamp'2026-01-01 00:00:00'"
EVENT_STEP_MS = 50  # events and purchases: 20 per second of event time

COLUMNS = {
    "fk": ["order_id", "customer_id", "amount", "status", "customer_name", "country", "tier"],
    "stj": ["purchase_id", "product_id", "purchased_at", "qty", "price"],
}


def label(size: int) -> str:
    return f"{size // 1_000_000}M" if size % 1_000_000 == 0 else f"{size // 1000}k"


# --- measuring ---------------------------------------------------------------------------------

class PeakMemory:
    """Samples the driver JVM's resident memory (it runs the whole job in local mode) while a
    case runs; `peak_mb` is the largest sample of the last `with` block."""

    def __init__(self, pid: int) -> None:
        self.path = Path(f"/proc/{pid}/status")
        self.peak_mb = 0.0
        self._stop = threading.Event()

    def _rss_mb(self) -> float:
        try:
            for line in self.path.read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            self.peak_mb = max(self.peak_mb, self._rss_mb())

    def __enter__(self) -> "PeakMemory":
        self.peak_mb = self._rss_mb()
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, self._rss_mb())


class Statements:
    """Where a model run's time goes, from dbt's events (a dbtRunner callback): each statement
    dbt sends (`SQLQuery`) timed from its start to the next statement of the same model or the
    model's end (`NodeFinished`). That includes fetching its result, which dbt's own `SQL status`
    time leaves out in session mode, and the Jinja between statements, which is small."""

    def __init__(self) -> None:
        self.runs: dict[str, list] = {}  # model name -> [(seconds since epoch, sql or None at the end)]

    def __call__(self, msg) -> None:
        name = msg.info.name
        if name not in ("NodeStart", "SQLQuery", "NodeFinished"):
            return
        model = msg.data.node_info.node_name
        if not model:
            return
        at = msg.info.ts.seconds + msg.info.ts.nanos / 1e9
        if name == "NodeStart":
            self.runs[model] = []
        else:
            self.runs.setdefault(model, []).append((at, msg.data.sql if name == "SQLQuery" else None))

    def profile(self, model: str, schema: str, top: int = 10) -> dict:
        """The model's last run: its statements' seconds, summed per label (statement_label: those
        whose first 80 characters match), largest first; the `top` largest, the rest as one sum."""
        events = self.runs.get(model, [])
        seconds: dict[str, list] = {}
        for (at, sql), (until, _) in zip(events, events[1:]):
            if sql is not None:
                entry = seconds.setdefault(statement_label(sql, schema, model), [0.0, 0])
                entry[0] += until - at
                entry[1] += 1
        ranked = sorted(([label, round(s, 2), n] for label, (s, n) in seconds.items()), key=lambda e: -e[1])
        rest = ranked[top:]
        return {"statements": sum(e[2] for e in ranked), "seconds": round(sum(e[1] for e in ranked), 2),
                "top": ranked[:top], "rest": [round(sum(e[1] for e in rest), 2), sum(e[2] for e in rest)]}


def statement_label(sql: str, schema: str, model: str) -> str:
    """A statement in a few words: dbt's query comment, the schema and the run's staged-view
    prefix dropped, whitespace folded, cut at 80 characters."""
    text = " ".join(re.sub(r"^\s*/\*.*?\*/", "", sql, count=1, flags=re.S).split())
    text = text.replace(f"__ij_{schema}__{model}__", "").replace(f"{schema}.", "")
    return text if len(text) <= 80 else text[:79] + "…"


# A MERGE's phases in Delta's operation metrics, in milliseconds.
MERGE_PHASES = {"source": "materializeSourceTimeMs", "scan": "scanTimeMs", "rewrite": "rewriteTimeMs",
                "merge": "executionTimeMs"}


def merge_phases(commits: list) -> dict | None:
    """Seconds of each phase of the MERGE commits among `commits` (DESCRIBE HISTORY rows), summed,
    from Delta's operation metrics: `source` computes and materializes the MERGE's source, `scan`
    finds the target files that hold a matching row, `rewrite` writes the changed rows and the
    deletion vectors, `merge` is the whole command. None when no MERGE committed (a MERGE that
    changes nothing commits nothing)."""
    merges = [c["operationMetrics"] or {} for c in commits if c["operation"] == "MERGE"]
    if not merges:
        return None
    return {name: sum(int(m.get(key) or 0) for m in merges) / 1000 for name, key in MERGE_PHASES.items()}


def rows_written_in(commits: list) -> int:
    """Rows the commits (DESCRIBE HISTORY rows) wrote into new data files."""
    return sum(rows_written(c["operationMetrics"]) for c in commits)


def rows_written(metrics: dict) -> int:
    """Rows a commit wrote into new data files (a delete by deletion vector writes none)."""
    m = {k: int(v) for k, v in (metrics or {}).items() if str(v).isdigit()}
    if "numOutputRows" in m:
        return m["numOutputRows"]
    return m.get("numCopiedRows", 0) + m.get("numUpdatedRows", 0) + m.get("numAddedRows", 0)


@dataclass
class Bench:
    spark: object
    schema: str
    seed: int
    memory: PeakMemory
    rows: list = field(default_factory=list)
    statements: Statements | None = None

    # -- SQL helpers ----------------------------------------------------------------------------
    def sql(self, text: str):
        return self.spark.sql(text)

    def scalar(self, text: str):
        return self.sql(text).first()[0]

    def t(self, name: str) -> str:
        return f"{self.schema}.{name}"

    def u(self, tag: str, expr: str) -> str:
        """A uniform number in [0, 1) from the seed, a tag and a value: the same on every machine
        and for every partitioning, so the data is reproducible from the seed."""
        return f"(pmod(xxhash64({self.seed}, '{tag}', {expr}), 1000000007) / 1000000007.0)"

    def version(self, table: str) -> int:
        return int(self.sql(f"describe history {self.t(table)} limit 1").first()["version"])

    def commits_since(self, table: str, before: dict[str, int]) -> list:
        """The commits of `table` after version `before[table]` (DESCRIBE HISTORY rows); none when
        the table does not exist."""
        if not self.spark.catalog.tableExists(self.t(table)):
            return []
        return [h for h in self.sql(f"describe history {self.t(table)}").collect() if h["version"] > before.get(table, -1)]

    def written_since(self, tables: list[str], before: dict[str, int]) -> dict[str, int]:
        """Rows written per existing table by the commits after `before[table]`."""
        return {table: rows_written_in(self.commits_since(table, before))
                for table in tables if self.spark.catalog.tableExists(self.t(table))}

    def versions(self, tables: list[str]) -> dict[str, int]:
        return {t: self.version(t) if self.spark.catalog.tableExists(self.t(t)) else -1 for t in tables}

    # -- running one method ---------------------------------------------------------------------
    def dbt(self, project, model: str, *args: str) -> float:
        result = project.invoke("run", "--quiet", "--select", model, *args)
        # The package's on-run-start hook is a result too: take the model's.
        return float(next(r.execution_time for r in result.result.results if r.node.name == model))

    def profile(self, model: str) -> dict | None:
        return self.statements.profile(model, self.schema) if self.statements else None

    def timed(self, fn) -> tuple[float, float]:
        with self.memory:
            start = time.perf_counter()
            seconds = fn()
            wall = time.perf_counter() - start
        return (seconds if seconds is not None else wall), self.memory.peak_mb

    def record(self, **row) -> dict:
        row.setdefault("schema", self.schema)
        self.rows.append(row)
        print("  " + ", ".join(f"{k}={v}" for k, v in row.items() if k not in ("schema", "profile")), flush=True)
        return row

    def same_rows(self, a: str, b: str, columns: list[str], where_b: str = "true") -> int:
        """Rows in one relation and not in the other (multiset), 0 when equal."""
        cols = ", ".join(columns)
        return int(self.scalar(
            f"select count(*) from ((select {cols} from {a} except all select {cols} from {b} where {where_b})"
            f" union all (select {cols} from {b} where {where_b} except all select {cols} from {a}))"))


# --- generated inputs -------------------------------------------------------------------------

def create_inputs(b: Bench, size: int) -> None:
    """orders (size) -> customers (size/10); events (size); purchases (size) -> prices (size/10)."""
    customers, products = size // 10, size // 10
    u = b.u
    statements = {
        "customers": f"""select id as customer_id, concat('customer ', id) as name,
            element_at(array('DE','FR','NL','PL','US','BR','JP','IN'), 1 + cast({u('country', 'id')} * 8 as int)) as country,
            cast({u('tier', 'id')} * 3 as int) as tier, {T0} as updated_at from range({customers})""",
        "orders": f"""select id as order_id, cast({u('fk', 'id')} * {customers} as bigint) as customer_id,
            round({u('amount', 'id')} * 500, 2) as amount,
            element_at(array('new','paid','shipped','returned'), 1 + cast({u('status', 'id')} * 4 as int)) as status,
            {T0} as updated_at from range({size})""",
        "events": events_sql(b, 0, size),
        "price_versions": f"""select id as product_id, round(10 + {u('price', 'id')} * 90, 2) as price,
            {T0} - interval 1 day as valid_from from range({products})""",
        "purchases": purchases_sql(b, 0, size, products),
    }
    for name, select in statements.items():
        b.sql(f"drop table if exists {b.t(name)}")
        b.sql(f"create table {b.t(name)} using delta "
              f"tblproperties ('delta.enableChangeDataFeed' = 'true') as {select}")
    b.sql(f"drop table if exists {b.t('prices')}")
    b.sql(f"create table {b.t('prices')} using delta tblproperties ('delta.enableChangeDataFeed' = 'true') "
          f"as select * from {b.t('price_versions')}")


def event_time(b: Bench, i: str) -> str:
    return f"{T0} + make_interval(0, 0, 0, 0, 0, 0, {i} * {EVENT_STEP_MS} / 1000.0)"


def events_sql(b: Bench, start: int, count: int) -> str:
    """Events start..start+count: one in ten redelivers an earlier message (most within 10
    minutes, some later), one in a hundred arrives 30 minutes late."""
    u = b.u
    lag = f"cast(pow({u('lag', 'id')}, 3) * 30000 as bigint)"
    return f"""select id as event_offset,
        case when {u('dup', 'id')} < 0.1 then greatest(id - 1 - {lag}, 0) else id end as msg_id,
        cast({u('user', 'id')} * 100000 as bigint) as user_id,
        {event_time(b, 'id')} - case when {u('late', 'id')} < 0.01 then interval 30 minutes else interval 0 seconds end as ts,
        concat('payload ', id) as payload
      from range({start}, {start + count})"""


def purchases_sql(b: Bench, start: int, count: int, products: int) -> str:
    """Purchases start..start+count; one in a hundred arrives up to five minutes late."""
    u = b.u
    return f"""select id as purchase_id, cast({u('product', 'id')} * {products} as bigint) as product_id,
        {event_time(b, 'id')} - make_interval(0, 0, 0, 0, 0, 0, case when {u('plate', 'id')} < 0.01 then {u('lateness', 'id')} * 300 else 0 end) as purchased_at,
        cast(1 + {u('qty', 'id')} * 5 as int) as qty
      from range({start}, {start + count})"""


def change_round(b: Bench, rnd: int, fraction: float, size: int, offsets: dict) -> dict:
    """One round's changes, one commit per input: `fraction` of the orders (updates 65%, foreign
    key moves 20%, deletes 15%, plus inserts of a tenth as many) and of the customers (updates
    80%, deletes 20%, plus inserts of a tenth), new events and purchases (`fraction` of the
    size) with the price versions of `fraction` of the products in their time span."""
    u = b.u
    at = f"{T0} + interval {rnd * 60 + 30} minutes"  # after T0, the initial rows' time, from round 0 on
    customers_now = offsets["customers"]
    pick = lambda tag, col: f"{u(f'{tag}{rnd}', col)}"  # noqa: E731
    inserts = max(1, round(size * fraction / 10))
    b.sql(f"""merge into {b.t('orders')} as t using (
        select order_id, op,
          case when op = 'move' then cast({pick('newfk', 'order_id')} * {customers_now} as bigint) else customer_id end as customer_id,
          round({pick('newamount', 'order_id')} * 500, 2) as amount,
          element_at(array('new','paid','shipped','returned'), 1 + cast({pick('newstatus', 'order_id')} * 4 as int)) as status
        from (select order_id, customer_id,
                case when {pick('op', 'order_id')} < 0.65 then 'update' when {pick('op', 'order_id')} < 0.85 then 'move' else 'delete' end as op
              from {b.t('orders')} where {pick('pick', 'order_id')} < {fraction})
        union all
        select id, 'insert', cast({pick('newfk', 'id')} * {customers_now} as bigint), round({pick('newamount', 'id')} * 500, 2), 'new'
        from range({offsets['orders']}, {offsets['orders'] + inserts})
      ) as s on t.order_id = s.order_id
      when matched and s.op = 'delete' then delete
      when matched then update set customer_id = s.customer_id, amount = s.amount, status = s.status, updated_at = {at}
      when not matched then insert (order_id, customer_id, amount, status, updated_at)
        values (s.order_id, s.customer_id, s.amount, s.status, {at})""")
    offsets["orders"] += inserts
    customer_inserts = max(1, round(size // 10 * fraction / 10))
    b.sql(f"""merge into {b.t('customers')} as t using (
        select customer_id, case when {pick('cop', 'customer_id')} < 0.8 then 'update' else 'delete' end as op
        from {b.t('customers')} where {pick('cpick', 'customer_id')} < {fraction}
        union all select id, 'insert' from range({customers_now}, {customers_now + customer_inserts})
      ) as s on t.customer_id = s.customer_id
      when matched and s.op = 'delete' then delete
      when matched then update set name = concat('customer ', s.customer_id, ' r{rnd}'),
        country = element_at(array('DE','FR','NL','PL','US','BR','JP','IN'), 1 + cast({pick('ccountry', 's.customer_id')} * 8 as int)),
        updated_at = {at}
      when not matched then insert (customer_id, name, country, tier, updated_at)
        values (s.customer_id, concat('customer ', s.customer_id), 'DE', 0, {at})""")
    offsets["customers"] += customer_inserts

    new = max(1, round(size * fraction))
    start = offsets["stream"]
    b.sql(f"insert into {b.t('events')} {events_sql(b, start, new)}")
    products = size // 10
    span_start, span_ms = event_time(b, str(start)), new * EVENT_STEP_MS
    b.sql(f"""create or replace temporary view __bench_new_prices as
        select id as product_id, round(10 + {pick('newprice', 'id')} * 90, 2) as price,
          {span_start} + make_interval(0, 0, 0, 0, 0, 0, floor({pick('at', 'id')} * {span_ms}) / 1000.0) as valid_from
        from range({products}) where {pick('ppick', 'id')} < {fraction}""")
    b.sql(f"insert into {b.t('price_versions')} select * from __bench_new_prices")
    b.sql(f"""merge into {b.t('prices')} as t using __bench_new_prices as s on t.product_id = s.product_id
        when matched then update set price = s.price, valid_from = s.valid_from""")
    b.sql(f"insert into {b.t('purchases')} {purchases_sql(b, start, new, products)}")
    offsets["stream"] += new
    return {"left_changes": int(b.scalar(f"select count(*) from table_changes('{b.t('orders')}', {b.version('orders')}, {b.version('orders')}) where _change_type != 'update_preimage'")),
            "right_changes": int(b.scalar(f"select count(*) from table_changes('{b.t('customers')}', {b.version('customers')}, {b.version('customers')}) where _change_type != 'update_preimage'")),
            "new_records": new}


# --- the cases --------------------------------------------------------------------------------

FK_STATE = ["fk_incremental", "fk_incremental__ij_index", "fk_incremental__ij_highwater"]


def fk_round(b: Bench, project, size: int, fraction: float, changes: dict) -> None:
    """Foreign-key join: full rebuild, the operator (incremental; full-recompute path), the
    naive incremental model, the MERGE floor."""
    common = {"operator": "foreign_key_join", "size": size, "fraction": fraction}
    before = b.versions(["fk_full"])
    full_s, full_mem = b.timed(lambda: b.dbt(project, "fk_full"))
    full_written = b.written_since(["fk_full"], before).get("fk_full")
    # What changed in the correct output: the MERGE floor's input, precomputed, untimed.
    cols = COLUMNS["fk"]
    b.sql(f"""create or replace table {b.t('floor_changes')} using delta as
        select {', '.join(cols)}, false as gone from (select {', '.join(cols)} from {b.t('fk_full')}
                                                     except select {', '.join(cols)} from {b.t('floor_target')})
        union all
        select {', '.join('f.' + c for c in cols)}, true from {b.t('floor_target')} as f
        left anti join {b.t('fk_full')} as n on f.order_id = n.order_id""")
    changed = int(b.scalar(f"select count(*) from {b.t('floor_changes')}"))
    b.record(**common, method="full rebuild", seconds=full_s, peak_mb=full_mem, rows_changed=changed,
             rows_written=full_written, wrong_rows=0, **changes)

    before = b.versions(FK_STATE)
    inc_s, inc_mem = b.timed(lambda: b.dbt(project, "fk_incremental"))
    output = b.commits_since("fk_incremental", before)
    index_written = b.written_since(["fk_incremental__ij_index"], before).get("fk_incremental__ij_index", 0)
    wrong = b.same_rows(b.t("fk_incremental"), b.t("fk_full"), cols)
    log = b.sql(f"select affected_keys, mode from {b.t('incremental_joins_run_log')} where model = 'fk_incremental' "
                "order by finished_at desc limit 1").first()
    b.record(**common, method="incremental", seconds=inc_s, peak_mb=inc_mem, rows_changed=changed,
             rows_written=rows_written_in(output), state_rows_written=index_written,
             affected_keys=int(log["affected_keys"] or 0), mode=log["mode"], wrong_rows=wrong,
             profile=b.profile("fk_incremental"), merge_phases=merge_phases(output), **changes)

    before = b.versions(["fk_fallback"])
    fb_s, fb_mem = b.timed(lambda: b.dbt(project, "fk_fallback"))
    output = b.commits_since("fk_fallback", before)
    b.record(**common, method="full-recompute path", seconds=fb_s, peak_mb=fb_mem, rows_changed=changed,
             rows_written=rows_written_in(output), merge_phases=merge_phases(output),
             wrong_rows=b.same_rows(b.t("fk_fallback"), b.t("fk_full"), cols), profile=b.profile("fk_fallback"), **changes)

    naive_s, naive_mem = b.timed(lambda: b.dbt(project, "fk_naive"))
    b.record(**common, method="naive dbt incremental", seconds=naive_s, peak_mb=naive_mem, rows_changed=changed,
             wrong_rows=b.same_rows(b.t("fk_naive"), b.t("fk_full"), cols), **changes)

    before = b.versions(["floor_target"])
    def floor_merge() -> None:
        b.sql(f"""merge into {b.t('floor_target')} as t using {b.t('floor_changes')} as s on t.order_id = s.order_id
            when matched and s.gone then delete
            when matched then update set {', '.join(f'{c} = s.{c}' for c in cols if c != 'order_id')}
            when not matched and not s.gone then insert ({', '.join(cols)}) values ({', '.join('s.' + c for c in cols)})""")

    floor_s, floor_mem = b.timed(floor_merge)
    output = b.commits_since("floor_target", before)
    b.record(**common, method="MERGE floor", seconds=floor_s, peak_mb=floor_mem, rows_changed=changed,
             rows_written=rows_written_in(output), merge_phases=merge_phases(output),
             wrong_rows=b.same_rows(b.t("floor_target"), b.t("fk_full"), cols), **changes)
    check(b, common, ["incremental", "full-recompute path", "MERGE floor"])


def check(b: Bench, common: dict, methods: list[str]) -> None:
    """Stop at the first wrong result: a benchmark of wrong answers means nothing."""
    for row in b.rows:
        if all(row.get(k) == v for k, v in common.items()) and row["method"] in methods and row.get("wrong_rows"):
            raise SystemExit(f"benchmark: {row['operator']} {row['method']} at size {row['size']}, fraction "
                             f"{row['fraction']}: {row['wrong_rows']} rows differ from the full rebuild")


DEDUP_STATE = ["dedup_incremental", "dedup_incremental__ij_state"]


def sss_dedup(b: Bench, checkpoint: Path) -> None:
    """Spark Structured Streaming: dropDuplicatesWithinWatermark over the new events, once."""
    stream = (b.spark.readStream.format("delta").table(b.t("events"))
              .withWatermark("ts", "10 minutes").dropDuplicatesWithinWatermark(["msg_id"]))
    query = (stream.writeStream.format("delta").outputMode("append")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
             .toTable(b.t("sss_dedup")))
    query.awaitTermination()


def dedup_round(b: Bench, project, size: int, fraction: float, changes: dict, checkpoint: Path) -> None:
    common = {"operator": "deduplicate", "size": size, "fraction": fraction}
    before = b.versions(DEDUP_STATE)
    inc_s, inc_mem = b.timed(lambda: b.dbt(project, "dedup_incremental"))
    written = b.written_since(DEDUP_STATE, before)
    full_s, full_mem = b.timed(lambda: b.dbt(project, "dedup_full", "--full-refresh"))
    sss_s, sss_mem = b.timed(lambda: sss_dedup(b, checkpoint))
    offsets = ["event_offset"]
    appended = written.get("dedup_incremental", 0)
    b.record(**common, method="incremental", seconds=inc_s, peak_mb=inc_mem, rows_changed=appended,
             rows_written=appended, state_rows_written=written.get("dedup_incremental__ij_state", 0),
             wrong_rows=b.same_rows(b.t("dedup_incremental"), b.t("dedup_full"), offsets),
             profile=b.profile("dedup_incremental"), **changes)
    b.record(**common, method="full rebuild", seconds=full_s, peak_mb=full_mem, rows_changed=appended, wrong_rows=0, **changes)
    b.record(**common, method="Structured Streaming", seconds=sss_s, peak_mb=sss_mem, rows_changed=appended,
             differs_from_kip655=b.same_rows(b.t("sss_dedup"), b.t("dedup_full"), offsets), **changes)
    check(b, common, ["incremental"])


STJ_STATE = ["stj_incremental", "stj_incremental__ij_history", "stj_incremental__ij_buffer"]


def stj_round(b: Bench, project, size: int, fraction: float, changes: dict) -> None:
    common = {"operator": "stream_table_join", "size": size, "fraction": fraction}
    before = b.versions(STJ_STATE)
    inc_s, inc_mem = b.timed(lambda: b.dbt(project, "stj_incremental"))
    written = b.written_since(STJ_STATE, before)
    full_s, full_mem = b.timed(lambda: b.dbt(project, "stj_full"))
    # Records still waiting in the grace buffer are not in the output yet.
    emitted = f"purchase_id not in (select purchase_id from {b.t('stj_incremental__ij_buffer')})"
    appended = written.get("stj_incremental", 0)
    b.record(**common, method="incremental", seconds=inc_s, peak_mb=inc_mem, rows_changed=appended,
             rows_written=appended, state_rows_written=written.get("stj_incremental__ij_history", 0) + written.get("stj_incremental__ij_buffer", 0),
             wrong_rows=b.same_rows(b.t("stj_incremental"), b.t("stj_full"), COLUMNS["stj"], emitted),
             profile=b.profile("stj_incremental"), **changes)
    b.record(**common, method="full as-of recompute", seconds=full_s, peak_mb=full_mem, rows_changed=appended, wrong_rows=0, **changes)
    check(b, common, ["incremental"])


def run_size(b: Bench, project, size: int, fractions: list[float], operators: list[str], home: Path, save) -> None:
    print(f"size {label(size)}: generating inputs", flush=True)
    start = time.perf_counter()
    create_inputs(b, size)
    b.record(operator="inputs", size=size, fraction=0.0, method="generate", seconds=time.perf_counter() - start, peak_mb=0)
    models = {"fk": ["fk_full", "fk_incremental", "fk_fallback", "fk_naive"],
              "dedup": ["dedup_incremental", "dedup_full"], "stj": ["stj_incremental", "stj_full"]}
    for op in operators:
        for model in models[op]:
            seconds, mem = b.timed(lambda: b.dbt(project, model, "--full-refresh"))
            b.record(operator=op, size=size, fraction=0.0, method=f"initial build {model}", seconds=seconds, peak_mb=mem)
    if "fk" in operators:
        b.sql(f"create or replace table {b.t('floor_target')} using delta as select {', '.join(COLUMNS['fk'])} from {b.t('fk_full')}")
    checkpoint = home / f"sss_checkpoint_{b.schema}"
    shutil.rmtree(checkpoint, ignore_errors=True)
    if "dedup" in operators:
        b.sql(f"drop table if exists {b.t('sss_dedup')}")
        seconds, mem = b.timed(lambda: sss_dedup(b, checkpoint))
        b.record(operator="dedup", size=size, fraction=0.0, method="initial build Structured Streaming", seconds=seconds, peak_mb=mem)
    offsets = {"orders": size, "customers": size // 10, "stream": size}

    def play(rnd: int, fraction: float) -> None:
        changes = change_round(b, rnd, fraction, size, offsets)
        if "fk" in operators:
            fk_round(b, project, size, fraction, changes)
        if "dedup" in operators:
            dedup_round(b, project, size, fraction, changes, checkpoint)
        if "stj" in operators:
            stj_round(b, project, size, fraction, changes)

    play_rounds(play, fractions, b.rows, save, label(size))


def play_rounds(play, fractions: list[float], rows: list, save, size_label: str) -> None:
    """Round 0, untimed: every method once on the smallest change before any timing is kept, as a
    JVM benchmark warms up. A process's first MERGE took 11.7 s where the next ones took 3.8-5.1 s
    (1M rows, 2026-11-28), and the initial builds run none: without it the first timed round
    charged that to the first method that merges (the operator; the floor runs last). Its results
    are checked like any round's (`play` stops at a wrong one), then dropped. Then rounds 1..n, one
    per fraction, with a report after each: an interrupted run still leaves its figures."""
    print(f"size {size_label}, round 0 (warm-up, not kept): {min(fractions):.1%} changed", flush=True)
    kept = len(rows)
    play(0, min(fractions))
    del rows[kept:]
    for rnd, fraction in enumerate(fractions, start=1):
        print(f"size {size_label}, round {rnd}: {fraction:.1%} changed", flush=True)
        play(rnd, fraction)
        save()


OPERATORS = {"fk": "foreign_key_join", "dedup": "deduplicate", "stj": "stream_table_join"}


def runs_of(results: dict) -> list[dict]:
    """The runs a results.json was made from (one, before runs were recorded)."""
    if results.get("runs"):
        return results["runs"]
    measured = sorted({r["operator"] for r in results["rows"] if r["fraction"] > 0})
    return [{**{k: v for k, v in results.items() if k not in ("rows", "runs")}, "operators": measured}]


def merge(previous: dict | None, current: dict) -> dict:
    """The current run's rows replace the previous rows of the same operator, size and fraction;
    other rows stay, with the runs that measured them (a 10M run need not repeat the 1M one, a
    round at 10M and 50% the 10M rounds before it, a run of one operator the others). A previous
    run keeps the sizes and the operators it still has measured rounds of (setup rows, fraction 0,
    do not count) and is dropped with none. What describes a run (date, commit, ...) lives in
    `runs` only."""
    replaced = {(r["operator"], r["size"], r["fraction"]) for r in current["rows"]}
    rows = [r for r in (previous or {}).get("rows", []) if (r["operator"], r["size"], r["fraction"]) not in replaced]
    left = {(r["operator"], r["size"], r["fraction"]) for r in rows}
    runs = []
    for run in runs_of(previous) if previous else []:
        kept = [(o, s) for (o, s, f) in left if o in run["operators"] and s in run["sizes"] and f in run["fractions"]]
        if kept:
            operators, sizes = (set(x) for x in zip(*kept))
            runs.append({**run, "sizes": [s for s in run["sizes"] if s in sizes],
                         "operators": [o for o in run["operators"] if o in operators]})
    runs += runs_of(current)
    return {"sizes": sorted({s for r in runs for s in r["sizes"]}),
            "fractions": sorted({f for r in runs for f in r["fractions"]}), "runs": runs, "rows": rows + current["rows"]}


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem_gb = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                      if line.startswith("MemTotal"))) / 1024 / 1024
    return f"{os.cpu_count()} cores ({cpu}), {mem_gb:.0f} GB RAM, {platform.system()} {platform.release()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000000,10000000", help="left rows per size, comma-separated")
    parser.add_argument("--fractions", default="0.001,0.01,0.1,0.5", help="change fractions, one round each")
    parser.add_argument("--operators", default="fk,dedup,stj", help="any of fk, dedup, stj")
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--out", default=str(HERE / "report"), help="where the report goes")
    parser.add_argument("--report-only", action="store_true", help="re-render the report from OUT/results.json")
    parser.add_argument("--merge", metavar="RESULTS_JSON", help="with --report-only: take this run's sizes from another results.json")
    args = parser.parse_args(argv)
    out = Path(args.out)
    from report import update_readme, write_report  # beside this file

    def publish(results: dict) -> None:
        """results.json and the report; README's figures too when the report is the repository's."""
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
        write_report(results, out)
        if out.resolve() == (HERE / "report").resolve():
            update_readme(HERE.parent / "README.md", results)

    previous = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else None
    if args.report_only:
        publish(merge(previous, json.loads(Path(args.merge).read_text())) if args.merge else previous)
        return 0

    home = Path(os.environ.setdefault("INCREMENTAL_JOINS_HOME", str(HERE.parent / ".spark" / "benchmark")))
    os.environ.setdefault("INCREMENTAL_JOINS_DRIVER_MEMORY", "12g")
    from incremental_joins.project import DbtProject
    from incremental_joins.runtime import RuntimePaths, delta_session

    spark = delta_session(RuntimePaths(home))
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    statements = Statements()
    project = DbtProject(PROJECT_DIR, callbacks=[statements])
    project.invoke("deps", "--quiet")
    started = datetime.now(timezone.utc)
    rows: list = []
    sizes = [int(s) for s in args.sizes.split(",")]
    fractions = [float(f) for f in args.fractions.split(",")]
    operators = args.operators.split(",")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip()

    def save() -> None:
        run = {
            "started": started.isoformat(timespec="seconds"),
            "minutes": round((datetime.now(timezone.utc) - started).total_seconds() / 60, 1),
            "machine": machine(), "seed": args.seed, "sizes": sizes, "fractions": fractions,
            "operators": [OPERATORS[o] for o in operators], "spark": spark.version,
            "driver_memory": os.environ["INCREMENTAL_JOINS_DRIVER_MEMORY"], "commit": commit,
        }
        publish(merge(previous, {**run, "runs": [run], "rows": rows}))

    for size in sizes:
        schema = f"bench_{label(size).lower()}"
        os.environ["IJ_BENCH_SCHEMA"] = schema
        spark.sql(f"drop schema if exists {schema} cascade")
        spark.sql(f"create schema {schema}")
        bench = Bench(spark, schema, args.seed, PeakMemory(pid), rows, statements)
        run_size(bench, project, size, fractions, operators, home, save)
    print(f"benchmark: report in {out}/report.md", flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
