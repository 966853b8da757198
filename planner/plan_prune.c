/*
 * plan_prune.c: which columns of an append-only join side the join stores.
 *
 * A join keeps every row of each side in its state until the watermark (or
 * nothing) drops it, and each row goes into the checkpoints once. A query
 * usually reads a few of a side's columns after the join (Nexmark q4 reads
 * an auction's id, category and times, not its ~500-byte `extra`), so
 * storing the whole row costs encode time, memory and checkpoint bytes for
 * values nobody reads. Here the plan is walked from the view down, each node
 * telling which columns of its inputs it reads; a join side whose input is
 * append-only and has columns that neither the join (keys, times, residual)
 * nor anything above it reads gets a `join_stored` mask, and the runtime
 * stores and emits NULL in the other columns.
 *
 * Only append-only sides: their rows are never retracted, so a row stored
 * before this pass existed (the whole row, hashed whole, in a checkpoint of
 * an older binary) never has to be found again by the hash of its pruned
 * form. A retracting side would need that.
 *
 * The rules are conservative: only projections, filters, watermarks,
 * aggregations and joins say which columns they read; every other node
 * (materialize, windows, Top-N, unions, semi and temporal joins...) reads all
 * of its inputs' columns.
 */
#include "planner_int.h"

#include <string.h>

static void expr_cols(const PlanExpr *e, bool *mask, int n)
{
    if (!e)
        return;
    if (e->kind == PE_COL) {
        if (e->col >= 0 && e->col < n)
            mask[e->col] = true;
        return;
    }
    if (e->kind == PE_CALL)
        for (int i = 0; i < e->n_args; i++)
            expr_cols(e->args[i], mask, n);
}

static void mark(bool *mask, int n, int col)
{
    if (col >= 0 && col < n)
        mask[col] = true;
}

static void mark_all(bool *mask, int n)
{
    for (int i = 0; i < n; i++)
        mask[i] = true;
}

void plan_prune_joins(Arena *a, PlanView *v)
{
    int nn = v->n_nodes;
    /* need[i]: the output columns of nodes[i] that its readers read. */
    bool **need = arena_zalloc(a, sizeof(bool *) * (size_t)(nn ? nn : 1));
    for (int i = 0; i < nn; i++)
        need[i] = arena_zalloc(a, (size_t)(v->nodes[i]->out.n ? v->nodes[i]->out.n : 1));
    int root = -1;
    for (int i = 0; i < nn; i++)
        if (v->nodes[i] == v->root)
            root = i;
    if (root < 0)
        return;
    mark_all(need[root], v->root->out.n);
    /* Readers come after their inputs in nodes[]: walking backwards, a
     * node's need is complete before it passes it on. */
    for (int i = nn - 1; i >= 0; i--) {
        PlanNode *n = v->nodes[i];
        bool *in_need[2] = {NULL, NULL};
        for (int k = 0; k < n->n_inputs && k < 2; k++)
            for (int j = 0; j < nn; j++)
                if (v->nodes[j] == n->inputs[k])
                    in_need[k] = need[j];
        if (n->n_inputs < 1 || !in_need[0])
            continue;
        int n0 = n->inputs[0]->out.n;
        switch (n->kind) {
        case PN_PROJECT:
            /* Every expression is evaluated (and may fail) whether or not it is read. */
            for (int e = 0; e < n->n_exprs; e++)
                expr_cols(n->exprs[e], in_need[0], n0);
            break;
        case PN_FILTER:
            expr_cols(n->pred, in_need[0], n0);
            for (int c = 0; c < n0 && c < n->out.n; c++)
                in_need[0][c] |= need[i][c];
            break;
        case PN_WATERMARK:
            expr_cols(n->wm_expr, in_need[0], n0);
            mark(in_need[0], n0, n->wm_col);
            for (int c = 0; c < n0 && c < n->out.n; c++)
                in_need[0][c] |= need[i][c];
            break;
        case PN_AGG:
            for (int g = 0; g < n->n_group; g++)
                mark(in_need[0], n0, n->group_cols[g]);
            for (int g = 0; g < n->n_aggs; g++) {
                mark(in_need[0], n0, n->aggs[g].arg);
                mark(in_need[0], n0, n->aggs[g].filter_col);
            }
            break;
        case PN_JOIN: {
            if (n->n_inputs != 2 || !in_need[1]) {
                mark_all(in_need[0], n0);
                break;
            }
            int n1 = n->inputs[1]->out.n;
            bool *own[2];
            own[0] = arena_zalloc(a, (size_t)(n0 ? n0 : 1));
            own[1] = arena_zalloc(a, (size_t)(n1 ? n1 : 1));
            for (int c = 0; c < n0; c++)
                own[0][c] = need[i][c];
            for (int c = 0; c < n1; c++)
                own[1][c] = need[i][n0 + c];
            for (int k = 0; k < n->n_join_keys; k++) {
                mark(own[0], n0, n->left_keys[k]);
                mark(own[1], n1, n->right_keys[k]);
            }
            if (n->interval) {
                mark(own[0], n0, n->left_time_col);
                mark(own[1], n1, n->right_time_col);
            }
            if (n->residual) {
                bool *res = arena_zalloc(a, (size_t)(n0 + n1 ? n0 + n1 : 1));
                expr_cols(n->residual, res, n0 + n1);
                for (int c = 0; c < n0; c++)
                    own[0][c] |= res[c];
                for (int c = 0; c < n1; c++)
                    own[1][c] |= res[n0 + c];
            }
            for (int s = 0; s < 2; s++) {
                int ns = s ? n1 : n0;
                bool some_unread = false;
                for (int c = 0; c < ns; c++) {
                    in_need[s][c] |= own[s][c];
                    some_unread |= !own[s][c];
                }
                n->join_stored[s] = some_unread && n->inputs[s]->append_only ? own[s] : NULL;
            }
            break;
        }
        default:
            for (int k = 0; k < n->n_inputs && k < 2; k++)
                if (in_need[k])
                    mark_all(in_need[k], n->inputs[k]->out.n);
            break;
        }
    }
}
