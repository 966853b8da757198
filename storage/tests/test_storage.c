/*
 * test_storage.c: unit tests for storage/ -- catalog, ids, state tables,
 * iterators, checkpoints (commit, abort, atomicity), drop, map growth and
 * its cap, the directory lock, concurrency with growth, and a kill -9
 * crash loop. TAP output.
 */
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lmdb.h>

#include "storage.h"
#include "tap.h"

#define MiB ((size_t)1 << 20)

static char base[256];
static int n_dirs;

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void rm_rf(const char *p) { nftw(p, rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

/* A fresh, not yet existing data directory path under base. */
static char *new_dir(void)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/d%d", base, n_dirs++);
    return p;
}

static StorEnv *open_env(const char *dir, const StorOptions *o)
{
    StorEnv *env = NULL;
    WError err = {0};
    if (stor_open(dir, o, &env, &err) < 0)
        diag("stor_open(%s): %s %s %s", dir, err.sqlstate, err.msg, err.detail);
    return env;
}

static void commit_tables(StorEnv *env, uint64_t epoch, StorTable **ts, int n)
{
    StorCheckpoint *ck;
    WError err = {0};
    int rc = stor_checkpoint_begin(env, epoch, &ck, &err);
    for (int i = 0; rc == 0 && i < n; i++)
        rc = stor_checkpoint_add_table(ck, ts[i], &err);
    if (rc == 0)
        rc = stor_checkpoint_commit(ck, &err);
    if (rc < 0) {
        ok(0, "checkpoint committed"); /* a test that meant to commit must not go on silently */
        diag("checkpoint %llu: %s %s", (unsigned long long)epoch, err.sqlstate, err.msg);
    }
}

static int tget(StorTable *t, const char *k, char *out, size_t cap)
{
    const void *v;
    size_t vl;
    int rc = stor_table_get(t, k, strlen(k), &v, &vl, NULL);
    if (rc == 1) {
        size_t n = vl < cap - 1 ? vl : cap - 1;
        memcpy(out, v, n);
        out[n] = 0;
    }
    return rc;
}

static void tput(StorTable *t, const char *k, const char *v)
{
    stor_table_put(t, k, strlen(k), v, strlen(v), NULL);
}

/* ------------------------------------------------------------------------- */

typedef struct {
    int n;
    uint64_t ids[16];
    char names[16][32];
    char bodies[16][32];
} CatSeen;

static int cat_cb(void *arg, const StorCatalogEntry *e)
{
    CatSeen *s = arg;
    if (s->n < 16) {
        s->ids[s->n] = e->id;
        snprintf(s->names[s->n], 32, "%s/%d", e->name, e->kind);
        snprintf(s->bodies[s->n], 32, "%.*s", (int)e->body_len, (const char *)e->body);
    }
    s->n++;
    return 0;
}

static void test_catalog(void)
{
    char *dir = new_dir();
    StorEnv *env = open_env(dir, NULL);
    WError err = {0};
    uint64_t a, b, c;
    ok(env, "open fresh dir");
    stor_next_id(env, &a, &err);
    stor_next_id(env, &b, &err);
    is_int(a, 1, "first id is 1");
    is_int(b, 2, "ids increase");
    StorCatalogEntry e1 = {a, 1, "bids", "CREATE SOURCE bids", 18};
    StorCatalogEntry e2 = {b, 2, "v", "old", 3};
    StorCatalogEntry e3 = {10, 3, "sink", "s", 1};
    is_int(stor_catalog_put(env, &e1, &err), 0, "catalog put 1");
    is_int(stor_catalog_put(env, &e3, &err), 0, "catalog put 10");
    is_int(stor_catalog_put(env, &e2, &err), 0, "catalog put 2");
    e2.body = "new view body";
    e2.body_len = 13;
    is_int(stor_catalog_put(env, &e2, &err), 0, "catalog replace 2");
    is_int(stor_catalog_delete(env, 10, &err), 1, "catalog delete 10");
    is_int(stor_catalog_delete(env, 10, &err), 0, "catalog delete missing -> 0");
    stor_next_id(env, &c, &err);
    is_int(c, 11, "next id after put of id 10 skips past it");
    stor_close(env);

    env = open_env(dir, NULL);
    CatSeen s = {0};
    is_int(stor_catalog_scan(env, cat_cb, &s, &err), 0, "scan after reopen");
    is_int(s.n, 2, "two entries survive");
    is_int(s.ids[0], 1, "id order 1");
    is_str(s.names[0], "bids/1", "name+kind 1");
    is_str(s.bodies[0], "CREATE SOURCE bids", "body 1");
    is_int(s.ids[1], 2, "id order 2");
    is_str(s.bodies[1], "new view body", "replaced body survives");
    stor_next_id(env, &c, &err);
    is_int(c, 12, "ids monotonic across reopen");
    char big[STOR_MAX_NAME + 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    StorCatalogEntry e4 = {20, 1, big, "", 0};
    werr_clear(&err);
    ok(stor_catalog_put(env, &e4, &err) < 0 && strcmp(err.sqlstate, "54000") == 0,
       "catalog name too long -> 54000");
    stor_close(env);
}

/* Catalog entries carried by a checkpoint commit with it, and only then. */
static void test_catalog_in_checkpoint(void)
{
    char *dir = new_dir();
    StorEnv *env = open_env(dir, NULL);
    WError err = {0};
    StorCatalogEntry a = {1, 2, "v", "view one", 8}, b = {2, 2, "v2", "view two", 8};
    stor_catalog_put(env, &a, &err);
    stor_catalog_put(env, &b, &err);
    /* An aborted checkpoint writes nothing. */
    StorCheckpoint *ck;
    stor_checkpoint_begin(env, 1, &ck, &err);
    StorCatalogEntry a2 = {1, 2, "v2", "view one", 8}, b2 = {2, 2, "v", "view two", 8};
    is_int(stor_checkpoint_put_catalog(ck, &a2, &err), 0, "catalog entry into a checkpoint");
    stor_checkpoint_abort(ck);
    CatSeen s = {0};
    stor_catalog_scan(env, cat_cb, &s, &err);
    is_str(s.names[0], "v/2", "aborted: the catalog is unchanged");
    /* A committed one writes both entries (the names swapped). */
    stor_checkpoint_begin(env, 1, &ck, &err);
    stor_checkpoint_put_catalog(ck, &a2, &err);
    stor_checkpoint_put_catalog(ck, &b2, &err);
    is_int(stor_checkpoint_commit(ck, &err), 0, "checkpoint with catalog entries commits");
    stor_close(env);
    env = open_env(dir, NULL);
    memset(&s, 0, sizeof s);
    stor_catalog_scan(env, cat_cb, &s, &err);
    ok(s.n == 2 && !strcmp(s.names[0], "v2/2") && !strcmp(s.names[1], "v/2") && !strcmp(s.bodies[0], "view one"),
       "committed: both entries changed, after a reopen");
    uint64_t id;
    stor_next_id(env, &id, &err);
    is_int(id, 3, "ids stay past the entries");
    char big[STOR_MAX_NAME + 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    StorCatalogEntry e = {5, 1, big, "", 0};
    stor_checkpoint_begin(env, 2, &ck, &err);
    werr_clear(&err);
    ok(stor_checkpoint_put_catalog(ck, &e, &err) < 0 && strcmp(err.sqlstate, "54000") == 0,
       "checkpoint catalog name too long -> 54000");
    stor_checkpoint_abort(ck);
    stor_close(env);
}

static void test_table_basic(void)
{
    char *dir = new_dir();
    StorEnv *env = open_env(dir, NULL);
    StorTable *t;
    WError err = {0};
    char v[64];
    is_int(stor_table_open(env, 7, &t, &err), 0, "table open");
    is_int(tget(t, "a", v, sizeof v), 0, "get on empty table");
    tput(t, "a", "1");
    tput(t, "b", "2");
    tput(t, "", "empty key");
    is_int(tget(t, "a", v, sizeof v), 1, "get dirty");
    is_str(v, "1", "dirty value");
    tput(t, "a", "11");
    tget(t, "a", v, sizeof v);
    is_str(v, "11", "overwrite dirty");
    stor_table_delete(t, "b", 1, NULL);
    is_int(tget(t, "b", v, sizeof v), 0, "deleted dirty");
    tget(t, "", v, sizeof v);
    is_str(v, "empty key", "empty key works");
    commit_tables(env, 1, &t, 1);
    is_int(stor_table_dirty_count(t), 0, "clean after commit");
    is_int((long long)stor_table_committed_entries(t), 2, "committed entries: a and the empty key");
    tget(t, "a", v, sizeof v);
    is_str(v, "11", "get after commit (cache)");
    stor_table_set_cache_budget(t, 0);
    is_int(tget(t, "a", v, sizeof v), 1, "get after commit from LMDB");
    is_str(v, "11", "value from LMDB");
    is_int(tget(t, "b", v, sizeof v), 0, "deleted key absent after commit");
    stor_table_delete(t, "a", 1, NULL);
    is_int(tget(t, "a", v, sizeof v), 0, "delete over committed hides it");
    is_int(stor_table_dirty_count(t), 1, "tombstone is dirty");
    commit_tables(env, 2, &t, 1);
    is_int(tget(t, "a", v, sizeof v), 0, "committed delete");
    ok(stor_table_size_bytes(t) > 0, "size_bytes counts committed rows");
    is_int((long long)stor_table_committed_entries(t), 1, "committed entries recounted after a delete");

    char key[STOR_MAX_KEY + 1];
    memset(key, 'k', sizeof key);
    werr_clear(&err);
    ok(stor_table_put(t, key, sizeof key, "v", 1, &err) < 0 && !strcmp(err.sqlstate, "54000"),
       "key over STOR_MAX_KEY -> 54000");
    ok(stor_table_put(t, key, STOR_MAX_KEY, "v", 1, NULL) == 0, "key of STOR_MAX_KEY ok");
    commit_tables(env, 3, &t, 1);
    const void *pv;
    size_t pl;
    is_int(stor_table_get(t, key, STOR_MAX_KEY, &pv, &pl, NULL), 1, "max key round trip");
    stor_table_close(t);
    stor_close(env);

    env = open_env(dir, NULL);
    stor_table_open(env, 7, &t, &err);
    is_int(tget(t, "a", v, sizeof v), 0, "reopen: deleted key stays deleted");
    is_int(tget(t, "", v, sizeof v), 1, "reopen: committed key present");
    is_str(v, "empty key", "reopen: value");
    uint64_t e;
    stor_last_epoch(env, &e, NULL);
    is_int(e, 3, "reopen: last epoch");
    werr_clear(&err);
    StorCheckpoint *ck;
    ok(stor_checkpoint_begin(env, 3, &ck, &err) < 0 && !strcmp(err.sqlstate, "22023"),
       "epoch must increase");
    stor_table_close(t);
    stor_close(env);
}

/* Collect "k=v," for a scan. */
/* Scans keys with prefix (and below upper, when not NULL) into "k=v," text. */
static void scan_below_str(StorTable *t, const char *prefix, const char *upper, char *out, size_t cap)
{
    StorIter *it;
    const void *k, *v;
    size_t kl, vl, n = 0;
    out[0] = 0;
    if ((upper ? stor_iter_open_below(t, prefix, strlen(prefix), upper, strlen(upper), &it, NULL)
               : stor_iter_open(t, prefix, strlen(prefix), &it, NULL)) < 0)
        return;
    while (stor_iter_next(it, &k, &kl, &v, &vl, NULL) == 1)
        n += (size_t)snprintf(out + n, cap - n, "%.*s=%.*s,", (int)kl, (const char *)k, (int)vl,
                              (const char *)v);
    stor_iter_close(it);
}

static void scan_str(StorTable *t, const char *prefix, char *out, size_t cap)
{
    StorIter *it;
    const void *k, *v;
    size_t kl, vl, n = 0;
    out[0] = 0;
    if (stor_iter_open(t, prefix, strlen(prefix), &it, NULL) < 0)
        return;
    while (stor_iter_next(it, &k, &kl, &v, &vl, NULL) == 1)
        n += (size_t)snprintf(out + n, cap - n, "%.*s=%.*s,", (int)kl, (const char *)k, (int)vl,
                              (const char *)v);
    stor_iter_close(it);
}

static void test_scan(void)
{
    char *dir = new_dir();
    StorEnv *env = open_env(dir, NULL);
    StorTable *t, *u;
    char s[1024];
    stor_table_open(env, 1, &t, NULL);
    stor_table_open(env, 2, &u, NULL);
    tput(t, "a1", "x");
    tput(t, "a2", "x");
    tput(t, "a3", "x");
    tput(t, "a5", "x");
    tput(t, "b1", "x");
    tput(t, "a", "x");
    tput(u, "a0", "other table");
    StorTable *both[2] = {t, u};
    commit_tables(env, 1, both, 2);
    tput(t, "a3", "new");
    stor_table_delete(t, "a2", 2, NULL);
    tput(t, "a4", "dirty");
    tput(t, "a25", "dirty");
    stor_table_delete(t, "zz", 2, NULL); /* tombstone for a missing key */
    tput(t, "c", "dirty");
    scan_str(t, "a", s, sizeof s);
    is_str(s, "a=x,a1=x,a25=dirty,a3=new,a4=dirty,a5=x,", "prefix scan merges dirty over committed");
    scan_str(t, "", s, sizeof s);
    is_str(s, "a=x,a1=x,a25=dirty,a3=new,a4=dirty,a5=x,b1=x,c=dirty,", "full scan");
    scan_str(t, "b", s, sizeof s);
    is_str(s, "b1=x,", "prefix b");
    scan_str(t, "q", s, sizeof s);
    is_str(s, "", "prefix with no rows");
    scan_str(u, "", s, sizeof s);
    is_str(s, "a0=other table,", "other table isolated");
    /* Below an upper bound: committed, dirty and pending keys, tombstones. */
    scan_below_str(t, "", "a3", s, sizeof s);
    is_str(s, "a=x,a1=x,a25=dirty,", "scan below a3 (dirty and committed)");
    scan_below_str(t, "a", "a4", s, sizeof s);
    is_str(s, "a=x,a1=x,a25=dirty,a3=new,", "prefix scan below a4");
    scan_below_str(t, "", "a", s, sizeof s);
    is_str(s, "", "nothing below the first key");
    scan_below_str(t, "", "zzz", s, sizeof s);
    is_str(s, "a=x,a1=x,a25=dirty,a3=new,a4=dirty,a5=x,b1=x,c=dirty,", "upper past every key");
    commit_tables(env, 2, &t, 1);
    scan_str(t, "a", s, sizeof s);
    is_str(s, "a=x,a1=x,a25=dirty,a3=new,a4=dirty,a5=x,", "same after commit");
    scan_below_str(t, "", "b", s, sizeof s);
    is_str(s, "a=x,a1=x,a25=dirty,a3=new,a4=dirty,a5=x,", "below b after commit (LMDB side bounded)");
    for (int i = 0; i < 100; i++) { /* enough new keys to go through the pending list */
        char pk[16];
        snprintf(pk, sizeof pk, "a0%03d", i);
        tput(t, pk, "p");
    }
    scan_below_str(t, "", "a0002", s, sizeof s);
    is_str(s, "a=x,a0000=p,a0001=p,", "pending keys below the bound, in order");
    {
        StorIter *it;
        const void *rk, *rv;
        size_t rkl, rvl, n = 0;
        char out[256] = "";
        stor_iter_open_range(t, "a", 1, "a0098", 5, "a3", 2, &it, NULL);
        while (stor_iter_next(it, &rk, &rkl, &rv, &rvl, NULL) == 1)
            n += (size_t)snprintf(out + n, sizeof out - n, "%.*s,", (int)rkl, (const char *)rk);
        stor_iter_close(it);
        is_str(out, "a0098,a0099,a1,a25,", "range [a0098, a3): pending, committed and dirty keys");
        commit_tables(env, 3, &t, 1);
        n = 0;
        out[0] = 0;
        stor_iter_open_range(t, "a", 1, "a0098", 5, "a3", 2, &it, NULL);
        while (stor_iter_next(it, &rk, &rkl, &rv, &rvl, NULL) == 1)
            n += (size_t)snprintf(out + n, sizeof out - n, "%.*s,", (int)rkl, (const char *)rk);
        stor_iter_close(it);
        is_str(out, "a0098,a0099,a1,a25,", "the same range from LMDB after a commit");
    }

    /* Many committed rows (several batches) with every 7th deleted and
     * every 5th overwritten in the dirty map; written while iterating. */
    StorTable *b;
    stor_table_open(env, 3, &b, NULL);
    char k[32], v[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(k, sizeof k, "k%06d", i);
        tput(b, k, "c");
    }
    commit_tables(env, 4, &b, 1);
    for (int i = 0; i < 3000; i++) {
        snprintf(k, sizeof k, "k%06d", i);
        if (i % 7 == 0)
            stor_table_delete(b, k, strlen(k), NULL);
        else if (i % 5 == 0)
            tput(b, k, "d");
    }
    StorIter *it;
    const void *pk, *pv;
    size_t kl, vl;
    int n = 0, bad = 0, i = 0, order_ok = 1;
    char prev[32] = "";
    stor_iter_open(b, "k", 1, &it, NULL);
    while (stor_iter_next(it, &pk, &kl, &pv, &vl, NULL) == 1) {
        while (i % 7 == 0)
            i++;
        snprintf(k, sizeof k, "k%06d", i);
        snprintf(v, sizeof v, "%s", i % 5 == 0 ? "d" : "c");
        if (kl != strlen(k) || memcmp(pk, k, kl) || vl != 1 || memcmp(pv, v, 1))
            bad++;
        if (strncmp(prev, pk, kl) >= 0)
            order_ok = 0;
        snprintf(prev, sizeof prev, "%.*s", (int)kl, (const char *)pk);
        if (n == 1000) /* checkpoint in the middle of the scan */
            commit_tables(env, 5, &b, 1);
        n++;
        i++;
    }
    stor_iter_close(it);
    is_int(n, 3000 - 429, "big scan row count (batches, tombstones)");
    is_int(bad, 0, "big scan keys and values");
    ok(order_ok, "big scan strictly ordered");
    stor_table_close(b);
    stor_table_close(t);
    stor_table_close(u);
    stor_close(env);
}

static void test_abort_and_snapshot(void)
{
    char *dir = new_dir();
    StorEnv *env = open_env(dir, NULL);
    StorTable *t;
    StorCheckpoint *ck;
    WError err = {0};
    Buf mb = BUF_INIT;
    char v[64];
    uint64_t e;
    stor_table_open(env, 9, &t, NULL);
    tput(t, "k", "committed");
    stor_checkpoint_begin(env, 1, &ck, &err);
    stor_checkpoint_add_table(ck, t, &err);
    stor_checkpoint_put_meta(ck, "src/bids", "off=10", 6, &err);
    is_int(stor_checkpoint_commit(ck, &err), 0, "commit epoch 1");

    tput(t, "x", "1");
    tput(t, "k", "changed");
    stor_checkpoint_begin(env, 2, &ck, &err);
    stor_checkpoint_add_table(ck, t, &err);
    stor_checkpoint_put_meta(ck, "src/bids", "off=20", 6, &err);
    stor_checkpoint_abort(ck);
    is_int(stor_table_dirty_count(t), 2, "abort keeps dirty entries");
    tget(t, "k", v, sizeof v);
    is_str(v, "changed", "abort keeps dirty value readable");
    stor_last_epoch(env, &e, NULL);
    is_int(e, 1, "abort: epoch unchanged");
    stor_meta_get(env, "src/bids", &mb, &err);
    is_str(mb.data, "off=10", "abort: meta unchanged");
    stor_table_close(t);
    stor_close(env);

    env = open_env(dir, NULL);
    stor_table_open(env, 9, &t, NULL);
    is_int(tget(t, "x", v, sizeof v), 0, "abort: nothing visible after reopen");
    tget(t, "k", v, sizeof v);
    is_str(v, "committed", "abort: old value after reopen");
    stor_last_epoch(env, &e, NULL);
    is_int(e, 1, "abort: epoch after reopen");

    /* Writes after add_table belong to the next checkpoint. */
    tput(t, "a", "in-ck");
    tput(t, "k", "in-ck");
    stor_checkpoint_begin(env, 2, &ck, &err);
    stor_checkpoint_add_table(ck, t, &err);
    stor_checkpoint_put_meta(ck, "src/bids", "off=30", 6, &err);
    stor_checkpoint_put_meta(ck, "sink/pg", "pending", 7, &err);
    tput(t, "k", "after-snapshot");
    tput(t, "late", "after-snapshot");
    is_int(stor_checkpoint_commit(ck, &err), 0, "commit epoch 2");
    is_int(stor_table_dirty_count(t), 2, "writes after snapshot stay dirty");
    tget(t, "k", v, sizeof v);
    is_str(v, "after-snapshot", "newest value still read");
    stor_table_close(t); /* drops the two later writes */
    stor_close(env);

    env = open_env(dir, NULL);
    stor_table_open(env, 9, &t, NULL);
    tget(t, "k", v, sizeof v);
    is_str(v, "in-ck", "commit holds the snapshot value");
    tget(t, "a", v, sizeof v);
    is_str(v, "in-ck", "commit holds new key");
    is_int(tget(t, "late", v, sizeof v), 0, "post-snapshot write not in checkpoint");
    stor_last_epoch(env, &e, NULL);
    is_int(e, 2, "epoch 2 after reopen");
    is_int(stor_meta_get(env, "src/bids", &mb, &err), 1, "meta found");
    is_str(mb.data, "off=30", "meta value");
    is_int(stor_meta_get(env, "nope", &mb, &err), 0, "missing meta");
    stor_checkpoint_begin(env, 3, &ck, &err);
    stor_checkpoint_delete_meta(ck, "sink/pg", &err);
    stor_checkpoint_commit(ck, &err);
    is_int(stor_meta_get(env, "sink/pg", &mb, &err), 0, "meta deleted by checkpoint");
    buf_free(&mb);
    stor_table_close(t);
    stor_close(env);
}

/* The checkpoint's write on another thread while the table keeps being
 * read, written and scanned: the engine's asynchronous checkpoints. */
typedef struct {
    StorCheckpoint *ck;
    int rc;
} WriteJob;

static void *write_job(void *arg)
{
    WriteJob *j = arg;
    j->rc = stor_checkpoint_write(j->ck, NULL);
    return NULL;
}

static void test_async_write(void)
{
    char *dir = new_dir();
    StorEnv *env = open_env(dir, NULL);
    StorTable *t;
    StorCheckpoint *ck;
    WError err = {0};
    char k[32], v[64];
    enum { N = 20000 };
    stor_table_open(env, 5, &t, NULL);
    for (int i = 0; i < N; i++) {
        snprintf(k, sizeof k, "k%06d", i);
        tput(t, k, "e1");
    }
    commit_tables(env, 1, &t, 1);
    for (int i = 0; i < N; i++) {
        snprintf(k, sizeof k, "k%06d", i);
        tput(t, k, "e2");
    }
    stor_checkpoint_begin(env, 2, &ck, &err);
    stor_checkpoint_add_table(ck, t, &err);
    WriteJob j = {ck, -99};
    pthread_t th;
    pthread_create(&th, NULL, write_job, &j);
    /* Meanwhile: the next epoch's writes (same-size and longer values,
     * deletes: the snapshot's frozen rows must not change under the
     * writer), point reads and a full scan. */
    int bad = 0;
    for (int i = 0; i < N; i += 2) {
        snprintf(k, sizeof k, "k%06d", i);
        tput(t, k, i % 4 ? "e3" : "e3-and-a-longer-value");
        snprintf(k, sizeof k, "n%06d", i);
        tput(t, k, "e3");
    }
    for (int i = 1; i < N; i += 4) {
        snprintf(k, sizeof k, "k%06d", i);
        stor_table_delete(t, k, strlen(k), NULL);
    }
    for (int i = 0; i < N; i++) {
        snprintf(k, sizeof k, "k%06d", i);
        const char *want = i % 2 ? "e2" : i % 4 ? "e3" : "e3-and-a-longer-value";
        if (i % 4 == 1)
            bad += tget(t, k, v, sizeof v) != 0;
        else
            bad += tget(t, k, v, sizeof v) != 1 || strcmp(v, want) != 0;
    }
    is_int(bad, 0, "reads during the write see the newest values");
    StorIter *it;
    size_t n_scan = 0;
    const void *kp, *vp;
    size_t kl, vl;
    stor_iter_open(t, "k", 1, &it, NULL);
    while (stor_iter_next(it, &kp, &kl, &vp, &vl, NULL) == 1)
        n_scan++;
    stor_iter_close(it);
    is_int(n_scan, N - N / 4, "a scan during the write sees every live key once");
    pthread_join(th, NULL);
    is_int(j.rc, 0, "write on another thread succeeds");
    StorCheckpoint *ck2 = NULL;
    is_int(stor_checkpoint_begin(env, 3, &ck2, &err) < 0, 1, "no new checkpoint before finish");
    is_str(err.sqlstate, "55006", "checkpoint still open: 55006");
    is_int(stor_table_dirty_count(t), N + N / 2, "entries stay dirty until finish");
    stor_checkpoint_finish(ck);
    is_int(stor_table_dirty_count(t), N / 2 + N / 2 + N / 4,
           "finish cleans only the snapshot's entries");
    /* Keys never committed are answered by the committed-key filter,
     * not LMDB (a filter false positive costs one read: allow 5%). */
    uint64_t reads0 = stor_table_point_reads(t);
    int found = 0;
    for (int i = 0; i < 1000; i++) {
        snprintf(k, sizeof k, "new%06d", i);
        found += tget(t, k, v, sizeof v);
    }
    is_int(found, 0, "keys never written are absent");
    ok(stor_table_point_reads(t) - reads0 < 50, "absent keys skip LMDB");
    stor_table_close(t); /* drops the later writes */
    stor_close(env);

    env = open_env(dir, NULL);
    stor_table_open(env, 5, &t, NULL);
    /* Reopened over committed rows: no filter, so absent keys ask LMDB. */
    reads0 = stor_table_point_reads(t);
    is_int(tget(t, "new000001", v, sizeof v), 0, "absent after reopen");
    is_int(stor_table_point_reads(t) - reads0, 1, "after reopen an absent key reads LMDB");
    uint64_t e;
    stor_last_epoch(env, &e, NULL);
    is_int(e, 2, "epoch 2 after reopen");
    bad = 0;
    for (int i = 0; i < N; i++) {
        snprintf(k, sizeof k, "k%06d", i);
        bad += tget(t, k, v, sizeof v) != 1 || strcmp(v, "e2") != 0;
    }
    is_int(bad, 0, "the snapshot's values are durable");
    is_int(tget(t, "n000000", v, sizeof v), 0, "later writes are not in it");
    stor_table_close(t);
    stor_close(env);
}

static void test_drop(void)
{
    char *dir = new_dir();
    StorEnv *env = open_env(dir, NULL);
    StorTable *t[3];
    char k[16], s[256];
    for (int i = 0; i < 3; i++) {
        stor_table_open(env, (uint64_t)i + 100, &t[i], NULL);
        for (int j = 0; j < 500; j++) {
            snprintf(k, sizeof k, "%d", j);
            tput(t[i], k, "v");
        }
    }
    commit_tables(env, 1, t, 3);
    for (int i = 0; i < 3; i++)
        stor_table_close(t[i]);
    is_int(stor_table_drop(env, 101, NULL), 0, "drop");
    stor_close(env);
    env = open_env(dir, NULL);
    stor_table_open(env, 101, &t[1], NULL);
    scan_str(t[1], "", s, sizeof s);
    is_str(s, "", "dropped table is empty after reopen");
    stor_table_open(env, 100, &t[0], NULL);
    stor_table_open(env, 102, &t[2], NULL);
    is_int(tget(t[0], "499", s, sizeof s), 1, "neighbour below intact");
    is_int(tget(t[2], "0", s, sizeof s), 1, "neighbour above intact");
    for (int i = 0; i < 3; i++)
        stor_table_close(t[i]);
    stor_close(env);
}

/* Random operations against a reference model, with a tiny cache budget
 * so eviction, backward-shift deletion and LMDB fallback reads all run. */
#define MODEL_KEYS 1500
static void test_model(bool format1)
{
    char *dir = new_dir();
    /* format1: the table lives in `state` (a directory of an older weir). */
    if (format1)
        setenv("WEIR_STORAGE_FORMAT", "1", 1);
    StorEnv *env = open_env(dir, NULL);
    unsetenv("WEIR_STORAGE_FORMAT");
    StorTable *t;
    static int cur[MODEL_KEYS], com[MODEL_KEYS]; /* value+1, 0 = absent */
    memset(cur, 0, sizeof cur);
    memset(com, 0, sizeof com);
    int bad_get = 0, bad_scan = 0, fails = 0;
    uint64_t epoch = 0;
    srand(12345);
    stor_table_open(env, 77, &t, NULL);
    stor_table_set_cache_budget(t, 8192);
    for (int step = 0; step < 200000; step++) {
        int r = rand() % 1000, i = rand() % MODEL_KEYS;
        char k[16], v[64];
        snprintf(k, sizeof k, "m%d", i);
        if (r < 450) {
            int val = rand() % 100000;
            snprintf(v, sizeof v, "%d-%0*d", val, val % 40, 0);
            stor_table_put(t, k, strlen(k), v, strlen(v), NULL);
            cur[i] = val + 1;
        } else if (r < 650) {
            stor_table_delete(t, k, strlen(k), NULL);
            cur[i] = 0;
        } else if (r < 985) {
            const void *pv;
            size_t vl;
            int rc = stor_table_get(t, k, strlen(k), &pv, &vl, NULL);
            if (rc != (cur[i] != 0))
                bad_get++;
            else if (rc == 1 && atoi(pv) != cur[i] - 1)
                bad_get++;
        } else if (r < 993) {
            StorCheckpoint *ck;
            fails += stor_checkpoint_begin(env, ++epoch, &ck, NULL) < 0;
            fails += stor_checkpoint_add_table(ck, t, NULL) < 0;
            fails += stor_checkpoint_commit(ck, NULL) < 0;
            memcpy(com, cur, sizeof com);
        } else if (r < 996) {
            StorCheckpoint *ck;
            stor_checkpoint_begin(env, epoch + 1, &ck, NULL);
            stor_checkpoint_add_table(ck, t, NULL);
            stor_checkpoint_abort(ck);
        } else if (r < 997) {
            stor_table_set_cache_budget(t, (size_t)(rand() % 3) * 8192);
        } else {
            /* Full scan: keys in memcmp order, values match the model. */
            static char seen[MODEL_KEYS];
            StorIter *it;
            const void *pk, *pv;
            size_t kl, vl;
            char prev[16] = "";
            memset(seen, 0, sizeof seen);
            /* Alternately the whole table and a narrower prefix (keys m1, m1x, m1xx). */
            bool narrow = rand() % 2;
            stor_iter_open(t, narrow ? "m1" : "m", narrow ? 2 : 1, &it, NULL);
            while (stor_iter_next(it, &pk, &kl, &pv, &vl, NULL) == 1) {
                char kk[16];
                snprintf(kk, sizeof kk, "%.*s", (int)kl, (const char *)pk);
                int j = atoi(kk + 1);
                if (strcmp(prev, kk) >= 0 || j < 0 || j >= MODEL_KEYS || !cur[j] ||
                    atoi(pv) != cur[j] - 1)
                    bad_scan++;
                else
                    seen[j] = 1;
                strcpy(prev, kk);
            }
            stor_iter_close(it);
            for (int j = 0; j < MODEL_KEYS; j++) {
                char kk[16];
                snprintf(kk, sizeof kk, "m%d", j);
                bool in_scope = !narrow || strncmp(kk, "m1", 2) == 0;
                bad_scan += in_scope && (cur[j] != 0) != seen[j];
            }
        }
    }
    is_int(bad_get, 0, "model: every get matches");
    is_int(bad_scan, 0, "model: every scan matches");
    is_int(fails, 0, "model: checkpoints succeed");
    ok(epoch > 0, "model: some checkpoints ran");
    stor_table_close(t);
    stor_close(env);

    env = open_env(dir, NULL);
    stor_table_open(env, 77, &t, NULL);
    int bad = 0;
    for (int i = 0; i < MODEL_KEYS; i++) {
        char k[16];
        const void *pv;
        size_t vl;
        snprintf(k, sizeof k, "m%d", i);
        int rc = stor_table_get(t, k, strlen(k), &pv, &vl, NULL);
        bad += rc != (com[i] != 0) || (rc == 1 && atoi(pv) != com[i] - 1);
    }
    is_int(bad, 0, "model: reopen shows exactly the last committed state");
    stor_table_close(t);
    stor_close(env);
}

/* ---------------------------------------------------------------------------
 * Layout: a database per table, MDB_APPEND above its last key, format-1
 * directories, the database limit. Where rows are is read with LMDB itself.
 * ------------------------------------------------------------------------- */

typedef struct Raw {
    long in_state;      /* rows of the table in `state` */
    long own;           /* rows in its own database, -1: no such database */
    uint64_t version;
} Raw;

static Raw raw_layout(const char *dir, uint64_t id)
{
    Raw r = {-1, -1, 0};
    MDB_env *e;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_cursor *cur;
    MDB_val k, d;
    char name[32];
    uint8_t pfx[8];
    for (int i = 0; i < 8; i++)
        pfx[i] = (uint8_t)(id >> (56 - 8 * i));
    if (mdb_env_create(&e) || mdb_env_set_maxdbs(e, 64) ||
        mdb_env_open(e, dir, MDB_RDONLY, 0644) || mdb_txn_begin(e, NULL, MDB_RDONLY, &txn)) {
        diag("raw_layout: cannot open %s", dir);
        return r;
    }
    if (mdb_dbi_open(txn, "state", 0, &dbi) == 0 && mdb_cursor_open(txn, dbi, &cur) == 0) {
        r.in_state = 0;
        k.mv_size = 8;
        k.mv_data = pfx;
        for (int rc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE);
             rc == 0 && k.mv_size >= 8 && memcmp(k.mv_data, pfx, 8) == 0;
             rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT))
            r.in_state++;
        mdb_cursor_close(cur);
    }
    snprintf(name, sizeof name, "t%016llx", (unsigned long long)id);
    if (mdb_dbi_open(txn, name, 0, &dbi) == 0 && mdb_cursor_open(txn, dbi, &cur) == 0) {
        r.own = 0;
        for (int rc = mdb_cursor_get(cur, &k, &d, MDB_FIRST); rc == 0;
             rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT))
            r.own++;
        mdb_cursor_close(cur);
    }
    if (mdb_dbi_open(txn, "sys", 0, &dbi) == 0) {
        k.mv_size = 7;
        k.mv_data = "version";
        if (mdb_get(txn, dbi, &k, &d) == 0 && d.mv_size == 8)
            for (int i = 0; i < 8; i++)
                r.version = r.version << 8 | ((uint8_t *)d.mv_data)[i];
    }
    mdb_txn_abort(txn);
    mdb_env_close(e);
    return r;
}

static void put_id(StorTable *t, uint64_t id, int val)
{
    uint8_t k[8];
    char v[16];
    for (int i = 0; i < 8; i++)
        k[i] = (uint8_t)(id >> (56 - 8 * i));
    snprintf(v, sizeof v, "%d", val);
    stor_table_put(t, k, 8, v, strlen(v), NULL);
}

static void del_id(StorTable *t, uint64_t id)
{
    uint8_t k[8];
    for (int i = 0; i < 8; i++)
        k[i] = (uint8_t)(id >> (56 - 8 * i));
    stor_table_delete(t, k, 8, NULL);
}

/* Compares a full scan of t (8-byte ids) with model[] (value + 1, 0 = none). */
static int scan_mismatches(StorTable *t, const int *model, uint64_t n)
{
    StorIter *it;
    const void *k, *v;
    size_t kl, vl;
    int bad = 0;
    uint64_t next = 0;
    if (stor_iter_open(t, NULL, 0, &it, NULL) < 0)
        return -1;
    while (stor_iter_next(it, &k, &kl, &v, &vl, NULL) == 1) {
        uint64_t id = 0;
        if (kl != 8) {
            bad++;
            continue;
        }
        for (int i = 0; i < 8; i++)
            id = id << 8 | ((const uint8_t *)k)[i];
        while (next < id && next < n)
            bad += model[next++] != 0; /* a row the scan skipped */
        char buf[16];
        snprintf(buf, sizeof buf, "%.*s", (int)vl, (const char *)v);
        bad += id >= n || model[id] != atoi(buf) + 1;
        next = id + 1;
    }
    while (next < n)
        bad += model[next++] != 0;
    stor_iter_close(it);
    return bad;
}

/* An append-mostly table, as a view's rows under row ids: each checkpoint
 * adds ids above every committed one (the MDB_APPEND path) and also
 * rewrites, deletes and fills in ids below the last one (the cursor path),
 * and deletes a key above the last one that was never committed. */
#define APPEND_IDS 40000
static void test_append_rows(void)
{
    char *dir = new_dir();
    StorEnv *env = open_env(dir, NULL);
    StorTable *t;
    static int model[APPEND_IDS];
    uint64_t top = 0;
    stor_table_open(env, 5, &t, NULL);
    for (int epoch = 1; epoch <= 4; epoch++) {
        /* Even ids appended; the odd ids left behind are filled in later. */
        for (int j = 0; j < 4000; j++, top += 2) {
            put_id(t, top, epoch * 100000 + (int)top);
            model[top] = epoch * 100000 + (int)top + 1;
        }
        if (epoch > 1) {
            for (uint64_t id = 1; id < top - 8000; id += 7) { /* fill-ins and rewrites below the last key */
                put_id(t, id, -(int)id - 1);
                model[id] = -(int)id;
            }
            for (uint64_t id = 4; id < top - 8000; id += 11) {
                del_id(t, id);
                model[id] = 0;
            }
        }
        put_id(t, top + 1, 1); /* above the last key, deleted before its first checkpoint */
        del_id(t, top + 1);
        commit_tables(env, (uint64_t)epoch, &t, 1);
    }
    stor_table_put(t, "", 0, "empty", 5, NULL); /* an empty key: LMDB keys may not be empty */
    commit_tables(env, 5, &t, 1);
    is_int(scan_mismatches(t, model, APPEND_IDS), 1, "append: scan before reopen (plus the empty key)");
    stor_table_close(t);
    stor_close(env);

    Raw r = raw_layout(dir, 5);
    long want = 1;
    for (int i = 0; i < APPEND_IDS; i++)
        want += model[i] != 0;
    is_int(r.own, want, "append: every row in the table's own database");
    is_int(r.in_state, 0, "append: none in state");
    is_int((long)r.version, 2, "append: format 2 stamped");

    env = open_env(dir, NULL);
    stor_table_open(env, 5, &t, NULL);
    const void *v;
    size_t vl;
    ok(stor_table_get(t, "", 0, &v, &vl, NULL) == 1 && vl == 5 && memcmp(v, "empty", 5) == 0,
       "append: the empty key reads back");
    stor_table_delete(t, "", 0, NULL);
    commit_tables(env, 6, &t, 1);
    is_int(scan_mismatches(t, model, APPEND_IDS), 0, "append: reopened scan matches the model");
    int bad = 0;
    for (uint64_t id = 0; id < APPEND_IDS; id += 3) {
        uint8_t k[8];
        for (int i = 0; i < 8; i++)
            k[i] = (uint8_t)(id >> (56 - 8 * i));
        int rc = stor_table_get(t, k, 8, &v, &vl, NULL);
        char buf[16];
        snprintf(buf, sizeof buf, "%.*s", rc == 1 ? (int)vl : 0, rc == 1 ? (const char *)v : "");
        bad += rc != (model[id] != 0) || (rc == 1 && atoi(buf) + 1 != model[id]);
    }
    is_int(bad, 0, "append: reopened gets match the model");
    stor_table_close(t);
    is_int(stor_table_drop(env, 5, NULL), 0, "append: drop");
    stor_close(env);
    r = raw_layout(dir, 5);
    is_int(r.own, -1, "append: drop deletes the table's database");
    env = open_env(dir, NULL);
    stor_table_open(env, 5, &t, NULL);
    char s[64];
    scan_str(t, "", s, sizeof s);
    is_str(s, "", "append: the dropped table reopens empty");
    stor_table_close(t);
    stor_close(env);
}

/* A data directory written by a weir of format 1 (every table in `state`;
 * WEIR_STORAGE_FORMAT=1 writes that layout): its tables stay in `state` and
 * keep working, tables opened later get their own databases, drop clears
 * both, and the directory is restamped 2 so the older weir refuses it. */
static void test_old_layout(void)
{
    char *dir = new_dir();
    StorTable *t[3];
    char s[256];
    WError err = {0};
    setenv("WEIR_STORAGE_FORMAT", "1", 1);
    StorEnv *env = open_env(dir, NULL);
    stor_table_open(env, 10, &t[0], NULL);
    stor_table_open(env, 11, &t[1], NULL);
    tput(t[0], "a", "1");
    tput(t[0], "c", "3");
    tput(t[1], "x", "old");
    commit_tables(env, 1, t, 2);
    stor_table_close(t[0]);
    stor_table_close(t[1]);
    stor_close(env);
    unsetenv("WEIR_STORAGE_FORMAT");
    Raw r = raw_layout(dir, 10);
    ok(r.in_state == 2 && r.own == -1 && r.version == 1, "old layout: format 1 writes to state");

    env = open_env(dir, NULL);
    stor_table_open(env, 10, &t[0], NULL);
    stor_table_open(env, 11, &t[1], NULL);
    stor_table_open(env, 12, &t[2], NULL);
    scan_str(t[0], "", s, sizeof s);
    is_str(s, "a=1,c=3,", "old layout: format-1 rows read back");
    tput(t[0], "b", "2"); /* between committed keys */
    tput(t[0], "d", "4"); /* above them */
    stor_table_delete(t[0], "a", 1, NULL);
    tput(t[1], "y", "new");
    tput(t[2], "n", "fresh");
    commit_tables(env, 2, t, 3);
    for (int i = 0; i < 3; i++)
        stor_table_close(t[i]);
    stor_close(env);
    r = raw_layout(dir, 10);
    ok(r.in_state == 3 && r.own == -1, "old layout: a format-1 table stays in state");
    is_int((long)r.version, 2, "old layout: restamped format 2");
    r = raw_layout(dir, 12);
    ok(r.in_state == 0 && r.own == 1, "old layout: a new table gets its own database");

    setenv("WEIR_STORAGE_FORMAT", "1", 1);
    StorEnv *old = NULL;
    ok(stor_open(dir, NULL, &old, &err) < 0 && strcmp(err.sqlstate, "58030") == 0,
       "old layout: the format-1 layout is refused on a format-2 directory");
    unsetenv("WEIR_STORAGE_FORMAT");
    env = open_env(dir, NULL);
    stor_table_open(env, 10, &t[0], NULL);
    stor_table_open(env, 11, &t[1], NULL);
    stor_table_open(env, 12, &t[2], NULL);
    scan_str(t[0], "", s, sizeof s);
    is_str(s, "b=2,c=3,d=4,", "old layout: the format-1 table after a format-2 checkpoint");
    scan_str(t[1], "", s, sizeof s);
    is_str(s, "x=old,y=new,", "old layout: its neighbour");
    scan_str(t[2], "", s, sizeof s);
    is_str(s, "n=fresh,", "old layout: the new table");
    for (int i = 0; i < 3; i++)
        stor_table_close(t[i]);
    is_int(stor_table_drop(env, 10, NULL), 0, "old layout: drop a format-1 table");
    is_int(stor_table_drop(env, 12, NULL), 0, "old layout: drop a new table");
    stor_close(env);
    Raw r10 = raw_layout(dir, 10), r11 = raw_layout(dir, 11), r12 = raw_layout(dir, 12);
    ok(r10.in_state == 0 && r10.own == -1 && r12.in_state == 0 && r12.own == -1 && r11.in_state == 2,
       "old layout: drop removes the rows from state or the database, and nothing else");
}

/* StorOptions.max_table_dbs: tables past it share `state` (and work as
 * well); a table whose database exists but finds no free slot fails with
 * 54000; a drop frees its slot. */
static void test_dbi_limit(void)
{
    char *dir = new_dir();
    StorOptions o = {.max_table_dbs = 2};
    StorTable *t[5];
    char s[64], k[8];
    WError err = {0};
    StorEnv *env = open_env(dir, &o);
    for (int i = 0; i < 4; i++) {
        stor_table_open(env, (uint64_t)i + 1, &t[i], NULL);
        snprintf(k, sizeof k, "k%d", i + 1);
        tput(t[i], k, "v");
    }
    commit_tables(env, 1, t, 4);
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        /* Read back from LMDB where the checkpoint put them. */
        stor_table_set_cache_budget(t[i], 0);
        snprintf(k, sizeof k, "k%d", i + 1);
        bad += tget(t[i], k, s, sizeof s) != 1 || strcmp(s, "v") != 0;
        stor_table_close(t[i]);
    }
    is_int(bad, 0, "limit: every table reads its rows back after its first checkpoint");
    /* Tables that never commit a put get no database: the temporary tables
     * of ad hoc queries, and a table whose checkpoint held tombstones only. */
    stor_table_open(env, 6, &t[0], NULL);
    stor_table_open(env, 7, &t[1], NULL);
    tput(t[0], "gone", "v");
    stor_table_delete(t[1], "never", 5, NULL);
    commit_tables(env, 2, &t[1], 1);
    stor_table_close(t[0]);
    stor_table_close(t[1]);
    stor_close(env);
    Raw r6 = raw_layout(dir, 6), r7 = raw_layout(dir, 7);
    ok(r6.own == -1 && r6.in_state == 0 && r7.own == -1 && r7.in_state == 0,
       "limit: tables that never commit a put make no database");
    Raw r1 = raw_layout(dir, 1), r2 = raw_layout(dir, 2), r3 = raw_layout(dir, 3), r4 = raw_layout(dir, 4);
    ok(r1.own == 1 && r2.own == 1 && r1.in_state == 0, "limit: the first tables get databases");
    ok(r3.own == -1 && r3.in_state == 1 && r4.own == -1 && r4.in_state == 1,
       "limit: tables past it share state");

    o.max_table_dbs = 1;
    env = open_env(dir, &o);
    is_int(stor_table_open(env, 1, &t[0], NULL), 0, "limit lowered: the first table opens");
    is_int(stor_table_open(env, 2, &t[1], &err), -1, "limit lowered: a table whose database finds no slot fails");
    is_str(err.sqlstate, "54000", "limit lowered: 54000");
    ok(strstr(err.msg, "state table 2") != NULL, "limit lowered: the message names the table");
    is_int(stor_table_open(env, 3, &t[2], NULL), 0, "limit lowered: a table in state opens");
    scan_str(t[2], "", s, sizeof s);
    is_str(s, "k3=v,", "limit lowered: its rows");
    stor_table_close(t[0]);
    stor_table_close(t[2]);
    stor_close(env);

    o.max_table_dbs = 2;
    env = open_env(dir, &o);
    is_int(stor_table_drop(env, 1, NULL), 0, "limit: drop a table with a database");
    stor_table_open(env, 2, &t[1], NULL);
    stor_table_open(env, 5, &t[4], NULL); /* takes the dropped table's slot */
    tput(t[4], "k5", "v");
    commit_tables(env, 3, &t[4], 1);
    scan_str(t[1], "", s, sizeof s);
    is_str(s, "k2=v,", "limit: the other table still reads");
    stor_table_close(t[1]);
    stor_table_close(t[4]);
    stor_close(env);
    Raw r5 = raw_layout(dir, 5);
    ok(r5.own == 1 && r5.in_state == 0, "limit: a drop frees a database slot");

    /* Tables 2 and 5 have databases; a process that opens neither still
     * finds the limit reached, so the next restart can open them all. */
    env = open_env(dir, &o);
    stor_table_open(env, 8, &t[0], NULL);
    tput(t[0], "k8", "v");
    commit_tables(env, 4, &t[0], 1);
    stor_table_close(t[0]);
    stor_close(env);
    Raw r8 = raw_layout(dir, 8);
    ok(r8.own == -1 && r8.in_state == 1, "limit: databases of tables not open count too");
    env = open_env(dir, &o);
    int opened = 0;
    uint64_t ids[] = {2, 5, 8};
    for (int i = 0; i < 3; i++) {
        opened += stor_table_open(env, ids[i], &t[i], NULL) == 0;
        if (t[i])
            stor_table_close(t[i]);
    }
    is_int(opened, 3, "limit: every table opens after a restart");
    /* Every slot is taken now (tables 2 and 5): dropping a table that has
     * no database must not need one. */
    is_int(stor_table_drop(env, 8, NULL), 0, "limit: drop with every slot taken");
    is_int(stor_table_drop(env, 5, NULL), 0, "limit: drop of a database with every slot taken");
    stor_close(env);
    r8 = raw_layout(dir, 8);
    r5 = raw_layout(dir, 5);
    ok(r8.in_state == 0 && r5.own == -1 && raw_layout(dir, 2).own == 1, "limit: those drops took their rows");
}

/* A checkpoint of thousands of rows (the writer radix-sorts them) whose
 * keys share long prefixes, tie in their first 24 bytes, or are shorter
 * than 8: every row lands, once, with its value. */
static void test_big_checkpoint(void)
{
    char *dir = new_dir();
    StorEnv *env = open_env(dir, NULL);
    StorTable *t;
    enum { N = 6000 };
    static char keys[N][48];
    static size_t klens[N];
    stor_table_open(env, 91, &t, NULL);
    srand(777);
    for (int i = 0; i < N; i++) {
        int kind = i % 3;
        if (kind == 0)
            klens[i] = (size_t)snprintf(keys[i], sizeof keys[i], "%d", i); /* short */
        else if (kind == 1)
            klens[i] = (size_t)snprintf(keys[i], sizeof keys[i], "prefix-shared-by-many-keys-%08d", rand() % 100000 * N + i);
        else
            klens[i] = (size_t)snprintf(keys[i], sizeof keys[i], "w%07d:%d", i % 7, i);
        char v[32];
        int vl = snprintf(v, sizeof v, "v%d", i);
        stor_table_put(t, keys[i], klens[i], v, (size_t)vl, NULL);
    }
    StorCheckpoint *ck;
    int fails = stor_checkpoint_begin(env, 1, &ck, NULL) < 0;
    fails += stor_checkpoint_add_table(ck, t, NULL) < 0;
    fails += stor_checkpoint_commit(ck, NULL) < 0;
    is_int(fails, 0, "big checkpoint: commits");
    stor_table_close(t);
    stor_close(env);
    env = open_env(dir, NULL);
    stor_table_open(env, 91, &t, NULL);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        const void *pv;
        size_t vl;
        char v[32];
        snprintf(v, sizeof v, "v%d", i);
        bad += stor_table_get(t, keys[i], klens[i], &pv, &vl, NULL) != 1 || vl != strlen(v) || memcmp(pv, v, vl);
    }
    is_int(bad, 0, "big checkpoint: every row reads back after reopen");
    StorIter *it;
    const void *pk, *pv;
    size_t kl, vl;
    int n = 0;
    stor_iter_open(t, NULL, 0, &it, NULL);
    while (stor_iter_next(it, &pk, &kl, &pv, &vl, NULL) == 1)
        n++;
    stor_iter_close(it);
    is_int(n, N, "big checkpoint: no row twice");
    stor_table_close(t);
    stor_close(env);
}

static void fill(StorTable *t, int from, int n, size_t vlen, uint64_t tag)
{
    char k[32];
    char *v = malloc(vlen);
    memset(v, 'v', vlen);
    memcpy(v, &tag, sizeof tag);
    for (int i = from; i < from + n; i++) {
        snprintf(k, sizeof k, "row%08d", i);
        stor_table_put(t, k, strlen(k), v, vlen, NULL);
    }
    free(v);
}

static void test_growth(void)
{
    char *dir = new_dir();
    StorOptions o = {.initial_map_size = 1 * MiB};
    StorEnv *env = open_env(dir, &o);
    StorTable *t;
    StorStats st;
    int fails = 0;
    stor_table_open(env, 1, &t, NULL);
    for (int e = 1; e <= 10; e++) {
        StorCheckpoint *ck;
        WError err = {0};
        fill(t, (e - 1) * 5000, 5000, 1000, (uint64_t)e); /* 5 MB per epoch */
        stor_checkpoint_begin(env, (uint64_t)e, &ck, &err);
        stor_checkpoint_add_table(ck, t, &err);
        if (stor_checkpoint_commit(ck, &err) < 0) {
            fails++;
            diag("epoch %d: %s %s", e, err.sqlstate, err.msg);
        }
    }
    is_int(fails, 0, "50 MB over 10 checkpoints from a 1 MiB map");
    stor_stats(env, &st);
    ok(st.map_size >= 50 * MiB, "map grew past 50 MiB");
    ok(st.n_map_grows > 0, "growth counted");
    is_int(st.last_epoch, 10, "stats last epoch");
    stor_table_close(t);
    stor_close(env);
    env = open_env(dir, &o);
    stor_table_open(env, 1, &t, NULL);
    const void *v;
    size_t vl;
    uint64_t tag = 0;
    is_int(stor_table_get(t, "row00049999", 11, &v, &vl, NULL), 1, "last row after reopen");
    if (vl >= 8)
        memcpy(&tag, v, 8);
    is_int(tag, 10, "last row tag");
    stor_table_close(t);
    stor_close(env);
}

static void test_map_cap(void)
{
    char *dir = new_dir();
    StorOptions o = {.initial_map_size = 1 * MiB, .max_map_size = 4 * MiB};
    StorEnv *env = open_env(dir, &o);
    StorTable *t;
    StorCheckpoint *ck;
    WError err = {0};
    stor_table_open(env, 1, &t, NULL);
    fill(t, 0, 100, 100, 1);
    stor_checkpoint_begin(env, 1, &ck, &err);
    stor_checkpoint_add_table(ck, t, &err);
    stor_checkpoint_put_meta(ck, "offset", "1", 1, &err);
    is_int(stor_checkpoint_commit(ck, &err), 0, "small checkpoint under the cap");
    fill(t, 0, 10000, 1000, 2); /* 10 MB: over the 4 MiB cap */
    stor_checkpoint_begin(env, 2, &ck, &err);
    stor_checkpoint_add_table(ck, t, &err);
    stor_checkpoint_put_meta(ck, "offset", "2", 1, &err);
    int rc = stor_checkpoint_commit(ck, &err);
    ok(rc < 0, "checkpoint over max_map_size fails");
    is_str(err.sqlstate, "53100", "... with 53100");
    is_int(stor_table_dirty_count(t), 10000, "failed commit keeps dirty entries");
    uint64_t e;
    stor_last_epoch(env, &e, NULL);
    is_int(e, 1, "epoch unchanged in memory");
    /* The engine keeps running: a small checkpoint of another table works. */
    StorTable *u;
    stor_table_open(env, 2, &u, NULL);
    tput(u, "x", "y");
    werr_clear(&err);
    stor_checkpoint_begin(env, 2, &ck, &err);
    stor_checkpoint_add_table(ck, u, &err);
    is_int(stor_checkpoint_commit(ck, &err), 0, "env usable after 53100");
    stor_table_close(u);
    stor_table_close(t);
    stor_close(env);

    env = open_env(dir, &o);
    Buf mb = BUF_INIT;
    stor_meta_get(env, "offset", &mb, NULL);
    is_str(mb.data, "1", "previous checkpoint's meta intact");
    buf_free(&mb);
    stor_table_open(env, 1, &t, NULL);
    int bad = 0, n = 0;
    StorIter *it;
    const void *k, *v;
    size_t kl, vl;
    stor_iter_open(t, NULL, 0, &it, NULL);
    while (stor_iter_next(it, &k, &kl, &v, &vl, NULL) == 1) {
        uint64_t tag;
        memcpy(&tag, v, 8);
        bad += tag != 1 || vl != 100;
        n++;
    }
    stor_iter_close(it);
    is_int(n, 100, "previous checkpoint's rows intact");
    is_int(bad, 0, "... with their old values");
    stor_table_close(t);
    stor_close(env);
}

static void test_lock(void)
{
    char *dir = new_dir();
    StorEnv *env = open_env(dir, NULL), *env2 = NULL;
    WError err = {0};
    ok(stor_open(dir, NULL, &env2, &err) < 0 && env2 == NULL, "second open in-process fails");
    is_str(err.sqlstate, "55006", "... with 55006");
    ok(strstr(err.msg, "in use") != NULL, "... and says the directory is in use");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        StorEnv *e2 = NULL;
        WError e = {0};
        int rc = stor_open(dir, NULL, &e2, &e);
        _exit(rc < 0 && !strcmp(e.sqlstate, "55006") ? 42 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 42, "open from another process fails with 55006");
    stor_close(env);
    env = open_env(dir, NULL);
    ok(env != NULL, "open works again after close");
    stor_close(env);
}

/* Catalog writers and metadata readers on other threads while the engine
 * thread checkpoints through many map growths. */
typedef struct {
    StorEnv *env;
    volatile int stop;
    int errors, n;
} Side;

static void *side_thread(void *arg)
{
    Side *s = arg;
    Buf b = BUF_INIT;
    while (!s->stop) {
        uint64_t id, e;
        WError err = {0};
        if (stor_next_id(s->env, &id, &err) < 0) {
            s->errors++;
            continue;
        }
        StorCatalogEntry ce = {id, 1, "obj", "body", 4};
        if (stor_catalog_put(s->env, &ce, &err) < 0 || stor_meta_get(s->env, "m", &b, &err) < 0 ||
            stor_last_epoch(s->env, &e, &err) < 0)
            s->errors++;
        StorStats st;
        stor_stats(s->env, &st);
        s->n++;
    }
    buf_free(&b);
    return NULL;
}

static int count_cb(void *arg, const StorCatalogEntry *e)
{
    (void)e;
    ++*(int *)arg;
    return 0;
}

static void test_threads(void)
{
    char *dir = new_dir();
    StorOptions o = {.initial_map_size = 1 * MiB};
    StorEnv *env = open_env(dir, &o);
    StorTable *t;
    Side s = {env, 0, 0, 0};
    pthread_t th[2];
    int fails = 0;
    stor_table_open(env, 1, &t, NULL);
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, side_thread, &s);
    for (int e = 1; e <= 20; e++) {
        StorCheckpoint *ck;
        WError err = {0};
        fill(t, e * 1000, 1000, 1000, (uint64_t)e);
        stor_checkpoint_begin(env, (uint64_t)e, &ck, &err);
        stor_checkpoint_add_table(ck, t, &err);
        stor_checkpoint_put_meta(ck, "m", &e, sizeof e, &err);
        fails += stor_checkpoint_commit(ck, &err) < 0;
        const void *v;
        size_t vl;
        fails += stor_table_get(t, "row00001000", 11, &v, &vl, &err) != 1;
    }
    s.stop = 1;
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    is_int(fails, 0, "checkpoints with concurrent catalog threads");
    is_int(s.errors, 0, "catalog threads saw no errors");
    int n = 0;
    stor_catalog_scan(env, count_cb, &n, NULL);
    is_int(n, s.n, "every concurrent catalog put is there");
    stor_table_close(t);
    stor_close(env);
}

/* ------------------------------------------------------------------------- */
/* Crash: a child checkpoints in a loop, reporting each committed epoch on a
 * pipe; the parent SIGKILLs it at a random moment, then checks the last
 * epoch is at least the last reported one and that the table and the
 * metadata are exactly that epoch's. */

#define CRASH_KEYS 400
static int crash_nkeys(uint64_t e) { return 100 + (int)((e * 37) % 300); }

static void crash_child(const char *dir, int wfd)
{
    StorOptions o = {.initial_map_size = 1 * MiB};
    StorEnv *env = NULL;
    StorTable *t;
    uint64_t e;
    if (stor_open(dir, &o, &env, NULL) < 0 || stor_table_open(env, 5, &t, NULL) < 0)
        _exit(3);
    stor_last_epoch(env, &e, NULL);
    for (;;) {
        e++;
        int n = crash_nkeys(e);
        char k[16], v[300];
        memset(v, 'p', sizeof v);
        for (int i = 0; i < CRASH_KEYS; i++) {
            snprintf(k, sizeof k, "key%04d", i);
            if (i < n) {
                memcpy(v, &e, 8);
                memcpy(v + 8, &i, sizeof i);
                stor_table_put(t, k, strlen(k), v, (size_t)(200 + i % 100), NULL);
            } else {
                stor_table_delete(t, k, strlen(k), NULL);
            }
        }
        StorCheckpoint *ck;
        if (stor_checkpoint_begin(env, e, &ck, NULL) < 0 || stor_checkpoint_add_table(ck, t, NULL) < 0 ||
            stor_checkpoint_put_meta(ck, "offset", &e, 8, NULL) < 0 ||
            stor_checkpoint_commit(ck, NULL) < 0)
            _exit(4);
        if (write(wfd, &e, 8) != 8)
            _exit(5);
    }
}

static void test_crash(void)
{
    char *dir = new_dir();
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    diag("crash seed %u", seed);
    srand(seed);
    for (int round = 0; round < 5; round++) {
        int fds[2];
        if (pipe(fds) < 0)
            return;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            crash_child(dir, fds[1]);
        }
        close(fds[1]);
        uint64_t got = 0, e;
        int n_read = 0;
        while (n_read < 3 && read(fds[0], &e, 8) == 8) {
            got = e;
            n_read++;
        }
        usleep((useconds_t)(rand() % 300000));
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        while (read(fds[0], &e, 8) == 8)
            got = e;
        close(fds[0]);
        ok(WIFSIGNALED(st), "child was killed mid-loop");

        StorEnv *env = open_env(dir, NULL);
        StorTable *t;
        uint64_t last = 0, meta = 0;
        Buf mb = BUF_INIT;
        stor_last_epoch(env, &last, NULL);
        ok(last >= got && last <= got + 1, "last epoch is the last acknowledged (or the next)");
        if (stor_meta_get(env, "offset", &mb, NULL) == 1 && mb.len == 8)
            memcpy(&meta, mb.data, 8);
        buf_free(&mb);
        is_int(meta, last, "metadata is from the last epoch");
        stor_table_open(env, 5, &t, NULL);
        StorIter *it;
        const void *k, *v;
        size_t kl, vl;
        int n = 0, bad = 0;
        stor_iter_open(t, NULL, 0, &it, NULL);
        while (stor_iter_next(it, &k, &kl, &v, &vl, NULL) == 1) {
            uint64_t ve;
            int vi;
            char want[16];
            memcpy(&ve, v, 8);
            memcpy(&vi, (const char *)v + 8, sizeof vi);
            snprintf(want, sizeof want, "key%04d", n);
            bad += ve != last || vi != n || kl != strlen(want) || memcmp(k, want, kl) ||
                   vl != (size_t)(200 + n % 100);
            n++;
        }
        stor_iter_close(it);
        is_int(n, crash_nkeys(last), "row set is exactly the last epoch's");
        is_int(bad, 0, "every row carries the last epoch");
        diag("round %d: killed after epoch %llu, recovered epoch %llu", round,
             (unsigned long long)got, (unsigned long long)last);
        stor_table_close(t);
        stor_close(env);
    }
}

/* A merged handle over three tables: committed and dirty rows of every
 * part, in one key order, by get and by each kind of iterator; a key kept
 * by several parts comes once; writes fail; the parts stay usable. */
static void test_merged(void)
{
    char *dir = new_dir();
    StorEnv *env = open_env(dir, NULL);
    StorTable *p[3], *m = NULL;
    WError err = {0};
    char s[1024];
    for (int i = 0; i < 3; i++)
        stor_table_open(env, 40 + (uint64_t)i, &p[i], NULL);
    ok(stor_table_open_merged(p, 0, &m, &err) < 0 && !strcmp(err.sqlstate, "XX000"), "merged: no parts refused");
    /* keys a0..a8 spread round-robin, b* in part 2 only; "zz" in every part */
    for (int k = 0; k < 9; k++) {
        char key[8], val[8];
        snprintf(key, sizeof key, "a%d", k);
        snprintf(val, sizeof val, "%d", k);
        tput(p[k % 3], key, val);
    }
    tput(p[2], "b1", "x");
    for (int i = 0; i < 3; i++) {
        char val[4];
        snprintf(val, sizeof val, "p%d", i);
        tput(p[i], "zz", val);
    }
    commit_tables(env, 1, p, 3);
    /* dirty rows over committed ones: a new key, an overwrite, a delete */
    tput(p[1], "a45", "new");
    tput(p[0], "a3", "three");
    stor_table_delete(p[2], "a5", 2, NULL);
    ok(stor_table_open_merged(p, 3, &m, &err) == 0, "merged: open");
    scan_str(m, "", s, sizeof s);
    ok(!strcmp(s, "a0=0,a1=1,a2=2,a3=three,a4=4,a45=new,a6=6,a7=7,a8=8,b1=x,zz=p0,"), "merged: full scan in key order");
    scan_str(m, "b", s, sizeof s);
    ok(!strcmp(s, "b1=x,"), "merged: prefix scan");
    scan_below_str(m, "a", "a45", s, sizeof s);
    ok(!strcmp(s, "a0=0,a1=1,a2=2,a3=three,a4=4,"), "merged: scan below");
    StorIter *it;
    const void *k, *v;
    size_t kl, vl, n = 0;
    s[0] = 0;
    if (stor_iter_open_range(m, "a", 1, "a4", 2, "a7", 2, &it, NULL) == 0) {
        while (stor_iter_next(it, &k, &kl, &v, &vl, NULL) == 1)
            n += (size_t)snprintf(s + n, sizeof s - n, "%.*s,", (int)kl, (const char *)k);
        stor_iter_close(it);
    }
    ok(!strcmp(s, "a4,a45,a6,"), "merged: range scan");
    char out[16];
    ok(tget(m, "a7", out, sizeof out) == 1 && !strcmp(out, "7"), "merged: get from the part that has it");
    ok(tget(m, "a5", out, sizeof out) == 0, "merged: a deleted key is gone");
    ok(tget(m, "zz", out, sizeof out) == 1 && !strcmp(out, "p0"), "merged: a shared key from the first part");
    ok(tget(m, "nope", out, sizeof out) == 0, "merged: missing key");
    ok(stor_table_put(m, "c", 1, "1", 1, &err) < 0 && !strcmp(err.sqlstate, "XX000"), "merged: put refused");
    ok(stor_table_delete(m, "a1", 2, &err) < 0 && !strcmp(err.sqlstate, "XX000"), "merged: delete refused");
    ok(stor_table_size_bytes(m) == stor_table_size_bytes(p[0]) + stor_table_size_bytes(p[1]) +
                                       stor_table_size_bytes(p[2]),
       "merged: size adds the parts");
    /* an iterator survives writes to a part between its calls */
    if (stor_iter_open(m, "a", 1, &it, NULL) == 0) {
        int rows = 0;
        while (stor_iter_next(it, &k, &kl, &v, &vl, NULL) == 1) {
            if (rows++ == 0)
                tput(p[1], "a9", "late");
        }
        stor_iter_close(it);
        ok(rows >= 8, "merged: iterating while a part is written");
    }
    stor_table_close(m);
    ok(tget(p[1], "a4", out, sizeof out) == 1 && !strcmp(out, "4"), "merged: parts stay open after close");
    for (int i = 0; i < 3; i++)
        stor_table_close(p[i]);
    stor_close(env);
}

int main(void)
{
    snprintf(base, sizeof base, "/tmp/weir-stor-XXXXXX");
    if (!mkdtemp(base)) {
        perror("mkdtemp");
        return 1;
    }
    test_catalog();
    test_catalog_in_checkpoint();
    test_table_basic();
    test_scan();
    test_merged();
    test_abort_and_snapshot();
    test_async_write();
    test_drop();
    test_model(false);
    test_model(true);
    test_append_rows();
    test_old_layout();
    test_dbi_limit();
    test_big_checkpoint();
    test_growth();
    test_map_cap();
    test_lock();
    test_threads();
    test_crash();
    rm_rf(base);
    return tap_done();
}
