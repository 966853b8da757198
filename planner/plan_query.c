/*
 * plan_query.c: the query level above one SELECT: WITH (common table
 * expressions) and the set operations (UNION [ALL], INTERSECT [ALL],
 * EXCEPT [ALL]). plan_select() here is the entry for every query and
 * subquery; a single SELECT is lowered by plan_select_core() in plan.c.
 */
#include "planner_int.h"
#include "weir_limits.h"

#include <stdlib.h>
#include <string.h>

/* ---- WITH ------------------------------------------------------------------------ */

static int visible_cols(PlanCtx *p, const Rel *r, int **vis);

/* ---- WITH RECURSIVE (ad hoc queries) ------------------------------------------- */

static bool expr_refers(const AstExpr *e, const char *name);
bool select_refers(const AstSelect *s, const char *name);

static bool tref_refers(const AstTableRef *t, const char *name)
{
    if (!t)
        return false;
    switch (t->kind) {
    case TREF_NAME: return strcmp(t->name, name) == 0;
    case TREF_SUBQUERY: return select_refers(t->subquery, name);
    case TREF_JOIN: return tref_refers(t->left, name) || tref_refers(t->right, name) || expr_refers(t->on, name);
    case TREF_WINDOW: return tref_refers(t->input, name);
    }
    return false;
}

static bool expr_refers(const AstExpr *e, const char *name)
{
    if (!e)
        return false;
    if (e->kind == AST_SUBQUERY && select_refers(e->subquery, name))
        return true;
    for (int i = 0; i < ast_list_len(e->args); i++)
        if (expr_refers(AST_AT(e->args, i), name))
            return true;
    return expr_refers(e->arg, name) || expr_refers(e->lo, name) || expr_refers(e->hi, name) ||
           expr_refers(e->else_, name);
}

/* Does s read the relation `name` (in FROM, a subquery, a set operation's branch)? A WITH
 * inside s that defines the name again is not looked into more closely: it counts. */
bool select_refers(const AstSelect *s, const char *name)
{
    for (; s; s = s->set_op != SETOP_NONE ? s->set_rhs : NULL) {
        for (int i = 0; i < ast_list_len(s->from); i++)
            if (tref_refers(AST_AT(s->from, i), name))
                return true;
        if (expr_refers(s->where, name) || expr_refers(s->having, name))
            return true;
        for (int i = 0; i < ast_list_len(s->targets); i++)
            if (expr_refers(((const AstTarget *)AST_AT(s->targets, i))->expr, name))
                return true;
        for (int i = 0; i < ast_list_len(s->ctes); i++)
            if (select_refers(((const AstCte *)AST_AT(s->ctes, i))->query, name))
                return true;
    }
    return false;
}

/* Plans sel as a query of its own (its own node list, for the runtime to run
 * apart) with ctes in scope; with want, its visible columns are cast to those types. */
static int sub_query(PlanCtx *p, CteEnv *ctes, const AstSelect *sel, const PlanSchema *want, int pos,
                     PlanQuery **out)
{
    BindCtx *b = &p->b;
    PlanCtx sub = *p;
    sub.n_nodes = sub.cap_nodes = 0;
    sub.nodes = NULL;
    sub.ctes = ctes;
    sub.topn_sub = NULL;
    sub.corr = NULL;
    PlanQuery *q = arena_zalloc(b->a, sizeof *q);
    q->limit = -1;
    Rel r;
    int rc = plan_select(&sub, sel, &r, q);
    if (!rc && want) {
        int *vis;
        int n = visible_cols(&sub, &r, &vis);
        bool same = n == want->n;
        for (int i = 0; i < n && same; i++)
            same = r.scope.cols[vis[i]].type == want->types[i];
        if (n != want->n) {
            rc = werr(b->err, SQLSTATE_SYNTAX_ERROR, pos, "each UNION query must have the same number of columns");
        } else if (!same) {
            PlanExpr **exprs = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(n + 1));
            for (int i = 0; i < n && !rc; i++) {
                exprs[i] = make_col(&sub.b, vis[i], r.scope.cols[vis[i]].type);
                if (exprs[i]->type != want->types[i] && !(exprs[i] = coerce_expr(&sub.b, exprs[i], want->types[i], pos)))
                    rc = -1;
            }
            Scope sc;
            if (!rc)
                r.node = make_project(&sub, r.node, &r.scope, n, exprs, want->names, NULL, &sc, false);
        }
    }
    p->b = sub.b; /* node ids and subquery columns move on */
    if (rc)
        return -1;
    q->root = r.node;
    q->n_nodes = sub.n_nodes;
    q->nodes = sub.nodes;
    q->schema = r.node->out;
    *out = q;
    return 0;
}

/*
 * WITH RECURSIVE name AS (anchor UNION [ALL] step), where step reads name:
 * a PN_RECURSIVE leaf holding both as queries of their own; the step reads
 * the work table (the rows the last iteration added). The runtime iterates
 * (op_recursive.c) and bounds the work. Ad hoc queries only.
 */
static int plan_recursive(PlanCtx *p, CteEnv *ce, Rel *out)
{
    BindCtx *b = &p->b;
    const AstCte *c = ce->cte;
    const AstSelect *q = c->query;
    AstSelect anchor = *q;
    anchor.set_op = SETOP_NONE;
    anchor.set_rhs = NULL;
    anchor.order_by = NULL;
    anchor.limit = anchor.offset = NULL;
    anchor.ctes = NULL;
    if ((q->set_op != SETOP_UNION && q->set_op != SETOP_UNION_ALL) || select_refers(&anchor, c->name))
        return werr(b->err, SQLSTATE_INVALID_RECURSION, c->pos,
                    "recursive query \"%s\" does not have the form non-recursive-term UNION [ALL] recursive-term",
                    c->name);
    if (q->order_by || q->limit || q->offset || q->ctes)
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, c->pos,
                    "feature not supported: ORDER BY, LIMIT or WITH in a recursive query");
    PlanQuery *aq, *sq;
    if (sub_query(p, ce->prev, &anchor, NULL, c->pos, &aq))
        return -1;
    /* The CTE's columns: the anchor's visible ones, renamed by its column list. */
    PlanSchema *sch = arena_zalloc(b->a, sizeof *sch);
    int n = 0;
    for (int i = 0; i < aq->root->out.n; i++)
        n += !aq->root->out.hidden[i];
    alloc_schema(b->a, sch, n);
    for (int i = 0, k = 0; i < aq->root->out.n; i++) {
        if (aq->root->out.hidden[i])
            continue;
        sch->names[k] = k < ast_list_len(c->col_names) ? arena_strdup(b->a, AST_AT(c->col_names, k))
                                                       : aq->root->out.names[i];
        sch->types[k++] = aq->root->out.types[i] == TYPE_NULL ? TYPE_TEXT : aq->root->out.types[i];
    }
    CteEnv self = *ce;
    self.work = sch;
    self.work_id = b->next_node_id++;
    if (sub_query(p, &self, q->set_rhs, sch, q->set_rhs->pos, &sq))
        return -1;
    PlanNode *r = new_node(p, PN_RECURSIVE, NULL);
    r->out = *sch;
    r->append_only = true;
    r->rec_anchor = aq;
    r->rec_step = sq;
    r->rec_union_all = q->set_op == SETOP_UNION_ALL;
    r->rec_name = c->name;
    r->work_id = self.work_id;
    alloc_scope(b->a, &out->scope, n);
    for (int i = 0; i < n; i++)
        out->scope.cols[i] = (ScopeCol){.name = sch->names[i], .type = sch->types[i]};
    out->node = r;
    return 0;
}

/*
 * A reference to a common table expression. Each reference plans the CTE's
 * query again, as if it were written there as a subquery: a plan node has
 * one reader, and re-planning is deterministic (same state table order at
 * start-up). Two references therefore read their inputs twice (for a
 * source, its topic twice), with the same result as a shared one.
 */
int plan_cte_ref(PlanCtx *p, const AstTableRef *t, CteEnv *ce, Rel *out)
{
    BindCtx *b = &p->b;
    const AstCte *c = ce->cte;
    ce->used = true;
    if (t->system_time)
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, t->system_time->pos,
                    "feature not supported: FOR SYSTEM_TIME AS OF a WITH query");
    if (ce->work) {
        /* The recursive term reading its own CTE: the previous iteration's new rows. */
        PlanNode *w = new_node(p, PN_WORK_TABLE, NULL);
        w->out = *ce->work;
        w->append_only = true;
        w->work_id = ce->work_id;
        w->rec_name = c->name;
        alloc_scope(b->a, &out->scope, w->out.n);
        for (int i = 0; i < w->out.n; i++)
            out->scope.cols[i] = (ScopeCol){.qualifier = t->alias ? t->alias : c->name, .name = w->out.names[i],
                                            .type = w->out.types[i]};
        out->node = w;
        return 0;
    }
    CteEnv *saved = p->ctes;
    p->ctes = ce->prev;
    int rc;
    if (ce->recursive && select_refers(c->query, c->name)) {
        rc = plan_recursive(p, ce, out);
    } else if (c->query == p->topn_sub) {
        p->topn_sub = NULL;
        rc = plan_topn(p, c->query, out);
    } else {
        rc = plan_select(p, c->query, out, NULL);
    }
    p->ctes = saved;
    if (rc)
        return -1;
    int n_vis = 0;
    for (int i = 0; i < out->scope.n; i++)
        n_vis += !out->scope.cols[i].hidden;
    if (ast_list_len(c->col_names) > n_vis)
        return werr(b->err, SQLSTATE_INVALID_COLUMN_REFERENCE, c->pos,
                    "WITH query \"%s\" has %d columns available but %d columns specified", c->name, n_vis,
                    ast_list_len(c->col_names));
    const char *qual = t->alias ? t->alias : c->name;
    for (int i = 0, k = 0; i < out->scope.n; i++) {
        out->scope.cols[i].qualifier = qual;
        if (out->scope.cols[i].hidden)
            continue;
        if (k < ast_list_len(c->col_names))
            out->scope.cols[i].name = AST_AT(c->col_names, k);
        if (t->col_aliases && k < ast_list_len(t->col_aliases))
            out->scope.cols[i].name = AST_AT(t->col_aliases, k);
        k++;
    }
    return 0;
}

/* ---- set operations ------------------------------------------------------------ */

static const char *setop_word(AstSetOp op)
{
    return op == SETOP_INTERSECT || op == SETOP_INTERSECT_ALL ? "INTERSECT"
         : op == SETOP_EXCEPT || op == SETOP_EXCEPT_ALL ? "EXCEPT" : "UNION";
}

/* Is target i of s a bare NULL or string literal (a type Postgres leaves
 * open until the set operation resolves it)? */
static bool target_untyped(const AstSelect *s, int i)
{
    if (s->values || i >= ast_list_len(s->targets))
        return false;
    for (int k = 0; k < ast_list_len(s->targets); k++)
        if (((const AstTarget *)AST_AT(s->targets, k))->expr->kind == AST_STAR)
            return false;
    const AstExpr *e = ((const AstTarget *)AST_AT(s->targets, i))->expr;
    return e->kind == AST_LITERAL && (e->lit_kind == LIT_NULL || e->lit_kind == LIT_STRING);
}

/* The same for every branch of a chain (s combined with its set_rhs...). */
static bool chain_untyped(const AstSelect *s, int i)
{
    for (; s; s = s->set_op != SETOP_NONE ? s->set_rhs : NULL)
        if (!target_untyped(s, i))
            return false;
    return true;
}

/* Where column i of branch s was written, for errors. */
static int target_pos(const AstSelect *s, int i)
{
    if (i < ast_list_len(s->targets)) {
        const AstTarget *t = AST_AT(s->targets, i);
        if (t->expr->kind != AST_STAR)
            return t->pos;
    }
    return s->pos;
}

/*
 * One input of a set operation: its visible columns (vis[0..n)) as the
 * unified types. A branch that already is exactly that is used as it is;
 * otherwise a projection drops hidden columns and casts. An untyped literal
 * is converted explicitly (a string constant is parsed now, so 'x' UNION 1
 * fails at planning as in Postgres); other columns follow the implicit
 * cast rules.
 */
static PlanNode *setop_input(PlanCtx *p, Rel *r, const int *vis, int n, const TypeId *types, const bool *untyped,
                             const char **names, Scope *sc, const AstSelect *branch)
{
    BindCtx *b = &p->b;
    bool same = r->scope.n == n;
    for (int i = 0; i < n && same; i++)
        same = vis[i] == i && r->scope.cols[i].type == types[i];
    if (same) {
        *sc = r->scope;
        return r->node;
    }
    PlanExpr **exprs = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
        const ScopeCol *c = &r->scope.cols[vis[i]];
        PlanExpr *x = make_col(b, vis[i], c->type);
        int pos = target_pos(branch, i);
        if (c->type != types[i] && untyped[i]) {
            const PlanNode *pn = r->node;
            const PlanExpr *k = pn->kind == PN_PROJECT && vis[i] < pn->n_exprs ? pn->exprs[vis[i]] : NULL;
            if (k && k->kind == PE_CONST && k->value.null) {
                x = make_const(b, value_null(types[i]));
            } else if (k && k->kind == PE_CONST && type_phys(k->type) == PHYS_STR) {
                Value v;
                if (value_from_text(types[i], k->value.u.s.p, k->value.u.s.len, b->a, &v, b->err)) {
                    b->err->pos = pos;
                    return NULL;
                }
                x = make_const(b, v);
            } else {
                x = make_cast(b, x, types[i], pos);
            }
        } else if (c->type != types[i] && !(x = coerce_expr(b, x, types[i], pos))) {
            return NULL;
        }
        exprs[i] = x;
    }
    return make_project(p, r->node, &r->scope, n, exprs, names, NULL, sc, false);
}

/* The visible columns of r into *vis (arena); returns their count. */
static int visible_cols(PlanCtx *p, const Rel *r, int **vis)
{
    *vis = arena_alloc(p->b.a, sizeof(int) * (size_t)(r->scope.n + 1));
    int n = 0;
    for (int i = 0; i < r->scope.n; i++)
        if (!r->scope.cols[i].hidden)
            (*vis)[n++] = i;
    return n;
}

/*
 * `sel` combined with the whole of sel->set_rhs (the parser's right-leaning
 * form, see parser/README.md). Columns are matched by position, the output
 * names come from the first branch, and types unify as in Postgres's
 * UNION (42804 when they cannot). UNION ALL merges the two changelogs;
 * UNION is UNION ALL then a distinct aggregation on all columns;
 * INTERSECT and EXCEPT [ALL] count each distinct row on each side. ORDER BY,
 * LIMIT and OFFSET of the head apply to the whole result.
 */
static int plan_setop(PlanCtx *p, const AstSelect *sel, Rel *out, PlanQuery *q)
{
    BindCtx *b = &p->b;
    const char *word = setop_word(sel->set_op);
    AstSelect head = *sel;
    head.set_op = SETOP_NONE;
    head.set_rhs = NULL;
    head.ctes = NULL;
    head.order_by = NULL;
    head.limit = head.offset = NULL;
    Rel l, r;
    if (plan_select(p, &head, &l, NULL) || plan_select(p, sel->set_rhs, &r, NULL))
        return -1;
    int *lv, *rv;
    int n = visible_cols(p, &l, &lv), nr = visible_cols(p, &r, &rv);
    if (n != nr)
        return werr(b->err, SQLSTATE_SYNTAX_ERROR, sel->set_rhs->pos, "each %s query must have the same number of columns",
                    word);
    TypeId *types = arena_alloc(b->a, sizeof(TypeId) * (size_t)(n + 1));
    bool *ul = arena_alloc(b->a, sizeof(bool) * (size_t)(n + 1));
    bool *ur = arena_alloc(b->a, sizeof(bool) * (size_t)(n + 1));
    const char **names = arena_alloc(b->a, sizeof(char *) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
        TypeId tl = l.scope.cols[lv[i]].type, tr = r.scope.cols[rv[i]].type;
        ul[i] = target_untyped(&head, i);
        ur[i] = chain_untyped(sel->set_rhs, i);
        names[i] = l.scope.cols[lv[i]].name;
        if (ul[i] && ur[i])
            types[i] = TYPE_TEXT;
        else if (ul[i])
            types[i] = tr;
        else if (ur[i])
            types[i] = tl;
        else if ((types[i] = bind_common_type(tl, tr)) == TYPE_NULL)
            return werr(b->err, SQLSTATE_DATATYPE_MISMATCH, target_pos(sel->set_rhs, i), "%s types %s and %s cannot be matched",
                        word, type_name(tl), type_name(tr));
    }
    Scope ls, rs;
    PlanNode *ln = setop_input(p, &l, lv, n, types, ul, names, &ls, &head);
    PlanNode *rn = ln ? setop_input(p, &r, rv, n, types, ur, names, &rs, sel->set_rhs) : NULL;
    if (!rn)
        return -1;

    bool is_union = sel->set_op == SETOP_UNION || sel->set_op == SETOP_UNION_ALL;
    if (!is_union && p->streaming && (ln->append_only || rn->append_only) && !p->allow_unbounded) {
        werr(b->err, SQLSTATE_NOT_SUPPORTED, sel->set_rhs->pos,
             "%s over a stream keeps every distinct row of both inputs forever (unbounded state)", word);
        werr_hint(b->err, "Apply it to materialized views that update their rows (e.g. aggregations), or "
                          "SET streaming_allow_unbounded_state = true to accept unbounded state.");
        return -1;
    }
    PlanNode *u = new_node(p, is_union ? PN_UNION : PN_SETOP, ln);
    u->n_inputs = 2;
    u->inputs[1] = rn;
    u->append_only = is_union && ln->append_only && rn->append_only;
    /* The output watermark is the minimum of the inputs' (the operator takes
     * it), so it means something only when both carry it on the same column.
     * INTERSECT/EXCEPT rows are not in event-time order: no watermark. */
    u->wm_col = is_union && ln->wm_col >= 0 && ln->wm_col == rn->wm_col ? ln->wm_col : -1;
    if (!is_union) {
        u->set_op = sel->set_op;
        u->setop_eq_keys = p->plan_rev >= 5;
        u->table_id = new_table(p);
    }
    Scope sc;
    alloc_scope(b->a, &sc, n);
    for (int i = 0; i < n; i++) {
        const ScopeCol *a = &ls.cols[i], *c = &rs.cols[i];
        bool keep = u->wm_col >= 0 && a->role == c->role && a->win_size_us == c->win_size_us;
        sc.cols[i] = (ScopeCol){.name = names[i], .type = types[i], .role = keep ? a->role : ROLE_NONE,
                                .win_size_us = keep ? a->win_size_us : 0};
    }
    schema_from_scope(b->a, &u->out, &sc);
    if (!u->append_only) {
        /* Rows of either side may be equal: the whole row, counted, is the key
         * (INTERSECT and EXCEPT without ALL emit each row at most once). */
        u->n_keys = n;
        u->keys = arena_alloc(b->a, sizeof(int) * (size_t)(n + 1));
        for (int i = 0; i < n; i++)
            u->keys[i] = i;
        u->dup_keys = sel->set_op != SETOP_INTERSECT && sel->set_op != SETOP_EXCEPT;
    }
    PlanNode *cur = u;
    if (sel->set_op == SETOP_UNION && !(cur = make_distinct(p, u, &sc, n, sel->set_rhs->pos, "UNION")))
        return -1;

    /* ORDER BY of a set operation names result columns (by name or position). */
    int n_order = ast_list_len(sel->order_by);
    PlanOrder *order = arena_alloc(b->a, sizeof(PlanOrder) * (size_t)(n_order + 1));
    for (int i = 0; i < n_order; i++) {
        const AstOrderItem *o = AST_AT(sel->order_by, i);
        int col = -1;
        if (o->expr->kind == AST_LITERAL && o->expr->lit_kind == LIT_INT) {
            int k = atoi(o->expr->text);
            if (k < 1 || k > n)
                return werr(b->err, SQLSTATE_INVALID_COLUMN_REFERENCE, o->expr->pos,
                            "ORDER BY position %d is not in select list", k);
            col = k - 1;
        } else if (o->expr->kind == AST_COLUMN && !o->expr->qualifier) {
            for (int k = 0; k < n; k++)
                if (strcmp(names[k], o->expr->text) == 0) {
                    if (col >= 0)
                        return werr(b->err, SQLSTATE_AMBIGUOUS_COLUMN, o->expr->pos, "ORDER BY \"%s\" is ambiguous",
                                    o->expr->text);
                    col = k;
                }
            if (col < 0)
                return werr(b->err, SQLSTATE_UNDEFINED_COLUMN, o->expr->pos, "column \"%s\" does not exist",
                            o->expr->text);
        } else {
            werr(b->err, SQLSTATE_NOT_SUPPORTED, o->expr->pos, "invalid UNION/INTERSECT/EXCEPT ORDER BY clause");
            werr_hint(b->err, "Only result column names can be used, not expressions or functions.");
            return -1;
        }
        order[i] = (PlanOrder){.col = col, .desc = o->desc, .nulls_first = o->nulls == 1 || (o->nulls == 0 && o->desc)};
    }
    if (q) {
        q->n_order = n_order;
        q->order = order;
    }
    out->node = cur;
    out->scope = sc;
    if (!q && (sel->limit || sel->offset))
        return make_limit_topn(p, sel, out, n_order, order, n);
    return plan_limit(p, sel, q);
}


/* A query: its WITH list (in scope while the query is planned), then a set
 * operation or a single select. */
int plan_select(PlanCtx *p, const AstSelect *sel, Rel *out, PlanQuery *q)
{
    BindCtx *b = &p->b;
    CteEnv *saved = p->ctes;
    int rc = 0;
    if (sel->recursive && p->streaming)
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, sel->pos, "feature not supported: WITH RECURSIVE in a materialized view"),
               werr_hint(b->err, "A view cannot iterate to a fixpoint; write the recursion out as joins."), -1;
    for (int i = 0; i < ast_list_len(sel->ctes) && !rc; i++) {
        const AstCte *c = AST_AT(sel->ctes, i);
        for (int k = 0; k < i && !rc; k++)
            if (strcmp(((const AstCte *)AST_AT(sel->ctes, k))->name, c->name) == 0)
                rc = werr(b->err, SQLSTATE_DUPLICATE_ALIAS, c->pos, "WITH query name \"%s\" specified more than once", c->name);
        CteEnv *e = arena_zalloc(b->a, sizeof *e);
        e->cte = c;
        e->recursive = sel->recursive;
        e->prev = p->ctes;
        p->ctes = e;
    }
    CteEnv *mine = p->ctes;
    if (!rc)
        rc = sel->set_op != SETOP_NONE ? plan_setop(p, sel, out, q) : plan_select_core(p, sel, out, q);
    /* In an ad hoc query a WITH query nothing uses is still checked, as
     * Postgres does, then forgotten (its nodes leave the plan). Not in a
     * view: the view would not depend on what it names (a DROP would let it
     * go), yet re-planning the view at start would fail on it. */
    for (CteEnv *e = mine; !rc && !p->streaming && e != saved; e = e->prev) {
        if (e->used)
            continue;
        int n_nodes = p->n_nodes, next_id = b->next_node_id;
        CteEnv *env = p->ctes;
        p->ctes = e->prev;
        Rel unused;
        rc = plan_select(p, e->cte->query, &unused, NULL);
        p->ctes = env;
        p->n_nodes = n_nodes;
        b->next_node_id = next_id;
    }
    p->ctes = saved;
    return rc;
}

void init_ctx(PlanCtx *p, const PlanCatalog *cat, Arena *a, WError *err, bool streaming)
{
    memset(p, 0, sizeof *p);
    p->b.a = a;
    p->b.err = err;
    p->b.cat = cat;
    p->b.next_node_id = 1;
    p->streaming = streaming;
    p->plan_rev = PLAN_REV_CURRENT;
    p->b.plan_rev = PLAN_REV_CURRENT;
    /* The recursion of SQL goes through these: the files below this one
     * plan nested queries without naming it (planner/README.md, "Files"). */
    p->sub_select = plan_select;
    p->cte_ref = plan_cte_ref;
}

PlanQuery *plan_query(const AstSelect *sel, const PlanCatalog *cat, Arena *a, WError *err)
{
    PlanCtx p;
    init_ctx(&p, cat, a, err, false);
    PlanQuery *q = arena_zalloc(a, sizeof *q);
    q->limit = -1;
    Rel r;
    if (plan_select(&p, sel, &r, q))
        return NULL;
    q->root = r.node;
    q->n_nodes = p.n_nodes;
    q->nodes = p.nodes;
    q->schema = r.node->out;
    if (check_widths(q->nodes, q->n_nodes, err) || check_limits(q->nodes, q->n_nodes, sel->pos, err))
        return NULL;
    plan_key_lookups(q, a);
    return q;
}
