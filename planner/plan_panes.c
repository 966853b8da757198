/*
 * plan_panes.c: deciding when a hopping-window aggregation shares its work
 * across overlapping windows.
 *
 * HOP(slide, size) puts each row in size/slide windows. Updating every one
 * of them per row costs size/slide times a tumbling window. When the view
 * emits on window close and every aggregate can be merged (count, sum, avg,
 * min, max, bool_and/or over an append-only input), the rows are instead
 * aggregated once into panes of gcd(slide, size) (each pane in exactly one
 * window position), and when the watermark closes a window its panes are
 * merged (runtime/op_agg.c, "panes"). Lateness is still judged per (row,
 * window) where the window is assigned, so the results, late rows and
 * counters are the same as without panes.
 *
 * The window columns must reach the aggregation untouched: every node
 * between the window and the aggregation may pass them through but not
 * compute with them (a filter on window_start would see pane bounds).
 */
#include "planner_int.h"

static bool refs_col(const PlanExpr *e, int col)
{
    if (e->kind == PE_COL)
        return e->col == col;
    for (int i = 0; i < e->n_args; i++)
        if (refs_col(e->args[i], col))
            return true;
    return false;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Follows window columns *s and *e (positions in n's input, -1 = gone)
 * through n to positions in its output. False when n computes with them. */
static bool follow(const PlanNode *n, int *s, int *e)
{
    if (n->kind == PN_FILTER)
        return !((*s >= 0 && refs_col(n->pred, *s)) || (*e >= 0 && refs_col(n->pred, *e)));
    if (n->kind != PN_PROJECT)
        return false;
    int ns = -1, ne = -1;
    for (int i = 0; i < n->n_exprs; i++) {
        const PlanExpr *x = n->exprs[i];
        for (int w = 0; w < 2; w++) {
            int col = w ? *e : *s;
            int *out = w ? &ne : &ns;
            if (col < 0 || !refs_col(x, col))
                continue;
            if (x->kind != PE_COL || *out >= 0)
                return false; /* computed with, or copied twice */
            *out = i;
        }
    }
    *s = ns;
    *e = ne;
    return true;
}

bool plan_set_panes(PlanNode *agg, PlanNode *win, int plan_rev)
{
    if (win->win_kind != WIN_HOP || agg->emit != PLAN_EMIT_ON_CLOSE || agg->session || !agg->inputs[0]->append_only)
        return false;
    int64_t size = win->win_size_us, slide = win->win_slide_us;
    if (size <= slide)
        return false; /* windows do not overlap: nothing to share */
    int64_t g = gcd64(size, slide);
    if (size / g > 1000)
        return false; /* too many panes per window: merging would cost more than it saves */
    for (int i = 0; i < agg->n_aggs; i++) {
        /* A numeric sum merges exactly (its scale counts too, as sessions
         * merge them); before revision 4 panes took double/bigint sums only,
         * and a view planned then keeps its plan. */
        if (plan_rev < 4 && agg->aggs[i].type == TYPE_NUMERIC &&
            (agg->aggs[i].kind == AGG_SUM || agg->aggs[i].kind == AGG_AVG))
            return false;
        switch (agg->aggs[i].kind) {
        case AGG_COUNT_STAR:
        case AGG_COUNT:
        case AGG_SUM:
        case AGG_AVG:
        case AGG_MIN:
        case AGG_MAX:
        case AGG_BOOL_AND:
        case AGG_BOOL_OR: break;
        default: return false; /* order-dependent or a multiset: not merged from panes */
        }
    }
    int nin = win->inputs[0]->out.n;
    int s = nin, e = nin + 1;
    const PlanNode *n = agg->inputs[0];
    /* The nodes between, from the aggregation's input down to the window. */
    /* Past MAX_CHAIN nodes the panes are simply not used (a plan, not an error). */
    enum { MAX_CHAIN = 64 };
    const PlanNode *chain[MAX_CHAIN];
    int depth = 0;
    for (; n != win; n = n->n_inputs == 1 ? n->inputs[0] : NULL) {
        if (!n || depth == MAX_CHAIN)
            return false;
        chain[depth++] = n;
    }
    for (int k = depth - 1; k >= 0; k--)
        if (!follow(chain[k], &s, &e))
            return false;
    int si = -1, ei = -1;
    for (int i = 0; i < agg->n_group; i++) {
        if (agg->group_cols[i] == s && s >= 0)
            si = i;
        if (agg->group_cols[i] == e && e >= 0)
            ei = i;
    }
    if (si < 0 && ei < 0)
        return false;
    for (int i = 0; i < agg->n_aggs; i++) {
        const PlanAgg *a = &agg->aggs[i];
        if ((a->arg >= 0 && (a->arg == s || a->arg == e)) ||
            (a->filter_col >= 0 && (a->filter_col == s || a->filter_col == e)))
            return false;
    }
    win->pane_us = g;
    agg->pane_us = g;
    agg->win_size_us = size;
    agg->win_slide_us = slide;
    agg->win_offset_us = win->win_offset_us;
    agg->pane_start_idx = si;
    agg->pane_end_idx = ei;
    return true;
}
