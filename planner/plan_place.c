/*
 * plan_place.c: where a view of a cluster runs (planner revision 7; issue 16
 * phase 2, docs/cluster.md "Distributed views").
 *
 * In a cluster (PlanViewOptions.cluster) a view is either *distributed*:
 * its source fragment runs per source partition on the node the work group
 * gave that partition, one hash exchange (the repartition exchange, written
 * through a repartition topic) moves each row to its key group, and the
 * keyed stage runs per key group on the node owning it; or *replicated*:
 * every node runs it over every partition (phase 1). This pass decides which
 * and, for a distributed view, inserts the repartition exchange. It runs
 * after plan_distribute, which has given the keyed nodes their key groups.
 *
 * Distributed is the one shape whose every piece phase 2 can move exactly:
 *   source fragment: one Kafka source (task = its partition) and stateless
 *     nodes over it (watermark, project, filter, window without LATE ROWS);
 *   keyed stage: one keyed node K (an unwindowed aggregation with a group
 *     key, a Top-N with PARTITION BY over no window, or the view's keyed
 *     materialize itself), then projections and filters, then the view's
 *     materialize, keyed by a key that contains the columns the exchange
 *     hashed (so one key group of the exchange is one key group of every
 *     state table of the stage: a node that loses it drops exactly it).
 * Everything else stays replicated, with the first reason met:
 * joins and set operations (two shuffled inputs), keyless and table
 * materializes, views and tables read as sources, windowed aggregations and
 * windowed Top-N (their state is kept by window, not by key group, and the
 * rows of a key group replayed from the start would be late against
 * windows already closed), state_ttl, parallel views (streaming_parallelism
 * > 1: this phase keeps them replicated), and views recorded before
 * revision 7.
 *
 * WITH (placement = 'replicated') keeps a view replicated whatever its
 * shape. A view over a distributed view is refused (0A000): its input, the
 * distributed view's changes on this node, holds only this node's key
 * groups.
 *
 * Standalone planning (cluster false) changes nothing: its plans are
 * exactly those of revision 6.
 */
#include "planner_int.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Nodes of the source fragment: stateless per row and per source partition. */
static bool per_partition(const PlanNode *n)
{
    switch (n->kind) {
    case PN_WATERMARK:
    case PN_PROJECT:
    case PN_FILTER:
        return true;
    case PN_WINDOW:
        return !n->late_table_id;
    default:
        return false;
    }
}

/* A source whose partitions the work group assigns: a Kafka topic (not
 * dead-lettering: its dead letters are written once per view). */
static const char *source_reason(const PlanNode *n)
{
    if (n->kind != PN_SOURCE)
        return n->kind == PN_VIEW_SOURCE ? "it reads a view or a table" : "it reads something other than a Kafka source";
    const char *conn = cat_option(n->source, "connector");
    const char *onerr = cat_option(n->source, "on_error");
    if (!conn || strcasecmp(conn, "kafka"))
        return "its source is not a Kafka topic";
    if (onerr && !strcasecmp(onerr, "dead_letter"))
        return "its source dead-letters bad records (written once per view)";
    /* A partition handed to another node is read there from that node's
     * own last position for it, its first offset if it never had one:
     * rows replayed from there are dropped by their (task, seq), but a
     * start at 'latest' would skip the rows before it. */
    const char *mode = cat_option(n->source, "scan.startup.mode");
    if (mode && !strcasecmp(mode, "latest"))
        return "its source starts at 'latest' (a partition moved to another node would skip rows)";
    if (cat_option(n->source, "scan.bounded.mode") || cat_option(n->source, "backfill_from"))
        return "its source is bounded or backfilled from a time";
    return NULL;
}

/* Whether n may be the keyed node K, else why not. */
static const char *keyed_reason(const PlanNode *n)
{
    switch (n->kind) {
    case PN_AGG:
        if (n->n_group == 0)
            return "an aggregation without GROUP BY has one row";
        if (n->win_group_idx >= 0 || n->pane_us || n->session)
            return "windowed aggregation state is kept by window, not by key group";
        break;
    case PN_TOPN:
        if (n->n_part == 0)
            return "a Top-N without PARTITION BY is one partition";
        if (n->win_group_idx >= 0)
            return "a windowed Top-N expires windows by the watermark";
        break;
    case PN_MATERIALIZE:
        break;
    case PN_JOIN:
    case PN_SEMI_JOIN:
    case PN_TEMPORAL_JOIN:
    case PN_SETOP:
    case PN_UNION:
        return "it has two inputs to shuffle";
    default:
        return "its plan has a node that is not keyed";
    }
    if (n->state_ttl_us)
        return "state_ttl expires state across key groups";
    if (!n->key_groups || n->n_kg_cols[0] < 1)
        return "its keyed state is not split into key groups";
    return NULL;
}

/* Maps the columns cols[0..n) of `from`'s output through the chain of nodes
 * from `from` (exclusive) to `to` (inclusive's input), into out. The chain is
 * projections and filters; false when a column does not pass unchanged. */
static bool map_cols(const PlanNode *to, const PlanNode *from, int n, const int *cols, int *out)
{
    memcpy(out, cols, sizeof(int) * (size_t)n);
    /* Walk down from to's input to from, collecting the path, then map up. */
    const PlanNode *path[64];
    int np = 0;
    for (const PlanNode *x = to->inputs[0]; x != from; x = x->inputs[0]) {
        if (np == 64 || (x->kind != PN_PROJECT && x->kind != PN_FILTER) || x->n_inputs != 1)
            return false;
        path[np++] = x;
    }
    for (int i = np - 1; i >= 0; i--) {
        if (path[i]->kind != PN_PROJECT)
            continue;
        for (int c = 0; c < n; c++) {
            int found = -1;
            for (int j = 0; j < path[i]->n_exprs && found < 0; j++)
                if (path[i]->exprs[j]->kind == PE_COL && path[i]->exprs[j]->col == out[c])
                    found = j;
            if (found < 0)
                return false;
            out[c] = found;
        }
    }
    return true;
}

/* The columns of K's output that carry the exchange's hashed values (the
 * hashed input columns kin[0..n)), into out; false when they do not pass. */
static bool keyed_out_cols(const PlanNode *k, int n, const int *kin, int *out)
{
    if (k->kind == PN_TOPN) { /* the input's columns, then the row number */
        memcpy(out, kin, sizeof(int) * (size_t)n);
        return true;
    }
    /* An aggregation's output starts with its group columns, in group order. */
    for (int i = 0; i < n; i++) {
        out[i] = -1;
        for (int g = 0; g < k->n_group; g++)
            if (k->group_cols[g] == kin[i])
                out[i] = g;
        if (out[i] < 0)
            return false;
    }
    return true;
}

/* Checks that the materialize m over K keeps K's key groups: its key holds
 * every hashed column; sets m's key-group columns to them, in the exchange's
 * order (so m's group of a row is the exchange's). NULL, or why not. */
static const char *materialize_keeps(Arena *a, PlanNode *m, const PlanNode *k, int n, const int *kin)
{
    if (m == k)
        return NULL;
    int *kout = arena_alloc(a, sizeof(int) * (size_t)n);
    int *mcols = arena_alloc(a, sizeof(int) * (size_t)n);
    if (!keyed_out_cols(k, n, kin, kout) || !map_cols(m, k, n, kout, mcols))
        return "the key-group columns do not reach the view unchanged";
    if (!m->counted)
        for (int i = 0; i < n; i++) {
            bool in_key = false;
            for (int j = 0; j < m->n_keys; j++)
                in_key |= m->keys[j] == mcols[i];
            if (!in_key)
                return "the view's key does not hold the key-group columns";
        }
    m->n_kg_cols[0] = n;
    m->kg_cols[0] = mcols;
    return NULL;
}

/* Finds K (the first node that is not of the source fragment) and checks
 * the fragment under it; NULL with *why when the view is not of the shape. */
static PlanNode *find_keyed(const PlanView *v, const char **why)
{
    int sources = 0;
    PlanNode *k = NULL;
    for (int i = 0; i < v->n_nodes; i++) {
        PlanNode *n = v->nodes[i];
        if (n->n_inputs == 0) {
            if ((*why = source_reason(n)))
                return NULL;
            if (++sources > 1) {
                *why = "it reads more than one source";
                return NULL;
            }
            continue;
        }
        if (!k && per_partition(n))
            continue;
        if (!k) {
            if ((*why = keyed_reason(n)))
                return NULL;
            if (n->n_inputs != 1) {
                *why = "it has two inputs to shuffle";
                return NULL;
            }
            k = n;
            continue;
        }
        /* After K: a chain of projections and filters to the materialize. */
        if (n->n_inputs != 1 || (n != v->root && n->kind != PN_PROJECT && n->kind != PN_FILTER)) {
            *why = n->kind == PN_AGG || n->kind == PN_TOPN ? "it needs a second shuffle"
                                                            : "its plan has a node that is not keyed";
            return NULL;
        }
    }
    if (!k)
        *why = "it has no keyed state";
    return k;
}

int plan_place(PlanCtx *p, PlanView *v, bool cluster, int P)
{
    v->distributed = false;
    v->placement = NULL;
    if (!cluster)
        return 0;
    Arena *a = p->b.a;
    const char *why = NULL;
    PlanNode *k = NULL;
    for (int i = 0; i < v->n_nodes; i++) {
        const CatRelation *r = v->nodes[i]->scan_rel;
        if ((v->nodes[i]->kind == PN_VIEW_SOURCE || v->nodes[i]->kind == PN_VIEW_SCAN) && r && r->distributed) {
            werr(p->b.err, SQLSTATE_NOT_SUPPORTED, 0,
                 "feature not supported: a view over \"%s\", a view distributed over the cluster's nodes", r->name);
            werr_hint(p->b.err, "Each node holds only its key groups of \"%s\". Create it WITH (placement = "
                                "'replicated') to read it from other views.", r->name);
            return -1;
        }
    }
    if (p->plan_rev < 7)
        why = "planned before revision 7";
    else if (p->placement_replicated)
        why = "WITH (placement = 'replicated')";
    else if (P > 1)
        why = "parallel views (streaming_parallelism > 1) stay replicated";
    else if ((k = find_keyed(v, &why)) && (!v->root->key_groups || v->root->upsert)) {
        why = "the view's rows are not split into key groups";
        k = NULL;
    }
    if (k && k != v->root)
        why = materialize_keeps(a, v->root, k, k->n_kg_cols[0], k->kg_cols[0]);
    if (!k || why) {
        v->placement = arena_printf(a, "every node (replicated): %s", why);
        return 0;
    }
    /* The repartition exchange before K, hashing K's key-group columns. */
    int at = -1;
    for (int i = 0; i < p->n_nodes; i++)
        if (p->nodes[i] == k)
            at = i;
    PlanNode *in = k->inputs[0];
    PlanNode *e = new_node(p, PN_EXCHANGE, in); /* appended last: moved before K */
    memmove(&p->nodes[at + 1], &p->nodes[at], sizeof(PlanNode *) * (size_t)(p->n_nodes - 1 - at));
    p->nodes[at] = e;
    e->out = in->out;
    e->append_only = in->append_only;
    e->wm_col = in->wm_col;
    e->n_keys = in->n_keys;
    e->keys = in->keys;
    e->dup_keys = in->dup_keys;
    e->dist = PLAN_DIST_HASH;
    e->n_dist_keys = k->n_kg_cols[0];
    e->dist_keys = k->kg_cols[0];
    e->key_groups = v->key_groups;
    e->repartition = true;
    /* Its state (runtime op_repart.c): each task's next row number, the
     * reader's position and the key groups owned, checkpointed with the
     * source offsets and the keyed state. The last id asked for. */
    e->table_id = new_table(p);
    e->ex_reason = "rows to the node owning their key group";
    k->inputs[0] = e;
    v->nodes = p->nodes;
    v->n_nodes = p->n_nodes;
    v->distributed = true;
    v->placement = "distributed over key groups";
    return 0;
}
