/*
 * plan_dist.c: the distribution pass of a parallel view (streaming_parallelism > 1).
 *
 * Every node gets a distribution (PlanDist): how its P instances split the
 * rows. Sources and stateless operators (watermark, project, filter, window
 * assignment, UNION ALL) are ANY: each instance handles whatever reaches it,
 * and keeps its input's HASH when the hashed columns pass through. Keyed
 * state needs every row of a key at one instance: aggregations hash their
 * group key, joins both sides' join keys, Top-N its partition key, set
 * operations the whole row. A view's materialize stores its rows split
 * too: hashed on its key (the whole row for a counted view), or ANY for a
 * keyless append-only view (row ids s, s + P, ... per instance). What has
 * no key, or is not parallelized yet (a global aggregation's one row, a
 * table's upsert materialize, views and tables read as sources, LATE ROWS INTO,
 * aggregations without GROUP BY, temporal joins: split, their answers to
 * probes behind the watermark depended on the instances' timing), is SINGLE: one instance, instance 0,
 * which the runtime runs on the engine thread.
 *
 * Where a node needs another distribution than its input has, an Exchange
 * node goes between them; none goes where the input is already hashed on
 * the same columns (a count by window feeding a join on the window). An
 * Exchange to SINGLE is a gather. Each stateful node with P instances gets
 * P - 1 more state tables (asked for after every other table of the view,
 * in plan order, so re-planning at start hands back the same ids).
 *
 * A split materialize's changes still have one place where they are read
 * (sinks, subscribers and views over this one attach there): a lazy gather
 * Exchange and a single ViewChanges node after it, the plan's last node
 * (PlanView.changes). The gather moves rows only while something reads
 * them; watermarks always.
 */
#include "planner_int.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* What a node asks of input k. */
typedef struct Need {
    PlanDist dist;            /* SINGLE, HASH, or ANY (takes the input's as it is) */
    int n;
    int *cols;                /* HASH: input columns */
    const char *reason;       /* why, for EXPLAIN */
} Need;

/* A source whose input the runtime can split across instances: Kafka
 * (partitions p % P == s) and the unpaced nexmark generator (blocks of
 * events round-robin). A paced generator fixes its event times from the
 * clock at first start, once per instance, so it stays one instance; so do
 * dead-lettering sources, whose batches are written once per view. */
static bool splittable(const PlanNode *n)
{
    const char *conn = cat_option(n->source, "connector");
    const char *onerr = cat_option(n->source, "on_error");
    if (onerr && strcasecmp(onerr, "dead_letter") == 0)
        return false;
    if (conn && strcasecmp(conn, "kafka") == 0)
        return true;
    if (conn && strcasecmp(conn, "nexmark") == 0) {
        const char *pace = cat_option(n->source, "nexmark.pace");
        return !pace || !strcasecmp(pace, "false") || !strcasecmp(pace, "off") || !strcmp(pace, "0");
    }
    return false;
}

static const char *cols_text(Arena *a, const PlanSchema *s, int n, const int *cols)
{
    Buf b = BUF_INIT;
    buf_putc(&b, '(');
    for (int i = 0; i < n; i++)
        buf_printf(&b, "%s%s", i ? ", " : "", s->names[cols[i]]);
    buf_putc(&b, ')');
    const char *r = arena_strdup(a, b.data);
    buf_free(&b);
    return r;
}

static Need hash_need(Arena *a, const PlanNode *in, int n, int *cols, const char *what)
{
    Need d = {PLAN_DIST_HASH, n, cols, NULL};
    d.reason = arena_printf(a, "%s %s", what, cols_text(a, &in->out, n, cols));
    return d;
}

static Need single_need(const char *reason) { return (Need){PLAN_DIST_SINGLE, 0, NULL, reason}; }

/* An aggregation whose every group column is a window bound has one row
 * per window (and per phase instance before its global phase): few rows,
 * whatever the input's volume. Found below projections and filters. */
static bool one_row_per_window(const PlanNode *n)
{
    while ((n->kind == PN_PROJECT || n->kind == PN_FILTER || n->kind == PN_EXCHANGE) && n->n_inputs == 1)
        n = n->inputs[0];
    return n->kind == PN_AGG && n->n_group > 0 && n->n_group_bounds == n->n_group && !n->session;
}

/* A join whose right side has one row per window (Nexmark q5: the counts
 * per auction and window joined with the maximum per window) keyed by the
 * window alone would send every change of the big side to the instance of
 * its window: a handful of windows are open at a time, so one instance
 * does nearly all the work and the big side crosses the threads. Instead
 * the small side goes to every instance (a broadcast exchange) and the big
 * side stays where it is: each instance joins its own left rows with all
 * the right rows, so each pair is produced once, by the left row's
 * instance. Inner and left joins only: a right row without a match would
 * come out of every instance in a right or full join. Not with state_ttl:
 * the instances would expire their copies of a right row at different
 * times. The left side must be split already (a single one keeps the join
 * single, as before). */
static bool broadcast_right(const PlanNode *n)
{
    return (n->join_type == JOIN_INNER || n->join_type == JOIN_LEFT) && !n->state_ttl_us &&
           n->inputs[0]->dist != PLAN_DIST_SINGLE && n->inputs[1]->dist != PLAN_DIST_SINGLE &&
           one_row_per_window(n->inputs[1]) && !one_row_per_window(n->inputs[0]);
}

/* What node n asks of its input k. */
static Need need_of(Arena *a, const PlanNode *n, int k)
{
    const PlanNode *in = n->inputs[k];
    switch (n->kind) {
    case PN_WATERMARK:
    case PN_PROJECT:
    case PN_FILTER:
        return (Need){PLAN_DIST_ANY, 0, NULL, NULL};
    case PN_WINDOW:
        if (n->late_table_id)
            return single_need("LATE ROWS INTO is written by one instance");
        return (Need){PLAN_DIST_ANY, 0, NULL, NULL};
    case PN_UNION:
        if (n->inputs[0]->dist == PLAN_DIST_SINGLE || n->inputs[1]->dist == PLAN_DIST_SINGLE)
            return single_need("union with a single input is single");
        return (Need){PLAN_DIST_ANY, 0, NULL, NULL};
    case PN_AGG: {
        if (n->agg_phase == PLAN_AGG_LOCAL)
            return (Need){PLAN_DIST_ANY, 0, NULL, NULL}; /* pre-aggregates whatever reaches it */
        if (n->n_group == 0)
            return single_need("aggregation without a group key is single");
        /* Panes and sessions are merged across window bounds per key: hash
         * only the other group columns, so a key's panes meet. */
        int *cols = arena_alloc(a, sizeof(int) * (size_t)n->n_group);
        int m = 0;
        for (int i = 0; i < n->n_group; i++) {
            bool bound = (n->pane_us && (i == n->pane_start_idx || i == n->pane_end_idx)) ||
                         (n->session && (i == n->session_start_idx || i == n->session_end_idx));
            if (!bound)
                cols[m++] = n->group_cols[i];
        }
        if (!m)
            return single_need("aggregation keyed by its windows only is single");
        return hash_need(a, in, m, cols, "aggregation keyed by");
    }
    case PN_TEMPORAL_JOIN:
        return single_need("temporal join is single");
    case PN_JOIN:
        if (n->n_join_keys && broadcast_right(n)) /* the small side to every instance, the other stays */
            return k ? (Need){PLAN_DIST_BROADCAST, 0, NULL, "the small side of the join, to every instance"}
                     : (Need){PLAN_DIST_ANY, 0, NULL, NULL};
        /* fall through */
    case PN_SEMI_JOIN:
        if (n->n_join_keys == 0)
            return single_need("join without an equality key is single");
        return hash_need(a, in, n->n_join_keys, k ? n->right_keys : n->left_keys,
                         n->kind == PN_SEMI_JOIN ? "subquery correlated by" : "join key");
    case PN_TOPN:
        if (n->n_part == 0)
            return single_need("Top-N without PARTITION BY is single");
        return hash_need(a, in, n->n_part, n->part_cols, "Top-N partitioned by");
    case PN_SETOP: {
        int *cols = arena_alloc(a, sizeof(int) * (size_t)(in->out.n ? in->out.n : 1));
        for (int i = 0; i < in->out.n; i++)
            cols[i] = i;
        return hash_need(a, in, in->out.n, cols, "set operation keyed by the row");
    }
    case PN_MATERIALIZE: {
        if (n->upsert)
            return single_need("a table's materialize is single");
        if (n->row_id_key)
            return (Need){PLAN_DIST_ANY, 0, NULL, NULL};
        if (n->counted) {
            int *cols = arena_alloc(a, sizeof(int) * (size_t)(in->out.n ? in->out.n : 1));
            for (int i = 0; i < in->out.n; i++)
                cols[i] = i;
            return hash_need(a, in, in->out.n, cols, "materialize keyed by the row");
        }
        if (n->n_keys == 0)
            return single_need("materialize of a view without a key is single");
        return hash_need(a, in, n->n_keys, n->keys, "materialize keyed by");
    }
    default:
        return single_need(arena_printf(a, "%s is single", plan_node_kind_name(n->kind)));
    }
}

/* Input hashed on some of the columns d asks for: every row of one value
 * of d's columns is already at one instance (a materialize keyed by more
 * than its input is split on). */
static bool sub_hash(const PlanNode *in, const Need *d)
{
    if (in->dist != PLAN_DIST_HASH || in->n_dist_keys == 0)
        return false;
    for (int i = 0; i < in->n_dist_keys; i++) {
        bool found = false;
        for (int j = 0; j < d->n && !found; j++)
            found = in->dist_keys[i] == d->cols[j];
        if (!found)
            return false;
    }
    return true;
}

static bool same_hash(const PlanNode *in, const Need *d)
{
    if (in->dist != PLAN_DIST_HASH || in->n_dist_keys != d->n)
        return false;
    for (int i = 0; i < d->n; i++)
        if (in->dist_keys[i] != d->cols[i])
            return false;
    return true;
}

/* An exchange passes its input's rows on as they are: the same columns,
 * changelog mode, watermark column and key. */
static void exchange_reads(PlanNode *e, const PlanNode *in)
{
    e->out = in->out;
    e->append_only = in->append_only;
    e->wm_col = in->wm_col;
    e->n_keys = in->n_keys;
    e->keys = in->keys;
    e->dup_keys = in->dup_keys;
}

/* The exchange giving input k of nodes[at] the distribution d, inserted
 * before it in p's node list (which stays topological). */
static PlanNode *insert_exchange(PlanCtx *p, int at, int k, const Need *d, int P)
{
    PlanNode *n = p->nodes[at];
    PlanNode *in = n->inputs[k];
    PlanNode *e = new_node(p, PN_EXCHANGE, in); /* appended last: moved below */
    memmove(&p->nodes[at + 1], &p->nodes[at], sizeof(PlanNode *) * (size_t)(p->n_nodes - 1 - at));
    p->nodes[at] = e;
    exchange_reads(e, in);
    e->dist = d->dist;
    e->n_dist_keys = d->n;
    e->dist_keys = d->cols;
    e->parallelism = d->dist == PLAN_DIST_SINGLE ? 1 : P;
    e->ex_reason = d->reason;
    n->inputs[k] = e;
    return e;
}

/* Maps in's HASH through a projection: kept if every hashed column is
 * passed on unchanged, else ANY. */
static void project_dist(Arena *a, PlanNode *n)
{
    const PlanNode *in = n->inputs[0];
    n->dist = in->dist;
    if (in->dist != PLAN_DIST_HASH)
        return;
    int *cols = arena_alloc(a, sizeof(int) * (size_t)in->n_dist_keys);
    for (int i = 0; i < in->n_dist_keys; i++) {
        cols[i] = -1;
        for (int j = 0; j < n->n_exprs && cols[i] < 0; j++)
            if (n->exprs[j]->kind == PE_COL && n->exprs[j]->col == in->dist_keys[i])
                cols[i] = j;
        if (cols[i] < 0) {
            n->dist = PLAN_DIST_ANY;
            return;
        }
    }
    n->n_dist_keys = in->n_dist_keys;
    n->dist_keys = cols;
}

/* The distribution of n's output, its inputs having theirs. */
static void output_dist(Arena *a, PlanNode *n)
{
    const PlanNode *in = n->n_inputs ? n->inputs[0] : NULL;
    n->n_dist_keys = 0;
    n->dist_keys = NULL;
    switch (n->kind) {
    case PN_SOURCE:
        n->dist = splittable(n) ? PLAN_DIST_ANY : PLAN_DIST_SINGLE;
        return;
    case PN_WATERMARK:
    case PN_FILTER:
    case PN_WINDOW:
        /* Columns pass through (a window appends its bounds). */
        n->dist = in->dist;
        if (in->dist == PLAN_DIST_HASH) {
            n->n_dist_keys = in->n_dist_keys;
            n->dist_keys = in->dist_keys;
        }
        return;
    case PN_PROJECT:
        project_dist(a, n);
        return;
    case PN_UNION:
        n->dist = in->dist == PLAN_DIST_SINGLE ? PLAN_DIST_SINGLE : PLAN_DIST_ANY;
        return;
    case PN_MATERIALIZE:
        /* Split as its input is (need_of's exchange made it so), unless it
         * must be single; the row id column is appended, others keep their places. */
        n->dist = n->upsert || (n->n_keys == 0 && !n->row_id_key) ? PLAN_DIST_SINGLE : in->dist;
        if (n->dist == PLAN_DIST_HASH) {
            n->n_dist_keys = in->n_dist_keys;
            n->dist_keys = in->dist_keys;
        }
        return;
    case PN_AGG: {
        n->dist = in->dist;
        if (in->dist != PLAN_DIST_HASH)
            return;
        /* The group columns come first in the output, in group order. */
        int *cols = arena_alloc(a, sizeof(int) * (size_t)in->n_dist_keys);
        for (int i = 0; i < in->n_dist_keys; i++) {
            cols[i] = -1;
            for (int g = 0; g < n->n_group; g++)
                if (n->group_cols[g] == in->dist_keys[i])
                    cols[i] = g;
            if (cols[i] < 0) {
                n->dist = PLAN_DIST_ANY;
                return;
            }
        }
        n->n_dist_keys = in->n_dist_keys;
        n->dist_keys = cols;
        return;
    }
    case PN_JOIN:
    case PN_TEMPORAL_JOIN:
    case PN_SEMI_JOIN:
    case PN_TOPN:
    case PN_SETOP:
        n->dist = in->dist;
        /* The left columns come first and keep their places; only rows of
         * an inner, left, temporal or semi join all carry the left key. */
        if (in->dist == PLAN_DIST_HASH && !(n->kind == PN_JOIN && n->join_type != JOIN_INNER &&
                                            n->join_type != JOIN_LEFT)) {
            n->n_dist_keys = in->n_dist_keys;
            n->dist_keys = in->dist_keys;
        } else if (in->dist == PLAN_DIST_HASH) {
            n->dist = PLAN_DIST_ANY;
        }
        return;
    default:
        n->dist = PLAN_DIST_SINGLE;
        return;
    }
}

/* Two-phase (local-global) aggregation. A HASH-distributed aggregation
 * sends every row of a group to one instance: with a hot key (a count per
 * window: one group per window) one instance does all the work whatever P
 * is. Split, each instance aggregates the rows it has (LOCAL, no exchange
 * before it) and only the partial rows' changes cross the exchange to the
 * instance owning the group (GLOBAL), which combines them. Only where an
 * exchange would be inserted anyway (input ANY, or hashed on other columns)
 * and every aggregate is decomposable: count(*)/count(x) -> sum of the
 * partial counts (as BIGINT, not sum's NUMERIC), sum -> sum, min -> min,
 * max -> max. A group's global row exists exactly while some partial row
 * exists, i.e. while the group has rows, as in one phase; retractions
 * reach the local that holds the row, whose partial then changes (-U/+U)
 * or goes (-D). Windowed aggregations split with both phases keeping the
 * window, the emit mode and the lateness: a local emits a partial before
 * forwarding the watermark that would make it late, and the exchange gives
 * the global the minimum of the locals' watermarks, so the global never
 * drops a partial its local accepted, and closes a window (EOWC) only once
 * every local has emitted its partial for it. Left in one phase:
 *  - SESSION windows: a row's session is decided by merging with the
 *    key's neighbouring sessions, which only the instance holding all of
 *    the key's rows can do (the locals' sessions would not line up);
 *  - HOP in panes: the global would have to merge partial panes into
 *    windows, which the pane operator does from its own pane states only;
 *  - WITH (state_ttl): a local and the global expire a group at different
 *    processing times (a local idles while other instances keep the group
 *    alive), and a retraction reaching a local that dropped the group
 *    would then be lost where one phase applied it;
 *  - avg, count(DISTINCT), bool_and/or, string_agg, first/last_value: not
 *    (or not exactly) combinable from one partial value; sum of a float
 *    (see below);
 *  - an input that is single (nothing to pre-aggregate in parallel), or
 *    hashed on a subset of the group columns (each instance already holds
 *    whole groups: a local phase would do all the work and save nothing).
 * When: WITH (agg_phase_strategy = 'two_phase') wherever the above allows;
 * 'auto' (the default) only when every group column is a window bound (a
 * count per window: every row of the stream goes to the one group of its
 * window, the case two phases are for). Over a key with many values (q5's
 * count per auction and window) the local phase hardly reduces the rows and
 * doubles the state and the work: Nexmark q5 at P=2 ran at 97K events/s
 * with it split against 159K in one phase (bench/README.md, two-phase
 * aggregation). The planner knows no cardinalities, so a hot key that
 * is not a window (a few channels) is the user's call: 'two_phase'.
 * 'one_phase' never splits.
 * The node keeps its id, table, output and readers and becomes the GLOBAL
 * phase; the LOCAL one is new, inserted before it at index `at` of p's
 * nodes (a fresh id and table, allocated here, in plan order, so
 * re-planning at start gives the same ids). Returns the local or NULL. */
static PlanNode *split_agg(PlanCtx *p, int at)
{
    PlanNode *n = p->nodes[at];
    PlanNode *in = n->inputs[0];
    Arena *a = p->b.a;
    if (p->agg_phase_strategy == 1 || n->agg_phase != PLAN_AGG_ONE || n->n_group == 0 || n->session ||
        n->pane_us || n->state_ttl_us || in->dist == PLAN_DIST_SINGLE)
        return NULL;
    /* 'auto': only where the key is hot by construction. */
    if (p->agg_phase_strategy == 0 && n->n_group_bounds < n->n_group)
        return NULL;
    for (int i = 0; i < n->n_aggs; i++) {
        PlanAggKind k = n->aggs[i].kind;
        if ((k != AGG_COUNT_STAR && k != AGG_COUNT && k != AGG_SUM && k != AGG_MIN && k != AGG_MAX) ||
            n->aggs[i].distinct)
            return NULL;
        /* A float sum rounds after every addition: summing partial sums adds
         * in another order, and the last digits would differ from one phase. */
        if (k == AGG_SUM && (n->aggs[i].type == TYPE_FLOAT8 || n->aggs[i].type == TYPE_FLOAT4))
            return NULL;
    }
    if (in->dist == PLAN_DIST_HASH) {
        /* Hashed on group columns only: every group is whole at one instance. */
        bool inside = true;
        for (int i = 0; i < in->n_dist_keys && inside; i++) {
            bool found = false;
            for (int g = 0; g < n->n_group; g++)
                found |= n->group_cols[g] == in->dist_keys[i];
            inside = found;
        }
        if (inside)
            return NULL;
    }
    PlanNode *l = new_node(p, PN_AGG, in); /* appended last: moved below */
    int id = l->id;
    *l = *n;
    l->id = id;
    l->inputs[0] = in;
    l->agg_phase = PLAN_AGG_LOCAL;
    l->table_id = new_table(p);
    /* The partial rows: group columns then one value per aggregate, as n's
     * output. Only an EOWC local without lateness emits each once. */
    l->append_only = n->emit == PLAN_EMIT_ON_CLOSE && n->win_group_idx >= 0 && n->lateness_us == 0;
    l->keys = arena_alloc(a, sizeof(int) * (size_t)n->n_group);
    for (int g = 0; g < n->n_group; g++)
        l->keys[g] = g;
    l->n_keys = n->n_group;
    memmove(&p->nodes[at + 1], &p->nodes[at], sizeof(PlanNode *) * (size_t)(p->n_nodes - 1 - at));
    p->nodes[at] = l;

    n->inputs[0] = l;
    n->agg_phase = PLAN_AGG_GLOBAL;
    n->group_cols = l->keys;
    PlanAgg *ga = arena_alloc(a, sizeof(PlanAgg) * (size_t)(n->n_aggs ? n->n_aggs : 1));
    for (int i = 0; i < n->n_aggs; i++) {
        const PlanAgg *g = &l->aggs[i];
        PlanAggKind k = g->kind == AGG_COUNT_STAR || g->kind == AGG_COUNT ? AGG_SUM : g->kind;
        /* Partial counts are summed as BIGINT (count's type; the runtime sums
         * by the result type), other partials keep their own type. */
        ga[i] = (PlanAgg){.kind = k, .arg = n->n_group + i, .arg_type = g->type, .type = g->type,
                          .filter_col = -1, .compensated = g->compensated};
    }
    n->aggs = ga;
    return l;
}

/* After a split materialize: a lazy gather and the ViewChanges node where
 * the view's changes are read, last in the node list (it reads nothing
 * else, and nothing reads it but sinks and subscribers, which are not
 * plan nodes). */
static void add_view_changes(PlanCtx *p, PlanView *v)
{
    PlanNode *m = v->root;
    PlanNode *c = new_node(p, PN_VIEW_CHANGES, m);
    int id = c->id;
    /* The materialize's description (columns, key, watermark, view name)
     * without its state. */
    *c = *m;
    c->kind = PN_VIEW_CHANGES;
    c->id = id;
    c->n_inputs = 1;
    c->inputs[0] = m;
    c->table_id = c->table_id2 = 0;
    c->shard_tables = NULL;
    c->dist = PLAN_DIST_SINGLE;
    c->n_dist_keys = 0;
    c->dist_keys = NULL;
    c->parallelism = 1;
    Need d = single_need("the view's changes are read in one place");
    PlanNode *e = insert_exchange(p, p->n_nodes - 1, 0, &d, v->root->parallelism);
    e->ex_lazy = true;
    v->changes = c;
}

/* Undoes add_view_changes for a view created before the materialize could
 * split, re-planned at start: its catalog entry has no table ids for the
 * other instances (new_table gave 0), and every row it has is in instance
 * 0's table, so it stays single, its rows gathered to it as then. The
 * gather moves before the materialize; an exchange planned to split the
 * store stays (it only routes rows the gather then collects). */
static void unsplit_materialize(PlanCtx *p, PlanView *v)
{
    PlanNode *m = v->root, *c = v->changes, *e = c->inputs[0], *in = m->inputs[0];
    e->inputs[0] = in;
    exchange_reads(e, in);
    e->ex_lazy = false;
    e->ex_reason = "materialize is single";
    m->inputs[0] = e;
    m->dist = PLAN_DIST_SINGLE;
    m->n_dist_keys = 0;
    m->dist_keys = NULL;
    m->parallelism = 1;
    m->shard_tables = NULL;
    int at = -1;
    for (int i = 0; i < p->n_nodes; i++)
        if (p->nodes[i] == m)
            at = i;
    /* [.., m, e, c] becomes [.., e, m]: c was last, e right after m. */
    p->nodes[at] = e;
    p->nodes[at + 1] = m;
    p->n_nodes--;
    v->changes = NULL;
}

/* ---- Key groups (planner revision 6; common/keygroup.h) ----
 *
 * A view's keyed state is split into G key groups: a row's group is
 * weir_key_group(hash of its key columns, G), and every key of a keyed
 * operator's state table begins with it (2 bytes, big-endian), so one group
 * is one contiguous key range that storage can list, export, import and
 * drop alone (stor_kg_*), the unit a cluster hands over. A parallel view's
 * HASH exchanges route group kg to shard kg % P, so a shard holds whole
 * groups and an operator's groups are the ones its exchange sent it.
 *
 * Keyed here: the view's materialize with a key (its key columns, the whole
 * row of a counted view), the unwindowed grouped aggregations (their
 * group columns; the global phase of a two-phase one), Top-N with a
 * PARTITION BY (its partition columns; a windowed one too: it expires
 * windows by a full scan, not in time order) and regular and interval
 * joins with an equality key (each side's key columns; the interval join's
 * time index stays one index across groups, op_join.c), INTERSECT and
 * EXCEPT (the whole row) and correlated IN/EXISTS/scalar subqueries (the
 * correlation key). Their key columns
 * are those of the exchange before them when there is one (a materialize
 * whose input is already hashed on some of its key columns: those), else
 * the ones it would hash. Not keyed (their state keeps the layout of
 * revision 5, EXPLAIN says nothing): state ordered by time first (windowed,
 * pane and session aggregations close windows by scanning keys in window
 * end order), aggregations and Top-N WITH (state_ttl) (their access-time
 * index spans every key), the local phase of a two-phase aggregation (partial
 * rows of whatever reached the instance), a join broadcasting its small
 * side (the other side's rows stay where they are), keyless and table
 * materializes, uncorrelated subqueries (single), and temporal joins (not
 * yet). */

int plan_key_groups_option(PlanCtx *p, const AstOption *o, WError *err)
{
    const char *s = o->value ? o->value : "";
    while (*s == ' ')
        s++;
    long v = 0;
    int digits = 0;
    for (; *s >= '0' && *s <= '9'; s++, digits++)
        if (v <= WEIR_MAX_KEY_GROUPS)
            v = v * 10 + (*s - '0');
    while (*s == ' ')
        s++;
    if (!digits || *s || v < 1)
        return werr(err, SQLSTATE_INVALID_PARAMETER, o->pos, "key_groups must be an integer from 1 to %d, not '%s'",
                    WEIR_MAX_KEY_GROUPS, o->value ? o->value : "");
    if (v > WEIR_MAX_KEY_GROUPS)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, o->pos, "key_groups %s exceeds the limit of %d key groups",
                    o->value, WEIR_MAX_KEY_GROUPS),
               werr_hint(err, "Each key group is a unit of state (and in a cluster one partition of a topic)."), -1;
    p->key_groups = (int)v;
    return 0;
}

/* Whether node n's operator prefixes its state keys with key groups (see above). */
static bool kg_capable(const PlanNode *n)
{
    switch (n->kind) {
    case PN_AGG:
        return n->agg_phase != PLAN_AGG_LOCAL && n->n_group > 0 && n->win_group_idx < 0 && !n->session &&
               !n->pane_us && !n->state_ttl_us;
    case PN_MATERIALIZE:
        return !n->upsert && !n->row_id_key && (n->n_keys > 0 || n->counted);
    case PN_TOPN:
        return n->n_part > 0 && !n->state_ttl_us;
    case PN_JOIN:
        return n->n_join_keys > 0 && !n->state_ttl_us;
    case PN_SETOP:
        return true;
    case PN_SEMI_JOIN:
        return n->n_join_keys > 0;
    default:
        return false;
    }
}

/* The key-group count of a view created without WITH (key_groups): see
 * revision 7 in planner.h. On one node the count only has to let the
 * exchanges route group kg to shard kg % P, and more groups than shards
 * cost checkpoint writes; in a cluster they are the unit that moves. */
static int default_key_groups(const PlanCtx *p, const PlanView *v)
{
    if (p->plan_rev < 7 || p->cluster)
        return WEIR_DEFAULT_KEY_GROUPS;
    return v->parallelism > 1 ? v->parallelism : 1;
}

static void assign_key_groups(PlanCtx *p, PlanView *v)
{
    int G = p->key_groups ? p->key_groups : default_key_groups(p, v);
    v->key_groups = G;
    for (int i = 0; i < v->n_nodes; i++) {
        PlanNode *n = v->nodes[i];
        if (n->kind == PN_EXCHANGE) {
            if (n->dist == PLAN_DIST_HASH)
                n->key_groups = G;
            continue;
        }
        if (!kg_capable(n))
            continue;
        /* Every input hashed (a join's two sides on their keys; a join
         * broadcasting its small side is not keyed). */
        bool keyed = true;
        for (int k = 0; k < n->n_inputs && k < 2; k++) {
            Need d = need_of(p->b.a, n, k);
            const PlanNode *in = n->inputs[k];
            if (d.dist != PLAN_DIST_HASH) {
                keyed = false;
            } else if (n->parallelism > 1 && in->dist == PLAN_DIST_HASH) {
                n->n_kg_cols[k] = in->n_dist_keys;
                n->kg_cols[k] = in->dist_keys;
            } else {
                n->n_kg_cols[k] = d.n;
                n->kg_cols[k] = d.cols;
            }
        }
        if (!keyed) {
            n->n_kg_cols[0] = n->n_kg_cols[1] = 0;
            n->kg_cols[0] = n->kg_cols[1] = NULL;
            continue;
        }
        n->key_groups = G;
    }
}

/* The distribution pass proper (see the file comment). */
static int distribute(PlanCtx *p, PlanView *v, int P);

int plan_distribute(PlanCtx *p, PlanView *v, int P)
{
    if (distribute(p, v, P))
        return -1;
    if (p->plan_rev >= 6)
        assign_key_groups(p, v);
    return 0;
}

static int distribute(PlanCtx *p, PlanView *v, int P)
{
    Arena *a = p->b.a;
    v->parallelism = 1;
    if (P <= 1)
        return 0;
    for (int i = 0; i < p->n_nodes; i++) {
        PlanNode *n = p->nodes[i];
        if (n->kind == PN_EXCHANGE)
            continue;
        if (n->kind == PN_AGG) {
            Need d = need_of(a, n, 0);
            if (d.dist == PLAN_DIST_HASH && !same_hash(n->inputs[0], &d) && split_agg(p, i))
                n = p->nodes[i]; /* the local phase, now here; n is next */
        }
        for (int k = 0; k < n->n_inputs; k++) {
            Need d = need_of(a, n, k);
            PlanNode *in = n->inputs[k];
            bool ok = d.dist == PLAN_DIST_ANY || (d.dist == PLAN_DIST_SINGLE && in->dist == PLAN_DIST_SINGLE) ||
                      (d.dist == PLAN_DIST_HASH && same_hash(in, &d));
            /* A view's materialize over a single input stays single: an
             * exchange only to split the store would cost what it saves. */
            if (n->kind == PN_MATERIALIZE && d.dist == PLAN_DIST_HASH)
                ok = in->dist == PLAN_DIST_SINGLE || sub_hash(in, &d);
            if (!ok) {
                insert_exchange(p, i, k, &d, P);
                i++; /* n moved one place down */
            }
        }
        output_dist(a, n);
        /* A node needing HASH or ANY over a SINGLE input stays SINGLE only
         * when it needs ANY; HASH inputs were exchanged above. */
        n->parallelism = n->dist == PLAN_DIST_SINGLE ? 1 : P;
    }
    bool any = false;
    for (int i = 0; i < p->n_nodes; i++)
        any |= p->nodes[i]->parallelism > 1;
    if (!any) {
        /* Nothing splits (a view over views or tables): one thread, as before. */
        for (int i = 0; i < p->n_nodes; i++)
            p->nodes[i]->parallelism = 0;
        return 0;
    }
    if (v->root->parallelism > 1)
        add_view_changes(p, v);
    v->parallelism = P;
    v->nodes = p->nodes;
    v->n_nodes = p->n_nodes;
    for (int i = 0; i < p->n_nodes; i++) {
        PlanNode *n = p->nodes[i];
        if (n->parallelism < 2 || !n->table_id)
            continue;
        n->shard_tables = arena_zalloc(a, sizeof(uint64_t) * 2 * (size_t)P);
        n->shard_tables[0] = n->table_id;
        n->shard_tables[1] = n->table_id2;
        for (int s = 1; s < P; s++) {
            n->shard_tables[2 * s] = new_table(p);
            if (n->table_id2)
                n->shard_tables[2 * s + 1] = new_table(p);
        }
    }
    /* The materialize's tables are the last asked for: none left means a
     * catalog entry from before the split. */
    if (v->changes && !v->root->shard_tables[2]) {
        /* Two-phase aggregation came with the split store: an entry that
         * lacks the store's tables lacks the local phases' too, and those,
         * asked for earlier, took ids that belong to other instances' state. */
        for (int i = 0; i < p->n_nodes; i++)
            if (p->nodes[i]->kind == PN_AGG && p->nodes[i]->agg_phase == PLAN_AGG_LOCAL)
                return werr(p->b.err, SQLSTATE_NOT_SUPPORTED, 0,
                            "feature not supported: this parallel view was created by an earlier weir, whose plan "
                            "had no two-phase aggregation; drop it and create it again");
        unsplit_materialize(p, v);
    }
    v->nodes = p->nodes;
    v->n_nodes = p->n_nodes;
    return 0;
}
