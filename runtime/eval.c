/*
 * eval.c: vectorized expression evaluation.
 *
 * An expression is evaluated a column at a time: arguments first (each a
 * whole column), then the function over all rows in one loop. The common
 * operators on 64-bit integers, timestamps and doubles have tight kernels
 * with no per-value dispatch; everything else goes through scalar_call(),
 * the reference semantics shared with the planner's constant folding, one
 * row at a time. Errors (overflow, division by zero, bad casts) mark only
 * the failing rows as bad, so one bad row never stops a view.
 */
#include "runtime_int.h"
#include "tz.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void rt_row_error(RtCtx *rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rc->stats.last_error, sizeof rc->stats.last_error, fmt, ap);
    va_end(ap);
}

static void col_alloc(Arena *a, Column *c, TypeId t, int n)
{
    c->type = t;
    c->nulls = arena_zalloc(a, (size_t)(n ? n : 1));
    c->v.raw = arena_zalloc(a, chunk_phys_size(t) * (size_t)(n ? n : 1));
}

static void col_get(const Column *c, int r, Value *v)
{
    v->type = c->type;
    v->null = c->nulls[r] != 0;
    switch (type_phys(c->type)) {
    case PHYS_I64: v->u.i = c->v.i[r]; break;
    case PHYS_F64: v->u.f = c->v.f[r]; break;
    case PHYS_STR: v->u.s = c->v.s[r]; break;
    case PHYS_IV: v->u.iv = c->v.iv[r]; break;
    case PHYS_NUM: num_cell_get(&c->v.n[r], v); break;
    }
}

static void col_set(Column *c, int r, const Value *v)
{
    c->nulls[r] = v->null;
    if (v->null)
        return;
    switch (type_phys(c->type)) {
    case PHYS_I64: c->v.i[r] = v->u.i; break;
    case PHYS_F64: c->v.f[r] = v->u.f; break;
    case PHYS_STR: c->v.s[r] = v->u.s; break;   /* strings live in the chunk arena already */
    case PHYS_IV: c->v.iv[r] = v->u.iv; break;
    case PHYS_NUM: num_cell_put(&c->v.n[r], v); break;
    }
}

/* A row's evaluation failed. In a view the row is dropped and counted (one
 * bad value must not stop the view); in an ad hoc query the statement
 * fails, as in Postgres. Returns true when the error is fatal. */
static bool row_failed(RtCtx *rc, Column *out, uint8_t *bad, int r, const char *sqlstate, const char *msg)
{
    out->nulls[r] = 1;
    if (rc->batch) {
        werr(rc->err, sqlstate, 0, "%s", msg);
        return true;
    }
    if (bad)
        bad[r] = 1;
    rc->stats.eval_errors++;
    rt_row_error(rc, "%s", msg);
    return false;
}

/* Tight kernels. Return 1 if handled, -1 on a fatal error. A kernel that
 * can fail skips the rows marked in bad (they are not to be evaluated). */
static int kernel(const PlanExpr *e, Column *args, int n, Column *out, uint8_t *bad, RtCtx *rc)
{
    if (e->n_args != 2)
        return 0;
    Column *x = &args[0], *y = &args[1];
    PhysKind px = type_phys(x->type), py = type_phys(y->type);
    switch (e->fn) {
    case FN_EQ: case FN_NE: case FN_LT: case FN_LE: case FN_GT: case FN_GE:
        if (px == PHYS_I64 && py == PHYS_I64) {
            int64_t *a = x->v.i, *b = y->v.i, *o = out->v.i;
            switch (e->fn) {
            case FN_EQ: for (int r = 0; r < n; r++) o[r] = a[r] == b[r]; break;
            case FN_NE: for (int r = 0; r < n; r++) o[r] = a[r] != b[r]; break;
            case FN_LT: for (int r = 0; r < n; r++) o[r] = a[r] < b[r]; break;
            case FN_LE: for (int r = 0; r < n; r++) o[r] = a[r] <= b[r]; break;
            case FN_GT: for (int r = 0; r < n; r++) o[r] = a[r] > b[r]; break;
            default: for (int r = 0; r < n; r++) o[r] = a[r] >= b[r]; break;
            }
            for (int r = 0; r < n; r++)
                out->nulls[r] = x->nulls[r] | y->nulls[r];
            return 1;
        }
        return 0;
    case FN_ADD_I:
    case FN_SUB_I:
        if (e->type != TYPE_INT8)
            return 0; /* narrower results need range checks: use the reference path */
        for (int r = 0; r < n; r++) {
            out->nulls[r] = x->nulls[r] | y->nulls[r] | (bad ? bad[r] : 0);
            if (out->nulls[r])
                continue;
            bool ovf = e->fn == FN_ADD_I ? __builtin_add_overflow(x->v.i[r], y->v.i[r], &out->v.i[r])
                                         : __builtin_sub_overflow(x->v.i[r], y->v.i[r], &out->v.i[r]);
            if (ovf && row_failed(rc, out, bad, r, SQLSTATE_NUMERIC_RANGE, "bigint out of range"))
                return -1;
        }
        return 1;
    case FN_TS_SUB_IV:
    case FN_TS_ADD_IV: {
        /* The watermark expression `ts - INTERVAL '2' SECOND` lands here.
         * Days added to a timestamptz outside UTC are wall-clock days: the
         * reference path. */
        bool zoned = e->type == TYPE_TIMESTAMPTZ && (rc->own_tz ? rc->tz : tz_current());
        for (int r = 0; r < n; r++)
            if (!y->nulls[r] && (y->v.iv[r].months || (zoned && y->v.iv[r].days)))
                return 0;
        for (int r = 0; r < n; r++) {
            out->nulls[r] = x->nulls[r] | y->nulls[r] | (bad ? bad[r] : 0);
            if (out->nulls[r])
                continue;
            int64_t d = y->v.iv[r].usecs + (int64_t)y->v.iv[r].days * USECS_PER_DAY;
            bool ovf = e->fn == FN_TS_ADD_IV ? __builtin_add_overflow(x->v.i[r], d, &out->v.i[r])
                                             : __builtin_sub_overflow(x->v.i[r], d, &out->v.i[r]);
            /* Past Postgres's range as scalar_call (types.h, TS_MIN_USECS). */
            ovf = ovf || ((out->v.i[r] < TS_MIN_USECS || out->v.i[r] == TS_PLUS_INF) && x->v.i[r] != TS_PLUS_INF &&
                          x->v.i[r] != TS_MINUS_INF);
            if (ovf && row_failed(rc, out, bad, r, SQLSTATE_DATETIME_OVERFLOW, "timestamp out of range"))
                return -1;
        }
        return 1;
    }
    default:
        return 0;
    }
}

/* ---- conditional forms --------------------------------------------------
 *
 * CASE, AND, OR and COALESCE evaluate an argument only for the rows that
 * reach it, as Postgres does: `CASE WHEN x <> 0 THEN 10 / x END` never
 * divides by zero. Each argument is evaluated over the whole chunk with a
 * mask of the rows it must skip (passed down as its `bad`, so the kernels
 * and the per-row path leave those rows alone); a row the mask let through
 * that comes back marked failed in that argument, and the failure is moved
 * to the caller's bad[].
 */

/* The rows to evaluate: mask[r] = 1 marks a row to skip. Rows already bad
 * are always skipped. */
static uint8_t *mask_new(Arena *a, int n, const uint8_t *bad)
{
    uint8_t *m = arena_zalloc(a, (size_t)(n ? n : 1));
    if (bad)
        memcpy(m, bad, (size_t)n);
    return m;
}

/* Evaluates e for the rows not marked in skip (which it may mark further:
 * a newly marked row failed). Failures of rows that were live go to bad. */
static int eval_some(RtCtx *rc, const PlanExpr *e, const Chunk *in, Column *out, uint8_t *skip, uint8_t *bad)
{
    int n = in->n_rows;
    uint8_t *was = arena_alloc(in->arena, (size_t)(n ? n : 1));
    memcpy(was, skip, (size_t)n);
    if (rt_eval(rc, e, in, out, skip))
        return -1;
    for (int r = 0; r < n; r++)
        if (skip[r] && !was[r] && bad)
            bad[r] = 1;
    return 0;
}

static int eval_case(RtCtx *rc, const PlanExpr *e, const Chunk *in, Column *out, uint8_t *bad)
{
    int n = in->n_rows;
    Arena *a = in->arena;
    uint8_t *done = mask_new(a, n, bad);   /* decided, or failed */
    col_alloc(a, out, e->type, n);
    memset(out->nulls, 1, (size_t)(n ? n : 1));
    for (int i = 0; i < e->n_args; i += 2) {
        bool is_else = i + 1 == e->n_args;
        uint8_t *sel = mask_new(a, n, done);   /* rows this branch computes: sel[r] == 0 */
        if (!is_else) {
            Column cond;
            uint8_t *m = mask_new(a, n, done);
            if (eval_some(rc, e->args[i], in, &cond, m, bad))
                return -1;
            for (int r = 0; r < n; r++) {
                if (m[r] && !done[r])
                    done[r] = 1;   /* the condition failed: the row is bad */
                sel[r] = done[r] || cond.nulls[r] || cond.v.i[r] == 0;
            }
        }
        Column val;
        uint8_t *m = mask_new(a, n, sel);
        if (eval_some(rc, e->args[is_else ? i : i + 1], in, &val, m, bad))
            return -1;
        for (int r = 0; r < n; r++) {
            if (sel[r])
                continue;
            done[r] = 1;
            if (m[r])
                continue;   /* failed: bad[] has it */
            Value v;
            col_get(&val, r, &v);
            v.type = e->type;
            col_set(out, r, &v);
        }
        if (is_else)
            break;
    }
    return 0;
}

/* AND (stop at the first false) and OR (stop at the first true), with
 * SQL's three-valued logic for the rows that reach the end. */
static int eval_andor(RtCtx *rc, const PlanExpr *e, const Chunk *in, Column *out, uint8_t *bad)
{
    int n = in->n_rows;
    Arena *a = in->arena;
    int stop = e->fn == FN_AND ? 0 : 1;
    uint8_t *done = mask_new(a, n, bad);
    int8_t *t = arena_alloc(a, (size_t)(n ? n : 1));
    for (int r = 0; r < n; r++)
        t[r] = (int8_t)!stop;
    for (int i = 0; i < e->n_args; i++) {
        Column x;
        uint8_t *m = mask_new(a, n, done);
        if (eval_some(rc, e->args[i], in, &x, m, bad))
            return -1;
        for (int r = 0; r < n; r++) {
            if (done[r])
                continue;
            if (m[r]) {
                done[r] = 1;
                t[r] = -1;
                continue;
            }
            if (x.nulls[r])
                t[r] = -1;
            else if ((x.v.i[r] != 0) == stop) {
                t[r] = (int8_t)stop;
                done[r] = 1;
            }
        }
    }
    col_alloc(a, out, TYPE_BOOL, n);
    for (int r = 0; r < n; r++) {
        out->nulls[r] = t[r] < 0 || (bad && bad[r]);
        out->v.i[r] = t[r] > 0;
    }
    return 0;
}

static int eval_coalesce(RtCtx *rc, const PlanExpr *e, const Chunk *in, Column *out, uint8_t *bad)
{
    int n = in->n_rows;
    Arena *a = in->arena;
    uint8_t *done = mask_new(a, n, bad);
    col_alloc(a, out, e->type, n);
    memset(out->nulls, 1, (size_t)(n ? n : 1));
    for (int i = 0; i < e->n_args; i++) {
        Column x;
        uint8_t *m = mask_new(a, n, done);
        if (eval_some(rc, e->args[i], in, &x, m, bad))
            return -1;
        for (int r = 0; r < n; r++) {
            if (done[r])
                continue;
            if (m[r]) {
                done[r] = 1;
                continue;
            }
            if (!x.nulls[r]) {
                Value v;
                col_get(&x, r, &v);
                v.type = e->type;
                col_set(out, r, &v);
                done[r] = 1;
            }
        }
    }
    return 0;
}

int rt_eval(RtCtx *rc, const PlanExpr *e, const Chunk *in, Column *out, uint8_t *bad)
{
    int n = in->n_rows;
    Arena *a = in->arena;
    switch (e->kind) {
    case PE_COL:
        *out = in->cols[e->col];
        return 0;
    case PE_CONST: {
        col_alloc(a, out, e->type, n);
        Value v = e->value;
        v.type = e->type;
        for (int r = 0; r < n; r++)
            col_set(out, r, &v);
        return 0;
    }
    case PE_CALL: {
        if (e->fn == FN_CASE)
            return eval_case(rc, e, in, out, bad);
        if (e->fn == FN_AND || e->fn == FN_OR)
            return eval_andor(rc, e, in, out, bad);
        if (e->fn == FN_COALESCE)
            return eval_coalesce(rc, e, in, out, bad);
        Column *args = arena_alloc(a, sizeof(Column) * (size_t)(e->n_args ? e->n_args : 1));
        for (int i = 0; i < e->n_args; i++)
            if (rt_eval(rc, e->args[i], in, &args[i], bad))
                return -1;
        col_alloc(a, out, e->type, n);
        int k = kernel(e, args, n, out, bad, rc);
        if (k)
            return k < 0 ? -1 : 0;
        Value vs[WEIR_MAX_FUNC_ARGS], res;
        assert(e->n_args <= WEIR_MAX_FUNC_ARGS); /* the binder refused more (bind.c, 54000) */
        const WTz *tz_was = rc->own_tz ? tz_set_current(rc->tz) : NULL;
        for (int r = 0; r < n; r++) {
            if (bad && bad[r]) {
                out->nulls[r] = 1;
                continue;
            }
            for (int i = 0; i < e->n_args; i++)
                col_get(&args[i], r, &vs[i]);
            WError err = {0};
            if (scalar_call(e->fn, e->type, e->n_args, vs, a, &res, &err)) {
                if (row_failed(rc, out, bad, r, err.sqlstate, err.msg)) {
                    if (rc->own_tz)
                        tz_set_current(tz_was);
                    return -1;
                }
                continue;
            }
            res.type = e->type;
            col_set(out, r, &res);
        }
        if (rc->own_tz)
            tz_set_current(tz_was);
        return 0;
    }
    }
    return werr(rc->err, SQLSTATE_INTERNAL, 0, "unknown expression kind");
}

Chunk *rt_chunk_with_columns(const Chunk *in, int n_cols, Column *cols)
{
    Chunk *c = arena_alloc(in->arena, sizeof *c);
    *c = *in;
    c->n_cols = n_cols;
    c->cols = cols;
    return c;
}

void rt_chunk_select(Chunk *c, const uint8_t *keep)
{
    /* Columns may share arrays with other chunks (projections pass columns
     * through), so the kept rows go to fresh arrays, never in place. */
    int n = 0;
    for (int r = 0; r < c->n_rows; r++)
        n += keep[r] != 0;
    if (n == c->n_rows)
        return;
    Arena *a = c->arena;
    uint8_t *ops = arena_alloc(a, (size_t)(n ? n : 1));
    int64_t *wm = c->wm ? arena_alloc(a, sizeof(int64_t) * (size_t)(n ? n : 1)) : NULL;
    int64_t *offs = c->src_offsets ? arena_alloc(a, sizeof(int64_t) * (size_t)(n ? n : 1)) : NULL;
    Column *cols = arena_alloc(a, sizeof(Column) * (size_t)(c->n_cols ? c->n_cols : 1));
    for (int i = 0; i < c->n_cols; i++)
        col_alloc(a, &cols[i], c->cols[i].type, n);
    int w = 0;
    for (int r = 0; r < c->n_rows; r++) {
        if (!keep[r])
            continue;
        ops[w] = c->ops[r];
        if (wm)
            wm[w] = c->wm[r];
        if (offs)
            offs[w] = c->src_offsets[r];
        for (int i = 0; i < c->n_cols; i++) {
            size_t sz = chunk_phys_size(c->cols[i].type);
            cols[i].nulls[w] = c->cols[i].nulls[r];
            memcpy((char *)cols[i].v.raw + sz * (size_t)w, (char *)c->cols[i].v.raw + sz * (size_t)r, sz);
        }
        w++;
    }
    c->ops = ops;
    c->wm = wm;
    c->src_offsets = offs;
    c->cols = cols;
    c->n_rows = n;
    c->cap = n;
}
