"""stream_table_join (KIP-923, SPEC §4): worked examples written out by hand; randomized
interleavings of table changes and stream records over random run boundaries against
tests/reference.py; the buffer across failed runs; crash-and-rerun; full refresh; errors."""

from __future__ import annotations

import random

import pytest

import reference
from fk_join_harness import error_of, sources_yml, sql_literal

# The table `prices` (product, price, valid_from, deleted): one row per product; a version is a
# row's state after a commit, `deleted` marks a tombstone at its valid_from. The stream `orders`
# (product, ts, qty, kafka_offset): qty null is a null-value record; kafka_offset is the arrival.
CONFIG = ("key='product', event_time='ts', table_time='valid_from', table_deleted='deleted', "
          "arrival_order='kafka_offset'")
BODY = """
select s.kafka_offset, s.product, s.ts, s.qty, t.price, t.valid_from
from {{ incremental_joins.as_of_join(source('t', 'orders'), source('t', 'prices')) }}
"""


def model(join_type: str = "left", retention: str | None = "100 seconds", grace: str | None = "10 seconds",
          extra: str = "") -> str:
    options = [CONFIG, f"join_type='{join_type}'"]
    options += [f"history_retention='{retention}'"] if retention else []
    options += [f"grace_period='{grace}'"] if grace else []
    options += [extra] if extra else []
    return "{{ config(materialized='stream_table_join', " + ", ".join(options) + ") }}" + BODY


def seconds(value) -> str:
    return "null" if value is None else f"timestamp_seconds({value})"


class Join:
    """Both inputs, a scratch project with the given models, and the same history fed to a
    reference per model (run-level interleaving)."""

    def __init__(self, scratch_project, spark, models: dict[str, str], references: dict | None = None) -> None:
        files = {"models/sources.yml": sources_yml("orders", "prices")}
        files.update({f"models/{name}.sql": body for name, body in models.items()})
        self.project = scratch_project(files)
        self.spark, self.schema = spark, self.project.schema
        self.references = references or {}
        self.offsets = 0
        self.pending_table: list = []
        self.pending_stream: list = []
        props = "tblproperties ('delta.enableChangeDataFeed' = 'true')"
        spark.sql(f"create or replace table {self.schema}.prices (product string, price string, valid_from timestamp, deleted boolean) using delta {props}")
        spark.sql(f"create or replace table {self.schema}.orders (product string, ts timestamp, qty string, kafka_offset bigint) using delta {props}")

    def table(self, *changes: tuple) -> None:
        """One commit: (product, seconds, price) — price None: a tombstone at that time."""
        rows = ", ".join(f"({sql_literal(k)}, {sql_literal(v)}, {seconds(ts)}, {'true' if v is None else 'false'})" for k, ts, v in changes)
        self.spark.sql(f"merge into {self.schema}.prices as t using (select * from values {rows} as s(product, price, valid_from, deleted)) as s "
                       "on t.product = s.product when matched then update set * when not matched then insert *")
        # Within one commit, changes arrive in timestamp order (SPEC: the run's changes first).
        self.pending_table += sorted(changes, key=lambda c: c[1])

    def stream(self, *records: tuple) -> list[int]:
        """One commit: (product, seconds, qty); returns the offsets given."""
        rows, offsets = [], []
        for k, ts, qty in records:
            rows.append(f"({sql_literal(k)}, {seconds(ts)}, {sql_literal(qty)}, {self.offsets})")
            self.pending_stream.append((k, ts, qty, self.offsets))
            offsets.append(self.offsets)
            self.offsets += 1
        self.spark.sql(f"insert into {self.schema}.orders values {', '.join(rows)}")
        return offsets

    def run(self, *args: str, vars: dict | None = None, check: bool = True):
        result = self.project.invoke("run", "--quiet", *args, vars=vars, check=check)
        if check and "--full-refresh" not in args:
            for ref in self.references.values():
                ref.run(self.pending_table, self.pending_stream)
            self.pending_table, self.pending_stream = [], []
        return result

    def output(self, model: str) -> dict[int, str | None]:
        """{offset: price} of the output; each record at most once."""
        rows = self.spark.sql(f"select kafka_offset, price from {self.schema}.{model}").collect()
        offsets = [r[0] for r in rows]
        assert len(offsets) == len(set(offsets)), f"{model}: a record was emitted twice: {sorted(offsets)}"
        return {r[0]: r[1] for r in rows}

    def expected(self, model: str) -> dict[int, str | None]:
        return dict(self.references[model].emitted)

    def state(self, model: str, name: str) -> list:
        return self.spark.sql(f"select * from {self.schema}.{model}__ij_{name}").collect()


def test_smoke(scratch_project, spark):
    j = Join(scratch_project, spark, {"stj": model()}, {"stj": reference.StreamTableJoin("left", 100, 10)})
    j.table(("a", 0, "a0"), ("b", 0, "b0"))
    j.stream(("a", 5, "1"), ("b", 20, "1"))
    j.run()
    print(j.output("stj"), j.expected("stj"))
    j.table(("a", 10, "a10"))
    j.stream(("a", 15, "2"), ("a", 40, "1"))
    j.run()
    print(j.output("stj"), j.expected("stj"))
    assert j.output("stj") == j.expected("stj")
