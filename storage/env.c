/*
 * env.c: the LMDB environment -- open/close with the directory lock,
 * transaction helpers that grow the map, error mapping, the catalog, the
 * id allocator, metadata reads and statistics.
 */
#include "storage_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "arena.h"
#include "fault.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

int stor_mdb_err(WError *err, int rc, const char *what)
{
    const char *state = SQLSTATE_INTERNAL;
    if (rc == MDB_MAP_FULL || rc == ENOSPC || rc == EDQUOT)
        state = STOR_SQLSTATE_DISK_FULL;
    else if (rc == MDB_TXN_FULL || rc == MDB_BAD_VALSIZE)
        state = SQLSTATE_PROGRAM_LIMIT;
    else if (rc > 0 || rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND || rc == MDB_INVALID ||
             rc == MDB_VERSION_MISMATCH)
        state = SQLSTATE_IO_ERROR;
    return werr(err, state, 0, "storage: %s: %s", what, mdb_strerror(rc));
}

/* LMDB reports a short write as EIO (mdb_page_flush, mdb_env_copy: a write
 * that stops part way, which is how a filesystem that runs out of space in
 * the middle of a write answers), so a disk that filled during a commit or a
 * savepoint read as 58030. An EIO while the filesystem holding dir has less
 * free space than the write needed (need bytes plus a MiB of slack) is
 * taken to be ENOSPC, so the caller sees 53100; any other rc is returned
 * unchanged. */
static int short_write_err(const char *dir, int rc, uint64_t need)
{
    struct statvfs vfs;
    if (rc != EIO || !dir || statvfs(dir, &vfs) != 0)
        return rc;
    uint64_t avail = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
    return avail < need + MiB ? ENOSPC : rc;
}

/* ---------------------------------------------------------------------------
 * Transactions and map growth
 * ------------------------------------------------------------------------- */

int env_read_begin(StorEnv *env, MDB_txn **txn, WError *err)
{
    MDB_txn *t = NULL;
    int rc;
    pthread_rwlock_rdlock(&env->map_lock);
    pthread_mutex_lock(&env->mu);
    if (env->n_rtxn_pool > 0)
        t = env->rtxn_pool[--env->n_rtxn_pool];
    pthread_mutex_unlock(&env->mu);
    rc = FAULT("lmdb_read_begin") ? EIO : t ? mdb_txn_renew(t) : mdb_txn_begin(env->mdb, NULL, MDB_RDONLY, &t);
    if (rc) {
        if (t)
            mdb_txn_abort(t);
        pthread_rwlock_unlock(&env->map_lock);
        return stor_mdb_err(err, rc, "begin read transaction");
    }
    *txn = t;
    return 0;
}

void env_read_end(StorEnv *env, MDB_txn *txn)
{
    mdb_txn_reset(txn);
    pthread_mutex_lock(&env->mu);
    if (env->n_rtxn_pool < RTXN_POOL_MAX) {
        env->rtxn_pool[env->n_rtxn_pool++] = txn;
        txn = NULL;
    }
    pthread_mutex_unlock(&env->mu);
    if (txn)
        mdb_txn_abort(txn);
    pthread_rwlock_unlock(&env->map_lock);
}

/* Bytes of the data file in use (high-water mark of pages) and mapped. */
static void map_usage(StorEnv *env, uint64_t *used, uint64_t *mapsize)
{
    MDB_envinfo info;
    mdb_env_info(env->mdb, &info);
    *used = ((uint64_t)info.me_last_pgno + 1) * env->psize;
    *mapsize = info.me_mapsize;
}

/* map_usage for a caller holding no map_lock: mdb_env_info reads the meta
 * pages through the map, which another thread's map_grow may be replacing
 * (mdb_env_set_mapsize remaps it), so it waits for that to finish. */
static void map_usage_shared(StorEnv *env, uint64_t *used, uint64_t *mapsize)
{
    pthread_rwlock_rdlock(&env->map_lock);
    map_usage(env, used, mapsize);
    pthread_rwlock_unlock(&env->map_lock);
}

/* Grow the map to at least want bytes (rounded up to 1 MiB, at least
 * doubling, capped at max_map_size). Returns 0, or -1 with 53100 when the
 * map is already at the cap. */
static int map_grow(StorEnv *env, uint64_t want, WError *err)
{
    uint64_t used, cur, size;
    int rc = 0;
    pthread_rwlock_wrlock(&env->map_lock);
    map_usage(env, &used, &cur);
    if (want <= cur) /* someone else grew it meanwhile */
        goto out;
    if (cur >= env->opt.max_map_size) {
        rc = werr(err, STOR_SQLSTATE_DISK_FULL, 0,
                  "storage: data would exceed max_map_size (%zu bytes)", env->opt.max_map_size);
        if (err)
            werr_detail(err, "%llu bytes in use, %llu more requested", (unsigned long long)used,
                        (unsigned long long)(want - used));
        goto out;
    }
    size = cur * 2 > want ? cur * 2 : want;
    size = (size + MiB - 1) / MiB * MiB;
    if (size > env->opt.max_map_size)
        size = env->opt.max_map_size;
    int mrc = mdb_env_set_mapsize(env->mdb, size);
    if (mrc) {
        rc = stor_mdb_err(err, mrc, "grow map");
        goto out;
    }
    pthread_mutex_lock(&env->mu);
    env->stats.n_map_grows++;
    pthread_mutex_unlock(&env->mu);
out:
    pthread_rwlock_unlock(&env->map_lock);
    return rc;
}

/* Copy-on-write rewrites every page on a written path and the previous
 * versions stay until the transaction after next, so a transaction that
 * writes `need` payload bytes may need about twice that in fresh pages,
 * plus branch pages and the free list. */
static uint64_t room_wanted(StorEnv *env, uint64_t need)
{
    uint64_t used, cur;
    map_usage_shared(env, &used, &cur);
    uint64_t want = used + 2 * need + need / 2 + 64 * (uint64_t)env->psize + MiB;
    return want > cur ? want : 0;
}

int env_write(StorEnv *env, uint64_t need, WriteBody body, void *arg, WError *err)
{
    uint64_t want = room_wanted(env, need);
    if (want && map_grow(env, want, NULL) < 0) {
        /* At the cap: try anyway, the estimate is pessimistic. */
    }
    for (;;) {
        MDB_txn *txn;
        int rc;
        pthread_rwlock_rdlock(&env->map_lock);
        rc = FAULT("lmdb_write_begin") ? EIO : mdb_txn_begin(env->mdb, NULL, 0, &txn);
        if (rc) {
            pthread_rwlock_unlock(&env->map_lock);
            return stor_mdb_err(err, rc, "begin write transaction");
        }
        rc = body(env, txn, arg, err);
        if (rc == 0)
            rc = FAULT("lmdb_commit") ? (mdb_txn_abort(txn), EIO) : mdb_txn_commit(txn);
        else
            mdb_txn_abort(txn);
        pthread_rwlock_unlock(&env->map_lock);
        if (rc == 0)
            return 0;
        if (rc == BODY_FAILED)
            return -1;
        if (rc != MDB_MAP_FULL)
            return stor_mdb_err(err, short_write_err(env->dir, rc, 2 * need), "write transaction");
        /* Aborted: nothing was written. Double and retry; map_grow fails
         * with 53100 once the cap is reached, which bounds the loop. */
        uint64_t used, cur;
        map_usage_shared(env, &used, &cur);
        if (map_grow(env, cur * 2, err) < 0)
            return -1;
    }
}

/* ---------------------------------------------------------------------------
 * Open and close
 * ------------------------------------------------------------------------- */

static int lock_dir(const char *dir, int *fd_out, WError *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/LOCK", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return werr(err, SQLSTATE_IO_ERROR, 0, "storage: could not open lock file \"%s\": %s",
                    path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = 0;
        close(fd);
        if (e == EWOULDBLOCK) {
            werr(err, STOR_SQLSTATE_OBJECT_IN_USE, 0,
                 "storage: data directory \"%s\" is already in use", dir);
            if (err)
                werr_detail(err, "lock file \"%s\" is held by process %s (or by another open "
                                 "handle in the same process)", path, pid[0] ? pid : "?");
            return -1;
        }
        return werr(err, SQLSTATE_IO_ERROR, 0, "storage: could not lock \"%s\": %s", path,
                    strerror(e));
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)n, 0) != n) {
        /* The pid is informational only. */
    }
    *fd_out = fd;
    return 0;
}

static int sys_get_u64(MDB_txn *txn, MDB_dbi dbi, const char *name, uint64_t *v, bool *found)
{
    MDB_val k = {strlen(name), (void *)name}, d;
    int rc = mdb_get(txn, dbi, &k, &d);
    *found = false;
    if (rc == MDB_NOTFOUND)
        return 0;
    if (rc)
        return rc;
    if (d.mv_size != 8)
        return MDB_CORRUPTED;
    *v = get_u64be(d.mv_data);
    *found = true;
    return 0;
}

static int sys_put_u64(MDB_txn *txn, MDB_dbi dbi, const char *name, uint64_t v)
{
    uint8_t b[8];
    put_u64be(b, v);
    MDB_val k = {strlen(name), (void *)name}, d = {8, b};
    return mdb_put(txn, dbi, &k, &d, 0);
}

/* First transaction: create the DBIs, check or stamp the format version,
 * load the last epoch. A format-1 directory (every table in `state`) is
 * restamped 2: its tables stay where they are (stor_table_open finds their
 * rows in `state`), tables opened from now on get their own databases. */
static int open_body(StorEnv *env, MDB_txn *txn, void *arg, WError *err)
{
    int rc;
    uint64_t v;
    bool found;
    if ((rc = mdb_dbi_open(txn, "catalog", MDB_CREATE, &env->dbi_catalog)) ||
        (rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &env->dbi_meta)) ||
        (rc = mdb_dbi_open(txn, "state", MDB_CREATE, &env->dbi_state)) ||
        (rc = mdb_dbi_open(txn, "sys", MDB_CREATE, &env->dbi_sys)) ||
        (rc = mdb_dbi_open(txn, NULL, 0, &env->dbi_main)))
        return rc;
    if ((rc = sys_get_u64(txn, env->dbi_sys, "version", &v, &found)))
        return rc;
    if (found && (v < STOR_FORMAT_OLDEST || v > STOR_FORMAT_VERSION)) {
        werr(err, SQLSTATE_IO_ERROR, 0, "storage: data directory format %llu is not supported",
             (unsigned long long)v);
        if (err)
            werr_detail(err, "this build reads formats %u to %u", STOR_FORMAT_OLDEST,
                        STOR_FORMAT_VERSION);
        return BODY_FAILED;
    }
    if (env->format == 1) {
        /* Test hook: write what a format-1 weir writes. */
        if (found && v != 1) {
            werr(err, SQLSTATE_IO_ERROR, 0, "storage: WEIR_STORAGE_FORMAT=1 on a format %llu directory",
                 (unsigned long long)v);
            return BODY_FAILED;
        }
        if (!found && (rc = sys_put_u64(txn, env->dbi_sys, "version", 1)))
            return rc;
    } else if ((!found || v != STOR_FORMAT_VERSION) &&
               (rc = sys_put_u64(txn, env->dbi_sys, "version", STOR_FORMAT_VERSION)))
        return rc;
    if ((rc = sys_get_u64(txn, env->dbi_sys, "epoch", &v, &found)))
        return rc;
    env->stats.last_epoch = found ? v : 0;
    return 0;
}

int stor_open(const char *dir, const StorOptions *opt, StorEnv **out, WError *err)
{
    StorEnv *env = xcalloc(1, sizeof *env);
    int rc;
    env->lock_fd = -1;
    env->dir = xstrdup(dir);
    if (opt)
        env->opt = *opt;
    if (!env->opt.initial_map_size)
        env->opt.initial_map_size = 256 * MiB;
    if (!env->opt.max_map_size)
        env->opt.max_map_size = 64 * GiB;
    if (!env->opt.table_cache_bytes)
        env->opt.table_cache_bytes = 256 * MiB; /* a view's working set: reads of checkpointed state stay in memory */
    if (env->opt.max_map_size < env->opt.initial_map_size)
        env->opt.max_map_size = env->opt.initial_map_size;
    /* Writer preference: growth must not starve behind a steady stream of
     * short transactions. Safe because storage never takes map_lock twice
     * in one thread (callbacks run with no transaction open). */
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&env->map_lock, &ra);
    pthread_rwlockattr_destroy(&ra);
    pthread_mutex_init(&env->mu, NULL);

    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        werr(err, SQLSTATE_IO_ERROR, 0, "storage: could not create data directory \"%s\": %s",
             dir, strerror(errno));
        goto fail;
    }
    /* Lock before LMDB touches the files: LMDB's own locks are POSIX
     * record locks, which a second open in the same process would silently
     * share and then drop on close. */
    if (lock_dir(dir, &env->lock_fd, err) < 0)
        goto fail;
    if ((rc = mdb_env_create(&env->mdb))) {
        stor_mdb_err(err, rc, "create environment");
        goto fail;
    }
    if (!env->opt.max_table_dbs)
        env->opt.max_table_dbs = STOR_DEFAULT_TABLE_DBS;
    /* WEIR_STORAGE_FORMAT=1 (tests only) writes the previous layout: every
     * table in `state`, version 1, as a data directory of an older weir. */
    const char *fmt = getenv("WEIR_STORAGE_FORMAT");
    env->format = fmt && strcmp(fmt, "1") == 0 ? 1 : STOR_FORMAT_VERSION;
    if (env->opt.max_table_dbs > 100000)
        env->opt.max_table_dbs = 100000; /* LMDB allocates per transaction for every slot */
    mdb_env_set_maxdbs(env->mdb, STOR_CORE_DBS + env->opt.max_table_dbs);
    mdb_env_set_maxreaders(env->mdb, 256);
    mdb_env_set_mapsize(env->mdb, env->opt.initial_map_size);
    if ((rc = mdb_env_open(env->mdb, dir, MDB_NOTLS, 0644))) {
        stor_mdb_err(err, rc, "open environment");
        if (err)
            werr_detail(err, "data directory \"%s\"", dir);
        goto fail;
    }
    int dead = 0;
    mdb_reader_check(env->mdb, &dead);
    MDB_stat st;
    mdb_env_stat(env->mdb, &st);
    env->psize = st.ms_psize;
    uint64_t used, cur;
    map_usage(env, &used, &cur);
    if (used > env->opt.max_map_size) {
        werr(err, STOR_SQLSTATE_DISK_FULL, 0,
             "storage: data directory holds %llu bytes, more than max_map_size (%zu)",
             (unsigned long long)used, env->opt.max_map_size);
        goto fail;
    }
    if (env_write(env, 0, open_body, NULL, err) < 0)
        goto fail;
    *out = env;
    return 0;
fail:
    stor_close(env);
    *out = NULL;
    return -1;
}

void stor_close(StorEnv *env)
{
    if (!env)
        return;
    for (int i = 0; i < env->n_rtxn_pool; i++)
        mdb_txn_abort(env->rtxn_pool[i]);
    if (env->mdb)
        mdb_env_close(env->mdb);
    if (env->lock_fd >= 0)
        close(env->lock_fd); /* releases the flock */
    pthread_rwlock_destroy(&env->map_lock);
    pthread_mutex_destroy(&env->mu);
    free(env->dir);
    free(env);
}

int stor_copy(StorEnv *env, const char *dir, WError *err)
{
    /* A compacting copy of the whole environment, as of its last committed
     * transaction (so a checkpoint taken just before is what it holds). */
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return stor_mdb_err(err, errno, "cannot create the savepoint directory");
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/data.mdb", dir);
    if (access(probe, F_OK) == 0)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "%s already holds a data directory", dir);
    pthread_rwlock_rdlock(&env->map_lock);
    int rc = mdb_env_copy2(env->mdb, dir, MDB_CP_COMPACT);
    pthread_rwlock_unlock(&env->map_lock);
    if (rc) {
        uint64_t used, cur;
        map_usage_shared(env, &used, &cur);
        return stor_mdb_err(err, short_write_err(dir, rc, used), "cannot write the savepoint");
    }
    return 0;
}

void stor_stats(StorEnv *env, StorStats *out)
{
    uint64_t used, cur;
    pthread_rwlock_rdlock(&env->map_lock); /* mapsize is stable */
    map_usage(env, &used, &cur);
    pthread_rwlock_unlock(&env->map_lock);
    pthread_mutex_lock(&env->mu);
    *out = env->stats;
    pthread_mutex_unlock(&env->mu);
    out->map_size = cur;
    out->used_bytes = used;
    out->max_map_size = env->opt.max_map_size;
}

int stor_last_epoch(StorEnv *env, uint64_t *epoch, WError *err)
{
    pthread_mutex_lock(&env->mu);
    *epoch = env->stats.last_epoch;
    pthread_mutex_unlock(&env->mu);
    return 0;
}

/* ---------------------------------------------------------------------------
 * Catalog. Value layout: kind (i32 BE), name length (u32 BE), name, body.
 * ------------------------------------------------------------------------- */

int catalog_put_txn(StorEnv *env, MDB_txn *txn, const StorCatalogEntry *e)
{
    size_t nlen = strlen(e->name);
    uint8_t kb[8];
    Buf v = BUF_INIT;
    int rc;
    uint64_t next;
    bool found;
    put_u64be(kb, e->id);
    buf_put_u32be(&v, (uint32_t)e->kind);
    buf_put_u32be(&v, (uint32_t)nlen);
    buf_append(&v, e->name, nlen);
    buf_append(&v, e->body, e->body_len);
    MDB_val k = {8, kb}, d = {v.len, v.data};
    rc = mdb_put(txn, env->dbi_catalog, &k, &d, 0);
    buf_free(&v);
    if (rc)
        return rc;
    if ((rc = sys_get_u64(txn, env->dbi_sys, "next_id", &next, &found)))
        return rc;
    if (!found)
        next = 1;
    if (e->id >= next)
        rc = sys_put_u64(txn, env->dbi_sys, "next_id", e->id + 1);
    return rc;
}

static int catalog_put_body(StorEnv *env, MDB_txn *txn, void *arg, WError *err)
{
    return catalog_put_txn(env, txn, arg);
}

int stor_catalog_put(StorEnv *env, const StorCatalogEntry *e, WError *err)
{
    if (!e->name || strlen(e->name) > STOR_MAX_NAME)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "storage: catalog name too long (max %d bytes)",
                    STOR_MAX_NAME);
    if (e->id == UINT64_MAX)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "storage: catalog id out of range");
    return env_write(env, e->body_len + strlen(e->name) + 64, catalog_put_body, (void *)e, err);
}

typedef struct {
    uint64_t id;
    bool deleted;
} DelArg;

static int catalog_del_body(StorEnv *env, MDB_txn *txn, void *arg, WError *err)
{
    DelArg *a = arg;
    uint8_t kb[8];
    put_u64be(kb, a->id);
    MDB_val k = {8, kb};
    int rc = mdb_del(txn, env->dbi_catalog, &k, NULL);
    a->deleted = rc == 0;
    return rc == MDB_NOTFOUND ? 0 : rc;
}

int stor_catalog_delete(StorEnv *env, uint64_t id, WError *err)
{
    DelArg a = {id, false};
    if (env_write(env, 0, catalog_del_body, &a, err) < 0)
        return -1;
    return a.deleted ? 1 : 0;
}

/* Copy the whole catalog under one read transaction, then call fn with
 * no transaction open, so fn may write (a write would otherwise wait on
 * the map lock this thread holds during growth). */
int stor_catalog_scan(StorEnv *env, int (*fn)(void *arg, const StorCatalogEntry *e), void *arg,
                      WError *err)
{
    MDB_txn *txn;
    MDB_cursor *cur;
    MDB_val k, d;
    Buf snap = BUF_INIT;
    int rc;
    if (env_read_begin(env, &txn, err) < 0)
        return -1;
    if ((rc = mdb_cursor_open(txn, env->dbi_catalog, &cur))) {
        env_read_end(env, txn);
        return stor_mdb_err(err, rc, "catalog scan");
    }
    for (rc = mdb_cursor_get(cur, &k, &d, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
        if (k.mv_size != 8 || d.mv_size < 8) {
            rc = MDB_CORRUPTED;
            break;
        }
        buf_append(&snap, k.mv_data, 8);
        buf_put_u64be(&snap, d.mv_size);
        buf_append(&snap, d.mv_data, d.mv_size);
    }
    mdb_cursor_close(cur);
    env_read_end(env, txn);
    if (rc != MDB_NOTFOUND) {
        buf_free(&snap);
        return stor_mdb_err(err, rc, "catalog scan");
    }
    rc = 0;
    Buf name = BUF_INIT;
    for (size_t off = 0; off < snap.len && rc == 0;) {
        const uint8_t *p = (const uint8_t *)snap.data + off;
        uint64_t vlen = get_u64be(p + 8);
        const uint8_t *v = p + 16;
        uint32_t nlen = (uint32_t)(get_u64be(v) & 0xffffffffu);
        if (8 + (uint64_t)nlen > vlen) {
            rc = werr(err, SQLSTATE_IO_ERROR, 0, "storage: corrupt catalog entry");
            break;
        }
        buf_reset(&name);
        buf_append(&name, v + 8, nlen);
        StorCatalogEntry e = {
            .id = get_u64be(p),
            .kind = (int32_t)(uint32_t)(get_u64be(v) >> 32),
            .name = name.data,
            .body = v + 8 + nlen,
            .body_len = vlen - 8 - nlen,
        };
        rc = fn(arg, &e);
        off += 16 + vlen;
    }
    buf_free(&name);
    buf_free(&snap);
    return rc;
}

static int next_id_body(StorEnv *env, MDB_txn *txn, void *arg, WError *err)
{
    uint64_t *id = arg;
    bool found;
    int rc = sys_get_u64(txn, env->dbi_sys, "next_id", id, &found);
    if (rc)
        return rc;
    if (!found)
        *id = 1;
    return sys_put_u64(txn, env->dbi_sys, "next_id", *id + 1);
}

int stor_next_id(StorEnv *env, uint64_t *out, WError *err)
{
    if (FAULT("next_id")) /* the allocation alone, as lmdb_write_begin/lmdb_commit would fail it */
        return stor_mdb_err(err, EIO, "allocate an id");
    return env_write(env, 0, next_id_body, out, err);
}

/* ---------------------------------------------------------------------------
 * Metadata reads (writes go through checkpoints)
 * ------------------------------------------------------------------------- */

int stor_meta_get(StorEnv *env, const char *name, Buf *out, WError *err)
{
    size_t nlen = strlen(name);
    MDB_txn *txn;
    if (nlen == 0 || nlen > STOR_MAX_NAME)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "storage: bad metadata name length %zu", nlen);
    if (env_read_begin(env, &txn, err) < 0)
        return -1;
    MDB_val k = {nlen, (void *)name}, d;
    int rc = mdb_get(txn, env->dbi_meta, &k, &d);
    buf_reset(out);
    if (rc == 0)
        buf_append(out, d.mv_data, d.mv_size);
    env_read_end(env, txn);
    if (rc == MDB_NOTFOUND)
        return 0;
    if (rc)
        return stor_mdb_err(err, rc, "read metadata");
    return 1;
}

int stor_meta_scan(StorEnv *env, const char *prefix,
                   int (*fn)(void *arg, const char *name, const void *val, size_t len), void *arg,
                   WError *err)
{
    size_t plen = strlen(prefix);
    MDB_txn *txn;
    MDB_cursor *cur;
    Buf snap = BUF_INIT;
    int rc;
    if (env_read_begin(env, &txn, err) < 0)
        return -1;
    if ((rc = mdb_cursor_open(txn, env->dbi_meta, &cur))) {
        env_read_end(env, txn);
        return stor_mdb_err(err, rc, "metadata scan");
    }
    MDB_val k = {plen, (void *)prefix}, d;
    for (rc = mdb_cursor_get(cur, &k, &d, plen ? MDB_SET_RANGE : MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
        if (k.mv_size < plen || memcmp(k.mv_data, prefix, plen) != 0)
            break;
        buf_put_u64be(&snap, k.mv_size);
        buf_put_u64be(&snap, d.mv_size);
        buf_append(&snap, k.mv_data, k.mv_size);
        buf_append(&snap, d.mv_data, d.mv_size);
    }
    mdb_cursor_close(cur);
    env_read_end(env, txn);
    if (rc != 0 && rc != MDB_NOTFOUND) {
        buf_free(&snap);
        return stor_mdb_err(err, rc, "metadata scan");
    }
    rc = 0;
    Buf name = BUF_INIT;
    for (size_t off = 0; off < snap.len && rc == 0;) {
        const uint8_t *p = (const uint8_t *)snap.data + off;
        uint64_t nlen = get_u64be(p), vlen = get_u64be(p + 8);
        buf_reset(&name);
        buf_append(&name, p + 16, nlen);
        rc = fn(arg, name.data, p + 16 + nlen, vlen);
        off += 16 + nlen + vlen;
    }
    buf_free(&name);
    buf_free(&snap);
    return rc;
}
