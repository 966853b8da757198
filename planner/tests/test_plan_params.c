/*
 * test_plan_params.c: the types plan_param_types infers for the parameters
 * of a prepared statement, per context (a comparison with a column, a cast,
 * arithmetic, LIMIT/OFFSET, a function argument, INSERT values, UPDATE SET,
 * WHERE of UPDATE/DELETE, EXPLAIN and DECLARE), as PostgreSQL describes them
 * in ParameterDescription; and that a statement planned with the values
 * bound still plans as before.
 */
#include "planner.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

static const char *COLS[] = {"k", "i2", "n", "f", "s", "b", "ts", "tz", "d", "iv", "j"};
static const TypeId TYPES[] = {TYPE_INT8, TYPE_INT2, TYPE_NUMERIC, TYPE_FLOAT8, TYPE_TEXT, TYPE_BOOL,
                               TYPE_TIMESTAMP, TYPE_TIMESTAMPTZ, TYPE_DATE, TYPE_INTERVAL, TYPE_JSONB};
static const int PK[] = {0};

/* t: a materialized view (a writable table reads like one, plan_table's contract). */
static const CatRelation *lookup(void *ctx, const char *name)
{
    static CatRelation t;
    (void)ctx;
    if (strcmp(name, "t") != 0)
        return NULL;
    memset(&t, 0, sizeof t);
    t.id = 1;
    t.kind = CAT_VIEW;
    t.materialized = true;
    t.name = "t";
    t.n_cols = (int)(sizeof COLS / sizeof *COLS);
    t.col_names = COLS;
    t.col_types = TYPES;
    t.n_pk = 1;
    t.pk = PK;
    t.table_id = 10;
    t.wm_col = -1;
    t.wm_delay_us = -1;
    return &t;
}

static uint64_t new_table_id(void *ctx)
{
    (void)ctx;
    return 100;
}

static const PlanCatalog CAT = {.lookup = lookup, .new_table_id = new_table_id};

/* The inferred types of sql's n parameters, as type names joined by ",",
 * "?" for one nothing decided. */
static const char *infer(const char *sql, int n, char *out, size_t cap)
{
    Arena *a = arena_new(0);
    WError err = {0};
    AstStmt **st;
    AstExpr **ph;
    int n_st = 0, n_ph = 0;
    out[0] = 0;
    if (parse_sql_params(sql, a, &st, &n_st, &ph, &n_ph, &err) || n_st != 1) {
        snprintf(out, cap, "parse error: %.200s", err.msg);
        arena_free(a);
        return out;
    }
    for (int i = 0; i < n_ph; i++)
        parse_bind_param(a, ph[i], NULL);
    TypeId types[16];
    for (int i = 0; i < n; i++)
        types[i] = TYPE_NULL;
    plan_param_types(st[0], &CAT, a, n, types);
    size_t len = 0;
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "," : "",
                                types[i] == TYPE_NULL ? "?" : type_name(types[i]));
    arena_free(a);
    return out;
}

#define IS(sql, n, want)                                                                                  \
    do {                                                                                                  \
        char buf_[256];                                                                                   \
        is_str(infer(sql, n, buf_, sizeof buf_), want, sql);                                              \
    } while (0)

int main(void)
{
    IS("SELECT k FROM t WHERE k = $1", 1, "bigint");
    IS("SELECT k FROM t WHERE $1 = i2 AND s = $2 AND b = $3", 3, "smallint,character varying,boolean");
    IS("SELECT k FROM t WHERE n > $1 AND f < $2 AND ts >= $3 AND tz < $4 AND d = $5 AND iv = $6", 6,
       "numeric,double precision,timestamp without time zone,timestamp with time zone,date,interval");
    IS("SELECT $1::int, CAST($2 AS bigint)", 2, "integer,bigint");
    IS("SELECT $1 + 1", 1, "integer");
    IS("SELECT k FROM t LIMIT $1 OFFSET $2", 2, "bigint,bigint");
    IS("SELECT length($1)", 1, "character varying");
    IS("SELECT j ->> $1 FROM t", 1, "character varying");
    IS("SELECT k FROM t WHERE ts + $1 > ts", 1, "interval");
    IS("SELECT $1", 1, "character varying"); /* weir's text, as PostgreSQL's text for an output */
    IS("SELECT k FROM t WHERE k IN ($1, $2)", 2, "bigint,bigint");
    IS("SELECT k FROM t WHERE k BETWEEN $1 AND $2", 2, "bigint,bigint");
    IS("INSERT INTO t VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)", 11,
       "bigint,smallint,numeric,double precision,character varying,boolean,timestamp without time zone,"
       "timestamp with time zone,date,interval,jsonb");
    IS("INSERT INTO t (s, k) VALUES ($1, $2), ($3, $4)", 4, "character varying,bigint,character varying,bigint");
    IS("INSERT INTO t (k, i2) VALUES ($1::int, $2 + 1)", 2, "integer,integer");
    IS("INSERT INTO t (s, k) SELECT $1, $2", 2, "character varying,bigint");
    IS("INSERT INTO t (k) SELECT k + $1 FROM t WHERE d = $2", 2, "bigint,date");
    IS("UPDATE t SET s = $1, n = n + $2 WHERE k = $3", 3, "character varying,numeric,bigint");
    IS("DELETE FROM t WHERE d < $1", 1, "date");
    IS("EXPLAIN SELECT k FROM t WHERE k = $1", 1, "bigint");
    IS("DECLARE c CURSOR FOR SELECT k FROM t WHERE tz > $1", 1, "timestamp with time zone");
    /* A statement that does not plan keeps what bound before the error. */
    IS("SELECT k FROM nosuch WHERE k = $1", 1, "?");
    /* The first context decides: $1 is compared with a bigint first. */
    IS("SELECT k FROM t WHERE k = $1 AND s = $1", 1, "bigint");

    /* Inference changes nothing in the plan of the statement with values bound. */
    Arena *a = arena_new(0);
    WError err = {0};
    AstStmt **st;
    AstExpr **ph;
    int n_st = 0, n_ph = 0;
    ok(parse_sql_params("SELECT k FROM t WHERE k = $1 LIMIT $2", a, &st, &n_st, &ph, &n_ph, &err) == 0 && n_ph == 2,
       "parse with parameters");
    parse_bind_param(a, ph[0], "5");
    parse_bind_param(a, ph[1], NULL);
    PlanQuery *q = plan_query(st[0]->u.select, &CAT, a, &err);
    ok(q && q->schema.types[0] == TYPE_INT8 && q->limit == -1, "the bound statement plans (a NULL LIMIT is none)");
    if (!q)
        diag("%s", err.msg);
    arena_free(a);
    return tap_done();
}
