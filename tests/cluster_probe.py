"""Not collected by default (the name has no test_ prefix): tests/test_cluster.py runs it in a pytest
of its own, in thrift mode, to see the cluster fixture stop everything after a failing test."""

import json
import os

from incremental_joins.cluster import listening


def test_cluster_answers_then_this_test_fails(spark, cluster):
    [row] = spark.sql("select 1 + 1 as two").collect()
    [ansi] = spark.sql("set spark.sql.ansi.enabled").collect()
    running = cluster.processes()
    with open(os.environ["IJ_CLUSTER_PROBE_OUT"], "w") as out:
        json.dump({"two": row.two, "ansi": ansi[1], "processes": running, "listening": sorted(listening(list(running.values())))}, out)
    assert False, "deliberate failure: the cluster must still be stopped"
