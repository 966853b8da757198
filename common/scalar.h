/*
 * scalar.h: the semantics of every scalar function and operator, one value
 * at a time.
 *
 * The binder resolves an operator or function call to one ScalarFn by its
 * argument types (after implicit casts), so each id has exactly one
 * meaning. scalar_call() is the reference implementation, used for
 * constant folding in the planner and by the runtime for anything it has
 * no vectorized kernel for; the runtime's kernels must agree with it (the
 * runtime tests compare them).
 */
#ifndef WEIR_COMMON_SCALAR_H
#define WEIR_COMMON_SCALAR_H

#include "types.h"

typedef enum ScalarFn {
    FN_NONE = 0,
    /* integer arithmetic (int2/int4/int8; overflow is checked against the result type) */
    FN_ADD_I, FN_SUB_I, FN_MUL_I, FN_DIV_I, FN_MOD_I, FN_NEG_I,
    /* floating point arithmetic */
    FN_ADD_F, FN_SUB_F, FN_MUL_F, FN_DIV_F, FN_NEG_F, FN_POW_F,
    /* time arithmetic */
    FN_TS_ADD_IV, FN_TS_SUB_IV, FN_TS_SUB_TS, FN_IV_ADD_IV, FN_IV_SUB_IV, FN_IV_NEG,
    FN_IV_MUL_F, FN_IV_DIV_F, FN_DATE_ADD_I, FN_DATE_SUB_I, FN_DATE_SUB_DATE,
    /* comparison (both arguments of one type after coercion) */
    FN_EQ, FN_NE, FN_LT, FN_LE, FN_GT, FN_GE,
    /* three-valued logic */
    FN_AND, FN_OR, FN_NOT,
    FN_IS_NULL, FN_IS_NOT_NULL, FN_IS_TRUE, FN_IS_NOT_TRUE, FN_IS_FALSE, FN_IS_NOT_FALSE,
    FN_IS_DISTINCT, FN_IS_NOT_DISTINCT,
    /* text */
    FN_CONCAT, FN_LOWER, FN_UPPER, FN_LENGTH, FN_LIKE, FN_ILIKE,
    /* misc */
    FN_CAST,        /* args[0] to the call's result type */
    FN_CASE,        /* when0, then0, ..., [else]: odd n_args has an else */
    FN_COALESCE,
    FN_ABS_I, FN_ABS_F,
    FN_IN,          /* args[0] IN (args[1..]) */
    /* conditional: NULLIF(a, b) (a and b of one type); GREATEST/LEAST skip NULLs */
    FN_NULLIF, FN_GREATEST, FN_LEAST,
    /* math on double precision (integers are cast by the binder); see the
     * rounding note at scalar_round() */
    FN_MOD_F, FN_ROUND_F, FN_ROUND_N_F, FN_TRUNC_F, FN_TRUNC_N_F, FN_FLOOR_F, FN_CEIL_F,
    FN_SQRT_F, FN_CBRT_F, FN_EXP_F, FN_LN_F, FN_LOG10_F, FN_LOG_F, FN_SIGN_F, FN_PI,
    /* text (lengths and positions count characters of UTF-8 text) */
    FN_SUBSTR,      /* (s, start [, count]) */
    FN_BTRIM, FN_LTRIM, FN_RTRIM, /* (s [, characters]) */
    FN_REPLACE, FN_SPLIT_PART, FN_STRPOS, FN_LEFT, FN_RIGHT,
    FN_LPAD, FN_RPAD,  /* (s, length [, fill]) */
    FN_REPEAT, FN_REVERSE, FN_STARTS_WITH, FN_OCTET_LENGTH, FN_INITCAP, FN_MD5,
    FN_ASCII, FN_CHR,
    FN_CONCAT_ARGS, /* concat(text...): NULL arguments are skipped (not strict) */
    FN_CONCAT_WS,   /* concat_ws(sep, text...): NULL if sep is NULL, else skips NULLs */
    /* date and time; field names are text arguments (args[0]) */
    FN_DATE_TRUNC,      /* (field, timestamp[tz] [, zone text]) -> the same type */
    FN_EXTRACT_TS,      /* (field, timestamp[tz]) -> double */
    FN_EXTRACT_DATE,    /* (field, date) -> double */
    FN_EXTRACT_IV,      /* (field, interval) -> double */
    FN_TO_TIMESTAMP,    /* (double seconds since the epoch) -> timestamptz */
    FN_MAKE_INTERVAL,   /* (years, months, weeks, days, hours, mins int4, secs double): 0..7 args */
    FN_MAKE_DATE,       /* (year, month, day) */
    FN_MAKE_TIMESTAMP,  /* (year, month, day, hour, min int4, sec double [, zone text]) -> timestamp[tz]; a
                         * timestamptz reads the fields in the zone given or the thread's (tz_current) */
    FN_TO_CHAR,         /* (timestamp[tz], Postgres template text) -> text (scalar_format.c) */
    FN_DATE_FORMAT,     /* (timestamp[tz], Java/Flink pattern text) -> text (scalar_format.c) */
    FN_AT_TIME_ZONE,    /* timezone(zone text, ts): ts AT TIME ZONE zone; timestamp <-> timestamptz */
    /* PROCTIME(): the wall clock when the row is computed, timestamptz. Only a
     * source's computed column makes it (a processing-time attribute); NOT
     * deterministic, by design. */
    FN_PROCTIME,
    /*
     * now(), current_timestamp, transaction_timestamp(), statement_timestamp():
     * NOT deterministic. The binder gives the call one hidden argument, the
     * statement's start time as a timestamptz constant, so every row of one
     * statement sees the same value (as Postgres's transaction time); a plan
     * that must be deterministic (a view) has to reject any FN_NOW.
     */
    FN_NOW,
    /* JSONB (stored as its text; navigated without building a tree) */
    FN_JSON_GET_KEY,    /* jsonb -> text: jsonb, NULL when absent */
    FN_JSON_GET_IDX,    /* jsonb -> int (negative counts from the end) */
    FN_JSON_GET_KEY_TEXT, /* ->> text: text (a JSON string unescaped; JSON null is NULL) */
    FN_JSON_GET_IDX_TEXT, /* ->> int */
    FN_JSON_PATH,       /* jsonb_extract_path(json, keys...) -> jsonb */
    FN_JSON_PATH_TEXT,  /* jsonb_extract_path_text(json, keys...) -> text */
    FN_JSON_TYPEOF, FN_JSON_ARRAY_LENGTH,
    /* NUMERIC (numeric.h): exact, Postgres result scales; integer operands
     * are cast to numeric by the binder. ROUND_NN/TRUNC_NN take (x, int4 digits). */
    FN_ADD_N, FN_SUB_N, FN_MUL_N, FN_DIV_N, FN_MOD_N, FN_NEG_N, FN_ABS_N,
    FN_ROUND_N, FN_ROUND_NN, FN_TRUNC_N, FN_TRUNC_NN, FN_FLOOR_N, FN_CEIL_N, FN_SIGN_N,
    FN_NUM_TYPMOD,  /* (numeric, int4 precision, int4 scale): NUMERIC(p,s) of a cast, 22003 if it does not fit */
    /* regular expressions (scalar_regex.c, PCRE2): the pattern is args[1] */
    FN_RE_MATCH, FN_RE_IMATCH, FN_RE_NMATCH, FN_RE_NIMATCH,  /* ~ ~* !~ !~* */
    FN_REGEXP_REPLACE,  /* (s, pattern, replacement [, flags]) */
    FN_REGEXP_LIKE,     /* (s, pattern [, flags]) */
    FN_REGEXP_COUNT, FN_REGEXP_SUBSTR,  /* (s, pattern) */
    FN_REGEXP_EXTRACT,  /* (s, pattern [, group]): Flink's; group 0 (the default) is the whole match */
    /* TRY_CAST(x AS t): args[0] to the result type, NULL where the cast fails with a 22xxx error */
    FN_TRY_CAST,
    FN__COUNT
} ScalarFn;

const char *scalar_fn_name(ScalarFn fn);   /* "+", "=", "lower", ... for EXPLAIN */
bool scalar_fn_is_infix(ScalarFn fn);

/*
 * Computes fn(args[0..n)) as a value of type result. Strings produced are
 * allocated in a (results may also borrow an argument's bytes, so they live
 * as long as the shorter of a and the arguments). Returns 0, or -1 with err
 * set: 22003 overflow, 22012 division by zero, 22P02/22007 bad cast input,
 * 2201E/2201F logarithm and power domain errors, 22011 negative substring
 * length, 22023 bad argument value (a field name, split_part's position),
 * 22008 date/time field out of range, 54000 a result longer than
 * SCALAR_MAX_STR bytes, 22P02 malformed JSON.
 * Functions that are not strict (AND, OR, IS..., COALESCE, CASE, NULLIF,
 * GREATEST, LEAST, concat, concat_ws) handle NULL arguments themselves; all
 * others return NULL for any NULL argument.
 */
#define SCALAR_MAX_STR (64u << 20)
int scalar_call(ScalarFn fn, TypeId result, int n, const Value *args, Arena *a, Value *out, WError *err);

/* Casts v to type t (explicit CAST semantics). */
int scalar_cast(const Value *v, TypeId t, Arena *a, Value *out, WError *err);

/*
 * Checks a date/time field name (case-insensitive, as in Postgres) for
 * date_trunc (fn FN_DATE_TRUNC) or extract/date_part (FN_EXTRACT_*) on a
 * value of type t, so the binder can reject a constant bad field at plan
 * time. Returns 0, or -1 with err: 22023 "unit ... not recognized for type
 * ...", 0A000 "unit ... not supported for type ...".
 */
int scalar_check_field(ScalarFn fn, TypeId t, const char *field, size_t len, WError *err);

/*
 * Compiles a constant regular expression pattern with its flags text
 * (NULL for none) so the binder can reject a bad one at plan time: 0, or -1
 * with err 2201B (bad pattern) or 22023 (bad flag). The compiled pattern
 * stays in the calling thread's cache.
 */
int scalar_regex_check(ScalarFn fn, const char *p, size_t len, const char *flags, size_t flen, WError *err);

/* SQL LIKE matching (with '\' as the escape character). */
bool like_match(const char *s, size_t n, const char *p, size_t m, bool icase, int esc);

#endif
