"""The benchmark's own machinery (benchmark/): the data is reproducible from the seed, a wrong
result stops the benchmark, and the report's ratios and fallback crossover are computed as
written out by hand here. Timings are never asserted: the figures below are made up."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmark"))

import benchmark  # noqa: E402
import report  # noqa: E402

# The benchmark runs on the embedded session (benchmark/run.sh).
pytestmark = pytest.mark.session_only

TABLES = ["orders", "customers", "events", "purchases", "prices", "price_versions"]


def fingerprint(spark, schema: str) -> dict:
    return {t: tuple(spark.sql(f"select count(*), sum(xxhash64(*)) from {schema}.{t}").first()) for t in TABLES}


def generate(spark, schema: str, seed: int) -> dict:
    spark.sql(f"create schema if not exists {schema}")
    b = benchmark.Bench(spark, schema, seed, memory=None)
    benchmark.create_inputs(b, 2000)
    offsets = {"orders": 2000, "customers": 200, "stream": 2000}
    changes = benchmark.change_round(b, 1, 0.05, 2000, offsets)
    return {"tables": fingerprint(spark, schema), "changes": changes, "offsets": offsets}


def test_data_is_reproducible_from_the_seed(spark):
    first = generate(spark, "bench_seed_a", 7)
    assert first == generate(spark, "bench_seed_b", 7)
    other = generate(spark, "bench_seed_c", 8)
    assert all(other["tables"][t] != first["tables"][t] for t in TABLES)
    # The round changed what it says: 5% of 2000 orders and 200 customers (with inserts), 100 new
    # stream records, one commit per input.
    assert first["offsets"] == {"orders": 2010, "customers": 201, "stream": 2100}
    assert first["changes"]["new_records"] == 100
    assert 60 <= first["changes"]["left_changes"] <= 160, first["changes"]
    counts = dict(spark.sql("select 'events', count(*) from bench_seed_a.events union all "
                            "select 'purchases', count(*) from bench_seed_a.purchases").collect())
    assert counts == {"events": 2100, "purchases": 2100}
    # One in ten events redelivers an earlier message; the price table has one row per product.
    dups = spark.sql("select count(*) - count(distinct msg_id) from bench_seed_a.events").first()[0]
    assert 100 <= dups <= 320
    assert spark.sql("select count(*), count(distinct product_id) from bench_seed_a.prices").first() == (200, 200)


def test_a_wrong_result_stops_the_benchmark():
    b = benchmark.Bench(spark=None, schema="s", seed=1, memory=None)
    where = {"operator": "foreign_key_join", "size": 10, "fraction": 0.1}
    b.rows.append({**where, "method": "incremental", "wrong_rows": 0})
    benchmark.check(b, where, ["incremental"])
    b.rows.append({**where, "method": "MERGE floor", "wrong_rows": 3})
    with pytest.raises(SystemExit, match="MERGE floor .* 3 rows differ"):
        benchmark.check(b, where, ["incremental", "MERGE floor"])


def test_merge_phases_sum_the_merge_commits_in_seconds():
    write = {"operation": "WRITE", "operationMetrics": {"executionTimeMs": "999", "numOutputRows": "5"}}
    merge = {"operation": "MERGE", "operationMetrics": {"materializeSourceTimeMs": "1500", "scanTimeMs": "2000",
                                                        "rewriteTimeMs": "6250", "executionTimeMs": "9900"}}
    assert benchmark.merge_phases([write, merge]) == {"source": 1.5, "scan": 2.0, "rewrite": 6.25, "merge": 9.9}
    # Two MERGEs add up; a metric a MERGE lacks counts as none.
    other = {"operation": "MERGE", "operationMetrics": {"scanTimeMs": "500", "executionTimeMs": "700"}}
    assert benchmark.merge_phases([merge, other]) == {"source": 1.5, "scan": 2.5, "rewrite": 6.25, "merge": 10.6}
    assert benchmark.merge_phases([write]) is None and benchmark.merge_phases([]) is None


def test_merge_phases_come_from_delta_history(spark):
    """The metric names are Delta's: a real MERGE yields every phase, each within the whole."""
    spark.sql("create schema if not exists bench_phases")
    b = benchmark.Bench(spark, "bench_phases", 1, memory=None)
    b.sql("create or replace table bench_phases.t (k int, v string) using delta")
    b.sql("insert into bench_phases.t select id, 'a' from range(100)")
    before = b.versions(["t"])
    b.sql("merge into bench_phases.t as t using (select id as k, 'b' as v from range(95, 105)) as s on t.k = s.k "
          "when matched then update set v = s.v when not matched then insert *")
    commits = b.commits_since("t", before)
    assert [c["operation"] for c in commits] == ["MERGE"]
    phases = benchmark.merge_phases(commits)
    assert set(phases) == {"source", "scan", "rewrite", "merge"}
    assert phases["merge"] > 0 and all(0 <= phases[k] <= phases["merge"] for k in ("source", "scan", "rewrite"))
    assert benchmark.merge_phases(b.commits_since("t", b.versions(["t"]))) is None
    assert b.commits_since("absent", {}) == [] and b.written_since(["t", "absent"], before) == {"t": 10}


def test_the_warm_up_round_runs_first_is_checked_and_is_not_kept():
    rows = [{"method": "setup"}]  # the initial builds' rows stay
    calls, saved = [], []

    def play(rnd, fraction):
        calls.append((rnd, fraction))
        rows.append({"round": rnd, "fraction": fraction})

    benchmark.play_rounds(play, [0.1, 0.001, 0.5], rows, lambda: saved.append(len(rows)), "1k")
    # Round 0 at the smallest fraction, before the timed rounds in the order given.
    assert calls == [(0, 0.001), (1, 0.1), (2, 0.001), (3, 0.5)]
    assert rows == [{"method": "setup"}, {"round": 1, "fraction": 0.1}, {"round": 2, "fraction": 0.001},
                    {"round": 3, "fraction": 0.5}]
    # A report after each timed round, none with round 0's rows in it.
    assert saved == [2, 3, 4]

    # A wrong result in round 0 stops the benchmark like any round's: no timed round runs.
    def wrong(rnd, fraction):
        calls.append((rnd, fraction))
        raise SystemExit("wrong result")

    calls.clear()
    with pytest.raises(SystemExit):
        benchmark.play_rounds(wrong, [0.01, 0.1], [], lambda: None, "1k")
    assert calls == [(0, 0.01)]


def fk(size, fraction, method, seconds, **extra):
    return {"operator": "foreign_key_join", "size": size, "fraction": fraction, "method": method,
            "seconds": seconds, "peak_mb": 100, "rows_changed": 100, "rows_written": 90,
            "state_rows_written": 30, "affected_keys": int(size * fraction * 2), "wrong_rows": 0, **extra}


def results_of(rows, fractions):
    """A results.json of one run at 1k rows, with these rows."""
    return {"started": "2026-11-22T05:00:00+00:00", "minutes": 1, "machine": "test machine", "seed": 1,
            "sizes": [1000], "fractions": fractions, "spark": "4.2.0", "driver_memory": "1g",
            "commit": "abc", "rows": rows}


def test_report_ratios_targets_and_crossover(tmp_path):
    rows = [
        fk(1000, 0.01, "full rebuild", 30.0),
        fk(1000, 0.01, "incremental", 3.0, merge_phases={"source": 1.5, "scan": 0.2, "rewrite": 0.8, "merge": 2.6}),
        fk(1000, 0.01, "full-recompute path", 40.0),
        fk(1000, 0.01, "MERGE floor", 2.0, merge_phases={"source": 0.0, "scan": 0.5, "rewrite": 1.2, "merge": 1.8}),
        fk(1000, 0.01, "naive dbt incremental", 5.0, wrong_rows=17),
        fk(1000, 0.1, "full rebuild", 30.0), fk(1000, 0.1, "incremental", 20.0),
        fk(1000, 0.1, "full-recompute path", 40.0), fk(1000, 0.1, "MERGE floor", 4.0),
        fk(1000, 0.5, "full rebuild", 30.0), fk(1000, 0.5, "incremental", 60.0),
        fk(1000, 0.5, "full-recompute path", 40.0), fk(1000, 0.5, "MERGE floor", 9.0),
    ]
    report.write_report(results_of(rows, [0.01, 0.1, 0.5]), tmp_path)
    text = (tmp_path / "report.md").read_text()
    # full rebuild / incremental at 1%: 30 / 3 = 10x, below the 15x goal.
    assert "| FK join 1k, 1% change: full rebuild / incremental | >= 15x | 10.0x | **missed** |" in text
    # Worst incremental / floor at <= 10% change: max(3/2, 20/4) = 5x.
    assert "| FK incremental / MERGE floor (worst, change <= 10%) | <= 2x | 5.00x | **missed** |" in text
    # Rows written / changed: (90 + 30) / 100.
    assert "| FK rows written (output + index) / output rows changed (worst, change <= 10%) | <= 2x | 1.20x | met |" in text
    assert "| 1k | 1% | 100 | 20 | 30.0 | 3.0 | 10.0x | 40.0 | 5.0 | 17 | 2.0 | 1.50x |" in text
    # The output MERGE's phases where the round has them; outside the MERGE: 3.0 - 2.6 and 2.0 - 1.8 s.
    assert "| 1k | 1% | incremental | 1.50 | 0.20 | 0.80 | 2.60 | 3.0 | 0.4 |" in text
    assert "| 1k | 1% | MERGE floor | 0.00 | 0.50 | 1.20 | 1.80 | 2.0 | 0.2 |" in text
    assert "| 1k | 10% | incremental |" not in text
    # Affected fractions 2%, 20%, 100%: incremental cheaper at 20% (20 < 40), dearer at 100%
    # (60 > 40): the crossover lies 20/(20+20) of the way from 20% to 100%, at 60%.
    value, _ = report.threshold(rows, 1000, [0.01, 0.1, 0.5])
    assert value == pytest.approx(0.6)
    assert "above about 60% affected left rows" in text
    assert (tmp_path / "time_vs_fraction.png").stat().st_size > 10_000
    assert (tmp_path / "time_vs_size.png").stat().st_size > 10_000


def test_a_run_of_one_size_replaces_only_that_size_in_the_results(tmp_path):
    one = {"started": "2026-11-22T06:00:00+00:00", "minutes": 28, "machine": "m", "seed": 1, "sizes": [1000],
           "fractions": [0.01, 0.1], "spark": "4.2.0", "driver_memory": "1g", "commit": "aaa",
           "rows": [fk(1000, 0.01, "incremental", 3.0), fk(1000, 0.1, "incremental", 20.0)]}
    run = {**one, "started": "2026-11-22T08:00:00+00:00", "sizes": [10000], "fractions": [0.001, 0.01],
           "operators": ["foreign_key_join"], "commit": "bbb"}
    ten = {**run, "runs": [run], "rows": [fk(10000, 0.001, "incremental", 9.0)]}
    merged = benchmark.merge(one, ten)
    assert merged["sizes"] == [1000, 10000] and merged["fractions"] == [0.001, 0.01, 0.1]
    assert [(r["size"], r["seconds"]) for r in merged["rows"]] == [(1000, 3.0), (1000, 20.0), (10000, 9.0)]
    # The 1k figures keep the run that measured them (inferred operators: the results had none).
    assert [(r["commit"], r["sizes"], r["operators"]) for r in merged["runs"]] == [
        ("aaa", [1000], ["foreign_key_join"]), ("bbb", [10000], ["foreign_key_join"])]
    # A second 10k run replaces the first; the 1k rows stay.
    again = benchmark.merge(merged, {**ten, "rows": [fk(10000, 0.001, "incremental", 8.0)]})
    assert [(r["size"], r["seconds"]) for r in again["rows"]] == [(1000, 3.0), (1000, 20.0), (10000, 8.0)]
    assert [r["commit"] for r in again["runs"]] == ["aaa", "bbb"]
    report.write_report(again, tmp_path)
    assert "- 10k rows at 0.1%, 1% (foreign_key_join): run 2026-11-22 08:00 UTC on m" in (tmp_path / "report.md").read_text()
    # A round at one more fraction of a measured size replaces only that size's rows at that
    # fraction (and its setup rows, fraction 0): both runs stay, each with the size.
    late = {**run, "started": "2026-11-22T10:00:00+00:00", "fractions": [0.5], "commit": "ccc"}
    fifty = benchmark.merge(again, {**late, "runs": [late], "rows": [fk(10000, 0.0, "initial build", 30.0), fk(10000, 0.5, "incremental", 40.0)]})
    assert [(r["size"], r["fraction"], r["seconds"]) for r in fifty["rows"]] == [
        (1000, 0.01, 3.0), (1000, 0.1, 20.0), (10000, 0.001, 8.0), (10000, 0.0, 30.0), (10000, 0.5, 40.0)]
    assert [(r["commit"], r["sizes"]) for r in fifty["runs"]] == [("aaa", [1000]), ("bbb", [10000]), ("ccc", [10000])]
    assert fifty["fractions"] == [0.001, 0.01, 0.1, 0.5]
    # ...and the same round again replaces it, leaving the runs as they were.
    assert [r["commit"] for r in benchmark.merge(fifty, {**late, "runs": [late], "rows": [fk(10000, 0.5, "incremental", 41.0)]})["runs"]] == ["aaa", "bbb", "ccc"]
    # A run of another operator at a measured size and fraction keeps foreign_key_join's rows.
    dedup = {**late, "commit": "ddd", "operators": ["deduplicate"]}
    both = benchmark.merge(fifty, {**dedup, "runs": [dedup], "rows": [{**fk(10000, 0.5, "incremental", 12.0), "operator": "deduplicate"}]})
    assert [(r["operator"], r["seconds"]) for r in both["rows"] if r["fraction"] == 0.5] == [("foreign_key_join", 40.0), ("deduplicate", 12.0)]
    assert [r["commit"] for r in both["runs"]] == ["aaa", "bbb", "ccc", "ddd"]
    # A run of one operator that replaces every row of that operator an earlier run of two measured:
    # the earlier run stays for the other operator only, and the report says so.
    pair = {**late, "commit": "eee", "fractions": [0.2], "operators": ["foreign_key_join", "deduplicate"]}
    two = benchmark.merge(both, {**pair, "runs": [pair], "rows": [fk(10000, 0.2, "incremental", 50.0),
                                                                 {**fk(10000, 0.2, "incremental", 13.0), "operator": "deduplicate"}]})
    solo = {**late, "commit": "fff", "fractions": [0.2], "operators": ["deduplicate"]}
    after = benchmark.merge(two, {**solo, "runs": [solo], "rows": [{**fk(10000, 0.2, "incremental", 11.0), "operator": "deduplicate"}]})
    assert [(r["commit"], r["operators"]) for r in after["runs"]][-2:] == [("eee", ["foreign_key_join"]), ("fff", ["deduplicate"])]
    assert [(r["operator"], r["seconds"]) for r in after["rows"] if r["fraction"] == 0.2] == [("foreign_key_join", 50.0), ("deduplicate", 11.0)]
    assert "- 10k rows at 20% (foreign_key_join): run 2026-11-22 10:00 UTC on m" in report.run_lines(after)[-2]


def dbt_event(name, at, model, sql=""):
    """A stand-in for the EventMsg dbt hands its callbacks: the fields Statements reads."""
    ns = lambda **kw: type("N", (), kw)  # noqa: E731
    return ns(info=ns(name=name, ts=ns(seconds=int(at), nanos=round((at % 1) * 1e9))),
              data=ns(node_info=ns(node_name=model), sql=sql))


def test_each_statement_is_timed_to_the_next_one_of_its_model():
    clock = benchmark.Statements()
    comment = '/* {"app": "dbt", "node_id": "model.p.m"} */ '
    for event in [
        dbt_event("NodeStart", 90.0, "m"), dbt_event("SQLQuery", 91.0, "m", "select 1"),  # an earlier run of m
        dbt_event("NodeFinished", 92.0, "m"),
        dbt_event("NodeStart", 100.0, "m"),
        dbt_event("SQLQuery", 100.5, "m", comment + "merge into s.m as t\n   using x"),
        dbt_event("SQLQuery", 101.0, "other", "select 2"),  # another model's statement
        dbt_event("SQLQuery", 103.0, "m", "insert into s.m__ij_highwater values (1)"),
        dbt_event("SQLQuery", 103.25, "m", "cache table __ij_s__m__fan_out"),
        dbt_event("SQLQuery", 104.0, "m", "insert into s.m__ij_highwater values (1)"),
        dbt_event("SQLQuery", 104.25, "m", "select " + "x, " * 40 + "y"),
        dbt_event("NodeFinished", 104.5, "m"),
        dbt_event("GenericEvent", 105.0, "m"),
    ]:
        clock(event)
    profile = clock.profile("m", "s", top=3)
    # merge 100.5 -> 103.0 (the other model's statement between does not end it); the cache
    # 103.25 -> 104.0; the two highwater inserts 103.0 -> 103.25 and 104.0 -> 104.25, summed.
    assert profile["statements"] == 5 and profile["seconds"] == 4.0
    assert profile["top"] == [["merge into m as t using x", 2.5, 1], ["cache table fan_out", 0.75, 1],
                              ["insert into m__ij_highwater values (1)", 0.5, 2]]
    assert profile["rest"] == [0.25, 1]
    assert benchmark.statement_label("select " + "x, " * 40 + "y", "s", "m") == ("select " + "x, " * 40)[:79] + "…"


def test_the_report_shows_where_the_run_went(tmp_path):
    profile = {"statements": 4, "seconds": 4.0, "top": [["merge into m as t using x", 2.5, 1], ["select a | b", 1.0, 2]],
               "rest": [0.5, 1]}
    fallback = {"statements": 2, "seconds": 6.0, "top": [["merge into m as t using d", 5.0, 1], ["select c", 1.0, 1]],
                "rest": [0.0, 0]}
    rows = [fk(1000, 0.01, "incremental", 4.0, profile=profile), fk(1000, 0.1, "incremental", 9.0),
            fk(1000, 0.01, "full rebuild", 8.0), fk(1000, 0.01, "full-recompute path", 6.0, profile=fallback)]
    results = results_of(rows, [0.01, 0.1])
    report.write_report(results, tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "### foreign_key_join, 1k, 1% (4.0 s in 4 statements)" in text
    # foreign_key_join's full-recompute path has its own profile, after the incremental runs'.
    path = text.index("### foreign_key_join, full-recompute path, 1k, 1% (6.0 s in 2 statements)")
    assert path > text.index("### foreign_key_join, 1k, 1%")
    assert "| 5.00 | 83% | 1 | `` merge into m as t using d `` |" in text[path:]
    assert "the other statements" not in text[path:]
    # Shares of the run's 4.0 s; a pipe inside a statement escaped for the table.
    assert "| 2.50 | 62% | 1 | `` merge into m as t using x `` |" in text
    assert "| 1.00 | 25% | 2 | `` select a \\| b `` |" in text
    assert "| 0.50 | 12% | 1 | the other statements |" in text
    # Only the 1% round is profiled in the report; results from before profiles show no section.
    assert "1k, 10%" not in text
    report.write_report({**results, "rows": [fk(1000, 0.01, "incremental", 4.0)]}, tmp_path)
    assert "time goes" not in (tmp_path / "report.md").read_text()
