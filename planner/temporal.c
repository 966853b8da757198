/*
 * temporal.c: lowering temporal joins,
 *   FROM s [LEFT] JOIN t FOR SYSTEM_TIME AS OF s.ts ON s.k = t.pk   (event time)
 *   FROM s [LEFT] JOIN t FOR SYSTEM_TIME AS OF PROCTIME() ON ...    (processing time)
 *
 * Flink's semantics. The right side is a versioned relation: it needs a
 * primary key, and the ON condition must give every key column an equal
 * probe column, so a probe row names exactly one key whose version is
 * looked up (other conditions are a residual filter on the joined row).
 * Event time also needs watermarks on both sides: the AS OF expression
 * must be the probe's event-time column and the versioned side must carry
 * a watermark (a table with a WATERMARK clause, or a view passing one on);
 * its version time is that watermark column. The probe side must be
 * append-only (its rows are looked up once; a retraction could not find
 * what it joined). The output is append-only either way: a later version
 * never retracts an emitted row. In an ad hoc query, AS OF PROCTIME() is a
 * lookup in the current rows, done once: the regular join.
 */
#include "planner_int.h"

#include <string.h>


static bool is_proctime(const AstExpr *e)
{
    return e->kind == AST_FUNC && strcmp(e->text, "proctime") == 0 && ast_list_len(e->args) == 0;
}

/* The versioned side of an event-time join over a Kafka table: its topic,
 * read from the table's start position by this view's own source. The
 * table's changelog holds only each key's latest row when the view is
 * created, and an AS OF join needs every version the probe rows may fall
 * on: replaying the topic, as Flink does per query, gives the same answer
 * whenever the view is created. vs is the table's view-source node (its
 * schema is the topic's columns). */
static PlanNode *replay_topic(PlanCtx *p, const PlanNode *vs)
{
    const CatRelation *rel = vs->scan_rel;
    PlanNode *s = new_node(p, PN_SOURCE, NULL);
    s->source = rel;
    s->append_only = false; /* upsert tombstones and Debezium deletes */
    s->table_id = new_table(p);
    s->out = vs->out;
    PlanNode *w = new_node(p, PN_WATERMARK, s);
    w->out = s->out;
    w->append_only = false;
    w->wm_col = rel->wm_col;
    w->wm_expr = (PlanExpr *)rel->topic_wm_expr;
    w->wm_delay_us = rel->wm_delay_us;
    w->table_id = new_table(p);
    return w;
}

/* What a temporal join t must be before its sides are planned: AS OF
 * PROCTIME() in an ad hoc query, INNER or LEFT (0A000), with an ON condition
 * (42P17). 0, or -1 with err. */
int plan_temporal_check(PlanCtx *p, const AstTableRef *t)
{
    BindCtx *b = &p->b;
    const AstExpr *as_of = t->right->system_time;
    if (!p->streaming && !is_proctime(as_of))
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, as_of->pos,
                    "feature not supported: FOR SYSTEM_TIME AS OF an event time in an ad hoc query"),
               werr_hint(b->err, "An ad hoc query sees only the current rows of a table, not its history: use "
                                 "AS OF PROCTIME(), or the temporal join in a materialized view."), -1;
    /* As in Flink: a version of the table has no time of its own at which it
     * could be declared unmatched (probe rows can still arrive for it), so
     * there is no row to pad on that side. */
    if (t->join_type != JOIN_INNER && t->join_type != JOIN_LEFT)
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, t->pos,
                    "feature not supported: %s temporal joins (a temporal join is INNER or LEFT, as in Flink)",
                    t->join_type == JOIN_RIGHT ? "RIGHT" : t->join_type == JOIN_FULL ? "FULL" : "CROSS"),
               werr_hint(b->err, "Keep the stream on the left with JOIN or LEFT JOIN; to see the table's rows "
                                 "that no stream row matched, use a regular join (without FOR SYSTEM_TIME AS OF)."),
               -1;
    if (t->using_cols || !t->on)
        return werr(b->err, SQLSTATE_INVALID_OBJECT_DEFINITION, t->pos,
                    "Temporal Table Join requires an ON condition with an equality on the primary key of \"%s\"",
                    t->right->name);
    return 0;
}

/* The ON conjuncts of a temporal join (nl left columns first): an equality
 * of a left column with a key column of the versioned side (rk, npk of them)
 * sets that key's probe column lk[k]; the rest is the residual (NULL none). */
static PlanExpr *temporal_keys(BindCtx *b, PlanExpr **conds, int nc, int nl, int npk, int *lk, const int *rk)
{
    PlanExpr *residual = NULL;
    for (int i = 0; i < nc; i++) {
        PlanExpr *c = conds[i];
        bool used = false;
        if (c->kind == PE_CALL && c->fn == FN_EQ && c->n_args == 2 && c->args[0]->kind == PE_COL &&
            c->args[1]->kind == PE_COL && (c->args[0]->col < nl) != (c->args[1]->col < nl) &&
            c->args[0]->type == c->args[1]->type) {
            int lc = c->args[0]->col < nl ? c->args[0]->col : c->args[1]->col;
            int rc = (c->args[0]->col < nl ? c->args[1]->col : c->args[0]->col) - nl;
            for (int k = 0; k < npk && !used; k++)
                if (rk[k] == rc && lk[k] < 0) {
                    lk[k] = lc;
                    used = true;
                }
        }
        if (used)
            continue;
        if (!residual) {
            residual = c;
        } else {
            PlanExpr *a = arena_zalloc(b->a, sizeof *a);
            *a = (PlanExpr){.kind = PE_CALL, .fn = FN_AND, .type = TYPE_BOOL, .pos = c->pos, .n_args = 2,
                            .args = arena_alloc(b->a, sizeof(PlanExpr *) * 2)};
            a->args[0] = residual;
            a->args[1] = c;
            residual = a;
        }
    }
    return residual;
}

int plan_temporal_join(PlanCtx *p, const AstTableRef *t, const Rel *left, Rel *out)
{
    BindCtx *b = &p->b;
    const AstExpr *as_of = t->right->system_time;
    Rel l = *left, r;
    AstTableRef rt = *t->right;
    rt.system_time = NULL;
    int first_right = p->n_nodes;
    if (plan_relation_name(p, &rt, &r))
        return -1;
    const char *rname = t->right->name;
    PlanNode *rn = r.node;
    if (rn->kind == PN_WATERMARK)
        rn = rn->inputs[0];
    if (!p->streaming)
        rn = rn->kind == PN_VIEW_SCAN ? rn : NULL;
    else if (rn->kind != PN_VIEW_SOURCE)
        rn = NULL;
    if (p->streaming && !l.node->append_only)
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, t->pos,
                    "feature not supported: a temporal join whose probe side (left) is a changelog"),
               werr_hint(b->err, "The left side must be append-only: a source, an append-only table or view."), -1;
    if (!rn || !r.node->n_keys || r.node->dup_keys)
        return werr(b->err, SQLSTATE_INVALID_OBJECT_DEFINITION, t->right->pos,
                    "Temporal Table Join requires primary key in versioned table, but no primary key can be found "
                    "for \"%s\"", rname),
               werr_hint(b->err, "The versioned side must be a table with a PRIMARY KEY (CREATE TABLE ... PRIMARY KEY) "
                                 "or a materialized view with a key, such as a GROUP BY view."), -1;
    /* The pk of a keyless view is its hidden row id: no user condition can name it. */
    for (int k = 0; k < r.node->n_keys; k++)
        if (r.scope.cols[r.node->keys[k]].hidden)
            return werr(b->err, SQLSTATE_INVALID_OBJECT_DEFINITION, t->right->pos,
                        "Temporal Table Join requires primary key in versioned table, but \"%s\" has none", rname);
    int nl = l.scope.n, nr = r.scope.n;
    bool proc = is_proctime(as_of);
    int ltime = -1, rtime = -1;
    if (!proc) {
        PlanExpr *e = bind_expr(b, &l.scope, as_of);
        if (!e)
            return -1;
        if (e->kind != PE_COL || l.scope.cols[e->col].role != ROLE_EVENT_TIME)
            return werr(b->err, SQLSTATE_INVALID_OBJECT_DEFINITION, as_of->pos,
                        "FOR SYSTEM_TIME AS OF must be the left side's event-time column (one with a WATERMARK) or "
                        "PROCTIME()");
        if (r.node->wm_col < 0)
            return werr(b->err, SQLSTATE_INVALID_OBJECT_DEFINITION, t->right->pos,
                        "an event-time temporal join needs a versioned table with a watermark, and \"%s\" has none",
                        rname),
                   werr_hint(b->err, "Declare WATERMARK FOR its time column in CREATE TABLE, or join FOR SYSTEM_TIME "
                                     "AS OF PROCTIME() for a lookup in its current rows."), -1;
        ltime = e->col;
        rtime = r.node->wm_col;
    }
    Scope sc;
    alloc_scope(b->a, &sc, nl + nr);
    memcpy(sc.cols, l.scope.cols, sizeof(ScopeCol) * (size_t)nl);
    memcpy(sc.cols + nl, r.scope.cols, sizeof(ScopeCol) * (size_t)nr);
    PlanExpr *on = bind_expr(b, &sc, t->on);
    if (!on || !(on = coerce_expr(b, on, TYPE_BOOL, t->on->pos))) {
        if (!b->err->set)
            werr(b->err, SQLSTATE_DATATYPE_MISMATCH, t->on->pos, "argument of JOIN/ON must be type boolean");
        return -1;
    }
    int nc;
    PlanExpr **conds = conjuncts(on, b->a, &nc);
    int npk = r.node->n_keys;
    int *lk = arena_alloc(b->a, sizeof(int) * (size_t)npk), *rk = arena_alloc(b->a, sizeof(int) * (size_t)npk);
    for (int k = 0; k < npk; k++) {
        lk[k] = -1;
        rk[k] = r.node->keys[k];
    }
    PlanExpr *residual = temporal_keys(b, conds, nc, nl, npk, lk, rk);
    for (int k = 0; k < npk; k++)
        if (lk[k] < 0)
            return werr(b->err, SQLSTATE_INVALID_OBJECT_DEFINITION, t->on->pos,
                        "Temporal Table Join requires an equality condition on the primary key of \"%s\": column "
                        "\"%s\" is not equal to a column of the left side",
                        rname, r.scope.cols[rk[k]].name);
    if (!p->streaming) {
        /* Once, now: a lookup in the current rows is the regular join. */
        Rel res;
        if (make_join(p, t->join_type, t->on, NULL, &l, &r, t->pos, &res))
            return -1;
        *out = res;
        return 0;
    }
    PlanNode *right = r.node;
    if (!proc && rn->scan_rel->topic_wm_expr && p->n_nodes == first_right + 1) {
        p->n_nodes = first_right; /* the view source planned above is not used */
        right = replay_topic(p, rn);
    }
    PlanNode *j = new_node(p, PN_TEMPORAL_JOIN, l.node);
    j->n_inputs = 2;
    j->inputs[1] = right;
    j->join_type = t->join_type;
    j->proc_time = proc;
    j->n_join_keys = npk;
    j->left_keys = lk;
    j->right_keys = rk;
    j->residual = residual;
    j->left_time_col = ltime;
    j->right_time_col = rtime;
    j->table_id = new_table(p);
    j->table_id2 = new_table(p);
    j->append_only = true;
    /* Rows go out in the probe side's time: its watermark carries on. The
     * versioned side's time is just a column of the output. */
    j->wm_col = l.node->wm_col;
    for (int i = nl; i < nl + nr; i++)
        if (sc.cols[i].role == ROLE_EVENT_TIME)
            sc.cols[i].role = ROLE_NONE;
    schema_from_scope(b->a, &j->out, &sc);
    out->node = j;
    out->scope = sc;
    return 0;
}
