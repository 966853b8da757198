/*
 * checkpoint.c: the epoch checkpoint -- collects the tables' dirty
 * snapshots and metadata in memory, then writes them with the epoch in one
 * durable LMDB write transaction at commit.
 *
 * Deferring every LMDB write to commit keeps the write transaction short
 * (no other writer waits while operators hand over state), lets commit
 * grow the map and re-run the whole transaction after MDB_MAP_FULL, and
 * freezes each table's contribution at add time so the operator can keep
 * writing the next epoch's state meanwhile -- on the same thread, or while
 * another thread runs stor_checkpoint_write (which touches only the
 * frozen records and the environment, never a table).
 */
#include "storage_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arena.h"

typedef struct CkTable {
    StorTable *t;
    uint64_t id;
    uint64_t snap_seq;  /* the table's write sequence at add time */
    Buf recs;           /* TabRec records, in slot order */
    struct RecRef *order; /* the records in key order (sort_recs, on the writer) */
    size_t n_order;
    size_t n_rows;
    bool any_put;
} CkTable;

struct StorCheckpoint {
    StorEnv *env;
    uint64_t epoch;
    CkTable *tabs;
    size_t n_tabs, cap_tabs;
    Buf meta;           /* TabRec records: name, value; del = delete */
    uint64_t payload;   /* key + value bytes to write */
    uint64_t n_rows;
    bool written;       /* the LMDB transaction committed */
    bool sorted;        /* every table has its write order (sort_recs) */
};

int stor_checkpoint_begin(StorEnv *env, uint64_t epoch, StorCheckpoint **out, WError *err)
{
    int rc = 0;
    pthread_mutex_lock(&env->mu);
    if (env->ck_open)
        rc = werr(err, STOR_SQLSTATE_OBJECT_IN_USE, 0, "storage: a checkpoint is already open");
    else if (epoch <= env->stats.last_epoch)
        rc = werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                  "storage: checkpoint epoch %llu is not after the last epoch %llu",
                  (unsigned long long)epoch, (unsigned long long)env->stats.last_epoch);
    else
        env->ck_open = true;
    pthread_mutex_unlock(&env->mu);
    if (rc < 0) {
        *out = NULL;
        return rc;
    }
    StorCheckpoint *ck = xcalloc(1, sizeof *ck);
    ck->env = env;
    ck->epoch = epoch;
    *out = ck;
    return 0;
}

int stor_checkpoint_add_table(StorCheckpoint *ck, StorTable *t, WError *err)
{
    if (table_in_checkpoint(t))
        return werr(err, SQLSTATE_INTERNAL, 0, "storage: table %llu added to a checkpoint twice",
                    (unsigned long long)table_id(t));
    if (ck->n_tabs == ck->cap_tabs) {
        ck->cap_tabs = ck->cap_tabs ? ck->cap_tabs * 2 : 16;
        ck->tabs = xrealloc(ck->tabs, ck->cap_tabs * sizeof *ck->tabs);
    }
    CkTable *c = &ck->tabs[ck->n_tabs++];
    memset(c, 0, sizeof *c);
    c->t = t;
    c->id = table_id(t);
    uint64_t bytes;
    c->snap_seq = table_snapshot(t, &c->recs, &c->n_rows, &bytes, &c->any_put);
    ck->payload += bytes;
    ck->n_rows += c->n_rows;
    return 0;
}

static int add_meta(StorCheckpoint *ck, const char *name, const void *val, size_t len, bool del,
                    WError *err)
{
    size_t nlen = strlen(name);
    if (nlen == 0 || nlen > STOR_MAX_NAME)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "storage: bad metadata name length %zu", nlen);
    if (len >= UINT32_MAX)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "storage: metadata value too large");
    TabRec h = {(uint32_t)nlen, (uint32_t)len, del};
    buf_append(&ck->meta, &h, sizeof h);
    buf_append(&ck->meta, name, nlen);
    buf_append(&ck->meta, val, len);
    ck->payload += nlen + len;
    return 0;
}

int stor_checkpoint_put_meta(StorCheckpoint *ck, const char *name, const void *val, size_t len,
                             WError *err)
{
    return add_meta(ck, name, val, len, false, err);
}

int stor_checkpoint_delete_meta(StorCheckpoint *ck, const char *name, WError *err)
{
    return add_meta(ck, name, NULL, 0, true, err);
}

static int cktab_cmp(const void *a, const void *b)
{
    const CkTable *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* Write one record (TabRec header, key, value) into dbi; kb holds the
 * table prefix (pl bytes) for state rows. */
static int write_rec(MDB_txn *txn, MDB_dbi dbi, const char *rec, uint8_t *kb, size_t pl)
{
    TabRec h;
    memcpy(&h, rec, sizeof h);
    const char *key = rec + sizeof h;
    memcpy(kb + pl, key, h.klen);
    MDB_val k = {pl + h.klen, kb};
    if (h.del) {
        int rc = mdb_del(txn, dbi, &k, NULL);
        return rc == MDB_NOTFOUND ? 0 : rc;
    }
    MDB_val d = {h.vlen, (void *)(key + h.klen)};
    return mdb_put(txn, dbi, &k, &d, 0);
}

static size_t rec_size(const char *rec)
{
    TabRec h;
    memcpy(&h, rec, sizeof h);
    return sizeof h + h.klen + h.vlen;
}

/* A record of a table's snapshot by its key's first 24 bytes (big-endian,
 * zero-padded), so most comparisons need no pointer chase. */
typedef struct RecRef {
    uint64_t p[3];
    const char *rec;
} RecRef;

static int recref_cmp(const void *a, const void *b)
{
    const RecRef *x = a, *y = b;
    for (int i = 0; i < 3; i++)
        if (x->p[i] != y->p[i])
            return x->p[i] < y->p[i] ? -1 : 1;
    TabRec hx, hy;
    memcpy(&hx, x->rec, sizeof hx);
    memcpy(&hy, y->rec, sizeof hy);
    size_t n = hx.klen < hy.klen ? hx.klen : hy.klen;
    int c = n > 24 ? memcmp(x->rec + sizeof hx + 24, y->rec + sizeof hy + 24, n - 24) : 0;
    if (c)
        return c;
    return (hx.klen > hy.klen) - (hx.klen < hy.klen);
}

/* The order to write a snapshot's records in: by key (they arrive in
 * hash-slot order; LMDB writes far fewer pages when the keys come
 * sorted). On the writer thread, so the engine does not pay for the sort;
 * the records themselves stay where the snapshot put them. */
static void sort_recs(CkTable *c)
{
    RecRef *v = xmalloc((c->n_rows + 1) * sizeof *v);
    size_t n = 0;
    for (size_t off = 0; off < c->recs.len && n < c->n_rows; n++) {
        const char *rec = c->recs.data + off;
        TabRec h;
        memcpy(&h, rec, sizeof h);
        uint8_t b[24] = {0};
        memcpy(b, rec + sizeof h, h.klen < 24 ? h.klen : 24);
        v[n] = (RecRef){{get_u64be(b), get_u64be(b + 8), get_u64be(b + 16)}, rec};
        off += rec_size(rec);
    }
    if (n > 1)
        qsort(v, n, sizeof *v, recref_cmp);
    c->order = v;
    c->n_order = n;
}

static int commit_body(StorEnv *env, MDB_txn *txn, void *arg, WError *err)
{
    StorCheckpoint *ck = arg;
    int rc;
    uint8_t kb[8 + STOR_MAX_KEY];
    for (size_t i = 0; i < ck->n_tabs; i++) {
        const CkTable *c = &ck->tabs[i];
        put_u64be(kb, c->id);
        for (size_t j = 0; j < c->n_order; j++)
            if ((rc = write_rec(txn, env->dbi_state, c->order[j].rec, kb, 8)))
                return rc;
    }
    for (size_t off = 0; off < ck->meta.len; off += rec_size(ck->meta.data + off))
        if ((rc = write_rec(txn, env->dbi_meta, ck->meta.data + off, kb, 0)))
            return rc;
    uint8_t eb[8];
    put_u64be(eb, ck->epoch);
    MDB_val k = {5, "epoch"}, d = {8, eb};
    return mdb_put(txn, env->dbi_sys, &k, &d, 0);
}

static void ck_free(StorCheckpoint *ck, bool committed)
{
    StorEnv *env = ck->env;
    for (size_t i = 0; i < ck->n_tabs; i++) {
        table_checkpoint_done(ck->tabs[i].t, ck->tabs[i].snap_seq, committed, ck->tabs[i].any_put);
        buf_free(&ck->tabs[i].recs);
        free(ck->tabs[i].order);
    }
    free(ck->tabs);
    buf_free(&ck->meta);
    pthread_mutex_lock(&env->mu);
    env->ck_open = false;
    pthread_mutex_unlock(&env->mu);
    free(ck);
}

static uint64_t now_usec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int stor_checkpoint_write(StorCheckpoint *ck, WError *err)
{
    StorEnv *env = ck->env;
    uint64_t t0 = now_usec();
    /* Tables in id order: each table's rows are a contiguous key range. */
    if (ck->n_tabs > 1)
        qsort(ck->tabs, ck->n_tabs, sizeof *ck->tabs, cktab_cmp);
    if (!ck->sorted) {
        for (size_t i = 0; i < ck->n_tabs; i++)
            sort_recs(&ck->tabs[i]);
        ck->sorted = true;
    }
    int rc = env_write(env, ck->payload, commit_body, ck, err);
    if (rc == 0) {
        pthread_mutex_lock(&env->mu);
        env->stats.last_epoch = ck->epoch;
        env->stats.last_commit_bytes = ck->payload;
        env->stats.last_commit_rows = ck->n_rows;
        env->stats.last_commit_usec = now_usec() - t0;
        env->stats.n_checkpoints++;
        pthread_mutex_unlock(&env->mu);
        ck->written = true;
    }
    return rc;
}

void stor_checkpoint_finish(StorCheckpoint *ck)
{
    ck_free(ck, ck->written);
}

int stor_checkpoint_commit(StorCheckpoint *ck, WError *err)
{
    int rc = stor_checkpoint_write(ck, err);
    stor_checkpoint_finish(ck);
    return rc;
}

void stor_checkpoint_abort(StorCheckpoint *ck)
{
    if (ck)
        ck_free(ck, false);
}
