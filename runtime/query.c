/*
 * query.c: ad hoc queries over materialized views.
 *
 * The query's plan runs on the same operators as views, over a bounded
 * input. Its root emits a changelog (an aggregation may update a group
 * several times), which the collector applies to a multiset of rows; at
 * the end the surviving rows are sorted by ORDER BY, cut by OFFSET/LIMIT
 * and handed out in text form.
 */
#include "runtime_int.h"

#include <stdlib.h>
#include <string.h>

#include "bytemap.h"

typedef struct Collector {
    RtOp op;
    Arena *arena;
    ByteMap rows;             /* encoded row -> multiplicity */
    int n_cols;
    Buf buf;
} Collector;

static int collect_push(RtOp *op, Chunk *c)
{
    Collector *k = (Collector *)op;
    Value vals[WEIR_ROW_VALUES];
    if (c->n_cols > WEIR_ROW_VALUES)
        return werr(op->rc->err, SQLSTATE_PROGRAM_LIMIT, 0, "too many columns");
    for (int r = 0; r < c->n_rows; r++) {
        for (int i = 0; i < c->n_cols; i++)
            chunk_get(c, i, r, &vals[i]);
        buf_reset(&k->buf);
        row_encode(&k->buf, vals, c->n_cols);
        ByteMapEntry *e = bytemap_get(&k->rows, k->buf.data, k->buf.len, 1, NULL);
        e->count += rowop_is_add(c->ops[r]) ? 1 : -1;
    }
    return 0;
}

static int collect_watermark(RtOp *op, int64_t wm) { return 0; }
static int collect_finish(RtOp *op) { return 0; }
static void collect_close(RtOp *op) { }

static const RtOpVt COLLECT_VT = {.push = collect_push, .watermark = collect_watermark, .finish = collect_finish, .close = collect_close};

typedef struct SortRow {
    Value *vals;
} SortRow;

static const PlanQuery *sort_q; /* qsort has no context argument; queries sort under the engine lock */

static int cmp_rows(const void *x, const void *y)
{
    const SortRow *a = x, *b = y;
    for (int i = 0; i < sort_q->n_order; i++) {
        const PlanOrder *o = &sort_q->order[i];
        const Value *va = &a->vals[o->col], *vb = &b->vals[o->col];
        if (va->null || vb->null) {
            /* Where NULLs go does not depend on the direction: the planner
             * resolved it (NULLs are larger than any value in Postgres, so
             * last in ASC and first in DESC unless NULLS FIRST/LAST says). */
            if (va->null && vb->null)
                continue;
            return (va->null == o->nulls_first) ? -1 : 1;
        }
        int c = value_cmp(va, vb);
        if (c)
            return o->desc ? -c : c;
    }
    return 0;
}

/* Runs q; each visible row goes to fn as text, or to vfn as values. */
static long run(const RtEnv *env, const PlanQuery *q, const RtWork *work, const RtCancel *cancel, RtRowFn fn,
                RtValuesFn vfn, void *arg, WError *err)
{
    RtCtx rc = {.env = env, .err = err, .batch = true, .whole_input = true, .work = work,
                .cancel = cancel ? cancel->fn : NULL, .cancel_arg = cancel ? cancel->arg : NULL};
    rc.chunk_arena = arena_new(1 << 20);
    rc.stats.watermark = TS_MINUS_INF;
    RtOp **ops = xcalloc((size_t)q->n_nodes, sizeof(RtOp *));
    Collector col = {0};
    col.op.vt = &COLLECT_VT;
    col.op.rc = &rc;
    col.arena = arena_new(0);
    bytemap_init(&col.rows, col.arena);
    long count = -1;
    SortRow *rows = NULL;
    Buf text = BUF_INIT;
    if (rt_instantiate(&rc, q->n_nodes, q->nodes, ops))
        goto done;
    RtOp *root = NULL;
    for (int i = 0; i < q->n_nodes; i++)
        if (q->nodes[i] == q->root)
            root = ops[i];
    root->down = &col.op;
    if (rt_start_ops(q->n_nodes, ops))
        goto done;
    /* Every input in full, then the end of input, in plan order (a join
     * must have seen both sides before anything finishes). */
    for (int i = 0; i < q->n_nodes; i++)
        if (q->nodes[i]->n_inputs == 0 && rt_op_produce(ops[i]))
            goto done;
    for (int i = 0; i < q->n_nodes; i++)
        if (ops[i]->vt->finish && ops[i]->vt->finish(ops[i]))
            goto done;

    /* The surviving rows, each as often as its multiplicity. */
    int ncols = q->root->out.n;
    size_t n_rows = 0;
    for (int i = 0; i < col.rows.n; i++)
        if (col.rows.entries[i].count > 0)
            n_rows += (size_t)col.rows.entries[i].count;
    if (n_rows > 100000000) {
        werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "query result too large (%zu rows)", n_rows);
        goto done;
    }
    rows = xcalloc(n_rows ? n_rows : 1, sizeof *rows);
    size_t w = 0;
    for (int i = 0; i < col.rows.n; i++) {
        ByteMapEntry *e = &col.rows.entries[i];
        if (e->count <= 0)
            continue;
        Value *vals = arena_alloc(col.arena, sizeof(Value) * (size_t)(ncols ? ncols : 1));
        if (row_decode(e->key, e->klen, vals, ncols)) {
            werr(err, SQLSTATE_INTERNAL, 0, "corrupt query row");
            goto done;
        }
        for (int64_t k = 0; k < e->count; k++)
            rows[w++].vals = vals;
    }
    if (q->n_order) {
        sort_q = q;
        qsort(rows, n_rows, sizeof *rows, cmp_rows);
    }
    size_t first = (size_t)q->offset < n_rows ? (size_t)q->offset : n_rows;
    size_t last = q->limit >= 0 && first + (size_t)q->limit < n_rows ? first + (size_t)q->limit : n_rows;
    const char *vals[WEIR_ROW_VALUES];
    int lens[WEIR_ROW_VALUES];
    size_t offs[WEIR_ROW_VALUES];
    count = 0;
    for (size_t r = first; r < last && vfn; r++) {
        Value *vis = arena_alloc(col.arena, sizeof(Value) * (size_t)(ncols ? ncols : 1));
        int nv = 0;
        for (int i = 0; i < ncols; i++)
            if (!q->root->out.hidden[i])
                vis[nv++] = rows[r].vals[i];
        count++;
        if (vfn(arg, nv, vis))
            break;
    }
    for (size_t r = first; r < last && !vfn; r++) {
        buf_reset(&text);
        int nv = 0;
        for (int i = 0; i < ncols; i++) {
            if (q->root->out.hidden[i])
                continue;
            const Value *v = &rows[r].vals[i];
            if (v->null) {
                offs[nv] = (size_t)-1;
                lens[nv++] = -1;
                continue;
            }
            size_t start = text.len;
            value_to_text(v, &text);
            buf_putc(&text, 0); /* keep each value NUL-terminated for the caller */
            offs[nv] = start;
            lens[nv++] = (int)(text.len - start - 1);
        }
        for (int i = 0; i < nv; i++)
            vals[i] = offs[i] == (size_t)-1 ? NULL : text.data + offs[i];
        count++;
        if (fn(arg, nv, vals, lens))
            break;
    }
done:
    rt_close_ops(q->n_nodes, ops);
    buf_free(&text);
    free(rows);
    arena_free(col.arena);
    arena_free(rc.chunk_arena);
    free(ops);
    buf_free(&col.buf);
    return count;
}

long rt_query_run(const RtEnv *env, const PlanQuery *q, RtRowFn fn, void *arg, WError *err)
{
    return run(env, q, NULL, NULL, fn, NULL, arg, err);
}

long rt_query_run_cancel(const RtEnv *env, const PlanQuery *q, const RtCancel *cancel, RtRowFn fn, void *arg,
                         WError *err)
{
    return run(env, q, NULL, cancel, fn, NULL, arg, err);
}

long rt_query_run_values(const RtEnv *env, const PlanQuery *q, RtValuesFn fn, void *arg, WError *err)
{
    return run(env, q, NULL, NULL, NULL, fn, arg, err);
}

int rt_query_collect(RtCtx *rc, const PlanQuery *q, const RtWork *work, RtValuesFn fn, void *arg)
{
    RtCancel c = {rc->cancel, rc->cancel_arg};
    return run(rc->env, q, work, &c, NULL, fn, arg, rc->err) < 0 ? -1 : 0;
}
