/*
 * planner_int.h: shared between the binder (bind.c), the lowering
 * (plan.c) and EXPLAIN (explain.c). Not for use outside planner/.
 */
#ifndef WEIR_PLANNER_INT_H
#define WEIR_PLANNER_INT_H

#include "planner.h"

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

typedef struct BindCtx {
    Arena *a;
    WError *err;
    const PlanCatalog *cat;
    AggCtx *agg;             /* non-NULL while binding post-aggregation expressions */
    bool in_agg_arg;         /* inside an aggregate's argument (nested aggregates are errors) */
    int next_node_id;
    int64_t now_us;          /* now() of this statement (timestamptz), 0 until first used */
} BindCtx;

/* plan_panes.c: makes a HOP window aggregation (win feeding agg) work in
 * panes when it can; true if it did. */
bool plan_set_panes(PlanNode *agg, PlanNode *win);

/* bind.c */
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
const char *expr_default_name(const AstExpr *e);
/* Evaluates a constant interval expression to microseconds (no months). */
int const_interval_us(BindCtx *b, const Scope *s, const AstExpr *e, int64_t *out);

/* explain.c helpers used by plan.c too */
void expr_to_text(const PlanExpr *e, const PlanSchema *in, Buf *out);

#endif
