/*
 * plan_scan.c: the scan/source kind of the bound tree. A name in FROM is a
 * CTE (planned again at each reference, through PlanCtx.cte_ref), a view or
 * table (ViewSource in a view, ViewScan in an ad hoc query), or a source
 * (Source, then a Project computing its computed columns, then Watermark).
 */
#include "planner_int.h"

#include <string.h>
#include <strings.h>

int plan_relation_name(PlanCtx *p, const AstTableRef *t, Rel *out)
{
    BindCtx *b = &p->b;
    CteEnv *ce = find_cte(p, t->name);
    if (ce)
        return p->cte_ref(p, t, ce, out);
    const CatRelation *r = b->cat->lookup(b->cat->ctx, t->name);
    if (!r)
        return werr(b->err, SQLSTATE_UNDEFINED_TABLE, t->pos, "relation \"%s\" does not exist", t->name);
    if (t->system_time)
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, t->system_time->pos,
                    "feature not supported: FOR SYSTEM_TIME AS OF outside the right side of a JOIN"),
               werr_hint(b->err, "A temporal join is FROM s JOIN t FOR SYSTEM_TIME AS OF s.ts ON s.k = t.pk."), -1;
    const char *qual = t->alias ? t->alias : r->name;
    PlanNode *n;
    if (r->kind == CAT_SINK)
        return werr(b->err, SQLSTATE_WRONG_OBJECT_TYPE, t->pos, "\"%s\" is a sink, not a relation", t->name);
    if (r->kind == CAT_SYSTEM) {
        if (p->streaming)
            return werr(b->err, SQLSTATE_NOT_SUPPORTED, t->pos,
                        "feature not supported: a materialized view over system view \"%s\"", t->name);
        n = new_node(p, PN_VALUES, NULL);
        n->n_rows = r->n_rows;
        n->rows = r->rows;
        n->append_only = true;
    } else if (p->streaming && (r->kind == CAT_VIEW || r->kind == CAT_TABLE)) {
        if (!r->materialized)
            return werr(b->err, SQLSTATE_NOT_SUPPORTED, t->pos,
                        "feature not supported: a view over non-materialized view \"%s\"", t->name);
        /* A view over a view (or a table) reads its changelog: its rows when
         * created, then every change. */
        n = new_node(p, PN_VIEW_SOURCE, NULL);
        n->scan_rel = r;
        n->append_only = r->append_only;
        n->table_id = new_table(p);
        n->dup_keys = r->counted;
    } else if (p->streaming) {
        if (r->kind != CAT_SOURCE)
            return werr(b->err, SQLSTATE_NOT_SUPPORTED, t->pos,
                        "feature not supported: a materialized view over %s \"%s\"",
                        r->kind == CAT_TABLE ? "table" : "relation", t->name);
        n = new_node(p, PN_SOURCE, NULL);
        n->source = r;
        n->append_only = true;
        n->table_id = new_table(p);
    } else {
        if (r->kind == CAT_SOURCE)
            return werr(b->err, SQLSTATE_NOT_SUPPORTED, t->pos,
                        "feature not supported: querying source \"%s\" directly", t->name),
                   werr_hint(b->err, "Create a materialized view over the source and query the view."), -1;
        if (!r->materialized)
            return werr(b->err, SQLSTATE_NOT_SUPPORTED, t->pos, "feature not supported: querying non-materialized view \"%s\"",
                        t->name);
        n = new_node(p, PN_VIEW_SCAN, NULL);
        n->scan_rel = r;
        n->append_only = true;
    }
    alloc_schema(b->a, &n->out, r->n_cols);
    alloc_scope(b->a, &out->scope, r->n_cols);
    for (int i = 0; i < r->n_cols; i++) {
        n->out.names[i] = r->col_names[i];
        n->out.types[i] = r->col_types[i];
        out->scope.cols[i] = (ScopeCol){.qualifier = qual, .name = r->col_names[i], .type = r->col_types[i],
                                        .hidden = r->col_hidden && r->col_hidden[i]};
        n->out.hidden[i] = out->scope.cols[i].hidden;
    }
    if (n->kind == PN_SOURCE && r->col_gen) {
        /* Computed columns: the source fills the columns read from the
         * records (the rest NULL) and this projection computes the others,
         * before the watermark (which may be on a computed column). */
        PlanNode *pr = new_node(p, PN_PROJECT, n);
        pr->out = n->out;
        pr->n_exprs = r->n_cols;
        pr->exprs = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)r->n_cols);
        for (int i = 0; i < r->n_cols; i++)
            pr->exprs[i] = r->col_gen[i] ? (PlanExpr *)r->col_gen[i] : make_col(b, i, r->col_types[i]);
        n = pr;
    }
    if ((n->kind == PN_VIEW_SCAN || n->kind == PN_VIEW_SOURCE) && r->n_pk) {
        n->n_keys = r->n_pk;
        n->keys = (int *)r->pk;
        n->dup_keys = r->counted;
    }
    if (n->kind == PN_VIEW_SOURCE && r->wm_col >= 0) {
        /* The upstream view passes its watermark on (e.g. on window_end). */
        n->wm_col = r->wm_col;
        out->scope.cols[r->wm_col].role = ROLE_EVENT_TIME;
    }
    out->node = n;
    if (p->streaming && r->wm_col >= 0 && r->wm_expr) {
        PlanNode *w = new_node(p, PN_WATERMARK, n);
        w->out = n->out;
        w->wm_col = r->wm_col;
        w->wm_expr = (PlanExpr *)r->wm_expr;
        w->wm_delay_us = r->wm_delay_us;
        w->table_id = new_table(p);
        out->scope.cols[r->wm_col].role = ROLE_EVENT_TIME;
        out->node = w;
    }
    return 0;
}
