/*
 * session.c: executing statements for a client session.
 *
 * A Query message's text is parsed into statements, and each runs in turn
 * with the engine lock held (FLUSH releases it while it waits), so a
 * statement sees the views between two engine steps. DDL changes the
 * catalog and persists it before it answers; CREATE MATERIALIZED VIEW
 * plans the query and starts its dataflow; SELECT plans an ad hoc query
 * over the views' current rows; INSERT INTO a Kafka source produces JSON
 * records to its topic and returns once the broker has them. Tables and
 * their INSERT/UPDATE/DELETE are in table.c.
 */
#include "engine_int.h"
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

#define FLUSH_TIMEOUT_MS 60000

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

static int64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void *session_open(void *ctx, const char *user, const char *database, WError *err)
{
    Session *s = xcalloc(1, sizeof *s);
    Engine *e = ctx;
    s->e = e;
    s->user = xstrdup(user ? user : "weir");
    s->started_us = wall_us();
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
                                               : strndup(sql, 1024);
        s->query_start_us = wall_us();
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

static const char *kind_word(CatKind k)
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

static void one_text_column(SrvResult *out, const char *name)
{
    uint32_t oid = SRV_OID_TEXT;
    srv_result_columns(out, 1, &name, &oid);
}

static void text_row(SrvResult *out, int n, const char **vals)
{
    int lens[8];
    for (int i = 0; i < n; i++)
        lens[i] = vals[i] ? (int)strlen(vals[i]) : -1;
    srv_result_row(out, vals, lens);
}

/* ---- CREATE SOURCE ----------------------------------------------------------------- */

/* The source's "properties.*" options as librdkafka settings (bootstrap apart). */
static int source_props(const CatRelation *r, RtKafkaProp *props, int max)
{
    int n = 0;
    for (int i = 0; i < r->n_options && n < max; i++) {
        const char *k = r->options[i].key;
        if (strncasecmp(k, "properties.", 11) != 0 || !strcasecmp(k + 11, "bootstrap.server") ||
            !strcasecmp(k + 11, "bootstrap.servers"))
            continue;
        props[n].key = k + 11;
        props[n].value = r->options[i].value;
        n++;
    }
    return n;
}

/* A TIMESTAMP column of r named name: its index, or -1 with err (42703, 42804). */
static int skew_column(const CatRelation *r, const char *opt, const char *name, int pos, WError *err)
{
    for (int i = 0; i < r->n_cols; i++)
        if (strcmp(r->col_names[i], name) == 0) {
            if (r->col_types[i] != TYPE_TIMESTAMP && r->col_types[i] != TYPE_TIMESTAMPTZ)
                return werr(err, SQLSTATE_DATATYPE_MISMATCH, pos, "%s column \"%s\" must be a timestamp, not %s",
                            opt, name, type_name(r->col_types[i])),
                       -1;
            if (r->col_gen && r->col_gen[i]) /* computed after the correction runs */
                return werr(err, SQLSTATE_NOT_SUPPORTED, pos, "feature not supported: %s on computed column \"%s\"",
                            opt, name),
                       -1;
            return i;
        }
    return werr(err, SQLSTATE_UNDEFINED_COLUMN, pos, "%s names column \"%s\", which the source does not have", opt,
                name),
           -1;
}

/* skew.send_time / skew.receive_time (clock-skew correction, docs/time.md):
 * both or neither, the send time a TIMESTAMP column, the receive time
 * 'kafka_timestamp' or another TIMESTAMP column, and a WATERMARK whose time
 * column they correct. The source operator applies them (op_source.c). */
static int check_skew_options(const CatRelation *r, bool table, int pos, WError *err)
{
    const char *send = cat_option(r, "skew.send_time"), *recv = cat_option(r, "skew.receive_time");
    if (!send && !recv)
        return 0;
    if (table)
        return werr(err, SQLSTATE_NOT_SUPPORTED, pos, "feature not supported: clock-skew correction on a table"), -1;
    if (!send || !recv)
        return werr(err, SQLSTATE_INVALID_PARAMETER, pos, "skew.send_time and skew.receive_time go together"),
               werr_hint(err, "skew.send_time names the column with the sender's clock at sending; "
                              "skew.receive_time is 'kafka_timestamp' or a column with the receiver's clock."), -1;
    if (r->wm_col < 0)
        return werr(err, "42P20", pos, "clock-skew correction needs a WATERMARK: it corrects the watermark's time column"),
               -1;
    if (r->col_gen && r->col_gen[r->wm_col])
        return werr(err, SQLSTATE_NOT_SUPPORTED, pos,
                    "feature not supported: clock-skew correction of a computed time column"),
               werr_hint(err, "Correct the time in the computed column's expression instead."), -1;
    if (skew_column(r, "skew.send_time", send, pos, err) < 0)
        return -1;
    if (strcasecmp(recv, "kafka_timestamp") != 0 && skew_column(r, "skew.receive_time", recv, pos, err) < 0)
        return -1;
    return 0;
}

/* The on_error and error.topic options of r, as CREATE and ALTER SOURCE check them. */
static int check_error_options(const CatRelation *r, int pos, WError *err)
{
    const char *oe = cat_option(r, "on_error"), *et = cat_option(r, "error.topic");
    if (oe && strcasecmp(oe, "skip") != 0 && strcasecmp(oe, "fail") != 0 && strcasecmp(oe, "dead_letter") != 0)
        return werr(err, SQLSTATE_INVALID_PARAMETER, pos, "on_error must be 'skip', 'fail' or 'dead_letter', not '%s'",
                    oe);
    const char *og = cat_option(r, "on_offset_gap");
    if (og && strcasecmp(og, "fail") != 0 && strcasecmp(og, "skip") != 0)
        return werr(err, SQLSTATE_INVALID_PARAMETER, pos, "on_offset_gap must be 'fail' or 'skip', not '%s'", og);
    if (et && (!*et || (oe && strcasecmp(oe, "dead_letter") != 0)))
        return werr(err, SQLSTATE_INVALID_PARAMETER, pos, *et ? "error.topic needs on_error = 'dead_letter' (or no on_error)"
                                                             : "error.topic must name a topic");
    return 0;
}

/* Does the dataflow of v (a view or table) read source r? */
static bool reads_source(const CatObj *v, const CatRelation *r)
{
    if ((v->kind != CAT_VIEW && v->kind != CAT_TABLE) || !v->plan)
        return false;
    for (int i = 0; i < v->plan->n_nodes; i++)
        if (v->plan->nodes[i]->kind == PN_SOURCE && v->plan->nodes[i]->source == r)
            return true;
    return false;
}

int session_alter_source(Engine *e, const AstStmt *st, bool replay, WError *err)
{
    const AstAlterSource *as = st->u.alter_source;
    CatObj *o = engine_find(e, as->name);
    if (!o)
        return werr(err, SQLSTATE_UNDEFINED_TABLE, st->pos, "relation \"%s\" does not exist", as->name);
    const char *conn = (o->kind == CAT_SOURCE || o->kind == CAT_TABLE) ? cat_option(&o->rel, "connector") : NULL;
    if (!conn || strcasecmp(conn, "kafka") != 0)
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, st->pos, "\"%s\" is not a Kafka source or table", o->name);
    int n_set = ast_list_len(as->options), n = o->rel.n_options;
    CatOption *opts = arena_zalloc(o->arena, sizeof(CatOption) * (size_t)(n + n_set + 1));
    memcpy(opts, o->rel.options, sizeof(CatOption) * (size_t)n);
    for (int i = 0; i < n_set; i++) {
        const AstOption *op = AST_AT(as->options, i);
        if (strcasecmp(op->key, "on_error") != 0 && strcasecmp(op->key, "error.topic") != 0 &&
            strcasecmp(op->key, "on_offset_gap") != 0) {
            werr(err, SQLSTATE_NOT_SUPPORTED, op->pos, "feature not supported: changing option \"%s\" of a source",
                 op->key);
            werr_hint(err, "ALTER SOURCE changes on_error, error.topic and on_offset_gap; other options need DROP and "
                           "CREATE.");
            return -1;
        }
        const char *v = arena_strdup(o->arena, op->value ? op->value : "");
        int k = 0;
        while (k < n && strcasecmp(opts[k].key, op->key) != 0)
            k++;
        if (k == n)
            opts[n++] = (CatOption){arena_strdup(o->arena, op->key), v};
        else
            opts[k].value = v;
        if (!strcasecmp(op->key, "error.topic") && !*v)
            opts[k] = opts[--n]; /* error.topic = '': back to the default */
    }
    CatRelation next = o->rel;
    next.options = opts;
    next.n_options = n;
    if (check_error_options(&next, st->pos, err))
        return -1;
    if (!replay && rt_dead_letter_prepare(&next, &e->rt, err))
        return -1;
    o->rel.options = opts; /* views read the policy through this relation at their next bad record */
    o->rel.n_options = n;
    /* Kept as the statement that gives today's values; written with every
     * checkpoint and applied again after the CREATE at start. */
    Buf b = BUF_INIT;
    buf_printf(&b, "ALTER %s \"%s\" SET (", o->kind == CAT_TABLE ? "TABLE" : "SOURCE", o->name);
    const char *keys[3] = {"on_error", "error.topic", "on_offset_gap"};
    int w = 0;
    for (int k = 0; k < 3; k++) {
        const char *v = cat_option(&o->rel, keys[k]);
        if (!v)
            continue;
        buf_printf(&b, "%s%s = '", w++ ? ", " : "", keys[k]);
        for (const char *p = v; *p; p++)
            buf_append(&b, *p == '\'' ? "''" : p, *p == '\'' ? 2 : 1);
        buf_puts(&b, "'");
    }
    buf_puts(&b, ")");
    free(o->alter_sql);
    o->alter_sql = w ? xstrdup(b.data) : NULL;
    o->altered = true;
    buf_free(&b);
    if (replay)
        return 0;
    /* Views stopped at a bad record of this source go on under the new policy. */
    for (int i = 0; i < e->n_objs; i++) {
        CatObj *v = e->objs[i];
        if (v->failed && !v->df && reads_source(v, &o->rel)) {
            WError serr = {0};
            v->failed = false;
            if (engine_start_view(e, v, &serr) == 0)
                fprintf(stderr, "weir: view %s is running again (source %s changed)\n", v->name, o->name);
        }
    }
    e->dirty = true;
    if (engine_checkpoint(e, err)) {
        werr_hint(err, "The change applies now; it is stored with the next checkpoint that succeeds.");
        return -1;
    }
    return 0;
}

int session_create_source(Engine *e, const AstStmt *st, const char *sql, CatObj *replay, WError *err)
{
    const AstCreateSource *cs = st->u.create_source;
    bool table = cs->obj == OBJ_TABLE;
    if (cs->encode_options)
        return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: ENCODE options");
    if (cs->format && strcasecmp(cs->format, "plain") != 0 &&
        !(table && (!strcasecmp(cs->format, "upsert") || !strcasecmp(cs->format, "debezium")))) {
        werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: FORMAT %s%s", cs->format,
             table ? "" : " on a source");
        if (!table && (!strcasecmp(cs->format, "upsert") || !strcasecmp(cs->format, "debezium")))
            werr_hint(err, "A changelog topic is read by a table: CREATE TABLE t (..., PRIMARY KEY (k)) WITH (...) "
                           "FORMAT %s ENCODE JSON.", cs->format);
        return -1;
    }
    if (cs->encode && strcasecmp(cs->encode, "json") != 0)
        return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: ENCODE %s", cs->encode);
    CatObj *o = replay ? replay : xcalloc(1, sizeof *o);
    if (!replay) {
        o->name = xstrdup(cs->name);
        o->sql = xstrdup(sql);
    }
    o->kind = table ? CAT_TABLE : CAT_SOURCE;
    o->arena = arena_new(0);
    CatRelation *r = &o->rel;
    r->kind = o->kind;
    r->name = o->name;
    int n_opts = ast_list_len(cs->options);
    CatOption *opts = arena_zalloc(o->arena, sizeof(CatOption) * (size_t)(n_opts ? n_opts : 1));
    for (int i = 0; i < n_opts; i++) {
        const AstOption *op = AST_AT(cs->options, i);
        for (int j = 0; j < i; j++)
            if (strcasecmp(opts[j].key, op->key) == 0) {
                werr(err, SQLSTATE_SYNTAX_ERROR, op->pos, "option \"%s\" specified more than once", op->key);
                goto fail;
            }
        opts[i].key = arena_strdup(o->arena, op->key);
        opts[i].value = arena_strdup(o->arena, op->value ? op->value : "");
    }
    r->n_options = n_opts;
    r->options = opts;
    r->format = cs->format ? arena_strdup(o->arena, cs->format) : "plain";
    r->encode = cs->encode ? arena_strdup(o->arena, cs->encode) : "json";
    const char *conn = cat_option(r, "connector");
    if (table && !conn) {
        /* A writable table: its rows come from INSERT, UPDATE and DELETE. */
        if (n_opts) {
            werr(err, SQLSTATE_INVALID_PARAMETER, ((AstOption *)AST_AT(cs->options, 0))->pos,
                 "unknown option \"%s\" for a table", opts[0].key);
            werr_hint(err, "A table without WITH (connector = ...) is written with INSERT, UPDATE and DELETE.");
            goto fail;
        }
        if (cs->format) {
            werr(err, SQLSTATE_INVALID_PARAMETER, st->pos, "FORMAT needs a connector");
            goto fail;
        }
        if (table_create(e, o, cs, replay != NULL, err)) {
            if (!err->pos)
                err->pos = st->pos;
            goto fail;
        }
        return 0;
    }
    if (!conn) {
        werr(err, SQLSTATE_INVALID_PARAMETER, st->pos, "a source needs WITH (connector = '...')");
        werr_hint(err, "weir reads Kafka topics: WITH (connector = 'kafka', topic = '...').");
        goto fail;
    }
    if (table && strcasecmp(conn, "kafka") != 0) {
        werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: a table over connector '%s'", conn);
        werr_hint(err, "Tables read Kafka topics (connector = 'kafka') or are written with INSERT, UPDATE and DELETE.");
        goto fail;
    }
    if (strcasecmp(conn, "nexmark") == 0) {
        /* The built-in generator: its options and the declared columns are checked now. */
        RtNxConfig nx;
        if (plan_source(cs, r, o->arena, err) || rt_nexmark_config(r, &nx, NULL, err)) {
            if (!err->pos)
                err->pos = st->pos;
            goto fail;
        }
        if (!replay && stor_next_id(e->stor, &o->id, err))
            goto fail;
        goto add;
    }
    if (strcasecmp(conn, "kafka") != 0) {
        werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: connector '%s'", conn);
        werr_hint(err, "Supported connectors: 'kafka', 'nexmark'.");
        goto fail;
    }
    static const char *known[] = {"connector", "topic", "scan.startup.mode", "topic.partitions", "scan.bounded.mode",
                                  "idle_timeout", "max_future", "far_future", "on_error", "error.topic", "on_offset_gap",
                                  "skew.send_time", "skew.receive_time", "topic.lost_after"};
    for (int i = 0; i < n_opts; i++) {
        bool ok = strncasecmp(opts[i].key, "properties.", 11) == 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0] && !ok; k++)
            ok = strcasecmp(opts[i].key, known[k]) == 0;
        if (!ok) {
            werr(err, SQLSTATE_INVALID_PARAMETER, ((AstOption *)AST_AT(cs->options, i))->pos,
                 "unknown option \"%s\" for a Kafka source", opts[i].key);
            werr_hint(err, "Options: connector, topic, scan.startup.mode, scan.bounded.mode, topic.partitions, idle_timeout, "
                           "max_future, far_future, on_error, error.topic, skew.send_time, skew.receive_time, "
                           "topic.lost_after, properties.<librdkafka setting>.");
            goto fail;
        }
    }
    const char *topic = cat_option(r, "topic");
    if (!topic || !*topic) {
        werr(err, SQLSTATE_INVALID_PARAMETER, st->pos, "a Kafka source needs WITH (topic = '...')");
        goto fail;
    }
    const char *parts = cat_option(r, "topic.partitions");
    if (parts && (atoi(parts) < 1 || atoi(parts) > 10000)) {
        werr(err, SQLSTATE_INVALID_PARAMETER, st->pos, "topic.partitions must be between 1 and 10000");
        goto fail;
    }
    const char *mode = cat_option(r, "scan.startup.mode");
    if (mode && strcasecmp(mode, "earliest") != 0 && strcasecmp(mode, "latest") != 0) {
        werr(err, SQLSTATE_INVALID_PARAMETER, st->pos, "scan.startup.mode must be 'earliest' or 'latest'");
        goto fail;
    }
    const char *bmode = cat_option(r, "scan.bounded.mode");
    if (bmode && strcasecmp(bmode, "latest") != 0 && strcasecmp(bmode, "none") != 0) {
        werr(err, SQLSTATE_INVALID_PARAMETER, st->pos, "scan.bounded.mode must be 'latest' or 'none'");
        goto fail;
    }
    const char *ff = cat_option(r, "far_future");
    if (ff && strcasecmp(ff, "reject") != 0 && strcasecmp(ff, "clamp") != 0) {
        werr(err, SQLSTATE_INVALID_PARAMETER, st->pos, "far_future must be 'reject' or 'clamp'");
        goto fail;
    }
    if (check_error_options(r, st->pos, err))
        goto fail;
    static const char *ivs[] = {"idle_timeout", "max_future", "topic.lost_after"};
    for (int k = 0; k < 3; k++) {
        const char *v = cat_option(r, ivs[k]);
        Interval iv;
        int64_t us;
        if (v && !(k == 1 && !strcasecmp(v, "off")) &&
            (parse_interval(v, strlen(v), &iv) || interval_to_usecs(&iv, &us) || us <= 0)) {
            werr(err, SQLSTATE_INVALID_PARAMETER, st->pos, "%s must be a positive interval such as '5 seconds'%s",
                 ivs[k], k == 1 ? " (or 'off')" : "");
            goto fail;
        }
    }
    if (table && cs->append_only) {
        werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: APPEND ONLY on a table over a connector");
        werr_hint(err, "Use CREATE SOURCE for an append-only topic.");
        goto fail;
    }
    if (!table && plan_source(cs, r, o->arena, err))
        goto fail;
    if (check_skew_options(r, table, st->pos, err))
        goto fail;
    if (!replay) {
        /* Reach the broker now (creating the topic if it is missing), so a
         * wrong address fails here rather than in every view. */
        const char *boot = cat_option(r, "properties.bootstrap.server");
        if (!boot)
            boot = cat_option(r, "properties.bootstrap.servers");
        if (!boot)
            boot = e->kafka_bootstrap;
        RtKafkaSource *ks;
        RtKafkaProp props[64];
        int np = source_props(r, props, 64);
        if (rt_kafka_source_open(boot, topic, parts ? atoi(parts) : 1, props, np, 5000, &ks, err))
            goto fail;
        rt_kafka_source_close(ks);
        if (!table && stor_next_id(e->stor, &o->id, err))
            goto fail;
    }
    if (table) {
        if (table_create(e, o, cs, replay != NULL, err)) {
            if (!err->pos)
                err->pos = st->pos;
            goto fail;
        }
        return 0;
    }
add:
    r->id = o->id;
    if (engine_add_object(e, o, !replay, err))
        goto fail;
    return 0;
fail:
    if (!replay)
        cat_obj_free(o);
    else {
        arena_free(o->arena);
        o->arena = NULL;
    }
    return -1;
}

/* ---- CREATE MATERIALIZED VIEW --------------------------------------------------------- */

static bool allow_unbounded(Session *s)
{
    const char *v = s ? setting_get(s, "streaming_allow_unbounded_state") : NULL;
    return v && (!strcasecmp(v, "true") || !strcasecmp(v, "on") || !strcmp(v, "1"));
}

/* The session's streaming_parallelism (checked by SET), 1 without a session. */
static int session_parallelism(Session *s)
{
    int p = 1;
    if (s)
        plan_parallelism_value(setting_get(s, "streaming_parallelism"), &p);
    return p;
}

static void rel_from_view(CatObj *o)
{
    CatRelation *r = &o->rel;
    PlanView *v = o->plan;
    r->id = o->id;
    r->kind = CAT_VIEW;
    r->name = o->name;
    r->materialized = true;
    r->n_cols = v->schema.n;
    r->col_names = v->schema.names;
    r->col_types = v->schema.types;
    r->col_hidden = v->schema.hidden;
    r->wm_col = v->root->wm_col;
    r->wm_delay_us = -1;
    r->n_pk = v->n_pk;
    r->pk = v->pk;
    r->append_only = v->append_only;
    r->counted = v->counted;
    r->table_id = v->root->table_id;
}

static int create_view(Engine *e, Session *s, const AstStmt *st, const char *sql, CatObj *replay, WError *err)
{
    const AstCreateView *cv = st->u.create_view;
    CatObj *o = replay ? replay : xcalloc(1, sizeof *o);
    if (!replay) {
        o->name = xstrdup(cv->name);
        o->sql = xstrdup(sql);
    }
    o->kind = CAT_VIEW;
    o->arena = arena_new(0);
    PlanCatalog cat = engine_plan_catalog(e, o, replay != NULL, false, o->arena);
    /* At start, a view is rebuilt as it was accepted (with or without the opt-in). */
    /* ...and with the parallelism its session had (the catalog keeps it). */
    if (!replay) {
        o->parallelism = session_parallelism(s);
        o->plan_rev = PLAN_REV_CURRENT;
    } else if (o->plan_rev > PLAN_REV_CURRENT) {
        werr(err, SQLSTATE_NOT_SUPPORTED, 0,
             "feature not supported: view \"%s\" was created by a newer weir (planner revision %d, this one knows %d)",
             o->name, o->plan_rev, PLAN_REV_CURRENT);
        goto fail;
    }
    PlanViewOptions opt = {.name = o->name, .allow_unbounded = replay || allow_unbounded(s),
                           .parallelism = o->parallelism, .plan_rev = o->plan_rev};
    o->plan = plan_view(cv, &cat, &opt, o->arena, err);
    if (!o->plan)
        goto fail;
    if (!replay && stor_next_id(e->stor, &o->id, err))
        goto fail;
    rel_from_view(o);
    CatObj *late = NULL;
    if (o->plan->late_name) {
        /* LATE ROWS INTO: a queryable relation owned by the view, rebuilt from its plan at start. */
        if (engine_find(e, o->plan->late_name)) {
            werr(err, SQLSTATE_DUPLICATE_TABLE, cv->query_pos, "relation \"%s\" already exists", o->plan->late_name);
            goto fail;
        }
        late = xcalloc(1, sizeof *late);
        late->name = xstrdup(o->plan->late_name);
        late->sql = xstrdup("");
        late->kind = CAT_VIEW;
        late->late_of = o;
        late->arena = arena_new(0);
        CatRelation *lr = &late->rel;
        const PlanSchema *ls = &o->plan->late_schema;
        lr->kind = CAT_VIEW;
        lr->name = late->name;
        lr->materialized = true;
        lr->n_cols = ls->n;
        lr->col_names = ls->names;
        lr->col_types = ls->types;
        lr->col_hidden = ls->hidden;
        lr->wm_col = -1;
        lr->wm_delay_us = -1;
        lr->append_only = true;
        lr->table_id = o->plan->late_table_id;
    }
    if (rt_dataflow_open(&e->rt, o->plan, &o->df, err)) {
        if (!replay)
            goto fail;
        /* At start a broker may still be coming up: keep the view, the engine retries. */
        fprintf(stderr, "weir: view %s cannot start yet: %s\n", o->name, err->msg);
        snprintf(o->stop_error, sizeof o->stop_error, "%s", err->msg);
        /* Its topic was deleted or shrunk: that waits for RESUME, not the retry. */
        o->failed = strcmp(err->sqlstate, RT_SQLSTATE_SOURCE_LOST) == 0;
        werr_clear(err);
    } else {
        rt_dataflow_set_name(o->df, o->name);
    }
    if (engine_add_object(e, o, !replay, err)) {
        cat_obj_free(late);
        goto fail;
    }
    if (late)
        engine_add_object(e, late, false, err);
    return 0;
fail:
    if (!replay) {
        WError ignored = {0};
        rt_dataflow_close(o->df);
        o->df = NULL;
        for (int i = 0; i < o->n_table_ids; i++)
            stor_table_drop(e->stor, o->table_ids[i], &ignored);
        cat_obj_free(o);
    } else {
        rt_dataflow_close(o->df);
        o->df = NULL;
        arena_free(o->arena);
        o->arena = NULL;
    }
    return -1;
}

/*
 * The view a CREATE SINK ... AS query runs: a CREATE MATERIALIZED VIEW of
 * the sink's query named sink_query_name(), built in *cv and *vst (which
 * borrow cs). Planning it as an ordinary view gives it the same key, state
 * bounds and checkpointing as any view, and the sink attaches to it as a
 * sink FROM a view does, so the key and exactly-once rules are the same.
 */
static void sink_query_stmt(const AstCreateSink *cs, const AstStmt *st, const char *name, AstCreateView *cv,
                            AstStmt *vst)
{
    *cv = (AstCreateView){.materialized = true, .name = name, .query = cs->query, .query_pos = cs->query->pos};
    *vst = (AstStmt){.kind = STMT_CREATE_VIEW, .pos = st->pos, .text_start = st->text_start,
                     .text_end = st->text_end, .u.create_view = cv};
}

/* The internal view's name: the sink's name as created (kept across ALTER
 * SINK ... RENAME, like the sink's identity in its target) plus "$query".
 * The caller frees it. */
static char *sink_query_name(const char *sink)
{
    size_t n = strlen(sink) + sizeof "$query";
    char *out = xmalloc(n);
    snprintf(out, n, "%s$query", sink);
    return out;
}

int session_create_view(Engine *e, const AstStmt *st, const char *sql, CatObj *replay, WError *err)
{
    if (st->kind == STMT_CREATE_SINK) {
        /* The catalog entry of a sink's query holds the CREATE SINK text. */
        AstCreateView cv;
        AstStmt vst;
        sink_query_stmt(st->u.create_sink, st, replay->name, &cv, &vst);
        replay->sink_query = true;
        return create_view(e, NULL, &vst, sql, replay, err);
    }
    return create_view(e, NULL, st, sql, replay, err);
}

/* ---- CREATE SINK ------------------------------------------------------------------------ */

/* Splits "a, b" into view column indexes among the sink's columns. */
static int parse_pk(const char *list, const RtSinkSpec *spec, int *pk, int *n, int pos, WError *err)
{
    char *copy = xstrdup(list), *save = NULL;
    *n = 0;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ')
            t++;
        char *end = t + strlen(t);
        while (end > t && end[-1] == ' ')
            *--end = 0;
        int k = -1;
        for (int i = 0; i < spec->n_cols; i++)
            if (strcmp(spec->col_names[i], t) == 0)
                k = i;
        if (k < 0) {
            werr(err, SQLSTATE_UNDEFINED_COLUMN, pos, "primary_key column \"%s\" is not a column of the sink", t);
            free(copy);
            return -1;
        }
        if (*n >= WEIR_MAX_KEY_COLUMNS) {
            werr(err, SQLSTATE_PROGRAM_LIMIT, pos, "a sink's primary_key has at most %d columns", WEIR_MAX_KEY_COLUMNS);
            free(copy);
            return -1;
        }
        pk[(*n)++] = k;
    }
    free(copy);
    if (*n == 0)
        return werr(err, SQLSTATE_INVALID_PARAMETER, pos, "primary_key must name at least one column");
    return 0;
}

static int create_sink(Engine *e, Session *s, const AstStmt *st, const char *sql, CatObj *replay, WError *err);

int session_create_sink(Engine *e, const AstStmt *st, const char *sql, CatObj *replay, WError *err)
{
    return create_sink(e, NULL, st, sql, replay, err);
}

/* CREATE SINK ... AS query: its view first (at start, already restored
 * from its own catalog entry), then the sink from it. A failure removes
 * the view again. */
static int create_sink_as(Engine *e, Session *s, const AstStmt *st, const char *sql, CatObj *replay, WError *err)
{
    const AstCreateSink *cs = st->u.create_sink;
    char *vname = sink_query_name(cs->name);
    CatObj *v = engine_find(e, vname);
    int rc = 0;
    if (replay) {
        if (!v || !v->sink_query || v->sink_owner)
            rc = werr(err, SQLSTATE_INTERNAL, st->pos, "the query of sink \"%s\" was not restored", cs->name);
    } else if (v) {
        rc = werr(err, SQLSTATE_DUPLICATE_TABLE, st->pos,
                  "relation \"%s\" already exists (the name of the query of sink \"%s\")", vname, cs->name);
    } else {
        AstCreateView cv;
        AstStmt vst;
        sink_query_stmt(cs, st, vname, &cv, &vst);
        if (!(rc = create_view(e, s, &vst, sql, NULL, err))) {
            v = engine_find(e, vname);
            v->sink_query = true;
            crashpoint("sink_query_view"); /* the view's entry is written, the sink's not yet */
        }
    }
    free(vname);
    if (rc)
        return -1;
    AstCreateSink from = *cs;
    from.from_name = v->name;
    AstStmt fst = *st;
    fst.u.create_sink = &from;
    if (create_sink(e, s, &fst, sql, replay, err)) {
        if (!replay) {
            WError ignored = {0};
            engine_remove_object(e, v, &ignored);
        }
        return -1;
    }
    v->sink_owner = replay ? replay : engine_find(e, cs->name);
    return 0;
}

static int create_sink(Engine *e, Session *s, const AstStmt *st, const char *sql, CatObj *replay, WError *err)
{
    const AstCreateSink *cs = st->u.create_sink;
    if (!cs->from_name)
        return create_sink_as(e, s, st, sql, replay, err);
    CatObj *v = engine_find(e, cs->from_name);
    if (!v || (v->sink_query && !cs->query))
        return werr(err, SQLSTATE_UNDEFINED_TABLE, st->pos, "relation \"%s\" does not exist", cs->from_name);
    if (v->late_of)
        return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: a sink from a late-rows relation");
    if (v->kind != CAT_VIEW && v->kind != CAT_TABLE)
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, st->pos, "a sink reads a materialized view or a table; \"%s\" is a %s",
                    v->name, kind_word(v->kind)),
               werr_hint(err, "Create a materialized view over the source and sink from it."), -1;
    if (!replay)
        for (int i = 0; i < e->n_objs; i++)
            if (e->objs[i]->kind == CAT_SINK && e->objs[i]->spec.name && !strcmp(e->objs[i]->spec.name, cs->name))
                return werr(err, SQLSTATE_DUPLICATE_OBJECT, st->pos,
                            "sink \"%s\" still delivers under the name \"%s\" it was created with", e->objs[i]->name,
                            cs->name),
                       werr_hint(err, "A sink's target records its progress by that name; choose another one."), -1;
    CatObj *o = replay ? replay : xcalloc(1, sizeof *o);
    if (!replay) {
        o->name = xstrdup(cs->name);
        o->sql = xstrdup(sql);
    }
    o->kind = CAT_SINK;
    o->from = v;
    o->arena = arena_new(0);
    o->rel.kind = CAT_SINK;
    o->rel.name = o->name;
    RtSinkSpec *sp = &o->spec;
    /* The sink's identity in its target (progress rows, Kafka transactional
     * id) is the name it was created with: the stored statement keeps it, so
     * a renamed sink goes on where it was instead of starting over. */
    sp->name = arena_strdup(o->arena, cs->name);
    /* Options, with the engine's Kafka bootstrap filled in when none is given. */
    int n_opts = ast_list_len(cs->options);
    CatOption *opts = arena_zalloc(o->arena, sizeof(CatOption) * (size_t)(n_opts + 1));
    for (int i = 0; i < n_opts; i++) {
        const AstOption *op = AST_AT(cs->options, i);
        opts[i].key = arena_strdup(o->arena, op->key);
        opts[i].value = arena_strdup(o->arena, op->value ? op->value : "");
    }
    sp->options = opts;
    sp->n_options = n_opts;
    const char *conn = rt_sink_option(sp, "connector");
    if (!conn) {
        werr(err, SQLSTATE_INVALID_PARAMETER, st->pos, "a sink needs WITH (connector = '...')");
        werr_hint(err, "Connectors: 'postgres', 'sqlite', 'kafka', 'blackhole'.");
        goto fail;
    }
    if (!rt_sink_connector(conn)) {
        werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: sink connector '%s'", conn);
        werr_hint(err, "Connectors: 'postgres', 'sqlite', 'kafka', 'blackhole'.");
        goto fail;
    }
    if (!strcasecmp(conn, "kafka") && !rt_sink_option(sp, "properties.bootstrap.server")) {
        opts[n_opts].key = "properties.bootstrap.server";
        opts[n_opts].value = arena_strdup(o->arena, e->kafka_bootstrap);
        sp->n_options = ++n_opts;
    }
    sp->format = cs->format ? arena_strdup(o->arena, cs->format) : NULL;
    if (cs->encode && strcasecmp(cs->encode, "json") != 0) {
        werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: ENCODE %s", cs->encode);
        goto fail;
    }
    /* The sink's columns: the view's visible columns, in order. */
    const CatRelation *vr = &v->rel;
    int nv = 0;
    for (int i = 0; i < vr->n_cols; i++)
        nv += !(vr->col_hidden && vr->col_hidden[i]);
    const char **names = arena_alloc(o->arena, sizeof(char *) * (size_t)(nv ? nv : 1));
    TypeId *types = arena_alloc(o->arena, sizeof(TypeId) * (size_t)(nv ? nv : 1));
    o->view_cols = arena_alloc(o->arena, sizeof(int) * (size_t)(nv ? nv : 1));
    for (int i = 0, k = 0; i < vr->n_cols; i++) {
        if (vr->col_hidden && vr->col_hidden[i])
            continue;
        names[k] = vr->col_names[i];
        types[k] = vr->col_types[i];
        o->view_cols[k++] = i;
    }
    sp->n_cols = nv;
    sp->col_names = names;
    sp->col_types = types;
    /* Upsert or append-only: `type`, or for Kafka the FORMAT; by default what the view is. */
    const char *type = rt_sink_option(sp, "type");
    bool upsert;
    if (type)
        upsert = !strcasecmp(type, "upsert");
    else if (sp->format)
        upsert = strcasecmp(sp->format, "plain") != 0;
    else
        upsert = !vr->append_only;
    if (type && !upsert && strcasecmp(type, "append-only") != 0) {
        werr(err, SQLSTATE_INVALID_PARAMETER, st->pos, "type must be 'upsert' or 'append-only', not '%s'", type);
        goto fail;
    }
    if (!upsert && !vr->append_only) {
        werr(err, SQLSTATE_INVALID_PARAMETER, st->pos,
             "an append-only sink needs an append-only view, and \"%s\" updates its rows", v->name);
        werr_hint(err, "Use type = 'upsert' with a primary_key.");
        goto fail;
    }
    sp->upsert = upsert;
    if (upsert) {
        int *pk = arena_alloc(o->arena, sizeof(int) * WEIR_MAX_KEY_COLUMNS);
        int npk = 0;
        const char *pks = rt_sink_option(sp, "primary_key");
        if (pks) {
            if (parse_pk(pks, sp, pk, &npk, st->pos, err))
                goto fail;
        } else {
            /* The view's key, if the user can see all of it. */
            if (vr->n_pk > WEIR_MAX_KEY_COLUMNS) {
                werr(err, SQLSTATE_PROGRAM_LIMIT, st->pos, "the key of \"%s\" has %d columns; a sink's key has at most %d",
                     v->name, vr->n_pk, WEIR_MAX_KEY_COLUMNS);
                werr_hint(err, "Name fewer columns in WITH (primary_key = 'col, ...').");
                goto fail;
            }
            for (int i = 0; i < vr->n_pk; i++) {
                int k = -1;
                for (int j = 0; j < nv; j++)
                    if (o->view_cols[j] == vr->pk[i])
                        k = j;
                if (k < 0) {
                    npk = 0;
                    break;
                }
                pk[npk++] = k;
            }
            if (npk == 0) {
                werr(err, SQLSTATE_INVALID_PARAMETER, st->pos, "an upsert sink needs WITH (primary_key = 'col, ...')");
                goto fail;
            }
        }
        sp->pk = pk;
        sp->n_pk = npk;
    }
    if (!replay) {
        /* Check the target now (and create its table when asked), so mistakes surface here. */
        const RtSinkConnector *c = rt_sink_connector(conn);
        RtSinkWriter *w;
        if (c->open(sp, &w, err))
            goto fail;
        /* A new sink starts at epoch 0 in the target, whatever an old sink of
         * the same name left there (its epochs came from another data directory). */
        int r = c->reset(w, err);
        c->close(w);
        if (r)
            goto fail;
        uint64_t tid;
        if (stor_next_id(e->stor, &o->id, err) || stor_next_id(e->stor, &tid, err))
            goto fail;
        o->table_ids = xcalloc(1, sizeof(uint64_t));
        o->table_ids[0] = tid;
        o->n_table_ids = 1;
    }
    if (o->n_table_ids < 1) {
        werr(err, SQLSTATE_INTERNAL, st->pos, "sink %s has no state table", o->name);
        goto fail;
    }
    o->rel.id = o->id;
    if (v->df && rt_dataflow_attach_sink(v->df, sp, o->view_cols, o->table_ids[0], &o->sink, err))
        goto fail;
    if (engine_add_object(e, o, !replay, err)) {
        if (o->sink)
            rt_dataflow_detach_sink(v->df, o->sink);
        o->sink = NULL;
        goto fail;
    }
    return 0;
fail:
    if (!replay) {
        WError ignored = {0};
        for (int i = 0; i < o->n_table_ids; i++)
            stor_table_drop(e->stor, o->table_ids[i], &ignored);
        o->from = NULL;
        cat_obj_free(o);
    } else {
        arena_free(o->arena);
        o->arena = NULL;
    }
    return -1;
}

/* ---- DROP ---------------------------------------------------------------------------- */

static bool view_reads(const CatObj *v, const CatObj *o)
{
    if (v->kind == CAT_SINK)
        return v->from == o;
    if (v->kind != CAT_VIEW || !v->plan)
        return false;
    for (int i = 0; i < v->plan->n_nodes; i++) {
        const PlanNode *n = v->plan->nodes[i];
        if ((n->kind == PN_SOURCE && n->source == &o->rel) ||
            ((n->kind == PN_VIEW_SCAN || n->kind == PN_VIEW_SOURCE) && n->scan_rel == &o->rel))
            return true;
    }
    return false;
}

/* ---- ALTER ... RENAME TO ----------------------------------------------------------------- */

static CatKind obj_kind(AstObjectKind k)
{
    return k == OBJ_SOURCE || k == OBJ_STREAM ? CAT_SOURCE
         : k == OBJ_MATERIALIZED_VIEW || k == OBJ_VIEW ? CAT_VIEW
         : k == OBJ_SINK ? CAT_SINK : CAT_TABLE;
}

/*
 * Renames one object. The catalog keeps each object's CREATE statement and
 * re-plans it at start, and a dependent's statement names what it reads:
 * renaming an object that others read would leave them unresolvable after
 * a restart, so that is refused (2BP01) rather than rewritten.
 */
static int rename_one(Engine *e, const AstStmt *st, SrvResult *out, WError *err)
{
    const AstAlterRename *r = st->u.rename;
    CatKind want = obj_kind(r->obj);
    CatObj *o = engine_find(e, r->name);
    if (!o) {
        if (r->if_exists) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s \"%s\" does not exist, skipping", kind_word(want), r->name);
            srv_result_notice(out, msg);
            return 0;
        }
        return werr(err, SQLSTATE_UNDEFINED_TABLE, st->pos, "%s \"%s\" does not exist", kind_word(want), r->name);
    }
    if (o->kind != want)
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, st->pos, "\"%s\" is not a %s", r->name, kind_word(want)),
               werr_hint(err, "Use ALTER %s to rename a %s.",
                         o->kind == CAT_SOURCE ? "SOURCE" : o->kind == CAT_VIEW ? "MATERIALIZED VIEW"
                         : o->kind == CAT_TABLE ? "TABLE" : "SINK",
                         kind_word(o->kind)), -1;
    if (o->late_of)
        return werr(err, SQLSTATE_DEPENDENT_OBJECTS, st->pos, "\"%s\" holds the late rows of materialized view %s",
                    r->name, o->late_of->name),
               werr_hint(err, "Its name is the view's LATE ROWS INTO clause."), -1;
    if (o->sink_query)
        return werr(err, SQLSTATE_DEPENDENT_OBJECTS, st->pos, "\"%s\" is the query of sink %s", r->name,
                    o->sink_owner ? o->sink_owner->name : "?"),
               werr_hint(err, "Its name follows the sink's."), -1;
    if (engine_find(e, r->new_name))
        return werr(err, SQLSTATE_DUPLICATE_TABLE, r->new_pos, "relation \"%s\" already exists", r->new_name);
    for (int i = 0; i < e->n_objs; i++) {
        CatObj *v = e->objs[i];
        if (v != o && view_reads(v, o)) {
            werr(err, SQLSTATE_DEPENDENT_OBJECTS, st->pos, "cannot rename %s %s because other objects depend on it",
                 kind_word(o->kind), o->name);
            werr_detail(err, "%s %s depends on %s %s", kind_word(v->kind), v->name, kind_word(o->kind), o->name);
            werr_hint(err, "Their definitions name it: drop them, rename, and create them again.");
            return -1;
        }
    }
    if (engine_rename_object(e, o, r->new_name, err))
        return -1;
    srv_result_complete(out, want == CAT_SOURCE ? "ALTER SOURCE" : want == CAT_SINK ? "ALTER SINK"
                             : want == CAT_TABLE ? "ALTER TABLE"
                             : r->obj == OBJ_VIEW ? "ALTER VIEW" : "ALTER MATERIALIZED VIEW");
    return 0;
}

static int drop_one(Engine *e, const AstDrop *d, const char *name, int pos, SrvResult *out, WError *err)
{
    CatObj *o = engine_find(e, name);
    CatKind want = d->obj == OBJ_SOURCE || d->obj == OBJ_STREAM ? CAT_SOURCE
                 : d->obj == OBJ_MATERIALIZED_VIEW || d->obj == OBJ_VIEW ? CAT_VIEW
                 : d->obj == OBJ_SINK ? CAT_SINK : CAT_TABLE;
    if (!o || o->kind != want) {
        if (o && o->kind != want) {
            werr(err, SQLSTATE_WRONG_OBJECT_TYPE, pos, "\"%s\" is not a %s", name, kind_word(want));
            werr_hint(err, "Use DROP %s to remove a %s.",
                      o->kind == CAT_SOURCE ? "SOURCE" : o->kind == CAT_VIEW ? "MATERIALIZED VIEW"
                      : o->kind == CAT_TABLE ? "TABLE" : "SINK",
                      kind_word(o->kind));
            return -1;
        }
        if (d->if_exists) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s \"%s\" does not exist, skipping", kind_word(want), name);
            srv_result_notice(out, msg);
            return 0;
        }
        return werr(err, SQLSTATE_UNDEFINED_TABLE, pos, "%s \"%s\" does not exist", kind_word(want), name);
    }
    if (o->late_of) {
        werr(err, SQLSTATE_DEPENDENT_OBJECTS, pos, "\"%s\" holds the late rows of materialized view %s", name,
             o->late_of->name);
        werr_hint(err, "It is dropped with the view.");
        return -1;
    }
    if (o->sink_query) {
        werr(err, SQLSTATE_DEPENDENT_OBJECTS, pos, "\"%s\" is the query of sink %s", name,
             o->sink_owner ? o->sink_owner->name : "?");
        werr_hint(err, "It is dropped with the sink.");
        return -1;
    }
    for (int i = 0; i < e->n_objs; i++) {
        CatObj *v = e->objs[i];
        if (v == o || !view_reads(v, o))
            continue;
        /* A sink's query is the sink, as far as the user can see. */
        if (v->sink_query && v->sink_owner)
            v = v->sink_owner;
        if (!d->cascade) {
            werr(err, SQLSTATE_DEPENDENT_OBJECTS, pos, "cannot drop %s %s because other objects depend on it",
                 kind_word(o->kind), name);
            werr_detail(err, "%s %s depends on %s %s", kind_word(v->kind), v->name, kind_word(o->kind), name);
            werr_hint(err, "Use DROP ... CASCADE to drop the dependent objects too.");
            return -1;
        }
        char msg[300];
        snprintf(msg, sizeof msg, "drop cascades to %s %s", kind_word(v->kind), v->name);
        srv_result_notice(out, msg);
        AstDrop dv = {.obj = v->kind == CAT_SINK ? OBJ_SINK : OBJ_MATERIALIZED_VIEW, .cascade = true};
        if (drop_one(e, &dv, v->name, pos, out, err))
            return -1;
        i = -1; /* the list changed: start over */
    }
    /* A sink AS query takes its query's view (and that view's state) along. */
    CatObj *q = o->kind == CAT_SINK && o->from && o->from->sink_query ? o->from : NULL;
    if (engine_remove_object(e, o, err))
        return -1;
    return q ? engine_remove_object(e, q, err) : 0;
}


/* How long INSERT INTO a Kafka source waits for the broker's acknowledgement. */
#define INSERT_ACK_TIMEOUT_MS 10000

/* INSERT INTO a source failed after `produced` records were queued (a
 * delivery failed or the broker did not answer within
 * INSERT_ACK_TIMEOUT_MS): every record not yet acknowledged is withdrawn
 * from the producer, so none of them is sent later (the row used to arrive
 * when a paused broker resumed, after the client had been told it failed).
 * err keeps its error when nothing was written; it becomes 08007 when some
 * rows were acknowledged or had already been sent (written, or possibly
 * written: a retry could write them twice). Runs under the engine lock, so
 * the shared producer holds only this statement's records. */
static void insert_withdraw(RtKafkaProducer *p, long acked0, int produced, const char *source, WError *err)
{
    int in_flight = rt_kafka_producer_purge(p);
    long acked = rt_kafka_producer_acked(p) - acked0;
    if (acked == 0 && in_flight == 0) {
        werr_detail(err, "No row was written: the %d record%s not acknowledged were withdrawn before "
                         "they reached the broker.", produced, produced == 1 ? "" : "s");
        werr_hint(err, "Retrying the statement is safe.");
        return;
    }
    char first[sizeof err->msg];
    snprintf(first, sizeof first, "%s", err->msg);
    werr_clear(err);
    werr(err, SQLSTATE_TXN_RESOLUTION_UNKNOWN, 0,
         "INSERT into source \"%s\" is partly or possibly written: %ld of %d rows were acknowledged, "
         "%d were sent without an answer", source, acked, produced, in_flight);
    werr_detail(err, "%s. The rows sent without an answer may or may not be in the topic; the rest "
                     "were withdrawn and will not be written.", first);
    werr_hint(err, "Check the source before retrying: a retry may write some rows twice.");
}

/* ---- INSERT ----------------------------------------------------------------------------- */

static int insert_into(Engine *e, const AstStmt *st, SrvResult *out, WError *err)
{
    const AstInsert *ins = st->u.insert;
    CatObj *o = engine_find(e, ins->table);
    if (!o)
        return werr(err, SQLSTATE_UNDEFINED_TABLE, st->pos, "relation \"%s\" does not exist", ins->table);
    if (o->kind == CAT_TABLE)
        return table_insert(e, st, out, err);
    if (o->kind == CAT_SINK && !ins->query->values)
        /* Flink starts a continuous job with INSERT INTO <sink table> SELECT;
         * weir's sinks are not tables, and a sink with its own query is
         * CREATE SINK ... AS query. */
        return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos,
                    "feature not supported: INSERT INTO sink \"%s\" ... SELECT (a continuous insert)", o->name),
               werr_hint(err, "A sink that runs a query of its own is CREATE SINK name AS SELECT ... WITH (...)."), -1;
    if (o->kind != CAT_SOURCE)
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, st->pos, "cannot insert into %s \"%s\"", kind_word(o->kind),
                    o->name);
    const CatRelation *r = &o->rel;
    const char *connector = cat_option(r, "connector");
    if (!connector || strcasecmp(connector, "kafka") != 0)
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, st->pos,
                    "cannot insert into source \"%s\": its connector '%s' makes its own rows", o->name,
                    connector ? connector : "");
    int ncols = r->n_cols, nphys = 0;
    for (int k = 0; k < ncols; k++)
        nphys += cat_col_in_value(r, k);
    /* Computed columns are not written: the records carry the others. */
    int n_target = ins->columns ? ast_list_len(ins->columns) : nphys;
    int *map = xcalloc((size_t)(n_target ? n_target : 1), sizeof(int));
    for (int i = 0, k = 0; i < n_target; i++) {
        if (!ins->columns) {
            while (!cat_col_in_value(r, k))
                k++;
            map[i] = k++;
            continue;
        }
        const char *c = AST_AT(ins->columns, i);
        map[i] = -1;
        for (int k = 0; k < ncols; k++)
            if (strcmp(r->col_names[k], c) == 0)
                map[i] = k;
        if (map[i] < 0) {
            free(map);
            return werr(err, SQLSTATE_UNDEFINED_COLUMN, st->pos, "column \"%s\" of relation \"%s\" does not exist", c,
                        o->name);
        }
        if (!cat_col_in_value(r, map[i])) {
            bool computed = r->col_gen && r->col_gen[map[i]];
            free(map);
            return werr(err, "428C9", st->pos, "cannot insert a value into column \"%s\"", c),
                   werr_hint(err, computed ? "Column \"%s\" is computed from the others (a computed column)."
                                           : "Column \"%s\" comes from the Kafka record (INCLUDE).", c), -1;
        }
        for (int j = 0; j < i; j++)
            if (map[j] == map[i]) {
                free(map);
                return werr(err, SQLSTATE_DUPLICATE_COLUMN, st->pos, "column \"%s\" specified more than once", c);
            }
    }
    const char *boot = cat_option(r, "properties.bootstrap.server");
    if (!boot)
        boot = cat_option(r, "properties.bootstrap.servers");
    if (!boot)
        boot = e->kafka_bootstrap;
    RtKafkaProducer *p;
    RtKafkaProp props[64];
    int np = source_props(r, props, 64);
    if (engine_producer(e, boot, props, np, &p, err)) {
        free(map);
        return -1;
    }
    Arena *a = arena_new(0);
    Value *vals = arena_alloc(a, sizeof(Value) * (size_t)ncols);
    const char **wnames = arena_alloc(a, sizeof(char *) * (size_t)ncols);
    Buf json = BUF_INIT;
    int nrows = ast_list_len(ins->query->values), rc = 0;
    /* INSERT ... SELECT: the query's current result, produced once like
     * VALUES (one-shot, as INSERT INTO a table ... SELECT). */
    Value **qrows = NULL;
    int qcols = 0, pos = ins->query->pos;
    if (!ins->query->values) {
        rc = table_query_rows(e, ins->query, a, &qrows, &nrows, &qcols, err);
        if (!rc && qcols != n_target)
            rc = werr(err, SQLSTATE_SYNTAX_ERROR, pos, "INSERT has %s expressions than target columns",
                      qcols > n_target ? "more" : "fewer");
        if (rc)
            nrows = 0;
    }
    /* Encode every row before producing any, so a bad value sends nothing. */
    char **recs = arena_alloc(a, sizeof(char *) * (size_t)(nrows ? nrows : 1));
    size_t *lens = arena_alloc(a, sizeof(size_t) * (size_t)(nrows ? nrows : 1));
    for (int rrow = 0; rrow < nrows && !rc; rrow++) {
        AstList *row = qrows ? NULL : AST_AT(ins->query->values, rrow);
        if (row && ast_list_len(row) != n_target) {
            rc = werr(err, SQLSTATE_SYNTAX_ERROR, ((AstExpr *)AST_AT(row, 0))->pos,
                      "INSERT has %s expressions than target columns",
                      ast_list_len(row) > n_target ? "more" : "fewer");
            break;
        }
        if (row)
            pos = ((AstExpr *)AST_AT(row, 0))->pos;
        for (int k = 0; k < ncols; k++)
            vals[k] = value_null(r->col_types[k]);
        for (int i = 0; i < n_target && !rc; i++)
            rc = row ? plan_const_expr(AST_AT(row, i), r->col_types[map[i]], a, &vals[map[i]], err)
                     : table_assign(a, &qrows[rrow][i], r->col_types[map[i]], pos, &vals[map[i]], err);
        if (rc)
            break;
        for (int k = 0; k < ncols && r->col_typmod && !rc; k++)
            if ((rc = num_apply_typmod(r->col_typmod[k], &vals[k], err)))
                err->pos = ((AstExpr *)AST_AT(row, 0))->pos;
        if (rc)
            break;
        for (int k = 0; k < ncols && r->col_not_null; k++)
            if (r->col_not_null[k] && vals[k].null) {
                rc = werr(err, "23502", pos,
                          "null value in column \"%s\" of relation \"%s\" violates not-null constraint",
                          r->col_names[k], o->name);
                break;
            }
        if (rc)
            break;
        buf_reset(&json);
        int nw = 0;
        for (int k = 0; k < ncols; k++)
            if (cat_col_in_value(r, k)) {
                wnames[nw] = r->col_names[k];
                vals[nw++] = vals[k]; /* k >= nw: compacts in place */
            }
        rt_json_encode_row(nw, wnames, vals, &json);
        recs[rrow] = arena_strndup(a, json.data, json.len);
        lens[rrow] = json.len;
    }
    const char *topic = cat_option(r, "topic");
    long acked0 = rt_kafka_producer_acked(p);
    int produced = 0;
    for (int i = 0; i < nrows && !rc; i++)
        if (!(rc = rt_kafka_produce(p, topic, -1, NULL, 0, recs[i], lens[i], err)))
            produced++;
    if (!rc)
        rc = rt_kafka_producer_flush(p, INSERT_ACK_TIMEOUT_MS, err);
    if (rc && produced > 0)
        insert_withdraw(p, acked0, produced, o->name, err);
    if (!rc) {
        char tag[64];
        snprintf(tag, sizeof tag, "INSERT 0 %d", nrows);
        srv_result_complete(out, tag);
    }
    buf_free(&json);
    arena_free(a);
    free(map);
    return rc;
}

/* ---- SELECT, EXPLAIN ------------------------------------------------------------------------ */

typedef struct RowSink {
    SrvResult *out;
} RowSink;

static int send_row(void *arg, int n, const char *const *vals, const int *lens)
{
    RowSink *s = arg;
    if (srv_result_cancelled(s->out))
        return 1;
    return srv_result_row(s->out, vals, lens) < 0;
}

static bool query_cancelled(void *out) { return srv_result_cancelled(out); }

static void query_columns(const PlanQuery *q, SrvResult *out)
{
    const char *names[WEIR_MAX_COLUMNS + 1];
    uint32_t oids[WEIR_MAX_COLUMNS + 1];
    int n = 0;
    for (int i = 0; i < q->schema.n && n < WEIR_MAX_COLUMNS + 1; i++) {
        if (q->schema.hidden[i])
            continue;
        names[n] = q->schema.names[i];
        oids[n++] = type_oid(q->schema.types[i]);
    }
    srv_result_columns(out, n, names, oids);
}

static int run_select(Engine *e, const AstStmt *st, bool describe_only, SrvResult *out, WError *err)
{
    Arena *a = arena_new(0);
    PlanCatalog cat = engine_plan_catalog(e, NULL, false, true, a);
    PlanQuery *q = plan_query(st->u.select, &cat, a, err);
    if (!q) {
        arena_free(a);
        return -1;
    }
    query_columns(q, out);
    if (describe_only) {
        arena_free(a);
        return 0;
    }
    RowSink sink = {out};
    RtCancel cancel = {query_cancelled, out};
    long n = rt_query_run_cancel(&e->rt, q, &cancel, send_row, &sink, err);
    arena_free(a);
    if (n < 0) {
        if (!strcmp(err->sqlstate, SQLSTATE_QUERY_CANCELED) && srv_result_cancelled(out))
            snprintf(err->msg, sizeof err->msg, "%s", srv_result_cancel_message(out));
        return -1;
    }
    if (srv_result_cancelled(out))
        return werr(err, SQLSTATE_QUERY_CANCELED, 0, "%s", srv_result_cancel_message(out));
    char tag[64];
    snprintf(tag, sizeof tag, "SELECT %ld", n);
    srv_result_complete(out, tag);
    return 0;
}

static int explain(Engine *e, Session *s, const AstStmt *st, SrvResult *out, WError *err)
{
    const AstExplain *ex = st->u.explain;
    bool json = false;
    for (int i = 0; i < ast_list_len(ex->options); i++) {
        const AstOption *o = AST_AT(ex->options, i);
        if (strcasecmp(o->key, "format") == 0 && o->value && strcasecmp(o->value, "json") == 0)
            json = true;
        else if (strcasecmp(o->key, "format") == 0 && o->value && strcasecmp(o->value, "text") == 0)
            json = false;
        else if (strcasecmp(o->key, "verbose") != 0 && strcasecmp(o->key, "costs") != 0)
            return werr(err, SQLSTATE_SYNTAX_ERROR, o->pos, "unrecognized EXPLAIN option \"%s\"", o->key);
    }
    Arena *a = arena_new(0);
    Buf b = BUF_INIT;
    int rc = 0;
    PlanCatalog cat = engine_plan_catalog(e, NULL, false, true, a);
    if (ex->stmt->kind == STMT_CREATE_VIEW) {
        PlanViewOptions opt = {.name = ex->stmt->u.create_view->name, .allow_unbounded = allow_unbounded(s),
                               .parallelism = session_parallelism(s), .plan_rev = PLAN_REV_CURRENT};
        PlanView *v = plan_view(ex->stmt->u.create_view, &cat, &opt, a, err);
        if (v)
            plan_explain_view(v, json, &b);
        else
            rc = -1;
    } else if (ex->stmt->kind == STMT_CREATE_SINK && ex->stmt->u.create_sink->query) {
        /* The plan of the view the sink would run, under the name it would get. */
        const AstCreateSink *cs = ex->stmt->u.create_sink;
        char *vname = sink_query_name(cs->name);
        AstCreateView cv;
        AstStmt vst;
        sink_query_stmt(cs, ex->stmt, arena_strdup(a, vname), &cv, &vst);
        free(vname);
        PlanViewOptions opt = {.name = cv.name, .allow_unbounded = allow_unbounded(s), .plan_rev = PLAN_REV_CURRENT};
        PlanView *v = plan_view(&cv, &cat, &opt, a, err);
        if (v) {
            if (!json)
                buf_printf(&b, "Sink %s: the rows of its query, kept as %s\n", cs->name, cv.name);
            plan_explain_view(v, json, &b);
        } else {
            rc = -1;
        }
    } else if (ex->stmt->kind == STMT_SELECT) {
        PlanQuery *q = plan_query(ex->stmt->u.select, &cat, a, err);
        if (q)
            plan_explain_query(q, json, &b);
        else
            rc = -1;
    } else {
        rc = werr(err, SQLSTATE_NOT_SUPPORTED, ex->stmt->pos,
                  "feature not supported: EXPLAIN of this statement (EXPLAIN takes SELECT, CREATE MATERIALIZED VIEW or "
                  "CREATE SINK ... AS query)");
    }
    if (!rc) {
        one_text_column(out, "QUERY PLAN");
        if (json) {
            const char *v[1] = {b.data};
            text_row(out, 1, v);
        } else {
            char *line = b.data;
            while (line && *line) {
                char *nl = strchr(line, '\n');
                if (nl)
                    *nl = 0;
                const char *v[1] = {line};
                text_row(out, 1, v);
                line = nl ? nl + 1 : NULL;
            }
        }
        srv_result_complete(out, "EXPLAIN");
    }
    buf_free(&b);
    arena_free(a);
    return rc;
}

/* ---- FLUSH ------------------------------------------------------------------------------------ */

static int flush(Engine *e, SrvResult *out, WError *err)
{
    for (int i = 0; i < e->n_objs; i++)
        if (e->objs[i]->df && rt_dataflow_flush_target(e->objs[i]->df, err))
            return -1;
    int64_t deadline = now_ms() + FLUSH_TIMEOUT_MS;
    for (;;) {
        bool done = true;
        for (int i = 0; i < e->n_objs && done; i++)
            if (e->objs[i]->df && !rt_dataflow_flushed(e->objs[i]->df))
                done = false;
        if (done)
            break;
        if (srv_result_cancelled(out))
            return werr(err, SQLSTATE_QUERY_CANCELED, 0, "%s", srv_result_cancel_message(out));
        if (now_ms() > deadline)
            return werr(err, SQLSTATE_QUERY_CANCELED, 0, "FLUSH timed out after %d s: a view is not keeping up",
                        FLUSH_TIMEOUT_MS / 1000);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&e->progress, &e->lock, &ts);
    }
    srv_result_complete(out, "FLUSH");
    return 0;
}

/* After CHECKPOINT: dead letters are delivered by a thread per view once
 * their checkpoint committed; the statement waits for them (releasing the
 * lock, so views go on) up to DLQ_WAIT_MS, so that "run CHECKPOINT to have
 * them at once" holds while Kafka answers. Past it a notice says so: the
 * checkpoint itself succeeded, and delivery goes on in the background. */
#define DLQ_WAIT_MS 15000
static void dead_letters_wait(Engine *e, SrvResult *out)
{
    int64_t deadline = now_ms() + DLQ_WAIT_MS;
    for (;;) {
        const char *pending = NULL;
        for (int i = 0; i < e->n_objs && !pending; i++)
            if (e->objs[i]->df && rt_dataflow_dead_letters_pending(e->objs[i]->df))
                pending = e->objs[i]->name;
        if (!pending || srv_result_cancelled(out))
            return;
        if (now_ms() > deadline) {
            char msg[300];
            snprintf(msg, sizeof msg, "dead letters of view \"%s\" are not delivered yet; they are retried in the "
                                      "background", pending);
            srv_result_notice(out, msg);
            return;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&e->progress, &e->lock, &ts);
    }
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
        one_text_column(out, "Name");
        for (int i = 0; i < e->n_objs; i++)
            if (e->objs[i]->kind == kind && !e->objs[i]->late_of && !e->objs[i]->sink_query) {
                const char *v[1] = {e->objs[i]->name};
                text_row(out, 1, v);
            }
        srv_result_complete(out, "SHOW");
        return 0;
    }
    if (!strcasecmp(w, "create")) {
        CatObj *o = sh->name ? engine_find(e, sh->name) : NULL;
        if (!o)
            return werr(err, SQLSTATE_UNDEFINED_TABLE, st->pos, "relation \"%s\" does not exist", sh->name ? sh->name : "");
        const char *names[2] = {"Name", "Create Sql"};
        uint32_t oids[2] = {SRV_OID_TEXT, SRV_OID_TEXT};
        srv_result_columns(out, 2, names, oids);
        /* A source changed by ALTER SOURCE shows both statements. */
        Buf both = BUF_INIT;
        if (o->alter_sql)
            buf_printf(&both, "%s;\n%s", o->sql, o->alter_sql);
        const char *v[2] = {o->name, o->alter_sql ? both.data : o->sql};
        text_row(out, 2, v);
        buf_free(&both);
        srv_result_complete(out, "SHOW");
        return 0;
    }
    if (!strcasecmp(w, "all")) {
        const char *names[2] = {"name", "setting"};
        uint32_t oids[2] = {SRV_OID_TEXT, SRV_OID_TEXT};
        srv_result_columns(out, 2, names, oids);
        for (size_t i = 0; i < sizeof SETTINGS / sizeof SETTINGS[0]; i++) {
            const char *v[2] = {SETTINGS[i].name, setting_get(s, SETTINGS[i].name)};
            text_row(out, 2, v);
        }
        srv_result_complete(out, "SHOW");
        return 0;
    }
    const char *v = setting_get(s, w);
    if (!v)
        return werr(err, SQLSTATE_UNDEFINED_OBJECT, st->pos, "unrecognized configuration parameter \"%s\"", w);
    one_text_column(out, !strcasecmp(w, "timezone") ? "TimeZone" : w); /* Postgres's spelling */
    text_row(out, 1, &v);
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
    char *text = strndup(sql + st->text_start, (size_t)(st->text_end - st->text_start));
    int rc = 0;
    if (describe_only && st->kind != STMT_SELECT && st->kind != STMT_ANALYZE_LATENESS && st->kind != STMT_VERIFY) {
        free(text);
        return 0;
    }
    switch (st->kind) {
    case STMT_SELECT:
        rc = run_select(e, st, describe_only, out, err);
        break;
    case STMT_CREATE_SOURCE: {
        const AstCreateSource *cs = st->u.create_source;
        if (engine_find(e, cs->name)) {
            if (cs->if_not_exists) {
                char msg[300];
                snprintf(msg, sizeof msg, "relation \"%s\" already exists, skipping", cs->name);
                srv_result_notice(out, msg);
            } else {
                rc = werr(err, SQLSTATE_DUPLICATE_TABLE, st->pos, "relation \"%s\" already exists", cs->name);
                break;
            }
        } else if ((rc = session_create_source(e, st, text, NULL, err))) {
            break;
        }
        srv_result_complete(out, cs->obj == OBJ_TABLE ? "CREATE TABLE" : "CREATE SOURCE");
        break;
    }
    case STMT_CREATE_VIEW: {
        const AstCreateView *cv = st->u.create_view;
        // CREATE [OR REPLACE] VIEW and CREATE OR REPLACE MATERIALIZED VIEW are 0A000 whether or
        // not the name exists: answering 42P07 (or, with IF NOT EXISTS, success) would tell a
        // user that the statement is supported and only the name is in the way.
        if (cv->materialized && !cv->or_replace && engine_find(e, cv->name)) {
            if (cv->if_not_exists) {
                char msg[300];
                snprintf(msg, sizeof msg, "relation \"%s\" already exists, skipping", cv->name);
                srv_result_notice(out, msg);
            } else {
                rc = werr(err, SQLSTATE_DUPLICATE_TABLE, st->pos, "relation \"%s\" already exists", cv->name);
                break;
            }
        } else if ((rc = create_view(e, s, st, text, NULL, err))) {
            break;
        }
        e->dirty = true;
        srv_result_complete(out, cv->materialized ? "CREATE MATERIALIZED VIEW" : "CREATE VIEW");
        break;
    }
    case STMT_DROP: {
        const AstDrop *d = st->u.drop;
        for (int i = 0; i < ast_list_len(d->names) && !rc; i++)
            rc = drop_one(e, d, AST_AT(d->names, i), st->pos, out, err);
        if (!rc)
            srv_result_complete(out, d->obj == OBJ_SOURCE || d->obj == OBJ_STREAM ? "DROP SOURCE"
                                     : d->obj == OBJ_MATERIALIZED_VIEW ? "DROP MATERIALIZED VIEW"
                                     : d->obj == OBJ_VIEW ? "DROP VIEW"
                                     : d->obj == OBJ_SINK ? "DROP SINK" : "DROP TABLE");
        break;
    }
    case STMT_INSERT:
        rc = insert_into(e, st, out, err);
        break;
    case STMT_EXPLAIN:
        rc = explain(e, s, st, out, err);
        break;
    case STMT_FLUSH:
        rc = flush(e, out, err);
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
        if (!(rc = engine_checkpoint(e, err))) {
            dead_letters_wait(e, out);
            if (st->u.savepoint_dir) {
                /* A savepoint: the checkpoint just taken, copied into a directory
                 * that weir can later start from (weir --data-dir DIR). */
                if ((rc = stor_copy(e->stor, st->u.savepoint_dir, err)))
                    break;
                srv_result_complete(out, "ALTER SYSTEM");
            } else {
                srv_result_complete(out, "CHECKPOINT");
            }
        }
        break;
    case STMT_CREATE_SINK: {
        const AstCreateSink *cs = st->u.create_sink;
        if (engine_find(e, cs->name)) {
            if (cs->if_not_exists) {
                char msg[300];
                snprintf(msg, sizeof msg, "sink \"%s\" already exists, skipping", cs->name);
                srv_result_notice(out, msg);
            } else {
                rc = werr(err, SQLSTATE_DUPLICATE_OBJECT, st->pos, "relation \"%s\" already exists", cs->name);
                break;
            }
        } else if ((rc = create_sink(e, s, st, text, NULL, err))) {
            break;
        }
        e->dirty = true; /* the next checkpoint seals the sink's first batch: the view's rows */
        srv_result_complete(out, "CREATE SINK");
        break;
    }
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
        if (!(rc = session_alter_source(e, st, false, err)))
            srv_result_complete(out, engine_find(e, st->u.alter_source->name)->kind == CAT_TABLE ? "ALTER TABLE"
                                                                                               : "ALTER SOURCE");
        break;
    case STMT_RESUME: {
        CatObj *v = engine_find(e, st->u.resume_view);
        if (!v) {
            rc = werr(err, SQLSTATE_UNDEFINED_TABLE, st->pos, "materialized view \"%s\" does not exist", st->u.resume_view);
            break;
        }
        if ((v->kind != CAT_VIEW && v->kind != CAT_TABLE) || v->late_of || !v->plan) {
            rc = werr(err, SQLSTATE_WRONG_OBJECT_TYPE, st->pos, "\"%s\" is not a materialized view or a table", v->name);
            break;
        }
        if (!(rc = engine_resume_view(e, v, err)))
            srv_result_complete(out, v->kind == CAT_TABLE ? "ALTER TABLE" : "ALTER MATERIALIZED VIEW");
        break;
    }
    case STMT_CREATE_USER:
    case STMT_ALTER_USER:
    case STMT_DROP_USER:
        rc = users_exec(e, st, out, err);
        break;
    case STMT_SWAP_VIEW:
        rc = session_swap_view(e, st, out, err);
        break;
    case STMT_ALTER_RENAME:
        rc = rename_one(e, st, out, err);
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
        CatObj *o = engine_find(e, ins->table);
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
        CatObj *o = engine_find(e, st->kind == STMT_UPDATE ? st->u.update->table : st->u.delete_->table);
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
    char *text = strndup(sql + st->text_start, (size_t)(st->text_end - st->text_start));
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
        fprintf(stderr, "weir: cluster: checkpoint after catalog offset %lld failed: %s\n",
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
            werr(&err, "42P02", ph[i]->pos + pos_offset, "there is no parameter $%d", k);
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
        rc = exec_stmt(e, s, sql, stmts[i], describe_only, out, &err);
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
            char *piece = strndup(sql + starts[i], (size_t)(ends[i] - starts[i]));
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
