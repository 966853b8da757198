/*
 * jsonpath.c: the JSONB functions and operators of scalar_call() (->, ->>,
 * jsonb_extract_path[_text], jsonb_typeof, jsonb_array_length).
 *
 * JSONB values are kept as their text (types.h), so these navigate the
 * text directly: finding a key or an element skips the values before it
 * without building anything, iteratively (nesting depth costs no stack).
 * Skipping is lax (it checks brackets and strings, not every comma), so a
 * malformed document is reported when navigation trips on it, as 22P02.
 * A result of type jsonb is the value's text as written in the input.
 * Duplicate keys resolve to the last one, as Postgres's jsonb keeps them.
 */
#include "scalar_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Span {
    const char *p, *e;   /* [p, e): one JSON value, no surrounding space */
} Span;

static const char *ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* End of the string starting at p[0] == '"', or NULL if unterminated. */
static const char *skip_string(const char *p, const char *e)
{
    for (p++; p < e; p++) {
        if (*p == '\\')
            p++;
        else if (*p == '"')
            return p + 1;
    }
    return NULL;
}

/* End of the value starting at p (no leading space), or NULL if malformed. */
static const char *skip_value(const char *p, const char *e)
{
    if (p >= e)
        return NULL;
    if (*p == '"')
        return skip_string(p, e);
    if (*p == '{' || *p == '[') {
        int64_t depth = 0;
        while (p < e) {
            char c = *p;
            if (c == '"') {
                if (!(p = skip_string(p, e)))
                    return NULL;
                continue;
            }
            if (c == '{' || c == '[')
                depth++;
            else if (c == '}' || c == ']')
                if (--depth == 0)
                    return p + 1;
            p++;
        }
        return NULL;
    }
    const char *s = p;
    while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ':' && *p != ' ' && *p != '\t' && *p != '\n' &&
           *p != '\r' && *p != '"' && *p != '{' && *p != '[')
        p++;
    return p > s ? p : NULL;
}

static int bad_json(WError *err)
{
    return werr(err, SQLSTATE_INVALID_TEXT, 0, "invalid input syntax for type json");
}

static int hex4(const char *p, const char *e)
{
    if (e - p < 4)
        return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t put_utf8(char *w, uint32_t c)
{
    if (c < 0x80) {
        w[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        w[0] = (char)(0xC0 | (c >> 6));
        w[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        w[0] = (char)(0xE0 | (c >> 12));
        w[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        w[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    w[0] = (char)(0xF0 | (c >> 18));
    w[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    w[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    w[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* Decodes the JSON string s (quotes included) into a, NUL-terminated.
 * Escaped output is never longer than its input. */
static int unescape(Span s, Arena *a, StrRef *out, WError *err)
{
    const char *p = s.p + 1, *e = s.e - 1;
    char *r = arena_alloc(a, (size_t)(e - p) + 1), *w = r;
    while (p < e) {
        if (*p != '\\') {
            *w++ = *p++;
            continue;
        }
        if (++p >= e)
            return bad_json(err);
        char c = *p++;
        switch (c) {
        case '"': case '\\': case '/': *w++ = c; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case 'u': {
            int u = hex4(p, e);
            if (u < 0)
                return bad_json(err);
            p += 4;
            uint32_t cp = (uint32_t)u;
            if (u >= 0xD800 && u <= 0xDBFF) {
                int lo = e - p >= 6 && p[0] == '\\' && p[1] == 'u' ? hex4(p + 2, e) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return werr(err, SQLSTATE_UNTRANSLATABLE_CHARACTER, 0, "invalid Unicode surrogate pair");
                cp = 0x10000 + (((uint32_t)u - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                p += 6;
            } else if (u >= 0xDC00 && u <= 0xDFFF) {
                return werr(err, SQLSTATE_UNTRANSLATABLE_CHARACTER, 0, "invalid Unicode surrogate pair");
            } else if (u == 0) {
                return werr(err, SQLSTATE_UNTRANSLATABLE_CHARACTER, 0, "unsupported Unicode escape sequence");
            }
            w += put_utf8(w, cp);
            break;
        }
        default: return bad_json(err);
        }
    }
    *w = 0;
    out->p = r;
    out->len = (uint32_t)(w - r);
    return 0;
}

/* Does the JSON string s (quotes included) equal key? */
static bool key_equals(Span s, const StrRef *key, Arena *a, WError *err, int *rc)
{
    size_t n = (size_t)(s.e - s.p) - 2;
    if (!memchr(s.p + 1, '\\', n))
        return n == key->len && memcmp(s.p + 1, key->p, n) == 0;
    StrRef k;
    if (unescape(s, a, &k, err)) {
        *rc = -1;
        return false;
    }
    return k.len == key->len && memcmp(k.p, key->p, k.len) == 0;
}

/* Number of elements of the array v, or -1 with err on malformed JSON. */
static int64_t count_elems(Span v, WError *err)
{
    const char *p = ws(v.p + 1, v.e), *e = v.e;
    if (p < e && *p == ']')
        return 0;
    for (int64_t n = 1;; n++) {
        if (!(p = skip_value(p, e)))
            return bad_json(err);
        p = ws(p, e);
        if (p < e && *p == ']')
            return n;
        if (p >= e || *p != ',')
            return bad_json(err);
        p = ws(p + 1, e);
    }
}

/*
 * Steps from the value v into its member key (objects) or element idx
 * (arrays; used when key is NULL). Returns 1 and sets *out when found, 0
 * when absent (or v is of the other kind), -1 with err on malformed JSON.
 */
static int step(Span v, const StrRef *key, int64_t idx, Arena *a, Span *out, WError *err)
{
    const char *p = v.p, *e = v.e;
    bool obj = *p == '{';
    if ((key && !obj) || (!key && *p != '['))
        return 0;
    if (!key && idx < 0) {
        /* Negative indexes count from the end. */
        int64_t count = count_elems(v, err);
        if (count < 0)
            return -1;
        if (count + idx < 0)
            return 0;
        idx += count;
    }
    int found = 0, rc = 0;
    p = ws(p + 1, e);
    if (p < e && *p == (obj ? '}' : ']'))
        return 0;
    for (int64_t i = 0;; i++) {
        Span k = {0};
        if (obj) {
            if (p >= e || *p != '"' || !(k.e = skip_string(p, e)))
                return bad_json(err);
            k.p = p;
            p = ws(k.e, e);
            if (p >= e || *p != ':')
                return bad_json(err);
            p = ws(p + 1, e);
        }
        const char *ve = skip_value(p, e);
        if (!ve)
            return bad_json(err);
        if (obj ? key_equals(k, key, a, err, &rc) : i == idx) {
            out->p = p;
            out->e = ve;
            found = 1;
            if (!obj)
                return 1;
        }
        if (rc)
            return -1;
        p = ws(ve, e);
        if (p < e && *p == ',') {
            p = ws(p + 1, e);
            continue;
        }
        if (p < e && *p == (obj ? '}' : ']'))
            return found;
        return bad_json(err);
    }
}

static int root(const Value *v, Span *out, WError *err)
{
    const char *e = v->u.s.p + v->u.s.len;
    out->p = ws(v->u.s.p, e);
    out->e = skip_value(out->p, e);
    if (!out->e || ws(out->e, e) != e)
        return bad_json(err);
    return 0;
}

/* Sets out from the found value s: as jsonb text, or as text (->>). */
static int result(Span s, bool as_text, Arena *a, Value *out, WError *err)
{
    size_t n = (size_t)(s.e - s.p);
    if (as_text && *s.p == '"')
        return unescape(s, a, &out->u.s, err);
    if (as_text && n == 4 && memcmp(s.p, "null", 4) == 0) {
        out->null = true;
        return 0;
    }
    scalar_set_str(out, arena_strndup(a, s.p, n), n);
    return 0;
}

/* An array index written as a path key ('0', '-1'), as Postgres accepts. */
static bool parse_index(const StrRef *k, int64_t *out)
{
    char tmp[24];
    if (k->len == 0 || k->len >= sizeof tmp)
        return false;
    memcpy(tmp, k->p, k->len);
    tmp[k->len] = 0;
    char *end;
    long long v = strtoll(tmp, &end, 10);
    if (*end)
        return false;
    *out = v;
    return true;
}

int scalar_json_call(ScalarFn fn, TypeId result_type, int n, const Value *args, Arena *a, Value *out, WError *err)
{
    (void)result_type;
    Span v, f;
    if (root(&args[0], &v, err))
        return -1;
    int r;
    switch (fn) {
    case FN_JSON_GET_KEY:
    case FN_JSON_GET_KEY_TEXT:
        if ((r = step(v, &args[1].u.s, 0, a, &f, err)) <= 0)
            goto absent;
        return result(f, fn == FN_JSON_GET_KEY_TEXT, a, out, err);
    case FN_JSON_GET_IDX:
    case FN_JSON_GET_IDX_TEXT:
        if ((r = step(v, NULL, args[1].u.i, a, &f, err)) <= 0)
            goto absent;
        return result(f, fn == FN_JSON_GET_IDX_TEXT, a, out, err);
    case FN_JSON_PATH:
    case FN_JSON_PATH_TEXT:
        for (int i = 1; i < n; i++) {
            int64_t idx = 0;
            if (*v.p == '[') {
                if (!parse_index(&args[i].u.s, &idx)) {
                    r = 0;
                    goto absent;
                }
                r = step(v, NULL, idx, a, &f, err);
            } else {
                r = step(v, &args[i].u.s, 0, a, &f, err);
            }
            if (r <= 0)
                goto absent;
            v = f;
        }
        return result(v, fn == FN_JSON_PATH_TEXT, a, out, err);
    case FN_JSON_TYPEOF: {
        const char *t = *v.p == '{' ? "object" : *v.p == '[' ? "array" : *v.p == '"' ? "string"
                      : *v.p == 't' || *v.p == 'f' ? "boolean" : *v.p == 'n' ? "null" : "number";
        scalar_set_str(out, t, strlen(t));
        return 0;
    }
    case FN_JSON_ARRAY_LENGTH: {
        if (*v.p != '[')
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "cannot get array length of a %s",
                        *v.p == '{' ? "non-array" : "scalar");
        int64_t count = count_elems(v, err);
        if (count < 0)
            return -1;
        out->u.i = count;
        return 0;
    }
    default:
        return werr(err, SQLSTATE_INTERNAL, 0, "unknown json function id %d", (int)fn);
    }
absent:
    if (r < 0)
        return -1;
    out->null = true;
    return 0;
}
