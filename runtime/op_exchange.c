/*
 * op_exchange.c: the Exchange operator of a parallel view (PN_EXCHANGE).
 *
 * Every shard that has the exchange's input holds a sender instance, every
 * shard that has its consumer a receiver instance (usually the same
 * object). On push the sender hashes each row's key columns (value_hash,
 * the family the aggregation's tables use, then mixed once more so the
 * shard choice and a table's bucket choice do not share bits), keeps the
 * rows of its own shard and hands them straight downstream, and copies the
 * others, per target shard, into chunks of their own arena that the
 * receiving shard owns (the sender's chunk arena is reset after its poll).
 * A gather (SINGLE) sends every row to shard 0. In a view with key groups
 * (planner revision 6, common/keygroup.h) the hash picks the row's key
 * group kg and the row goes to shard kg % P, so every key group is whole
 * at one shard, the one whose operators keep its state; an older view
 * keeps its hash % P, the routing its shards' state was built by.
 *
 * Watermarks: the sender forwards its input's watermark to every receiver;
 * a receiver keeps the last watermark of each sender and moves its own to
 * the minimum over them. A shard that never sends (the input has one
 * instance) counts as +infinity, and a source instance with no partitions
 * sends +infinity at once, so neither holds the others back. A row keeps
 * the watermark its sender gave it, lowered to the other senders' at the
 * moment it arrives: downstream operators judge lateness against what the
 * receiver knows, as the union operator does for its two inputs.
 *
 * A lazy gather (ex_lazy: after a split materialize) drops rows while the
 * ViewChanges operator it feeds has no fans: nobody reads the changes, the
 * rows are stored already. Watermarks still go. Fans are added and removed
 * only between steps, on the engine thread, while the workers are parked
 * (parallel.c), and the step's mutex hand-off publishes the change, so a
 * worker's plain read of n_fan during a step races with nothing.
 */
#include "runtime_int.h"
#include "hash_seeds.h"

#include <stdlib.h>
#include <string.h>

#include "keygroup.h"

typedef struct ExOp {
    RtOp op;
    int P;
    bool hash;                /* HASH: rows go to weir_key_group(hash(key), G) % P (hash % P
                               * when G is 0: a view before key groups); else all to shard 0 */
    int G;                    /* the view's key groups (PlanNode.key_groups), 0 = none */
    bool broadcast;           /* BROADCAST: every row to every shard (a join's small side) */
    bool receiver;            /* this shard has the consumer */
    int64_t *last;            /* receiver: per sender shard, its last watermark */
    bool *idle;               /* receiver: per sender shard, it said RT_WM_IDLE since */
    bool idle_out;            /* sender: RT_WM_IDLE forwarded, no real watermark since */
    int64_t emitted;          /* receiver: last watermark sent downstream */
    int64_t sent;             /* sender: last watermark forwarded */
    int *target;              /* scratch: per row, its shard */
    uint64_t *hashes;         /* scratch: per row, its key's hash */
    int *rows;                /* scratch: the rows going to one shard */
    uint8_t *keep;
    int cap;
    RtOp *reader;             /* ex_lazy: shard 0's ViewChanges operator (found at the first push) */
} ExOp;

int64_t rt_exchange_wm_rule(int64_t *last, bool *idle, int n, int sender, int64_t wm)
{
    if (wm == RT_WM_IDLE) {
        idle[sender] = true;
    } else {
        idle[sender] = false;
        if (wm > last[sender])
            last[sender] = wm;
    }
    int64_t m = TS_PLUS_INF;
    bool any = false;
    for (int i = 0; i < n; i++)
        if (!idle[i]) {
            any = true;
            if (last[i] < m)
                m = last[i];
        }
    if (!any) {
        /* All idle: those that never had a watermark do not hold it, the others do. */
        for (int i = 0; i < n; i++)
            if (last[i] != TS_MINUS_INF && last[i] < m)
                m = last[i];
        if (m == TS_PLUS_INF)
            m = TS_MINUS_INF;
    }
    return m;
}

int64_t rt_exchange_row_wm(const int64_t *last, const bool *idle, int n, int sender, int64_t row_wm)
{
    int64_t m = row_wm;
    for (int i = 0; i < n; i++)
        if (i != sender && !idle[i] && last[i] < m)
            m = last[i];
    return m;
}

int rt_exchange_receive(RtOp *op, int from, Chunk *c, int64_t wm)
{
    ExOp *x = (ExOp *)(void *)op;
    if (!x->receiver)
        return werr(op->rc->err, SQLSTATE_INTERNAL, 0, "exchange: shard %d has no receiver", op->rc->shard);
    if (!c) {
        int64_t m = rt_exchange_wm_rule(x->last, x->idle, x->P, from, wm);
        if (m <= x->emitted)
            return 0;
        x->emitted = m;
        op->wm = m;
        return rt_emit_watermark(op, m);
    }
    if (c->wm) {
        /* This instance's own rows: their array may be read by another
         * reader of a shared input (plan_share.c), so a new one. */
        int64_t *wm = c->wm;
        if (from == op->rc->shard)
            wm = arena_alloc(op->rc->chunk_arena, sizeof(int64_t) * (size_t)(c->n_rows ? c->n_rows : 1));
        for (int r = 0; r < c->n_rows; r++)
            wm[r] = rt_exchange_row_wm(x->last, x->idle, x->P, from, c->wm[r]);
        c->wm = wm;
    }
    return rt_emit(op, c);
}

/* Each row's shard: the key hash of common/keygroup.h over the key columns
 * (a column at a time; 64-bit integers and times, the common keys, without
 * a Value per cell, which weir_key_hash_value matches bit for bit). */
static void route(ExOp *x, const Chunk *c, int *counts)
{
    const PlanNode *n = x->op.node;
    uint64_t *h = x->hashes;
    for (int r = 0; r < c->n_rows; r++)
        h[r] = WEIR_KEY_HASH_SEED;
    for (int k = 0; k < n->n_dist_keys; k++) {
        const Column *col = &c->cols[n->dist_keys[k]];
        if (type_phys(col->type) == PHYS_I64) {
            for (int r = 0; r < c->n_rows; r++)
                h[r] = col->nulls[r] ? hash_u64(h[r] ^ WEIR_KEY_HASH_NULL) : hash_u64(h[r] ^ (uint64_t)col->v.i[r]);
            continue;
        }
        for (int r = 0; r < c->n_rows; r++) {
            Value v;
            chunk_get(c, n->dist_keys[k], r, &v);
            h[r] = weir_key_hash_value(h[r], &v);
        }
    }
    for (int r = 0; r < c->n_rows; r++) {
        int t = x->G ? weir_key_group(h[r], x->G) % x->P
                     : (int)(hash_u64(h[r] ^ WEIR_KEY_HASH_FINAL) % (uint64_t)x->P);
        x->target[r] = t;
        counts[t]++;
    }
}

/* Copies rows[0..n) of c, a column at a time, into a new chunk of a (strings too). */
static Chunk *copy_rows(Arena *a, const Chunk *c, const TypeId *types, const int *rows, int n)
{
    Chunk *out = chunk_new(a, c->n_cols, types, n);
    for (int i = 0; i < c->n_cols; i++) {
        const Column *src = &c->cols[i];
        Column *dst = &out->cols[i];
        for (int j = 0; j < n; j++)
            dst->nulls[j] = src->nulls[rows[j]];
        switch (type_phys(src->type)) {
        case PHYS_I64:
            for (int j = 0; j < n; j++)
                dst->v.i[j] = src->v.i[rows[j]];
            break;
        case PHYS_F64:
            for (int j = 0; j < n; j++)
                dst->v.f[j] = src->v.f[rows[j]];
            break;
        case PHYS_IV:
            for (int j = 0; j < n; j++)
                dst->v.iv[j] = src->v.iv[rows[j]];
            break;
        case PHYS_NUM:
            for (int j = 0; j < n; j++)
                dst->v.n[j] = src->v.n[rows[j]];
            break;
        case PHYS_STR:
            for (int j = 0; j < n; j++) {
                StrRef sr = src->v.s[rows[j]];
                if (dst->nulls[j]) {
                    dst->v.s[j] = (StrRef){"", 0};
                    continue;
                }
                char *p = arena_alloc(a, sr.len + 1);
                if (sr.len)
                    memcpy(p, sr.p, sr.len);
                p[sr.len] = 0;
                dst->v.s[j] = (StrRef){p, sr.len};
            }
            break;
        }
    }
    for (int j = 0; j < n; j++)
        out->ops[j] = c->ops[rows[j]];
    if (c->wm) {
        chunk_enable_wm(out);
        for (int j = 0; j < n; j++)
            out->wm[j] = c->wm[rows[j]];
    }
    out->n_rows = n;
    return out;
}

/* Copies the rows of c going to shard t into a chunk of a new arena (the
 * receiver frees it once its push returned) and sends it. */
static int send_rows(ExOp *x, Chunk *c, int t, int n_rows)
{
    RtOp *op = &x->op;
    int m = 0;
    for (int r = 0; r < c->n_rows; r++)
        if (!x->hash || x->target[r] == t)
            x->rows[m++] = r;
    Arena *a = rt_par_arena(op->rc->par);
    Chunk *out = copy_rows(a, c, op->node->out.types, x->rows, m);
    /* rows_out is counted by the receiving instance's rt_emit. */
    return rt_par_send(op->rc->par, op->node, op->rc->shard, t, a, out, 0);
}

static int ex_push(RtOp *op, Chunk *c)
{
    ExOp *x = (ExOp *)(void *)op;
    int self = op->rc->shard;
    if (c->n_rows == 0)
        return 0;
    if (op->node->ex_lazy) {
        if (!x->reader && !(x->reader = rt_par_changes_op(op->rc->par)))
            return werr(op->rc->err, SQLSTATE_INTERNAL, 0, "exchange: a lazy gather without its reader");
        if (!x->reader->n_fan)
            return 0;
    }
    if (c->n_rows > x->cap) {
        x->cap = c->n_rows;
        x->target = xrealloc(x->target, sizeof(int) * (size_t)x->cap);
        x->hashes = xrealloc(x->hashes, sizeof(uint64_t) * (size_t)x->cap);
        x->rows = xrealloc(x->rows, sizeof(int) * (size_t)x->cap);
        x->keep = xrealloc(x->keep, (size_t)x->cap);
    }
    if (x->broadcast) {
        /* Every instance gets every row: copies to the others, the chunk itself to this one. */
        for (int t = 0; t < x->P; t++)
            if (t != self && send_rows(x, c, t, c->n_rows))
                return -1;
        return rt_exchange_receive(op, self, c, 0);
    }
    if (!x->hash)
        return self == 0 ? rt_exchange_receive(op, self, c, 0) : send_rows(x, c, 0, c->n_rows);
    int counts[PLAN_MAX_PARALLELISM] = {0};
    route(x, c, counts);
    for (int t = 0; t < x->P; t++)
        if (t != self && counts[t] && send_rows(x, c, t, counts[t]))
            return -1;
    if (!counts[self])
        return 0;
    if (counts[self] < c->n_rows) {
        for (int r = 0; r < c->n_rows; r++)
            x->keep[r] = x->target[r] == self;
        rt_chunk_select(c, x->keep);
    }
    return rt_exchange_receive(op, self, c, 0);
}

static int ex_watermark(RtOp *op, int64_t wm)
{
    ExOp *x = (ExOp *)(void *)op;
    if (wm == RT_WM_IDLE) {
        if (x->idle_out)
            return 0;
        x->idle_out = true;
    } else if (x->idle_out) {
        /* Active again: said even when not ahead, so receivers count us again. */
        x->idle_out = false;
        if (wm < x->sent)
            wm = x->sent;
        x->sent = wm;
    } else {
        if (wm <= x->sent)
            return 0; /* idle ticks and repeats: nothing new to tell */
        x->sent = wm;
    }
    int self = op->rc->shard;
    for (int t = 0; t < (x->hash || x->broadcast ? x->P : 1); t++) {
        int rc = t == self ? rt_exchange_receive(op, self, NULL, wm)
                           : rt_par_send(op->rc->par, op->node, self, t, NULL, NULL, wm);
        if (rc)
            return -1;
    }
    return 0;
}

static int ex_flush_state(RtOp *op, uint64_t epoch) { return 0; }

static void ex_close(RtOp *op)
{
    ExOp *x = (ExOp *)(void *)op;
    free(x->last);
    free(x->idle);
    free(x->target);
    free(x->hashes);
    free(x->rows);
    free(x->keep);
    free(x);
}

static const RtOpVt EXCHANGE_VT = {.push = ex_push, .watermark = ex_watermark, .flush_state = ex_flush_state,
                                   .close = ex_close};

RtOp *rt_op_exchange_new(RtCtx *rc, const PlanNode *n)
{
    if (!rc->par) {
        werr(rc->err, SQLSTATE_INTERNAL, 0, "an exchange outside a parallel view");
        return NULL;
    }
    ExOp *x = xcalloc(1, sizeof *x);
    x->op.vt = &EXCHANGE_VT;
    x->op.node = n;
    x->op.rc = rc;
    x->op.wm = TS_MINUS_INF;
    x->P = rc->n_shards;
    x->hash = n->dist == PLAN_DIST_HASH;
    x->G = n->key_groups;
    x->broadcast = n->dist == PLAN_DIST_BROADCAST;
    x->receiver = rc->shard == 0 || n->parallelism > 1;
    x->emitted = x->sent = TS_MINUS_INF;
    x->last = xcalloc((size_t)x->P, sizeof(int64_t));
    x->idle = xcalloc((size_t)x->P, sizeof(bool));
    /* Shards without an instance of the input never send. */
    bool all_send = n->inputs[0]->parallelism > 1;
    for (int s = 0; s < x->P; s++)
        x->last[s] = all_send || s == 0 ? TS_MINUS_INF : TS_PLUS_INF;
    return &x->op;
}
