/*
 * op_repart.c: the repartition exchange of a distributed view
 * (PlanNode.repartition; planner/plan_place.c, README-cluster.md
 * "Distributed views").
 *
 * A distributed view has one hash exchange between its source fragment
 * (run per source partition: task = partition) and its keyed stage (run
 * per key group). In a cluster with an assignment (rc->dist) this operator
 * is both halves on this node:
 *   - writer: every row pushed from the fragment goes to partition kg of
 *     the view's repartition topic (kg = weir_key_group of the row's
 *     exchange key, as the in-process exchange and the keyed operators
 *     compute it), numbered (task, seq) by rt_repart_writer; the fragment's
 *     watermark goes to every partition for every task this node runs;
 *   - reader: a source of the keyed stage, polled by the dataflow's step
 *     like the Kafka source, over the key groups this node owns.
 * At each checkpoint (flush_state) the writer ends its epoch and waits for
 * every record to be acknowledged (barrier + sync) BEFORE the checkpoint
 * commits, and the operator's table takes each task's next seq (next to
 * the source offsets, in the same LMDB checkpoint), the reader's position
 * (with the keyed state it produced) and the key groups owned. A replay
 * re-sends the same (task, seq) and the reader drops what it applied; a key
 * group this node did not own at its last checkpoint starts at offset 0 of
 * its partition with no state (the dataflow dropped it at open, as every
 * key group owned then and not now).
 *
 * Table: 'E' -> u64 BE the writer's last ended epoch; 'S' + u32 BE task ->
 * u64 BE its next seq; 'P' -> the reader's position; 'K' -> the key groups
 * owned at the checkpoint (u16 BE each).
 *
 * Without an assignment (standalone, a topic not on the cluster's Kafka:
 * rc->dist NULL) the operator passes rows and watermarks through: the view
 * runs whole on this node, as a replicated one.
 */
#include "runtime_int.h"

#include <stdlib.h>
#include <string.h>

#include "keygroup.h"
#include "repart.h"
#include "row.h"
#include "weir_limits.h"

/* Waiting for the broker to open the topic. */
#define REPART_TIMEOUT_MS 10000
/* Waiting for a checkpoint's records to be acknowledged. The sync runs on
 * the engine thread, with the engine lock held (every statement waits), so
 * it is short: a broker that acknowledges nothing in this time fails the
 * checkpoint, which is tried again at the next interval with the records
 * of both. After a failed sync the next ones wait only
 * REPART_SYNC_RETRY_MS until one succeeds: with Kafka gone, the node keeps
 * serving reads instead of holding its lock for seconds every checkpoint. */
#define REPART_SYNC_MS 3000
#define REPART_SYNC_RETRY_MS 200

typedef struct RepartOp {
    RtSource base;            /* base.op first */
    RtRepartWriter *w;        /* NULL: this node runs no task */
    RtRepartReader *r;
    int G;
    uint64_t epoch;           /* the writer's current epoch */
    int64_t sent_wm;          /* the last watermark given to the writer */
    int64_t emitted_wm;       /* the last watermark emitted downstream */
    uint16_t *kg;             /* scratch: per row, its key group */
    int cap;
    bool sync_failed;         /* the last checkpoint's sync failed: the next waits REPART_SYNC_RETRY_MS */
} RepartOp;

static int push_local(RtOp *op, Chunk *c) { return rt_emit(op, c); }

static int wm_local(RtOp *op, int64_t wm)
{
    op->wm = wm;
    return rt_emit_watermark(op, wm);
}

/* Each row's key group: the hash of the exchange's key columns (the
 * keyed operators' rt_row_kg over the same values). */
static void row_kgs(RepartOp *x, const Chunk *c)
{
    const PlanNode *n = x->base.op.node;
    for (int r = 0; r < c->n_rows; r++) {
        uint64_t h = WEIR_KEY_HASH_SEED;
        for (int k = 0; k < n->n_dist_keys; k++) {
            Value v;
            chunk_get(c, n->dist_keys[k], r, &v);
            h = weir_key_hash_value(h, &v);
        }
        x->kg[r] = (uint16_t)weir_key_group(h, x->G);
    }
}

static int repart_push(RtOp *op, Chunk *c)
{
    RepartOp *x = (RepartOp *)(void *)op;
    if (!c->n_rows)
        return 0;
    if (!x->w || c->src_partition < 0)
        return werr(op->rc->err, SQLSTATE_INTERNAL, 0,
                    "repartition exchange: rows of source partition %d, which this node does not read",
                    c->src_partition);
    if (c->n_rows > x->cap) {
        x->cap = c->n_rows;
        x->kg = xrealloc(x->kg, sizeof(uint16_t) * (size_t)x->cap);
    }
    row_kgs(x, c);
    return rt_repart_writer_push(x->w, (uint32_t)c->src_partition, c, x->kg, op->rc->err);
}

/* The fragment's watermark, for every task of this node: it is a lower
 * bound of each task's own. */
static int repart_watermark(RtOp *op, int64_t wm)
{
    RepartOp *x = (RepartOp *)(void *)op;
    const RtDist *d = op->rc->dist;
    if (!x->w || wm <= x->sent_wm || wm == RT_WM_IDLE)
        return 0;
    x->sent_wm = wm;
    for (int i = 0; i < d->n_src; i++)
        if (rt_repart_writer_watermark(x->w, (uint32_t)d->src[i], wm == TS_PLUS_INF ? RT_REPART_WM_IDLE : wm,
                                       op->rc->err))
            return -1;
    return 0;
}

static int repart_poll(RtOp *op, int timeout_ms, bool *did_work)
{
    RepartOp *x = (RepartOp *)(void *)op;
    RtCtx *rc = op->rc;
    const PlanNode *n = op->node;
    Chunk *c = chunk_new(rc->chunk_arena, n->out.n, n->out.types, 1024);
    chunk_enable_wm(c);
    int got = rt_repart_reader_poll(x->r, timeout_ms, c, rc->err);
    if (got < 0)
        return -1;
    if (got > 0)
        *did_work = true;
    if (c->n_rows && rt_emit(op, c))
        return -1;
    int64_t wm = rt_repart_reader_watermark(x->r);
    if (wm > x->emitted_wm) {
        x->emitted_wm = wm;
        op->wm = wm;
        return rt_emit_watermark(op, wm);
    }
    return 0;
}

/* FLUSH does not look through the repartition topic (README-cluster.md). */
static int repart_flush_target(RtOp *op, WError *err) { return 0; }
static bool repart_flushed(RtOp *op) { return true; }

/* 'S' + the task, big-endian: the key of a task's next seq. */
static void task_key(unsigned char k[5], uint32_t task)
{
    k[0] = 'S';
    k[1] = (unsigned char)(task >> 24);
    k[2] = (unsigned char)(task >> 16);
    k[3] = (unsigned char)(task >> 8);
    k[4] = (unsigned char)task;
}

static int put_u64(StorTable *t, const unsigned char *k, size_t kl, uint64_t v, WError *err)
{
    unsigned char b[8];
    put_be64(b, v);
    return stor_table_put(t, k, kl, b, 8, err);
}

/* Before checkpoint: every record sent is acknowledged, then the seqs, the
 * reader's position and the key groups owned go into the table. */
static int repart_flush(RtOp *op, uint64_t ck_epoch)
{
    RepartOp *x = (RepartOp *)(void *)op;
    RtCtx *rc = op->rc;
    const RtDist *d = rc->dist;
    if (x->w) {
        if (rt_repart_writer_barrier(x->w, x->epoch, rc->err))
            return -1;
        /* The writer is in the next epoch now, whether or not the sync
         * succeeds: a failed sync fails this checkpoint, and the next one's
         * sync covers what this one queued. */
        uint64_t ended = x->epoch++;
        x->sync_failed = rt_repart_writer_sync(x->w, x->sync_failed ? REPART_SYNC_RETRY_MS : REPART_SYNC_MS, rc->err) != 0;
        if (x->sync_failed || put_u64(op->table, (const unsigned char *)"E", 1, ended, rc->err))
            return -1;
        for (int i = 0; i < d->n_src; i++) {
            uint64_t seq;
            unsigned char k[5];
            task_key(k, (uint32_t)d->src[i]);
            if (rt_repart_writer_seq(x->w, (uint32_t)d->src[i], &seq, rc->err) || put_u64(op->table, k, 5, seq, rc->err))
                return -1;
        }
    }
    Buf b = BUF_INIT;
    rt_repart_reader_position_save(x->r, &b);
    int rcode = stor_table_put(op->table, "P", 1, b.data, b.len, rc->err);
    buf_reset(&b);
    for (int i = 0; i < d->n_kgs; i++) {
        buf_put_u16be(&b, (uint16_t)d->kgs[i]);
    }
    if (!rcode)
        rcode = stor_table_put(op->table, "K", 1, b.data ? b.data : "", b.len, rc->err);
    buf_free(&b);
    return rcode;
}

static void repart_close(RtOp *op)
{
    RepartOp *x = (RepartOp *)(void *)op;
    rt_repart_writer_close(x->w);
    rt_repart_reader_close(x->r);
    stor_table_close(op->table);
    free(x->kg);
    free(x);
}

static const RtOpVt LOCAL_VT = {.push = push_local, .watermark = wm_local, .close = repart_close};
static const RtOpVt REPART_VT = {.push = repart_push, .watermark = repart_watermark, .flush_state = repart_flush,
                                 .close = repart_close};
static const RtSourceVt REPART_SRC_VT = {.poll = repart_poll, .flush_target = repart_flush_target,
                                         .flushed = repart_flushed};

/* A u64 of the table, or dflt when absent. */
static int get_u64(StorTable *t, const void *k, size_t kl, uint64_t dflt, uint64_t *out, WError *err)
{
    const void *v;
    size_t vl;
    int f = stor_table_get(t, k, kl, &v, &vl, err);
    if (f < 0)
        return -1;
    *out = f == 1 && vl == 8 ? get_be64(v) : dflt;
    return 0;
}

/* Opens the writer over this node's tasks at their checkpointed seqs. */
static int open_writer(RepartOp *x, const char *bootstrap)
{
    RtOp *op = &x->base.op;
    RtCtx *rc = op->rc;
    const RtDist *d = rc->dist;
    uint64_t last;
    if (get_u64(op->table, "E", 1, 0, &last, rc->err))
        return -1;
    x->epoch = last + 1;
    if (!d->n_src)
        return 0;
    uint32_t *tasks = xmalloc(sizeof(uint32_t) * (size_t)d->n_src);
    uint64_t *seqs = xmalloc(sizeof(uint64_t) * (size_t)d->n_src);
    int rcode = 0;
    for (int i = 0; i < d->n_src && !rcode; i++) {
        unsigned char k[5];
        tasks[i] = (uint32_t)d->src[i];
        task_key(k, tasks[i]);
        rcode = get_u64(op->table, k, 5, 0, &seqs[i], rc->err);
    }
    if (!rcode)
        rcode = rt_repart_writer_open(bootstrap, d->topic, x->G, tasks, seqs, d->n_src, x->epoch, REPART_TIMEOUT_MS,
                                      &x->w, rc->err);
    free(tasks);
    free(seqs);
    return rcode;
}

/* Opens the reader at its checkpointed position over the owned key groups. */
static int open_reader(RepartOp *x, const char *bootstrap)
{
    RtOp *op = &x->base.op;
    RtCtx *rc = op->rc;
    const RtDist *d = rc->dist;
    const PlanNode *n = op->node;
    if (rt_repart_reader_open(bootstrap, d->topic, x->G, d->n_src_total, n->out.types, n->out.n, REPART_TIMEOUT_MS,
                              &x->r, rc->err))
        return -1;
    const void *v;
    size_t vl;
    int f = stor_table_get(op->table, "P", 1, &v, &vl, rc->err);
    if (f < 0 || (f == 1 && rt_repart_reader_position_restore(x->r, v, vl, rc->err)))
        return -1;
    return rt_repart_reader_assign(x->r, d->n_kgs, d->kgs, rc->err);
}

RtOp *rt_op_repart_new(RtCtx *rc, const PlanNode *n)
{
    RepartOp *x = xcalloc(1, sizeof *x);
    x->base.op.node = n;
    x->base.op.rc = rc;
    x->base.op.wm = TS_MINUS_INF;
    x->sent_wm = x->emitted_wm = TS_MINUS_INF;
    x->G = n->key_groups;
    if (!rc->dist) {
        x->base.op.vt = &LOCAL_VT;
        return &x->base.op;
    }
    x->base.op.vt = &REPART_VT;
    x->base.src = &REPART_SRC_VT;
    if (rc->dist->n_src_total < 1) {
        werr(rc->err, SQLSTATE_INTERNAL, 0, "repartition exchange before its source");
        goto fail;
    }
    if (rt_op_open_table(&x->base.op, rc->err) || open_writer(x, rc->dist->bootstrap) ||
        open_reader(x, rc->dist->bootstrap))
        goto fail;
    return &x->base.op;
fail:
    repart_close(&x->base.op);
    return NULL;
}

int rt_repart_lost_kgs(RtOp *op, int32_t *out, int max, WError *err)
{
    const RtDist *d = op->rc->dist;
    const void *v;
    size_t vl;
    int f = stor_table_get(op->table, "K", 1, &v, &vl, err);
    if (f <= 0)
        return f;
    const unsigned char *p = v;
    int n = 0;
    for (size_t i = 0; i + 1 < vl && n < max; i += 2) {
        int kg = p[i] << 8 | p[i + 1];
        bool owned = false;
        for (int j = 0; j < d->n_kgs && !owned; j++)
            owned = d->kgs[j] == kg;
        if (!owned)
            out[n++] = kg;
    }
    return n;
}

bool rt_op_is_repart_source(const RtOp *op) { return op->vt == &REPART_VT; }
