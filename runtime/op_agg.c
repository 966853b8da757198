/*
 * op_agg.c: grouped aggregation, optionally bounded by a window.
 *
 * State (one entry per group in the operator's table):
 *   key   = [window end,] group values        (memcomparable: windows in end order)
 *   value = group values, row count, fired flag, then each aggregate's
 *           accumulator (count; sum + non-null count; min/max value)
 * Rows add to or, for -D/-U, retract from their group. Within a chunk the
 * first touch of a group remembers its old output row; when the chunk is
 * done (or before the watermark moves) each touched group emits its change:
 * +I for a new group, -U/+U when its values changed, -D when its last row
 * was retracted.
 *
 * Windowed aggregation (GROUP BY window_start/window_end of a window over a
 * watermarked source) follows docs/architecture.md "Time, windows, lateness": a row whose
 * window has end + lateness <= the watermark in effect for that row is late
 * (dropped and counted); when the watermark reaches end + lateness the
 * window's state is deleted. With EMIT ON WINDOW CLOSE nothing is emitted
 * until the watermark reaches the window's end; then the final row is
 * emitted once (+I), and rows arriving within the lateness emit -U/+U.
 *
 * Panes (node->pane_us > 0; planner/plan_panes.c): a hopping window with
 * EMIT ON WINDOW CLOSE and mergeable aggregates. Each row arrives once, in
 * its pane (window_start/window_end hold the pane's bounds), and updates one
 * state entry keyed [pane end, group]. When the watermark passes a window's
 * end, the panes it covers are merged per group and the window's rows are
 * emitted; a row within the lateness of windows already emitted updates
 * them (-U/+U) by merging their panes again. A pane is deleted when its
 * last window is past end + lateness. The live pane ends and the last
 * window emitted are kept under PANE_META, so a restart neither loses nor
 * repeats a window.
 *
 * With WITH (state_ttl) an unwindowed aggregation touches each row's group
 * in processing time (state_ttl.c); a group idle for the TTL is dropped
 * silently, with its multiset entries, and its next row starts it again
 * from empty state (+I, which the view's materialize applies as an upsert).
 */
#include "runtime_int.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bytemap.h"
#include "numeric.h"

/* A small ascending set of window or pane ends, saved as 8-byte big-endian
 * integers under a metadata key of the operator's table. */
typedef struct Ends {
    int64_t *v;
    int n, cap;
} Ends;

/* Adds x; false if it was there. Usually appends (ends grow with time). */
static bool ends_add(Ends *e, int64_t x)
{
    int i = e->n;
    while (i > 0 && e->v[i - 1] > x)
        i--;
    if (i > 0 && e->v[i - 1] == x)
        return false;
    if (e->n == e->cap) {
        e->cap = e->cap ? e->cap * 2 : 16;
        e->v = xrealloc(e->v, sizeof(int64_t) * (size_t)e->cap);
    }
    memmove(e->v + i + 1, e->v + i, sizeof(int64_t) * (size_t)(e->n - i));
    e->v[i] = x;
    e->n++;
    return true;
}

static bool ends_has(const Ends *e, int64_t x)
{
    int lo = 0, hi = e->n;
    while (lo < hi) {
        int m = (lo + hi) / 2;
        if (e->v[m] < x)
            lo = m + 1;
        else
            hi = m;
    }
    return lo < e->n && e->v[lo] == x;
}

/* Drops the first k. */
static void ends_drop(Ends *e, int k)
{
    memmove(e->v, e->v + k, sizeof(int64_t) * (size_t)(e->n - k));
    e->n -= k;
}

static void ends_encode(const Ends *e, Buf *b)
{
    for (int i = 0; i < e->n; i++) {
        unsigned char v[8];
        put_be64(v, (uint64_t)e->v[i]);
        buf_append(b, v, 8);
    }
}

/* Reads n bytes at p (a multiple of 8). */
static void ends_decode(Ends *e, const void *p, size_t n)
{
    e->n = e->cap = (int)(n / 8);
    e->v = xmalloc(sizeof(int64_t) * (size_t)(e->n + 1));
    for (int i = 0; i < e->n; i++)
        e->v[i] = (int64_t)get_be64((const unsigned char *)p + 8 * i);
}

typedef struct AggOp {
    RtOp op;
    int n_group, n_aggs;
    int n_state;              /* values in a state row */
    int n_out;                /* values in an output row */
    bool windowed;
    bool global;              /* no GROUP BY: exactly one output row, even over no input */
    bool session;             /* session windows (see session_push) */
    bool session_ms;          /* ... with count(DISTINCT): multisets under each session's key */
    int64_t min_end;          /* sessions: no stored session ends earlier (INT64_MIN: unknown) */
    Arena *touch_arena;       /* the touched map; reset after each flush */
    ByteMap touched;
    Chunk *out;               /* output being filled, in the chunk arena */
    Buf kbuf, vbuf, tmp;
    TypeId *state_types;      /* for initial values */
    /* Panes (see the file comment) */
    bool panes;
    Ends pane_set;            /* live panes' ends */
    int64_t fired_upto;       /* end of the last window emitted, TS_MINUS_INF before any */
    /* Windowed (not panes, not sessions): the ends of the windows held in
     * state, ascending, kept under WIN_META (weir_operators.open_windows). */
    Ends wins;
    Value *upd_before;        /* pane_push: the old states of the windows a late row updates */
    int64_t *upd_ws;          /* ... and their starts; both for size/slide windows */
    bool idle_out;            /* RT_WM_IDLE passed on, no real watermark since (agg_watermark) */
    bool has_ttl;             /* WITH (state_ttl): idle groups expire (see the file comment) */
    RtTtl ttl;
    Buf dbuf;                 /* expire_group's scratch */
    Buf cbuf;                 /* the changed row's encoding, compared with the one emitted before */
} AggOp;

/* Where a pane aggregation keeps its pane list: 0xFF never starts a
 * key_encode'd key (its first byte is a null flag, 0 or 1). */
static const unsigned char PANE_META[2] = {0xff, 'p'};
static const unsigned char WIN_META[2] = {0xff, 'w'};

/* ---- the list of open windows (windowed aggregation) ---- */

static int wins_save(AggOp *a)
{
    Buf b = BUF_INIT;
    ends_encode(&a->wins, &b);
    int rc = a->wins.n ? stor_table_put(a->op.table, WIN_META, sizeof WIN_META, b.data, b.len, a->op.rc->err)
                       : stor_table_delete(a->op.table, WIN_META, sizeof WIN_META, a->op.rc->err);
    buf_free(&b);
    return rc;
}

static int wins_load(AggOp *a)
{
    const void *v;
    size_t vl;
    int f = stor_table_get(a->op.table, WIN_META, sizeof WIN_META, &v, &vl, a->op.rc->err);
    if (f <= 0)
        return f;
    if (vl % 8)
        return werr(a->op.rc->err, SQLSTATE_INTERNAL, 0, "corrupt window list of an aggregation");
    ends_decode(&a->wins, v, vl);
    return 0;
}

/* A group of the window ending at end was created. */
static int wins_note(AggOp *a, int64_t end) { return ends_add(&a->wins, end) ? wins_save(a) : 0; }

/* Windows ending at or before end expired (their state is deleted). */
static int wins_expire(AggOp *a, int64_t end)
{
    int k = 0;
    while (k < a->wins.n && a->wins.v[k] <= end)
        k++;
    if (!k)
        return 0;
    ends_drop(&a->wins, k);
    return wins_save(a);
}

/* ---- multisets of a group's values (count DISTINCT, min/max under retraction) ----
 * One entry per distinct value: key = group key, 0xFD, aggregate index,
 * memcomparable value; value = 0xFE then the 8-byte count, and for a
 * NUMERIC the display scale of the first copy (the key holds the value
 * without trailing zeros, so min() gives back 1.50, not 1.5), for an
 * INTERVAL the first copy's months, days and microseconds (the key holds
 * its span). The 0xFE lead
 * byte tells these apart from group states when windows are swept. */

static void ms_key(const Buf *group, int agg, const Value *v, Buf *out)
{
    buf_reset(out);
    buf_append(out, group->data, group->len);
    buf_put_u8(out, 0xfd);
    buf_put_u8(out, (uint8_t)agg);
    key_encode(out, v, 1);
}

/* Adds delta copies of v; returns the count before, or -1 on error. */
static int64_t ms_add(AggOp *a, int agg, const Value *v, int delta)
{
    WError *err = a->op.rc->err;
    Buf k = BUF_INIT;
    ms_key(&a->kbuf, agg, v, &k);
    const void *val;
    size_t vl;
    int f = stor_table_get(a->op.table, k.data, k.len, &val, &vl, err);
    int64_t before = f == 1 && vl >= 9 ? (int64_t)get_be64((const unsigned char *)val + 1) : 0;
    int64_t after = before + delta;
    int rc;
    if (f < 0)
        rc = -1;
    else if (after <= 0)
        rc = stor_table_delete(a->op.table, k.data, k.len, err);
    else {
        unsigned char nv[33] = {0xfe};
        put_be64(nv + 1, (uint64_t)after);
        size_t n = 9;
        if (v->type == TYPE_NUMERIC) {
            nv[9] = f == 1 && vl == 10 ? ((const unsigned char *)val)[9] : v->nscale;
            n = 10;
        } else if (v->type == TYPE_INTERVAL) {
            /* The first copy's own fields ('36 hours'; the key holds the
             * span, '1 day 12:00:00' when decoded). */
            if (f == 1 && vl == 33) {
                memcpy(nv + 9, (const unsigned char *)val + 9, 24);
            } else {
                put_be64(nv + 9, (uint64_t)v->u.iv.usecs);
                put_be64(nv + 17, (uint64_t)(int64_t)v->u.iv.days);
                put_be64(nv + 25, (uint64_t)(int64_t)v->u.iv.months);
            }
            n = 33;
        }
        rc = stor_table_put(a->op.table, k.data, k.len, nv, n, err);
    }
    buf_free(&k);
    return rc ? -1 : before;
}

/* The smallest (want_max false) or largest value left in the multiset. */
static int ms_extreme(AggOp *a, int agg, TypeId t, bool want_max, Value *out)
{
    RtCtx *rc = a->op.rc;
    Buf prefix = BUF_INIT;
    buf_append(&prefix, a->kbuf.data, a->kbuf.len);
    buf_put_u8(&prefix, 0xfd);
    buf_put_u8(&prefix, (uint8_t)agg);
    StorIter *it;
    *out = value_null(t);
    if (stor_iter_open(a->op.table, prefix.data, prefix.len, &it, rc->err)) {
        buf_free(&prefix);
        return -1;
    }
    const void *k, *v;
    size_t kl, vl;
    int got;
    while ((got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
        if (key_decode((const char *)k + prefix.len, kl - prefix.len, &t, 1, rc->chunk_arena, out))
            continue;
        if (t == TYPE_NUMERIC && !out->null && vl == 10) {
            Numeric x;
            WError e = {0};
            if (num_rescale(num_get(out), ((const unsigned char *)v)[9], &x, &e) == 0)
                num_put(x, out);
        }
        if (t == TYPE_INTERVAL && !out->null && vl == 33) {
            const unsigned char *p = (const unsigned char *)v + 9;
            out->u.iv = (Interval){.usecs = (int64_t)get_be64(p), .days = (int32_t)(int64_t)get_be64(p + 8),
                                   .months = (int32_t)(int64_t)get_be64(p + 16)};
        }
        if (!want_max)
            break;
    }
    /* Numbers and times decode by value; strings were copied into the chunk arena. */
    stor_iter_close(it);
    buf_free(&prefix);
    return got < 0 ? -1 : 0;
}

static int emit_row(AggOp *a, RowOp op, const Value *vals)
{
    RtCtx *rc = a->op.rc;
    if (!a->out || chunk_full(a->out)) {
        if (a->out && a->out->n_rows) {
            Chunk *full = a->out;
            a->out = NULL;
            if (rt_emit(&a->op, full))
                return -1;
        }
        a->out = chunk_new(rc->chunk_arena, a->n_out, a->op.node->out.types, CHUNK_DEFAULT_CAP);
    }
    chunk_append(a->out, op, vals);
    return 0;
}

static int emit_pending(AggOp *a)
{
    if (a->out && a->out->n_rows) {
        Chunk *c = a->out;
        a->out = NULL;
        return rt_emit(&a->op, c);
    }
    return 0;
}

/* ---- the scales of a numeric sum ----
 * Postgres shows sum(numeric) with the largest scale among the group's
 * values. Under retraction that maximum can fall, so the third slot of a
 * numeric sum/avg counts the values of each scale: a BYTEA of (scale byte,
 * 8-byte count) pairs, one per scale present (9 bytes for the usual one). */

static void scales_decode(const Value *slot, int64_t *counts)
{
    memset(counts, 0, sizeof(int64_t) * (NUM_MAX_DIGITS + 1));
    const unsigned char *p = (const unsigned char *)slot->u.s.p;
    for (uint32_t i = 0; !slot->null && i + 9 <= slot->u.s.len; i += 9)
        if (p[i] <= NUM_MAX_DIGITS)
            counts[p[i]] += (int64_t)get_be64(p + i + 1);
}

static void scales_encode(const int64_t *counts, Arena *ar, Value *slot)
{
    unsigned char tmp[9 * (NUM_MAX_DIGITS + 1)];
    size_t n = 0;
    for (int s = 0; s <= NUM_MAX_DIGITS; s++)
        if (counts[s] > 0) {
            tmp[n] = (unsigned char)s;
            put_be64(tmp + n + 1, (uint64_t)counts[s]);
            n += 9;
        }
    char *p = arena_alloc(ar, n + 1);
    memcpy(p, tmp, n);
    *slot = value_str(TYPE_BYTEA, p, n);
}

/* Adds delta values of scale `scale` (or merges `other`'s counts) and
 * brings the sum to the largest scale left; exact, since every value in
 * the sum has at most that scale. */
static void scales_apply(Value *sum, Value *slot, int scale, int delta, const Value *other, Arena *ar)
{
    int64_t c[NUM_MAX_DIGITS + 1], o[NUM_MAX_DIGITS + 1];
    scales_decode(slot, c);
    if (other) {
        scales_decode(other, o);
        for (int s = 0; s <= NUM_MAX_DIGITS; s++)
            c[s] += o[s];
    } else {
        c[scale] += delta;
    }
    scales_encode(c, ar, slot);
    int top = 0;
    for (int s = 0; s <= NUM_MAX_DIGITS; s++)
        if (c[s] > 0)
            top = s;
    Numeric x;
    WError e = {0};
    if (num_rescale(num_get(sum), top, &x, &e) == 0)
        num_put(x, sum);
}

/* Adds x to the double sum *s, keeping the rounding error in *c (Neumaier):
 * the sum is *s + *c. Under retraction a plain double sum loses the small
 * addends to a large one that leaves again (1e300 + 3 - 1e300 is 0); the
 * compensation keeps them. Infinities and NaN leave *c alone, so the sum
 * stays what the plain one is. */
static void fsum_add(double *s, double *c, double x)
{
    double t = *s + x;
    if (isfinite(t))
        *c += fabs(*s) >= fabs(x) ? (*s - t) + x : (x - t) + *s;
    *s = t;
}

/* Fresh accumulator for a group with these group values. */
static void state_init(AggOp *a, const Value *group, Value *st)
{
    const PlanNode *n = a->op.node;
    for (int i = 0; i < a->n_group; i++)
        st[i] = group[i];
    st[a->n_group] = value_int(TYPE_INT8, 0);     /* rows */
    st[a->n_group + 1] = value_int(TYPE_INT8, 0); /* fired */
    int k = a->n_group + 2;
    for (int i = 0; i < n->n_aggs; i++) {
        const PlanAgg *g = &n->aggs[i];
        switch (g->kind) {
        case AGG_COUNT_STAR:
        case AGG_COUNT: st[k++] = value_int(TYPE_INT8, 0); break;
        case AGG_SUM:
            if (g->type == TYPE_NUMERIC) {
                st[k++] = value_numeric((Numeric){0, 0});
                st[k + 1] = value_str(TYPE_BYTEA, "", 0);
            } else if (g->type == TYPE_FLOAT8) {
                st[k++] = value_float(TYPE_FLOAT8, 0);
                if (g->compensated)
                    st[k + 1] = value_float(TYPE_FLOAT8, 0);
            } else if (g->type == TYPE_INTERVAL) {
                st[k] = value_null(TYPE_INTERVAL);
                st[k].null = false;
                k++;
            } else
                st[k++] = value_int(TYPE_INT8, 0);
            st[k++] = value_int(TYPE_INT8, 0);
            if (g->type == TYPE_NUMERIC || g->compensated)
                k++;   /* the scale counts or the compensation, set above */
            break;
        case AGG_AVG:
            st[k++] = g->type == TYPE_NUMERIC ? value_numeric((Numeric){0, 0}) : value_float(TYPE_FLOAT8, 0);
            st[k++] = value_int(TYPE_INT8, 0);
            if (g->type == TYPE_NUMERIC)
                st[k++] = value_str(TYPE_BYTEA, "", 0);
            else if (g->compensated)
                st[k++] = value_float(TYPE_FLOAT8, 0);
            break;
        case AGG_MIN:
        case AGG_MAX:
        case AGG_LAST:
        case AGG_STRING_AGG: st[k++] = value_null(g->kind == AGG_STRING_AGG ? TYPE_TEXT : g->arg_type); break;
        case AGG_FIRST:
            st[k++] = value_null(g->arg_type);
            st[k++] = value_int(TYPE_INT8, 0);
            break;
        case AGG_COUNT_DISTINCT: st[k++] = value_int(TYPE_INT8, 0); break;
        case AGG_BOOL_AND:
        case AGG_BOOL_OR:
            st[k++] = value_int(TYPE_INT8, 0); /* true seen */
            st[k++] = value_int(TYPE_INT8, 0); /* false seen */
            break;
        }
    }
}

/* Is aggregate g filtered out for row r? */
static bool filtered_out(const PlanAgg *g, const Chunk *c, int r)
{
    if (g->filter_col < 0)
        return false;
    const Column *f = &c->cols[g->filter_col];
    return f->nulls[r] || !f->v.i[r];
}

/* The sums that row r of c would make (sign 1 adds, -1 retracts), into
 * sums[i] for each bigint or numeric sum/avg i, before anything changes:
 * a row whose addend overflows must leave the group as it was. Returns
 * -1 with err (22003) on overflow. */
static int sums_check(AggOp *a, const Value *st, const Chunk *c, int r, int sign, Value *sums, WError *err)
{
    const PlanNode *n = a->op.node;
    int k = a->n_group + 2;
    for (int i = 0; i < n->n_aggs; k += plan_agg_slots(&n->aggs[i]), i++) {
        const PlanAgg *g = &n->aggs[i];
        if ((g->kind != AGG_SUM && g->kind != AGG_AVG) || filtered_out(g, c, r))
            continue;
        Value v;
        chunk_get(c, g->arg, r, &v);
        if (v.null)
            continue;
        if (g->type == TYPE_NUMERIC) {
            Numeric x;
            if ((sign > 0 ? num_add : num_sub)(num_get(&st[k]), num_get(&v), &x, err))
                return -1;
            num_put(x, &sums[i]);
        } else if (g->kind == AGG_SUM && g->type == TYPE_INT8) {
            sums[i] = st[k];
            if (sign > 0 ? __builtin_add_overflow(st[k].u.i, v.u.i, &sums[i].u.i)
                         : __builtin_sub_overflow(st[k].u.i, v.u.i, &sums[i].u.i))
                return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "bigint out of range");
        }
    }
    return 0;
}

/* A row's sum overflowed (err). An ad hoc query fails, as in Postgres; a
 * view counts the row as an evaluation error and goes on without it.
 * Returns -1 when the error is fatal. */
static int sum_failed(AggOp *a, const WError *err)
{
    RtCtx *rc = a->op.rc;
    if (rc->batch) {
        *rc->err = *err;
        return -1;
    }
    rc->stats.eval_errors++;
    rt_row_error(rc, "%s", err->msg);
    return 0;
}

/* Adds (sign 1) or retracts (sign -1) row r of c into st. On an overflow
 * st is left as it was and -1 is returned with err set. */
static int state_apply(AggOp *a, Value *st, const Chunk *c, int r, int sign, WError *err)
{
    const PlanNode *n = a->op.node;
    Value sums[WEIR_MAX_AGG_VALUES];
    if (sums_check(a, st, c, r, sign, sums, err))
        return -1;
    st[a->n_group].u.i += sign;
    int k = a->n_group + 2;
    for (int i = 0; i < n->n_aggs; i++) {
        const PlanAgg *g = &n->aggs[i];
        int slots = plan_agg_slots(g);
        if (filtered_out(g, c, r)) {
            k += slots;
            continue;
        }
        Value v;
        if (g->arg >= 0)
            chunk_get(c, g->arg, r, &v);
        switch (g->kind) {
        case AGG_COUNT_STAR: st[k].u.i += sign; break;
        case AGG_COUNT:
            if (!v.null)
                st[k].u.i += sign;
            break;
        case AGG_SUM:
        case AGG_AVG:
            if (v.null)
                break;
            if (g->type == TYPE_NUMERIC) {
                /* Exact under retraction: subtracting what was added gives back
                 * the same sum, and the scale follows the values still in it. */
                Numeric x = num_get(&v);
                st[k] = sums[i];   /* sums_check computed it */
                scales_apply(&st[k], &st[k + 2], x.scale, sign, NULL, a->op.rc->chunk_arena);
            } else if (g->kind == AGG_AVG || g->type == TYPE_FLOAT8) {
                double x = type_phys(v.type) == PHYS_F64 ? v.u.f : (double)v.u.i;
                if (g->compensated)
                    fsum_add(&st[k].u.f, &st[k + 2].u.f, sign * x);
                else
                    st[k].u.f += sign * x;
            } else if (g->type == TYPE_INTERVAL) {
                st[k].u.iv.months += sign * v.u.iv.months;
                st[k].u.iv.days += sign * v.u.iv.days;
                st[k].u.iv.usecs += sign * v.u.iv.usecs;
            } else {
                st[k] = sums[i];
            }
            st[k + 1].u.i += sign;
            break;
        case AGG_MIN:
        case AGG_MAX:
            if (v.null)
                break;
            if (!a->op.node->inputs[0]->append_only) {
                /* Under retraction the extreme may leave: keep every value. */
                if (ms_add(a, i, &v, sign) < 0)
                    return -1;
                if (sign > 0 && !st[k].null &&
                    (g->kind == AGG_MIN ? value_cmp(&v, &st[k]) >= 0 : value_cmp(&v, &st[k]) <= 0))
                    break;
                if (sign > 0) {
                    st[k] = v;
                    break;
                }
                if (!st[k].null && value_cmp(&v, &st[k]) != 0)
                    break;
                if (ms_extreme(a, i, g->arg_type, g->kind == AGG_MAX, &st[k]))
                    return -1;
                break;
            }
            if (sign < 0)
                break;
            if (st[k].null || (g->kind == AGG_MIN ? value_cmp(&v, &st[k]) < 0 : value_cmp(&v, &st[k]) > 0))
                st[k] = v;
            break;
        case AGG_COUNT_DISTINCT: {
            if (v.null)
                break;
            int64_t before = ms_add(a, i, &v, sign);
            if (before < 0)
                return -1;
            if (sign > 0 && before == 0)
                st[k].u.i++;
            else if (sign < 0 && before == 1)
                st[k].u.i--;
            break;
        }
        case AGG_BOOL_AND:
        case AGG_BOOL_OR:
            if (v.null)
                break;
            st[k + (v.u.i ? 0 : 1)].u.i += sign;
            break;
        case AGG_STRING_AGG:
            /* Append-only input (the planner checks): values join in arrival order. */
            if (v.null || sign < 0)
                break;
            if (st[k].null) {
                st[k] = v;
                st[k].type = TYPE_TEXT;
            } else {
                size_t sl = strlen(g->sep), n = (size_t)st[k].u.s.len + sl + v.u.s.len;
                if (n > 64u * 1024 * 1024) {
                    rt_row_error(a->op.rc, "string_agg result over 64 MiB");
                    return -1;
                }
                char *buf = arena_alloc(a->op.rc->chunk_arena, n + 1);
                memcpy(buf, st[k].u.s.p, st[k].u.s.len);
                memcpy(buf + st[k].u.s.len, g->sep, sl);
                memcpy(buf + st[k].u.s.len + sl, v.u.s.p, v.u.s.len);
                st[k].u.s.p = buf;
                st[k].u.s.len = (uint32_t)n;
            }
            break;
        case AGG_FIRST:
            if (!v.null && sign > 0 && !st[k + 1].u.i) {
                st[k] = v;
                st[k + 1].u.i = 1;
            }
            break;
        case AGG_LAST:
            if (!v.null && sign > 0)
                st[k] = v;
            break;
        }
        k += slots;
    }
    return 0;
}

/* The output row (group values, then aggregate results) of state st. */
static void state_output(AggOp *a, const Value *st, Value *out)
{
    const PlanNode *n = a->op.node;
    for (int i = 0; i < a->n_group; i++)
        out[i] = st[i];
    int k = a->n_group + 2;
    for (int i = 0; i < n->n_aggs; i++) {
        const PlanAgg *g = &n->aggs[i];
        Value *o = &out[a->n_group + i];
        switch (g->kind) {
        case AGG_COUNT_STAR:
        case AGG_COUNT: *o = st[k]; break;
        case AGG_SUM:
            *o = st[k + 1].u.i > 0 ? st[k] : value_null(g->type);
            if (g->compensated && st[k + 1].u.i > 0)
                o->u.f = st[k].u.f + st[k + 2].u.f;
            o->type = g->type;
            break;
        case AGG_AVG:
            if (g->type == TYPE_NUMERIC) {
                /* sum / count with Postgres's division scale, as numeric_avg. */
                Numeric q;
                WError e = {0};
                *o = value_null(TYPE_NUMERIC);
                if (st[k + 1].u.i > 0 && num_div(num_get(&st[k]), num_from_int(st[k + 1].u.i), &q, &e) == 0)
                    num_put(q, o);
                break;
            }
            *o = st[k + 1].u.i > 0 ? value_float(TYPE_FLOAT8, (st[k].u.f + (g->compensated ? st[k + 2].u.f : 0)) /
                                                                     (double)st[k + 1].u.i)
                                   : value_null(TYPE_FLOAT8);
            break;
        case AGG_MIN:
        case AGG_MAX:
        case AGG_STRING_AGG:
        case AGG_FIRST:
        case AGG_LAST:
        case AGG_COUNT_DISTINCT: *o = st[k]; break;
        case AGG_BOOL_AND:
        case AGG_BOOL_OR: {
            int64_t t = st[k].u.i, f = st[k + 1].u.i;
            *o = t + f == 0 ? value_null(TYPE_BOOL) : value_bool(g->kind == AGG_BOOL_AND ? f == 0 : t > 0);
            break;
        }
        }
        o->type = g->type;
        k += plan_agg_slots(g);
    }
}

/* Loads the state of key into st; returns 1 found, 0 not, -1 error. st's
 * strings point into a->tmp (valid until the next load). */
static int state_load(AggOp *a, const void *key, size_t klen, Value *st)
{
    const void *v;
    size_t vl;
    int f = stor_table_get(a->op.table, key, klen, &v, &vl, a->op.rc->err);
    if (f <= 0)
        return f;
    buf_reset(&a->tmp);
    buf_append(&a->tmp, v, vl);
    if (row_decode(a->tmp.data, a->tmp.len, st, a->n_state))
        return werr(a->op.rc->err, SQLSTATE_INTERNAL, 0, "corrupt aggregation state");
    return 1;
}

static int state_store(AggOp *a, const void *key, size_t klen, const Value *st)
{
    buf_reset(&a->vbuf);
    row_encode(&a->vbuf, st, a->n_state);
    return stor_table_put(a->op.table, key, klen, a->vbuf.data, a->vbuf.len, a->op.rc->err);
}

/* Merges accumulator state `o` into `st` (session windows: two sessions
 * become one). `o_first` tells whether o's session starts earlier, which
 * decides order-dependent aggregates. Multiset aggregates are refused by
 * the planner for sessions. */
static void state_merge(AggOp *a, Value *st, const Value *o, bool o_first)
{
    const PlanNode *n = a->op.node;
    st[a->n_group].u.i += o[a->n_group].u.i;
    int k = a->n_group + 2;
    for (int i = 0; i < n->n_aggs; i++) {
        const PlanAgg *g = &n->aggs[i];
        switch (g->kind) {
        case AGG_COUNT_STAR:
        case AGG_COUNT:
        case AGG_COUNT_DISTINCT: st[k].u.i += o[k].u.i; break;
        case AGG_SUM:
        case AGG_AVG:
            if (g->type == TYPE_NUMERIC) {
                Numeric s;
                WError e = {0};
                if (num_add(num_get(&st[k]), num_get(&o[k]), &s, &e) == 0)
                    num_put(s, &st[k]);
                scales_apply(&st[k], &st[k + 2], 0, 0, &o[k + 2], a->op.rc->chunk_arena);
            } else if (g->compensated) {
                fsum_add(&st[k].u.f, &st[k + 2].u.f, o[k].u.f);
                st[k + 2].u.f += o[k + 2].u.f;
            } else if (g->kind == AGG_AVG || g->type == TYPE_FLOAT8)
                st[k].u.f += o[k].u.f;
            else if (g->type == TYPE_INTERVAL) {
                st[k].u.iv.months += o[k].u.iv.months;
                st[k].u.iv.days += o[k].u.iv.days;
                st[k].u.iv.usecs += o[k].u.iv.usecs;
            } else
                st[k].u.i += o[k].u.i;
            st[k + 1].u.i += o[k + 1].u.i;
            break;
        case AGG_MIN:
        case AGG_MAX:
            if (!o[k].null && (st[k].null || (g->kind == AGG_MIN ? value_cmp(&o[k], &st[k]) < 0
                                                                  : value_cmp(&o[k], &st[k]) > 0)))
                st[k] = o[k];
            break;
        case AGG_BOOL_AND:
        case AGG_BOOL_OR:
            st[k].u.i += o[k].u.i;
            st[k + 1].u.i += o[k + 1].u.i;
            break;
        case AGG_FIRST:
            if (o[k + 1].u.i && (o_first || !st[k + 1].u.i)) {
                st[k] = o[k];
                st[k + 1].u.i = 1;
            }
            break;
        case AGG_LAST:
            if (!o[k].null && (!o_first || st[k].null))
                st[k] = o[k];
            break;
        case AGG_STRING_AGG:
            if (o[k].null)
                break;
            if (st[k].null) {
                st[k] = o[k];
            } else {
                const Value *x = o_first ? &o[k] : &st[k], *y = o_first ? &st[k] : &o[k];
                size_t sl = strlen(g->sep), len = (size_t)x->u.s.len + sl + y->u.s.len;
                char *buf = arena_alloc(a->op.rc->chunk_arena, len + 1);
                memcpy(buf, x->u.s.p, x->u.s.len);
                memcpy(buf + x->u.s.len, g->sep, sl);
                memcpy(buf + x->u.s.len + sl, y->u.s.p, y->u.s.len);
                st[k].u.s.p = buf;
                st[k].u.s.len = (uint32_t)len;
            }
            break;
        }
        k += plan_agg_slots(g);
    }
}

/* The state key of a group. A global aggregation has no group values; its
 * key is one zero byte, since storage keys are never empty. With key groups
 * (only unwindowed aggregations have them: plan_dist.c) the key begins with
 * the group's key group, over the group values, which are the columns the
 * exchange before it hashed, in that order; the multisets of
 * count(DISTINCT) extend the key (ms_key), so they share its group. */
static void make_key(AggOp *a, const Value *kv, int nk)
{
    const PlanNode *n = a->op.node;
    buf_reset(&a->kbuf);
    if (n->key_groups) {
        unsigned char pre[WEIR_KG_PREFIX];
        weir_kg_put(pre, rt_row_kg(kv, nk, NULL, n->key_groups));
        buf_append(&a->kbuf, pre, WEIR_KG_PREFIX);
    }
    key_encode(&a->kbuf, kv, nk);
    if (a->kbuf.len == 0)
        buf_put_u8(&a->kbuf, 0);
}

/* A group's state while a chunk updates it (agg_push): the entry of the
 * touched map holds the state's values (ptr, an array of n_state Values
 * whose strings are copied into the touch arena; flag PEND_PUT) or that the
 * group is gone (PEND_DEL), and the table is written once per group and
 * chunk, at the flush, instead of once per row. A group that gets many rows
 * of a chunk (q5: a window's max over every count, a hot auction) then
 * costs one table read, one decode, one encode and one write, not one of
 * each per row. Everything that reads the table (advance, checkpoints,
 * state_ttl sweeps) runs after a flush. */
enum { PEND_NONE, PEND_PUT, PEND_DEL };

static void pending_set(AggOp *a, ByteMapEntry *e, const Value *st)
{
    if (!e->ptr)
        e->ptr = arena_alloc(a->touch_arena, sizeof(Value) * (size_t)a->n_state);
    Value *pv = e->ptr;
    for (int i = 0; i < a->n_state; i++) {
        pv[i] = st[i];
        /* st's strings may point into a->tmp, the chunk or this very entry:
         * a copy outlives them all until the flush. */
        if (!st[i].null && type_phys(st[i].type) == PHYS_STR && st[i].u.s.len)
            pv[i].u.s.p = arena_strndup(a->touch_arena, st[i].u.s.p, st[i].u.s.len);
    }
    e->flag = PEND_PUT;
}

/* The group's state as of now: from the entry when the chunk changed it,
 * else from the table. Same returns as state_load; st's strings point into
 * the touch arena or a->tmp. */
static int pending_load(AggOp *a, ByteMapEntry *e, Value *st)
{
    if (e->flag == PEND_DEL)
        return 0;
    if (e->flag == PEND_PUT) {
        memcpy(st, e->ptr, sizeof(Value) * (size_t)a->n_state);
        return 1;
    }
    return state_load(a, e->key, e->klen, st);
}

/* Writes the entry's pending state to the table and loads it into st. */
static int pending_write(AggOp *a, ByteMapEntry *e, Value *st)
{
    int f = pending_load(a, e, st);
    if (f < 0)
        return -1;
    if (e->flag == PEND_PUT && state_store(a, e->key, e->klen, st))
        return -1;
    if (e->flag == PEND_DEL && stor_table_delete(a->op.table, e->key, e->klen, a->op.rc->err))
        return -1;
    e->flag = PEND_NONE;
    return f;
}

/* Emits the change of every group touched since the last flush. */
static int flush_changes(AggOp *a)
{
    const PlanNode *n = a->op.node;
    Value st[WEIR_MAX_AGG_VALUES], now[WEIR_MAX_AGG_VALUES], before[WEIR_MAX_AGG_VALUES];
    for (int i = 0; i < a->touched.n; i++) {
        ByteMapEntry *e = &a->touched.entries[i];
        int f = pending_write(a, e, st);
        if (f < 0)
            return -1;
        bool exists = f == 1 && (a->global || st[a->n_group].u.i > 0);
        bool fired = f == 1 && st[a->n_group + 1].u.i;
        /* On window close, unfired windows say nothing yet. */
        if (n->emit == PLAN_EMIT_ON_CLOSE && a->windowed && !fired)
            continue;
        if (exists)
            state_output(a, st, now);
        bool had = e->val != NULL;
        if (had && row_decode(e->val, e->vlen, before, a->n_out))
            return werr(a->op.rc->err, SQLSTATE_INTERNAL, 0, "corrupt aggregation change");
        if (had && exists) {
            /* Unchanged means the same bytes, not equal values: 1.5 after
             * 1.50000000000000000000 (an avg's scale), -0 after 0 and '1 day'
             * after '24 hours' print apart and must reach the view. */
            buf_reset(&a->cbuf);
            row_encode(&a->cbuf, now, a->n_out);
            if (a->cbuf.len == e->vlen && memcmp(a->cbuf.data, e->val, e->vlen) == 0)
                continue;
            if (emit_row(a, OP_UPDATE_BEFORE, before) || emit_row(a, OP_UPDATE_AFTER, now))
                return -1;
        } else if (exists) {
            if (emit_row(a, OP_INSERT, now))
                return -1;
        } else if (had) {
            if (emit_row(a, OP_DELETE, before))
                return -1;
        }
    }
    arena_reset(a->touch_arena);
    bytemap_init(&a->touched, a->touch_arena);
    return 0;
}

/* The watermark reached wm: fire (on close) and forget windows it passed. */
static int advance(AggOp *a, int64_t wm)
{
    const PlanNode *n = a->op.node;
    RtCtx *rc = a->op.rc;
    if (wm <= a->op.wm)
        return 0;
    a->op.wm = wm;
    if (!a->windowed)
        return 0;
    /* Nothing to close or forget yet: no scan (this runs at every watermark step). */
    if (a->min_end != INT64_MIN && a->min_end > wm && (wm == TS_PLUS_INF || a->min_end > wm - n->lateness_us))
        return 0;
    if (a->wins.n > 0 && a->wins.v[0] > wm)
        return 0; /* the earliest window held neither closes nor expires */
    /* Only the windows ending at or before wm: keys [1][end] below [1][wm + 1]. */
    StorIter *it;
    unsigned char upper[9] = {1};
    put_be64(upper + 1, (uint64_t)(wm == TS_PLUS_INF ? wm : wm + 1) ^ UINT64_C(0x8000000000000000));
    if (wm == TS_PLUS_INF ? stor_iter_open(a->op.table, NULL, 0, &it, rc->err)
                          : stor_iter_open_below(a->op.table, NULL, 0, upper, 9, &it, rc->err))
        return -1;
    Value st[WEIR_MAX_AGG_VALUES], out[WEIR_MAX_AGG_VALUES];
    Buf key = BUF_INIT, val = BUF_INIT;
    int rcode = 0, got;
    const void *k, *v;
    size_t kl, vl;
    TypeId tt = TYPE_TIMESTAMP;
    int64_t min_left = INT64_MAX;
    while ((got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
        Value end;
        if (kl && ((const unsigned char *)k)[0] == 0xff)
            break; /* WIN_META: operator bookkeeping sorts after every window */
        if (key_decode(k, kl, &tt, 1, rc->chunk_arena, &end) || end.null)
            continue;
        bool closes = end.u.i <= wm;
        bool expires = end.u.i <= wm - n->lateness_us || (wm == TS_PLUS_INF);
        if (!expires && end.u.i < min_left)
            min_left = end.u.i;
        if (!closes && !expires)
            break; /* keys are in end order: nothing further is due */
        buf_reset(&key);
        buf_append(&key, k, kl);
        if (vl && ((const unsigned char *)v)[0] == 0xfe) {
            /* A multiset entry of a window's group: it goes with its window. */
            if (expires && (rcode = stor_table_delete(a->op.table, key.data, key.len, rc->err)))
                break;
            continue;
        }
        /* Only a window that fires now is read; with EMIT CHANGES every group
         * is just deleted (a tenth of the expiry went to decoding them). */
        bool fires = n->emit == PLAN_EMIT_ON_CLOSE && closes;
        if (fires) {
            buf_reset(&val);
            buf_append(&val, v, vl);
            if (row_decode(val.data, val.len, st, a->n_state)) {
                rcode = werr(rc->err, SQLSTATE_INTERNAL, 0, "corrupt aggregation state");
                break;
            }
        }
        if (fires && !st[a->n_group + 1].u.i && st[a->n_group].u.i > 0) {
            state_output(a, st, out);
            if ((rcode = emit_row(a, OP_INSERT, out)))
                break;
            st[a->n_group + 1].u.i = 1;
            if (!expires && (rcode = state_store(a, key.data, key.len, st)))
                break;
        }
        if (expires && (rcode = stor_table_delete(a->op.table, key.data, key.len, rc->err)))
            break;
    }
    if (got < 0)
        rcode = -1;
    stor_iter_close(it);
    buf_free(&key);
    buf_free(&val);
    /* Windows past wm were not read: they end after it. */
    if (!rcode)
        a->min_end = wm != TS_PLUS_INF && min_left > wm ? wm + 1 : min_left;
    if (!rcode)
        rcode = wins_expire(a, wm == TS_PLUS_INF ? INT64_MAX : wm - n->lateness_us);
    return rcode;
}

/* ---- session windows ----
 * State key: the group values other than the session bounds (memcomparable),
 * then the session start (8 bytes, order-preserving). The state row holds
 * the session's real bounds in the window_start/window_end group slots. A row
 * opens [ts, ts + gap); every stored session of its key that overlaps or
 * touches it (rt_session_joins) is merged into it (their rows retracted, the
 * merged row emitted). The row is late when the merged session is. Sessions
 * fire when the watermark passes their end and go at end + lateness. */

static void session_prefix(AggOp *a, const Value *group, Buf *out)
{
    const PlanNode *n = a->op.node;
    Value kv[WEIR_MAX_AGG_VALUES];
    int nk = 0;
    for (int i = 0; i < a->n_group; i++)
        if (i != n->session_start_idx && i != n->session_end_idx)
            kv[nk++] = group[i];
    buf_reset(out);
    key_encode(out, kv, nk);
    buf_put_u8(out, 0x01); /* never empty, and keys stay prefix-free */
}

/* A session's bounds, from its state row (the planner makes both grouped). */
static int64_t session_bound(const AggOp *a, const Value *st, bool end)
{
    const PlanNode *n = a->op.node;
    return st[end ? n->session_end_idx : n->session_start_idx].u.i;
}

/* count(DISTINCT) over sessions: a session's multisets are keyed by its
 * state key (ms_key with the session key as the group key), so they sort
 * right after it. Merging moves an old session's entries under the merged
 * session's key, adding counts (session_ms_move); then each distinct count
 * is the number of values under the new key (session_ms_recount). */
static int session_ms_move(AggOp *a, const unsigned char *okey, size_t oklen, const Buf *nkey)
{
    RtCtx *rc = a->op.rc;
    if (oklen == nkey->len && memcmp(okey, nkey->data, oklen) == 0)
        return 0;
    Buf pfx = BUF_INIT, moved = BUF_INIT, nk = BUF_INIT;
    buf_append(&pfx, okey, oklen);
    buf_put_u8(&pfx, 0xfd);
    StorIter *it;
    if (stor_iter_open(a->op.table, pfx.data, pfx.len, &it, rc->err)) {
        buf_free(&pfx);
        return -1;
    }
    const void *k, *v;
    size_t kl, vl;
    int got, rcode = 0;
    while ((got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
        buf_put_u32be(&moved, (uint32_t)kl);
        buf_append(&moved, k, kl);
        buf_put_u32be(&moved, (uint32_t)vl);
        buf_append(&moved, v, vl);
    }
    stor_iter_close(it);
    if (got < 0)
        rcode = -1;
    const unsigned char *p = (const unsigned char *)moved.data, *pe = p + moved.len;
    while (!rcode && p < pe) {
        uint32_t l1 = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        const unsigned char *kk = p + 4, *q = kk + l1;
        uint32_t l2 = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
        const unsigned char *vv = q + 4;
        p = vv + l2;
        if (l2 < 9)
            continue;
        buf_reset(&nk);
        buf_append(&nk, nkey->data, nkey->len);
        buf_append(&nk, kk + oklen, l1 - oklen);
        const void *cur;
        size_t cl;
        int f = stor_table_get(a->op.table, nk.data, nk.len, &cur, &cl, rc->err);
        if (f < 0) {
            rcode = -1;
            break;
        }
        unsigned char nv[10];
        memcpy(nv, vv, l2 < 10 ? l2 : 10);
        int64_t count = (int64_t)get_be64(vv + 1);
        if (f == 1 && cl >= 9) {
            count += (int64_t)get_be64((const unsigned char *)cur + 1);
            if (cl == 10 && l2 == 10)
                nv[9] = ((const unsigned char *)cur)[9]; /* the scale of the first copy */
        }
        put_be64(nv + 1, (uint64_t)count);
        rcode = stor_table_put(a->op.table, nk.data, nk.len, nv, l2 < 10 ? l2 : 10, rc->err);
        if (!rcode)
            rcode = stor_table_delete(a->op.table, kk, l1, rc->err);
    }
    buf_free(&pfx);
    buf_free(&moved);
    buf_free(&nk);
    return rcode;
}

static int session_ms_recount(AggOp *a, const Buf *nkey, Value *st)
{
    const PlanNode *n = a->op.node;
    RtCtx *rc = a->op.rc;
    int k = a->n_group + 2, rcode = 0;
    Buf pfx = BUF_INIT;
    for (int i = 0; i < n->n_aggs && !rcode; i++) {
        if (n->aggs[i].kind == AGG_COUNT_DISTINCT) {
            buf_reset(&pfx);
            buf_append(&pfx, nkey->data, nkey->len);
            buf_put_u8(&pfx, 0xfd);
            buf_put_u8(&pfx, (uint8_t)i);
            StorIter *it;
            if (stor_iter_open(a->op.table, pfx.data, pfx.len, &it, rc->err)) {
                rcode = -1;
                break;
            }
            const void *kk, *v;
            size_t kl, vl;
            int got;
            int64_t count = 0;
            while ((got = stor_iter_next(it, &kk, &kl, &v, &vl, rc->err)) == 1)
                count++;
            stor_iter_close(it);
            if (got < 0)
                rcode = -1;
            st[k].u.i = count;
        }
        k += plan_agg_slots(&n->aggs[i]);
    }
    buf_free(&pfx);
    return rcode;
}

/* The state key of the session of group prefix pfx starting at start. */
static void session_key(const Buf *pfx, int64_t start, Buf *out)
{
    buf_reset(out);
    buf_append(out, pfx->data, pfx->len);
    unsigned char sb[8];
    put_be64(sb, (uint64_t)start ^ UINT64_C(0x8000000000000000));
    buf_append(out, sb, 8);
}

static int session_push_row(AggOp *a, const Chunk *c, int r, Value *group)
{
    const PlanNode *n = a->op.node;
    RtCtx *rc = a->op.rc;
    int64_t ts = group[n->session_start_idx].u.i; /* the window operator set [ts, ts + gap) */
    int64_t start = ts, end = ts + n->session_gap_us, merged_end = end;
    Value st[WEIR_MAX_AGG_VALUES], o[WEIR_MAX_AGG_VALUES], out[WEIR_MAX_AGG_VALUES];
    Buf prefix = BUF_INIT, okey = BUF_INIT;
    session_prefix(a, group, &prefix);
    /* Collect the sessions the row joins first: merging deletes them. */
    StorIter *it;
    if (stor_iter_open(a->op.table, prefix.data, prefix.len, &it, rc->err)) {
        buf_free(&prefix);
        return -1;
    }
    Buf olds = BUF_INIT; /* length-prefixed keys and values of merged sessions */
    const void *k, *v;
    size_t kl, vl;
    int got, rcode = 0;
    int64_t merged_start = start;
    while ((got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
        if (vl && ((const unsigned char *)v)[0] == 0xfe)
            continue; /* a count(DISTINCT) multiset entry */
        if (row_decode(v, vl, o, a->n_state))
            continue;
        int64_t os = session_bound(a, o, false), oe = session_bound(a, o, true);
        if (rt_session_joins(start, end, os, oe)) {
            buf_put_u32be(&olds, (uint32_t)kl);
            buf_append(&olds, k, kl);
            buf_put_u32be(&olds, (uint32_t)vl);
            buf_append(&olds, v, vl);
            if (oe > merged_end)
                merged_end = oe;
            if (os < merged_start)
                merged_start = os;
        }
    }
    stor_iter_close(it);
    if (got < 0)
        rcode = -1;
    /* Late only when the merged session is (Flink merges, then judges). */
    bool late = !rcode && rt_window_late(merged_end, a->op.wm, n->lateness_us);
    if (late) {
        rc->stats.late_rows++;
        a->op.counters.late_rows++;
    }
    state_init(a, group, st);
    /* The row's distinct values go straight under the merged session's key. */
    session_key(&prefix, merged_start, &okey);
    if (a->session_ms) {
        buf_reset(&a->kbuf);
        buf_append(&a->kbuf, okey.data, okey.len);
    }
    WError serr = {0};
    if (!rcode && !late && state_apply(a, st, c, r, 1, &serr))
        rcode = sum_failed(a, &serr) ? -1 : 1;   /* 1: the row is skipped, not an error */
    if (rcode || late) {
        buf_free(&prefix);
        buf_free(&okey);
        buf_free(&olds);
        return rcode < 0 ? -1 : 0;
    }
    /* Merge, retracting what each old session showed. */
    bool eowc = n->emit == PLAN_EMIT_ON_CLOSE;
    const unsigned char *p = (const unsigned char *)olds.data, *pe = p + olds.len;
    while (!rcode && p < pe) {
        uint32_t l1 = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        const unsigned char *kk = p + 4;
        const unsigned char *q = kk + l1;
        uint32_t l2 = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
        const unsigned char *vv = q + 4;
        p = vv + l2;
        if (row_decode(vv, l2, o, a->n_state))
            continue;
        bool shown = !eowc || o[a->n_group + 1].u.i;
        if (shown) {
            state_output(a, o, out);
            if ((rcode = emit_row(a, OP_DELETE, out)))
                break;
        }
        int64_t os = session_bound(a, o, false), oe = session_bound(a, o, true);
        state_merge(a, st, o, os < start);
        if (os < start)
            start = os;
        if (oe > end)
            end = oe;
        rcode = stor_table_delete(a->op.table, kk, l1, rc->err);
        if (!rcode && a->session_ms)
            rcode = session_ms_move(a, kk, l1, &okey);
    }
    if (!rcode && a->session_ms && olds.len)
        rcode = session_ms_recount(a, &okey, st);
    if (!rcode) {
        st[n->session_start_idx].u.i = start;
        st[n->session_end_idx].u.i = end;
        /* On window close the merged session shows once closed (it may be already, with lateness). */
        bool closed = rt_window_closed(end, a->op.wm);
        st[a->n_group + 1].u.i = eowc ? closed : 0;
        if (!eowc || closed) {
            state_output(a, st, out);
            rcode = emit_row(a, OP_INSERT, out);
        }
    }
    if (!rcode) {
        buf_reset(&a->vbuf);
        row_encode(&a->vbuf, st, a->n_state);
        rcode = stor_table_put(a->op.table, okey.data, okey.len, a->vbuf.data, a->vbuf.len, rc->err);
        if (!rcode && (a->min_end == INT64_MIN || end < a->min_end))
            a->min_end = end;
    }
    buf_free(&prefix);
    buf_free(&okey);
    buf_free(&olds);
    return rcode;
}

/* The watermark reached wm: sessions it passed fire (on close) and go. */
static int session_advance(AggOp *a, int64_t wm)
{
    const PlanNode *n = a->op.node;
    RtCtx *rc = a->op.rc;
    if (wm <= a->op.wm)
        return 0;
    a->op.wm = wm;
    if (a->min_end != INT64_MIN && a->min_end > wm)
        return 0; /* no session ends before the watermark: nothing to do */
    StorIter *it;
    if (stor_iter_open(a->op.table, NULL, 0, &it, rc->err))
        return -1;
    Value st[WEIR_MAX_AGG_VALUES], out[WEIR_MAX_AGG_VALUES];
    Buf dead = BUF_INIT, fire = BUF_INIT;
    const void *k, *v;
    size_t kl, vl;
    int got, rcode = 0;
    int64_t min_left = INT64_MAX;
    bool eowc = n->emit == PLAN_EMIT_ON_CLOSE;
    Buf gone = BUF_INIT; /* the key of the last session that expires: its multisets follow it */
    while ((got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
        if (vl && ((const unsigned char *)v)[0] == 0xfe) {
            if (gone.len && kl > gone.len && memcmp(k, gone.data, gone.len) == 0) {
                buf_put_u32be(&dead, (uint32_t)kl);
                buf_append(&dead, k, kl);
            }
            continue;
        }
        buf_reset(&gone);
        if (row_decode(v, vl, st, a->n_state))
            continue;
        int64_t end = session_bound(a, st, true);
        bool closes = end <= wm, expires = end <= wm - n->lateness_us || wm == TS_PLUS_INF;
        if (expires)
            buf_append(&gone, k, kl);
        if (eowc && closes && !st[a->n_group + 1].u.i) {
            state_output(a, st, out);
            if ((rcode = emit_row(a, OP_INSERT, out)))
                break;
            if (!expires) {
                st[a->n_group + 1].u.i = 1;
                buf_put_u32be(&fire, (uint32_t)kl);
                buf_append(&fire, k, kl);
                Buf enc = BUF_INIT;
                row_encode(&enc, st, a->n_state);
                buf_put_u32be(&fire, (uint32_t)enc.len);
                buf_append(&fire, enc.data, enc.len);
                buf_free(&enc);
            }
        }
        if (expires) {
            buf_put_u32be(&dead, (uint32_t)kl);
            buf_append(&dead, k, kl);
        } else if (end < min_left) {
            min_left = end;
        }
    }
    stor_iter_close(it);
    if (got < 0)
        rcode = -1;
    const unsigned char *p = (const unsigned char *)fire.data, *pe = p + fire.len;
    while (!rcode && p < pe) {
        uint32_t l1 = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        const unsigned char *kk = p + 4, *q = kk + l1;
        uint32_t l2 = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
        rcode = stor_table_put(a->op.table, kk, l1, q + 4, l2, rc->err);
        p = q + 4 + l2;
    }
    p = (const unsigned char *)dead.data;
    pe = p + dead.len;
    while (!rcode && p < pe) {
        uint32_t l = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        rcode = stor_table_delete(a->op.table, p + 4, l, rc->err);
        p += 4 + l;
    }
    if (!rcode)
        a->min_end = min_left;
    buf_free(&gone);
    buf_free(&dead);
    buf_free(&fire);
    return rcode;
}

static int session_push(AggOp *a, Chunk *c)
{
    const PlanNode *n = a->op.node;
    Value group[WEIR_MAX_AGG_VALUES];
    for (int r = 0; r < c->n_rows; r++) {
        int64_t row_wm = c->wm ? c->wm[r] : a->op.wm;
        if (row_wm > a->op.wm && session_advance(a, row_wm))
            return -1;
        for (int i = 0; i < a->n_group; i++)
            chunk_get(c, n->group_cols[i], r, &group[i]);
        if (group[n->session_start_idx].null)
            continue;
        if (session_push_row(a, c, r, group))
            return -1;
    }
    return emit_pending(a);
}

/* ---- panes (see the file comment) ---- */

static int64_t floor_to(int64_t x, int64_t unit, int64_t offset)
{
    int64_t d = x - offset, q = d / unit;
    if (d % unit != 0 && d < 0)
        q--;
    return q * unit + offset;
}

/* The first window start at or after x. */
static int64_t start_ceil(const AggOp *a, int64_t x)
{
    const PlanNode *n = a->op.node;
    int64_t f = floor_to(x, n->win_slide_us, n->win_offset_us);
    return f < x ? f + n->win_slide_us : f;
}

/* The end of the last window that covers the pane ending at pe. */
static int64_t pane_last_window_end(const AggOp *a, int64_t pe)
{
    const PlanNode *n = a->op.node;
    return floor_to(pe - n->pane_us, n->win_slide_us, n->win_offset_us) + n->win_size_us;
}

static int pane_meta_save(AggOp *a)
{
    Buf b = BUF_INIT;
    unsigned char v[8];
    put_be64(v, (uint64_t)a->fired_upto);
    buf_append(&b, v, 8);
    ends_encode(&a->pane_set, &b);
    int rc = stor_table_put(a->op.table, PANE_META, sizeof PANE_META, b.data, b.len, a->op.rc->err);
    buf_free(&b);
    return rc;
}

static int pane_meta_load(AggOp *a)
{
    const void *v;
    size_t vl;
    a->fired_upto = TS_MINUS_INF;
    int f = stor_table_get(a->op.table, PANE_META, sizeof PANE_META, &v, &vl, a->op.rc->err);
    if (f <= 0)
        return f;
    if (vl < 8 || vl % 8)
        return werr(a->op.rc->err, SQLSTATE_INTERNAL, 0, "corrupt pane list of an aggregation");
    a->fired_upto = (int64_t)get_be64(v);
    ends_decode(&a->pane_set, (const unsigned char *)v + 8, vl - 8);
    return 0;
}

/* Adds pane end pe to the live list. */
static int pane_note(AggOp *a, int64_t pe) { return ends_add(&a->pane_set, pe) ? pane_meta_save(a) : 0; }

static bool pane_live(const AggOp *a, int64_t pe) { return ends_has(&a->pane_set, pe); }

/* Sets the window columns of group values g to [ws, we). */
static void set_bounds(const AggOp *a, Value *g, int64_t ws, int64_t we)
{
    const PlanNode *n = a->op.node;
    if (n->pane_start_idx >= 0)
        g[n->pane_start_idx].u.i = ws;
    if (n->pane_end_idx >= 0)
        g[n->pane_end_idx].u.i = we;
}

/* The state key of group g (with pane bounds) in the pane ending at pe. */
static void pane_key(AggOp *a, int64_t pe, const Value *g)
{
    Value kv[WEIR_MAX_AGG_VALUES + 1];
    kv[0] = value_int(TYPE_TIMESTAMP, pe);
    for (int i = 0; i < a->n_group; i++)
        kv[i + 1] = g[i];
    make_key(a, kv, a->n_group + 1);
}

/* Copies the strings of vals into the chunk arena (loads reuse a->tmp). */
static void own_strings(AggOp *a, Value *vals, int n)
{
    for (int i = 0; i < n; i++)
        if (!vals[i].null && type_phys(vals[i].type) == PHYS_STR)
            vals[i].u.s.p = arena_strndup(a->op.rc->chunk_arena, vals[i].u.s.p, vals[i].u.s.len);
}

/* The state of window [ws, ws + size) for group g (any bounds): its panes
 * merged into acc (group values with the window's bounds). Returns 1 if
 * the window has rows of the group, 0 if not, -1 on error. */
static int window_state(AggOp *a, int64_t ws, const Value *g, Value *acc)
{
    const PlanNode *n = a->op.node;
    Value pg[WEIR_MAX_AGG_VALUES], st[WEIR_MAX_AGG_VALUES];
    memcpy(pg, g, sizeof(Value) * (size_t)a->n_group);
    state_init(a, g, acc);
    set_bounds(a, acc, ws, ws + n->win_size_us);
    for (int64_t pe = ws + n->pane_us; pe <= ws + n->win_size_us; pe += n->pane_us) {
        if (!pane_live(a, pe))
            continue;
        set_bounds(a, pg, pe - n->pane_us, pe);
        pane_key(a, pe, pg);
        int f = state_load(a, a->kbuf.data, a->kbuf.len, st);
        if (f < 0)
            return -1;
        if (f == 0)
            continue;
        state_merge(a, acc, st, false);
        own_strings(a, acc, a->n_state);
    }
    return acc[a->n_group].u.i > 0;
}

/* Opens a scan of every group state of the pane ending at pe (pfx: a
 * scratch buffer for the key prefix; the scan keeps its own copy). */
static int pane_scan(AggOp *a, int64_t pe, Buf *pfx, StorIter **it)
{
    Value pv = value_int(TYPE_TIMESTAMP, pe);
    buf_reset(pfx);
    key_encode(pfx, &pv, 1);
    return stor_iter_open(a->op.table, pfx->data, pfx->len, it, a->op.rc->err);
}

/* Emits window [ws, ws + size): every group of its panes, merged. */
static int fire_window(AggOp *a, int64_t ws)
{
    const PlanNode *n = a->op.node;
    RtCtx *rc = a->op.rc;
    int64_t we = ws + n->win_size_us;
    Arena *arena = arena_new(0);
    ByteMap m;
    bytemap_init(&m, arena);
    Value st[WEIR_MAX_AGG_VALUES], out[WEIR_MAX_AGG_VALUES];
    Buf pfx = BUF_INIT, gk = BUF_INIT;
    int rcode = 0;
    for (int64_t pe = ws + n->pane_us; pe <= we && !rcode; pe += n->pane_us) {
        if (!pane_live(a, pe))
            continue;
        StorIter *it;
        if (pane_scan(a, pe, &pfx, &it)) {
            rcode = -1;
            break;
        }
        const void *k, *v;
        size_t kl, vl;
        int got;
        while ((got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
            buf_reset(&a->tmp);
            buf_append(&a->tmp, v, vl);
            if (row_decode(a->tmp.data, a->tmp.len, st, a->n_state)) {
                rcode = werr(rc->err, SQLSTATE_INTERNAL, 0, "corrupt aggregation state");
                break;
            }
            set_bounds(a, st, ws, we);
            buf_reset(&gk);
            key_encode(&gk, st, a->n_group);
            int created;
            ByteMapEntry *e = bytemap_get(&m, gk.data, gk.len, 1, &created);
            /* Each group's merged state stays decoded in the map's arena. */
            Value *macc = e->ptr;
            if (created) {
                macc = e->ptr = arena_alloc(arena, sizeof(Value) * (size_t)a->n_state);
                memcpy(macc, st, sizeof(Value) * (size_t)a->n_state);
            } else {
                state_merge(a, macc, st, false);
            }
            for (int i = 0; i < a->n_state; i++) /* strings of st live in a->tmp: copy */
                if (!macc[i].null && type_phys(macc[i].type) == PHYS_STR &&
                    macc[i].u.s.p >= a->tmp.data && macc[i].u.s.p < a->tmp.data + a->tmp.len)
                    macc[i].u.s.p = arena_strndup(arena, macc[i].u.s.p, macc[i].u.s.len);
        }
        if (got < 0)
            rcode = -1;
        stor_iter_close(it);
    }
    for (int i = 0; i < m.n && !rcode; i++) {
        const Value *acc = m.entries[i].ptr;
        if (acc[a->n_group].u.i <= 0)
            continue;
        state_output(a, acc, out);
        own_strings(a, out, a->n_out); /* the map's arena goes below; the chunk keeps the row */
        rcode = emit_row(a, OP_INSERT, out);
    }
    buf_free(&pfx);
    buf_free(&gk);
    arena_free(arena);
    return rcode;
}

/* Deletes the panes whose every window is emitted and past its lateness. */
static int expire_panes(AggOp *a, int64_t wm)
{
    const PlanNode *n = a->op.node;
    RtCtx *rc = a->op.rc;
    int gone = 0;
    Buf pfx = BUF_INIT;
    Buf *keys = NULL;
    size_t n_keys = 0, cap_keys = 0;
    int rcode = 0;
    while (gone < a->pane_set.n && !rcode) {
        int64_t pe = a->pane_set.v[gone];
        int64_t last = pane_last_window_end(a, pe);
        if (last > a->fired_upto || (wm != TS_PLUS_INF && last > wm - n->lateness_us))
            break;
        StorIter *it;
        if (pane_scan(a, pe, &pfx, &it)) {
            rcode = -1;
            break;
        }
        const void *k, *v;
        size_t kl, vl;
        int got;
        n_keys = 0;
        while ((got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
            if (n_keys == cap_keys) {
                cap_keys = cap_keys ? cap_keys * 2 : 256;
                keys = xrealloc(keys, sizeof(Buf) * cap_keys);
                for (size_t j = n_keys; j < cap_keys; j++)
                    keys[j] = (Buf)BUF_INIT;
            }
            buf_reset(&keys[n_keys]);
            buf_append(&keys[n_keys++], k, kl);
        }
        stor_iter_close(it);
        if (got < 0) {
            rcode = -1;
            break;
        }
        /* Deleted after the scan: the iterator must not see the table change under it. */
        for (size_t j = 0; j < n_keys && !rcode; j++)
            rcode = stor_table_delete(a->op.table, keys[j].data, keys[j].len, rc->err);
        gone++;
    }
    for (size_t j = 0; j < cap_keys; j++)
        buf_free(&keys[j]);
    free(keys);
    buf_free(&pfx);
    if (gone) {
        ends_drop(&a->pane_set, gone);
        if (!rcode)
            rcode = pane_meta_save(a);
    }
    return rcode;
}

/* The watermark reached wm: emit every window that ended by then, in order,
 * and forget panes no window needs. */
static int pane_advance(AggOp *a, int64_t wm)
{
    const PlanNode *n = a->op.node;
    if (wm <= a->op.wm)
        return 0;
    a->op.wm = wm;
    bool fired = false;
    for (;;) {
        /* The earliest window not yet emitted that covers a live pane. */
        int j = 0;
        while (j < a->pane_set.n && pane_last_window_end(a, a->pane_set.v[j]) <= a->fired_upto)
            j++;
        if (j == a->pane_set.n)
            break;
        int64_t ws = start_ceil(a, a->pane_set.v[j] - n->win_size_us);
        if (a->fired_upto != TS_MINUS_INF && ws < a->fired_upto - n->win_size_us + n->win_slide_us)
            ws = a->fired_upto - n->win_size_us + n->win_slide_us;
        if (wm != TS_PLUS_INF && ws + n->win_size_us > wm)
            break;
        if (fire_window(a, ws))
            return -1;
        a->fired_upto = ws + n->win_size_us;
        fired = true;
    }
    /* The windows that ended by wm with no row closed too, empty. Count them
     * as emitted: a pane they share with a later window may get a row
     * (late for them, on time for the later one), which must not make them
     * appear afterwards with only that row (as the per-window path never
     * would). */
    if (wm != TS_PLUS_INF && wm > TS_MINUS_INF + n->win_size_us) {
        int64_t last = floor_to(wm - n->win_size_us, n->win_slide_us, n->win_offset_us) + n->win_size_us;
        if (a->fired_upto == TS_MINUS_INF || last > a->fired_upto) {
            a->fired_upto = last;
            fired = true;
        }
    }
    if (expire_panes(a, wm))
        return -1;
    return fired ? pane_meta_save(a) : 0;
}

static int pane_push(AggOp *a, Chunk *c)
{
    RtOp *op = &a->op;
    const PlanNode *n = op->node;
    Value group[WEIR_MAX_AGG_VALUES], st[WEIR_MAX_AGG_VALUES], now[WEIR_MAX_AGG_VALUES], out[WEIR_MAX_AGG_VALUES];
    int per_pane = (int)(n->win_size_us / n->win_slide_us) + 1; /* windows covering one pane, at most */
    if (n->lateness_us > 0 && !a->upd_before) {
        a->upd_before = xmalloc(sizeof(Value) * (size_t)a->n_state * (size_t)per_pane);
        a->upd_ws = xmalloc(sizeof(int64_t) * (size_t)per_pane);
    }
    for (int r = 0; r < c->n_rows; r++) {
        for (int i = 0; i < a->n_group; i++)
            chunk_get(c, n->group_cols[i], r, &group[i]);
        const Value *b = &group[n->pane_end_idx >= 0 ? n->pane_end_idx : n->pane_start_idx];
        if (b->null)
            continue;
        int64_t pe = n->pane_end_idx >= 0 ? b->u.i : b->u.i + n->pane_us;
        int64_t row_wm = c->wm ? c->wm[r] : op->wm;
        if (row_wm > op->wm && (pane_advance(a, row_wm) || emit_pending(a)))
            return -1;
        /* Windows of this pane already emitted and still within their lateness
         * get an update (the window operator dropped rows late for all). */
        int n_upd = 0;
        if (n->lateness_us > 0 && a->fired_upto != TS_MINUS_INF) {
            for (int64_t ws = start_ceil(a, pe - n->win_size_us); ws <= pe - n->pane_us && n_upd < per_pane;
                 ws += n->win_slide_us) {
                int64_t we = ws + n->win_size_us;
                if (we > a->fired_upto || (rt_window_late(we, op->wm, n->lateness_us)))
                    continue;
                if (window_state(a, ws, group, &a->upd_before[(size_t)n_upd * (size_t)a->n_state]) < 0)
                    return -1;
                a->upd_ws[n_upd++] = ws;
            }
        }
        pane_key(a, pe, group);
        int f = state_load(a, a->kbuf.data, a->kbuf.len, st);
        if (f < 0)
            return -1;
        if (f == 0)
            state_init(a, group, st);
        WError serr = {0};
        if (state_apply(a, st, c, r, rowop_is_add(c->ops[r]) ? 1 : -1, &serr)) {
            if (sum_failed(a, &serr))
                return -1;
            continue;
        }
        if (state_store(a, a->kbuf.data, a->kbuf.len, st) || pane_note(a, pe))
            return -1;
        for (int u = 0; u < n_upd; u++) {
            const Value *before = &a->upd_before[(size_t)u * (size_t)a->n_state];
            if (window_state(a, a->upd_ws[u], group, now) < 0)
                return -1;
            state_output(a, now, out);
            if (before[a->n_group].u.i > 0) {
                Value old[WEIR_MAX_AGG_VALUES];
                state_output(a, before, old);
                if (emit_row(a, OP_UPDATE_BEFORE, old) || emit_row(a, OP_UPDATE_AFTER, out))
                    return -1;
            } else if (emit_row(a, OP_INSERT, out)) {
                return -1;
            }
        }
    }
    return emit_pending(a);
}

static int agg_push(RtOp *op, Chunk *c)
{
    if (((AggOp *)op)->session)
        return session_push((AggOp *)op, c);
    if (((AggOp *)op)->panes)
        return pane_push((AggOp *)op, c);
    AggOp *a = (AggOp *)op;
    const PlanNode *n = op->node;
    RtCtx *rc = op->rc;
    Value group[WEIR_MAX_AGG_VALUES], kv[WEIR_MAX_AGG_VALUES + 1], st[WEIR_MAX_AGG_VALUES], out[WEIR_MAX_AGG_VALUES];
    int64_t now = a->has_ttl ? rt_proc_now_us() : 0;
    for (int r = 0; r < c->n_rows; r++) {
        for (int i = 0; i < a->n_group; i++)
            chunk_get(c, n->group_cols[i], r, &group[i]);
        int nk = 0;
        if (a->windowed) {
            const Value *gv = &group[n->win_group_idx];
            if (gv->null)
                continue;
            int64_t end = gv->u.i + n->win_end_offset_us;
            int64_t row_wm = c->wm ? c->wm[r] : op->wm;
            if (row_wm > op->wm) {
                /* The watermark moved between rows: settle pending changes first. */
                if (flush_changes(a) || advance(a, row_wm))
                    return -1;
            }
            if (rt_window_late(end, op->wm, n->lateness_us)) {
                rc->stats.late_rows++;
                op->counters.late_rows++;
                continue;
            }
            kv[nk++] = value_int(TYPE_TIMESTAMP, end);
        }
        for (int i = 0; i < a->n_group; i++)
            kv[nk++] = group[i];
        make_key(a, kv, nk);
        if (n->key_groups && rt_kg_check(op, weir_kg_get(a->kbuf.data)))
            return -1;
        int created;
        ByteMapEntry *e = bytemap_get(&a->touched, a->kbuf.data, a->kbuf.len, 1, &created);
        /* Once per group and chunk (now is the chunk's): before its state is read. */
        if (a->has_ttl && created && rt_ttl_touch(&a->ttl, a->kbuf.data, a->kbuf.len, now, true, rc->err))
            return -1;
        int f = pending_load(a, e, st);
        if (f < 0)
            return -1;
        if (created && f == 1 && (a->global || st[a->n_group].u.i > 0)) {
            /* Remember the output before this chunk changed it. */
            state_output(a, st, out);
            buf_reset(&a->vbuf);
            row_encode(&a->vbuf, out, a->n_out);
            e->val = arena_strndup(a->touch_arena, a->vbuf.data, a->vbuf.len);
            e->vlen = a->vbuf.len;
        }
        if (f == 0) {
            state_init(a, group, st);
            if (a->windowed && a->min_end != INT64_MIN && kv[0].u.i < a->min_end)
                a->min_end = kv[0].u.i; /* a window ending before every stored one */
            if (a->windowed && wins_note(a, kv[0].u.i))
                return -1;
        }
        int sign = rowop_is_add(c->ops[r]) ? 1 : -1;
        WError serr = {0};
        if (state_apply(a, st, c, r, sign, &serr)) {
            if (sum_failed(a, &serr))
                return -1;
            continue;
        }
        if (a->global || st[a->n_group].u.i > 0)
            pending_set(a, e, st); /* written at the flush */
        else
            e->flag = PEND_DEL;
    }
    if (flush_changes(a))
        return -1;
    return emit_pending(a);
}

static int agg_watermark(RtOp *op, int64_t wm)
{
    AggOp *a = (AggOp *)op;
    /* The local phase of a two-phase aggregation (planner/plan_dist.c) sits
     * between a split watermark operator and an exchange: an idle instance's
     * RT_WM_IDLE is no event time (taken as one, it would close and forget
     * every window and drop the rows that follow as late), so it passes on
     * untouched; the real watermark after it goes on even when not ahead, so
     * the exchange counts this instance again (as op_window.c does). */
    if (wm == RT_WM_IDLE) {
        a->idle_out = true;
        return emit_pending(a) ? -1 : rt_emit_watermark(op, wm);
    }
    if (a->idle_out) {
        a->idle_out = false;
        if (wm <= op->wm)
            return rt_emit_watermark(op, op->wm);
    }
    if (wm <= op->wm)
        return 0;
    if (a->session) {
        if (session_advance(a, wm) || emit_pending(a))
            return -1;
        return rt_emit_watermark(op, wm);
    }
    if (a->panes) {
        if (pane_advance(a, wm) || emit_pending(a))
            return -1;
        return rt_emit_watermark(op, wm);
    }
    if (flush_changes(a) || advance(a, wm) || emit_pending(a))
        return -1;
    /* Downstream sees the watermark on the window column once windows up to it are final. */
    return rt_emit_watermark(op, wm);
}

/* state_ttl: deletes a group's state and its multiset entries. */
static int expire_group(void *arg, const void *key, size_t klen, WError *err)
{
    AggOp *a = arg;
    if (stor_table_delete(a->op.table, key, klen, err))
        return -1;
    Buf prefix = BUF_INIT;
    buf_append(&prefix, key, klen);
    buf_put_u8(&prefix, 0xfd);
    int rc = rt_ttl_drop_prefix(a->op.table, prefix.data, prefix.len, &a->dbuf, err);
    buf_free(&prefix);
    return rc;
}

/* Before a checkpoint: drops the groups past their TTL, so it deletes them from LMDB. */
static int agg_flush_state(RtOp *op, uint64_t epoch)
{
    AggOp *a = (AggOp *)op;
    (void)epoch;
    return a->has_ttl ? rt_ttl_sweep(&a->ttl, rt_proc_now_us(), op->rc->err) : 0;
}

static int agg_expiry_due(RtOp *op, int64_t now)
{
    WError err = {0};
    return rt_ttl_due(&((AggOp *)op)->ttl, now, &err);
}

static int agg_finish(RtOp *op)
{
    AggOp *a = (AggOp *)op;
    return flush_changes(a) || emit_pending(a) ? -1 : 0;
}

static void agg_close(RtOp *op)
{
    AggOp *a = (AggOp *)op;
    stor_table_close(op->table);
    arena_free(a->touch_arena);
    buf_free(&a->kbuf);
    buf_free(&a->vbuf);
    buf_free(&a->tmp);
    free(a->pane_set.v);
    free(a->upd_before);
    free(a->wins.v);
    free(a->upd_ws);
    rt_ttl_fini(&a->ttl);
    buf_free(&a->dbuf);
    buf_free(&a->cbuf);
    free(a);
}

/* A global aggregation shows its row (count 0, sum NULL...) before any input, as in SQL. */
static int agg_start(RtOp *op)
{
    AggOp *a = (AggOp *)op;
    if (!a->global)
        return 0;
    Value st[WEIR_MAX_AGG_VALUES], out[WEIR_MAX_AGG_VALUES];
    make_key(a, NULL, 0);
    int f = state_load(a, a->kbuf.data, a->kbuf.len, st);
    if (f != 0)
        return f < 0 ? -1 : 0;
    state_init(a, NULL, st);
    if (state_store(a, a->kbuf.data, a->kbuf.len, st))
        return -1;
    state_output(a, st, out);
    if (emit_row(a, OP_INSERT, out))
        return -1;
    return emit_pending(a);
}

/* Windows whose state is held: not yet past end + lateness. */
static int64_t agg_open_windows(RtOp *op)
{
    AggOp *a = (AggOp *)op;
    const PlanNode *n = op->node;
    if (!a->panes)
        return a->wins.n;
    if (!a->pane_set.n)
        return 0;
    int64_t count = 0;
    for (int64_t ws = start_ceil(a, a->pane_set.v[0] - n->win_size_us);
         ws <= a->pane_set.v[a->pane_set.n - 1] - n->pane_us; ws += n->win_slide_us) {
        int64_t we = ws + n->win_size_us;
        if (op->wm != TS_MINUS_INF && (op->wm == TS_PLUS_INF || we <= op->wm - n->lateness_us))
            continue;
        count++;
    }
    return count;
}

static const RtOpVt AGG_VT = {.push = agg_push, .watermark = agg_watermark, .flush_state = agg_flush_state,
                              .finish = agg_finish, .close = agg_close, .start = agg_start};

RtOp *rt_op_agg_new(RtCtx *rc, const PlanNode *n)
{
    AggOp *a = xcalloc(1, sizeof *a);
    a->op.vt = &AGG_VT;
    a->op.node = n;
    a->op.rc = rc;
    a->op.wm = TS_MINUS_INF;
    a->n_group = n->n_group;
    a->n_aggs = n->n_aggs;
    a->n_out = n->n_group + n->n_aggs;
    a->n_state = n->n_group + 2;
    for (int i = 0; i < n->n_aggs; i++)
        a->n_state += plan_agg_slots(&n->aggs[i]);
    a->windowed = n->win_group_idx >= 0;
    a->global = n->n_group == 0;
    a->session = n->session;
    for (int i = 0; i < n->n_aggs && a->session; i++)
        a->session_ms |= n->aggs[i].kind == AGG_COUNT_DISTINCT;
    a->min_end = INT64_MIN;
    if (a->session)
        a->windowed = false;
    a->touch_arena = arena_new(0);
    bytemap_init(&a->touched, a->touch_arena);
    assert(a->n_state <= WEIR_MAX_AGG_VALUES && a->n_out <= WEIR_MAX_AGG_VALUES); /* the planner refused more (check_limits, 54000) */
    if (rt_op_open_table(&a->op, rc->err)) {
        agg_close(&a->op);
        return NULL;
    }
    a->panes = n->pane_us > 0;
    if (a->panes && pane_meta_load(a) < 0) {
        agg_close(&a->op);
        return NULL;
    }
    if (a->windowed && !a->panes && wins_load(a) < 0) {
        agg_close(&a->op);
        return NULL;
    }
    if (a->windowed || a->panes)
        a->op.open_windows = agg_open_windows;
    a->has_ttl = n->state_ttl_us > 0 && !a->windowed && !a->panes && !a->session;
    if (a->has_ttl) {
        rt_ttl_init(&a->ttl, a->op.table, n->state_ttl_us, expire_group, a, &a->op.counters.expired_keys);
        a->op.expiry_due = agg_expiry_due;
    }
    return &a->op;
}
