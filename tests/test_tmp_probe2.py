from fk_join_harness import error_of, sources_yml

def test_probe(scratch_project, spark):
    kinds = {"ntz": ("timestamp_ntz", "cast(timestamp_seconds({}) as timestamp_ntz)"),
             "date": ("date", "date_add(date'2020-01-01', {})"),
             "ms": ("bigint", "{}000L")}
    files = {"models/sources.yml": sources_yml(*[f"orders_{k}" for k in kinds], *[f"prices_{k}" for k in kinds])}
    for k in kinds:
        files[f"models/j_{k}.sql"] = ("{{ config(materialized='stream_table_join', key='product', event_time='ts', table_time='valid_from', "
            "arrival_order='kafka_offset', join_type='left', history_retention='100 days', grace_period='1 days') }}\n"
            f"select s.kafka_offset, s.product, s.ts, t.price from {{{{ incremental_joins.as_of_join(source('t', 'orders_{k}'), source('t', 'prices_{k}')) }}}}")
    project = scratch_project(files)
    schema = project.schema
    props = "tblproperties ('delta.enableChangeDataFeed' = 'true')"
    for k, (typ, lit) in kinds.items():
        spark.sql(f"create or replace table {schema}.prices_{k} (product string, price string, valid_from {typ}) using delta {props}")
        spark.sql(f"create or replace table {schema}.orders_{k} (product string, ts {typ}, kafka_offset bigint) using delta {props}")
        spark.sql(f"insert into {schema}.prices_{k} values ('a', 'p1', {lit.format(1)})")
        spark.sql(f"insert into {schema}.orders_{k} values ('a', {lit.format(5)}, 0), ('a', {lit.format(9)}, 1)")
    for k in kinds:
        r = project.invoke("run", "--quiet", "--select", f"j_{k}", check=False)
        open("/tmp/probe2.txt", "a").write(f"MODEL {k} {r.success} {'' if r.success else error_of(r)[:500]}\n")
        if r.success:
            open("/tmp/probe2.txt", "a").write(f"OUT {k} {[tuple(x) for x in spark.table(f'{schema}.j_{k}').collect()]}\n")
