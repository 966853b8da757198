/*
 * test_sink_kafka.c: the Kafka sink writer against the embedded broker,
 * started in-process on a free port. Writes epochs in each format, reads
 * the topics back with rt_kafka_source_*, and checks progress, recovery
 * (last_epoch after reopen, replayed epochs are no-ops), the abort path
 * and option/connection errors.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "broker.h"
#include "kafka.h"
#include "sink.h"
#include "tap.h"
#include "clock.h"

static char addr[128];

/* A loopback port nothing listens on (bound, then closed). */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    bind(fd, (struct sockaddr *)&sa, sizeof sa);
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    close(fd);
    return ntohs(sa.sin_port);
}

/* ---- specs and rows ---- */

static const char *const col_names[] = {"id", "name", "amount"};
static const TypeId col_types[] = {TYPE_INT8, TYPE_TEXT, TYPE_FLOAT8};
static const int pk0[] = {0};

typedef struct Spec {
    CatOption opts[8];
    RtSinkSpec spec;
} Spec;

/* A spec for sink name writing to topic; extra options as key/value pairs
 * (NULL-terminated). bootstrap NULL leaves that option out. */
static const RtSinkSpec *mkspec(Spec *s, const char *name, const char *format, bool pk,
                                const char *topic, const char *bootstrap, ...)
{
    va_list ap;
    int n = 0;
    memset(s, 0, sizeof *s);
    s->opts[n++] = (CatOption){"connector", "kafka"};
    if (topic)
        s->opts[n++] = (CatOption){"TOPIC", topic};
    if (bootstrap)
        s->opts[n++] = (CatOption){"properties.bootstrap.server", bootstrap};
    va_start(ap, bootstrap);
    for (const char *k; (k = va_arg(ap, const char *)) && n < 8;) {
        const char *v = va_arg(ap, const char *);
        s->opts[n++] = (CatOption){k, v};
    }
    va_end(ap);
    s->spec = (RtSinkSpec){.name = name, .n_options = n, .options = s->opts, .format = format,
                           .n_cols = 3, .col_names = col_names, .col_types = col_types,
                           .n_pk = pk ? 1 : 0, .pk = pk0, .upsert = pk};
    return &s->spec;
}

typedef struct Row {
    Value v[3];
} Row;

static Row row(int64_t id, const char *name, double amount)
{
    Row r = {{value_int(TYPE_INT8, id), value_str(TYPE_TEXT, name, strlen(name)),
              value_float(TYPE_FLOAT8, amount)}};
    return r;
}

/* ---- reading a topic back ---- */

typedef struct Rec {
    int32_t partition;
    int64_t offset;
    char *key;  /* NULL: no key */
    char *val;  /* NULL: tombstone */
} Rec;

typedef struct Recs {
    int n;
    Rec r[256];
} Recs;

static void recs_free(Recs *rs)
{
    for (int i = 0; i < rs->n; i++) {
        free(rs->r[i].key);
        free(rs->r[i].val);
    }
    rs->n = 0;
}

static char *dup_or_null(const void *p, size_t n)
{
    if (!p)
        return NULL;
    char *s = malloc(n + 1);
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

/* Reads all of topic from the beginning to its end offsets. -1 on error. */
static int read_topic(const char *topic, Recs *rs)
{
    WError err;
    RtKafkaSource *s = NULL;
    RtKafkaRecord recs[64];
    int32_t parts[16];
    int64_t offs[16], end[16], next[16] = {0};
    int rc = -1;

    werr_clear(&err);
    rs->n = 0;
    if (rt_kafka_source_open(addr, topic, 0, NULL, 0, 5000, &s, &err) < 0) {
        diag("read_topic %s: %s", topic, err.msg);
        return -1;
    }
    int np = rt_kafka_source_partition_count(s);
    for (int i = 0; i < np; i++) {
        parts[i] = i;
        offs[i] = RT_KAFKA_EARLIEST;
    }
    if (rt_kafka_source_end_offsets(s, end, 5000, &err) < 0 ||
        rt_kafka_source_assign(s, np, parts, offs, &err) < 0)
        goto out;
    int64_t deadline = clock_mono_ms() + 10000;
    for (;;) {
        bool done = true;
        for (int i = 0; i < np; i++)
            if (next[i] < end[i] && !rt_kafka_source_at_end(s, i))
                done = false;
        if (done)
            break;
        if (clock_mono_ms() > deadline)
            goto out;
        int n = rt_kafka_source_poll(s, 100, recs, 64);
        if (n < 0)
            goto out;
        for (int i = 0; i < n && rs->n < 256; i++) {
            Rec *r = &rs->r[rs->n++];
            r->partition = recs[i].partition;
            r->offset = recs[i].offset;
            r->key = dup_or_null(recs[i].key, recs[i].key_len);
            r->val = dup_or_null(recs[i].value, recs[i].value_len);
            if (recs[i].offset + 1 > next[recs[i].partition])
                next[recs[i].partition] = recs[i].offset + 1;
        }
    }
    rc = rs->n;
out:
    rt_kafka_source_close(s);
    return rc;
}

/* The record with this key at the highest offset (keys stay in one
 * partition), or NULL. */
static const Rec *last_for(const Recs *rs, const char *key)
{
    const Rec *best = NULL;
    for (int i = 0; i < rs->n; i++)
        if (rs->r[i].key && strcmp(rs->r[i].key, key) == 0 &&
            (!best || rs->r[i].offset > best->offset))
            best = &rs->r[i];
    return best;
}

static int count_key(const Recs *rs, const char *key)
{
    int n = 0;
    for (int i = 0; i < rs->n; i++)
        n += rs->r[i].key && strcmp(rs->r[i].key, key) == 0;
    return n;
}

/* Records of one key in offset order (for the single-partition topics). */
static const Rec *nth_for(const Recs *rs, const char *key, int k)
{
    for (int i = 0; i < rs->n; i++)
        if (rs->r[i].key && strcmp(rs->r[i].key, key) == 0 && k-- == 0)
            return &rs->r[i];
    return NULL;
}

static int create_topic(RtBroker *b, const char *topic, int parts)
{
    WError err;
    werr_clear(&err);
    return rt_broker_create_topic(b, topic, parts, &err);
}

/* ---- the tests ---- */

static const RtSinkConnector *K = &rt_sink_kafka;

static void test_option_errors(void)
{
    Spec sp;
    WError err;
    RtSinkWriter *w = NULL;
    char dead[64];

    werr_clear(&err);
    ok(K->open(mkspec(&sp, "e1", "plain", false, NULL, addr, NULL), &w, &err) < 0 && !w,
       "missing topic fails");
    is_str(err.sqlstate, "22023", "missing topic: 22023");

    werr_clear(&err);
    ok(K->open(mkspec(&sp, "e2", "plain", false, "t", NULL, NULL), &w, &err) < 0,
       "missing bootstrap fails");
    is_str(err.sqlstate, "22023", "missing bootstrap: 22023");

    werr_clear(&err);
    ok(K->open(mkspec(&sp, "e3", "avro", false, "t", addr, NULL), &w, &err) < 0,
       "unknown format fails");
    is_str(err.sqlstate, "22023", "unknown format: 22023");

    werr_clear(&err);
    ok(K->open(mkspec(&sp, "e4", "upsert", false, "t", addr, NULL), &w, &err) < 0,
       "upsert without a primary key fails");
    is_str(err.sqlstate, "22023", "upsert without pk: 22023");

    werr_clear(&err);
    ok(K->open(mkspec(&sp, "e5", "plain", false, "t", addr, "sink.delivery-guarantee", "maybe",
                      NULL), &w, &err) < 0,
       "bad delivery guarantee fails");
    is_str(err.sqlstate, "22023", "bad delivery guarantee: 22023");

    werr_clear(&err);
    ok(K->open(mkspec(&sp, "e6", "plain", false, "t", addr, "properties.transactional.id", "x",
                      NULL), &w, &err) < 0,
       "properties.transactional.id is refused");
    is_str(err.sqlstate, "22023", "transactional.id: 22023");

    werr_clear(&err);
    ok(K->open(mkspec(&sp, "e7", "plain", false, "t", addr, "properties.no.such.prop", "1",
                      NULL), &w, &err) < 0,
       "unknown librdkafka property fails");
    is_str(err.sqlstate, "22023", "bad property: 22023");

    snprintf(dead, sizeof dead, "127.0.0.1:%d", closed_port());
    werr_clear(&err);
    int64_t t0 = clock_mono_ms();
    ok(K->open(mkspec(&sp, "e8", "plain", false, "t", dead, NULL), &w, &err) < 0 && !w,
       "unreachable broker fails");
    is_str(err.sqlstate, "08006", "unreachable broker: 08006");
    ok(clock_mono_ms() - t0 < 6000, "unreachable broker fails within 6 s");
    diag("unreachable: %s (%lld ms)", err.msg, (long long)(clock_mono_ms() - t0));
}

static void test_plain(void)
{
    Spec sp;
    WError err;
    RtSinkWriter *w = NULL;
    uint64_t last = 99;
    Recs rs = {0};
    Row a = row(1, "a", 1.5), b = row(2, "b\"q", -2), c = row(3, "c", 0.25), d = row(4, "d", 4);
    RtSinkChange e1[] = {{NULL, a.v}, {NULL, b.v}}, e2[] = {{NULL, c.v}}, e3[] = {{NULL, d.v}};
    RtSinkChange bad[] = {{NULL, d.v}, {a.v, d.v}};

    werr_clear(&err);
    ok(K->open(mkspec(&sp, "s_plain", "plain", false, "t_plain", addr, NULL), &w, &err) == 0,
       "plain: open");
    if (!w) {
        diag("%s %s", err.sqlstate, err.msg);
        return;
    }
    ok(K->last_epoch(w, &last, &err) == 0 && last == 0, "plain: last_epoch of a new sink is 0");
    ok(K->write_epoch(w, 1, 2, e1, &err) == 0, "plain: epoch 1");
    ok(K->write_epoch(w, 2, 1, e2, &err) == 0, "plain: epoch 2");
    werr_clear(&err);
    ok(K->write_epoch(w, 3, 2, bad, &err) < 0, "plain: a retraction is refused");
    is_str(err.sqlstate, "22023", "plain: retraction 22023");
    is_str(err.msg, "a FORMAT PLAIN sink needs an append-only input; use FORMAT UPSERT",
           "plain: retraction message");
    werr_clear(&err);
    ok(K->write_epoch(w, 3, 1, e3, &err) == 0, "plain: epoch 3");
    K->close(w);

    is_int(read_topic("t_plain", &rs), 4, "plain: 4 records (nothing from the refused epoch)");
    if (rs.n == 4) {
        ok(!rs.r[0].key && !rs.r[3].key, "plain: no keys");
        is_str(rs.r[0].val, "{\"id\":1,\"name\":\"a\",\"amount\":1.5}", "plain: record 1");
        is_str(rs.r[1].val, "{\"id\":2,\"name\":\"b\\\"q\",\"amount\":-2}", "plain: record 2");
        is_str(rs.r[2].val, "{\"id\":3,\"name\":\"c\",\"amount\":0.25}", "plain: record 3");
        is_str(rs.r[3].val, "{\"id\":4,\"name\":\"d\",\"amount\":4}", "plain: record 4");
    }
    recs_free(&rs);
}

static void test_upsert(void)
{
    Spec sp;
    WError err;
    RtSinkWriter *w = NULL;
    uint64_t last = 0;
    Recs rs = {0};
    Row a = row(1, "a", 1), a2 = row(1, "a2", 10), b = row(2, "b", 2), c = row(3, "c", 3),
        c2 = row(3, "c2", 30), z = row(9, "z", 9), e = row(5, "e", 5);
    RtSinkChange e1[] = {{NULL, a.v}, {NULL, b.v}};
    RtSinkChange e2[] = {{a.v, a2.v}, {b.v, NULL}, {NULL, c.v}};
    RtSinkChange e3[] = {{c.v, c2.v}};
    RtSinkChange replay[] = {{NULL, z.v}};
    RtSinkChange e4[] = {{NULL, e.v}};

    werr_clear(&err);
    ok(K->open(mkspec(&sp, "s_up", "upsert", true, "t_up", addr, NULL), &w, &err) == 0,
       "upsert: open");
    if (!w) {
        diag("%s %s", err.sqlstate, err.msg);
        return;
    }
    ok(K->write_epoch(w, 1, 2, e1, &err) == 0, "upsert: epoch 1");
    ok(K->write_epoch(w, 2, 3, e2, &err) == 0, "upsert: epoch 2 (update, delete, insert)");
    ok(K->write_epoch(w, 3, 1, e3, &err) == 0, "upsert: epoch 3");
    ok(K->write_epoch(w, 3, 1, replay, &err) == 0, "upsert: epoch 3 again is accepted");
    K->close(w);

    is_int(read_topic("t_up", &rs), 6, "upsert: 6 records");
    is_int(count_key(&rs, "{\"id\":1}"), 2, "upsert: key {\"id\":1} twice");
    const Rec *r = last_for(&rs, "{\"id\":1}");
    ok(r && r->val && !strcmp(r->val, "{\"id\":1,\"name\":\"a2\",\"amount\":10}"),
       "upsert: id 1 updated");
    r = last_for(&rs, "{\"id\":2}");
    ok(r && !r->val, "upsert: id 2 deleted with a tombstone");
    r = last_for(&rs, "{\"id\":3}");
    ok(r && r->val && !strcmp(r->val, "{\"id\":3,\"name\":\"c2\",\"amount\":30}"),
       "upsert: id 3 updated");
    ok(!last_for(&rs, "{\"id\":9}"), "upsert: the replayed epoch wrote nothing");
    recs_free(&rs);

    /* Recovery: a new writer learns the progress from the control topic. */
    werr_clear(&err);
    ok(K->open(mkspec(&sp, "s_up", "upsert", true, "t_up", addr, NULL), &w, &err) == 0,
       "upsert: reopen");
    if (!w)
        return;
    ok(K->last_epoch(w, &last, &err) == 0, "upsert: last_epoch after reopen");
    is_int(last, 3, "upsert: last_epoch is 3");
    ok(K->write_epoch(w, 2, 1, replay, &err) == 0, "upsert: re-writing epoch 2 succeeds");
    is_int(read_topic("t_up", &rs), 6, "upsert: re-written epoch 2 is a no-op");
    recs_free(&rs);
    ok(K->write_epoch(w, 4, 1, e4, &err) == 0, "upsert: epoch 4");
    is_int(read_topic("t_up", &rs), 7, "upsert: epoch 4 added one record");
    r = last_for(&rs, "{\"id\":5}");
    ok(r && r->val && !strcmp(r->val, "{\"id\":5,\"name\":\"e\",\"amount\":5}"),
       "upsert: epoch 4 record");
    recs_free(&rs);
    K->close(w);

    /* Without calling last_epoch, a replayed epoch is still skipped. */
    werr_clear(&err);
    ok(K->open(mkspec(&sp, "s_up", "upsert", true, "t_up", addr, NULL), &w, &err) == 0,
       "upsert: reopen again");
    if (!w)
        return;
    ok(K->write_epoch(w, 4, 1, replay, &err) == 0, "upsert: epoch 4 replayed without last_epoch");
    is_int(read_topic("t_up", &rs), 7, "upsert: ... is a no-op");
    recs_free(&rs);
    K->close(w);
}

static void test_debezium(void)
{
    Spec sp;
    WError err;
    RtSinkWriter *w = NULL;
    Recs rs = {0};
    Row a = row(1, "a", 1), a2 = row(1, "a2", 2);
    RtSinkChange e1[] = {{NULL, a.v}}, e2[] = {{a.v, a2.v}}, e3[] = {{a2.v, NULL}};
    RtSinkChange none[] = {{NULL, NULL}};

    werr_clear(&err);
    ok(K->open(mkspec(&sp, "s_dbz", "DEBEZIUM", true, "t_dbz", addr, NULL), &w, &err) == 0,
       "debezium: open");
    if (!w) {
        diag("%s %s", err.sqlstate, err.msg);
        return;
    }
    ok(K->write_epoch(w, 1, 1, e1, &err) == 0, "debezium: epoch 1 (insert)");
    ok(K->write_epoch(w, 2, 1, e2, &err) == 0, "debezium: epoch 2 (update)");
    ok(K->write_epoch(w, 3, 1, e3, &err) == 0, "debezium: epoch 3 (delete)");
    ok(K->write_epoch(w, 4, 1, none, &err) == 0, "debezium: epoch 4 (nothing to write)");
    K->close(w);

    is_int(read_topic("t_dbz", &rs), 3, "debezium: 3 records");
    const char *k = "{\"id\":1}";
    const Rec *r = nth_for(&rs, k, 0);
    is_str(r ? r->val : NULL,
           "{\"before\":null,\"after\":{\"id\":1,\"name\":\"a\",\"amount\":1},\"op\":\"c\","
           "\"source\":{\"sink\":\"s_dbz\",\"epoch\":1}}",
           "debezium: create");
    r = nth_for(&rs, k, 1);
    is_str(r ? r->val : NULL,
           "{\"before\":{\"id\":1,\"name\":\"a\",\"amount\":1},"
           "\"after\":{\"id\":1,\"name\":\"a2\",\"amount\":2},\"op\":\"u\","
           "\"source\":{\"sink\":\"s_dbz\",\"epoch\":2}}",
           "debezium: update");
    r = nth_for(&rs, k, 2);
    is_str(r ? r->val : NULL,
           "{\"before\":{\"id\":1,\"name\":\"a2\",\"amount\":2},\"after\":null,\"op\":\"d\","
           "\"source\":{\"sink\":\"s_dbz\",\"epoch\":3}}",
           "debezium: delete");
    recs_free(&rs);
}

static void test_at_least_once(void)
{
    Spec sp;
    WError err;
    RtSinkWriter *w = NULL;
    uint64_t last = 0;
    Recs rs = {0};
    Row a = row(1, "a", 1), b = row(2, "b", 2);
    RtSinkChange e1[] = {{NULL, a.v}}, e2[] = {{NULL, b.v}};

    werr_clear(&err);
    ok(K->open(mkspec(&sp, "s_alo", "plain", false, "t_alo", addr, "sink.delivery-guarantee",
                      "AT-LEAST-ONCE", NULL), &w, &err) == 0,
       "at-least-once: open");
    if (!w) {
        diag("%s %s", err.sqlstate, err.msg);
        return;
    }
    ok(K->write_epoch(w, 1, 1, e1, &err) == 0, "at-least-once: epoch 1");
    ok(K->write_epoch(w, 2, 1, e2, &err) == 0, "at-least-once: epoch 2");
    K->close(w);
    ok(K->open(&sp.spec, &w, &err) == 0, "at-least-once: reopen");
    if (!w)
        return;
    ok(K->last_epoch(w, &last, &err) == 0, "at-least-once: last_epoch");
    is_int(last, 2, "at-least-once: last_epoch is 2");
    ok(K->write_epoch(w, 2, 1, e1, &err) == 0, "at-least-once: epoch 2 again");
    K->close(w);
    is_int(read_topic("t_alo", &rs), 2, "at-least-once: 2 records, the replay skipped");
    recs_free(&rs);
}

/* A record over message.max.bytes fails in the middle of the epoch's
 * transaction: it is aborted, and the retry of the epoch goes through. */
static void test_abort(void)
{
    Spec sp;
    WError err;
    RtSinkWriter *w = NULL;
    uint64_t last = 0;
    Recs rs = {0};
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    Row a = row(1, "a", 1), huge = row(2, big, 2), b = row(2, "b", 2);
    RtSinkChange bad[] = {{NULL, huge.v}, {NULL, a.v}}, good[] = {{NULL, a.v}, {NULL, b.v}};

    werr_clear(&err);
    ok(K->open(mkspec(&sp, "s_abort", "upsert", true, "t_abort", addr,
                      "properties.message.max.bytes", "1000", NULL), &w, &err) == 0,
       "abort: open with message.max.bytes = 1000");
    if (!w) {
        diag("%s %s", err.sqlstate, err.msg);
        return;
    }
    werr_clear(&err);
    ok(K->write_epoch(w, 1, 2, bad, &err) < 0, "abort: an oversized record fails the epoch");
    is_str(err.sqlstate, "58030", "abort: 58030");
    werr_clear(&err);
    ok(K->write_epoch(w, 1, 2, good, &err) == 0, "abort: the retried epoch commits");
    if (err.set)
        diag("%s %s", err.sqlstate, err.msg);
    ok(K->last_epoch(w, &last, &err) == 0 && last == 1, "abort: last_epoch is 1");
    K->close(w);
    is_int(read_topic("t_abort", &rs), 2, "abort: only the retry's records");
    recs_free(&rs);
}

/* A new incarnation opened while the old one is still around (a zombie
 * after a restart): its init_txn fences the old producer on a real broker
 * (the mock does not enforce fencing, so the old writer's fate is only
 * reported), and it continues from the recorded progress. */
static void test_second_incarnation(void)
{
    Spec sp;
    WError err;
    RtSinkWriter *w1 = NULL, *w2 = NULL;
    uint64_t last = 0;
    Recs rs = {0};
    Row a = row(1, "a", 1), b = row(2, "b", 2), c = row(3, "c", 3);
    RtSinkChange e1[] = {{NULL, a.v}}, e2[] = {{NULL, b.v}}, e3[] = {{NULL, c.v}};

    werr_clear(&err);
    mkspec(&sp, "s_fence", "upsert", true, "t_fence", addr, NULL);
    ok(K->open(&sp.spec, &w1, &err) == 0 && K->write_epoch(w1, 1, 1, e1, &err) == 0,
       "incarnations: first writer, epoch 1");
    ok(K->open(&sp.spec, &w2, &err) == 0, "incarnations: second writer opens");
    if (!w1 || !w2) {
        K->close(w1);
        K->close(w2);
        return;
    }
    ok(K->last_epoch(w2, &last, &err) == 0 && last == 1, "incarnations: second sees epoch 1");
    ok(K->write_epoch(w2, 2, 1, e2, &err) == 0, "incarnations: second writes epoch 2");
    werr_clear(&err);
    int rc = K->write_epoch(w1, 3, 1, e3, &err);
    diag("old writer after fencing: rc %d %s %s (a real broker fails it)", rc, err.sqlstate,
         err.msg);
    K->close(w1);
    K->close(w2);
    is_int(read_topic("t_fence", &rs), rc < 0 ? 2 : 3, "incarnations: records");
    recs_free(&rs);
}

/* The broker goes away under an open writer: the epoch fails within the
 * operation timeout and nothing is recorded. Runs last (stops the broker). */
static void test_broker_gone(RtBroker *b)
{
    Spec sp;
    WError err;
    RtSinkWriter *w = NULL;
    Row a = row(1, "a", 1);
    RtSinkChange e1[] = {{NULL, a.v}};

    werr_clear(&err);
    ok(K->open(mkspec(&sp, "s_gone", "upsert", true, "t_gone", addr, NULL), &w, &err) == 0 &&
           K->write_epoch(w, 1, 1, e1, &err) == 0,
       "broker gone: epoch 1 while it is up");
    if (!w)
        return;
    rt_broker_stop(b);
    werr_clear(&err);
    int64_t t0 = clock_mono_ms();
    ok(K->write_epoch(w, 2, 1, e1, &err) < 0, "broker gone: epoch 2 fails");
    int64_t dt = clock_mono_ms() - t0;
    ok(dt < 25000, "broker gone: ... within 25 s");
    diag("broker gone: %s %s (%lld ms)", err.sqlstate, err.msg, (long long)dt);
    ok(!strcmp(err.sqlstate, "08006") || !strcmp(err.sqlstate, "58030"),
       "broker gone: 08006 or 58030");
    t0 = clock_mono_ms();
    K->close(w);
    diag("broker gone: close took %lld ms", (long long)(clock_mono_ms() - t0));
}

static void test_progress_topic(void)
{
    Recs rs = {0};
    ok(read_topic("__weir_sink_progress", &rs) > 0, "progress topic exists and has records");
    is_int(count_key(&rs, "s_up"), 4, "progress: s_up recorded 4 epochs");
    const Rec *r = last_for(&rs, "s_up");
    is_str(r ? r->val : NULL, "4", "progress: s_up last value is \"4\"");
    is_int(count_key(&rs, "s_plain"), 3, "progress: s_plain recorded 3 epochs");
    recs_free(&rs);
}

int main(void)
{
    WError err;
    RtBroker *b = NULL;

    werr_clear(&err);
    if (rt_broker_start("127.0.0.1:0", 1, &b, addr, sizeof addr, &err) < 0) {
        printf("Bail out! broker: %s\n", err.msg);
        return 1;
    }
    ok(create_topic(b, "t_plain", 1) == 0 && create_topic(b, "t_up", 3) == 0 &&
           create_topic(b, "t_dbz", 1) == 0 && create_topic(b, "t_alo", 1) == 0 &&
           create_topic(b, "t_abort", 1) == 0 && create_topic(b, "t_fence", 1) == 0 &&
           create_topic(b, "t_gone", 1) == 0,
       "data topics created");

    test_option_errors();
    test_plain();
    test_upsert();
    test_debezium();
    test_at_least_once();
    test_abort();
    test_second_incarnation();
    test_progress_topic();
    test_broker_gone(b);

    return tap_done();
}
