/*
 * parser_int.h: private interface between the tokenizer, the Lemon grammar
 * (parse.y) and the AST builders (ast.c). Never included from outside
 * parser/.
 *
 * Data flow: parse_sql() (ast.c) pulls tokens from parse_get_token()
 * (tokenize.c), feeds them to the generated Lemon parser, whose one-line
 * actions call the ast_* builders below; they allocate nodes in the
 * statement arena held by the ParseCtx and record the first error on it.
 */
#ifndef WEIR_PARSER_INT_H
#define WEIR_PARSER_INT_H

#include <stddef.h>

#include "parser.h"

/*
 * A token as the grammar sees it: a slice of the input, never copied until
 * a builder needs the text. `n == 0` marks the synthetic end of input.
 */
typedef struct Token {
    const char *z;   /* first byte of the token in the input */
    int n;           /* length in bytes */
    int off;         /* byte offset of z in the input */
    int pos;         /* 1-based character (not byte) position of z */
    int end;         /* SEMI only: byte offset where the statement's text ends */
} Token;

/* Token types the grammar never sees; numbered above every TK_ of parse.h. */
#define TK_SPACE   1000   /* whitespace and comments */
#define TK_ILLEGAL 1001   /* a byte that starts no token */
#define TK_UNTERM_STRING  1002  /* '... or E'... without its closing quote */
#define TK_UNTERM_IDENT   1003  /* "... without its closing quote */
#define TK_UNTERM_COMMENT 1004  /* slash-star without its closing star-slash */

/*
 * Reads one token at z (NUL-terminated) and returns its length in bytes
 * (always >= 1 unless *z is NUL, when it returns 0), with its type in *type:
 * a TK_ constant of parse.h, or one of the TK_ codes above. Keywords are
 * recognized case-insensitively; every other word is TK_ID.
 */
int parse_get_token(const unsigned char *z, int *type);

/* The keyword code for word z[0..n), or TK_ID when it is no keyword. */
int parse_keyword_code(const char *z, int n);

/* Optional pieces of statements, passed between grammar rules by value. */
typedef struct AliasSpec {
    const char *name;        /* alias, or NULL */
    AstList *cols;           /* const char*: alias(c1, c2), or NULL */
} AliasSpec;

typedef struct FormatSpec {
    const char *format;      /* FORMAT x, lower case, or NULL */
    const char *encode;      /* ENCODE y, lower case, or NULL */
    AstList *encode_options; /* AstOption*: ENCODE y (...), or NULL */
} FormatSpec;

typedef struct TvfInput {        /* the first argument of a window TVF */
    AstTableRef *rel;            /* TREF_NAME or TREF_SUBQUERY */
    AstList *partition;          /* AstExpr*: TABLE t PARTITION BY ..., or NULL */
} TvfInput;

typedef struct LimitSpec {
    AstExpr *limit;
    AstExpr *offset;
} LimitSpec;

/*
 * The parse context, Lemon's %extra_context. One per parse_sql() call. The
 * cur_* pointers hold the statement being built by rules that add pieces
 * one at a time (columns of CREATE SOURCE, clauses after a view's query),
 * as SQLite's pParse->pNewTable does; statements of those kinds never nest.
 */
typedef struct ParseCtx {
    Arena *a;                    /* the statement arena: every node lives here */
    const char *sql;             /* the whole input */
    WError *err;                 /* first error wins */
    AstList *stmts;              /* AstStmt*: finished statements */
    int stmt_start;              /* byte offset of the current statement's first token, -1 = none yet */
    int last_end;                /* byte offset just past the last token fed (not counting ';') */
    int n_fed;                   /* tokens given to the grammar so far */
    AstStmt *cur_stmt;           /* CREATE SOURCE/VIEW/SINK being built */
    AstList *params;             /* AstExpr*: every $n placeholder, in text order */
} ParseCtx;

/* ---- builders called from grammar actions (ast.c) ------------------------ */

void parse_syntax_error(ParseCtx *c, Token t);
/* Called by parse_syntax_error: when the statement holds SQL weir does not
 * support (yet) at or before t, records 0A000 with a hint and returns true
 * (unsupported.c). */
bool parse_unsupported(ParseCtx *c, Token t);
void parse_stack_overflow(ParseCtx *c);
void ast_stmt_done(ParseCtx *c, AstStmt *s, Token semi);

const char *ast_ident(ParseCtx *c, Token t);            /* folded or unquoted */
const char *ast_string(ParseCtx *c, Token t);           /* unescaped '...' or E'...' */
const char *ast_token_text(ParseCtx *c, Token t);       /* as written, lower-cased */
const char *ast_join_dotted(ParseCtx *c, const char *l, const char *r);
AstList *ast_name_list(ParseCtx *c, AstList *l, Token t);

/* expressions */
AstExpr *ast_lit(ParseCtx *c, AstLitKind k, Token t);
AstExpr *ast_lit_typed(ParseCtx *c, Token type, Token str);
AstExpr *ast_lit_interval(ParseCtx *c, Token kw, Token str, const char *unit);
AstExpr *ast_column(ParseCtx *c, const Token *qual, Token name);
AstExpr *ast_star(ParseCtx *c, const Token *qual, Token star);
AstExpr *ast_param(ParseCtx *c, Token t);
AstExpr *ast_unary(ParseCtx *c, AstOp op, Token t, AstExpr *e);
AstExpr *ast_binary(ParseCtx *c, AstOp op, AstExpr *l, AstExpr *r);
AstExpr *ast_func(ParseCtx *c, Token name, AstList *args, bool distinct, bool star);
AstExpr *ast_func_name(ParseCtx *c, Token kw, const char *name);
AstExpr *ast_func_decorate(ParseCtx *c, AstExpr *f, AstExpr *filter, AstWindowSpec *over);
AstWindowSpec *ast_window_spec(ParseCtx *c, AstList *partition_by, AstList *order_by);
AstExpr *ast_cast(ParseCtx *c, AstExpr *e, const char *type, int pos);
AstExpr *ast_case(ParseCtx *c, Token t, AstExpr *operand, AstList *whens, AstExpr *else_);
AstExpr *ast_in(ParseCtx *c, AstExpr *e, AstList *list, bool negated);
AstExpr *ast_in_select(ParseCtx *c, AstExpr *e, AstSelect *q, bool negated);
AstExpr *ast_between(ParseCtx *c, AstExpr *e, AstExpr *lo, AstExpr *hi, bool negated);
AstExpr *ast_is(ParseCtx *c, AstExpr *e, AstIsKind k, bool negated, AstExpr *other);
AstExpr *ast_like(ParseCtx *c, AstExpr *e, AstExpr *pat, AstExpr *esc, bool negated, bool ilike);
AstExpr *ast_try_cast(ParseCtx *c, Token name, Token as, AstExpr *x, const char *type);
AstExpr *ast_similar(ParseCtx *c, Token t, AstExpr *e, AstExpr *pat);
AstExpr *ast_extract(ParseCtx *c, Token kw, const char *field, AstExpr *e);
/* SQL's call forms with keywords inside the parentheses, rewritten as plain
 * calls (kw is the FROM/FOR/IN token, for the syntax error when the name is
 * not one of these functions):
 *   substring(x FROM f [FOR n]) -> substring(x, f[, n]); substring(x FOR n) -> substring(x, 1, n)
 *   trim([BOTH|LEADING|TRAILING] [chars] FROM x) -> btrim|ltrim|rtrim(x[, chars])
 *   position(a IN b) -> position(b, a)
 *   l -> r, l ->> r (JSON operators) -> a call named "->" / "->>" */
AstExpr *ast_func_from(ParseCtx *c, Token name, Token kw, AstExpr *x, AstExpr *from, AstExpr *count);
AstExpr *ast_func_trim(ParseCtx *c, Token name, Token where, AstExpr *chars, AstExpr *x);
AstExpr *ast_func_position(ParseCtx *c, Token name, Token kw, AstExpr *needle, AstExpr *hay);
AstExpr *ast_func_op(ParseCtx *c, Token op, const char *name, AstExpr *l, AstExpr *r);
AstExpr *ast_subquery(ParseCtx *c, Token t, AstSubqueryKind k, AstSelect *q);
AstExpr *ast_paren(ParseCtx *c, AstExpr *e);
AstList *ast_list2(ParseCtx *c, AstList *l, void *x, void *y);

/* type names */
const char *ast_type_name(ParseCtx *c, Token t);
const char *ast_type_tz(ParseCtx *c, const char *base, bool with_tz, Token at);
/* A type with modifiers: "numeric(10,2)" keeps them (they change values);
 * other types drop them, as weir has no length limits (varchar(10) is text). */
const char *ast_type_mod(ParseCtx *c, const char *base, Token prec, const Token *scale);

/* queries */
AstTarget *ast_target(ParseCtx *c, AstExpr *e, const char *alias);
AstOrderItem *ast_order_item(ParseCtx *c, AstExpr *e, bool desc, int nulls);
AstSelect *ast_select(ParseCtx *c, Token t, int distinct, AstList *distinct_on, AstList *targets,
                      AstList *from, AstExpr *where, AstList *group_by, AstExpr *having);
AstSelect *ast_values(ParseCtx *c, Token t, AstSelect *prev, AstList *row);
AstSelect *ast_setop(ParseCtx *c, AstSelect *l, AstSetOp op, bool all, AstSelect *r, Token t);
AstSelect *ast_select_finish(ParseCtx *c, const Token *with, AstList *ctes, AstSelect *s,
                             AstList *order_by, LimitSpec lim);
AstCte *ast_cte(ParseCtx *c, Token name, AstList *cols, AstSelect *q);
/* WITH RECURSIVE: recorded as 0A000 at the RECURSIVE token. */
/* Marks q's WITH list as WITH RECURSIVE. Returns q. */
AstSelect *ast_with_recursive(AstSelect *q);
AstTableRef *ast_tref_name(ParseCtx *c, Token name, const char *qualified, AstExpr *systime, AliasSpec al);
AstTableRef *ast_tref_subquery(ParseCtx *c, Token lp, AstSelect *q, AliasSpec al);
AstTableRef *ast_tref_join(ParseCtx *c, AstTableRef *l, AstJoinType jt, AstTableRef *r, AstExpr *on,
                           AstList *using_cols);
AstTableRef *ast_tref_window(ParseCtx *c, Token fname, TvfInput in, AstList *args, AliasSpec al);

/* statements */
AstStmt *ast_stmt(ParseCtx *c, AstStmtKind k, Token first);
AstStmt *ast_savepoint(ParseCtx *c, Token first, Token dir);
AstStmt *ast_alter_view(ParseCtx *c, Token first, const char *name, Token action);
AstStmt *ast_alter_source(ParseCtx *c, Token first, const char *name, AstList *options);
/* SHOW TRANSACTION ISOLATION LEVEL (what SQLAlchemy asks): transaction_isolation. */
AstStmt *ast_show_isolation(ParseCtx *c, Token t, Token isolation, Token level);
/* CREATE/ALTER/DROP USER; password NULL = not given, "" = PASSWORD NULL. */
AstStmt *ast_user(ParseCtx *c, Token t, AstStmtKind kind, const char *name, const char *password, bool if_exists);
AstStmt *ast_stmt_select(ParseCtx *c, AstSelect *q);
void ast_src_begin(ParseCtx *c, Token create, AstObjectKind obj, bool if_not_exists, Token name);
void ast_src_column(ParseCtx *c, Token name, const char *type, int cons, AstExpr *generated);
void ast_src_watermark(ParseCtx *c, Token wm, Token col, AstExpr *e);
void ast_src_primary_key(ParseCtx *c, Token pk, AstList *cols);
AstList *ast_include(ParseCtx *c, AstList *l, Token what, const char *alias);
AstStmt *ast_src_finish(ParseCtx *c, AstList *includes, bool append_only, AstList *options, FormatSpec f);
AstOption *ast_option(ParseCtx *c, const char *key, const char *value, int pos);
void ast_view_begin(ParseCtx *c, Token create, bool or_replace, bool materialized, bool if_not_exists,
                    Token name, AstList *cols);
void ast_view_emit(ParseCtx *c, Token t, AstEmitMode m);
void ast_view_lateness(ParseCtx *c, Token t, AstExpr *e);
void ast_view_late_rows(ParseCtx *c, Token t, const char *name);
void ast_view_options(ParseCtx *c, Token t, AstList *options);
AstStmt *ast_view_finish(ParseCtx *c, AstSelect *q);
AstStmt *ast_sink(ParseCtx *c, Token create, bool if_not_exists, Token name, const char *from_name,
                  AstSelect *q, AstList *options, FormatSpec f);
AstStmt *ast_drop(ParseCtx *c, Token t, AstObjectKind obj, bool if_exists, AstList *names, bool cascade);
/* ALTER MATERIALIZED VIEW name <word> WITH other: word must be SWAP. */
AstStmt *ast_swap_view(ParseCtx *c, Token t, const char *name, Token word, Token other);
AstStmt *ast_alter_rename(ParseCtx *c, Token t, AstObjectKind obj, bool if_exists, const char *name, Token new_name);
AstStmt *ast_insert(ParseCtx *c, Token t, Token table, AstList *cols, AstSelect *q);
AstStmt *ast_update(ParseCtx *c, Token t, Token table, AstList *sets, AstExpr *where);
AstStmt *ast_delete(ParseCtx *c, Token t, Token table, AstExpr *where);
AstStmt *ast_explain(ParseCtx *c, Token t, AstList *options, AstStmt *inner);
/* EXPLAIN [opts] MATERIALIZED VIEW view: explains the running view (no inner statement). */
AstStmt *ast_explain_view(ParseCtx *c, Token t, AstList *options, const char *view);
/* (q) as a set operation's operand or a whole query: q itself when it is a
 * plain SELECT, else SELECT * FROM (q), so its own ORDER BY, LIMIT and set
 * operations stay inside. */
AstSelect *ast_paren_select(ParseCtx *c, Token lp, AstSelect *q);
AstStmt *ast_show(ParseCtx *c, Token t, const char *what, AstObjectKind obj, const char *name);
AstStmt *ast_set(ParseCtx *c, Token t, AstStmtKind k, const char *name, const char *value);
AstStmt *ast_txn(ParseCtx *c, Token t, AstTxnKind k);
/* BEGIN's transaction modes, a word at a time: the state (a phase, and
 * flags: a word was taken, TRANSACTION or WORK was) after word w, with a
 * syntax error on a word out of place. ISOLATION LEVEL <any level>, READ
 * WRITE and [NOT] DEFERRABLE are accepted (each statement applies on its
 * own, so none changes anything); READ ONLY is 0A000. ast_txn_begin checks
 * that the last mode is complete, and for START TRANSACTION (start) that no
 * second TRANSACTION came. */
int ast_txn_word(ParseCtx *c, int state, Token w);
AstStmt *ast_txn_begin(ParseCtx *c, Token t, int state, bool start);
AstStmt *ast_subscribe(ParseCtx *c, Token t, const char *view, AstList *options);
/* Cursors. ast_cursor_word folds DECLARE's words before CURSOR into flags
 * (refusing SCROLL and BINARY); ast_cursor_hold refuses WITH HOLD;
 * ast_fetch_direction takes FORWARD and NEXT (the others are refused). */
AstStmt *ast_declare(ParseCtx *c, Token t, Token name, int words, int hold, AstStmt *query);
int ast_cursor_word(ParseCtx *c, int words, Token w);
int ast_cursor_hold(ParseCtx *c, bool with, Token w);
long ast_fetch_count(ParseCtx *c, Token n);
long ast_fetch_direction(ParseCtx *c, Token d, long count);
AstStmt *ast_fetch(ParseCtx *c, Token t, long count, Token name, AstList *options);
AstStmt *ast_close(ParseCtx *c, Token t, const Token *name);
/* ANALYZE LATENESS and VERIFY (ast_analyze.c). */
AstAnalyze *ast_analyze_new(ParseCtx *c);
/* PARTITION BY cols of ANALYZE LATENESS (given once). */
AstAnalyze *ast_analyze_partition(ParseCtx *c, AstAnalyze *a, Token t, AstList *cols);
AstAnalyze *ast_analyze_window(ParseCtx *c, AstAnalyze *a, Token kind, AstList *args);
AstAnalyze *ast_analyze_list(ParseCtx *c, AstAnalyze *a, Token name, AstList *items);
AstExpr *ast_analyze_duration(ParseCtx *c, Token number, Token unit); /* 2s, 500ms: a LIT_STRING "2 s" */
AstAnalyze *ast_analyze_number(ParseCtx *c, AstAnalyze *a, Token name, Token value);
AstStmt *ast_analyze(ParseCtx *c, Token t, const char *source, AstAnalyze *a, AstList *options);
AstStmt *ast_verify(ParseCtx *c, Token t, const char *view, AstList *options);
AstStmt *ast_copy_subscribe(ParseCtx *c, Token copy, AstStmt *sub, AstList *copy_options);

#endif
