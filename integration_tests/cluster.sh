#!/usr/bin/env bash
# A Spark cluster on this machine: standalone master + one worker + Spark Thrift Server with Delta,
# every port on 127.0.0.1. `start` returns when the Thrift server answers and prints a dbt profile
# for it; `stop` stops all three (and the worker's executors); `status` lists what runs.
#   bash integration_tests/cluster.sh start|stop|status
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
export INCREMENTAL_JOINS_HOME="${INCREMENTAL_JOINS_HOME:-$IJ_ROOT/.spark}"
exec python -m incremental_joins.cluster "$@"
