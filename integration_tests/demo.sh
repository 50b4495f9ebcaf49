#!/usr/bin/env bash
# The demo: builds the integration project on the embedded Spark + Delta runtime, twice (a first
# build, then an incremental one), and prints a report of what ran. Idempotent.
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
export INCREMENTAL_JOINS_HOME="${INCREMENTAL_JOINS_HOME:-$IJ_ROOT/.spark/demo}"
exec python -m incremental_joins.demo "$@"
