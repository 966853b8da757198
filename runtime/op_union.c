/*
 * op_union.c: UNION ALL, the merge of two changelogs with the same columns.
 *
 * Rows pass through unchanged from either input (the planner has already
 * cast both sides to the same types), so a retraction on one side
 * retracts exactly the row that side inserted; nothing is kept, and there
 * is nothing to checkpoint. UNION (distinct) is this operator followed by
 * a distinct aggregation.
 *
 * Time: the output watermark is the minimum of the two inputs' watermarks
 * (docs/architecture.md: an operator with several inputs takes the minimum), emitted
 * when that minimum advances, so windows downstream still close. Each row
 * is re-annotated with the watermark in effect at the output when it
 * passes: min(its own input's watermark before it, the other input's
 * watermark now). When the planner found no common watermark column
 * (wm_col < 0), watermarks stop here and rows carry none.
 */
#include "runtime_int.h"

#include <stdlib.h>

typedef struct UnionOp UnionOp;

typedef struct UnionPort {
    RtOp op;
    UnionOp *u;
    int side;
} UnionPort;

struct UnionOp {
    RtOp op;
    UnionPort port[2];
    int64_t wm[2];            /* each input's last watermark */
    int64_t emitted_wm;       /* the last minimum passed on */
};

static int side_push(UnionOp *u, int side, Chunk *c)
{
    c->src_partition = -1;
    c->src_n_partitions = 0;
    c->src_offsets = NULL;
    if (u->op.node->wm_col < 0) {
        c->wm = NULL;
    } else if (c->wm) {
        /* The arrays belong to the sender (and maybe other readers): a new one. */
        int64_t other = u->wm[1 - side];
        int64_t *wm = arena_alloc(c->arena, sizeof(int64_t) * (size_t)(c->n_rows ? c->n_rows : 1));
        for (int r = 0; r < c->n_rows; r++)
            wm[r] = c->wm[r] < other ? c->wm[r] : other;
        c->wm = wm;
    }
    return rt_emit(&u->op, c);
}

static int side_watermark(UnionOp *u, int side, int64_t wm)
{
    /* An idle instance below a union (parallel views) still holds it: the
     * union's own minimum knows no idleness. */
    if (wm == RT_WM_IDLE || wm <= u->wm[side])
        return 0;
    u->wm[side] = wm;
    int64_t m = u->wm[0] < u->wm[1] ? u->wm[0] : u->wm[1];
    if (m <= u->emitted_wm || u->op.node->wm_col < 0)
        return 0;
    u->emitted_wm = m;
    u->op.wm = m;
    return rt_emit_watermark(&u->op, m);
}

static int port_push(RtOp *op, Chunk *c)
{
    UnionPort *p = (UnionPort *)op;
    p->u->op.counters.rows_in += (uint64_t)c->n_rows; /* rows in count at the union, not its port */
    return side_push(p->u, p->side, c);
}

static int port_watermark(RtOp *op, int64_t wm)
{
    UnionPort *p = (UnionPort *)op;
    return side_watermark(p->u, p->side, wm);
}

static int port_finish(RtOp *op) { return 0; }
static void port_close(RtOp *op) { }

static const RtOpVt PORT_VT = {.push = port_push, .watermark = port_watermark, .finish = port_finish,
                               .close = port_close};

/* Pushed to directly only by a reader wired without ports: the first input. */
static int union_push(RtOp *op, Chunk *c) { return side_push((UnionOp *)op, 0, c); }
static int union_watermark(RtOp *op, int64_t wm) { return side_watermark((UnionOp *)op, 0, wm); }
static int union_finish(RtOp *op) { return 0; }
static void union_close(RtOp *op) { free(op); }

static RtOp *union_input(RtOp *op, int k) { return &((UnionOp *)op)->port[k ? 1 : 0].op; }

static const RtOpVt UNION_VT = {.push = union_push, .watermark = union_watermark, .finish = union_finish,
                                .close = union_close, .input = union_input};

RtOp *rt_op_union_new(RtCtx *rc, const PlanNode *n)
{
    UnionOp *u = xcalloc(1, sizeof *u);
    u->op.vt = &UNION_VT;
    u->op.node = n;
    u->op.rc = rc;
    u->op.wm = TS_MINUS_INF;
    u->emitted_wm = TS_MINUS_INF;
    for (int s = 0; s < 2; s++) {
        u->wm[s] = TS_MINUS_INF;
        u->port[s] = (UnionPort){.op = {.vt = &PORT_VT, .node = n, .rc = rc, .wm = TS_MINUS_INF}, .u = u, .side = s};
    }
    return &u->op;
}
