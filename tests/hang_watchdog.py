"""A pytest plugin (loaded by tests/conftest.py): a test that hangs is stopped, shown and run once
more, instead of holding the whole run until CI's time limit.

Under pytest-xdist (tests/run.sh), each worker starts a timer with every test; a test still running
after `INCREMENTAL_JOINS_TEST_HANG_MINUTES` (default 30; the longest test takes ~10 in session mode
on a fast machine of this kind and 15.4 on a slow one, 2026-11-30) is taken to hang. The worker then
writes what every thread was doing — its Python threads, and `jcmd Thread.print` of every JVM it
started (the embedded Spark session) or the suite runs against (thrift mode's cluster) — to
`.pytest_hangs/` under the rootdir and exits. pytest-xdist replaces the worker and hands the rest of
its tests, the stopped one included, to the workers (its `loadgroup` scheduler puts a dead worker's
unfinished tests back in the queue). A test stopped for hanging is reported as a rerun; a second
hang, or any other worker that dies, fails, and tests/run.sh passes `--max-worker-restart 1`, so
that also ends the run. Every dump is printed in the run's summary. (Seen once, 2026-11-27: a CI run
whose three longest tests, queued on one worker, had not ended after 60 more minutes, when CI's
90-minute limit stopped it; what hung was not recorded.)
"""

from __future__ import annotations

import faulthandler
import hashlib
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

MINUTES = float(os.environ.get("INCREMENTAL_JOINS_TEST_HANG_MINUTES", "30"))
EXIT_CODE = 70
ENDED_WORKERS = 0   # workers that ended while running a test, counted in the controller
DUMPS = Path(".pytest_hangs")


def pytest_configure(config: pytest.Config) -> None:
    global DUMPS
    DUMPS = config.rootpath / ".pytest_hangs"
    if not hasattr(config, "workerinput"):   # the controller, or a run without xdist
        shutil.rmtree(DUMPS, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    if not hasattr(item.config, "workerinput"):   # without xdist nothing would run it again
        yield
        return
    timer = threading.Timer(MINUTES * 60, stop_hung, (item,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def stop_hung(item: pytest.Item) -> None:
    """In the worker's timer thread: dump every thread, then end the worker."""
    DUMPS.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha1(item.nodeid.encode()).hexdigest()[:12]
    with open(DUMPS / f"{name}-{os.getpid()}.txt", "w") as out:
        out.write(f"{item.nodeid}\nstill running after {MINUTES:g} min on pytest worker "
                  f"{item.config.workerinput['workerid']} (pid {os.getpid()}), {time.strftime('%H:%M:%S')}: "
                  "stopped.\n\nPython threads:\n")
        out.flush()
        faulthandler.dump_traceback(out, all_threads=True)
        jcmd = shutil.which("jcmd") or str(Path(os.environ.get("JAVA_HOME", "/usr")) / "bin" / "jcmd")
        for pid in jvm_pids():
            out.write(f"\nJVM pid {pid}, jcmd Thread.print:\n")
            out.flush()
            try:
                subprocess.run([jcmd, str(pid), "Thread.print"], stdout=out, stderr=subprocess.STDOUT, timeout=120)
            except (OSError, subprocess.TimeoutExpired) as error:
                out.write(f"(no thread dump: {error})\n")
    os._exit(EXIT_CODE)


def jvm_pids() -> list[int]:
    """The JVMs under this worker (the embedded session's) and, in thrift mode, the cluster's."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    if os.environ.get("INCREMENTAL_JOINS_TEST_MODE") == "thrift" and os.environ.get("INCREMENTAL_JOINS_HOME"):
        from incremental_joins.cluster import Cluster, _group_pids

        found += [pid for leader in Cluster.from_env().processes().values() for pid in _group_pids(leader)]
    return [pid for pid in dict.fromkeys(found) if _comm(pid) == "java"]


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def dumps_of(nodeid: str) -> list[Path]:
    return [p for p in sorted(DUMPS.glob("*.txt")) if p.read_text().split("\n", 1)[0] == nodeid]


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched) -> None:
    """In the controller: a worker ended while running a test, which is already queued again (see
    above). The run's first such test, when it hung, is a rerun, not a failure: any other ended
    worker fails its test, and the next one ends the run (`--max-worker-restart 1`)."""
    global ENDED_WORKERS
    ENDED_WORKERS += 1
    dumps = dumps_of(crashitem)
    if dumps and ENDED_WORKERS == 1:
        report.outcome = "rerun"
    if dumps:
        report.longrepr = f"{report.longrepr}: it hung (over {MINUTES:g} min); what it was doing: {dumps[-1]}"


def pytest_report_teststatus(report: pytest.TestReport):
    if report.outcome == "rerun":
        return "rerun", "R", ("RERUN", {"yellow": True})
    return None


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    for path in sorted(DUMPS.glob("*.txt")):
        terminalreporter.write_sep("=", f"hung test: {path}")
        terminalreporter.write(path.read_text())
