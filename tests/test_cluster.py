"""The local cluster of thrift mode (src/incremental_joins/cluster.py): it answers SQL in ANSI mode,
listens on loopback only, and a test run that fails still leaves nothing running."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from incremental_joins.cluster import _alive, _group_alive

# Starts a cluster of its own inside a pytest of its own; in thrift mode one cluster already runs.
pytestmark = pytest.mark.session_only


def test_failing_run_stops_the_cluster_which_listened_on_loopback_only(tmp_path):
    out = tmp_path / "probe.json"
    env = {**os.environ, "INCREMENTAL_JOINS_TEST_MODE": "thrift", "INCREMENTAL_JOINS_HOME": str(tmp_path / "home"),
           "IJ_CLUSTER_PROBE_OUT": str(out)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
                           str(ROOT / "tests" / "cluster_probe.py")],
                          cwd=ROOT / "tests", env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 1 and "deliberate failure" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    probe = json.loads(out.read_text())
    assert probe["two"] == 2
    assert probe["ansi"] == "true"      # Spark 4's default; the embedded session runs without it
    assert set(probe["processes"]) == {"master", "worker", "thriftserver"}
    ports = probe["listening"]
    assert ports and all(address.startswith("127.0.0.1:") for address in ports), ports
    # Every process group the cluster started is gone (the worker's executors with it).
    for name, pid in probe["processes"].items():
        assert not _alive(pid) and not _group_alive(pid), f"{name} (pid {pid}) still running"
    assert not (tmp_path / "home" / "cluster" / "processes.json").exists()
