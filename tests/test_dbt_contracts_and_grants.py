"""dbt model contracts (`contract: {enforced: true}`, columns and constraints in YAML) on operator
models: before a run writes or pins anything, the rows it would write must have exactly the
contract's columns and data types, and break none of its not_null and check constraints; else the
run fails naming the model, the column, the constraint and a sample row, and nothing is written —
so a run after the data is fixed reads the fixed data (no version was pinned). And dbt's `grants`
config: applied to the output after every run, as dbt's `table` applies it. And dbt's table
configs (`location_root`, `tblproperties`, `persist_docs`, `file_format`), applied to the tables a
model creates as dbt-spark's `table` applies them."""

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


# dbt's table configs, as dbt-spark's `table` applies them when it creates a table: every table an
# operator model creates (output, state tables, highwater) at `<location_root>/<its name>`; the
# output with the `tblproperties` config beside its own, the model's description as its comment.
def table_configs_yml(root: str, enriched_extra: str = "") -> str:
    others = "\n".join(f"  - {{name: {m}, config: {{location_root: '{root}'}}}}" for m in MODELS if m != "enriched")
    return f"""
version: 2
models:
  - name: enriched
    description: "Orders with the name of their customer"
    config:
      location_root: '{root}'
      tblproperties: {{delta.logRetentionDuration: 'interval 60 days', owner_team: analytics, delta.enableDeletionVectors: false}}
      persist_docs: {{relation: true, columns: true}}{enriched_extra}
    columns:
      - {{name: customer_name, description: "the customer's name as of the run"}}
{others}
"""


def test_location_root_tblproperties_and_persist_docs_reach_every_table_a_model_creates(scratch_project, spark, tmp_path):
    root, moved = tmp_path / "lake", tmp_path / "lake2"
    files = {f"models/{name}.sql": body for name, body in MODELS.items()}
    files["models/sources.yml"] = sources_yml("orders", "customers", "cdc")
    files["models/configs.yml"] = table_configs_yml(str(root))
    project = scratch_project(files)
    s = project.schema
    spark.sql(f"create table {s}.orders (order_id bigint, customer_id bigint, amount double, updated_at timestamp) using delta")
    spark.sql(f"create table {s}.customers (customer_id bigint, name string) using delta")
    spark.sql(f"create table {s}.cdc (customer_id bigint, op string, lsn bigint, name string) using delta")
    # Ten orders of five customers, so that the changes below reach few enough orders for an
    # incremental run (below full_recompute_above=0.5).
    names = {10: "Ada", 11: "Bob", 12: "Cy", 13: "Dee", 14: "Eve"}
    orders = {i: (10 + i % 5, float(i)) for i in range(1, 11)}

    def add_order(order_id: int, customer_id: int) -> None:
        orders[order_id] = (customer_id, float(order_id))
        spark.sql(f"insert into {s}.orders values ({order_id}, {customer_id}, {float(order_id)}, timestamp'2026-11-01 09:00:00' + make_interval(0, 0, 0, 0, 0, {order_id}))")

    def rename(customer_id: int, name: str) -> None:
        names[customer_id] = name
        spark.sql(f"update {s}.customers set name = '{name}' where customer_id = {customer_id}")

    def expected() -> set[tuple]:
        return {(o, amount, names[c]) for o, (c, amount) in orders.items()}

    spark.sql(f"insert into {s}.orders values " + ", ".join(f"({o}, {c}, {a}, timestamp'2026-11-01 09:00:00' + make_interval(0, 0, 0, 0, 0, {o}))" for o, (c, a) in orders.items()))
    spark.sql(f"insert into {s}.customers values " + ", ".join(f"({c}, '{n}')" for c, n in names.items()))
    spark.sql(f"insert into {s}.cdc values (10, 'c', 1, 'Ada')")

    def location(table: str) -> str:
        return spark.sql(f"describe detail {s}.{table}").first().location

    def tables_of(model: str) -> list[str]:
        return sorted(r.tableName for r in spark.sql(f"show tables in {s} like '{model}__ij_*'").collect() if not r.isTemporary)

    def placed(model: str, where) -> dict[str, str]:
        """Each of the model's tables whose location is not `<where>/<its name>`."""
        return {t: location(t) for t in [model, *tables_of(model)] if location(t) != f"file:{where}/{t}"}

    def rows(model: str) -> set[tuple]:
        return {tuple(r) for r in spark.table(f"{s}.{model}").collect()}

    def last_mode(model: str) -> str:
        return spark.sql(f"select mode from {s}.incremental_joins_run_log where model = '{model}' order by finished_at desc limit 1").first().mode

    project.invoke("run")
    for model in MODELS:
        assert tables_of(model), model  # the highwater at least
        assert placed(model, root) == {}, model
    assert set(tables_of("enriched")) == {"enriched__ij_highwater", "enriched__ij_index"}
    # The run log is the schema's, created by the package's on-run-start: where the schema keeps tables.
    assert not location("incremental_joins_run_log").startswith(f"file:{root}")
    assert rows("enriched") == expected()

    properties = {r.key: r.value for r in spark.sql(f"show tblproperties {s}.enriched").collect()}
    assert properties["delta.logRetentionDuration"] == "interval 60 days" and properties["owner_team"] == "analytics"
    assert properties["delta.enableDeletionVectors"] == "false"  # the config's, not the package's default
    assert properties["delta.enableChangeDataFeed"] == "true" and "incremental_joins.recompute_sql" in properties
    detail = {r.col_name: r.data_type for r in spark.sql(f"describe table extended {s}.enriched").collect()}
    assert detail["Comment"] == "Orders with the name of their customer"
    assert {r.col_name: r.comment for r in spark.sql(f"describe table {s}.enriched").collect()}["customer_name"] == "the customer's name as of the run"
    # The state tables keep the package's properties: the config is the output's.
    assert "owner_team" not in {r.key for r in spark.sql(f"show tblproperties {s}.enriched__ij_index").collect()}

    # An incremental run writes into the tables where they are.
    rename(14, "Eve L.")
    add_order(11, 13)
    spark.sql(f"insert into {s}.cdc values (11, 'c', 2, 'Bob')")
    project.invoke("run")
    assert last_mode("enriched") == "incremental"
    assert rows("enriched") == expected()
    assert rows("current_customers") == {(10, 1, "Ada"), (11, 2, "Bob")}
    for model in MODELS:
        assert placed(model, root) == {}, model

    # Another location_root: a run writes where the tables are; --full-refresh moves them there
    # (Delta replaces a table only at its own location) and the runs after it are incremental.
    (project.path / "models" / "configs.yml").write_text(table_configs_yml(str(moved)))
    add_order(12, 10)
    project.invoke("run", "--select", "enriched")
    assert last_mode("enriched") == "incremental" and placed("enriched", root) == {}
    project.invoke("run", "--select", "enriched", "current_customers", "--full-refresh")
    for model in ("enriched", "current_customers"):
        assert placed(model, moved) == {}, model
    assert set(tables_of("enriched")) == {"enriched__ij_highwater", "enriched__ij_index"}
    assert rows("enriched") == expected()
    assert {r.key: r.value for r in spark.sql(f"show tblproperties {s}.enriched").collect()}["owner_team"] == "analytics"
    rename(12, "Cyrus")
    spark.sql(f"insert into {s}.cdc values (10, 'u', 3, 'Ada L.')")
    project.invoke("run", "--select", "enriched", "current_customers")
    assert last_mode("enriched") == "incremental" and last_mode("current_customers") == "incremental"
    assert rows("enriched") == expected()
    assert rows("current_customers") == {(10, 3, "Ada L."), (11, 2, "Bob")}

    # Configs the package cannot honour fail before anything is read or written.
    version = spark.sql(f"describe history {s}.enriched limit 1").first().version
    add_order(13, 10)
    (project.path / "models" / "configs.yml").write_text(table_configs_yml(str(moved), "\n      file_format: parquet"))
    message = error_of(project.invoke("run", "--select", "enriched", check=False))
    assert ("enriched: config 'file_format' (parquet) is not delta: a foreign_key_join model writes its output and "
            "state as Delta tables") in message, message
    assert "set file_format='delta' for this model" in message
    (project.path / "models" / "configs.yml").write_text(table_configs_yml(str(moved)).replace(
        "owner_team: analytics", "owner_team: analytics, delta.enableChangeDataFeed: false"))
    message = error_of(project.invoke("run", "--select", "enriched", check=False))
    assert ("enriched: config 'tblproperties' (delta.enableChangeDataFeed: False) turns off the output's Change Data "
            "Feed") in message, message
    assert spark.sql(f"describe history {s}.enriched limit 1").first().version == version
    assert 13 not in {r[0] for r in rows("enriched")}


def test_a_model_switched_to_an_operator_replaces_a_view_and_asks_before_replacing_a_parquet_table(scratch_project, spark):
    """A model materialized as a `view` (or made one by `dbt clone`) or as a parquet `table` before
    it became an operator model: the view is dropped and the output built; the table holds rows,
    so the run asks for --full-refresh first, writing nothing."""
    before = {
        "first_orders": "{{ config(materialized='view') }}\nselect * from {{ source('t', 'orders') }}\n",
        "enriched": "{{ config(materialized='table', file_format='parquet') }}\nselect order_id, amount from {{ source('t', 'orders') }}\n",
    }
    project = scratch_project({**{f"models/{m}.sql": sql for m, sql in before.items()},
                               "models/sources.yml": sources_yml("orders", "customers")})
    s = project.schema
    spark.sql(f"create table {s}.orders (order_id bigint, customer_id bigint, amount double, updated_at timestamp) using delta")
    spark.sql(f"create table {s}.customers (customer_id bigint, name string) using delta")
    spark.sql(f"insert into {s}.orders values " + ", ".join(
        f"({o}, {10 + o % 3}, {float(o)}, timestamp'2026-11-01 09:00:00' + make_interval(0, 0, 0, 0, {o}))" for o in range(1, 7)))
    spark.sql(f"insert into {s}.customers values (10, 'Ada'), (11, 'Bob'), (12, 'Cy')")
    project.invoke("run")

    def kind(model: str) -> tuple[str, str]:
        detail = {r.col_name: r.data_type for r in spark.sql(f"describe table extended {s}.{model}").collect()}
        return detail["Type"], detail.get("Provider", "").lower()

    assert kind("first_orders")[0] == "VIEW" and kind("enriched") == ("MANAGED", "parquet")
    for model in before:
        (project.path / "models" / f"{model}.sql").write_text(textwrap.dedent(MODELS[model]))

    # The view: dropped, the output built whole. Each customer's orders are hours apart, within the
    # model's 1 day: its first order only.
    project.invoke("run", "--select", "first_orders")
    assert kind("first_orders") == ("MANAGED", "delta")
    assert sorted(r.order_id for r in spark.table(f"{s}.first_orders").collect()) == [1, 2, 3]
    # The parquet table: refused, left as it is.
    message = error_of(project.invoke("run", "--select", "enriched", check=False))
    assert (f"enriched: its output {s}.enriched is a table that is not Delta (the model was materialized otherwise "
            "before?), which a foreign_key_join model cannot write into or read the history of. Run it once with "
            "--full-refresh") in message, message
    assert kind("enriched") == ("MANAGED", "parquet") and len(spark.table(f"{s}.enriched").collect()) == 6
    assert not spark.catalog.tableExists(f"{s}.enriched__ij_highwater")
    # --full-refresh builds it; the run after a change is incremental.
    project.invoke("run", "--select", "enriched", "--full-refresh")
    assert kind("enriched") == ("MANAGED", "delta")
    spark.sql(f"update {s}.customers set name = 'Bea' where customer_id = 11")
    project.invoke("run", "--select", "enriched")
    names = {10: "Ada", 11: "Bea", 12: "Cy"}
    assert {tuple(r) for r in spark.table(f"{s}.enriched").collect()} == {(o, float(o), names[10 + o % 3]) for o in range(1, 7)}
    assert spark.sql(f"select mode from {s}.incremental_joins_run_log where model = 'enriched' order by finished_at desc limit 1").first().mode == "incremental"
