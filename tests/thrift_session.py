"""The part of SparkSession the tests use (`sql`, `table`, `catalog.tableExists`, `conf.set`),
answered by the cluster's Thrift server over PyHive — the client the stock dbt-spark adapter uses
for `method: thrift`. Queries are lazy like DataFrames and return pyspark `Row`s, so a test reads
the same in both modes."""

from __future__ import annotations

from pyspark.sql import Row


class ThriftFrame:
    def __init__(self, session: "ThriftSession", query: str) -> None:
        self._session, self._query = session, query

    def where(self, condition: str) -> "ThriftFrame":
        return ThriftFrame(self._session, f"select * from ({self._query}) as frame where {condition}")

    def collect(self) -> list[Row]:
        return self._session.execute(self._query)

    def first(self) -> Row | None:
        rows = self.collect()
        return rows[0] if rows else None

    @property
    def columns(self) -> list[str]:
        return [r[0] for r in self._session.execute(f"describe query {self._query}")]


class _Catalog:
    def __init__(self, session: "ThriftSession") -> None:
        self._session = session

    def tableExists(self, name: str) -> bool:  # noqa: N802 (SparkSession's spelling)
        schema, _, table = name.rpartition(".")
        rows = self._session.execute(f"show tables in {schema} like '{table}'")
        return any(r.tableName == table and not r.isTemporary for r in rows)


class _Conf:
    def __init__(self, session: "ThriftSession") -> None:
        self._session = session

    def set(self, key: str, value: str) -> None:
        self._session.execute(f"set {key}={value}")


class ThriftSession:
    def __init__(self, host: str, port: int) -> None:
        from pyhive import hive

        self._connection = hive.connect(host=host, port=port, username="tests")
        self.catalog, self.conf = _Catalog(self), _Conf(self)

    def execute(self, query: str) -> list[Row]:
        cursor = self._connection.cursor()
        try:
            cursor.execute(query)
            if not cursor.description:
                return []
            make = Row(*[d[0] for d in cursor.description])
            return [make(*values) for values in cursor.fetchall()]
        finally:
            cursor.close()

    def sql(self, query: str) -> ThriftFrame:
        # Statements run at once, as spark.sql does; queries when collected.
        frame = ThriftFrame(self, query)
        if not query.lstrip().lower().startswith(("select", "with", "describe", "show", "table ")):
            frame.collect()
        return frame

    def table(self, name: str) -> ThriftFrame:
        return ThriftFrame(self, f"select * from {name}")

    def close(self) -> None:
        self._connection.close()
