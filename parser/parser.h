/*
 * parser.h: the SQL front end's output, an abstract syntax tree.
 *
 * parse_sql() turns a string holding one or more ';'-separated statements
 * into AstStmt trees allocated in a caller-owned arena (the statement arena:
 * tokens, AST and logical plan share one lifespan). The parser knows nothing
 * of the catalog: names are strings, types are names, and everything is
 * checked later by the binder (planner/).
 *
 * Identifiers are folded to lower case unless double-quoted, as in
 * Postgres. Every node carries `pos`, the 1-based character position of
 * its first token in the original string, so errors can point at it.
 *
 * Lists are AstList (an arena array of pointers); list element types are
 * named at each field.
 */
#ifndef WEIR_PARSER_H
#define WEIR_PARSER_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "error.h"
#include "weir_limits.h"

typedef struct AstList {
    int n;
    int cap;
    void **items;
} AstList;

/* Appends item to l (l may be NULL: a new list is made). Returns the list. */
AstList *ast_list_append(Arena *a, AstList *l, void *item);
static inline int ast_list_len(const AstList *l) { return l ? l->n : 0; }
#define AST_AT(l, i) ((l)->items[(i)])

/* ---- expressions --------------------------------------------------------- */

typedef enum AstExprKind {
    AST_LITERAL,    /* lit_kind + text */
    AST_COLUMN,     /* [qualifier.]name */
    AST_STAR,       /* * or qualifier.* (only in select lists and count(*)) */
    AST_PARAM,      /* $n */
    AST_UNARY,      /* op, args[0] */
    AST_BINARY,     /* op, args[0], args[1]; OP_AND and OP_OR: two or more args (a flat chain) */
    AST_FUNC,       /* name(args) [FILTER (WHERE filter)] [OVER (...)] */
    AST_CAST,       /* CAST(arg AS type) or arg::type */
    AST_CASE,       /* CASE [operand] WHEN.. THEN.. [ELSE..] END */
    AST_IN,         /* arg [NOT] IN (list) */
    AST_BETWEEN,    /* arg [NOT] BETWEEN lo AND hi */
    AST_IS,         /* arg IS [NOT] NULL/TRUE/FALSE/UNKNOWN, IS [NOT] DISTINCT FROM */
    AST_LIKE,       /* arg [NOT] LIKE|ILIKE pattern */
    AST_EXTRACT,    /* EXTRACT(field FROM arg) */
    AST_SUBQUERY,   /* (SELECT ...) scalar subquery, EXISTS, IN (SELECT) */
} AstExprKind;

typedef enum AstLitKind {
    LIT_NULL,
    LIT_BOOL,       /* text "t" or "f" */
    LIT_INT,        /* digits, fits no type yet: the binder picks int4/int8 */
    LIT_DECIMAL,    /* 1.5, 1e3: the text as written */
    LIT_STRING,     /* the unescaped string */
    LIT_TYPED,      /* TYPE 'text': type_name + text, e.g. TIMESTAMP '2026-01-01' */
    LIT_INTERVAL,   /* INTERVAL 'text' [unit [TO unit]]: text + interval_unit */
} AstLitKind;

typedef enum AstOp {
    OP_NONE = 0,
    /* unary */
    OP_NEG, OP_NOT, OP_PLUS,
    /* binary */
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD, OP_POW, OP_CONCAT,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE,
    OP_AND, OP_OR,
} AstOp;

typedef enum AstIsKind {
    IS_NULL, IS_TRUE, IS_FALSE, IS_UNKNOWN, IS_DISTINCT_FROM,
} AstIsKind;

typedef enum AstSubqueryKind { SUBQ_SCALAR, SUBQ_EXISTS, SUBQ_IN } AstSubqueryKind;

typedef struct AstWindowSpec {
    AstList *partition_by;   /* AstExpr* */
    AstList *order_by;       /* AstOrderItem* */
} AstWindowSpec;

typedef struct AstSelect AstSelect;

typedef struct AstExpr {
    AstExprKind kind;
    int pos;                 /* 1-based character position */
    AstLitKind lit_kind;     /* AST_LITERAL */
    const char *text;        /* literal text; AST_COLUMN name; AST_FUNC name; AST_EXTRACT field */
    const char *qualifier;   /* AST_COLUMN/AST_STAR table qualifier, or NULL */
    const char *type_name;   /* AST_CAST target / LIT_TYPED type, lower case ("timestamp", "varchar"...) */
    const char *interval_unit; /* LIT_INTERVAL: "second", "minute", ..., "day to second", or NULL */
    AstOp op;                /* AST_UNARY, AST_BINARY */
    int param_no;            /* AST_PARAM: n of $n */
    AstList *args;           /* AstExpr*: operands, function args, IN list */
    struct AstExpr *arg;     /* AST_CAST/IN/BETWEEN/IS/LIKE/EXTRACT subject; CASE operand (may be NULL) */
    struct AstExpr *lo, *hi; /* BETWEEN bounds; LIKE: lo = pattern, hi = ESCAPE or NULL; IS DISTINCT FROM: lo = other */
    AstList *whens;          /* CASE: AstExpr* pairs flattened: when0, then0, when1, then1... */
    struct AstExpr *else_;   /* CASE ELSE or NULL */
    bool negated;            /* NOT IN / NOT BETWEEN / IS NOT / NOT LIKE */
    bool ilike;              /* AST_LIKE: ILIKE */
    bool try_cast;           /* AST_CAST: TRY_CAST, NULL where the cast fails with a data error */
    AstIsKind is_kind;       /* AST_IS */
    bool distinct;           /* AST_FUNC: f(DISTINCT ...) */
    bool star_arg;           /* AST_FUNC: count(*) */
    struct AstExpr *filter;  /* AST_FUNC: FILTER (WHERE ...) or NULL */
    AstWindowSpec *over;     /* AST_FUNC: OVER (...) or NULL */
    AstSubqueryKind subq_kind; /* AST_SUBQUERY */
    AstSelect *subquery;     /* AST_SUBQUERY */
} AstExpr;

/* ---- queries ------------------------------------------------------------- */

typedef struct AstTarget {
    AstExpr *expr;           /* may be AST_STAR */
    const char *alias;       /* AS name, or NULL */
    int pos;
} AstTarget;

typedef struct AstOrderItem {
    AstExpr *expr;
    bool desc;
    int nulls;               /* 0 default, 1 NULLS FIRST, 2 NULLS LAST */
} AstOrderItem;

typedef enum AstTableRefKind {
    TREF_NAME,      /* name [AS alias] [FOR SYSTEM_TIME AS OF expr] */
    TREF_SUBQUERY,  /* (query) AS alias */
    TREF_JOIN,      /* left JOIN right ON/USING */
    TREF_WINDOW,    /* TUMBLE/HOP/CUMULATE/SESSION(input, time_col, args...) in either form */
} AstTableRefKind;

typedef enum AstJoinType { JOIN_INNER, JOIN_LEFT, JOIN_RIGHT, JOIN_FULL, JOIN_CROSS } AstJoinType;

typedef enum AstWindowKind { WIN_TUMBLE, WIN_HOP, WIN_CUMULATE, WIN_SESSION } AstWindowKind;

typedef struct AstTableRef {
    AstTableRefKind kind;
    int pos;
    const char *name;            /* TREF_NAME */
    const char *alias;           /* optional for all kinds */
    AstList *col_aliases;        /* alias(c1, c2): const char* or NULL */
    AstExpr *system_time;        /* FOR SYSTEM_TIME AS OF expr, or NULL */
    AstSelect *subquery;         /* TREF_SUBQUERY */
    AstJoinType join_type;       /* TREF_JOIN */
    struct AstTableRef *left, *right; /* TREF_JOIN */
    AstExpr *on;                 /* TREF_JOIN ON, or NULL */
    AstList *using_cols;         /* TREF_JOIN USING (const char*), or NULL */
    AstWindowKind win_kind;      /* TREF_WINDOW */
    struct AstTableRef *input;   /* TREF_WINDOW: the windowed relation (TREF_NAME or TREF_SUBQUERY) */
    AstExpr *time_col;           /* TREF_WINDOW: the time column (AST_COLUMN; DESCRIPTOR(col) lowers to it) */
    AstList *win_args;           /* TREF_WINDOW: the remaining arguments (sizes, slide, offset), AstExpr* */
    AstList *win_partition;      /* TREF_WINDOW SESSION: PARTITION BY columns, AstExpr*, or NULL */
} AstTableRef;

typedef enum AstSetOp {
    SETOP_NONE, SETOP_UNION, SETOP_UNION_ALL, SETOP_INTERSECT, SETOP_EXCEPT,
    SETOP_INTERSECT_ALL, SETOP_EXCEPT_ALL,
} AstSetOp;

typedef struct AstCte {
    const char *name;
    AstSelect *query;
    int pos;
    AstList *col_names;      /* WITH name (a, b) AS (...): const char*, or NULL */
} AstCte;

struct AstSelect {
    int pos;
    AstList *ctes;           /* AstCte*: WITH ... (only on the outermost select of a set operation) */
    bool distinct;
    AstList *distinct_on;    /* AstExpr*: DISTINCT ON (...), or NULL */
    AstList *targets;        /* AstTarget* */
    AstList *from;           /* AstTableRef*: comma-separated items (implicit cross joins) */
    AstExpr *where;
    AstList *group_by;       /* AstExpr* (an integer literal is an ordinal) */
    AstExpr *having;
    AstList *order_by;       /* AstOrderItem* */
    AstExpr *limit;
    AstExpr *offset;
    AstList *values;         /* VALUES (..), (..): a list of AstList* rows of AstExpr*; targets NULL then */
    AstSetOp set_op;         /* this select combined with `set_rhs` */
    struct AstSelect *set_rhs;
    bool recursive;          /* WITH RECURSIVE: each CTE of `ctes` may read itself */
};

/* ---- statements ---------------------------------------------------------- */

typedef enum AstStmtKind {
    STMT_SELECT,
    STMT_CREATE_SOURCE,      /* CREATE SOURCE | CREATE STREAM | CREATE TABLE */
    STMT_CREATE_VIEW,        /* CREATE [MATERIALIZED] VIEW */
    STMT_CREATE_SINK,
    STMT_DROP,
    STMT_INSERT,
    STMT_EXPLAIN,
    STMT_FLUSH,
    STMT_SHOW,
    STMT_SET,
    STMT_RESET,
    STMT_TRANSACTION,        /* BEGIN/START TRANSACTION/COMMIT/END/ROLLBACK/ABORT */
    STMT_CHECKPOINT,         /* ALTER SYSTEM CHECKPOINT, CHECKPOINT */
    STMT_UPDATE,
    STMT_DELETE,
    STMT_SUBSCRIBE,          /* SUBSCRIBE view, COPY (SUBSCRIBE view) TO STDOUT */
    STMT_ANALYZE_LATENESS,   /* ANALYZE LATENESS ON source ... */
    STMT_VERIFY,             /* VERIFY MATERIALIZED VIEW v */
    STMT_RESUME,             /* ALTER MATERIALIZED VIEW name RESUME, ALTER TABLE name RESUME */
    STMT_ALTER_SOURCE,       /* ALTER SOURCE name SET (...), ALTER TABLE name SET (...) */
    STMT_EMPTY,              /* only comments or whitespace */
    STMT_CREATE_USER,        /* CREATE USER name [WITH] [PASSWORD 'p' | NULL] */
    STMT_ALTER_USER,         /* ALTER USER name [WITH] PASSWORD 'p' | NULL */
    STMT_DROP_USER,          /* DROP USER [IF EXISTS] name */
    STMT_ALTER_RENAME,       /* ALTER {SOURCE|TABLE|VIEW|MATERIALIZED VIEW|SINK} [IF EXISTS] name RENAME TO new */
    STMT_SWAP_VIEW,          /* ALTER MATERIALIZED VIEW name SWAP WITH other (u.rename: new_name = other) */
    STMT_DECLARE,            /* DECLARE name CURSOR FOR {SELECT ... | SUBSCRIBE ...} */
    STMT_FETCH,              /* FETCH [n | ALL] [FROM] name [WITH (...)] */
    STMT_CLOSE,              /* CLOSE name | CLOSE ALL */
} AstStmtKind;

typedef enum AstObjectKind {
    OBJ_SOURCE, OBJ_TABLE, OBJ_VIEW, OBJ_MATERIALIZED_VIEW, OBJ_SINK, OBJ_STREAM,
} AstObjectKind;

typedef struct AstOption {       /* WITH (key = value) */
    const char *key;             /* dotted keys joined with '.', quoted keys as written; lower case unless quoted */
    const char *value;           /* literal text (string unquoted, numbers as written, identifiers lower-cased) */
    int pos;
} AstOption;

typedef struct AstColumnDef {
    const char *name;
    const char *type_name;       /* lower case, e.g. "bigint", "varchar", "timestamp" */
    bool not_null;
    bool primary_key;            /* column-level PRIMARY KEY */
    AstExpr *generated;          /* col AS expr, or NULL */
    int pos;
} AstColumnDef;

typedef struct AstInclude {      /* INCLUDE key|partition|offset|timestamp [AS name] */
    const char *what;
    const char *alias;
    int pos;
} AstInclude;

typedef struct AstCreateSource {
    AstObjectKind obj;           /* OBJ_SOURCE, OBJ_STREAM, OBJ_TABLE */
    const char *name;
    bool if_not_exists;
    bool append_only;            /* CREATE TABLE ... APPEND ONLY */
    AstList *columns;            /* AstColumnDef* */
    const char *wm_column;       /* WATERMARK FOR col AS expr, or NULL */
    AstExpr *wm_expr;
    int wm_pos;
    AstList *primary_key;        /* const char*: table-level PRIMARY KEY (a, b) */
    AstList *includes;           /* AstInclude* */
    AstList *options;            /* AstOption*: WITH (...) */
    const char *format;          /* FORMAT PLAIN|UPSERT|DEBEZIUM (lower case) or NULL */
    const char *encode;          /* ENCODE JSON... or NULL */
    AstList *encode_options;     /* AstOption*: ENCODE JSON (...) or NULL */
} AstCreateSource;

typedef enum AstEmitMode { EMIT_DEFAULT, EMIT_CHANGES, EMIT_ON_WINDOW_CLOSE } AstEmitMode;

typedef struct AstCreateView {
    bool materialized;
    bool if_not_exists;
    bool or_replace;
    const char *name;
    AstList *col_names;          /* CREATE VIEW v (a, b) AS ..., const char*, or NULL */
    AstSelect *query;
    int query_pos;               /* where the query text starts (1-based) */
    AstEmitMode emit;
    AstExpr *allow_lateness;     /* ALLOW LATENESS interval, or NULL */
    const char *late_rows_into;  /* LATE ROWS INTO name, or NULL */
    AstList *options;            /* AstOption*: WITH (...) */
} AstCreateView;

typedef struct AstCreateSink {
    const char *name;
    bool if_not_exists;
    const char *from_name;       /* FROM name, or NULL */
    AstSelect *query;            /* AS query, or NULL */
    AstList *options;            /* AstOption* */
    const char *format;
    const char *encode;
    AstList *encode_options;
} AstCreateSink;

/* CREATE/ALTER/DROP USER. password: NULL when not given, "" for PASSWORD
 * NULL, else the text (a password, or a SCRAM-SHA-256$... verifier). */
typedef struct AstUser {
    const char *name;
    const char *password;
    bool if_exists;
} AstUser;

typedef struct AstDrop {
    AstObjectKind obj;
    AstList *names;              /* const char* */
    bool if_exists;
    bool cascade;
} AstDrop;

typedef struct AstAlterRename {
    AstObjectKind obj;
    bool if_exists;
    const char *name;
    const char *new_name;
    int new_pos;                 /* position of the new name */
} AstAlterRename;

typedef struct AstInsert {
    const char *table;
    AstList *columns;            /* const char*, or NULL = all */
    AstSelect *query;            /* VALUES are a select with `values` set */
} AstInsert;

typedef struct AstUpdate {
    const char *table;
    AstList *set_cols;           /* const char* */
    AstList *set_exprs;          /* AstExpr* */
    AstExpr *where;
} AstUpdate;

typedef struct AstDelete {
    const char *table;
    AstExpr *where;
} AstDelete;

typedef struct AstExplain {
    AstList *options;            /* AstOption*: EXPLAIN (FORMAT JSON, VERBOSE) -> key "format" value "json" */
    struct AstStmt *stmt;        /* NULL for EXPLAIN ... MATERIALIZED VIEW v */
    const char *view;            /* that v (EXPLAIN ANALYZE of a running view), else NULL */
} AstExplain;

typedef struct AstShow {
    const char *what;            /* "sources", "tables", "materialized views", "views", "sinks",
                                    "create" (with obj + name), or a setting name */
    AstObjectKind obj;
    const char *name;
} AstShow;

typedef struct AstSet {
    const char *name;            /* SET name = value / TO value; RESET name ("all" for RESET ALL) */
    const char *value;           /* literal text, NULL for DEFAULT */
} AstSet;

typedef struct AstSubscribe {    /* SUBSCRIBE [TO] view [WITH (...)] */
    const char *view;
    AstList *options;            /* AstOption*: snapshot, progress (checked by the server) */
    bool copy;                   /* written as COPY (SUBSCRIBE ...) TO STDOUT */
    AstList *copy_options;       /* AstOption*: COPY's own options (FORMAT), or NULL */
} AstSubscribe;

typedef struct AstAnalyze {      /* ANALYZE LATENESS ON source [FOR w(args)] [BOUNDS (..)] [LATENESS (..)] [TARGET n] [WITH (..)] */
    const char *source;
    bool has_window;             /* FOR given */
    AstWindowKind win_kind;      /* FOR TUMBLE | HOP | CUMULATE | SESSION */
    AstList *win_args;           /* AstExpr*: the sizes, as written (counts checked here) */
    int win_pos;
    AstList *partition;          /* AstExpr*: PARTITION BY columns (SESSION's group keys), or NULL */
    int partition_pos;
    AstList *bounds;             /* AstExpr*, or NULL when omitted */
    int bounds_pos;
    AstList *lateness;           /* AstExpr*, or NULL when omitted */
    int lateness_pos;
    const char *target;          /* TARGET number as written, or NULL */
    int target_pos;
    AstList *options;            /* AstOption*: WITH (max_rows = .., report = ..), or NULL */
} AstAnalyze;

typedef struct AstVerify {       /* VERIFY MATERIALIZED VIEW v [WITH (...)] */
    const char *view;
    AstList *options;            /* AstOption*, or NULL */
} AstVerify;
typedef struct AstAlterSource {  /* ALTER SOURCE|TABLE name SET (key = value, ...) */
    const char *name;
    AstList *options;            /* AstOption* */
} AstAlterSource;

typedef struct AstDeclare {     /* DECLARE name CURSOR FOR query */
    const char *name;
    struct AstStmt *query;       /* any statement the grammar took; the server accepts SELECT and SUBSCRIBE */
} AstDeclare;

#define AST_FETCH_ALL (-1L)
typedef struct AstFetch {        /* FETCH [count] [FROM] name [WITH (...)] */
    const char *name;
    long count;                  /* >= 0, or AST_FETCH_ALL */
    AstList *options;            /* AstOption*: timeout (checked by the server), or NULL */
} AstFetch;

typedef enum AstTxnKind { TXN_BEGIN, TXN_COMMIT, TXN_ROLLBACK } AstTxnKind;

typedef struct AstStmt {
    AstStmtKind kind;
    int pos;                     /* 1-based position of the first token */
    int text_start, text_end;    /* byte range [start, end) of this statement in the input, without the ';' */
    union {
        AstSelect *select;
        AstCreateSource *create_source;
        AstCreateView *create_view;
        AstCreateSink *create_sink;
        AstDrop *drop;
        AstAlterRename *rename;      /* STMT_ALTER_RENAME, STMT_SWAP_VIEW */
        AstInsert *insert;
        AstUpdate *update;
        AstDelete *delete_;
        AstExplain *explain;
        AstShow *show;
        AstSet *set;
        AstSubscribe *subscribe;
        AstAnalyze *analyze;
        AstVerify *verify;
        AstAlterSource *alter_source;
        AstTxnKind txn;
        const char *savepoint_dir;   /* STMT_CHECKPOINT: ALTER SYSTEM SAVEPOINT TO 'dir', else NULL */
        const char *resume_view;     /* STMT_RESUME: the view's (or table's) name */
        AstUser *user;               /* STMT_CREATE_USER, STMT_ALTER_USER, STMT_DROP_USER */
        AstDeclare *declare;
        AstFetch *fetch;
        const char *close_name;      /* STMT_CLOSE: the cursor, NULL for CLOSE ALL */
    } u;
} AstStmt;

/*
 * Parses sql (NUL-terminated; at most PARSE_MAX_SQL bytes) into statements,
 * allocated in a. On success returns 0 with *stmts and *n_stmts set (empty
 * statements between ';' are dropped; a string with only comments yields
 * zero statements). On error returns -1 with err set: SQLSTATE 42601 and the
 * position of the offending token ("syntax error at or near \"x\"", or
 * "syntax error at end of input"), 54000 when the input is too long, 54001
 * when it is nested too deeply (PARSE_MAX_DEPTH) or overflows the parser's
 * stack: never a C stack overflow. Nothing is printed.
 */
#define PARSE_MAX_SQL (16 * 1024 * 1024)
#define PARSE_MAX_DEPTH WEIR_MAX_EXPR_DEPTH /* common/weir_limits.h */
int parse_sql(const char *sql, Arena *a, AstStmt ***stmts, int *n_stmts, WError *err);
/* parse_sql, and also the $n placeholders of all statements (AST_PARAM
 * nodes in a, in text order; a placeholder used twice appears twice). */
int parse_sql_params(const char *sql, Arena *a, AstStmt ***stmts, int *n_stmts, AstExpr ***params, int *n_params,
                     WError *err);
/* Binds placeholder e to a parameter value given as text (NULL = SQL
 * NULL): e becomes an untyped string literal, which takes the type its
 * context wants, as a quoted literal does (WHERE k = $1 compares k with
 * the value read as k's type). The value is copied into a. */
void parse_bind_param(Arena *a, AstExpr *e, const char *value);

/* Names for messages and EXPLAIN. */
const char *ast_op_name(AstOp op);               /* "+", "=", "AND"... */
const char *ast_object_kind_name(AstObjectKind k); /* "source", "materialized view"... */

#endif
