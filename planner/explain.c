/*
 * explain.c: EXPLAIN output for stream plans and ad hoc queries.
 *
 * Text form: an indented tree, root first, one node per line with its
 * parameters in braces, then the properties users reason about: output
 * key, changelog mode (append-only or retract), the watermark column and,
 * for stateful operators, what the state is keyed by and what bounds it.
 * JSON form: the same facts as one object per node with "inputs".
 */
#include "planner_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fmt_us(int64_t us, Buf *out)
{
    Interval iv = {.usecs = us};
    format_interval(&iv, out);
}

void expr_to_text(const PlanExpr *e, const PlanSchema *in, Buf *out)
{
    switch (e->kind) {
    case PE_COL:
        buf_puts(out, in && e->col < in->n ? in->names[e->col] : "?");
        return;
    case PE_CONST:
        if (e->value.null) {
            buf_puts(out, "NULL");
            return;
        }
        if (type_phys(e->type) == PHYS_STR || e->type == TYPE_INTERVAL || type_is_temporal(e->type)) {
            buf_puts(out, e->type == TYPE_INTERVAL ? "INTERVAL '" : type_is_temporal(e->type) ? "'" : "'");
            value_to_text(&e->value, out);
            buf_putc(out, '\'');
        } else {
            value_to_text(&e->value, out);
        }
        return;
    case PE_CALL:
        if (e->fn == FN_NOW) {
            buf_puts(out, "now()");   /* its argument is the statement time, not the user's */
        } else if (e->fn == FN_CAST || e->fn == FN_TRY_CAST) {
            buf_puts(out, e->fn == FN_CAST ? "CAST(" : "TRY_CAST(");
            expr_to_text(e->args[0], in, out);
            buf_printf(out, " AS %s)", type_name(e->type));
        } else if (scalar_fn_is_infix(e->fn) && (e->n_args == 2 || ((e->fn == FN_LIKE || e->fn == FN_ILIKE) &&
                                                                    e->n_args == 3))) {
            buf_putc(out, '(');
            expr_to_text(e->args[0], in, out);
            buf_printf(out, " %s ", scalar_fn_name(e->fn));
            expr_to_text(e->args[1], in, out);
            if (e->n_args == 3) {
                buf_puts(out, " ESCAPE ");
                expr_to_text(e->args[2], in, out);
            }
            buf_putc(out, ')');
        } else if (e->fn >= FN_IS_NULL && e->fn <= FN_IS_NOT_FALSE) {
            buf_putc(out, '(');
            expr_to_text(e->args[0], in, out);
            buf_printf(out, " %s)", scalar_fn_name(e->fn));
        } else if (e->fn == FN_NOT || e->fn == FN_NEG_I || e->fn == FN_NEG_F || e->fn == FN_IV_NEG) {
            buf_puts(out, scalar_fn_name(e->fn));
            buf_puts(out, e->fn == FN_NOT ? " " : "");
            expr_to_text(e->args[0], in, out);
        } else {
            buf_printf(out, "%s(", scalar_fn_name(e->fn));
            for (int i = 0; i < e->n_args; i++) {
                if (i)
                    buf_puts(out, ", ");
                expr_to_text(e->args[i], in, out);
            }
            buf_putc(out, ')');
        }
        return;
    }
}

static const char *agg_name(PlanAggKind k)
{
    static const char *names[] = {"count", "count", "sum", "min", "max", "avg", "count distinct",
                                  "bool_and", "bool_or", "string_agg", "first_value", "last_value"};
    return names[k];
}

static void cols_list(const PlanSchema *s, int n, const int *cols, Buf *out)
{
    buf_putc(out, '[');
    for (int i = 0; i < n; i++)
        buf_printf(out, "%s%s", i ? ", " : "", s->names[cols[i]]);
    buf_putc(out, ']');
}

/* The node's own parameters, as "k: v, k: v". */
/* A parallel view's distribution of n: "hash(a, b)", "any" or "single". */
static void dist_text(const PlanNode *n, Buf *out)
{
    if (n->dist == PLAN_DIST_HASH) {
        buf_puts(out, "hash(");
        for (int i = 0; i < n->n_dist_keys; i++)
            buf_printf(out, "%s%s", i ? ", " : "", n->out.names[n->dist_keys[i]]);
        buf_putc(out, ')');
    } else {
        buf_puts(out, n->dist == PLAN_DIST_ANY ? "any" : n->dist == PLAN_DIST_BROADCAST ? "broadcast" : "single");
    }
}

/* A source: connector, topic or generator, format, start. */
static void params_source(const PlanNode *n, const PlanSchema *in, Buf *out)
{
    const char *conn = cat_option(n->source, "connector");
    buf_printf(out, "source: %s, connector: %s", n->source->name, conn ? conn : "?");
    const char *topic = cat_option(n->source, "topic");
    if (topic)
        buf_printf(out, ", topic: %s", topic);
    buf_puts(out, ", columns: [");
    for (int i = 0; i < n->out.n; i++)
        buf_printf(out, "%s%s", i ? ", " : "", n->out.names[i]);
    buf_putc(out, ']');
}

/* A window function: kind, time column, sizes, panes, lateness. */
static void params_window(const PlanNode *n, const PlanSchema *in, Buf *out)
{
    buf_printf(out, "%s(%s, ",
               n->win_kind == WIN_TUMBLE ? "TUMBLE" : n->win_kind == WIN_HOP ? "HOP"
               : n->win_kind == WIN_CUMULATE ? "CUMULATE" : "SESSION",
               in->names[n->win_time_col]);
    if (n->win_kind == WIN_HOP || n->win_kind == WIN_CUMULATE) {
        fmt_us(n->win_slide_us, out);
        buf_puts(out, ", ");
    }
    fmt_us(n->win_size_us, out);
    if (n->win_offset_us) {
        buf_puts(out, ", offset ");
        fmt_us(n->win_offset_us, out);
    }
    buf_puts(out, "), adds: [window_start, window_end]");
    if (n->pane_us) {
        buf_puts(out, " of each row's pane of ");
        fmt_us(n->pane_us, out);
    }
    if (n->late_check) {
        buf_puts(out, ", drops rows late by ");
        fmt_us(n->lateness_us, out);
        if (n->late_table_id)
            buf_puts(out, " into the late-rows relation");
    }
}

/* An aggregation: phase, group columns, aggregate calls, emit mode, panes. */
static void params_agg(const PlanNode *n, const PlanSchema *in, Buf *out)
{
    if (n->agg_phase != PLAN_AGG_ONE)
        buf_printf(out, "phase: %s, ", n->agg_phase == PLAN_AGG_LOCAL ? "local" : "global");
    buf_puts(out, "group: ");
    cols_list(in, n->n_group, n->group_cols, out);
    buf_puts(out, ", aggs: [");
    for (int i = 0; i < n->n_aggs; i++) {
        const PlanAgg *g = &n->aggs[i];
        buf_printf(out, "%s%s(%s)", i ? ", " : "", agg_name(g->kind), g->arg < 0 ? "*" : in->names[g->arg]);
        if (g->filter_col >= 0)
            buf_printf(out, " FILTER (WHERE %s)", in->names[g->filter_col]);
    }
    buf_putc(out, ']');
    if (n->win_group_idx >= 0)
        buf_printf(out, ", emit: %s", n->emit == PLAN_EMIT_ON_CLOSE ? "on window close" : "changes");
    if (n->pane_us) {
        buf_puts(out, ", windows merged from panes of ");
        fmt_us(n->pane_us, out);
    }
}

/* A regular join: kind, keys, interval bounds, residual, stored columns. */
static void params_join(const PlanNode *n, const PlanSchema *in, Buf *out)
{
    static const char *kinds[] = {"inner", "left", "right", "full", "cross"};
    buf_printf(out, "type: %s%s, on: [", n->window_join ? "window " : n->interval ? "interval " : "",
               kinds[n->join_type]);
    for (int i = 0; i < n->n_join_keys; i++)
        buf_printf(out, "%s%s = %s", i ? ", " : "", n->inputs[0]->out.names[n->left_keys[i]],
                   n->inputs[1]->out.names[n->right_keys[i]]);
    buf_putc(out, ']');
    if (n->interval && !n->window_join) {
        buf_printf(out, ", right.%s - left.%s in [", n->inputs[1]->out.names[n->right_time_col],
                   n->inputs[0]->out.names[n->left_time_col]);
        Interval lo = {.usecs = n->lo_us}, hi = {.usecs = n->hi_us};
        format_interval(&lo, out);
        buf_puts(out, ", ");
        format_interval(&hi, out);
        buf_putc(out, ']');
    }
    if (n->residual) {
        buf_puts(out, ", condition: ");
        expr_to_text(n->residual, &n->out, out);
    }
}

/* A temporal join: kind, probe keys and time, residual. */
static void params_temporal_join(const PlanNode *n, const PlanSchema *in, Buf *out)
{
    const PlanSchema *r = &n->inputs[1]->out;
    buf_printf(out, "type: %s, as of: ", n->join_type == JOIN_LEFT ? "left" : "inner");
    if (n->proc_time)
        buf_puts(out, "PROCTIME()");
    else
        buf_printf(out, "%s (version time %s)", in->names[n->left_time_col], r->names[n->right_time_col]);
    buf_puts(out, ", on: [");
    for (int i = 0; i < n->n_join_keys; i++)
        buf_printf(out, "%s%s = %s", i ? ", " : "", in->names[n->left_keys[i]], r->names[n->right_keys[i]]);
    buf_putc(out, ']');
    if (n->residual) {
        buf_puts(out, ", condition: ");
        expr_to_text(n->residual, &n->out, out);
    }
}

/* A semi (anti) join: kind, keys, the subquery column it adds. */
static void params_semi_join(const PlanNode *n, const PlanSchema *in, Buf *out)
{
    static const char *kinds[] = {"semi", "anti", "mark", "scalar"};
    const PlanSchema *r = &n->inputs[1]->out;
    buf_printf(out, "type: %s, on: [", kinds[n->semi_kind]);
    for (int i = 0; i < n->n_join_keys; i++)
        buf_printf(out, "%s%s = %s", i ? ", " : "", in->names[n->left_keys[i]], r->names[n->right_keys[i]]);
    buf_putc(out, ']');
    if (n->in_left_col >= 0)
        buf_printf(out, ", in: %s IN %s", in->names[n->in_left_col], r->names[n->in_right_col]);
    if (n->semi_kind == SEMI_SCALAR) {
        buf_printf(out, ", value: %s, when no row: ", r->names[n->scalar_col]);
        if (n->scalar_default.null)
            buf_puts(out, "NULL");
        else
            value_to_text(&n->scalar_default, out);
    }
    if (n->semi_kind == SEMI_MARK || n->semi_kind == SEMI_SCALAR)
        buf_printf(out, ", adds: %s", n->out.names[n->out.n - 1]);
}

static void node_params(const PlanNode *n, Buf *out)
{
    if (n->kind == PN_EXCHANGE) {
        buf_puts(out, "to: ");
        dist_text(n, out);
        if (n->repartition) /* across nodes, through the view's repartition topic (plan_place.c) */
            buf_printf(out, ", key groups: %d, through: repartition topic", n->key_groups);
        else
            buf_printf(out, ", parallelism: %d", n->parallelism);
        buf_printf(out, ", why: %s", n->ex_reason ? n->ex_reason : "");
        return;
    }
    const PlanSchema *in = n->n_inputs ? &n->inputs[0]->out : NULL;
    switch (n->kind) {
    case PN_SOURCE:
        params_source(n, in, out);
        break;
    case PN_WATERMARK:
        buf_printf(out, "column: %s, expr: ", n->out.names[n->wm_col]);
        expr_to_text(n->wm_expr, &n->out, out);
        {
            const PlanNode *in = n->inputs[0];
            if (in->kind == PN_PROJECT && in->inputs[0]->kind == PN_SOURCE)
                in = in->inputs[0];
            bool proc = in->kind == PN_SOURCE && in->source->proctime_wm;
            buf_puts(out, proc ? ", processing time: follows the clock" : ", per partition: max, across partitions: min");
        }
        break;
    case PN_PROJECT:
        buf_puts(out, "exprs: [");
        for (int i = 0; i < n->n_exprs; i++) {
            if (i)
                buf_puts(out, ", ");
            expr_to_text(n->exprs[i], in, out);
            if (!(n->exprs[i]->kind == PE_COL && strcmp(in->names[n->exprs[i]->col], n->out.names[i]) == 0))
                buf_printf(out, " AS %s", n->out.names[i]);
        }
        buf_putc(out, ']');
        break;
    case PN_FILTER:
        buf_puts(out, "predicate: ");
        expr_to_text(n->pred, in, out);
        break;
    case PN_WINDOW:
        params_window(n, in, out);
        break;
    case PN_AGG:
        params_agg(n, in, out);
        break;
    case PN_MATERIALIZE:
        buf_printf(out, "view: %s, pk: ", n->view_name);
        cols_list(&n->out, n->n_keys, n->keys, out);
        break;
    case PN_JOIN:
        params_join(n, in, out);
        break;
    case PN_TOPN:
        buf_puts(out, "partition: ");
        cols_list(in, n->n_part, n->part_cols, out);
        buf_puts(out, ", order: [");
        for (int i = 0; i < n->n_order_cols; i++)
            buf_printf(out, "%s%s%s", i ? ", " : "", in->names[n->order_cols[i]], n->order_desc[i] ? " DESC" : "");
        buf_printf(out, "], limit: %lld", (long long)n->topn_limit);
        break;
    case PN_VIEW_SCAN:
    case PN_VIEW_SOURCE:
        buf_printf(out, "view: %s", n->scan_rel->name);
        if (n->n_scan_eq || n->scan_lo || n->scan_hi) {
            /* The key columns a lookup or range scan is bounded on. */
            buf_puts(out, n->scan_lo || n->scan_hi ? ", range on key: [" : ", lookup on key: [");
            int m = n->n_scan_eq + (n->scan_lo || n->scan_hi ? 1 : 0);
            for (int i = 0; i < m && i < n->n_keys; i++)
                buf_printf(out, "%s%s", i ? ", " : "", n->out.names[n->keys[i]]);
            buf_putc(out, ']');
        }
        break;
    case PN_VALUES:
        buf_printf(out, "rows: %d", n->n_rows);
        break;
    case PN_TABLE_WRITE:
        buf_printf(out, "table: %s", n->source->name);
        break;
    case PN_TEMPORAL_JOIN:
        params_temporal_join(n, in, out);
        break;
    case PN_SETOP:
        buf_printf(out, "op: %s%s, columns: [",
                   n->set_op == SETOP_INTERSECT || n->set_op == SETOP_INTERSECT_ALL ? "intersect" : "except",
                   n->set_op == SETOP_INTERSECT_ALL || n->set_op == SETOP_EXCEPT_ALL ? " all" : "");
        for (int i = 0; i < n->out.n; i++)
            buf_printf(out, "%s%s", i ? ", " : "", n->out.names[i]);
        buf_putc(out, ']');
        break;
    case PN_RECURSIVE:
        buf_printf(out, "cte: %s, %s, until an iteration adds no row (at most %d iterations, %d rows)", n->rec_name,
                   n->rec_union_all ? "union all" : "union", PLAN_RECURSIVE_MAX_ITER, PLAN_RECURSIVE_MAX_ROWS);
        break;
    case PN_WORK_TABLE:
        buf_printf(out, "cte: %s, the rows the last iteration added", n->rec_name);
        break;
    case PN_SEMI_JOIN:
        params_semi_join(n, in, out);
        break;
    case PN_UNION:
        buf_puts(out, "all: true, columns: [");
        for (int i = 0; i < n->out.n; i++)
            buf_printf(out, "%s%s", i ? ", " : "", n->out.names[i]);
        buf_putc(out, ']');
        if (n->wm_col >= 0)
            buf_puts(out, ", watermark: min of inputs");
        break;
    case PN_EXCHANGE:
        break;
    case PN_VIEW_CHANGES:
        buf_printf(out, "view: %s, gathered from %d instances while a sink, subscriber or view reads them",
                   n->view_name, n->inputs[0]->inputs[0]->parallelism);
        break;
    }
}

/* What the operator keeps and what bounds it (stateful operators only). */
static void node_state(const PlanNode *n, Buf *out)
{
    const PlanSchema *in = n->n_inputs ? &n->inputs[0]->out : NULL;
    switch (n->kind) {
    case PN_SOURCE:
        buf_puts(out, "offset per partition");
        break;
    case PN_VIEW_SOURCE:
        buf_puts(out, "whether the upstream view's rows were read");
        break;
    case PN_VALUES:
        if (n->table_id) /* in a view; a query's VALUES has no state */
            buf_puts(out, "whether the rows were emitted");
        break;
    case PN_TOPN:
        buf_puts(out, "rows per partition ");
        cols_list(in, n->n_part, n->part_cols, out);
        buf_puts(out, n->inputs[0]->append_only ? "; the first N only (append-only input)" : "; all of them (retracting input)");
        if (n->win_group_idx >= 0)
            buf_printf(out, "; bounded by watermark on %s", in->names[n->part_cols[n->win_group_idx]]);
        else if (n->state_ttl_us) {
            buf_puts(out, "; bounded by state_ttl ");
            fmt_us(n->state_ttl_us, out);
            buf_puts(out, " (a partition idle that long, in processing time, is dropped)");
        } else
            buf_puts(out, "; no time bound");
        break;
    case PN_WATERMARK:
        buf_puts(out, "max event time per partition");
        break;
    case PN_AGG:
        buf_puts(out, "keyed by ");
        cols_list(in, n->n_group, n->group_cols, out);
        if (n->session) {
            buf_puts(out, "; sessions merged per key (gap ");
            fmt_us(n->session_gap_us, out);
            buf_puts(out, "), bounded by watermark on the session end, lateness ");
            fmt_us(n->lateness_us, out);
        } else if (n->pane_us) {
            buf_puts(out, "; one entry per pane and group, bounded by watermark on the last window of each pane, lateness ");
            fmt_us(n->lateness_us, out);
        } else if (n->win_group_idx >= 0) {
            buf_printf(out, "; bounded by watermark on %s", in->names[n->group_cols[n->win_group_idx]]);
            if (n->win_end_offset_us) {
                buf_puts(out, " + ");
                fmt_us(n->win_end_offset_us, out);
            }
            buf_puts(out, ", lateness ");
            fmt_us(n->lateness_us, out);
        } else if (n->state_ttl_us) {
            buf_puts(out, "; bounded by state_ttl ");
            fmt_us(n->state_ttl_us, out);
            buf_puts(out, " (a group idle that long, in processing time, is dropped)");
        } else {
            buf_puts(out, "; no time bound (one entry per group)");
        }
        break;
    case PN_SETOP:
        buf_puts(out, "each distinct row with its count on each side; no time bound");
        break;
    case PN_SEMI_JOIN:
        buf_puts(out, "left rows keyed by ");
        cols_list(in, n->n_join_keys, n->left_keys, out);
        buf_printf(out, ", the subquery's row counts%s per key; no time bound",
                   n->semi_kind == SEMI_SCALAR ? " and rows" : n->in_left_col >= 0 ? " and values" : "");
        break;
    case PN_MATERIALIZE:
        buf_puts(out, n->counted ? "the view's rows with their multiplicity" : "the view's rows, keyed by pk");
        break;
    case PN_JOIN: {
        const PlanSchema *r = &n->inputs[1]->out;
        buf_puts(out, "both sides' rows keyed by [");
        for (int i = 0; i < n->n_join_keys; i++)
            buf_printf(out, "%s%s", i ? ", " : "", in->names[n->left_keys[i]]);
        buf_puts(out, "]");
        (void)r;
        if (n->window_join)
            buf_puts(out, "; each window's rows until the watermark passes its end");
        else if (n->interval)
            buf_printf(out, "; bounded by watermarks on %s and %s", in->names[n->left_time_col],
                       n->inputs[1]->out.names[n->right_time_col]);
        else if (n->state_ttl_us) {
            buf_puts(out, "; bounded by state_ttl ");
            fmt_us(n->state_ttl_us, out);
            buf_puts(out, " (a key's rows idle that long, in processing time, are dropped)");
        } else
            buf_puts(out, "; UNBOUNDED (no time bound)");
        for (int s = 0; s < 2; s++) {
            if (!n->join_stored[s])
                continue;
            /* plan_prune.c: the columns nobody reads are not stored. */
            const PlanSchema *sc = &n->inputs[s]->out;
            buf_printf(out, "; %s rows store only [", s ? "right" : "left");
            bool first = true;
            for (int c = 0; c < sc->n; c++)
                if (n->join_stored[s][c]) {
                    buf_printf(out, "%s%s", first ? "" : ", ", sc->names[c]);
                    first = false;
                }
            buf_putc(out, ']');
        }
        break;
    }
    case PN_TEMPORAL_JOIN: {
        const PlanSchema *r = &n->inputs[1]->out;
        if (n->proc_time) {
            buf_puts(out, "the versioned side's current row per key ");
            cols_list(r, n->n_join_keys, n->right_keys, out);
            buf_puts(out, "; one row per key, no time bound");
        } else {
            buf_puts(out, "left rows until the watermark passes their time; versions per key ");
            cols_list(r, n->n_join_keys, n->right_keys, out);
            buf_printf(out, ", bounded by watermark on %s and %s (the latest version older than the watermark is kept)",
                       in->names[n->left_time_col], r->names[n->right_time_col]);
        }
        break;
    }
    default:
        break;
    }
}

/* Shared sub-plans (plan_share.c): the nodes with several readers, each
 * labelled #1, #2... in the order EXPLAIN first prints them. */
typedef struct Shared {
    int n;
    const PlanNode **node;
    int *readers;
    int *label;               /* 0 until printed */
    int next_label;
    PlanExplainAnnotate annotate;  /* EXPLAIN ANALYZE's figures per node, or NULL */
    void *annotate_arg;
} Shared;

/* EXPLAIN ANALYZE: a line of live figures under a node's properties. */
static void annotate_text(const Shared *sh, const PlanNode *n, const char *indent, Buf *out)
{
    if (!sh->annotate)
        return;
    buf_puts(out, indent);
    buf_puts(out, "      ");
    sh->annotate(sh->annotate_arg, n, false, out);
    buf_putc(out, '\n');
}

/* EXPLAIN ANALYZE (FORMAT JSON): the figures as member "analyze". */
static void annotate_json(const Shared *sh, const PlanNode *n, Buf *out)
{
    if (!sh->annotate)
        return;
    buf_puts(out, ", \"analyze\": ");
    sh->annotate(sh->annotate_arg, n, true, out);
}

static void shared_init(Shared *sh, PlanNode *const *nodes, int n)
{
    memset(sh, 0, sizeof *sh);
    if (!nodes || n <= 0)
        return;
    sh->n = n;
    sh->node = xcalloc((size_t)n, sizeof *sh->node);
    sh->readers = xcalloc((size_t)n, sizeof(int));
    sh->label = xcalloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) {
        sh->node[i] = nodes[i];
        for (int k = 0; k < nodes[i]->n_inputs; k++)
            for (int j = 0; j < i; j++)
                if (nodes[j] == nodes[i]->inputs[k])
                    sh->readers[j]++;
    }
}

static void shared_free(Shared *sh)
{
    free(sh->node);
    free(sh->readers);
    free(sh->label);
}

/* n's index when it has several readers, else -1. */
static int shared_at(const Shared *sh, const PlanNode *n)
{
    for (int i = 0; i < sh->n; i++)
        if (sh->node[i] == n)
            return sh->readers[i] > 1 ? i : -1;
    return -1;
}

static const char *kind_prefix(const PlanNode *n)
{
    /* VALUES in a view (with its state table) is a stream input */
    return n->kind == PN_VIEW_SCAN || (n->kind == PN_VALUES && !n->table_id) || n->kind == PN_RECURSIVE ||
                   n->kind == PN_WORK_TABLE
               ? "Batch" : "Stream";
}

/* One node and its inputs as a tree: prefix is what stands left of the
 * branch (├─ or └─) of this node; properties go on the line below. A shared
 * node is printed in full once, with "[shared #k, N readers]"; where it is
 * read again, one line "StreamX [shared #k, shown above]". */
static void explain_text(Shared *sh, const PlanNode *n, const char *prefix, bool root, bool last, Buf *out)
{
    buf_puts(out, prefix);
    if (!root)
        buf_puts(out, last ? "└─ " : "├─ ");
    int at = shared_at(sh, n);
    if (at >= 0 && sh->label[at]) {
        buf_printf(out, "%s%s [shared #%d, shown above]\n", kind_prefix(n), plan_node_kind_name(n->kind), sh->label[at]);
        return;
    }
    buf_printf(out, "%s%s { ", kind_prefix(n), plan_node_kind_name(n->kind));
    node_params(n, out);
    buf_puts(out, " }");
    if (at >= 0) {
        sh->label[at] = ++sh->next_label;
        buf_printf(out, " [shared #%d, %d readers]", sh->label[at], sh->readers[at]);
    }
    buf_puts(out, "\n");
    Buf child = BUF_INIT;
    buf_puts(&child, prefix);
    if (!root)
        buf_puts(&child, last ? "   " : "│  ");
    buf_puts(out, child.data);
    buf_puts(out, "      ");
    buf_puts(out, n->append_only ? "append-only" : "retract");
    if (n->n_keys) {
        buf_puts(out, ", key: ");
        cols_list(&n->out, n->n_keys, n->keys, out);
    }
    if (n->wm_col >= 0)
        buf_printf(out, ", watermark: %s", n->out.names[n->wm_col]);
    if (n->parallelism > 0) {
        buf_printf(out, ", parallelism: %d (", n->parallelism);
        dist_text(n, out);
        buf_putc(out, ')');
    }
    /* Keyed state split into key groups (plan_dist.c "Key groups"); an
     * exchange routes by them but holds no state. */
    if (n->key_groups && n->kind != PN_EXCHANGE) {
        buf_printf(out, ", key groups: %d by ", n->key_groups);
        cols_list(&n->inputs[0]->out, n->n_kg_cols[0], n->kg_cols[0], out);
    }
    Buf st = BUF_INIT;
    node_state(n, &st);
    if (st.len)
        buf_printf(out, ", state: %s", st.data);
    buf_free(&st);
    buf_putc(out, '\n');
    annotate_text(sh, n, child.data, out);
    for (int i = 0; i < n->n_inputs; i++)
        explain_text(sh, n->inputs[i], child.data, false, i == n->n_inputs - 1, out);
    if (n->kind == PN_RECURSIVE) {
        /* Not inputs (the runtime runs them apart), shown as if they were: first the anchor, then the step. */
        explain_text(sh, n->rec_anchor->root, child.data, false, false, out);
        explain_text(sh, n->rec_step->root, child.data, false, true, out);
    }
    buf_free(&child);
}

static void json_str(Buf *out, const char *s)
{
    buf_putc(out, '"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            buf_printf(out, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            buf_printf(out, "\\u%04x", *s);
        else
            buf_putc(out, *s);
    }
    buf_putc(out, '"');
}

static void explain_json(Shared *sh, const PlanNode *n, Buf *out)
{
    Buf tmp = BUF_INIT;
    buf_printf(out, "{\"id\": %d, \"operator\": ", n->id);
    json_str(out, plan_node_kind_name(n->kind));
    /* A shared node: in full once with "shared": k, then {"id", "operator",
     * "shared": k, "shown_above": true} where read again. */
    int at = shared_at(sh, n);
    if (at >= 0 && sh->label[at]) {
        buf_printf(out, ", \"shared\": %d, \"shown_above\": true}", sh->label[at]);
        return;
    }
    if (at >= 0) {
        sh->label[at] = ++sh->next_label;
        buf_printf(out, ", \"shared\": %d, \"readers\": %d", sh->label[at], sh->readers[at]);
    }
    node_params(n, &tmp);
    buf_puts(out, ", \"params\": ");
    json_str(out, tmp.data ? tmp.data : "");
    buf_printf(out, ", \"append_only\": %s, \"key\": [", n->append_only ? "true" : "false");
    for (int i = 0; i < n->n_keys; i++) {
        if (i)
            buf_puts(out, ", ");
        json_str(out, n->out.names[n->keys[i]]);
    }
    buf_puts(out, "], \"watermark\": ");
    if (n->wm_col >= 0)
        json_str(out, n->out.names[n->wm_col]);
    else
        buf_puts(out, "null");
    if (n->parallelism > 0) {
        buf_reset(&tmp);
        dist_text(n, &tmp);
        buf_printf(out, ", \"parallelism\": %d, \"distribution\": ", n->parallelism);
        json_str(out, tmp.data);
    }
    if (n->key_groups && n->kind != PN_EXCHANGE)
        buf_printf(out, ", \"key_groups\": %d", n->key_groups);
    if (n->kind == PN_AGG && n->agg_phase != PLAN_AGG_ONE)
        buf_printf(out, ", \"phase\": \"%s\"", n->agg_phase == PLAN_AGG_LOCAL ? "local" : "global");
    if (n->kind == PN_EXCHANGE && n->repartition)
        buf_printf(out, ", \"repartition\": true, \"key_groups\": %d", n->key_groups);
    if (n->kind == PN_EXCHANGE) {
        buf_puts(out, ", \"exchange_reason\": ");
        json_str(out, n->ex_reason ? n->ex_reason : "");
    }
    buf_reset(&tmp);
    node_state(n, &tmp);
    buf_puts(out, ", \"state\": ");
    if (tmp.len)
        json_str(out, tmp.data);
    else
        buf_puts(out, "null");
    buf_puts(out, ", \"columns\": [");
    for (int i = 0; i < n->out.n; i++) {
        if (i)
            buf_puts(out, ", ");
        buf_puts(out, "{\"name\": ");
        json_str(out, n->out.names[i]);
        buf_puts(out, ", \"type\": ");
        json_str(out, type_name(n->out.types[i]));
        buf_putc(out, '}');
    }
    buf_putc(out, ']');
    annotate_json(sh, n, out);
    buf_puts(out, ", \"inputs\": [");
    for (int i = 0; i < n->n_inputs; i++) {
        if (i)
            buf_puts(out, ", ");
        explain_json(sh, n->inputs[i], out);
    }
    buf_puts(out, "]}");
    buf_free(&tmp);
}

void plan_explain_view_annotated(const PlanView *v, bool json, PlanExplainAnnotate fn, void *arg, Buf *out)
{
    Shared sh;
    shared_init(&sh, v->nodes, v->n_nodes);
    sh.annotate = fn;
    sh.annotate_arg = arg;
    if (json)
        explain_json(&sh, v->changes ? v->changes : v->root, out);
    else
        explain_text(&sh, v->changes ? v->changes : v->root, "", true, true, out);
    shared_free(&sh);
    /* In a cluster: where the view runs (plan_place.c), after the tree so
     * that the tree reads as on one node. In JSON a member of the root. */
    if (v->placement && json && out->len && out->data[out->len - 1] == '}') {
        out->len--;
        buf_puts(out, ", \"placement\": ");
        json_str(out, v->placement);
        buf_printf(out, ", \"distributed\": %s}", v->distributed ? "true" : "false");
    } else if (v->placement) {
        buf_printf(out, "placement: %s\n", v->placement);
    }
}

void plan_explain_view(const PlanView *v, bool json, Buf *out) { plan_explain_view_annotated(v, json, NULL, NULL, out); }

void plan_explain_query(const PlanQuery *q, bool json, Buf *out)
{
    /* Ad hoc plans are trees (a recursive CTE's parts are plans of their own). */
    Shared sh;
    shared_init(&sh, NULL, 0);
    if (json) {
        explain_json(&sh, q->root, out);
        return;
    }
    Buf prefix = BUF_INIT;
    buf_puts(&prefix, "");
    bool root = true;
    if (q->limit >= 0 || q->offset) {
        buf_printf(out, "BatchLimit { limit: %" PRId64 ", offset: %" PRId64 " }\n", q->limit, q->offset);
        root = false;
    }
    if (q->n_order) {
        if (!root)
            buf_puts(out, "└─ ");
        buf_puts(out, "BatchSort { order: [");
        for (int i = 0; i < q->n_order; i++)
            buf_printf(out, "%s%s %s", i ? ", " : "", q->root->out.names[q->order[i].col], q->order[i].desc ? "DESC" : "ASC");
        buf_puts(out, "] }\n");
        if (!root)
            buf_puts(&prefix, "   ");
        root = false;
    }
    explain_text(&sh, q->root, prefix.data, root, true, out);
    buf_free(&prefix);
}
