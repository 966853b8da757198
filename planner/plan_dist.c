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

/* The exchange giving input k of nodes[at] the distribution d, inserted
 * before it in p's node list (which stays topological). */
static PlanNode *insert_exchange(PlanCtx *p, int at, int k, const Need *d, int P)
{
    PlanNode *n = p->nodes[at];
    PlanNode *in = n->inputs[k];
    PlanNode *e = new_node(p, PN_EXCHANGE, in); /* appended last: moved below */
    memmove(&p->nodes[at + 1], &p->nodes[at], sizeof(PlanNode *) * (size_t)(p->n_nodes - 1 - at));
    p->nodes[at] = e;
    e->out = in->out;
    e->append_only = in->append_only;
    e->wm_col = in->wm_col;
    e->n_keys = in->n_keys;
    e->keys = in->keys;
    e->dup_keys = in->dup_keys;
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
    e->out = in->out;
    e->append_only = in->append_only;
    e->wm_col = in->wm_col;
    e->n_keys = in->n_keys;
    e->keys = in->keys;
    e->dup_keys = in->dup_keys;
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

int plan_distribute(PlanCtx *p, PlanView *v, int P)
{
    Arena *a = p->b.a;
    v->parallelism = 1;
    if (P <= 1)
        return 0;
    for (int i = 0; i < p->n_nodes; i++) {
        PlanNode *n = p->nodes[i];
        if (n->kind == PN_EXCHANGE)
            continue;
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
    if (v->changes && !v->root->shard_tables[2])
        unsplit_materialize(p, v);
    v->nodes = p->nodes;
    v->n_nodes = p->n_nodes;
    return 0;
}
