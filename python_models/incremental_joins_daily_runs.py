"""Runs per model and day, from the run log: how much each incremental_joins model read and wrote.

Opt in with `vars: {incremental_joins_python_models: true}` on an adapter that runs Python models
(`spark_embedded` in dbt Core, or `databricks`); needs dbt >= 1.10 (`dbt.config.meta_get`).
"""

from pyspark.sql import functions as F


def model(dbt, spark):
    dbt.config(materialized="table")
    runs = dbt.ref("incremental_joins_model_status")  # latest run per model, for dependency order
    log = spark.table(f"{dbt.config.meta_get('run_log_schema')}.incremental_joins_run_log")
    daily = (
        log.groupBy("relation", F.to_date("finished_at").alias("run_date"))
        .agg(
            F.count("*").alias("runs"),
            F.sum(F.when(F.col("mode") != "incremental", 1).otherwise(0)).alias("full_recomputes"),
            F.sum("rows_read").alias("rows_read"),
            F.sum(F.col("rows_inserted") + F.col("rows_updated") + F.col("rows_deleted")).alias(
                "rows_written"
            ),
            F.round(F.sum("duration_s"), 3).alias("duration_s"),
        )
    )
    return daily.join(runs.select("relation", "model"), "relation", "left")
