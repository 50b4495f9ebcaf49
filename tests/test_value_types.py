"""Values Spark cannot compare — maps and variants, also inside a struct — through every operator.
Spark refuses `=`, `<=>` and EXCEPT on them (an analysis error), which an operator needs to write
an output change-minimally and to diff two versions of an input without a Change Data Feed; they
are compared by their JSON text instead. Worked by hand: two runs, a run whose input changes
change no value, the package's equals_full_recompute test, then --full-refresh."""

from __future__ import annotations

from fk_join_harness import error_of, newest_version, sources_yml

FK = """
    {{{{ config(materialized='foreign_key_join', join_type='left', left_key='oid', right_key='cid', foreign_key='cid',
                full_recompute_above={threshold}) }}}}
    select {{{{ incremental_joins.output_key() }}}}, l.tags, r.attrs, r.doc, r.info
    from {{{{ incremental_joins.join(source('t', 'orders'), {right}) }}}}
"""
FILES = {
    "models/sources.yml": sources_yml("orders", "customers", "cdc", "events", "prices"),
    "models/tests.yml": """
        version: 2
        models:
          - {name: fk_cdf, data_tests: [incremental_joins.equals_full_recompute]}
          - {name: fk_diff, data_tests: [incremental_joins.equals_full_recompute]}
          - {name: fk_fallback, data_tests: [incremental_joins.equals_full_recompute]}
          - {name: current, data_tests: [incremental_joins.equals_full_recompute]}
    """,
    # A dbt `table` model is re-created each run: fk_diff reads its changes by diffing versions.
    "models/customers_copy.sql": "{{ config(materialized='table') }} select * from {{ source('t', 'customers') }}",
    "models/fk_cdf.sql": FK.format(threshold=10, right="source('t', 'customers')"),
    "models/fk_diff.sql": FK.format(threshold=10, right="ref('customers_copy')"),
    "models/fk_fallback.sql": FK.format(threshold=0, right="source('t', 'customers')"),
    "models/current.sql": """
        {{ config(materialized='changelog_table', key='id', sequence='seq', operation='op') }}
        select * from {{ incremental_joins.stream(source('t', 'cdc')) }}
    """,
    "models/first_events.sql": """
        {{ config(materialized='deduplicate', key='cid', interval='10 seconds', event_time='ts') }}
        select * from {{ incremental_joins.stream(source('t', 'events')) }}
    """,
    "models/priced_events.sql": """
        {{ config(materialized='stream_table_join', join_type='left', key='cid', event_time='ts', table_time='ts',
                  history_retention='1 hour', grace_period='10 seconds') }}
        select s.off, s.payload, t.attrs, t.doc
        from {{ incremental_joins.as_of_join(source('t', 'events'), source('t', 'prices')) }}
    """,
}
FK_MODELS = ("fk_cdf", "fk_diff", "fk_fallback")
# Each output as text: maps, structs and variants by to_json, rows by their first column.
SHOW = {**{m: "oid, to_json(attrs), to_json(doc), to_json(info)" for m in FK_MODELS},
        "current": "id, seq, to_json(attrs), to_json(doc)",
        "first_events": "off",
        "priced_events": "off, to_json(payload), to_json(attrs), to_json(doc)"}


def outputs(spark, schema):
    return {m: [tuple(r) for r in spark.sql(f"select {cols} from {schema}.{m} order by 1").collect()] for m, cols in SHOW.items()}


def test_maps_and_variants_pass_through_every_operator(scratch_project, spark):
    project = scratch_project(FILES)
    s = project.schema
    cdf, no_cdf = (f"tblproperties (delta.enableChangeDataFeed = {on})" for on in ("true", "false"))
    # The stream inputs and the price table without a Change Data Feed: read by diffing versions.
    for ddl in [f"orders (oid int, cid int, tags array<string>) using delta {cdf}",
                f"customers (cid int, attrs map<string,string>, doc variant, info struct<a:int, m:map<string,int>>) using delta {cdf}",
                f"cdc (id int, op string, seq int, attrs map<string,string>, doc variant) using delta {no_cdf}",
                f"events (off int, cid int, ts timestamp, payload map<string,int>, tag variant) using delta {no_cdf}",
                f"prices (cid int, ts timestamp, attrs map<string,string>, doc variant) using delta {no_cdf}"]:
        spark.sql(f"create table {s}.{ddl}")
    spark.sql(f"insert into {s}.orders values (1, 10, array('x')), (2, 20, array('y'))")
    spark.sql(f"""insert into {s}.customers select 10, map('k', 'v'), parse_json('{{"a": 1}}'), named_struct('a', 1, 'm', map('q', 1))""")
    spark.sql(f"insert into {s}.cdc select 1, 'c', 1, map('k', 'v'), parse_json('1') union all select 2, 'c', 1, map('k', 'w'), parse_json('2')")
    spark.sql(f"insert into {s}.events values (1, 10, timestamp'2026-01-01 00:00:00', map('a', 1), parse_json('1')), "
              f"(2, 10, timestamp'2026-01-01 00:00:05', map('a', 1), parse_json('1'))")
    spark.sql(f"insert into {s}.prices select 10, timestamp'2025-12-31 00:00:00', map('k', 'v'), parse_json('1')")
    project.invoke("run")

    # Customer 10's map and variant change, customer 20 arrives; key 1's change event moves its
    # map, key 2's repeats its values at a later sequence; three more events; a price at 00:15.
    spark.sql(f"""update {s}.customers set attrs = map('k', 'w'), doc = parse_json('{{"a": 2}}') where cid = 10""")
    spark.sql(f"insert into {s}.customers select 20, map('k', 'z'), parse_json('[1]'), null")
    spark.sql(f"insert into {s}.cdc select 1, 'u', 2, map('k', 'v2'), parse_json('1') union all select 2, 'u', 2, map('k', 'w'), parse_json('2')")
    spark.sql(f"insert into {s}.events values (3, 10, timestamp'2026-01-01 00:00:20', map('a', 1), parse_json('1')), "
              f"(4, 10, timestamp'2026-01-01 00:00:21', map('a', 2), parse_json('2')), (5, 10, timestamp'2026-01-01 00:00:40', map('a', 2), null)")
    spark.sql(f"insert into {s}.prices select 10, timestamp'2026-01-01 00:00:15', map('k', 'w'), parse_json('2')")
    project.invoke("run")
    fk_rows = [(1, '{"k":"w"}', '{"a":2}', '{"a":1,"m":{"q":1}}'), (2, '{"k":"z"}', '[1]', None)]
    expected = {
        **{m: fk_rows for m in FK_MODELS},
        "current": [(1, 2, '{"k":"v2"}', '1'), (2, 2, '{"k":"w"}', '2')],
        # 2@5 within 1@0's 10 s, 3@20 past it, 4@21 within 3's, 5@40 past it.
        "first_events": [(1,), (3,), (5,)],
        # Grace 10 s: stream time 40 releases the records up to 30 (5 waits), each priced as of its time.
        "priced_events": [(1, '{"a":1}', '{"k":"v"}', '1'), (2, '{"a":1}', '{"k":"v"}', '1'),
                          (3, '{"a":1}', '{"k":"w"}', '2'), (4, '{"a":2}', '{"k":"w"}', '2')],
    }
    assert outputs(spark, s) == expected

    # Customer 10 updated to the values it holds: no foreign_key_join output changes (no commit).
    before = {m: newest_version(spark, f"{s}.{m}") for m in FK_MODELS}
    spark.sql(f"update {s}.customers set attrs = map('k', 'w') where cid = 10")
    project.invoke("run", "--select", *FK_MODELS, "customers_copy")
    assert {m: newest_version(spark, f"{s}.{m}") for m in FK_MODELS} == before

    result = project.invoke("test", check=False)
    assert result.success, error_of(result)
    project.invoke("run", "--full-refresh")
    assert outputs(spark, s) == expected
