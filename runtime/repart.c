/*
 * repart.c: repartition topics (see repart.h): the record codec, the
 * writer a producing fragment's exchange calls, and the reader a consuming
 * fragment reads like a source.
 *
 * Exactly-once without transactions rests on three facts. The writer's
 * producer is idempotent, so a partition holds, in order, a prefix of what
 * one writer sent, never a record twice. A replaying task re-sends the
 * same (task, seq) for the same input, seq counting the task's rows over
 * its life (restored from the producer's checkpoint). And the reader keeps,
 * per (partition, task), the highest seq it applied, in its checkpointed
 * position, and drops a row record at or below it. Together:
 * every row record is applied once, whatever mix of original and replayed
 * prefixes a partition holds.
 */
#include "repart.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka.h"
#include "row.h"
#include "runtime_int.h"

_Static_assert(RT_REPART_WM_IDLE == RT_WM_IDLE, "one idle watermark for the exchange and repartition topics");

/* ---- little-endian helpers (the contract's byte order) ---- */

static void put_le(Buf *b, uint64_t v, int n)
{
    unsigned char t[8];
    for (int i = 0; i < n; i++, v >>= 8)
        t[i] = (unsigned char)v;
    buf_append(b, t, (size_t)n);
}

static uint64_t get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

int rt_repart_topic_name(char *out, size_t n, const char *cluster, uint64_t view_table_id, uint32_t node_id,
                         WError *err)
{
    int k = snprintf(out, n, "_weir.%s.rp.%" PRIu64 ".%" PRIu32, cluster, view_table_id, node_id);
    if (k < 0 || (size_t)k >= n)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "repartition topic name for cluster \"%s\" is too long",
                    cluster);
    return 0;
}

/* ---- codec ---- */

static void put_header(Buf *out, uint8_t kind, uint32_t task, uint64_t epoch, uint64_t seq)
{
    buf_put_u8(out, RT_REPART_VERSION);
    buf_put_u8(out, kind);
    put_le(out, task, 4);
    put_le(out, epoch, 8);
    put_le(out, seq, 8);
}

void rt_repart_encode_row(Buf *out, uint32_t task, uint64_t epoch, uint64_t seq, const Chunk *c, int r)
{
    Value vals[WEIR_MAX_COLUMNS];
    put_header(out, RT_REPART_ROW, task, epoch, seq);
    buf_put_u8(out, c->ops[r]);
    for (int i = 0; i < c->n_cols; i++)
        chunk_get(c, i, r, &vals[i]);
    row_encode(out, vals, c->n_cols);
}

void rt_repart_encode_mark(Buf *out, uint8_t kind, uint32_t task, uint64_t epoch, uint64_t seq, int64_t wm)
{
    put_header(out, kind, task, epoch, seq);
    if (kind == RT_REPART_WATERMARK)
        put_le(out, (uint64_t)wm, 8);
}

int rt_repart_decode(const void *vp, size_t len, RtRepartRecord *out, WError *err)
{
    const unsigned char *p = vp;
    if (len < 1 || !p)
        return werr(err, SQLSTATE_DATA_CORRUPTED, 0, "repartition record: empty value");
    if (p[0] != RT_REPART_VERSION)
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0,
                    "repartition record of format version %u (this weir reads version %d)", p[0],
                    RT_REPART_VERSION);
    if (len < RT_REPART_HEADER_BYTES)
        return werr(err, SQLSTATE_DATA_CORRUPTED, 0, "repartition record: %zu bytes, shorter than its header",
                    len);
    out->kind = p[1];
    out->task = (uint32_t)get_le(p + 2, 4);
    out->epoch = get_le(p + 6, 8);
    out->seq = get_le(p + 14, 8);
    out->payload = p + RT_REPART_HEADER_BYTES;
    out->payload_len = len - RT_REPART_HEADER_BYTES;
    out->wm = 0;
    switch (out->kind) {
    case RT_REPART_ROW:
        if (out->payload_len < 1 || out->payload[0] > OP_UPDATE_AFTER)
            return werr(err, SQLSTATE_DATA_CORRUPTED, 0, "repartition record: bad row op");
        return 0;
    case RT_REPART_WATERMARK:
        if (out->payload_len != 8)
            return werr(err, SQLSTATE_DATA_CORRUPTED, 0, "repartition record: watermark of %zu bytes",
                        out->payload_len);
        out->wm = (int64_t)get_le(out->payload, 8);
        return 0;
    case RT_REPART_BARRIER:
        if (out->payload_len != 0)
            return werr(err, SQLSTATE_DATA_CORRUPTED, 0, "repartition record: barrier with a payload");
        return 0;
    default:
        return werr(err, SQLSTATE_DATA_CORRUPTED, 0, "repartition record: unknown kind %u", out->kind);
    }
}

int rt_repart_decode_row(const RtRepartRecord *rec, Chunk *dst, WError *err)
{
    Value vals[WEIR_MAX_COLUMNS];
    if (chunk_full(dst))
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "repartition reader: output chunk full");
    if (row_decode(rec->payload + 1, rec->payload_len - 1, vals, dst->n_cols))
        return werr(err, SQLSTATE_DATA_CORRUPTED, 0, "repartition record: corrupt row (task %" PRIu32
                    ", epoch %" PRIu64 ", seq %" PRIu64 ")", rec->task, rec->epoch, rec->seq);
    for (int i = 0; i < dst->n_cols; i++)
        if (vals[i].type != dst->cols[i].type)
            return werr(err, SQLSTATE_DATA_CORRUPTED, 0,
                        "repartition record: column %d is %s, the reader expects %s", i + 1,
                        type_name(vals[i].type), type_name(dst->cols[i].type));
    return chunk_append(dst, (RowOp)rec->payload[0], vals);
}

/* Opens (creating if missing, with n_partitions) topic and checks its
 * partition count: both halves do, so neither has to start first. */
static int topic_check(const char *bootstrap, const char *topic, int n_partitions, int timeout_ms,
                       RtKafkaSource **keep, WError *err)
{
    RtKafkaSource *s;
    if (rt_kafka_source_open(bootstrap, topic, n_partitions, NULL, 0, timeout_ms, &s, err))
        return -1;
    int have = rt_kafka_source_partition_count(s);
    if (have != n_partitions) {
        rt_kafka_source_close(s);
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                    "repartition topic \"%s\" has %d partitions, the view has %d key groups", topic, have,
                    n_partitions);
    }
    if (keep)
        *keep = s;
    else
        rt_kafka_source_close(s);
    return 0;
}

/* ---- writer ---- */

typedef struct WTask {
    uint32_t task;
    uint64_t seq;       /* next row seq (over the task's life) */
    int64_t wm_sent;    /* last real watermark sent, TS_MINUS_INF none */
    bool idle_sent;     /* RT_WM_IDLE sent, no real watermark since */
} WTask;

struct RtRepartWriter {
    RtKafkaProducer *prod;
    char *topic;
    int n_parts;
    uint64_t epoch;     /* the epoch records pushed now belong to */
    int n_tasks;
    WTask *tasks;
    int16_t *index;     /* task id -> its WTask, -1 if not served; RT_REPART_MAX_TASKS entries */
    Buf buf;            /* one record's value, reused */
};

int rt_repart_writer_open(const char *bootstrap, const char *topic, int n_partitions, const uint32_t *tasks,
                          const uint64_t *seqs, int n_tasks, uint64_t epoch, int timeout_ms, RtRepartWriter **out,
                          WError *err)
{
    *out = NULL;
    if (n_partitions < 1 || n_partitions > RT_REPART_MAX_PARTITIONS)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "repartition topic: %d partitions (1 to %d)", n_partitions,
                    RT_REPART_MAX_PARTITIONS);
    if (n_tasks < 0 || n_tasks > RT_REPART_MAX_TASKS)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "repartition writer: %d tasks (0 to %d)", n_tasks,
                    RT_REPART_MAX_TASKS);
    for (int i = 0; i < n_tasks; i++)
        if (tasks[i] >= RT_REPART_MAX_TASKS)
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "repartition writer: task %" PRIu32 " (below %d)",
                        tasks[i], RT_REPART_MAX_TASKS);
    if (topic_check(bootstrap, topic, n_partitions, timeout_ms, NULL, err))
        return -1;
    /* Idempotence: a retried batch is not written twice and never overtakes
     * the one before it, so each partition is a prefix of what we sent, in
     * order, which the reader's dedup by highest seq relies on. */
    RtKafkaProp props[] = {{"enable.idempotence", "true"}};
    RtKafkaProducer *prod;
    if (rt_kafka_producer_open(bootstrap, props, 1, &prod, err))
        return -1;
    RtRepartWriter *w = xcalloc(1, sizeof *w);
    w->prod = prod;
    w->topic = xmalloc(strlen(topic) + 1);
    strcpy(w->topic, topic);
    w->n_parts = n_partitions;
    w->epoch = epoch;
    w->n_tasks = n_tasks;
    w->tasks = xcalloc((size_t)(n_tasks ? n_tasks : 1), sizeof *w->tasks);
    w->index = xmalloc(sizeof(int16_t) * RT_REPART_MAX_TASKS);
    for (int i = 0; i < RT_REPART_MAX_TASKS; i++)
        w->index[i] = -1;
    for (int i = 0; i < n_tasks; i++) {
        w->tasks[i] = (WTask){.task = tasks[i], .seq = seqs ? seqs[i] : 0, .wm_sent = TS_MINUS_INF};
        w->index[tasks[i]] = (int16_t)i;
    }
    *out = w;
    return 0;
}

static WTask *wtask(RtRepartWriter *w, uint32_t task, WError *err)
{
    if (task >= RT_REPART_MAX_TASKS || w->index[task] < 0) {
        werr(err, SQLSTATE_INVALID_PARAMETER, 0, "repartition writer: task %" PRIu32 " is not this writer's",
             task);
        return NULL;
    }
    return &w->tasks[w->index[task]];
}

/* Produces w->buf to partition kg, keyed by kg (2 bytes big-endian). */
static int produce_to(RtRepartWriter *w, int kg, WError *err)
{
    unsigned char key[2] = {(unsigned char)(kg >> 8), (unsigned char)kg};
    return rt_kafka_produce(w->prod, w->topic, kg, key, 2, w->buf.data, w->buf.len, err);
}

int rt_repart_writer_push(RtRepartWriter *w, uint32_t task, const Chunk *c, const uint16_t *kg, WError *err)
{
    WTask *t = wtask(w, task, err);
    if (!t)
        return -1;
    for (int r = 0; r < c->n_rows; r++)
        if (kg[r] >= w->n_parts)
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "repartition writer: key group %u of %d", kg[r],
                        w->n_parts);
    for (int r = 0; r < c->n_rows; r++) {
        buf_reset(&w->buf);
        rt_repart_encode_row(&w->buf, task, w->epoch, t->seq, c, r);
        if (produce_to(w, kg[r], err))
            return -1;
        t->seq++;
    }
    return 0;
}

static int send_mark_all(RtRepartWriter *w, uint8_t kind, const WTask *t, int64_t wm, WError *err)
{
    buf_reset(&w->buf);
    rt_repart_encode_mark(&w->buf, kind, t->task, w->epoch, t->seq, wm);
    for (int p = 0; p < w->n_parts; p++)
        if (produce_to(w, p, err))
            return -1;
    return 0;
}

int rt_repart_writer_watermark(RtRepartWriter *w, uint32_t task, int64_t wm, WError *err)
{
    WTask *t = wtask(w, task, err);
    if (!t)
        return -1;
    if (wm == RT_WM_IDLE) {
        if (t->idle_sent)
            return 0;
        t->idle_sent = true;
    } else if (t->idle_sent) {
        /* Active again: said even when not ahead, so readers count the task again. */
        t->idle_sent = false;
        if (wm < t->wm_sent)
            wm = t->wm_sent;
        t->wm_sent = wm;
    } else {
        if (wm <= t->wm_sent)
            return 0;
        t->wm_sent = wm;
    }
    return send_mark_all(w, RT_REPART_WATERMARK, t, wm, err);
}

int rt_repart_writer_barrier(RtRepartWriter *w, uint64_t epoch, WError *err)
{
    if (epoch != w->epoch)
        return werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, 0,
                    "repartition writer: barrier for epoch %" PRIu64 " while writing epoch %" PRIu64, epoch,
                    w->epoch);
    for (int i = 0; i < w->n_tasks; i++)
        if (send_mark_all(w, RT_REPART_BARRIER, &w->tasks[i], 0, err))
            return -1;
    w->epoch++;
    return 0;
}

int rt_repart_writer_sync(RtRepartWriter *w, int timeout_ms, WError *err)
{
    return rt_kafka_producer_flush(w->prod, timeout_ms, err) ? -1 : 0;
}

uint64_t rt_repart_writer_epoch(const RtRepartWriter *w) { return w->epoch; }

int rt_repart_writer_seq(const RtRepartWriter *w, uint32_t task, uint64_t *seq, WError *err)
{
    WTask *t = wtask((RtRepartWriter *)w, task, err);
    if (!t)
        return -1;
    *seq = t->seq;
    return 0;
}

void rt_repart_writer_close(RtRepartWriter *w)
{
    if (!w)
        return;
    rt_kafka_producer_close(w->prod);
    free(w->topic);
    free(w->tasks);
    free(w->index);
    buf_free(&w->buf);
    free(w);
}

/* ---- reader ---- */

/* What the reader knows of one task on one partition. */
typedef struct Slot {
    uint64_t seq;        /* the highest row seq applied (when applied) */
    uint64_t epoch;      /* that row's epoch (for diagnostics) */
    int64_t wm;          /* the task's last real watermark here, TS_MINUS_INF none */
    uint64_t barrier;    /* the highest epoch whose barrier was read here, 0 none */
    bool applied;        /* a row record was applied */
    bool idle;           /* the last watermark record said RT_WM_IDLE */
} Slot;

/* A partition's position: kept for every partition ever assigned or
 * restored, so a partition given back later resumes where it was. */
typedef struct Part {
    int64_t next;        /* offset of the next record to read */
    Slot *slots;         /* n_tasks; NULL: never known (start at the first offset) */
    bool assigned;
} Part;

/* Records taken per poll at most: one fetch's worth, and the bound of the
 * record array (the output chunk's free rows bound it further). */
#define POLL_MAX 1024

struct RtRepartReader {
    RtKafkaSource *src;
    int n_parts, n_tasks, n_cols;
    TypeId *types;
    Part *parts;         /* n_parts */
    int32_t *assigned;   /* the assigned partitions */
    int n_assigned;
    int64_t wm;          /* current watermark (recomputed on watermark records) */
    long dropped;
    RtKafkaRecord recs[POLL_MAX];
};

int rt_repart_reader_open(const char *bootstrap, const char *topic, int n_partitions, int n_tasks,
                          const TypeId *types, int n_cols, int timeout_ms, RtRepartReader **out, WError *err)
{
    *out = NULL;
    if (n_partitions < 1 || n_partitions > RT_REPART_MAX_PARTITIONS)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "repartition topic: %d partitions (1 to %d)", n_partitions,
                    RT_REPART_MAX_PARTITIONS);
    if (n_tasks < 1 || n_tasks > RT_REPART_MAX_TASKS)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "repartition reader: %d tasks (1 to %d)", n_tasks,
                    RT_REPART_MAX_TASKS);
    if (n_cols < 0 || n_cols > WEIR_MAX_COLUMNS)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "repartition reader: %d columns (at most %d)", n_cols,
                    WEIR_MAX_COLUMNS);
    RtKafkaSource *src = NULL; /* set by topic_check on success (-O3 cannot see it) */
    if (topic_check(bootstrap, topic, n_partitions, timeout_ms, &src, err))
        return -1;
    RtRepartReader *r = xcalloc(1, sizeof *r);
    r->src = src;
    r->n_parts = n_partitions;
    r->n_tasks = n_tasks;
    r->n_cols = n_cols;
    r->types = xmalloc(sizeof(TypeId) * (size_t)(n_cols ? n_cols : 1));
    memcpy(r->types, types, sizeof(TypeId) * (size_t)n_cols);
    r->parts = xcalloc((size_t)n_partitions, sizeof *r->parts);
    r->assigned = xmalloc(sizeof(int32_t) * (size_t)n_partitions);
    r->wm = TS_MINUS_INF;
    *out = r;
    return 0;
}

static void part_know(RtRepartReader *r, Part *p)
{
    if (p->slots)
        return;
    p->next = RT_KAFKA_EARLIEST;
    p->slots = xmalloc(sizeof(Slot) * (size_t)r->n_tasks);
    for (int t = 0; t < r->n_tasks; t++)
        p->slots[t] = (Slot){.wm = TS_MINUS_INF};
}

/* The exchange's rule (rt_exchange_wm_rule) over every (assigned
 * partition, task): the minimum over the slots not idle; when all are
 * idle, over those that ever had a watermark. */
static void wm_recompute(RtRepartReader *r)
{
    int64_t m = TS_PLUS_INF, m_idle = TS_PLUS_INF;
    bool any = false;
    for (int i = 0; i < r->n_assigned; i++) {
        const Slot *s = r->parts[r->assigned[i]].slots;
        for (int t = 0; t < r->n_tasks; t++) {
            if (!s[t].idle) {
                any = true;
                if (s[t].wm < m)
                    m = s[t].wm;
            } else if (s[t].wm != TS_MINUS_INF && s[t].wm < m_idle) {
                m_idle = s[t].wm;
            }
        }
    }
    if (!any)
        m = m_idle == TS_PLUS_INF ? TS_MINUS_INF : m_idle;
    /* The watermark never goes back (a reassignment may add slower slots). */
    if (m > r->wm)
        r->wm = m;
}

/* How long a re-seek waits for the fetchers to move (kafka.h). */
#define SEEK_TIMEOUT_MS 10000

/* Moves every assigned partition to its position's next offset without
 * assigning again (rt_kafka_source_seek says why). */
static int reseek(RtRepartReader *r, WError *err)
{
    int64_t *offs = xmalloc(sizeof(int64_t) * (size_t)(r->n_assigned ? r->n_assigned : 1));
    for (int i = 0; i < r->n_assigned; i++)
        offs[i] = r->parts[r->assigned[i]].next;
    int rc = rt_kafka_source_seek(r->src, r->n_assigned, r->assigned, offs, SEEK_TIMEOUT_MS, err);
    free(offs);
    return rc;
}

int rt_repart_reader_assign(RtRepartReader *r, int n, const int32_t *partitions, WError *err)
{
    if (n < 0 || n > r->n_parts)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "repartition reader: %d partitions assigned of %d", n,
                    r->n_parts);
    if ((int64_t)n * r->n_tasks > RT_REPART_MAX_SLOTS)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0,
                    "repartition reader: %d partitions x %d tasks is past the limit of %d", n, r->n_tasks,
                    RT_REPART_MAX_SLOTS);
    uint8_t seen[RT_REPART_MAX_PARTITIONS] = {0};
    for (int i = 0; i < n; i++) {
        if (partitions[i] < 0 || partitions[i] >= r->n_parts)
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "repartition reader: partition %d of %d", partitions[i],
                        r->n_parts);
        if (seen[partitions[i]]++)
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "repartition reader: partition %d twice", partitions[i]);
    }
    bool same = n == r->n_assigned;
    for (int i = 0; same && i < n; i++)
        same = r->parts[partitions[i]].assigned;
    if (same) {
        if (reseek(r, err))
            return -1;
        wm_recompute(r);
        return 0;
    }
    int64_t *offs = xmalloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        part_know(r, &r->parts[partitions[i]]);
        offs[i] = r->parts[partitions[i]].next;
    }
    int rc = rt_kafka_source_assign(r->src, n, partitions, offs, err);
    free(offs);
    if (rc)
        return -1;
    for (int i = 0; i < r->n_assigned; i++)
        r->parts[r->assigned[i]].assigned = false;
    memcpy(r->assigned, partitions, sizeof(int32_t) * (size_t)n);
    r->n_assigned = n;
    for (int i = 0; i < n; i++)
        r->parts[partitions[i]].assigned = true;
    wm_recompute(r);
    return 0;
}

/* After an error mid-batch: seeks every assigned partition back to the
 * record after the last one handled, so nothing fetched is skipped. The
 * error reported is the first one. */
static void rewind_assigned(RtRepartReader *r)
{
    WError e = {0};
    reseek(r, &e);
}

/* Applies one record. 1: a row was appended; 0: handled otherwise; -1. */
static int apply(RtRepartReader *r, const RtKafkaRecord *kr, Chunk *out, WError *err)
{
    RtRepartRecord rec;
    if (rt_repart_decode(kr->value, kr->value_len, &rec, err))
        return -1;
    if (rec.task >= (uint32_t)r->n_tasks)
        return werr(err, SQLSTATE_DATA_CORRUPTED, 0,
                    "repartition record from task %" PRIu32 ", the topic has %d producing tasks", rec.task,
                    r->n_tasks);
    Slot *s = &r->parts[kr->partition].slots[rec.task];
    switch (rec.kind) {
    case RT_REPART_ROW: {
        if (s->applied && rec.seq <= s->seq) {
            r->dropped++;
            return 0;
        }
        int row = rt_repart_decode_row(&rec, out, err);
        if (row < 0)
            return -1;
        if (out->wm)
            out->wm[row] = r->wm;
        s->applied = true;
        s->epoch = rec.epoch;
        s->seq = rec.seq;
        return 1;
    }
    case RT_REPART_WATERMARK:
        if (rec.wm == RT_WM_IDLE) {
            s->idle = true;
        } else {
            s->idle = false;
            if (rec.wm > s->wm)
                s->wm = rec.wm;
        }
        wm_recompute(r);
        return 0;
    default: /* barrier */
        if (rec.epoch > s->barrier)
            s->barrier = rec.epoch;
        return 0;
    }
}

int rt_repart_reader_poll(RtRepartReader *r, int timeout_ms, Chunk *out, WError *err)
{
    if (out->n_cols != r->n_cols)
        return werr(err, SQLSTATE_INTERNAL, 0, "repartition reader: a chunk of %d columns for rows of %d",
                    out->n_cols, r->n_cols);
    int room = out->cap - out->n_rows;
    if (room <= 0)
        return 0;
    int n = rt_kafka_source_poll(r->src, timeout_ms, r->recs, room < POLL_MAX ? room : POLL_MAX);
    if (n < 0)
        return werr(err, SQLSTATE_CONNECTION_FAILURE, 0, "repartition reader: the consumer failed");
    for (int i = 0; i < n; i++) {
        const RtKafkaRecord *kr = &r->recs[i];
        if (kr->partition < 0 || kr->partition >= r->n_parts || !r->parts[kr->partition].assigned)
            continue; /* of a partition assigned away: not ours any more */
        int64_t next = r->parts[kr->partition].next;
        if (next >= 0 && kr->offset > next) {
            /* The topic is written without transactions or compaction, so
             * its offsets have no holes: records were deleted (retention, or
             * the embedded broker's ~5 MiB per partition) before this reader
             * read them, and going on would lose their rows. */
            werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, 0,
                 "repartition topic partition %d continues at offset %" PRId64 " but this reader's position is %" PRId64
                 ": records it had not read were deleted",
                 kr->partition, kr->offset, next);
            werr_hint(err, "A repartition topic must keep records until every reader has checkpointed past them "
                           "(docs/cluster.md); the embedded broker keeps about 5 MiB per partition.");
            goto err;
        }
        if (!kr->value) {
            werr(err, SQLSTATE_DATA_CORRUPTED, 0, "repartition topic: a null value at partition %d offset %" PRId64,
                 kr->partition, kr->offset);
            goto err;
        }
        if (apply(r, kr, out, err) < 0) {
            werr_detail(err, "At partition %d, offset %" PRId64 ".", kr->partition, kr->offset);
            goto err;
        }
        r->parts[kr->partition].next = kr->offset + 1;
    }
    return n;
err:
    rewind_assigned(r);
    return -1;
}

int64_t rt_repart_reader_watermark(const RtRepartReader *r) { return r->wm; }

uint64_t rt_repart_reader_aligned_epoch(const RtRepartReader *r)
{
    uint64_t m = UINT64_MAX;
    for (int i = 0; i < r->n_assigned; i++) {
        const Slot *s = r->parts[r->assigned[i]].slots;
        for (int t = 0; t < r->n_tasks; t++)
            if (s[t].barrier < m)
                m = s[t].barrier;
    }
    return m == UINT64_MAX ? 0 : m;
}

long rt_repart_reader_dropped(const RtRepartReader *r) { return r->dropped; }

/* Position: u8 version | u16 partitions | u32 tasks | u32 count, then per
 * partition u16 partition | i64 next offset | per task u8 flags (1
 * applied, 2 idle) | u64 epoch | u64 seq | i64 wm | u64 barrier. */
#define POS_VERSION 1
#define POS_SLOT_BYTES 33

void rt_repart_reader_position_save(const RtRepartReader *r, Buf *out)
{
    buf_put_u8(out, POS_VERSION);
    put_le(out, (uint64_t)r->n_parts, 2);
    put_le(out, (uint64_t)r->n_tasks, 4);
    put_le(out, (uint64_t)r->n_assigned, 4);
    for (int i = 0; i < r->n_assigned; i++) {
        const Part *p = &r->parts[r->assigned[i]];
        put_le(out, (uint64_t)r->assigned[i], 2);
        put_le(out, (uint64_t)p->next, 8);
        for (int t = 0; t < r->n_tasks; t++) {
            const Slot *s = &p->slots[t];
            buf_put_u8(out, (uint8_t)((s->applied ? 1 : 0) | (s->idle ? 2 : 0)));
            put_le(out, s->epoch, 8);
            put_le(out, s->seq, 8);
            put_le(out, (uint64_t)s->wm, 8);
            put_le(out, s->barrier, 8);
        }
    }
}

int rt_repart_reader_position_restore(RtRepartReader *r, const void *vp, size_t len, WError *err)
{
    const unsigned char *p = vp, *end = p + len;
    if (len < 11 || p[0] != POS_VERSION)
        return werr(err, SQLSTATE_DATA_CORRUPTED, 0, "repartition reader position: bad header");
    int np = (int)get_le(p + 1, 2), nt = (int)get_le(p + 3, 4);
    uint64_t count = get_le(p + 7, 4);
    p += 11;
    if (np != r->n_parts || nt != r->n_tasks)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                    "repartition reader position of %d partitions and %d tasks, the reader has %d and %d", np, nt,
                    r->n_parts, r->n_tasks);
    size_t per = 10 + (size_t)nt * POS_SLOT_BYTES;
    if (count > (uint64_t)np || (size_t)(end - p) != count * per)
        return werr(err, SQLSTATE_DATA_CORRUPTED, 0, "repartition reader position: bad length");
    /* Validate everything before changing anything. */
    for (uint64_t i = 0; i < count; i++) {
        const unsigned char *q = p + i * per;
        if ((int)get_le(q, 2) >= np || (int64_t)get_le(q + 2, 8) < RT_KAFKA_EARLIEST)
            return werr(err, SQLSTATE_DATA_CORRUPTED, 0, "repartition reader position: bad partition entry");
    }
    for (uint64_t i = 0; i < count; i++, p += per) {
        Part *pt = &r->parts[get_le(p, 2)];
        part_know(r, pt);
        pt->next = (int64_t)get_le(p + 2, 8);
        const unsigned char *q = p + 10;
        for (int t = 0; t < nt; t++, q += POS_SLOT_BYTES)
            pt->slots[t] = (Slot){.applied = q[0] & 1,
                                  .idle = (q[0] & 2) != 0,
                                  .epoch = get_le(q + 1, 8),
                                  .seq = get_le(q + 9, 8),
                                  .wm = (int64_t)get_le(q + 17, 8),
                                  .barrier = get_le(q + 25, 8)};
    }
    /* Partitions assigned now seek to their restored offsets at once, so
     * no record is applied against the new table from the old position. */
    if (r->n_assigned && reseek(r, err))
        return -1;
    wm_recompute(r);
    return 0;
}

void rt_repart_reader_close(RtRepartReader *r)
{
    if (!r)
        return;
    rt_kafka_source_close(r->src);
    for (int i = 0; i < r->n_parts; i++)
        free(r->parts[i].slots);
    free(r->parts);
    free(r->assigned);
    free(r->types);
    free(r);
}
