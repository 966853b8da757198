/*
 * sink_kafka.c: the Kafka sink writer (connector = 'kafka'), exactly once
 * through Kafka transactions.
 *
 * One epoch is one Kafka transaction: begin, produce every change of the
 * epoch to the data topic, produce one progress record (key = sink name,
 * value = the epoch in decimal) to the compacted control topic
 * __weir_sink_progress, commit. A read_committed reader therefore sees an
 * epoch's records exactly when it sees the epoch's progress record, and
 * last_epoch() reads the control topic (read_committed, from the beginning
 * to the end offsets) to learn which epochs the topic already has. The
 * producer's transactional.id is stable ("weir-sink-" + name), so opening a
 * writer fences any older incarnation and aborts its open transaction
 * before the progress topic is read.
 *
 * Formats (FORMAT ...): plain (value = JSON of `after`, no key; append-only
 * input only), upsert (key = JSON of the pk columns, value = JSON of
 * `after` or a tombstone), debezium (value = {"before","after","op",
 * "source"}, key = pk JSON when there is a pk). Rows are encoded with
 * rt_json_encode_row, the same JSON a Kafka source reads.
 *
 * 'at-least-once' uses a plain producer: produce, progress record, flush.
 * A crash between the flush and the checkpoint's bookkeeping may repeat an
 * epoch, never lose one.
 *
 * Most Kafka calls go through kafka.h. <librdkafka/rdkafka.h> is included
 * here only to create the control topic with cleanup.policy=compact (the
 * wrapper's topic creation takes no topic configs).
 */
#include "runtime.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "kafka.h"
#include "sink.h"

#define PROGRESS_TOPIC "__weir_sink_progress"
#define TXN_ID_PREFIX "weir-sink-"
#define PING_TIMEOUT_MS 5000   /* open: is anything there at all */
#define OP_TIMEOUT_MS 15000    /* init/commit/abort/flush, topic checks, progress reads */
#define READ_BATCH 256

typedef enum SinkFormat { FMT_PLAIN, FMT_UPSERT, FMT_DEBEZIUM } SinkFormat;

/*
 * One open Kafka sink. Everything from the spec is copied, so the writer
 * does not depend on the spec's lifetime. Used by one thread at a time
 * (the sink's delivery thread).
 */
struct RtSinkWriter {
    char *name;                  /* sink name: progress key, transactional.id suffix */
    char *topic;                 /* data topic */
    char *bootstrap;
    SinkFormat fmt;
    bool exactly_once;
    int n_props;                 /* pass-through properties.* (owned strings) */
    RtKafkaProp *props;
    int n_cols;
    char **col_names;
    int n_pk;
    int *pk;                     /* indexes into the columns */
    const char **pk_names;       /* col_names[pk[i]], borrowed from col_names */
    Value *pk_vals;              /* scratch: one key's values */
    RtKafkaProducer *prod;       /* NULL after a failure that left it unusable */
    bool last_known;             /* `last` reflects the target */
    uint64_t last;               /* highest epoch recorded in the control topic */
    Buf key, val, row;           /* scratch encoders */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void writer_free(RtSinkWriter *w)
{
    if (!w)
        return;
    rt_kafka_producer_close(w->prod);
    for (int i = 0; i < w->n_props; i++) {
        free((char *)w->props[i].key);
        free((char *)w->props[i].value);
    }
    free(w->props);
    for (int i = 0; i < w->n_cols; i++)
        free(w->col_names[i]);
    free(w->col_names);
    free(w->pk);
    free(w->pk_names);
    free(w->pk_vals);
    free(w->name);
    free(w->topic);
    free(w->bootstrap);
    buf_free(&w->key);
    buf_free(&w->val);
    buf_free(&w->row);
    free(w);
}

static void add_prop(RtSinkWriter *w, const char *key, const char *value)
{
    w->props = xrealloc(w->props, (size_t)(w->n_props + 1) * sizeof *w->props);
    w->props[w->n_props].key = xstrdup(key);
    w->props[w->n_props].value = xstrdup(value);
    w->n_props++;
}

/* Reads the WITH options and FORMAT into w. 22023 on anything wrong. */
static int parse_spec(RtSinkWriter *w, const RtSinkSpec *spec, WError *err)
{
    const char *topic = rt_sink_option(spec, "topic");
    const char *boot = rt_sink_option(spec, "properties.bootstrap.server");
    const char *dg = rt_sink_option(spec, "sink.delivery-guarantee");

    if (!spec->name || !*spec->name)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "a kafka sink needs a name");
    if (!topic || !*topic)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                    "kafka sink \"%s\" needs a \"topic\" option", spec->name);
    if (!boot)
        boot = rt_sink_option(spec, "properties.bootstrap.servers");
    if (!boot || !*boot)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                    "kafka sink \"%s\" needs a \"properties.bootstrap.server\" option",
                    spec->name);
    if (!dg || strcasecmp(dg, "exactly-once") == 0)
        w->exactly_once = true;
    else if (strcasecmp(dg, "at-least-once") == 0)
        w->exactly_once = false;
    else
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                    "invalid sink.delivery-guarantee \"%s\": use 'exactly-once' or "
                    "'at-least-once'", dg);

    if (!spec->format)
        w->fmt = spec->upsert ? FMT_UPSERT : FMT_PLAIN;
    else if (strcasecmp(spec->format, "plain") == 0)
        w->fmt = FMT_PLAIN;
    else if (strcasecmp(spec->format, "upsert") == 0)
        w->fmt = FMT_UPSERT;
    else if (strcasecmp(spec->format, "debezium") == 0)
        w->fmt = FMT_DEBEZIUM;
    else
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                    "kafka sinks support FORMAT PLAIN, UPSERT or DEBEZIUM, not \"%s\"",
                    spec->format);
    if (w->fmt == FMT_UPSERT && spec->n_pk <= 0) {
        werr(err, SQLSTATE_INVALID_PARAMETER, 0,
             "a FORMAT UPSERT kafka sink needs a primary key");
        werr_hint(err, "Give the sink a primary_key, or use FORMAT PLAIN or DEBEZIUM.");
        return -1;
    }
    for (int i = 0; i < spec->n_pk; i++)
        if (spec->pk[i] < 0 || spec->pk[i] >= spec->n_cols)
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                        "kafka sink \"%s\": primary key column %d out of range", spec->name,
                        spec->pk[i]);

    for (int i = 0; i < spec->n_options; i++) {
        const char *k = spec->options[i].key;
        if (strncasecmp(k, "properties.", 11) != 0)
            continue;
        k += 11;
        if (strcasecmp(k, "bootstrap.server") == 0 || strcasecmp(k, "bootstrap.servers") == 0)
            continue;
        if (strcasecmp(k, "transactional.id") == 0) {
            werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                 "kafka sink \"%s\": properties.transactional.id cannot be set", spec->name);
            werr_hint(err, "weir uses \"" TXN_ID_PREFIX "%s\" for exactly-once delivery.",
                      spec->name);
            return -1;
        }
        add_prop(w, k, spec->options[i].value ? spec->options[i].value : "");
    }

    w->name = xstrdup(spec->name);
    w->topic = xstrdup(topic);
    w->bootstrap = xstrdup(boot);
    w->n_cols = spec->n_cols;
    w->col_names = xcalloc((size_t)(spec->n_cols > 0 ? spec->n_cols : 1), sizeof *w->col_names);
    for (int i = 0; i < spec->n_cols; i++)
        w->col_names[i] = xstrdup(spec->col_names[i]);
    w->n_pk = spec->n_pk > 0 ? spec->n_pk : 0;
    w->pk = xcalloc((size_t)w->n_pk + 1, sizeof *w->pk);
    w->pk_names = xcalloc((size_t)w->n_pk + 1, sizeof *w->pk_names);
    w->pk_vals = xcalloc((size_t)w->n_pk + 1, sizeof *w->pk_vals);
    for (int i = 0; i < w->n_pk; i++) {
        w->pk[i] = spec->pk[i];
        w->pk_names[i] = w->col_names[spec->pk[i]];
    }
    return 0;
}

/* ---- the control topic ---- */

static void admin_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    if (level <= 3)
        fprintf(stderr, "weir: kafka: %s: %s\n", fac, buf);
}

/* Creates the control topic (1 partition, cleanup.policy=compact) through
 * the Admin API; an existing topic is fine. The user's properties apply
 * (security settings). 08006 no answer, 58030 refused. */
static int create_progress_topic(RtSinkWriter *w, WError *err)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk = NULL;
    int rc = -1;

    rd_kafka_conf_set_log_cb(conf, admin_log_cb);
    if (rd_kafka_conf_set(conf, "bootstrap.servers", w->bootstrap, errstr, sizeof errstr) ||
        rd_kafka_conf_set(conf, "log.connection.close", "false", errstr, sizeof errstr))
        goto badconf;
    for (int i = 0; i < w->n_props; i++)
        if (rd_kafka_conf_set(conf, w->props[i].key, w->props[i].value, errstr, sizeof errstr))
            goto badconf;
    if (!(rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr)))
        goto badconf;
    conf = NULL;

    rc = rt_kafka_create_topic(rk, PROGRESS_TOPIC, 1, "compact", OP_TIMEOUT_MS, err);
    if (rc)
        werr_hint(err, "Create it yourself: 1 partition, cleanup.policy=compact.");
    goto out;
badconf:
    werr(err, SQLSTATE_INVALID_PARAMETER, 0, "invalid kafka property: %s", errstr);
out:
    if (rk)
        rd_kafka_destroy(rk);
    if (conf)
        rd_kafka_conf_destroy(conf);
    return rc;
}

/* Opens a source on the control topic with the given isolation.level,
 * creating the topic first when create is set and it is missing. */
static int open_progress_source(RtSinkWriter *w, bool create, const char *isolation,
                                RtKafkaSource **out, WError *err)
{
    RtKafkaProp *props = xcalloc((size_t)w->n_props + 1, sizeof *props);
    WError e2;
    int rc;

    if (w->n_props > 0)
        memcpy(props, w->props, (size_t)w->n_props * sizeof *props);
    props[w->n_props] = (RtKafkaProp){"isolation.level", isolation};
    werr_clear(&e2);
    rc = rt_kafka_source_open(w->bootstrap, PROGRESS_TOPIC, 0, props, w->n_props + 1,
                              OP_TIMEOUT_MS, out, &e2);
    if (rc < 0 && create && strcmp(e2.sqlstate, SQLSTATE_UNDEFINED_OBJECT) == 0) {
        if (create_progress_topic(w, err) < 0)
            goto out;
        werr_clear(&e2);
        rc = rt_kafka_source_open(w->bootstrap, PROGRESS_TOPIC, 0, props, w->n_props + 1,
                                  OP_TIMEOUT_MS, out, &e2);
    }
    if (rc < 0 && !err->set)
        *err = e2;
out:
    free(props);
    return rc < 0 ? -1 : 0;
}

/* Parses a progress value: decimal digits only. */
static bool parse_epoch(const void *p, size_t n, uint64_t *out)
{
    const char *s = p;
    uint64_t v = 0;
    if (!p || n == 0 || n > 20)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* The control topic is shared by every sink, so another sink's open
 * transaction can hold the last stable offset (LSO) below records this
 * sink has already committed. Reading only up to the LSO could then miss
 * our latest progress and re-deliver an epoch. So first take the high
 * watermarks (read_uncommitted end offsets: everything written so far,
 * including all of our own settled transactions), then wait until the LSO
 * has passed them (other transactions commit or abort; bounded by
 * OP_TIMEOUT_MS) before reading. hwm gets np entries. */
static int progress_hwm(RtSinkWriter *w, int np, int64_t *hwm, WError *err)
{
    RtKafkaSource *u = NULL;
    int rc = -1;

    if (open_progress_source(w, false, "read_uncommitted", &u, err) < 0)
        return -1;
    int nu = rt_kafka_source_partition_count(u);
    int64_t *tmp = xcalloc((size_t)(nu > np ? nu : np), sizeof *tmp);
    if (rt_kafka_source_end_offsets(u, tmp, OP_TIMEOUT_MS, err) == 0) {
        memcpy(hwm, tmp, (size_t)np * sizeof *hwm); /* partitions added since: 0 */
        rc = 0;
    }
    free(tmp);
    rt_kafka_source_close(u);
    return rc;
}

/* Reads the whole control topic (read_committed) and returns the highest
 * epoch recorded under this sink's key; a tombstone for the key resets it
 * to 0 (a dropped sink's progress). 08006 if the end is not reached within
 * OP_TIMEOUT_MS. */
static int read_progress(RtSinkWriter *w, uint64_t *epoch, WError *err)
{
    RtKafkaSource *s = NULL;
    RtKafkaRecord recs[READ_BATCH];
    int32_t *parts = NULL;
    int64_t *offs = NULL, *end = NULL, *next = NULL, *hwm = NULL;
    size_t klen = strlen(w->name);
    uint64_t best = 0;
    int64_t deadline = now_ms() + OP_TIMEOUT_MS;
    int rc = -1;

    if (open_progress_source(w, false, "read_committed", &s, err) < 0)
        return -1;
    int np = rt_kafka_source_partition_count(s);
    parts = xcalloc((size_t)np, sizeof *parts);
    offs = xcalloc((size_t)np, sizeof *offs);
    end = xcalloc((size_t)np, sizeof *end);
    next = xcalloc((size_t)np, sizeof *next);
    hwm = xcalloc((size_t)np, sizeof *hwm);
    for (int i = 0; i < np; i++) {
        parts[i] = i;
        offs[i] = RT_KAFKA_EARLIEST;
    }
    if (progress_hwm(w, np, hwm, err) < 0)
        goto out;
    for (;;) {
        bool stable = true;
        if (rt_kafka_source_end_offsets(s, end, OP_TIMEOUT_MS, err) < 0)
            goto out;
        for (int i = 0; i < np; i++)
            if (end[i] < hwm[i])
                stable = false;
        if (stable)
            break;
        if (now_ms() > deadline) {
            werr(err, SQLSTATE_CONNECTION_FAILURE, 0,
                 "an open transaction kept " PROGRESS_TOPIC " at %s from settling for %d ms",
                 w->bootstrap, OP_TIMEOUT_MS);
            goto out;
        }
        usleep(100 * 1000);
    }
    if (rt_kafka_source_assign(s, np, parts, offs, err) < 0)
        goto out;

    for (;;) {
        bool done = true;
        for (int i = 0; i < np && done; i++)
            if (next[i] < end[i] && !rt_kafka_source_at_end(s, i))
                done = false;
        if (done)
            break;
        if (now_ms() > deadline) {
            werr(err, SQLSTATE_CONNECTION_FAILURE, 0,
                 "reading " PROGRESS_TOPIC " at %s did not reach its end within %d ms",
                 w->bootstrap, OP_TIMEOUT_MS);
            goto out;
        }
        int n = rt_kafka_source_poll(s, 100, recs, READ_BATCH);
        if (n < 0) {
            werr(err, SQLSTATE_IO_ERROR, 0, "reading " PROGRESS_TOPIC " at %s failed",
                 w->bootstrap);
            goto out;
        }
        for (int i = 0; i < n; i++) {
            const RtKafkaRecord *r = &recs[i];
            uint64_t e;
            if (r->partition >= 0 && r->partition < np && r->offset + 1 > next[r->partition])
                next[r->partition] = r->offset + 1;
            if (!r->key || r->key_len != klen || memcmp(r->key, w->name, klen) != 0)
                continue;
            if (!r->value)
                best = 0;
            else if (parse_epoch(r->value, r->value_len, &e) && e > best)
                best = e;
        }
    }
    *epoch = best;
    rc = 0;
out:
    rt_kafka_source_close(s);
    free(parts);
    free(offs);
    free(end);
    free(next);
    free(hwm);
    return rc;
}

/* ---- the producer ---- */

/* Creates the producer; with exactly-once it is transactional and
 * init_txn fences older producers of this sink. */
static int producer_start(RtSinkWriter *w, WError *err)
{
    RtKafkaProp *props = xcalloc((size_t)w->n_props + 1, sizeof *props);
    char txn_id[512];
    int n = w->n_props;

    if (w->n_props > 0)
        memcpy(props, w->props, (size_t)n * sizeof *props);
    if (w->exactly_once) {
        snprintf(txn_id, sizeof txn_id, TXN_ID_PREFIX "%s", w->name);
        props[n++] = (RtKafkaProp){"transactional.id", txn_id};
    }
    int rc = rt_kafka_producer_open(w->bootstrap, props, n, &w->prod, err);
    free(props);
    if (rc < 0)
        return -1;
    if (w->exactly_once && rt_kafka_producer_init_txn(w->prod, OP_TIMEOUT_MS, err) < 0) {
        rt_kafka_producer_close(w->prod);
        w->prod = NULL;
        return -1;
    }
    return 0;
}

/* Drops a producer whose state is unknown (fatal error, failed abort,
 * commit outcome unknown). The next write starts a new one, whose init_txn
 * fences this one and settles its transaction, and re-reads the progress. */
static void producer_reset(RtSinkWriter *w)
{
    rt_kafka_producer_close(w->prod);
    w->prod = NULL;
    w->last_known = false;
}

/* ---- encoding ---- */

static void encode_key(RtSinkWriter *w, const Value *row)
{
    buf_reset(&w->key);
    for (int i = 0; i < w->n_pk; i++)
        w->pk_vals[i] = row[w->pk[i]];
    rt_json_encode_row(w->n_pk, w->pk_names, w->pk_vals, &w->key);
}

static void encode_row(RtSinkWriter *w, const Value *row, Buf *out)
{
    if (row)
        rt_json_encode_row(w->n_cols, (const char *const *)w->col_names, row, out);
    else
        buf_puts(out, "null");
}

/* Produces one change. A change with neither row is nothing to write. */
static int produce_change(RtSinkWriter *w, uint64_t epoch, const RtSinkChange *c, WError *err)
{
    const Value *keyrow = c->after ? c->after : c->before;
    const void *key = NULL, *val = NULL;
    size_t klen = 0, vlen = 0;

    if (!c->before && !c->after)
        return 0;
    buf_reset(&w->val);
    if (w->n_pk > 0 && w->fmt != FMT_PLAIN) {
        encode_key(w, keyrow);
        key = w->key.data;
        klen = w->key.len;
    }
    switch (w->fmt) {
    case FMT_PLAIN:
        encode_row(w, c->after, &w->val);
        break;
    case FMT_UPSERT:
        if (c->after)
            encode_row(w, c->after, &w->val);
        break;
    case FMT_DEBEZIUM: {
        static const char *const src_names[] = {"sink", "epoch"};
        Value src[2] = {value_str(TYPE_TEXT, w->name, strlen(w->name)),
                        value_int(TYPE_INT8, (int64_t)epoch)};
        buf_puts(&w->val, "{\"before\":");
        encode_row(w, c->before, &w->val);
        buf_puts(&w->val, ",\"after\":");
        encode_row(w, c->after, &w->val);
        buf_printf(&w->val, ",\"op\":\"%s\",\"source\":",
                   !c->before ? "c" : c->after ? "u" : "d");
        rt_json_encode_row(2, src_names, src, &w->val);
        buf_putc(&w->val, '}');
        break;
    }
    }
    if (w->fmt != FMT_UPSERT || c->after) {
        val = w->val.data;
        vlen = w->val.len;
    }
    return rt_kafka_produce(w->prod, w->topic, -1, key, klen, val, vlen, err);
}

static int produce_changes(RtSinkWriter *w, uint64_t epoch, int n, const RtSinkChange *changes,
                           WError *err)
{
    for (int i = 0; i < n; i++)
        if (produce_change(w, epoch, &changes[i], err) < 0)
            return -1;
    return 0;
}

static int produce_progress(RtSinkWriter *w, uint64_t epoch, WError *err)
{
    char ev[24];
    int len = snprintf(ev, sizeof ev, "%" PRIu64, epoch);
    return rt_kafka_produce(w->prod, PROGRESS_TOPIC, -1, w->name, strlen(w->name), ev,
                            (size_t)len, err);
}

/* ---- the control topic for other transactional writers (kafka.h) ---- */

int rt_kafka_progress_prepare(const char *bootstrap, WError *err)
{
    RtSinkWriter w = {.name = (char *)"", .bootstrap = (char *)bootstrap};
    RtKafkaSource *s = NULL;
    if (open_progress_source(&w, true, "read_committed", &s, err) < 0)
        return -1;
    rt_kafka_source_close(s);
    return 0;
}

int rt_kafka_progress_read(const char *bootstrap, const char *key, uint64_t *epoch, WError *err)
{
    RtSinkWriter w = {.name = (char *)key, .bootstrap = (char *)bootstrap};
    return read_progress(&w, epoch, err);
}

int rt_kafka_progress_produce(RtKafkaProducer *p, const char *key, uint64_t epoch, WError *err)
{
    RtSinkWriter w = {.name = (char *)key, .prod = p};
    return produce_progress(&w, epoch, err);
}

/* ---- the connector ---- */

static int kafka_open(const RtSinkSpec *spec, RtSinkWriter **out, WError *err)
{
    RtSinkWriter *w = xcalloc(1, sizeof *w);
    RtKafkaSource *s = NULL;

    *out = NULL;
    if (parse_spec(w, spec, err) < 0)
        goto fail;
    if (!rt_kafka_ping(w->bootstrap, PING_TIMEOUT_MS)) {
        werr(err, SQLSTATE_CONNECTION_FAILURE, 0,
             "kafka sink \"%s\": could not reach kafka at %s within %d ms", w->name,
             w->bootstrap, PING_TIMEOUT_MS);
        werr_hint(err, "Is a broker running there? \"weir broker\" starts an embedded one.");
        goto fail;
    }
    if (open_progress_source(w, true, "read_committed", &s, err) < 0)
        goto fail;
    rt_kafka_source_close(s);
    if (producer_start(w, err) < 0)
        goto fail;
    *out = w;
    return 0;
fail:
    writer_free(w);
    return -1;
}

static int kafka_last_epoch(RtSinkWriter *w, uint64_t *epoch, WError *err)
{
    if (!w->prod && producer_start(w, err) < 0)
        return -1; /* a fenced-out transaction must settle before reading */
    if (read_progress(w, epoch, err) < 0)
        return -1;
    w->last = *epoch;
    w->last_known = true;
    return 0;
}

static int kafka_write_epoch(RtSinkWriter *w, uint64_t epoch, int n,
                             const RtSinkChange *changes, WError *err)
{
    uint64_t last;
    int rc;

    if (w->fmt == FMT_PLAIN)
        for (int i = 0; i < n; i++)
            if (changes[i].before) {
                werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                     "a FORMAT PLAIN sink needs an append-only input; use FORMAT UPSERT");
                return -1;
            }
    if (!w->last_known && kafka_last_epoch(w, &last, err) < 0)
        return -1;
    if (epoch <= w->last)
        return 0;

    if (!w->exactly_once) {
        /* The data is acknowledged before the progress record is sent, so a
         * recorded epoch is never missing records (it may repeat some). */
        if (produce_changes(w, epoch, n, changes, err) < 0 ||
            rt_kafka_producer_flush(w->prod, OP_TIMEOUT_MS, err) < 0 ||
            produce_progress(w, epoch, err) < 0 ||
            rt_kafka_producer_flush(w->prod, OP_TIMEOUT_MS, err) < 0)
            return -1;
        w->last = epoch;
        return 0;
    }

    if ((rc = rt_kafka_producer_begin_txn(w->prod, err)) < 0)
        goto failed;
    if (produce_changes(w, epoch, n, changes, err) < 0 || produce_progress(w, epoch, err) < 0) {
        rc = RT_KAFKA_ERR_ABORTABLE;
        goto failed;
    }
    if ((rc = rt_kafka_producer_commit_txn(w->prod, OP_TIMEOUT_MS, err)) < 0)
        goto failed;
    w->last = epoch;
    return 0;

failed:
    /* Abortable: the transaction certainly did not commit; abort it and keep
     * the producer. Anything else (fatal, commit outcome unknown): start
     * over with a new producer and re-read the progress before the retry. */
    if (rc == RT_KAFKA_ERR_ABORTABLE) {
        WError e2;
        werr_clear(&e2);
        if (rt_kafka_producer_abort_txn(w->prod, OP_TIMEOUT_MS, &e2) == 0)
            return -1;
    }
    producer_reset(w);
    return -1;
}

static void kafka_close(RtSinkWriter *w)
{
    writer_free(w);
}

/* connector = 'kafka' (see sink.h). open: 22023 bad option/format/property,
 * 08006 unreachable within PING_TIMEOUT_MS, 58030 the broker refused (e.g.
 * control topic creation); write_epoch: 22023 a retraction under FORMAT
 * PLAIN, 58030 a record failed, 08006 timed out (the epoch is retried). */
/* A tombstone for the sink's key in the progress topic: last_epoch reads it as 0. */
static int kafka_reset(RtSinkWriter *w, WError *err)
{
    if (!w->prod && producer_start(w, err) < 0)
        return -1;
    int rc = w->exactly_once ? rt_kafka_producer_begin_txn(w->prod, err) : 0;
    if (!rc)
        rc = rt_kafka_produce(w->prod, PROGRESS_TOPIC, -1, w->name, strlen(w->name), NULL, 0, err);
    if (!rc)
        rc = w->exactly_once ? rt_kafka_producer_commit_txn(w->prod, OP_TIMEOUT_MS, err)
                             : rt_kafka_producer_flush(w->prod, OP_TIMEOUT_MS, err);
    if (rc < 0) {
        if (w->exactly_once) {
            WError ignored = {0};
            rt_kafka_producer_abort_txn(w->prod, OP_TIMEOUT_MS, &ignored);
        }
        return -1;
    }
    w->last = 0;
    w->last_known = true;
    return 0;
}

const RtSinkConnector rt_sink_kafka = {"kafka", kafka_open, kafka_last_epoch, kafka_write_epoch,
                                       kafka_reset, kafka_close, NULL};
