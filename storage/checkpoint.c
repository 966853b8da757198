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

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arena.h"
#include "fault.h"

typedef struct CkTable {
    StorTable *t;
    uint64_t id;
    MDB_dbi dbi;        /* where its rows go (table_location) */
    uint8_t prefix[8];
    size_t pl;
    bool dbi_ok;        /* false: the table has no database yet; commit_body makes one */
    bool placed;        /* commit_body created its database or put it in `state` */
    uint64_t snap_seq;  /* the table's write sequence at add time */
    const SnapRec *recs; /* the table's frozen dirty entries, in slot order (owned by the table) */
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
    int n_cat;          /* catalog entries to write (copies, owned) */
    StorCatalogEntry *cat;
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
    const uint8_t *pfx;
    c->dbi_ok = table_location(t, &c->dbi, &pfx, &c->pl);
    memcpy(c->prefix, pfx, c->pl);
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

int stor_checkpoint_put_catalog(StorCheckpoint *ck, const StorCatalogEntry *e, WError *err)
{
    if (!e->name || strlen(e->name) > STOR_MAX_NAME)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "storage: catalog name too long (max %d bytes)", STOR_MAX_NAME);
    ck->cat = xrealloc(ck->cat, sizeof *ck->cat * (size_t)(ck->n_cat + 1));
    StorCatalogEntry *c = &ck->cat[ck->n_cat++];
    *c = *e;
    c->name = xstrdup(e->name);
    void *body = xmalloc(e->body_len ? e->body_len : 1);
    memcpy(body, e->body, e->body_len);
    c->body = body;
    ck->payload += e->body_len + strlen(e->name) + 64;
    return 0;
}

/* Tables in `state` first, in id order (each one's rows are a contiguous
 * key range there), then the tables with databases of their own. */
static int cktab_cmp(const void *a, const void *b)
{
    const CkTable *x = a, *y = b;
    if (x->pl != y->pl)
        return x->pl == 8 ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Write one row into dbi: kb holds the table prefix (pl bytes) for state
 * rows; a tombstone deletes. */
static int write_row(MDB_txn *txn, MDB_dbi dbi, const char *key, size_t klen, const char *val,
                     size_t vlen, bool del, uint8_t *kb, size_t pl)
{
    memcpy(kb + pl, key, klen);
    MDB_val k = {pl + klen, kb};
    if (del) {
        int rc = mdb_del(txn, dbi, &k, NULL);
        return rc == MDB_NOTFOUND ? 0 : rc;
    }
    MDB_val d = {vlen, (void *)val};
    return FAULT("lmdb_put") ? EIO : mdb_put(txn, dbi, &k, &d, 0);
}

static size_t rec_size(const char *rec)
{
    TabRec h;
    memcpy(&h, rec, sizeof h);
    return sizeof h + h.klen + h.vlen;
}

/* A row of a table's snapshot by its key's first PFX bytes (big-endian,
 * zero-padded), so most comparisons need no pointer chase. 32 bytes hold
 * the keys of most operators (a windowed aggregation's index key is a
 * window end and a group key: 26 bytes for one BIGINT column). */
#define PFX_WORDS 4
#define PFX (8 * PFX_WORDS)
typedef struct RecRef {
    uint64_t p[PFX_WORDS];
    const SnapRec *rec;
} RecRef;

static int recref_cmp(const void *a, const void *b)
{
    const RecRef *x = a, *y = b;
    for (int i = 0; i < PFX_WORDS; i++)
        if (x->p[i] != y->p[i])
            return x->p[i] < y->p[i] ? -1 : 1;
    uint32_t xl = x->rec->klen, yl = y->rec->klen;
    size_t n = xl < yl ? xl : yl;
    int c = n > PFX ? memcmp(x->rec->data + PFX, y->rec->data + PFX, n - PFX) : 0;
    if (c)
        return c;
    return (xl > yl) - (xl < yl);
}

static unsigned recref_byte(const RecRef *r, int b) { return (unsigned)(r->p[b / 8] >> (56 - 8 * (b % 8))) & 0xff; }

/* Sorts v[0..n) by key: a stable LSD radix sort on the keys' first PFX
 * bytes, skipping the bytes every key shares (a window's start, a
 * table's prefix), then qsort within the rare runs whose first PFX bytes
 * tie. A checkpoint sorts hundreds of thousands of rows: comparison
 * sorting them was a third of the writer's time. Bytes at or past
 * max_klen are zero padding in every key: not even counted (a row id key
 * is 8-9 bytes, and the histograms were most of the sort). */
static void radix_sort(RecRef *v, size_t n, size_t max_klen)
{
    if (n < 512) {
        if (n > 1)
            qsort(v, n, sizeof *v, recref_cmp);
        return;
    }
    int nb = max_klen < PFX ? (int)max_klen : PFX;
    size_t(*hist)[256] = xcalloc(PFX, sizeof *hist);
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < nb; b++)
            hist[b][recref_byte(&v[i], b)]++;
    RecRef *tmp = xmalloc(n * sizeof *tmp), *src = v, *dst = tmp;
    for (int b = nb - 1; b >= 0; b--) {
        if (hist[b][recref_byte(&v[0], b)] == n)
            continue; /* every key has this byte */
        size_t pos[256], sum = 0;
        for (int d = 0; d < 256; d++) {
            pos[d] = sum;
            sum += hist[b][d];
        }
        for (size_t i = 0; i < n; i++)
            dst[pos[recref_byte(&src[i], b)]++] = src[i];
        RecRef *t = src;
        src = dst;
        dst = t;
    }
    if (src != v)
        memcpy(v, src, n * sizeof *v);
    free(tmp);
    free(hist);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && !memcmp(v[j].p, v[i].p, sizeof v[i].p))
            j++;
        if (j - i > 1)
            qsort(v + i, j - i, sizeof *v, recref_cmp);
        i = j;
    }
}

/* The order to write a snapshot's rows in: by key (they arrive in
 * hash-slot order; LMDB writes far fewer pages when the keys come
 * sorted). On the writer thread, so the engine does not pay for the sort;
 * the rows themselves stay in the table's frozen entries. */
static void sort_recs(CkTable *c)
{
    RecRef *v = xmalloc((c->n_rows + 1) * sizeof *v);
    size_t max_klen = 0;
    for (size_t n = 0; n < c->n_rows; n++) {
        const SnapRec *r = &c->recs[n];
        if (n + 8 < c->n_rows)
            __builtin_prefetch(c->recs[n + 8].data); /* the entries are spread over the heap */
        uint8_t b[PFX] = {0};
        memcpy(b, r->data, r->klen < PFX ? r->klen : PFX);
        v[n].rec = r;
        if (r->klen > max_klen)
            max_klen = r->klen;
        for (int w = 0; w < PFX_WORDS; w++)
            v[n].p[w] = get_u64be(b + 8 * w);
    }
    radix_sort(v, c->n_rows, max_klen);
    c->order = v;
    c->n_order = c->n_rows;
}

/* LMDB's key order (memcmp, then the shorter first). */
static int lmdb_key_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen > blen) - (alen < blen);
}

/* Writes one table's snapshot, in key order, through one cursor. The rows
 * whose keys sort above every key the database holds go in with
 * MDB_APPEND: no search from the root, and a full page is left full when
 * the next one starts (a plain put into the middle of a B-tree splits the
 * page in half, so sequential inserts leave half-empty pages and write
 * twice the pages). With a database per table that is every new row of an
 * append-only table (row ids, window ends). The other rows are put through
 * the cursor, which LMDB does not re-search from the root while the key
 * falls on the page it is on. A tombstone above the last key has nothing
 * to delete. */
static int write_table(MDB_txn *txn, const CkTable *c, uint8_t *kb)
{
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, c->dbi, &cur);
    if (rc)
        return rc;
    memcpy(kb, c->prefix, c->pl);
    /* The database's last key, copied (a put may move the page). */
    uint8_t last[8 + STOR_MAX_KEY];
    size_t last_len = 0;
    MDB_val k, d;
    rc = mdb_cursor_get(cur, &k, &d, MDB_LAST);
    if (rc == 0) {
        last_len = k.mv_size;
        memcpy(last, k.mv_data, k.mv_size);
    } else if (rc != MDB_NOTFOUND)
        goto out;
    rc = 0;
    /* The first row above it: the rows are sorted. */
    size_t lo = 0, hi = c->n_order;
    if (last_len) {
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            const SnapRec *r = c->order[mid].rec;
            memcpy(kb + c->pl, r->data, r->klen);
            if (lmdb_key_cmp(kb, c->pl + r->klen, last, last_len) <= 0)
                lo = mid + 1;
            else
                hi = mid;
        }
    } else
        lo = 0;
    for (size_t j = 0; j < c->n_order; j++) {
        const SnapRec *r = c->order[j].rec;
        /* order[] is sequential, but each record and its entry are one
         * cache miss each (slot order, entries spread over the heap): fetch
         * both ahead, the record further ahead than the entry it points to. */
        if (j + 16 < c->n_order)
            __builtin_prefetch(c->order[j + 16].rec);
        if (j + 8 < c->n_order)
            __builtin_prefetch(c->order[j + 8].rec->data);
        memcpy(kb + c->pl, r->data, r->klen);
        k.mv_size = c->pl + r->klen;
        k.mv_data = kb;
        if (r->del) {
            if (j >= lo)
                continue;
            rc = mdb_cursor_get(cur, &k, &d, MDB_SET);
            if (rc == 0)
                rc = mdb_cursor_del(cur, 0);
            else if (rc == MDB_NOTFOUND)
                rc = 0;
        } else {
            d.mv_size = r->vlen;
            d.mv_data = (void *)(r->data + r->klen);
            rc = FAULT("lmdb_put") ? EIO : mdb_cursor_put(cur, &k, &d, j >= lo ? MDB_APPEND : 0);
        }
        if (rc)
            break;
    }
out:
    mdb_cursor_close(cur);
    return rc;
}

/* A table without a database gets one in this transaction (only write
 * transactions open databases: LMDB forbids two transactions doing it at
 * once), or `state` when no slot is left. Re-run from scratch after
 * MDB_MAP_FULL: an aborted transaction closes the handles it opened. */
static int place_table(StorEnv *env, MDB_txn *txn, CkTable *c)
{
    char name[18];
    table_dbi_name(c->id, name);
    c->placed = true;
    /* The limit counts the databases in the directory, not only the open
     * ones: then every table that has one finds a slot when it opens
     * (unless the limit was lowered), whichever tables a process opens. */
    MDB_stat st;
    int rc = mdb_stat(txn, env->dbi_main, &st);
    if (rc)
        return rc;
    if (st.ms_entries < STOR_CORE_DBS + (size_t)env->opt.max_table_dbs)
        rc = mdb_dbi_open(txn, name, MDB_CREATE, &c->dbi);
    else
        rc = MDB_DBS_FULL;
    if (rc == MDB_DBS_FULL) {
        c->dbi = env->dbi_state;
        put_u64be(c->prefix, c->id);
        c->pl = 8;
        return 0;
    }
    c->prefix[0] = 0;
    c->pl = 1;
    return rc;
}

static int commit_body(StorEnv *env, MDB_txn *txn, void *arg, WError *err)
{
    StorCheckpoint *ck = arg;
    int rc;
    uint8_t kb[8 + STOR_MAX_KEY];
    for (size_t i = 0; i < ck->n_tabs; i++) {
        CkTable *c = &ck->tabs[i];
        if (!c->dbi_ok) {
            c->placed = false;
            if (!c->any_put)
                continue; /* tombstones only, and nothing committed to delete */
            if ((rc = place_table(env, txn, c)))
                return rc;
        }
        if ((rc = write_table(txn, c, kb)))
            return rc;
    }
    for (size_t off = 0; off < ck->meta.len; off += rec_size(ck->meta.data + off)) {
        const char *rec = ck->meta.data + off;
        TabRec h;
        memcpy(&h, rec, sizeof h);
        if ((rc = write_row(txn, env->dbi_meta, rec + sizeof h, h.klen, rec + sizeof h + h.klen,
                            h.vlen, h.del, kb, 0)))
            return rc;
    }
    for (int i = 0; i < ck->n_cat; i++)
        if ((rc = catalog_put_txn(env, txn, &ck->cat[i])))
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
        if (committed && ck->tabs[i].placed)
            table_placed(ck->tabs[i].t, ck->tabs[i].dbi, ck->tabs[i].pl == 8);
        table_checkpoint_done(ck->tabs[i].t, ck->tabs[i].snap_seq, committed, ck->tabs[i].any_put);
        free(ck->tabs[i].order);
    }
    free(ck->tabs);
    buf_free(&ck->meta);
    for (int i = 0; i < ck->n_cat; i++) {
        free((char *)ck->cat[i].name);
        free((void *)ck->cat[i].body);
    }
    free(ck->cat);
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

int stor_checkpoint_changes(StorCheckpoint *ck, int (*fn)(void *arg, const StorChange *c), void *arg)
{
    for (size_t i = 0; i < ck->n_tabs; i++) {
        const CkTable *c = &ck->tabs[i];
        StorChange ch = {.table_id = c->id};
        for (size_t j = 0; j < c->n_rows; j++) {
            const SnapRec *r = &c->recs[j];
            /* The entries are spread over the heap (as in sort_recs). */
            if (j + 8 < c->n_rows)
                __builtin_prefetch(c->recs[j + 8].data);
            ch.key = r->data;
            ch.klen = r->klen;
            ch.val = r->data + r->klen;
            ch.vlen = r->vlen;
            ch.del = r->del;
            int rc = fn(arg, &ch);
            if (rc)
                return rc;
        }
    }
    return 0;
}
