/*
 * plan_subq.c: subqueries in expressions, decorrelated into joins.
 *
 *   WHERE [NOT] EXISTS (SELECT ...)      a SemiJoin (AntiJoin) of the rows with the subquery
 *   WHERE x [NOT] IN (SELECT y ...)      the same, matching x = y, with SQL's NULL rules
 *   (SELECT agg(...) FROM ...)           a ScalarJoin: the subquery's value added as a column
 *   EXISTS / IN anywhere else            a MarkJoin: the verdict (TRUE/FALSE/NULL) as a column
 *
 * The decorrelation is Flink's and RisingWave's: conditions of the
 * subquery's WHERE that equate an inner expression with an outer one
 * (`b.k = a.k`) are taken out of it; the inner expressions become the first
 * columns of the subquery (and GROUP BY keys of an aggregating one, so a
 * scalar aggregate is computed per correlation key), the outer ones the
 * left keys of the join (PN_SEMI_JOIN, runtime/op_semijoin.c). Any other
 * condition naming an outer column is refused (0A000).
 *
 * The subquery is planned inside plan_select_core(): the correlation is
 * only known once the subquery's FROM is, so plan_select_core() calls
 * subq_correlate() for the select named in PlanCtx.corr right after its
 * FROM. A scalar aggregate over no rows still has a value (count(*) is 0):
 * the join adds that value (its "default", the subquery's select list
 * evaluated over an empty group) for a group with no row.
 */
#include "planner_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONJ 1024

bool ast_contains_subquery(const AstExpr *e)
{
    if (!e)
        return false;
    if (e->kind == AST_SUBQUERY)
        return true;
    for (int i = 0; i < ast_list_len(e->args); i++)
        if (ast_contains_subquery(AST_AT(e->args, i)))
            return true;
    for (int i = 0; i < ast_list_len(e->whens); i++)
        if (ast_contains_subquery(AST_AT(e->whens, i)))
            return true;
    return ast_contains_subquery(e->arg) || ast_contains_subquery(e->lo) || ast_contains_subquery(e->hi) ||
           ast_contains_subquery(e->else_) || ast_contains_subquery(e->filter);
}

/* The AND-ed parts of e; false (with err) when there are more than cap. */
static bool and_parts(BindCtx *b, const AstExpr *e, const AstExpr **out, int *n, int cap)
{
    if (!e)
        return true;
    if (e->kind == AST_BINARY && e->op == OP_AND) {
        for (int i = 0; i < ast_list_len(e->args); i++)
            if (!and_parts(b, AST_AT(e->args, i), out, n, cap))
                return false;
        return true;
    }
    if (*n >= cap) {
        werr(b->err, SQLSTATE_PROGRAM_LIMIT, e->pos, "too many AND-ed conditions (at most %d)", cap);
        return false;
    }
    out[(*n)++] = e;
    return true;
}

static AstExpr *ast_and(Arena *a, AstExpr *l, const AstExpr *r)
{
    if (!l)
        return (AstExpr *)r;
    AstExpr *e = arena_zalloc(a, sizeof *e);
    e->kind = AST_BINARY;
    e->op = OP_AND;
    e->pos = l->pos;
    e->args = ast_list_append(a, NULL, l);
    ast_list_append(a, e->args, (void *)r);
    return e;
}

/* Does e bind against s? Errors are not kept (the caller decides). */
static bool binds_in(BindCtx *b, const Scope *s, const AstExpr *e)
{
    WError tmp = {0}, *saved = b->err;
    b->err = &tmp;
    PlanExpr *x = bind_expr(b, s, e);
    b->err = saved;
    return x && !tmp.set;
}

static bool select_grouped(const AstSelect *s)
{
    if (s->group_by || s->having)
        return true;
    for (int i = 0; i < ast_list_len(s->targets); i++)
        if (ast_contains_aggregate(((const AstTarget *)AST_AT(s->targets, i))->expr))
            return true;
    return false;
}

static AstTarget *corr_target(Arena *a, const AstExpr *e, int i)
{
    AstTarget *t = arena_zalloc(a, sizeof *t);
    t->expr = (AstExpr *)e;
    t->alias = arena_printf(a, "_corr%d", i);
    t->pos = e->pos;
    return t;
}

int subq_correlate(PlanCtx *p, const AstSelect *sel, const Scope *inner, const AstSelect **out)
{
    BindCtx *b = &p->b;
    SubqCorr *cc = p->corr;
    p->corr = NULL;
    cc->grouped = select_grouped(sel);
    cc->had_group_by = sel->group_by != NULL;
    const AstExpr *conj[MAX_CONJ];
    int nc = 0;
    if (!and_parts(b, sel->where, conj, &nc, MAX_CONJ))
        return -1;
    AstExpr *kept = NULL;
    for (int i = 0; i < nc; i++) {
        const AstExpr *c = conj[i];
        if (ast_contains_subquery(c) || binds_in(b, inner, c)) {
            kept = ast_and(b->a, kept, c);
            continue;
        }
        const AstExpr *x = c->kind == AST_BINARY && c->op == OP_EQ ? AST_AT(c->args, 0) : NULL;
        const AstExpr *y = x ? AST_AT(c->args, 1) : NULL;
        if (x && binds_in(b, inner, x) && binds_in(b, cc->outer, y)) {
        } else if (x && binds_in(b, inner, y) && binds_in(b, cc->outer, x)) {
            const AstExpr *t = x;
            x = y;
            y = t;
        } else {
            /* Not even with the outer columns: a name nobody knows, the binder's error. */
            Scope both;
            alloc_scope(b->a, &both, inner->n + cc->outer->n);
            memcpy(both.cols, inner->cols, sizeof(ScopeCol) * (size_t)inner->n);
            memcpy(both.cols + inner->n, cc->outer->cols, sizeof(ScopeCol) * (size_t)cc->outer->n);
            if (!binds_in(b, &both, c)) {
                bind_expr(b, inner, c);
                if (b->err->set)
                    return -1;
            }
            werr(b->err, SQLSTATE_NOT_SUPPORTED, c->pos,
                 "feature not supported: a correlated subquery condition other than inner = outer");
            werr_hint(b->err, "A subquery may refer to the outer query only in AND-ed equalities of its WHERE, "
                              "such as WHERE b.k = a.k.");
            return -1;
        }
        if (cc->n == SUBQ_MAX_CORR)
            return werr(b->err, SQLSTATE_PROGRAM_LIMIT, c->pos, "too many correlated conditions (at most %d)",
                        SUBQ_MAX_CORR);
        cc->inner[cc->n] = x;
        cc->outer_e[cc->n++] = y;
    }
    if (cc->n == 0)
        return 0;
    /* LIMIT cuts the rows of each correlation value, not of all: only EXISTS's
     * LIMIT n (n >= 1) is harmless (it cannot change whether a row exists). */
    bool exists_limit = cc->kind == SUBQ_EXISTS && sel->limit && !sel->offset && sel->limit->kind == AST_LITERAL &&
                        sel->limit->lit_kind == LIT_INT && atoll(sel->limit->text) >= 1;
    if ((sel->limit || sel->offset) && !exists_limit)
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, (sel->limit ? sel->limit : sel->offset)->pos,
                    "feature not supported: LIMIT or OFFSET in a correlated subquery");
    if (cc->kind == SUBQ_SCALAR && sel->having)
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, sel->having->pos,
                    "feature not supported: HAVING in a correlated scalar subquery");
    if (cc->kind != SUBQ_SCALAR && cc->grouped)
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, sel->pos,
                    "feature not supported: a correlated %s subquery with aggregates or GROUP BY",
                    cc->kind == SUBQ_IN ? "IN" : "EXISTS");
    AstSelect *m = arena_alloc(b->a, sizeof *m);
    *m = *sel;
    m->where = kept;
    m->limit = m->offset = NULL;
    m->order_by = NULL;
    AstList *targets = NULL;
    for (int i = 0; i < cc->n; i++)
        targets = ast_list_append(b->a, targets, corr_target(b->a, cc->inner[i], i));
    if (cc->kind != SUBQ_EXISTS)
        for (int i = 0; i < ast_list_len(sel->targets); i++)
            targets = ast_list_append(b->a, targets, AST_AT(sel->targets, i));
    m->targets = targets;
    if (cc->kind == SUBQ_EXISTS) {
        m->distinct = false; /* which rows, not how many, is what EXISTS asks */
        m->distinct_on = NULL;
    }
    if (cc->grouped) {
        /* The aggregate per correlation key; GROUP BY ordinals move past the added columns. */
        AstList *g = NULL;
        for (int i = 0; i < cc->n; i++)
            g = ast_list_append(b->a, g, (void *)cc->inner[i]);
        for (int i = 0; i < ast_list_len(sel->group_by); i++) {
            AstExpr *e = AST_AT(sel->group_by, i);
            if (e->kind == AST_LITERAL && e->lit_kind == LIT_INT) {
                AstExpr *k = arena_alloc(b->a, sizeof *k);
                *k = *e;
                k->text = arena_printf(b->a, "%d", atoi(e->text) + cc->n);
                e = k;
            }
            g = ast_list_append(b->a, g, e);
        }
        m->group_by = g;
    }
    *out = m;
    return 0;
}

/* ---- the join ------------------------------------------------------------------ */

/* Columns of r holding exprs[0..n) (bound against r's scope): plain columns
 * are used as they are, the rest are added (hidden) by a projection that
 * keeps every column where it was. */
static int ensure_cols(PlanCtx *p, Rel *r, int n, PlanExpr **exprs, int *cols)
{
    BindCtx *b = &p->b;
    int extra = 0;
    for (int i = 0; i < n; i++)
        extra += exprs[i]->kind != PE_COL;
    if (!extra) {
        for (int i = 0; i < n; i++)
            cols[i] = exprs[i]->col;
        return 0;
    }
    int nr = r->scope.n, total = nr + extra;
    PlanExpr **all = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)total);
    const char **names = arena_alloc(b->a, sizeof(char *) * (size_t)total);
    for (int i = 0; i < nr; i++) {
        all[i] = make_col(b, i, r->scope.cols[i].type);
        names[i] = r->scope.cols[i].name;
    }
    for (int i = 0, k = nr; i < n; i++) {
        if (exprs[i]->kind == PE_COL) {
            cols[i] = exprs[i]->col;
            continue;
        }
        all[k] = exprs[i];
        names[k] = arena_printf(b->a, "_subq_key%d", k);
        cols[i] = k++;
    }
    Scope sc;
    PlanNode *pr = make_project(p, r->node, &r->scope, total, all, names, NULL, &sc, true);
    for (int i = 0; i < total; i++) {
        if (i < nr)
            sc.cols[i] = r->scope.cols[i];
        else
            sc.cols[i].hidden = true;
        pr->out.hidden[i] = sc.cols[i].hidden;
    }
    /* The key columns are all kept: a projection of every column needs no hidden copies. */
    r->node = pr;
    r->scope = sc;
    return 0;
}

/* A copy of e with the aggregation's output columns replaced by their value
 * over no rows: count 0, any other aggregate NULL (group columns NULL). */
static PlanExpr *over_empty(BindCtx *b, const PlanExpr *e, const PlanNode *agg)
{
    if (e->kind == PE_COL) {
        int a = e->col - agg->n_group;
        if (a >= 0 && a < agg->n_aggs && (agg->aggs[a].kind == AGG_COUNT_STAR || agg->aggs[a].kind == AGG_COUNT ||
                                          agg->aggs[a].kind == AGG_COUNT_DISTINCT))
            return make_const(b, value_int(e->type, 0));
        return make_const(b, value_null(e->type));
    }
    PlanExpr *c = arena_alloc(b->a, sizeof *c);
    *c = *e;
    if (e->kind == PE_CALL) {
        c->args = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(e->n_args ? e->n_args : 1));
        for (int i = 0; i < e->n_args; i++)
            c->args[i] = over_empty(b, e->args[i], agg);
    }
    return c;
}

/* The value of a correlated global aggregate subquery for a key without
 * rows: its column `col` (of the final projection proj over the
 * aggregation; HAVING is refused there) evaluated over an empty group. */
static int empty_value(BindCtx *b, const PlanNode *proj, int col, TypeId t, Value *out)
{
    *out = value_null(t);
    const PlanNode *agg = proj->n_inputs ? proj->inputs[0] : NULL;
    if (proj->kind != PN_PROJECT || !agg || agg->kind != PN_AGG || col >= proj->n_exprs)
        return 0;
    if (eval_const(b, over_empty(b, proj->exprs[col], agg), out))
        return -1;
    out->type = t;
    return 0;
}

/* Maps the subquery expression e to column col of the scope (newest first wins). */
static void map_subq(BindCtx *b, const AstExpr *e, int col)
{
    if (b->n_subq == b->cap_subq) {
        int cap = b->cap_subq ? b->cap_subq * 2 : 8;
        SubqMap *m = arena_alloc(b->a, sizeof *m * (size_t)cap);
        if (b->n_subq)
            memcpy(m, b->subq, sizeof *m * (size_t)b->n_subq);
        b->subq = m;
        b->cap_subq = cap;
    }
    b->subq[b->n_subq++] = (SubqMap){.e = e, .col = col};
}

/*
 * Plans subquery expression e (AST_SUBQUERY) against the rows of cur and
 * replaces cur by their join of kind k. MARK and SCALAR add a hidden column
 * that e then binds to.
 */
static int plan_one(PlanCtx *p, const AstExpr *e, Rel *cur, PlanSemiKind k)
{
    BindCtx *b = &p->b;
    const AstSelect *sub = e->subquery;
    SubqCorr cc = {.sel = sub, .outer = &cur->scope, .kind = e->subq_kind};
    SubqCorr *saved = p->corr;
    p->corr = &cc;
    Rel r;
    int first_id = b->next_node_id;
    int rc = p->sub_select(p, sub, &r, NULL);
    p->corr = saved;
    if (rc)
        return -1;
    if (!p->streaming) {
        /* An ad hoc query runs its leaves in plan order: the subquery's first, so
         * the outer rows meet its final rows instead of being judged again at each
         * of its changes. The subquery's nodes (made since first_id, nested
         * subqueries' included) read none of the others, so putting them first,
         * each group in its own order, keeps the order topological. */
        PlanNode **sorted = arena_alloc(b->a, sizeof(PlanNode *) * (size_t)(p->n_nodes + 1));
        int k = 0;
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < p->n_nodes; i++)
                if ((p->nodes[i]->id >= first_id) == (pass == 0))
                    sorted[k++] = p->nodes[i];
        memcpy(p->nodes, sorted, sizeof(PlanNode *) * (size_t)p->n_nodes);
    }
    int *vis = arena_alloc(b->a, sizeof(int) * (size_t)(r.scope.n + 1));
    int nv = 0;
    for (int i = 0; i < r.scope.n; i++)
        if (!r.scope.cols[i].hidden)
            vis[nv++] = i;
    int want = cc.n + (e->subq_kind != SUBQ_EXISTS);
    if (e->subq_kind != SUBQ_EXISTS && nv != want)
        return werr(b->err, SQLSTATE_SYNTAX_ERROR, sub->pos,
                    e->subq_kind == SUBQ_SCALAR ? "subquery must return only one column"
                    : nv > want ? "subquery has too many columns" : "subquery has too few columns");
    if (e->subq_kind == SUBQ_SCALAR && p->streaming && (!cc.grouped || cc.had_group_by))
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, e->pos,
                    "feature not supported: a scalar subquery in a materialized view that is not an aggregate"),
               werr_hint(b->err, "A view needs a subquery that yields one row: SELECT agg(...) FROM ... without GROUP BY "
                                 "(it may be correlated by equalities: WHERE b.k = a.k)."), -1;
    /* Left and right columns to match, in a common type. */
    int np = cc.n + (e->subq_kind == SUBQ_IN);
    PlanExpr **le = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(np + 1));
    PlanExpr **re = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(np + 1));
    for (int i = 0; i < np; i++) {
        const AstExpr *lx = i < cc.n ? cc.outer_e[i] : e->arg;
        int pos = lx->pos;
        if (!(le[i] = bind_expr(b, &cur->scope, lx)))
            return -1;
        const ScopeCol *rcol = &r.scope.cols[vis[i]];
        re[i] = make_col(b, vis[i], rcol->type);
        TypeId t = le[i]->kind == PE_CONST && (le[i]->unknown || le[i]->type == TYPE_NULL)
                       ? rcol->type : bind_common_type(le[i]->type, rcol->type);
        if (t == TYPE_NULL)
            return werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, pos, "operator does not exist: %s = %s",
                        type_name(le[i]->type), type_name(rcol->type));
        if ((le[i]->type != t && !(le[i] = coerce_expr(b, le[i], t, pos))) ||
            (re[i]->type != t && !(re[i] = coerce_expr(b, re[i], t, pos))))
            return -1;
    }
    if (p->streaming && cur->node->append_only && r.node->append_only && !p->allow_unbounded) {
        werr(b->err, SQLSTATE_NOT_SUPPORTED, e->pos,
             "a subquery over two append-only streams keeps every row of both forever (unbounded state)");
        werr_hint(b->err, "Use a materialized view or table that updates its rows on one side, or "
                          "SET streaming_allow_unbounded_state = true to accept unbounded state.");
        return -1;
    }
    int *lc = arena_alloc(b->a, sizeof(int) * (size_t)(np + 1));
    int *rcols = arena_alloc(b->a, sizeof(int) * (size_t)(np + 1));
    PlanNode *sub_root = r.node;
    if (ensure_cols(p, cur, np, le, lc) || ensure_cols(p, &r, np, re, rcols))
        return -1;
    PlanNode *j = new_node(p, PN_SEMI_JOIN, cur->node);
    j->n_inputs = 2;
    j->inputs[1] = r.node;
    j->semi_kind = k;
    j->n_join_keys = cc.n;
    j->left_keys = lc;
    j->right_keys = rcols;
    j->in_left_col = e->subq_kind == SUBQ_IN ? lc[cc.n] : -1;
    j->in_right_col = e->subq_kind == SUBQ_IN ? rcols[cc.n] : -1;
    j->scalar_col = e->subq_kind == SUBQ_SCALAR ? vis[cc.n] : -1;
    j->left_time_col = j->right_time_col = -1;
    j->table_id = new_table(p);
    j->table_id2 = new_table(p);
    int nl = cur->scope.n, n_out = nl + (k == SEMI_MARK || k == SEMI_SCALAR);
    Scope sc;
    alloc_scope(b->a, &sc, n_out);
    memcpy(sc.cols, cur->scope.cols, sizeof(ScopeCol) * (size_t)nl);
    if (n_out > nl) {
        TypeId t = k == SEMI_MARK ? TYPE_BOOL : r.scope.cols[j->scalar_col].type;
        sc.cols[nl] = (ScopeCol){.name = arena_printf(b->a, "_subq%d", j->id), .type = t, .hidden = true};
        /* Without correlation the aggregation's one row is always there (an
         * aggregate over no rows included): no row means HAVING dropped it. */
        j->scalar_default = value_null(t);
        if (k == SEMI_SCALAR && cc.grouped && !cc.had_group_by && cc.n > 0 &&
            empty_value(b, sub_root, j->scalar_col, t, &j->scalar_default))
            return -1;
    }
    j->append_only = k == SEMI_SEMI && cur->node->append_only && r.node->append_only;
    j->wm_col = k == SEMI_SEMI ? cur->node->wm_col : -1;
    if (k != SEMI_SEMI)
        for (int i = 0; i < nl; i++)
            if (sc.cols[i].role == ROLE_EVENT_TIME)
                sc.cols[i].role = ROLE_NONE;
    schema_from_scope(b->a, &j->out, &sc);
    const PlanNode *l = cur->node;
    if (j->append_only || (l->n_keys && !l->dup_keys)) {
        j->n_keys = l->n_keys;
        j->keys = l->keys;
        j->dup_keys = l->dup_keys;
    } else {
        /* Rows of the left may repeat: the whole row, counted, is the key. */
        j->n_keys = n_out;
        j->keys = arena_alloc(b->a, sizeof(int) * (size_t)n_out);
        for (int i = 0; i < n_out; i++)
            j->keys[i] = i;
        j->dup_keys = true;
    }
    cur->node = j;
    cur->scope = sc;
    if (n_out > nl)
        map_subq(b, e, nl);
    return 0;
}

/* MARK and SCALAR joins for every subquery in e (innermost operands first). */
int plan_expr_subqueries(PlanCtx *p, const AstExpr *e, Rel *cur)
{
    if (!e)
        return 0;
    for (int i = 0; i < ast_list_len(e->args); i++)
        if (plan_expr_subqueries(p, AST_AT(e->args, i), cur))
            return -1;
    for (int i = 0; i < ast_list_len(e->whens); i++)
        if (plan_expr_subqueries(p, AST_AT(e->whens, i), cur))
            return -1;
    if (plan_expr_subqueries(p, e->arg, cur) || plan_expr_subqueries(p, e->lo, cur) ||
        plan_expr_subqueries(p, e->hi, cur) || plan_expr_subqueries(p, e->else_, cur))
        return -1;
    if (e->kind == AST_SUBQUERY)
        return plan_one(p, e, cur, e->subq_kind == SUBQ_SCALAR ? SEMI_SCALAR : SEMI_MARK);
    return 0;
}

int plan_where_subqueries(PlanCtx *p, const AstExpr *where, Rel *cur, const AstExpr **rest)
{
    BindCtx *b = &p->b;
    const AstExpr *conj[MAX_CONJ];
    int nc = 0;
    if (!and_parts(b, where, conj, &nc, MAX_CONJ))
        return -1;
    AstExpr *kept = NULL;
    for (int i = 0; i < nc; i++) {
        const AstExpr *s = conj[i];
        bool neg = false;
        while (s->kind == AST_UNARY && s->op == OP_NOT) {
            neg = !neg;
            s = AST_AT(s->args, 0);
        }
        if (s->kind == AST_SUBQUERY && s->subq_kind != SUBQ_SCALAR) {
            /* A condition on its own: only the rows it holds for go on. */
            if (s->negated)
                neg = !neg;
            if (plan_expr_subqueries(p, s->arg, cur) || plan_one(p, s, cur, neg ? SEMI_ANTI : SEMI_SEMI))
                return -1;
            continue;
        }
        if (plan_expr_subqueries(p, conj[i], cur))
            return -1;
        kept = ast_and(b->a, kept, conj[i]);
    }
    *rest = kept;
    return 0;
}
