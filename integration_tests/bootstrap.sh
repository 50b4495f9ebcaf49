# Sourced by integration_tests/demo.sh and tests/run.sh: everything a fresh machine needs, cached
# inside the repository (.venv for Python packages, .cache/jars for the Delta jars), so a second
# run only checks that the caches are current.
set -euo pipefail
IJ_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export INCREMENTAL_JOINS_JARS="${INCREMENTAL_JOINS_JARS:-$IJ_ROOT/.cache/jars}"
PYTHON="${PYTHON:-python3}"

if ! command -v "$PYTHON" >/dev/null; then
  echo "bootstrap: no '$PYTHON' on PATH; install Python 3.10+ (or set PYTHON)." >&2; exit 1
fi
stamp="$(cat "$IJ_ROOT/pyproject.toml" | sha256sum | cut -c1-16)"
if [ ! -x "$IJ_ROOT/.venv/bin/python" ] || [ "$(cat "$IJ_ROOT/.venv/.stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "bootstrap: installing the Python environment into .venv (first run only)" >&2
  "$PYTHON" -m venv "$IJ_ROOT/.venv"
  "$IJ_ROOT/.venv/bin/pip" install --quiet --upgrade pip
  "$IJ_ROOT/.venv/bin/pip" install --quiet -e "$IJ_ROOT[dev]"
  echo "$stamp" > "$IJ_ROOT/.venv/.stamp"
fi
export PATH="$IJ_ROOT/.venv/bin:$PATH"
# Checks Java and fetches the Delta jars once, with a clear message when either is missing.
python -m incremental_joins.runtime
# No usage tracking from our own scripts (dbt posts an event per invocation otherwise).
export DBT_SEND_ANONYMOUS_USAGE_STATS="${DBT_SEND_ANONYMOUS_USAGE_STATS:-false}"
