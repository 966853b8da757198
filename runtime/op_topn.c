/*
 * op_topn.c: the first N rows per partition, by an order (ROW_NUMBER() <= N).
 *
 * State: one entry per distinct row, key = partition key, order key, a
 * 128-bit hash of the row; value = 8-byte count, then the row. The order key is memcomparable
 * with DESC columns bit-inverted and NULLs placed as asked, so a prefix scan
 * of a partition yields its rows in rank order. A change re-reads the
 * partition's first N rows before and after it and emits the difference by
 * rank: for each rank whose row changed, -D of the old (row, rank) and +I of
 * the new one. With an append-only input rows below the first N can never
 * come back, so they are not kept: the state is N rows per partition. When
 * the partition includes a window bound with a watermark, a window's rows
 * are dropped from the state once the watermark passes its end (rows for it
 * arriving later are late), so the state holds the open windows only.
 *
 * Without a window, WITH (state_ttl) bounds the partitions instead
 * (state_ttl.c): each row touches its partition in processing time, and a
 * partition idle for the TTL loses its rows silently. Its next row ranks
 * from empty state: +I at rank 1, an upsert of the view's row of that rank
 * (rows at higher ranks stay in the view until overwritten).
 */
#include "runtime_int.h"
#include "hash_seeds.h"

/* With key groups (planner revision 6; not with state_ttl, whose access
 * index spans every partition) every key begins with the partition's 2-byte
 * key group (over the PARTITION BY values, the exchange's columns), so the
 * partition key and the scans by it carry it too. */

#include <assert.h>
#include <stdlib.h>
#include <string.h>

typedef struct TopOp {
    RtOp op;
    Chunk *out;
    Buf pbuf, kbuf, vbuf;
    int64_t min_end;          /* windowed: no stored partition's window ends earlier (INT64_MIN: unknown) */
    bool has_ttl;             /* WITH (state_ttl), unwindowed */
    RtTtl ttl;
    int64_t now;              /* processing time of the chunk being pushed (state_ttl) */
    Buf dbuf;                 /* expire_part's scratch */
} TopOp;

typedef struct Ranked {
    int n;
    char **rows;              /* encoded rows in rank order (a row with count c appears c times) */
    size_t *lens;
} Ranked;

static int emit_row(TopOp *t, RowOp op, const Value *vals)
{
    RtCtx *rc = t->op.rc;
    if (t->out && chunk_full(t->out)) {
        Chunk *c = t->out;
        t->out = NULL;
        if (rt_emit(&t->op, c))
            return -1;
    }
    if (!t->out)
        t->out = chunk_new(rc->chunk_arena, t->op.node->out.n, t->op.node->out.types, CHUNK_DEFAULT_CAP);
    chunk_append(t->out, op, vals);
    return 0;
}

/* Appends the order key of row vals. */
static void order_key(const PlanNode *n, const Value *vals, Buf *out)
{
    for (int i = 0; i < n->n_order_cols; i++) {
        size_t at = out->len;
        const Value *v = &vals[n->order_cols[i]];
        key_encode(out, v, 1);
        bool desc = n->order_desc[i];
        if (v->null)
            out->data[at] = (char)((n->order_nulls_first[i] != desc) ? 0x00 : 0x02);
        if (desc)
            for (size_t k = at; k < out->len; k++)
                out->data[k] = (char)~(unsigned char)out->data[k];
    }
}

static void part_key(const PlanNode *n, const Value *vals, Buf *out)
{
    Value pv[WEIR_MAX_KEY_COLUMNS];
    for (int i = 0; i < n->n_part; i++)
        pv[i] = vals[n->part_cols[i]];
    buf_reset(out);
    if (n->key_groups) {
        unsigned char pre[WEIR_KG_PREFIX];
        weir_kg_put(pre, rt_row_kg(pv, n->n_part, NULL, n->key_groups));
        buf_append(out, pre, WEIR_KG_PREFIX);
    }
    key_encode(out, pv, n->n_part);
    buf_put_u8(out, 0x01);
}

/* The first `limit` rows of the partition in t->pbuf (copied into the chunk arena). */
static int read_top(TopOp *t, int64_t limit, Ranked *r, int64_t *total_entries)
{
    RtCtx *rc = t->op.rc;
    r->n = 0;
    r->rows = arena_alloc(rc->chunk_arena, sizeof(char *) * (size_t)(limit + 1));
    r->lens = arena_alloc(rc->chunk_arena, sizeof(size_t) * (size_t)(limit + 1));
    StorIter *it;
    if (stor_iter_open(t->op.table, t->pbuf.data, t->pbuf.len, &it, rc->err))
        return -1;
    const void *k, *v;
    size_t kl, vl;
    int got;
    int64_t seen = 0;
    while ((got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
        if (vl < 8)
            continue;
        int64_t count = (int64_t)get_be64(v);
        seen += count;
        for (int64_t c = 0; c < count && r->n < limit; c++) {
            r->rows[r->n] = arena_strndup(rc->chunk_arena, (const char *)v + 8, vl - 8);
            r->lens[r->n] = vl - 8;
            r->n++;
        }
        if (r->n >= limit && !total_entries)
            break;
    }
    stor_iter_close(it);
    if (total_entries)
        *total_entries = seen;
    return got < 0 ? -1 : 0;
}

static int apply(TopOp *t, const Value *vals, int sign)
{
    const PlanNode *n = t->op.node;
    RtCtx *rc = t->op.rc;
    int nin = n->inputs[0]->out.n;
    part_key(n, vals, &t->pbuf);
    if (n->key_groups && rt_kg_check(&t->op, weir_kg_get(t->pbuf.data)))
        return -1;
    if (t->has_ttl && rt_ttl_touch(&t->ttl, t->pbuf.data, t->pbuf.len, t->now, sign > 0, rc->err))
        return -1;
    Ranked before, after;
    if (read_top(t, n->topn_limit, &before, NULL))
        return -1;
    buf_reset(&t->kbuf);
    buf_append(&t->kbuf, t->pbuf.data, t->pbuf.len);
    order_key(n, vals, &t->kbuf);
    buf_reset(&t->vbuf);
    row_encode(&t->vbuf, vals, nin);
    /* A hash of the row keeps equal-order rows apart (the row is in the value:
     * keys stay short, LMDB limits them to 511 bytes). */
    unsigned char hb[16];
    put_be64(hb, hash_bytes(t->vbuf.data, t->vbuf.len, WEIR_HASH_SEED_STATE0));
    put_be64(hb + 8, hash_bytes(t->vbuf.data, t->vbuf.len, WEIR_HASH_SEED_STATE1));
    buf_append(&t->kbuf, hb, 16);
    const void *v;
    size_t vl;
    int f = stor_table_get(t->op.table, t->kbuf.data, t->kbuf.len, &v, &vl, rc->err);
    if (f < 0)
        return -1;
    int64_t count = (f == 1 && vl >= 8 ? (int64_t)get_be64(v) : 0) + sign;
    int rcode;
    if (count <= 0) {
        rcode = stor_table_delete(t->op.table, t->kbuf.data, t->kbuf.len, rc->err);
    } else {
        Buf nv = BUF_INIT;
        buf_put_u64be(&nv, (uint64_t)count);
        buf_append(&nv, t->vbuf.data, t->vbuf.len);
        rcode = stor_table_put(t->op.table, t->kbuf.data, t->kbuf.len, nv.data, nv.len, rc->err);
        buf_free(&nv);
    }
    if (rcode)
        return -1;
    if (read_top(t, n->topn_limit, &after, NULL))
        return -1;
    Value row[WEIR_ROW_VALUES];
    for (int64_t rank = 0; rank < n->topn_limit; rank++) {
        bool hb = rank < before.n, ha = rank < after.n;
        if (hb && ha && before.lens[rank] == after.lens[rank] &&
            memcmp(before.rows[rank], after.rows[rank], after.lens[rank]) == 0)
            continue;
        /* A rank whose row is replaced is an update of its key (partition,
         * rank): -U/+U, so that a reader keeping versions of the key (a
         * temporal join over a deduplication view) sees a new version, not
         * the key deleted and inserted again. */
        if (hb) {
            if (row_decode(before.rows[rank], before.lens[rank], row, nin))
                return werr(rc->err, SQLSTATE_INTERNAL, 0, "corrupt Top-N state");
            row[nin] = value_int(TYPE_INT8, rank + 1);
            if (emit_row(t, ha ? OP_UPDATE_BEFORE : OP_DELETE, row))
                return -1;
        }
        if (ha) {
            if (row_decode(after.rows[rank], after.lens[rank], row, nin))
                return werr(rc->err, SQLSTATE_INTERNAL, 0, "corrupt Top-N state");
            row[nin] = value_int(TYPE_INT8, rank + 1);
            if (emit_row(t, hb ? OP_UPDATE_AFTER : OP_INSERT, row))
                return -1;
        }
    }
    if (sign > 0 && n->inputs[0]->append_only) {
        /* Rows below the first N can never rise again: forget them. */
        StorIter *it;
        if (stor_iter_open(t->op.table, t->pbuf.data, t->pbuf.len, &it, rc->err))
            return -1;
        const void *k;
        size_t kl;
        int got;
        int64_t seen = 0;
        Buf dead = BUF_INIT;
        while ((got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
            int64_t c = vl >= 8 ? (int64_t)get_be64(v) : 0;
            if (seen >= n->topn_limit) {
                buf_put_u32be(&dead, (uint32_t)kl);
                buf_append(&dead, k, kl);
            }
            seen += c;
        }
        stor_iter_close(it);
        for (size_t off = 0; got >= 0 && off + 4 <= dead.len;) {
            const unsigned char *p = (const unsigned char *)dead.data + off;
            uint32_t l = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
            if (stor_table_delete(t->op.table, p + 4, l, rc->err))
                got = -1;
            off += 4 + l;
        }
        buf_free(&dead);
        if (got < 0)
            return -1;
    }
    return 0;
}

static int topn_push(RtOp *op, Chunk *c)
{
    TopOp *t = (TopOp *)op;
    Value vals[WEIR_ROW_VALUES];
    int nin = c->n_cols;
    assert(nin <= WEIR_ROW_VALUES); /* the planner refused more (check_limits, 54000) */
    const PlanNode *n = op->node;
    if (t->has_ttl)
        t->now = rt_proc_now_us();
    for (int r = 0; r < c->n_rows; r++) {
        for (int i = 0; i < nin; i++)
            chunk_get(c, i, r, &vals[i]);
        if (n->win_group_idx >= 0) {
            /* A row for a window the watermark has passed is late: the window's rows are final. */
            const Value *wv = &vals[n->part_cols[n->win_group_idx]];
            int64_t wm = c->wm ? c->wm[r] : op->wm;
            if (wv->null)
                continue;
            int64_t end = wv->u.i + n->win_end_offset_us;
            if (wm != TS_MINUS_INF && end <= wm) {
                op->rc->stats.late_rows++;
                op->counters.late_rows++;
                continue;
            }
            if (t->min_end != INT64_MIN && end < t->min_end)
                t->min_end = end;
        }
        if (apply(t, vals, rowop_is_add(c->ops[r]) ? 1 : -1))
            return -1;
    }
    if (t->out && t->out->n_rows) {
        Chunk *o = t->out;
        t->out = NULL;
        return rt_emit(op, o);
    }
    return 0;
}

/* Forgets the partitions of windows the watermark has passed (their rows
 * stay in the view; nothing can change them any more). */
static int topn_watermark(RtOp *op, int64_t wm)
{
    TopOp *t = (TopOp *)op;
    const PlanNode *n = op->node;
    RtCtx *rc = op->rc;
    if (wm <= op->wm)
        return 0;
    op->wm = wm;
    if (n->win_group_idx >= 0 && (t->min_end == INT64_MIN || t->min_end <= wm)) {
        TypeId types[WEIR_MAX_KEY_COLUMNS];
        for (int i = 0; i < n->n_part; i++)
            types[i] = n->inputs[0]->out.types[n->part_cols[i]];
        StorIter *it;
        if (stor_iter_open(op->table, NULL, 0, &it, rc->err))
            return -1;
        const void *k, *v;
        size_t kl, vl;
        int got;
        int64_t min_left = INT64_MAX;
        Buf dead = BUF_INIT;
        Value pv[WEIR_MAX_KEY_COLUMNS];
        while ((got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
            size_t skip = n->key_groups ? WEIR_KG_PREFIX : 0; /* the key group before the partition key */
            if (kl < skip || key_decode((const char *)k + skip, kl - skip, types, n->win_group_idx + 1, rc->chunk_arena, pv) ||
                pv[n->win_group_idx].null)
                continue;
            int64_t end = pv[n->win_group_idx].u.i + n->win_end_offset_us;
            if (end <= wm) {
                buf_put_u32be(&dead, (uint32_t)kl);
                buf_append(&dead, k, kl);
            } else if (end < min_left) {
                min_left = end;
            }
        }
        stor_iter_close(it);
        for (size_t off = 0; got >= 0 && off + 4 <= dead.len;) {
            const unsigned char *p = (const unsigned char *)dead.data + off;
            uint32_t l = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
            if (stor_table_delete(op->table, p + 4, l, rc->err))
                got = -1;
            off += 4 + l;
        }
        buf_free(&dead);
        if (got < 0)
            return -1;
        t->min_end = min_left;
    }
    return rt_emit_watermark(op, wm);
}
static int topn_finish(RtOp *op) { return 0; }

/* state_ttl: deletes a partition's rows (the key is the partition prefix). */
static int expire_part(void *arg, const void *key, size_t klen, WError *err)
{
    TopOp *t = arg;
    return rt_ttl_drop_prefix(t->op.table, key, klen, &t->dbuf, err);
}

/* Before a checkpoint: drops the partitions past their TTL, so it deletes them from LMDB. */
static int topn_flush_state(RtOp *op, uint64_t epoch)
{
    TopOp *t = (TopOp *)op;
    (void)epoch;
    return t->has_ttl ? rt_ttl_sweep(&t->ttl, rt_proc_now_us(), op->rc->err) : 0;
}

static int topn_expiry_due(RtOp *op, int64_t now)
{
    WError err = {0};
    return rt_ttl_due(&((TopOp *)op)->ttl, now, &err);
}

static void topn_close(RtOp *op)
{
    TopOp *t = (TopOp *)op;
    stor_table_close(op->table);
    buf_free(&t->pbuf);
    buf_free(&t->kbuf);
    buf_free(&t->vbuf);
    buf_free(&t->dbuf);
    rt_ttl_fini(&t->ttl);
    free(t);
}

static const RtOpVt TOPN_VT = {.push = topn_push, .watermark = topn_watermark, .finish = topn_finish,
                               .flush_state = topn_flush_state, .close = topn_close};

RtOp *rt_op_topn_new(RtCtx *rc, const PlanNode *n)
{
    /* The planner's check_limits: the key and row arrays below are sized by these. */
    assert(n->n_part <= WEIR_MAX_KEY_COLUMNS && n->out.n <= WEIR_MAX_COLUMNS);
    assert(n->topn_limit <= WEIR_MAX_TOPN_ROWS); /* the planner refused more (plan.c, plan_query.c, 54000) */
    TopOp *t = xcalloc(1, sizeof *t);
    t->op.vt = &TOPN_VT;
    t->op.node = n;
    t->op.rc = rc;
    t->op.wm = TS_MINUS_INF;
    t->min_end = INT64_MIN;
    if (rt_op_open_table(&t->op, rc->err)) {
        topn_close(&t->op);
        return NULL;
    }
    t->has_ttl = n->state_ttl_us > 0 && n->win_group_idx < 0;
    if (t->has_ttl) {
        rt_ttl_init(&t->ttl, t->op.table, n->state_ttl_us, expire_part, t, &t->op.counters.expired_keys);
        t->op.expiry_due = topn_expiry_due;
    }
    return &t->op;
}
