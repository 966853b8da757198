/*
 * runtime.h: running stream plans.
 *
 * A dataflow is one materialized view's plan instantiated as operators
 * (runtime/op_*.c) wired input to output. The engine thread drives every
 * dataflow with rt_dataflow_step(): each source polls its connector, turns
 * records into chunks and pushes them depth-first through the operators,
 * which update their state tables and emit changes downstream. Between
 * steps every operator is quiescent, so a checkpoint taken there
 * (rt_dataflow_checkpoint) sees one consistent epoch across all of them
 * and the source offsets: exactly-once on recovery.
 *
 * Ad hoc queries (rt_query_run) instantiate the same operators over a
 * bounded input (a materialized view's rows, or VALUES) and collect the
 * resulting changelog into a table of rows, then sort and limit it.
 *
 * Threading: a dataflow and the tables it owns are used by one thread at a
 * time; the server serialises access with its engine lock.
 */
#ifndef WEIR_RUNTIME_H
#define WEIR_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>

#include "chunk.h"
#include "planner.h"
#include "sink.h"
#include "storage.h"

typedef struct RtDataflow RtDataflow;

/* Where the runtime finds what it does not own. */
typedef struct RtEnv {
    StorEnv *stor;
    const char *kafka_bootstrap;    /* default bootstrap when a source names none */
    /* The open state table of a running materialized view (for queries), or NULL. */
    StorTable *(*view_table)(void *ctx, uint64_t table_id);
    /* The running dataflow of the materialized view whose rows are in table_id, or NULL. */
    RtDataflow *(*view_dataflow)(void *ctx, uint64_t table_id);
    void *ctx;
    /* A cluster (issue 16 phase 2, README-cluster.md "Distributed views"):
     * the cluster's name, NULL standalone. */
    const char *cluster;
    /* The partitions of `topic` this node owns now, sorted, into out (at
     * most max); returns the count (0 = none), or -1 = "not managed: read
     * every partition" (standalone, or a topic not on the cluster's Kafka).
     * Any thread. Read by rt_dataflow_open only: the server reopens a
     * distributed view when its assignment changes. NULL = not managed. */
    int (*owned_partitions)(void *ctx, const char *topic, int32_t *out, int max);
} RtEnv;

/* Counters of one dataflow, for system views and tests. */
typedef struct RtStats {
    uint64_t records_in;        /* connector records read */
    uint64_t bad_records;       /* records skipped as undecodable */
    uint64_t rows_out;          /* changes applied to the view */
    uint64_t late_rows;         /* rows dropped as late by window operators */
    uint64_t eval_errors;       /* rows dropped by expression errors */
    uint64_t offset_gaps;       /* offset ranges skipped under on_offset_gap = 'skip' */
    int64_t watermark;          /* the source watermark (TS_MINUS_INF before any) */
    char last_error[320];       /* the last record or evaluation error, "" if none (as long as RtSourceError.message) */
} RtStats;

/*
 * Instantiates plan (which must outlive the dataflow) and restores every
 * operator's state and the source offsets from the last checkpoint. Opens
 * connectors (may block up to a few seconds if the broker is slow).
 * Returns 0, or -1 with err.
 */
int rt_dataflow_open(const RtEnv *env, const PlanView *plan, RtDataflow **out, WError *err);
/* Polls the sources once (waiting at most timeout_ms) and pushes what
 * arrived through the operators. *did_work tells whether any record came.
 * Errors in single records or rows never fail the step; -1 means the
 * dataflow itself is broken (err says why). */
int rt_dataflow_step(RtDataflow *df, int timeout_ms, bool *did_work, WError *err);
/* Adds the dataflow's dirty state, source offsets and sinks' output for
 * `epoch` to checkpoint ck. */
int rt_dataflow_checkpoint(RtDataflow *df, StorCheckpoint *ck, uint64_t epoch, WError *err);
/* Checkpoint `epoch` committed: sinks may deliver what it holds. */
void rt_dataflow_committed(RtDataflow *df, uint64_t epoch);
/* Asks the connectors for their current end offsets and remembers them as
 * the flush target (called with no lock held; thread-safe with step). */
int rt_dataflow_flush_target(RtDataflow *df, WError *err);
/* True once the sources have consumed up to the last flush target. */
bool rt_dataflow_flushed(RtDataflow *df);
/* The view's rows: the materialize operator's table, or for a split
 * materialize (a parallel view's) a read-only handle merging its
 * instances' tables in key order (stor_table_open_merged); with key groups
 * (planner revision 6) a read-only handle over either that hides the
 * keys' key-group prefix (stor_table_open_grouped). Every reader of
 * a view's rows goes through this, never the root operator's table. Owned
 * by df; valid until rt_dataflow_close. */
StorTable *rt_dataflow_view_table(RtDataflow *df);
/* The view's rows as stored: the materialize operator's own table, keys
 * with their key-group prefix (the merged read-only handle for a split
 * materialize). Only for tools that write a view's state behind its
 * operator (VERIFY's testing_corrupt); readers use rt_dataflow_view_table. */
StorTable *rt_dataflow_view_store(RtDataflow *df);
/* Any open state table of the dataflow by id (e.g. its late-rows relation), or NULL. */
StorTable *rt_dataflow_find_table(RtDataflow *df, uint64_t table_id);
/* A state table id for a temporary table (ad hoc query state, a cluster
 * read's gathered rows): from a range no view uses, never checkpointed, so
 * nothing of it reaches the disk. Any thread. */
uint64_t rt_temp_table_id(void);
void rt_dataflow_stats(RtDataflow *df, RtStats *out);
/* A distributed view (PlanView.distributed) in a cluster: the names of the
 * repartition topics the work group must subscribe to, into out (at most
 * max; one per repartition exchange, today one), each with the view's
 * PlanView.key_groups partitions. Returns the count, 0 for a view that is
 * not distributed or without a cluster. */
int rt_plan_repart_topics(const PlanView *plan, const char *cluster, char (*out)[256], int max);
/* The key groups whose rows df's view table holds for readers, sorted,
 * into out (at most max); returns the count. A distributed view run with
 * an assignment: the key groups this node owns (the view table holds no
 * others: lost ones are dropped at open); otherwise every key group
 * 0..G-1 (0 for a view without key groups). */
int rt_dataflow_owned_kgs(RtDataflow *df, uint16_t *out, int max);
/* A distributed view: whether the assignment RtEnv.owned_partitions gives
 * now (its source partitions, its key groups) differs from the one df was
 * opened with; the server then reopens it (stop, start). False for other
 * views. Engine thread, between steps. */
bool rt_dataflow_assignment_changed(RtDataflow *df);

/* One source record a view could not use (undecodable, a NOT NULL column
 * missing or null, an event time too far ahead of the clock), kept for the
 * weir_source_errors system view. */
typedef struct RtSourceError {
    int64_t at_us;              /* wall clock when it was read */
    char source[64];            /* the source's name */
    int32_t partition;          /* -1 when unknown */
    int64_t offset;             /* -1 when unknown */
    char message[320];          /* an offset gap's names a topic, a source and two offsets */
    char record[160];           /* the record's first bytes as text (invalid UTF-8 and control bytes as '?'), "" if none */
} RtSourceError;
/* How many of the most recent source errors a dataflow keeps (older ones
 * are only counted, in RtStats.bad_records). */
#define RT_SOURCE_ERRORS_KEPT 1000
/* Copies the dataflow's kept source errors, oldest first, into out (at
 * most max); returns how many. */
int rt_dataflow_source_errors(RtDataflow *df, RtSourceError *out, int max);

/* The record that stopped a dataflow whose source has on_error = 'fail'. */
/* A step or an open failed because a source's topic was deleted or has
 * fewer partitions than the source was reading (the broker answered; an
 * unreachable broker is 08006 and only retried). The view stays stopped
 * until ALTER MATERIALIZED VIEW ... RESUME (or is recreated): waiting
 * would not bring the records back. */
#define RT_SQLSTATE_SOURCE_LOST SQLSTATE_UNDEFINED_OBJECT
/* A source's next offset is no longer in its partition (deleted by retention
 * or a size limit, or the topic was recreated or truncated) and the source
 * has on_offset_gap = 'fail' (the default): the view stops until RESUME,
 * since going on would silently leave records out. */
#define RT_SQLSTATE_OFFSET_GAP SQLSTATE_PROTOCOL_VIOLATION
/* The source option topic.lost_after's default: how long a running source
 * tolerates its topic missing or short of partitions (a topic being
 * recreated, metadata still propagating) before it stops its views. */
#define RT_TOPIC_LOST_AFTER_DEFAULT_MS 30000

struct RtKafkaProp;
/* The "properties.*" WITH options of a Kafka source or table as librdkafka
 * properties (the bootstrap is left out), into props[max]. Returns how many.
 * The planner refuses a relation with more than WEIR_MAX_KAFKA_PROPERTIES
 * (54000), so max = WEIR_MAX_KAFKA_PROPERTIES holds them all (asserted).
 * The pointers borrow r's strings. */
int rt_source_kafka_props(const CatRelation *r, struct RtKafkaProp *props, int max);

typedef struct RtFailedRecord {
    char source[64];
    int32_t partition;          /* -1 when unknown */
    int64_t offset;             /* -1 when unknown */
    char message[300];          /* what was wrong with it */
} RtFailedRecord;
/* After rt_dataflow_step failed: true, with *out filled, when the step
 * stopped at a bad record of a source with on_error = 'fail' (nothing past
 * it was applied to a checkpoint; reopening the dataflow reads it again). */
bool rt_dataflow_failed_record(RtDataflow *df, RtFailedRecord *out);
/* Treat that one record as on_error = 'skip' would (counted, listed in
 * weir_source_errors, not applied) when this dataflow reads it: ALTER
 * MATERIALIZED VIEW ... RESUME. Call after open, before the first step. */
void rt_dataflow_skip_record(RtDataflow *df, const char *source, int32_t partition, int64_t offset);
/* True while dead letters of a committed checkpoint wait for their
 * delivery thread (CHECKPOINT waits for them, a bounded time, so the topic
 * has them when it returns). */
bool rt_dataflow_dead_letters_pending(RtDataflow *df);
/* Bytes of state the dataflow's operators and sinks hold that are not
 * checkpointed yet (stor_table_dirty_bytes over their tables). */
uint64_t rt_dataflow_dirty_bytes(RtDataflow *df);
/* With on_error = 'dead_letter' (or error.topic), makes sure src's error
 * topic exists (created with one partition). 0 otherwise. */
int rt_dead_letter_prepare(const CatRelation *src, const RtEnv *env, WError *err);
/* The view's name, for dead-letter record headers (borrowed: must outlive df). */
void rt_dataflow_set_name(RtDataflow *df, const char *name);

/* The watermark of one source partition of a dataflow (weir_watermarks). */
typedef struct RtPartitionWatermark {
    char source[64];
    int32_t partition;
    int64_t watermark;          /* the partition's own: max over its rows of the WATERMARK expression (TS_MINUS_INF before any) */
    int64_t max_event_time;     /* largest event time seen since the view started (TS_MINUS_INF before any) */
    int64_t source_watermark;   /* the source's: the min over its partitions that are not idle */
    int64_t idle_ms;            /* time since the partition's last row (or since start) */
    bool idle;                  /* past idle_timeout: not holding the watermark back */
} RtPartitionWatermark;
/* Fills out with every source partition the dataflow's watermark operators
 * track (at most max); returns how many. */
int rt_dataflow_watermarks(RtDataflow *df, RtPartitionWatermark *out, int max);

/* Where one Kafka source partition of a dataflow is (weir_backfills). */
typedef struct RtSourceProgress {
    char source[64];
    int32_t partition;
    int64_t position;           /* the next offset it reads; -1 before it knows */
    int64_t end_offset;         /* the partition's end as the broker last reported it (capped by a bounded
                                   source's end); -1 before the first fetch answered */
} RtSourceProgress;
/* Fills out with every partition of the dataflow's Kafka sources (at most
 * max); returns how many. Asks the broker nothing (never blocks). */
int rt_dataflow_source_progress(RtDataflow *df, RtSourceProgress *out, int max);

/* The counters of one operator of a dataflow (weir_operators). */
typedef struct RtOpCounters {
    uint64_t rows_in;           /* rows pushed into it (changes count one row each) */
    uint64_t rows_out;          /* rows it emitted downstream */
    uint64_t late_rows;         /* rows it dropped as late */
    uint64_t bad_records;       /* source records it rejected (sources and watermark operators) */
    int64_t open_windows;       /* windows it holds state for (not past end + lateness); -1 if not windowed */
    uint64_t expired_keys;      /* keys whose state it dropped after state_ttl without access (since start) */
    /* EXPLAIN ANALYZE (rt_emit, rt_emit_watermark, rt_source_poll): read the
     * clock twice per chunk or watermark handed to the operator, never per row. */
    uint64_t busy_ns;           /* inside its push and watermark calls (sources: their polls), readers' time included */
    uint64_t down_ns;           /* of busy_ns, inside its readers' calls: time it could not go on (backpressure) */
    uint64_t wait_ns;           /* of busy_ns, sources only: waiting for the broker in a poll (idle, not busy) */
    uint64_t probes;            /* joins: rows with a non-NULL key that looked up the other side */
    uint64_t probe_hits;        /* of probes, those that found at least one partner (after the residual condition) */
    int64_t wm_out;             /* the last watermark it emitted; TS_MINUS_INF before any */
} RtOpCounters;
/* The counters of the operator of plan node i (zeros if out of range). */
void rt_dataflow_op_counters(RtDataflow *df, int i, RtOpCounters *out);
/* EXPLAIN ANALYZE: rates are taken over a window of the last
 * RT_ANALYZE_WINDOW_S seconds (since the open while the view is younger),
 * from counters the dataflow samples once a second at the start of a step,
 * the last RT_ANALYZE_SAMPLES of them (memory: that many RtOpCounters per
 * operator, allocated at open). */
#define RT_ANALYZE_WINDOW_S 10
#define RT_ANALYZE_SAMPLES (RT_ANALYZE_WINDOW_S + 2)
typedef struct RtOpAnalyze {
    RtOpCounters now;           /* plan node i's counters since the view started (instances added up) */
    RtOpCounters then;          /* the same at the start of the window */
    int64_t window_us;          /* the window's length (monotonic clock) */
    uint64_t state_bytes;       /* as rt_dataflow_state_bytes */
    int64_t state_entries;      /* entries committed by the last checkpoint; -1 for a stateless node */
    uint64_t state_pending;     /* changes (puts, deletes) since, not yet checkpointed */
} RtOpAnalyze;
/* Fills out for plan node i, with the window ending at now_us
 * (clock_mono_us; one value for every node of one EXPLAIN ANALYZE, so that
 * all their rates are over the same window). Call between steps (engine
 * lock held). Returns 0, or -1 when i is out of range. */
int rt_dataflow_analyze(RtDataflow *df, int i, int64_t now_us, RtOpAnalyze *out);
/* Approximate bytes of state held by plan node i (0 for stateless nodes). */
uint64_t rt_dataflow_state_bytes(RtDataflow *df, int i);
/* True when some operator holds state that its view's state_ttl has expired
 * (so a checkpoint, which sweeps it, is due even if no row came). */
bool rt_dataflow_expiry_due(RtDataflow *df);
/* Writes rows into a writable table's dataflow (plan input TABLE_WRITE):
 * rows[i] is a full row (the plan's column types) with ops[i] OP_INSERT
 * (insert or replace the row of its key) or OP_DELETE (remove the row of
 * its key; only the key columns matter). The changes go through the
 * table's operators and into every view reading it before this returns.
 * Call between engine steps (engine lock held). Returns 0, or -1 with err
 * (the dataflow is then broken, as after a failed step). */
int rt_dataflow_write(RtDataflow *df, int n_rows, const RowOp *ops, const Value *const *rows, WError *err);
/* Stops the connectors and frees the operators; state stays in storage. */
void rt_dataflow_close(RtDataflow *df);
/* VERIFY: a second instance of live's plan with empty temporary state whose
 * Kafka sources read from their first offsets up to the positions live's
 * sources have reached now (the input live's state reflects), ending with
 * +infinity only where live's bounded source ended. Step it with
 * rt_dataflow_step until rt_dataflow_flushed, then read
 * rt_dataflow_view_table; close it with rt_dataflow_close (its tables are
 * never checkpointed). Tables and views the plan reads are read as their
 * current rows. 0A000: a non-Kafka source, a source that started at
 * 'latest' or a timestamp (its first offsets are not kept), and a plan
 * over tables or views whose result depends on the order of their
 * changes (windows, interval and temporal joins, string_agg/first/last). */
int rt_dataflow_replay_open(const RtEnv *env, const PlanView *plan, RtDataflow *live, RtDataflow **out, WError *err);
/* The live dataflow's source positions as text, per source: "name 0:12 1:40; ..." */
void rt_dataflow_positions(RtDataflow *df, Buf *out);
/* True when a replay of df may judge lateness differently from df itself: a
 * window operator that drops late rows reads a source with several partitions
 * (their interleaving is not replayed). */
bool rt_dataflow_replay_order_matters(RtDataflow *df);
/* Deletes the durable state of every stateful node of plan. */
int rt_dataflow_drop_state(StorEnv *stor, const PlanView *plan, WError *err);

/* Sinks: a view's changelog delivered exactly once to an external target
 * (op_sink.c). */
typedef struct RtSink RtSink;
typedef struct RtSinkStatus {
    uint64_t delivered_epoch;   /* the last epoch the target has */
    uint64_t rows_delivered;    /* changes delivered since start */
    uint64_t rows_rejected;     /* rows the target refused, in its weir_sink_rejects (on_error = 'skip') */
    int pending_epochs;         /* sealed or committed, not yet delivered */
    char state[32];             /* starting, running, retrying, unreachable */
    char last_error[320];
} RtSinkStatus;

/* Attaches a sink to the view's dataflow. view_cols maps each spec column
 * to a view column; spec (and everything it points to) must outlive the
 * sink. table_id holds its undelivered batches. On first attach the view's
 * current rows are the sink's first output; after a restart the sink
 * resumes with the batches its table holds. Delivery runs on its own
 * thread and retries until the target accepts. */
int rt_dataflow_attach_sink(RtDataflow *df, const RtSinkSpec *spec, const int *view_cols, uint64_t table_id,
                            RtSink **out, WError *err);
/* ALTER MATERIALIZED VIEW ... SWAP WITH: moves sink s from dataflow from
 * (the view it delivers now) to to, without a gap or a duplicate: the open
 * epoch gets the difference between the two views' rows (netted per key:
 * only keys whose row differs reach the target), and from then on s
 * delivers to's changes. view_cols: to's column of each sink column (the
 * two views have the same visible columns). Engine lock held, between
 * steps. Errors: 0A000 an append-only sink (the difference retracts). On
 * another error s may be half-way: the caller stops the sink. */
int rt_sink_switch(RtSink *s, RtDataflow *from, RtDataflow *to, const int *view_cols, WError *err);
/* Stops and frees the sink (its table stays; drop it with stor_table_drop). */
void rt_dataflow_detach_sink(RtDataflow *df, RtSink *s);
void rt_sink_status(RtSink *s, RtSinkStatus *out);

/* Changefeeds (op_subscribe.c). A change of the view: its full row (all
 * columns, hidden ones included; see the plan's schema) and +1 for an
 * insert, -1 for a delete (an update is a -1 then a +1). Called on the
 * engine thread with the engine lock held: copy and return, never block. */
typedef void (*RtChangeFn)(void *arg, uint64_t epoch, int n_cols, const Value *row, int diff);
/* Epoch `epoch` is complete and durable (every change of it was delivered). */
typedef void (*RtProgressFn)(void *arg, uint64_t epoch);
typedef struct RtSubscriber RtSubscriber;
/* Taps the view's changes from now on; the first changes belong to
 * next_epoch (the last committed epoch + 1). Take the snapshot of the view
 * in the same critical section so nothing falls between the two. */
int rt_dataflow_subscribe(RtDataflow *df, uint64_t next_epoch, RtChangeFn on_change, RtProgressFn on_progress,
                          void *arg, RtSubscriber **out);
void rt_dataflow_unsubscribe(RtDataflow *df, RtSubscriber *s);

/* Receives the rows of an ad hoc query, text form (NULL = SQL NULL).
 * Returning nonzero stops the query. */
typedef int (*RtRowFn)(void *arg, int n_cols, const char *const *vals, const int *lens);

/* Runs q to completion and hands each visible output row to fn, in ORDER
 * BY order, after OFFSET/LIMIT. Returns the row count, or -1 with err. */
long rt_query_run(const RtEnv *env, const PlanQuery *q, RtRowFn fn, void *arg, WError *err);
/* A query's cancel: fn(arg) is asked now and then while it runs (in the
 * operators' loops, every RT_CANCEL_EVERY rows or pairs); true stops it
 * with 57014. */
typedef struct RtCancel {
    bool (*fn)(void *arg);
    void *arg;
} RtCancel;
/* rt_query_run that a session can cancel while it computes, not only while
 * it sends rows (a count over a long join sends one row at the end). */
long rt_query_run_cancel(const RtEnv *env, const PlanQuery *q, const RtCancel *cancel, RtRowFn fn, void *arg,
                         WError *err);

/* Receives the rows of an ad hoc query as values (its visible columns, in
 * the plan's types). Strings are valid until rt_query_run_values returns:
 * copy what you keep. Returning nonzero stops the query. */
typedef int (*RtValuesFn)(void *arg, int n_cols, const Value *vals);
/* rt_query_run for callers that compute with the rows (INSERT ... SELECT,
 * UPDATE, DELETE): no text conversion. */
long rt_query_run_values(const RtEnv *env, const PlanQuery *q, RtValuesFn fn, void *arg, WError *err);

/* Encodes one row as the JSON object a Kafka source with these columns
 * reads (used by INSERT INTO a source). */
void rt_json_encode_row(int n, const char *const *names, const Value *vals, Buf *out);

/* ---- Window rules (window_rules.c) --------------------------------------
 * The one implementation of window assignment and of the closing and
 * lateness tests: the window operator, the window aggregation and ANALYZE
 * LATENESS all call these, so an analysis reports what a view would do. */

/* A window function's shape (from a plan node or an ANALYZE statement). */
typedef struct RtWindowDef {
    AstWindowKind kind;
    int64_t size_us;            /* TUMBLE/HOP size, CUMULATE max size, SESSION gap */
    int64_t slide_us;           /* HOP slide, CUMULATE step; == size_us for TUMBLE and SESSION */
    int64_t offset_us;          /* alignment offset (0: the Unix epoch) */
} RtWindowDef;

/* Writes the windows [starts[i], ends[i]) that contain event time ts, at
 * most max, oldest start first, and returns how many (size / slide for
 * HOP, one for TUMBLE, up to size / step for CUMULATE; SESSION gives the
 * row's own session [ts, ts + gap)). */
int rt_window_assign(const RtWindowDef *w, int64_t ts, int64_t *starts, int64_t *ends, int max);
/* True when a window ending at end has fired at watermark wm (wm >= end). */
bool rt_window_closed(int64_t end, int64_t wm);
/* True when a row judged at watermark wm is late for the window ending at
 * end: end + lateness <= wm (never before the first watermark; always at
 * the +infinity that ends a bounded input). */
bool rt_window_late(int64_t end, int64_t wm, int64_t lateness_us);
/* Sessions (Flink's session windows): a row at ts opens [ts, ts + gap), and
 * true when sessions [start, end) and [o_start, o_end) are one: they
 * overlap or touch (o_start <= end and start <= o_end), so rows exactly
 * gap apart share a session. A row merges every held session of its key
 * that joins its own; it is late only when the merged session is
 * (rt_window_late of its end), so a row whose own session is late still
 * counts when it joins a session still held. */
bool rt_session_joins(int64_t start, int64_t end, int64_t o_start, int64_t o_end);

/* ---- ANALYZE LATENESS (lateness_analyze.c) ------------------------------
 * Reads a source's retained Kafka log once and replays it, for candidate
 * (watermark bound, allowed lateness) pairs, through the same watermark
 * and window rules a view applies (per-partition max of ts - bound, min
 * over partitions, advancing row by row; rt_window_assign/_closed/_late),
 * without touching any running view. */

/* The event times of a source's log in the order a view is assumed to read
 * them (see rt_lateness_read_log). */
typedef struct RtLatenessLog {
    int n_parts;
    int64_t n_rows;             /* rows kept, in read order */
    int64_t *ts;                /* event time per row (TS_MINUS_INF for a NULL time), owned */
    int32_t *part;              /* partition per row, owned */
    int32_t *key;               /* group key id per row (0..n_keys-1; all 0 without PARTITION BY), owned; may be
                                   NULL in a hand-made log (all 0) */
    int64_t n_keys;
    int64_t *part_rows;         /* rows per partition (n_parts), owned */
    int64_t records;            /* records read (kept + bad + rejected) */
    int64_t bad_records;        /* undecodable or NOT NULL-violating records, skipped as a view skips them */
    int64_t rejected;           /* rows rejected as more than max_future ahead of the clock */
    int64_t clamp_limit_us;     /* far_future = 'clamp': the watermark value limit; TS_PLUS_INF when off */
    bool truncated;             /* stopped at max_rows before the end offsets */
    bool idle_timeout;          /* the source has an idle_timeout: partitions with no rows do not hold the watermark */
} RtLatenessLog;

/* Reads every partition of src's topic from its earliest retained offset
 * (with tail > 0: from tail records before the end, or the earliest if that
 * is later) to the end offset it had when called (at most max_records
 * records in all),
 * decodes the WATERMARK column as the source operator does (bad records and
 * far-future rows are skipped and counted as a view would) and merges the
 * partitions into one order: by Kafka record timestamp, then partition,
 * never reordering a partition. Each row also gets the id of its value of
 * the key_cols columns (SESSION windows are per group key; n_key_cols 0:
 * one key). src must be a Kafka source in FORMAT PLAIN
 * with a WATERMARK. On success *out owns arrays freed by
 * rt_lateness_log_fini. Errors: 0A000 other connectors or formats, 42P20
 * no WATERMARK, 08006/42704 broker or topic, 57014 cancelled (cancel() true). */
int rt_lateness_read_log(const RtEnv *env, const CatRelation *src, int n_key_cols, const int *key_cols, int64_t tail,
                         int64_t max_records, bool (*cancel)(void *), void *cancel_arg, RtLatenessLog *out, WError *err);
void rt_lateness_log_fini(RtLatenessLog *log);

/* Arrival delay of rows: the largest event time seen before the row in its
 * partition minus the row's own (0 for a row in order). Percentiles are
 * nearest-rank: the p-th is the smallest delay d with at least p% of the
 * rows at or below d. */
typedef struct RtDelayStats {
    int32_t partition;          /* -1 for all partitions together */
    int64_t rows;               /* rows with an event time */
    int64_t out_of_order;       /* rows with a delay > 0 */
    int64_t p50_us, p90_us, p99_us, p999_us, max_us;
} RtDelayStats;

/* What one (bound, lateness) pair does to the log. Counts are of (row,
 * window) pairs: a HOP row is judged for each of its windows. */
typedef struct RtLatenessResult {
    int64_t bound_us, lateness_us;
    int64_t pairs;              /* (row, window) pairs */
    int64_t on_time;            /* in their window's first result (arrived before it fired) */
    int64_t late_updates;       /* arrived after the window fired, within the lateness: an update */
    int64_t dropped;            /* late: end + lateness <= watermark */
    int64_t windows;            /* windows with at least one row */
    int64_t exact_windows;      /* windows that lost no row (final result exact) */
    int64_t fired;              /* windows fired by the watermark before the end of the log */
    int64_t fired_at_end;       /* windows still open at the end (they fire only when a bounded input ends) */
    int64_t wait_sum_us;        /* over `fired`: max event time read when it fired - window end */
    int64_t max_open;           /* most windows holding state at once (until end + lateness <= watermark) */
} RtLatenessResult;

/* Computes the delay distribution (delays[0] all partitions, then one per
 * partition; n_parts + 1 entries, caller-allocated) and one result per
 * (bounds[i], lateness[j]) pair, bound-major (n_bounds * n_lateness,
 * caller-allocated). For a SESSION window (gap = size_us) sessions are kept
 * per key of the log (log->key) as the session aggregation keeps them, and a
 * result's counts are of rows (each row is in one session), windows are the
 * final sessions (after merges), and a session is exact when no dropped
 * row's own [ts, ts + gap) overlaps it. cancel (may be NULL)
 * is asked every million rows; returns 0, or -1 when it said stop. */
int rt_lateness_simulate(const RtLatenessLog *log, const RtWindowDef *w, int n_bounds, const int64_t *bounds_us,
                         int n_lateness, const int64_t *lateness_us, RtDelayStats *delays,
                         RtLatenessResult *results, bool (*cancel)(void *), void *cancel_arg);

/* ---------------------------------------------------------------------------
 * Changelog topics (changelog.c, README-cluster.md "Changelog topics"): the
 * replica of a view's key-grouped state in Kafka. Topic
 * `_weir.<cluster>.cl.<view id>`, G partitions (partition = key group),
 * cleanup.policy=compact. One record per committed change: key = u64 BE
 * table id ++ state key (which begins with its 2-byte BE key group), value
 * = the state value or a tombstone; after each checkpoint's changes, a
 * marker per owned partition: key = u64 BE 0 ++ "ckpt", value = u64 LE
 * epoch. A restorer applies a partition up to its latest marker.
 * ------------------------------------------------------------------------- */

/* Epoch changes kept in memory by a producer waiting for Kafka, by
 * default: past it an epoch's changes stay only in LMDB (where they are
 * anyway, until confirmed) and are read back when their turn comes. */
#define RT_CHANGELOG_DEFAULT_MEMORY (64u << 20)
/* The largest one checkpoint's captured changes of one view may be: one
 * LMDB metadata value, and LMDB's write transaction holds ~512 MiB of
 * dirty pages. Past it rt_changelog_capture fails (54000). */
#define RT_CHANGELOG_MAX_EPOCH_BYTES ((size_t)256 << 20)

typedef struct RtChangelogConf {
    const char *bootstrap;      /* Kafka "host:port[,...]" */
    const char *cluster;        /* the cluster name in the topic name */
    uint64_t view_id;           /* the view's table id: the topic's last part */
    int key_groups;             /* G, the topic's partition count (1..65536) */
    const uint64_t *table_ids;  /* the view's key-grouped state tables (copied) */
    int n_tables;
    const int *kgs;             /* the key groups this node owns (copied); NULL = all G */
    int n_kgs;
    size_t memory_limit;        /* producer: bytes of changes queued in memory; 0 = default */
} RtChangelogConf;

/* The producer. */
typedef struct RtChangelog RtChangelog;

typedef struct RtChangelogStats {
    uint64_t confirmed_epoch;   /* last epoch whose changes and markers Kafka acknowledged */
    uint64_t queued_epochs;     /* committed epochs waiting for delivery */
    uint64_t queued_bytes;      /* of those, bytes held in memory */
    uint64_t spilled_epochs;    /* epochs that were dropped from memory (read back from LMDB) */
    uint64_t records_sent;      /* change and marker records acknowledged */
    uint64_t send_failures;     /* delivery attempts that failed (Kafka away) */
    char last_error[160];       /* the latest failure's message, "" if none */
} RtChangelogStats;

/* Starts the producer of conf's changelog over env (borrowed; it must
 * outlive the producer). Every epoch captured before a crash and never
 * confirmed (its changes are kept in env's checkpoint metadata under
 * "cl.<view id>.p.<epoch>", written by the epoch's own checkpoint and
 * deleted by the sender, in a small transaction of its own, once Kafka
 * acknowledged the epoch's marker and before the next epoch goes out) is
 * queued again, oldest first, so the next start re-sends it: at most one
 * epoch already delivered, the newest, is sent twice. A sender thread creates the topic when missing (compacted, G
 * partitions) and delivers epochs in order; Kafka being away is not an
 * error here (it retries). Errors: 22023 bad conf, 53200 no thread. */
int rt_changelog_open(const RtChangelogConf *conf, StorEnv *env, RtChangelog **out, WError *err);

/* Captures the changes of conf's tables in ck (after the last
 * stor_checkpoint_add_table, before stor_checkpoint_write, on either of
 * their threads) and records them in ck's metadata. Errors: 54000 the epoch's
 * changes exceed RT_CHANGELOG_MAX_EPOCH_BYTES, XX000 a key shorter than
 * 2 bytes or of a key group >= G. On error the checkpoint should be
 * aborted (the changes are not lost: they stay dirty). */
int rt_changelog_capture(RtChangelog *cl, StorCheckpoint *ck, uint64_t epoch, WError *err);

/* After stor_checkpoint_write of the captured checkpoint: written = its
 * result was 0. The epoch's changes join the send queue (in memory up to
 * conf.memory_limit); a failed write forgets them (the next checkpoint
 * captures the same dirty entries again). */
void rt_changelog_committed(RtChangelog *cl, uint64_t epoch, bool written);

/* Waits up to timeout_ms for every epoch up to `epoch` to be confirmed.
 * @return 1 confirmed, 0 timed out. */
int rt_changelog_wait(RtChangelog *cl, uint64_t epoch, int timeout_ms);

void rt_changelog_stats(RtChangelog *cl, RtChangelogStats *out);

/* Stops the sender without waiting for delivery: what is not confirmed
 * stays in LMDB and the next rt_changelog_open re-sends it. Takes up to
 * ~2 s while Kafka is away (a topic check in progress), up to 15 s if an
 * epoch larger than librdkafka's local queue (100,000 records) is blocked
 * on it. NULL is allowed. */
void rt_changelog_close(RtChangelog *cl);

/* The restorer: conf.kgs (NULL = all) and conf.table_ids of env. */
typedef struct RtClRestore RtClRestore;

typedef struct RtClRestoreStats {
    uint64_t records;           /* records read (changes, markers, skipped tails) */
    uint64_t bytes;             /* key + value bytes read */
    uint64_t applied;           /* changes written into LMDB */
    uint64_t usec;              /* wall time of open + catch-up */
    uint64_t apply_usec;        /* of which writing LMDB (stor_changes_apply) */
} RtClRestoreStats;

/* Opens the changelog for restore: checks the topic (created empty when
 * missing, so a standby can wait on it) has G partitions and that each
 * key group's partition still starts at offset 0 (55000 otherwise: records
 * were trimmed, e.g. by the embedded broker's ~5 MiB per partition, and
 * the partition cannot rebuild the state), then drops the key groups'
 * local ranges of every table (the tables must not be open) and starts
 * reading from the beginning. After a failure (here or in catch_up) the
 * key groups' local state is incomplete: restore them again. Errors: 08006 Kafka unreachable within
 * timeout_ms, 22023 partition count differs, 55000, storage errors. */
int rt_changelog_restore_open(const RtChangelogConf *conf, StorEnv *env, int timeout_ms, RtClRestore **out,
                              WError *err);

/* Reads every key group's partition up to its end offset as of this call
 * and applies each epoch's changes once its marker is read (in LMDB
 * write transactions of up to 8 MiB of changes); changes after a
 * partition's latest marker (an epoch whose delivery was cut short) are
 * not applied. *epoch receives the least latest marker over the key
 * groups (0: some key group has none). Errors: 08006 not done within
 * timeout_ms, XX001 a malformed record, storage errors. */
int rt_changelog_restore_catch_up(RtClRestore *r, int timeout_ms, uint64_t *epoch, WError *err);

/* Standby: applies whatever complete epochs arrived within timeout_ms
 * (waiting at most that long for the first record) and writes the least
 * latest marker into *epoch. Errors as catch_up but no timeout error. */
int rt_changelog_restore_poll(RtClRestore *r, int timeout_ms, uint64_t *epoch, WError *err);

void rt_changelog_restore_stats(RtClRestore *r, RtClRestoreStats *out);
void rt_changelog_restore_close(RtClRestore *r);

/* open + catch_up + close: the key groups' state restored into env.
 * stats may be NULL. */
int rt_changelog_restore(const RtChangelogConf *conf, StorEnv *env, int timeout_ms, uint64_t *epoch,
                         RtClRestoreStats *stats, WError *err);

#endif
