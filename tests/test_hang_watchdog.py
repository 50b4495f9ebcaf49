"""tests/hang_watchdog.py: a test that hangs is stopped with what its Python threads and its JVM
were doing, and run once more; a second hang fails and ends the run. A small pytest run of its own
(two workers, `--dist loadgroup` and `--max-worker-restart 1`, as tests/run.sh) with a limit of
six seconds; no Spark."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.session_only   # needs no Spark: run once, not per test mode

TESTS = """
import os, subprocess, time
from pathlib import Path

MARKS = Path(os.environ["MARKS"])


def test_quick():
    assert True


def test_hangs_the_first_time():
    if not (MARKS / "hung").exists():
        (MARKS / "hung").write_text("")
        time.sleep(600)


def test_hangs_every_time_in_a_jvm():
    java = subprocess.Popen(["java", os.environ["SLEEPER"]])
    (MARKS / f"java-{java.pid}").write_text("")
    java.wait()
"""
SLEEPER = "public class Sleeper { public static void main(String[] a) throws Exception { Thread.sleep(600000); } }\n"


def run(tmp_path: Path, *tests: str) -> tuple[subprocess.CompletedProcess, dict[str, int], list[str]]:
    project = tmp_path / "run"
    marks = tmp_path / "marks"
    for folder in (project, marks):
        folder.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "test_hangs.py").write_text(textwrap.dedent(TESTS))
    (tmp_path / "Sleeper.java").write_text(SLEEPER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INCREMENTAL_JOINS_TEST_", "PYTEST_"))}
    env.update(INCREMENTAL_JOINS_TEST_HANG_MINUTES="0.1", MARKS=str(marks), SLEEPER=str(tmp_path / "Sleeper.java"),
               PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), env.get("PYTHONPATH", "")]))
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "hang_watchdog", "-p", "no:cacheprovider",
                               "-n", "2", "--dist", "loadgroup", "--max-worker-restart", "1",
                               *[f"test_hangs.py::{t}" for t in tests]],
                              cwd=project, env=env, capture_output=True, text=True, timeout=300)
    finally:
        for mark in marks.glob("java-*"):   # the stopped worker's JVM outlives it
            try:
                os.kill(int(mark.name.split("-")[1]), signal.SIGKILL)
            except ProcessLookupError:
                pass
    summary = done.stdout.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (failed|passed|rerun|error)", summary)}
    dumps = [p.read_text() for p in sorted((project / ".pytest_hangs").glob("*.txt"))]
    return done, counts, dumps


def test_a_test_that_hangs_once_is_stopped_shown_and_run_again(tmp_path):
    done, counts, dumps = run(tmp_path, "test_quick", "test_hangs_the_first_time")
    assert done.returncode == 0, done.stdout[-3000:]
    assert counts == {"passed": 2, "rerun": 1}, done.stdout[-3000:]
    assert len(dumps) == 1
    assert dumps[0].startswith("test_hangs.py::test_hangs_the_first_time\nstill running after 0.1 min")
    assert "in test_hangs_the_first_time" in dumps[0]   # the hung test's Python frame
    assert "hung test:" in done.stdout and "in test_hangs_the_first_time" in done.stdout


def test_a_test_that_hangs_again_fails_with_its_jvm_threads(tmp_path):
    done, counts, dumps = run(tmp_path, "test_quick", "test_hangs_every_time_in_a_jvm")
    assert done.returncode == 1, done.stdout[-3000:]
    assert counts == {"passed": 1, "rerun": 1, "failed": 1}, done.stdout[-3000:]
    assert "crashed while running 'test_hangs.py::test_hangs_every_time_in_a_jvm': it hung" in done.stdout
    assert len(dumps) == 2
    for dump in dumps:
        assert "in test_hangs_every_time_in_a_jvm" in dump
        assert "jcmd Thread.print" in dump and "Sleeper.main" in dump, dump[-3000:]
