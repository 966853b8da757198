/*
 * storage_int.h: private to the storage .c files -- the environment struct, the
 * transaction helpers that coordinate map growth, and the hooks between
 * state tables and checkpoints. Never included from outside storage/.
 */
#ifndef WEIR_STORAGE_INT_H
#define WEIR_STORAGE_INT_H

#include <lmdb.h>
#include <pthread.h>
#include <stdbool.h>

#include "storage.h"

/* Format 2: tables opened on a new data directory get an LMDB database of
 * their own (table_dbi_name); format 1 kept every table in `state`. A
 * format-1 directory is read as is and restamped 2 at open (its tables
 * stay in `state`), so a weir that only knows format 1 refuses it rather
 * than missing the newer tables' rows. */
#define STOR_FORMAT_VERSION 2u
#define STOR_FORMAT_OLDEST 1u
/* The four databases every environment has (catalog, meta, state, sys). */
#define STOR_CORE_DBS 4
/* Default StorOptions.max_table_dbs. Each read transaction's begin costs
 * LMDB a loop over the opened databases (a get from LMDB: +0.14 us per 100
 * open, bench_storage), so this stays moderate; tables past it share
 * `state`. */
#define STOR_DEFAULT_TABLE_DBS 256u
#define RTXN_POOL_MAX 32

/* Returned by a write-transaction body that filled err itself (not an
 * LMDB code: those are >0 errno values or in -30800..-30780). */
#define BODY_FAILED (-1)

/*
 * The environment. map_lock is the growth coordination: every LMDB
 * transaction of this process (read or write) runs with map_lock held for
 * reading; mdb_env_set_mapsize runs with it held for writing, so no
 * transaction is active while the map moves. Lock order: map_lock, then
 * LMDB's writer mutex, then mu. Reader transactions are recycled through a
 * small pool (mdb_txn_reset/renew) because with MDB_NOTLS a fresh one
 * takes LMDB's reader-table mutex.
 */
struct StorEnv {
    MDB_env *mdb;
    MDB_dbi dbi_catalog;        /* u64be id -> kind, name, body */
    MDB_dbi dbi_meta;           /* name bytes -> checkpoint metadata blob */
    MDB_dbi dbi_state;          /* u64be table id ++ user key -> value */
    MDB_dbi dbi_sys;            /* "epoch", "next_id", "version" */
    MDB_dbi dbi_main;           /* LMDB's main database: the named databases' records */
    unsigned psize;             /* LMDB page size in bytes */
    unsigned format;            /* layout new tables get: 2, or 1 (WEIR_STORAGE_FORMAT=1, tests) */
    int lock_fd;                /* holds flock(LOCK_EX) on dir/LOCK */
    char *dir;
    StorOptions opt;            /* defaults filled in */
    pthread_rwlock_t map_lock;
    pthread_mutex_t mu;         /* guards everything below */
    MDB_txn *rtxn_pool[RTXN_POOL_MAX]; /* reset read txns */
    int n_rtxn_pool;
    bool ck_open;               /* a StorCheckpoint exists */
    StorStats stats;            /* map_size/used_bytes filled on demand */
};

/* Map an LMDB or errno code to a SQLSTATE and fill err; returns -1. */
int stor_mdb_err(WError *err, int rc, const char *what);

/* A read transaction from the pool, map_lock held for reading until
 * env_read_end. Returns 0 or <0 with err filled. */
int env_read_begin(StorEnv *env, MDB_txn **txn, WError *err);
void env_read_end(StorEnv *env, MDB_txn *txn);

/* Run body in a write transaction and commit it durably. Before the
 * transaction the map is grown if `need` more bytes might not fit; on
 * MDB_MAP_FULL (from body or commit) everything is aborted, the map is
 * doubled (up to max_map_size) and body runs again from scratch, so body
 * must be re-runnable. body returns 0, an LMDB/errno code, or BODY_FAILED
 * after filling err. Returns 0 or <0 with err filled (53100 past the cap). */
typedef int (*WriteBody)(StorEnv *env, MDB_txn *txn, void *arg, WError *err);
int env_write(StorEnv *env, uint64_t need, WriteBody body, void *arg, WError *err);
/* Writes one catalog entry in txn (stor_catalog_put's body; also used by a
 * checkpoint that carries catalog changes). Returns an LMDB code. */
int catalog_put_txn(StorEnv *env, MDB_txn *txn, const StorCatalogEntry *e);

/* Big-endian helpers for keys. */
static inline void put_u64be(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}
static inline uint64_t get_u64be(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

/* Table <-> checkpoint hooks (table.c). */
uint64_t table_id(const StorTable *t);
/* Where t's rows live: database dbi, each LMDB key = prefix (pl bytes)
 * ++ user key. A table in `state` has its 8-byte id as prefix; a table
 * with its own database has one 0 byte (LMDB keys may not be empty).
 * Returns false if t has no database yet (no committed rows anywhere):
 * then the checkpoint creates one for it, or puts its rows in `state` when
 * no slot is left, and tells the table with table_placed. */
bool table_location(const StorTable *t, MDB_dbi *dbi, const uint8_t **prefix, size_t *pl);
/* On t's thread, after the commit that created t's database (or put its
 * first rows in `state`, in_state). */
void table_placed(StorTable *t, MDB_dbi dbi, bool in_state);
/* The name of table id's own database: "t" and 16 hex digits. */
void table_dbi_name(uint64_t id, char name[18]);
/* A header of a metadata record in a checkpoint (name, value follow). */
typedef struct TabRec {
    uint32_t klen;
    uint32_t vlen;
    uint8_t del;                /* 1 = tombstone (vlen 0) */
} TabRec;

/* One dirty entry of a table snapshot. data (key, then value) is the
 * table's own entry memory, frozen: the table does not change or free it
 * until table_checkpoint_done (a later write to the key gets new memory),
 * so the checkpoint's writer may read it from another thread meanwhile. */
typedef struct SnapRec {
    const char *data;
    uint32_t klen;
    uint32_t vlen;
    uint8_t del;                /* 1 = tombstone (vlen 0) */
} SnapRec;

/* Freeze t's dirty entries and list them, in slot order (the checkpoint's
 * writer sorts them), in *recs: an array the table owns and reuses, valid
 * until table_checkpoint_done. Adds their put keys to the committed-key
 * filter; returns the snapshot sequence number and counts. Marks t as part
 * of an open checkpoint. No entry is copied: the barrier costs one pass
 * over the slots and 24 bytes per dirty entry. */
uint64_t table_snapshot(StorTable *t, const SnapRec **recs, size_t *n_rows, uint64_t *n_bytes,
                        bool *any_put);
/* After commit (committed = true) entries written at or before snap_seq
 * become clean; after abort (false) nothing changes but the mark. */
void table_checkpoint_done(StorTable *t, uint64_t snap_seq, bool committed, bool any_put);
bool table_in_checkpoint(const StorTable *t);

#endif
