/*
 * test_kafka.c: the Kafka connector against the embedded broker, started
 * in-process on a free port (all traffic bootstraps through its forwarder).
 */
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "broker.h"
#include "kafka.h"
#include "tap.h"
#include "clock.h"

#define N_RECS 1000
#define N_PARTS 3

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

/* Polls until want records arrived or timeout_ms passed; checks each value
 * against the layout produced below (record i at partition i % 3, offset
 * i / 3, value "v<i>"). Returns the count; *bad counts mismatches. */
static int read_n(RtKafkaSource *s, int want, int timeout_ms, int *seen, int *bad,
                  int64_t *min_off)
{
    RtKafkaRecord recs[128];
    int64_t deadline = clock_mono_ms() + timeout_ms;
    int got = 0;
    while (got < want && clock_mono_ms() < deadline) {
        int n = rt_kafka_source_poll(s, 100, recs, 128);
        if (n < 0)
            return n;
        for (int i = 0; i < n; i++) {
            RtKafkaRecord *r = &recs[i];
            int idx = (int)(r->offset * N_PARTS + r->partition);
            char want_v[32];
            snprintf(want_v, sizeof want_v, "v%d", idx);
            if (idx < 0 || idx >= N_RECS || r->value_len != strlen(want_v) ||
                memcmp(r->value, want_v, r->value_len) != 0 || r->timestamp_ms <= 0)
                ++*bad;
            else
                seen[idx]++;
            if (r->offset < min_off[r->partition])
                min_off[r->partition] = r->offset;
        }
        got += n;
    }
    return got;
}

int main(void)
{
    WError err;
    RtBroker *b = NULL;
    char addr[128], dead[64];
    RtKafkaSource *s = NULL;
    RtKafkaProducer *p = NULL;
    int seen[N_RECS];
    int64_t min_off[N_PARTS], end[N_PARTS];
    int bad = 0;

    werr_clear(&err);
    ok(rt_broker_start("127.0.0.1:0", 1, &b, addr, sizeof addr, &err) == 0, "broker starts");
    if (!b) {
        diag("%s", err.msg);
        return tap_done();
    }
    diag("broker at %s, mock at %s", addr, rt_broker_mock_address(b));
    ok(strncmp(addr, "127.0.0.1:", 10) == 0 && atoi(addr + 10) > 0, "port 0 picks a port");
    ok(rt_kafka_ping(addr, 3000), "ping answers");

    /* A second broker on the same port fails clearly. */
    RtBroker *b2 = NULL;
    char addr2[128];
    werr_clear(&err);
    ok(rt_broker_start(addr, 1, &b2, addr2, sizeof addr2, &err) < 0 && !b2,
       "port in use is an error");
    is_str(err.sqlstate, "58030", "port in use: sqlstate");
    ok(strstr(err.msg, "in use") != NULL, "port in use: message says so");

    /* Source creates the topic. */
    werr_clear(&err);
    ok(rt_kafka_source_open(addr, "t3", N_PARTS, NULL, 0, 5000, &s, &err) == 0,
       "source_open creates topic");
    if (!s) {
        diag("%s", err.msg);
        rt_broker_stop(b);
        return tap_done();
    }
    is_int(rt_kafka_source_partition_count(s), N_PARTS, "3 partitions");

    werr_clear(&err);
    ok(rt_broker_create_topic(b, "t3", 2, &err) < 0, "broker create of existing topic fails");
    is_str(err.sqlstate, "42710", "existing topic: sqlstate");

    /* Produce 1000 records to explicit partitions. */
    werr_clear(&err);
    ok(rt_kafka_producer_open(addr, NULL, 0, &p, &err) == 0, "producer opens");
    int prod_fail = 0;
    for (int i = 0; i < N_RECS; i++) {
        char k[32], v[32];
        snprintf(k, sizeof k, "k%d", i);
        snprintf(v, sizeof v, "v%d", i);
        if (rt_kafka_produce(p, "t3", i % N_PARTS, k, strlen(k), v, strlen(v), &err) < 0)
            prod_fail++;
    }
    is_int(prod_fail, 0, "1000 produce calls succeed");
    ok(rt_kafka_producer_flush(p, 10000, &err) == 0, "flush: all delivered");

    /* Read everything from the start. */
    int32_t parts[N_PARTS] = {0, 1, 2};
    int64_t offs[N_PARTS] = {RT_KAFKA_EARLIEST, RT_KAFKA_EARLIEST, RT_KAFKA_EARLIEST};
    ok(rt_kafka_source_assign(s, N_PARTS, parts, offs, &err) == 0, "assign from earliest");
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < N_PARTS; i++)
        min_off[i] = INT64_MAX;
    int64_t t0 = clock_mono_ms();
    int got = read_n(s, N_RECS, 15000, seen, &bad, min_off);
    diag("read %d records in %" PRId64 " ms", got, clock_mono_ms() - t0);
    is_int(got, N_RECS, "all 1000 records read");
    is_int(bad, 0, "every record has the right partition, offset, value and timestamp");
    int dup_or_missing = 0;
    for (int i = 0; i < N_RECS; i++)
        dup_or_missing += seen[i] != 1;
    is_int(dup_or_missing, 0, "each record exactly once");
    ok(min_off[0] == 0 && min_off[1] == 0 && min_off[2] == 0, "earliest starts at offset 0");

    /* Nothing more: the partitions report their end. */
    RtKafkaRecord extra[8];
    int more = 0;
    int64_t until = clock_mono_ms() + 2000;
    while (clock_mono_ms() < until && !(rt_kafka_source_at_end(s, 0) && rt_kafka_source_at_end(s, 1) &&
                                 rt_kafka_source_at_end(s, 2)))
        more += rt_kafka_source_poll(s, 50, extra, 8);
    is_int(more, 0, "no records past the end");
    ok(rt_kafka_source_at_end(s, 0) && rt_kafka_source_at_end(s, 1) &&
           rt_kafka_source_at_end(s, 2),
       "at_end for every partition");
    ok(!rt_kafka_source_at_end(s, 7), "at_end false for a partition out of range");

    werr_clear(&err);
    ok(rt_kafka_source_end_offsets(s, end, 5000, &err) == 0, "end_offsets");
    ok(end[0] == 334 && end[1] == 333 && end[2] == 333, "end offsets are 334, 333, 333");
    diag("end offsets %" PRId64 " %" PRId64 " %" PRId64, end[0], end[1], end[2]);

    /* Assign from the middle: only the rest. */
    int32_t mparts[2] = {0, 2};
    int64_t moffs[2] = {300, 330};
    ok(rt_kafka_source_assign(s, 2, mparts, moffs, &err) == 0, "assign from middle offsets");
    ok(!rt_kafka_source_at_end(s, 0), "assign clears at_end");
    memset(seen, 0, sizeof seen);
    bad = 0;
    for (int i = 0; i < N_PARTS; i++)
        min_off[i] = INT64_MAX;
    got = read_n(s, 34 + 3, 10000, seen, &bad, min_off);
    got += read_n(s, 1000, 300, seen, &bad, min_off); /* anything extra? */
    is_int(got, 37, "exactly the 37 remaining records");
    is_int(bad, 0, "remaining records are correct");
    ok(min_off[0] == 300 && min_off[2] == 330 && min_off[1] == INT64_MAX,
       "reads start at the given offsets, unassigned partition silent");

    werr_clear(&err);
    int32_t badp = 5;
    int64_t bado = 0;
    ok(rt_kafka_source_assign(s, 1, &badp, &bado, &err) < 0, "assign unknown partition fails");
    is_str(err.sqlstate, "22023", "unknown partition: sqlstate");
    ok(rt_kafka_source_assign(s, 0, NULL, NULL, &err) == 0, "unassign all");

    /* Transactions against the mock. */
    werr_clear(&err);
    ok(rt_kafka_producer_init_txn(p, 5000, &err) < 0 &&
           strcmp(err.sqlstate, "22023") == 0,
       "init_txn without transactional.id is refused");
    rt_kafka_producer_close(p);
    p = NULL;

    RtKafkaProp txprops[] = {{"transactional.id", "weir-test-txn"}};
    werr_clear(&err);
    ok(rt_kafka_producer_open(addr, txprops, 1, &p, &err) == 0, "transactional producer opens");
    int rc = rt_kafka_producer_init_txn(p, 10000, &err);
    is_int(rc, 0, "init_txn");
    if (rc)
        diag("%s", err.msg);
    ok(rt_kafka_producer_begin_txn(p, &err) == 0, "begin_txn");
    prod_fail = 0;
    for (int i = 0; i < 10; i++)
        prod_fail += rt_kafka_produce(p, "t3", 1, NULL, 0, "tx", 2, &err) < 0;
    is_int(prod_fail, 0, "produce inside the transaction");
    rc = rt_kafka_producer_commit_txn(p, 10000, &err);
    is_int(rc, 0, "commit_txn");
    if (rc)
        diag("%s", err.msg);
    ok(rt_kafka_producer_begin_txn(p, &err) == 0, "second begin_txn");
    rt_kafka_produce(p, "t3", 1, NULL, 0, "ab", 2, &err);
    rc = rt_kafka_producer_abort_txn(p, 10000, &err);
    is_int(rc, 0, "abort_txn");
    if (rc)
        diag("%s", err.msg);
    werr_clear(&err);
    ok(rt_kafka_source_end_offsets(s, end, 5000, &err) == 0 && end[1] >= 343,
       "committed records are in the log");
    rt_kafka_producer_close(p);
    p = NULL;
    rt_kafka_source_close(s);
    s = NULL;

    /* Auto-creation by a plain producer: the mock's default partition count. */
    werr_clear(&err);
    ok(rt_kafka_producer_open(addr, NULL, 0, &p, &err) == 0 &&
           rt_kafka_produce(p, "auto1", -1, "k", 1, "v", 1, &err) == 0 &&
           rt_kafka_producer_flush(p, 10000, &err) == 0,
       "produce to an unknown topic auto-creates it");
    rt_kafka_producer_close(p);
    p = NULL;
    werr_clear(&err);
    ok(rt_kafka_source_open(addr, "auto1", 0, NULL, 0, 5000, &s, &err) == 0,
       "auto-created topic opens");
    if (s)
        is_int(rt_kafka_source_partition_count(s), 1, "auto-created topic has --partitions (1)");
    rt_kafka_source_close(s);
    s = NULL;

    /* Missing topic without create. */
    werr_clear(&err);
    ok(rt_kafka_source_open(addr, "missing", 0, NULL, 0, 5000, &s, &err) < 0 && !s,
       "missing topic is an error");
    is_str(err.sqlstate, "42704", "missing topic: sqlstate");
    ok(strstr(err.msg, "\"missing\" does not exist") != NULL, "missing topic: message");
    diag("%s", err.msg);

    /* Bad property. */
    RtKafkaProp badprop[] = {{"no.such.property", "1"}};
    werr_clear(&err);
    ok(rt_kafka_source_open(addr, "t3", 0, badprop, 1, 5000, &s, &err) < 0,
       "unknown property is an error");
    is_str(err.sqlstate, "22023", "unknown property: sqlstate");

    /* Unreachable bootstrap. */
    snprintf(dead, sizeof dead, "127.0.0.1:%d", closed_port());
    werr_clear(&err);
    t0 = clock_mono_ms();
    ok(rt_kafka_source_open(dead, "t3", 0, NULL, 0, 1500, &s, &err) < 0 && !s,
       "unreachable broker is an error");
    int64_t took = clock_mono_ms() - t0;
    is_str(err.sqlstate, "08006", "unreachable: sqlstate");
    ok(took < 1500 + 1500, "unreachable: error within the timeout");
    diag("unreachable took %" PRId64 " ms: %s", took, err.msg);

    t0 = clock_mono_ms();
    ok(!rt_kafka_ping(dead, 2000), "ping a closed port is false");
    ok(clock_mono_ms() - t0 < 1000, "ping a closed port answers at once");

    rt_broker_stop(b);
    ok(!rt_kafka_ping(addr, 500), "ping false after broker stop");
    return tap_done();
}
