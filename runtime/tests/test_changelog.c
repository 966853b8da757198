/*
 * test_changelog.c: changelog topics (changelog.c) against the embedded
 * broker, started in this process (rt_broker_start, what `weir broker`
 * runs). Random puts, overwrites and deletes over two tables of 8 key
 * groups across checkpoints are produced, then restored into fresh data
 * directories for subsets of the key groups and compared with an oracle:
 *   1. produce epochs 1-5, restore key groups {1,3,6}: equal at epoch 5;
 *   2. a "crash" between LMDB commit and delivery: epochs 6-7 committed
 *      while Kafka is away (a dead address; memory limit 1 byte so they
 *      are spilled), one genuine change of epoch 6 reaches the topic
 *      without its marker (a delivery cut short); a restore then gives
 *      epoch 5 exactly (the tail is not applied); a new producer on the
 *      same directory re-sends 6 and 7 from LMDB; a restore of every key
 *      group gives epoch 7;
 *   3. a standby of key groups {2,5} caught up at 7 follows epochs 8-9.
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker.h"
#include "kafka.h"
#include "runtime.h"
#include "tap.h"

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    return remove(p);
}
static void rm_rf(const char *p) { nftw(p, rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

#define G 8
#define NT 2
#define NK 400
#define MAXE 10
static const uint64_t TABLES[NT] = {100, 101};

/* oracle[e][t][k]: the value code of key k of table t after epoch e, -1 absent. */
static int oracle[MAXE][NT][NK];
static int cur[NT][NK];

static void make_key(int k, uint8_t out[6])
{
    int kg = k % G;
    out[0] = (uint8_t)(kg >> 8), out[1] = (uint8_t)kg;
    out[2] = (uint8_t)(k >> 24), out[3] = (uint8_t)(k >> 16), out[4] = (uint8_t)(k >> 8), out[5] = (uint8_t)k;
}

/* A value of 1..200 bytes made from its code. */
static size_t make_val(int code, uint8_t *out)
{
    size_t n = (size_t)(code % 200) + 1;
    for (size_t i = 0; i < n; i++)
        out[i] = (uint8_t)(code * 31 + (int)i);
    return n;
}

static char base[] = "/tmp/weir_changelog_XXXXXX";
static char addr[128];

static char *dir(const char *name)
{
    static char p[4][400];
    static int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof p[i], "%s/%s", base, name);
    return p[i];
}

/* Runs epochs from..to on env: ~300 random writes each, checkpointed with
 * the changelog capturing. Returns 0 if every checkpoint committed. */
static int run_epochs(StorEnv *env, RtChangelog *cl, int from, int to, int *partial_kg0_key)
{
    StorTable *tab[NT];
    WError err = {0};
    for (int t = 0; t < NT; t++)
        if (stor_table_open(env, TABLES[t], &tab[t], &err) < 0)
            return -1;
    int rc = 0;
    for (int e = from; e <= to && rc == 0; e++) {
        for (int i = 0; i < 300; i++) {
            int t = rand() % NT, k = rand() % NK;
            uint8_t key[6], val[256];
            make_key(k, key);
            if (rand() % 5 == 0) {
                stor_table_delete(tab[t], key, 6, &err);
                cur[t][k] = -1;
            } else {
                int code = rand() % 100000;
                stor_table_put(tab[t], key, 6, val, make_val(code, val), &err);
                cur[t][k] = code;
                if (partial_kg0_key && e == from && t == 0 && k % G == 0)
                    *partial_kg0_key = k;
            }
        }
        memcpy(oracle[e], cur, sizeof cur);
        StorCheckpoint *ck;
        rc = stor_checkpoint_begin(env, (uint64_t)e, &ck, &err);
        for (int t = 0; t < NT && rc == 0; t++)
            rc = stor_checkpoint_add_table(ck, tab[t], &err);
        if (rc == 0 && (rc = rt_changelog_capture(cl, ck, (uint64_t)e, &err)) < 0)
            stor_checkpoint_abort(ck);
        if (rc == 0) {
            rc = stor_checkpoint_write(ck, &err);
            rt_changelog_committed(cl, (uint64_t)e, rc == 0);
            stor_checkpoint_finish(ck);
        }
        if (rc)
            diag("epoch %d: %s %s", e, err.sqlstate, err.msg);
    }
    for (int t = 0; t < NT; t++)
        stor_table_close(tab[t]);
    return rc;
}

/* env holds exactly the oracle of epoch e for key groups in kgs (others
 * absent). */
static int state_equals(StorEnv *env, int e, const int *kgs, int n_kgs)
{
    WError err = {0};
    int good = 1;
    for (int t = 0; t < NT; t++) {
        StorTable *tab;
        if (stor_table_open(env, TABLES[t], &tab, &err) < 0)
            return 0;
        int want_rows = 0, rows = 0;
        for (int k = 0; k < NK; k++) {
            bool mine = false;
            for (int i = 0; i < n_kgs; i++)
                mine |= kgs[i] == k % G;
            int want = mine ? oracle[e][t][k] : -1;
            uint8_t key[6], val[256];
            make_key(k, key);
            const void *v;
            size_t vl;
            int rc = stor_table_get(tab, key, 6, &v, &vl, &err);
            bool same = want < 0 ? rc == 0 : rc == 1 && vl == make_val(want, val) && !memcmp(v, val, vl);
            want_rows += want >= 0;
            if (!same && good) {
                diag("table %d key %d (kg %d): rc %d, want code %d", (int)TABLES[t], k, k % G, rc, want);
                good = 0;
            }
        }
        StorIter *it;
        const void *k, *v;
        size_t kl, vl;
        stor_iter_open(tab, NULL, 0, &it, &err);
        while (stor_iter_next(it, &k, &kl, &v, &vl, &err) == 1)
            rows++;
        stor_iter_close(it);
        if (rows != want_rows) {
            diag("table %d: %d rows, want %d", (int)TABLES[t], rows, want_rows);
            good = 0;
        }
        stor_table_close(tab);
    }
    return good;
}

static RtChangelogConf conf_for(const char *bootstrap, const int *kgs, int n_kgs)
{
    RtChangelogConf c = {
        .bootstrap = bootstrap,
        .cluster = "t",
        .view_id = 42,
        .key_groups = G,
        .table_ids = TABLES,
        .n_tables = NT,
        .kgs = kgs,
        .n_kgs = n_kgs,
    };
    return c;
}

static int restore_into(const char *name, const int *kgs, int n_kgs, uint64_t *epoch, StorEnv **env_out)
{
    WError err = {0};
    StorEnv *env;
    if (stor_open(dir(name), NULL, &env, &err) < 0)
        return -1;
    RtChangelogConf c = conf_for(addr, kgs, n_kgs);
    RtClRestoreStats st;
    int rc = rt_changelog_restore(&c, env, 20000, epoch, &st, &err);
    if (rc < 0)
        diag("restore: %s %s", err.sqlstate, err.msg);
    else
        diag("restored %llu records, %llu changes, %.2f MB in %.3f s", (unsigned long long)st.records,
             (unsigned long long)st.applied, st.bytes / 1e6, st.usec / 1e6);
    *env_out = env;
    return rc;
}

int main(void)
{
    if (!mkdtemp(base))
        return 1;
    WError err = {0};
    RtBroker *b = NULL;
    if (rt_broker_start("127.0.0.1:0", 1, &b, addr, sizeof addr, &err) < 0) {
        printf("Bail out! broker: %s\n", err.msg);
        return 1;
    }
    srand(11);
    memset(cur, 0xff, sizeof cur);
    memset(oracle, 0xff, sizeof oracle);

    /* 1. Epochs 1-5 produced and confirmed. */
    StorEnv *env;
    ok(stor_open(dir("a"), NULL, &env, &err) == 0, "open the producing directory");
    RtChangelogConf c = conf_for(addr, NULL, 0);
    RtChangelog *cl;
    ok(rt_changelog_open(&c, env, &cl, &err) == 0, "open the producer");
    ok(run_epochs(env, cl, 1, 5, NULL) == 0, "epochs 1-5 checkpointed with capture");
    ok(rt_changelog_wait(cl, 5, 30000), "epochs 1-5 confirmed by Kafka");
    RtChangelogStats st;
    rt_changelog_stats(cl, &st);
    diag("sent %llu records", (unsigned long long)st.records_sent);
    rt_changelog_close(cl);

    int sub[] = {1, 3, 6};
    uint64_t epoch = 0;
    StorEnv *r1;
    ok(restore_into("r1", sub, 3, &epoch, &r1) == 0, "restore key groups 1, 3, 6");
    is_int(epoch, 5, "restored epoch 5");
    ok(state_equals(r1, 5, sub, 3), "restored state equals the oracle at epoch 5 (key groups 1, 3, 6 only)");
    /* Restoring again over existing state drops the old range first. */
    stor_close(r1);

    /* 2. Kafka away: epochs 6-7 commit locally and wait (spilled to LMDB). */
    RtChangelogConf dead = conf_for("127.0.0.1:1", NULL, 0);
    dead.memory_limit = 1;
    ok(rt_changelog_open(&dead, env, &cl, &err) == 0, "producer with Kafka unreachable");
    int partial_key = -1;
    ok(run_epochs(env, cl, 6, 7, &partial_key) == 0, "epochs 6-7 checkpoint while Kafka is away");
    ok(!rt_changelog_wait(cl, 6, 300), "epoch 6 is not confirmed");
    rt_changelog_stats(cl, &st);
    ok(st.queued_epochs == 2 && st.spilled_epochs == 2 && st.queued_bytes == 0,
       "both epochs wait, spilled past the 1-byte memory limit");
    rt_changelog_close(cl); /* the crash: nothing of 6-7 confirmed */
    stor_close(env);

    /* Part of epoch 6 reached Kafka, its marker did not. */
    ok(partial_key >= 0, "epoch 6 wrote a key of key group 0");
    {
        RtKafkaProducer *p;
        uint8_t key[14], val[256];
        memset(key, 0, 8);
        key[7] = (uint8_t)TABLES[0];
        make_key(partial_key, key + 8);
        rt_kafka_producer_open(addr, NULL, 0, &p, &err);
        int code = oracle[6][0][partial_key];
        size_t vl = code >= 0 ? make_val(code, val) : 0;
        int rc = rt_kafka_produce_headers(p, "_weir.t.cl.42", 0, key, sizeof key, code >= 0 ? val : NULL, vl,
                                          NULL, 0, &err);
        ok(rc == 0 && rt_kafka_producer_flush(p, 10000, &err) == 0, "a change of epoch 6 delivered without its marker");
        rt_kafka_producer_close(p);
    }
    int kg0[] = {0, 4};
    StorEnv *r2;
    ok(restore_into("r2", kg0, 2, &epoch, &r2) == 0, "restore key groups 0, 4 after the crash");
    is_int(epoch, 5, "the cut-short epoch 6 is not restored: epoch 5");
    ok(state_equals(r2, 5, kg0, 2), "state equals the oracle at epoch 5 (the tail after the marker not applied)");
    stor_close(r2);

    /* The next start re-sends 6 and 7 from LMDB. */
    ok(stor_open(dir("a"), NULL, &env, &err) == 0, "reopen the producing directory");
    ok(rt_changelog_open(&c, env, &cl, &err) == 0, "producer restarts");
    rt_changelog_stats(cl, &st);
    is_int(st.queued_epochs, 2, "the two unconfirmed epochs are queued again at start");
    ok(rt_changelog_wait(cl, 7, 30000), "epochs 6-7 re-sent and confirmed");
    StorEnv *r3;
    ok(restore_into("r3", NULL, 0, &epoch, &r3) == 0, "restore every key group");
    is_int(epoch, 7, "restored epoch 7");
    int all[G];
    for (int i = 0; i < G; i++)
        all[i] = i;
    ok(state_equals(r3, 7, all, G), "state equals the oracle at epoch 7");
    stor_close(r3);

    /* 3. A standby of key groups 2 and 5 follows. */
    StorEnv *se;
    int sb[] = {2, 5};
    ok(stor_open(dir("s"), NULL, &se, &err) == 0, "open the standby directory");
    RtChangelogConf sc = conf_for(addr, sb, 2);
    RtClRestore *rs;
    int rc = rt_changelog_restore_open(&sc, se, 20000, &rs, &err);
    ok(rc == 0 && rt_changelog_restore_catch_up(rs, 20000, &epoch, &err) == 0 && epoch == 7, "standby caught up at 7");
    ok(run_epochs(env, cl, 8, 9, NULL) == 0, "epochs 8-9 on the producer");
    /* A confirmed epoch's changes are no longer kept in LMDB. */
    Buf blob = {0};
    ok(stor_meta_get(env, "cl.42.p.0000000000000006", &blob, &err) == 0, "a confirmed epoch's stored changes are deleted");
    buf_free(&blob);
    for (int i = 0; i < 200 && epoch < 9; i++)
        if (rt_changelog_restore_poll(rs, 100, &epoch, &err) < 0)
            break;
    is_int(epoch, 9, "standby tailed to epoch 9");
    ok(state_equals(se, 9, sb, 2), "standby state equals the oracle at epoch 9");
    /* A re-send of an older, complete epoch (a producer restarted between
     * Kafka's acknowledgement and forgetting the epoch) changes nothing. */
    {
        RtKafkaProducer *p;
        uint8_t key[14], val[256], ev[8] = {5};
        memset(key, 0, 8);
        key[7] = (uint8_t)TABLES[0];
        make_key(2, key + 8); /* key 2 is in key group 2 */
        static const uint8_t marker[12] = {0, 0, 0, 0, 0, 0, 0, 0, 'c', 'k', 'p', 't'};
        rt_kafka_producer_open(addr, NULL, 0, &p, &err);
        rt_kafka_produce(p, "_weir.t.cl.42", 2, key, sizeof key, val, make_val(oracle[9][0][2] + 1, val), &err);
        rt_kafka_produce(p, "_weir.t.cl.42", 2, marker, sizeof marker, ev, sizeof ev, &err);
        ok(rt_kafka_producer_flush(p, 10000, &err) == 0, "an old epoch's change and marker re-sent");
        rt_kafka_producer_close(p);
        for (int i = 0; i < 10; i++)
            rt_changelog_restore_poll(rs, 100, &epoch, &err);
        is_int(epoch, 9, "the standby stays at epoch 9");
        ok(state_equals(se, 9, sb, 2), "the re-sent older epoch is not applied over newer state");
    }
    rt_changelog_restore_close(rs);
    stor_close(se);
    rt_changelog_close(cl);
    stor_close(env);

    /* A topic of another partition count is refused. */
    {
        RtChangelogConf bad = conf_for(addr, NULL, 0);
        bad.key_groups = 3; /* the topic has 8 */
        StorEnv *x;
        stor_open(dir("x"), NULL, &x, &err);
        ok(rt_changelog_restore(&bad, x, 10000, &epoch, NULL, &err) < 0 && !strcmp(err.sqlstate, "22023"),
           "a topic with another partition count: 22023");
        stor_close(x);
    }
    /* A partition that lost its first records (the embedded broker keeps
     * ~5 MiB per partition) is refused, not restored in part. */
    {
        int n = 0;
        ok(rt_kafka_topic_ensure(addr, "_weir.t.cl.43", 1, "compact", 10000, &n, &err) == 0 && n == 1,
           "a one-partition changelog topic");
        RtKafkaProducer *p;
        rt_kafka_producer_open(addr, NULL, 0, &p, &err);
        static uint8_t big[100000];
        uint8_t key[10] = {0, 0, 0, 0, 0, 0, 0, 100, 0, 0};
        int rc = 0;
        for (int i = 0; i < 80 && rc == 0; i++) {
            key[9] = (uint8_t)i;
            rc = rt_kafka_produce(p, "_weir.t.cl.43", 0, key, sizeof key, big, sizeof big, &err);
        }
        ok(rc == 0 && rt_kafka_producer_flush(p, 30000, &err) == 0, "8 MB written to its partition");
        rt_kafka_producer_close(p);
        RtChangelogConf one = conf_for(addr, NULL, 0);
        one.view_id = 43;
        one.key_groups = 1;
        StorEnv *x;
        stor_open(dir("y"), NULL, &x, &err);
        memset(&err, 0, sizeof err);
        ok(rt_changelog_restore(&one, x, 10000, &epoch, NULL, &err) < 0 && !strcmp(err.sqlstate, "55000"),
           "a trimmed partition is refused: 55000");
        diag("%s", err.msg);
        stor_close(x);
    }
    rt_broker_stop(b);
    rm_rf(base);
    return tap_done();
}
