/*
 * unsupported.c: a syntax error that is really SQL weir does not support yet.
 *
 * The grammar only knows what weir runs, so a statement using SQL that
 * PostgreSQL, Flink or RisingWave accept fails somewhere inside it with
 * "42601 syntax error at or near ...", which tells a user their SQL is
 * wrong when it is weir that is short. Before reporting a syntax error,
 * parse_syntax_error asks here: the statement is read again as words, and
 * if it holds a construct from the table below, starting at or before the
 * token the grammar stopped at, the error is "0A000 feature not supported:
 * <what>" at that construct, with a hint saying what to write instead.
 *
 * Only syntax errors come here: a statement the grammar accepts is never
 * changed, and a construct after the failing token is not what failed.
 * Functions the binder does not know (generate_series, date_bin...) are the
 * planner's (planner/bind.c).
 */
#include "parser_int.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parse.h"

#define MAX_WORDS 4096 /* a construct past this many tokens into the statement is not looked for */

typedef struct Word {
    const char *z;
    int n;
    int off;  /* byte offset in the input */
    int type; /* TK_ code */
    int depth; /* parentheses open before it */
    bool call; /* '(' right after an identifier or keyword: a call's argument list */
} Word;

typedef struct Scan {
    Word w[MAX_WORDS];
    int n;
} Scan;

static bool is(const Word *w, const char *s)
{
    return w->n == (int)strlen(s) && strncasecmp(w->z, s, (size_t)w->n) == 0;
}

static bool is_name(const Word *w) { return w->type == TK_ID || isalpha((unsigned char)w->z[0]) || w->z[0] == '_'; }

/* The words of the statement starting at byte `from`, up to its ';' or the end. */
static void scan(const char *sql, int from, Scan *s)
{
    const unsigned char *z = (const unsigned char *)sql;
    int off = from, depth = 0;
    bool call_next = false;
    s->n = 0;
    while (s->n < MAX_WORDS) {
        int type;
        int len = parse_get_token(z + off, &type);
        if (len <= 0)
            break;
        if (type != TK_SPACE) {
            if (type == TK_SEMI)
                break;
            Word *w = &s->w[s->n++];
            *w = (Word){(const char *)z + off, len, off, type, depth, false};
            if (type == TK_LP) {
                w->call = call_next;
                depth++;
            } else if (type == TK_RP && depth > 0) {
                depth--;
                w->depth = depth;
            }
            /* Only a plain name before '(' opens a call: OVER (, IN (, VALUES ( do not. */
            call_next = type == TK_ID;
        }
        off += len;
    }
}

/* The depth of the call whose argument list word i is in (its '(' index), or -1. */
static int enclosing_call(const Scan *s, int i)
{
    int want = s->w[i].depth - 1;
    for (int k = i - 1; k >= 0 && want >= 0; k--) {
        if (s->w[k].type == TK_LP && s->w[k].depth == want)
            return s->w[k].call ? k : -1;
    }
    return -1;
}

typedef struct Found {
    int at;           /* index of the word to point at */
    const char *what; /* after "feature not supported: " */
    const char *hint;
} Found;

/* Table functions weir has in FROM; another name( in FROM is a table function it lacks. */
static bool known_table_function(const Word *w)
{
    static const char *const names[] = {"tumble", "hop", "session", "cumulate", "table"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (is(w, names[i]))
            return true;
    return false;
}

static bool find(const Scan *s, Found *f)
{
    const Word *w = s->w;
    for (int i = 0; i < s->n; i++) {
        const Word *a = &w[i], *b = i + 1 < s->n ? &w[i + 1] : NULL, *c = i + 2 < s->n ? &w[i + 2] : NULL;
        *f = (Found){i, NULL, NULL};
        if (a->z[0] == '[' || (is(a, "array") && b && b->z[0] == '[')) {
            f->what = "arrays (ARRAY[...], type[], subscripts)";
            f->hint = "Keep a list in a JSONB column ('[1, 2]'::jsonb, read with -> and ->>) for now.";
        } else if (is(a, "asof") && b && (is(b, "join") || is(b, "left"))) {
            f->what = "ASOF JOIN";
            f->hint = "A temporal join (JOIN t FOR SYSTEM_TIME AS OF s.ts ON ...) or an interval join gives the "
                      "latest matching row.";
        } else if (is(a, "natural") && b && (is(b, "join") || is(b, "left") || is(b, "inner") || is(b, "full") ||
                                             is(b, "right"))) {
            f->what = "NATURAL JOIN";
            f->hint = "Name the columns: JOIN ... USING (col, ...).";
        } else if (is(a, "grouping") && b && is(b, "sets")) {
            f->what = "GROUPING SETS";
            f->hint = "Write one GROUP BY query per grouping set and combine them with UNION ALL.";
        } else if ((is(a, "rollup") || is(a, "cube")) && b && b->type == TK_LP && i > 0 && is(&w[i - 1], "by")) {
            f->what = is(a, "rollup") ? "GROUP BY ROLLUP" : "GROUP BY CUBE";
            f->hint = "Write one GROUP BY query per grouping set and combine them with UNION ALL.";
        } else if (is(a, "within") && b && is(b, "group")) {
            f->what = "ordered-set aggregates (WITHIN GROUP)";
            f->hint = "percentile_cont, percentile_disc and mode are not available yet.";
        } else if (is(a, "order") && b && is(b, "by") && a->depth > 0 && enclosing_call(s, i) >= 0) {
            f->what = "ORDER BY inside an aggregate's arguments";
            f->hint = "The order of string_agg's input is the order rows arrive in; sort the result instead.";
        } else if ((is(a, "rows") || is(a, "range") || is(a, "groups")) && b && (is(b, "between") ||
                   is(b, "unbounded") || is(b, "current") || b->type == TK_INTEGER) && a->depth > 0) {
            f->what = "window frames (ROWS/RANGE BETWEEN)";
            f->hint = "Window functions with OVER are limited to ROW_NUMBER() for Top-N and deduplication; a "
                      "running aggregate can be a windowed GROUP BY (TUMBLE, HOP).";
        } else if (is(a, "on") && b && is(b, "conflict")) {
            f->what = "INSERT ... ON CONFLICT";
            f->hint = "UPDATE the row with that key, or DELETE it and INSERT again.";
        } else if (is(a, "returning") && i > 0) {
            f->what = "RETURNING";
            f->hint = "Read the rows with a SELECT afterwards.";
        } else if (is(a, "lateral")) {
            f->what = "LATERAL";
            f->hint = "A correlated subquery in the select list or WHERE, or a join, is supported.";
        } else if (i == 0 && is(a, "merge")) {
            f->what = "MERGE";
            f->hint = "Use INSERT, UPDATE and DELETE.";
        } else if (is(a, "create") && b && (is(b, "index") || (is(b, "unique") && c && is(c, "index")))) {
            f->what = "CREATE INDEX";
            f->hint = "A view is read by its key (its GROUP BY columns or primary key); filter on them.";
        } else if (is(a, "create") && b && (is(b, "temporary") || is(b, "temp"))) {
            f->what = "temporary relations";
            f->hint = "Create the relation without TEMPORARY and drop it afterwards.";
        } else if (is(a, "create") && b && (is(b, "function") || (is(b, "or") && c && is(c, "replace") &&
                                                                  i + 3 < s->n && is(&w[i + 3], "function")))) {
            f->what = "user-defined functions";
            f->hint = "Write the expression inline, or in a view that others select from.";
        } else if (i == 0 && (is(a, "describe") || is(a, "desc"))) {
            f->what = "DESCRIBE";
            f->hint = "Use psql's \\d name, or SHOW CREATE MATERIALIZED VIEW / SOURCE / TABLE name.";
        } else if (i == 0 && is(a, "show") && b && is(b, "columns")) {
            f->what = "SHOW COLUMNS";
            f->hint = "Use psql's \\d name, or SELECT column_name, data_type FROM information_schema.columns WHERE "
                      "table_name = '...'.";
        } else if (is(a, "match_recognize")) {
            f->what = "MATCH_RECOGNIZE";
            f->hint = NULL;
        } else if (is(a, "tablesample")) {
            f->what = "TABLESAMPLE";
            f->hint = "Filter on a hash of the key instead, e.g. WHERE abs(hashtext(k::text)) % 100 < 10.";
        } else if (a->type == TK_ILLEGAL && (a->z[0] == '@' || a->z[0] == '#' || a->z[0] == '?')) {
            f->what = "the jsonb operators @>, <@, ?, ?|, ?&, #> and #>>";
            f->hint = "Use -> and ->> to read a field (j->'a'->>'b').";
        } else if (is(a, "from") && b && is_name(b) && b->type != TK_STRING && c && c->type == TK_LP &&
                   !known_table_function(b) && !(i + 3 < s->n && (is(&w[i + 3], "select") || is(&w[i + 3], "with")))) {
            f->at = i + 1;
            f->what = "table functions in FROM (generate_series, unnest, ...)";
            f->hint = "FROM takes tables, views, sources, subqueries and the window functions TUMBLE, HOP and "
                      "SESSION.";
        }
        if (f->what)
            return true;
    }
    return false;
}

bool parse_unsupported(ParseCtx *c, Token t)
{
    Scan *s = xmalloc(sizeof *s); /* 160 KB: not on the parser's stack; only on an error */
    int from = c->stmt_start >= 0 ? c->stmt_start : 0;
    scan(c->sql, from, s);
    Found f;
    /* Only what starts at or before the failing token explains it (t.n == 0:
     * the end of input, after everything). */
    if (!find(s, &f) || (t.n > 0 && s->w[f.at].off > t.off)) {
        free(s);
        return false;
    }
    /* The 1-based character position of the construct, as Token.pos is. */
    int pos = 1;
    for (const unsigned char *p = (const unsigned char *)c->sql; p < (const unsigned char *)s->w[f.at].z; p++)
        pos += (*p & 0xC0) != 0x80;
    free(s);
    werr(c->err, SQLSTATE_NOT_SUPPORTED, pos, "feature not supported: %s", f.what);
    if (f.hint)
        werr_hint(c->err, "%s", f.hint);
    return true;
}
