/*
 * types.h: SQL types, scalar values and their text forms.
 *
 * Every SQL type maps to one physical representation, which is what a chunk
 * column stores (see chunk.h):
 *   I64  BOOLEAN (0/1), SMALLINT, INT, BIGINT, DATE (days since 1970-01-01),
 *        TIMESTAMP and TIMESTAMPTZ (microseconds since 1970-01-01 00:00 UTC)
 *   F64  REAL, DOUBLE PRECISION
 *   STR  VARCHAR/TEXT, BYTEA, JSONB (bytes; not NUL-terminated)
 *   IV   INTERVAL (months, days, microseconds, as Postgres keeps them)
 *   NUM  NUMERIC (a 128-bit coefficient and a display scale, numeric.h)
 * Text input and output follow Postgres (DateStyle ISO, TimeZone UTC), so
 * what psql shows matches what users expect from Postgres.
 */
#ifndef WEIR_COMMON_TYPES_H
#define WEIR_COMMON_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "arena.h"
#include "buf.h"
#include "error.h"

typedef enum TypeId {
    TYPE_NULL = 0,    /* the type of a bare NULL literal before coercion */
    TYPE_BOOL,
    TYPE_INT2,
    TYPE_INT4,
    TYPE_INT8,
    TYPE_FLOAT4,
    TYPE_FLOAT8,
    TYPE_NUMERIC,     /* exact decimal, see numeric.h */
    TYPE_TEXT,
    TYPE_BYTEA,
    TYPE_DATE,
    TYPE_TIMESTAMP,
    TYPE_TIMESTAMPTZ,
    TYPE_INTERVAL,
    TYPE_JSONB,
    TYPE__COUNT
} TypeId;

typedef enum PhysKind { PHYS_I64, PHYS_F64, PHYS_STR, PHYS_IV, PHYS_NUM } PhysKind;

/* A NUMERIC coefficient, two's complement, as two 64-bit halves so that a
 * Value keeps 8-byte alignment (an __int128 member would make it 32 bytes). */
typedef struct NumCoef {
    uint64_t lo;
    uint64_t hi;
} NumCoef;

/* A NUMERIC in a chunk column: the coefficient and its display scale. */
typedef struct NumCell {
    NumCoef coef;
    uint32_t scale;
} NumCell;

typedef struct Interval {
    int64_t usecs;   /* time part, microseconds */
    int32_t days;
    int32_t months;
} Interval;

typedef struct StrRef {
    const char *p;   /* borrowed; lifetime is the owner's (chunk arena, row buffer) */
    uint32_t len;
} StrRef;

/* One scalar. Strings are borrowed (see StrRef). A NUMERIC's scale lives in
 * nscale, in what would otherwise be padding, so Value stays 24 bytes. */
typedef struct Value {
    TypeId type;
    bool null;
    uint8_t nscale;  /* NUMERIC only: digits after the decimal point */
    union {
        int64_t i;
        double f;
        StrRef s;
        Interval iv;
        NumCoef n;   /* NUMERIC coefficient (numeric.h: num_get/num_put) */
    } u;
} Value;

#define USECS_PER_SEC  INT64_C(1000000)
#define USECS_PER_DAY  INT64_C(86400000000)
/* Timestamps that mean "before everything" and "after everything". */
#define TS_MINUS_INF   INT64_MIN
#define TS_PLUS_INF    INT64_MAX
/* Dates 'infinity' and '-infinity' (days), ordered around every date. */
#define DATE_MINUS_INF INT64_MIN
#define DATE_PLUS_INF  INT64_MAX
/* Postgres's finite range, which results must stay in (22008 out of range,
 * as its IS_VALID_DATE and IS_VALID_TIMESTAMP): dates from 4714-11-24 BC
 * (Julian day 0) to before 5874898-01-01, timestamps from 4714-11-24 BC
 * 00:00 (its upper end, 294277-01-01, is past what int64 microseconds since
 * 1970 hold: there overflow is the bound). */
#define DATE_MIN_DAYS  INT64_C(-2440588)
#define DATE_END_DAYS  INT64_C(2145042906)
#define TS_MIN_USECS   INT64_C(-210866803200000000)

/* Inline: the row codecs and chunk accessors ask it for every value, and as a
 * call into types.c it was ~3% of a join- or aggregation-heavy query. */
static inline PhysKind type_phys(TypeId t)
{
    switch (t) {
    case TYPE_FLOAT4:
    case TYPE_FLOAT8: return PHYS_F64;
    case TYPE_NUMERIC: return PHYS_NUM;
    case TYPE_TEXT:
    case TYPE_BYTEA:
    case TYPE_JSONB: return PHYS_STR;
    case TYPE_INTERVAL: return PHYS_IV;
    default: return PHYS_I64;
    }
}
const char *type_name(TypeId t);            /* SQL name as Postgres prints it */
uint32_t type_oid(TypeId t);                 /* Postgres type OID for RowDescription */
int16_t type_wire_len(TypeId t);             /* typlen for RowDescription (-1 varlena) */
/* Parses a type name (case-insensitive; "int", "integer", "bigint", "varchar",
 * "timestamp without time zone"...). Returns TYPE_NULL if unknown. */
TypeId type_from_name(const char *name);
/* The modifiers of "numeric(p[,s])" (what the parser makes of NUMERIC(p,s)
 * and DECIMAL(p,s)): 1 with *prec and *scale, 0 for a name without them,
 * -1 with err for a bad precision or scale (22023; 0A000 beyond 38 digits). */
int type_numeric_mod(const char *name, int *prec, int *scale, WError *err);
bool type_is_numeric(TypeId t);              /* int2..float8 and numeric */
bool type_is_integer(TypeId t);
bool type_is_temporal(TypeId t);             /* date, timestamp, timestamptz */

/* Value constructors. Inline: decoding a state row or padding a join row
 * builds one per column, and out-of-line calls were ~10% of q5's profile. */
static inline Value value_null(TypeId t)
{
    Value v;
    memset(&v, 0, sizeof v); /* the whole union and padding: a Value copied whole carries no uninitialised bytes */
    v.type = t;
    v.null = true;
    return v;
}

static inline Value value_int(TypeId t, int64_t x)
{
    Value v;
    memset(&v, 0, sizeof v); /* the whole union and padding: a Value copied whole carries no uninitialised bytes */
    v.type = t;
    v.u.i = x;
    return v;
}

static inline Value value_float(TypeId t, double x)
{
    Value v;
    memset(&v, 0, sizeof v); /* the whole union and padding: a Value copied whole carries no uninitialised bytes */
    v.type = t;
    v.u.f = x;
    return v;
}

static inline Value value_str(TypeId t, const char *p, size_t len)
{
    Value v;
    memset(&v, 0, sizeof v); /* the whole union and padding: a Value copied whole carries no uninitialised bytes */
    v.type = t;
    v.u.s.p = p;
    v.u.s.len = (uint32_t)len;
    return v;
}

static inline Value value_bool(bool b) { return value_int(TYPE_BOOL, b ? 1 : 0); }

/* Appends the Postgres text form of v (nothing for NULL; callers check). */
void value_to_text(const Value *v, Buf *out);
/* Parses the Postgres text form of type t. Strings are copied into a (so the
 * result outlives s). Returns 0, or -1 with err (22P02, 22007, 22003). */
int value_from_text(TypeId t, const char *s, size_t len, Arena *a, Value *out, WError *err);
/* Total order on two non-NULL values of the same physical kind: <0, 0, >0. */
int value_cmp(const Value *a, const Value *b);
/* SQL equality for non-NULL values of the same physical kind. */
bool value_eq(const Value *a, const Value *b);
uint64_t value_hash(const Value *v, uint64_t seed);

/* Date/time helpers (proleptic Gregorian, UTC). */
int64_t days_from_civil(int64_t y, unsigned m, unsigned d);
void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d);
/* Parses "YYYY-MM-DD[ T]HH:MM[:SS[.ffffff]][Z|+HH[:MM]]" or a bare date.
 * Returns 0 and microseconds since the epoch, or -1. */
int parse_timestamp(const char *s, size_t len, int64_t *usecs);
int parse_date(const char *s, size_t len, int64_t *days);
/* Parses "5 seconds", "1 day 02:00:00", "00:00:05", "-3 hours 2 minutes",
 * ISO-8601 "PT5S". Returns 0 or -1. */
int parse_interval(const char *s, size_t len, Interval *out);
void format_timestamp(int64_t usecs, bool tz, Buf *out);
void format_date(int64_t days, Buf *out);
void format_interval(const Interval *iv, Buf *out);
/* An interval as microseconds when it has no month part (for window sizes);
 * days count as 24 hours. Returns -1 if it has months. */
int interval_to_usecs(const Interval *iv, int64_t *out);

/* 64-bit hashing (not cryptographic; used by hash tables and exchanges). */
uint64_t hash_bytes(const void *p, size_t n, uint64_t seed);
/* hash_bytes of the same bytes under two seeds, in one pass over them
 * (out[0] with seed0, out[1] with seed1; equal to two hash_bytes calls).
 * For 128-bit row hashes: the two chains run interleaved. */
void hash_bytes2(const void *p, size_t n, uint64_t seed0, uint64_t seed1, uint64_t out[2]);
static inline uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

#endif
