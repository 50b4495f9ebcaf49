"""The `spark_embedded` adapter: the stock `spark` adapter, session method, plus two things.

1. Opening a connection starts the Delta-ready embedded session (`incremental_joins.runtime`), so a
   plain `dbt run` from the command line gets Delta Lake, the Change Data Feed and a pinned
   warehouse without any set-up code.
2. Python models run in that same session (`submission_method: session`, the default here);
   dbt-spark only submits Python models to Databricks clusters (dbt-spark issues #415, #1062).

Everything else — SQL, relations, macros — is dbt-spark's, and macros dispatch to `spark__`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, Optional, Type

from dbt.adapters.base import PythonJobHelper
from dbt.adapters.contracts.connection import Connection
from dbt.adapters.spark import SparkAdapter, SparkConnectionManager, SparkCredentials
from dbt.adapters.spark.connections import SparkConnectionMethod
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_embedded import __version__
from dbt.adapters.spark_embedded.python_submissions import SessionPythonJobHelper

ADAPTER_TYPE = "spark_embedded"


@dataclass
class EmbeddedSparkCredentials(SparkCredentials):
    method: SparkConnectionMethod = SparkConnectionMethod.SESSION
    host: Optional[str] = "localhost"

    @property
    def type(self) -> str:
        return ADAPTER_TYPE

    def __post_init__(self) -> None:
        if self.method != SparkConnectionMethod.SESSION:
            raise DbtRuntimeError(
                f"profile: `type: {ADAPTER_TYPE}` runs Spark inside dbt and supports only "
                f"`method: session`, got `method: {self.method}`. "
                "For a cluster (thrift, http, odbc) use `type: spark` or `type: databricks`."
            )
        super().__post_init__()


class EmbeddedSparkConnectionManager(SparkConnectionManager):
    TYPE = ADAPTER_TYPE

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        from incremental_joins.runtime import RuntimeSetupError, delta_session

        try:
            delta_session()
        except RuntimeSetupError as exc:
            raise DbtRuntimeError(f"The embedded Spark runtime could not start: {exc}") from exc
        return super().open(connection)


class EmbeddedSparkAdapter(SparkAdapter):
    ConnectionManager = EmbeddedSparkConnectionManager  # type: ignore[assignment]

    @property
    def default_python_submission_method(self) -> str:
        return "session"

    @property
    def python_submission_helpers(self) -> Dict[str, Type[PythonJobHelper]]:
        return {**super().python_submission_helpers, "session": SessionPythonJobHelper}

    @classmethod
    def get_adapter_run_info(cls, config: Any) -> Any:
        # dbt derives the adapter's module from the class name ("EmbeddedSparkAdapter" ->
        # dbt.adapters.embeddedspark); report the real one.
        info = SparkAdapter.get_adapter_run_info(config)
        return replace(info, adapter_name=ADAPTER_TYPE, adapter_version=__version__.version)

    def generate_python_submission_response(self, submission_result: Any) -> Any:
        return self.connections.get_response(None)
