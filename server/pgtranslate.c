/*
 * pgtranslate.c: Postgres SQL to SQLite SQL, for catalog queries.
 *
 * Clients (psql's \d family, drivers, GUI tools) introspect a server with
 * queries over pg_catalog and information_schema written in Postgres'
 * dialect. pgcatalog.c answers them from SQLite; this file rewrites the
 * dialect, token by token, with a small fixed set of rules. It does not
 * parse SQL: each rule looks at a token, a few tokens of look-ahead, and for
 * postfix constructs (::casts, [subscripts]) at the operand just written,
 * which is a primary expression (a name, a literal, a call or a
 * parenthesized expression) because :: and [] bind tightest. Everything the
 * rules do not touch is passed through, so what SQLite cannot run is
 * reported by SQLite.
 *
 * The rules:
 *   - unquoted identifiers are folded to lower case (Postgres folds them;
 *     SQLite names result columns by the text as written);
 *   - E'..' strings are decoded, $$..$$ strings become '..' literals, $n
 *     parameters become ?n;
 *   - OPERATOR(schema.op) is op; ~ ~* !~ !~* become REGEXP, MATCH, NOT
 *     REGEXP, NOT MATCH (SQLite's overridable infix operators, bound by
 *     pgcatalog.c to POSIX regular expressions, the second without case);
 *     ILIKE becomes GLOB (bound to case-insensitive LIKE; LIKE itself is
 *     made case-sensitive as in Postgres); != is <>;
 *   - COLLATE name is dropped (every comparison is bytewise, as "C");
 *   - pg_catalog.f(...) is f(...) (SQLite functions have no schema), and
 *     CAST(x AS pg_catalog.t) is CAST(x AS t);
 *     pg_catalog.t and information_schema.t stay: they are attached
 *     databases of those names;
 *   - x::type is CAST(x AS INTEGER|REAL|TEXT) for numbers and text types,
 *     pg_bool(x) for boolean, regclass(x) / regtype(x) / ... for the reg*
 *     types (text in: the oid; oid in: the name), regclass_oid(x) when the
 *     cast is followed by ::oid; casts to other types (arrays, timestamps)
 *     keep x as it is;
 *   - ARRAY[a, b] is pg_array(a, b) (arrays are Postgres' text form
 *     '{a,b}'); ARRAY(SELECT e FROM ...) is (SELECT pg_array_agg(e) FROM ...);
 *     x[i] is pg_array_get(x, i); x = ANY(arr) is x IN (SELECT value FROM
 *     json_each(pg_array_json(arr))), x <> ALL(...) the same with NOT IN,
 *     and x = ANY(SELECT ...) is x IN (SELECT ...);
 *   - unnest(a) t, generate_series(a, b) t and pg_options_to_table(o) in a
 *     FROM list become subqueries over json_each with the column names
 *     Postgres gives them (t, or c of an alias with a column, t(c)); any other call there, f(x) s, returns one value
 *     and becomes (SELECT f(x) AS s) AS s (Grafana's search_path expansion);
 *   - IS [NOT] DISTINCT FROM is IS [NOT] with the sense inverted;
 *     trim(LEADING|TRAILING|BOTH c FROM s) is pg_trim('...', c, s);
 *     a word after AS (outside CAST) is quoted: Postgres takes any word as
 *     a column label (AS default), SQLite not;
 *     json_build_object is json_object;
 *     string_agg is group_concat; array_agg is pg_array_agg; left( and
 *     right( are pg_left( and pg_right( (LEFT is a keyword in SQLite);
 *   - current_user, session_user, current_role, current_catalog and a bare
 *     current_schema become calls of functions of those names, and so does
 *     a bare user (Postgres' synonym of current_user).
 */
#include "pgcatalog.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum { TK_IDENT, TK_QIDENT, TK_STRING, TK_NUMBER, TK_PARAM, TK_OP, TK_PUNCT } TokKind;

typedef struct Tok {
    TokKind k;
    int pos;            /* byte offset in the input */
    const char *text;   /* output spelling (in the arena) */
} Tok;

typedef struct Lexer {
    const char *s;
    int len, pos;
} Lexer;

/* Skips blanks and comments; returns false at the end. */
static bool skip_space(Lexer *lx)
{
    while (lx->pos < lx->len) {
        char c = lx->s[lx->pos];
        if (isspace((unsigned char)c)) {
            lx->pos++;
        } else if (c == '-' && lx->pos + 1 < lx->len && lx->s[lx->pos + 1] == '-') {
            while (lx->pos < lx->len && lx->s[lx->pos] != '\n')
                lx->pos++;
        } else if (c == '/' && lx->pos + 1 < lx->len && lx->s[lx->pos + 1] == '*') {
            int depth = 1;
            lx->pos += 2;
            while (lx->pos < lx->len && depth > 0) {
                if (lx->s[lx->pos] == '/' && lx->pos + 1 < lx->len && lx->s[lx->pos + 1] == '*')
                    depth++, lx->pos += 2;
                else if (lx->s[lx->pos] == '*' && lx->pos + 1 < lx->len && lx->s[lx->pos + 1] == '/')
                    depth--, lx->pos += 2;
                else
                    lx->pos++;
            }
        } else {
            return true;
        }
    }
    return false;
}

static bool ident_start(char c) { return isalpha((unsigned char)c) || c == '_' || (unsigned char)c >= 0x80; }
static bool ident_char(char c) { return ident_start(c) || isdigit((unsigned char)c) || c == '$'; }

/* A SQLite string literal holding s[0..n). */
static const char *sqlite_quote(Arena *a, const char *s, size_t n)
{
    Buf b = BUF_INIT;
    buf_putc(&b, '\'');
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\'')
            buf_putc(&b, '\'');
        buf_putc(&b, s[i]);
    }
    buf_putc(&b, '\'');
    const char *r = arena_strndup(a, b.data, b.len);
    buf_free(&b);
    return r;
}

/* Reads one token. Returns 0, 1 at the end, -1 on an unterminated literal. */
static int lex(Lexer *lx, Arena *a, Tok *t)
{
    if (!skip_space(lx))
        return 1;
    const char *s = lx->s;
    int p = lx->pos, n = lx->len;
    t->pos = p;
    char c = s[p];
    if ((c == 'e' || c == 'E') && p + 1 < n && s[p + 1] == '\'') {
        /* E'...': backslash escapes. */
        Buf b = BUF_INIT;
        int i = p + 2;
        for (; i < n; i++) {
            if (s[i] == '\\' && i + 1 < n) {
                char e = s[++i];
                buf_putc(&b, e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b' : e == 'f' ? '\f' : e);
            } else if (s[i] == '\'') {
                if (i + 1 < n && s[i + 1] == '\'') {
                    buf_putc(&b, '\'');
                    i++;
                } else {
                    break;
                }
            } else {
                buf_putc(&b, s[i]);
            }
        }
        if (i >= n) {
            buf_free(&b);
            return -1;
        }
        t->k = TK_STRING;
        t->text = sqlite_quote(a, b.data ? b.data : "", b.len);
        buf_free(&b);
        lx->pos = i + 1;
        return 0;
    }
    if (ident_start(c)) {
        int i = p;
        while (i < n && ident_char(s[i]))
            i++;
        char *id = arena_strndup(a, s + p, (size_t)(i - p));
        for (char *q = id; *q; q++)
            *q = (char)tolower((unsigned char)*q);
        t->k = TK_IDENT;
        t->text = id;
        lx->pos = i;
        return 0;
    }
    if (c == '\'' || c == '"') {
        int i = p + 1;
        for (;; i++) {
            if (i >= n)
                return -1;
            if (s[i] == c) {
                if (i + 1 < n && s[i + 1] == c) {
                    i++;
                    continue;
                }
                break;
            }
        }
        t->k = c == '\'' ? TK_STRING : TK_QIDENT;
        t->text = arena_strndup(a, s + p, (size_t)(i + 1 - p));
        lx->pos = i + 1;
        return 0;
    }
    if (c == '$' && p + 1 < n && isdigit((unsigned char)s[p + 1])) {
        int i = p + 1;
        while (i < n && isdigit((unsigned char)s[i]))
            i++;
        t->k = TK_PARAM;
        t->text = arena_printf(a, "?%.*s", i - p - 1, s + p + 1);
        lx->pos = i;
        return 0;
    }
    if (c == '$') {
        /* $tag$ ... $tag$ */
        int i = p + 1;
        while (i < n && s[i] != '$' && ident_char(s[i]))
            i++;
        if (i < n && s[i] == '$') {
            int tag = i + 1 - p;
            const char *end = NULL;
            for (int k = i + 1; k + tag <= n; k++)
                if (memcmp(s + k, s + p, (size_t)tag) == 0) {
                    end = s + k;
                    break;
                }
            if (!end)
                return -1;
            t->k = TK_STRING;
            t->text = sqlite_quote(a, s + i + 1, (size_t)(end - (s + i + 1)));
            lx->pos = (int)(end - s) + tag;
            return 0;
        }
    }
    if (isdigit((unsigned char)c) || (c == '.' && p + 1 < n && isdigit((unsigned char)s[p + 1]))) {
        int i = p;
        while (i < n && (isalnum((unsigned char)s[i]) || s[i] == '.' ||
                         ((s[i] == '+' || s[i] == '-') && (s[i - 1] == 'e' || s[i - 1] == 'E'))))
            i++;
        t->k = TK_NUMBER;
        t->text = arena_strndup(a, s + p, (size_t)(i - p));
        lx->pos = i;
        return 0;
    }
    if (strchr("(),;[].", c)) {
        t->k = TK_PUNCT;
        t->text = arena_strndup(a, s + p, 1);
        lx->pos = p + 1;
        return 0;
    }
    if (c == ':' && p + 1 < n && s[p + 1] == ':') {
        t->k = TK_OP;
        t->text = "::";
        lx->pos = p + 2;
        return 0;
    }
    /* Operators: the longest run of operator characters, as Postgres does. */
    int i = p;
    while (i < n && strchr("+-*/<>=~!@#%^&|`?:", s[i]))
        i++;
    if (i == p)
        i = p + 1;
    t->k = TK_OP;
    t->text = arena_strndup(a, s + p, (size_t)(i - p));
    lx->pos = i;
    return 0;
}

/* ---- splitting and routing ---- */

int pgt_split(const char *sql, int *starts, int *ends, int max)
{
    Arena *a = arena_new(0);
    Lexer lx = {sql, (int)strlen(sql), 0};
    Tok t;
    int n = 0, depth = 0, start = -1, last_end = 0, rc;
    while ((rc = lex(&lx, a, &t)) == 0) {
        if (t.k == TK_PUNCT && t.text[0] == ';' && depth == 0) {
            if (start >= 0) {
                if (n == max) {
                    n = -1;
                    break;
                }
                starts[n] = start;
                ends[n++] = last_end;
            }
            start = -1;
            continue;
        }
        if (t.k == TK_PUNCT && (t.text[0] == '(' || t.text[0] == '['))
            depth++;
        else if (t.k == TK_PUNCT && (t.text[0] == ')' || t.text[0] == ']') && depth > 0)
            depth--;
        if (start < 0)
            start = t.pos;
        last_end = lx.pos;
    }
    if (rc < 0 && start < 0)
        start = t.pos;
    if (rc < 0)
        last_end = lx.len;   /* an unterminated literal: the rest is one statement */
    if (n >= 0 && start >= 0) {
        if (n == max)
            n = -1;
        else {
            starts[n] = start;
            ends[n++] = last_end;
        }
    }
    arena_free(a);
    return n;
}

static bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcasecmp(s, *list) == 0)
            return true;
    return false;
}

static const char *const CATALOG_FUNCS[] = {
    "version", "current_database", "current_schema", "current_schemas", "current_setting",
    "format_type", "has_table_privilege", "has_schema_privilege", "has_database_privilege",
    "has_column_privilege", "has_any_column_privilege", "has_function_privilege",
    "obj_description", "col_description", "shobj_description", "to_regclass", "to_regtype",
    "quote_ident", "array_to_string", "inet_server_addr", "inet_server_port", "txid_current",
    NULL};

static const char *const REG_TYPES[] = {"regclass", "regtype", "regproc", "regprocedure", "regnamespace",
                                        "regrole", "regoper", "regoperator", NULL};

static const char *const SESSION_WORDS[] = {"current_user", "session_user", "current_role", "current_catalog",
                                             "current_schema", NULL};

/* Words that end a FROM list at their parenthesis level. */
static const char *const FROM_ENDS[] = {"select", "where", "group", "having", "order", "limit", "offset", "union",
                                        "intersect", "except", "window", "on", "using", "returning", "fetch",
                                        "for", "set", "values", NULL};

/* Parenthesis levels whose FROM lists are tracked; deeper ones share the last. */
#define ROUTE_LEVELS 64

static bool is_punct(const Tok *t, char c)
{
    return t->k == TK_PUNCT && t->text[0] == c;
}

/* The routing reads the tokens with one of look-behind (before) and one of
 * look-ahead (next) around each name: a name is a relation by where it
 * stands (after FROM, JOIN, TABLE or a FROM list's comma), a function by
 * the parenthesis after it, a schema by the dot after it. */
bool pgt_names_catalog(const char *sql, int start, int end)
{
    Arena *a = arena_new(0);
    Lexer lx = {sql, end, start};
    Tok before = {TK_PUNCT, 0, ""}, cur = {TK_PUNCT, 0, ""}, next;
    bool in_from[ROUTE_LEVELS] = {false}; /* inside a FROM list, per parenthesis level */
    int level = 0;
    bool hit = false, more = true;
    while (!hit && more) {
        more = lex(&lx, a, &next) == 0;
        if (!more)
            next = (Tok){TK_PUNCT, end, ""};
        if (cur.k == TK_IDENT && !is_punct(&before, '.')) {
            const char *w = cur.text;
            bool pg = !strncmp(w, "pg_", 3) && strcmp(w, "pg_typeof") != 0;   /* pg_typeof: the planner's */
            if (is_punct(&next, '.') && (!strcmp(w, "pg_catalog") || !strcmp(w, "information_schema")))
                hit = true;
            else if (is_punct(&next, '(') && (pg || in_list(w, CATALOG_FUNCS)))
                hit = true;
            else if (in_list(w, SESSION_WORDS) || in_list(w, REG_TYPES))
                hit = true;
            else if (pg && before.k == TK_IDENT &&
                     (!strcmp(before.text, "from") || !strcmp(before.text, "join") || !strcmp(before.text, "table")))
                hit = true;
            else if (pg && is_punct(&before, ',') && in_from[level])
                hit = true;
            if (!strcmp(w, "from"))
                in_from[level] = true;
            else if (in_list(w, FROM_ENDS))
                in_from[level] = false;
        } else if (is_punct(&cur, '(')) {
            if (level < ROUTE_LEVELS - 1)
                level++;
            in_from[level] = false;
        } else if (is_punct(&cur, ')')) {
            if (level > 0)
                level--;
        }
        before = cur;
        cur = next;
    }
    arena_free(a);
    return hit;
}

bool pgt_is_query(const char *sql, int start, int end)
{
    Arena *a = arena_new(0);
    Lexer lx = {sql, end, start};
    Tok t;
    bool q = lex(&lx, a, &t) == 0 &&
             ((t.k == TK_IDENT && (!strcmp(t.text, "select") || !strcmp(t.text, "with") ||
                                   !strcmp(t.text, "values") || !strcmp(t.text, "table"))) ||
              (t.k == TK_PUNCT && t.text[0] == '('));
    arena_free(a);
    return q;
}

/* ---- translation ---- */

/* A pending close: what to write for the ')' or ']' that ends an open
 * bracket, and, for constructs that reorder around a FROM at their own
 * level (ARRAY(SELECT ...), trim(... FROM ...)), what to write there. */
typedef struct Frame {
    const char *close;
    const char *at_from;   /* NULL once used, or when not wanted */
    char bracket;          /* '(' or '[' */
    bool cast;             /* the parentheses of CAST(x AS type) */
} Frame;

typedef struct Tr {
    Arena *a;
    Tok *in;
    int n_in;
    int *match;            /* index of the matching bracket, -1 if none */
    bool *skip;            /* input tokens already consumed by a rule */
    const char **out;
    int n_out, cap_out;
    Frame *stack;
    int depth, cap_stack;
} Tr;

static void emit(Tr *t, const char *s)
{
    if (t->n_out == t->cap_out) {
        int cap = t->cap_out ? t->cap_out * 2 : 256;
        const char **o = arena_alloc(t->a, sizeof *o * (size_t)cap);
        if (t->n_out)
            memcpy(o, t->out, sizeof *o * (size_t)t->n_out);
        t->out = o;
        t->cap_out = cap;
    }
    t->out[t->n_out++] = s;
}

/* Emits each space-separated word of s as its own token, so brackets stay
 * separate tokens for operand_start. */
static void emit_words(Tr *t, const char *s)
{
    while (*s) {
        while (*s == ' ')
            s++;
        const char *e = s;
        while (*e && *e != ' ')
            e++;
        if (e > s)
            emit(t, arena_strndup(t->a, s, (size_t)(e - s)));
        s = e;
    }
}

/* Inserts the words of s before output token j. */
static void insert_words(Tr *t, int j, const char *s)
{
    int tail = t->n_out - j;
    const char **saved = arena_alloc(t->a, sizeof *saved * (size_t)(tail ? tail : 1));
    memcpy(saved, t->out + j, sizeof *saved * (size_t)tail);
    t->n_out = j;
    emit_words(t, s);
    for (int i = 0; i < tail; i++)
        emit(t, saved[i]);
}

static void push(Tr *t, char bracket, const char *close, const char *at_from)
{
    if (t->depth == t->cap_stack) {
        int cap = t->cap_stack ? t->cap_stack * 2 : 32;
        Frame *f = arena_alloc(t->a, sizeof *f * (size_t)cap);
        if (t->depth)
            memcpy(f, t->stack, sizeof *f * (size_t)t->depth);
        t->stack = f;
        t->cap_stack = cap;
    }
    t->stack[t->depth++] = (Frame){close, at_from, bracket, false};
}

/* Words that end an operand when walking back (they cannot name a function). */
static const char *const KEYWORDS[] = {
    "select", "from", "where", "and", "or", "not", "in", "on", "as", "by", "when", "then", "else", "case",
    "exists", "join", "values", "is", "like", "glob", "regexp", "match", "between", "having", "limit",
    "offset", "union", "all", "any", "distinct", "using", "end", "group", "order", "with", "escape", NULL};

static bool is_name(const char *s)
{
    return (ident_start(s[0]) && !in_list(s, KEYWORDS)) || s[0] == '"';
}

/* Where the primary expression that ends the output begins, or -1. */
static int operand_start(Tr *t)
{
    int j = t->n_out - 1;
    if (j < 0)
        return -1;
    const char *s = t->out[j];
    if (!strcmp(s, ")") || !strcmp(s, "]")) {
        const char *open = s[0] == ')' ? "(" : "[";
        int d = 0;
        for (; j >= 0; j--) {
            if (!strcmp(t->out[j], s))
                d++;
            else if (!strcmp(t->out[j], open) && --d == 0)
                break;
        }
        if (j < 0)
            return -1;
        if (j > 0 && is_name(t->out[j - 1]))
            j--;
    } else if (!(is_name(s) || s[0] == '\'' || s[0] == '?' || isdigit((unsigned char)s[0]) ||
                 !strcmp(s, "true") || !strcmp(s, "false") || !strcmp(s, "null"))) {
        return -1;
    }
    while (j >= 2 && !strcmp(t->out[j - 1], ".") && is_name(t->out[j - 2]))
        j -= 2;
    return j;
}

/* Index of the first input token after i that is not skipped, or n_in. */
static int next_in(Tr *t, int i)
{
    for (i++; i < t->n_in && t->skip[i]; i++)
        ;
    return i;
}

static bool at(Tr *t, int i, const char *w)
{
    return i < t->n_in && (t->in[i].k == TK_IDENT || t->in[i].k == TK_PUNCT || t->in[i].k == TK_OP) &&
           strcmp(t->in[i].text, w) == 0;
}

/* The cast at input token i ("::"): parses the type name after it, marks
 * its tokens consumed, and rewrites the operand already written. */
static int cast(Tr *t, int i, WError *err)
{
    int j = operand_start(t);
    if (j < 0)
        return werr(err, SQLSTATE_SYNTAX_ERROR, t->in[i].pos + 1, "syntax error at or near \"::\"");
    int k = i + 1;
    if (at(t, k, "pg_catalog") && at(t, k + 1, "."))
        k += 2;
    if (k >= t->n_in || (t->in[k].k != TK_IDENT && t->in[k].k != TK_QIDENT))
        return werr(err, SQLSTATE_SYNTAX_ERROR, t->in[i].pos + 1, "syntax error at or near \"::\"");
    const char *ty = t->in[k].k == TK_QIDENT ? arena_strndup(t->a, t->in[k].text + 1, strlen(t->in[k].text) - 2)
                                            : t->in[k].text;
    k++;
    /* Multi-word type names and modifiers. */
    if ((!strcmp(ty, "double") && at(t, k, "precision")) || (!strcmp(ty, "character") && at(t, k, "varying")) ||
        (!strcmp(ty, "bit") && at(t, k, "varying")))
        k++;
    if (at(t, k, "(") && t->match[k] > k)
        k = t->match[k] + 1;
    if ((at(t, k, "with") || at(t, k, "without")) && at(t, k + 1, "time") && at(t, k + 2, "zone"))
        k += 3;
    bool array = false;
    while (at(t, k, "[") && t->match[k] > k) {
        array = true;
        k = t->match[k] + 1;
    }
    for (int m = i; m < k; m++)
        t->skip[m] = true;
    static const char *const ints[] = {"int", "int2", "int4", "int8", "integer", "smallint", "bigint", "oid",
                                       "xid", "cid", NULL};
    static const char *const reals[] = {"float4", "float8", "real", "double", "numeric", "decimal", NULL};
    static const char *const texts[] = {"text", "varchar", "char", "character", "name", "bpchar", NULL};
    if (array)
        return 0;
    if (in_list(ty, REG_TYPES)) {
        /* reg* then ::oid (or an integer type): the oid itself. */
        int k2 = k;
        if (at(t, k2, "::")) {
            int k3 = k2 + 1;
            if (at(t, k3, "pg_catalog") && at(t, k3 + 1, "."))
                k3 += 2;
            if (k3 < t->n_in && t->in[k3].k == TK_IDENT && in_list(t->in[k3].text, ints)) {
                for (int m = k2; m <= k3; m++)
                    t->skip[m] = true;
                insert_words(t, j, arena_printf(t->a, "%s_oid (", ty));
                emit(t, ")");
                return 0;
            }
        }
        insert_words(t, j, arena_printf(t->a, "%s (", ty));
        emit(t, ")");
    } else if (in_list(ty, ints)) {
        insert_words(t, j, "CAST (");
        emit_words(t, "AS INTEGER )");
    } else if (in_list(ty, reals)) {
        insert_words(t, j, "CAST (");
        emit_words(t, "AS REAL )");
    } else if (in_list(ty, texts)) {
        insert_words(t, j, "CAST (");
        emit_words(t, "AS TEXT )");
    } else if (!strcmp(ty, "bool") || !strcmp(ty, "boolean")) {
        insert_words(t, j, "pg_bool (");
        emit(t, ")");
    }
    return 0;
}

/* Words after a FROM-list function that cannot be its alias. */
static const char *const NOT_ALIAS[] = {
    "where", "on", "join", "left", "right", "inner", "outer", "full", "cross", "natural", "order", "group",
    "having", "limit", "offset", "union", "except", "intersect", "window", "using", "with", NULL};

/* The alias after a FROM-list function call whose '(' is input token open
 * ([AS] name [(column)]; the tokens are skipped), or fn when it has none.
 * *col is the column's name: the one in parentheses (pgjdbc's type lookup
 * writes generate_series(...) AS s(r)), else the alias, as Postgres names it. */
static const char *from_alias(Tr *t, int open, const char *fn, const char **col)
{
    int close = t->match[open];
    int k = close + 1;
    *col = fn;
    if (at(t, k, "as"))
        k++;
    if (k < t->n_in && ((t->in[k].k == TK_IDENT && !in_list(t->in[k].text, NOT_ALIAS)) || t->in[k].k == TK_QIDENT)) {
        int last = k;
        *col = t->in[k].text;
        if (k + 3 < t->n_in && is_punct(&t->in[k + 1], '(') && t->match[k + 1] == k + 3 &&
            (t->in[k + 2].k == TK_IDENT || t->in[k + 2].k == TK_QIDENT)) {
            *col = t->in[k + 2].text;
            last = k + 3;
        }
        for (int m = close + 1; m <= last; m++)
            t->skip[m] = true;
        return t->in[k].text;
    }
    return fn;
}

/* A set-returning function in a FROM list, at input token i (its name). */
static void table_function(Tr *t, int i, int open)
{
    const char *fn = t->in[i].text, *col;
    const char *name = from_alias(t, open, fn, &col);
    if (!strcmp(fn, "pg_options_to_table")) {
        emit_words(t, "( SELECT key AS option_name , value AS option_value FROM json_each ( pg_options_json (");
    } else {
        emit_words(t, arena_printf(t->a, "( SELECT value AS %s FROM json_each ( pg_%s_json (", col, fn));
    }
    t->skip[open] = true;   /* the '(' is written above */
    push(t, '(', arena_printf(t->a, ") ) ) AS %s", name), NULL);
}

/* Whether input token i is at the top level of a FROM list (not inside a
 * call's arguments): the nearest clause word before it, at its own
 * bracket depth, is FROM or JOIN. */
static bool in_from_list(const Tr *t, int i)
{
    static const char *const CLAUSES[] = {"select", "where", "on", "group", "order", "having", "limit", "values",
                                          "using", "set", "returning", NULL};
    int depth = 0;
    for (int k = i - 1; k >= 0; k--) {
        const Tok *x = &t->in[k];
        if (is_punct(x, ')') || is_punct(x, ']')) {
            depth++;
        } else if (is_punct(x, '(') || is_punct(x, '[')) {
            if (depth == 0)
                return false;
            depth--;
        } else if (depth == 0 && x->k == TK_IDENT) {
            if (!strcmp(x->text, "from") || !strcmp(x->text, "join"))
                return true;
            if (in_list(x->text, CLAUSES))
                return false;
        }
    }
    return false;
}

/* A function that returns one value, in a FROM list (Postgres makes it a
 * one-row relation whose column is named by the alias): a subquery. */
static void scalar_in_from(Tr *t, int i, int open)
{
    const char *fn = t->in[i].text, *col;
    const char *name = from_alias(t, open, fn, &col);
    emit_words(t, "( SELECT");
    emit(t, fn);
    emit(t, "(");
    t->skip[open] = true;   /* the '(' is written above */
    push(t, '(', arena_printf(t->a, ") AS %s ) AS %s", col, name), NULL);
}

int pgt_translate(const char *sql, int len, Arena *a, char **out, WError *err)
{
    Tr t = {.a = a};
    Lexer lx = {sql, len, 0};
    int cap = 64, rc;
    t.in = arena_alloc(a, sizeof(Tok) * (size_t)cap);
    Tok tok;
    while ((rc = lex(&lx, a, &tok)) == 0) {
        if (t.n_in == cap) {
            Tok *n = arena_alloc(a, sizeof(Tok) * (size_t)cap * 2);
            memcpy(n, t.in, sizeof(Tok) * (size_t)cap);
            t.in = n;
            cap *= 2;
        }
        t.in[t.n_in++] = tok;
    }
    if (rc < 0)
        return werr(err, SQLSTATE_SYNTAX_ERROR, tok.pos + 1, "unterminated quoted string or identifier");
    /* Matching brackets, for look-ahead. */
    t.match = arena_alloc(a, sizeof(int) * (size_t)(t.n_in + 1));
    t.skip = arena_zalloc(a, sizeof(bool) * (size_t)(t.n_in + 1));
    int *st = arena_alloc(a, sizeof(int) * (size_t)(t.n_in + 1)), sp = 0;
    for (int i = 0; i < t.n_in; i++) {
        t.match[i] = -1;
        if (is_punct(&t.in[i], '(') || is_punct(&t.in[i], '[')) {
            st[sp++] = i;
        } else if (is_punct(&t.in[i], ')') || is_punct(&t.in[i], ']')) {
            char open = t.in[i].text[0] == ')' ? '(' : '[';
            if (sp == 0 || t.in[st[sp - 1]].text[0] != open)
                return werr(err, SQLSTATE_SYNTAX_ERROR, t.in[i].pos + 1, "syntax error at or near \"%s\"", t.in[i].text);
            t.match[st[--sp]] = i;
            t.match[i] = st[sp];
        }
    }
    if (sp)
        return werr(err, SQLSTATE_SYNTAX_ERROR, t.in[st[sp - 1]].pos + 1, "syntax error at end of input");

    for (int i = 0; i < t.n_in; i++) {
        if (t.skip[i])
            continue;
        Tok *k = &t.in[i];
        const char *w = k->text;
        int nx = next_in(&t, i);
        Tok *next = nx < t.n_in ? &t.in[nx] : NULL;
        const char *prev = t.n_out ? t.out[t.n_out - 1] : "";
        if (k->k == TK_IDENT) {
            bool call = next && is_punct(next, '(');
            bool qualified = !strcmp(prev, ".");
            if (!strcmp(w, "operator") && call) {
                /* OPERATOR(pg_catalog.~): the last operator inside. */
                int close = t.match[nx];
                int op = -1;
                for (int m = nx + 1; m < close; m++)
                    if (t.in[m].k == TK_OP)
                        op = m;
                if (op < 0)
                    return werr(err, SQLSTATE_SYNTAX_ERROR, k->pos + 1, "syntax error at or near \"OPERATOR\"");
                for (int m = i; m <= close; m++)
                    t.skip[m] = true;
                t.skip[op] = false;
                i = op - 1;
                continue;
            }
            if ((!strcmp(w, "pg_catalog") || !strcmp(w, "information_schema")) && next && is_punct(next, '.') &&
                nx + 2 < t.n_in && t.in[nx + 1].k == TK_IDENT &&
                (is_punct(&t.in[nx + 2], '(') || !strcasecmp(prev, "as"))) {
                t.skip[nx] = true;   /* a function, or the type of CAST(x AS pg_catalog.t): drop the schema */
                continue;
            }
            if (!strcmp(w, "collate") && next && (next->k == TK_IDENT || next->k == TK_QIDENT)) {
                /* COLLATE name[.name...]: names only, so no bracket is dropped. */
                int m = nx + 1;
                while (m + 1 < t.n_in && is_punct(&t.in[m], '.') &&
                       (t.in[m + 1].k == TK_IDENT || t.in[m + 1].k == TK_QIDENT))
                    m += 2;
                for (int q = nx; q < m; q++)
                    t.skip[q] = true;
                continue;
            }
            if (!strcmp(w, "ilike")) {
                emit(&t, "GLOB");
                continue;
            }
            if (!strcmp(w, "is") && next) {
                int m = nx;
                bool neg = at(&t, m, "not");
                if (neg)
                    m++;
                if (at(&t, m, "distinct") && at(&t, m + 1, "from")) {
                    for (int q = nx; q <= m + 1; q++)
                        t.skip[q] = true;
                    emit_words(&t, neg ? "IS" : "IS NOT");
                    continue;
                }
            }
            if (!strcmp(w, "array") && next && is_punct(next, '[')) {
                emit_words(&t, "pg_array (");
                t.skip[nx] = true;
                push(&t, '[', ")", NULL);
                continue;
            }
            if (!strcmp(w, "array") && call) {
                int m = nx + 1;
                if (!at(&t, m, "select"))
                    return werr(err, SQLSTATE_NOT_SUPPORTED, k->pos + 1, "feature not supported: ARRAY(...) without SELECT");
                t.skip[nx] = t.skip[m] = true;
                emit_words(&t, "( SELECT pg_array_agg (");
                push(&t, '(', ")", ") FROM");
                continue;
            }
            if ((!strcmp(w, "any") || !strcmp(w, "some") || !strcmp(w, "all")) && call) {
                bool all = !strcmp(w, "all");
                const char *op = t.n_out ? t.out[t.n_out - 1] : "";
                if (!all && !strcmp(op, "="))
                    t.out[t.n_out - 1] = "IN";
                else if (all && (!strcmp(op, "<>") || !strcmp(op, "!="))) {
                    t.out[t.n_out - 1] = "NOT";
                    emit(&t, "IN");
                }
                else
                    return werr(err, SQLSTATE_NOT_SUPPORTED, k->pos + 1, "feature not supported: %s %s (...)", op,
                                all ? "ALL" : "ANY");
                t.skip[nx] = true;
                if (at(&t, nx + 1, "select") || at(&t, nx + 1, "with")) {
                    emit(&t, "(");
                    push(&t, '(', ")", NULL);
                } else {
                    emit_words(&t, "( SELECT value FROM json_each ( pg_array_json (");
                    push(&t, '(', ") ) )", NULL);
                }
                continue;
            }
            if (!strcmp(w, "trim") && call && nx + 1 < t.n_in &&
                (at(&t, nx + 1, "leading") || at(&t, nx + 1, "trailing") || at(&t, nx + 1, "both"))) {
                emit_words(&t, arena_printf(a, "pg_trim ( '%s' ,", t.in[nx + 1].text));
                t.skip[nx] = t.skip[nx + 1] = true;
                if (at(&t, nx + 2, "from")) {
                    emit_words(&t, "NULL ,");
                    t.skip[nx + 2] = true;
                    push(&t, '(', ")", NULL);
                } else {
                    push(&t, '(', ")", ",");
                }
                continue;
            }
            if (!strcmp(w, "from") && t.depth > 0 && t.stack[t.depth - 1].at_from) {
                emit_words(&t, t.stack[t.depth - 1].at_from);
                t.stack[t.depth - 1].at_from = NULL;
                continue;
            }
            if (call && !qualified &&
                (!strcmp(w, "unnest") || !strcmp(w, "generate_series") || !strcmp(w, "pg_options_to_table")) &&
                (!strcasecmp(prev, "from") || !strcmp(prev, ",") || !strcasecmp(prev, "join"))) {
                table_function(&t, i, nx);
                continue;
            }
            if (call && !qualified && (!strcasecmp(prev, "from") || !strcmp(prev, ",") || !strcasecmp(prev, "join")) &&
                in_from_list(&t, i)) {
                scalar_in_from(&t, i, nx);
                continue;
            }
            if (!call && !qualified && !strcmp(w, "user") && strcasecmp(prev, "as") != 0 && !(next && is_punct(next, '.'))) {
                emit_words(&t, "current_user ( )");   /* USER is CURRENT_USER in Postgres */
                continue;
            }
            if (!call && !qualified && in_list(w, SESSION_WORDS)) {
                emit(&t, w);
                emit_words(&t, "( )");
                continue;
            }
            if (!strcmp(w, "string_agg") && call) {
                emit(&t, "group_concat");
                continue;
            }
            if (!strcmp(w, "json_build_object") && call) {
                emit(&t, "json_object");
                continue;
            }
            if (!strcasecmp(prev, "as") && !call && !(t.depth > 0 && t.stack[t.depth - 1].cast) &&
                !(next && is_punct(next, '.'))) {
                /* A column label: any word may be one in Postgres (AS default), not in SQLite. */
                emit(&t, arena_printf(a, "\"%s\"", w));
                continue;
            }
            if (!strcmp(w, "array_agg") && call) {
                emit(&t, "pg_array_agg");
                continue;
            }
            if ((!strcmp(w, "left") || !strcmp(w, "right")) && call) {
                emit(&t, w[0] == 'l' ? "pg_left" : "pg_right");   /* keywords in SQLite (LEFT JOIN) */
                continue;
            }
            emit(&t, w);
            continue;
        }
        if (k->k == TK_OP) {
            if (!strcmp(w, "::")) {
                if (cast(&t, i, err))
                    return -1;
                continue;
            }
            if (!strcmp(w, "~"))
                emit(&t, "REGEXP");
            else if (!strcmp(w, "!~"))
                emit_words(&t, "NOT REGEXP");
            else if (!strcmp(w, "~*"))
                emit(&t, "MATCH");
            else if (!strcmp(w, "!~*"))
                emit_words(&t, "NOT MATCH");
            else if (!strcmp(w, "~~"))
                emit(&t, "LIKE");
            else if (!strcmp(w, "!~~"))
                emit_words(&t, "NOT LIKE");
            else if (!strcmp(w, "~~*"))
                emit(&t, "GLOB");
            else if (!strcmp(w, "!~~*"))
                emit_words(&t, "NOT GLOB");
            else if (!strcmp(w, "!="))
                emit(&t, "<>");
            else
                emit(&t, w);
            continue;
        }
        if (k->k == TK_PUNCT && w[0] == '(') {
            bool is_cast = !strcasecmp(prev, "cast");
            emit(&t, "(");
            push(&t, '(', ")", NULL);
            t.stack[t.depth - 1].cast = is_cast;
            continue;
        }
        if (k->k == TK_PUNCT && w[0] == '[') {
            /* A subscript: x[i] -> pg_array_get(x, i). */
            int j = operand_start(&t);
            if (j < 0)
                return werr(err, SQLSTATE_SYNTAX_ERROR, k->pos + 1, "syntax error at or near \"[\"");
            insert_words(&t, j, "pg_array_get (");
            emit(&t, ",");
            push(&t, '[', ")", NULL);
            continue;
        }
        if (k->k == TK_PUNCT && (w[0] == ')' || w[0] == ']')) {
            if (t.depth == 0)   /* a rule consumed its opening bracket: cannot happen, but never underflow */
                return werr(err, SQLSTATE_SYNTAX_ERROR, k->pos + 1, "syntax error at or near \"%s\"", w);
            Frame f = t.stack[--t.depth];
            if (f.at_from && !strcmp(f.at_from, ") FROM"))
                emit(&t, ")");   /* ARRAY(SELECT e) without FROM: close the aggregate first */
            emit_words(&t, f.close);
            continue;
        }
        emit(&t, w);
    }
    /* Join with spaces, except around '.', before ',' and ')', after '(',
     * and between a name and its call parenthesis. */
    Buf b = BUF_INIT;
    for (int i = 0; i < t.n_out; i++) {
        const char *s = t.out[i];
        if (i > 0) {
            const char *p = t.out[i - 1];
            bool tight = !strcmp(s, ".") || !strcmp(p, ".") || !strcmp(s, ",") || !strcmp(s, ")") ||
                         !strcmp(p, "(") || (!strcmp(s, "(") && is_name(p));
            if (!tight)
                buf_putc(&b, ' ');
        }
        buf_puts(&b, s);
    }
    buf_putc(&b, 0);
    *out = arena_strdup(a, b.data);
    buf_free(&b);
    return 0;
}
