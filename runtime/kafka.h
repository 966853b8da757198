/*
 * kafka.h: the Kafka connector's client side: an assign-only source
 * (consumer) and a producer with transactions, over librdkafka.
 *
 * The source never joins a consumer group: weir decides which partitions an
 * actor reads and keeps the offsets in its own checkpoints (as Flink does),
 * so a restart seeks every partition to the checkpointed offsets with
 * rt_kafka_source_assign. Nothing is ever committed to the broker. The
 * producer serves sinks; its transactional API backs the exactly-once Kafka
 * sink (one transaction per epoch, committed after the checkpoint).
 *
 * librdkafka is quiet: only its errors reach stderr, prefixed "weir: kafka:".
 * Handles are not thread-safe for concurrent calls on the same handle; use
 * one handle per actor. `<librdkafka/rdkafka.h>` stays inside kafka.c.
 */
#ifndef WEIR_RUNTIME_KAFKA_H
#define WEIR_RUNTIME_KAFKA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define RT_KAFKA_EARLIEST (-2) /* start at the partition's first retained offset */
#define RT_KAFKA_LATEST   (-1) /* start at the partition's end (only new records) */

/* Negative results beyond the generic -1, for callers that must react
 * differently (the exactly-once sink). The WError always has the message. */
enum {
    RT_KAFKA_ERR = -1,           /* failed; see the WError */
    RT_KAFKA_ERR_ABORTABLE = -2, /* transaction failed: abort it, then retry the epoch */
    RT_KAFKA_ERR_FATAL = -3,     /* producer unusable (e.g. fenced): close and reopen */
    RT_KAFKA_ERR_RETRIABLE = -4, /* timed out or transient: the same call may be retried */
};

/* One consumed record. key/value point into librdkafka's buffer and stay
 * valid until the next rt_kafka_source_poll or rt_kafka_source_close on the
 * same source. key is NULL for a null key, value NULL for a tombstone. */
typedef struct RtKafkaRecord {
    int32_t partition;
    int64_t offset;
    int64_t timestamp_ms;  /* record timestamp (create or log-append time), -1 if none */
    const void *key;
    size_t key_len;
    const void *value;
    size_t value_len;
} RtKafkaRecord;

/* An extra librdkafka property passed through as is: the "properties.*"
 * WITH options minus the prefix (e.g. "security.protocol"). They are applied
 * after weir's defaults, so they override them. */
typedef struct RtKafkaProp {
    const char *key;
    const char *value;
} RtKafkaProp;

struct rd_kafka_s; /* librdkafka's rd_kafka_t */

/* Creates topic (partitions; cleanup.policy when not NULL) through the Admin
 * API of the client rk; an existing topic is fine (another client may have
 * won the race). 08006 when the broker does not answer within timeout_ms,
 * 58030 when it refuses. */
int rt_kafka_create_topic(struct rd_kafka_s *rk, const char *topic, int partitions, const char *cleanup_policy,
                          int timeout_ms, WError *err);

typedef struct RtKafkaSource RtKafkaSource;

/* Connects to bootstrap ("host:port[,host:port...]") and checks topic
 * within timeout_ms. A missing topic is created through the Admin API with
 * create_partitions partitions when that is > 0 (replication factor 1 on a
 * single broker, the broker default otherwise). On success *out owns a
 * source with nothing assigned yet.
 * Errors: 08006 broker unreachable within timeout_ms; 42704 topic missing
 * and create_partitions == 0; 22023 bad property; 58030 the broker refused
 * (e.g. topic creation failed). */
int rt_kafka_source_open(const char *bootstrap, const char *topic, int create_partitions,
                         const RtKafkaProp *props, int n_props, int timeout_ms,
                         RtKafkaSource **out, WError *err);

/* A log: a compacted, single-partition topic (created so if missing, e.g.
 * a weir cluster's catalog and nodes topics, server/cluster.c) opened for
 * reading partition 0 from offset `from` (or RT_KAFKA_EARLIEST), with no
 * consumer group. Read with rt_kafka_source_poll; the high watermark with
 * rt_kafka_source_end_offsets. Errors as rt_kafka_source_open, and 22023
 * when the topic exists with more than one partition. */
int rt_kafka_log_open(const char *bootstrap, const char *topic, int64_t from, int timeout_ms, RtKafkaSource **out,
                      WError *err);

/* Makes sure topic exists: creates it with `partitions` partitions and
 * cleanup_policy (NULL = the broker's default) when missing, and writes the
 * partition count it has into *n_out (an existing topic keeps its own: the
 * caller checks it). Errors as rt_kafka_source_open. */
int rt_kafka_topic_ensure(const char *bootstrap, const char *topic, int partitions, const char *cleanup_policy,
                          int timeout_ms, int *n_out, WError *err);

/* The topic's partition count, as seen at open (or grown to). */
int rt_kafka_source_partition_count(RtKafkaSource *s);

/* The topic grew to n partitions (the watcher said so): partitions up to
 * n - 1 may be assigned from now on. Nothing is assigned here; n not above
 * the current count is ignored. */
void rt_kafka_source_grow(RtKafkaSource *s, int n);

/* Assigns the n partitions, each starting at its offset (>= 0 exact next
 * offset, RT_KAFKA_EARLIEST or RT_KAFKA_LATEST); replaces any previous
 * assignment (records of dropped partitions are not returned after this).
 * n == 0 unassigns everything. Errors: 22023 partition out of range. */
int rt_kafka_source_assign(RtKafkaSource *s, int n, const int32_t *partitions,
                           const int64_t *offsets, WError *err);

/* Moves the n partitions, all assigned already, to the offsets (>= 0,
 * RT_KAFKA_EARLIEST or RT_KAFKA_LATEST) without changing the assignment,
 * waiting up to timeout_ms until no record fetched from the old positions
 * can be returned. Use it rather than assigning the same partitions again:
 * librdkafka 2.0 can abort on a partition removed twice in quick
 * succession (its issue #5573). Errors: 22023 not a partition or offset;
 * 08006 timed out (the positions are then unknown: assign again); 58030
 * refused. */
int rt_kafka_source_seek(RtKafkaSource *s, int n, const int32_t *partitions, const int64_t *offsets,
                         int timeout_ms, WError *err);

/* Waits up to timeout_ms for the first record, then takes whatever else is
 * already fetched, up to max, without waiting further. Returns the count (0
 * on timeout) or RT_KAFKA_ERR_FATAL if the consumer became unusable (the
 * error is logged). Transient errors are logged and retried by librdkafka.
 * Records stay valid until the next poll or close. */
int rt_kafka_source_poll(RtKafkaSource *s, int timeout_ms, RtKafkaRecord *recs, int max);

/* True when the last thing seen for partition was its end of log (nothing
 * newer fetched since); false for unassigned partitions and after assign. */
bool rt_kafka_source_at_end(RtKafkaSource *s, int32_t partition);

/* A partition whose fetch position is no longer in the log: deleted by
 * retention or a size limit, or past the end of a recreated or truncated
 * topic. Only reported when the source was opened with the property
 * auto.offset.reset = error (else librdkafka jumps to the oldest record by
 * itself, silently). Returns true once per such event, with the partition;
 * nothing more of it is fetched until rt_kafka_source_assign. */
bool rt_kafka_source_take_gap(RtKafkaSource *s, int32_t *partition);

/* Asks the broker for partition's first offset (the log start: records
 * before it were deleted by retention or a broker's size limit; compaction
 * leaves it alone) into *out. Errors as rt_kafka_source_end_offsets. */
int rt_kafka_source_start_offset(RtKafkaSource *s, int32_t partition, int64_t *out, int timeout_ms, WError *err);

/* Asks the broker for every partition's end offset (the offset the next
 * record will get; with the default read_committed isolation the last
 * stable offset) and writes partition_count entries to out. For FLUSH and
 * bounded sources. Errors: 08006 no answer within timeout_ms, 58030 broker
 * error. */
int rt_kafka_source_end_offsets(RtKafkaSource *s, int64_t *out, int timeout_ms,
                                WError *err);

/* Asks the broker, per partition, for the first offset whose record
 * timestamp is at or after ts_ms (Kafka's ListOffsets by time); a partition
 * with no such record gets RT_KAFKA_LATEST (only newer records). Writes
 * partition_count entries to out. Errors: 08006 no answer within
 * timeout_ms, 58030 the broker refused (e.g. it keeps no time index). */
int rt_kafka_source_offsets_for_time(RtKafkaSource *s, int64_t ts_ms, int64_t *out, int timeout_ms, WError *err);

/* The partition's first and end offsets as last reported by the broker in
 * a fetch response (no request is made, so this never blocks). False while
 * nothing was fetched yet for the partition. */
bool rt_kafka_source_cached_offsets(RtKafkaSource *s, int32_t partition, int64_t *lo, int64_t *hi);

/* What the topic watcher last saw (rt_kafka_source_topic_state): a
 * partition count > 0, or one of these. */
enum {
    RT_KAFKA_TOPIC_MISSING = 0,      /* the broker answered; the topic is not there */
    RT_KAFKA_TOPIC_UNREACHABLE = -1, /* no metadata answer (broker down, slow) */
};

/* Starts a thread that asks the broker for its metadata every interval_ms
 * (never from the caller's thread: a dead broker must not stall it), so a
 * deleted or shrunk topic can be told from an unreachable broker. Call at
 * most once; rt_kafka_source_close stops it. Errors: 53200 no thread. */
int rt_kafka_source_watch(RtKafkaSource *s, int interval_ms, WError *err);

/* The watcher's last answer: a partition count, RT_KAFKA_TOPIC_MISSING or
 * RT_KAFKA_TOPIC_UNREACHABLE; *since_ms (rt_kafka_now_ms's clock) is when
 * that answer was first given, for grace periods. Before the first answer
 * (and without a watcher) it is the partition count seen at open. Never
 * blocks on the network. */
int rt_kafka_source_topic_state(RtKafkaSource *s, int64_t *since_ms);

/* The monotonic clock of rt_kafka_source_topic_state, in ms. */
int64_t rt_kafka_now_ms(void);

/* Releases the consumer and every record returned by the last poll. NULL
 * is allowed. Commits nothing. */
void rt_kafka_source_close(RtKafkaSource *s);

typedef struct RtKafkaProducer RtKafkaProducer;

/* A producer for bootstrap. Does not contact the broker yet. With
 * "transactional.id" among props it is a transactional producer: call
 * rt_kafka_producer_init_txn once before the first transaction.
 * Errors: 22023 bad property. */
int rt_kafka_producer_open(const char *bootstrap, const RtKafkaProp *props, int n_props,
                           RtKafkaProducer **out, WError *err);

/* Queues one record (the data is copied). partition -1 lets librdkafka's
 * partitioner choose (by key hash; random-sticky for NULL keys); key may be
 * NULL. Blocks while the local queue is full (backpressure). A record that
 * later fails to deliver is reported by rt_kafka_producer_flush.
 * Errors: 58030 (unknown partition, record too large, producer fatal). */
int rt_kafka_produce(RtKafkaProducer *p, const char *topic, int32_t partition,
                     const void *key, size_t klen, const void *val, size_t vlen,
                     WError *err);
/* rt_kafka_produce with record headers (names and values copied; a value
 * is a NUL-terminated string). val NULL produces a null value (tombstone). */
int rt_kafka_produce_headers(RtKafkaProducer *p, const char *topic, int32_t partition,
                             const void *key, size_t klen, const void *val, size_t vlen,
                             const RtKafkaProp *headers, int n_headers, WError *err);

/* Waits until every queued record is acknowledged or timeout_ms passes.
 * Errors: 08006 (RT_KAFKA_ERR_RETRIABLE) records still outstanding at the
 * timeout; 58030 a delivery failed since the last flush (the first failure is
 * reported; the failure state is then cleared). */
int rt_kafka_producer_flush(RtKafkaProducer *p, int timeout_ms, WError *err);

/* Records acknowledged by the broker since the producer was opened (serves
 * the delivery reports that have arrived first). */
long rt_kafka_producer_acked(RtKafkaProducer *p);

/* After a failed or timed-out flush: withdraws every record not yet
 * acknowledged, so the producer never sends or retries it. Records still
 * in the local queue are certainly never written. Returns how many had
 * already been sent without an answer: the broker may still write those
 * (a paused broker answers when it resumes). Clears the failure state. */
int rt_kafka_producer_purge(RtKafkaProducer *p);

/* Transactions (requires "transactional.id" in the open props). init_txn
 * registers the id with the broker and fences older producers with the
 * same id, aborting their open transaction; begin starts a local
 * transaction; commit flushes and commits; abort drops everything produced
 * since begin. Negative results are RT_KAFKA_ERR_* (see above); the mock
 * broker accepts transactions but does not hide aborted records from
 * read_committed consumers. */
int rt_kafka_producer_init_txn(RtKafkaProducer *p, int timeout_ms, WError *err);
int rt_kafka_producer_begin_txn(RtKafkaProducer *p, WError *err);
int rt_kafka_producer_commit_txn(RtKafkaProducer *p, int timeout_ms, WError *err);
int rt_kafka_producer_abort_txn(RtKafkaProducer *p, int timeout_ms, WError *err);

/* Destroys the producer. Records not yet delivered are dropped: flush (or
 * commit) first. NULL is allowed. */
void rt_kafka_producer_close(RtKafkaProducer *p);

/* The control topic of exactly-once writers (__weir_sink_progress, compacted;
 * implemented in sink_kafka.c, which owns it): a writer commits, in the same
 * Kafka transaction as its records, a progress record key -> epoch, and after
 * a crash reads the highest epoch committed under its key. The Kafka sink
 * uses its sink name as key; dead letters (bad_records.c) use "weir-dlq/ID/VIEW".
 * prepare creates the topic if missing; read returns 0 for a key never
 * written. Errors as rt_kafka_source_open / rt_kafka_produce; read: 08006
 * when the topic's end is not reached in 15 s. */
int rt_kafka_progress_prepare(const char *bootstrap, WError *err);
int rt_kafka_progress_read(const char *bootstrap, const char *key, uint64_t *epoch, WError *err);
int rt_kafka_progress_produce(RtKafkaProducer *p, const char *key, uint64_t epoch, WError *err);

/* True if something answers the Kafka protocol at bootstrap within
 * timeout_ms (a TCP probe first, so a closed port answers false at once). */
bool rt_kafka_ping(const char *bootstrap, int timeout_ms);

#endif
