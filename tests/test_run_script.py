"""tests/run.sh's choice of what each mode runs (CI runs exactly it), with pytest and the cluster
stubbed out: each pytest call is recorded and takes the minutes it is given, so the branches a
slow machine takes (a smaller thrift tier, session mode running the worked examples itself) are
checked on any machine."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
import conftest

pytestmark = pytest.mark.session_only   # needs no Spark: run once, not per test mode

ROOT = Path(__file__).resolve().parents[1]


def run_script(tmp_path: Path, minutes: list[int], *args: str, **env: str) -> tuple[list[tuple[str, ...]], str]:
    """Runs tests/run.sh with each pytest call taking the next of `minutes` (the Nth call writing
    the ids `STUB_NOT_RUN_N` to the file of tests it did not start); returns the calls (mode,
    INCREMENTAL_JOINS_THRIFT_TAKES, pytest's test arguments, and the minutes from now to
    INCREMENTAL_JOINS_UNTIL, or None) and what it printed."""
    script = (ROOT / "tests" / "run.sh").read_text()
    script = script.replace('"$(dirname "${BASH_SOURCE[0]}")/../integration_tests/bootstrap.sh"', f'"{ROOT}/integration_tests/bootstrap.sh"')
    stub = ('pytest_workers() { local n=$(( $(wc -l < "$STUB_CALLS") + 1 )); '
            'printf "%s|%s|%s|%s\\n" "$INCREMENTAL_JOINS_TEST_MODE" "${INCREMENTAL_JOINS_THRIFT_TAKES:-}" "${*:2}" '
            '"${INCREMENTAL_JOINS_UNTIL:-}" >> "$STUB_CALLS"; '
            'local ids=STUB_NOT_RUN_$n; if [ -n "${!ids:-}" ]; then printf "%s\\n" ${!ids} >> "$INCREMENTAL_JOINS_NOT_RUN"; fi; '
            'SECONDS=$(( SECONDS + $(echo $STUB_MINUTES | cut -d" " -f$n) * 60 )); }')
    lines = [stub if line.startswith("pytest_workers() {") else line for line in script.splitlines()]
    script = "\n".join(lines).replace("python -m incremental_joins.cluster start", "true").replace(
        "python -m incremental_joins.cluster stop", "true").replace('rm -rf "$INCREMENTAL_JOINS_HOME"', ":")
    assert "STUB_CALLS" in script and "incremental_joins.cluster st" not in script
    (tmp_path / "run.sh").write_text(script)
    calls = tmp_path / "calls"
    calls.write_text("")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("INCREMENTAL_JOINS_")}
    environ.update(STUB_CALLS=str(calls), STUB_MINUTES=" ".join(map(str, minutes)), **env)
    done = subprocess.run(["bash", str(tmp_path / "run.sh"), *args], env=environ, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = [line.split("|") for line in calls.read_text().splitlines()]
    return [(*row[:3], round((int(row[3]) - time.time()) / 60) if row[3] else None) for row in rows], done.stderr


def test_ci_splits_the_suite_by_the_time_session_mode_takes(tmp_path):
    # A fast machine: session mode's part 20 min, thrift mode every test (no ids: all of them);
    # neither starts a test after minute 72 (CI's 90 less 10 to spare less 8 for the tests then
    # running).
    calls, printed = run_script(tmp_path, [20, 40])
    (mode, takes, args, until), thrift = calls
    assert (mode, args, until) == ("session", "", 72) and takes
    assert thrift == ("thrift", takes, "", 72 - 20)
    assert "NOT RUN" not in printed
    worked = takes.split()
    # 35 min: thrift mode the worked examples (and the two two-processes tests), not every test.
    calls, printed = run_script(tmp_path, [35, 33])
    assert [c[:2] + c[3:] for c in calls] == [("session", takes, 72), ("thrift", takes, 72 - 35)]
    assert calls[1][2].split()[:len(worked)] == worked and len(calls[1][2].split()) == len(worked) + 2
    assert "too late for every test" in printed and "no time left" not in printed
    # Thrift mode slower than estimated: the worked examples it did not start, session mode runs,
    # starting none after minute 85 (CI's last 5 minutes kept for the run's end).
    late = ["tests/test_value_types.py::test_a[x]", "tests/test_runtime.py::test_b"]
    calls, printed = run_script(tmp_path, [35, 37, 3], STUB_NOT_RUN_2=" ".join(late * 2))
    assert [c[0] for c in calls] == ["session", "thrift", "session"]
    assert calls[2][1:] == ("", " ".join(sorted(late)), 85 - 72)
    assert "no time left for 2 of the tests session mode left to it" in printed and "NOT RUN" not in printed
    # ... and when even that had no time for one of them, the run ends listing it as not run.
    calls, printed = run_script(tmp_path, [35, 37, 3], STUB_NOT_RUN_2=" ".join(late), STUB_NOT_RUN_3=late[1])
    assert len(calls) == 3 and printed.splitlines()[-3:-1] == [
        "tests: NOT RUN in either mode, too late for CI's 90 min on this machine: 1 (run them with "
        "INCREMENTAL_JOINS_TEST_MODE=session bash tests/run.sh followed by these):", f"tests:   {late[1]}"]
    # 45 min: too late for the worked examples in thrift mode: session mode runs them itself
    # (starting none after minute 72), then thrift mode its last tier (the integration project and
    # the two-processes tests), which leaves none to session mode.
    calls, printed = run_script(tmp_path, [45, 20, 7])
    assert calls[0][:2] == ("session", takes) and calls[1] == ("session", "", " ".join(worked), 72 - 45)
    assert calls[2][:2] == ("thrift", "") and calls[2][2].split()[0] == "tests/test_runtime.py" and len(calls[2][2].split()) == 3
    assert calls[2][3] == 72 - 65
    # 43 + 28 min: then too little time is left for thrift mode to start a test (after minute
    # 70, two before its limit), which the run says (before: it started a cluster for nothing).
    calls, printed = run_script(tmp_path, [43, 28])
    assert [c[0] for c in calls] == ["session", "session"] and "THRIFT MODE NOT RUN" in printed
    # A machine slower still: both session passes reach minute 72 with tests not started, which
    # the run lists at its end (each once), and still ends: no CI time-out (a worked-examples pass
    # without a time limit ran past CI's 90 minutes on 2026-12-07, 53 + 37 min).
    calls, printed = run_script(tmp_path, [53, 19], STUB_NOT_RUN_1="tests/a.py::test_x tests/a.py::test_y",
                                STUB_NOT_RUN_2="tests/test_deduplicate.py::test_z tests/test_deduplicate.py::test_z")
    assert [c[0] for c in calls] == ["session", "session"] and "THRIFT MODE NOT RUN" in printed
    assert "tests: NOT RUN in either mode, too late for CI's 90 min on this machine: 3 " in printed
    assert printed.splitlines()[-4:-1] == ["tests:   tests/a.py::test_x", "tests:   tests/a.py::test_y", "tests:   tests/test_deduplicate.py::test_z"]
    # ... and one whose first part alone ends after minute 72 starts no second pass: what it
    # would have run is listed as not run.
    calls, printed = run_script(tmp_path, [75])
    assert [c[0] for c in calls] == ["session"] and "tests: session mode not started: after 75 min, its time ended at 72" in printed
    assert f"NOT RUN in either mode, too late for CI's 90 min on this machine: {len(worked)} " in printed
    assert [line.removeprefix("tests:   ") for line in printed.splitlines()[-1 - len(worked):-1]] == worked
    # A mode chosen by hand runs all of it, with no time limit; arguments go to pytest.
    assert run_script(tmp_path, [50], INCREMENTAL_JOINS_TEST_MODE="session")[0] == [("session", "", "", None)]
    assert run_script(tmp_path, [50], "-k", "x", INCREMENTAL_JOINS_TEST_MODE="thrift")[0] == [("thrift", "", "-k x", None)]

    # Every test the split hands to thrift mode exists, and session mode leaves out exactly the
    # thrift-capable ones of them: session-only tests among them stay.
    def collected(**env: str) -> set[str]:
        # Not this run's own split (session mode's part of tests/run.sh sets it for its workers).
        environ = {k: v for k, v in os.environ.items() if k != "INCREMENTAL_JOINS_THRIFT_TAKES"}
        environ.update(INCREMENTAL_JOINS_TEST_MODE="session", **env)
        out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q"], cwd=ROOT,
                             env=environ, capture_output=True, text=True, timeout=120).stdout
        return {line.strip() for line in out.splitlines() if "::" in line}

    every, session_part = collected(), collected(INCREMENTAL_JOINS_THRIFT_TAKES=takes)
    for name in worked:
        assert any(conftest.names_test([name], t) for t in every), f"{name} names no test"
    left = every - session_part
    assert left and all(conftest.names_test(worked, t) for t in left)
    assert "tests/test_runtime.py::test_python_model_computes_in_session" in session_part
    assert "tests/test_runtime.py::test_dbt_test_passes_on_integration_project" in left


def test_no_test_starts_after_its_time_and_those_not_started_are_listed(tmp_path, monkeypatch):
    # Time is up (INCREMENTAL_JOINS_UNTIL in the past): every test is skipped before its
    # fixtures start a cluster; of those, the ones session mode left to thrift mode are listed by
    # id (a parameter kept, pytest-xdist's group dropped) for session mode to run; the others not.
    not_run = tmp_path / "not_run"
    left = "tests/test_runtime.py tests/test_value_types.py::test_maps_and_variants_pass_through_every_operator"
    environ = dict(os.environ, INCREMENTAL_JOINS_TEST_MODE="thrift", INCREMENTAL_JOINS_UNTIL=str(int(time.time()) - 1),
                   INCREMENTAL_JOINS_NOT_RUN=str(not_run), INCREMENTAL_JOINS_THRIFT_TAKES=left,
                   # no cluster: a test that did start would fail at once instead of starting one
                   INCREMENTAL_JOINS_TEST_CLUSTER="shared", INCREMENTAL_JOINS_HOME=str(tmp_path / "no_cluster"))
    tests = ["tests/test_runtime.py::test_incremental_rerun_merges_only_new_and_changed_rows",
             "tests/test_runtime.py::test_python_model_computes_in_session",   # session-only: skipped anyway
             "tests/test_runtime.py::test_sql_and_python_models_build_as_delta_tables_with_change_data_feed",
             "tests/test_value_types.py::test_maps_and_variants_pass_through_every_operator",
             "tests/test_value_types.py::test_keys_named_in_any_case_and_of_types_delta_cannot_cluster_by"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "1", "--dist", "loadgroup", "-rs", *tests], cwd=ROOT,
                          env=environ, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "passed" not in done.stdout.splitlines()[-1], done.stdout
    listed = not_run.read_text().splitlines()
    assert len(listed) == len(set(listed)) and set(listed) == {
        "tests/test_runtime.py::test_incremental_rerun_merges_only_new_and_changed_rows",
        "tests/test_value_types.py::test_maps_and_variants_pass_through_every_operator",
        "tests/test_runtime.py::test_sql_and_python_models_build_as_delta_tables_with_change_data_feed[orders_by_country]"}
    assert "SKIPPED [3] tests/conftest.py" in done.stdout and "SKIPPED [1] tests/conftest.py" in done.stdout   # and the other one
    # In session mode (this process's), the same: with no time set (a mode chosen by hand), or
    # before its time, a test is not skipped for it; after it, it is, and listed whether or not
    # session mode left it to thrift mode: no other mode will run it (a skip raised here would
    # skip this test, not fail it: caught).
    assert not conftest.THRIFT
    def skipped(nodeid: str) -> bool:
        try:
            conftest.not_started_in_time(types.SimpleNamespace(nodeid=nodeid))
        except pytest.skip.Exception:
            return True
        return False

    for name, value in (("INCREMENTAL_JOINS_THRIFT_TAKES", left), ("INCREMENTAL_JOINS_NOT_RUN", str(not_run))):
        monkeypatch.setenv(name, value)
    docs = "tests/test_runtime.py::test_docs_generate_works"
    monkeypatch.delenv("INCREMENTAL_JOINS_UNTIL", raising=False)
    assert not skipped(docs + "@integration_project")
    monkeypatch.setenv("INCREMENTAL_JOINS_UNTIL", str(int(time.time()) + 3600))
    assert not skipped(docs + "@integration_project")
    monkeypatch.setenv("INCREMENTAL_JOINS_UNTIL", str(int(time.time()) - 1))
    assert skipped(docs + "@integration_project")
    assert skipped("tests/test_benchmark.py::test_data_is_reproducible_from_the_seed")
    assert not_run.read_text().splitlines()[len(listed):] == [docs, "tests/test_benchmark.py::test_data_is_reproducible_from_the_seed"]
