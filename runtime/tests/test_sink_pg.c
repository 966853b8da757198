/*
 * test_sink_pg.c: the PostgreSQL sink writer against a throwaway cluster
 * started with scripts/pg-tmp.sh (argv[1]) on a free port: table checks,
 * upsert/delete epochs, replay and ordering of epochs, append-only,
 * atomicity on error, value escaping and forms, a killed connection, and a
 * 100k-row epoch (throughput as a diag line). Skips (exit 77) when no
 * cluster can be started.
 */
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "sink.h"
#include "tap.h"

static char g_script[512], g_dir[64], g_url[256];
static PGconn *g_pg; /* the test's own connection, to look at the target */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) || getsockname(fd, (struct sockaddr *)&sa, &sl))
        return -1;
    close(fd);
    return ntohs(sa.sin_port);
}

static void cluster_stop(void)
{
    if (g_pg)
        PQfinish(g_pg);
    g_pg = NULL;
    char cmd[700];
    snprintf(cmd, sizeof cmd, "'%s' stop '%s' >/dev/null 2>&1; rm -rf '%s'", g_script, g_dir, g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not stop the cluster in %s\n", g_dir);
}

static int skip(const char *why)
{
    printf("1..0 # SKIP %s\n", why);
    return 77;
}

/* Starts the cluster; fills g_url. */
static int cluster_start(void)
{
    strcpy(g_dir, "/tmp/weir-sinkpg-XXXXXX");
    if (!mkdtemp(g_dir))
        return -1;
    chmod(g_dir, 0755);
    for (int attempt = 0; attempt < 3; attempt++) {
        int port = free_port();
        char cmd[700];
        snprintf(cmd, sizeof cmd, "'%s' start '%s' %d", g_script, g_dir, port);
        FILE *f = popen(cmd, "r");
        if (!f)
            return -1;
        char line[256] = "";
        if (!fgets(line, sizeof line, f))
            line[0] = 0;
        int rc = pclose(f);
        line[strcspn(line, "\n")] = 0;
        if (rc == 0 && !strncmp(line, "postgres://", 11)) {
            snprintf(g_url, sizeof g_url, "%s", line);
            atexit(cluster_stop);
            return 0;
        }
    }
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return -1;
}

/* The first column of the first row of sql as text ("<none>" without rows,
 * "<null>" for NULL), in a static buffer. */
static const char *q(const char *sql)
{
    static char out[4096];
    PGresult *r = PQexec(g_pg, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK)
        snprintf(out, sizeof out, "<error: %s>", PQerrorMessage(g_pg));
    else if (PQntuples(r) == 0)
        snprintf(out, sizeof out, "<none>");
    else if (PQgetisnull(r, 0, 0))
        snprintf(out, sizeof out, "<null>");
    else
        snprintf(out, sizeof out, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return out;
}

static void x(const char *sql)
{
    const char *r = q(sql);
    if (!strncmp(r, "<error", 6))
        diag("sql failed: %s: %s", sql, r);
}

/* ---- specs ---- */

typedef struct Spec {
    CatOption opts[5];
    RtSinkSpec s;
} Spec;

static const char *const WIDE_NAMES[] = {"id", "name", "score", "flag", "ts", "tz", "d", "iv", "b", "j"};
static const TypeId WIDE_TYPES[] = {TYPE_INT8, TYPE_TEXT, TYPE_FLOAT8, TYPE_BOOL, TYPE_TIMESTAMP,
                                    TYPE_TIMESTAMPTZ, TYPE_DATE, TYPE_INTERVAL, TYPE_BYTEA, TYPE_JSONB};
#define WIDE_N 10
static const char *const KV_NAMES[] = {"k", "v"};
static const TypeId KV_TYPES[] = {TYPE_INT4, TYPE_TEXT};
static const int PK0[] = {0};

static void spec_init(Spec *sp, const char *name, const char *url, const char *table, const char *create,
                      bool upsert, int n_cols, const char *const *names, const TypeId *types)
{
    memset(sp, 0, sizeof *sp);
    int n = 0;
    if (url)
        sp->opts[n++] = (CatOption){"URL", url}; /* keys are case-insensitive */
    if (table)
        sp->opts[n++] = (CatOption){"table", table};
    if (create)
        sp->opts[n++] = (CatOption){"create_table", create};
    sp->s = (RtSinkSpec){.name = name, .n_options = n, .options = sp->opts, .n_cols = n_cols,
                         .col_names = names, .col_types = types, .n_pk = upsert ? 1 : 0, .pk = PK0,
                         .upsert = upsert};
}

static Value I8(int64_t v) { return value_int(TYPE_INT8, v); }
static Value I4(int64_t v) { return value_int(TYPE_INT4, v); }
static Value T(const char *s) { return value_str(TYPE_TEXT, s, strlen(s)); }

static RtSinkWriter *open_ok(const RtSinkConnector *c, Spec *sp, const char *what)
{
    RtSinkWriter *w = NULL;
    WError e;
    werr_clear(&e);
    int rc = c->open(&sp->s, &w, &e);
    ok(rc == 0 && w, what);
    if (rc)
        diag("open: %s %s", e.sqlstate, e.msg);
    return w;
}

static void open_fails(const RtSinkConnector *c, Spec *sp, const char *sqlstate, const char *needle,
                       const char *what)
{
    RtSinkWriter *w = NULL;
    WError e;
    werr_clear(&e);
    int rc = c->open(&sp->s, &w, &e);
    ok(rc == -1 && !w && !strcmp(e.sqlstate, sqlstate) && strstr(e.msg, needle), what);
    if (rc == 0)
        c->close(w);
    else
        diag("  -> %s %s", e.sqlstate, e.msg);
}

static uint64_t last(const RtSinkConnector *c, RtSinkWriter *w)
{
    uint64_t ep = 999;
    WError e;
    werr_clear(&e);
    if (c->last_epoch(w, &ep, &e))
        diag("last_epoch: %s %s", e.sqlstate, e.msg);
    return ep;
}

static int wr(const RtSinkConnector *c, RtSinkWriter *w, uint64_t epoch, int n, const RtSinkChange *ch,
                 WError *e)
{
    werr_clear(e);
    int rc = c->write_epoch(w, epoch, n, ch, e);
    if (rc)
        diag("write_epoch %" PRIu64 ": %s %s", epoch, e->sqlstate, e->msg);
    return rc;
}

/* Terminates the backend of sink name's writer from the test's connection. */
static const char *kill_writer(const char *name)
{
    char sql[300];
    snprintf(sql, sizeof sql,
             "SELECT bool_and(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity"
             " WHERE application_name = 'weir-sink:%s'",
             name);
    return q(sql);
}

static void test_checks(const RtSinkConnector *c)
{
    Spec sp;
    spec_init(&sp, "s", NULL, "kv", NULL, true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "22023", "'url' is required", "url option required");
    spec_init(&sp, "s", g_url, NULL, NULL, true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "22023", "'table' is required", "table option required");
    char bad_url[100];
    snprintf(bad_url, sizeof bad_url, "postgres://postgres@127.0.0.1:%d/postgres", free_port());
    spec_init(&sp, "s", bad_url, "kv", NULL, true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "08006", "could not connect", "unreachable server: 08006 with libpq's message");

    spec_init(&sp, "s", g_url, "kv", NULL, true, 2, KV_NAMES, KV_TYPES);
    RtSinkWriter *w = NULL;
    WError e;
    werr_clear(&e);
    int rc = c->open(&sp.s, &w, &e);
    ok(rc == -1 && !strcmp(e.sqlstate, "42P01") && strstr(e.msg, "kv") && strstr(e.hint, "create_table = 'true'"),
       "missing table: 42P01 naming it, hint create_table");

    x("CREATE TABLE bad_type (k int PRIMARY KEY, v int)");
    spec_init(&sp, "s", g_url, "bad_type", NULL, true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "42804", "column \"v\" of table bad_type has type integer, but the sink writes character varying",
               "wrong type: 42804 naming column and both types");
    x("CREATE TABLE narrow (k smallint PRIMARY KEY, v text)");
    spec_init(&sp, "s", g_url, "narrow", NULL, true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "42804", "smallint", "a narrower integer column is refused");
    x("CREATE TABLE wider (k bigint PRIMARY KEY, v varchar(20), extra text DEFAULT 'x', n serial)");
    spec_init(&sp, "s", g_url, "wider", NULL, true, 2, KV_NAMES, KV_TYPES);
    w = open_ok(c, &sp, "wider integer, varchar, extra columns with defaults are accepted");
    if (w)
        c->close(w);
    x("CREATE TABLE extra_nn (k int PRIMARY KEY, v text, must text NOT NULL)");
    spec_init(&sp, "s", g_url, "extra_nn", NULL, true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "23502", "must", "an unwritten NOT NULL column without default is refused");
    x("CREATE TABLE bad_pk (k int, v text PRIMARY KEY)");
    spec_init(&sp, "s", g_url, "bad_pk", NULL, true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "42P10", "primary key of table bad_pk is (v), but the upsert sink's key is (k)",
               "wrong primary key: 42P10");
    x("CREATE TABLE wide_pk (k int, v text, PRIMARY KEY (k, v))");
    spec_init(&sp, "s", g_url, "wide_pk", NULL, true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "42P10", "(k, v)", "a wider primary key: 42P10");
    x("CREATE TABLE no_pk (k int, v text)");
    spec_init(&sp, "s", g_url, "no_pk", NULL, true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "42P10", "no primary key", "no primary key: 42P10");
    spec_init(&sp, "s", g_url, "no_pk", NULL, false, 2, KV_NAMES, KV_TYPES);
    w = open_ok(c, &sp, "append-only needs no primary key");
    if (w)
        c->close(w);
    x("CREATE TABLE missing_col (k int PRIMARY KEY)");
    spec_init(&sp, "s", g_url, "missing_col", NULL, true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "42703", "\"v\"", "missing column: 42703");
    x("CREATE VIEW a_view AS SELECT 1 AS k, 'x'::text AS v");
    spec_init(&sp, "s", g_url, "a_view", NULL, true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "42809", "not a table", "a view is not a target");

    x("CREATE SCHEMA app");
    spec_init(&sp, "qualified", g_url, "app.kv", "true", true, 2, KV_NAMES, KV_TYPES);
    w = open_ok(c, &sp, "schema-qualified table with create_table");
    is_str(q("SELECT to_regclass('app.kv') IS NOT NULL AND to_regclass('public.kv') IS NULL"), "t",
           "created in the named schema");
    Value r[] = {I4(1), T("x")};
    RtSinkChange ch[] = {{NULL, r}};
    ok(w && wr(c, w, 1, 1, ch, &e) == 0, "write into app.kv");
    is_str(q("SELECT v FROM app.kv WHERE k = 1"), "x", "row in app.kv");
    if (w)
        c->close(w);
}

static void test_values_and_epochs(const RtSinkConnector *c)
{
    WError e;
    Spec sp;
    spec_init(&sp, "wide", g_url, "wide", "true", true, WIDE_N, WIDE_NAMES, WIDE_TYPES);
    RtSinkWriter *w = open_ok(c, &sp, "create_table = 'true' creates the table");
    if (!w)
        return;
    is_str(q("SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY attnum)"
             " FROM pg_attribute a WHERE attrelid = 'wide'::regclass AND attnum > 0"),
           "id bigint, name text, score double precision, flag boolean, ts timestamp without time zone,"
           " tz timestamp with time zone, d date, iv interval, b bytea, j jsonb",
           "created with the mapped types");
    is_str(q("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
             " AND a.attnum = ANY (i.indkey) WHERE i.indrelid = 'wide'::regclass AND i.indisprimary"),
           "id", "created with the primary key");
    is_str(q("SELECT count(*) FROM weir_sink_progress WHERE sink = 'wide'"), "0", "progress table there, no row yet");
    is_int(last(c, w), 0, "last_epoch of a new sink is 0");

    const char *nasty = "it's \"quoted\"\\back\tslash\nnew\r\\N\\.\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    Value r1[WIDE_N], r2[WIDE_N], r3[WIDE_N];
    Interval iv = {.months = 1, .days = 2, .usecs = 3 * USECS_PER_SEC};
    int64_t ts = 0, day = 0;
    parse_timestamp("2024-01-02 03:04:05.5", strlen("2024-01-02 03:04:05.5"), &ts);
    parse_date("2024-02-29", 10, &day);
    r1[0] = I8(1), r1[1] = T(nasty), r1[2] = value_float(TYPE_FLOAT8, 1.5), r1[3] = value_bool(true);
    r1[4] = value_int(TYPE_TIMESTAMP, ts), r1[5] = value_int(TYPE_TIMESTAMPTZ, ts);
    r1[6] = value_int(TYPE_DATE, day), r1[7] = (Value){.type = TYPE_INTERVAL, .u.iv = iv};
    r1[8] = value_str(TYPE_BYTEA, "\x00\x01\xff\\", 4), r1[9] = value_str(TYPE_JSONB, "{\"a\": \"t\\tb\"}", 13);
    for (int i = 0; i < WIDE_N; i++)
        r2[i] = value_null(WIDE_TYPES[i]);
    r2[0] = I8(2);
    memcpy(r3, r2, sizeof r3);
    r3[0] = I8(3), r3[1] = T(""), r3[3] = value_bool(false), r3[4] = value_int(TYPE_TIMESTAMP, TS_PLUS_INF);
    RtSinkChange e1[] = {{NULL, r1}, {NULL, r2}, {NULL, r3}};
    ok(wr(c, w, 1, 3, e1, &e) == 0, "epoch 1: three inserts");
    is_int(last(c, w), 1, "last_epoch = 1");
    is_str(q("SELECT count(*) FROM wide"), "3", "three rows");
    is_str(q("SELECT name FROM wide WHERE id = 1"), nasty,
           "quotes, backslashes, tab, newline, CR, \\N, \\., unicode survive COPY");
    is_str(q("SELECT score || ' ' || flag || ' ' || b::text || ' ' || j::text FROM wide WHERE id = 1"),
           "1.5 true \\x0001ff5c {\"a\": \"t\\tb\"}", "double, boolean, bytea, jsonb");
    is_str(q("SELECT ts || '|' || tz || '|' || d || '|' || iv FROM wide WHERE id = 1"),
           "2024-01-02 03:04:05.5|2024-01-02 03:04:05.5+00|2024-02-29|1 mon 2 days 00:00:03",
           "timestamp, timestamptz, date, interval");
    is_str(q("SELECT count(*) FROM wide WHERE id = 2 AND name IS NULL AND score IS NULL AND flag IS NULL"
             " AND ts IS NULL AND tz IS NULL AND d IS NULL AND iv IS NULL AND b IS NULL AND j IS NULL"),
           "1", "NULLs stay NULL");
    is_str(q("SELECT quote_literal(name) || flag || ts FROM wide WHERE id = 3"), "''falseinfinity",
           "empty string is not NULL; false; infinity");

    Value r1b[WIDE_N];
    memcpy(r1b, r1, sizeof r1b);
    r1b[1] = T("updated");
    RtSinkChange e2[] = {{r1, r1b}, {r2, NULL}};
    ok(wr(c, w, 2, 2, e2, &e) == 0, "epoch 2: an update and a delete");
    is_str(q("SELECT string_agg(id || ':' || coalesce(name, '-'), ',' ORDER BY id) FROM wide"), "1:updated,3:",
           "update applied, row 2 deleted");
    is_str(q("SELECT ts FROM wide WHERE id = 1"), "2024-01-02 03:04:05.5", "update writes every column");

    /* Replay and ordering. */
    Value r9[WIDE_N];
    memcpy(r9, r2, sizeof r9);
    r9[0] = I8(9);
    RtSinkChange e3[] = {{NULL, r9}};
    ok(wr(c, w, 3, 1, e3, &e) == 0, "epoch 3 applied");
    ok(wr(c, w, 3, 1, e3, &e) == 0, "epoch 3 again returns 0");
    RtSinkChange e3b[] = {{r1b, NULL}};
    ok(wr(c, w, 3, 1, e3b, &e) == 0 && wr(c, w, 2, 1, e3b, &e) == 0,
       "replays of epochs 3 and 2 with other changes return 0");
    is_str(q("SELECT string_agg(id::text, ',' ORDER BY id) FROM wide"), "1,3,9",
           "replayed epochs are no-ops (applied once)");
    is_int(last(c, w), 3, "last_epoch = 3");
    ok(wr(c, w, 7, 0, NULL, &e) == 0, "an empty epoch 7");
    is_int(last(c, w), 7, "last_epoch = 7 after an empty epoch");
    is_str(q("SELECT epoch FROM weir_sink_progress WHERE sink = 'wide'"), "7", "the progress row in the target");

    /* The same key twice in one epoch: as if applied in order. */
    Value a10[WIDE_N], b10[WIDE_N], a11[WIDE_N];
    memcpy(a10, r2, sizeof a10), memcpy(b10, r2, sizeof b10), memcpy(a11, r2, sizeof a11);
    a10[0] = I8(10), a10[1] = T("first"), b10[0] = I8(10), b10[1] = T("second");
    a11[0] = I8(11), a11[1] = T("back");
    RtSinkChange e8[] = {{NULL, a10}, {a10, b10}, {NULL, a11}, {a11, NULL}, {r9, NULL}, {NULL, r9}};
    ok(wr(c, w, 8, 6, e8, &e) == 0, "epoch 8: keys appearing twice");
    is_str(q("SELECT string_agg(id || ':' || coalesce(name, '-'), ',' ORDER BY id) FROM wide"),
           "1:updated,3:,9:-,10:second", "insert+update -> last, insert+delete -> gone, delete+insert -> present");

    /* A killed connection between epochs. */
    is_str(kill_writer("wide"), "t", "terminated the writer's backend");
    Value r12[WIDE_N];
    memcpy(r12, r2, sizeof r12);
    r12[0] = I8(12);
    RtSinkChange e9[] = {{NULL, r12}};
    ok(wr(c, w, 9, 1, e9, &e) == 0, "the next write_epoch reconnects and succeeds");
    is_str(q("SELECT count(*) FROM wide WHERE id = 12"), "1", "its row is there");
    is_str(kill_writer("wide"), "t", "terminated it again");
    is_int(last(c, w), 9, "last_epoch reconnects too");
    ok(wr(c, w, 9, 1, e3b, &e) == 0, "a retried epoch 9 after reconnecting is a no-op");
    is_str(q("SELECT count(*) FROM wide WHERE id = 1"), "1", "(its changes were not applied)");

    /* Atomicity under on_error = 'fail': a failing row rolls back the whole epoch, progress included. */
    x("CREATE TABLE strict_kv (k int PRIMARY KEY, v text NOT NULL)");
    Spec sp2;
    spec_init(&sp2, "strict", g_url, "strict_kv", NULL, true, 2, KV_NAMES, KV_TYPES);
    sp2.opts[sp2.s.n_options++] = (CatOption){"on_error", "fail"};
    RtSinkWriter *w2 = open_ok(c, &sp2, "second writer, open at the same time");
    Value k1[] = {I4(1), T("one")}, k2[] = {I4(2), value_null(TYPE_TEXT)};
    RtSinkChange bad[] = {{NULL, k1}, {NULL, k2}};
    werr_clear(&e);
    ok(w2 && c->write_epoch(w2, 1, 2, bad, &e) == -1 && !strcmp(e.sqlstate, "23502"),
       "NOT NULL violation: the server's 23502");
    is_str(q("SELECT count(*) FROM strict_kv"), "0", "nothing of the failed epoch applied");
    is_int(last(c, w2), 0, "progress not advanced by the failed epoch");
    RtSinkChange good[] = {{NULL, k1}};
    ok(w2 && wr(c, w2, 1, 1, good, &e) == 0, "the epoch retried with good data on the same connection");
    is_int(last(c, w2), 1, "progress is per sink");
    is_int(last(c, w), 9, "the other sink's progress is untouched");
    if (w2)
        c->close(w2);

    /* on_error = 'skip' (the default): the epoch's batch is refused, so it
     * is applied again a row at a time; the refused rows are kept in
     * weir_sink_rejects in the same transaction, the rest applies. */
    x("CREATE TABLE checked_kv (k int PRIMARY KEY, v varchar(4) NOT NULL CHECK (v <> 'nope'))");
    Spec sp5;
    spec_init(&sp5, "checked", g_url, "checked_kv", NULL, true, 2, KV_NAMES, KV_TYPES);
    RtSinkWriter *w5 = open_ok(c, &sp5, "a writer over a table with a CHECK and a varchar(4)");
    Value c1[] = {I4(1), T("ok")}, c2[] = {I4(2), T("too long")}, c3[] = {I4(3), T("nope")},
          c4[] = {I4(4), value_null(TYPE_TEXT)}, c5[] = {I4(5), T("fine")};
    RtSinkChange mixed[] = {{NULL, c1}, {NULL, c2}, {NULL, c3}, {NULL, c4}, {NULL, c5}};
    ok(w5 && wr(c, w5, 1, 5, mixed, &e) == 0, "skip: the epoch with three refused rows is delivered");
    is_str(q("SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM checked_kv"), "1=ok,5=fine",
           "the rows the target accepts are applied");
    is_str(q("SELECT string_agg(epoch || ' ' || op || ' ' || sqlstate || ' ' || row_data, ' | ' ORDER BY row_data) "
             "FROM weir_sink_rejects WHERE sink = 'checked'"),
           "1 insert 22001 {\"k\": \"2\", \"v\": \"too long\"} | 1 insert 23514 {\"k\": \"3\", \"v\": \"nope\"} | "
           "1 insert 23502 {\"k\": \"4\", \"v\": null}",
           "the refused ones are in weir_sink_rejects with the server's SQLSTATE and the row");
    RtSinkRejects rj = {0};
    if (w5)
        c->rejects(w5, &rj);
    ok(rj.rows == 3 && strstr(rj.last, "epoch 1: insert"), "rejects() counts them and names the last");
    is_int(last(c, w5), 1, "progress moved to the epoch");
    ok(w5 && wr(c, w5, 1, 5, mixed, &e) == 0, "the same epoch delivered again");
    is_str(q("SELECT count(*) FROM weir_sink_rejects WHERE sink = 'checked'"), "3",
           "is a no-op: no rejected row recorded twice");
    Value u1[] = {I4(1), T("nope")};
    RtSinkChange upd[] = {{c1, u1}, {c5, NULL}};
    ok(w5 && wr(c, w5, 2, 2, upd, &e) == 0, "an update the CHECK refuses, beside a delete");
    is_str(q("SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM checked_kv"), "1=ok",
           "the delete applied, the refused update left the old row");
    is_str(q("SELECT op FROM weir_sink_rejects WHERE sink = 'checked' AND epoch = 2"), "update", "recorded as an update");
    if (w5)
        c->close(w5);
    c->close(w);
}

static void test_append_only(const RtSinkConnector *c)
{
    WError e;
    Spec sp;
    spec_init(&sp, "log", g_url, "log", "true", false, 2, KV_NAMES, KV_TYPES);
    RtSinkWriter *w = open_ok(c, &sp, "append-only sink, create_table");
    if (!w)
        return;
    is_str(q("SELECT count(*) FROM pg_index WHERE indrelid = 'log'::regclass"), "0",
           "append-only table created without a key");
    Value l1[] = {I4(1), T("a\tb")}, l2[] = {I4(1), value_null(TYPE_TEXT)};
    RtSinkChange ins[] = {{NULL, l1}, {NULL, l2}};
    ok(wr(c, w, 1, 2, ins, &e) == 0, "append-only inserts (duplicate keys are fine)");
    is_str(q("SELECT string_agg(coalesce(v, '<null>'), ',' ORDER BY v) FROM log"), "a\tb,<null>", "both rows appended");
    RtSinkChange retract[] = {{NULL, l1}, {l1, NULL}};
    werr_clear(&e);
    ok(c->write_epoch(w, 2, 2, retract, &e) == -1 && !strcmp(e.sqlstate, "22023"),
       "append-only rejects a retraction with 22023");
    RtSinkChange upd[] = {{l1, l2}};
    werr_clear(&e);
    ok(c->write_epoch(w, 2, 1, upd, &e) == -1 && !strcmp(e.sqlstate, "22023"), "and an update");
    is_str(q("SELECT count(*) FROM log"), "2", "nothing of the rejected epoch applied");
    is_int(last(c, w), 1, "progress unchanged");
    ok(wr(c, w, 1, 2, ins, &e) == 0, "append-only replay of epoch 1 returns 0");
    is_str(q("SELECT count(*) FROM log"), "2", "and appends nothing");
    c->close(w);
}

static void test_throughput(const RtSinkConnector *c)
{
    enum { N_BIG = 100000 };
    WError e;
    Value *rows = malloc(sizeof(Value) * 2 * N_BIG);
    RtSinkChange *big = malloc(sizeof(RtSinkChange) * N_BIG);
    for (int i = 0; i < N_BIG; i++) {
        rows[2 * i] = I4(i);
        rows[2 * i + 1] = T("some payload text");
        big[i] = (RtSinkChange){NULL, &rows[2 * i]};
    }
    Spec sp;
    spec_init(&sp, "big", g_url, "big", "true", true, 2, KV_NAMES, KV_TYPES);
    RtSinkWriter *w = open_ok(c, &sp, "big sink");
    if (!w)
        goto done;
    double t0 = now_s();
    ok(wr(c, w, 1, N_BIG, big, &e) == 0, "100k-row epoch of inserts");
    double t1 = now_s();
    for (int i = 0; i < N_BIG; i++)
        big[i].before = big[i].after;
    ok(wr(c, w, 2, N_BIG, big, &e) == 0, "100k-row epoch of updates");
    double t2 = now_s();
    for (int i = 0; i < N_BIG; i++)
        big[i].after = NULL;
    ok(wr(c, w, 3, N_BIG, big, &e) == 0, "100k-row epoch of deletes");
    double t3 = now_s();
    diag("postgres: 100k-row upsert epochs: inserts %.3f s (%.0f rows/s), updates %.3f s (%.0f rows/s),"
         " deletes %.3f s (%.0f rows/s)",
         t1 - t0, N_BIG / (t1 - t0), t2 - t1, N_BIG / (t2 - t1), t3 - t2, N_BIG / (t3 - t2));
    is_str(q("SELECT count(*) FROM big"), "0", "all deleted");
    c->close(w);
done:
    free(rows);
    free(big);
}

int main(int argc, char **argv)
{
    if (argc < 2 || access(argv[1], X_OK) != 0)
        return skip("usage: test_sink_pg path/to/scripts/pg-tmp.sh");
    snprintf(g_script, sizeof g_script, "%s", argv[1]);
    if (cluster_start() != 0)
        return skip("could not start a throwaway PostgreSQL with scripts/pg-tmp.sh (see stderr)");
    g_pg = PQconnectdb(g_url);
    if (PQstatus(g_pg) != CONNECTION_OK)
        return skip("cannot connect to the throwaway PostgreSQL");
    x("SET client_min_messages = warning");
    x("SET timezone = 'UTC'");
    diag("PostgreSQL at %s", g_url);

    const RtSinkConnector *c = rt_sink_connector("postgres");
    ok(c == &rt_sink_postgres && !strcmp(c->name, "postgres"), "connector lookup");
    test_checks(c);
    test_values_and_epochs(c);
    test_append_only(c);
    test_throughput(c);
    return tap_done();
}
