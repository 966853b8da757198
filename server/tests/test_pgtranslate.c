/*
 * test_pgtranslate.c: the Postgres-to-SQLite rewrites of pgtranslate.c, one
 * rule at a time, and the routing and splitting of query strings. TAP.
 */
#include "pgcatalog.h"
#include "tap.h"

#include <stdio.h>
#include <string.h>

static void tr(const char *pg, const char *want)
{
    Arena *a = arena_new(0);
    WError e;
    werr_clear(&e);
    char *out = NULL;
    int rc = pgt_translate(pg, (int)strlen(pg), a, &out, &e);
    if (rc)
        diag("error: %s", e.msg);
    is_str(rc ? "(error)" : out, want, pg);
    arena_free(a);
}

static void tr_err(const char *pg, const char *state)
{
    Arena *a = arena_new(0);
    WError e;
    werr_clear(&e);
    char *out = NULL;
    int rc = pgt_translate(pg, (int)strlen(pg), a, &out, &e);
    if (rc == 0 || strcmp(e.sqlstate, state) != 0)
        diag("%s: got %s %s", pg, rc ? e.sqlstate : "no error", rc ? e.msg : out);
    ok(rc < 0 && !strcmp(e.sqlstate, state) && e.pos > 0, pg);
    arena_free(a);
}

int main(void)
{
    tr("SELECT C.RelName FROM Pg_Class c", "select c.relname from pg_class c");
    tr("SELECT \"Mixed\" AS \"Name\"", "select \"Mixed\" as \"Name\"");
    tr("SELECT E'a\\nb', $$it's$$", "select 'a\nb', 'it''s'");
    tr("SELECT relname FROM pg_class WHERE oid = $1", "select relname from pg_class where oid = ?1");
    tr("WHERE c.relname OPERATOR(pg_catalog.~) '^(t)$' COLLATE pg_catalog.default",
       "where c.relname REGEXP '^(t)$'");
    tr("a ~* 'x' AND b !~ 'y' AND c !~* 'z'", "a MATCH 'x' and b NOT REGEXP 'y' and c NOT MATCH 'z'");
    tr("a ILIKE 'x%' OR b NOT ILIKE 'y' OR c != 1", "a GLOB 'x%' or b not GLOB 'y' or c <> 1");
    tr("SELECT pg_catalog.format_type(a.atttypid, NULL)", "select format_type(a.atttypid, null)");
    tr("SELECT c.oid::pg_catalog.regclass", "select regclass(c.oid)");
    tr("SELECT 'top'::pg_catalog.regclass::pg_catalog.oid", "select regclass_oid('top')");
    tr("SELECT c.reloftype::pg_catalog.regtype::pg_catalog.text", "select CAST(regtype(c.reloftype) AS TEXT)");
    tr("SELECT x::int, f(y)::text, (a + b)::float8, 't'::bool, z::text[]",
       "select CAST(x AS INTEGER), CAST(f(y) AS TEXT), CAST((a + b) AS REAL), pg_bool('t'), z");
    tr("SELECT 1::double precision, now()::timestamp with time zone", "select CAST(1 AS REAL), now()");
    tr("SELECT CAST(x AS pg_catalog.text)", "select cast(x as text)");
    tr("SELECT 1 AS default, 2 as Two, t.x AS \"Q\" FROM t AS t1", "select 1 as \"default\", 2 as \"two\", t.x as \"Q\" from t as \"t1\"");
    tr("SELECT json_build_object('a', 1)", "select json_object('a', 1)");
    tr("WHERE c.relkind = ANY (ARRAY['r','m'])",
       "where c.relkind IN (SELECT value FROM json_each(pg_array_json(pg_array('r', 'm'))))");
    tr("WHERE k <> ALL (x.arr)", "where k NOT IN (SELECT value FROM json_each(pg_array_json(x.arr)))");
    tr("WHERE oid = ANY (SELECT 1)", "where oid IN (select 1)");
    tr("SELECT array(select rolname from pg_roles order by 1)",
       "select (SELECT pg_array_agg(rolname) FROM pg_roles order by 1)");
    tr("SELECT ARRAY(SELECT 1)", "select (SELECT pg_array_agg(1))");
    tr("SELECT prattrs[s] FROM t", "select pg_array_get(prattrs, s) from t");
    tr("FROM pg_catalog.unnest(tc.reloptions) x",
       "from (SELECT value AS x FROM json_each(pg_unnest_json(tc.reloptions))) AS x");
    tr("FROM pg_catalog.generate_series(0, 3) s WHERE true",
       "from (SELECT value AS s FROM json_each(pg_generate_series_json(0, 3))) AS s where true");
    /* An alias with a column list names the column (pgjdbc's type lookup). */
    tr("from generate_series(1, array_upper(current_schemas(false), 1)) as s(r)",
       "from (SELECT value AS r FROM json_each(pg_generate_series_json(1, array_upper(current_schemas(false), 1)))) "
       "AS s");
    tr("FROM lower('X') AS l(v)", "from (SELECT lower('X') AS v) AS l");
    /* A function of one value in a FROM list is a one-row subquery named by its alias;
     * the same call among a function's arguments is left alone. */
    tr("FROM generate_series(1, 2) as i, string_to_array(current_setting('x'), ',') s",
       "from (SELECT value AS i FROM json_each(pg_generate_series_json(1, 2))) AS i, "
       "(SELECT string_to_array(current_setting('x'), ',') AS s) AS s");
    tr("SELECT f(a, g(b)) FROM t", "select f(a, g(b)) from t");
    tr("SELECT x FROM t WHERE y IN (1, lower(z))", "select x from t where y in (1, lower(z))");
    /* USER is CURRENT_USER; a label or a qualified column named user is not. */
    tr("SELECT CASE WHEN a THEN user ELSE b END", "select case when a then current_user() else b end");
    tr("SELECT t.user, 1 AS user", "select t.user, 1 as \"user\"");
    tr("FROM pg_catalog.pg_options_to_table(ftoptions)",
       "from (SELECT key AS option_name, value AS option_value FROM json_each(pg_options_json(ftoptions))) AS "
       "pg_options_to_table");
    tr("WHERE a IS DISTINCT FROM b OR c IS NOT DISTINCT FROM d", "where a IS NOT b or c IS d");
    tr("SELECT trim(trailing ';' from x), trim(both from y)", "select pg_trim('trailing', ';', x), pg_trim('both', NULL, y)");
    tr("SELECT string_agg(a, ','), array_agg(b)", "select group_concat(a, ','), pg_array_agg(b)");
    tr("SELECT current_user, session_user, current_schema, current_schema()",
       "select current_user(), session_user(), current_schema(), current_schema()");
    tr("SELECT u.current_user FROM u", "select u.current_user from u");
    tr("SELECT left(a, 2), right(a, 1) FROM t LEFT JOIN u ON true", "select pg_left(a, 2), pg_right(a, 1) from t left join u on true");

    /* Found by fuzz/fuzz_pgtranslate.c: COLLATE dropped a bracket, then ')' popped nothing. */
    tr("SELECT x COLLATE (y) FROM t", "select x collate(y) from t");
    tr("SELECT x COLLATE pg_catalog.(y)", "select x.(y)");

    tr_err("SELECT (1", "42601");
    tr_err("SELECT 1)", "42601");
    tr_err("SELECT 'unterminated", "42601");
    tr_err("SELECT ::int", "42601");
    tr_err("WHERE a < ANY (arr)", "0A000");

    ok(pgt_names_catalog("SELECT * FROM pg_catalog.pg_class", 0, 33), "pg_catalog is routed");
    ok(pgt_names_catalog("select version()", 0, 16), "version() is routed");
    ok(pgt_names_catalog("SELECT 'x'::regclass", 0, 20), "a regclass cast is routed");
    ok(pgt_names_catalog("SELECT current_user", 0, 19), "current_user is routed");
    ok(!pgt_names_catalog("SELECT * FROM bids WHERE note = 'pg_class'", 0, 42), "a string is not a name");
    ok(!pgt_names_catalog("SELECT version FROM t", 0, 21), "version without a call is not");
    ok(!pgt_names_catalog("SELECT t.pg_x FROM t", 0, 20), "a qualified column is not");
    /* Routed by what a statement references, not by how its names are spelled (issue 17 #17). */
    static const struct {
        const char *sql;
        bool catalog;
    } ROUTES[] = {
        {"SELECT id, pg_score FROM t", false},
        {"SELECT id AS pg_x FROM t", false},
        {"SELECT pg_score FROM t WHERE pg_score > 1 ORDER BY pg_score", false},
        {"SELECT t.id FROM t JOIN u ON t.pg_a = u.pg_b", false},
        {"SELECT count(*) AS pg_n FROM (SELECT pg_score FROM t) s", false},
        {"INSERT INTO t (id, pg_score) VALUES (1, 2)", false},
        {"SELECT * FROM pg_class", true},
        {"SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace", true},
        {"SELECT * FROM t, pg_type", true},
        {"SELECT * FROM t JOIN pg_catalog.pg_type y ON true", true},
        {"SELECT 1 FROM t WHERE EXISTS (SELECT 1 FROM pg_attribute)", true},
        {"SELECT pg_get_userbyid(10)", true},
        {"SELECT x FROM t WHERE pg_catalog.pg_table_is_visible(x)", true},
        {"SELECT * FROM information_schema.tables", true},
    };
    for (size_t i = 0; i < sizeof ROUTES / sizeof ROUTES[0]; i++) {
        char name[160];
        snprintf(name, sizeof name, "%s: %s", ROUTES[i].catalog ? "catalog" : "weir", ROUTES[i].sql);
        ok(pgt_names_catalog(ROUTES[i].sql, 0, (int)strlen(ROUTES[i].sql)) == ROUTES[i].catalog, name);
    }

    ok(pgt_is_query(" (SELECT 1)", 0, 11) && pgt_is_query("with x as (select 1) select 2", 0, 29) &&
           pgt_is_query("VALUES (1)", 0, 10), "queries");
    ok(!pgt_is_query("SET search_path = pg_catalog", 0, 28) && !pgt_is_query("EXPLAIN SELECT 1", 0, 16) &&
           !pgt_is_query("", 0, 0), "not queries");

    int st[8], en[8];
    const char *q = "SET x = 1; SELECT ';' FROM pg_class; -- c;\n SELECT (1;2) ;;";
    int n = pgt_split(q, st, en, 8);
    ok(n == 3, "split: three statements");
    if (n == 3) {
        ok(!strncmp(q + st[0], "SET x = 1", (size_t)(en[0] - st[0])), "split: first");
        ok(!strncmp(q + st[1], "SELECT ';' FROM pg_class", (size_t)(en[1] - st[1])), "split: quoted ;");
        ok(!strncmp(q + st[2], "SELECT (1;2)", (size_t)(en[2] - st[2])), "split: ; in parentheses");
    }
    ok(pgt_split("a; b; c", st, en, 2) == -1, "split: too many");
    ok(pgt_split("  -- only a comment", st, en, 8) == 0, "split: nothing");
    return tap_done();
}
