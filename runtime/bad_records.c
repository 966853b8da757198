/*
 * bad_records.c: what a source does with a record it cannot use.
 *
 * rt_source_error (dataflow.c) counts a bad record and lists it in
 * weir_source_errors; then the source's on_error option decides:
 *
 *   'skip' (default)  nothing more: the view goes on past it.
 *   'fail'            the step fails with the record's error. Nothing past
 *                     the record reaches a checkpoint (the failing step is
 *                     the one that read it, and the engine drops the
 *                     dataflow), so reopening the dataflow reads it again.
 *                     The engine keeps the view stopped until ALTER
 *                     MATERIALIZED VIEW ... RESUME, which reopens it with
 *                     that one record marked to be skipped.
 *   'dead_letter'     the raw record (key and value unchanged) is produced
 *                     to the error topic with headers saying where it came
 *                     from and why it was rejected, and the view goes on.
 *
 * Dead letters are at-least-once: they are produced as they are found, and
 * rt_bad_records_flush (called first by rt_dataflow_checkpoint) waits for
 * their acknowledgements before the checkpoint that moves the offsets past
 * them can commit. A crash between the produce and the checkpoint reads the
 * records again and produces them again (the headers' partition and offset
 * identify duplicates). A delivery that fails breaks the dataflow: its next
 * step fails and the engine restarts it from the last checkpoint, which
 * produces them again.
 */
#include "runtime_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SQLSTATE_DATA_EXCEPTION "22000"
#define MAX_DLQ 4                 /* producers per dataflow: one per bootstrap address */
#define DLQ_FLUSH_MS 10000

typedef struct Skip {
    char source[64];
    int32_t partition;
    int64_t offset;
} Skip;

typedef struct Dlq {
    char *bootstrap;
    RtKafkaProducer *p;
    bool pending;                 /* produced since the last flush */
} Dlq;

typedef struct RtBadRecords {
    bool failed;                  /* the step stopped at a record (on_error = 'fail') */
    RtFailedRecord fail;
    int n_skips;
    Skip *skips;                  /* records RESUME said to skip */
    int n_dlq;
    Dlq dlq[MAX_DLQ];
    bool broken;                  /* a dead letter was lost: restart from the checkpoint */
    WError broken_err;
} RtBadRecords;

static RtBadRecords *bad_of(RtCtx *rc)
{
    if (!rc->bad)
        rc->bad = xcalloc(1, sizeof *rc->bad);
    return rc->bad;
}

RtOnError rt_on_error(const CatRelation *src)
{
    if (!src)
        return RT_ON_ERROR_SKIP;
    const char *v = cat_option(src, "on_error");
    if (v && !strcasecmp(v, "fail"))
        return RT_ON_ERROR_FAIL;
    if ((v && !strcasecmp(v, "dead_letter")) || (!v && cat_option(src, "error.topic")))
        return RT_ON_ERROR_DEAD_LETTER;
    return RT_ON_ERROR_SKIP;
}

void rt_dead_letter_topic(const CatRelation *src, char *out, size_t cap)
{
    const char *t = cat_option(src, "error.topic");
    if (t && *t)
        snprintf(out, cap, "%s", t);
    else
        snprintf(out, cap, "%s.dlq", cat_option(src, "topic") ? cat_option(src, "topic") : src->name);
}

static Dlq *dlq_for(RtCtx *rc, const CatRelation *src, WError *err)
{
    RtBadRecords *b = bad_of(rc);
    const char *boot = rt_source_bootstrap(src, rc->env);
    for (int i = 0; i < b->n_dlq; i++)
        if (!strcmp(b->dlq[i].bootstrap, boot))
            return &b->dlq[i];
    if (b->n_dlq == MAX_DLQ) {
        werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "a view may dead-letter to at most %d Kafka clusters", MAX_DLQ);
        return NULL;
    }
    Dlq *d = &b->dlq[b->n_dlq];
    if (rt_kafka_producer_open(boot, NULL, 0, &d->p, err))
        return NULL;
    d->bootstrap = xstrdup(boot);
    d->pending = false;
    b->n_dlq++;
    return d;
}

int rt_dead_letter_prepare(const CatRelation *src, const RtEnv *env, WError *err)
{
    if (rt_on_error(src) != RT_ON_ERROR_DEAD_LETTER)
        return 0;
    char topic[256];
    rt_dead_letter_topic(src, topic, sizeof topic);
    RtKafkaSource *ks;
    /* Opening a consumer on it creates it if missing (one partition). */
    if (rt_kafka_source_open(rt_source_bootstrap(src, env), topic, 1, NULL, 0, 10000, &ks, err)) {
        WError cause = *err;
        werr_clear(err);
        werr(err, cause.sqlstate, 0, "dead-letter topic \"%.200s\": %.300s", topic, cause.msg);
        return -1;
    }
    rt_kafka_source_close(ks);
    return 0;
}

int rt_bad_records_prepare(RtCtx *rc, const CatRelation *src, WError *err)
{
    if (rc->batch || rt_on_error(src) != RT_ON_ERROR_DEAD_LETTER)
        return 0;
    if (rt_dead_letter_prepare(src, rc->env, err))
        return -1;
    return dlq_for(rc, src, err) ? 0 : -1;
}

static const RtKafkaRecord *find_record(const RtCtx *rc, int32_t partition, int64_t offset)
{
    for (int i = 0; i < rc->n_poll_recs; i++)
        if (rc->poll_recs[i].partition == partition && rc->poll_recs[i].offset == offset)
            return &rc->poll_recs[i];
    return NULL;
}

static int dead_letter(RtOp *op, const CatRelation *src, int32_t partition, int64_t offset, const char *message)
{
    RtCtx *rc = op->rc;
    Dlq *d = dlq_for(rc, src, rc->err);
    if (!d)
        return -1;
    const RtKafkaRecord *rec = find_record(rc, partition, offset);
    char topic[256], part[16], off[24], ts[24];
    rt_dead_letter_topic(src, topic, sizeof topic);
    snprintf(part, sizeof part, "%d", (int)partition);
    snprintf(off, sizeof off, "%lld", (long long)offset);
    snprintf(ts, sizeof ts, "%lld", (long long)(rec ? rec->timestamp_ms : -1));
    RtKafkaProp h[] = {
        {"weir.view", rc->name ? rc->name : ""},
        {"weir.source", src->name},
        {"weir.topic", cat_option(src, "topic") ? cat_option(src, "topic") : ""},
        {"weir.partition", part},
        {"weir.offset", off},
        {"weir.timestamp", ts},
        {"weir.error", message},
    };
    if (rt_kafka_produce_headers(d->p, topic, -1, rec ? rec->key : NULL, rec ? rec->key_len : 0,
                                 rec ? rec->value : NULL, rec ? rec->value_len : 0, h,
                                 (int)(sizeof h / sizeof h[0]), rc->err))
        return -1;
    d->pending = true;
    return 0;
}

int rt_bad_record_route(RtOp *op, const CatRelation *src, int32_t partition, int64_t offset, const char *message)
{
    RtCtx *rc = op->rc;
    if (!src || rc->batch)
        return 0;
    RtOnError how = rt_on_error(src);
    if (how == RT_ON_ERROR_SKIP)
        return 0;
    if (rc->bad)
        for (int i = 0; i < rc->bad->n_skips; i++) {
            const Skip *k = &rc->bad->skips[i];
            if (k->partition == partition && k->offset == offset && !strcmp(k->source, src->name))
                return 0; /* RESUME: skipped once, as 'skip' would */
        }
    if (how == RT_ON_ERROR_DEAD_LETTER)
        return dead_letter(op, src, partition, offset, message);
    RtBadRecords *b = bad_of(rc);
    b->failed = true;
    snprintf(b->fail.source, sizeof b->fail.source, "%s", src->name);
    b->fail.partition = partition;
    b->fail.offset = offset;
    snprintf(b->fail.message, sizeof b->fail.message, "%s", message);
    werr_clear(rc->err); /* this is what stops the dataflow, whatever was noted before */
    werr(rc->err, SQLSTATE_DATA_EXCEPTION, 0, "bad record in source \"%s\" (on_error = 'fail'): %s", src->name,
         message);
    return -1;
}

int rt_bad_records_flush(RtCtx *rc, WError *err)
{
    RtBadRecords *b = rc->bad;
    if (!b)
        return 0;
    if (rt_bad_records_check(rc, err))
        return -1;
    for (int i = 0; i < b->n_dlq; i++) {
        Dlq *d = &b->dlq[i];
        if (!d->pending)
            continue;
        WError ferr = {0};
        if (rt_kafka_producer_flush(d->p, DLQ_FLUSH_MS, &ferr)) {
            b->broken = true;
            werr(&b->broken_err, ferr.sqlstate[0] ? ferr.sqlstate : SQLSTATE_IO_ERROR, 0,
                 "dead-letter records were not delivered: %s", ferr.msg);
            *err = b->broken_err;
            return -1;
        }
        d->pending = false;
    }
    return 0;
}

int rt_bad_records_check(RtCtx *rc, WError *err)
{
    if (!rc->bad || !rc->bad->broken)
        return 0;
    *err = rc->bad->broken_err;
    return -1;
}

void rt_bad_records_free(RtCtx *rc)
{
    RtBadRecords *b = rc->bad;
    if (!b)
        return;
    for (int i = 0; i < b->n_dlq; i++) {
        /* Whatever is still queued belongs to an epoch that was not
         * checkpointed: it is produced again when the records are re-read. */
        rt_kafka_producer_close(b->dlq[i].p);
        free(b->dlq[i].bootstrap);
    }
    free(b->skips);
    free(b);
    rc->bad = NULL;
}

bool rt_dataflow_failed_record_rc(RtCtx *rc, RtFailedRecord *out)
{
    if (!rc->bad || !rc->bad->failed)
        return false;
    *out = rc->bad->fail;
    return true;
}

void rt_dataflow_skip_record_rc(RtCtx *rc, const char *source, int32_t partition, int64_t offset)
{
    RtBadRecords *b = bad_of(rc);
    b->skips = xrealloc(b->skips, sizeof(Skip) * (size_t)(b->n_skips + 1));
    Skip *k = &b->skips[b->n_skips++];
    snprintf(k->source, sizeof k->source, "%s", source);
    k->partition = partition;
    k->offset = offset;
}
