/*
 * scalar_regex.c: regular expressions (~, ~*, !~, !~*, regexp_replace,
 * regexp_like, regexp_count, regexp_substr, regexp_extract) on PCRE2.
 *
 * Postgres's defaults are kept where PCRE2 can express them: '.' matches a
 * newline and '$' only matches at the very end (Postgres's ARE is not
 * newline-sensitive unless asked), text is UTF-8.
 *
 * Compiling is the expensive part, and a view calls the same function with
 * the same constant pattern for every row, on several threads. Each thread
 * keeps a small cache of compiled patterns keyed by pattern text and
 * options (thread-specific data, so no lock and no shared mutable state;
 * the key's destructor frees a thread's cache when it exits).
 *
 * A pathological pattern must not hang a view: every match runs with
 * PCRE2's match limit (steps) and heap limit (backtracking memory), and
 * hitting one is a 54000 error.
 */
#include "scalar_int.h"
#include "arena.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define RE_CACHE_SIZE 16
#define RE_MATCH_LIMIT 10000000u  /* backtracking steps of one search (PCRE2's default) */
#define RE_HEAP_LIMIT (64u << 10) /* KiB of backtracking frames: deep patterns on long texts fit */

typedef struct ReEntry {
    char *pat;
    size_t len;
    uint32_t opts;
    pcre2_code *code;
} ReEntry;

typedef struct ReCache {
    ReEntry e[RE_CACHE_SIZE];
    unsigned next;              /* round-robin victim */
    pcre2_match_context *mctx;
    pcre2_match_data *md;       /* sized for the largest group count seen */
    uint32_t md_pairs;
} ReCache;

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_free(void *p)
{
    ReCache *c = p;
    for (int i = 0; i < RE_CACHE_SIZE; i++) {
        free(c->e[i].pat);
        pcre2_code_free(c->e[i].code);
    }
    pcre2_match_context_free(c->mctx);
    pcre2_match_data_free(c->md);
    free(c);
}

static void cache_key_init(void) { pthread_key_create(&cache_key, cache_free); }

static ReCache *cache_get(WError *err)
{
    pthread_once(&cache_once, cache_key_init);
    ReCache *c = pthread_getspecific(cache_key);
    if (c)
        return c;
    c = calloc(1, sizeof *c);
    if (!c || !(c->mctx = pcre2_match_context_create(NULL))) {
        free(c);
        werr(err, SQLSTATE_OUT_OF_MEMORY, 0, "out of memory");
        return NULL;
    }
    pcre2_set_match_limit(c->mctx, RE_MATCH_LIMIT);
    pcre2_set_heap_limit(c->mctx, RE_HEAP_LIMIT);
    pthread_setspecific(cache_key, c);
    return c;
}

/* The compiled pattern (owned by the cache), or NULL with err set. */
static pcre2_code *re_compile(ReCache *c, const char *p, size_t len, uint32_t opts, WError *err)
{
    for (int i = 0; i < RE_CACHE_SIZE; i++)
        if (c->e[i].code && c->e[i].len == len && c->e[i].opts == opts && memcmp(c->e[i].pat, p, len) == 0)
            return c->e[i].code;
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)p, len, opts | PCRE2_UTF | PCRE2_DOTALL | PCRE2_DOLLAR_ENDONLY,
                                   &code, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        werr(err, SQLSTATE_INVALID_REGEX, 0, "invalid regular expression: %s (at offset %zu of the pattern)",
             (const char *)msg, (size_t)off);
        return NULL;
    }
    char *copy = malloc(len + 1);
    if (!copy) {
        pcre2_code_free(re);
        werr(err, SQLSTATE_OUT_OF_MEMORY, 0, "out of memory");
        return NULL;
    }
    memcpy(copy, p, len);
    copy[len] = 0;
    ReEntry *e = &c->e[c->next++ % RE_CACHE_SIZE];
    free(e->pat);
    pcre2_code_free(e->code);
    *e = (ReEntry){.pat = copy, .len = len, .opts = opts, .code = re};
    return re;
}

/* Postgres's flags text: 'i' caseless, 'c' case-sensitive, 'g' global (where allowed). */
static int parse_flags(const char *f, size_t n, bool allow_g, uint32_t *opts, bool *global, WError *err)
{
    for (size_t i = 0; i < n; i++) {
        if (f[i] == 'i')
            *opts |= PCRE2_CASELESS;
        else if (f[i] == 'c')
            *opts &= ~(uint32_t)PCRE2_CASELESS;
        else if (f[i] == 'g' && allow_g)
            *global = true;
        else if (f[i] == 'g')
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "regexp_like() does not support the \"global\" option");
        else
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "invalid regular expression option: \"%c\"", f[i]);
    }
    return 0;
}

int scalar_regex_check(ScalarFn fn, const char *p, size_t len, const char *flags, size_t flen, WError *err)
{
    uint32_t opts = fn == FN_RE_IMATCH || fn == FN_RE_NIMATCH ? PCRE2_CASELESS : 0;
    bool global = false;
    if (flags && parse_flags(flags, flen, fn == FN_REGEXP_REPLACE, &opts, &global, err))
        return -1;
    ReCache *c = cache_get(err);
    return c && re_compile(c, p, len, opts, err) ? 0 : -1;
}

/*
 * One match of re in s from byte start: the number of pairs (>0), 0 for no
 * match, -1 with err set for a limit or another failure.
 */
static int re_exec(ReCache *c, pcre2_code *re, const char *s, size_t n, size_t start, WError *err)
{
    uint32_t groups;
    pcre2_pattern_info(re, PCRE2_INFO_CAPTURECOUNT, &groups);
    if (!c->md || c->md_pairs < groups + 1) {
        pcre2_match_data_free(c->md);
        c->md_pairs = 0;
        if (!(c->md = pcre2_match_data_create(groups + 1, NULL)))
            return werr(err, SQLSTATE_OUT_OF_MEMORY, 0, "out of memory");
        c->md_pairs = groups + 1;
    }
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, start, 0, c->md, c->mctx);
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0,
                    "regular expression is too complex: the match exceeded its backtracking limit");
    if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return werr(err, rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21 ? SQLSTATE_BAD_ENCODING : SQLSTATE_INTERNAL,
                    0, "regular expression match failed: %s", (const char *)msg);
    }
    return rc == 0 ? (int)c->md_pairs : rc;
}

/* Where the next search starts after a match [m0, m1): past an empty match by one character. */
static size_t next_start(const char *s, size_t n, size_t m0, size_t m1)
{
    if (m1 > m0 || m1 >= n)
        return m1 + (m1 == m0);
    size_t i = m1 + 1;
    while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80)
        i++;
    return i;
}

/*
 * regexp_replace's replacement, as Postgres reads it: \1..\9 a group, \& the
 * whole match, \\ a backslash; '&' alone and any other escape are literal.
 */
static int append_replacement(Buf *b, const char *s, const PCRE2_SIZE *ov, int pairs, const char *r, size_t rn)
{
    for (size_t i = 0; i < rn; i++) {
        int g = -1;
        if (r[i] == '\\' && i + 1 < rn && r[i + 1] >= '1' && r[i + 1] <= '9')
            g = r[++i] - '0';
        else if (r[i] == '\\' && i + 1 < rn && r[i + 1] == '&')
            g = 0, i++;
        else if (r[i] == '\\' && i + 1 < rn && r[i + 1] == '\\')
            buf_putc(b, r[++i]);
        else
            buf_putc(b, r[i]);
        if (g >= 0 && g < pairs && ov[2 * g] != PCRE2_UNSET)
            buf_append(b, s + ov[2 * g], ov[2 * g + 1] - ov[2 * g]);
        if (b->len > SCALAR_MAX_STR)
            return -1;
    }
    return 0;
}

static int regexp_replace(ReCache *c, pcre2_code *re, bool global, const Value *args, Arena *a, Value *out, WError *err)
{
    const char *s = args[0].u.s.p, *r = args[2].u.s.p;
    size_t n = args[0].u.s.len, rn = args[2].u.s.len, start = 0, copied = 0;
    Buf b = BUF_INIT;
    int rc;
    while (start <= n && (rc = re_exec(c, re, s, n, start, err)) > 0) {
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        buf_append(&b, s + copied, ov[0] - copied);
        if (append_replacement(&b, s, ov, rc, r, rn)) {
            buf_free(&b);
            return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "result of regexp_replace is too long");
        }
        copied = ov[1];
        if (!global)
            break;
        start = next_start(s, n, ov[0], ov[1]);
    }
    if (rc < 0) {
        buf_free(&b);
        return -1;
    }
    buf_append(&b, s + copied, n - copied);
    if (b.len > SCALAR_MAX_STR) {
        buf_free(&b);
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "result of regexp_replace is too long");
    }
    char *p = arena_alloc(a, b.len + 1);
    if (b.len)
        memcpy(p, b.data, b.len);
    p[b.len] = 0;
    scalar_set_str(out, p, b.len);
    buf_free(&b);
    return 0;
}

int scalar_regex_call(ScalarFn fn, TypeId result, int n, const Value *args, Arena *a, Value *out, WError *err)
{
    (void)result;
    ReCache *c = cache_get(err);
    if (!c)
        return -1;
    uint32_t opts = fn == FN_RE_IMATCH || fn == FN_RE_NIMATCH ? PCRE2_CASELESS : 0;
    bool global = false;
    if ((fn == FN_REGEXP_REPLACE && n == 4) || (fn == FN_REGEXP_LIKE && n == 3)) {
        const Value *f = &args[n - 1];
        if (parse_flags(f->u.s.p, f->u.s.len, fn == FN_REGEXP_REPLACE, &opts, &global, err))
            return -1;
    }
    pcre2_code *re = re_compile(c, args[1].u.s.p, args[1].u.s.len, opts, err);
    if (!re)
        return -1;
    const char *s = args[0].u.s.p;
    size_t len = args[0].u.s.len;
    int rc;
    switch (fn) {
    case FN_RE_MATCH: case FN_RE_IMATCH: case FN_RE_NMATCH: case FN_RE_NIMATCH: case FN_REGEXP_LIKE:
        if ((rc = re_exec(c, re, s, len, 0, err)) < 0)
            return -1;
        out->u.i = (rc > 0) != (fn == FN_RE_NMATCH || fn == FN_RE_NIMATCH);
        return 0;
    case FN_REGEXP_REPLACE:
        return regexp_replace(c, re, global, args, a, out, err);
    case FN_REGEXP_COUNT: {
        int64_t count = 0;
        size_t start = 0;
        while (start <= len && (rc = re_exec(c, re, s, len, start, err)) > 0) {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
            count++;
            start = next_start(s, len, ov[0], ov[1]);
        }
        if (rc < 0)
            return -1;
        out->u.i = count;
        return 0;
    }
    case FN_REGEXP_SUBSTR:
    case FN_REGEXP_EXTRACT: {
        int64_t g = fn == FN_REGEXP_EXTRACT && n == 3 ? args[2].u.i : 0;
        uint32_t groups;
        pcre2_pattern_info(re, PCRE2_INFO_CAPTURECOUNT, &groups);
        if (g < 0 || g > (int64_t)groups) {
            /* Flink returns NULL for a group the pattern does not have. */
            *out = value_null(TYPE_TEXT);
            return 0;
        }
        if ((rc = re_exec(c, re, s, len, 0, err)) < 0)
            return -1;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        if (rc == 0 || g >= rc || ov[2 * g] == PCRE2_UNSET) {
            *out = value_null(TYPE_TEXT);
            return 0;
        }
        scalar_set_str(out, s + ov[2 * g], ov[2 * g + 1] - ov[2 * g]);
        return 0;
    }
    default:
        return werr(err, SQLSTATE_INTERNAL, 0, "unknown function id %d", (int)fn);
    }
}
