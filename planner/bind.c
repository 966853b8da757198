/*
 * bind.c: expressions from AST to typed PlanExpr.
 *
 * Names resolve against a Scope (the columns of one plan node). Operators
 * and functions resolve to one ScalarFn by their argument types, inserting
 * implicit casts the way Postgres does: integers widen to the wider
 * integer, integers meet floats as double, a bare string literal takes the
 * type the other side wants (so `ts > '2026-01-01'` compares timestamps).
 * Inside a grouped query (b->agg set), expressions equal to a GROUP BY
 * expression and aggregate calls become columns of the aggregation output.
 */
#include "planner_int.h"
#include "numeric.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

PlanExpr *make_col(BindCtx *b, int col, TypeId t)
{
    PlanExpr *e = arena_zalloc(b->a, sizeof *e);
    e->kind = PE_COL;
    e->col = col;
    e->type = t;
    return e;
}

PlanExpr *make_const(BindCtx *b, Value v)
{
    PlanExpr *e = arena_zalloc(b->a, sizeof *e);
    e->kind = PE_CONST;
    e->type = v.type;
    e->value = v;
    return e;
}

static PlanExpr *make_call(BindCtx *b, ScalarFn fn, TypeId t, int pos, int n, PlanExpr **args)
{
    PlanExpr *e = arena_zalloc(b->a, sizeof *e);
    e->kind = PE_CALL;
    e->fn = fn;
    e->type = t;
    e->pos = pos;
    e->n_args = n;
    e->args = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++)
        e->args[i] = args[i];
    return e;
}

PlanExpr *make_cast(BindCtx *b, PlanExpr *e, TypeId t, int pos) { return make_call(b, FN_CAST, t, pos, 1, &e); }

bool expr_equal(const PlanExpr *x, const PlanExpr *y)
{
    if (x->kind != y->kind || x->type != y->type)
        return false;
    switch (x->kind) {
    case PE_COL: return x->col == y->col;
    case PE_CONST:
        if (x->value.null || y->value.null)
            return x->value.null == y->value.null;
        return value_cmp(&x->value, &y->value) == 0;
    case PE_CALL:
        if (x->fn != y->fn || x->n_args != y->n_args)
            return false;
        for (int i = 0; i < x->n_args; i++)
            if (!expr_equal(x->args[i], y->args[i]))
                return false;
        return true;
    }
    return false;
}

/* After an argument of AND, OR or COALESCE is v, are the later ones unneeded? */
static bool const_decides(ScalarFn fn, const Value *v)
{
    bool t = !v->null && v->u.i != 0;
    switch (fn) {
    case FN_AND: return !v->null && !t;
    case FN_OR: return t;
    case FN_COALESCE: return !v->null;
    default: return false;
    }
}

int eval_const(BindCtx *b, const PlanExpr *e, Value *out)
{
    switch (e->kind) {
    case PE_CONST: *out = e->value; return 0;
    case PE_COL: return werr(b->err, SQLSTATE_INVALID_PARAMETER, e->pos, "expression must be a constant");
    case PE_CALL: {
        Value args[16];
        if (e->n_args > 16)
            return werr(b->err, SQLSTATE_PROGRAM_LIMIT, e->pos, "too many arguments");
        /* CASE, AND, OR and COALESCE evaluate only the arguments they reach,
         * as at run time (eval.c): the rest stand in as NULL. */
        if (e->fn == FN_CASE) {
            for (int i = 0; i + 1 < e->n_args; i += 2) {
                Value c;
                if (eval_const(b, e->args[i], &c))
                    return -1;
                if (!c.null && c.u.i)
                    return eval_const(b, e->args[i + 1], out);
            }
            if (e->n_args % 2)
                return eval_const(b, e->args[e->n_args - 1], out);
            *out = value_null(e->type);
            return 0;
        }
        bool lazy = e->fn == FN_AND || e->fn == FN_OR || e->fn == FN_COALESCE;
        bool stop = false;
        for (int i = 0; i < e->n_args; i++) {
            if (stop) {
                args[i] = value_null(e->args[i]->type);
                continue;
            }
            if (eval_const(b, e->args[i], &args[i]))
                return -1;
            if (lazy)
                stop = const_decides(e->fn, &args[i]);
        }
        if (scalar_call(e->fn, e->type, e->n_args, args, b->a, out, b->err)) {
            if (b->err->pos == 0)
                b->err->pos = e->pos;
            return -1;
        }
        return 0;
    }
    }
    return -1;
}

/* ---- type rules ----------------------------------------------------------- */

static PlanExpr *bind_cast(BindCtx *b, PlanExpr *x, TypeId t, int pos);

static int int_rank(TypeId t) { return t == TYPE_INT2 ? 1 : t == TYPE_INT4 ? 2 : t == TYPE_INT8 ? 3 : 0; }

/* Can a value of type from be used where to is wanted without CAST? */
static bool implicit_ok(TypeId from, TypeId to)
{
    if (from == to || from == TYPE_NULL)
        return true;
    if (type_is_integer(from) && type_is_integer(to))
        return int_rank(from) <= int_rank(to);
    if (type_is_integer(from) && (to == TYPE_FLOAT4 || to == TYPE_FLOAT8 || to == TYPE_NUMERIC))
        return true;
    if (from == TYPE_NUMERIC && (to == TYPE_FLOAT4 || to == TYPE_FLOAT8))
        return true;
    if (from == TYPE_FLOAT4 && to == TYPE_FLOAT8)
        return true;
    if (from == TYPE_DATE && (to == TYPE_TIMESTAMP || to == TYPE_TIMESTAMPTZ))
        return true;
    if (from == TYPE_TIMESTAMP && to == TYPE_TIMESTAMPTZ)
        return true;
    if ((from == TYPE_TEXT) && to == TYPE_JSONB)
        return false;
    return false;
}

PlanExpr *coerce_expr(BindCtx *b, PlanExpr *e, TypeId t, int pos)
{
    /* Inferring parameter types: the first context that types $n decides. */
    if (b->param_types && e->kind == PE_CONST && e->param_no > 0 && e->param_no <= b->n_param_types &&
        (e->unknown || e->value.null) && t != TYPE_NULL && b->param_types[e->param_no - 1] == TYPE_NULL)
        b->param_types[e->param_no - 1] = t;
    if (e->type == t && e->kind == PE_CONST && e->unknown) {
        /* An untyped literal coerced to text is text from now on ('x'::text). */
        PlanExpr *c = make_const(b, e->value);
        c->pos = e->pos;
        return c;
    }
    if (e->type == t)
        return e;
    if (e->kind == PE_CONST && e->decimal_text && t == TYPE_NUMERIC && !e->value.null) {
        /* The literal's own digits, not the double's: 0.1 stays exactly 0.1. */
        Value v = value_null(TYPE_NUMERIC);
        if (value_from_text(TYPE_NUMERIC, e->decimal_text, strlen(e->decimal_text), b->a, &v, b->err)) {
            b->err->pos = pos ? pos : e->pos;
            return NULL;
        }
        PlanExpr *c = make_const(b, v);
        c->pos = e->pos;
        return c;
    }
    if (e->kind == PE_CONST && (e->value.null || e->unknown)) {
        Value v;
        if (e->value.null) {
            v = value_null(t);
        } else if (value_from_text(t, e->value.u.s.p, e->value.u.s.len, b->a, &v, b->err)) {
            b->err->pos = pos ? pos : e->pos;
            return NULL;
        }
        PlanExpr *c = make_const(b, v);
        c->pos = e->pos;
        return c;
    }
    if (!implicit_ok(e->type, t)) {
        werr(b->err, SQLSTATE_DATATYPE_MISMATCH, pos ? pos : e->pos,
             "expression is of type %s but %s is expected", type_name(e->type), type_name(t));
        werr_hint(b->err, "You will need to rewrite or cast the expression.");
        return NULL;
    }
    PlanExpr *arg = e;
    return make_call(b, FN_CAST, t, e->pos, 1, &arg);
}

/* The common type of two operands for comparison or arithmetic, or TYPE_NULL. */
static TypeId common_type(const PlanExpr *x, const PlanExpr *y)
{
    TypeId a = x->type, c = y->type;
    /* A NULL with a type (NULL::bigint, a prepared statement's $1::bigint
     * described before its value is known) keeps it; only a bare NULL is
     * untyped. */
    bool ua = x->kind == PE_CONST && (x->unknown || (x->value.null && x->type == TYPE_NULL));
    bool uc = y->kind == PE_CONST && (y->unknown || (y->value.null && y->type == TYPE_NULL));
    if (ua && !uc)
        return c;
    if (uc && !ua)
        return a;
    if (ua && uc)
        return TYPE_TEXT;
    if (a == c)
        return a;
    if (type_is_integer(a) && type_is_integer(c))
        return int_rank(a) > int_rank(c) ? a : c;
    /* Postgres: integer op numeric is numeric, numeric op float is float;
     * a decimal literal next to a numeric is numeric (Postgres types 1.5
     * as numeric; weir keeps it double precision elsewhere). */
    if ((a == TYPE_NUMERIC && (type_is_integer(c) || (y->kind == PE_CONST && y->decimal_text))) ||
        (c == TYPE_NUMERIC && (type_is_integer(a) || (x->kind == PE_CONST && x->decimal_text))))
        return TYPE_NUMERIC;
    if (type_is_numeric(a) && type_is_numeric(c))
        return TYPE_FLOAT8;
    if (implicit_ok(a, c))
        return c;
    if (implicit_ok(c, a))
        return a;
    return TYPE_NULL;
}

TypeId bind_common_type(TypeId a, TypeId c)
{
    PlanExpr x = {.kind = PE_COL, .type = a}, y = {.kind = PE_COL, .type = c};
    return common_type(&x, &y);
}

/* CAST(x AS t): checked for castability now, so a bad cast is a plan-time error. */
static PlanExpr *bind_cast(BindCtx *b, PlanExpr *x, TypeId t, int pos)
{
    if (x->kind == PE_CONST && (x->unknown || x->value.null))
        return coerce_expr(b, x, t, pos);
    if (x->type == t && x->kind == PE_CONST && x->decimal_text) {
        PlanExpr *c = make_const(b, x->value);   /* 1.5::float8 is a double, no longer a loose literal */
        c->pos = x->pos;
        return c;
    }
    if (x->type == t)
        return x;
    if (t == TYPE_NUMERIC && x->kind == PE_CONST && x->decimal_text)
        return coerce_expr(b, x, t, pos);   /* 0.1::numeric is exactly 0.1 */
    Value probe = value_null(x->type), out;
    probe.null = false;
    memset(&probe.u, 0, sizeof probe.u);
    if (type_phys(x->type) == PHYS_STR)
        probe.u.s.p = "", probe.u.s.len = 0;
    WError tmp = {0};
    if (scalar_cast(&probe, t, b->a, &out, &tmp) && strcmp(tmp.sqlstate, SQLSTATE_DATATYPE_MISMATCH) == 0) {
        werr(b->err, SQLSTATE_DATATYPE_MISMATCH, pos, "cannot cast type %s to %s", type_name(x->type), type_name(t));
        return NULL;
    }
    return make_call(b, FN_CAST, t, pos, 1, &x);
}

/* ---- literals ------------------------------------------------------------- */

/* Whether the literal text (digits[.digits][e[sign]digits], as the tokenizer
 * gives it) is a numeric: from planner revision 7, when weir's numeric holds
 * it exactly (at most NUM_MAX_DIGITS digits, none of them dropped after the
 * point); *out is then the value, with Postgres's display scale (1.50 keeps
 * two digits, 1.5e1 one). Postgres's numeric holds any of them; a literal
 * past weir's limit stays a double precision (docs/sql.md), never a
 * rounded numeric or an error. */
static bool numeric_literal(BindCtx *b, const char *text, Value *out)
{
    if (b->plan_rev < 7)
        return false;
    long frac = 0, exp = 0;
    bool dot = false;
    const char *p = text;
    for (; *p && *p != 'e' && *p != 'E'; p++) {
        if (*p == '.')
            dot = true;
        else
            frac += dot;
    }
    if (*p) {
        exp = strtol(p + 1, NULL, 10);
        if (exp > 1000 || exp < -1000)
            return false;
    }
    if (frac - exp > NUM_MAX_DIGITS)
        return false;
    WError tmp = {0};
    if (value_from_text(TYPE_NUMERIC, text, strlen(text), b->a, out, &tmp)) {
        werr_clear(&tmp);   /* more than NUM_MAX_DIGITS digits: a double */
        return false;
    }
    return true;
}

static PlanExpr *bind_literal(BindCtx *b, const AstExpr *e)
{
    Value v;
    PlanExpr *r;
    switch (e->lit_kind) {
    case LIT_NULL:
        r = make_const(b, value_null(TYPE_NULL));
        if (b->param_types && e->param_no > 0) {
            /* Inferring parameter types: $n is an untyped literal whose value
             * is not known yet, so it binds along the same paths as the
             * string Bind will give it ('...' is unknown, never NULL). */
            r->type = TYPE_TEXT;
            r->value.type = TYPE_TEXT;
            r->unknown = true;
        }
        break;
    case LIT_BOOL:
        r = make_const(b, value_bool(e->text[0] == 't'));
        break;
    case LIT_INT: {
        WError tmp = {0};
        if (value_from_text(TYPE_INT4, e->text, strlen(e->text), b->a, &v, &tmp) == 0) {
            r = make_const(b, v);
            break;
        }
        werr_clear(&tmp);
        if (value_from_text(TYPE_INT8, e->text, strlen(e->text), b->a, &v, &tmp) == 0) {
            r = make_const(b, v);
            break;
        }
        /* Beyond bigint: a numeric, as in Postgres, from planner revision 7
         * (when weir's 38 digits hold it); before, a double that becomes a
         * numeric only next to a numeric operand (decimal_text). */
        if (numeric_literal(b, e->text, &v)) {
            r = make_const(b, v);
            break;
        }
        if (value_from_text(TYPE_FLOAT8, e->text, strlen(e->text), b->a, &v, b->err))
            return b->err->pos = e->pos, NULL;
        r = make_const(b, v);
        r->decimal_text = arena_strdup(b->a, e->text);
        break;
    }
    case LIT_DECIMAL:
        /* A decimal literal is numeric, as in Postgres, from planner revision
         * 7. A view planned before keeps double precision (its state and
         * results depend on it); there, next to a numeric operand, the
         * literal's text makes an exact numeric instead (coerce_expr). So
         * does a literal weir's numeric cannot hold exactly (1e300, 1e-50). */
        if (numeric_literal(b, e->text, &v)) {
            r = make_const(b, v);
            break;
        }
        if (value_from_text(TYPE_FLOAT8, e->text, strlen(e->text), b->a, &v, b->err))
            return b->err->pos = e->pos, NULL;
        r = make_const(b, v);
        r->decimal_text = arena_strdup(b->a, e->text);
        break;
    case LIT_STRING:
        r = make_const(b, value_str(TYPE_TEXT, arena_strdup(b->a, e->text), strlen(e->text)));
        r->unknown = true;
        break;
    case LIT_TYPED: {
        TypeId t = type_from_name(e->type_name);
        if (t == TYPE_NULL) {
            werr(b->err, SQLSTATE_UNDEFINED_OBJECT, e->pos, "type \"%s\" does not exist", e->type_name);
            return NULL;
        }
        if (value_from_text(t, e->text, strlen(e->text), b->a, &v, b->err))
            return b->err->pos = e->pos, NULL;
        r = make_const(b, v);
        break;
    }
    case LIT_INTERVAL: {
        Value iv = value_null(TYPE_INTERVAL);
        iv.null = false;
        const char *u = e->interval_unit;
        char tmp[128];
        const char *text = e->text;
        /* INTERVAL '10' SECOND: a bare number takes the unit; for
         * "DAY TO SECOND"-style ranges the text is a full interval. */
        bool bare = text[0] != 0;
        for (const char *p = text; *p; p++)
            if (!((*p >= '0' && *p <= '9') || *p == '.' || *p == '-' || *p == '+' || *p == ' '))
                bare = false;
        if (u && bare && !strchr(u, ' ')) {
            snprintf(tmp, sizeof tmp, "%s %s", text, u);
            text = tmp;
        }
        if (parse_interval(text, strlen(text), &iv.u.iv)) {
            werr(b->err, SQLSTATE_DATETIME_FORMAT, e->pos, "invalid input syntax for type interval: \"%s\"", e->text);
            return NULL;
        }
        r = make_const(b, iv);
        break;
    }
    default:
        werr(b->err, SQLSTATE_INTERNAL, e->pos, "unknown literal");
        return NULL;
    }
    r->pos = e->pos;
    r->param_no = e->param_no;
    return r;
}

/* ---- columns -------------------------------------------------------------- */

static PlanExpr *bind_column(BindCtx *b, const Scope *s, const AstExpr *e)
{
    int found = -1;
    bool qual_seen = false;
    for (int i = 0; i < s->n; i++) {
        const ScopeCol *c = &s->cols[i];
        if (e->qualifier) {
            if (!c->qualifier || strcmp(c->qualifier, e->qualifier) != 0)
                continue;
            qual_seen = true;
        }
        if (strcmp(c->name, e->text) != 0)
            continue;
        /* A hidden twin (the right column of JOIN ... USING) yields to the visible one. */
        if (found >= 0 && !e->qualifier && s->cols[found].hidden != c->hidden) {
            if (s->cols[found].hidden)
                found = i;
            continue;
        }
        if (found >= 0) {
            werr(b->err, SQLSTATE_AMBIGUOUS_COLUMN, e->pos, "column reference \"%s\" is ambiguous", e->text);
            return NULL;
        }
        found = i;
    }
    if (found < 0) {
        if (e->qualifier && !qual_seen)
            werr(b->err, SQLSTATE_UNDEFINED_TABLE, e->pos, "missing FROM-clause entry for table \"%s\"", e->qualifier);
        else if (e->qualifier)
            werr(b->err, SQLSTATE_UNDEFINED_COLUMN, e->pos, "column %s.%s does not exist", e->qualifier, e->text);
        else
            werr(b->err, SQLSTATE_UNDEFINED_COLUMN, e->pos, "column \"%s\" does not exist", e->text);
        return NULL;
    }
    PlanExpr *r = make_col(b, found, s->cols[found].type);
    r->pos = e->pos;
    return r;
}

/* ---- operators ------------------------------------------------------------ */

/* Operands [lo, hi) of a flat AND or OR chain (the parser's, ast_binary()),
 * bound as a balanced tree of two-operand calls: its depth, and so every
 * recursion over it (evaluation, EXPLAIN), is log2 of the terms. */
static PlanExpr *bind_chain(BindCtx *b, const Scope *s, const AstExpr *e, int lo, int hi)
{
    if (hi - lo == 1) {
        const AstExpr *a = AST_AT(e->args, lo);
        PlanExpr *x = bind_expr(b, s, a);
        return x ? coerce_expr(b, x, TYPE_BOOL, x->pos) : NULL;
    }
    int mid = lo + (hi - lo) / 2;
    PlanExpr *x = bind_chain(b, s, e, lo, mid);
    PlanExpr *y = x ? bind_chain(b, s, e, mid, hi) : NULL;
    if (!x || !y)
        return NULL;
    PlanExpr *args[2] = {x, y};
    return make_call(b, e->op == OP_AND ? FN_AND : FN_OR, TYPE_BOOL, e->pos, 2, args);
}

static PlanExpr *bind_binary(BindCtx *b, const Scope *s, const AstExpr *e, AstOp op, PlanExpr *x, PlanExpr *y)
{
    int pos = e->pos;
    if (op == OP_AND || op == OP_OR) {
        if (!(x = coerce_expr(b, x, TYPE_BOOL, x->pos)) || !(y = coerce_expr(b, y, TYPE_BOOL, y->pos)))
            return NULL;
        PlanExpr *args[2] = {x, y};
        return make_call(b, op == OP_AND ? FN_AND : FN_OR, TYPE_BOOL, pos, 2, args);
    }
    if (op == OP_CONCAT) {
        if (!(x = coerce_expr(b, x->type == TYPE_TEXT || x->unknown ? x : make_call(b, FN_CAST, TYPE_TEXT, x->pos, 1, &x), TYPE_TEXT, pos)))
            return NULL;
        if (!(y = coerce_expr(b, y->type == TYPE_TEXT || y->unknown ? y : make_call(b, FN_CAST, TYPE_TEXT, y->pos, 1, &y), TYPE_TEXT, pos)))
            return NULL;
        PlanExpr *args[2] = {x, y};
        return make_call(b, FN_CONCAT, TYPE_TEXT, pos, 2, args);
    }
    TypeId tx = x->type, ty = y->type;
    bool ux = x->kind == PE_CONST && x->unknown, uy = y->kind == PE_CONST && y->unknown;
    /* Time arithmetic first: the operand types pick the function. */
    if (op == OP_ADD || op == OP_SUB) {
        /* date +/- interval and interval + date: a timestamp, as in Postgres. */
        if (tx == TYPE_DATE && ty == TYPE_INTERVAL) {
            x = make_cast(b, x, TYPE_TIMESTAMP, x->pos);
            tx = TYPE_TIMESTAMP;
        } else if (op == OP_ADD && tx == TYPE_INTERVAL && ty == TYPE_DATE) {
            y = make_cast(b, y, TYPE_TIMESTAMP, y->pos);
            ty = TYPE_TIMESTAMP;
        }
        if ((tx == TYPE_TIMESTAMP || tx == TYPE_TIMESTAMPTZ) && (ty == TYPE_INTERVAL || uy)) {
            if (!(y = coerce_expr(b, y, TYPE_INTERVAL, pos)))
                return NULL;
            PlanExpr *args[2] = {x, y};
            return make_call(b, op == OP_ADD ? FN_TS_ADD_IV : FN_TS_SUB_IV, tx, pos, 2, args);
        }
        if (op == OP_ADD && tx == TYPE_INTERVAL && (ty == TYPE_TIMESTAMP || ty == TYPE_TIMESTAMPTZ)) {
            PlanExpr *args[2] = {y, x};
            return make_call(b, FN_TS_ADD_IV, ty, pos, 2, args);
        }
        if ((tx == TYPE_TIMESTAMP || tx == TYPE_TIMESTAMPTZ) && op == OP_SUB &&
            (ty == TYPE_TIMESTAMP || ty == TYPE_TIMESTAMPTZ || uy)) {
            if (!(y = coerce_expr(b, y, tx, pos)))
                return NULL;
            PlanExpr *args[2] = {x, y};
            return make_call(b, FN_TS_SUB_TS, TYPE_INTERVAL, pos, 2, args);
        }
        if (tx == TYPE_INTERVAL && (ty == TYPE_INTERVAL || uy)) {
            if (!(y = coerce_expr(b, y, TYPE_INTERVAL, pos)))
                return NULL;
            PlanExpr *args[2] = {x, y};
            return make_call(b, op == OP_ADD ? FN_IV_ADD_IV : FN_IV_SUB_IV, TYPE_INTERVAL, pos, 2, args);
        }
        if (tx == TYPE_DATE && type_is_integer(ty)) {
            PlanExpr *args[2] = {x, coerce_expr(b, y, TYPE_INT8, pos)};
            return make_call(b, op == OP_ADD ? FN_DATE_ADD_I : FN_DATE_SUB_I, TYPE_DATE, pos, 2, args);
        }
        if (tx == TYPE_DATE && ty == TYPE_DATE && op == OP_SUB) {
            PlanExpr *args[2] = {x, y};
            return make_call(b, FN_DATE_SUB_DATE, TYPE_INT4, pos, 2, args);
        }
    }
    if (op == OP_MUL && tx == TYPE_INTERVAL && type_is_numeric(ty)) {
        PlanExpr *args[2] = {x, coerce_expr(b, y, TYPE_FLOAT8, pos)};
        return make_call(b, FN_IV_MUL_F, TYPE_INTERVAL, pos, 2, args);
    }
    if (op == OP_DIV && tx == TYPE_INTERVAL && type_is_numeric(ty)) {
        PlanExpr *args[2] = {x, coerce_expr(b, y, TYPE_FLOAT8, pos)};
        return make_call(b, FN_IV_DIV_F, TYPE_INTERVAL, pos, 2, args);
    }
    if (op == OP_MUL && ty == TYPE_INTERVAL && type_is_numeric(tx)) {
        PlanExpr *args[2] = {y, coerce_expr(b, x, TYPE_FLOAT8, pos)};
        return make_call(b, FN_IV_MUL_F, TYPE_INTERVAL, pos, 2, args);
    }
    TypeId t = common_type(x, y);
    if (ux && uy && op >= OP_ADD && op <= OP_POW)
        t = TYPE_NULL;
    if (t == TYPE_NULL) {
        werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, pos, "operator does not exist: %s %s %s",
             type_name(tx), ast_op_name(op), type_name(ty));
        werr_hint(b->err, "No operator matches the given name and argument types. You might need to add explicit type casts.");
        return NULL;
    }
    if (!(x = coerce_expr(b, x, t, pos)) || !(y = coerce_expr(b, y, t, pos)))
        return NULL;
    PlanExpr *args[2] = {x, y};
    switch (op) {
    case OP_EQ: return make_call(b, FN_EQ, TYPE_BOOL, pos, 2, args);
    case OP_NE: return make_call(b, FN_NE, TYPE_BOOL, pos, 2, args);
    case OP_LT: return make_call(b, FN_LT, TYPE_BOOL, pos, 2, args);
    case OP_LE: return make_call(b, FN_LE, TYPE_BOOL, pos, 2, args);
    case OP_GT: return make_call(b, FN_GT, TYPE_BOOL, pos, 2, args);
    case OP_GE: return make_call(b, FN_GE, TYPE_BOOL, pos, 2, args);
    default: break;
    }
    if (type_is_integer(t)) {
        ScalarFn fn = op == OP_ADD ? FN_ADD_I : op == OP_SUB ? FN_SUB_I : op == OP_MUL ? FN_MUL_I
                    : op == OP_DIV ? FN_DIV_I : op == OP_MOD ? FN_MOD_I : FN_NONE;
        if (op == OP_POW) {
            PlanExpr *fargs[2] = {coerce_expr(b, x, TYPE_FLOAT8, pos), coerce_expr(b, y, TYPE_FLOAT8, pos)};
            return make_call(b, FN_POW_F, TYPE_FLOAT8, pos, 2, fargs);
        }
        if (fn != FN_NONE)
            return make_call(b, fn, t, pos, 2, args);
    } else if (t == TYPE_NUMERIC) {
        ScalarFn fn = op == OP_ADD ? FN_ADD_N : op == OP_SUB ? FN_SUB_N : op == OP_MUL ? FN_MUL_N
                    : op == OP_DIV ? FN_DIV_N : op == OP_MOD ? FN_MOD_N : FN_NONE;
        if (op == OP_POW) {
            werr(b->err, SQLSTATE_NOT_SUPPORTED, pos, "feature not supported: numeric ^ numeric");
            werr_hint(b->err, "Cast the operands to double precision.");
            return NULL;
        }
        if (fn != FN_NONE)
            return make_call(b, fn, t, pos, 2, args);
    } else if (t == TYPE_FLOAT4 || t == TYPE_FLOAT8) {
        ScalarFn fn = op == OP_ADD ? FN_ADD_F : op == OP_SUB ? FN_SUB_F : op == OP_MUL ? FN_MUL_F
                    : op == OP_DIV ? FN_DIV_F : op == OP_POW ? FN_POW_F : op == OP_MOD ? FN_MOD_F : FN_NONE;
        if (fn != FN_NONE)
            return make_call(b, fn, t, pos, 2, args);
    }
    (void)s;
    werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, pos, "operator does not exist: %s %s %s",
         type_name(tx), ast_op_name(op), type_name(ty));
    return NULL;
}

/* ---- aggregates ----------------------------------------------------------- */

static const char *AGG_NAMES[] = {"count", "sum", "min", "max", "avg", "bool_and", "bool_or", "every",
                                  "string_agg", "first_value", "last_value"};

bool ast_is_aggregate(const AstExpr *e)
{
    if (e->kind != AST_FUNC || e->over)
        return false;
    for (size_t i = 0; i < sizeof AGG_NAMES / sizeof AGG_NAMES[0]; i++)
        if (strcmp(e->text, AGG_NAMES[i]) == 0)
            return true;
    return false;
}

bool ast_contains_aggregate(const AstExpr *e)
{
    if (!e)
        return false;
    if (ast_is_aggregate(e))
        return true;
    for (int i = 0; i < ast_list_len(e->args); i++)
        if (ast_contains_aggregate(AST_AT(e->args, i)))
            return true;
    for (int i = 0; i < ast_list_len(e->whens); i++)
        if (ast_contains_aggregate(AST_AT(e->whens, i)))
            return true;
    return ast_contains_aggregate(e->arg) || ast_contains_aggregate(e->lo) ||
           ast_contains_aggregate(e->hi) || ast_contains_aggregate(e->else_);
}

/* string_agg's separator (its second argument): a constant, folded into
 * agg->sep. 0, or -1 with err. */
static int agg_separator(BindCtx *b, const AstExpr *e, int nargs, PlanAgg *agg)
{
    /* The separator must be a constant: one value per aggregate, kept in the plan. */
    if (nargs != 2) {
        werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, e->pos, "function string_agg takes two arguments");
        return -1;
    }
    Value sv;
    Scope empty = {0};
    AggCtx *saved = b->agg;
    b->agg = NULL;
    PlanExpr *se = bind_expr(b, &empty, AST_AT(e->args, 1));
    b->agg = saved;
    if (!se && strcmp(b->err->sqlstate, SQLSTATE_UNDEFINED_COLUMN) == 0) {
        werr_clear(b->err);
        werr(b->err, SQLSTATE_NOT_SUPPORTED, ((AstExpr *)AST_AT(e->args, 1))->pos,
             "feature not supported: string_agg's separator must be a constant");
        return -1;
    }
    if (!se || !(se = coerce_expr(b, se, TYPE_TEXT, e->pos)) || eval_const(b, se, &sv)) {
        if (!b->err->set)
            werr(b->err, SQLSTATE_NOT_SUPPORTED, e->pos, "string_agg's separator must be a constant");
        return -1;
    }
    agg->sep = sv.null ? "" : arena_strndup(b->a, sv.u.s.p, sv.u.s.len);
    return 0;
}

/* The column of aggregate call agg (argument arg, FILTER filter, NULL when
 * none) in the aggregation's output: an equal call made before is reused. */
static PlanExpr *agg_add(BindCtx *b, AggCtx *g, const PlanAgg *agg_in, PlanExpr *arg, PlanExpr *filter, const AstExpr *e)
{
    PlanAgg agg = *agg_in;
    /* The same aggregate twice (count(*) in SELECT and HAVING) is computed once. */
    for (int i = 0; i < g->n_aggs; i++) {
        if (g->aggs[i].kind != agg.kind)
            continue;
        if ((g->agg_args[i] == NULL) != (arg == NULL) || (arg && !expr_equal(g->agg_args[i], arg)))
            continue;
        if ((g->agg_filters[i] == NULL) != (filter == NULL) || (filter && !expr_equal(g->agg_filters[i], filter)))
            continue;
        PlanExpr *r = make_col(b, g->n_group + i, agg.type);
        r->pos = e->pos;
        return r;
    }
    if (g->n_aggs == g->cap_aggs) {
        int cap = g->cap_aggs ? g->cap_aggs * 2 : 8;
        PlanAgg *na = arena_alloc(b->a, sizeof *na * (size_t)cap);
        PlanExpr **nx = arena_alloc(b->a, sizeof *nx * (size_t)cap);
        PlanExpr **nf = arena_alloc(b->a, sizeof *nf * (size_t)cap);
        if (g->n_aggs) {
            memcpy(na, g->aggs, sizeof *na * (size_t)g->n_aggs);
            memcpy(nx, g->agg_args, sizeof *nx * (size_t)g->n_aggs);
            memcpy(nf, g->agg_filters, sizeof *nf * (size_t)g->n_aggs);
        }
        g->aggs = na;
        g->agg_args = nx;
        g->agg_filters = nf;
        g->cap_aggs = cap;
    }
    g->aggs[g->n_aggs] = agg;
    g->agg_args[g->n_aggs] = arg;
    g->agg_filters[g->n_aggs] = filter;
    g->n_aggs++;
    PlanExpr *r = make_col(b, g->n_group + g->n_aggs - 1, agg.type);
    r->pos = e->pos;
    return r;
}

static PlanExpr *bind_aggregate(BindCtx *b, const AstExpr *e)
{
    AggCtx *g = b->agg;
    if (b->in_agg_arg) {
        werr(b->err, SQLSTATE_GROUPING_ERROR, e->pos, "aggregate function calls cannot be nested");
        return NULL;
    }
    const char *f = e->text;
    /* min, max, bool_and/every and bool_or do not change with duplicates:
     * their DISTINCT form is the plain one. */
    bool distinct_is_plain = !strcmp(f, "min") || !strcmp(f, "max") || !strcmp(f, "bool_and") ||
                             !strcmp(f, "bool_or") || !strcmp(f, "every");
    if (e->distinct && strcmp(f, "count") != 0 && !distinct_is_plain) {
        werr(b->err, SQLSTATE_NOT_SUPPORTED, e->pos, "feature not supported: %s(DISTINCT ...)", e->text);
        werr_hint(b->err, "count(DISTINCT ...) is supported, and min, max, bool_and, bool_or ignore DISTINCT.");
        return NULL;
    }
    PlanAgg agg = {.arg = -1, .filter_col = -1};
    PlanExpr *arg = NULL;
    int nargs = ast_list_len(e->args);
    if (strcmp(f, "count") == 0 && (e->star_arg || nargs == 0)) {
        agg.kind = AGG_COUNT_STAR;
        agg.type = TYPE_INT8;
    } else {
        if (strcmp(f, "string_agg") == 0) {
            if (agg_separator(b, e, nargs, &agg))
                return NULL;
        } else if (nargs != 1) {
            werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, e->pos, "function %s takes exactly one argument", f);
            return NULL;
        }
        b->in_agg_arg = true;
        AggCtx *saved = b->agg;
        b->agg = NULL;
        arg = bind_expr(b, g->input, AST_AT(e->args, 0));
        b->agg = saved;
        b->in_agg_arg = false;
        if (!arg)
            return NULL;
        if (arg->kind == PE_CONST && arg->unknown)
            arg = coerce_expr(b, arg, TYPE_TEXT, e->pos);
        agg.arg_type = arg->type;
        if (strcmp(f, "count") == 0) {
            agg.kind = e->distinct ? AGG_COUNT_DISTINCT : AGG_COUNT;
            agg.distinct = e->distinct;
            agg.type = TYPE_INT8;
        } else if (!strcmp(f, "bool_and") || !strcmp(f, "every") || !strcmp(f, "bool_or")) {
            if (!(arg = coerce_expr(b, arg, TYPE_BOOL, e->pos)))
                return NULL;
            agg.arg_type = TYPE_BOOL;
            agg.kind = f[5] == 'o' ? AGG_BOOL_OR : AGG_BOOL_AND;
            agg.type = TYPE_BOOL;
        } else if (strcmp(f, "string_agg") == 0) {
            if (!(arg = coerce_expr(b, arg, TYPE_TEXT, e->pos)))
                return NULL;
            agg.arg_type = TYPE_TEXT;
            agg.kind = AGG_STRING_AGG;
            agg.type = TYPE_TEXT;
        } else if (!strcmp(f, "first_value") || !strcmp(f, "last_value")) {
            agg.kind = f[0] == 'f' ? AGG_FIRST : AGG_LAST;
            agg.type = arg->type;
        } else if (strcmp(f, "sum") == 0) {
            agg.kind = AGG_SUM;
            if (arg->type == TYPE_INT8 && b->plan_rev >= 4) {
                /* sum(bigint) is numeric, as in Postgres: it cannot overflow. */
                arg = make_cast(b, arg, TYPE_NUMERIC, e->pos);
                agg.arg_type = agg.type = TYPE_NUMERIC;
            } else if (type_is_integer(arg->type))
                agg.type = TYPE_INT8;
            else if (arg->type == TYPE_FLOAT4 || arg->type == TYPE_FLOAT8)
                agg.type = TYPE_FLOAT8;
            else if (arg->type == TYPE_INTERVAL)
                agg.type = TYPE_INTERVAL;
            else if (arg->type == TYPE_NUMERIC)
                agg.type = TYPE_NUMERIC;
            else
                goto badtype;
        } else if (strcmp(f, "avg") == 0) {
            agg.kind = AGG_AVG;
            if (!type_is_numeric(arg->type))
                goto badtype;
            /* avg over numeric and integers is numeric as in Postgres (over
             * integers since planner revision 4); over floats double. */
            if (type_is_integer(arg->type) && b->plan_rev >= 4) {
                arg = make_cast(b, arg, TYPE_NUMERIC, e->pos);
                agg.arg_type = TYPE_NUMERIC;
            }
            agg.type = arg->type == TYPE_NUMERIC ? TYPE_NUMERIC : TYPE_FLOAT8;
        } else {
            agg.kind = strcmp(f, "min") == 0 ? AGG_MIN : AGG_MAX;
            if (arg->type == TYPE_JSONB || arg->type == TYPE_NULL)
                goto badtype;
            agg.type = arg->type;
        }
        agg.compensated = (agg.kind == AGG_SUM || agg.kind == AGG_AVG) && agg.type == TYPE_FLOAT8 && b->plan_rev >= 5;
    }
    PlanExpr *filter = NULL;
    if (e->filter) {
        AggCtx *saved = b->agg;
        b->agg = NULL;
        filter = bind_expr(b, g->input, e->filter);
        b->agg = saved;
        if (!filter || !(filter = coerce_expr(b, filter, TYPE_BOOL, e->filter->pos)))
            return NULL;
    }
    return agg_add(b, g, &agg, arg, filter, e);
badtype:
    werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, e->pos, "function %s(%s) does not exist", f, type_name(arg->type));
    return NULL;
}

/* ---- functions ------------------------------------------------------------ */

/*
 * Functions with fixed signatures, resolved as Postgres does in two passes:
 * first a signature every argument matches exactly (an untyped literal or
 * NULL matches anything), then the first whose parameters every argument
 * reaches by an implicit cast. Overloads are listed in preference order
 * (timestamptz before timestamp, as Postgres prefers it for a date).
 */
typedef struct FuncSig {
    const char *name;
    ScalarFn fn;
    TypeId result;
    int n;
    TypeId args[7];
} FuncSig;

#define T_ TYPE_TEXT
#define I_ TYPE_INT4
#define D_ TYPE_FLOAT8
#define TS_ TYPE_TIMESTAMP
#define TZ_ TYPE_TIMESTAMPTZ
#define J_ TYPE_JSONB
#define N_ TYPE_NUMERIC

static const FuncSig FUNCS[] = {
    {"lower", FN_LOWER, T_, 1, {T_}}, {"upper", FN_UPPER, T_, 1, {T_}},
    {"length", FN_LENGTH, I_, 1, {T_}}, {"char_length", FN_LENGTH, I_, 1, {T_}},
    {"character_length", FN_LENGTH, I_, 1, {T_}}, {"octet_length", FN_OCTET_LENGTH, I_, 1, {T_}},
    {"round", FN_ROUND_F, D_, 1, {D_}}, {"round", FN_ROUND_N_F, D_, 2, {D_, I_}},
    {"trunc", FN_TRUNC_F, D_, 1, {D_}}, {"trunc", FN_TRUNC_N_F, D_, 2, {D_, I_}},
    {"floor", FN_FLOOR_F, D_, 1, {D_}}, {"ceil", FN_CEIL_F, D_, 1, {D_}}, {"ceiling", FN_CEIL_F, D_, 1, {D_}},
    {"sqrt", FN_SQRT_F, D_, 1, {D_}}, {"cbrt", FN_CBRT_F, D_, 1, {D_}}, {"exp", FN_EXP_F, D_, 1, {D_}},
    {"ln", FN_LN_F, D_, 1, {D_}}, {"log", FN_LOG10_F, D_, 1, {D_}}, {"log10", FN_LOG10_F, D_, 1, {D_}},
    {"log", FN_LOG_F, D_, 2, {D_, D_}}, {"sign", FN_SIGN_F, D_, 1, {D_}}, {"pi", FN_PI, D_, 0, {0}},
    {"power", FN_POW_F, D_, 2, {D_, D_}}, {"pow", FN_POW_F, D_, 2, {D_, D_}},
    /* numeric overloads: reached by a numeric argument (pass one), so
     * integers keep the double precision versions listed first */
    {"round", FN_ROUND_N, N_, 1, {N_}}, {"round", FN_ROUND_NN, N_, 2, {N_, I_}},
    {"trunc", FN_TRUNC_N, N_, 1, {N_}}, {"trunc", FN_TRUNC_NN, N_, 2, {N_, I_}},
    {"floor", FN_FLOOR_N, N_, 1, {N_}}, {"ceil", FN_CEIL_N, N_, 1, {N_}}, {"ceiling", FN_CEIL_N, N_, 1, {N_}},
    {"sign", FN_SIGN_N, N_, 1, {N_}},
    {"substr", FN_SUBSTR, T_, 2, {T_, I_}}, {"substr", FN_SUBSTR, T_, 3, {T_, I_, I_}},
    {"substring", FN_SUBSTR, T_, 2, {T_, I_}}, {"substring", FN_SUBSTR, T_, 3, {T_, I_, I_}},
    {"btrim", FN_BTRIM, T_, 1, {T_}}, {"btrim", FN_BTRIM, T_, 2, {T_, T_}},
    {"ltrim", FN_LTRIM, T_, 1, {T_}}, {"ltrim", FN_LTRIM, T_, 2, {T_, T_}},
    {"rtrim", FN_RTRIM, T_, 1, {T_}}, {"rtrim", FN_RTRIM, T_, 2, {T_, T_}},
    {"trim", FN_BTRIM, T_, 1, {T_}}, {"trim", FN_BTRIM, T_, 2, {T_, T_}},
    {"replace", FN_REPLACE, T_, 3, {T_, T_, T_}}, {"split_part", FN_SPLIT_PART, T_, 3, {T_, T_, I_}},
    {"strpos", FN_STRPOS, I_, 2, {T_, T_}}, {"position", FN_STRPOS, I_, 2, {T_, T_}},
    {"left", FN_LEFT, T_, 2, {T_, I_}}, {"right", FN_RIGHT, T_, 2, {T_, I_}},
    {"lpad", FN_LPAD, T_, 2, {T_, I_}}, {"lpad", FN_LPAD, T_, 3, {T_, I_, T_}},
    {"rpad", FN_RPAD, T_, 2, {T_, I_}}, {"rpad", FN_RPAD, T_, 3, {T_, I_, T_}},
    {"repeat", FN_REPEAT, T_, 2, {T_, I_}}, {"reverse", FN_REVERSE, T_, 1, {T_}},
    {"starts_with", FN_STARTS_WITH, TYPE_BOOL, 2, {T_, T_}}, {"initcap", FN_INITCAP, T_, 1, {T_}},
    {"md5", FN_MD5, T_, 1, {T_}}, {"ascii", FN_ASCII, I_, 1, {T_}}, {"chr", FN_CHR, T_, 1, {I_}},
    {"date_trunc", FN_DATE_TRUNC, TZ_, 2, {T_, TZ_}}, {"date_trunc", FN_DATE_TRUNC, TS_, 2, {T_, TS_}},
    {"date_trunc", FN_DATE_TRUNC, TZ_, 3, {T_, TZ_, T_}},
    {"timezone", FN_AT_TIME_ZONE, TS_, 2, {T_, TZ_}}, {"timezone", FN_AT_TIME_ZONE, TZ_, 2, {T_, TS_}},
    {"date_part", FN_EXTRACT_TS, D_, 2, {T_, TZ_}}, {"date_part", FN_EXTRACT_TS, D_, 2, {T_, TS_}},
    {"date_part", FN_EXTRACT_IV, D_, 2, {T_, TYPE_INTERVAL}},
    {"to_timestamp", FN_TO_TIMESTAMP, TZ_, 1, {D_}},
    {"make_date", FN_MAKE_DATE, TYPE_DATE, 3, {I_, I_, I_}},
    {"make_timestamp", FN_MAKE_TIMESTAMP, TS_, 6, {I_, I_, I_, I_, I_, D_}},
    {"make_timestamptz", FN_MAKE_TIMESTAMP, TZ_, 6, {I_, I_, I_, I_, I_, D_}},
    {"make_timestamptz", FN_MAKE_TIMESTAMP, TZ_, 7, {I_, I_, I_, I_, I_, D_, T_}},
    {"to_char", FN_TO_CHAR, T_, 2, {TS_, T_}}, {"to_char", FN_TO_CHAR, T_, 2, {TZ_, T_}},
    {"date_format", FN_DATE_FORMAT, T_, 2, {TS_, T_}}, {"date_format", FN_DATE_FORMAT, T_, 2, {TZ_, T_}},
    {"jsonb_typeof", FN_JSON_TYPEOF, T_, 1, {J_}}, {"json_typeof", FN_JSON_TYPEOF, T_, 1, {J_}},
    {"jsonb_array_length", FN_JSON_ARRAY_LENGTH, I_, 1, {J_}},
    {"json_array_length", FN_JSON_ARRAY_LENGTH, I_, 1, {J_}},
    /* regular expressions; the parser makes the operators calls named "~" etc. */
    {"~", FN_RE_MATCH, TYPE_BOOL, 2, {T_, T_}}, {"~*", FN_RE_IMATCH, TYPE_BOOL, 2, {T_, T_}},
    {"!~", FN_RE_NMATCH, TYPE_BOOL, 2, {T_, T_}}, {"!~*", FN_RE_NIMATCH, TYPE_BOOL, 2, {T_, T_}},
    {"regexp", FN_RE_MATCH, TYPE_BOOL, 2, {T_, T_}},
    {"regexp_like", FN_REGEXP_LIKE, TYPE_BOOL, 2, {T_, T_}}, {"regexp_like", FN_REGEXP_LIKE, TYPE_BOOL, 3, {T_, T_, T_}},
    {"regexp_replace", FN_REGEXP_REPLACE, T_, 3, {T_, T_, T_}},
    {"regexp_replace", FN_REGEXP_REPLACE, T_, 4, {T_, T_, T_, T_}},
    {"regexp_count", FN_REGEXP_COUNT, I_, 2, {T_, T_}}, {"regexp_substr", FN_REGEXP_SUBSTR, T_, 2, {T_, T_}},
    {"regexp_extract", FN_REGEXP_EXTRACT, T_, 2, {T_, T_}},
    {"regexp_extract", FN_REGEXP_EXTRACT, T_, 3, {T_, T_, I_}},
};

static bool is_untyped(const PlanExpr *e) { return e->kind == PE_CONST && (e->unknown || e->value.null); }

/* "name(integer, unknown)" for error messages. */
static const char *call_signature(BindCtx *b, const char *name, int n, PlanExpr **args)
{
    Buf out = BUF_INIT;
    buf_printf(&out, "%s(", name);
    for (int i = 0; i < n; i++)
        buf_printf(&out, "%s%s", i ? ", " : "", is_untyped(args[i]) && !args[i]->value.null ? "unknown"
                                                : args[i]->type == TYPE_NULL ? "unknown" : type_name(args[i]->type));
    buf_putc(&out, ')');
    const char *r = arena_strndup(b->a, out.data, out.len);
    buf_free(&out);
    return r;
}

static PlanExpr *no_function(BindCtx *b, int pos, const char *name, int n, PlanExpr **args)
{
    const char *what, *hint;
    if (plan_unsupported_function(name, &what, &hint)) {
        werr(b->err, SQLSTATE_NOT_SUPPORTED, pos, "feature not supported: %s", what);
        werr_hint(b->err, "%s", hint);
        return NULL;
    }
    werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, pos, "function %s does not exist", call_signature(b, name, n, args));
    werr_hint(b->err, "No function matches the given name and argument types. You might need to add explicit type casts.");
    return NULL;
}

/* Rejects a constant bad field name of date_trunc/date_part/extract at plan time. */
static bool check_field(BindCtx *b, ScalarFn fn, TypeId t, const PlanExpr *field, int pos)
{
    if (field->kind != PE_CONST || field->value.null)
        return true;
    if (scalar_check_field(fn, t, field->value.u.s.p, field->value.u.s.len, b->err) == 0)
        return true;
    b->err->pos = pos;
    return false;
}

/* Resolves f against FUNCS; NULL with b->err unset when nothing fits. */
static PlanExpr *bind_fixed(BindCtx *b, const char *f, int pos, int n, PlanExpr **args)
{
    for (int pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < sizeof FUNCS / sizeof FUNCS[0]; k++) {
            const FuncSig *sig = &FUNCS[k];
            if (strcmp(sig->name, f) != 0)
                continue;
            if (sig->n != n)
                continue;
            bool fits = true;
            for (int i = 0; i < n && fits; i++)
                fits = is_untyped(args[i]) || args[i]->type == sig->args[i] ||
                       (pass == 1 && implicit_ok(args[i]->type, sig->args[i]));
            if (!fits)
                continue;
            for (int i = 0; i < n; i++)
                if (!(args[i] = coerce_expr(b, args[i], sig->args[i], args[i]->pos)))
                    return NULL;
            if ((sig->fn == FN_DATE_TRUNC || sig->fn == FN_EXTRACT_TS || sig->fn == FN_EXTRACT_IV) &&
                !check_field(b, sig->fn, sig->args[1], args[0], pos))
                return NULL;
            return make_call(b, sig->fn, sig->result, pos, n, args);
        }
    }
    return NULL;
}

/* The common type of args[from..n) (as CASE/COALESCE resolve it), coerced in place. */
static TypeId unify_args(BindCtx *b, const char *what, int from, int n, PlanExpr **args)
{
    TypeId t = TYPE_NULL;
    /* With a numeric among them, decimal literals are numerics (coalesce(x, 0.5)). */
    bool has_num = false;
    for (int i = from; i < n; i++)
        has_num |= args[i]->type == TYPE_NUMERIC;
    for (int i = from; i < n; i++) {
        if (is_untyped(args[i]))
            continue;
        bool dec = has_num && args[i]->kind == PE_CONST && args[i]->decimal_text;
        PlanExpr *ai = dec ? make_col(b, 0, TYPE_NUMERIC) : args[i];
        TypeId c = t == TYPE_NULL ? ai->type : common_type(make_col(b, 0, t), ai);
        if (c == TYPE_NULL) {
            werr(b->err, SQLSTATE_DATATYPE_MISMATCH, args[i]->pos, "%s types %s and %s cannot be matched", what,
                 type_name(t), type_name(args[i]->type));
            return TYPE_NULL;
        }
        t = c;
    }
    if (t == TYPE_NULL)
        t = TYPE_TEXT;
    for (int i = from; i < n; i++)
        if (!(args[i] = coerce_expr(b, args[i], t, args[i]->pos)))
            return TYPE_NULL;
    return t;
}

/* Any argument as text, the way concat() takes "any". */
static PlanExpr *as_text(BindCtx *b, PlanExpr *x)
{
    if (x->type == TYPE_TEXT || is_untyped(x))
        return coerce_expr(b, x, TYPE_TEXT, x->pos);
    PlanExpr *c = make_call(b, FN_CAST, TYPE_TEXT, x->pos, 1, &x);
    if (x->type != TYPE_BOOL)
        return c;
    /* concat() prints a boolean with its output function, t/f, where the
     * cast says true/false: its first letter. */
    PlanExpr *args[2] = {c, make_const(b, value_int(TYPE_INT4, 1))};
    return make_call(b, FN_LEFT, TYPE_TEXT, x->pos, 2, args);
}

/* jsonb -> key|index and ->> (the parser makes them calls named "->", "->>"). */
static PlanExpr *bind_json_op(BindCtx *b, const char *op, int pos, PlanExpr **args)
{
    PlanExpr *x = args[0], *k = args[1];
    bool text = op[2] == '>';
    if ((x->type != TYPE_JSONB && !is_untyped(x)) ||
        !(k->type == TYPE_TEXT || is_untyped(k) || (type_is_integer(k->type) && k->type != TYPE_INT8))) {
        werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, pos, "operator does not exist: %s %s %s",
             is_untyped(x) ? "unknown" : type_name(x->type), op, is_untyped(k) ? "unknown" : type_name(k->type));
        werr_hint(b->err, "No operator matches the given name and argument types. You might need to add explicit type casts.");
        return NULL;
    }
    bool idx = type_is_integer(k->type);
    if (!(args[0] = coerce_expr(b, x, TYPE_JSONB, pos)) ||
        !(args[1] = coerce_expr(b, k, idx ? TYPE_INT4 : TYPE_TEXT, pos)))
        return NULL;
    ScalarFn fn = idx ? (text ? FN_JSON_GET_IDX_TEXT : FN_JSON_GET_IDX) : (text ? FN_JSON_GET_KEY_TEXT : FN_JSON_GET_KEY);
    return make_call(b, fn, text ? TYPE_TEXT : TYPE_JSONB, pos, 2, args);
}

/* A constant bad pattern or flag is a plan-time error at the pattern's (or flags') position. */
static bool check_regex(BindCtx *b, const PlanExpr *r)
{
    const PlanExpr *p = r->args[1];
    const PlanExpr *fl = (r->fn == FN_REGEXP_REPLACE && r->n_args == 4) || (r->fn == FN_REGEXP_LIKE && r->n_args == 3)
                             ? r->args[r->n_args - 1] : NULL;
    if (p->kind != PE_CONST || p->value.null)
        return true;
    bool const_flags = fl && fl->kind == PE_CONST && !fl->value.null;
    if (fl && fl->kind == PE_CONST && fl->value.null)
        return true;
    if (scalar_regex_check(r->fn, p->value.u.s.p, p->value.u.s.len, const_flags ? fl->value.u.s.p : NULL,
                           const_flags ? fl->value.u.s.len : 0, b->err) == 0)
        return true;
    b->err->pos = strcmp(b->err->sqlstate, SQLSTATE_INVALID_REGEX) == 0 || !fl ? p->pos : fl->pos;
    return false;
}

/* now() and its synonyms, CURRENT_DATE, LOCALTIMESTAMP: the statement's
 * time (b->now_us, taken at the first use) as FN_NOW's hidden argument. */
static PlanExpr *bind_now(BindCtx *b, const AstExpr *e, PlanExpr **args, bool today, bool local)
{
    /* The statement's time as a hidden argument: every row sees one value. */
    if (b->now_us == 0) {
        Value now;
        WError tmp = {0};
        scalar_call(FN_NOW, TYPE_TIMESTAMPTZ, 0, NULL, b->a, &now, &tmp);
        b->now_us = now.u.i;
    }
    args[0] = make_const(b, value_int(TYPE_TIMESTAMPTZ, b->now_us));
    PlanExpr *now = make_call(b, FN_NOW, TYPE_TIMESTAMPTZ, e->pos, 1, args);
    /* CURRENT_DATE and LOCALTIMESTAMP: the same instant on the session's wall clock. */
    return today || local ? bind_cast(b, now, today ? TYPE_DATE : TYPE_TIMESTAMP, e->pos) : now;
}

static PlanExpr *bind_function(BindCtx *b, const Scope *s, const AstExpr *e)
{
    const char *f = e->text;
    int n = ast_list_len(e->args);
    if (e->over) {
        werr(b->err, SQLSTATE_NOT_SUPPORTED, e->pos, "feature not supported: window function %s() OVER (...)", f);
        return NULL;
    }
    if (e->distinct || e->filter || e->star_arg) {
        werr(b->err, e->star_arg ? SQLSTATE_UNDEFINED_FUNCTION : SQLSTATE_WRONG_OBJECT_TYPE, e->pos,
             e->star_arg ? "%s(*) specified, but %s is not an aggregate function"
                         : "%s specified, but %s is not an aggregate function",
             e->star_arg ? f : e->distinct ? "DISTINCT" : "FILTER", f);
        return NULL;
    }
    if (n > WEIR_MAX_FUNC_ARGS) {
        werr(b->err, SQLSTATE_PROGRAM_LIMIT, e->pos, "cannot pass more than %d arguments to a function", WEIR_MAX_FUNC_ARGS);
        return NULL;
    }
    PlanExpr *args[WEIR_MAX_FUNC_ARGS];
    for (int i = 0; i < n; i++)
        if (!(args[i] = bind_expr(b, s, AST_AT(e->args, i))))
            return NULL;
    if (n == 2 && (strcmp(f, "->") == 0 || strcmp(f, "->>") == 0))
        return bind_json_op(b, f, e->pos, args);
    if (strcmp(f, "pg_typeof") == 0 && n == 1) {
        /* The argument's type is known when the statement is planned: a
         * constant, named as Postgres's regtype output names it (weir's text
         * is character varying; an untyped literal or NULL is unknown). */
        const PlanExpr *x = args[0];
        const char *tn = x->kind == PE_CONST && (x->unknown || x->type == TYPE_NULL) ? "unknown" : type_name(x->type);
        PlanExpr *r = make_const(b, value_str(TYPE_TEXT, tn, strlen(tn)));
        r->pos = e->pos;
        return r;
    }
    if (strcmp(f, "abs") == 0 && n == 1) {
        if (type_is_integer(args[0]->type))
            return make_call(b, FN_ABS_I, args[0]->type, e->pos, 1, args);
        if (args[0]->type == TYPE_FLOAT4 || args[0]->type == TYPE_FLOAT8)
            return make_call(b, FN_ABS_F, args[0]->type, e->pos, 1, args);
        if (args[0]->type == TYPE_NUMERIC)
            return make_call(b, FN_ABS_N, TYPE_NUMERIC, e->pos, 1, args);
        if (is_untyped(args[0])) {
            if (!(args[0] = coerce_expr(b, args[0], TYPE_FLOAT8, e->pos)))
                return NULL;
            return make_call(b, FN_ABS_F, TYPE_FLOAT8, e->pos, 1, args);
        }
    }
    if (strcmp(f, "mod") == 0 && n == 2) {
        TypeId t = common_type(args[0], args[1]);
        if (t == TYPE_TEXT && is_untyped(args[0]) && is_untyped(args[1]))
            t = TYPE_INT4;
        if (t == TYPE_NUMERIC) {
            if (!(args[0] = coerce_expr(b, args[0], t, e->pos)) || !(args[1] = coerce_expr(b, args[1], t, e->pos)))
                return NULL;
            return make_call(b, FN_MOD_N, t, e->pos, 2, args);
        }
        if (type_is_integer(t) || t == TYPE_FLOAT4 || t == TYPE_FLOAT8) {
            if (!type_is_integer(t))
                t = TYPE_FLOAT8;
            if (!(args[0] = coerce_expr(b, args[0], t, e->pos)) || !(args[1] = coerce_expr(b, args[1], t, e->pos)))
                return NULL;
            return make_call(b, type_is_integer(t) ? FN_MOD_I : FN_MOD_F, t, e->pos, 2, args);
        }
    }
    if ((strcmp(f, "coalesce") == 0 || strcmp(f, "greatest") == 0 || strcmp(f, "least") == 0) && n >= 1) {
        ScalarFn fn = f[0] == 'c' ? FN_COALESCE : f[0] == 'g' ? FN_GREATEST : FN_LEAST;
        TypeId t = unify_args(b, fn == FN_COALESCE ? "COALESCE" : fn == FN_GREATEST ? "GREATEST" : "LEAST", 0, n, args);
        if (t == TYPE_NULL)
            return NULL;
        if (fn != FN_COALESCE && t == TYPE_JSONB)
            return no_function(b, e->pos, f, n, args);
        return make_call(b, fn, t, e->pos, n, args);
    }
    if (strcmp(f, "nullif") == 0 && n == 2) {
        TypeId t = common_type(args[0], args[1]);
        if (t == TYPE_NULL) {
            werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, e->pos, "operator does not exist: %s = %s",
                 type_name(args[0]->type), type_name(args[1]->type));
            return NULL;
        }
        if (!(args[0] = coerce_expr(b, args[0], t, e->pos)) || !(args[1] = coerce_expr(b, args[1], t, e->pos)))
            return NULL;
        return make_call(b, FN_NULLIF, t, e->pos, 2, args);
    }
    if ((strcmp(f, "concat") == 0 && n >= 1) || (strcmp(f, "concat_ws") == 0 && n >= 2)) {
        for (int i = 0; i < n; i++)
            if (!(args[i] = as_text(b, args[i])))
                return NULL;
        return make_call(b, f[6] ? FN_CONCAT_WS : FN_CONCAT_ARGS, TYPE_TEXT, e->pos, n, args);
    }
    bool today = strcmp(f, "current_date") == 0, local = strcmp(f, "localtimestamp") == 0;
    if ((strcmp(f, "now") == 0 || strcmp(f, "current_timestamp") == 0 || strcmp(f, "transaction_timestamp") == 0 ||
         strcmp(f, "statement_timestamp") == 0 || today || local) && n == 0) {
        return bind_now(b, e, args, today, local);
    }
    if (strcmp(f, "make_interval") == 0 && n <= 7) {
        for (int i = 0; i < n; i++)
            if (!implicit_ok(args[i]->type, i == 6 ? TYPE_FLOAT8 : TYPE_INT4) && !is_untyped(args[i]))
                return no_function(b, e->pos, f, n, args);
        for (int i = 0; i < n; i++)
            if (!(args[i] = coerce_expr(b, args[i], i == 6 ? TYPE_FLOAT8 : TYPE_INT4, args[i]->pos)))
                return NULL;
        return make_call(b, FN_MAKE_INTERVAL, TYPE_INTERVAL, e->pos, n, args);
    }
    if ((strcmp(f, "jsonb_extract_path") == 0 || strcmp(f, "jsonb_extract_path_text") == 0 ||
         strcmp(f, "json_extract_path") == 0 || strcmp(f, "json_extract_path_text") == 0) && n >= 2) {
        if (args[0]->type != TYPE_JSONB && !is_untyped(args[0]))
            return no_function(b, e->pos, f, n, args);
        for (int i = 1; i < n; i++)
            if (args[i]->type != TYPE_TEXT && !is_untyped(args[i]))
                return no_function(b, e->pos, f, n, args);
        for (int i = 0; i < n; i++)
            if (!(args[i] = coerce_expr(b, args[i], i ? TYPE_TEXT : TYPE_JSONB, args[i]->pos)))
                return NULL;
        bool text = strstr(f, "_text") != NULL;
        return make_call(b, text ? FN_JSON_PATH_TEXT : FN_JSON_PATH, text ? TYPE_TEXT : TYPE_JSONB, e->pos, n, args);
    }
    if (strcmp(f, "if") == 0 && n == 3) {
        /* Flink's IF(cond, a, b): CASE WHEN cond THEN a ELSE b END. */
        if (!(args[0] = coerce_expr(b, args[0], TYPE_BOOL, args[0]->pos)))
            return NULL;
        TypeId t = unify_args(b, "IF", 1, 3, args);
        if (t == TYPE_NULL)
            return NULL;
        return make_call(b, FN_CASE, t, e->pos, 3, args);
    }
    PlanExpr *r = bind_fixed(b, f, e->pos, n, args);
    if (r && r->fn >= FN_RE_MATCH && r->fn <= FN_REGEXP_EXTRACT && !check_regex(b, r))
        return NULL;
    if (r || b->err->set)
        return r;
    if (n == 2 && (f[0] == '~' || f[0] == '!')) {
        werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, e->pos, "operator does not exist: %s %s %s",
             is_untyped(args[0]) ? "unknown" : type_name(args[0]->type), f,
             is_untyped(args[1]) ? "unknown" : type_name(args[1]->type));
        werr_hint(b->err, "No operator matches the given name and argument types. You might need to add explicit type casts.");
        return NULL;
    }
    return no_function(b, e->pos, f, n, args);
}

/* EXTRACT(field FROM x): date_part by x's type, as a numeric. */
static PlanExpr *bind_extract(BindCtx *b, const Scope *s, const AstExpr *e)
{
    PlanExpr *args[2];
    if (!(args[1] = bind_expr(b, s, e->arg)))
        return NULL;
    args[0] = make_const(b, value_str(TYPE_TEXT, arena_strdup(b->a, e->text), strlen(e->text)));
    args[0]->pos = e->pos;
    TypeId t = args[1]->type;
    if (is_untyped(args[1]))
        t = TYPE_TIMESTAMPTZ;
    ScalarFn fn = t == TYPE_DATE ? FN_EXTRACT_DATE : t == TYPE_INTERVAL ? FN_EXTRACT_IV
                : t == TYPE_TIMESTAMP || t == TYPE_TIMESTAMPTZ ? FN_EXTRACT_TS : FN_NONE;
    if (fn == FN_NONE) {
        args[0]->unknown = true;
        return no_function(b, e->pos, "extract", 2, args);
    }
    if (!(args[1] = coerce_expr(b, args[1], t, e->pos)) || !check_field(b, fn, t, args[0], e->pos))
        return NULL;
    /* numeric since planner revision 4, as in Postgres 14+; date_part stays double precision */
    return make_call(b, fn, b->plan_rev >= 4 ? TYPE_NUMERIC : TYPE_FLOAT8, e->pos, 2, args);
}

/* ---- the dispatcher ------------------------------------------------------- */

static PlanExpr *bind_expr_inner(BindCtx *b, const Scope *s, const AstExpr *e);

PlanExpr *bind_expr(BindCtx *b, const Scope *s, const AstExpr *e)
{
    if (b->agg && !b->in_agg_arg) {
        /* Post-aggregation: a GROUP BY expression becomes its column. */
        if (ast_is_aggregate(e))
            return bind_aggregate(b, e);
        if (e->kind != AST_LITERAL) {
            AggCtx *g = b->agg;
            WError probe = {0};
            WError *saved_err = b->err;
            AggCtx *saved = b->agg;
            b->err = &probe;
            b->agg = NULL;
            PlanExpr *x = ast_contains_aggregate(e) ? NULL : bind_expr_inner(b, g->input, e);
            b->err = saved_err;
            b->agg = saved;
            if (x) {
                for (int i = 0; i < g->n_group; i++)
                    if (expr_equal(x, g->group[i])) {
                        PlanExpr *r = make_col(b, i, g->group[i]->type);
                        r->pos = e->pos;
                        return r;
                    }
            }
            if (e->kind == AST_COLUMN) {
                if (!x) /* the name itself is wrong: report that */
                    return bind_expr_inner(b, g->input, e);
                werr(b->err, SQLSTATE_GROUPING_ERROR, e->pos,
                     "column \"%s\" must appear in the GROUP BY clause or be used in an aggregate function", e->text);
                return NULL;
            }
        }
    }
    PlanExpr *r = bind_expr_inner(b, s, e);
    if (r && !r->pos)
        r->pos = e->pos;
    return r;
}

/* NOT, unary plus and minus. */
static PlanExpr *bind_unary(BindCtx *b, const Scope *s, const AstExpr *e)
{
    PlanExpr *x = bind_expr(b, s, AST_AT(e->args, 0));
    if (!x)
        return NULL;
    if (e->op == OP_NOT) {
        if (!(x = coerce_expr(b, x, TYPE_BOOL, e->pos)))
            return NULL;
        return make_call(b, FN_NOT, TYPE_BOOL, e->pos, 1, &x);
    }
    if (e->op == OP_PLUS)
        return x;
    if (x->kind == PE_CONST && x->unknown && !(x = coerce_expr(b, x, TYPE_FLOAT8, e->pos)))
        return NULL;
    if (type_is_integer(x->type))
        return make_call(b, FN_NEG_I, x->type, e->pos, 1, &x);
    if (x->type == TYPE_FLOAT4 || x->type == TYPE_FLOAT8)
        return make_call(b, FN_NEG_F, x->type, e->pos, 1, &x);
    if (x->type == TYPE_NUMERIC)
        return make_call(b, FN_NEG_N, x->type, e->pos, 1, &x);
    if (x->type == TYPE_INTERVAL)
        return make_call(b, FN_IV_NEG, x->type, e->pos, 1, &x);
    werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, e->pos, "operator does not exist: - %s", type_name(x->type));
    return NULL;
}

/* CAST / TRY_CAST, with NUMERIC(p,s) as a rounding call. */
static PlanExpr *bind_cast_expr(BindCtx *b, const Scope *s, const AstExpr *e)
{
    PlanExpr *x = bind_expr(b, s, e->arg);
    if (!x)
        return NULL;
    TypeId t = type_from_name(e->type_name);
    if (t == TYPE_NULL) {
        werr(b->err, SQLSTATE_UNDEFINED_OBJECT, e->pos, "type \"%s\" does not exist", e->type_name);
        return NULL;
    }
    int prec = 0, scale = 0, mod = type_numeric_mod(e->type_name, &prec, &scale, b->err);
    if (mod < 0) {
        b->err->pos = e->pos;
        return NULL;
    }
    if (mod && e->try_cast) {
        werr(b->err, SQLSTATE_NOT_SUPPORTED, e->pos, "feature not supported: TRY_CAST to NUMERIC(p,s); cast to NUMERIC");
        return NULL;
    }
    if (mod) {
        /* CAST(x AS NUMERIC(p,s)): to numeric, then round to s digits and
         * check the integer part fits p - s (a constant folds here too). */
        if (!(x = bind_cast(b, x, TYPE_NUMERIC, e->pos)))
            return NULL;
        PlanExpr *args[3] = {x, make_const(b, value_int(TYPE_INT4, prec)),
                             make_const(b, value_int(TYPE_INT4, scale))};
        return make_call(b, FN_NUM_TYPMOD, TYPE_NUMERIC, e->pos, 3, args);
    }
    if (e->try_cast) {
        /* A bare literal is text here, so that its bad input is a NULL, not a plan-time error. */
        if (x->kind == PE_CONST && x->unknown && !x->value.null && !(x = coerce_expr(b, x, TYPE_TEXT, x->pos)))
            return NULL;
        PlanExpr *c = bind_cast(b, x, t, e->pos);
        if (c && c->kind == PE_CALL && c->fn == FN_CAST)
            c->fn = FN_TRY_CAST;
        return c;
    }
    return bind_cast(b, x, t, e->pos);
}

/* IS [NOT] NULL / TRUE / FALSE / UNKNOWN / DISTINCT FROM. */
static PlanExpr *bind_is(BindCtx *b, const Scope *s, const AstExpr *e)
{
    PlanExpr *x = bind_expr(b, s, e->arg);
    if (!x)
        return NULL;
    ScalarFn fn;
    switch (e->is_kind) {
    case IS_NULL: fn = e->negated ? FN_IS_NOT_NULL : FN_IS_NULL; break;
    case IS_TRUE: fn = e->negated ? FN_IS_NOT_TRUE : FN_IS_TRUE; break;
    case IS_FALSE: fn = e->negated ? FN_IS_NOT_FALSE : FN_IS_FALSE; break;
    case IS_UNKNOWN: fn = e->negated ? FN_IS_NOT_NULL : FN_IS_NULL; break;
    case IS_DISTINCT_FROM: {
        PlanExpr *y = bind_expr(b, s, e->lo);
        if (!y)
            return NULL;
        TypeId t = common_type(x, y);
        if (t == TYPE_NULL || !(x = coerce_expr(b, x, t, e->pos)) || !(y = coerce_expr(b, y, t, e->pos))) {
            werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, e->pos, "operator does not exist: %s = %s",
                 type_name(x ? x->type : TYPE_NULL), type_name(y->type));
            return NULL;
        }
        PlanExpr *args[2] = {x, y};
        return make_call(b, e->negated ? FN_IS_NOT_DISTINCT : FN_IS_DISTINCT, TYPE_BOOL, e->pos, 2, args);
    }
    default: return NULL;
    }
    if (e->is_kind != IS_NULL && !(x = coerce_expr(b, x, TYPE_BOOL, e->pos)))
        return NULL;
    return make_call(b, fn, TYPE_BOOL, e->pos, 1, &x);
}

/* x [NOT] BETWEEN lo AND hi as two comparisons. */
static PlanExpr *bind_between(BindCtx *b, const Scope *s, const AstExpr *e)
{
    PlanExpr *x = bind_expr(b, s, e->arg), *lo = x ? bind_expr(b, s, e->lo) : NULL;
    PlanExpr *hi = lo ? bind_expr(b, s, e->hi) : NULL;
    if (!hi)
        return NULL;
    PlanExpr *ge = bind_binary(b, s, e, OP_GE, x, lo);
    PlanExpr *le = ge ? bind_binary(b, s, e, OP_LE, x, hi) : NULL;
    if (!le)
        return NULL;
    PlanExpr *args[2] = {ge, le};
    PlanExpr *r = make_call(b, FN_AND, TYPE_BOOL, e->pos, 2, args);
    return e->negated ? make_call(b, FN_NOT, TYPE_BOOL, e->pos, 1, &r) : r;
}

/* x [NOT] IN (list): one common type for x and the list. */
static PlanExpr *bind_in_list(BindCtx *b, const Scope *s, const AstExpr *e)
{
    int n = ast_list_len(e->args);
    PlanExpr **args = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(n + 1));
    if (!(args[0] = bind_expr(b, s, e->arg)))
        return NULL;
    TypeId t = args[0]->kind == PE_CONST && args[0]->unknown ? TYPE_NULL : args[0]->type;
    for (int i = 0; i < n; i++) {
        if (!(args[i + 1] = bind_expr(b, s, AST_AT(e->args, i))))
            return NULL;
        if (t == TYPE_NULL && !(args[i + 1]->kind == PE_CONST && args[i + 1]->unknown))
            t = args[i + 1]->type;
        else if (t != TYPE_NULL) {
            TypeId c = common_type(make_col(b, 0, t), args[i + 1]);
            if (c == TYPE_NULL) {
                werr(b->err, SQLSTATE_UNDEFINED_FUNCTION, args[i + 1]->pos, "operator does not exist: %s = %s",
                     type_name(t), type_name(args[i + 1]->type));
                return NULL;
            }
            t = c;
        }
    }
    if (t == TYPE_NULL)
        t = TYPE_TEXT;
    for (int i = 0; i <= n; i++)
        if (!(args[i] = coerce_expr(b, args[i], t, args[i]->pos)))
            return NULL;
    PlanExpr *r = make_call(b, FN_IN, TYPE_BOOL, e->pos, n + 1, args);
    return e->negated ? make_call(b, FN_NOT, TYPE_BOOL, e->pos, 1, &r) : r;
}

/* [NOT] LIKE / ILIKE [ESCAPE]. */
static PlanExpr *bind_like(BindCtx *b, const Scope *s, const AstExpr *e)
{
    PlanExpr *x = bind_expr(b, s, e->arg), *p = x ? bind_expr(b, s, e->lo) : NULL;
    if (!p)
        return NULL;
    PlanExpr *esc = e->hi ? bind_expr(b, s, e->hi) : NULL;
    if (e->hi && (!esc || !(esc = coerce_expr(b, esc, TYPE_TEXT, e->hi->pos))))
        return NULL;
    if (!(x = coerce_expr(b, x, TYPE_TEXT, e->pos)) || !(p = coerce_expr(b, p, TYPE_TEXT, e->pos)))
        return NULL;
    PlanExpr *args[3] = {x, p, esc};
    PlanExpr *r = make_call(b, e->ilike ? FN_ILIKE : FN_LIKE, TYPE_BOOL, e->pos, esc ? 3 : 2, args);
    return e->negated ? make_call(b, FN_NOT, TYPE_BOOL, e->pos, 1, &r) : r;
}

/* CASE [operand] WHEN ... [ELSE]: the results take their common type. */
static PlanExpr *bind_case(BindCtx *b, const Scope *s, const AstExpr *e)
{
    int nw = ast_list_len(e->whens);
    int n = nw + (e->else_ ? 1 : 0);
    PlanExpr **args = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(n ? n : 1));
    PlanExpr *operand = e->arg ? bind_expr(b, s, e->arg) : NULL;
    if (e->arg && !operand)
        return NULL;
    TypeId t = TYPE_NULL;
    for (int i = 0; i < n; i++) {
        const AstExpr *ae = i < nw ? AST_AT(e->whens, i) : e->else_;
        bool is_when = i < nw && i % 2 == 0;
        PlanExpr *x = bind_expr(b, s, ae);
        if (!x)
            return NULL;
        if (is_when) {
            if (operand && !(x = bind_binary(b, s, ae, OP_EQ, operand, x)))
                return NULL;
            if (!(x = coerce_expr(b, x, TYPE_BOOL, ae->pos)))
                return NULL;
        } else if (!(x->kind == PE_CONST && (x->unknown || x->value.null))) {
            TypeId c = t == TYPE_NULL ? x->type : common_type(make_col(b, 0, t), x);
            if (c == TYPE_NULL) {
                werr(b->err, SQLSTATE_DATATYPE_MISMATCH, ae->pos, "CASE types %s and %s cannot be matched",
                     type_name(t), type_name(x->type));
                return NULL;
            }
            t = c;
        }
        args[i] = x;
    }
    if (t == TYPE_NULL)
        t = TYPE_TEXT;
    for (int i = 0; i < n; i++) {
        bool is_when = i < nw && i % 2 == 0;
        if (!is_when && !(args[i] = coerce_expr(b, args[i], t, args[i]->pos)))
            return NULL;
    }
    return make_call(b, FN_CASE, t, e->pos, n, args);
}

static PlanExpr *bind_expr_inner(BindCtx *b, const Scope *s, const AstExpr *e)
{
    switch (e->kind) {
    case AST_LITERAL: return bind_literal(b, e);
    case AST_COLUMN:
        if (b->agg && !b->in_agg_arg) /* reached only for columns handled above */
            return NULL;
        return bind_column(b, s, e);
    case AST_STAR:
        werr(b->err, SQLSTATE_SYNTAX_ERROR, e->pos, "\"*\" is not allowed here");
        return NULL;
    case AST_PARAM:
        werr(b->err, SQLSTATE_NOT_SUPPORTED, e->pos, "feature not supported: query parameters ($%d)", e->param_no);
        return NULL;
    case AST_UNARY: return bind_unary(b, s, e);
    case AST_BINARY: {
        if ((e->op == OP_AND || e->op == OP_OR) && ast_list_len(e->args) > 2)
            return bind_chain(b, s, e, 0, ast_list_len(e->args));
        PlanExpr *x = bind_expr(b, s, AST_AT(e->args, 0));
        PlanExpr *y = x ? bind_expr(b, s, AST_AT(e->args, 1)) : NULL;
        if (!x || !y)
            return NULL;
        return bind_binary(b, s, e, e->op, x, y);
    }
    case AST_FUNC:
        if (ast_is_aggregate(e)) {
            werr(b->err, SQLSTATE_GROUPING_ERROR, e->pos, "aggregate functions are not allowed here");
            return NULL;
        }
        return bind_function(b, s, e);
    case AST_CAST: return bind_cast_expr(b, s, e);
    case AST_IS: return bind_is(b, s, e);
    case AST_BETWEEN: return bind_between(b, s, e);
    case AST_IN: return bind_in_list(b, s, e);
    case AST_LIKE: return bind_like(b, s, e);
    case AST_CASE: return bind_case(b, s, e);
    case AST_EXTRACT:
        return bind_extract(b, s, e);
    case AST_SUBQUERY:
        return bind_subquery(b, s, e);
    }
    werr(b->err, SQLSTATE_INTERNAL, e->pos, "unknown expression");
    return NULL;
}

const char *expr_default_name(const AstExpr *e)
{
    switch (e->kind) {
    case AST_COLUMN: return e->text;
    case AST_FUNC:   /* -> and ->> are operators; trim(x) is btrim as in Postgres */
        return e->text[0] == '-' ? "?column?" : strcmp(e->text, "trim") == 0 ? "btrim" : e->text;
    case AST_EXTRACT: return "extract";
    case AST_CAST: return e->arg->kind == AST_COLUMN ? e->arg->text : e->type_name;
    case AST_CASE: return "case";
    case AST_SUBQUERY:
        /* As Postgres: EXISTS is "exists", a scalar subquery takes its column's name. */
        if (e->subq_kind == SUBQ_EXISTS)
            return "exists";
        if (e->subq_kind == SUBQ_SCALAR && e->subquery && ast_list_len(e->subquery->targets) == 1) {
            const AstTarget *t = AST_AT(e->subquery->targets, 0);
            return t->alias ? t->alias : expr_default_name(t->expr);
        }
        return "?column?";
    default: return "?column?";
    }
}

int const_interval_us(BindCtx *b, const Scope *s, const AstExpr *e, int64_t *out)
{
    PlanExpr *x = bind_expr(b, s, e);
    if (!x || !(x = coerce_expr(b, x, TYPE_INTERVAL, e->pos)))
        return -1;
    Value v;
    if (eval_const(b, x, &v))
        return -1;
    if (v.null || interval_to_usecs(&v.u.iv, out))
        return werr(b->err, SQLSTATE_INVALID_PARAMETER, e->pos,
                    "window sizes must be fixed intervals (seconds to days, no months)");
    return 0;
}

/* A subquery in an expression reads the column plan_subq.c joined it as
 * (BindCtx.subq, newest first); NOT IN negates the mark. */
PlanExpr *bind_subquery(BindCtx *b, const Scope *s, const AstExpr *e)
{
    for (int i = b->n_subq - 1; i >= 0; i--) {
        if (b->subq[i].e != e)
            continue;
        int col = b->subq[i].col;
        if (col >= s->n)
            break;
        PlanExpr *x = make_col(b, col, s->cols[col].type);
        x->pos = e->pos;
        if (e->subq_kind == SUBQ_IN && e->negated) {
            PlanExpr *n = arena_zalloc(b->a, sizeof *n);
            *n = (PlanExpr){.kind = PE_CALL, .fn = FN_NOT, .type = TYPE_BOOL, .pos = e->pos, .n_args = 1,
                            .args = arena_alloc(b->a, sizeof(PlanExpr *))};
            n->args[0] = x;
            return n;
        }
        return x;
    }
    werr(b->err, SQLSTATE_NOT_SUPPORTED, e->pos, "feature not supported: a subquery here");
    werr_hint(b->err, "Subqueries are supported in WHERE and in the select list of a query without GROUP BY.");
    return NULL;
}
