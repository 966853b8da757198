/*
 * sink_pg.c: the PostgreSQL sink writer (connector = 'postgres'), on libpq.
 *
 * open() connects, checks (or creates) the target table against the sink's
 * columns, types and primary key, and creates the progress table
 * weir_sink_progress (sink, epoch) in the same database. write_epoch() turns
 * one epoch into one transaction:
 *
 *   BEGIN; SELECT epoch FROM weir_sink_progress WHERE sink = $1 FOR UPDATE;
 *   -- stop here (ROLLBACK, no-op) when the epoch is already applied
 *   COPY pg_temp.weir_stage_del FROM STDIN; DELETE ... USING weir_stage_del;
 *   COPY pg_temp.weir_stage_up FROM STDIN;  INSERT ... SELECT ... ON CONFLICT DO UPDATE;
 *   INSERT INTO weir_sink_progress ... ON CONFLICT (sink) DO UPDATE; COMMIT;
 *
 * (append-only sinks COPY straight into the target). The batch is netted per
 * key in C first (the last change of a key wins, which is what applying them
 * in order gives), so each key is staged once and a whole epoch costs a fixed
 * number of round trips whatever its size. The staging tables are session
 * temp tables (ON COMMIT DELETE ROWS), created once per connection with the
 * target's own column types. A connection found dead is re-established, and
 * a write that fails because the connection died is tried once more at once:
 * replay is safe because the progress row decides what is already there.
 *
 * <libpq-fe.h> is included only here.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/socket.h>

#include <libpq-fe.h>

#include "arena.h"
#include "buf.h"
#include "fault.h"
#include "sink.h"
#include "sink_util.h"

#define COPY_FLUSH_BYTES (256 * 1024) /* COPY data is sent in pieces of about this size */

/* One open PostgreSQL sink. Everything but conn and the scratch buffers is
 * fixed at open() and lives in arena. */
struct RtSinkWriter {
    Arena *arena;
    const char *sink;           /* sink name: key of the progress row */
    const char *conninfo;       /* the 'url' option as given */
    const char *table_disp;     /* the 'table' option as given (for messages) */
    const char *table;          /* resolved, quoted "schema"."table" */
    bool upsert;
    int n_cols;
    int n_pk;
    int *pk;                    /* indexes into the columns */
    PGconn *conn;               /* NULL when not connected */
    bool stage_ready;           /* the staging temp tables exist on conn */
    char *sql_stage;            /* creates the staging tables */
    char *sql_copy_target;      /* append-only: COPY target (cols) FROM STDIN */
    char *sql_merge_up;         /* INSERT ... SELECT FROM weir_stage_up ON CONFLICT ... */
    char *sql_merge_del;        /* DELETE ... USING weir_stage_del */
    Buf copy;                   /* COPY data not yet sent */
    Buf text;                   /* one value's text form */
    uint32_t *slots;            /* netting hash: change index + 1, 0 = empty */
    size_t n_slots;             /* a power of two */
    bool *keep;                 /* keep[i]: change i is its key's last one */
    size_t n_keep;              /* allocated entries of keep */
    /* Rows the target rejects (on_error, sink_util.h): an epoch whose batch
     * fails with a row-level error is applied again a row at a time. */
    bool skip_rejects;          /* on_error = 'skip' (the default) */
    const char **col_names;
    char *sql_row;              /* one row: INSERT ... VALUES ($1..) [ON CONFLICT ... DO UPDATE] */
    char *sql_row_del;          /* one key: DELETE ... WHERE pk = $1 AND ... */
    Buf *ptext;                 /* n_cols parameter texts */
    RtSinkRejects rej;          /* counted since open, read by the sink operator */
};



/* Parses a boolean option ('true'/'false', absent = dflt). */
/* The PostgreSQL type CREATE TABLE uses for a weir type. */
static const char *pg_type_for(TypeId t)
{
    switch (t) {
    case TYPE_BOOL: return "boolean";
    case TYPE_INT2: return "smallint";
    case TYPE_INT4: return "integer";
    case TYPE_INT8: return "bigint";
    case TYPE_FLOAT4: return "real";
    case TYPE_FLOAT8: return "double precision";
    case TYPE_NUMERIC: return "numeric";
    case TYPE_TEXT: return "text";
    case TYPE_BYTEA: return "bytea";
    case TYPE_DATE: return "date";
    case TYPE_TIMESTAMP: return "timestamp";
    case TYPE_TIMESTAMPTZ: return "timestamptz";
    case TYPE_INTERVAL: return "interval";
    case TYPE_JSONB: return "jsonb";
    case TYPE_NULL:
    case TYPE__COUNT: break;
    }
    return "text";
}

/* Whether a column of PostgreSQL type typname (pg_type.typname of the base
 * type) can take values of weir type t without loss. */
static bool pg_type_ok(TypeId t, const char *typname)
{
    static const char *const ok[TYPE__COUNT][5] = {
        [TYPE_BOOL] = {"bool"},
        [TYPE_INT2] = {"int2", "int4", "int8", "numeric"},
        [TYPE_INT4] = {"int4", "int8", "numeric"},
        [TYPE_INT8] = {"int8", "numeric"},
        [TYPE_FLOAT4] = {"float4", "float8", "numeric"},
        [TYPE_FLOAT8] = {"float8", "numeric"},
        [TYPE_NUMERIC] = {"numeric"},
        [TYPE_TEXT] = {"text", "varchar", "bpchar"},
        [TYPE_BYTEA] = {"bytea"},
        [TYPE_DATE] = {"date"},
        [TYPE_TIMESTAMP] = {"timestamp"},
        [TYPE_TIMESTAMPTZ] = {"timestamptz"},
        [TYPE_INTERVAL] = {"interval"},
        [TYPE_JSONB] = {"jsonb", "json"},
    };
    if ((int)t <= 0 || t >= TYPE__COUNT)
        return false;
    for (int k = 0; k < 5 && ok[t][k]; k++)
        if (!strcmp(ok[t][k], typname))
            return true;
    return false;
}

/* ---- helpers: libpq calls and errors ---- */

static void notice_ignore(void *arg, const char *msg) { (void)arg, (void)msg; }

/* Fault injection ("pg_exec"): the connection breaks under the next call,
 * as when the server restarts or the network drops. The socket is shut
 * down, so libpq meets a real I/O error and reports the connection lost. */
static void fault_break(RtSinkWriter *w)
{
    if (FAULT("pg_exec") && w->conn)
        shutdown(PQsocket(w->conn), SHUT_RDWR);
}

/* Records the error of res (or of the connection) on err and clears res.
 * The SQLSTATE is the server's when it sent one; 08006 when the connection
 * is gone. Returns -1. */
static int pg_fail(RtSinkWriter *w, PGresult *res, const char *what, WError *err)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    char buf[400];
    if (!msg || !*msg) {
        snprintf(buf, sizeof buf, "%s", w->conn ? PQerrorMessage(w->conn) : "not connected");
        size_t n = strlen(buf);
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
            buf[--n] = 0;
        msg = buf;
    }
    if (!state || strlen(state) != 5)
        state = (!w->conn || PQstatus(w->conn) != CONNECTION_OK) ? SQLSTATE_CONNECTION_FAILURE
                                                                   : SQLSTATE_INTERNAL;
    if (!err->set) {
        werr(err, state, 0, "sink \"%s\": %s: %s", w->sink, what, msg);
        const char *d = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL) : NULL;
        const char *h = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_HINT) : NULL;
        if (d)
            werr_detail(err, "%s", d);
        if (h)
            werr_hint(err, "%s", h);
    }
    PQclear(res);
    return -1;
}

/* Runs a statement without parameters that returns no rows we need. */
static int pg_exec(RtSinkWriter *w, const char *sql, const char *what, WError *err)
{
    fault_break(w);
    PGresult *res = PQexec(w->conn, sql);
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        return pg_fail(w, res, what, err);
    PQclear(res);
    return 0;
}

/* Runs a statement with text parameters; returns its result (caller clears)
 * or NULL with err. */
static PGresult *pg_query(RtSinkWriter *w, const char *sql, int n, const char *const *params,
                          const char *what, WError *err)
{
    fault_break(w);
    PGresult *res = PQexecParams(w->conn, sql, n, NULL, params, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        pg_fail(w, res, what, err);
        return NULL;
    }
    return res;
}

static bool conn_ok(const RtSinkWriter *w) { return w->conn && PQstatus(w->conn) == CONNECTION_OK; }

/* Connects (again): session settings fixed so the text forms weir sends
 * parse as meant. Errors: 08006 with libpq's message. */
static int pg_connect(RtSinkWriter *w, WError *err)
{
    if (w->conn)
        PQfinish(w->conn);
    w->conn = NULL;
    w->stage_ready = false;
    char app[64];
    snprintf(app, sizeof app, "weir-sink:%s", w->sink);
    /* Keywords before dbname are defaults the URL may override; the ones
     * after it are forced. */
    const char *keys[] = {"connect_timeout", "application_name", "keepalives_idle", "keepalives_interval",
                          "keepalives_count", "dbname", "client_encoding", NULL};
    const char *vals[] = {"10", app, "30", "10", "3", w->conninfo, "UTF8", NULL};
    PGconn *c = FAULT("pg_connect") ? NULL : PQconnectdbParams(keys, vals, 1);
    if (!c || PQstatus(c) != CONNECTION_OK) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", c ? PQerrorMessage(c) : "out of memory");
        size_t n = strlen(msg);
        while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
            msg[--n] = 0;
        PQfinish(c);
        return werr(err, SQLSTATE_CONNECTION_FAILURE, 0, "sink \"%s\": could not connect to PostgreSQL: %s",
                    w->sink, msg);
    }
    PQsetNoticeProcessor(c, notice_ignore, NULL);
    w->conn = c;
    return pg_exec(w, "SET datestyle = ISO; SET intervalstyle = postgres; SET timezone = 'UTC';"
                      " SET client_min_messages = warning",
                   "session setup", err);
}

/* Connects unless the connection looks alive. */
static int ensure_conn(RtSinkWriter *w, WError *err)
{
    return conn_ok(w) ? 0 : pg_connect(w, err);
}

/* ---- open: table checks ---- */

/* Creates the target table from the spec (IF NOT EXISTS). */
static int create_target(RtSinkWriter *w, const RtSinkSpec *spec, const char *qname, WError *err)
{
    Buf b = BUF_INIT;
    buf_printf(&b, "CREATE TABLE IF NOT EXISTS %s (", qname);
    for (int i = 0; i < spec->n_cols; i++) {
        if (i)
            buf_puts(&b, ", ");
        sink_put_ident(&b, spec->col_names[i]);
        buf_printf(&b, " %s", pg_type_for(spec->col_types[i]));
    }
    if (spec->upsert && spec->n_pk > 0) {
        buf_puts(&b, ", PRIMARY KEY (");
        for (int k = 0; k < spec->n_pk; k++) {
            if (k)
                buf_puts(&b, ", ");
            sink_put_ident(&b, spec->col_names[spec->pk[k]]);
        }
        buf_putc(&b, ')');
    }
    buf_putc(&b, ')');
    int rc = pg_exec(w, b.data, "create_table", err);
    buf_free(&b);
    return rc;
}

/* Checks the columns of table oid against the spec. */
static int check_columns(RtSinkWriter *w, const RtSinkSpec *spec, const char *oid, WError *err)
{
    const char *params[] = {oid};
    PGresult *res = pg_query(w,
        "SELECT a.attname, b.typname, format_type(a.atttypid, a.atttypmod),"
        "       a.attnotnull AND NOT a.atthasdef AND a.attidentity = '' AND a.attgenerated = ''"
        "  FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid"
        "  JOIN pg_type b ON b.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END"
        " WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        1, params, "reading the table's columns", err);
    if (!res)
        return -1;
    int rc = 0, n = PQntuples(res);
    for (int i = 0; i < spec->n_cols && rc == 0; i++) {
        int r = 0;
        while (r < n && strcmp(PQgetvalue(res, r, 0), spec->col_names[i]) != 0)
            r++;
        if (r == n) {
            rc = werr(err, SQLSTATE_UNDEFINED_COLUMN, 0, "sink \"%s\": column \"%s\" does not exist in table %s",
                      w->sink, spec->col_names[i], w->table_disp);
        } else if (!pg_type_ok(spec->col_types[i], PQgetvalue(res, r, 1))) {
            rc = werr(err, SQLSTATE_DATATYPE_MISMATCH, 0,
                      "sink \"%s\": column \"%s\" of table %s has type %s, but the sink writes %s", w->sink,
                      spec->col_names[i], w->table_disp, PQgetvalue(res, r, 2), type_name(spec->col_types[i]));
        }
    }
    /* A NOT NULL column the sink never fills would fail every insert. */
    for (int r = 0; r < n && rc == 0; r++) {
        if (strcmp(PQgetvalue(res, r, 3), "t") != 0)
            continue;
        int i = 0;
        while (i < spec->n_cols && strcmp(PQgetvalue(res, r, 0), spec->col_names[i]) != 0)
            i++;
        if (i == spec->n_cols)
            rc = werr(err, SQLSTATE_NOT_NULL_VIOLATION, 0,
                      "sink \"%s\": column \"%s\" of table %s is NOT NULL without a default, and the sink does not write it",
                      w->sink, PQgetvalue(res, r, 0), w->table_disp);
    }
    PQclear(res);
    return rc;
}

/* For upsert: the table's primary key must be exactly the spec's key. */
static int check_pk(RtSinkWriter *w, const RtSinkSpec *spec, const char *oid, WError *err)
{
    const char *params[] = {oid};
    PGresult *res = pg_query(w,
        "SELECT a.attname FROM pg_index i"
        "  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)"
        " WHERE i.indrelid = $1::oid AND i.indisprimary ORDER BY a.attnum",
        1, params, "reading the table's primary key", err);
    if (!res)
        return -1;
    int n = PQntuples(res);
    bool same = n == spec->n_pk;
    for (int k = 0; k < spec->n_pk && same; k++) {
        int r = 0;
        while (r < n && strcmp(PQgetvalue(res, r, 0), spec->col_names[spec->pk[k]]) != 0)
            r++;
        same = r < n;
    }
    int rc = 0;
    if (!same) {
        Buf want = BUF_INIT, have = BUF_INIT;
        for (int k = 0; k < spec->n_pk; k++)
            buf_printf(&want, "%s%s", k ? ", " : "", spec->col_names[spec->pk[k]]);
        for (int r = 0; r < n; r++)
            buf_printf(&have, "%s%s", r ? ", " : "", PQgetvalue(res, r, 0));
        if (n == 0)
            rc = werr(err, SQLSTATE_INVALID_COLUMN_REFERENCE, 0,
                      "sink \"%s\": table %s has no primary key, but the upsert sink needs PRIMARY KEY (%s)",
                      w->sink, w->table_disp, want.data);
        else
            rc = werr(err, SQLSTATE_INVALID_COLUMN_REFERENCE, 0,
                      "sink \"%s\": the primary key of table %s is (%s), but the upsert sink's key is (%s)",
                      w->sink, w->table_disp, have.data, want.data);
        buf_free(&want);
        buf_free(&have);
    }
    PQclear(res);
    return rc;
}

/* Resolves the table (creating it when asked), checks it and builds the
 * statements write_epoch() uses. */
static int check_target(RtSinkWriter *w, const RtSinkSpec *spec, bool create, WError *err)
{
    char *parts[2];
    int np = sink_split_name(w->arena, w->table_disp, parts, true);
    if (np < 0)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "sink \"%s\": invalid table name '%s'", w->sink,
                    w->table_disp);
    Buf q = BUF_INIT;
    for (int i = 0; i < np; i++) {
        if (i)
            buf_putc(&q, '.');
        sink_put_ident(&q, parts[i]);
    }
    int rc = create ? create_target(w, spec, q.data, err) : 0;
    PGresult *res = NULL;
    if (rc == 0) {
        const char *params[] = {q.data};
        res = pg_query(w,
            "SELECT c.oid, c.relkind, quote_ident(n.nspname) || '.' || quote_ident(c.relname)"
            "  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1)",
            1, params, "looking up the table", err);
        rc = res ? 0 : -1;
    }
    buf_free(&q);
    if (rc)
        return -1;
    if (PQntuples(res) == 0) {
        PQclear(res);
        werr(err, SQLSTATE_UNDEFINED_TABLE, 0, "sink \"%s\": table %s does not exist", w->sink, w->table_disp);
        werr_hint(err, "Create it, or add create_table = 'true' to the sink's WITH options.");
        return -1;
    }
    const char *kind = PQgetvalue(res, 0, 1);
    if (strcmp(kind, "r") != 0 && strcmp(kind, "p") != 0) {
        PQclear(res);
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, 0, "sink \"%s\": %s is not a table", w->sink, w->table_disp);
    }
    char *oid = arena_strdup(w->arena, PQgetvalue(res, 0, 0));
    w->table = arena_strdup(w->arena, PQgetvalue(res, 0, 2));
    PQclear(res);
    if (check_columns(w, spec, oid, err) || (spec->upsert && check_pk(w, spec, oid, err)))
        return -1;
    return 0;
}

/* Builds the SQL text used per epoch (column lists quoted once). */
static void build_sql(RtSinkWriter *w, const RtSinkSpec *spec)
{
    Buf cols = BUF_INIT, pks = BUF_INIT, b = BUF_INIT;
    for (int i = 0; i < spec->n_cols; i++) {
        if (i)
            buf_puts(&cols, ", ");
        sink_put_ident(&cols, spec->col_names[i]);
    }
    for (int k = 0; k < spec->n_pk; k++) {
        if (k)
            buf_puts(&pks, ", ");
        sink_put_ident(&pks, spec->col_names[spec->pk[k]]);
    }
    buf_printf(&b, "COPY %s (%s) FROM STDIN", w->table, cols.data);
    w->sql_copy_target = arena_strdup(w->arena, b.data);
    Buf vals = BUF_INIT;
    for (int i = 0; i < spec->n_cols; i++)
        buf_printf(&vals, "%s$%d", i ? ", " : "", i + 1);
    buf_reset(&b);
    buf_printf(&b, "INSERT INTO %s (%s) VALUES (%s)", w->table, cols.data, vals.data);
    buf_free(&vals);
    w->sql_row = arena_strdup(w->arena, b.data); /* append-only; an upsert sink adds its ON CONFLICT below */
    if (spec->upsert) {
        buf_reset(&b);
        buf_printf(&b,
                   "DROP TABLE IF EXISTS pg_temp.weir_stage_up, pg_temp.weir_stage_del;"
                   " CREATE TEMP TABLE weir_stage_up ON COMMIT DELETE ROWS AS SELECT %s FROM %s WITH NO DATA;"
                   " CREATE TEMP TABLE weir_stage_del ON COMMIT DELETE ROWS AS SELECT %s FROM %s WITH NO DATA",
                   cols.data, w->table, pks.data, w->table);
        w->sql_stage = arena_strdup(w->arena, b.data);
        buf_reset(&b);
        buf_printf(&b, "INSERT INTO %s (%s) SELECT %s FROM pg_temp.weir_stage_up ON CONFLICT (%s) DO ", w->table,
                   cols.data, cols.data, pks.data);
        int n_set = 0;
        for (int i = 0; i < spec->n_cols; i++) {
            bool is_pk = false;
            for (int k = 0; k < spec->n_pk; k++)
                is_pk |= spec->pk[k] == i;
            if (is_pk)
                continue;
            buf_puts(&b, n_set++ ? ", " : "UPDATE SET ");
            sink_put_ident(&b, spec->col_names[i]);
            buf_puts(&b, " = EXCLUDED.");
            sink_put_ident(&b, spec->col_names[i]);
        }
        if (n_set == 0)
            buf_puts(&b, "NOTHING");
        w->sql_merge_up = arena_strdup(w->arena, b.data);
        /* The same ON CONFLICT for one row: everything after "weir_stage_up ". */
        const char *tail = strstr(w->sql_merge_up, " ON CONFLICT (");
        w->sql_row = arena_printf(w->arena, "%s%s", w->sql_row, tail);
        buf_reset(&b);
        buf_printf(&b, "DELETE FROM %s WHERE ", w->table);
        for (int k = 0; k < spec->n_pk; k++) {
            buf_puts(&b, k ? " AND " : "");
            sink_put_ident(&b, spec->col_names[spec->pk[k]]);
            buf_printf(&b, " = $%d", k + 1);
        }
        w->sql_row_del = arena_strdup(w->arena, b.data);
        buf_reset(&b);
        buf_printf(&b, "DELETE FROM %s AS t USING pg_temp.weir_stage_del AS d WHERE ", w->table);
        for (int k = 0; k < spec->n_pk; k++) {
            if (k)
                buf_puts(&b, " AND ");
            buf_puts(&b, "t.");
            sink_put_ident(&b, spec->col_names[spec->pk[k]]);
            buf_puts(&b, " = d.");
            sink_put_ident(&b, spec->col_names[spec->pk[k]]);
        }
        w->sql_merge_del = arena_strdup(w->arena, b.data);
    }
    buf_free(&cols);
    buf_free(&pks);
    buf_free(&b);
}

static void pg_close(RtSinkWriter *w)
{
    if (!w)
        return;
    if (w->conn)
        PQfinish(w->conn);
    buf_free(&w->copy);
    buf_free(&w->text);
    if (w->ptext)
        for (int i = 0; i < w->n_cols; i++)
            buf_free(&w->ptext[i]);
    free(w->ptext);
    free(w->slots);
    free(w->keep);
    arena_free(w->arena);
    free(w);
}

static int pg_open(const RtSinkSpec *spec, RtSinkWriter **out, WError *err)
{
    *out = NULL;
    const char *url, *table;
    bool create;
    if (sink_db_options(spec, "url", &url, &table, &create, err))
        return -1;

    RtSinkWriter *w = xcalloc(1, sizeof *w);
    w->arena = arena_new(0);
    w->sink = arena_strdup(w->arena, spec->name);
    w->conninfo = arena_strdup(w->arena, url);
    w->table_disp = arena_strdup(w->arena, table);
    w->upsert = spec->upsert;
    w->n_cols = spec->n_cols;
    w->n_pk = spec->upsert ? spec->n_pk : 0;
    w->pk = arena_alloc(w->arena, sizeof(int) * (size_t)(w->n_pk + 1));
    if (w->n_pk) /* an append-only sink has no key, and spec->pk may be NULL */
        memcpy(w->pk, spec->pk, sizeof(int) * (size_t)w->n_pk);

    if (pg_connect(w, err) || check_target(w, spec, create, err))
        goto fail;
    /* Concurrent writers may race on IF NOT EXISTS (unique violation on the
     * catalog); the second try finds the table. */
    WError e1;
    werr_clear(&e1);
    if (pg_exec(w, "CREATE TABLE IF NOT EXISTS weir_sink_progress (sink text PRIMARY KEY, epoch bigint NOT NULL)",
                "creating weir_sink_progress", &e1) &&
        pg_exec(w, "CREATE TABLE IF NOT EXISTS weir_sink_progress (sink text PRIMARY KEY, epoch bigint NOT NULL)",
                "creating weir_sink_progress", err))
        goto fail;
    if (sink_on_error(spec, &w->skip_rejects, err))
        goto fail;
    w->col_names = arena_alloc(w->arena, sizeof(char *) * (size_t)(spec->n_cols + 1));
    for (int i = 0; i < spec->n_cols; i++)
        w->col_names[i] = arena_strdup(w->arena, spec->col_names[i]);
    w->ptext = xcalloc((size_t)spec->n_cols + 1, sizeof(Buf));
    build_sql(w, spec);
    *out = w;
    return 0;
fail:
    pg_close(w);
    return -1;
}

/* ---- last_epoch ---- */

static int read_epoch(RtSinkWriter *w, bool lock, uint64_t *epoch, WError *err)
{
    const char *params[] = {w->sink};
    PGresult *res = pg_query(w,
                             lock ? "SELECT epoch FROM weir_sink_progress WHERE sink = $1 FOR UPDATE"
                                  : "SELECT epoch FROM weir_sink_progress WHERE sink = $1",
                             1, params, "reading weir_sink_progress", err);
    if (!res)
        return -1;
    *epoch = PQntuples(res) ? strtoull(PQgetvalue(res, 0, 0), NULL, 10) : 0;
    PQclear(res);
    return 0;
}

static int pg_last_epoch(RtSinkWriter *w, uint64_t *epoch, WError *err)
{
    *epoch = 0;
    for (int attempt = 0;; attempt++) {
        bool had = conn_ok(w);
        WError e;
        werr_clear(&e);
        if (ensure_conn(w, &e) == 0 && read_epoch(w, false, epoch, &e) == 0)
            return 0;
        if (attempt == 0 && had && !conn_ok(w))
            continue; /* a stale connection: once more on a fresh one */
        if (!err->set)
            *err = e;
        return -1;
    }
}

/* ---- write_epoch ---- */

/* Appends bytes to a COPY text field, escaping what COPY treats specially. */
static void copy_escape(Buf *out, const char *p, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i], e;
        switch (c) {
        case '\\': e = '\\'; break;
        case '\t': e = 't'; break;
        case '\n': e = 'n'; break;
        case '\r': e = 'r'; break;
        default: continue;
        }
        buf_append(out, p + run, i - run);
        buf_putc(out, '\\');
        buf_putc(out, e);
        run = i + 1;
    }
    buf_append(out, p + run, n - run);
}

static void copy_value(RtSinkWriter *w, const Value *v)
{
    if (v->null) {
        buf_append(&w->copy, "\\N", 2);
        return;
    }
    switch (v->type) {
    case TYPE_TEXT:
    case TYPE_JSONB: copy_escape(&w->copy, v->u.s.p, v->u.s.len); return;
    case TYPE_NUMERIC: /* its exact text, never special in COPY */
    case TYPE_INT2:
    case TYPE_INT4:
    case TYPE_INT8:
    case TYPE_BOOL: value_to_text(v, &w->copy); return; /* never special */
    default:
        buf_reset(&w->text);
        value_to_text(v, &w->text);
        copy_escape(&w->copy, w->text.data, w->text.len);
    }
}

static int copy_flush(RtSinkWriter *w, WError *err)
{
    if (w->copy.len == 0)
        return 0;
    if (PQputCopyData(w->conn, w->copy.data, (int)w->copy.len) != 1)
        return pg_fail(w, NULL, "sending COPY data", err);
    buf_reset(&w->copy);
    return 0;
}

/* Runs COPY sql and streams rows for the changes i with keep[i] (all when
 * keep is NULL): when deletes, the key columns of `before` for each delete
 * (after == NULL); otherwise all columns of `after` for each insert/update. */
static int copy_rows(RtSinkWriter *w, const char *sql, int n, const RtSinkChange *changes, const bool *keep,
                     bool deletes, WError *err)
{
    fault_break(w);
    PGresult *res = PQexec(w->conn, sql);
    if (PQresultStatus(res) != PGRES_COPY_IN)
        return pg_fail(w, res, "starting COPY", err);
    PQclear(res);
    buf_reset(&w->copy);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        if (keep && !keep[i])
            continue;
        if (deletes != (changes[i].after == NULL))
            continue;
        const Value *row = deletes ? changes[i].before : changes[i].after;
        if (!row)
            continue;
        if (deletes) {
            for (int k = 0; k < w->n_pk; k++) {
                if (k)
                    buf_putc(&w->copy, '\t');
                copy_value(w, &row[w->pk[k]]);
            }
        } else {
            for (int c = 0; c < w->n_cols; c++) {
                if (c)
                    buf_putc(&w->copy, '\t');
                copy_value(w, &row[c]);
            }
        }
        buf_putc(&w->copy, '\n');
        if (w->copy.len >= COPY_FLUSH_BYTES)
            rc = copy_flush(w, err);
    }
    if (rc == 0)
        rc = copy_flush(w, err);
    if (PQputCopyEnd(w->conn, rc ? "weir: COPY aborted" : NULL) != 1 && rc == 0)
        rc = pg_fail(w, NULL, "ending COPY", err);
    /* Drain: one result for the COPY, then NULL. */
    while ((res = PQgetResult(w->conn)) != NULL) {
        if (PQresultStatus(res) != PGRES_COMMAND_OK && rc == 0)
            rc = pg_fail(w, res, "COPY", err);
        else
            PQclear(res);
        if (PQstatus(w->conn) != CONNECTION_OK)
            break;
    }
    return rc;
}

static uint64_t key_hash(const RtSinkWriter *w, const Value *row)
{
    uint64_t h = 0x9e3779b97f4a7c15u;
    for (int k = 0; k < w->n_pk; k++)
        h = value_hash(&row[w->pk[k]], h);
    return h;
}

static bool key_eq(const RtSinkWriter *w, const Value *a, const Value *b)
{
    for (int k = 0; k < w->n_pk; k++) {
        const Value *x = &a[w->pk[k]], *y = &b[w->pk[k]];
        if (x->null != y->null || (!x->null && !value_eq(x, y)))
            return false;
    }
    return true;
}

static const Value *key_row(const RtSinkChange *c) { return c->after ? c->after : c->before; }

/* Marks in w->keep the last change of each key (applying a key's changes in
 * order leaves what its last change says), so each key is staged once and
 * ON CONFLICT never meets a key twice. */
static void net_changes(RtSinkWriter *w, int n, const RtSinkChange *changes)
{
    if ((size_t)n > w->n_keep) {
        free(w->keep);
        w->keep = xmalloc(sizeof(bool) * (size_t)n);
        w->n_keep = (size_t)n;
    }
    size_t want = 16;
    while (want < (size_t)n * 2)
        want <<= 1;
    if (want > w->n_slots) {
        free(w->slots);
        w->slots = xmalloc(sizeof(uint32_t) * want);
        w->n_slots = want;
    }
    size_t mask = want - 1;
    memset(w->slots, 0, sizeof(uint32_t) * want);
    for (int i = 0; i < n; i++) {
        const Value *row = key_row(&changes[i]);
        w->keep[i] = row != NULL;
        if (!row)
            continue;
        for (size_t s = key_hash(w, row) & mask;; s = (s + 1) & mask) {
            uint32_t j = w->slots[s];
            if (j == 0) {
                w->slots[s] = (uint32_t)i + 1;
                break;
            }
            if (key_eq(w, key_row(&changes[j - 1]), row)) {
                w->keep[j - 1] = false;
                w->slots[s] = (uint32_t)i + 1;
                break;
            }
        }
    }
}

/* Moves the sink's progress row to epoch, in the open transaction. */
static int record_progress(RtSinkWriter *w, uint64_t epoch, WError *err)
{
    char ep[24];
    snprintf(ep, sizeof ep, "%" PRIu64, epoch);
    const char *params[] = {w->sink, ep};
    PGresult *res = pg_query(w,
                             "INSERT INTO weir_sink_progress (sink, epoch) VALUES ($1, $2)"
                             " ON CONFLICT (sink) DO UPDATE SET epoch = EXCLUDED.epoch",
                             2, params, "recording the epoch", err);
    if (!res)
        return -1;
    PQclear(res);
    return 0;
}

/* One attempt at write_epoch on the current connection. */
static int write_once(RtSinkWriter *w, uint64_t epoch, int n, const RtSinkChange *changes, WError *err)
{
    if (ensure_conn(w, err))
        return -1;
    if (w->upsert && !w->stage_ready) {
        if (pg_exec(w, w->sql_stage, "creating the staging tables", err))
            return -1;
        w->stage_ready = true;
    }
    if (pg_exec(w, "BEGIN", "BEGIN", err))
        return -1;
    uint64_t done = 0;
    if (read_epoch(w, true, &done, err))
        goto fail;
    if (epoch <= done) {
        WError ignored; /* nothing was written; a failed ROLLBACK only ends the session */
        werr_clear(&ignored);
        pg_exec(w, "ROLLBACK", "ROLLBACK", &ignored);
        return 0; /* already applied: exactly-once */
    }
    if (!w->upsert) {
        if (n > 0 && copy_rows(w, w->sql_copy_target, n, changes, NULL, false, err))
            goto fail;
    } else if (n > 0) {
        net_changes(w, n, changes);
        int n_up = 0, n_del = 0;
        for (int i = 0; i < n; i++) {
            if (!w->keep[i])
                continue;
            if (changes[i].after)
                n_up++;
            else
                n_del++;
        }
        if (n_del && (copy_rows(w, "COPY pg_temp.weir_stage_del FROM STDIN", n, changes, w->keep, true, err) ||
                      pg_exec(w, w->sql_merge_del, "deleting rows", err)))
            goto fail;
        if (n_up && (copy_rows(w, "COPY pg_temp.weir_stage_up FROM STDIN", n, changes, w->keep, false, err) ||
                     pg_exec(w, w->sql_merge_up, "upserting rows", err)))
            goto fail;
    }
    if (record_progress(w, epoch, err))
        goto fail;
    fault_break(w);
    PGresult *res = PQexec(w->conn, "COMMIT");
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        return pg_fail(w, res, "COMMIT", err);
    /* COMMIT of a failed transaction reports ROLLBACK. */
    bool committed = strcmp(PQcmdStatus(res), "COMMIT") == 0;
    PQclear(res);
    if (!committed)
        return werr(err, SQLSTATE_INTERNAL, 0, "sink \"%s\": the transaction of epoch %" PRIu64 " was rolled back",
                    w->sink, epoch);
    return 0;
fail:
    if (conn_ok(w) && PQtransactionStatus(w->conn) != PQTRANS_IDLE) {
        PGresult *r = PQexec(w->conn, "ROLLBACK");
        PQclear(r);
    }
    return -1;
}

/* The parameter texts of row's columns idx[0..k) (all when idx is NULL) into
 * w->ptext; params[c] NULL for a NULL value. */
static void row_params(RtSinkWriter *w, const Value *row, const int *idx, int k, const char **params)
{
    for (int c = 0; c < k; c++) {
        const Value *v = &row[idx ? idx[c] : c];
        if (v->null) {
            params[c] = NULL;
            continue;
        }
        buf_reset(&w->ptext[c]);
        value_to_text(v, &w->ptext[c]);
        buf_putc(&w->ptext[c], 0);
        params[c] = w->ptext[c].data;
    }
}

/* Records one rejected row in weir_sink_rejects, in the epoch's transaction. */
static int reject_row(RtSinkWriter *w, uint64_t epoch, const RtSinkChange *c, PGresult *why, WError *err)
{
    const char *state = PQresultErrorField(why, PG_DIAG_SQLSTATE);
    const char *msg = PQresultErrorField(why, PG_DIAG_MESSAGE_PRIMARY);
    const char *detail = PQresultErrorField(why, PG_DIAG_MESSAGE_DETAIL);
    Buf row = BUF_INIT, m = BUF_INIT;
    sink_row_json(&row, w->n_cols, w->col_names, c->after ? c->after : c->before);
    buf_printf(&m, "%s%s%s", msg ? msg : "rejected", detail ? ": " : "", detail ? detail : "");
    char ep[24];
    snprintf(ep, sizeof ep, "%" PRIu64, epoch);
    const char *params[] = {w->sink, ep, c->after ? (c->before ? "update" : "insert") : "delete", row.data,
                            state ? state : "", m.data};
    PGresult *res = pg_query(w,
                             "INSERT INTO weir_sink_rejects (sink, epoch, op, row_data, sqlstate, message)"
                             " VALUES ($1, $2, $3, $4, $5, $6)",
                             6, params, "recording a rejected row", err);
    if (res) {
        w->rej.rows++;
        snprintf(w->rej.last, sizeof w->rej.last, "epoch %" PRIu64 ": %s %.120s: %.150s (%s)", epoch, params[2], row.data,
                 m.data, params[4]);
        PQclear(res);
    }
    buf_free(&row);
    buf_free(&m);
    return res ? 0 : -1;
}

/* write_epoch a row at a time, for an epoch whose batch the target refused
 * with a row-level error: each change under a SAVEPOINT, a refused one
 * rolled back to it and recorded in weir_sink_rejects, all in the epoch's
 * one transaction with its progress row, so it stays exactly-once. Costs a
 * few round trips per row, and runs only for such epochs. */
static int write_rowwise(RtSinkWriter *w, uint64_t epoch, int n, const RtSinkChange *changes, WError *err)
{
    if (ensure_conn(w, err))
        return -1;
    WError e1;
    werr_clear(&e1);
    static const char *const rej_ddl =
        "CREATE TABLE IF NOT EXISTS weir_sink_rejects (sink text NOT NULL, epoch bigint NOT NULL, op text NOT NULL,"
        " row_data text NOT NULL, sqlstate text NOT NULL, message text NOT NULL,"
        " rejected_at timestamptz NOT NULL DEFAULT now())";
    if (pg_exec(w, rej_ddl, "creating weir_sink_rejects", &e1) &&
        pg_exec(w, rej_ddl, "creating weir_sink_rejects", err))
        return -1;
    if (pg_exec(w, "BEGIN", "BEGIN", err))
        return -1;
    uint64_t done = 0;
    if (read_epoch(w, true, &done, err))
        goto fail;
    if (epoch <= done) {
        WError ignored;
        werr_clear(&ignored);
        pg_exec(w, "ROLLBACK", "ROLLBACK", &ignored);
        return 0;
    }
    if (w->upsert)
        net_changes(w, n, changes);
    const char **params = xcalloc((size_t)w->n_cols + 1, sizeof(char *));
    for (int i = 0; i < n; i++) {
        if (w->upsert && !w->keep[i])
            continue;
        const RtSinkChange *c = &changes[i];
        bool del = !c->after;
        int k = del ? w->n_pk : w->n_cols;
        row_params(w, del ? c->before : c->after, del ? w->pk : NULL, k, params);
        if (pg_exec(w, "SAVEPOINT weir_row", "SAVEPOINT", err))
            goto fail_params;
        fault_break(w);
        PGresult *res = PQexecParams(w->conn, del ? w->sql_row_del : w->sql_row, k, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(res) == PGRES_COMMAND_OK) {
            PQclear(res);
            if (pg_exec(w, "RELEASE SAVEPOINT weir_row", "RELEASE SAVEPOINT", err))
                goto fail_params;
            continue;
        }
        if (!sink_row_level(PQresultErrorField(res, PG_DIAG_SQLSTATE))) {
            pg_fail(w, res, del ? "deleting a row" : "writing a row", err);
            goto fail_params;
        }
        if (pg_exec(w, "ROLLBACK TO SAVEPOINT weir_row", "ROLLBACK TO SAVEPOINT", err) ||
            reject_row(w, epoch, c, res, err)) {
            PQclear(res);
            goto fail_params;
        }
        PQclear(res);
    }
    free(params);
    if (record_progress(w, epoch, err))
        goto fail;
    return pg_exec(w, "COMMIT", "COMMIT", err);
fail_params:
    free(params);
fail:
    if (conn_ok(w) && PQtransactionStatus(w->conn) != PQTRANS_IDLE) {
        PGresult *r = PQexec(w->conn, "ROLLBACK");
        PQclear(r);
    }
    return -1;
}

static void pg_rejects(RtSinkWriter *w, RtSinkRejects *out) { *out = w->rej; }

static int pg_write_epoch(RtSinkWriter *w, uint64_t epoch, int n, const RtSinkChange *changes, WError *err)
{
    if (epoch > (uint64_t)INT64_MAX)
        return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "sink \"%s\": epoch %" PRIu64 " out of range", w->sink, epoch);
    if (!w->upsert) {
        for (int i = 0; i < n; i++)
            if (changes[i].before || !changes[i].after)
                return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                            "sink \"%s\": an append-only sink got a %s in epoch %" PRIu64, w->sink,
                            changes[i].after ? "update" : "delete", epoch);
    }
    for (int attempt = 0;; attempt++) {
        bool had = conn_ok(w);
        WError e;
        werr_clear(&e);
        if (write_once(w, epoch, n, changes, &e) == 0)
            return 0;
        /* A row the target refuses (a value too long, a CHECK...): under
         * on_error = 'skip' it goes to weir_sink_rejects and the rest of
         * the epoch is applied, so one row never stops the sink. */
        if (w->skip_rejects && sink_row_level(e.sqlstate) && conn_ok(w)) {
            werr_clear(&e);
            if (write_rowwise(w, epoch, n, changes, &e) == 0)
                return 0;
        }
        /* The connection died under us (server restart, terminated backend,
         * network): once more on a fresh one. If COMMIT had gone through, the
         * progress row makes the retry a no-op. */
        if (attempt == 0 && had && !conn_ok(w))
            continue;
        if (!err->set)
            *err = e;
        return -1;
    }
}

static int pg_reset(RtSinkWriter *w, WError *err)
{
    const char *params[] = {w->sink};
    if (ensure_conn(w, err))
        return -1;
    PGresult *res = pg_query(w, "DELETE FROM weir_sink_progress WHERE sink = $1", 1, params,
                             "resetting weir_sink_progress", err);
    if (!res)
        return -1;
    PQclear(res);
    return 0;
}

const RtSinkConnector rt_sink_postgres = {
    .name = "postgres",
    .open = pg_open,
    .last_epoch = pg_last_epoch,
    .write_epoch = pg_write_epoch,
    .reset = pg_reset,
    .rejects = pg_rejects,
    .close = pg_close,
};
