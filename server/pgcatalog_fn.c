/*
 * pgcatalog_fn.c: the SQL functions of the emulated system catalogs.
 *
 * Registered in each statement's SQLite database by pgcatalog.c: what psql
 * and drivers call in catalog queries (format_type, pg_get_userbyid,
 * pg_table_is_visible, pg_get_viewdef, regclass and the other reg* casts,
 * current_setting, version...), the targets of pgtranslate.c's rewrites
 * (regexp and match for ~ and ~*, like and glob for LIKE and ILIKE,
 * pg_array* for arrays, pg_*_json for set-returning functions), and
 * harmless answers for what weir has not (privileges: true; sizes: 0;
 * definitions of indexes, constraints, rules: NULL). Arrays are Postgres'
 * text form '{a,b}'. A function fails with a message that starts with a
 * SQLSTATE and a colon ("42P01:relation ... does not exist"), which
 * pgcatalog.c turns into the error's code.
 */
#include "pgcatalog_int.h"
#include "pg_oids.h"

#include <ctype.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_SERIES 1000000

/* ---- Postgres arrays in text form ------------------------------------------------- */

/* Splits a Postgres array literal '{a,"b c",NULL}' (or a vector 'a b c', as
 * int2vector prints) into elements. Returns the count, elements in a. */
static int array_parse(const char *s, Arena *a, char ***out, bool **nulls)
{
    int cap = 8, n = 0;
    char **el = arena_alloc(a, sizeof(char *) * (size_t)cap);
    bool *nu = arena_alloc(a, sizeof(bool) * (size_t)cap);
    bool braces = *s == '{';
    const char *p = braces ? s + 1 : s;
    Buf b = BUF_INIT;
    while (*p && !(braces && *p == '}')) {
        while (*p == ' ')
            p++;
        if (!*p || (braces && *p == '}'))
            break;
        buf_reset(&b);
        bool quoted = false;
        if (*p == '"') {
            quoted = true;
            for (p++; *p && *p != '"'; p++) {
                if (*p == '\\' && p[1])
                    p++;
                buf_putc(&b, *p);
            }
            if (*p == '"')
                p++;
        } else {
            while (*p && *p != (braces ? ',' : ' ') && !(braces && *p == '}'))
                buf_putc(&b, *p++);
        }
        if (n == cap) {
            char **e2 = arena_alloc(a, sizeof(char *) * (size_t)cap * 2);
            bool *n2 = arena_alloc(a, sizeof(bool) * (size_t)cap * 2);
            memcpy(e2, el, sizeof(char *) * (size_t)cap);
            memcpy(n2, nu, sizeof(bool) * (size_t)cap);
            el = e2;
            nu = n2;
            cap *= 2;
        }
        el[n] = arena_strndup(a, b.data ? b.data : "", b.len);
        nu[n] = !quoted && strcmp(el[n], "NULL") == 0;
        n++;
        if (braces && *p == ',')
            p++;
    }
    buf_free(&b);
    *out = el;
    if (nulls)
        *nulls = nu;
    return n;
}

void pgcat_array_put(Buf *b, const char *v, bool first)
{
    if (!first)
        buf_putc(b, ',');
    if (!v) {
        buf_puts(b, "NULL");
        return;
    }
    bool quote = !*v || strcasecmp(v, "null") == 0;
    for (const char *p = v; *p && !quote; p++)
        quote = strchr("{},\"\\ \t\n", *p) != NULL;
    if (!quote) {
        buf_puts(b, v);
        return;
    }
    buf_putc(b, '"');
    for (const char *p = v; *p; p++) {
        if (*p == '"' || *p == '\\')
            buf_putc(b, '\\');
        buf_putc(b, *p);
    }
    buf_putc(b, '"');
}

static void json_str(Buf *b, const char *s)
{
    buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            buf_printf(b, "\\%c", *p);
        else if (*p < 0x20)
            buf_printf(b, "\\u%04x", *p);
        else
            buf_putc(b, (char)*p);
    }
    buf_putc(b, '"');
}

static bool is_int_text(const char *s)
{
    const char *p = s;
    if (*p == '-')
        p++;
    if (!*p || strlen(p) > 18)
        return false;
    for (; *p; p++)
        if (!isdigit((unsigned char)*p))
            return false;
    return true;
}

static void result_buf(sqlite3_context *cx, Buf *b)
{
    sqlite3_result_text(cx, b->data ? b->data : "", (int)b->len, SQLITE_TRANSIENT);
    buf_free(b);
}

static const char *arg_text(sqlite3_value *v) { return (const char *)sqlite3_value_text(v); }

/* pg_array(a, b, ...): ARRAY[a, b, ...] */
static void fn_pg_array(sqlite3_context *cx, int n, sqlite3_value **v)
{
    Buf b = BUF_INIT;
    buf_putc(&b, '{');
    for (int i = 0; i < n; i++)
        pgcat_array_put(&b, sqlite3_value_type(v[i]) == SQLITE_NULL ? NULL : arg_text(v[i]), i == 0);
    buf_putc(&b, '}');
    result_buf(cx, &b);
}

typedef struct AggState {
    Buf b;
    int n;
} AggState;

static void agg_array_step(sqlite3_context *cx, int n, sqlite3_value **v)
{
    AggState *s = sqlite3_aggregate_context(cx, sizeof *s);
    if (!s)
        return;
    if (s->n == 0)
        buf_putc(&s->b, '{');
    pgcat_array_put(&s->b, sqlite3_value_type(v[0]) == SQLITE_NULL ? NULL : arg_text(v[0]), s->n == 0);
    s->n++;
}

static void agg_array_final(sqlite3_context *cx)
{
    AggState *s = sqlite3_aggregate_context(cx, 0);
    if (!s || s->n == 0) {
        sqlite3_result_null(cx);
        if (s)
            buf_free(&s->b);
        return;
    }
    buf_putc(&s->b, '}');
    result_buf(cx, &s->b);
}

/* pg_array_json(arr): the elements as a JSON array, for json_each. */
static void fn_array_json(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL) {
        sqlite3_result_text(cx, "[]", 2, SQLITE_STATIC);
        return;
    }
    Arena *a = arena_new(0);
    char **el;
    bool *nu;
    int k = array_parse(arg_text(v[0]), a, &el, &nu);
    Buf b = BUF_INIT;
    buf_putc(&b, '[');
    for (int i = 0; i < k; i++) {
        if (i)
            buf_putc(&b, ',');
        if (nu[i])
            buf_puts(&b, "null");
        else if (is_int_text(el[i]))
            buf_puts(&b, el[i]);
        else
            json_str(&b, el[i]);
    }
    buf_putc(&b, ']');
    arena_free(a);
    result_buf(cx, &b);
}

/* pg_options_json('{k=v,...}'): {"k": "v", ...} for pg_options_to_table. */
static void fn_options_json(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL) {
        sqlite3_result_text(cx, "{}", 2, SQLITE_STATIC);
        return;
    }
    Arena *a = arena_new(0);
    char **el;
    int k = array_parse(arg_text(v[0]), a, &el, NULL);
    Buf b = BUF_INIT;
    buf_putc(&b, '{');
    for (int i = 0; i < k; i++) {
        char *eq = strchr(el[i], '=');
        if (!eq)
            continue;
        *eq = 0;
        if (b.len > 1)
            buf_putc(&b, ',');
        json_str(&b, el[i]);
        buf_putc(&b, ':');
        json_str(&b, eq + 1);
    }
    buf_putc(&b, '}');
    arena_free(a);
    result_buf(cx, &b);
}

/* pg_generate_series_json(a, b[, step]) */
static void fn_series_json(sqlite3_context *cx, int n, sqlite3_value **v)
{
    for (int i = 0; i < n; i++)
        if (sqlite3_value_type(v[i]) == SQLITE_NULL) {
            sqlite3_result_text(cx, "[]", 2, SQLITE_STATIC);
            return;
        }
    sqlite3_int64 lo = sqlite3_value_int64(v[0]), hi = sqlite3_value_int64(v[1]);
    sqlite3_int64 step = n > 2 ? sqlite3_value_int64(v[2]) : 1;
    if (step == 0) {
        sqlite3_result_error(cx, "22023:step size cannot equal zero", -1);
        return;
    }
    /* In 128 bits: hi - lo and the last lo + i * step must not overflow. */
    __int128 span = step > 0 ? (__int128)hi - lo : (__int128)lo - hi;
    __int128 count = span < 0 ? 0 : span / (step > 0 ? (__int128)step : -(__int128)step) + 1;
    if (count > MAX_SERIES) {
        sqlite3_result_error(cx, "54000:generate_series over a system catalog is limited to 1000000 rows", -1);
        return;
    }
    Buf b = BUF_INIT;
    buf_putc(&b, '[');
    for (long i = 0; i < (long)count; i++)
        buf_printf(&b, "%s%lld", i ? "," : "", (long long)((__int128)lo + (__int128)i * step));
    buf_putc(&b, ']');
    result_buf(cx, &b);
}

/* pg_array_get(arr, i): arr[i]; vectors (int2vector, oidvector) count from 0. */
static void fn_array_get(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL || sqlite3_value_type(v[1]) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    const char *s = arg_text(v[0]);
    Arena *a = arena_new(0);
    char **el;
    bool *nu;
    int k = array_parse(s, a, &el, &nu);
    sqlite3_int64 i = sqlite3_value_int64(v[1]) - (*s == '{' ? 1 : 0);
    if (i < 0 || i >= k || nu[i])
        sqlite3_result_null(cx);
    else if (is_int_text(el[i]))
        sqlite3_result_int64(cx, strtoll(el[i], NULL, 10));
    else
        sqlite3_result_text(cx, el[i], -1, SQLITE_TRANSIENT);
    arena_free(a);
}

/* array_upper(arr, dim), array_length(arr, dim), cardinality(arr) */
static void fn_array_len(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    Arena *a = arena_new(0);
    char **el;
    int k = array_parse(arg_text(v[0]), a, &el, NULL);
    arena_free(a);
    if (k == 0 && n > 1)
        sqlite3_result_null(cx);
    else
        sqlite3_result_int(cx, k);
}

/* array_lower(arr, dim): arrays here are one-dimensional and start at 1. */
static void fn_array_lower(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL || sqlite3_value_int(v[1]) != 1) {
        sqlite3_result_null(cx);
        return;
    }
    Arena *a = arena_new(0);
    char **el;
    int k = array_parse(arg_text(v[0]), a, &el, NULL);
    arena_free(a);
    if (k == 0)
        sqlite3_result_null(cx);
    else
        sqlite3_result_int(cx, 1);
}

/* string_to_array(s, sep[, null_string]): s split at every sep (NULL sep:
 * one element per character), elements equal to null_string are NULL. */
static void fn_string_to_array(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    const char *s = arg_text(v[0]);
    const char *sep = sqlite3_value_type(v[1]) == SQLITE_NULL ? NULL : arg_text(v[1]);
    const char *null_str = n > 2 && sqlite3_value_type(v[2]) != SQLITE_NULL ? arg_text(v[2]) : NULL;
    Buf b = BUF_INIT, el = BUF_INIT;
    buf_putc(&b, '{');
    size_t seplen = sep ? strlen(sep) : 0;
    bool first = true;
    for (const char *p = s; *s;) {
        const char *end;
        if (!sep)
            end = p + 1;
        else if (seplen == 0)
            end = p + strlen(p);
        else if (!(end = strstr(p, sep)))
            end = p + strlen(p);
        buf_reset(&el);
        buf_append(&el, p, (size_t)(end - p));
        pgcat_array_put(&b, null_str && !strcmp(el.data ? el.data : "", null_str) ? NULL : (el.data ? el.data : ""),
                        first);
        first = false;
        if (!*end)
            break;
        p = end + (sep ? seplen : 0);
        if (sep && !*p) {          /* a trailing separator: one more, empty element */
            pgcat_array_put(&b, "", false);
            break;
        }
    }
    buf_putc(&b, '}');
    buf_free(&el);
    result_buf(cx, &b);
}

/* parse_ident(s[, strict]): the parts of a qualified identifier, unquoted
 * ones folded to lower case, quoted ones as written ("" is a quote). */
static void fn_parse_ident(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    const char *p = arg_text(v[0]);
    Buf b = BUF_INIT, part = BUF_INIT;
    buf_putc(&b, '{');
    bool first = true;
    for (;;) {
        while (isspace((unsigned char)*p))
            p++;
        buf_reset(&part);
        buf_puts(&part, "");
        if (*p == '"') {
            for (p++; *p && !(*p == '"' && p[1] != '"'); p++) {
                if (*p == '"')
                    p++;
                buf_putc(&part, *p);
            }
            if (*p != '"')
                goto bad;
            p++;
        } else {
            while (*p && (isalnum((unsigned char)*p) || *p == '_' || *p == '$' || (unsigned char)*p >= 0x80))
                buf_putc(&part, (char)tolower((unsigned char)*p++));
            if (part.len == 0)
                goto bad;
        }
        pgcat_array_put(&b, part.data, first);
        first = false;
        while (isspace((unsigned char)*p))
            p++;
        if (*p == '.') {
            p++;
            continue;
        }
        if (*p && (n < 2 || sqlite3_value_int(v[1])))
            goto bad;
        break;
    }
    buf_putc(&b, '}');
    buf_free(&part);
    result_buf(cx, &b);
    return;
bad:
    buf_free(&b);
    buf_free(&part);
    sqlite3_result_error(cx, "22023:string is not a valid identifier", -1);
}

/* unnest(arr) and generate_subscripts(arr, dim) in a select list: SQLite has
 * no set-returning scalar functions. Clients use them over pg_index, which
 * weir leaves empty, so the call never happens on a real array; when it
 * does, it says so instead of returning one row for many. */
static void fn_srf_in_select(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL || !strcmp(arg_text(v[0]), "{}") || !*arg_text(v[0])) {
        sqlite3_result_null(cx);
        return;
    }
    sqlite3_result_error(cx, "0A000:feature not supported: a set-returning function in the select list of a "
                             "catalog query (put it in FROM)", -1);
}

/* array_to_string(arr, sep[, null_text]) */
static void fn_array_to_string(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL || sqlite3_value_type(v[1]) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    const char *sep = arg_text(v[1]);
    const char *null_text = n > 2 && sqlite3_value_type(v[2]) != SQLITE_NULL ? arg_text(v[2]) : NULL;
    Arena *a = arena_new(0);
    char **el;
    bool *nu;
    int k = array_parse(arg_text(v[0]), a, &el, &nu);
    Buf b = BUF_INIT;
    bool first = true;
    for (int i = 0; i < k; i++) {
        if (nu[i] && !null_text)
            continue;
        if (!first)
            buf_puts(&b, sep);
        buf_puts(&b, nu[i] ? null_text : el[i]);
        first = false;
    }
    arena_free(a);
    result_buf(cx, &b);
}

/* array_remove(arr, x) */
static void fn_array_remove(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    const char *x = sqlite3_value_type(v[1]) == SQLITE_NULL ? NULL : arg_text(v[1]);
    Arena *a = arena_new(0);
    char **el;
    bool *nu;
    int k = array_parse(arg_text(v[0]), a, &el, &nu);
    Buf b = BUF_INIT;
    buf_putc(&b, '{');
    bool first = true;
    for (int i = 0; i < k; i++) {
        if (x ? (!nu[i] && !strcmp(el[i], x)) : nu[i])
            continue;
        pgcat_array_put(&b, nu[i] ? NULL : el[i], first);
        first = false;
    }
    buf_putc(&b, '}');
    arena_free(a);
    result_buf(cx, &b);
}

/* ---- pattern matching --------------------------------------------------------------- */

static void regex_free(void *p)
{
    regfree(p);
    free(p);
}

/* regexp(pattern, s) for ~, match(pattern, s) for ~* (POSIX extended). */
static void regex_match(sqlite3_context *cx, sqlite3_value **v, bool icase)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL || sqlite3_value_type(v[1]) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    regex_t *re = sqlite3_get_auxdata(cx, 0);
    if (!re) {
        /* glibc's matcher backtracks on back-references and cannot be
         * interrupted: refuse them, and very long patterns, rather than let
         * one query pin a thread past statement_timeout. */
        const char *pat = arg_text(v[0]);
        bool backref = false;
        for (const char *q = pat; *q && !backref; q++)
            if (*q == '\\' && q[1]) {
                backref = q[1] >= '1' && q[1] <= '9';
                q++;
            }
        if (backref || strlen(pat) > 4096) {
            sqlite3_result_error(cx, backref ? "0A000:feature not supported: back-references in regular expressions "
                                               "over the system catalogs"
                                             : "54000:regular expression over the system catalogs longer than 4096 bytes",
                                 -1);
            return;
        }
        re = xmalloc(sizeof *re);
        int rc = regcomp(re, arg_text(v[0]), REG_EXTENDED | REG_NOSUB | (icase ? REG_ICASE : 0));
        if (rc) {
            char msg[300], full[400];
            regerror(rc, re, msg, sizeof msg);
            free(re);
            snprintf(full, sizeof full, "2201B:invalid regular expression: %s", msg);
            sqlite3_result_error(cx, full, -1);
            return;
        }
        sqlite3_set_auxdata(cx, 0, re, regex_free);
        re = sqlite3_get_auxdata(cx, 0);
        if (!re) {
            sqlite3_result_error_nomem(cx);
            return;
        }
    }
    sqlite3_result_int(cx, regexec(re, arg_text(v[1]), 0, NULL, 0) == 0);
}

static void fn_regexp(sqlite3_context *cx, int n, sqlite3_value **v) { regex_match(cx, v, false); }
static void fn_regexp_i(sqlite3_context *cx, int n, sqlite3_value **v) { regex_match(cx, v, true); }

/* SQL LIKE: % and _, with an escape character (default backslash).
 * Returns LIKE_TRUE, LIKE_FALSE, or LIKE_ABORT when the text ran out: then
 * no later start for the enclosing % can match either, which keeps the
 * work O(pattern x text) instead of exponential (Postgres' like_match.c). */
enum { LIKE_FALSE, LIKE_TRUE, LIKE_ABORT };

/* The character after the one at s (UTF-8): `_` is a character, not a byte. */
static const char *utf8_next(const char *s)
{
    s++;
    while (((unsigned char)*s & 0xC0) == 0x80)
        s++;
    return s;
}

static int sql_like(const char *p, const char *s, char esc, bool icase)
{
    while (*p) {
        if (*p == '%') {
            while (*p == '%')
                p++;
            if (!*p)
                return LIKE_TRUE;
            for (; *s; s = utf8_next(s)) {
                int r = sql_like(p, s, esc, icase);
                if (r != LIKE_FALSE)
                    return r;
            }
            return LIKE_ABORT;
        }
        if (!*s)
            return LIKE_ABORT;
        if (*p == '_') {
            p++;
            s = utf8_next(s);
            continue;
        }
        if (*p == esc && p[1])
            p++;
        char a = *p, b = *s;
        if (icase) {
            a = (char)tolower((unsigned char)a);
            b = (char)tolower((unsigned char)b);
        }
        if (a != b)
            return LIKE_FALSE;
        p++;
        s++;
    }
    return *s ? LIKE_FALSE : LIKE_TRUE;
}

static void like_fn(sqlite3_context *cx, int n, sqlite3_value **v, bool icase)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL || sqlite3_value_type(v[1]) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    char esc = '\\';
    if (n > 2 && sqlite3_value_type(v[2]) != SQLITE_NULL)
        esc = arg_text(v[2])[0];
    sqlite3_result_int(cx, sql_like(arg_text(v[0]), arg_text(v[1]), esc, icase) == LIKE_TRUE);
}

static void fn_like(sqlite3_context *cx, int n, sqlite3_value **v) { like_fn(cx, n, v, false); }
static void fn_ilike(sqlite3_context *cx, int n, sqlite3_value **v) { like_fn(cx, n, v, true); }

/* ---- lookups in the catalog being queried ------------------------------------------- */

/* Runs a one-row, one-column query with one bound argument; NULL if none. */
static void lookup(sqlite3_context *cx, const char *sql, sqlite3_value *arg)
{
    sqlite3 *db = sqlite3_context_db_handle(cx);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_result_error(cx, sqlite3_errmsg(db), -1);
        return;
    }
    if (arg)
        sqlite3_bind_value(st, 1, arg);
    if (sqlite3_step(st) == SQLITE_ROW)
        sqlite3_result_value(cx, sqlite3_column_value(st, 0));
    else
        sqlite3_result_null(cx);
    sqlite3_finalize(st);
}

static void fn_get_userbyid(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    lookup(cx, "SELECT coalesce((SELECT rolname FROM pg_catalog.pg_roles WHERE oid = ?1), "
               "'unknown (OID=' || ?1 || ')')", v[0]);
}

static void fn_table_is_visible(sqlite3_context *cx, int n, sqlite3_value **v)
{
    lookup(cx, "SELECT relnamespace IN (11, 2200) FROM pg_catalog.pg_class WHERE oid = ?1", v[0]);
}

/* pg_table_size(oid) and friends: the state a view holds, 0 for the rest. */
static void fn_size(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (n < 1 || sqlite3_value_type(v[0]) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    lookup(cx, "SELECT coalesce((SELECT bytes FROM main._weir_sizes WHERE oid = ?1), 0)", v[0]);
}

static void fn_true(sqlite3_context *cx, int n, sqlite3_value **v) { sqlite3_result_int(cx, 1); }
static void fn_false(sqlite3_context *cx, int n, sqlite3_value **v) { sqlite3_result_int(cx, 0); }
static void fn_null(sqlite3_context *cx, int n, sqlite3_value **v) { sqlite3_result_null(cx); }
static void fn_zero(sqlite3_context *cx, int n, sqlite3_value **v) { sqlite3_result_int(cx, 0); }
static void fn_identity(sqlite3_context *cx, int n, sqlite3_value **v) { sqlite3_result_value(cx, v[0]); }

/* Postgres' names for types in format_type and information_schema. */
static const struct {
    int oid;
    const char *name;
} TYPE_FORMATS[] = {
    {PG_OID_BOOL, "boolean"}, {PG_OID_CHAR, "\"char\""}, {PG_OID_INT8, "bigint"}, {PG_OID_INT2, "smallint"},
    {PG_OID_INT4, "integer"}, {PG_OID_FLOAT4, "real"}, {PG_OID_FLOAT8, "double precision"},
    {PG_OID_VARCHAR, "character varying"}, {PG_OID_BPCHAR, "character"},
    {PG_OID_TIMESTAMP, "timestamp without time zone"}, {PG_OID_TIMESTAMPTZ, "timestamp with time zone"},
    {PG_OID_TIME, "time without time zone"},
};

static void fn_format_type(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    int oid = sqlite3_value_int(v[0]);
    if (oid == PG_OID_NUMERIC && n > 1 && sqlite3_value_type(v[1]) != SQLITE_NULL && sqlite3_value_int(v[1]) >= 4) {
        /* numeric's typmod is ((precision << 16) | scale) + 4, as in Postgres. */
        int tm = sqlite3_value_int(v[1]) - 4;
        char buf[48];
        snprintf(buf, sizeof buf, "numeric(%d,%d)", (tm >> 16) & 0xffff, tm & 0xffff);
        sqlite3_result_text(cx, buf, -1, SQLITE_TRANSIENT);
        return;
    }
    for (size_t i = 0; i < sizeof TYPE_FORMATS / sizeof TYPE_FORMATS[0]; i++)
        if (TYPE_FORMATS[i].oid == oid) {
            sqlite3_result_text(cx, TYPE_FORMATS[i].name, -1, SQLITE_STATIC);
            return;
        }
    lookup(cx, "SELECT coalesce((SELECT CASE WHEN t.typcategory = 'A' THEN "
               "  format_type(t.typelem, -1) || '[]' ELSE t.typname END "
               "FROM pg_catalog.pg_type t WHERE t.oid = ?1), '??\?')", v[0]);
}

static void fn_get_viewdef(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (sqlite3_value_type(v[0]) == SQLITE_TEXT && !is_int_text(arg_text(v[0])))
        lookup(cx, "SELECT definition FROM pg_catalog.pg_matviews WHERE matviewname = ?1 UNION ALL "
                   "SELECT definition FROM pg_catalog.pg_views WHERE viewname = ?1", v[0]);
    else
        lookup(cx, "SELECT coalesce(m.definition, w.definition) FROM pg_catalog.pg_class c "
                   "LEFT JOIN pg_catalog.pg_matviews m ON m.matviewname = c.relname "
                   "LEFT JOIN pg_catalog.pg_views w ON w.viewname = c.relname WHERE c.oid = ?1", v[0]);
}

static void fn_obj_description(sqlite3_context *cx, int n, sqlite3_value **v)
{
    lookup(cx, "SELECT description FROM pg_catalog.pg_description WHERE objoid = ?1 AND objsubid = 0", v[0]);
}

static void fn_col_description(sqlite3_context *cx, int n, sqlite3_value **v)
{
    sqlite3 *db = sqlite3_context_db_handle(cx);
    sqlite3_stmt *st;
    sqlite3_result_null(cx);
    if (sqlite3_prepare_v2(db, "SELECT description FROM pg_catalog.pg_description WHERE objoid = ?1 AND objsubid = ?2",
                           -1, &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_value(st, 1, v[0]);
    sqlite3_bind_value(st, 2, v[1]);
    if (sqlite3_step(st) == SQLITE_ROW)
        sqlite3_result_value(cx, sqlite3_column_value(st, 0));
    sqlite3_finalize(st);
}

/* Strips one level of double quotes and a schema qualifier from a name. */
static const char *unqualify(const char *s, Arena *a)
{
    const char *dot = NULL;
    bool q = false;
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            q = !q;
        else if (*p == '.' && !q)
            dot = p;
    }
    const char *name = dot ? dot + 1 : s;
    size_t len = strlen(name);
    if (len >= 2 && name[0] == '"' && name[len - 1] == '"')
        return arena_strndup(a, name + 1, len - 2);
    char *low = arena_strdup(a, name);
    for (char *p = low; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    return low;
}

/* regclass(x) and friends: text in, the oid out (an error if there is no
 * such object); an oid in, the name out. regclass_oid(x): the oid either way. */
static void reg_cast(sqlite3_context *cx, sqlite3_value *v, const char *by_name, const char *by_oid,
                     const char *what, bool want_oid, bool missing_ok)
{
    if (sqlite3_value_type(v) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    bool numeric = sqlite3_value_type(v) == SQLITE_INTEGER || is_int_text(arg_text(v));
    if (numeric) {
        if (want_oid) {
            sqlite3_result_int64(cx, sqlite3_value_int64(v));
            return;
        }
        sqlite3 *db = sqlite3_context_db_handle(cx);
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, by_oid, -1, &st, NULL) != SQLITE_OK) {
            sqlite3_result_error(cx, sqlite3_errmsg(db), -1);
            return;
        }
        sqlite3_bind_int64(st, 1, sqlite3_value_int64(v));
        if (sqlite3_step(st) == SQLITE_ROW)
            sqlite3_result_value(cx, sqlite3_column_value(st, 0));
        else
            sqlite3_result_text(cx, arg_text(v), -1, SQLITE_TRANSIENT);
        sqlite3_finalize(st);
        return;
    }
    Arena *a = arena_new(0);
    const char *name = unqualify(arg_text(v), a);
    sqlite3 *db = sqlite3_context_db_handle(cx);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, by_name, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_result_error(cx, sqlite3_errmsg(db), -1);
        arena_free(a);
        return;
    }
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_ROW) {
        sqlite3_result_int64(cx, sqlite3_column_int64(st, 0));
    } else if (missing_ok) {
        sqlite3_result_null(cx);
    } else {
        char msg[400];
        snprintf(msg, sizeof msg, "%s \"%s\" does not exist", what, arg_text(v));
        sqlite3_result_error(cx, msg, -1);
    }
    sqlite3_finalize(st);
    arena_free(a);
}

#define REL_BY_NAME "SELECT oid FROM pg_catalog.pg_class WHERE relname = ?1 ORDER BY relnamespace = 11 DESC LIMIT 1"
#define REL_BY_OID "SELECT relname FROM pg_catalog.pg_class WHERE oid = ?1"
#define TYPE_BY_NAME "SELECT oid FROM pg_catalog.pg_type WHERE typname = ?1 OR format_type(oid, -1) = ?1 LIMIT 1"
#define TYPE_BY_OID "SELECT format_type(?1, -1)"
#define NSP_BY_NAME "SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = ?1"
#define NSP_BY_OID "SELECT nspname FROM pg_catalog.pg_namespace WHERE oid = ?1"
#define ROLE_BY_NAME "SELECT oid FROM pg_catalog.pg_roles WHERE rolname = ?1"
#define ROLE_BY_OID "SELECT rolname FROM pg_catalog.pg_roles WHERE oid = ?1"

static void fn_regclass(sqlite3_context *cx, int n, sqlite3_value **v)
{
    reg_cast(cx, v[0], REL_BY_NAME, REL_BY_OID, "42P01:relation", false, false);
}
static void fn_regclass_oid(sqlite3_context *cx, int n, sqlite3_value **v)
{
    reg_cast(cx, v[0], REL_BY_NAME, REL_BY_OID, "42P01:relation", true, false);
}
static void fn_to_regclass(sqlite3_context *cx, int n, sqlite3_value **v)
{
    reg_cast(cx, v[0], REL_BY_NAME, REL_BY_OID, "42P01:relation", true, true);
}
static void fn_regtype(sqlite3_context *cx, int n, sqlite3_value **v)
{
    reg_cast(cx, v[0], TYPE_BY_NAME, TYPE_BY_OID, "42704:type", false, false);
}
static void fn_regtype_oid(sqlite3_context *cx, int n, sqlite3_value **v)
{
    reg_cast(cx, v[0], TYPE_BY_NAME, TYPE_BY_OID, "42704:type", true, false);
}
static void fn_to_regtype(sqlite3_context *cx, int n, sqlite3_value **v)
{
    reg_cast(cx, v[0], TYPE_BY_NAME, TYPE_BY_OID, "42704:type", true, true);
}
static void fn_regnamespace(sqlite3_context *cx, int n, sqlite3_value **v)
{
    reg_cast(cx, v[0], NSP_BY_NAME, NSP_BY_OID, "3F000:schema", false, false);
}
static void fn_regnamespace_oid(sqlite3_context *cx, int n, sqlite3_value **v)
{
    reg_cast(cx, v[0], NSP_BY_NAME, NSP_BY_OID, "3F000:schema", true, false);
}
static void fn_regrole(sqlite3_context *cx, int n, sqlite3_value **v)
{
    reg_cast(cx, v[0], ROLE_BY_NAME, ROLE_BY_OID, "42704:role", false, false);
}
static void fn_regrole_oid(sqlite3_context *cx, int n, sqlite3_value **v)
{
    reg_cast(cx, v[0], ROLE_BY_NAME, ROLE_BY_OID, "42704:role", true, false);
}

/* ---- session and server facts ------------------------------------------------------- */

static void fn_current_user(sqlite3_context *cx, int n, sqlite3_value **v)
{
    PgCtx *c = sqlite3_user_data(cx);
    sqlite3_result_text(cx, c->s->user, -1, SQLITE_TRANSIENT);
}

static void fn_current_database(sqlite3_context *cx, int n, sqlite3_value **v)
{
    sqlite3_result_text(cx, "weir", -1, SQLITE_STATIC);
}

static void fn_current_schema(sqlite3_context *cx, int n, sqlite3_value **v)
{
    sqlite3_result_text(cx, "public", -1, SQLITE_STATIC);
}

static void fn_current_schemas(sqlite3_context *cx, int n, sqlite3_value **v)
{
    bool implicit = n > 0 && sqlite3_value_int(v[0]);
    sqlite3_result_text(cx, implicit ? "{pg_catalog,public}" : "{public}", -1, SQLITE_STATIC);
}

static void fn_current_setting(sqlite3_context *cx, int n, sqlite3_value **v)
{
    PgCtx *c = sqlite3_user_data(cx);
    if (sqlite3_value_type(v[0]) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    const char *val = session_setting(c->s, arg_text(v[0]));
    if (val) {
        sqlite3_result_text(cx, val, -1, SQLITE_TRANSIENT);
    } else if (n > 1 && sqlite3_value_int(v[1])) {
        sqlite3_result_null(cx);
    } else {
        char msg[300];
        snprintf(msg, sizeof msg, "42704:unrecognized configuration parameter \"%s\"", arg_text(v[0]));
        sqlite3_result_error(cx, msg, -1);
    }
}

static void fn_version(sqlite3_context *cx, int n, sqlite3_value **v)
{
    sqlite3_result_text(cx, "PostgreSQL 15.0 (weir 0.1.0), a streaming SQL engine", -1, SQLITE_STATIC);
}

/* pg_cancel_backend(pid), pg_terminate_backend(pid[, timeout]): true when
 * such a session exists (any user may signal any session: weir has no
 * privileges). */
static void signal_backend(sqlite3_context *cx, sqlite3_value **v, bool terminate)
{
    PgCtx *c = sqlite3_user_data(cx);
    if (sqlite3_value_type(v[0]) == SQLITE_NULL || !c->out) {
        sqlite3_result_null(cx);
        return;
    }
    sqlite3_result_int(cx, srv_result_signal_backend(c->out, (int32_t)sqlite3_value_int64(v[0]), terminate));
}

static void fn_cancel_backend(sqlite3_context *cx, int n, sqlite3_value **v) { signal_backend(cx, v, false); }
static void fn_terminate_backend(sqlite3_context *cx, int n, sqlite3_value **v) { signal_backend(cx, v, true); }

/* The pid of this session's BackendKeyData, as pg_stat_activity shows it. */
static void fn_backend_pid(sqlite3_context *cx, int n, sqlite3_value **v)
{
    PgCtx *c = sqlite3_user_data(cx);
    sqlite3_result_int(cx, c->s ? c->s->pid : 0);
}

static void fn_encoding(sqlite3_context *cx, int n, sqlite3_value **v)
{
    sqlite3_result_text(cx, sqlite3_value_int(v[0]) == 6 ? "UTF8" : "", -1, SQLITE_STATIC);
}

static void fn_utf8(sqlite3_context *cx, int n, sqlite3_value **v)
{
    sqlite3_result_text(cx, "UTF8", -1, SQLITE_STATIC);
}

static void fn_pg_bool(sqlite3_context *cx, int n, sqlite3_value **v)
{
    int t = sqlite3_value_type(v[0]);
    if (t == SQLITE_NULL) {
        sqlite3_result_null(cx);
    } else if (t == SQLITE_INTEGER || t == SQLITE_FLOAT) {
        sqlite3_result_int(cx, sqlite3_value_double(v[0]) != 0);
    } else {
        const char *s = arg_text(v[0]);
        if (!strcasecmp(s, "t") || !strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on") ||
            !strcmp(s, "1") || !strcasecmp(s, "y"))
            sqlite3_result_int(cx, 1);
        else if (!strcasecmp(s, "f") || !strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off") ||
                 !strcmp(s, "0") || !strcasecmp(s, "n"))
            sqlite3_result_int(cx, 0);
        else {
            char msg[300];
            snprintf(msg, sizeof msg, "22P02:invalid input syntax for type boolean: \"%.200s\"", s);
            sqlite3_result_error(cx, msg, -1);
        }
    }
}

static void fn_quote_ident(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    const char *s = arg_text(v[0]);
    bool plain = *s && (islower((unsigned char)*s) || *s == '_');
    for (const char *p = s; *p && plain; p++)
        plain = islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_';
    if (plain) {
        sqlite3_result_text(cx, s, -1, SQLITE_TRANSIENT);
        return;
    }
    Buf b = BUF_INIT;
    buf_putc(&b, '"');
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            buf_putc(&b, '"');
        buf_putc(&b, *p);
    }
    buf_putc(&b, '"');
    result_buf(cx, &b);
}

static void fn_quote_literal(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    Buf b = BUF_INIT;
    const char *s = arg_text(v[0]);
    bool esc = strchr(s, '\\') != NULL;
    if (esc)
        buf_putc(&b, 'E');
    buf_putc(&b, '\'');
    for (const char *p = s; *p; p++) {
        if (*p == '\'' || *p == '\\')
            buf_putc(&b, *p);
        buf_putc(&b, *p);
    }
    buf_putc(&b, '\'');
    result_buf(cx, &b);
}

/* pg_trim(direction, characters or NULL for blanks, s) */
static void fn_pg_trim(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (sqlite3_value_type(v[2]) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    const char *dir = arg_text(v[0]);
    const char *chars = sqlite3_value_type(v[1]) == SQLITE_NULL ? " " : arg_text(v[1]);
    const char *s = arg_text(v[2]);
    size_t b = 0, e = strlen(s);
    if (strcmp(dir, "trailing") != 0)
        while (b < e && strchr(chars, s[b]))
            b++;
    if (strcmp(dir, "leading") != 0)
        while (e > b && strchr(chars, s[e - 1]))
            e--;
    sqlite3_result_text(cx, s + b, (int)(e - b), SQLITE_TRANSIENT);
}

/* left(s, n) and right(s, n), in bytes (weir's catalog names are ASCII). */
static void left_right(sqlite3_context *cx, sqlite3_value **v, bool left)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL || sqlite3_value_type(v[1]) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    const char *s = arg_text(v[0]);
    int len = (int)strlen(s), k = sqlite3_value_int(v[1]);
    if (k < 0)
        k = len + k > 0 ? len + k : 0;
    if (k > len)
        k = len;
    sqlite3_result_text(cx, left ? s : s + len - k, k, SQLITE_TRANSIENT);
}

static void fn_left(sqlite3_context *cx, int n, sqlite3_value **v) { left_right(cx, v, true); }
static void fn_right(sqlite3_context *cx, int n, sqlite3_value **v) { left_right(cx, v, false); }

static void fn_size_pretty(sqlite3_context *cx, int n, sqlite3_value **v)
{
    if (sqlite3_value_type(v[0]) == SQLITE_NULL) {
        sqlite3_result_null(cx);
        return;
    }
    double x = sqlite3_value_double(v[0]);
    static const char *units[] = {"bytes", "kB", "MB", "GB", "TB", "PB"};
    int u = 0;
    while (fabs(x) >= 10 * 1024 && u < 5) {
        x /= 1024;
        u++;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%.0f %s", x, units[u]);
    sqlite3_result_text(cx, buf, -1, SQLITE_TRANSIENT);
}

static void fn_now(sqlite3_context *cx, int n, sqlite3_value **v)
{
    lookup(cx, "SELECT strftime('%Y-%m-%d %H:%M:%f+00', 'now')", NULL);
}

/* Registers every function; ctx lives as long as the database. */
int pgcat_register_functions(sqlite3 *db, PgCtx *c)
{
    static const struct {
        const char *name;
        int n_args;
        void (*fn)(sqlite3_context *, int, sqlite3_value **);
    } FNS[] = {
        {"regexp", 2, fn_regexp}, {"match", 2, fn_regexp_i}, {"like", 2, fn_like}, {"like", 3, fn_like},
        {"glob", 2, fn_ilike},
        {"pg_array", -1, fn_pg_array}, {"pg_array_json", 1, fn_array_json}, {"pg_unnest_json", 1, fn_array_json},
        {"pg_options_json", 1, fn_options_json}, {"pg_generate_series_json", 2, fn_series_json},
        {"pg_generate_series_json", 3, fn_series_json}, {"pg_array_get", 2, fn_array_get},
        {"array_lower", 2, fn_array_lower}, {"string_to_array", 2, fn_string_to_array},
        {"string_to_array", 3, fn_string_to_array}, {"parse_ident", 1, fn_parse_ident},
        {"parse_ident", 2, fn_parse_ident},
        {"array_upper", 2, fn_array_len}, {"array_length", 2, fn_array_len}, {"cardinality", 1, fn_array_len},
        {"array_to_string", 2, fn_array_to_string}, {"array_to_string", 3, fn_array_to_string},
        {"pg_get_userbyid", 1, fn_get_userbyid}, {"pg_table_is_visible", 1, fn_table_is_visible},
        {"pg_type_is_visible", 1, fn_true}, {"pg_function_is_visible", 1, fn_true},
        {"pg_collation_is_visible", 1, fn_true}, {"pg_conversion_is_visible", 1, fn_true},
        {"pg_operator_is_visible", 1, fn_true}, {"pg_opclass_is_visible", 1, fn_true},
        {"pg_opfamily_is_visible", 1, fn_true}, {"pg_statistics_obj_is_visible", 1, fn_true},
        {"pg_ts_config_is_visible", 1, fn_true}, {"pg_ts_parser_is_visible", 1, fn_true},
        {"pg_ts_dict_is_visible", 1, fn_true}, {"pg_ts_template_is_visible", 1, fn_true},
        {"array_remove", 2, fn_array_remove}, {"unnest", 1, fn_srf_in_select},
        {"generate_subscripts", 2, fn_srf_in_select}, {"pg_tablespace_location", 1, fn_null},
        {"getdatabaseencoding", 0, fn_utf8}, {"pg_client_encoding", 0, fn_utf8}, {"pg_has_role", -1, fn_true},
        {"has_table_privilege", -1, fn_true}, {"has_schema_privilege", -1, fn_true},
        {"has_database_privilege", -1, fn_true}, {"has_column_privilege", -1, fn_true},
        {"has_any_column_privilege", -1, fn_true}, {"has_function_privilege", -1, fn_true},
        {"has_sequence_privilege", -1, fn_true}, {"pg_is_in_recovery", 0, fn_false},
        {"pg_relation_is_publishable", 1, fn_false},
        {"format_type", 2, fn_format_type}, {"pg_get_expr", 2, fn_identity}, {"pg_get_expr", 3, fn_identity},
        {"pg_get_viewdef", 1, fn_get_viewdef}, {"pg_get_viewdef", 2, fn_get_viewdef},
        {"pg_get_constraintdef", -1, fn_null}, {"pg_get_indexdef", -1, fn_null}, {"pg_get_ruledef", -1, fn_null},
        {"pg_get_triggerdef", -1, fn_null}, {"pg_get_statisticsobjdef_columns", -1, fn_null},
        {"pg_get_partkeydef", -1, fn_null}, {"pg_get_function_arguments", -1, fn_null},
        {"pg_get_function_result", -1, fn_null}, {"pg_get_serial_sequence", -1, fn_null},
        {"pg_get_function_identity_arguments", -1, fn_null}, {"shobj_description", -1, fn_null},
        {"obj_description", 1, fn_obj_description}, {"obj_description", 2, fn_obj_description},
        {"col_description", 2, fn_col_description},
        {"pg_relation_size", -1, fn_size}, {"pg_table_size", -1, fn_size}, {"pg_total_relation_size", -1, fn_size},
        {"pg_indexes_size", -1, fn_zero}, {"pg_database_size", -1, fn_zero}, {"pg_size_pretty", 1, fn_size_pretty},
        {"pg_encoding_to_char", 1, fn_encoding},
        {"regclass", 1, fn_regclass}, {"regclass_oid", 1, fn_regclass_oid}, {"to_regclass", 1, fn_to_regclass},
        {"regtype", 1, fn_regtype}, {"regtype_oid", 1, fn_regtype_oid}, {"to_regtype", 1, fn_to_regtype},
        {"regnamespace", 1, fn_regnamespace}, {"regnamespace_oid", 1, fn_regnamespace_oid},
        {"regrole", 1, fn_regrole}, {"regrole_oid", 1, fn_regrole_oid},
        {"regproc", 1, fn_identity}, {"regproc_oid", 1, fn_identity}, {"regprocedure", 1, fn_identity},
        {"regprocedure_oid", 1, fn_identity}, {"regoper", 1, fn_identity}, {"regoper_oid", 1, fn_identity},
        {"regoperator", 1, fn_identity}, {"regoperator_oid", 1, fn_identity},
        {"current_user", 0, fn_current_user}, {"session_user", 0, fn_current_user},
        {"current_role", 0, fn_current_user}, {"current_database", 0, fn_current_database},
        {"current_catalog", 0, fn_current_database}, {"current_schema", 0, fn_current_schema},
        {"current_schemas", 1, fn_current_schemas}, {"current_setting", 1, fn_current_setting},
        {"current_setting", 2, fn_current_setting}, {"version", 0, fn_version},
        {"pg_backend_pid", 0, fn_backend_pid}, {"pg_cancel_backend", 1, fn_cancel_backend},
        {"pg_terminate_backend", 1, fn_terminate_backend}, {"pg_terminate_backend", 2, fn_terminate_backend}, {"pg_bool", 1, fn_pg_bool},
        {"quote_ident", 1, fn_quote_ident}, {"quote_literal", 1, fn_quote_literal}, {"pg_trim", 3, fn_pg_trim},
        {"pg_left", 2, fn_left}, {"pg_right", 2, fn_right}, {"now", 0, fn_now}, {"txid_current", 0, fn_zero},
        {"inet_server_addr", 0, fn_null}, {"inet_server_port", 0, fn_null},
    };
    for (size_t i = 0; i < sizeof FNS / sizeof FNS[0]; i++)
        if (sqlite3_create_function_v2(db, FNS[i].name, FNS[i].n_args, SQLITE_UTF8, c, FNS[i].fn, NULL, NULL, NULL) !=
            SQLITE_OK)
            return -1;
    if (sqlite3_create_function_v2(db, "pg_array_agg", 1, SQLITE_UTF8, c, NULL, agg_array_step, agg_array_final,
                                   NULL) != SQLITE_OK)
        return -1;
    return 0;
}
