"""dbt model contracts (`contract: {enforced: true}`, columns and constraints in YAML) on operator
models: before a run writes or pins anything, the rows it would write must have exactly the
contract's columns and data types, and break none of its not_null and check constraints; else the
run fails naming the model, the column, the constraint and a sample row, and nothing is written —
so a run after the data is fixed reads the fixed data (no version was pinned). And dbt's `grants`
config: applied to the output after every run, as dbt's `table` applies it."""

from __future__ import annotations

import textwrap

from fk_join_harness import error_of, sources_yml

MODELS = {
    "enriched": """
        {{ config(materialized='foreign_key_join', left_key='order_id', right_key='customer_id',
                  foreign_key='customer_id', join_type='left') }}
        select {{ incremental_joins.output_key() }}, l.amount, r.name as customer_name
        from {{ incremental_joins.join(source('t', 'orders'), source('t', 'customers')) }}
        """,
    "current_customers": """
        {{ config(materialized='changelog_table', key='customer_id', sequence='lsn') }}
        select * from {{ incremental_joins.stream(source('t', 'cdc')) }}
        """,
    "first_orders": """
        {{ config(materialized='deduplicate', key='customer_id', interval='1 day', event_time='updated_at',
                  arrival_order='order_id') }}
        select * from {{ incremental_joins.stream(source('t', 'orders')) }}
        """,
    "orders_named": """
        {{ config(materialized='stream_table_join', key='customer_id', event_time='updated_at', join_type='left') }}
        select s.order_id, t.name as customer_name
        from {{ incremental_joins.as_of_join(source('t', 'orders'), source('t', 'customers')) }}
        """,
}

NOT_NULL = "[{type: not_null, warn_unsupported: false}]"


def contracts_yml(name_type: str = "string") -> str:
    """Each model's contract; `long` and `integer` are Spark's names for bigint and int too."""
    return f"""
        version: 2
        models:
          - name: enriched
            config: {{contract: {{enforced: true}}}}
            constraints: [{{type: check, name: amount_not_negative, expression: "amount >= 0", warn_unsupported: false}}]
            columns:
              - {{name: order_id, data_type: bigint, constraints: {NOT_NULL}}}
              - {{name: amount, data_type: double}}
              - {{name: customer_name, data_type: string, constraints: {NOT_NULL}}}
          - name: current_customers
            config: {{contract: {{enforced: true}}}}
            columns:
              - {{name: customer_id, data_type: bigint}}
              - {{name: lsn, data_type: long}}
              - {{name: name, data_type: string, constraints: {NOT_NULL}}}
          - name: first_orders
            config: {{contract: {{enforced: true}}}}
            columns:
              - {{name: order_id, data_type: bigint}}
              - {{name: customer_id, data_type: bigint}}
              - {{name: amount, data_type: double, constraints: [{{type: check, expression: "amount < 1000", warn_unsupported: false}}]}}
              - {{name: updated_at, data_type: timestamp}}
              - {{name: _ij_source_version, data_type: bigint}}
          - name: orders_named
            config: {{contract: {{enforced: true}}}}
            columns:
              - {{name: order_id, data_type: bigint}}
              - {{name: customer_name, data_type: {name_type}}}
        """


def test_contracts_are_enforced_before_anything_is_written(scratch_project, spark):
    files = {f"models/{name}.sql": body for name, body in MODELS.items()}
    files["models/sources.yml"] = sources_yml("orders", "customers", "cdc")
    files["models/contracts.yml"] = contracts_yml()
    project = scratch_project(files)
    s = project.schema
    spark.sql(f"create table {s}.orders (order_id bigint, customer_id bigint, amount double, updated_at timestamp) using delta")
    spark.sql(f"create table {s}.customers (customer_id bigint, name string) using delta")
    spark.sql(f"create table {s}.cdc (customer_id bigint, op string, lsn bigint, name string) using delta")
    spark.sql(f"insert into {s}.orders values (1, 10, 5.0, timestamp'2026-11-01 09:00:00'), (2, 11, 7.0, timestamp'2026-11-01 09:05:00')")
    spark.sql(f"insert into {s}.customers values (10, 'Ada'), (11, 'Bob')")
    spark.sql(f"insert into {s}.cdc values (10, 'c', 1, 'Ada'), (11, 'c', 2, 'Bob')")

    def rows(model: str) -> set[tuple]:
        return {tuple(r) for r in spark.table(f"{s}.{model}").collect()}

    def version(model: str) -> int:
        return spark.sql(f"describe history {s}.{model} limit 1").first().version

    # Every operator's rows match their contract (long is bigint): all four build.
    project.invoke("run")
    assert rows("enriched") == {(1, 5.0, "Ada"), (2, 7.0, "Bob")}
    assert rows("current_customers") == {(10, 1, "Ada"), (11, 2, "Bob")}

    # A left-join row without its customer breaks enriched's not_null constraint on customer_name.
    spark.sql(f"insert into {s}.orders values (3, 99, 9.0, timestamp'2026-11-01 09:10:00')")
    before = version("enriched")
    message = error_of(project.invoke("run", "--select", "enriched", check=False))
    assert ("enriched: the rows this run would write break the not_null constraint on `customer_name` of the model's "
            "enforced contract (1 of them), e.g.") in message
    assert '"order_id":3' in message and "Nothing was written." in message, message
    assert version("enriched") == before and rows("enriched") == {(1, 5.0, "Ada"), (2, 7.0, "Bob")}
    # Fixed upstream, the next run reads the fix: the failed run pinned nothing.
    spark.sql(f"insert into {s}.customers values (99, 'Cy')")
    project.invoke("run", "--select", "enriched")
    assert rows("enriched") == {(1, 5.0, "Ada"), (2, 7.0, "Bob"), (3, 9.0, "Cy")}

    # The model's check constraint (named), and the other operators' constraints: a changelog
    # update with a null name, an order forwarded by the deduplication (customer 12's first; order
    # 4 is a duplicate of customer 10's order 1) above the column's check.
    spark.sql(f"insert into {s}.customers values (12, 'Dee')")
    spark.sql(f"insert into {s}.orders values (4, 10, -1.0, timestamp'2026-11-01 09:20:00'), (5, 12, 5000.0, timestamp'2026-11-01 09:25:00')")
    spark.sql(f"insert into {s}.cdc values (10, 'u', 3, null)")
    versions = {m: version(m) for m in ("enriched", "current_customers", "first_orders")}
    message = error_of(project.invoke("run", "--select", "enriched", "current_customers", "first_orders", check=False))
    assert "enriched: the rows this run would write break the check constraint amount_not_negative (amount >= 0) of" in message
    assert '"order_id":4' in message, message
    assert "current_customers: the rows this run would write break the not_null constraint on `name` of" in message
    assert "first_orders: the rows this run would write break the check constraint on `amount` (amount < 1000) of" in message
    assert '"amount":5000.0' in message, message
    assert {m: version(m) for m in versions} == versions
    assert rows("current_customers") == {(10, 1, "Ada"), (11, 2, "Bob")}

    # Data types: a declared type the select does not give fails, naming both types.
    (project.path / "models" / "contracts.yml").write_text(textwrap.dedent(contracts_yml(name_type="integer")))
    before = version("orders_named")
    message = error_of(project.invoke("run", "--select", "orders_named", check=False))
    assert ("orders_named: the model's contract is enforced, and the rows this run would write do not match it: "
            "`customer_name` is string, the contract says int.") in message
    assert "Nothing was written." in message
    assert version("orders_named") == before


# dbt's `grants` config. Open-source Spark has no GRANT, so the project stands in for the catalog:
# its overrides of dbt-spark's `show grants` and DCL macros keep the grants in a table.
GRANT_MACROS = """
{% macro spark__get_show_grant_sql(relation) %}
  select grantee as Principal, privilege as ActionType, 'TABLE' as ObjectType
  from {{ target.schema }}.granted where relation = '{{ relation }}'
{% endmacro %}

{% macro spark__call_dcl_statements(dcl_statement_list) %}
  {% for statement in dcl_statement_list %}
    {% set m = modules.re.match('(grant|revoke) (\\\\w+) on (\\\\S+) (?:to|from) `(\\\\w+)`', statement | trim) %}
    {% do run_query("insert into " ~ target.schema ~ ".dcl_log values ('" ~ m.group(1) ~ "', '" ~ m.group(2) ~ "', '" ~ m.group(3) ~ "', '" ~ m.group(4) ~ "')") %}
    {% if m.group(1) == 'grant' %}
      {% do run_query("insert into " ~ target.schema ~ ".granted values ('" ~ m.group(3) ~ "', '" ~ m.group(2) ~ "', '" ~ m.group(4) ~ "')") %}
    {% else %}
      {% do run_query("delete from " ~ target.schema ~ ".granted where relation = '" ~ m.group(3) ~ "' and grantee = '" ~ m.group(4) ~ "'") %}
    {% endif %}
  {% endfor %}
{% endmacro %}
"""


def test_grants_reach_the_output_and_follow_the_config(scratch_project, spark):
    def model(grantee: str) -> str:
        return MODELS["enriched"].replace("join_type='left'", f"join_type='left', grants={{'select': ['{grantee}']}}")

    project = scratch_project({"models/enriched.sql": model("analysts"), "models/sources.yml": sources_yml("orders", "customers"),
                               "macros/grants.sql": GRANT_MACROS})
    s = project.schema
    spark.sql(f"create table {s}.orders (order_id bigint, customer_id bigint, amount double, updated_at timestamp) using delta")
    spark.sql(f"create table {s}.customers (customer_id bigint, name string) using delta")
    spark.sql(f"insert into {s}.orders values (1, 10, 5.0, timestamp'2026-11-01 09:00:00')")
    spark.sql(f"insert into {s}.customers values (10, 'Ada')")
    spark.sql(f"create table {s}.granted (relation string, privilege string, grantee string) using delta")
    spark.sql(f"create table {s}.dcl_log (action string, privilege string, relation string, grantee string) using delta")

    def statements() -> list[tuple]:
        return sorted(tuple(r) for r in spark.table(f"{s}.dcl_log").collect())

    # The first run grants on the output only (not on the index, highwater or run log).
    project.invoke("run")
    output = f"{s}.enriched"
    assert statements() == [("grant", "select", output, "analysts")]
    # A run with changes finds the grant in place: no statement.
    spark.sql(f"insert into {s}.customers values (11, 'Bob')")
    project.invoke("run")
    assert statements() == [("grant", "select", output, "analysts")]
    # Another grantee in the config: the old grant is revoked, the new one given.
    (project.path / "models" / "enriched.sql").write_text(model("finance"))
    project.invoke("run")
    assert statements() == [("grant", "select", output, "analysts"), ("grant", "select", output, "finance"),
                            ("revoke", "select", output, "analysts")]
    assert [tuple(r) for r in spark.table(f"{s}.granted").collect()] == [(output, "select", "finance")]
