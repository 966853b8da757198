/*
 * table.c: state tables -- an open-addressing hash map of entries over
 * the table's committed rows in LMDB, and ordered iterators that merge
 * the two.
 *
 * Every entry in the map is in one state: DIRTY_PUT / DIRTY_DEL (written
 * since the last checkpoint that included it; never evicted), CLEAN (a
 * cached copy of the committed value) or ABSENT (cached knowledge that the
 * key has no committed row). Clean and absent entries are bounded by the
 * table's cache budget; over it, a clock-style sweep drops them.
 *
 * Checkpoint snapshots use a write sequence: each dirty write stamps the
 * entry with ++t->seq. A checkpoint copies the dirty entries and remembers
 * the sequence; when it commits, entries stamped at or before it become
 * clean, while entries written after the snapshot stay dirty for the next
 * checkpoint. An abort changes nothing.
 *
 * The snapshot does not copy: it freezes the dirty entries' memory (the
 * frozen flag) and lists pointers to it. Until the checkpoint is done, a
 * write to a frozen entry gets fresh memory and the old block is retired
 * (freed at done), so the writer thread can read every snapshotted row
 * while this thread keeps writing the next epoch.
 *
 * The map uses linear probing with backward-shift deletion (no hash
 * tombstones), a power-of-two capacity and a load factor of at most 0.7.
 */
#include "storage_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "arena.h"
#include "fault.h"
#include "log.h"

enum { EMPTY = 0, CLEAN, ABSENT, DIRTY_PUT, DIRTY_DEL };

/* One slot. data holds the key followed by the value (for puts and clean
 * entries); it is NULL only in empty slots. */
typedef struct Ent {
    uint64_t hash;
    char *data;
    uint32_t klen;
    uint32_t vlen;
    uint64_t seq;       /* write sequence of the last dirty write, 0 when clean */
    uint8_t state;
    uint8_t frozen;     /* data is listed in the open checkpoint's snapshot */
    uint8_t in_lmdb;    /* the key has a committed row (read from LMDB, or a put committed since),
                         * so it is in the committed-key filter already */
} Ent;

/* Entry blocks (key + value + 1) are allocated in 16-byte size classes, so
 * a block retired by a checkpoint can be reused by the next copy-on-write
 * of an entry of the same class instead of going back to malloc: with a
 * checkpoint every second most hot entries are rewritten while frozen,
 * and malloc/free of each was a fifth of the engine thread's time. */
#define BLK_CLASSES 16 /* recycled sizes: 16 .. 256 bytes */
static size_t blk_size(size_t kvlen) { return (kvlen + 1 + 15) & ~(size_t)15; }

#define ENT_OVERHEAD 48 /* bytes charged per entry beyond key and value */

/* One Bloom filter of a scalable set: 10 bits and 7 probes per key, all in
 * one 64-byte block (about 1.5% false positives at capacity). */
typedef struct Bloom {
    uint64_t *bits;             /* (mask + 1) blocks of 8 words */
    uint64_t mask;              /* block count - 1 (a power of two) */
    size_t n, cap;              /* keys added, keys it is sized for */
} Bloom;

#define IX_LEVELS 10
/* Every scan walks the unsorted newest keys one by one; q4 probes its
 * auctions once per bid while new auctions keep arriving, so the walk was
 * the largest part of a probe with 256 of them. With 64, a key is merged
 * into sorted runs one more time in its life. */
#define FRESH_MAX 64

typedef struct DKey {
    /* The key's first 16 bytes, big-endian, zero-padded: most comparisons
     * stop here. Two words, not one: a join or group key of one BIGINT is
     * 9 bytes (a tag and the value), so keys of neighbouring ids (q4's
     * auctions) shared their first 8 bytes and every comparison of them
     * was a memcmp (a seventh of q4's instructions, mostly in the scan of
     * the unsorted newest keys at every probe). */
    uint64_t p0, p1;
    char *key;          /* owned copy */
    uint32_t klen;
} DKey;

static DKey dkey_of(const void *key, size_t klen)
{
    uint8_t b[16] = {0};
    if (klen)
        memcpy(b, key, klen < 16 ? klen : 16);
    return (DKey){get_u64be(b), get_u64be(b + 8), (char *)key, (uint32_t)klen};
}

/* The first n bytes (0..8) of a big-endian word. */
static inline uint64_t word_mask(size_t n)
{
    return n >= 8 ? ~(uint64_t)0 : n == 0 ? 0 : ~(uint64_t)0 << (64 - 8 * n);
}

/* memcmp(k's key, prefix, min(k's length, plen)), by its sign; pk is
 * dkey_of(prefix, plen). */
static inline int prefix_cmp(const DKey *k, const DKey *pk, size_t plen)
{
    size_t m = k->klen < plen ? k->klen : plen;
    uint64_t m0 = word_mask(m), m1 = word_mask(m > 8 ? m - 8 : 0);
    uint64_t a = k->p0 & m0, b = pk->p0 & m0;
    if (a != b)
        return a < b ? -1 : 1;
    a = k->p1 & m1;
    b = pk->p1 & m1;
    if (a != b)
        return a < b ? -1 : 1;
    return m > 16 ? memcmp(k->key + 16, pk->key + 16, m - 16) : 0;
}

struct StorTable {
    StorEnv *env;
    /* A merged handle (stor_table_open_merged): the parts it reads, borrowed;
     * n_parts 0 for an ordinary table. Nothing below is used by a merged one. */
    StorTable **parts;
    int n_parts;
    /* A grouped handle (stor_table_open_grouped): parts[0] is the base,
     * n_groups its key groups; 0 for any other table. */
    int n_groups;
    uint64_t id;
    uint8_t prefix[8];          /* the LMDB key prefix (table_location) */
    size_t pl;                  /* its length: 8 in `state` (the id, big-endian), 1 in an own database */
    MDB_dbi dbi;                /* the database holding the rows */
    bool dbi_ok;                /* dbi is valid; false: no rows anywhere yet, and no database
                                 * (the first checkpoint with a put creates it: table_placed) */
    Ent *slots;
    size_t cap;                 /* power of two */
    size_t n_used;              /* non-empty slots */
    size_t n_dirty;             /* DIRTY_PUT + DIRTY_DEL */
    size_t dirty_bytes;         /* charged bytes of dirty entries */
    size_t clean_bytes;         /* charged bytes of CLEAN + ABSENT entries */
    size_t cache_budget;        /* bound on clean_bytes */
    size_t sweep;               /* eviction clock hand */
    uint64_t seq;               /* last write sequence handed out */
    bool has_committed;         /* LMDB may hold rows of this table */
    bool in_ck;                 /* snapshotted by an open checkpoint */
    uint64_t committed_bytes;   /* size_bytes cache */
    uint64_t committed_entries; /* counted by the same scan (EXPLAIN ANALYZE) */
    bool committed_bytes_ok;
    Buf scratch;                /* get's value when it could not be cached */
    /* An ordered index of the keys that became dirty since it was built, so
     * a (range) scan finds its dirty entries without sorting all of them:
     * sorted runs of growing size (run i holds at most FRESH_MAX * 8^(i+1)
     * keys) and the newest keys unsorted (fresh). Keys may be stale (the
     * entry is clean or gone again): scans check the map. Rebuilt lazily
     * after each checkpoint (ix_valid false). See note_dirty. */
    DKey *run[IX_LEVELS];
    size_t run_n[IX_LEVELS];
    DKey *fresh;                /* the newest keys, unsorted (at most FRESH_MAX) */
    size_t fresh_n;
    bool ix_valid;
    /* Filters of the keys this table may hold in LMDB (see "Committed-key
     * filter" below); valid only while known_keys is true. */
    Bloom *blooms;
    int n_blooms;
    bool known_keys;
    uint64_t point_reads;       /* gets that went to LMDB */
    /* The open checkpoint's snapshot (table_snapshot), reused across
     * checkpoints, and the frozen blocks replaced or removed since: they
     * are freed when the checkpoint is done. */
    SnapRec *snap;
    size_t snap_cap;
    char **retired;
    uint32_t *retired_len;      /* each retired block's key + value length */
    size_t n_retired, retired_cap;
    /* Blocks retired by the last checkpoint, by size class, for reuse (a
     * list through each block's first bytes). The ones still unused at the
     * next checkpoint's end are freed, so this holds one epoch's worth. */
    char *spare[BLK_CLASSES];
    /* The index's key copies: freed all at once when it is dropped. */
    Arena *ix_keys;
};

/* ---------------------------------------------------------------------------
 * Hashing and the map
 * ------------------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* 8 bytes at a time, then the tail; good enough spread for linear probing
 * after the splitmix finalizer. */
static uint64_t hash_key(const void *key, size_t len)
{
    const uint8_t *p = key;
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (len * 0xff51afd7ed558ccdULL);
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ mix64(w)) * 0x9fb21c651e98df25ULL;
        p += 8;
        len -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, len);
    h ^= mix64(w ^ len);
    return mix64(h);
}

static inline size_t ent_bytes(const Ent *e) { return (size_t)e->klen + e->vlen + ENT_OVERHEAD; }
static inline bool is_dirty(const Ent *e) { return e->state >= DIRTY_PUT; }

/* Slot index of key, or of the empty slot where it would go. */
static size_t find_slot(const StorTable *t, uint64_t h, const void *key, size_t klen)
{
    size_t mask = t->cap - 1, i = h & mask;
    for (;;) {
        const Ent *e = &t->slots[i];
        if (e->state == EMPTY)
            return i;
        if (e->hash == h && e->klen == klen && memcmp(e->data, key, klen) == 0)
            return i;
        i = (i + 1) & mask;
    }
}

/* A zeroed slot array (EMPTY is 0), written rather than calloc'd: calloc
 * hands a large block over as the shared zero page, find_slot's first read
 * maps it, and insert_at's first write then takes a copy-on-write fault
 * whose TLB flush interrupts every other thread of the process (a tenth of
 * Nexmark q0's engine time went to those). Writing first faults in a
 * private page at once. */
#define SLOTS_HUGE_PAGE ((size_t)2 << 20)
#define SLOTS_HUGE_MIN ((size_t)4 << 20)

/* The mapping of a slot array of n entries of SLOTS_HUGE_MIN or more. */
static size_t slots_bytes(size_t n)
{
    return (n * sizeof(Ent) + SLOTS_HUGE_PAGE - 1) & ~(SLOTS_HUGE_PAGE - 1);
}

static Ent *slots_new(size_t n)
{
    size_t bytes = n * sizeof(Ent);
    Ent *s;
    if (bytes >= SLOTS_HUGE_MIN) {
        /* A big map is probed at random: on 4 KiB pages nearly every probe
         * of a map of millions of keys also misses the TLB. Transparent
         * huge pages (asked for: the kernel's default is "madvise") cut
         * those misses. A mapping of its own, so the advice goes with it
         * (on a heap block it would stay on that memory after the free). */
        s = mmap(NULL, slots_bytes(n), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (s == MAP_FAILED) {
            wlog_error("table", "out of memory (%zu bytes for a state table's map)", slots_bytes(n));
            abort();
        }
        (void)madvise(s, slots_bytes(n), MADV_HUGEPAGE);
    } else {
        s = xmalloc(bytes);
    }
    memset(s, 0, bytes);
    return s;
}

static void slots_free(Ent *s, size_t n)
{
    if (!s)
        return;
    if (n * sizeof(Ent) >= SLOTS_HUGE_MIN)
        munmap(s, slots_bytes(n));
    else
        free(s);
}

static void rehash(StorTable *t, size_t ncap)
{
    Ent *old = t->slots;
    size_t ocap = t->cap;
    t->slots = slots_new(ncap);
    t->cap = ncap;
    for (size_t i = 0; i < ocap; i++) {
        if (old[i].state == EMPTY)
            continue;
        size_t j = old[i].hash & (ncap - 1);
        while (t->slots[j].state != EMPTY)
            j = (j + 1) & (ncap - 1);
        t->slots[j] = old[i];
    }
    slots_free(old, ocap);
}

static void spare_free(StorTable *t)
{
    for (int c = 0; c < BLK_CLASSES; c++) {
        while (t->spare[c]) {
            char *d = t->spare[c];
            memcpy(&t->spare[c], d, sizeof(char *));
            free(d);
        }
    }
}

/* Frees e's memory, or retires it while a snapshot lists it. */
static void release(StorTable *t, Ent *e)
{
    if (!e->frozen) {
        free(e->data);
        return;
    }
    if (t->n_retired == t->retired_cap) {
        t->retired_cap = t->retired_cap ? t->retired_cap * 2 : 256;
        t->retired = xrealloc(t->retired, t->retired_cap * sizeof *t->retired);
        t->retired_len = xrealloc(t->retired_len, t->retired_cap * sizeof *t->retired_len);
    }
    t->retired_len[t->n_retired] = e->klen + e->vlen;
    t->retired[t->n_retired++] = e->data;
    e->frozen = 0;
}

/* Remove slot i, shifting later members of its probe run back. */
static void remove_slot(StorTable *t, size_t i)
{
    size_t mask = t->cap - 1, j = i;
    Ent *e = &t->slots[i];
    if (is_dirty(e)) {
        t->n_dirty--;
        t->dirty_bytes -= ent_bytes(e);
    } else {
        t->clean_bytes -= ent_bytes(e);
    }
    release(t, e);
    t->n_used--;
    for (;;) {
        j = (j + 1) & mask;
        Ent *f = &t->slots[j];
        if (f->state == EMPTY)
            break;
        size_t k = f->hash & mask; /* f's home slot */
        /* f may move to i iff i lies cyclically in [k, j). */
        bool movable = (i <= j) ? (k <= i || k > j) : (k <= i && k > j);
        if (movable) {
            t->slots[i] = *f;
            i = j;
        }
    }
    memset(&t->slots[i], 0, sizeof(Ent));
}

/* Drop clean and absent entries until clean_bytes + extra fits in 3/4 of
 * the budget (so sweeps are amortized), at most one pass. */
static void evict(StorTable *t, size_t extra)
{
    size_t target = t->cache_budget / 4 * 3;
    size_t steps = t->cap;
    while (t->clean_bytes + extra > target && t->clean_bytes > 0 && steps-- > 0) {
        size_t i = t->sweep & (t->cap - 1);
        Ent *e = &t->slots[i];
        if (e->state == CLEAN || e->state == ABSENT)
            remove_slot(t, i); /* a shifted entry may now sit at i: look again */
        else
            t->sweep = i + 1;
    }
}

/* Drops the index; the next scan rebuilds it from the map. */
static void ix_invalidate(StorTable *t)
{
    for (int i = 0; i < IX_LEVELS; i++) {
        free(t->run[i]);
        t->run[i] = NULL;
        t->run_n[i] = 0;
    }
    free(t->fresh);
    t->fresh = NULL;
    t->fresh_n = 0;
    t->ix_valid = false;
    if (t->ix_keys)
        arena_reset(t->ix_keys); /* every key of the runs and fresh list */
}

/* The most keys run i may hold. */
static size_t run_cap(int i)
{
    size_t c = FRESH_MAX * 8;
    for (int k = 0; k < i; k++)
        c *= 8;
    return c;
}

static int dkey_cmp(const void *a, const void *b);

/* First index of v[0..n) whose key is >= k (n if none). */
static size_t dkeys_lower(const DKey *v, size_t n, const DKey *k)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (dkey_cmp(&v[mid], k) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Merges sorted a[0..na) and b[0..nb) into a new array (a key in both is
 * kept once, b's copy freed); frees both arrays. */
static DKey *dkeys_merge(DKey *a, size_t na, DKey *b, size_t nb, size_t *n_out)
{
    DKey *m = xmalloc((na + nb + 1) * sizeof *m);
    size_t i = 0, j = 0, n = 0;
    while (i < na || j < nb) {
        int c = i == na ? 1 : j == nb ? -1 : dkey_cmp(&a[i], &b[j]);
        if (c < 0) {
            m[n++] = a[i++];
        } else if (c > 0) {
            m[n++] = b[j++];
        } else {
            m[n++] = a[i++];
            j++;
        }
    }
    free(a);
    free(b);
    *n_out = n;
    return m;
}

/* Places sorted keys v[0..n) (taking the array) into the runs: merged into
 * run 0, the result moving up while it outgrows its level (a binary
 * counter with base 8: each key is merged O(8 * levels) times). */
static void runs_add(StorTable *t, DKey *v, size_t n)
{
    for (int i = 0; i < IX_LEVELS; i++) {
        if (t->run[i]) {
            v = dkeys_merge(t->run[i], t->run_n[i], v, n, &n);
            t->run[i] = NULL;
            t->run_n[i] = 0;
        }
        if (n <= run_cap(i) || i == IX_LEVELS - 1) {
            t->run[i] = v;
            t->run_n[i] = n;
            return;
        }
    }
}

/* A copy of key for the index, freed with the index (an arena: one
 * malloc per MiB of keys instead of one per key). */
static char *ix_key(StorTable *t, const void *key, size_t klen)
{
    if (!t->ix_keys)
        t->ix_keys = arena_new((size_t)1 << 20);
    char *d = arena_alloc(t->ix_keys, klen ? klen : 1);
    if (klen)
        memcpy(d, key, klen);
    return d;
}

/* An entry became dirty: its key joins the index (while the index is valid).
 * It is appended to the short unsorted fresh list (a scan checks each);
 * a full list is sorted and added to the runs. Writes cost O(log) amortised
 * moves; a scan costs a binary search per run plus the fresh list. */
static void note_dirty(StorTable *t, const void *key, size_t klen)
{
    if (!t->ix_valid)
        return;
    if (!t->fresh)
        t->fresh = xmalloc(FRESH_MAX * sizeof *t->fresh);
    DKey *d = &t->fresh[t->fresh_n++];
    d->key = ix_key(t, key, klen);
    d->klen = (uint32_t)klen;
    DKey dk = dkey_of(key, klen);
    d->p0 = dk.p0;
    d->p1 = dk.p1;
    if (t->fresh_n < FRESH_MAX)
        return;
    qsort(t->fresh, t->fresh_n, sizeof *t->fresh, dkey_cmp);
    size_t u = 0; /* a key made dirty twice meanwhile: once */
    for (size_t i = 0; i < t->fresh_n; i++) {
        if (!u || dkey_cmp(&t->fresh[u - 1], &t->fresh[i]) != 0)
            t->fresh[u++] = t->fresh[i];
    }
    DKey *v = t->fresh;
    t->fresh = NULL;
    t->fresh_n = 0;
    runs_add(t, v, u);
}

/* Insert a new entry at empty slot i (from find_slot). Takes ownership of
 * data. May rehash; returns the entry's slot. */
static size_t insert_at(StorTable *t, size_t i, uint64_t h, char *data, size_t klen, size_t vlen,
                        int state)
{
    if ((t->n_used + 1) * 10 > t->cap * 7) {
        rehash(t, t->cap * 2);
        i = h & (t->cap - 1);
        while (t->slots[i].state != EMPTY)
            i = (i + 1) & (t->cap - 1);
    }
    Ent *e = &t->slots[i];
    e->hash = h;
    e->data = data;
    e->klen = (uint32_t)klen;
    e->vlen = (uint32_t)vlen;
    e->state = (uint8_t)state;
    e->in_lmdb = state == CLEAN;
    e->seq = is_dirty(e) ? ++t->seq : 0;
    t->n_used++;
    if (is_dirty(e)) {
        t->n_dirty++;
        t->dirty_bytes += ent_bytes(e);
        note_dirty(t, data, klen);
    } else {
        t->clean_bytes += ent_bytes(e);
    }
    return i;
}

static char *dup_kv(StorTable *t, const void *key, size_t klen, const void *val, size_t vlen)
{
    size_t c = blk_size(klen + vlen) / 16 - 1;
    char *d;
    if (c < BLK_CLASSES && t->spare[c]) {
        d = t->spare[c];
        memcpy(&t->spare[c], d, sizeof(char *));
    } else {
        d = xmalloc(blk_size(klen + vlen));
    }
    if (klen)
        memcpy(d, key, klen);
    if (vlen)
        memcpy(d + klen, val, vlen);
    return d;
}

/* Cache a value read from LMDB (or its absence, val NULL). Returns the
 * slot or (size_t)-1 when over budget. */
static size_t cache_insert(StorTable *t, uint64_t h, const void *key, size_t klen, const void *val,
                           size_t vlen)
{
    size_t cost = klen + vlen + ENT_OVERHEAD;
    if (cost > t->cache_budget / 4)
        return (size_t)-1;
    if (t->clean_bytes + cost > t->cache_budget)
        evict(t, cost);
    size_t i = find_slot(t, h, key, klen); /* eviction may have moved slots */
    return insert_at(t, i, h, dup_kv(t, key, klen, val, vlen), klen, val ? vlen : 0,
                     val ? CLEAN : ABSENT);
}

/* ---------------------------------------------------------------------------
 * Open, close, drop
 * ------------------------------------------------------------------------- */

/* ---------------------------------------------------------------------------
 * Committed-key filter
 *
 * A key that is neither in the map nor in LMDB would cost a B-tree lookup
 * on every get (and an ABSENT cache entry): a windowed aggregation asks for
 * a new group on almost every row. A table that opened empty knows every
 * key that can reach LMDB -- each one passes through a checkpoint snapshot
 * -- so the snapshot adds its put keys to a Bloom filter, and get skips
 * LMDB when the filter says no. False positives only cost the lookup.
 * The filter grows by adding filters of twice the size (a scalable Bloom
 * filter: nothing to rehash). A table reopened over committed rows has no
 * filter (known_keys false) and always asks LMDB.
 * ------------------------------------------------------------------------- */

#define BLOOM_PROBES 7
#define BLOOM_FIRST_CAP 16384

/* Blocked: each key's 7 bits lie in one 512-bit (cache-line) block, so a
 * probe costs one cache miss per filter instead of one per bit. */
static void bloom_bits(uint64_t h, uint64_t mask, uint64_t *block, uint64_t *pos)
{
    uint64_t g = mix64(h ^ 0x5851f42d4c957f2dULL); /* the map uses h's low bits for its slots */
    *block = g & mask;
    *pos = mix64(g);                              /* seven 9-bit positions within the block */
}

static void bloom_add(StorTable *t, uint64_t h)
{
    if (t->n_blooms == 0 || t->blooms[t->n_blooms - 1].n >= t->blooms[t->n_blooms - 1].cap) {
        size_t cap = t->n_blooms ? t->blooms[t->n_blooms - 1].cap * 2 : BLOOM_FIRST_CAP;
        size_t nblocks = 1; /* next power of two of 10 bits per key, in 512-bit blocks */
        while (nblocks * 512 < cap * 10)
            nblocks <<= 1;
        t->blooms = xrealloc(t->blooms, (size_t)(t->n_blooms + 1) * sizeof *t->blooms);
        t->blooms[t->n_blooms++] = (Bloom){xcalloc(nblocks * 8, 8), nblocks - 1, 0, cap};
    }
    Bloom *b = &t->blooms[t->n_blooms - 1];
    uint64_t block, pos;
    bloom_bits(h, b->mask, &block, &pos);
    uint64_t *w = &b->bits[block * 8];
    for (int i = 0; i < BLOOM_PROBES; i++, pos >>= 9)
        w[(pos & 511) >> 6] |= 1ULL << (pos & 63);
    b->n++;
}

/* May the key with hash h be in LMDB? */
static bool bloom_maybe(const StorTable *t, uint64_t h)
{
    if (!t->known_keys)
        return true;
    for (int f = 0; f < t->n_blooms; f++) {
        const Bloom *b = &t->blooms[f];
        uint64_t block, pos;
        bloom_bits(h, b->mask, &block, &pos);
        const uint64_t *w = &b->bits[block * 8];
        int i = 0;
        for (; i < BLOOM_PROBES; i++, pos >>= 9)
            if (!(w[(pos & 511) >> 6] & (1ULL << (pos & 63))))
                break;
        if (i == BLOOM_PROBES)
            return true;
    }
    return false;
}

static void bloom_free(StorTable *t)
{
    for (int f = 0; f < t->n_blooms; f++)
        free(t->blooms[f].bits);
    free(t->blooms);
    t->blooms = NULL;
    t->n_blooms = 0;
}

static void make_key(uint8_t *buf, const StorTable *t, const void *key, size_t klen)
{
    memcpy(buf, t->prefix, t->pl);
    if (klen)
        memcpy(buf + t->pl, key, klen);
}

void table_dbi_name(uint64_t id, char name[18])
{
    static const char hex[] = "0123456789abcdef";
    name[0] = 't';
    for (int i = 0; i < 16; i++)
        name[1 + i] = hex[(id >> (60 - 4 * i)) & 15];
    name[17] = 0;
}

bool table_location(const StorTable *t, MDB_dbi *dbi, const uint8_t **prefix, size_t *pl)
{
    *dbi = t->dbi;
    *prefix = t->prefix;
    *pl = t->pl;
    return t->dbi_ok;
}

void table_placed(StorTable *t, MDB_dbi dbi, bool in_state)
{
    t->dbi = dbi;
    t->dbi_ok = true;
    if (in_state) {
        put_u64be(t->prefix, t->id);
        t->pl = 8;
    }
}

/* Opens an existing database of a table in a write transaction:
 * mdb_dbi_open must not run in two transactions at once, and only write
 * transactions are serialized (checkpoints create databases in theirs).
 * The commit writes nothing. */
typedef struct DbiOpen {
    uint64_t id;
    MDB_dbi dbi;
} DbiOpen;

static int dbi_open_body(StorEnv *env, MDB_txn *txn, void *arg, WError *err)
{
    DbiOpen *a = arg;
    char name[18];
    table_dbi_name(a->id, name);
    int rc = mdb_dbi_open(txn, name, 0, &a->dbi);
    if (rc != MDB_DBS_FULL)
        return rc;
    werr(err, SQLSTATE_PROGRAM_LIMIT, 0,
         "storage: state table %llu cannot be opened: %u state tables with their own database "
         "are open already", (unsigned long long)a->id, env->opt.max_table_dbs);
    if (err)
        werr_detail(err, "raise the limit (StorOptions.max_table_dbs) or open fewer tables");
    return BODY_FAILED;
}

int stor_table_open(StorEnv *env, uint64_t table_id, StorTable **out, WError *err)
{
    StorTable *t = xcalloc(1, sizeof *t);
    MDB_txn *txn;
    MDB_cursor *cur;
    int rc;
    t->env = env;
    t->id = table_id;
    put_u64be(t->prefix, table_id);
    t->pl = 8;
    t->dbi = env->dbi_state;
    t->cap = 64;
    t->slots = slots_new(t->cap);
    t->cache_budget = env->opt.table_cache_bytes;
    if (env_read_begin(env, &txn, err) < 0)
        goto fail;
    /* Rows in `state` (a table of a format-1 directory, or one opened past
     * max_table_dbs): the table stays there. Otherwise it has its own
     * database, or gets one from its first checkpoint with a put (so the
     * temporary tables of ad hoc queries, never checkpointed, never make
     * one), or shares `state` if no slot is left then. */
    bool own = false;
    t->dbi_ok = true;
    rc = mdb_cursor_open(txn, env->dbi_state, &cur);
    if (rc == 0) {
        MDB_val k = {8, t->prefix}, d;
        rc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE);
        t->has_committed = rc == 0 && k.mv_size >= 8 && memcmp(k.mv_data, t->prefix, 8) == 0;
        if (rc == MDB_NOTFOUND)
            rc = 0;
        mdb_cursor_close(cur);
    }
    if (rc == 0 && !t->has_committed && env->format >= 2) {
        char name[18];
        table_dbi_name(table_id, name);
        MDB_val k = {17, name}, d;
        rc = mdb_get(txn, env->dbi_main, &k, &d);
        own = rc == 0;
        if (rc == MDB_NOTFOUND)
            rc = 0;
        t->prefix[0] = 0;
        t->pl = 1;
        t->dbi_ok = false;
    }
    env_read_end(env, txn);
    if (rc) {
        stor_mdb_err(err, rc, "open state table");
        goto fail;
    }
    if (own) {
        DbiOpen a = {.id = table_id};
        if (env_write(env, 0, dbi_open_body, &a, err) < 0)
            goto fail;
        t->dbi = a.dbi;
        t->dbi_ok = true;
        if (env_read_begin(env, &txn, err) < 0)
            goto fail;
        rc = mdb_cursor_open(txn, t->dbi, &cur);
        if (rc == 0) {
            MDB_val k, d;
            rc = mdb_cursor_get(cur, &k, &d, MDB_FIRST);
            t->has_committed = rc == 0;
            if (rc == MDB_NOTFOUND)
                rc = 0;
            mdb_cursor_close(cur);
        }
        env_read_end(env, txn);
        if (rc) {
            stor_mdb_err(err, rc, "open state table");
            goto fail;
        }
    }
    t->known_keys = !t->has_committed;
    *out = t;
    return 0;
fail:
    stor_table_close(t);
    *out = NULL;
    return -1;
}

void stor_table_close(StorTable *t)
{
    if (!t)
        return;
    if (t->n_parts) {
        free(t->parts);
        free(t);
        return;
    }
    for (size_t i = 0; i < t->cap; i++)
        free(t->slots[i].data);
    slots_free(t->slots, t->cap);
    for (size_t i = 0; i < t->n_retired; i++)
        free(t->retired[i]);
    free(t->retired);
    free(t->retired_len);
    spare_free(t);
    free(t->snap);
    buf_free(&t->scratch);
    ix_invalidate(t);
    arena_free(t->ix_keys);
    bloom_free(t);
    free(t);
}

/* Deletes the table's own database (if any) and its rows in `state` (if
 * any). mdb_drop closes the handle at once, even if this transaction is
 * later aborted and re-run: so the handle is looked up by name each time. */
static int drop_body(StorEnv *env, MDB_txn *txn, void *arg, WError *err)
{
    uint8_t prefix[8];
    MDB_cursor *cur;
    char name[18];
    MDB_dbi dbi;
    table_dbi_name(*(uint64_t *)arg, name);
    /* Look in the main database first: mdb_dbi_open fails with
     * MDB_DBS_FULL when every slot is taken, even for a name that does not
     * exist. One that exists finds a slot: the limit bounds the databases
     * in the directory, and this one's slot is free or its own. */
    MDB_val nk = {17, name}, nd;
    int rc = mdb_get(txn, env->dbi_main, &nk, &nd);
    if (rc == 0)
        rc = mdb_dbi_open(txn, name, 0, &dbi);
    if (rc == 0)
        rc = mdb_drop(txn, dbi, 1);
    if (rc && rc != MDB_NOTFOUND)
        return rc;
    put_u64be(prefix, *(uint64_t *)arg);
    rc = mdb_cursor_open(txn, env->dbi_state, &cur);
    if (rc)
        return rc;
    MDB_val k = {8, prefix}, d;
    for (rc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE); rc == 0;
         rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
        if (k.mv_size < 8 || memcmp(k.mv_data, prefix, 8) != 0)
            break;
        /* After a delete the cursor sits on the successor, which MDB_NEXT
         * returns. */
        if ((rc = mdb_cursor_del(cur, 0)))
            break;
    }
    mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

int stor_table_drop(StorEnv *env, uint64_t table_id, WError *err)
{
    return env_write(env, 0, drop_body, &table_id, err);
}

uint64_t stor_table_point_reads(const StorTable *t) { return t->point_reads; }

void stor_table_set_cache_budget(StorTable *t, size_t bytes)
{
    t->cache_budget = bytes;
    if (t->clean_bytes > bytes)
        evict(t, 0);
}

size_t stor_table_dirty_count(const StorTable *t) { return t->n_dirty; }

size_t stor_table_dirty_bytes(const StorTable *t) { return t->dirty_bytes; }

/* Recounts the committed bytes and entries of t when a checkpoint changed
 * them (one range scan, O(committed rows)). */
static void committed_recount(StorTable *t)
{
    if (!t->committed_bytes_ok && !t->has_committed) {
        t->committed_bytes = t->committed_entries = 0;
        t->committed_bytes_ok = true;
    }
    if (t->committed_bytes_ok)
        return;
    uint64_t sum = 0, entries = 0;
    MDB_txn *txn;
    MDB_cursor *cur;
    if (env_read_begin(t->env, &txn, NULL) < 0)
        return;
    if (mdb_cursor_open(txn, t->dbi, &cur) == 0) {
        MDB_val k = {t->pl, t->prefix}, d;
        for (int rc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
            if (k.mv_size < t->pl || memcmp(k.mv_data, t->prefix, t->pl) != 0)
                break;
            sum += k.mv_size - t->pl + d.mv_size;
            entries++;
        }
        mdb_cursor_close(cur);
    }
    env_read_end(t->env, txn);
    t->committed_bytes = sum;
    t->committed_entries = entries;
    t->committed_bytes_ok = true;
}

uint64_t stor_table_size_bytes(StorTable *t)
{
    if (t->n_parts) {
        uint64_t sum = 0;
        for (int i = 0; i < t->n_parts; i++)
            sum += stor_table_size_bytes(t->parts[i]);
        return sum;
    }
    committed_recount(t);
    return (t->committed_bytes_ok ? t->committed_bytes : 0) + t->dirty_bytes;
}

uint64_t stor_table_committed_entries(StorTable *t)
{
    if (t->n_parts) {
        uint64_t sum = 0;
        for (int i = 0; i < t->n_parts; i++)
            sum += stor_table_committed_entries(t->parts[i]);
        return sum;
    }
    committed_recount(t);
    return t->committed_bytes_ok ? t->committed_entries : 0;
}

/* ---------------------------------------------------------------------------
 * get / put / delete
 * ------------------------------------------------------------------------- */

static int check_key(size_t klen, WError *err)
{
    if (klen > STOR_MAX_KEY)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0,
                    "storage: state key of %zu bytes exceeds the limit of %d", klen, STOR_MAX_KEY);
    return 0;
}

/* A merged handle only reads: its parts belong to the operators that write them. */
static int read_only(const StorTable *t, WError *err)
{
    if (t->n_parts)
        return werr(err, SQLSTATE_INTERNAL, 0, "storage: a merged table is read-only");
    return 0;
}

static int grouped_get(StorTable *t, const void *key, size_t klen, const void **val, size_t *vlen,
                       WError *err);

int stor_table_get(StorTable *t, const void *key, size_t klen, const void **val, size_t *vlen,
                   WError *err)
{
    if (check_key(klen, err) < 0)
        return -1;
    if (t->n_groups)
        return grouped_get(t, key, klen, val, vlen, err);
    if (t->n_parts) {
        for (int p = 0; p < t->n_parts; p++) {
            int f = stor_table_get(t->parts[p], key, klen, val, vlen, err);
            if (f)
                return f;
        }
        return 0;
    }
    uint64_t h = hash_key(key, klen);
    size_t i = find_slot(t, h, key, klen);
    Ent *e = &t->slots[i];
    if (e->state != EMPTY) {
        if (e->state == DIRTY_DEL || e->state == ABSENT)
            return 0;
        *val = e->data + e->klen;
        *vlen = e->vlen;
        return 1;
    }
    if (!t->has_committed || !bloom_maybe(t, h))
        return 0;

    uint8_t kb[8 + STOR_MAX_KEY];
    MDB_txn *txn;
    make_key(kb, t, key, klen);
    if (env_read_begin(t->env, &txn, err) < 0)
        return -1;
    MDB_val k = {t->pl + klen, kb}, d;
    t->point_reads++;
    int rc = FAULT("lmdb_get") ? EIO : mdb_get(txn, t->dbi, &k, &d);
    size_t slot = (size_t)-1;
    if (rc == 0 || rc == MDB_NOTFOUND)
        slot = cache_insert(t, h, key, klen, rc == 0 ? d.mv_data : NULL, rc == 0 ? d.mv_size : 0);
    if (rc == 0 && slot == (size_t)-1) {
        buf_reset(&t->scratch);
        buf_append(&t->scratch, d.mv_data, d.mv_size);
    }
    env_read_end(t->env, txn);
    if (rc == MDB_NOTFOUND)
        return 0;
    if (rc)
        return stor_mdb_err(err, rc, "state table read");
    if (slot != (size_t)-1) {
        *val = t->slots[slot].data + klen;
        *vlen = t->slots[slot].vlen;
    } else {
        *val = t->scratch.data;
        *vlen = t->scratch.len;
    }
    return 1;
}

/* Make key's entry dirty with state (DIRTY_PUT with val, or DIRTY_DEL). */
static void write_ent(StorTable *t, const void *key, size_t klen, const void *val, size_t vlen,
                      int state)
{
    uint64_t h = hash_key(key, klen);
    size_t i = find_slot(t, h, key, klen);
    Ent *e = &t->slots[i];
    if (e->state == EMPTY) {
        insert_at(t, i, h, dup_kv(t, key, klen, val, vlen), klen, vlen, state);
        return;
    }
    if (is_dirty(e)) {
        t->dirty_bytes -= ent_bytes(e);
    } else {
        t->clean_bytes -= ent_bytes(e);
        t->n_dirty++;
        note_dirty(t, key, klen);
    }
    if (e->frozen) {
        /* The snapshot still reads the old block: write a new one. */
        char *d = dup_kv(t, key, klen, val, vlen);
        release(t, e);
        e->data = d;
    } else {
        if (blk_size(e->klen + e->vlen) != blk_size(klen + vlen))
            e->data = xrealloc(e->data, blk_size(klen + vlen));
        if (vlen)
            memcpy(e->data + klen, val, vlen);
    }
    e->vlen = (uint32_t)vlen;
    e->state = (uint8_t)state;
    e->seq = ++t->seq;
    t->dirty_bytes += ent_bytes(e);
}

void stor_table_prefetch(const StorTable *t, const void *key, size_t klen)
{
    if (t->n_parts || !t->slots)
        return;
    __builtin_prefetch(&t->slots[hash_key(key, klen) & (t->cap - 1)], 1, 1);
}

int stor_table_put(StorTable *t, const void *key, size_t klen, const void *val, size_t vlen,
                   WError *err)
{
    if (check_key(klen, err) < 0 || read_only(t, err))
        return -1;
    if (vlen >= UINT32_MAX)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "storage: state value too large (%zu bytes)",
                    vlen);
    write_ent(t, key, klen, val, vlen, DIRTY_PUT);
    return 0;
}

int stor_table_delete(StorTable *t, const void *key, size_t klen, WError *err)
{
    if (check_key(klen, err) < 0 || read_only(t, err))
        return -1;
    uint64_t h = hash_key(key, klen);
    if ((!t->has_committed && !t->in_ck) || !bloom_maybe(t, h)) {
        /* Nothing committed and no snapshot pending (a pending snapshot's
         * puts are in the filter already): the key cannot exist durably,
         * so forget it instead of writing a tombstone. */
        size_t i = find_slot(t, h, key, klen);
        if (t->slots[i].state != EMPTY)
            remove_slot(t, i);
        return 0;
    }
    write_ent(t, key, klen, NULL, 0, DIRTY_DEL);
    return 0;
}

/* ---------------------------------------------------------------------------
 * Checkpoint hooks
 * ------------------------------------------------------------------------- */

uint64_t table_id(const StorTable *t) { return t->id; }
bool table_in_checkpoint(const StorTable *t) { return t->in_ck; }

/* Sort item: the key's first 16 bytes as two big-endian integers (zero
 * padded) and its length, so keys of up to 16 bytes -- most operator
 * keys -- sort without touching the entries (random memory). When the
 * padded prefixes tie, the shorter key is a prefix of the longer one. */
typedef struct SortItem {
    uint64_t p0, p1;
    uint32_t klen;
    Ent *e;
} SortItem;

static int item_cmp(const void *a, const void *b)
{
    const SortItem *x = a, *y = b;
    if (x->p0 != y->p0)
        return x->p0 < y->p0 ? -1 : 1;
    if (x->p1 != y->p1)
        return x->p1 < y->p1 ? -1 : 1;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = n > 16 ? memcmp(x->e->data + 16, y->e->data + 16, n - 16) : 0;
    if (c)
        return c;
    return (x->klen > y->klen) - (x->klen < y->klen);
}

static int dkey_cmp(const void *a, const void *b)
{
    const DKey *x = a, *y = b;
    if (x->p0 != y->p0)
        return x->p0 < y->p0 ? -1 : 1;
    if (x->p1 != y->p1)
        return x->p1 < y->p1 ? -1 : 1;
    /* Equal first 16 bytes (zero-padded): the rest decides, then the length. */
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = n > 16 ? memcmp(x->key + 16, y->key + 16, n - 16) : 0;
    return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

/* Builds the index from the map, or merges the pending keys into it when
 * there are enough of them (amortised: each key is sorted O(log) times). */
static void ix_refresh(StorTable *t)
{
    if (t->ix_valid)
        return;
    ix_invalidate(t);
    DKey *v = xmalloc((t->n_dirty + 1) * sizeof *v);
    size_t n = 0;
    for (size_t i = 0; i < t->cap; i++) {
        Ent *e = &t->slots[i];
        if (!is_dirty(e))
            continue;
        DKey *d = &v[n++];
        d->key = ix_key(t, e->data, e->klen);
        d->klen = e->klen;
        DKey dk = dkey_of(e->data, e->klen);
        d->p0 = dk.p0;
        d->p1 = dk.p1;
    }
    qsort(v, n, sizeof *v, dkey_cmp);
    t->ix_valid = true;
    runs_add(t, v, n);
}

static void add_item(SortItem *v, size_t *n, Ent *e)
{
    uint8_t b[16] = {0};
    memcpy(b, e->data, e->klen < 16 ? e->klen : 16);
    v[*n].p0 = get_u64be(b);
    v[*n].p1 = get_u64be(b + 8);
    v[*n].klen = e->klen;
    v[(*n)++].e = e;
}

/* Dirty entries (optionally with a key prefix), sorted. Caller frees. A
 * prefix scan uses the index: a binary search, the matching keys, and the
 * pending ones, instead of every dirty entry. */
static SortItem *sorted_dirty(StorTable *t, const void *prefix, size_t plen, const void *lower, size_t llen,
                              const void *upper, size_t ulen, size_t *n_out)
{
    ix_refresh(t);
    size_t lo[IX_LEVELS], end[IX_LEVELS], total = t->fresh_n + 1;
    DKey pk = dkey_of(prefix, plen), uk = dkey_of(upper, upper ? ulen : 0), lk = dkey_of(lower, lower ? llen : 0);
    for (int l = 0; l < IX_LEVELS; l++) {
        /* Each run is sorted: the prefix's range, from lower, cut at upper. */
        const DKey *v = t->run[l];
        size_t len = t->run_n[l];
        lo[l] = end[l] = 0;
        if (!len)
            continue;
        lo[l] = dkeys_lower(v, len, &pk);
        size_t start = lo[l];
        size_t e = len;
        if (plen) {
            /* The keys with the prefix are contiguous: the first one past them. */
            size_t a = lo[l], z = len;
            while (a < z) {
                size_t mid = (a + z) / 2;
                int c = prefix_cmp(&v[mid], &pk, plen);
                if (c < 0 || (c == 0 && v[mid].klen >= plen))
                    a = mid + 1;
                else
                    z = mid;
            }
            e = a;
        }
        if (lower)
            lo[l] = start + dkeys_lower(v + start, e - start, &lk);
        if (upper && e > lo[l])
            e = lo[l] + dkeys_lower(v + lo[l], e - lo[l], &uk);
        end[l] = e < lo[l] ? lo[l] : e;
        total += end[l] - lo[l];
    }
    SortItem *v = xmalloc(2 * total * sizeof *v);
    size_t n = 0, seg[IX_LEVELS + 2];
    int n_seg = 0;
    /* The prefix's first 16 bytes as masks, for the unsorted keys. */
    uint64_t pm0 = word_mask(plen), pm1 = word_mask(plen > 8 ? plen - 8 : 0);
    for (int pass = 0; pass <= IX_LEVELS; pass++) {
        seg[n_seg++] = n; /* each pass is one sorted segment (fresh once sorted) */
        bool fresh = pass == IX_LEVELS;
        const DKey *keys = fresh ? t->fresh : t->run[pass] + lo[pass];
        size_t cnt = fresh ? t->fresh_n : end[pass] - lo[pass];
        for (size_t i = 0; i < cnt; i++) {
            if (fresh) { /* unsorted: check each against the range */
                const DKey *k = &keys[i];
                if (plen && (k->klen < plen || ((k->p0 ^ pk.p0) & pm0) || ((k->p1 ^ pk.p1) & pm1) ||
                             (plen > 16 && memcmp(k->key + 16, (const char *)prefix + 16, plen - 16) != 0)))
                    continue;
                if ((lower && dkey_cmp(k, &lk) < 0) || (upper && dkey_cmp(k, &uk) >= 0))
                    continue;
            }
            size_t s = find_slot(t, hash_key(keys[i].key, keys[i].klen), keys[i].key, keys[i].klen);
            Ent *e = &t->slots[s];
            if (e->state != EMPTY && is_dirty(e))
                add_item(v, &n, e);
        }
    }
    seg[n_seg] = n;
    /* The fresh segment is unsorted; then merge the sorted segments pairwise
     * (a merge sort's upper levels), between v and its second half. */
    if (n - seg[IX_LEVELS] > 1)
        qsort(v + seg[IX_LEVELS], n - seg[IX_LEVELS], sizeof *v, item_cmp);
    SortItem *src = v, *dst = v + total;
    while (n_seg > 1) {
        int out = 0;
        for (int i = 0; i < n_seg; i += 2) {
            size_t a = seg[i], am = seg[i + 1], b = am, bm = i + 1 < n_seg ? seg[i + 2] : am, o = a;
            while (a < am || b < bm)
                dst[o++] = (b == bm || (a < am && item_cmp(&src[a], &src[b]) <= 0)) ? src[a++] : src[b++];
            seg[out++] = seg[i];
        }
        seg[out] = n;
        n_seg = out;
        SortItem *tmp = src;
        src = dst;
        dst = tmp;
    }
    if (src != v)
        memcpy(v, src, n * sizeof *v);
    /* A key found in two runs: once. */
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (w == 0 || v[w - 1].e != v[i].e)
            v[w++] = v[i];
    *n_out = w;
    return v;
}

uint64_t table_snapshot(StorTable *t, const SnapRec **recs, size_t *n_rows, uint64_t *n_bytes,
                        bool *any_put)
{
    /* In slot order: the checkpoint's writer sorts them, off this thread. */
    size_t n = 0;
    uint64_t bytes = 0;
    bool put = false;
    if (t->snap_cap < t->n_dirty) {
        free(t->snap);
        t->snap_cap = t->n_dirty + t->n_dirty / 4;
        t->snap = xmalloc(t->snap_cap * sizeof *t->snap);
    }
    for (size_t i = 0; i < t->cap && n < t->n_dirty; i++) {
        Ent *e = &t->slots[i];
        if (!is_dirty(e))
            continue;
        bool del = e->state == DIRTY_DEL;
        t->snap[n++] = (SnapRec){e->data, e->klen, e->vlen, del};
        e->frozen = 1;
        bytes += 8 + (uint64_t)e->klen + e->vlen;
        put |= !del;
        /* Added now, before the commit: if it fails the key is a false positive. */
        if (!del && t->known_keys && !e->in_lmdb)
            bloom_add(t, e->hash);
    }
    t->in_ck = true;
    *recs = t->snap;
    *n_rows = n;
    *n_bytes = bytes;
    *any_put = put;
    return t->seq;
}

/* Thaws the frozen entries and frees the blocks retired while the
 * snapshot was open. */
static void thaw(StorTable *t)
{
    spare_free(t); /* not needed during a whole epoch */
    for (size_t i = 0; i < t->n_retired; i++) {
        size_t c = blk_size(t->retired_len[i]) / 16 - 1;
        if (c < BLK_CLASSES) {
            memcpy(t->retired[i], &t->spare[c], sizeof(char *));
            t->spare[c] = t->retired[i];
        } else {
            free(t->retired[i]);
        }
    }
    t->n_retired = 0;
    /* A big retired list is a one-off (a burst of rewrites): do not keep it. */
    if (t->retired_cap > 4096 && t->n_dirty < t->retired_cap / 4) {
        free(t->retired);
        free(t->retired_len);
        t->retired = NULL;
        t->retired_len = NULL;
        t->retired_cap = 0;
    }
}

void table_checkpoint_done(StorTable *t, uint64_t snap_seq, bool committed, bool any_put)
{
    t->in_ck = false;
    thaw(t);
    if (!committed) {
        for (size_t i = 0; i < t->cap; i++)
            t->slots[i].frozen = 0;
        return;
    }
    ix_invalidate(t); /* most dirty keys are clean now: rebuild when next needed */
    t->has_committed |= any_put;
    t->committed_bytes_ok = false;
    for (size_t i = 0; i < t->cap; i++) {
        Ent *e = &t->slots[i];
        e->frozen = 0;
        if (!is_dirty(e) || e->seq > snap_seq)
            continue;
        t->dirty_bytes -= ent_bytes(e);
        t->n_dirty--;
        e->in_lmdb = e->state == DIRTY_PUT;
        e->state = e->state == DIRTY_PUT ? CLEAN : ABSENT;
        e->seq = 0;
        t->clean_bytes += ent_bytes(e);
    }
    if (t->clean_bytes > t->cache_budget)
        evict(t, 0);
}

/* ---------------------------------------------------------------------------
 * Iterators: a sorted copy of the matching dirty entries merged with
 * committed rows read in batches (short read transactions, so no
 * transaction outlives a call and the map can grow between batches).
 * ------------------------------------------------------------------------- */

#define BATCH_ROWS 512
#define BATCH_BYTES ((size_t)1 << 20)

/* A row in a copied run: TabRec then key then value. */
typedef struct Run {
    Buf data;
    size_t *offs;       /* record offsets */
    size_t n, pos, cap;
} Run;

typedef struct MergeHead {
    const void *key, *val;
    size_t klen, vlen;
    bool has, done;
} MergeHead;

struct StorIter {
    StorTable *t;
    uint8_t *prefix;    /* table prefix ++ scan prefix */
    size_t plen;        /* including the table's key prefix (table_location) */
    Run dirty;          /* snapshot, fixed at open */
    Run lmdb;           /* current batch of committed rows */
    bool lmdb_done;
    bool lmdb_started;
    Buf last;           /* last committed key read (full key), to resume */
    /* A merged table's iterator: one per part, and each one's current row
     * (has[i] false: not read yet or finished, done[i]). */
    StorIter **subs;
    int n_subs;
    MergeHead *heads;
    size_t strip;       /* a grouped handle's iterator: bytes of key-group prefix cut off each key */
    char *upper;        /* keys at or above this are left out (NULL: none) */
    size_t ulen;
    uint8_t *lower;     /* table prefix ++ the first key to return, or NULL */
    size_t llen;
};

static void run_add(Run *r, const void *key, size_t klen, const void *val, size_t vlen, bool del)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 64;
        r->offs = xrealloc(r->offs, r->cap * sizeof *r->offs);
    }
    r->offs[r->n++] = r->data.len;
    TabRec h = {(uint32_t)klen, (uint32_t)vlen, del};
    buf_append(&r->data, &h, sizeof h);
    buf_append(&r->data, key, klen);
    buf_append(&r->data, val, vlen);
}

/* The run's current record, or false at its end. Records are not aligned,
 * so the header is copied out. */
static bool run_head(const Run *r, TabRec *h, const char **key, const char **val)
{
    if (r->pos >= r->n)
        return false;
    const char *p = r->data.data + r->offs[r->pos];
    memcpy(h, p, sizeof *h);
    *key = p + sizeof *h;
    *val = *key + h->klen;
    return true;
}

static int key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen > blen) - (alen < blen);
}

static int fill_batch(StorIter *it, WError *err)
{
    StorTable *t = it->t;
    MDB_txn *txn;
    MDB_cursor *cur;
    Run *r = &it->lmdb;
    int rc;
    r->n = r->pos = 0;
    buf_reset(&r->data);
    if (env_read_begin(t->env, &txn, err) < 0)
        return -1;
    if ((rc = mdb_cursor_open(txn, t->dbi, &cur))) {
        env_read_end(t->env, txn);
        return stor_mdb_err(err, rc, "state table scan");
    }
    MDB_val k, d;
    if (it->lmdb_started) {
        k.mv_size = it->last.len;
        k.mv_data = it->last.data;
    } else if (it->lower) {
        k.mv_size = it->llen;
        k.mv_data = it->lower; /* table prefix ++ lower bound */
    } else {
        k.mv_size = it->plen;
        k.mv_data = it->prefix;
    }
    rc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE);
    if (rc == 0 && it->lmdb_started && k.mv_size == it->last.len &&
        memcmp(k.mv_data, it->last.data, it->last.len) == 0)
        rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT);
    it->lmdb_started = true;
    for (; rc == 0; rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
        if (k.mv_size < it->plen || memcmp(k.mv_data, it->prefix, it->plen) != 0) {
            rc = MDB_NOTFOUND;
            break;
        }
        if (it->upper && key_cmp((const char *)k.mv_data + t->pl, k.mv_size - t->pl, it->upper, it->ulen) >= 0) {
            rc = MDB_NOTFOUND;
            break;
        }
        if (r->n >= BATCH_ROWS || r->data.len >= BATCH_BYTES)
            break;
        run_add(r, (char *)k.mv_data + t->pl, k.mv_size - t->pl, d.mv_data, d.mv_size, false);
        buf_reset(&it->last);
        buf_append(&it->last, k.mv_data, k.mv_size);
    }
    mdb_cursor_close(cur);
    env_read_end(t->env, txn);
    if (rc == MDB_NOTFOUND)
        it->lmdb_done = true;
    else if (rc)
        return stor_mdb_err(err, rc, "state table scan");
    return 0;
}

/* ---------------------------------------------------------------------------
 * Merged tables: one read-only view over the tables of a split operator
 * (a parallel view's materialize instances), whose key sets are disjoint
 * but for keys every part keeps for itself (the row-id counter): a key
 * found in several parts is returned once, from the lowest part, as get
 * does.
 * ------------------------------------------------------------------------- */

int stor_table_open_merged(StorTable *const *parts, int n, StorTable **out, WError *err)
{
    if (n < 1)
        return werr(err, SQLSTATE_INTERNAL, 0, "storage: a merged table needs at least one part");
    for (int i = 0; i < n; i++)
        if (!parts[i] || parts[i]->n_parts)
            return werr(err, SQLSTATE_INTERNAL, 0, "storage: a merged table's parts must be plain tables");
    StorTable *t = xcalloc(1, sizeof *t);
    t->env = parts[0]->env;
    t->parts = xmalloc(sizeof(StorTable *) * (size_t)n);
    memcpy(t->parts, parts, sizeof(StorTable *) * (size_t)n);
    t->n_parts = n;
    *out = t;
    return 0;
}

static int grouped_open(StorTable *t, const void *prefix, size_t plen, const void *lower, size_t llen,
                        const void *upper, size_t ulen, StorIter **out, WError *err);

static int merged_open(StorTable *t, const void *prefix, size_t plen, const void *lower, size_t llen,
                       const void *upper, size_t ulen, StorIter **out, WError *err)
{
    if (t->n_groups)
        return grouped_open(t, prefix, plen, lower, llen, upper, ulen, out, err);
    StorIter *it = xcalloc(1, sizeof *it);
    it->t = t;
    it->subs = xcalloc((size_t)t->n_parts, sizeof(StorIter *));
    it->heads = xcalloc((size_t)t->n_parts, sizeof(MergeHead));
    it->n_subs = t->n_parts;
    for (int i = 0; i < t->n_parts; i++)
        if (stor_iter_open_range(t->parts[i], prefix, plen, lower, llen, upper, ulen, &it->subs[i], err)) {
            stor_iter_close(it);
            return -1;
        }
    *out = it;
    return 0;
}

/* The k-way merge. A part's head stays valid until its own iterator is
 * called again, which happens only on the call after the one that returned
 * it: so what the caller got is valid until its next call, as for a plain
 * iterator. k is the number of instances (at most 64): a linear scan for
 * the least head beats a heap at that size. */
static int merged_next(StorIter *it, const void **key, size_t *klen, const void **val, size_t *vlen,
                       WError *err)
{
    for (int i = 0; i < it->n_subs; i++) {
        MergeHead *h = &it->heads[i];
        if (h->has || h->done)
            continue;
        int f = stor_iter_next(it->subs[i], &h->key, &h->klen, &h->val, &h->vlen, err);
        if (f < 0)
            return -1;
        h->has = f == 1;
        h->done = f == 0;
    }
    int best = -1;
    for (int i = 0; i < it->n_subs; i++) {
        MergeHead *h = &it->heads[i];
        if (!h->has)
            continue;
        if (best < 0) {
            best = i;
            continue;
        }
        size_t sp = it->strip; /* compared without a grouped handle's prefix */
        int c = key_cmp((const char *)h->key + sp, h->klen - sp, (const char *)it->heads[best].key + sp,
                        it->heads[best].klen - sp);
        if (c < 0) {
            best = i;
        } else if (c == 0) {
            h->has = false; /* the same key in a later part: the earlier one's is returned */
        }
    }
    if (best < 0)
        return 0;
    MergeHead *h = &it->heads[best];
    h->has = false;
    *key = (const char *)h->key + it->strip;
    *klen = h->klen - it->strip;
    *val = h->val;
    *vlen = h->vlen;
    return 1;
}

int stor_iter_open(StorTable *t, const void *prefix, size_t plen, StorIter **out, WError *err)
{
    return stor_iter_open_range(t, prefix, plen, NULL, 0, NULL, 0, out, err);
}

int stor_iter_open_below(StorTable *t, const void *prefix, size_t plen, const void *upper, size_t ulen,
                         StorIter **out, WError *err)
{
    return stor_iter_open_range(t, prefix, plen, NULL, 0, upper, ulen, out, err);
}

int stor_iter_open_range(StorTable *t, const void *prefix, size_t plen, const void *lower, size_t llen,
                         const void *upper, size_t ulen, StorIter **out, WError *err)
{
    if (check_key(plen, err) < 0 || (upper && check_key(ulen, err) < 0) || (lower && check_key(llen, err) < 0))
        return -1;
    if (t->n_parts)
        return merged_open(t, prefix, plen, lower, llen, upper, ulen, out, err);
    StorIter *it = xcalloc(1, sizeof *it);
    it->t = t;
    it->plen = t->pl + plen;
    it->prefix = xmalloc(it->plen);
    make_key(it->prefix, t, prefix, plen);
    if (upper) {
        it->upper = xmalloc(ulen ? ulen : 1);
        memcpy(it->upper, upper, ulen);
        it->ulen = ulen;
    }
    if (lower) {
        it->llen = t->pl + llen;
        it->lower = xmalloc(it->llen);
        make_key(it->lower, t, lower, llen);
    }
    size_t n;
    SortItem *v = sorted_dirty(t, prefix, plen, lower, llen, upper, ulen, &n);
    for (size_t i = 0; i < n; i++)
        run_add(&it->dirty, v[i].e->data, v[i].e->klen, v[i].e->data + v[i].e->klen, v[i].e->vlen,
                v[i].e->state == DIRTY_DEL);
    free(v);
    it->lmdb_done = !t->has_committed;
    *out = it;
    return 0;
}

int stor_iter_next(StorIter *it, const void **key, size_t *klen, const void **val, size_t *vlen,
                   WError *err)
{
    if (it->subs)
        return merged_next(it, key, klen, val, vlen, err);
    for (;;) {
        if (it->lmdb.pos >= it->lmdb.n && !it->lmdb_done && fill_batch(it, err) < 0)
            return -1;
        const char *dk = NULL, *dv = NULL, *lk = NULL, *lv = NULL;
        TabRec dh = {0}, lh = {0};
        bool hd = run_head(&it->dirty, &dh, &dk, &dv);
        bool hl = run_head(&it->lmdb, &lh, &lk, &lv);
        if (!hd && !hl)
            return 0;
        int c = !hd ? 1 : !hl ? -1 : key_cmp(dk, dh.klen, lk, lh.klen);
        if (c <= 0) {
            it->dirty.pos++;
            if (c == 0)
                it->lmdb.pos++;
            if (dh.del)
                continue;
            *key = dk;
            *klen = dh.klen;
            *val = dv;
            *vlen = dh.vlen;
            return 1;
        }
        it->lmdb.pos++;
        *key = lk;
        *klen = lh.klen;
        *val = lv;
        *vlen = lh.vlen;
        return 1;
    }
}

void stor_iter_close(StorIter *it)
{
    if (!it)
        return;
    for (int i = 0; i < it->n_subs; i++)
        stor_iter_close(it->subs[i]);
    free(it->subs);
    free(it->heads);
    buf_free(&it->dirty.data);
    free(it->dirty.offs);
    buf_free(&it->lmdb.data);
    free(it->lmdb.offs);
    buf_free(&it->last);
    free(it->prefix);
    free(it->upper);
    free(it->lower);
    free(it);
}

/* ---------------------------------------------------------------------------
 * Key groups (common/keygroup.h): a key-grouped table's keys begin with the
 * 2-byte big-endian key group. The grouped handle reads it as the operator
 * sees its rows without groups: G prefixed scans k-way merged in key order
 * with the prefix cut off (the merge of the merged handle, so a scan costs
 * a comparison per group per row), and a get probing each group (G lookups
 * in the map and the committed-key filter; a group's miss reads LMDB only
 * on a filter false positive). The handover calls below work on one group.
 * ------------------------------------------------------------------------- */

int stor_table_open_grouped(StorTable *base, int G, StorTable **out, WError *err)
{
    if (!base || G < 1 || G > STOR_MAX_KEY_GROUPS)
        return werr(err, SQLSTATE_INTERNAL, 0, "storage: a grouped table needs a base and 1..%d groups",
                    STOR_MAX_KEY_GROUPS);
    StorTable *t = xcalloc(1, sizeof *t);
    t->env = base->env;
    t->parts = xmalloc(sizeof(StorTable *));
    t->parts[0] = base;
    t->n_parts = 1;
    t->n_groups = G;
    *out = t;
    return 0;
}

/* kg ++ bytes (n of them) into b, reset first. */
static void kg_key(Buf *b, int kg, const void *p, size_t n)
{
    uint8_t pre[2] = {(uint8_t)(kg >> 8), (uint8_t)kg};
    buf_reset(b);
    buf_append(b, pre, 2);
    if (n)
        buf_append(b, p, n);
}

static int grouped_get(StorTable *t, const void *key, size_t klen, const void **val, size_t *vlen,
                       WError *err)
{
    if (check_key(klen + 2, err) < 0)
        return -1;
    uint8_t kb[STOR_MAX_KEY];
    memcpy(kb + 2, key, klen);
    for (int g = 0; g < t->n_groups; g++) {
        kb[0] = (uint8_t)(g >> 8);
        kb[1] = (uint8_t)g;
        int f = stor_table_get(t->parts[0], kb, klen + 2, val, vlen, err);
        if (f)
            return f;
    }
    return 0;
}

static int grouped_open(StorTable *t, const void *prefix, size_t plen, const void *lower, size_t llen,
                        const void *upper, size_t ulen, StorIter **out, WError *err)
{
    if (check_key(plen + 2, err) < 0 || (upper && check_key(ulen + 2, err) < 0) ||
        (lower && check_key(llen + 2, err) < 0))
        return -1;
    StorIter *it = xcalloc(1, sizeof *it);
    it->t = t;
    it->strip = 2;
    it->n_subs = t->n_groups;
    it->subs = xcalloc((size_t)t->n_groups, sizeof(StorIter *));
    it->heads = xcalloc((size_t)t->n_groups, sizeof(MergeHead));
    Buf p = BUF_INIT, l = BUF_INIT, u = BUF_INIT;
    int rc = 0;
    for (int g = 0; g < t->n_groups && !rc; g++) {
        kg_key(&p, g, prefix, plen);
        kg_key(&l, g, lower, llen);
        kg_key(&u, g, upper, ulen);
        rc = stor_iter_open_range(t->parts[0], p.data, p.len, lower ? l.data : NULL, l.len, upper ? u.data : NULL,
                                  u.len, &it->subs[g], err);
    }
    buf_free(&p);
    buf_free(&l);
    buf_free(&u);
    if (rc) {
        stor_iter_close(it);
        return -1;
    }
    *out = it;
    return 0;
}

static int check_kg(int kg, WError *err)
{
    if (kg < 0 || kg >= STOR_MAX_KEY_GROUPS)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "storage: key group %d outside 0..%d", kg,
                    STOR_MAX_KEY_GROUPS - 1);
    return 0;
}

int stor_kg_list(StorTable *t, int G, int **out, WError *err)
{
    *out = NULL;
    if (G < 1 || G > STOR_MAX_KEY_GROUPS)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "storage: %d key groups outside 1..%d", G,
                    STOR_MAX_KEY_GROUPS);
    int *v = xmalloc(sizeof(int) * (size_t)G), n = 0;
    for (int g = 0; g < G; g++) {
        uint8_t pre[2] = {(uint8_t)(g >> 8), (uint8_t)g};
        StorIter *it;
        const void *k, *val;
        size_t kl, vl;
        if (stor_iter_open(t, pre, 2, &it, err)) {
            free(v);
            return -1;
        }
        int f = stor_iter_next(it, &k, &kl, &val, &vl, err);
        stor_iter_close(it);
        if (f < 0) {
            free(v);
            return -1;
        }
        if (f)
            v[n++] = g;
    }
    *out = v;
    return n;
}

int stor_kg_export(StorTable *t, int kg, int (*fn)(void *arg, const void *key, size_t klen, const void *val,
                                                   size_t vlen),
                   void *arg, WError *err)
{
    if (check_kg(kg, err))
        return -1;
    uint8_t pre[2] = {(uint8_t)(kg >> 8), (uint8_t)kg};
    StorIter *it;
    if (stor_iter_open(t, pre, 2, &it, err))
        return -1;
    const void *k, *v;
    size_t kl, vl;
    int f, rc = 0;
    while ((f = stor_iter_next(it, &k, &kl, &v, &vl, err)) == 1)
        if ((rc = fn(arg, k, kl, v, vl)))
            break;
    stor_iter_close(it);
    return f < 0 ? -1 : rc;
}

static void put_le32(Buf *b, uint32_t x)
{
    uint8_t v[4] = {(uint8_t)x, (uint8_t)(x >> 8), (uint8_t)(x >> 16), (uint8_t)(x >> 24)};
    buf_append(b, v, 4);
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int export_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    Buf *b = arg;
    put_le32(b, (uint32_t)klen);
    buf_append(b, key, klen);
    put_le32(b, (uint32_t)vlen);
    buf_append(b, val, vlen);
    return 0;
}

int stor_kg_export_buf(StorTable *t, int kg, Buf *out, WError *err)
{
    buf_reset(out);
    buf_put_u8(out, STOR_KG_EXPORT_VERSION);
    return stor_kg_export(t, kg, export_one, out, err);
}

int stor_kg_drop(StorTable *t, int kg, WError *err)
{
    if (check_kg(kg, err) || read_only(t, err))
        return -1;
    /* The keys first, then the deletes: a scan's snapshot would not see
     * them, but collecting keeps the iterator's and the map's work apart. */
    Buf keys = BUF_INIT;
    if (stor_kg_export(t, kg, export_one, &keys, err)) {
        buf_free(&keys);
        return -1;
    }
    int rc = 0;
    const uint8_t *p = (const uint8_t *)keys.data, *end = p + keys.len;
    while (p < end && !rc) {
        uint32_t kl = get_le32(p), vl = get_le32(p + 4 + kl);
        rc = stor_table_delete(t, p + 4, kl, err);
        p += 8 + kl + vl;
    }
    buf_free(&keys);
    return rc;
}

int stor_kg_import(StorTable *t, int kg, const void *data, size_t len, WError *err)
{
    if (check_kg(kg, err) || read_only(t, err))
        return -1;
    const uint8_t *p = data, *end = p + len;
    if (len < 1 || p[0] != STOR_KG_EXPORT_VERSION)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "storage: not a key-group export (version %d expected)",
                    STOR_KG_EXPORT_VERSION);
    /* Everything is checked before anything is written. */
    for (const uint8_t *q = p + 1; q < end;) {
        if ((size_t)(end - q) < 4)
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "storage: key-group export truncated");
        uint32_t kl = get_le32(q);
        if (kl < 2 || kl > STOR_MAX_KEY || (size_t)(end - q) < 8 + (size_t)kl)
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "storage: key-group export has a bad key length");
        if (((q[4] << 8) | q[5]) != kg)
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "storage: key-group export holds a key of group %d, not %d",
                        (q[4] << 8) | q[5], kg);
        uint32_t vl = get_le32(q + 4 + kl);
        if ((size_t)(end - q) - 8 - kl < vl)
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "storage: key-group export truncated");
        q += 8 + (size_t)kl + vl;
    }
    if (stor_kg_drop(t, kg, err))
        return -1;
    for (const uint8_t *q = p + 1; q < end;) {
        uint32_t kl = get_le32(q), vl = get_le32(q + 4 + kl);
        if (stor_table_put(t, q + 4, kl, q + 8 + kl, vl, err))
            return -1;
        q += 8 + (size_t)kl + vl;
    }
    return 0;
}
