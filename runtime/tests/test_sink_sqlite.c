/*
 * test_sink_sqlite.c: the SQLite sink writer on a scratch database file:
 * table checks, upsert/delete epochs, replay and ordering of epochs,
 * append-only, atomicity on error, value forms, and a 100k-row epoch.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "sink.h"
#include "tap.h"

static char g_path[256];
static sqlite3 *g_db; /* the test's own connection, to look at the file */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The first column of the first row of sql as text ("<none>" without rows,
 * "<null>" for NULL), in a static buffer. */
static const char *q(const char *sql)
{
    static char out[4096];
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(g_db, sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(out, sizeof out, "<error: %s>", sqlite3_errmsg(g_db));
        return out;
    }
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        snprintf(out, sizeof out, "%s", t ? (const char *)t : "<null>");
    } else {
        snprintf(out, sizeof out, rc == SQLITE_DONE ? "<none>" : "<error: %s>", sqlite3_errmsg(g_db));
    }
    sqlite3_finalize(st);
    return out;
}

static void x(const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(g_db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        diag("sql failed: %s: %s", sql, msg);
        sqlite3_free(msg);
    }
}

/* ---- specs ---- */

typedef struct Spec {
    CatOption opts[5];
    RtSinkSpec s;
} Spec;

/* The wide table: id bigint pk, name text, score double, flag bool, ts
 * timestamp, tz timestamptz, d date, iv interval, b bytea, j jsonb. */
static const char *const WIDE_NAMES[] = {"id", "name", "score", "flag", "ts", "tz", "d", "iv", "b", "j"};
static const TypeId WIDE_TYPES[] = {TYPE_INT8, TYPE_TEXT, TYPE_FLOAT8, TYPE_BOOL, TYPE_TIMESTAMP,
                                    TYPE_TIMESTAMPTZ, TYPE_DATE, TYPE_INTERVAL, TYPE_BYTEA, TYPE_JSONB};
#define WIDE_N 10
/* The narrow table: k int pk, v text. */
static const char *const KV_NAMES[] = {"k", "v"};
static const TypeId KV_TYPES[] = {TYPE_INT4, TYPE_TEXT};
static const int PK0[] = {0};

static void spec_init(Spec *sp, const char *name, const char *table, const char *create, bool upsert, int n_cols,
                      const char *const *names, const TypeId *types)
{
    memset(sp, 0, sizeof *sp);
    int n = 0;
    sp->opts[n++] = (CatOption){"Path", g_path}; /* keys are case-insensitive */
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

/* Expects open to fail with sqlstate and a message containing needle. */
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
        diag("last_epoch: %s", e.msg);
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

int main(void)
{
    const RtSinkConnector *c = rt_sink_connector("sqlite");
    ok(c == &rt_sink_sqlite && !strcmp(c->name, "sqlite"), "connector lookup");
    char dir[] = "/tmp/weir-sink-sqlite-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_path, sizeof g_path, "%s/target.db", dir);
    WError e;
    Spec sp;

    /* ---- options and table checks ---- */
    spec_init(&sp, "s_missing", NULL, NULL, true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "22023", "'table' is required", "table option required");
    spec_init(&sp, "s_missing", "kv", "maybe", true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "22023", "create_table", "create_table must be a boolean");
    spec_init(&sp, "s_missing", "kv", NULL, true, 2, KV_NAMES, KV_TYPES);
    {
        RtSinkWriter *w = NULL;
        werr_clear(&e);
        int rc = c->open(&sp.s, &w, &e);
        ok(rc == -1 && !strcmp(e.sqlstate, "42P01") && strstr(e.msg, "kv") && strstr(e.hint, "create_table = 'true'"),
           "missing table: 42P01 naming it, hint create_table");
    }
    if (sqlite3_open(g_path, &g_db) != SQLITE_OK)
        return 1;
    x("CREATE TABLE bad_type (k INTEGER PRIMARY KEY, v BIGINT)");
    spec_init(&sp, "s_bad", "bad_type", NULL, true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "42804", "\"v\"", "text column into INTEGER affinity: 42804 naming the column");
    x("CREATE TABLE bad_type2 (k TEXT PRIMARY KEY, v TEXT)");
    spec_init(&sp, "s_bad", "bad_type2", NULL, true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "42804", "column \"k\" of table bad_type2 has type TEXT (TEXT affinity), but the sink writes integer",
               "int column into TEXT affinity: 42804 naming both types");
    x("CREATE TABLE bad_pk (k INT, v TEXT PRIMARY KEY)");
    spec_init(&sp, "s_bad", "bad_pk", NULL, true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "42P10", "primary key of table bad_pk is (v), but the upsert sink's key is (k)",
               "wrong primary key: 42P10");
    x("CREATE TABLE no_pk (k INT, v TEXT)");
    spec_init(&sp, "s_bad", "no_pk", NULL, true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "42P10", "no primary key", "no primary key: 42P10");
    x("CREATE TABLE missing_col (k INT PRIMARY KEY)");
    spec_init(&sp, "s_bad", "missing_col", NULL, true, 2, KV_NAMES, KV_TYPES);
    open_fails(c, &sp, "42703", "\"v\"", "missing column: 42703");
    x("CREATE TABLE lenient (K NUMERIC PRIMARY KEY, v VARCHAR(10), extra TEXT DEFAULT 'x')");
    spec_init(&sp, "s_len", "lenient", NULL, true, 2, KV_NAMES, KV_TYPES);
    {
        RtSinkWriter *w = open_ok(c, &sp, "lenient affinities, case-insensitive names, extra column with default");
        if (w)
            c->close(w);
    }

    /* ---- create_table, upsert and delete epochs ---- */
    spec_init(&sp, "wide", "wide", "true", true, WIDE_N, WIDE_NAMES, WIDE_TYPES);
    RtSinkWriter *w = open_ok(c, &sp, "create_table = 'true' creates the table");
    if (!w)
        return tap_done();
    is_str(q("SELECT count(*) FROM pragma_table_info('wide') WHERE pk = 1 AND name = 'id'"), "1",
           "created with the primary key");
    is_int(last(c, w), 0, "last_epoch of a new sink is 0");

    const char *nasty = "it's \"quoted\"\\back\tslash\nnew\r\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    Value r1[WIDE_N], r2[WIDE_N], r3[WIDE_N];
    Interval iv = {.months = 1, .days = 2, .usecs = 3 * USECS_PER_SEC};
    int64_t ts = 0, day = 0;
    parse_timestamp("2024-01-02 03:04:05.5", strlen("2024-01-02 03:04:05.5"), &ts);
    parse_date("2024-02-29", 10, &day);
    r1[0] = I8(1), r1[1] = T(nasty), r1[2] = value_float(TYPE_FLOAT8, 1.5), r1[3] = value_bool(true);
    r1[4] = value_int(TYPE_TIMESTAMP, ts), r1[5] = value_int(TYPE_TIMESTAMPTZ, ts);
    r1[6] = value_int(TYPE_DATE, day), r1[7] = (Value){.type = TYPE_INTERVAL, .u.iv = iv};
    r1[8] = value_str(TYPE_BYTEA, "\x00\x01\xff", 3), r1[9] = value_str(TYPE_JSONB, "{\"a\": 1}", 8);
    for (int i = 0; i < WIDE_N; i++)
        r2[i] = value_null(WIDE_TYPES[i]);
    r2[0] = I8(2);
    memcpy(r3, r2, sizeof r3);
    r3[0] = I8(3), r3[1] = T(""), r3[3] = value_bool(false);
    RtSinkChange e1[] = {{NULL, r1}, {NULL, r2}, {NULL, r3}};
    ok(wr(c, w, 1, 3, e1, &e) == 0, "epoch 1: three inserts");
    is_int(last(c, w), 1, "last_epoch = 1");
    is_str(q("SELECT count(*) FROM wide"), "3", "three rows");
    is_str(q("SELECT name FROM wide WHERE id = 1"), nasty, "quotes, backslash, tab, newline, CR, unicode survive");
    is_str(q("SELECT typeof(name) || typeof(score) || typeof(flag) || typeof(b) FROM wide WHERE id = 1"),
           "textrealintegerblob", "storage classes");
    is_str(q("SELECT score || ' ' || flag || ' ' || hex(b) || ' ' || j FROM wide WHERE id = 1"),
           "1.5 1 0001FF {\"a\": 1}", "double, boolean 1, bytea, jsonb");
    is_str(q("SELECT ts || '|' || tz || '|' || d || '|' || iv FROM wide WHERE id = 1"),
           "2024-01-02 03:04:05.5|2024-01-02 03:04:05.5+00:00|2024-02-29|1 mon 2 days 00:00:03",
           "timestamp, timestamptz, date, interval as ISO text");
    is_str(q("SELECT strftime('%s', tz) - strftime('%s', ts) FROM wide WHERE id = 1"), "0",
           "SQLite date functions read the timestamps");
    is_str(q("SELECT count(*) FROM wide WHERE id = 2 AND name IS NULL AND score IS NULL AND ts IS NULL AND b IS NULL"),
           "1", "NULLs stay NULL");
    is_str(q("SELECT quote(name) || flag FROM wide WHERE id = 3"), "''0", "empty string is not NULL; false is 0");

    Value r1b[WIDE_N];
    memcpy(r1b, r1, sizeof r1b);
    r1b[1] = T("updated");
    RtSinkChange e2[] = {{r1, r1b}, {r2, NULL}};
    ok(wr(c, w, 2, 2, e2, &e) == 0, "epoch 2: an update and a delete");
    is_str(q("SELECT group_concat(id || ':' || ifnull(name, '-'), ',') FROM (SELECT * FROM wide ORDER BY id)"),
           "1:updated,3:", "update applied, row 2 deleted");
    is_str(q("SELECT ts FROM wide WHERE id = 1"), "2024-01-02 03:04:05.5", "update keeps the other columns");

    /* ---- replay and ordering ---- */
    Value r9[WIDE_N];
    memcpy(r9, r2, sizeof r9);
    r9[0] = I8(9);
    RtSinkChange e3[] = {{NULL, r9}};
    ok(wr(c, w, 3, 1, e3, &e) == 0, "epoch 3 applied");
    ok(wr(c, w, 3, 1, e3, &e) == 0, "epoch 3 again returns 0");
    RtSinkChange e3b[] = {{r1b, NULL}};
    ok(wr(c, w, 3, 1, e3b, &e) == 0 && wr(c, w, 2, 1, e3b, &e) == 0,
       "replays of epochs 3 and 2 with other changes return 0");
    is_str(q("SELECT group_concat(id, ',') FROM (SELECT id FROM wide ORDER BY id)"), "1,3,9",
           "replayed epochs are no-ops (applied once)");
    is_int(last(c, w), 3, "last_epoch = 3");
    ok(wr(c, w, 7, 0, NULL, &e) == 0, "an empty epoch 7 (gaps are fine)");
    is_int(last(c, w), 7, "last_epoch = 7 after an empty epoch");
    c->close(w);
    w = open_ok(c, &sp, "reopen");
    is_int(last(c, w), 7, "last_epoch survives close/open");
    ok(c->reset(w, &e) == 0, "reset");
    is_int(last(c, w), 0, "after reset (a new sink of the same name) last_epoch is 0");
    ok(wr(c, w, 7, 0, NULL, &e) == 0, "epoch 7 again");
    is_int(last(c, w), 7, "epoch 7 applies again after the reset");

    /* The same key twice in one epoch: applied in order. */
    Value a10[WIDE_N], b10[WIDE_N], a11[WIDE_N];
    memcpy(a10, r2, sizeof a10), memcpy(b10, r2, sizeof b10), memcpy(a11, r2, sizeof a11);
    a10[0] = I8(10), a10[1] = T("first"), b10[0] = I8(10), b10[1] = T("second");
    a11[0] = I8(11), a11[1] = T("back");
    RtSinkChange e8[] = {{NULL, a10}, {a10, b10}, {NULL, a11}, {a11, NULL}, {r9, NULL}, {NULL, r9}};
    ok(wr(c, w, 8, 6, e8, &e) == 0, "epoch 8: keys appearing twice");
    is_str(q("SELECT group_concat(id || ':' || ifnull(name, '-'), ',') FROM (SELECT * FROM wide ORDER BY id)"),
           "1:updated,3:,9:-,10:second", "insert+update -> last, insert+delete -> gone, delete+insert -> present");

    /* Atomicity under on_error = 'fail': a failing row rolls back the whole epoch. */
    x("CREATE TABLE strict_kv (k INT PRIMARY KEY, v TEXT NOT NULL)");
    Spec sp2;
    spec_init(&sp2, "strict", "strict_kv", NULL, true, 2, KV_NAMES, KV_TYPES);
    sp2.opts[sp2.s.n_options++] = (CatOption){"on_error", "fail"};
    RtSinkWriter *w2 = open_ok(c, &sp2, "second sink in the same file");
    Value k1[] = {I4(1), T("one")}, k2[] = {I4(2), value_null(TYPE_TEXT)};
    RtSinkChange bad[] = {{NULL, k1}, {NULL, k2}};
    werr_clear(&e);
    ok(c->write_epoch(w2, 1, 2, bad, &e) == -1 && !strcmp(e.sqlstate, "23502"), "NOT NULL violation: 23502");
    is_str(q("SELECT count(*) FROM strict_kv"), "0", "nothing of the failed epoch applied");
    is_int(last(c, w2), 0, "progress not advanced by the failed epoch");
    RtSinkChange good[] = {{NULL, k1}};
    ok(wr(c, w2, 1, 1, good, &e) == 0, "the epoch retried with good data");
    is_int(last(c, w2), 1, "its progress is its own");
    is_int(last(c, w), 8, "the other sink's progress is untouched");
    c->close(w2);

    /* on_error = 'skip' (the default): a row the target refuses is kept in
     * weir_sink_rejects, in the epoch's transaction, and the rest applies. */
    x("CREATE TABLE checked_kv (k INT PRIMARY KEY, v TEXT NOT NULL CHECK (length(v) < 5))");
    Spec sp5;
    spec_init(&sp5, "checked", "checked_kv", NULL, true, 2, KV_NAMES, KV_TYPES);
    RtSinkWriter *w5 = open_ok(c, &sp5, "a sink over a table with a CHECK");
    Value c1[] = {I4(1), T("ok")}, c2[] = {I4(2), T("too long")}, c3[] = {I4(3), value_null(TYPE_TEXT)},
          c4[] = {I4(4), T("fine")};
    RtSinkChange mixed[] = {{NULL, c1}, {NULL, c2}, {NULL, c3}, {NULL, c4}};
    ok(wr(c, w5, 1, 4, mixed, &e) == 0, "skip: the epoch with two refused rows is delivered");
    is_str(q("SELECT group_concat(k || '=' || v, ',') FROM (SELECT * FROM checked_kv ORDER BY k)"), "1=ok,4=fine",
           "the rows the target accepts are applied");
    is_str(q("SELECT group_concat(epoch || ' ' || op || ' ' || sqlstate || ' ' || row_data, ' | ') FROM "
             "(SELECT * FROM weir_sink_rejects WHERE sink = 'checked' ORDER BY row_data)"),
           "1 insert 23514 {\"k\": \"2\", \"v\": \"too long\"} | 1 insert 23502 {\"k\": \"3\", \"v\": null}",
           "the refused ones are in weir_sink_rejects with their SQLSTATE and row");
    RtSinkRejects rj = {0};
    c->rejects(w5, &rj);
    ok(rj.rows == 2 && strstr(rj.last, "epoch 1: insert"), "rejects() counts them and names the last");
    is_int(last(c, w5), 1, "progress moved to the epoch");
    ok(wr(c, w5, 1, 4, mixed, &e) == 0, "the same epoch delivered again");
    is_str(q("SELECT count(*) FROM weir_sink_rejects WHERE sink = 'checked'"), "2",
           "is a no-op: no rejected row recorded twice");
    c->close(w5);

    /* ---- append-only ---- */
    Spec sp3;
    spec_init(&sp3, "log", "log", "true", false, 2, KV_NAMES, KV_TYPES);
    RtSinkWriter *w3 = open_ok(c, &sp3, "append-only sink, create_table");
    Value l1[] = {I4(1), T("a")}, l2[] = {I4(1), T("a again")};
    RtSinkChange ins[] = {{NULL, l1}, {NULL, l2}};
    ok(wr(c, w3, 1, 2, ins, &e) == 0, "append-only inserts (duplicate keys are fine)");
    is_str(q("SELECT count(*) FROM log"), "2", "both rows appended");
    RtSinkChange retract[] = {{NULL, l1}, {l1, NULL}};
    werr_clear(&e);
    ok(c->write_epoch(w3, 2, 2, retract, &e) == -1 && !strcmp(e.sqlstate, "22023"),
       "append-only rejects a retraction with 22023");
    RtSinkChange upd[] = {{l1, l2}};
    werr_clear(&e);
    ok(c->write_epoch(w3, 2, 1, upd, &e) == -1 && !strcmp(e.sqlstate, "22023"), "and an update");
    is_str(q("SELECT count(*) FROM log"), "2", "nothing of the rejected epoch applied");
    is_int(last(c, w3), 1, "progress unchanged");
    c->close(w3);

    /* ---- throughput ---- */
    enum { N_BIG = 100000 };
    Value *rows = malloc(sizeof(Value) * 2 * N_BIG);
    RtSinkChange *big = malloc(sizeof(RtSinkChange) * N_BIG);
    for (int i = 0; i < N_BIG; i++) {
        rows[2 * i] = I4(i);
        rows[2 * i + 1] = T("some payload text");
        big[i] = (RtSinkChange){NULL, &rows[2 * i]};
    }
    Spec sp4;
    spec_init(&sp4, "big", "big", "true", true, 2, KV_NAMES, KV_TYPES);
    RtSinkWriter *w4 = open_ok(c, &sp4, "big sink");
    double t0 = now_s();
    ok(wr(c, w4, 1, N_BIG, big, &e) == 0, "100k-row epoch");
    double t1 = now_s();
    ok(wr(c, w4, 2, N_BIG, big, &e) == 0, "100k-row epoch of updates");
    double t2 = now_s();
    diag("sqlite: 100k inserts in %.3f s (%.0f rows/s), 100k upserts over existing keys in %.3f s (%.0f rows/s)",
         t1 - t0, N_BIG / (t1 - t0), t2 - t1, N_BIG / (t2 - t1));
    is_str(q("SELECT count(*) FROM big"), "100000", "100k rows");
    c->close(w4);
    free(rows);
    free(big);
    c->close(w);

    sqlite3_close(g_db);
    unlink(g_path);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
    return tap_done();
}
