/*
 * parse.y: weir's SQL grammar, for Debian's lemon (SQLite's parser generator).
 *
 * Every action is one line calling a builder of ast.c; semantics live there.
 * The driver (parse_sql in ast.c) feeds tokens and ends every statement with
 * a SEMI token (a synthetic one with n == 0 at the end of input), so the
 * whole input is `cmdlist`.
 *
 * Non-reserved keywords: every keyword listed in the %fallback below turns
 * into an ID wherever the grammar has no use for it as a keyword (the
 * SQLite way), so `SELECT source, key, value, timestamp FROM t` works. The
 * keywords left out of %fallback are reserved, as in Postgres.
 *
 * Two tokens are made by the driver with one token of lookahead (as
 * Postgres does): NOT_LA is NOT before IN/LIKE/ILIKE/BETWEEN (so that
 * `a = b NOT IN (...)` binds like IN), WITH_LA is WITH before TIME (the type
 * `timestamp with time zone`, which would otherwise clash with a view's
 * trailing WITH (...)). EMIT_LA, ALLOW_LA and LATE_LA are EMIT before
 * CHANGES/ON, ALLOW before LATENESS and LATE before ROWS: a view's trailing
 * clauses, which would otherwise be read as an alias of the last FROM item.
 */

%name WeirParser
%token_prefix TK_
%token_type {Token}
%default_type {Token}
%extra_context {ParseCtx *ctx}
%stack_size 4000
%start_symbol input

%syntax_error { parse_syntax_error(ctx, TOKEN); }
%stack_overflow { parse_stack_overflow(ctx); }

%include {
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include "parser_int.h"

#define YYNOERRORRECOVERY 1
#define YYPARSEFREENEVERNULL 1
}

/* Tokens made by the tokenizer that no rule below mentions still need codes. */
%token ID STRING INTEGER FLOAT PARAM.
%token EMIT_LA ALLOW_LA LATE_LA.
%token POS_IN.

/* Non-reserved keywords: usable as identifiers where no rule wants them. */
%fallback ID
  ABORT ALLOW ALTER APPEND BEGIN BY CASCADE CHANGES CHARACTER CHECKPOINT CLOSE COMMIT
  DAY DELETE DOUBLE DROP EMIT ENCODE ESCAPE EXISTS EXPLAIN EXTRACT
  FILTER FIRST FLUSH FORMAT HOUR IF INCLUDE INSERT INTERVAL KEY LAST LATE LATENESS LOCAL
  MATERIALIZED MINUTE MONTH NULLS ONLY OVER PARTITION PRECISION PRIMARY REPLACE RESET
  RESTRICT ROLLBACK ROWS SAVEPOINT SECOND SESSION SET SHOW SINK SOURCE START STREAM SYSTEM
  SYSTEM_TIME TIME TRANSACTION UNKNOWN UPDATE VALUES VARYING VIEW WATERMARK WINDOW
  WITHOUT WORK YEAR ZONE OF BOTH LEADING TRAILING
  SUBSCRIBE COPY STDOUT ANALYZE VERIFY USER PASSWORD RECURSIVE RENAME
  DECLARE CURSOR FETCH AT SIMILAR.

/* Precedence, lowest first, as in Postgres's gram.y. */
%left UNION EXCEPT.
%left INTERSECT.
%left OR.
%left AND.
%right NOT.
%nonassoc IS.
%nonassoc EQ NE LT LE GT GE.
%nonassoc BETWEEN IN LIKE ILIKE SIMILAR NOT_LA.

%nonassoc ESCAPE.
%left CONCAT ARROW ARROW2 TILDE TILDE_STAR NTILDE NTILDE_STAR.
%left PLUS MINUS.
%left STAR SLASH REM.
%left CARET.
%left AT.
%right UMINUS.
%left DCOLON.
%left DOT.

/* ---- statements ---------------------------------------------------------- */

input ::= cmdlist.
cmdlist ::= cmdlist ecmd.
cmdlist ::= ecmd.
ecmd ::= SEMI.
ecmd ::= cmd(S) SEMI(T).                      { ast_stmt_done(ctx, S, T); }

%type cmd {AstStmt*}
cmd(A) ::= select(Q).                         { A = ast_stmt_select(ctx, Q); }

/* EXPLAIN [(opt [value], ...)] | EXPLAIN word stmt */
%type explain_optlist {AstList*}
%type explain_opt {AstOption*}
/* The options' parentheses and a parenthesized query both follow EXPLAIN:
 * the head is reduced only once the first token inside says which it is. */
cmd(A) ::= EXPLAIN(T) cmd(S).                 { A = ast_explain(ctx, T, NULL, S); }
cmd(A) ::= EXPLAIN(T) nm(N) cmd(S).           { A = ast_explain(ctx, T, ast_list_append(ctx->a, NULL, ast_option(ctx, ast_ident(ctx, N), "true", N.pos)), S); }
cmd(A) ::= EXPLAIN(T) LP explain_optlist(L) RP cmd(S). { A = ast_explain(ctx, T, L, S); }
/* EXPLAIN [ANALYZE | (opts)] MATERIALIZED VIEW v: the plan a running view runs, with ANALYZE its live figures. */
cmd(A) ::= EXPLAIN(T) MATERIALIZED VIEW dotted(N). { A = ast_explain_view(ctx, T, NULL, N); }
cmd(A) ::= EXPLAIN(T) nm(W) MATERIALIZED VIEW dotted(N). { A = ast_explain_view(ctx, T, ast_list_append(ctx->a, NULL, ast_option(ctx, ast_ident(ctx, W), "true", W.pos)), N); }
cmd(A) ::= EXPLAIN(T) LP explain_optlist(L) RP MATERIALIZED VIEW dotted(N). { A = ast_explain_view(ctx, T, L, N); }
/* ANALYZE is a keyword (ANALYZE LATENESS), so it is not the nm above. */
cmd(A) ::= EXPLAIN(T) ANALYZE(W) MATERIALIZED VIEW dotted(N). { A = ast_explain_view(ctx, T, ast_list_append(ctx->a, NULL, ast_option(ctx, "analyze", "true", W.pos)), N); }
cmd(A) ::= EXPLAIN(T) ANALYZE(W) cmd(S).       { A = ast_explain(ctx, T, ast_list_append(ctx->a, NULL, ast_option(ctx, "analyze", "true", W.pos)), S); }
explain_optlist(A) ::= explain_opt(O).         { A = ast_list_append(ctx->a, NULL, O); }
explain_optlist(A) ::= explain_optlist(L) COMMA explain_opt(O). { A = ast_list_append(ctx->a, L, O); }
explain_opt(A) ::= nm(N).                      { A = ast_option(ctx, ast_ident(ctx, N), "true", N.pos); }
explain_opt(A) ::= nm(N) optval(V).            { A = ast_option(ctx, ast_ident(ctx, N), V, N.pos); }
explain_opt(A) ::= nm(N) ON.                   { A = ast_option(ctx, ast_ident(ctx, N), "on", N.pos); }

cmd(A) ::= FLUSH(T).                           { A = ast_stmt(ctx, STMT_FLUSH, T); }

/* SUBSCRIBE [TO] view [WITH (snapshot = .., progress = ..)], and the form
 * psql users type, COPY (SUBSCRIBE ...) TO STDOUT [[WITH] (FORMAT text)]. */
%type subscribe {AstStmt*}
%type copy_opts {AstList*}
cmd(A) ::= subscribe(S).                       { A = S; }
cmd(A) ::= COPY(T) LP subscribe(S) RP TO STDOUT copy_opts(O). { A = ast_copy_subscribe(ctx, T, S, O); }
subscribe(A) ::= SUBSCRIBE(T) subscribe_to dotted(N) with_opt(W). { A = ast_subscribe(ctx, T, N, W); }
subscribe_to ::= .
subscribe_to ::= TO.
copy_opts(A) ::= .                             { A = NULL; }
copy_opts(A) ::= WITH LP explain_optlist(L) RP. { A = L; }
copy_opts(A) ::= LP explain_optlist(L) RP.     { A = L; }
cmd(A) ::= CHECKPOINT(T).                      { A = ast_stmt(ctx, STMT_CHECKPOINT, T); }

/* ANALYZE LATENESS ON source [FOR TUMBLE(..)|HOP(..)|CUMULATE(..)|SESSION(..) [PARTITION BY cols]]
 * [BOUNDS (..)] [LATENESS (..)] [TARGET n] [WITH (..)]; VERIFY MATERIALIZED VIEW v.
 * Clause names other than FOR are words checked by the builders (ast_analyze.c). */
%type analyze_clauses {AstAnalyze*}
cmd(A) ::= ANALYZE(T) LATENESS ON dotted(N) analyze_clauses(C) with_opt(W). { A = ast_analyze(ctx, T, N, C, W); }
analyze_clauses(A) ::= .                       { A = ast_analyze_new(ctx); }
analyze_clauses(A) ::= analyze_clauses(L) FOR nm(K) LP exprlist(E) RP. { A = ast_analyze_window(ctx, L, K, E); }
analyze_clauses(A) ::= analyze_clauses(L) PARTITION(T) BY exprlist(E). { A = ast_analyze_partition(ctx, L, T, E); }
analyze_clauses(A) ::= analyze_clauses(L) nm(K) LP analyze_items(E) RP. { A = ast_analyze_list(ctx, L, K, E); }
%type analyze_items {AstList*}
%type analyze_item {AstExpr*}
analyze_items(A) ::= analyze_item(E).          { A = ast_list_append(ctx->a, NULL, E); }
analyze_items(A) ::= analyze_items(L) COMMA analyze_item(E). { A = ast_list_append(ctx->a, L, E); }
analyze_item(A) ::= expr(E).                   { A = E; }
analyze_item(A) ::= INTEGER(N) nm(U).          { A = ast_analyze_duration(ctx, N, U); }
analyze_item(A) ::= FLOAT(N) nm(U).            { A = ast_analyze_duration(ctx, N, U); }
analyze_clauses(A) ::= analyze_clauses(L) nm(K) INTEGER(V). { A = ast_analyze_number(ctx, L, K, V); }
analyze_clauses(A) ::= analyze_clauses(L) nm(K) FLOAT(V). { A = ast_analyze_number(ctx, L, K, V); }
cmd(A) ::= VERIFY(T) MATERIALIZED VIEW dotted(N) with_opt(W). { A = ast_verify(ctx, T, N, W); }
cmd(A) ::= ALTER(T) SYSTEM CHECKPOINT.         { A = ast_stmt(ctx, STMT_CHECKPOINT, T); }
cmd(A) ::= ALTER(T) SYSTEM SAVEPOINT TO STRING(D). { A = ast_savepoint(ctx, T, D); }
/* ALTER MATERIALIZED VIEW v RESUME, ALTER TABLE t RESUME (the action word is
 * checked by the builder). */
cmd(A) ::= ALTER(T) MATERIALIZED VIEW dotted(N) nm(W). { A = ast_alter_view(ctx, T, N, W); }
cmd(A) ::= ALTER(T) TABLE dotted(N) nm(W).     { A = ast_alter_view(ctx, T, N, W); }
/* ALTER MATERIALIZED VIEW v SWAP WITH w (SWAP is a word checked by the builder). */
cmd(A) ::= ALTER(T) MATERIALIZED VIEW dotted(N) nm(W) WITH nm(M). { A = ast_swap_view(ctx, T, N, W, M); }
/* ALTER SOURCE s SET (key = value, ...): which keys may change is the server's business. */
cmd(A) ::= ALTER(T) SOURCE dotted(N) SET LP optlist(L) RP. { A = ast_alter_source(ctx, T, N, L); }
cmd(A) ::= ALTER(T) TABLE dotted(N) SET LP optlist(L) RP.  { A = ast_alter_source(ctx, T, N, L); }

/* Cursors: DECLARE name [words] CURSOR [WITH[OUT] HOLD] FOR {SELECT | SUBSCRIBE},
 * FETCH [n | ALL | FORWARD [n | ALL] | NEXT] [FROM | IN] name [WITH (...)],
 * CLOSE name | ALL. The words (NO SCROLL, ...) and HOLD are checked by the
 * builders; what the inner statement may be, by the server. */
%type cursor_words {int}
%type cursor_hold {int}
%type fetch_count {long}
cmd(A) ::= DECLARE(T) nm(N) cursor_words(W) CURSOR cursor_hold(H) FOR cmd(S). { A = ast_declare(ctx, T, N, W, H, S); }
cursor_words(A) ::= .                          { A = 0; }
cursor_words(A) ::= cursor_words(L) nm(W).     { A = ast_cursor_word(ctx, L, W); }
cursor_hold(A) ::= .                           { A = 0; }
cursor_hold(A) ::= WITHOUT nm(H).              { A = ast_cursor_hold(ctx, false, H); }
cursor_hold(A) ::= WITH nm(H).                 { A = ast_cursor_hold(ctx, true, H); }
cmd(A) ::= FETCH(T) nm(N) with_opt(W).         { A = ast_fetch(ctx, T, 1, N, W); }
cmd(A) ::= FETCH(T) fetch_from nm(N) with_opt(W). { A = ast_fetch(ctx, T, 1, N, W); }
cmd(A) ::= FETCH(T) fetch_count(C) nm(N) with_opt(W). { A = ast_fetch(ctx, T, C, N, W); }
cmd(A) ::= FETCH(T) fetch_count(C) fetch_from nm(N) with_opt(W). { A = ast_fetch(ctx, T, C, N, W); }
fetch_from ::= FROM.
fetch_from ::= IN.
fetch_count(A) ::= INTEGER(N).                 { A = ast_fetch_count(ctx, N); }
fetch_count(A) ::= ALL.                        { A = -1; }
fetch_count(A) ::= nm(D).                      { A = ast_fetch_direction(ctx, D, 1); }
fetch_count(A) ::= nm(D) INTEGER(N).           { A = ast_fetch_direction(ctx, D, ast_fetch_count(ctx, N)); }
fetch_count(A) ::= nm(D) ALL.                  { A = ast_fetch_direction(ctx, D, -1); }
cmd(A) ::= CLOSE(T) nm(N).                     { A = ast_close(ctx, T, &N); }
cmd(A) ::= CLOSE(T) ALL.                       { A = ast_close(ctx, T, NULL); }

/* transactions */
/* BEGIN [TRANSACTION | WORK] [mode [, ...]], START TRANSACTION [mode [, ...]]:
 * the words (TRANSACTION, ISOLATION LEVEL ..., READ WRITE, [NOT] DEFERRABLE)
 * are checked one by one by ast_txn_word; lib/pq sends BEGIN READ WRITE. */
%type txn_words {int}
cmd(A) ::= BEGIN(T) txn_words(W).              { A = ast_txn_begin(ctx, T, W, false); }
cmd(A) ::= START(T) TRANSACTION txn_words(W).  { A = ast_txn_begin(ctx, T, W, true); }
txn_words(A) ::= .                             { A = 0; }
txn_words(A) ::= txn_words(L) nm(W).           { A = ast_txn_word(ctx, L, W); }
txn_words(A) ::= txn_words(L) NOT(W).          { A = ast_txn_word(ctx, L, W); }
txn_words(A) ::= txn_words(L) COMMA(W).        { A = ast_txn_word(ctx, L, W); }
cmd(A) ::= COMMIT(T) txn_opt.                  { A = ast_txn(ctx, T, TXN_COMMIT); }
cmd(A) ::= END(T) txn_opt.                     { A = ast_txn(ctx, T, TXN_COMMIT); }
cmd(A) ::= ROLLBACK(T) txn_opt.                { A = ast_txn(ctx, T, TXN_ROLLBACK); }
cmd(A) ::= ABORT(T) txn_opt.                   { A = ast_txn(ctx, T, TXN_ROLLBACK); }
txn_opt ::= .
txn_opt ::= TRANSACTION.
txn_opt ::= WORK.

/* SHOW */
%type show_obj {int}
cmd(A) ::= SHOW(T) dotted(N).                  { A = ast_show(ctx, T, N, OBJ_SOURCE, NULL); }
cmd(A) ::= SHOW(T) ALL.                        { A = ast_show(ctx, T, "all", OBJ_SOURCE, NULL); }
cmd(A) ::= SHOW(T) TIME ZONE.                  { A = ast_show(ctx, T, "timezone", OBJ_SOURCE, NULL); }
cmd(A) ::= SHOW(T) TRANSACTION nm(I) nm(L).    { A = ast_show_isolation(ctx, T, I, L); }
cmd(A) ::= SHOW(T) MATERIALIZED nm(N).         { A = ast_show(ctx, T, ast_join_dotted(ctx, "materialized", ast_ident(ctx, N)), OBJ_MATERIALIZED_VIEW, NULL); }
cmd(A) ::= SHOW(T) CREATE show_obj(O) dotted(N). { A = ast_show(ctx, T, "create", (AstObjectKind)O, N); }
show_obj(A) ::= SOURCE.                        { A = OBJ_SOURCE; }
show_obj(A) ::= STREAM.                        { A = OBJ_STREAM; }
show_obj(A) ::= TABLE.                         { A = OBJ_TABLE; }
show_obj(A) ::= VIEW.                          { A = OBJ_VIEW; }
show_obj(A) ::= MATERIALIZED VIEW.             { A = OBJ_MATERIALIZED_VIEW; }
show_obj(A) ::= SINK.                          { A = OBJ_SINK; }

/* SET / RESET */
%type setval {const char*}
%type setvals {const char*}
cmd(A) ::= SET(T) set_scope dotted(N) EQ setvals(V). { A = ast_set(ctx, T, STMT_SET, N, V); }
cmd(A) ::= SET(T) set_scope dotted(N) TO setvals(V). { A = ast_set(ctx, T, STMT_SET, N, V); }
cmd(A) ::= SET(T) set_scope TIME ZONE setval(V). { A = ast_set(ctx, T, STMT_SET, "timezone", V); }
cmd(A) ::= RESET(T) dotted(N).                 { A = ast_set(ctx, T, STMT_RESET, N, NULL); }
cmd(A) ::= RESET(T) ALL.                       { A = ast_set(ctx, T, STMT_RESET, "all", NULL); }
cmd(A) ::= RESET(T) TIME ZONE.                 { A = ast_set(ctx, T, STMT_RESET, "timezone", NULL); }
set_scope ::= .
set_scope ::= SESSION.
set_scope ::= LOCAL.
setvals(A) ::= setval(V).                      { A = V; }
setvals(A) ::= setvals(L) COMMA setval(V).     { A = (L && V) ? arena_printf(ctx->a, "%s, %s", L, V) : NULL; }
setval(A) ::= optval(V).                       { A = V; }
setval(A) ::= ON.                              { A = "on"; }
setval(A) ::= DEFAULT.                         { A = NULL; }
setval(A) ::= LOCAL.                           { A = NULL; }

/* Users: CREATE USER name [WITH] [PASSWORD 'p' | PASSWORD NULL], ALTER USER
 * name [WITH] PASSWORD ..., DROP USER [IF EXISTS] name. */
%type user_pw {const char*}
cmd(A) ::= CREATE(T) USER nm(N) user_pw(P).     { A = ast_user(ctx, T, STMT_CREATE_USER, ast_ident(ctx, N), P, false); }
cmd(A) ::= ALTER(T) USER nm(N) user_pw(P).      { A = ast_user(ctx, T, STMT_ALTER_USER, ast_ident(ctx, N), P, false); }
cmd(A) ::= DROP(T) USER ifexists(E) nm(N).      { A = ast_user(ctx, T, STMT_DROP_USER, ast_ident(ctx, N), NULL, E); }
user_pw(A) ::= .                               { A = NULL; }
user_pw(A) ::= WITH.                           { A = NULL; }
user_pw(A) ::= with_kw PASSWORD STRING(S).     { A = ast_string(ctx, S); }
user_pw(A) ::= with_kw PASSWORD NULL.          { A = ""; }
with_kw ::= .
with_kw ::= WITH.

/* DROP */
%type drop_obj {int}
%type ifexists {bool}
%type cascade_opt {bool}
%type namelist {AstList*}
cmd(A) ::= DROP(T) drop_obj(O) ifexists(E) dottedlist(L) cascade_opt(C). { A = ast_drop(ctx, T, (AstObjectKind)O, E, L, C); }
drop_obj(A) ::= show_obj(O).                   { A = O; }
ifexists(A) ::= .                              { A = false; }
ifexists(A) ::= IF EXISTS.                     { A = true; }
cascade_opt(A) ::= .                           { A = false; }
cascade_opt(A) ::= CASCADE.                    { A = true; }
cascade_opt(A) ::= RESTRICT.                   { A = false; }

/* ALTER ... RENAME TO. Spelled out per kind: a kind nonterminal reduced before the name
 * would clash with ALTER MATERIALIZED VIEW v RESUME and ALTER SOURCE s SET (...). */
cmd(A) ::= ALTER(T) SOURCE dotted(N) RENAME TO nm(M).           { A = ast_alter_rename(ctx, T, OBJ_SOURCE, false, N, M); }
cmd(A) ::= ALTER(T) SOURCE IF EXISTS dotted(N) RENAME TO nm(M). { A = ast_alter_rename(ctx, T, OBJ_SOURCE, true, N, M); }
cmd(A) ::= ALTER(T) STREAM dotted(N) RENAME TO nm(M).           { A = ast_alter_rename(ctx, T, OBJ_STREAM, false, N, M); }
cmd(A) ::= ALTER(T) STREAM IF EXISTS dotted(N) RENAME TO nm(M). { A = ast_alter_rename(ctx, T, OBJ_STREAM, true, N, M); }
cmd(A) ::= ALTER(T) TABLE dotted(N) RENAME TO nm(M).           { A = ast_alter_rename(ctx, T, OBJ_TABLE, false, N, M); }
cmd(A) ::= ALTER(T) TABLE IF EXISTS dotted(N) RENAME TO nm(M). { A = ast_alter_rename(ctx, T, OBJ_TABLE, true, N, M); }
cmd(A) ::= ALTER(T) VIEW dotted(N) RENAME TO nm(M).           { A = ast_alter_rename(ctx, T, OBJ_VIEW, false, N, M); }
cmd(A) ::= ALTER(T) VIEW IF EXISTS dotted(N) RENAME TO nm(M). { A = ast_alter_rename(ctx, T, OBJ_VIEW, true, N, M); }
cmd(A) ::= ALTER(T) MATERIALIZED VIEW dotted(N) RENAME TO nm(M).           { A = ast_alter_rename(ctx, T, OBJ_MATERIALIZED_VIEW, false, N, M); }
cmd(A) ::= ALTER(T) MATERIALIZED VIEW IF EXISTS dotted(N) RENAME TO nm(M). { A = ast_alter_rename(ctx, T, OBJ_MATERIALIZED_VIEW, true, N, M); }
cmd(A) ::= ALTER(T) SINK dotted(N) RENAME TO nm(M).           { A = ast_alter_rename(ctx, T, OBJ_SINK, false, N, M); }
cmd(A) ::= ALTER(T) SINK IF EXISTS dotted(N) RENAME TO nm(M). { A = ast_alter_rename(ctx, T, OBJ_SINK, true, N, M); }

/* CREATE SOURCE | STREAM | TABLE */
%type src_kind {int}
%type ifnotexists {bool}
%type colcons {int}
%type colcons_list {int}
%type includes {AstList*}
%type append_opt {bool}
%type with_opt {AstList*}
%type format_opt {FormatSpec}
%type optlist {AstList*}
%type opt {AstOption*}
%type optkey {const char*}
%type optkeypart {const char*}
%type optval {const char*}
%type as_nm_opt {const char*}
cmd(A) ::= src_head src_elems_opt includes(I) append_opt(P) with_opt(W) format_opt(F). { A = ast_src_finish(ctx, I, P, W, F); }
src_head ::= CREATE(T) src_kind(K) ifnotexists(E) nm(N). { ast_src_begin(ctx, T, (AstObjectKind)K, E, N); }
src_kind(A) ::= SOURCE.                        { A = OBJ_SOURCE; }
src_kind(A) ::= STREAM.                        { A = OBJ_STREAM; }
src_kind(A) ::= TABLE.                         { A = OBJ_TABLE; }
ifnotexists(A) ::= .                           { A = false; }
ifnotexists(A) ::= IF NOT EXISTS.              { A = true; }
src_elems_opt ::= .
src_elems_opt ::= LP src_elems RP.
src_elems ::= src_elem.
src_elems ::= src_elems COMMA src_elem.
src_elem ::= nm(N) typename(T) colcons_list(C). { ast_src_column(ctx, N, T, C, NULL); }
src_elem ::= nm(N) AS expr(E).                 { ast_src_column(ctx, N, NULL, 0, E); }
src_elem ::= WATERMARK(W) FOR nm(C) AS expr(E). { ast_src_watermark(ctx, W, C, E); }
src_elem ::= PRIMARY(T) KEY LP namelist(L) RP. { ast_src_primary_key(ctx, T, L); }
colcons_list(A) ::= .                          { A = 0; }
colcons_list(A) ::= colcons_list(L) colcons(C). { A = L | C; }
colcons(A) ::= NOT NULL.                       { A = 1; }
colcons(A) ::= NULL.                           { A = 0; }
colcons(A) ::= PRIMARY KEY.                    { A = 2; }
includes(A) ::= .                              { A = NULL; }
includes(A) ::= includes(L) INCLUDE nm(W) as_nm_opt(N).     { A = ast_include(ctx, L, W, N); }
includes(A) ::= includes(L) INCLUDE OFFSET(W) as_nm_opt(N). { A = ast_include(ctx, L, W, N); }
as_nm_opt(A) ::= .                             { A = NULL; }
as_nm_opt(A) ::= AS nm(N).                     { A = ast_ident(ctx, N); }
append_opt(A) ::= .                            { A = false; }
append_opt(A) ::= APPEND ONLY.                 { A = true; }
with_opt(A) ::= .                              { A = NULL; }
with_opt(A) ::= WITH LP optlist(L) RP.         { A = L; }
format_opt(A) ::= .                            { A.format = NULL; A.encode = NULL; A.encode_options = NULL; }
format_opt(A) ::= FORMAT nm(F) ENCODE nm(E).   { A.format = ast_ident(ctx, F); A.encode = ast_ident(ctx, E); A.encode_options = NULL; }
format_opt(A) ::= FORMAT nm(F) ENCODE nm(E) LP optlist(L) RP. { A.format = ast_ident(ctx, F); A.encode = ast_ident(ctx, E); A.encode_options = L; }
optlist(A) ::= opt(O).                         { A = ast_list_append(ctx->a, NULL, O); }
optlist(A) ::= optlist(L) COMMA opt(O).        { A = ast_list_append(ctx->a, L, O); }
opt(A) ::= optkey(K) EQ(T) optval(V).          { A = ast_option(ctx, K, V, T.pos); }
optkey(A) ::= STRING(S).                       { A = ast_string(ctx, S); }
optkey(A) ::= optkeypart(P).                   { A = P; }
optkey(A) ::= optkey(K) DOT optkeypart(P).     { A = ast_join_dotted(ctx, K, P); }
optkeypart(A) ::= nm(N).                       { A = ast_ident(ctx, N); }
optkeypart(A) ::= TABLE(T).                    { A = ast_token_text(ctx, T); }
optkeypart(A) ::= GROUP(T).                    { A = ast_token_text(ctx, T); }
optkeypart(A) ::= OFFSET(T).                   { A = ast_token_text(ctx, T); }
optkeypart(A) ::= LIMIT(T).                    { A = ast_token_text(ctx, T); }
optkeypart(A) ::= ORDER(T).                    { A = ast_token_text(ctx, T); }
optkeypart(A) ::= DEFAULT(T).                  { A = ast_token_text(ctx, T); }
optkeypart(A) ::= TO(T).                       { A = ast_token_text(ctx, T); }
optkeypart(A) ::= FROM(T).                     { A = ast_token_text(ctx, T); }
optval(A) ::= STRING(S).                       { A = ast_string(ctx, S); }
optval(A) ::= INTEGER(N).                      { A = ast_token_text(ctx, N); }
optval(A) ::= FLOAT(N).                        { A = ast_token_text(ctx, N); }
optval(A) ::= MINUS INTEGER(N).                { A = arena_printf(ctx->a, "-%s", ast_token_text(ctx, N)); }
optval(A) ::= MINUS FLOAT(N).                  { A = arena_printf(ctx->a, "-%s", ast_token_text(ctx, N)); }
optval(A) ::= nm(N).                           { A = ast_ident(ctx, N); }
optval(A) ::= TRUE.                            { A = "true"; }
optval(A) ::= FALSE.                           { A = "false"; }

/* CREATE [OR REPLACE] [MATERIALIZED] VIEW */
%type orreplace {bool}
%type materialized {bool}
%type collist_opt {AstList*}
cmd(A) ::= view_head select(Q) view_tail.     { A = ast_view_finish(ctx, Q); }
view_head ::= CREATE(T) orreplace(R) materialized(M) VIEW ifnotexists(E) nm(N) collist_opt(C) AS. { ast_view_begin(ctx, T, R, M, E, N, C); }
/* WITH (...) before AS, as in PostgreSQL; the same options as WITH after the query. */
view_head ::= CREATE(T) orreplace(R) materialized(M) VIEW ifnotexists(E) nm(N) collist_opt(C) WITH(W) LP optlist(L) RP AS. {
  ast_view_begin(ctx, T, R, M, E, N, C);
  ast_view_options(ctx, W, L);
}
orreplace(A) ::= .                             { A = false; }
orreplace(A) ::= OR REPLACE.                   { A = true; }
materialized(A) ::= .                          { A = false; }
materialized(A) ::= MATERIALIZED.              { A = true; }
collist_opt(A) ::= .                           { A = NULL; }
collist_opt(A) ::= LP namelist(L) RP.          { A = L; }
view_tail ::= .
view_tail ::= view_tail view_clause.
view_clause ::= EMIT_LA(T) CHANGES.            { ast_view_emit(ctx, T, EMIT_CHANGES); }
view_clause ::= EMIT_LA(T) ON WINDOW CLOSE.    { ast_view_emit(ctx, T, EMIT_ON_WINDOW_CLOSE); }
view_clause ::= ALLOW_LA(T) LATENESS expr(E).  { ast_view_lateness(ctx, T, E); }
view_clause ::= LATE_LA(T) ROWS INTO dotted(N). { ast_view_late_rows(ctx, T, N); }
view_clause ::= WITH(T) LP optlist(L) RP.      { ast_view_options(ctx, T, L); }

/* CREATE SINK */
cmd(A) ::= CREATE(T) SINK ifnotexists(E) nm(N) FROM dotted(F) with_opt(W) format_opt(P). { A = ast_sink(ctx, T, E, N, F, NULL, W, P); }
cmd(A) ::= CREATE(T) SINK ifnotexists(E) nm(N) AS select(Q) with_opt(W) format_opt(P). { A = ast_sink(ctx, T, E, N, NULL, Q, W, P); }

/* INSERT / UPDATE / DELETE */
%type setlist {AstList*}
%type where_opt {AstExpr*}
/* Spelled out: an empty column list would clash with a query in parentheses. */
cmd(A) ::= INSERT(T) INTO nm(N) select(Q).    { A = ast_insert(ctx, T, N, NULL, Q); }
cmd(A) ::= INSERT(T) INTO nm(N) LP namelist(C) RP select(Q). { A = ast_insert(ctx, T, N, C, Q); }
cmd(A) ::= UPDATE(T) nm(N) SET setlist(L) where_opt(W). { A = ast_update(ctx, T, N, L, W); }
cmd(A) ::= DELETE(T) FROM nm(N) where_opt(W).  { A = ast_delete(ctx, T, N, W); }
setlist(A) ::= nm(N) EQ expr(E).               { A = ast_list2(ctx, NULL, (void *)ast_ident(ctx, N), E); }
setlist(A) ::= setlist(L) COMMA nm(N) EQ expr(E). { A = ast_list2(ctx, L, (void *)ast_ident(ctx, N), E); }

/* ---- names --------------------------------------------------------------- */

nm(A) ::= ID(X).                               { A = X; }
%type dotted {const char*}
dotted(A) ::= nm(N).                           { A = ast_ident(ctx, N); }
dotted(A) ::= dotted(L) DOT nm(N).             { A = ast_join_dotted(ctx, L, ast_ident(ctx, N)); }
%type dottedlist {AstList*}
dottedlist(A) ::= dotted(N).                   { A = ast_list_append(ctx->a, NULL, (void *)N); }
dottedlist(A) ::= dottedlist(L) COMMA dotted(N). { A = ast_list_append(ctx->a, L, (void *)N); }
namelist(A) ::= nm(N).                         { A = ast_name_list(ctx, NULL, N); }
namelist(A) ::= namelist(L) COMMA nm(N).       { A = ast_name_list(ctx, L, N); }

/* ---- queries ------------------------------------------------------------- */

%type select {AstSelect*}
%type selectnowith {AstSelect*}
%type oneselect {AstSelect*}
%type values {AstSelect*}
%type ctelist {AstList*}
%type cte {AstCte*}
%type orderby_opt {AstList*}
%type sortlist {AstList*}
%type sortitem {AstOrderItem*}
%type desc_opt {bool}
%type nulls_opt {int}
%type limit_opt {LimitSpec}
%type all_opt {bool}

select(A) ::= selectnowith(S) orderby_opt(O) limit_opt(L). { A = ast_select_finish(ctx, NULL, NULL, S, O, L); }
select(A) ::= WITH(T) ctelist(C) selectnowith(S) orderby_opt(O) limit_opt(L). { A = ast_select_finish(ctx, &T, C, S, O, L); }
select(A) ::= WITH(T) RECURSIVE ctelist(C) selectnowith(S) orderby_opt(O) limit_opt(L). { A = ast_with_recursive(ast_select_finish(ctx, &T, C, S, O, L)); }
ctelist(A) ::= cte(C).                         { A = ast_list_append(ctx->a, NULL, C); }
ctelist(A) ::= ctelist(L) COMMA cte(C).        { A = ast_list_append(ctx->a, L, C); }
cte(A) ::= nm(N) AS LP select(Q) RP.           { A = ast_cte(ctx, N, NULL, Q); }
cte(A) ::= nm(N) LP namelist(C) RP AS LP select(Q) RP. { A = ast_cte(ctx, N, C, Q); }

selectnowith(A) ::= oneselect(S).              { A = S; }
/* A parenthesized query as an operand of a set operation (or the whole
 * query): it keeps its own ORDER BY, LIMIT and set operations. In an
 * expression, ((SELECT ..)) is read as a scalar subquery in parentheses
 * (the rule's precedence settles it, as in Postgres). */
selectnowith(A) ::= LP(T) select(Q) RP. [UNION] { A = ast_paren_select(ctx, T, Q); }
selectnowith(A) ::= selectnowith(L) UNION(T) all_opt(X) selectnowith(R).     { A = ast_setop(ctx, L, SETOP_UNION, X, R, T); }
selectnowith(A) ::= selectnowith(L) EXCEPT(T) all_opt(X) selectnowith(R).    { A = ast_setop(ctx, L, SETOP_EXCEPT, X, R, T); }
selectnowith(A) ::= selectnowith(L) INTERSECT(T) all_opt(X) selectnowith(R). { A = ast_setop(ctx, L, SETOP_INTERSECT, X, R, T); }
all_opt(A) ::= .                               { A = false; }
all_opt(A) ::= ALL.                            { A = true; }
all_opt(A) ::= DISTINCT.                       { A = false; }

%type distinct_opt {int}
%type distinct_on {AstList*}
%type targets {AstList*}
%type target {AstTarget*}
%type alias_opt {const char*}
%type from_opt {AstList*}
%type groupby_opt {AstList*}
%type having_opt {AstExpr*}
oneselect(A) ::= SELECT(T) distinct_opt(D) distinct_on(O) targets(L) from_opt(F) where_opt(W) groupby_opt(G) having_opt(H). { A = ast_select(ctx, T, D, O, L, F, W, G, H); }
oneselect(A) ::= values(V).                    { A = V; }
values(A) ::= VALUES(T) LP exprlist(L) RP.     { A = ast_values(ctx, T, NULL, L); }
values(A) ::= values(V) COMMA(T) LP exprlist(L) RP. { A = ast_values(ctx, T, V, L); }
distinct_opt(A) ::= .                          { A = 0; }
distinct_opt(A) ::= ALL.                       { A = 0; }
distinct_opt(A) ::= DISTINCT.                  { A = 1; }
distinct_on(A) ::= .                           { A = NULL; }
distinct_on(A) ::= ON LP exprlist(L) RP.       { A = L; }
targets(A) ::= target(T).                      { A = ast_list_append(ctx->a, NULL, T); }
targets(A) ::= targets(L) COMMA target(T).     { A = ast_list_append(ctx->a, L, T); }
target(A) ::= expr(E) alias_opt(N).            { A = ast_target(ctx, E, N); }
target(A) ::= STAR(S).                         { A = ast_target(ctx, ast_star(ctx, NULL, S), NULL); }
target(A) ::= nm(Q) DOT STAR(S).               { A = ast_target(ctx, ast_star(ctx, &Q, S), NULL); }
alias_opt(A) ::= .                             { A = NULL; }
alias_opt(A) ::= AS nm(N).                     { A = ast_ident(ctx, N); }
alias_opt(A) ::= nm(N).                        { A = ast_ident(ctx, N); }
from_opt(A) ::= .                              { A = NULL; }
from_opt(A) ::= FROM seltablist(L).            { A = L; }
where_opt(A) ::= .                             { A = NULL; }
where_opt(A) ::= WHERE expr(E).                { A = E; }
groupby_opt(A) ::= .                           { A = NULL; }
groupby_opt(A) ::= GROUP BY exprlist(L).       { A = L; }
having_opt(A) ::= .                            { A = NULL; }
having_opt(A) ::= HAVING expr(E).              { A = E; }
orderby_opt(A) ::= .                           { A = NULL; }
orderby_opt(A) ::= ORDER BY sortlist(L).       { A = L; }
sortlist(A) ::= sortitem(S).                   { A = ast_list_append(ctx->a, NULL, S); }
sortlist(A) ::= sortlist(L) COMMA sortitem(S). { A = ast_list_append(ctx->a, L, S); }
sortitem(A) ::= expr(E) desc_opt(D) nulls_opt(N). { A = ast_order_item(ctx, E, D, N); }
desc_opt(A) ::= .                              { A = false; }
desc_opt(A) ::= ASC.                           { A = false; }
desc_opt(A) ::= DESC.                          { A = true; }
nulls_opt(A) ::= .                             { A = 0; }
nulls_opt(A) ::= NULLS FIRST.                  { A = 1; }
nulls_opt(A) ::= NULLS LAST.                   { A = 2; }
limit_opt(A) ::= .                             { A.limit = NULL; A.offset = NULL; }
limit_opt(A) ::= LIMIT expr(L).                { A.limit = L; A.offset = NULL; }
limit_opt(A) ::= LIMIT ALL.                    { A.limit = NULL; A.offset = NULL; }
limit_opt(A) ::= LIMIT expr(L) OFFSET expr(O). { A.limit = L; A.offset = O; }
limit_opt(A) ::= OFFSET expr(O).               { A.limit = NULL; A.offset = O; }
limit_opt(A) ::= OFFSET expr(O) LIMIT expr(L). { A.limit = L; A.offset = O; }
limit_opt(A) ::= LIMIT ALL OFFSET expr(O).     { A.limit = NULL; A.offset = O; }
limit_opt(A) ::= OFFSET expr(O) LIMIT ALL.     { A.limit = NULL; A.offset = O; }

/* FROM items */
%type seltablist {AstList*}
%type tref {AstTableRef*}
%type tprimary {AstTableRef*}
%type jointype {int}
%type tref_alias {AliasSpec}
%type systime_opt {AstExpr*}
%type tvf_in {TvfInput}
%type partition_opt {AstList*}
seltablist(A) ::= tref(T).                     { A = ast_list_append(ctx->a, NULL, T); }
seltablist(A) ::= seltablist(L) COMMA tref(T). { A = ast_list_append(ctx->a, L, T); }
tref(A) ::= tprimary(P).                       { A = P; }
tref(A) ::= tref(L) jointype(J) JOIN tprimary(R) ON expr(E).  { A = ast_tref_join(ctx, L, (AstJoinType)J, R, E, NULL); }
tref(A) ::= tref(L) jointype(J) JOIN tprimary(R) USING LP namelist(U) RP. { A = ast_tref_join(ctx, L, (AstJoinType)J, R, NULL, U); }
tref(A) ::= tref(L) CROSS JOIN tprimary(R).    { A = ast_tref_join(ctx, L, JOIN_CROSS, R, NULL, NULL); }
jointype(A) ::= .                              { A = JOIN_INNER; }
jointype(A) ::= INNER.                         { A = JOIN_INNER; }
jointype(A) ::= LEFT.                          { A = JOIN_LEFT; }
jointype(A) ::= LEFT OUTER.                    { A = JOIN_LEFT; }
jointype(A) ::= RIGHT.                         { A = JOIN_RIGHT; }
jointype(A) ::= RIGHT OUTER.                   { A = JOIN_RIGHT; }
jointype(A) ::= FULL.                          { A = JOIN_FULL; }
jointype(A) ::= FULL OUTER.                    { A = JOIN_FULL; }
tprimary(A) ::= nm(N) systime_opt(S) tref_alias(L).             { A = ast_tref_name(ctx, N, NULL, S, L); }
tprimary(A) ::= nm(Q) DOT nm(N) systime_opt(S) tref_alias(L).   { A = ast_tref_name(ctx, Q, ast_join_dotted(ctx, ast_ident(ctx, Q), ast_ident(ctx, N)), S, L); }
tprimary(A) ::= LP(T) select(Q) RP tref_alias(L).               { A = ast_tref_subquery(ctx, T, Q, L); }
tprimary(A) ::= nm(F) LP tvf_in(I) COMMA exprlist(X) RP tref_alias(L).            { A = ast_tref_window(ctx, F, I, X, L); }
tprimary(A) ::= TABLE LP nm(F) LP tvf_in(I) COMMA exprlist(X) RP RP tref_alias(L). { A = ast_tref_window(ctx, F, I, X, L); }
tvf_in(A) ::= nm(N).                           { A.rel = ast_tref_name(ctx, N, NULL, NULL, (AliasSpec){0}); A.partition = NULL; }
tvf_in(A) ::= LP(T) select(Q) RP.              { A.rel = ast_tref_subquery(ctx, T, Q, (AliasSpec){0}); A.partition = NULL; }
tvf_in(A) ::= TABLE nm(N) tvf_partition(P).    { A.rel = ast_tref_name(ctx, N, NULL, NULL, (AliasSpec){0}); A.partition = P; }
partition_opt(A) ::= .                         { A = NULL; }
partition_opt(A) ::= PARTITION BY exprlist(L). { A = L; }
%type tvf_partition {AstList*}
%type tvf_cols {AstList*}
tvf_partition(A) ::= .                         { A = NULL; }
tvf_partition(A) ::= PARTITION BY nm(N).       { A = ast_list_append(ctx->a, NULL, ast_column(ctx, NULL, N)); }
tvf_partition(A) ::= PARTITION BY LP tvf_cols(L) RP. { A = L; }
tvf_cols(A) ::= nm(N).                         { A = ast_list_append(ctx->a, NULL, ast_column(ctx, NULL, N)); }
tvf_cols(A) ::= tvf_cols(L) COMMA nm(N).       { A = ast_list_append(ctx->a, L, ast_column(ctx, NULL, N)); }
systime_opt(A) ::= .                           { A = NULL; }
systime_opt(A) ::= FOR SYSTEM_TIME AS OF expr(E). { A = E; }
tref_alias(A) ::= .                            { A.name = NULL; A.cols = NULL; }
tref_alias(A) ::= AS nm(N).                    { A.name = ast_ident(ctx, N); A.cols = NULL; }
tref_alias(A) ::= nm(N).                       { A.name = ast_ident(ctx, N); A.cols = NULL; }
tref_alias(A) ::= AS nm(N) LP namelist(L) RP.  { A.name = ast_ident(ctx, N); A.cols = L; }
tref_alias(A) ::= nm(N) LP namelist(L) RP.     { A.name = ast_ident(ctx, N); A.cols = L; }

/* ---- expressions --------------------------------------------------------- */

%type expr {AstExpr*}
%type exprlist {AstList*}
%type typename {const char*}
%type simpletype {const char*}
%type iunit {const char*}
%type interval_qual {const char*}
%type case_operand {AstExpr*}
%type case_list {AstList*}
%type case_else {AstExpr*}
%type filter_opt {AstExpr*}
%type over_opt {AstWindowSpec*}
%type extract_field {const char*}

exprlist(A) ::= expr(E).                       { A = ast_list_append(ctx->a, NULL, E); }
exprlist(A) ::= exprlist(L) COMMA expr(E).     { A = ast_list_append(ctx->a, L, E); }

expr(A) ::= NULL(T).                           { A = ast_lit(ctx, LIT_NULL, T); }
expr(A) ::= TRUE(T).                           { A = ast_lit(ctx, LIT_BOOL, T); }
expr(A) ::= FALSE(T).                          { A = ast_lit(ctx, LIT_BOOL, T); }
expr(A) ::= INTEGER(T).                        { A = ast_lit(ctx, LIT_INT, T); }
expr(A) ::= FLOAT(T).                          { A = ast_lit(ctx, LIT_DECIMAL, T); }
expr(A) ::= STRING(T).                         { A = ast_lit(ctx, LIT_STRING, T); }
expr(A) ::= nm(T) STRING(S).                   { A = ast_lit_typed(ctx, T, S); }
expr(A) ::= INTERVAL(T) STRING(S) interval_qual(U). { A = ast_lit_interval(ctx, T, S, U); }
expr(A) ::= PARAM(T).                          { A = ast_param(ctx, T); }
expr(A) ::= nm(N).                             { A = ast_column(ctx, NULL, N); }
/* Keywords that start an expression are still column names when what
 * follows cannot continue that expression (`SELECT interval FROM t`). */
expr(A) ::= INTERVAL(N).                       { A = ast_column(ctx, NULL, N); }
expr(A) ::= EXTRACT(N).                        { A = ast_column(ctx, NULL, N); }
expr(A) ::= EXISTS(N).                         { A = ast_column(ctx, NULL, N); }
expr(A) ::= nm(Q) DOT nm(N).                   { A = ast_column(ctx, &Q, N); }
expr(A) ::= LP expr(E) RP.                     { A = ast_paren(ctx, E); }
expr(A) ::= LP(T) select(Q) RP. [DOT]          { A = ast_subquery(ctx, T, SUBQ_SCALAR, Q); }
expr(A) ::= EXISTS(T) LP select(Q) RP.         { A = ast_subquery(ctx, T, SUBQ_EXISTS, Q); }
expr(A) ::= CURRENT_TIMESTAMP(T).              { A = ast_func_name(ctx, T, "current_timestamp"); }
expr(A) ::= CURRENT_DATE(T).                   { A = ast_func_name(ctx, T, "current_date"); }
expr(A) ::= LOCALTIMESTAMP(T).                 { A = ast_func_name(ctx, T, "localtimestamp"); }

expr(A) ::= nm(N) LP RP filter_opt(F) over_opt(O).                       { A = ast_func_decorate(ctx, ast_func(ctx, N, NULL, false, false), F, O); }
expr(A) ::= nm(N) LP STAR RP filter_opt(F) over_opt(O).                  { A = ast_func_decorate(ctx, ast_func(ctx, N, NULL, false, true), F, O); }
expr(A) ::= nm(N) LP exprlist(L) RP filter_opt(F) over_opt(O).           { A = ast_func_decorate(ctx, ast_func(ctx, N, L, false, false), F, O); }
expr(A) ::= nm(N) LP DISTINCT exprlist(L) RP filter_opt(F) over_opt(O).  { A = ast_func_decorate(ctx, ast_func(ctx, N, L, true, false), F, O); }
expr(A) ::= nm(N) LP ALL exprlist(L) RP filter_opt(F) over_opt(O).       { A = ast_func_decorate(ctx, ast_func(ctx, N, L, false, false), F, O); }
filter_opt(A) ::= .                            { A = NULL; }
filter_opt(A) ::= FILTER LP WHERE expr(E) RP.  { A = E; }
over_opt(A) ::= .                              { A = NULL; }
over_opt(A) ::= OVER LP partition_opt(P) orderby_opt(O) RP. { A = ast_window_spec(ctx, P, O); }

expr(A) ::= CAST(T) LP expr(E) AS typename(N) RP. { A = ast_cast(ctx, E, N, T.pos); }
/* TRY_CAST(x AS t) (Flink, SQL Server): not a keyword, so try_cast stays a usable name. */
expr(A) ::= nm(F) LP expr(E) AS(K) typename(N) RP. { A = ast_try_cast(ctx, F, K, E, N); }
expr(A) ::= expr(E) DCOLON typename(N).        { A = ast_cast(ctx, E, N, E->pos); }
expr(A) ::= EXTRACT(T) LP extract_field(F) FROM expr(E) RP. { A = ast_extract(ctx, T, F, E); }
extract_field(A) ::= nm(N).                    { A = ast_ident(ctx, N); }
extract_field(A) ::= STRING(S).                { A = ast_string(ctx, S); }

expr(A) ::= CASE(T) case_operand(O) case_list(L) case_else(E) END. { A = ast_case(ctx, T, O, L, E); }
case_operand(A) ::= .                          { A = NULL; }
case_operand(A) ::= expr(E).                   { A = E; }
case_list(A) ::= WHEN expr(W) THEN expr(T).    { A = ast_list2(ctx, NULL, W, T); }
case_list(A) ::= case_list(L) WHEN expr(W) THEN expr(T). { A = ast_list2(ctx, L, W, T); }
case_else(A) ::= .                             { A = NULL; }
case_else(A) ::= ELSE expr(E).                 { A = E; }

expr(A) ::= MINUS(T) expr(E). [UMINUS]         { A = ast_unary(ctx, OP_NEG, T, E); }
expr(A) ::= PLUS(T) expr(E). [UMINUS]          { A = ast_unary(ctx, OP_PLUS, T, E); }
expr(A) ::= NOT(T) expr(E).                    { A = ast_unary(ctx, OP_NOT, T, E); }
expr(A) ::= expr(L) OR expr(R).                { A = ast_binary(ctx, OP_OR, L, R); }
expr(A) ::= expr(L) AND expr(R).               { A = ast_binary(ctx, OP_AND, L, R); }
expr(A) ::= expr(L) EQ expr(R).                { A = ast_binary(ctx, OP_EQ, L, R); }
expr(A) ::= expr(L) NE expr(R).                { A = ast_binary(ctx, OP_NE, L, R); }
expr(A) ::= expr(L) LT expr(R).                { A = ast_binary(ctx, OP_LT, L, R); }
expr(A) ::= expr(L) LE expr(R).                { A = ast_binary(ctx, OP_LE, L, R); }
expr(A) ::= expr(L) GT expr(R).                { A = ast_binary(ctx, OP_GT, L, R); }
expr(A) ::= expr(L) GE expr(R).                { A = ast_binary(ctx, OP_GE, L, R); }
expr(A) ::= expr(L) CONCAT expr(R).            { A = ast_binary(ctx, OP_CONCAT, L, R); }
expr(A) ::= expr(L) PLUS expr(R).              { A = ast_binary(ctx, OP_ADD, L, R); }
expr(A) ::= expr(L) MINUS expr(R).             { A = ast_binary(ctx, OP_SUB, L, R); }
expr(A) ::= expr(L) STAR expr(R).              { A = ast_binary(ctx, OP_MUL, L, R); }
expr(A) ::= expr(L) SLASH expr(R).             { A = ast_binary(ctx, OP_DIV, L, R); }
expr(A) ::= expr(L) REM expr(R).               { A = ast_binary(ctx, OP_MOD, L, R); }
expr(A) ::= expr(L) CARET expr(R).             { A = ast_binary(ctx, OP_POW, L, R); }
/* ts AT TIME ZONE zone is Postgres's timezone(zone, ts). */
expr(A) ::= expr(L) AT(T) TIME ZONE expr(Z).   { A = ast_func_op(ctx, T, "timezone", Z, L); }
expr(A) ::= expr(L) ARROW(T) expr(R).          { A = ast_func_op(ctx, T, "->", L, R); }
expr(A) ::= expr(L) ARROW2(T) expr(R).         { A = ast_func_op(ctx, T, "->>", L, R); }
/* Regular expression matches: Postgres's "any other operator" precedence (that of ||). */
expr(A) ::= expr(L) TILDE(T) expr(R).          { A = ast_func_op(ctx, T, "~", L, R); }
expr(A) ::= expr(L) TILDE_STAR(T) expr(R).     { A = ast_func_op(ctx, T, "~*", L, R); }
expr(A) ::= expr(L) NTILDE(T) expr(R).         { A = ast_func_op(ctx, T, "!~", L, R); }
expr(A) ::= expr(L) NTILDE_STAR(T) expr(R).    { A = ast_func_op(ctx, T, "!~*", L, R); }

/* Calls with keywords inside the parentheses (SQL's special forms); the
 * builders check the function's name. POS_IN is IN directly inside
 * position(...), retagged by the driver (see parse_sql). */
%type trim_where {Token}
expr(A) ::= nm(N) LP expr(X) FROM(K) expr(F) RP.             { A = ast_func_from(ctx, N, K, X, F, NULL); }
expr(A) ::= nm(N) LP expr(X) FROM(K) expr(F) FOR expr(C) RP. { A = ast_func_from(ctx, N, K, X, F, C); }
expr(A) ::= nm(N) LP expr(X) FOR(K) expr(C) RP.              { A = ast_func_from(ctx, N, K, X, NULL, C); }
expr(A) ::= nm(N) LP FROM(K) expr(X) RP.                     { A = ast_func_from(ctx, N, K, NULL, X, NULL); }
expr(A) ::= nm(N) LP trim_where(W) expr(C) FROM expr(X) RP.  { A = ast_func_trim(ctx, N, W, C, X); }
expr(A) ::= nm(N) LP trim_where(W) FROM expr(X) RP.          { A = ast_func_trim(ctx, N, W, NULL, X); }
expr(A) ::= nm(N) LP trim_where(W) expr(X) RP.               { A = ast_func_trim(ctx, N, W, NULL, X); }
expr(A) ::= nm(N) LP expr(X) POS_IN(K) expr(Y) RP.           { A = ast_func_position(ctx, N, K, X, Y); }
expr(A) ::= LEFT(N) LP exprlist(L) RP.                       { A = ast_func(ctx, N, L, false, false); }
expr(A) ::= RIGHT(N) LP exprlist(L) RP.                      { A = ast_func(ctx, N, L, false, false); }
trim_where(A) ::= BOTH(T).                     { A = T; }
trim_where(A) ::= LEADING(T).                  { A = T; }
trim_where(A) ::= TRAILING(T).                 { A = T; }

expr(A) ::= expr(E) IS NULL.                   { A = ast_is(ctx, E, IS_NULL, false, NULL); }
expr(A) ::= expr(E) IS NOT NULL.               { A = ast_is(ctx, E, IS_NULL, true, NULL); }
expr(A) ::= expr(E) IS TRUE.                   { A = ast_is(ctx, E, IS_TRUE, false, NULL); }
expr(A) ::= expr(E) IS NOT TRUE.               { A = ast_is(ctx, E, IS_TRUE, true, NULL); }
expr(A) ::= expr(E) IS FALSE.                  { A = ast_is(ctx, E, IS_FALSE, false, NULL); }
expr(A) ::= expr(E) IS NOT FALSE.              { A = ast_is(ctx, E, IS_FALSE, true, NULL); }
expr(A) ::= expr(E) IS UNKNOWN.                { A = ast_is(ctx, E, IS_UNKNOWN, false, NULL); }
expr(A) ::= expr(E) IS NOT UNKNOWN.            { A = ast_is(ctx, E, IS_UNKNOWN, true, NULL); }
expr(A) ::= expr(E) IS DISTINCT FROM expr(O). [IS] { A = ast_is(ctx, E, IS_DISTINCT_FROM, false, O); }
expr(A) ::= expr(E) IS NOT DISTINCT FROM expr(O). [IS] { A = ast_is(ctx, E, IS_DISTINCT_FROM, true, O); }

expr(A) ::= expr(E) IN LP exprlist(L) RP. [IN]            { A = ast_in(ctx, E, L, false); }
expr(A) ::= expr(E) NOT_LA IN LP exprlist(L) RP. [IN]     { A = ast_in(ctx, E, L, true); }
expr(A) ::= expr(E) IN LP select(Q) RP. [IN]              { A = ast_in_select(ctx, E, Q, false); }
expr(A) ::= expr(E) NOT_LA IN LP select(Q) RP. [IN]       { A = ast_in_select(ctx, E, Q, true); }
expr(A) ::= expr(E) BETWEEN expr(L) AND expr(H). [BETWEEN]        { A = ast_between(ctx, E, L, H, false); }
expr(A) ::= expr(E) NOT_LA BETWEEN expr(L) AND expr(H). [BETWEEN] { A = ast_between(ctx, E, L, H, true); }
expr(A) ::= expr(E) LIKE expr(P). [LIKE]                  { A = ast_like(ctx, E, P, NULL, false, false); }
expr(A) ::= expr(E) LIKE expr(P) ESCAPE expr(X). [LIKE]   { A = ast_like(ctx, E, P, X, false, false); }
expr(A) ::= expr(E) NOT_LA LIKE expr(P). [LIKE]           { A = ast_like(ctx, E, P, NULL, true, false); }
expr(A) ::= expr(E) NOT_LA LIKE expr(P) ESCAPE expr(X). [LIKE] { A = ast_like(ctx, E, P, X, true, false); }
expr(A) ::= expr(E) ILIKE expr(P). [LIKE]                 { A = ast_like(ctx, E, P, NULL, false, true); }
expr(A) ::= expr(E) ILIKE expr(P) ESCAPE expr(X). [LIKE]  { A = ast_like(ctx, E, P, X, false, true); }
expr(A) ::= expr(E) NOT_LA ILIKE expr(P). [LIKE]          { A = ast_like(ctx, E, P, NULL, true, true); }
expr(A) ::= expr(E) NOT_LA ILIKE expr(P) ESCAPE expr(X). [LIKE] { A = ast_like(ctx, E, P, X, true, true); }
/* SQL's SIMILAR TO regular expressions: parsed, then 0A000 (~ is the way). */
expr(A) ::= expr(E) SIMILAR(T) TO expr(P). [LIKE]                  { A = ast_similar(ctx, T, E, P); }
expr(A) ::= expr(E) SIMILAR(T) TO expr(P) ESCAPE expr(X). [LIKE]   { A = ast_similar(ctx, T, E, P); (void)X; }
expr(A) ::= expr(E) NOT_LA SIMILAR(T) TO expr(P). [LIKE]           { A = ast_similar(ctx, T, E, P); }
expr(A) ::= expr(E) NOT_LA SIMILAR(T) TO expr(P) ESCAPE expr(X). [LIKE] { A = ast_similar(ctx, T, E, P); (void)X; }

/* INTERVAL 'n' unit [TO unit] */
interval_qual(A) ::= .                         { A = NULL; }
interval_qual(A) ::= iunit(U).                 { A = U; }
interval_qual(A) ::= iunit(U) TO iunit(V).     { A = arena_printf(ctx->a, "%s to %s", U, V); }
iunit(A) ::= YEAR.                             { A = "year"; }
iunit(A) ::= MONTH.                            { A = "month"; }
iunit(A) ::= DAY.                              { A = "day"; }
iunit(A) ::= HOUR.                             { A = "hour"; }
iunit(A) ::= MINUTE.                           { A = "minute"; }
iunit(A) ::= SECOND.                           { A = "second"; }

/* type names: lower case; modifiers are accepted and dropped */
typename(A) ::= simpletype(T).                 { A = T; }
typename(A) ::= simpletype(T) LP INTEGER(P) RP. { A = ast_type_mod(ctx, T, P, NULL); }
typename(A) ::= simpletype(T) LP INTEGER(P) COMMA INTEGER(S) RP. { A = ast_type_mod(ctx, T, P, &S); }
simpletype(A) ::= nm(N).                       { A = ast_type_name(ctx, N); }
simpletype(A) ::= nm(N) WITH_LA TIME ZONE.     { A = ast_type_tz(ctx, ast_type_name(ctx, N), true, N); }
simpletype(A) ::= nm(N) WITHOUT TIME ZONE.     { A = ast_type_tz(ctx, ast_type_name(ctx, N), false, N); }
simpletype(A) ::= DOUBLE.                      { A = "double precision"; }
simpletype(A) ::= DOUBLE PRECISION.            { A = "double precision"; }
simpletype(A) ::= CHARACTER.                   { A = "char"; }
simpletype(A) ::= CHARACTER VARYING.           { A = "varchar"; }
simpletype(A) ::= INTERVAL.                    { A = "interval"; }
