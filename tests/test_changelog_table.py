"""changelog_table (SPEC §1): worked examples written out by hand, randomized changelogs against
tests/reference.py over random run boundaries, crash-and-rerun, full refresh, and errors."""

from __future__ import annotations

import datetime
import json
import random
import time
import zoneinfo
from contextlib import ExitStack

import pytest

import reference
from changelog_harness import MODELS, ChangelogProject
from fk_join_harness import CRASH_STEPS, error_of, failing_at, files_hidden, key_type_of, merge_metrics, random_seeds, sources_yml, sql_literal


@pytest.fixture
def cl(scratch_project, spark):
    return ChangelogProject.create(scratch_project, spark)


def test_worked_examples(cl):
    both = ("customers", "customers_dbz")   # flat columns and the Debezium envelope

    # insert, update, delete — one run.
    cl.append(("1", "ann", "c", 1, 0), ("1", "anne", "u", 2, 1), ("2", "bob", "c", 3, 2), ("3", "cy", "r", 1, 3))
    cl.run()
    for m in both:
        assert cl.output(m) == {"1": ("anne", 2), "2": ("bob", 3), "3": ("cy", 1)}, m
    cl.append(("2", "bob", "d", 4, 4))
    cl.run()
    for m in both:
        assert cl.output(m) == {"1": ("anne", 2), "3": ("cy", 1)}, m
    # The run log counts the applied event as an affected key, not as late (counted before the
    # run's writes: after them the stored sequence equals the event's).
    assert {k: cl.last_run()[k] for k in ("mode", "affected_keys", "late_records", "rows_deleted")} == \
        {"mode": "incremental", "affected_keys": 1, "late_records": 0, "rows_deleted": 1}

    # An update older than the key's current sequence changes nothing, and writes nothing.
    version = {m: cl.version(m) for m in both}
    cl.append(("1", "stale", "u", 1, 5))
    cl.run()
    for m in both:
        assert cl.output(m) == {"1": ("anne", 2), "3": ("cy", 1)}, m
        assert cl.version(m) == version[m], f"{m}: an ignored event must not write"
    assert cl.last_run()["late_records"] == 1

    # A late insert after a delete is ignored: the tombstone (2, lsn 4) still holds.
    cl.append(("2", "zombie", "c", 3, 6))
    cl.run()
    for m in both:
        assert "2" not in cl.output(m), m
        assert cl.version(m) == version[m], m

    # A re-delivered duplicate (same event, later offset) writes nothing.
    cl.append(("1", "anne", "u", 2, 7))
    cl.run()
    for m in both:
        assert cl.version(m) == version[m], m

    # Same key and sequence, different values: the later arrival wins — within one run by
    # arrival_order (kafka_offset), across runs by Delta commit.
    cl.append(("3", "cy-late", "u", 5, 9), ("3", "cy-early", "u", 5, 8))
    cl.run()
    for m in both:
        assert cl.output(m)["3"] == ("cy-late", 5), m
    cl.append(("3", "cy-next-run", "u", 5, 10))
    cl.run()
    for m in both:
        assert cl.output(m)["3"] == ("cy-next-run", 5), m

    # The output feeds other operators: Change Data Feed on, one change row per changed key.
    changes = cl.spark.sql(f"select * from table_changes('{cl.schema}.customers', {cl.version()})").collect()
    assert [(r.id, r._change_type) for r in changes if r._change_type != "update_preimage"] == [("3", "update_postimage")]


class Changelog:
    """Random CDC events: keys re-used, sequences shuffled within a bound, events re-delivered."""

    def __init__(self, rng: random.Random, ids: list | None = None) -> None:
        # String keys by default, among them keys that differ only in case, a quote and `${` (the
        # greatest: the run's key range bounds the output MERGE by it, as a literal).
        self.rng, self.ids = rng, ids or ["k0", "K0", "k1", "k2", "it's", "k3", "z${a}"]
        self.events: list = []
        self.next_lsn = 1

    def batch(self) -> list:
        rng, out = self.rng, []
        for _ in range(rng.randint(1, 6)):
            if self.events and rng.random() < 0.2:          # re-delivery of an earlier event
                id_, name, op, lsn, _ = rng.choice(self.events)
            else:
                id_ = rng.choice(self.ids)
                op = rng.choice("ccuuud")
                name = None if op == "d" else rng.choice(["a", "b", "c", None])
                lsn = max(1, self.next_lsn - rng.randint(0, 4))  # out of order by up to 4
                self.next_lsn += 1
            event = (id_, name, op, lsn, len(self.events))
            self.events.append(event)
            out.append(event)
        return out


@pytest.mark.parametrize("seed", random_seeds(3))
def test_random_changelogs_over_random_runs_match_the_reference(scratch_project, spark, seed):
    """Keyed by bigint for an odd seed (CI's; negative, beyond int, the type's extremes), by string
    for an even one (`Changelog`'s keys): each run's affected keys bound the output's MERGE as
    literals of the key's type."""
    key_type = key_type_of(seed)
    cl = ChangelogProject.create(scratch_project, spark, key_type=key_type)
    rng = random.Random(seed)
    log = Changelog(rng, ids=[-2**63, -5, 0, 2**31, 2**40 + 1, 2**62, 2**63 - 1] if key_type == "bigint" else None)
    for run in range(5):
        before = len(log.events)
        for _ in range(rng.randint(1, 3)):                   # several input commits between runs
            cl.append(*log.batch())
        cl.run()
        expected = reference.changelog_table(log.events)
        affected, late = reference.changelog_run_counts(log.events[:before], log.events[before:])
        for m in MODELS:
            assert cl.output(m) == expected, f"seed {seed}, run {run}, {m}"
            logged = cl.last_run(m)
            assert (logged["affected_keys"], logged["late_records"]) == (affected, late), f"seed {seed}, run {run}, {m}: the run log"
    cl.run("--full-refresh")
    for m in MODELS:
        assert cl.output(m) == reference.changelog_table(log.events), f"full refresh, {m}"


def test_run_interrupted_at_each_step_then_rerun_equals_a_clean_run(scratch_project, spark):
    """One change log: after a first run, a run interrupted at each step in turn (each after new
    events, and each following a repaired run), re-run, equals the reference; so does the run
    after the last repaired one."""
    cl = ChangelogProject.create(scratch_project, spark, models={"customers": MODELS["customers"]})
    log = Changelog(random.Random(5))
    cl.append(*log.batch())
    cl.run()
    for step in CRASH_STEPS:
        before = len(log.events)
        cl.append(*log.batch())
        cl.append(*log.batch())
        with failing_at(step):
            failed = cl.run(check=False)
        assert "injected failure at " + step in error_of(failed), step
        cl.run()
        assert cl.output() == reference.changelog_table(log.events), f"after a crash {step} and a re-run"
        # The re-run logs the run's counts, also when the interrupted run had written them.
        logged = cl.last_run("customers")
        assert (logged["affected_keys"], logged["late_records"]) == reference.changelog_run_counts(log.events[:before], log.events[before:]), step
    cl.append(*log.batch())
    cl.run()
    assert cl.output() == reference.changelog_table(log.events), "the run after the repaired ones"


def test_errors_name_the_model_the_value_and_the_fix(scratch_project, spark):
    def model(**config) -> dict:
        settings = {"key": "'id'", "sequence": "'lsn'"}
        settings.update(config)
        args = ", ".join(f"{k}={v}" for k, v in settings.items() if v is not None)
        return {"customers": f"{{{{ config(materialized='changelog_table', {args}) }}}}\n"
                             "select * from {{ incremental_joins.stream(source('t', 'cdc')) }}\n"}

    cl = ChangelogProject.create(scratch_project, spark, models=model())
    path = cl.project.path / "models" / "customers.sql"
    cl.append(("1", "ann", "c", 1, 0))
    cl.run()
    version = cl.version()

    for config, expected in [
        ({"key": "'customer_id'"}, "customers: config 'key' (customer_id) is not a column of the model body (id, name, op, lsn, kafka_offset"),
        ({"sequence": None}, "customers: config 'sequence' (not set) is required"),
        ({"sequence": "'position'"}, "config 'sequence' (position) is not a column of the model body"),
        ({"operation": "'kind'"}, "config 'operation' (kind) is not a column of the model body"),
        ({"operation_mapping": "'c'"}, "customers: config 'operation_mapping' (c) must be a dict from operation value to upsert, delete or ignore"),
        # A listed column the event is read through would be dropped from the output: said.
        ({"value_columns": "['name', 'op']"}, "customers: config 'value_columns' (op) is read to apply each change event (the operation, the payload, "
                                              "the arrival order or the package's bookkeeping), not kept as a value; to keep it, select it under "
                                              "another name in the body (e.g. op as last_op) and list that name"),
    ]:
        path.write_text(model(**config)["customers"])
        assert expected in error_of(cl.run(check=False)), config

    path.write_text(model()["customers"].replace("select *", "select id, name, op, lsn"))
    assert ("customers: config '(body)' (_ij_commit_version) is dropped by the select list; the arrival order needs it; "
            "select *, or add _ij_commit_version, _ij_commit_timestamp to the select list") in error_of(cl.run(check=False))
    path.write_text(model()["customers"])
    odd = "x\\'y"   # an operation value with a backslash and a quote: both survive into the SQL
    cl.append(("2", "bob", odd, 2, 1), ("3", "cy", "truncate", 3, 2))
    message = error_of(cl.run(check=False))
    assert "customers: the input has operation values that config 'operation_mapping' does not map: truncate, " + odd in message
    assert "operation_mapping=" in message and "Nothing was written" in message
    assert cl.version() == version

    # Mapped, they pass: the odd value is an upsert, 'truncate' ignored (a Python dict's repr is
    # also a Jinja literal).
    mapping = repr({"c": "upsert", odd: "upsert", "d": "delete", "truncate": "ignore"})
    mapped = model(operation_mapping=mapping)["customers"]
    path.write_text(mapped)
    cl.run()
    assert cl.output() == {"1": ("ann", 1), "2": ("bob", 2)}

    # The body selects a column the output was built without: nothing is written into it.
    version = cl.version()
    path.write_text(mapped.replace("select *", "select *, upper(name) as shout"))
    cl.append(("5", "eve", "c", 5, 3))
    message = error_of(cl.run(check=False))
    assert "customers: the model's columns changed since its output" in message and "(added shout)" in message
    assert "dbt run --full-refresh --select customers" in message and "Nothing was written." in message
    assert cl.version() == version
    path.write_text(mapped)
    cl.run()
    assert cl.output() == {"1": ("ann", 1), "2": ("bob", 2), "5": ("eve", 5)}

    version = cl.version()
    cl.append(("4", "dee", "c", None, 4))
    message = error_of(cl.run(check=False))
    assert "customers: the input has 1 change events with a null sequence ('lsn'), e.g. key {\"id\":\"4\"}" in message
    assert cl.version() == version

    # Filtered out in the body, the event without a sequence passes; one without a key does not,
    # nor, with an arrival order configured, one without an offset. (Each edit makes the next run
    # recompute from every event so far, so the mapping stays: the odd operations are in them.)
    body = mapped + "where lsn is not null\n"
    path.write_text(body)
    cl.run()
    version = cl.version()   # the edited model's output records its definition
    spark.sql(f"insert into {cl.schema}.cdc values (null, 'fay', 'c', 6, 5)")
    message = error_of(cl.run(check=False))
    assert "customers: the input has 1 change events with a null key (id). Filter them out in the model body, or fix 'key'. Nothing was written." in message
    path.write_text(model(arrival_order="'kafka_offset'", operation_mapping=mapping)["customers"] + "where lsn is not null and id is not null\n")
    spark.sql(f"insert into {cl.schema}.cdc values ('7', 'gus', 'c', 7, null)")
    message = error_of(cl.run(check=False))
    assert "customers: the input has 1 change events with a null arrival order ('kafka_offset'), e.g. key {\"id\":\"7\"}. Fill it upstream or unset 'arrival_order'." in message
    assert cl.version() == version
    assert cl.output() == {"1": ("ann", 1), "2": ("bob", 2), "5": ("eve", 5)}


def test_expired_tombstones_are_purged_and_stop_blocking_older_events(scratch_project, spark):
    body = MODELS["customers"].replace("arrival_order='kafka_offset'", "arrival_order='kafka_offset', tombstone_retention='1 second'")
    cl = ChangelogProject.create(scratch_project, spark, models={"customers": body})

    def tombstones() -> set:
        return {r.id for r in spark.table(f"{cl.schema}.customers__ij_sequences").where("__ij_deleted").collect()}

    cl.append(("1", "ann", "c", 1, 0), ("1", None, "d", 5, 1), ("2", "bob", "c", 1, 2))
    cl.run()
    assert cl.output() == {"2": ("bob", 1)}
    assert tombstones() == {"1"}
    time.sleep(2)
    cl.append(("2", "bobby", "u", 2, 3))        # the input's commit time passes the retention
    cl.run()
    assert tombstones() == set()
    cl.append(("1", "ann-late", "u", 3, 4))     # older than the purged delete: applied as new
    cl.run()
    assert cl.output() == {"1": ("ann-late", 3), "2": ("bobby", 2)}


def test_commit_times_and_run_times_keep_their_instant_whatever_the_time_zones(scratch_project, spark, monkeypatch):
    """A commit's time read from `describe history` comes back from the connection as a naive
    time in some zone — the dbt process's under the `session` method (PySpark's collect), the
    session's over Thrift — and must be written back as a literal of the same instant. Written as
    it was, in a dbt process in Tokyo with a New York session, the tombstone retention (1 hour)
    counted from 14 hours after the commit: the tombstone was purged at once, and an older event
    arriving later brought the deleted key back. The run log's start, taken in UTC, was written
    as a New York time: five hours after the run's end."""
    ny = "pre_hook=\"set spark.sql.session.timeZone = America/New_York\", post_hook=\"set spark.sql.session.timeZone = UTC\""
    body = MODELS["customers"].replace("arrival_order='kafka_offset'", f"arrival_order='kafka_offset', tombstone_retention='1 hour', {ny}")
    cl = ChangelogProject.create(scratch_project, spark, models={"customers": body})
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        cl.append(("1", "ann", "c", 1, 0), ("1", None, "d", 5, 1), ("2", "bob", "c", 1, 2))
        cl.run()
        cl.append(("2", "bobby", "u", 2, 3))
        cl.run()
        deleted = spark.table(f"{cl.schema}.customers__ij_sequences").where("__ij_deleted").collect()
        assert [r.id for r in deleted] == ["1"]
        cl.append(("1", "ann-late", "u", 3, 4))     # older than the delete, within the retention
        cl.run()
        assert cl.output() == {"2": ("bobby", 2)}
        log = cl.last_run()
        elapsed = (log["finished_at"] - log["started_at"]).total_seconds()
        assert 0 <= elapsed <= log["duration_s"] + 5, log
    finally:
        monkeypatch.undo()
        time.tzset()


# Wall-clock times in New York around both daylight-saving changes of 2026, and in summer.
NEW_YORK_TIMES = {"spring_after": (2026, 3, 8, 3, 30), "fall_before": (2026, 11, 1, 0, 30),
                  "fall_after": (2026, 11, 1, 3, 30), "summer": (2026, 7, 1, 12, 0, 0, 250000)}
TIMES_PROBE = """
{% macro probe_times(times) %}
  {%- do run_query('set spark.sql.session.timeZone = America/New_York') -%}
  {%- set rows = [] -%}
  {%- for name, parts in times.items() -%}
    {%- do rows.append('select ' ~ incremental_joins.string_literal(name) ~ ' as name, ' ~ incremental_joins.timestamp_literal(modules.datetime.datetime(*parts)) ~ ' as t') -%}
  {%- endfor -%}
  {%- do run_query('create or replace table ' ~ target.schema ~ '.probe_times using delta as ' ~ rows | join(' union all ')) -%}
  {%- do run_query('set spark.sql.session.timeZone = UTC') -%}
{% endmacro %}
"""


def test_a_naive_time_is_the_instant_the_connection_shows_as_it(scratch_project, spark, monkeypatch):
    """timestamp_literal: a naive time from a query is the instant the connection renders so —
    here in New York, as both the dbt process (the `session` method renders in it) and the session
    (Thrift renders in it) are — also where the zone's offset differs between that instant and
    the one the value names read as UTC (hours after a daylight-saving change)."""
    project = scratch_project({"macros/probe_times.sql": TIMES_PROBE})
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        project.invoke("run-operation", "probe_times", "--args", json.dumps({"times": NEW_YORK_TIMES}))
    finally:
        monkeypatch.undo()
        time.tzset()
    zone = zoneinfo.ZoneInfo("America/New_York")
    expected = {name: int(datetime.datetime(*parts, tzinfo=zone).timestamp() * 1000000) for name, parts in NEW_YORK_TIMES.items()}
    rows = spark.sql(f"select name, unix_micros(t) as micros from {project.schema}.probe_times").collect()
    assert {r.name: r.micros for r in rows} == expected


def test_events_of_recent_keys_leave_the_older_output_files_unread(cl):
    """The output MERGE is bounded by the run's keys' least and greatest value as literals (Delta
    prunes a MERGE's target files by nothing else): events for keys a recent run inserted read
    only the output files that hold them — the run succeeds with the older files moved aside. A
    delete among them goes too."""
    cl.append(*[(f"a{i:03}", f"n{i}", "c", 1, i) for i in range(100)])
    cl.run()
    cl.append(*[(f"b{i:03}", f"n{i}", "c", 1, 100 + i) for i in range(10)])
    cl.run()        # the new keys, inserted into files of their own
    cl.append(("b003", "renamed", "u", 2, 200), ("b007", None, "d", 2, 201))
    with ExitStack() as hidden:
        for m in ("customers", "customers_dbz"):
            hidden.enter_context(files_hidden(cl.spark, f"{cl.schema}.{m}", "id < 'b'"))
        cl.run()
    expected = {**{f"a{i:03}": (f"n{i}", 1) for i in range(100)}, **{f"b{i:03}": (f"n{i}", 1) for i in range(10)}}
    expected["b003"] = ("renamed", 2)
    del expected["b007"]
    for m in ("customers", "customers_dbz"):
        assert cl.output(m) == expected, m
        metrics = merge_metrics(cl.spark, f"{cl.schema}.{m}")
        assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsDeleted"], metrics["numTargetRowsInserted"]) == (1, 1, 0), (m, metrics)


def test_a_run_whose_events_change_no_key_leaves_the_output_as_it_is(scratch_project, spark):
    """A run whose new events are all ignored by the mapping has no newest event: an empty key
    set, whose range is no range (a bound written from its missing least value was `between L and
    L` for a bigint key, and the run failed)."""
    project = scratch_project({
        "models/sources.yml": "version: 2\nsources:\n  - name: t\n    schema: \"{{ target.schema }}\"\n    tables: [{name: cdc}]\n",
        "models/accounts.sql": """
            {{ config(materialized='changelog_table', key='id', sequence='lsn',
                      operation_mapping={'c': 'upsert', 'd': 'delete', 't': 'ignore'}) }}
            select * from {{ incremental_joins.stream(source('t', 'cdc')) }}
            """})
    schema = project.schema
    spark.sql(f"create table {schema}.cdc (id bigint, op string, lsn bigint, name string) using delta")
    spark.sql(f"insert into {schema}.cdc values (1, 'c', 1, 'Ada'), (2, 'c', 2, 'Bob')")
    project.invoke("run", "--quiet")
    spark.sql(f"insert into {schema}.cdc values (1, 't', 3, null)")
    project.invoke("run", "--quiet")
    assert sorted(tuple(r) for r in spark.table(f"{schema}.accounts").collect()) == [(1, 1, "Ada"), (2, 2, "Bob")]
    log = spark.sql(f"select mode, affected_keys from {schema}.incremental_joins_run_log where model = 'accounts' order by started_at desc limit 1").first()
    assert (log.mode, log.affected_keys) == ("incremental", 0), log


def test_an_edited_operation_mapping_is_applied_to_every_event_so_far(cl):
    """Editing the operator config between runs (no --full-refresh): deletes are now ignored, so
    the next run recomputes from every event so far and a deleted key is back with its newest
    upsert; written change-minimally, and the run after it is incremental again."""
    cl.append(("1", "ann", "c", 1, 0), ("2", "bob", "c", 2, 1), ("3", "cy", "c", 3, 2))
    cl.run()
    cl.append(("2", "bob", "d", 4, 3), ("3", "cyd", "u", 5, 4))
    cl.run()
    assert cl.last_run()["mode"] == "incremental"
    assert cl.output() == {"1": ("ann", 1), "3": ("cyd", 5)}
    model = cl.project.path / "models" / "customers.sql"
    model.write_text(model.read_text().replace("arrival_order='kafka_offset'",
                                               "arrival_order='kafka_offset', operation_mapping={'c': 'upsert', 'r': 'upsert', 'u': 'upsert', 'd': 'ignore'}"))
    version = cl.version()
    cl.append(("1", "anna", "u", 6, 5))
    cl.run()
    log = cl.last_run()
    assert log["mode"] == "fallback" and "definition" in log["fallback_reason"], log
    assert cl.output() == {"1": ("anna", 6), "2": ("bob", 2), "3": ("cyd", 5)}
    changes = {(r._change_type, r.id) for r in cl.spark.sql(f"select * from table_changes('{cl.schema}.customers', {version + 1})").collect()}
    assert changes == {("update_preimage", "1"), ("update_postimage", "1"), ("insert", "2")}
    assert cl.output("customers_dbz") == {"1": ("anna", 6), "3": ("cyd", 5)}   # not edited
    assert cl.last_run("customers_dbz")["mode"] == "incremental"
    cl.append(("2", "bo", "d", 7, 6), ("3", "cy3", "u", 8, 7))
    cl.run()
    assert cl.last_run()["mode"] == "incremental"
    assert cl.output() == {"1": ("anna", 6), "2": ("bob", 2), "3": ("cy3", 8)}


def test_commits_without_data_keep_the_change_feed_and_delta_properties_do_not(cl):
    """Commits that change no data between two runs — a column comment (dbt's persist_docs, every
    run of an incremental model upstream), a table comment, a table property of the user's, a
    CHECK constraint, a new clustering — leave the run on the input's Change Data Feed, where each event keeps its own
    commit: the same key and sequence in two commits, the later commit wins whatever the
    kafka_offset. Across a `delta.` property the run diffs two versions, where every new event
    counts as one commit and kafka_offset alone decides (README: "with the feed off")."""
    both = ("customers", "customers_dbz")
    messages: list[str] = []
    cl.project.callbacks.append(lambda event: messages.append(event.info.msg) if event.info.name == "JinjaLogInfo" else None)
    cl.append(("1", "ann", "c", 1, 0))
    cl.run()

    cl.append(("1", "first-commit", "u", 2, 9))
    for table in ("cdc", "cdc_dbz"):
        for statement in ("alter table {t} change column op comment 'c, r, u or d'",
                          "comment on table {t} is 'CDC events of customers'",
                          "alter table {t} set tblproperties ('owner_team' = 'crm')",
                          "alter table {t} unset tblproperties ('owner_team')",
                          "alter table {t} add constraint offset_known check (kafka_offset is not null)",
                          "alter table {t} drop constraint offset_known",
                          "alter table {t} cluster by (kafka_offset)"):
            cl.spark.sql(statement.format(t=f"{cl.schema}.{table}"))
    cl.append(("1", "second-commit", "u", 2, 3))
    cl.run()
    for m in both:
        assert cl.output(m) == {"1": ("second-commit", 2)}, m
        assert cl.last_run(m)["mode"] == "incremental", m
    assert not [m for m in messages if "read by comparing versions" in m], messages

    cl.append(("1", "x-first-commit", "u", 3, 9))
    for table in ("cdc", "cdc_dbz"):
        cl.spark.sql(f"alter table {cl.schema}.{table} set tblproperties ('delta.logRetentionDuration' = 'interval 60 days')")
    cl.append(("1", "x-second-commit", "u", 3, 3))
    cl.run()
    for m in both:
        assert cl.output(m) == {"1": ("x-first-commit", 3)}, m
    # dbt's log says which input was diffed and why.
    version = cl.spark.sql(f"describe history {cl.schema}.cdc limit 2").collect()[1]["version"]
    said = [m for m in messages if m.startswith("customers: input ") and "read by comparing versions" in m]
    assert len(said) == 1 and f"SET TBLPROPERTIES at version {version}" in said[0], said


def test_on_schema_change_append_new_columns_takes_a_column_added_to_the_changelog(scratch_project, spark):
    """on_schema_change='append_new_columns': a column added to the CDC table reaches the output
    (added by the run) for the keys whose newest event has it; the other keys keep null, as their
    newest events do, so a full refresh gives the same table. An edited body (a new column, one
    dropped) is recomputed once over every event (an edited model); the dropped column stays."""
    model = ("{{ config(materialized='changelog_table', key='id', sequence='lsn', arrival_order='kafka_offset', "
             "on_schema_change='append_new_columns') }}\nselect * from {{ incremental_joins.stream(source('t', 'cdc')) }}\n")
    cl = ChangelogProject.create(scratch_project, spark, models={"customers": model})
    cdc = f"{cl.schema}.cdc"

    def table(*columns: str) -> dict:
        return {r.id: tuple(r[c] for c in columns) for r in spark.table(f"{cl.schema}.customers").collect()}

    spark.sql(f"insert into {cdc} values ('1', 'ann', 'c', 1, 0), ('2', 'bob', 'c', 2, 1)")
    cl.run()
    spark.sql(f"alter table {cdc} add columns (email string)")
    spark.sql(f"insert into {cdc} (id, name, op, lsn, kafka_offset, email) values ('1', 'ann', 'u', 3, 2, 'ann@x'), ('3', 'cy', 'c', 4, 3, 'cy@x')")
    cl.run()
    assert table("name", "lsn", "email") == {"1": ("ann", 3, "ann@x"), "2": ("bob", 2, None), "3": ("cy", 4, "cy@x")}
    assert cl.last_run()["mode"] == "incremental"
    incremental = table("name", "lsn", "email")
    cl.run("--full-refresh")
    assert table("name", "lsn", "email") == incremental

    path = cl.project.path / "models" / "customers.sql"
    path.write_text(model.replace("select *", "select * except (email), upper(name) as name_upper"))
    spark.sql(f"insert into {cdc} (id, name, op, lsn, kafka_offset, email) values ('2', 'bo', 'u', 5, 4, 'bo@x')")
    cl.run()
    assert cl.last_run()["mode"] == "fallback"
    assert table("name", "name_upper", "email") == {"1": ("ann", "ANN", "ann@x"), "2": ("bo", "BO", None), "3": ("cy", "CY", "cy@x")}


def test_on_schema_change_append_new_columns_takes_a_field_added_to_the_debezium_payload(scratch_project, spark):
    """A field added inside Debezium's `after` and `before` structs (Delta's ADD COLUMNS of a
    nested field, as a sink with schema evolution writes it) widens the payload: with
    on_schema_change='append_new_columns' the output gains the field as a column, read from the
    change feed (keys without a newer event keep null, as a full refresh gives); without it the run
    fails, naming the widened struct, and writes nothing; so does an input without a change feed."""
    model = ("{{ config(materialized='changelog_table', key='id', sequence='lsn', payload='after', arrival_order='kafka_offset', "
             "on_schema_change='append_new_columns') }}\nselect *, source.lsn as lsn from {{ incremental_joins.stream(source('t', 'cdc_dbz')) }}\n")
    strict = model.replace(", on_schema_change='append_new_columns'", "")
    nofeed = model.replace("'cdc_dbz'", "'cdc_dbz_nofeed'")
    cl = ChangelogProject.create(scratch_project, spark, models={"customers_dbz": model, "customers_strict": strict, "customers_nofeed": nofeed})
    (cl.project.path / "models" / "sources.yml").write_text(sources_yml("cdc", "cdc_dbz", "cdc_dbz_nofeed"))
    cl.append(("1", "ann", "c", 1, 0), ("2", "bob", "c", 2, 1), ("3", "cy", "c", 3, 2))
    spark.sql(f"create table {cl.schema}.cdc_dbz_nofeed using delta tblproperties ('delta.enableChangeDataFeed' = 'false') as select * from {cl.schema}.cdc_dbz")
    cl.run()
    for table in ("cdc_dbz", "cdc_dbz_nofeed"):
        spark.sql(f"alter table {cl.schema}.{table} add columns (after.email string, before.email string)")

    def row(id_: str, name: str, email: str | None) -> str:
        return f"named_struct('id', '{id_}', 'name', '{name}', 'email', {sql_literal(email)})"

    for table in ("cdc_dbz", "cdc_dbz_nofeed"):
        spark.sql(f"insert into {cl.schema}.{table} values "
                  f"(null, {row('1', 'ann', 'ann@x')}, 'u', named_struct('lsn', cast(4 as bigint)), 3), "
                  f"({row('2', 'bob', None)}, null, 'd', named_struct('lsn', cast(5 as bigint)), 4)")
    strict_version = cl.version("customers_strict")
    message = error_of(cl.run(check=False))
    # Without a change feed the two versions' rows would be compared: not across two struct types.
    assert "customers_nofeed: fields were added inside before, after of input" in message and "rows of two struct types do not compare" in message, message
    widened = "(struct<id:string,name:string> -> struct<id:string,name:string,email:string>)"
    assert "customers_strict: input" in message and f"(widened before {widened}, after {widened})" in message, message
    assert "or set on_schema_change='append_new_columns' on the model" in message, message
    assert cl.version("customers_strict") == strict_version
    table = {r.id: (r.name, r.lsn, r.email) for r in spark.table(f"{cl.schema}.customers_dbz").collect()}
    assert table == {"1": ("ann", 4, "ann@x"), "3": ("cy", 3, None)}
    cl.run("--full-refresh", "--select", "customers_dbz")
    assert {r.id: (r.name, r.lsn, r.email) for r in spark.table(f"{cl.schema}.customers_dbz").collect()} == table


def test_a_sequence_of_several_columns_orders_events_column_by_column(scratch_project, spark):
    """Debezium's MySQL connector positions an event by binlog file and offset in it
    (`source.file`, `source.pos`): `sequence=['binlog_file', 'binlog_pos']` compares the file
    first, then the position. Key 1: (file 1, pos 900) then (file 2, pos 100) — newer, though its
    position is lower; then, a run later, a late (file 1, pos 950): older than the stored
    (file 2, 100), it changes nothing. Key 2 deleted at (2, 50) leaves a tombstone that an upsert at
    (1, 999) cannot pass. By the position alone, key 1 would end as ann-950 and key 2 as bob-999. A
    null in either column is a null sequence, named as the list. `value_columns` picks a field of
    the payload and a top-level column: the output holds those beside the key."""
    model = ("{{ config(materialized='changelog_table', key='id', payload='after', sequence=['binlog_file', 'binlog_pos'], value_columns=['name', 'binlog_pos']) }}\n"
             "select *, source.file as binlog_file, source.pos as binlog_pos from {{ incremental_joins.stream(source('t', 'binlog')) }}")
    project = scratch_project({"models/sources.yml": sources_yml("binlog"), "models/customers.sql": model})
    schema = project.schema
    spark.sql(f"create or replace table {schema}.binlog (before struct<id: int, name: string>, after struct<id: int, name: string>, "
              "op string, source struct<file: string, pos: bigint>) using delta")

    def append(*events) -> None:   # (id, name, op, file, pos)
        rows = []
        for id_, name, op, file, pos in events:
            row = f"named_struct('id', {id_}, 'name', '{name}')"
            before, after = (row, "null") if op == "d" else ("null", row)
            rows.append(f"({before}, {after}, '{op}', named_struct('file', {sql_literal(file)}, 'pos', {sql_literal(pos)}))")
        spark.sql(f"insert into {schema}.binlog values {', '.join(rows)}")

    def output() -> list:
        assert spark.table(f"{schema}.customers").columns == ["id", "name", "binlog_pos"]
        return sorted(tuple(r) for r in spark.table(f"{schema}.customers").collect())

    append((1, "ann-900", "c", "mysql-bin.000001", 900), (1, "ann-2/100", "u", "mysql-bin.000002", 100),
           (2, "bob", "c", "mysql-bin.000001", 10), (2, "bob", "d", "mysql-bin.000002", 50))
    project.invoke("run", "--quiet")
    assert output() == [(1, "ann-2/100", 100)]
    append((1, "ann-950", "u", "mysql-bin.000001", 950), (2, "bob-999", "u", "mysql-bin.000001", 999))
    project.invoke("run", "--quiet")
    assert output() == [(1, "ann-2/100", 100)]
    append((3, "cy", "c", "mysql-bin.000002", None))
    assert ("customers: the input has 1 change events with a null sequence ('binlog_file, binlog_pos'), e.g. key {\"id\":3}"
            in error_of(project.invoke("run", "--quiet", check=False)))
