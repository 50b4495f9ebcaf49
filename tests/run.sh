#!/usr/bin/env bash
# The test suite: pytest drives dbt in-process on one embedded Spark + Delta session.
source "$(dirname "${BASH_SOURCE[0]}")/../integration_tests/bootstrap.sh"
cd "$IJ_ROOT"
exec python -m pytest "$@"
