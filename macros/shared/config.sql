{#- Config resolution shared by every operator: read a key, normalize keys to lists, raise errors
    that name the model, the key, the value and the fix. -#}

{#- Package keys may sit in `config(...)` or, to keep dbt >= 1.10 on Databricks from warning about
    unknown config keys, under `config(meta={...})`; meta wins when both are given. -#}
{% macro config_value(key, default=none) %}
  {%- set tested = incremental_joins.unit_tested_config() -%}
  {%- if tested is not none -%}
    {%- set meta, top = (tested.get('meta') or {}).get(key), tested.get(key, default) -%}
  {%- else -%}
    {%- set meta, top = (config.meta_get(key) if config.meta_get is defined else none), config.get(key, default) -%}
  {%- endif -%}
  {{ return(top if meta is none else meta) }}
{% endmacro %}

{#- The tested model's config() arguments in a dbt unit test (`unit_tests:`); none elsewhere. A
    unit test compiles the model's SQL for a node of its own, whose config is the test's
    (materialized 'unit'), and without the project's other nodes: so the arguments of the model's
    `config(...)` call are rendered again from its SQL (config set in YAML or dbt_project.yml is not
    seen there). -#}
{% macro unit_tested_config() %}
  {%- if not (model is mapping and model.get('resource_type') == 'unit_test') -%}{{ return(none) }}{%- endif -%}
  {%- set memo = model.setdefault('incremental_joins_unit_config', {}) -%}
  {%- if 'config' not in memo -%}
    {%- set call = modules.re.search('\\{\\{-?\\s*config\\s*\\((.*?)\\)\\s*-?\\}\\}', model.get('raw_code', ''), modules.re.S) -%}
    {%- do memo.update({'config': fromjson(render('{{ incremental_joins.unit_config_json(' ~ call.group(1) ~ ') }}')) if call else {}}) -%}
  {%- endif -%}
  {{ return(memo.config) }}
{% endmacro %}

{% macro unit_config_json() %}{{ return(tojson(kwargs)) }}{% endmacro %}

{#- (config key, column) pairs of the given keys of `cfg` that name columns (a name or a list), for
    checking that each is a column of what a model reads. -#}
{% macro named_columns(cfg, keys) %}
  {%- set out = [] -%}
  {%- for key in keys -%}
    {%- for c in incremental_joins._as_list(cfg[key]) -%}{%- do out.append((key, c)) -%}{%- endfor -%}
  {%- endfor -%}
  {{ return(out) }}
{% endmacro %}

{% macro _as_list(value) %}
  {%- if value is none -%}{{ return([]) }}
  {%- elif value is string -%}{{ return([value]) }}
  {%- else -%}{{ return(value | list) }}{%- endif -%}
{% endmacro %}

{% macro config_error(key, value, rule, fix) %}
  {%- set msg -%}
{{ model.name }}: config '{{ key }}' ({{ value if value is not none else 'not set' }}) {{ rule }}; {{ fix }}
  {%- endset -%}
  {{ exceptions.raise_compiler_error(msg) }}
{% endmacro %}

{% macro require_config(key) %}
  {%- set value = incremental_joins._as_list(incremental_joins.config_value(key)) -%}
  {%- if value | length == 0 -%}
    {{ incremental_joins.config_error(key, none, 'is required by the ' ~ incremental_joins.config_value('materialized') ~ ' materialization', "set it in the model's config(), e.g. " ~ key ~ "='id' or " ~ key ~ "=['a', 'b']") }}
  {%- endif -%}
  {{ return(value) }}
{% endmacro %}

{#- A config naming columns in order of precedence (`arrival_order`, changelog_table's `sequence`),
    compared column by column: `default` when unset (required: an error), a name (also when given
    as a list of one, so that a model's definition does not change with the spelling) or a list of
    several. Its columns: incremental_joins._as_list(value). -#}
{% macro columns_config(key, required=false, default=none) %}
  {%- set value = incremental_joins.require_config(key) if required else incremental_joins._as_list(incremental_joins.config_value(key, default)) -%}
  {{ return(none if not value else value[0] if value | length == 1 else value) }}
{% endmacro %}

{#- A config naming one column (columns_config that refuses several, saying to build one
    upstream). -#}
{% macro column_config(key, required=false, default=none) %}
  {%- set value = incremental_joins.columns_config(key, required, default) -%}
  {%- if value is not none and value is not string -%}
    {{ incremental_joins.config_error(key, value | join(', '), 'must be one column', 'to use several, build one column from them upstream') }}
  {%- endif -%}
  {{ return(value) }}
{% endmacro %}

{% macro require_choice(key, allowed, default) %}
  {%- set value = incremental_joins.config_value(key, default) -%}
  {%- if value not in allowed -%}
    {{ incremental_joins.config_error(key, value, 'is not one of ' ~ allowed | join(', '), 'use one of those') }}
  {%- endif -%}
  {{ return(value) }}
{% endmacro %}

{#- An operator's config `cfg` with dbt's on_schema_change, validated, as the two switches the
    operators read: 'append_new_columns' takes a column added to an input or selected anew by the
    body; 'sync_all_columns' does too, and refuses a column the body no longer selects
    (assert_output_columns: Delta drops a column only from a table with column mapping, and
    dbt-spark's incremental models refuse it as well); 'fail' (this package's default) and 'ignore'
    (dbt's, which dbt sets on a model that says nothing) stop a run at any change of columns. -#}
{% macro with_schema_change(cfg) %}
  {%- set value = incremental_joins.require_choice('on_schema_change', ['fail', 'ignore', 'append_new_columns', 'sync_all_columns'], 'fail') -%}
  {%- do cfg.update({'append_new_columns': value in ['append_new_columns', 'sync_all_columns'], 'sync_all_columns': value == 'sync_all_columns'}) -%}
  {{ return(cfg) }}
{% endmacro %}

{#- A number config that must be 0 or more (a bound or a fraction); `rule` says what it counts. -#}
{% macro non_negative_config(key, default, rule, fix) %}
  {%- set value = incremental_joins.config_value(key, default) -%}
  {%- if value is not number or value < 0 -%}
    {{ incremental_joins.config_error(key, value, rule, fix) }}
  {%- endif -%}
  {{ return(value) }}
{% endmacro %}

{#- Comma-joined, backtick-quoted column list; with a prefix, qualified by that alias. -#}
{% macro column_list(columns, prefix=none) %}
  {%- set out = [] -%}
  {%- for c in columns -%}{%- do out.append((prefix ~ '.' if prefix else '') ~ adapter.quote(c)) -%}{%- endfor -%}
  {{ return(out | join(', ')) }}
{% endmacro %}

{#- a.k1 <=> b.k1 and a.k2 <=> b.k2: null-safe key equality. -#}
{% macro keys_match(columns, left_alias, right_alias) %}
  {%- set out = [] -%}
  {%- for c in columns -%}
    {%- do out.append(left_alias ~ '.' ~ adapter.quote(c) ~ ' <=> ' ~ right_alias ~ '.' ~ adapter.quote(c)) -%}
  {%- endfor -%}
  {{ return('(' ~ out | join(' and ') ~ ')') }}
{% endmacro %}

{#- The columns of `schema` ([name, type] pairs, as query_schema gives them) whose values Spark
    cannot compare: a map or a variant, also inside a struct or an array (`=`, `<=>` and EXCEPT
    refuse them, an analysis error; GROUP BY takes a map since Spark 4, not a variant). Their
    names, lower-case. -#}
{% macro uncomparable(schema) %}
  {%- set out = [] -%}
  {%- for name, type in schema or [] if modules.re.search('(^|[<,:])(map<|variant($|[,>]))', type | lower | replace(' ', '')) -%}
    {%- do out.append(name | lower) -%}
  {%- endfor -%}
  {{ return(out) }}
{% endmacro %}

{#- Column `c` (of `alias`) as a value that `<=>` compares: itself, or, when it is `uncomparable`,
    its JSON text, timestamps to the microsecond. Two maps with the same entries in another order
    then differ: a row rewritten that need not be, never a change missed (as Kafka Streams'
    emit-on-change compares serialized bytes). -#}
{% macro comparable(c, alias=none, uncomparable=[]) %}
  {%- set ref = (alias ~ '.' if alias else '') ~ adapter.quote(c) -%}
  {%- if c | lower not in uncomparable -%}{{ return(ref) }}{%- endif -%}
  {{ return("to_json(named_struct('v', " ~ ref ~ "), map('timestampFormat', 'yyyy-MM-dd HH:mm:ss.SSSSSSXXX', 'timestampNTZFormat', 'yyyy-MM-dd HH:mm:ss.SSSSSS'))") }}
{% endmacro %}

{#- The rows of query `a` not in query `b` (EXCEPT; with `all`, EXCEPT ALL: duplicates counted).
    Both have the columns of `schema` ([name, type] pairs). When some are uncomparable, which
    EXCEPT refuses, the same by an anti join on their comparable values, each row numbered among
    its equals. -#}
{% macro rows_except(a, b, schema, all=false) %}
  {%- set hard = incremental_joins.uncomparable(schema) -%}
  {%- if not hard -%}{{ return('(' ~ a ~ ') except ' ~ ('all ' if all else '') ~ '(' ~ b ~ ')') }}{%- endif -%}
  {%- set values, same = [], [] -%}
  {%- for name, _ in schema -%}
    {%- do values.append(incremental_joins.comparable(name, none, hard)) -%}
    {%- do same.append(incremental_joins.comparable(name, 'x', hard) ~ ' <=> ' ~ incremental_joins.comparable(name, 'y', hard)) -%}
  {%- endfor -%}
  {%- set sides = [] -%}
  {%- for q in [a, b] -%}
    {%- do sides.append('(select * from (select *, row_number() over (partition by ' ~ values | join(', ') ~ ' order by ' ~ values | join(', ')
                        ~ ') as __ij_nth from (' ~ q ~ ') as q) as q' ~ ('' if all else ' where __ij_nth = 1') ~ ')') -%}
  {%- endfor -%}
  {{ return('select * except (__ij_nth) from ' ~ sides[0] ~ ' as x left anti join ' ~ sides[1] ~ ' as y on ' ~ same | join(' and ') ~ ' and x.__ij_nth = y.__ij_nth') }}
{% endmacro %}

{#- (a.k1 is null or a.k2 is null): a key with a null part, which no equality matches. -#}
{% macro any_null(columns, alias=none) %}
  {%- set out = [] -%}
  {%- for c in columns -%}{%- do out.append((alias ~ '.' if alias else '') ~ adapter.quote(c) ~ ' is null') -%}{%- endfor -%}
  {{ return('(' ~ out | join(' or ') ~ ')') }}
{% endmacro %}

{#- Rows in one query and not the other, duplicates counted (EXCEPT ALL both ways), labelled
    'missing' (only in expected) or 'unexpected' (only in actual). `schema`: their columns'
    [name, type] pairs, when known (rows_except then compares maps and variants too). -#}
{% macro rowset_difference(actual_sql, expected_sql, schema=none) %}
  with actual as ({{ actual_sql }}),
  expected as ({{ expected_sql }})
  select 'missing' as diff, missing.* from ({{ incremental_joins.rows_except('select * from expected', 'select * from actual', schema, all=true) }}) as missing
  union all
  select 'unexpected' as diff, unexpected.* from ({{ incremental_joins.rows_except('select * from actual', 'select * from expected', schema, all=true) }}) as unexpected
{% endmacro %}

{#- A duration config ('10 seconds', '7 days', ...): none when unset (and no default), else
    {'sql': an SQL interval literal, 'seconds': its length, 'text': as written}. -#}
{% macro duration_config(key, default=none, example="'10 minutes'") %}
  {%- set value = incremental_joins.config_value(key, default) -%}
  {%- if value is none -%}{{ return(none) }}{%- endif -%}
  {%- set parsed = modules.re.match('^\\s*(-?\\d+)\\s+(millisecond|second|minute|hour|day)s?\\s*$', value | string, modules.re.I) -%}
  {%- if not parsed -%}
    {{ incremental_joins.config_error(key, value, 'is not a duration', 'write e.g. ' ~ example ~ " (a number and one of millisecond, second, minute, hour, day)") }}
  {%- elif parsed.group(1) | int < 0 -%}
    {{ incremental_joins.config_error(key, value, 'is negative', 'use 0 or more, e.g. ' ~ example) }}
  {%- endif -%}
  {%- set unit = parsed.group(2) | lower -%}
  {%- set seconds = parsed.group(1) | int * {'millisecond': 0.001, 'second': 1, 'minute': 60, 'hour': 3600, 'day': 86400}[unit] -%}
  {{ return({'sql': 'interval ' ~ parsed.group(1) ~ ' ' ~ unit ~ 's', 'seconds': seconds, 'text': value | string | trim}) }}
{% endmacro %}
