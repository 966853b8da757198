/*
 * scalar_text.c: the text functions of scalar_call() (substr, trim, pad,
 * split_part, md5, ...), with Postgres semantics on UTF-8 text.
 *
 * Lengths and positions count characters. Strings are not validated as
 * UTF-8 here (text input is taken as it comes): a character is a lead byte
 * and its following continuation bytes, so malformed input never reads out
 * of bounds, it only counts oddly. Every result is a fresh copy in the
 * call's arena, and every result whose size the user controls (repeat, lpad,
 * replace) is checked against SCALAR_MAX_STR before it is allocated.
 */
#include "scalar_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static bool is_cont(char c) { return ((unsigned char)c & 0xC0) == 0x80; }

/* Bytes of the character starting at p (at most left). */
static size_t u8_len(const char *p, size_t left)
{
    size_t j = 1;
    while (j < left && is_cont(p[j]))
        j++;
    return j;
}

static int64_t u8_count(const char *p, size_t n)
{
    int64_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += !is_cont(p[i]);
    return c;
}

/* Byte offset of the k-th character (0-based); n when there are fewer. */
static size_t u8_offset(const char *p, size_t n, int64_t k)
{
    size_t i = 0;
    while (k > 0 && i < n) {
        i += u8_len(p + i, n - i);
        k--;
    }
    return i;
}

static char *dup_str(Arena *a, const char *p, size_t n)
{
    return arena_strndup(a, n ? p : "", n);
}

static int set_copy(Value *out, Arena *a, const char *p, size_t n)
{
    scalar_set_str(out, dup_str(a, p, n), n);
    return 0;
}

static int too_long(WError *err)
{
    return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "requested length too large");
}

/* First occurrence of needle in hay, or NULL (needle non-empty). */
static const char *find(const char *hay, size_t n, const char *needle, size_t m)
{
    if (m == 0 || m > n)
        return m == 0 ? hay : NULL;
    for (size_t i = 0; i + m <= n; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, m) == 0)
            return hay + i;
    return NULL;
}

/* Is the character c[0..cl) one of the characters of set? */
static bool in_set(const char *c, size_t cl, const char *set, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t l = u8_len(set + i, n - i);
        if (l == cl && memcmp(set + i, c, cl) == 0)
            return true;
        i += l;
    }
    return false;
}

static int do_trim(ScalarFn fn, int n, const Value *args, Arena *a, Value *out)
{
    const char *s = args[0].u.s.p, *set = n > 1 ? args[1].u.s.p : " ";
    size_t len = args[0].u.s.len, sn = n > 1 ? args[1].u.s.len : 1;
    size_t lo = 0, hi = len;
    if (fn != FN_RTRIM)
        while (lo < hi) {
            size_t l = u8_len(s + lo, hi - lo);
            if (!in_set(s + lo, l, set, sn))
                break;
            lo += l;
        }
    if (fn != FN_LTRIM)
        while (hi > lo) {
            size_t j = hi - 1;
            while (j > lo && is_cont(s[j]))
                j--;
            if (!in_set(s + j, hi - j, set, sn))
                break;
            hi = j;
        }
    return set_copy(out, a, s + lo, hi - lo);
}

static int do_substr(int n, const Value *args, Arena *a, Value *out, WError *err)
{
    const char *s = args[0].u.s.p;
    size_t len = args[0].u.s.len;
    int64_t start = args[1].u.i, end = INT64_MAX;
    if (n > 2) {
        if (args[2].u.i < 0)
            return werr(err, SQLSTATE_SUBSTRING_ERROR, 0, "negative substring length not allowed");
        if (__builtin_add_overflow(start, args[2].u.i, &end))
            end = INT64_MAX;
    }
    if (start < 1)
        start = 1;
    if (end <= start)
        return set_copy(out, a, "", 0);
    size_t from = u8_offset(s, len, start - 1);
    size_t to = end == INT64_MAX ? len : from + u8_offset(s + from, len - from, end - start);
    return set_copy(out, a, s + from, to - from);
}

static int do_replace(const Value *args, Arena *a, Value *out, WError *err)
{
    const char *s = args[0].u.s.p, *f = args[1].u.s.p, *t = args[2].u.s.p;
    size_t n = args[0].u.s.len, fl = args[1].u.s.len, tl = args[2].u.s.len;
    if (fl == 0)
        return set_copy(out, a, s, n);
    size_t hits = 0;
    for (const char *p = s, *q; (q = find(p, n - (size_t)(p - s), f, fl)); p = q + fl)
        hits++;
    uint64_t size = (uint64_t)n - (uint64_t)hits * fl + (uint64_t)hits * tl;
    if (size > SCALAR_MAX_STR)
        return too_long(err);
    char *r = arena_alloc(a, (size_t)size + 1), *w = r;
    const char *p = s, *q;
    while ((q = find(p, n - (size_t)(p - s), f, fl))) {
        memcpy(w, p, (size_t)(q - p));
        w += q - p;
        memcpy(w, t, tl);
        w += tl;
        p = q + fl;
    }
    memcpy(w, p, n - (size_t)(p - s));
    r[size] = 0;
    scalar_set_str(out, r, (size_t)size);
    return 0;
}

static int do_split_part(const Value *args, Arena *a, Value *out, WError *err)
{
    const char *s = args[0].u.s.p, *d = args[1].u.s.p;
    size_t n = args[0].u.s.len, dl = args[1].u.s.len;
    int64_t k = args[2].u.i;
    if (k == 0)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "field position must not be zero");
    if (dl == 0) /* the whole string is the one field */
        return k == 1 || k == -1 ? set_copy(out, a, s, n) : set_copy(out, a, "", 0);
    int64_t fields = 1;
    for (const char *p = s, *q; (q = find(p, n - (size_t)(p - s), d, dl)); p = q + dl)
        fields++;
    if (k < 0)
        k = fields + k + 1;
    if (k < 1 || k > fields)
        return set_copy(out, a, "", 0);
    const char *p = s;
    for (int64_t i = 1; i < k; i++)
        p = find(p, n - (size_t)(p - s), d, dl) + dl;
    const char *q = find(p, n - (size_t)(p - s), d, dl);
    return set_copy(out, a, p, q ? (size_t)(q - p) : n - (size_t)(p - s));
}

static int do_pad(ScalarFn fn, int n, const Value *args, Arena *a, Value *out, WError *err)
{
    const char *s = args[0].u.s.p, *f = n > 2 ? args[2].u.s.p : " ";
    size_t len = args[0].u.s.len, fl = n > 2 ? args[2].u.s.len : 1;
    int64_t want = args[1].u.i;
    if (want <= 0)
        return set_copy(out, a, "", 0);
    if ((uint64_t)want > SCALAR_MAX_STR / 4)
        return too_long(err);
    int64_t have = u8_count(s, len);
    if (have >= want || fl == 0)
        return set_copy(out, a, s, u8_offset(s, len, want));
    /* The fill, repeated to want - have characters. */
    size_t cap = (size_t)(want - have) * 4 + len + 1, w = 0;
    char *r = arena_alloc(a, cap);
    if (fn == FN_RPAD) {
        memcpy(r, s, len);
        w = len;
    }
    for (int64_t i = 0, fi = 0; i < want - have; i++) {
        size_t l = u8_len(f + fi, fl - (size_t)fi);
        memcpy(r + w, f + fi, l);
        w += l;
        fi += (int64_t)l;
        if ((size_t)fi >= fl)
            fi = 0;
    }
    if (fn == FN_LPAD) {
        memcpy(r + w, s, len);
        w += len;
    }
    r[w] = 0;
    scalar_set_str(out, r, w);
    return 0;
}

/* Concatenates the non-NULL texts of args[from..n), separated by sep. */
static int do_concat(const Value *args, int from, int n, const StrRef *sep, Arena *a, Value *out, WError *err)
{
    uint64_t size = 0;
    int parts = 0;
    for (int i = from; i < n; i++)
        if (!args[i].null) {
            size += args[i].u.s.len + (parts++ && sep ? sep->len : 0);
        }
    if (size > SCALAR_MAX_STR)
        return too_long(err);
    char *r = arena_alloc(a, (size_t)size + 1), *w = r;
    parts = 0;
    for (int i = from; i < n; i++) {
        if (args[i].null)
            continue;
        if (parts++ && sep) {
            memcpy(w, sep->p, sep->len);
            w += sep->len;
        }
        memcpy(w, args[i].u.s.p, args[i].u.s.len);
        w += args[i].u.s.len;
    }
    *w = 0;
    scalar_set_str(out, r, (size_t)size);
    return 0;
}

/* ---- md5 (RFC 1321), so common/ needs no crypto library ------------------- */

static uint32_t rol(uint32_t x, int c) { return (x << c) | (x >> (32 - c)); }

static void md5_block(uint32_t h[4], const unsigned char *p)
{
    static const uint32_t K[64] = {
        0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
        0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
        0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
        0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
        0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
        0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
        0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
        0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};
    static const int R[16] = {7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21};
    uint32_t m[16];
    for (int i = 0; i < 16; i++)
        m[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
               (uint32_t)p[4 * i + 3] << 24;
    uint32_t A = h[0], B = h[1], C = h[2], D = h[3];
    for (int i = 0; i < 64; i++) {
        uint32_t F;
        int g;
        if (i < 16) {
            F = (B & C) | (~B & D);
            g = i;
        } else if (i < 32) {
            F = (D & B) | (~D & C);
            g = (5 * i + 1) % 16;
        } else if (i < 48) {
            F = B ^ C ^ D;
            g = (3 * i + 5) % 16;
        } else {
            F = C ^ (B | ~D);
            g = (7 * i) % 16;
        }
        uint32_t t = D;
        D = C;
        C = B;
        B = B + rol(A + F + K[i] + m[g], R[(i / 16) * 4 + i % 4]);
        A = t;
    }
    h[0] += A;
    h[1] += B;
    h[2] += C;
    h[3] += D;
}

static void md5_hex(const char *s, size_t n, char hex[33])
{
    uint32_t h[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        md5_block(h, (const unsigned char *)s + i);
    unsigned char tail[128] = {0};
    size_t r = n - i;
    memcpy(tail, s + i, r);
    tail[r] = 0x80;
    size_t tl = r + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int k = 0; k < 8; k++)
        tail[tl - 8 + k] = (unsigned char)(bits >> (8 * k));
    for (size_t k = 0; k < tl; k += 64)
        md5_block(h, tail + k);
    for (int k = 0; k < 16; k++)
        snprintf(hex + 2 * k, 3, "%02x", (unsigned)(h[k / 4] >> (8 * (k % 4))) & 0xff);
}

/* ---- chr / ascii ----------------------------------------------------------- */

static int do_chr(int64_t c, Arena *a, Value *out, WError *err)
{
    if (c < 0)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "character number must be positive");
    if (c == 0)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "null character not permitted");
    if (c > 0x10FFFF)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "requested character too large for encoding: %lld", (long long)c);
    if (c >= 0xD800 && c <= 0xDFFF)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "requested character not valid for encoding: %lld", (long long)c);
    char b[4];
    size_t n;
    if (c < 0x80) {
        b[0] = (char)c;
        n = 1;
    } else if (c < 0x800) {
        b[0] = (char)(0xC0 | (c >> 6));
        b[1] = (char)(0x80 | (c & 0x3F));
        n = 2;
    } else if (c < 0x10000) {
        b[0] = (char)(0xE0 | (c >> 12));
        b[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        b[2] = (char)(0x80 | (c & 0x3F));
        n = 3;
    } else {
        b[0] = (char)(0xF0 | (c >> 18));
        b[1] = (char)(0x80 | ((c >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((c >> 6) & 0x3F));
        b[3] = (char)(0x80 | (c & 0x3F));
        n = 4;
    }
    return set_copy(out, a, b, n);
}

static int64_t first_code_point(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    unsigned char c = (unsigned char)s[0];
    size_t l = u8_len(s, n);
    if (c < 0x80 || l == 1)
        return c;
    int64_t cp = c & (l == 2 ? 0x1F : l == 3 ? 0x0F : 0x07);
    for (size_t i = 1; i < l; i++)
        cp = (cp << 6) | ((unsigned char)s[i] & 0x3F);
    return cp;
}

int scalar_text_call(ScalarFn fn, TypeId result, int n, const Value *args, Arena *a, Value *out, WError *err)
{
    (void)result;
    const StrRef *x = &args[0].u.s;
    switch (fn) {
    case FN_SUBSTR: return do_substr(n, args, a, out, err);
    case FN_BTRIM: case FN_LTRIM: case FN_RTRIM: return do_trim(fn, n, args, a, out);
    case FN_REPLACE: return do_replace(args, a, out, err);
    case FN_SPLIT_PART: return do_split_part(args, a, out, err);
    case FN_STRPOS: {
        const char *q = find(x->p, x->len, args[1].u.s.p, args[1].u.s.len);
        out->u.i = q ? u8_count(x->p, (size_t)(q - x->p)) + 1 : 0;
        return 0;
    }
    case FN_LEFT:
    case FN_RIGHT: {
        int64_t k = args[1].u.i, c = u8_count(x->p, x->len);
        if (fn == FN_LEFT)
            return set_copy(out, a, x->p, u8_offset(x->p, x->len, k >= 0 ? k : (c + k > 0 ? c + k : 0)));
        size_t from = u8_offset(x->p, x->len, k >= 0 ? (c - k > 0 ? c - k : 0) : -k);
        return set_copy(out, a, x->p + from, x->len - from);
    }
    case FN_LPAD: case FN_RPAD: return do_pad(fn, n, args, a, out, err);
    case FN_REPEAT: {
        int64_t k = args[1].u.i;
        if (k <= 0 || x->len == 0)
            return set_copy(out, a, "", 0);
        if ((uint64_t)x->len * (uint64_t)k > SCALAR_MAX_STR)
            return too_long(err);
        size_t size = (size_t)x->len * (size_t)k;
        char *r = arena_alloc(a, size + 1);
        for (int64_t i = 0; i < k; i++)
            memcpy(r + (size_t)i * x->len, x->p, x->len);
        r[size] = 0;
        scalar_set_str(out, r, size);
        return 0;
    }
    case FN_REVERSE: {
        char *r = arena_alloc(a, (size_t)x->len + 1);
        size_t w = x->len;
        for (size_t i = 0; i < x->len;) {
            size_t l = u8_len(x->p + i, x->len - i);
            w -= l;
            memcpy(r + w, x->p + i, l);
            i += l;
        }
        r[x->len] = 0;
        scalar_set_str(out, r, x->len);
        return 0;
    }
    case FN_STARTS_WITH:
        out->u.i = args[1].u.s.len <= x->len && memcmp(x->p, args[1].u.s.p, args[1].u.s.len) == 0;
        return 0;
    case FN_OCTET_LENGTH: out->u.i = x->len; return 0;
    case FN_INITCAP: {
        /* Words are runs of letters and digits; bytes >= 0x80 count as
         * letters (so a word goes on through é) but are not case-mapped. */
        char *r = arena_alloc(a, (size_t)x->len + 1);
        bool in_word = false;
        for (uint32_t i = 0; i < x->len; i++) {
            unsigned char c = (unsigned char)x->p[i];
            r[i] = (char)(in_word ? tolower(c) : toupper(c));
            in_word = c >= 0x80 || isalnum(c);
        }
        r[x->len] = 0;
        scalar_set_str(out, r, x->len);
        return 0;
    }
    case FN_MD5: {
        char hex[33];
        md5_hex(x->p, x->len, hex);
        return set_copy(out, a, hex, 32);
    }
    case FN_ASCII: out->u.i = first_code_point(x->p, x->len); return 0;
    case FN_CHR: return do_chr(args[0].u.i, a, out, err);
    case FN_CONCAT_ARGS: return do_concat(args, 0, n, NULL, a, out, err);
    case FN_CONCAT_WS:
        if (args[0].null) {
            out->null = true;
            return 0;
        }
        return do_concat(args, 1, n, &args[0].u.s, a, out, err);
    default:
        return werr(err, SQLSTATE_INTERNAL, 0, "unknown text function id %d", (int)fn);
    }
}
