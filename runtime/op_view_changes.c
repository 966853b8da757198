/*
 * op_view_changes.c: where a split view's changes are read (PN_VIEW_CHANGES).
 *
 * A parallel view whose materialize has P instances (plan_dist.c) stores
 * its rows in P tables, but its changes must still come out in one place:
 * sinks, SUBSCRIBE and views over this one hang off the dataflow's root as
 * fans (rt_dataflow_add_fan), and a view over this one starts from the
 * root's watermark. This operator, single, on the engine thread, behind a
 * gather exchange, is that root: it forwards each change and watermark as
 * it comes and keeps the last watermark (op->wm).
 *
 * The gather before it is lazy (op_exchange.c): while this operator has no
 * fans no rows cross the threads at all, only watermarks, which is what
 * makes a split materialize cheaper than a single one.
 */
#include "runtime_int.h"

#include <stdlib.h>

static int vc_push(RtOp *op, Chunk *c) { return rt_emit(op, c); }

static int vc_watermark(RtOp *op, int64_t wm)
{
    if (wm > op->wm)
        op->wm = wm;
    return rt_emit_watermark(op, wm);
}

static void vc_close(RtOp *op) { free(op); }

static const RtOpVt VC_VT = {.push = vc_push, .watermark = vc_watermark, .close = vc_close};

RtOp *rt_op_view_changes_new(RtCtx *rc, const PlanNode *n)
{
    RtOp *op = xcalloc(1, sizeof *op);
    op->vt = &VC_VT;
    op->node = n;
    op->rc = rc;
    op->wm = TS_MINUS_INF;
    return op;
}
