"""A Python model in session mode: orders per customer, with customers that have none."""

from pyspark.sql import functions as F


def model(dbt, spark):
    dbt.config(materialized="table")
    orders = dbt.ref("orders")
    customers = dbt.ref("customers")
    counts = orders.groupBy("customer_id").agg(F.count("*").alias("orders"))
    return customers.join(counts, "customer_id", "left").fillna(0, subset=["orders"])
