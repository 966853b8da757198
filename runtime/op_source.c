/*
 * op_source.c: the Kafka source operator.
 *
 * weir assigns every partition of the topic to itself (no consumer group:
 * group joins are slow and offsets must live in weir's own checkpoints, as
 * in Flink). Each poll returns a batch of records; consecutive records of
 * one partition become one chunk, tagged with the partition so the
 * watermark operator can track event time per partition. A record that is
 * not a valid JSON object for the schema is counted and skipped; its
 * offset still advances, so it is never read again after a checkpoint.
 *
 * State (the source's table): partition (4 bytes BE) -> next offset (8 bytes BE).
 */
#include "runtime_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "kafka.h"
#include "nexmark.h"

#define POLL_BATCH 1024

typedef struct SourceOp {
    RtSource base;            /* base.op first: an RtOp* is a SourceOp* */
    RtKafkaSource *ks;
    int n_parts;
    int64_t *next;            /* next offset per partition (RT_KAFKA_EARLIEST before any record) */
    int64_t *target;          /* flush target per partition, or NULL */
    int64_t *bound;           /* scan.bounded.mode = 'latest': end offset per partition, or NULL */
    bool ended;               /* a bounded source read everything: +infinity was sent */
    int64_t last_tick_ms;     /* last idle tick sent downstream */
    const char **names;       /* column names for JSON decoding */
    const bool *not_null;     /* NOT NULL columns, or NULL */
    int n_cols;
    RtKafkaRecord recs[POLL_BATCH];
} SourceOp;

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static int source_push(RtOp *op, Chunk *c) { return rt_emit(op, c); }
static int source_watermark(RtOp *op, int64_t wm) { return rt_emit_watermark(op, wm); }

/* Writes the offsets into the source's table (they commit with the epoch). */
static int source_save(RtOp *op)
{
    SourceOp *s = (SourceOp *)(void *)op;
    for (int p = 0; p < s->n_parts; p++) {
        if (s->next[p] < 0)
            continue;
        unsigned char k[4], v[8];
        put_be32(k, (uint32_t)p);
        put_be64(v, (uint64_t)s->next[p]);
        if (stor_table_put(op->table, k, 4, v, 8, op->rc->err))
            return -1;
    }
    return 0;
}

static int source_flush_state(RtOp *op, uint64_t epoch) { return source_save(op); }

static void source_close(RtOp *op)
{
    SourceOp *s = (SourceOp *)(void *)op;
    rt_kafka_source_close(s->ks);
    free(s->next);
    free(s->target);
    free(s->bound);
    stor_table_close(op->table);
    free(s);
}

static const RtOpVt SOURCE_VT = {.push = source_push, .watermark = source_watermark, .flush_state = source_flush_state, .close = source_close};

/* Collects "properties.*" WITH options as librdkafka properties. */
static int kafka_props(const CatRelation *r, RtKafkaProp *props, int max)
{
    int n = 0;
    for (int i = 0; i < r->n_options && n < max; i++) {
        const char *k = r->options[i].key;
        if (strncasecmp(k, "properties.", 11) != 0)
            continue;
        k += 11;
        /* bootstrap is passed separately; RisingWave spells it "bootstrap.server". */
        if (!strcasecmp(k, "bootstrap.server") || !strcasecmp(k, "bootstrap.servers"))
            continue;
        props[n].key = k;
        props[n].value = r->options[i].value;
        n++;
    }
    return n;
}

const char *rt_source_bootstrap(const CatRelation *r, const RtEnv *env)
{
    const char *b = cat_option(r, "properties.bootstrap.server");
    if (!b)
        b = cat_option(r, "properties.bootstrap.servers");
    return b ? b : env->kafka_bootstrap;
}

static int source_poll(RtOp *op, int timeout_ms, bool *did_work);
static int source_flush_target(RtOp *op, WError *err);
static bool source_flushed(RtOp *op);
static const RtSourceVt KAFKA_SRC = {source_poll, source_flush_target, source_flushed};

RtOp *rt_op_kafka_source_new(RtCtx *rc, const PlanNode *n)
{
    const CatRelation *r = n->source;
    SourceOp *s = xcalloc(1, sizeof *s);
    s->base.src = &KAFKA_SRC;
    s->base.op.vt = &SOURCE_VT;
    s->base.op.node = n;
    s->base.op.rc = rc;
    s->base.op.wm = TS_MINUS_INF;
    s->names = (const char **)r->col_names;
    s->n_cols = r->n_cols;
    s->not_null = r->col_not_null;
    if (rt_op_open_table(&s->base.op, rc->err))
        goto fail;
    const char *topic = cat_option(r, "topic");
    const char *parts = cat_option(r, "topic.partitions");
    RtKafkaProp props[32];
    int np = kafka_props(r, props, 32);
    if (rt_kafka_source_open(rt_source_bootstrap(r, rc->env), topic, parts ? atoi(parts) : 1, props, np, 10000,
                             &s->ks, rc->err))
        goto fail;
    s->n_parts = rt_kafka_source_partition_count(s->ks);
    s->next = xcalloc((size_t)s->n_parts, sizeof(int64_t));
    int32_t *ids = xcalloc((size_t)s->n_parts, sizeof(int32_t));
    const char *mode = cat_option(r, "scan.startup.mode");
    bool latest = mode && !strcasecmp(mode, "latest");
    if (mode && !latest && strcasecmp(mode, "earliest") != 0) {
        free(ids);
        werr(rc->err, SQLSTATE_INVALID_PARAMETER, 0, "scan.startup.mode must be 'earliest' or 'latest', not '%s'", mode);
        goto fail;
    }
    /* 'latest' is pinned to exact offsets now, so a restart before the first
     * checkpoint and FLUSH both see the same starting point. */
    if (latest && rt_kafka_source_end_offsets(s->ks, s->next, 10000, rc->err)) {
        free(ids);
        goto fail;
    }
    for (int p = 0; p < s->n_parts; p++) {
        ids[p] = p;
        if (!latest)
            s->next[p] = RT_KAFKA_EARLIEST;
        unsigned char k[4];
        put_be32(k, (uint32_t)p);
        const void *v;
        size_t vl;
        int found = stor_table_get(s->base.op.table, k, 4, &v, &vl, rc->err);
        if (found < 0) {
            free(ids);
            goto fail;
        }
        if (found && vl == 8)
            s->next[p] = (int64_t)get_be64(v); /* resume where the last checkpoint left off */
    }
    const char *bmode = cat_option(r, "scan.bounded.mode");
    if (bmode && !strcasecmp(bmode, "latest")) {
        /* The end offsets seen when the view first started, kept across restarts. */
        s->bound = xcalloc((size_t)s->n_parts, sizeof(int64_t));
        bool have = true;
        for (int p = 0; p < s->n_parts && have; p++) {
            unsigned char k[5] = {'B'};
            put_be32(k + 1, (uint32_t)p);
            const void *v;
            size_t vl;
            int found = stor_table_get(s->base.op.table, k, 5, &v, &vl, rc->err);
            if (found < 0) {
                free(ids);
                goto fail;
            }
            have = found == 1 && vl == 8;
            if (have)
                s->bound[p] = (int64_t)get_be64(v);
        }
        if (!have) {
            if (rt_kafka_source_end_offsets(s->ks, s->bound, 10000, rc->err)) {
                free(ids);
                goto fail;
            }
            for (int p = 0; p < s->n_parts; p++) {
                unsigned char k[5] = {'B'}, v[8];
                put_be32(k + 1, (uint32_t)p);
                put_be64(v, (uint64_t)s->bound[p]);
                if (stor_table_put(s->base.op.table, k, 5, v, 8, rc->err)) {
                    free(ids);
                    goto fail;
                }
            }
        }
    } else if (bmode && strcasecmp(bmode, "none") != 0) {
        free(ids);
        werr(rc->err, SQLSTATE_INVALID_PARAMETER, 0, "scan.bounded.mode must be 'latest' or 'none'");
        goto fail;
    }
    int rcode = rt_kafka_source_assign(s->ks, s->n_parts, ids, s->next, rc->err);
    free(ids);
    if (rcode)
        goto fail;
    return &s->base.op;
fail:
    source_close(&s->base.op);
    return NULL;
}

static int source_poll(RtOp *op, int timeout_ms, bool *did_work)
{
    SourceOp *s = (SourceOp *)(void *)op;
    RtCtx *rc = op->rc;
    int n = rt_kafka_source_poll(s->ks, timeout_ms, s->recs, POLL_BATCH);
    if (n < 0)
        return 0; /* transient: the connector logs and retries */
    if (n == 0 && !s->ended) {
        /* No data: a tick (every 100 ms) lets idle partitions stop holding the watermark back. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        if (now - s->last_tick_ms >= 100) {
            s->last_tick_ms = now;
            if (rt_emit_watermark(op, TS_MINUS_INF))
                return -1;
        }
    }
    if (n > 0)
        *did_work = true;
    const PlanNode *node = op->node;
    int i = 0;
    while (i < n) {
        int32_t part = s->recs[i].partition;
        int j = i;
        while (j < n && s->recs[j].partition == part)
            j++;
        Chunk *c = chunk_new(rc->chunk_arena, node->out.n, node->out.types, j - i);
        c->src_partition = part;
        c->src_n_partitions = s->n_parts;
        c->src_offsets = arena_alloc(rc->chunk_arena, sizeof(int64_t) * (size_t)(j - i));
        for (int k = i; k < j; k++) {
            const RtKafkaRecord *rec = &s->recs[k];
            if (s->bound && part >= 0 && part < s->n_parts && rec->offset >= s->bound[part])
                continue; /* past the end of a bounded source */
            rc->stats.records_in++;
            if (part >= 0 && part < s->n_parts)
                s->next[part] = rec->offset + 1;
            char errbuf[200];
            int row = c->n_rows;
            const char *srcname = node->source ? node->source->name : "";
            if (!rec->value) {
                rt_source_error(op, srcname, part, rec->offset, NULL, 0, "partition %d offset %lld: empty record",
                                part, (long long)rec->offset);
                continue;
            }
            if (rt_json_decode_row(rec->value, rec->value_len, s->n_cols, s->names, c, row, errbuf, sizeof errbuf)) {
                rt_source_error(op, srcname, part, rec->offset, rec->value, rec->value_len,
                                "partition %d offset %lld: %s", part, (long long)rec->offset, errbuf);
                continue;
            }
            if (s->not_null) {
                int bad = -1;
                for (int k = 0; k < s->n_cols && bad < 0; k++)
                    if (s->not_null[k] && c->cols[k].nulls[row])
                        bad = k;
                if (bad >= 0) {
                    rt_source_error(op, srcname, part, rec->offset, rec->value, rec->value_len,
                                    "partition %d offset %lld: NOT NULL column \"%s\" is missing or null", part,
                                    (long long)rec->offset, s->names[bad]);
                    continue;
                }
            }
            c->ops[row] = OP_INSERT;
            c->src_offsets[row] = rec->offset;
            c->n_rows++;
        }
        if (c->n_rows && rt_emit(op, c))
            return -1;
        i = j;
    }
    if (s->bound && !s->ended) {
        bool done = true;
        for (int p = 0; p < s->n_parts && done; p++)
            done = s->bound[p] <= 0 || (s->next[p] >= 0 && s->next[p] >= s->bound[p]);
        if (done) {
            /* The end of a bounded input is a watermark of +infinity: every window fires. */
            s->ended = true;
            *did_work = true;
            return rt_emit_watermark(op, TS_PLUS_INF);
        }
    }
    return 0;
}

static int source_flush_target(RtOp *op, WError *err)
{
    SourceOp *s = (SourceOp *)(void *)op;
    int64_t *t = xcalloc((size_t)s->n_parts, sizeof(int64_t));
    if (rt_kafka_source_end_offsets(s->ks, t, 5000, err)) {
        free(t);
        return -1;
    }
    free(s->target);
    s->target = t;
    return 0;
}

static bool source_flushed(RtOp *op)
{
    SourceOp *s = (SourceOp *)(void *)op;
    if (!s->target)
        return true;
    for (int p = 0; p < s->n_parts; p++) {
        int64_t t = s->target[p];
        if (s->bound && s->bound[p] < t)
            t = s->bound[p];
        if (t <= 0)
            continue;
        if (s->next[p] < t)
            return false;
    }
    return !s->bound || s->ended;
}

/* The source operator for a plan node, by its connector. */
RtOp *rt_op_source_new(RtCtx *rc, const PlanNode *n)
{
    const char *conn = cat_option(n->source, "connector");
    if (conn && strcasecmp(conn, "kafka") == 0)
        return rt_op_kafka_source_new(rc, n);
    if (conn && strcasecmp(conn, "nexmark") == 0)
        return rt_op_nexmark_source_new(rc, n);
    werr(rc->err, SQLSTATE_NOT_SUPPORTED, 0, "feature not supported: connector '%s'", conn ? conn : "");
    return NULL;
}
