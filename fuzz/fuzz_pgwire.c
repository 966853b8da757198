/*
 * fuzz_pgwire.c: libFuzzer target for the Postgres wire protocol decoder.
 *
 * The input is the byte stream a client sends, from the first byte of the
 * startup packet to EOF. srv_serve_bytes() serves it exactly as a socket
 * connection (SSL/GSS negotiation, startup, simple and extended query,
 * Bind's binary parameter decoding, Close, Sync, COPY noise...) against a
 * small engine that parses each statement with the real parser and answers
 * with rows, an error or a notice, so the encoder paths run too. Any crash,
 * leak, sanitizer report or hang is a bug; deeply nested SQL must end in the
 * parser's depth limit (54001), never in a stack overflow.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "parser.h"
#include "pgwire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int session_token;

static void *fz_session_open(void *ctx, const char *user, const char *database, WError *err)
{
    if (user && strcmp(user, "refuse") == 0) {
        werr(err, SQLSTATE_INVALID_AUTHORIZATION, 0, "role \"%s\" does not exist", user);
        return NULL;
    }
    return &session_token;
}

static void fz_session_close(void *ctx, void *sess)
{
    if (sess != &session_token)
        abort();
}

/* Parses sql; answers a row per statement, or the parse error. */
static void answer(const char *sql, int n_params, const char *const *params, bool describe_only, SrvResult *out)
{
    Arena *a = arena_new(0);
    AstStmt **stmts;
    int n = 0;
    WError err;
    werr_clear(&err);
    if (parse_sql(sql, a, &stmts, &n, &err)) {
        if (!err.set || strlen(err.sqlstate) != 5)
            abort(); /* a failure must say why */
        srv_result_error(out, &err);
        arena_free(a);
        return;
    }
    for (int i = 0; i < n; i++) {
        if (stmts[i]->kind != STMT_SELECT) {
            if (stmts[i]->kind == STMT_SET)
                srv_result_notice(out, "setting ignored");
            if (!describe_only)
                srv_result_complete(out, "OK");
            continue;
        }
        /* The parameter's column takes a type picked by the parameter's first
         * byte, so a portal bound with binary result formats sends arbitrary
         * text through every binary encoder (pgbinary.c). */
        static const uint32_t OIDS[] = {25, 16, 17, 20, 21, 23, 700, 701, 1082, 1114, 1184, 1186, 3802, 18, 26, 1700};
        const char *names[2] = {"stmt", "param"};
        uint32_t types[2] = {25, 25};
        if (n_params > 0 && params[0] && params[0][0])
            types[1] = OIDS[(unsigned char)params[0][0] % (sizeof OIDS / sizeof OIDS[0])];
        srv_result_columns(out, 2, names, types);
        if (describe_only)
            continue;
        const char *vals[2] = {sql, n_params > 0 ? params[0] : NULL};
        int lens[2] = {(int)strlen(sql), n_params > 0 && params[0] ? (int)strlen(params[0]) : 0};
        if (srv_result_row(out, vals, lens) < 0)
            break;
        srv_result_complete(out, "SELECT 1");
    }
    arena_free(a);
}

static void fz_query(void *ctx, void *sess, const char *sql, SrvResult *out) { answer(sql, 0, NULL, false, out); }

static void fz_execute(void *ctx, void *sess, const char *sql, int n_params, const char *const *params,
                       bool describe_only, long max_rows, SrvResult *out)
{
    answer(sql, n_params, params, describe_only, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A small message limit keeps the "too large" path reachable. */
    SrvConfig cfg = {.max_message = 1 << 20, .server_version = "15.0"};
    SrvEngine eng = {.ctx = NULL, .session_open = fz_session_open, .session_close = fz_session_close,
                     .query = fz_query, .execute = fz_execute};
    srv_serve_bytes(&cfg, &eng, data, size);
    return 0;
}
