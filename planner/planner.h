/*
 * planner.h: from AST to an immutable stream plan.
 *
 * The binder resolves names against a read-only catalog view (PlanCatalog,
 * supplied by the server), types every expression with Postgres rules and
 * produces PlanExpr trees; the lowering turns a bound query into a DAG of
 * PlanNodes: the operators the runtime instantiates. A plan records, per
 * node, its output schema, stream key, changelog mode (append-only or
 * retracting), watermark column and the bound on its state, so EXPLAIN can
 * show them and the runtime need not re-derive them.
 *
 * Everything returned here lives in the arena passed in (a view's plan
 * arena lives as long as the view). Plans are never mutated after
 * plan_*() returns; execution state is the runtime's.
 */
#ifndef WEIR_PLANNER_H
#define WEIR_PLANNER_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "buf.h"
#include "error.h"
#include "parser.h"
#include "scalar.h"
#include "types.h"

/* ---- the catalog as the binder sees it ----------------------------------- */

typedef enum CatKind { CAT_SOURCE = 1, CAT_TABLE = 2, CAT_VIEW = 3, CAT_SINK = 4, CAT_SYSTEM = 5 } CatKind;

/* INCLUDE key | partition | offset | timestamp: a source column filled from
 * the Kafka record instead of its JSON value. */
typedef enum CatMeta { CAT_META_NONE, CAT_META_KEY, CAT_META_PARTITION, CAT_META_OFFSET, CAT_META_TIMESTAMP } CatMeta;

typedef struct CatOption {
    const char *key;
    const char *value;
} CatOption;

/* A relation known to the catalog. The server owns these; the planner only
 * reads them during one planning call. */
typedef struct CatRelation {
    uint64_t id;
    CatKind kind;
    const char *name;
    bool materialized;          /* CAT_VIEW: a materialized view (has a state table) */
    int n_cols;
    const char **col_names;
    const TypeId *col_types;
    const bool *col_hidden;     /* NULL = all visible (hidden: _row_id and key columns of views) */
    const bool *col_not_null;   /* NULL = all nullable (sources: NOT NULL columns) */
    const int32_t *col_typmod;  /* NUMERIC(p,s) columns: p << 8 | s, -1 for the rest; NULL when no
                                 * column has one (applied by num_apply_typmod on every write) */
    const uint8_t *col_meta;    /* Kafka sources: per column, the record metadata an INCLUDE column
                                 * carries (CatMeta), CAT_META_NONE for the rest; NULL when none */
    const struct PlanExpr *const *col_gen; /* sources: per column, its expression for a computed column
                                 * (`name AS expr`, over the other columns), NULL for a column read
                                 * from the records; NULL when there are none */
    int wm_col;                 /* watermark column index, -1 none */
    const struct PlanExpr *wm_expr; /* the WATERMARK expression bound against the columns, or NULL */
    int64_t wm_delay_us;        /* for display and for simple `ts - INTERVAL` forms; -1 if general */
    bool proctime_wm;           /* the watermark column is `AS PROCTIME()`: the watermark follows the
                                 * wall clock, also while no records arrive */
    const struct PlanExpr *topic_wm_expr; /* CAT_TABLE over a Kafka topic: the WATERMARK expression over
                                 * the topic's rows, for readers that replay the topic themselves */
    int n_pk;                   /* primary key / stream key */
    const int *pk;
    bool append_only;           /* rows are only ever inserted */
    int n_options;
    const CatOption *options;   /* WITH options of a source */
    const char *format;         /* FORMAT/ENCODE of a source ("plain", "json") */
    const char *encode;
    uint64_t table_id;          /* CAT_VIEW materialized: the state table holding its rows */
    bool counted;               /* CAT_VIEW: rows stored with a multiplicity (a trailing BIGINT) */
    bool distributed;           /* CAT_VIEW: PlanView.distributed (each node holds its key groups' rows) */
    int n_rows;                 /* CAT_SYSTEM: the rows, computed when the statement is planned */
    Value **rows;
} CatRelation;

/* Is column i of a source read from the record's value (not computed, not
 * record metadata)? */
static inline bool cat_col_in_value(const CatRelation *r, int i)
{
    return !(r->col_gen && r->col_gen[i]) && !(r->col_meta && r->col_meta[i]);
}

typedef struct PlanCatalog {
    void *ctx;
    /* Returns the relation named name (lower case), or NULL. */
    const CatRelation *(*lookup)(void *ctx, const char *name);
    /* Hands out a fresh id for a state table (persisted by the server). */
    uint64_t (*new_table_id)(void *ctx);
} PlanCatalog;

/* ---- expressions --------------------------------------------------------- */

typedef enum PlanExprKind { PE_CONST, PE_COL, PE_CALL } PlanExprKind;

typedef struct PlanExpr {
    PlanExprKind kind;
    TypeId type;                /* result type */
    int pos;                    /* source position for run-time errors, 0 = none */
    Value value;                /* PE_CONST (strings in the plan arena) */
    bool unknown;               /* PE_CONST from a bare string literal: its type is decided by context */
    const char *decimal_text;   /* PE_CONST from a decimal literal (1.5, a double): its text, so that
                                   next to a numeric it becomes an exact numeric, as Postgres types it */
    int col;                    /* PE_COL: input column index */
    int param_no;               /* PE_CONST bound from the placeholder $n (n >= 1); 0 otherwise */
    ScalarFn fn;                /* PE_CALL */
    int n_args;
    struct PlanExpr **args;
} PlanExpr;

/* ---- aggregates ---------------------------------------------------------- */

typedef enum PlanAggKind {
    AGG_COUNT_STAR, AGG_COUNT, AGG_SUM, AGG_MIN, AGG_MAX, AGG_AVG,
    AGG_COUNT_DISTINCT,   /* count(DISTINCT x): a multiset of the group's values */
    AGG_BOOL_AND, AGG_BOOL_OR,
    AGG_STRING_AGG,       /* string_agg(x, sep) in arrival order (append-only input) */
    AGG_FIRST, AGG_LAST,  /* first_value / last_value in arrival order (append-only input) */
} PlanAggKind;

typedef struct PlanAgg {
    PlanAggKind kind;
    int arg;                    /* input column, -1 for count(*) */
    TypeId arg_type;
    TypeId type;                /* result type */
    bool distinct;              /* written DISTINCT (only count supports it: AGG_COUNT_DISTINCT) */
    const char *sep;            /* AGG_STRING_AGG: the separator (a constant) */
    int filter_col;             /* boolean input column from FILTER (WHERE), -1 none */
    bool compensated;           /* a double sum or avg over an input with retractions keeps its rounding
                                 * error in a third value (revision 5) */
} PlanAgg;

/* g's state values in an aggregation group: sum and avg keep a sum and a
 * count (numeric also how many values of each scale, a compensated double
 * sum its rounding error), bool_and, bool_or and
 * first_value two, the rest one. The runtime lays out its state by it
 * (op_agg.c) and the planner bounds it (WEIR_MAX_AGG_VALUES). */
int plan_agg_slots(const PlanAgg *g);

/* ---- the stream plan ----------------------------------------------------- */

typedef enum PlanNodeKind {
    PN_SOURCE,        /* reads a connector (Kafka, ...) */
    PN_WATERMARK,     /* per-partition watermark generation, annotates rows */
    PN_PROJECT,
    PN_FILTER,
    PN_WINDOW,        /* TUMBLE/HOP: adds window_start, window_end */
    PN_AGG,           /* grouped aggregation, optionally window-bounded */
    PN_MATERIALIZE,   /* the view's rows, keyed by pk, in a state table */
    PN_JOIN,          /* hash join on equality keys (regular), or an interval join */
    PN_TOPN,          /* ROW_NUMBER() OVER (PARTITION BY .. ORDER BY ..) <= N: the first N rows per partition */
    PN_VIEW_SCAN,     /* batch: reads a materialized view's rows once */
    PN_VIEW_SOURCE,   /* streaming: a materialized view's changelog (its rows first, then changes) */
    PN_VALUES,        /* batch: literal rows */
    PN_TABLE_WRITE,   /* streaming: the rows INSERT/UPDATE/DELETE write into a table (the server pushes them) */
    PN_TEMPORAL_JOIN, /* probe JOIN versioned FOR SYSTEM_TIME AS OF probe.ts | PROCTIME() */
    PN_UNION,         /* UNION ALL of two inputs with the same columns: their changelogs merged */
    PN_SETOP,         /* INTERSECT [ALL] / EXCEPT [ALL]: a count per distinct row on each side */
    PN_SEMI_JOIN,     /* left rows against a subquery's rows: [NOT] IN, [NOT] EXISTS, scalar subqueries */
    PN_RECURSIVE,     /* batch: WITH RECURSIVE, iterated to a fixpoint (a leaf running two sub-queries) */
    PN_WORK_TABLE,    /* batch: inside a recursive term, the rows the previous iteration added */
    PN_EXCHANGE,      /* parallel views (plan_dist.c): routes rows to the instance that owns their key */
    PN_VIEW_CHANGES,  /* a split materialize's changes, gathered: where sinks, subscribers and views over it read */
} PlanNodeKind;

/* What a PN_SEMI_JOIN does with the subquery's verdict on each left row. The
 * verdict is SQL's: EXISTS is true when the subquery (for the row's
 * correlation keys) has a row; x IN is true when a row equals x, NULL when
 * none does but x or some row is NULL (and the subquery is not empty), else
 * false. */
typedef enum PlanSemiKind {
    SEMI_SEMI,        /* the left rows whose verdict is true (EXISTS, IN) */
    SEMI_ANTI,        /* the left rows whose verdict is false (NOT EXISTS, NOT IN) */
    SEMI_MARK,        /* every left row plus the verdict as a BOOLEAN column */
    SEMI_SCALAR,      /* every left row plus the subquery's one value (its default when it has no row) */
} PlanSemiKind;

typedef struct PlanSchema {
    int n;
    const char **names;
    TypeId *types;
    bool *hidden;               /* columns the user does not see (e.g. _row_id) */
} PlanSchema;

/* How the instances of a node in a parallel view (plan_dist.c) split the
 * rows. ANY: each instance takes whatever reaches it (stateless operators,
 * sources); HASH: row r is at instance hash(dist_keys of r) % P; SINGLE: one
 * instance (instance 0) sees every row; BROADCAST (an exchange's only): every
 * instance sees every row (the small side of a join, plan_dist.c). */
typedef enum PlanDist { PLAN_DIST_SINGLE, PLAN_DIST_ANY, PLAN_DIST_HASH, PLAN_DIST_BROADCAST } PlanDist;

/* streaming_parallelism: at most this many instances per node. */
#define PLAN_MAX_PARALLELISM 64

typedef enum PlanEmit { PLAN_EMIT_CHANGES, PLAN_EMIT_ON_CLOSE } PlanEmit;

/* Two-phase aggregation in a parallel view (plan_dist.c): a LOCAL aggregation
 * pre-aggregates each instance's rows (its output is a changelog of partial
 * rows), a GLOBAL one behind a hash exchange combines the partials (count ->
 * sum of counts, sum -> sum, min -> min, max -> max). ONE: not split. */
typedef enum PlanAggPhase { PLAN_AGG_ONE, PLAN_AGG_LOCAL, PLAN_AGG_GLOBAL } PlanAggPhase;

/* A view's backfill_from: where its Kafka sources start reading when the
 * view has no checkpointed offsets. DEFAULT: the source's scan.startup.mode. */
typedef enum PlanStart { PLAN_START_DEFAULT, PLAN_START_EARLIEST, PLAN_START_LATEST, PLAN_START_TIMESTAMP } PlanStart;

typedef struct PlanNode {
    PlanNodeKind kind;
    int id;                     /* unique within the plan, stable (used for state names) */
    int n_inputs;
    struct PlanNode *inputs[2];
    PlanSchema out;
    bool append_only;           /* changelog mode of the output edge */
    int wm_col;                 /* output column that carries the event-time watermark, -1 none */
    int n_keys;                 /* output stream key (unique per row), may be 0 */
    int *keys;
    bool dup_keys;              /* the key is the whole row and rows may repeat (counted downstream) */
    uint64_t table_id;          /* stateful nodes: their state table, 0 none */

    /* PN_SOURCE */
    const CatRelation *source;
    PlanStart start;            /* where a Kafka source starts without checkpointed offsets (backfill_from) */
    int64_t start_ts_us;        /* PLAN_START_TIMESTAMP: the first record with a timestamp at or after this */
    /* PN_WATERMARK: wm = value of wm_expr per row, over the input columns */
    PlanExpr *wm_expr;
    int64_t wm_delay_us;        /* -1 when the expression is not `col - interval` */
    /* PN_PROJECT */
    int n_exprs;
    PlanExpr **exprs;
    /* PN_FILTER */
    PlanExpr *pred;
    /* PN_WINDOW */
    bool late_check;            /* drop rows late for their window (feeds a window-bounded aggregation) */
    uint64_t late_table_id;     /* LATE ROWS INTO: where late rows go, 0 none */
    AstWindowKind win_kind;
    int win_time_col;           /* input column */
    int64_t win_size_us, win_slide_us, win_offset_us; /* (also a PN_AGG's, with panes) */
    int64_t pane_us;            /* HOP in panes (plan_panes.c): each row once, in its pane of this size; 0 = off */
    /* PN_AGG */
    int n_group;
    int *group_cols;            /* input columns */
    int n_group_bounds;         /* how many group columns are window bounds (window_start/window_end) */
    int n_aggs;
    PlanAgg *aggs;
    int win_group_idx;          /* index into group_cols of the window bound column, -1 unbounded */
    bool session;               /* session windows: the other group columns partition, sessions merge */
    int session_start_idx, session_end_idx; /* group_cols indexes of window_start/window_end, -1 absent */
    int64_t session_gap_us;
    int64_t win_end_offset_us;  /* window end = that column's value + this (0 for window_end) */
    int64_t lateness_us;        /* ALLOW LATENESS */
    /* WITH (state_ttl = ...) on a regular join or an unwindowed aggregation: a key's
     * state not read or written for this long (processing time) is dropped; 0 = never */
    int64_t state_ttl_us;
    PlanEmit emit;
    PlanAggPhase agg_phase;     /* ONE unless plan_dist.c split it in two phases */
    /* pane_us > 0: the input holds panes (window_start/end = pane bounds); windows of
     * win_size_us every win_slide_us (offset win_offset_us) are merged from them */
    int pane_start_idx, pane_end_idx; /* group indexes of window_start/window_end, -1 absent */
    /* PN_JOIN: output = left columns then right columns */
    AstJoinType join_type;
    int n_join_keys;
    int *left_keys, *right_keys;  /* equal columns, in each input */
    PlanExpr *residual;         /* the rest of ON, over the output columns, or NULL */
    bool interval;              /* an interval join: right.time - left.time in [lo, hi] */
    bool window_join;           /* ... whose times are equal window ends (lo = hi = 0): a window join */
    int left_time_col, right_time_col;
    int64_t lo_us, hi_us;
    uint64_t table_id2;         /* the right side's state */
    /* Per side (left, right): the input columns the join stores and emits, or NULL for all.
     * Set by plan_prune.c on an append-only side when some of its columns are read neither
     * by the join nor above it (Nexmark's ~500-byte `extra`); the others are stored and
     * emitted as NULL, which nothing reads. */
    const bool *join_stored[2];
    /* PN_TEMPORAL_JOIN: the join fields above, with right_keys = the versioned side's primary
     * key (in key order) and left_keys the probe columns equal to it; left_time_col is the
     * probe's event time (AS OF) and right_time_col the version time, unless proc_time
     * (AS OF PROCTIME(): a lookup in the current rows). table_id holds probe rows waiting
     * for the watermark, table_id2 the versions (current rows with proc_time). */
    bool proc_time;
    /* PN_TOPN: output = input columns then the row number (BIGINT) */
    int n_part;
    int *part_cols;
    int n_order_cols;
    int *order_cols;
    bool *order_desc;
    bool *order_nulls_first;
    int64_t topn_limit;
    /* PN_MATERIALIZE: keys are the pk; a hidden _row_id is added for keyless append-only input */
    const char *view_name;
    bool row_id_key;
    bool counted;               /* keys are whole rows that may repeat: a count per key */
    bool upsert;                /* a table's rows: an add replaces the row of its key, a delete names only the
                                   key; the output is the true changelog (-U/+U with the old row, -D of the
                                   stored row), and changes that change nothing are dropped */
    /* PN_VIEW_SCAN, PN_VIEW_SOURCE */
    const CatRelation *scan_rel;
    /* PN_VIEW_SCAN (plan_lookup.c): read only the rows whose first n_scan_eq key columns
     * equal scan_eq[] and whose next key column lies in [scan_lo, scan_hi] (NULL: open);
     * a key lookup or range scan instead of the whole view. The filter above still
     * checks every row, so the bounds may be wider than the predicate. */
    int n_scan_eq;
    Value *scan_eq;
    Value *scan_lo, *scan_hi;
    /* PN_SETOP: SETOP_INTERSECT, SETOP_EXCEPT or their _ALL forms */
    AstSetOp set_op;
    bool setop_eq_keys;      /* PN_SETOP: rows are equal as values are (key_encode: 3 = 3.00, -0 = 0),
                              * not as bytes (revision 5; an older view keeps its state's hashes) */
    /* PN_SEMI_JOIN: output = the left columns (+ one column for MARK and SCALAR). The
     * correlation keys are the join keys above (left_keys[i] equals right_keys[i]);
     * table_id holds the left rows, table_id2 the subquery's counts (and rows, SCALAR). */
    PlanSemiKind semi_kind;
    int in_left_col, in_right_col; /* x IN (SELECT y): x's and y's columns; -1 for EXISTS and scalars */
    int scalar_col;             /* SEMI_SCALAR: the right column whose value is added */
    Value scalar_default;       /* SEMI_SCALAR: the value when the subquery has no row (an aggregate over none) */
    /* PN_RECURSIVE: rec_anchor's rows, then rec_step's run again and again over the rows the
     * last run added (its PN_WORK_TABLE leaves with this work_id read them) until it adds none;
     * UNION (not rec_union_all) adds only rows not seen before. rec_name: the CTE's name. */
    const struct PlanQuery *rec_anchor, *rec_step;
    bool rec_union_all;
    const char *rec_name;
    int work_id;                /* PN_RECURSIVE and its PN_WORK_TABLE leaves */
    /* PN_VALUES */
    int n_rows;
    Value **rows;               /* n_rows arrays of out.n values */
    /* Parallel views (PlanView.parallelism > 1; plan_dist.c). parallelism: the
     * node's instances (P, or 1 for SINGLE), 0 in a view planned for one
     * thread. shard_tables[2 * s], [2 * s + 1]: instance s's table_id and
     * table_id2 (instance 0 uses table_id and table_id2 themselves), NULL
     * for nodes without state or with one instance. */
    PlanDist dist;
    int n_dist_keys;
    int *dist_keys;             /* PLAN_DIST_HASH: output columns hashed (value_hash), in this order */
    int parallelism;
    uint64_t *shard_tables;
    /* PN_EXCHANGE: its output is its input's rows, at the instances dist says;
     * why it is there, for EXPLAIN */
    const char *ex_reason;
    /* PN_EXCHANGE: a gather that sends rows only while its reader (a
     * PN_VIEW_CHANGES) has consumers; watermarks always. */
    bool ex_lazy;
    /* Key groups (PlanView.key_groups > 0; plan_dist.c, common/keygroup.h):
     * G on a node whose state keys begin with the row's 2-byte key group
     * (and on a HASH exchange, which routes key group kg to shard kg % P),
     * 0 elsewhere. kg_cols[k] (n_kg_cols[k] columns of input k): the
     * columns whose weir_key_hash_value gives a row's group, the ones the
     * exchange before the node hashed when there is one. */
    int key_groups;
    int n_kg_cols[2];
    int *kg_cols[2];
    /* PN_EXCHANGE of a distributed view (PlanView.distributed; plan_place.c):
     * the one exchange whose two sides may run on different nodes, written
     * through the view's repartition topic (partition = key group). */
    bool repartition;
} PlanNode;

/* WITH RECURSIVE stops with 54001 past these (the iterations of one CTE, its rows). */
#define PLAN_RECURSIVE_MAX_ITER 10000
#define PLAN_RECURSIVE_MAX_ROWS 1000000

/* A planned streaming view (CREATE MATERIALIZED VIEW). */
typedef struct PlanView {
    PlanNode *root;             /* PN_MATERIALIZE */
    /* A split materialize (parallelism > 1; plan_dist.c): the single
     * PN_VIEW_CHANGES node after its gather, the last node, where the view's
     * changes are read (sinks, SUBSCRIBE, views over this one). NULL when
     * the materialize is single: then root is that place. */
    PlanNode *changes;
    int n_nodes;
    PlanNode **nodes;           /* topological order: inputs before users */
    PlanSchema schema;          /* the view's visible columns */
    int n_pk;
    int *pk;                    /* the view's key (columns of schema; may include hidden ones) */
    bool append_only;
    bool counted;               /* rows may repeat: each stored with its multiplicity */
    PlanEmit emit;
    const char *late_name;      /* LATE ROWS INTO relation, or NULL */
    PlanSchema late_schema;     /* its columns: the window's row, window_start, window_end, watermark */
    uint64_t late_table_id;
    const char *backfill_from;  /* WITH (backfill_from = ...) as written, or NULL */
    /* The time zone the view was planned in (tz_current(), NULL = UTC): its
     * expressions run in it, whoever reads the view (tz.h). */
    const struct WTz *tz;
    /* Instances of the parallel nodes (streaming_parallelism); 1 when the
     * view runs on one thread, exactly as before parallelism existed. */
    int parallelism;
    /* Key groups of the view's keyed state (WITH (key_groups), default
     * WEIR_DEFAULT_KEY_GROUPS); 0 for a view planned before revision 6,
     * whose state keys have no key-group prefix. */
    int key_groups;
    /* Cluster placement (plan_place.c, revision 7): distributed = the source
     * fragment runs per source partition and the keyed stage per key group,
     * on the nodes the work group assigns them to, across the one exchange
     * marked repartition; else every node runs the whole view (replicated).
     * placement: the EXPLAIN line ("distributed over key groups" or "every
     * node (replicated): <why>"); NULL outside a cluster. */
    bool distributed;
    const char *placement;
} PlanView;

/* An ad hoc query (SELECT) run once over materialized views. */
typedef struct PlanOrder {
    int col;                    /* column of the pre-sort output */
    bool desc;
    bool nulls_first;
} PlanOrder;

typedef struct PlanQuery {
    PlanNode *root;             /* produces the rows (a changelog, applied by the runner) */
    int n_nodes;
    PlanNode **nodes;
    PlanSchema schema;          /* visible output columns (a prefix of root's output) */
    int n_order;
    PlanOrder *order;
    int64_t limit;              /* -1 none */
    int64_t offset;
} PlanQuery;

/* Revisions of the planner's rules that change the plan of a view that was
 * already accepted (and so the layout of its state). A view is planned again
 * from its text at every start: it must get the plan it was created with, so
 * the catalog keeps the revision it was created under and passes it back.
 *   0  before revisions were recorded
 *   1  WHERE conjuncts over both sides of an inner JOIN ... ON are also part of
 *      its ON (as they were already for FROM a, b): a time bound in WHERE
 *      makes an interval join, an equality a hash key
 *   2  equal sub-plans run once (plan_share.c; planner/README.md "Shared
 *      sub-plans": an older view's two copies may have checkpointed different
 *      source offsets, so it keeps them)
 *   3  a window table function keeps its input's stream key (plus the window
 *      bound for HOP and CUMULATE): a window without aggregation over a table
 *      was keyed by nothing and kept one row (issue 17); an older view keeps
 *      the layout its state has, and is fixed by creating it again
 *   4  sum(bigint) and avg over integers are numeric, as in Postgres (their
 *      state holds a numeric sum and its scale counts, not a bigint or a
 *      double); a VALUES column of mixed number types takes their common
 *      type (bigint, numeric), not double precision; a HOP aggregation with
 *      a numeric sum or avg works in panes (plan_panes.c); EXTRACT is
 *      numeric (Postgres 14+)
 *   5  a double sum or avg over an input with retractions is compensated
 *      (Neumaier; over an append-only one it adds as Postgres): its state keeps the
 *      rounding error, so retracting a large addend (an outer join's
 *      NULL-padded row replaced by its match) gives the small ones back
 *      instead of 0 (1e300 + 3 - 1e300); an older view keeps two values;
 *      INTERSECT and EXCEPT compare rows as GROUP BY does (key_encode), not
 *      by their bytes
 *   6  keyed state is split into key groups (WITH (key_groups = N), default
 *      128; plan_dist.c "Key groups"): the state keys of aggregations and
 *      of the view's materialize begin with the row's 2-byte key group, and
 *      a parallel view's exchanges route key group kg to shard kg % P; an
 *      older view keeps its unprefixed keys and its hash % P routing
 *   7  the default key-group count depends on where the view runs: 128 in a
 *      cluster (key groups are what moves between nodes), and on a single
 *      node the view's parallelism P (1 without): one key group per shard,
 *      so each shard's keys keep the order they grow in (LMDB appends at the
 *      end of each table; 128 groups scattered a checkpoint's writes over
 *      128 places and cost q4 and q7 a quarter of their speed, bench/README.md
 *      "Key groups"); WITH (key_groups = N) still sets any count. In a
 *      cluster (PlanViewOptions.cluster), a view of one Kafka source, one
 *      keyed stage and its keyed materialize is distributed over key groups
 *      (plan_place.c): a repartition exchange goes before the keyed stage; an
 *      older view stays replicated;
 *      and a decimal literal (1.5, 1e3) and an integer literal past bigint are
 *      numeric, as in Postgres (bind.c numeric_literal), so 7.0 / 2 is
 *      3.5000000000000000 and 0.908 * bigint is numeric; before, double
 *      precision, and an older view keeps those types */
#define PLAN_REV_CURRENT 7

typedef struct PlanViewOptions {
    const char *name;           /* the view's name */
    bool allow_unbounded;       /* session setting streaming_allow_unbounded_state */
    int parallelism;            /* session setting streaming_parallelism (0 = 1); WITH (streaming_parallelism) overrides */
    int plan_rev;               /* the rules to plan by: PLAN_REV_CURRENT for a new view, the recorded one at start */
    bool cluster;               /* planned for a cluster (--cluster): decide the placement (plan_place.c) */
} PlanViewOptions;

/* Parses a streaming_parallelism value (an integer 1..PLAN_MAX_PARALLELISM,
 * spaces around allowed). 0 and *out, or -1. */
int plan_parallelism_value(const char *s, int *out);

/* Plans CREATE MATERIALIZED VIEW. New state table ids come from cat. On error
 * returns NULL with err set (SQLSTATE and position in the statement text). */
PlanView *plan_view(const AstCreateView *cv, const PlanCatalog *cat, const PlanViewOptions *opt,
                    Arena *a, WError *err);
/* Plans CREATE TABLE: binds the columns, primary key and watermark into rel
 * (rel->id/name/options/format filled by the caller) and returns the table's
 * dataflow: its input (TABLE_WRITE for a writable table, SOURCE for a Kafka
 * topic in FORMAT UPSERT/DEBEZIUM/PLAIN), the watermark if any, and an
 * upsert MATERIALIZE keyed by the primary key. rel then reads like a
 * materialized view (table_id, pk, wm_col; wm_expr NULL since the table's
 * own dataflow generates the watermark; topic_wm_expr keeps it for a Kafka
 * table, whose topic event-time temporal joins replay). NULL with err on error. */
PlanView *plan_table(const AstCreateSource *cs, CatRelation *rel, const PlanCatalog *cat, int plan_rev, Arena *a,
                     WError *err);
/* Plans a SELECT for one-off execution over materialized views. */
PlanQuery *plan_query(const AstSelect *sel, const PlanCatalog *cat, Arena *a, WError *err);

/* The most parameters a statement may have (the protocol's Int16 count). */
#define PLAN_MAX_PARAMS 32767

/* The types of a statement's parameters $1..$n, inferred from their context
 * as PostgreSQL does before any value is known (Parse/Describe of a prepared
 * statement): a comparison or arithmetic with a typed operand takes its
 * type (`k = $1` is k's type, `$1 + 1` integer), a cast its target
 * (`$1::bigint`), LIMIT/OFFSET bigint, a function argument the signature's
 * type, an INSERT value or an UPDATE SET value its column's type. A
 * parameter nothing decides stays TYPE_NULL (the caller describes it as
 * text, as PostgreSQL does for `SELECT $1`). st's placeholders must have been
 * bound with parse_bind_param(NULL) (they keep their param_no). Handles
 * SELECT, EXPLAIN, DECLARE, INSERT, UPDATE and DELETE; other statements leave
 * types alone. Planning errors are not reported: a statement that does not
 * plan (yet) gets its types from whatever bound before the error, and
 * Execute reports the error. types has n entries, the caller sets them to
 * TYPE_NULL; a type already set is kept (the first context wins). */
void plan_param_types(const AstStmt *st, const PlanCatalog *cat, Arena *a, int n, TypeId *types);
/* Binds the column definitions and watermark of CREATE SOURCE into rel
 * (allocated in a; rel->id/name/options filled by the caller), by the rules
 * of planner revision plan_rev: the one the source was created at (kept in
 * the catalog), so that a restart under a newer weir gives its computed
 * columns the types they had (a `price * 1.1` stays double precision for a
 * source created before revision 7 made decimal literals numeric). */
int plan_source(const AstCreateSource *cs, CatRelation *rel, int plan_rev, Arena *a, WError *err);
/* Binds a constant expression (INSERT ... VALUES rows, WITH option values) to
 * the wanted type; errors carry positions. */
int plan_const_expr(const AstExpr *e, TypeId want, Arena *a, Value *out, WError *err);

/* EXPLAIN: appends the indented operator tree (text) or JSON to out. */
void plan_explain_view(const PlanView *v, bool json, Buf *out);
void plan_explain_query(const PlanQuery *q, bool json, Buf *out);
/* EXPLAIN ANALYZE: plan_explain_view with fn called once for every node
 * drawn in full (not where a shared node is shown again). In text fn writes
 * one line's figures (the indentation is written); in JSON one object, the
 * node's member "analyze". arg is fn's. */
typedef void (*PlanExplainAnnotate)(void *arg, const PlanNode *n, bool json, Buf *out);
void plan_explain_view_annotated(const PlanView *v, bool json, PlanExplainAnnotate fn, void *arg, Buf *out);

const char *plan_node_kind_name(PlanNodeKind k);
/* Looks up a WITH option (case-insensitive key); NULL if absent. */
const char *cat_option(const CatRelation *r, const char *key);

#endif
