/*
 * plan_share.c: common sub-plans of one view computed once (a plan DAG).
 *
 * A query that names the same subquery twice (Nexmark q5: the HOP count per
 * auction, once joined and once under the max per window; a CTE read twice;
 * a self-join of a subquery) is planned as two identical trees, each with its
 * source, watermark, window and aggregation. plan_share merges them: nodes are
 * visited in topological order, each one's inputs replaced by their
 * representatives first, and a node equal to an earlier representative (same
 * kind, same inputs, same every field but its state table ids) becomes that
 * one. The representative then has several readers; the runtime sends each of
 * its chunks and watermarks to every reader (dataflow.c). A view without
 * duplicates keeps exactly the plan it had.
 *
 * Conservative by design: only node kinds listed in shareable() are merged,
 * and every field of PlanNode is compared (node_same); the static assertion
 * on sizeof(PlanNode) stops the build when a field is added, so that whoever
 * adds one decides how it compares. The merged copies' table ids were handed
 * out and stay unused: see planner/README.md "Shared sub-plans" for why that
 * keeps re-planning at start deterministic.
 *
 * One relaxation (late_check): plan_view marks for lateness only the window
 * under the view's top aggregation (ALLOW LATENESS, LATE ROWS INTO), so q5's
 * two copies differ there. A window without the mark whose rows only go,
 * through projections and filters, to a window-bounded aggregation with the
 * same lateness gets the same results from the marked one: that aggregation
 * drops exactly the rows the window would (both judge end + lateness <= the
 * row's watermark, window_rules.c). Such windows are merged into the marked one.
 */
#include "planner_int.h"

#include <stdint.h>
#include <string.h>

/* Added a field to PlanNode? Teach node_same about it, then update the size
 * (checked on 64-bit builds, where it was counted). */
#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
_Static_assert(sizeof(PlanNode) == 696, "PlanNode changed: teach plan_share.c node_same the new field");
#endif

static bool ints_same(int n, const int *x, const int *y)
{
    return n == 0 || (x && y && memcmp(x, y, sizeof(int) * (size_t)n) == 0);
}

static bool bools_same(int n, const bool *x, const bool *y)
{
    if (!x || !y)
        return x == y;
    return memcmp(x, y, sizeof(bool) * (size_t)n) == 0;
}

static bool str_same(const char *x, const char *y)
{
    if (!x || !y)
        return x == y;
    return strcmp(x, y) == 0;
}

static bool value_same(const Value *x, const Value *y)
{
    if (x->type != y->type || x->null != y->null)
        return false;
    if (x->null)
        return true;
    if (x->type == TYPE_NUMERIC && x->nscale != y->nscale)
        return false;
    /* The same constant, not SQL-equal ones: '1 month' = '30 days' and
     * -0.0 = 0.0 compare equal but compute different results. */
    switch (type_phys(x->type)) {
    case PHYS_IV:
        return x->u.iv.months == y->u.iv.months && x->u.iv.days == y->u.iv.days && x->u.iv.usecs == y->u.iv.usecs;
    case PHYS_F64: return memcmp(&x->u.f, &y->u.f, sizeof x->u.f) == 0;
    default: break;
    }
    return value_cmp(x, y) == 0;
}

/* Stricter than expr_equal: also the constant's scale and literal flags. */
static bool expr_same(const PlanExpr *x, const PlanExpr *y)
{
    if (!x || !y)
        return x == y;
    if (x->kind != y->kind || x->type != y->type || x->n_args != y->n_args)
        return false;
    switch (x->kind) {
    case PE_COL: return x->col == y->col;
    case PE_CONST:
        return x->unknown == y->unknown && str_same(x->decimal_text, y->decimal_text) && value_same(&x->value, &y->value);
    case PE_CALL:
        /* The clock is read at each evaluation: two calls are two values. */
        if (x->fn != y->fn || x->fn == FN_PROCTIME || x->fn == FN_NOW)
            return false;
        for (int i = 0; i < x->n_args; i++)
            if (!expr_same(x->args[i], y->args[i]))
                return false;
        return true;
    }
    return false;
}

static bool exprs_same(int n, PlanExpr *const *x, PlanExpr *const *y)
{
    for (int i = 0; i < n; i++)
        if (!expr_same(x[i], y[i]))
            return false;
    return true;
}

static bool schema_same(const PlanSchema *x, const PlanSchema *y)
{
    if (x->n != y->n)
        return false;
    for (int i = 0; i < x->n; i++)
        if (x->types[i] != y->types[i] || !str_same(x->names[i], y->names[i]) ||
            (x->hidden ? x->hidden[i] : false) != (y->hidden ? y->hidden[i] : false))
            return false;
    return true;
}

static bool aggs_same(int n, const PlanAgg *x, const PlanAgg *y)
{
    for (int i = 0; i < n; i++)
        if (x[i].kind != y[i].kind || x[i].arg != y[i].arg || x[i].arg_type != y[i].arg_type || x[i].type != y[i].type ||
            x[i].distinct != y[i].distinct || !str_same(x[i].sep, y[i].sep) || x[i].filter_col != y[i].filter_col ||
            x[i].compensated != y[i].compensated)
            return false;
    return true;
}

/* Kinds whose equal copies compute the same rows from the same inputs. Not:
 * the materialize (the view itself), a table's input, temporal joins (their
 * answers depend on when probes come), batch and recursive nodes (ad hoc
 * queries), view sources (each attaches to the upstream view's changes) and
 * the parallel nodes (plan_dist.c runs after). */
static bool shareable(PlanNodeKind k)
{
    switch (k) {
    case PN_SOURCE:
    case PN_WATERMARK:
    case PN_PROJECT:
    case PN_FILTER:
    case PN_WINDOW:
    case PN_AGG:
    case PN_JOIN:
    case PN_TOPN:
    case PN_UNION:
    case PN_SETOP:
    case PN_SEMI_JOIN:
        return true;
    default:
        return false;
    }
}

/* Every field but id, table_id, table_id2 and late_check/lateness_us of a
 * window (compared by the caller). Inputs by identity: they are
 * representatives already. */
static bool node_same(const PlanNode *x, const PlanNode *y)
{
    if (x->kind != y->kind || x->n_inputs != y->n_inputs)
        return false;
    for (int i = 0; i < x->n_inputs; i++)
        if (x->inputs[i] != y->inputs[i])
            return false;
    if (!schema_same(&x->out, &y->out) || x->append_only != y->append_only || x->wm_col != y->wm_col ||
        x->n_keys != y->n_keys || !ints_same(x->n_keys, x->keys, y->keys) || x->dup_keys != y->dup_keys)
        return false;
    /* Sources: the same relation from the same start. */
    if (x->source != y->source || x->start != y->start || x->start_ts_us != y->start_ts_us)
        return false;
    if (!expr_same(x->wm_expr, y->wm_expr) || x->wm_delay_us != y->wm_delay_us)
        return false;
    if (x->n_exprs != y->n_exprs || !exprs_same(x->n_exprs, x->exprs, y->exprs) || !expr_same(x->pred, y->pred))
        return false;
    /* A LATE ROWS INTO table is a side output of one window: never merged. */
    if (x->late_table_id || y->late_table_id || x->win_kind != y->win_kind || x->win_time_col != y->win_time_col ||
        x->win_size_us != y->win_size_us || x->win_slide_us != y->win_slide_us || x->win_offset_us != y->win_offset_us ||
        x->pane_us != y->pane_us)
        return false;
    if (x->kind != PN_WINDOW && (x->late_check != y->late_check || x->lateness_us != y->lateness_us))
        return false;
    if (x->n_group != y->n_group || !ints_same(x->n_group, x->group_cols, y->group_cols) ||
        x->n_group_bounds != y->n_group_bounds || x->n_aggs != y->n_aggs || !aggs_same(x->n_aggs, x->aggs, y->aggs) ||
        x->win_group_idx != y->win_group_idx || x->session != y->session ||
        x->session_start_idx != y->session_start_idx || x->session_end_idx != y->session_end_idx ||
        x->session_gap_us != y->session_gap_us || x->win_end_offset_us != y->win_end_offset_us ||
        x->state_ttl_us != y->state_ttl_us || x->emit != y->emit || x->agg_phase != y->agg_phase ||
        x->pane_start_idx != y->pane_start_idx || x->pane_end_idx != y->pane_end_idx)
        return false;
    if (x->join_type != y->join_type || x->n_join_keys != y->n_join_keys ||
        !ints_same(x->n_join_keys, x->left_keys, y->left_keys) || !ints_same(x->n_join_keys, x->right_keys, y->right_keys) ||
        !expr_same(x->residual, y->residual) || x->interval != y->interval || x->window_join != y->window_join ||
        x->left_time_col != y->left_time_col || x->right_time_col != y->right_time_col || x->lo_us != y->lo_us ||
        x->hi_us != y->hi_us || x->proc_time != y->proc_time)
        return false;
    for (int s = 0; s < 2; s++)
        if (!bools_same(s < x->n_inputs ? x->inputs[s]->out.n : 0, x->join_stored[s], y->join_stored[s]))
            return false;
    if (x->n_part != y->n_part || !ints_same(x->n_part, x->part_cols, y->part_cols) ||
        x->n_order_cols != y->n_order_cols || !ints_same(x->n_order_cols, x->order_cols, y->order_cols) ||
        !bools_same(x->n_order_cols, x->order_desc, y->order_desc) ||
        !bools_same(x->n_order_cols, x->order_nulls_first, y->order_nulls_first) || x->topn_limit != y->topn_limit)
        return false;
    if (!str_same(x->view_name, y->view_name) || x->row_id_key != y->row_id_key || x->counted != y->counted ||
        x->upsert != y->upsert || x->scan_rel != y->scan_rel || x->n_scan_eq || y->n_scan_eq || x->scan_lo ||
        y->scan_lo || x->scan_hi || y->scan_hi || x->set_op != y->set_op)
        return false;
    if (x->semi_kind != y->semi_kind || x->in_left_col != y->in_left_col || x->in_right_col != y->in_right_col ||
        x->scalar_col != y->scalar_col || !value_same(&x->scalar_default, &y->scalar_default))
        return false;
    /* Recursive, values and parallel fields: unused by the shareable kinds
     * before plan_distribute; anything set there is not merged. */
    if (x->rec_anchor || y->rec_anchor || x->rec_step || y->rec_step || x->rec_name || y->rec_name ||
        x->work_id != y->work_id || x->rec_union_all != y->rec_union_all || x->n_rows || y->n_rows || x->rows ||
        y->rows || x->parallelism || y->parallelism || x->shard_tables || y->shard_tables || x->n_dist_keys ||
        y->n_dist_keys || x->dist != y->dist || x->ex_reason || y->ex_reason || x->ex_lazy || y->ex_lazy ||
        x->key_groups || y->key_groups || x->repartition || y->repartition)
        return false;
    return true;
}

/* The one reader of each node in the tree as planned (before merging). */
static PlanNode *reader_of(const PlanView *v, const PlanNode *n)
{
    for (int i = 0; i < v->n_nodes; i++)
        for (int k = 0; k < v->nodes[i]->n_inputs; k++)
            if (v->nodes[i]->inputs[k] == n)
                return v->nodes[i];
    return NULL;
}

/* A window without the late mark whose rows all go, through projections and
 * filters, to a window-bounded aggregation dropping late rows with this
 * lateness: marking it changes no result (see the top comment). */
static bool late_mark_harmless(const PlanView *v, const PlanNode *w, int64_t lateness_us)
{
    if (w->late_check || w->late_table_id || w->pane_us)
        return false;
    const PlanNode *r = reader_of(v, w);
    while (r && (r->kind == PN_PROJECT || r->kind == PN_FILTER))
        r = reader_of(v, r);
    return r && r->kind == PN_AGG && r->win_group_idx >= 0 && !r->session && !r->pane_us &&
           r->lateness_us == lateness_us;
}

/* Whether windows x (a representative) and y may be one, and which mark the
 * merged one keeps: *mark_x says x must take y's mark. */
static bool windows_merge(const PlanView *v, const PlanNode *x, const PlanNode *y, bool *mark_x)
{
    *mark_x = false;
    if (x->late_check == y->late_check)
        return x->lateness_us == y->lateness_us;
    if (x->late_check)
        return late_mark_harmless(v, y, x->lateness_us);
    if (!late_mark_harmless(v, x, y->lateness_us))
        return false;
    *mark_x = true;
    return true;
}

int plan_share(Arena *a, PlanView *v)
{
    int n = v->n_nodes, merged = 0;
    if (n < 2)
        return 0;
    /* in[2 * i + k]: the index of nodes[i]'s input k (topological: below i).
     * rep[i]: the index of the node nodes[i] becomes (i when kept). */
    int *in = arena_alloc(a, sizeof(int) * (size_t)(2 * n));
    int *rep = arena_alloc(a, sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) {
        rep[i] = i;
        for (int k = 0; k < 2; k++) {
            in[2 * i + k] = -1;
            for (int j = 0; k < v->nodes[i]->n_inputs && j < i; j++)
                if (v->nodes[j] == v->nodes[i]->inputs[k])
                    in[2 * i + k] = j;
        }
    }
    /* Decisions first, with the readers as planned (late_mark_harmless);
     * the rewiring after. */
    for (int i = 0; i < n; i++) {
        PlanNode *x = v->nodes[i];
        if (!shareable(x->kind))
            continue;
        for (int j = 0; j < i; j++) {
            PlanNode *y = v->nodes[j];
            if (rep[j] != j || y->kind != x->kind || y->n_inputs != x->n_inputs)
                continue;
            bool same_in = true;
            for (int k = 0; k < x->n_inputs; k++)
                same_in &= in[2 * i + k] >= 0 && in[2 * j + k] >= 0 && rep[in[2 * i + k]] == rep[in[2 * j + k]];
            if (!same_in)
                continue;
            /* x as if it read y's inputs (the same representatives). */
            PlanNode xs = *x;
            for (int k = 0; k < x->n_inputs; k++)
                xs.inputs[k] = y->inputs[k];
            if (!node_same(y, &xs))
                continue;
            bool mark_y = false;
            if (x->kind == PN_WINDOW && !windows_merge(v, y, x, &mark_y))
                continue;
            if (mark_y) {
                y->late_check = true;
                y->lateness_us = x->lateness_us;
            }
            rep[i] = j;
            merged++;
            break;
        }
    }
    if (!merged)
        return 0;
    /* Every kept node reads the representatives; the others go. */
    PlanNode **orig = arena_alloc(a, sizeof(PlanNode *) * (size_t)n);
    memcpy(orig, v->nodes, sizeof(PlanNode *) * (size_t)n);
    int w = 0;
    for (int i = 0; i < n; i++) {
        if (rep[i] != i)
            continue;
        PlanNode *x = orig[i];
        for (int k = 0; k < x->n_inputs; k++)
            if (in[2 * i + k] >= 0)
                x->inputs[k] = orig[rep[in[2 * i + k]]];
        v->nodes[w++] = x;
    }
    v->n_nodes = w;
    return merged;
}
