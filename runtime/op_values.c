/*
 * op_values.c: VALUES in a materialized view (CREATE MATERIALIZED VIEW v AS
 * VALUES ..., or SELECT ... FROM (VALUES ...)): a bounded input.
 *
 * The rows are literals folded by the planner (PlanNode.rows). They are
 * emitted once, as inserts, when the view is created (the start hook, like
 * a view source's first read); a marker in the node's state table, written
 * with the next checkpoint, records it, so a restart does not emit them
 * again: the view's own state holds them from then on. A crash before that
 * checkpoint loses the view's rows with the marker, and they are emitted
 * again at the next start. A parallel view emits them from one instance.
 * No watermark: a VALUES input has no event time.
 */
#include "runtime_int.h"

#include <stdlib.h>

static const unsigned char EMITTED_KEY[1] = {0xff};

typedef struct ValuesOp {
    RtOp op;
    bool emitted;          /* the rows went downstream (durable after a checkpoint) */
    bool marker_written;
} ValuesOp;

static int values_push(RtOp *op, Chunk *c) { return rt_emit(op, c); }
static int values_watermark(RtOp *op, int64_t wm) { return 0; }

static int values_start(RtOp *op)
{
    ValuesOp *v = (ValuesOp *)op;
    if (v->emitted || !rt_op_owns(op, 0))
        return 0;
    v->emitted = true;
    const PlanNode *n = op->node;
    return rt_emit_rows(op, n->n_rows, n->rows, n->out.n, n->out.types);
}

static int values_flush_state(RtOp *op, uint64_t epoch)
{
    ValuesOp *v = (ValuesOp *)op;
    if (v->emitted && !v->marker_written) {
        if (stor_table_put(op->table, EMITTED_KEY, 1, "1", 1, op->rc->err))
            return -1;
        v->marker_written = true;
    }
    return 0;
}

static void values_close(RtOp *op)
{
    stor_table_close(op->table);
    free(op);
}

static const RtOpVt VALUES_STREAM_VT = {.push = values_push, .watermark = values_watermark,
                                        .flush_state = values_flush_state, .close = values_close,
                                        .start = values_start};

RtOp *rt_op_values_stream_new(RtCtx *rc, const PlanNode *n)
{
    ValuesOp *v = xcalloc(1, sizeof *v);
    v->op.vt = &VALUES_STREAM_VT;
    v->op.node = n;
    v->op.rc = rc;
    v->op.wm = TS_MINUS_INF;
    if (rt_op_open_table(&v->op, rc->err)) {
        free(v);
        return NULL;
    }
    const void *val;
    size_t vl;
    int f = stor_table_get(v->op.table, EMITTED_KEY, 1, &val, &vl, rc->err);
    if (f < 0) {
        stor_table_close(v->op.table);
        free(v);
        return NULL;
    }
    v->emitted = v->marker_written = f == 1;
    return &v->op;
}
