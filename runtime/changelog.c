/*
 * changelog.c: changelog topics, the replica of a view's key-grouped state
 * in Kafka (runtime.h "Changelog topics", README-cluster.md).
 *
 * Producer. At a checkpoint, rt_changelog_capture walks the checkpoint's
 * frozen records (stor_checkpoint_changes: nothing is kept for views
 * without a changelog) and serializes the view's tables' changes into one
 * blob, which the checkpoint itself writes into LMDB as metadata
 * "cl.<view>.p.<epoch>": so after a crash between the LMDB commit and the
 * delivery the next start knows exactly what Kafka may not have (every
 * such blob still there) and sends it again. Re-sending is harmless: the
 * same values for the same keys, in the same order, before the marker.
 * After the commit the blob joins a queue; one sender thread delivers the
 * epochs in order: the changes, a flush (every one acknowledged), then a
 * marker per owned partition and a flush, so a marker never overtakes the
 * changes it closes; then the epoch's blob is deleted from LMDB (its own
 * small transaction, stor_meta_delete), and only then does epoch N+1 go
 * out. So a restart re-sends at most one delivered epoch, the newest:
 * the values Kafka has last for those keys, which compaction may keep.
 * While Kafka is away the view keeps running: epochs queue up, in memory
 * up to conf.memory_limit, past it only in LMDB (read back in turn).
 *
 * Restorer. Reads each key group's partition from offset 0, keeps the
 * changes after the partition's latest marker aside (copied) and moves
 * them into the apply batch when the next marker arrives; a batch goes to
 * LMDB (stor_changes_apply) every 8 MiB and at the end. What follows the
 * last marker is an epoch cut short: it is dropped. A standby keeps the
 * consumer and calls rt_changelog_restore_poll.
 *
 * Blob format (LMDB only, never on the wire): u8 version 1, u64 LE epoch,
 * then per change: u64 LE table id, u32 LE key length, u32 LE value
 * length (0xffffffff = delete), key, value.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kafka.h"
#include "runtime.h"

#define BLOB_VERSION 1
#define BLOB_HEADER 9
#define REC_HEADER 16
#define DEL_LEN 0xffffffffu
/* How long one flush waits before the epoch is purged and sent again. */
#define SEND_TIMEOUT_MS 10000
/* Backoff between failed attempts (doubling from the first). */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
/* A restore batch: one LMDB write transaction. */
#define APPLY_BATCH_BYTES (8u << 20)
/* Records taken per consumer poll. */
#define POLL_MAX 1024

static const uint8_t MARKER_KEY[12] = {0, 0, 0, 0, 0, 0, 0, 0, 'c', 'k', 'p', 't'};

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_le32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}
static uint64_t get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t now_usec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void topic_name(char *out, size_t n, const char *cluster, uint64_t view_id)
{
    snprintf(out, n, "_weir.%s.cl.%" PRIu64, cluster, view_id);
}

static void meta_name(char *out, size_t n, uint64_t view_id, uint64_t epoch)
{
    snprintf(out, n, "cl.%" PRIu64 ".p.%016" PRIx64, view_id, epoch);
}

/* The conf's copied arrays, shared by producer and restorer. */
typedef struct Conf {
    char *bootstrap;
    char *topic;
    uint64_t view_id;
    int g;
    uint64_t *tables;
    int n_tables;
    int *kgs;          /* owned key groups, sorted, distinct */
    int n_kgs;
    size_t memory_limit;
} Conf;

static int int_cmp(const void *a, const void *b) { return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b); }

static int conf_copy(Conf *c, const RtChangelogConf *in, WError *err)
{
    memset(c, 0, sizeof *c);
    if (!in->bootstrap || !in->cluster || in->key_groups < 1 || in->key_groups > 65536 || in->n_tables < 0 ||
        (in->n_tables && !in->table_ids) || in->n_kgs < 0 || (in->n_kgs && !in->kgs))
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "changelog: bad configuration (key groups %d, tables %d)",
                    in->key_groups, in->n_tables);
    char t[256];
    topic_name(t, sizeof t, in->cluster, in->view_id);
    c->bootstrap = xstrdup(in->bootstrap);
    c->topic = xstrdup(t);
    c->view_id = in->view_id;
    c->g = in->key_groups;
    c->n_tables = in->n_tables;
    c->tables = xmalloc(sizeof *c->tables * (size_t)(in->n_tables + 1));
    memcpy(c->tables, in->table_ids, sizeof *c->tables * (size_t)in->n_tables);
    c->n_kgs = in->kgs ? in->n_kgs : in->key_groups;
    c->kgs = xmalloc(sizeof *c->kgs * (size_t)(c->n_kgs + 1));
    for (int i = 0; i < c->n_kgs; i++) {
        c->kgs[i] = in->kgs ? in->kgs[i] : i;
        if (c->kgs[i] < 0 || c->kgs[i] >= c->g) {
            int bad = c->kgs[i];
            free(c->bootstrap), free(c->topic), free(c->tables), free(c->kgs);
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "changelog: key group %d is not below %d", bad,
                        in->key_groups);
        }
    }
    qsort(c->kgs, (size_t)c->n_kgs, sizeof *c->kgs, int_cmp);
    int n = 0;
    for (int i = 0; i < c->n_kgs; i++)
        if (n == 0 || c->kgs[n - 1] != c->kgs[i])
            c->kgs[n++] = c->kgs[i];
    c->n_kgs = n;
    c->memory_limit = in->memory_limit ? in->memory_limit : RT_CHANGELOG_DEFAULT_MEMORY;
    return 0;
}

static void conf_free(Conf *c)
{
    free(c->bootstrap);
    free(c->topic);
    free(c->tables);
    free(c->kgs);
}

static bool has_table(const Conf *c, uint64_t id)
{
    for (int i = 0; i < c->n_tables; i++)
        if (c->tables[i] == id)
            return true;
    return false;
}

/* ------------------------------------------------------------------------
 * Producer
 * ---------------------------------------------------------------------- */

/* A committed epoch waiting for delivery: blob in memory, or spilled
 * (blob.len 0: read back from LMDB). */
typedef struct Pending {
    uint64_t epoch;
    Buf blob;
    struct Pending *next;
} Pending;

struct RtChangelog {
    Conf c;
    StorEnv *env;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* queue changed, an epoch confirmed, stop */
    Pending *head, *tail;       /* guarded by mu */
    Buf cur;                    /* the blob of the checkpoint being written */
    uint64_t cur_epoch;
    bool stop;
    RtChangelogStats st;        /* mu */
};

typedef struct CaptureArg {
    RtChangelog *cl;
    Buf *b;
    WError *err;
} CaptureArg;

static int capture_one(void *arg, const StorChange *ch)
{
    CaptureArg *a = arg;
    const Conf *c = &a->cl->c;
    if (!has_table(c, ch->table_id))
        return 0;
    if (ch->klen < 2)
        return werr(a->err, SQLSTATE_INTERNAL, 0, "changelog: table %" PRIu64 " has a key of %zu bytes (no key group)",
                    ch->table_id, ch->klen);
    int kg = (((const uint8_t *)ch->key)[0] << 8) | ((const uint8_t *)ch->key)[1];
    if (kg >= c->g)
        return werr(a->err, SQLSTATE_INTERNAL, 0, "changelog: table %" PRIu64 " has a key of key group %d, not below %d",
                    ch->table_id, kg, c->g);
    size_t vlen = ch->del ? 0 : ch->vlen;
    size_t need = REC_HEADER + ch->klen + vlen;
    if (a->b->len + need > RT_CHANGELOG_MAX_EPOCH_BYTES || vlen >= DEL_LEN)
        return werr(a->err, SQLSTATE_PROGRAM_LIMIT, 0,
                    "changelog: one checkpoint's changes of view %" PRIu64 " exceed %zu bytes", c->view_id,
                    (size_t)RT_CHANGELOG_MAX_EPOCH_BYTES);
    uint8_t h[REC_HEADER];
    put_le64(h, ch->table_id);
    put_le32(h + 8, (uint32_t)ch->klen);
    put_le32(h + 12, ch->del ? DEL_LEN : (uint32_t)vlen);
    buf_reserve(a->b, need);
    buf_append(a->b, h, sizeof h);
    buf_append(a->b, ch->key, ch->klen);
    if (vlen)
        buf_append(a->b, ch->val, vlen);
    return 0;
}

int rt_changelog_capture(RtChangelog *cl, StorCheckpoint *ck, uint64_t epoch, WError *err)
{
    char name[96];
    buf_reset(&cl->cur);
    uint8_t h[BLOB_HEADER];
    h[0] = BLOB_VERSION;
    put_le64(h + 1, epoch);
    buf_append(&cl->cur, h, sizeof h);
    CaptureArg a = {cl, &cl->cur, err};
    if (stor_checkpoint_changes(ck, capture_one, &a))
        return -1;
    meta_name(name, sizeof name, cl->c.view_id, epoch);
    if (stor_checkpoint_put_meta(ck, name, cl->cur.data, cl->cur.len, err) < 0)
        return -1;
    cl->cur_epoch = epoch;
    return 0;
}

void rt_changelog_committed(RtChangelog *cl, uint64_t epoch, bool written)
{
    if (!written || epoch != cl->cur_epoch || cl->cur.len == 0) {
        buf_reset(&cl->cur);
        return;
    }
    Pending *p = xcalloc(1, sizeof *p);
    p->epoch = epoch;
    pthread_mutex_lock(&cl->mu);
    if (cl->st.queued_bytes + cl->cur.len <= cl->c.memory_limit) {
        p->blob = cl->cur; /* takes the buffer */
        memset(&cl->cur, 0, sizeof cl->cur);
        cl->st.queued_bytes += p->blob.len;
    } else {
        cl->st.spilled_epochs++;
        buf_reset(&cl->cur);
    }
    if (cl->tail)
        cl->tail->next = p;
    else
        cl->head = p;
    cl->tail = p;
    cl->st.queued_epochs++;
    pthread_cond_broadcast(&cl->cv);
    pthread_mutex_unlock(&cl->mu);
}

static bool stopping(RtChangelog *cl)
{
    pthread_mutex_lock(&cl->mu);
    bool s = cl->stop;
    pthread_mutex_unlock(&cl->mu);
    return s;
}

/* Sleeps ms unless asked to stop first. */
static void nap(RtChangelog *cl, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&cl->mu);
    if (!cl->stop)
        pthread_cond_timedwait(&cl->cv, &cl->mu, &ts);
    pthread_mutex_unlock(&cl->mu);
}

/* Flushes in short slices so close does not wait long. */
static int flush(RtChangelog *cl, RtKafkaProducer *p, WError *err)
{
    for (int waited = 0;; waited += 200) {
        if (stopping(cl))
            return werr(err, SQLSTATE_QUERY_CANCELED, 0, "changelog: stopping");
        int rc = rt_kafka_producer_flush(p, 200, err);
        if (rc == 0)
            return 0;
        if (rc != RT_KAFKA_ERR_RETRIABLE || waited >= SEND_TIMEOUT_MS)
            return -1;
    }
}

/* Sends one epoch: its changes, then the markers, each confirmed. */
static int send_epoch(RtChangelog *cl, RtKafkaProducer *p, const Buf *blob, uint64_t epoch, long *n_sent,
                      WError *err)
{
    const uint8_t *b = (const uint8_t *)blob->data;
    size_t len = blob->len;
    if (len < BLOB_HEADER || b[0] != BLOB_VERSION || get_le64(b + 1) != epoch)
        return werr(err, "XX001", 0, "changelog: the stored changes of epoch %" PRIu64 " are malformed", epoch);
    uint8_t key[8 + STOR_MAX_KEY];
    long n = 0;
    for (size_t off = BLOB_HEADER; off < len;) {
        if (len - off < REC_HEADER)
            return werr(err, "XX001", 0, "changelog: truncated change in epoch %" PRIu64, epoch);
        uint64_t tid = get_le64(b + off);
        uint32_t klen = get_le32(b + off + 8), vl = get_le32(b + off + 12);
        size_t vlen = vl == DEL_LEN ? 0 : vl;
        off += REC_HEADER;
        if (klen < 2 || klen > STOR_MAX_KEY || len - off < klen + vlen)
            return werr(err, "XX001", 0, "changelog: malformed change in epoch %" PRIu64, epoch);
        put_be64(key, tid);
        memcpy(key + 8, b + off, klen);
        int32_t part = (b[off] << 8) | b[off + 1];
        const void *val = vl == DEL_LEN ? NULL : b + off + klen;
        if (rt_kafka_produce_headers(p, cl->c.topic, part, key, 8 + klen, val, vlen, NULL, 0, err) < 0)
            return -1;
        off += klen + vlen;
        n++;
    }
    if (flush(cl, p, err) < 0)
        return -1;
    uint8_t ev[8];
    put_le64(ev, epoch);
    for (int i = 0; i < cl->c.n_kgs; i++)
        if (rt_kafka_produce(p, cl->c.topic, cl->c.kgs[i], MARKER_KEY, sizeof MARKER_KEY, ev, sizeof ev, err) < 0)
            return -1;
    if (flush(cl, p, err) < 0)
        return -1;
    *n_sent = n + cl->c.n_kgs;
    return 0;
}

static void note_failure(RtChangelog *cl, const WError *e)
{
    pthread_mutex_lock(&cl->mu);
    cl->st.send_failures++;
    size_t n = strnlen(e->msg, sizeof cl->st.last_error - 1);
    memcpy(cl->st.last_error, e->msg, n);
    cl->st.last_error[n] = 0;
    pthread_mutex_unlock(&cl->mu);
}

/* Makes sure the topic exists with G partitions (a topic of another
 * count is a configuration error that no retry fixes: it is reported in
 * the stats and retried slowly, never written to). */
static int topic_ready(RtChangelog *cl, WError *err)
{
    int n = 0;
    if (rt_kafka_topic_ensure(cl->c.bootstrap, cl->c.topic, cl->c.g, "compact", 2000, &n, err) < 0)
        return -1;
    if (n != cl->c.g)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "changelog topic \"%s\" has %d partitions, not %d",
                    cl->c.topic, n, cl->c.g);
    return 0;
}

/* Deletes a confirmed epoch's stored changes, retrying until it works
 * or the producer stops (false). */
static bool forget_epoch(RtChangelog *cl, uint64_t epoch)
{
    char name[96];
    meta_name(name, sizeof name, cl->c.view_id, epoch);
    for (int backoff = BACKOFF_MIN_MS;; backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2) {
        WError err = {0};
        if (stor_meta_delete(cl->env, name, &err) == 0)
            return true;
        note_failure(cl, &err);
        nap(cl, backoff);
        if (stopping(cl))
            return false;
    }
}

static void *sender_main(void *arg)
{
    RtChangelog *cl = arg;
    RtKafkaProducer *p = NULL;
    bool topic_ok = false;
    int backoff = BACKOFF_MIN_MS;
    static const RtKafkaProp props[] = {
        /* A record undelivered this long is reported, and the epoch sent again. */
        {"message.timeout.ms", "15000"},
    };
    Buf spilled = {0};
    for (;;) {
        pthread_mutex_lock(&cl->mu);
        while (!cl->stop && !cl->head)
            pthread_cond_wait(&cl->cv, &cl->mu);
        Pending *it = cl->stop ? NULL : cl->head;
        pthread_mutex_unlock(&cl->mu);
        if (!it)
            break;
        WError err = {0};
        int rc = 0;
        if (!p)
            rc = rt_kafka_producer_open(cl->c.bootstrap, props, 1, &p, &err);
        if (rc == 0 && !topic_ok && (rc = topic_ready(cl, &err)) == 0)
            topic_ok = true;
        const Buf *blob = &it->blob;
        if (rc == 0 && it->blob.len == 0) {
            char name[96];
            meta_name(name, sizeof name, cl->c.view_id, it->epoch);
            int got = stor_meta_get(cl->env, name, &spilled, &err);
            if (got == 0)
                rc = werr(&err, SQLSTATE_INTERNAL, 0, "changelog: the changes of epoch %" PRIu64 " are not in LMDB",
                          it->epoch);
            else if (got < 0)
                rc = -1;
            blob = &spilled;
        }
        long n_sent = 0;
        if (rc == 0)
            rc = send_epoch(cl, p, blob, it->epoch, &n_sent, &err);
        if (rc < 0) {
            if (stopping(cl))
                break;
            note_failure(cl, &err);
            /* Withdraw what is unacknowledged so the retry starts clean;
             * records already sent may still land (duplicates of the same
             * epoch: harmless). */
            if (p)
                rt_kafka_producer_purge(p);
            nap(cl, backoff);
            backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
            continue;
        }
        backoff = BACKOFF_MIN_MS;
        buf_reset(&spilled);
        /* Confirmed: forget the stored copy before the next epoch goes
         * out, so a restart re-sends at most this epoch (the same values
         * as Kafka has last for its keys: compaction-safe), never one
         * older than something already delivered. */
        if (!forget_epoch(cl, it->epoch))
            break;
        pthread_mutex_lock(&cl->mu);
        cl->head = it->next;
        if (!cl->head)
            cl->tail = NULL;
        cl->st.queued_bytes -= it->blob.len;
        cl->st.queued_epochs--;
        cl->st.confirmed_epoch = it->epoch;
        cl->st.records_sent += (uint64_t)n_sent;
        pthread_cond_broadcast(&cl->cv);
        pthread_mutex_unlock(&cl->mu);
        buf_free(&it->blob);
        free(it);
    }
    buf_free(&spilled);
    rt_kafka_producer_close(p);
    return NULL;
}

typedef struct ScanArg {
    RtChangelog *cl;
    size_t plen;
} ScanArg;

static int queue_stored(void *arg, const char *name, const void *val, size_t len)
{
    (void)val, (void)len;
    ScanArg *a = arg;
    uint64_t epoch = strtoull(name + a->plen, NULL, 16);
    Pending *p = xcalloc(1, sizeof *p);
    p->epoch = epoch;
    RtChangelog *cl = a->cl;
    if (cl->tail)
        cl->tail->next = p;
    else
        cl->head = p;
    cl->tail = p;
    cl->st.queued_epochs++;
    cl->st.spilled_epochs++;
    return 0;
}

int rt_changelog_open(const RtChangelogConf *conf, StorEnv *env, RtChangelog **out, WError *err)
{
    *out = NULL;
    RtChangelog *cl = xcalloc(1, sizeof *cl);
    if (conf_copy(&cl->c, conf, err) < 0) {
        free(cl);
        return -1;
    }
    cl->env = env;
    pthread_mutex_init(&cl->mu, NULL);
    pthread_cond_init(&cl->cv, NULL);
    /* Epochs committed and never confirmed (a crash, or Kafka away at the
     * last stop): names sort by epoch (fixed-width hex). */
    char prefix[64];
    snprintf(prefix, sizeof prefix, "cl.%" PRIu64 ".p.", conf->view_id);
    ScanArg a = {cl, strlen(prefix)};
    if (stor_meta_scan(env, prefix, queue_stored, &a, err) < 0)
        goto fail;
    if (cl->tail)
        cl->st.confirmed_epoch = cl->head->epoch - 1;
    if (pthread_create(&cl->thread, NULL, sender_main, cl)) {
        werr(err, SQLSTATE_OUT_OF_MEMORY, 0, "changelog: cannot start the sender thread: %s", strerror(errno));
        goto fail;
    }
    *out = cl;
    return 0;
fail:
    while (cl->head) {
        Pending *n = cl->head->next;
        free(cl->head);
        cl->head = n;
    }
    conf_free(&cl->c);
    free(cl);
    return -1;
}

int rt_changelog_wait(RtChangelog *cl, uint64_t epoch, int timeout_ms)
{
    uint64_t deadline = now_usec() + (uint64_t)timeout_ms * 1000u;
    pthread_mutex_lock(&cl->mu);
    while (cl->st.confirmed_epoch < epoch) {
        uint64_t now = now_usec();
        if (now >= deadline)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t left = deadline - now;
        ts.tv_sec += (time_t)(left / 1000000u);
        ts.tv_nsec += (long)(left % 1000000u) * 1000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&cl->cv, &cl->mu, &ts);
    }
    int ok = cl->st.confirmed_epoch >= epoch;
    pthread_mutex_unlock(&cl->mu);
    return ok;
}

void rt_changelog_stats(RtChangelog *cl, RtChangelogStats *out)
{
    pthread_mutex_lock(&cl->mu);
    *out = cl->st;
    pthread_mutex_unlock(&cl->mu);
}

void rt_changelog_close(RtChangelog *cl)
{
    if (!cl)
        return;
    pthread_mutex_lock(&cl->mu);
    cl->stop = true;
    pthread_cond_broadcast(&cl->cv);
    pthread_mutex_unlock(&cl->mu);
    pthread_join(cl->thread, NULL);
    while (cl->head) {
        Pending *n = cl->head->next;
        buf_free(&cl->head->blob);
        free(cl->head);
        cl->head = n;
    }
    buf_free(&cl->cur);
    pthread_mutex_destroy(&cl->mu);
    pthread_cond_destroy(&cl->cv);
    conf_free(&cl->c);
    free(cl);
}

/* ------------------------------------------------------------------------
 * Restorer
 * ---------------------------------------------------------------------- */

/* One owned key group's partition. */
typedef struct Part {
    int kg;
    int64_t next;      /* next offset to read */
    int64_t end;       /* catch-up target (end offset when catch_up began) */
    uint64_t epoch;    /* latest marker applied */
    Buf tail;          /* changes after that marker (blob records) */
} Part;

struct RtClRestore {
    Conf c;
    StorEnv *env;
    RtKafkaSource *src;
    Part *parts;
    int *slot;         /* partition -> index in parts, -1 not ours (G entries) */
    Buf batch;         /* blob records of complete epochs, to apply */
    StorChange *ch;    /* scratch for apply */
    size_t cap_ch;
    RtClRestoreStats st;
    uint64_t t0;
};

/* Applies the batch in one LMDB transaction. */
static int apply_batch(RtClRestore *r, WError *err)
{
    const uint8_t *b = (const uint8_t *)r->batch.data;
    size_t len = r->batch.len, n = 0;
    for (size_t off = 0; off < len;) {
        uint32_t klen = get_le32(b + off + 8), vl = get_le32(b + off + 12);
        size_t vlen = vl == DEL_LEN ? 0 : vl;
        if (n == r->cap_ch) {
            r->cap_ch = r->cap_ch ? 2 * r->cap_ch : 1024;
            r->ch = xrealloc(r->ch, sizeof *r->ch * r->cap_ch);
        }
        StorChange *c = &r->ch[n++];
        c->table_id = get_le64(b + off);
        c->key = b + off + REC_HEADER;
        c->klen = klen;
        c->val = b + off + REC_HEADER + klen;
        c->vlen = vlen;
        c->del = vl == DEL_LEN;
        off += REC_HEADER + klen + vlen;
    }
    uint64_t t0 = now_usec();
    int rc = stor_changes_apply(r->env, r->ch, n, err);
    r->st.apply_usec += now_usec() - t0;
    if (rc == 0)
        r->st.applied += n;
    buf_reset(&r->batch);
    return rc;
}

static int take_record(RtClRestore *r, const RtKafkaRecord *rec, WError *err)
{
    if (rec->partition < 0 || rec->partition >= r->c.g || r->slot[rec->partition] < 0)
        return 0;
    Part *pt = &r->parts[r->slot[rec->partition]];
    if (rec->offset < pt->next)
        return 0; /* seen already */
    pt->next = rec->offset + 1;
    r->st.records++;
    r->st.bytes += rec->key_len + rec->value_len;
    const uint8_t *k = rec->key;
    if (rec->key_len == sizeof MARKER_KEY && !memcmp(k, MARKER_KEY, sizeof MARKER_KEY)) {
        if (!rec->value || rec->value_len != 8)
            return werr(err, "XX001", 0, "changelog \"%s\" partition %d: a marker at offset %" PRId64 " is malformed",
                        r->c.topic, pt->kg, rec->offset);
        uint64_t e = get_le64(rec->value);
        /* An epoch at or below the one applied is a re-send of a complete
         * epoch after a producer restart: its changes are applied already
         * (and newer ones may follow them), so they are dropped. */
        if (e > pt->epoch) {
            pt->epoch = e;
            buf_append(&r->batch, pt->tail.data, pt->tail.len);
        }
        buf_reset(&pt->tail);
        if (r->batch.len >= APPLY_BATCH_BYTES)
            return apply_batch(r, err);
        return 0;
    }
    if (!k || rec->key_len < 10 || rec->key_len > 8 + STOR_MAX_KEY || ((k[8] << 8) | k[9]) != pt->kg)
        return werr(err, "XX001", 0,
                    "changelog \"%s\" partition %d: the record at offset %" PRId64 " has a malformed key",
                    r->c.topic, pt->kg, rec->offset);
    uint64_t tid = get_be64(k);
    if (!has_table(&r->c, tid))
        return 0;
    if (rec->value_len >= DEL_LEN)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "changelog: a value of %zu bytes", rec->value_len);
    uint8_t h[REC_HEADER];
    size_t klen = rec->key_len - 8;
    put_le64(h, tid);
    put_le32(h + 8, (uint32_t)klen);
    put_le32(h + 12, rec->value ? (uint32_t)rec->value_len : DEL_LEN);
    buf_append(&pt->tail, h, sizeof h);
    buf_append(&pt->tail, k + 8, klen);
    if (rec->value)
        buf_append(&pt->tail, rec->value, rec->value_len);
    return 0;
}

static uint64_t least_epoch(const RtClRestore *r)
{
    uint64_t e = UINT64_MAX;
    for (int i = 0; i < r->c.n_kgs; i++)
        if (r->parts[i].epoch < e)
            e = r->parts[i].epoch;
    return r->c.n_kgs ? e : 0;
}

void rt_changelog_restore_close(RtClRestore *r)
{
    if (!r)
        return;
    rt_kafka_source_close(r->src);
    for (int i = 0; r->parts && i < r->c.n_kgs; i++)
        buf_free(&r->parts[i].tail);
    free(r->parts);
    free(r->slot);
    buf_free(&r->batch);
    free(r->ch);
    conf_free(&r->c);
    free(r);
}

int rt_changelog_restore_open(const RtChangelogConf *conf, StorEnv *env, int timeout_ms, RtClRestore **out,
                              WError *err)
{
    *out = NULL;
    RtClRestore *r = xcalloc(1, sizeof *r);
    r->t0 = now_usec();
    if (conf_copy(&r->c, conf, err) < 0) {
        free(r);
        return -1;
    }
    r->env = env;
    int n = 0;
    if (rt_kafka_topic_ensure(r->c.bootstrap, r->c.topic, r->c.g, "compact", timeout_ms, &n, err) < 0)
        goto fail;
    if (n != r->c.g) {
        werr(err, SQLSTATE_INVALID_PARAMETER, 0, "changelog topic \"%s\" has %d partitions, not %d", r->c.topic, n,
             r->c.g);
        goto fail;
    }
    if (rt_kafka_source_open(r->c.bootstrap, r->c.topic, 0, NULL, 0, timeout_ms, &r->src, err) < 0)
        goto fail;
    r->parts = xcalloc((size_t)r->c.n_kgs + 1, sizeof *r->parts);
    r->slot = xmalloc(sizeof *r->slot * (size_t)r->c.g);
    for (int i = 0; i < r->c.g; i++)
        r->slot[i] = -1;
    int32_t *pids = xmalloc(sizeof *pids * ((size_t)r->c.n_kgs + 1));
    int64_t *offs = xmalloc(sizeof *offs * ((size_t)r->c.n_kgs + 1));
    uint8_t *prefixes = xmalloc(2 * ((size_t)r->c.n_kgs + 1));
    int rc = 0;
    for (int i = 0; i < r->c.n_kgs && rc == 0; i++) {
        int kg = r->c.kgs[i];
        r->parts[i].kg = kg;
        r->slot[kg] = i;
        pids[i] = kg;
        offs[i] = 0;
        prefixes[2 * i] = (uint8_t)(kg >> 8);
        prefixes[2 * i + 1] = (uint8_t)kg;
        /* A partition that lost its first records (retention, or the
         * embedded broker's size cap) cannot rebuild the state: refuse
         * rather than restore a part of it. Compaction keeps offset 0's
         * place (the log start stays), so it is not refused. */
        int64_t start = 0;
        rc = rt_kafka_source_start_offset(r->src, kg, &start, timeout_ms, err);
        if (rc == 0 && start > 0)
            rc = werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, 0,
                      "changelog \"%s\" partition %d starts at offset %" PRId64 ": its first records are gone",
                      r->c.topic, kg, start);
    }
    if (rc < 0 && err && !strcmp(err->sqlstate, SQLSTATE_OBJECT_NOT_IN_STATE))
        werr_hint(err, "Restore from a Kafka whose changelog topics are compacted, never deleted by size or time "
                       "(cleanup.policy=compact); the embedded broker keeps ~5 MiB per partition.");
    for (int t = 0; t < r->c.n_tables && rc == 0; t++)
        rc = stor_table_drop_prefixes(env, r->c.tables[t], prefixes, 2, (size_t)r->c.n_kgs, err);
    if (rc == 0)
        rc = rt_kafka_source_assign(r->src, r->c.n_kgs, pids, offs, err);
    free(pids);
    free(offs);
    free(prefixes);
    if (rc < 0)
        goto fail;
    *out = r;
    return 0;
fail:
    rt_changelog_restore_close(r);
    return -1;
}

/* Reads what arrives within timeout_ms (the first record), applying
 * complete epochs. Returns records taken, or <0. */
static int read_some(RtClRestore *r, int timeout_ms, WError *err)
{
    RtKafkaRecord recs[POLL_MAX];
    int n = rt_kafka_source_poll(r->src, timeout_ms, recs, POLL_MAX);
    if (n < 0)
        return werr(err, SQLSTATE_IO_ERROR, 0, "changelog \"%s\": the consumer failed", r->c.topic);
    for (int i = 0; i < n; i++)
        if (take_record(r, &recs[i], err) < 0)
            return -1;
    return n;
}

int rt_changelog_restore_catch_up(RtClRestore *r, int timeout_ms, uint64_t *epoch, WError *err)
{
    int np = rt_kafka_source_partition_count(r->src);
    int64_t *ends = xmalloc(sizeof *ends * (size_t)(np + 1));
    int rc = rt_kafka_source_end_offsets(r->src, ends, timeout_ms, err);
    for (int i = 0; i < r->c.n_kgs && rc == 0; i++)
        r->parts[i].end = ends[r->parts[i].kg];
    free(ends);
    if (rc < 0)
        return -1;
    uint64_t deadline = now_usec() + (uint64_t)timeout_ms * 1000u;
    for (;;) {
        bool done = true;
        for (int i = 0; i < r->c.n_kgs; i++)
            if (r->parts[i].next < r->parts[i].end)
                done = false;
        if (done)
            break;
        if (now_usec() >= deadline)
            return werr(err, SQLSTATE_CONNECTION_FAILURE, 0, "changelog \"%s\": restore not done within %d ms",
                        r->c.topic, timeout_ms);
        if (read_some(r, 100, err) < 0)
            return -1;
    }
    if (r->batch.len && apply_batch(r, err) < 0)
        return -1;
    r->st.usec = now_usec() - r->t0;
    *epoch = least_epoch(r);
    return 0;
}

int rt_changelog_restore_poll(RtClRestore *r, int timeout_ms, uint64_t *epoch, WError *err)
{
    int n = read_some(r, timeout_ms, err);
    /* Drain what is already fetched without waiting again. */
    while (n == POLL_MAX)
        n = read_some(r, 0, err);
    if (n < 0)
        return -1;
    if (r->batch.len && apply_batch(r, err) < 0)
        return -1;
    *epoch = least_epoch(r);
    return 0;
}

void rt_changelog_restore_stats(RtClRestore *r, RtClRestoreStats *out) { *out = r->st; }

int rt_changelog_restore(const RtChangelogConf *conf, StorEnv *env, int timeout_ms, uint64_t *epoch,
                         RtClRestoreStats *stats, WError *err)
{
    RtClRestore *r;
    if (rt_changelog_restore_open(conf, env, timeout_ms, &r, err) < 0)
        return -1;
    int rc = rt_changelog_restore_catch_up(r, timeout_ms, epoch, err);
    if (stats)
        *stats = r->st;
    rt_changelog_restore_close(r);
    return rc;
}
