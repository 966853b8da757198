/*
 * cmd_view.c: CREATE MATERIALIZED VIEW: plan the query, start its
 * dataflow, add it to the catalog (also a CREATE SINK ... AS query's view).
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
#include "log.h"

/* ---- CREATE MATERIALIZED VIEW --------------------------------------------------------- */

static void rel_from_view(CatObj *o)
{
    CatRelation *r = &o->rel;
    PlanView *v = o->flow.plan;
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
    r->distributed = v->distributed;
    r->table_id = v->root->table_id;
}

int cmd_view_build(Engine *e, Session *s, const AstStmt *st, const char *sql, CatObj *replay, WError *err)
{
    const AstCreateView *cv = st->u.create_view;
    CatObj *o = replay ? replay : xcalloc(1, sizeof *o);
    if (!replay) {
        o->name = xstrdup(cv->name);
        o->sql = xstrdup(sql);
    }
    o->kind = CAT_VIEW;
    o->arena = arena_new(0);
    PlanCatCtx pcx;
    PlanCatalog cat = engine_plan_catalog(e, &pcx, o, replay != NULL, false, o->arena);
    /* At start, a view is rebuilt as it was accepted (with or without the opt-in). */
    /* ...and with the parallelism its session had (the catalog keeps it). */
    if (!replay) {
        o->view.parallelism = session_parallelism(s);
        o->view.plan_rev = PLAN_REV_CURRENT;
    } else if (o->view.plan_rev > PLAN_REV_CURRENT) {
        werr(err, SQLSTATE_NOT_SUPPORTED, 0,
             "feature not supported: view \"%s\" was created by a newer weir (planner revision %d, this one knows %d)",
             o->name, o->view.plan_rev, PLAN_REV_CURRENT);
        goto fail;
    }
    PlanViewOptions opt = {.name = o->name, .allow_unbounded = replay || session_allow_unbounded(s),
                           .parallelism = o->view.parallelism, .plan_rev = o->view.plan_rev,
                           .cluster = e->rt_cluster != NULL};
    o->flow.plan = plan_view(cv, &cat, &opt, o->arena, err);
    if (!o->flow.plan || engine_plan_ids_ok(&pcx, err))
        goto fail;
    if (!replay && stor_next_id(e->stor, &o->id, err))
        goto fail;
    rel_from_view(o);
    CatObj *late = NULL;
    if (o->flow.plan->late_name) {
        /* LATE ROWS INTO: a queryable relation owned by the view, rebuilt from its plan at start. */
        if (cat_find(e->cat, o->flow.plan->late_name)) {
            werr(err, SQLSTATE_DUPLICATE_TABLE, cv->query_pos, "relation \"%s\" already exists", o->flow.plan->late_name);
            goto fail;
        }
        late = xcalloc(1, sizeof *late);
        late->name = xstrdup(o->flow.plan->late_name);
        late->sql = xstrdup("");
        late->kind = CAT_VIEW;
        late->view.late_of = o;
        late->arena = arena_new(0);
        CatRelation *lr = &late->rel;
        const PlanSchema *ls = &o->flow.plan->late_schema;
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
        lr->table_id = o->flow.plan->late_table_id;
    }
    if (rt_dataflow_open(&e->rt, o->flow.plan, &o->flow.df, err)) {
        if (!replay)
            goto fail;
        /* At start a broker may still be coming up: keep the view, the engine retries. */
        wlog_warn("cmd_view", "view %s cannot start yet: %s", o->name, err->msg);
        snprintf(o->flow.stop_error, sizeof o->flow.stop_error, "%s", err->msg);
        /* Its topic was deleted or shrunk: that waits for RESUME, not the retry. */
        o->flow.failed = strcmp(err->sqlstate, RT_SQLSTATE_SOURCE_LOST) == 0;
        werr_clear(err);
    } else {
        rt_dataflow_set_name(o->flow.df, o->name);
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
        rt_dataflow_close(o->flow.df);
        o->flow.df = NULL;
        for (int i = 0; i < o->n_table_ids; i++)
            stor_table_drop(e->stor, o->table_ids[i], &ignored);
        cat_obj_free(o);
    } else {
        rt_dataflow_close(o->flow.df);
        o->flow.df = NULL;
        arena_free(o->arena);
        o->arena = NULL;
    }
    return -1;
}

/*
 * The view a CREATE SINK ... AS query runs: a CREATE MATERIALIZED VIEW of
 * the sink's query named cmd_sink_query_name(), built in *cv and *vst (which
 * borrow cs). Planning it as an ordinary view gives it the same key, state
 * bounds and checkpointing as any view, and the sink attaches to it as a
 * sink FROM a view does, so the key and exactly-once rules are the same.
 */
void cmd_sink_query_stmt(const AstCreateSink *cs, const AstStmt *st, const char *name, AstCreateView *cv,
                            AstStmt *vst)
{
    *cv = (AstCreateView){.materialized = true, .name = name, .query = cs->query, .query_pos = cs->query->pos};
    *vst = (AstStmt){.kind = STMT_CREATE_VIEW, .pos = st->pos, .text_start = st->text_start,
                     .text_end = st->text_end, .u.create_view = cv};
}

/* The internal view's name: the sink's name as created (kept across ALTER
 * SINK ... RENAME, like the sink's identity in its target) plus "$query".
 * The caller frees it. */
char *cmd_sink_query_name(const char *sink)
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
        cmd_sink_query_stmt(st->u.create_sink, st, replay->name, &cv, &vst);
        replay->view.sink_query = true;
        return cmd_view_build(e, NULL, &vst, sql, replay, err);
    }
    return cmd_view_build(e, NULL, st, sql, replay, err);
}

/* CREATE MATERIALIZED VIEW: the name must be free (42P07; IF NOT EXISTS: a notice). */
int cmd_create_view(Engine *e, Session *s, const AstStmt *st, const char *sql, SrvResult *out, WError *err)
{
    int rc = 0;
    const AstCreateView *cv = st->u.create_view;
    // CREATE [OR REPLACE] VIEW and CREATE OR REPLACE MATERIALIZED VIEW are 0A000 whether or
    // not the name exists: answering 42P07 (or, with IF NOT EXISTS, success) would tell a
    // user that the statement is supported and only the name is in the way.
    if (cv->materialized && !cv->or_replace && cat_find(e->cat, cv->name)) {
        if (cv->if_not_exists) {
            char msg[300];
            snprintf(msg, sizeof msg, "relation \"%s\" already exists, skipping", cv->name);
            srv_result_notice(out, msg);
        } else {
            rc = werr(err, SQLSTATE_DUPLICATE_TABLE, st->pos, "relation \"%s\" already exists", cv->name);
            return rc;
        }
    } else if ((rc = cmd_view_build(e, s, st, sql, NULL, err))) {
        return rc;
    }
    e->dirty = true;
    srv_result_complete(out, cv->materialized ? "CREATE MATERIALIZED VIEW" : "CREATE VIEW");
    return rc;
}

/* ALTER MATERIALIZED VIEW|TABLE ... RESUME (42P01, 42809). */
int cmd_resume_view(Engine *e, const AstStmt *st, SrvResult *out, WError *err)
{
    int rc = 0;
    CatObj *v = cat_find(e->cat, st->u.resume_view);
    if (!v) {
        rc = werr(err, SQLSTATE_UNDEFINED_TABLE, st->pos, "materialized view \"%s\" does not exist", st->u.resume_view);
        return rc;
    }
    if ((v->kind != CAT_VIEW && v->kind != CAT_TABLE) || v->view.late_of || !v->flow.plan) {
        rc = werr(err, SQLSTATE_WRONG_OBJECT_TYPE, st->pos, "\"%s\" is not a materialized view or a table", v->name);
        return rc;
    }
    if (!(rc = engine_resume_view(e, v, err)))
        srv_result_complete(out, v->kind == CAT_TABLE ? "ALTER TABLE" : "ALTER MATERIALIZED VIEW");
    return rc;
}
