/*
 * serving_client.c: the load generator of bench/serving.sh, over libpq.
 *
 *   serving_client point CONNINFO CLIENTS SECONDS NKEYS
 *       CLIENTS threads, each with its own connection, run the prepared
 *       statement SELECT k, v, n FROM kv WHERE k = $1 with random keys in
 *       [0, NKEYS) for SECONDS; prints queries/s and p50/p99/max latency.
 *   serving_client range CONNINFO CLIENTS SECONDS NKEYS
 *       the same with SELECT k, v FROM kv WHERE k BETWEEN $1 AND $2 over
 *       100 consecutive keys.
 *   serving_client fanout CONNINFO SUBSCRIBERS CHANGES
 *       SUBSCRIBERS connections run COPY (SUBSCRIBE ticks_v WITH (snapshot =
 *       false)) TO STDOUT; one more connection (its own thread) then runs
 *       CHANGES times INSERT INTO ticks VALUES (i, <wall clock in us>), 50 ms
 *       apart. Each
 *       subscriber takes the time from the row it receives; prints the
 *       change latency (INSERT sent to row received) p50/p99/max over every
 *       (change, subscriber) pair and how many arrived.
 *
 * Latencies are measured around each call on the client (CLOCK_MONOTONIC
 * for queries, CLOCK_REALTIME for changes, which cross processes on one
 * machine). One line of results on stdout; errors on stderr, exit 1.
 */
#include <libpq-fe.h>

#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 1024
#define RANGE_ROWS 100

static const char *conninfo;
static int n_keys, seconds;
static int range_mode;

static double now_s(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

typedef struct Worker {
    pthread_t th;
    unsigned seed;
    double *lat;        /* seconds, one per query */
    size_t n, cap;
    long errors;
} Worker;

static void *run_queries(void *arg)
{
    Worker *w = arg;
    PGconn *c = PQconnectdb(conninfo);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "connect: %s", PQerrorMessage(c));
        w->errors++;
        PQfinish(c);
        return NULL;
    }
    const char *sql = range_mode ? "SELECT k, v FROM kv WHERE k BETWEEN $1 AND $2" : "SELECT k, v, n FROM kv WHERE k = $1";
    PGresult *r = PQprepare(c, "q", sql, range_mode ? 2 : 1, NULL);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        fprintf(stderr, "prepare: %s", PQresultErrorMessage(r));
        w->errors++;
        PQclear(r);
        PQfinish(c);
        return NULL;
    }
    PQclear(r);
    double end = now_s(CLOCK_MONOTONIC) + seconds;
    char a[32], b[32];
    const char *params[2] = {a, b};
    int want = range_mode ? RANGE_ROWS : 1;
    for (;;) {
        double t0 = now_s(CLOCK_MONOTONIC);
        if (t0 >= end)
            break;
        int k = (int)(rand_r(&w->seed) % (unsigned)(range_mode ? n_keys - RANGE_ROWS : n_keys));
        snprintf(a, sizeof a, "%d", k);
        snprintf(b, sizeof b, "%d", k + RANGE_ROWS - 1);
        r = PQexecPrepared(c, "q", range_mode ? 2 : 1, params, NULL, NULL, 0);
        double t1 = now_s(CLOCK_MONOTONIC);
        if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != want) {
            if (w->errors++ < 3)
                fprintf(stderr, "query k=%d: %s (%d rows)\n", k, PQresultErrorMessage(r), PQntuples(r));
        }
        PQclear(r);
        if (w->n == w->cap) {
            w->cap = w->cap ? w->cap * 2 : 4096;
            w->lat = realloc(w->lat, w->cap * sizeof *w->lat);
            if (!w->lat)
                abort();
        }
        w->lat[w->n++] = t1 - t0;
    }
    PQfinish(c);
    return NULL;
}

static int queries(int clients)
{
    Worker *ws = calloc((size_t)clients, sizeof *ws);
    for (int i = 0; i < clients; i++) {
        ws[i].seed = (unsigned)(i * 7919 + 17);
        pthread_create(&ws[i].th, NULL, run_queries, &ws[i]);
    }
    size_t total = 0;
    long errors = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(ws[i].th, NULL);
        total += ws[i].n;
        errors += ws[i].errors;
    }
    double *all = malloc((total ? total : 1) * sizeof *all);
    size_t k = 0;
    for (int i = 0; i < clients; i++) {
        memcpy(all + k, ws[i].lat, ws[i].n * sizeof *all);
        k += ws[i].n;
        free(ws[i].lat);
    }
    qsort(all, total, sizeof *all, cmp_double);
    printf("%-5s clients=%-3d queries/s=%-8.0f p50=%.3f ms p99=%.3f ms max=%.1f ms errors=%ld\n",
           range_mode ? "range" : "point", clients, (double)total / seconds, pct(all, total, 0.5) * 1e3,
           pct(all, total, 0.99) * 1e3, total ? all[total - 1] * 1e3 : 0.0, errors);
    free(all);
    free(ws);
    return errors ? 1 : 0;
}

/* ---- SUBSCRIBE fan-out ---------------------------------------------------------------- */

typedef struct Writer {
    pthread_t th;
    int changes;
    int failed;
    volatile int done;
} Writer;

/* One INSERT every 50 ms, on its own thread so that reading the
 * subscriptions never waits for an INSERT's answer. */
static void *write_changes(void *arg)
{
    Writer *wr = arg;
    PGconn *w = PQconnectdb(conninfo);
    if (PQstatus(w) != CONNECTION_OK) {
        fprintf(stderr, "writer: %s", PQerrorMessage(w));
        wr->failed = 1;
    }
    double next = now_s(CLOCK_MONOTONIC);
    for (int i = 0; i < wr->changes && !wr->failed; i++) {
        while (now_s(CLOCK_MONOTONIC) < next)
            usleep(1000);
        next += 0.05;
        char sql[128];
        snprintf(sql, sizeof sql, "INSERT INTO ticks VALUES (%d, %lld)", i, (long long)(now_s(CLOCK_REALTIME) * 1e6));
        PGresult *r = PQexec(w, sql);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            fprintf(stderr, "insert: %s", PQresultErrorMessage(r));
            wr->failed = 1;
        }
        PQclear(r);
    }
    PQfinish(w);
    wr->done = 1;
    return NULL;
}

static int fanout(int subs, int changes)
{
    if (subs > MAX_CLIENTS)
        return fprintf(stderr, "at most %d subscribers\n", MAX_CLIENTS), 1;
    PGconn **cs = calloc((size_t)subs, sizeof *cs);
    struct pollfd *pfd = calloc((size_t)subs, sizeof *pfd);
    for (int i = 0; i < subs; i++) {
        cs[i] = PQconnectdb(conninfo);
        if (PQstatus(cs[i]) != CONNECTION_OK)
            return fprintf(stderr, "subscriber %d: %s", i, PQerrorMessage(cs[i])), 1;
        if (!PQsendQuery(cs[i], "COPY (SUBSCRIBE ticks_v WITH (snapshot = false)) TO STDOUT"))
            return fprintf(stderr, "subscribe: %s", PQerrorMessage(cs[i])), 1;
        PGresult *r = PQgetResult(cs[i]);
        if (PQresultStatus(r) != PGRES_COPY_OUT)
            return fprintf(stderr, "subscribe: %s", PQresultErrorMessage(r)), 1;
        PQclear(r);
        PQsetnonblocking(cs[i], 1);
        pfd[i].fd = PQsocket(cs[i]);
        pfd[i].events = POLLIN;
    }
    size_t cap = (size_t)subs * (size_t)changes, n = 0;
    double *lat = malloc((cap ? cap : 1) * sizeof *lat);
    Writer wr = {.changes = changes};
    pthread_create(&wr.th, NULL, write_changes, &wr);
    double end = 0;
    while (n < cap) {
        if (wr.done && end == 0)
            end = now_s(CLOCK_MONOTONIC) + 5;   /* time for the last changes to arrive */
        if (end && now_s(CLOCK_MONOTONIC) > end)
            break;
        if (poll(pfd, (nfds_t)subs, 10) < 0)
            break;
        for (int i = 0; i < subs; i++) {
            if (!(pfd[i].revents & POLLIN))
                continue;
            PQconsumeInput(cs[i]);
            char *line;
            int len;
            while ((len = PQgetCopyData(cs[i], &line, 1)) > 0) {
                double got = now_s(CLOCK_REALTIME);
                /* epoch \t diff \t k \t v: v is the INSERT's wall clock (us) */
                long long epoch, v;
                int diff, k;
                if (sscanf(line, "%lld\t%d\t%d\t%lld", &epoch, &diff, &k, &v) == 4 && diff == 1 && n < cap)
                    lat[n++] = got - (double)v / 1e6;
                PQfreemem(line);
            }
        }
    }
    pthread_join(wr.th, NULL);
    qsort(lat, n, sizeof *lat, cmp_double);
    printf("fanout subscribers=%d changes=%d received=%zu/%zu p50=%.2f ms p99=%.2f ms max=%.1f ms\n", subs, changes, n,
           cap, pct(lat, n, 0.5) * 1e3, pct(lat, n, 0.99) * 1e3, n ? lat[n - 1] * 1e3 : 0.0);
    for (int i = 0; i < subs; i++)
        PQfinish(cs[i]);
    free(cs);
    free(pfd);
    free(lat);
    return n == cap && !wr.failed ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: serving_client point|range CONNINFO CLIENTS SECONDS NKEYS\n"
                        "       serving_client fanout CONNINFO SUBSCRIBERS CHANGES\n");
        return 2;
    }
    conninfo = argv[2];
    if (!strcmp(argv[1], "fanout"))
        return fanout(atoi(argv[3]), atoi(argv[4]));
    if (argc < 6)
        return 2;
    int clients = atoi(argv[3]);
    seconds = atoi(argv[4]);
    n_keys = atoi(argv[5]);
    range_mode = !strcmp(argv[1], "range");
    if (clients < 1 || clients > MAX_CLIENTS || seconds < 1 || n_keys < RANGE_ROWS + 1)
        return fprintf(stderr, "bad arguments\n"), 2;
    return queries(clients);
}
