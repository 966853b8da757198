/*
 * state_ttl.c: expiry of idle keys (CREATE MATERIALIZED VIEW ... WITH (state_ttl)).
 *
 * A regular join, an unwindowed aggregation or Top-N keeps state per key with no
 * event-time bound. With a TTL, each key's last access (read or write) in
 * processing time is part of the operator's state, in the operator's own
 * table, beside the key's rows:
 *   [TTL_AT][key]                -> the access time (8 bytes)
 *   [TTL_IX][access time][key]   -> empty: the keys in access-time order
 * so a sweep reads only the keys due, in order, and stops at the first one
 * that is not. Access times are kept to a grain of 1/100 of the TTL (at
 * least 1 ms): a key touched again within its grain writes nothing, which
 * keeps the cost of a hot key to one cached get per row; a key then expires
 * between TTL and TTL + grain after its last access.
 *
 * Expiry is decided by the clock alone, not by when the sweep runs: a key
 * found expired on access is dropped first (the row then starts from empty
 * state), and the sweep, run before each checkpoint, deletes the rest, so
 * the checkpoint removes them from LMDB. Both lead bytes are above the first
 * byte of an encoded key (a null flag, 0 or 1) and differ from the markers
 * the operators use (0xFE, 0xFF), so prefix scans by key never see them.
 *
 * Processing time is the wall clock, except under WEIR_TEST_CLOCK (tests
 * only): the path of a file holding the time in seconds since the epoch,
 * read at every call, so a test can move time without waiting.
 */
#include "runtime_int.h"
#include "clock.h"

#include <pthread.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TTL_AT 0xFC
#define TTL_IX 0xFB

static pthread_once_t clock_once = PTHREAD_ONCE_INIT;
static const char *clock_path;
static void clock_init(void) { clock_path = getenv("WEIR_TEST_CLOCK"); }

int64_t rt_proc_now_us(void)
{
    /* Once per process: worker threads of parallel views call this too. */
    pthread_once(&clock_once, clock_init);
    const char *path = clock_path;
    if (path && *path) {
        FILE *f = fopen(path, "r");
        if (f) {
            double s;
            int got = fscanf(f, "%lf", &s);
            fclose(f);
            if (got == 1)
                return (int64_t)(s * 1e6);
        }
    }
    return clock_wall_us();
}

static void put_time(unsigned char *p, int64_t t) { put_be64(p, (uint64_t)t ^ UINT64_C(0x8000000000000000)); }
static int64_t get_time(const void *p) { return (int64_t)(get_be64(p) ^ UINT64_C(0x8000000000000000)); }

void rt_ttl_init(RtTtl *t, StorTable *table, int64_t ttl_us, RtTtlDrop drop, void *arg, uint64_t *expired)
{
    memset(t, 0, sizeof *t);
    t->table = table;
    t->ttl_us = ttl_us;
    t->grain_us = ttl_us / 100 > 1000 ? ttl_us / 100 : 1000;
    t->next_due = INT64_MIN;
    t->drop = drop;
    t->arg = arg;
    t->expired = expired;
    t->sweep_max = 100000;
}

void rt_ttl_fini(RtTtl *t)
{
    buf_free(&t->kbuf);
    buf_free(&t->ibuf);
}

static void at_key(Buf *b, const void *key, size_t klen)
{
    buf_reset(b);
    buf_put_u8(b, TTL_AT);
    buf_append(b, key, klen);
}

static void ix_key(Buf *b, int64_t q, const void *key, size_t klen)
{
    unsigned char tb[9] = {TTL_IX};
    put_time(tb + 1, q);
    buf_reset(b);
    buf_append(b, tb, 9);
    buf_append(b, key, klen);
}

/* Drops key's state (the operator's part, then the access record). */
static int drop_key(RtTtl *t, const void *key, size_t klen, int64_t q, WError *err)
{
    if (t->drop(t->arg, key, klen, err))
        return -1;
    (*t->expired)++;
    at_key(&t->kbuf, key, klen);
    ix_key(&t->ibuf, q, key, klen);
    if (stor_table_delete(t->table, t->kbuf.data, t->kbuf.len, err) ||
        stor_table_delete(t->table, t->ibuf.data, t->ibuf.len, err))
        return -1;
    return 0;
}

int rt_ttl_touch(RtTtl *t, const void *key, size_t klen, int64_t now, bool create, WError *err)
{
    int64_t q = now - now % t->grain_us;
    at_key(&t->kbuf, key, klen);
    const void *v;
    size_t vl;
    int f = stor_table_get(t->table, t->kbuf.data, t->kbuf.len, &v, &vl, err);
    if (f < 0)
        return -1;
    int64_t old = f == 1 && vl == 8 ? get_time(v) : INT64_MIN;
    if (old == q || (old == INT64_MIN && !create))
        return 0;
    if (old != INT64_MIN && old + t->grain_us + t->ttl_us <= now) {
        /* Expired but not swept yet: the row must not see the old state. */
        if (drop_key(t, key, klen, old, err))
            return -1;
        if (t->next_due == old + t->grain_us + t->ttl_us)
            t->next_due = INT64_MIN; /* it may have been this key's: find out when asked */
        if (!create)
            return 0; /* a read: the key has no state any more */
    } else if (old != INT64_MIN) {
        ix_key(&t->ibuf, old, key, klen);
        if (stor_table_delete(t->table, t->ibuf.data, t->ibuf.len, err))
            return -1;
    }
    unsigned char tb[8];
    put_time(tb, q);
    at_key(&t->kbuf, key, klen);
    ix_key(&t->ibuf, q, key, klen);
    if (stor_table_put(t->table, t->kbuf.data, t->kbuf.len, tb, 8, err) ||
        stor_table_put(t->table, t->ibuf.data, t->ibuf.len, "", 0, err))
        return -1;
    if (t->next_due != INT64_MIN && q + t->grain_us + t->ttl_us < t->next_due)
        t->next_due = q + t->grain_us + t->ttl_us;
    return 0;
}

/* The first time a key can expire (INT64_MAX: no key), from the index. */
static int find_next_due(RtTtl *t, WError *err)
{
    unsigned char pfx[1] = {TTL_IX};
    StorIter *it;
    if (stor_iter_open(t->table, pfx, 1, &it, err))
        return -1;
    const void *k, *v;
    size_t kl, vl;
    int got = stor_iter_next(it, &k, &kl, &v, &vl, err);
    if (got == 1 && kl >= 9)
        t->next_due = get_time((const char *)k + 1) + t->grain_us + t->ttl_us;
    else if (got == 0)
        t->next_due = INT64_MAX;
    stor_iter_close(it);
    return got < 0 ? -1 : 0;
}

int rt_ttl_due(RtTtl *t, int64_t now, WError *err)
{
    if (t->next_due == INT64_MIN && find_next_due(t, err))
        return -1;
    return t->next_due <= now;
}

int rt_ttl_sweep(RtTtl *t, int64_t now, WError *err)
{
    int due = rt_ttl_due(t, now, err);
    if (due <= 0)
        return due;
    /* Keys accessed at q <= now - ttl - grain, i.e. index keys below the next grain's. */
    unsigned char pfx[1] = {TTL_IX}, upper[9] = {TTL_IX};
    put_time(upper + 1, now - t->ttl_us - t->grain_us + 1);
    StorIter *it;
    if (stor_iter_open_below(t->table, pfx, 1, upper, 9, &it, err))
        return -1;
    const void *k, *v;
    size_t kl, vl;
    int got = 0;
    Buf dead = BUF_INIT; /* length-prefixed index keys, dropped after the scan */
    int n = 0;
    /* At most sweep_max keys per checkpoint, so one checkpoint stays short;
     * the rest stay due, and the engine checkpoints again. Until then they
     * are dropped on access, so results do not depend on the sweep. */
    while (n < t->sweep_max && (got = stor_iter_next(it, &k, &kl, &v, &vl, err)) == 1) {
        if (kl < 9)
            continue;
        buf_put_u32be(&dead, (uint32_t)kl);
        buf_append(&dead, k, kl);
        n++;
    }
    stor_iter_close(it);
    int rc = got < 0 ? -1 : 0;
    for (size_t off = 0; !rc && off + 4 <= dead.len;) {
        const unsigned char *p = (const unsigned char *)dead.data + off;
        uint32_t l = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        rc = drop_key(t, p + 4 + 9, l - 9, get_time(p + 5), err);
        off += 4 + l;
    }
    buf_free(&dead);
    if (rc)
        return -1;
    return find_next_due(t, err);
}

int rt_ttl_drop_prefix(StorTable *table, const void *prefix, size_t plen, Buf *scratch, WError *err)
{
    StorIter *it;
    if (stor_iter_open(table, prefix, plen, &it, err))
        return -1;
    const void *k, *v;
    size_t kl, vl;
    int got;
    buf_reset(scratch);
    while ((got = stor_iter_next(it, &k, &kl, &v, &vl, err)) == 1) {
        buf_put_u32be(scratch, (uint32_t)kl);
        buf_append(scratch, k, kl);
    }
    stor_iter_close(it);
    if (got < 0)
        return -1;
    for (size_t off = 0; off + 4 <= scratch->len;) {
        const unsigned char *p = (const unsigned char *)scratch->data + off;
        uint32_t l = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        if (stor_table_delete(table, p + 4, l, err))
            return -1;
        off += 4 + l;
    }
    return 0;
}
