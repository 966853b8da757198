/*
 * plan_join.c: the join classification pass. A regular join's bound
 * condition (USING's equalities, then ON's conjuncts, all kept) is sorted
 * into what its operator needs: equality keys (a column of each side, equal
 * types) that hash both sides; bounds on the difference of the two event
 * times (an interval join when both exist over append-only inputs; equal
 * window ends make a window join, bounds [0, 0]); the rest is a residual
 * checked per pair. Then the join's output: changelog mode, watermark
 * column and key. Temporal joins are temporal.c's.
 */
#include "planner_int.h"

#include <string.h>

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

/* A join condition, classified (join_classify). */
typedef struct JoinClass {
    int nk;                  /* equality keys: lk[i] (left column) = rk[i] (right column) */
    int *lk, *rk;
    int tl, tr;              /* the event-time (or window end) column of each side, -1 none */
    bool have_lo, have_hi;   /* bounds of right time - left time found */
    int64_t lo, hi;          /* microseconds, inclusive */
    bool window_join;        /* equal window ends of two windowed inputs */
    bool *used;              /* per condition: an equality key */
    bool *is_time;           /* per condition: a time bound */
} JoinClass;

/* The bound conditions of a join over sc (l's nl columns, then r's nr):
 * USING's equalities (hiding the right copy of each column), then ON's
 * conjuncts. *conds gets them (*nc). 0, or -1 with err. */
static int join_conditions(PlanCtx *p, const AstExpr *on, AstList *using_cols, Scope *sc, int nl, int nr, int pos,
                           PlanExpr ***conds_out, int *nc_out)
{
    BindCtx *b = &p->b;
    /* USING's equalities, then ON's conjuncts: every one is kept (none dropped at a cap). */
    int n_using = ast_list_len(using_cols);
    PlanExpr *on_e = NULL;
    if (on) {
        on_e = bind_expr(b, sc, on);
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
                if (strcmp(sc->cols[k].name, name) == 0)
                    lc = k;
            for (int k = 0; k < nr; k++)
                if (strcmp(sc->cols[nl + k].name, name) == 0)
                    rc = nl + k;
            if (lc < 0 || rc < 0)
                return werr(b->err, SQLSTATE_UNDEFINED_COLUMN, pos,
                            "column \"%s\" specified in USING clause does not exist in %s table", name,
                            lc < 0 ? "left" : "right");
            PlanExpr *x = make_col(b, lc, sc->cols[lc].type), *y = make_col(b, rc, sc->cols[rc].type);
            TypeId t = sc->cols[lc].type;
            if (t != sc->cols[rc].type && !(y = coerce_expr(b, y, t, pos)))
                return -1;
            PlanExpr *args[2] = {x, y};
            PlanExpr *eq = arena_zalloc(b->a, sizeof *eq);
            *eq = (PlanExpr){.kind = PE_CALL, .fn = FN_EQ, .type = TYPE_BOOL, .pos = pos, .n_args = 2,
                             .args = arena_alloc(b->a, sizeof(PlanExpr *) * 2)};
            eq->args[0] = args[0];
            eq->args[1] = args[1];
            conds[nc++] = eq;
            /* The column appears once, as in Postgres: the right copy is hidden. */
            sc->cols[rc].hidden = true;
        }
    }
    for (int i = 0; i < n_on; i++)
        conds[nc++] = on_conds[i];
    *conds_out = conds;
    *nc_out = nc;
    return 0;
}

/* An equality of a left and a right column of one type: a hash key; equal
 * window ends also bound the join in time (a window join, Flink's). */
static bool class_equality(const PlanExpr *c, const Scope *sc, int nl, JoinClass *jc)
{
    const PlanExpr *x = c->args[0], *y = c->args[1];
    if (!(c->fn == FN_EQ && x->kind == PE_COL && y->kind == PE_COL && ((x->col < nl) != (y->col < nl)) &&
          x->type == y->type))
        return false;
    int nk = jc->nk;
    jc->lk[nk] = x->col < nl ? x->col : y->col;
    jc->rk[nk] = (x->col < nl ? y->col : x->col) - nl;
    /* A window join (Flink's): equal window ends of two windowed streams.
     * Rows can only meet within one window, so it is also an interval
     * join on window_end with bounds [0, 0]: a side's rows are dropped
     * once the other side's watermark passes their window's end, and
     * outer rows are padded then, once. */
    if (sc->cols[x->col].role == ROLE_WINDOW_END && sc->cols[y->col].role == ROLE_WINDOW_END &&
        (jc->tl < 0 || jc->tl == jc->lk[nk]) && (jc->tr < 0 || jc->tr == jc->rk[nk])) {
        jc->tl = jc->lk[nk];
        jc->tr = jc->rk[nk];
        jc->window_join = true;
        if (!jc->have_lo || jc->lo < 0)
            jc->lo = 0;
        if (!jc->have_hi || jc->hi > 0)
            jc->hi = 0;
        jc->have_lo = jc->have_hi = true;
    }
    jc->nk++;
    return true;
}

/* A comparison of the two sides' event times (each maybe plus or minus a
 * constant interval): a bound on right time - left time. */
static bool class_time_bound(const PlanExpr *c, const Scope *sc, int nl, JoinClass *jc)
{
    const PlanExpr *x = c->args[0], *y = c->args[1];
    int cx, cy;
    int64_t ox, oy;
    if (!((c->fn == FN_GE || c->fn == FN_GT || c->fn == FN_LE || c->fn == FN_LT) && time_term(x, &cx, &ox) &&
          time_term(y, &cy, &oy) && ((cx < nl) != (cy < nl)) && sc->cols[cx].role == ROLE_EVENT_TIME &&
          sc->cols[cy].role == ROLE_EVENT_TIME))
        return false;
    /* Normalise to d = right - left compared with a constant. */
    bool x_right = cx >= nl;
    int lc = x_right ? cy : cx, rcol = x_right ? cx : cy;
    if ((jc->tl >= 0 && jc->tl != lc) || (jc->tr >= 0 && jc->tr != rcol - nl))
        return false;
    jc->tl = lc;
    jc->tr = rcol - nl;
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
        if (!jc->have_lo || v > jc->lo)
            jc->lo = v;
        jc->have_lo = true;
    } else {
        int64_t v = f == FN_LT ? k - 1 : k;
        if (!jc->have_hi || v < jc->hi)
            jc->hi = v;
        jc->have_hi = true;
    }
    return true;
}

/* Classify: equal columns across the sides become the hash key; bounds
 * on the difference of the two event times make an interval join. */
static void join_classify(Arena *a, PlanExpr **conds, int nc, const Scope *sc, int nl, JoinClass *jc)
{
    *jc = (JoinClass){.lk = arena_alloc(a, sizeof(int) * (size_t)(nc + 1)),
                      .rk = arena_alloc(a, sizeof(int) * (size_t)(nc + 1)),
                      .used = arena_zalloc(a, sizeof(bool) * (size_t)(nc + 1)),
                      .is_time = arena_zalloc(a, sizeof(bool) * (size_t)(nc + 1)),
                      .tl = -1, .tr = -1, .lo = INT64_MIN, .hi = INT64_MAX};
    for (int i = 0; i < nc; i++) {
        PlanExpr *c = conds[i];
        if (c->kind != PE_CALL || c->n_args != 2)
            continue;
        if (class_equality(c, sc, nl, jc))
            jc->used[i] = true;
        else if (class_time_bound(c, sc, nl, jc))
            jc->is_time[i] = true;
    }
}

/* The conditions that are neither keys nor (in an interval join) time
 * bounds, AND-ed in their order; NULL when none. */
static PlanExpr *join_residual(Arena *a, PlanExpr **conds, int nc, const JoinClass *jc, bool interval)
{
    PlanExpr *residual = NULL;
    for (int i = 0; i < nc; i++) {
        if (jc->used[i] || (interval && jc->is_time[i]))
            continue;
        if (!residual) {
            residual = conds[i];
        } else {
            PlanExpr *args[2] = {residual, conds[i]};
            PlanExpr *x = arena_zalloc(a, sizeof *x);
            *x = (PlanExpr){.kind = PE_CALL, .fn = FN_AND, .type = TYPE_BOOL, .pos = conds[i]->pos, .n_args = 2,
                            .args = arena_alloc(a, sizeof(PlanExpr *) * 2)};
            x->args[0] = args[0];
            x->args[1] = args[1];
            residual = x;
        }
    }
    return residual;
}

/* The join's changelog mode, watermark column, time roles (sc) and key. */
static void join_output(Arena *a, PlanNode *j, const Rel *l, const Rel *r, Scope *sc, bool interval)
{
    int nl = l->scope.n, nr = r->scope.n;
    bool outer = j->join_type != JOIN_INNER;
    j->append_only = l->node->append_only && r->node->append_only && (interval || !outer);
    j->wm_col = l->node->wm_col >= 0 ? l->node->wm_col : (r->node->wm_col >= 0 ? nl + r->node->wm_col : -1);
    if (!interval) {
        /* An outer row becomes padded when its partner goes: only the time columns of
         * inner joins keep their watermark meaning. */
        if (outer)
            j->wm_col = -1;
        for (int i = 0; i < nl + nr; i++)
            if (sc->cols[i].role == ROLE_EVENT_TIME && outer)
                sc->cols[i].role = ROLE_NONE;
    }
    if (j->append_only)
        return;
    if (l->node->n_keys && r->node->n_keys && !l->node->dup_keys && !r->node->dup_keys) {
        j->n_keys = l->node->n_keys + r->node->n_keys;
        j->keys = arena_alloc(a, sizeof(int) * (size_t)j->n_keys);
        for (int i = 0; i < l->node->n_keys; i++)
            j->keys[i] = l->node->keys[i];
        for (int i = 0; i < r->node->n_keys; i++)
            j->keys[l->node->n_keys + i] = nl + r->node->keys[i];
        /* Padded rows have NULL keys on one side: still unique per row. */
    } else {
        j->n_keys = nl + nr;
        j->keys = arena_alloc(a, sizeof(int) * (size_t)j->n_keys);
        for (int i = 0; i < j->n_keys; i++)
            j->keys[i] = i;
        j->dup_keys = true;
    }
}

int make_join(PlanCtx *p, AstJoinType type, const AstExpr *on, AstList *using_cols, Rel *l, Rel *r, int pos, Rel *out)
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
    PlanExpr **conds = NULL;
    int nc = 0;
    if (join_conditions(p, on, using_cols, &sc, nl, nr, pos, &conds, &nc))
        return -1;
    JoinClass jc;
    join_classify(b->a, conds, nc, &sc, nl, &jc);
    bool interval = p->streaming && jc.have_lo && jc.have_hi && l->node->append_only && r->node->append_only;
    PlanExpr *residual = join_residual(b->a, conds, nc, &jc, interval);
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
    if (interval && jc.lo > jc.hi)
        return werr(b->err, SQLSTATE_INVALID_PARAMETER, pos, "the join's time bounds are empty (lower bound above upper)");
    j->n_join_keys = jc.nk;
    j->left_keys = jc.lk;
    j->right_keys = jc.rk;
    j->residual = residual;
    j->interval = interval;
    if (interval) {
        j->left_time_col = jc.tl;
        j->right_time_col = jc.tr;
        j->lo_us = jc.lo;
        j->hi_us = jc.hi;
        j->window_join = jc.window_join && jc.lo == 0 && jc.hi == 0;
    }
    j->table_id = new_table(p);
    j->table_id2 = new_table(p);
    schema_from_scope(b->a, &j->out, &sc);
    join_output(b->a, j, l, r, &sc, interval);
    out->node = j;
    out->scope = sc;
    return 0;
}
