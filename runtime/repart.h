/*
 * repart.h: repartition topics, the durable shuffle between the fragments
 * of a view that may run on different nodes (docs: runtime/README-cluster.md,
 * "Repartition topics"; the record format is the data plane contract).
 *
 * A repartition topic `_weir.<cluster>.rp.<view>.<node>` has G partitions,
 * one per key group (partition = kg). Producing tasks (a task is the
 * view's fragment over one source partition) write one record per row to
 * the partition of the row's key group, a watermark record to every
 * partition when their watermark moves, and a barrier record to every
 * partition at each checkpoint. Every record carries (task, epoch, seq):
 * a task replayed after a failover re-sends the same (task, seq) for the
 * same row, and the reader drops what it already applied, so exactly-once
 * needs no broker transactions.
 *
 * Record value (little-endian): u8 version (1) | u8 kind | u32 task |
 * u64 epoch | u64 seq | payload. Kafka key: the key group as 2 bytes
 * big-endian. Payloads: kind 0 (row) the op byte then the row in
 * row_encode's form (common/row.h: a type tag per value, so every weir type,
 * NULL included, round-trips bit for bit); kind 1 (watermark) an i64 in
 * microseconds (RT_REPART_WM_IDLE for "idle"); kind 2 (barrier) nothing.
 *
 * seq numbers the task's ROW records over the task's whole life, from 0,
 * and does not restart with each epoch (a change to the data plane
 * contract, which said "position within (task, epoch)"): the producer keeps
 * the count in its checkpoint next to its source offsets, and a replay
 * restores it, so a row's number depends only on its place in the task's
 * output, never on where a replay cuts its epochs (a timer's choice).
 * Readers deduplicate by seq; the epoch is what barriers align on.
 * Watermark and barrier records carry the task's next seq (the rows sent
 * before them) but take no number of their own: when a task emits its
 * watermarks is timing (idle ticks), and a replay that sent one where the
 * original sent a row must not shift the rows' numbers.
 *
 * Both halves are single-threaded objects: one per actor, as kafka.h.
 */
#ifndef WEIR_RUNTIME_REPART_H
#define WEIR_RUNTIME_REPART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "chunk.h"
#include "error.h"

#define RT_REPART_VERSION 1
enum { RT_REPART_ROW = 0, RT_REPART_WATERMARK = 1, RT_REPART_BARRIER = 2 };
/* The watermark that says "this task is idle" (the runtime's RT_WM_IDLE):
 * readers leave an idle task out of their minimum, as the exchange does. */
#define RT_REPART_WM_IDLE (TS_PLUS_INF - 1)
/* version, kind, task, epoch, seq */
#define RT_REPART_HEADER_BYTES 22

/* Partitions (key groups) of one topic: WEIR_MAX_KEY_GROUPS of the data
 * plane contract (the Kafka key holds the key group in 2 bytes). */
#define RT_REPART_MAX_PARTITIONS 4096
/* Producing tasks (source partitions) of one topic: a source of more
 * partitions than this is refused (22023). */
#define RT_REPART_MAX_TASKS 4096
/* The reader keeps a slot per (assigned partition, task): 40 bytes each,
 * so this bounds one reader's table at 40 MiB. Checked at assign (54000). */
#define RT_REPART_MAX_SLOTS (1 << 20)

/* Writes "_weir.<cluster>.rp.<view_table_id>.<exchange_node_id>" into
 * out. Returns 0, or -1 with 22023 when it does not fit in n bytes. */
int rt_repart_topic_name(char *out, size_t n, const char *cluster, uint64_t view_table_id, uint32_t node_id,
                         WError *err);

/* ---- the codec (no Kafka) ---- */

/* One decoded record. payload points into the record's bytes (borrowed:
 * valid as long as they are). */
typedef struct RtRepartRecord {
    uint8_t kind;        /* RT_REPART_ROW, _WATERMARK or _BARRIER */
    uint32_t task;
    uint64_t epoch;
    uint64_t seq;
    int64_t wm;          /* kind WATERMARK: the watermark (µs) */
    const uint8_t *payload;
    size_t payload_len;
} RtRepartRecord;

/* Appends the value of a row record for row r of c to out. */
void rt_repart_encode_row(Buf *out, uint32_t task, uint64_t epoch, uint64_t seq, const Chunk *c, int r);
/* Appends the value of a watermark (wm used) or barrier record to out. */
void rt_repart_encode_mark(Buf *out, uint8_t kind, uint32_t task, uint64_t epoch, uint64_t seq, int64_t wm);
/* Decodes a record's header (and a watermark's payload) from p[0..len).
 * Errors: 0A000 another version (a newer weir wrote it), XX001 corrupt
 * (short, unknown kind, a watermark of the wrong size). */
int rt_repart_decode(const void *p, size_t len, RtRepartRecord *out, WError *err);
/* Appends the row of a ROW record to dst (whose column types the row must
 * have; strings are copied into dst's arena). Returns the row index, or -1:
 * XX001 corrupt or of other types, 54000 dst full. */
int rt_repart_decode_row(const RtRepartRecord *rec, Chunk *dst, WError *err);

/* ---- the writer ---- */

typedef struct RtRepartWriter RtRepartWriter;

/* Opens a writer to topic on bootstrap for the n_tasks producing tasks
 * tasks[] (the source partitions this fragment instance reads), starting
 * at epoch `epoch` (the last committed checkpoint + 1), each task's next
 * row numbered seqs[i] (its rt_repart_writer_seq at that checkpoint; NULL:
 * all 0, a task's first run). A replay restarts there, and its rows repeat
 * the original's (task, seq).
 * Creates topic with n_partitions partitions if missing. The producer is
 * idempotent, so each partition receives a prefix of what was sent, in
 * order, and never a record twice within one writer's life.
 * Errors: 22023 n_partitions or a task out of range, or the topic exists
 * with another partition count; 08006 broker unreachable within
 * timeout_ms; 58030 the broker refused. */
int rt_repart_writer_open(const char *bootstrap, const char *topic, int n_partitions, const uint32_t *tasks,
                          const uint64_t *seqs, int n_tasks, uint64_t epoch, int timeout_ms, RtRepartWriter **out,
                          WError *err);

/* Queues one row record per row of c (all rows from producing task
 * `task`), row r to partition kg[r] (the caller's weir_key_group of the
 * row's key hash). seq continues the task's count.
 * Blocks while librdkafka's queue is full (backpressure).
 * Errors: 22023 a task this writer does not serve or a kg out of range;
 * 58030 produce failed. */
int rt_repart_writer_push(RtRepartWriter *w, uint32_t task, const Chunk *c, const uint16_t *kg, WError *err);

/* Queues a watermark record of task (µs, or RT_REPART_WM_IDLE) to every partition.
 * A watermark not above the task's last one is not sent (RT_REPART_WM_IDLE is
 * sent once until a real one follows). Errors as push. */
int rt_repart_writer_watermark(RtRepartWriter *w, uint32_t task, int64_t wm, WError *err);

/* Ends the current epoch: queues, for every task, a barrier record of
 * epoch `epoch` (which must be the current one) to every partition, then
 * moves to epoch + 1 (seqs go on). The checkpoint of epoch may not
 * count as committed before rt_repart_writer_sync returns 0 afterwards.
 * Errors: 55000 epoch is not the current one; 58030 produce failed. */
int rt_repart_writer_barrier(RtRepartWriter *w, uint64_t epoch, WError *err);

/* Waits until every record queued so far (barriers included) is
 * acknowledged by the broker. Kafka keeps a partition in order, so then
 * every reader will see all rows of the epochs before the last barrier.
 * Errors: 08006 still outstanding after timeout_ms (retry, or treat the
 * checkpoint as failed); 58030 a delivery failed: the checkpoint fails and
 * the task must be replayed from the last committed one (close, reopen). */
int rt_repart_writer_sync(RtRepartWriter *w, int timeout_ms, WError *err);

/* The epoch being written (records pushed now carry it). */
uint64_t rt_repart_writer_epoch(const RtRepartWriter *w);

/* Task's next row number into *seq, for the producer's checkpoint (taken
 * right after rt_repart_writer_barrier: it is what the next writer of the
 * task must be opened with). Errors: 22023 not this writer's task. */
int rt_repart_writer_seq(const RtRepartWriter *w, uint32_t task, uint64_t *seq, WError *err);

/* Closes the writer. Records not yet acknowledged may be lost: sync first.
 * NULL is allowed. */
void rt_repart_writer_close(RtRepartWriter *w);

/* ---- the reader ---- */

typedef struct RtRepartReader RtRepartReader;

/* Opens a reader of topic (n_partitions partitions, written by the n_tasks
 * tasks 0..n_tasks-1) whose rows have the n_cols types[] (copied). Creates
 * the topic if missing, as the writer does, so neither has to start first.
 * Nothing is assigned yet. Errors: 22023 counts out of range, or the topic
 * exists with another partition count; 54000 past WEIR_MAX_COLUMNS; 08006
 * unreachable; 58030 the broker refused. */
int rt_repart_reader_open(const char *bootstrap, const char *topic, int n_partitions, int n_tasks,
                          const TypeId *types, int n_cols, int timeout_ms, RtRepartReader **out, WError *err);

/* Assigns partitions[0..n) (the key groups this consumer owns), replacing
 * the previous assignment. A partition whose position was restored (or
 * kept from an earlier assignment) resumes there with its dedup table;
 * another starts at its first offset with nothing applied.
 * Errors: 22023 a partition out of range or repeated; 54000 past
 * RT_REPART_MAX_SLOTS. */
int rt_repart_reader_assign(RtRepartReader *r, int n, const int32_t *partitions, WError *err);

/* Reads records for up to timeout_ms (waiting for the first only) and
 * appends the new rows to out (a chunk of the reader's types, with a wm
 * array: each row gets the reader's watermark when it was read), until
 * out is full or nothing more is fetched. Duplicates are dropped;
 * watermark and barrier records update the reader. Returns the records
 * consumed (>= rows appended), 0 on timeout, -1 on error: XX001 a corrupt
 * record or a row of other types (the reader stops before it), 0A000
 * another format version, 55000 records this reader had not read were
 * deleted (a hole in the offsets after its position), 08006 the consumer
 * is unusable. */
int rt_repart_reader_poll(RtRepartReader *r, int timeout_ms, Chunk *out, WError *err);

/* The reader's watermark: the minimum over (assigned partition, task) of
 * that task's last watermark record there (the exchange's rule, idle slots
 * aside: rt_exchange_wm_rule); TS_MINUS_INF while any has sent none. Per
 * partition because a partition read behind the others may still hold a
 * task's rows older than the watermark it sent on another. */
int64_t rt_repart_reader_watermark(const RtRepartReader *r);

/* The highest epoch e such that every task has sent its barrier for e on
 * every assigned partition, and this reader has read it: all rows of
 * epochs <= e are applied, and the consumer may checkpoint epoch e.
 * 0 when some (partition, task) has sent no barrier yet, and when nothing
 * is assigned (a consumer without key groups waits for no one). */
uint64_t rt_repart_reader_aligned_epoch(const RtRepartReader *r);

/* Appends the reader's position to out: per assigned partition its next
 * offset, and per (partition, task) the highest seq applied (and its epoch), the
 * last watermark and the last barrier epoch. For checkpoint metadata. */
void rt_repart_reader_position_save(const RtRepartReader *r, Buf *out);

/* Loads a position saved by rt_repart_reader_position_save (of a reader of
 * the same topic shape). Its partitions resume from it when assigned; those
 * assigned already seek back to it at once. Everything is checked before
 * anything changes. Errors: XX001 corrupt; 22023 another partition or task
 * count. */
int rt_repart_reader_position_restore(RtRepartReader *r, const void *p, size_t len, WError *err);

/* Records dropped as duplicates since open (for tests and metrics). */
long rt_repart_reader_dropped(const RtRepartReader *r);

/* Releases the reader. NULL is allowed. */
void rt_repart_reader_close(RtRepartReader *r);

#endif
