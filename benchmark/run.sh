#!/usr/bin/env bash
# The benchmark in one command: installs what it needs (as the tests do), generates the data,
# runs every case and writes benchmark/report/ (report.md, PNG plots, results.json).
# Arguments go to benchmark.py, e.g. --sizes 100000 --fractions 0.01 --out /tmp/bench.
source "$(dirname "${BASH_SOURCE[0]}")/../integration_tests/bootstrap.sh"
cd "$IJ_ROOT"
exec python benchmark/benchmark.py "$@"
