/*
 * fuzz_avro.c: libFuzzer target for the Avro record decoder
 * (runtime/avro.c), with the same oracle as fuzz_json.c.
 *
 * The input is one raw Avro record (schema.inline: no registry, so nothing
 * leaves the process) of a schema with a field of each kind the decoder
 * treats apart, among them a recursive record (a linked list) and a union
 * of several types, decoded into one row. Besides the sanitizers' findings
 * (libavro itself is not instrumented, but every byte it reads has passed
 * the decoder's validation walk first), the target aborts when a decoded TEXT
 * value is not UTF-8 or a JSONB value is not JSON jsonb input accepts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "avro_codec.h"
#include "utf8.h"

static const char *SCHEMA =
    "{\"type\":\"record\",\"name\":\"r\",\"fields\":["
    "{\"name\":\"k\",\"type\":\"long\"},"
    "{\"name\":\"i\",\"type\":\"int\"},"
    "{\"name\":\"t\",\"type\":[\"null\",\"string\"]},"
    "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"en\",\"symbols\":[\"A\",\"B\",\"C\"]}},"
    "{\"name\":\"n\",\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":38,\"scale\":4}},"
    "{\"name\":\"ts\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}},"
    "{\"name\":\"d\",\"type\":{\"type\":\"int\",\"logicalType\":\"date\"}},"
    "{\"name\":\"f\",\"type\":\"double\"},"
    "{\"name\":\"a\",\"type\":{\"type\":\"array\",\"items\":\"string\"}},"
    "{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":[\"null\",\"long\",\"string\"]}},"
    "{\"name\":\"l\",\"type\":{\"type\":\"record\",\"name\":\"node\",\"fields\":["
    "{\"name\":\"v\",\"type\":\"string\"},{\"name\":\"next\",\"type\":[\"null\",\"node\"]}]}},"
    "{\"name\":\"x\",\"type\":{\"type\":\"fixed\",\"name\":\"fx\",\"size\":3}}]}";

static const char *NAMES[] = {"k", "i", "t", "e", "n", "ts", "d", "f", "a", "m", "l", "x"};
static const TypeId TYPES[] = {TYPE_INT8, TYPE_INT2, TYPE_TEXT, TYPE_TEXT, TYPE_NUMERIC, TYPE_TIMESTAMPTZ,
                               TYPE_DATE, TYPE_FLOAT8, TYPE_JSONB, TYPE_JSONB, TYPE_TEXT, TYPE_BYTEA};
#define N_COLS ((int)(sizeof TYPES / sizeof TYPES[0]))

/* The planner's option lookup, which avro.c calls (the planner is not linked in). */
const char *cat_option(const CatRelation *r, const char *key)
{
    for (int i = 0; i < r->n_options; i++)
        if (strcasecmp(r->options[i].key, key) == 0)
            return r->options[i].value;
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A decoder per input (not kept across inputs), so LeakSanitizer sees
     * everything libavro allocated freed after each. */
    CatOption opts[1] = {{"schema.inline", SCHEMA}};
    CatRelation r = {0};
    r.n_cols = N_COLS;
    r.col_names = NAMES;
    r.col_types = TYPES;
    r.options = opts;
    r.n_options = 1;
    r.format = "plain";
    r.encode = "avro";
    WError werr_ = {0};
    RtAvroDecoder *d = rt_avro_decoder_new(&r, N_COLS, NAMES, &werr_);
    if (!d) {
        fprintf(stderr, "fuzz_avro: %s\n", werr_.msg);
        abort();
    }
    Arena *a = arena_new(1 << 16);
    Chunk *c = chunk_new(a, N_COLS, TYPES, 1);
    char err[256], why[160];
    if (rt_avro_decode_row(d, (const char *)data, size, c, 0, err, sizeof err) == 0) {
        for (int k = 0; k < N_COLS; k++) {
            if ((TYPES[k] != TYPE_TEXT && TYPES[k] != TYPE_JSONB) || c->cols[k].nulls[0])
                continue;
            StrRef s = c->cols[k].v.s[0];
            if (utf8_invalid_at(s.p, s.len) != s.len) {
                fprintf(stderr, "decoded %s value is not UTF-8\n", NAMES[k]);
                abort();
            }
            if (TYPES[k] == TYPE_JSONB && json_text_check(s.p, s.len, why, sizeof why)) {
                fprintf(stderr, "decoded jsonb value is not JSON: %s\n", why);
                abort();
            }
        }
    }
    arena_free(a);
    rt_avro_decoder_free(d);
    return 0;
}
