/*
 * fuzz_pgtranslate.c: libFuzzer target for the catalog-query path's text
 * handling (server/pgtranslate.c): routing (pgt_names_catalog), splitting
 * (pgt_split) and translation (pgt_translate) of arbitrary bytes, which any
 * client can send. Any crash or sanitizer report is a bug; so is a split
 * piece outside the input, or a translation that fails without a SQLSTATE.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "pgcatalog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *sql = malloc(size + 1);
    if (!sql)
        return 0;
    memcpy(sql, data, size);
    sql[size] = 0;
    int len = (int)strlen(sql);
    int starts[PGT_MAX_STMTS], ends[PGT_MAX_STMTS];
    int n = pgt_split(sql, starts, ends, PGT_MAX_STMTS);
    for (int i = 0; i < n; i++) {
        if (starts[i] < 0 || ends[i] > len || starts[i] >= ends[i])
            abort();
        pgt_names_catalog(sql, starts[i], ends[i]);
        Arena *a = arena_new(0);
        WError err;
        werr_clear(&err);
        char *out = NULL;
        if (pgt_translate(sql + starts[i], ends[i] - starts[i], a, &out, &err) == 0) {
            if (!out)
                abort();
        } else if (!err.set || !err.sqlstate[0]) {
            abort();
        }
        arena_free(a);
    }
    free(sql);
    return 0;
}
