/*
 * test_scalar.c: edge cases of scalar_call(), the reference semantics of
 * every function: overflow and domain errors, NULL handling, UTF-8 in the
 * text functions, date_trunc/extract across boundaries and before 1970,
 * intervals with negative parts, JSON navigation with escapes and nesting.
 */
#include "scalar.h"
#include "tap.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

static Arena *A;

static Value T(const char *s) { return value_str(TYPE_TEXT, s, strlen(s)); }
static Value J(const char *s) { return value_str(TYPE_JSONB, s, strlen(s)); }
static Value I(int64_t v) { return value_int(TYPE_INT4, v); }
static Value F(double v) { return value_float(TYPE_FLOAT8, v); }
static Value N(TypeId t) { return value_null(t); }

static Value parse(TypeId t, const char *s)
{
    Value v;
    WError e = {0};
    if (value_from_text(t, s, strlen(s), A, &v, &e))
        diag("bad test input %s", s);
    return v;
}
static Value TS(const char *s) { return parse(TYPE_TIMESTAMP, s); }
static Value IV(const char *s) { return parse(TYPE_INTERVAL, s); }
static Value D(const char *s) { return parse(TYPE_DATE, s); }

/* fn(args) as text: the value's text form, "NULL", or "ERR <sqlstate>". */
static const char *call(ScalarFn fn, TypeId result, int n, const Value *args)
{
    static char out[512];
    Value r;
    WError e = {0};
    if (scalar_call(fn, result, n, args, A, &r, &e)) {
        snprintf(out, sizeof out, "ERR %s", e.sqlstate);
        return out;
    }
    if (r.null)
        return "NULL";
    r.type = result;
    Buf b = BUF_INIT;
    value_to_text(&r, &b);
    snprintf(out, sizeof out, "%.*s", (int)b.len, b.data ? b.data : "");
    buf_free(&b);
    return out;
}

#define C1(fn, rt, a) call(fn, rt, 1, (Value[]){a})
#define C2(fn, rt, a, b) call(fn, rt, 2, (Value[]){a, b})
#define C3(fn, rt, a, b, c) call(fn, rt, 3, (Value[]){a, b, c})

static void test_math(void)
{
    is_str(C1(FN_ROUND_F, TYPE_FLOAT8, F(2.5)), "3", "round half away from zero");
    is_str(C1(FN_ROUND_F, TYPE_FLOAT8, F(-2.5)), "-3", "round negative half");
    is_str(C2(FN_ROUND_N_F, TYPE_FLOAT8, F(1.005), I(2)), "1.01", "round(1.005, 2) as numeric would");
    is_str(C2(FN_ROUND_N_F, TYPE_FLOAT8, F(9.995), I(2)), "10", "round carries into a new digit");
    is_str(C2(FN_ROUND_N_F, TYPE_FLOAT8, F(1234.5), I(-2)), "1200", "round to hundreds");
    is_str(C2(FN_ROUND_N_F, TYPE_FLOAT8, F(0.0004), I(2)), "0", "round to zero");
    is_str(C2(FN_ROUND_N_F, TYPE_FLOAT8, F(-0.5), I(0)), "-1", "round(-0.5, 0)");
    is_str(C2(FN_TRUNC_N_F, TYPE_FLOAT8, F(-1.999), I(2)), "-1.99", "trunc(x, 2)");
    is_str(C1(FN_FLOOR_F, TYPE_FLOAT8, F(-1.5)), "-2", "floor");
    is_str(C1(FN_CEIL_F, TYPE_FLOAT8, F(-1.5)), "-1", "ceil");
    is_str(C2(FN_MOD_F, TYPE_FLOAT8, F(-7.5), F(2)), "-1.5", "mod keeps the dividend's sign");
    is_str(C2(FN_MOD_F, TYPE_FLOAT8, F(1), F(0)), "ERR 22012", "mod by zero");
    is_str(C2(FN_MOD_I, TYPE_INT8, value_int(TYPE_INT8, INT64_MIN), value_int(TYPE_INT8, -1)), "0", "INT64_MIN % -1");
    is_str(C2(FN_DIV_I, TYPE_INT8, value_int(TYPE_INT8, INT64_MIN), value_int(TYPE_INT8, -1)), "ERR 22003",
           "INT64_MIN / -1 overflows");
    is_str(C1(FN_SQRT_F, TYPE_FLOAT8, F(-1)), "ERR 2201F", "sqrt of a negative");
    is_str(C1(FN_LN_F, TYPE_FLOAT8, F(0)), "ERR 2201E", "ln(0)");
    is_str(C1(FN_LOG10_F, TYPE_FLOAT8, F(-1)), "ERR 2201E", "log(-1)");
    is_str(C2(FN_LOG_F, TYPE_FLOAT8, F(1), F(5)), "ERR 22012", "log base 1");
    is_str(C2(FN_LOG_F, TYPE_FLOAT8, F(2), F(8)), "3", "log(2, 8)");
    is_str(C1(FN_EXP_F, TYPE_FLOAT8, F(1000)), "ERR 22003", "exp overflow");
    is_str(C1(FN_EXP_F, TYPE_FLOAT8, F(-1000)), "ERR 22003", "exp underflow");
    is_str(C2(FN_POW_F, TYPE_FLOAT8, F(0), F(-1)), "ERR 2201F", "0 ^ -1");
    is_str(C2(FN_POW_F, TYPE_FLOAT8, F(-8), F(1.0 / 3)), "ERR 2201F", "negative ^ fraction");
    is_str(C2(FN_POW_F, TYPE_FLOAT8, F(-2), F(3)), "-8", "negative ^ integer");
    is_str(C2(FN_POW_F, TYPE_FLOAT8, F(10), F(400)), "ERR 22003", "pow overflow");
    is_str(C1(FN_SIGN_F, TYPE_FLOAT8, F(-0.0)), "0", "sign(-0)");
    is_str(C1(FN_ABS_I, TYPE_INT4, I(INT32_MIN)), "ERR 22003", "abs(int4 min) overflows");
    is_str(C1(FN_SQRT_F, TYPE_FLOAT8, N(TYPE_FLOAT8)), "NULL", "strict: NULL in, NULL out");
}

static void test_conditional(void)
{
    is_str(C2(FN_NULLIF, TYPE_INT4, I(1), I(1)), "NULL", "nullif equal");
    is_str(C2(FN_NULLIF, TYPE_INT4, I(1), I(2)), "1", "nullif different");
    is_str(C2(FN_NULLIF, TYPE_INT4, I(1), N(TYPE_INT4)), "1", "nullif(x, NULL) is x");
    is_str(C2(FN_NULLIF, TYPE_INT4, N(TYPE_INT4), I(1)), "NULL", "nullif(NULL, x)");
    is_str(C3(FN_GREATEST, TYPE_INT4, N(TYPE_INT4), I(3), I(2)), "3", "greatest skips NULL");
    is_str(C3(FN_LEAST, TYPE_TEXT, T("b"), N(TYPE_TEXT), T("a")), "a", "least of text");
    is_str(C2(FN_GREATEST, TYPE_INT4, N(TYPE_INT4), N(TYPE_INT4)), "NULL", "greatest of NULLs");
}

static void test_text(void)
{
    is_str(C3(FN_SUBSTR, TYPE_TEXT, T("héllo"), I(2), I(3)), "éll", "substr counts characters");
    is_str(C3(FN_SUBSTR, TYPE_TEXT, T("abc"), I(0), I(2)), "a", "substr from 0");
    is_str(C3(FN_SUBSTR, TYPE_TEXT, T("abc"), I(-5), I(3)), "", "substr before the start");
    is_str(C2(FN_SUBSTR, TYPE_TEXT, T("abc"), I(4)), "", "substr past the end");
    is_str(C3(FN_SUBSTR, TYPE_TEXT, T("abc"), I(2), I(-1)), "ERR 22011", "negative substring length");
    is_str(C3(FN_SUBSTR, TYPE_TEXT, T("abc"), I(2), I(INT32_MAX)), "bc", "substr length overflow-safe");
    is_str(C1(FN_LENGTH, TYPE_INT4, T("日本語")), "3", "length of CJK");
    is_str(C1(FN_OCTET_LENGTH, TYPE_INT4, T("日本語")), "9", "octet_length");
    is_str(C2(FN_LEFT, TYPE_TEXT, T("日本語"), I(2)), "日本", "left");
    is_str(C2(FN_LEFT, TYPE_TEXT, T("日本語"), I(-1)), "日本", "left negative");
    is_str(C2(FN_LEFT, TYPE_TEXT, T("ab"), I(-5)), "", "left all removed");
    is_str(C2(FN_RIGHT, TYPE_TEXT, T("日本語"), I(1)), "語", "right");
    is_str(C2(FN_RIGHT, TYPE_TEXT, T("日本語"), I(-1)), "本語", "right negative");
    is_str(C3(FN_LPAD, TYPE_TEXT, T("é"), I(4), T("ñx")), "ñxñé", "lpad with a multibyte fill");
    is_str(C3(FN_RPAD, TYPE_TEXT, T("日本語"), I(2), T("x")), "日本", "rpad truncates");
    is_str(C3(FN_LPAD, TYPE_TEXT, T("ab"), I(5), T("")), "ab", "lpad with an empty fill");
    is_str(C2(FN_LPAD, TYPE_TEXT, T("ab"), I(-1)), "", "lpad to a negative length");
    is_str(C2(FN_LPAD, TYPE_TEXT, T("ab"), I(INT32_MAX)), "ERR 54000", "lpad too large");
    is_str(C2(FN_REPEAT, TYPE_TEXT, T("ab"), I(3)), "ababab", "repeat");
    is_str(C2(FN_REPEAT, TYPE_TEXT, T("ab"), I(-3)), "", "repeat negative");
    is_str(C2(FN_REPEAT, TYPE_TEXT, T("abcdefgh"), I(INT32_MAX)), "ERR 54000", "repeat too large");
    is_str(C1(FN_REVERSE, TYPE_TEXT, T("añb")), "bña", "reverse keeps characters whole");
    is_str(C1(FN_INITCAP, TYPE_TEXT, T("hi THERE o'neil")), "Hi There O'Neil", "initcap");
    is_str(C3(FN_SPLIT_PART, TYPE_TEXT, T("a::b::c"), T("::"), I(2)), "b", "split_part");
    is_str(C3(FN_SPLIT_PART, TYPE_TEXT, T("a::b::c"), T("::"), I(-1)), "c", "split_part from the end");
    is_str(C3(FN_SPLIT_PART, TYPE_TEXT, T("a::b::c"), T("::"), I(4)), "", "split_part past the end");
    is_str(C3(FN_SPLIT_PART, TYPE_TEXT, T("abc"), T(""), I(1)), "abc", "split_part on empty delimiter");
    is_str(C3(FN_SPLIT_PART, TYPE_TEXT, T("abc"), T(","), I(0)), "ERR 22023", "split_part position 0");
    is_str(C2(FN_STRPOS, TYPE_INT4, T("日本語"), T("語")), "3", "strpos in characters");
    is_str(C2(FN_STRPOS, TYPE_INT4, T("abc"), T("")), "1", "strpos of empty");
    is_str(C2(FN_STRPOS, TYPE_INT4, T("abc"), T("d")), "0", "strpos not found");
    is_str(C3(FN_REPLACE, TYPE_TEXT, T("aXbXc"), T("X"), T("日")), "a日b日c", "replace");
    is_str(C3(FN_REPLACE, TYPE_TEXT, T("abc"), T(""), T("x")), "abc", "replace empty pattern");
    is_str(C2(FN_BTRIM, TYPE_TEXT, T("ééaéé"), T("é")), "a", "btrim multibyte set");
    is_str(C2(FN_LTRIM, TYPE_TEXT, T("xyxa"), T("xy")), "a", "ltrim");
    is_str(C1(FN_RTRIM, TYPE_TEXT, T("a  ")), "a", "rtrim spaces");
    is_str(C1(FN_BTRIM, TYPE_TEXT, T("   ")), "", "btrim all");
    is_str(C2(FN_STARTS_WITH, TYPE_BOOL, T("abc"), T("abcd")), "f", "starts_with longer prefix");
    is_str(C1(FN_MD5, TYPE_TEXT, T("The quick brown fox jumps over the lazy dog")),
           "9e107d9d372bb6826bd81d3542a419d6", "md5");
    is_str(C1(FN_MD5, TYPE_TEXT,
              T("12345678901234567890123456789012345678901234567890123456789012345678901234567890")),
           "57edf4a22be3c955ac49da2e2107b67a", "md5 over two blocks");
    is_str(C1(FN_ASCII, TYPE_INT4, T("€")), "8364", "ascii of a multibyte character");
    is_str(C1(FN_CHR, TYPE_TEXT, I(8364)), "€", "chr");
    is_str(C1(FN_CHR, TYPE_TEXT, I(0)), "ERR 54000", "chr(0)");
    is_str(C1(FN_CHR, TYPE_TEXT, I(0xD800)), "ERR 54000", "chr of a surrogate");
    is_str(C3(FN_CONCAT_ARGS, TYPE_TEXT, T("a"), N(TYPE_TEXT), T("b")), "ab", "concat skips NULL");
    is_str(C3(FN_CONCAT_WS, TYPE_TEXT, T("-"), N(TYPE_TEXT), T("b")), "b", "concat_ws skips NULL");
    is_str(C3(FN_CONCAT_WS, TYPE_TEXT, N(TYPE_TEXT), T("a"), T("b")), "NULL", "concat_ws NULL separator");
}

static void test_time(void)
{
    is_str(C2(FN_DATE_TRUNC, TYPE_TIMESTAMP, T("week"), TS("2024-01-01 10:00")), "2024-01-01 00:00:00",
           "week of a Monday");
    is_str(C2(FN_DATE_TRUNC, TYPE_TIMESTAMP, T("week"), TS("2023-12-31 23:59")), "2023-12-25 00:00:00",
           "week of a Sunday crosses the year");
    is_str(C2(FN_DATE_TRUNC, TYPE_TIMESTAMP, T("week"), TS("1970-01-01 00:00")), "1969-12-29 00:00:00",
           "week before the epoch");
    is_str(C2(FN_DATE_TRUNC, TYPE_TIMESTAMP, T("month"), TS("2024-03-01 00:00:00")), "2024-03-01 00:00:00",
           "month at a month start");
    is_str(C2(FN_DATE_TRUNC, TYPE_TIMESTAMP, T("month"), TS("2024-02-29 23:59:59.999999")),
           "2024-02-01 00:00:00", "month at a month end");
    is_str(C2(FN_DATE_TRUNC, TYPE_TIMESTAMP, T("year"), TS("1969-12-31 23:59:59")), "1969-01-01 00:00:00",
           "year before 1970");
    is_str(C2(FN_DATE_TRUNC, TYPE_TIMESTAMP, T("second"), TS("1969-12-31 23:59:59.5")), "1969-12-31 23:59:59",
           "second rounds down before the epoch");
    is_str(C2(FN_DATE_TRUNC, TYPE_TIMESTAMP, T("hour"), TS("1900-03-01 05:30")), "1900-03-01 05:00:00",
           "hour in 1900");
    is_str(C2(FN_DATE_TRUNC, TYPE_TIMESTAMP, T("quarter"), TS("2024-12-31 10:00")), "2024-10-01 00:00:00",
           "quarter");
    is_str(C2(FN_DATE_TRUNC, TYPE_TIMESTAMP, T("Day"), TS("2024-12-31 10:00")), "2024-12-31 00:00:00",
           "field names ignore case");
    is_str(C2(FN_DATE_TRUNC, TYPE_TIMESTAMP, T("century"), TS("2000-12-31")), "1901-01-01 00:00:00",
           "2000 is in the 20th century");
    is_str(C2(FN_DATE_TRUNC, TYPE_TIMESTAMP, T("fortnight"), TS("2000-12-31")), "ERR 22023", "unknown unit");
    is_str(C2(FN_DATE_TRUNC, TYPE_TIMESTAMP, T("dow"), TS("2000-12-31")), "ERR 0A000", "unit not for date_trunc");
    is_str(C2(FN_DATE_TRUNC, TYPE_TIMESTAMP, T("day"), parse(TYPE_TIMESTAMP, "infinity")), "infinity",
           "infinity stays");

    is_str(C2(FN_EXTRACT_TS, TYPE_FLOAT8, T("second"), TS("2024-01-01 10:11:12.345678")), "12.345678",
           "second with fraction");
    is_str(C2(FN_EXTRACT_TS, TYPE_FLOAT8, T("millisecond"), TS("2024-01-01 10:11:12.345678")), "12345.678",
           "milliseconds");
    is_str(C2(FN_EXTRACT_TS, TYPE_FLOAT8, T("microseconds"), TS("2024-01-01 10:11:12.345678")), "12345678",
           "microseconds");
    is_str(C2(FN_EXTRACT_TS, TYPE_FLOAT8, T("epoch"), TS("1969-12-31 23:59:58.5")), "-1.5", "epoch before 1970");
    is_str(C2(FN_EXTRACT_TS, TYPE_FLOAT8, T("hour"), TS("1969-12-31 23:59:58.5")), "23", "hour before 1970");
    is_str(C2(FN_EXTRACT_TS, TYPE_FLOAT8, T("dow"), TS("1969-12-28 12:00")), "0", "dow of a Sunday");
    is_str(C2(FN_EXTRACT_TS, TYPE_FLOAT8, T("isodow"), TS("1969-12-28 12:00")), "7", "isodow of a Sunday");
    is_str(C2(FN_EXTRACT_TS, TYPE_FLOAT8, T("week"), TS("2021-01-03")), "53", "ISO week belongs to 2020");
    is_str(C2(FN_EXTRACT_TS, TYPE_FLOAT8, T("isoyear"), TS("2021-01-03")), "2020", "isoyear");
    is_str(C2(FN_EXTRACT_TS, TYPE_FLOAT8, T("week"), TS("2024-12-30")), "1", "ISO week 1 of 2025");
    is_str(C2(FN_EXTRACT_TS, TYPE_FLOAT8, T("doy"), TS("2024-12-31")), "366", "doy in a leap year");
    is_str(C2(FN_EXTRACT_TS, TYPE_FLOAT8, T("quarter"), TS("2024-07-01")), "3", "quarter");
    is_str(C2(FN_EXTRACT_TS, TYPE_FLOAT8, T("century"), TS("2001-01-01")), "21", "century");
    is_str(C2(FN_EXTRACT_TS, TYPE_FLOAT8, T("epoch"), parse(TYPE_TIMESTAMP, "-infinity")), "-Infinity",
           "epoch of -infinity");
    is_str(C2(FN_EXTRACT_TS, TYPE_FLOAT8, T("hour"), parse(TYPE_TIMESTAMP, "infinity")), "NULL",
           "hour of infinity");
    is_str(C2(FN_EXTRACT_DATE, TYPE_FLOAT8, T("epoch"), D("1969-12-31")), "-86400", "epoch of a date");
    is_str(C2(FN_EXTRACT_DATE, TYPE_FLOAT8, T("year"), D("0001-01-01")), "1", "year 1");
    is_str(C2(FN_EXTRACT_DATE, TYPE_FLOAT8, T("hour"), D("2024-01-01")), "ERR 0A000", "hour of a date");

    is_str(C2(FN_EXTRACT_IV, TYPE_FLOAT8, T("hour"), IV("-1 day -02:03:04.5")), "-2", "negative interval hour");
    is_str(C2(FN_EXTRACT_IV, TYPE_FLOAT8, T("minute"), IV("-1 day -02:03:04.5")), "-3", "negative minute");
    is_str(C2(FN_EXTRACT_IV, TYPE_FLOAT8, T("second"), IV("-1 day -02:03:04.5")), "-4.5", "negative second");
    is_str(C2(FN_EXTRACT_IV, TYPE_FLOAT8, T("day"), IV("-1 day -02:03:04.5")), "-1", "negative day");
    is_str(C2(FN_EXTRACT_IV, TYPE_FLOAT8, T("epoch"), IV("-1 day -02:00:00")), "-93600", "negative epoch");
    is_str(C2(FN_EXTRACT_IV, TYPE_FLOAT8, T("month"), IV("-14 months")), "-2", "negative months");
    is_str(C2(FN_EXTRACT_IV, TYPE_FLOAT8, T("year"), IV("-14 months")), "-1", "negative years");
    is_str(C2(FN_EXTRACT_IV, TYPE_FLOAT8, T("epoch"), IV("1 year 1 month")), "34149600", "epoch of months");
    is_str(C2(FN_EXTRACT_IV, TYPE_FLOAT8, T("dow"), IV("1 day")), "ERR 0A000", "dow of an interval");

    is_str(C1(FN_TO_TIMESTAMP, TYPE_TIMESTAMPTZ, F(-1.5)), "1969-12-31 23:59:58.5+00", "to_timestamp negative");
    is_str(C1(FN_TO_TIMESTAMP, TYPE_TIMESTAMPTZ, F(NAN)), "ERR 22008", "to_timestamp NaN");
    is_str(C1(FN_TO_TIMESTAMP, TYPE_TIMESTAMPTZ, F(1e20)), "ERR 22008", "to_timestamp out of range");
    is_str(call(FN_MAKE_INTERVAL, TYPE_INTERVAL, 7, (Value[]){I(1), I(2), I(1), I(3), I(4), I(5), F(6.5)}),
           "1 year 2 mons 10 days 04:05:06.5", "make_interval");
    is_str(call(FN_MAKE_INTERVAL, TYPE_INTERVAL, 1, (Value[]){I(INT32_MAX)}), "ERR 22008",
           "make_interval out of range");
    is_str(C3(FN_MAKE_DATE, TYPE_DATE, I(2024), I(2), I(29)), "2024-02-29", "make_date leap day");
    is_str(C3(FN_MAKE_DATE, TYPE_DATE, I(2023), I(2), I(29)), "ERR 22008", "make_date bad day");
    is_str(C3(FN_MAKE_DATE, TYPE_DATE, I(0), I(1), I(1)), "ERR 22008", "make_date year 0");
    is_str(C3(FN_MAKE_DATE, TYPE_DATE, I(-1), I(1), I(1)), "0001-01-01 BC", "make_date BC");
    is_str(call(FN_MAKE_TIMESTAMP, TYPE_TIMESTAMP, 6, (Value[]){I(2024), I(1), I(2), I(24), I(0), F(0)}),
           "2024-01-03 00:00:00", "make_timestamp 24:00");
    is_str(call(FN_MAKE_TIMESTAMP, TYPE_TIMESTAMP, 6, (Value[]){I(2024), I(1), I(2), I(3), I(60), F(0)}),
           "ERR 22008", "make_timestamp bad minute");
    is_str(C1(FN_NOW, TYPE_TIMESTAMPTZ, parse(TYPE_TIMESTAMPTZ, "2026-01-01 00:00:00")), "2026-01-01 00:00:00+00",
           "now() returns the statement time");
}

static void test_json(void)
{
    Value doc = J(" {\"a\": {\"b\": [10, \"x\\\"y\", null, true]}, \"k\\u00e9y\": \"v\\u00e9\", \"a\": 2} ");
    is_str(C2(FN_JSON_GET_KEY, TYPE_JSONB, doc, T("a")), "2", "duplicate keys: the last wins");
    Value nested = J("{\"a\": {\"b\": [10, \"x\\\"y\", null, true, {\"c\": \"\\ud83d\\ude00\"}]}}");
    is_str(C2(FN_JSON_GET_KEY, TYPE_JSONB, nested, T("a")),
           "{\"b\": [10, \"x\\\"y\", null, true, {\"c\": \"\\ud83d\\ude00\"}]}", "object member as jsonb");
    is_str(C3(FN_JSON_PATH_TEXT, TYPE_TEXT, nested, T("a"), T("b")),
           "[10, \"x\\\"y\", null, true, {\"c\": \"\\ud83d\\ude00\"}]", "path to an array");
    is_str(call(FN_JSON_PATH_TEXT, TYPE_TEXT, 4, (Value[]){nested, T("a"), T("b"), T("1")}), "x\"y",
           "escaped quote unescaped by ->>");
    is_str(call(FN_JSON_PATH_TEXT, TYPE_TEXT, 5, (Value[]){nested, T("a"), T("b"), T("-1"), T("c")}), "😀",
           "surrogate pair decoded");
    is_str(call(FN_JSON_PATH_TEXT, TYPE_TEXT, 4, (Value[]){nested, T("a"), T("b"), T("2")}), "NULL",
           "JSON null is SQL NULL for text");
    is_str(call(FN_JSON_PATH, TYPE_JSONB, 4, (Value[]){nested, T("a"), T("b"), T("2")}), "null",
           "JSON null stays null for jsonb");
    is_str(call(FN_JSON_PATH_TEXT, TYPE_TEXT, 4, (Value[]){nested, T("a"), T("b"), T("x")}), "NULL",
           "non-integer array key");
    is_str(C2(FN_JSON_GET_KEY_TEXT, TYPE_TEXT, doc, T("k\xc3\xa9y")), "v\xc3\xa9", "escaped key matches");
    is_str(C2(FN_JSON_GET_IDX, TYPE_JSONB, J("[1, [2, 3], 4]"), I(1)), "[2, 3]", "array element");
    is_str(C2(FN_JSON_GET_IDX, TYPE_JSONB, J("[1, [2, 3], 4]"), I(-1)), "4", "negative index");
    is_str(C2(FN_JSON_GET_IDX, TYPE_JSONB, J("[1, [2, 3], 4]"), I(-4)), "NULL", "negative index too far");
    is_str(C2(FN_JSON_GET_IDX, TYPE_JSONB, J("[1]"), I(1)), "NULL", "index past the end");
    is_str(C2(FN_JSON_GET_IDX, TYPE_JSONB, J("{\"a\": 1}"), I(0)), "NULL", "index into an object");
    is_str(C2(FN_JSON_GET_KEY, TYPE_JSONB, J("[1]"), T("a")), "NULL", "key into an array");
    is_str(C2(FN_JSON_GET_KEY, TYPE_JSONB, J("\"s\""), T("a")), "NULL", "key into a scalar");
    is_str(C2(FN_JSON_GET_KEY, TYPE_JSONB, J("{\"a\": [1, 2}"), T("a")), "ERR 22P02", "malformed json");
    is_str(C2(FN_JSON_GET_KEY, TYPE_JSONB, J("{\"a\": 1"), T("a")), "ERR 22P02", "unterminated object");
    is_str(C2(FN_JSON_GET_KEY_TEXT, TYPE_TEXT, J("{\"a\": \"\\u0000\"}"), T("a")), "ERR 22P05", "\\u0000");
    is_str(C1(FN_JSON_TYPEOF, TYPE_TEXT, J(" [1] ")), "array", "typeof array");
    is_str(C1(FN_JSON_TYPEOF, TYPE_TEXT, J("-1.5e3")), "number", "typeof number");
    is_str(C1(FN_JSON_TYPEOF, TYPE_TEXT, J("false")), "boolean", "typeof boolean");
    is_str(C1(FN_JSON_ARRAY_LENGTH, TYPE_INT4, J("[]")), "0", "empty array");
    is_str(C1(FN_JSON_ARRAY_LENGTH, TYPE_INT4, J("[[1, 2], \"],\", {\"a\": [3]}]")), "3", "nested array length");
    is_str(C1(FN_JSON_ARRAY_LENGTH, TYPE_INT4, J("{}")), "ERR 22023", "length of an object");
    is_str(C1(FN_JSON_ARRAY_LENGTH, TYPE_INT4, J("3")), "ERR 22023", "length of a scalar");

    /* Deep nesting costs no stack: navigation is iterative. */
    size_t depth = 100000;
    char *deep = arena_alloc(A, 2 * depth + 16);
    size_t w = 0;
    w += (size_t)sprintf(deep, "{\"a\": ");
    for (size_t i = 0; i < depth; i++)
        deep[w++] = '[';
    for (size_t i = 0; i < depth; i++)
        deep[w++] = ']';
    w += (size_t)sprintf(deep + w, ", \"b\": 1}");
    is_str(C2(FN_JSON_GET_KEY, TYPE_JSONB, value_str(TYPE_JSONB, deep, w), T("b")), "1", "deeply nested skip");
}

static void test_casts(void)
{
    Value out;
    WError e = {0};
    ok(scalar_cast(&(Value){.type = TYPE_BOOL, .u.i = 1}, TYPE_INT4, A, &out, &e) == 0 && out.u.i == 1,
       "bool to int");
    ok(scalar_cast(&(Value){.type = TYPE_INT4, .u.i = 7}, TYPE_BOOL, A, &out, &e) == 0 && out.u.i == 1,
       "int to bool");
    is_str(C1(FN_CAST, TYPE_TEXT, IV("1 day 02:00:00")), "1 day 02:00:00", "interval to text");
    is_str(C1(FN_CAST, TYPE_TIMESTAMP, value_int(TYPE_DATE, INT64_C(5000000000000))), "ERR 22008",
           "date beyond the timestamp range");
}

/* Each thread has its own compiled-pattern cache: the same patterns from two
 * threads at once must give the same answers (and ASan/TSan-clean frees at exit). */
static void *regex_thread(void *arg)
{
    int *ok = arg;
    Arena *a = arena_new(0);
    for (int i = 0; i < 200; i++) {
        char pat[32];
        snprintf(pat, sizeof pat, "^x%d(y+)$", i % 40);   /* more patterns than the cache holds */
        char subj[32];
        snprintf(subj, sizeof subj, "x%dyy", i % 40);
        Value args[3] = {T(subj), T(pat), I(1)}, r;
        WError e = {0};
        if (scalar_call(FN_REGEXP_EXTRACT, TYPE_TEXT, 3, args, a, &r, &e) || r.null || r.u.s.len != 2)
            *ok = 0;
    }
    arena_free(a);
    return NULL;
}

static void test_regex(void)
{
    is_str(C2(FN_RE_MATCH, TYPE_BOOL, T("abc"), T("b.")), "t", "~ finds a match anywhere");
    is_str(C2(FN_RE_NIMATCH, TYPE_BOOL, T("ABC"), T("b")), "f", "!~* is caseless and negated");
    is_str(C2(FN_RE_MATCH, TYPE_BOOL, T("abc"), T("(")), "ERR 2201B", "bad pattern is 2201B");
    is_str(C2(FN_RE_MATCH, TYPE_BOOL, N(TYPE_TEXT), T("(")), "NULL", "NULL subject: NULL, pattern not compiled");
    is_str(C3(FN_REGEXP_REPLACE, TYPE_TEXT, T("a1b22"), T("([0-9])"), T("<\\1\\&>")), "a<11>b22",
           "first match only, \\1 and \\& substituted");
    is_str(call(FN_REGEXP_REPLACE, TYPE_TEXT, 4, (Value[]){T("a1b22"), T("[0-9]"), T("#"), T("g")}), "a#b##", "g flag");
    is_str(call(FN_REGEXP_REPLACE, TYPE_TEXT, 4, (Value[]){T("a"), T("a"), T("#"), T("q")}), "ERR 22023", "bad flag");
    is_str(C2(FN_REGEXP_COUNT, TYPE_INT4, T("héhé"), T("")), "5", "empty matches step by characters, not bytes");
    is_str(C3(FN_REGEXP_EXTRACT, TYPE_TEXT, T("k=v"), T("(\\w)=(\\w)"), I(-1)), "NULL", "negative group: NULL");
    /* a pathological pattern stops at the match limit instead of running for ages */
    char long_a[20002];
    memset(long_a, 'a', 20000);
    long_a[20000] = 'b';
    long_a[20001] = 0;
    is_str(C2(FN_RE_MATCH, TYPE_BOOL, T(long_a), T("(a+)+$")), "ERR 54000", "catastrophic backtracking is 54000");
    is_str(C2(FN_RE_MATCH, TYPE_BOOL, T(long_a), T("a+b$")), "t", "a simple pattern on the same text matches");
    is_str(C2(FN_RE_MATCH, TYPE_BOOL, T(long_a), T("^(a|b)*$")), "t", "deep backtracking on a long text is no error");
    is_str(C2(FN_RE_MATCH, TYPE_BOOL, T("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"), T("^(a+)+$")), "ERR 54000",
           "exponential backtracking on a short text is 54000");
    WError e = {0};
    ok(scalar_regex_check(FN_REGEXP_LIKE, "a", 1, "g", 1, &e) < 0 && strcmp(e.sqlstate, "22023") == 0,
       "regexp_like rejects the g flag at plan time");
    int ok1 = 1, ok2 = 1;
    pthread_t t1, t2;
    pthread_create(&t1, NULL, regex_thread, &ok1);
    pthread_create(&t2, NULL, regex_thread, &ok2);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    ok(ok1 && ok2, "two threads with more patterns than the cache holds agree");
}

static void test_try_cast(void)
{
    is_str(C1(FN_TRY_CAST, TYPE_INT4, T("12")), "12", "TRY_CAST that works");
    is_str(C1(FN_TRY_CAST, TYPE_INT4, T("1x")), "NULL", "bad input: NULL");
    is_str(C1(FN_TRY_CAST, TYPE_INT2, I(70000)), "NULL", "out of range: NULL");
    is_str(C1(FN_TRY_CAST, TYPE_DATE, T("2024-13-01")), "NULL", "bad date: NULL");
    is_str(C1(FN_TRY_CAST, TYPE_INT4, N(TYPE_TEXT)), "NULL", "NULL in, NULL out");
}

int main(void)
{
    A = arena_new(0);
    test_math();
    test_conditional();
    test_text();
    test_time();
    test_json();
    test_casts();
    test_regex();
    test_try_cast();
    arena_free(A);
    return tap_done();
}
