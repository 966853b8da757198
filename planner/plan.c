/*
 * plan.c: the FROM clause lowered: a select's FROM items (planned in order
 * and cross-joined, with the WHERE conjuncts that need both sides lent to
 * the joins' ONs), table references (names via plan_scan.c, subqueries via
 * PlanCtx.sub_select, Top-N subqueries via plan_topn.c), joins (plan_join.c,
 * temporal.c) and the window table functions (TUMBLE, HOP, CUMULATE,
 * SESSION -> a Window node whose output adds window_start and window_end,
 * with the roles that let an aggregation above be bounded by a watermark).
 *
 * The shape for a windowed aggregation, the common streaming query:
 *   SOURCE -> WATERMARK -> WINDOW -> [FILTER] -> PROJECT(pre) -> AGG
 *          -> [FILTER(having)] -> PROJECT -> MATERIALIZE
 */
#include "planner_int.h"
#include "tz.h"
#include "numeric.h"
#include "weir_limits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- FROM ------------------------------------------------------------------ */


/* The stream key of window node w over in (whose n_in columns come first,
 * then window_start, window_end). A TUMBLE or SESSION row is in one window:
 * the input's key stays unique. A HOP row is in several windows, told apart
 * by their start; the windows of a CUMULATE row share their start and
 * differ by their end. A keyless append-only input keeps no key (the view
 * numbers its rows); a keyless changelog is one row, so its windows are
 * keyed by the window bound alone. */
static void window_keys(PlanCtx *p, PlanNode *w, const PlanNode *in, int n_in)
{
    if (!in->n_keys && in->append_only)
        return;
    int bound = w->win_kind == WIN_HOP ? n_in : w->win_kind == WIN_CUMULATE ? n_in + 1 : -1;
    w->n_keys = in->n_keys + (bound >= 0);
    w->keys = arena_alloc(p->b.a, sizeof(int) * (size_t)(w->n_keys + 1));
    if (in->n_keys)
        memcpy(w->keys, in->keys, sizeof(int) * (size_t)in->n_keys);
    if (bound >= 0)
        w->keys[in->n_keys] = bound;
    w->dup_keys = in->dup_keys;
}

static int plan_window(PlanCtx *p, const AstTableRef *t, Rel *out)
{
    BindCtx *b = &p->b;
    Rel in;
    if (t->input->kind == TREF_NAME) {
        if (plan_relation_name(p, t->input, &in))
            return -1;
    } else if (t->input->kind == TREF_SUBQUERY) {
        if (p->sub_select(p, t->input->subquery, &in, NULL))
            return -1;
    } else {
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, t->pos, "feature not supported: this window input");
    }
    if (t->win_partition && t->win_kind != WIN_SESSION)
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, t->pos, "feature not supported: PARTITION BY in this window");
    if (t->win_partition) {
        /* Sessions are kept per GROUP BY key; PARTITION BY names must at least exist. */
        for (int i = 0; i < ast_list_len(t->win_partition); i++)
            if (!bind_expr(b, &in.scope, AST_AT(t->win_partition, i)))
                return -1;
    }
    PlanExpr *tc = bind_expr(b, &in.scope, t->time_col);
    if (!tc)
        return -1;
    if (tc->kind != PE_COL || (tc->type != TYPE_TIMESTAMP && tc->type != TYPE_TIMESTAMPTZ))
        return werr(b->err, SQLSTATE_DATATYPE_MISMATCH, t->time_col->pos,
                    "the time column of a window must be a TIMESTAMP or TIMESTAMPTZ column");
    int nargs = ast_list_len(t->win_args);
    int64_t size = 0, slide = 0, offset = 0;
    if (t->win_kind == WIN_SESSION) {
        if (nargs != 1)
            return werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, t->pos, "SESSION takes (relation, time column, gap)");
        if (const_interval_us(b, &in.scope, AST_AT(t->win_args, 0), &size))
            return -1;
        slide = size;
    } else if (t->win_kind == WIN_TUMBLE) {
        if (nargs < 1 || nargs > 2)
            return werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, t->pos, "TUMBLE takes (relation, time column, size [, offset])");
        if (const_interval_us(b, &in.scope, AST_AT(t->win_args, 0), &size))
            return -1;
        slide = size;
        if (nargs == 2 && const_interval_us(b, &in.scope, AST_AT(t->win_args, 1), &offset))
            return -1;
    } else {
        const char *fname = t->win_kind == WIN_HOP ? "HOP" : "CUMULATE";
        if (nargs < 2 || nargs > 3)
            return werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, t->pos, "%s takes (relation, time column, %s [, offset])",
                        fname, t->win_kind == WIN_HOP ? "slide, size" : "step, max size");
        if (const_interval_us(b, &in.scope, AST_AT(t->win_args, 0), &slide) ||
            const_interval_us(b, &in.scope, AST_AT(t->win_args, 1), &size))
            return -1;
        if (nargs == 3 && const_interval_us(b, &in.scope, AST_AT(t->win_args, 2), &offset))
            return -1;
        if (slide > 0 && size % slide != 0)
            return werr(b->err, SQLSTATE_INVALID_PARAMETER, ((AstExpr *)AST_AT(t->win_args, 1))->pos,
                        "%s window size must be a multiple of the %s", fname, t->win_kind == WIN_HOP ? "slide" : "step");
        if (slide > 0 && size / slide > WEIR_MAX_WINDOWS_PER_ROW)
            return werr(b->err, SQLSTATE_PROGRAM_LIMIT, ((AstExpr *)AST_AT(t->win_args, 1))->pos,
                        "%s window size / %s must be at most %d", fname, t->win_kind == WIN_HOP ? "slide" : "step",
                        WEIR_MAX_WINDOWS_PER_ROW);
    }
    if (size <= 0 || slide <= 0)
        return werr(b->err, SQLSTATE_INVALID_PARAMETER, ((AstExpr *)AST_AT(t->win_args, 0))->pos, "window size must be positive");
    PlanNode *w = new_node(p, PN_WINDOW, in.node);
    w->win_kind = t->win_kind;
    w->win_time_col = tc->col;
    w->win_size_us = size;
    w->win_slide_us = slide;
    w->win_offset_us = offset;
    w->wm_col = in.node->wm_col;
    int n = in.scope.n;
    alloc_scope(b->a, &out->scope, n + 2);
    if (n > 0)
        memcpy(out->scope.cols, in.scope.cols, sizeof(ScopeCol) * (size_t)n);
    const char *qual = t->alias ? t->alias : (t->input->kind == TREF_NAME ? t->input->name : NULL);
    if (t->alias)
        for (int i = 0; i < n; i++)
            out->scope.cols[i].qualifier = t->alias;
    /* A cumulating window's start is shared by windows of several ends: only
     * window_end tells when a window closes. A session's bounds are known
     * only to the aggregation that merges rows into sessions. */
    bool sess = t->win_kind == WIN_SESSION;
    out->scope.cols[n] = (ScopeCol){.qualifier = qual, .name = "window_start", .type = tc->type,
                                    .role = sess ? ROLE_SESSION_START
                                          : t->win_kind == WIN_CUMULATE ? ROLE_NONE : ROLE_WINDOW_START,
                                    .win_size_us = size};
    out->scope.cols[n + 1] = (ScopeCol){.qualifier = qual, .name = "window_end", .type = tc->type,
                                        .role = sess ? ROLE_SESSION_END : ROLE_WINDOW_END, .win_size_us = size};
    if (sess && !p->session_pos)
        p->session_pos = t->pos;
    if (sess && in.scope.cols[tc->col].role != ROLE_EVENT_TIME)
        return werr(b->err, SQLSTATE_WINDOWING_ERROR, t->time_col->pos,
                    "SESSION windows need a time column with a WATERMARK (sessions close when it passes their end)");
    /* Without a watermark on the time column, nothing ever closes a window. */
    if (in.scope.cols[tc->col].role != ROLE_EVENT_TIME) {
        out->scope.cols[n].role = ROLE_NONE;
        out->scope.cols[n + 1].role = ROLE_NONE;
    }
    schema_from_scope(b->a, &w->out, &out->scope);
    if (p->plan_rev >= 3)
        window_keys(p, w, in.node, n);
    out->node = w;
    return 0;
}



static bool binds(BindCtx *b, const Scope *s, const AstExpr *e);
static AstExpr *and_of(Arena *a, AstExpr *l, const AstExpr *r);
static int plan_tref_node(PlanCtx *p, const AstTableRef *t, Rel *out);

/* Only a tree of inner joins takes WHERE conjuncts into its ONs (plan_from):
 * anything else below it (a subquery, a window function's input, the
 * preserved or padded side of an outer join) plans without them. */
int plan_tref(PlanCtx *p, const AstTableRef *t, Rel *out)
{
    const AstExpr **conj = p->where_conj;
    bool inner = t->kind == TREF_JOIN && (t->join_type == JOIN_INNER || t->join_type == JOIN_CROSS) &&
                 !t->using_cols && !(t->right->kind == TREF_NAME && t->right->system_time);
    if (!conj || inner)
        return plan_tref_node(p, t, out);
    p->where_conj = NULL;
    int rc = plan_tref_node(p, t, out);
    p->where_conj = conj;
    return rc;
}

/* The ON of inner join t, with the WHERE conjuncts not taken yet that need
 * both of its sides (l and r planned): for an inner join ON and WHERE mean
 * the same, and in ON a time bound makes an interval join and an equality a
 * hash key. WHERE is still applied in full above the join. */
static const AstExpr *join_on_with_where(PlanCtx *p, const AstTableRef *t, const Rel *l, const Rel *r)
{
    BindCtx *b = &p->b;
    const AstExpr *on = t->on;
    if (!p->where_conj)
        return on;
    Scope both;
    alloc_scope(b->a, &both, l->scope.n + r->scope.n);
    memcpy(both.cols, l->scope.cols, sizeof(ScopeCol) * (size_t)l->scope.n);
    memcpy(both.cols + l->scope.n, r->scope.cols, sizeof(ScopeCol) * (size_t)r->scope.n);
    for (int k = 0; k < p->where_n; k++) {
        const AstExpr *c = p->where_conj[k];
        if (p->where_used[k] || !binds(b, &both, c) || binds(b, &l->scope, c) || binds(b, &r->scope, c))
            continue;
        p->where_used[k] = true;
        on = on ? and_of(b->a, (AstExpr *)on, c) : c;
    }
    return on;
}

static int plan_tref_node(PlanCtx *p, const AstTableRef *t, Rel *out)
{
    BindCtx *b = &p->b;
    switch (t->kind) {
    case TREF_NAME: return plan_relation_name(p, t, out);
    case TREF_WINDOW: return plan_window(p, t, out);
    case TREF_SUBQUERY: {
        if (t->subquery == p->topn_sub) {
            p->topn_sub = NULL;
            if (plan_topn(p, t->subquery, out))
                return -1;
        } else if (p->sub_select(p, t->subquery, out, NULL))
            return -1;
        const char *q = t->alias;
        for (int i = 0; i < out->scope.n; i++) {
            out->scope.cols[i].qualifier = q;
            if (t->col_aliases && i < ast_list_len(t->col_aliases))
                out->scope.cols[i].name = AST_AT(t->col_aliases, i);
        }
        return 0;
    }
    case TREF_JOIN: {
        Rel l, r;
        if (t->right->kind == TREF_NAME && t->right->system_time)
            return plan_temporal_check(p, t) || plan_tref(p, t->left, &l) ? -1 : plan_temporal_join(p, t, &l, out);
        if (plan_tref(p, t->left, &l) || plan_tref(p, t->right, &r))
            return -1;
        return make_join(p, t->join_type, join_on_with_where(p, t, &l, &r), t->using_cols, &l, &r, t->pos, out);
    }
    }
    return werr(b->err, SQLSTATE_INTERNAL, t->pos, "unknown FROM item");
}

/* The AND-ed parts of e (NULL: none), at most cap: the rest are not
 * offered to the joins as ON terms (WHERE still applies them all). */
static void split_and(const AstExpr *e, const AstExpr **out, int *n, int cap)
{
    if (!e)
        return;
    if (e->kind == AST_BINARY && e->op == OP_AND) {
        for (int i = 0; i < ast_list_len(e->args); i++)
            split_and(AST_AT(e->args, i), out, n, cap);
    } else if (*n < cap) {
        out[(*n)++] = e;
    }
}

/* Does e bind against scope s (every column it names is there)? Errors are
 * not reported: the caller binds e for real later. */
static bool binds(BindCtx *b, const Scope *s, const AstExpr *e)
{
    WError tmp = {0}, *saved = b->err;
    b->err = &tmp;
    PlanExpr *x = bind_expr(b, s, e);
    b->err = saved;
    return x != NULL && !tmp.set;
}

static AstExpr *and_of(Arena *a, AstExpr *l, const AstExpr *r)
{
    AstExpr *e = arena_zalloc(a, sizeof *e);
    e->kind = AST_BINARY;
    e->op = OP_AND;
    e->pos = l->pos;
    e->args = arena_zalloc(a, sizeof *e->args);
    e->args->items = arena_alloc(a, 2 * sizeof(void *));
    e->args->items[0] = l;
    e->args->items[1] = (void *)r;
    e->args->n = e->args->cap = 2;
    return e;
}

static int plan_from_items(PlanCtx *p, const AstSelect *sel, int n, const AstExpr **conj, bool *used, int nc,
                           Rel *out);

int plan_from(PlanCtx *p, const AstSelect *sel, Rel *out)
{
    BindCtx *b = &p->b;
    int n = ast_list_len(sel->from);
    if (n == 0) {
        if (p->streaming)
            return werr(b->err, SQLSTATE_NOT_SUPPORTED, sel->pos, "feature not supported: a materialized view without FROM");
        PlanNode *v = new_node(p, PN_VALUES, NULL);
        v->n_rows = 1;
        v->rows = arena_zalloc(b->a, sizeof(Value *));
        v->rows[0] = arena_zalloc(b->a, sizeof(Value));
        v->append_only = true;
        alloc_schema(b->a, &v->out, 0);
        alloc_scope(b->a, &out->scope, 0);
        out->node = v;
        return 0;
    }
    /* A comma list is a chain of cross joins, left to right. The WHERE
     * conjuncts that first become bindable when a relation is added are that
     * join's ON as well, so `FROM a, b WHERE a.k = b.k` is an equi-join (or
     * an interval join) instead of a cross product filtered afterwards. WHERE
     * is still applied in full after the joins: for inner joins ON and WHERE
     * mean the same, so the copy changes nothing but the plan. */
    /* Only the first MAX_JOIN_WHERE_CONJUNCTS are offered to the joins: a
     * later one is still applied as WHERE, so the bound costs a plan, never a
     * row. */
    enum { MAX_JOIN_WHERE_CONJUNCTS = 256 };
    const AstExpr *conj[MAX_JOIN_WHERE_CONJUNCTS];
    bool used[MAX_JOIN_WHERE_CONJUNCTS] = {false};
    int nc = 0;
    split_and(sel->where, conj, &nc, MAX_JOIN_WHERE_CONJUNCTS);
    /* Since revision 1 an explicit inner JOIN takes them too (plan_tref). The
     * context is this SELECT's: a nested one sets its own. */
    const AstExpr **outer_conj = p->where_conj;
    bool *outer_used = p->where_used;
    int outer_n = p->where_n;
    p->where_conj = p->plan_rev >= 1 && nc ? conj : NULL;
    p->where_used = used;
    p->where_n = nc;
    int rc = plan_from_items(p, sel, n, conj, used, nc, out);
    p->where_conj = outer_conj;
    p->where_used = outer_used;
    p->where_n = outer_n;
    return rc;
}

static int plan_from_items(PlanCtx *p, const AstSelect *sel, int n, const AstExpr **conj, bool *used, int nc, Rel *out)
{
    BindCtx *b = &p->b;
    if (plan_tref(p, AST_AT(sel->from, 0), out))
        return -1;
    for (int i = 1; i < n; i++) {
        Rel r;
        const AstTableRef *t = AST_AT(sel->from, i);
        if (plan_tref(p, t, &r))
            return -1;
        AstExpr *on = NULL;
        if (nc) {
            Scope both;
            alloc_scope(b->a, &both, out->scope.n + r.scope.n);
            memcpy(both.cols, out->scope.cols, sizeof(ScopeCol) * (size_t)out->scope.n);
            memcpy(both.cols + out->scope.n, r.scope.cols, sizeof(ScopeCol) * (size_t)r.scope.n);
            for (int k = 0; k < nc; k++) {
                if (used[k] || !binds(b, &both, conj[k]) || binds(b, &out->scope, conj[k]) || binds(b, &r.scope, conj[k]))
                    continue;
                used[k] = true;
                on = on ? and_of(b->a, on, conj[k]) : (AstExpr *)conj[k];
            }
        }
        if (make_join(p, JOIN_CROSS, on, NULL, out, &r, t->pos, out))
            return -1;
    }
    return 0;
}
