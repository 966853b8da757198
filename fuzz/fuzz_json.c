/*
 * fuzz_json.c: libFuzzer target for the two JSON readers, with an oracle.
 *
 * The input is read (1) by json_text_check (common/utf8.c), the jsonb input
 * check, and (2) as a Kafka record by rt_json_decode_row (runtime/json.c)
 * into a row of one column of each kind the decoder treats apart. Besides
 * the sanitizers' findings, the target aborts when a decoded row breaks
 * the rule every door keeps (common/utf8.h): a TEXT value that is not valid
 * UTF-8, or a JSONB value that json_text_check refuses, must never come out
 * of the decoder, since it would be stored and fail every reader later.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "chunk.h"
#include "utf8.h"

int rt_json_decode_row(const char *p, size_t n, int n_cols, const char *const *names, Chunk *c, int row,
                       char *errbuf, size_t errlen);

static const char *const NAMES[] = {"k", "t", "j", "n", "ts", "b", "d", "iv", "tz"};
static const TypeId TYPES[] = {TYPE_INT8, TYPE_TEXT, TYPE_JSONB, TYPE_NUMERIC, TYPE_TIMESTAMP,
                               TYPE_BOOL, TYPE_FLOAT8, TYPE_INTERVAL, TYPE_TIMESTAMPTZ};
#define N_COLS ((int)(sizeof TYPES / sizeof TYPES[0]))

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[160];
    (void)json_text_check((const char *)data, size, why, sizeof why);

    Arena *a = arena_new(1 << 16);
    Chunk *c = chunk_new(a, N_COLS, TYPES, 1);
    char err[256];
    if (rt_json_decode_row((const char *)data, size, N_COLS, NAMES, c, 0, err, sizeof err) == 0) {
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
    return 0;
}
