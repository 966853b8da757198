/*
 * bench_storage.c: micro-benchmark of state tables (not a test).
 * Puts N keys (default 1M, 16-byte keys, 32-byte values) into a table,
 * checkpoints them, then measures cached gets, cold gets from LMDB, a full
 * scan and an overwrite checkpoint of 10% of the keys. Then the shape of
 * a view's rows (Nexmark q0): 10 checkpoints that each append n/2 rows
 * under increasing 8-byte row ids to one table and rewrite one row of a
 * table with a higher id, reporting the writer's CPU per row. Last, the
 * same again with a changelog's capture (the ratio is the capture's cost),
 * then the cold gets again with BENCH_DBS (default 250) more tables'
 * databases open.
 *   bench_storage [n_keys] [dir]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <stdbool.h>

#include "storage.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* What a changelog producer does at each checkpoint (runtime/changelog.c,
 * rt_changelog_capture): every change serialized (16-byte header, key,
 * value) into one blob the checkpoint stores as metadata. */
static int capture_cb(void *arg, const StorChange *c)
{
    Buf *b = arg;
    uint8_t h[16] = {0};
    memcpy(h, &c->table_id, 8);
    uint32_t kl = (uint32_t)c->klen, vl = c->del ? 0xffffffffu : (uint32_t)c->vlen;
    memcpy(h + 8, &kl, 4);
    memcpy(h + 12, &vl, 4);
    buf_append(b, h, sizeof h);
    buf_append(b, c->key, c->klen);
    if (!c->del)
        buf_append(b, c->val, c->vlen);
    return 0;
}

/* Append-only rows (a view's rows under row ids) beside a small table
 * with a higher id rewritten every checkpoint (a row-id counter). With
 * capture, each checkpoint also captures its changes as a changelog
 * producer would, and the stored copy is deleted after the write (the
 * producer does that once Kafka confirmed; timed apart). */
static double append_wall[2];
static int bench_append(StorEnv *env, uint64_t n, uint64_t epoch, uint64_t tid, bool capture)
{
    StorTable *rows, *ctr;
    WError err = {0};
    char v[40];
    uint8_t k[8];
    memset(v, 'r', sizeof v);
    Buf blob = {0};
    double cap_t = 0, del_t = 0;
    if (stor_table_open(env, tid, &rows, &err) < 0 || stor_table_open(env, tid + 1, &ctr, &err) < 0) {
        fprintf(stderr, "open: %s %s\n", err.sqlstate, err.msg);
        return -1;
    }
    double wall = 0, cpu = 0;
    uint64_t id = 0, total = 0;
    for (int c = 0; c < 10; c++) {
        for (uint64_t i = 0; i < n; i++, id++) {
            for (int b = 0; b < 8; b++)
                k[b] = (uint8_t)(id >> (56 - 8 * b));
            memcpy(v, &id, 8);
            stor_table_put(rows, k, 8, v, sizeof v, NULL);
        }
        stor_table_put(ctr, "next", 4, &id, 8, NULL);
        StorCheckpoint *ck;
        if (stor_checkpoint_begin(env, epoch + (uint64_t)c, &ck, &err) < 0 ||
            stor_checkpoint_add_table(ck, rows, &err) < 0 || stor_checkpoint_add_table(ck, ctr, &err) < 0) {
            fprintf(stderr, "checkpoint: %s %s\n", err.sqlstate, err.msg);
            return -1;
        }
        double t0 = now(), c0 = cpu_now();
        char name[64];
        snprintf(name, sizeof name, "cl.bench.p.%llu", (unsigned long long)(epoch + (uint64_t)c));
        if (capture) {
            buf_reset(&blob);
            stor_checkpoint_changes(ck, capture_cb, &blob);
            stor_checkpoint_put_meta(ck, name, blob.data, blob.len, &err);
            cap_t += now() - t0;
        }
        int rc = stor_checkpoint_write(ck, &err);
        wall += now() - t0;
        cpu += cpu_now() - c0;
        stor_checkpoint_finish(ck);
        if (capture) {
            double d0 = now();
            stor_meta_delete(env, name, &err);
            del_t += now() - d0;
        }
        if (rc < 0) {
            fprintf(stderr, "checkpoint: %s %s\n", err.sqlstate, err.msg);
            return -1;
        }
        total += n + 1;
    }
    StorStats st;
    stor_stats(env, &st);
    printf("%-28s %8.1f ms  writer CPU %.1f ms, %.2f us/row  (10 x %llu rows)  file %.1f MB\n",
           capture ? "append ckpts + capture (avg)" : "append checkpoints (avg)", wall / 10 * 1e3, cpu / 10 * 1e3,
           cpu / (double)total * 1e6, (unsigned long long)n, st.used_bytes / 1e6);
    append_wall[capture] = wall;
    if (capture)
        printf("%-28s %8.2fx  (capture %.1f ms, stored copy's delete %.1f ms per checkpoint)\n",
               "changelog capture cost", append_wall[1] / append_wall[0], cap_t / 10 * 1e3, del_t / 10 * 1e3);
    buf_free(&blob);
    stor_table_close(rows);
    stor_table_close(ctr);
    return 0;
}

static char *keys; /* n pre-generated 16-byte keys in random order */
static const char *key(uint64_t i) { return keys + i * 16; }

static int checkpoint(StorEnv *env, uint64_t epoch, StorTable *t, const char *what)
{
    StorCheckpoint *ck;
    WError err = {0};
    StorStats st;
    double t0 = now(), t1 = 0;
    if (stor_checkpoint_begin(env, epoch, &ck, &err) < 0 || stor_checkpoint_add_table(ck, t, &err) < 0 ||
        (t1 = now(), stor_checkpoint_commit(ck, &err)) < 0) {
        fprintf(stderr, "checkpoint: %s %s\n", err.sqlstate, err.msg);
        return -1;
    }
    double dt = now() - t0;
    stor_stats(env, &st);
    printf("%-28s %8.1f ms  (add_table %.1f ms, LMDB txn+fsync %.1f ms)  %llu rows  %.1f MB payload  "
           "file %.1f MB\n", what, dt * 1e3, (t1 - t0) * 1e3, st.last_commit_usec / 1e3,
           (unsigned long long)st.last_commit_rows, st.last_commit_bytes / 1e6, st.used_bytes / 1e6);
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    char tmpl[] = "/tmp/weir-bench-XXXXXX";
    const char *dir = argc > 2 ? argv[2] : mkdtemp(tmpl);
    StorEnv *env;
    StorTable *t;
    WError err = {0};
    StorOptions o = {.table_cache_bytes = (size_t)256 << 20};
    char v[32], k[17];
    keys = malloc(n * 16);
    for (uint64_t i = 0; i < n; i++) {
        snprintf(k, sizeof k, "k%015llu", (unsigned long long)(i * 2654435761u % 1000000007u));
        memcpy(keys + i * 16, k, 16);
    }
    memset(v, 'v', sizeof v);
    if (!dir || stor_open(dir, &o, &env, &err) < 0 || stor_table_open(env, 1, &t, &err) < 0) {
        fprintf(stderr, "open: %s %s\n", err.sqlstate, err.msg);
        return 1;
    }
    printf("weir storage bench: %llu keys, 16 B keys, 32 B values, dir %s\n", (unsigned long long)n, dir);

    double t0 = now();
    for (uint64_t i = 0; i < n; i++) {
        memcpy(v, &i, 8);
        stor_table_put(t, key(i), 16, v, sizeof v, NULL);
    }
    double dt = now() - t0;
    printf("%-28s %8.1f ms  %.2f M rows/s\n", "put (dirty map)", dt * 1e3, n / dt / 1e6);
    if (checkpoint(env, 1, t, "checkpoint commit (insert)") < 0)
        return 1;

    const void *pv;
    size_t vl;
    uint64_t found = 0;
    t0 = now();
    for (uint64_t i = 0; i < n; i++) {
        found += stor_table_get(t, key(i), 16, &pv, &vl, NULL) == 1;
    }
    dt = now() - t0;
    printf("%-28s %8.1f ms  %.2f M rows/s (%llu found)\n", "get (cached)", dt * 1e3, n / dt / 1e6,
           (unsigned long long)found);

    stor_table_set_cache_budget(t, 0);
    found = 0;
    t0 = now();
    for (uint64_t i = 0; i < n; i++) {
        found += stor_table_get(t, key(i), 16, &pv, &vl, NULL) == 1;
    }
    dt = now() - t0;
    printf("%-28s %8.1f ms  %.2f M rows/s (%llu found)\n", "get (LMDB, no cache)", dt * 1e3,
           n / dt / 1e6, (unsigned long long)found);

    StorIter *it;
    const void *pk;
    size_t kl;
    uint64_t rows = 0;
    t0 = now();
    stor_iter_open(t, NULL, 0, &it, NULL);
    while (stor_iter_next(it, &pk, &kl, &pv, &vl, NULL) == 1)
        rows++;
    stor_iter_close(it);
    dt = now() - t0;
    printf("%-28s %8.1f ms  %.2f M rows/s (%llu rows)\n", "full scan", dt * 1e3, rows / dt / 1e6,
           (unsigned long long)rows);

    stor_table_set_cache_budget(t, (size_t)256 << 20);
    for (uint64_t i = 0; i < n / 10; i++) {
        stor_table_put(t, key(i * 10), 16, v, sizeof v, NULL);
    }
    if (checkpoint(env, 2, t, "checkpoint commit (10% upd)") < 0)
        return 1;
    printf("table size_bytes             %.1f MB\n", stor_table_size_bytes(t) / 1e6);
    stor_table_close(t);
    if (bench_append(env, n / 2, 3, 2, false) < 0 || bench_append(env, n / 2, 13, 4, true) < 0)
        return 1;

    /* Every read transaction's begin loops over the open databases: gets
     * from LMDB again, with more tables' databases open. */
    int N_MANY = getenv("BENCH_DBS") ? atoi(getenv("BENCH_DBS")) : 250;
    StorTable **many = malloc(N_MANY * sizeof *many);
    StorCheckpoint *ck;
    if (stor_checkpoint_begin(env, 30, &ck, &err) < 0)
        return 1;
    for (int i = 0; i < N_MANY; i++) {
        if (stor_table_open(env, 100 + (uint64_t)i, &many[i], &err) < 0) {
            fprintf(stderr, "open: %s %s\n", err.sqlstate, err.msg);
            return 1;
        }
        stor_table_put(many[i], "k", 1, "v", 1, NULL);
        stor_checkpoint_add_table(ck, many[i], NULL);
    }
    if (stor_checkpoint_commit(ck, &err) < 0)
        return 1;
    stor_table_open(env, 1, &t, NULL);
    stor_table_set_cache_budget(t, 0);
    found = 0;
    t0 = now();
    for (uint64_t i = 0; i < n; i++)
        found += stor_table_get(t, key(i), 16, &pv, &vl, NULL) == 1;
    dt = now() - t0;
    printf("%-28s %8.1f ms  %.2f M rows/s (%llu found)\n", "get (LMDB, +N dbs open)", dt * 1e3,
           n / dt / 1e6, (unsigned long long)found);
    stor_table_close(t);
    for (int i = 0; i < N_MANY; i++)
        stor_table_close(many[i]);
    free(many);
    stor_close(env);
    free(keys);
    if (argc <= 2) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            return 1;
    }
    return 0;
}
