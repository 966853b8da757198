/*
 * op_window.c: TUMBLE, HOP and CUMULATE window assignment.
 *
 * Appends window_start and window_end to every row. Windows are half-open
 * [start, end), aligned to the Unix epoch plus the offset. A tumbling
 * window gives each row one window; a hopping window (slide, size) gives
 * it size/slide windows, one output row each; a cumulating window (step,
 * max) gives it the windows [start, start + k*step) that end after it,
 * start aligned to max. Rows with a NULL time fall
 * in no window and are dropped. The per-row watermark annotation is
 * copied to every output row of its input row.
 */
#include "runtime_int.h"

#include <stdlib.h>
#include <string.h>

/* floor(a / b) for b > 0. */
static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0)) ? q - 1 : q;
}

static int window_push(RtOp *op, Chunk *c)
{
    const PlanNode *n = op->node;
    int nin = c->n_cols;
    int per_row = (int)(n->win_size_us / n->win_slide_us);
    int cap = c->n_rows * per_row;
    Chunk *out = chunk_new(c->arena, n->out.n, n->out.types, cap ? cap : 1);
    out->src_partition = c->src_partition;
    out->src_n_partitions = c->src_n_partitions;
    if (c->wm)
        chunk_enable_wm(out);
    const Column *tc = &c->cols[n->win_time_col];
    Column *sc = &out->cols[nin], *ec = &out->cols[nin + 1];
    for (int r = 0; r < c->n_rows; r++) {
        if (tc->nulls[r])
            continue;
        int64_t ts = tc->v.i[r];
        /* TUMBLE/HOP: the last window start at or before ts, then earlier ones
         * while they still cover ts. CUMULATE: one start (aligned to the max
         * size), ends every step from it, those after ts. */
        bool cum = n->win_kind == WIN_CUMULATE;
        int64_t unit = cum ? n->win_size_us : n->win_slide_us;
        int64_t last = floor_div(ts - n->win_offset_us, unit) * unit + n->win_offset_us;
        for (int k = 0; k < per_row; k++) {
            int64_t start = cum ? last : last - (int64_t)(per_row - 1 - k) * n->win_slide_us;
            int64_t end = cum ? last + (int64_t)(k + 1) * n->win_slide_us : start + n->win_size_us;
            if (end <= ts)
                continue;
            int w = out->n_rows++;
            out->ops[w] = c->ops[r];
            if (out->wm)
                out->wm[w] = c->wm[r];
            for (int i = 0; i < nin; i++) {
                Value v;
                chunk_get(c, i, r, &v);
                /* Strings stay in the same arena: share rather than copy. */
                out->cols[i].nulls[w] = v.null;
                switch (type_phys(v.type)) {
                case PHYS_I64: out->cols[i].v.i[w] = v.u.i; break;
                case PHYS_F64: out->cols[i].v.f[w] = v.u.f; break;
                case PHYS_STR: out->cols[i].v.s[w] = v.u.s; break;
                case PHYS_IV: out->cols[i].v.iv[w] = v.u.iv; break;
                }
            }
            sc->nulls[w] = 0;
            sc->v.i[w] = start;
            ec->nulls[w] = 0;
            ec->v.i[w] = end;
        }
    }
    return out->n_rows ? rt_emit(op, out) : 0;
}

static int window_watermark(RtOp *op, int64_t wm) { return rt_emit_watermark(op, wm); }
static int window_finish(RtOp *op) { return 0; }
static void window_close(RtOp *op) { free(op); }

static const RtOpVt WINDOW_VT = {.push = window_push, .watermark = window_watermark, .finish = window_finish, .close = window_close};

RtOp *rt_op_window_new(RtCtx *rc, const PlanNode *n)
{
    RtOp *op = xcalloc(1, sizeof *op);
    op->vt = &WINDOW_VT;
    op->node = n;
    op->rc = rc;
    op->wm = TS_MINUS_INF;
    return op;
}
