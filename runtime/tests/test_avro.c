/* test_avro.c: the Avro decoder (runtime/avro.c) on hand-encoded records,
 * with inline schemas (no registry, no broker): each conversion at its
 * boundaries, resolution refusals, and malformed input. The registry path
 * and the wire format are tested end to end by tests/avro/avro_source.py. */
#include <string.h>

#include "avro_codec.h"
#include "tap.h"

static void put_long(Buf *b, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z & ~UINT64_C(0x7f)) {
        buf_putc(b, (char)((z & 0x7f) | 0x80));
        z >>= 7;
    }
    buf_putc(b, (char)z);
}

static void put_bytes(Buf *b, const void *p, size_t n)
{
    put_long(b, (int64_t)n);
    buf_append(b, p, n);
}

/* A one-field record schema {"name": "f", "type": type}, decoded into one
 * column of type t; returns the decode's result, the value in *out. */
typedef struct One {
    Arena *a;
    RtAvroDecoder *d;
    Chunk *c;
    char err[200];
} One;

static int one_open(One *o, const char *type_json, TypeId t, WError *err)
{
    static const char *names[1] = {"f"};
    static TypeId types[1];
    static char schema[512];
    types[0] = t;
    snprintf(schema, sizeof schema, "{\"type\":\"record\",\"name\":\"r\",\"fields\":[{\"name\":\"f\",\"type\":%s}]}",
             type_json);
    static CatOption opts[1];
    opts[0] = (CatOption){"schema.inline", schema};
    static CatRelation r;
    memset(&r, 0, sizeof r);
    r.n_cols = 1;
    r.col_names = names;
    r.col_types = types;
    r.options = opts;
    r.n_options = 1;
    r.format = "plain";
    r.encode = "avro";
    o->a = arena_new(0);
    o->c = chunk_new(o->a, 1, types, 4);
    o->d = rt_avro_decoder_new(&r, 1, names, err);
    if (!o->d)
        arena_free(o->a);
    return o->d ? 0 : -1;
}

static void one_close(One *o)
{
    rt_avro_decoder_free(o->d);
    arena_free(o->a);
}

static int decode(One *o, const Buf *b, Value *v)
{
    int rc = rt_avro_decode_row(o->d, b->data ? b->data : "", b->len, o->c, 0, o->err, sizeof o->err);
    if (!rc)
        chunk_get(o->c, 0, 0, v);
    return rc;
}

static void test_decimal(void)
{
    One o;
    WError err = {0};
    ok(one_open(&o, "{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":20,\"scale\":2}", TYPE_NUMERIC,
                &err) == 0, "decimal schema");
    const struct { unsigned char b[17]; size_t n; const char *want; } cases[] = {
        {{0x04, 0xd2}, 2, "12.34"},   /* 1234 */
        {{0xfb, 0x2e}, 2, "-12.34"},  /* -1234 */
        {{0x00}, 1, "0.00"},
        {{0xff}, 1, "-0.01"},
        {{0x05}, 1, "0.05"},
        {{0}, 0, "0.00"},             /* an empty byte string is 0 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Buf b = BUF_INIT, t = BUF_INIT;
        put_bytes(&b, cases[i].b, cases[i].n);
        Value v;
        if (decode(&o, &b, &v) == 0) {
            value_to_text(&v, &t);
            buf_putc(&t, 0);
            is_str(t.data, cases[i].want, "decimal bytes to NUMERIC");
        } else {
            ok(0, o.err);
        }
        buf_free(&b);
        buf_free(&t);
    }
    Buf b = BUF_INIT;
    unsigned char wide[17] = {1};
    put_bytes(&b, wide, 17);
    Value v;
    ok(decode(&o, &b, &v) != 0 && strstr(o.err, "wider than 16 bytes"), "a decimal over 16 bytes is a bad record");
    buf_free(&b);
    one_close(&o);
}

static void test_ints(void)
{
    One o;
    WError err = {0};
    ok(one_open(&o, "\"int\"", TYPE_INT2, &err) == 0, "int into SMALLINT");
    Buf b = BUF_INIT;
    Value v;
    put_long(&b, 32767);
    ok(decode(&o, &b, &v) == 0 && v.u.i == 32767, "32767 fits");
    buf_reset(&b);
    put_long(&b, 32768);
    ok(decode(&o, &b, &v) != 0 && strstr(o.err, "out of range"), "32768 is a bad record");
    buf_free(&b);
    one_close(&o);

    ok(one_open(&o, "\"long\"", TYPE_INT4, &err) != 0 && strstr(err.msg, "does not resolve"),
       "long into INTEGER does not resolve (Avro never narrows)");
}

static void test_timestamps(void)
{
    One o;
    WError err = {0};
    ok(one_open(&o, "{\"type\":\"long\",\"logicalType\":\"timestamp-millis\"}", TYPE_TIMESTAMPTZ, &err) == 0,
       "timestamp-millis into TIMESTAMPTZ");
    Buf b = BUF_INIT;
    Value v;
    put_long(&b, 1500);
    ok(decode(&o, &b, &v) == 0 && v.u.i == 1500000, "milliseconds become microseconds");
    buf_reset(&b);
    put_long(&b, INT64_MAX / 999);
    ok(decode(&o, &b, &v) != 0 && strstr(o.err, "out of range"), "a millisecond count past int64 microseconds");
    buf_free(&b);
    one_close(&o);
    ok(one_open(&o, "{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}", TYPE_TIMESTAMP, &err) == 0,
       "timestamp-micros into TIMESTAMP");
    b = (Buf)BUF_INIT;
    put_long(&b, 1500);
    ok(decode(&o, &b, &v) == 0 && v.u.i == 1500, "microseconds kept");
    buf_free(&b);
    one_close(&o);
    ok(one_open(&o, "{\"type\":\"int\",\"logicalType\":\"date\"}", TYPE_DATE, &err) == 0, "date into DATE");
    b = (Buf)BUF_INIT;
    put_long(&b, -1);
    ok(decode(&o, &b, &v) == 0 && v.u.i == -1, "1969-12-31");
    buf_free(&b);
    one_close(&o);
    ok(one_open(&o, "\"int\"", TYPE_DATE, &err) != 0, "a plain int does not resolve to DATE");
}

static void test_unions_and_malformed(void)
{
    One o;
    WError err = {0};
    ok(one_open(&o, "[\"null\",\"string\",\"long\"]", TYPE_TEXT, &err) == 0,
       "a union with one branch that resolves is accepted");
    Buf b = BUF_INIT;
    Value v;
    put_long(&b, 0); /* branch 0: null */
    ok(decode(&o, &b, &v) == 0 && v.null, "null branch: NULL");
    buf_reset(&b);
    put_long(&b, 1);
    put_bytes(&b, "hi", 2);
    ok(decode(&o, &b, &v) == 0 && v.u.s.len == 2 && !memcmp(v.u.s.p, "hi", 2), "string branch");
    buf_reset(&b);
    put_long(&b, 2);
    put_long(&b, 5);
    ok(decode(&o, &b, &v) != 0 && strstr(o.err, "writer type long does not resolve"),
       "a branch that does not resolve makes that record bad");
    buf_reset(&b);
    put_long(&b, 1);
    put_long(&b, 10); /* a 10-byte string with 2 bytes */
    buf_append(&b, "hi", 2);
    ok(decode(&o, &b, &v) != 0 && strstr(o.err, "truncated"), "a string cut short: truncated");
    buf_reset(&b);
    put_long(&b, 7);
    ok(decode(&o, &b, &v) != 0, "a union branch out of range is a bad record");
    buf_reset(&b);
    put_long(&b, 0);
    buf_putc(&b, 'x');
    ok(decode(&o, &b, &v) != 0 && strstr(o.err, "after its end"), "bytes after the record");
    buf_free(&b);
    one_close(&o);
}

/* Hostile lengths and nesting are refused before libavro allocates or
 * recurses (under ASan a 1 TB allocation would abort the test). */
static void test_hostile(void)
{
    One o;
    WError err = {0};
    ok(one_open(&o, "\"string\"", TYPE_TEXT, &err) == 0, "string");
    Buf b = BUF_INIT;
    Value v;
    put_long(&b, INT64_C(1) << 40);
    buf_append(&b, "abc", 3);
    ok(decode(&o, &b, &v) != 0 && strstr(o.err, "truncated"), "a string claiming 1 TB: truncated, not allocated");
    buf_reset(&b);
    put_long(&b, -3);
    ok(decode(&o, &b, &v) != 0, "a negative length");
    buf_reset(&b);
    put_bytes(&b, "a\xff", 2);
    ok(decode(&o, &b, &v) != 0 && strstr(o.err, "invalid UTF-8"), "invalid UTF-8 in a string: a bad record");
    ok(strstr(o.err, "malformed Avro record") != NULL, "found before libavro reads");
    buf_reset(&b);
    put_bytes(&b, "a\0b", 3);
    ok(decode(&o, &b, &v) != 0 && strstr(o.err, "NUL"), "a NUL in a string: a bad record");
    buf_reset(&b);
    put_bytes(&b, "\xc3\xa9t\xc3\xa9", 5);
    ok(decode(&o, &b, &v) == 0 && v.u.s.len == 5, "valid UTF-8 read");
    buf_free(&b);
    one_close(&o);

    ok(one_open(&o, "{\"type\":\"array\",\"items\":\"string\"}", TYPE_JSONB, &err) == 0, "array of strings");
    b = (Buf)BUF_INIT;
    put_long(&b, 1);
    put_bytes(&b, "a\0b", 3);
    put_long(&b, 0);
    ok(decode(&o, &b, &v) != 0 && strstr(o.err, "NUL"), "a NUL in a nested string: a bad record, not a cut string");
    buf_free(&b);
    one_close(&o);

    ok(one_open(&o, "{\"type\":\"array\",\"items\":\"null\"}", TYPE_JSONB, &err) == 0, "array of nulls");
    b = (Buf)BUF_INIT;
    put_long(&b, INT64_C(1) << 40);
    put_long(&b, 0);
    ok(decode(&o, &b, &v) != 0 && strstr(o.err, "more array or map items"), "2^40 nulls are refused");
    buf_reset(&b);
    put_long(&b, 3);
    put_long(&b, 0);
    ok(decode(&o, &b, &v) == 0 && v.u.s.len == 18 && !memcmp(v.u.s.p, "[null, null, null]", 18),
       "three nulls read as JSON");
    buf_free(&b);
    one_close(&o);

    /* A linked list: each node's next is null or another node. */
    ok(one_open(&o, "{\"type\":\"record\",\"name\":\"node\",\"fields\":[{\"name\":\"next\","
                    "\"type\":[\"null\",\"node\"]}]}", TYPE_JSONB, &err) == 0, "recursive schema");
    b = (Buf)BUF_INIT;
    for (int i = 0; i < 10; i++)
        put_long(&b, 1);
    put_long(&b, 0);
    ok(decode(&o, &b, &v) == 0, "ten levels read");
    buf_reset(&b);
    for (int i = 0; i < 100000; i++)
        put_long(&b, 1);
    put_long(&b, 0);
    ok(decode(&o, &b, &v) != 0 && strstr(o.err, "nested more than 64"), "100,000 levels refused, no deep recursion");
    buf_free(&b);
    one_close(&o);
}

static void test_options(void)
{
    CatOption opts[2];
    CatRelation r = {0};
    r.options = opts;
    r.format = "plain";
    r.encode = "avro";
    WError err = {0};
    r.n_options = 0;
    ok(rt_avro_check_options(&r, &err) != 0 && !strcmp(err.sqlstate, SQLSTATE_INVALID_PARAMETER), "neither registry nor inline: 22023");
    opts[0] = (CatOption){"schema.registry", "localhost:8081"};
    r.n_options = 1;
    werr_clear(&err);
    ok(rt_avro_check_options(&r, &err) != 0 && strstr(err.msg, "http://"), "a URL without a scheme");
    opts[0] = (CatOption){"schema.registry", "https://r"};
    opts[1] = (CatOption){"schema.registry.password", "p"};
    r.n_options = 2;
    werr_clear(&err);
    ok(rt_avro_check_options(&r, &err) != 0 && strstr(err.msg, "together"), "a password without a username");
    r.n_options = 1;
    r.format = "upsert";
    werr_clear(&err);
    ok(rt_avro_check_options(&r, &err) != 0 && !strcmp(err.sqlstate, SQLSTATE_NOT_SUPPORTED), "FORMAT UPSERT: 0A000");
}

int main(void)
{
    test_decimal();
    test_ints();
    test_timestamps();
    test_unions_and_malformed();
    test_hostile();
    test_options();
    return tap_done();
}
