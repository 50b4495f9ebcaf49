"""tests/run.sh's choice of what each mode runs (CI runs exactly it), with pytest and the cluster
stubbed out: each pytest call is recorded and takes the minutes it is given, so the branches a
slow machine takes (a smaller thrift tier, session mode running the worked examples itself) are
checked on any machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import names_test

pytestmark = pytest.mark.session_only   # needs no Spark: run once, not per test mode

ROOT = Path(__file__).resolve().parents[1]


def run_script(tmp_path: Path, minutes: list[int], *args: str, **env: str) -> tuple[list[tuple[str, str, str]], str]:
    """Runs tests/run.sh with each pytest call taking the next of `minutes`; returns the calls
    (mode, INCREMENTAL_JOINS_THRIFT_TAKES, pytest's test arguments) and what it printed."""
    script = (ROOT / "tests" / "run.sh").read_text()
    script = script.replace('"$(dirname "${BASH_SOURCE[0]}")/../integration_tests/bootstrap.sh"', f'"{ROOT}/integration_tests/bootstrap.sh"')
    stub = ('pytest_workers() { local n=$(( $(wc -l < "$STUB_CALLS") + 1 )); '
            'printf "%s|%s|%s\\n" "$INCREMENTAL_JOINS_TEST_MODE" "${INCREMENTAL_JOINS_THRIFT_TAKES:-}" "${*:2}" >> "$STUB_CALLS"; '
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
    return [tuple(line.split("|")) for line in calls.read_text().splitlines()], done.stderr


def test_ci_splits_the_suite_by_the_time_session_mode_takes(tmp_path):
    # A fast machine: session mode's part 20 min, thrift mode every test (no ids: all of them).
    calls, _ = run_script(tmp_path, [20, 40])
    (mode, takes, args), thrift = calls
    assert (mode, args) == ("session", "") and takes
    assert thrift == ("thrift", "", "")
    worked = takes.split()
    # 35 min: thrift mode the worked examples (and the two-processes test), not every test.
    calls, printed = run_script(tmp_path, [35, 33])
    assert [c[:2] for c in calls] == [("session", takes), ("thrift", "")]
    assert calls[1][2].split()[:len(worked)] == worked and len(calls[1][2].split()) == len(worked) + 1
    assert "too late for every test" in printed
    # 45 min: too late for the worked examples in thrift mode: session mode runs them itself,
    # then thrift mode its last tier (the integration project and the two-processes test).
    calls, printed = run_script(tmp_path, [45, 20, 7])
    assert calls[0][:2] == ("session", takes) and calls[1] == ("session", "", " ".join(worked))
    assert calls[2][0] == "thrift" and calls[2][2].split()[0] == "tests/test_runtime.py" and len(calls[2][2].split()) == 2
    # 60 min: then no time is left for thrift mode at all, which the run says.
    calls, printed = run_script(tmp_path, [60, 30])
    assert [c[0] for c in calls] == ["session", "session"] and "THRIFT MODE NOT RUN" in printed
    # A mode chosen by hand runs all of it; arguments go to pytest.
    assert run_script(tmp_path, [50], INCREMENTAL_JOINS_TEST_MODE="session")[0] == [("session", "", "")]
    assert run_script(tmp_path, [50], "-k", "x", INCREMENTAL_JOINS_TEST_MODE="thrift")[0] == [("thrift", "", "-k x")]

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
        assert any(names_test([name], t) for t in every), f"{name} names no test"
    left = every - session_part
    assert left and all(names_test(worked, t) for t in left)
    assert "tests/test_runtime.py::test_python_model_computes_in_session" in session_part
    assert "tests/test_runtime.py::test_dbt_test_passes_on_integration_project" in left
