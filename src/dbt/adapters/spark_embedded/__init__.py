"""`spark_embedded`: dbt-spark's `session` method with Delta Lake and Python models, in-process."""

from dbt.adapters.base import AdapterPlugin
from dbt.adapters.spark_embedded.impl import EmbeddedSparkAdapter, EmbeddedSparkCredentials
from dbt.include import spark_embedded

Plugin = AdapterPlugin(
    adapter=EmbeddedSparkAdapter,  # type: ignore[arg-type]
    credentials=EmbeddedSparkCredentials,
    include_path=spark_embedded.PACKAGE_PATH,
    dependencies=["spark"],
)
