"""Run by tests/test_databricks.py inside a virtualenv with dbt-databricks (it pins another dbt-spark
than this repository's, so it cannot share .venv): `dbt parse` of the project in argv[1] with the
`databricks` adapter, offline, then what the `databricks` adapter would resolve. Prints JSON."""

import json
import sys

from dbt.adapters.factory import get_adapter_type_names
from dbt.cli.main import dbtRunner

project_dir = sys.argv[1]
warnings = []


def collect(event) -> None:
    if event.info.level in ("warn", "error"):
        warnings.append({"name": event.info.name, "msg": event.info.msg})


result = dbtRunner(callbacks=[collect]).invoke(
    ["parse", "--project-dir", project_dir, "--profiles-dir", project_dir, "--show-all-deprecations"])
manifest = result.result
out = {"success": result.success, "exception": str(result.exception or ""), "warnings": warnings}
if result.success:
    chain = get_adapter_type_names("databricks")
    out["adapter_chain"] = chain
    out["materializations"] = {}
    for name in ("foreign_key_join", "changelog_table", "deduplicate", "stream_table_join"):
        macro = manifest.find_materialization_macro_by_name("scratch", name, "databricks")
        out["materializations"][name] = macro.unique_id if macro else None
    # adapter.dispatch('x', 'incremental_joins') looks for databricks__x, spark__x, default__x.
    package = {m.name for m in manifest.macros.values() if m.package_name == "incremental_joins"}
    dispatched = {n.split("__", 1)[1] for n in package if n.split("__", 1)[0] in ("spark", "default")}
    out["dispatch"] = {name: next((f"{a}__{name}" for a in [*chain, "default"] if f"{a}__{name}" in package), None)
                       for name in sorted(dispatched)}
    out["models"] = sorted(n.name for n in manifest.nodes.values() if n.resource_type == "model")
print(json.dumps(out))
