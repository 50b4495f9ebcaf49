"""Columns however they are typed or spelled, through every operator. Worked by hand: two runs,
the package's equals_full_recompute test, then --full-refresh.

- Values Spark cannot compare — maps and variants, also inside a struct. Spark refuses `=`, `<=>`
  and EXCEPT on them (an analysis error), which an operator needs to write an output
  change-minimally and to diff two versions of an input without a Change Data Feed; they are
  compared by their JSON text instead. Also a run whose input changes change no value.
- Key, time and operation columns named in the config in another case than the tables spell
  them (`key='CID'` over a column `Cid`): Spark resolves column names ignoring case, and so must
  every operator. The same keys of types Delta cannot cluster a table by (binary, a struct, a
  boolean).
- CHAR(n) columns, on which Delta's MERGE fails: refused where they would reach one of an
  operator's MERGEs, passed through where they reach none."""

from __future__ import annotations

from fk_join_harness import error_of, newest_version, recompute_tests_yml, sources_yml

def stream_models(spell, priced: str) -> dict[str, str]:
    """changelog_table over `cdc`, deduplicate over `events` and stream_table_join of `events` with
    `prices`, their key, sequence, operation and time columns named by `spell` (e.g. str.upper);
    `priced`: the stream_table_join's select list."""
    cid, ts = spell("cid"), spell("ts")
    return {
        "models/current.sql": f"""
            {{{{ config(materialized='changelog_table', key='{spell("id")}', sequence='{spell("seq")}', operation='{spell("op")}') }}}}
            select * from {{{{ incremental_joins.stream(source('t', 'cdc')) }}}}
        """,
        "models/first_events.sql": f"""
            {{{{ config(materialized='deduplicate', key='{cid}', interval='10 seconds', event_time='{ts}') }}}}
            select * from {{{{ incremental_joins.stream(source('t', 'events')) }}}}
        """,
        "models/priced_events.sql": f"""
            {{{{ config(materialized='stream_table_join', join_type='left', key='{cid}', event_time='{ts}', table_time='{ts}',
                      history_retention='1 hour', grace_period='10 seconds') }}}}
            select {priced} from {{{{ incremental_joins.as_of_join(source('t', 'events'), source('t', 'prices')) }}}}
        """,
    }


FK = """
    {{{{ config(materialized='foreign_key_join', join_type='left', left_key='oid', right_key='cid', foreign_key='cid',
                full_recompute_above={threshold}) }}}}
    select {{{{ incremental_joins.output_key() }}}}, l.tags, r.attrs, r.doc, r.info
    from {{{{ incremental_joins.join(source('t', 'orders'), {right}) }}}}
"""
FILES = {
    "models/sources.yml": sources_yml("orders", "customers", "cdc", "events", "prices"),
    "models/tests.yml": recompute_tests_yml("fk_cdf", "fk_diff", "fk_fallback", "current"),
    # A dbt `table` model is re-created each run: fk_diff reads its changes by diffing versions.
    "models/customers_copy.sql": "{{ config(materialized='table') }} select * from {{ source('t', 'customers') }}",
    "models/fk_cdf.sql": FK.format(threshold=10, right="source('t', 'customers')"),
    "models/fk_diff.sql": FK.format(threshold=10, right="ref('customers_copy')"),
    "models/fk_fallback.sql": FK.format(threshold=0, right="source('t', 'customers')"),
    **stream_models(str.lower, "s.off, s.payload, t.attrs, t.doc"),
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


CASED = {
    "models/sources.yml": sources_yml("orders", "customers", "cdc", "dbz", "events", "prices"),
    "models/tests.yml": recompute_tests_yml("fk_inner", "fk_outer", "current", "current_dbz"),
    # The output key selected as the body spells it, not by output_key(). Both never fall back to
    # a full recompute (full_recompute_above), which would hide the incremental MERGE.
    "models/fk_inner.sql": """
        {{ config(materialized='foreign_key_join', left_key='OID', right_key='CID', foreign_key='custid', full_recompute_above=10) }}
        select l.Oid, l.CustId, l.Amount, r.Name from {{ incremental_joins.join(source('t', 'orders'), source('t', 'customers')) }}
    """,
    "models/fk_outer.sql": """
        {{ config(materialized='foreign_key_join', join_type='outer', output_key='combined', left_key='oid', right_key='CID', foreign_key='CUSTID',
                  full_recompute_above=10) }}
        select {{ incremental_joins.output_key() }}, l.amount, r.name
        from {{ incremental_joins.join(source('t', 'orders'), source('t', 'customers')) }}
    """,
    "models/current_dbz.sql": """
        {{ config(materialized='changelog_table', key='ID', sequence='lsn', operation='op', payload='after') }}
        select * from {{ incremental_joins.stream(source('t', 'dbz')) }}
    """,
    **stream_models(str.upper, "s.Off, t.Price"),
}


def test_keys_named_in_any_case_and_of_types_delta_cannot_cluster_by(scratch_project, spark):
    # Keys of types Delta refuses to cluster a table by: binary (a Kafka message key), a struct
    # (a composite key), a boolean. B(n): n as bytes; S(n): a struct holding n.
    def B(n):
        return f"cast('{n}' as binary)"

    def S(n):
        return f"named_struct('id', {n})"

    project = scratch_project(CASED)
    s = project.schema
    for ddl in ["orders (Oid binary, CustId struct<id:int>, Amount int)", "customers (Cid struct<id:int>, Name string)",
                "cdc (Id binary, Op string, Seq int, Val string)",
                "dbz (Lsn int, Op string, After struct<Id:boolean, Val:string>, Before struct<Id:boolean>)",
                "events (Off int, Cid binary, Ts timestamp)", "prices (Cid binary, Ts timestamp, Price int)"]:
        spark.sql(f"create table {s}.{ddl} using delta tblproperties (delta.enableChangeDataFeed = true)")
    spark.sql(f"insert into {s}.orders values ({B(1)}, {S(10)}, 5), ({B(2)}, {S(20)}, 6), ({B(3)}, {S(30)}, 7)")
    spark.sql(f"insert into {s}.customers values ({S(10)}, 'a'), ({S(20)}, 'b')")
    spark.sql(f"insert into {s}.cdc values ({B(1)}, 'c', 1, 'x'), ({B(2)}, 'c', 1, 'y')")
    spark.sql(f"insert into {s}.dbz select 1, 'c', named_struct('Id', true, 'Val', 'x'), null "
              f"union all select 2, 'c', named_struct('Id', false, 'Val', 'y'), null")
    spark.sql(f"insert into {s}.events values (1, {B(10)}, timestamp'2026-01-01 00:00:00'), (2, {B(10)}, timestamp'2026-01-01 00:00:05')")
    spark.sql(f"insert into {s}.prices values ({B(10)}, timestamp'2025-12-31 00:00:00', 7)")
    project.invoke("run")

    # Order 1 moves to customer 20, order 2 goes, customer 10 is renamed and 30 arrives; key 1
    # updated (and an older event of it arrives late), key 2 deleted (true and false in the
    # Debezium-shaped one); three more events; a price of customer 10 at 00:15.
    spark.sql(f"update {s}.orders set CustId = {S(20)} where Oid = {B(1)}")
    spark.sql(f"delete from {s}.orders where Oid = {B(2)}")
    spark.sql(f"update {s}.customers set Name = 'c' where Cid = {S(10)}")
    spark.sql(f"insert into {s}.customers values ({S(30)}, 'd')")
    spark.sql(f"insert into {s}.cdc values ({B(1)}, 'u', 2, 'z'), ({B(2)}, 'd', 2, null), ({B(1)}, 'u', 0, 'old')")
    spark.sql(f"insert into {s}.dbz select 3, 'u', named_struct('Id', true, 'Val', 'z'), named_struct('Id', true) "
              f"union all select 4, 'd', null, named_struct('Id', false)")
    spark.sql(f"insert into {s}.events values (3, {B(10)}, timestamp'2026-01-01 00:00:20'), (4, {B(10)}, timestamp'2026-01-01 00:00:21'), "
              f"(5, {B(20)}, timestamp'2026-01-01 00:00:22')")
    spark.sql(f"insert into {s}.prices values ({B(10)}, timestamp'2026-01-01 00:00:15', 8)")
    project.invoke("run")
    expected = {
        "fk_inner": {("1", 20, 5, "b"), ("3", 30, 7, "d")},
        # Customer 10 has no order left: an outer join keeps it with a null order key.
        "fk_outer": {(20, "1", 5, "b"), (30, "3", 7, "d"), (10, None, None, "c")},
        "current": {("1", 2, "z")},
        "current_dbz": {(True, 3, "z")},
        # 2@5 within 1@0's 10 s; 3@20 past it, 4@21 within 3's; 5 is customer 20's first.
        "first_events": {(1, "10"), (3, "10"), (5, "20")},
        # Stream time 22, grace 10 s: the records up to 00:12 are out, priced as of their times
        # (before the price of 00:15); 3, 4 and 5 wait.
        "priced_events": {(1, 7), (2, 7)},
    }
    shown = {"fk_inner": "cast(Oid as string), CustId.id, Amount, Name", "fk_outer": "CID.id, cast(OID as string), amount, name",
             "current": "cast(ID as string), Seq, Val", "current_dbz": "ID, lsn, Val", "first_events": "Off, cast(Cid as string)",
             "priced_events": "Off, Price"}

    def outputs():
        return {m: {tuple(r) for r in spark.sql(f"select {shown[m]} from {s}.{m}").collect()} for m in expected}

    assert outputs() == expected
    result = project.invoke("test", check=False)
    assert result.success, error_of(result)
    project.invoke("run", "--full-refresh")
    assert outputs() == expected


CHAR_FILES = {
    "models/sources.yml": sources_yml("orders", "customers", "cdc", "events", "prices"),
    "models/fk.sql": """
        {{ config(materialized='foreign_key_join', join_type='left', left_key='oid', right_key='cid', foreign_key='cid') }}
        select {{ incremental_joins.output_key() }}, l.tag, r.name from {{ incremental_joins.join(source('t', 'orders'), source('t', 'customers')) }}
    """,
    "models/current.sql": """
        {{ config(materialized='changelog_table', key='id', sequence='seq', operation='op') }}
        select * from {{ incremental_joins.stream(source('t', 'cdc')) }}
    """,
    # A grace period buffers the stream's records (MERGEd); without one, they are appended only.
    "models/priced_events.sql": """
        {{ config(materialized='stream_table_join', join_type='left', key='cid', event_time='ts', table_time='ts', history_retention='1 hour',
                  grace_period='10 seconds') }}
        select s.off, t.price from {{ incremental_joins.as_of_join(source('t', 'events'), source('t', 'prices')) }}
    """,
    "models/named_events.sql": """
        {{ config(materialized='stream_table_join', join_type='left', key='cid', event_time='ts') }}
        select s.off, s.tag, t.name from {{ incremental_joins.as_of_join(source('t', 'events'), ref('customers_cast')) }}
    """,
    # Both MERGE their store every run (replace_state_below=0). first_events' store keeps its key, a
    # string; first_tags' would keep a CHAR key.
    "models/first_events.sql": """
        {{ config(materialized='deduplicate', key='cid', interval='10 seconds', event_time='ts', replace_state_below=0) }}
        select * from {{ incremental_joins.stream(source('t', 'events')) }}
    """,
    "models/first_tags.sql": """
        {{ config(materialized='deduplicate', key='tag', interval='10 seconds', event_time='ts', replace_state_below=0) }}
        select * from {{ incremental_joins.stream(source('t', 'events')) }}
    """,
    # The remedy: the CHAR columns cast to string upstream (a dbt `table` model each, read by
    # comparing versions); orders_cast keeps a CHAR column that fk_cast's body does not select.
    "models/orders_cast.sql": """{{ config(materialized='table') }}
        select cast(oid as string) as oid, cast(cid as string) as cid, tag from {{ source('t', 'orders') }}""",
    "models/customers_cast.sql": """{{ config(materialized='table') }}
        select cast(cid as string) as cid, cast(name as string) as name from {{ source('t', 'customers') }}""",
    "models/fk_cast.sql": """
        {{ config(materialized='foreign_key_join', join_type='left', left_key='oid', right_key='cid', foreign_key='cid', full_recompute_above=10) }}
        select {{ incremental_joins.output_key() }}, l.cid, r.name from {{ incremental_joins.join(ref('orders_cast'), ref('customers_cast')) }}
    """,
}


def test_char_columns_refused_before_a_merge_fails_on_them(scratch_project, spark):
    """Delta's MERGE fails on CHAR(n) columns (delta-io/delta#3868): a model whose MERGEs they would
    reach was built, and failed its next run with Spark's internal error (a deduplicate model once
    its store held more than replace_state_below entries). Now its first run stops before it
    builds anything, naming the columns, their tables and the cast that fixes it; a CHAR column
    no MERGE keeps is read as before; and the fix works, run after run."""
    project = scratch_project(CHAR_FILES)
    s = project.schema
    for ddl in ["orders (oid char(4), cid char(3), tag char(5))", "customers (cid char(3), name char(6))",
                "cdc (id char(3), op string, seq int, val char(4))",
                "events (off int, cid string, ts timestamp, tag char(2))", "prices (cid string, ts timestamp, price char(4))"]:
        spark.sql(f"create table {s}.{ddl} using delta tblproperties (delta.enableChangeDataFeed = true)")
    spark.sql(f"insert into {s}.orders values ('o1', 'c1', 'x'), ('o2', 'c2', 'y')")
    spark.sql(f"insert into {s}.customers values ('c1', 'ann')")
    spark.sql(f"insert into {s}.cdc values ('k1', 'c', 1, 'a')")
    # The events' cid is a string holding the padded value, as customers_cast's does.
    spark.sql(f"insert into {s}.events values (1, 'c1 ', timestamp'2026-01-01 00:00:00', 'a'), (2, 'c1 ', timestamp'2026-01-01 00:00:05', 'b')")
    spark.sql(f"insert into {s}.prices values ('c1', timestamp'2025-12-31 00:00:00', 'p1')")
    result = project.invoke("run", check=False)
    errors = {r.node.name: str(r.message) for r in result.result.results if str(r.status) == "error"}
    assert sorted(errors) == ["current", "first_tags", "fk", "priced_events"]
    # fk's body selects tag and name and joins on both cid columns; oid, its key, it selects too.
    for model, columns in {"fk": ["oid (char(4) of", "cid (char(3) of", "tag (char(5) of", "name (char(6) of"],
                           "current": ["id (char(3) of", "val (char(4) of"],
                           "priced_events": ["tag (char(2) of", "price (char(4) of"],
                           "first_tags": ["tag (char(2) of"]}.items():
        message = errors[model]
        assert all(c in message for c in columns), (model, message)
        assert "delta-io/delta#3868" in message and "as string)" in message and "Nothing was written" in message, message
        assert not spark.catalog.tableExists(f"{s}.{model}"), model
    assert ".orders)" in errors["fk"] and ".customers)" in errors["fk"] and ".prices)" in errors["priced_events"]
    assert "seq" not in errors["current"] and "op (" not in errors["current"] and "cid (" not in errors["priced_events"]
    # A deduplicate model's store keeps its key: a CHAR value column (first_events' tag) is appended;
    # so is a stream's CHAR column (named_events' tag) without a grace period.
    assert "off (" not in errors["first_tags"] and "first_events" not in errors and "named_events" not in errors

    # The others ran; now the changes: customer c1 renamed, c2 arrives, order o3 (of c1); events.
    # (Delta's UPDATE finds no row by `cid = 'c1'` on a CHAR column, padded or not; rtrim does.)
    spark.sql(f"update {s}.customers set name = 'bob' where rtrim(cid) = 'c1'")
    assert [tuple(r) for r in spark.sql(f"select * from {s}.customers").collect()] == [("c1 ", "bob   ")]
    spark.sql(f"insert into {s}.customers values ('c2', 'cy')")
    spark.sql(f"insert into {s}.orders values ('o3', 'c1', 'z')")
    spark.sql(f"insert into {s}.events values (3, 'c1 ', timestamp'2026-01-01 00:00:20', 'a'), (4, 'c1 ', timestamp'2026-01-01 00:00:25', 'c'), "
              f"(5, 'c2 ', timestamp'2026-01-01 00:00:26', 'd')")
    project.invoke("run", "--exclude", "fk", "current", "priced_events", "first_tags")
    # CHAR values keep their padding through the cast: oid to 4, cid to 3, name to 6 characters.
    fk_rows = {tuple(r) for r in spark.sql(f"select oid, cid, name from {s}.fk_cast").collect()}
    assert fk_rows == {("o1  ", "c1 ", "bob   "), ("o2  ", "c2 ", "cy    "), ("o3  ", "c1 ", "bob   ")}
    # 2@5 within 1@0's 10 s; 3@20 past it, 4@25 within 3's; 5 is c2's first.
    assert sorted(r[0] for r in spark.sql(f"select off from {s}.first_events").collect()) == [1, 3, 5]
    # Unversioned: each record joins the customer as it is when the record's run reads it.
    named = {tuple(r) for r in spark.sql(f"select off, tag, name from {s}.named_events").collect()}
    assert named == {(1, "a ", "ann   "), (2, "b ", "ann   "), (3, "a ", "bob   "), (4, "c ", "bob   "), (5, "d ", "cy    ")}
