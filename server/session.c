/*
 * session.c: a client session: its settings, and the dispatch of its
 * statements.
 *
 * A Query message's text is parsed into statements, and each runs in turn
 * with the engine lock held (FLUSH releases it while it waits), so a
 * statement sees the views between two engine steps. exec_stmt hands each
 * statement to its command (commands.h: cmd_source.c, cmd_view.c,
 * cmd_sink.c, cmd_table.c, ...); statements of a weir cluster's catalog go
 * through the catalog topic first (cluster_route, session_apply). Queries
 * naming pg_catalog or information_schema go to pgcatalog.c.
 */
#include "commands.h"
#include "tz.h"
#include "crashpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cluster.h"
#include "crypto.h"
#include "nexmark.h"
#include "pgcatalog.h"
#include "numeric.h"
#include "row.h"
#include "arena.h"
#include "clock.h"
#include "log.h"
#include "pg_oids.h"
#include "weir_limits.h"

/* ---- settings ------------------------------------------------------------------ */

static const struct {
    const char *name;
    const char *dflt;
} SETTINGS[] = {
    {"application_name", ""},
    {"client_encoding", "UTF8"},
    {"server_encoding", "UTF8"},
    {"datestyle", "ISO, MDY"},
    {"timezone", "UTC"},
    {"intervalstyle", "postgres"},
    {"extra_float_digits", "1"},
    {"search_path", "public"},
    {"statement_timeout", "0"},
    {"lock_timeout", "0"},
    {"idle_in_transaction_session_timeout", "0"},
    {"idle_session_timeout", "0"},
    {"client_min_messages", "notice"},
    {"standard_conforming_strings", "on"},
    {"bytea_output", "hex"},
    {"server_version", "15.0"},
    {"server_version_num", "150000"},
    {"integer_datetimes", "on"},
    {"transaction_isolation", "read committed"},
    {"streaming_allow_unbounded_state", "false"},
    {"streaming_parallelism", "1"},
    {"password_encryption", "scram-sha-256"},
    /* Set by another node of the cluster that gathers a distributed view's
     * rows (cluster_gather.c): "<view table id>:<key group>,...". */
    {"weir.read_key_groups", ""},
};

static int setting_index(const char *name)
{
    for (size_t i = 0; i < sizeof SETTINGS / sizeof SETTINGS[0]; i++)
        if (strcasecmp(SETTINGS[i].name, name) == 0)
            return (int)i;
    return -1;
}

static const char *setting_get(Session *s, const char *name)
{
    for (int i = 0; i < s->n_settings; i++)
        if (strcasecmp(s->keys[i], name) == 0)
            return s->values[i];
    int k = setting_index(name);
    return k >= 0 ? SETTINGS[k].dflt : NULL;
}

const char *session_setting(Session *s, const char *name) { return setting_get(s, name); }

bool session_setting_is_set(Session *s, const char *name)
{
    for (int i = 0; i < s->n_settings; i++)
        if (strcasecmp(s->keys[i], name) == 0)
            return true;
    return false;
}

/* A time setting as Postgres takes it: an integer in milliseconds, or with
 * a unit (us, ms, s, min, h, d). Returns 0 and *ms, or -1 if malformed or
 * out of range (0 .. 2147483647 ms). */
static int parse_ms(const char *v, long *ms)
{
    static const struct {
        const char *unit;
        double ms;
    } UNITS[] = {{"us", 0.001}, {"ms", 1}, {"s", 1000}, {"min", 60000}, {"h", 3600000}, {"d", 86400000}};
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || errno || !(x >= 0))   /* NaN fails too */
        return -1;
    while (*end == ' ')
        end++;
    double scale = 1;
    if (*end) {
        size_t k = 0;
        for (; k < sizeof UNITS / sizeof UNITS[0]; k++)
            if (!strcasecmp(end, UNITS[k].unit))
                break;
        if (k == sizeof UNITS / sizeof UNITS[0])
            return -1;
        scale = UNITS[k].ms;
    }
    x *= scale;
    if (!(x <= 2147483647.0))   /* and infinity */
        return -1;
    *ms = (long)(x + 0.5);
    if (*ms == 0 && x > 0)
        *ms = 1;   /* a positive value is at least 1 ms, as Postgres rounds */
    return 0;
}

static long setting_ms(Session *s, const char *name)
{
    long ms = 0;
    const char *v = setting_get(s, name);
    return v && parse_ms(v, &ms) == 0 ? ms : 0;
}

long session_idle_timeout(void *ctx, void *sess)
{
    Session *s = sess;
    if (!s)
        return 0;
    return setting_ms(s, s->in_txn ? "idle_in_transaction_session_timeout" : "idle_session_timeout");
}

bool session_in_transaction(void *ctx, void *sess) { return sess && ((Session *)sess)->in_txn; }
int session_setting_count(void) { return (int)(sizeof SETTINGS / sizeof SETTINGS[0]); }
const char *session_setting_name(int i) { return SETTINGS[i].name; }
const char *session_setting_default(int i) { return SETTINGS[i].dflt; }

bool session_allow_unbounded(Session *s)
{
    const char *v = s ? session_setting(s, "streaming_allow_unbounded_state") : NULL;
    return v && (!strcasecmp(v, "true") || !strcasecmp(v, "on") || !strcmp(v, "1"));
}

int session_parallelism(Session *s)
{
    int p = 1;
    if (s)
        plan_parallelism_value(session_setting(s, "streaming_parallelism"), &p);
    return p;
}

static void setting_set(Session *s, const char *name, const char *value)
{
    for (int i = 0; i < s->n_settings; i++)
        if (strcasecmp(s->keys[i], name) == 0) {
            free(s->values[i]);
            if (value) {
                s->values[i] = xstrdup(value);
            } else {
                free(s->keys[i]);
                s->keys[i] = s->keys[s->n_settings - 1];
                s->values[i] = s->values[s->n_settings - 1];
                s->n_settings--;
            }
            return;
        }
    if (!value)
        return;
    s->keys = xrealloc(s->keys, sizeof(char *) * (size_t)(s->n_settings + 1));
    s->values = xrealloc(s->values, sizeof(char *) * (size_t)(s->n_settings + 1));
    s->keys[s->n_settings] = xstrdup(name);
    s->values[s->n_settings] = xstrdup(value);
    s->n_settings++;
}

void *session_open(void *ctx, const char *user, const char *database, WError *err)
{
    Session *s = xcalloc(1, sizeof *s);
    Engine *e = ctx;
    s->e = e;
    s->user = xstrdup(user ? user : "weir");
    s->started_us = clock_wall_us();
    pthread_mutex_lock(&e->lock);
    s->next = e->sessions;
    e->sessions = s;
    pthread_mutex_unlock(&e->lock);
    return s;
}

/* A query string starts (active) or ends: pg_stat_activity's state and query. */
static void session_activity(Session *s, const char *sql, SrvResult *out)
{
    SrvConnInfo ci;
    srv_result_conn_info(out, &ci);
    pthread_mutex_lock(&s->e->lock);
    if (sql) {
        s->pid = ci.pid;
        snprintf(s->client_addr, sizeof s->client_addr, "%s", ci.client_addr);
        if (!s->startup_app)
            s->startup_app = xstrdup(ci.application_name);
        free(s->query);
        /* Other sessions read this: never show a password (CREATE/ALTER USER). */
        s->query = strcasestr(sql, "password") ? xstrdup("<not shown: the statement mentions a password>")
                                               : xstrndup(sql, 1024);
        s->query_start_us = clock_wall_us();
    }
    s->active = sql != NULL;
    pthread_mutex_unlock(&s->e->lock);
}

void session_close(void *ctx, void *sess)
{
    Session *s = sess;
    if (!s)
        return;
    Engine *e = s->e;
    pthread_mutex_lock(&e->lock);
    cursors_close_all(s);
    for (Session **pp = &e->sessions; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    pthread_mutex_unlock(&e->lock);
    free(s->query);
    free(s->startup_app);
    for (int i = 0; i < s->n_settings; i++) {
        free(s->keys[i]);
        free(s->values[i]);
    }
    free(s->keys);
    free(s->values);
    free(s->user);
    free(s);
}

/* ---- helpers --------------------------------------------------------------------- */

const char *cmd_kind_word(CatKind k)
{
    switch (k) {
    case CAT_SOURCE: return "source";
    case CAT_TABLE: return "table";
    case CAT_VIEW: return "materialized view";
    case CAT_SINK: return "sink";
    case CAT_SYSTEM: return "system view";
    }
    return "relation";
}

void cmd_one_text_column(SrvResult *out, const char *name)
{
    uint32_t oid = PG_OID_TEXT;
    srv_result_columns(out, 1, &name, &oid);
}

void cmd_text_row(SrvResult *out, int n, const char **vals)
{
    int lens[8];
    for (int i = 0; i < n; i++)
        lens[i] = vals[i] ? (int)strlen(vals[i]) : -1;
    srv_result_row(out, vals, lens);
}

/* ---- SHOW, SET ----------------------------------------------------------------------------------- */

static int show(Engine *e, Session *s, const AstStmt *st, SrvResult *out, WError *err)
{
    const AstShow *sh = st->u.show;
    const char *w = sh->what;
    CatKind kind = 0;
    if (!strcasecmp(w, "sources"))
        kind = CAT_SOURCE;
    else if (!strcasecmp(w, "materialized views") || !strcasecmp(w, "views"))
        kind = CAT_VIEW;
    else if (!strcasecmp(w, "sinks"))
        kind = CAT_SINK;
    else if (!strcasecmp(w, "tables"))
        kind = CAT_TABLE;
    if (kind) {
        cmd_one_text_column(out, "Name");
        CAT_FOREACH(e->cat, CAT_ANY, o)
            if (o->kind == kind && !o->view.late_of && !o->view.sink_query) {
                const char *v[1] = {o->name};
                cmd_text_row(out, 1, v);
            }
        srv_result_complete(out, "SHOW");
        return 0;
    }
    if (!strcasecmp(w, "create")) {
        CatObj *o = sh->name ? cat_find(e->cat, sh->name) : NULL;
        if (!o)
            return werr(err, SQLSTATE_UNDEFINED_TABLE, st->pos, "relation \"%s\" does not exist", sh->name ? sh->name : "");
        const char *names[2] = {"Name", "Create Sql"};
        uint32_t oids[2] = {PG_OID_TEXT, PG_OID_TEXT};
        srv_result_columns(out, 2, names, oids);
        /* A source changed by ALTER SOURCE shows both statements. */
        Buf both = BUF_INIT;
        if (o->source.alter_sql)
            buf_printf(&both, "%s;\n%s", o->sql, o->source.alter_sql);
        const char *v[2] = {o->name, o->source.alter_sql ? both.data : o->sql};
        cmd_text_row(out, 2, v);
        buf_free(&both);
        srv_result_complete(out, "SHOW");
        return 0;
    }
    if (!strcasecmp(w, "all")) {
        const char *names[2] = {"name", "setting"};
        uint32_t oids[2] = {PG_OID_TEXT, PG_OID_TEXT};
        srv_result_columns(out, 2, names, oids);
        for (size_t i = 0; i < sizeof SETTINGS / sizeof SETTINGS[0]; i++) {
            const char *v[2] = {SETTINGS[i].name, setting_get(s, SETTINGS[i].name)};
            cmd_text_row(out, 2, v);
        }
        srv_result_complete(out, "SHOW");
        return 0;
    }
    const char *v = setting_get(s, w);
    if (!v)
        return werr(err, SQLSTATE_UNDEFINED_OBJECT, st->pos, "unrecognized configuration parameter \"%s\"", w);
    cmd_one_text_column(out, !strcasecmp(w, "timezone") ? "TimeZone" : w); /* Postgres's spelling */
    cmd_text_row(out, 1, &v);
    srv_result_complete(out, "SHOW");
    return 0;
}

static int set(Session *s, const AstStmt *st, bool reset, SrvResult *out, WError *err)
{
    const AstSet *a = st->u.set;
    if (reset && !strcasecmp(a->name, "all")) {
        bool had_tz = s->tz != NULL;
        while (s->n_settings)
            setting_set(s, s->keys[0], NULL);
        s->tz = NULL;
        tz_set_current(NULL);
        if (had_tz)
            srv_result_parameter_status(out, "TimeZone", "UTC");
        srv_result_complete(out, "RESET");
        return 0;
    }
    int k = setting_index(a->name);
    if (k < 0)
        return werr(err, SQLSTATE_UNDEFINED_OBJECT, st->pos, "unrecognized configuration parameter \"%s\"", a->name);
    if (!strcasecmp(a->name, "timezone")) {
        /* A tz database name; DEFAULT, LOCAL and RESET mean the server's UTC.
         * The setting keeps the name as the database spells it, and the
         * client hears of the change (ParameterStatus), as from Postgres. */
        const WTz *z = NULL;
        if (!reset && a->value && tz_find(a->value, &z, err))
            return err->pos = st->pos,
                   werr_hint(err, "Time zones are tz database names such as 'Europe/Berlin' or 'UTC'."), -1;
        s->tz = z;
        tz_set_current(z);
        setting_set(s, "timezone", z ? tz_name(z) : NULL);
        srv_result_parameter_status(out, "TimeZone", tz_name(z));
        srv_result_complete(out, reset ? "RESET" : "SET");
        return 0;
    }
    static const char *const TIMES[] = {"statement_timeout", "idle_session_timeout", "lock_timeout",
                                        "idle_in_transaction_session_timeout"};
    for (size_t i = 0; i < sizeof TIMES / sizeof TIMES[0] && !reset && a->value; i++) {
        long ms;
        if (!strcasecmp(a->name, TIMES[i]) && parse_ms(a->value, &ms))
            return werr(err, SQLSTATE_INVALID_PARAMETER, st->pos, "invalid value for parameter \"%s\": \"%s\"",
                        TIMES[i], a->value),
                   werr_hint(err, "Valid units for this parameter are \"us\", \"ms\", \"s\", \"min\", \"h\", and \"d\"."),
                   -1;
    }
    int par;
    if (!reset && a->value && !strcasecmp(a->name, "streaming_parallelism") && plan_parallelism_value(a->value, &par))
        return werr(err, SQLSTATE_INVALID_PARAMETER, st->pos,
                    "invalid value for parameter \"streaming_parallelism\": \"%s\"", a->value),
               werr_hint(err, "streaming_parallelism is an integer from 1 to %d.", PLAN_MAX_PARALLELISM), -1;
    setting_set(s, a->name, reset ? NULL : a->value);
    srv_result_complete(out, reset ? "RESET" : "SET");
    return 0;
}

/* ---- dispatch ------------------------------------------------------------------------------------ */

static int exec_stmt(Engine *e, Session *s, const char *sql, const AstStmt *st, bool describe_only, SrvResult *out,
                     WError *err)
{
    char *text = xstrndup(sql + st->text_start, (size_t)(st->text_end - st->text_start));
    int rc = 0;
    if (describe_only && st->kind != STMT_SELECT && st->kind != STMT_ANALYZE_LATENESS && st->kind != STMT_VERIFY) {
        free(text);
        return 0;
    }
    switch (st->kind) {
    case STMT_SELECT: {
        /* Another node reading some of our key groups (cluster_gather.c):
         * they must all still be here, and the query sees only them. */
        const char *kgs = setting_get(s, "weir.read_key_groups");
        if (kgs && *kgs && cluster_gather_check_request(e, kgs, err)) {
            rc = -1;
            break;
        }
        e->read_key_groups = kgs && *kgs ? kgs : NULL;
        rc = cmd_select(e, st, describe_only, out, err);
        e->read_key_groups = NULL;
        break;
    }
    case STMT_CREATE_SOURCE:
        rc = cmd_create_source(e, st, text, out, err);
        break;
    case STMT_CREATE_VIEW:
        rc = cmd_create_view(e, s, st, text, out, err);
        break;
    case STMT_DROP:
        rc = cmd_drop(e, st, out, err);
        break;
    case STMT_INSERT:
        rc = cmd_insert(e, st, out, err);
        break;
    case STMT_EXPLAIN:
        rc = cmd_explain(e, s, st, out, err);
        break;
    case STMT_FLUSH:
        rc = cmd_flush(e, out, err);
        break;
    case STMT_SHOW:
        rc = show(e, s, st, out, err);
        break;
    case STMT_SET:
        rc = set(s, st, false, out, err);
        break;
    case STMT_RESET:
        rc = set(s, st, true, out, err);
        break;
    case STMT_TRANSACTION:
        /* Accepted as drivers send them; every statement applies on its own.
         * The session remembers being "in" one for ReadyForQuery ('T') and
         * for idle_in_transaction_session_timeout. */
        s->in_txn = st->u.txn == TXN_BEGIN;
        if (!s->in_txn)
            cursors_close_all(s);
        srv_result_complete(out, st->u.txn == TXN_BEGIN ? "BEGIN" : st->u.txn == TXN_COMMIT ? "COMMIT" : "ROLLBACK");
        break;
    case STMT_CHECKPOINT:
        rc = cmd_checkpoint(e, st, out, err);
        break;
    case STMT_CREATE_SINK:
        rc = cmd_create_sink(e, s, st, text, out, err);
        break;
    case STMT_UPDATE:
        rc = table_update(e, st, out, err);
        break;
    case STMT_DELETE:
        rc = table_delete(e, st, out, err);
        break;
    case STMT_DECLARE:
        rc = cursor_declare(e, s, st, describe_only, out, err);
        break;
    case STMT_FETCH:
        rc = cursor_fetch(e, s, st, describe_only, out, err);
        break;
    case STMT_CLOSE:
        rc = cursor_close(e, s, st, describe_only, out, err);
        break;
    case STMT_SUBSCRIBE:
        rc = session_subscribe(e, st, out, err);
        break;
    case STMT_ANALYZE_LATENESS:
        rc = srv_analyze_lateness(e, st, describe_only, out, err);
        break;
    case STMT_VERIFY:
        rc = srv_verify_view(e, st, describe_only, out, err);
        break;
    case STMT_ALTER_SOURCE:
        rc = cmd_alter_source(e, st, out, err);
        break;
    case STMT_RESUME:
        rc = cmd_resume_view(e, st, out, err);
        break;
    case STMT_CREATE_USER:
    case STMT_ALTER_USER:
    case STMT_DROP_USER:
        rc = users_exec(e, st, out, err);
        break;
    case STMT_SWAP_VIEW:
        rc = session_swap_view(e, st, out, err);
        break;
    case STMT_ALTER_RENAME:
        rc = cmd_rename(e, st, out, err);
        break;
    case STMT_EMPTY:
        break;
    }
    free(text);
    return rc;
}

static int run_weir(Session *s, const char *sql, bool describe_only, int n_params, const char *const *params,
                    int pos_offset, SrvResult *out);

/* ---- a weir cluster: statements that go through the catalog topic ------------------------ */

/* Names of functions whose value depends on when or where they run: DML
 * applied on every node of a cluster must not call them. */
static bool volatile_func(const char *name)
{
    static const char *const NAMES[] = {"now", "current_timestamp", "localtimestamp", "current_date",
                                        "current_time", "localtime", "clock_timestamp", "statement_timestamp",
                                        "transaction_timestamp", "random", "gen_random_uuid", "proctime",
                                        "timeofday", "pg_backend_pid", "inet_server_port"};
    for (size_t i = 0; name && i < sizeof NAMES / sizeof NAMES[0]; i++)
        if (!strcasecmp(name, NAMES[i]))
            return true;
    return false;
}

/* The first part of x that reads anything but its own row (a subquery) or
 * changes with time or place (now(), random()), or NULL. */
static const AstExpr *nondeterministic(const AstExpr *x)
{
    if (!x)
        return NULL;
    if (x->kind == AST_SUBQUERY || (x->kind == AST_FUNC && volatile_func(x->text)))
        return x;
    const AstExpr *parts[] = {x->arg, x->lo, x->hi, x->else_, x->filter};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        const AstExpr *f = nondeterministic(parts[i]);
        if (f)
            return f;
    }
    const AstList *lists[] = {x->args, x->whens};
    for (size_t k = 0; k < 2; k++)
        for (int i = 0; lists[k] && i < lists[k]->n; i++) {
            const AstExpr *f = nondeterministic(AST_AT(lists[k], i));
            if (f)
                return f;
        }
    return NULL;
}

static int not_deterministic(const AstExpr *x, WError *err)
{
    return werr(err, SQLSTATE_NOT_SUPPORTED, x->pos,
                "feature not supported: %s in a statement on a table of a weir cluster",
                x->kind == AST_SUBQUERY ? "a subquery" : "a function whose value depends on when it runs"),
           werr_hint(err, "Every node applies the statement from the catalog topic, so it must give the same "
                          "rows everywhere: write the values out (docs/cluster.md)."), -1;
}

/* How a statement runs in a cluster: 1 through the catalog topic (DDL; DML
 * on tables, which are replicated by applying the same statements in the
 * same order on every node), 0 here (queries, SET, INSERT into a Kafka
 * source, CHECKPOINT, RESUME), -1 refused (err set). Lock held. */
static int cluster_route(Engine *e, const AstStmt *st, int n_params, WError *err)
{
    int route = 0;
    switch (st->kind) {
    case STMT_CREATE_SOURCE:
    case STMT_CREATE_VIEW:
    case STMT_DROP:
    case STMT_ALTER_SOURCE:
    case STMT_SWAP_VIEW:
    case STMT_ALTER_RENAME:
    case STMT_DROP_USER:
        route = 1;
        break;
    case STMT_CREATE_USER:
    case STMT_ALTER_USER: {
        /* The statement is kept in the catalog topic for ever: a password
         * in it would be readable by anyone who reads the topic. */
        const char *pw = st->u.user->password;
        if (pw && !crypto_scram_is_verifier(pw))
            return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos,
                        "feature not supported: a password in clear text in a weir cluster"),
                   werr_hint(err, "The statement is stored in the cluster's catalog topic. Give a SCRAM-SHA-256 "
                                  "verifier instead: psql's \\password command sends one."),
                   -1;
        route = 1;
        break;
    }
    case STMT_CREATE_SINK:
        return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: CREATE SINK in a weir cluster"),
               werr_hint(err, "Every node runs every view in this phase, so each would write the sink. Sinks in a "
                              "cluster come with key-group ownership (the next phase, docs/cluster.md); until "
                              "then run the sink on a weir outside the cluster, or read the view over SQL."),
               -1;
    case STMT_INSERT: {
        const AstInsert *ins = st->u.insert;
        CatObj *o = cat_find(e->cat, ins->table);
        if (!o || o->kind != CAT_TABLE || cat_option(&o->rel, "connector"))
            return 0; /* a Kafka source: every node reads the topic; errors come from the normal path */
        if (!ins->query->values)
            return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos,
                        "feature not supported: INSERT INTO table ... SELECT in a weir cluster"),
                   werr_hint(err, "Views advance at their own pace on each node, so the query would give each node "
                                  "other rows: insert the values (INSERT ... VALUES), or make the table a source."),
                   -1;
        for (int r = 0; r < ast_list_len(ins->query->values); r++) {
            const AstList *row = AST_AT(ins->query->values, r);
            for (int i = 0; row && i < row->n; i++) {
                const AstExpr *f = nondeterministic(AST_AT(row, i));
                if (f)
                    return not_deterministic(f, err);
            }
        }
        route = 1;
        break;
    }
    case STMT_UPDATE:
    case STMT_DELETE: {
        CatObj *o = cat_find(e->cat, st->kind == STMT_UPDATE ? st->u.update->table : st->u.delete_->table);
        if (!o || o->kind != CAT_TABLE || cat_option(&o->rel, "connector"))
            return 0; /* not a writable table: the normal path says so */
        const AstExpr *f = nondeterministic(st->kind == STMT_UPDATE ? st->u.update->where : st->u.delete_->where);
        for (int i = 0; !f && st->kind == STMT_UPDATE && i < ast_list_len(st->u.update->set_exprs); i++)
            f = nondeterministic(AST_AT(st->u.update->set_exprs, i));
        if (f)
            return not_deterministic(f, err);
        route = 1;
        break;
    }
    default:
        return 0;
    }
    if (n_params > 0)
        return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos,
                    "feature not supported: parameters ($n) in a catalog statement of a weir cluster"),
               werr_hint(err, "Send the statement with its values written in (a simple query)."), -1;
    return route;
}

/* Sends statement st of sql through the catalog topic and answers with
 * the outcome of applying it here. Lock NOT held. Returns 0, or -1 with err. */
static int cluster_run(Session *s, const char *sql, const AstStmt *st, SrvResult *out, WError *err)
{
    char *text = xstrndup(sql + st->text_start, (size_t)(st->text_end - st->text_start));
    const char *keys[CLUSTER_MAX_SETTINGS], *vals[CLUSTER_MAX_SETTINGS];
    int n = 0;
    /* The settings that shape how a statement is planned or its values read. */
    static const char *const CARRIED[] = {"timezone", "streaming_parallelism", "streaming_allow_unbounded_state",
                                          "datestyle", "intervalstyle", "search_path", "password_encryption"};
    for (size_t i = 0; i < sizeof CARRIED / sizeof CARRIED[0] && n < CLUSTER_MAX_SETTINGS; i++)
        if (session_setting_is_set(s, CARRIED[i])) {
            keys[n] = CARRIED[i];
            vals[n++] = session_setting(s, CARRIED[i]);
        }
    SrvCapture cap;
    int rc = cluster_submit(s->e->cluster, s->user, text, n, keys, vals, &cap, err);
    free(text);
    if (rc)
        return -1;
    if (cap.notices.len) {
        /* one notice per line */
        char *p = cap.notices.data;
        while (p) {
            char *nl = strchr(p, '\n');
            if (nl)
                *nl = 0;
            srv_result_notice(out, p);
            p = nl ? nl + 1 : NULL;
        }
    }
    buf_free(&cap.notices);
    if (cap.err.set) {
        *err = cap.err;
        if (err->pos > 0)
            err->pos += st->text_start; /* from the statement's own text to the query string's */
        return -1;
    }
    srv_result_complete(out, cap.tag);
    return 0;
}

int session_apply(Engine *e, const char *user, const char *sql, int n_settings, const char *const *keys,
                  const char *const *vals, int64_t catalog_next, SrvCapture *cap)
{
    WError err = {0};
    Session *s = session_open(e, user, "weir", &err);
    s->applying = true;
    s->apply_next = catalog_next;
    for (int i = 0; i < n_settings; i++) {
        if (setting_index(keys[i]) < 0)
            continue;
        if (!strcasecmp(keys[i], "timezone")) {
            const WTz *z = NULL;
            if (tz_find(vals[i], &z, &err) == 0)
                s->tz = z;
            werr_clear(&err);
        }
        setting_set(s, keys[i], vals[i]);
    }
    SrvResult *out = srv_result_capture_new(cap);
    static const char *const none[1] = {NULL};
    tz_set_current(s->tz);
    int rc = run_weir(s, sql, false, 0, none, 0, out);
    tz_set_current(NULL);
    srv_result_capture_free(out);
    /* The position is written at once: a crash before it would apply the
     * record again at start (harmless for most statements, 42P07 for a
     * CREATE, but not for a CREATE after a DROP of the same name, which
     * would then give new state table ids). What is left is the moment
     * between a statement's own catalog write and this checkpoint. */
    pthread_mutex_lock(&e->lock);
    if (e->catalog_next < catalog_next)
        e->catalog_next = catalog_next;
    e->dirty = true;
    WError cerr = {0};
    if (engine_checkpoint(e, &cerr))
        wlog_error("cluster", "checkpoint after catalog offset %lld failed: %s",
                (long long)catalog_next - 1, cerr.msg);
    pthread_mutex_unlock(&e->lock);
    session_close(e, s);
    return rc;
}

/* Parses sql (a piece of the client's query string: error positions are
 * moved by pos_offset) and runs each statement with weir's planner. $n
 * placeholders take params[n-1] (text, NULL = SQL NULL) as untyped literals
 * (pgwire describes a statement before Bind with every parameter NULL).
 * Returns 0, or -1 once an error was sent. */
static int run_weir(Session *s, const char *sql, bool describe_only, int n_params, const char *const *params,
                    int pos_offset, SrvResult *out)
{
    Engine *e = s->e;
    Arena *a = arena_new(0);
    AstStmt **stmts;
    AstExpr **ph;
    int n = 0, n_ph = 0, rc = 0;
    WError err = {0};
    if (parse_sql_params(sql, a, &stmts, &n, &ph, &n_ph, &err)) {
        if (err.pos > 0)
            err.pos += pos_offset;
        srv_result_error(out, &err);
        arena_free(a);
        return -1;
    }
    for (int i = 0; i < n_ph; i++) {
        int k = ph[i]->param_no;
        if (params && (k < 1 || k > n_params)) {
            werr(&err, SQLSTATE_UNDEFINED_PARAMETER, ph[i]->pos + pos_offset, "there is no parameter $%d", k);
            srv_result_error(out, &err);
            arena_free(a);
            return -1;
        }
        parse_bind_param(a, ph[i], params ? params[k - 1] : NULL);
    }
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&e->lock);
        /* A statement that changes the catalog may close dataflows or drop
         * tables, which the checkpoint in flight holds: let it finish
         * first. Queries need not wait. */
        AstStmtKind k = stmts[i]->kind;
        if (e->cluster && !s->applying && !describe_only) {
            int route = cluster_route(e, stmts[i], n_ph, &err);
            if (route != 0) {
                pthread_mutex_unlock(&e->lock);
                rc = route < 0 ? -1 : cluster_run(s, sql, stmts[i], out, &err);
                if (rc) {
                    if (err.pos > 0)
                        err.pos += pos_offset;
                    srv_result_error(out, &err);
                    break;
                }
                continue;
            }
        }
        if (s->applying && e->catalog_next < s->apply_next)
            e->catalog_next = s->apply_next; /* with the statement: a checkpoint it takes carries it */
        if (k != STMT_SELECT && k != STMT_EXPLAIN && k != STMT_SHOW && k != STMT_SET && k != STMT_RESET &&
            k != STMT_TRANSACTION && k != STMT_EMPTY && k != STMT_INSERT && k != STMT_DECLARE && k != STMT_FETCH &&
            k != STMT_CLOSE)
            engine_checkpoint_wait(e, NULL);
        srv_result_set_timeout(out, setting_ms(s, "statement_timeout"));
        ClusterGather *gather = NULL;
        if (e->cluster && (k == STMT_SELECT || k == STMT_DECLARE) && !describe_only) {
            /* A distributed view's rows live on several nodes: fetched
             * first, without the lock (cluster_gather.c). */
            pthread_mutex_unlock(&e->lock);
            rc = cluster_gather_prepare(e, stmts[i], s->user, &gather, &err);
            pthread_mutex_lock(&e->lock);
        }
        e->gather = gather;
        if (!rc)
            rc = exec_stmt(e, s, sql, stmts[i], describe_only, out, &err);
        e->gather = NULL;
        cluster_gather_free(e, gather);
        pthread_mutex_unlock(&e->lock);
        if (rc) {
            if (!err.set)
                werr(&err, SQLSTATE_INTERNAL, 0, "internal error");
            if (err.pos > 0)
                err.pos += pos_offset;
            srv_result_error(out, &err);
            break;
        }
    }
    arena_free(a);
    return rc ? -1 : 0;
}

/* A query string: statements that name the system catalogs are answered
 * from them (pgcatalog.c), the others by weir, in order. */
static void run_all(Session *s, const char *sql, bool describe_only, int n_params, const char *const *params,
                    long max_rows, SrvResult *out)
{
    int len = (int)strlen(sql);
    if (!pgt_names_catalog(sql, 0, len)) {
        run_weir(s, sql, describe_only, n_params, params, 0, out);
        return;
    }
    int starts[PGT_MAX_STMTS], ends[PGT_MAX_STMTS];
    int n = pgt_split(sql, starts, ends, PGT_MAX_STMTS);
    WError err = {0};
    if (n < 0) {
        werr(&err, SQLSTATE_PROGRAM_LIMIT, 0, "more than %d statements in one query", PGT_MAX_STMTS);
        srv_result_error(out, &err);
        return;
    }
    for (int i = 0; i < n; i++) {
        if (pgt_is_query(sql, starts[i], ends[i]) && pgt_names_catalog(sql, starts[i], ends[i])) {
            srv_result_set_timeout(out, setting_ms(s, "statement_timeout"));
            if (pgcat_query(s->e, s, sql + starts[i], ends[i] - starts[i], n_params, params, describe_only, max_rows,
                            out, &err)) {
                if (err.pos > 0)
                    err.pos += starts[i];
                srv_result_error(out, &err);
                return;
            }
        } else {
            char *piece = xstrndup(sql + starts[i], (size_t)(ends[i] - starts[i]));
            int rc = run_weir(s, piece, describe_only, n_params, params, starts[i], out);
            free(piece);
            if (rc)
                return;
        }
    }
}

void session_query(void *ctx, void *sess, const char *sql, SrvResult *out)
{
    static const char *const none[1] = {NULL};
    Session *s = sess;
    session_activity(sess, sql, out);
    tz_set_current(s->tz); /* the connection's own thread: values in and out are in its zone */
    run_all(sess, sql, false, 0, none, 0, out); /* a $1 in a simple query: "there is no parameter $1" */
    tz_set_current(NULL);
    session_activity(sess, NULL, out);
}

void session_execute(void *ctx, void *sess, const char *sql, int n_params, const char *const *params,
                     bool describe_only, long max_rows, SrvResult *out)
{
    static const char *const none[1] = {NULL};
    Session *s = sess;
    if (!describe_only)
        session_activity(sess, sql, out);
    tz_set_current(s->tz);
    run_all(sess, sql, describe_only, n_params, params ? params : none, max_rows, out);
    tz_set_current(NULL);
    if (!describe_only)
        session_activity(sess, NULL, out);
}

void session_param_types(void *ctx, void *sess, const char *sql, int n_params, uint32_t *oids)
{
    Session *s = sess;
    Engine *e = s->e;
    if (n_params <= 0 || n_params > PLAN_MAX_PARAMS || pgt_names_catalog(sql, 0, (int)strlen(sql)))
        return;
    Arena *a = arena_new(0);
    AstStmt **stmts;
    AstExpr **ph;
    int n = 0, n_ph = 0;
    WError err = {0};
    TypeId *types = arena_alloc(a, sizeof *types * (size_t)n_params);
    for (int i = 0; i < n_params; i++)
        types[i] = TYPE_NULL;
    if (parse_sql_params(sql, a, &stmts, &n, &ph, &n_ph, &err) == 0 && n == 1) {
        /* Unknown values: they bind as NULLs that keep their $n (bind.c). */
        for (int i = 0; i < n_ph; i++)
            parse_bind_param(a, ph[i], NULL);
        tz_set_current(s->tz);
        pthread_mutex_lock(&e->lock);
        PlanCatCtx pcx;
        PlanCatalog cat = engine_plan_catalog(e, &pcx, NULL, false, true, a);
        plan_param_types(stmts[0], &cat, a, n_params, types);
        pthread_mutex_unlock(&e->lock);
        tz_set_current(NULL);
    }
    (void)ctx;
    for (int i = 0; i < n_params; i++)
        if (types[i] != TYPE_NULL && !oids[i])
            oids[i] = type_oid(types[i]);
    arena_free(a);
}
