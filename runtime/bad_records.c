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
 *   'dead_letter'     the raw record (key and value unchanged) goes to the
 *                     error topic with headers saying where it came from
 *                     and why it was rejected, and the view goes on.
 *
 * Dead letters are exactly-once, the way the Kafka sink is: the records
 * found during an epoch are kept in memory, and the checkpoint of that
 * epoch writes them as one batch into its metadata ("dlq/VIEW/EPOCH"), in
 * the same LMDB transaction as the offsets that move past them. Once that
 * checkpoint has committed, the batch is produced in one Kafka transaction
 * per cluster, together with a progress record "weir-dlq/ID/VIEW" -> epoch
 * in the control topic (kafka.h); the next checkpoint deletes the batch's
 * metadata. A crash before the checkpoint commits loses the batch, but the
 * records are read again and rejected again; a crash after it finds the
 * batch in the metadata, and the progress record tells whether its
 * transaction committed, so each batch reaches the topic once. The producer's
 * transactional.id is stable ("weir-dlq-ID-VIEW@BOOTSTRAP"), so a restarted
 * server fences the old one and aborts its open transaction first.
 *
 * ID is random, made once per data directory and kept in its metadata
 * ("dlq-instance", committed with the first batch): epochs start again at 1
 * in a new data directory, so without it a second server (or a wiped data
 * directory) with a view of the same name on the same Kafka would find
 * "its" epochs already recorded and skip them. Within one data directory
 * epochs only grow, so a view dropped and created again needs nothing.
 *
 * Delivery runs on a thread of the dataflow's own (started with the first
 * committed batch): when a checkpoint commits, the engine thread only moves
 * the committed batches to the thread's queue, so a slow or unreachable
 * Kafka never holds up the views. The thread delivers the queue in epoch
 * order; a delivery that fails leaves the batch at the head of the queue
 * (and in the metadata) and is retried with backoff (0.1 s doubling to
 * DLQ_RETRY_MS); the view is not stopped for it. Delivered epochs go back
 * to the engine thread through `gone`, and the next checkpoint deletes
 * their metadata. The thread touches no storage: the data directory's id
 * is read on the engine thread before the first batch is queued. (The
 * sinks' delivery thread in op_sink.c is tied to a sink connector's
 * netted changes and one target; a batch of dead letters is raw records
 * for up to MAX_DLQ clusters, so the loop is written again here, smaller.)
 * Closing the dataflow joins the thread, so a close during a delivery
 * waits for it (at most the Kafka timeouts, 15 s per call). A view renamed
 * while a batch is pending delivers it under the new name's progress key
 * (and so may repeat it).
 */
#include "runtime_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "log.h"

#define MAX_DLQ 4                 /* Kafka clusters per dataflow: one per bootstrap address */
#define DLQ_TXN_TIMEOUT_MS 15000  /* init / commit / abort of a dead-letter transaction */
#define DLQ_META "dlq/"           /* metadata name prefix: dlq/VIEW/EPOCH (16 hex digits) */
#define NO_LEN 0xffffffffu        /* an absent key or value in a batch */
#define DLQ_INSTANCE "dlq-instance" /* metadata: this data directory's random id (16 hex digits) */
#define DLQ_RETRY_MS 10000        /* the longest wait between two tries of a failed delivery */

typedef struct Skip {
    char source[64];
    int32_t partition;
    int64_t offset;
} Skip;

/* One Kafka cluster dead letters go to. */
typedef struct Dlq {
    char *bootstrap;
    RtKafkaProducer *p;           /* transactional; NULL until needed, and after a failure */
    bool last_known;              /* last reflects the control topic */
    uint64_t last;                /* highest epoch committed to this cluster */
} Dlq;

/* One epoch's dead letters: in the checkpoint's metadata from the moment
 * that checkpoint commits until every cluster has them. */
typedef struct DlqBatch {
    struct DlqBatch *next;        /* ascending epochs */
    uint64_t epoch;
    bool committed;               /* its checkpoint committed: deliverable */
    char *view;                   /* the view's name when it was queued (owned) */
    Buf data;                     /* records, encoded by put_record */
} DlqBatch;

typedef struct RtBadRecords {
    bool failed;                  /* the step stopped at a record (on_error = 'fail') */
    RtFailedRecord fail;
    int n_skips;
    Skip *skips;                  /* records RESUME said to skip */
    int n_dlq;
    Dlq dlq[MAX_DLQ];
    bool dead_letters;            /* a source dead-letters: checkpoint, deliver, recover batches */
    bool loaded;                  /* batches of an earlier run read back from the metadata */
    Buf open;                     /* records found in the epoch in progress */
    DlqBatch *batches;            /* sealed, not yet queued (engine thread only) */
    char instance[17];            /* the data directory's id, "" until read */
    bool id_warned;               /* reading it failed and was logged */
    /* The delivery thread. mu guards queue, n_gone/gone, stop and n_dlq
     * (dlq_for); a Dlq's producer and last epoch are the thread's alone. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool running;                 /* the thread was started */
    bool stop;
    DlqBatch *queue;              /* committed, delivered in epoch order; the head is in delivery */
    int n_gone;
    uint64_t *gone;               /* delivered epochs whose metadata the next checkpoint deletes */
} RtBadRecords;

static RtBadRecords *bad_of(RtCtx *rc)
{
    if (!rc->bad) {
        rc->bad = xcalloc(1, sizeof *rc->bad);
        pthread_mutex_init(&rc->bad->mu, NULL);
        pthread_cond_init(&rc->bad->cv, NULL);
    }
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

/* The cluster entry for bootstrap (added when new); NULL with err past MAX_DLQ. */
static Dlq *dlq_for(RtBadRecords *b, const char *boot, WError *err)
{
    /* Both threads look clusters up; entries never move or go before free. */
    pthread_mutex_lock(&b->mu);
    Dlq *d = NULL;
    for (int i = 0; i < b->n_dlq && !d; i++)
        if (!strcmp(b->dlq[i].bootstrap, boot))
            d = &b->dlq[i];
    if (!d && b->n_dlq == MAX_DLQ)
        werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "a view may dead-letter to at most %d Kafka clusters", MAX_DLQ);
    else if (!d) {
        d = &b->dlq[b->n_dlq++];
        *d = (Dlq){.bootstrap = xstrdup(boot)};
    }
    pthread_mutex_unlock(&b->mu);
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
    /* The control topic the dead-letter transactions record their epochs in. */
    return rt_kafka_progress_prepare(rt_source_bootstrap(src, env), err);
}

int rt_bad_records_prepare(RtCtx *rc, const CatRelation *src, WError *err)
{
    if (rc->batch || rt_on_error(src) != RT_ON_ERROR_DEAD_LETTER)
        return 0;
    if (rt_dead_letter_prepare(src, rc->env, err))
        return -1;
    RtBadRecords *b = bad_of(rc);
    b->dead_letters = true;
    return dlq_for(b, rt_source_bootstrap(src, rc->env), err) ? 0 : -1;
}

static const RtKafkaRecord *find_record(const RtCtx *rc, int32_t partition, int64_t offset)
{
    for (int i = 0; i < rc->n_poll_recs; i++)
        if (rc->poll_recs[i].partition == partition && rc->poll_recs[i].offset == offset)
            return &rc->poll_recs[i];
    return NULL;
}

/* ---- batch encoding: per record the bootstrap, topic, key, value (each a
 * u32 length, NO_LEN for an absent key or value, then the bytes), then a
 * u32 header count and each header's name and value the same way. ---- */

static void put_bytes(Buf *out, const void *p, size_t n, bool present)
{
    buf_put_u32be(out, present ? (uint32_t)n : NO_LEN);
    if (present && n)
        buf_append(out, p, n);
}

static void put_str(Buf *out, const char *s) { put_bytes(out, s, strlen(s), true); }

static void put_record(Buf *out, const char *boot, const char *topic, const RtKafkaRecord *rec,
                       const RtKafkaProp *h, int n_h)
{
    put_str(out, boot);
    put_str(out, topic);
    put_bytes(out, rec ? rec->key : NULL, rec ? rec->key_len : 0, rec && rec->key);
    put_bytes(out, rec ? rec->value : NULL, rec ? rec->value_len : 0, rec && rec->value);
    buf_put_u32be(out, (uint32_t)n_h);
    for (int i = 0; i < n_h; i++) {
        put_str(out, h[i].key);
        put_str(out, h[i].value);
    }
}

/* A reader over an encoded batch; bad is set on a malformed one. */
typedef struct Reader {
    const unsigned char *p, *end;
    bool bad;
} Reader;

static uint32_t get_u32(Reader *r)
{
    if (r->end - r->p < 4) {
        r->bad = true;
        return 0;
    }
    uint32_t v = (uint32_t)r->p[0] << 24 | (uint32_t)r->p[1] << 16 | (uint32_t)r->p[2] << 8 | r->p[3];
    r->p += 4;
    return v;
}

/* The next length-prefixed field: *n bytes at the result, NULL when absent. */
static const char *get_bytes(Reader *r, size_t *n)
{
    uint32_t len = get_u32(r);
    *n = 0;
    if (r->bad || len == NO_LEN)
        return NULL;
    if ((size_t)(r->end - r->p) < len) {
        r->bad = true;
        return NULL;
    }
    const char *v = (const char *)r->p;
    r->p += len;
    *n = len;
    return v;
}

/* Strings in a batch are not NUL-terminated: copies them into arena a. */
static char *get_str(Reader *r, Arena *a)
{
    size_t n;
    const char *v = get_bytes(r, &n);
    return arena_strndup(a, v ? v : "", n);
}

static int dead_letter(RtOp *op, const CatRelation *src, int32_t partition, int64_t offset, const char *message)
{
    RtCtx *rc = op->rc;
    RtBadRecords *b = bad_of(rc);
    const char *boot = rt_source_bootstrap(src, rc->env);
    if (!dlq_for(b, boot, rc->err))
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
    /* Produced once the checkpoint that covers this record has committed.
     * (The policy may have changed under a running view: ALTER SOURCE.) */
    b->dead_letters = true;
    put_record(&b->open, boot, topic, rec, h, (int)(sizeof h / sizeof h[0]));
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
    /* Dead letters are sealed per view by shard 0 (the planner keeps such
     * sources single); a source switched to dead_letter later by ALTER
     * SOURCE under a split view stops it with a clear error instead. */
    if (how == RT_ON_ERROR_DEAD_LETTER && rc->shard > 0)
        return werr(rc->err, SQLSTATE_NOT_SUPPORTED, 0,
                    "feature not supported: on_error = 'dead_letter' on source \"%s\" read by a view with "
                    "streaming_parallelism > 1 (set when the view was created without it)", src->name),
               werr_hint(rc->err, "Create the view again: it then reads this source on one instance."), -1;
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

/* ---- checkpoint, delivery, recovery ---- */

static void meta_name(const RtCtx *rc, uint64_t epoch, char *out, size_t cap)
{
    snprintf(out, cap, DLQ_META "%s/%016" PRIx64, rc->name ? rc->name : "", epoch);
}

/* Inserts batch in epoch order. */
static void batch_insert(RtBadRecords *b, DlqBatch *n)
{
    DlqBatch **pp = &b->batches;
    while (*pp && (*pp)->epoch < n->epoch)
        pp = &(*pp)->next;
    n->next = *pp;
    *pp = n;
}

int rt_bad_records_checkpoint(RtCtx *rc, StorCheckpoint *ck, uint64_t epoch, WError *err)
{
    RtBadRecords *b = rc->bad;
    char name[320];
    if (!b || !b->dead_letters || rc->batch)
        return 0;
    /* Delivered batches: a failed checkpoint leaves their metadata, which
     * recovery then finds already delivered. */
    pthread_mutex_lock(&b->mu);
    int n_gone = b->n_gone;
    uint64_t *gone = b->gone;
    b->n_gone = 0;
    b->gone = NULL;
    pthread_mutex_unlock(&b->mu);
    for (int i = 0; i < n_gone; i++) {
        meta_name(rc, gone[i], name, sizeof name);
        if (stor_checkpoint_delete_meta(ck, name, err)) {
            free(gone);
            return -1;
        }
    }
    free(gone);
    if (b->open.len) {
        DlqBatch *t = b->batches;
        while (t && t->next)
            t = t->next;
        if (!t || t->committed || t->epoch != epoch) {
            /* (a failed checkpoint is retried under the same epoch: its batch grows) */
            t = xcalloc(1, sizeof *t);
            t->epoch = epoch;
            batch_insert(b, t);
        }
        buf_append(&t->data, b->open.data, b->open.len);
        buf_reset(&b->open);
    }
    bool any = false;
    for (DlqBatch *t = b->batches; t && !any; t = t->next)
        any = !t->committed;
    if (any) {
        /* The id goes with the first batch (see the file comment). */
        Buf cur = {0};
        int found = stor_meta_get(rc->env->stor, DLQ_INSTANCE, &cur, err);
        buf_free(&cur);
        if (found < 0)
            return -1;
        if (!found) {
            uint64_t r = 0;
            char hex[17];
            if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
                r = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
            snprintf(hex, sizeof hex, "%016" PRIx64, r);
            if (stor_checkpoint_put_meta(ck, DLQ_INSTANCE, hex, 16, err))
                return -1;
        }
    }
    for (DlqBatch *t = b->batches; t; t = t->next) {
        if (t->committed)
            continue;
        meta_name(rc, t->epoch, name, sizeof name);
        if (stor_checkpoint_put_meta(ck, name, t->data.data, t->data.len, err))
            return -1;
    }
    return 0;
}

/* Opens cluster d's transactional producer (fencing an older incarnation)
 * and learns the last epoch its control topic has for this view. */
static int dlq_ready(Dlq *d, const char *view, const char *instance, const char *progress_key, WError *err)
{
    if (!d->p) {
        char txn_id[512];
        snprintf(txn_id, sizeof txn_id, "weir-dlq-%s-%s@%s", instance, view, d->bootstrap);
        RtKafkaProp props[] = {{"transactional.id", txn_id}};
        if (rt_kafka_producer_open(d->bootstrap, props, 1, &d->p, err))
            return -1;
        if (rt_kafka_producer_init_txn(d->p, DLQ_TXN_TIMEOUT_MS, err) < 0) {
            rt_kafka_producer_close(d->p);
            d->p = NULL;
            return -1;
        }
        d->last_known = false;
    }
    if (!d->last_known) {
        if (rt_kafka_progress_read(d->bootstrap, progress_key, &d->last, err) < 0)
            return -1;
        d->last_known = true;
    }
    return 0;
}

/* Produces the records of batch t that go to cluster d, and the progress
 * record, in one transaction. On failure the producer is aborted (or
 * dropped when its state is unknown) and the batch is left for a retry. */
static int deliver_to(Dlq *d, const DlqBatch *t, const char *instance, const char *progress_key, Arena *a,
                      WError *err)
{
    if (dlq_ready(d, t->view, instance, progress_key, err))
        return -1;
    if (t->epoch <= d->last)
        return 0; /* committed before a crash: exactly-once */
    int krc = rt_kafka_producer_begin_txn(d->p, err);
    Reader r = {(const unsigned char *)t->data.data, (const unsigned char *)t->data.data + t->data.len, false};
    while (krc == 0 && r.p < r.end) {
        char *boot = get_str(&r, a), *topic = get_str(&r, a);
        size_t kl, vl;
        const char *key = get_bytes(&r, &kl), *val = get_bytes(&r, &vl);
        uint32_t n_h = get_u32(&r);
        if (n_h > 64)
            r.bad = true;
        RtKafkaProp h[64];
        for (uint32_t i = 0; i < n_h && !r.bad; i++) {
            h[i].key = get_str(&r, a);
            h[i].value = get_str(&r, a);
        }
        if (r.bad) {
            /* Our own encoding: only a damaged data file gets here. */
            werr(err, SQLSTATE_IO_ERROR, 0, "dead letters of epoch %" PRIu64 " are damaged in the metadata",
                 t->epoch);
            krc = RT_KAFKA_ERR_ABORTABLE;
            break;
        }
        if (strcmp(boot, d->bootstrap) == 0 &&
            rt_kafka_produce_headers(d->p, topic, -1, key, kl, val, vl, h, (int)n_h, err))
            krc = RT_KAFKA_ERR_ABORTABLE;
    }
    if (krc == 0 && rt_kafka_progress_produce(d->p, progress_key, t->epoch, err))
        krc = RT_KAFKA_ERR_ABORTABLE;
    if (krc == 0)
        krc = rt_kafka_producer_commit_txn(d->p, DLQ_TXN_TIMEOUT_MS, err);
    if (krc == 0) {
        d->last = t->epoch;
        return 0;
    }
    WError ignored = {0};
    if (krc != RT_KAFKA_ERR_ABORTABLE || rt_kafka_producer_abort_txn(d->p, DLQ_TXN_TIMEOUT_MS, &ignored)) {
        /* Outcome unknown: a new producer fences this one, then the
         * progress record says whether the epoch made it. */
        rt_kafka_producer_close(d->p);
        d->p = NULL;
    }
    return -1;
}

/* Delivers batch t to every cluster it names (on the delivery thread). */
static int deliver(RtBadRecords *b, DlqBatch *t, WError *err)
{
    char key[320];
    snprintf(key, sizeof key, "weir-dlq/%s/%s", b->instance, t->view);
    Arena *a = arena_new(0);
    int rc_ = 0;
    Reader r = {(const unsigned char *)t->data.data, (const unsigned char *)t->data.data + t->data.len, false};
    /* Each record starts with its bootstrap: the first field after the
     * previous record. Collect the clusters, then one transaction each. */
    bool seen[MAX_DLQ] = {false};
    while (rc_ == 0 && r.p < r.end && !r.bad) {
        char *boot = get_str(&r, a);
        size_t n;
        get_bytes(&r, &n);
        get_bytes(&r, &n);
        get_bytes(&r, &n);
        uint32_t n_h = get_u32(&r);
        for (uint32_t i = 0; i < 2 * n_h && !r.bad; i++)
            get_bytes(&r, &n);
        Dlq *d = r.bad ? NULL : dlq_for(b, boot, err);
        if (!r.bad && !d)
            rc_ = -1;
        else if (d && !seen[d - b->dlq]) {
            seen[d - b->dlq] = true;
            rc_ = deliver_to(d, t, b->instance, key, a, err);
        }
    }
    if (rc_ == 0 && r.bad)
        rc_ = werr(err, SQLSTATE_IO_ERROR, 0, "dead letters of epoch %" PRIu64 " are damaged in the metadata",
                   t->epoch);
    arena_free(a);
    return rc_;
}

/* The data directory's id (written with the first batch's checkpoint). */
static int read_instance(RtCtx *rc, RtBadRecords *b, WError *err)
{
    Buf id = {0};
    int found = stor_meta_get(rc->env->stor, DLQ_INSTANCE, &id, err);
    if (found == 0)
        werr(err, SQLSTATE_INTERNAL, 0, "dead letters: metadata \"" DLQ_INSTANCE "\" is missing");
    else if (found > 0 && id.len != 16)
        werr(err, SQLSTATE_IO_ERROR, 0, "dead letters: metadata \"" DLQ_INSTANCE "\" is damaged");
    else if (found > 0)
        memcpy(b->instance, id.data, 16);
    buf_free(&id);
    return b->instance[0] ? 0 : -1;
}

/* The delivery thread: the queue's head until it is delivered, then the next. */
static void *deliver_main(void *arg)
{
    RtBadRecords *b = arg;
    int backoff = 100;
    bool warned = false;
    pthread_setname_np(pthread_self(), "weir-dlq");
    pthread_mutex_lock(&b->mu);
    while (!b->stop) {
        DlqBatch *t = b->queue;
        if (!t) {
            pthread_cond_wait(&b->cv, &b->mu);
            continue;
        }
        pthread_mutex_unlock(&b->mu);
        WError err = {0};
        int r = deliver(b, t, &err);
        pthread_mutex_lock(&b->mu);
        if (r) {
            if (!warned)
                wlog_warn("bad_records", "view %s: dead letters of epoch %" PRIu64 " not delivered yet (retried "
                                "with backoff, at least every %d s): %s", t->view, t->epoch, DLQ_RETRY_MS / 1000,
                        err.msg);
            warned = true;
            if (!b->stop)
                rt_cond_wait_ms(&b->cv, &b->mu, backoff);
            backoff = backoff < DLQ_RETRY_MS / 2 ? backoff * 2 : DLQ_RETRY_MS;
            continue;
        }
        if (warned)
            wlog_info("bad_records", "view %s: dead letters delivered again", t->view);
        warned = false;
        backoff = 100;
        b->queue = t->next;
        b->gone = xrealloc(b->gone, sizeof *b->gone * (size_t)(b->n_gone + 1));
        b->gone[b->n_gone++] = t->epoch;
        free(t->view);
        buf_free(&t->data);
        free(t);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

/* Reads back the batches an earlier run left in the metadata: their
 * checkpoints committed, whether they reached Kafka is for the progress
 * record to say. */
static int load_one(void *arg, const char *name, const void *val, size_t len)
{
    RtCtx *rc = arg;
    const char *e = strrchr(name, '/');
    char *end;
    uint64_t epoch = e ? strtoull(e + 1, &end, 16) : 0;
    if (!e || *end || epoch == 0)
        return 0;
    DlqBatch *t = xcalloc(1, sizeof *t);
    t->epoch = epoch;
    t->committed = true;
    buf_append(&t->data, val, len);
    batch_insert(rc->bad, t);
    return 0;
}

void rt_bad_records_committed(RtCtx *rc, uint64_t epoch)
{
    RtBadRecords *b = rc->bad;
    if (!b || !b->dead_letters || rc->batch)
        return;
    WError err = {0};
    if (!b->loaded) {
        char prefix[300];
        snprintf(prefix, sizeof prefix, DLQ_META "%s/", rc->name ? rc->name : "");
        /* Batches of this run are not in the list yet when they committed
         * now: take only the older ones from the metadata. */
        DlqBatch *mine = b->batches;
        b->batches = NULL;
        if (stor_meta_scan(rc->env->stor, prefix, load_one, rc, &err) < 0) {
            wlog_error("bad_records", "view %s: reading pending dead letters: %s", rc->name ? rc->name : "?", err.msg);
            werr_clear(&err);
        }
        DlqBatch *old = b->batches;
        b->batches = NULL;
        for (DlqBatch *t = old, *next; t; t = next) {
            next = t->next;
            bool dup = false;
            for (DlqBatch *m = mine; m; m = m->next)
                dup = dup || m->epoch == t->epoch;
            if (dup) {
                buf_free(&t->data);
                free(t);
            } else {
                batch_insert(b, t);
            }
        }
        for (DlqBatch *t = mine, *next; t; t = next) {
            next = t->next;
            batch_insert(b, t);
        }
        b->loaded = true;
    }
    for (DlqBatch *t = b->batches; t && t->epoch <= epoch; t = t->next)
        t->committed = true;
    if (!b->batches || !b->batches->committed)
        return;
    if (!b->instance[0] && read_instance(rc, b, &err)) {
        /* Left in the list: tried again at the next commit. */
        if (!b->id_warned)
            wlog_warn("bad_records", "view %s: dead letters not delivered yet: %s", rc->name ? rc->name : "?",
                    err.msg);
        b->id_warned = true;
        return;
    }
    pthread_mutex_lock(&b->mu);
    DlqBatch **tail = &b->queue;
    while (*tail)
        tail = &(*tail)->next;
    while (b->batches && b->batches->committed) {
        DlqBatch *t = b->batches;
        b->batches = t->next;
        t->next = NULL;
        t->view = xstrdup(rc->name ? rc->name : "");
        *tail = t;
        tail = &t->next;
    }
    if (!b->running) {
        if (pthread_create(&b->thread, NULL, deliver_main, b) == 0)
            b->running = true;
        else
            wlog_warn("bad_records", "view %s: cannot start the dead-letter delivery thread; retried at the next "
                            "checkpoint", rc->name ? rc->name : "?");
    }
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

bool rt_bad_records_pending(RtCtx *rc)
{
    RtBadRecords *b = rc->bad;
    if (!b)
        return false;
    pthread_mutex_lock(&b->mu);
    bool pending = b->queue != NULL;
    pthread_mutex_unlock(&b->mu);
    return pending || (b->batches && b->batches->committed);
}

void rt_bad_records_free(RtCtx *rc)
{
    RtBadRecords *b = rc->bad;
    if (!b)
        return;
    if (b->running) {
        pthread_mutex_lock(&b->mu);
        b->stop = true;
        pthread_cond_signal(&b->cv);
        pthread_mutex_unlock(&b->mu);
        /* A thread stuck inside a Kafka call keeps b (it uses nothing
         * else): left behind rather than waited for without bound. */
        if (rt_join_within(b->thread, RT_DELIVERY_JOIN_MS) < 0) {
            wlog_warn("bad_records", "dead letters: the delivery thread did not stop within %d s (blocked in "
                            "kafka); left behind, undelivered epochs are delivered by the next run",
                    RT_DELIVERY_JOIN_MS / 1000);
            rc->bad = NULL;
            return;
        }
    }
    /* What the thread had not delivered is in the metadata: the next run delivers it. */
    for (DlqBatch *t = b->queue, *next; t; t = next) {
        next = t->next;
        free(t->view);
        buf_free(&t->data);
        free(t);
    }
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    for (int i = 0; i < b->n_dlq; i++) {
        /* No transaction is left open between calls. */
        rt_kafka_producer_close(b->dlq[i].p);
        free(b->dlq[i].bootstrap);
    }
    /* Batches not delivered are in the metadata (committed) or belong to an
     * epoch that was not checkpointed (their records are read again). */
    for (DlqBatch *t = b->batches, *next; t; t = next) {
        next = t->next;
        free(t->view);
        buf_free(&t->data);
        free(t);
    }
    buf_free(&b->open);
    free(b->gone);
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
