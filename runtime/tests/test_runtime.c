/* test_runtime.c: JSON decoding and encoding, and vectorized evaluation against the reference semantics. */
#include <string.h>

#include "runtime_int.h"
#include "tap.h"

static void test_json(void)
{
    Arena *a = arena_new(0);
    TypeId types[] = {TYPE_INT8, TYPE_TEXT, TYPE_TIMESTAMP, TYPE_FLOAT8, TYPE_BOOL, TYPE_JSONB};
    const char *names[] = {"user_id", "url", "ts", "score", "ok", "extra"};
    Chunk *c = chunk_new(a, 6, types, 8);
    char err[200];
    const char *rec = "{\"user_id\": 7, \"url\": \"/a\\u00e9\", \"ts\": \"2026-01-01 00:00:01\", \"score\": 1.5,"
                      " \"ok\": true, \"extra\": {\"x\": [1, 2]}, \"unknown\": [1, {\"y\": null}]}";
    ok(rt_json_decode_row(rec, strlen(rec), 6, names, c, 0, err, sizeof err) == 0, "decodes a full record");
    Value v;
    chunk_get(c, 0, 0, &v);
    is_int(v.u.i, 7, "bigint field");
    chunk_get(c, 1, 0, &v);
    ok(v.u.s.len == 4 && memcmp(v.u.s.p, "/a\xc3\xa9", 4) == 0, "unicode escape decoded");
    chunk_get(c, 2, 0, &v);
    is_int(v.u.i, 1767225601000000LL, "timestamp text");
    chunk_get(c, 5, 0, &v);
    ok(v.u.s.len == 13 && memcmp(v.u.s.p, "{\"x\": [1, 2]}", 13) == 0, "jsonb keeps raw text");
    const char *partial = "{\"url\": \"/b\", \"ts\": 1767225601500}";
    ok(rt_json_decode_row(partial, strlen(partial), 6, names, c, 1, err, sizeof err) == 0, "missing fields are fine");
    chunk_get(c, 0, 1, &v);
    ok(v.null, "missing field is NULL");
    chunk_get(c, 2, 1, &v);
    is_int(v.u.i, 1767225601500000LL, "epoch milliseconds timestamp");
    const char *bad[] = {"{\"user_id\": \"x\"}", "{\"user_id\": 1", "[1]", "{\"url\": \"a\"} junk",
                         "{\"user_id\": 1.5e400}", "{\"ts\": \"yesterday\"}", "", "{\"url\": {\"nested\": 1}}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "malformed record %zu rejected", i);
        ok(rt_json_decode_row(bad[i], strlen(bad[i]), 6, names, c, 2, err, sizeof err) != 0, name);
    }
    Value row[3] = {value_int(TYPE_INT8, 1), value_str(TYPE_TEXT, "q\"\n", 3), value_null(TYPE_TIMESTAMP)};
    Buf b = BUF_INIT;
    rt_json_encode_row(3, names, row, &b);
    is_str(b.data, "{\"user_id\":1,\"url\":\"q\\\"\\n\",\"ts\":null}", "encodes JSON");
    ok(rt_json_decode_row(b.data, b.len, 3, names, c, 2, err, sizeof err) == 0, "encoded row decodes again");
    buf_free(&b);
    arena_free(a);
}

/* The vectorized kernels must agree with scalar_call on every row. */
static void test_eval_matches_reference(void)
{
    Arena *a = arena_new(0);
    TypeId types[] = {TYPE_INT8, TYPE_INT8};
    Chunk *c = chunk_new(a, 2, types, 6);
    int64_t xs[] = {1, INT64_MAX, -5, 0, 7, 3};
    int64_t ys[] = {2, 1, -5, 0, 7, 9};
    for (int i = 0; i < 6; i++) {
        Value r[2] = {value_int(TYPE_INT8, xs[i]), value_int(TYPE_INT8, ys[i])};
        if (i == 3)
            r[1] = value_null(TYPE_INT8);
        chunk_append(c, OP_INSERT, r);
    }
    RtCtx rc = {0};
    WError err = {0};
    rc.err = &err;
    ScalarFn fns[] = {FN_ADD_I, FN_SUB_I, FN_LT, FN_EQ, FN_GE};
    int all_same = 1;
    for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
        PlanExpr x = {.kind = PE_COL, .col = 0, .type = TYPE_INT8}, y = {.kind = PE_COL, .col = 1, .type = TYPE_INT8};
        PlanExpr *args[2] = {&x, &y};
        TypeId rt = fns[f] == FN_ADD_I || fns[f] == FN_SUB_I ? TYPE_INT8 : TYPE_BOOL;
        PlanExpr call = {.kind = PE_CALL, .fn = fns[f], .type = rt, .n_args = 2, .args = args};
        Column out;
        uint8_t bad[6] = {0};
        rt_eval(&rc, &call, c, &out, bad);
        for (int r = 0; r < 6; r++) {
            Value in[2], ref;
            chunk_get(c, 0, r, &in[0]);
            chunk_get(c, 1, r, &in[1]);
            WError e2 = {0};
            int failed = scalar_call(fns[f], rt, 2, in, a, &ref, &e2) != 0;
            if (failed != (bad[r] != 0))
                all_same = 0;
            else if (!failed && (ref.null != (out.nulls[r] != 0) || (!ref.null && ref.u.i != out.v.i[r])))
                all_same = 0;
        }
    }
    ok(all_same, "kernels agree with scalar_call, overflow marks only the bad row");
    ok(rc.stats.eval_errors == 1, "one overflow counted");
    arena_free(a);
}

/* rt_json_field finds the parts of a Debezium envelope. */
static void test_json_field(void)
{
    Arena *a = arena_new(0);
    char err[200];
    const char *v;
    size_t n;
    const char *env = "{\"before\": null, \"after\": {\"id\": 1, \"s\": \"}\"}, \"op\": \"u\", \"ts_ms\": 5}";
    ok(rt_json_field(env, strlen(env), "after", a, &v, &n, err, sizeof err) == 1 && n == 19 &&
           memcmp(v, "{\"id\": 1, \"s\": \"}\"}", n) == 0,
       "finds an object value, with a brace inside a string");
    ok(rt_json_field(env, strlen(env), "op", a, &v, &n, err, sizeof err) == 1 && n == 3 && memcmp(v, "\"u\"", 3) == 0,
       "finds a string value with its quotes");
    ok(rt_json_field(env, strlen(env), "before", a, &v, &n, err, sizeof err) == 1 && n == 4, "finds null");
    ok(rt_json_field(env, strlen(env), "source", a, &v, &n, err, sizeof err) == 0, "absent field");
    ok(rt_json_field("{}", 2, "op", a, &v, &n, err, sizeof err) == 0, "empty object");
    ok(rt_json_field("[1]", 3, "op", a, &v, &n, err, sizeof err) < 0, "not an object");
    ok(rt_json_field("{\"a\": [1, }", 11, "op", a, &v, &n, err, sizeof err) < 0, "malformed value");
    ok(rt_json_field("{\"a\": 1 \"op\": 2}", 17, "op", a, &v, &n, err, sizeof err) < 0, "missing comma");
    arena_free(a);
}

int main(void)
{
    test_json();
    test_json_field();
    test_eval_matches_reference();
    return tap_done();
}
