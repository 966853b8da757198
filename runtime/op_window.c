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
 *
 * In panes (pane_us > 0, see planner/plan_panes.c) a hopping row still has
 * its lateness judged for each of its windows, but it is emitted once, with
 * window_start/window_end set to its pane; the aggregation merges panes
 * into windows.
 */
#include "runtime_int.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* floor(a / b) for b > 0. */
static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0)) ? q - 1 : q;
}

/* A window operator that judges lateness keeps, with LATE ROWS INTO, the
 * late rows in its table: key = 8-byte sequence number, value = the row,
 * its window and the watermark that made it late; key 0xFF holds the next
 * sequence number. */
typedef struct WinOp {
    RtOp op;
    int64_t next_seq;
    bool seq_dirty;
    Buf kbuf, vbuf;
} WinOp;

static const unsigned char SEQ_KEY[1] = {0xff};

static int record_late(WinOp *w, const Chunk *c, int r, int64_t start, int64_t end, int64_t wm)
{
    RtCtx *rc = w->op.rc;
    const PlanNode *n = w->op.node;
    int nin = c->n_cols;
    Value vals[WEIR_ROW_VALUES];
    assert(nin + 3 <= WEIR_ROW_VALUES); /* out.n = nin + 3 <= WEIR_MAX_COLUMNS (check_limits) */
    for (int i = 0; i < nin; i++)
        chunk_get(c, i, r, &vals[i]);
    vals[nin] = value_int(n->out.types[nin], start);
    vals[nin + 1] = value_int(n->out.types[nin + 1], end);
    vals[nin + 2] = value_int(TYPE_TIMESTAMP, wm);
    unsigned char k[8];
    put_be64(k, (uint64_t)w->next_seq++);
    w->seq_dirty = true;
    buf_reset(&w->vbuf);
    row_encode(&w->vbuf, vals, nin + 3);
    return stor_table_put(w->op.table, k, 8, w->vbuf.data, w->vbuf.len, rc->err);
}

/* Appends input row r of c with window bounds [start, end) to out. */
static void append_row(Chunk *out, const Chunk *c, int r, int nin, int64_t start, int64_t end)
{
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
        case PHYS_NUM: num_cell_put(&out->cols[i].v.n[w], &v); break;
        }
    }
    Column *sc = &out->cols[nin], *ec = &out->cols[nin + 1];
    sc->nulls[w] = 0;
    sc->v.i[w] = start;
    ec->nulls[w] = 0;
    ec->v.i[w] = end;
}

static int window_push(RtOp *op, Chunk *c)
{
    WinOp *wo = (WinOp *)op;
    const PlanNode *n = op->node;
    int nin = c->n_cols;
    int per_row = (int)(n->win_size_us / n->win_slide_us);
    assert(per_row <= WEIR_MAX_WINDOWS_PER_ROW); /* the planner refused more (plan.c, 54000) */
    int cap = c->n_rows * per_row;
    Chunk *out = chunk_new(c->arena, n->out.n, n->out.types, cap ? cap : 1);
    out->src_partition = c->src_partition;
    out->src_n_partitions = c->src_n_partitions;
    if (c->wm)
        chunk_enable_wm(out);
    const Column *tc = &c->cols[n->win_time_col];
    RtWindowDef wd = {n->win_kind, n->win_size_us, n->win_slide_us, n->win_offset_us};
    int64_t *starts = arena_alloc(c->arena, sizeof(int64_t) * (size_t)(per_row > 0 ? per_row : 1));
    int64_t *ends = arena_alloc(c->arena, sizeof(int64_t) * (size_t)(per_row > 0 ? per_row : 1));
    for (int r = 0; r < c->n_rows; r++) {
        if (tc->nulls[r])
            continue;
        int64_t ts = tc->v.i[r];
        int nw = rt_window_assign(&wd, ts, starts, ends, per_row);
        int on_time = 0;
        for (int k = 0; k < nw; k++) {
            int64_t start = starts[k], end = ends[k];
            if (n->late_check) {
                /* Late for this window: the watermark in effect for the row passed end + lateness. */
                int64_t wm = c->wm ? c->wm[r] : op->wm;
                if (rt_window_late(end, wm, n->lateness_us)) {
                    op->rc->stats.late_rows++;
                    op->counters.late_rows++;
                    if (n->late_table_id && record_late(wo, c, r, start, end, wm))
                        return -1;
                    continue;
                }
            }
            if (n->pane_us) {
                on_time++;
                continue;
            }
            append_row(out, c, r, nin, start, end);
        }
        if (n->pane_us && on_time) {
            int64_t ps = floor_div(ts - n->win_offset_us, n->pane_us) * n->pane_us + n->win_offset_us;
            append_row(out, c, r, nin, ps, ps + n->pane_us);
        }
    }
    return out->n_rows ? rt_emit(op, out) : 0;
}

static int window_watermark(RtOp *op, int64_t wm)
{
    if (wm > op->wm && wm != RT_WM_IDLE)
        op->wm = wm;
    return rt_emit_watermark(op, wm);
}

static int window_finish(RtOp *op) { return 0; }

static int window_flush_state(RtOp *op, uint64_t epoch)
{
    WinOp *w = (WinOp *)op;
    if (!w->seq_dirty || !op->table)
        return 0;
    unsigned char v[8];
    put_be64(v, (uint64_t)w->next_seq);
    w->seq_dirty = false;
    return stor_table_put(op->table, SEQ_KEY, 1, v, 8, op->rc->err);
}

static void window_close(RtOp *op)
{
    WinOp *w = (WinOp *)op;
    stor_table_close(op->table);
    buf_free(&w->kbuf);
    buf_free(&w->vbuf);
    free(w);
}

static const RtOpVt WINDOW_VT = {.push = window_push, .watermark = window_watermark, .flush_state = window_flush_state,
                                 .finish = window_finish, .close = window_close};

RtOp *rt_op_window_new(RtCtx *rc, const PlanNode *n)
{
    WinOp *w = xcalloc(1, sizeof *w);
    w->op.vt = &WINDOW_VT;
    w->op.node = n;
    w->op.rc = rc;
    w->op.wm = TS_MINUS_INF;
    if (n->late_table_id) {
        if (rt_open_state(rc, n->late_table_id, &w->op.table, rc->err)) {
            free(w);
            return NULL;
        }
        const void *v;
        size_t vl;
        int f = stor_table_get(w->op.table, SEQ_KEY, 1, &v, &vl, rc->err);
        if (f < 0) {
            window_close(&w->op);
            return NULL;
        }
        if (f == 1 && vl == 8)
            w->next_seq = (int64_t)get_be64(v);
    }
    return &w->op;
}
