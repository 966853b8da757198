/*
 * changelog_restore.c: restore speed from a changelog topic (not a test).
 * Starts the embedded broker in this process (what `weir broker` runs),
 * writes a view's state of two tables over G key groups through the
 * changelog producer (runtime/changelog.c) in a few checkpoints, then
 * restores every key group into a fresh data directory and prints the
 * MB/s (key + value bytes read from Kafka per second of wall time,
 * topic check and range drops included).
 *   changelog_restore [MB per partition (default 4)] [key groups (default 8)] [value bytes (default 100)]
 * Keep MB per partition under ~5: the embedded broker keeps ~5 MiB per
 * partition and a restore refuses a partition that lost its start.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "broker.h"
#include "runtime.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    double mb = argc > 1 ? atof(argv[1]) : 4;
    int g = argc > 2 ? atoi(argv[2]) : 8;
    int vbytes = argc > 3 ? atoi(argv[3]) : 100;
    char base[] = "/tmp/weir-clbench-XXXXXX", a[300], r[300], addr[128];
    if (!mkdtemp(base) || g < 1 || g > 4096 || vbytes < 1 || vbytes > 100000)
        return 2;
    snprintf(a, sizeof a, "%s/a", base);
    snprintf(r, sizeof r, "%s/r", base);
    WError err = {0};
    RtBroker *b;
    StorEnv *env, *renv;
    if (rt_broker_start("127.0.0.1:0", 1, &b, addr, sizeof addr, &err) < 0 || stor_open(a, NULL, &env, &err) < 0 ||
        stor_open(r, NULL, &renv, &err) < 0) {
        fprintf(stderr, "start: %s\n", err.msg);
        return 1;
    }
    const uint64_t tables[2] = {7, 8};
    RtChangelogConf c = {.bootstrap = addr, .cluster = "bench", .view_id = 1, .key_groups = g,
                         .table_ids = tables, .n_tables = 2};
    RtChangelog *cl;
    StorTable *t[2];
    if (rt_changelog_open(&c, env, &cl, &err) < 0 || stor_table_open(env, 7, &t[0], &err) < 0 ||
        stor_table_open(env, 8, &t[1], &err) < 0) {
        fprintf(stderr, "open: %s\n", err.msg);
        return 1;
    }
    /* Rows per checkpoint so that each partition gets `mb` in 4 checkpoints. */
    size_t rec = 8 + 10 + (size_t)vbytes + 70; /* key, value and Kafka's per-record overhead, roughly */
    long rows = (long)(mb * 1e6 * g / (double)rec / 4);
    char *val = malloc((size_t)vbytes);
    memset(val, 'v', (size_t)vbytes);
    double t0 = now();
    long k = 0;
    for (int e = 1; e <= 4; e++) {
        for (long i = 0; i < rows; i++, k++) {
            uint8_t key[10];
            int kg = (int)(k % g);
            key[0] = (uint8_t)(kg >> 8), key[1] = (uint8_t)kg;
            for (int j = 0; j < 8; j++)
                key[2 + j] = (uint8_t)(k >> (56 - 8 * j));
            memcpy(val, &k, sizeof k < (size_t)vbytes ? sizeof k : (size_t)vbytes);
            stor_table_put(t[k & 1], key, sizeof key, val, (size_t)vbytes, &err);
        }
        StorCheckpoint *ck;
        int rc = stor_checkpoint_begin(env, (uint64_t)e, &ck, &err);
        rc = rc ? rc : stor_checkpoint_add_table(ck, t[0], &err);
        rc = rc ? rc : stor_checkpoint_add_table(ck, t[1], &err);
        rc = rc ? rc : rt_changelog_capture(cl, ck, (uint64_t)e, &err);
        rc = rc ? rc : stor_checkpoint_write(ck, &err);
        rt_changelog_committed(cl, (uint64_t)e, rc == 0);
        stor_checkpoint_finish(ck);
        if (rc) {
            fprintf(stderr, "checkpoint: %s\n", err.msg);
            return 1;
        }
    }
    if (!rt_changelog_wait(cl, 4, 300000)) {
        fprintf(stderr, "not confirmed\n");
        return 1;
    }
    double produce = now() - t0;
    rt_changelog_close(cl);
    stor_table_close(t[0]);
    stor_table_close(t[1]);
    printf("changelog: %ld changes of %d-byte values over %d key groups, produced and confirmed in %.2f s\n", k,
           vbytes, g, produce);
    uint64_t epoch;
    RtClRestoreStats st;
    if (rt_changelog_restore(&c, renv, 300000, &epoch, &st, &err) < 0) {
        fprintf(stderr, "restore: %s %s\n", err.sqlstate, err.msg);
        return 1;
    }
    printf("restore: epoch %llu, %llu records, %llu changes, %.1f MB in %.2f s (LMDB writes %.2f s): %.1f MB/s, "
           "%.0f changes/s\n",
           (unsigned long long)epoch, (unsigned long long)st.records, (unsigned long long)st.applied, st.bytes / 1e6,
           st.usec / 1e6, st.apply_usec / 1e6, st.bytes / 1e6 / (st.usec / 1e6), st.applied / (st.usec / 1e6));
    free(val);
    stor_close(env);
    stor_close(renv);
    rt_broker_stop(b);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    return system(cmd) != 0;
}
