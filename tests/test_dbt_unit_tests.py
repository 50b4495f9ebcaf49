"""dbt unit tests (`unit_tests:` in a model's YAML, dbt >= 1.8) on operator models.

A unit test compiles the model's SQL for a node of its own, with the test's config instead of the
model's and each `ref` replaced by the given rows, and compares one select of it with the expected
rows. foreign_key_join and stream_table_join models give there what their first run over tables
holding those rows gives (SPEC §2, §4); deduplicate and changelog_table models refuse with the
reason. The expected rows are worked out by hand from SPEC; the same rows are built into real
tables and each model's first run must give the same expected rows.
"""

from __future__ import annotations

import json
from datetime import datetime

T = "2026-11-01 09:{:02d}:00".format

# Input rows (column: type), each input a table model, so that the first runs read them too.
INPUTS = {
    "orders": ({"order_id": "bigint", "customer_id": "bigint", "amount": "double"},
               [(1, 10, 5.0), (2, 99, 7.0), (3, None, 9.0)]),
    "customers": ({"customer_id": "bigint", "name": "string"}, [(10, "Ada"), (11, "Bob")]),
    # Product 1 priced from 09:00, product 2 from 09:30; product 3 deleted.
    "prices": ({"product_id": "bigint", "price": "double", "valid_from": "timestamp", "deleted": "boolean"},
               [(1, 10.0, T(0), False), (2, 20.0, T(30), False), (3, 30.0, "2026-11-01 08:00:00", True)]),
    # With a grace period of 10 minutes, stream time ends at 09:40 (purchase 6): purchases after
    # 09:30 stay buffered. The unnumbered one has a null value (every column but the key and the
    # event time) and is dropped; purchase 4's value is not null (its id is there).
    "purchases": ({"purchase_id": "bigint", "product_id": "bigint", "purchased_at": "timestamp", "qty": "int"},
                  [(1, 1, T(10), 1), (2, 2, T(20), 1), (3, 3, T(15), 1), (4, 1, T(5), None), (None, 1, T(12), None),
                   (6, 4, T(40), 1), (7, 1, T(30), 2), (8, None, T(0), 1)]),
}

MODELS = {
    # Operator keys under meta, as on Databricks: a unit test reads them there too.
    "orders_enriched": ("""
        {{ config(materialized='foreign_key_join', join_type='left',
                  meta={'left_key': 'order_id', 'right_key': 'customer_id', 'foreign_key': 'customer_id'}) }}
        select {{ incremental_joins.output_key() }}, l.amount, r.name as customer_name
        from {{ incremental_joins.join(ref('orders'), ref('customers')) }}
        """,
        [{"order_id": 1, "amount": 5.0, "customer_name": "Ada"},
         {"order_id": 2, "amount": 7.0, "customer_name": None},
         {"order_id": 3, "amount": 9.0, "customer_name": None}]),
    "customers_orders": ("""
        {{ config(materialized='foreign_key_join', left_key='order_id', right_key='customer_id',
                  foreign_key='customer_id', join_type='outer', output_key='combined') }}
        select {{ incremental_joins.output_key() }}, l.amount, r.name as customer_name
        from {{ incremental_joins.join(ref('orders'), ref('customers')) }}
        """,
        [{"customer_id": 10, "order_id": 1, "amount": 5.0, "customer_name": "Ada"},
         {"customer_id": 99, "order_id": 2, "amount": 7.0, "customer_name": None},
         {"customer_id": None, "order_id": 3, "amount": 9.0, "customer_name": None},
         {"customer_id": 11, "order_id": None, "amount": None, "customer_name": "Bob"}]),
    # As of each purchase's time: purchase 2 (09:20) precedes product 2's price (09:30); product 3
    # is deleted; purchase 8 has no key (a left join keeps it); purchase 6 waits in the buffer.
    "priced": ("""
        {{ config(materialized='stream_table_join', key='product_id', event_time='purchased_at',
                  table_time='valid_from', table_deleted='deleted', history_retention='1 day',
                  grace_period='10 minutes', join_type='left') }}
        select s.purchase_id, s.product_id, s.purchased_at, t.price
        from {{ incremental_joins.as_of_join(ref('purchases'), ref('prices')) }}
        """,
        [{"purchase_id": 1, "product_id": 1, "purchased_at": T(10), "price": 10.0},
         {"purchase_id": 2, "product_id": 2, "purchased_at": T(20), "price": None},
         {"purchase_id": 3, "product_id": 3, "purchased_at": T(15), "price": None},
         {"purchase_id": 4, "product_id": 1, "purchased_at": T(5), "price": 10.0},
         {"purchase_id": 7, "product_id": 1, "purchased_at": T(30), "price": 10.0},
         {"purchase_id": 8, "product_id": None, "purchased_at": T(0), "price": None}]),
    # Unversioned, inner, no grace: each purchase with its product's row whatever its time.
    "priced_now": ("""
        {{ config(materialized='stream_table_join', key='product_id', event_time='purchased_at',
                  table_deleted='deleted') }}
        select s.purchase_id, s.product_id, t.price
        from {{ incremental_joins.as_of_join(ref('purchases'), ref('prices')) }}
        """,
        [{"purchase_id": 1, "product_id": 1, "price": 10.0},
         {"purchase_id": 2, "product_id": 2, "price": 20.0},
         {"purchase_id": 4, "product_id": 1, "price": 10.0},
         {"purchase_id": 7, "product_id": 1, "price": 10.0}]),
}

DEDUP_MODEL = """
{{ config(materialized='deduplicate', key='product_id', interval='1 hour', event_time='purchased_at',
          arrival_order='purchase_id') }}
select * from {{ incremental_joins.stream(ref('purchases')) }}
"""


def literal(value, sql_type: str) -> str:
    return f"cast({'null' if value is None else repr(value) if not isinstance(value, bool) else str(value).lower()} as {sql_type})"


def input_sql(columns: dict[str, str], rows: list[tuple]) -> str:
    """The rows as a table model (literals cast to the column types)."""
    return "{{ config(materialized='table') }}\n" + "\nunion all\n".join(
        "select " + ", ".join(f"{literal(v, t)} as {c}" for v, (c, t) in zip(row, columns.items())) for row in rows)


def given(*names: str) -> list[dict]:
    return [{"input": f"ref('{n}')", "rows": [dict(zip(INPUTS[n][0], row)) for row in INPUTS[n][1]]} for n in names]


def unit_tests_yml() -> str:
    """YAML is a superset of JSON: the unit tests written as JSON."""
    inputs = {"orders_enriched": ("orders", "customers"), "customers_orders": ("orders", "customers"),
              "priced": ("purchases", "prices"), "priced_now": ("purchases", "prices")}
    tests = [{"name": f"{model}_unit", "model": model, "given": given(*inputs[model]), "expect": {"rows": expected}}
             for model, (_, expected) in MODELS.items()]
    wrong = [dict(r, customer_name="Ada") if r["order_id"] == 2 else r for r in MODELS["orders_enriched"][1]]
    tests.append({"name": "wrong_expectation_fails", "model": "orders_enriched", "given": given("orders", "customers"),
                  "expect": {"rows": wrong}})
    tests.append({"name": "deduplicate_refuses", "model": "first_purchases", "given": given("purchases"),
                  "expect": {"rows": [dict(zip(INPUTS["purchases"][0], INPUTS["purchases"][1][0]))]}})
    return json.dumps({"version": 2, "unit_tests": tests}, indent=1)


def normalized(row: dict) -> tuple:
    return tuple(sorted((k, v.strftime("%Y-%m-%d %H:%M:%S") if isinstance(v, datetime) else v) for k, v in row.items()))


def test_operator_models_under_dbt_unit_tests(scratch_project, spark):
    files = {f"models/{name}.sql": input_sql(*spec) for name, spec in INPUTS.items()}
    files.update({f"models/{name}.sql": body for name, (body, _) in MODELS.items()})
    files["models/first_purchases.sql"] = DEDUP_MODEL
    files["models/unit_tests.yml"] = unit_tests_yml()
    project = scratch_project(files)
    project.invoke("run", "--quiet", "--select", " ".join(INPUTS))
    result = project.invoke("test", "--select", "test_type:unit", check=False)
    outcomes = {r.node.name: (str(r.status), r.message or "") for r in result.result.results
                if r.node.resource_type == "unit_test"}

    # foreign_key_join and stream_table_join: the hand-written rows pass; a wrong one fails.
    assert {name: status for name, (status, _) in outcomes.items() if name != "deduplicate_refuses"} == {
        **{f"{model}_unit": "pass" for model in MODELS}, "wrong_expectation_fails": "fail"}, outcomes
    # deduplicate: refused, naming the test, the model and what to do instead.
    status, message = outcomes["deduplicate_refuses"]
    assert status == "error", outcomes
    assert "a unit test of first_purchases" in message
    assert "fold over its stream in arrival order" in message
    assert "incremental_joins.equal_rowsets" in message

    # The models' first runs over the same rows give the same expected rows.
    project.invoke("run", "--quiet", "--select", " ".join(MODELS))
    for model, (_, expected) in MODELS.items():
        built = [r.asDict() for r in spark.table(f"{project.schema}.{model}").collect()]
        assert sorted(map(normalized, built), key=repr) == sorted(map(normalized, expected), key=repr), model
