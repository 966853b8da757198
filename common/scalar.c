/*
 * scalar.c: reference semantics of scalar functions (see scalar.h): casts,
 * operators, logic, conditionals and math. Text functions live in
 * scalar_text.c, date/time functions in scalar_time.c and JSONB in
 * jsonpath.c; scalar_call() dispatches to them by id range.
 */
#include "scalar_int.h"
#include "tz.h"
#include "numeric.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *FN_NAMES[FN__COUNT] = {
    [FN_NONE] = "?",
    [FN_ADD_I] = "+", [FN_SUB_I] = "-", [FN_MUL_I] = "*", [FN_DIV_I] = "/", [FN_MOD_I] = "%",
    [FN_NEG_I] = "-", [FN_ADD_F] = "+", [FN_SUB_F] = "-", [FN_MUL_F] = "*", [FN_DIV_F] = "/",
    [FN_NEG_F] = "-", [FN_POW_F] = "^",
    [FN_TS_ADD_IV] = "+", [FN_TS_SUB_IV] = "-", [FN_TS_SUB_TS] = "-", [FN_IV_ADD_IV] = "+",
    [FN_IV_SUB_IV] = "-", [FN_IV_NEG] = "-", [FN_IV_MUL_F] = "*", [FN_IV_DIV_F] = "/", [FN_DATE_ADD_I] = "+",
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
    [FN_NULLIF] = "nullif", [FN_GREATEST] = "greatest", [FN_LEAST] = "least",
    [FN_MOD_F] = "mod", [FN_ROUND_F] = "round", [FN_ROUND_N_F] = "round", [FN_TRUNC_F] = "trunc",
    [FN_TRUNC_N_F] = "trunc", [FN_FLOOR_F] = "floor", [FN_CEIL_F] = "ceil", [FN_SQRT_F] = "sqrt",
    [FN_CBRT_F] = "cbrt", [FN_EXP_F] = "exp", [FN_LN_F] = "ln", [FN_LOG10_F] = "log", [FN_LOG_F] = "log",
    [FN_SIGN_F] = "sign", [FN_PI] = "pi",
    [FN_SUBSTR] = "substr", [FN_BTRIM] = "btrim", [FN_LTRIM] = "ltrim", [FN_RTRIM] = "rtrim",
    [FN_REPLACE] = "replace", [FN_SPLIT_PART] = "split_part", [FN_STRPOS] = "strpos", [FN_LEFT] = "left",
    [FN_RIGHT] = "right", [FN_LPAD] = "lpad", [FN_RPAD] = "rpad", [FN_REPEAT] = "repeat",
    [FN_REVERSE] = "reverse", [FN_STARTS_WITH] = "starts_with", [FN_OCTET_LENGTH] = "octet_length",
    [FN_INITCAP] = "initcap", [FN_MD5] = "md5", [FN_ASCII] = "ascii", [FN_CHR] = "chr",
    [FN_CONCAT_ARGS] = "concat", [FN_CONCAT_WS] = "concat_ws",
    [FN_DATE_TRUNC] = "date_trunc", [FN_EXTRACT_TS] = "date_part", [FN_EXTRACT_DATE] = "date_part",
    [FN_EXTRACT_IV] = "date_part", [FN_TO_TIMESTAMP] = "to_timestamp", [FN_MAKE_INTERVAL] = "make_interval",
    [FN_MAKE_DATE] = "make_date", [FN_MAKE_TIMESTAMP] = "make_timestamp", [FN_TO_CHAR] = "to_char",
    [FN_DATE_FORMAT] = "date_format", [FN_AT_TIME_ZONE] = "timezone", [FN_PROCTIME] = "proctime", [FN_NOW] = "now",
    [FN_JSON_GET_KEY] = "->", [FN_JSON_GET_IDX] = "->", [FN_JSON_GET_KEY_TEXT] = "->>",
    [FN_JSON_GET_IDX_TEXT] = "->>", [FN_JSON_PATH] = "jsonb_extract_path",
    [FN_JSON_PATH_TEXT] = "jsonb_extract_path_text", [FN_JSON_TYPEOF] = "jsonb_typeof",
    [FN_JSON_ARRAY_LENGTH] = "jsonb_array_length",
    [FN_ADD_N] = "+", [FN_SUB_N] = "-", [FN_MUL_N] = "*", [FN_DIV_N] = "/", [FN_MOD_N] = "%",
    [FN_NEG_N] = "-", [FN_ABS_N] = "abs", [FN_ROUND_N] = "round", [FN_ROUND_NN] = "round",
    [FN_TRUNC_N] = "trunc", [FN_TRUNC_NN] = "trunc", [FN_FLOOR_N] = "floor", [FN_CEIL_N] = "ceil",
    [FN_SIGN_N] = "sign", [FN_NUM_TYPMOD] = "numeric",
    [FN_RE_MATCH] = "~", [FN_RE_IMATCH] = "~*", [FN_RE_NMATCH] = "!~", [FN_RE_NIMATCH] = "!~*",
    [FN_REGEXP_REPLACE] = "regexp_replace", [FN_REGEXP_LIKE] = "regexp_like", [FN_REGEXP_COUNT] = "regexp_count",
    [FN_REGEXP_SUBSTR] = "regexp_substr", [FN_REGEXP_EXTRACT] = "regexp_extract", [FN_TRY_CAST] = "TRY_CAST",
};

const char *scalar_fn_name(ScalarFn fn) { return (unsigned)fn < FN__COUNT && FN_NAMES[fn] ? FN_NAMES[fn] : "?"; }

bool scalar_fn_is_infix(ScalarFn fn)
{
    switch (fn) {
    case FN_ADD_I: case FN_SUB_I: case FN_MUL_I: case FN_DIV_I: case FN_MOD_I:
    case FN_ADD_N: case FN_SUB_N: case FN_MUL_N: case FN_DIV_N: case FN_MOD_N:
    case FN_ADD_F: case FN_SUB_F: case FN_MUL_F: case FN_DIV_F: case FN_POW_F:
    case FN_TS_ADD_IV: case FN_TS_SUB_IV: case FN_TS_SUB_TS: case FN_IV_ADD_IV: case FN_IV_SUB_IV:
    case FN_IV_MUL_F: case FN_IV_DIV_F: case FN_DATE_ADD_I: case FN_DATE_SUB_I: case FN_DATE_SUB_DATE:
    case FN_EQ: case FN_NE: case FN_LT: case FN_LE: case FN_GT: case FN_GE:
    case FN_AND: case FN_OR: case FN_CONCAT: case FN_LIKE: case FN_ILIKE:
    case FN_RE_MATCH: case FN_RE_IMATCH: case FN_RE_NMATCH: case FN_RE_NIMATCH:
    case FN_IS_DISTINCT: case FN_IS_NOT_DISTINCT:
    case FN_JSON_GET_KEY: case FN_JSON_GET_IDX: case FN_JSON_GET_KEY_TEXT: case FN_JSON_GET_IDX_TEXT:
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

/* The bytes of the character at s[i] (UTF-8: the lead byte and the
 * continuation bytes after it), at least 1. */
static size_t char_len(const char *s, size_t n, size_t i)
{
    size_t k = 1;
    while (i + k < n && ((unsigned char)s[i + k] & 0xC0) == 0x80)
        k++;
    return k;
}

/* LIKE by characters, as Postgres: `_` is one character however many bytes
 * it takes, and `%` restarts only at character boundaries. */
bool like_match(const char *s, size_t n, const char *p, size_t m, bool icase, int esc)
{
    size_t i = 0, j = 0, star_j = (size_t)-1, star_i = 0;
    while (i < n) {
        if (j < m && esc >= 0 && (unsigned char)p[j] == esc && j + 1 < m) {
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
        } else if (j < m && p[j] == '_') {
            i += char_len(s, n, i);
            j++;
            continue;
        } else if (j < m && (icase ? tolower((unsigned char)p[j]) == tolower((unsigned char)s[i]) : p[j] == s[i])) {
            i++;
            j++;
            continue;
        }
        if (star_j == (size_t)-1)
            return false;
        j = star_j + 1;
        star_i += char_len(s, n, star_i);
        i = star_i;
    }
    while (j < m && p[j] == '%')
        j++;
    return j == m;
}

/* f rounded to real, with Postgres's dtof checks: 22003 when a finite f
 * overflows to infinity or a non-zero f underflows to zero. */
static int to_float4(double f, double *out, WError *err)
{
    float r = (float)f;
    if (isinf(r) && !isinf(f))
        return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "value out of range: overflow");
    if (r == 0 && f != 0)
        return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "value out of range: underflow");
    *out = r;
    return 0;
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
    if (t == TYPE_TEXT && f == TYPE_BOOL) {
        /* The cast spells it out, as Postgres's booltext; the output
         * function (value_to_text, the wire, concat()) says t/f. */
        const char *w = v->u.i ? "true" : "false";
        out->u.s.p = arena_strndup(a, w, strlen(w));
        out->u.s.len = (uint32_t)strlen(w);
        return 0;
    }
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
    if (t == TYPE_NUMERIC) {
        Numeric n;
        if (type_is_integer(f))
            n = num_from_int(v->u.i);
        else if (f == TYPE_FLOAT4 || f == TYPE_FLOAT8) {
            if (num_from_double(v->u.f, f == TYPE_FLOAT4, &n, err))
                return -1;
        } else
            goto bad;
        num_put(n, out);
        return 0;
    }
    if (f == TYPE_NUMERIC) {
        if (type_is_integer(t)) {
            int64_t lo = t == TYPE_INT2 ? INT16_MIN : t == TYPE_INT4 ? INT32_MIN : INT64_MIN;
            int64_t hi = t == TYPE_INT2 ? INT16_MAX : t == TYPE_INT4 ? INT32_MAX : INT64_MAX;
            return num_to_int(num_get(v), lo, hi, t, &out->u.i, err);
        }
        if (t == TYPE_FLOAT4 || t == TYPE_FLOAT8) {
            out->u.f = num_to_double(num_get(v));
            return t == TYPE_FLOAT4 ? to_float4(out->u.f, &out->u.f, err) : 0;
        }
        goto bad;
    }
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
        return t == TYPE_FLOAT4 ? to_float4(out->u.f, &out->u.f, err) : 0;
    }
    if (t == TYPE_BOOL && type_is_integer(f)) {
        out->u.i = v->u.i != 0;
        return 0;
    }
    /* Between local times (timestamp, date) and instants (timestamptz): the
     * wall clock of the thread's zone (tz.h), as Postgres's session TimeZone. */
    bool inf = v->u.i == TS_PLUS_INF || v->u.i == TS_MINUS_INF;
    if (t == TYPE_TIMESTAMP || t == TYPE_TIMESTAMPTZ) {
        if (f == TYPE_DATE) {
            if (v->u.i == DATE_PLUS_INF || v->u.i == DATE_MINUS_INF) {
                out->u.i = v->u.i == DATE_PLUS_INF ? TS_PLUS_INF : TS_MINUS_INF;
                return 0;
            }
            if (__builtin_mul_overflow(v->u.i, USECS_PER_DAY, &out->u.i) || out->u.i == TS_PLUS_INF ||
                out->u.i == TS_MINUS_INF)
                return werr(err, SQLSTATE_DATETIME_OVERFLOW, 0, "date out of range for timestamp");
            if (t == TYPE_TIMESTAMPTZ)
                out->u.i = tz_local_to_utc(tz_current(), out->u.i);
            return 0;
        }
        if (f == TYPE_TIMESTAMP || f == TYPE_TIMESTAMPTZ) {
            out->u.i = v->u.i;
            if (f != t && !inf)
                out->u.i = t == TYPE_TIMESTAMP ? tz_utc_to_local(tz_current(), v->u.i)
                                               : tz_local_to_utc(tz_current(), v->u.i);
            return 0;
        }
    }
    if (t == TYPE_DATE && (f == TYPE_TIMESTAMP || f == TYPE_TIMESTAMPTZ)) {
        if (inf) {
            out->u.i = v->u.i == TS_PLUS_INF ? DATE_PLUS_INF : DATE_MINUS_INF;
            return 0;
        }
        int64_t local = f == TYPE_TIMESTAMPTZ && !inf ? tz_utc_to_local(tz_current(), v->u.i) : v->u.i;
        int64_t d = local / USECS_PER_DAY;
        if (local % USECS_PER_DAY < 0)
            d--;
        out->u.i = d;
        return 0;
    }
bad:
    return werr(err, SQLSTATE_DATATYPE_MISMATCH, 0, "cannot cast type %s to %s", type_name(f), type_name(t));
}

/*
 * Rounds (or truncates) x to d decimal places the way Postgres's numeric
 * does, half away from zero, working on the shortest decimal that reads
 * back as x: so round(1.005, 2) is 1.01 even though the double nearest
 * 1.005 lies just below it. weir's decimal literals are doubles standing
 * in for numeric, and this keeps their rounding what Postgres users see.
 */
static double round_decimal(double x, int64_t d, bool truncate)
{
    if (!isfinite(x) || x == 0 || d > 400)
        return x;
    char buf[48], digits[24];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    bool neg = buf[0] == '-';
    const char *s = buf + neg;
    int nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s != '.')
            digits[nd++] = *s;
    int64_t e10 = strtol(s + 1, NULL, 10) + 1;   /* x = 0.DIGITS * 10^e10 */
    int64_t keep = e10 + d;
    if (keep >= nd)
        return x;
    if (keep < 0)
        return 0;
    bool up = !truncate && digits[keep] >= '5';
    int k = (int)keep;
    if (up) {
        int i = k - 1;
        while (i >= 0 && digits[i] == '9')
            digits[i--] = '0';
        if (i >= 0) {
            digits[i]++;
        } else {
            memmove(digits + 1, digits, (size_t)k);
            digits[0] = '1';
            k++;
            e10++;
        }
    }
    if (k == 0)
        return 0;
    snprintf(buf, sizeof buf, "%s0.%.*se%lld", neg ? "-" : "", k, digits, (long long)e10);
    return strtod(buf, NULL);
}

static int log_domain(double v, WError *err)
{
    if (v == 0)
        return werr(err, SQLSTATE_INVALID_ARGUMENT_FOR_LOG, 0, "cannot take logarithm of zero");
    return werr(err, SQLSTATE_INVALID_ARGUMENT_FOR_LOG, 0, "cannot take logarithm of a negative number");
}

/* Math on doubles with Postgres's domain and range errors. */
static int math_call(ScalarFn fn, TypeId result, const Value *args, Value *out, WError *err)
{
    double x = args[0].u.f, r;
    switch (fn) {
    case FN_MOD_F:
        if (args[1].u.f == 0)
            return werr(err, SQLSTATE_DIVISION_BY_ZERO, 0, "division by zero");
        r = fmod(x, args[1].u.f);
        break;
    case FN_ROUND_F: r = round(x); break;
    case FN_ROUND_N_F: r = round_decimal(x, args[1].u.i, false); break;
    case FN_TRUNC_F: r = trunc(x); break;
    case FN_TRUNC_N_F: r = round_decimal(x, args[1].u.i, true); break;
    case FN_FLOOR_F: r = floor(x); break;
    case FN_CEIL_F: r = ceil(x); break;
    case FN_SQRT_F:
        if (x < 0)
            return werr(err, SQLSTATE_INVALID_ARGUMENT_FOR_POWER, 0, "cannot take square root of a negative number");
        r = sqrt(x);
        break;
    case FN_CBRT_F: r = cbrt(x); break;
    case FN_EXP_F:
        r = exp(x);
        if (isinf(r) && isfinite(x))
            return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "value out of range: overflow");
        if (r == 0 && isfinite(x))
            return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "value out of range: underflow");
        break;
    case FN_LN_F:
    case FN_LOG10_F:
        if (x <= 0)
            return log_domain(x, err);
        r = fn == FN_LN_F ? log(x) : log10(x);
        break;
    case FN_LOG_F: {   /* log(base, x) */
        double v = args[1].u.f;
        if (x <= 0 || v <= 0)
            return log_domain(x <= 0 ? x : v, err);
        if (x == 1)
            return werr(err, SQLSTATE_DIVISION_BY_ZERO, 0, "division by zero");
        r = log(v) / log(x);
        break;
    }
    case FN_SIGN_F: r = x > 0 ? 1 : x < 0 ? -1 : 0; break;
    case FN_PI: r = M_PI; break;
    default: return werr(err, SQLSTATE_INTERNAL, 0, "unknown math function id %d", (int)fn);
    }
    out->u.f = result == TYPE_FLOAT4 ? (double)(float)r : r;
    return 0;
}

/* The NUMERIC functions: arguments are numeric but for the int4 digits of
 * round/trunc and the precision and scale of FN_NUM_TYPMOD. */
static int num_call(ScalarFn fn, const Value *args, Value *out, WError *err)
{
    Numeric x = num_get(&args[0]), y = {0, 0}, r = {0, 0};
    if (fn <= FN_MOD_N)
        y = num_get(&args[1]);
    int rc = 0;
    switch (fn) {
    case FN_ADD_N: rc = num_add(x, y, &r, err); break;
    case FN_SUB_N: rc = num_sub(x, y, &r, err); break;
    case FN_MUL_N: rc = num_mul(x, y, &r, err); break;
    case FN_DIV_N: rc = num_div(x, y, &r, err); break;
    case FN_MOD_N: rc = num_mod(x, y, &r, err); break;
    case FN_NEG_N: r = num_neg(x); break;
    case FN_ABS_N: r = num_abs(x); break;
    case FN_ROUND_N: rc = num_round(x, 0, &r, err); break;
    case FN_TRUNC_N: rc = num_trunc(x, 0, &r, err); break;
    case FN_ROUND_NN:
    case FN_TRUNC_NN: {
        /* Digits beyond what 38-digit values can hold act like the limit
         * (no digit there to round); far negative ones round everything away. */
        int64_t d = args[1].u.i;
        int s = d > NUM_MAX_DIGITS ? NUM_MAX_DIGITS : d < -NUM_MAX_DIGITS - 1 ? -NUM_MAX_DIGITS - 1 : (int)d;
        rc = fn == FN_ROUND_NN ? num_round(x, s, &r, err) : num_trunc(x, s, &r, err);
        break;
    }
    case FN_FLOOR_N: rc = num_floor(x, &r, err); break;
    case FN_CEIL_N: rc = num_ceil(x, &r, err); break;
    case FN_SIGN_N: r = num_from_int(num_sign(x)); break;
    case FN_NUM_TYPMOD: rc = num_typmod(x, (int)args[1].u.i, (int)args[2].u.i, &r, err); break;
    default: return werr(err, SQLSTATE_INTERNAL, 0, "unknown numeric function id %d", (int)fn);
    }
    if (rc)
        return -1;
    num_put(r, out);
    return 0;
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
    case FN_NULLIF: case FN_GREATEST: case FN_LEAST: case FN_CONCAT_ARGS: case FN_CONCAT_WS:
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
    case FN_POW_F:
        if (x->u.f == 0 && y->u.f < 0)
            return werr(err, SQLSTATE_INVALID_ARGUMENT_FOR_POWER, 0, "zero raised to a negative power is undefined");
        if (x->u.f < 0 && floor(y->u.f) != y->u.f)
            return werr(err, SQLSTATE_INVALID_ARGUMENT_FOR_POWER, 0, "a negative number raised to a non-integer power yields a complex result");
        out->u.f = pow(x->u.f, y->u.f);
        if (out->u.f == 0 && x->u.f != 0 && isfinite(x->u.f) && isfinite(y->u.f))
            return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "value out of range: underflow");
        goto fcheck;
    fcheck: {
        /* Postgres's check_float8_val/check_float4_val: an infinite result
         * from finite inputs overflows; a zero result underflows unless an
         * input allows it (x * 0, 0 / y; a sum may cancel to zero). A real
         * result is checked after rounding to single precision, as float4
         * arithmetic computes in it (for + - * / double rounding agrees). */
        bool inf_ok = isinf(x->u.f) || (y && isinf(y->u.f));
        bool zero_ok = fn == FN_ADD_F || fn == FN_SUB_F || fn == FN_POW_F || x->u.f == 0 ||
                       (fn == FN_MUL_F && y->u.f == 0);
        if (result == TYPE_FLOAT4)
            out->u.f = (double)(float)out->u.f;
        if (isinf(out->u.f) && !inf_ok)
            return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "value out of range: overflow");
        if (out->u.f == 0 && !zero_ok)
            return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "value out of range: underflow");
        return 0;
    }
    case FN_TS_ADD_IV:
    case FN_TS_SUB_IV: {
        int sign = fn == FN_TS_ADD_IV ? 1 : -1;
        int64_t t = x->u.i;
        /* Postgres adds the months and days of an interval to a timestamptz
         * on the wall clock of the session's zone (a day is 23 or 25 hours
         * across a change), and the time part as elapsed time. */
        const WTz *z = result == TYPE_TIMESTAMPTZ && (y->u.iv.months || y->u.iv.days) &&
                       t != TS_PLUS_INF && t != TS_MINUS_INF ? tz_current() : NULL;
        if (z)
            t = tz_utc_to_local(z, t);
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
        if (z) { /* months, then days, as Postgres */
            if (__builtin_mul_overflow((int64_t)y->u.iv.days * sign, USECS_PER_DAY, &r) ||
                __builtin_add_overflow(t, r, &t))
                return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "timestamp out of range");
            t = tz_local_to_utc(z, t);
        }
        int64_t delta;
        if (__builtin_mul_overflow((int64_t)(z ? 0 : y->u.iv.days), USECS_PER_DAY, &delta) ||
            __builtin_add_overflow(delta, y->u.iv.usecs, &delta) ||
            __builtin_add_overflow(t, sign * delta, &r))
            return werr(err, SQLSTATE_DATETIME_OVERFLOW, 0, "timestamp out of range");
        if ((r < TS_MIN_USECS || r == TS_PLUS_INF) && x->u.i != TS_PLUS_INF && x->u.i != TS_MINUS_INF)
            return werr(err, SQLSTATE_DATETIME_OVERFLOW, 0, "timestamp out of range");
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
    case FN_IV_DIV_F: {
        /* Postgres's interval_div: each field divided, the fractions of
         * months and days carried down (a month is 30 days), microsecond
         * rounding as its TSROUND. */
        double f = y->u.f;
        if (f == 0)
            return werr(err, SQLSTATE_DIVISION_BY_ZERO, 0, "division by zero");
        if (isnan(f))
            return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "interval out of range");
        double m = x->u.iv.months / f, d = x->u.iv.days / f;
        if (fabs(m) >= 2147483648.0 || fabs(d) >= 2147483648.0)
            return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "interval out of range");
        int32_t rm = (int32_t)m, rd = (int32_t)d;
        double mdays = rint((m - rm) * 30 * 1e6) / 1e6;
        double secs = rint((d - rd + mdays - (int)mdays) * 86400 * 1e6) / 1e6;
        if (fabs(secs) >= 86400) {
            rd += (int32_t)(secs / 86400);
            secs -= (int)(secs / 86400) * 86400.0;
        }
        rd += (int32_t)mdays;
        double us = rint(x->u.iv.usecs / f + secs * 1e6);
        if (!(fabs(us) < 9.2e18))
            return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "interval out of range");
        out->u.iv = (Interval){.months = rm, .days = rd, .usecs = (int64_t)us};
        return 0;
    }
    case FN_DATE_ADD_I:
    case FN_DATE_SUB_I:
        /* An infinite date stays infinite, as in Postgres. */
        if (x->u.i == DATE_PLUS_INF || x->u.i == DATE_MINUS_INF) {
            out->u.i = x->u.i;
            return 0;
        }
        if ((fn == FN_DATE_ADD_I ? __builtin_add_overflow(x->u.i, y->u.i, &out->u.i)
                                 : __builtin_sub_overflow(x->u.i, y->u.i, &out->u.i)) ||
            out->u.i < DATE_MIN_DAYS || out->u.i >= DATE_END_DAYS)
            return werr(err, SQLSTATE_DATETIME_OVERFLOW, 0, "date out of range");
        return 0;
    case FN_DATE_SUB_DATE:
        if (x->u.i == DATE_PLUS_INF || x->u.i == DATE_MINUS_INF || y->u.i == DATE_PLUS_INF || y->u.i == DATE_MINUS_INF)
            return werr(err, SQLSTATE_DATETIME_OVERFLOW, 0, "cannot subtract infinite dates");
        out->u.i = x->u.i - y->u.i;
        return 0;
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
    case FN_ILIKE: {
        /* LIKE p ESCAPE e: e is one character, or '' for none; the default is a backslash. */
        int esc = '\\';
        if (n == 3) {
            if (args[2].u.s.len > 1)
                return werr(err, SQLSTATE_INVALID_ESCAPE, 0, "invalid escape string"),
                       werr_hint(err, "Escape string must be empty or one character."), -1;
            esc = args[2].u.s.len ? (unsigned char)args[2].u.s.p[0] : -1;
        }
        out->u.i = like_match(x->u.s.p, x->u.s.len, y->u.s.p, y->u.s.len, fn == FN_ILIKE, esc);
        return 0;
    }
    case FN_CAST: return scalar_cast(x, result, a, out, err);
    case FN_TRY_CAST: {
        /* Only a data exception (class 22: bad input, out of range) becomes
         * NULL; anything else (an internal error, out of memory) still fails. */
        WError tmp = {0};
        if (scalar_cast(x, result, a, out, &tmp) == 0)
            return 0;
        if (strncmp(tmp.sqlstate, "22", 2) == 0) {
            *out = value_null(result);
            return 0;
        }
        *err = tmp;
        return -1;
    }
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
    case FN_NULLIF:
        if (!x->null && !y->null && value_cmp(x, y) == 0)
            *out = value_null(result);
        else
            *out = *x;
        return 0;
    case FN_GREATEST:
    case FN_LEAST: {
        const Value *best = NULL;
        for (int i = 0; i < n; i++)
            if (!args[i].null &&
                (!best || (fn == FN_GREATEST ? value_cmp(&args[i], best) > 0 : value_cmp(&args[i], best) < 0)))
                best = &args[i];
        *out = best ? *best : value_null(result);
        return 0;
    }
    case FN_NONE:
    case FN__COUNT: break;
    default:
        if (fn >= FN_ADD_N && fn <= FN_NUM_TYPMOD)
            return num_call(fn, args, out, err);
        if (fn >= FN_MOD_F && fn <= FN_PI)
            return math_call(fn, result, args, out, err);
        if (fn >= FN_SUBSTR && fn <= FN_CONCAT_WS)
            return scalar_text_call(fn, result, n, args, a, out, err);
        if (fn >= FN_DATE_TRUNC && fn <= FN_NOW)
            return scalar_time_call(fn, result, n, args, a, out, err);
        if (fn >= FN_RE_MATCH && fn <= FN_REGEXP_EXTRACT)
            return scalar_regex_call(fn, result, n, args, a, out, err);
        if (fn >= FN_JSON_GET_KEY && fn <= FN_JSON_ARRAY_LENGTH)
            return scalar_json_call(fn, result, n, args, a, out, err);
        break;
    }
    return werr(err, SQLSTATE_INTERNAL, 0, "unknown function id %d", (int)fn);
}
