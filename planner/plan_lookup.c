/*
 * plan_lookup.c: key lookups for ad hoc queries.
 *
 * A materialized view's rows are stored in key order (key_encode of its
 * primary key), so `SELECT ... FROM v WHERE k = $1` need not read the whole
 * view: a scan restricted to the keys starting with the encoding of $1
 * reads one row. This pass looks at each PN_FILTER directly over a
 * PN_VIEW_SCAN and, from the AND-ed conjuncts of its predicate, takes
 *   - `key_i = constant` for the leading key columns (a key prefix), then
 *   - `key_j >= / > / <= / < constant` and BETWEEN on the next one (a range),
 * with the constant of exactly the key column's type (so its encoding is
 * the stored one). The filter stays: it still decides each row, so the
 * bounds only have to contain the answer (> is read as >=, < as <=).
 * Views whose keys are hashes of whole rows (counted views) and interval
 * keys (equal intervals may be stored differently) are left alone.
 */
#include "planner_int.h"

#include <string.h>

#include "scalar.h"

/* A constant expression's value (constants and calls over constants), or -1. */
static int const_value(const PlanExpr *e, Arena *a, Value *out)
{
    if (e->kind == PE_CONST) {
        *out = e->value;
        out->type = e->type;
        return 0;
    }
    if (e->kind != PE_CALL || e->n_args > 8)
        return -1;
    Value args[8];
    for (int i = 0; i < e->n_args; i++)
        if (const_value(e->args[i], a, &args[i]))
            return -1;
    WError err = {0};
    if (scalar_call(e->fn, e->type, e->n_args, args, a, out, &err))
        return -1;   /* the filter reports it when it runs */
    out->type = e->type;
    return 0;
}

typedef struct Bounds {
    const PlanNode *scan;
    Value *eq;          /* per key position */
    bool *has_eq;
    Value *lo, *hi;     /* per key position */
    bool *has_lo, *has_hi;
} Bounds;

/* The key position of input column col, or -1. */
static int key_pos(const PlanNode *scan, int col)
{
    for (int i = 0; i < scan->n_keys; i++)
        if (scan->keys[i] == col)
            return i;
    return -1;
}

/* col OP constant (either side), with col a key column of the scan's type. */
static void comparison(Bounds *b, const PlanExpr *e, Arena *a)
{
    if (e->kind != PE_CALL || e->n_args != 2)
        return;
    ScalarFn fn = e->fn;
    if (fn != FN_EQ && fn != FN_LT && fn != FN_LE && fn != FN_GT && fn != FN_GE)
        return;
    const PlanExpr *c = e->args[0], *k = e->args[1];
    if (c->kind != PE_COL) {
        const PlanExpr *t = c;
        c = k;
        k = t;
        /* 5 < col is col > 5 */
        fn = fn == FN_LT ? FN_GT : fn == FN_LE ? FN_GE : fn == FN_GT ? FN_LT : fn == FN_GE ? FN_LE : fn;
    }
    if (c->kind != PE_COL)
        return;
    int pos = key_pos(b->scan, c->col);
    TypeId t = b->scan->out.types[c->col];
    if (pos < 0 || c->type != t || type_phys(t) == PHYS_IV)
        return;
    Value v;
    if (const_value(k, a, &v) || v.null || v.type != t)
        return;
    if (fn == FN_EQ && !b->has_eq[pos]) {
        b->eq[pos] = v;
        b->has_eq[pos] = true;
    } else if ((fn == FN_GT || fn == FN_GE) && !b->has_lo[pos]) {
        b->lo[pos] = v;
        b->has_lo[pos] = true;
    } else if ((fn == FN_LT || fn == FN_LE) && !b->has_hi[pos]) {
        b->hi[pos] = v;
        b->has_hi[pos] = true;
    }
}

static void bound_conjuncts(Bounds *b, const PlanExpr *e, Arena *a)
{
    if (e->kind == PE_CALL && e->fn == FN_AND) {
        for (int i = 0; i < e->n_args; i++)
            bound_conjuncts(b, e->args[i], a);
        return;
    }
    comparison(b, e, a);
}

static void lookup(PlanNode *scan, const PlanExpr *pred, Arena *a)
{
    int n = scan->n_keys;
    Bounds b = {.scan = scan};
    b.eq = arena_zalloc(a, sizeof(Value) * (size_t)n);
    b.lo = arena_zalloc(a, sizeof(Value) * (size_t)n);
    b.hi = arena_zalloc(a, sizeof(Value) * (size_t)n);
    b.has_eq = arena_zalloc(a, (size_t)n);
    b.has_lo = arena_zalloc(a, (size_t)n);
    b.has_hi = arena_zalloc(a, (size_t)n);
    bound_conjuncts(&b, pred, a);
    int k = 0;
    while (k < n && b.has_eq[k])
        k++;
    if (k == 0 && !b.has_lo[0] && !b.has_hi[0])
        return;
    scan->n_scan_eq = k;
    scan->scan_eq = b.eq;
    if (k < n) {
        scan->scan_lo = b.has_lo[k] ? &b.lo[k] : NULL;
        scan->scan_hi = b.has_hi[k] ? &b.hi[k] : NULL;
    }
}

void plan_key_lookups(PlanQuery *q, Arena *a)
{
    for (int i = 0; i < q->n_nodes; i++) {
        PlanNode *f = q->nodes[i];
        if (f->kind != PN_FILTER || f->n_inputs != 1 || !f->pred)
            continue;
        PlanNode *s = f->inputs[0];
        if (s->kind != PN_VIEW_SCAN || s->n_keys == 0 || s->dup_keys || (s->scan_rel && s->scan_rel->counted))
            continue;
        lookup(s, f->pred, a);
    }
}
