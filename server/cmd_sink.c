/*
 * cmd_sink.c: CREATE SINK: FROM a view, or AS a query (a hidden view
 * first, then the sink FROM it).
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

int cmd_sink_build(Engine *e, Session *s, const AstStmt *st, const char *sql, CatObj *replay, WError *err);

int session_create_sink(Engine *e, const AstStmt *st, const char *sql, CatObj *replay, WError *err)
{
    return cmd_sink_build(e, NULL, st, sql, replay, err);
}

/* CREATE SINK ... AS query: its view first (at start, already restored
 * from its own catalog entry), then the sink from it. A failure removes
 * the view again. */
static int create_sink_as(Engine *e, Session *s, const AstStmt *st, const char *sql, CatObj *replay, WError *err)
{
    const AstCreateSink *cs = st->u.create_sink;
    char *vname = cmd_sink_query_name(cs->name);
    CatObj *v = cat_find(e->cat, vname);
    int rc = 0;
    if (replay) {
        if (!v || !v->view.sink_query || v->view.sink_owner)
            rc = werr(err, SQLSTATE_INTERNAL, st->pos, "the query of sink \"%s\" was not restored", cs->name);
    } else if (v) {
        rc = werr(err, SQLSTATE_DUPLICATE_TABLE, st->pos,
                  "relation \"%s\" already exists (the name of the query of sink \"%s\")", vname, cs->name);
    } else {
        AstCreateView cv;
        AstStmt vst;
        cmd_sink_query_stmt(cs, st, vname, &cv, &vst);
        if (!(rc = cmd_view_build(e, s, &vst, sql, NULL, err))) {
            v = cat_find(e->cat, vname);
            v->view.sink_query = true;
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
    if (cmd_sink_build(e, s, &fst, sql, replay, err)) {
        if (!replay) {
            WError ignored = {0};
            engine_remove_object(e, v, &ignored);
        }
        return -1;
    }
    v->view.sink_owner = replay ? replay : cat_find(e->cat, cs->name);
    return 0;
}

int cmd_sink_build(Engine *e, Session *s, const AstStmt *st, const char *sql, CatObj *replay, WError *err)
{
    const AstCreateSink *cs = st->u.create_sink;
    if (!cs->from_name)
        return create_sink_as(e, s, st, sql, replay, err);
    CatObj *v = cat_find(e->cat, cs->from_name);
    if (!v || (v->view.sink_query && !cs->query))
        return werr(err, SQLSTATE_UNDEFINED_TABLE, st->pos, "relation \"%s\" does not exist", cs->from_name);
    if (v->view.late_of)
        return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: a sink from a late-rows relation");
    if (v->kind != CAT_VIEW && v->kind != CAT_TABLE)
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, st->pos, "a sink reads a materialized view or a table; \"%s\" is a %s",
                    v->name, cmd_kind_word(v->kind)),
               werr_hint(err, "Create a materialized view over the source and sink from it."), -1;
    if (!replay)
        CAT_FOREACH(e->cat, CAT_ANY, o)
            if (o->kind == CAT_SINK && o->sink.spec.name && !strcmp(o->sink.spec.name, cs->name))
                return werr(err, SQLSTATE_DUPLICATE_OBJECT, st->pos,
                            "sink \"%s\" still delivers under the name \"%s\" it was created with", o->name,
                            cs->name),
                       werr_hint(err, "A sink's target records its progress by that name; choose another one."), -1;
    CatObj *o = replay ? replay : xcalloc(1, sizeof *o);
    if (!replay) {
        o->name = xstrdup(cs->name);
        o->sql = xstrdup(sql);
    }
    o->kind = CAT_SINK;
    o->sink.from = v;
    o->arena = arena_new(0);
    o->rel.kind = CAT_SINK;
    o->rel.name = o->name;
    RtSinkSpec *sp = &o->sink.spec;
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
        werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: ENCODE %s on a sink", cs->encode);
        if (!strcasecmp(cs->encode, "avro"))
            werr_hint(err, "Sinks write JSON (ENCODE JSON); Avro is read by sources only, for now.");
        goto fail;
    }
    /* The sink's columns: the view's visible columns, in order. */
    const CatRelation *vr = &v->rel;
    int nv = 0;
    for (int i = 0; i < vr->n_cols; i++)
        nv += !(vr->col_hidden && vr->col_hidden[i]);
    const char **names = arena_alloc(o->arena, sizeof(char *) * (size_t)(nv ? nv : 1));
    TypeId *types = arena_alloc(o->arena, sizeof(TypeId) * (size_t)(nv ? nv : 1));
    o->sink.view_cols = arena_alloc(o->arena, sizeof(int) * (size_t)(nv ? nv : 1));
    for (int i = 0, k = 0; i < vr->n_cols; i++) {
        if (vr->col_hidden && vr->col_hidden[i])
            continue;
        names[k] = vr->col_names[i];
        types[k] = vr->col_types[i];
        o->sink.view_cols[k++] = i;
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
                    if (o->sink.view_cols[j] == vr->pk[i])
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
    if (v->flow.df && rt_dataflow_attach_sink(v->flow.df, sp, o->sink.view_cols, o->table_ids[0], &o->sink.rt, err))
        goto fail;
    if (engine_add_object(e, o, !replay, err)) {
        if (o->sink.rt)
            rt_dataflow_detach_sink(v->flow.df, o->sink.rt);
        o->sink.rt = NULL;
        goto fail;
    }
    return 0;
fail:
    if (!replay) {
        WError ignored = {0};
        for (int i = 0; i < o->n_table_ids; i++)
            stor_table_drop(e->stor, o->table_ids[i], &ignored);
        o->sink.from = NULL;
        cat_obj_free(o);
    } else {
        arena_free(o->arena);
        o->arena = NULL;
    }
    return -1;
}

/* CREATE SINK: the name must be free (42710; IF NOT EXISTS: a notice). */
int cmd_create_sink(Engine *e, Session *s, const AstStmt *st, const char *sql, SrvResult *out, WError *err)
{
    int rc = 0;
    const AstCreateSink *cs = st->u.create_sink;
    if (cat_find(e->cat, cs->name)) {
        if (cs->if_not_exists) {
            char msg[300];
            snprintf(msg, sizeof msg, "sink \"%s\" already exists, skipping", cs->name);
            srv_result_notice(out, msg);
        } else {
            rc = werr(err, SQLSTATE_DUPLICATE_OBJECT, st->pos, "relation \"%s\" already exists", cs->name);
            return rc;
        }
    } else if ((rc = cmd_sink_build(e, s, st, sql, NULL, err))) {
        return rc;
    }
    e->dirty = true; /* the next checkpoint seals the sink's first batch: the view's rows */
    srv_result_complete(out, "CREATE SINK");
    return rc;
}
