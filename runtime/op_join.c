/*
 * op_join.c: joins of two changelogs: regular hash joins and interval joins.
 *
 * Each side keeps its rows in its own state table, keyed by
 *   [join key] [event time, interval joins only] [a 128-bit hash of the row, or
 *   for an append-only side a 128-bit sequence number: see state_key]
 * with value (count, matches, the row): how many copies of the row are present and
 * how many rows of the other side it matches (what outer joins need to
 * know when to emit or retract the NULL-padded row). A row arriving on one
 * side is matched by a prefix scan of the other side's table on its join
 * key, so rows with equal keys are found without touching others; NULL keys
 * match nothing, as in SQL. Inserts emit +I pairs, retractions -D pairs, and
 * outer joins add or retract the padded row when a row's match count moves
 * between 0 and 1.
 *
 * An interval join (`b.ts BETWEEN a.ts - x AND a.ts + y`) also requires
 * right.ts - left.ts in [lo, hi], and its state is bounded by watermarks:
 * once the other side's watermark passes the last time a partner could
 * have, a row is dropped, and in an outer join an unmatched row's padded
 * row is emitted then, so the output stays append-only. A row older than
 * its own input's watermark is late and dropped.
 *
 * A side answers probes from a small cache of the rows under the join keys
 * probed last (ProbeCache), dropped whenever its table is written: q5's
 * counts change thousands of times per window while the window's max, the
 * other side, changes a few times, so nearly every probe of the max side is
 * served without a scan. Outer sides (their match counts are rewritten by
 * every probe) and sides with a state_ttl (a probe may expire rows) are
 * always scanned.
 *
 * With key groups (planner revision 6; not with state_ttl, whose access
 * index spans every key) a row's key begins with its join key's 2-byte key
 * group (the exchange's columns), so the join-key prefix probed on the
 * other side carries it too: equal keys have equal groups. The interval
 * join's time index (TIME_IX) stays one index over every group, ordered by
 * time as before: expiry reads only the rows due with one range scan,
 * where an index per group would take G scans per watermark (the index of
 * a group's rows can be rebuilt from them: their key holds the time).
 *
 * A regular join with WITH (state_ttl) tracks each side's join keys in
 * processing time (state_ttl.c): a row arriving touches its key on its own
 * side (a write) and on the other side (a read of its rows); a key idle for
 * the TTL loses its rows on that side, silently, as in Flink: pairs already
 * emitted stay, a later retraction of an expired row is dropped, and outer
 * rows keep their match counts.
 */
#include "runtime_int.h"
#include "hash_seeds.h"

#include <stdlib.h>
#include <string.h>

typedef struct JoinOp JoinOp;

typedef struct Partner Partner;
struct Partner {
    char *key;
    size_t klen;
    int64_t count, matches;
    char *row;                /* its encoding (copied), for rewriting its value */
    size_t rlen;
    Value *vals;
};

/* The rows of a side under the join keys probed last. Valid while the side's
 * table is unchanged (gen): every write to it drops the whole cache, which is
 * cheap when the side changes rarely (q5's max per window) and costs a second
 * copy of each short list scanned when it changes often. Bounded: a list of
 * more than PROBE_MAX_PARTNERS rows is not kept, and the arena is emptied past
 * PROBE_MAX_BYTES. */
#define PROBE_SLOTS 8
#define PROBE_MAX_PARTNERS 64
#define PROBE_MAX_BYTES ((size_t)1 << 20)

typedef struct ProbeEntry {
    char *key;                /* the join key's encoding (the prefix scanned) */
    size_t klen;
    Partner *ps;              /* unfiltered: every row under the key, in scan order */
    int np;
} ProbeEntry;

typedef struct ProbeCache {
    Arena *arena;             /* keys, partner lists, rows and decoded values of the entries */
    uint64_t gen;             /* the side's gen the entries were read at */
    int n, next;              /* entries used; once all are, the slot the next new entry replaces */
    ProbeEntry e[PROBE_SLOTS];
} ProbeCache;

/* A side of at most SMALL_SIDE_ROWS rows is probed from a copy of all its
 * rows (WholeSide), rebuilt after a write to it: Nexmark q7 probes the
 * per-window maximum (one row per open window) with every bid, by price, and
 * no two bids' prices repeat often enough for ProbeCache: each probe was a
 * scan of the other side's table (a tenth of q7's instructions). */
#define SMALL_SIDE_ROWS 32

typedef struct WholeSide {
    Arena *arena;             /* keys, rows and decoded values */
    uint64_t gen;             /* the side's gen it was read at */
    bool valid;
    int n;
    Partner *ps;              /* the rows, in key order, each with its state key (key, klen: the
                               * join key is a prefix of it) */
} WholeSide;

typedef struct PortOp {
    RtOp op;
    JoinOp *j;
    int side;
} PortOp;

typedef struct Side {
    StorTable *t;
    int n_cols;
    const int *keys;
    int time_col;             /* interval joins: the event-time column, else -1 */
    const bool *stored;       /* the columns kept (PlanNode.join_stored), NULL all: the rest are
                               * read by nobody, so they are stored and emitted as NULL */
    Value *nulls;             /* with stored: a NULL of each column's type, copied into unread columns */
    bool seq;                 /* append-only input: rows keyed by a sequence number, not their hash */
    uint64_t seq_run;         /* seq: the last committed epoch when the join started, + 1 */
    uint64_t next_seq;        /* seq: the next row's number in this run */
    bool outer;               /* unmatched rows of this side appear padded with NULLs */
    int64_t wm;
    int64_t min_ts;           /* interval joins: no row in state is older (INT64_MIN: unknown) */
    RtTtl ttl;                /* with state_ttl: the access times of this side's join keys */
    Buf dead;                 /* expire_key: keys to delete after the scan */
    uint64_t gen;             /* bumped by every write to t (side_changed) */
    ProbeCache pc;            /* probes of this side by the other side's rows */
    int64_t rows;             /* rows in t (counted from the start when there were at most
                               * SMALL_SIDE_ROWS of them, then kept), -1 unknown */
    WholeSide all;            /* all of them while rows <= SMALL_SIDE_ROWS */
} Side;

/* Every write to a side's table goes with this: the probe cache is stale. */
static void side_changed(Side *sd) { sd->gen++; }

struct JoinOp {
    RtOp op;
    PortOp port[2];
    Side side[2];
    int n_keys;
    int n_out;
    Chunk *out;
    Buf kbuf, obuf, vbuf, tbuf, pbuf;
    int64_t emitted_wm;
    bool has_ttl;             /* WITH (state_ttl) */
    bool pad_at_finish;       /* rc->whole_input, a regular join: unmatched rows are padded at
                               * finish (pad_unmatched) instead of padded and retracted row by row */
    int64_t now;              /* processing time of the chunk being pushed (state_ttl) */
    /* The residual is evaluated pair by pair over one reused one-row chunk
     * (its arrays in res_arena, its strings in the step's chunk arena): a
     * fresh chunk of every output column per pair was a seventh of q4's
     * engine time. Only the columns the residual reads are set. */
    Arena *res_arena;
    Chunk *res_chunk;
    struct Partner *ps;       /* apply_row's partner list, kept between rows */
    int ps_cap;
    struct Partner *raw;      /* probe's scan results before filtering, kept between rows */
    int raw_cap;
    int n_res_cols;
    int *res_cols;
};

static void residual_cols(const PlanExpr *e, bool *mask, int n)
{
    if (!e)
        return;
    if (e->kind == PE_COL && e->col >= 0 && e->col < n)
        mask[e->col] = true;
    if (e->kind == PE_CALL)
        for (int i = 0; i < e->n_args; i++)
            residual_cols(e->args[i], mask, n);
}

static int emit_row(JoinOp *j, RowOp op, const Value *vals)
{
    RtCtx *rc = j->op.rc;
    if (j->out && chunk_full(j->out)) {
        Chunk *c = j->out;
        j->out = NULL;
        if (rt_emit(&j->op, c))
            return -1;
    }
    if (!j->out)
        j->out = chunk_new(rc->chunk_arena, j->n_out, j->op.node->out.types, CHUNK_DEFAULT_CAP);
    for (int i = 0; i < j->n_out; i++)
        ((Value *)vals)[i].type = j->op.node->out.types[i];
    chunk_append(j->out, op, vals);
    return 0;
}

static int emit_pending(JoinOp *j)
{
    if (j->out && j->out->n_rows) {
        Chunk *c = j->out;
        j->out = NULL;
        return rt_emit(&j->op, c);
    }
    return 0;
}

/* Fills out[] with (left, right); a NULL side is padded with NULLs. */
static void combine(JoinOp *j, const Value *left, const Value *right, Value *out)
{
    int nl = j->side[0].n_cols, nr = j->side[1].n_cols;
    const TypeId *t = j->op.node->out.types;
    for (int i = 0; i < nl; i++)
        out[i] = left ? left[i] : value_null(t[i]);
    for (int i = 0; i < nr; i++)
        out[nl + i] = right ? right[i] : value_null(t[nl + i]);
}

/* Does the residual condition hold for this pair? */
static int residual_ok(JoinOp *j, const Value *pair)
{
    const PlanExpr *res = j->op.node->residual;
    if (!res)
        return 1;
    RtCtx *rc = j->op.rc;
    /* A join without equality keys tries every pair: a query must stay
     * cancellable however few pairs pass. */
    if (rt_cancelled(rc))
        return -1;
    Chunk *c = j->res_chunk;
    c->arena = rc->chunk_arena; /* string copies and the result live for this step */
    for (int i = 0; i < j->n_res_cols; i++) {
        int k = j->res_cols[i];
        Value v = pair[k];
        v.type = j->op.node->out.types[k];
        chunk_set(c, k, 0, &v);
    }
    c->ops[0] = OP_INSERT;
    c->n_rows = 1;
    Column col;
    uint8_t bad = 0;
    if (rt_eval(rc, res, c, &col, &bad))
        return -1;
    return !bad && !col.nulls[0] && col.v.i[0];
}

/* The state key of row vals on side s: [join key][time][128-bit hash of the
 * row]. The row itself is in the value (keys stay short: LMDB keys are
 * limited to 511 bytes). prefix_len receives the length of the join-key
 * part; val receives the state value with its count and matches left as
 * zeros (16 bytes) and the row's encoding after them: the row is encoded
 * once, where it is stored, instead of encoded and then copied behind the
 * counts (with rows of ~500 bytes the copy was a tenth of q7's engine time). */
static void state_key(JoinOp *j, int s, const Value *vals, bool seq, Buf *out, size_t *prefix_len, Buf *val)
{
    Side *sd = &j->side[s];
    Value kv[WEIR_MAX_KEY_COLUMNS];
    for (int k = 0; k < j->n_keys; k++)
        kv[k] = vals[sd->keys[k]];
    buf_reset(out);
    if (j->op.node->key_groups) {
        unsigned char pre[WEIR_KG_PREFIX];
        weir_kg_put(pre, rt_row_kg(kv, j->n_keys, NULL, j->op.node->key_groups));
        buf_append(out, pre, WEIR_KG_PREFIX);
    }
    key_encode(out, kv, j->n_keys);
    *prefix_len = out->len;
    if (sd->time_col >= 0) {
        unsigned char tb[8];
        put_be64(tb, (uint64_t)vals[sd->time_col].u.i ^ UINT64_C(0x8000000000000000));
        buf_append(out, tb, 8);
    }
    buf_reset(val);
    buf_put_u64be(val, 0);
    buf_put_u64be(val, 0);
    row_encode(val, vals, sd->n_cols);
    if (seq) {
        /* A new row of an append-only side: a number of its own (never hashed,
         * never looked up: no earlier copy can be in state), as long as a hash.
         * (run, n) is unique: a row of run r is committed only by a checkpoint
         * of epoch >= r, so every row in state at a restart has a smaller run
         * than the next one; a hash (older checkpoints) is random. */
        unsigned char sb[16];
        put_be64(sb, sd->seq_run);
        put_be64(sb + 8, sd->next_seq++);
        buf_append(out, sb, 16);
        return;
    }
    /* The same two hashes as two hash_bytes calls (state from older
     * checkpoints keeps its keys), in one pass over the row. */
    uint64_t h[2];
    hash_bytes2(val->data + 16, val->len - 16, WEIR_HASH_SEED_STATE0, WEIR_HASH_SEED_STATE1, h);
    unsigned char hb[16];
    put_be64(hb, h[0]);
    put_be64(hb + 8, h[1]);
    buf_append(out, hb, 16);
}

/* Value: count, matches (8 bytes each), then the row. */
static void state_value(Buf *out, int64_t count, int64_t matches, const void *row, size_t rlen)
{
    buf_reset(out);
    buf_put_u64be(out, (uint64_t)count);
    buf_put_u64be(out, (uint64_t)matches);
    buf_append(out, row, rlen);
}

/* Can rows at these times be partners? (right.time - left.time in [lo, hi]) */
static bool in_interval(const PlanNode *n, int s, const Value *mine, const Value *other, const Side *sides)
{
    if (!n->interval)
        return true;
    const Value *lt = s == 0 ? &mine[sides[0].time_col] : &other[sides[0].time_col];
    const Value *rt = s == 0 ? &other[sides[1].time_col] : &mine[sides[1].time_col];
    if (lt->null || rt->null)
        return false;
    int64_t d = rt->u.i - lt->u.i;
    return d >= n->lo_us && d <= n->hi_us;
}

/* Interval joins index each side's rows by time in the same table: key
 * TIME_IX, the time (8 bytes, order-preserving), then the row's state key;
 * empty value. Row state keys start with a null flag (0 or 1), so the
 * index sorts after them and partner scans (by join key) never see it. */
#define TIME_IX 0xFE

static void time_key(Buf *out, int64_t t, const void *key, size_t klen)
{
    unsigned char b[9];
    b[0] = TIME_IX;
    put_be64(b + 1, (uint64_t)t ^ UINT64_C(0x8000000000000000));
    buf_reset(out);
    buf_append(out, b, 9);
    buf_append(out, key, klen);
}

static int probe(JoinOp *j, Side *ot, const void *key, size_t plen, Partner **out, int *n);

static void raw_reserve(JoinOp *j, int n)
{
    if (n <= j->raw_cap)
        return;
    while (j->raw_cap < n)
        j->raw_cap = j->raw_cap ? j->raw_cap * 2 : 16;
    j->raw = xrealloc(j->raw, sizeof *j->raw * (size_t)j->raw_cap);
}

/* probe() for a side of at most SMALL_SIDE_ROWS rows: the rows under the key
 * from the copy of the whole side, read again after the side changed. Join
 * keys are encoded prefix-free, so a row's state key starts with the probed
 * key exactly when its join key is equal. */
static int probe_small(JoinOp *j, Side *ot, const void *key, size_t plen, Partner **out, int *n)
{
    RtCtx *rc = j->op.rc;
    WholeSide *w = &ot->all;
    if (!w->valid || w->gen != ot->gen) {
        if (!w->arena)
            w->arena = arena_new(0);
        arena_reset(w->arena);
        w->valid = false;
        w->n = 0;
        w->ps = arena_alloc(w->arena, sizeof *w->ps * SMALL_SIDE_ROWS);
        StorIter *it;
        if (stor_iter_open(ot->t, NULL, 0, &it, rc->err))
            return -1;
        const void *k, *ov;
        size_t kl, ovl;
        int got;
        while ((got = stor_iter_next(it, &k, &kl, &ov, &ovl, rc->err)) == 1) {
            if (ovl < 16)
                continue; /* an interval join's time index entry */
            if (w->n == SMALL_SIDE_ROWS)
                break;
            Partner *p = &w->ps[w->n];
            p->klen = kl;
            p->count = (int64_t)get_be64(ov);
            p->matches = (int64_t)get_be64((const unsigned char *)ov + 8);
            p->row = arena_strndup(w->arena, (const char *)ov + 16, ovl - 16);
            p->rlen = ovl - 16;
            p->vals = arena_alloc(w->arena, sizeof(Value) * (size_t)ot->n_cols);
            if (row_decode(p->row, p->rlen, p->vals, ot->n_cols))
                continue;
            p->key = arena_strndup(w->arena, k, kl);
            w->n++;
        }
        stor_iter_close(it);
        if (got < 0)
            return -1;
        if (got == 1) {
            /* More rows than counted: the count is wrong, stop trusting it. */
            ot->rows = -1;
            return probe(j, ot, key, plen, out, n);
        }
        w->valid = true;
        w->gen = ot->gen;
    }
    raw_reserve(j, w->n);
    int np = 0;
    for (int i = 0; i < w->n; i++)
        if (w->ps[i].klen >= plen && memcmp(w->ps[i].key, key, plen) == 0)
            j->raw[np++] = w->ps[i];
    *out = j->raw;
    *n = np;
    return 0;
}

/* Every row of side ot under the join key key[0..plen), unfiltered, in scan
 * order: *out gets n of them, valid until the next probe (of either side) or
 * the next write to ot.
 * From ot's probe cache when it can serve (see ProbeCache), else by a prefix
 * scan into the step's chunk arena, whose result is then kept in the cache
 * when it is short enough (never for outer sides and state_ttl: their
 * probes write or expire the rows they read). */
static int probe(JoinOp *j, Side *ot, const void *key, size_t plen, Partner **out, int *n)
{
    RtCtx *rc = j->op.rc;
    ProbeCache *pc = &ot->pc;
    bool cache = !ot->outer && !j->has_ttl;
    if (cache) {
        if (pc->gen != ot->gen || arena_used(pc->arena) > PROBE_MAX_BYTES) {
            arena_reset(pc->arena);
            pc->n = pc->next = 0;
            pc->gen = ot->gen;
        }
        for (int i = 0; i < pc->n; i++) {
            ProbeEntry *e = &pc->e[i];
            if (e->klen == plen && memcmp(e->key, key, plen) == 0) {
                *out = e->ps;
                *n = e->np;
                return 0;
            }
        }
    }
    if (cache && ot->rows >= 0 && ot->rows <= SMALL_SIDE_ROWS)
        return probe_small(j, ot, key, plen, out, n);
    /* The scan's copies live for the step (a long list is not kept, and must
     * not hold the cache's memory until the next probe); a kept list is
     * copied again into the cache below. */
    Arena *ar = rc->chunk_arena;
    int np = 0;
    StorIter *it;
    if (stor_iter_open(ot->t, key, plen, &it, rc->err))
        return -1;
    const void *k, *ov;
    size_t kl, ovl;
    int got;
    while ((got = stor_iter_next(it, &k, &kl, &ov, &ovl, rc->err)) == 1) {
        if (ovl < 16)
            continue;
        raw_reserve(j, np + 1);
        Partner *p = &j->raw[np];
        /* Its key only to rewrite its match count (outer sides). */
        p->key = ot->outer ? arena_strndup(ar, k, kl) : NULL;
        p->klen = kl;
        p->count = (int64_t)get_be64(ov);
        p->matches = (int64_t)get_be64((const unsigned char *)ov + 8);
        p->row = arena_strndup(ar, (const char *)ov + 16, ovl - 16);
        p->rlen = ovl - 16;
        p->vals = arena_alloc(ar, sizeof(Value) * (size_t)ot->n_cols);
        if (row_decode(p->row, p->rlen, p->vals, ot->n_cols))
            continue;
        np++;
    }
    stor_iter_close(it);
    if (got < 0)
        return -1;
    *out = j->raw;
    *n = np;
    if (cache && np <= PROBE_MAX_PARTNERS) {
        int slot = pc->n;
        if (pc->n < PROBE_SLOTS)
            pc->n++;
        else {
            slot = pc->next;
            pc->next = (pc->next + 1) % PROBE_SLOTS;
        }
        ProbeEntry *e = &pc->e[slot];
        e->key = arena_strndup(pc->arena, key, plen);
        e->klen = plen;
        e->np = np;
        e->ps = arena_alloc(pc->arena, sizeof *e->ps * (size_t)(np ? np : 1));
        for (int i = 0; i < np; i++) {
            Partner *p = &e->ps[i];
            *p = j->raw[i];
            p->row = arena_strndup(pc->arena, p->row, p->rlen);
            p->vals = arena_alloc(pc->arena, sizeof(Value) * (size_t)ot->n_cols);
            row_decode(p->row, p->rlen, p->vals, ot->n_cols); /* decoded once already: cannot fail */
        }
        *out = e->ps;
    }
    return 0;
}

/* Applies one row (sign +1 insert, -1 retraction) arriving on side s. */
static int apply_row(JoinOp *j, int s, const Value *vals, int sign)
{
    RtCtx *rc = j->op.rc;
    const PlanNode *n = j->op.node;
    Side *me = &j->side[s], *ot = &j->side[1 - s];
    bool null_key = false;
    for (int k = 0; k < j->n_keys; k++)
        if (vals[me->keys[k]].null)
            null_key = true;
    if (me->time_col >= 0 && vals[me->time_col].null)
        return 0; /* no time, no window of partners */
    size_t plen;
    bool seq = me->seq && sign > 0;
    state_key(j, s, vals, seq, &j->kbuf, &plen, &j->vbuf);
    if (n->key_groups && rt_kg_check(&j->op, weir_kg_get(j->kbuf.data)))
        return -1;
    if (j->has_ttl) {
        /* Before reading: a key past its TTL must not be seen. A row writes
         * its own side's key (rows with a NULL key too: an outer join keeps
         * them) and reads the other side's. */
        if (rt_ttl_touch(&me->ttl, j->kbuf.data, plen, j->now, sign > 0, rc->err) ||
            (!null_key && rt_ttl_touch(&ot->ttl, j->kbuf.data, plen, j->now, false, rc->err)))
            return -1;
    }
    int64_t count = 0;
    if (!seq) {
        /* A row keyed by its hash may be there already (a duplicate, or the
         * row a retraction removes). */
        const void *v;
        size_t vl;
        int f = stor_table_get(me->t, j->kbuf.data, j->kbuf.len, &v, &vl, rc->err);
        if (f < 0)
            return -1;
        if (f == 1 && vl >= 16)
            count = (int64_t)get_be64(v);
    }
    if (sign < 0 && count <= 0) {
        if (j->has_ttl)
            return 0; /* its row may have expired: the retraction has nothing to undo */
        rt_row_error(rc, "join: a retraction of a row that is not there");
        rc->stats.eval_errors++;
        return 0;
    }
    /* Partners: the other side's rows with the same key (collected first:
     * updating their counts while scanning would disturb the scan). */
    /* The partner list is the join's, reused row after row (a malloc and
     * free per row were 4% of q4's engine time). */
    Partner *ps = j->ps;
    int np = 0;
    int64_t total = 0;
    Value pair[WEIR_ROW_VALUES];
    if (!null_key) {
        Partner *raw;
        int nraw;
        if (probe(j, ot, j->kbuf.data, plen, &raw, &nraw))
            return -1;
        if (nraw > j->ps_cap) {
            j->ps_cap = nraw;
            ps = j->ps = xrealloc(j->ps, sizeof *ps * (size_t)j->ps_cap);
        }
        for (int i = 0; i < nraw; i++) {
            if (!in_interval(n, s, vals, raw[i].vals, j->side))
                continue;
            if (s == 0)
                combine(j, vals, raw[i].vals, pair);
            else
                combine(j, raw[i].vals, vals, pair);
            int ok = residual_ok(j, pair);
            if (ok < 0)
                return -1;
            if (ok)
                ps[np++] = raw[i];
        }
        /* EXPLAIN ANALYZE's hit rate: a probe that found a partner. */
        j->op.counters.probes++;
        j->op.counters.probe_hits += np > 0;
    }
    int rcode = 0;
    RowOp op = sign > 0 ? OP_INSERT : OP_DELETE;
    for (int i = 0; i < np && !rcode; i++) {
        Partner *p = &ps[i];
        total += p->count;
        if (ot->outer) {
            /* Interval joins pad a row only when it expires unmatched (see
             * expire), so their output stays append-only; an ad hoc query
             * only at finish (pad_unmatched). */
            int64_t before = n->interval || j->pad_at_finish ? 1 : p->matches, after = before + sign;
            if (before == 0 && after > 0) {
                /* The partner was shown padded: not any more. */
                s == 0 ? combine(j, NULL, p->vals, pair) : combine(j, p->vals, NULL, pair);
                for (int64_t c = 0; c < p->count && !rcode; c++)
                    rcode = emit_row(j, OP_DELETE, pair);
            }
            p->matches += sign;
            state_value(&j->obuf, p->count, p->matches, p->row, p->rlen);
            side_changed(ot);
            if (!rcode)
                rcode = stor_table_put(ot->t, p->key, p->klen, j->obuf.data, j->obuf.len, rc->err);
            if (!rcode && before > 0 && after == 0 && !j->pad_at_finish) {
                s == 0 ? combine(j, NULL, p->vals, pair) : combine(j, p->vals, NULL, pair);
                for (int64_t c = 0; c < p->count && !rcode; c++)
                    rcode = emit_row(j, OP_INSERT, pair);
            }
        }
        s == 0 ? combine(j, vals, p->vals, pair) : combine(j, p->vals, vals, pair);
        for (int64_t c = 0; c < p->count && !rcode; c++)
            rcode = emit_row(j, op, pair);
    }
    if (rcode)
        return -1;
    if (me->outer && total == 0 && !n->interval && !j->pad_at_finish) {
        s == 0 ? combine(j, vals, NULL, pair) : combine(j, NULL, vals, pair);
        if (emit_row(j, op, pair))
            return -1;
    }
    if (n->interval && count == 0 && sign > 0) {
        /* A new row: index it by time, so expire() reads only the rows due. */
        time_key(&j->tbuf, vals[me->time_col].u.i, j->kbuf.data, j->kbuf.len);
        side_changed(me);
        if (stor_table_put(me->t, j->tbuf.data, j->tbuf.len, "", 0, rc->err))
            return -1;
    }
    int64_t before = count;
    count += sign;
    if (me->rows >= 0 && before <= 0 && count > 0)
        me->rows++;
    else if (me->rows > 0 && before > 0 && count <= 0)
        me->rows--;
    if (sign > 0 && me->time_col >= 0 && me->min_ts != INT64_MIN && vals[me->time_col].u.i < me->min_ts)
        me->min_ts = vals[me->time_col].u.i;
    side_changed(me);
    if (count <= 0)
        return stor_table_delete(me->t, j->kbuf.data, j->kbuf.len, rc->err);
    put_be64((unsigned char *)j->vbuf.data, (uint64_t)count); /* the row is in place (state_key) */
    put_be64((unsigned char *)j->vbuf.data + 8, (uint64_t)total);
    return stor_table_put(me->t, j->kbuf.data, j->kbuf.len, j->vbuf.data, j->vbuf.len, rc->err);
}

/* Interval joins: drops rows that can have no more partners, emitting the
 * padded row of unmatched outer rows first. */
static int expire(JoinOp *j)
{
    const PlanNode *n = j->op.node;
    RtCtx *rc = j->op.rc;
    Value vals[WEIR_ROW_VALUES], pair[WEIR_ROW_VALUES];
    for (int s = 0; s < 2; s++) {
        Side *me = &j->side[s], *ot = &j->side[1 - s];
        if (ot->wm == TS_MINUS_INF)
            continue;
        /* A left row at t has partners up to t + hi; a right row at u, up to u - lo. */
        int64_t horizon = s == 0 ? ot->wm - n->hi_us : ot->wm + n->lo_us;
        if (me->min_ts != INT64_MIN && me->min_ts >= horizon)
            continue; /* nothing old enough: no scan */
        /* The rows due: time index entries from the oldest row left (min_ts:
         * everything before it is gone, and deleted keys would still be
         * walked over) to the horizon. */
        unsigned char pfx[1] = {TIME_IX}, lower[9] = {TIME_IX}, upper[9] = {TIME_IX};
        put_be64(lower + 1, (uint64_t)me->min_ts ^ UINT64_C(0x8000000000000000)); /* INT64_MIN: all */
        put_be64(upper + 1, (uint64_t)horizon ^ UINT64_C(0x8000000000000000));
        StorIter *it;
        if (stor_iter_open_range(me->t, pfx, 1, lower, 9, upper, 9, &it, rc->err))
            return -1;
        const void *k, *v;
        size_t kl, vl;
        int got;
        Buf dead = BUF_INIT; /* length-prefixed keys (index and row) to delete after the scan */
        while ((got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
            if (kl <= 9)
                continue;
            buf_put_u32be(&dead, (uint32_t)kl);
            buf_append(&dead, k, kl);
            const void *rv;
            size_t rvl;
            int f = stor_table_get(me->t, (const char *)k + 9, kl - 9, &rv, &rvl, rc->err);
            if (f < 0) {
                stor_iter_close(it);
                buf_free(&dead);
                return -1;
            }
            if (f == 0 || rvl < 16 || row_decode((const char *)rv + 16, rvl - 16, vals, me->n_cols))
                continue;
            int64_t count = (int64_t)get_be64(rv), matches = (int64_t)get_be64((const unsigned char *)rv + 8);
            if (me->outer && matches == 0) {
                /* No partner can come any more: now the padded row is final. */
                s == 0 ? combine(j, vals, NULL, pair) : combine(j, NULL, vals, pair);
                for (int64_t c = 0; c < count; c++)
                    if (emit_row(j, OP_INSERT, pair)) {
                        stor_iter_close(it);
                        buf_free(&dead);
                        return -1;
                    }
            }
            buf_put_u32be(&dead, (uint32_t)(kl - 9));
            buf_append(&dead, (const char *)k + 9, kl - 9);
            if (me->rows > 0)
                me->rows--;
        }
        stor_iter_close(it);
        if (got < 0) {
            buf_free(&dead);
            return -1;
        }
        int64_t min_left = horizon; /* every row left is at or after the horizon */
        me->min_ts = min_left;
        side_changed(me);
        for (size_t off = 0; off + 4 <= dead.len;) {
            const unsigned char *p = (const unsigned char *)dead.data + off;
            uint32_t l = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
            if (stor_table_delete(me->t, p + 4, l, rc->err)) {
                buf_free(&dead);
                return -1;
            }
            off += 4 + l;
        }
        buf_free(&dead);
    }
    return 0;
}

/* state_ttl: deletes every row of one side (arg) under a join key. */
static int expire_key(void *arg, const void *key, size_t klen, WError *err)
{
    Side *sd = arg;
    side_changed(sd);
    sd->rows = -1; /* how many went is not counted */
    return rt_ttl_drop_prefix(sd->t, key, klen, &sd->dead, err);
}

/* An append-only side stores each row under a new key (state_key: the join
 * key, the time, the sequence number), and finding the empty slot for it in
 * a map of millions of rows is a cache miss (q4's bids: a seventh of its
 * engine time). The key of a row a few rows on is known already, so its slot
 * is loaded while the rows before it are joined. Its sequence number is a
 * guess (rows dropped as late take none); a wrong guess costs one load. */
#define PREFETCH_AHEAD 8

static void prefetch_row(JoinOp *j, Side *me, const Chunk *c, int r, uint64_t seq)
{
    Value kv[WEIR_MAX_KEY_COLUMNS];
    for (int k = 0; k < j->n_keys; k++)
        chunk_get(c, me->keys[k], r, &kv[k]);
    Buf *b = &j->pbuf;
    buf_reset(b);
    if (j->op.node->key_groups) {
        unsigned char pre[WEIR_KG_PREFIX];
        weir_kg_put(pre, rt_row_kg(kv, j->n_keys, NULL, j->op.node->key_groups));
        buf_append(b, pre, WEIR_KG_PREFIX);
    }
    key_encode(b, kv, j->n_keys);
    unsigned char tb[16];
    if (me->time_col >= 0) {
        Value t;
        chunk_get(c, me->time_col, r, &t);
        if (t.null)
            return;
        put_be64(tb, (uint64_t)t.u.i ^ UINT64_C(0x8000000000000000));
        buf_append(b, tb, 8);
    }
    put_be64(tb, me->seq_run);
    put_be64(tb + 8, seq);
    buf_append(b, tb, 16);
    stor_table_prefetch(me->t, b->data, b->len);
}

static int side_push(JoinOp *j, int s, Chunk *c)
{
    const PlanNode *n = j->op.node;
    RtCtx *rc = j->op.rc;
    Side *me = &j->side[s];
    Value vals[WEIR_ROW_VALUES];
    if (j->has_ttl)
        j->now = rt_proc_now_us();
    if (me->seq)
        for (int r = 0; r < PREFETCH_AHEAD && r < c->n_rows; r++)
            prefetch_row(j, me, c, r, me->next_seq + (uint64_t)r);
    for (int r = 0; r < c->n_rows; r++) {
        if (me->seq && r + PREFETCH_AHEAD < c->n_rows)
            prefetch_row(j, me, c, r + PREFETCH_AHEAD, me->next_seq + PREFETCH_AHEAD);
        if (me->stored) {
            for (int i = 0; i < me->n_cols; i++)
                if (me->stored[i])
                    chunk_get(c, i, r, &vals[i]);
                else
                    vals[i] = me->nulls[i];
        } else {
            for (int i = 0; i < me->n_cols; i++)
                chunk_get(c, i, r, &vals[i]);
        }
        if (n->interval) {
            /* Late for its own input: partners may already be gone. */
            int64_t wm = c->wm ? c->wm[r] : me->wm;
            if (wm != TS_MINUS_INF && !vals[me->time_col].null && vals[me->time_col].u.i < wm) {
                rc->stats.late_rows++;
                j->op.counters.late_rows++;
                continue;
            }
        }
        if (apply_row(j, s, vals, rowop_is_add(c->ops[r]) ? 1 : -1))
            return -1;
    }
    return emit_pending(j);
}

static int side_watermark(JoinOp *j, int s, int64_t wm)
{
    if (wm <= j->side[s].wm)
        return 0;
    j->side[s].wm = wm;
    /* Expiry scans a side's state only when its oldest row can have expired. */
    if (j->op.node->interval && (expire(j) || emit_pending(j)))
        return -1;
    int64_t m = j->side[0].wm < j->side[1].wm ? j->side[0].wm : j->side[1].wm;
    if (m > j->emitted_wm) {
        j->emitted_wm = m;
        return rt_emit_watermark(&j->op, m);
    }
    return 0;
}

static int port_push(RtOp *op, Chunk *c)
{
    PortOp *p = (PortOp *)op;
    p->j->op.counters.rows_in += (uint64_t)c->n_rows; /* rows in count at the join, not its port */
    return side_push(p->j, p->side, c);
}

static int port_watermark(RtOp *op, int64_t wm)
{
    PortOp *p = (PortOp *)op;
    return side_watermark(p->j, p->side, wm);
}

static const RtOpVt PORT_VT = {.push = port_push, .watermark = port_watermark};

static int join_push(RtOp *op, Chunk *c) { return side_push((JoinOp *)op, 0, c); }
static int join_watermark(RtOp *op, int64_t wm) { return side_watermark((JoinOp *)op, 0, wm); }
/* pad_at_finish: the padded row of every outer row left without a partner,
 * once. Padding row by row would show a row padded until its partner
 * arrives, and the operators above would evaluate that row (a division in
 * the select list failing on a row that WHERE b.d IS NULL drops in
 * PostgreSQL once it has its match). */
static int pad_unmatched(JoinOp *j)
{
    RtCtx *rc = j->op.rc;
    Value vals[WEIR_ROW_VALUES], pair[WEIR_ROW_VALUES];
    for (int s = 0; s < 2; s++) {
        Side *me = &j->side[s];
        if (!me->outer)
            continue;
        StorIter *it;
        if (stor_iter_open(me->t, NULL, 0, &it, rc->err))
            return -1;
        const void *k, *v;
        size_t kl, vl;
        int got;
        while ((got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
            if (vl < 16 || get_be64((const unsigned char *)v + 8) != 0)
                continue;
            int64_t count = (int64_t)get_be64(v);
            if (row_decode((const char *)v + 16, vl - 16, vals, me->n_cols)) {
                stor_iter_close(it);
                return werr(rc->err, SQLSTATE_INTERNAL, 0, "corrupt join state");
            }
            s == 0 ? combine(j, vals, NULL, pair) : combine(j, NULL, vals, pair);
            for (int64_t c = 0; c < count; c++)
                if (emit_row(j, OP_INSERT, pair)) {
                    stor_iter_close(it);
                    return -1;
                }
        }
        stor_iter_close(it);
        if (got < 0)
            return -1;
    }
    return 0;
}

static int join_finish(RtOp *op)
{
    JoinOp *j = (JoinOp *)op;
    if (j->pad_at_finish && pad_unmatched(j))
        return -1;
    return emit_pending(j);
}

/* Before a checkpoint: drops the keys past their TTL, so it deletes them from LMDB. */
static int join_flush_state(RtOp *op, uint64_t epoch)
{
    JoinOp *j = (JoinOp *)op;
    (void)epoch;
    if (!j->has_ttl)
        return 0;
    int64_t now = rt_proc_now_us();
    return rt_ttl_sweep(&j->side[0].ttl, now, op->rc->err) || rt_ttl_sweep(&j->side[1].ttl, now, op->rc->err) ? -1 : 0;
}

static int join_expiry_due(RtOp *op, int64_t now)
{
    JoinOp *j = (JoinOp *)op;
    WError err = {0};
    int due = rt_ttl_due(&j->side[0].ttl, now, &err);
    return due ? due : rt_ttl_due(&j->side[1].ttl, now, &err);
}

static RtOp *join_input(RtOp *op, int k)
{
    JoinOp *j = (JoinOp *)op;
    return &j->port[k ? 1 : 0].op;
}

static void join_close(RtOp *op)
{
    JoinOp *j = (JoinOp *)op;
    stor_table_close(j->side[0].t);
    stor_table_close(j->side[1].t);
    buf_free(&j->kbuf);
    buf_free(&j->obuf);
    buf_free(&j->vbuf);
    buf_free(&j->tbuf);
    buf_free(&j->pbuf);
    if (j->res_arena)
        arena_free(j->res_arena);
    free(j->res_cols);
    free(j->ps);
    free(j->raw);
    for (int s = 0; s < 2; s++) {
        rt_ttl_fini(&j->side[s].ttl);
        if (j->side[s].pc.arena)
            arena_free(j->side[s].pc.arena);
        if (j->side[s].all.arena)
            arena_free(j->side[s].all.arena);
        free(j->side[s].nulls);
        buf_free(&j->side[s].dead);
    }
    free(j);
}

/* sd->rows at start: exact when the table (a new one, or restored from a
 * checkpoint) holds at most SMALL_SIDE_ROWS rows, else -1 (not counted
 * further: such a side is probed by scans, as before). */
static int count_rows(Side *sd, RtCtx *rc)
{
    StorIter *it;
    if (stor_iter_open(sd->t, NULL, 0, &it, rc->err))
        return -1;
    const void *k, *v;
    size_t kl, vl;
    int got;
    int64_t n = 0;
    while (n <= SMALL_SIDE_ROWS && (got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1)
        if (vl >= 16)
            n++;
    stor_iter_close(it);
    if (n <= SMALL_SIDE_ROWS && got < 0)
        return -1;
    sd->rows = n <= SMALL_SIDE_ROWS ? n : -1;
    return 0;
}

static const RtOpVt JOIN_VT = {.push = join_push, .watermark = join_watermark, .finish = join_finish,
                               .flush_state = join_flush_state, .close = join_close, .input = join_input};

RtOp *rt_op_join_new(RtCtx *rc, const PlanNode *n)
{
    /* The planner's check_limits: the key and row arrays below are sized by these. */
    assert(n->n_join_keys <= WEIR_MAX_KEY_COLUMNS && n->out.n <= WEIR_MAX_COLUMNS);
    JoinOp *j = xcalloc(1, sizeof *j);
    j->op.vt = &JOIN_VT;
    j->op.node = n;
    j->op.rc = rc;
    j->op.wm = TS_MINUS_INF;
    j->emitted_wm = TS_MINUS_INF;
    j->n_keys = n->n_join_keys;
    j->n_out = n->out.n;
    for (int s = 0; s < 2; s++) {
        j->port[s] = (PortOp){.op = {.vt = &PORT_VT, .node = n, .rc = rc, .wm = TS_MINUS_INF}, .j = j, .side = s};
        Side *sd = &j->side[s];
        sd->n_cols = n->inputs[s]->out.n;
        sd->stored = n->join_stored[s];
        if (sd->stored) {
            sd->nulls = xcalloc((size_t)(sd->n_cols ? sd->n_cols : 1), sizeof(Value));
            for (int i = 0; i < sd->n_cols; i++)
                sd->nulls[i] = value_null(n->inputs[s]->out.types[i]);
        }
        sd->keys = s == 0 ? n->left_keys : n->right_keys;
        sd->time_col = n->interval ? (s == 0 ? n->left_time_col : n->right_time_col) : -1;
        sd->wm = TS_MINUS_INF;
        sd->min_ts = INT64_MIN; /* unknown until the first scan (state may come from a checkpoint) */
        sd->pc.arena = arena_new(0);
    }
    if (n->residual) {
        bool mask[WEIR_ROW_VALUES] = {false};
        residual_cols(n->residual, mask, j->n_out < WEIR_ROW_VALUES ? j->n_out : WEIR_ROW_VALUES);
        j->res_cols = xcalloc((size_t)(j->n_out ? j->n_out : 1), sizeof(int));
        for (int i = 0; i < j->n_out && i < WEIR_ROW_VALUES; i++)
            if (mask[i])
                j->res_cols[j->n_res_cols++] = i;
        j->res_arena = arena_new(0);
        j->res_chunk = chunk_new(j->res_arena, j->n_out, n->out.types, 1);
    }
    j->side[0].outer = n->join_type == JOIN_LEFT || n->join_type == JOIN_FULL;
    j->side[1].outer = n->join_type == JOIN_RIGHT || n->join_type == JOIN_FULL;
    if (rt_open_state(rc, n->table_id, &j->side[0].t, rc->err) ||
        rt_open_state(rc, n->table_id2, &j->side[1].t, rc->err)) {
        join_close(&j->op);
        return NULL;
    }
    uint64_t last_epoch = 0;
    if ((n->inputs[0]->append_only || n->inputs[1]->append_only) &&
        stor_last_epoch(rc->env->stor, &last_epoch, rc->err)) {
        join_close(&j->op);
        return NULL;
    }
    for (int s = 0; s < 2; s++) {
        j->side[s].seq = n->inputs[s]->append_only;
        j->side[s].seq_run = last_epoch + 1;
        if (count_rows(&j->side[s], rc)) {
            join_close(&j->op);
            return NULL;
        }
    }
    /* Both sides' state goes into every checkpoint (the join owns and closes them). */
    j->op.table = j->side[0].t;
    j->op.table2 = j->side[1].t;
    j->has_ttl = n->state_ttl_us > 0 && !n->interval;
    j->pad_at_finish = rc->whole_input && !n->interval && !j->has_ttl;
    if (j->has_ttl) {
        for (int s = 0; s < 2; s++) {
            rt_ttl_init(&j->side[s].ttl, j->side[s].t, n->state_ttl_us, expire_key, &j->side[s],
                        &j->op.counters.expired_keys);
        }
        j->op.expiry_due = join_expiry_due;
    }
    return &j->op;
}
