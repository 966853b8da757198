/* scalar.c: reference semantics of scalar functions. See scalar.h. */
#include "scalar.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *FN_NAMES[FN__COUNT] = {
    [FN_NONE] = "?",
    [FN_ADD_I] = "+", [FN_SUB_I] = "-", [FN_MUL_I] = "*", [FN_DIV_I] = "/", [FN_MOD_I] = "%",
    [FN_NEG_I] = "-", [FN_ADD_F] = "+", [FN_SUB_F] = "-", [FN_MUL_F] = "*", [FN_DIV_F] = "/",
    [FN_NEG_F] = "-", [FN_POW_F] = "^",
    [FN_TS_ADD_IV] = "+", [FN_TS_SUB_IV] = "-", [FN_TS_SUB_TS] = "-", [FN_IV_ADD_IV] = "+",
    [FN_IV_SUB_IV] = "-", [FN_IV_NEG] = "-", [FN_IV_MUL_F] = "*", [FN_DATE_ADD_I] = "+",
    [FN_DATE_SUB_I] = "-", [FN_DATE_SUB_DATE] = "-",
    [FN_EQ] = "=", [FN_NE] = "<>", [FN_LT] = "<", [FN_LE] = "<=", [FN_GT] = ">", [FN_GE] = ">=",
    [FN_AND] = "AND", [FN_OR] = "OR", [FN_NOT] = "NOT",
    [FN_IS_NULL] = "IS NULL", [FN_IS_NOT_NULL] = "IS NOT NULL", [FN_IS_TRUE] = "IS TRUE",
    [FN_IS_NOT_TRUE] = "IS NOT TRUE", [FN_IS_FALSE] = "IS FALSE", [FN_IS_NOT_FALSE] = "IS NOT FALSE",
    [FN_IS_DISTINCT] = "IS DISTINCT FROM", [FN_IS_NOT_DISTINCT] = "IS NOT DISTINCT FROM",
    [FN_CONCAT] = "||", [FN_LOWER] = "lower", [FN_UPPER] = "upper", [FN_LENGTH] = "length",
    [FN_LIKE] = "LIKE", [FN_ILIKE] = "ILIKE",
    [FN_CAST] = "CAST", [FN_CASE] = "CASE", [FN_COALESCE] = "coalesce",
    [FN_ABS_I] = "abs", [FN_ABS_F] = "abs", [FN_IN] = "IN",
};

const char *scalar_fn_name(ScalarFn fn) { return (unsigned)fn < FN__COUNT && FN_NAMES[fn] ? FN_NAMES[fn] : "?"; }

bool scalar_fn_is_infix(ScalarFn fn)
{
    switch (fn) {
    case FN_ADD_I: case FN_SUB_I: case FN_MUL_I: case FN_DIV_I: case FN_MOD_I:
    case FN_ADD_F: case FN_SUB_F: case FN_MUL_F: case FN_DIV_F: case FN_POW_F:
    case FN_TS_ADD_IV: case FN_TS_SUB_IV: case FN_TS_SUB_TS: case FN_IV_ADD_IV: case FN_IV_SUB_IV:
    case FN_IV_MUL_F: case FN_DATE_ADD_I: case FN_DATE_SUB_I: case FN_DATE_SUB_DATE:
    case FN_EQ: case FN_NE: case FN_LT: case FN_LE: case FN_GT: case FN_GE:
    case FN_AND: case FN_OR: case FN_CONCAT: case FN_LIKE: case FN_ILIKE:
    case FN_IS_DISTINCT: case FN_IS_NOT_DISTINCT:
        return true;
    default:
        return false;
    }
}

static int range_check(int64_t v, TypeId t, WError *err)
{
    if ((t == TYPE_INT2 && (v < INT16_MIN || v > INT16_MAX)) ||
        (t == TYPE_INT4 && (v < INT32_MIN || v > INT32_MAX)))
        return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "%s out of range", type_name(t));
    return 0;
}

static int int_overflow(TypeId t, WError *err)
{
    return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "%s out of range", type_name(t));
}

bool like_match(const char *s, size_t n, const char *p, size_t m, bool icase)
{
    size_t i = 0, j = 0, star_j = (size_t)-1, star_i = 0;
    while (i < n) {
        if (j < m && p[j] == '\\' && j + 1 < m) {
            char a = s[i], b = p[j + 1];
            if (icase ? tolower((unsigned char)a) == tolower((unsigned char)b) : a == b) {
                i++;
                j += 2;
                continue;
            }
        } else if (j < m && p[j] == '%') {
            star_j = j++;
            star_i = i;
            continue;
        } else if (j < m && (p[j] == '_' ||
                             (icase ? tolower((unsigned char)p[j]) == tolower((unsigned char)s[i]) : p[j] == s[i]))) {
            i++;
            j++;
            continue;
        }
        if (star_j == (size_t)-1)
            return false;
        j = star_j + 1;
        i = ++star_i;
    }
    while (j < m && p[j] == '%')
        j++;
    return j == m;
}

int scalar_cast(const Value *v, TypeId t, Arena *a, Value *out, WError *err)
{
    if (v->null || v->type == t) {
        *out = *v;
        out->type = t;
        return 0;
    }
    TypeId f = v->type;
    *out = value_null(t);
    out->null = false;
    if (t == TYPE_TEXT || t == TYPE_JSONB) {
        Buf b = BUF_INIT;
        value_to_text(v, &b);
        out->u.s.p = arena_strndup(a, b.data ? b.data : "", b.len);
        out->u.s.len = (uint32_t)b.len;
        buf_free(&b);
        return 0;
    }
    if (type_phys(f) == PHYS_STR)
        return value_from_text(t, v->u.s.p, v->u.s.len, a, out, err);
    if (type_is_integer(t)) {
        if (type_is_integer(f) || f == TYPE_BOOL) {
            out->u.i = v->u.i;
        } else if (f == TYPE_FLOAT4 || f == TYPE_FLOAT8) {
            double r = rint(v->u.f);
            if (isnan(r) || r < -9.2233720368547758e18 || r >= 9.2233720368547758e18)
                return int_overflow(t, err);
            out->u.i = (int64_t)r;
        } else {
            goto bad;
        }
        return range_check(out->u.i, t, err);
    }
    if (t == TYPE_FLOAT4 || t == TYPE_FLOAT8) {
        if (type_is_integer(f))
            out->u.f = (double)v->u.i;
        else if (f == TYPE_FLOAT4 || f == TYPE_FLOAT8)
            out->u.f = v->u.f;
        else
            goto bad;
        if (t == TYPE_FLOAT4)
            out->u.f = (double)(float)out->u.f;
        return 0;
    }
    if (t == TYPE_BOOL && type_is_integer(f)) {
        out->u.i = v->u.i != 0;
        return 0;
    }
    if (t == TYPE_TIMESTAMP || t == TYPE_TIMESTAMPTZ) {
        if (f == TYPE_DATE) {
            out->u.i = v->u.i * USECS_PER_DAY;
            return 0;
        }
        if (f == TYPE_TIMESTAMP || f == TYPE_TIMESTAMPTZ) {
            out->u.i = v->u.i; /* the session time zone is UTC */
            return 0;
        }
    }
    if (t == TYPE_DATE && (f == TYPE_TIMESTAMP || f == TYPE_TIMESTAMPTZ)) {
        int64_t d = v->u.i / USECS_PER_DAY;
        if (v->u.i % USECS_PER_DAY < 0)
            d--;
        out->u.i = d;
        return 0;
    }
bad:
    return werr(err, SQLSTATE_DATATYPE_MISMATCH, 0, "cannot cast type %s to %s", type_name(f), type_name(t));
}

static int cmp_result(ScalarFn fn, int c)
{
    switch (fn) {
    case FN_EQ: return c == 0;
    case FN_NE: return c != 0;
    case FN_LT: return c < 0;
    case FN_LE: return c <= 0;
    case FN_GT: return c > 0;
    case FN_GE: return c >= 0;
    default: return 0;
    }
}

/* NULL=unknown as -1, else 0/1. */
static int truth(const Value *v) { return v->null ? -1 : v->u.i != 0; }

static Value tri(int t)
{
    if (t < 0)
        return value_null(TYPE_BOOL);
    return value_bool(t);
}

static bool is_strict(ScalarFn fn)
{
    switch (fn) {
    case FN_AND: case FN_OR: case FN_IS_NULL: case FN_IS_NOT_NULL: case FN_IS_TRUE:
    case FN_IS_NOT_TRUE: case FN_IS_FALSE: case FN_IS_NOT_FALSE: case FN_IS_DISTINCT:
    case FN_IS_NOT_DISTINCT: case FN_CASE: case FN_COALESCE: case FN_IN: case FN_CAST:
        return false;
    default:
        return true;
    }
}

int scalar_call(ScalarFn fn, TypeId result, int n, const Value *args, Arena *a, Value *out, WError *err)
{
    if (is_strict(fn)) {
        for (int i = 0; i < n; i++)
            if (args[i].null) {
                *out = value_null(result);
                return 0;
            }
    }
    *out = value_null(result);
    out->null = false;
    const Value *x = &args[0], *y = n > 1 ? &args[1] : NULL;
    int64_t r;
    switch (fn) {
    case FN_ADD_I:
        if (__builtin_add_overflow(x->u.i, y->u.i, &r))
            return int_overflow(result, err);
        out->u.i = r;
        return range_check(r, result, err);
    case FN_SUB_I:
        if (__builtin_sub_overflow(x->u.i, y->u.i, &r))
            return int_overflow(result, err);
        out->u.i = r;
        return range_check(r, result, err);
    case FN_MUL_I:
        if (__builtin_mul_overflow(x->u.i, y->u.i, &r))
            return int_overflow(result, err);
        out->u.i = r;
        return range_check(r, result, err);
    case FN_DIV_I:
    case FN_MOD_I:
        if (y->u.i == 0)
            return werr(err, SQLSTATE_DIVISION_BY_ZERO, 0, "division by zero");
        if (y->u.i == -1) {
            /* INT64_MIN / -1 overflows; x % -1 is always 0. */
            if (fn == FN_MOD_I) {
                out->u.i = 0;
                return 0;
            }
            if (__builtin_sub_overflow((int64_t)0, x->u.i, &r))
                return int_overflow(result, err);
            out->u.i = r;
            return range_check(r, result, err);
        }
        out->u.i = fn == FN_DIV_I ? x->u.i / y->u.i : x->u.i % y->u.i;
        return 0;
    case FN_NEG_I:
        if (__builtin_sub_overflow((int64_t)0, x->u.i, &r))
            return int_overflow(result, err);
        out->u.i = r;
        return range_check(r, result, err);
    case FN_ABS_I:
        if (x->u.i == INT64_MIN)
            return int_overflow(result, err);
        out->u.i = x->u.i < 0 ? -x->u.i : x->u.i;
        return range_check(out->u.i, result, err);
    case FN_ADD_F: out->u.f = x->u.f + y->u.f; goto fcheck;
    case FN_SUB_F: out->u.f = x->u.f - y->u.f; goto fcheck;
    case FN_MUL_F: out->u.f = x->u.f * y->u.f; goto fcheck;
    case FN_DIV_F:
        if (y->u.f == 0)
            return werr(err, SQLSTATE_DIVISION_BY_ZERO, 0, "division by zero");
        out->u.f = x->u.f / y->u.f;
        goto fcheck;
    case FN_NEG_F: out->u.f = -x->u.f; return 0;
    case FN_ABS_F: out->u.f = fabs(x->u.f); return 0;
    case FN_POW_F: out->u.f = pow(x->u.f, y->u.f); goto fcheck;
    fcheck:
        if (isinf(out->u.f) && !isinf(x->u.f) && !(y && isinf(y->u.f)))
            return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "value out of range: overflow");
        if (result == TYPE_FLOAT4)
            out->u.f = (double)(float)out->u.f;
        return 0;
    case FN_TS_ADD_IV:
    case FN_TS_SUB_IV: {
        int sign = fn == FN_TS_ADD_IV ? 1 : -1;
        int64_t t = x->u.i;
        if (y->u.iv.months) {
            /* Month arithmetic keeps the day of month, clamped to the month's end, as Postgres. */
            int64_t days = t / USECS_PER_DAY, tod = t % USECS_PER_DAY;
            if (tod < 0) {
                tod += USECS_PER_DAY;
                days--;
            }
            int64_t yy;
            unsigned mm, dd;
            civil_from_days(days, &yy, &mm, &dd);
            int64_t mi = yy * 12 + (mm - 1) + sign * y->u.iv.months;
            yy = mi >= 0 ? mi / 12 : (mi - 11) / 12;
            mm = (unsigned)(mi - yy * 12) + 1;
            static const unsigned dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
            unsigned maxd = dm[mm - 1] + (mm == 2 && ((yy % 4 == 0 && yy % 100 != 0) || yy % 400 == 0));
            if (dd > maxd)
                dd = maxd;
            t = days_from_civil(yy, mm, dd) * USECS_PER_DAY + tod;
        }
        int64_t delta;
        if (__builtin_mul_overflow((int64_t)y->u.iv.days, USECS_PER_DAY, &delta) ||
            __builtin_add_overflow(delta, y->u.iv.usecs, &delta) ||
            __builtin_add_overflow(t, sign * delta, &r))
            return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "timestamp out of range");
        out->u.i = r;
        return 0;
    }
    case FN_TS_SUB_TS: {
        int64_t d;
        if (__builtin_sub_overflow(x->u.i, y->u.i, &d))
            return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "interval out of range");
        /* Postgres justifies whole days out of the difference. */
        out->u.iv.days = (int32_t)(d / USECS_PER_DAY);
        out->u.iv.usecs = d % USECS_PER_DAY;
        out->u.iv.months = 0;
        return 0;
    }
    case FN_IV_ADD_IV:
    case FN_IV_SUB_IV: {
        int sign = fn == FN_IV_ADD_IV ? 1 : -1;
        out->u.iv.months = x->u.iv.months + sign * y->u.iv.months;
        out->u.iv.days = x->u.iv.days + sign * y->u.iv.days;
        out->u.iv.usecs = x->u.iv.usecs + sign * y->u.iv.usecs;
        return 0;
    }
    case FN_IV_NEG:
        out->u.iv.months = -x->u.iv.months;
        out->u.iv.days = -x->u.iv.days;
        out->u.iv.usecs = -x->u.iv.usecs;
        return 0;
    case FN_IV_MUL_F: {
        double m = x->u.iv.months * y->u.f, d = x->u.iv.days * y->u.f;
        out->u.iv.months = (int32_t)trunc(m);
        double dd = d + (m - trunc(m)) * 30;
        out->u.iv.days = (int32_t)trunc(dd);
        out->u.iv.usecs = (int64_t)llround(x->u.iv.usecs * y->u.f + (dd - trunc(dd)) * (double)USECS_PER_DAY);
        return 0;
    }
    case FN_DATE_ADD_I: out->u.i = x->u.i + y->u.i; return 0;
    case FN_DATE_SUB_I: out->u.i = x->u.i - y->u.i; return 0;
    case FN_DATE_SUB_DATE: out->u.i = x->u.i - y->u.i; return 0;
    case FN_EQ: case FN_NE: case FN_LT: case FN_LE: case FN_GT: case FN_GE:
        out->u.i = cmp_result(fn, value_cmp(x, y));
        return 0;
    case FN_AND: {
        int t = 1;
        for (int i = 0; i < n; i++) {
            int v = truth(&args[i]);
            if (v == 0) {
                t = 0;
                break;
            }
            if (v < 0)
                t = -1;
        }
        *out = tri(t);
        return 0;
    }
    case FN_OR: {
        int t = 0;
        for (int i = 0; i < n; i++) {
            int v = truth(&args[i]);
            if (v == 1) {
                t = 1;
                break;
            }
            if (v < 0)
                t = -1;
        }
        *out = tri(t);
        return 0;
    }
    case FN_NOT: out->u.i = !x->u.i; return 0;
    case FN_IS_NULL: *out = value_bool(x->null); return 0;
    case FN_IS_NOT_NULL: *out = value_bool(!x->null); return 0;
    case FN_IS_TRUE: *out = value_bool(truth(x) == 1); return 0;
    case FN_IS_NOT_TRUE: *out = value_bool(truth(x) != 1); return 0;
    case FN_IS_FALSE: *out = value_bool(truth(x) == 0); return 0;
    case FN_IS_NOT_FALSE: *out = value_bool(truth(x) != 0); return 0;
    case FN_IS_DISTINCT:
    case FN_IS_NOT_DISTINCT: {
        bool distinct = (x->null != y->null) || (!x->null && value_cmp(x, y) != 0);
        *out = value_bool(fn == FN_IS_DISTINCT ? distinct : !distinct);
        return 0;
    }
    case FN_CONCAT: {
        char *p = arena_alloc(a, (size_t)x->u.s.len + y->u.s.len + 1);
        memcpy(p, x->u.s.p, x->u.s.len);
        memcpy(p + x->u.s.len, y->u.s.p, y->u.s.len);
        p[x->u.s.len + y->u.s.len] = 0;
        out->u.s.p = p;
        out->u.s.len = x->u.s.len + y->u.s.len;
        return 0;
    }
    case FN_LOWER:
    case FN_UPPER: {
        char *p = arena_alloc(a, x->u.s.len + 1);
        for (uint32_t i = 0; i < x->u.s.len; i++)
            p[i] = (char)(fn == FN_LOWER ? tolower((unsigned char)x->u.s.p[i]) : toupper((unsigned char)x->u.s.p[i]));
        p[x->u.s.len] = 0;
        out->u.s.p = p;
        out->u.s.len = x->u.s.len;
        return 0;
    }
    case FN_LENGTH: {
        /* Characters, not bytes: count UTF-8 lead bytes. */
        int64_t c = 0;
        for (uint32_t i = 0; i < x->u.s.len; i++)
            c += ((unsigned char)x->u.s.p[i] & 0xC0) != 0x80;
        out->u.i = c;
        return 0;
    }
    case FN_LIKE:
    case FN_ILIKE:
        out->u.i = like_match(x->u.s.p, x->u.s.len, y->u.s.p, y->u.s.len, fn == FN_ILIKE);
        return 0;
    case FN_CAST: return scalar_cast(x, result, a, out, err);
    case FN_CASE:
        for (int i = 0; i + 1 < n; i += 2)
            if (truth(&args[i]) == 1) {
                *out = args[i + 1];
                return 0;
            }
        *out = n % 2 ? args[n - 1] : value_null(result);
        return 0;
    case FN_COALESCE:
        for (int i = 0; i < n; i++)
            if (!args[i].null) {
                *out = args[i];
                return 0;
            }
        *out = value_null(result);
        return 0;
    case FN_IN: {
        if (x->null) {
            *out = value_null(TYPE_BOOL);
            return 0;
        }
        bool saw_null = false;
        for (int i = 1; i < n; i++) {
            if (args[i].null)
                saw_null = true;
            else if (value_cmp(x, &args[i]) == 0) {
                *out = value_bool(true);
                return 0;
            }
        }
        *out = saw_null ? value_null(TYPE_BOOL) : value_bool(false);
        return 0;
    }
    case FN_NONE:
    case FN__COUNT: break;
    }
    return werr(err, SQLSTATE_INTERNAL, 0, "unknown function id %d", (int)fn);
}
