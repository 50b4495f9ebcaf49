"""The Spark the whole test run works against, in one of two modes (`INCREMENTAL_JOINS_TEST_MODE`):

- `session` (default): one embedded Spark + Delta session per pytest process (tests/run.sh runs
  two workers), created before any dbt call, and the `spark_embedded` adapter. Spark keeps the
  first session's static settings, so the session is made here with the warehouse and metastore
  pinned to absolute paths under the process's own pytest base temp directory: every dbt
  invocation in this process reuses this session and its Derby metastore.
- `thrift`: a local standalone cluster (master, worker, Thrift server with Delta; see
  `incremental_joins.cluster`) started for the run and stopped after it, also when tests fail;
  dbt reaches it with the stock `spark` adapter, `method: thrift`, and the tests read tables
  through the same server. Tests marked `session_only` need the in-process session and are skipped.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import textwrap
import time
from pathlib import Path
from typing import Callable

import pytest

from incremental_joins.cluster import Cluster, free_port
from incremental_joins.project import DbtProject
from incremental_joins.runtime import RuntimePaths, delta_session

ROOT = Path(__file__).resolve().parents[1]
MODE = os.environ.get("INCREMENTAL_JOINS_TEST_MODE", "session")
if MODE not in ("session", "thrift"):
    raise pytest.UsageError(f"INCREMENTAL_JOINS_TEST_MODE={MODE!r}: use 'session' or 'thrift'")
THRIFT = MODE == "thrift"
pytest_plugins = ["hang_watchdog"]   # a test that hangs is stopped, shown and run once more


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "session_only: needs the in-process Spark session (not run in thrift mode)")
    config.addinivalue_line("markers", "ungrouped: an xdist_group test that pytest-xdist did not group (fails)")
    # A SIGTERM (a CI timeout, `kill`) ends the run like Ctrl-C: fixtures are torn down, so the
    # cluster of thrift mode is stopped too.
    signal.signal(signal.SIGTERM, signal.default_int_handler)


# The longest tests (minutes in session mode, 2026-11-23), run first: pytest-xdist hands tests to
# its workers in collection order (the integration project's group, its largest, before them), so
# no long test is left to run alone at the end. Every other test keeps its place after these.
LONGEST_FIRST = [
    "tests/test_stream_table_join.py::test_worked_example",                                       # ~10
    "tests/test_foreign_key_join_randomized.py::test_random_changes_over_random_runs_match_the_reference",  # ~10
    "tests/test_deduplicate.py::test_random_streams_match_the_reference_whatever_the_run_split",   # ~7
    "tests/test_stream_table_join.py::test_randomized_against_reference",                         # ~5.5
    "tests/test_foreign_key_join_randomized.py::test_run_interrupted_at_each_step_then_rerun_equals_a_clean_run",  # ~5
    "tests/test_deduplicate.py::test_seed_examples_in_one_run_and_record_by_record",              # ~4.5
    "tests/test_changelog_table.py::test_random_changelogs_over_random_runs_match_the_reference",
    "tests/test_changelog_table.py::test_run_interrupted_at_each_step_then_rerun_equals_a_clean_run",
    "tests/test_foreign_key_join.py::test_spec_worked_example_inner_and_left",                     # ~3.5
    "tests/test_foreign_key_join_errors.py::test_history_vacuumed_past_the_highwater_says_to_full_refresh",  # ~3.5
    "tests/test_deduplicate.py::test_two_runs_at_the_same_time_append_each_record_once",           # ~3.5, thrift mode only
    "tests/test_stream_table_join.py::test_two_runs_on_the_same_versions_emit_each_record_once",   # ~2, thrift mode only
    "tests/test_deduplicate.py::test_run_interrupted_at_each_step_then_rerun_equals_a_clean_run",  # ~3
    "tests/test_stream_table_join.py::test_crash_and_rerun",                                      # ~3
]


def without_group(nodeid: str) -> str:
    """A test's id without the `@<group>` pytest-xdist adds to a grouped test's."""
    return nodeid.split("@")[0]


def test_id(nodeid: str) -> str:
    """A test's id without its parameters and pytest-xdist's group."""
    return without_group(nodeid).split("[")[0]


def thrift_takes() -> list[str]:
    """The tests tests/run.sh hands from session mode to thrift mode (a file, or a file's test)."""
    return os.environ.get("INCREMENTAL_JOINS_THRIFT_TAKES", "").split()


def longest_first(item: pytest.Item) -> int:
    test = test_id(item.nodeid)
    return LONGEST_FIRST.index(test) if test in LONGEST_FIRST else len(LONGEST_FIRST)


@pytest.hookimpl(trylast=True)  # after pytest-xdist's, which names each grouped test's group
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=longest_first)   # stable: the rest keep their order
    # A pytest worker of `--dist loadgroup` (tests/run.sh, thrift mode): a module that shares one
    # project between its tests (xdist_group) must run in one worker, or two workers build the same
    # schema at once. pytest-xdist groups by renaming a test `<id>@<group>`; pytest 9.2 ignores that.
    for item in items:
        if (getattr(config.option, "loadgroup", False) and item.get_closest_marker("xdist_group")
                and "@" not in item.nodeid.rsplit("]", 1)[-1]):
            item.add_marker(pytest.mark.ungrouped)
    schemas: dict[str, str] = {}
    for item in items:
        other = schemas.setdefault(scratch_schema(item), item.nodeid)
        if other != item.nodeid:
            raise pytest.UsageError(f"{item.nodeid} and {other} would share scratch schema {scratch_schema(item)}")
    if THRIFT:
        skip = pytest.mark.skip(reason="needs the in-process Spark session; runs in session mode")
        for item in items:
            if "session_only" in item.keywords:
                item.add_marker(skip)
    else:
        # tests/run.sh hands these to thrift mode: session mode leaves out every test they name
        # (a file, or a file's test) that thrift mode can run.
        names = thrift_takes()
        kept, left = [], []
        for item in items:
            (left if "session_only" not in item.keywords and names_test(names, item.nodeid) else kept).append(item)
        if left:
            config.hook.pytest_deselected(items=left)
            items[:] = kept


def names_test(names: list[str], nodeid: str) -> bool:
    """Whether one of `names` (test ids as tests/run.sh lists them: a file, or a file's test) names
    this test."""
    test = test_id(nodeid)
    return any(test == name or test.startswith(name + "::") for name in names)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("ungrouped"):   # failed before its fixtures build anything
        pytest.fail(f"pytest-xdist did not keep {item.nodeid}'s xdist_group in one worker (pytest {pytest.__version__}): "
                    "install the versions pyproject.toml pins (pip install -e '.[dev]')", pytrace=False)
    if not item.get_closest_marker("skip"):
        not_started_in_time(item)


def not_started_in_time(item: pytest.Item) -> None:
    """CI's run (tests/run.sh) starts no test after `INCREMENTAL_JOINS_UNTIL` (epoch seconds), in
    either mode, so that a machine slower than its estimate still ends inside CI's time, saying
    what it left out: the test is skipped before its fixtures build anything and its id goes to
    the file `INCREMENTAL_JOINS_NOT_RUN`: in session mode every such test (tests/run.sh lists them
    as not run at the end), in thrift mode only those session mode left to it
    (`INCREMENTAL_JOINS_THRIFT_TAKES`), which session mode then runs instead (the others it ran)."""
    until = os.environ.get("INCREMENTAL_JOINS_UNTIL")
    if not until or time.time() < float(until):
        return
    late = "not started: too late for CI's time limit; "
    if THRIFT and not names_test(thrift_takes(), item.nodeid):   # session mode ran it
        pytest.skip(late + "not one of those session mode left to thrift mode")
    with open(os.environ["INCREMENTAL_JOINS_NOT_RUN"], "a") as ids:   # one short append per test
        ids.write(without_group(item.nodeid) + "\n")
    pytest.skip(late + ("session mode runs it next" if THRIFT else "listed as not run at the end of tests/run.sh's output"))


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    """The local cluster of thrift mode, stopped when the run ends however it ends; or, when
    `INCREMENTAL_JOINS_TEST_CLUSTER=shared`, the running cluster of `INCREMENTAL_JOINS_HOME` that
    tests/run.sh started for several pytest workers (-n 2) and stops itself."""
    if os.environ.get("INCREMENTAL_JOINS_TEST_CLUSTER") == "shared":
        shared = Cluster.from_env()
        if not shared.running():
            raise pytest.UsageError(f"INCREMENTAL_JOINS_TEST_CLUSTER=shared, but no cluster runs under {shared.home}: "
                                    "start it first (python -m incremental_joins.cluster start), as tests/run.sh does")
        yield shared
        return
    home = Path(os.environ.get("INCREMENTAL_JOINS_HOME", tmp_path_factory.mktemp("spark_home")))
    cluster = Cluster(home / "cluster", thrift_port=free_port(), master_port=free_port())
    os.environ["INCREMENTAL_JOINS_THRIFT_PORT"] = str(cluster.thrift_port)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    if THRIFT:
        from thrift_session import ThriftSession

        cluster = request.getfixturevalue("cluster")
        session = ThriftSession("127.0.0.1", cluster.thrift_port)
        yield session
        session.close()
        return
    home = tmp_path_factory.mktemp("spark_home")
    os.environ["INCREMENTAL_JOINS_HOME"] = str(home)
    yield delta_session(RuntimePaths(home))


@pytest.fixture(scope="session")
def integration_project(spark) -> DbtProject:
    # Python models need a session that runs them (spark_embedded); thrift mode builds the rest.
    project = DbtProject(ROOT / "integration_tests", target=MODE if THRIFT else "embedded",
                         vars={"incremental_joins_python_models": False} if THRIFT else {})
    project.invoke("deps", "--quiet")
    return project


def scratch_schema(item: pytest.Item) -> str:
    """The schema of a test's scratch project: unique per test, parametrized ones too, and across
    modules (several define a test of the same name), so that no test sees another's tables — in
    thrift mode both pytest workers share one cluster and its metastore."""
    name = item.name.lower()
    qualified = f"{item.path.name}::{name}"
    return "t_" + re.sub(r"\W", "_", name)[:32] + "_" + hashlib.sha1(qualified.encode()).hexdigest()[:6]


EMBEDDED_PROFILE = "type: spark_embedded\nmethod: session\nhost: localhost\nschema: {schema}\nthreads: 4\n"


def scratch_profile(request: pytest.FixtureRequest, schema: str) -> str:
    """profiles.yml of a scratch project: the embedded session, or the cluster's own profile."""
    output = request.getfixturevalue("cluster").profile(schema) if THRIFT else EMBEDDED_PROFILE.format(schema=schema)
    return "scratch:\n  target: main\n  outputs:\n    main:\n" + textwrap.indent(output, " " * 6)


@pytest.fixture
def scratch_project(spark, tmp_path: Path, request: pytest.FixtureRequest) -> Callable[..., DbtProject]:
    """A throw-away dbt project that installs this package; files given as {relative path: text}."""

    def make(files: dict[str, str], schema: str | None = None) -> DbtProject:
        schema = schema or scratch_schema(request.node)
        (tmp_path / "profiles.yml").write_text(scratch_profile(request, schema))
        (tmp_path / "dbt_project.yml").write_text(
            "name: scratch\nversion: '1.0'\nconfig-version: 2\nprofile: scratch\n"
            "models:\n  scratch:\n    +file_format: delta\n"
        )
        (tmp_path / "packages.yml").write_text(f"packages:\n  - local: {ROOT}\n")
        for relative, text in files.items():
            path = tmp_path / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip())
        project = DbtProject(tmp_path, target="main")
        project.schema = schema
        project.invoke("deps", "--quiet")
        spark.sql(f"create schema if not exists {schema}")
        return project

    return make
