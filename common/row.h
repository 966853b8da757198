/*
 * row.h: byte encodings of rows, for state tables, the catalog and keys.
 *
 * row_encode/row_decode: a compact self-describing encoding of values (a
 * tag byte per value, then its payload), used for state table values.
 *
 * key_encode: a memcomparable encoding, so that memcmp order of encoded
 * keys equals SQL order of the values (NULLs first). State tables and LMDB
 * compare keys bytewise, which makes ordered scans (ORDER BY on a view,
 * windows by end time) free.
 */
#ifndef WEIR_COMMON_ROW_H
#define WEIR_COMMON_ROW_H

#include "types.h"

/* Appends vals[0..n) to out. */
void row_encode(Buf *out, const Value *vals, int n);
/* Decodes exactly n values from p[0..len). Strings point into p (so p must
 * outlive vals). Types come from the encoding. Returns 0, or -1 on corrupt input. */
int row_decode(const void *p, size_t len, Value *vals, int n);
/* Decodes the first n values only; *used gets the bytes they took. */
int row_decode_prefix(const void *p, size_t len, Value *vals, int n, size_t *used);
/* Appends the memcomparable encoding of vals[0..n) to out. */
void key_encode(Buf *out, const Value *vals, int n);
/* Decodes a key written by key_encode for the given types; strings are
 * copied into a. Equal values have one key, so a value comes back in its
 * canonical form: an interval as months, days and time ('36 hours' as
 * '1 day 12:00:00'), a numeric without trailing zeros. Returns 0 or -1. */
int key_decode(const void *p, size_t len, const TypeId *types, int n, Arena *a, Value *vals);

/* Big-endian integer helpers used by encoders. */
static inline void put_be64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}
static inline uint64_t get_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

#endif
