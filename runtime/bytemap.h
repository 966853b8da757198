/*
 * bytemap.h: an open-addressing hash map from byte strings to a small
 * payload, for per-chunk bookkeeping (an aggregation's touched groups, a
 * query's result multiset). Keys and values are copied into an arena, so
 * the map lives exactly as long as that arena; insertion order is kept
 * (entries are also an array) so iteration is deterministic.
 */
#ifndef WEIR_RUNTIME_BYTEMAP_H
#define WEIR_RUNTIME_BYTEMAP_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"

typedef struct ByteMapEntry {
    uint64_t hash;
    const char *key;
    size_t klen;
    const char *val;      /* optional payload bytes (copied), NULL if none */
    size_t vlen;
    int64_t count;        /* a free integer for the user (multiset counts) */
    int flag;             /* a free flag for the user */
    void *ptr;            /* a free pointer for the user */
} ByteMapEntry;

typedef struct ByteMap {
    Arena *a;
    int n, cap;           /* entries in use / slots */
    int *slots;           /* index into entries + 1, 0 = empty */
    ByteMapEntry *entries;
    int ecap;
} ByteMap;

void bytemap_init(ByteMap *m, Arena *a);
/* Finds key; if absent and create, inserts it (val copied). *created tells which. */
ByteMapEntry *bytemap_get(ByteMap *m, const void *key, size_t klen, int create, int *created);

#endif
