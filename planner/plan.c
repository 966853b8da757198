/*
 * plan.c: lowering a bound query to a stream plan (a DAG of PlanNodes).
 *
 * The shape for a windowed aggregation, the common streaming query:
 *   SOURCE -> WATERMARK -> WINDOW -> [FILTER] -> PROJECT(pre) -> AGG
 *          -> [FILTER(having)] -> PROJECT -> MATERIALIZE
 * Each node records its output schema, key, changelog mode and watermark
 * column as it is made, so later nodes (and EXPLAIN) read them instead of
 * re-deriving. The same lowering serves ad hoc queries, whose leaves read
 * materialized views once (VIEW_SCAN) instead of connectors.
 */
#include "planner_int.h"
#include "tz.h"
#include "numeric.h"

#include <stdio.h>
#include <stdlib.h>
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

/* ---- FROM ------------------------------------------------------------------ */

int plan_relation_name(PlanCtx *p, const AstTableRef *t, Rel *out)
{
    BindCtx *b = &p->b;
    CteEnv *ce = find_cte(p, t->name);
    if (ce)
        return plan_cte_ref(p, t, ce, out);
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

/* The stream key of window node w over in (whose n_in columns come first,
 * then window_start, window_end). A TUMBLE or SESSION row is in one window:
 * the input's key stays unique. A HOP row is in several windows, told apart
 * by their start; the windows of a CUMULATE row share their start and
 * differ by their end. A keyless append-only input keeps no key (the view
 * numbers its rows); a keyless changelog is one row, so its windows are
 * keyed by the window bound alone. */
static void window_keys(PlanCtx *p, PlanNode *w, const PlanNode *in, int n_in)
{
    if (!in->n_keys && in->append_only)
        return;
    int bound = w->win_kind == WIN_HOP ? n_in : w->win_kind == WIN_CUMULATE ? n_in + 1 : -1;
    w->n_keys = in->n_keys + (bound >= 0);
    w->keys = arena_alloc(p->b.a, sizeof(int) * (size_t)(w->n_keys + 1));
    if (in->n_keys)
        memcpy(w->keys, in->keys, sizeof(int) * (size_t)in->n_keys);
    if (bound >= 0)
        w->keys[in->n_keys] = bound;
    w->dup_keys = in->dup_keys;
}

static int plan_window(PlanCtx *p, const AstTableRef *t, Rel *out)
{
    BindCtx *b = &p->b;
    Rel in;
    if (t->input->kind == TREF_NAME) {
        if (plan_relation_name(p, t->input, &in))
            return -1;
    } else if (t->input->kind == TREF_SUBQUERY) {
        if (plan_select(p, t->input->subquery, &in, NULL))
            return -1;
    } else {
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, t->pos, "feature not supported: this window input");
    }
    if (t->win_partition && t->win_kind != WIN_SESSION)
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, t->pos, "feature not supported: PARTITION BY in this window");
    if (t->win_partition) {
        /* Sessions are kept per GROUP BY key; PARTITION BY names must at least exist. */
        for (int i = 0; i < ast_list_len(t->win_partition); i++)
            if (!bind_expr(b, &in.scope, AST_AT(t->win_partition, i)))
                return -1;
    }
    PlanExpr *tc = bind_expr(b, &in.scope, t->time_col);
    if (!tc)
        return -1;
    if (tc->kind != PE_COL || (tc->type != TYPE_TIMESTAMP && tc->type != TYPE_TIMESTAMPTZ))
        return werr(b->err, SQLSTATE_DATATYPE_MISMATCH, t->time_col->pos,
                    "the time column of a window must be a TIMESTAMP or TIMESTAMPTZ column");
    int nargs = ast_list_len(t->win_args);
    int64_t size = 0, slide = 0, offset = 0;
    if (t->win_kind == WIN_SESSION) {
        if (nargs != 1)
            return werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, t->pos, "SESSION takes (relation, time column, gap)");
        if (const_interval_us(b, &in.scope, AST_AT(t->win_args, 0), &size))
            return -1;
        slide = size;
    } else if (t->win_kind == WIN_TUMBLE) {
        if (nargs < 1 || nargs > 2)
            return werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, t->pos, "TUMBLE takes (relation, time column, size [, offset])");
        if (const_interval_us(b, &in.scope, AST_AT(t->win_args, 0), &size))
            return -1;
        slide = size;
        if (nargs == 2 && const_interval_us(b, &in.scope, AST_AT(t->win_args, 1), &offset))
            return -1;
    } else {
        const char *fname = t->win_kind == WIN_HOP ? "HOP" : "CUMULATE";
        if (nargs < 2 || nargs > 3)
            return werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, t->pos, "%s takes (relation, time column, %s [, offset])",
                        fname, t->win_kind == WIN_HOP ? "slide, size" : "step, max size");
        if (const_interval_us(b, &in.scope, AST_AT(t->win_args, 0), &slide) ||
            const_interval_us(b, &in.scope, AST_AT(t->win_args, 1), &size))
            return -1;
        if (nargs == 3 && const_interval_us(b, &in.scope, AST_AT(t->win_args, 2), &offset))
            return -1;
        if (slide > 0 && size % slide != 0)
            return werr(b->err, SQLSTATE_INVALID_PARAMETER, ((AstExpr *)AST_AT(t->win_args, 1))->pos,
                        "%s window size must be a multiple of the %s", fname, t->win_kind == WIN_HOP ? "slide" : "step");
        if (slide > 0 && size / slide > 1000)
            return werr(b->err, SQLSTATE_PROGRAM_LIMIT, ((AstExpr *)AST_AT(t->win_args, 1))->pos,
                        "%s window size / %s must be at most 1000", fname, t->win_kind == WIN_HOP ? "slide" : "step");
    }
    if (size <= 0 || slide <= 0)
        return werr(b->err, SQLSTATE_INVALID_PARAMETER, ((AstExpr *)AST_AT(t->win_args, 0))->pos, "window size must be positive");
    PlanNode *w = new_node(p, PN_WINDOW, in.node);
    w->win_kind = t->win_kind;
    w->win_time_col = tc->col;
    w->win_size_us = size;
    w->win_slide_us = slide;
    w->win_offset_us = offset;
    w->wm_col = in.node->wm_col;
    int n = in.scope.n;
    alloc_scope(b->a, &out->scope, n + 2);
    if (n > 0)
        memcpy(out->scope.cols, in.scope.cols, sizeof(ScopeCol) * (size_t)n);
    const char *qual = t->alias ? t->alias : (t->input->kind == TREF_NAME ? t->input->name : NULL);
    if (t->alias)
        for (int i = 0; i < n; i++)
            out->scope.cols[i].qualifier = t->alias;
    /* A cumulating window's start is shared by windows of several ends: only
     * window_end tells when a window closes. A session's bounds are known
     * only to the aggregation that merges rows into sessions. */
    bool sess = t->win_kind == WIN_SESSION;
    out->scope.cols[n] = (ScopeCol){.qualifier = qual, .name = "window_start", .type = tc->type,
                                    .role = sess ? ROLE_SESSION_START
                                          : t->win_kind == WIN_CUMULATE ? ROLE_NONE : ROLE_WINDOW_START,
                                    .win_size_us = size};
    out->scope.cols[n + 1] = (ScopeCol){.qualifier = qual, .name = "window_end", .type = tc->type,
                                        .role = sess ? ROLE_SESSION_END : ROLE_WINDOW_END, .win_size_us = size};
    if (sess && !p->session_pos)
        p->session_pos = t->pos;
    if (sess && in.scope.cols[tc->col].role != ROLE_EVENT_TIME)
        return werr(b->err, "42P20", t->time_col->pos,
                    "SESSION windows need a time column with a WATERMARK (sessions close when it passes their end)");
    /* Without a watermark on the time column, nothing ever closes a window. */
    if (in.scope.cols[tc->col].role != ROLE_EVENT_TIME) {
        out->scope.cols[n].role = ROLE_NONE;
        out->scope.cols[n + 1].role = ROLE_NONE;
    }
    schema_from_scope(b->a, &w->out, &out->scope);
    if (p->plan_rev >= 3)
        window_keys(p, w, in.node, n);
    out->node = w;
    return 0;
}

/* The position of the first call of fn in e (-1 when it has none), 0 if none. */
static int expr_find_fn(const PlanExpr *e, ScalarFn fn)
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

/* A SESSION window only means something to the aggregation that merges
 * rows into sessions: refuse plans where its rows go elsewhere. */
static int check_sessions(PlanCtx *p)
{
    int windows = 0, aggs = 0, any_aggs = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        windows += p->nodes[i]->kind == PN_WINDOW && p->nodes[i]->win_kind == WIN_SESSION;
        aggs += p->nodes[i]->kind == PN_AGG && p->nodes[i]->session;
        any_aggs += p->nodes[i]->kind == PN_AGG;
    }
    if (windows > aggs && !any_aggs) {
        /* Flink's SESSION table function alone: each row with its session's final bounds. */
        werr(p->b.err, SQLSTATE_NOT_SUPPORTED, p->session_pos,
             "feature not supported: the SESSION table function without an aggregation");
        werr_hint(p->b.err, "A row's session is known only once the session closes (later rows may still merge it); "
                            "aggregate per session instead: GROUP BY window_start, window_end (and the partition keys).");
        return -1;
    }
    if (windows > aggs)
        return werr(p->b.err, "42P20", p->session_pos,
                    "a SESSION window needs an aggregation with GROUP BY window_start, window_end (and its keys)");
    return 0;
}

/* ---- joins ------------------------------------------------------------------- */


/* Splits a bound predicate into its AND-ed conjuncts. */
static int count_conjuncts(const PlanExpr *e)
{
    if (!(e->kind == PE_CALL && e->fn == FN_AND))
        return 1;
    int n = 0;
    for (int i = 0; i < e->n_args; i++)
        n += count_conjuncts(e->args[i]);
    return n;
}

static void fill_conjuncts(PlanExpr *e, PlanExpr **out, int *n)
{
    if (e->kind == PE_CALL && e->fn == FN_AND) {
        for (int i = 0; i < e->n_args; i++)
            fill_conjuncts(e->args[i], out, n);
    } else {
        out[(*n)++] = e;
    }
}

PlanExpr **conjuncts(PlanExpr *e, Arena *a, int *n)
{
    int total = e ? count_conjuncts(e) : 0;
    PlanExpr **out = arena_alloc(a, sizeof(PlanExpr *) * (size_t)(total + 1));
    *n = 0;
    if (e)
        fill_conjuncts(e, out, n);
    return out;
}

/* A time expression `col`, `col + INTERVAL c` or `col - INTERVAL c`:
 * returns the column and the constant offset in microseconds. */
static bool time_term(const PlanExpr *e, int *col, int64_t *off)
{
    if (e->kind == PE_COL) {
        *col = e->col;
        *off = 0;
        return true;
    }
    if (e->kind == PE_CALL && (e->fn == FN_TS_ADD_IV || e->fn == FN_TS_SUB_IV) && e->args[0]->kind == PE_COL &&
        e->args[1]->kind == PE_CONST && !e->args[1]->value.null) {
        int64_t us;
        if (interval_to_usecs(&e->args[1]->value.u.iv, &us))
            return false;
        *col = e->args[0]->col;
        *off = e->fn == FN_TS_ADD_IV ? us : -us;
        return true;
    }
    return false;
}

/* Builds the join node of l and r (the result replaces *out; l may be out). */
int make_join(PlanCtx *p, AstJoinType type, const AstExpr *on, AstList *using_cols, Rel *l, Rel *r, int pos,
                     Rel *out)
{
    BindCtx *b = &p->b;
    int nl = l->scope.n, nr = r->scope.n;
    Scope sc;
    alloc_scope(b->a, &sc, nl + nr);
    memcpy(sc.cols, l->scope.cols, sizeof(ScopeCol) * (size_t)nl);
    memcpy(sc.cols + nl, r->scope.cols, sizeof(ScopeCol) * (size_t)nr);
    PlanNode *j = new_node(p, PN_JOIN, l->node);
    j->n_inputs = 2;
    j->inputs[1] = r->node;
    j->join_type = type == JOIN_CROSS ? JOIN_INNER : type;
    j->left_time_col = j->right_time_col = -1;
    /* USING's equalities, then ON's conjuncts: every one is kept (none dropped at a cap). */
    int n_using = ast_list_len(using_cols);
    PlanExpr *on_e = NULL;
    if (on) {
        on_e = bind_expr(b, &sc, on);
        if (!on_e || !(on_e = coerce_expr(b, on_e, TYPE_BOOL, on->pos))) {
            if (!b->err->set)
                werr(b->err, SQLSTATE_DATATYPE_MISMATCH, on->pos, "argument of JOIN/ON must be type boolean");
            return -1;
        }
    }
    int n_on;
    PlanExpr **on_conds = conjuncts(on_e, b->a, &n_on);
    PlanExpr **conds = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(n_using + n_on + 1));
    int nc = 0;
    if (using_cols) {
        for (int i = 0; i < ast_list_len(using_cols); i++) {
            const char *name = AST_AT(using_cols, i);
            int lc = -1, rc = -1;
            for (int k = 0; k < nl; k++)
                if (strcmp(sc.cols[k].name, name) == 0)
                    lc = k;
            for (int k = 0; k < nr; k++)
                if (strcmp(sc.cols[nl + k].name, name) == 0)
                    rc = nl + k;
            if (lc < 0 || rc < 0)
                return werr(b->err, SQLSTATE_UNDEFINED_COLUMN, pos,
                            "column \"%s\" specified in USING clause does not exist in %s table", name,
                            lc < 0 ? "left" : "right");
            PlanExpr *x = make_col(b, lc, sc.cols[lc].type), *y = make_col(b, rc, sc.cols[rc].type);
            TypeId t = sc.cols[lc].type;
            if (t != sc.cols[rc].type && !(y = coerce_expr(b, y, t, pos)))
                return -1;
            PlanExpr *args[2] = {x, y};
            PlanExpr *eq = arena_zalloc(b->a, sizeof *eq);
            *eq = (PlanExpr){.kind = PE_CALL, .fn = FN_EQ, .type = TYPE_BOOL, .pos = pos, .n_args = 2,
                             .args = arena_alloc(b->a, sizeof(PlanExpr *) * 2)};
            eq->args[0] = args[0];
            eq->args[1] = args[1];
            conds[nc++] = eq;
            /* The column appears once, as in Postgres: the right copy is hidden. */
            sc.cols[rc].hidden = true;
        }
    }
    for (int i = 0; i < n_on; i++)
        conds[nc++] = on_conds[i];
    /* Classify: equal columns across the sides become the hash key; bounds
     * on the difference of the two event times make an interval join. */
    int *lk = arena_alloc(b->a, sizeof(int) * (size_t)(nc + 1));
    int *rk = arena_alloc(b->a, sizeof(int) * (size_t)(nc + 1));
    bool *used = arena_zalloc(b->a, sizeof(bool) * (size_t)(nc + 1));
    int nk = 0;
    int tl = -1, tr = -1;
    bool have_lo = false, have_hi = false;
    int64_t lo = INT64_MIN, hi = INT64_MAX;
    bool *is_time = arena_zalloc(b->a, sizeof(bool) * (size_t)(nc + 1));
    bool window_join = false;
    for (int i = 0; i < nc; i++) {
        PlanExpr *c = conds[i];
        if (c->kind != PE_CALL || c->n_args != 2)
            continue;
        PlanExpr *x = c->args[0], *y = c->args[1];
        if (c->fn == FN_EQ && x->kind == PE_COL && y->kind == PE_COL &&
            ((x->col < nl) != (y->col < nl)) && x->type == y->type) {
            lk[nk] = x->col < nl ? x->col : y->col;
            rk[nk] = (x->col < nl ? y->col : x->col) - nl;
            /* A window join (Flink's): equal window ends of two windowed streams.
             * Rows can only meet within one window, so it is also an interval
             * join on window_end with bounds [0, 0]: a side's rows are dropped
             * once the other side's watermark passes their window's end, and
             * outer rows are padded then, once. */
            if (sc.cols[x->col].role == ROLE_WINDOW_END && sc.cols[y->col].role == ROLE_WINDOW_END &&
                (tl < 0 || tl == lk[nk]) && (tr < 0 || tr == rk[nk])) {
                tl = lk[nk];
                tr = rk[nk];
                window_join = true;
                if (!have_lo || lo < 0)
                    lo = 0;
                if (!have_hi || hi > 0)
                    hi = 0;
                have_lo = have_hi = true;
            }
            nk++;
            used[i] = true;
            continue;
        }
        int cx, cy;
        int64_t ox, oy;
        if ((c->fn == FN_GE || c->fn == FN_GT || c->fn == FN_LE || c->fn == FN_LT) && time_term(x, &cx, &ox) &&
            time_term(y, &cy, &oy) && ((cx < nl) != (cy < nl)) &&
            sc.cols[cx].role == ROLE_EVENT_TIME && sc.cols[cy].role == ROLE_EVENT_TIME) {
            /* Normalise to d = right - left compared with a constant. */
            bool x_right = cx >= nl;
            int lc = x_right ? cy : cx, rcol = x_right ? cx : cy;
            if ((tl >= 0 && tl != lc) || (tr >= 0 && tr != rcol - nl))
                continue;
            tl = lc;
            tr = rcol - nl;
            /* x + ox OP y + oy  =>  x - y OP oy - ox */
            int64_t k = oy - ox;
            ScalarFn f = c->fn;
            if (!x_right) {
                /* left - right OP k  =>  right - left OP' -k */
                k = -k;
                f = f == FN_GE ? FN_LE : f == FN_GT ? FN_LT : f == FN_LE ? FN_GE : FN_GT;
            }
            if (f == FN_GE || f == FN_GT) {
                int64_t v = f == FN_GT ? k + 1 : k;
                if (!have_lo || v > lo)
                    lo = v;
                have_lo = true;
            } else {
                int64_t v = f == FN_LT ? k - 1 : k;
                if (!have_hi || v < hi)
                    hi = v;
                have_hi = true;
            }
            is_time[i] = true;
        }
    }
    bool interval = p->streaming && have_lo && have_hi && l->node->append_only && r->node->append_only;
    PlanExpr *residual = NULL;
    for (int i = 0; i < nc; i++) {
        if (used[i] || (interval && is_time[i]))
            continue;
        if (!residual) {
            residual = conds[i];
        } else {
            PlanExpr *args[2] = {residual, conds[i]};
            PlanExpr *a = arena_zalloc(b->a, sizeof *a);
            *a = (PlanExpr){.kind = PE_CALL, .fn = FN_AND, .type = TYPE_BOOL, .pos = conds[i]->pos, .n_args = 2,
                            .args = arena_alloc(b->a, sizeof(PlanExpr *) * 2)};
            a->args[0] = args[0];
            a->args[1] = args[1];
            residual = a;
        }
    }
    if (p->streaming && !interval && l->node->append_only && r->node->append_only && !p->allow_unbounded &&
        !p->state_ttl_us) {
        werr(b->err, SQLSTATE_NOT_SUPPORTED, pos,
             "a join of two append-only streams keeps every row of both forever (unbounded state)");
        werr_hint(b->err, "Bound it in time with an interval join (ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '..' "
                          "AND a.ts + INTERVAL '..' over watermarked sources), bound each key's state with "
                          "CREATE MATERIALIZED VIEW ... WITH (state_ttl = '1 hour'), "
                          "or SET streaming_allow_unbounded_state = true.");
        return -1;
    }
    if (interval && lo > hi)
        return werr(b->err, SQLSTATE_INVALID_PARAMETER, pos, "the join's time bounds are empty (lower bound above upper)");
    j->n_join_keys = nk;
    j->left_keys = lk;
    j->right_keys = rk;
    j->residual = residual;
    j->interval = interval;
    if (interval) {
        j->left_time_col = tl;
        j->right_time_col = tr;
        j->lo_us = lo;
        j->hi_us = hi;
        j->window_join = window_join && lo == 0 && hi == 0;
    }
    j->table_id = new_table(p);
    j->table_id2 = new_table(p);
    schema_from_scope(b->a, &j->out, &sc);
    bool outer = j->join_type != JOIN_INNER;
    j->append_only = l->node->append_only && r->node->append_only && (interval || !outer);
    j->wm_col = l->node->wm_col >= 0 ? l->node->wm_col : (r->node->wm_col >= 0 ? nl + r->node->wm_col : -1);
    if (!interval) {
        /* An outer row becomes padded when its partner goes: only the time columns of
         * inner joins keep their watermark meaning. */
        if (outer)
            j->wm_col = -1;
        for (int i = 0; i < nl + nr; i++)
            if (sc.cols[i].role == ROLE_EVENT_TIME && outer)
                sc.cols[i].role = ROLE_NONE;
    }
    if (!j->append_only) {
        if (l->node->n_keys && r->node->n_keys && !l->node->dup_keys && !r->node->dup_keys) {
            j->n_keys = l->node->n_keys + r->node->n_keys;
            j->keys = arena_alloc(b->a, sizeof(int) * (size_t)j->n_keys);
            for (int i = 0; i < l->node->n_keys; i++)
                j->keys[i] = l->node->keys[i];
            for (int i = 0; i < r->node->n_keys; i++)
                j->keys[l->node->n_keys + i] = nl + r->node->keys[i];
            /* Padded rows have NULL keys on one side: still unique per row. */
        } else {
            j->n_keys = nl + nr;
            j->keys = arena_alloc(b->a, sizeof(int) * (size_t)j->n_keys);
            for (int i = 0; i < j->n_keys; i++)
                j->keys[i] = i;
            j->dup_keys = true;
        }
    }
    out->node = j;
    out->scope = sc;
    return 0;
}

/* ---- Top-N: ROW_NUMBER() OVER (...) filtered outside --------------------------- */

/* The ROW_NUMBER() OVER target of a select, or -1. */
static int row_number_target(const AstSelect *s)
{
    for (int i = 0; i < ast_list_len(s->targets); i++) {
        const AstTarget *t = AST_AT(s->targets, i);
        if (t->expr->kind == AST_FUNC && t->expr->over && strcmp(t->expr->text, "row_number") == 0)
            return i;
    }
    return -1;
}

/* Finds `rn <= N`, `rn < N`, `rn = 1` (or reversed) among the AND-ed terms of w. */

/* A Top-N partitioned by a window with a watermark: a window's rows are final
 * once the watermark passes its end, and its state can go. Sets t's window
 * bound from its partition columns (t->part_cols over scope s). */
static void topn_window_bound(PlanNode *t, const Scope *s)
{
    t->win_group_idx = -1;
    for (int i = 0; i < t->n_part && t->win_group_idx < 0; i++) {
        const ScopeCol *c = &s->cols[t->part_cols[i]];
        if (c->role == ROLE_WINDOW_END || c->role == ROLE_WINDOW_START) {
            t->win_group_idx = i;
            t->win_end_offset_us = c->role == ROLE_WINDOW_START ? c->win_size_us : 0;
        }
    }
}

static bool rn_limit(const AstExpr *w, const char *rn, int64_t *n)
{
    if (!w)
        return false;
    if (w->kind == AST_BINARY && w->op == OP_AND) {
        for (int i = 0; i < ast_list_len(w->args); i++)
            if (rn_limit(AST_AT(w->args, i), rn, n))
                return true;
        return false;
    }
    if (w->kind != AST_BINARY)
        return false;
    const AstExpr *x = AST_AT(w->args, 0), *y = AST_AT(w->args, 1);
    AstOp op = w->op;
    if (y->kind == AST_COLUMN && x->kind == AST_LITERAL) {
        const AstExpr *t = x;
        x = y;
        y = t;
        op = op == OP_GE ? OP_LE : op == OP_GT ? OP_LT : op == OP_LE ? OP_GE : op == OP_LT ? OP_GT : op;
    }
    if (x->kind != AST_COLUMN || strcmp(x->text, rn) != 0 || y->kind != AST_LITERAL || y->lit_kind != LIT_INT)
        return false;
    int64_t v = atoll(y->text);
    if (op == OP_LE)
        *n = v;
    else if (op == OP_LT)
        *n = v - 1;
    else if (op == OP_EQ && v == 1)
        *n = 1;
    else
        return false;
    return *n >= 1;
}

int plan_topn(PlanCtx *p, const AstSelect *inner, Rel *out)
{
    BindCtx *b = &p->b;
    int ti = row_number_target(inner);
    const AstTarget *rt = AST_AT(inner->targets, ti);
    const AstWindowSpec *over = rt->expr->over;
    if (ast_list_len(rt->expr->args))
        return werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, rt->pos, "row_number() takes no arguments");
    if (!ast_list_len(over->order_by))
        return werr(b->err, SQLSTATE_SYNTAX_ERROR, rt->pos, "ROW_NUMBER() OVER needs an ORDER BY");
    /* The inner select without its row number, plus its PARTITION BY and ORDER
     * BY expressions as hidden columns: that is the input of the Top-N. */
    int np = ast_list_len(over->partition_by), no = ast_list_len(over->order_by);
    AstSelect copy = *inner;
    AstList *targets = NULL;
    for (int i = 0; i < ast_list_len(inner->targets); i++)
        if (i != ti)
            targets = ast_list_append(b->a, targets, AST_AT(inner->targets, i));
    for (int i = 0; i < np + no; i++) {
        AstTarget *x = arena_zalloc(b->a, sizeof *x);
        x->expr = i < np ? AST_AT(over->partition_by, i) : ((AstOrderItem *)AST_AT(over->order_by, i - np))->expr;
        x->alias = arena_printf(b->a, "_rank_key%d", i);
        x->pos = x->expr->pos;
        targets = ast_list_append(b->a, targets, x);
    }
    copy.targets = targets;
    Rel in;
    if (plan_select(p, &copy, &in, NULL))
        return -1;
    /* The rank keys are the last targets, but not the last columns: a
     * streaming projection appends its input's key columns after the targets
     * (a join's, when its keys are not selected), so they are found by name
     * (the last _rank_key0: they follow every target of the user's). */
    int base = -1;
    for (int i = 0; i < in.scope.n; i++)
        if (strcmp(in.scope.cols[i].name, "_rank_key0") == 0)
            base = i;
    if (base < 0 || base + np + no > in.scope.n)
        return werr(b->err, SQLSTATE_INTERNAL, rt->pos, "ROW_NUMBER(): the PARTITION BY and ORDER BY columns were not planned");
    for (int i = base; i < base + np + no; i++) {
        in.scope.cols[i].hidden = true;
        in.node->out.hidden[i] = true;
    }
    PlanNode *t = new_node(p, PN_TOPN, in.node);
    t->n_part = np;
    t->part_cols = arena_alloc(b->a, sizeof(int) * (size_t)(np + 1));
    t->n_order_cols = no;
    t->order_cols = arena_alloc(b->a, sizeof(int) * (size_t)(no + 1));
    t->order_desc = arena_zalloc(b->a, sizeof(bool) * (size_t)(no + 1));
    t->order_nulls_first = arena_zalloc(b->a, sizeof(bool) * (size_t)(no + 1));
    for (int i = 0; i < np + no; i++) {
        if (i < np) {
            t->part_cols[i] = base + i;
        } else {
            const AstOrderItem *o = AST_AT(over->order_by, i - np);
            t->order_cols[i - np] = base + i;
            t->order_desc[i - np] = o->desc;
            t->order_nulls_first[i - np] = o->nulls == 1 || (o->nulls == 0 && o->desc);
        }
    }
    t->topn_limit = p->topn_n;
    topn_window_bound(t, &in.scope);
    t->table_id = new_table(p);
    t->append_only = false;
    t->wm_col = -1;
    int n = in.scope.n;
    alloc_scope(b->a, &out->scope, n + 1);
    memcpy(out->scope.cols, in.scope.cols, sizeof(ScopeCol) * (size_t)n);
    out->scope.cols[n] = (ScopeCol){.name = rt->alias ? arena_strdup(b->a, rt->alias) : "row_number", .type = TYPE_INT8};
    schema_from_scope(b->a, &t->out, &out->scope);
    /* Each (partition, rank) holds one row. */
    t->n_keys = np + 1;
    t->keys = arena_alloc(b->a, sizeof(int) * (size_t)(np + 1));
    for (int i = 0; i < np; i++)
        t->keys[i] = t->part_cols[i];
    t->keys[np] = n;
    out->node = t;
    return 0;
}

static bool binds(BindCtx *b, const Scope *s, const AstExpr *e);
static AstExpr *and_of(Arena *a, AstExpr *l, const AstExpr *r);
static int plan_tref_node(PlanCtx *p, const AstTableRef *t, Rel *out);

/* Only a tree of inner joins takes WHERE conjuncts into its ONs (plan_from):
 * anything else below it (a subquery, a window function's input, the
 * preserved or padded side of an outer join) plans without them. */
int plan_tref(PlanCtx *p, const AstTableRef *t, Rel *out)
{
    const AstExpr **conj = p->where_conj;
    bool inner = t->kind == TREF_JOIN && (t->join_type == JOIN_INNER || t->join_type == JOIN_CROSS) &&
                 !t->using_cols && !(t->right->kind == TREF_NAME && t->right->system_time);
    if (!conj || inner)
        return plan_tref_node(p, t, out);
    p->where_conj = NULL;
    int rc = plan_tref_node(p, t, out);
    p->where_conj = conj;
    return rc;
}

/* The ON of inner join t, with the WHERE conjuncts not taken yet that need
 * both of its sides (l and r planned): for an inner join ON and WHERE mean
 * the same, and in ON a time bound makes an interval join and an equality a
 * hash key. WHERE is still applied in full above the join. */
static const AstExpr *join_on_with_where(PlanCtx *p, const AstTableRef *t, const Rel *l, const Rel *r)
{
    BindCtx *b = &p->b;
    const AstExpr *on = t->on;
    if (!p->where_conj)
        return on;
    Scope both;
    alloc_scope(b->a, &both, l->scope.n + r->scope.n);
    memcpy(both.cols, l->scope.cols, sizeof(ScopeCol) * (size_t)l->scope.n);
    memcpy(both.cols + l->scope.n, r->scope.cols, sizeof(ScopeCol) * (size_t)r->scope.n);
    for (int k = 0; k < p->where_n; k++) {
        const AstExpr *c = p->where_conj[k];
        if (p->where_used[k] || !binds(b, &both, c) || binds(b, &l->scope, c) || binds(b, &r->scope, c))
            continue;
        p->where_used[k] = true;
        on = on ? and_of(b->a, (AstExpr *)on, c) : c;
    }
    return on;
}

static int plan_tref_node(PlanCtx *p, const AstTableRef *t, Rel *out)
{
    BindCtx *b = &p->b;
    switch (t->kind) {
    case TREF_NAME: return plan_relation_name(p, t, out);
    case TREF_WINDOW: return plan_window(p, t, out);
    case TREF_SUBQUERY: {
        if (t->subquery == p->topn_sub) {
            p->topn_sub = NULL;
            if (plan_topn(p, t->subquery, out))
                return -1;
        } else if (plan_select(p, t->subquery, out, NULL))
            return -1;
        const char *q = t->alias;
        for (int i = 0; i < out->scope.n; i++) {
            out->scope.cols[i].qualifier = q;
            if (t->col_aliases && i < ast_list_len(t->col_aliases))
                out->scope.cols[i].name = AST_AT(t->col_aliases, i);
        }
        return 0;
    }
    case TREF_JOIN: {
        if (t->right->kind == TREF_NAME && t->right->system_time)
            return plan_temporal_join(p, t, out);
        Rel l, r;
        if (plan_tref(p, t->left, &l) || plan_tref(p, t->right, &r))
            return -1;
        return make_join(p, t->join_type, join_on_with_where(p, t, &l, &r), t->using_cols, &l, &r, t->pos, out);
    }
    }
    return werr(b->err, SQLSTATE_INTERNAL, t->pos, "unknown FROM item");
}

/* The AND-ed parts of e (NULL: none), at most cap: the rest are not
 * offered to the joins as ON terms (WHERE still applies them all). */
static void split_and(const AstExpr *e, const AstExpr **out, int *n, int cap)
{
    if (!e)
        return;
    if (e->kind == AST_BINARY && e->op == OP_AND) {
        for (int i = 0; i < ast_list_len(e->args); i++)
            split_and(AST_AT(e->args, i), out, n, cap);
    } else if (*n < cap) {
        out[(*n)++] = e;
    }
}

/* Does e bind against scope s (every column it names is there)? Errors are
 * not reported: the caller binds e for real later. */
static bool binds(BindCtx *b, const Scope *s, const AstExpr *e)
{
    WError tmp = {0}, *saved = b->err;
    b->err = &tmp;
    PlanExpr *x = bind_expr(b, s, e);
    b->err = saved;
    return x != NULL && !tmp.set;
}

static AstExpr *and_of(Arena *a, AstExpr *l, const AstExpr *r)
{
    AstExpr *e = arena_zalloc(a, sizeof *e);
    e->kind = AST_BINARY;
    e->op = OP_AND;
    e->pos = l->pos;
    e->args = arena_zalloc(a, sizeof *e->args);
    e->args->items = arena_alloc(a, 2 * sizeof(void *));
    e->args->items[0] = l;
    e->args->items[1] = (void *)r;
    e->args->n = e->args->cap = 2;
    return e;
}

static int plan_from_items(PlanCtx *p, const AstSelect *sel, int n, const AstExpr **conj, bool *used, int nc,
                           Rel *out);

static int plan_from(PlanCtx *p, const AstSelect *sel, Rel *out)
{
    BindCtx *b = &p->b;
    int n = ast_list_len(sel->from);
    if (n == 0) {
        if (p->streaming)
            return werr(b->err, SQLSTATE_NOT_SUPPORTED, sel->pos, "feature not supported: a materialized view without FROM");
        PlanNode *v = new_node(p, PN_VALUES, NULL);
        v->n_rows = 1;
        v->rows = arena_zalloc(b->a, sizeof(Value *));
        v->rows[0] = arena_zalloc(b->a, sizeof(Value));
        v->append_only = true;
        alloc_schema(b->a, &v->out, 0);
        alloc_scope(b->a, &out->scope, 0);
        out->node = v;
        return 0;
    }
    /* A comma list is a chain of cross joins, left to right. The WHERE
     * conjuncts that first become bindable when a relation is added are that
     * join's ON as well, so `FROM a, b WHERE a.k = b.k` is an equi-join (or
     * an interval join) instead of a cross product filtered afterwards. WHERE
     * is still applied in full after the joins: for inner joins ON and WHERE
     * mean the same, so the copy changes nothing but the plan. */
    const AstExpr *conj[256];
    bool used[256] = {false};
    int nc = 0;
    split_and(sel->where, conj, &nc, 256);
    /* Since revision 1 an explicit inner JOIN takes them too (plan_tref). The
     * context is this SELECT's: a nested one sets its own. */
    const AstExpr **outer_conj = p->where_conj;
    bool *outer_used = p->where_used;
    int outer_n = p->where_n;
    p->where_conj = p->plan_rev >= 1 && nc ? conj : NULL;
    p->where_used = used;
    p->where_n = nc;
    int rc = plan_from_items(p, sel, n, conj, used, nc, out);
    p->where_conj = outer_conj;
    p->where_used = outer_used;
    p->where_n = outer_n;
    return rc;
}

static int plan_from_items(PlanCtx *p, const AstSelect *sel, int n, const AstExpr **conj, bool *used, int nc, Rel *out)
{
    BindCtx *b = &p->b;
    if (plan_tref(p, AST_AT(sel->from, 0), out))
        return -1;
    for (int i = 1; i < n; i++) {
        Rel r;
        const AstTableRef *t = AST_AT(sel->from, i);
        if (plan_tref(p, t, &r))
            return -1;
        AstExpr *on = NULL;
        if (nc) {
            Scope both;
            alloc_scope(b->a, &both, out->scope.n + r.scope.n);
            memcpy(both.cols, out->scope.cols, sizeof(ScopeCol) * (size_t)out->scope.n);
            memcpy(both.cols + out->scope.n, r.scope.cols, sizeof(ScopeCol) * (size_t)r.scope.n);
            for (int k = 0; k < nc; k++) {
                if (used[k] || !binds(b, &both, conj[k]) || binds(b, &out->scope, conj[k]) || binds(b, &r.scope, conj[k]))
                    continue;
                used[k] = true;
                on = on ? and_of(b->a, on, conj[k]) : (AstExpr *)conj[k];
            }
        }
        if (make_join(p, JOIN_CROSS, on, NULL, out, &r, t->pos, out))
            return -1;
    }
    return 0;
}

/* ---- SELECT ------------------------------------------------------------------ */

/* Expands the select list into (AST expr, name) pairs, resolving '*'. */
typedef struct Target {
    const AstExpr *expr;     /* NULL for a star-expanded column */
    int star_col;            /* scope column for star expansion */
    const char *name;
    int pos;
} Target;

static int expand_targets(PlanCtx *p, const AstSelect *sel, const Scope *s, Target **out, int *n_out)
{
    BindCtx *b = &p->b;
    int cap = 0, n = 0;
    Target *ts = NULL;
    for (int i = 0; i < ast_list_len(sel->targets); i++) {
        const AstTarget *t = AST_AT(sel->targets, i);
        int want = t->expr->kind == AST_STAR ? s->n : 1;
        if (n + want > cap) {
            int nc = (n + want) * 2 + 8;
            Target *nt = arena_alloc(b->a, sizeof *nt * (size_t)nc);
            if (n)
                memcpy(nt, ts, sizeof *nt * (size_t)n);
            ts = nt;
            cap = nc;
        }
        if (t->expr->kind == AST_STAR) {
            bool any = false;
            for (int c = 0; c < s->n; c++) {
                if (s->cols[c].hidden)
                    continue;
                if (t->expr->qualifier && (!s->cols[c].qualifier || strcmp(s->cols[c].qualifier, t->expr->qualifier)))
                    continue;
                ts[n++] = (Target){.expr = NULL, .star_col = c, .name = s->cols[c].name, .pos = t->pos};
                any = true;
            }
            if (!any && t->expr->qualifier)
                return werr(b->err, SQLSTATE_UNDEFINED_TABLE, t->expr->pos, "missing FROM-clause entry for table \"%s\"",
                            t->expr->qualifier);
        } else {
            ts[n++] = (Target){.expr = t->expr, .star_col = -1,
                               .name = t->alias ? t->alias : expr_default_name(t->expr), .pos = t->pos};
        }
    }
    *out = ts;
    *n_out = n;
    return 0;
}

static PlanExpr *bind_target(PlanCtx *p, const Target *t, const Scope *s, const Scope *pre_agg)
{
    BindCtx *b = &p->b;
    if (!t->expr) {
        if (b->agg) {
            /* `SELECT *` in a grouped query: each column must be grouped. */
            AstExpr col = {.kind = AST_COLUMN, .pos = t->pos, .text = pre_agg->cols[t->star_col].name,
                           .qualifier = pre_agg->cols[t->star_col].qualifier};
            AstExpr *c = arena_alloc(b->a, sizeof col);
            *c = col;
            return bind_expr(b, s, c);
        }
        return make_col(b, t->star_col, s->cols[t->star_col].type);
    }
    PlanExpr *e = bind_expr(b, s, t->expr);
    if (e && e->kind == PE_CONST && e->unknown)
        e = coerce_expr(b, e, TYPE_TEXT, t->pos);
    if (e && e->kind == PE_CONST && e->type == TYPE_NULL)
        e = coerce_expr(b, e, TYPE_TEXT, t->pos);
    return e;
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

/* Resolving ORDER BY and DISTINCT ON items to output columns of a select. */
typedef struct OutCols {
    int n_targets;
    int n_out;                   /* targets plus hidden columns added so far */
    PlanExpr **texprs;           /* capacity for every item */
    const char **tnames;
    bool grouped;                /* bind through the aggregation */
    bool plain_distinct;         /* SELECT DISTINCT: items must be in the select list */
    AggCtx *agg;
    const Scope *scope;
    const PlanNode *cur;         /* the aggregation, when grouped */
} OutCols;

/* An output ordinal, an output name, or an expression (equal to a target, or
 * added as a hidden column). Returns the column, or -1 with err set. */
static int out_col(PlanCtx *p, OutCols *oc, const AstExpr *e, const char *what)
{
    BindCtx *b = &p->b;
    int col = -1;
    if (e->kind == AST_LITERAL && e->lit_kind == LIT_INT) {
        int k = atoi(e->text);
        if (k < 1 || k > oc->n_targets)
            return werr(b->err, SQLSTATE_INVALID_COLUMN_REFERENCE, e->pos, "%s position %d is not in select list", what, k);
        return k - 1;
    }
    if (e->kind == AST_COLUMN && !e->qualifier) {
        for (int k = 0; k < oc->n_targets; k++)
            if (strcmp(oc->tnames[k], e->text) == 0) {
                if (col >= 0 && !expr_equal(oc->texprs[col], oc->texprs[k]))
                    return werr(b->err, SQLSTATE_AMBIGUOUS_COLUMN, e->pos, "%s \"%s\" is ambiguous", what, e->text);
                col = k;
            }
        if (col >= 0)
            return col;
    }
    int n_aggs = oc->agg->n_aggs;
    b->agg = oc->grouped ? oc->agg : NULL;
    PlanExpr *x = bind_expr(b, oc->scope, e);
    b->agg = NULL;
    if (!x)
        return -1;
    if (oc->grouped && oc->agg->n_aggs != n_aggs)
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, e->pos, "feature not supported: an aggregate only in %s", what);
    for (int k = 0; k < oc->n_out; k++)
        if (expr_equal(oc->texprs[k], x))
            return k;
    if (oc->plain_distinct)
        return werr(b->err, SQLSTATE_INVALID_COLUMN_REFERENCE, e->pos,
                    "for SELECT DISTINCT, ORDER BY expressions must appear in select list");
    oc->texprs[oc->n_out] = x;
    oc->tnames[oc->n_out] = arena_printf(b->a, "_%s%d", strcmp(what, "ORDER BY") ? "distinct_on" : "order",
                                         oc->n_out - oc->n_targets);
    return oc->n_out++;
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

/* DISTINCT ON: a Top-1 per DISTINCT ON key ordered by ORDER BY (the Top-N
 * operator with N = 1), then a projection that drops the row number. With
 * no ORDER BY the row kept is an arbitrary one, as in Postgres (here: the
 * one whose encoding hashes lowest). */
static PlanNode *make_distinct_on(PlanCtx *p, PlanNode *cur, const Scope *scope, int n_part, const int *part,
                                  int n_order, const PlanOrder *order, int n_visible, bool keep_hidden)
{
    BindCtx *b = &p->b;
    PlanNode *t = topn_new(p, cur, n_order, order);
    t->n_part = n_part;
    t->part_cols = arena_alloc(b->a, sizeof(int) * (size_t)(n_part + 1));
    memcpy(t->part_cols, part, sizeof(int) * (size_t)n_part);
    t->topn_limit = 1;
    topn_window_bound(t, scope);
    t->table_id = new_table(p);
    t->append_only = false;
    t->wm_col = -1;
    int n = cur->out.n;
    /* One row per key: the DISTINCT ON columns are the key. */
    t->n_keys = n_part;
    t->keys = t->part_cols;
    /* The visible columns, then the hidden ones an ad hoc query sorts by, or
     * (in a view) only the hidden DISTINCT ON columns, which are the key. */
    PlanNode *pr = new_node(p, PN_PROJECT, t);
    pr->exprs = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(n + 1));
    pr->keys = arena_alloc(b->a, sizeof(int) * (size_t)(n_part + 1));
    int *map = arena_alloc(b->a, sizeof(int) * (size_t)(n + 1));
    int k = 0;
    for (int i = 0; i < n; i++) {
        bool is_part = false;
        for (int j = 0; j < n_part; j++)
            is_part |= part[j] == i;
        map[i] = -1;
        if (i < n_visible || keep_hidden || is_part) {
            map[i] = k;
            pr->exprs[k++] = make_col(b, i, cur->out.types[i]);
        }
    }
    pr->n_exprs = k;
    alloc_schema(b->a, &pr->out, k);
    for (int i = 0; i < n; i++)
        if (map[i] >= 0) {
            pr->out.names[map[i]] = cur->out.names[i];
            pr->out.types[map[i]] = cur->out.types[i];
            pr->out.hidden[map[i]] = cur->out.hidden[i];
        }
    pr->n_keys = n_part;
    for (int j = 0; j < n_part; j++)
        pr->keys[j] = map[part[j]];
    pr->append_only = false;
    return pr;
}

int plan_select_core(PlanCtx *p, const AstSelect *sel, Rel *out, PlanQuery *q)
{
    BindCtx *b = &p->b;
    if (sel->values) {
        if (sel->order_by || sel->limit || sel->offset)
            return werr(b->err, SQLSTATE_NOT_SUPPORTED, sel->pos,
                        "feature not supported: ORDER BY or LIMIT directly on VALUES (select from it instead)");
        if (p->streaming)
            return werr(b->err, SQLSTATE_NOT_SUPPORTED, sel->pos, "feature not supported: VALUES in a materialized view");
        int nr = ast_list_len(sel->values);
        AstList *first = AST_AT(sel->values, 0);
        int nc = ast_list_len(first);
        PlanNode *v = new_node(p, PN_VALUES, NULL);
        v->append_only = true;
        v->n_rows = nr;
        v->rows = arena_alloc(b->a, sizeof(Value *) * (size_t)nr);
        alloc_schema(b->a, &v->out, nc);
        Scope empty = {0};
        PlanExpr ***bound = arena_alloc(b->a, sizeof(PlanExpr **) * (size_t)nr);
        for (int r = 0; r < nr; r++) {
            AstList *row = AST_AT(sel->values, r);
            if (ast_list_len(row) != nc)
                return werr(b->err, SQLSTATE_SYNTAX_ERROR, ((AstExpr *)AST_AT(row, 0))->pos,
                            "VALUES lists must all be the same length");
            bound[r] = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(nc ? nc : 1));
            for (int c = 0; c < nc; c++)
                if (!(bound[r][c] = bind_expr(b, &empty, AST_AT(row, c))))
                    return -1;
        }
        for (int c = 0; c < nc; c++) {
            TypeId t = TYPE_NULL;
            for (int r = 0; r < nr; r++) {
                PlanExpr *e = bound[r][c];
                if (e->kind == PE_CONST && (e->unknown || e->value.null))
                    continue;
                /* Mixed number types: Postgres's common type (int and bigint
                 * are bigint, an integer and a numeric numeric) since planner
                 * revision 4; before, always double precision. */
                if (t == TYPE_NULL)
                    t = e->type;
                else if (type_is_numeric(t) && type_is_numeric(e->type) && t != e->type)
                    t = b->plan_rev >= 4 ? bind_common_type(t, e->type) : TYPE_FLOAT8;
            }
            if (t == TYPE_NULL)
                t = TYPE_TEXT;
            v->out.types[c] = t;
            v->out.names[c] = arena_printf(b->a, "column%d", c + 1);
        }
        for (int r = 0; r < nr; r++) {
            v->rows[r] = arena_alloc(b->a, sizeof(Value) * (size_t)(nc ? nc : 1));
            for (int c = 0; c < nc; c++) {
                PlanExpr *e = coerce_expr(b, bound[r][c], v->out.types[c], bound[r][c]->pos);
                if (!e || eval_const(b, e, &v->rows[r][c]))
                    return -1;
            }
        }
        out->node = v;
        alloc_scope(b->a, &out->scope, nc);
        for (int c = 0; c < nc; c++)
            out->scope.cols[c] = (ScopeCol){.name = v->out.names[c], .type = v->out.types[c]};
        return 0;
    }

    /* SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER (...) AS rn FROM ...) WHERE rn <= N: a Top-N. */
    if (ast_list_len(sel->from) == 1) {
        const AstTableRef *t0 = AST_AT(sel->from, 0);
        CteEnv *ce = t0->kind == TREF_NAME ? find_cte(p, t0->name) : NULL;
        const AstSelect *sub = t0->kind == TREF_SUBQUERY ? t0->subquery : ce ? ce->cte->query : NULL;
        if (sub && sub->set_op == SETOP_NONE && !sub->values) {
            int ti = row_number_target(sub);
            if (ti >= 0) {
                const AstTarget *rt = AST_AT(sub->targets, ti);
                int64_t n = 0;
                if (!rn_limit(sel->where, rt->alias ? rt->alias : "row_number", &n))
                    return werr(b->err, SQLSTATE_NOT_SUPPORTED, rt->pos,
                                "feature not supported: ROW_NUMBER() OVER without an outer filter rn <= N"),
                           werr_hint(b->err, "Top-N and deduplication: SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER "
                                             "(PARTITION BY .. ORDER BY ..) AS rn FROM ..) WHERE rn <= 3"), -1;
                if (n > 10000)
                    return werr(b->err, SQLSTATE_PROGRAM_LIMIT, sel->pos, "a Top-N keeps at most 10000 rows per partition");
                p->topn_sub = sub;
                p->topn_n = n;
            }
        }
    }
    Rel in;
    if (plan_from(p, sel, &in))
        return -1;
    /* A correlated subquery: its equalities with the outer query leave WHERE (plan_subq.c). */
    if (p->corr && p->corr->sel == sel && subq_correlate(p, sel, &in.scope, &sel))
        return -1;
    int n_subq = b->n_subq;
    const AstExpr *where = sel->where;
    if (where && ast_contains_aggregate(where))
        return werr(b->err, SQLSTATE_GROUPING_ERROR, where->pos, "aggregate functions are not allowed in WHERE");
    /* Subqueries in WHERE: [NOT] EXISTS / IN conditions become semi (anti) joins. */
    if (where && ast_contains_subquery(where) && plan_where_subqueries(p, where, &in, &where))
        return -1;
    PlanNode *cur = in.node;
    Scope scope = in.scope;

    if (where) {
        PlanExpr *pred = bind_expr(b, &scope, where);
        if (!pred || !(pred = coerce_expr(b, pred, TYPE_BOOL, where->pos))) {
            if (!b->err->set)
                werr(b->err, SQLSTATE_DATATYPE_MISMATCH, where->pos, "argument of WHERE must be type boolean");
            return -1;
        }
        PlanNode *f = new_node(p, PN_FILTER, cur);
        f->pred = pred;
        f->out = cur->out;
        f->wm_col = cur->wm_col;
        f->n_keys = cur->n_keys;
        f->keys = cur->keys;
        f->dup_keys = cur->dup_keys;
        cur = f;
    }

    Target *targets = NULL;
    int n_targets = 0;
    if (expand_targets(p, sel, &scope, &targets, &n_targets))
        return -1;

    /* DISTINCT ON sets distinct too (as Postgres's parser does): only a plain
     * DISTINCT groups the whole row. */
    bool plain_distinct = sel->distinct && !sel->distinct_on;
    /* grouped: an aggregation (GROUP BY, HAVING or an aggregate call); a
     * plain DISTINCT comes after it, over its output rows. */
    bool grouped = sel->group_by || sel->having;
    for (int i = 0; i < n_targets && !grouped; i++)
        if (targets[i].expr && ast_contains_aggregate(targets[i].expr))
            grouped = true;
    /* Subqueries in the select list: each joined to the rows as a hidden column. */
    for (int i = 0; i < n_targets; i++) {
        if (!targets[i].expr || !ast_contains_subquery(targets[i].expr))
            continue;
        if (grouped)
            return werr(b->err, SQLSTATE_NOT_SUPPORTED, targets[i].pos,
                        "feature not supported: a subquery in the select list of a grouped query"),
                   werr_hint(b->err, "Move one of them into a FROM subquery: aggregate there and add the subquery outside, or the other way round."), -1;
        Rel r = {.node = cur, .scope = scope};
        if (plan_expr_subqueries(p, targets[i].expr, &r))
            return -1;
        cur = r.node;
        scope = r.scope;
    }

    AggCtx agg = {0};
    Scope pre_scope = scope;
    Scope post_scope = scope;
    PlanExpr **texprs = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(n_targets + 1));
    const char **tnames = arena_alloc(b->a, sizeof(char *) * (size_t)(n_targets + 1));
    PlanExpr *having = NULL;

    if (grouped) {
        agg.input = &scope;
        int ng = ast_list_len(sel->group_by);
        agg.group = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(ng + 1));
        for (int i = 0; i < ng; i++) {
            const AstExpr *ge = AST_AT(sel->group_by, i);
            if (ge->kind == AST_LITERAL && ge->lit_kind == LIT_INT) {
                int k = atoi(ge->text);
                if (k < 1 || k > n_targets)
                    return werr(b->err, SQLSTATE_INVALID_COLUMN_REFERENCE, ge->pos,
                                "GROUP BY position %d is not in select list", k);
                if (!targets[k - 1].expr) {
                    agg.group[agg.n_group++] = make_col(b, targets[k - 1].star_col, scope.cols[targets[k - 1].star_col].type);
                    continue;
                }
                ge = targets[k - 1].expr;
            } else if (ge->kind == AST_COLUMN && !ge->qualifier) {
                /* An output alias used in GROUP BY (allowed by Postgres when no input column has the name). */
                bool is_input = false;
                for (int c = 0; c < scope.n; c++)
                    if (strcmp(scope.cols[c].name, ge->text) == 0)
                        is_input = true;
                if (!is_input)
                    for (int k = 0; k < n_targets; k++)
                        if (targets[k].expr && strcmp(targets[k].name, ge->text) == 0) {
                            ge = targets[k].expr;
                            break;
                        }
            }
            if (ast_contains_aggregate(ge))
                return werr(b->err, SQLSTATE_GROUPING_ERROR, ge->pos, "aggregate functions are not allowed in GROUP BY");
            PlanExpr *x = bind_expr(b, &scope, ge);
            if (!x)
                return -1;
            if (x->kind == PE_CONST && x->unknown)
                x = coerce_expr(b, x, TYPE_TEXT, ge->pos);
            bool dup = false;
            for (int k = 0; k < agg.n_group; k++)
                if (expr_equal(agg.group[k], x))
                    dup = true;
            if (!dup)
                agg.group[agg.n_group++] = x;
        }
        b->agg = &agg;
        for (int i = 0; i < n_targets; i++) {
            if (!(texprs[i] = bind_target(p, &targets[i], &scope, &scope)))
                return b->agg = NULL, -1;
            tnames[i] = targets[i].name;
        }
        if (sel->having) {
            having = bind_expr(b, &scope, sel->having);
            if (!having || !(having = coerce_expr(b, having, TYPE_BOOL, sel->having->pos)))
                return b->agg = NULL, -1;
        }
        b->agg = NULL;

        /* Pre-projection: group expressions, then aggregate arguments and filters. */
        int n_pre = agg.n_group;
        for (int i = 0; i < agg.n_aggs; i++)
            n_pre += (agg.agg_args[i] != NULL) + (agg.agg_filters[i] != NULL);
        PlanExpr **pre = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(n_pre + 1));
        const char **pre_names = arena_alloc(b->a, sizeof(char *) * (size_t)(n_pre + 1));
        int k = 0;
        for (int i = 0; i < agg.n_group; i++) {
            pre[k] = agg.group[i];
            pre_names[k++] = agg.group[i]->kind == PE_COL ? scope.cols[agg.group[i]->col].name
                                                           : arena_printf(b->a, "_group%d", i);
        }
        PlanAgg *aggs = arena_alloc(b->a, sizeof(PlanAgg) * (size_t)(agg.n_aggs + 1));
        for (int i = 0; i < agg.n_aggs; i++) {
            aggs[i] = agg.aggs[i];
            if (agg.agg_args[i]) {
                aggs[i].arg = k;
                pre[k] = agg.agg_args[i];
                /* A plain column keeps its name, so EXPLAIN reads max(url), not max(_arg1). */
                pre_names[k++] = agg.agg_args[i]->kind == PE_COL ? scope.cols[agg.agg_args[i]->col].name
                                                                 : arena_printf(b->a, "_arg%d", i);
            }
            if (agg.agg_filters[i]) {
                aggs[i].filter_col = k;
                pre[k] = agg.agg_filters[i];
                pre_names[k++] = arena_printf(b->a, "_filter%d", i);
            }
        }
        PlanNode *pp = make_project(p, cur, &scope, n_pre, pre, pre_names, NULL, &pre_scope, false);
        /* Keep qualifiers for grouped columns so `t.col` still resolves after grouping. */
        for (int i = 0; i < agg.n_group; i++)
            if (agg.group[i]->kind == PE_COL)
                pre_scope.cols[i].qualifier = scope.cols[agg.group[i]->col].qualifier;

        PlanNode *a = new_node(p, PN_AGG, pp);
        a->n_group = agg.n_group;
        a->group_cols = arena_alloc(b->a, sizeof(int) * (size_t)(agg.n_group + 1));
        for (int i = 0; i < agg.n_group; i++)
            a->group_cols[i] = i;
        a->n_aggs = agg.n_aggs;
        a->aggs = aggs;
        /* Over an append-only input nothing is retracted: the plain double
         * sum is PostgreSQL's (which adds in order, without compensation). */
        for (int i = 0; i < agg.n_aggs; i++)
            aggs[i].compensated = aggs[i].compensated && !pp->append_only;
        a->table_id = new_table(p);
        a->n_keys = agg.n_group;
        a->keys = a->group_cols;
        a->append_only = false;
        /* A GROUP BY column that is a window bound with a watermark bounds the state. */
        a->session_start_idx = a->session_end_idx = -1;
        for (int i = 0; i < agg.n_group; i++) {
            if (pre_scope.cols[i].role == ROLE_SESSION_START)
                a->session_start_idx = i;
            if (pre_scope.cols[i].role == ROLE_SESSION_END)
                a->session_end_idx = i;
        }
        if (a->session_start_idx >= 0 || a->session_end_idx >= 0) {
            if (a->session_start_idx < 0 || a->session_end_idx < 0)
                return werr(b->err, "42P20", sel->pos,
                            "a SESSION window aggregation must GROUP BY both window_start and window_end");
            a->session = true;
            a->session_gap_us = pre_scope.cols[a->session_start_idx >= 0 ? a->session_start_idx : a->session_end_idx]
                                    .win_size_us;
            a->win_group_idx = a->session_end_idx >= 0 ? a->session_end_idx : a->session_start_idx;
            if (!cur->append_only)
                return werr(b->err, SQLSTATE_NOT_SUPPORTED, sel->pos,
                            "feature not supported: SESSION windows over a changelog input");
        }
        for (int i = 0; i < agg.n_group; i++)
            a->n_group_bounds += pre_scope.cols[i].role == ROLE_WINDOW_START || pre_scope.cols[i].role == ROLE_WINDOW_END;
        for (int i = 0; i < agg.n_group && !a->session; i++) {
            ColRole r = pre_scope.cols[i].role;
            if (r == ROLE_WINDOW_END) {
                a->win_group_idx = i;
                a->win_end_offset_us = 0;
                break;
            }
            if (r == ROLE_WINDOW_START && a->win_group_idx < 0) {
                a->win_group_idx = i;
                a->win_end_offset_us = pre_scope.cols[i].win_size_us;
            }
        }
        if (a->win_group_idx >= 0)
            a->wm_col = a->win_group_idx;
        alloc_scope(b->a, &post_scope, agg.n_group + agg.n_aggs);
        for (int i = 0; i < agg.n_group; i++)
            post_scope.cols[i] = pre_scope.cols[i];
        for (int i = 0; i < agg.n_aggs; i++)
            post_scope.cols[agg.n_group + i] = (ScopeCol){.name = arena_printf(b->a, "_agg%d", i), .type = aggs[i].type};
        schema_from_scope(b->a, &a->out, &post_scope);
        cur = a;
        if (having) {
            PlanNode *f = new_node(p, PN_FILTER, cur);
            f->pred = having;
            f->out = cur->out;
            f->wm_col = cur->wm_col;
            f->n_keys = cur->n_keys;
            f->keys = cur->keys;
            cur = f;
        }
    } else {
        for (int i = 0; i < n_targets; i++) {
            if (!(texprs[i] = bind_target(p, &targets[i], &scope, &scope)))
                return -1;
            tnames[i] = targets[i].name;
        }
    }

    /* ORDER BY (ad hoc queries, and DISTINCT ON in views too) and DISTINCT ON:
     * output columns by name or ordinal, or extra hidden columns. */
    int n_out = n_targets;
    PlanOrder *order = NULL;
    int n_order = ast_list_len(sel->order_by);
    int n_don = ast_list_len(sel->distinct_on);
    int *don_cols = NULL;
    OutCols oc = {.n_targets = n_targets, .grouped = grouped, .plain_distinct = plain_distinct,
                  .agg = &agg, .scope = &scope, .cur = cur};
    bool cut = !q && (sel->limit || sel->offset); /* LIMIT inside a query: a Top-N */
    if ((n_order && (q || n_don || cut)) || n_don) {
        oc.texprs = memcpy(arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(n_targets + n_order + n_don + 1)), texprs,
                           sizeof(PlanExpr *) * (size_t)n_targets);
        oc.tnames = memcpy(arena_alloc(b->a, sizeof(char *) * (size_t)(n_targets + n_order + n_don + 1)), tnames,
                           sizeof(char *) * (size_t)n_targets);
        oc.n_out = n_targets;
        order = arena_alloc(b->a, sizeof(PlanOrder) * (size_t)(n_order + 1));
        for (int i = 0; i < n_order; i++) {
            const AstOrderItem *o = AST_AT(sel->order_by, i);
            int col = out_col(p, &oc, o->expr, "ORDER BY");
            if (col < 0)
                return -1;
            order[i] = (PlanOrder){.col = col, .desc = o->desc,
                                   .nulls_first = o->nulls == 1 || (o->nulls == 0 && o->desc)};
        }
        don_cols = arena_alloc(b->a, sizeof(int) * (size_t)(n_don + 1));
        for (int i = 0; i < n_don; i++)
            if ((don_cols[i] = out_col(p, &oc, AST_AT(sel->distinct_on, i), "DISTINCT ON")) < 0)
                return -1;
        /* Postgres: the first ORDER BY items must be DISTINCT ON expressions
         * (any order) until those are used up; the rest choose the row kept. */
        int lead = n_order < n_don ? n_order : n_don;
        for (int i = 0; i < lead; i++) {
            bool found = false;
            for (int k = 0; k < n_don; k++)
                found |= don_cols[k] == order[i].col;
            if (!found)
                return werr(b->err, SQLSTATE_INVALID_COLUMN_REFERENCE,
                            ((const AstExpr *)AST_AT(sel->distinct_on, 0))->pos,
                            "SELECT DISTINCT ON expressions must match initial ORDER BY expressions");
        }
        texprs = oc.texprs;
        tnames = oc.tnames;
        n_out = oc.n_out;
    }

    Scope final_scope;
    /* A plain DISTINCT keys its rows by the whole row: the input's key is not kept. */
    PlanNode *proj = make_project(p, cur, grouped ? &post_scope : &scope, n_out, texprs, tnames,
                                  NULL, &final_scope, p->streaming && !plain_distinct);
    for (int i = n_targets; i < n_out; i++) {
        final_scope.cols[i].hidden = true;
        proj->out.hidden[i] = true;
    }
    /* Keep qualifiers of plain column references for an enclosing query. */
    cur = proj;

    if (plain_distinct) {
        if (!(cur = make_distinct(p, cur, &final_scope, n_out, sel->pos, "SELECT DISTINCT")))
            return -1;
        final_scope.n = n_out;
    }
    if (n_don) {
        /* DISTINCT ON is the first row per key by ORDER BY: a Top-1 per
         * partition, then the row number dropped. */
        if (!(cur = make_distinct_on(p, cur, &final_scope, n_don, don_cols, n_order, order, n_targets, q != NULL)))
            return -1;
        if (!q) {
            /* The scope follows the projection's columns. */
            Scope sc;
            alloc_scope(b->a, &sc, cur->out.n);
            for (int i = 0, k = 0; i < final_scope.n; i++) {
                bool kept = i < n_targets;
                for (int j = 0; j < n_don; j++)
                    kept |= don_cols[j] == i;
                if (kept)
                    sc.cols[k++] = final_scope.cols[i];
            }
            final_scope = sc;
        }
    }

    if (q) {
        q->n_order = n_order;
        q->order = order;
    }
    if (cut) {
        if (n_don)
            return werr(b->err, SQLSTATE_NOT_SUPPORTED, sel->pos,
                        "feature not supported: DISTINCT ON with LIMIT inside a query");
        Rel r = {.node = cur, .scope = final_scope};
        if (make_limit_topn(p, sel, &r, n_order, order, n_targets))
            return -1;
        cur = r.node;
        final_scope = r.scope;
    } else if (plan_limit(p, sel, q)) {
        return -1;
    }

    out->node = cur;
    out->scope = final_scope;
    b->n_subq = n_subq; /* this select's subquery columns mean nothing outside it */
    (void)pre_scope;
    return 0;
}

/* ---- entry points -------------------------------------------------------------- */

static void init_ctx(PlanCtx *p, const PlanCatalog *cat, Arena *a, WError *err, bool streaming)
{
    memset(p, 0, sizeof *p);
    p->b.a = a;
    p->b.err = err;
    p->b.cat = cat;
    p->b.next_node_id = 1;
    p->streaming = streaming;
    p->plan_rev = PLAN_REV_CURRENT;
    p->b.plan_rev = PLAN_REV_CURRENT;
}


/* WITH (state_ttl): bounds every operator whose state is kept per key with
 * no event-time bound (regular joins, unwindowed aggregations and DISTINCT,
 * unwindowed Top-N and DISTINCT ON). Other stateful operators are bounded by
 * watermarks already, or (INTERSECT, EXCEPT) do not expire keys; a view with
 * nothing to bound is an error, so a user does not believe an option
 * protects what it does not. */
static int set_state_ttl(PlanCtx *p, const AstOption *o)
{
    int n = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        PlanNode *x = p->nodes[i];
        if ((x->kind == PN_JOIN && !x->interval) || (x->kind == PN_AGG && x->win_group_idx < 0 && !x->session) ||
            (x->kind == PN_TOPN && x->win_group_idx < 0)) {
            x->state_ttl_us = p->state_ttl_us;
            n++;
        }
    }
    if (n == 0) {
        werr(p->b.err, SQLSTATE_INVALID_PARAMETER, o->pos,
             "state_ttl bounds regular joins, aggregations and Top-N without a window, and this view has none");
        werr_hint(p->b.err, "Its state is bounded by watermarks already (or not by keys): drop the option.");
        return -1;
    }
    return 0;
}

/* The planned view whose root (materialize) node is m, over p's nodes. */
/* The width each operator emits, checked against the schema its readers
 * take from the node. The runtime sizes its chunks and its stack rows from
 * these counts and indexes one by the other: a node whose schema disagrees
 * with what its operator emits (a DISTINCT over a projection's hidden key
 * columns, issue 17) reads past a chunk. A mismatch is a planner bug: it
 * fails the statement with XX000 instead of reaching the runtime. */
static int check_widths(PlanNode *const *nodes, int n_nodes, WError *err)
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
static int check_limits(PlanNode *const *nodes, int n_nodes, int pos, WError *err)
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

static PlanView *view_of(Arena *a, const PlanCtx *p, PlanNode *m)
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

/* WITH (backfill_from = 'earliest' | 'latest' | '<timestamp>'). */
static int backfill_option(const AstOption *o, PlanStart *start, int64_t *ts, WError *err)
{
    const char *v = o->value ? o->value : "";
    if (!strcasecmp(v, "earliest"))
        *start = PLAN_START_EARLIEST;
    else if (!strcasecmp(v, "latest"))
        *start = PLAN_START_LATEST;
    else if (parse_timestamp(v, strlen(v), ts) == 0)
        *start = PLAN_START_TIMESTAMP;
    else
        return werr(err, SQLSTATE_INVALID_PARAMETER, o->pos,
                    "backfill_from must be 'earliest', 'latest' or a timestamp, not '%s'", v),
               werr_hint(err, "For example backfill_from = '2026-01-31 12:00:00' (UTC)."), -1;
    return 0;
}

/* Marks the view's Kafka sources with where to start. Only Kafka keeps a
 * log to replay: another connector is refused (0A000); views over tables
 * and views read their current rows whatever the option says, so a view
 * with no Kafka source at all is refused too. */
static int apply_backfill(Arena *a, PlanView *v, const AstOption *o, PlanStart start, int64_t ts, WError *err)
{
    int n_kafka = 0;
    for (int i = 0; i < v->n_nodes; i++) {
        PlanNode *n = v->nodes[i];
        if (n->kind != PN_SOURCE)
            continue;
        const char *conn = cat_option(n->source, "connector");
        if (!conn || strcasecmp(conn, "kafka") != 0)
            return werr(err, SQLSTATE_NOT_SUPPORTED, o->pos,
                        "feature not supported: backfill_from over source \"%s\" (connector '%s'): only Kafka "
                        "sources keep a log to replay", n->source->name, conn ? conn : "");
        n->start = start;
        n->start_ts_us = ts;
        n_kafka++;
    }
    if (!n_kafka)
        return werr(err, SQLSTATE_NOT_SUPPORTED, o->pos,
                    "feature not supported: backfill_from on a view that reads no Kafka source"),
               werr_hint(err, "A view over tables or views starts from their current rows."), -1;
    v->backfill_from = arena_strdup(a, o->value);
    return 0;
}

PlanView *plan_view(const AstCreateView *cv, const PlanCatalog *cat, const PlanViewOptions *opt, Arena *a, WError *err)
{
    PlanCtx p;
    init_ctx(&p, cat, a, err, true);
    p.allow_unbounded = opt && opt->allow_unbounded;
    if (opt)
        p.plan_rev = p.b.plan_rev = opt->plan_rev;
    BindCtx *b = &p.b;
    if (!cv->materialized) {
        werr(err, SQLSTATE_NOT_SUPPORTED, cv->query_pos, "feature not supported: non-materialized views");
        werr_hint(err, "Use CREATE MATERIALIZED VIEW.");
        return NULL;
    }
    if (cv->or_replace) {
        werr(err, SQLSTATE_NOT_SUPPORTED, cv->query_pos, "feature not supported: CREATE OR REPLACE MATERIALIZED VIEW");
        werr_hint(err, "Drop the view and create it again.");
        return NULL;
    }
    const AstOption *backfill = NULL, *ttl_opt = NULL;
    int parallelism = opt && opt->parallelism > 0 ? opt->parallelism : 1;
    PlanStart start = PLAN_START_DEFAULT;
    int64_t start_ts = 0;
    for (int i = 0; i < ast_list_len(cv->options); i++) {
        const AstOption *o = AST_AT(cv->options, i);
        if (strcasecmp(o->key, "backfill_from") == 0) {
            if (backfill_option(o, &start, &start_ts, err))
                return NULL;
            backfill = o;
            continue;
        }
        if (strcasecmp(o->key, "streaming_parallelism") == 0) {
            if (plan_parallelism_value(o->value, &parallelism)) {
                werr(err, SQLSTATE_INVALID_PARAMETER, o->pos,
                     "streaming_parallelism must be an integer from 1 to %d, not '%s'", PLAN_MAX_PARALLELISM,
                     o->value ? o->value : "");
                return NULL;
            }
            continue;
        }
        if (strcasecmp(o->key, "key_groups") == 0) {
            if (plan_key_groups_option(&p, o, err))
                return NULL;
            continue;
        }
        if (strcasecmp(o->key, "agg_phase_strategy") == 0) {
            /* Flink's table.optimizer.agg-phase-strategy (plan_dist.c, split_agg).
             * Kept in the view's text, so re-planning at start gives the same shape. */
            static const char *const strategies[] = {"auto", "one_phase", "two_phase"};
            p.agg_phase_strategy = -1;
            for (int k = 0; k < 3 && o->value; k++)
                if (strcasecmp(o->value, strategies[k]) == 0)
                    p.agg_phase_strategy = k;
            if (p.agg_phase_strategy < 0) {
                werr(err, SQLSTATE_INVALID_PARAMETER, o->pos,
                     "agg_phase_strategy must be 'auto', 'one_phase' or 'two_phase', not '%s'", o->value ? o->value : "");
                return NULL;
            }
            continue;
        }
        if (strcasecmp(o->key, "state_ttl") != 0) {
            werr(err, SQLSTATE_INVALID_PARAMETER, o->pos, "unknown view option \"%s\"", o->key);
            werr_hint(err, "View options: agg_phase_strategy, backfill_from, key_groups, state_ttl, streaming_parallelism.");
            return NULL;
        }
        Interval iv;
        int64_t us;
        if (!o->value || parse_interval(o->value, strlen(o->value), &iv) || interval_to_usecs(&iv, &us) ||
            us <= 0) {
            werr(err, SQLSTATE_INVALID_PARAMETER, o->pos, "state_ttl must be a positive interval such as '1 hour'");
            return NULL;
        }
        ttl_opt = o;
        p.state_ttl_us = us;
    }
    /* A view's rows have no order to cut (a LIMIT inside it is a Top-N). */
    if (plan_limit(&p, cv->query, NULL))
        return NULL;
    Rel r;
    if (plan_select(&p, cv->query, &r, NULL))
        return NULL;
    PlanNode *in = r.node;
    if (ttl_opt && set_state_ttl(&p, ttl_opt))
        return NULL;

    /* Emit mode and lateness apply to a window-bounded aggregation at the top. */
    PlanNode *agg = NULL;
    for (PlanNode *n = in; n && n->kind != PN_UNION && n->kind != PN_SETOP; n = n->n_inputs ? n->inputs[0] : NULL)
        if (n->kind == PN_AGG) {
            agg = n;
            break;
        }
    int64_t lateness = 0;
    if (cv->allow_lateness) {
        Scope empty = {0};
        if (const_interval_us(b, &empty, cv->allow_lateness, &lateness))
            return NULL;
        if (lateness < 0) {
            werr(err, SQLSTATE_INVALID_PARAMETER, cv->allow_lateness->pos, "ALLOW LATENESS must not be negative");
            return NULL;
        }
    }
    bool windowed = agg && agg->win_group_idx >= 0;
    PlanNode *late_win = NULL;
    if (cv->late_rows_into && !windowed) {
        werr(err, "42P20", cv->query_pos, "LATE ROWS INTO needs a windowed aggregation over a window function");
        return NULL;
    }
    if ((cv->emit == EMIT_ON_WINDOW_CLOSE || cv->allow_lateness) && !windowed) {
        werr(err, "42P20", cv->query_pos,
             "%s needs a windowed aggregation: GROUP BY window_start or window_end of a window over a source with a WATERMARK",
             cv->emit == EMIT_ON_WINDOW_CLOSE ? "EMIT ON WINDOW CLOSE" : "ALLOW LATENESS");
        return NULL;
    }
    if (agg) {
        agg->lateness_us = lateness;
        agg->emit = cv->emit == EMIT_ON_WINDOW_CLOSE ? PLAN_EMIT_ON_CLOSE : PLAN_EMIT_CHANGES;
        if (agg->emit == PLAN_EMIT_ON_CLOSE && lateness == 0)
            agg->append_only = true;
        for (int i = 0; i < agg->n_aggs; i++) {
            PlanAggKind k = agg->aggs[i].kind;
            if ((k == AGG_STRING_AGG || k == AGG_FIRST || k == AGG_LAST) && !agg->inputs[0]->append_only) {
                werr(err, SQLSTATE_NOT_SUPPORTED, cv->query_pos,
                     "feature not supported: %s over a changelog input (it depends on arrival order)",
                     k == AGG_STRING_AGG ? "string_agg" : k == AGG_FIRST ? "first_value" : "last_value");
                return NULL;
            }
        }
        /* Lateness is judged where the window is assigned, per (row, window):
         * a hopping row can be late for one window and on time for another. */
        PlanNode *win = NULL;
        for (PlanNode *n = windowed ? agg->inputs[0] : NULL; n; n = n->n_inputs == 1 ? n->inputs[0] : NULL)
            if (n->kind == PN_WINDOW) {
                win = n;
                break;
            }
        if (win && win->win_kind == WIN_SESSION) {
            /* A row's session is decided by merging: the aggregation judges lateness. */
            if (cv->late_rows_into) {
                werr(err, SQLSTATE_NOT_SUPPORTED, cv->query_pos, "feature not supported: LATE ROWS INTO with SESSION windows");
                return NULL;
            }
            win = NULL;
        }
        if (win) {
            win->late_check = true;
            win->lateness_us = lateness;
            plan_set_panes(agg, win, p.plan_rev);
        }
        if (cv->late_rows_into && !win) {
            werr(err, "42P20", cv->query_pos, "LATE ROWS INTO needs a windowed aggregation over a window function");
            return NULL;
        }
        if (cv->late_rows_into) {
            win->late_table_id = new_table(&p);
            late_win = win;
        }
        /* Propagate the changelog mode to the nodes above the aggregation. */
        for (int i = 0; i < p.n_nodes; i++) {
            PlanNode *n = p.nodes[i];
            if (n != agg && n->n_inputs && (n->kind == PN_PROJECT || n->kind == PN_FILTER))
                n->append_only = n->inputs[0]->append_only;
        }
    }

    if (check_sessions(&p))
        return NULL;
    /* A view must give the same result when its log is replayed: no clock. */
    for (int i = 0; i < p.n_nodes; i++) {
        const PlanNode *n = p.nodes[i];
        int pos = 0;
        for (int k = 0; k < n->n_exprs && !pos; k++)
            pos = expr_find_fn(n->exprs[k], FN_NOW);
        if (!pos && n->pred)
            pos = expr_find_fn(n->pred, FN_NOW);
        if (!pos && n->residual)
            pos = expr_find_fn(n->residual, FN_NOW);
        if (pos) {
            werr(err, SQLSTATE_NOT_SUPPORTED, pos > 0 ? pos : cv->query_pos,
                 "feature not supported: now() or current_timestamp in a materialized view");
            werr_hint(err, "A view is recomputed from its log after a restart and must not depend on the clock; "
                           "use the event time columns instead.");
            return NULL;
        }
    }

    PlanNode *m = new_node(&p, PN_MATERIALIZE, in);
    m->view_name = opt && opt->name ? arena_strdup(a, opt->name) : "view";
    m->table_id = new_table(&p);
    m->append_only = in->append_only;
    m->wm_col = in->wm_col;
    if (in->n_keys || !in->append_only) {
        /* Keyed rows; a retracting input without key columns is a single row
         * (a global aggregation), whose key is empty. Keys that may repeat
         * (whole rows of a join without unique keys) are counted. */
        m->counted = in->dup_keys;
        alloc_schema(a, &m->out, in->out.n);
        memcpy(m->out.names, in->out.names, sizeof(char *) * (size_t)in->out.n);
        memcpy(m->out.types, in->out.types, sizeof(TypeId) * (size_t)in->out.n);
        memcpy(m->out.hidden, in->out.hidden, sizeof(bool) * (size_t)in->out.n);
        m->n_keys = in->n_keys;
        m->keys = in->keys;
    } else {
        /* A keyless stream: every row is distinct; a hidden row id keys it. */
        m->row_id_key = true;
        alloc_schema(a, &m->out, in->out.n + 1);
        for (int i = 0; i < in->out.n; i++) {
            m->out.names[i] = in->out.names[i];
            m->out.types[i] = in->out.types[i];
            m->out.hidden[i] = in->out.hidden[i];
        }
        m->out.names[in->out.n] = "_row_id";
        m->out.types[in->out.n] = TYPE_INT8;
        m->out.hidden[in->out.n] = true;
        m->n_keys = 1;
        m->keys = arena_alloc(a, sizeof(int));
        m->keys[0] = in->out.n;
    }
    /* Duplicate output names are ambiguous for users of the view. */
    for (int i = 0; i < m->out.n; i++)
        for (int j = 0; j < i; j++)
            if (!m->out.hidden[i] && !m->out.hidden[j] && strcmp(m->out.names[i], m->out.names[j]) == 0) {
                werr(err, SQLSTATE_DUPLICATE_COLUMN, cv->query_pos,
                     "column \"%s\" specified more than once", m->out.names[i]);
                werr_hint(err, "Give the columns distinct names with AS.");
                return NULL;
            }
    if (cv->col_names) {
        int k = 0;
        for (int i = 0; i < m->out.n; i++)
            if (!m->out.hidden[i] && k < ast_list_len(cv->col_names))
                m->out.names[i] = arena_strdup(a, AST_AT(cv->col_names, k++));
        if (k != ast_list_len(cv->col_names)) {
            werr(err, SQLSTATE_SYNTAX_ERROR, cv->query_pos, "the view has %d columns but %d names were given", k,
                 ast_list_len(cv->col_names));
            return NULL;
        }
    }

    PlanView *v = view_of(a, &p, m);
    v->counted = m->counted;
    v->emit = agg ? agg->emit : PLAN_EMIT_CHANGES;
    if (backfill && apply_backfill(a, v, backfill, start, start_ts, err))
        return NULL;
    if (late_win) {
        v->late_name = arena_strdup(a, cv->late_rows_into);
        v->late_table_id = late_win->late_table_id;
        int nw = late_win->out.n;
        alloc_schema(a, &v->late_schema, nw + 1);
        for (int i = 0; i < nw; i++) {
            v->late_schema.names[i] = late_win->out.names[i];
            v->late_schema.types[i] = late_win->out.types[i];
            v->late_schema.hidden[i] = late_win->out.hidden[i];
        }
        v->late_schema.names[nw] = "watermark";
        v->late_schema.types[nw] = TYPE_TIMESTAMP;
    }
    plan_prune_joins(a, v);
    /* Before the distribution: a shared node's readers each get the
     * exchange they need from it (planner/README.md "Shared sub-plans"). */
    if (p.plan_rev >= 2 && plan_share(a, v)) {
        p.nodes = v->nodes;
        p.n_nodes = v->n_nodes;
    }
    if (plan_distribute(&p, v, parallelism) || check_widths(v->nodes, v->n_nodes, err) ||
        check_limits(v->nodes, v->n_nodes, cv->query_pos, err))
        return NULL;
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

/* INCLUDE key | partition | offset | timestamp [AS name]: columns n_decl..
 * after the declared ones, filled by the source from each Kafka record
 * (RisingWave's default names when there is no AS). */
static int include_columns(const AstCreateSource *cs, int n_decl, const char **names, TypeId *types, Scope *s,
                           CatRelation *rel, Arena *a, WError *err)
{
    static const struct {
        const char *what, *name;
        CatMeta meta;
        TypeId type;
    } KINDS[] = {{"key", "_rw_kafka_key", CAT_META_KEY, TYPE_BYTEA},
                 {"partition", "_rw_kafka_partition", CAT_META_PARTITION, TYPE_INT4},
                 {"offset", "_rw_kafka_offset", CAT_META_OFFSET, TYPE_INT8},
                 {"timestamp", "_rw_kafka_timestamp", CAT_META_TIMESTAMP, TYPE_TIMESTAMPTZ}};
    int n = n_decl + ast_list_len(cs->includes);
    uint8_t *meta = arena_zalloc(a, (size_t)n);
    for (int i = n_decl; i < n; i++) {
        const AstInclude *inc = AST_AT(cs->includes, i - n_decl);
        int k = -1;
        for (int j = 0; j < 4 && k < 0; j++)
            if (strcasecmp(inc->what, KINDS[j].what) == 0)
                k = j;
        if (k < 0)
            return werr(err, SQLSTATE_SYNTAX_ERROR, inc->pos, "INCLUDE %s: the record has key, partition, offset and "
                        "timestamp", inc->what);
        for (int j = n_decl; j < i; j++)
            if (meta[j] == KINDS[k].meta)
                return werr(err, SQLSTATE_DUPLICATE_COLUMN, inc->pos, "INCLUDE %s specified more than once",
                            KINDS[k].what);
        names[i] = arena_strdup(a, inc->alias ? inc->alias : KINDS[k].name);
        for (int j = 0; j < i; j++)
            if (strcmp(names[j], names[i]) == 0)
                return werr(err, SQLSTATE_DUPLICATE_COLUMN, inc->pos, "column \"%s\" specified more than once",
                            names[i]);
        types[i] = KINDS[k].type;
        meta[i] = (uint8_t)KINDS[k].meta;
        s->cols[i] = (ScopeCol){.name = names[i], .type = types[i]};
    }
    rel->col_meta = meta;
    return 0;
}

/* The columns, primary key (tables only) and watermark of CREATE SOURCE or
 * CREATE TABLE, bound into rel. */
static int bind_columns(const AstCreateSource *cs, CatRelation *rel, bool table, Arena *a, WError *err)
{
    PlanCtx p;
    init_ctx(&p, NULL, a, err, false);
    BindCtx *b = &p.b;
    const char *what = table ? "table" : "source";
    int n_decl = ast_list_len(cs->columns), n_inc = ast_list_len(cs->includes), n = n_decl + n_inc;
    if (n_decl == 0)
        return werr(err, SQLSTATE_SYNTAX_ERROR, 0, "a %s needs at least one column", what);
    const char *conn = cat_option(rel, "connector");
    bool kafka_table = table && conn && strcasecmp(conn, "kafka") == 0;
    if (cs->includes) {
        const AstInclude *inc = AST_AT(cs->includes, 0);
        if (table ? !kafka_table : !conn || strcasecmp(conn, "kafka") != 0)
            return werr(err, SQLSTATE_NOT_SUPPORTED, inc->pos, "feature not supported: INCLUDE on a %s",
                        table ? "table without a Kafka connector" : "source that does not read Kafka"),
                   werr_hint(err, "INCLUDE adds the Kafka record's key, partition, offset or timestamp to a source "
                                  "or a table over Kafka."), -1;
    }
    if (n > WEIR_MAX_COLUMNS)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "%ss can have at most %d columns", what, WEIR_MAX_COLUMNS);
    const char **names = arena_alloc(a, sizeof(char *) * (size_t)n);
    TypeId *types = arena_alloc(a, sizeof(TypeId) * (size_t)n);
    bool *not_null = arena_zalloc(a, sizeof(bool) * (size_t)n);
    Scope s;
    alloc_scope(a, &s, n);
    const PlanExpr **gen = NULL;
    int32_t *typmod = NULL;
    for (int i = 0; i < n_decl; i++) {
        const AstColumnDef *c = AST_AT(cs->columns, i);
        for (int j = 0; j < i; j++)
            if (strcmp(names[j], c->name) == 0)
                return werr(err, SQLSTATE_DUPLICATE_COLUMN, c->pos, "column \"%s\" specified more than once", c->name);
        names[i] = arena_strdup(a, c->name);
        if (c->generated) {
            /* A writable table's rows come from DML, which would have to
             * compute them; a table over Kafka computes them as a source does. */
            if (table && !kafka_table)
                return werr(err, SQLSTATE_NOT_SUPPORTED, c->pos,
                            "feature not supported: computed columns in a table without a connector"),
                       werr_hint(err, "Compute the column in a view over the table."), -1;
            if (!gen)
                gen = arena_zalloc(a, sizeof *gen * (size_t)n);
            /* Bound below, once the columns it may read are known; until
             * then no expression can name it (a computed column reads only
             * columns of the records, as in Flink). */
            s.cols[i] = (ScopeCol){.name = "", .type = TYPE_NULL, .hidden = true};
            continue;
        }
        if (c->primary_key && !table)
            return werr(err, SQLSTATE_NOT_SUPPORTED, c->pos, "feature not supported: PRIMARY KEY on a source"),
                   werr_hint(err, "Use CREATE TABLE for a relation keyed by a primary key."), -1;
        TypeId t = type_from_name(c->type_name);
        if (t == TYPE_NULL)
            return werr(err, SQLSTATE_UNDEFINED_OBJECT, c->pos, "type \"%s\" does not exist", c->type_name);
        int prec, scale, mod = type_numeric_mod(c->type_name, &prec, &scale, err);
        if (mod < 0)
            return err->pos = c->pos, -1;
        if (mod) {
            if (!typmod) {
                typmod = arena_alloc(a, sizeof *typmod * (size_t)n);
                for (int k = 0; k < n; k++)
                    typmod[k] = -1;
            }
            typmod[i] = NUM_TYPMOD(prec, scale);
        }
        types[i] = t;
        not_null[i] = c->not_null;
        s.cols[i] = (ScopeCol){.name = names[i], .type = t};
    }
    if (n_inc && include_columns(cs, n_decl, names, types, &s, rel, a, err))
        return -1;
    for (int i = 0; gen && i < n_decl; i++) {
        const AstColumnDef *c = AST_AT(cs->columns, i);
        if (!c->generated)
            continue;
        const AstExpr *g = c->generated;
        if (g->kind == AST_FUNC && strcmp(g->text, "proctime") == 0 && ast_list_len(g->args) == 0) {
            /* A processing-time attribute: the wall clock as the row is read. */
            PlanExpr *e = arena_zalloc(a, sizeof *e);
            *e = (PlanExpr){.kind = PE_CALL, .fn = FN_PROCTIME, .type = TYPE_TIMESTAMPTZ, .pos = g->pos};
            gen[i] = e;
            types[i] = TYPE_TIMESTAMPTZ;
            continue;
        }
        PlanExpr *e = bind_expr(b, &s, g);
        if (!e)
            return -1;
        if (expr_find_fn(e, FN_NOW) || expr_find_fn(e, FN_PROCTIME))
            return werr(err, SQLSTATE_NOT_SUPPORTED, g->pos,
                        "feature not supported: now() in a computed column (it would be the time of CREATE SOURCE)");
        if (e->type == TYPE_NULL && !(e = coerce_expr(b, e, TYPE_TEXT, c->generated->pos)))
            return -1;
        gen[i] = e;
        types[i] = e->type;
    }
    for (int i = 0; gen && i < n; i++)
        if (gen[i])
            s.cols[i] = (ScopeCol){.name = names[i], .type = types[i]};
    rel->col_gen = gen;
    if (cs->primary_key && !table)
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0, "feature not supported: PRIMARY KEY on a %s", what);
    if (table) {
        /* The key: a table-level PRIMARY KEY (a, b) or one column-level PRIMARY KEY. */
        int npk = ast_list_len(cs->primary_key), *pk = arena_alloc(a, sizeof(int) * (size_t)(n + 1));
        for (int i = 0; i < n_decl; i++) { /* INCLUDE columns come after the declared ones */
            const AstColumnDef *c = AST_AT(cs->columns, i);
            if (!c->primary_key)
                continue;
            if (npk)
                return werr(err, "42P16", c->pos, "multiple primary keys for table \"%s\" are not allowed", cs->name);
            pk[0] = i;
            rel->n_pk = 1;
        }
        for (int k = 0; k < npk; k++) {
            const char *name = AST_AT(cs->primary_key, k);
            int c = -1;
            for (int i = 0; i < n; i++)
                if (strcmp(names[i], name) == 0)
                    c = i;
            if (c < 0)
                return werr(err, SQLSTATE_UNDEFINED_COLUMN, 0, "column \"%s\" named in key does not exist", name);
            for (int j = 0; j < k; j++)
                if (pk[j] == c)
                    return werr(err, SQLSTATE_DUPLICATE_COLUMN, 0, "column \"%s\" appears twice in primary key constraint",
                                name);
            pk[k] = c;
            rel->n_pk = npk;
        }
        /* A delete (a tombstone, Debezium's "before") names its row by the
         * key the record carries: key columns must be read from the records. */
        for (int k = 0; k < rel->n_pk; k++)
            if ((gen && gen[pk[k]]) || (rel->col_meta && rel->col_meta[pk[k]]))
                return werr(err, SQLSTATE_NOT_SUPPORTED, 0,
                            "feature not supported: a primary key on %s column \"%s\"",
                            gen && gen[pk[k]] ? "computed" : "INCLUDE", names[pk[k]]),
                       werr_hint(err, "The key must be a column of the records' JSON."), -1;
        if (!rel->n_pk)
            return werr(err, "42P16", 0, "table \"%s\" needs a PRIMARY KEY", cs->name),
                   werr_hint(err, "weir keeps a table's rows by key: declare PRIMARY KEY (col, ...)."), -1;
        for (int k = 0; k < rel->n_pk; k++) {
            not_null[pk[k]] = true; /* as in Postgres, key columns are NOT NULL */
            if (types[pk[k]] == TYPE_JSONB || types[pk[k]] == TYPE_FLOAT8 || types[pk[k]] == TYPE_FLOAT4)
                return werr(err, SQLSTATE_DATATYPE_MISMATCH, 0, "a primary key column cannot be of type %s",
                            type_name(types[pk[k]]));
        }
        rel->pk = pk;
    }
    rel->n_cols = n;
    rel->col_names = names;
    rel->col_types = types;
    rel->col_not_null = not_null;
    rel->col_typmod = typmod;
    rel->wm_col = -1;
    rel->wm_delay_us = -1;
    rel->append_only = true;
    if (cs->wm_column) {
        int c = -1;
        for (int i = 0; i < n; i++)
            if (strcmp(names[i], cs->wm_column) == 0)
                c = i;
        if (c < 0)
            return werr(err, SQLSTATE_UNDEFINED_COLUMN, cs->wm_pos, "column \"%s\" does not exist", cs->wm_column);
        if (types[c] != TYPE_TIMESTAMP && types[c] != TYPE_TIMESTAMPTZ)
            return werr(err, SQLSTATE_DATATYPE_MISMATCH, cs->wm_pos,
                        "the WATERMARK column must be TIMESTAMP or TIMESTAMPTZ, not %s", type_name(types[c]));
        PlanExpr *e = bind_expr(b, &s, cs->wm_expr);
        if (!e)
            return -1;
        if (e->type != types[c] && !(e = coerce_expr(b, e, types[c], cs->wm_expr->pos)))
            return -1;
        rel->wm_col = c;
        rel->wm_expr = e;
        /* Recognise `col - INTERVAL` to show the delay and let the runtime take a fast path. */
        if (e->kind == PE_COL && e->col == c)
            rel->wm_delay_us = 0;
        else if (e->kind == PE_CALL && e->fn == FN_TS_SUB_IV && e->args[0]->kind == PE_COL &&
                 e->args[0]->col == c && e->args[1]->kind == PE_CONST &&
                 interval_to_usecs(&e->args[1]->value.u.iv, &rel->wm_delay_us) == 0) {
        } else {
            rel->wm_delay_us = -1;
        }
    }
    for (int i = 0; gen && i < n; i++) {
        if (!gen[i] || gen[i]->kind != PE_CALL || gen[i]->fn != FN_PROCTIME)
            continue;
        if (rel->wm_col < 0) {
            /* The processing-time attribute is the time windows run on: its
             * own watermark, as in Flink, where a PROCTIME() column needs none. */
            rel->wm_col = i;
            rel->wm_expr = make_col(b, i, TYPE_TIMESTAMPTZ);
            rel->wm_delay_us = 0;
        }
        rel->proctime_wm |= rel->wm_col == i;
    }
    return 0;
}

int plan_source(const AstCreateSource *cs, CatRelation *rel, Arena *a, WError *err)
{
    return bind_columns(cs, rel, false, a, err);
}

PlanView *plan_table(const AstCreateSource *cs, CatRelation *rel, const PlanCatalog *cat, Arena *a, WError *err)
{
    if (bind_columns(cs, rel, true, a, err))
        return NULL;
    bool writable = !cat_option(rel, "connector");
    rel->kind = CAT_TABLE;
    rel->materialized = true;
    /* Only a writable APPEND ONLY table is append-only: the server refuses
     * its UPDATE/DELETE and duplicate keys, so its changelog has only +I. */
    rel->append_only = writable && cs->append_only;
    PlanCtx p;
    init_ctx(&p, cat, a, err, true);
    PlanNode *in = new_node(&p, writable ? PN_TABLE_WRITE : PN_SOURCE, NULL);
    in->source = rel;
    in->append_only = rel->append_only; /* DML and upsert topics carry deletes */
    if (!writable)
        in->table_id = new_table(&p); /* the topic's offsets */
    alloc_schema(a, &in->out, rel->n_cols);
    for (int i = 0; i < rel->n_cols; i++) {
        in->out.names[i] = rel->col_names[i];
        in->out.types[i] = rel->col_types[i];
    }
    if (rel->col_gen) {
        /* Computed columns, as on a source: after the decoding, before the
         * watermark. A delete's row has only its key; its computed columns
         * come out NULL and the materialize reads the key alone. */
        PlanNode *pr = new_node(&p, PN_PROJECT, in);
        pr->out = in->out;
        pr->append_only = in->append_only;
        pr->n_exprs = rel->n_cols;
        pr->exprs = arena_alloc(a, sizeof(PlanExpr *) * (size_t)rel->n_cols);
        for (int i = 0; i < rel->n_cols; i++)
            pr->exprs[i] = rel->col_gen[i] ? (PlanExpr *)rel->col_gen[i] : make_col(&p.b, i, rel->col_types[i]);
        in = pr;
    }
    if (rel->wm_col >= 0) {
        PlanNode *w = new_node(&p, PN_WATERMARK, in);
        w->out = in->out;
        w->wm_col = rel->wm_col;
        w->wm_expr = (PlanExpr *)rel->wm_expr;
        w->wm_delay_us = rel->wm_delay_us;
        w->table_id = new_table(&p);
        in = w;
    }
    PlanNode *m = new_node(&p, PN_MATERIALIZE, in);
    m->view_name = rel->name;
    m->upsert = true;
    m->table_id = new_table(&p);
    m->append_only = rel->append_only;
    m->wm_col = rel->wm_col;
    m->out = in->out;
    m->n_keys = rel->n_pk;
    m->keys = (int *)rel->pk;
    /* Readers see the rows and the watermark through the table's changelog:
     * they must not generate the watermark again. */
    rel->topic_wm_expr = writable ? NULL : rel->wm_expr;
    rel->wm_expr = NULL;
    rel->table_id = m->table_id;
    PlanView *v = view_of(a, &p, m);
    v->emit = PLAN_EMIT_CHANGES;
    return v;
}

int plan_const_expr(const AstExpr *e, TypeId want, Arena *a, Value *out, WError *err)
{
    PlanCtx p;
    init_ctx(&p, NULL, a, err, false);
    Scope empty = {0};
    PlanExpr *x = bind_expr(&p.b, &empty, e);
    if (!x)
        return -1;
    /* Assignment context (INSERT values): like Postgres, any castable value
     * is accepted and checked when cast (e.g. 3 into a SMALLINT, 2.5 into a REAL).
     * A decimal literal into a NUMERIC takes its own digits (coerce_expr). */
    bool literal = x->kind == PE_CONST && (x->unknown || x->value.null || (x->decimal_text && want == TYPE_NUMERIC));
    if (x->type != want && !literal) {
        Value v;
        if (eval_const(&p.b, x, &v))
            return -1;
        if (scalar_cast(&v, want, a, out, err)) {
            if (err->pos == 0)
                err->pos = e->pos;
            return -1;
        }
        return 0;
    }
    if (!(x = coerce_expr(&p.b, x, want, e->pos)))
        return -1;
    return eval_const(&p.b, x, out);
}
