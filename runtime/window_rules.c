/*
 * window_rules.c: the event-time rules of windows, in one place.
 *
 * Which windows a row falls in, when a window is closed and when a row is
 * late for a window are decided here and nowhere else: the window operator
 * (op_window.c) calls these for every row of a running view, the window
 * aggregation (op_agg.c) for closing and expiring windows, and ANALYZE
 * LATENESS (lateness_analyze.c) for its simulation of a source's log, so
 * the figures the analysis reports are the decisions a live view would
 * make. docs/architecture.md "Time, windows, lateness" states the rules.
 *
 * Sessions are Flink's: a row at ts opens [ts, ts + gap); sessions that
 * overlap or touch (one ends where the other starts) are one session; a
 * row is late only when the session it forms after merging is late.
 */
#include "runtime.h"

#include "types.h"

/* floor(a / b) for b > 0. */
static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0)) ? q - 1 : q;
}

int rt_window_assign(const RtWindowDef *w, int64_t ts, int64_t *starts, int64_t *ends, int max)
{
    if (w->kind == WIN_SESSION) {
        /* The row's own session [ts, ts + gap); the aggregation merges those that join (rt_session_joins). */
        if (max < 1)
            return 0;
        starts[0] = ts;
        ends[0] = ts + w->size_us;
        return 1;
    }
    bool cum = w->kind == WIN_CUMULATE;
    int per_row = (int)(w->size_us / w->slide_us);
    int64_t unit = cum ? w->size_us : w->slide_us;
    int64_t last = floor_div(ts - w->offset_us, unit) * unit + w->offset_us;
    int n = 0;
    /* TUMBLE/HOP: the last window start at or before ts, then earlier ones
     * while they still cover ts (emitted oldest first). CUMULATE: one start
     * (aligned to the max size), ends every step from it, those after ts. */
    for (int k = 0; k < per_row && n < max; k++) {
        int64_t start = cum ? last : last - (int64_t)(per_row - 1 - k) * w->slide_us;
        int64_t end = cum ? last + (int64_t)(k + 1) * w->slide_us : start + w->size_us;
        if (end <= ts)
            continue;
        starts[n] = start;
        ends[n] = end;
        n++;
    }
    return n;
}

bool rt_window_closed(int64_t end, int64_t wm)
{
    return wm != TS_MINUS_INF && end <= wm;
}

bool rt_window_late(int64_t end, int64_t wm, int64_t lateness_us)
{
    if (wm == TS_MINUS_INF)
        return false;
    if (wm == TS_PLUS_INF)
        return true;
    return end <= wm - lateness_us;
}

bool rt_session_joins(int64_t start, int64_t end, int64_t o_start, int64_t o_end)
{
    return o_start <= end && start <= o_end;
}
