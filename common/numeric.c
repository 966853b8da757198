/* numeric.c: see numeric.h. */
#include "numeric.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef unsigned __int128 u128;

static const uint64_t P10_64[20] = {
    UINT64_C(1), UINT64_C(10), UINT64_C(100), UINT64_C(1000), UINT64_C(10000), UINT64_C(100000),
    UINT64_C(1000000), UINT64_C(10000000), UINT64_C(100000000), UINT64_C(1000000000),
    UINT64_C(10000000000), UINT64_C(100000000000), UINT64_C(1000000000000),
    UINT64_C(10000000000000), UINT64_C(100000000000000), UINT64_C(1000000000000000),
    UINT64_C(10000000000000000), UINT64_C(100000000000000000), UINT64_C(1000000000000000000),
    UINT64_C(10000000000000000000),
};

/* 10^k for 0 <= k <= 38 (10^38 < 2^127, so it fits a signed __int128). */
static u128 p10(int k)
{
    if (k < 20)
        return P10_64[k];
    return (u128)P10_64[19] * P10_64[k - 19];
}

static u128 uabs(__int128 c) { return c < 0 ? (u128)0 - (u128)c : (u128)c; }

static int ndigits(u128 u)
{
    int n = 1;
    while (n < 39 && u >= p10(n))
        n++;
    return n;
}

static bool fits(__int128 c) { return uabs(c) < p10(NUM_MAX_DIGITS); }

static int overflow(WError *err)
{
    werr(err, SQLSTATE_NUMERIC_RANGE, 0, "numeric field overflow");
    werr_detail(err, "weir's numeric holds at most %d digits and %d digits after the decimal point.",
                NUM_MAX_DIGITS, NUM_MAX_DIGITS);
    return -1;
}

Numeric num_get(const Value *v)
{
    Numeric n;
    n.c = (__int128)(((u128)v->u.n.hi << 64) | v->u.n.lo);
    n.scale = v->nscale;
    return n;
}

void num_put(Numeric n, Value *out)
{
    out->type = TYPE_NUMERIC;
    out->null = false;
    out->nscale = (uint8_t)n.scale;
    out->u.n.lo = (uint64_t)(u128)n.c;
    out->u.n.hi = (uint64_t)((u128)n.c >> 64);
}

Value value_numeric(Numeric n)
{
    Value v = value_null(TYPE_NUMERIC);
    num_put(n, &v);
    return v;
}

/* ---- text --------------------------------------------------------------- */

static int bad_syntax(const char *s, size_t len, WError *err)
{
    return werr(err, SQLSTATE_INVALID_TEXT, 0, "invalid input syntax for type numeric: \"%.*s\"",
                (int)(len > 200 ? 200 : len), s);
}

int num_parse(const char *s, size_t len, Numeric *out, WError *err)
{
    size_t i = 0, n = len;
    while (i < n && isspace((unsigned char)s[i]))
        i++;
    while (n > i && isspace((unsigned char)s[n - 1]))
        n--;
    bool neg = false;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        neg = s[i++] == '-';
    if ((n - i == 3 && strncasecmp(s + i, "nan", 3) == 0) || (n - i == 8 && strncasecmp(s + i, "infinity", 8) == 0) ||
        (n - i == 3 && strncasecmp(s + i, "inf", 3) == 0))
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0, "feature not supported: numeric value \"%.*s\"", (int)(n - i),
                    s + i);
    size_t m0 = i;   /* the mantissa's first byte */
    long frac = 0, digits = 0;
    bool dot = false;
    for (; i < n; i++) {
        char ch = s[i];
        if (ch == '.' && !dot) {
            dot = true;
            continue;
        }
        if (ch < '0' || ch > '9')
            break;
        digits++;
        frac += dot;
    }
    if (digits == 0)
        return bad_syntax(s, len, err);
    long exp = 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        bool eneg = false;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            eneg = s[i++] == '-';
        if (i >= n || s[i] < '0' || s[i] > '9')
            return bad_syntax(s, len, err);
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
            exp = exp * 10 + (s[i] - '0');
            if (exp > 1000)
                return overflow(err);
        }
        if (eneg)
            exp = -exp;
    }
    if (i != n)
        return bad_syntax(s, len, err);
    long scale = frac - exp;
    /* Digits past the NUM_MAX_DIGITS-th after the point cannot be kept: they
     * are rounded away (half away from zero), so '1e-50' is 0 and rounds to
     * 0.00 in a NUMERIC(10,2) column, as in Postgres. keep counts the
     * mantissa digits kept from the left; the first dropped one rounds. */
    long drop = scale > NUM_MAX_DIGITS ? scale - NUM_MAX_DIGITS : 0;
    long keep = digits - drop;
    u128 c = 0;
    int sig = 0, round_digit = 0;
    for (long k = 0; k < digits && k <= keep; m0++) {
        char ch = s[m0];
        if (ch == '.')
            continue;
        if (k == keep) {
            round_digit = ch - '0';
        } else if (sig || ch != '0') {   /* a leading zero adds no digit to the coefficient */
            if (++sig > NUM_MAX_DIGITS)
                return overflow(err);
            c = c * 10 + (unsigned)(ch - '0');
        }
        k++;
    }
    if (round_digit >= 5 && (c += 1) >= p10(NUM_MAX_DIGITS))
        return overflow(err);
    if (drop)
        scale = NUM_MAX_DIGITS;
    if (scale < 0) {
        /* 1.5e3: Postgres keeps no negative display scale; scale up the coefficient. */
        if (c != 0 && sig - scale > NUM_MAX_DIGITS)
            return overflow(err);
        if (c != 0)
            c *= p10((int)-scale);
        scale = 0;
    }
    out->c = neg ? -(__int128)c : (__int128)c;
    out->scale = (int)scale;
    return 0;
}

/* Writes the decimal digits of u (most significant first); returns the count. */
static int udigits(u128 u, char *buf)
{
    char tmp[40];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    for (int k = 0; k < n; k++)
        buf[k] = tmp[n - 1 - k];
    return n;
}

void num_format(Numeric a, Buf *out)
{
    char d[40];
    int n = udigits(uabs(a.c), d);
    if (a.c < 0)
        buf_putc(out, '-');
    if (n <= a.scale) {
        buf_putc(out, '0');
        if (a.scale) {
            buf_putc(out, '.');
            for (int k = 0; k < a.scale - n; k++)
                buf_putc(out, '0');
            buf_append(out, d, (size_t)n);
        }
        return;
    }
    buf_append(out, d, (size_t)(n - a.scale));
    if (a.scale) {
        buf_putc(out, '.');
        buf_append(out, d + n - a.scale, (size_t)a.scale);
    }
}

/* ---- arithmetic --------------------------------------------------------- */

/* a with its scale raised to s (s >= a.scale). */
static int upscale(Numeric a, int s, Numeric *out, WError *err)
{
    if (s > NUM_MAX_DIGITS)
        return overflow(err);
    __int128 c;
    if (a.c != 0 && (s - a.scale > NUM_MAX_DIGITS || __builtin_mul_overflow(a.c, (__int128)p10(s - a.scale), &c)))
        return overflow(err);
    out->c = a.c == 0 ? 0 : c;
    out->scale = s;
    if (!fits(out->c))
        return overflow(err);
    return 0;
}

static int add_signed(Numeric a, Numeric b, bool sub, Numeric *out, WError *err)
{
    int s = a.scale > b.scale ? a.scale : b.scale;
    if (upscale(a, s, &a, err) || upscale(b, s, &b, err))
        return -1;
    /* Both are below 10^38 < 2^127, so the sum cannot wrap an __int128. */
    out->c = sub ? a.c - b.c : a.c + b.c;
    out->scale = s;
    return fits(out->c) ? 0 : overflow(err);
}

int num_add(Numeric a, Numeric b, Numeric *out, WError *err) { return add_signed(a, b, false, out, err); }
int num_sub(Numeric a, Numeric b, Numeric *out, WError *err) { return add_signed(a, b, true, out, err); }

int num_mul(Numeric a, Numeric b, Numeric *out, WError *err)
{
    __int128 c;
    if (__builtin_mul_overflow(a.c, b.c, &c) || !fits(c) || a.scale + b.scale > NUM_MAX_DIGITS)
        return overflow(err);
    out->c = c;
    out->scale = a.scale + b.scale;
    return 0;
}

/* The next decimal digit of rem/den (rem < den < 2^127): rem becomes
 * 10*rem mod den. Repeated addition keeps every step below 2^128. */
static unsigned next_digit(u128 *rem, u128 den)
{
    u128 acc = 0;
    unsigned d = 0;
    for (int i = 0; i < 10; i++) {
        acc += *rem;
        if (acc >= den)
            acc -= den, d++;
    }
    *rem = acc;
    return d;
}

int num_div_scale(Numeric a, Numeric b, int r, Numeric *out, WError *err)
{
    if (b.c == 0)
        return werr(err, SQLSTATE_DIVISION_BY_ZERO, 0, "division by zero");
    if (r > NUM_MAX_DIGITS || r < 0)
        return overflow(err);
    bool neg = (a.c < 0) != (b.c < 0);
    u128 ua = uabs(a.c), ub = uabs(b.c), lim = p10(NUM_MAX_DIGITS);
    /* q = round(ua * 10^k / ub) with k = b.scale - a.scale + r. */
    int k = b.scale - a.scale + r;
    if (k < 0) {
        if (-k > NUM_MAX_DIGITS)
            goto zero;
        u128 m = p10(-k);
        if (ub > (~(u128)0) / m)
            goto zero;   /* the divisor exceeds 2^128 > 2 * ua: the quotient rounds to 0 */
        ub *= m;
        if (ub >> 127)
            goto zero;
        k = 0;
    }
    u128 q = ua / ub, rem = ua % ub;
    for (int i = 0; i < k; i++) {
        if (q >= lim / 10 + 1)
            return overflow(err);
        q = q * 10 + next_digit(&rem, ub);
    }
    if (next_digit(&rem, ub) >= 5)
        q++;
    if (q >= lim)
        return overflow(err);
    out->c = neg ? -(__int128)q : (__int128)q;
    out->scale = r;
    return 0;
zero:
    out->c = 0;
    out->scale = r;
    return 0;
}

/* Postgres's base-10000 weight and first digit of a (0, 0 for zero). */
static void weight_first(Numeric a, int *w, int *fd)
{
    if (a.c == 0) {
        *w = 0, *fd = 0;
        return;
    }
    u128 u = uabs(a.c);
    int e = ndigits(u) - 1 - a.scale;
    *w = e >= 0 ? e / 4 : -((-e + 3) / 4);
    int k = -a.scale - 4 * *w;
    *fd = (int)(k >= 0 ? u * p10(k) : u / p10(-k));
}

int num_div(Numeric a, Numeric b, Numeric *out, WError *err)
{
    if (b.c == 0)
        return werr(err, SQLSTATE_DIVISION_BY_ZERO, 0, "division by zero");
    /* select_div_scale: at least 16 significant digits, and no fewer
     * fractional digits than either input shows. */
    int w1, f1, w2, f2;
    weight_first(a, &w1, &f1);
    weight_first(b, &w2, &f2);
    int qw = w1 - w2;
    if (f1 <= f2)
        qw--;
    int r = 16 - qw * 4;
    if (r < a.scale)
        r = a.scale;
    if (r < b.scale)
        r = b.scale;
    if (r < 0)
        r = 0;
    if (r > NUM_MAX_DIGITS)
        r = NUM_MAX_DIGITS;   /* weir's limit; Postgres would show more digits of a tiny quotient */
    return num_div_scale(a, b, r, out, err);
}

int num_mod(Numeric a, Numeric b, Numeric *out, WError *err)
{
    if (b.c == 0)
        return werr(err, SQLSTATE_DIVISION_BY_ZERO, 0, "division by zero");
    int s = a.scale > b.scale ? a.scale : b.scale;
    if (upscale(a, s, &a, err) || upscale(b, s, &b, err))
        return -1;
    out->c = a.c % b.c;   /* C truncates toward zero: the sign follows a, as in Postgres */
    out->scale = s;
    return 0;
}

Numeric num_neg(Numeric a) { return (Numeric){.c = -a.c, .scale = a.scale}; }
Numeric num_abs(Numeric a) { return (Numeric){.c = a.c < 0 ? -a.c : a.c, .scale = a.scale}; }
int num_sign(Numeric a) { return a.c < 0 ? -1 : a.c > 0; }

int num_cmp(Numeric a, Numeric b)
{
    if ((a.c < 0) != (b.c < 0) || a.c == 0 || b.c == 0)
        return a.c < b.c ? -1 : a.c > b.c;
    /* Same sign: compare magnitudes at a common scale. Raising the smaller
     * scale may not fit 128 bits; then the integer parts decide first. */
    u128 x = uabs(a.c), y = uabs(b.c);
    int s = a.scale > b.scale ? a.scale : b.scale;
    u128 xi = x / p10(a.scale), yi = y / p10(b.scale);
    int m;
    if (xi != yi) {
        m = xi < yi ? -1 : 1;
    } else {
        u128 xf = (x % p10(a.scale)) * p10(s - a.scale), yf = (y % p10(b.scale)) * p10(s - b.scale);
        m = xf < yf ? -1 : xf > yf;
    }
    return a.c < 0 ? -m : m;
}

/* Divides |a| by 10^drop (drop > 0) toward zero; *rem_half gets the
 * rounding direction: 0 below half, 1 at or above half; *inexact whether
 * anything was dropped. */
static u128 drop_digits(u128 u, int drop, bool *half_up, bool *inexact)
{
    if (drop > NUM_MAX_DIGITS) {
        *half_up = false;
        *inexact = u != 0;
        return 0;
    }
    u128 m = p10(drop), q = u / m, r = u % m;
    *half_up = r >= m / 2 + (m % 2);
    *inexact = r != 0;
    return q;
}

/* mode: 0 round half away, 1 trunc, 2 floor, 3 ceil */
static int quantize(Numeric a, int s, int mode, Numeric *out, WError *err)
{
    int rs = s > 0 ? s : 0;
    if (s >= a.scale)
        return upscale(a, rs, out, err);
    bool half, inexact, neg = a.c < 0;
    u128 q = drop_digits(uabs(a.c), a.scale - s, &half, &inexact);
    if ((mode == 0 && half) || (mode == 2 && neg && inexact) || (mode == 3 && !neg && inexact))
        q++;
    __int128 c = neg ? -(__int128)q : (__int128)q;
    if (s < 0) {
        if (c != 0 && (-s > NUM_MAX_DIGITS || __builtin_mul_overflow(c, (__int128)p10(-s), &c)))
            return overflow(err);
    }
    if (!fits(c))
        return overflow(err);
    out->c = c;
    out->scale = rs;
    return 0;
}

int num_round(Numeric a, int s, Numeric *out, WError *err) { return quantize(a, s, 0, out, err); }
int num_trunc(Numeric a, int s, Numeric *out, WError *err) { return quantize(a, s, 1, out, err); }
int num_floor(Numeric a, Numeric *out, WError *err) { return quantize(a, 0, 2, out, err); }
int num_ceil(Numeric a, Numeric *out, WError *err) { return quantize(a, 0, 3, out, err); }

int num_rescale(Numeric a, int scale, Numeric *out, WError *err)
{
    if (scale < 0 || scale > NUM_MAX_DIGITS)
        return overflow(err);
    return quantize(a, scale, 0, out, err);
}

int num_typmod(Numeric a, int prec, int scale, Numeric *out, WError *err)
{
    Numeric r;
    if (num_rescale(a, scale, &r, err))
        return -1;
    if (uabs(r.c) >= p10(prec)) {
        werr(err, SQLSTATE_NUMERIC_RANGE, 0, "numeric field overflow");
        if (prec == scale)
            werr_detail(err, "A field with precision %d, scale %d must round to an absolute value less than 1.", prec,
                        scale);
        else
            werr_detail(err, "A field with precision %d, scale %d must round to an absolute value less than 10^%d.",
                        prec, scale, prec - scale);
        return -1;
    }
    *out = r;
    return 0;
}

int num_apply_typmod(int32_t typmod, Value *v, WError *err)
{
    if (typmod < 0 || v->null || v->type != TYPE_NUMERIC)
        return 0;
    Numeric r;
    if (num_typmod(num_get(v), typmod >> 8, typmod & 0xff, &r, err))
        return -1;
    num_put(r, v);
    return 0;
}

/* ---- conversions -------------------------------------------------------- */

Numeric num_from_int(int64_t i) { return (Numeric){.c = i, .scale = 0}; }

int num_to_int(Numeric a, int64_t lo, int64_t hi, TypeId t, int64_t *out, WError *err)
{
    Numeric r;
    if (num_round(a, 0, &r, err))
        return -1;
    if (r.c < lo || r.c > hi)
        return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "%s out of range", type_name(t));
    *out = (int64_t)r.c;
    return 0;
}

int num_from_double(double f, bool real, Numeric *out, WError *err)
{
    if (f != f)
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0, "feature not supported: numeric NaN");
    if (isinf(f))
        return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "cannot convert infinity to numeric");
    char tmp[64];
    /* Postgres converts through DBL_DIG (FLT_DIG for real) significant digits. */
    snprintf(tmp, sizeof tmp, "%.*g", real ? 6 : 15, f);
    if (num_parse(tmp, strlen(tmp), out, err))
        return -1;
    return 0;
}

double num_to_double(Numeric a)
{
    Buf b = BUF_INIT;
    num_format(a, &b);
    buf_putc(&b, 0);
    double f = strtod(b.data, NULL);
    buf_free(&b);
    return f;
}

/* ---- canonical form, hashing, keys -------------------------------------- */

Numeric num_normalize(Numeric a)
{
    if (a.c == 0)
        return (Numeric){0, 0};
    while (a.scale > 0 && a.c % 10 == 0)
        a.c /= 10, a.scale--;
    return a;
}

uint64_t num_hash(Numeric a, uint64_t seed)
{
    a = num_normalize(a);
    u128 u = (u128)a.c;
    return hash_u64(seed ^ (uint64_t)u ^ hash_u64((uint64_t)(u >> 64) ^ (uint64_t)a.scale));
}

void num_key_encode(Numeric a, Buf *out)
{
    if (a.c == 0) {
        buf_put_u8(out, 2);
        return;
    }
    bool neg = a.c < 0;
    uint8_t inv = neg ? 0xff : 0;
    char d[40];
    int n = udigits(uabs(a.c), d);
    int e = n - 1 - a.scale;  /* exponent of the leading digit, -38..37 */
    while (n > 1 && d[n - 1] == '0')
        n--;
    buf_put_u8(out, neg ? 1 : 3);
    buf_put_u8(out, (uint8_t)((e + 64) ^ inv));
    for (int k = 0; k < n; k++)
        buf_put_u8(out, (uint8_t)((d[k] - '0' + 1) ^ inv));
    buf_put_u8(out, inv);
}

int num_key_decode(const unsigned char *p, size_t len, Numeric *out, size_t *used)
{
    if (len < 1)
        return -1;
    if (p[0] == 2) {
        *out = (Numeric){0, 0};
        *used = 1;
        return 0;
    }
    if ((p[0] != 1 && p[0] != 3) || len < 3)
        return -1;
    uint8_t inv = p[0] == 1 ? 0xff : 0;
    int e = (int)(p[1] ^ inv) - 64;
    u128 c = 0;
    int n = 0;
    size_t i = 2;
    for (;; i++) {
        if (i >= len)
            return -1;
        uint8_t b = p[i] ^ inv;
        if (b == 0)
            break;
        if (b > 10 || ++n > NUM_MAX_DIGITS)
            return -1;
        c = c * 10 + (unsigned)(b - 1);
    }
    int scale = n - 1 - e;
    if (scale < 0) {
        if (n - scale > NUM_MAX_DIGITS)
            return -1;
        c *= p10(-scale);
        scale = 0;
    }
    if (scale > NUM_MAX_DIGITS)
        return -1;
    out->c = inv ? -(__int128)c : (__int128)c;
    out->scale = scale;
    *used = i + 1;
    return 0;
}

/* ---- Postgres binary format --------------------------------------------- */

#define PG_NUMERIC_POS 0x0000
#define PG_NUMERIC_NEG 0x4000
#define PG_NUMERIC_NAN 0xC000

void num_to_pgbinary(Numeric a, Buf *out)
{
    /* Lay the digits out on 4-digit groups aligned at the decimal point. */
    char d[40], s[100];
    int n = udigits(uabs(a.c), d);
    int ip = n - a.scale;                    /* integer digits (may be <= 0) */
    int ig = ip > 0 ? (ip + 3) / 4 : 0;      /* integer groups */
    int fg = (a.scale + 3) / 4;              /* fractional groups */
    int len = 4 * (ig + fg);
    memset(s, '0', (size_t)len);
    /* digit k of d has decimal position ip - 1 - k (0 = units); in s the
     * units digit sits at index 4 * ig - 1. */
    for (int k = 0; k < n; k++)
        s[4 * ig - 1 - (ip - 1 - k)] = d[k];
    int16_t groups[25];
    int ng = ig + fg, first = 0, last = ng;
    for (int g = 0; g < ng; g++)
        groups[g] = (int16_t)((s[4 * g] - '0') * 1000 + (s[4 * g + 1] - '0') * 100 + (s[4 * g + 2] - '0') * 10 +
                              (s[4 * g + 3] - '0'));
    while (first < last && groups[first] == 0)
        first++;
    while (last > first && groups[last - 1] == 0)
        last--;
    int weight = first < last ? ig - 1 - first : 0;
    buf_put_u16be(out, (uint16_t)(last - first));
    buf_put_u16be(out, (uint16_t)(int16_t)weight);
    buf_put_u16be(out, a.c < 0 ? PG_NUMERIC_NEG : PG_NUMERIC_POS);
    buf_put_u16be(out, (uint16_t)a.scale);
    for (int g = first; g < last; g++)
        buf_put_u16be(out, (uint16_t)groups[g]);
}

int num_from_pgbinary(const unsigned char *p, size_t len, Numeric *out, WError *err)
{
    if (len < 8)
        return werr(err, SQLSTATE_INVALID_TEXT, 0, "invalid binary numeric: too short");
    int nd = p[0] << 8 | p[1];
    int weight = (int16_t)(p[2] << 8 | p[3]);
    int sign = p[4] << 8 | p[5];
    int dscale = p[6] << 8 | p[7];
    if (sign == PG_NUMERIC_NAN || sign == 0xD000 || sign == 0xF000)
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0, "feature not supported: numeric NaN or infinity");
    if ((sign != PG_NUMERIC_POS && sign != PG_NUMERIC_NEG) || len != 8 + 2 * (size_t)nd)
        return werr(err, SQLSTATE_INVALID_TEXT, 0, "invalid binary numeric");
    if (dscale > NUM_MAX_DIGITS || nd > 20 || weight > 10 || weight < -11)
        return overflow(err);
    /* Build the decimal text and reuse the text parser's checks. */
    char s[200];
    int k = 0;
    if (sign == PG_NUMERIC_NEG)
        s[k++] = '-';
    /* 0.<groups> * 10^(4 * (weight + 1)): the first group has weight `weight`. */
    s[k++] = '0';
    s[k++] = '.';
    for (int g = 0; g < nd; g++) {
        int v = p[8 + 2 * g] << 8 | p[9 + 2 * g];
        if (v > 9999)
            return werr(err, SQLSTATE_INVALID_TEXT, 0, "invalid digit in binary numeric");
        k += snprintf(s + k, sizeof s - (size_t)k, "%04d", v);
    }
    k += snprintf(s + k, sizeof s - (size_t)k, "e%d", 4 * (weight + 1));
    /* The text may carry more fractional digits than dscale (trailing zero
     * groups); the value is rescaled to dscale below. */
    Numeric v;
    WError tmp = {0};
    if (num_parse(s, (size_t)k, &v, &tmp)) {
        /* Too many digits only because of trailing zeros is not an error. */
        char *e = strchr(s, 'e');
        size_t m = (size_t)(e - s);
        while (m > 2 && s[m - 1] == '0')
            m--;
        memmove(s + m, e, strlen(e) + 1);
        werr_clear(&tmp);
        if (num_parse(s, strlen(s), &v, err))
            return -1;
    }
    return num_rescale(v, dscale, out, err);
}
