/*
 * cmd_source.c: CREATE SOURCE and CREATE TABLE's common part (the
 * connector's options, the relation), and ALTER SOURCE|TABLE ... SET.
 */
#include "commands.h"
#include "tz.h"
#include "crashpoint.h"

#include <ctype.h>
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
#include "log.h"
#include "avro_codec.h"

/* ---- CREATE SOURCE ----------------------------------------------------------------- */

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
        return werr(err, SQLSTATE_WINDOWING_ERROR, pos, "clock-skew correction needs a WATERMARK: it corrects the watermark's time column"),
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
    if ((v->kind != CAT_VIEW && v->kind != CAT_TABLE) || !v->flow.plan)
        return false;
    for (int i = 0; i < v->flow.plan->n_nodes; i++)
        if (v->flow.plan->nodes[i]->kind == PN_SOURCE && v->flow.plan->nodes[i]->source == r)
            return true;
    return false;
}

int session_alter_source(Engine *e, const AstStmt *st, bool replay, WError *err)
{
    const AstAlterSource *as = st->u.alter_source;
    CatObj *o = cat_find(e->cat, as->name);
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
    free(o->source.alter_sql);
    o->source.alter_sql = w ? xstrdup(b.data) : NULL;
    o->source.altered = true;
    buf_free(&b);
    if (replay)
        return 0;
    /* Views stopped at a bad record of this source go on under the new policy. */
    CAT_FOREACH(e->cat, CAT_ANY, v) {
        if (v->flow.failed && !v->flow.df && reads_source(v, &o->rel)) {
            WError serr = {0};
            v->flow.failed = false;
            if (engine_start_view(e, v, &serr) == 0)
                wlog_info("cmd_source", "view %s is running again (source %s changed)", v->name, o->name);
        }
    }
    e->dirty = true;
    if (engine_checkpoint(e, err)) {
        werr_hint(err, "The change applies now; it is stored with the next checkpoint that succeeds.");
        return -1;
    }
    return 0;
}

/* The planner revision a source's or table's columns are bound by: the one
 * it was created at; 6 for one created before weir kept it (the rules all
 * sources were bound by until revision 7). */
int source_rev(const CatObj *o) { return o->view.plan_rev > 0 ? o->view.plan_rev : 6; }

/* The byte offset in sql just past the name of CREATE SOURCE [IF NOT EXISTS]
 * name: where a column list goes. -1 if the text is not shaped so. */
static long after_source_name(const char *sql)
{
    const char *p = sql;
    const char *words[] = {"create", "source", "stream"};
    for (int w = 0; w < 2; w++) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            p++;
        size_t n = strlen(words[w]);
        if (w == 1 && !strncasecmp(p, words[2], strlen(words[2])))
            n = strlen(words[2]); /* CREATE STREAM, the synonym */
        else if (strncasecmp(p, words[w], n) != 0)
            return -1;
        p += n;
    }
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            p++;
        if (!strncasecmp(p, "if ", 3) || !strncasecmp(p, "not ", 4) || !strncasecmp(p, "exists ", 7)) {
            while (*p && *p != ' ')
                p++;
            continue;
        }
        break;
    }
    for (;;) { /* a (dotted) name: unquoted words or "quoted ""parts""" */
        if (*p == '"') {
            for (p++; *p && !(*p == '"' && p[1] != '"'); p += *p == '"' ? 2 : 1)
                ;
            if (*p != '"')
                return -1;
            p++;
        } else {
            while (*p && (isalnum((unsigned char)*p) || *p == '_' || (unsigned char)*p >= 0x80))
                p++;
        }
        if (*p != '.')
            break;
        p++;
    }
    return (long)(p - sql);
}

/* CREATE SOURCE s WITH (...) FORMAT PLAIN ENCODE AVRO (schema.registry = ...)
 * without columns: the columns of the latest schema of subject
 * "<topic>-value" are written into the statement, which is then created as
 * if typed so. The catalog keeps that text, so a restart does not need the
 * registry and the columns do not change under the views. */
static int create_from_registry(Engine *e, const AstStmt *st, const char *sql, WError *err)
{
    const AstCreateSource *cs = st->u.create_source;
    CatRelation r = {0};
    int n_with = ast_list_len(cs->options), n = n_with + ast_list_len(cs->encode_options);
    CatOption *opts = xcalloc((size_t)(n ? n : 1), sizeof *opts);
    for (int i = 0; i < n; i++) {
        const AstOption *op = i < n_with ? AST_AT(cs->options, i) : AST_AT(cs->encode_options, i - n_with);
        opts[i] = (CatOption){op->key, op->value ? op->value : ""};
    }
    r.options = opts;
    r.n_options = n;
    r.format = cs->format ? cs->format : "plain";
    r.encode = "avro";
    const char *topic = cat_option(&r, "topic");
    Buf cols = BUF_INIT, text = BUF_INIT;
    int rc = -1;
    long at = after_source_name(sql);
    if (!cat_option(&r, "schema.registry")) {
        werr(err, SQLSTATE_INVALID_PARAMETER, st->pos,
             "a source without a column list takes its columns from ENCODE AVRO (schema.registry = '...')");
        werr_hint(err, "With schema.inline, declare the columns.");
        goto out;
    }
    if (!topic || !*topic || at < 0) {
        werr(err, SQLSTATE_INVALID_PARAMETER, st->pos, "a Kafka source needs WITH (topic = '...')");
        goto out;
    }
    if (rt_avro_check_options(&r, err)) {
        err->pos = st->pos;
        goto out;
    }
    Buf subject = BUF_INIT;
    buf_printf(&subject, "%s-value", topic);
    rc = rt_avro_registry_columns(&r, subject.data, &cols, err);
    buf_free(&subject);
    if (rc) {
        err->pos = st->pos;
        goto out;
    }
    buf_append(&text, sql, (size_t)at);
    buf_putc(&text, ' ');
    buf_append(&text, cols.data, cols.len);
    buf_puts(&text, sql + at);
    Arena *a = arena_new(0);
    AstStmt **stmts;
    int n_stmts;
    rc = parse_sql(text.data, a, &stmts, &n_stmts, err);
    if (!rc && (n_stmts != 1 || stmts[0]->kind != STMT_CREATE_SOURCE || !ast_list_len(stmts[0]->u.create_source->columns)))
        rc = werr(err, SQLSTATE_INTERNAL, st->pos, "the column list from the registry did not parse: %s",
                  cols.data);
    if (!rc) {
        rc = session_create_source(e, stmts[0], text.data, NULL, err);
        if (!rc)
            wlog_info("cmd_source", "source %s: columns %s from the schema registry", cs->name, cols.data);
    } else if (!err->pos) {
        err->pos = st->pos;
    }
    arena_free(a);
out:
    free(opts);
    buf_free(&cols);
    buf_free(&text);
    return rc;
}

int session_create_source(Engine *e, const AstStmt *st, const char *sql, CatObj *replay, WError *err)
{
    const AstCreateSource *cs = st->u.create_source;
    bool table = cs->obj == OBJ_TABLE;
    bool avro = cs->encode && !strcasecmp(cs->encode, "avro");
    if (avro && table) {
        werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: ENCODE AVRO on a table");
        werr_hint(err, "Avro topics are read by CREATE SOURCE ... FORMAT PLAIN ENCODE AVRO (...); FORMAT UPSERT and "
                       "DEBEZIUM read JSON (ENCODE JSON).");
        return -1;
    }
    if (avro && cs->format && strcasecmp(cs->format, "plain") != 0) {
        werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: FORMAT %s ENCODE AVRO", cs->format);
        werr_hint(err, "Avro records are read with FORMAT PLAIN ENCODE AVRO; UPSERT and DEBEZIUM read JSON.");
        return -1;
    }
    if (cs->encode_options && !avro)
        return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: ENCODE %s options",
                    cs->encode ? cs->encode : "json");
    if (cs->format && strcasecmp(cs->format, "plain") != 0 &&
        !(table && (!strcasecmp(cs->format, "upsert") || !strcasecmp(cs->format, "debezium")))) {
        werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: FORMAT %s%s", cs->format,
             table ? "" : " on a source");
        if (!table && (!strcasecmp(cs->format, "upsert") || !strcasecmp(cs->format, "debezium")))
            werr_hint(err, "A changelog topic is read by a table: CREATE TABLE t (..., PRIMARY KEY (k)) WITH (...) "
                           "FORMAT %s ENCODE JSON.", cs->format);
        return -1;
    }
    if (cs->encode && strcasecmp(cs->encode, "json") != 0 && !avro) {
        werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: ENCODE %s", cs->encode);
        werr_hint(err, "Sources read ENCODE JSON and ENCODE AVRO.");
        return -1;
    }
    if (avro && !replay && !ast_list_len(cs->columns))
        return create_from_registry(e, st, sql, err);
    CatObj *o = replay ? replay : xcalloc(1, sizeof *o);
    if (!replay) {
        o->name = xstrdup(cs->name);
        o->sql = xstrdup(sql);
        /* Kept in the catalog: a restart binds its columns by the same rules. */
        o->view.plan_rev = PLAN_REV_CURRENT;
    } else if (o->view.plan_rev > PLAN_REV_CURRENT) {
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0,
                    "feature not supported: %s \"%s\" was created by a newer weir (planner revision %d, this one "
                    "knows %d)",
                    table ? "table" : "source", o->name, o->view.plan_rev, PLAN_REV_CURRENT);
    }
    o->kind = table ? CAT_TABLE : CAT_SOURCE;
    o->arena = arena_new(0);
    CatRelation *r = &o->rel;
    r->kind = o->kind;
    r->name = o->name;
    /* ENCODE AVRO (...)'s options join the WITH options (their keys,
     * schema.*, are the encoding's only), so the source operator reads
     * them the same way. */
    int n_with = ast_list_len(cs->options), n_opts = n_with + ast_list_len(cs->encode_options);
    CatOption *opts = arena_zalloc(o->arena, sizeof(CatOption) * (size_t)(n_opts ? n_opts : 1));
    for (int i = 0; i < n_opts; i++) {
        const AstOption *op = i < n_with ? AST_AT(cs->options, i) : AST_AT(cs->encode_options, i - n_with);
        if (i < n_with && !strncasecmp(op->key, "schema.", 7)) {
            werr(err, SQLSTATE_INVALID_PARAMETER, op->pos, "option \"%s\" belongs to ENCODE AVRO (...)", op->key);
            werr_hint(err, "Write FORMAT PLAIN ENCODE AVRO (%s = '...').", op->key);
            goto fail;
        }
        if (i >= n_with && strcasecmp(op->key, "schema.registry") != 0 &&
            strcasecmp(op->key, "schema.registry.username") != 0 &&
            strcasecmp(op->key, "schema.registry.password") != 0 && strcasecmp(op->key, "schema.inline") != 0) {
            werr(err, SQLSTATE_INVALID_PARAMETER, op->pos, "unknown ENCODE AVRO option \"%s\"", op->key);
            werr_hint(err, "Options: schema.registry, schema.registry.username, schema.registry.password, "
                           "schema.inline.");
            goto fail;
        }
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
    if (avro && strcasecmp(conn, "kafka") != 0) {
        werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: ENCODE AVRO over connector '%s'", conn);
        werr_hint(err, "Avro records are read from Kafka: WITH (connector = 'kafka', topic = '...').");
        goto fail;
    }
    if (strcasecmp(conn, "nexmark") == 0) {
        /* The built-in generator: its options and the declared columns are checked now. */
        RtNxConfig nx;
        if (plan_source(cs, r, source_rev(o), o->arena, err) || rt_nexmark_config(r, &nx, NULL, err)) {
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
    for (int i = 0; i < n_with; i++) {
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
    if (avro && rt_avro_check_options(r, err)) {
        err->pos = st->pos;
        goto fail;
    }
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
    if (!table && plan_source(cs, r, source_rev(o), o->arena, err))
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
        RtKafkaProp props[WEIR_MAX_KAFKA_PROPERTIES];
        int np = rt_source_kafka_props(r, props, WEIR_MAX_KAFKA_PROPERTIES);
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

/* CREATE SOURCE / CREATE TABLE: the name must be free (42P07; IF NOT EXISTS: a notice). */
int cmd_create_source(Engine *e, const AstStmt *st, const char *sql, SrvResult *out, WError *err)
{
    int rc = 0;
    const AstCreateSource *cs = st->u.create_source;
    if (cat_find(e->cat, cs->name)) {
        if (cs->if_not_exists) {
            char msg[300];
            snprintf(msg, sizeof msg, "relation \"%s\" already exists, skipping", cs->name);
            srv_result_notice(out, msg);
        } else {
            rc = werr(err, SQLSTATE_DUPLICATE_TABLE, st->pos, "relation \"%s\" already exists", cs->name);
            return rc;
        }
    } else if ((rc = session_create_source(e, st, sql, NULL, err))) {
        return rc;
    }
    srv_result_complete(out, cs->obj == OBJ_TABLE ? "CREATE TABLE" : "CREATE SOURCE");
    return rc;
}

/* ALTER SOURCE|TABLE ... SET: the tag names what the object is. */
int cmd_alter_source(Engine *e, const AstStmt *st, SrvResult *out, WError *err)
{
    int rc = 0;
    if (!(rc = session_alter_source(e, st, false, err)))
        srv_result_complete(out, cat_find(e->cat, st->u.alter_source->name)->kind == CAT_TABLE ? "ALTER TABLE"
                                                                                           : "ALTER SOURCE");
    return rc;
}
