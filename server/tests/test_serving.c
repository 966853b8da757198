/*
 * test_serving.c: SUBSCRIBE over pgwire and the HTTP endpoint, end to end.
 *
 * Starts `weir broker` and `weir serve` on free loopback ports (the weir
 * executable is argv[1]), creates a source and a view, then:
 *   - binary format (libpq resultFormat 1, binary parameters) for every
 *     common type, NULLs and negative values;
 *   - SUBSCRIBE v WITH (progress = true) over libpq (COPY OUT): the snapshot,
 *     a change after an INSERT (retraction + insertion, same epoch), the
 *     progress row for that epoch, then a CancelRequest ends it with 57014;
 *   - COPY (SUBSCRIBE v) TO STDOUT, ended by DROP MATERIALIZED VIEW (55000);
 *   - GET /metrics (exposition format, a counter that moves), /api/views,
 *     /api/views/v (JSON, checked by python3 when present), the SSE stream
 *     (snapshot, then a change and a progress event; a vanished client frees
 *     its subscription), 404/405/413, POST /api/sql refused (403) without
 *     --http-sql and answering rows and errors with it.
 * TAP output.
 */
#include <libpq-fe.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"

static const char *weir;
static char tmpdir[256], datadir[300];
static int kport, pport, hport;
static pid_t broker_pid, server_pid;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    socklen_t len = sizeof a;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &len))
        exit(2);
    close(fd);
    return ntohs(a.sin_port);
}

static int tcp_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

static pid_t spawn(char *const argv[], const char *log)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    int nul = open("/dev/null", O_RDONLY);
    dup2(nul, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(argv[0], argv);
    _exit(127);
}

static int stop(pid_t *pid)
{
    int st = 0;
    if (*pid <= 0)
        return 0;
    kill(*pid, SIGTERM);
    double end = now_s() + 10;
    while (waitpid(*pid, &st, WNOHANG) != *pid) {
        if (now_s() > end) {
            kill(*pid, SIGKILL);
            waitpid(*pid, &st, 0);
            break;
        }
        usleep(20000);
    }
    *pid = 0;
    return st;
}

static PGconn *connect_pg(double timeout_s)
{
    char ci[200];
    snprintf(ci, sizeof ci, "host=127.0.0.1 port=%d dbname=weir user=weir sslmode=disable", pport);
    double end = now_s() + timeout_s;
    for (;;) {
        PGconn *c = PQconnectdb(ci);
        if (PQstatus(c) == CONNECTION_OK)
            return c;
        PQfinish(c);
        if (now_s() > end)
            return NULL;
        usleep(100000);
    }
}

static int start_server(bool http_sql)
{
    char port[16], http[16], log[320];
    snprintf(port, sizeof port, "%d", pport);
    snprintf(http, sizeof http, "%d", hport);
    snprintf(log, sizeof log, "%s/server.log", tmpdir);
    char kafka[64];
    snprintf(kafka, sizeof kafka, "127.0.0.1:%d", kport);
    char *argv[] = {(char *)weir, "serve", "--data-dir", datadir, "--port", port, "--http-port", http,
                    "--kafka", kafka, "--no-broker", http_sql ? "--http-sql" : NULL, NULL};
    server_pid = spawn(argv, log);
    PGconn *c = connect_pg(20);
    if (!c)
        return -1;
    PQfinish(c);
    return 0;
}

static bool exec_ok(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (!ok)
        diag("%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    return ok;
}

/* ---- HTTP ------------------------------------------------------------------ */

/* One request; returns the status code and the whole response in resp. */
static int http(const char *method, const char *path, const char *extra_headers, const char *body, char *resp,
                size_t cap)
{
    int fd = tcp_connect(hport);
    if (fd < 0)
        return -1;
    char req[4096];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s", method, path,
                     extra_headers ? extra_headers : "");
    if (body)
        n += snprintf(req + n, sizeof req - (size_t)n, "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
    else
        n += snprintf(req + n, sizeof req - (size_t)n, "\r\n");
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    ssize_t k;
    while (got + 1 < cap && (k = read(fd, resp + got, cap - 1 - got)) > 0)
        got += (size_t)k;
    resp[got] = 0;
    close(fd);
    int status = 0;
    sscanf(resp, "HTTP/1.%*d %d", &status);
    return status;
}

static const char *http_body(const char *resp)
{
    const char *p = strstr(resp, "\r\n\r\n");
    return p ? p + 4 : "";
}

/* The value of a sample line "name value" in a metrics text, or -1. */
static double metric(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; (p = strstr(p, name)); p += n)
        if ((p == text || p[-1] == '\n') && p[n] == ' ')
            return atof(p + n + 1);
    return -1;
}

static bool json_valid(const char *doc)
{
    if (access("/usr/bin/python3", X_OK) != 0)
        return true; /* nothing to check with */
    char path[320];
    snprintf(path, sizeof path, "%s/doc.json", tmpdir);
    FILE *f = fopen(path, "w");
    fputs(doc, f);
    fclose(f);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' %s", path);
    return system(cmd) == 0;
}

/* Reads from fd into buf (appending) until `want` appears or timeout. */
static bool read_until(int fd, char *buf, size_t cap, size_t *len, const char *want, double timeout_s)
{
    double end = now_s() + timeout_s;
    while (!strstr(buf, want)) {
        double left = end - now_s();
        if (left <= 0 || *len + 1 >= cap)
            return false;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
            continue;
        ssize_t k = read(fd, buf + *len, cap - 1 - *len);
        if (k <= 0)
            return false;
        *len += (size_t)k;
        buf[*len] = 0;
    }
    return true;
}

/* ---- COPY OUT ---------------------------------------------------------------- */

typedef struct Lines {
    char text[65536];
    size_t len;
} Lines;

/* Reads COPY rows into l until `want` appears (a whole line, with its
 * newline, matching a substring) or timeout. Returns false at the end of
 * the COPY or on timeout. */
static bool copy_until(PGconn *c, Lines *l, const char *want, double timeout_s)
{
    double end = now_s() + timeout_s;
    while (!strstr(l->text, want)) {
        char *row;
        int n = PQgetCopyData(c, &row, 1);
        if (n > 0) {
            if (l->len + (size_t)n + 1 < sizeof l->text) {
                memcpy(l->text + l->len, row, (size_t)n);
                l->len += (size_t)n;
                l->text[l->len] = 0;
            }
            PQfreemem(row);
            continue;
        }
        if (n < 0)
            return false;
        double left = end - now_s();
        if (left <= 0)
            return false;
        struct pollfd p = {PQsocket(c), POLLIN, 0};
        poll(&p, 1, (int)(left * 1000) + 1);
        if (!PQconsumeInput(c))
            return false;
    }
    return true;
}

/* After the COPY ended: the statement's error SQLSTATE ("" if none). */
static const char *copy_result_state(PGconn *c, char *state, double timeout_s)
{
    char *row;
    double end = now_s() + timeout_s;
    int n;
    while ((n = PQgetCopyData(c, &row, 1)) >= 0 && now_s() < end) {
        if (n > 0) {
            PQfreemem(row);
            continue;
        }
        struct pollfd p = {PQsocket(c), POLLIN, 0};
        poll(&p, 1, 100);
        PQconsumeInput(c);
    }
    strcpy(state, "");
    PGresult *r;
    while ((r = PQgetResult(c))) {
        const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        if (s && !*state)
            snprintf(state, 6, "%s", s);
        PQclear(r);
    }
    return state;
}

/* ---- the test --------------------------------------------------------------------- */

/* ---- binary format ---------------------------------------------------------- */

/* The value in binary result cell (row, col) as lowercase hex. */
static const char *cell_hex(const PGresult *r, int row, int col, char *out, size_t cap)
{
    const unsigned char *v = (const unsigned char *)PQgetvalue(r, row, col);
    int n = PQgetlength(r, row, col);
    out[0] = 0;
    for (int i = 0; i < n && (size_t)(2 * i + 2) < cap; i++)
        snprintf(out + 2 * i, 3, "%02x", v[i]);
    return out;
}

static int unhex(const char *h, char *out)
{
    int n = 0;
    for (; h[0] && h[1]; h += 2) {
        unsigned v;
        sscanf(h, "%2x", &v);
        out[n++] = (char)v;
    }
    return n;
}

/* Columns of bt after k, their OIDs, and the binary form Postgres gives the
 * row inserted as text below (negative values and a pre-2000, pre-1970
 * timestamp on purpose: sign extension and the epoch shift). */
static const char *const BT_COLS = "b, s, i, r, d, x, y, dt, ts, tz, iv";
static const Oid BT_OIDS[11] = {16, 21, 23, 700, 701, 1043, 17, 1082, 1114, 1184, 1186};
static const char *const BT_HEX[11] = {
    "01", "fffd", "fffeee90", "bfc00000", "c002000000000000", "68c3a96c6c6f", "00ff",
    "ffffffff",                       /* 1999-12-31: day -1 */
    "fffc96188bb60220",               /* 1969-07-20 20:17:40.5 */
    "0002b0d5d4e94000",               /* 2024-01-01 00:00:00+00 */
    "ffffffffffbb55e0" "00000003" "fffffff2",  /* -4.5 s, 3 days, -14 months */
};

static void test_binary(PGconn *c)
{
    ok(exec_ok(c, "CREATE TABLE bt (k BIGINT PRIMARY KEY, b BOOLEAN, s SMALLINT, i INT, r REAL, "
                  "d DOUBLE PRECISION, x TEXT, y BYTEA, dt DATE, ts TIMESTAMP, tz TIMESTAMPTZ, iv INTERVAL)") &&
       exec_ok(c, "INSERT INTO bt VALUES (-1, true, -3, -70000, -1.5, -2.25, 'h\xc3\xa9llo', '\\x00ff', "
                  "'1999-12-31', '1969-07-20 20:17:40.5', '2024-01-01 00:00:00+00', "
                  "'-1 years -2 mons 3 days -00:00:04.5')") &&
       exec_ok(c, "INSERT INTO bt (k) VALUES (2)"),
       "binary: table with every common type");

    /* Results in binary, selected by a binary int8 parameter. */
    char sql[200], hex[80];
    snprintf(sql, sizeof sql, "SELECT %s FROM bt WHERE k = $1", BT_COLS);
    const Oid i8 = 20;
    const char minus1[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    const char *pv[1] = {minus1};
    const int pl[1] = {8}, pf[1] = {1};
    PGresult *r = PQexecParams(c, sql, 1, &i8, pv, pl, pf, 1);
    if (!ok(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1, "binary: result rows"))
        diag("%s", PQresultErrorMessage(r));
    for (int i = 0; i < 11 && PQntuples(r) == 1; i++) {
        char name[64];
        snprintf(name, sizeof name, "binary result: %s (oid %u, format %d)", PQfname(r, i), PQftype(r, i),
                 PQfformat(r, i));
        cell_hex(r, 0, i, hex, sizeof hex);
        ok(PQfformat(r, i) == 1 && PQftype(r, i) == BT_OIDS[i] && strcmp(hex, BT_HEX[i]) == 0, name);
        if (strcmp(hex, BT_HEX[i]) != 0)
            diag("got %s want %s", hex, BT_HEX[i]);
    }
    PQclear(r);

    /* NULLs in binary. */
    snprintf(sql, sizeof sql, "SELECT %s FROM bt WHERE k = 2", BT_COLS);
    r = PQexecParams(c, sql, 0, NULL, NULL, NULL, NULL, 1);
    bool all_null = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    for (int i = 0; all_null && i < 11; i++)
        all_null = PQgetisnull(r, 0, i);
    ok(all_null, "binary result: NULL in every type");
    PQclear(r);

    /* Every type as a binary parameter: the same bytes inserted, then read
     * back in text and in binary; NULL parameters too. */
    char bufs[11][32];
    const char *vals[12];
    int lens[12], fmts[12];
    Oid types[12];
    const char three[8] = {0, 0, 0, 0, 0, 0, 0, 3};
    vals[0] = three;
    lens[0] = 8;
    fmts[0] = 1;
    types[0] = i8;
    for (int i = 0; i < 11; i++) {
        vals[i + 1] = bufs[i];
        lens[i + 1] = unhex(BT_HEX[i], bufs[i]);
        fmts[i + 1] = 1;
        types[i + 1] = BT_OIDS[i];
    }
    r = PQexecParams(c, "INSERT INTO bt VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)", 12, types, vals,
                     lens, fmts, 0);
    if (!ok(PQresultStatus(r) == PGRES_COMMAND_OK, "binary parameters: insert every type"))
        diag("%s", PQresultErrorMessage(r));
    PQclear(r);
    const char four[8] = {0, 0, 0, 0, 0, 0, 0, 4};
    vals[0] = four;
    for (int i = 1; i < 12; i++)
        vals[i] = NULL;
    r = PQexecParams(c, "INSERT INTO bt VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)", 12, types, vals,
                     lens, fmts, 0);
    ok(PQresultStatus(r) == PGRES_COMMAND_OK, "binary parameters: NULLs");
    PQclear(r);
    snprintf(sql, sizeof sql, "SELECT %s FROM bt WHERE k IN (-1, 3, 4) ORDER BY k", BT_COLS);
    r = PQexec(c, sql);
    bool same = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 3;
    for (int i = 0; same && i < 11; i++) {
        same = strcmp(PQgetvalue(r, 0, i), PQgetvalue(r, 1, i)) == 0 && PQgetisnull(r, 2, i);
        if (!same)
            diag("%s: %s vs %s", PQfname(r, i), PQgetvalue(r, 0, i), PQgetvalue(r, 1, i));
    }
    ok(same, "binary parameters read back as the same text values, NULLs as NULL");
    PQclear(r);
    snprintf(sql, sizeof sql, "SELECT %s FROM bt WHERE k = 3", BT_COLS);
    r = PQexecParams(c, sql, 0, NULL, NULL, NULL, NULL, 1);
    same = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    for (int i = 0; same && i < 11; i++)
        same = strcmp(cell_hex(r, 0, i, hex, sizeof hex), BT_HEX[i]) == 0;
    ok(same, "binary parameters round-trip byte for byte");
    PQclear(r);

    /* jsonb: a version byte (1), then the text; and back as a binary parameter. */
    const char *jq = "SELECT CAST('{\"a\": [1, -2]}' AS JSONB) AS j";
    PGresult *rt = PQexec(c, jq);
    r = PQexecParams(c, jq, 0, NULL, NULL, NULL, NULL, 1);
    const char *jtext = PQresultStatus(rt) == PGRES_TUPLES_OK ? PQgetvalue(rt, 0, 0) : "";
    ok(PQresultStatus(r) == PGRES_TUPLES_OK && PQftype(r, 0) == 3802 && PQgetlength(r, 0, 0) == (int)strlen(jtext) + 1 &&
           PQgetvalue(r, 0, 0)[0] == 1 && memcmp(PQgetvalue(r, 0, 0) + 1, jtext, strlen(jtext)) == 0,
       "binary jsonb: version 1, then the text");
    PQclear(r);
    char jb[64];
    jb[0] = 1;
    snprintf(jb + 1, sizeof jb - 1, "%s", "{\"b\": true}");
    const Oid jo = 3802;
    const char *jv[1] = {jb};
    int jl = (int)strlen(jb + 1) + 1, jf = 1;
    r = PQexecParams(c, "SELECT CAST($1 AS JSONB) -> 'b'", 1, &jo, jv, &jl, &jf, 0);
    ok(PQresultStatus(r) == PGRES_TUPLES_OK && strcmp(PQgetvalue(r, 0, 0), "true") == 0, "binary jsonb parameter");
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        diag("%s", PQresultErrorMessage(r));
    PQclear(r);
    PQclear(rt);

    /* A parameter of the wrong width, a type with no binary form, and the
     * connection still serves. */
    const char two[2] = {0, 1};
    pv[0] = two;
    int l2 = 2;
    r = PQexecParams(c, "SELECT k FROM bt WHERE k = $1", 1, &i8, pv, &l2, pf, 0);
    is_str(PQresultErrorField(r, PG_DIAG_SQLSTATE), "22P03", "binary parameter of the wrong length: 22P03");
    PQclear(r);
    r = PQexecParams(c, "SELECT typname, typinput FROM pg_catalog.pg_type LIMIT 1", 0, NULL, NULL, NULL, NULL, 1);
    is_str(PQresultErrorField(r, PG_DIAG_SQLSTATE), "0A000", "binary result of a type without one (regproc): 0A000");
    PQclear(r);
    r = PQexecParams(c, "SELECT count(*) FROM bt", 0, NULL, NULL, NULL, NULL, 1);
    ok(PQresultStatus(r) == PGRES_TUPLES_OK && PQgetlength(r, 0, 0) == 8 &&
           ((const unsigned char *)PQgetvalue(r, 0, 0))[7] == 4,
       "binary count(*) after the errors");
    PQclear(r);
}

static void test_subscribe(PGconn *c)
{
    PGconn *s = connect_pg(5);
    ok(s != NULL, "second connection");
    if (!s)
        return;
    ok(PQsendQuery(s, "SUBSCRIBE v WITH (progress = true)"), "send SUBSCRIBE");
    PGresult *r = PQgetResult(s);
    is_int(PQresultStatus(r), PGRES_COPY_OUT, "SUBSCRIBE answers COPY OUT");
    is_int(PQnfields(r), 5, "epoch, diff and the three columns");
    PQclear(r);
    Lines l = {{0}, 0};
    ok(copy_until(s, &l, "\t1\t2\t1\t5\n", 10), "snapshot row (2, 1, 5)");
    ok(strstr(l.text, "\t1\t1\t1\t10\n") != NULL, "snapshot row (1, 1, 10)");
    unsigned long long snap_epoch = strtoull(l.text, NULL, 10);
    ok(snap_epoch >= 1, "snapshot epoch");

    char resp[65536];
    http("GET", "/metrics", NULL, NULL, resp, sizeof resp);
    is_int((int)metric(resp, "weir_subscriptions"), 1, "metrics: one subscription");
    double before = metric(resp, "weir_view_records_in_total{view=\"v\"}");
    is_int((int)before, 2, "metrics: records_in before");

    ok(exec_ok(c, "INSERT INTO ev VALUES (1, 7)") && exec_ok(c, "FLUSH"), "insert a change");
    ok(copy_until(s, &l, "\t1\t1\t2\t17\n", 10), "change: +1 (1, 2, 17)");
    const char *minus = strstr(l.text, "\t-1\t1\t1\t10\n");
    const char *plus = strstr(l.text, "\t1\t1\t2\t17\n");
    ok(minus && plus && minus < plus, "retraction before the insertion");
    unsigned long long change_epoch = 0;
    if (plus) {
        const char *ls = plus;
        while (ls > l.text && ls[-1] != '\n')
            ls--;
        change_epoch = strtoull(ls, NULL, 10);
    }
    ok(change_epoch >= snap_epoch, "change epoch >= snapshot epoch");
    char prog[64];
    snprintf(prog, sizeof prog, "%llu\t\\N\t\\N\t\\N\t\\N\n", change_epoch);
    ok(copy_until(s, &l, prog, 10), "progress row for the change's epoch");

    http("GET", "/metrics", NULL, NULL, resp, sizeof resp);
    is_int((int)metric(resp, "weir_view_records_in_total{view=\"v\"}"), 3, "metrics: records_in moved");

    PGcancel *cc = PQgetCancel(s);
    char errbuf[256];
    ok(PQcancel(cc, errbuf, sizeof errbuf), "cancel request sent");
    PQfreeCancel(cc);
    char state[8];
    is_str(copy_result_state(s, state, 10), "57014", "cancelled SUBSCRIBE ends with 57014");
    ok(exec_ok(s, "SELECT 1"), "the session is usable after the cancel");
    PQfinish(s);
    http("GET", "/metrics", NULL, NULL, resp, sizeof resp);
    is_int((int)metric(resp, "weir_subscriptions"), 0, "subscription freed after cancel");
}

static void test_http(PGconn *c)
{
    static char resp[1 << 20];
    int st = http("GET", "/metrics", NULL, NULL, resp, sizeof resp);
    is_int(st, 200, "GET /metrics");
    ok(strstr(resp, "Content-Type: text/plain; version=0.0.4") != NULL, "metrics content type");
    ok(strstr(resp, "# TYPE weir_view_changes_total counter\n") != NULL, "metrics TYPE line");
    ok(strstr(resp, "# HELP weir_checkpoints_total ") != NULL, "metrics HELP line");
    ok(metric(resp, "weir_checkpoint_epoch") >= 1, "metrics: checkpoint epoch");
    ok(metric(resp, "weir_pgwire_connections") >= 1, "metrics: pgwire connections");

    st = http("GET", "/api/views", NULL, NULL, resp, sizeof resp);
    is_int(st, 200, "GET /api/views");
    ok(strstr(http_body(resp), "\"name\":\"v\"") && json_valid(http_body(resp)), "views list is JSON with v");

    st = http("GET", "/api/views/v", NULL, NULL, resp, sizeof resp);
    is_int(st, 200, "GET /api/views/v");
    const char *b = http_body(resp);
    ok(json_valid(b), "snapshot is valid JSON");
    ok(strstr(b, "\"view\":\"v\"") && strstr(b, "[1,2,17]") && strstr(b, "[2,1,5]"), "snapshot rows as JSON numbers");
    ok(strstr(b, "{\"name\":\"k\",\"type\":\"bigint\"}") != NULL, "snapshot columns");

    st = http("GET", "/api/status", NULL, NULL, resp, sizeof resp);
    is_int(st, 200, "GET /api/status");
    ok(json_valid(http_body(resp)) && strstr(http_body(resp), "\"records_in\":3"), "status JSON");

    st = http("GET", "/", NULL, NULL, resp, sizeof resp);
    is_int(st, 200, "GET / (dashboard)");
    ok(strstr(resp, "text/html") && strstr(resp, "EventSource"), "dashboard page is embedded");

    is_int(http("GET", "/api/views/nope", NULL, NULL, resp, sizeof resp), 404, "unknown view: 404");
    ok(strstr(http_body(resp), "\"sqlstate\":\"42P01\"") != NULL, "404 body names the SQLSTATE");
    is_int(http("GET", "/nope", NULL, NULL, resp, sizeof resp), 404, "unknown path: 404");
    is_int(http("DELETE", "/metrics", NULL, NULL, resp, sizeof resp), 405, "wrong method: 405");
    is_int(http("POST", "/api/sql", NULL, "SELECT 1", resp, sizeof resp), 403, "POST /api/sql disabled: 403");
    is_int(http("POST", "/api/sql", "Content-Length: 5000000\r\n\r\n", NULL, resp, sizeof resp), 413,
           "oversized body refused before reading: 413");

    /* The changefeed over SSE. */
    int fd = tcp_connect(hport);
    const char *get = "GET /api/views/v/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    ok(fd >= 0 && write(fd, get, strlen(get)) == (ssize_t)strlen(get), "open the stream");
    static char sse[65536];
    size_t len = 0;
    sse[0] = 0;
    /* Chunked encoding may split the event: wait for its end, then look. */
    ok(read_until(fd, sse, sizeof sse, &len, "]}\n\n", 10) && strstr(sse, "[1,2,17]"), "snapshot event arrives");
    ok(strstr(sse, "text/event-stream") && strstr(sse, "event: snapshot\ndata: {\"view\":\"v\""), "snapshot event");
    ok(exec_ok(c, "INSERT INTO ev VALUES (3, 1)") && exec_ok(c, "FLUSH"), "insert while streaming");
    ok(read_until(fd, sse, sizeof sse, &len, "\"diff\":1,\"row\":[3,1,1]", 10), "change event arrives");
    ok(read_until(fd, sse, sizeof sse, &len, "event: progress", 10), "progress event arrives");
    const char *idp = strstr(strstr(sse, "\"row\":[3,1,1]"), "id: ");
    ok(idp && strtoull(idp + 4, NULL, 10) >= 1, "progress carries id: epoch");
    unsigned long long seen = idp ? strtoull(idp + 4, NULL, 10) : 0;
    http("GET", "/metrics", NULL, NULL, resp, sizeof resp);
    is_int((int)metric(resp, "weir_http_streams"), 1, "one stream open");
    close(fd);
    double end = now_s() + 5;
    int open_streams = 1, subs = 1;
    /* The stream count is the HTTP side's own; the subscription count is
     * the engine's, which /metrics may report from its last read while the
     * engine is busy (weir_metrics_engine_busy): wait for both. */
    while (now_s() < end && (open_streams || subs)) {
        usleep(100000);
        http("GET", "/metrics", NULL, NULL, resp, sizeof resp);
        open_streams = (int)metric(resp, "weir_http_streams");
        subs = (int)metric(resp, "weir_subscriptions");
    }
    is_int(open_streams, 0, "a vanished SSE client frees its stream");
    is_int(subs, 0, "... and its subscription");

    /* Last-Event-ID older than the last epoch: a fresh snapshot, said so. */
    fd = tcp_connect(hport);
    const char *get2 = "GET /api/views/v/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nLast-Event-ID: 0\r\n\r\n";
    ok(fd >= 0 && write(fd, get2, strlen(get2)) == (ssize_t)strlen(get2), "reconnect with Last-Event-ID: 0");
    len = 0;
    sse[0] = 0;
    ok(read_until(fd, sse, sizeof sse, &len, "]}\n\n", 10) && strstr(sse, "\"resumed\":false,\"note\":\"epoch 0"),
       "old Last-Event-ID gets a fresh snapshot with a note");
    close(fd);

    /* A change made while the client is away: a reconnect with the last
     * progress id it saw gets the changes since from the view's history. */
    ok(exec_ok(c, "INSERT INTO ev VALUES (4, 2)") && exec_ok(c, "FLUSH") && exec_ok(c, "CHECKPOINT"),
       "a change while no stream is open");
    fd = tcp_connect(hport);
    char get3[200];
    snprintf(get3, sizeof get3, "GET /api/views/v/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nLast-Event-ID: %llu\r\n\r\n",
             seen);
    ok(fd >= 0 && write(fd, get3, strlen(get3)) == (ssize_t)strlen(get3), "reconnect with the last progress id");
    len = 0;
    sse[0] = 0;
    ok(read_until(fd, sse, sizeof sse, &len, "\"row\":[4,1,2]", 10) && strstr(sse, "event: resumed") &&
           !strstr(sse, "event: snapshot") && !strstr(sse, "[3,1,1]"),
       "resumed from the view's history: the missed change, nothing seen before, no snapshot");
    close(fd);
}

static void test_drop_ends_subscribe(PGconn *c)
{
    PGconn *s = connect_pg(5);
    ok(exec_ok(c, "CREATE MATERIALIZED VIEW v2 AS SELECT k FROM ev WHERE v > 3"), "create v2");
    ok(PQsendQuery(s, "COPY (SUBSCRIBE v2) TO STDOUT"), "COPY (SUBSCRIBE v2) TO STDOUT");
    PGresult *r = PQgetResult(s);
    is_int(PQresultStatus(r), PGRES_COPY_OUT, "COPY form answers COPY OUT");
    PQclear(r);
    Lines l = {{0}, 0};
    ok(copy_until(s, &l, "\t1\t1\n", 10), "v2 snapshot");
    ok(exec_ok(c, "DROP MATERIALIZED VIEW v2"), "drop v2 while subscribed");
    char state[8];
    is_str(copy_result_state(s, state, 10), "55000", "SUBSCRIBE on a dropped view ends with an error");
    PGresult *e = PQexec(s, "SUBSCRIBE ev");
    is_str(PQresultErrorField(e, PG_DIAG_SQLSTATE), "42809", "SUBSCRIBE to a source: 42809");
    PQclear(e);
    e = PQexec(s, "SUBSCRIBE v WITH (bogus = true)");
    is_str(PQresultErrorField(e, PG_DIAG_SQLSTATE), "42601", "unknown option: 42601");
    PQclear(e);
    PQfinish(s);
}

static void test_sql_endpoint(void)
{
    static char resp[65536];
    int st = http("POST", "/api/sql", NULL, "SELECT k, n FROM v WHERE k = 1; SELECT 'a' AS t, NULL AS z", resp,
                  sizeof resp);
    is_int(st, 200, "POST /api/sql enabled");
    const char *b = http_body(resp);
    ok(json_valid(b) && strstr(b, "\"rows\":[[1,2]]") && strstr(b, "\"rows\":[[\"a\",null]]"), "rows of both statements");
    st = http("POST", "/api/sql", NULL, "SELECT nope FROM v", resp, sizeof resp);
    is_int(st, 400, "SQL error: 400");
    b = http_body(resp);
    ok(json_valid(b) && strstr(b, "\"sqlstate\":\"42703\"") && strstr(b, "\"position\":8"),
       "error with sqlstate and position");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_serving WEIR\n");
        return 2;
    }
    weir = argv[1];
    snprintf(tmpdir, sizeof tmpdir, "/tmp/weir-serving-XXXXXX");
    if (!mkdtemp(tmpdir))
        return 2;
    snprintf(datadir, sizeof datadir, "%s/data", tmpdir);
    kport = free_port();
    do pport = free_port(); while (pport == kport);
    do hport = free_port(); while (hport == kport || hport == pport);
    char listen[64], log[320];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", kport);
    snprintf(log, sizeof log, "%s/broker.log", tmpdir);
    char *bargv[] = {(char *)weir, "broker", "--listen", listen, NULL};
    broker_pid = spawn(bargv, log);
    for (int i = 0; i < 100; i++) {
        int fd = tcp_connect(kport);
        if (fd >= 0) {
            close(fd);
            break;
        }
        usleep(100000);
    }
    ok(start_server(false) == 0, "server starts (HTTP without --http-sql)");
    PGconn *c = connect_pg(5);
    if (!c) {
        stop(&server_pid);
        stop(&broker_pid);
        return tap_done() || 1;
    }
    char sql[600];
    snprintf(sql, sizeof sql,
             "CREATE SOURCE ev (k BIGINT, v BIGINT) WITH (connector = 'kafka', topic = 'ev', "
             "properties.bootstrap.server = '127.0.0.1:%d', scan.startup.mode = 'earliest') FORMAT PLAIN ENCODE JSON",
             kport);
    ok(exec_ok(c, sql), "create source");
    ok(exec_ok(c, "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) AS n, sum(v) AS s FROM ev GROUP BY k"),
       "create view");
    ok(exec_ok(c, "INSERT INTO ev VALUES (1, 10), (2, 5)") && exec_ok(c, "FLUSH"), "first rows");
    exec_ok(c, "CHECKPOINT");
    test_binary(c);
    test_subscribe(c);
    test_http(c);
    test_drop_ends_subscribe(c);
    PQfinish(c);
    int st = stop(&server_pid);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "clean shutdown");
    ok(start_server(true) == 0, "restart with --http-sql");
    test_sql_endpoint();
    st = stop(&server_pid);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "clean shutdown again");
    stop(&broker_pid);
    int rc = tap_done();
    if (rc == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
        if (system(cmd) != 0)
            diag("could not remove %s", tmpdir);
    } else {
        diag("logs kept in %s", tmpdir);
    }
    return rc;
}
