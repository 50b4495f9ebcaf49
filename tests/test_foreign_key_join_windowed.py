"""Seed 001's windowed case: hourly counts per key joined to the same hour one week earlier — a
self-join of a windowed table with a shifted foreign key. The hourly table is an upstream dbt
`table` model (re-created every run), so its changes are read by diffing Delta versions."""

from __future__ import annotations

from fk_join_harness import error_of

FILES = {
    "models/sources.yml": """
        version: 2
        sources:
          - name: t
            schema: "{{ target.schema }}"
            tables: [{name: events}]
    """,
    "models/hourly_counts.sql": """
        {{ config(materialized='table') }}
        select key, date_trunc('hour', ts) as hour, count(*) as events
        from {{ source('t', 'events') }}
        group by all
    """,
    "models/week_over_week.sql": """
        {{ config(materialized='foreign_key_join', join_type='left',
                  left_key=['key', 'hour'], right_key=['key', 'hour'],
                  foreign_key=['key', "hour - interval 7 days"], full_recompute_above=10) }}
        select {{ incremental_joins.output_key() }}, l.events, r.events as events_week_before
        from {{ incremental_joins.join(ref('hourly_counts'), ref('hourly_counts')) }}
    """,
}


def add_events(spark, schema, *rows):
    values = ", ".join(f"('{key}', timestamp'{ts}')" for key, ts in rows)
    spark.sql(f"insert into {schema}.events values {values}")


def week_over_week(spark, schema):
    return {(r.key, r.hour.strftime("%m-%d %H")): (r.events, r.events_week_before)
            for r in spark.table(f"{schema}.week_over_week").collect()}


def test_hourly_counts_joined_to_the_same_hour_last_week(scratch_project, spark):
    project = scratch_project(FILES)
    schema = project.schema
    spark.sql(f"create or replace table {schema}.events (key string, ts timestamp) using delta")
    add_events(spark, schema,
               ("a", "2026-11-10 09:05:00"), ("a", "2026-11-10 09:40:00"),   # a, Tue 09h: 2
               ("a", "2026-11-17 09:15:00"),                                 # a, next Tue 09h: 1
               ("b", "2026-11-17 10:00:00"))                                 # b: no week before
    project.invoke("run", "--quiet")
    assert week_over_week(spark, schema) == {
        ("a", "11-10 09"): (2, None),
        ("a", "11-17 09"): (1, 2),
        ("b", "11-17 10"): (1, None),
    }

    # Late events for last week's hour change that hour's count: the row one week later, which
    # references it, is updated; a new hour for b one week on picks up b's count.
    add_events(spark, schema, ("a", "2026-11-10 09:59:59"), ("b", "2026-11-24 10:30:00"))
    project.invoke("run", "--quiet")
    assert week_over_week(spark, schema) == {
        ("a", "11-10 09"): (3, None),
        ("a", "11-17 09"): (1, 3),
        ("b", "11-17 10"): (1, None),
        ("b", "11-24 10"): (1, 1),
    }
    run = spark.sql(f"select mode, versions_read from {schema}.incremental_joins_run_log "
                    "where model = 'week_over_week' order by finished_at desc limit 1").first()
    assert run.mode == "incremental"

    # The upstream model edited to count per event time: a.11-10 09h is now three rows with one
    # (key, hour). The run fails naming both key columns and their values; a row of the output
    # keeps its value.
    counts_model = project.path / "models" / "hourly_counts.sql"
    counts_model.write_text(counts_model.read_text().replace("group by all", "group by key, ts"))
    message = error_of(project.invoke("run", "--quiet", check=False))
    assert ("input" in message and "duplicate values of config 'left_key' (key, hour): "
            "key=a, hour=2026-11-10 09:00:00 (3 rows)" in message), message
    assert week_over_week(spark, schema)[("a", "11-17 09")] == (1, 3)
