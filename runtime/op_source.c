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
 * State (the source's table): partition (4 bytes BE) -> next offset (8 bytes BE);
 * 'N' -> the partition count the source was reading (4 bytes BE).
 *
 * A topic deleted or shrunk under the source (the broker answers, and the
 * topic is gone or has fewer partitions) is not a transient failure like an
 * unreachable broker: once it has lasted topic.lost_after (a topic being
 * recreated, metadata propagating), the poll fails with
 * RT_SQLSTATE_SOURCE_LOST and the engine stops the views reading it until
 * RESUME. The broker is asked by the connector's watcher thread, never here.
 */
#include "runtime_int.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "avro_codec.h"
#include "kafka.h"
#include "numeric.h"
#include "nexmark.h"
#include "log.h"
#include "clock.h"
#include "weir_limits.h"

#define POLL_BATCH 1024

/* FORMAT of the records. PLAIN: each record's value is a row (+I).
 * UPSERT (tables): the value is the new row of its key (+I to the upsert
 * materialize), a null value (tombstone) deletes the key given by the
 * record's key, a JSON object with the key columns (or a bare JSON value
 * for a one-column key); key columns missing from a value are taken from
 * the record's key too. DEBEZIUM (tables): the
 * value is a change event {"before": row, "after": row, "op": "c"|"r"|"u"|"d"},
 * optionally wrapped in {"payload": ...} as Kafka Connect's JSON converter
 * writes it; a null value (the tombstone after a delete) is skipped. */
typedef enum SrcFormat { FMT_PLAIN, FMT_UPSERT, FMT_DEBEZIUM } SrcFormat;

typedef struct SourceOp {
    RtSource base;            /* base.op first: an RtOp* is a SourceOp* */
    RtKafkaSource *ks;
    int n_parts;
    int n_owned;              /* partitions this instance reads (p % n_shards == shard; all on one thread) */
    int64_t *next;            /* next offset per partition (RT_KAFKA_EARLIEST before any record) */
    int64_t *target;          /* flush target per partition, or NULL */
    int64_t *bound;           /* scan.bounded.mode = 'latest': end offset per partition, or NULL */
    bool ended;               /* a bounded source read everything: +infinity was sent */
    bool replay;              /* VERIFY replay: bound = the live twin's positions */
    bool replay_inf;          /* ...and send +infinity at the end only if the twin had */
    int64_t last_tick_ms;     /* last idle tick sent downstream */
    int64_t lost_after_ms;    /* topic.lost_after: grace before a missing/shrunk topic stops the view */
    int64_t lost_warned;      /* since_ms of the topic state last logged as going (0: none) */
    /* backfill_from = '<timestamp>' on a broker that cannot look offsets up
     * by time: partitions still skipping records stamped before skip_ms
     * (cleared at the partition's first record at or after it), or NULL. */
    bool *skipping;
    bool *skip_saved;         /* the partition's 'S' marker is in the table */
    int64_t skip_ms;
    RtSkew skew;              /* skew.send_time / skew.receive_time */
    const char **names;       /* column names for JSON decoding (NULL: a computed column) */
    bool names_owned;
    const bool *not_null;     /* NOT NULL columns, or NULL */
    int n_cols;
    SrcFormat format;
    /* ENCODE AVRO: the decoder, and while the schema registry is down the
     * time of the next try (the batch that needed it was sought back). */
    RtAvroDecoder *avro;
    int64_t avro_retry_ms;
    bool avro_down_logged;
    RtKafkaRecord recs[POLL_BATCH];
} SourceOp;

static bool owns(const SourceOp *s, int p);
/* A registry outage is retried this often (every record waits; none turns bad). */
#define AVRO_RETRY_MS 1000

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

#define SKEW_KAFKA_TS (-2)

static int col_index(const CatRelation *r, const char *name)
{
    for (int i = 0; name && i < r->n_cols; i++)
        if (strcmp(r->col_names[i], name) == 0)
            return i;
    return -1;
}

void rt_skew_init(RtSkew *k, const CatRelation *r)
{
    const char *recv = cat_option(r, "skew.receive_time");
    k->send = col_index(r, cat_option(r, "skew.send_time"));
    k->recv = recv && !strcasecmp(recv, "kafka_timestamp") ? SKEW_KAFKA_TS : col_index(r, recv);
    k->ts = r->wm_col;
    if (k->ts < 0 || (k->recv < 0 && k->recv != SKEW_KAFKA_TS))
        k->send = -1;
}

void rt_skew_apply(const RtSkew *k, Chunk *c, int row, int64_t kafka_ts_ms)
{
    if (k->send < 0)
        return;
    Column *ts = &c->cols[k->ts], *send = &c->cols[k->send];
    if (ts->nulls[row] || send->nulls[row])
        return;
    int64_t recv;
    if (k->recv == SKEW_KAFKA_TS) {
        if (kafka_ts_ms < 0)
            return;
        recv = kafka_ts_ms * 1000;
    } else {
        if (c->cols[k->recv].nulls[row])
            return;
        recv = c->cols[k->recv].v.i[row];
    }
    int64_t v;
    if (__builtin_sub_overflow(recv, send->v.i[row], &v) || __builtin_add_overflow(ts->v.i[row], v, &v))
        return;
    ts->v.i[row] = v;
}

static int source_push(RtOp *op, Chunk *c) { return rt_emit(op, c); }
static int source_watermark(RtOp *op, int64_t wm) { return rt_emit_watermark(op, wm); }

/* Writes the offsets into the source's table (they commit with the epoch). */
static int source_save(RtOp *op)
{
    SourceOp *s = (SourceOp *)(void *)op;
    for (int p = 0; p < s->n_parts; p++) {
        if (s->next[p] < 0 || !owns(s, p))
            continue;
        unsigned char k[4], v[8];
        put_be32(k, (uint32_t)p);
        put_be64(v, (uint64_t)s->next[p]);
        if (stor_table_put(op->table, k, 4, v, 8, op->rc->err))
            return -1;
        /* A partition still skipping up to backfill_from's time: 'S' + partition. */
        unsigned char sk[5] = {'S'};
        put_be32(sk + 1, (uint32_t)p);
        if (!s->skipping || s->skipping[p] == s->skip_saved[p])
            continue;
        if (s->skipping[p] ? stor_table_put(op->table, sk, 5, "1", 1, op->rc->err)
                           : stor_table_delete(op->table, sk, 5, op->rc->err))
            return -1;
        s->skip_saved[p] = s->skipping[p];
    }
    return 0;
}

static int source_flush_state(RtOp *op, uint64_t epoch)
{
    SourceOp *s = (SourceOp *)(void *)op;
    if (source_save(op))
        return -1;
    /* The partition count read, so a restart can tell that partitions went away
     * even if some never had a record (those have no offset saved). */
    unsigned char v[4];
    put_be32(v, (uint32_t)s->n_parts);
    return stor_table_put(op->table, "N", 1, v, 4, op->rc->err);
}

static void source_close(RtOp *op)
{
    SourceOp *s = (SourceOp *)(void *)op;
    rt_kafka_source_close(s->ks);
    free(s->next);
    free(s->target);
    free(s->bound);
    free(s->skipping);
    free(s->skip_saved);
    stor_table_close(op->table);
    rt_avro_decoder_free(s->avro);
    if (s->names_owned)
        free(s->names);
    free(s);
}

static const RtOpVt SOURCE_VT = {.push = source_push, .watermark = source_watermark, .flush_state = source_flush_state, .close = source_close};

/* Collects "properties.*" WITH options as librdkafka properties. */
int rt_source_kafka_props(const CatRelation *r, RtKafkaProp *props, int max)
{
    int n = 0;
    for (int i = 0; i < r->n_options; i++) {
        const char *k = r->options[i].key;
        if (strncasecmp(k, "properties.", 11) != 0)
            continue;
        k += 11;
        /* bootstrap is passed separately; RisingWave spells it "bootstrap.server". */
        if (!strcasecmp(k, "bootstrap.server") || !strcasecmp(k, "bootstrap.servers"))
            continue;
        assert(n < max); /* the planner refuses more than WEIR_MAX_KAFKA_PROPERTIES (plan_table.c, bind_columns) */
        if (n == max)
            break;
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

/* How many partitions the source was reading at its last checkpoint: the
 * saved count ('N'), or for a checkpoint written before it was kept, one
 * past the highest partition with a saved offset; 0 when nothing was
 * checkpointed (a new view). -1 on a storage error. */
static int saved_partitions(StorTable *t, WError *err)
{
    const void *v;
    size_t vl;
    int found = stor_table_get(t, "N", 1, &v, &vl, err);
    if (found < 0)
        return -1;
    if (found && vl == 4) {
        const unsigned char *b = v;
        return (int)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]);
    }
    /* The table holds a few keys per partition: scanning it is cheap. */
    StorIter *it;
    if (stor_iter_open(t, NULL, 0, &it, err))
        return -1;
    const void *k;
    size_t kl;
    int n = 0, r;
    while ((r = stor_iter_next(it, &k, &kl, &v, &vl, err)) == 1) {
        const unsigned char *b = k;
        if (kl != 4) /* 'S', 'B' + partition, 'N' */
            continue;
        uint32_t p = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
        if (p < 10000 && (int)p + 1 > n) /* 10000: topic.partitions' upper limit */
            n = (int)p + 1;
    }
    stor_iter_close(it);
    return r < 0 ? -1 : n;
}

/* The error of a topic that is gone (n == 0) or has fewer partitions than
 * the source was reading (had). */
static int topic_lost(WError *err, const char *topic, const char *source, int n, int had)
{
    if (n == 0)
        werr(err, RT_SQLSTATE_SOURCE_LOST, 0, "topic \"%s\" of source \"%s\" no longer exists", topic, source);
    else {
        char gone[160];
        int len = 0;
        for (int p = n; p < had && len < (int)sizeof gone - 16; p++)
            len += snprintf(gone + len, sizeof gone - (size_t)len, "%s%d", p > n ? ", " : "", p);
        if (had - n > 1 && len >= (int)sizeof gone - 16)
            snprintf(gone + len, sizeof gone - (size_t)len, "...");
        werr(err, RT_SQLSTATE_SOURCE_LOST, 0,
             "topic \"%s\" of source \"%s\" has %d partition%s, the source was reading %d (partition%s %s %s gone)",
             topic, source, n, n == 1 ? "" : "s", had, had - n > 1 ? "s" : "", gone, had - n > 1 ? "are" : "is");
    }
    werr_hint(err, "Recreate the topic with at least as many partitions, then ALTER MATERIALIZED VIEW ... RESUME; "
                   "or drop and recreate the view to start over.");
    return -1;
}

/* topic.lost_after: default 30 s; -1 (and 22023) when not a positive interval. */
static int64_t lost_after_ms(const CatRelation *r, WError *err)
{
    const char *v = cat_option(r, "topic.lost_after");
    Interval iv;
    int64_t us;
    if (!v)
        return RT_TOPIC_LOST_AFTER_DEFAULT_MS;
    if (parse_interval(v, strlen(v), &iv) || interval_to_usecs(&iv, &us) || us <= 0) {
        werr(err, SQLSTATE_INVALID_PARAMETER, 0, "topic.lost_after must be a positive interval such as '30 seconds'");
        return -1;
    }
    return us / 1000 > 0 ? us / 1000 : 1;
}

/* backfill_from = '<timestamp>': per partition, the first offset whose
 * record timestamp is at or after ts_us, asked of the broker. Where the
 * broker has no answer (no such record, or no time index: the embedded
 * broker answers none for any time) the partition is read from its earliest
 * offset instead, skipping records stamped before ts_us until its first one
 * at or after it: the same records, read rather than looked up. */
static int start_at_time(SourceOp *s, int64_t ts_us, WError *err)
{
    int64_t ms = ts_us / 1000 + (ts_us % 1000 > 0); /* record timestamps are ms: round up */
    int64_t *found = xcalloc((size_t)s->n_parts, sizeof(int64_t));
    for (int p = 0; p < s->n_parts; p++)
        found[p] = -1;
    WError lerr = {0};
    if (rt_kafka_source_offsets_for_time(s->ks, ms, found, 10000, &lerr) &&
        strcmp(lerr.sqlstate, SQLSTATE_CONNECTION_FAILURE) == 0) {
        free(found);
        *err = lerr;
        return -1;
    }
    s->skip_ms = ms;
    s->skipping = xcalloc((size_t)s->n_parts, sizeof(bool));
    s->skip_saved = xcalloc((size_t)s->n_parts, sizeof(bool));
    for (int p = 0; p < s->n_parts; p++) {
        if (found[p] >= 0) {
            s->next[p] = found[p];
        } else {
            s->skipping[p] = true;
            s->next[p] = RT_KAFKA_EARLIEST;
        }
    }
    free(found);
    return 0;
}

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
    if (r->col_gen || r->col_meta) {
        /* Computed and INCLUDE columns are not in the JSON value: no field
         * fills them (the record's metadata fills INCLUDE columns below; the
         * projection after the source computes the others). */
        s->names = xcalloc((size_t)r->n_cols, sizeof(char *));
        s->names_owned = true;
        for (int i = 0; i < r->n_cols; i++)
            s->names[i] = cat_col_in_value(r, i) ? r->col_names[i] : NULL;
    }
    s->n_cols = r->n_cols;
    s->not_null = r->col_not_null;
    rt_skew_init(&s->skew, r);
    s->format = r->format && !strcasecmp(r->format, "upsert")     ? FMT_UPSERT
              : r->format && !strcasecmp(r->format, "debezium") ? FMT_DEBEZIUM
                                                                 : FMT_PLAIN;
    if (r->encode && !strcasecmp(r->encode, "avro") &&
        !(s->avro = rt_avro_decoder_new(r, s->n_cols, (const char *const *)s->names, rc->err)))
        goto fail;
    if (rt_op_open_table(&s->base.op, rc->err))
        goto fail;
    const char *topic = cat_option(r, "topic");
    const char *parts = cat_option(r, "topic.partitions");
    RtKafkaProp props[WEIR_MAX_KAFKA_PROPERTIES + 1];
    int np = rt_source_kafka_props(r, props, WEIR_MAX_KAFKA_PROPERTIES);
    /* An offset no longer in the log is reported to us (on_offset_gap)
     * instead of librdkafka jumping to the oldest record by itself, unless
     * the user asked for librdkafka's own reset. */
    bool user_reset = false;
    for (int i = 0; i < np; i++)
        user_reset |= !strcasecmp(props[i].key, "auto.offset.reset");
    if (!user_reset)
        props[np++] = (RtKafkaProp){"auto.offset.reset", "error"};
    if ((s->lost_after_ms = lost_after_ms(r, rc->err)) < 0)
        goto fail;
    /* A source that checkpointed offsets read an existing topic: if that is
     * gone now it must not be recreated empty under the view. */
    int had = saved_partitions(s->base.op.table, rc->err);
    if (had < 0)
        goto fail;
    WError oerr = {0};
    if (rt_kafka_source_open(rt_source_bootstrap(r, rc->env), topic, had ? 0 : parts ? atoi(parts) : 1, props, np,
                             10000, &s->ks, &oerr)) {
        if (had && strcmp(oerr.sqlstate, SQLSTATE_UNDEFINED_OBJECT) == 0)
            topic_lost(rc->err, topic, r->name, 0, had);
        else
            *rc->err = oerr;
        goto fail;
    }
    s->n_parts = rt_kafka_source_partition_count(s->ks);
    if (had > s->n_parts) {
        topic_lost(rc->err, topic, r->name, s->n_parts, had);
        goto fail;
    }
    /* A VERIFY replay reads a fixed range: only the live view watches the topic. */
    if (!rc->replay_of &&
        rt_kafka_source_watch(s->ks, s->lost_after_ms / 4 < 250 ? 250 : s->lost_after_ms / 4 > 5000 ? 5000 : (int)(s->lost_after_ms / 4),
                              rc->err))
        goto fail;
    s->next = xcalloc((size_t)s->n_parts, sizeof(int64_t));
    int32_t *ids = xcalloc((size_t)s->n_parts, sizeof(int32_t));
    const char *mode = cat_option(r, "scan.startup.mode");
    bool latest = mode && !strcasecmp(mode, "latest");
    if (mode && !latest && strcasecmp(mode, "earliest") != 0) {
        free(ids);
        werr(rc->err, SQLSTATE_INVALID_PARAMETER, 0, "scan.startup.mode must be 'earliest' or 'latest', not '%s'", mode);
        goto fail;
    }
    /* A view's backfill_from overrides the source's startup mode. */
    if (n->start != PLAN_START_DEFAULT)
        latest = n->start == PLAN_START_LATEST;
    bool at_time = n->start == PLAN_START_TIMESTAMP;
    /* 'latest' is pinned to exact offsets now, so a restart before the first
     * checkpoint and FLUSH both see the same starting point. */
    if ((latest || at_time) && rt_kafka_source_end_offsets(s->ks, s->next, 10000, rc->err)) {
        free(ids);
        goto fail;
    }
    if (at_time && start_at_time(s, n->start_ts_us, rc->err)) {
        free(ids);
        goto fail;
    }
    for (int p = 0; p < s->n_parts; p++) {
        ids[p] = p;
        if (!latest && !at_time)
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
        if (found && vl == 8) {
            s->next[p] = (int64_t)get_be64(v); /* resume where the last checkpoint left off */
            if (s->skipping) {
                /* ...and keep skipping where it had not reached backfill_from's time yet. */
                unsigned char sk[5] = {'S'};
                put_be32(sk + 1, (uint32_t)p);
                int still = stor_table_get(s->base.op.table, sk, 5, &v, &vl, rc->err);
                if (still < 0) {
                    free(ids);
                    goto fail;
                }
                s->skipping[p] = s->skip_saved[p] = still == 1;
            }
        }
    }
    const char *bmode = cat_option(r, "scan.bounded.mode");
    if (rc->replay_of) {
        /* VERIFY: read from the first offsets to where the live view's twin is now. */
        RtOp *twin = rt_dataflow_op_of(rc->replay_of, n);
        if (latest || at_time || !twin) {
            free(ids);
            werr(rc->err, SQLSTATE_NOT_SUPPORTED, 0,
                 "feature not supported: VERIFY of a view that started after the first offsets (scan.startup.mode "
                 "= 'latest' or backfill_from = 'latest' or a timestamp): its first offsets are not kept");
            goto fail;
        }
        const SourceOp *t = (const SourceOp *)(const void *)twin;
        s->bound = xcalloc((size_t)s->n_parts, sizeof(int64_t));
        for (int p = 0; p < s->n_parts && p < t->n_parts; p++)
            s->bound[p] = t->next[p] > 0 ? t->next[p] : 0;
        s->replay = true;
        s->replay_inf = t->ended;
    } else if (bmode && !strcasecmp(bmode, "latest")) {
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
    if (rt_bad_records_prepare(rc, r, rc->err)) {
        free(ids);
        goto fail;
    }
    /* A parallel view's instance reads its share of the partitions only, a
     * distributed view's node those the cluster assigned it (every task of
     * the repartition topic is one partition). */
    if (rc->dist)
        rc->dist->n_src_total = s->n_parts;
    int64_t *from = xcalloc((size_t)s->n_parts + 1, sizeof(int64_t));
    for (int p = 0; p < s->n_parts; p++)
        if (owns(s, p)) {
            ids[s->n_owned] = p;
            from[s->n_owned++] = s->next[p];
        }
    int rcode = rt_kafka_source_assign(s->ks, s->n_owned, ids, from, rc->err);
    free(from);
    free(ids);
    if (rcode)
        goto fail;
    return &s->base.op;
fail:
    source_close(&s->base.op);
    return NULL;
}

/* ENCODE AVRO: makes sure the writer schema of every record of the batch
 * is known before any is decoded. While the schema registry cannot be
 * reached the batch is not read: each of its partitions is sought back to
 * its first record here, and the poll is retried after AVRO_RETRY_MS, so
 * an outage delays the view rather than turning its records bad. Returns 0
 * (decode the batch), 1 (paused) or -1 (the seek failed: err). */
static int avro_prepare_batch(SourceOp *s, int n, WError *err)
{
    char eb[300];
    int i = 0;
    while (i < n && rt_avro_prepare(s->avro, s->recs[i].value, s->recs[i].value ? s->recs[i].value_len : 0, eb,
                                    sizeof eb) == 0)
        i++;
    if (i == n) {
        if (s->avro_down_logged)
            wlog_info("avro", "source %s: the schema registry answers again; reading on",
                      s->base.op.node->source->name);
        s->avro_retry_ms = 0;
        s->avro_down_logged = false;
        return 0;
    }
    if (!s->avro_down_logged)
        wlog_warn("avro", "source %s: %s; pausing until it answers", s->base.op.node->source->name, eb);
    s->avro_down_logged = true;
    s->avro_retry_ms = clock_mono_ms() + AVRO_RETRY_MS;
    int32_t parts[POLL_BATCH];
    int64_t offs[POLL_BATCH];
    int np = 0;
    for (int k = 0; k < n; k++) {
        int j = 0;
        while (j < np && parts[j] != s->recs[k].partition)
            j++;
        if (j == np) {
            parts[np] = s->recs[k].partition;
            offs[np++] = s->recs[k].offset;
        } else if (s->recs[k].offset < offs[j]) {
            offs[j] = s->recs[k].offset;
        }
    }
    return rt_kafka_source_seek(s->ks, np, parts, offs, 5000, err) ? -1 : 1;
}

/* The INCLUDE columns of row from the record's metadata. */
static void fill_meta(Chunk *c, int row, const RtKafkaRecord *rec, const uint8_t *meta, int n_cols)
{
    for (int i = 0; i < n_cols; i++) {
        Value v;
        switch ((CatMeta)meta[i]) {
        case CAT_META_NONE: continue;
        case CAT_META_KEY: v = rec->key ? value_str(TYPE_BYTEA, rec->key, rec->key_len) : value_null(TYPE_BYTEA); break;
        case CAT_META_PARTITION: v = value_int(TYPE_INT4, rec->partition); break;
        case CAT_META_OFFSET: v = value_int(TYPE_INT8, rec->offset); break;
        case CAT_META_TIMESTAMP:
            v = rec->timestamp_ms >= 0 ? value_int(TYPE_TIMESTAMPTZ, rec->timestamp_ms * 1000) : value_null(TYPE_TIMESTAMPTZ);
            break;
        }
        chunk_set(c, i, row, &v);
    }
}

static bool is_key_col(const CatRelation *r, int col)
{
    for (int k = 0; k < r->n_pk; k++)
        if (r->pk[k] == col)
            return true;
    return false;
}

/* Rounds the NUMERIC(p,s) columns of row to their scale; a value whose
 * integer part does not fit makes the record bad, as any decode error. */
static int apply_typmods(const CatRelation *r, Chunk *c, int row, char *errbuf, size_t errlen)
{
    for (int k = 0; r->col_typmod && k < r->n_cols; k++) {
        if (r->col_typmod[k] < 0 || c->cols[k].nulls[row])
            continue;
        Value v;
        WError err = {0};
        chunk_get(c, k, row, &v);
        if (num_apply_typmod(r->col_typmod[k], &v, &err))
            return snprintf(errbuf, errlen, "field \"%s\": %s (%s)", r->col_names[k], err.msg, err.detail), -1;
        chunk_set(c, k, row, &v);
    }
    return 0;
}

/* Decodes the JSON object [p, p + n) into the next row of c as op, and
 * checks it: NOT NULL columns for an add, the key columns for a delete.
 * The row is added (c->n_rows) only when it is good. */
static int decode_as(SourceOp *s, const char *p, size_t n, Chunk *c, RowOp op, char *errbuf, size_t errlen)
{
    int row = c->n_rows;
    const CatRelation *r = s->base.op.node->source;
    if (rt_json_decode_row(p, n, s->n_cols, s->names, c, row, errbuf, errlen) ||
        apply_typmods(r, c, row, errbuf, errlen))
        return -1;
    for (int k = 0; k < s->n_cols; k++) {
        bool need = rowop_is_add(op) ? s->not_null && s->not_null[k] : is_key_col(r, k);
        if (need && c->cols[k].nulls[row]) {
            snprintf(errbuf, errlen, "%s column \"%s\" is missing or null", is_key_col(r, k) ? "key" : "NOT NULL",
                     s->names[k]);
            return -1;
        }
    }
    c->ops[row] = (uint8_t)op;
    c->n_rows++;
    return 0;
}

/* The record's key as a JSON object of key columns: as written when it is
 * an object; a bare JSON scalar (1, "eur") is the value of a one-column key. */
static void key_object(SourceOp *s, const RtKafkaRecord *rec, Arena *a, const char **p, size_t *n)
{
    const CatRelation *r = s->base.op.node->source;
    const char *k = rec->key;
    size_t kn = rec->key_len, i = 0;
    while (i < kn && (k[i] == ' ' || k[i] == '\t' || k[i] == '\n' || k[i] == '\r'))
        i++;
    *p = k;
    *n = kn;
    if ((i < kn && k[i] == '{') || r->n_pk != 1)
        return;
    /* The name is not escaped: a key column whose name holds a '"' or '\\' makes
     * such records bad (an object key still works). */
    const char *name = s->names[r->pk[0]];
    size_t len = strlen(name) + kn + 8;
    char *w = arena_alloc(a, len);
    int m = snprintf(w, len, "{\"%s\": %.*s}", name, (int)kn, k);
    *p = w;
    *n = (size_t)m;
}

/* FORMAT UPSERT: a value is the row of its key, a tombstone deletes the key. */
static int decode_upsert(SourceOp *s, const RtKafkaRecord *rec, Chunk *c, char *errbuf, size_t errlen)
{
    const CatRelation *r = s->base.op.node->source;
    const char *kp = NULL;
    size_t kn = 0;
    if (rec->key)
        key_object(s, rec, c->arena, &kp, &kn);
    if (!rec->value) {
        if (!rec->key)
            return snprintf(errbuf, errlen, "a tombstone without a key"), -1;
        return decode_as(s, kp, kn, c, OP_DELETE, errbuf, errlen);
    }
    int row = c->n_rows;
    if (rt_json_decode_row(rec->value, rec->value_len, s->n_cols, s->names, c, row, errbuf, errlen))
        return -1;
    bool missing = false;
    for (int k = 0; k < r->n_pk; k++)
        missing |= c->cols[r->pk[k]].nulls[row] != 0;
    if (missing && rec->key) {
        /* Key columns the value leaves out come from the record's key. */
        Chunk *kc = chunk_new(c->arena, c->n_cols, s->base.op.node->out.types, 1);
        if (rt_json_decode_row(kp, kn, s->n_cols, s->names, kc, 0, errbuf, errlen))
            return -1;
        for (int k = 0; k < r->n_pk; k++) {
            Value v;
            chunk_get(kc, r->pk[k], 0, &v);
            if (c->cols[r->pk[k]].nulls[row])
                chunk_set(c, r->pk[k], row, &v);
        }
    }
    if (apply_typmods(r, c, row, errbuf, errlen))
        return -1;
    for (int k = 0; k < s->n_cols; k++)
        if (s->not_null && s->not_null[k] && c->cols[k].nulls[row])
            return snprintf(errbuf, errlen, "%s column \"%s\" is missing or null",
                            is_key_col(r, k) ? "key" : "NOT NULL", s->names[k]), -1;
    c->ops[row] = OP_INSERT;
    c->n_rows++;
    return 0;
}

/* The JSON value of field name in [p, p + n), or NULL when it is absent or null. */
static int json_obj_field(const char *p, size_t n, const char *name, Arena *a, const char **vp, size_t *vn,
                          char *errbuf, size_t errlen)
{
    int f = rt_json_field(p, n, name, a, vp, vn, errbuf, errlen);
    if (f == 1 && *vn == 4 && memcmp(*vp, "null", 4) == 0)
        f = 0;
    if (f == 0)
        *vp = NULL;
    return f < 0 ? -1 : 0;
}

/* FORMAT DEBEZIUM: c/r insert `after`, u replaces `before` by `after`
 * (a delete of `before` too when the key changed), d deletes `before`. */
static int decode_debezium(SourceOp *s, const RtKafkaRecord *rec, Chunk *c, char *errbuf, size_t errlen)
{
    if (!rec->value)
        return 0; /* the tombstone Debezium writes after a delete, for log compaction */
    const CatRelation *r = s->base.op.node->source;
    const char *env = rec->value, *pl, *opv, *before, *after;
    size_t envn = rec->value_len, pln, opn, bn, an;
    if (json_obj_field(env, envn, "payload", c->arena, &pl, &pln, errbuf, errlen))
        return -1;
    if (pl && pln && pl[0] == '{') {
        env = pl;
        envn = pln;
    }
    if (json_obj_field(env, envn, "op", c->arena, &opv, &opn, errbuf, errlen) ||
        json_obj_field(env, envn, "before", c->arena, &before, &bn, errbuf, errlen) ||
        json_obj_field(env, envn, "after", c->arena, &after, &an, errbuf, errlen))
        return -1;
    char opc = opv && opn == 3 && opv[0] == '"' && opv[2] == '"' ? opv[1] : 0;
    switch (opc) {
    case 'c':
    case 'r':
        if (!after)
            return snprintf(errbuf, errlen, "Debezium op '%c' without \"after\"", opc), -1;
        return decode_as(s, after, an, c, OP_INSERT, errbuf, errlen);
    case 'u': {
        if (!after)
            return snprintf(errbuf, errlen, "Debezium op 'u' without \"after\""), -1;
        int row = c->n_rows;
        if (decode_as(s, after, an, c, OP_INSERT, errbuf, errlen))
            return -1;
        if (!before)
            return 0; /* the upsert replaces the row of the key anyway */
        if (decode_as(s, before, bn, c, OP_DELETE, errbuf, errlen)) {
            c->n_rows = row; /* neither half */
            return -1;
        }
        bool same = true;
        for (int k = 0; k < r->n_pk && same; k++) {
            Value x, y;
            chunk_get(c, r->pk[k], row, &x);
            chunk_get(c, r->pk[k], row + 1, &y);
            same = value_eq(&x, &y);
        }
        if (same)
            c->n_rows--; /* same key: the new row alone is the update */
        return 0;
    }
    case 'd':
        if (!before)
            return snprintf(errbuf, errlen, "Debezium op 'd' without \"before\""), -1;
        return decode_as(s, before, bn, c, OP_DELETE, errbuf, errlen);
    default:
        return snprintf(errbuf, errlen, "not a Debezium change event (\"op\" must be \"c\", \"r\", \"u\" or \"d\")"), -1;
    }
}

static int64_t *grow_array(int64_t *a, int from, int to, int64_t fill)
{
    a = xrealloc(a, sizeof(int64_t) * (size_t)to);
    for (int p = from; p < to; p++)
        a[p] = fill;
    return a;
}

/* Whether this instance reads partition p: a parallel view's share, or in a
 * distributed view the partitions the cluster assigned to this node. */
static bool owns(const SourceOp *s, int p)
{
    const RtDist *d = s->base.op.rc->dist;
    if (!d)
        return rt_op_owns(&s->base.op, p);
    for (int i = 0; i < d->n_src; i++)
        if (d->src[i] == p)
            return true;
    return false;
}

/* Assigns the partitions this instance reads again, at s->next. */
static int reassign_owned(SourceOp *s)
{
    int32_t *ids = xcalloc((size_t)s->n_parts + 1, sizeof(int32_t));
    int64_t *from = xcalloc((size_t)s->n_parts + 1, sizeof(int64_t));
    int n = 0;
    for (int p = 0; p < s->n_parts; p++)
        if (owns(s, p)) {
            ids[n] = p;
            from[n++] = s->next[p];
        }
    int rc = rt_kafka_source_assign(s->ks, n, ids, from, s->base.op.rc->err);
    free(ids);
    free(from);
    return rc;
}

/* The topic has n > n_parts partitions now: the new ones are read from
 * their first record (everything in them is newer than the view), and the
 * whole assignment is made again at the exact positions reached. */
static int grow(SourceOp *s, int n)
{
    const CatRelation *r = s->base.op.node->source;
    int old = s->n_parts;
    if (s->base.op.rc->dist)
        /* The repartition topic's readers count the tasks (the partitions)
         * they were opened with: the view restarts with the new count. */
        return werr(s->base.op.rc->err, SQLSTATE_OBJECT_NOT_IN_STATE, 0,
                    "topic \"%s\" of source \"%s\" grew from %d to %d partitions; the distributed view restarts "
                    "from its last checkpoint", cat_option(r, "topic"), r->name, old, n);
    if (rt_op_shards(&s->base.op) > 1)
        /* Instances split the partitions p % P: the new ones belong to other
         * instances too, and one that had none has already told the exchanges
         * its input ended. The engine restarts the view from its last
         * checkpoint (as after a broker outage), which splits them afresh. */
        return werr(s->base.op.rc->err, SQLSTATE_OBJECT_NOT_IN_STATE, 0,
                    "topic \"%s\" of source \"%s\" grew from %d to %d partitions; the view runs on %d instances "
                    "and restarts from its last checkpoint to spread them",
                    cat_option(r, "topic"), r->name, old, n, rt_op_shards(&s->base.op));
    s->next = grow_array(s->next, old, n, RT_KAFKA_EARLIEST);
    if (s->target)
        s->target = grow_array(s->target, old, n, 0); /* FLUSH asked before they existed */
    if (s->bound)
        s->bound = grow_array(s->bound, old, n, 0); /* a bounded source ends where it was created */
    if (s->skipping) {
        s->skipping = xrealloc(s->skipping, sizeof(bool) * (size_t)n);
        s->skip_saved = xrealloc(s->skip_saved, sizeof(bool) * (size_t)n);
        for (int p = old; p < n; p++) {
            s->skipping[p] = true; /* backfill_from's time holds for them too */
            s->skip_saved[p] = false;
        }
    }
    rt_kafka_source_grow(s->ks, n);
    s->n_parts = n;
    int32_t *ids = xcalloc((size_t)n, sizeof(int32_t));
    for (int p = 0; p < n; p++)
        ids[p] = p;
    int rc = rt_kafka_source_assign(s->ks, n, ids, s->next, s->base.op.rc->err);
    free(ids);
    if (!rc)
        wlog_warn("source", "topic \"%s\" of source \"%s\" grew from %d to %d partitions; reading the new ones "
                        "from their start", cat_option(r, "topic"), r->name, old, n);
    return rc;
}

/* Fails the poll once the topic has been missing or short of partitions for
 * topic.lost_after (the watcher's answers; an unreachable broker is not a
 * verdict and only waits, as before). Logged once when it starts. A topic
 * that grew is followed at once. */
static int check_topic(SourceOp *s)
{
    int64_t since;
    int st = rt_kafka_source_topic_state(s->ks, &since);
    if (st > s->n_parts && !s->replay)
        return grow(s, st);
    if (st == RT_KAFKA_TOPIC_UNREACHABLE || st >= s->n_parts)
        return 0;
    const CatRelation *r = s->base.op.node->source;
    const char *topic = cat_option(r, "topic");
    if (clock_mono_ms() - since >= s->lost_after_ms)
        return topic_lost(s->base.op.rc->err, topic, r->name, st, s->n_parts);
    if (s->lost_warned != since) {
        s->lost_warned = since;
        WError w = {0};
        topic_lost(&w, topic, r->name, st, s->n_parts);
        wlog_warn("source", "%s; the views reading it stop in %lld ms unless it comes back", w.msg,
                (long long)(s->lost_after_ms - (clock_mono_ms() - since)));
    }
    return 0;
}

/* Partition p's position s->next[p] is no longer in the log (retention or a
 * size limit deleted what the view had not read yet, or the topic was
 * recreated or truncated behind it). on_offset_gap = 'fail' (the default)
 * fails the view with the range lost; 'skip' lists the gap in
 * weir_source_errors, counts it and goes on from the oldest offset kept. */
static int offset_gap(SourceOp *s, int32_t p)
{
    RtOp *op = &s->base.op;
    const CatRelation *r = op->node->source;
    const char *topic = cat_option(r, "topic");
    WError qe = {0};
    int64_t low = 0;
    int64_t *high = xcalloc((size_t)s->n_parts, sizeof(int64_t));
    if (rt_kafka_source_start_offset(s->ks, p, &low, 5000, &qe) ||
        rt_kafka_source_end_offsets(s->ks, high, 5000, &qe)) {
        /* No verdict without the broker's bounds: ask again at the next poll. */
        free(high);
        wlog_info("source", "source \"%s\": partition %d of topic \"%s\" lost its position; asking again (%s)",
                r->name, (int)p, topic, qe.msg);
        return reassign_owned(s);
    }
    int64_t at = s->next[p], end = high[p];
    free(high);
    char what[320];
    if (at >= 0 && at < low)
        snprintf(what, sizeof what,
                 "offsets %lld to %lld of partition %d of topic \"%s\" were deleted before source \"%s\" read them "
                 "(retention or a size limit)",
                 (long long)at, (long long)low - 1, (int)p, topic, r->name);
    else if (at > end)
        snprintf(what, sizeof what,
                 "source \"%s\" had read partition %d of topic \"%s\" to offset %lld, but it now ends at %lld "
                 "(the topic was recreated or truncated)",
                 r->name, (int)p, topic, (long long)at, (long long)end);
    else
        return reassign_owned(s); /* the position is valid again (a stale report) */
    const char *policy = cat_option(r, "on_offset_gap");
    if (!policy || strcasecmp(policy, "skip") != 0) {
        werr(op->rc->err, RT_SQLSTATE_OFFSET_GAP, 0, "%s", what);
        werr_hint(op->rc->err,
                  "To accept the loss and continue from offset %lld: ALTER SOURCE %s SET (on_offset_gap = 'skip') "
                  "(the views stopped by it start again).",
                  (long long)low, r->name);
        return -1;
    }
    rt_source_gap(op, r, p, at, low, "%s; skipped (on_offset_gap = 'skip'), continuing from offset %lld", what,
                  (long long)low);
    s->next[p] = low;
    return reassign_owned(s);
}

static int source_poll(RtOp *op, int timeout_ms, bool *did_work)
{
    SourceOp *s = (SourceOp *)(void *)op;
    RtCtx *rc = op->rc;
    if (check_topic(s))
        return -1;
    if (s->n_owned == 0) {
        /* An instance with no partition to read must not hold the others'
         * watermark back at the exchanges: its input has ended. */
        if (!s->ended) {
            s->ended = true;
            *did_work = true;
            return rt_emit_watermark(op, TS_PLUS_INF);
        }
        return 0;
    }
    /* Gaps the last poll saw, now that its records have gone down. */
    int32_t gp;
    while (rt_kafka_source_take_gap(s->ks, &gp)) {
        if (offset_gap(s, gp))
            return -1;
        *did_work = true;
    }
    if (s->avro && s->avro_retry_ms && clock_mono_ms() < s->avro_retry_ms)
        return 0; /* the schema registry is down: wait before asking again */
    /* The wait for the broker is idle time, not the source's work (EXPLAIN ANALYZE). */
    int64_t t0 = clock_mono_ns();
    int n = rt_kafka_source_poll(s->ks, timeout_ms, s->recs, POLL_BATCH);
    op->counters.wait_ns += (uint64_t)(clock_mono_ns() - t0);
    if (n < 0)
        return 0; /* transient: the connector logs and retries */
    if (s->avro && n > 0) {
        int rcode = avro_prepare_batch(s, n, rc->err);
        if (rcode)
            return rcode < 0 ? -1 : 0;
    }
    if (n == 0 && !s->ended) {
        /* No data: a tick (every 100 ms) lets idle partitions stop holding the watermark back. */
        int64_t now = clock_mono_ms();
        if (now - s->last_tick_ms >= 100) {
            s->last_tick_ms = now;
            if (rt_emit_watermark(op, TS_MINUS_INF))
                return -1;
        }
    }
    if (n > 0)
        *did_work = true;
    /* Operators below may dead-letter a row of this batch (a far-future
     * event time): they find its raw record here. */
    rc->poll_recs = s->recs;
    rc->n_poll_recs = n > 0 ? n : 0;
    const PlanNode *node = op->node;
    int i = 0;
    while (i < n) {
        int32_t part = s->recs[i].partition;
        int j = i;
        while (j < n && s->recs[j].partition == part)
            j++;
        /* A Debezium update may make two rows of one record. */
        Chunk *c = chunk_new(rc->chunk_arena, node->out.n, node->out.types, (j - i) * (s->format == FMT_DEBEZIUM ? 2 : 1));
        /* Per instance, partitions are numbered among those it reads, so
         * the watermark operator's minimum is over these only. */
        c->src_partition = rt_op_shards(op) > 1 ? part / rt_op_shards(op) : part;
        c->src_n_partitions = rt_op_shards(op) > 1 ? s->n_owned : s->n_parts;
        c->src_offsets = arena_alloc(rc->chunk_arena, sizeof(int64_t) * (size_t)c->cap);
        for (int k = i; k < j; k++) {
            const RtKafkaRecord *rec = &s->recs[k];
            if (s->bound && part >= 0 && part < s->n_parts && rec->offset >= s->bound[part])
                continue; /* past the end of a bounded source */
            if (s->skipping && part >= 0 && part < s->n_parts && s->skipping[part]) {
                if (rec->timestamp_ms >= 0 && rec->timestamp_ms < s->skip_ms) {
                    s->next[part] = rec->offset + 1; /* before backfill_from: not part of the view */
                    continue;
                }
                s->skipping[part] = false;
            }
            rc->stats.records_in++;
            if (part >= 0 && part < s->n_parts)
                s->next[part] = rec->offset + 1;
            char errbuf[200];
            int row = c->n_rows;
            const CatRelation *src = node->source;
            if (s->format != FMT_PLAIN) {
                if ((s->format == FMT_UPSERT ? decode_upsert : decode_debezium)(s, rec, c, errbuf, sizeof errbuf) &&
                    rt_source_error(op, src, part, rec->offset, rec->value, rec->value ? rec->value_len : 0,
                                    "partition %d offset %lld: %s", part, (long long)rec->offset, errbuf))
                    return -1; /* on_error = 'fail' */
                for (int k2 = row; k2 < c->n_rows; k2++) {
                    c->src_offsets[k2] = rec->offset;
                    if (src->col_meta)
                        fill_meta(c, k2, rec, src->col_meta, s->n_cols);
                }
                continue;
            }
            if (!rec->value) {
                if (rt_source_error(op, src, part, rec->offset, NULL, 0, "partition %d offset %lld: empty record",
                                    part, (long long)rec->offset))
                    return -1;
                continue;
            }
            if ((s->avro ? rt_avro_decode_row(s->avro, rec->value, rec->value_len, c, row, errbuf, sizeof errbuf)
                         : rt_json_decode_row(rec->value, rec->value_len, s->n_cols, s->names, c, row, errbuf,
                                              sizeof errbuf)) ||
                apply_typmods(src, c, row, errbuf, sizeof errbuf)) {
                if (rt_source_error(op, src, part, rec->offset, rec->value, rec->value_len,
                                    "partition %d offset %lld: %s", part, (long long)rec->offset, errbuf))
                    return -1;
                continue;
            }
            if (s->not_null) {
                int bad = -1;
                for (int k = 0; k < s->n_cols && bad < 0; k++)
                    if (s->not_null[k] && c->cols[k].nulls[row])
                        bad = k;
                if (bad >= 0) {
                    if (rt_source_error(op, src, part, rec->offset, rec->value, rec->value_len,
                                        "partition %d offset %lld: NOT NULL column \"%s\" is missing or null", part,
                                        (long long)rec->offset, s->names[bad]))
                        return -1;
                    continue;
                }
            }
            if (src->col_meta)
                fill_meta(c, row, rec, src->col_meta, s->n_cols);
            rt_skew_apply(&s->skew, c, row, rec->timestamp_ms);
            c->ops[row] = OP_INSERT;
            c->src_offsets[row] = rec->offset;
            c->n_rows++;
        }
        if (c->n_rows && rt_emit(op, c))
            return -1;
        i = j;
    }
    rc->poll_recs = NULL;
    rc->n_poll_recs = 0;
    if (s->bound && !s->ended) {
        bool done = true;
        for (int p = 0; p < s->n_parts && done; p++)
            done = !owns(s, p) || s->bound[p] <= 0 || (s->next[p] >= 0 && s->next[p] >= s->bound[p]);
        if (done) {
            /* The end of a bounded input is a watermark of +infinity: every window fires
             * (a replay stops where its live twin is, which saw +infinity only if it ended). */
            s->ended = true;
            *did_work = true;
            return s->replay && !s->replay_inf ? 0 : rt_emit_watermark(op, TS_PLUS_INF);
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
        if (!owns(s, p))
            continue;
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

void rt_source_positions(RtOp *op, Buf *out)
{
    const SourceOp *s = (const SourceOp *)(const void *)op;
    if (op->node->kind != PN_SOURCE || op->vt != &SOURCE_VT)
        return;
    for (int p = 0, k = 0; p < s->n_parts; p++)
        if (owns(s, p))
            buf_printf(out, "%s%d:%lld", k++ ? " " : "", p, (long long)(s->next[p] > 0 ? s->next[p] : 0));
}

int rt_source_progress(RtOp *op, RtSourceProgress *out, int max)
{
    if (op->node->kind != PN_SOURCE || op->vt != &SOURCE_VT)
        return 0;
    SourceOp *s = (SourceOp *)(void *)op;
    int n = 0;
    for (int p = 0; p < s->n_parts && n < max; p++) {
        if (!owns(s, p))
            continue;
        RtSourceProgress *o = &out[n++];
        memset(o, 0, sizeof *o);
        snprintf(o->source, sizeof o->source, "%s", op->node->source->name);
        o->partition = p;
        int64_t lo = -1, hi = -1;
        bool known = rt_kafka_source_cached_offsets(s->ks, p, &lo, &hi);
        /* Before its first record a partition is at its first offset (or its pinned start). */
        o->position = s->next[p] >= 0 ? s->next[p] : known ? lo : -1;
        o->end_offset = known ? hi : -1;
        if (s->bound && (o->end_offset < 0 || s->bound[p] < o->end_offset))
            o->end_offset = s->bound[p];
    }
    return n;
}

int rt_source_partitions(RtOp *op)
{
    return op->node->kind == PN_SOURCE && op->vt == &SOURCE_VT ? ((const SourceOp *)(const void *)op)->n_parts : 0;
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
