/*
 * op_table_write.c: the input of a writable table (CREATE TABLE without a
 * connector).
 *
 * The table's rows come from INSERT, UPDATE and DELETE, which the server
 * runs under the engine lock between two engine steps. It hands the rows
 * to rt_dataflow_write(), which pushes them from this operator through the
 * table's dataflow (watermark, upsert materialize) and on, synchronously,
 * into every view that reads the table, exactly as a source's poll would.
 * The operator keeps no state: the table's rows are its materialize
 * operator's state, checkpointed with everything else, so what the
 * statement wrote is durable once the checkpoint that follows it commits.
 */
#include "runtime_int.h"

#include <stdlib.h>

static int tw_poll(RtOp *op, int timeout_ms, bool *did_work) { return 0; }
static int tw_flush_target(RtOp *op, WError *err) { return 0; }
static bool tw_flushed(RtOp *op) { return true; } /* writes are applied before the statement returns */

static const RtSourceVt TABLE_WRITE_SRC = {tw_poll, tw_flush_target, tw_flushed};

static int tw_push(RtOp *op, Chunk *c) { return rt_emit(op, c); }
static int tw_watermark(RtOp *op, int64_t wm) { return rt_emit_watermark(op, wm); }
static void tw_close(RtOp *op) { free(op); }

static const RtOpVt TABLE_WRITE_VT = {.push = tw_push, .watermark = tw_watermark, .close = tw_close};

RtOp *rt_op_table_write_new(RtCtx *rc, const PlanNode *n)
{
    RtSource *s = xcalloc(1, sizeof *s);
    s->src = &TABLE_WRITE_SRC;
    s->op.vt = &TABLE_WRITE_VT;
    s->op.node = n;
    s->op.rc = rc;
    s->op.wm = TS_MINUS_INF;
    return &s->op;
}

int rt_dataflow_write(RtDataflow *df, int n_rows, const RowOp *ops, const Value *const *rows, WError *err)
{
    RtOp *src = rt_dataflow_table_input(df);
    if (!src)
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, 0, "this relation is not a writable table");
    const PlanNode *n = src->node;
    RtCtx *rc = src->rc;
    int rcode = 0;
    for (int done = 0; done < n_rows && !rcode;) {
        int batch = n_rows - done < CHUNK_DEFAULT_CAP ? n_rows - done : CHUNK_DEFAULT_CAP;
        Chunk *c = chunk_new(rc->chunk_arena, n->out.n, n->out.types, batch);
        /* One partition: the watermark of a table is the max over all its rows. */
        c->src_partition = 0;
        c->src_n_partitions = 1;
        for (int i = 0; i < batch; i++)
            chunk_append(c, ops[done + i], rows[done + i]);
        done += batch;
        rcode = rt_emit(src, c);
    }
    rt_dataflow_reset_arena(df);
    if (rcode)
        *err = *rc->err;
    return rcode;
}
