/*
 * lateness_analyze.c: ANALYZE LATENESS, the simulation behind it.
 *
 * rt_lateness_read_log reads a Kafka source's retained log once (earliest
 * offsets to the end offsets at the time of the call, every partition),
 * keeps each row's event time and partition, and merges the partitions
 * into the order a view is assumed to read them. rt_lateness_simulate then
 * replays that order for each candidate (bound, lateness) pair with the
 * engine's own rules: the watermark of a partition is the max of
 * ts - bound over its rows so far (clamped like op_watermark.c), the
 * source's is the min over partitions and only moves forward, each row is
 * judged against the watermark in effect before it, and windows are
 * assigned, closed and judged late by window_rules.c, the functions the
 * window operator and the window aggregation call. Nothing here touches a
 * running view.
 *
 * Merge order: a view reads its partitions concurrently, so which of two
 * partitions' records comes first depends on fetch timing and cannot be
 * replayed exactly. The simulation takes them in Kafka record timestamp
 * order (the producer's create time or the broker's append time, the best
 * record of when each arrived), ties by partition, and never reorders the
 * rows of one partition (offset order, which is what a view preserves).
 *
 * Memory: 12 bytes per row kept (event time, partition) plus 8 per row
 * while merging (record timestamps); the caller bounds the row count.
 */
#include "runtime_int.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "bytemap.h"
#include "kafka.h"
#include "row.h"
#include "clock.h"
#include "weir_limits.h"

#define READ_BATCH 1024
#define READ_STALL_MS 30000     /* no record and no end of log for this long: give up */

typedef struct PartBuf {
    int64_t n, cap;
    int64_t *ts;
    int64_t *kts;               /* Kafka record timestamps, for the merge */
    int32_t *key;               /* group key ids (PARTITION BY), for sessions */
} PartBuf;

static void pb_push(PartBuf *b, int64_t ts, int64_t kts, int32_t key)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 1024;
        b->ts = xrealloc(b->ts, sizeof(int64_t) * (size_t)b->cap);
        b->kts = xrealloc(b->kts, sizeof(int64_t) * (size_t)b->cap);
        b->key = xrealloc(b->key, sizeof(int32_t) * (size_t)b->cap);
    }
    b->ts[b->n] = ts;
    b->kts[b->n] = kts;
    b->key[b->n] = key;
    b->n++;
}

/* Merges the partitions: smallest record timestamp first, then the lower
 * partition; each partition's rows stay in offset order. */
static void merge_parts(PartBuf *pb, int n_parts, RtLatenessLog *out)
{
    int64_t total = 0;
    for (int p = 0; p < n_parts; p++)
        total += pb[p].n;
    out->n_rows = total;
    out->ts = xmalloc(sizeof(int64_t) * (size_t)(total ? total : 1));
    out->part = xmalloc(sizeof(int32_t) * (size_t)(total ? total : 1));
    out->key = xmalloc(sizeof(int32_t) * (size_t)(total ? total : 1));
    out->part_rows = xcalloc((size_t)n_parts, sizeof(int64_t));
    int64_t *cur = xcalloc((size_t)n_parts, sizeof(int64_t));
    for (int64_t i = 0; i < total; i++) {
        int best = -1;
        for (int p = 0; p < n_parts; p++)
            if (cur[p] < pb[p].n && (best < 0 || pb[p].kts[cur[p]] < pb[best].kts[cur[best]]))
                best = p;
        out->ts[i] = pb[best].ts[cur[best]];
        out->part[i] = best;
        out->key[i] = pb[best].key[cur[best]];
        out->part_rows[best]++;
        cur[best]++;
    }
    free(cur);
}

int rt_lateness_read_log(const RtEnv *env, const CatRelation *src, int n_key_cols, const int *key_cols, int64_t tail,
                         int64_t max_records, bool (*cancel)(void *), void *cancel_arg, RtLatenessLog *out, WError *err)
{
    memset(out, 0, sizeof *out);
    assert(n_key_cols <= WEIR_MAX_KEY_COLUMNS); /* server/analyze.c refused more (54000) */
    RtSkew skew;
    rt_skew_init(&skew, src);
    const char *conn = cat_option(src, "connector");
    if (!conn || strcasecmp(conn, "kafka") != 0)
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0,
                    "feature not supported: ANALYZE LATENESS reads Kafka sources only (\"%s\" uses connector '%s')",
                    src->name, conn ? conn : "");
    if (src->format && strcasecmp(src->format, "plain") != 0)
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0, "feature not supported: ANALYZE LATENESS on FORMAT %s",
                    src->format);
    if (src->wm_col < 0)
        return werr(err, SQLSTATE_WINDOWING_ERROR, 0,
                    "ANALYZE LATENESS needs a source with a WATERMARK (it names the event-time column)");
    int64_t max_future = 0;
    bool clamp = false;
    if (rt_source_future_policy(src, &max_future, &clamp, err))
        return -1;
    int64_t limit = max_future ? clock_wall_us() + max_future : TS_PLUS_INF;
    out->clamp_limit_us = clamp ? limit : TS_PLUS_INF;
    out->idle_timeout = cat_option(src, "idle_timeout") != NULL;

    RtKafkaProp props[WEIR_MAX_KAFKA_PROPERTIES];
    int np = rt_source_kafka_props(src, props, WEIR_MAX_KAFKA_PROPERTIES);
    RtKafkaSource *ks = NULL;
    if (rt_kafka_source_open(rt_source_bootstrap(src, env), cat_option(src, "topic"), 0, props, np, 10000, &ks, err))
        return -1;
    int n_parts = rt_kafka_source_partition_count(ks);
    int rc = -1;
    int64_t *end = xcalloc((size_t)n_parts, sizeof(int64_t));
    int64_t *starts = xcalloc((size_t)n_parts, sizeof(int64_t));
    int32_t *ids = xcalloc((size_t)n_parts, sizeof(int32_t));
    bool *done = xcalloc((size_t)n_parts, sizeof(bool));
    PartBuf *pb = xcalloc((size_t)n_parts, sizeof(PartBuf));
    RtKafkaRecord *recs = xmalloc(sizeof(RtKafkaRecord) * READ_BATCH);
    Arena *arena = arena_new(0);
    /* Group keys get dense ids in order of appearance (0 when there are none). */
    Arena *key_arena = arena_new(0);
    ByteMap keys;
    bytemap_init(&keys, key_arena);
    Buf kb = BUF_INIT;
    out->n_parts = n_parts;
    if (rt_kafka_source_end_offsets(ks, end, 10000, err))
        goto done;
    for (int p = 0; p < n_parts; p++) {
        ids[p] = p;
        /* An offset no longer retained falls back to the earliest (auto.offset.reset). */
        starts[p] = tail > 0 && end[p] - tail > 0 ? end[p] - tail : RT_KAFKA_EARLIEST;
        done[p] = end[p] <= 0;
    }
    if (rt_kafka_source_assign(ks, n_parts, ids, starts, err))
        goto done;
    int64_t last_progress = clock_mono_ms();
    for (;;) {
        bool all = true;
        for (int p = 0; p < n_parts; p++) {
            /* At the log's end (an empty or fully expired partition ends there at once). */
            if (!done[p] && rt_kafka_source_at_end(ks, p))
                done[p] = true;
            all = all && done[p];
        }
        if (all)
            break;
        if (out->records >= max_records) {
            out->truncated = true;
            break;
        }
        if (cancel && cancel(cancel_arg)) {
            werr(err, SQLSTATE_QUERY_CANCELED, 0, "canceling statement due to user request");
            goto done;
        }
        int n = rt_kafka_source_poll(ks, 100, recs, READ_BATCH);
        if (n < 0) {
            werr(err, SQLSTATE_IO_ERROR, 0, "the Kafka consumer failed while reading \"%s\"", src->name);
            goto done;
        }
        if (n == 0) {
            if (clock_mono_ms() - last_progress > READ_STALL_MS) {
                werr(err, SQLSTATE_CONNECTION_FAILURE, 0, "ANALYZE LATENESS: no record from topic \"%s\" for %d s before its end offsets",
                     cat_option(src, "topic"), READ_STALL_MS / 1000);
                goto done;
            }
            continue;
        }
        last_progress = clock_mono_ms();
        arena_reset(arena);
        Chunk *c = chunk_new(arena, src->n_cols, src->col_types, n);
        for (int i = 0; i < n && out->records < max_records; i++) {
            const RtKafkaRecord *r = &recs[i];
            int p = r->partition;
            if (p < 0 || p >= n_parts || done[p] || r->offset >= end[p]) {
                if (p >= 0 && p < n_parts && r->offset + 1 >= end[p])
                    done[p] = true;
                continue;
            }
            if (r->offset + 1 >= end[p])
                done[p] = true;
            out->records++;
            char ebuf[200];
            int row = c->n_rows;
            if (!r->value ||
                rt_json_decode_row(r->value, r->value_len, src->n_cols, (const char *const *)src->col_names, c, row,
                                   ebuf, sizeof ebuf)) {
                out->bad_records++;
                continue;
            }
            bool bad = false;
            for (int k = 0; k < src->n_cols && src->col_not_null && !bad; k++)
                bad = src->col_not_null[k] && c->cols[k].nulls[row];
            if (bad) {
                out->bad_records++;
                continue;
            }
            rt_skew_apply(&skew, c, row, r->timestamp_ms); /* as the source operator does */
            const Column *tc = &c->cols[src->wm_col];
            int64_t ts = tc->nulls[row] ? TS_MINUS_INF : tc->v.i[row];
            if (ts != TS_MINUS_INF && ts > limit && !clamp) {
                out->rejected++; /* op_watermark.c rejects it: no view ever sees it */
                continue;
            }
            int32_t key = 0;
            if (n_key_cols) {
                Value kv[WEIR_MAX_KEY_COLUMNS];
                for (int k = 0; k < n_key_cols; k++)
                    chunk_get(c, key_cols[k], row, &kv[k]);
                buf_reset(&kb);
                key_encode(&kb, kv, n_key_cols);
                int created;
                ByteMapEntry *ke = bytemap_get(&keys, kb.data, kb.len, 1, &created);
                if (created)
                    ke->count = keys.n - 1;
                key = (int32_t)ke->count;
            }
            pb_push(&pb[p], ts, r->timestamp_ms, key);
        }
    }
    merge_parts(pb, n_parts, out);
    rc = 0;
done:
    for (int p = 0; p < n_parts; p++) {
        free(pb[p].ts);
        free(pb[p].kts);
        free(pb[p].key);
    }
    out->n_keys = n_key_cols ? keys.n : 1;
    buf_free(&kb);
    arena_free(key_arena);
    free(pb);
    free(recs);
    free(end);
    free(starts);
    free(ids);
    free(done);
    arena_free(arena);
    rt_kafka_source_close(ks);
    if (rc)
        rt_lateness_log_fini(out);
    return rc;
}

void rt_lateness_log_fini(RtLatenessLog *log)
{
    free(log->ts);
    free(log->part);
    free(log->key);
    free(log->part_rows);
    log->key = NULL;
    log->ts = NULL;
    log->part = NULL;
    log->part_rows = NULL;
    log->n_rows = 0;
}

/* ---- the delay distribution ---------------------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest rank: the smallest d with at least permille/1000 of the n sorted values <= d. */
static int64_t rank(const int64_t *v, int64_t n, int64_t permille)
{
    if (!n)
        return 0;
    int64_t r = (n * permille + 999) / 1000;
    return v[r > 0 ? r - 1 : 0];
}

static void delay_stats(int64_t *d, int64_t n, int32_t part, RtDelayStats *out)
{
    qsort(d, (size_t)n, sizeof *d, cmp_i64);
    out->partition = part;
    out->rows = n;
    out->out_of_order = 0;
    for (int64_t i = 0; i < n; i++)
        out->out_of_order += d[i] > 0;
    out->p50_us = rank(d, n, 500);
    out->p90_us = rank(d, n, 900);
    out->p99_us = rank(d, n, 990);
    out->p999_us = rank(d, n, 999);
    out->max_us = n ? d[n - 1] : 0;
}

static void delays(const RtLatenessLog *log, RtDelayStats *out)
{
    int n_parts = log->n_parts;
    int64_t *seen = xmalloc(sizeof(int64_t) * (size_t)(n_parts ? n_parts : 1));
    int64_t **per = xcalloc((size_t)(n_parts ? n_parts : 1), sizeof(int64_t *));
    int64_t *cnt = xcalloc((size_t)(n_parts ? n_parts : 1), sizeof(int64_t));
    int64_t *all = xmalloc(sizeof(int64_t) * (size_t)(log->n_rows ? log->n_rows : 1));
    int64_t n_all = 0;
    for (int p = 0; p < n_parts; p++) {
        seen[p] = TS_MINUS_INF;
        per[p] = xmalloc(sizeof(int64_t) * (size_t)(log->part_rows[p] ? log->part_rows[p] : 1));
    }
    for (int64_t i = 0; i < log->n_rows; i++) {
        int64_t ts = log->ts[i];
        int p = log->part[i];
        if (ts == TS_MINUS_INF)
            continue;
        int64_t d = seen[p] != TS_MINUS_INF && seen[p] > ts ? seen[p] - ts : 0;
        if (ts > seen[p])
            seen[p] = ts;
        per[p][cnt[p]++] = d;
        all[n_all++] = d;
    }
    delay_stats(all, n_all, -1, &out[0]);
    for (int p = 0; p < n_parts; p++) {
        delay_stats(per[p], cnt[p], p, &out[1 + p]);
        free(per[p]);
    }
    free(all);
    free(per);
    free(cnt);
    free(seen);
}

/* ---- one candidate ------------------------------------------------------------------------------- */

/* A window the log put rows in, keyed by its end (unique for TUMBLE, HOP
 * and CUMULATE of one shape). */
typedef struct Win {
    int64_t end;
    int64_t dropped;
    bool state;                 /* has state (an accepted row), until it expires */
    bool fired;
} Win;

typedef struct WinSet {
    Win *w;
    int64_t n, cap;
    int64_t *slots;             /* open addressing: index + 1, 0 empty */
    int64_t n_slots;
} WinSet;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static Win *win_get(WinSet *s, int64_t end)
{
    if ((s->n + 1) * 2 > s->n_slots) {
        int64_t ns = s->n_slots ? s->n_slots * 2 : 1024;
        int64_t *slots = xcalloc((size_t)ns, sizeof(int64_t));
        for (int64_t i = 0; i < s->n; i++) {
            uint64_t h = mix((uint64_t)s->w[i].end) & (uint64_t)(ns - 1);
            while (slots[h])
                h = (h + 1) & (uint64_t)(ns - 1);
            slots[h] = i + 1;
        }
        free(s->slots);
        s->slots = slots;
        s->n_slots = ns;
    }
    uint64_t h = mix((uint64_t)end) & (uint64_t)(s->n_slots - 1);
    while (s->slots[h]) {
        Win *w = &s->w[s->slots[h] - 1];
        if (w->end == end)
            return w;
        h = (h + 1) & (uint64_t)(s->n_slots - 1);
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->w = xrealloc(s->w, sizeof(Win) * (size_t)s->cap);
    }
    Win *w = &s->w[s->n];
    memset(w, 0, sizeof *w);
    w->end = end;
    s->slots[h] = ++s->n;
    return w;
}

/* A min-heap of window ends, each with an index: the window simulation
 * needs only the end (index 0); the session simulation the session's index
 * too, skipping entries whose session went. */
typedef struct HEnt {
    int64_t end;
    int64_t i;
} HEnt;

typedef struct Heap {
    HEnt *v;
    int64_t n, cap;
} Heap;

static void heap_push(Heap *h, int64_t end, int64_t i)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 1024;
        h->v = xrealloc(h->v, sizeof(HEnt) * (size_t)h->cap);
    }
    int64_t k = h->n++;
    while (k > 0 && h->v[(k - 1) / 2].end > end) {
        h->v[k] = h->v[(k - 1) / 2];
        k = (k - 1) / 2;
    }
    h->v[k] = (HEnt){end, i};
}

static HEnt heap_pop(Heap *h)
{
    HEnt top = h->v[0], x = h->v[--h->n];
    int64_t k = 0;
    for (;;) {
        int64_t c = 2 * k + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->v[c + 1].end < h->v[c].end)
            c++;
        if (h->v[c].end >= x.end)
            break;
        h->v[k] = h->v[c];
        k = c;
    }
    if (h->n)
        h->v[k] = x;
    return top;
}

/* The source's watermark: min over the partitions that hold it (all of
 * them, or with an idle_timeout those that have rows in the log). */
static int64_t min_over(const int64_t *part_max, const bool *holds, int n_parts)
{
    int64_t m = TS_PLUS_INF;
    bool any = false;
    for (int p = 0; p < n_parts; p++) {
        if (!holds[p])
            continue;
        any = true;
        if (part_max[p] < m)
            m = part_max[p];
    }
    return any ? m : TS_MINUS_INF;
}

/* Row i moves its partition's watermark to v (ts - bound, clamped, as
 * op_watermark.c does) and the source's to the minimum over partitions.
 * Returns whether the source's watermark *wm moved. */
static bool move_wm(const RtLatenessLog *log, int64_t i, int64_t v, int64_t *part_max, const bool *holds, int n_parts,
                    int64_t *wm)
{
    int p = log->part[i];
    if (v > log->clamp_limit_us)
        v = log->clamp_limit_us;
    if (v <= part_max[p])
        return false;
    part_max[p] = v;
    int64_t m = min_over(part_max, holds, n_parts);
    if (m <= *wm)
        return false;
    *wm = m;
    return true;
}

static int simulate_one(const RtLatenessLog *log, const RtWindowDef *wd, int64_t bound, int64_t lateness,
                        RtLatenessResult *r, bool (*cancel)(void *), void *cancel_arg)
{
    int rc = 0;
    memset(r, 0, sizeof *r);
    r->bound_us = bound;
    r->lateness_us = lateness;
    int n_parts = log->n_parts;
    int64_t *part_max = xmalloc(sizeof(int64_t) * (size_t)(n_parts ? n_parts : 1));
    bool *holds = xmalloc(sizeof(bool) * (size_t)(n_parts ? n_parts : 1));
    for (int p = 0; p < n_parts; p++) {
        part_max[p] = TS_MINUS_INF;
        holds[p] = !log->idle_timeout || log->part_rows[p] > 0;
    }
    int per_row = wd->kind == WIN_SESSION ? 1 : (int)(wd->size_us / wd->slide_us);
    int64_t *starts = xmalloc(sizeof(int64_t) * (size_t)per_row), *ends = xmalloc(sizeof(int64_t) * (size_t)per_row);
    WinSet ws = {0};
    Heap to_fire = {0}, to_expire = {0};
    int64_t wm = TS_MINUS_INF, max_seen = TS_MINUS_INF, open = 0;
    for (int64_t i = 0; i < log->n_rows; i++) {
        if ((i & 0xFFFFF) == 0xFFFFF && cancel && cancel(cancel_arg)) {
            rc = -1;
            break;
        }
        int64_t ts = log->ts[i];
        if (ts == TS_MINUS_INF)
            continue; /* a NULL time: no window, no watermark */
        int nw = rt_window_assign(wd, ts, starts, ends, per_row);
        for (int k = 0; k < nw; k++) {
            Win *w = win_get(&ws, ends[k]);
            r->pairs++;
            if (rt_window_late(ends[k], wm, lateness)) {
                w->dropped++;
                r->dropped++;
                continue;
            }
            bool closed = rt_window_closed(ends[k], wm);
            if (closed)
                r->late_updates++;
            else
                r->on_time++;
            if (!w->state) {
                w->state = true;
                if (++open > r->max_open)
                    r->max_open = open;
                heap_push(&to_expire, ends[k], 0);
                if (closed)
                    w->fired = true; /* first shown by this update */
                else
                    heap_push(&to_fire, ends[k], 0);
            }
        }
        if (ts > max_seen)
            max_seen = ts;
        if (!move_wm(log, i, ts - bound, part_max, holds, n_parts, &wm))
            continue;
        while (to_fire.n && rt_window_closed(to_fire.v[0].end, wm)) {
            int64_t end = heap_pop(&to_fire).end;
            win_get(&ws, end)->fired = true;
            r->fired++;
            r->wait_sum_us += max_seen - end;
        }
        while (to_expire.n && rt_window_late(to_expire.v[0].end, wm, lateness)) {
            win_get(&ws, heap_pop(&to_expire).end)->state = false;
            open--;
        }
    }
    /* The end of the log is a watermark of +infinity: what is left fires then. */
    r->fired_at_end = to_fire.n;
    r->windows = ws.n;
    for (int64_t i = 0; i < ws.n; i++)
        r->exact_windows += ws.w[i].dropped == 0;
    free(ws.w);
    free(ws.slots);
    free(to_fire.v);
    free(to_expire.v);
    free(starts);
    free(ends);
    free(part_max);
    free(holds);
    return rc;
}

/* ---- one candidate, session windows ---------------------------------------------------------------
 * The session aggregation (op_agg.c session_push_row / session_advance) per
 * group key: a row merges every held session of its key that overlaps or
 * touches [ts, ts + gap) (rt_session_joins) into one, and is late when that
 * merged session is (rt_window_late: only when it joins none and its own
 * session is late); the watermark fires sessions at their end and drops
 * them at end + lateness. */

typedef struct Sess {
    int64_t start, end;
    int32_t key;
    bool held;                  /* in state: not merged away, not expired */
    bool merged;                /* merged into a later session (not a final one) */
    bool fired;
    bool inexact;               /* a dropped row's [ts, ts + gap) overlaps it */
} Sess;

/* The sessions a key holds: indexes into the session array. */
typedef struct KeySess {
    int64_t *i;
    int n, cap;
} KeySess;

static void ks_remove(KeySess *k, int64_t i)
{
    for (int j = 0; j < k->n; j++)
        if (k->i[j] == i) {
            k->i[j] = k->i[--k->n];
            return;
        }
}

static int sess_cmp(const void *a, const void *b)
{
    const Sess *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int simulate_session(const RtLatenessLog *log, int64_t gap, int64_t bound, int64_t lateness,
                            RtLatenessResult *r, bool (*cancel)(void *), void *cancel_arg)
{
    int rc = 0;
    memset(r, 0, sizeof *r);
    r->bound_us = bound;
    r->lateness_us = lateness;
    int n_parts = log->n_parts;
    int64_t n_keys = log->key && log->n_keys > 0 ? log->n_keys : 1;
    int64_t *part_max = xmalloc(sizeof(int64_t) * (size_t)(n_parts ? n_parts : 1));
    bool *holds = xmalloc(sizeof(bool) * (size_t)(n_parts ? n_parts : 1));
    for (int p = 0; p < n_parts; p++) {
        part_max[p] = TS_MINUS_INF;
        holds[p] = !log->idle_timeout || log->part_rows[p] > 0;
    }
    KeySess *ks = xcalloc((size_t)n_keys, sizeof(KeySess));
    Sess *ss = NULL;
    int64_t n_ss = 0, cap_ss = 0;
    int64_t *dropped_ts = NULL, n_dropped = 0; /* dropped rows: ts, key pairs, for exactness */
    Heap to_fire = {0}, to_expire = {0};
    int64_t wm = TS_MINUS_INF, max_seen = TS_MINUS_INF, open = 0;
    for (int64_t i = 0; i < log->n_rows; i++) {
        if ((i & 0xFFFFF) == 0xFFFFF && cancel && cancel(cancel_arg)) {
            rc = -1;
            break;
        }
        int64_t ts = log->ts[i];
        if (ts == TS_MINUS_INF)
            continue; /* a NULL time: no session, no watermark */
        int32_t key = log->key ? log->key[i] : 0;
        int64_t end = ts + gap, merged_end = end;
        KeySess *k = &ks[key];
        for (int j = 0; j < k->n; j++) {
            const Sess *o = &ss[k->i[j]];
            if (rt_session_joins(ts, ts + gap, o->start, o->end) && o->end > merged_end)
                merged_end = o->end;
        }
        r->pairs++;
        if (rt_window_late(merged_end, wm, lateness)) {
            r->dropped++;
            dropped_ts = xrealloc(dropped_ts, sizeof(int64_t) * (size_t)(2 * n_dropped + 2));
            dropped_ts[2 * n_dropped] = ts;
            dropped_ts[2 * n_dropped + 1] = key;
            n_dropped++;
        } else {
            int64_t start = ts;
            for (int j = 0; j < k->n;) {
                Sess *o = &ss[k->i[j]];
                if (rt_session_joins(ts, ts + gap, o->start, o->end)) {
                    if (o->start < start)
                        start = o->start;
                    if (o->end > end)
                        end = o->end;
                    o->held = false;
                    o->merged = true;
                    open--;
                    k->i[j] = k->i[--k->n];
                } else {
                    j++;
                }
            }
            if (n_ss == cap_ss) {
                cap_ss = cap_ss ? cap_ss * 2 : 1024;
                ss = xrealloc(ss, sizeof(Sess) * (size_t)cap_ss);
            }
            bool closed = rt_window_closed(end, wm);
            ss[n_ss] = (Sess){.start = start, .end = end, .key = key, .held = true, .fired = closed};
            if (closed)
                r->late_updates++;
            else
                r->on_time++;
            if (k->n == k->cap) {
                k->cap = k->cap ? k->cap * 2 : 4;
                k->i = xrealloc(k->i, sizeof(int64_t) * (size_t)k->cap);
            }
            k->i[k->n++] = n_ss;
            if (++open > r->max_open)
                r->max_open = open;
            if (!closed)
                heap_push(&to_fire, end, n_ss);
            heap_push(&to_expire, end, n_ss);
            n_ss++;
        }
        if (ts > max_seen)
            max_seen = ts;
        if (!move_wm(log, i, ts - bound, part_max, holds, n_parts, &wm))
            continue;
        while (to_fire.n && rt_window_closed(to_fire.v[0].end, wm)) {
            Sess *o = &ss[heap_pop(&to_fire).i];
            if (!o->held || o->fired)
                continue;
            o->fired = true;
            r->fired++;
            r->wait_sum_us += max_seen - o->end;
        }
        while (to_expire.n && rt_window_late(to_expire.v[0].end, wm, lateness)) {
            Sess *o = &ss[heap_pop(&to_expire).i];
            if (!o->held)
                continue;
            o->held = false;
            ks_remove(&ks[o->key], o - ss);
            open--;
        }
    }
    /* Final sessions (not merged away), by key and start, for the exactness of each. */
    int64_t n_final = 0;
    for (int64_t j = 0; j < n_ss; j++) {
        if (ss[j].merged)
            continue;
        r->fired_at_end += ss[j].held && !ss[j].fired;
        ss[n_final++] = ss[j];
    }
    qsort(ss, (size_t)n_final, sizeof(Sess), sess_cmp);
    /* The longest final session per key bounds the backward scan below. */
    int64_t *longest = xcalloc((size_t)n_keys, sizeof(int64_t));
    for (int64_t j = 0; j < n_final; j++)
        if (ss[j].end - ss[j].start > longest[ss[j].key])
            longest[ss[j].key] = ss[j].end - ss[j].start;
    for (int64_t d = 0; d < n_dropped; d++) {
        int64_t ts = dropped_ts[2 * d];
        int32_t key = (int32_t)dropped_ts[2 * d + 1];
        /* The first final session of key starting after ts + gap: those
         * before it that reach ts would have merged the row. */
        int64_t lo = 0, hi = n_final;
        while (lo < hi) {
            int64_t mid = (lo + hi) / 2;
            if (ss[mid].key < key || (ss[mid].key == key && ss[mid].start <= ts + gap))
                lo = mid + 1;
            else
                hi = mid;
        }
        for (int64_t j = lo - 1; j >= 0 && ss[j].key == key && ss[j].start >= ts - longest[key]; j--)
            if (rt_session_joins(ts, ts + gap, ss[j].start, ss[j].end))
                ss[j].inexact = true;
    }
    r->windows = n_final;
    for (int64_t j = 0; j < n_final; j++)
        r->exact_windows += !ss[j].inexact;
    for (int64_t k = 0; k < n_keys; k++)
        free(ks[k].i);
    free(ks);
    free(ss);
    free(longest);
    free(dropped_ts);
    free(to_fire.v);
    free(to_expire.v);
    free(part_max);
    free(holds);
    return rc;
}

int rt_lateness_simulate(const RtLatenessLog *log, const RtWindowDef *w, int n_bounds, const int64_t *bounds_us,
                         int n_lateness, const int64_t *lateness_us, RtDelayStats *delays_out,
                         RtLatenessResult *results, bool (*cancel)(void *), void *cancel_arg)
{
    delays(log, delays_out);
    for (int b = 0; b < n_bounds; b++)
        for (int l = 0; l < n_lateness; l++)
            if (w->kind == WIN_SESSION
                    ? simulate_session(log, w->size_us, bounds_us[b], lateness_us[l], &results[b * n_lateness + l],
                                       cancel, cancel_arg)
                    : simulate_one(log, w, bounds_us[b], lateness_us[l], &results[b * n_lateness + l], cancel,
                                   cancel_arg))
                return -1;
    return 0;
}
