/*
 * op_project.c: computes the output columns of a projection.
 *
 * Column references pass through without copying (the output chunk shares
 * the input's arrays); computed columns are evaluated a column at a time.
 * Rows whose evaluation fails are dropped and counted (the error is kept
 * for the view's status), so a bad value never stops the view.
 */
#include "runtime_int.h"

#include <stdlib.h>
#include <string.h>

static int project_push(RtOp *op, Chunk *c)
{
    const PlanNode *n = op->node;
    Column *cols = arena_alloc(c->arena, sizeof(Column) * (size_t)(n->n_exprs ? n->n_exprs : 1));
    uint8_t *bad = arena_zalloc(c->arena, (size_t)(c->n_rows ? c->n_rows : 1));
    for (int i = 0; i < n->n_exprs; i++)
        if (rt_eval(op->rc, n->exprs[i], c, &cols[i], bad))
            return -1;
    Chunk *out = rt_chunk_with_columns(c, n->n_exprs, cols);
    bool any_bad = false;
    for (int r = 0; r < c->n_rows; r++)
        if (bad[r]) {
            any_bad = true;
            bad[r] = 0;
        } else {
            bad[r] = 1;
        }
    if (any_bad)
        rt_chunk_select(out, bad); /* bad[] now holds "keep" */
    return out->n_rows ? rt_emit(op, out) : 0;
}

static int pass_watermark(RtOp *op, int64_t wm) { return rt_emit_watermark(op, wm); }
static int pass_finish(RtOp *op) { return 0; }
static void plain_close(RtOp *op) { free(op); }

static const RtOpVt PROJECT_VT = {.push = project_push, .watermark = pass_watermark, .finish = pass_finish, .close = plain_close};

RtOp *rt_op_project_new(RtCtx *rc, const PlanNode *n)
{
    RtOp *op = xcalloc(1, sizeof *op);
    op->vt = &PROJECT_VT;
    op->node = n;
    op->rc = rc;
    op->wm = TS_MINUS_INF;
    return op;
}

