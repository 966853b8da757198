/*
 * test_pgwire.c: the wire protocol server against real libpq and raw sockets.
 *
 * A fake engine stands in for the SQL engine, with a statement vocabulary
 * just rich enough to reach every protocol path:
 *   SELECT n      n rows of one int4 column "n", tag "SELECT n"
 *   ERR           ERROR 42601 at position 3, with detail and hint
 *   SLEEP         polls srv_result_cancelled() for up to 10 s, then 57014
 *   NOTICE        a NoticeResponse, tag "DO"
 *   NULLS         one row ('x', NULL)
 *   COPY          COPY OUT of three lines, tag "SUBSCRIBE"
 *   CREATE ...    tag "CREATE SOURCE"
 *   ECHO ...      (extended) one row echoing every parameter, columns p1..pn;
 *                 the engine infers bigint for the undeclared parameters of
 *                 "ECHO TYPED ..." (SrvEngine.param_types), text for the others
 * Simple queries split on ';'. User "nobody" is refused at session open.
 *
 * Run with `--serve PORT` to keep the fake server up for psql by hand.
 */
#include "crypto.h"
#include "pgwire.h"
#include "tap.h"
#include "arena.h"
#include "pg_oids.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static atomic_int n_open, n_close;
static atomic_int n_gone;      /* statements that stopped because the client went away */

static void *f_open(void *ctx, const char *user, const char *db, WError *err)
{
    if (strcmp(user, "nobody") == 0) {
        werr(err, "28000", 0, "role \"%s\" does not exist", user);
        return NULL;
    }
    atomic_fetch_add(&n_open, 1);
    return xstrdup(user);
}

static void f_close(void *ctx, void *sess)
{
    free(sess);
    atomic_fetch_add(&n_close, 1);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Run one statement; returns -1 when it failed (the caller stops). */
static int run_one(const char *st, int n_params, const char *const *params, bool describe,
                   long max_rows, SrvResult *out)
{
    WError e;
    werr_clear(&e);
    if (strncmp(st, "SELECT ", 7) == 0) {
        long n = atol(st + 7);
        const char *names[] = {"n"};
        uint32_t oids[] = {PG_OID_INT4};
        srv_result_columns(out, 1, names, oids);
        if (describe)
            return 0;
        long emit = max_rows > 0 && max_rows < n ? max_rows : n;
        for (long i = 1; i <= emit; i++) {
            char v[32];
            snprintf(v, sizeof v, "%ld", i);
            const char *vals[] = {v};
            if (srv_result_row(out, vals, NULL) < 0) {
                atomic_fetch_add(&n_gone, 1);
                return -1;
            }
        }
        char tag[48];
        snprintf(tag, sizeof tag, "SELECT %ld", emit);
        srv_result_complete(out, tag);
        return 0;
    }
    if (strcmp(st, "ERR") == 0) {
        werr(&e, SQLSTATE_SYNTAX_ERROR, 3, "syntax error at or near \"R\"");
        werr_detail(&e, "some detail");
        werr_hint(&e, "some hint");
        srv_result_error(out, &e);
        return -1;
    }
    if (strcmp(st, "SLEEP") == 0) {
        if (describe)
            return 0;
        double t0 = now_s();
        while (now_s() - t0 < 10) {
            if (srv_result_cancelled(out)) {
                atomic_fetch_add(&n_gone, 1);
                werr(&e, SQLSTATE_QUERY_CANCELED, 0, "canceling statement due to user request");
                srv_result_error(out, &e);
                return -1;
            }
            usleep(1000);
        }
        srv_result_complete(out, "SLEEP");
        return 0;
    }
    if (strcmp(st, "NOTICE") == 0) {
        srv_result_notice(out, "hello");
        srv_result_complete(out, "DO");
        return 0;
    }
    if (strcmp(st, "NULLS") == 0) {
        const char *names[] = {"a", "b"};
        srv_result_columns(out, 2, names, NULL);
        const char *vals[] = {"x", NULL};
        srv_result_row(out, vals, (const int[]){1, 0});
        srv_result_complete(out, "SELECT 1");
        return 0;
    }
    if (strcmp(st, "COPY") == 0) {
        if (describe)
            return 0;
        if (srv_result_copy_begin(out, 1) < 0)
            return -1;
        for (int i = 1; i <= 3; i++) {
            char line[16];
            int n = snprintf(line, sizeof line, "%d\n", i);
            if (srv_result_copy_data(out, line, n) < 0)
                return -1;
        }
        srv_result_flush(out);
        srv_result_copy_end(out, "SUBSCRIBE");
        return 0;
    }
    if (strncmp(st, "CREATE", 6) == 0) {
        if (!describe)
            srv_result_complete(out, "CREATE SOURCE");
        return 0;
    }
    if (strncmp(st, "ECHO", 4) == 0) {
        char names[16][8];
        const char *np[16];
        int n = n_params < 16 ? n_params : 16;
        for (int i = 0; i < n; i++) {
            snprintf(names[i], sizeof names[i], "p%d", i + 1);
            np[i] = names[i];
        }
        srv_result_columns(out, n, np, NULL);
        if (describe)
            return 0;
        srv_result_row(out, params, NULL);
        srv_result_complete(out, "SELECT 1");
        return 0;
    }
    werr(&e, SQLSTATE_SYNTAX_ERROR, 1, "unknown statement");
    srv_result_error(out, &e);
    return -1;
}

static void f_query(void *ctx, void *sess, const char *sql, SrvResult *out)
{
    char *copy = xstrdup(sql), *save = NULL;
    for (char *st = strtok_r(copy, ";", &save); st; st = strtok_r(NULL, ";", &save)) {
        while (*st == ' ' || *st == '\n')
            st++;
        if (!*st)
            continue;
        if (run_one(st, 0, NULL, false, 0, out) < 0)
            break;
    }
    free(copy);
}

static void f_execute(void *ctx, void *sess, const char *sql, int n_params,
                      const char *const *params, bool describe_only, long max_rows,
                      SrvResult *out)
{
    run_one(sql, n_params, params, describe_only, max_rows, out);
}

static atomic_int n_inferred;   /* param_types calls */

static void f_param_types(void *ctx, void *sess, const char *sql, int n_params, uint32_t *oids)
{
    atomic_fetch_add(&n_inferred, 1);
    if (strncmp(sql, "ECHO TYPED", 10) != 0)
        return;
    for (int i = 0; i < n_params; i++)
        if (!oids[i])
            oids[i] = PG_OID_INT8;
}

static const SrvEngine fake = {.ctx = NULL, .session_open = f_open, .session_close = f_close, .query = f_query,
                               .execute = f_execute, .param_types = f_param_types};

static PGconn *connect_as(int port, const char *user)
{
    char ci[256];
    snprintf(ci, sizeof ci,
             "host=127.0.0.1 port=%d user=%s dbname=weir application_name=tapp connect_timeout=5",
             port, user);
    return PQconnectdb(ci);
}

/* ---- raw-socket helpers ---- */

static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = v;
}

static int read_full(int fd, void *dst, size_t n)
{
    char *d = dst;
    while (n) {
        ssize_t k = recv(fd, d, n, 0);
        if (k <= 0)
            return -1;
        d += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Read one message; body (NUL-terminated) into buf of cap bytes, truncated.
 * Returns the type byte, or -1 at EOF/timeout. */
static int read_msg(int fd, char *buf, size_t cap)
{
    unsigned char h[5];
    if (read_full(fd, h, 5) < 0)
        return -1;
    uint32_t len = (uint32_t)h[1] << 24 | h[2] << 16 | h[3] << 8 | h[4];
    if (len < 4 || len > (1u << 20))
        return -1;
    char *body = malloc(len);
    if (read_full(fd, body, len - 4) < 0) {
        free(body);
        return -1;
    }
    size_t n = len - 4 < cap - 1 ? len - 4 : cap - 1;
    memcpy(buf, body, n);
    buf[n] = 0;
    free(body);
    return h[0];
}

static int raw_startup(int fd, const char *user)
{
    unsigned char pkt[256];
    size_t n = 8;
    n += (size_t)sprintf((char *)pkt + n, "user") + 1;
    n += (size_t)sprintf((char *)pkt + n, "%s", user) + 1;
    pkt[n++] = 0;
    put32(pkt, (uint32_t)n);
    put32(pkt + 4, 196608);
    if (send(fd, pkt, n, MSG_NOSIGNAL) != (ssize_t)n)
        return -1;
    char body[1024];
    int t;
    while ((t = read_msg(fd, body, sizeof body)) >= 0)
        if (t == 'Z')
            return 0;
    return -1;
}

/* The SQLSTATE of an ErrorResponse body, "" if none. */
static const char *error_code(const char *body, size_t len)
{
    const char *p = body;
    while ((size_t)(p - body) < len && *p) {
        if (*p == 'C')
            return p + 1;
        p += strlen(p) + 1;
    }
    return "";
}

/* Read until an ErrorResponse; true if its SQLSTATE is code and the server
 * then closes the connection. */
static bool expect_error_close(int fd, const char *code)
{
    char body[2048];
    int t;
    memset(body, 0, sizeof body);
    while ((t = read_msg(fd, body, sizeof body)) >= 0 && t != 'E')
        ;
    if (t != 'E')
        return false;
    if (strcmp(error_code(body, sizeof body), code) != 0) {
        diag("got SQLSTATE %s", error_code(body, sizeof body));
        return false;
    }
    char c;
    return recv(fd, &c, 1, 0) == 0;
}

static int send_all(int fd, const void *p, size_t n)
{
    return send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/* A message: type, then body bytes. */
static int send_msg(int fd, char type, const void *body, size_t n)
{
    unsigned char h[5];
    h[0] = (unsigned char)type;
    put32(h + 1, (uint32_t)n + 4);
    return send_all(fd, h, 5) || send_all(fd, body, n) ? -1 : 0;
}

/* ---- tests ---- */

static void test_simple(PGconn *c)
{
    PGresult *r = PQexec(c, "SELECT 3");
    is_int(PQresultStatus(r), PGRES_TUPLES_OK, "SELECT 3: tuples");
    is_int(PQntuples(r), 3, "SELECT 3: three rows");
    is_str(PQgetvalue(r, 2, 0), "3", "SELECT 3: last value");
    is_str(PQfname(r, 0), "n", "column name");
    is_int(PQftype(r, 0), 23, "column type int4");
    is_int(PQfsize(r, 0), 4, "column typlen 4");
    is_str(PQcmdStatus(r), "SELECT 3", "SELECT tag");
    is_str(PQcmdTuples(r), "3", "cmdTuples");
    PQclear(r);

    r = PQexec(c, "CREATE SOURCE x");
    is_int(PQresultStatus(r), PGRES_COMMAND_OK, "CREATE: command ok");
    is_str(PQcmdStatus(r), "CREATE SOURCE", "CREATE tag");
    PQclear(r);

    r = PQexec(c, "");
    is_int(PQresultStatus(r), PGRES_EMPTY_QUERY, "empty query");
    PQclear(r);
    r = PQexec(c, " ; ;");
    is_int(PQresultStatus(r), PGRES_EMPTY_QUERY, "only semicolons: empty query");
    PQclear(r);

    r = PQexec(c, "NULLS");
    ok(PQntuples(r) == 1 && !PQgetisnull(r, 0, 0) && PQgetisnull(r, 0, 1), "SQL NULL in a row");
    is_str(PQgetvalue(r, 0, 0), "x", "non-null next to NULL");
    PQclear(r);
}

static void test_multi(PGconn *c)
{
    ok(PQsendQuery(c, "SELECT 1; SELECT 2; CREATE x"), "send multi-statement query");
    PGresult *r;
    int i = 0, rows[3] = {-1, -1, -1}, st[3] = {0};
    while ((r = PQgetResult(c))) {
        if (i < 3) {
            rows[i] = PQntuples(r);
            st[i] = PQresultStatus(r);
        }
        i++;
        PQclear(r);
    }
    is_int(i, 3, "three results");
    ok(rows[0] == 1 && rows[1] == 2 && st[2] == PGRES_COMMAND_OK, "each statement's result in order");

    ok(PQsendQuery(c, "SELECT 1; ERR; SELECT 5"), "send query with an error in the middle");
    i = 0;
    int last = 0;
    while ((r = PQgetResult(c))) {
        i++;
        last = PQresultStatus(r);
        PQclear(r);
    }
    is_int(i, 2, "statements after the error do not run");
    is_int(last, PGRES_FATAL_ERROR, "second result is the error");
}

static void test_error(PGconn *c)
{
    PGresult *r = PQexec(c, "ERR");
    is_int(PQresultStatus(r), PGRES_FATAL_ERROR, "ERR fails");
    is_str(PQresultErrorField(r, PG_DIAG_SQLSTATE), "42601", "SQLSTATE");
    is_str(PQresultErrorField(r, PG_DIAG_STATEMENT_POSITION), "3", "position");
    is_str(PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED), "ERROR", "severity");
    is_str(PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL), "some detail", "detail");
    is_str(PQresultErrorField(r, PG_DIAG_MESSAGE_HINT), "some hint", "hint");
    PQclear(r);
    r = PQexec(c, "SELECT 1");
    is_int(PQntuples(r), 1, "connection usable after an error");
    PQclear(r);
}

static char notice_seen[256];
static void on_notice(void *arg, const PGresult *r)
{
    snprintf(notice_seen, sizeof notice_seen, "%s",
             PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY));
}

static void test_notice_copy(PGconn *c)
{
    PQsetNoticeReceiver(c, on_notice, NULL);
    PGresult *r = PQexec(c, "NOTICE");
    is_str(notice_seen, "hello", "notice delivered");
    is_str(PQcmdStatus(r), "DO", "notice statement completes");
    PQclear(r);

    r = PQexec(c, "COPY");
    is_int(PQresultStatus(r), PGRES_COPY_OUT, "COPY OUT starts");
    PQclear(r);
    char *line, got[64] = "";
    int n, lines = 0;
    while ((n = PQgetCopyData(c, &line, 0)) > 0) {
        strncat(got, line, (size_t)n < sizeof got - strlen(got) - 1 ? (size_t)n : 0);
        lines++;
        PQfreemem(line);
    }
    is_int(n, -1, "COPY OUT ends");
    is_int(lines, 3, "three CopyData");
    is_str(got, "1\n2\n3\n", "CopyData payloads");
    r = PQgetResult(c);
    is_str(PQcmdStatus(r), "SUBSCRIBE", "COPY tag");
    PQclear(r);
    ok(PQgetResult(c) == NULL, "COPY done");
}

static void test_extended(PGconn *c)
{
    const char *vals[] = {"hello", NULL};
    PGresult *r = PQexecParams(c, "ECHO $1 $2", 2, NULL, vals, NULL, NULL, 0);
    is_int(PQresultStatus(r), PGRES_TUPLES_OK, "PQexecParams ok");
    ok(PQnfields(r) == 2 && PQntuples(r) == 1, "one row of two params");
    is_str(PQgetvalue(r, 0, 0), "hello", "text param echoed");
    ok(PQgetisnull(r, 0, 1), "NULL param echoed");
    is_str(PQfname(r, 1), "p2", "Describe portal gave the columns");
    PQclear(r);

    /* binary parameters, decoded to text by the server */
    Oid types[] = {23, 20, 16, 701, 21, 17};
    unsigned char i4[4], i8[8], b = 1, f8[8], i2[2] = {0xff, 0xf9}, by[3] = {0, 0xab, 'z'};
    put32(i4, 42);
    int64_t big = -9000000000LL;
    for (int i = 0; i < 8; i++)
        i8[i] = (unsigned char)((uint64_t)big >> (56 - 8 * i));
    double d = 1.5;
    uint64_t u;
    memcpy(&u, &d, 8);
    for (int i = 0; i < 8; i++)
        f8[i] = (unsigned char)(u >> (56 - 8 * i));
    const char *bv[] = {(char *)i4, (char *)i8, (char *)&b, (char *)f8, (char *)i2, (char *)by};
    int bl[] = {4, 8, 1, 8, 2, 3}, bf[] = {1, 1, 1, 1, 1, 1};
    r = PQexecParams(c, "ECHO $1 $2 $3 $4 $5 $6", 6, types, bv, bl, bf, 0);
    is_int(PQresultStatus(r), PGRES_TUPLES_OK, "binary params accepted");
    if (PQntuples(r) == 1) {
        is_str(PQgetvalue(r, 0, 0), "42", "binary int4");
        is_str(PQgetvalue(r, 0, 1), "-9000000000", "binary int8");
        is_str(PQgetvalue(r, 0, 2), "t", "binary bool");
        is_str(PQgetvalue(r, 0, 3), "1.5", "binary float8");
        is_str(PQgetvalue(r, 0, 4), "-7", "binary int2");
        is_str(PQgetvalue(r, 0, 5), "\\x00ab7a", "binary bytea as hex");
    }
    PQclear(r);

    /* numeric in Postgres's binary form: 12345.678 is ndigits 3, weight 1,
     * sign +, dscale 3, digits 1 2345 6780; -0.0001 is weight -1, digit 1. */
    static const unsigned char n1[] = {0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1a, 0x7c};
    static const unsigned char n2[] = {0, 1, 0xff, 0xff, 0x40, 0, 0, 4, 0, 1};
    static const unsigned char n3[] = {0, 0, 0, 0, 0xc0, 0, 0, 0};   /* NaN */
    Oid nt[] = {1700, 1700};
    const char *nv[] = {(const char *)n1, (const char *)n2};
    int nl[] = {sizeof n1, sizeof n2}, nf[] = {1, 1};
    r = PQexecParams(c, "ECHO $1 $2", 2, nt, nv, nl, nf, 0);
    is_int(PQresultStatus(r), PGRES_TUPLES_OK, "binary numeric params accepted");
    if (PQntuples(r) == 1) {
        is_str(PQgetvalue(r, 0, 0), "12345.678", "binary numeric");
        is_str(PQgetvalue(r, 0, 1), "-0.0001", "binary negative numeric below one");
    }
    PQclear(r);
    nv[0] = (const char *)n3;
    nl[0] = sizeof n3;
    r = PQexecParams(c, "ECHO $1", 1, nt, nv, nl, nf, 0);
    is_str(PQresultErrorField(r, PG_DIAG_SQLSTATE), "0A000", "binary numeric NaN: not supported");
    PQclear(r);

    r = PQexecParams(c, "ECHO $1", 1, NULL, vals, NULL, NULL, 1);
    ok(PQresultStatus(r) == PGRES_TUPLES_OK && PQfformat(r, 0) == 1 && PQgetlength(r, 0, 0) == (int)strlen(vals[0]) &&
           memcmp(PQgetvalue(r, 0, 0), vals[0], strlen(vals[0])) == 0,
       "binary result of a text column: its bytes");
    PQclear(r);
    r = PQexecParams(c, "SELECT 2", 0, NULL, NULL, NULL, NULL, 1);
    ok(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 2 && PQgetlength(r, 1, 0) == 4 &&
           memcmp(PQgetvalue(r, 1, 0), "\0\0\0\2", 4) == 0,
       "binary result of an int4 column: four big-endian bytes");
    PQclear(r);

    r = PQexecParams(c, "ECHO $1 $2", 1, NULL, vals, NULL, NULL, 0);
    is_str(PQresultErrorField(r, PG_DIAG_SQLSTATE), "08P01", "too few parameters refused");
    PQclear(r);
    ok(PQstatus(c) == CONNECTION_OK, "still connected after extended errors");

    r = PQexecParams(c, "SELECT 2", 0, NULL, NULL, NULL, NULL, 0);
    is_int(PQntuples(r), 2, "extended SELECT without params");
    PQclear(r);
    r = PQexecParams(c, "", 0, NULL, NULL, NULL, NULL, 0);
    is_int(PQresultStatus(r), PGRES_EMPTY_QUERY, "extended empty query");
    PQclear(r);
    r = PQexecParams(c, "ECHO '$7' $1 -- $9", 1, NULL, vals, NULL, NULL, 0);
    is_int(PQresultStatus(r), PGRES_TUPLES_OK, "$n in literals and comments is not a parameter");
    PQclear(r);
}

static void test_prepared(PGconn *c)
{
    PGresult *r = PQprepare(c, "s1", "ECHO $1", 0, NULL);
    is_int(PQresultStatus(r), PGRES_COMMAND_OK, "PQprepare");
    PQclear(r);
    r = PQdescribePrepared(c, "s1");
    is_int(PQnparams(r), 1, "describe: one param");
    is_int(PQparamtype(r, 0), 25, "undeclared param reported as text");
    is_int(PQnfields(r), 1, "describe: one column");
    is_str(PQfname(r, 0), "p1", "describe: column name");
    PQclear(r);
    const char *vals[] = {"x"};
    r = PQexecPrepared(c, "s1", 1, vals, NULL, NULL, 0);
    is_str(PQgetvalue(r, 0, 0), "x", "PQexecPrepared");
    PQclear(r);
    r = PQexecPrepared(c, "s1", 1, (const char *[]){"y"}, NULL, NULL, 0);
    is_str(PQgetvalue(r, 0, 0), "y", "PQexecPrepared again");
    PQclear(r);

    r = PQprepare(c, "s1", "ECHO $1", 0, NULL);
    is_str(PQresultErrorField(r, PG_DIAG_SQLSTATE), "42P05", "duplicate statement name");
    PQclear(r);
    r = PQexecPrepared(c, "nope", 0, NULL, NULL, NULL, 0);
    is_str(PQresultErrorField(r, PG_DIAG_SQLSTATE), "26000", "unknown statement");
    PQclear(r);

    Oid t8[] = {20};
    r = PQprepare(c, "s2", "ECHO $1 $2", 1, t8);
    PQclear(r);
    r = PQdescribePrepared(c, "s2");
    ok(PQnparams(r) == 2 && PQparamtype(r, 0) == 20 && PQparamtype(r, 1) == 25,
       "declared and undeclared param types");
    PQclear(r);

    r = PQprepare(c, "s3", "CREATE z", 0, NULL);
    PQclear(r);
    r = PQdescribePrepared(c, "s3");
    ok(PQresultStatus(r) == PGRES_COMMAND_OK && PQnfields(r) == 0, "NoData for a statement without rows");
    PQclear(r);
    r = PQexecPrepared(c, "s3", 0, NULL, NULL, NULL, 0);
    is_str(PQcmdStatus(r), "CREATE SOURCE", "execute statement without rows");
    PQclear(r);

    r = PQprepare(c, "s4", "SELECT 4", 0, NULL);
    PQclear(r);
    r = PQdescribePrepared(c, "s4");
    ok(PQnparams(r) == 0 && PQftype(r, 0) == 23, "describe SELECT");
    PQclear(r);
    r = PQexecPrepared(c, "s4", 0, NULL, NULL, NULL, 0);
    is_int(PQntuples(r), 4, "execute SELECT");
    PQclear(r);

}

/* Parameter types the engine infers: described, and used to decode a binary
 * parameter the client did not declare; asked for only when needed. */
static void test_param_types(PGconn *c)
{
    int before = atomic_load(&n_inferred);
    PGresult *r = PQexecParams(c, "ECHO TYPED $1", 1, NULL, (const char *[]){"7"}, NULL, NULL, 0);
    is_str(PQgetvalue(r, 0, 0), "7", "text parameters: Parse, Bind, Execute");
    PQclear(r);
    is_int(atomic_load(&n_inferred), before, "no inference for text parameters that were never described");

    Oid types[] = {0, 25};
    r = PQprepare(c, "t1", "ECHO TYPED $1 $2 $3", 2, types);
    PQclear(r);
    r = PQdescribePrepared(c, "t1");
    ok(PQnparams(r) == 3 && PQparamtype(r, 0) == 20 && PQparamtype(r, 1) == 25 && PQparamtype(r, 2) == 20,
       "describe: inferred types for undeclared (and declared 0) parameters, declared ones kept");
    PQclear(r);
    r = PQdescribePrepared(c, "t1");
    PQclear(r);
    is_int(atomic_load(&n_inferred), before + 1, "inferred once per statement");

    /* A binary bigint for an undeclared parameter, never described: Bind asks. */
    r = PQprepare(c, "t2", "ECHO TYPED $1", 0, NULL);
    PQclear(r);
    unsigned char be[8] = {0, 0, 0, 0, 0, 0, 0x01, 0x02};
    r = PQexecPrepared(c, "t2", 1, (const char *[]){(const char *)be}, (const int[]){8}, (const int[]){1}, 0);
    ok(PQresultStatus(r) == PGRES_TUPLES_OK && strcmp(PQgetvalue(r, 0, 0), "258") == 0,
       "a binary parameter decoded by its inferred type");
    PQclear(r);
}

/* After an error in the extended protocol the server skips to Sync, but a
 * Flush still sends the ErrorResponse (asyncpg sends Parse, Describe, Flush
 * and waits for the answer before any Sync). */
static void test_error_flush(int port)
{
    int fd = raw_connect(port);
    ok(fd >= 0 && raw_startup(fd, "weir") == 0, "flush after error: connected");
    unsigned char parse[] = {0, 'E', 'R', 'R', 0, 0, 0};
    unsigned char describe[] = {'S', 0};
    send_msg(fd, 'P', parse, sizeof parse);
    send_msg(fd, 'D', describe, sizeof describe);
    send_msg(fd, 'H', NULL, 0);
    char body[1024];
    int t, seen = 0;
    while ((t = read_msg(fd, body, sizeof body)) >= 0 && t != 'E')
        seen = seen * 256 + t;
    ok(t == 'E' && seen == ('1' * 256 + 't'), "ParseComplete, ParameterDescription, then the error, before Sync");
    send_msg(fd, 'S', NULL, 0);
    t = read_msg(fd, body, sizeof body);
    is_int(t, 'Z', "Sync: ReadyForQuery");
    close(fd);
}

typedef struct {
    PGconn *c;
    char state[8];
    double secs;
} SleepArg;

static void *sleeper(void *arg)
{
    SleepArg *a = arg;
    double t0 = now_s();
    PGresult *r = PQexec(a->c, "SLEEP");
    a->secs = now_s() - t0;
    const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    snprintf(a->state, sizeof a->state, "%s", s ? s : "");
    PQclear(r);
    return NULL;
}

static void test_cancel(int port)
{
    PGconn *c = connect_as(port, "alice");
    SleepArg a = {c, "", 0};
    pthread_t t;
    pthread_create(&t, NULL, sleeper, &a);
    usleep(200 * 1000);
    PGcancel *cn = PQgetCancel(c);
    char eb[256];
    ok(PQcancel(cn, eb, sizeof eb), "PQcancel sent");
    PQfreeCancel(cn);
    pthread_join(t, NULL);
    is_str(a.state, "57014", "long query cancelled");
    ok(a.secs < 5, "cancel took effect promptly");
    PGresult *r = PQexec(c, "SELECT 1");
    is_int(PQntuples(r), 1, "connection usable after cancel");
    PQclear(r);
    PQfinish(c);
}

static void test_limit(void)
{
    SrvConfig cfg = {.port = 0, .max_connections = 2};
    SrvServer *s;
    WError e;
    werr_clear(&e);
    ok(srv_server_start(&cfg, &fake, &s, &e) == 0, "second server starts");
    int port = srv_server_port(s);
    PGconn *c1 = connect_as(port, "a"), *c2 = connect_as(port, "b"), *c3 = connect_as(port, "c");
    ok(PQstatus(c1) == CONNECTION_OK && PQstatus(c2) == CONNECTION_OK, "two connections within the limit");
    ok(PQstatus(c3) == CONNECTION_BAD && strstr(PQerrorMessage(c3), "too many clients"),
       "third connection refused");
    PQfinish(c3);
    PQfinish(c1);
    PGconn *c4 = NULL;
    for (int i = 0; i < 50; i++) {
        c4 = connect_as(port, "d");
        if (PQstatus(c4) == CONNECTION_OK)
            break;
        PQfinish(c4);
        c4 = NULL;
        usleep(20 * 1000);
    }
    ok(c4 != NULL, "a slot frees when a client leaves");
    /* Stop with connections open: must not hang, must close sessions. */
    int closes0 = atomic_load(&n_close);
    srv_server_stop(s);
    ok(atomic_load(&n_close) - closes0 >= 2, "stop closes open sessions");
    PGresult *r = PQexec(c2, "SELECT 1");
    ok(PQresultStatus(r) != PGRES_TUPLES_OK, "clients see the server gone");
    PQclear(r);
    PQfinish(c2);
    if (c4)
        PQfinish(c4);

    SrvConfig busy = {.port = port};
    SrvServer *s1, *s2;
    werr_clear(&e);
    srv_server_start(&busy, &fake, &s1, &e);
    werr_clear(&e);
    ok(srv_server_start(&busy, &fake, &s2, &e) < 0 && e.set, "port in use reported");
    srv_server_stop(s1);
}

/* ---- SCRAM-SHA-256 (the proofs are crypto.c's; the exchange is pgwire's) ---- */

static char alice_verifier[SCRAM_VERIFIER_MAX];

static int f_verifier(void *ctx, const char *user, char *out, size_t n)
{
    if (strcmp(user, "alice") != 0)
        return -1;
    snprintf(out, n, "%s", alice_verifier);
    return 0;
}

static PGconn *connect_pw(int port, const char *user, const char *pw)
{
    char ci[256];
    snprintf(ci, sizeof ci, "host=127.0.0.1 port=%d user=%s password=%s dbname=weir connect_timeout=5", port, user,
             pw);
    return PQconnectdb(ci);
}

/* Sends a StartupMessage for user and reads the first reply's type. */
static int scram_startup(int fd, const char *user)
{
    unsigned char b[256];
    size_t n = 8;
    n += (size_t)sprintf((char *)b + n, "user") + 1;
    n += (size_t)sprintf((char *)b + n, "%s", user) + 1;
    b[n++] = 0;
    put32(b, (uint32_t)n);
    put32(b + 4, 196608);
    if (write(fd, b, n) != (ssize_t)n)
        return -1;
    unsigned char t;
    return read(fd, &t, 1) == 1 ? t : -1;
}

static bool reply_has(int fd, const char *needle)
{
    char buf[4096];
    ssize_t n, got = 0;
    while (got < (ssize_t)sizeof buf - 1 && (n = read(fd, buf + got, sizeof buf - 1 - (size_t)got)) > 0)
        got += n;
    buf[got > 0 ? got : 0] = 0;
    for (ssize_t i = 0; i < got; i++)
        if (!buf[i])
            buf[i] = ' ';
    return strstr(buf, needle) != NULL;
}

static void sasl_initial(int fd, const char *mech, const char *data)
{
    unsigned char b[512];
    size_t n = 5;
    n += (size_t)sprintf((char *)b + n, "%s", mech) + 1;
    put32(b + n, (uint32_t)strlen(data));
    n += 4;
    memcpy(b + n, data, strlen(data));
    n += strlen(data);
    b[0] = 'p';
    put32(b + 1, (uint32_t)(n - 1));
    ok(write(fd, b, n) == (ssize_t)n, "SASLInitialResponse sent");
}

static void test_scram(void)
{
    WError e;
    werr_clear(&e);
    ok(crypto_scram_verifier("pw", alice_verifier, sizeof alice_verifier, &e) == 0 &&
           crypto_scram_is_verifier(alice_verifier),
       "verifier made and recognised");
    ok(!crypto_scram_is_verifier("pw") && !crypto_scram_is_verifier("SCRAM-SHA-256$4096:abc"), "non-verifiers refused");
    SrvEngine eng = fake;
    eng.user_verifier = f_verifier;
    SrvConfig cfg = {.port = 0, .auth = SRV_AUTH_SCRAM};
    SrvServer *s;
    ok(srv_server_start(&cfg, &eng, &s, &e) == 0, "SCRAM server starts");
    int port = srv_server_port(s);
    PGconn *c = connect_pw(port, "alice", "pw");
    ok(PQstatus(c) == CONNECTION_OK, "right password");
    PQfinish(c);
    c = connect_pw(port, "alice", "wrong");
    ok(PQstatus(c) == CONNECTION_BAD && strstr(PQerrorMessage(c), "password authentication failed for user \"alice\""),
       "wrong password");
    PQfinish(c);
    c = connect_pw(port, "mallory", "pw");
    ok(PQstatus(c) == CONNECTION_BAD && strstr(PQerrorMessage(c), "password authentication failed for user \"mallory\""),
       "unknown user looks the same");
    PQfinish(c);

    int fd = raw_connect(port);
    ok(scram_startup(fd, "alice") == 'R', "AuthenticationSASL");
    unsigned char skip[64];
    ok(read(fd, skip, 23) == 23, "mechanism list read");
    sasl_initial(fd, "SCRAM-SHA-256-PLUS", "p=tls-server-end-point,,n=,r=abc");
    ok(reply_has(fd, "28000"), "unoffered mechanism: 28000");
    close(fd);
    fd = raw_connect(port);
    scram_startup(fd, "alice");
    ok(read(fd, skip, 23) == 23, "mechanism list read");
    sasl_initial(fd, "SCRAM-SHA-256", "p=tls-server-end-point,,n=,r=abc");
    ok(reply_has(fd, "channel binding"), "channel binding asked for: refused");
    close(fd);
    fd = raw_connect(port);
    scram_startup(fd, "alice");
    ok(read(fd, skip, 23) == 23, "mechanism list read");
    sasl_initial(fd, "SCRAM-SHA-256", "n,,n=,r=abc,x=ext");
    ok(reply_has(fd, "08P01"), "unknown extension: 08P01");
    close(fd);
    fd = raw_connect(port);
    scram_startup(fd, "alice");
    ok(read(fd, skip, 23) == 23, "mechanism list read");
    unsigned char q[] = {'Q', 0, 0, 0, 13, 'S', 'E', 'L', 'E', 'C', 'T', ' ', '1', 0};
    ok(write(fd, q, sizeof q) == (ssize_t)sizeof q, "query instead of SASL");
    ok(reply_has(fd, "08P01"), "a query before authentication: 08P01");
    close(fd);
    srv_server_stop(s);

    /* Default mode: loopback is trusted even with SCRAM available. */
    SrvConfig trust = {.port = 0};
    ok(srv_server_start(&trust, &eng, &s, &e) == 0, "trust server starts");
    c = connect_pw(srv_server_port(s), "anyone", "x");
    ok(PQstatus(c) == CONNECTION_OK, "loopback trusted by default");
    PQfinish(c);
    srv_server_stop(s);
}

/* Result format codes that fit neither rule (one code, or one per column):
 * 08P01 at Execute, and Describe of a binary portal reports format 1. */
static void test_result_formats(int port)
{
    int fd = raw_connect(port);
    ok(fd >= 0 && raw_startup(fd, "alice") == 0, "formats: startup");
    unsigned char parse[] = {0, 'S', 'E', 'L', 'E', 'C', 'T', ' ', '2', 0, 0, 0};
    unsigned char bind2[] = {0, 0, 0, 0, 0, 0, 0, 2, 0, 1, 0, 1};        /* 2 result formats, 1 column */
    unsigned char bind1[] = {0, 0, 0, 0, 0, 0, 0, 1, 0, 1};              /* one code: binary for all */
    unsigned char describe[] = {'P', 0}, execute[] = {0, 0, 0, 0, 0};
    send_msg(fd, 'P', parse, sizeof parse);
    send_msg(fd, 'B', bind2, sizeof bind2);
    send_msg(fd, 'E', execute, sizeof execute);
    send_msg(fd, 'S', NULL, 0);
    char body[2048];
    int t;
    const char *code = "";
    while ((t = read_msg(fd, body, sizeof body)) >= 0 && t != 'Z')
        if (t == 'E')
            code = strcmp(error_code(body, sizeof body), "08P01") == 0 ? "08P01" : "other";
    is_str(code, "08P01", "two result formats for one column: 08P01");
    send_msg(fd, 'P', parse, sizeof parse);
    send_msg(fd, 'B', bind1, sizeof bind1);
    send_msg(fd, 'D', describe, sizeof describe);
    send_msg(fd, 'S', NULL, 0);
    int fmt = -1;
    while ((t = read_msg(fd, body, sizeof body)) >= 0 && t != 'Z')
        if (t == 'T') {
            /* count, then name "n\0", table oid, attnum, type oid, typlen, typmod, format */
            const unsigned char *f = (const unsigned char *)body + 2 + 2 + 4 + 2 + 4 + 2 + 4;
            fmt = f[0] << 8 | f[1];
        }
    is_int(fmt, 1, "Describe of a binary portal: format 1 in RowDescription");
    if (fd >= 0)
        close(fd);
}

static void test_hostile(int port)
{
    unsigned char b[64];
    int fd;

    fd = raw_connect(port);
    put32(b, 0x7fffffff);
    put32(b + 4, 196608);
    send_all(fd, b, 8);
    ok(expect_error_close(fd, "08P01"), "oversize startup length");
    close(fd);

    fd = raw_connect(port);
    send_all(fd, "\0\0\0", 3);
    shutdown(fd, SHUT_WR);
    char ch;
    ok(recv(fd, &ch, 1, 0) == 0, "truncated startup: closed");
    close(fd);

    fd = raw_connect(port);
    put32(b, 8 + 5);
    put32(b + 4, 196608);
    memcpy(b + 8, "user", 5);   /* key without value or terminator */
    send_all(fd, b, 13);
    ok(expect_error_close(fd, "08P01"), "startup parameters without terminator");
    close(fd);

    fd = raw_connect(port);
    put32(b, 8);
    put32(b + 4, 80877103);
    send_all(fd, b, 8);
    ok(recv(fd, &ch, 1, 0) == 1 && ch == 'N', "SSLRequest answered N");
    ok(raw_startup(fd, "raw") == 0, "startup after SSLRequest");
    close(fd);

    fd = raw_connect(port);
    put32(b, 8);
    put32(b + 4, 2 << 16);
    send_all(fd, b, 8);
    ok(expect_error_close(fd, "0A000"), "protocol 2 refused");
    close(fd);

    fd = raw_connect(port);
    raw_startup(fd, "raw");
    b[0] = 'Q';
    put32(b + 1, 0x7fffffff);
    send_all(fd, b, 5);
    ok(expect_error_close(fd, "08P01"), "oversize message length");
    close(fd);

    fd = raw_connect(port);
    raw_startup(fd, "raw");
    send_all(fd, "\x01\x02\x03\x04\x05garbage", 12);
    ok(expect_error_close(fd, "08P01"), "garbage bytes");
    close(fd);

    fd = raw_connect(port);
    raw_startup(fd, "raw");
    send_all(fd, "Q\0\0\0\x02", 5);
    ok(expect_error_close(fd, "08P01"), "message length below 4");
    close(fd);

    fd = raw_connect(port);
    raw_startup(fd, "raw");
    send_msg(fd, 'Q', "abcd", 4);
    ok(expect_error_close(fd, "08P01"), "query without terminator");
    close(fd);

    fd = raw_connect(port);
    raw_startup(fd, "raw");
    send_msg(fd, 'P', "s\0SELECT", 8);
    ok(expect_error_close(fd, "08P01"), "Parse with truncated string");
    close(fd);

    fd = raw_connect(port);
    raw_startup(fd, "raw");
    send_msg(fd, 'P', "\0SELECT 1\0\x7f\xff", 12);
    ok(expect_error_close(fd, "08P01"), "Parse claiming 32767 types");
    close(fd);

    fd = raw_connect(port);
    raw_startup(fd, "raw");
    send_msg(fd, 'B', "\0\0\0\0\x75\x30\0\0\0\x05" "ab", 12);
    ok(expect_error_close(fd, "08P01"), "Bind claiming 30000 params");
    close(fd);

    fd = raw_connect(port);
    raw_startup(fd, "raw");
    send_msg(fd, 'D', "Xname", 6);
    ok(expect_error_close(fd, "08P01"), "Describe with bad kind");
    close(fd);

    /* Extended-protocol error: the rest is skipped up to Sync. */
    fd = raw_connect(port);
    raw_startup(fd, "raw");
    send_msg(fd, 'B', "\0nope\0\0\0\0\0\0\0", 12);
    send_msg(fd, 'E', "\0\0\0\0\0", 5);
    send_msg(fd, 'S', "", 0);
    send_msg(fd, 'Q', "SELECT 1", 9);
    {
        char body[512];
        char seq[16] = "";
        int t, k = 0;
        while (k < 15 && (t = read_msg(fd, body, sizeof body)) >= 0) {
            seq[k++] = (char)t;
            if (t == 'Z' && strchr(seq, 'C'))
                break;
        }
        is_str(seq, "EZTDCZ", "error, skip to Sync, then a simple query");
    }
    close(fd);

    /* Close: a closed statement is gone. */
    fd = raw_connect(port);
    raw_startup(fd, "raw");
    send_msg(fd, 'P', "s\0CREATE z\0\0\0", 13);
    send_msg(fd, 'C', "Ss", 3);
    send_msg(fd, 'B', "\0s\0\0\0\0\0\0\0", 9);
    send_msg(fd, 'S', "", 0);
    {
        char body[512], seq[8] = "";
        int t, k = 0;
        while (k < 7 && (t = read_msg(fd, body, sizeof body)) >= 0) {
            seq[k++] = (char)t;
            if (t == 'Z')
                break;
        }
        is_str(seq, "13EZ", "Parse, Close, Bind of the closed statement fails");
    }
    close(fd);

    /* Seeded random junk after startup, many times: never a crash. */
    srand(7);
    int survived = 0;
    for (int i = 0; i < 100; i++) {
        fd = raw_connect(port);
        if (raw_startup(fd, "raw") < 0) {
            close(fd);
            continue;
        }
        unsigned char junk[300];
        size_t n = 1 + (size_t)(rand() % (int)sizeof junk);
        for (size_t j = 0; j < n; j++)
            junk[j] = (unsigned char)rand();
        if (i % 2 == 0) {       /* plausible type and small length, junk body */
            junk[0] = (unsigned char)"QPBDESHCXFdcf"[rand() % 13];
            put32(junk + 1, (uint32_t)(n > 5 ? n - 1 : 4));
            if (n < 5)
                n = 5;
        }
        send_all(fd, junk, n);
        shutdown(fd, SHUT_WR);
        char body[256];
        while (read_msg(fd, body, sizeof body) >= 0)
            ;
        close(fd);
        survived++;
    }
    is_int(survived, 100, "random junk connections");

    PGconn *c = connect_as(port, "alice");
    ok(PQstatus(c) == CONNECTION_OK, "libpq still connects after hostile clients");
    PGresult *r = PQexec(c, "SELECT 2");
    is_int(PQntuples(r), 2, "and queries work");
    PQclear(r);
    PQfinish(c);
}

static bool wait_gone(int before, double secs)
{
    double t0 = now_s();
    while (atomic_load(&n_gone) == before && now_s() - t0 < secs)
        usleep(10 * 1000);
    return atomic_load(&n_gone) > before;
}

/* A client that stops reading, or hangs up mid-statement, must not hold the
 * engine: the statement learns of it and stops, and others are served. */
static void test_slow_clients(void)
{
    SrvConfig cfg = {.port = 0, .send_timeout_ms = 300, .startup_timeout_ms = 300};
    SrvServer *s;
    WError e;
    werr_clear(&e);
    srv_server_start(&cfg, &fake, &s, &e);
    int port = srv_server_port(s);

    int before = atomic_load(&n_gone);
    int fd = raw_connect(port);
    raw_startup(fd, "raw");
    send_msg(fd, 'Q', "SELECT 100000000", 17);   /* and never read the rows */
    usleep(100 * 1000);
    PGconn *c = connect_as(port, "alice");
    PGresult *r = PQexec(c, "SELECT 2");
    is_int(PQntuples(r), 2, "others served while a client does not read");
    PQclear(r);
    ok(wait_gone(before, 10), "statement stops when its client stalls");
    close(fd);

    before = atomic_load(&n_gone);
    fd = raw_connect(port);
    raw_startup(fd, "raw");
    send_msg(fd, 'Q', "SLEEP", 6);
    usleep(50 * 1000);
    close(fd);
    double t0 = now_s();
    ok(wait_gone(before, 5) && now_s() - t0 < 2, "silent statement stops when its client hangs up");

    usleep(600 * 1000);
    r = PQexec(c, "SELECT 1");
    is_int(PQntuples(r), 1, "an idle session outlives the startup timeout");
    PQclear(r);

    fd = raw_connect(port);
    char ch;
    t0 = now_s();
    ok(recv(fd, &ch, 1, 0) == 0 && now_s() - t0 < 3, "a silent client is dropped at the startup timeout");
    close(fd);

    PQfinish(c);
    srv_server_stop(s);
}

/* A capture result (srv_result_capture_new): nothing is sent; the tag,
 * the notices and the error are recorded; rows and COPY are dropped. */
static void test_capture(void)
{
    SrvCapture cap;
    SrvResult *r = srv_result_capture_new(&cap);
    srv_result_notice(r, "first");
    srv_result_notice(r, "second");
    static const char *const names[] = {"a"};
    srv_result_columns(r, 1, names, NULL);
    const char *vals[] = {"1"};
    is_int(srv_result_row(r, vals, NULL), 0, "capture: a row is accepted and dropped");
    is_int(srv_result_copy_begin(r, 1), -1, "capture: COPY is refused (nobody reads it)");
    ok(!srv_result_cancelled(r), "capture: never cancelled");
    srv_result_complete(r, "CREATE TABLE");
    is_str(cap.tag, "CREATE TABLE", "capture: the tag");
    is_str(cap.notices.data, "first\nsecond", "capture: the notices, one per line");
    ok(!cap.err.set, "capture: no error yet");
    WError e;
    werr_clear(&e);
    werr(&e, "42P07", 3, "relation \"%s\" already exists", "t");
    srv_result_error(r, &e);
    srv_result_complete(r, "IGNORED");
    ok(cap.err.set && !strcmp(cap.err.sqlstate, "42P07") && cap.err.pos == 3, "capture: the error, with its position");
    is_str(cap.tag, "CREATE TABLE", "capture: nothing recorded after the error");
    srv_result_capture_free(r);
    buf_free(&cap.notices);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--serve") == 0) {
        SrvConfig cfg = {.port = atoi(argv[2]), .server_version = "15.0 (weir 0.1.0)"};
        SrvServer *s;
        WError e;
        werr_clear(&e);
        if (srv_server_start(&cfg, &fake, &s, &e) < 0) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
        printf("listening on %d\n", srv_server_port(s));
        fflush(stdout);
        pause();
        return 0;
    }

    test_capture();

    SrvConfig cfg = {.host = "127.0.0.1", .port = 0, .server_version = "15.0 (weir 0.1.0)"};
    SrvServer *s;
    WError e;
    werr_clear(&e);
    ok(srv_server_start(&cfg, &fake, &s, &e) == 0, "server starts on port 0");
    int port = srv_server_port(s);
    ok(port > 0, "port assigned");

    PGconn *c = connect_as(port, "alice");
    ok(PQstatus(c) == CONNECTION_OK, "libpq connects");
    if (PQstatus(c) != CONNECTION_OK) {
        diag("%s", PQerrorMessage(c));
        srv_server_stop(s);
        return tap_done();
    }
    is_int(PQserverVersion(c), 150000, "server_version parsed by libpq");
    is_str(PQparameterStatus(c, "application_name"), "tapp", "application_name reported");
    is_str(PQparameterStatus(c, "session_authorization"), "alice", "session_authorization");
    is_str(PQparameterStatus(c, "client_encoding"), "UTF8", "client_encoding");
    ok(PQbackendPID(c) != 0, "BackendKeyData");

    PGconn *bad = connect_as(port, "nobody");
    ok(PQstatus(bad) == CONNECTION_BAD && strstr(PQerrorMessage(bad), "does not exist"),
       "engine can refuse a session");
    PQfinish(bad);

    test_simple(c);
    test_multi(c);
    test_error(c);
    test_notice_copy(c);
    test_extended(c);
    test_prepared(c);
    test_param_types(c);
    PQfinish(c);
    test_error_flush(port);
    test_cancel(port);
    test_result_formats(port);
    test_hostile(port);
    test_limit();
    test_slow_clients();
    test_scram();

    srv_server_stop(s);
    is_int(atomic_load(&n_open), atomic_load(&n_close), "every session opened was closed");
    return tap_done();
}
