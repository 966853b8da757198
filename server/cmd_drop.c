/*
 * cmd_drop.c: DROP and ALTER ... RENAME TO, with the dependency checks
 * they share (what reads an object).
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

/* ---- DROP ---------------------------------------------------------------------------- */

static bool view_reads(const CatObj *v, const CatObj *o)
{
    if (v->kind == CAT_SINK)
        return v->sink.from == o;
    if (v->kind != CAT_VIEW || !v->flow.plan)
        return false;
    for (int i = 0; i < v->flow.plan->n_nodes; i++) {
        const PlanNode *n = v->flow.plan->nodes[i];
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
int cmd_rename(Engine *e, const AstStmt *st, SrvResult *out, WError *err)
{
    const AstAlterRename *r = st->u.rename;
    CatKind want = obj_kind(r->obj);
    CatObj *o = cat_find(e->cat, r->name);
    if (!o) {
        if (r->if_exists) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s \"%s\" does not exist, skipping", cmd_kind_word(want), r->name);
            srv_result_notice(out, msg);
            return 0;
        }
        return werr(err, SQLSTATE_UNDEFINED_TABLE, st->pos, "%s \"%s\" does not exist", cmd_kind_word(want), r->name);
    }
    if (o->kind != want)
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, st->pos, "\"%s\" is not a %s", r->name, cmd_kind_word(want)),
               werr_hint(err, "Use ALTER %s to rename a %s.",
                         o->kind == CAT_SOURCE ? "SOURCE" : o->kind == CAT_VIEW ? "MATERIALIZED VIEW"
                         : o->kind == CAT_TABLE ? "TABLE" : "SINK",
                         cmd_kind_word(o->kind)), -1;
    if (o->view.late_of)
        return werr(err, SQLSTATE_DEPENDENT_OBJECTS, st->pos, "\"%s\" holds the late rows of materialized view %s",
                    r->name, o->view.late_of->name),
               werr_hint(err, "Its name is the view's LATE ROWS INTO clause."), -1;
    if (o->view.sink_query)
        return werr(err, SQLSTATE_DEPENDENT_OBJECTS, st->pos, "\"%s\" is the query of sink %s", r->name,
                    o->view.sink_owner ? o->view.sink_owner->name : "?"),
               werr_hint(err, "Its name follows the sink's."), -1;
    if (cat_find(e->cat, r->new_name))
        return werr(err, SQLSTATE_DUPLICATE_TABLE, r->new_pos, "relation \"%s\" already exists", r->new_name);
    CAT_FOREACH(e->cat, CAT_ANY, v) {
        if (v != o && view_reads(v, o)) {
            werr(err, SQLSTATE_DEPENDENT_OBJECTS, st->pos, "cannot rename %s %s because other objects depend on it",
                 cmd_kind_word(o->kind), o->name);
            werr_detail(err, "%s %s depends on %s %s", cmd_kind_word(v->kind), v->name, cmd_kind_word(o->kind), o->name);
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

int cmd_drop_one(Engine *e, const AstDrop *d, const char *name, int pos, SrvResult *out, WError *err)
{
    CatObj *o = cat_find(e->cat, name);
    CatKind want = d->obj == OBJ_SOURCE || d->obj == OBJ_STREAM ? CAT_SOURCE
                 : d->obj == OBJ_MATERIALIZED_VIEW || d->obj == OBJ_VIEW ? CAT_VIEW
                 : d->obj == OBJ_SINK ? CAT_SINK : CAT_TABLE;
    if (!o || o->kind != want) {
        if (o && o->kind != want) {
            werr(err, SQLSTATE_WRONG_OBJECT_TYPE, pos, "\"%s\" is not a %s", name, cmd_kind_word(want));
            werr_hint(err, "Use DROP %s to remove a %s.",
                      o->kind == CAT_SOURCE ? "SOURCE" : o->kind == CAT_VIEW ? "MATERIALIZED VIEW"
                      : o->kind == CAT_TABLE ? "TABLE" : "SINK",
                      cmd_kind_word(o->kind));
            return -1;
        }
        if (d->if_exists) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s \"%s\" does not exist, skipping", cmd_kind_word(want), name);
            srv_result_notice(out, msg);
            return 0;
        }
        return werr(err, SQLSTATE_UNDEFINED_TABLE, pos, "%s \"%s\" does not exist", cmd_kind_word(want), name);
    }
    if (o->view.late_of) {
        werr(err, SQLSTATE_DEPENDENT_OBJECTS, pos, "\"%s\" holds the late rows of materialized view %s", name,
             o->view.late_of->name);
        werr_hint(err, "It is dropped with the view.");
        return -1;
    }
    if (o->view.sink_query) {
        werr(err, SQLSTATE_DEPENDENT_OBJECTS, pos, "\"%s\" is the query of sink %s", name,
             o->view.sink_owner ? o->view.sink_owner->name : "?");
        werr_hint(err, "It is dropped with the sink.");
        return -1;
    }
    for (bool again = true; again;) {
        again = false;
        CAT_FOREACH(e->cat, CAT_ANY, v) {
            if (v == o || !view_reads(v, o))
                continue;
            /* A sink's query is the sink, as far as the user can see. */
            if (v->view.sink_query && v->view.sink_owner)
                v = v->view.sink_owner;
            if (!d->cascade) {
                werr(err, SQLSTATE_DEPENDENT_OBJECTS, pos, "cannot drop %s %s because other objects depend on it",
                     cmd_kind_word(o->kind), name);
                werr_detail(err, "%s %s depends on %s %s", cmd_kind_word(v->kind), v->name, cmd_kind_word(o->kind), name);
                werr_hint(err, "Use DROP ... CASCADE to drop the dependent objects too.");
                return -1;
            }
            char msg[300];
            snprintf(msg, sizeof msg, "drop cascades to %s %s", cmd_kind_word(v->kind), v->name);
            srv_result_notice(out, msg);
            AstDrop dv = {.obj = v->kind == CAT_SINK ? OBJ_SINK : OBJ_MATERIALIZED_VIEW, .cascade = true};
            if (cmd_drop_one(e, &dv, v->name, pos, out, err))
                return -1;
            again = true; /* the list changed: start over */
            break;
        }
    }
    /* A sink AS query takes its query's view (and that view's state) along. */
    CatObj *q = o->kind == CAT_SINK && o->sink.from && o->sink.from->view.sink_query ? o->sink.from : NULL;
    if (engine_remove_object(e, o, err))
        return -1;
    return q ? engine_remove_object(e, q, err) : 0;
}

/* DROP: each name in turn; the first failure stops the statement. */
int cmd_drop(Engine *e, const AstStmt *st, SrvResult *out, WError *err)
{
    int rc = 0;
    const AstDrop *d = st->u.drop;
    for (int i = 0; i < ast_list_len(d->names) && !rc; i++)
        rc = cmd_drop_one(e, d, AST_AT(d->names, i), st->pos, out, err);
    if (!rc)
        srv_result_complete(out, d->obj == OBJ_SOURCE || d->obj == OBJ_STREAM ? "DROP SOURCE"
                                 : d->obj == OBJ_MATERIALIZED_VIEW ? "DROP MATERIALIZED VIEW"
                                 : d->obj == OBJ_VIEW ? "DROP VIEW"
                                 : d->obj == OBJ_SINK ? "DROP SINK" : "DROP TABLE");
    return rc;
}
