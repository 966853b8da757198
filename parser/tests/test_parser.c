/*
 * test_parser.c: parse_sql() end to end: every statement kind's AST fields,
 * operator precedence, both window TVF forms, non-reserved keywords,
 * statement splitting and text ranges, error SQLSTATEs and positions
 * (UTF-8 aware), and the size and nesting limits.
 */
#include <stdlib.h>
#include <string.h>

#include "parser.h"
#include "tap.h"

/* render() truncates deep trees on purpose. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

static Arena *A;
static WError E;
static int N;

/* Parses sql, expecting success; returns the statements (NULL on error). */
static AstStmt **parse_ok(const char *sql)
{
    AstStmt **s = NULL;
    werr_clear(&E);
    if (parse_sql(sql, A, &s, &N, &E) != 0) {
        diag("unexpected error for [%s]: %s %s at %d", sql, E.sqlstate, E.msg, E.pos);
        return NULL;
    }
    return s;
}

/* The single statement of sql, or NULL. */
static AstStmt *one(const char *sql)
{
    AstStmt **s = parse_ok(sql);
    if (!s || N != 1) {
        diag("expected one statement for [%s], got %d", sql, s ? N : -1);
        return NULL;
    }
    return s[0];
}

/* Parses sql expecting an error; returns the SQLSTATE ("" if it parsed). */
static const char *parse_err(const char *sql)
{
    AstStmt **s;
    werr_clear(&E);
    if (parse_sql(sql, A, &s, &N, &E) == 0)
        return "";
    return E.sqlstate;
}

/* The first target expression of "SELECT <expr>". */
static AstExpr *expr_of(const char *sql)
{
    AstStmt *s = one(sql);
    if (!s || s->kind != STMT_SELECT || ast_list_len(s->u.select->targets) < 1)
        return NULL;
    return ((AstTarget *)AST_AT(s->u.select->targets, 0))->expr;
}

/* Renders an expression as a fully parenthesized string, for precedence tests. */
static void render(const AstExpr *e, char *out, size_t cap)
{
    char a[512], b[512];
    if (!e) {
        snprintf(out, cap, "<null>");
        return;
    }
    switch (e->kind) {
    case AST_LITERAL: snprintf(out, cap, "%s", e->text ? e->text : "NULL"); break;
    case AST_COLUMN: snprintf(out, cap, "%s%s%s", e->qualifier ? e->qualifier : "", e->qualifier ? "." : "", e->text); break;
    case AST_UNARY:
        render(AST_AT(e->args, 0), a, sizeof a);
        snprintf(out, cap, "(%s %s)", ast_op_name(e->op), a);
        break;
    case AST_BINARY:
        render(AST_AT(e->args, 0), a, sizeof a);
        render(AST_AT(e->args, 1), b, sizeof b);
        snprintf(out, cap, "(%s %s %s)", a, ast_op_name(e->op), b);
        break;
    case AST_CAST:
        render(e->arg, a, sizeof a);
        snprintf(out, cap, "(%s::%s)", a, e->type_name);
        break;
    case AST_IS:
        render(e->arg, a, sizeof a);
        snprintf(out, cap, "(%s IS%s %d)", a, e->negated ? " NOT" : "", (int)e->is_kind);
        break;
    case AST_IN:
        render(e->arg, a, sizeof a);
        snprintf(out, cap, "(%s %sIN %d)", a, e->negated ? "NOT " : "", ast_list_len(e->args));
        break;
    case AST_BETWEEN:
        render(e->arg, a, sizeof a);
        render(e->hi, b, sizeof b);
        snprintf(out, cap, "(%s BETWEEN .. %s)", a, b);
        break;
    case AST_LIKE:
        render(e->arg, a, sizeof a);
        render(e->lo, b, sizeof b);
        snprintf(out, cap, "(%s %sLIKE %s)", a, e->negated ? "NOT " : "", b);
        break;
    case AST_FUNC: snprintf(out, cap, "%s(%d)", e->text, ast_list_len(e->args)); break;
    default: snprintf(out, cap, "<%d>", (int)e->kind); break;
    }
}

static const char *R(const char *sql)
{
    static char buf[1024];
    render(expr_of(sql), buf, sizeof buf);
    return buf;
}

static AstOption *opt(AstList *l, int i) { return (AstOption *)AST_AT(l, i); }

/* ---- statements ---------------------------------------------------------- */

static void test_create_source(void)
{
    AstStmt *s = one("CREATE SOURCE clicks (\n"
                     "    user_id BIGINT, url VARCHAR, ts TIMESTAMP,\n"
                     "    WATERMARK FOR ts AS ts - INTERVAL '2' SECOND\n"
                     ") WITH (connector = 'kafka', topic = 'clicks', properties.bootstrap.server = '127.0.0.1:9092',\n"
                     "        scan.startup.mode = 'earliest') FORMAT PLAIN ENCODE JSON;");
    ok(s && s->kind == STMT_CREATE_SOURCE, "create source kind");
    if (!s)
        return;
    AstCreateSource *c = s->u.create_source;
    is_int(c->obj, OBJ_SOURCE, "obj source");
    is_str(c->name, "clicks", "source name");
    is_int(ast_list_len(c->columns), 3, "3 columns");
    AstColumnDef *c0 = AST_AT(c->columns, 0), *c1 = AST_AT(c->columns, 1), *c2 = AST_AT(c->columns, 2);
    is_str(c0->name, "user_id", "col0 name");
    is_str(c0->type_name, "bigint", "col0 type");
    is_str(c1->name, "url", "col1 name");
    is_str(c1->type_name, "varchar", "col1 type");
    is_str(c2->name, "ts", "col2 name");
    is_str(c2->type_name, "timestamp", "col2 type");
    is_str(c->wm_column, "ts", "watermark column");
    is_int(c->wm_pos, 75, "watermark pos");
    ok(c->wm_expr && c->wm_expr->kind == AST_BINARY && c->wm_expr->op == OP_SUB, "wm expr is SUB");
    if (c->wm_expr && c->wm_expr->kind == AST_BINARY) {
        AstExpr *l = AST_AT(c->wm_expr->args, 0), *r = AST_AT(c->wm_expr->args, 1);
        ok(l->kind == AST_COLUMN && strcmp(l->text, "ts") == 0, "wm lhs column ts");
        ok(r->kind == AST_LITERAL && r->lit_kind == LIT_INTERVAL, "wm rhs interval literal");
        is_str(r->text, "2", "interval text");
        is_str(r->interval_unit, "second", "interval unit");
    }
    is_int(ast_list_len(c->options), 4, "4 options");
    if (ast_list_len(c->options) == 4) {
        is_str(opt(c->options, 0)->key, "connector", "opt0 key");
        is_str(opt(c->options, 0)->value, "kafka", "opt0 value");
        is_str(opt(c->options, 1)->key, "topic", "opt1 key");
        is_str(opt(c->options, 1)->value, "clicks", "opt1 value");
        is_str(opt(c->options, 2)->key, "properties.bootstrap.server", "dotted key");
        is_str(opt(c->options, 2)->value, "127.0.0.1:9092", "dotted value");
        is_str(opt(c->options, 3)->key, "scan.startup.mode", "opt3 key");
        is_str(opt(c->options, 3)->value, "earliest", "opt3 value");
    }
    is_str(c->format, "plain", "format plain");
    is_str(c->encode, "json", "encode json");
    ok(!c->if_not_exists && !c->append_only && !c->primary_key, "no flags");
    is_int(s->pos, 1, "stmt pos");

    s = one("CREATE STREAM IF NOT EXISTS s (a INT NOT NULL, b DOUBLE PRECISION, c TIMESTAMP WITH TIME ZONE, "
            "d CHARACTER VARYING(10), e NUMERIC(10,2), f timestamp without time zone) "
            "INCLUDE key AS k INCLUDE offset INCLUDE partition "
            "WITH ('scan.startup.mode' = 'earliest', n = 10, x = -1.5, y = true, z = foo, properties.group.id = 'g', "
            "table = 't') FORMAT UPSERT ENCODE AVRO (schema.registry = 'http://r')");
    ok(s && s->kind == STMT_CREATE_SOURCE, "create stream");
    if (s) {
        AstCreateSource *c = s->u.create_source;
        is_int(c->obj, OBJ_STREAM, "obj stream");
        ok(c->if_not_exists, "if not exists");
        is_int(ast_list_len(c->columns), 6, "6 columns");
        ok(((AstColumnDef *)AST_AT(c->columns, 0))->not_null, "not null");
        is_str(((AstColumnDef *)AST_AT(c->columns, 1))->type_name, "double precision", "double precision");
        is_str(((AstColumnDef *)AST_AT(c->columns, 2))->type_name, "timestamptz", "timestamp with time zone");
        is_str(((AstColumnDef *)AST_AT(c->columns, 3))->type_name, "varchar", "character varying(10)");
        is_str(((AstColumnDef *)AST_AT(c->columns, 4))->type_name, "numeric(10,2)",
               "numeric(10,2) keeps its modifiers");
        is_str(((AstColumnDef *)AST_AT(c->columns, 5))->type_name, "timestamp", "without time zone");
        is_int(ast_list_len(c->includes), 3, "3 includes");
        is_str(((AstInclude *)AST_AT(c->includes, 0))->what, "key", "include key");
        is_str(((AstInclude *)AST_AT(c->includes, 0))->alias, "k", "include alias");
        is_str(((AstInclude *)AST_AT(c->includes, 1))->what, "offset", "include offset");
        is_str(((AstInclude *)AST_AT(c->includes, 2))->what, "partition", "include partition");
        is_int(ast_list_len(c->options), 7, "7 options");
        is_str(opt(c->options, 0)->key, "scan.startup.mode", "quoted key");
        is_str(opt(c->options, 1)->value, "10", "number value");
        is_str(opt(c->options, 2)->value, "-1.5", "negative value");
        is_str(opt(c->options, 3)->value, "true", "bool value");
        is_str(opt(c->options, 4)->value, "foo", "ident value");
        is_str(opt(c->options, 5)->key, "properties.group.id", "key with reserved word");
        is_str(opt(c->options, 6)->key, "table", "key 'table'");
        is_str(c->format, "upsert", "format upsert");
        is_str(c->encode, "avro", "encode avro");
        is_int(ast_list_len(c->encode_options), 1, "encode options");
    }

    s = one("create table t (a int primary key, b text, PRIMARY KEY (a, b)) APPEND ONLY WITH (x = 'y')");
    ok(s && s->kind == STMT_CREATE_SOURCE, "create table");
    if (s) {
        AstCreateSource *c = s->u.create_source;
        is_int(c->obj, OBJ_TABLE, "obj table");
        ok(c->append_only, "append only");
        ok(((AstColumnDef *)AST_AT(c->columns, 0))->primary_key, "column primary key");
        is_int(ast_list_len(c->primary_key), 2, "table primary key");
        is_str(AST_AT(c->primary_key, 1), "b", "pk col");
        is_int(ast_list_len(c->options), 1, "table options");
        ok(!c->format, "no format");
    }
    s = one("CREATE TABLE t (a int)");
    ok(s && !s->u.create_source->options, "table without options");
    is_str(parse_err("CREATE TABLE t (a int, PRIMARY KEY (a), PRIMARY KEY (a))"), "42P16", "two primary keys");
    is_str(parse_err("CREATE SOURCE s (a int, WATERMARK FOR a AS a, WATERMARK FOR a AS a)"), "42601", "two watermarks");
}

static void test_create_view(void)
{
    AstStmt *s = one("CREATE MATERIALIZED VIEW clicks_per_10s AS\n"
                     "  SELECT window_start, window_end, user_id, count(*) AS n, max(url) AS last_url\n"
                     "  FROM TUMBLE(clicks, ts, INTERVAL '10' SECOND)\n"
                     "  GROUP BY window_start, window_end, user_id;");
    ok(s && s->kind == STMT_CREATE_VIEW, "create mv");
    if (!s)
        return;
    AstCreateView *v = s->u.create_view;
    ok(v->materialized, "materialized");
    is_str(v->name, "clicks_per_10s", "view name");
    is_int(v->query_pos, 46, "query pos");
    is_int(v->emit, EMIT_DEFAULT, "emit default");
    AstSelect *q = v->query;
    is_int(ast_list_len(q->targets), 5, "5 targets");
    AstTarget *t3 = AST_AT(q->targets, 3);
    ok(t3->expr->kind == AST_FUNC && t3->expr->star_arg, "count(*)");
    is_str(t3->expr->text, "count", "count name");
    is_str(t3->alias, "n", "alias n");
    is_str(((AstTarget *)AST_AT(q->targets, 4))->alias, "last_url", "alias last_url");
    is_int(ast_list_len(q->from), 1, "one from item");
    AstTableRef *w = AST_AT(q->from, 0);
    is_int(w->kind, TREF_WINDOW, "TREF_WINDOW");
    is_int(w->win_kind, WIN_TUMBLE, "tumble");
    is_int(w->input->kind, TREF_NAME, "input name");
    is_str(w->input->name, "clicks", "input clicks");
    is_str(w->time_col->text, "ts", "time col");
    is_int(ast_list_len(w->win_args), 1, "one win arg");
    is_str(((AstExpr *)AST_AT(w->win_args, 0))->text, "10", "size 10");
    is_int(ast_list_len(q->group_by), 3, "group by 3");

    s = one("CREATE MATERIALIZED VIEW IF NOT EXISTS m AS SELECT a FROM t GROUP BY a "
            "EMIT ON WINDOW CLOSE ALLOW LATENESS INTERVAL '40' SECOND LATE ROWS INTO bids_late WITH (x = 1)");
    ok(s && s->kind == STMT_CREATE_VIEW, "view with trailing clauses");
    if (s) {
        v = s->u.create_view;
        ok(v->if_not_exists, "view if not exists");
        is_int(v->emit, EMIT_ON_WINDOW_CLOSE, "emit on window close");
        ok(v->allow_lateness && v->allow_lateness->lit_kind == LIT_INTERVAL, "lateness");
        is_str(v->late_rows_into, "bids_late", "late rows into");
        is_int(ast_list_len(v->options), 1, "view options");
        is_int(ast_list_len(v->query->group_by), 1, "query keeps group by");
    }
    s = one("CREATE VIEW m (x, y) AS SELECT a, b FROM t ORDER BY a LIMIT 3 WITH (k = 'v') LATE ROWS INTO l EMIT CHANGES");
    ok(s && s->kind == STMT_CREATE_VIEW, "view clauses in another order");
    if (s) {
        v = s->u.create_view;
        ok(!v->materialized, "plain view");
        is_int(ast_list_len(v->col_names), 2, "view column names");
        is_int(v->emit, EMIT_CHANGES, "emit changes");
        is_str(v->late_rows_into, "l", "late rows");
        ok(v->query->limit != NULL && ast_list_len(v->query->order_by) == 1, "order/limit in query");
    }
    s = one("CREATE OR REPLACE VIEW v AS SELECT 1");
    ok(s && s->u.create_view->or_replace, "or replace");
    is_str(parse_err("CREATE VIEW v AS SELECT 1 EMIT CHANGES EMIT CHANGES"), "42601", "duplicate emit");
}

static void test_sink_drop_insert(void)
{
    AstStmt *s = one("CREATE SINK bids_pg FROM bids_per_10s WITH (connector = 'postgres', url = 'postgres://x', "
                     "table = 'bids_per_10s', type = 'upsert', primary_key = 'window_start,auction')");
    ok(s && s->kind == STMT_CREATE_SINK, "create sink from");
    if (s) {
        AstCreateSink *k = s->u.create_sink;
        is_str(k->name, "bids_pg", "sink name");
        is_str(k->from_name, "bids_per_10s", "sink from");
        ok(!k->query, "no query");
        is_int(ast_list_len(k->options), 5, "sink options");
        is_str(opt(k->options, 2)->key, "table", "table key");
        is_str(opt(k->options, 3)->key, "type", "type key");
    }
    s = one("CREATE SINK s AS SELECT * FROM t WITH (connector = 'blackhole') FORMAT PLAIN ENCODE JSON");
    ok(s && s->kind == STMT_CREATE_SINK && s->u.create_sink->query && !s->u.create_sink->from_name, "sink as query");
    if (s) {
        is_str(s->u.create_sink->format, "plain", "sink format");
        is_int(ast_list_len(s->u.create_sink->options), 1, "sink as options");
    }

    s = one("DROP MATERIALIZED VIEW clicks_per_10s");
    ok(s && s->kind == STMT_DROP && s->u.drop->obj == OBJ_MATERIALIZED_VIEW, "drop mv");
    if (s)
        is_str(AST_AT(s->u.drop->names, 0), "clicks_per_10s", "drop name");
    s = one("DROP SOURCE IF EXISTS a, b CASCADE");
    ok(s && s->u.drop->if_exists && s->u.drop->cascade && ast_list_len(s->u.drop->names) == 2, "drop if exists cascade");
    static const struct {
        const char *sql;
        AstObjectKind obj;
    } drops[] = {{"DROP STREAM x", OBJ_STREAM}, {"DROP TABLE x RESTRICT", OBJ_TABLE},
                 {"DROP VIEW x", OBJ_VIEW}, {"DROP SINK x", OBJ_SINK}};
    for (int i = 0; i < 4; i++) {
        s = one(drops[i].sql);
        ok(s && s->u.drop->obj == drops[i].obj && !s->u.drop->cascade, drops[i].sql);
    }

    s = one("INSERT INTO clicks VALUES (1, '/a', '2026-01-01 00:00:01'), (1, '/b', '2026-01-01 00:00:04');");
    ok(s && s->kind == STMT_INSERT, "insert values");
    if (s) {
        AstInsert *ins = s->u.insert;
        is_str(ins->table, "clicks", "insert table");
        ok(!ins->columns, "no column list");
        is_int(ast_list_len(ins->query->values), 2, "2 rows");
        AstList *r1 = AST_AT(ins->query->values, 1);
        is_int(ast_list_len(r1), 3, "3 values");
        is_str(((AstExpr *)AST_AT(r1, 1))->text, "/b", "string value");
        is_int(((AstExpr *)AST_AT(r1, 0))->lit_kind, LIT_INT, "int value");
    }
    s = one("INSERT INTO t (a, b) SELECT x, y FROM u");
    ok(s && ast_list_len(s->u.insert->columns) == 2 && s->u.insert->query->targets, "insert select");
    is_str(parse_err("INSERT INTO t VALUES (1, 2), (3)"), "42601", "values lengths differ");

    s = one("UPDATE t SET a = a + 1, b = 'x' WHERE id = 3");
    ok(s && s->kind == STMT_UPDATE, "update");
    if (s) {
        is_int(ast_list_len(s->u.update->set_cols), 2, "update set cols");
        is_str(AST_AT(s->u.update->set_cols, 1), "b", "update col b");
        is_int(ast_list_len(s->u.update->set_exprs), 2, "update exprs");
        ok(s->u.update->where != NULL, "update where");
    }
    s = one("DELETE FROM t WHERE a < 0");
    ok(s && s->kind == STMT_DELETE && s->u.delete_->where && strcmp(s->u.delete_->table, "t") == 0, "delete");
    s = one("DELETE FROM t");
    ok(s && !s->u.delete_->where, "delete all");
}

static void test_misc_statements(void)
{
    AstStmt *s = one("FLUSH");
    ok(s && s->kind == STMT_FLUSH, "flush");
    s = one("EXPLAIN CREATE MATERIALIZED VIEW v2 AS SELECT a FROM t");
    ok(s && s->kind == STMT_EXPLAIN && s->u.explain->stmt->kind == STMT_CREATE_VIEW, "explain create mv");
    if (s) {
        AstStmt *in = s->u.explain->stmt;
        is_int(in->pos, 9, "inner pos");
        is_int(in->text_start, 8, "inner text_start");
        is_int(in->text_end, 54, "inner text_end");
        ok(!s->u.explain->options, "explain no options");
    }
    /* EXPLAIN [ANALYZE | (opts)] MATERIALIZED VIEW v: a running view, no inner statement. */
    s = one("EXPLAIN ANALYZE MATERIALIZED VIEW s1.v");
    ok(s && s->kind == STMT_EXPLAIN && !s->u.explain->stmt && s->u.explain->view &&
           !strcmp(s->u.explain->view, "s1.v") && ast_list_len(s->u.explain->options) == 1 &&
           !strcmp(opt(s->u.explain->options, 0)->key, "analyze"),
       "explain analyze materialized view");
    s = one("EXPLAIN (ANALYZE, FORMAT JSON) MATERIALIZED VIEW v");
    ok(s && s->u.explain->view && ast_list_len(s->u.explain->options) == 2, "explain (analyze, format json) view");
    s = one("EXPLAIN MATERIALIZED VIEW v");
    ok(s && s->u.explain->view && !s->u.explain->options, "explain materialized view");
    s = one("EXPLAIN ANALYZE SELECT 1");
    ok(s && s->u.explain->stmt && s->u.explain->stmt->kind == STMT_SELECT && ast_list_len(s->u.explain->options) == 1,
       "explain analyze select parses (the server answers 0A000)");
    s = one("EXPLAIN (FORMAT JSON, VERBOSE) SELECT 1");
    ok(s && s->kind == STMT_EXPLAIN && s->u.explain->stmt->kind == STMT_SELECT, "explain options");
    if (s) {
        is_int(ast_list_len(s->u.explain->options), 2, "2 explain options");
        is_str(opt(s->u.explain->options, 0)->key, "format", "format key");
        is_str(opt(s->u.explain->options, 0)->value, "json", "format json");
        is_str(opt(s->u.explain->options, 1)->key, "verbose", "verbose");
        is_int(s->u.explain->stmt->text_start, 31, "explain select start");
    }
    s = one("SHOW SOURCES");
    ok(s && s->kind == STMT_SHOW && strcmp(s->u.show->what, "sources") == 0, "show sources");
    s = one("show materialized views");
    ok(s && strcmp(s->u.show->what, "materialized views") == 0, "show materialized views");
    s = one("SHOW CREATE MATERIALIZED VIEW v");
    ok(s && strcmp(s->u.show->what, "create") == 0 && s->u.show->obj == OBJ_MATERIALIZED_VIEW &&
           strcmp(s->u.show->name, "v") == 0, "show create mv");
    s = one("SHOW search_path");
    ok(s && strcmp(s->u.show->what, "search_path") == 0, "show setting");
    s = one("SHOW ALL");
    ok(s && strcmp(s->u.show->what, "all") == 0, "show all");
    s = one("SHOW TABLES");
    ok(s && strcmp(s->u.show->what, "tables") == 0, "show tables");

    s = one("SET streaming_parallelism = 4");
    ok(s && s->kind == STMT_SET && strcmp(s->u.set->name, "streaming_parallelism") == 0 &&
           strcmp(s->u.set->value, "4") == 0, "set =");
    s = one("SET SESSION application_name TO 'psql'");
    ok(s && strcmp(s->u.set->value, "psql") == 0, "set session to");
    s = one("SET x TO DEFAULT");
    ok(s && s->u.set->value == NULL, "set default");
    s = one("SET TIME ZONE 'UTC'");
    ok(s && strcmp(s->u.set->name, "timezone") == 0 && strcmp(s->u.set->value, "UTC") == 0, "set time zone");
    s = one("SET search_path = a, b");
    ok(s && strcmp(s->u.set->value, "a, b") == 0, "set list");
    s = one("RESET x");
    ok(s && s->kind == STMT_RESET && strcmp(s->u.set->name, "x") == 0, "reset");
    s = one("RESET ALL");
    ok(s && s->kind == STMT_RESET && strcmp(s->u.set->name, "all") == 0, "reset all");

    static const struct {
        const char *sql;
        AstTxnKind k;
    } txns[] = {{"BEGIN", TXN_BEGIN}, {"BEGIN TRANSACTION", TXN_BEGIN}, {"begin work", TXN_BEGIN},
                {"START TRANSACTION", TXN_BEGIN}, {"COMMIT", TXN_COMMIT}, {"END", TXN_COMMIT},
                {"ROLLBACK", TXN_ROLLBACK}, {"ABORT", TXN_ROLLBACK}};
    for (int i = 0; i < 8; i++) {
        s = one(txns[i].sql);
        ok(s && s->kind == STMT_TRANSACTION && s->u.txn == txns[i].k, txns[i].sql);
    }
    s = one("ALTER SYSTEM CHECKPOINT");
    ok(s && s->kind == STMT_CHECKPOINT, "alter system checkpoint");
    s = one("CHECKPOINT");
    ok(s && s->kind == STMT_CHECKPOINT, "checkpoint");
    s = one("alter materialized view My_View resume");
    ok(s && s->kind == STMT_RESUME && !strcmp(s->u.resume_view, "my_view"), "alter materialized view resume");
    is_str(parse_err("ALTER MATERIALIZED VIEW v RESTART"), "42601", "alter materialized view: unknown action");
    s = one("ALTER SOURCE s SET (on_error = 'skip', error.topic = 'x')");
    ok(s && s->kind == STMT_ALTER_SOURCE && !strcmp(s->u.alter_source->name, "s") &&
           ast_list_len(s->u.alter_source->options) == 2, "alter source set");
    s = one("ALTER TABLE t RESUME");
    ok(s && s->kind == STMT_RESUME && !strcmp(s->u.resume_view, "t"), "alter table resume");
    /* Found by fuzz_pgwire: f(FROM x) for a function other than trim/substring. */
    is_str(parse_err("SELECT  o1of(FROM 2)"), "42601", "f(FROM x) is a syntax error");
}

static void test_users(void)
{
    AstStmt *s = one("CREATE USER Alice WITH PASSWORD 'p''w'");
    ok(s && s->kind == STMT_CREATE_USER && !strcmp(s->u.user->name, "alice") && !strcmp(s->u.user->password, "p'w"),
       "create user with password, name folded");
    s = one("create user bob");
    ok(s && s->kind == STMT_CREATE_USER && !s->u.user->password, "create user without password");
    s = one("ALTER USER \"Bob\" PASSWORD NULL");
    ok(s && s->kind == STMT_ALTER_USER && !strcmp(s->u.user->name, "Bob") && !strcmp(s->u.user->password, ""),
       "alter user password null, quoted name");
    s = one("DROP USER IF EXISTS carol");
    ok(s && s->kind == STMT_DROP_USER && s->u.user->if_exists && !strcmp(s->u.user->name, "carol"), "drop user");
    s = one("SELECT user, password FROM t");
    ok(s && s->kind == STMT_SELECT, "user and password stay usable as column names");
    ok(!strcmp(parse_err("CREATE USER alice PASSWORD"), "42601"), "password needs a value");
    s = one("show transaction isolation level");
    ok(s && s->kind == STMT_SHOW && !strcmp(s->u.show->what, "transaction_isolation"), "show transaction isolation level");
    ok(!strcmp(parse_err("SHOW TRANSACTION foo bar"), "42601"), "show transaction foo bar");
}

static void test_subscribe(void)
{
    AstStmt *s = one("SUBSCRIBE v");
    ok(s && s->kind == STMT_SUBSCRIBE && !strcmp(s->u.subscribe->view, "v") && !s->u.subscribe->copy &&
           !s->u.subscribe->options, "subscribe");
    s = one("subscribe to Clicks_Per_10s WITH (snapshot = false, progress = true)");
    ok(s && s->kind == STMT_SUBSCRIBE && !strcmp(s->u.subscribe->view, "clicks_per_10s"), "subscribe to, folded");
    if (s && ast_list_len(s->u.subscribe->options) == 2) {
        is_str(opt(s->u.subscribe->options, 0)->key, "snapshot", "snapshot key");
        is_str(opt(s->u.subscribe->options, 0)->value, "false", "snapshot false");
        is_str(opt(s->u.subscribe->options, 1)->value, "true", "progress true");
    } else {
        ok(0, "subscribe options");
    }
    s = one("COPY (SUBSCRIBE v WITH (progress = true)) TO STDOUT");
    ok(s && s->kind == STMT_SUBSCRIBE && s->u.subscribe->copy && ast_list_len(s->u.subscribe->options) == 1,
       "copy subscribe");
    if (s) {
        is_int(s->pos, 1, "copy subscribe pos");
        is_int(s->text_start, 0, "copy subscribe text_start");
    }
    s = one("COPY (SUBSCRIBE TO v) TO STDOUT WITH (FORMAT text)");
    ok(s && s->u.subscribe->copy && ast_list_len(s->u.subscribe->copy_options) == 1 &&
           !strcmp(opt(s->u.subscribe->copy_options, 0)->value, "text"), "copy subscribe with format");
    s = one("COPY (SUBSCRIBE v) TO STDOUT (FORMAT text)");
    ok(s && ast_list_len(s->u.subscribe->copy_options) == 1, "copy subscribe (format)");
    s = one("SELECT subscribe, copy, stdout FROM subscribe");
    ok(s && s->kind == STMT_SELECT, "subscribe, copy, stdout stay usable as names");
    is_str(parse_err("SUBSCRIBE"), "42601", "subscribe needs a name");
    is_str(parse_err("COPY (SELECT 1) TO STDOUT"), "42601", "copy of a query is not supported");
}

/* ---- queries ------------------------------------------------------------- */

static void test_select(void)
{
    AstStmt *s = one("SELECT * FROM clicks_per_10s ORDER BY window_start, user_id DESC NULLS LAST");
    ok(s && s->kind == STMT_SELECT, "select star");
    if (s) {
        AstSelect *q = s->u.select;
        is_int(((AstTarget *)AST_AT(q->targets, 0))->expr->kind, AST_STAR, "star target");
        is_int(ast_list_len(q->order_by), 2, "order by 2");
        AstOrderItem *o = AST_AT(q->order_by, 1);
        ok(o->desc && o->nulls == 2, "desc nulls last");
        ok(!((AstOrderItem *)AST_AT(q->order_by, 0))->desc, "asc default");
    }
    s = one("SELECT DISTINCT t.*, a.b AS c, d e, 1 FROM t, (SELECT 1) AS a WHERE x > 1 GROUP BY 1 "
            "HAVING count(*) > 2 ORDER BY 1 NULLS FIRST LIMIT 10 OFFSET 5");
    if (s) {
        AstSelect *q = s->u.select;
        ok(q->distinct, "distinct");
        AstTarget *t0 = AST_AT(q->targets, 0), *t1 = AST_AT(q->targets, 1), *t2 = AST_AT(q->targets, 2);
        ok(t0->expr->kind == AST_STAR && strcmp(t0->expr->qualifier, "t") == 0, "t.*");
        ok(t1->expr->kind == AST_COLUMN && strcmp(t1->expr->qualifier, "a") == 0 && strcmp(t1->alias, "c") == 0,
           "a.b AS c");
        is_str(t2->alias, "e", "bare alias");
        is_int(ast_list_len(q->from), 2, "comma from");
        AstTableRef *sub = AST_AT(q->from, 1);
        ok(sub->kind == TREF_SUBQUERY && strcmp(sub->alias, "a") == 0, "subquery alias");
        ok(q->where && q->having && q->limit && q->offset, "where having limit offset");
        is_str(q->limit->text, "10", "limit 10");
        is_int(((AstOrderItem *)AST_AT(q->order_by, 0))->nulls, 1, "nulls first");
    } else {
        ok(0, "big select");
    }
    s = one("SELECT DISTINCT ON (a) a, b FROM t");
    ok(s && s->u.select->distinct && ast_list_len(s->u.select->distinct_on) == 1, "distinct on");

    s = one("SELECT * FROM a JOIN b ON a.x = b.x LEFT OUTER JOIN c USING (k, l) RIGHT JOIN d ON true "
            "FULL JOIN e ON false CROSS JOIN f INNER JOIN g ON 1 = 1");
    if (s) {
        AstTableRef *j = AST_AT(s->u.select->from, 0);
        static const AstJoinType want[] = {JOIN_INNER, JOIN_CROSS, JOIN_FULL, JOIN_RIGHT, JOIN_LEFT, JOIN_INNER};
        int okk = 1;
        for (int i = 0; i < 6; i++) {
            if (j->kind != TREF_JOIN || j->join_type != want[i])
                okk = 0;
            if (i == 4 && ast_list_len(j->using_cols) != 2)
                okk = 0;
            if (j->kind == TREF_JOIN)
                j = j->left;
        }
        ok(okk && j->kind == TREF_NAME && strcmp(j->name, "a") == 0, "join chain left-deep with kinds");
    } else {
        ok(0, "joins");
    }
    s = one("SELECT * FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.c = r.c");
    if (s) {
        AstTableRef *j = AST_AT(s->u.select->from, 0);
        ok(j->kind == TREF_JOIN && j->right->system_time && strcmp(j->right->alias, "r") == 0 &&
               strcmp(j->left->alias, "o") == 0, "for system_time as of");
    } else {
        ok(0, "system time");
    }
    s = one("SELECT * FROM t FOR SYSTEM_TIME AS OF PROCTIME()");
    ok(s && ((AstTableRef *)AST_AT(s->u.select->from, 0))->system_time->kind == AST_FUNC, "as of proctime()");

    s = one("SELECT a FROM t UNION ALL SELECT b FROM u UNION ALL SELECT c FROM v ORDER BY 1 LIMIT 2");
    if (s) {
        AstSelect *q = s->u.select;
        ok(q->set_op == SETOP_UNION_ALL && q->set_rhs && q->set_rhs->set_op == SETOP_UNION_ALL &&
               q->set_rhs->set_rhs && q->set_rhs->set_rhs->set_op == SETOP_NONE, "union all chain");
        ok(q->order_by && q->limit, "order/limit on head");
    } else {
        ok(0, "union");
    }
    s = one("SELECT 1 UNION SELECT 2");
    ok(s && s->u.select->set_op == SETOP_UNION, "union");
    s = one("SELECT 1 INTERSECT ALL SELECT 2 INTERSECT ALL SELECT 3");
    ok(s && s->u.select->set_op == SETOP_INTERSECT_ALL && s->u.select->set_rhs->set_op == SETOP_INTERSECT_ALL &&
           ast_list_len(s->u.select->from) == 0, "intersect all chain stays flat");
    s = one("SELECT 1 EXCEPT ALL SELECT 2 EXCEPT ALL SELECT 3");
    ok(s && s->u.select->set_op == SETOP_EXCEPT_ALL && ast_list_len(s->u.select->from) == 1 &&
           ((AstTableRef *)AST_AT(s->u.select->from, 0))->subquery->set_op == SETOP_EXCEPT_ALL, "except all is left-assoc");
    s = one("SELECT 1 UNION SELECT 2 INTERSECT ALL SELECT 3");
    ok(s && s->u.select->set_op == SETOP_UNION && s->u.select->set_rhs->set_op == SETOP_INTERSECT_ALL,
       "intersect all binds tighter than union");
    s = one("SELECT 1 EXCEPT SELECT 2 EXCEPT SELECT 3");
    if (s) {
        AstSelect *q = s->u.select;   /* (1 EXCEPT 2) EXCEPT 3: the left is wrapped */
        ok(q->set_op == SETOP_EXCEPT && ast_list_len(q->from) == 1 &&
               ((AstTableRef *)AST_AT(q->from, 0))->kind == TREF_SUBQUERY &&
               ((AstTableRef *)AST_AT(q->from, 0))->subquery->set_op == SETOP_EXCEPT, "except is left-assoc");
    } else {
        ok(0, "except");
    }
    s = one("SELECT 1 UNION SELECT 2 INTERSECT SELECT 3");
    ok(s && s->u.select->set_op == SETOP_UNION && s->u.select->set_rhs->set_op == SETOP_INTERSECT &&
           ast_list_len(s->u.select->from) == 0, "intersect binds tighter than union");
    s = one("SELECT 1 INTERSECT SELECT 2 UNION SELECT 3");
    ok(s && s->u.select->set_op == SETOP_UNION && ast_list_len(s->u.select->from) == 1 &&
           ((AstTableRef *)AST_AT(s->u.select->from, 0))->subquery->set_op == SETOP_INTERSECT,
       "mixed chain wraps its left operand");
    s = one("WITH x AS (SELECT 1), y AS (SELECT 2) SELECT * FROM x");
    ok(s && ast_list_len(s->u.select->ctes) == 2 && strcmp(((AstCte *)AST_AT(s->u.select->ctes, 1))->name, "y") == 0,
       "with ctes");
    if (s)
        is_int(s->u.select->pos, 1, "with select pos");
    s = one("WITH x (a, b) AS (SELECT 1, 2) SELECT a FROM x");
    ok(s && ast_list_len(((AstCte *)AST_AT(s->u.select->ctes, 0))->col_names) == 2 &&
           strcmp(AST_AT(((AstCte *)AST_AT(s->u.select->ctes, 0))->col_names, 1), "b") == 0,
       "cte column names");
    s = one("WITH x AS (SELECT 1) SELECT * FROM x UNION ALL SELECT * FROM x ORDER BY 1");
    ok(s && s->u.select->ctes && s->u.select->set_op == SETOP_UNION_ALL && s->u.select->order_by, "with + union");
    /* Parenthesized set-operation operands: a plain one is the select itself,
     * one with its own LIMIT or set operation is wrapped as SELECT * FROM (q). */
    s = one("(SELECT a FROM t) UNION ALL (SELECT b FROM u ORDER BY b LIMIT 2)");
    if (s) {
        AstSelect *q = s->u.select, *r = q->set_rhs;
        ok(q->set_op == SETOP_UNION_ALL && ast_list_len(q->from) == 1 &&
               ((AstTableRef *)AST_AT(q->from, 0))->kind == TREF_NAME && !q->limit, "paren plain operand");
        ok(r && r->set_op == SETOP_NONE && !r->limit && ast_list_len(r->from) == 1 &&
               ((AstTableRef *)AST_AT(r->from, 0))->kind == TREF_SUBQUERY &&
               ((AstTableRef *)AST_AT(r->from, 0))->subquery->limit, "paren operand keeps its LIMIT");
    } else {
        ok(0, "paren operands");
    }
    s = one("SELECT 1 UNION (SELECT 2 INTERSECT SELECT 3)");
    ok(s && s->u.select->set_op == SETOP_UNION && s->u.select->set_rhs->set_op == SETOP_NONE &&
           ((AstTableRef *)AST_AT(s->u.select->set_rhs->from, 0))->subquery->set_op == SETOP_INTERSECT,
       "paren groups a set operation");
    s = one("(SELECT a FROM t ORDER BY a LIMIT 1)");
    ok(s && s->u.select->limit && ((AstTableRef *)AST_AT(s->u.select->from, 0))->kind == TREF_NAME &&
           s->text_start == 0, "a whole query in parentheses is the query");
    s = one("SELECT ((SELECT 1))");
    ok(s && ((AstTarget *)AST_AT(s->u.select->targets, 0))->expr->kind == AST_SUBQUERY, "((select)) is a subquery");
    s = one("SELECT 1 WHERE 1 IN ((SELECT 1) UNION (SELECT 2))");
    ok(s && s->u.select->where->kind == AST_SUBQUERY && s->u.select->where->subq_kind == SUBQ_IN &&
           s->u.select->where->subquery->set_op == SETOP_UNION, "in ((select) union (select))");
    s = one("EXPLAIN (SELECT 1)");
    ok(s && s->kind == STMT_EXPLAIN && !s->u.explain->options && s->u.explain->stmt->kind == STMT_SELECT,
       "explain (query)");
    s = one("INSERT INTO t (SELECT 1)");
    ok(s && s->kind == STMT_INSERT && !s->u.insert->columns, "insert (query)");
    s = one("SELECT recursive, rename FROM t");
    ok(s && ast_list_len(s->u.select->targets) == 2, "recursive and rename are not reserved");
    s = one("ALTER MATERIALIZED VIEW IF EXISTS v RENAME TO w");
    ok(s && s->kind == STMT_ALTER_RENAME && s->u.rename->obj == OBJ_MATERIALIZED_VIEW && s->u.rename->if_exists &&
           strcmp(s->u.rename->name, "v") == 0 && strcmp(s->u.rename->new_name, "w") == 0 && s->u.rename->new_pos == 47,
       "alter materialized view rename");
    s = one("ALTER SOURCE s RENAME TO \"T\"");
    ok(s && s->kind == STMT_ALTER_RENAME && s->u.rename->obj == OBJ_SOURCE && !s->u.rename->if_exists &&
           strcmp(s->u.rename->new_name, "T") == 0, "alter source rename");
    s = one("ALTER SINK k RENAME TO l");
    ok(s && s->kind == STMT_ALTER_RENAME && s->u.rename->obj == OBJ_SINK, "alter sink rename");
    s = one("ALTER MATERIALIZED VIEW v SWAP WITH v2");
    ok(s && s->kind == STMT_SWAP_VIEW && strcmp(s->u.rename->name, "v") == 0 &&
           strcmp(s->u.rename->new_name, "v2") == 0 && s->u.rename->new_pos == 37,
       "alter materialized view swap with");
    s = one("VALUES (1, 2), (3, 4)");
    ok(s && s->kind == STMT_SELECT && ast_list_len(s->u.select->values) == 2 && !s->u.select->targets, "values query");
    s = one("SELECT * FROM (VALUES (1)) v(a)");
    ok(s && ast_list_len(((AstTableRef *)AST_AT(s->u.select->from, 0))->col_aliases) == 1, "values alias cols");
}

static void test_windows(void)
{
    const char *forms[] = {
        "SELECT * FROM TUMBLE(bids, date_time, INTERVAL '10' SECOND)",
        "SELECT * FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))",
    };
    AstTableRef *w[2] = {0};
    for (int i = 0; i < 2; i++) {
        AstStmt *s = one(forms[i]);
        if (s)
            w[i] = AST_AT(s->u.select->from, 0);
    }
    ok(w[0] && w[1], "both tvf forms parse");
    if (w[0] && w[1]) {
        for (int i = 0; i < 2; i++) {
            ok(w[i]->kind == TREF_WINDOW && w[i]->win_kind == WIN_TUMBLE, "tumble window");
            ok(w[i]->input->kind == TREF_NAME && strcmp(w[i]->input->name, "bids") == 0, "input bids");
            ok(w[i]->time_col->kind == AST_COLUMN && strcmp(w[i]->time_col->text, "date_time") == 0, "time col");
            ok(ast_list_len(w[i]->win_args) == 1 &&
                   ((AstExpr *)AST_AT(w[i]->win_args, 0))->lit_kind == LIT_INTERVAL, "size arg");
        }
    }
    AstStmt *s = one("SELECT * FROM HOP(t, ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS h");
    if (s) {
        AstTableRef *r = AST_AT(s->u.select->from, 0);
        ok(r->win_kind == WIN_HOP && ast_list_len(r->win_args) == 2 && strcmp(r->alias, "h") == 0, "hop");
    } else {
        ok(0, "hop");
    }
    s = one("SELECT * FROM CUMULATE(t, ts, INTERVAL '1' MINUTE, INTERVAL '1' HOUR)");
    ok(s && ((AstTableRef *)AST_AT(s->u.select->from, 0))->win_kind == WIN_CUMULATE, "cumulate");
    s = one("SELECT * FROM SESSION(t, ts, INTERVAL '30' SECOND)");
    ok(s && ((AstTableRef *)AST_AT(s->u.select->from, 0))->win_kind == WIN_SESSION, "session");
    s = one("SELECT * FROM TABLE(SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), INTERVAL '30' SECOND))");
    if (s) {
        AstTableRef *r = AST_AT(s->u.select->from, 0);
        ok(r->win_kind == WIN_SESSION && ast_list_len(r->win_partition) == 1 &&
               strcmp(((AstExpr *)AST_AT(r->win_partition, 0))->text, "k") == 0, "session partition by");
    } else {
        ok(0, "session partition");
    }
    s = one("SELECT * FROM TUMBLE((SELECT * FROM t WHERE a > 1), ts, INTERVAL '10' SECOND, INTERVAL '1' SECOND)");
    if (s) {
        AstTableRef *r = AST_AT(s->u.select->from, 0);
        ok(r->input->kind == TREF_SUBQUERY && ast_list_len(r->win_args) == 2, "tumble over subquery with offset");
    } else {
        ok(0, "tumble subquery");
    }
    is_str(parse_err("SELECT * FROM TUMBLE(t, ts)"), "42601", "tumble arity");
    is_str(parse_err("SELECT * FROM FOO(t, ts, 1)"), "42883", "unknown tvf");
    is_str(parse_err("SELECT * FROM TUMBLE(t, ts + 1, INTERVAL '1' SECOND)"), "42601", "time col must be column");
}

/* ---- expressions --------------------------------------------------------- */

static void test_expressions(void)
{
    is_str(R("SELECT 1 + 2 * 3"), "(1 + (2 * 3))", "mul binds tighter");
    is_str(R("SELECT (1 + 2) * 3"), "((1 + 2) * 3)", "parens");
    is_str(R("SELECT 1 - 2 - 3"), "((1 - 2) - 3)", "minus left assoc");
    is_str(R("SELECT a OR b AND c"), "(a OR (b AND c))", "and binds tighter");
    is_str(R("SELECT NOT a = b"), "(NOT (a = b))", "not below comparison");
    is_str(R("SELECT -x::int"), "(- (x::int))", "cast binds tighter than minus");
    is_str(R("SELECT -2 ^ 2"), "(-2 ^ 2)", "negative literal folded");
    is_str(R("SELECT 2 ^ 3 * 4"), "((2 ^ 3) * 4)", "pow above mul");
    is_str(R("SELECT a || b = c"), "((a || b) = c)", "concat above comparison");
    is_str(R("SELECT a = b IS NULL"), "((a = b) IS 0)", "is below comparison");
    is_str(R("SELECT a IS NOT NULL AND b"), "((a IS NOT 0) AND b)", "is not null");
    is_str(R("SELECT a = b NOT IN (1, 2)"), "(a = (b NOT IN 2))", "not in binds like in");
    is_str(R("SELECT NOT a IN (1)"), "(NOT (a IN 1))", "prefix not over in");
    is_str(R("SELECT a + 1 BETWEEN 1 AND 2 AND c"), "(((a + 1) BETWEEN .. 2) AND c)", "between and");
    is_str(R("SELECT a NOT LIKE 'x%' OR b"), "((a NOT LIKE x%) OR b)", "not like");
    is_str(R("SELECT t.a::double precision"), "(t.a::double precision)", "double precision cast");

    AstExpr *e = expr_of("SELECT CAST(x AS varchar(10))");
    ok(e && e->kind == AST_CAST && strcmp(e->type_name, "varchar") == 0, "cast varchar(10)");
    e = expr_of("SELECT x::timestamp with time zone");
    ok(e && e->kind == AST_CAST && strcmp(e->type_name, "timestamptz") == 0, "::timestamp with time zone");
    e = expr_of("SELECT TIMESTAMP '2026-01-01 00:00:00'");
    ok(e && e->lit_kind == LIT_TYPED && strcmp(e->type_name, "timestamp") == 0 &&
           strcmp(e->text, "2026-01-01 00:00:00") == 0, "typed literal");
    e = expr_of("SELECT DATE '2026-01-01'");
    ok(e && e->lit_kind == LIT_TYPED && strcmp(e->type_name, "date") == 0, "date literal");
    e = expr_of("SELECT INTERVAL '5 seconds'");
    ok(e && e->lit_kind == LIT_INTERVAL && strcmp(e->text, "5 seconds") == 0 && !e->interval_unit, "interval text");
    e = expr_of("SELECT INTERVAL '1 02:00:00' DAY TO SECOND");
    ok(e && e->lit_kind == LIT_INTERVAL && strcmp(e->interval_unit, "day to second") == 0, "day to second");
    e = expr_of("SELECT $$it's \\n$$");
    ok(e && e->lit_kind == LIT_STRING && strcmp(e->text, "it's \\n") == 0, "$$ string: nothing is an escape");
    e = expr_of("SELECT $tag$a $$ b$tag$");
    ok(e && e->lit_kind == LIT_STRING && strcmp(e->text, "a $$ b") == 0, "$tag$ string may hold $$");
    e = expr_of("SELECT $$$$");
    ok(e && e->lit_kind == LIT_STRING && strcmp(e->text, "") == 0, "empty $$ string");
    is_str(parse_err("SELECT $$abc"), "42601", "unterminated $$ string");
    e = expr_of("SELECT INTERVAL '10' MINUTES");
    ok(e && e->lit_kind == LIT_INTERVAL && strcmp(e->interval_unit, "minute") == 0, "plural unit (Flink): MINUTES");
    e = expr_of("SELECT INTERVAL '2' Days TO SECONDS");
    ok(e && e->lit_kind == LIT_INTERVAL && strcmp(e->interval_unit, "day to second") == 0, "plural units in a range");
    e = expr_of("SELECT minutes FROM t");
    ok(e && e->kind == AST_COLUMN && strcmp(e->text, "minutes") == 0, "a column named minutes");
    e = expr_of("SELECT 'it''s'");
    ok(e && e->lit_kind == LIT_STRING && strcmp(e->text, "it's") == 0, "'' escape");
    e = expr_of("SELECT E'a\\nb\\'c\\x41'");
    ok(e && strcmp(e->text, "a\nb'cA") == 0, "E'' escapes");
    e = expr_of("SELECT 1.5e3");
    ok(e && e->lit_kind == LIT_DECIMAL && strcmp(e->text, "1.5e3") == 0, "decimal exponent");
    e = expr_of("SELECT .5");
    ok(e && e->lit_kind == LIT_DECIMAL && strcmp(e->text, ".5") == 0, "leading dot decimal");
    e = expr_of("SELECT -9223372036854775808");
    ok(e && e->lit_kind == LIT_INT && strcmp(e->text, "-9223372036854775808") == 0, "negative int literal");
    e = expr_of("SELECT NULL");
    ok(e && e->lit_kind == LIT_NULL, "null");
    e = expr_of("SELECT TRUE");
    ok(e && e->lit_kind == LIT_BOOL && strcmp(e->text, "t") == 0, "true");
    e = expr_of("SELECT $12");
    ok(e && e->kind == AST_PARAM && e->param_no == 12, "param");
    e = expr_of("SELECT \"MixedCase\"\"q\"");
    ok(e && e->kind == AST_COLUMN && strcmp(e->text, "MixedCase\"q") == 0, "quoted identifier keeps case");
    e = expr_of("SELECT FooBar");
    ok(e && strcmp(e->text, "foobar") == 0, "identifier folded");

    e = expr_of("SELECT count(DISTINCT a) FILTER (WHERE b > 0) OVER (PARTITION BY c ORDER BY d DESC)");
    ok(e && e->kind == AST_FUNC && e->distinct && e->filter && e->over &&
           ast_list_len(e->over->partition_by) == 1 && ast_list_len(e->over->order_by) == 1, "agg decorations");
    e = expr_of("SELECT CASE WHEN a THEN 1 WHEN b THEN 2 ELSE 3 END");
    ok(e && e->kind == AST_CASE && !e->arg && ast_list_len(e->whens) == 4 && e->else_, "searched case");
    e = expr_of("SELECT CASE x WHEN 1 THEN 'a' END");
    ok(e && e->kind == AST_CASE && e->arg && ast_list_len(e->whens) == 2 && !e->else_, "simple case");
    e = expr_of("SELECT a NOT IN (1, 2, 3)");
    ok(e && e->kind == AST_IN && e->negated && ast_list_len(e->args) == 3, "not in list");
    e = expr_of("SELECT a NOT BETWEEN 1 AND 2");
    ok(e && e->kind == AST_BETWEEN && e->negated && e->lo && e->hi, "not between");
    e = expr_of("SELECT a IS NOT DISTINCT FROM b");
    ok(e && e->kind == AST_IS && e->is_kind == IS_DISTINCT_FROM && e->negated && e->lo, "is not distinct from");
    e = expr_of("SELECT a IS UNKNOWN");
    ok(e && e->kind == AST_IS && e->is_kind == IS_UNKNOWN && !e->negated, "is unknown");
    e = expr_of("SELECT a IS NOT TRUE");
    ok(e && e->is_kind == IS_TRUE && e->negated, "is not true");
    e = expr_of("SELECT a ILIKE 'x!%' ESCAPE '!'");
    ok(e && e->kind == AST_LIKE && e->ilike && e->hi && strcmp(e->hi->text, "!") == 0, "ilike escape");
    e = expr_of("SELECT a ~ 'x' = b !~* 'y'");
    ok(e && e->kind == AST_BINARY && e->op == OP_EQ && ((AstExpr *)AST_AT(e->args, 0))->kind == AST_FUNC &&
           strcmp(((AstExpr *)AST_AT(e->args, 1))->text, "!~*") == 0, "~ and !~* bind tighter than =");
    e = expr_of("SELECT a || b ~ c");
    ok(e && e->kind == AST_FUNC && strcmp(e->text, "~") == 0 && ((AstExpr *)AST_AT(e->args, 0))->kind != AST_COLUMN,
       "~ is left-associative with || (Postgres's operator precedence)");
    e = expr_of("SELECT a !~* 'x'");
    ok(e && e->kind == AST_FUNC && strcmp(e->text, "!~*") == 0, "!~*");
    e = expr_of("SELECT TRY_CAST(a AS INT)");
    ok(e && e->kind == AST_CAST && e->try_cast && e->type_name && e->arg, "try_cast");
    e = expr_of("SELECT CAST(a AS INT)");
    ok(e && e->kind == AST_CAST && !e->try_cast, "cast is not try_cast");
    is_str(parse_err("SELECT lower(a AS INT)"), "42601", "f(x AS t) only for try_cast");
    is_str(parse_err("SELECT a NOT SIMILAR TO 'x'"), "0A000", "SIMILAR TO is 0A000");
    e = expr_of("SELECT try_cast, similar FROM t");
    ok(e && e->kind == AST_COLUMN, "try_cast and similar are names");
    e = expr_of("SELECT EXTRACT(EPOCH FROM ts)");
    ok(e && e->kind == AST_EXTRACT && strcmp(e->text, "epoch") == 0 && e->arg, "extract");
    e = expr_of("SELECT EXTRACT(second FROM ts)");
    ok(e && e->kind == AST_EXTRACT && strcmp(e->text, "second") == 0, "extract keyword field");
    e = expr_of("SELECT PROCTIME()");
    ok(e && e->kind == AST_FUNC && strcmp(e->text, "proctime") == 0 && !e->args, "proctime()");
    e = expr_of("SELECT (SELECT max(a) FROM t)");
    ok(e && e->kind == AST_SUBQUERY && e->subq_kind == SUBQ_SCALAR, "scalar subquery");
    e = expr_of("SELECT EXISTS (SELECT 1)");
    ok(e && e->kind == AST_SUBQUERY && e->subq_kind == SUBQ_EXISTS, "exists");
    e = expr_of("SELECT x NOT IN (SELECT y FROM t)");
    ok(e && e->kind == AST_SUBQUERY && e->subq_kind == SUBQ_IN && e->negated && e->arg, "not in subquery");
    e = expr_of("SELECT coalesce(a, b, 0)");
    ok(e && e->kind == AST_FUNC && ast_list_len(e->args) == 3, "coalesce");
    e = expr_of("SELECT CURRENT_TIMESTAMP");
    ok(e && e->kind == AST_FUNC && strcmp(e->text, "current_timestamp") == 0, "current_timestamp");
    e = expr_of("SELECT now()");
    ok(e && e->kind == AST_FUNC && strcmp(e->text, "now") == 0, "now()");
    e = expr_of("SELECT a <> b");
    ok(e && e->op == OP_NE, "<>");
    e = expr_of("SELECT a != b");
    ok(e && e->op == OP_NE, "!=");
    e = expr_of("SELECT 7 % 2");
    ok(e && e->op == OP_MOD, "%");
}

static void test_nonreserved(void)
{
    AstStmt *s = one("SELECT date_time, source, key, value, timestamp, window_start, type, format, name, url, "
                     "sink, stream, watermark, emit, flush, tumble, hop, session, cumulate, encode, lateness, "
                     "descriptor, partition, time, zone, interval_x, values, first, last, filter, window "
                     "FROM t");
    ok(s != NULL, "keywords as column names");
    if (s) {
        AstTarget *t = AST_AT(s->u.select->targets, 1);
        is_str(t->expr->text, "source", "source column");
        t = AST_AT(s->u.select->targets, 4);
        ok(t->expr->kind == AST_COLUMN && strcmp(t->expr->text, "timestamp") == 0, "timestamp column");
        is_int(ast_list_len(s->u.select->targets), 31, "all keyword columns");
    }
    s = one("CREATE TABLE source (key int, value text, partition int, timestamp timestamp, offset_ bigint, "
            "format text, session int, window int)");
    ok(s && s->kind == STMT_CREATE_SOURCE && strcmp(s->u.create_source->name, "source") == 0, "keyword names in DDL");
    s = one("SELECT s.key FROM source s JOIN sink k ON s.value = k.value WHERE key > 1");
    ok(s != NULL, "keyword tables and aliases");
    s = one("SELECT \"offset\", \"select\" FROM t");
    ok(s != NULL, "reserved words quoted");
    is_str(parse_err("SELECT offset FROM t"), "42601", "offset is reserved");
    s = one("SELECT interval, exists, extract, interval '1' hour FROM t WHERE exists > 0");
    ok(s && ast_list_len(s->u.select->targets) == 4 &&
           ((AstTarget *)AST_AT(s->u.select->targets, 1))->expr->kind == AST_COLUMN &&
           ((AstTarget *)AST_AT(s->u.select->targets, 3))->expr->lit_kind == LIT_INTERVAL,
       "interval/exists/extract as columns");
    s = one("SELECT a key FROM t");
    ok(s && strcmp(((AstTarget *)AST_AT(s->u.select->targets, 0))->alias, "key") == 0, "keyword as bare alias");
}

/* ---- splitting, positions, errors, limits -------------------------------- */

static void test_split_and_errors(void)
{
    const char *sql = "SELECT 1; ;  INSERT INTO t VALUES (1) ;\n-- c\nFLUSH";
    AstStmt **ss = parse_ok(sql);
    is_int(N, 3, "three statements");
    if (ss && N == 3) {
        is_int(ss[0]->text_start, 0, "s0 start");
        is_int(ss[0]->text_end, 8, "s0 end");
        is_int(ss[1]->text_start, 13, "s1 start");
        is_int(ss[1]->text_end, 37, "s1 end (no ';')");
        is_int(ss[1]->pos, 14, "s1 pos");
        is_int(ss[2]->kind, STMT_FLUSH, "s2 flush");
        is_int(ss[2]->text_start, 45, "s2 start");
        is_int(ss[2]->text_end, 50, "s2 end");
    }
    ss = parse_ok("-- only a comment\n/* and /* nested */ one */ ;;");
    ok(ss == NULL || N == 0, "comments only");
    is_int(N, 0, "zero statements");
    parse_ok("");
    is_int(N, 0, "empty input");

    is_str(parse_err("SELEC 1"), "42601", "SELEC");
    is_int(E.pos, 1, "SELEC at 1");
    is_str(E.msg, "syntax error at or near \"SELEC\"", "SELEC message");
    is_str(parse_err("SELECT 1 +"), "42601", "dangling +");
    is_str(E.msg, "syntax error at end of input", "end of input message");
    is_int(E.pos, 11, "end of input position");
    is_str(parse_err("SELECT 1 +;"), "42601", "dangling + before ;");
    is_str(E.msg, "syntax error at or near \";\"", "at ;");
    is_str(parse_err("SELECT (1"), "42601", "unclosed paren");
    is_str(E.msg, "syntax error at end of input", "unclosed paren message");
    is_str(parse_err("SELECT 1); SELECT 2"), "42601", "extra paren");
    is_int(E.pos, 9, "extra paren pos");
    is_str(parse_err("SELECT 'é', x y z"), "42601", "utf8 error");
    is_int(E.pos, 17, "position counts characters");
    is_str(parse_err("SELECT 1; SELECT 'ü' FROM WHERE"), "42601", "second statement error");
    is_int(E.pos, 27, "position in whole input");
    is_str(parse_err("SELECT 'abc"), "42601", "unterminated string");
    is_int(E.pos, 8, "unterminated string pos");
    is_str(parse_err("SELECT \"abc"), "42601", "unterminated identifier");
    is_str(parse_err("SELECT 1 /* x"), "42601", "unterminated comment");
    is_str(parse_err("SELECT a ! b"), "42601", "illegal character");
    is_int(E.pos, 10, "illegal character pos");
    is_str(parse_err("SELECT \"\""), "42601", "zero-length identifier");
    AstStmt *wr = one("WITH RECURSIVE x AS (SELECT 1) SELECT * FROM x");
    ok(wr && wr->u.select->recursive && ast_list_len(wr->u.select->ctes) == 1, "with recursive");
    is_str(parse_err("ALTER SOURCE s RENAME t"), "42601", "rename without TO");
}

static void test_limits(void)
{
    size_t n = (size_t)PARSE_MAX_SQL + 10;
    char *big = malloc(n + 1);
    memset(big, ' ', n);
    memcpy(big, "SELECT 1", 8);
    big[n] = 0;
    is_str(parse_err(big), "54000", "over-long input");
    free(big);

    int levels = 5000;
    char *deep = malloc((size_t)levels * 2 + 16);
    char *p = deep;
    p += sprintf(p, "SELECT ");
    for (int i = 0; i < levels; i++)
        *p++ = '(';
    *p++ = '1';
    for (int i = 0; i < levels; i++)
        *p++ = ')';
    *p = 0;
    is_str(parse_err(deep), "54001", "5000 nested parens");
    free(deep);

    /* 500 levels are fine. */
    deep = malloc(2000);
    p = deep;
    p += sprintf(p, "SELECT ");
    for (int i = 0; i < 500; i++)
        *p++ = '(';
    *p++ = '1';
    for (int i = 0; i < 500; i++)
        *p++ = ')';
    *p = 0;
    ok(one(deep) != NULL, "500 nested parens ok");
    free(deep);

    /* Long chains without parentheses hit the depth limit, not the C stack. */
    size_t cap = 100000 * 4 + 32;
    char *chain = malloc(cap);
    p = chain;
    p += sprintf(p, "SELECT 1");
    for (int i = 0; i < 100000; i++)
        p += sprintf(p, "+1");
    is_str(parse_err(chain), "54001", "100000-term chain");
    p = chain;
    p += sprintf(p, "SELECT ");
    for (int i = 0; i < 100000; i++)
        p += sprintf(p, "NOT ");
    p += sprintf(p, "a");
    is_str(parse_err(chain), "54001", "100000 prefix NOTs");
    p = chain;
    p += sprintf(p, "SELECT 1");
    for (int i = 0; i < 5000; i++)
        p += sprintf(p, " UNION SELECT 1");
    is_str(parse_err(chain), "54001", "5000-way union");
    free(chain);
}

/* A view's trailing clauses right after a FROM item are not its alias. */
static void test_view_clauses_after_from(void)
{
    AstStmt *s = one("CREATE MATERIALIZED VIEW v AS SELECT * FROM TUMBLE(ev, ts, INTERVAL '10' SECOND) "
                     "EMIT ON WINDOW CLOSE");
    ok(s && s->u.create_view->emit == EMIT_ON_WINDOW_CLOSE, "EMIT after a window TVF");
    ok(s && !((AstTableRef *)AST_AT(s->u.create_view->query->from, 0))->alias, "EMIT is no alias");
    s = one("CREATE MATERIALIZED VIEW v AS SELECT * FROM ev LATE ROWS INTO ev_late");
    ok(s && s->u.create_view->late_rows_into && !strcmp(s->u.create_view->late_rows_into, "ev_late"),
       "LATE ROWS INTO after a table");
    s = one("CREATE MATERIALIZED VIEW v AS SELECT * FROM ev ALLOW LATENESS INTERVAL '1' SECOND EMIT CHANGES");
    ok(s && s->u.create_view->allow_lateness && s->u.create_view->emit == EMIT_CHANGES, "ALLOW LATENESS after a table");
    s = one("SELECT emit, late, allow FROM t emit");
    ok(s && !strcmp(((AstTableRef *)AST_AT(s->u.select->from, 0))->alias, "emit"), "emit still an alias elsewhere");
}

/* $n placeholders are listed in text order and bind to untyped literals. */
static void test_params(void)
{
    AstStmt **s;
    AstExpr **ph;
    int n, n_ph;
    werr_clear(&E);
    is_int(parse_sql_params("SELECT $2 FROM t WHERE a = $1 AND b = $2; SELECT $3", A, &s, &n, &ph, &n_ph, &E), 0,
           "parse with parameters");
    is_int(n_ph, 4, "every placeholder listed, repeats too");
    ok(n_ph == 4 && ph[0]->param_no == 2 && ph[1]->param_no == 1 && ph[2]->param_no == 2 && ph[3]->param_no == 3,
       "in text order, across statements");
    if (n_ph == 4) {
        parse_bind_param(A, ph[1], "42");
        parse_bind_param(A, ph[3], NULL);
        ok(ph[1]->kind == AST_LITERAL && ph[1]->lit_kind == LIT_STRING && strcmp(ph[1]->text, "42") == 0,
           "a bound parameter is an untyped string literal");
        ok(ph[3]->kind == AST_LITERAL && ph[3]->lit_kind == LIT_NULL, "a NULL parameter is NULL");
    }
    is_int(parse_sql_params("SELECT 1", A, &s, &n, &ph, &n_ph, &E), 0, "no parameters");
    is_int(n_ph, 0, "none listed");
}

int main(void)
{
    A = arena_new(0);
    test_params();
    test_view_clauses_after_from();
    test_create_source();
    test_create_view();
    test_sink_drop_insert();
    test_misc_statements();
    test_subscribe();
    test_users();
    test_select();
    test_windows();
    test_expressions();
    test_nonreserved();
    test_split_and_errors();
    test_limits();
    arena_free(A);
    return tap_done();
}
