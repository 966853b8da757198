/*
 * planner_int.h: shared between the binder (bind.c), the lowering passes
 * (plan*.c, temporal.c; planner/README.md lists them and the direction in
 * which they call each other) and EXPLAIN (explain.c). Not for use outside
 * planner/.
 */
#ifndef WEIR_PLANNER_INT_H
#define WEIR_PLANNER_INT_H

#include "planner.h"
#include "weir_limits.h"

/* What a column means for time: lets the lowering recognise windowed
 * aggregations whose state a watermark bounds. */
typedef enum ColRole {
    ROLE_NONE, ROLE_EVENT_TIME, ROLE_WINDOW_START, ROLE_WINDOW_END,
    ROLE_SESSION_START, ROLE_SESSION_END, /* bounds of a session window: decided by the aggregation */
} ColRole;

typedef struct ScopeCol {
    const char *qualifier;   /* relation name or alias, may be NULL */
    const char *name;
    TypeId type;
    bool hidden;             /* not expanded by '*' */
    ColRole role;
    int64_t win_size_us;     /* ROLE_WINDOW_START: window size (end = start + size) */
} ScopeCol;

/* The columns visible to expressions at one point of a query: the output of
 * one plan node, in order. */
typedef struct Scope {
    int n;
    ScopeCol *cols;
} Scope;

/* Aggregation context: while binding the select list and HAVING of a
 * grouped query, expressions equal to a GROUP BY expression and aggregate
 * calls are replaced by columns of the aggregation's output. */
typedef struct AggCtx {
    int n_group;
    PlanExpr **group;        /* bound against the input scope */
    int n_aggs, cap_aggs;
    PlanAgg *aggs;
    PlanExpr **agg_args;     /* bound argument of each agg (NULL for count(*)) */
    PlanExpr **agg_filters;  /* FILTER predicate or NULL */
    const Scope *input;      /* the scope aggregates' arguments bind against */
} AggCtx;

/* A subquery expression already joined to the rows being bound: the column holding its value. */
typedef struct SubqMap {
    const AstExpr *e;        /* the AST_SUBQUERY */
    int col;                 /* its column in the scope it was planned against */
} SubqMap;

typedef struct BindCtx {
    Arena *a;
    WError *err;
    const PlanCatalog *cat;
    AggCtx *agg;             /* non-NULL while binding post-aggregation expressions */
    bool in_agg_arg;         /* inside an aggregate's argument (nested aggregates are errors) */
    int next_node_id;
    int64_t now_us;          /* now() of this statement (timestamptz), 0 until first used */
    int n_subq, cap_subq;    /* subqueries planned so far (plan_subq.c), newest last */
    SubqMap *subq;
    int plan_rev;            /* PlanCtx.plan_rev: the planner revision whose typing rules apply */
    /* Parameter type inference (plan_params.c), NULL otherwise: $n placeholders
     * bind as untyped NULLs and coerce_expr records the type each is first
     * coerced to in param_types[n-1] (n_param_types entries). */
    TypeId *param_types;
    int n_param_types;
} BindCtx;

/* plan_panes.c: makes a HOP window aggregation (win feeding agg) work in
 * panes when it can; true if it did. Numeric sums merge from panes since
 * planner revision 4. */
bool plan_set_panes(PlanNode *agg, PlanNode *win, int plan_rev);

/* bind.c */
/* An AST_SUBQUERY: the column plan_subq.c joined it as (0A000 when it was not). */
PlanExpr *bind_subquery(BindCtx *b, const Scope *s, const AstExpr *e);
PlanExpr *bind_expr(BindCtx *b, const Scope *s, const AstExpr *e);
/* Coerces e to type t (implicit cast rules; unknown literals parse as t). NULL + err on failure. */
PlanExpr *coerce_expr(BindCtx *b, PlanExpr *e, TypeId t, int pos);
/* Evaluates a bound expression that uses no columns (constant folding for
 * window sizes, LIMIT, VALUES). Returns 0 or -1 with err. */
int eval_const(BindCtx *b, const PlanExpr *e, Value *out);
bool expr_equal(const PlanExpr *x, const PlanExpr *y);
bool ast_is_aggregate(const AstExpr *e);
bool ast_contains_aggregate(const AstExpr *e);
PlanExpr *make_col(BindCtx *b, int col, TypeId t);
PlanExpr *make_const(BindCtx *b, Value v);
/* An explicit CAST(e AS t) (any cast the scalar layer knows; checked per value). */
PlanExpr *make_cast(BindCtx *b, PlanExpr *e, TypeId t, int pos);
/* The type two typed operands resolve to (as CASE and UNION do), or TYPE_NULL
 * when they cannot be matched. */
TypeId bind_common_type(TypeId a, TypeId c);
const char *expr_default_name(const AstExpr *e);
/* Evaluates a constant interval expression to microseconds (no months). */
int const_interval_us(BindCtx *b, const Scope *s, const AstExpr *e, int64_t *out);

/* plan.c: the lowering's context, shared with the files that lower one
 * construct each (temporal.c, plan_query.c). */
typedef struct Rel {
    PlanNode *node;
    Scope scope;
} Rel;

/* The common table expressions in scope: innermost WITH first, and within
 * one WITH the later ones first (a CTE sees only those before it). */
typedef struct CteEnv {
    const AstCte *cte;
    struct CteEnv *prev;
    bool used;               /* referenced at least once (else only checked) */
    bool recursive;          /* in a WITH RECURSIVE list: its query may read itself */
    const PlanSchema *work;  /* inside its own recursive term: the work table's columns, else NULL */
    int work_id;
} CteEnv;

/* The correlation of the subquery being planned (plan_subq.c): its WHERE's
 * equalities of an inner with an outer expression, found by subq_correlate(). */
#define SUBQ_MAX_CORR 32
typedef struct SubqCorr {
    const AstSelect *sel;    /* the subquery's select (plan_select_core calls subq_correlate for it) */
    const Scope *outer;      /* the outer query's columns */
    AstSubqueryKind kind;
    int n;
    const AstExpr *inner[SUBQ_MAX_CORR], *outer_e[SUBQ_MAX_CORR];
    bool grouped;            /* the subquery aggregates */
    bool had_group_by;       /* ... with a GROUP BY of its own (so it may yield no or many rows) */
} SubqCorr;

typedef struct PlanCtx {
    BindCtx b;
    SubqCorr *corr;          /* a subquery to decorrelate, or NULL */
    CteEnv *ctes;
    const AstSelect *topn_sub;   /* a FROM subquery with ROW_NUMBER() OVER, filtered rn <= topn_n outside */
    int64_t topn_n;
    bool streaming;          /* a view (connectors, watermarks) vs an ad hoc query */
    bool allow_unbounded;    /* the user accepted operators with unbounded state */
    int64_t state_ttl_us;    /* the view's WITH (state_ttl): bounds regular joins and aggregations; 0 none */
    /* WITH (agg_phase_strategy): 'auto' (0: two phases for aggregations keyed by
     * window bounds only), 'one_phase' (1: never), 'two_phase' (2: wherever it applies) */
    int agg_phase_strategy;
    int plan_rev;            /* PlanViewOptions.plan_rev (PLAN_REV_CURRENT outside views) */
    int key_groups;          /* WITH (key_groups): 0 = the default (plan_dist.c, default_key_groups) */
    bool cluster;            /* PlanViewOptions.cluster */
    bool placement_replicated; /* WITH (placement = 'replicated'): never distributed (plan_place.c) */
    /* The WHERE conjuncts of the SELECT whose FROM is being planned that an
     * inner JOIN may take into its ON (plan_from, plan_tref); NULL when none. */
    const AstExpr **where_conj;
    bool *where_used;
    int where_n;
    int n_nodes, cap_nodes;
    PlanNode **nodes;
    int session_pos;         /* position of the first SESSION window function (its errors), 0 none */
    /* SQL's recursion: a query nested in the one being planned (a FROM
     * subquery, a subquery in an expression, a Top-N's inner select) and a
     * reference to a CTE. init_ctx (plan_query.c) sets them to plan_select
     * and plan_cte_ref; the passes below plan_query.c call these instead of
     * naming it, so the planner's files depend on each other in one
     * direction (planner/README.md, "Files"). */
    int (*sub_select)(struct PlanCtx *p, const AstSelect *sel, Rel *out, PlanQuery *q);
    int (*cte_ref)(struct PlanCtx *p, const AstTableRef *t, CteEnv *ce, Rel *out);
} PlanCtx;

/* plan_query.c: p ready to plan a view (streaming) or an ad hoc query, at
 * PLAN_REV_CURRENT, with its recursion hooks set. */
void init_ctx(PlanCtx *p, const PlanCatalog *cat, Arena *a, WError *err, bool streaming);
/* The planned view whose root (materialize) node is m, over p's nodes. */
PlanView *view_of(Arena *a, const PlanCtx *p, PlanNode *m);
/* Planner-bug guards on a finished plan: every node's schema as wide as its
 * operator emits (XX000), and the state and column limits (54000). */
int check_widths(PlanNode *const *nodes, int n_nodes, WError *err);
int check_limits(PlanNode *const *nodes, int n_nodes, int pos, WError *err);
/* The position of the first call of fn in e (-1 when it has none), 0 if none. */
int expr_find_fn(const PlanExpr *e, ScalarFn fn);
/* plan_late.c: the window/lateness pass of a view whose lowered query is in:
 * the top window-bounded aggregation (*agg_out, NULL when none) gets emit mode
 * and lateness, its window late_check (and panes), and LATE ROWS INTO a table
 * (*late_win_out: that window). 0, or -1 with err (42P20, 0A000, 22023). */
int plan_view_lateness(PlanCtx *p, const AstCreateView *cv, PlanNode *in, PlanNode **agg_out, PlanNode **late_win_out);

/* A new node (appended to p's nodes) reading input (may be NULL). */
PlanNode *topn_new(PlanCtx *p, PlanNode *cur, int n_order, const PlanOrder *order);
PlanNode *new_node(PlanCtx *p, PlanNodeKind kind, PlanNode *input);
void alloc_schema(Arena *a, PlanSchema *s, int n);
void alloc_scope(Arena *a, Scope *s, int n);
void schema_from_scope(Arena *a, PlanSchema *out, const Scope *s);
/* plan_dist.c: with P > 1, gives every node of p (the nodes of v) its
 * distribution, inserts the exchanges and allocates the instances' state
 * tables; sets v->parallelism (1 when nothing splits). 0, or -1 with err. */
int plan_distribute(PlanCtx *p, PlanView *v, int P);
/* plan_place.c: in a cluster (cluster true), decides whether v (planned
 * with parallelism P) is distributed over key groups or replicated
 * (v->distributed, v->placement), inserting the repartition exchange of a
 * distributed one into p's nodes (and v's). Outside a cluster it leaves
 * the plan as it is. 0, or -1 with err: 0A000 for a view over a
 * distributed view (a view that cannot be distributed is replicated, with
 * the reason). */
int plan_place(PlanCtx *p, PlanView *v, bool cluster, int P);
/* WITH (key_groups = N) of a view: an integer 1..WEIR_MAX_KEY_GROUPS into
 * p->key_groups. 0, or -1 with err (22023 not an integer or below 1, 54000
 * above the limit) at o's position. */
int plan_key_groups_option(PlanCtx *p, const AstOption *o, WError *err);
/* A fresh state table id (views only; 0 in ad hoc queries). */
uint64_t new_table(PlanCtx *p);
int plan_tref(PlanCtx *p, const AstTableRef *t, Rel *out);
/* A named relation; t->system_time must be handled (cleared) by the caller. */
int plan_relation_name(PlanCtx *p, const AstTableRef *t, Rel *out);
/* The regular (or interval) join of l and r; the result replaces *out (l may be out). */
int make_join(PlanCtx *p, AstJoinType type, const AstExpr *on, AstList *using_cols, Rel *l, Rel *r, int pos,
              Rel *out);
/* Splits a bound predicate into its AND-ed conjuncts, all of them, into an
 * array from a (*n of them; none for a NULL e). */
PlanExpr **conjuncts(PlanExpr *e, Arena *a, int *n);

/* A PROJECT over in with exprs; keep_key maps (or appends hidden) the input key. */
PlanNode *make_project(PlanCtx *p, PlanNode *in, const Scope *in_scope, int n, PlanExpr **exprs,
                       const char **names, const ColRole *roles, Scope *out_scope, bool keep_key);
/* LIMIT/OFFSET of an ad hoc query into q; in a view (q NULL) they are 0A000. */
int plan_limit(PlanCtx *p, const AstSelect *sel, PlanQuery *q);
/* The values of sel's LIMIT (-1 none) and OFFSET (0 none). */
int limit_values(PlanCtx *p, const AstSelect *sel, int64_t *limit, int64_t *offset);
/* LIMIT/OFFSET of a query inside another (a subquery, a set operation's
 * branch): a Top-N of r's rows by order (columns of r) keeping the first
 * n_visible columns and the row number as the (hidden) key. */
int make_limit_topn(PlanCtx *p, const AstSelect *sel, Rel *r, int n_order, const PlanOrder *order, int n_visible);
/* The distinct aggregation on the first n columns (SELECT DISTINCT, UNION), with
 * the unbounded-state guard; NULL + err when refused. */
PlanNode *make_distinct(PlanCtx *p, PlanNode *cur, const Scope *scope, int n, int pos, const char *what);
/* ROW_NUMBER() OVER (...) in inner, filtered rn <= p->topn_n outside. */
int plan_topn(PlanCtx *p, const AstSelect *inner, Rel *out);
/* plan_select.c: one SELECT (no WITH, no set operation). */
int plan_select_core(PlanCtx *p, const AstSelect *sel, Rel *out, PlanQuery *q);
/* plan.c: the FROM list of sel (items joined, WHERE conjuncts lent to inner joins). */
int plan_from(PlanCtx *p, const AstSelect *sel, Rel *out);

/* One item of a select list after '*' is expanded. */
typedef struct Target {
    const AstExpr *expr;     /* NULL for a star-expanded column */
    int star_col;            /* scope column for star expansion */
    const char *name;
    int pos;
} Target;

/* plan_values.c: a VALUES list (ad hoc only: 0A000 in a view) as a PN_VALUES leaf. */
int plan_values(PlanCtx *p, const AstSelect *sel, Rel *out);

/* plan_topn.c: records in p a FROM subquery of sel numbered by ROW_NUMBER()
 * OVER and filtered rn <= N in sel's WHERE (p->topn_sub, p->topn_n). */
int plan_topn_mark(PlanCtx *p, const AstSelect *sel);
/* DISTINCT ON: a Top-1 of cur per the n_part columns part by order, then a
 * projection keeping the first n_visible columns (all when keep_hidden). */
PlanNode *make_distinct_on(PlanCtx *p, PlanNode *cur, const Scope *scope, int n_part, const int *part,
                           int n_order, const PlanOrder *order, int n_visible, bool keep_hidden);

/* plan_agg.c: the group keys of sel bound against scope into agg (ordinals and
 * output aliases through targets; duplicates dropped). 0, or -1 with err. */
int bind_group_keys(PlanCtx *p, const AstSelect *sel, const Target *targets, int n_targets, const Scope *scope,
                    AggCtx *agg);
/* Lowers the bound aggregate agg over *cur (columns scope): pre-projection,
 * PN_AGG with its window/session analysis, then HAVING (bound through agg, or
 * NULL) as a filter. *cur gets the last node, *post_scope the aggregation's
 * columns (group keys, then _agg<i>). 0, or -1 with err. */
int plan_agg_lower(PlanCtx *p, const AstSelect *sel, const AggCtx *agg, PlanExpr *having, PlanNode **cur,
                   const Scope *scope, Scope *post_scope);

/* temporal.c: FROM l JOIN r FOR SYSTEM_TIME AS OF ... ON ... (t is that
 * TREF_JOIN): plan_temporal_check first (the checks that come before either
 * side is planned), then plan_temporal_join with the left side planned. */
int plan_temporal_check(PlanCtx *p, const AstTableRef *t);
int plan_temporal_join(PlanCtx *p, const AstTableRef *t, const Rel *left, Rel *out);

/* plan_query.c: WITH and the set operations. */
/* Any query: its WITH list in scope, then a set operation or plan_select_core(). */
int plan_select(PlanCtx *p, const AstSelect *sel, Rel *out, PlanQuery *q);
/* The CTE named name in scope, or NULL. */
CteEnv *find_cte(const PlanCtx *p, const char *name);
/* A FROM reference to a CTE (planned again at each reference). */
int plan_cte_ref(PlanCtx *p, const AstTableRef *t, CteEnv *ce, Rel *out);

/* plan_subq.c: subqueries in expressions. */
bool ast_contains_subquery(const AstExpr *e);
/* WHERE: top-level [NOT] EXISTS / [NOT] IN conditions become semi (anti)
 * joins of cur; other subqueries are joined as columns; *rest gets the
 * conditions left for the filter (NULL when none). */
int plan_where_subqueries(PlanCtx *p, const AstExpr *where, Rel *cur, const AstExpr **rest);
/* Joins every subquery in e to cur as a column (MARK, SCALAR). */
int plan_expr_subqueries(PlanCtx *p, const AstExpr *e, Rel *cur);
/* Called by plan_select_core for p->corr's select once its FROM (inner) is
 * planned: takes the correlated equalities out of WHERE; *out gets the
 * select to plan instead (unchanged when it is not correlated). */
int subq_correlate(PlanCtx *p, const AstSelect *sel, const Scope *inner, const AstSelect **out);

/* explain.c helpers used by plan.c too */
void expr_to_text(const PlanExpr *e, const PlanSchema *in, Buf *out);

/* plan_lookup.c: turns view scans under an equality (or range) filter on a
 * prefix of the view's key into key lookups (PlanNode.scan_eq ...). */
void plan_key_lookups(PlanQuery *q, Arena *a);

/* plan_prune.c: marks the columns each append-only side of a join must store
 * (PlanNode.join_stored), from what the nodes above it read. Runs on a finished
 * view plan, before plan_distribute. */
void plan_prune_joins(Arena *a, PlanView *v);
/* plan_share.c: merges the equal sub-plans of a finished one-thread view plan
 * (after plan_prune_joins, before plan_distribute) so they run once; returns
 * how many nodes were merged away. */
int plan_share(Arena *a, PlanView *v);

/* A function users of PostgreSQL or Flink call that weir lacks under any
 * signature (unsupported_fn.c): true with what to name in a 0A000 and a
 * hint, for the binder's "does not exist". */
bool plan_unsupported_function(const char *name, const char **what, const char **hint);

#endif
