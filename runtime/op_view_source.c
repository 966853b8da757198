/*
 * op_view_source.c: a view reading another view's changelog.
 *
 * The source attaches a small bridge operator to the upstream view's
 * materialize operator (like a sink), so every change of the upstream view
 * is pushed, synchronously and in the engine thread, into this dataflow.
 * Both dataflows are checkpointed in the same LMDB transaction, so their
 * states always describe the same epoch and a restart needs no replay
 * between them. When the view is created it first reads the upstream
 * view's current rows as inserts; a marker in its table records that, so a
 * restart does not read them twice. In a VERIFY replay (rc->replay_of)
 * only the current rows are read: the recomputation of the view from them.
 */
#include "runtime_int.h"
#include "clock.h"

#include <stdlib.h>
#include <string.h>

static const unsigned char STARTED_KEY[1] = {0xff};

typedef struct ViewSource ViewSource;

typedef struct Bridge {
    RtOp op;
    ViewSource *vs;
} Bridge;

struct ViewSource {
    RtSource base;
    Bridge bridge;
    RtDataflow *up;           /* NULL once the upstream dataflow has gone */
    bool attached;            /* the bridge is among up's consumers (not in a VERIFY replay) */
    bool started;             /* the upstream's rows were read (durable after a checkpoint) */
    bool marker_written;
};

/* The upstream view's changes arrive through the bridge: timed here into the
 * view source's own counters (EXPLAIN ANALYZE), as rt_source_poll times a poll. */
static int bridge_push(RtOp *op, Chunk *c)
{
    ViewSource *vs = ((Bridge *)op)->vs;
    vs->base.op.rc->stats.records_in += (uint64_t)c->n_rows;
    vs->base.op.counters.rows_in += (uint64_t)c->n_rows;
    int64_t t0 = clock_mono_ns();
    int rc = rt_emit(&vs->base.op, c);
    vs->base.op.counters.busy_ns += (uint64_t)(clock_mono_ns() - t0);
    return rc;
}
static int bridge_watermark(RtOp *op, int64_t wm)
{
    RtOp *to = &((Bridge *)op)->vs->base.op;
    int64_t t0 = clock_mono_ns();
    int rc = rt_emit_watermark(to, wm);
    to->counters.busy_ns += (uint64_t)(clock_mono_ns() - t0);
    return rc;
}
/* The upstream dataflow is closing and frees its consumers: the bridge lives in
 * the view source, so it only notes that the upstream is gone. */
static void bridge_close(RtOp *op) { ((Bridge *)op)->vs->up = NULL; }

static const RtOpVt BRIDGE_VT = {.push = bridge_push, .watermark = bridge_watermark, .close = bridge_close};

static int vs_poll(RtOp *op, int timeout_ms, bool *did_work) { return 0; }
static int vs_flush_target(RtOp *op, WError *err) { return 0; }
static bool vs_flushed(RtOp *op) { return true; } /* upstream changes arrive synchronously */

static const RtSourceVt VIEW_SRC = {vs_poll, vs_flush_target, vs_flushed};

static int vs_push(RtOp *op, Chunk *c) { return rt_emit(op, c); }
static int vs_watermark(RtOp *op, int64_t wm) { return rt_emit_watermark(op, wm); }

static int vs_flush_state(RtOp *op, uint64_t epoch)
{
    ViewSource *vs = (ViewSource *)(void *)op;
    if (vs->started && !vs->marker_written) {
        if (stor_table_put(op->table, STARTED_KEY, 1, "1", 1, op->rc->err))
            return -1;
        vs->marker_written = true;
    }
    return 0;
}

/* The upstream view's rows, as inserts, once; then (at every start) the
 * watermark the upstream has reached: an upstream that does not change any
 * more must not hold this view's windows and temporal joins back forever. */
static int vs_start(RtOp *op)
{
    ViewSource *vs = (ViewSource *)(void *)op;
    if (!vs->up)
        return 0;
    if (!vs->started) {
        vs->started = true;
        const PlanNode *n = op->node;
        if (rt_emit_view_rows(op, rt_dataflow_view_table(vs->up), n->out.n, n->out.types, n->scan_rel->counted,
                              n->scan_rel->name))
            return -1;
    }
    /* The value operators forward is the sources' watermark (a window
     * aggregation passes it on once its windows are final), so after a
     * restart, before any watermark has flowed, the source's stands in. */
    int64_t wm = rt_dataflow_root(vs->up)->wm;
    if (wm == TS_MINUS_INF) {
        RtStats st;
        rt_dataflow_stats(vs->up, &st);
        wm = st.watermark;
    }
    return wm != TS_MINUS_INF ? rt_emit_watermark(op, wm) : 0;
}

static void vs_close(RtOp *op)
{
    ViewSource *vs = (ViewSource *)(void *)op;
    if (vs->up && vs->attached)
        rt_dataflow_remove_fan(vs->up, &vs->bridge.op);
    stor_table_close(op->table);
    free(vs);
}

static const RtOpVt VS_VT = {.push = vs_push, .watermark = vs_watermark, .flush_state = vs_flush_state,
                             .close = vs_close, .start = vs_start};

RtOp *rt_op_view_source_new(RtCtx *rc, const PlanNode *n)
{
    RtDataflow *up = rc->env->view_dataflow ? rc->env->view_dataflow(rc->env->ctx, n->scan_rel->table_id) : NULL;
    if (!up) {
        werr(rc->err, SQLSTATE_OBJECT_NOT_IN_STATE, 0, "materialized view \"%s\" is not running", n->scan_rel->name);
        return NULL;
    }
    ViewSource *vs = xcalloc(1, sizeof *vs);
    vs->base.src = &VIEW_SRC;
    vs->base.op.vt = &VS_VT;
    vs->base.op.node = n;
    vs->base.op.rc = rc;
    vs->base.op.wm = TS_MINUS_INF;
    vs->bridge.op.vt = &BRIDGE_VT;
    vs->bridge.op.node = n;
    vs->bridge.op.rc = rc;
    vs->bridge.vs = vs;
    if (rt_op_open_table(&vs->base.op, rc->err)) {
        free(vs);
        return NULL;
    }
    const void *v;
    size_t vl;
    int f = stor_table_get(vs->base.op.table, STARTED_KEY, 1, &v, &vl, rc->err);
    if (f < 0) {
        stor_table_close(vs->base.op.table);
        free(vs);
        return NULL;
    }
    vs->started = vs->marker_written = f == 1;
    vs->up = up;
    /* A VERIFY replay reads the upstream's current rows (vs_start) and
     * nothing after: it runs under the engine lock, so nothing changes. */
    if (!rc->replay_of) {
        rt_dataflow_add_fan(up, &vs->bridge.op);
        vs->attached = true;
    }
    return &vs->base.op;
}
