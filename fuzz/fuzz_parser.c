/*
 * fuzz_parser.c: libFuzzer target for parse_sql(). Arbitrary bytes become a
 * NUL-terminated string (an embedded NUL ends the SQL early, as it would
 * for a C caller) and are parsed into a fresh arena; any crash, leak,
 * sanitizer report or inconsistent result is a bug.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "parser.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *sql = malloc(size + 1);
    if (!sql)
        return 0;
    memcpy(sql, data, size);
    sql[size] = 0;
    Arena *a = arena_new(0);
    AstStmt **stmts;
    int n;
    WError err;
    werr_clear(&err);
    int rc = parse_sql(sql, a, &stmts, &n, &err);
    if (rc == 0) {
        if (err.set)
            abort();   /* success must leave no error */
        for (int i = 0; i < n; i++) {
            AstStmt *s = stmts[i];
            if (s->text_start < 0 || s->text_end < s->text_start || (size_t)s->text_end > strlen(sql) || s->pos < 1)
                abort();
        }
    } else if (!err.set || strlen(err.sqlstate) != 5) {
        abort();   /* failure must say why */
    } else if (!strcmp(err.sqlstate, SQLSTATE_PROGRAM_LIMIT) && size <= PARSE_MAX_SQL) {
        abort();   /* only an over-long input is 54000; too deep is 54001 */
    }
    arena_free(a);
    free(sql);
    return 0;
}
