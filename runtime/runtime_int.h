/*
 * runtime_int.h: the operator interface shared by the runtime/ sources.
 *
 * Every operator is an RtOp with a vtable. Messages flow by direct calls:
 * an operator's push() processes a chunk and calls rt_emit() for its
 * output, which calls the downstream operator's push() before returning.
 * Watermarks travel the same way (rt_emit_watermark). Chunks produced
 * while handling one source batch live in the dataflow's chunk arena,
 * which is reset once the batch has gone all the way down.
 */
#ifndef WEIR_RUNTIME_INT_H
#define WEIR_RUNTIME_INT_H

#include <assert.h>
#include <pthread.h>
#include <time.h>

#include "chunk.h"
#include "keygroup.h"
#include "weir_limits.h"
#include "kafka.h"
#include "row.h"
#include "runtime.h"

/* Waits on cv (mu held) for at most ms milliseconds (CLOCK_REALTIME, the
 * condition variables' default clock): the delivery threads' backoff and the
 * parallel shards' quiesce naps. */
static inline void rt_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = ts.tv_nsec + (long)(ms % 1000) * 1000000L;
    ts.tv_sec += ms / 1000 + ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
}

/* How long closing a sink or the dead letters waits for its delivery
 * thread: longer than any bounded connector call (Kafka's 15 s
 * transaction timeouts), so a thread that is merely slow is joined. */
#define RT_DELIVERY_JOIN_MS 20000

/* Joins t, waiting at most ms milliseconds. Returns 0 once t has ended;
 * -1 if it is still running, in which case t is detached and its owner
 * must leave alive everything t still uses (leak it). For the delivery
 * threads, which call into connectors that can block without bound inside
 * a library (librdkafka's begin_transaction can wait forever on a producer
 * fenced by a second server with the same transactional.id): a stop flag
 * cannot reach a thread inside such a call, so shutdown and DROP would
 * otherwise wait for it forever. */
static inline int rt_join_within(pthread_t t, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = ts.tv_nsec + (long)(ms % 1000) * 1000000L;
    ts.tv_sec += ms / 1000 + ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    if (pthread_timedjoin_np(t, NULL, &ts) == 0)
        return 0;
    pthread_detach(t);
    return -1;
}

typedef struct RtOp RtOp;
typedef struct RtTtl RtTtl;

typedef struct RtOpVt {
    /* A chunk from the input. Returns 0, or -1 when the dataflow must stop. */
    int (*push)(RtOp *op, Chunk *c);
    /* The input's watermark advanced to wm (monotone). */
    int (*watermark)(RtOp *op, int64_t wm);
    /* Before checkpoint `epoch`: write in-memory state into the state table. */
    int (*flush_state)(RtOp *op, uint64_t epoch);
    /* Bounded input ended (ad hoc queries). */
    int (*finish)(RtOp *op);
    void (*close)(RtOp *op);
    /* Optional: once after wiring, before any input (may emit). */
    int (*start)(RtOp *op);
    /* Optional: checkpoint `epoch` is durable (sinks may now deliver it). */
    void (*committed)(RtOp *op, uint64_t epoch);
    /* Optional, for operators with several inputs: the operator that input k
     * must push into (an adapter that knows its port). Default: op itself. */
    RtOp *(*input)(RtOp *op, int k);
} RtOpVt;

typedef struct RtCtx RtCtx;

/* WITH RECURSIVE: the rows of one work table (op_recursive.c), seen by the
 * PN_WORK_TABLE leaves with this id of the query being run. */
typedef struct RtWork {
    int id;
    int n_rows;
    Value **rows;
    const struct RtWork *prev;   /* an enclosing recursion's */
} RtWork;

struct RtOp {
    const RtOpVt *vt;
    const PlanNode *node;
    RtCtx *rc;
    RtOp *down;               /* the consumer, NULL at the root */
    int n_fan;                /* further consumers (sinks on a view), each gets its own chunk header */
    RtOp **fan;
    StorTable *table;         /* state table (stateful operators), owned */
    StorTable *table2;        /* a second one (a join's right side), owned; checkpointed with table */
    int64_t wm;               /* last watermark seen on the input */
    RtOpCounters counters;    /* for weir_operators; rows_in/rows_out kept by rt_emit */
    RtOp *owner;              /* an input port of a multi-input operator (RtOpVt.input): that operator,
                               * whose busy time the port's calls are (rt_instantiate); else NULL */
    /* Optional: the source partitions this operator tracks the watermark of
     * (the watermark operator); fills at most max, returns how many. */
    int (*partitions)(RtOp *op, RtPartitionWatermark *out, int max);
    /* Optional: windows whose state the operator holds (windowed aggregations). */
    int64_t (*open_windows)(RtOp *op);
    /* Optional (state_ttl): 1 if some key's state has expired by now (the
     * next checkpoint sweeps it), 0 if not, -1 on error. */
    int (*expiry_due)(RtOp *op, int64_t now);
};

/* What operators share within one dataflow or query. */
struct RtCtx {
    const RtEnv *env;
    Arena *chunk_arena;       /* reset after each source batch */
    RtStats stats;
    RtSourceError *src_errs;  /* ring of the last RT_SOURCE_ERRORS_KEPT source errors (allocated on the first) */
    uint64_t n_src_errs;      /* source errors recorded since start */
    WError *err;              /* where a fatal error is recorded */
    bool batch;               /* an ad hoc query: bounded input, temporary state */
    bool whole_input;         /* query.c: every input arrives in full before the first finish, so
                               * an outer join pads its unmatched rows at finish, once (op_join.c) */
    /* A dataflow's expressions run in its view's time zone (PlanView.tz):
     * rt_eval sets it on the thread around scalar calls. Ad hoc queries
     * (own_tz false) run in the thread's zone, the session's. */
    bool own_tz;
    const struct WTz *tz;
    RtDataflow *replay_of;    /* VERIFY: replay up to this live dataflow's source positions (with batch) */
    const char *name;         /* the view's name (dead-letter headers), or NULL; borrowed */
    /* The raw records of the Kafka poll being pushed through (valid during
     * that source's poll only), so a bad row found downstream of the source
     * can still be dead-lettered as it was read. */
    const RtKafkaRecord *poll_recs;
    int n_poll_recs;
    struct RtBadRecords *bad; /* on_error bookkeeping (bad_records.c), NULL until needed */
    const RtWork *work;       /* ad hoc queries: the work tables of the recursions being run, or NULL */
    /* A parallel view (parallel.c): the instance these operators are (0 runs
     * on the engine thread, 1..n_shards-1 on worker threads) and the
     * exchanges' plumbing; NULL/0/0 in a view run on one thread. */
    struct RtPar *par;
    int shard;
    int n_shards;
    /* Ad hoc queries: the session's cancel (a client's CancelRequest,
     * statement_timeout, a client gone), asked every RT_CANCEL_EVERY calls of
     * rt_cancelled; NULL in views. */
    bool (*cancel)(void *arg);
    void *cancel_arg;
    uint32_t cancel_tick;
    /* A distributed view run under the cluster's assignment (op_repart.c),
     * NULL when it runs whole here (standalone, or not managed). */
    struct RtDist *dist;
};

/* What a distributed view's operators need of the node's assignment, read
 * once at rt_dataflow_open (dataflow.c; README-cluster.md "Distributed
 * views"). Owned by the dataflow. */
typedef struct RtDist {
    int32_t *src;             /* the source partitions (tasks) this node reads, sorted */
    int n_src;
    int n_src_total;          /* the source topic's partitions (every task), set by the source */
    int32_t *kgs;             /* the key groups (repartition partitions) this node owns, sorted */
    int n_kgs;
    char topic[256];          /* the view's repartition topic */
    const char *bootstrap;    /* the source's (the cluster's) Kafka */
} RtDist;

/* The repartition exchange (op_repart.c): pass-through without rc->dist. */
RtOp *rt_op_repart_new(RtCtx *rc, const PlanNode *n);
/* Whether op is a repartition exchange that reads its topic (a source of the step). */
bool rt_op_is_repart_source(const RtOp *op);
/* The key groups the repartition exchange op's last checkpoint owned and
 * this node does not own now, into out (at most max); returns the count,
 * or -1 with err. */
int rt_repart_lost_kgs(RtOp *op, int32_t *out, int max, WError *err);

#define RT_CANCEL_EVERY 1024

/* Whether the query was cancelled: then 57014 is in rc->err and the caller
 * returns -1. Cheap enough for per-row loops (one branch in views). */
static inline bool rt_cancelled(RtCtx *rc)
{
    if (!rc->cancel || (++rc->cancel_tick % RT_CANCEL_EVERY) != 0 || !rc->cancel(rc->cancel_arg))
        return false;
    werr(rc->err, SQLSTATE_QUERY_CANCELED, 0, "canceling statement due to user request");
    return true;
}

/* Sent as a watermark by a split source's watermark operator whose
 * partitions are all idle (idle_timeout): up to the next exchange it means
 * "this instance does not hold the watermark back" (as an idle partition
 * does not within one instance) and is not a time; the exchange receivers
 * leave that sender out until it sends a real watermark again. Operators
 * between the two pass it on untouched. */
#define RT_WM_IDLE (TS_PLUS_INF - 1)

/* The instances op's node is split into: the view's parallelism for a
 * parallel node, else 1 (a single source of a parallel view reads all). */
static inline int rt_op_shards(const RtOp *op)
{
    return op->rc->n_shards > 1 && op->node->parallelism > 1 ? op->rc->n_shards : 1;
}
/* Whether op's instance reads source partition p (p % shards == shard). */
static inline bool rt_op_owns(const RtOp *op, int p) { return rt_op_shards(op) <= 1 || p % rt_op_shards(op) == op->rc->shard; }

/* ---- parallel views (parallel.c, op_exchange.c) ----
 * A view planned with parallelism P > 1 runs P instances (shards) of its
 * plan: shard 0 holds every node and runs on the engine thread inside
 * rt_dataflow_step, shards 1..P-1 hold the parallel nodes and run on the
 * dataflow's worker threads during the step. Exchanges move rows between
 * them through queues; between steps the workers are parked and no chunk
 * is in flight. */
typedef struct RtPar RtPar;
/* The plumbing of a parallel plan; shard 0's context rc0 gets par/shard set
 * (shard 0's operators are made by the caller, with rc0, into ops0). */
RtPar *rt_par_new(const PlanView *plan, RtCtx *rc0, RtOp **ops0);
/* Makes shards 1..P-1's operators (after shard 0's). 0, or -1 with err. */
int rt_par_open(RtPar *par, WError *err);
/* Calls the start hooks of shards 1..P-1, then starts the worker threads. */
int rt_par_start(RtPar *par, WError *err);
/* One time slice of every shard (see parallel.c). As rt_dataflow_step. */
int rt_par_step(RtPar *par, int timeout_ms, bool *did_work, WError *err);
/* Stops the workers and closes shards 1..P-1 (shard 0 is the caller's). */
void rt_par_free(RtPar *par);
int rt_par_shards(const RtPar *par);
/* Shard s's context and its operators (parallel to the plan's nodes, NULL
 * where the node has no instance in s); s = 0 is the caller's. */
RtCtx *rt_par_ctx(RtPar *par, int s);
RtOp **rt_par_ops(RtPar *par, int s);
/* Shard 0's operator of the plan's PN_VIEW_CHANGES node (a split
 * materialize's readers hang off it), or NULL. */
RtOp *rt_par_changes_op(RtPar *par);
int rt_par_sources(RtPar *par, int s, RtOp ***out);
/* Exchanges: op_exchange.c sends a chunk (c, owned with its arena a) or a
 * watermark (c NULL) from shard `from` to shard `to`'s instance of
 * exchange node n: queued during a step, delivered at once (on this thread)
 * between steps, when the workers are parked. -1 when the receiver failed. */
int rt_par_send(RtPar *par, const PlanNode *n, int from, int to, Arena *a, Chunk *c, int64_t wm);
/* An arena for one message's chunk, from the dataflow's pool (reused after
 * delivery, so the hot path does not malloc and free a block per chunk). */
Arena *rt_par_arena(RtPar *par);
/* op_exchange.c: the receiving side. */
RtOp *rt_op_exchange_new(RtCtx *rc, const PlanNode *n);
int rt_exchange_receive(RtOp *op, int from, Chunk *c, int64_t wm);
/* The watermark rule of an exchange receiver, alone (unit-tested): last
 * holds each sender's last watermark (TS_PLUS_INF for shards that never
 * send), idle whether it said RT_WM_IDLE since; sender's new watermark wm
 * (or RT_WM_IDLE) is recorded, and the receiver's watermark is returned:
 * the minimum over the senders not idle, or when all are idle the minimum
 * over those that ever sent one (TS_MINUS_INF if none did). */
int64_t rt_exchange_wm_rule(int64_t *last, bool *idle, int n, int sender, int64_t wm);
/* A row that sender annotated with watermark row_wm is judged at the
 * receiver against min(row_wm, every other non-idle sender's last watermark). */
int64_t rt_exchange_row_wm(const int64_t *last, const bool *idle, int n, int sender, int64_t row_wm);

/* Hands c to the downstream operator. The receiver owns the chunk from then
 * on (it may filter it in place): the sender must not touch it again. */
int rt_emit(RtOp *op, Chunk *c);
int rt_emit_watermark(RtOp *op, int64_t wm);
/* One poll of source operator src (its RtSourceVt poll), timed into its
 * busy_ns; every step polls through it. */
int rt_source_poll(RtOp *src, int timeout_ms, bool *did_work);
/* Records a per-row error (counted, message kept), never fatal. */
void rt_row_error(RtCtx *rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Records a source record that op (a source or watermark operator) could
 * not use: counts it in bad_records (the view's and op's), keeps the message as
 * last_error and in the source-error ring with where it came from
 * (partition/offset -1 when unknown) and the record's first bytes (record
 * may be NULL), then applies src's on_error policy (bad_records.c): 'skip'
 * returns 0; 'dead_letter' produces the raw record to the error topic and
 * returns 0 (-1 with rc->err if it cannot even be queued); 'fail' returns -1
 * with rc->err set, and the caller must return -1 so the step fails before
 * anything past the record is checkpointed. src may be NULL (skip). */
int rt_source_error(RtOp *op, const CatRelation *src, int32_t partition, int64_t offset, const char *record,
                    size_t record_len, const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/* An offset gap skipped under on_offset_gap = 'skip' (op_source.c): listed
 * in the source-error ring (offset = the first offset lost, no record),
 * last_error and the log, and counted in RtStats.offset_gaps; never routed
 * by on_error (there is no record to route). */
void rt_source_gap(RtOp *op, const CatRelation *src, int32_t partition, int64_t from, int64_t to, const char *fmt,
                   ...) __attribute__((format(printf, 6, 7)));

/* Clock-skew correction of a source (skew.send_time, skew.receive_time,
 * checked at CREATE SOURCE): the WATERMARK's time column of a decoded row
 * is shifted by receive - send before any watermark sees it. The source
 * operator and ANALYZE LATENESS's log reader apply the same function. */
typedef struct RtSkew {
    int send;                 /* send-time column, -1: no correction */
    int recv;                 /* receive-time column, or -2: the Kafka record timestamp */
    int ts;                   /* the corrected column (the WATERMARK's) */
} RtSkew;
void rt_skew_init(RtSkew *k, const CatRelation *r);
/* Corrects row of c (ts + receive - send); a NULL time, send or receive
 * time, or a record without a timestamp (kafka_ts_ms < 0) leaves it as is. */
void rt_skew_apply(const RtSkew *k, Chunk *c, int row, int64_t kafka_ts_ms);

/* The Kafka bootstrap of source r: its properties.bootstrap.server(s), else the server's. */
const char *rt_source_bootstrap(const CatRelation *r, const RtEnv *env);

/* bad_records.c: the on_error policy of sources. */
typedef enum RtOnError { RT_ON_ERROR_SKIP, RT_ON_ERROR_FAIL, RT_ON_ERROR_DEAD_LETTER } RtOnError;
/* src's policy from its on_error / error.topic options (checked at CREATE SOURCE). */
RtOnError rt_on_error(const CatRelation *src);
/* The dead-letter topic of src: error.topic, or "<topic>.dlq". */
void rt_dead_letter_topic(const CatRelation *src, char *out, size_t cap);
/* Applies src's policy to a record already counted and listed. See rt_source_error. */
int rt_bad_record_route(RtOp *op, const CatRelation *src, int32_t partition, int64_t offset, const char *message);
/* At source open: with on_error = 'dead_letter', makes sure the error topic
 * and the control topic exist (the error topic is created with one partition). */
int rt_bad_records_prepare(RtCtx *rc, const CatRelation *src, WError *err);
/* In the checkpoint of epoch: seals the dead letters found since the last
 * one into epoch's batch and writes every batch not yet committed into ck's
 * metadata (and deletes delivered ones), so the offsets past a record commit
 * together with its dead letter. Errors as stor_checkpoint_put_meta. */
int rt_bad_records_checkpoint(RtCtx *rc, StorCheckpoint *ck, uint64_t epoch, WError *err);
/* Checkpoint epoch committed: hands every batch up to it to the delivery
 * thread, which produces each in one Kafka transaction per cluster (see
 * bad_records.c); never waits on Kafka. The first call also picks up the
 * batches an earlier run left undelivered. The thread logs a failure and
 * retries with backoff. */
void rt_bad_records_committed(RtCtx *rc, uint64_t epoch);
/* Committed dead letters not delivered yet (the delivery thread's queue). */
bool rt_bad_records_pending(RtCtx *rc);
void rt_bad_records_free(RtCtx *rc);
bool rt_dataflow_failed_record_rc(RtCtx *rc, RtFailedRecord *out);
void rt_dataflow_skip_record_rc(RtCtx *rc, const char *source, int32_t partition, int64_t offset);

/* state_ttl.c: expiry of keys idle for a view's state_ttl (see the file
 * comment). The operator calls rt_ttl_touch for every key a row reads or
 * writes, before it reads the key's state, and rt_ttl_sweep before each
 * checkpoint; drop(arg, key, klen, err) must delete the operator's state of
 * key (0, or -1 with err) and must not call back into the RtTtl. */
typedef int (*RtTtlDrop)(void *arg, const void *key, size_t klen, WError *err);
struct RtTtl {
    StorTable *table;         /* where the access times live (the operator's, borrowed) */
    int64_t ttl_us;
    int64_t grain_us;         /* access times are kept to this (ttl / 100, at least 1 ms) */
    int64_t next_due;         /* no key expires before this; INT64_MAX none, INT64_MIN unknown */
    uint64_t *expired;        /* counts the keys dropped (weir_operators.expired_keys), borrowed */
    int sweep_max;            /* keys one sweep drops at most (100,000; the rest stay due) */
    RtTtlDrop drop;
    void *arg;
    Buf kbuf, ibuf;
};
/* Processing time (microseconds since the epoch): the wall clock, or the
 * time in the file named by WEIR_TEST_CLOCK (tests). */
int64_t rt_proc_now_us(void);
void rt_ttl_init(RtTtl *t, StorTable *table, int64_t ttl_us, RtTtlDrop drop, void *arg, uint64_t *expired);
void rt_ttl_fini(RtTtl *t);
/* key (klen bytes) is accessed at now: if it had expired, its state is
 * dropped first; then its access time becomes now. With create false, a key
 * never touched (so without state) is left alone. 0, or -1 with err. */
int rt_ttl_touch(RtTtl *t, const void *key, size_t klen, int64_t now, bool create, WError *err);
/* 1 if some key has expired by now, 0 if not, -1 with err. */
int rt_ttl_due(RtTtl *t, int64_t now, WError *err);
/* Drops the keys expired by now, oldest first, at most sweep_max. 0, or -1 with err. */
int rt_ttl_sweep(RtTtl *t, int64_t now, WError *err);
/* For drop callbacks: deletes every key of table starting with prefix
 * (scratch holds them during the scan). 0, or -1 with err. */
int rt_ttl_drop_prefix(StorTable *table, const void *prefix, size_t plen, Buf *scratch, WError *err);

/* Operator constructors (op_*.c). Each returns NULL with rc->err set on failure. */
RtOp *rt_op_source_new(RtCtx *rc, const PlanNode *n);
RtOp *rt_op_watermark_new(RtCtx *rc, const PlanNode *n);
RtOp *rt_op_project_new(RtCtx *rc, const PlanNode *n);
RtOp *rt_op_filter_new(RtCtx *rc, const PlanNode *n);
RtOp *rt_op_window_new(RtCtx *rc, const PlanNode *n);
RtOp *rt_op_agg_new(RtCtx *rc, const PlanNode *n);
RtOp *rt_op_materialize_new(RtCtx *rc, const PlanNode *n);
RtOp *rt_op_view_changes_new(RtCtx *rc, const PlanNode *n);
RtOp *rt_op_join_new(RtCtx *rc, const PlanNode *n);
RtOp *rt_op_temporal_join_new(RtCtx *rc, const PlanNode *n);
RtOp *rt_op_topn_new(RtCtx *rc, const PlanNode *n);
RtOp *rt_op_union_new(RtCtx *rc, const PlanNode *n);
RtOp *rt_op_setop_new(RtCtx *rc, const PlanNode *n);
/* op_semijoin.c: PN_SEMI_JOIN ([NOT] IN, [NOT] EXISTS and scalar subqueries). */
RtOp *rt_op_semijoin_new(RtCtx *rc, const PlanNode *n);
/* Runs the ad hoc query q (as rt_query_run_values) with the work tables
 * work, in the environment of rc; fn sees each visible row. 0, or -1 with
 * rc->err set. */
int rt_query_collect(RtCtx *rc, const PlanQuery *q, const RtWork *work, RtValuesFn fn, void *arg);
/* op_recursive.c: PN_RECURSIVE and PN_WORK_TABLE leaves. */
RtOp *rt_op_recursive_new(RtCtx *rc, const PlanNode *n);
int rt_recursive_produce(RtOp *op);
int rt_work_table_produce(RtOp *op);
/* Emits rows (all of types) as +I chunks. */
int rt_emit_rows(RtOp *op, int n_rows, Value *const *rows, int ncols, const TypeId *types);
/* Batch leaves: produce all their rows on rt_op_produce(). */
RtOp *rt_op_view_scan_new(RtCtx *rc, const PlanNode *n);
RtOp *rt_op_values_new(RtCtx *rc, const PlanNode *n);
/* VALUES in a view (a node with a state table): its rows once (op_values.c). */
RtOp *rt_op_values_stream_new(RtCtx *rc, const PlanNode *n);
int rt_op_produce(RtOp *leaf);
/* Emits every row of a materialized view's table t as +I chunks (rows of a
 * counted view as often as they occur), skipping operator metadata keys. */
int rt_emit_view_rows(RtOp *op, StorTable *t, int ncols, const TypeId *types, bool counted, const char *name);

/* Sources: every source operator starts with an RtSource, whose hooks the
 * dataflow uses to drive it. A connector adds one file (op_source.c for
 * Kafka) and one case in rt_op_source_new's dispatch. */
typedef struct RtSourceVt {
    /* Reads what is available (waiting at most timeout_ms) and pushes it
     * downstream; sets *did_work when anything came. -1 = the dataflow must stop. */
    int (*poll)(RtOp *src, int timeout_ms, bool *did_work);
    /* FLUSH: remember how far the input reaches now... */
    int (*flush_target)(RtOp *src, WError *err);
    /* ...and tell when everything up to there has been pushed. */
    bool (*flushed)(RtOp *src);
} RtSourceVt;

typedef struct RtSource {
    RtOp op;
    const RtSourceVt *src;
} RtSource;

/* The operator of plan node n in df, or NULL (a replay finds its live twin). */
RtOp *rt_dataflow_op_of(RtDataflow *df, const PlanNode *n);
/* A Kafka source operator's positions as text ("0:12 1:40", partition:next
 * offset) appended to out. */
void rt_source_positions(RtOp *src, Buf *out);
/* A Kafka source operator's partition count (0 for other operators). */
int rt_source_partitions(RtOp *src);
/* A Kafka source operator's read position and end offset per partition
 * (at most max); 0 for other operators. */
int rt_source_progress(RtOp *src, RtSourceProgress *out, int max);

/* A writable table's input (op_table_write.c), and the dataflow's one, or NULL. */
RtOp *rt_op_table_write_new(RtCtx *rc, const PlanNode *n);
RtOp *rt_dataflow_table_input(RtDataflow *df);
/* Resets the dataflow's chunk arena (nothing may be in flight). */
void rt_dataflow_reset_arena(RtDataflow *df);

/* A view's changelog (op_view_source.c). */
RtOp *rt_op_view_source_new(RtCtx *rc, const PlanNode *n);

/* Kafka (op_source.c). */
RtOp *rt_op_kafka_source_new(RtCtx *rc, const PlanNode *n);

/* Creates operators for nodes[0..n) (topological order) and wires each to
 * its reader; ops must have n slots. rt_close_ops closes them in reverse. */
int rt_instantiate(RtCtx *rc, int n, PlanNode *const *nodes, RtOp **ops);
void rt_close_ops(int n, RtOp **ops);
/* The dataflow's root (materialize) operator, and its extra consumers. */
RtOp *rt_dataflow_root(RtDataflow *df);
void rt_dataflow_add_fan(RtDataflow *df, RtOp *op);
void rt_dataflow_remove_fan(RtDataflow *df, RtOp *op);

/* Calls every operator's start hook, in plan order. */
int rt_start_ops(int n, RtOp **ops);

/* Opens the state table of node n for op (temporary tables for queries). */
int rt_op_open_table(RtOp *op, WError *err);

/* Key groups (planner/plan_dist.c "Key groups", common/keygroup.h): the key
 * group of a row of G groups whose key cells are vals[cols[0..n)] (cols
 * NULL: vals[0..n)), the one the exchange before the operator computed. */
static inline int rt_row_kg(const Value *vals, int n, const int *cols, int G)
{
    uint64_t h = WEIR_KEY_HASH_SEED;
    for (int i = 0; i < n; i++)
        h = weir_key_hash_value(h, &vals[cols ? cols[i] : i]);
    return weir_key_group(h, G);
}

/* A split operator's row of key group kg must be at instance kg % P, where
 * the exchange sent it (op_exchange.c): a cluster hands a key group's state
 * over by that rule, so a row elsewhere is a routing bug, reported (XX000)
 * rather than stored under an instance that does not own its group. */
static inline int rt_kg_check(const RtOp *op, int kg)
{
    const RtCtx *rc = op->rc;
    if (op->node->parallelism > 1 && rc->n_shards > 1 && kg % rc->n_shards != rc->shard)
        return werr(rc->err, SQLSTATE_INTERNAL, 0, "a row of key group %d reached instance %d of %d", kg,
                    rc->shard, rc->n_shards);
    return 0;
}

/* Puts the 2-byte key-group prefix of group kg in front of the key in b. */
static inline void rt_kg_prepend(Buf *b, int kg)
{
    size_t n = b->len;
    buf_append(b, "\0\0", 2);
    memmove(b->data + 2, b->data, n);
    weir_kg_put((unsigned char *)b->data, kg);
}
/* Opens state table table_id (a temporary one in an ad hoc query). */
int rt_open_state(RtCtx *rc, uint64_t table_id, StorTable **out, WError *err);

/* ---- expression evaluation (eval.c) ---- */

/* Evaluates e over every row of in into a new column (allocated in
 * in->arena; a PE_COL result may share the input's arrays). Rows whose
 * evaluation fails get bad[r] = 1 and a NULL result; the error is counted
 * through rc. Rows already marked in bad are not evaluated (NULL result,
 * no error): CASE, AND, OR and COALESCE use that to evaluate an argument
 * only for the rows that reach it. bad may be NULL when the expression
 * cannot fail. */
int rt_eval(RtCtx *rc, const PlanExpr *e, const Chunk *in, Column *out, uint8_t *bad);
/* A chunk with the same ops/wm and the given columns (arrays shared). */
Chunk *rt_chunk_with_columns(const Chunk *in, int n_cols, Column *cols);
/* Keeps only rows r with keep[r] != 0 (in place, order preserved). */
void rt_chunk_select(Chunk *c, const uint8_t *keep);

/* The far-future rule of a source's watermark (options max_future,
 * far_future): *max_future_us (0 = off) and whether such rows are clamped
 * rather than rejected. Shared by the watermark operator and ANALYZE
 * LATENESS. Errors: 22023 bad option. */
int rt_source_future_policy(const CatRelation *src, int64_t *max_future_us, bool *clamp, WError *err);
/* The bootstrap servers of a Kafka source (its option, else the server's). */
const char *rt_source_bootstrap(const CatRelation *r, const RtEnv *env);

/* ---- JSON (json.c) ---- */

/* Decodes one JSON object into row `row` of c (columns by name; missing
 * fields NULL, unknown fields ignored). Returns 0, or -1 with a message in
 * errbuf (the row is left undefined; the caller does not count it). */
int rt_json_decode_row(const char *p, size_t n, int n_cols, const char *const *names, Chunk *c, int row,
                       char *errbuf, size_t errlen);

/* Finds the top-level field `name` of the JSON object [p, p + n): *vp and
 * *vn get its value's raw text (an object, "null", a string with its
 * quotes...). Returns 1 found, 0 absent, -1 malformed (message in errbuf).
 * a holds unescaped key text. Used for Debezium envelopes. */
int rt_json_field(const char *p, size_t n, const char *name, Arena *a, const char **vp, size_t *vn, char *errbuf,
                  size_t errlen);

#endif
