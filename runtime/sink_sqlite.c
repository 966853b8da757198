/*
 * sink_sqlite.c: the SQLite sink writer (connector = 'sqlite'), the embedded
 * upsert target.
 *
 * open() opens (creating) the database file, checks or creates the target
 * table through pragma_table_info (types judged by SQLite's affinity rules,
 * leniently: a column is refused only when its affinity would change the
 * values, e.g. TEXT for a BIGINT) and creates weir_sink_progress (sink,
 * epoch). write_epoch() applies one epoch in one BEGIN IMMEDIATE ... COMMIT
 * with the progress row, so exactly-once works as for PostgreSQL: an epoch
 * the file already records is a no-op. SQLite is in-process, so one prepared
 * statement stepped per row is the batch; changes are applied in order.
 *
 * Stored forms: integers and booleans (0/1) as INTEGER, floats as REAL, text
 * and jsonb as TEXT, bytea as BLOB, date/timestamp as ISO text
 * ('2024-01-02', '2024-01-02 03:04:05.5', timestamptz with '+00:00'), which
 * SQLite's date functions read, intervals in Postgres text form.
 *
 * <sqlite3.h> is included only here.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sqlite3.h>

#include "arena.h"
#include "buf.h"
#include "sink.h"
#include "sink_util.h"

/* One open SQLite sink; everything but the statements' bindings is fixed at
 * open() (names in arena). */
struct RtSinkWriter {
    Arena *arena;
    const char *sink;           /* sink name: key of the progress row */
    const char *table_disp;     /* the 'table' option as given (for messages) */
    bool upsert;
    int n_cols;
    int n_pk;
    int *pk;                    /* indexes into the columns */
    sqlite3 *db;
    sqlite3_stmt *st_ins;       /* INSERT (ON CONFLICT DO UPDATE for upsert) */
    sqlite3_stmt *st_del;       /* DELETE by key (upsert only) */
    sqlite3_stmt *st_get;       /* SELECT epoch FROM weir_sink_progress */
    sqlite3_stmt *st_put;       /* upsert of the progress row */
    sqlite3_stmt *st_rej;       /* INSERT INTO weir_sink_rejects */
    Buf text;                   /* one value's text form */
    bool skip_rejects;          /* on_error = 'skip' (sink_util.h) */
    const char **col_names;
    RtSinkRejects rej;
};

typedef enum Affinity { AFF_INTEGER, AFF_TEXT, AFF_BLOB, AFF_REAL, AFF_NUMERIC } Affinity;

static const char *const AFF_NAMES[] = {"INTEGER", "TEXT", "BLOB", "REAL", "NUMERIC"};

/* SQLite's column affinity rules (datatype3.html, section 3.1). */
static Affinity affinity_of(const char *decl)
{
    char up[128];
    size_t n = 0;
    for (; decl && decl[n] && n < sizeof up - 1; n++)
        up[n] = (char)toupper((unsigned char)decl[n]);
    up[n] = 0;
    if (strstr(up, "INT"))
        return AFF_INTEGER;
    if (strstr(up, "CHAR") || strstr(up, "CLOB") || strstr(up, "TEXT"))
        return AFF_TEXT;
    if (strstr(up, "BLOB") || n == 0)
        return AFF_BLOB;
    if (strstr(up, "REAL") || strstr(up, "FLOA") || strstr(up, "DOUB"))
        return AFF_REAL;
    return AFF_NUMERIC;
}

/* Whether a column declared decl keeps weir type t's stored values as they
 * are. BLOB affinity (also: no declared type) keeps anything. */
static bool sqlite_type_ok(TypeId t, const char *decl)
{
    Affinity a = affinity_of(decl);
    if (a == AFF_BLOB)
        return true;
    switch (t) {
    case TYPE_BOOL:
    case TYPE_INT2:
    case TYPE_INT4:
    case TYPE_INT8: return a == AFF_INTEGER || a == AFF_NUMERIC;
    case TYPE_FLOAT4:
    case TYPE_FLOAT8: return a == AFF_REAL || a == AFF_NUMERIC;
    /* As text: REAL and NUMERIC affinity would turn 12.340 into a double
     * (losing the scale, and digits beyond 15). */
    case TYPE_NUMERIC: return a == AFF_TEXT;
    case TYPE_TEXT:
    case TYPE_JSONB: return a == AFF_TEXT;
    case TYPE_BYTEA: return false;
    case TYPE_DATE:
    case TYPE_TIMESTAMP:
    case TYPE_TIMESTAMPTZ: return a == AFF_TEXT || a == AFF_NUMERIC;
    case TYPE_INTERVAL: {
        /* "INTERVAL" has INTEGER affinity, which leaves interval text alone. */
        bool named = strcasestr(decl, "interval") != NULL;
        return a == AFF_TEXT || a == AFF_NUMERIC || named;
    }
    case TYPE_NULL:
    case TYPE__COUNT: break;
    }
    return false;
}

/* The declared type CREATE TABLE uses (chosen so the affinity keeps values). */
static const char *sqlite_decl_for(TypeId t)
{
    switch (t) {
    case TYPE_BOOL: return "BOOLEAN";
    case TYPE_INT2: return "SMALLINT";
    case TYPE_INT4: return "INTEGER";
    case TYPE_INT8: return "BIGINT";
    case TYPE_FLOAT4: return "REAL";
    case TYPE_FLOAT8: return "DOUBLE";
    case TYPE_NUMERIC: return "TEXT";  /* exact: see sqlite_type_ok */
    case TYPE_BYTEA: return "BLOB";
    case TYPE_DATE: return "DATE";
    case TYPE_TIMESTAMP: return "TIMESTAMP";
    case TYPE_TIMESTAMPTZ: return "TIMESTAMPTZ";
    case TYPE_TEXT:
    case TYPE_INTERVAL:
    case TYPE_JSONB:
    case TYPE_NULL:
    case TYPE__COUNT: break;
    }
    return "TEXT";
}



/* Maps an SQLite result code to the nearest SQLSTATE. */
static const char *sqlstate_of(int rc)
{
    switch (rc) {
    case SQLITE_CONSTRAINT_NOTNULL: return "23502";
    case SQLITE_CONSTRAINT_PRIMARYKEY:
    case SQLITE_CONSTRAINT_UNIQUE: return "23505";
    case SQLITE_CONSTRAINT_CHECK: return "23514";
    case SQLITE_CONSTRAINT_FOREIGNKEY: return "23503";
    default: break;
    }
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return "55P03";
    case SQLITE_CONSTRAINT: return "23000";
    case SQLITE_FULL: return "53100";
    case SQLITE_NOMEM: return SQLSTATE_OUT_OF_MEMORY;
    case SQLITE_READONLY: return "25006";
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN: return SQLSTATE_IO_ERROR;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return "XX001";
    default: return SQLSTATE_INTERNAL;
    }
}

/* Records the connection's last error. Returns -1. */
static int sq_fail(RtSinkWriter *w, int rc, const char *what, WError *err)
{
    return werr(err, sqlstate_of(rc), 0, "sink \"%s\": %s: %s", w->sink, what,
                w->db ? sqlite3_errmsg(w->db) : sqlite3_errstr(rc));
}

static int sq_exec(RtSinkWriter *w, const char *sql, const char *what, WError *err)
{
    int rc = sqlite3_exec(w->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : sq_fail(w, rc, what, err);
}

static int sq_prepare(RtSinkWriter *w, const char *sql, sqlite3_stmt **st, WError *err)
{
    int rc = sqlite3_prepare_v3(w->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
    return rc == SQLITE_OK ? 0 : sq_fail(w, rc, "preparing a statement", err);
}

/* Checks (after creating, when asked) the target against the spec. */
static int check_target(RtSinkWriter *w, const RtSinkSpec *spec, const char *schema, const char *qname,
                        bool create, WError *err)
{
    if (create) {
        Buf b = BUF_INIT;
        buf_printf(&b, "CREATE TABLE IF NOT EXISTS %s (", qname);
        for (int i = 0; i < spec->n_cols; i++) {
            if (i)
                buf_puts(&b, ", ");
            sink_put_ident(&b, spec->col_names[i]);
            buf_printf(&b, " %s", sqlite_decl_for(spec->col_types[i]));
        }
        if (spec->upsert) {
            buf_puts(&b, ", PRIMARY KEY (");
            for (int k = 0; k < spec->n_pk; k++) {
                if (k)
                    buf_puts(&b, ", ");
                sink_put_ident(&b, spec->col_names[spec->pk[k]]);
            }
            buf_putc(&b, ')');
        }
        buf_putc(&b, ')');
        int rc = sq_exec(w, b.data, "create_table", err);
        buf_free(&b);
        if (rc)
            return -1;
    }
    sqlite3_stmt *st = NULL;
    if (sq_prepare(w, "SELECT name, type, pk, \"notnull\", dflt_value IS NOT NULL FROM pragma_table_info(?1, ?2)",
                   &st, err))
        return -1;
    char *parts[2];
    int np = sink_split_name(w->arena, w->table_disp, parts, false);
    sqlite3_bind_text(st, 1, parts[np - 1], -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, schema, -1, SQLITE_STATIC);
    int n_rows = 0, n_pk = 0, rc = 0, step;
    bool *seen = xcalloc((size_t)spec->n_cols + 1, sizeof(bool));
    Buf have = BUF_INIT; /* the table's primary key columns, for the message */
    while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
        n_rows++;
        const char *name = (const char *)sqlite3_column_text(st, 0);
        const char *decl = (const char *)sqlite3_column_text(st, 1);
        int pkpos = sqlite3_column_int(st, 2);
        bool notnull = sqlite3_column_int(st, 3) && !sqlite3_column_int(st, 4);
        if (pkpos > 0)
            buf_printf(&have, "%s%s", have.len ? ", " : "", name);
        int i = 0;
        while (i < spec->n_cols && strcasecmp(spec->col_names[i], name) != 0)
            i++;
        if (i == spec->n_cols) {
            /* Not written by the sink; a NOT NULL without default fails every insert
             * (an INTEGER PRIMARY KEY is the rowid and fills itself). */
            if (notnull && pkpos == 0)
                rc = werr(err, "23502", 0,
                          "sink \"%s\": column \"%s\" of table %s is NOT NULL without a default, and the sink does not write it",
                          w->sink, name, w->table_disp);
            else if (pkpos > 0 && spec->upsert)
                n_pk = -1000; /* the table's key has a column the sink lacks */
            continue;
        }
        seen[i] = true;
        if (!sqlite_type_ok(spec->col_types[i], decl ? decl : ""))
            rc = werr(err, SQLSTATE_DATATYPE_MISMATCH, 0,
                      "sink \"%s\": column \"%s\" of table %s has type %s (%s affinity), but the sink writes %s",
                      w->sink, name, w->table_disp, decl && *decl ? decl : "(none)",
                      AFF_NAMES[affinity_of(decl)], type_name(spec->col_types[i]));
        if (pkpos > 0) {
            bool in_spec = false;
            for (int k = 0; k < spec->n_pk; k++)
                in_spec |= spec->pk[k] == i;
            n_pk += in_spec ? 1 : -1000;
        }
    }
    if (rc == 0 && step != SQLITE_DONE && step != SQLITE_ROW)
        rc = sq_fail(w, step, "reading the table's columns", err);
    sqlite3_finalize(st);
    if (rc == 0 && n_rows == 0) {
        werr(err, SQLSTATE_UNDEFINED_TABLE, 0, "sink \"%s\": table %s does not exist", w->sink, w->table_disp);
        werr_hint(err, "Create it, or add create_table = 'true' to the sink's WITH options.");
        rc = -1;
    }
    for (int i = 0; i < spec->n_cols && rc == 0; i++)
        if (!seen[i])
            rc = werr(err, SQLSTATE_UNDEFINED_COLUMN, 0, "sink \"%s\": column \"%s\" does not exist in table %s",
                      w->sink, spec->col_names[i], w->table_disp);
    free(seen);
    if (rc == 0 && spec->upsert && n_pk != spec->n_pk) {
        Buf want = BUF_INIT;
        for (int k = 0; k < spec->n_pk; k++)
            buf_printf(&want, "%s%s", k ? ", " : "", spec->col_names[spec->pk[k]]);
        if (have.len == 0)
            rc = werr(err, SQLSTATE_INVALID_COLUMN_REFERENCE, 0,
                      "sink \"%s\": table %s has no primary key, but the upsert sink needs PRIMARY KEY (%s)",
                      w->sink, w->table_disp, want.data);
        else
            rc = werr(err, SQLSTATE_INVALID_COLUMN_REFERENCE, 0,
                      "sink \"%s\": the primary key of table %s is (%s), but the upsert sink's key is (%s)",
                      w->sink, w->table_disp, have.data, want.data);
        buf_free(&want);
    }
    buf_free(&have);
    return rc;
}

/* Prepares the four statements of write_epoch(). */
static int prepare_all(RtSinkWriter *w, const RtSinkSpec *spec, const char *qschema, const char *qname,
                       WError *err)
{
    Buf b = BUF_INIT;
    buf_printf(&b, "INSERT INTO %s (", qname);
    for (int i = 0; i < spec->n_cols; i++) {
        if (i)
            buf_puts(&b, ", ");
        sink_put_ident(&b, spec->col_names[i]);
    }
    buf_puts(&b, ") VALUES (");
    for (int i = 0; i < spec->n_cols; i++)
        buf_printf(&b, "%s?%d", i ? ", " : "", i + 1);
    buf_putc(&b, ')');
    if (spec->upsert) {
        buf_puts(&b, " ON CONFLICT (");
        for (int k = 0; k < spec->n_pk; k++) {
            if (k)
                buf_puts(&b, ", ");
            sink_put_ident(&b, spec->col_names[spec->pk[k]]);
        }
        buf_puts(&b, ") DO ");
        int n_set = 0;
        for (int i = 0; i < spec->n_cols; i++) {
            bool is_pk = false;
            for (int k = 0; k < spec->n_pk; k++)
                is_pk |= spec->pk[k] == i;
            if (is_pk)
                continue;
            buf_puts(&b, n_set++ ? ", " : "UPDATE SET ");
            sink_put_ident(&b, spec->col_names[i]);
            buf_puts(&b, " = excluded.");
            sink_put_ident(&b, spec->col_names[i]);
        }
        if (n_set == 0)
            buf_puts(&b, "NOTHING");
    }
    int rc = sq_prepare(w, b.data, &w->st_ins, err);
    if (rc == 0 && spec->upsert) {
        buf_reset(&b);
        buf_printf(&b, "DELETE FROM %s WHERE ", qname);
        for (int k = 0; k < spec->n_pk; k++) {
            if (k)
                buf_puts(&b, " AND ");
            sink_put_ident(&b, spec->col_names[spec->pk[k]]);
            buf_printf(&b, " = ?%d", k + 1);
        }
        rc = sq_prepare(w, b.data, &w->st_del, err);
    }
    if (rc == 0) {
        buf_reset(&b);
        buf_printf(&b, "SELECT epoch FROM %s.weir_sink_progress WHERE sink = ?1", qschema);
        rc = sq_prepare(w, b.data, &w->st_get, err);
    }
    if (rc == 0) {
        buf_reset(&b);
        buf_printf(&b,
                   "INSERT INTO %s.weir_sink_progress (sink, epoch) VALUES (?1, ?2)"
                   " ON CONFLICT (sink) DO UPDATE SET epoch = excluded.epoch",
                   qschema);
        rc = sq_prepare(w, b.data, &w->st_put, err);
    }
    buf_free(&b);
    return rc;
}

static void sq_close(RtSinkWriter *w)
{
    if (!w)
        return;
    sqlite3_finalize(w->st_ins);
    sqlite3_finalize(w->st_del);
    sqlite3_finalize(w->st_get);
    sqlite3_finalize(w->st_put);
    sqlite3_finalize(w->st_rej);
    if (w->db)
        sqlite3_close_v2(w->db);
    buf_free(&w->text);
    arena_free(w->arena);
    free(w);
}

static int sq_open(const RtSinkSpec *spec, RtSinkWriter **out, WError *err)
{
    *out = NULL;
    const char *path, *table;
    bool create;
    if (sink_db_options(spec, "path", &path, &table, &create, err))
        return -1;

    RtSinkWriter *w = xcalloc(1, sizeof *w);
    w->arena = arena_new(0);
    w->sink = arena_strdup(w->arena, spec->name);
    w->table_disp = arena_strdup(w->arena, table);
    w->upsert = spec->upsert;
    w->n_cols = spec->n_cols;
    w->n_pk = spec->upsert ? spec->n_pk : 0;
    w->pk = arena_alloc(w->arena, sizeof(int) * (size_t)(w->n_pk + 1));
    if (w->n_pk) /* an append-only sink has no key, and spec->pk may be NULL */
        memcpy(w->pk, spec->pk, sizeof(int) * (size_t)w->n_pk);

    char *parts[2];
    int np = sink_split_name(w->arena, table, parts, false);
    Buf qs = BUF_INIT, qn = BUF_INIT;
    const char *schema = np == 2 ? parts[0] : "main";
    int rc;
    if (np < 0) {
        rc = werr(err, SQLSTATE_INVALID_PARAMETER, 0, "sink \"%s\": invalid table name '%s'", w->sink, table);
        goto done;
    }
    sink_put_ident(&qs, schema);
    buf_printf(&qn, "%s.", qs.data);
    sink_put_ident(&qn, parts[np - 1]);

    rc = sqlite3_open_v2(path, &w->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        rc = werr(err, SQLSTATE_CONNECTION_FAILURE, 0, "sink \"%s\": could not open SQLite database \"%s\": %s",
                  w->sink, path, w->db ? sqlite3_errmsg(w->db) : sqlite3_errstr(rc));
        goto done;
    }
    sqlite3_extended_result_codes(w->db, 1);
    sqlite3_busy_timeout(w->db, 5000);
    if ((rc = check_target(w, spec, schema, qn.data, create, err)) != 0)
        goto done;
    Buf b = BUF_INIT;
    buf_printf(&b, "CREATE TABLE IF NOT EXISTS %s.weir_sink_progress (sink TEXT PRIMARY KEY, epoch INTEGER NOT NULL)",
               qs.data);
    rc = sq_exec(w, b.data, "creating weir_sink_progress", err);
    if (rc == 0)
        rc = sink_on_error(spec, &w->skip_rejects, err);
    if (rc == 0 && w->skip_rejects) {
        /* Rows the target refuses (a CHECK, NOT NULL...) are kept here, in
         * the epoch's transaction (sink_util.h). */
        buf_reset(&b);
        buf_printf(&b,
                   "CREATE TABLE IF NOT EXISTS %s.weir_sink_rejects (sink TEXT NOT NULL, epoch INTEGER NOT NULL, op TEXT "
                   "NOT NULL, row_data TEXT NOT NULL, sqlstate TEXT NOT NULL, message TEXT NOT NULL, rejected_at TEXT "
                   "NOT NULL DEFAULT (strftime('%%Y-%%m-%%d %%H:%%M:%%f+00:00', 'now')))",
                   qs.data);
        rc = sq_exec(w, b.data, "creating weir_sink_rejects", err);
        buf_reset(&b);
        buf_printf(&b,
                   "INSERT INTO %s.weir_sink_rejects (sink, epoch, op, row_data, sqlstate, message) VALUES (?1, ?2, ?3, "
                   "?4, ?5, ?6)",
                   qs.data);
        if (rc == 0)
            rc = sq_prepare(w, b.data, &w->st_rej, err);
        w->col_names = arena_alloc(w->arena, sizeof(char *) * (size_t)(spec->n_cols + 1));
        for (int i = 0; i < spec->n_cols; i++)
            w->col_names[i] = arena_strdup(w->arena, spec->col_names[i]);
    }
    buf_free(&b);
    if (rc == 0)
        rc = prepare_all(w, spec, qs.data, qn.data, err);
done:
    buf_free(&qs);
    buf_free(&qn);
    if (rc) {
        sq_close(w);
        return -1;
    }
    *out = w;
    return 0;
}

static int read_epoch(RtSinkWriter *w, uint64_t *epoch, WError *err)
{
    sqlite3_reset(w->st_get);
    sqlite3_bind_text(w->st_get, 1, w->sink, -1, SQLITE_STATIC);
    int rc = sqlite3_step(w->st_get);
    *epoch = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(w->st_get, 0) : 0;
    sqlite3_reset(w->st_get);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return sq_fail(w, rc, "reading weir_sink_progress", err);
    return 0;
}

static int sq_last_epoch(RtSinkWriter *w, uint64_t *epoch, WError *err)
{
    return read_epoch(w, epoch, err);
}

/* Binds v to parameter i of st in its stored form. */
static void bind_value(RtSinkWriter *w, sqlite3_stmt *st, int i, const Value *v)
{
    if (v->null) {
        sqlite3_bind_null(st, i);
        return;
    }
    switch (v->type) {
    case TYPE_BOOL:
    case TYPE_INT2:
    case TYPE_INT4:
    case TYPE_INT8: sqlite3_bind_int64(st, i, v->u.i); return;
    case TYPE_FLOAT4:
    case TYPE_FLOAT8: sqlite3_bind_double(st, i, v->u.f); return;
    case TYPE_TEXT:
    case TYPE_JSONB: sqlite3_bind_text(st, i, v->u.s.len ? v->u.s.p : "", (int)v->u.s.len, SQLITE_STATIC); return;
    case TYPE_BYTEA: sqlite3_bind_blob(st, i, v->u.s.len ? v->u.s.p : "", (int)v->u.s.len, SQLITE_STATIC); return;
    default:
        buf_reset(&w->text);
        value_to_text(v, &w->text);
        /* ISO 8601 offsets have minutes; SQLite's date functions need them. */
        if (v->type == TYPE_TIMESTAMPTZ && w->text.len > 3 && !strcmp(w->text.data + w->text.len - 3, "+00"))
            buf_puts(&w->text, ":00");
        sqlite3_bind_text(st, i, w->text.data, (int)w->text.len, SQLITE_TRANSIENT);
        return;
    }
}

static int step_done(RtSinkWriter *w, sqlite3_stmt *st, const char *what, WError *err)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc == SQLITE_DONE ? 0 : sq_fail(w, rc, what, err);
}

/* Keeps a refused row in weir_sink_rejects (the statement that failed was
 * rolled back alone; the epoch's transaction goes on). */
static int sq_reject(RtSinkWriter *w, uint64_t epoch, const RtSinkChange *c, const WError *why, WError *err)
{
    Buf row = BUF_INIT;
    sink_row_json(&row, w->n_cols, w->col_names, c->after ? c->after : c->before);
    const char *op = c->after ? (c->before ? "update" : "insert") : "delete";
    sqlite3_bind_text(w->st_rej, 1, w->sink, -1, SQLITE_STATIC);
    sqlite3_bind_int64(w->st_rej, 2, (int64_t)epoch);
    sqlite3_bind_text(w->st_rej, 3, op, -1, SQLITE_STATIC);
    sqlite3_bind_text(w->st_rej, 4, row.data, (int)row.len, SQLITE_TRANSIENT);
    sqlite3_bind_text(w->st_rej, 5, why->sqlstate, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(w->st_rej, 6, why->msg, -1, SQLITE_TRANSIENT);
    int rc = step_done(w, w->st_rej, "recording a rejected row", err);
    if (rc == 0) {
        w->rej.rows++;
        snprintf(w->rej.last, sizeof w->rej.last, "epoch %" PRIu64 ": %s %.120s: %.150s (%s)", epoch, op, row.data, why->msg,
                 why->sqlstate);
    }
    buf_free(&row);
    return rc;
}

static void sq_rejects(RtSinkWriter *w, RtSinkRejects *out) { *out = w->rej; }

static int sq_write_epoch(RtSinkWriter *w, uint64_t epoch, int n, const RtSinkChange *changes, WError *err)
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
    if (sq_exec(w, "BEGIN IMMEDIATE", "BEGIN", err))
        return -1;
    uint64_t done = 0;
    if (read_epoch(w, &done, err))
        goto fail;
    if (epoch <= done) {
        sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
        return 0; /* already applied: exactly-once */
    }
    for (int i = 0; i < n; i++) {
        const RtSinkChange *c = &changes[i];
        WError e;
        werr_clear(&e);
        int rc = 0;
        if (c->after) {
            for (int k = 0; k < w->n_cols; k++)
                bind_value(w, w->st_ins, k + 1, &c->after[k]);
            rc = step_done(w, w->st_ins, w->upsert ? "upserting a row" : "inserting a row", &e);
        } else if (c->before) {
            for (int k = 0; k < w->n_pk; k++)
                bind_value(w, w->st_del, k + 1, &c->before[w->pk[k]]);
            rc = step_done(w, w->st_del, "deleting a row", &e);
        }
        if (rc == 0)
            continue;
        /* SQLite rolls back only the failed statement: a refused row is kept
         * aside and the epoch goes on (on_error = 'skip'). */
        if (w->skip_rejects && sink_row_level(e.sqlstate) && sq_reject(w, epoch, c, &e, err) == 0)
            continue;
        if (!err->set)
            *err = e;
        goto fail;
    }
    sqlite3_bind_text(w->st_put, 1, w->sink, -1, SQLITE_STATIC);
    sqlite3_bind_int64(w->st_put, 2, (int64_t)epoch);
    if (step_done(w, w->st_put, "recording the epoch", err) || sq_exec(w, "COMMIT", "COMMIT", err))
        goto fail;
    return 0;
fail:
    if (!sqlite3_get_autocommit(w->db))
        sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

static int sq_reset(RtSinkWriter *w, WError *err)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(w->db, "DELETE FROM weir_sink_progress WHERE sink = ?1", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, w->sink, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_OK)
        return sq_fail(w, rc, "resetting weir_sink_progress", err);
    return 0;
}

const RtSinkConnector rt_sink_sqlite = {
    .name = "sqlite",
    .open = sq_open,
    .last_epoch = sq_last_epoch,
    .write_epoch = sq_write_epoch,
    .reset = sq_reset,
    .close = sq_close,
    .rejects = sq_rejects,
};
