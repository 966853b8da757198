/*
 * cmd_explain_analyze.c: EXPLAIN [ANALYZE] MATERIALIZED VIEW v, the plan a
 * running view runs (the same tree EXPLAIN draws, planner/explain.c) and,
 * with ANALYZE, each operator's live figures; also GET
 * /api/views/<v>/analyze (http.c), the same as JSON.
 *
 * The figures come from the runtime's per-operator counters
 * (rt_dataflow_analyze): totals since the view started, and rates over the
 * runtime's window (the last RT_ANALYZE_WINDOW_S seconds, or since the start
 * when the view is younger), which do not depend on who asked before: the
 * runtime samples its counters once a second, so two clients (psql and the
 * dashboard) never shorten each other's window.
 *
 * weir runs a view's operators synchronously and depth first on one thread
 * (per shard): an operator cannot take its next chunk while its reader is
 * still working on the last one. So "backpressure" is the share of the
 * window an operator spent inside its readers' calls, "busy" the share in its
 * own code (its calls minus its readers', minus a source's wait for the
 * broker), and the rest of the window it was idle or another operator or
 * view had the thread. docs/sql.md lists the fields.
 */
#include "commands.h"
#include "clock.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef struct Analyze {
    RtDataflow *df;
    const PlanView *plan;
    int64_t now_us;           /* wall clock, for the watermark's delay */
    int64_t mono_us;          /* monotonic clock: where every node's window ends */
} Analyze;

/* What one node's figures say, derived once for both formats. */
typedef struct Figures {
    RtOpAnalyze a;
    double window_s;
    double in_rate, out_rate;  /* rows per second over the window */
    double busy, backpressure; /* shares of the window (instances of a parallel node add up) */
    double wait;               /* sources: share spent waiting for the broker */
    bool is_source, is_join;
} Figures;

static int node_index(const PlanView *p, const PlanNode *n)
{
    for (int i = 0; i < p->n_nodes; i++)
        if (p->nodes[i] == n)
            return i;
    return -1;
}

static double share(uint64_t now, uint64_t then, double window_s)
{
    return window_s > 0 && now >= then ? (double)(now - then) / 1e9 / window_s : 0;
}

static double rate(uint64_t now, uint64_t then, double window_s)
{
    return window_s > 0 && now >= then ? (double)(now - then) / window_s : 0;
}

/* Its calls minus its readers' and (sources) the broker's; 0 where a part
 * of its work is not timed (a view source's first read of its upstream's
 * rows at start), rather than a wrapped-around difference. */
static uint64_t own_ns(const RtOpCounters *c)
{
    uint64_t other = c->down_ns + c->wait_ns;
    return c->busy_ns > other ? c->busy_ns - other : 0;
}

static bool figures(const Analyze *an, const PlanNode *n, Figures *f)
{
    memset(f, 0, sizeof *f);
    int i = node_index(an->plan, n);
    if (i < 0 || rt_dataflow_analyze(an->df, i, an->mono_us, &f->a))
        return false;
    const RtOpCounters *c = &f->a.now, *t = &f->a.then;
    f->window_s = (double)f->a.window_us / 1e6;
    f->in_rate = rate(c->rows_in, t->rows_in, f->window_s);
    f->out_rate = rate(c->rows_out, t->rows_out, f->window_s);
    /* Own time: its calls minus its readers' and (sources) the broker's. */
    uint64_t own_now = own_ns(c), own_then = own_ns(t);
    f->busy = share(own_now, own_then, f->window_s);
    f->backpressure = share(c->down_ns, t->down_ns, f->window_s);
    f->wait = share(c->wait_ns, t->wait_ns, f->window_s);
    f->is_source = n->kind == PN_SOURCE || n->kind == PN_VIEW_SOURCE || n->kind == PN_TABLE_WRITE;
    f->is_join = n->kind == PN_JOIN;
    return true;
}

static void wm_text(int64_t wm, Buf *out)
{
    if (wm == TS_PLUS_INF) {
        buf_puts(out, "+infinity");
        return;
    }
    Value v = value_int(TYPE_TIMESTAMP, wm);
    value_to_text(&v, out);
}

static void annotate_text(const Analyze *an, const Figures *f, Buf *out)
{
    const RtOpCounters *c = &f->a.now;
    buf_printf(out, "rows in: %" PRIu64 " (%.1f/s), out: %" PRIu64 " (%.1f/s), busy: %.1f%%, backpressure: %.1f%%",
               c->rows_in, f->in_rate, c->rows_out, f->out_rate, 100 * f->busy, 100 * f->backpressure);
    if (f->is_source && c->wait_ns)
        buf_printf(out, ", broker wait: %.1f%%", 100 * f->wait);
    buf_printf(out, ", late rows: %" PRIu64, c->late_rows);
    if (f->is_join) {
        buf_printf(out, ", probes: %" PRIu64 ", hits: %" PRIu64, c->probes, c->probe_hits);
        if (c->probes)
            buf_printf(out, " (%.1f%%)", 100.0 * (double)c->probe_hits / (double)c->probes);
    }
    if (f->a.state_entries >= 0)
        buf_printf(out, ", state: %" PRIu64 " bytes, %" PRId64 " entries (+%" PRIu64 " pending)", f->a.state_bytes,
                   f->a.state_entries, f->a.state_pending);
    if (c->wm_out != TS_MINUS_INF) {
        buf_puts(out, ", watermark: ");
        wm_text(c->wm_out, out);
        if (c->wm_out != TS_PLUS_INF)
            buf_printf(out, " (%.3f s behind)", (double)(an->now_us - c->wm_out) / 1e6);
    }
}

static void json_u64_or_null(Buf *out, const char *key, bool known, uint64_t v)
{
    if (known)
        buf_printf(out, ", \"%s\": %" PRIu64, key, v);
    else
        buf_printf(out, ", \"%s\": null", key);
}

static void annotate_json(const Analyze *an, const Figures *f, Buf *out)
{
    const RtOpCounters *c = &f->a.now;
    buf_printf(out,
               "{\"rows_in\": %" PRIu64 ", \"rows_out\": %" PRIu64 ", \"rows_in_per_s\": %.3f, \"rows_out_per_s\": %.3f"
               ", \"busy\": %.6f, \"backpressure\": %.6f, \"late_rows\": %" PRIu64,
               c->rows_in, c->rows_out, f->in_rate, f->out_rate, f->busy, f->backpressure, c->late_rows);
    if (f->is_source)
        buf_printf(out, ", \"broker_wait\": %.6f", f->wait);
    bool st = f->a.state_entries >= 0;
    json_u64_or_null(out, "state_bytes", st, f->a.state_bytes);
    json_u64_or_null(out, "state_entries", st, (uint64_t)f->a.state_entries);
    json_u64_or_null(out, "state_pending", st, f->a.state_pending);
    buf_puts(out, ", \"watermark\": ");
    if (c->wm_out == TS_MINUS_INF) {
        buf_puts(out, "null, \"watermark_delay_ms\": null");
    } else {
        buf_putc(out, '"');
        wm_text(c->wm_out, out);
        buf_putc(out, '"');
        if (c->wm_out == TS_PLUS_INF)
            buf_puts(out, ", \"watermark_delay_ms\": null");
        else
            buf_printf(out, ", \"watermark_delay_ms\": %" PRId64, (an->now_us - c->wm_out) / 1000);
    }
    json_u64_or_null(out, "probes", f->is_join, c->probes);
    json_u64_or_null(out, "probe_hits", f->is_join, c->probe_hits);
    if (f->is_join && c->probes)
        buf_printf(out, ", \"probe_hit_rate\": %.6f", (double)c->probe_hits / (double)c->probes);
    else
        buf_puts(out, ", \"probe_hit_rate\": null");
    buf_putc(out, '}');
}

/* PlanExplainAnnotate: one node's figures. */
static void annotate(void *arg, const PlanNode *n, bool json, Buf *out)
{
    const Analyze *an = arg;
    Figures f;
    if (!figures(an, n, &f)) {
        buf_puts(out, json ? "null" : "(no figures: not an operator of the running view)");
        return;
    }
    if (json)
        annotate_json(an, &f, out);
    else
        annotate_text(an, &f, out);
}

/* The window every node's rates are over (the same for all of them). */
static double window_s(RtDataflow *df, int64_t mono_us)
{
    RtOpAnalyze a;
    return rt_dataflow_analyze(df, 0, mono_us, &a) ? 0 : (double)a.window_us / 1e6;
}

int srv_explain_view(Engine *e, const char *name, int pos, bool analyze, bool json, Buf *out, WError *err)
{
    CatObj *o = cat_find(e->cat, name);
    if (!o)
        return werr(err, SQLSTATE_UNDEFINED_TABLE, pos, "materialized view \"%s\" does not exist", name);
    if (o->kind != CAT_VIEW || !o->rel.materialized || !o->flow.plan)
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, pos, "\"%s\" is not a materialized view", name);
    if (!analyze) {
        plan_explain_view(o->flow.plan, json, out);
        return 0;
    }
    if (!o->flow.df) {
        werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, pos, "materialized view \"%s\" is not running", name);
        werr_hint(err, "weir_views.state and last_error say why; EXPLAIN MATERIALIZED VIEW without ANALYZE shows its plan");
        return -1;
    }
    Analyze an = {o->flow.df, o->flow.plan, clock_wall_us(), clock_mono_us()};
    double w = window_s(o->flow.df, an.mono_us);
    if (json) {
        buf_puts(out, "{\"view\": \"");
        for (const char *p = o->name; *p; p++) {
            if (*p == '"' || *p == '\\')
                buf_printf(out, "\\%c", *p);
            else if ((unsigned char)*p < 0x20)
                buf_printf(out, "\\u%04x", *p);
            else
                buf_putc(out, *p);
        }
        buf_printf(out, "\", \"window_s\": %.6f, \"plan\": ", w);
        plan_explain_view_annotated(o->flow.plan, true, annotate, &an, out);
        buf_putc(out, '}');
    } else {
        buf_printf(out, "EXPLAIN ANALYZE of %s: totals since the view started, rates over the last %.3f s\n", o->name, w);
        plan_explain_view_annotated(o->flow.plan, false, annotate, &an, out);
    }
    return 0;
}
