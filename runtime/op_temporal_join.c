/*
 * op_temporal_join.c: temporal joins of an append-only probe stream (left,
 * port 0) with a versioned relation's changelog (right, port 1), Flink's
 * semantics.
 *
 * Event time (AS OF probe.ts): every change of the right side is a version
 * of its key valid from its version time (the right side's watermark
 * column) until the key's next version; a delete ends the key at the
 * largest version time seen so far (the right side's event-time "now"). A
 * probe row waits in state until the watermark of both inputs passes its
 * time; then it joins the version of its key valid at that time, so the
 * result does not depend on which side's rows arrived first, and it is
 * final: later versions never retract it (the output is append-only). A
 * LEFT join pads probe rows that find no version. A probe row already
 * behind the watermark (judged row by row, with the watermark in effect
 * before it) is joined at once against the versions kept at that
 * watermark.
 * Versions older than the watermark are dropped except the latest one per
 * key, which stays valid for later probes.
 *
 * Processing time (AS OF PROCTIME()): the right side's current row per key
 * is kept; a probe row is looked up when it arrives, and later changes of
 * the right side do not touch results already emitted.
 *
 * State: table (probe rows waiting): [time ^ sign bit, 8 bytes BE][seq, 8
 * bytes BE] -> the row. table2 (versions): [encoded key][version time, 8
 * bytes, event time only] -> [1 = row, 0 = deleted][the row]; plus a meta
 * entry at 0xFF 0xFF (encoded keys start with 0x00 or 0x01) holding the
 * probe sequence, both inputs' watermarks and the largest version time,
 * so a restart resumes even before an input sends a new watermark.
 */
#include "runtime_int.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define SIGN UINT64_C(0x8000000000000000)
/* The cleanup scans every version: it runs at each checkpoint, or sooner
 * after this many new versions. Results never depend on when it runs
 * (lookups only ever use what it keeps). */
#define CLEAN_EVERY 4096

static const unsigned char META_KEY[2] = {0xff, 0xff};

typedef struct TjOp TjOp;

typedef struct TjPort {
    RtOp op;
    TjOp *j;
    int side;
} TjPort;

struct TjOp {
    RtOp op;
    TjPort port[2];
    int nl, nr, n_out;
    int64_t wm[2];            /* last watermark of each input */
    int64_t emitted_wm;       /* last watermark sent downstream */
    int64_t max_version;      /* largest version time seen on the right */
    uint64_t seq;             /* next probe row sequence number */
    bool meta_dirty;
    uint64_t versions_added;  /* since the last cleanup scan */
    Chunk *out;
    Buf kbuf, vbuf;
    Buf hit;                  /* the version found by a lookup (outlives its iterator) */
};

static void meta_save_value(TjOp *j, unsigned char v[32])
{
    put_be64(v, j->seq);
    put_be64(v + 8, (uint64_t)j->wm[0]);
    put_be64(v + 16, (uint64_t)j->wm[1]);
    put_be64(v + 24, (uint64_t)j->max_version);
}

static int emit_row(TjOp *j, const Value *vals)
{
    if (j->out && chunk_full(j->out)) {
        Chunk *c = j->out;
        j->out = NULL;
        if (rt_emit(&j->op, c))
            return -1;
    }
    if (!j->out)
        j->out = chunk_new(j->op.rc->chunk_arena, j->n_out, j->op.node->out.types, CHUNK_DEFAULT_CAP);
    chunk_append(j->out, OP_INSERT, vals);
    return 0;
}

static int emit_pending(TjOp *j)
{
    if (j->out && j->out->n_rows) {
        Chunk *c = j->out;
        j->out = NULL;
        return rt_emit(&j->op, c);
    }
    return 0;
}

/* Encodes the key of a row of side s (its join-key columns) into out;
 * false when a key column is NULL (it matches nothing, as in SQL). */
static bool encode_key(TjOp *j, int s, const Value *row, Buf *out)
{
    const PlanNode *n = j->op.node;
    const int *cols = s == 0 ? n->left_keys : n->right_keys;
    Value kv[WEIR_MAX_KEY_COLUMNS];
    for (int k = 0; k < n->n_join_keys; k++) {
        kv[k] = row[cols[k]];
        if (kv[k].null)
            return false;
    }
    buf_reset(out);
    key_encode(out, kv, n->n_join_keys);
    return true;
}

/* Emits probe row left joined with right (NULL: no version): the pair if
 * the residual holds, else (LEFT join) the padded row. */
static int join_emit(TjOp *j, const Value *left, const Value *right)
{
    const PlanNode *n = j->op.node;
    RtCtx *rc = j->op.rc;
    Value pair[WEIR_ROW_VALUES];
    const TypeId *t = n->out.types;
    for (int i = 0; i < j->nl; i++)
        pair[i] = left[i];
    for (int i = 0; i < j->nr; i++)
        pair[j->nl + i] = right ? right[i] : value_null(t[j->nl + i]);
    if (right && n->residual) {
        Chunk *c = chunk_new(rc->chunk_arena, j->n_out, t, 1);
        chunk_append(c, OP_INSERT, pair);
        Column col;
        uint8_t bad = 0;
        if (rt_eval(rc, n->residual, c, &col, &bad))
            return -1;
        if (bad || col.nulls[0] || !col.v.i[0]) {
            right = NULL;
            for (int i = 0; i < j->nr; i++)
                pair[j->nl + i] = value_null(t[j->nl + i]);
        }
    }
    if (!right && n->join_type != JOIN_LEFT)
        return 0;
    return emit_row(j, pair);
}

/* The version of left's key valid at time ts (event time) or the current
 * row (processing time), decoded into row; *found false if none.
 * horizon (event time): ts is behind the watermark `horizon` already, so
 * only what clean_versions keeps at that watermark counts (the latest
 * version at or before it, if it is not after ts): the answer must not
 * depend on whether the cleanup has run yet (it runs per watermark
 * message, the horizon moves per row). TS_PLUS_INF: no horizon. */
static int lookup(TjOp *j, const Value *left, int64_t ts, int64_t horizon, Value *row, bool *found)
{
    RtCtx *rc = j->op.rc;
    *found = false;
    if (!encode_key(j, 0, left, &j->kbuf))
        return 0;
    if (j->op.node->proc_time) {
        const void *v;
        size_t vl;
        int f = stor_table_get(j->op.table2, j->kbuf.data, j->kbuf.len, &v, &vl, rc->err);
        if (f < 0)
            return -1;
        if (f == 1 && vl > 1 && ((const unsigned char *)v)[0] == 1) {
            if (row_decode((const char *)v + 1, vl - 1, row, j->nr))
                return werr(rc->err, SQLSTATE_INTERNAL, 0, "corrupt temporal join state");
            *found = true;
        }
        return 0;
    }
    /* Versions of the key in time order: the last one at or before ts wins. */
    StorIter *it;
    if (stor_iter_open(j->op.table2, j->kbuf.data, j->kbuf.len, &it, rc->err))
        return -1;
    const void *k, *v;
    size_t kl, vl;
    int got;
    int64_t limit = horizon != TS_PLUS_INF && horizon > ts ? horizon : ts;
    bool newer = false; /* a version after ts, at or before the horizon */
    while ((got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
        if (kl != j->kbuf.len + 8 || vl < 1)
            continue;
        int64_t vt = (int64_t)(get_be64((const unsigned char *)k + kl - 8) ^ SIGN);
        if (vt > limit)
            break;
        if (vt > ts) {
            newer = true;
            continue;
        }
        *found = ((const unsigned char *)v)[0] == 1;
        buf_reset(&j->hit);
        buf_append(&j->hit, (const char *)v + 1, vl - 1);
    }
    stor_iter_close(it);
    if (got < 0)
        return -1;
    if (newer)
        *found = false; /* the version at ts is gone at the horizon */
    if (*found && row_decode(j->hit.data, j->hit.len, row, j->nr))
        return werr(rc->err, SQLSTATE_INTERNAL, 0, "corrupt temporal join state");
    return 0;
}

static int probe_now(TjOp *j, const Value *left, int64_t ts, int64_t horizon)
{
    Value row[WEIR_ROW_VALUES];
    bool found;
    if (lookup(j, left, ts, horizon, row, &found))
        return -1;
    return join_emit(j, left, found ? row : NULL);
}

static int64_t combined_wm(const TjOp *j)
{
    return j->op.node->proc_time ? j->wm[0] : (j->wm[0] < j->wm[1] ? j->wm[0] : j->wm[1]);
}

static int left_push(TjOp *j, Chunk *c)
{
    const PlanNode *n = j->op.node;
    RtCtx *rc = j->op.rc;
    Value vals[WEIR_ROW_VALUES];
    for (int r = 0; r < c->n_rows; r++) {
        for (int i = 0; i < j->nl; i++)
            chunk_get(c, i, r, &vals[i]);
        if (!rowop_is_add(c->ops[r])) {
            rt_row_error(rc, "temporal join: a retraction on the probe side is ignored");
            continue;
        }
        if (n->proc_time) {
            if (probe_now(j, vals, 0, TS_PLUS_INF))
                return -1;
            continue;
        }
        /* The watermark in effect for this row: the probe side's before it (row
         * by row, whatever the batching), with the versioned side's. */
        int64_t lw = c->wm && c->wm[r] > j->wm[0] ? c->wm[r] : j->wm[0];
        int64_t w = lw < j->wm[1] ? lw : j->wm[1];
        const Value *tv = &vals[n->left_time_col];
        if (tv->null || tv->u.i <= w) {
            /* No time, or behind the watermark already: decided now. */
            if (tv->null ? join_emit(j, vals, NULL) : probe_now(j, vals, tv->u.i, w))
                return -1;
            continue;
        }
        unsigned char kb[16];
        put_be64(kb, (uint64_t)tv->u.i ^ SIGN);
        put_be64(kb + 8, j->seq++);
        j->meta_dirty = true;
        buf_reset(&j->vbuf);
        row_encode(&j->vbuf, vals, j->nl);
        if (stor_table_put(j->op.table, kb, 16, j->vbuf.data, j->vbuf.len, rc->err))
            return -1;
    }
    return emit_pending(j);
}

static int right_push(TjOp *j, Chunk *c)
{
    const PlanNode *n = j->op.node;
    RtCtx *rc = j->op.rc;
    Value vals[WEIR_ROW_VALUES];
    for (int r = 0; r < c->n_rows; r++) {
        RowOp op = c->ops[r];
        if (op == OP_UPDATE_BEFORE)
            continue; /* the +U that follows is the key's new row */
        for (int i = 0; i < j->nr; i++)
            chunk_get(c, i, r, &vals[i]);
        if (!encode_key(j, 1, vals, &j->kbuf))
            continue;
        bool add = rowop_is_add(op);
        if (!n->proc_time) {
            const Value *tv = &vals[n->right_time_col];
            int64_t vt;
            if (!add) {
                /* The key ends now, in the versioned side's event time. A
                 * tombstone read from an upsert topic carries only the key. */
                vt = tv->null || j->max_version > tv->u.i ? j->max_version : tv->u.i + 1;
                if (vt == TS_MINUS_INF)
                    continue; /* no version yet: nothing to end */
            } else if (tv->null) {
                rt_row_error(rc, "temporal join: a version without a time is ignored");
                continue;
            } else {
                vt = tv->u.i;
            }
            if (vt > j->max_version) {
                j->max_version = vt;
                j->meta_dirty = true;
            }
            unsigned char tb[8];
            put_be64(tb, (uint64_t)vt ^ SIGN);
            buf_append(&j->kbuf, tb, 8);
            j->versions_added++;
        }
        buf_reset(&j->vbuf);
        buf_put_u8(&j->vbuf, add ? 1 : 0);
        if (add)
            row_encode(&j->vbuf, vals, j->nr);
        int rcode = n->proc_time && !add
                        ? stor_table_delete(j->op.table2, j->kbuf.data, j->kbuf.len, rc->err)
                        : stor_table_put(j->op.table2, j->kbuf.data, j->kbuf.len, j->vbuf.data, j->vbuf.len, rc->err);
        if (rcode)
            return -1;
    }
    return 0;
}

/* Deletes the keys collected in dead (each length-prefixed) from t. */
static int delete_keys(RtCtx *rc, StorTable *t, Buf *dead)
{
    for (size_t off = 0; off + 4 <= dead->len;) {
        const unsigned char *p = (const unsigned char *)dead->data + off;
        uint32_t l = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        if (stor_table_delete(t, p + 4, l, rc->err))
            return -1;
        off += 4 + l;
    }
    return 0;
}

/* Probe rows at or before wm are decided, in time order. */
static int fire(TjOp *j, int64_t wm)
{
    RtCtx *rc = j->op.rc;
    StorIter *it;
    /* Only the waiting rows at or before wm: keys below (wm + 1, seq 0). */
    unsigned char upper[8];
    put_be64(upper, (uint64_t)(wm == INT64_MAX ? wm : wm + 1) ^ SIGN);
    if (wm == INT64_MAX ? stor_iter_open(j->op.table, NULL, 0, &it, rc->err)
                        : stor_iter_open_below(j->op.table, NULL, 0, upper, 8, &it, rc->err))
        return -1;
    const void *k, *v;
    size_t kl, vl;
    int got;
    Buf dead = BUF_INIT;
    Value left[WEIR_ROW_VALUES];
    int rcode = 0;
    while (!rcode && (got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
        if (kl != 16)
            continue;
        int64_t ts = (int64_t)(get_be64(k) ^ SIGN);
        if (ts > wm)
            break;
        buf_put_u32be(&dead, (uint32_t)kl);
        buf_append(&dead, k, kl);
        if (row_decode(v, vl, left, j->nl)) {
            rcode = werr(rc->err, SQLSTATE_INTERNAL, 0, "corrupt temporal join state");
            break;
        }
        /* The row's strings point into the iterator's buffer: join before the next step. */
        rcode = probe_now(j, left, ts, TS_PLUS_INF);
    }
    stor_iter_close(it);
    if (got < 0)
        rcode = -1;
    if (!rcode)
        rcode = delete_keys(rc, j->op.table, &dead);
    buf_free(&dead);
    return rcode;
}

/* Drops versions no probe can need any more: a version older than the
 * watermark followed by a newer one at or before it, and a deletion that is
 * a key's only version left there. */
static int clean_versions(TjOp *j, int64_t wm)
{
    RtCtx *rc = j->op.rc;
    StorIter *it;
    if (stor_iter_open(j->op.table2, NULL, 0, &it, rc->err))
        return -1;
    const void *k, *v;
    size_t kl, vl;
    int got;
    Buf dead = BUF_INIT, prev = BUF_INIT; /* prev: the last version <= wm of the current key */
    bool prev_live = false;
    while ((got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
        if (kl < 9 || vl < 1 || (kl == 2 && memcmp(k, META_KEY, 2) == 0))
            continue;
        int64_t vt = (int64_t)(get_be64((const unsigned char *)k + kl - 8) ^ SIGN);
        bool same = prev.len == kl && memcmp(prev.data, k, kl - 8) == 0;
        if (!same && prev.len && !prev_live) {
            buf_put_u32be(&dead, (uint32_t)prev.len);
            buf_append(&dead, prev.data, prev.len);
        }
        if (!same)
            buf_reset(&prev);
        if (vt > wm)
            continue;
        if (same && prev.len) {
            buf_put_u32be(&dead, (uint32_t)prev.len);
            buf_append(&dead, prev.data, prev.len);
        }
        buf_reset(&prev);
        buf_append(&prev, k, kl);
        prev_live = ((const unsigned char *)v)[0] == 1;
    }
    stor_iter_close(it);
    if (got == 0 && prev.len && !prev_live) {
        buf_put_u32be(&dead, (uint32_t)prev.len);
        buf_append(&dead, prev.data, prev.len);
    }
    int rcode = got < 0 ? -1 : delete_keys(rc, j->op.table2, &dead);
    buf_free(&dead);
    buf_free(&prev);
    j->versions_added = 0;
    return rcode;
}

static int side_watermark(TjOp *j, int s, int64_t wm)
{
    if (wm <= j->wm[s])
        return 0;
    j->wm[s] = wm;
    j->meta_dirty = true;
    int64_t m = combined_wm(j);
    if (m <= j->emitted_wm)
        return 0;
    if (!j->op.node->proc_time) {
        if (fire(j, m) || emit_pending(j))
            return -1;
        if (j->versions_added >= CLEAN_EVERY && clean_versions(j, m))
            return -1;
    }
    j->emitted_wm = m;
    return rt_emit_watermark(&j->op, m);
}

static int port_push(RtOp *op, Chunk *c)
{
    TjPort *p = (TjPort *)op;
    return p->side == 0 ? left_push(p->j, c) : right_push(p->j, c);
}

static int port_watermark(RtOp *op, int64_t wm) { return side_watermark(((TjPort *)op)->j, ((TjPort *)op)->side, wm); }

static const RtOpVt PORT_VT = {.push = port_push, .watermark = port_watermark};

static int tj_push(RtOp *op, Chunk *c) { return left_push((TjOp *)op, c); }
static int tj_watermark(RtOp *op, int64_t wm) { return side_watermark((TjOp *)op, 0, wm); }
static int tj_finish(RtOp *op) { return emit_pending((TjOp *)op); }
static RtOp *tj_input(RtOp *op, int k) { return &((TjOp *)op)->port[k ? 1 : 0].op; }

static int tj_flush_state(RtOp *op, uint64_t epoch)
{
    TjOp *j = (TjOp *)op;
    if (!op->node->proc_time && j->versions_added && j->emitted_wm != TS_MINUS_INF &&
        clean_versions(j, j->emitted_wm))
        return -1;
    if (!j->meta_dirty)
        return 0;
    unsigned char v[32];
    meta_save_value(j, v);
    j->meta_dirty = false;
    return stor_table_put(op->table2, META_KEY, 2, v, 32, op->rc->err);
}

static void tj_close(RtOp *op)
{
    TjOp *j = (TjOp *)op;
    stor_table_close(op->table);
    stor_table_close(op->table2);
    buf_free(&j->kbuf);
    buf_free(&j->vbuf);
    buf_free(&j->hit);
    free(j);
}

static const RtOpVt TJ_VT = {.push = tj_push, .watermark = tj_watermark, .flush_state = tj_flush_state,
                             .finish = tj_finish, .close = tj_close, .input = tj_input};

RtOp *rt_op_temporal_join_new(RtCtx *rc, const PlanNode *n)
{
    TjOp *j = xcalloc(1, sizeof *j);
    j->op.vt = &TJ_VT;
    j->op.node = n;
    j->op.rc = rc;
    j->op.wm = TS_MINUS_INF;
    j->nl = n->inputs[0]->out.n;
    j->nr = n->inputs[1]->out.n;
    j->n_out = n->out.n;
    j->wm[0] = j->wm[1] = j->emitted_wm = j->max_version = TS_MINUS_INF;
    assert(j->n_out <= WEIR_ROW_VALUES && n->n_join_keys <= WEIR_MAX_KEY_COLUMNS); /* the planner refused more (check_limits, 54000) */
    for (int s = 0; s < 2; s++)
        j->port[s] = (TjPort){.op = {.vt = &PORT_VT, .node = n, .rc = rc, .wm = TS_MINUS_INF}, .j = j, .side = s};
    if (rt_open_state(rc, n->table_id, &j->op.table, rc->err) ||
        rt_open_state(rc, n->table_id2, &j->op.table2, rc->err)) {
        tj_close(&j->op);
        return NULL;
    }
    const void *v;
    size_t vl;
    int f = stor_table_get(j->op.table2, META_KEY, 2, &v, &vl, rc->err);
    if (f < 0) {
        tj_close(&j->op);
        return NULL;
    }
    if (f == 1 && vl == 32) {
        const unsigned char *p = v;
        j->seq = get_be64(p);
        j->wm[0] = (int64_t)get_be64(p + 8);
        j->wm[1] = (int64_t)get_be64(p + 16);
        j->max_version = (int64_t)get_be64(p + 24);
        j->emitted_wm = combined_wm(j);
    }
    return &j->op;
}
