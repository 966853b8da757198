/*
 * op_scan.c: the leaves of ad hoc queries.
 *
 * ViewScan reads a materialized view's rows from the running view's state
 * table (so a query sees every change applied so far, committed to a
 * checkpoint or not) in key order, as +I chunks: all of them, or only the
 * keys within the bounds the planner found in the filter above it
 * (PlanNode.scan_eq/scan_lo/scan_hi, a key lookup or a range scan). Values emits literal
 * rows. Both produce everything on rt_op_produce(); the query then
 * finishes the operators in plan order.
 */
#include "runtime_int.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

static int leaf_push(RtOp *op, Chunk *c) { return rt_emit(op, c); }
static int leaf_watermark(RtOp *op, int64_t wm) { return 0; }
static int leaf_finish(RtOp *op) { return 0; }
static void leaf_close(RtOp *op) { free(op); }

static const RtOpVt SCAN_VT = {.push = leaf_push, .watermark = leaf_watermark, .finish = leaf_finish, .close = leaf_close};
static const RtOpVt VALUES_VT = {.push = leaf_push, .watermark = leaf_watermark, .finish = leaf_finish, .close = leaf_close};

RtOp *rt_op_view_scan_new(RtCtx *rc, const PlanNode *n)
{
    RtOp *op = xcalloc(1, sizeof *op);
    op->vt = &SCAN_VT;
    op->node = n;
    op->rc = rc;
    return op;
}

RtOp *rt_op_values_new(RtCtx *rc, const PlanNode *n)
{
    RtOp *op = xcalloc(1, sizeof *op);
    op->vt = &VALUES_VT;
    op->node = n;
    op->rc = rc;
    return op;
}

/* Emits the rows it returns, and closes it. */
static int emit_rows(RtOp *op, StorIter *it, int ncols, const TypeId *types, bool counted, const char *name)
{
    RtCtx *rc = op->rc;
    Chunk *c = NULL;
    const void *k, *v;
    size_t kl, vl;
    int got, rcode = 0;
    Value vals[WEIR_ROW_VALUES];
    assert(ncols <= WEIR_ROW_VALUES); /* a relation has at most WEIR_MAX_COLUMNS (plan.c, bind_columns) */
    while ((got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
        if (kl && ((const unsigned char *)k)[0] == 0xff)
            continue; /* operator metadata (the next row id) */
        if (row_decode(v, vl, vals, ncols + counted)) {
            rcode = werr(rc->err, SQLSTATE_INTERNAL, 0, "corrupt row in view \"%s\"", name);
            break;
        }
        int64_t copies = counted ? vals[ncols].u.i : 1;
        for (int i = 0; i < ncols; i++)
            vals[i].type = types[i];
        for (int64_t r = 0; r < copies && !rcode; r++) {
            if (!c)
                c = chunk_new(rc->chunk_arena, ncols, types, CHUNK_DEFAULT_CAP);
            chunk_append(c, OP_INSERT, vals);
            if (chunk_full(c)) {
                rcode = rt_emit(op, c);
                c = NULL;
            }
        }
        if (rcode)
            break;
    }
    if (got < 0)
        rcode = -1;
    stor_iter_close(it);
    if (!rcode && c && c->n_rows)
        rcode = rt_emit(op, c);
    return rcode;
}

int rt_emit_view_rows(RtOp *op, StorTable *t, int ncols, const TypeId *types, bool counted, const char *name)
{
    StorIter *it;
    if (stor_iter_open(t, NULL, 0, &it, op->rc->err))
        return -1;
    return emit_rows(op, it, ncols, types, counted, name);
}

/* The scan's key bounds (plan_lookup.c) as an iterator over only those keys:
 * the encoded equal prefix, and within it [lo, hi] on the next key column
 * (an encoded key column always starts with a tag byte below 0xff, so the
 * encoding of hi followed by 0xff is above every key that starts with it). */
static int open_bounded(const PlanNode *n, StorTable *t, StorIter **it, WError *err)
{
    Value vals[WEIR_ROW_VALUES];
    if (n->n_scan_eq + 1 > WEIR_ROW_VALUES)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "too many key columns");
    Buf prefix = BUF_INIT, lo = BUF_INIT, hi = BUF_INIT;
    memcpy(vals, n->scan_eq, sizeof(Value) * (size_t)n->n_scan_eq);
    key_encode(&prefix, vals, n->n_scan_eq);
    if (n->scan_lo) {
        vals[n->n_scan_eq] = *n->scan_lo;
        key_encode(&lo, vals, n->n_scan_eq + 1);
    }
    if (n->scan_hi) {
        vals[n->n_scan_eq] = *n->scan_hi;
        key_encode(&hi, vals, n->n_scan_eq + 1);
        buf_put_u8(&hi, 0xff);
    }
    int rc;
    if (n->scan_lo || n->scan_hi)
        rc = stor_iter_open_range(t, prefix.data, prefix.len, n->scan_lo ? lo.data : NULL, lo.len,
                                  n->scan_hi ? hi.data : NULL, hi.len, it, err);
    else
        rc = stor_iter_open(t, prefix.data, prefix.len, it, err);
    buf_free(&prefix);
    buf_free(&lo);
    buf_free(&hi);
    return rc;
}

static int produce_scan(RtOp *op)
{
    RtCtx *rc = op->rc;
    const PlanNode *n = op->node;
    StorTable *t = rc->env->view_table ? rc->env->view_table(rc->env->ctx, n->scan_rel->table_id) : NULL;
    if (!t && rc->env->view_dataflow && rc->env->view_dataflow(rc->env->ctx, n->scan_rel->table_id))
        /* Running, but its rows are spread over a cluster's nodes and this
         * read did not gather them (server/cluster_gather.c). */
        return werr(rc->err, SQLSTATE_NOT_SUPPORTED, 0,
                    "feature not supported: this read of materialized view \"%s\", whose rows are spread over the "
                    "cluster's nodes",
                    n->scan_rel->name),
               werr_hint(rc->err, "SELECT (and a cursor's SELECT) gathers a distributed view from every node; "
                                  "SUBSCRIBE, COPY, VERIFY and the HTTP row endpoints read it only on a node that "
                                  "holds all of its key groups."),
               -1;
    if (!t)
        return werr(rc->err, SQLSTATE_OBJECT_NOT_IN_STATE, 0, "materialized view \"%s\" is not running", n->scan_rel->name);
    if (n->n_scan_eq == 0 && !n->scan_lo && !n->scan_hi)
        return rt_emit_view_rows(op, t, n->out.n, n->out.types, n->scan_rel->counted, n->scan_rel->name);
    StorIter *it;
    if (open_bounded(n, t, &it, rc->err))
        return -1;
    return emit_rows(op, it, n->out.n, n->out.types, n->scan_rel->counted, n->scan_rel->name);
}

static int produce_values(RtOp *op)
{
    RtCtx *rc = op->rc;
    const PlanNode *n = op->node;
    Chunk *c = chunk_new(rc->chunk_arena, n->out.n, n->out.types, n->n_rows ? n->n_rows : 1);
    for (int r = 0; r < n->n_rows; r++)
        chunk_append(c, OP_INSERT, n->rows[r]);
    return c->n_rows ? rt_emit(op, c) : 0;
}

int rt_emit_rows(RtOp *op, int n_rows, Value *const *rows, int ncols, const TypeId *types)
{
    RtCtx *rc = op->rc;
    Chunk *c = NULL;
    for (int r = 0; r < n_rows; r++) {
        if (!c)
            c = chunk_new(rc->chunk_arena, ncols, types, CHUNK_DEFAULT_CAP);
        chunk_append(c, OP_INSERT, rows[r]);
        if (chunk_full(c)) {
            Chunk *full = c;
            c = NULL;
            if (rt_emit(op, full))
                return -1;
        }
    }
    return c && c->n_rows ? rt_emit(op, c) : 0;
}

int rt_op_produce(RtOp *op)
{
    switch (op->node->kind) {
    case PN_VIEW_SCAN: return produce_scan(op);
    case PN_RECURSIVE: return rt_recursive_produce(op);
    case PN_WORK_TABLE: return rt_work_table_produce(op);
    default: return produce_values(op);
    }
}
