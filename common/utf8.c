/*
 * utf8.c: UTF-8 and JSON text checks (utf8.h).
 */
#include "utf8.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int utf8_seq_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    if (c < 0x80)
        return c != 0;
    int len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (len == 0 || (size_t)len > n)
        return 0;
    for (int k = 1; k < len; k++)
        if ((p[k] & 0xC0) != 0x80)
            return 0;
    /* overlong 3- and 4-byte forms, surrogates, past U+10FFFF */
    if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0) || (c == 0xF0 && p[1] < 0x90) ||
        (c == 0xF4 && p[1] >= 0x90))
        return 0;
    return len;
}

size_t utf8_invalid_at(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        /* Eight ASCII bytes with no NUL at once: the common case. */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            bool high = w & UINT64_C(0x8080808080808080);
            bool zero = (w - UINT64_C(0x0101010101010101)) & ~w & UINT64_C(0x8080808080808080);
            if (high || zero)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        int len = utf8_seq_len(p + i, n - i);
        if (len == 0)
            return i;
        i += (size_t)len;
    }
    return n;
}

/* ---- JSON ---------------------------------------------------------------------------------- */

typedef struct J {
    const unsigned char *p, *start, *end;
    char *why;
    size_t cap;
} J;

static int jfail(J *j, const char *what)
{
    if (j->cap)
        snprintf(j->why, j->cap, "%s at offset %zu", what, (size_t)(j->p - j->start));
    return -1;
}

static void jws(J *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int hex4(const unsigned char *p, unsigned *out)
{
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned c = p[k], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            d = (c | 0x20) - 'a' + 10;
        else
            return -1;
        v = v * 16 + d;
    }
    *out = v;
    return 0;
}

static int jstring(J *j)
{
    j->p++; /* the opening quote */
    while (j->p < j->end) {
        unsigned c = *j->p;
        if (c == '"') {
            j->p++;
            return 0;
        }
        if (c < 0x20)
            return jfail(j, "control character in a string");
        if (c == '\\') {
            if (j->end - j->p < 2)
                break;
            unsigned e = j->p[1];
            if (e == 'u') {
                unsigned cp, lo;
                if (j->end - j->p < 6 || hex4(j->p + 2, &cp))
                    return jfail(j, "bad \\u escape");
                if (cp == 0)
                    return jfail(j, "\\u0000 cannot be converted to text");
                if (cp >= 0xDC00 && cp <= 0xDFFF)
                    return jfail(j, "a Unicode low surrogate must follow a high surrogate");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (j->end - j->p < 12 || j->p[6] != '\\' || j->p[7] != 'u' || hex4(j->p + 8, &lo) ||
                        lo < 0xDC00 || lo > 0xDFFF)
                        return jfail(j, "a Unicode high surrogate must not be followed by anything but a low surrogate");
                    j->p += 6;
                }
                j->p += 6;
                continue;
            }
            if (!strchr("\"\\/bfnrt", (int)e) || e == 0)
                return jfail(j, "bad escape in a string");
            j->p += 2;
            continue;
        }
        int len = utf8_seq_len(j->p, (size_t)(j->end - j->p));
        if (len == 0)
            return jfail(j, "invalid UTF-8");
        j->p += len;
    }
    return jfail(j, "unterminated string");
}

static int jnumber(J *j)
{
    if (j->p < j->end && *j->p == '-')
        j->p++;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9')
        return jfail(j, "bad number");
    if (*j->p == '0')
        j->p++;
    else
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
            j->p++;
    if (j->p < j->end && *j->p == '.') {
        j->p++;
        if (j->p >= j->end || *j->p < '0' || *j->p > '9')
            return jfail(j, "bad number");
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
            j->p++;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
            j->p++;
        if (j->p >= j->end || *j->p < '0' || *j->p > '9')
            return jfail(j, "bad number");
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
            j->p++;
    }
    return 0;
}

static int jvalue(J *j, int depth)
{
    jws(j);
    if (j->p >= j->end)
        return jfail(j, "unexpected end of input");
    unsigned c = *j->p;
    if (c == '"')
        return jstring(j);
    if (c == '-' || (c >= '0' && c <= '9'))
        return jnumber(j);
    static const char *const lits[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t l = strlen(lits[k]);
        if ((size_t)(j->end - j->p) >= l && memcmp(j->p, lits[k], l) == 0) {
            j->p += l;
            return 0;
        }
    }
    if (c != '[' && c != '{')
        return jfail(j, "unexpected character");
    if (depth >= JSON_MAX_DEPTH)
        return jfail(j, "JSON nested more than 64 levels deep");
    unsigned close = c == '[' ? ']' : '}';
    j->p++;
    jws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        return 0;
    }
    for (;;) {
        if (close == '}') {
            jws(j);
            if (j->p >= j->end || *j->p != '"')
                return jfail(j, j->p >= j->end ? "unexpected end of input" : "expected a string as an object key");
            if (jstring(j))
                return -1;
            jws(j);
            if (j->p >= j->end || *j->p != ':')
                return jfail(j, j->p >= j->end ? "unexpected end of input" : "expected \":\"");
            j->p++;
        }
        if (jvalue(j, depth + 1))
            return -1;
        jws(j);
        if (j->p >= j->end)
            return jfail(j, "unexpected end of input");
        if (*j->p == ',') {
            j->p++;
            continue;
        }
        if (*j->p == close) {
            j->p++;
            return 0;
        }
        return jfail(j, close == ']' ? "expected \",\" or \"]\"" : "expected \",\" or \"}\"");
    }
}

size_t json_number_len(const char *p, size_t n)
{
    J j = {(const unsigned char *)p, (const unsigned char *)p, (const unsigned char *)p + n, NULL, 0};
    if (jnumber(&j))
        return 0;
    return (size_t)(j.p - j.start);
}

int json_text_check(const char *p, size_t n, char *why, size_t cap)
{
    J j = {(const unsigned char *)p, (const unsigned char *)p, (const unsigned char *)p + n, why, cap};
    if (jvalue(&j, 0))
        return -1;
    jws(&j);
    if (j.p != j.end)
        return jfail(&j, "unexpected text after the value");
    return 0;
}
