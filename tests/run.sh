#!/usr/bin/env bash
# The test suite (README "Two commands"; CI runs exactly this), in two modes, one after the other:
#   session  pytest drives dbt in-process on an embedded Spark + Delta session, in two pytest
#            workers with a session each;
#   thrift   through a local standalone cluster (master, worker, Thrift server with Delta, ANSI
#            mode; see src/incremental_joins/cluster.py) with the stock dbt-spark adapter,
#            `method: thrift`, in two pytest workers against one cluster (one worker kept ~1.3 of
#            the 2 cores busy); the same tests take ~110% of session mode's time.
# INCREMENTAL_JOINS_TEST_MODE=session (or thrift) runs one mode, all of it; arguments go to pytest
# (without a mode, both modes run them).
# CI stops at 90 minutes (INCREMENTAL_JOINS_CI_MINUTES). Both modes whole do not fit that on this
# kind of machine (the same session mode took 29 min on one machine, 58 on another): session
# mode runs every test but the worked examples, then thrift mode runs the worked examples and the
# largest of THRIFT_TIERS below that can still finish inside it, judged from how long session
# mode just took, and says what it left out, so a slow machine is not a red build. Nor is a
# slower one: no test starts after minute 72 of CI's 90 (`limited` below; 85 for the few that
# thrift mode hands back), and the run ends listing every test it did not run.
# (With session mode's first part taking 53 min on one machine, 2026-12-07, its second pass, then
# without a time limit, ran past CI's 90 minutes.)
# The tests' tables hold tens of rows, where generating and compiling code costs more CPU than it
# saves: whole-stage codegen off and expressions interpreted (Spark's NO_CODEGEN factory mode)
# together take the FK worked example from 407 CPU-s (Spark's defaults) to 301, measured. The
# operators' SQL is the same either way; the benchmark runs with Spark's defaults.
# The JVM's optimizing compiler (C2) spent more CPU compiling than the tests spent running: on the
# FK worked example plus one more FK test, 146 of the JVM's 261 CPU-s were compiler threads. C2
# now compiles only methods ~10x hotter than its default thresholds (the quick C1 compiler takes
# the rest): 267 CPU-s and 165 s wall instead of 370 and 216, measured; still higher thresholds
# cost more in slower code than they save (315 CPU-s).
export INCREMENTAL_JOINS_JAVA_OPTS="${INCREMENTAL_JOINS_JAVA_OPTS:--XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=20000 -XX:Tier4CompileThreshold=60000 -XX:Tier4BackEdgeThreshold=400000}"
export INCREMENTAL_JOINS_SPARK_CONF="${INCREMENTAL_JOINS_SPARK_CONF:-spark.sql.codegen.wholeStage=false spark.sql.codegen.factoryMode=NO_CODEGEN}"
source "$(dirname "${BASH_SOURCE[0]}")/../integration_tests/bootstrap.sh"
cd "$IJ_ROOT"
status=0
budget=$(( ${INCREMENTAL_JOINS_CI_MINUTES:-90} * 60 - 10 * 60 ))
# CI splits the suite between the modes: session mode runs every test but the operators' worked
# examples and the integration project (`WORKED` below: hand-written expected rows), which thrift
# mode runs through the stock adapter in ANSI mode, together with as much more as still ends
# inside CI's time (THRIFT_TIERS); when even the worked examples would not, session mode runs them
# itself and thrift mode its last tier. Each tier's time is a percentage of session mode's first
# part (every test but the worked examples) in the same run, as both scale with the machine's
# speed. Measured with two workers on one machine before the split (2026-11-23 to 12-05, session
# mode running every test, S): thrift mode 110% of S for the suites its largest tier listed then
# (worked examples, randomized, crash-and-rerun and error suites: every test but 25 others, which
# it ran only when named), the worked examples and error suites 75%, the worked examples 49%.
# With the split (2026-12-06, one machine): session mode's part 35.0 min (a fresh clone; S was
# 58.1 there the day before), then thrift mode the worked examples and the two-processes test
# 32.7 min (94%; estimated 38), 68 min in all; by hand, thrift mode the randomized, crash-and-rerun
# and error suites 23.4 min and the 25 others 16.2: every test ~72 min, 207% of session mode's part.
# On CI's machine the same split took 82.4 min in all (stop 89; 68 here), so thrift mode there was
# slower than its 100% estimate: hence also the time limit on each pass's tests (below).
# Either mode hands its tests to the workers longest first (tests/conftest.py, LONGEST_FIRST).
STJ=tests/test_stream_table_join.py DEDUP=tests/test_deduplicate.py CL=tests/test_changelog_table.py
WORKED="$(echo $STJ::test_worked_example $DEDUP::test_seed_examples_in_one_run_and_record_by_record $CL::test_worked_examples \
  tests/test_runtime.py tests/test_foreign_key_join.py tests/test_dbt_unit_tests.py tests/test_value_types.py)"
ERRORS="tests/test_foreign_key_join_windowed.py tests/test_foreign_key_join_errors.py tests/test_dbt_contracts_and_grants.py $STJ::test_errors
  $DEDUP::test_errors_name_the_model_the_value_and_the_fix $DEDUP::test_a_run_that_another_run_of_the_model_overlaps_stops $STJ::test_a_run_that_another_run_of_the_model_overlaps_stops $CL::test_expired_tombstones_are_purged_and_stop_blocking_older_events
  $CL::test_errors_name_the_model_the_value_and_the_fix"
# Thrift mode only (two dbt processes on one cluster: three overlaps of a deduplicate model, ~3.5
# min; one of a stream_table_join model, ~2), in every tier.
AT_ONCE="$DEDUP::test_two_runs_at_the_same_time_append_each_record_once $STJ::test_two_runs_on_the_same_versions_emit_each_record_once"
THRIFT_TIERS=(
  "215|every test|"
  "150|the integration project, the operators' worked examples and error suites|$(echo $WORKED $ERRORS $AT_ONCE)"
  "100|the integration project and the operators' worked examples|$(echo $WORKED $AT_ONCE)"
  "0|the integration project and two runs at once (~10 min)|tests/test_runtime.py $AT_ONCE"
)
session_seconds=0
# minutes P: the minutes of a thrift tier of P% of session mode's time, plus 2 for the cluster.
minutes() { echo $(( (session_seconds * $1 / 100 + 59) / 60 + 2 )); }
# fits N: in the whole run, N more minutes must end in budget.
fits() { [ "$SECONDS" -le $(( budget - $1 * 60 )) ]; }
# Either mode: pytest workers handed whole xdist_groups; each lists its 25 longest tests
# (--durations), the figures THRIFT_TIERS and LONGEST_FIRST are set from. A test that hangs ends
# its worker and runs once more (tests/hang_watchdog.py); a second hang in a run ends it.
pytest_workers() { python -m pytest -n "$1" --dist loadgroup --max-worker-restart 1 --durations=25 "${@:2}"; }
# session_mode ARGS: two pytest workers, each with a Spark session of its own (one kept ~1.65 of
# the 2 cores busy: a run of a single model leaves one core mostly idle).
session_mode() {
  echo "tests: session mode (after $((SECONDS / 60)) min)" >&2
  local start=$SECONDS
  INCREMENTAL_JOINS_TEST_MODE=session pytest_workers "${INCREMENTAL_JOINS_SESSION_WORKERS:-2}" "$@" || status=$?
  session_seconds=$(( session_seconds + SECONDS - start ))
}
# thrift_tier (CI's run): the largest tier that ends in time (the last one always), its tests in
# $thrift_tests and its percentage in $thrift_percent.
thrift_tier() {
  local tier what tests need estimate
  for tier in "${THRIFT_TIERS[@]}"; do
    IFS='|' read -r thrift_percent what tests <<< "$tier"
    need=$(minutes "$thrift_percent")
    estimate=$([ "$thrift_percent" = 0 ] || echo " (~$need min: $thrift_percent% of session mode's $((session_seconds / 60)))")
    if [ "$thrift_percent" = 0 ] || fits "$need"; then
      thrift_tests="$tests"
      echo "tests: thrift mode runs $what$estimate" >&2
      return
    fi
    echo "tests: thrift mode: too late for $what$estimate: session mode ended after $((SECONDS / 60)) min, CI stops at ${INCREMENTAL_JOINS_CI_MINUTES:-90}" >&2
  done
}
# thrift_mode ARGS: the local cluster (stopped after pytest, and by the trap should the script
# itself be stopped) and two pytest workers against it: one kept only ~1.3 of the 2 cores busy.
thrift_mode() {
  echo "tests: thrift mode (after $((SECONDS / 60)) min)" >&2
  export INCREMENTAL_JOINS_HOME="$IJ_ROOT/.spark/tests-thrift"
  rm -rf "$INCREMENTAL_JOINS_HOME"
  trap 'python -m incremental_joins.cluster stop >&2' EXIT
  read -r INCREMENTAL_JOINS_THRIFT_PORT INCREMENTAL_JOINS_MASTER_PORT < <(python -c \
    'from incremental_joins.cluster import free_port; print(free_port(), free_port())')
  export INCREMENTAL_JOINS_THRIFT_PORT INCREMENTAL_JOINS_MASTER_PORT
  if python -m incremental_joins.cluster start >&2; then
    INCREMENTAL_JOINS_TEST_CLUSTER=shared INCREMENTAL_JOINS_TEST_MODE=thrift \
      pytest_workers "${INCREMENTAL_JOINS_THRIFT_WORKERS:-2}" "$@" || status=$?
  else
    status=1
  fi
  python -m incremental_joins.cluster stop >&2 || status=1
  trap - EXIT
}
# limited MINUTE MODE ARGS (CI's run): runs `MODE ARGS` (session_mode or thrift_mode) starting no
# test after minute MINUTE of the whole run; the ids of the tests it did not start for that (in
# thrift mode, only of those session mode left to it) in $not_run_ids; all ARGS if MINUTE is past.
limited() {
  local minute=$1 file; shift
  if [ "$SECONDS" -ge $(( minute * 60 )) ]; then
    not_run_ids=("${@:2}")
    echo "tests: ${1%_mode} mode not started: after $((SECONDS / 60)) min, its time ended at $minute" >&2
    return
  fi
  file=$(mktemp)
  INCREMENTAL_JOINS_UNTIL=$(( $(date +%s) + minute * 60 - SECONDS )) INCREMENTAL_JOINS_NOT_RUN="$file" "$@"
  mapfile -t not_run_ids < <(sort -u "$file")   # ids as written: `[...]` is no glob here
  rm -f "$file"
}
case "${INCREMENTAL_JOINS_TEST_MODE:-}" in
  session) session_mode "$@" ;;
  # Arguments, or INCREMENTAL_JOINS_THRIFT_TESTS, pick thrift mode's tests; else every test.
  thrift) thrift_mode "$@" ${INCREMENTAL_JOINS_THRIFT_TESTS:-} ;;
  ?*) echo "tests: INCREMENTAL_JOINS_TEST_MODE=$INCREMENTAL_JOINS_TEST_MODE: use session or thrift" >&2; exit 2 ;;
  *)
    if [ $# -gt 0 ]; then   # tests picked by hand: both modes run them
      session_mode "$@"
      if fits 0; then thrift_mode "$@"; fi
    else
      # No test starts in the budget's last 8 minutes, in either mode (tests/conftest.py; the last
      # are the shortest: longest first): a machine slower than the estimates still ends inside
      # CI's time and lists what it did not run. Nor does thrift mode start (its cluster takes ~1
      # min) with less than 2 minutes to go before that.
      last_start=8 never_run=()
      last_minute=$(( budget / 60 - last_start ))
      INCREMENTAL_JOINS_THRIFT_TAKES="$WORKED" limited $last_minute session_mode
      never_run+=("${not_run_ids[@]}")
      thrift_tier
      if [ "$thrift_percent" = 0 ]; then
        echo "tests: session mode runs the operators' worked examples and the integration project itself, too late for thrift mode" >&2
        limited $last_minute session_mode $WORKED
        never_run+=("${not_run_ids[@]}")
      fi
      if fits $(( last_start + 2 )); then
        INCREMENTAL_JOINS_THRIFT_TAKES="$([ "$thrift_percent" = 0 ] || echo $WORKED)" \
          limited $last_minute thrift_mode $thrift_tests
        if [ ${#not_run_ids[@]} -gt 0 ]; then
          echo "tests: thrift mode had no time left for ${#not_run_ids[@]} of the tests session mode left to it; session mode runs them" >&2
          # in the 10 minutes the budget keeps to spare, but for the last 5
          limited $(( ${INCREMENTAL_JOINS_CI_MINUTES:-90} - 5 )) session_mode "${not_run_ids[@]}"
          never_run+=("${not_run_ids[@]}")
        fi
      else
        echo "tests: THRIFT MODE NOT RUN: session mode ended after $((SECONDS / 60)) min, too late to finish within ${INCREMENTAL_JOINS_CI_MINUTES:-90} min; run it alone with INCREMENTAL_JOINS_TEST_MODE=thrift bash tests/run.sh" >&2
      fi
      if [ ${#never_run[@]} -gt 0 ]; then
        echo "tests: NOT RUN in either mode, too late for CI's ${INCREMENTAL_JOINS_CI_MINUTES:-90} min on this machine: ${#never_run[@]} (run them with INCREMENTAL_JOINS_TEST_MODE=session bash tests/run.sh followed by these):" >&2
        printf 'tests:   %s\n' "${never_run[@]}" >&2
      fi
    fi ;;
esac
echo "tests: done after $((SECONDS / 60)) min" >&2
exit $status
