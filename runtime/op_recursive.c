/*
 * op_recursive.c: WITH RECURSIVE in ad hoc queries, iterated to a fixpoint.
 *
 * PN_RECURSIVE is a leaf of the query. When the query's leaves produce, it
 * runs its anchor query (rt_query_collect, a query of its own), then its
 * step query again and again, each time with the work table (the
 * PN_WORK_TABLE leaves of the step with its work_id) holding the rows the
 * previous run added, until a run adds none. UNION ALL adds every row a
 * run yields; UNION only rows not seen before (the anchor's included), so
 * a cycle in the data ends the iteration instead of running forever. The
 * result then goes downstream like a VALUES leaf.
 *
 * The work is bounded: more than PLAN_RECURSIVE_MAX_ITER runs of the step or
 * PLAN_RECURSIVE_MAX_ROWS rows in the result fail the statement with 54001
 * (a UNION ALL recursion that never stops, say). Rows are kept in the
 * operator's arena, encoded once and decoded in place.
 */
#include "runtime_int.h"

#include <stdlib.h>
#include <string.h>

#include "bytemap.h"

typedef struct RecOp {
    RtOp op;
    Arena *a;                 /* the rows of every iteration, until close */
} RecOp;

/* What one run of the anchor or the step adds. */
typedef struct Added {
    RecOp *r;
    ByteMap *seen;            /* UNION: every row so far (encoded), else NULL */
    int64_t total;            /* rows in the result before this run */
    int n, cap;
    Value **rows;
    Buf buf;
    bool too_many;
} Added;

static int add_row(void *arg, int n_cols, const Value *vals)
{
    Added *d = arg;
    RecOp *r = d->r;
    const PlanNode *n = r->op.node;
    buf_reset(&d->buf);
    row_encode(&d->buf, vals, n_cols);
    if (d->seen) {
        int created = 0;
        bytemap_get(d->seen, d->buf.data, d->buf.len, 1, &created);
        if (!created)
            return 0;
    }
    if (d->total + d->n >= PLAN_RECURSIVE_MAX_ROWS) {
        d->too_many = true;
        return 1; /* stop this run */
    }
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 64;
        Value **rows = arena_alloc(r->a, sizeof(Value *) * (size_t)cap);
        if (d->n)
            memcpy(rows, d->rows, sizeof(Value *) * (size_t)d->n);
        d->rows = rows;
        d->cap = cap;
    }
    char *p = arena_strndup(r->a, d->buf.len ? d->buf.data : "", d->buf.len);
    Value *v = arena_alloc(r->a, sizeof(Value) * (size_t)(n_cols ? n_cols : 1));
    if (row_decode(p, d->buf.len, v, n_cols))
        return werr(r->op.rc->err, SQLSTATE_INTERNAL, 0, "corrupt row in WITH RECURSIVE"), 1;
    for (int i = 0; i < n_cols && i < n->out.n; i++)
        v[i].type = n->out.types[i];
    d->rows[d->n++] = v;
    return 0;
}

int rt_recursive_produce(RtOp *op)
{
    RecOp *r = (RecOp *)op;
    RtCtx *rc = op->rc;
    const PlanNode *n = op->node;
    ByteMap seen;
    Arena *seen_arena = n->rec_union_all ? NULL : arena_new(0);
    if (seen_arena)
        bytemap_init(&seen, seen_arena);
    Added all = {.r = r}, cur = {.r = r, .seen = seen_arena ? &seen : NULL};
    int rcode = -1;
    if (rt_query_collect(rc, n->rec_anchor, rc->work, add_row, &cur) || rc->err->set)
        goto done;
    for (int iter = 0;; iter++) {
        if (cur.too_many) {
            werr(rc->err, SQLSTATE_TOO_COMPLEX, 0, "WITH RECURSIVE query \"%s\" exceeded %d rows", n->rec_name,
                 PLAN_RECURSIVE_MAX_ROWS);
            goto done;
        }
        /* The run's rows join the result (all holds every run's, in order). */
        if (all.n + cur.n > all.cap) {
            int cap = (all.n + cur.n) * 2;
            Value **rows = arena_alloc(r->a, sizeof(Value *) * (size_t)cap);
            if (all.n)
                memcpy(rows, all.rows, sizeof(Value *) * (size_t)all.n);
            all.rows = rows;
            all.cap = cap;
        }
        if (cur.n)
            memcpy(all.rows + all.n, cur.rows, sizeof(Value *) * (size_t)cur.n);
        all.n += cur.n;
        if (cur.n == 0)
            break;
        if (iter == PLAN_RECURSIVE_MAX_ITER) {
            werr(rc->err, SQLSTATE_TOO_COMPLEX, 0, "WITH RECURSIVE query \"%s\" exceeded %d iterations", n->rec_name,
                 PLAN_RECURSIVE_MAX_ITER);
            goto done;
        }
        RtWork w = {.id = n->work_id, .n_rows = cur.n, .rows = cur.rows, .prev = rc->work};
        Added next = {.r = r, .seen = cur.seen, .total = all.n};
        next.buf = cur.buf;
        if (rt_query_collect(rc, n->rec_step, &w, add_row, &next) || rc->err->set) {
            cur.buf = next.buf;
            goto done;
        }
        cur = next;
    }
    rcode = rt_emit_rows(op, all.n, all.rows, n->out.n, n->out.types);
done:
    buf_free(&cur.buf);
    if (seen_arena)
        arena_free(seen_arena);
    return rcode;
}

int rt_work_table_produce(RtOp *op)
{
    const PlanNode *n = op->node;
    for (const RtWork *w = op->rc->work; w; w = w->prev)
        if (w->id == n->work_id)
            return rt_emit_rows(op, w->n_rows, w->rows, n->out.n, n->out.types);
    return werr(op->rc->err, SQLSTATE_INTERNAL, 0, "the work table of \"%s\" is not there", n->rec_name);
}

static int leaf_push(RtOp *op, Chunk *c) { return rt_emit(op, c); }
static int leaf_watermark(RtOp *op, int64_t wm) { return 0; }
static int leaf_finish(RtOp *op) { return 0; }

static void rec_close(RtOp *op)
{
    RecOp *r = (RecOp *)op;
    arena_free(r->a);
    free(r);
}

static const RtOpVt REC_VT = {.push = leaf_push, .watermark = leaf_watermark, .finish = leaf_finish, .close = rec_close};

RtOp *rt_op_recursive_new(RtCtx *rc, const PlanNode *n)
{
    if (!rc->batch) {
        werr(rc->err, SQLSTATE_NOT_SUPPORTED, 0, "feature not supported: WITH RECURSIVE in a materialized view");
        return NULL;
    }
    RecOp *r = xcalloc(1, sizeof *r);
    r->op.vt = &REC_VT;
    r->op.node = n;
    r->op.rc = rc;
    r->a = arena_new(0);
    return &r->op;
}
