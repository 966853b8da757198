/*
 * ast.c: the AST builders called by the grammar's one-line actions, and the
 * driver parse_sql() that runs tokenizer and grammar over a string.
 *
 * Every node lives in the caller's statement arena. Builders never return
 * NULL, even after an error: the Lemon parser may run a few more reductions
 * before the driver sees the error, and those must not crash. The first
 * error recorded on the WError wins (SQLite's nErr/zErrMsg discipline).
 *
 * Nesting is bounded so that later recursive passes (binder, planner)
 * cannot overflow the C stack: parentheses are counted by the driver,
 * expression trees carry a depth in a private box around AstExpr, join and
 * set-operation chains are counted when built, and Lemon's fixed-size stack
 * bounds everything else (prefix operators, CASE nests). Each limit reports
 * SQLSTATE 54001 (statement_too_complex, as Postgres's stack depth limit);
 * an over-long input is 54000.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <strings.h>

#include "parse.h"
#include "parser_int.h"
#include "utf8.h"

/* Lemon's generated entry points (parse.c). */
void *WeirParserAlloc(void *(*malloc_fn)(size_t), ParseCtx *ctx);
void WeirParserFree(void *p, void (*free_fn)(void *));
void WeirParser(void *p, int major, Token minor);

/*
 * Private boxes around public nodes: the public struct comes first, so a
 * pointer to it is a pointer to the box (C11 6.7.2.1p15). Only builders in
 * this file allocate these nodes, so the cast back is always valid.
 */
typedef struct ExprBox {
    AstExpr e;
    int depth;           /* height of the expression tree, 1 for a leaf */
} ExprBox;

typedef struct SelectBox {
    AstSelect s;
    int off;             /* byte offset of the first token */
    int chain;           /* set-operation operands hanging off this select */
    bool paren;          /* SELECT * FROM (q) made for a parenthesized q (ast_paren_select) */
} SelectBox;

#define EXPR_DEPTH(e) ((e) ? ((const ExprBox *)(e))->depth : 0)

/* ---- lists and names ----------------------------------------------------- */

AstList *ast_list_append(Arena *a, AstList *l, void *item)
{
    if (!l)
        l = arena_zalloc(a, sizeof *l);
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        void **items = arena_alloc(a, (size_t)cap * sizeof *items);
        if (l->n)
            memcpy(items, l->items, (size_t)l->n * sizeof *items);
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = item;
    return l;
}

AstList *ast_list2(ParseCtx *c, AstList *l, void *x, void *y)
{
    return ast_list_append(c->a, ast_list_append(c->a, l, x), y);
}

const char *ast_op_name(AstOp op)
{
    switch (op) {
    case OP_NONE: return "";
    case OP_NEG: return "-";
    case OP_NOT: return "NOT";
    case OP_PLUS: return "+";
    case OP_ADD: return "+";
    case OP_SUB: return "-";
    case OP_MUL: return "*";
    case OP_DIV: return "/";
    case OP_MOD: return "%";
    case OP_POW: return "^";
    case OP_CONCAT: return "||";
    case OP_EQ: return "=";
    case OP_NE: return "<>";
    case OP_LT: return "<";
    case OP_LE: return "<=";
    case OP_GT: return ">";
    case OP_GE: return ">=";
    case OP_AND: return "AND";
    case OP_OR: return "OR";
    }
    return "?";
}

const char *ast_object_kind_name(AstObjectKind k)
{
    switch (k) {
    case OBJ_SOURCE: return "source";
    case OBJ_TABLE: return "table";
    case OBJ_VIEW: return "view";
    case OBJ_MATERIALIZED_VIEW: return "materialized view";
    case OBJ_SINK: return "sink";
    case OBJ_STREAM: return "stream";
    }
    return "object";
}

static char lower(char ch) { return (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch; }

const char *ast_ident(ParseCtx *c, Token t)
{
    if (t.n >= 2 && t.z[0] == '"') {
        char *out = arena_alloc(c->a, (size_t)t.n);
        int j = 0;
        for (int i = 1; i < t.n - 1; i++) {
            out[j++] = t.z[i];
            if (t.z[i] == '"')
                i++;   /* "" stands for one " */
        }
        out[j] = 0;
        if (j == 0)
            werr(c->err, SQLSTATE_SYNTAX_ERROR, t.pos, "zero-length delimited identifier at or near \"\"\"\"");
        return out;
    }
    return ast_token_text(c, t);
}

const char *ast_token_text(ParseCtx *c, Token t)
{
    char *out = arena_strndup(c->a, t.z, (size_t)t.n);
    for (int i = 0; i < t.n; i++)
        out[i] = lower(out[i]);
    return out;
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = lower(ch);
    return (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10 : -1;
}

/* The character position of byte z[i] of token t, for errors inside a string. */
static int char_pos(Token t, const char *at)
{
    int pos = t.pos;
    for (const char *p = t.z; p < at; p++)
        pos += ((unsigned char)*p & 0xC0) != 0x80;
    return pos;
}

/* n hex digits at z (all present before end)? Returns the value or -1. */
static long hex_run(const char *z, const char *end, int n)
{
    long v = 0;
    for (int k = 0; k < n; k++) {
        if (z + k >= end || hexval(z[k]) < 0)
            return -1;
        v = v * 16 + hexval(z[k]);
    }
    return v;
}

static int utf8_put(char *out, unsigned long cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* One backslash escape of E'...' starting at z[i] == '\\' (i + 1 < n).
 * Writes its bytes at out + *j and returns the index of its last byte, or
 * -1 after recording an error (the messages and SQLSTATEs are Postgres's). */
static int unescape_one(ParseCtx *c, Token t, const char *z, int n, int i, char *out, int *j)
{
    const char *end = z + n;
    char ch = z[++i];
    switch (ch) {
    case 'n': out[(*j)++] = '\n'; return i;
    case 't': out[(*j)++] = '\t'; return i;
    case 'r': out[(*j)++] = '\r'; return i;
    case 'b': out[(*j)++] = '\b'; return i;
    case 'f': out[(*j)++] = '\f'; return i;
    case 'x':
        if (i + 1 < n && hexval(z[i + 1]) >= 0) {
            int v = hexval(z[++i]);
            if (i + 1 < n && hexval(z[i + 1]) >= 0)
                v = v * 16 + hexval(z[++i]);
            out[(*j)++] = (char)v;
        } else {
            out[(*j)++] = 'x';
        }
        return i;
    case 'u':
    case 'U': {
        int nd = ch == 'u' ? 4 : 8;
        long cp = hex_run(z + i + 1, end, nd);
        if (cp < 0) {
            werr(c->err, SQLSTATE_INVALID_ESCAPE, char_pos(t, z + i - 1), "invalid Unicode escape");
            werr_hint(c->err, "Unicode escapes must be \\uXXXX or \\UXXXXXXXX.");
            return -1;
        }
        const char *at = z + i - 1;
        i += nd;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            /* A high surrogate must be followed by a low one, as \u or \U. */
            long lo = -1;
            if (i + 2 < n && z[i + 1] == '\\' && (z[i + 2] == 'u' || z[i + 2] == 'U')) {
                int nd2 = z[i + 2] == 'u' ? 4 : 8;
                lo = hex_run(z + i + 3, end, nd2);
                if (lo >= 0xDC00 && lo <= 0xDFFF)
                    i += 2 + nd2;
                else
                    lo = -1;
            }
            if (lo < 0) {
                werr(c->err, SQLSTATE_SYNTAX_ERROR, char_pos(t, z + i + 1), "invalid Unicode surrogate pair");
                return -1;
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            werr(c->err, SQLSTATE_SYNTAX_ERROR, char_pos(t, at), "invalid Unicode surrogate pair");
            return -1;
        } else if (cp == 0 || cp > 0x10FFFF) {
            werr(c->err, SQLSTATE_SYNTAX_ERROR, char_pos(t, at), "invalid Unicode escape value");
            return -1;
        }
        *j += utf8_put(out + *j, (unsigned long)cp);
        return i;
    }
    default:
        if (ch >= '0' && ch <= '7') {
            int v = ch - '0';
            for (int k = 0; k < 2 && i + 1 < n && z[i + 1] >= '0' && z[i + 1] <= '7'; k++)
                v = v * 8 + (z[++i] - '0');
            out[(*j)++] = (char)v;
        } else {
            out[(*j)++] = ch;   /* \\, \', and any other character stand for themselves */
        }
        return i;
    }
}

/* Unescapes '...' ('' is a quote) or E'...' (also C-style backslash escapes,
 * \ooo octal, \xhh hex, \uXXXX and \UXXXXXXXX code points, as in Postgres).
 * Bytes written by escapes must still form valid UTF-8 without a zero byte:
 * otherwise 22021, as in Postgres. On an error the error is recorded on c
 * and the (partial) text is returned, so the caller goes on. */
const char *ast_string(ParseCtx *c, Token t)
{
    if (t.z[0] == '$') {
        /* $tag$...$tag$: the text between the delimiters, as written. */
        int d = 1;
        while (t.z[d] != '$')
            d++;
        d++;
        return arena_strndup(c->a, t.z + d, (size_t)(t.n - 2 * d));
    }
    int esc = (t.z[0] == 'E' || t.z[0] == 'e');
    const char *z = t.z + esc + 1;
    int n = t.n - esc - 2;
    /* An escape never grows: \uXXXX (6 bytes) is at most 3, \UXXXXXXXX at most 4. */
    char *out = arena_alloc(c->a, (size_t)(n > 0 ? n : 0) + 1);
    int j = 0;
    bool escaped = false;
    for (int i = 0; i < n; i++) {
        char ch = z[i];
        if (ch == '\'') {
            i++;   /* '' */
            out[j++] = ch;
        } else if (esc && ch == '\\' && i + 1 < n) {
            escaped = true;
            if ((i = unescape_one(c, t, z, n, i, out, &j)) < 0)
                break;
        } else {
            out[j++] = ch;
        }
    }
    out[j] = 0;
    for (int k = 0; escaped && k < j;) {
        int len = utf8_seq_len((const unsigned char *)out + k, (size_t)(j - k));
        if (len == 0) {
            werr(c->err, SQLSTATE_BAD_ENCODING, 0, "invalid byte sequence for encoding \"UTF8\": 0x%02x",
                 (unsigned char)out[k]);
            break;
        }
        k += len;
    }
    return out;
}

const char *ast_join_dotted(ParseCtx *c, const char *l, const char *r)
{
    return arena_printf(c->a, "%s.%s", l, r);
}

AstList *ast_name_list(ParseCtx *c, AstList *l, Token t)
{
    return ast_list_append(c->a, l, (void *)ast_ident(c, t));
}

/* ---- errors ---------------------------------------------------------------- */

void parse_syntax_error(ParseCtx *c, Token t)
{
    if (parse_unsupported(c, t))
        return; /* SQL weir lacks, not SQL that is wrong (unsupported.c) */
    if (t.n == 0) {
        werr(c->err, SQLSTATE_SYNTAX_ERROR, t.pos, "syntax error at end of input");
        return;
    }
    /* Show at most 64 bytes, cut at a UTF-8 character boundary. */
    int n = t.n;
    if (n > 64) {
        n = 64;
        while (n > 0 && ((unsigned char)t.z[n] & 0xC0) == 0x80)
            n--;
    }
    werr(c->err, SQLSTATE_SYNTAX_ERROR, t.pos, "syntax error at or near \"%.*s\"", n, t.z);
}

void parse_stack_overflow(ParseCtx *c)
{
    werr(c->err, SQLSTATE_TOO_COMPLEX, 0, "statement is too complex (parser stack overflow)");
}

static void too_deep(ParseCtx *c, int pos)
{
    werr(c->err, SQLSTATE_TOO_COMPLEX, pos, "statement is nested too deeply (limit %d)", PARSE_MAX_DEPTH);
}

/* ---- expressions --------------------------------------------------------- */

static AstExpr *new_expr(ParseCtx *c, AstExprKind k, int pos, int depth)
{
    ExprBox *b = arena_zalloc(c->a, sizeof *b);
    b->e.kind = k;
    b->e.pos = pos;
    b->depth = depth;
    if (depth > PARSE_MAX_DEPTH)
        too_deep(c, pos);
    return &b->e;
}

static int max3(int a, int b, int c)
{
    int m = a > b ? a : b;
    return m > c ? m : c;
}

static int list_depth(const AstList *l)
{
    int d = 0;
    for (int i = 0; i < ast_list_len(l); i++)
        if (EXPR_DEPTH(AST_AT(l, i)) > d)
            d = EXPR_DEPTH(AST_AT(l, i));
    return d;
}

AstExpr *ast_lit(ParseCtx *c, AstLitKind k, Token t)
{
    AstExpr *e = new_expr(c, AST_LITERAL, t.pos, 1);
    e->lit_kind = k;
    switch (k) {
    case LIT_NULL: break;
    case LIT_BOOL: e->text = lower(t.z[0]) == 't' ? "t" : "f"; break;
    case LIT_STRING: e->text = ast_string(c, t); break;
    default: e->text = arena_strndup(c->a, t.z, (size_t)t.n); break;
    }
    return e;
}

const char *ast_type_name(ParseCtx *c, Token t)
{
    return ast_ident(c, t);
}

const char *ast_type_mod(ParseCtx *c, const char *base, Token prec, const Token *scale)
{
    if (strcmp(base, "numeric") != 0 && strcmp(base, "decimal") != 0)
        return base;
    if (scale)
        return arena_printf(c->a, "numeric(%.*s,%.*s)", prec.n, prec.z, scale->n, scale->z);
    return arena_printf(c->a, "numeric(%.*s)", prec.n, prec.z);
}

const char *ast_type_tz(ParseCtx *c, const char *base, bool with_tz, Token at)
{
    if (strcmp(base, "timestamp") == 0)
        return with_tz ? "timestamptz" : "timestamp";
    if (strcmp(base, "time") == 0)
        return with_tz ? "timetz" : "time";
    werr(c->err, SQLSTATE_SYNTAX_ERROR, at.pos, "WITH%s TIME ZONE is not allowed for type %s",
         with_tz ? "" : "OUT", base);
    return base;
}

AstExpr *ast_lit_typed(ParseCtx *c, Token type, Token str)
{
    AstExpr *e = new_expr(c, AST_LITERAL, type.pos, 1);
    e->lit_kind = LIT_TYPED;
    e->type_name = ast_type_name(c, type);
    e->text = ast_string(c, str);
    return e;
}

AstExpr *ast_lit_interval(ParseCtx *c, Token kw, Token str, const char *unit)
{
    AstExpr *e = new_expr(c, AST_LITERAL, kw.pos, 1);
    e->lit_kind = LIT_INTERVAL;
    e->type_name = "interval";
    e->text = ast_string(c, str);
    e->interval_unit = unit;
    return e;
}

AstExpr *ast_column(ParseCtx *c, const Token *qual, Token name)
{
    AstExpr *e = new_expr(c, AST_COLUMN, qual ? qual->pos : name.pos, 1);
    e->qualifier = qual ? ast_ident(c, *qual) : NULL;
    e->text = ast_ident(c, name);
    return e;
}

AstExpr *ast_star(ParseCtx *c, const Token *qual, Token star)
{
    AstExpr *e = new_expr(c, AST_STAR, qual ? qual->pos : star.pos, 1);
    e->qualifier = qual ? ast_ident(c, *qual) : NULL;
    return e;
}

AstExpr *ast_param(ParseCtx *c, Token t)
{
    AstExpr *e = new_expr(c, AST_PARAM, t.pos, 1);
    long v = 0;
    for (int i = 1; i < t.n; i++) {
        v = v * 10 + (t.z[i] - '0');
        if (v > 65535) {
            werr(c->err, SQLSTATE_SYNTAX_ERROR, t.pos, "parameter number too large at or near \"%.*s\"",
                 t.n > 20 ? 20 : t.n, t.z);
            break;
        }
    }
    e->param_no = (int)v;
    e->text = arena_strndup(c->a, t.z, (size_t)t.n);
    c->params = ast_list_append(c->a, c->params, e);
    return e;
}

AstExpr *ast_unary(ParseCtx *c, AstOp op, Token t, AstExpr *arg)
{
    /* A minus before a numeric literal folds into it, as Postgres's
     * doNegate() does, so -9223372036854775808 is one bigint constant. */
    if (op == OP_NEG && arg->kind == AST_LITERAL && (arg->lit_kind == LIT_INT || arg->lit_kind == LIT_DECIMAL)) {
        arg->text = arg->text[0] == '-' ? arg->text + 1 : arena_printf(c->a, "-%s", arg->text);
        arg->pos = t.pos;
        return arg;
    }
    AstExpr *e = new_expr(c, AST_UNARY, t.pos, EXPR_DEPTH(arg) + 1);
    e->op = op;
    e->args = ast_list_append(c->a, NULL, arg);
    return e;
}

AstExpr *ast_binary(ParseCtx *c, AstOp op, AstExpr *l, AstExpr *r)
{
    /* A chain of AND (or of OR) is one flat list of operands, not nesting:
     * `a OR b OR ... OR z` with 10,000 terms is one level deep, as
     * PostgreSQL takes it, and no later pass recurses once per term. */
    if ((op == OP_AND || op == OP_OR) && l->kind == AST_BINARY && l->op == op) {
        ExprBox *lb = (ExprBox *)l;
        if (EXPR_DEPTH(r) + 1 > lb->depth)
            lb->depth = EXPR_DEPTH(r) + 1;
        if (lb->depth > PARSE_MAX_DEPTH)
            too_deep(c, r->pos);
        ast_list_append(c->a, l->args, r);
        return l;
    }
    AstExpr *e = new_expr(c, AST_BINARY, l->pos, max3(EXPR_DEPTH(l), EXPR_DEPTH(r), 0) + 1);
    e->op = op;
    e->args = ast_list_append(c->a, ast_list_append(c->a, NULL, l), r);
    return e;
}

AstExpr *ast_func(ParseCtx *c, Token name, AstList *args, bool distinct, bool star)
{
    AstExpr *e = new_expr(c, AST_FUNC, name.pos, list_depth(args) + 1);
    e->text = ast_ident(c, name);
    e->args = args;
    e->distinct = distinct;
    e->star_arg = star;
    return e;
}

AstExpr *ast_func_name(ParseCtx *c, Token kw, const char *name)
{
    AstExpr *e = new_expr(c, AST_FUNC, kw.pos, 1);
    e->text = name;
    return e;
}

AstExpr *ast_func_decorate(ParseCtx *c, AstExpr *f, AstExpr *filter, AstWindowSpec *over)
{
    f->filter = filter;
    f->over = over;
    int d = EXPR_DEPTH(filter);
    if (over)
        d = max3(d, list_depth(over->partition_by), 0);
    if (d + 1 > ((ExprBox *)f)->depth)
        ((ExprBox *)f)->depth = d + 1;
    if (((ExprBox *)f)->depth > PARSE_MAX_DEPTH)
        too_deep(c, f->pos);
    return f;
}

AstWindowSpec *ast_window_spec(ParseCtx *c, AstList *partition_by, AstList *order_by)
{
    AstWindowSpec *w = arena_zalloc(c->a, sizeof *w);
    w->partition_by = partition_by;
    w->order_by = order_by;
    return w;
}

AstExpr *ast_cast(ParseCtx *c, AstExpr *arg, const char *type, int pos)
{
    AstExpr *e = new_expr(c, AST_CAST, pos, EXPR_DEPTH(arg) + 1);
    e->arg = arg;
    e->type_name = type;
    return e;
}

/* SIMILAR TO: its SQL-standard pattern language is not translated (yet); ~ covers the need. */
AstExpr *ast_similar(ParseCtx *c, Token t, AstExpr *e, AstExpr *pat)
{
    (void)pat;
    werr(c->err, SQLSTATE_NOT_SUPPORTED, t.pos, "feature not supported: SIMILAR TO (use the ~ operator)");
    return e;
}

AstExpr *ast_case(ParseCtx *c, Token t, AstExpr *operand, AstList *whens, AstExpr *else_)
{
    AstExpr *e = new_expr(c, AST_CASE, t.pos, max3(EXPR_DEPTH(operand), list_depth(whens), EXPR_DEPTH(else_)) + 1);
    e->arg = operand;
    e->whens = whens;
    e->else_ = else_;
    return e;
}

AstExpr *ast_in(ParseCtx *c, AstExpr *arg, AstList *list, bool negated)
{
    AstExpr *e = new_expr(c, AST_IN, arg->pos, max3(EXPR_DEPTH(arg), list_depth(list), 0) + 1);
    e->arg = arg;
    e->args = list;
    e->negated = negated;
    return e;
}

AstExpr *ast_in_select(ParseCtx *c, AstExpr *arg, AstSelect *q, bool negated)
{
    AstExpr *e = new_expr(c, AST_SUBQUERY, arg->pos, EXPR_DEPTH(arg) + 1);
    e->subq_kind = SUBQ_IN;
    e->arg = arg;
    e->subquery = q;
    e->negated = negated;
    return e;
}

AstExpr *ast_between(ParseCtx *c, AstExpr *arg, AstExpr *lo, AstExpr *hi, bool negated)
{
    AstExpr *e = new_expr(c, AST_BETWEEN, arg->pos, max3(EXPR_DEPTH(arg), EXPR_DEPTH(lo), EXPR_DEPTH(hi)) + 1);
    e->arg = arg;
    e->lo = lo;
    e->hi = hi;
    e->negated = negated;
    return e;
}

AstExpr *ast_is(ParseCtx *c, AstExpr *arg, AstIsKind k, bool negated, AstExpr *other)
{
    AstExpr *e = new_expr(c, AST_IS, arg->pos, max3(EXPR_DEPTH(arg), EXPR_DEPTH(other), 0) + 1);
    e->arg = arg;
    e->is_kind = k;
    e->negated = negated;
    e->lo = other;
    return e;
}

AstExpr *ast_like(ParseCtx *c, AstExpr *arg, AstExpr *pat, AstExpr *esc, bool negated, bool ilike)
{
    AstExpr *e = new_expr(c, AST_LIKE, arg->pos, max3(EXPR_DEPTH(arg), EXPR_DEPTH(pat), EXPR_DEPTH(esc)) + 1);
    e->arg = arg;
    e->lo = pat;
    e->hi = esc;
    e->negated = negated;
    e->ilike = ilike;
    return e;
}

AstExpr *ast_extract(ParseCtx *c, Token kw, const char *field, AstExpr *arg)
{
    AstExpr *e = new_expr(c, AST_EXTRACT, kw.pos, EXPR_DEPTH(arg) + 1);
    char *f = arena_strdup(c->a, field);
    for (char *p = f; *p; p++)
        *p = lower(*p);
    e->text = f;
    e->arg = arg;
    return e;
}

/* A call named name with args x, y, z (each may be NULL: the list stops). */
static AstExpr *special_call(ParseCtx *c, int pos, const char *name, AstExpr *x, AstExpr *y, AstExpr *z)
{
    AstList *l = ast_list_append(c->a, NULL, x);
    if (y)
        l = ast_list_append(c->a, l, y);
    if (y && z)
        l = ast_list_append(c->a, l, z);
    AstExpr *e = new_expr(c, AST_FUNC, pos, list_depth(l) + 1);
    e->text = name;
    e->args = l;
    return e;
}

static bool name_is(Token t, const char *name)
{
    size_t n = strlen(name);
    if ((size_t)t.n != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower(t.z[i]) != name[i])
            return false;
    return true;
}

AstExpr *ast_func_from(ParseCtx *c, Token name, Token kw, AstExpr *x, AstExpr *from, AstExpr *count)
{
    if (x && (name_is(name, "substring") || name_is(name, "substr"))) {
        if (!from) {
            from = new_expr(c, AST_LITERAL, kw.pos, 1);
            from->lit_kind = LIT_INT;
            from->text = "1";
        }
        return special_call(c, name.pos, "substring", x, from, count);
    }
    if (name_is(name, "trim") && from && !count)
        return special_call(c, name.pos, "btrim", from, x, NULL);
    parse_syntax_error(c, kw);
    return x ? x : from; /* f(FROM e) has no x; a builder never returns NULL */
}

AstExpr *ast_try_cast(ParseCtx *c, Token name, Token as, AstExpr *x, const char *type)
{
    if (!name_is(name, "try_cast")) {
        parse_syntax_error(c, as);
        return x;
    }
    AstExpr *e = ast_cast(c, x, type, name.pos);
    e->try_cast = true;
    return e;
}

AstExpr *ast_func_trim(ParseCtx *c, Token name, Token where, AstExpr *chars, AstExpr *x)
{
    if (!name_is(name, "trim")) {
        parse_syntax_error(c, where);
        return x;
    }
    const char *f = lower(where.z[0]) == 'l' ? "ltrim" : lower(where.z[0]) == 't' ? "rtrim" : "btrim";
    return special_call(c, name.pos, f, x, chars, NULL);
}

AstExpr *ast_func_position(ParseCtx *c, Token name, Token kw, AstExpr *needle, AstExpr *hay)
{
    if (!name_is(name, "position")) {
        parse_syntax_error(c, kw);
        return needle;
    }
    return special_call(c, name.pos, "position", hay, needle, NULL);
}

AstExpr *ast_func_op(ParseCtx *c, Token op, const char *name, AstExpr *l, AstExpr *r)
{
    (void)op;
    return special_call(c, l->pos, name, l, r, NULL);   /* binary nodes start at their left operand */
}

AstExpr *ast_subquery(ParseCtx *c, Token t, AstSubqueryKind k, AstSelect *q)
{
    AstExpr *e = new_expr(c, AST_SUBQUERY, t.pos, 1);
    e->subq_kind = k;
    e->subquery = q;
    return e;
}

AstExpr *ast_paren(ParseCtx *c, AstExpr *e)
{
    (void)c;
    return e;
}

/* ---- queries ------------------------------------------------------------- */

static AstSelect *new_select(ParseCtx *c, Token first)
{
    SelectBox *b = arena_zalloc(c->a, sizeof *b);
    b->s.pos = first.pos;
    b->off = first.off;
    return &b->s;
}

AstTarget *ast_target(ParseCtx *c, AstExpr *e, const char *alias)
{
    AstTarget *t = arena_zalloc(c->a, sizeof *t);
    t->expr = e;
    t->alias = alias;
    t->pos = e->pos;
    return t;
}

AstOrderItem *ast_order_item(ParseCtx *c, AstExpr *e, bool desc, int nulls)
{
    AstOrderItem *o = arena_zalloc(c->a, sizeof *o);
    o->expr = e;
    o->desc = desc;
    o->nulls = nulls;
    return o;
}

AstSelect *ast_select(ParseCtx *c, Token t, int distinct, AstList *distinct_on, AstList *targets,
                      AstList *from, AstExpr *where, AstList *group_by, AstExpr *having)
{
    AstSelect *s = new_select(c, t);
    s->distinct = distinct || distinct_on;
    s->distinct_on = distinct_on;
    s->targets = targets;
    s->from = from;
    s->where = where;
    s->group_by = group_by;
    s->having = having;
    return s;
}

AstSelect *ast_values(ParseCtx *c, Token t, AstSelect *prev, AstList *row)
{
    if (!prev) {
        prev = new_select(c, t);
    } else if (ast_list_len(row) != ast_list_len((AstList *)AST_AT(prev->values, 0))) {
        werr(c->err, SQLSTATE_SYNTAX_ERROR, t.pos, "VALUES lists must all be the same length");
    }
    prev->values = ast_list_append(c->a, prev->values, row);
    return prev;
}

static bool chain_all(const AstSelect *s, AstSetOp op)
{
    for (; s && s->set_op != SETOP_NONE; s = s->set_rhs)
        if (s->set_op != op)
            return false;
    return true;
}

/*
 * `l op r`. The AST reads a set operation to the right: s combined with
 * the whole of s->set_rhs. So an associative chain (the same UNION, UNION
 * ALL, INTERSECT or INTERSECT ALL throughout) is kept flat by appending at its tail, and
 * any other left operand that is itself a set operation is wrapped as
 * SELECT * FROM (l), which keeps Postgres's left-to-right meaning for
 * EXCEPT and mixed chains.
 */
AstSelect *ast_setop(ParseCtx *c, AstSelect *l, AstSetOp op, bool all, AstSelect *r, Token t)
{
    if (all)
        op = op == SETOP_UNION ? SETOP_UNION_ALL : op == SETOP_EXCEPT ? SETOP_EXCEPT_ALL : SETOP_INTERSECT_ALL;
    SelectBox *lb = (SelectBox *)l;
    int chain = lb->chain + ((SelectBox *)r)->chain + 1;
    if (chain > PARSE_MAX_DEPTH) {
        too_deep(c, t.pos);
        return l;
    }
    if (l->set_op == SETOP_NONE) {
        l->set_op = op;
        l->set_rhs = r;
    } else if (op != SETOP_EXCEPT && op != SETOP_EXCEPT_ALL && chain_all(l, op)) {
        AstSelect *tail = l;
        while (tail->set_op != SETOP_NONE)
            tail = tail->set_rhs;
        tail->set_op = op;
        tail->set_rhs = r;
    } else {
        Token first = {c->sql + lb->off, 0, lb->off, l->pos, 0};
        AstSelect *w = new_select(c, first);
        AstTableRef *sub = arena_zalloc(c->a, sizeof *sub);
        sub->kind = TREF_SUBQUERY;
        sub->pos = l->pos;
        sub->subquery = l;
        w->targets = ast_list_append(c->a, NULL, ast_target(c, ast_star(c, NULL, first), NULL));
        w->from = ast_list_append(c->a, NULL, sub);
        w->set_op = op;
        w->set_rhs = r;
        l = w;
        lb = (SelectBox *)w;
    }
    lb->chain = chain;
    return l;
}

AstSelect *ast_paren_select(ParseCtx *c, Token lp, AstSelect *q)
{
    if (q->set_op == SETOP_NONE && !q->order_by && !q->limit && !q->offset && !q->ctes)
        return q;
    AstSelect *w = new_select(c, lp);
    AstTableRef *sub = arena_zalloc(c->a, sizeof *sub);
    sub->kind = TREF_SUBQUERY;
    sub->pos = lp.pos;
    sub->subquery = q;
    w->targets = ast_list_append(c->a, NULL, ast_target(c, ast_star(c, NULL, lp), NULL));
    w->from = ast_list_append(c->a, NULL, sub);
    ((SelectBox *)w)->paren = true;
    return w;
}

AstSelect *ast_select_finish(ParseCtx *c, const Token *with, AstList *ctes, AstSelect *s,
                             AstList *order_by, LimitSpec lim)
{
    (void)c;
    if (with) {
        s->pos = with->pos;
        ((SelectBox *)s)->off = with->off;
    }
    s->ctes = ctes;
    s->order_by = order_by;
    s->limit = lim.limit;
    s->offset = lim.offset;
    return s;
}

AstCte *ast_cte(ParseCtx *c, Token name, AstList *cols, AstSelect *q)
{
    AstCte *cte = arena_zalloc(c->a, sizeof *cte);
    cte->name = ast_ident(c, name);
    cte->query = q;
    cte->pos = name.pos;
    cte->col_names = cols;
    return cte;
}

AstSelect *ast_with_recursive(AstSelect *q)
{
    q->recursive = true;
    return q;
}

static AstTableRef *new_tref(ParseCtx *c, AstTableRefKind k, int pos, AliasSpec al)
{
    AstTableRef *t = arena_zalloc(c->a, sizeof *t);
    t->kind = k;
    t->pos = pos;
    t->alias = al.name;
    t->col_aliases = al.cols;
    return t;
}

AstTableRef *ast_tref_name(ParseCtx *c, Token name, const char *qualified, AstExpr *systime, AliasSpec al)
{
    AstTableRef *t = new_tref(c, TREF_NAME, name.pos, al);
    t->name = qualified ? qualified : ast_ident(c, name);
    t->system_time = systime;
    return t;
}

AstTableRef *ast_tref_subquery(ParseCtx *c, Token lp, AstSelect *q, AliasSpec al)
{
    AstTableRef *t = new_tref(c, TREF_SUBQUERY, lp.pos, al);
    t->subquery = q;
    return t;
}

AstTableRef *ast_tref_join(ParseCtx *c, AstTableRef *l, AstJoinType jt, AstTableRef *r, AstExpr *on,
                           AstList *using_cols)
{
    int depth = 1;
    for (const AstTableRef *p = l; p->kind == TREF_JOIN; p = p->left)
        depth++;
    if (depth > PARSE_MAX_DEPTH)
        too_deep(c, r->pos);
    AstTableRef *t = new_tref(c, TREF_JOIN, l->pos, (AliasSpec){0});
    t->join_type = jt;
    t->left = l;
    t->right = r;
    t->on = on;
    t->using_cols = using_cols;
    return t;
}

AstTableRef *ast_tref_window(ParseCtx *c, Token fname, TvfInput in, AstList *args, AliasSpec al)
{
    static const struct {
        const char *name;
        AstWindowKind kind;
        int min_args, max_args;   /* after the input and the time column */
        const char *usage;
    } fns[] = {
        {"tumble", WIN_TUMBLE, 1, 2, "TUMBLE(table, time_col, size [, offset])"},
        {"hop", WIN_HOP, 2, 3, "HOP(table, time_col, slide, size [, offset])"},
        {"cumulate", WIN_CUMULATE, 2, 3, "CUMULATE(table, time_col, step, max_size [, offset])"},
        {"session", WIN_SESSION, 1, 1, "SESSION(table, time_col, gap)"},
    };
    const char *name = ast_ident(c, fname);
    int i;
    for (i = 0; i < (int)(sizeof fns / sizeof fns[0]); i++)
        if (strcmp(name, fns[i].name) == 0)
            break;
    if (i == (int)(sizeof fns / sizeof fns[0])) {
        werr(c->err, SQLSTATE_UNDEFINED_FUNCTION, fname.pos, "table function \"%s\" does not exist", name);
        return in.rel;
    }
    int n_rest = ast_list_len(args) - 1;
    if (n_rest < fns[i].min_args || n_rest > fns[i].max_args) {
        werr(c->err, SQLSTATE_SYNTAX_ERROR, fname.pos, "wrong number of arguments to %s: expected %s",
             fns[i].name, fns[i].usage);
        return in.rel;
    }
    AstExpr *tc = AST_AT(args, 0);
    if (tc->kind == AST_FUNC && strcmp(tc->text, "descriptor") == 0 && ast_list_len(tc->args) == 1 &&
        !tc->distinct && !tc->filter && !tc->over)
        tc = AST_AT(tc->args, 0);
    if (tc->kind != AST_COLUMN) {
        werr(c->err, SQLSTATE_SYNTAX_ERROR, tc->pos, "the time column of %s must be a column name", fns[i].name);
        return in.rel;
    }
    if (in.partition && fns[i].kind != WIN_SESSION) {
        werr(c->err, SQLSTATE_SYNTAX_ERROR, fname.pos, "PARTITION BY is only allowed in SESSION windows");
        return in.rel;
    }
    AstTableRef *t = new_tref(c, TREF_WINDOW, fname.pos, al);
    t->win_kind = fns[i].kind;
    t->input = in.rel;
    t->time_col = tc;
    t->win_partition = in.partition;
    for (int k = 1; k < ast_list_len(args); k++)
        t->win_args = ast_list_append(c->a, t->win_args, AST_AT(args, k));
    return t;
}

/* ---- statements ---------------------------------------------------------- */

static AstStmt *new_stmt(ParseCtx *c, AstStmtKind k, int pos, int off)
{
    AstStmt *s = arena_zalloc(c->a, sizeof *s);
    s->kind = k;
    s->pos = pos;
    s->text_start = off;
    s->text_end = -1;
    return s;
}

AstStmt *ast_stmt(ParseCtx *c, AstStmtKind k, Token first)
{
    return new_stmt(c, k, first.pos, first.off);
}

AstStmt *ast_savepoint(ParseCtx *c, Token first, Token dir)
{
    AstStmt *s = new_stmt(c, STMT_CHECKPOINT, first.pos, first.off);
    s->u.savepoint_dir = ast_string(c, dir);
    return s;
}

/* ALTER MATERIALIZED VIEW name RESUME: the only action so far. */
AstStmt *ast_alter_view(ParseCtx *c, Token first, const char *name, Token action)
{
    AstStmt *s = new_stmt(c, STMT_RESUME, first.pos, first.off);
    s->u.resume_view = name;
    if (action.n != 6 || strncasecmp(action.z, "resume", 6) != 0)
        werr(c->err, SQLSTATE_SYNTAX_ERROR, action.pos, "syntax error at or near \"%.*s\"", (int)action.n, action.z);
    return s;
}

AstStmt *ast_alter_source(ParseCtx *c, Token first, const char *name, AstList *options)
{
    AstStmt *s = new_stmt(c, STMT_ALTER_SOURCE, first.pos, first.off);
    AstAlterSource *as = arena_zalloc(c->a, sizeof *as);
    as->name = name;
    as->options = options;
    s->u.alter_source = as;
    return s;
}

AstStmt *ast_user(ParseCtx *c, Token t, AstStmtKind kind, const char *name, const char *password, bool if_exists)
{
    AstStmt *s = new_stmt(c, kind, t.pos, t.off);
    AstUser *u = arena_zalloc(c->a, sizeof *u);
    u->name = name;
    u->password = password;
    u->if_exists = if_exists;
    s->u.user = u;
    return s;
}

AstStmt *ast_stmt_select(ParseCtx *c, AstSelect *q)
{
    /* A whole query in parentheses is that query (its ORDER BY and LIMIT
     * are the result's), unless something was added around it. */
    AstStmt *s = new_stmt(c, STMT_SELECT, q->pos, ((SelectBox *)q)->off);
    if (((SelectBox *)q)->paren && q->set_op == SETOP_NONE && !q->order_by && !q->limit && !q->offset && !q->ctes)
        q = ((AstTableRef *)AST_AT(q->from, 0))->subquery;
    s->u.select = q;
    return s;
}

/* A statement ends at its ';' (Lemon may reduce it only when the next
 * token arrives, so the end travels in the SEMI token, not in the context).
 * An EXPLAINed statement runs to the same end. */
void ast_stmt_done(ParseCtx *c, AstStmt *s, Token semi)
{
    for (AstStmt *p = s; p; p = p->kind == STMT_EXPLAIN ? p->u.explain->stmt : NULL)
        p->text_end = semi.end;
    c->stmts = ast_list_append(c->a, c->stmts, s);
}

/* The statement begun by ast_src_begin / ast_view_begin, or a harmless
 * placeholder if the grammar ever reduced out of order. */
static AstStmt *cur(ParseCtx *c, AstStmtKind k)
{
    if (!c->cur_stmt || c->cur_stmt->kind != k) {
        c->cur_stmt = new_stmt(c, k, 0, 0);
        c->cur_stmt->u.create_source = arena_zalloc(c->a, sizeof(AstCreateSource) > sizeof(AstCreateView)
                                                                ? sizeof(AstCreateSource)
                                                                : sizeof(AstCreateView));
    }
    return c->cur_stmt;
}

void ast_src_begin(ParseCtx *c, Token create, AstObjectKind obj, bool if_not_exists, Token name)
{
    AstStmt *s = new_stmt(c, STMT_CREATE_SOURCE, create.pos, create.off);
    AstCreateSource *cs = arena_zalloc(c->a, sizeof *cs);
    cs->obj = obj;
    cs->name = ast_ident(c, name);
    cs->if_not_exists = if_not_exists;
    s->u.create_source = cs;
    c->cur_stmt = s;
}

void ast_src_column(ParseCtx *c, Token name, const char *type, int cons, AstExpr *generated)
{
    AstCreateSource *cs = cur(c, STMT_CREATE_SOURCE)->u.create_source;
    AstColumnDef *col = arena_zalloc(c->a, sizeof *col);
    col->name = ast_ident(c, name);
    col->type_name = type;
    col->not_null = (cons & 1) != 0;
    col->primary_key = (cons & 2) != 0;
    col->generated = generated;
    col->pos = name.pos;
    cs->columns = ast_list_append(c->a, cs->columns, col);
}

void ast_src_watermark(ParseCtx *c, Token wm, Token col, AstExpr *e)
{
    AstCreateSource *cs = cur(c, STMT_CREATE_SOURCE)->u.create_source;
    if (cs->wm_column) {
        werr(c->err, SQLSTATE_SYNTAX_ERROR, wm.pos, "multiple WATERMARK clauses are not allowed");
        return;
    }
    cs->wm_column = ast_ident(c, col);
    cs->wm_expr = e;
    cs->wm_pos = wm.pos;
}

void ast_src_primary_key(ParseCtx *c, Token pk, AstList *cols)
{
    AstCreateSource *cs = cur(c, STMT_CREATE_SOURCE)->u.create_source;
    if (cs->primary_key) {
        werr(c->err, SQLSTATE_INVALID_TABLE_DEFINITION, pk.pos, "multiple primary keys for table \"%s\" are not allowed", cs->name);
        return;
    }
    cs->primary_key = cols;
}

AstList *ast_include(ParseCtx *c, AstList *l, Token what, const char *alias)
{
    AstInclude *inc = arena_zalloc(c->a, sizeof *inc);
    inc->what = ast_ident(c, what);
    inc->alias = alias;
    inc->pos = what.pos;
    return ast_list_append(c->a, l, inc);
}

AstStmt *ast_src_finish(ParseCtx *c, AstList *includes, bool append_only, AstList *options, FormatSpec f)
{
    AstStmt *s = cur(c, STMT_CREATE_SOURCE);
    AstCreateSource *cs = s->u.create_source;
    cs->includes = includes;
    cs->append_only = append_only;
    cs->options = options;
    cs->format = f.format;
    cs->encode = f.encode;
    cs->encode_options = f.encode_options;
    c->cur_stmt = NULL;
    return s;
}

AstOption *ast_option(ParseCtx *c, const char *key, const char *value, int pos)
{
    AstOption *o = arena_zalloc(c->a, sizeof *o);
    o->key = key;
    o->value = value;
    o->pos = pos;
    return o;
}

void ast_view_begin(ParseCtx *c, Token create, bool or_replace, bool materialized, bool if_not_exists,
                    Token name, AstList *cols)
{
    AstStmt *s = new_stmt(c, STMT_CREATE_VIEW, create.pos, create.off);
    AstCreateView *v = arena_zalloc(c->a, sizeof *v);
    v->or_replace = or_replace;
    v->materialized = materialized;
    v->if_not_exists = if_not_exists;
    v->name = ast_ident(c, name);
    v->col_names = cols;
    s->u.create_view = v;
    c->cur_stmt = s;
}

static void redundant(ParseCtx *c, Token t)
{
    werr(c->err, SQLSTATE_SYNTAX_ERROR, t.pos, "conflicting or redundant options at or near \"%.*s\"", t.n, t.z);
}

void ast_view_emit(ParseCtx *c, Token t, AstEmitMode m)
{
    AstCreateView *v = cur(c, STMT_CREATE_VIEW)->u.create_view;
    if (v->emit != EMIT_DEFAULT)
        redundant(c, t);
    v->emit = m;
}

void ast_view_lateness(ParseCtx *c, Token t, AstExpr *e)
{
    AstCreateView *v = cur(c, STMT_CREATE_VIEW)->u.create_view;
    if (v->allow_lateness)
        redundant(c, t);
    v->allow_lateness = e;
}

void ast_view_late_rows(ParseCtx *c, Token t, const char *name)
{
    AstCreateView *v = cur(c, STMT_CREATE_VIEW)->u.create_view;
    if (v->late_rows_into)
        redundant(c, t);
    v->late_rows_into = name;
}

void ast_view_options(ParseCtx *c, Token t, AstList *options)
{
    AstCreateView *v = cur(c, STMT_CREATE_VIEW)->u.create_view;
    if (v->options)
        redundant(c, t);
    v->options = options;
}

AstStmt *ast_view_finish(ParseCtx *c, AstSelect *q)
{
    AstStmt *s = cur(c, STMT_CREATE_VIEW);
    s->u.create_view->query = q;
    s->u.create_view->query_pos = q->pos;
    c->cur_stmt = NULL;
    return s;
}

AstStmt *ast_sink(ParseCtx *c, Token create, bool if_not_exists, Token name, const char *from_name,
                  AstSelect *q, AstList *options, FormatSpec f)
{
    AstStmt *s = new_stmt(c, STMT_CREATE_SINK, create.pos, create.off);
    AstCreateSink *k = arena_zalloc(c->a, sizeof *k);
    k->name = ast_ident(c, name);
    k->if_not_exists = if_not_exists;
    k->from_name = from_name;
    k->query = q;
    k->options = options;
    k->format = f.format;
    k->encode = f.encode;
    k->encode_options = f.encode_options;
    s->u.create_sink = k;
    return s;
}

AstStmt *ast_drop(ParseCtx *c, Token t, AstObjectKind obj, bool if_exists, AstList *names, bool cascade)
{
    AstStmt *s = new_stmt(c, STMT_DROP, t.pos, t.off);
    AstDrop *d = arena_zalloc(c->a, sizeof *d);
    d->obj = obj;
    d->if_exists = if_exists;
    d->names = names;
    d->cascade = cascade;
    s->u.drop = d;
    return s;
}

AstStmt *ast_alter_rename(ParseCtx *c, Token t, AstObjectKind obj, bool if_exists, const char *name, Token new_name)
{
    AstStmt *s = new_stmt(c, STMT_ALTER_RENAME, t.pos, t.off);
    AstAlterRename *r = arena_zalloc(c->a, sizeof *r);
    r->obj = obj;
    r->if_exists = if_exists;
    r->name = name;
    r->new_name = ast_ident(c, new_name);
    r->new_pos = new_name.pos;
    s->u.rename = r;
    return s;
}

AstStmt *ast_swap_view(ParseCtx *c, Token t, const char *name, Token word, Token other)
{
    AstStmt *s = ast_alter_rename(c, t, OBJ_MATERIALIZED_VIEW, false, name, other);
    s->kind = STMT_SWAP_VIEW;
    if (word.n != 4 || strncasecmp(word.z, "swap", 4) != 0)
        werr(c->err, SQLSTATE_SYNTAX_ERROR, word.pos, "syntax error at or near \"%.*s\"", (int)word.n, word.z);
    return s;
}

AstStmt *ast_insert(ParseCtx *c, Token t, Token table, AstList *cols, AstSelect *q)
{
    AstStmt *s = new_stmt(c, STMT_INSERT, t.pos, t.off);
    AstInsert *ins = arena_zalloc(c->a, sizeof *ins);
    ins->table = ast_ident(c, table);
    ins->columns = cols;
    ins->query = q;
    s->u.insert = ins;
    return s;
}

AstStmt *ast_update(ParseCtx *c, Token t, Token table, AstList *sets, AstExpr *where)
{
    AstStmt *s = new_stmt(c, STMT_UPDATE, t.pos, t.off);
    AstUpdate *u = arena_zalloc(c->a, sizeof *u);
    u->table = ast_ident(c, table);
    for (int i = 0; i + 1 < ast_list_len(sets); i += 2) {
        u->set_cols = ast_list_append(c->a, u->set_cols, AST_AT(sets, i));
        u->set_exprs = ast_list_append(c->a, u->set_exprs, AST_AT(sets, i + 1));
    }
    u->where = where;
    s->u.update = u;
    return s;
}

AstStmt *ast_delete(ParseCtx *c, Token t, Token table, AstExpr *where)
{
    AstStmt *s = new_stmt(c, STMT_DELETE, t.pos, t.off);
    AstDelete *d = arena_zalloc(c->a, sizeof *d);
    d->table = ast_ident(c, table);
    d->where = where;
    s->u.delete_ = d;
    return s;
}

AstStmt *ast_explain(ParseCtx *c, Token t, AstList *options, AstStmt *inner)
{
    AstStmt *s = new_stmt(c, STMT_EXPLAIN, t.pos, t.off);
    AstExplain *e = arena_zalloc(c->a, sizeof *e);
    e->options = options;
    e->stmt = inner;
    s->u.explain = e;
    return s;
}

AstStmt *ast_explain_view(ParseCtx *c, Token t, AstList *options, const char *view)
{
    AstStmt *s = ast_explain(c, t, options, NULL);
    s->u.explain->view = view;
    return s;
}

AstStmt *ast_show_isolation(ParseCtx *c, Token t, Token isolation, Token level)
{
    if (strcmp(ast_ident(c, isolation), "isolation") != 0 || strcmp(ast_ident(c, level), "level") != 0)
        werr(c->err, SQLSTATE_SYNTAX_ERROR, isolation.pos, "syntax error at or near \"%s\"",
             ast_ident(c, isolation));
    return ast_show(c, t, "transaction_isolation", OBJ_SOURCE, NULL);
}

AstStmt *ast_show(ParseCtx *c, Token t, const char *what, AstObjectKind obj, const char *name)
{
    AstStmt *s = new_stmt(c, STMT_SHOW, t.pos, t.off);
    AstShow *sh = arena_zalloc(c->a, sizeof *sh);
    if (strncmp(what, "materialized.", 13) == 0) {
        if (strcmp(what + 13, "views") != 0)
            werr(c->err, SQLSTATE_SYNTAX_ERROR, t.pos, "syntax error at or near \"%s\"", what + 13);
        what = "materialized views";
    }
    sh->what = what;
    sh->obj = obj;
    sh->name = name;
    s->u.show = sh;
    return s;
}

AstStmt *ast_set(ParseCtx *c, Token t, AstStmtKind k, const char *name, const char *value)
{
    AstStmt *s = new_stmt(c, k, t.pos, t.off);
    AstSet *set = arena_zalloc(c->a, sizeof *set);
    set->name = name;
    set->value = value;
    s->u.set = set;
    return s;
}

AstStmt *ast_txn(ParseCtx *c, Token t, AstTxnKind k)
{
    AstStmt *s = new_stmt(c, STMT_TRANSACTION, t.pos, t.off);
    s->u.txn = k;
    return s;
}

/* ast_txn_word's flags: a word was taken; it was TRANSACTION or WORK. */
#define TXN_WORDS_SEEN 0x100
#define TXN_WORD_TXN 0x200

/* Phases of ast_txn_word: what the next word may be. */
enum {
    TXN_MODE,          /* a mode's first word (or a comma between modes) */
    TXN_ISOLATION,     /* after ISOLATION: LEVEL */
    TXN_LEVEL,         /* after LEVEL: SERIALIZABLE | REPEATABLE | READ */
    TXN_REPEATABLE,    /* after REPEATABLE: READ */
    TXN_LEVEL_READ,    /* after LEVEL READ: COMMITTED | UNCOMMITTED */
    TXN_READ,          /* after READ: WRITE | ONLY */
    TXN_NOT,           /* after NOT: DEFERRABLE */
};

int ast_txn_word(ParseCtx *c, int state, Token w)
{
    int phase = state & 0xff, seen = state & TXN_WORDS_SEEN, flags = state & ~0xff;
    char v[16];
    snprintf(v, sizeof v, "%.*s", w.n < 15 ? w.n : 15, w.z);
    for (char *p = v; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    int next = -1;
    switch (phase) {
    case TXN_MODE:
        if (!strcmp(v, ","))
            next = seen ? TXN_MODE : -1;
        else if (!seen && (!strcmp(v, "transaction") || !strcmp(v, "work")))
            next = TXN_MODE | TXN_WORD_TXN;
        else if (!strcmp(v, "isolation"))
            next = TXN_ISOLATION;
        else if (!strcmp(v, "read"))
            next = TXN_READ;
        else if (!strcmp(v, "deferrable"))
            next = TXN_MODE;
        else if (!strcmp(v, "not"))
            next = TXN_NOT;
        break;
    case TXN_ISOLATION: next = !strcmp(v, "level") ? TXN_LEVEL : -1; break;
    case TXN_LEVEL:
        next = !strcmp(v, "serializable") ? TXN_MODE : !strcmp(v, "repeatable") ? TXN_REPEATABLE
             : !strcmp(v, "read") ? TXN_LEVEL_READ : -1;
        break;
    case TXN_REPEATABLE: next = !strcmp(v, "read") ? TXN_MODE : -1; break;
    case TXN_LEVEL_READ: next = !strcmp(v, "committed") || !strcmp(v, "uncommitted") ? TXN_MODE : -1; break;
    case TXN_READ:
        if (!strcmp(v, "only")) {
            werr(c->err, SQLSTATE_NOT_SUPPORTED, w.pos, "feature not supported: READ ONLY transactions");
            werr_hint(c->err, "weir has no transactions: each statement applies on its own. Leave out READ ONLY.");
            return state;
        }
        next = !strcmp(v, "write") ? TXN_MODE : -1;
        break;
    case TXN_NOT: next = !strcmp(v, "deferrable") ? TXN_MODE : -1; break;
    }
    if (next < 0) {
        werr(c->err, SQLSTATE_SYNTAX_ERROR, w.pos, "syntax error at or near \"%.*s\"", w.n, w.z);
        return state;
    }
    return next | flags | TXN_WORDS_SEEN;
}

AstStmt *ast_txn_begin(ParseCtx *c, Token t, int state, bool start)
{
    if (start && (state & TXN_WORD_TXN))
        werr(c->err, SQLSTATE_SYNTAX_ERROR, t.pos, "syntax error at or near \"transaction\"");
    else if ((state & 0xff) != TXN_MODE)
        werr(c->err, SQLSTATE_SYNTAX_ERROR, t.pos, "syntax error at end of BEGIN's transaction modes");
    return ast_txn(c, t, TXN_BEGIN);
}

AstStmt *ast_subscribe(ParseCtx *c, Token t, const char *view, AstList *options)
{
    AstStmt *s = new_stmt(c, STMT_SUBSCRIBE, t.pos, t.off);
    AstSubscribe *sub = arena_zalloc(c->a, sizeof *sub);
    sub->view = view;
    sub->options = options;
    s->u.subscribe = sub;
    return s;
}

/* ---- cursors ---------------------------------------------------------------- */

enum { CURSOR_WORD_NO = 1 };   /* the last word was NO (NO SCROLL) */

int ast_cursor_word(ParseCtx *c, int words, Token w)
{
    const char *v = ast_ident(c, w);
    if (!strcmp(v, "no"))
        return CURSOR_WORD_NO;
    if (!strcmp(v, "scroll") && (words & CURSOR_WORD_NO))
        return 0;
    if (!strcmp(v, "insensitive") || !strcmp(v, "asensitive"))
        return 0;   /* a weir cursor is a snapshot or a changefeed: never sensitive */
    if (!strcmp(v, "scroll") || !strcmp(v, "binary"))
        werr(c->err, SQLSTATE_NOT_SUPPORTED, w.pos, "feature not supported: %s cursors", v);
    else
        werr(c->err, SQLSTATE_SYNTAX_ERROR, w.pos, "syntax error at or near \"%.*s\"", w.n, w.z);
    return 0;
}

int ast_cursor_hold(ParseCtx *c, bool with, Token w)
{
    if (strcmp(ast_ident(c, w), "hold") != 0)
        werr(c->err, SQLSTATE_SYNTAX_ERROR, w.pos, "syntax error at or near \"%.*s\"", w.n, w.z);
    else if (with)
        werr(c->err, SQLSTATE_NOT_SUPPORTED, w.pos, "feature not supported: WITH HOLD cursors");
    return with;
}

AstStmt *ast_declare(ParseCtx *c, Token t, Token name, int words, int hold, AstStmt *query)
{
    (void)words;
    (void)hold;
    AstStmt *s = new_stmt(c, STMT_DECLARE, t.pos, t.off);
    AstDeclare *d = arena_zalloc(c->a, sizeof *d);
    d->name = ast_ident(c, name);
    d->query = query;
    s->u.declare = d;
    return s;
}

long ast_fetch_count(ParseCtx *c, Token n)
{
    long v = 0;
    for (int i = 0; i < n.n; i++) {
        if (n.z[i] < '0' || n.z[i] > '9' || v > (LONG_MAX - 9) / 10) {
            werr(c->err, SQLSTATE_SYNTAX_ERROR, n.pos, "FETCH count out of range at or near \"%.*s\"", n.n, n.z);
            return 0;
        }
        v = v * 10 + (n.z[i] - '0');
    }
    return v;
}

long ast_fetch_direction(ParseCtx *c, Token d, long count)
{
    const char *v = ast_ident(c, d);
    if (!strcmp(v, "next") && count == 1)
        return 1;
    if (!strcmp(v, "forward"))
        return count;
    if (!strcmp(v, "backward") || !strcmp(v, "prior") || !strcmp(v, "first") || !strcmp(v, "last") ||
        !strcmp(v, "absolute") || !strcmp(v, "relative"))
        werr(c->err, SQLSTATE_NOT_SUPPORTED, d.pos, "feature not supported: FETCH %s (cursors only move forward)",
             v);
    else
        werr(c->err, SQLSTATE_SYNTAX_ERROR, d.pos, "syntax error at or near \"%.*s\"", d.n, d.z);
    return 0;
}

AstStmt *ast_fetch(ParseCtx *c, Token t, long count, Token name, AstList *options)
{
    AstStmt *s = new_stmt(c, STMT_FETCH, t.pos, t.off);
    AstFetch *f = arena_zalloc(c->a, sizeof *f);
    f->name = ast_ident(c, name);
    f->count = count;
    f->options = options;
    s->u.fetch = f;
    return s;
}

AstStmt *ast_close(ParseCtx *c, Token t, const Token *name)
{
    AstStmt *s = new_stmt(c, STMT_CLOSE, t.pos, t.off);
    s->u.close_name = name ? ast_ident(c, *name) : NULL;
    return s;
}

/* COPY (SUBSCRIBE ...) TO STDOUT: the same statement, starting at COPY. */
AstStmt *ast_copy_subscribe(ParseCtx *c, Token copy, AstStmt *sub, AstList *copy_options)
{
    sub->pos = copy.pos;
    sub->text_start = copy.off;
    sub->u.subscribe->copy = true;
    sub->u.subscribe->copy_options = copy_options;
    return sub;
}

/* ---- the driver ---------------------------------------------------------- */

/* Walks the input one token at a time, counting characters for positions. */
typedef struct Lexer {
    const char *sql;
    int off;     /* byte offset of the next unread byte */
    int chars;   /* characters before off */
} Lexer;

static int count_chars(const char *z, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += ((unsigned char)z[i] & 0xC0) != 0x80;
    return k;
}

/* Next grammar token into t and type: 1, or 0 at the end, or -1 with an error
 * recorded for a token that cannot be read. */
static int lex(ParseCtx *c, Lexer *L, Token *t, int *type)
{
    for (;;) {
        const char *z = L->sql + L->off;
        int n = parse_get_token((const unsigned char *)z, type);
        if (n == 0)
            return 0;
        t->z = z;
        t->n = n;
        t->off = L->off;
        t->pos = L->chars + 1;
        L->off += n;
        L->chars += count_chars(z, n);
        int show = n > 32 ? 32 : n;
        switch (*type) {
        case TK_SPACE:
            continue;
        case TK_UNTERM_STRING:
            return werr(c->err, SQLSTATE_SYNTAX_ERROR, t->pos, "unterminated quoted string at or near \"%.*s\"", show, z);
        case TK_UNTERM_IDENT:
            return werr(c->err, SQLSTATE_SYNTAX_ERROR, t->pos, "unterminated quoted identifier at or near \"%.*s\"", show, z);
        case TK_UNTERM_COMMENT:
            return werr(c->err, SQLSTATE_SYNTAX_ERROR, t->pos, "unterminated /* comment at or near \"%.*s\"", show, z);
        case TK_ILLEGAL:
            parse_syntax_error(c, *t);
            return -1;
        default:
            return 1;
        }
    }
}

/* Feeds one token; ';' ends the current statement (empty ones are skipped).
 * Counts parentheses: the nesting limit is checked before Lemon sees them. */
static void feed(ParseCtx *c, void *p, Token t, int type, int *depth)
{
    if (type == TK_SEMI) {
        if (c->stmt_start < 0)
            return;
        t.end = c->last_end;
        c->n_fed++;
        WeirParser(p, TK_SEMI, t);
        c->stmt_start = -1;
        *depth = 0;
        return;
    }
    if (c->stmt_start < 0)
        c->stmt_start = t.off;
    if (type == TK_LP && ++*depth > PARSE_MAX_DEPTH) {
        too_deep(c, t.pos);
        return;
    }
    if (type == TK_RP && *depth > 0)
        --*depth;
    c->last_end = t.off + t.n;
    c->n_fed++;
    WeirParser(p, type, t);
}

int parse_sql(const char *sql, Arena *a, AstStmt ***stmts, int *n_stmts, WError *err)
{
    return parse_sql_params(sql, a, stmts, n_stmts, NULL, NULL, err);
}

void parse_bind_param(Arena *a, AstExpr *e, const char *value)
{
    e->kind = AST_LITERAL;
    e->lit_kind = value ? LIT_STRING : LIT_NULL;
    e->text = value ? arena_strdup(a, value) : "null";
}

int parse_sql_params(const char *sql, Arena *a, AstStmt ***stmts, int *n_stmts, AstExpr ***params, int *n_params,
                     WError *err)
{
    if (params) {
        *params = NULL;
        *n_params = 0;
    }
    *stmts = NULL;
    *n_stmts = 0;
    if (!sql)
        sql = "";
    size_t len = strnlen(sql, (size_t)PARSE_MAX_SQL + 1);
    if (len > PARSE_MAX_SQL)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "statement is too long (limit %d bytes)", PARSE_MAX_SQL);

    ParseCtx c = {.a = a, .sql = sql, .err = err, .stmt_start = -1};
    Lexer L = {.sql = sql};
    void *p = WeirParserAlloc(xmalloc, &c);
    int depth = 0;
    Token t, peek;
    int type, peek_type, r, peek_r = 0;
    bool have_peek = false;
    /* Paren depths just inside `position(`: an IN at such a depth is
     * POS_IN (position(a IN b)), never the IN predicate. */
    int pos_depth[PARSE_MAX_DEPTH + 1], n_pos = 0;
    bool pos_open = false;

    for (;;) {
        if (have_peek) {
            t = peek;
            type = peek_type;
            r = peek_r;
            have_peek = false;
        } else {
            r = lex(&c, &L, &t, &type);
        }
        if (r <= 0)
            break;
        /* One token of lookahead makes the *_LA tokens (see parse.y). */
        if (type == TK_NOT || type == TK_WITH || type == TK_EMIT || type == TK_ALLOW || type == TK_LATE) {
            peek_r = lex(&c, &L, &peek, &peek_type);
            have_peek = true;
            if (peek_r > 0 && type == TK_NOT &&
                (peek_type == TK_IN || peek_type == TK_LIKE || peek_type == TK_ILIKE || peek_type == TK_BETWEEN ||
                 peek_type == TK_SIMILAR))
                type = TK_NOT_LA;
            if (peek_r > 0 && type == TK_WITH && peek_type == TK_TIME)
                type = TK_WITH_LA;
            /* A view's trailing clauses, so that `FROM t EMIT ON WINDOW CLOSE`
             * never reads EMIT as an alias of t. */
            if (peek_r > 0 && type == TK_EMIT && (peek_type == TK_CHANGES || peek_type == TK_ON))
                type = TK_EMIT_LA;
            if (peek_r > 0 && type == TK_ALLOW && peek_type == TK_LATENESS)
                type = TK_ALLOW_LA;
            if (peek_r > 0 && type == TK_LATE && peek_type == TK_ROWS)
                type = TK_LATE_LA;
        }
        if (type == TK_ID && t.n == 8 && strncasecmp(t.z, "position", 8) == 0) {
            peek_r = lex(&c, &L, &peek, &peek_type);
            have_peek = true;
            pos_open = peek_r > 0 && peek_type == TK_LP;
        } else if (type == TK_IN && n_pos > 0 && depth == pos_depth[n_pos - 1]) {
            type = TK_POS_IN;
        }
        bool opens_position = pos_open && type == TK_LP;
        feed(&c, p, t, type, &depth);
        if (err->set)
            break;
        if (opens_position) {
            pos_open = false;
            if (n_pos <= PARSE_MAX_DEPTH)
                pos_depth[n_pos++] = depth;
        }
        while (n_pos > 0 && depth < pos_depth[n_pos - 1])
            n_pos--;
        if (type == TK_SEMI)
            n_pos = 0;
    }
    if (!err->set && c.n_fed > 0) {
        Token eof = {sql + len, 0, (int)len, L.chars + 1, (int)len};
        if (c.stmt_start >= 0)
            feed(&c, p, eof, TK_SEMI, &depth);
        if (!err->set)
            WeirParser(p, 0, eof);
    }
    WeirParserFree(p, free);
    if (err->set)
        return -1;
    *stmts = c.stmts ? (AstStmt **)c.stmts->items : NULL;
    *n_stmts = ast_list_len(c.stmts);
    if (params) {
        *params = c.params ? (AstExpr **)c.params->items : NULL;
        *n_params = ast_list_len(c.params);
    }
    return 0;
}
