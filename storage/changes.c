/*
 * changes.c: writing a stream of state-table changes straight into LMDB,
 * the restore end of a changelog (runtime/changelog.c reads a key group's
 * changelog partition and applies it here). The capture end is
 * stor_checkpoint_changes in checkpoint.c.
 *
 * A batch is one write transaction through env_write, so the map grows
 * and the body re-runs after MDB_MAP_FULL exactly as for a checkpoint.
 * Tables are located the way stor_table_open does (rows in `state`, else
 * a database of their own, created on first need), looked up again in
 * each run of the body: an aborted transaction closes the handles it
 * opened.
 */
#include "storage_int.h"

#include <string.h>

/* Where table id's rows are: `state` (pl 8) when it has rows there or the
 * directory is format 1, else its own database, created when `create`
 * (or `state` when no database slot is left). Returns MDB_NOTFOUND when
 * !create and the table has no rows anywhere. */
static int locate(StorEnv *env, MDB_txn *txn, uint64_t id, bool create, MDB_dbi *dbi, uint8_t prefix[8],
                  size_t *pl)
{
    MDB_cursor *cur;
    put_u64be(prefix, id);
    int rc = mdb_cursor_open(txn, env->dbi_state, &cur);
    if (rc)
        return rc;
    MDB_val k = {8, prefix}, d;
    rc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE);
    bool in_state = rc == 0 && k.mv_size >= 8 && memcmp(k.mv_data, prefix, 8) == 0;
    mdb_cursor_close(cur);
    if (rc && rc != MDB_NOTFOUND)
        return rc;
    if (in_state || env->format < 2) {
        *dbi = env->dbi_state;
        *pl = 8;
        return 0;
    }
    char name[18];
    table_dbi_name(id, name);
    MDB_val nk = {17, name}, nd;
    rc = mdb_get(txn, env->dbi_main, &nk, &nd);
    if (rc == MDB_NOTFOUND && !create)
        return MDB_NOTFOUND;
    if (rc == MDB_NOTFOUND) {
        /* The same rule as a checkpoint's first put (place_table). */
        MDB_stat st;
        if ((rc = mdb_stat(txn, env->dbi_main, &st)))
            return rc;
        if (st.ms_entries >= STOR_CORE_DBS + (size_t)env->opt.max_table_dbs) {
            *dbi = env->dbi_state;
            *pl = 8;
            return 0;
        }
        rc = mdb_dbi_open(txn, name, MDB_CREATE, dbi);
    } else if (rc == 0)
        rc = mdb_dbi_open(txn, name, 0, dbi);
    if (rc)
        return rc;
    prefix[0] = 0;
    *pl = 1;
    return 0;
}

typedef struct ApplyArg {
    const StorChange *ch;
    size_t n;
} ApplyArg;

static int apply_body(StorEnv *env, MDB_txn *txn, void *arg, WError *err)
{
    (void)err;
    ApplyArg *a = arg;
    uint8_t kb[8 + STOR_MAX_KEY];
    uint64_t cur_id = 0;
    bool have = false;
    MDB_dbi dbi = 0;
    size_t pl = 0;
    for (size_t i = 0; i < a->n; i++) {
        const StorChange *c = &a->ch[i];
        int rc;
        if (!have || c->table_id != cur_id) {
            if ((rc = locate(env, txn, c->table_id, true, &dbi, kb, &pl)))
                return rc;
            cur_id = c->table_id;
            have = true;
        }
        if (pl == 8)
            put_u64be(kb, cur_id);
        else
            kb[0] = 0;
        if (c->klen)
            memcpy(kb + pl, c->key, c->klen);
        MDB_val k = {pl + c->klen, kb};
        if (c->del) {
            rc = mdb_del(txn, dbi, &k, NULL);
            if (rc == MDB_NOTFOUND)
                rc = 0;
        } else {
            MDB_val d = {c->vlen, (void *)c->val};
            rc = mdb_put(txn, dbi, &k, &d, 0);
        }
        if (rc)
            return rc;
    }
    return 0;
}

int stor_changes_apply(StorEnv *env, const StorChange *changes, size_t n, WError *err)
{
    uint64_t need = 0;
    for (size_t i = 0; i < n; i++) {
        if (changes[i].klen > STOR_MAX_KEY)
            return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "storage: a restored key of %zu bytes is over %d",
                        changes[i].klen, STOR_MAX_KEY);
        need += changes[i].klen + (changes[i].del ? 0 : changes[i].vlen) + 16;
    }
    if (n == 0)
        return 0;
    ApplyArg a = {changes, n};
    return env_write(env, need, apply_body, &a, err);
}

typedef struct DropArg {
    uint64_t id;
    const uint8_t *prefixes;
    size_t plen, n;
} DropArg;

static int drop_prefix_body(StorEnv *env, MDB_txn *txn, void *arg, WError *err)
{
    (void)err;
    DropArg *a = arg;
    uint8_t kb[8 + STOR_MAX_KEY];
    MDB_dbi dbi;
    size_t pl;
    int rc = locate(env, txn, a->id, false, &dbi, kb, &pl);
    if (rc == MDB_NOTFOUND)
        return 0; /* no rows anywhere: nothing to drop */
    if (rc)
        return rc;
    MDB_cursor *cur;
    if ((rc = mdb_cursor_open(txn, dbi, &cur)))
        return rc;
    for (size_t i = 0; i < a->n && rc == 0; i++) {
        memcpy(kb + pl, a->prefixes + i * a->plen, a->plen);
        size_t fl = pl + a->plen;
        MDB_val k = {fl, kb}, d;
        for (rc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE); rc == 0;
             rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
            if (k.mv_size < fl || memcmp(k.mv_data, kb, fl) != 0)
                break;
            /* After a delete the cursor sits on the successor, which
             * MDB_NEXT returns (as in drop_body). */
            if ((rc = mdb_cursor_del(cur, 0)))
                break;
        }
        if (rc == MDB_NOTFOUND)
            rc = 0;
    }
    mdb_cursor_close(cur);
    return rc;
}

int stor_table_drop_prefixes(StorEnv *env, uint64_t table_id, const void *prefixes, size_t plen, size_t n,
                             WError *err)
{
    if (plen > STOR_MAX_KEY)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "storage: a key prefix of %zu bytes is over %d", plen,
                    STOR_MAX_KEY);
    if (n == 0)
        return 0;
    DropArg a = {table_id, prefixes, plen, n};
    return env_write(env, 0, drop_prefix_body, &a, err);
}

static int meta_delete_body(StorEnv *env, MDB_txn *txn, void *arg, WError *err)
{
    (void)err;
    const char *name = arg;
    MDB_val k = {strlen(name), (void *)name};
    int rc = mdb_del(txn, env->dbi_meta, &k, NULL);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

int stor_meta_delete(StorEnv *env, const char *name, WError *err)
{
    size_t n = strlen(name);
    if (n == 0 || n > STOR_MAX_NAME)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "storage: bad metadata name length %zu", n);
    return env_write(env, 0, meta_delete_body, (void *)name, err);
}
