{#- A foreign_key_join model written in Python. The body reads its two inputs with dbt.ref() /
    dbt.source() — the left ("many") input first — and joins them with dbt.join(), which the
    materialization provides; dbt.output_key() gives the output key columns:

        def model(dbt, session):
            dbt.config(materialized="incremental_joins.foreign_key_join", left_key="order_id",
                       right_key="customer_id", foreign_key="customer_id", join_type="left")
            joined = dbt.join(dbt.ref("orders"), dbt.ref("customers"))
            return joined.select(*dbt.output_key(), "l.amount", F.col("r.name").alias("customer_name"))

    Each run executes the body once, over the same version-pinned, key-restricted inputs an SQL
    body gets; its DataFrame is written to <model>__ij_python_rows and merged from there. -#}

{#- {'left': relation, 'right': relation}: the first and second input the body reads (one input
    read twice is a self-join). -#}
{% macro python_join_inputs() %}
  {%- set found = [] -%}
  {%- for call in modules.re.finditer('dbt\\.(ref|source)\\(([^)]*)\\)', model.raw_code) -%}
    {%- set args = modules.re.findall('[\'"]([^\'"]+)[\'"]', call.group(2)) -%}
    {%- set relation = (ref(*args) if call.group(1) == 'ref' else source(*args)).render() -%}
    {%- if relation not in found -%}{%- do found.append(relation) -%}{%- endif -%}
  {%- endfor -%}
  {#- dbt writes each input of the body as a string in the compiled code's refs / sources: a query
      there, other than --empty's (which the loader reads), is --sample's. -#}
  {%- for quoted in modules.re.findall('"(\\(select [^"]*)"', model.get('compiled_code') or '') -%}
    {%- set query = fromjson('"' ~ quoted ~ '"') -%}
    {%- if not modules.re.match(incremental_joins.empty_ref_pattern(), query) -%}
      {%- do incremental_joins.refuse_query_input('left' if found and (' ' ~ found[0] ~ ' ') in query else 'right', query) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if found | length not in [1, 2] -%}
    {%- set msg -%}
{{ model.name }}: a Python foreign_key_join model reads exactly two inputs, the left ("many") one first: dbt.join(dbt.ref('orders'), dbt.ref('customers')); it reads {{ found | length }} ({{ found | join(', ') }}). Compute other inputs in an upstream model.
    {%- endset -%}
    {{ exceptions.raise_compiler_error(msg) }}
  {%- endif -%}
  {{ return({'left': found[0], 'right': found[-1]}) }}
{% endmacro %}

{#- The compiled model followed by the code that runs it: inputs that read this run's temporary
    views become Delta tables first (a Python job may run in another Spark session). -#}
{% macro python_body(cfg, plan) %}
  {%- set inputs = incremental_joins.python_join_inputs() -%}  {#- as the body's dbt.ref() names them -#}
  {%- set sides = {} -%}
  {%- for side in ['left', 'right'] -%}
    {%- set rows_sql = plan[side ~ '_sql'] -%}
    {%- if incremental_joins.staged_prefix() in rows_sql -%}
      {%- set table = incremental_joins.state_relation('python_' ~ side) -%}
      {%- do incremental_joins.create_state_table(table, rows_sql) -%}
      {%- set rows_sql = 'select * from ' ~ table -%}
    {%- endif -%}
    {%- do sides.update({side: {'input': inputs[side], 'sql': rows_sql}}) -%}
  {%- endfor -%}
  {%- set settings = {'model': model.name, 'sides': sides, 'left_key': cfg.left_key, 'right_key': cfg.right_key,
                      'foreign_key': cfg.foreign_key, 'how': {'inner': 'inner', 'left': 'left_outer', 'outer': 'full_outer'}[cfg.join_type],
                      'combined': cfg.output_key == 'combined', 'target': incremental_joins.state_relation('python_rows') | string} -%}
{{ compiled_code }}

# --- incremental_joins: run the body over the version-pinned, key-restricted inputs --- #
def _ij_run(settings):
    import functools
    import json
    import re
    from pyspark.sql import DataFrame, functions as F

    read = {}

    def load(name):
        # Under dbt's --empty an input is named "(select * from <name> where false limit 0)".
        empty = re.fullmatch({{ tojson(incremental_joins.empty_ref_pattern()) }}, name)
        name = empty.group(1) if empty else name
        df = spark.table(name)
        read[id(df)] = name
        return df

    def join(left, right, left_alias="l", right_alias="r"):
        frames = {}
        for side, df in (("left", left), ("right", right)):
            wanted = settings["sides"][side]
            if read.get(id(df)) != wanted["input"]:
                raise ValueError(
                    f"{settings['model']}: dbt.join() takes the inputs as dbt.ref()/dbt.source() return them, "
                    f"left first: dbt.join(<{settings['sides']['left']['input']}>, <{settings['sides']['right']['input']}>); "
                    f"its {side} argument is not {wanted['input']}. Filter or reshape after the join, or in an upstream model.")
            frames[side] = spark.sql(wanted["sql"])
        fk = [F.expr(e).alias(f"__ij_fk{i}") for i, e in enumerate(settings["foreign_key"], 1)]
        l = frames["left"].select("*", *fk).alias(left_alias)
        r = frames["right"].alias(right_alias)
        on = functools.reduce(lambda a, b: a & b, [
            F.col(f"{left_alias}.__ij_fk{i}") == F.col(f"{right_alias}.`{rk}`")
            for i, rk in enumerate(settings["right_key"], 1)])
        return l.join(r, on, settings["how"])

    def output_key(left_alias="l", right_alias="r"):
        cols = []
        if settings["combined"]:
            cols += [F.coalesce(F.col(f"{left_alias}.__ij_fk{i}"), F.col(f"{right_alias}.`{rk}`")).alias(rk)
                     for i, rk in enumerate(settings["right_key"], 1)]
        return cols + [F.col(f"{left_alias}.`{lk}`") for lk in settings["left_key"]]

    dbt = dbtObj(load)
    dbt.join, dbt.output_key = join, output_key
    df = model(dbt, spark)
    if not isinstance(df, DataFrame):
        raise TypeError(f"{settings['model']}: a foreign_key_join Python model returns a Spark DataFrame "
                        f"(dbt.join(...).select(...)), not {type(df).__name__}.")
    df.write.mode("overwrite").format("delta").option("overwriteSchema", "true").saveAsTable(settings["target"])


import json as _ij_json
_ij_run(_ij_json.loads({{ tojson(tojson(settings)) }}))
{% endmacro %}
