/*
 * pgcatalog.c: pg_catalog and information_schema, for psql and drivers.
 *
 * A query that names a system catalog (pgt_is_query, pgt_names_catalog) is
 * answered here rather than by weir's planner: a fresh in-memory SQLite database is
 * built for it, with attached schemas named pg_catalog and
 * information_schema holding the tables of pgcatalog.sql, and rows that
 * describe weir's objects as Postgres would describe them:
 *
 *   source              pg_class relkind 'r' (a table: the relation rows enter by)
 *   materialized view   'm', its query in pg_matviews.definition (pg_get_viewdef)
 *   LATE ROWS INTO rel. 'm'
 *   sink                'f' (a foreign table: its rows live in another system),
 *                       its server the connector, its options the WITH options
 *                       (secrets shown as ********)
 *   weir_* system view  'v' in pg_catalog (psql's \dvS lists them)
 *   pg_catalog and information_schema tables themselves, from SQLite's schema
 *
 * OIDs: a weir object's is 16384 + its catalog id, stable across restarts;
 * columns are numbered 1.. over the visible columns; types carry their
 * Postgres OIDs. The statement is translated by pgtranslate.c and run by
 * SQLite with the functions psql and drivers call (format_type,
 * pg_get_userbyid, pg_table_is_visible, regclass casts, regular
 * expressions...) registered by pgcatalog_fn.c. Result columns are typed from the
 * declared types of pgcatalog.sql (a direct column) or from the values
 * (an expression), and sent in Postgres' text forms (t/f for booleans).
 *
 * The fixed part (pgcatalog.sql's tables and rows, and the rows describing
 * the catalog's own tables) is built once and kept as serialized images;
 * each statement starts from copies and adds weir's objects, so a statement
 * always sees the catalog as it is, with no cache to invalidate. The engine
 * lock is held only while weir's objects are copied in.
 */
#include "pgcatalog.h"
#include "pgcatalog_int.h"
#include "arena.h"
#include "log.h"
#include "pg_oids.h"
#include "weir_limits.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern const unsigned char weir_pgcatalog_sql[];

#define PROGRESS_STEPS 10000

/* ---- building the catalog ------------------------------------------------------------ */

static int exec(sqlite3 *db, const char *sql, WError *err)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        werr(err, SQLSTATE_INTERNAL, 0, "building the system catalogs: %s", msg ? msg : "?");
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

/* A prepared insert bound from a printf-like list: 'i' int64, 't' text (NULL ok). */
static int insert(sqlite3 *db, const char *sql, const char *types, ...)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return -1;
    va_list ap;
    va_start(ap, types);
    for (int i = 0; types[i]; i++) {
        if (types[i] == 'i')
            sqlite3_bind_int64(st, i + 1, va_arg(ap, long long));
        else {
            const char *s = va_arg(ap, const char *);
            if (s)
                sqlite3_bind_text(st, i + 1, s, -1, SQLITE_TRANSIENT);
        }
    }
    va_end(ap);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

static int add_relation(sqlite3 *db, long long oid, const char *name, long long nsp, const char *kind, int n_cols,
                        const char *const *cols, const TypeId *types, const bool *hidden, const bool *not_null,
                        const int32_t *typmod)
{
    int natts = 0;
    for (int i = 0; i < n_cols; i++) {
        if (hidden && hidden[i])
            continue;
        natts++;
        TypeId t = types[i];
        if (insert(db,
                   "INSERT INTO pg_catalog.pg_attribute (attrelid, attname, atttypid, attlen, attnum, attbyval, "
                   "attalign, attstorage, attnotnull, attcollation, atttypmod) VALUES (?1, ?2, ?3, ?4, ?5, ?4 > 0, "
                   "CASE ?4 WHEN 8 THEN 'd' WHEN 2 THEN 's' WHEN 1 THEN 'c' ELSE 'i' END, "
                   "CASE WHEN ?4 > 0 THEN 'p' ELSE 'x' END, ?6, CASE WHEN ?3 IN (25, 1043) THEN 100 ELSE 0 END, ?7)",
                   "itiiiii", oid, cols[i], (long long)type_oid(t), (long long)type_wire_len(t), (long long)natts,
                   (long long)(not_null && not_null[i]),
                   /* NUMERIC(p,s): Postgres's typmod ((p << 16) | s) + 4, so format_type shows it */
                   typmod && typmod[i] >= 0 ? (long long)((((typmod[i] >> 8) << 16) | (typmod[i] & 0xff)) + 4) : -1LL))
            return -1;
    }
    return insert(db,
                  "INSERT INTO pg_catalog.pg_class (oid, relname, relnamespace, relkind, relnatts, relam) "
                  "VALUES (?1, ?2, ?3, ?4, ?5, CASE WHEN ?4 IN ('r', 'm') THEN 2 ELSE 0 END)",
                  "ititi", oid, name, nsp, kind, (long long)natts);
}

/* The query text of a CREATE [MATERIALIZED] VIEW. */
static const char *view_query(const char *sql, Arena *a)
{
    AstStmt **stmts;
    int n = 0;
    WError err = {0};
    if (!sql || !*sql || parse_sql(sql, a, &stmts, &n, &err) || n != 1 || stmts[0]->kind != STMT_CREATE_VIEW)
        return NULL;
    int pos = stmts[0]->u.create_view->query_pos;
    if (pos < 1 || (size_t)pos > strlen(sql))
        return NULL;
    return sql + pos - 1;
}

static bool secret_option(const char *key)
{
    return !strcasecmp(key, "url") || strcasestr(key, "password") || strcasestr(key, "secret") ||
           !strncasecmp(key, "properties.sasl", 15) || !strncasecmp(key, "properties.ssl", 14);
}

/* The description psql shows for an object (\dt+, \dm+, obj_description):
 * what it reads from or writes to, its key, whether it runs. */
static const char *describe(const CatObj *o, Arena *a)
{
    const CatRelation *r = &o->rel;
    switch (o->kind) {
    case CAT_SOURCE: {
        const char *conn = cat_option(r, "connector");
        if (conn && !strcasecmp(conn, "kafka"))
            return arena_printf(a, "source: Kafka topic %s", cat_option(r, "topic") ? cat_option(r, "topic") : "?");
        if (conn && !strcasecmp(conn, "nexmark"))
            return arena_printf(a, "source: nexmark %s events",
                                cat_option(r, "nexmark.table.type") ? cat_option(r, "nexmark.table.type") : "?");
        return arena_printf(a, "source: %s", conn ? conn : "?");
    }
    case CAT_TABLE: {
        Buf b = BUF_INIT;
        const char *conn = cat_option(r, "connector");
        if (conn)
            buf_printf(&b, "table over %s topic %s", !strcasecmp(conn, "kafka") ? "Kafka" : conn,
                       cat_option(r, "topic") ? cat_option(r, "topic") : "?");
        else
            buf_puts(&b, r->append_only ? "append-only table" : "table");
        buf_puts(&b, ", key (");
        for (int i = 0; i < r->n_pk; i++)
            buf_printf(&b, "%s%s", i ? ", " : "", r->col_names[r->pk[i]]);
        buf_puts(&b, ")");
        buf_putc(&b, 0);
        const char *d = arena_strdup(a, b.data);
        buf_free(&b);
        return d;
    }
    case CAT_VIEW: {
        if (o->view.late_of)
            return arena_printf(a, "late rows of %s", o->view.late_of->name);
        Buf b = BUF_INIT;
        buf_puts(&b, r->append_only ? "append-only" : "updating");
        if (r->n_pk > 0) {
            buf_puts(&b, ", key (");
            for (int i = 0; i < r->n_pk; i++)
                buf_printf(&b, "%s%s", i ? ", " : "", r->col_names[r->pk[i]]);
            buf_puts(&b, ")");
        }
        buf_puts(&b, o->flow.df ? ", running" : ", not running");
        buf_putc(&b, 0);
        const char *d = arena_strdup(a, b.data);
        buf_free(&b);
        return d;
    }
    case CAT_SINK:
        return arena_printf(a, "sink from %s to %s", o->sink.from ? o->sink.from->name : "?",
                            rt_sink_option(&o->sink.spec, "connector") ? rt_sink_option(&o->sink.spec, "connector") : "?");
    default:
        return NULL;
    }
}

/* Rows for weir's objects, users and settings. Engine lock held. */
static int add_weir_objects(sqlite3 *db, Engine *e, Session *s, Arena *a)
{
    int rc = 0;
    CAT_FOREACH(e->cat, CAT_ANY, o) {
        if (rc)
            break;
        if (o->view.sink_query)
            continue; /* part of its sink */
        long long oid = OID_USER_BASE + (long long)o->id;
        if (o->view.late_of)
            oid = OID_USER_BASE + (long long)o->view.late_of->id + 1000000; /* no id of its own */
        const CatRelation *r = &o->rel;
        switch (o->kind) {
        case CAT_SOURCE:
        case CAT_TABLE:
            rc = add_relation(db, oid, o->name, NSP_PUBLIC, "r", r->n_cols, r->col_names, r->col_types,
                              r->col_hidden, r->col_not_null, r->col_typmod);
            break;
        case CAT_VIEW:
            rc = add_relation(db, oid, o->name, NSP_PUBLIC, "m", r->n_cols, r->col_names, r->col_types,
                              r->col_hidden, NULL, NULL);
            if (!rc)
                rc = insert(db, "INSERT INTO pg_catalog.pg_matviews VALUES ('public', ?1, ?2, NULL, 0, ?3, ?4)", "ttit",
                            o->name, "weir", (long long)(o->flow.df != NULL), view_query(o->sql, a));
            break;
        case CAT_SINK: {
            const RtSinkSpec *sp = &o->sink.spec;
            rc = add_relation(db, oid, o->name, NSP_PUBLIC, "f", sp->n_cols, (const char *const *)sp->col_names,
                              sp->col_types, NULL, NULL, NULL);
            const char *conn = rt_sink_option(sp, "connector");
            Buf opts = BUF_INIT;
            buf_putc(&opts, '{');
            for (int k = 0; k < sp->n_options; k++) {
                char *kv = arena_printf(a, "%s=%s", sp->options[k].key,
                                        secret_option(sp->options[k].key) ? "********" : sp->options[k].value);
                pgcat_array_put(&opts, kv, k == 0);
            }
            buf_putc(&opts, '}');
            buf_putc(&opts, 0);
            if (!rc)
                rc = insert(db, "INSERT OR IGNORE INTO pg_catalog.pg_foreign_server (oid, srvname, srvfdw) "
                                "SELECT 20000 + count(*), ?1, 19999 FROM pg_catalog.pg_foreign_server "
                                "WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_foreign_server WHERE srvname = ?1)",
                            "t", conn ? conn : "?");
            if (!rc)
                rc = insert(db, "INSERT INTO pg_catalog.pg_foreign_table SELECT ?1, oid, ?2 "
                                "FROM pg_catalog.pg_foreign_server WHERE srvname = ?3",
                            "itt", oid, opts.data, conn ? conn : "?");
            buf_free(&opts);
            break;
        }
        case CAT_SYSTEM:
            break;
        }
        if (!rc && o->kind == CAT_VIEW && o->flow.df && o->flow.plan) {
            /* Sizes (\dm+, pg_table_size): the state the view holds. */
            long long bytes = 0;
            for (int k = 0; k < o->flow.plan->n_nodes; k++)
                if (o->flow.plan->nodes[k]->table_id)
                    bytes += (long long)rt_dataflow_state_bytes(o->flow.df, k);
            rc = insert(db, "INSERT INTO main._weir_sizes VALUES (?1, ?2)", "ii", oid, bytes);
        }
        if (!rc && o->kind == CAT_TABLE && r->n_pk > 0) {
            /* The primary key, for tools that read information_schema (there is
             * no pg_index row: weir keys are not indexes one could use). */
            char *cname = arena_printf(a, "%s_pkey", o->name);
            rc = insert(db, "INSERT INTO information_schema.table_constraints VALUES ('weir', 'public', ?1, "
                            "'weir', 'public', ?2, 'PRIMARY KEY', 'NO', 'NO', 'YES', NULL)", "tt", cname, o->name);
            for (int k = 0; k < r->n_pk && !rc; k++)
                rc = insert(db, "INSERT INTO information_schema.key_column_usage VALUES ('weir', 'public', ?1, "
                                "'weir', 'public', ?2, ?3, ?4, NULL)", "ttti", cname, o->name,
                            r->col_names[r->pk[k]], (long long)(k + 1));
        }
        const char *desc = describe(o, a);
        if (!rc && desc)
            rc = insert(db, "INSERT INTO pg_catalog.pg_description VALUES (?1, 1259, 0, ?2)", "it", oid, desc);
    }
    for (int i = 0; sysview_name(i) && !rc; i++) {
        const CatRelation *r = sysview_lookup(e, sysview_name(i), a);
        if (r)
            rc = add_relation(db, 12500 + i, sysview_name(i), NSP_CATALOG, "v", r->n_cols, r->col_names,
                              r->col_types, NULL, NULL, NULL);
    }
    if (!rc)
        rc = insert(db, "INSERT INTO pg_catalog.pg_roles (rolname, rolsuper, rolcreaterole, rolcreatedb, "
                        "rolreplication, rolbypassrls, oid) VALUES ('weir', 1, 1, 1, 1, 1, 10)", "");
    for (const Session *ss = e->sessions; ss && !rc; ss = ss->next) {
        Session *sm = (Session *)ss;
        const char *app = session_setting_is_set(sm, "application_name") ? session_setting(sm, "application_name")
                          : ss->startup_app                                ? ss->startup_app
                                                                           : "";
        rc = insert(db,
                    "INSERT INTO pg_catalog.pg_stat_activity (datid, datname, pid, usesysid, usename, application_name, "
                    "client_addr, client_port, backend_start, query_start, state_change, state, query, backend_type) "
                    "VALUES (5, 'weir', ?1, coalesce((SELECT oid FROM pg_catalog.pg_roles WHERE rolname = ?2), 10), "
                    "?2, ?3, nullif(?4, ''), CASE WHEN ?4 = '' THEN NULL ELSE 0 END, "
                    "strftime('%Y-%m-%d %H:%M:%f+00', ?5 / 1000000.0, 'unixepoch'), "
                    "CASE WHEN ?6 > 0 THEN strftime('%Y-%m-%d %H:%M:%f+00', ?6 / 1000000.0, 'unixepoch') END, "
                    "CASE WHEN ?6 > 0 THEN strftime('%Y-%m-%d %H:%M:%f+00', ?6 / 1000000.0, 'unixepoch') END, "
                    "?7, ?8, 'client backend')",
                    "itttiitt", (long long)ss->pid, ss->user, app, ss->client_addr, (long long)ss->started_us,
                    (long long)ss->query_start_us, ss->active ? "active" : ss->in_txn ? "idle in transaction" : "idle",
                    ss->query);
    }
    for (int i = 0; i < e->n_users && !rc; i++)
        if (strcmp(e->users[i].name, USER_BOOTSTRAP) != 0)
            rc = insert(db, "INSERT INTO pg_catalog.pg_roles (rolname, oid) VALUES (?1, ?2)", "ti", e->users[i].name,
                        (long long)(OID_USER_BASE + (long long)e->users[i].id));
    for (int i = 0; i < session_setting_count() && !rc; i++) {
        const char *name = session_setting_name(i);
        rc = insert(db, "INSERT INTO pg_catalog.pg_settings (name, setting, context, vartype, source, boot_val, "
                        "reset_val) VALUES (?1, ?2, 'user', 'string', 'session', ?3, ?3)", "ttt",
                    name, session_setting(s, name), session_setting_default(i));
    }
    if (!rc)
        rc = insert(db, "INSERT INTO pg_catalog.pg_foreign_data_wrapper (oid, fdwname) VALUES (19999, 'weir_sink')",
                    "");
    return rc;
}

/* pg_class / pg_attribute rows for the emulated catalog's own tables. */
static int add_catalog_tables(sqlite3 *db)
{
    static const struct {
        const char *name;
        int oid;
    } KNOWN[] = {{"pg_type", 1247}, {"pg_attribute", 1249}, {"pg_proc", 1255}, {"pg_class", 1259},
                 {"pg_database", 1262}, {"pg_namespace", 2615}, {"pg_description", 2609}, {"pg_am", 2601}};
    static const char *const VIEWS[] = {"pg_roles", "pg_user", "pg_settings", "pg_matviews", "pg_views",
                                        "pg_tables", "pg_stat_activity", NULL};
    const char *schemas[2] = {"pg_catalog", "information_schema"};
    int next = 12000, rc = 0;
    for (int s = 0; s < 2 && !rc; s++) {
        char sql[200];
        snprintf(sql, sizeof sql, "SELECT name FROM %s.sqlite_master WHERE type = 'table' ORDER BY name", schemas[s]);
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
            return -1;
        while (!rc && sqlite3_step(st) == SQLITE_ROW) {
            const char *name = (const char *)sqlite3_column_text(st, 0);
            int oid = next++;
            for (size_t k = 0; k < sizeof KNOWN / sizeof KNOWN[0]; k++)
                if (s == 0 && !strcmp(KNOWN[k].name, name))
                    oid = KNOWN[k].oid;
            bool view = s == 1;
            for (int k = 0; VIEWS[k] && !view; k++)
                view = !strcmp(VIEWS[k], name);
            rc = insert(db, "INSERT INTO pg_catalog.pg_class (oid, relname, relnamespace, relkind, relam) "
                            "VALUES (?1, ?2, ?3, ?4, CASE ?4 WHEN 'r' THEN 2 ELSE 0 END)",
                        "itit", (long long)oid, name, (long long)(s == 0 ? NSP_CATALOG : NSP_INFO), view ? "v" : "r");
            /* Columns: the declared type names the Postgres type (DECLTYPES). */
            snprintf(sql, sizeof sql, "SELECT name, type FROM pragma_table_info(?1, ?2)");
            sqlite3_stmt *cols;
            if (!rc && sqlite3_prepare_v2(db, sql, -1, &cols, NULL) == SQLITE_OK) {
                sqlite3_bind_text(cols, 1, name, -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(cols, 2, schemas[s], -1, SQLITE_STATIC);
                int attnum = 0;
                while (!rc && sqlite3_step(cols) == SQLITE_ROW) {
                    uint32_t toid = pgcat_decltype_oid((const char *)sqlite3_column_text(cols, 1));
                    rc = insert(db, "INSERT INTO pg_catalog.pg_attribute (attrelid, attname, atttypid, attnum, attlen) "
                                    "SELECT ?1, ?2, ?3, ?4, coalesce((SELECT typlen FROM pg_catalog.pg_type "
                                    "WHERE oid = ?3), -1)",
                                "itii", (long long)oid, (const char *)sqlite3_column_text(cols, 0), (long long)toid,
                                (long long)++attnum);
                }
                sqlite3_finalize(cols);
                if (!rc)
                    rc = insert(db, "UPDATE pg_catalog.pg_class SET relnatts = ?2 WHERE oid = ?1", "ii",
                                (long long)oid, (long long)attnum);
            }
        }
        sqlite3_finalize(st);
    }
    return rc;
}

/* Column declared types of pgcatalog.sql and the Postgres types they stand for. */
static const struct {
    const char *decl;
    uint32_t oid;
} DECLTYPES[] = {
    {"bool", PG_OID_BOOL}, {"name_text", PG_OID_NAME}, {"char_text", PG_OID_CHAR}, {"int2", PG_OID_INT2},
    {"int4", PG_OID_INT4}, {"int8", PG_OID_INT8}, {"oid_int", PG_OID_OID}, {"text", PG_OID_TEXT},
    {"float4", PG_OID_FLOAT4}, {"float8", PG_OID_FLOAT8}, {"regproc_text", PG_OID_REGPROC},
    {"xid_int", PG_OID_XID}, {"i2vector_text", PG_OID_INT2VECTOR}, {"oidvector_text", PG_OID_OIDVECTOR},
    {"text_array", PG_OID_TEXT_ARRAY}, {"oid_array_text", PG_OID_OID_ARRAY},
    {"aclitem_array_text", PG_OID_ACLITEM_ARRAY}, {"char_array_text", PG_OID_CHAR_ARRAY},
    {"i2array_text", PG_OID_INT2_ARRAY}, {"varchar", PG_OID_VARCHAR}, {"pg_node_tree_text", PG_OID_PG_NODE_TREE},
    {"timestamptz_text", PG_OID_TIMESTAMPTZ}, {"inet_text", PG_OID_INET},
};

uint32_t pgcat_decltype_oid(const char *decl)
{
    if (!decl)
        return 0;
    for (size_t i = 0; i < sizeof DECLTYPES / sizeof DECLTYPES[0]; i++)
        if (!strcasecmp(DECLTYPES[i].decl, decl))
            return DECLTYPES[i].oid;
    return PG_OID_TEXT;
}

static int progress(void *arg)
{
    PgCtx *c = arg;
    return c->out && srv_result_cancelled(c->out);
}

/* The part of the catalog that never changes (pgcatalog.sql up to the
 * derive marker, and the rows describing the catalog's own tables) is built
 * once per process and kept as serialized images of the two schemas; each
 * statement starts from copies of them. */
static struct {
    pthread_once_t once;
    int rc;
    unsigned char *img[2];
    sqlite3_int64 len[2];
} tmpl = {PTHREAD_ONCE_INIT, -1, {NULL, NULL}, {0, 0}};

static const char *const SCHEMAS[2] = {"pg_catalog", "information_schema"};

static sqlite3 *open_db(PgCtx *c)
{
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
            SQLITE_OK ||
        pgcat_register_functions(db, c) ||
        sqlite3_exec(db, "ATTACH ':memory:' AS pg_catalog; ATTACH ':memory:' AS information_schema", NULL, NULL,
                     NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

static void build_template(void)
{
    static PgCtx none;
    sqlite3 *db = open_db(&none);
    if (!db)
        return;
    const char *schema = (const char *)weir_pgcatalog_sql;
    const char *mark = strstr(schema, "-- ---- derive:");
    char *head = xstrndup(schema, mark ? (size_t)(mark - schema) : strlen(schema));
    WError err = {0};
    if (exec(db, "BEGIN", &err) == 0 && exec(db, head, &err) == 0 && add_catalog_tables(db) == 0 &&
        exec(db, "COMMIT", &err) == 0) {
        tmpl.rc = 0;
        for (int i = 0; i < 2; i++) {
            tmpl.img[i] = sqlite3_serialize(db, SCHEMAS[i], &tmpl.len[i], 0);
            if (!tmpl.img[i])
                tmpl.rc = -1;
        }
    } else {
        wlog_error("pgcatalog", "cannot build the system catalogs: %s", err.set ? err.msg : sqlite3_errmsg(db));
    }
    free(head);
    sqlite3_close(db);
}

/* Opens the database with the catalog for this statement. */
static int build(PgCtx *c, sqlite3 **out, WError *err)
{
    *out = NULL;
    pthread_once(&tmpl.once, build_template);
    if (tmpl.rc)
        return werr(err, SQLSTATE_INTERNAL, 0, "the system catalogs are not available (see the server log)");
    sqlite3 *db = open_db(c);
    if (!db)
        return werr(err, SQLSTATE_OUT_OF_MEMORY, 0, "cannot open the system catalogs");
    for (int i = 0; i < 2; i++) {
        unsigned char *copy = sqlite3_malloc64((sqlite3_uint64)tmpl.len[i]);
        if (!copy) {
            werr(err, SQLSTATE_OUT_OF_MEMORY, 0, "out of memory for the system catalogs");
            goto fail;
        }
        memcpy(copy, tmpl.img[i], (size_t)tmpl.len[i]);
        if (sqlite3_deserialize(db, SCHEMAS[i], copy, tmpl.len[i], tmpl.len[i],
                                SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE) != SQLITE_OK)
            goto fail;
    }
    if (exec(db, "BEGIN; CREATE TABLE main._weir_sizes (oid INTEGER PRIMARY KEY, bytes INTEGER)", err))
        goto fail;
    Arena *a = arena_new(0);
    pthread_mutex_lock(&c->e->lock);
    int rc = add_weir_objects(db, c->e, c->s, a);
    pthread_mutex_unlock(&c->e->lock);
    arena_free(a);
    if (rc) {
        werr(err, SQLSTATE_INTERNAL, 0, "building the system catalogs: %s", sqlite3_errmsg(db));
        goto fail;
    }
    const char *mark = strstr((const char *)weir_pgcatalog_sql, "-- ---- derive:");
    if ((mark && exec(db, mark, err)) || exec(db, "COMMIT", err))
        goto fail;
    sqlite3_progress_handler(db, PROGRESS_STEPS, progress, c);
    *out = db;
    return 0;
fail:
    if (!err->set)
        werr(err, SQLSTATE_INTERNAL, 0, "building the system catalogs: %s", sqlite3_errmsg(db));
    sqlite3_close(db);
    return -1;
}

/* ---- running a statement --------------------------------------------------------------- */

/* A SQLite error as a Postgres one: our functions prefix a SQLSTATE. */
static int sqlite_error(sqlite3 *db, Engine *e, SrvResult *out, bool prepare, WError *err)
{
    const char *m = sqlite3_errmsg(db);
    if (sqlite3_errcode(db) == SQLITE_INTERRUPT)
        return werr(err, SQLSTATE_QUERY_CANCELED, 0, "%s", srv_result_cancel_message(out));
    if (strlen(m) > 6 && m[5] == ':' && isalnum((unsigned char)m[0])) {
        char state[6];
        memcpy(state, m, 5);
        state[5] = 0;
        return werr(err, state, 0, "%s", m + 6);
    }
    if (!strncmp(m, "no such table: ", 15)) {
        const char *name = m + 15;
        const char *dot = strchr(name, '.');
        const char *bare = dot ? dot + 1 : name;
        pthread_mutex_lock(&e->lock);
        bool weir = cat_find(e->cat, bare) != NULL;
        pthread_mutex_unlock(&e->lock);
        if (weir)
            return werr(err, SQLSTATE_NOT_SUPPORTED, 0,
                        "feature not supported: a query that reads both the system catalogs and weir relation \"%s\"",
                        bare);
        return werr(err, SQLSTATE_UNDEFINED_TABLE, 0, "relation \"%s\" does not exist", name);
    }
    if (!strncmp(m, "no such column: ", 16))
        return werr(err, SQLSTATE_UNDEFINED_COLUMN, 0, "column \"%s\" does not exist", m + 16);
    if (!strncmp(m, "no such function: ", 18))
        return werr(err, SQLSTATE_UNDEFINED_FUNCTION, 0, "function %s() does not exist", m + 18);
    if (!strncmp(m, "wrong number of arguments to function ", 38))
        return werr(err, SQLSTATE_UNDEFINED_FUNCTION, 0, "function %s does not exist", m + 38);
    return werr(err, prepare ? SQLSTATE_SYNTAX_ERROR : SQLSTATE_INTERNAL, 0, "%s", m);
}

/* True when the translated statement gives name as an alias (AS name). */
static bool is_alias(const char *lite, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = lite; (p = strcasestr(p, "as ")) != NULL; p += 3) {
        if (p > lite && (isalnum((unsigned char)p[-1]) || p[-1] == '_'))
            continue;
        const char *q = p + 3;
        while (*q == ' ')
            q++;
        if (*q == '"') {
            const char *r = q + 1;
            size_t k = 0;
            while (*r && k < n) {
                if (*r == '"' && r[1] == '"')
                    r++;
                else if (*r == '"')
                    break;
                if (*r != name[k])
                    break;
                r++, k++;
            }
            if (k == n && *r == '"')
                return true;
        } else if (!strncmp(q, name, n) && !(isalnum((unsigned char)q[n]) || q[n] == '_')) {
            return true;
        }
    }
    return false;
}

/* The header Postgres would give an unnamed result column. */
static const char *column_name(const char *s, Arena *a)
{
    size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_ABCDEFGHIJKLMNOPQRSTUVWXYZ");
    if (s[n] == 0)
        return s;
    if (s[n] == '(' && n > 0) {
        char *f = arena_strndup(a, s, n);
        static const char *const CASTS[] = {"cast", "regclass", "regtype", "regnamespace", "regrole", "regproc",
                                            "pg_bool", "regclass_oid", "regtype_oid", NULL};
        for (int i = 0; CASTS[i]; i++)
            if (!strcasecmp(f, CASTS[i])) {
                /* A cast: the name of what is cast, when that is a column. */
                const char *in = s + n + 1;
                size_t m = strcspn(in, " )");
                char *inner = arena_strndup(a, in, m);
                char *dot = strrchr(inner, '.');
                const char *col = dot ? dot + 1 : inner;
                if (*col && strspn(col, "abcdefghijklmnopqrstuvwxyz0123456789_") == strlen(col) &&
                    !isdigit((unsigned char)*col))
                    return col;
                return "?column?";
            }
        if (!strcmp(f, "group_concat"))
            return "string_agg";
        if (!strcmp(f, "pg_array_agg"))
            return "array_agg";
        if (!strcmp(f, "pg_array"))
            return "array";
        if (!strcmp(f, "pg_left") || !strcmp(f, "pg_right"))
            return f + 3;
        return f;
    }
    if (s[n] == '.' && n > 0)
        return column_name(s + n + 1, a);
    return "?column?";
}

static uint32_t value_oid(int type)
{
    switch (type) {
    case SQLITE_INTEGER: return PG_OID_INT8;
    case SQLITE_FLOAT: return PG_OID_FLOAT8;
    case SQLITE_BLOB: return PG_OID_BYTEA;
    default: return PG_OID_TEXT;
    }
}

static const char *cell_text(sqlite3_stmt *st, int i, uint32_t oid, char *tmp, size_t n, Buf *blob, int *len)
{
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_NULL:
        return NULL;
    case SQLITE_INTEGER:
        if (oid == PG_OID_BOOL)
            snprintf(tmp, n, "%s", sqlite3_column_int64(st, i) ? "t" : "f");
        else
            snprintf(tmp, n, "%lld", (long long)sqlite3_column_int64(st, i));
        *len = (int)strlen(tmp);
        return tmp;
    case SQLITE_FLOAT: {
        double d = sqlite3_column_double(st, i);
        for (int p = 1; p <= 17; p++) {
            snprintf(tmp, n, "%.*g", p, d);
            if (strtod(tmp, NULL) == d)
                break;
        }
        *len = (int)strlen(tmp);
        return tmp;
    }
    case SQLITE_BLOB: {
        const unsigned char *p = sqlite3_column_blob(st, i);
        int k = sqlite3_column_bytes(st, i);
        buf_reset(blob);
        buf_puts(blob, "\\x");
        for (int j = 0; j < k; j++)
            buf_printf(blob, "%02x", p[j]);
        *len = (int)blob->len;
        return blob->data;
    }
    default: {
        const char *s = (const char *)sqlite3_column_text(st, i);
        *len = sqlite3_column_bytes(st, i);
        if (oid == PG_OID_BOOL && s && (!strcmp(s, "1") || !strcmp(s, "0"))) {
            *len = 1;
            return s[0] == '1' ? "t" : "f";
        }
        return s;
    }
    }
}

int pgcat_query(Engine *e, Session *s, const char *sql, int len, int n_params, const char *const *params,
                bool describe_only, long max_rows, SrvResult *out, WError *err)
{
    PgCtx c = {e, s, out};
    Arena *a = arena_new(0);
    char *lite;
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    Buf blob = BUF_INIT;
    int rc = -1;
    if (pgt_translate(sql, len, a, &lite, err) || build(&c, &db, err))
        goto done;
    const char *tail = NULL;
    if (sqlite3_prepare_v2(db, lite, -1, &st, &tail) != SQLITE_OK) {
        sqlite_error(db, e, out, true, err);
        goto done;
    }
    if (!st) {
        rc = 0;   /* nothing but comments */
        goto done;
    }
    if (!sqlite3_stmt_readonly(st)) {
        werr(err, SQLSTATE_NOT_SUPPORTED, 0, "feature not supported: changing the system catalogs");
        goto done;
    }
    if (sqlite3_bind_parameter_count(st) > n_params) {
        werr(err, SQLSTATE_UNDEFINED_PARAMETER, 0, "there is no parameter $%d", sqlite3_bind_parameter_count(st));
        goto done;
    }
    for (int i = 0; i < n_params; i++) {
        if (params && params[i])
            sqlite3_bind_text(st, i + 1, params[i], -1, SQLITE_TRANSIENT);
    }
    int n = sqlite3_column_count(st);
    if (n > WEIR_MAX_COLUMNS) {
        werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "target lists can have at most %d entries", WEIR_MAX_COLUMNS);
        goto done;
    }
    const char **names = arena_alloc(a, sizeof(char *) * (size_t)(n + 1));
    uint32_t *oids = arena_alloc(a, sizeof(uint32_t) * (size_t)(n + 1));
    bool *typed = arena_alloc(a, sizeof(bool) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
        const char *decl = sqlite3_column_decltype(st, i);
        typed[i] = decl != NULL;
        oids[i] = decl ? pgcat_decltype_oid(decl) : PG_OID_TEXT;
        const char *cn = sqlite3_column_name(st, i);
        names[i] = sqlite3_column_origin_name(st, i) || is_alias(lite, cn) ? cn : column_name(cn, a);
    }
    if (describe_only) {
        srv_result_columns(out, n, names, oids);
        rc = 0;
        goto done;
    }
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW)
        for (int i = 0; i < n; i++)
            if (!typed[i])
                oids[i] = value_oid(sqlite3_column_type(st, i));
    srv_result_columns(out, n, names, oids);
    const char **vals = arena_alloc(a, sizeof(char *) * (size_t)(n + 1));
    int *lens = arena_alloc(a, sizeof(int) * (size_t)(n + 1));
    char (*tmp)[64] = arena_alloc(a, 64 * (size_t)(n + 1));
    Buf *blobs = arena_zalloc(a, sizeof(Buf) * (size_t)(n + 1));
    long rows = 0;
    for (; step == SQLITE_ROW; step = sqlite3_step(st)) {
        for (int i = 0; i < n; i++) {
            lens[i] = -1;
            vals[i] = cell_text(st, i, oids[i], tmp[i], sizeof tmp[i], &blobs[i], &lens[i]);
        }
        if (srv_result_row(out, vals, lens) < 0)
            break;
        if (++rows == max_rows && max_rows > 0)
            break;
    }
    for (int i = 0; i < n; i++)
        buf_free(&blobs[i]);
    if (step != SQLITE_ROW && step != SQLITE_DONE) {
        sqlite_error(db, e, out, false, err);
        goto done;
    }
    char tag[48];
    snprintf(tag, sizeof tag, "SELECT %ld", rows);
    srv_result_complete(out, tag);
    rc = 0;
done:
    buf_free(&blob);
    sqlite3_finalize(st);
    sqlite3_close(db);
    arena_free(a);
    return rc;
}
