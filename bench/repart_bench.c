/*
 * repart_bench.c: the cost per row of a repartition topic (runtime/repart.c)
 * against the in-process exchange, on this machine.
 *
 *   build/bench/repart_bench [ROWS] [KEY_GROUPS]     (default 1000000 128)
 *
 * Rows are shaped like Nexmark bids (auction, bidder, price, channel,
 * date_time), keyed by auction. Three measurements:
 *   exchange  the in-process exchange's per-row work: op_exchange.c's route
 *             (value_hash over the key, mixed, % P) and copy_rows into the
 *             target shard's chunk, P = 2, a chunk of 1024 rows at a time
 *             (the two steps are static in op_exchange.c, so they are
 *             repeated here in the same form);
 *   write     rt_repart_writer_push of every row, a watermark and a barrier
 *             every 100 chunks and a sync (the checkpoint's wait) at each;
 *   e2e       the writer in a thread and a reader of every partition in the
 *             main thread at once, through an embedded broker in this
 *             process (rt_broker_start, the code of `weir broker`): wall
 *             time from the first push to the last row read.
 * Each prints rows/s, and µs/row of wall and of this process's CPU (all
 * threads: writer, reader, librdkafka's and the broker's). Nothing here
 * fails on a number; it is not a test.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "broker.h"
#include "chunk.h"
#include "repart.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static const TypeId TYPES[] = {TYPE_INT8, TYPE_INT8, TYPE_INT8, TYPE_TEXT, TYPE_TIMESTAMP};
#define NCOLS 5
#define CHUNK 1024

static long n_rows;
static int G;
/* The input: NPRE chunks made once and cycled, so no measurement times
 * the generator. */
#define NPRE 256
static Chunk *pre[NPRE];
static uint16_t pre_kg[NPRE][CHUNK];
static char addr[128], topic[128];

/* Chunk number k of the input (rows k*CHUNK ...), in a. */
static Chunk *make_chunk(Arena *a, long k, uint16_t *kg)
{
    static const char *chan[] = {"apple", "google", "facebook", "baidu"};
    Chunk *c = chunk_new(a, NCOLS, TYPES, CHUNK);
    for (long i = k * CHUNK; c->n_rows < CHUNK; i++) {
        int64_t auction = 1000 + (int64_t)(hash_u64((uint64_t)i) % 10000);
        Value v[NCOLS] = {value_int(TYPE_INT8, auction), value_int(TYPE_INT8, i % 7919),
                          value_int(TYPE_INT8, 100 + i % 50000), value_str(TYPE_TEXT, chan[i % 4], strlen(chan[i % 4])),
                          value_int(TYPE_TIMESTAMP, 1700000000000000 + i * 100)};
        if (kg) {
            Value key = v[0];
            kg[c->n_rows] = (uint16_t)(hash_u64(value_hash(&key, UINT64_C(0x9e3779b97f4a7c15))) % (uint64_t)G);
        }
        chunk_append(c, OP_INSERT, v);
    }
    return c;
}

/* ---- the exchange's per-row work (op_exchange.c: route, copy_rows) ---- */

static void exchange_chunk(Arena *out, const Chunk *c, int P)
{
    uint64_t h[CHUNK];
    int target[CHUNK], rows[CHUNK];
    for (int r = 0; r < c->n_rows; r++)
        h[r] = UINT64_C(0x9e3779b97f4a7c15);
    const Column *col = &c->cols[0];
    for (int r = 0; r < c->n_rows; r++)
        h[r] = col->nulls[r] ? hash_u64(h[r] ^ UINT64_C(0x5bd1e995)) : hash_u64(h[r] ^ (uint64_t)col->v.i[r]);
    for (int r = 0; r < c->n_rows; r++)
        target[r] = (int)(hash_u64(h[r] ^ UINT64_C(0x2545f4914f6cdd1d)) % (uint64_t)P);
    for (int t = 0; t < P; t++) {
        int m = 0;
        for (int r = 0; r < c->n_rows; r++)
            if (target[r] == t)
                rows[m++] = r;
        Chunk *o = chunk_new(out, c->n_cols, TYPES, m ? m : 1);
        for (int i = 0; i < c->n_cols; i++) {
            const Column *s = &c->cols[i];
            Column *d = &o->cols[i];
            for (int j = 0; j < m; j++)
                d->nulls[j] = s->nulls[rows[j]];
            if (type_phys(s->type) == PHYS_STR) {
                for (int j = 0; j < m; j++) {
                    StrRef sr = s->v.s[rows[j]];
                    char *p = arena_alloc(out, sr.len + 1);
                    memcpy(p, sr.p, sr.len);
                    p[sr.len] = 0;
                    d->v.s[j] = (StrRef){p, sr.len};
                }
            } else {
                for (int j = 0; j < m; j++)
                    d->v.i[j] = s->v.i[rows[j]];
            }
        }
        for (int j = 0; j < m; j++)
            o->ops[j] = c->ops[rows[j]];
        o->n_rows = m;
    }
}

static void report(const char *what, double wall, double cpu)
{
    printf("%-9s %10.0f rows/s  %7.3f us/row wall  %7.3f us/row cpu\n", what, n_rows / wall, wall * 1e6 / n_rows,
           cpu * 1e6 / n_rows);
}

/* ---- writer thread ---- */

static int writer_rc;

static RtRepartWriter *writer_open(void)
{
    WError e = {0};
    uint32_t task = 0;
    RtRepartWriter *w;
    if (rt_repart_writer_open(addr, topic, G, &task, NULL, 1, 1, 10000, &w, &e)) {
        fprintf(stderr, "writer: %s\n", e.msg);
        exit(1);
    }
    return w;
}

static void *writer_main(void *arg)
{
    RtRepartWriter *w = arg;
    WError e = {0};
    long chunks = n_rows / CHUNK;
    for (long k = 0; k < chunks; k++) {
        if (rt_repart_writer_push(w, 0, pre[k % NPRE], pre_kg[k % NPRE], &e))
            break;
        if (k % 100 == 99 || k == chunks - 1) {
            uint64_t ep = rt_repart_writer_epoch(w);
            if (rt_repart_writer_watermark(w, 0, 1700000000000000 + k * CHUNK * 100, &e) ||
                rt_repart_writer_barrier(w, ep, &e) || rt_repart_writer_sync(w, 60000, &e))
                break;
        }
    }
    if (e.set) {
        fprintf(stderr, "writer: %s\n", e.msg);
        writer_rc = 1;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    n_rows = argc > 1 ? atol(argv[1]) : 1000000;
    G = argc > 2 ? atoi(argv[2]) : 128;
    WError e = {0};
    RtBroker *b;
    if (rt_broker_start("127.0.0.1:0", 1, &b, addr, sizeof addr, &e)) {
        fprintf(stderr, "broker: %s\n", e.msg);
        return 1;
    }
    printf("# %ld rows of 5 columns (a Nexmark bid), key groups %d, chunks of %d\n", n_rows, G, CHUNK);

    n_rows -= n_rows % CHUNK;
    Arena *in = arena_new(0), *a = arena_new(0), *out = arena_new(0);
    for (int k = 0; k < NPRE; k++)
        pre[k] = make_chunk(in, k, pre_kg[k]);
    long chunks = n_rows / CHUNK;

    /* The exchange's work per chunk. */
    double t0 = now_s(), c0 = cpu_s();
    for (long k = 0; k < chunks; k++) {
        exchange_chunk(out, pre[k % NPRE], 2);
        arena_reset(out);
    }
    report("exchange", now_s() - t0, cpu_s() - c0);

    /* The writer alone (opened, and its topic made, before the clock). */
    WError te = {0};
    rt_repart_topic_name(topic, sizeof topic, "bench", 1, 1, &te);
    RtRepartWriter *w = writer_open();
    t0 = now_s();
    c0 = cpu_s();
    writer_main(w);
    if (writer_rc)
        return 1;
    report("write", now_s() - t0, cpu_s() - c0);
    rt_repart_writer_close(w);

    /* Writer and reader at once, on a fresh topic. */
    rt_repart_topic_name(topic, sizeof topic, "bench", 2, 1, &te);
    RtRepartReader *r;
    if (rt_repart_reader_open(addr, topic, G, 1, TYPES, NCOLS, 10000, &r, &e)) {
        fprintf(stderr, "reader: %s\n", e.msg);
        return 1;
    }
    int32_t *all = malloc(sizeof(int32_t) * (size_t)G);
    for (int p = 0; p < G; p++)
        all[p] = p;
    rt_repart_reader_assign(r, G, all, &e);
    w = writer_open();
    t0 = now_s();
    c0 = cpu_s();
    pthread_t th;
    pthread_create(&th, NULL, writer_main, w);
    long got = 0;
    double last = now_s();
    while (got < n_rows && now_s() - last < 30) {
        Chunk *d = chunk_new(a, NCOLS, TYPES, CHUNK);
        int n = rt_repart_reader_poll(r, 100, d, &e);
        if (n < 0) {
            fprintf(stderr, "reader: %s\n", e.msg);
            return 1;
        }
        if (d->n_rows)
            last = now_s();
        got += d->n_rows;
        arena_reset(a);
    }
    double wall = now_s() - t0, cpu = cpu_s() - c0;
    pthread_join(th, NULL);
    if (got != n_rows) {
        fprintf(stderr, "reader: %ld rows of %ld\n", got, n_rows);
        return 1;
    }
    rt_repart_writer_close(w);
    report("e2e", wall, cpu);
    printf("# e2e aligned epoch %llu, watermark %lld\n", (unsigned long long)rt_repart_reader_aligned_epoch(r),
           (long long)rt_repart_reader_watermark(r));
    rt_repart_reader_close(r);
    rt_broker_stop(b);
    arena_free(a);
    arena_free(out);
    arena_free(in);
    free(all);
    return 0;
}
