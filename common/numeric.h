/*
 * numeric.h: exact decimal arithmetic for the NUMERIC type.
 *
 * A numeric is coef * 10^-scale: a signed 128-bit coefficient with at most
 * NUM_MAX_DIGITS decimal digits and a display scale 0..NUM_MAX_DIGITS, the
 * way Postgres keeps a display scale with every value (so '12.340' stays
 * 12.340). Anything that would need more digits is 22003 "numeric field
 * overflow" rather than a silently rounded value.
 *
 * Results follow Postgres's numeric.c rules: + and - take the larger scale,
 * * the sum of the scales, / the select_div_scale rule (at least 16
 * significant digits), rounding is half away from zero.
 *
 * In a Value (types.h) the coefficient is u.n (two 64-bit halves, so Value
 * keeps 8-byte alignment and its 24-byte size) and the scale sits in
 * Value.nscale; num_get/num_put convert.
 */
#ifndef WEIR_COMMON_NUMERIC_H
#define WEIR_COMMON_NUMERIC_H

#include "types.h"

#define NUM_MAX_DIGITS 38

typedef struct Numeric {
    __int128 c;   /* coefficient, |c| < 10^NUM_MAX_DIGITS */
    int scale;    /* digits after the decimal point, 0..NUM_MAX_DIGITS */
} Numeric;

/* The numeric in a non-NULL TYPE_NUMERIC value, and back. */
Numeric num_get(const Value *v);
void num_put(Numeric n, Value *out);   /* sets type, null = false, coefficient and scale */
Value value_numeric(Numeric n);

/* Parses Postgres numeric input: [space][sign]digits[.digits][e[sign]digits][space].
 * Digits past the 38th after the decimal point are rounded away (half away
 * from zero; '1e-50' is 0 with scale 38), since no NUMERIC(p,s) keeps them.
 * Returns 0, or -1 with err: 22P02 bad syntax, 22003 more than 38
 * significant digits, 0A000 for NaN and Infinity (not supported). */
int num_parse(const char *s, size_t len, Numeric *out, WError *err);
/* Appends the Postgres text form ("-12.340"). */
void num_format(Numeric n, Buf *out);

/* Arithmetic. Each returns 0, or -1 with err (22003 overflow, 22012 division by zero). */
int num_add(Numeric a, Numeric b, Numeric *out, WError *err);
int num_sub(Numeric a, Numeric b, Numeric *out, WError *err);
int num_mul(Numeric a, Numeric b, Numeric *out, WError *err);
int num_div(Numeric a, Numeric b, Numeric *out, WError *err);
/* Division rounded to exactly `scale` digits (used by avg and by num_div). */
int num_div_scale(Numeric a, Numeric b, int scale, Numeric *out, WError *err);
int num_mod(Numeric a, Numeric b, Numeric *out, WError *err);
Numeric num_neg(Numeric a);
Numeric num_abs(Numeric a);
int num_sign(Numeric a);             /* -1, 0, 1 */
int num_cmp(Numeric a, Numeric b);   /* value order: 1.5 == 1.50 */

/* round/trunc to s digits (s may be negative: round(1234.5, -2) = 1200,
 * scale max(s, 0)); half away from zero. floor/ceil give scale 0. */
int num_round(Numeric a, int s, Numeric *out, WError *err);
int num_trunc(Numeric a, int s, Numeric *out, WError *err);
int num_floor(Numeric a, Numeric *out, WError *err);
int num_ceil(Numeric a, Numeric *out, WError *err);
/* Rescales to exactly `scale` digits (rounding half away from zero). */
int num_rescale(Numeric a, int scale, Numeric *out, WError *err);
/* NUMERIC(prec, scale): rounds to scale, 22003 if the integer part needs
 * more than prec - scale digits. */
int num_typmod(Numeric a, int prec, int scale, Numeric *out, WError *err);
/* A column's NUMERIC(p,s) packed as p << 8 | s (-1: none), applied to *v in
 * place: NULLs and typmod -1 pass; 0 or -1 with err (22003). */
#define NUM_TYPMOD(p, s) ((int32_t)((p) << 8 | (s)))
int num_apply_typmod(int32_t typmod, Value *v, WError *err);

/* Conversions. num_to_int rounds half away from zero and checks [lo, hi]
 * (22003 "<type> out of range" with type_name(t)). num_from_double keeps
 * 15 significant digits (6 for real), as Postgres; NaN is 0A000, infinity 22003. */
Numeric num_from_int(int64_t i);
int num_to_int(Numeric a, int64_t lo, int64_t hi, TypeId t, int64_t *out, WError *err);
int num_from_double(double f, bool real, Numeric *out, WError *err);
double num_to_double(Numeric a);

/* The value with trailing fractional zeros removed (the canonical form for
 * hashing and keys, since 1.5 and 1.50 are equal). */
Numeric num_normalize(Numeric a);
uint64_t num_hash(Numeric a, uint64_t seed);
/* Memcomparable key encoding of the normalized value (a sign byte, a
 * leading-digit exponent byte, one byte per digit, a terminator; negative
 * numbers inverted); decode returns the normalized value. */
void num_key_encode(Numeric a, Buf *out);
int num_key_decode(const unsigned char *p, size_t len, Numeric *out, size_t *used);

/* Postgres binary wire format (base-10000 digits: ndigits, weight, sign,
 * dscale, digits). decode returns -1 with err 22P02/22003/0A000. */
void num_to_pgbinary(Numeric a, Buf *out);
int num_from_pgbinary(const unsigned char *p, size_t len, Numeric *out, WError *err);

#endif
