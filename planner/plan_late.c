/*
 * plan_late.c: the window/lateness pass of a view. Emit mode (EMIT ON WINDOW
 * CLOSE), ALLOW LATENESS and LATE ROWS INTO apply to the window-bounded
 * aggregation at the top of the view's plan: this pass finds it, checks that
 * those clauses have one, gives it its lateness and emit mode, marks the
 * window below it for lateness (late_check: judged per (row, window) where
 * windows are assigned), makes a HOP window work in panes where it can
 * (plan_panes.c), and propagates the changelog mode to the nodes above it.
 */
#include "planner_int.h"

int plan_view_lateness(PlanCtx *p, const AstCreateView *cv, PlanNode *in, PlanNode **agg_out, PlanNode **late_win_out)
{
    BindCtx *b = &p->b;
    WError *err = b->err;
    /* Emit mode and lateness apply to a window-bounded aggregation at the top-> */
    PlanNode *agg = NULL;
    for (PlanNode *n = in; n && n->kind != PN_UNION && n->kind != PN_SETOP; n = n->n_inputs ? n->inputs[0] : NULL)
        if (n->kind == PN_AGG) {
            agg = n;
            break;
        }
    int64_t lateness = 0;
    if (cv->allow_lateness) {
        Scope empty = {0};
        if (const_interval_us(b, &empty, cv->allow_lateness, &lateness))
            return -1;
        if (lateness < 0) {
            werr(err, SQLSTATE_INVALID_PARAMETER, cv->allow_lateness->pos, "ALLOW LATENESS must not be negative");
            return -1;
        }
    }
    bool windowed = agg && agg->win_group_idx >= 0;
    PlanNode *late_win = NULL;
    if (cv->late_rows_into && !windowed) {
        werr(err, SQLSTATE_WINDOWING_ERROR, cv->query_pos, "LATE ROWS INTO needs a windowed aggregation over a window function");
        return -1;
    }
    if ((cv->emit == EMIT_ON_WINDOW_CLOSE || cv->allow_lateness) && !windowed) {
        werr(err, SQLSTATE_WINDOWING_ERROR, cv->query_pos,
             "%s needs a windowed aggregation: GROUP BY window_start or window_end of a window over a source with a WATERMARK",
             cv->emit == EMIT_ON_WINDOW_CLOSE ? "EMIT ON WINDOW CLOSE" : "ALLOW LATENESS");
        return -1;
    }
    if (agg) {
        agg->lateness_us = lateness;
        agg->emit = cv->emit == EMIT_ON_WINDOW_CLOSE ? PLAN_EMIT_ON_CLOSE : PLAN_EMIT_CHANGES;
        if (agg->emit == PLAN_EMIT_ON_CLOSE && lateness == 0)
            agg->append_only = true;
        for (int i = 0; i < agg->n_aggs; i++) {
            PlanAggKind k = agg->aggs[i].kind;
            if ((k == AGG_STRING_AGG || k == AGG_FIRST || k == AGG_LAST) && !agg->inputs[0]->append_only) {
                werr(err, SQLSTATE_NOT_SUPPORTED, cv->query_pos,
                     "feature not supported: %s over a changelog input (it depends on arrival order)",
                     k == AGG_STRING_AGG ? "string_agg" : k == AGG_FIRST ? "first_value" : "last_value");
                return -1;
            }
        }
        /* Lateness is judged where the window is assigned, per (row, window):
         * a hopping row can be late for one window and on time for another. */
        PlanNode *win = NULL;
        for (PlanNode *n = windowed ? agg->inputs[0] : NULL; n; n = n->n_inputs == 1 ? n->inputs[0] : NULL)
            if (n->kind == PN_WINDOW) {
                win = n;
                break;
            }
        if (win && win->win_kind == WIN_SESSION) {
            /* A row's session is decided by merging: the aggregation judges lateness. */
            if (cv->late_rows_into) {
                werr(err, SQLSTATE_NOT_SUPPORTED, cv->query_pos, "feature not supported: LATE ROWS INTO with SESSION windows");
                return -1;
            }
            win = NULL;
        }
        if (win) {
            win->late_check = true;
            win->lateness_us = lateness;
            plan_set_panes(agg, win, p->plan_rev);
        }
        if (cv->late_rows_into && !win) {
            werr(err, SQLSTATE_WINDOWING_ERROR, cv->query_pos, "LATE ROWS INTO needs a windowed aggregation over a window function");
            return -1;
        }
        if (cv->late_rows_into) {
            win->late_table_id = new_table(p);
            late_win = win;
        }
        /* Propagate the changelog mode to the nodes above the aggregation. */
        for (int i = 0; i < p->n_nodes; i++) {
            PlanNode *n = p->nodes[i];
            if (n != agg && n->n_inputs && (n->kind == PN_PROJECT || n->kind == PN_FILTER))
                n->append_only = n->inputs[0]->append_only;
        }
    }

    *agg_out = agg;
    *late_win_out = late_win;
    return 0;
}
