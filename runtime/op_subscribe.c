/*
 * op_subscribe.c: taps a view's changelog for changefeeds (SUBSCRIBE over
 * pgwire, Server-Sent Events over HTTP).
 *
 * A subscriber hangs off the view's materialize operator like a sink, but
 * delivers at once, on the engine thread, through a callback that must not
 * block (it copies the change into its consumer's queue; a consumer that
 * falls too far behind is cut off by its owner, never waited for). Each
 * change carries the epoch it will be part of: changes applied after the
 * barrier of checkpoint E-1 (flush_state) belong to epoch E, and the
 * progress callback says when an epoch is complete and durable (which,
 * with asynchronous checkpoints, may come after changes of epoch E+1).
 */
#include "runtime_int.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

struct RtSubscriber {
    RtOp op;
    RtChangeFn on_change;
    RtProgressFn on_progress;
    void *arg;
    uint64_t epoch;           /* the epoch changes now belong to */
};

static int sub_push(RtOp *op, Chunk *c)
{
    RtSubscriber *s = (RtSubscriber *)op;
    int n = c->n_cols;
    Value row[WEIR_ROW_VALUES];
    assert(n <= WEIR_ROW_VALUES); /* the planner refused more (check_limits, 54000) */
    for (int r = 0; r < c->n_rows; r++) {
        for (int i = 0; i < n; i++)
            chunk_get(c, i, r, &row[i]);
        s->on_change(s->arg, s->epoch, n, row, rowop_is_add(c->ops[r]) ? 1 : -1);
    }
    return 0;
}

static int sub_watermark(RtOp *op, int64_t wm) { return 0; }

/* The barrier of checkpoint `epoch`: what comes after it belongs to the
 * next epoch, even while this one is still being written. */
static int sub_flush_state(RtOp *op, uint64_t epoch)
{
    RtSubscriber *s = (RtSubscriber *)op;
    if (epoch >= s->epoch)
        s->epoch = epoch + 1;
    return 0;
}

static void sub_committed(RtOp *op, uint64_t epoch)
{
    RtSubscriber *s = (RtSubscriber *)op;
    if (epoch >= s->epoch)
        s->epoch = epoch + 1;
    if (s->on_progress)
        s->on_progress(s->arg, epoch);
}

static void sub_close(RtOp *op) { free(op); }

static const RtOpVt SUB_VT = {.push = sub_push, .watermark = sub_watermark, .close = sub_close,
                              .flush_state = sub_flush_state, .committed = sub_committed};

int rt_dataflow_subscribe(RtDataflow *df, uint64_t next_epoch, RtChangeFn on_change, RtProgressFn on_progress,
                          void *arg, RtSubscriber **out)
{
    RtOp *root = rt_dataflow_root(df);
    RtSubscriber *s = xcalloc(1, sizeof *s);
    s->op.vt = &SUB_VT;
    s->op.node = root->node;
    s->op.rc = root->rc;
    s->op.wm = TS_MINUS_INF;
    s->on_change = on_change;
    s->on_progress = on_progress;
    s->arg = arg;
    s->epoch = next_epoch;
    rt_dataflow_add_fan(df, &s->op);
    *out = s;
    return 0;
}

void rt_dataflow_unsubscribe(RtDataflow *df, RtSubscriber *s)
{
    if (!s)
        return;
    rt_dataflow_remove_fan(df, &s->op);
    sub_close(&s->op);
}
