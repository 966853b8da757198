/*
 * keygroup.h: the one definition of a row's key group.
 *
 * A view created at planner revision 6 or later splits its keyed state into
 * G key groups (WITH (key_groups = G), 1..WEIR_MAX_KEY_GROUPS). A row's key
 * group is a function of the hash of its key columns, the hash the
 * exchange of a parallel view computes (weir_key_hash_*): the same function
 * in the exchange (which shard gets the row: kg % P), in every keyed
 * operator (the 2-byte big-endian prefix of its state keys), and in the
 * cluster's repartition writer and changelog (the Kafka partition). It is
 * part of the on-disk format: changing a seed or the mixing moves every key
 * of every revision-6 view, so it never changes.
 */
#ifndef WEIR_KEYGROUP_H
#define WEIR_KEYGROUP_H

#include <stdint.h>

#include "hash_seeds.h"
#include "types.h"
#include "weir_limits.h"

/* Seeds of the key hash (on-disk format: see above). */
#define WEIR_KEY_HASH_SEED WEIR_HASH_SEED_SHARD_START  /* the start of every key's hash */
#define WEIR_KEY_HASH_NULL WEIR_HASH_NULL /* mixed in for a NULL 64-bit cell */
#define WEIR_KEY_HASH_FINAL WEIR_HASH_SEED_SHARD /* the last mix, so the group and a hash
                                                          * table's bucket do not share bits */

/* Bytes of the key-group prefix of a key-grouped state key. */
#define WEIR_KG_PREFIX 2

/* Folds one key cell into h (start from WEIR_KEY_HASH_SEED, cells in key
 * order). 64-bit integers and times hash without value_hash (the exchange's
 * column-at-a-time fast path gives the same bits); others by value_hash. */
static inline uint64_t weir_key_hash_value(uint64_t h, const Value *v)
{
    if (type_phys(v->type) == PHYS_I64)
        return v->null ? hash_u64(h ^ WEIR_KEY_HASH_NULL) : hash_u64(h ^ (uint64_t)v->u.i);
    return value_hash(v, h);
}

/* The key group, 0..G-1, of a key whose hash (weir_key_hash_value over its
 * cells) is h. G >= 1. */
static inline int weir_key_group(uint64_t h, int G)
{
    return (int)(hash_u64(h ^ WEIR_KEY_HASH_FINAL) % (uint64_t)G);
}

/* The 2-byte big-endian prefix of key group kg. */
static inline void weir_kg_put(unsigned char out[WEIR_KG_PREFIX], int kg)
{
    out[0] = (unsigned char)(kg >> 8);
    out[1] = (unsigned char)kg;
}

static inline int weir_kg_get(const void *key)
{
    const unsigned char *k = key;
    return (k[0] << 8) | k[1];
}

#endif
