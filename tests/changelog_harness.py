"""A scratch dbt project with changelog_table models over a CDC table the test appends to.

`cdc` (id, name, op, lsn, kafka_offset): flat change events, as a JDBC or Maxwell connector
lands them; `cdc_dbz` (before, after, op, source, kafka_offset): Debezium's envelope, with the
row in the `after` struct (`before` for a delete) and the log position in `source.lsn`. The key
`id` is a string unless a test asks for another type (ChangelogProject.create's key_type).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from fk_join_harness import sources_yml, sql_literal

SOURCES = sources_yml("cdc", "cdc_dbz")

MODELS = {
    "customers": """
{{ config(materialized='changelog_table', key='id', sequence='lsn', arrival_order='kafka_offset') }}
select * from {{ incremental_joins.stream(source('t', 'cdc')) }}
""",
    "customers_dbz": """
{{ config(materialized='changelog_table', key='id', sequence='lsn', payload='after', arrival_order='kafka_offset') }}
select *, source.lsn as lsn from {{ incremental_joins.stream(source('t', 'cdc_dbz')) }}
""",
}

Event = tuple[Any, Optional[str], str, int, int]   # (id, name, op, lsn, kafka_offset)


@dataclass
class ChangelogProject:
    project: Any
    spark: Any
    schema: str

    @classmethod
    def create(cls, scratch_project, spark, models: dict[str, str] | None = None,
               key_type: str = "string") -> "ChangelogProject":
        files = {"models/sources.yml": SOURCES}
        files.update({f"models/{name}.sql": body for name, body in (models or MODELS).items()})
        project = scratch_project(files)
        schema = project.schema
        spark.sql(f"create or replace table {schema}.cdc (id {key_type}, name string, op string, lsn bigint, kafka_offset bigint) using delta")
        spark.sql(f"create or replace table {schema}.cdc_dbz (before struct<id: {key_type}, name: string>, "
                  f"after struct<id: {key_type}, name: string>, op string, source struct<lsn: bigint>, kafka_offset bigint) using delta")
        return cls(project, spark, schema)

    def append(self, *events: Event) -> None:
        """One Delta commit to each CDC table, with the same events in both shapes."""
        flat = ", ".join("(" + ", ".join(sql_literal(v) for v in e) + ")" for e in events)
        self.spark.sql(f"insert into {self.schema}.cdc values {flat}")
        dbz = []
        for id_, name, op, lsn, offset in events:
            row = f"named_struct('id', {sql_literal(id_)}, 'name', {sql_literal(name)})"
            before, after = (row, "null") if op == "d" else ("null", row)
            dbz.append(f"({before}, {after}, {sql_literal(op)}, named_struct('lsn', cast({sql_literal(lsn)} as bigint)), {offset})")
        self.spark.sql(f"insert into {self.schema}.cdc_dbz values {', '.join(dbz)}")

    def run(self, *args: str, vars: dict | None = None, check: bool = True):
        return self.project.invoke("run", "--quiet", *args, vars=vars, check=check)

    def output(self, model: str = "customers") -> dict:
        rows = self.spark.table(f"{self.schema}.{model}").collect()
        out = {r.id: (r.name, r.lsn) for r in rows}
        assert len(out) == len(rows), f"{model} has duplicate keys"
        return out

    def version(self, model: str = "customers") -> int:
        return self.spark.sql(f"describe history {self.schema}.{model} limit 1").first()["version"]

    def last_run(self, model: str = "customers") -> dict:
        return self.spark.sql(
            f"select * from {self.schema}.incremental_joins_run_log where model = '{model}' "
            "order by finished_at desc limit 1").first().asDict()
