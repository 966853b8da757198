/*
 * op_watermark.c: event-time watermarks, generated per source partition.
 *
 * For every row the operator evaluates the source's WATERMARK expression
 * (e.g. ts - INTERVAL '2' SECOND); a partition's watermark is the largest
 * value seen in it, and the source's watermark is the minimum over all
 * partitions, never moving backwards. Each row is annotated (chunk->wm)
 * with the watermark in effect *before* it, i.e. implied by the rows that
 * came before it in its partition and by the other partitions at that
 * moment, so downstream operators judge lateness row by row, independent
 * of how records were batched. After the chunk, the new watermark is
 * emitted as a message.
 *
 * State: partition (4 bytes BE) -> max watermark value (8 bytes BE), so a
 * restart resumes with the same watermark and late rows stay late.
 */
#include "runtime_int.h"
#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

typedef struct WmOp {
    RtOp op;
    int n_parts;
    int64_t *part_max;        /* per partition, TS_MINUS_INF before its first row */
    int64_t *last_seen_ms;    /* per partition, monotonic ms of its last row (or of the start) */
    int64_t *max_event;       /* per partition, largest event time seen since start (weir_watermarks) */
    int64_t current;          /* min over partitions, monotone */
    int64_t emitted;          /* last watermark sent downstream */
    bool dirty;
    int64_t idle_ms;          /* idle_timeout: a partition silent this long stops holding the watermark (0 off) */
    bool proctime;            /* the time column is PROCTIME(): ticks move the watermark to the clock */
    int64_t proctime_delay_us;
    int64_t max_future_us;    /* far-future limit ahead of the wall clock (0 off) */
    bool clamp;               /* far_future = 'clamp': count the row's time as the limit instead of rejecting it */
    int time_col;             /* the WATERMARK column */
    int64_t started_ms;       /* monotonic ms at open: idleness of partitions never seen */
    bool idle_sent;           /* a split instance said RT_WM_IDLE; its next row says otherwise */
} WmOp;

static void ensure_parts(WmOp *w, int n)
{
    if (n <= w->n_parts)
        return;
    w->part_max = xrealloc(w->part_max, sizeof(int64_t) * (size_t)n);
    w->last_seen_ms = xrealloc(w->last_seen_ms, sizeof(int64_t) * (size_t)n);
    w->max_event = xrealloc(w->max_event, sizeof(int64_t) * (size_t)n);
    int64_t now = clock_mono_ms();
    for (int p = w->n_parts; p < n; p++) {
        w->part_max[p] = TS_MINUS_INF;
        w->max_event[p] = TS_MINUS_INF;
        w->last_seen_ms[p] = now; /* idle is measured from the start for partitions with no data yet */
    }
    w->n_parts = n;
}

/* The source's watermark: the minimum over its partitions, leaving out
 * partitions idle for longer than idle_timeout; when all are idle, the
 * minimum over those that ever had data. */
static int64_t min_over(const WmOp *w)
{
    int64_t m = TS_PLUS_INF, now = w->idle_ms ? clock_mono_ms() : 0;
    bool any = false;
    for (int p = 0; p < w->n_parts; p++) {
        if (w->idle_ms && now - w->last_seen_ms[p] > w->idle_ms)
            continue;
        any = true;
        if (w->part_max[p] < m)
            m = w->part_max[p];
    }
    if (!any) {
        /* Everything is idle: partitions that never had data do not hold the
         * watermark; the others (all quiet) still do. */
        for (int p = 0; p < w->n_parts; p++)
            if (w->part_max[p] != TS_MINUS_INF && w->part_max[p] < m)
                m = w->part_max[p];
        if (m == TS_PLUS_INF)
            m = TS_MINUS_INF;
    }
    return w->n_parts ? m : TS_MINUS_INF;
}

/* The source whose rows this watermark reads: below it directly, or below
 * the projection that computes a source's computed columns. NULL for a
 * table or a view. */
static const CatRelation *wm_source(const PlanNode *n)
{
    const PlanNode *in = n->inputs[0];
    if (in->kind == PN_PROJECT && in->inputs[0]->kind == PN_SOURCE)
        in = in->inputs[0];
    return in->kind == PN_SOURCE ? in->source : NULL;
}

static int wm_push(RtOp *op, Chunk *c)
{
    WmOp *w = (WmOp *)op;
    const PlanNode *n = op->node;
    if (w->idle_sent) {
        /* Data again: the exchanges count this instance's watermark again. */
        w->idle_sent = false;
        if (rt_emit_watermark(op, w->emitted))
            return -1;
    }
    int part = c->src_partition >= 0 ? c->src_partition : 0;
    ensure_parts(w, c->src_n_partitions > part ? c->src_n_partitions : part + 1);
    Column wc;
    if (rt_eval(op->rc, n->wm_expr, c, &wc, NULL))
        return -1;
    /* The annotations go to an array of this chunk's own: one that came
     * with it may be read by another reader of a shared input (plan_share.c). */
    c->wm = NULL;
    chunk_enable_wm(c);
    w->last_seen_ms[part] = clock_mono_ms();
    int64_t limit = w->max_future_us ? clock_wall_us() + w->max_future_us : TS_PLUS_INF;
    uint8_t *keep = NULL;
    for (int r = 0; r < c->n_rows; r++) {
        c->wm[r] = w->current;
        const Column *tc = &c->cols[w->time_col];
        if (!tc->nulls[r] && tc->v.i[r] > limit && !w->clamp) {
            /* One wild clock must not close every window: the row is rejected. */
            if (!keep) {
                keep = arena_alloc(c->arena, (size_t)c->n_rows);
                memset(keep, 1, (size_t)c->n_rows);
            }
            keep[r] = 0;
            Value tv = value_int(TYPE_TIMESTAMP, tc->v.i[r]);
            Buf b = BUF_INIT;
            value_to_text(&tv, &b);
            const CatRelation *src = wm_source(n);
            int fail = rt_source_error(op, src, part, c->src_offsets ? c->src_offsets[r] : -1, NULL, 0,
                                       "partition %d: event time %s is more than max_future ahead of the clock", part,
                                       b.data ? b.data : "");
            buf_free(&b);
            if (fail)
                return -1; /* on_error = 'fail' */
            continue;
        }
        if (!tc->nulls[r] && tc->v.i[r] > w->max_event[part])
            w->max_event[part] = tc->v.i[r];
        if (wc.nulls[r])
            continue;
        int64_t v = wc.v.i[r];
        if (v > limit)
            v = limit; /* far_future = 'clamp' */
        if (v > w->part_max[part]) {
            w->part_max[part] = v;
            w->dirty = true;
            /* Processing time is one clock for every partition. */
            int64_t m = w->proctime ? v : min_over(w);
            if (m > w->current)
                w->current = m;
        }
    }
    if (keep)
        rt_chunk_select(c, keep);
    if (c->n_rows && rt_emit(op, c))
        return -1;
    if (w->current > op->rc->stats.watermark)
        op->rc->stats.watermark = w->current;
    if (w->current > w->emitted) {
        w->emitted = w->current;
        return rt_emit_watermark(op, w->current);
    }
    return 0;
}

/* Sources send +infinity when a bounded input ends, and otherwise a tick
 * when they have no data: partitions may have gone idle meanwhile, which
 * lets the watermark move without a new row. */
static int wm_watermark(RtOp *op, int64_t wm)
{
    WmOp *w = (WmOp *)op;
    if (w->emitted == TS_PLUS_INF)
        return 0;
    if (wm == TS_PLUS_INF) {
        w->current = w->emitted = TS_PLUS_INF;
        op->rc->stats.watermark = TS_PLUS_INF;
        return rt_emit_watermark(op, TS_PLUS_INF);
    }
    if (w->proctime) {
        /* Processing time: the clock moves on while no record arrives, and
         * the windows over it close on time. */
        int64_t m = clock_wall_us() - w->proctime_delay_us;
        if (m > w->current)
            w->current = m;
    } else if (!w->idle_ms) {
        return 0;
    }
    int64_t m = w->proctime ? w->current : min_over(w);
    if (m > w->current)
        w->current = m;
    if (w->current > op->rc->stats.watermark)
        op->rc->stats.watermark = w->current;
    if (w->current > w->emitted) {
        w->emitted = w->current;
        return rt_emit_watermark(op, w->current);
    }
    /* A split instance whose partitions are all idle (or which has seen
     * none for idle_timeout) tells the exchanges not to wait for it, as one
     * instance leaves its idle partitions out of its minimum. */
    if (!w->proctime && !w->idle_sent && rt_op_shards(op) > 1) {
        int64_t now = clock_mono_ms();
        bool all = w->n_parts || now - w->started_ms > w->idle_ms;
        for (int p = 0; p < w->n_parts && all; p++)
            all = now - w->last_seen_ms[p] > w->idle_ms;
        if (all) {
            w->idle_sent = true;
            return rt_emit_watermark(op, RT_WM_IDLE);
        }
    }
    return 0;
}

static int wm_flush_state(RtOp *op, uint64_t epoch)
{
    WmOp *w = (WmOp *)op;
    if (!w->dirty)
        return 0;
    for (int p = 0; p < w->n_parts; p++) {
        unsigned char k[4] = {(unsigned char)(p >> 24), (unsigned char)(p >> 16), (unsigned char)(p >> 8),
                              (unsigned char)p};
        unsigned char v[8];
        put_be64(v, (uint64_t)w->part_max[p]);
        if (stor_table_put(op->table, k, 4, v, 8, op->rc->err))
            return -1;
    }
    w->dirty = false;
    return 0;
}

static int wm_finish(RtOp *op)
{
    /* The end of a bounded input is a watermark of +infinity. */
    return rt_emit_watermark(op, TS_PLUS_INF);
}

static void wm_close(RtOp *op)
{
    WmOp *w = (WmOp *)op;
    stor_table_close(op->table);
    free(w->part_max);
    free(w->last_seen_ms);
    free(w->max_event);
    free(w);
}

static int wm_partitions(RtOp *op, RtPartitionWatermark *out, int max)
{
    WmOp *w = (WmOp *)op;
    const CatRelation *src = wm_source(op->node);
    int64_t now = clock_mono_ms();
    int n = 0;
    for (int p = 0; p < w->n_parts && n < max; p++, n++) {
        RtPartitionWatermark *o = &out[n];
        snprintf(o->source, sizeof o->source, "%s", src ? src->name : "");
        /* A parallel view's instance numbers the partitions it reads among
         * themselves (op_source.c): p there is partition p * n + shard. */
        o->partition = rt_op_shards(op) > 1 ? p * rt_op_shards(op) + op->rc->shard : p;
        o->watermark = w->part_max[p];
        o->max_event_time = w->max_event[p];
        o->source_watermark = w->current;
        o->idle_ms = now - w->last_seen_ms[p];
        o->idle = w->idle_ms && o->idle_ms > w->idle_ms;
    }
    return n;
}

int rt_source_future_policy(const CatRelation *src, int64_t *max_future_us, bool *clamp, WError *err)
{
    const char *fut = src ? cat_option(src, "max_future") : NULL;
    const char *mode = src ? cat_option(src, "far_future") : NULL;
    Interval iv;
    int64_t us;
    *max_future_us = 3600 * USECS_PER_SEC;
    if (fut && !strcasecmp(fut, "off"))
        *max_future_us = 0;
    else if (fut && (parse_interval(fut, strlen(fut), &iv) || interval_to_usecs(&iv, &us) || us <= 0))
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "max_future must be a positive interval or 'off'");
    else if (fut)
        *max_future_us = us;
    if (mode && strcasecmp(mode, "reject") != 0 && strcasecmp(mode, "clamp") != 0)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "far_future must be 'reject' or 'clamp'");
    *clamp = mode && !strcasecmp(mode, "clamp");
    return 0;
}

/* A restored watermark is announced once the dataflow is wired: operators
 * that take the minimum of several inputs (a union, a join, an exchange's
 * receiver) start every input at -infinity, and an input that never
 * advances again after a restart would otherwise hold them there for good.
 * Downstream, windows already closed are gone from the state, so hearing
 * the same watermark again fires only what had not fired yet. */
static int wm_start(RtOp *op)
{
    WmOp *w = (WmOp *)op;
    return w->emitted > TS_MINUS_INF ? rt_emit_watermark(op, w->emitted) : 0;
}

static const RtOpVt WM_VT = {.push = wm_push, .watermark = wm_watermark, .flush_state = wm_flush_state,
                             .finish = wm_finish, .close = wm_close, .start = wm_start};

RtOp *rt_op_watermark_new(RtCtx *rc, const PlanNode *n)
{
    WmOp *w = xcalloc(1, sizeof *w);
    w->op.vt = &WM_VT;
    w->op.node = n;
    w->op.rc = rc;
    w->op.wm = TS_MINUS_INF;
    w->op.partitions = wm_partitions;
    w->current = TS_MINUS_INF;
    w->emitted = TS_MINUS_INF;
    w->time_col = n->wm_col;
    w->started_ms = clock_mono_ms();
    const CatRelation *src = wm_source(n);
    const char *idle = src ? cat_option(src, "idle_timeout") : NULL;
    Interval iv;
    int64_t us;
    if (idle && (parse_interval(idle, strlen(idle), &iv) || interval_to_usecs(&iv, &us) || us < 0)) {
        werr(rc->err, SQLSTATE_INVALID_PARAMETER, 0, "idle_timeout must be an interval such as '5 seconds'");
        wm_close(&w->op);
        return NULL;
    }
    if (idle)
        w->idle_ms = us / 1000;
    if (src && src->proctime_wm && src->wm_delay_us >= 0) {
        w->proctime = true;
        w->proctime_delay_us = src->wm_delay_us;
    }
    if (rt_source_future_policy(src, &w->max_future_us, &w->clamp, rc->err)) {
        wm_close(&w->op);
        return NULL;
    }
    /* A writable table's rows were acknowledged to the user: never drop one,
     * a far-future time only stops moving the watermark at the limit. */
    if (n->inputs[0]->kind == PN_TABLE_WRITE)
        w->clamp = true;
    if (rt_op_open_table(&w->op, rc->err)) {
        wm_close(&w->op);
        return NULL;
    }
    StorIter *it;
    if (stor_iter_open(w->op.table, NULL, 0, &it, rc->err)) {
        wm_close(&w->op);
        return NULL;
    }
    const void *k, *v;
    size_t kl, vl;
    int got;
    while ((got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
        if (kl != 4 || vl != 8)
            continue;
        const unsigned char *kb = k;
        int p = (int)((uint32_t)kb[0] << 24 | (uint32_t)kb[1] << 16 | (uint32_t)kb[2] << 8 | kb[3]);
        if (p < 0 || p > 100000)
            continue;
        ensure_parts(w, p + 1);
        w->part_max[p] = (int64_t)get_be64(v);
    }
    stor_iter_close(it);
    if (got < 0) {
        wm_close(&w->op);
        return NULL;
    }
    w->current = w->emitted = min_over(w);
    if (w->current > rc->stats.watermark)
        rc->stats.watermark = w->current;
    return &w->op;
}
