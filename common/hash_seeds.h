/*
 * hash_seeds.h: the hash seeds whose results are part of weir's persistent
 * state, named in one place.
 *
 * CHANGING ANY VALUE HERE CHANGES THE ON-DISK STATE: a checkpoint written
 * with the old value keys its rows by hashes the new value does not
 * produce, so restored state silently loses its keys (a join, a Top-N, a
 * set operation or a materialize would miss or double rows), and rows would
 * be routed to other shards than the ones holding their state. Changing one
 * needs a new planner revision (planner/README.md) so views planned before
 * keep the old value. test_common checks the values' effect
 * (hash_bytes2 against hash_bytes); the hashes they produce are in every
 * existing data directory.
 *
 * Seeds of in-memory structures only (runtime/bytemap.c) are not here:
 * nothing outlives the process with them.
 */
#ifndef WEIR_COMMON_HASH_SEEDS_H
#define WEIR_COMMON_HASH_SEEDS_H

#include <stdint.h>

/* The two seeds of the 128-bit hash of a row or key that names its entry in
 * a state table (op_join, op_topn, op_setop, op_semijoin, op_materialize):
 * two 64-bit hash_bytes of the same bytes, so a collision needs both to
 * collide. The first 64 bits of the fractional parts of sqrt(2) and sqrt(3)
 * (SHA-512's initial values): constants nobody chose. */
#define WEIR_HASH_SEED_STATE0 UINT64_C(0x6a09e667f3bcc908)
#define WEIR_HASH_SEED_STATE1 UINT64_C(0xbb67ae8584caa73b)

/* Routing a row to a shard (runtime/op_exchange.c, a parallel view's
 * partitioning of its keyed state): the running hash over the key columns
 * starts at WEIR_HASH_SEED_SHARD_START, a NULL key column mixes in
 * WEIR_HASH_NULL (also value_hash's NULL), and the final mix before the
 * modulo uses WEIR_HASH_SEED_SHARD. A shard's state lives in its own
 * tables: another shard for a key is another table. */
#define WEIR_HASH_SEED_SHARD_START UINT64_C(0x9e3779b97f4a7c15)
#define WEIR_HASH_SEED_SHARD       UINT64_C(0x2545f4914f6cdd1d)
#define WEIR_HASH_NULL             UINT64_C(0x5bd1e995)

#endif
