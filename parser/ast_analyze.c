/*
 * ast_analyze.c: AST builders for ANALYZE LATENESS and VERIFY.
 *
 * The grammar reads ANALYZE's clauses generically (FOR name(args),
 * name (list), name number) so that no new keyword is needed for BOUNDS
 * or TARGET; these builders check the words, the argument counts and
 * duplicates, and record 42601 at the clause on a mistake. What the values
 * mean (intervals, percentages) is checked by the server.
 */
#include <string.h>
#include <strings.h>

#include "parse.h"
#include "parser_int.h"

AstAnalyze *ast_analyze_new(ParseCtx *c)
{
    return arena_zalloc(c->a, sizeof(AstAnalyze));
}

AstAnalyze *ast_analyze_window(ParseCtx *c, AstAnalyze *a, Token kind, AstList *args)
{
    const char *k = ast_token_text(c, kind);
    int n = ast_list_len(args), want;
    if (a->has_window)
        werr(c->err, SQLSTATE_SYNTAX_ERROR, kind.pos, "FOR given twice in ANALYZE LATENESS");
    if (!strcmp(k, "tumble")) {
        a->win_kind = WIN_TUMBLE;
        want = 1;
    } else if (!strcmp(k, "hop")) {
        a->win_kind = WIN_HOP;
        want = 2;
    } else if (!strcmp(k, "cumulate")) {
        a->win_kind = WIN_CUMULATE;
        want = 2;
    } else if (!strcmp(k, "session")) {
        a->win_kind = WIN_SESSION;
        want = 1;
    } else {
        werr(c->err, SQLSTATE_SYNTAX_ERROR, kind.pos,
             "ANALYZE LATENESS FOR takes TUMBLE(size), HOP(slide, size), CUMULATE(step, size) or SESSION(gap), not %s",
             k);
        return a;
    }
    if (n != want && !(n == want + 1 && a->win_kind != WIN_SESSION))
        werr(c->err, SQLSTATE_SYNTAX_ERROR, kind.pos, "%s takes %d interval%s (and an optional offset) here", k, want,
             want == 1 ? "" : "s");
    a->has_window = true;
    a->win_args = args;
    a->win_pos = kind.pos;
    return a;
}

AstAnalyze *ast_analyze_partition(ParseCtx *c, AstAnalyze *a, Token t, AstList *cols)
{
    if (a->partition)
        werr(c->err, SQLSTATE_SYNTAX_ERROR, t.pos, "PARTITION BY given twice in ANALYZE LATENESS");
    a->partition = cols;
    a->partition_pos = t.pos;
    return a;
}

AstAnalyze *ast_analyze_list(ParseCtx *c, AstAnalyze *a, Token name, AstList *items)
{
    const char *k = ast_token_text(c, name);
    AstList **slot = !strcmp(k, "bounds") ? &a->bounds : !strcmp(k, "lateness") ? &a->lateness : NULL;
    if (!slot) {
        werr(c->err, SQLSTATE_SYNTAX_ERROR, name.pos,
             "syntax error at or near \"%.*s\" (ANALYZE LATENESS takes FOR, BOUNDS, LATENESS, TARGET and WITH)", name.n,
             name.z);
        return a;
    }
    if (*slot)
        werr(c->err, SQLSTATE_SYNTAX_ERROR, name.pos, "%s given twice in ANALYZE LATENESS", k);
    *slot = items;
    if (slot == &a->bounds)
        a->bounds_pos = name.pos;
    else
        a->lateness_pos = name.pos;
    return a;
}

AstExpr *ast_analyze_duration(ParseCtx *c, Token number, Token unit)
{
    AstExpr *e = ast_lit(c, LIT_STRING, number);
    e->text = arena_printf(c->a, "%.*s %.*s", number.n, number.z, unit.n, unit.z);
    return e;
}

AstAnalyze *ast_analyze_number(ParseCtx *c, AstAnalyze *a, Token name, Token value)
{
    const char *k = ast_token_text(c, name);
    if (strcmp(k, "target") != 0) {
        werr(c->err, SQLSTATE_SYNTAX_ERROR, name.pos,
             "syntax error at or near \"%.*s\" (ANALYZE LATENESS takes FOR, BOUNDS, LATENESS, TARGET and WITH)", name.n,
             name.z);
        return a;
    }
    if (a->target)
        werr(c->err, SQLSTATE_SYNTAX_ERROR, name.pos, "TARGET given twice in ANALYZE LATENESS");
    a->target = ast_token_text(c, value);
    a->target_pos = value.pos;
    return a;
}

AstStmt *ast_analyze(ParseCtx *c, Token t, const char *source, AstAnalyze *a, AstList *options)
{
    AstStmt *s = ast_stmt(c, STMT_ANALYZE_LATENESS, t);
    a->source = source;
    a->options = options;
    s->u.analyze = a;
    return s;
}

AstStmt *ast_verify(ParseCtx *c, Token t, const char *view, AstList *options)
{
    AstStmt *s = ast_stmt(c, STMT_VERIFY, t);
    AstVerify *v = arena_zalloc(c->a, sizeof *v);
    v->view = view;
    v->options = options;
    s->u.verify = v;
    return s;
}
