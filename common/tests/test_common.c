/* test_common.c: arena, buffers, value text I/O, dates, keys and rows. */
#include "arena.h"
#include "buf.h"
#include "chunk.h"
#include "row.h"
#include "tap.h"
#include "types.h"

#include <math.h>
#include <string.h>

static const char *roundtrip(TypeId t, const char *in, Arena *a, Buf *b)
{
    Value v;
    static WError e;
    werr_clear(&e);
    if (value_from_text(t, in, strlen(in), a, &v, &e))
        return e.msg;
    buf_reset(b);
    value_to_text(&v, b);
    return b->data ? b->data : "";
}

static void test_text_io(void)
{
    Arena *a = arena_new(0);
    Buf b = BUF_INIT;
    is_str(roundtrip(TYPE_TIMESTAMP, "2026-01-01 00:00:01", a, &b), "2026-01-01 00:00:01", "timestamp");
    is_str(roundtrip(TYPE_TIMESTAMP, "2026-01-01T00:00:01.25Z", a, &b), "2026-01-01 00:00:01.25", "iso timestamp");
    is_str(roundtrip(TYPE_TIMESTAMP, "2026-01-01 00:00:01+02", a, &b), "2025-12-31 22:00:01", "timestamp offset");
    is_str(roundtrip(TYPE_TIMESTAMP, "1969-12-31 23:59:59.5", a, &b), "1969-12-31 23:59:59.5", "pre-epoch");
    is_str(roundtrip(TYPE_TIMESTAMPTZ, "2026-03-01 12:00:00", a, &b), "2026-03-01 12:00:00+00", "timestamptz");
    is_str(roundtrip(TYPE_DATE, "2024-02-29", a, &b), "2024-02-29", "leap date");
    ok(strstr(roundtrip(TYPE_DATE, "2023-02-29", a, &b), "out of range") != NULL, "bad date rejected (22008)");
    ok(strstr(roundtrip(TYPE_DATE, "0000-01-01", a, &b), "out of range") != NULL, "no year 0");
    ok(strstr(roundtrip(TYPE_DATE, "2023-0a-01", a, &b), "invalid") != NULL, "malformed date (22007)");
    is_str(roundtrip(TYPE_DATE, " -infinity ", a, &b), "-infinity", "date -infinity");
    is_str(roundtrip(TYPE_BOOL, " TRUE ", a, &b), "t", "boolean with spaces");
    is_str(roundtrip(TYPE_BOOL, "of", a, &b), "f", "boolean prefix");
    ok(strstr(roundtrip(TYPE_BOOL, "o", a, &b), "invalid") != NULL, "ambiguous boolean prefix");
    is_str(roundtrip(TYPE_INTERVAL, "10 seconds", a, &b), "00:00:10", "interval seconds");
    is_str(roundtrip(TYPE_INTERVAL, "1 day 02:00:00", a, &b), "1 day 02:00:00", "interval day");
    is_str(roundtrip(TYPE_INTERVAL, "PT1M30S", a, &b), "00:01:30", "iso interval");
    is_str(roundtrip(TYPE_INTERVAL, "-2 hours", a, &b), "-02:00:00", "negative interval");
    is_str(roundtrip(TYPE_INTERVAL, "14 months", a, &b), "1 year 2 mons", "months");
    is_str(roundtrip(TYPE_INT4, " 42 ", a, &b), "42", "int4 spaces");
    ok(strstr(roundtrip(TYPE_INT2, "40000", a, &b), "out of range") != NULL, "int2 range");
    ok(strstr(roundtrip(TYPE_INT8, "12x", a, &b), "invalid input syntax") != NULL, "int8 syntax");
    is_str(roundtrip(TYPE_FLOAT8, "0.1", a, &b), "0.1", "float shortest");
    is_str(roundtrip(TYPE_FLOAT4, "1.1", a, &b), "1.1", "float4 shortest");
    is_str(roundtrip(TYPE_BOOL, "on", a, &b), "t", "bool");
    is_str(roundtrip(TYPE_BYTEA, "\\x00ff", a, &b), "\\x00ff", "bytea hex");
    buf_free(&b);
    arena_free(a);
}

static void test_keys(void)
{
    /* memcmp order of encoded keys must equal SQL order, NULL first. */
    Value vs[] = {value_null(TYPE_INT8), value_int(TYPE_INT8, -5), value_int(TYPE_INT8, 0),
                  value_int(TYPE_INT8, 7), value_int(TYPE_INT8, INT64_MAX)};
    int sorted = 1;
    Buf prev = BUF_INIT, cur = BUF_INIT;
    for (int i = 0; i < 5; i++) {
        buf_reset(&cur);
        key_encode(&cur, &vs[i], 1);
        if (i && (memcmp(prev.data, cur.data, prev.len < cur.len ? prev.len : cur.len) >= 0))
            sorted = 0;
        buf_reset(&prev);
        buf_append(&prev, cur.data, cur.len);
    }
    ok(sorted, "int keys sort like values");
    Value fs[] = {value_float(TYPE_FLOAT8, -2.5), value_float(TYPE_FLOAT8, -0.0), value_float(TYPE_FLOAT8, 1e-9),
                  value_float(TYPE_FLOAT8, 3)};
    sorted = 1;
    for (int i = 0; i < 4; i++) {
        buf_reset(&cur);
        key_encode(&cur, &fs[i], 1);
        if (i && memcmp(prev.data, cur.data, 9) >= 0)
            sorted = 0;
        buf_reset(&prev);
        buf_append(&prev, cur.data, cur.len);
    }
    ok(sorted, "float keys sort like values");
    Value s1[] = {value_str(TYPE_TEXT, "ab", 2), value_int(TYPE_INT4, 9)};
    Value s2[] = {value_str(TYPE_TEXT, "ab\0c", 4), value_int(TYPE_INT4, 1)};
    Value s3[] = {value_str(TYPE_TEXT, "abc", 3), value_int(TYPE_INT4, 1)};
    Buf k1 = BUF_INIT, k2 = BUF_INIT, k3 = BUF_INIT;
    key_encode(&k1, s1, 2);
    key_encode(&k2, s2, 2);
    key_encode(&k3, s3, 2);
    ok(memcmp(k1.data, k2.data, k1.len < k2.len ? k1.len : k2.len) < 0, "prefix string sorts first");
    ok(memcmp(k2.data, k3.data, k2.len < k3.len ? k2.len : k3.len) < 0, "embedded NUL sorts low");
    Arena *a = arena_new(0);
    TypeId ts[] = {TYPE_TEXT, TYPE_INT4};
    Value back[2];
    ok(key_decode(k2.data, k2.len, ts, 2, a, back) == 0 && back[0].u.s.len == 4 &&
           memcmp(back[0].u.s.p, "ab\0c", 4) == 0 && back[1].u.i == 1,
       "key decodes");
    arena_free(a);
    buf_free(&k1);
    buf_free(&k2);
    buf_free(&k3);
    buf_free(&prev);
    buf_free(&cur);
}

/* Equal values have equal keys and hashes (issue 17 #6). */
static bool same_key(Value x, Value y)
{
    Buf a = BUF_INIT, b = BUF_INIT;
    key_encode(&a, &x, 1);
    key_encode(&b, &y, 1);
    bool same = a.len == b.len && memcmp(a.data, b.data, a.len) == 0 && value_hash(&x, 7) == value_hash(&y, 7);
    buf_free(&a);
    buf_free(&b);
    return same;
}

static Value iv(int32_t months, int32_t days, int64_t usecs)
{
    Value v = value_null(TYPE_INTERVAL);
    v.null = false;
    v.u.iv = (Interval){.usecs = usecs, .days = days, .months = months};
    return v;
}

static void test_equal_keys(void)
{
    const int64_t H = INT64_C(3600000000);
    ok(same_key(iv(0, 1, 0), iv(0, 0, 24 * H)), "'1 day' and '24 hours' share a key");
    ok(same_key(iv(1, 0, 0), iv(0, 30, 0)), "'1 mon' and '30 days' share a key");
    ok(same_key(iv(0, -1, 0), iv(0, 0, -24 * H)), "'-1 day' and '-24 hours' share a key");
    ok(!same_key(iv(0, 1, 0), iv(0, 1, 1)), "intervals a microsecond apart differ");
    ok(same_key(value_float(TYPE_FLOAT8, 0.0), value_float(TYPE_FLOAT8, -0.0)), "0 and -0 share a key");
    ok(same_key(value_float(TYPE_FLOAT8, NAN), value_float(TYPE_FLOAT8, -NAN)), "NaN and -NaN share a key");
    Buf k = BUF_INIT;
    Value v = iv(0, 0, 36 * H);
    key_encode(&k, &v, 1);
    Arena *a = arena_new(0);
    TypeId t = TYPE_INTERVAL;
    Value back;
    ok(key_decode(k.data, k.len, &t, 1, a, &back) == 0 && back.u.iv.days == 1 && back.u.iv.usecs == 12 * H &&
           back.u.iv.months == 0,
       "an interval key decodes canonical");
    Buf inf = BUF_INIT;
    Value fi = value_float(TYPE_FLOAT8, INFINITY), fn = value_float(TYPE_FLOAT8, -NAN);
    buf_reset(&k);
    key_encode(&k, &fn, 1);
    key_encode(&inf, &fi, 1);
    ok(memcmp(inf.data, k.data, inf.len) < 0, "NaN sorts above Infinity");
    arena_free(a);
    buf_free(&inf);
    buf_free(&k);
}

static void test_rows(void)
{
    Interval iv = {5000000, 1, 2};
    Value in[5] = {value_int(TYPE_INT8, -1), value_null(TYPE_TEXT), value_str(TYPE_TEXT, "héllo", 6),
                   value_float(TYPE_FLOAT8, 2.5), value_null(TYPE_INTERVAL)};
    in[4].null = false;
    in[4].u.iv = iv;
    Buf b = BUF_INIT;
    row_encode(&b, in, 5);
    Value out[5];
    ok(row_decode(b.data, b.len, out, 5) == 0, "row decodes");
    ok(out[0].u.i == -1 && out[1].null && out[2].u.s.len == 6 && out[3].u.f == 2.5 &&
           out[4].u.iv.days == 1 && out[4].u.iv.months == 2 && out[4].u.iv.usecs == 5000000,
       "row values round-trip");
    ok(row_decode(b.data, b.len - 1, out, 5) < 0, "truncated row rejected");
    buf_free(&b);
}

static void test_chunk(void)
{
    Arena *a = arena_new(0);
    TypeId ts[] = {TYPE_INT8, TYPE_TEXT};
    Chunk *c = chunk_new(a, 2, ts, 2);
    Value r[2] = {value_int(TYPE_INT8, 1), value_str(TYPE_TEXT, "x", 1)};
    ok(chunk_append(c, OP_INSERT, r) == 0, "append row 0");
    r[1] = value_null(TYPE_TEXT);
    ok(chunk_append(c, OP_DELETE, r) == 1, "append row 1");
    ok(chunk_append(c, OP_INSERT, r) == -1, "full chunk refuses");
    Value v;
    chunk_get(c, 1, 0, &v);
    ok(!v.null && v.u.s.len == 1 && v.u.s.p[0] == 'x', "string cell");
    chunk_get(c, 1, 1, &v);
    ok(v.null, "null cell");
    is_str(rowop_name((RowOp)c->ops[1]), "-D", "op kept");
    arena_free(a);
}

static void test_arena(void)
{
    Arena *a = arena_new(128);
    char *big = arena_alloc(a, 100000);
    memset(big, 1, 100000);
    char *s = arena_printf(a, "%d-%s", 7, "x");
    is_str(s, "7-x", "arena printf");
    arena_reset(a);
    is_int(arena_used(a), 0, "reset clears usage");
    arena_free(a);
}

/* hash_bytes2 must give exactly what two hash_bytes calls give: join state
 * keys are made of these hashes, and state restored from a checkpoint
 * written before hash_bytes2 keeps its keys. Every tail length 0..7 and
 * several word counts, from an unaligned start. */
static void test_hash_bytes2(void)
{
    unsigned char buf[80];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 37 + 11);
    int bad = 0;
    for (size_t n = 0; n + 1 <= sizeof buf; n++) {
        uint64_t h[2];
        hash_bytes2(buf + 1, n, 7, UINT64_C(0xbb67ae8584caa73b), h);
        if (h[0] != hash_bytes(buf + 1, n, 7) || h[1] != hash_bytes(buf + 1, n, UINT64_C(0xbb67ae8584caa73b)))
            bad++;
    }
    is_int(bad, 0, "hash_bytes2 equals two hash_bytes");
    uint64_t h[2];
    hash_bytes2("abc", 3, 1, 1, h);
    ok(h[0] == h[1], "same seed, same hash");
    hash_bytes2("abc", 3, 1, 2, h);
    ok(h[0] != h[1], "seeds give different hashes");
}

/* type_phys is inline in types.h: one entry per type, checked here. */
static void test_type_phys(void)
{
    ok(type_phys(TYPE_INT8) == PHYS_I64 && type_phys(TYPE_BOOL) == PHYS_I64 && type_phys(TYPE_DATE) == PHYS_I64 &&
           type_phys(TYPE_TIMESTAMPTZ) == PHYS_I64 && type_phys(TYPE_NULL) == PHYS_I64,
       "integer-like types are I64");
    ok(type_phys(TYPE_FLOAT4) == PHYS_F64 && type_phys(TYPE_FLOAT8) == PHYS_F64, "floats are F64");
    ok(type_phys(TYPE_TEXT) == PHYS_STR && type_phys(TYPE_BYTEA) == PHYS_STR && type_phys(TYPE_JSONB) == PHYS_STR,
       "text, bytea, jsonb are STR");
    ok(type_phys(TYPE_INTERVAL) == PHYS_IV && type_phys(TYPE_NUMERIC) == PHYS_NUM, "interval IV, numeric NUM");
}

int main(void)
{
    test_hash_bytes2();
    test_type_phys();
    test_arena();
    test_text_io();
    test_keys();
    test_equal_keys();
    test_rows();
    test_chunk();
    return tap_done();
}
