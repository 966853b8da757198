/*
 * json.c: JSON records to rows and back, driven by the source's schema.
 *
 * The decoder scans one object without building a document: for each key
 * it finds the column of that name and parses the value straight into the
 * column's type (numbers into BIGINT/DOUBLE, strings into TEXT, timestamps
 * and intervals from their text forms, nested values into JSONB as text).
 * Unknown keys are skipped; missing keys are NULL, so producers may add
 * fields without breaking views. Anything malformed returns an error that
 * names the field, and the record is counted as bad by the caller.
 */
#include "runtime_int.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

/* JSON_MAX_DEPTH (common/utf8.h): the deepest nesting a record may have,
 * the record's own object being level 1; bounds the decoder's recursion
 * (stack) on hostile input. A deeper record is a bad record with the reason
 * below (docs/operations.md). */
#define STR_(x) #x
#define STR(x) STR_(x)

typedef struct Scan {
    const char *p, *end;
    Arena *a;
    char *err;
    size_t errlen;
} Scan;

static int fail(Scan *s, const char *fmt, const char *field)
{
    snprintf(s->err, s->errlen, fmt, field ? field : "");
    return -1;
}

static void ws(Scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Parses a string at s->p (the opening quote). *out gets the unescaped text
 * (pointing into the input when it has no escapes). */
static int scan_string(Scan *s, const char **out, size_t *len)
{
    if (s->p >= s->end || *s->p != '"')
        return fail(s, "expected a string%s", NULL);
    const char *start = ++s->p;
    bool esc = false;
    while (s->p < s->end && *s->p != '"') {
        if (*s->p == '\\') {
            esc = true;
            s->p++;
        }
        if (s->p >= s->end)
            break;
        unsigned char ch = (unsigned char)*s->p;
        if (ch < 0x20)
            return fail(s, "control character in a string%s", NULL);
        if (ch >= 0x80) {
            /* Text is UTF-8 only (common/utf8.h): a record with other bytes
             * is a bad record here, not a row no reader can decode later. */
            int l = utf8_seq_len((const unsigned char *)s->p, (size_t)(s->end - s->p));
            if (l == 0)
                return fail(s, "invalid UTF-8 in a string%s", NULL);
            s->p += l;
            continue;
        }
        s->p++;
    }
    if (s->p >= s->end)
        return fail(s, "unterminated string%s", NULL);
    const char *stop = s->p++;
    if (!esc) {
        *out = start;
        *len = (size_t)(stop - start);
        return 0;
    }
    char *buf = arena_alloc(s->a, (size_t)(stop - start) + 1), *w = buf;
    for (const char *q = start; q < stop; q++) {
        if (*q != '\\') {
            *w++ = *q;
            continue;
        }
        q++;
        switch (*q) {
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '/': *w++ = '/'; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case 'u': {
            if (stop - q < 5)
                return fail(s, "bad \\u escape%s", NULL);
            unsigned cp = 0;
            for (int k = 1; k <= 4; k++) {
                int h = hexval(q[k]);
                if (h < 0)
                    return fail(s, "bad \\u escape%s", NULL);
                cp = cp * 16 + (unsigned)h;
            }
            q += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return fail(s, "a Unicode low surrogate must follow a high surrogate%s", NULL);
            if (cp >= 0xD800 && cp <= 0xDBFF && stop - q >= 7 && q[1] == '\\' && q[2] == 'u') {
                unsigned lo = 0;
                for (int k = 3; k <= 6; k++) {
                    int h = hexval(q[k]);
                    if (h < 0)
                        return fail(s, "bad \\u escape%s", NULL);
                    lo = lo * 16 + (unsigned)h;
                }
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    q += 6;
                }
            }
            if (cp >= 0xD800 && cp <= 0xDBFF)
                return fail(s, "a Unicode high surrogate must be followed by a low surrogate%s", NULL);
            if (cp == 0)
                return fail(s, "\\u0000 cannot be stored in text%s", NULL);
            if (cp < 0x80)
                *w++ = (char)cp;
            else if (cp < 0x800) {
                *w++ = (char)(0xC0 | cp >> 6);
                *w++ = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                *w++ = (char)(0xE0 | cp >> 12);
                *w++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                *w++ = (char)(0x80 | (cp & 0x3F));
            } else {
                *w++ = (char)(0xF0 | cp >> 18);
                *w++ = (char)(0x80 | ((cp >> 12) & 0x3F));
                *w++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                *w++ = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: return fail(s, "bad escape in a string%s", NULL);
        }
    }
    *w = 0;
    *out = buf;
    *len = (size_t)(w - buf);
    return 0;
}

/* Skips any JSON value (for unknown keys and JSONB columns). */
static int skip_value(Scan *s, int depth)
{
    if (depth > JSON_MAX_DEPTH)
        return fail(s, "JSON nested more than " STR(JSON_MAX_DEPTH) " levels deep%s", NULL);
    ws(s);
    if (s->p >= s->end)
        return fail(s, "unexpected end of JSON%s", NULL);
    char c = *s->p;
    if (c == '"') {
        const char *x;
        size_t n;
        return scan_string(s, &x, &n);
    }
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        s->p++;
        ws(s);
        if (s->p < s->end && *s->p == close) {
            s->p++;
            return 0;
        }
        for (;;) {
            if (c == '{') {
                const char *x;
                size_t n;
                ws(s);
                if (scan_string(s, &x, &n))
                    return -1;
                ws(s);
                if (s->p >= s->end || *s->p++ != ':')
                    return fail(s, "expected ':' in JSON object%s", NULL);
            }
            if (skip_value(s, depth + 1))
                return -1;
            ws(s);
            if (s->p < s->end && *s->p == ',') {
                s->p++;
                continue;
            }
            if (s->p < s->end && *s->p == close) {
                s->p++;
                return 0;
            }
            return fail(s, "malformed JSON array or object%s", NULL);
        }
    }
    const char *start = s->p;
    while (s->p < s->end && (isalnum((unsigned char)*s->p) || *s->p == '-' || *s->p == '+' || *s->p == '.'))
        s->p++;
    size_t n = (size_t)(s->p - start);
    if ((n == 4 && !memcmp(start, "true", 4)) || (n == 5 && !memcmp(start, "false", 5)) ||
        (n == 4 && !memcmp(start, "null", 4)))
        return 0;
    if (n == 0)
        return fail(s, "unexpected character in JSON%s", NULL);
    /* Strictly a JSON number: a JSONB column keeps this text, and every
     * reader of it (jsonb functions, the HTTP API) expects JSON. */
    if (json_number_len(start, n) != n)
        return fail(s, "malformed JSON value%s", NULL);
    return 0;
}

static int set_from_text(Chunk *c, int col, int row, const char *p, size_t n, Scan *s, const char *field)
{
    Value v;
    WError err = {0};
    TypeId t = c->cols[col].type;
    if (value_from_text(t, p, n, s->a, &v, &err)) {
        snprintf(s->err, s->errlen, "field \"%s\": %s", field, err.msg);
        return -1;
    }
    chunk_set(c, col, row, &v);
    return 0;
}

/* Parses the value at s->p into column col of row. */
static int scan_into(Scan *s, Chunk *c, int col, int row, const char *field)
{
    ws(s);
    if (s->p >= s->end)
        return fail(s, "unexpected end of JSON in field \"%s\"", field);
    TypeId t = c->cols[col].type;
    char ch = *s->p;
    if (t == TYPE_JSONB) {
        const char *start = s->p;
        if (skip_value(s, 1))
            return -1;
        Value v = value_str(TYPE_JSONB, start, (size_t)(s->p - start));
        chunk_set(c, col, row, &v);
        return 0;
    }
    if (ch == '"') {
        const char *x;
        size_t n;
        if (scan_string(s, &x, &n))
            return -1;
        return set_from_text(c, col, row, x, n, s, field);
    }
    if (ch == '{' || ch == '[')
        return fail(s, "field \"%s\": a nested value needs a JSONB column", field);
    const char *start = s->p;
    while (s->p < s->end && (isalnum((unsigned char)*s->p) || *s->p == '-' || *s->p == '+' || *s->p == '.'))
        s->p++;
    size_t n = (size_t)(s->p - start);
    if (n == 4 && !memcmp(start, "null", 4)) {
        Value v = value_null(t);
        chunk_set(c, col, row, &v);
        return 0;
    }
    if ((n == 4 && !memcmp(start, "true", 4)) || (n == 5 && !memcmp(start, "false", 5))) {
        if (t != TYPE_BOOL && t != TYPE_TEXT)
            return fail(s, "field \"%s\": a boolean for a non-boolean column", field);
        Value v = t == TYPE_BOOL ? value_bool(n == 4) : value_str(TYPE_TEXT, start, n);
        chunk_set(c, col, row, &v);
        return 0;
    }
    if (n == 0)
        return fail(s, "unexpected character in field \"%s\"", field);
    if (json_number_len(start, n) != n)
        return fail(s, "field \"%s\": not a JSON number", field);
    if (t == TYPE_TIMESTAMP || t == TYPE_TIMESTAMPTZ) {
        /* A JSON number for a timestamp is milliseconds since the epoch, as Kafka tools write. */
        char tmp[64];
        if (n >= sizeof tmp)
            return fail(s, "field \"%s\": number too long", field);
        memcpy(tmp, start, n);
        tmp[n] = 0;
        char *end;
        double ms = strtod(tmp, &end);
        if (*end || !isfinite(ms) || fabs(ms) > 9.2e15)
            return fail(s, "field \"%s\": not a valid epoch-milliseconds timestamp", field);
        Value v = value_int(t, (int64_t)llround(ms * 1000.0));
        chunk_set(c, col, row, &v);
        return 0;
    }
    /* A number for a NUMERIC column is parsed from its text, never through a
     * double, so 0.1 and 12345678901234567890.12 arrive exactly. */
    if (t == TYPE_FLOAT4 || t == TYPE_FLOAT8 || type_is_integer(t) || t == TYPE_TEXT || t == TYPE_NUMERIC)
        return set_from_text(c, col, row, start, n, s, field);
    return fail(s, "field \"%s\": a number for a non-numeric column", field);
}

int rt_json_decode_row(const char *p, size_t n, int n_cols, const char *const *names, Chunk *c, int row,
                       char *errbuf, size_t errlen)
{
    Scan s = {.p = p, .end = p + n, .a = c->arena, .err = errbuf, .errlen = errlen};
    for (int i = 0; i < n_cols; i++) {
        c->cols[i].nulls[row] = 1;
    }
    ws(&s);
    if (s.p >= s.end || *s.p != '{')
        return fail(&s, "a record must be a JSON object%s", NULL);
    s.p++;
    ws(&s);
    if (s.p < s.end && *s.p == '}') {
        s.p++;
        goto done;
    }
    for (;;) {
        const char *key;
        size_t klen;
        ws(&s);
        if (scan_string(&s, &key, &klen))
            return -1;
        ws(&s);
        if (s.p >= s.end || *s.p++ != ':')
            return fail(&s, "expected ':' in JSON object%s", NULL);
        int col = -1;
        for (int i = 0; i < n_cols; i++)
            if (names[i] && strlen(names[i]) == klen && memcmp(names[i], key, klen) == 0) {
                col = i;
                break;
            }
        if (col < 0) {
            if (skip_value(&s, 1))
                return -1;
        } else {
            char field[128];
            snprintf(field, sizeof field, "%.*s", (int)(klen > 100 ? 100 : klen), key);
            if (scan_into(&s, c, col, row, field))
                return -1;
        }
        ws(&s);
        if (s.p < s.end && *s.p == ',') {
            s.p++;
            continue;
        }
        if (s.p < s.end && *s.p == '}') {
            s.p++;
            break;
        }
        return fail(&s, "malformed JSON object%s", NULL);
    }
done:
    ws(&s);
    if (s.p != s.end)
        return fail(&s, "trailing characters after the JSON object%s", NULL);
    return 0;
}

int rt_json_field(const char *p, size_t n, const char *name, Arena *a, const char **vp, size_t *vn, char *errbuf,
                  size_t errlen)
{
    Scan s = {.p = p, .end = p + n, .a = a, .err = errbuf, .errlen = errlen};
    ws(&s);
    if (s.p >= s.end || *s.p != '{')
        return fail(&s, "a record must be a JSON object%s", NULL);
    s.p++;
    ws(&s);
    if (s.p < s.end && *s.p == '}')
        return 0;
    size_t nl = strlen(name);
    for (;;) {
        const char *key;
        size_t klen;
        ws(&s);
        if (scan_string(&s, &key, &klen))
            return -1;
        ws(&s);
        if (s.p >= s.end || *s.p++ != ':')
            return fail(&s, "expected ':' in JSON object%s", NULL);
        ws(&s);
        const char *start = s.p;
        if (skip_value(&s, 1))
            return -1;
        if (klen == nl && memcmp(key, name, nl) == 0) {
            *vp = start;
            *vn = (size_t)(s.p - start);
            return 1;
        }
        ws(&s);
        if (s.p < s.end && *s.p == ',') {
            s.p++;
            continue;
        }
        if (s.p < s.end && *s.p == '}')
            return 0;
        return fail(&s, "malformed JSON object%s", NULL);
    }
}

static void json_escape(Buf *out, const char *p, size_t n)
{
    buf_putc(out, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch == '"' || ch == '\\')
            buf_printf(out, "\\%c", ch);
        else if (ch == '\n')
            buf_puts(out, "\\n");
        else if (ch < 0x20)
            buf_printf(out, "\\u%04x", ch);
        else
            buf_putc(out, (char)ch);
    }
    buf_putc(out, '"');
}

void rt_json_encode_row(int n, const char *const *names, const Value *vals, Buf *out)
{
    buf_putc(out, '{');
    for (int i = 0; i < n; i++) {
        if (i)
            buf_putc(out, ',');
        json_escape(out, names[i], strlen(names[i]));
        buf_putc(out, ':');
        const Value *v = &vals[i];
        if (v->null) {
            buf_puts(out, "null");
            continue;
        }
        switch (v->type) {
        case TYPE_BOOL: buf_puts(out, v->u.i ? "true" : "false"); break;
        case TYPE_INT2: case TYPE_INT4: case TYPE_INT8:
            value_to_text(v, out);
            break;
        case TYPE_FLOAT4: case TYPE_FLOAT8:
            if (isfinite(v->u.f)) {
                value_to_text(v, out);
                break;
            }
            /* NaN and infinities are not JSON numbers: write them as strings. */
            /* fall through */
        default: {
            if (v->type == TYPE_JSONB) {
                buf_append(out, v->u.s.p, v->u.s.len);
                break;
            }
            Buf t = BUF_INIT;
            value_to_text(v, &t);
            json_escape(out, t.data ? t.data : "", t.len);
            buf_free(&t);
        }
        }
    }
    buf_putc(out, '}');
}
