/*
 * plan_select.c: one SELECT (no WITH, no set operation) lowered to a stream
 * plan, as a sequence of steps over a SelectState: FROM and WHERE (with
 * decorrelation, plan_subq.c), the select list, the aggregate (plan_agg.c),
 * ORDER BY and DISTINCT ON, then the projection, DISTINCT (make_distinct),
 * DISTINCT ON (plan_topn.c) and LIMIT. VALUES is its own kind (plan_values.c).
 */
#include "planner_int.h"

#include <stdlib.h>
#include <string.h>

/* Expands the select list into (AST expr, name) pairs, resolving '*'. */
static int expand_targets(PlanCtx *p, const AstSelect *sel, const Scope *s, Target **out, int *n_out)
{
    BindCtx *b = &p->b;
    int cap = 0, n = 0;
    Target *ts = NULL;
    for (int i = 0; i < ast_list_len(sel->targets); i++) {
        const AstTarget *t = AST_AT(sel->targets, i);
        int want = t->expr->kind == AST_STAR ? s->n : 1;
        if (n + want > cap) {
            int nc = (n + want) * 2 + 8;
            Target *nt = arena_alloc(b->a, sizeof *nt * (size_t)nc);
            if (n)
                memcpy(nt, ts, sizeof *nt * (size_t)n);
            ts = nt;
            cap = nc;
        }
        if (t->expr->kind == AST_STAR) {
            bool any = false;
            for (int c = 0; c < s->n; c++) {
                if (s->cols[c].hidden)
                    continue;
                if (t->expr->qualifier && (!s->cols[c].qualifier || strcmp(s->cols[c].qualifier, t->expr->qualifier)))
                    continue;
                ts[n++] = (Target){.expr = NULL, .star_col = c, .name = s->cols[c].name, .pos = t->pos};
                any = true;
            }
            if (!any && t->expr->qualifier)
                return werr(b->err, SQLSTATE_UNDEFINED_TABLE, t->expr->pos, "missing FROM-clause entry for table \"%s\"",
                            t->expr->qualifier);
        } else {
            ts[n++] = (Target){.expr = t->expr, .star_col = -1,
                               .name = t->alias ? t->alias : expr_default_name(t->expr), .pos = t->pos};
        }
    }
    *out = ts;
    *n_out = n;
    return 0;
}

static PlanExpr *bind_target(PlanCtx *p, const Target *t, const Scope *s, const Scope *pre_agg)
{
    BindCtx *b = &p->b;
    if (!t->expr) {
        if (b->agg) {
            /* `SELECT *` in a grouped query: each column must be grouped. */
            AstExpr col = {.kind = AST_COLUMN, .pos = t->pos, .text = pre_agg->cols[t->star_col].name,
                           .qualifier = pre_agg->cols[t->star_col].qualifier};
            AstExpr *c = arena_alloc(b->a, sizeof col);
            *c = col;
            return bind_expr(b, s, c);
        }
        return make_col(b, t->star_col, s->cols[t->star_col].type);
    }
    PlanExpr *e = bind_expr(b, s, t->expr);
    if (e && e->kind == PE_CONST && e->unknown)
        e = coerce_expr(b, e, TYPE_TEXT, t->pos);
    if (e && e->kind == PE_CONST && e->type == TYPE_NULL)
        e = coerce_expr(b, e, TYPE_TEXT, t->pos);
    return e;
}

/* Resolving ORDER BY and DISTINCT ON items to output columns of a select. */
typedef struct OutCols {
    int n_targets;
    int n_out;                   /* targets plus hidden columns added so far */
    PlanExpr **texprs;           /* capacity for every item */
    const char **tnames;
    bool grouped;                /* bind through the aggregation */
    bool plain_distinct;         /* SELECT DISTINCT: items must be in the select list */
    AggCtx *agg;
    const Scope *scope;
    const PlanNode *cur;         /* the aggregation, when grouped */
} OutCols;

/* An output ordinal, an output name, or an expression (equal to a target, or
 * added as a hidden column). Returns the column, or -1 with err set. */
static int out_col(PlanCtx *p, OutCols *oc, const AstExpr *e, const char *what)
{
    BindCtx *b = &p->b;
    int col = -1;
    if (e->kind == AST_LITERAL && e->lit_kind == LIT_INT) {
        int k = atoi(e->text);
        if (k < 1 || k > oc->n_targets)
            return werr(b->err, SQLSTATE_INVALID_COLUMN_REFERENCE, e->pos, "%s position %d is not in select list", what, k);
        return k - 1;
    }
    if (e->kind == AST_COLUMN && !e->qualifier) {
        for (int k = 0; k < oc->n_targets; k++)
            if (strcmp(oc->tnames[k], e->text) == 0) {
                if (col >= 0 && !expr_equal(oc->texprs[col], oc->texprs[k]))
                    return werr(b->err, SQLSTATE_AMBIGUOUS_COLUMN, e->pos, "%s \"%s\" is ambiguous", what, e->text);
                col = k;
            }
        if (col >= 0)
            return col;
    }
    int n_aggs = oc->agg->n_aggs;
    b->agg = oc->grouped ? oc->agg : NULL;
    PlanExpr *x = bind_expr(b, oc->scope, e);
    b->agg = NULL;
    if (!x)
        return -1;
    if (oc->grouped && oc->agg->n_aggs != n_aggs)
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, e->pos, "feature not supported: an aggregate only in %s", what);
    for (int k = 0; k < oc->n_out; k++)
        if (expr_equal(oc->texprs[k], x))
            return k;
    if (oc->plain_distinct)
        return werr(b->err, SQLSTATE_INVALID_COLUMN_REFERENCE, e->pos,
                    "for SELECT DISTINCT, ORDER BY expressions must appear in select list");
    oc->texprs[oc->n_out] = x;
    oc->tnames[oc->n_out] = arena_printf(b->a, "_%s%d", strcmp(what, "ORDER BY") ? "distinct_on" : "order",
                                         oc->n_out - oc->n_targets);
    return oc->n_out++;
}

/* One SELECT while it is lowered: what each step below hands the next. The
 * steps run in SQL's logical order: FROM and WHERE (select_from_where), the
 * select list (select_targets), the aggregation (plan_aggregate, plan_agg.c),
 * ORDER BY and DISTINCT ON (select_order), then the projection, DISTINCT and
 * LIMIT (select_finish). */
typedef struct SelectState {
    const AstSelect *sel;        /* the select (after decorrelation: the copy planned instead) */
    PlanQuery *q;                /* the ad hoc query's order and limit, NULL inside a query or in a view */
    PlanNode *cur;               /* the last node made */
    Scope scope;                 /* the columns of the FROM (and WHERE's subquery columns) */
    Target *targets;
    int n_targets;
    bool grouped;                /* an aggregation: GROUP BY, HAVING or an aggregate call */
    bool plain_distinct;         /* SELECT DISTINCT without ON */
    AggCtx agg;                  /* the bound group keys and aggregate calls */
    Scope post_scope;            /* the aggregation's output (scope when not grouped) */
    PlanExpr **texprs;           /* the bound select list, then hidden ORDER BY / DISTINCT ON columns */
    const char **tnames;
    int n_out;
    PlanOrder *order;
    int n_order;
    int *don_cols;               /* DISTINCT ON columns (of the projection) */
    int n_don;
    bool cut;                    /* LIMIT inside a query: a Top-N */
    int n_subq;                  /* BindCtx.n_subq after the FROM: the subquery columns known outside */
} SelectState;

/* FROM, decorrelation, WHERE's subqueries, then WHERE as a filter. */
static int select_from_where(PlanCtx *p, SelectState *st)
{
    BindCtx *b = &p->b;
    Rel in;
    if (plan_from(p, st->sel, &in))
        return -1;
    /* A correlated subquery: its equalities with the outer query leave WHERE (plan_subq.c). */
    if (p->corr && p->corr->sel == st->sel && subq_correlate(p, st->sel, &in.scope, &st->sel))
        return -1;
    st->n_subq = b->n_subq;
    const AstExpr *where = st->sel->where;
    if (where && ast_contains_aggregate(where))
        return werr(b->err, SQLSTATE_GROUPING_ERROR, where->pos, "aggregate functions are not allowed in WHERE");
    /* Subqueries in WHERE: [NOT] EXISTS / IN conditions become semi (anti) joins. */
    if (where && ast_contains_subquery(where) && plan_where_subqueries(p, where, &in, &where))
        return -1;
    st->cur = in.node;
    st->scope = in.scope;
    if (where) {
        PlanExpr *pred = bind_expr(b, &st->scope, where);
        if (!pred || !(pred = coerce_expr(b, pred, TYPE_BOOL, where->pos))) {
            if (!b->err->set)
                werr(b->err, SQLSTATE_DATATYPE_MISMATCH, where->pos, "argument of WHERE must be type boolean");
            return -1;
        }
        PlanNode *f = new_node(p, PN_FILTER, st->cur);
        f->pred = pred;
        f->out = st->cur->out;
        f->wm_col = st->cur->wm_col;
        f->n_keys = st->cur->n_keys;
        f->keys = st->cur->keys;
        f->dup_keys = st->cur->dup_keys;
        st->cur = f;
    }
    return 0;
}

/* The select list expanded ('*'), whether the select is grouped, and the
 * select list's subqueries joined to the rows as hidden columns. */
static int select_targets(PlanCtx *p, SelectState *st)
{
    BindCtx *b = &p->b;
    const AstSelect *sel = st->sel;
    if (expand_targets(p, sel, &st->scope, &st->targets, &st->n_targets))
        return -1;
    /* DISTINCT ON sets distinct too (as Postgres's parser does): only a plain
     * DISTINCT groups the whole row. */
    st->plain_distinct = sel->distinct && !sel->distinct_on;
    /* grouped: an aggregation (GROUP BY, HAVING or an aggregate call); a
     * plain DISTINCT comes after it, over its output rows. */
    st->grouped = sel->group_by || sel->having;
    for (int i = 0; i < st->n_targets && !st->grouped; i++)
        if (st->targets[i].expr && ast_contains_aggregate(st->targets[i].expr))
            st->grouped = true;
    /* Subqueries in the select list: each joined to the rows as a hidden column. */
    for (int i = 0; i < st->n_targets; i++) {
        if (!st->targets[i].expr || !ast_contains_subquery(st->targets[i].expr))
            continue;
        if (st->grouped)
            return werr(b->err, SQLSTATE_NOT_SUPPORTED, st->targets[i].pos,
                        "feature not supported: a subquery in the select list of a grouped query"),
                   werr_hint(b->err, "Move one of them into a FROM subquery: aggregate there and add the subquery outside, or the other way round."), -1;
        Rel r = {.node = st->cur, .scope = st->scope};
        if (plan_expr_subqueries(p, st->targets[i].expr, &r))
            return -1;
        st->cur = r.node;
        st->scope = r.scope;
    }
    return 0;
}

/* ORDER BY (ad hoc queries, and DISTINCT ON in views too) and DISTINCT ON:
 * output columns by name or ordinal, or extra hidden columns. */
static int select_order(PlanCtx *p, SelectState *st)
{
    BindCtx *b = &p->b;
    const AstSelect *sel = st->sel;
    int n_targets = st->n_targets;
    st->n_order = ast_list_len(sel->order_by);
    st->n_don = ast_list_len(sel->distinct_on);
    int n_order = st->n_order, n_don = st->n_don;
    st->n_out = n_targets;
    st->cut = !st->q && (sel->limit || sel->offset);
    if (!((n_order && (st->q || n_don || st->cut)) || n_don))
        return 0;
    OutCols oc = {.n_targets = n_targets, .grouped = st->grouped, .plain_distinct = st->plain_distinct,
                  .agg = &st->agg, .scope = &st->scope, .cur = st->cur};
    oc.texprs = memcpy(arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(n_targets + n_order + n_don + 1)), st->texprs,
                       sizeof(PlanExpr *) * (size_t)n_targets);
    oc.tnames = memcpy(arena_alloc(b->a, sizeof(char *) * (size_t)(n_targets + n_order + n_don + 1)), st->tnames,
                       sizeof(char *) * (size_t)n_targets);
    oc.n_out = n_targets;
    PlanOrder *order = st->order = arena_alloc(b->a, sizeof(PlanOrder) * (size_t)(n_order + 1));
    for (int i = 0; i < n_order; i++) {
        const AstOrderItem *o = AST_AT(sel->order_by, i);
        int col = out_col(p, &oc, o->expr, "ORDER BY");
        if (col < 0)
            return -1;
        order[i] = (PlanOrder){.col = col, .desc = o->desc, .nulls_first = o->nulls == 1 || (o->nulls == 0 && o->desc)};
    }
    int *don_cols = st->don_cols = arena_alloc(b->a, sizeof(int) * (size_t)(n_don + 1));
    for (int i = 0; i < n_don; i++)
        if ((don_cols[i] = out_col(p, &oc, AST_AT(sel->distinct_on, i), "DISTINCT ON")) < 0)
            return -1;
    /* Postgres: the first ORDER BY items must be DISTINCT ON expressions
     * (any order) until those are used up; the rest choose the row kept. */
    int lead = n_order < n_don ? n_order : n_don;
    for (int i = 0; i < lead; i++) {
        bool found = false;
        for (int k = 0; k < n_don; k++)
            found |= don_cols[k] == order[i].col;
        if (!found)
            return werr(b->err, SQLSTATE_INVALID_COLUMN_REFERENCE, ((const AstExpr *)AST_AT(sel->distinct_on, 0))->pos,
                        "SELECT DISTINCT ON expressions must match initial ORDER BY expressions");
    }
    st->texprs = oc.texprs;
    st->tnames = oc.tnames;
    st->n_out = oc.n_out;
    return 0;
}

/* The projection of the select list, then DISTINCT, DISTINCT ON and LIMIT. */
static int select_finish(PlanCtx *p, SelectState *st, Rel *out)
{
    BindCtx *b = &p->b;
    const AstSelect *sel = st->sel;
    int n_targets = st->n_targets, n_out = st->n_out, n_don = st->n_don;
    Scope final_scope;
    /* A plain DISTINCT keys its rows by the whole row: the input's key is not kept. */
    PlanNode *proj = make_project(p, st->cur, st->grouped ? &st->post_scope : &st->scope, n_out, st->texprs,
                                  st->tnames, NULL, &final_scope, p->streaming && !st->plain_distinct);
    for (int i = n_targets; i < n_out; i++) {
        final_scope.cols[i].hidden = true;
        proj->out.hidden[i] = true;
    }
    PlanNode *cur = proj;
    if (st->plain_distinct) {
        if (!(cur = make_distinct(p, cur, &final_scope, n_out, sel->pos, "SELECT DISTINCT")))
            return -1;
        final_scope.n = n_out;
    }
    if (n_don) {
        /* DISTINCT ON is the first row per key by ORDER BY: a Top-1 per
         * partition, then the row number dropped. */
        if (!(cur = make_distinct_on(p, cur, &final_scope, n_don, st->don_cols, st->n_order, st->order, n_targets,
                                     st->q != NULL)))
            return -1;
        if (!st->q) {
            /* The scope follows the projection's columns. */
            Scope sc;
            alloc_scope(b->a, &sc, cur->out.n);
            for (int i = 0, k = 0; i < final_scope.n; i++) {
                bool kept = i < n_targets;
                for (int j = 0; j < n_don; j++)
                    kept |= st->don_cols[j] == i;
                if (kept)
                    sc.cols[k++] = final_scope.cols[i];
            }
            final_scope = sc;
        }
    }
    if (st->q) {
        st->q->n_order = st->n_order;
        st->q->order = st->order;
    }
    if (st->cut) {
        if (n_don)
            return werr(b->err, SQLSTATE_NOT_SUPPORTED, sel->pos, "feature not supported: DISTINCT ON with LIMIT inside a query");
        Rel r = {.node = cur, .scope = final_scope};
        if (make_limit_topn(p, sel, &r, st->n_order, st->order, n_targets))
            return -1;
        cur = r.node;
        final_scope = r.scope;
    } else if (plan_limit(p, sel, st->q)) {
        return -1;
    }
    out->node = cur;
    out->scope = final_scope;
    return 0;
}

/* The select list bound against the FROM's columns (an ungrouped select). */
static int select_bind_targets(PlanCtx *p, SelectState *st)
{
    for (int i = 0; i < st->n_targets; i++) {
        if (!(st->texprs[i] = bind_target(p, &st->targets[i], &st->scope, &st->scope)))
            return -1;
        st->tnames[i] = st->targets[i].name;
    }
    return 0;
}

/* A grouped select: its group keys and aggregate calls bound (plan_agg.c),
 * the select list and HAVING bound through them, then the aggregation. */
static int select_grouped(PlanCtx *p, SelectState *st)
{
    BindCtx *b = &p->b;
    const AstSelect *sel = st->sel;
    st->agg.input = &st->scope;
    if (bind_group_keys(p, sel, st->targets, st->n_targets, &st->scope, &st->agg))
        return -1;
    b->agg = &st->agg;
    for (int i = 0; i < st->n_targets; i++) {
        if (!(st->texprs[i] = bind_target(p, &st->targets[i], &st->scope, &st->scope)))
            return b->agg = NULL, -1;
        st->tnames[i] = st->targets[i].name;
    }
    PlanExpr *having = NULL;
    if (sel->having) {
        having = bind_expr(b, &st->scope, sel->having);
        if (!having || !(having = coerce_expr(b, having, TYPE_BOOL, sel->having->pos)))
            return b->agg = NULL, -1;
    }
    b->agg = NULL;
    return plan_agg_lower(p, sel, &st->agg, having, &st->cur, &st->scope, &st->post_scope);
}

int plan_select_core(PlanCtx *p, const AstSelect *sel, Rel *out, PlanQuery *q)
{
    BindCtx *b = &p->b;
    if (sel->values)
        return plan_values(p, sel, out);
    if (plan_topn_mark(p, sel))
        return -1;
    SelectState st = {.sel = sel, .q = q};
    if (select_from_where(p, &st))
        return -1;
    if (select_targets(p, &st))
        return -1;
    st.texprs = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(st.n_targets + 1));
    st.tnames = arena_alloc(b->a, sizeof(char *) * (size_t)(st.n_targets + 1));
    st.post_scope = st.scope;
    if (st.grouped ? select_grouped(p, &st) : select_bind_targets(p, &st))
        return -1;
    if (select_order(p, &st) || select_finish(p, &st, out))
        return -1;
    b->n_subq = st.n_subq; /* this select's subquery columns mean nothing outside it */
    return 0;
}
