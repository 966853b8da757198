/*
 * cmd_query.c: SELECT (an ad hoc query over the views' current rows) and
 * EXPLAIN.
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

int cmd_select(Engine *e, const AstStmt *st, bool describe_only, SrvResult *out, WError *err)
{
    Arena *a = arena_new(0);
    PlanCatCtx pcx;
    PlanCatalog cat = engine_plan_catalog(e, &pcx, NULL, false, true, a);
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

int cmd_explain(Engine *e, Session *s, const AstStmt *st, SrvResult *out, WError *err)
{
    const AstExplain *ex = st->u.explain;
    bool json = false, analyze = false;
    for (int i = 0; i < ast_list_len(ex->options); i++) {
        const AstOption *o = AST_AT(ex->options, i);
        if (strcasecmp(o->key, "format") == 0 && o->value && strcasecmp(o->value, "json") == 0)
            json = true;
        else if (strcasecmp(o->key, "format") == 0 && o->value && strcasecmp(o->value, "text") == 0)
            json = false;
        else if (strcasecmp(o->key, "analyze") == 0)
            analyze = !o->value || !(strcasecmp(o->value, "false") == 0 || strcasecmp(o->value, "off") == 0 ||
                                     strcmp(o->value, "0") == 0);
        else if (strcasecmp(o->key, "verbose") != 0 && strcasecmp(o->key, "costs") != 0)
            return werr(err, SQLSTATE_SYNTAX_ERROR, o->pos, "unrecognized EXPLAIN option \"%s\"", o->key);
    }
    /* ANALYZE measures a running view; a statement is not run by EXPLAIN. */
    if (analyze && !ex->view) {
        werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: EXPLAIN ANALYZE of a statement");
        werr_hint(err, "EXPLAIN ANALYZE MATERIALIZED VIEW v shows the live figures of a running view; "
                       "EXPLAIN without ANALYZE shows the plan of a statement");
        return -1;
    }
    Arena *a = arena_new(0);
    Buf b = BUF_INIT;
    int rc = 0;
    PlanCatCtx pcx;
    PlanCatalog cat = engine_plan_catalog(e, &pcx, NULL, false, true, a);
    if (ex->view) {
        rc = srv_explain_view(e, ex->view, st->pos, analyze, json, &b, err);
    } else if (ex->stmt->kind == STMT_CREATE_VIEW) {
        PlanViewOptions opt = {.name = ex->stmt->u.create_view->name, .allow_unbounded = session_allow_unbounded(s),
                               .parallelism = session_parallelism(s), .plan_rev = PLAN_REV_CURRENT,
                               .cluster = e->rt_cluster != NULL};
        PlanView *v = plan_view(ex->stmt->u.create_view, &cat, &opt, a, err);
        if (v)
            plan_explain_view(v, json, &b);
        else
            rc = -1;
    } else if (ex->stmt->kind == STMT_CREATE_SINK && ex->stmt->u.create_sink->query) {
        /* The plan of the view the sink would run, under the name it would get. */
        const AstCreateSink *cs = ex->stmt->u.create_sink;
        char *vname = cmd_sink_query_name(cs->name);
        AstCreateView cv;
        AstStmt vst;
        cmd_sink_query_stmt(cs, ex->stmt, arena_strdup(a, vname), &cv, &vst);
        free(vname);
        PlanViewOptions opt = {.name = cv.name, .allow_unbounded = session_allow_unbounded(s), .plan_rev = PLAN_REV_CURRENT,
                               .cluster = e->rt_cluster != NULL};
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
        cmd_one_text_column(out, "QUERY PLAN");
        if (json) {
            const char *v[1] = {b.data};
            cmd_text_row(out, 1, v);
        } else {
            char *line = b.data;
            while (line && *line) {
                char *nl = strchr(line, '\n');
                if (nl)
                    *nl = 0;
                const char *v[1] = {line};
                cmd_text_row(out, 1, v);
                line = nl ? nl + 1 : NULL;
            }
        }
        srv_result_complete(out, "EXPLAIN");
    }
    buf_free(&b);
    arena_free(a);
    return rc;
}
