/*
 * plan_node.c: the bottom of the lowering: making plan nodes (new_node,
 * topn_new), their schemas and scopes, state table ids (new_table: asked of
 * the catalog in the order nodes are made, which replay depends on), and
 * small lookups every pass shares (cat_option, plan_node_kind_name). It
 * calls nothing else in planner/.
 */
#include "planner_int.h"
#include "tz.h"

#include <string.h>
#include <strings.h>

const char *plan_node_kind_name(PlanNodeKind k)
{
    static const char *names[] = {"Source", "Watermark", "Project", "Filter", "Window", "HashAgg",
                                  "Materialize", "Join", "TopN", "ViewScan", "ViewSource", "Values",
                                  "TableWrite", "TemporalJoin", "Union", "SetOp", "SemiJoin", "RecursiveUnion",
                                  "WorkTable", "Exchange", "ViewChanges"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

const char *cat_option(const CatRelation *r, const char *key)
{
    for (int i = 0; i < r->n_options; i++)
        if (strcasecmp(r->options[i].key, key) == 0)
            return r->options[i].value;
    return NULL;
}

PlanNode *new_node(PlanCtx *p, PlanNodeKind kind, PlanNode *input)
{
    PlanNode *n = arena_zalloc(p->b.a, sizeof *n);
    n->kind = kind;
    n->id = p->b.next_node_id++;
    n->wm_col = -1;
    n->win_group_idx = -1;
    if (input) {
        n->n_inputs = 1;
        n->inputs[0] = input;
        n->append_only = input->append_only;
    }
    if (p->n_nodes == p->cap_nodes) {
        int cap = p->cap_nodes ? p->cap_nodes * 2 : 16;
        PlanNode **nn = arena_alloc(p->b.a, sizeof *nn * (size_t)cap);
        if (p->n_nodes)
            memcpy(nn, p->nodes, sizeof *nn * (size_t)p->n_nodes);
        p->nodes = nn;
        p->cap_nodes = cap;
    }
    p->nodes[p->n_nodes++] = n;
    return n;
}

/* A Top-N node over cur ordered by order[0..n_order): its output is cur's
 * columns and a hidden row_number. The caller sets the partition, limit,
 * key and state. */
PlanNode *topn_new(PlanCtx *p, PlanNode *cur, int n_order, const PlanOrder *order)
{
    BindCtx *b = &p->b;
    PlanNode *t = new_node(p, PN_TOPN, cur);
    t->n_order_cols = n_order;
    t->order_cols = arena_alloc(b->a, sizeof(int) * (size_t)(n_order + 1));
    t->order_desc = arena_zalloc(b->a, sizeof(bool) * (size_t)(n_order + 1));
    t->order_nulls_first = arena_zalloc(b->a, sizeof(bool) * (size_t)(n_order + 1));
    for (int i = 0; i < n_order; i++) {
        t->order_cols[i] = order[i].col;
        t->order_desc[i] = order[i].desc;
        t->order_nulls_first[i] = order[i].nulls_first;
    }
    int n = cur->out.n;
    alloc_schema(b->a, &t->out, n + 1);
    for (int i = 0; i < n; i++) {
        t->out.names[i] = cur->out.names[i];
        t->out.types[i] = cur->out.types[i];
        t->out.hidden[i] = cur->out.hidden[i];
    }
    t->out.names[n] = "row_number";
    t->out.types[n] = TYPE_INT8;
    t->out.hidden[n] = true;
    return t;
}

void alloc_schema(Arena *a, PlanSchema *s, int n)
{
    s->n = n;
    s->names = arena_zalloc(a, sizeof(char *) * (size_t)(n ? n : 1));
    s->types = arena_zalloc(a, sizeof(TypeId) * (size_t)(n ? n : 1));
    s->hidden = arena_zalloc(a, sizeof(bool) * (size_t)(n ? n : 1));
}

void alloc_scope(Arena *a, Scope *s, int n)
{
    s->n = n;
    s->cols = arena_zalloc(a, sizeof(ScopeCol) * (size_t)(n ? n : 1));
}

/* Schema of a node from a scope (names, types, hidden flags). */
void schema_from_scope(Arena *a, PlanSchema *out, const Scope *s)
{
    alloc_schema(a, out, s->n);
    for (int i = 0; i < s->n; i++) {
        /* Names may point into the statement's AST: the plan outlives it. */
        out->names[i] = arena_strdup(a, s->cols[i].name);
        out->types[i] = s->cols[i].type;
        out->hidden[i] = s->cols[i].hidden;
    }
}

uint64_t new_table(PlanCtx *p)
{
    return p->streaming && p->b.cat->new_table_id ? p->b.cat->new_table_id(p->b.cat->ctx) : 0;
}

/* The position of the first call of fn in e (-1 when it has none), 0 if none. */
int expr_find_fn(const PlanExpr *e, ScalarFn fn)
{
    if (e->kind == PE_CALL && e->fn == fn)
        return e->pos ? e->pos : -1;
    for (int i = 0; i < e->n_args; i++) {
        int p = expr_find_fn(e->args[i], fn);
        if (p)
            return p;
    }
    return 0;
}

/* Builds a PROJECT over in with exprs; maps the input key through PE_COL
 * expressions, appending hidden key columns that the projection dropped. */
PlanNode *make_project(PlanCtx *p, PlanNode *in, const Scope *in_scope, int n, PlanExpr **exprs,
                              const char **names, const ColRole *roles, Scope *out_scope, bool keep_key)
{
    BindCtx *b = &p->b;
    int extra = 0;
    int *key_map = NULL;
    if (keep_key && in->n_keys) {
        key_map = arena_alloc(b->a, sizeof(int) * (size_t)in->n_keys);
        for (int k = 0; k < in->n_keys; k++) {
            key_map[k] = -1;
            for (int i = 0; i < n; i++)
                if (exprs[i]->kind == PE_COL && exprs[i]->col == in->keys[k]) {
                    key_map[k] = i;
                    break;
                }
            if (key_map[k] < 0)
                key_map[k] = n + extra++;
        }
    }
    PlanNode *pr = new_node(p, PN_PROJECT, in);
    pr->n_exprs = n + extra;
    pr->exprs = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(n + extra + 1));
    alloc_scope(b->a, out_scope, n + extra);
    for (int i = 0; i < n; i++) {
        pr->exprs[i] = exprs[i];
        out_scope->cols[i] = (ScopeCol){.name = arena_strdup(b->a, names[i]), .type = exprs[i]->type,
                                        .role = roles ? roles[i] : ROLE_NONE};
        if (exprs[i]->kind == PE_COL) {
            const ScopeCol *src = &in_scope->cols[exprs[i]->col];
            if (!roles)
                out_scope->cols[i].role = src->role;
            out_scope->cols[i].win_size_us = src->win_size_us;
            if (exprs[i]->col == in->wm_col && pr->wm_col < 0)
                pr->wm_col = i;
        }
    }
    if (key_map) {
        pr->n_keys = in->n_keys;
        pr->keys = key_map;
        pr->dup_keys = in->dup_keys;
        for (int k = 0; k < in->n_keys; k++) {
            int c = key_map[k];
            if (c < n)
                continue;
            int src = in->keys[k];
            pr->exprs[c] = make_col(b, src, in->out.types[src]);
            out_scope->cols[c] = (ScopeCol){.name = arena_printf(b->a, "_key_%s", in->out.names[src]),
                                            .type = in->out.types[src], .hidden = true};
        }
    }
    schema_from_scope(b->a, &pr->out, out_scope);
    return pr;
}

/* LIMIT and OFFSET of an ad hoc query into q (a view has no order to cut;
 * inside a query they are a Top-N, make_limit_topn()). */
int plan_limit(PlanCtx *p, const AstSelect *sel, PlanQuery *q)
{
    BindCtx *b = &p->b;
    if (!q) {
        if (sel->limit || sel->offset)
            return werr(b->err, SQLSTATE_NOT_SUPPORTED, (sel->limit ? sel->limit : sel->offset)->pos,
                        "feature not supported: LIMIT/OFFSET in a streaming query (Top-N)");
        return 0;
    }
    return limit_values(p, sel, &q->limit, &q->offset);
}

int limit_values(PlanCtx *p, const AstSelect *sel, int64_t *limit, int64_t *offset)
{
    BindCtx *b = &p->b;
    *limit = -1;
    *offset = 0;
    Scope empty = {0};
    if (sel->limit) {
        PlanExpr *l = bind_expr(b, &empty, sel->limit);
        Value v;
        if (!l || !(l = coerce_expr(b, l, TYPE_INT8, sel->limit->pos)) || eval_const(b, l, &v))
            return -1;
        if (!v.null && v.u.i < 0)
            return werr(b->err, SQLSTATE_INVALID_ROW_COUNT, sel->limit->pos, "LIMIT must not be negative");
        *limit = v.null ? -1 : v.u.i;
    }
    if (sel->offset) {
        PlanExpr *l = bind_expr(b, &empty, sel->offset);
        Value v;
        if (!l || !(l = coerce_expr(b, l, TYPE_INT8, sel->offset->pos)) || eval_const(b, l, &v))
            return -1;
        if (!v.null && v.u.i < 0)
            return werr(b->err, SQLSTATE_INVALID_ROW_COUNT, sel->offset->pos, "OFFSET must not be negative");
        *offset = v.null ? 0 : v.u.i;
    }
    return 0;
}


/* A distinct aggregation over the first n columns of cur (SELECT DISTINCT,
 * UNION): one state entry per distinct row, with a count of its copies so
 * that a row goes only when its last copy is retracted. Its output is those
 * n columns only: columns of cur past n (the hidden key columns a streaming
 * projection appends) are not grouped, so the operator does not emit them;
 * the caller's scope must drop them too. */
PlanNode *make_distinct(PlanCtx *p, PlanNode *cur, const Scope *scope, int n, int pos, const char *what)
{
    BindCtx *b = &p->b;
    PlanNode *a = new_node(p, PN_AGG, cur);
    a->n_group = n;
    a->group_cols = arena_alloc(b->a, sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n; i++)
        a->group_cols[i] = i;
    a->table_id = new_table(p);
    a->n_keys = n;
    a->keys = a->group_cols;
    a->append_only = false;
    a->out = cur->out; /* a prefix: the arrays are shared, the plan is immutable */
    a->out.n = n;
    /* Every distinct row of a stream is kept forever unless a window bounds it. */
    bool bounded = false;
    for (int i = 0; i < n; i++)
        if (scope->cols[i].role == ROLE_WINDOW_START || scope->cols[i].role == ROLE_WINDOW_END)
            bounded = true;
    if (p->streaming && cur->append_only && !bounded && !p->allow_unbounded && !p->state_ttl_us) {
        werr(b->err, SQLSTATE_NOT_SUPPORTED, pos, "%s over a stream keeps every distinct row forever (unbounded state)",
             what);
        if (strcmp(what, "UNION") == 0)
            werr_hint(b->err, "Use UNION ALL (it keeps no state), or "
                              "SET streaming_allow_unbounded_state = true to accept unbounded state.");
        else
            werr_hint(b->err, "Group by a window (window_start or window_end) to bound it, expire idle rows with "
                              "WITH (state_ttl = '1 hour'), or "
                              "SET streaming_allow_unbounded_state = true to accept unbounded state.");
        return NULL;
    }
    return a;
}







/* The width each operator emits, checked against the schema its readers
 * take from the node. The runtime sizes its chunks and its stack rows from
 * these counts and indexes one by the other: a node whose schema disagrees
 * with what its operator emits (a DISTINCT over a projection's hidden key
 * columns, issue 17) reads past a chunk. A mismatch is a planner bug: it
 * fails the statement with XX000 instead of reaching the runtime. */
int check_widths(PlanNode *const *nodes, int n_nodes, WError *err)
{
    for (int i = 0; i < n_nodes; i++) {
        const PlanNode *n = nodes[i];
        const PlanNode *in = n->n_inputs ? n->inputs[0] : NULL;
        int want = n->out.n;
        switch (n->kind) {
        case PN_PROJECT: want = n->n_exprs; break;
        case PN_AGG: want = n->n_group + n->n_aggs; break;
        case PN_FILTER:
        case PN_WATERMARK:
        case PN_EXCHANGE: want = in->out.n; break;
        case PN_MATERIALIZE: want = in->out.n + (n->row_id_key ? 1 : 0); break;
        case PN_JOIN: want = in->out.n + n->inputs[1]->out.n; break;
        case PN_TOPN: want = in->out.n + 1; break;
        case PN_UNION:
        case PN_SETOP: want = in->out.n == n->inputs[1]->out.n ? in->out.n : -1; break;
        default: break;
        }
        if (want != n->out.n)
            return werr(err, SQLSTATE_INTERNAL, 0, "plan node %d (kind %d) has %d columns where its operator emits %d",
                        n->id, (int)n->kind, n->out.n, want);
    }
    return 0;
}

int plan_agg_slots(const PlanAgg *g)
{
    switch (g->kind) {
    case AGG_SUM:
    case AGG_AVG:
        /* numeric: + how many values of each scale; compensated: + the rounding error */
        return g->type == TYPE_NUMERIC || g->compensated ? 3 : 2;
    case AGG_BOOL_AND:
    case AGG_BOOL_OR:
    case AGG_FIRST:
        return 2;
    default:
        return 1;
    }
}

/* The limits of common/weir_limits.h, checked once for every node of a
 * finished plan (54000 at pos, the statement's): the runtime's fixed arrays
 * are sized by them and its operators only assert them. */
int check_limits(PlanNode *const *nodes, int n_nodes, int pos, WError *err)
{
    for (int i = 0; i < n_nodes; i++) {
        const PlanNode *n = nodes[i];
        int cols = n->out.n - (n->kind == PN_MATERIALIZE && n->row_id_key ? 1 : 0);
        if (cols > WEIR_MAX_COLUMNS)
            return werr(err, SQLSTATE_PROGRAM_LIMIT, pos, "a row of this statement would have %d columns (at most %d)",
                        cols, WEIR_MAX_COLUMNS),
                   werr_hint(err, "Select fewer columns; a join's rows have the columns of both sides."), -1;
        int keys = 0;
        const char *what = NULL;
        if (n->kind == PN_JOIN || n->kind == PN_TEMPORAL_JOIN || n->kind == PN_SEMI_JOIN) {
            keys = n->n_join_keys;
            what = n->kind == PN_SEMI_JOIN ? "correlation keys of a subquery" : "equality keys of a join";
        } else if (n->kind == PN_TOPN) {
            keys = n->n_part;
            what = "PARTITION BY columns";
        }
        if (keys > WEIR_MAX_KEY_COLUMNS)
            return werr(err, SQLSTATE_PROGRAM_LIMIT, pos, "too many %s: %d (at most %d)", what, keys,
                        WEIR_MAX_KEY_COLUMNS);
        if (n->kind == PN_AGG) {
            int slots = n->n_group + 2;
            for (int k = 0; k < n->n_aggs; k++)
                slots += plan_agg_slots(&n->aggs[k]);
            if (slots > WEIR_MAX_AGG_VALUES)
                return werr(err, SQLSTATE_PROGRAM_LIMIT, pos,
                            "too many grouping columns and aggregates: %d group columns and %d aggregates keep %d "
                            "values per group (at most %d)", n->n_group, n->n_aggs, slots, WEIR_MAX_AGG_VALUES),
                       werr_hint(err, "A SELECT DISTINCT groups by every selected column."), -1;
        }
    }
    return 0;
}

/* The planned view whose root (materialize) node is m, over p's nodes. */
PlanView *view_of(Arena *a, const PlanCtx *p, PlanNode *m)
{
    PlanView *v = arena_zalloc(a, sizeof *v);
    v->tz = tz_current();
    v->root = m;
    v->n_nodes = p->n_nodes;
    v->nodes = p->nodes;
    v->schema = m->out;
    v->n_pk = m->n_keys;
    v->pk = m->keys;
    v->append_only = m->append_only;
    v->parallelism = 1;
    return v;
}



int plan_parallelism_value(const char *s, int *out)
{
    if (!s)
        return -1;
    while (*s == ' ')
        s++;
    int v = 0, digits = 0;
    for (; *s >= '0' && *s <= '9' && digits < 4; s++, digits++)
        v = v * 10 + (*s - '0');
    while (*s == ' ')
        s++;
    if (!digits || *s || v < 1 || v > PLAN_MAX_PARALLELISM)
        return -1;
    *out = v;
    return 0;
}

/* The CTE named name in scope (innermost first), or NULL. */
CteEnv *find_cte(const PlanCtx *p, const char *name)
{
    for (CteEnv *e = p->ctes; e; e = e->prev)
        if (strcmp(e->cte->name, name) == 0)
            return e;
    return NULL;
}
