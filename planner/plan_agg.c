/*
 * plan_agg.c: the aggregate of a grouped select. Binding gives its logical
 * form (AggCtx: the bound group keys and aggregate calls, filled by
 * bind_group_keys here and by bind.c while the select list and HAVING are
 * bound through it); plan_agg_lower lowers it to the stream plan:
 *
 *   input -> PROJECT(group keys, arguments, FILTERs) -> AGG -> [FILTER(having)]
 *
 * and the window/lateness analysis of the aggregation (agg_time_bounds): a
 * group key that is a window bound with a watermark bounds its state; both
 * bounds of a SESSION window make it a session aggregation.
 */
#include "planner_int.h"

#include <stdlib.h>
#include <string.h>

int bind_group_keys(PlanCtx *p, const AstSelect *sel, const Target *targets, int n_targets, const Scope *scope,
                    AggCtx *agg)
{
    BindCtx *b = &p->b;
    int ng = ast_list_len(sel->group_by);
    agg->group = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(ng + 1));
    for (int i = 0; i < ng; i++) {
        const AstExpr *ge = AST_AT(sel->group_by, i);
        if (ge->kind == AST_LITERAL && ge->lit_kind == LIT_INT) {
            int k = atoi(ge->text);
            if (k < 1 || k > n_targets)
                return werr(b->err, SQLSTATE_INVALID_COLUMN_REFERENCE, ge->pos, "GROUP BY position %d is not in select list",
                            k);
            if (!targets[k - 1].expr) {
                agg->group[agg->n_group++] = make_col(b, targets[k - 1].star_col, scope->cols[targets[k - 1].star_col].type);
                continue;
            }
            ge = targets[k - 1].expr;
        } else if (ge->kind == AST_COLUMN && !ge->qualifier) {
            /* An output alias used in GROUP BY (allowed by Postgres when no input column has the name). */
            bool is_input = false;
            for (int c = 0; c < scope->n; c++)
                if (strcmp(scope->cols[c].name, ge->text) == 0)
                    is_input = true;
            if (!is_input)
                for (int k = 0; k < n_targets; k++)
                    if (targets[k].expr && strcmp(targets[k].name, ge->text) == 0) {
                        ge = targets[k].expr;
                        break;
                    }
        }
        if (ast_contains_aggregate(ge))
            return werr(b->err, SQLSTATE_GROUPING_ERROR, ge->pos, "aggregate functions are not allowed in GROUP BY");
        PlanExpr *x = bind_expr(b, scope, ge);
        if (!x)
            return -1;
        if (x->kind == PE_CONST && x->unknown)
            x = coerce_expr(b, x, TYPE_TEXT, ge->pos);
        bool dup = false;
        for (int k = 0; k < agg->n_group; k++)
            if (expr_equal(agg->group[k], x))
                dup = true;
        if (!dup)
            agg->group[agg->n_group++] = x;
    }
    return 0;
}

/* The time analysis of aggregation a over its pre-projection's columns
 * (pre): a SESSION window (both bounds grouped), the count of window bounds
 * among the keys (two-phase 'auto', plan_dist.c), and the window bound that
 * lets a watermark close groups (win_group_idx, wm_col). in: the rows below
 * the pre-projection (a session window needs them append-only). */
static int agg_time_bounds(PlanCtx *p, const AstSelect *sel, PlanNode *a, const Scope *pre, const PlanNode *in)
{
    BindCtx *b = &p->b;
    a->session_start_idx = a->session_end_idx = -1;
    for (int i = 0; i < a->n_group; i++) {
        if (pre->cols[i].role == ROLE_SESSION_START)
            a->session_start_idx = i;
        if (pre->cols[i].role == ROLE_SESSION_END)
            a->session_end_idx = i;
    }
    if (a->session_start_idx >= 0 || a->session_end_idx >= 0) {
        if (a->session_start_idx < 0 || a->session_end_idx < 0)
            return werr(b->err, SQLSTATE_WINDOWING_ERROR, sel->pos,
                        "a SESSION window aggregation must GROUP BY both window_start and window_end");
        a->session = true;
        a->session_gap_us = pre->cols[a->session_start_idx >= 0 ? a->session_start_idx : a->session_end_idx].win_size_us;
        a->win_group_idx = a->session_end_idx >= 0 ? a->session_end_idx : a->session_start_idx;
        if (!in->append_only)
            return werr(b->err, SQLSTATE_NOT_SUPPORTED, sel->pos,
                        "feature not supported: SESSION windows over a changelog input");
    }
    for (int i = 0; i < a->n_group; i++)
        a->n_group_bounds += pre->cols[i].role == ROLE_WINDOW_START || pre->cols[i].role == ROLE_WINDOW_END;
    for (int i = 0; i < a->n_group && !a->session; i++) {
        ColRole r = pre->cols[i].role;
        if (r == ROLE_WINDOW_END) {
            a->win_group_idx = i;
            a->win_end_offset_us = 0;
            break;
        }
        if (r == ROLE_WINDOW_START && a->win_group_idx < 0) {
            a->win_group_idx = i;
            a->win_end_offset_us = pre->cols[i].win_size_us;
        }
    }
    if (a->win_group_idx >= 0)
        a->wm_col = a->win_group_idx;
    return 0;
}

/* The pre-projection: group expressions, then aggregate arguments and
 * filters; aggs gets agg's calls with their argument and filter columns. */
static PlanNode *agg_pre_project(PlanCtx *p, const AggCtx *agg, PlanNode *cur, const Scope *scope, PlanAgg *aggs,
                                 Scope *pre_scope)
{
    BindCtx *b = &p->b;
    int n_pre = agg->n_group;
    for (int i = 0; i < agg->n_aggs; i++)
        n_pre += (agg->agg_args[i] != NULL) + (agg->agg_filters[i] != NULL);
    PlanExpr **pre = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(n_pre + 1));
    const char **pre_names = arena_alloc(b->a, sizeof(char *) * (size_t)(n_pre + 1));
    int k = 0;
    for (int i = 0; i < agg->n_group; i++) {
        pre[k] = agg->group[i];
        pre_names[k++] = agg->group[i]->kind == PE_COL ? scope->cols[agg->group[i]->col].name
                                                        : arena_printf(b->a, "_group%d", i);
    }
    for (int i = 0; i < agg->n_aggs; i++) {
        aggs[i] = agg->aggs[i];
        if (agg->agg_args[i]) {
            aggs[i].arg = k;
            pre[k] = agg->agg_args[i];
            /* A plain column keeps its name, so EXPLAIN reads max(url), not max(_arg1). */
            pre_names[k++] = agg->agg_args[i]->kind == PE_COL ? scope->cols[agg->agg_args[i]->col].name
                                                              : arena_printf(b->a, "_arg%d", i);
        }
        if (agg->agg_filters[i]) {
            aggs[i].filter_col = k;
            pre[k] = agg->agg_filters[i];
            pre_names[k++] = arena_printf(b->a, "_filter%d", i);
        }
    }
    PlanNode *pp = make_project(p, cur, scope, n_pre, pre, pre_names, NULL, pre_scope, false);
    /* Keep qualifiers for grouped columns so `t.col` still resolves after grouping. */
    for (int i = 0; i < agg->n_group; i++)
        if (agg->group[i]->kind == PE_COL)
            pre_scope->cols[i].qualifier = scope->cols[agg->group[i]->col].qualifier;
    return pp;
}

int plan_agg_lower(PlanCtx *p, const AstSelect *sel, const AggCtx *agg, PlanExpr *having, PlanNode **cur,
                   const Scope *scope, Scope *post_scope)
{
    BindCtx *b = &p->b;
    PlanAgg *aggs = arena_alloc(b->a, sizeof(PlanAgg) * (size_t)(agg->n_aggs + 1));
    Scope pre_scope = *scope;
    PlanNode *pp = agg_pre_project(p, agg, *cur, scope, aggs, &pre_scope);
    PlanNode *a = new_node(p, PN_AGG, pp);
    a->n_group = agg->n_group;
    a->group_cols = arena_alloc(b->a, sizeof(int) * (size_t)(agg->n_group + 1));
    for (int i = 0; i < agg->n_group; i++)
        a->group_cols[i] = i;
    a->n_aggs = agg->n_aggs;
    a->aggs = aggs;
    /* Over an append-only input nothing is retracted: the plain double
     * sum is PostgreSQL's (which adds in order, without compensation). */
    for (int i = 0; i < agg->n_aggs; i++)
        aggs[i].compensated = aggs[i].compensated && !pp->append_only;
    a->table_id = new_table(p);
    a->n_keys = agg->n_group;
    a->keys = a->group_cols;
    a->append_only = false;
    /* A GROUP BY column that is a window bound with a watermark bounds the state. */
    if (agg_time_bounds(p, sel, a, &pre_scope, *cur))
        return -1;
    alloc_scope(b->a, post_scope, agg->n_group + agg->n_aggs);
    for (int i = 0; i < agg->n_group; i++)
        post_scope->cols[i] = pre_scope.cols[i];
    for (int i = 0; i < agg->n_aggs; i++)
        post_scope->cols[agg->n_group + i] = (ScopeCol){.name = arena_printf(b->a, "_agg%d", i), .type = aggs[i].type};
    schema_from_scope(b->a, &a->out, post_scope);
    *cur = a;
    if (having) {
        PlanNode *f = new_node(p, PN_FILTER, a);
        f->pred = having;
        f->out = a->out;
        f->wm_col = a->wm_col;
        f->n_keys = a->n_keys;
        f->keys = a->keys;
        *cur = f;
    }
    return 0;
}
