/*
 * op_sink.c: delivering a view's changes to an external system, exactly once.
 *
 * The sink operator hangs off a view's materialize operator and sees its
 * changelog. Between two checkpoints it nets the changes per key (the
 * row at the start of the epoch, the row at its end; see sink.h). At the
 * checkpoint it seals them into the epoch's batch, written to its state
 * table in the same LMDB transaction as the view's state and the source
 * offsets. Once that transaction commits, the batch goes to a delivery
 * thread, which hands it to the connector's write_epoch(): one target
 * transaction that also records the epoch. After a crash, committed but
 * undelivered batches are in the table; the target's last_epoch() says
 * which of them it already has, and only the rest are delivered. A batch
 * is deleted from the table (at a later checkpoint) once delivered.
 *
 * A target that is down or rejects a batch does not stop the view: the
 * thread retries with backoff and reports the state in rt_sink_status.
 *
 * Table layout: key 8-byte big-endian epoch -> encoded batch; key 0xFF ->
 * "started" marker (the initial snapshot of the view was taken).
 */
#include "runtime_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "bytemap.h"
#include "crashpoint.h"
#include "sink.h"

static const unsigned char STARTED_KEY[1] = {0xff};

typedef struct Batch {
    struct Batch *next;
    uint64_t epoch;
    int n;                    /* changes */
    size_t len;
    char *data;               /* encoded: per change flags byte, [before row], [after row] */
} Batch;

struct RtSink {
    RtOp op;
    const RtSinkConnector *conn;
    const RtSinkSpec *spec;
    int *cols;                /* view column of each spec column */
    int n_key;
    int *key;                 /* view columns netted on (the spec's pk, or none for append-only) */
    Arena *pend_arena;        /* the open epoch's changes */
    ByteMap pend;
    uint64_t seq;             /* append-only: a unique key per change */
    bool started;             /* the initial snapshot is part of some epoch */
    Batch *sealed;            /* in the table, waiting for the checkpoint to commit */

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    Batch *queue, *queue_tail; /* committed, to deliver in epoch order */
    uint64_t *done;           /* delivered epochs whose batches can be deleted */
    int n_done, cap_done;
    RtSinkWriter *writer;
    uint64_t delivered;       /* last epoch the target has */
    uint64_t rows_delivered;
    uint64_t rows_rejected;   /* since start, over writers reopened */
    uint64_t rej_seen;        /* the current writer's count already added */
    char state[32];
    char last_error[320];
    Buf kbuf, vbuf;
};

const char *rt_sink_option(const RtSinkSpec *spec, const char *key)
{
    for (int i = 0; i < spec->n_options; i++)
        if (strcasecmp(spec->options[i].key, key) == 0)
            return spec->options[i].value;
    return NULL;
}

/* ---- blackhole: discards, for benchmarks ---- */

static int bh_open(const RtSinkSpec *spec, RtSinkWriter **out, WError *err)
{
    *out = (RtSinkWriter *)xcalloc(1, sizeof(uint64_t));
    return 0;
}
static int bh_last(RtSinkWriter *w, uint64_t *epoch, WError *err)
{
    *epoch = *(uint64_t *)w;
    return 0;
}
static int bh_write(RtSinkWriter *w, uint64_t epoch, int n, const RtSinkChange *c, WError *err)
{
    *(uint64_t *)w = epoch;
    return 0;
}
static void bh_close(RtSinkWriter *w) { free(w); }

static int bh_reset(RtSinkWriter *w, WError *err)
{
    *(uint64_t *)w = 0;
    return 0;
}

const RtSinkConnector rt_sink_blackhole = {"blackhole", bh_open, bh_last, bh_write, bh_reset, bh_close, NULL};

const RtSinkConnector *rt_sink_connector(const char *name)
{
    static const RtSinkConnector *all[] = {&rt_sink_postgres, &rt_sink_sqlite, &rt_sink_kafka, &rt_sink_blackhole};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcasecmp(all[i]->name, name) == 0)
            return all[i];
    return NULL;
}

/* ---- netting ---- */

static void spec_row(RtSink *s, const Chunk *c, int r, Value *out)
{
    for (int i = 0; i < s->spec->n_cols; i++)
        chunk_get(c, s->cols[i], r, &out[i]);
}

/* One key's net change in the open epoch (rows encoded with row_encode). */
typedef struct Net {
    char *before;             /* NULL: the key had no row when the epoch began */
    size_t blen;
    char *after;              /* NULL: the key has no row now */
    size_t alen;
} Net;

static int add_change(RtSink *s, const Value *row, const Value *keyvals, bool add)
{
    RtCtx *rc = s->op.rc;
    buf_reset(&s->kbuf);
    if (s->n_key) {
        key_encode(&s->kbuf, keyvals, s->n_key);
    } else {
        if (!add)
            return werr(rc->err, SQLSTATE_INVALID_PARAMETER, 0,
                        "sink \"%s\" is append-only but its input retracted a row", s->spec->name);
        unsigned char k[8];
        put_be64(k, s->seq++);
        buf_append(&s->kbuf, k, 8);
    }
    buf_reset(&s->vbuf);
    row_encode(&s->vbuf, row, s->spec->n_cols);
    int created;
    ByteMapEntry *e = bytemap_get(&s->pend, s->kbuf.data, s->kbuf.len, 1, &created);
    Net *net = e->ptr;
    if (created) {
        net = arena_zalloc(s->pend_arena, sizeof *net);
        e->ptr = net;
        /* The first change of a key in the epoch tells its starting row: a
         * retraction carries it; an insert means there was none. */
        if (!add) {
            net->before = arena_strndup(s->pend_arena, s->vbuf.data, s->vbuf.len);
            net->blen = s->vbuf.len;
        }
    }
    if (add) {
        net->after = arena_strndup(s->pend_arena, s->vbuf.data, s->vbuf.len);
        net->alen = s->vbuf.len;
    } else {
        net->after = NULL;
        net->alen = 0;
    }
    return 0;
}

static int sink_push(RtOp *op, Chunk *c)
{
    RtSink *s = (RtSink *)op;
    Value row[WEIR_ROW_VALUES], key[WEIR_MAX_KEY_COLUMNS];
    if (s->spec->n_cols > WEIR_ROW_VALUES || s->n_key > WEIR_MAX_KEY_COLUMNS)
        return werr(op->rc->err, SQLSTATE_PROGRAM_LIMIT, 0, "too many sink columns");
    for (int r = 0; r < c->n_rows; r++) {
        spec_row(s, c, r, row);
        for (int k = 0; k < s->n_key; k++)
            chunk_get(c, s->key[k], r, &key[k]);
        if (add_change(s, row, key, rowop_is_add(c->ops[r])))
            return -1;
    }
    return 0;
}

static int sink_watermark(RtOp *op, int64_t wm) { return 0; }

/* Encodes the open epoch's net changes. Keys with no net change are left out. */
static Batch *seal(RtSink *s, uint64_t epoch)
{
    Buf b = BUF_INIT;
    int n = 0;
    for (int i = 0; i < s->pend.n; i++) {
        Net *net = s->pend.entries[i].ptr;
        if (!net->before && !net->after)
            continue; /* inserted and deleted within the epoch */
        if (net->before && net->after && net->blen == net->alen && memcmp(net->before, net->after, net->alen) == 0)
            continue; /* updated back to what it was */
        buf_put_u8(&b, (uint8_t)((net->before ? 1 : 0) | (net->after ? 2 : 0)));
        if (net->before)
            buf_append(&b, net->before, net->blen);
        if (net->after)
            buf_append(&b, net->after, net->alen);
        n++;
    }
    arena_reset(s->pend_arena);
    bytemap_init(&s->pend, s->pend_arena);
    if (n == 0) {
        buf_free(&b);
        return NULL;
    }
    Batch *bt = xcalloc(1, sizeof *bt);
    bt->epoch = epoch;
    bt->n = n;
    bt->len = b.len;
    bt->data = buf_take(&b);
    return bt;
}

static void batch_free(Batch *b)
{
    if (b) {
        free(b->data);
        free(b);
    }
}

/* Decodes a batch into changes; values point into b->data and vals. */
static int decode_batch(const RtSink *s, const Batch *b, RtSinkChange *ch, Value *vals)
{
    int n = s->spec->n_cols;
    const char *p = b->data, *end = b->data + b->len;
    for (int i = 0; i < b->n; i++) {
        if (p >= end)
            return -1;
        uint8_t f = (uint8_t)*p++;
        ch[i].before = ch[i].after = NULL;
        for (int side = 0; side < 2; side++) {
            if (!(f & (1 << side)))
                continue;
            size_t used;
            Value *v = vals + ((size_t)i * 2 + (size_t)side) * (size_t)n;
            if (row_decode_prefix(p, (size_t)(end - p), v, n, &used))
                return -1;
            for (int k = 0; k < n; k++)
                v[k].type = s->spec->col_types[k];
            p += used;
            if (side == 0)
                ch[i].before = v;
            else
                ch[i].after = v;
        }
    }
    return p == end ? 0 : -1;
}

/* ---- delivery ---- */

static void set_state(RtSink *s, const char *st, const char *err)
{
    snprintf(s->state, sizeof s->state, "%s", st);
    if (err)
        snprintf(s->last_error, sizeof s->last_error, "%.310s", err);
}

static void *deliver_main(void *arg)
{
    RtSink *s = arg;
    int backoff = 100;
    pthread_setname_np(pthread_self(), "weir-sink");
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        if (!s->writer) {
            RtSinkWriter *w = NULL;
            uint64_t last = 0;
            WError err = {0};
            pthread_mutex_unlock(&s->mu);
            int rc = s->conn->open(s->spec, &w, &err);
            if (!rc && s->conn->last_epoch(w, &last, &err)) {
                s->conn->close(w);
                rc = -1;
            }
            pthread_mutex_lock(&s->mu);
            if (rc) {
                set_state(s, "unreachable", err.msg);
                rt_cond_wait_ms(&s->cv, &s->mu, backoff);
                backoff = backoff < 10000 ? backoff * 2 : 10000;
                continue;
            }
            s->writer = w;
            if (last > s->delivered)
                s->delivered = last;
            set_state(s, "running", NULL);
        }
        Batch *b = s->queue;
        if (!b) {
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        int rc = 0;
        WError err = {0};
        if (b->epoch > s->delivered) {
            pthread_mutex_unlock(&s->mu);
            RtSinkChange *ch = xcalloc((size_t)b->n, sizeof *ch);
            Value *vals = xcalloc((size_t)b->n * 2 * (size_t)(s->spec->n_cols ? s->spec->n_cols : 1), sizeof(Value));
            if (decode_batch(s, b, ch, vals))
                rc = werr(&err, SQLSTATE_INTERNAL, 0, "corrupt sink batch for epoch %llu", (unsigned long long)b->epoch);
            else {
                crashpoint("sink_before_write");
                rc = s->conn->write_epoch(s->writer, b->epoch, b->n, ch, &err);
                if (!rc)
                    crashpoint("sink_after_write");
            }
            free(ch);
            free(vals);
            pthread_mutex_lock(&s->mu);
        }
        if (rc) {
            set_state(s, "retrying", err.msg);
            /* A broken connection is reopened; the epoch is retried as a whole. */
            s->conn->close(s->writer);
            s->writer = NULL;
            s->rej_seen = 0;
            rt_cond_wait_ms(&s->cv, &s->mu, backoff);
            backoff = backoff < 10000 ? backoff * 2 : 10000;
            continue;
        }
        backoff = 100;
        if (b->epoch > s->delivered) {
            s->delivered = b->epoch;
            s->rows_delivered += (uint64_t)b->n;
        }
        RtSinkRejects rej = {0};
        if (s->conn->rejects)
            s->conn->rejects(s->writer, &rej);
        if (rej.rows > s->rej_seen) {
            /* Rows the target refused went to its weir_sink_rejects: the sink
             * runs on, and says so where its errors are read. */
            s->rows_rejected += rej.rows - s->rej_seen;
            s->rej_seen = rej.rows;
            char msg[400];
            snprintf(msg, sizeof msg, "%llu row(s) refused by the target, kept in its weir_sink_rejects; last: %s",
                     (unsigned long long)s->rows_rejected, rej.last);
            set_state(s, "running", msg);
        } else
            set_state(s, "running", NULL);
        s->queue = b->next;
        if (!s->queue)
            s->queue_tail = NULL;
        if (s->n_done == s->cap_done) {
            s->cap_done = s->cap_done ? s->cap_done * 2 : 16;
            s->done = xrealloc(s->done, sizeof(uint64_t) * (size_t)s->cap_done);
        }
        s->done[s->n_done++] = b->epoch;
        batch_free(b);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void enqueue(RtSink *s, Batch *b)
{
    b->next = NULL;
    if (s->queue_tail)
        s->queue_tail->next = b;
    else
        s->queue = b;
    s->queue_tail = b;
}

/* ---- checkpoint hooks (engine thread) ---- */

static int sink_flush_state(RtOp *op, uint64_t epoch)
{
    RtSink *s = (RtSink *)op;
    WError *err = op->rc->err;
    unsigned char k[8];
    /* Batches the target has: their rows go with this checkpoint. */
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_done; i++) {
        put_be64(k, s->done[i]);
        if (stor_table_delete(op->table, k, 8, err)) {
            pthread_mutex_unlock(&s->mu);
            return -1;
        }
    }
    s->n_done = 0;
    pthread_mutex_unlock(&s->mu);
    if (!s->started) {
        if (stor_table_put(op->table, STARTED_KEY, 1, "1", 1, err))
            return -1;
        s->started = true;
    }
    Batch *b = seal(s, epoch);
    if (!b)
        return 0;
    put_be64(k, epoch);
    if (stor_table_put(op->table, k, 8, b->data, b->len, err)) {
        batch_free(b);
        return -1;
    }
    /* Sealed batches wait for the commit; an aborted checkpoint keeps them
     * (and their dirty table rows) for the next one. */
    Batch **tail = &s->sealed;
    while (*tail)
        tail = &(*tail)->next;
    *tail = b;
    return 0;
}

static void sink_committed(RtOp *op, uint64_t epoch)
{
    RtSink *s = (RtSink *)op;
    pthread_mutex_lock(&s->mu);
    while (s->sealed && s->sealed->epoch <= epoch) {
        Batch *b = s->sealed;
        s->sealed = b->next;
        enqueue(s, b);
    }
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Stops the delivery thread and frees the sink. The thread is waited for
 * at most RT_DELIVERY_JOIN_MS: one stuck inside its connector (a call that
 * never returns) is left behind with the sink's memory, its writer and its
 * batches, which it may still use; only the state table is closed. The
 * undelivered batches are in the state table, so the next run delivers
 * them. */
static void sink_close(RtOp *op)
{
    RtSink *s = (RtSink *)op;
    if (s->thread) {
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        if (rt_join_within(s->thread, RT_DELIVERY_JOIN_MS) < 0) {
            fprintf(stderr, "weir: sink %s: its delivery thread did not stop within %d s (blocked in "
                            "the connector); left behind, undelivered epochs are delivered by the next run\n",
                    s->spec->name, RT_DELIVERY_JOIN_MS / 1000);
            stor_table_close(op->table);
            return;
        }
    }
    if (s->writer)
        s->conn->close(s->writer);
    for (Batch *b = s->sealed, *n; b; b = n) {
        n = b->next;
        batch_free(b);
    }
    for (Batch *b = s->queue, *n; b; b = n) {
        n = b->next;
        batch_free(b);
    }
    stor_table_close(op->table);
    arena_free(s->pend_arena);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    buf_free(&s->kbuf);
    buf_free(&s->vbuf);
    free(s->done);
    free(s->cols);
    free(s->key);
    free(s);
}

static const RtOpVt SINK_VT = {.push = sink_push, .watermark = sink_watermark, .flush_state = sink_flush_state,
                               .close = sink_close, .committed = sink_committed};

/* Loads committed, undelivered batches (after a restart) and the started marker. */
static int load_pending(RtSink *s)
{
    WError *err = s->op.rc->err;
    StorIter *it;
    if (stor_iter_open(s->op.table, NULL, 0, &it, err))
        return -1;
    const void *k, *v;
    size_t kl, vl;
    int got;
    while ((got = stor_iter_next(it, &k, &kl, &v, &vl, err)) == 1) {
        if (kl == 1 && ((const unsigned char *)k)[0] == 0xff) {
            s->started = true;
            continue;
        }
        if (kl != 8)
            continue;
        Batch *b = xcalloc(1, sizeof *b);
        b->epoch = get_be64(k);
        b->len = vl;
        b->data = xmalloc(vl ? vl : 1);
        memcpy(b->data, v, vl);
        /* Count the changes by walking the encoding. */
        const char *p = b->data, *end = b->data + vl;
        Value tmp[WEIR_ROW_VALUES];
        while (p < end) {
            uint8_t f = (uint8_t)*p++;
            for (int side = 0; side < 2 && p <= end; side++) {
                size_t used;
                if ((f & (1 << side)) && row_decode_prefix(p, (size_t)(end - p), tmp, s->spec->n_cols, &used) == 0)
                    p += used;
            }
            b->n++;
        }
        enqueue(s, b);
    }
    stor_iter_close(it);
    return got < 0 ? -1 : 0;
}

/* The view's current rows become the open epoch's inserts (add) or
 * retractions (!add), through s->cols and s->key. */
static int snapshot(RtSink *s, StorTable *view, int n_view_cols, bool add)
{
    WError *err = s->op.rc->err;
    StorIter *it;
    if (stor_iter_open(view, NULL, 0, &it, err))
        return -1;
    const void *k, *v;
    size_t kl, vl;
    int got;
    Value vals[WEIR_ROW_VALUES], row[WEIR_ROW_VALUES], key[WEIR_MAX_KEY_COLUMNS];
    bool counted = s->op.node->counted;
    while ((got = stor_iter_next(it, &k, &kl, &v, &vl, err)) == 1) {
        if (kl && ((const unsigned char *)k)[0] == 0xff)
            continue;
        if (row_decode(v, vl, vals, n_view_cols + counted))
            continue;
        for (int i = 0; i < s->spec->n_cols; i++)
            row[i] = vals[s->cols[i]];
        for (int i = 0; i < s->n_key; i++)
            key[i] = vals[s->key[i]];
        int64_t copies = counted ? vals[n_view_cols].u.i : 1;
        for (int64_t c = 0; c < copies; c++)
            if (add_change(s, row, key, add))
                goto done;
    }
done:
    stor_iter_close(it);
    return got < 0 ? -1 : 0;
}

int rt_dataflow_attach_sink(RtDataflow *df, const RtSinkSpec *spec, const int *view_cols, uint64_t table_id,
                            RtSink **out, WError *err)
{
    const RtSinkConnector *conn = rt_sink_connector(rt_sink_option(spec, "connector") ? rt_sink_option(spec, "connector") : "");
    if (!conn)
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0, "feature not supported: sink connector '%s'",
                    rt_sink_option(spec, "connector") ? rt_sink_option(spec, "connector") : "");
    RtOp *root = rt_dataflow_root(df);
    RtSink *s = xcalloc(1, sizeof *s);
    s->op.vt = &SINK_VT;
    s->op.node = root->node;
    s->op.rc = root->rc;
    s->op.wm = TS_MINUS_INF;
    s->conn = conn;
    s->spec = spec;
    s->cols = xcalloc((size_t)(spec->n_cols ? spec->n_cols : 1), sizeof(int));
    memcpy(s->cols, view_cols, sizeof(int) * (size_t)spec->n_cols);
    s->n_key = spec->upsert ? spec->n_pk : 0;
    s->key = xcalloc((size_t)(s->n_key ? s->n_key : 1), sizeof(int));
    for (int i = 0; i < s->n_key; i++)
        s->key[i] = view_cols[spec->pk[i]];
    s->pend_arena = arena_new(0);
    bytemap_init(&s->pend, s->pend_arena);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    set_state(s, "starting", NULL);
    WError *saved = s->op.rc->err;
    s->op.rc->err = err;
    int rc = stor_table_open(root->rc->env->stor, table_id, &s->op.table, err);
    if (!rc)
        rc = load_pending(s);
    if (!rc && !s->started)
        rc = snapshot(s, rt_dataflow_view_table(df), root->node->out.n, true);
    s->op.rc->err = saved;
    if (rc || pthread_create(&s->thread, NULL, deliver_main, s) != 0) {
        if (!rc)
            werr(err, SQLSTATE_INTERNAL, 0, "cannot start the sink's delivery thread");
        sink_close(&s->op);
        return -1;
    }
    rt_dataflow_add_fan(df, &s->op);
    *out = s;
    return 0;
}

int rt_sink_switch(RtSink *s, RtDataflow *from, RtDataflow *to, const int *view_cols, WError *err)
{
    if (!s->n_key)
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0,
                    "feature not supported: switching append-only sink \"%s\" to another view (it cannot retract)",
                    s->spec->name);
    RtOp *old = rt_dataflow_root(from), *root = rt_dataflow_root(to);
    WError *saved = s->op.rc->err;
    s->op.rc->err = err;
    /* The old view's rows out, then the new view's in: per key, the first
     * change carries the row the target has and the last the row it gets. */
    int rc = snapshot(s, rt_dataflow_view_table(from), old->node->out.n, false);
    s->op.rc->err = saved;
    /* Whatever happened, s ends attached to `to` (the caller may detach it there). */
    rt_dataflow_remove_fan(from, &s->op);
    s->op.node = root->node;
    s->op.rc = root->rc;
    memcpy(s->cols, view_cols, sizeof(int) * (size_t)s->spec->n_cols);
    for (int i = 0; i < s->n_key; i++)
        s->key[i] = view_cols[s->spec->pk[i]];
    rt_dataflow_add_fan(to, &s->op);
    if (rc)
        return -1;
    saved = s->op.rc->err;
    s->op.rc->err = err;
    rc = snapshot(s, rt_dataflow_view_table(to), root->node->out.n, true);
    s->op.rc->err = saved;
    return rc;
}

void rt_dataflow_detach_sink(RtDataflow *df, RtSink *s)
{
    if (!s)
        return;
    rt_dataflow_remove_fan(df, &s->op);
    sink_close(&s->op);
}

void rt_sink_status(RtSink *s, RtSinkStatus *out)
{
    pthread_mutex_lock(&s->mu);
    memset(out, 0, sizeof *out);
    out->delivered_epoch = s->delivered;
    out->rows_delivered = s->rows_delivered;
    out->rows_rejected = s->rows_rejected;
    for (Batch *b = s->queue; b; b = b->next)
        out->pending_epochs++;
    for (Batch *b = s->sealed; b; b = b->next)
        out->pending_epochs++;
    snprintf(out->state, sizeof out->state, "%s", s->state);
    snprintf(out->last_error, sizeof out->last_error, "%s", s->last_error);
    pthread_mutex_unlock(&s->mu);
}
