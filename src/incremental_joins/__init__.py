"""incremental_joins: the Python side of the dbt package (embedded runtime, demo, benchmark)."""

__version__ = "0.1.0"
