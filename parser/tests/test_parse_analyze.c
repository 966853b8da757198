/* test_parse_analyze.c: the AST of ANALYZE LATENESS and VERIFY, and their syntax errors. */
#include <string.h>

#include "parser.h"
#include "tap.h"

static Arena *A;

static AstStmt *one(const char *sql, WError *e)
{
    AstStmt **s = NULL;
    int n = 0;
    werr_clear(e);
    if (parse_sql(sql, A, &s, &n, e) != 0 || n != 1)
        return NULL;
    return s[0];
}

int main(void)
{
    A = arena_new(0);
    WError e;
    AstStmt *s = one("ANALYZE LATENESS ON src FOR HOP('2s', INTERVAL '10' SECOND) BOUNDS (0s, '2 seconds', 1.5s) "
                     "LATENESS (0) TARGET 99.5 WITH (max_rows = 10)", &e);
    ok(s && s->kind == STMT_ANALYZE_LATENESS, "ANALYZE LATENESS parses");
    const AstAnalyze *a = s ? s->u.analyze : NULL;
    ok(a && !strcmp(a->source, "src"), "source");
    ok(a && a->has_window && a->win_kind == WIN_HOP && ast_list_len(a->win_args) == 2, "FOR HOP(slide, size)");
    ok(a && ast_list_len(a->bounds) == 3, "three bounds");
    const AstExpr *b0 = a ? AST_AT(a->bounds, 0) : NULL, *b2 = a ? AST_AT(a->bounds, 2) : NULL;
    ok(b0 && b0->lit_kind == LIT_STRING && !strcmp(b0->text, "0 s"), "bare 0s is the string '0 s'");
    ok(b2 && b2->lit_kind == LIT_STRING && !strcmp(b2->text, "1.5 s"), "bare 1.5s is the string '1.5 s'");
    ok(a && ast_list_len(a->lateness) == 1 && a->target && !strcmp(a->target, "99.5"), "lateness and target");
    ok(a && ast_list_len(a->options) == 1, "WITH options");
    s = one("ANALYZE LATENESS ON src", &e);
    ok(s && !s->u.analyze->has_window && !s->u.analyze->bounds && !s->u.analyze->target, "all clauses optional");
    s = one("VERIFY MATERIALIZED VIEW v WITH (examples = 3)", &e);
    ok(s && s->kind == STMT_VERIFY && !strcmp(s->u.verify->view, "v") && ast_list_len(s->u.verify->options) == 1,
       "VERIFY MATERIALIZED VIEW");
    s = one("SELECT analyze, verify, bounds, target FROM t", &e);
    ok(s && s->kind == STMT_SELECT, "analyze, verify, bounds, target stay usable as names");
    ok(!one("ANALYZE LATENESS ON src FOR WEEKLY('1s')", &e) && !strcmp(e.sqlstate, "42601"), "unknown window: 42601");
    ok(!one("ANALYZE LATENESS ON src TUMBLE('1s')", &e) && !strcmp(e.sqlstate, "42601"), "a window without FOR: 42601");
    ok(!one("ANALYZE LATENESS ON src FOR TUMBLE('1s', '2s', '3s')", &e) && !strcmp(e.sqlstate, "42601"),
       "too many window arguments: 42601");
    ok(!one("ANALYZE LATENESS ON src BOUNDS ('1s') BOUNDS ('2s')", &e) && !strcmp(e.sqlstate, "42601"),
       "a clause twice: 42601");
    ok(!one("ANALYZE LATENESS ON src TARGET x", &e), "TARGET needs a number");
    arena_free(A);
    return tap_done();
}
