"""One embedded Spark + Delta session for the whole test run, created before any dbt call.

Spark keeps the first session's static settings, so the session is made here with the warehouse
and metastore pinned to absolute paths under pytest's base temp directory: whatever directory a
test or dbt changes into, every dbt invocation in this process reuses this session and its Derby
metastore (only one JVM ever touches it).
"""

from __future__ import annotations

import hashlib
import os
import re
import textwrap
from pathlib import Path
from typing import Callable

import pytest

from incremental_joins.project import DbtProject
from incremental_joins.runtime import RuntimePaths, delta_session

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("spark_home")
    os.environ["INCREMENTAL_JOINS_HOME"] = str(home)
    return delta_session(RuntimePaths(home))


@pytest.fixture(scope="session")
def integration_project(spark) -> DbtProject:
    project = DbtProject(ROOT / "integration_tests")
    project.invoke("deps", "--quiet")
    return project


PROFILE = """
scratch:
  target: embedded
  outputs:
    embedded:
      type: spark_embedded
      method: session
      host: localhost
      schema: {schema}
      threads: 4
"""


@pytest.fixture
def scratch_project(spark, tmp_path: Path, request: pytest.FixtureRequest) -> Callable[..., DbtProject]:
    """A throw-away dbt project that installs this package; files given as {relative path: text}."""

    def make(files: dict[str, str], schema: str | None = None) -> DbtProject:
        # Unique per test (parametrized ones too), so no test sees another's tables.
        name = request.node.name.lower()
        schema = schema or "t_" + re.sub(r"\W", "_", name)[:32] + "_" + hashlib.sha1(name.encode()).hexdigest()[:6]
        (tmp_path / "profiles.yml").write_text(PROFILE.format(schema=schema))
        (tmp_path / "dbt_project.yml").write_text(
            "name: scratch\nversion: '1.0'\nconfig-version: 2\nprofile: scratch\n"
            "models:\n  scratch:\n    +file_format: delta\n"
        )
        (tmp_path / "packages.yml").write_text(f"packages:\n  - local: {ROOT}\n")
        for relative, text in files.items():
            path = tmp_path / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip())
        project = DbtProject(tmp_path)
        project.schema = schema
        project.invoke("deps", "--quiet")
        spark.sql(f"create schema if not exists {schema}")
        return project

    return make
