"""foreign_key_join (SPEC §2): worked examples, written out by hand.

Inputs are Delta tables made here (left: k, v, fk; right: rk, rv); each dbt run sees what was
applied to them since the previous run, as in SPEC's worked example (one run per line).
"""

from __future__ import annotations

import datetime
import json
from contextlib import ExitStack
from itertools import takewhile

import pytest

from conftest import THRIFT
from fk_join_harness import FkJoinProject, failing_at, files_hidden, merge_metrics, runnable_models, sources_yml, sql_literal, tblproperties

OUTER_BODIES = runnable_models(("fk_outer", "fk_outer_py"))


@pytest.fixture
def fk(scratch_project, spark):
    return FkJoinProject.create(scratch_project, spark)


def test_spec_worked_example_inner_and_left(fk):
    # SPEC §2 worked example: left value `lhs|fk`, right rows by fk, one run per line.
    steps = [
        (lambda: fk.put_left(("lhs1", "a", "r1")), {}, {"lhs1": ("a", "r1", None)}),
        (lambda: fk.put_right(("r1", "x")), {"lhs1": ("a", "r1", "x")}, {"lhs1": ("a", "r1", "x")}),
        (lambda: fk.put_left(("lhs1", "a", "r2")), {}, {"lhs1": ("a", "r2", None)}),
        (lambda: fk.put_right(("r1", "y")), {}, {"lhs1": ("a", "r2", None)}),
        (lambda: fk.put_left(("lhs1", "a", None)), {}, {"lhs1": ("a", None, None)}),
        (lambda: fk.delete_left("lhs1"), {}, {}),
    ]
    for run, (change, inner, left) in enumerate(steps, start=1):
        change()
        fk.run()
        assert fk.output("fk_inner") == inner, f"inner after run {run}"
        assert fk.output("fk_left") == left, f"left after run {run}"
    if not THRIFT:
        # dbt ran in this process's Spark session: staging a view set a session setting for the
        # view's creation only, and it is back at its default.
        assert fk.spark.conf.get("spark.sql.legacy.storeAnalyzedPlanForView") == "false"


def test_outer_join_with_combined_key_sql_and_python_bodies(scratch_project, spark):
    # fk_outer_py is the same model as fk_outer with a Python body: same output, run for run.
    fk = FkJoinProject.create(scratch_project, spark, models=OUTER_BODIES)
    steps = [
        (lambda: (fk.put_right(("r1", "x"), ("r2", "y")), fk.put_left(("k1", "a", "r1"))), {
            ("r1", "k1"): ("a", "r1", "x"),
            ("r2", None): (None, None, "y"),   # unreferenced right row, left side null
        }),
        (lambda: fk.put_left(("k1", "a", "r2")), {   # FK moves: (r1, k1) deleted, (r2, k1) inserted
            ("r1", None): (None, None, "x"),
            ("r2", "k1"): ("a", "r2", "y"),
        }),
        (lambda: (fk.delete_right("r1"), fk.put_left(("k2", "b", "r9"))), {   # r9: no such right row
            ("r2", "k1"): ("a", "r2", "y"),
            ("r9", "k2"): ("b", "r9", None),
        }),
    ]
    for run, (change, expected) in enumerate(steps, start=1):
        change()
        fk.run()
        for model in OUTER_BODIES:
            assert fk.output(model) == expected, f"{model} after run {run}"
            assert fk.last_run_log(model)["mode"] == ("full_refresh" if run == 1 else "incremental")
    # The Python body's output changes exactly as the SQL body's does.
    for model in OUTER_BODIES:
        assert fk.output_changes(model) == {("delete", ("r1", None)), ("insert", ("r9", "k2"))}, model


def test_dbt_empty_builds_the_output_without_rows_for_sql_and_python_bodies(scratch_project, spark):
    """dbt's --empty on foreign_key_join models (an SQL and a Python body): each output is created
    with the body's columns and no rows, and nothing is recorded as consumed, so the next run
    builds it whole; --empty again leaves the built output as it is."""
    fk = FkJoinProject.create(scratch_project, spark, models=OUTER_BODIES)
    fk.put_right(("r1", "x"), ("r2", "y"))
    fk.put_left(("k1", "a", "r1"))
    fk.run("--empty")
    for model in OUTER_BODIES:
        assert fk.output(model) == {}, model
        described = [r.col_name for r in spark.sql(f"describe {fk.schema}.{model}").collect()]
        assert list(takewhile(lambda c: c and not c.startswith("#"), described)) == ["rk", "k", "v", "fk", "rv"], (model, described)
    fk.put_left(("k2", "b", None))
    fk.run()
    expected = {("r1", "k1"): ("a", "r1", "x"), (None, "k2"): ("b", None, None), ("r2", None): (None, None, "y")}
    for model in OUTER_BODIES:
        assert fk.output(model) == expected, model
    fk.put_left(("k3", "c", "r2"))
    fk.run("--empty")
    for model in OUTER_BODIES:
        assert fk.output(model) == expected, model
    fk.run()
    expected = {**{k: v for k, v in expected.items() if k != ("r2", None)}, ("r2", "k3"): ("c", "r2", "y")}
    for model in OUTER_BODIES:
        assert fk.output(model) == expected, model
        assert fk.last_run_log(model)["mode"] == "incremental", model


def test_fk_to_null_and_back(fk):
    fk.put_right(("r1", "x"))
    fk.put_left(("k1", "a", "r1"))
    fk.run()
    fk.put_left(("k1", "a", None))
    fk.run()
    assert fk.output("fk_left") == {"k1": ("a", None, None)}
    assert fk.output("fk_inner") == {}
    fk.put_left(("k1", "a", "r1"))
    fk.run()
    assert fk.output("fk_left") == {"k1": ("a", "r1", "x")}
    assert fk.output("fk_inner") == {"k1": ("a", "r1", "x")}


def test_right_update_reaches_every_referencing_left_row_and_only_those(fk):
    fk.put_right(("r1", "x"), ("r2", "y"))
    fk.put_left(("k1", "a", "r1"), ("k2", "b", "r1"), ("k3", "c", "r2"))
    fk.run()
    fk.put_right(("r1", "x2"))
    fk.run()
    assert fk.output("fk_inner") == {"k1": ("a", "r1", "x2"), "k2": ("b", "r1", "x2"), "k3": ("c", "r2", "y")}
    assert fk.output_changes("fk_inner") == {("update_postimage", "k1"), ("update_postimage", "k2")}
    assert fk.last_run_log("fk_inner")["fan_out"] == 2


def test_right_update_skips_left_rows_that_moved_away(fk):
    # k1's index entry for r1 is superseded by its move to r2: a later change of r1 reaches k2 only.
    fk.put_right(("r1", "x"), ("r2", "y"))
    fk.put_left(("k1", "a", "r1"), ("k2", "b", "r1"))
    fk.run()
    fk.put_left(("k1", "a", "r2"))
    fk.run()
    fk.put_right(("r1", "x2"))
    fk.run()
    assert fk.output("fk_inner") == {"k1": ("a", "r2", "y"), "k2": ("b", "r1", "x2")}
    assert fk.output_changes("fk_inner") == {("update_postimage", "k2")}
    assert fk.last_run_log("fk_inner")["fan_out"] == 1


def test_left_and_right_deletes(fk):
    fk.put_right(("r1", "x"), ("r2", "y"))
    fk.put_left(("k1", "a", "r1"), ("k2", "b", "r2"))
    fk.run()
    fk.delete_right("r1")
    fk.delete_left("k2")
    fk.run()
    assert fk.output("fk_inner") == {}
    assert fk.output("fk_left") == {"k1": ("a", "r1", None)}


def test_right_change_at_an_unreferenced_key_writes_nothing(fk):
    fk.put_right(("r1", "x"))
    fk.put_left(("k1", "a", "r1"))
    fk.run()
    fk.put_right(("r7", "nobody"))
    fk.run()
    assert fk.output_changes("fk_inner") == set()
    assert fk.output_changes("fk_left") == set()


def test_identical_right_reput_writes_nothing(fk):
    fk.put_right(("r1", "x"))
    fk.put_left(("k1", "a", "r1"))
    fk.run()
    fk.put_right(("r1", "x"))   # a new Delta version of the right table with the same value
    fk.run()
    assert fk.output_changes("fk_inner") == set()
    assert fk.last_run_log("fk_inner")["affected_keys"] == 1


def test_full_recompute_path_writes_only_the_rows_that_differ(scratch_project, spark):
    """The full-recompute path (full_recompute_above=0: every run with a change takes it) compares
    the recompute with the output and writes the difference: with a combined key, a foreign-key
    move is a delete and an insert, a right row that loses (or gains) its last reference gains (or
    loses) its row without a left key, and an identical re-put writes nothing."""
    fk = FkJoinProject.create(scratch_project, spark, models=("fk_outer_fallback",))
    m = "fk_outer_fallback"
    fk.put_right(("r1", "x"), ("r2", "y"))
    fk.put_left(("a", "1", "r1"), ("b", "2", "r1"))
    fk.run()
    assert fk.output(m) == {("r1", "a"): ("1", "r1", "x"), ("r1", "b"): ("2", "r1", "x"), ("r2", None): (None, None, "y")}
    steps = [
        (lambda: fk.put_left(("a", "1", "r2")),
         {("r2", "a"): ("1", "r2", "y"), ("r1", "b"): ("2", "r1", "x")},
         {("delete", ("r1", "a")), ("insert", ("r2", "a")), ("delete", ("r2", None))}),
        (lambda: (fk.put_right(("r1", "z")), fk.delete_left("b")),
         {("r2", "a"): ("1", "r2", "y"), ("r1", None): (None, None, "z")},
         {("delete", ("r1", "b")), ("insert", ("r1", None))}),
        (lambda: fk.put_left(("a", "3", "r2")),
         {("r2", "a"): ("3", "r2", "y"), ("r1", None): (None, None, "z")},
         {("update_postimage", ("r2", "a"))}),
        (lambda: fk.put_right(("r2", "y")), None, set()),   # a new version, the same value
    ]
    for run, (change, expected, changes) in enumerate(steps, start=2):
        before = fk.output(m)
        change()
        fk.run()
        log = fk.last_run_log(m)
        assert log["mode"] == "fallback", f"run {run}: {log['mode']}"
        assert fk.output(m) == (before if expected is None else expected), f"run {run}"
        assert fk.output_changes(m) == changes, f"run {run}"


def test_left_keys_renamed_and_overwritten_within_one_commit(fk):
    """The index follows the left input's changes read from its change feed: a key's newest change
    decides, and within one commit an update's pre-image of a key yields to a post-image or insert
    of the same key (a key renamed onto another, a table overwritten). Right rows change in the
    same runs, so each run also fans out through the index it appends to."""
    fk.put_right(("r1", "x"), ("r2", "y"))
    fk.put_left(("k1", "a", "r1"), ("k2", "b", "r2"), ("k3", "c", "r1"))
    fk.run()
    # One commit: k1 renamed to k9, and k2 renamed to k1 (k1's pre-image and a post-image of k1).
    fk.spark.sql(f"update {fk.schema}.lhs set k = case k when 'k1' then 'k9' else 'k1' end where k in ('k1', 'k2')")
    fk.put_right(("r1", "x2"))
    fk.run()
    left = {"k1": ("b", "r2", "y"), "k3": ("c", "r1", "x2"), "k9": ("a", "r1", "x2")}
    assert fk.output("fk_left") == left
    for model in ("fk_inner", "fk_left"):
        assert fk.index(model)[0] == {"k1": "r2", "k3": "r1", "k9": "r1"}, model
    fk.put_right(("r1", "x3"), ("r2", "y2"))
    fk.run()
    assert fk.output("fk_inner") == {"k1": ("b", "r2", "y2"), "k3": ("c", "r1", "x3"), "k9": ("a", "r1", "x3")}
    # One commit rewrites the whole table (a delete and an insert of k1 and of k3 in one version):
    # k9 is gone, k1 and k3 move.
    fk.spark.sql(f"insert overwrite {fk.schema}.lhs values ('k1', 'b', 'r1'), ('k3', 'c', 'r2')")
    fk.put_right(("r2", "y3"))
    fk.run()
    assert fk.output("fk_left") == {"k1": ("b", "r1", "x3"), "k3": ("c", "r2", "y3")}
    for model in ("fk_inner", "fk_left"):
        assert fk.index(model)[0] == {"k1": "r1", "k3": "r2"}, model
    fk.put_right(("r1", "x4"))
    fk.run()
    assert fk.output("fk_inner") == {"k1": ("b", "r1", "x4"), "k3": ("c", "r2", "y3")}
    assert fk.last_run_log("fk_inner")["fan_out"] == 1


def test_inputs_re_created_as_table_models_are_read_by_diffing_two_versions(scratch_project, spark):
    # A dbt `table` model upstream re-creates its table each run (CREATE OR REPLACE TABLE AS
    # SELECT, not a data change the Change Data Feed covers): the run reads what changed by
    # diffing the consumed and the new version, on the incremental path all the same.
    fk = FkJoinProject.create(scratch_project, spark, models=("fk_inner", "fk_left", "fk_outer"))
    fk.put_right(("r1", "x"), ("r2", "y"))
    fk.put_left(("k1", "a", "r1"), ("k2", "b", "r1"), ("k3", "c", "r2"))
    fk.run()

    def re_create(table: str, columns: str, *rows: tuple) -> None:
        values = ", ".join("(" + ", ".join(map(sql_literal, row)) + ")" for row in rows)
        spark.sql(f"create or replace table {fk.schema}.{table} using delta as select * from values {values} as t({columns})")

    # k1 moves from r1 to r2, k2 is gone, k3's value changes, k4 arrives referencing r9 (no such
    # right row): nothing references r1 any more.
    re_create("lhs", "k, v, fk", ("k1", "a", "r2"), ("k3", "c2", "r2"), ("k4", "d", "r9"))
    fk.run()
    assert fk.output("fk_inner") == {"k1": ("a", "r2", "y"), "k3": ("c2", "r2", "y")}
    assert fk.output("fk_left") == {"k1": ("a", "r2", "y"), "k3": ("c2", "r2", "y"), "k4": ("d", "r9", None)}
    assert fk.output("fk_outer") == {("r2", "k1"): ("a", "r2", "y"), ("r2", "k3"): ("c2", "r2", "y"),
                                     ("r9", "k4"): ("d", "r9", None), ("r1", None): (None, None, "x")}
    for model in ("fk_inner", "fk_left"):
        assert fk.index(model)[0] == {"k1": "r2", "k3": "r2", "k4": "r9"}, model
        assert fk.last_run_log(model)["mode"] == "incremental", model

    # Every right row changes by re-creation: the fan-out finds k1 and k3 through r2 and k4
    # through r9, and not k1 through r1, which it left.
    re_create("rhs", "rk, rv", ("r1", "x2"), ("r2", "y2"), ("r9", "z"))
    fk.run()
    joined = {"k1": ("a", "r2", "y2"), "k3": ("c2", "r2", "y2"), "k4": ("d", "r9", "z")}
    assert fk.output("fk_inner") == joined and fk.output("fk_left") == joined
    assert fk.output("fk_outer") == {("r2", "k1"): ("a", "r2", "y2"), ("r2", "k3"): ("c2", "r2", "y2"),
                                     ("r9", "k4"): ("d", "r9", "z"), ("r1", None): (None, None, "x2")}
    assert fk.last_run_log("fk_inner")["fan_out"] == 3

    # Back to the change feed: a merge moves k1 back to r1.
    fk.put_left(("k1", "a", "r1"))
    fk.run()
    assert fk.output("fk_inner") == {**joined, "k1": ("a", "r1", "x2")}
    assert fk.output("fk_outer") == {("r1", "k1"): ("a", "r1", "x2"), ("r2", "k3"): ("c2", "r2", "y2"),
                                     ("r9", "k4"): ("d", "r9", "z")}
    assert fk.index("fk_inner")[0] == {"k1": "r1", "k3": "r2", "k4": "r9"}


CHAINED = """
{{ config(materialized='foreign_key_join', left_key='k', right_key='ck', foreign_key='rv', join_type='left',
          full_recompute_above=10) }}
select {{ incremental_joins.output_key() }}, l.v, l.rv, r.cv
from {{ incremental_joins.join(ref('fk_left'), source('t', 'rhs2')) }}
"""


def test_an_output_is_the_input_of_another_foreign_key_join(scratch_project, spark):
    """SPEC property 4: operators compose. `chained` joins fk_left's output (orders with their
    customer's country code rv) to a third table (countries: ck -> cv) by that code, reading
    fk_left's change feed: a right-side change upstream is a foreign-key move downstream. One run
    of both models per step; `chained`'s output and exactly the keys its run changed, by hand."""
    fk = FkJoinProject.create(scratch_project, spark, models=("fk_left",))
    (fk.project.path / "models" / "sources.yml").write_text(sources_yml("lhs", "rhs", "rhs2"))
    (fk.project.path / "models" / "chained.sql").write_text(CHAINED)
    spark.sql(f"create or replace table {fk.schema}.rhs2 (ck string, cv string) using delta")

    def put_country(*rows: tuple) -> None:
        fk._upsert("rhs2", "ck", ["ck", "cv"], rows)

    def chained() -> dict:
        return {r.k: (r.v, r.rv, r.cv) for r in spark.table(f"{fk.schema}.chained").collect()}

    steps = [
        # Orders k1, k2 of customer r1 in country x.
        (lambda: (fk.put_left(("k1", "a", "r1"), ("k2", "b", "r1")), fk.put_right(("r1", "x")), put_country(("x", "X1"))),
         {"k1": ("a", "x", "X1"), "k2": ("b", "x", "X1")}, {("insert", "k1"), ("insert", "k2")}),
        # The customer moves to country y, which has no row: both orders' foreign key moves.
        (lambda: fk.put_right(("r1", "y")),
         {"k1": ("a", "y", None), "k2": ("b", "y", None)}, {("update_postimage", "k1"), ("update_postimage", "k2")}),
        # Country y arrives: found through chained's index.
        (lambda: put_country(("y", "Y1")),
         {"k1": ("a", "y", "Y1"), "k2": ("b", "y", "Y1")}, {("update_postimage", "k1"), ("update_postimage", "k2")}),
        # The old country changes: nobody references it any more.
        (lambda: put_country(("x", "X2")),
         {"k1": ("a", "y", "Y1"), "k2": ("b", "y", "Y1")}, set()),
        # The customer put again as it is: fk_left writes nothing, so chained reads nothing.
        (lambda: fk.put_right(("r1", "y")),
         {"k1": ("a", "y", "Y1"), "k2": ("b", "y", "Y1")}, set()),
        # An order deleted, another's value changed.
        (lambda: (fk.delete_left("k2"), fk.put_left(("k1", "c", "r1"))),
         {"k1": ("c", "y", "Y1")}, {("delete", "k2"), ("update_postimage", "k1")}),
    ]
    for run, (change, expected, changes) in enumerate(steps, start=1):
        change()
        fk.run()
        assert chained() == expected, f"run {run}"
        assert fk.output_changes("chained") == changes, f"run {run}: chained's change feed"
    # fk_left rebuilt by --full-refresh (its table replaced, same rows): chained reads the
    # replacement by comparing two versions and finds nothing changed; then a new order arrives.
    fk.run("--full-refresh", "--select", "fk_left")
    fk.run()
    assert chained() == {"k1": ("c", "y", "Y1")}
    assert fk.output_changes("chained") == set()
    assert fk.last_run_log("chained")["mode"] == "incremental"
    fk.put_left(("k3", "d", "r1"))
    fk.run()
    assert chained() == {"k1": ("c", "y", "Y1"), "k3": ("d", "y", "Y1")}
    assert fk.output_changes("chained") == {("insert", "k3")}


def newest_highwater_rows(fk, model: str) -> tuple[dict, int]:
    """The model's highwater read back by hand: {input: {'version', 'pending'}} from each input's
    newest row (newest `updated_at`; an advance wins a tie with its pin), and the row count."""
    rows = fk.spark.sql(f"select * from {fk.schema}.{model}__ij_highwater").collect()
    newest: dict = {}
    for r in rows:
        rank = (r.updated_at, r.pending_version is None)
        if r.input not in newest or rank > newest[r.input][0]:
            newest[r.input] = (rank, {"version": r.version, "pending": r.pending_version})
    return {name: state for name, (_, state) in newest.items()}, len(rows)


def highwater_note(fk, model: str) -> dict | None:
    """The state the newest commit of the model's highwater table carries, as a run reads it,
    each input's 'commit' checked against the input's own commit at the version it consumed (its
    operation, and its time's seconds and microseconds: what tells it from the commit at that
    version of a table dropped and created again) and left out."""
    note = fk.spark.sql(f"describe history {fk.schema}.{model}__ij_highwater limit 1").first()["userMetadata"]
    if not note:
        return None
    known = json.loads(note)["incremental_joins_highwater"]
    for name, entry in known["state"].items():
        commit = entry.pop("commit")
        at = [h for h in fk.spark.sql(f"describe history {name}").collect() if h["version"] == entry["version"]][0]
        when = at["timestamp"] if isinstance(at["timestamp"], datetime.datetime) else datetime.datetime.fromisoformat(str(at["timestamp"]))
        assert commit == f"{at['operation']} {when.strftime('%S.%f')}", (name, commit)
    return known


def test_highwater_read_from_its_newest_commit_and_from_its_rows_when_that_carries_none(fk):
    """A run reads the highwater from the user metadata of the highwater table's newest commit,
    which each pin and advance write: it must equal the table's rows (their newest per input, and
    their count, which decides compaction). A commit that carries none (an OPTIMIZE of the table)
    sends the next run to the rows, and that run is still incremental and right."""
    fk.put_right(("r1", "x"), ("r2", "y"))
    fk.put_left(("k1", "a", "r1"), ("k2", "b", "r2"))
    fk.run()
    fk.put_right(("r1", "x2"))
    fk.run()
    for model in ("fk_inner", "fk_left"):
        state, count = newest_highwater_rows(fk, model)
        assert highwater_note(fk, model) == {"state": state, "rows": count}, model
        assert state and all(s["pending"] is None for s in state.values()), model
    # Only the highwater's commits carry it (the two models ran in two threads of one session).
    for table in ("fk_inner", "fk_left", "fk_inner__ij_index", "fk_left__ij_index"):
        assert {h.userMetadata for h in fk.spark.sql(f"describe history {fk.schema}.{table}").collect()} == {None}, table
    # Deletion vectors on the output, which MERGE writes; not on the index and the highwater,
    # only appended or replaced whole (the feature costs every read a second file listing).
    features = {t: tblproperties(fk.spark, f"{fk.schema}.{t}").get("delta.feature.deletionVectors")
                for t in ("fk_inner", "fk_inner__ij_index", "fk_inner__ij_highwater")}
    assert features == {"fk_inner": "supported", "fk_inner__ij_index": None, "fk_inner__ij_highwater": None}
    fk.spark.sql(f"optimize {fk.schema}.fk_inner__ij_highwater")
    assert highwater_note(fk, "fk_inner") is None
    fk.put_right(("r2", "y2"))
    fk.put_left(("k3", "c", "r1"))
    fk.run()
    assert fk.output("fk_inner") == {"k1": ("a", "r1", "x2"), "k2": ("b", "r2", "y2"), "k3": ("c", "r1", "x2")}
    assert fk.last_run_log("fk_inner")["mode"] == "incremental"
    state, count = newest_highwater_rows(fk, "fk_inner")
    assert highwater_note(fk, "fk_inner") == {"state": state, "rows": count}


def test_a_change_to_recent_keys_leaves_the_older_output_files_unread(fk):
    """Delta prunes a MERGE's target files by literal predicates only, never by the join with its
    source: the run bounds the output MERGE and its read of the left rows by the affected keys'
    least and greatest value, so a change to the keys a recent run inserted reads only the files
    that hold them — the run succeeds with the first build's files of the output and of the left
    input moved aside."""
    fk.put_right(("r1", "x"), ("r2", "y"))
    fk.put_left(*[(f"a{i:03}", str(i), "r1") for i in range(200)])
    fk.run()
    fk.put_left(*[(f"b{i:03}", str(i), "r2") for i in range(10)])
    fk.run()        # the new keys, inserted into files of their own
    fk.put_left(("b005", "changed", "r1"))
    with ExitStack() as hidden:
        for relation in (f"{fk.schema}.fk_inner", f"{fk.schema}.fk_left", f"{fk.schema}.lhs"):
            hidden.enter_context(files_hidden(fk.spark, relation, "k < 'b'"))
        fk.run()
    expected = {**{f"a{i:03}": (str(i), "r1", "x") for i in range(200)},
                **{f"b{i:03}": (str(i), "r2", "y") for i in range(10)}, "b005": ("changed", "r1", "x")}
    for model in ("fk_inner", "fk_left"):
        assert fk.output(model) == expected, model
        m = merge_metrics(fk.spark, f"{fk.schema}.{model}")
        assert (m["numTargetRowsUpdated"], m["numTargetRowsInserted"]) == (1, 0), model



def test_a_right_change_reads_only_the_index_files_that_can_hold_its_keys(fk):
    """SPEC §2: the CombinedKey index answers which left rows reference the changed right keys,
    and its lookup prunes files. Delta skips files by literals only, never by a join, so the run
    names the changed right keys in its read of the index: up to 100 one by one, more by their
    range. With the index files of the first build (foreign key r1 only) moved aside — and the
    output's and the left input's files of those rows — a change to r2, which only rows of a
    later run reference, runs from that later run's files alone; so does a change of 151 right
    keys (r2 and 150 new ones, r500-r649), whose range still leaves r1 out."""
    fk.put_right(("r1", "x"), ("r2", "y"))
    fk.put_left(*[(f"a{i:03}", str(i), "r1") for i in range(200)])
    fk.run()
    fk.put_left(*[(f"b{i:03}", str(i), "r2") for i in range(10)])
    fk.run()        # the index entries of the b rows, appended into files of their own
    for changes, rv in ((("r2", "y2"),), "y2"), ((("r2", "y3"), *[(f"r{i}", "new") for i in range(500, 650)]), "y3"):
        fk.put_right(*changes)
        with ExitStack() as hidden:
            for relation, where in [(f"{fk.schema}.{m}__ij_index", "__ij_fk1 = 'r1'") for m in ("fk_inner", "fk_left")] + \
                                   [(f"{fk.schema}.{t}", "k < 'b'") for t in ("fk_inner", "fk_left", "lhs")]:
                hidden.enter_context(files_hidden(fk.spark, relation, where))
            fk.run()
        expected = {**{f"a{i:03}": (str(i), "r1", "x") for i in range(200)},
                    **{f"b{i:03}": (str(i), "r2", rv) for i in range(10)}}
        for model in ("fk_inner", "fk_left"):
            assert fk.output(model) == expected, (model, rv)
            log = fk.last_run_log(model)
            assert (log["mode"], log["fan_out"]) == ("incremental", 10), (model, rv)

def test_keys_named_as_literals_keep_case_quotes_backslashes_and_dollar_braces(fk):
    """A run names keys as literals: the changed right keys in the index lookup, the affected
    left keys' range in the output MERGE. Keys that differ only in case are two keys (Spark
    compares strings by their bytes), a quote and a backslash are escaped, and `${...}` is not
    left for Spark's variable substitution, which replaces it (with '' when no such variable is
    set) in a statement's text before parsing. Were 'r' and 'R' taken for one literal, the rows of
    the one left out would keep the right side's old value; were the range's upper bound
    'z${a}' read as 'z', the MERGE would not find that row and insert it a second time."""
    keys = ("r", "R", "it's", "back\\slash", "${nope}")
    lefts = ("k0", "k1", "k2", "k3", "z${a}")
    fk.put_right(*[(rk, "old") for rk in keys])
    fk.put_left(*[(k, str(i), rk) for i, (k, rk) in enumerate(zip(lefts, keys))])
    fk.run()
    fk.put_right(*[(rk, "new " + rk) for rk in keys])
    fk.run()
    expected = {k: (str(i), rk, "new " + rk) for i, (k, rk) in enumerate(zip(lefts, keys))}
    for model in ("fk_inner", "fk_left"):
        assert fk.output(model) == expected, model
        log = fk.last_run_log(model)
        assert (log["mode"], log["fan_out"]) == ("incremental", len(keys)), model


TYPED_KEYS_MODEL = """
{{ config(materialized='foreign_key_join', join_type='left', foreign_key='fk', right_key='rk',
          left_key=KEY, full_recompute_above=10) }}
select {{ incremental_joins.output_key() }}, l.v, r.rv
from {{ incremental_joins.join(source('t', 'typed'), source('t', 'rhs')) }}
"""

# Two rows whose key columns are each other's extremes, and one between them: negative and
# positive integers and decimals, dates and timestamps before and after 1970 with microseconds,
# strings with a quote and a backslash.
TYPED_ROWS = [
    ("-5", "-300", "-9000000000", "-12.34", "1969-12-31", "1969-12-31 23:59:59.999999", "1969-07-20 20:17:40.000001", "it's"),
    ("0", "1", "42", "0.50", "2000-02-29", "2000-02-29 12:00:00", "2000-02-29 12:00:00", "m"),
    ("7", "300", "9000000000", "99.99", "2026-11-30", "2026-11-01 01:30:00.000001", "2026-11-01 01:30:00.5", "back\\slash"),
]
FAR_ROW = ("1000", "1000", "9000000001", "100.00", "2027-01-01", "2027-01-01 00:00:00", "2027-01-01 00:00:00", "zzz")
TYPED_COLUMNS = ("i int, sm smallint, b bigint, d decimal(10,2), dt date, ts timestamp, ntz timestamp_ntz, "
                 "s string, f double, v string, fk string")


def test_key_ranges_of_every_bounded_type_keep_their_extremes(scratch_project, spark):
    """The MERGE's key range is written as literals of each key column's type: a bound off by a
    microsecond, a cent or an escape would leave the extreme row outside it, unmatched, and the
    run would insert it a second time. Both extreme rows change; each must be updated in place,
    and the range must still leave out the file of a row beyond it. A key of a type left
    unbounded (a double) is merged without a range."""
    project = scratch_project({
        "models/sources.yml": sources_yml("typed", "rhs"),
        "models/typed_keys.sql": TYPED_KEYS_MODEL.replace("KEY", "['i', 'sm', 'b', 'd', 'dt', 'ts', 'ntz', 's']"),
        "models/double_keys.sql": TYPED_KEYS_MODEL.replace("KEY", "'f'"),
    })
    schema = project.schema
    spark.sql(f"create or replace table {schema}.typed ({TYPED_COLUMNS}) using delta")
    spark.sql(f"create or replace table {schema}.rhs (rk string, rv string) using delta")
    spark.sql(f"insert into {schema}.rhs values ('r1', 'x')")

    def put(rows, v):
        values = ", ".join(
            f"({i}, {sm}, {b}, {d}BD, date'{dt}', timestamp'{ts}', timestamp_ntz'{ntz}', {sql_literal(s)}, {i} / 4, '{v}', 'r1')"
            for i, sm, b, d, dt, ts, ntz, s in rows)
        spark.sql(f"insert into {schema}.typed values {values}")

    put(TYPED_ROWS, "old")
    project.invoke("run", "--quiet")
    put([FAR_ROW], "far")       # inserted by the next run into an output file of its own
    project.invoke("run", "--quiet")
    spark.sql(f"delete from {schema}.typed where i in (-5, 7)")
    put([TYPED_ROWS[0], TYPED_ROWS[2]], "new")
    with files_hidden(spark, f"{schema}.typed_keys", "i = 1000"):    # outside the range: never read
        project.invoke("run", "--quiet")
    out = spark.sql(f"select i, v, rv from {schema}.typed_keys").collect()
    assert sorted((r.i, r.v, r.rv) for r in out) == [(-5, "new", "x"), (0, "old", "x"), (7, "new", "x"), (1000, "far", "x")]
    out = spark.sql(f"select f, v from {schema}.double_keys").collect()
    assert sorted((r.f, r.v) for r in out) == [(-1.25, "new"), (0.0, "old"), (1.75, "new"), (250.0, "far")]
    m = merge_metrics(spark, f"{schema}.typed_keys")
    assert (m["numTargetRowsUpdated"], m["numTargetRowsInserted"], m["numTargetRowsDeleted"]) == (2, 0, 0), m

    # A run that affects no left key (a right row nobody references): an empty set has no least
    # value, so no range bounds the MERGE (a bound written from the missing value was `between L
    # and L` for a bigint, and the run failed); the outputs stay as they are.
    def rows(model):
        return sorted(map(tuple, spark.table(f"{schema}.{model}").collect()))

    before = {m: rows(m) for m in ("typed_keys", "double_keys")}
    spark.sql(f"insert into {schema}.rhs values ('r9', 'nobody')")
    project.invoke("run", "--quiet")
    assert {m: rows(m) for m in before} == before
    log = spark.sql(f"select mode, affected_keys from {schema}.incremental_joins_run_log where model = 'typed_keys' order by started_at desc limit 1").first()
    assert (log.mode, log.affected_keys) == ("incremental", 0), log


def test_an_edited_model_is_recomputed_whole_once_and_written_change_minimally(fk):
    """Editing a model's body or its operator config between runs (no --full-refresh): the next
    run finds another definition than the one its output was built with, recomputes everything
    from the inputs and writes only the rows the edit changes (as the automatic fallback writes);
    the run after it is incremental again. A run stopped before it recorded the new definition
    recomputes again."""
    fk.put_left(("k1", "a", "r1"), ("k2", "b", "r2"), ("k3", "c", "r9"), ("k4", "d", None))
    fk.put_right(("r1", "x"), ("r2", "y"))
    fk.run()
    fk.put_left(("k2", "b2", "r2"))
    fk.run()
    # A run of an unedited model is incremental: its definition is the one its output has.
    assert [fk.last_run_log(m)["mode"] for m in ("fk_inner", "fk_left")] == ["incremental", "incremental"]

    # The body: a missing right row now reads 'none'. Only k3 and k4 (no right row) change.
    model = fk.project.path / "models" / "fk_left.sql"
    model.write_text(model.read_text().replace("r.rv", "coalesce(r.rv, 'none') as rv"))
    fk.put_right(("r2", "y2"))
    fk.run()
    log = fk.last_run_log("fk_left")
    assert log["mode"] == "fallback" and "definition" in log["fallback_reason"], log
    assert fk.output("fk_left") == {"k1": ("a", "r1", "x"), "k2": ("b2", "r2", "y2"), "k3": ("c", "r9", "none"),
                                    "k4": ("d", None, "none")}
    assert fk.output_changes("fk_left") == {("update_postimage", "k2"), ("update_postimage", "k3"), ("update_postimage", "k4")}
    assert fk.last_run_log("fk_inner")["mode"] == "incremental"
    assert fk.output("fk_inner") == {"k1": ("a", "r1", "x"), "k2": ("b2", "r2", "y2")}
    fk.put_right(("r1", "x2"))
    fk.run()
    assert fk.last_run_log("fk_left")["mode"] == "incremental"
    assert fk.output("fk_left")["k1"] == ("a", "r1", "x2")

    # The config: the foreign key becomes coalesce(fk, 'r1'), so k4 now references r1. The run
    # stops after its writes, before it records the definition; the next one recomputes again.
    model.write_text(model.read_text().replace("foreign_key='fk'", "foreign_key=\"coalesce(fk, 'r1')\""))
    with failing_at("before_highwater"):
        assert not fk.run(check=False).success
    fk.run()
    log = fk.last_run_log("fk_left")
    assert log["mode"] == "fallback" and "definition" in log["fallback_reason"], log
    assert fk.output("fk_left")["k4"] == ("d", None, "x2")
    # The CombinedKey index follows the new foreign key: a change of r1 reaches k4 incrementally.
    assert fk.index("fk_left")[0]["k4"] == "r1"
    fk.put_right(("r1", "x3"))
    fk.run()
    assert fk.last_run_log("fk_left")["mode"] == "incremental"
    assert fk.output("fk_left") == {"k1": ("a", "r1", "x3"), "k2": ("b2", "r2", "y2"), "k3": ("c", "r9", "none"),
                                    "k4": ("d", None, "x3")}
    # The equals_full_recompute test compares with the new definition's recompute.
    assert "coalesce(fk, 'r1')" in tblproperties(fk.spark, f"{fk.schema}.fk_left")["incremental_joins.recompute_sql"]


def test_on_schema_change_append_new_columns_takes_columns_added_to_either_input(scratch_project, spark):
    """on_schema_change='append_new_columns': a column added to the left input (ALTER TABLE ADD
    COLUMNS, read from the change feed) or to the right one (re-created by a dbt `table` model
    with one more column, read by comparing two versions) no longer stops the model. A body that
    selects it (`l.* except (k, __ij_fk1)`) gets it as a new output column: rows written before the change
    keep null, as the input's own older rows hold null, and every row the change reaches carries
    it — what a full refresh gives. A body that does not select it just runs on, incrementally.
    An edited body's new column is added too (the edit recomputes the output once)."""
    config = ("{{ config(materialized='foreign_key_join', left_key='k', right_key='rk', foreign_key='fk', "
              "join_type='left', full_recompute_above=10, on_schema_change='append_new_columns') }}\n")
    wide = config + ("select {{ incremental_joins.output_key() }}, l.* except (k, __ij_fk1), r.* except (rk)\n"
                     "from {{ incremental_joins.join(source('t', 'lhs'), source('t', 'rhs')) }}\n")
    narrow = config + ("select {{ incremental_joins.output_key() }}, l.v, r.rv\n"
                       "from {{ incremental_joins.join(source('t', 'lhs'), source('t', 'rhs')) }}\n")
    fk = FkJoinProject.create(scratch_project, spark, models=())
    models = fk.project.path / "models"
    (models / "wide.sql").write_text(wide)
    (models / "narrow.sql").write_text(narrow)
    (models / "tests.yml").write_text("version: 2\nmodels:\n" + "".join(
        f"  - name: {m}\n    data_tests: [incremental_joins.equals_full_recompute]\n" for m in ("wide", "narrow")))
    schema = fk.schema

    def rows(model: str) -> dict:
        return {r.k: {c: v for c, v in r.asDict().items() if c != "k"} for r in spark.table(f"{schema}.{model}").collect()}

    fk.put_left(("k1", "a", "r1"), ("k2", "b", "r2"), ("k3", "c", None))
    fk.put_right(("r1", "x"), ("r2", "y"))
    fk.run()

    # The left input gains `channel`: k1 is updated with one, k4 arrives with one.
    spark.sql(f"alter table {schema}.lhs add columns (channel string)")
    spark.sql(f"merge into {schema}.lhs as t using (select * from values ('k1', 'a2', 'r1', 'app'), ('k4', 'd', 'r2', 'web') "
              "as s(k, v, fk, channel)) as s on t.k = s.k when matched then update set * when not matched then insert *")
    fk.run()
    assert rows("wide") == {"k1": {"v": "a2", "fk": "r1", "rv": "x", "channel": "app"},
                            "k2": {"v": "b", "fk": "r2", "rv": "y", "channel": None},
                            "k3": {"v": "c", "fk": None, "rv": None, "channel": None},
                            "k4": {"v": "d", "fk": "r2", "rv": "y", "channel": "web"}}
    assert rows("narrow") == {"k1": {"v": "a2", "rv": "x"}, "k2": {"v": "b", "rv": "y"}, "k3": {"v": "c", "rv": None},
                              "k4": {"v": "d", "rv": "y"}}
    for model in ("wide", "narrow"):
        log = fk.last_run_log(model)
        assert (log["mode"], log["affected_keys"]) == ("incremental", 2), (model, log)
    assert fk.output_changes("wide") == {("update_postimage", "k1"), ("insert", "k4")}

    # The right input re-created with one more column, `tier`, and r2's value changed: every
    # right row differs from its older version (null tier), so every referencing row is recomputed.
    spark.sql(f"create or replace table {schema}.rhs using delta as select * from values ('r1', 'x', 'gold'), ('r2', 'y2', 'silver') as t(rk, rv, tier)")
    fk.run()
    expected = {"k1": {"v": "a2", "fk": "r1", "rv": "x", "channel": "app", "tier": "gold"},
                "k2": {"v": "b", "fk": "r2", "rv": "y2", "channel": None, "tier": "silver"},
                "k3": {"v": "c", "fk": None, "rv": None, "channel": None, "tier": None},
                "k4": {"v": "d", "fk": "r2", "rv": "y2", "channel": "web", "tier": "silver"}}
    assert rows("wide") == expected
    assert rows("narrow") == {"k1": {"v": "a2", "rv": "x"}, "k2": {"v": "b", "rv": "y2"}, "k3": {"v": "c", "rv": None},
                              "k4": {"v": "d", "rv": "y2"}}
    for model, changed in (("wide", {"k1", "k2", "k4"}), ("narrow", {"k2", "k4"})):
        log = fk.last_run_log(model)
        assert (log["mode"], log["fan_out"]) == ("incremental", 3), (model, log)
        assert fk.output_changes(model) == {("update_postimage", k) for k in changed}, model
    # The package's test compares by column name: wide's output holds rv before channel and tier
    # (added last), its recompute after channel.
    result = fk.project.invoke("test", "--select", "test_name:equals_full_recompute", check=False)
    statuses = {r.node.name.split("_equals_full_recompute_")[-1]: str(r.status) for r in result.result.results if "equals_full_recompute" in r.node.name}
    assert result.success and statuses == {"wide_": "pass", "narrow_": "pass"}, statuses
    fk.run("--full-refresh", "--select", "wide")
    assert rows("wide") == expected

    # An edited body selects a column of its own: added and filled by the recompute of the edit.
    (models / "narrow.sql").write_text(narrow.replace("r.rv", "r.rv, upper(r.tier) as tier_code"))
    spark.sql(f"update {schema}.lhs set v = 'c2', fk = 'r1' where k = 'k3'")
    fk.run()
    log = fk.last_run_log("narrow")
    assert log["mode"] == "fallback" and "definition" in log["fallback_reason"], log
    assert rows("narrow") == {"k1": {"v": "a2", "rv": "x", "tier_code": "GOLD"}, "k2": {"v": "b", "rv": "y2", "tier_code": "SILVER"},
                              "k3": {"v": "c2", "rv": "x", "tier_code": "GOLD"}, "k4": {"v": "d", "rv": "y2", "tier_code": "SILVER"}}
