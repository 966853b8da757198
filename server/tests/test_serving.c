/*
 * test_serving.c: SUBSCRIBE over pgwire and the HTTP endpoint, end to end.
 *
 * Starts `weir broker` and `weir serve` on free loopback ports (the weir
 * executable is argv[1]), creates a source and a view, then:
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
    http("GET", "/metrics", NULL, NULL, resp, sizeof resp);
    is_int((int)metric(resp, "weir_http_streams"), 1, "one stream open");
    close(fd);
    double end = now_s() + 5;
    int open_streams = 1;
    while (now_s() < end && open_streams) {
        usleep(100000);
        http("GET", "/metrics", NULL, NULL, resp, sizeof resp);
        open_streams = (int)metric(resp, "weir_http_streams");
    }
    is_int(open_streams, 0, "a vanished SSE client frees its stream");
    is_int((int)metric(resp, "weir_subscriptions"), 0, "... and its subscription");

    /* Last-Event-ID older than the last epoch: a fresh snapshot, said so. */
    fd = tcp_connect(hport);
    const char *get2 = "GET /api/views/v/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nLast-Event-ID: 0\r\n\r\n";
    ok(fd >= 0 && write(fd, get2, strlen(get2)) == (ssize_t)strlen(get2), "reconnect with Last-Event-ID: 0");
    len = 0;
    sse[0] = 0;
    ok(read_until(fd, sse, sizeof sse, &len, "]}\n\n", 10) && strstr(sse, "\"resumed\":false,\"note\":\"epoch 0"),
       "old Last-Event-ID gets a fresh snapshot with a note");
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
