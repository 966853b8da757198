/*
 * plan_topn.c: the Top-N pass. Lowers the logical order/limit kinds that keep
 * the first rows per partition: ROW_NUMBER() OVER (...) filtered by rn <= N
 * outside (plan_topn_mark finds the pattern, plan_topn lowers the inner
 * select), DISTINCT ON (a Top-1 per key), and LIMIT/OFFSET inside a query
 * (make_limit_topn: no partition, the row number is the key). A window bound
 * in the partition key lets the watermark clean a Top-N's state.
 */
#include "planner_int.h"

#include <stdlib.h>
#include <string.h>

/* The ROW_NUMBER() OVER target of a select, or -1. */
static int row_number_target(const AstSelect *s)
{
    for (int i = 0; i < ast_list_len(s->targets); i++) {
        const AstTarget *t = AST_AT(s->targets, i);
        if (t->expr->kind == AST_FUNC && t->expr->over && strcmp(t->expr->text, "row_number") == 0)
            return i;
    }
    return -1;
}

/* Finds `rn <= N`, `rn < N`, `rn = 1` (or reversed) among the AND-ed terms of w. */

/* A Top-N partitioned by a window with a watermark: a window's rows are final
 * once the watermark passes its end, and its state can go. Sets t's window
 * bound from its partition columns (t->part_cols over scope s). */
static void topn_window_bound(PlanNode *t, const Scope *s)
{
    t->win_group_idx = -1;
    for (int i = 0; i < t->n_part && t->win_group_idx < 0; i++) {
        const ScopeCol *c = &s->cols[t->part_cols[i]];
        if (c->role == ROLE_WINDOW_END || c->role == ROLE_WINDOW_START) {
            t->win_group_idx = i;
            t->win_end_offset_us = c->role == ROLE_WINDOW_START ? c->win_size_us : 0;
        }
    }
}

static bool rn_limit(const AstExpr *w, const char *rn, int64_t *n)
{
    if (!w)
        return false;
    if (w->kind == AST_BINARY && w->op == OP_AND) {
        for (int i = 0; i < ast_list_len(w->args); i++)
            if (rn_limit(AST_AT(w->args, i), rn, n))
                return true;
        return false;
    }
    if (w->kind != AST_BINARY)
        return false;
    const AstExpr *x = AST_AT(w->args, 0), *y = AST_AT(w->args, 1);
    AstOp op = w->op;
    if (y->kind == AST_COLUMN && x->kind == AST_LITERAL) {
        const AstExpr *t = x;
        x = y;
        y = t;
        op = op == OP_GE ? OP_LE : op == OP_GT ? OP_LT : op == OP_LE ? OP_GE : op == OP_LT ? OP_GT : op;
    }
    if (x->kind != AST_COLUMN || strcmp(x->text, rn) != 0 || y->kind != AST_LITERAL || y->lit_kind != LIT_INT)
        return false;
    int64_t v = atoll(y->text);
    if (op == OP_LE)
        *n = v;
    else if (op == OP_LT)
        *n = v - 1;
    else if (op == OP_EQ && v == 1)
        *n = 1;
    else
        return false;
    return *n >= 1;
}

/* SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER (...) AS rn FROM ...) WHERE
 * rn <= N: records the inner select and N in p (topn_sub, topn_n) so that
 * planning the FROM item makes a Top-N of it (plan_topn). 0, or -1 with err
 * (a row number without that filter, or N past the limit). */
int plan_topn_mark(PlanCtx *p, const AstSelect *sel)
{
    BindCtx *b = &p->b;
    if (ast_list_len(sel->from) != 1)
        return 0;
    const AstTableRef *t0 = AST_AT(sel->from, 0);
    CteEnv *ce = t0->kind == TREF_NAME ? find_cte(p, t0->name) : NULL;
    const AstSelect *sub = t0->kind == TREF_SUBQUERY ? t0->subquery : ce ? ce->cte->query : NULL;
    if (!sub || sub->set_op != SETOP_NONE || sub->values)
        return 0;
    int ti = row_number_target(sub);
    if (ti < 0)
        return 0;
    const AstTarget *rt = AST_AT(sub->targets, ti);
    int64_t n = 0;
    if (!rn_limit(sel->where, rt->alias ? rt->alias : "row_number", &n))
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, rt->pos,
                    "feature not supported: ROW_NUMBER() OVER without an outer filter rn <= N"),
               werr_hint(b->err, "Top-N and deduplication: SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER "
                                 "(PARTITION BY .. ORDER BY ..) AS rn FROM ..) WHERE rn <= 3"), -1;
    if (n > WEIR_MAX_TOPN_ROWS)
        return werr(b->err, SQLSTATE_PROGRAM_LIMIT, sel->pos, "a Top-N keeps at most %d rows per partition",
                    WEIR_MAX_TOPN_ROWS);
    p->topn_sub = sub;
    p->topn_n = n;
    return 0;
}

/* Whether projection columns a and b of pr compute the same input column. */
static bool same_input_col(const PlanNode *pr, int a, int b)
{
    const PlanExpr *x = pr->exprs[a], *y = pr->exprs[b];
    return x->kind == PE_COL && y->kind == PE_COL && x->col == y->col;
}

/* A deduplication (Top-1 per partition, planner revision 7) keyed so that a
 * view of it can be the versioned side of a temporal join, as in Flink: a
 * PARTITION BY expression that is also a selected column partitions by that
 * column (so the view's key is the visible column, not a hidden copy), and
 * ORDER BY the event-time column DESC keeps its watermark: every row the
 * Top-1 emits is an input row, and over an append-only input a row replaces
 * the kept one only with a later time, so the kept versions' times follow
 * the input's watermark. (Over a changelog, deleting the kept row brings an
 * older one back: downstream that is a late row, as any input row behind
 * the watermark.) in is the Top-N's input (its PARTITION BY and ORDER BY
 * copies from base). */
static void dedup_columns(PlanNode *t, const PlanNode *in, int base, const Scope *s)
{
    t->wm_col = -1;
    if (in->kind != PN_PROJECT)
        return;
    for (int i = 0; i < t->n_part; i++)
        for (int k = 0; k < base; k++)
            if (!s->cols[k].hidden && same_input_col(in, k, base + i)) {
                t->part_cols[i] = k;
                break;
            }
    if (t->n_order_cols == 1 && t->order_desc[0] && in->wm_col >= 0 && in->wm_col != t->order_cols[0] &&
        same_input_col(in, in->wm_col, t->order_cols[0]))
        t->wm_col = in->wm_col;
}

int plan_topn(PlanCtx *p, const AstSelect *inner, Rel *out)
{
    BindCtx *b = &p->b;
    int ti = row_number_target(inner);
    const AstTarget *rt = AST_AT(inner->targets, ti);
    const AstWindowSpec *over = rt->expr->over;
    if (ast_list_len(rt->expr->args))
        return werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, rt->pos, "row_number() takes no arguments");
    if (!ast_list_len(over->order_by))
        return werr(b->err, SQLSTATE_SYNTAX_ERROR, rt->pos, "ROW_NUMBER() OVER needs an ORDER BY");
    /* The inner select without its row number, plus its PARTITION BY and ORDER
     * BY expressions as hidden columns: that is the input of the Top-N. */
    int np = ast_list_len(over->partition_by), no = ast_list_len(over->order_by);
    AstSelect copy = *inner;
    AstList *targets = NULL;
    for (int i = 0; i < ast_list_len(inner->targets); i++)
        if (i != ti)
            targets = ast_list_append(b->a, targets, AST_AT(inner->targets, i));
    for (int i = 0; i < np + no; i++) {
        AstTarget *x = arena_zalloc(b->a, sizeof *x);
        x->expr = i < np ? AST_AT(over->partition_by, i) : ((AstOrderItem *)AST_AT(over->order_by, i - np))->expr;
        x->alias = arena_printf(b->a, "_rank_key%d", i);
        x->pos = x->expr->pos;
        targets = ast_list_append(b->a, targets, x);
    }
    copy.targets = targets;
    Rel in;
    if (p->sub_select(p, &copy, &in, NULL))
        return -1;
    /* The rank keys are the last targets, but not the last columns: a
     * streaming projection appends its input's key columns after the targets
     * (a join's, when its keys are not selected), so they are found by name
     * (the last _rank_key0: they follow every target of the user's). */
    int base = -1;
    for (int i = 0; i < in.scope.n; i++)
        if (strcmp(in.scope.cols[i].name, "_rank_key0") == 0)
            base = i;
    if (base < 0 || base + np + no > in.scope.n)
        return werr(b->err, SQLSTATE_INTERNAL, rt->pos, "ROW_NUMBER(): the PARTITION BY and ORDER BY columns were not planned");
    for (int i = base; i < base + np + no; i++) {
        in.scope.cols[i].hidden = true;
        in.node->out.hidden[i] = true;
    }
    PlanNode *t = new_node(p, PN_TOPN, in.node);
    t->n_part = np;
    t->part_cols = arena_alloc(b->a, sizeof(int) * (size_t)(np + 1));
    t->n_order_cols = no;
    t->order_cols = arena_alloc(b->a, sizeof(int) * (size_t)(no + 1));
    t->order_desc = arena_zalloc(b->a, sizeof(bool) * (size_t)(no + 1));
    t->order_nulls_first = arena_zalloc(b->a, sizeof(bool) * (size_t)(no + 1));
    for (int i = 0; i < np + no; i++) {
        if (i < np) {
            t->part_cols[i] = base + i;
        } else {
            const AstOrderItem *o = AST_AT(over->order_by, i - np);
            t->order_cols[i - np] = base + i;
            t->order_desc[i - np] = o->desc;
            t->order_nulls_first[i - np] = o->nulls == 1 || (o->nulls == 0 && o->desc);
        }
    }
    t->topn_limit = p->topn_n;
    bool dedup = p->plan_rev >= 7 && p->topn_n == 1 && np > 0;
    if (dedup)
        dedup_columns(t, in.node, base, &in.scope);
    else
        t->wm_col = -1;
    topn_window_bound(t, &in.scope);
    t->table_id = new_table(p);
    t->append_only = false;
    int n = in.scope.n;
    alloc_scope(b->a, &out->scope, n + 1);
    memcpy(out->scope.cols, in.scope.cols, sizeof(ScopeCol) * (size_t)n);
    out->scope.cols[n] = (ScopeCol){.name = rt->alias ? arena_strdup(b->a, rt->alias) : "row_number", .type = TYPE_INT8};
    schema_from_scope(b->a, &t->out, &out->scope);
    if (dedup) {
        /* rn is always 1: the partition alone is the key. */
        t->n_keys = np;
        t->keys = t->part_cols;
        out->node = t;
        return 0;
    }
    /* Each (partition, rank) holds one row. */
    t->n_keys = np + 1;
    t->keys = arena_alloc(b->a, sizeof(int) * (size_t)(np + 1));
    for (int i = 0; i < np; i++)
        t->keys[i] = t->part_cols[i];
    t->keys[np] = n;
    out->node = t;
    return 0;
}

/* DISTINCT ON: a Top-1 per DISTINCT ON key ordered by ORDER BY (the Top-N
 * operator with N = 1), then a projection that drops the row number. With
 * no ORDER BY the row kept is an arbitrary one, as in Postgres (here: the
 * one whose encoding hashes lowest). */
PlanNode *make_distinct_on(PlanCtx *p, PlanNode *cur, const Scope *scope, int n_part, const int *part,
                           int n_order, const PlanOrder *order, int n_visible, bool keep_hidden)
{
    BindCtx *b = &p->b;
    PlanNode *t = topn_new(p, cur, n_order, order);
    t->n_part = n_part;
    t->part_cols = arena_alloc(b->a, sizeof(int) * (size_t)(n_part + 1));
    memcpy(t->part_cols, part, sizeof(int) * (size_t)n_part);
    t->topn_limit = 1;
    topn_window_bound(t, scope);
    t->table_id = new_table(p);
    t->append_only = false;
    t->wm_col = -1;
    int n = cur->out.n;
    /* One row per key: the DISTINCT ON columns are the key. */
    t->n_keys = n_part;
    t->keys = t->part_cols;
    /* The visible columns, then the hidden ones an ad hoc query sorts by, or
     * (in a view) only the hidden DISTINCT ON columns, which are the key. */
    PlanNode *pr = new_node(p, PN_PROJECT, t);
    pr->exprs = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(n + 1));
    pr->keys = arena_alloc(b->a, sizeof(int) * (size_t)(n_part + 1));
    int *map = arena_alloc(b->a, sizeof(int) * (size_t)(n + 1));
    int k = 0;
    for (int i = 0; i < n; i++) {
        bool is_part = false;
        for (int j = 0; j < n_part; j++)
            is_part |= part[j] == i;
        map[i] = -1;
        if (i < n_visible || keep_hidden || is_part) {
            map[i] = k;
            pr->exprs[k++] = make_col(b, i, cur->out.types[i]);
        }
    }
    pr->n_exprs = k;
    alloc_schema(b->a, &pr->out, k);
    for (int i = 0; i < n; i++)
        if (map[i] >= 0) {
            pr->out.names[map[i]] = cur->out.names[i];
            pr->out.types[map[i]] = cur->out.types[i];
            pr->out.hidden[map[i]] = cur->out.hidden[i];
        }
    pr->n_keys = n_part;
    for (int j = 0; j < n_part; j++)
        pr->keys[j] = map[part[j]];
    pr->append_only = false;
    return pr;
}

/* LIMIT/OFFSET inside a query: a Top-N without partition keeping the
 * first n_visible columns and the row number as the key. */
int make_limit_topn(PlanCtx *p, const AstSelect *sel, Rel *r, int n_order, const PlanOrder *order, int n_visible)
{
    BindCtx *b = &p->b;
    int64_t limit, offset;
    if (limit_values(p, sel, &limit, &offset))
        return -1;
    const AstExpr *where = sel->limit ? sel->limit : sel->offset;
    if (limit < 0)
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, where->pos,
                    "feature not supported: OFFSET without LIMIT inside a query");
    if (limit > WEIR_MAX_TOPN_ROWS || offset > WEIR_MAX_TOPN_ROWS - limit)
        return werr(b->err, SQLSTATE_PROGRAM_LIMIT, where->pos,
                    "a LIMIT inside a query keeps at most %d rows (LIMIT + OFFSET)", WEIR_MAX_TOPN_ROWS);
    PlanNode *cur = r->node;
    int n = cur->out.n;
    PlanNode *t = topn_new(p, cur, n_order, order);
    t->topn_limit = limit + offset;
    t->win_group_idx = -1;
    t->table_id = new_table(p);
    t->append_only = false;
    t->wm_col = -1;
    t->n_keys = 1;
    t->keys = arena_alloc(b->a, sizeof(int));
    t->keys[0] = n;
    PlanNode *in = t;
    if (offset > 0) {
        /* The first OFFSET ranks are cut, the rest kept. */
        PlanExpr *args[2] = {make_col(b, n, TYPE_INT8), make_const(b, value_int(TYPE_INT8, offset))};
        PlanExpr *gt = arena_zalloc(b->a, sizeof *gt);
        *gt = (PlanExpr){.kind = PE_CALL, .fn = FN_GT, .type = TYPE_BOOL, .n_args = 2,
                         .args = arena_alloc(b->a, sizeof(PlanExpr *) * 2)};
        gt->args[0] = args[0];
        gt->args[1] = args[1];
        PlanNode *f = new_node(p, PN_FILTER, t);
        f->pred = gt;
        f->out = t->out;
        f->n_keys = t->n_keys;
        f->keys = t->keys;
        in = f;
    }
    /* The visible columns and the row number (the key). */
    PlanNode *pr = new_node(p, PN_PROJECT, in);
    pr->n_exprs = n_visible + 1;
    pr->exprs = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(n_visible + 1));
    Scope sc;
    alloc_scope(b->a, &sc, n_visible + 1);
    for (int i = 0; i < n_visible; i++) {
        pr->exprs[i] = make_col(b, i, cur->out.types[i]);
        sc.cols[i] = r->scope.cols[i];
        sc.cols[i].role = ROLE_NONE;
    }
    pr->exprs[n_visible] = make_col(b, n, TYPE_INT8);
    sc.cols[n_visible] = (ScopeCol){.name = "_row_number", .type = TYPE_INT8, .hidden = true};
    schema_from_scope(b->a, &pr->out, &sc);
    pr->n_keys = 1;
    pr->keys = arena_alloc(b->a, sizeof(int));
    pr->keys[0] = n_visible;
    pr->append_only = false;
    pr->wm_col = -1;
    r->node = pr;
    r->scope = sc;
    return 0;
}
