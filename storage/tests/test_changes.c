/*
 * test_changes.c: change capture (stor_checkpoint_changes) and restore
 * (stor_changes_apply, stor_table_drop_prefixes). Random puts, overwrites
 * and deletes over two tables across checkpoints: what each checkpoint
 * reports is exactly the epoch's last write per key; replaying every
 * report into a fresh directory gives the same tables; dropping a key
 * group's prefix removes that range only.
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage.h"
#include "tap.h"

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    return remove(p);
}
static void rm_rf(const char *p) { nftw(p, rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

#define NT 2          /* tables, ids 10 and 11 */
#define NK 300        /* keys per table: kg (2 bytes BE, 0..5) ++ u32 index */
#define EPOCHS 6

/* The model: a key's current value (-1 = absent) and its last write in the
 * epoch being built (0 none, 1 put, 2 delete). */
static int cur[NT][NK];
static int epoch_op[NT][NK];
static int epoch_seen[NT][NK];
static int committed[NT][NK]; /* the value as of the last checkpoint, -1 absent */

static void make_key(int k, uint8_t out[6])
{
    int kg = k % 6;
    out[0] = 0;
    out[1] = (uint8_t)kg;
    out[2] = (uint8_t)(k >> 24), out[3] = (uint8_t)(k >> 16), out[4] = (uint8_t)(k >> 8), out[5] = (uint8_t)k;
}
static int key_index(const uint8_t *k) { return (k[2] << 24) | (k[3] << 16) | (k[4] << 8) | k[5]; }

/* Every captured change, kept (copied) for the replay. */
typedef struct Kept {
    uint64_t table_id;
    uint8_t key[6];
    int val, del;
} Kept;
static Kept *kept;
static size_t n_kept;
static int bad_captures, extra_captures;

static int on_change(void *arg, const StorChange *c)
{
    (void)arg;
    int t = (int)c->table_id - 10;
    if (t < 0 || t >= NT || c->klen != 6) {
        bad_captures++;
        return 0;
    }
    int k = key_index(c->key);
    if (k < 0 || k >= NK || epoch_seen[t][k]) {
        extra_captures++; /* a key twice, or out of range */
        return 0;
    }
    epoch_seen[t][k] = 1;
    int val = -1;
    if (!c->del && c->vlen == sizeof val)
        memcpy(&val, c->val, sizeof val);
    if (epoch_op[t][k] == 0 || (epoch_op[t][k] == 2) != (c->del != 0) || (!c->del && val != cur[t][k]))
        bad_captures++;
    kept = realloc(kept, (n_kept + 1) * sizeof *kept);
    kept[n_kept].table_id = c->table_id;
    memcpy(kept[n_kept].key, c->key, 6);
    kept[n_kept].val = val;
    kept[n_kept].del = c->del;
    n_kept++;
    return 0;
}

/* Table t of env equals the model (kg_skip >= 0: that key group must be
 * empty instead). */
static int table_matches(StorEnv *env, int t, int kg_skip)
{
    StorTable *tab;
    WError err = {0};
    if (stor_table_open(env, (uint64_t)(10 + t), &tab, &err) < 0)
        return 0;
    int ok_ = 1;
    for (int k = 0; k < NK; k++) {
        uint8_t key[6];
        make_key(k, key);
        const void *v;
        size_t vl;
        int rc = stor_table_get(tab, key, 6, &v, &vl, &err);
        int want = (kg_skip >= 0 && k % 6 == kg_skip) ? -1 : cur[t][k];
        int got = -1;
        if (rc == 1 && vl == sizeof got)
            memcpy(&got, v, sizeof got);
        if (rc < 0 || got != want) {
            if (ok_)
                diag("table %d key %d: got %d want %d", 10 + t, k, got, want);
            ok_ = 0;
        }
    }
    stor_table_close(tab);
    return ok_;
}

int main(void)
{
    char base[] = "/tmp/weir_changes_XXXXXX";
    if (!mkdtemp(base))
        return 1;
    char d1[300], d2[300];
    snprintf(d1, sizeof d1, "%s/a", base);
    snprintf(d2, sizeof d2, "%s/b", base);
    srand(7);
    memset(cur, 0xff, sizeof cur);
    memset(committed, 0xff, sizeof committed);
    WError err = {0};
    StorEnv *env;
    ok(stor_open(d1, NULL, &env, &err) == 0, "open source directory");
    StorTable *tab[NT];
    for (int t = 0; t < NT; t++)
        stor_table_open(env, (uint64_t)(10 + t), &tab[t], &err);

    int all_ok = 1;
    size_t total_ops = 0;
    for (int e = 1; e <= EPOCHS; e++) {
        memset(epoch_op, 0, sizeof epoch_op);
        memset(epoch_seen, 0, sizeof epoch_seen);
        for (int i = 0; i < 400; i++) {
            int t = rand() % NT, k = rand() % (e == 1 ? NK / 2 : NK);
            uint8_t key[6];
            make_key(k, key);
            if (rand() % 4 == 0) {
                stor_table_delete(tab[t], key, 6, &err);
                cur[t][k] = -1;
                epoch_op[t][k] = 2;
            } else {
                int v = rand() % 100000;
                stor_table_put(tab[t], key, 6, &v, sizeof v, &err);
                cur[t][k] = v;
                epoch_op[t][k] = 1;
            }
            total_ops++;
        }
        StorCheckpoint *ck;
        int rc = stor_checkpoint_begin(env, (uint64_t)e, &ck, &err);
        for (int t = 0; t < NT && rc == 0; t++)
            rc = stor_checkpoint_add_table(ck, tab[t], &err);
        rc = rc ? rc : stor_checkpoint_write(ck, &err);
        /* After the write, before finish: the frozen records are still there. */
        stor_checkpoint_changes(ck, on_change, NULL);
        stor_checkpoint_finish(ck);
        int missing = 0;
        for (int t = 0; t < NT; t++)
            for (int k = 0; k < NK; k++)
                /* A delete of a key absent at the last checkpoint needs
                 * no tombstone (the table drops it when it knows the key
                 * was never committed); every other write must be there. */
                missing += epoch_op[t][k] && !epoch_seen[t][k] &&
                           !(epoch_op[t][k] == 2 && committed[t][k] == -1);
        memcpy(committed, cur, sizeof cur);
        if (rc || missing || bad_captures || extra_captures) {
            diag("epoch %d: rc %d missing %d bad %d extra %d", e, rc, missing, bad_captures, extra_captures);
            all_ok = 0;
        }
    }
    ok(all_ok, "each checkpoint's captured changes are exactly its last write per key (puts, overwrites, deletes)");
    diag("%zu operations, %zu captured changes", total_ops, n_kept);

    /* An epoch with nothing written captures nothing. */
    {
        size_t before = n_kept;
        StorCheckpoint *ck;
        stor_checkpoint_begin(env, EPOCHS + 1, &ck, &err);
        for (int t = 0; t < NT; t++)
            stor_checkpoint_add_table(ck, tab[t], &err);
        memset(epoch_seen, 0, sizeof epoch_seen);
        stor_checkpoint_changes(ck, on_change, NULL);
        stor_checkpoint_commit(ck, &err);
        ok(n_kept == before, "a checkpoint with no writes captures nothing");
    }
    for (int t = 0; t < NT; t++)
        stor_table_close(tab[t]);
    stor_close(env);

    /* Replay every captured change into a fresh directory, in batches. */
    StorEnv *env2;
    ok(stor_open(d2, NULL, &env2, &err) == 0, "open restore directory");
    StorChange *ch = calloc(n_kept, sizeof *ch);
    for (size_t i = 0; i < n_kept; i++) {
        ch[i].table_id = kept[i].table_id;
        ch[i].key = kept[i].key;
        ch[i].klen = 6;
        ch[i].val = &kept[i].val;
        ch[i].vlen = sizeof kept[i].val;
        ch[i].del = kept[i].del;
    }
    int rc = 0;
    for (size_t i = 0; i < n_kept && rc == 0; i += 100)
        rc = stor_changes_apply(env2, ch + i, n_kept - i < 100 ? n_kept - i : 100, &err);
    ok(rc == 0, "apply the captured changes in batches");
    ok(table_matches(env2, 0, -1) && table_matches(env2, 1, -1), "replayed tables equal the model");

    /* A key too long is refused before anything is written. */
    uint8_t big[STOR_MAX_KEY + 1] = {0};
    StorChange bad = {.table_id = 10, .key = big, .klen = sizeof big, .val = "x", .vlen = 1};
    ok(stor_changes_apply(env2, &bad, 1, &err) < 0 && !strcmp(err.sqlstate, "54000"), "too long key: 54000");

    /* Dropping key group 3 of table 10 removes that range only. */
    uint8_t kg3[2] = {0, 3};
    ok(stor_table_drop_prefixes(env2, 10, kg3, 2, 1, &err) == 0, "drop one key group's range");
    ok(table_matches(env2, 0, 3), "table 10 lost key group 3 only");
    ok(table_matches(env2, 1, -1), "table 11 untouched");
    ok(stor_table_drop_prefixes(env2, 99, kg3, 2, 1, &err) == 0, "dropping a range of a table with no rows is fine");
    stor_close(env2);
    free(ch);
    free(kept);
    rm_rf(base);
    return tap_done();
}
