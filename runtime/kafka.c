/*
 * kafka.c: the Kafka connector over librdkafka (see kafka.h).
 *
 * Source: a high-level consumer used in assign-only mode. It has a dummy
 * group.id because librdkafka's assign() needs a consumer-group object, but
 * it never subscribes, never commits and never stores offsets, so the group
 * is never joined. Fetching is tuned for loopback latency (the broker
 * answers a fetch after at most fetch.wait.max.ms = 10 ms) while librdkafka
 * still prefetches whole batches into its queue; rt_kafka_source_poll waits
 * for the first record and then drains what is already queued.
 *
 * Producer: librdkafka's, with a short linger so records travel in batches
 * without adding visible latency. Delivery reports record the first failure
 * for rt_kafka_producer_flush. Transactions map onto librdkafka's
 * transactional API one to one.
 */
#include "kafka.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "arena.h"
#include "fault.h"

#define DUMMY_GROUP "weir-assign-only" /* never joined, never committed to */
#define WATCH_TIMEOUT_MS 2000          /* a topic watcher's metadata request */

struct RtKafkaSource {
    rd_kafka_t *rk;
    rd_kafka_queue_t *q;           /* the consumer queue (fetched records) */
    char *topic;
    int n_parts;                   /* partition count seen at open */
    bool *at_end;                  /* n_parts flags: last event was partition EOF */
    bool *gap;                     /* n_parts flags: the fetch position is no longer in the log
                                      (auto.offset.reset = error); taken by rt_kafka_source_take_gap */
    rd_kafka_message_t **held;     /* records returned by the last poll */
    int n_held;
    int cap_held;
    /* The topic watcher (rt_kafka_source_watch): a thread asking for the
     * broker's metadata every watch_ms, so the engine thread never waits on
     * a metadata request. topic_state is its last answer (RT_KAFKA_TOPIC_*
     * or a partition count), state_since_ms when that answer started. */
    bool watching;
    int watch_ms;
    pthread_t watcher;
    pthread_mutex_t watch_lock;    /* guards stop, topic_state, state_since_ms */
    pthread_cond_t watch_cond;     /* wakes the watcher when stop is set */
    bool stop;
    int topic_state;
    int64_t state_since_ms;
    bool shrank;                   /* partitions left the topic (watcher or consumer errors): destroy off-thread */
};

struct RtKafkaProducer {
    rd_kafka_t *rk;
    bool transactional;            /* "transactional.id" was given */
    rd_kafka_resp_err_t fail_err;  /* first delivery failure since the last flush */
    char fail_topic[256];
    int32_t fail_partition;
    long n_failed;                 /* delivery failures since the last flush */
    long n_acked;                  /* records acknowledged, since open */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int remaining_ms(int64_t deadline)
{
    int64_t r = deadline - now_ms();
    return r < 0 ? 0 : (int)r;
}

/* librdkafka's own messages: only errors, prefixed like every weir message. */
static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    if (level <= LOG_ERR)
        fprintf(stderr, "weir: kafka: %s: %s\n", fac, buf);
}

static void silent_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
}

/* Client-level errors (all brokers down, fatal idempotence errors...).
 * librdkafka retries the transient ones itself, so they are only logged. */
static void error_cb(rd_kafka_t *rk, int e, const char *reason, void *opaque)
{
    /* Connection failures are already logged, once, by log_cb. */
    if (e == RD_KAFKA_RESP_ERR__TRANSPORT || e == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
        return;
    fprintf(stderr, "weir: kafka: %s%s\n", rd_kafka_fatal_error(rk, NULL, 0) ? "fatal: " : "",
            reason);
}

/* A configuration with weir's defaults (pairs in defs, NULL-terminated)
 * followed by the user's properties. NULL with err set on a bad property. */
static rd_kafka_conf_t *conf_build(const char *bootstrap, const char *const *defs,
                                   const RtKafkaProp *props, int n_props, WError *err)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();

    rd_kafka_conf_set_log_cb(conf, log_cb);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, errstr, sizeof errstr))
        goto bad;
    for (const char *const *d = defs; d && d[0]; d += 2)
        if (rd_kafka_conf_set(conf, d[0], d[1], errstr, sizeof errstr))
            goto bad;
    for (int i = 0; i < n_props; i++)
        if (rd_kafka_conf_set(conf, props[i].key, props[i].value, errstr, sizeof errstr))
            goto bad;
    return conf;
bad:
    rd_kafka_conf_destroy(conf);
    werr(err, SQLSTATE_INVALID_PARAMETER, 0, "invalid kafka property: %s", errstr);
    return NULL;
}

static bool is_conn_err(rd_kafka_resp_err_t e)
{
    return e == RD_KAFKA_RESP_ERR__TRANSPORT || e == RD_KAFKA_RESP_ERR__TIMED_OUT ||
           e == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || e == RD_KAFKA_RESP_ERR__RESOLVE;
}

/* Finds topic in a full metadata listing: its partition count, 0 if the
 * topic does not exist (or has no partitions yet). */
static int topic_partitions(rd_kafka_t *rk, const char *bootstrap, const char *topic,
                            int timeout_ms, WError *err)
{
    const struct rd_kafka_metadata *md = NULL;
    /* all_topics = 1: a listing never auto-creates anything. */
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms);
    int n = 0;

    if (e) {
        werr(err, is_conn_err(e) ? SQLSTATE_CONNECTION_FAILURE : SQLSTATE_IO_ERROR, 0,
             "could not reach kafka at %s within %d ms: %s", bootstrap, timeout_ms,
             rd_kafka_err2str(e));
        if (is_conn_err(e))
            werr_hint(err, "Is a broker running there? \"weir broker\" starts an embedded one.");
        return -1;
    }
    for (int i = 0; i < md->topic_cnt; i++)
        if (!strcmp(md->topics[i].topic, topic) && !md->topics[i].err)
            n = md->topics[i].partition_cnt;
    rd_kafka_metadata_destroy(md);
    return n;
}

int rt_kafka_create_topic(rd_kafka_t *rk, const char *topic, int partitions, const char *cleanup_policy,
                          int timeout_ms, WError *err)
{
    char errstr[512];
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, -1, errstr, sizeof errstr);
    rd_kafka_queue_t *q = NULL;
    rd_kafka_AdminOptions_t *opt = NULL;
    rd_kafka_event_t *ev = NULL;
    rd_kafka_resp_err_t e;
    int rc = -1;

    if (nt && cleanup_policy && rd_kafka_NewTopic_set_config(nt, "cleanup.policy", cleanup_policy)) {
        snprintf(errstr, sizeof errstr, "cleanup.policy '%s' refused", cleanup_policy);
        rd_kafka_NewTopic_destroy(nt);
        nt = NULL;
    }
    if (!nt)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "cannot create topic \"%s\": %s", topic,
                    errstr);
    q = rd_kafka_queue_new(rk);
    opt = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_request_timeout(opt, timeout_ms, errstr, sizeof errstr);
    rd_kafka_AdminOptions_set_operation_timeout(opt, timeout_ms, errstr, sizeof errstr);
    rd_kafka_CreateTopics(rk, &nt, 1, opt, q);
    ev = rd_kafka_queue_poll(q, timeout_ms + 1000);
    if (!ev) {
        werr(err, SQLSTATE_CONNECTION_FAILURE, 0,
             "creating topic \"%s\" got no answer within %d ms", topic, timeout_ms);
        goto out;
    }
    if ((e = rd_kafka_event_error(ev))) {
        werr(err, is_conn_err(e) ? SQLSTATE_CONNECTION_FAILURE : SQLSTATE_IO_ERROR, 0,
             "could not create topic \"%s\": %s", topic, rd_kafka_event_error_string(ev));
        goto out;
    }
    size_t n = 0;
    const rd_kafka_topic_result_t **res =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    for (size_t i = 0; i < n; i++) {
        e = rd_kafka_topic_result_error(res[i]);
        if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
            const char *msg = rd_kafka_topic_result_error_string(res[i]);
            werr(err, SQLSTATE_IO_ERROR, 0, "could not create topic \"%s\": %s", topic,
                 msg ? msg : rd_kafka_err2str(e));
            goto out;
        }
    }
    rc = 0;
out:
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opt);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    return rc;
}

static int source_open(const char *bootstrap, const char *topic, int create_partitions, const char *cleanup_policy,
                       const RtKafkaProp *props, int n_props, int timeout_ms, RtKafkaSource **out, WError *err)
{
    static const char *const defs[] = {
        "group.id", DUMMY_GROUP,
        "enable.auto.commit", "false",
        "enable.auto.offset.store", "false",
        "enable.partition.eof", "true",
        "allow.auto.create.topics", "false",
        /* Where an exact offset is no longer retained, start at the oldest. */
        "auto.offset.reset", "earliest",
        "fetch.wait.max.ms", "10",
        "fetch.min.bytes", "1",
        "fetch.error.backoff.ms", "50",
        "socket.nagle.disable", "true",
        "log_level", "3",
        "log.connection.close", "false",
        NULL,
    };
    char errstr[512];
    int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    RtKafkaSource *s;
    rd_kafka_conf_t *conf;
    int n;

    *out = NULL;
    if (!(conf = conf_build(bootstrap, defs, props, n_props, err)))
        return -1;
    s = xcalloc(1, sizeof *s);
    s->topic = xstrdup(topic);
    if (!(s->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr))) {
        rd_kafka_conf_destroy(conf);
        werr(err, SQLSTATE_INVALID_PARAMETER, 0, "could not create kafka consumer: %s", errstr);
        goto fail;
    }
    /* Errors and callbacks are served by the consumer poll. */
    rd_kafka_poll_set_consumer(s->rk);
    s->q = rd_kafka_queue_get_consumer(s->rk);

    n = topic_partitions(s->rk, bootstrap, topic, remaining_ms(deadline), err);
    if (n < 0)
        goto fail;
    if (n == 0 && create_partitions <= 0) {
        werr(err, "42704", 0, "kafka topic \"%s\" does not exist at %s", topic, bootstrap);
        werr_hint(err, "Create the topic first, or let weir create it with a partition count.");
        goto fail;
    }
    if (n == 0) {
        if (rt_kafka_create_topic(s->rk, topic, create_partitions, cleanup_policy, remaining_ms(deadline), err) < 0)
            goto fail;
        /* Real brokers publish a new topic's metadata a moment later. */
        while ((n = topic_partitions(s->rk, bootstrap, topic, remaining_ms(deadline), err)) == 0 &&
               remaining_ms(deadline) > 0)
            usleep(50 * 1000);
        if (n < 0)
            goto fail;
        if (n == 0) {
            werr(err, SQLSTATE_CONNECTION_FAILURE, 0,
                 "kafka topic \"%s\" was created but did not appear within %d ms", topic,
                 timeout_ms);
            goto fail;
        }
    }
    s->n_parts = n;
    s->at_end = xcalloc((size_t)n, sizeof *s->at_end);
    s->gap = xcalloc((size_t)n, sizeof *s->gap);
    *out = s;
    return 0;
fail:
    rt_kafka_source_close(s);
    return -1;
}

int rt_kafka_source_open(const char *bootstrap, const char *topic, int create_partitions,
                         const RtKafkaProp *props, int n_props, int timeout_ms,
                         RtKafkaSource **out, WError *err)
{
    return source_open(bootstrap, topic, create_partitions, NULL, props, n_props, timeout_ms, out, err);
}

int rt_kafka_topic_ensure(const char *bootstrap, const char *topic, int partitions, const char *cleanup_policy,
                          int timeout_ms, int *n_out, WError *err)
{
    RtKafkaSource *s;
    if (source_open(bootstrap, topic, partitions, cleanup_policy, NULL, 0, timeout_ms, &s, err))
        return -1;
    *n_out = s->n_parts;
    rt_kafka_source_close(s);
    return 0;
}

int rt_kafka_log_open(const char *bootstrap, const char *topic, int64_t from, int timeout_ms, RtKafkaSource **out,
                      WError *err)
{
    if (source_open(bootstrap, topic, 1, "compact", NULL, 0, timeout_ms, out, err))
        return -1;
    if ((*out)->n_parts != 1) {
        werr(err, SQLSTATE_INVALID_PARAMETER, 0, "kafka topic \"%s\" has %d partitions; it must have exactly one",
             topic, (*out)->n_parts);
        rt_kafka_source_close(*out);
        *out = NULL;
        return -1;
    }
    int32_t part = 0;
    if (rt_kafka_source_assign(*out, 1, &part, &from, err)) {
        rt_kafka_source_close(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

int rt_kafka_source_partition_count(RtKafkaSource *s)
{
    return s->n_parts;
}

void rt_kafka_source_grow(RtKafkaSource *s, int n)
{
    if (n <= s->n_parts)
        return;
    s->at_end = xrealloc(s->at_end, (size_t)n * sizeof *s->at_end);
    memset(s->at_end + s->n_parts, 0, (size_t)(n - s->n_parts) * sizeof *s->at_end);
    s->gap = xrealloc(s->gap, (size_t)n * sizeof *s->gap);
    memset(s->gap + s->n_parts, 0, (size_t)(n - s->n_parts) * sizeof *s->gap);
    if (s->watching)
        pthread_mutex_lock(&s->watch_lock);
    s->n_parts = n;
    if (s->watching)
        pthread_mutex_unlock(&s->watch_lock);
}

int rt_kafka_source_assign(RtKafkaSource *s, int n, const int32_t *partitions,
                           const int64_t *offsets, WError *err)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n > 0 ? n : 1);
    rd_kafka_resp_err_t e;

    for (int i = 0; i < n; i++) {
        if (partitions[i] < 0 || partitions[i] >= s->n_parts) {
            rd_kafka_topic_partition_list_destroy(l);
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                        "kafka topic \"%s\" has no partition %d (it has %d)", s->topic,
                        (int)partitions[i], s->n_parts);
        }
        int64_t off = offsets[i] == RT_KAFKA_EARLIEST ? RD_KAFKA_OFFSET_BEGINNING
                      : offsets[i] == RT_KAFKA_LATEST ? RD_KAFKA_OFFSET_END
                                                      : offsets[i];
        if (off < 0 && off != RD_KAFKA_OFFSET_BEGINNING && off != RD_KAFKA_OFFSET_END) {
            rd_kafka_topic_partition_list_destroy(l);
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "invalid start offset %lld",
                        (long long)offsets[i]);
        }
        rd_kafka_topic_partition_list_add(l, s->topic, partitions[i])->offset = off;
    }
    e = rd_kafka_assign(s->rk, n > 0 ? l : NULL);
    rd_kafka_topic_partition_list_destroy(l);
    if (e)
        return werr(err, SQLSTATE_IO_ERROR, 0, "could not assign kafka partitions: %s",
                    rd_kafka_err2str(e));
    memset(s->at_end, 0, (size_t)s->n_parts * sizeof *s->at_end);
    return 0;
}

int rt_kafka_source_seek(RtKafkaSource *s, int n, const int32_t *partitions, const int64_t *offsets,
                         int timeout_ms, WError *err)
{
    if (n <= 0)
        return 0;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
    for (int i = 0; i < n; i++) {
        if (partitions[i] < 0 || partitions[i] >= s->n_parts || offsets[i] < RT_KAFKA_EARLIEST) {
            rd_kafka_topic_partition_list_destroy(l);
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "cannot seek kafka topic \"%s\" partition %d to %lld",
                        s->topic, (int)partitions[i], (long long)offsets[i]);
        }
        int64_t off = offsets[i] == RT_KAFKA_EARLIEST ? RD_KAFKA_OFFSET_BEGINNING
                      : offsets[i] == RT_KAFKA_LATEST ? RD_KAFKA_OFFSET_END
                                                      : offsets[i];
        rd_kafka_topic_partition_list_add(l, s->topic, partitions[i])->offset = off;
    }
    /* With a timeout the call returns once the fetchers moved, so no record
     * fetched from the old position is returned after it. */
    rd_kafka_error_t *e = rd_kafka_seek_partitions(s->rk, l, timeout_ms > 0 ? timeout_ms : 1);
    int rc = 0;
    if (e) {
        rc = werr(err, rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR__TIMED_OUT ? SQLSTATE_CONNECTION_FAILURE
                                                                               : SQLSTATE_IO_ERROR,
                  0, "could not seek kafka topic \"%s\": %s", s->topic, rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
    }
    for (int i = 0; !rc && i < l->cnt; i++)
        if (l->elems[i].err)
            rc = werr(err, SQLSTATE_IO_ERROR, 0, "could not seek kafka topic \"%s\" partition %d: %s", s->topic,
                      (int)l->elems[i].partition, rd_kafka_err2str(l->elems[i].err));
    rd_kafka_topic_partition_list_destroy(l);
    for (int i = 0; i < n; i++)
        s->at_end[partitions[i]] = false;
    return rc;
}

static void release_held(RtKafkaSource *s)
{
    for (int i = 0; i < s->n_held; i++)
        rd_kafka_message_destroy(s->held[i]);
    s->n_held = 0;
}

/* Takes ownership of m: a record is kept in held and described in *rec
 * (returns 1); an event is consumed (returns 0, or RT_KAFKA_ERR_FATAL). */
static int take(RtKafkaSource *s, rd_kafka_message_t *m, RtKafkaRecord *rec)
{
    int32_t p = m->partition;
    if (m->err) {
        int rc = 0;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (p >= 0 && p < s->n_parts)
                s->at_end[p] = true;
        } else if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET && p >= 0 && p < s->n_parts) {
            /* The owner decides (on_offset_gap) and logs; librdkafka fetches
             * nothing more of p until it is assigned again. */
            s->gap[p] = true;
        } else {
            char reason[256];
            rd_kafka_resp_err_t fe = rd_kafka_fatal_error(s->rk, reason, sizeof reason);
            if (fe) {
                fprintf(stderr, "weir: kafka: consumer failed: %s\n", reason);
                rc = RT_KAFKA_ERR_FATAL;
            } else {
                fprintf(stderr, "weir: kafka: %s [%d]: %s\n",
                        m->rkt ? rd_kafka_topic_name(m->rkt) : s->topic, (int)p,
                        rd_kafka_message_errstr(m));
                /* librdkafka saw an assigned partition go away before the watcher did. */
                if (m->err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION || m->err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
                    m->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
                    if (s->watching)
                        pthread_mutex_lock(&s->watch_lock);
                    s->shrank = true;
                    if (s->watching)
                        pthread_mutex_unlock(&s->watch_lock);
                }
            }
        }
        rd_kafka_message_destroy(m);
        return rc;
    }
    if (p >= 0 && p < s->n_parts)
        s->at_end[p] = false;
    s->held[s->n_held++] = m;
    rd_kafka_timestamp_type_t tt;
    int64_t ts = rd_kafka_message_timestamp(m, &tt);
    *rec = (RtKafkaRecord){
        .partition = p,
        .offset = m->offset,
        .timestamp_ms = tt == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? -1 : ts,
        .key = m->key,
        .key_len = m->key_len,
        .value = m->payload,
        .value_len = m->len,
    };
    return 1;
}

int rt_kafka_source_poll(RtKafkaSource *s, int timeout_ms, RtKafkaRecord *recs, int max)
{
    int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    int n = 0;

    release_held(s);
    if (max <= 0)
        return 0;
    if (FAULT("kafka_poll"))
        return RT_KAFKA_ERR; /* as when the consumer reports an error: callers retry */
    if (max > s->cap_held) {
        s->cap_held = max;
        s->held = xrealloc(s->held, (size_t)max * sizeof *s->held);
    }
    /* Wait for the first record; events (EOF, errors) do not end the wait. */
    while (n == 0) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(s->rk, remaining_ms(deadline));
        if (!m)
            return 0;
        int r = take(s, m, &recs[n]);
        if (r < 0)
            return r;
        n += r;
        if (n == 0 && remaining_ms(deadline) == 0)
            return 0;
    }
    /* Then drain what is already fetched, without waiting. The spare slots
     * of held double as the batch buffer: each message moves down to its
     * final place in take(). */
    while (n < max) {
        rd_kafka_message_t **batch = s->held + s->n_held;
        ssize_t got = rd_kafka_consume_batch_queue(s->q, 0, batch, (size_t)(max - n));
        if (got <= 0)
            break;
        for (ssize_t i = 0; i < got; i++) {
            int r = take(s, batch[i], &recs[n]);
            if (r < 0) {
                for (ssize_t j = i + 1; j < got; j++)
                    rd_kafka_message_destroy(batch[j]);
                return r;
            }
            n += r;
        }
    }
    return n;
}

bool rt_kafka_source_at_end(RtKafkaSource *s, int32_t partition)
{
    return partition >= 0 && partition < s->n_parts && s->at_end[partition];
}

bool rt_kafka_source_take_gap(RtKafkaSource *s, int32_t *partition)
{
    for (int p = 0; p < s->n_parts; p++)
        if (s->gap[p]) {
            s->gap[p] = false;
            *partition = p;
            return true;
        }
    return false;
}

int rt_kafka_source_end_offsets(RtKafkaSource *s, int64_t *out, int timeout_ms, WError *err)
{
    int rc = -1;
    for (int p = 0; p < s->n_parts; p++) {
        int64_t lo, hi;
        rd_kafka_resp_err_t e =
            rd_kafka_query_watermark_offsets(s->rk, s->topic, p, &lo, &hi, timeout_ms);
        if (e == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || e == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION ||
            e == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC) {
            /* The broker answers and the partition is gone (the source's
             * topic.lost_after grace): nothing in it to wait for. */
            out[p] = -1;
            continue;
        }
        if (e) {
            werr(err, is_conn_err(e) ? SQLSTATE_CONNECTION_FAILURE : SQLSTATE_IO_ERROR, 0,
                 "could not read the end offset of kafka topic \"%s\" partition %d: %s",
                 s->topic, p, rd_kafka_err2str(e));
            goto out;
        }
        out[p] = hi;
    }
    rc = 0;
out:
    return rc;
}

int rt_kafka_source_start_offset(RtKafkaSource *s, int32_t partition, int64_t *out, int timeout_ms, WError *err)
{
    int64_t lo, hi;
    rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(s->rk, s->topic, partition, &lo, &hi, timeout_ms);
    if (e)
        return werr(err, is_conn_err(e) ? SQLSTATE_CONNECTION_FAILURE : SQLSTATE_IO_ERROR, 0,
                    "could not read the start offset of kafka topic \"%s\" partition %d: %s", s->topic,
                    (int)partition, rd_kafka_err2str(e));
    *out = lo;
    return 0;
}

int rt_kafka_source_offsets_for_time(RtKafkaSource *s, int64_t ts_ms, int64_t *out, int timeout_ms, WError *err)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(s->n_parts);
    for (int p = 0; p < s->n_parts; p++)
        rd_kafka_topic_partition_list_add(l, s->topic, p)->offset = ts_ms;
    int rc = 0;
    rd_kafka_resp_err_t e = rd_kafka_offsets_for_times(s->rk, l, timeout_ms);
    for (int i = 0; !e && i < l->cnt; i++)
        if (l->elems[i].err)
            e = l->elems[i].err;
    if (e) {
        rc = werr(err, is_conn_err(e) ? SQLSTATE_CONNECTION_FAILURE : SQLSTATE_IO_ERROR, 0,
                  "could not look up the offsets for a timestamp in kafka topic \"%s\": %s", s->topic,
                  rd_kafka_err2str(e));
    } else {
        for (int i = 0; i < l->cnt; i++) {
            int32_t p = l->elems[i].partition;
            if (p >= 0 && p < s->n_parts)
                out[p] = l->elems[i].offset >= 0 ? l->elems[i].offset : RT_KAFKA_LATEST;
        }
    }
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

bool rt_kafka_source_cached_offsets(RtKafkaSource *s, int32_t partition, int64_t *lo, int64_t *hi)
{
    if (partition < 0 || partition >= s->n_parts)
        return false;
    return rd_kafka_get_watermark_offsets(s->rk, s->topic, partition, lo, hi) == RD_KAFKA_RESP_ERR_NO_ERROR &&
           *hi >= 0;
}

/* Whether the broker answers a metadata listing, and what it says of the
 * topic: a partition count, RT_KAFKA_TOPIC_MISSING, or
 * RT_KAFKA_TOPIC_UNREACHABLE (no answer: as today, only waiting helps). */
static int watch_once(RtKafkaSource *s, int timeout_ms)
{
    const struct rd_kafka_metadata *md = NULL;
    if (rd_kafka_metadata(s->rk, 1, NULL, &md, timeout_ms))
        return RT_KAFKA_TOPIC_UNREACHABLE;
    int n = RT_KAFKA_TOPIC_MISSING;
    for (int i = 0; i < md->topic_cnt; i++)
        if (!strcmp(md->topics[i].topic, s->topic) && !md->topics[i].err && md->topics[i].partition_cnt > 0)
            n = md->topics[i].partition_cnt;
    rd_kafka_metadata_destroy(md);
    return n;
}

static void *watch_main(void *arg)
{
    RtKafkaSource *s = arg;
    pthread_setname_np(pthread_self(), "weir-topicwatch");
    pthread_mutex_lock(&s->watch_lock);
    while (!s->stop) {
        pthread_mutex_unlock(&s->watch_lock);
        /* Short, because close joins this thread (on the engine thread): no
         * answer in WATCH_TIMEOUT_MS only means "unreachable", never a verdict. */
        int st = watch_once(s, WATCH_TIMEOUT_MS);
        pthread_mutex_lock(&s->watch_lock);
        if (st != s->topic_state) {
            s->topic_state = st;
            s->state_since_ms = now_ms();
        }
        if (st != RT_KAFKA_TOPIC_UNREACHABLE && st < s->n_parts) /* n_parts changes under watch_lock */
            s->shrank = true;
        if (s->stop)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = ts.tv_nsec + (int64_t)(s->watch_ms % 1000) * 1000000;
        ts.tv_sec += s->watch_ms / 1000 + ns / 1000000000;
        ts.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&s->watch_cond, &s->watch_lock, &ts);
    }
    pthread_mutex_unlock(&s->watch_lock);
    return NULL;
}

int rt_kafka_source_watch(RtKafkaSource *s, int interval_ms, WError *err)
{
    if (s->watching)
        return 0;
    s->watch_ms = interval_ms > 0 ? interval_ms : 1000;
    s->topic_state = s->n_parts;
    s->state_since_ms = now_ms();
    pthread_mutex_init(&s->watch_lock, NULL);
    pthread_cond_init(&s->watch_cond, NULL);
    if (pthread_create(&s->watcher, NULL, watch_main, s)) {
        pthread_cond_destroy(&s->watch_cond);
        pthread_mutex_destroy(&s->watch_lock);
        return werr(err, SQLSTATE_OUT_OF_MEMORY, 0, "cannot start the watcher of kafka topic \"%s\"", s->topic);
    }
    s->watching = true;
    return 0;
}

int rt_kafka_source_topic_state(RtKafkaSource *s, int64_t *since_ms)
{
    if (!s->watching) {
        *since_ms = 0;
        return s->n_parts;
    }
    pthread_mutex_lock(&s->watch_lock);
    int st = s->topic_state;
    *since_ms = s->state_since_ms;
    pthread_mutex_unlock(&s->watch_lock);
    return st;
}

int64_t rt_kafka_now_ms(void)
{
    return now_ms();
}

/* The consumer's end: unassign, close, destroy, free. */
static void source_free(RtKafkaSource *s)
{
    release_held(s);
    if (s->q)
        rd_kafka_queue_destroy(s->q);
    if (s->rk) {
        /* Unassign, then leave: with no subscription nothing is committed. */
        rd_kafka_assign(s->rk, NULL);
        rd_kafka_consumer_close(s->rk);
        rd_kafka_destroy(s->rk);
    }
    free(s->held);
    free(s->at_end);
    free(s->gap);
    free(s->topic);
    free(s);
}

static void *source_free_main(void *arg)
{
    pthread_setname_np(pthread_self(), "weir-kafkaclose");
    source_free(arg);
    return NULL;
}

void rt_kafka_source_close(RtKafkaSource *s)
{
    if (!s)
        return;
    if (s->watching) {
        pthread_mutex_lock(&s->watch_lock);
        s->stop = true;
        pthread_cond_signal(&s->watch_cond);
        pthread_mutex_unlock(&s->watch_lock);
        pthread_join(s->watcher, NULL);
        pthread_cond_destroy(&s->watch_cond);
        pthread_mutex_destroy(&s->watch_lock);
    }
    /* librdkafka 2.0's rd_kafka_destroy never returns once partitions it
     * had assigned left the topic (a broker thread keeps a reference to
     * them): such a consumer is destroyed on a thread of its own, which
     * may stay blocked (a handle and its threads leak, once per lost
     * topic) rather than the caller, the engine thread. */
    pthread_t t;
    pthread_attr_t at;
    if (s->shrank && !pthread_attr_init(&at)) {
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int e = pthread_create(&t, &at, source_free_main, s);
        pthread_attr_destroy(&at);
        if (!e)
            return;
    }
    source_free(s);
}

/* --- producer --- */

static void dr_msg_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    RtKafkaProducer *p = opaque;
    if (!m->err) {
        p->n_acked++;
        return;
    }
    if (p->n_failed++ == 0) {
        p->fail_err = m->err;
        snprintf(p->fail_topic, sizeof p->fail_topic, "%s", rd_kafka_topic_name(m->rkt));
        p->fail_partition = m->partition;
    }
}

int rt_kafka_producer_open(const char *bootstrap, const RtKafkaProp *props, int n_props,
                           RtKafkaProducer **out, WError *err)
{
    static const char *const defs[] = {
        "linger.ms", "5",
        "socket.nagle.disable", "true",
        "log_level", "3",
        "log.connection.close", "false",
        NULL,
    };
    char errstr[512];
    RtKafkaProducer *p;
    rd_kafka_conf_t *conf;

    *out = NULL;
    if (!(conf = conf_build(bootstrap, defs, props, n_props, err)))
        return -1;
    p = xcalloc(1, sizeof *p);
    for (int i = 0; i < n_props; i++)
        if (!strcmp(props[i].key, "transactional.id"))
            p->transactional = true;
    rd_kafka_conf_set_dr_msg_cb(conf, dr_msg_cb);
    rd_kafka_conf_set_opaque(conf, p);
    if (!(p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr))) {
        rd_kafka_conf_destroy(conf);
        free(p);
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "could not create kafka producer: %s",
                    errstr);
    }
    *out = p;
    return 0;
}

int rt_kafka_produce(RtKafkaProducer *p, const char *topic, int32_t partition, const void *key,
                     size_t klen, const void *val, size_t vlen, WError *err)
{
    return rt_kafka_produce_headers(p, topic, partition, key, klen, val, vlen, NULL, 0, err);
}

int rt_kafka_produce_headers(RtKafkaProducer *p, const char *topic, int32_t partition, const void *key,
                             size_t klen, const void *val, size_t vlen, const RtKafkaProp *headers,
                             int n_headers, WError *err)
{
    rd_kafka_resp_err_t e;
    if (FAULT("kafka_produce"))
        return werr(err, SQLSTATE_IO_ERROR, 0, "could not produce to kafka topic \"%s\": %s", topic,
                    rd_kafka_err2str(RD_KAFKA_RESP_ERR__TRANSPORT));
    for (;;) {
        /* librdkafka takes the headers on success only. */
        rd_kafka_headers_t *hdrs = NULL;
        if (n_headers > 0) {
            hdrs = rd_kafka_headers_new((size_t)n_headers);
            for (int i = 0; i < n_headers; i++)
                rd_kafka_header_add(hdrs, headers[i].key, -1, headers[i].value, -1);
        }
        if (hdrs)
            e = rd_kafka_producev(p->rk, RD_KAFKA_V_TOPIC(topic),
                                  RD_KAFKA_V_PARTITION(partition < 0 ? RD_KAFKA_PARTITION_UA
                                                                     : partition),
                                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                  RD_KAFKA_V_KEY(key, key ? klen : 0),
                                  RD_KAFKA_V_VALUE((void *)val, val ? vlen : 0),
                                  RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
        else
            e = rd_kafka_producev(p->rk, RD_KAFKA_V_TOPIC(topic),
                                  RD_KAFKA_V_PARTITION(partition < 0 ? RD_KAFKA_PARTITION_UA
                                                                     : partition),
                                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                  RD_KAFKA_V_KEY(key, key ? klen : 0),
                                  RD_KAFKA_V_VALUE((void *)val, val ? vlen : 0), RD_KAFKA_V_END);
        if (e && hdrs)
            rd_kafka_headers_destroy(hdrs);
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            break;
        /* Backpressure: wait for deliveries to make room. */
        rd_kafka_poll(p->rk, 50);
    }
    if (e)
        return werr(err, SQLSTATE_IO_ERROR, 0, "could not produce to kafka topic \"%s\": %s",
                    topic, rd_kafka_err2str(e));
    rd_kafka_poll(p->rk, 0); /* serve delivery reports */
    return 0;
}

int rt_kafka_producer_flush(RtKafkaProducer *p, int timeout_ms, WError *err)
{
    rd_kafka_resp_err_t e = FAULT("kafka_flush") ? RD_KAFKA_RESP_ERR__TIMED_OUT : rd_kafka_flush(p->rk, timeout_ms);
    if (e == RD_KAFKA_RESP_ERR__TIMED_OUT) {
        werr(err, SQLSTATE_CONNECTION_FAILURE, 0,
             "%d kafka records still undelivered after %d ms", rd_kafka_outq_len(p->rk),
             timeout_ms);
        return RT_KAFKA_ERR_RETRIABLE;
    }
    if (p->n_failed) {
        werr(err, SQLSTATE_IO_ERROR, 0,
             "kafka delivery to \"%s\" partition %d failed: %s", p->fail_topic,
             (int)p->fail_partition, rd_kafka_err2str(p->fail_err));
        if (p->n_failed > 1)
            werr_detail(err, "%ld records failed since the last flush.", p->n_failed);
        p->n_failed = 0;
        p->fail_err = 0;
        return RT_KAFKA_ERR;
    }
    return 0;
}

long rt_kafka_producer_acked(RtKafkaProducer *p)
{
    rd_kafka_poll(p->rk, 0); /* serve the delivery reports that arrived */
    return p->n_acked;
}

int rt_kafka_producer_purge(RtKafkaProducer *p)
{
    /* Queued records are removed before any broker thread can put them in
     * a request (the purge is synchronous); their delivery reports fail
     * with _PURGE_QUEUE. What is left unreported after serving those was
     * already sent. */
    rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE);
    rd_kafka_poll(p->rk, 0);
    int in_flight = rd_kafka_outq_len(p->rk);
    if (in_flight > 0) {
        rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_INFLIGHT); /* no retries of them */
        rd_kafka_poll(p->rk, 0);
    }
    p->n_failed = 0;
    p->fail_err = 0;
    return in_flight;
}

/* Maps a librdkafka transaction error to RT_KAFKA_ERR_* and takes e. */
static int txn_result(rd_kafka_error_t *e, const char *what, WError *err)
{
    if (!e)
        return 0;
    int rc = rd_kafka_error_is_fatal(e)              ? RT_KAFKA_ERR_FATAL
             : rd_kafka_error_txn_requires_abort(e) ? RT_KAFKA_ERR_ABORTABLE
             : rd_kafka_error_is_retriable(e)        ? RT_KAFKA_ERR_RETRIABLE
                                                     : RT_KAFKA_ERR;
    rd_kafka_resp_err_t code = rd_kafka_error_code(e);
    werr(err, is_conn_err(code) ? SQLSTATE_CONNECTION_FAILURE : SQLSTATE_IO_ERROR, 0,
         "kafka %s failed: %s", what, rd_kafka_error_string(e));
    if (rc == RT_KAFKA_ERR_ABORTABLE)
        werr_hint(err, "Abort the transaction and retry.");
    else if (rc == RT_KAFKA_ERR_FATAL)
        werr_hint(err, "The producer is unusable (perhaps fenced by another with the same "
                       "transactional.id); reopen it.");
    rd_kafka_error_destroy(e);
    return rc;
}

int rt_kafka_producer_init_txn(RtKafkaProducer *p, int timeout_ms, WError *err)
{
    if (!p->transactional)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                    "kafka transactions need a \"transactional.id\" property");
    return txn_result(rd_kafka_init_transactions(p->rk, timeout_ms), "init transactions", err);
}

int rt_kafka_producer_begin_txn(RtKafkaProducer *p, WError *err)
{
    /* librdkafka's begin_transaction has no timeout and was seen waiting
     * forever on a producer that had already failed fatally (fenced by a
     * second server with the same transactional.id): ask first. */
    char why[256];
    rd_kafka_resp_err_t fe = rd_kafka_fatal_error(p->rk, why, sizeof why);
    if (fe) {
        werr(err, SQLSTATE_IO_ERROR, 0, "kafka begin transaction failed: %s", why);
        werr_hint(err, "The producer is unusable (perhaps fenced by another with the same "
                       "transactional.id); reopen it.");
        return RT_KAFKA_ERR_FATAL;
    }
    return txn_result(FAULT("kafka_txn_begin") ? rd_kafka_error_new(RD_KAFKA_RESP_ERR__STATE, "injected fault")
                                                : rd_kafka_begin_transaction(p->rk),
                      "begin transaction", err);
}

int rt_kafka_producer_commit_txn(RtKafkaProducer *p, int timeout_ms, WError *err)
{
    return txn_result(FAULT("kafka_txn_commit") ? rd_kafka_error_new(RD_KAFKA_RESP_ERR__TRANSPORT, "injected fault")
                                                 : rd_kafka_commit_transaction(p->rk, timeout_ms),
                      "commit transaction", err);
}

int rt_kafka_producer_abort_txn(RtKafkaProducer *p, int timeout_ms, WError *err)
{
    int rc = txn_result(rd_kafka_abort_transaction(p->rk, timeout_ms), "abort transaction", err);
    if (rc == 0) {
        /* Purged records' failures belong to the aborted transaction. */
        rd_kafka_poll(p->rk, 0);
        p->n_failed = 0;
        p->fail_err = 0;
    }
    return rc;
}

void rt_kafka_producer_close(RtKafkaProducer *p)
{
    if (!p)
        return;
    rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_poll(p->rk, 0);
    rd_kafka_destroy(p->rk);
    free(p);
}

/* --- ping --- */

/* True if a TCP connection to one of the comma-separated host:port entries
 * opens within the deadline. */
static bool tcp_probe(const char *bootstrap, int64_t deadline)
{
    char *list = xstrdup(bootstrap), *save = NULL;
    bool up = false;

    for (char *t = strtok_r(list, ",", &save); t && !up; t = strtok_r(NULL, ",", &save)) {
        char *hp = strstr(t, "://") ? strstr(t, "://") + 3 : t;
        while (*hp == ' ')
            hp++;
        char *colon = strrchr(hp, ':');
        if (!colon)
            continue;
        *colon = '\0';
        char *host = hp;
        if (host[0] == '[') {
            host++;
            char *rb = strchr(host, ']');
            if (rb)
                *rb = '\0';
        }
        struct addrinfo hints = {0}, *res = NULL;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICSERV;
        if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
            continue;
        for (struct addrinfo *ai = res; ai && !up; ai = ai->ai_next) {
            int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0)
                continue;
            if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
                up = true;
            } else if (errno == EINPROGRESS) {
                struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                int soerr = 0;
                socklen_t sl = sizeof soerr;
                if (poll(&pfd, 1, remaining_ms(deadline)) == 1 &&
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0)
                    up = true;
            }
            close(fd);
        }
        freeaddrinfo(res);
    }
    free(list);
    return up;
}

bool rt_kafka_ping(const char *bootstrap, int timeout_ms)
{
    int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    char errstr[512];
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_conf_t *conf;
    rd_kafka_t *rk;
    rd_kafka_resp_err_t e;

    if (!tcp_probe(bootstrap, deadline))
        return false;
    conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, silent_log_cb);
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, errstr, sizeof errstr) ||
        !(rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr))) {
        rd_kafka_conf_destroy(conf);
        return false;
    }
    /* Only locally known topics (none): the answer is the broker list. */
    e = rd_kafka_metadata(rk, 0, NULL, &md, remaining_ms(deadline));
    if (!e)
        rd_kafka_metadata_destroy(md);
    rd_kafka_destroy(rk);
    return e == RD_KAFKA_RESP_ERR_NO_ERROR;
}
