/*
 * storage.h: weir's durable home -- one LMDB environment per data
 * directory holding the catalog, operator state tables and checkpoints.
 *
 * Data flow (see storage/README.md): an operator writes its StorTable;
 * writes land in an in-memory dirty map. At a barrier the checkpoint
 * coordinator opens a StorCheckpoint for the epoch, adds every table
 * (which snapshots its dirty entries), the source offsets and
 * the sinks' pending output as named metadata, and commits: one durable
 * LMDB write transaction is the checkpoint. Recovery opens the directory,
 * reads stor_last_epoch() and the metadata, and tables read their
 * committed rows back lazily.
 *
 * Threads: a StorEnv is shared. stor_catalog_*, stor_next_id,
 * stor_last_epoch, stor_meta_get and stor_stats may be called from any
 * thread at any time. A StorTable (and its iterators) is used by one
 * thread at a time; a StorCheckpoint too. At most one checkpoint is open
 * per environment.
 *
 * Errors: functions that can fail return 0 (or a documented positive
 * value) on success and a negative int on failure, filling *err (which
 * may be NULL) with a SQLSTATE: 58030 I/O error, 53100 disk or map full
 * (STOR_SQLSTATE_DISK_FULL), 54000 a key or name over the size limit,
 * 55006 data directory in use by another process or handle, 22023 a bad
 * argument, XX000 internal error. On failure nothing durable changed.
 *
 * Lifetimes: pointers returned by a call are valid until the next call on
 * the same object (table, iterator) or until the callback returns, as
 * documented per function. Storage never hands out pointers into LMDB's map.
 */
#ifndef WEIR_STORAGE_H
#define WEIR_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "error.h"

/* Storage's names for two codes of error.h's list. */
#define STOR_SQLSTATE_DISK_FULL      SQLSTATE_DISK_FULL
#define STOR_SQLSTATE_OBJECT_IN_USE  SQLSTATE_OBJECT_IN_USE

/* Longest user key in a state table, longest metadata name, longest
 * catalog name (LMDB's key limit minus the 8-byte table-id prefix). */
#define STOR_MAX_KEY   503
#define STOR_MAX_NAME  503

/* ---------------------------------------------------------------------------
 * Environment
 * ------------------------------------------------------------------------- */

typedef struct StorEnv StorEnv;

/* Tunables; zero fields take the default. */
typedef struct StorOptions {
    size_t initial_map_size;   /* bytes mapped at open; default 256 MiB (never less than the data) */
    size_t max_map_size;       /* growth cap in bytes; default 64 GiB; past it writes fail 53100 */
    size_t table_cache_bytes;  /* per-table budget for clean cached entries; default 256 MiB */
    unsigned max_table_dbs;    /* state tables with an LMDB database of their own; default 256.
                                * Tables opened past it share one database (slower checkpoints
                                * of append-only tables, nothing else changes) */
} StorOptions;

/* Open (creating if needed) the data directory dir.
 * @param dir  directory path; created (one level, mode 0755) if missing.
 * @param opt  options, or NULL for defaults; copied.
 * @param out  receives the environment, owned by the caller (stor_close).
 * @param err  filled on failure.
 * @return 0, or <0 with 55006 if another process or another StorEnv of
 *         this process already has dir open (an flock on dir/LOCK),
 *         58030 on I/O errors (unwritable dir, corrupt files), 53100 if
 *         the existing data is larger than max_map_size.
 * Stale LMDB reader slots left by dead processes are cleared at open. */
int stor_open(const char *dir, const StorOptions *opt, StorEnv **out, WError *err);

/* Close the environment and release the directory lock. All tables,
 * iterators and checkpoints must be closed first. NULL is allowed. */
void stor_close(StorEnv *env);

/* Environment statistics, for system views. Any thread. */
typedef struct StorStats {
    uint64_t last_epoch;         /* last committed checkpoint epoch, 0 = none */
    uint64_t map_size;           /* bytes currently mapped */
    uint64_t max_map_size;       /* growth cap in bytes */
    uint64_t used_bytes;         /* bytes of the data file in use (high-water pages) */
    uint64_t last_commit_bytes;  /* payload (keys + values) of the last checkpoint */
    uint64_t last_commit_rows;   /* rows (puts + deletes) written by the last checkpoint */
    uint64_t last_commit_usec;   /* wall time of the last stor_checkpoint_commit */
    uint64_t n_checkpoints;      /* checkpoints committed by this StorEnv */
    uint64_t n_map_grows;        /* map size increases by this StorEnv */
} StorStats;
void stor_stats(StorEnv *env, StorStats *out);

/* Writes a compacted copy of the environment (catalog, state, offsets: the
 * last committed checkpoint) into dir, which is created if needed and must
 * not hold a data directory yet. The copy is itself a data directory: a
 * savepoint. @return 0, or <0 (58030 I/O, 22023 dir in use). */
int stor_copy(StorEnv *env, const char *dir, WError *err);

/* ---------------------------------------------------------------------------
 * Catalog: sources, views, sinks... keyed by id. Each write is its own
 * durable transaction. Any thread.
 * ------------------------------------------------------------------------- */

typedef struct StorCatalogEntry {
    uint64_t id;           /* unique object id (from stor_next_id) */
    int32_t kind;          /* caller-defined object kind */
    const char *name;      /* NUL-terminated, at most STOR_MAX_NAME bytes */
    const void *body;      /* caller-defined serialized object (SQL, plan...) */
    size_t body_len;
} StorCatalogEntry;

/* Insert or replace the entry with e->id, durably. Also guarantees that
 * stor_next_id() never returns e->id or anything smaller afterwards.
 * @return 0, or <0 (53100, 58030, 54000 name too long). */
int stor_catalog_put(StorEnv *env, const StorCatalogEntry *e, WError *err);

/* Delete the entry with id durably. @return 1 deleted, 0 no such id, <0 error. */
int stor_catalog_delete(StorEnv *env, uint64_t id, WError *err);

/* Call fn for every entry in id order, on a consistent snapshot. The
 * entry and its pointers are valid only during that call of fn; fn may
 * call any storage function (the snapshot is copied before fn runs).
 * A nonzero return from fn stops the scan and is returned.
 * @return 0 after a complete scan, fn's nonzero value, or <0 on error. */
int stor_catalog_scan(StorEnv *env, int (*fn)(void *arg, const StorCatalogEntry *e),
                      void *arg, WError *err);

/* Allocate a fresh object id (1, 2, 3...), durably: ids are never reused,
 * even after a crash. @param out receives the id. @return 0 or <0. */
int stor_next_id(StorEnv *env, uint64_t *out, WError *err);

/* ---------------------------------------------------------------------------
 * State tables: a keyed byte store owned by one operator. Keys compare
 * bytewise (memcmp, shorter first on a tie), at most STOR_MAX_KEY bytes;
 * values any size. Writes go to an in-memory dirty map; reads consult the
 * dirty map, then a bounded cache of clean entries, then LMDB. One thread
 * at a time per table.
 * ------------------------------------------------------------------------- */

typedef struct StorTable StorTable;

/* Open the table with table_id (it exists implicitly; an unknown id is an
 * empty table). At most one open StorTable per table_id. A table whose
 * rows have their own LMDB database takes a write transaction to open it
 * (it waits for a checkpoint being written); a new one takes none.
 * @param out receives the table, owned by the caller (stor_table_close).
 * @return 0, or <0 (58030; 54000 when the table has a database and
 *         StorOptions.max_table_dbs databases are open already, which
 *         happens only if the limit was lowered since it was made). */
int stor_table_open(StorEnv *env, uint64_t table_id, StorTable **out, WError *err);

/* Free the table's memory. Its committed data stays; its dirty entries are
 * discarded (add it to a checkpoint first to keep them). The table must
 * not be part of an open checkpoint, nor have open iterators. NULL is ok. */
void stor_table_close(StorTable *t);

/* Durably delete every committed row of table_id in its own transaction.
 * Close the table's StorTable first. @return 0 or <0 (53100, 58030). */
int stor_table_drop(StorEnv *env, uint64_t table_id, WError *err);

/* Look key up.
 * @param val, vlen receive the value; *val is valid until the next call on t
 *        (any function taking t, including iterators on t).
 * @return 1 found, 0 not found, <0 error (58030; 54000 key too long). */
int stor_table_get(StorTable *t, const void *key, size_t klen, const void **val,
                   size_t *vlen, WError *err);

/* Set key to val (both copied) in the dirty map. @return 0, or <0 (54000). */
/* A hint that key will be written or read soon: starts loading the map's
 * slot for it into the cache. No effect on the table's contents. A caller
 * that knows the next keys ahead (an append-only join side) overlaps the
 * cache misses of a large map with its work on the rows before. */
void stor_table_prefetch(const StorTable *t, const void *key, size_t klen);
int stor_table_put(StorTable *t, const void *key, size_t klen, const void *val,
                   size_t vlen, WError *err);

/* Delete key (a tombstone in the dirty map, also for keys that do not
 * exist). @return 0, or <0 (54000). */
int stor_table_delete(StorTable *t, const void *key, size_t klen, WError *err);

/* Ordered scan over the merged view (dirty entries overlay committed data,
 * tombstones hide rows), restricted to keys starting with prefix (plen 0 =
 * all keys). The dirty entries are snapshotted at open, committed rows are
 * read in batches of short read transactions, so the table may be written
 * (and checkpointed) while an iterator is open: every key is returned at
 * most once and in order; a key written after open may show either value.
 * @param out receives the iterator, owned by the caller (stor_iter_close),
 *        which must be closed before the table.
 * @return 0 or <0. */
typedef struct StorIter StorIter;
int stor_iter_open(StorTable *t, const void *prefix, size_t plen, StorIter **out, WError *err);
/* stor_iter_open, and only keys below upper (ulen bytes; memcmp order,
 * shorter first on a tie). The snapshot at open copies only the dirty
 * entries in range, so a scan of the head of a big table (the rows a
 * watermark has passed) costs what it returns, not the table's size. */
int stor_iter_open_below(StorTable *t, const void *prefix, size_t plen, const void *upper, size_t ulen,
                         StorIter **out, WError *err);
/* stor_iter_open_below, starting at the first key >= lower (llen bytes,
 * lower NULL = from the prefix's first key). */
int stor_iter_open_range(StorTable *t, const void *prefix, size_t plen, const void *lower, size_t llen,
                         const void *upper, size_t ulen, StorIter **out, WError *err);

/* Next row in key order. Pointers are valid until the next call on it.
 * @return 1 row, 0 end, <0 error (58030). */
int stor_iter_next(StorIter *it, const void **key, size_t *klen, const void **val,
                   size_t *vlen, WError *err);
void stor_iter_close(StorIter *it);

/* A read-only handle over several tables read as one (a parallel view's
 * rows, kept by its materialize instances, each owning a part of the key
 * space). get returns the first part (in parts order) that has the key;
 * iterators (stor_iter_open / _below / _range) k-way merge the parts' own
 * iterators in key order, a key in several parts returned once, from the
 * first; their pointers are valid until the next call, as for one table.
 * put and delete fail (XX000); stor_table_size_bytes adds the parts up.
 * @param parts the tables, borrowed: each must stay open while the handle
 *        or an iterator on it is open (close the handle first).
 * @param out receives the handle, owned by the caller (stor_table_close,
 *        which leaves the parts open). @return 0, or <0 (XX000 no parts). */
int stor_table_open_merged(StorTable *const *parts, int n, StorTable **out, WError *err);

/* ---------------------------------------------------------------------------
 * Key groups (common/keygroup.h; storage/README.md "Key groups"). A
 * key-grouped table is an ordinary state table whose keys begin with a
 * 2-byte big-endian key group (0..STOR_MAX_KEY_GROUPS-1), so one group is
 * one contiguous key range: listed, exported, imported and dropped alone
 * (the unit a cluster hands over and changelogs). Keys an operator keeps
 * outside any group (its own bookkeeping, lead byte >= 0xF0) are never
 * touched by these calls. Same threading as the table's other calls.
 * ------------------------------------------------------------------------- */

/* Groups addressable by the 2-byte prefix; views use at most
 * WEIR_MAX_KEY_GROUPS of them (common/weir_limits.h). */
#define STOR_MAX_KEY_GROUPS 65536
/* First byte of a stor_kg_export_buf buffer. */
#define STOR_KG_EXPORT_VERSION 1

/* A read-only handle that reads a key-grouped table (plain or merged) as
 * if it had no groups: keys come back without their prefix, iterators
 * (given prefixes and bounds without it) return every group's keys merged
 * in key order, and get finds a key in whichever group holds it (it probes
 * the G groups in turn). For readers of a view's rows (SELECT, SUBSCRIBE's
 * snapshot, VERIFY, COPY, HTTP), which decode keys the operator wrote.
 * @param base borrowed; must stay open while the handle or an iterator on it is.
 * @param G    the table's key groups (1..STOR_MAX_KEY_GROUPS).
 * @param out  receives the handle (stor_table_close leaves base open).
 * @return 0, or <0 (XX000 bad arguments). put and delete on it fail (XX000). */
int stor_table_open_grouped(StorTable *base, int G, StorTable **out, WError *err);

/* The groups 0..G-1 of t that hold at least one key, ascending, into *out
 * (malloc'd, caller frees; NULL when none). One prefix seek per group.
 * @return the number of groups, or <0 (22023 G outside 1..STOR_MAX_KEY_GROUPS; 58030). */
int stor_kg_list(StorTable *t, int G, int **out, WError *err);

/* Calls fn for every entry of group kg in key order, on the merged view of
 * the table (dirty entries included); key (with its prefix) and val are
 * valid during the call only. A nonzero return from fn stops the scan and
 * is returned. @return 0, fn's value, or <0 (22023 kg out of range; 58030). */
int stor_kg_export(StorTable *t, int kg,
                   int (*fn)(void *arg, const void *key, size_t klen, const void *val, size_t vlen),
                   void *arg, WError *err);

/* Group kg as one buffer (reset first): u8 STOR_KG_EXPORT_VERSION, then per
 * entry u32 LE key length, the key (with its prefix), u32 LE value length,
 * the value, in key order. @return 0 or <0 as stor_kg_export. */
int stor_kg_export_buf(StorTable *t, int kg, Buf *out, WError *err);

/* Replaces group kg of t by the entries of a stor_kg_export_buf buffer: its
 * old entries are deleted, the buffer's put (dirty, durable at the next
 * checkpoint like any write). The whole buffer is checked first (version,
 * lengths, every key of group kg): on error nothing is written.
 * @return 0, or <0 (22023 malformed buffer or another group's key; XX000
 *         on a read-only handle). */
int stor_kg_import(StorTable *t, int kg, const void *data, size_t len, WError *err);

/* Deletes every entry of group kg (tombstones in the dirty map: the
 * checkpoint after makes it durable; other groups and keys outside groups
 * stay). @return 0, or <0 (22023 kg out of range; XX000 read-only handle; 58030). */
int stor_kg_drop(StorTable *t, int kg, WError *err);

/* Gets that had to read LMDB (missed the dirty map, the cache and the
 * committed-key filter), since open. */
uint64_t stor_table_point_reads(const StorTable *t);

/* Number of dirty entries (puts and tombstones) not yet committed. */
size_t stor_table_dirty_count(const StorTable *t);
/* Bytes held by those dirty entries (keys, values, entry overhead): memory
 * that only a successful checkpoint can release (the clean cache is bounded
 * and evictable, dirty entries are not). */
size_t stor_table_dirty_bytes(const StorTable *t);

/* Approximate state size in bytes: committed keys and values plus dirty
 * in-memory bytes. After a checkpoint touching the table the committed
 * part is recounted (a range scan, O(committed rows)) on the next call;
 * meant for system views, not the hot path. Errors count as 0. */
uint64_t stor_table_size_bytes(StorTable *t);
/* Entries committed by the last checkpoint that touched the table (the same
 * cached scan as stor_table_size_bytes; the dirty entries on top are
 * stor_table_dirty_count, not netted against them). Errors count as 0. */
uint64_t stor_table_committed_entries(StorTable *t);

/* Change the table's clean-cache byte budget (0 = cache nothing). */
void stor_table_set_cache_budget(StorTable *t, size_t bytes);

/* ---------------------------------------------------------------------------
 * Checkpoints: one LMDB write transaction per epoch holds every added
 * table's dirty entries, named metadata blobs and the epoch number.
 * Used by the engine (coordinator) thread.
 * ------------------------------------------------------------------------- */

typedef struct StorCheckpoint StorCheckpoint;

/* Start the checkpoint of epoch, which must be greater than the last
 * committed epoch. @param out receives it, owned until commit or abort.
 * @return 0, or <0 (22023 epoch not increasing, 55006 another checkpoint open). */
int stor_checkpoint_begin(StorEnv *env, uint64_t epoch, StorCheckpoint **out, WError *err);

/* Snapshot (copy) t's dirty entries into the checkpoint. The
 * entries stay dirty (and readable) until commit succeeds; writes to t
 * after this call belong to the next checkpoint. t must stay open until
 * commit or abort, and be added at most once. @return 0 or <0. */
int stor_checkpoint_add_table(StorCheckpoint *ck, StorTable *t, WError *err);

/* Record metadata name = val (copied) in the checkpoint; a later call with
 * the same name wins. @return 0, or <0 (54000 name too long). */
int stor_checkpoint_put_meta(StorCheckpoint *ck, const char *name, const void *val,
                             size_t len, WError *err);

/* Record the deletion of metadata name. @return 0 or <0. */
int stor_checkpoint_delete_meta(StorCheckpoint *ck, const char *name, WError *err);

/* Record catalog entry e (copied) to be written by the checkpoint's own
 * transaction, so a catalog change commits atomically with the state it
 * goes with (ALTER MATERIALIZED VIEW ... SWAP WITH: both names and the
 * sinks' switch-over batches). Same limits as stor_catalog_put.
 * @return 0, or <0 (54000 name too long). */
int stor_checkpoint_put_catalog(StorCheckpoint *ck, const StorCatalogEntry *e, WError *err);

/* Write everything in one durable LMDB transaction (fsync'd). Grows the
 * map as needed (retrying after MDB_MAP_FULL). On success the snapshotted
 * dirty entries of the added tables become clean. Frees ck in every case.
 * @return 0, or <0: 53100 when the data would exceed max_map_size or the
 *         disk is full, 58030 on I/O errors. On failure nothing was written
 *         and the tables keep their dirty entries for a later checkpoint. */
int stor_checkpoint_commit(StorCheckpoint *ck, WError *err);

/* stor_checkpoint_commit in two halves, so the engine can keep running
 * while the LMDB transaction is written and fsync'd:
 * stor_checkpoint_write does the durable write and may run on any thread;
 * it touches only what the checkpoint froze at add time, so the tables
 * stay usable (by their own thread) meanwhile. stor_checkpoint_finish then
 * runs on the tables' thread: if the write succeeded the snapshotted
 * entries become clean, otherwise they stay dirty. It frees ck.
 * Until finish, the tables must stay open and no checkpoint can begin.
 * @return (write) as stor_checkpoint_commit. */
int stor_checkpoint_write(StorCheckpoint *ck, WError *err);
void stor_checkpoint_finish(StorCheckpoint *ck);

/* Discard the checkpoint: nothing is written, dirty entries stay. Frees ck.
 * NULL is ok. */
void stor_checkpoint_abort(StorCheckpoint *ck);

/* The epoch of the last committed checkpoint, 0 if none. Any thread.
 * @return 0 (always succeeds; err unused, kept for symmetry). */
int stor_last_epoch(StorEnv *env, uint64_t *epoch, WError *err);

/* Read the committed metadata blob name into out (reset first; owned by
 * the caller). Any thread. @return 1 found, 0 not found, <0 error. */
int stor_meta_get(StorEnv *env, const char *name, Buf *out, WError *err);

/* Call fn for every committed metadata entry whose name starts with
 * prefix ("" = all), in name order, on a snapshot copied before the first
 * call; name and val are valid during that call only. A nonzero return
 * from fn stops the scan and is returned. Any thread. @return 0, fn's value or <0. */
int stor_meta_scan(StorEnv *env, const char *prefix,
                   int (*fn)(void *arg, const char *name, const void *val, size_t len),
                   void *arg, WError *err);

/* ---------------------------------------------------------------------------
 * Change capture and restore (a changelog's two ends: runtime/changelog.c).
 * ------------------------------------------------------------------------- */

/* One change of a state table: key set to val, or deleted. */
typedef struct StorChange {
    uint64_t table_id;
    const void *key;       /* 0..STOR_MAX_KEY bytes */
    size_t klen;
    const void *val;       /* the new value; ignored when del */
    size_t vlen;
    int del;               /* 1 = the key was deleted */
} StorChange;

/* Calls fn for every change the checkpoint ck writes (or wrote): each
 * added table's frozen dirty entries, one per key (the last put or
 * delete of the epoch), in no particular order. Nothing is copied or kept for checkpoints nobody asks: the
 * records are the ones the checkpoint froze at add time. Call it any time
 * between the last stor_checkpoint_add_table and stor_checkpoint_finish
 * (or commit/abort), on the coordinator thread or on the thread that runs
 * stor_checkpoint_write (not both at once). The StorChange and its
 * pointers are valid during the call only. A nonzero return from fn stops
 * the walk and is returned. @return 0 or fn's value. */
int stor_checkpoint_changes(StorCheckpoint *ck, int (*fn)(void *arg, const StorChange *c), void *arg);

/* Applies changes[0..n) in order, in one durable LMDB write transaction
 * (grown and re-run after MDB_MAP_FULL like a checkpoint): a put writes
 * the row, a delete removes it if present. A table with no database yet
 * gets one (or rows in `state` past StorOptions.max_table_dbs), as a
 * checkpoint would. For restoring state from a changelog: the tables
 * named must not be open (an open StorTable caches what it read and
 * whether it has committed rows); the environment's epoch is not changed.
 * Keep a batch under LMDB's dirty-page limit (~512 MiB of pages).
 * @return 0, or <0 (54000 key too long or transaction too large, 53100,
 *         58030). On failure nothing was written. */
int stor_changes_apply(StorEnv *env, const StorChange *changes, size_t n, WError *err);

/* Durably deletes the committed metadata entry name (absent is fine) in
 * its own write transaction, outside any checkpoint. Any thread; it waits
 * for a checkpoint being written. For records whose end is decided after
 * their checkpoint (a changelog epoch confirmed by Kafka).
 * @return 0, or <0 (54000 bad name, 53100, 58030). */
int stor_meta_delete(StorEnv *env, const char *name, WError *err);

/* Durably deletes every committed row of table_id whose key begins with
 * one of the n prefixes (each plen bytes: a key group is 2 bytes), in one
 * transaction: a key group's old local range before a restore. The table
 * must not be open. @return 0, or <0 (54000, 53100, 58030). */
int stor_table_drop_prefixes(StorEnv *env, uint64_t table_id, const void *prefixes, size_t plen, size_t n,
                             WError *err);

#endif
