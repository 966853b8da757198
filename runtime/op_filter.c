/*
 * op_filter.c: keeps the rows whose predicate is true.
 *
 * NULL and false drop the row, as in WHERE; so does an evaluation error in
 * the predicate (counted, never fatal). Watermarks pass through unchanged.
 */
#include "runtime_int.h"

#include <stdlib.h>


static int filter_push(RtOp *op, Chunk *c)
{
    Column pred;
    uint8_t *keep = arena_zalloc(c->arena, (size_t)(c->n_rows ? c->n_rows : 1));
    if (rt_eval(op->rc, op->node->pred, c, &pred, keep))
        return -1;
    /* keep[] held "bad" marks; a row passes when its predicate is true (not NULL, not bad). */
    for (int r = 0; r < c->n_rows; r++)
        keep[r] = !keep[r] && !pred.nulls[r] && pred.v.i[r] != 0;
    rt_chunk_select(c, keep);
    return c->n_rows ? rt_emit(op, c) : 0;
}

static int pass_watermark(RtOp *op, int64_t wm) { return rt_emit_watermark(op, wm); }
static int pass_finish(RtOp *op) { return 0; }
static void plain_close(RtOp *op) { free(op); }

static const RtOpVt FILTER_VT = {.push = filter_push, .watermark = pass_watermark, .finish = pass_finish, .close = plain_close};

RtOp *rt_op_filter_new(RtCtx *rc, const PlanNode *n)
{
    RtOp *op = xcalloc(1, sizeof *op);
    op->vt = &FILTER_VT;
    op->node = n;
    op->rc = rc;
    op->wm = TS_MINUS_INF;
    return op;
}
