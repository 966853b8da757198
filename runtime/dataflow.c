/*
 * dataflow.c: instantiating plans and driving them.
 *
 * Plan nodes come in topological order; each becomes one operator, and an
 * operator's output goes to the operator of the node that reads it: `down`,
 * and `fan` for the further readers of a node shared by several
 * (planner/plan_share.c), which get each chunk and watermark first. The sources are
 * the entry points of a step; the materialize operator is the root.
 *
 * Checkpoints: between steps no chunk is in flight, so the state tables
 * of all operators and the source offsets describe one consistent epoch.
 * rt_dataflow_checkpoint asks each operator to write what it keeps in
 * memory into its table and adds every table to the epoch's transaction.
 */
#include "runtime_int.h"
#include "clock.h"
#include "repart.h"
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct RtDataflow {
    RtCtx rc;
    WError err;
    const PlanView *plan;
    int n_ops;
    RtOp **ops;               /* parallel to plan->nodes */
    int n_sources;
    RtOp **sources;
    RtOp *root;
    RtPar *par;               /* a parallel view's shards 1..P-1 (parallel.c), or NULL */
    /* A split materialize (plan->changes): its instances' tables read as
     * one (rt_dataflow_view_table); root is then the ViewChanges operator. */
    StorTable *merged;
    /* A materialize with key groups (planner revision 6): its table (or the
     * merged one) read without the key-group prefix (stor_table_open_grouped),
     * so readers decode the keys they always did. */
    StorTable *grouped;
    /* EXPLAIN ANALYZE's window (analyze_sample): every op's counters, taken
     * at most once a second at the start of a step, the last
     * RT_ANALYZE_SAMPLES of them; samples[k * n_ops + i] is op i's in slot k. */
    RtOpCounters *samples;
    int64_t sample_us[RT_ANALYZE_SAMPLES];   /* clock_mono_us of slot k; 0 = empty */
    int next_sample;
};

/* Shards: 1 on one thread; shard 0 is df's own ops and sources. */
static int n_shards(const RtDataflow *df) { return df->par ? rt_par_shards(df->par) : 1; }
static RtOp **shard_ops(RtDataflow *df, int s) { return s ? rt_par_ops(df->par, s) : df->ops; }
static RtCtx *shard_rc(RtDataflow *df, int s) { return s ? rt_par_ctx(df->par, s) : &df->rc; }
static int shard_sources(RtDataflow *df, int s, RtOp ***out)
{
    if (!s) {
        *out = df->sources;
        return df->n_sources;
    }
    return rt_par_sources(df->par, s, out);
}

/* Each reader's call is timed (two clock reads per chunk, not per row): it
 * is the reader's busy time and the emitter's time blocked downstream, so an
 * operator's own time is busy_ns - down_ns (EXPLAIN ANALYZE). */
static int push_timed(RtOp *op, RtOp *to, Chunk *c)
{
    int64_t t0 = clock_mono_ns();
    int rc = to->vt->push(to, c);
    uint64_t dt = (uint64_t)(clock_mono_ns() - t0);
    (to->owner ? to->owner : to)->counters.busy_ns += dt;
    op->counters.down_ns += dt;
    return rc;
}

static int watermark_timed(RtOp *op, RtOp *to, int64_t wm)
{
    int64_t t0 = clock_mono_ns();
    int rc = to->vt->watermark(to, wm);
    uint64_t dt = (uint64_t)(clock_mono_ns() - t0);
    (to->owner ? to->owner : to)->counters.busy_ns += dt;
    op->counters.down_ns += dt;
    return rc;
}

int rt_emit(RtOp *op, Chunk *c)
{
    if (c->n_rows == 0)
        return 0;
    if (rt_cancelled(op->rc))
        return -1;
    op->counters.rows_out += (uint64_t)c->n_rows;
    for (int i = 0; i < op->n_fan; i++)
        op->fan[i]->counters.rows_in += (uint64_t)c->n_rows;
    if (op->down)
        op->down->counters.rows_in += (uint64_t)c->n_rows;
    /* Fan-out consumers get their own copy of the header: a receiver may
     * replace a chunk's arrays (never write into them), so a shared header
     * would change what the next consumer sees. */
    for (int i = 0; i < op->n_fan; i++) {
        Chunk *copy = arena_alloc(c->arena, sizeof *copy);
        *copy = *c;
        if (push_timed(op, op->fan[i], copy))
            return -1;
    }
    return op->down ? push_timed(op, op->down, c) : 0;
}

int rt_emit_watermark(RtOp *op, int64_t wm)
{
    /* RT_WM_IDLE is a message between shards, not a time. */
    if (wm != RT_WM_IDLE && wm > op->counters.wm_out)
        op->counters.wm_out = wm;
    for (int i = 0; i < op->n_fan; i++)
        if (op->fan[i]->vt->watermark && watermark_timed(op, op->fan[i], wm))
            return -1;
    return op->down ? watermark_timed(op, op->down, wm) : 0;
}

int rt_source_poll(RtOp *src, int timeout_ms, bool *did_work)
{
    int64_t t0 = clock_mono_ns();
    int rc = ((RtSource *)src)->src->poll(src, timeout_ms, did_work);
    src->counters.busy_ns += (uint64_t)(clock_mono_ns() - t0);
    return rc;
}

/* Ad hoc queries keep their state in temporary tables from this id range:
 * never checkpointed, so nothing of them reaches the disk. */
static _Atomic uint64_t next_temp_table = UINT64_C(1) << 62;

uint64_t rt_temp_table_id(void) { return atomic_fetch_add(&next_temp_table, 1); }

int rt_open_state(RtCtx *rc, uint64_t table_id, StorTable **out, WError *err)
{
    uint64_t id = rc->batch ? rt_temp_table_id() : table_id;
    if (!id)
        return werr(err, SQLSTATE_INTERNAL, 0, "an operator has no state table");
    return stor_table_open(rc->env->stor, id, out, err);
}

int rt_op_open_table(RtOp *op, WError *err) { return rt_open_state(op->rc, op->node->table_id, &op->table, err); }

static RtOp *make_op(RtCtx *rc, const PlanNode *n)
{
    switch (n->kind) {
    case PN_SOURCE: return rt_op_source_new(rc, n);
    case PN_WATERMARK: return rt_op_watermark_new(rc, n);
    case PN_PROJECT: return rt_op_project_new(rc, n);
    case PN_FILTER: return rt_op_filter_new(rc, n);
    case PN_WINDOW: return rt_op_window_new(rc, n);
    case PN_AGG: return rt_op_agg_new(rc, n);
    case PN_MATERIALIZE: return rt_op_materialize_new(rc, n);
    case PN_JOIN: return rt_op_join_new(rc, n);
    case PN_TOPN: return rt_op_topn_new(rc, n);
    case PN_VIEW_SCAN: return rt_op_view_scan_new(rc, n);
    case PN_VIEW_SOURCE: return rt_op_view_source_new(rc, n);
    case PN_VALUES: return n->table_id ? rt_op_values_stream_new(rc, n) : rt_op_values_new(rc, n);
    case PN_TABLE_WRITE: return rt_op_table_write_new(rc, n);
    case PN_TEMPORAL_JOIN: return rt_op_temporal_join_new(rc, n);
    case PN_UNION: return rt_op_union_new(rc, n);
    case PN_SETOP: return rt_op_setop_new(rc, n);
    case PN_SEMI_JOIN: return rt_op_semijoin_new(rc, n);
    case PN_RECURSIVE:
    case PN_WORK_TABLE: return rt_op_recursive_new(rc, n);
    case PN_EXCHANGE: return n->repartition ? rt_op_repart_new(rc, n) : rt_op_exchange_new(rc, n);
    case PN_VIEW_CHANGES: return rt_op_view_changes_new(rc, n);
    }
    werr(rc->err, SQLSTATE_INTERNAL, 0, "unknown plan node");
    return NULL;
}

/* Creates operators for nodes[0..n) and wires each to its reader. */
int rt_instantiate(RtCtx *rc, int n, PlanNode *const *nodes, RtOp **ops)
{
    for (int i = 0; i < n; i++) {
        if (!(ops[i] = make_op(rc, nodes[i])))
            return -1;
        ops[i]->counters.wm_out = TS_MINUS_INF;
        for (int k = 0; k < nodes[i]->n_inputs; k++)
            for (int j = 0; j < i; j++)
                if (nodes[j] == nodes[i]->inputs[k]) {
                    RtOp *to = ops[i]->vt->input ? ops[i]->vt->input(ops[i], k) : ops[i];
                    if (to != ops[i])
                        to->owner = ops[i];
                    if (!ops[j]->down) {
                        ops[j]->down = to;
                        continue;
                    }
                    /* A shared sub-plan (planner/plan_share.c): the further
                     * readers get each chunk and watermark too, before down. */
                    ops[j]->fan = xrealloc(ops[j]->fan, sizeof(RtOp *) * (size_t)(ops[j]->n_fan + 1));
                    ops[j]->fan[ops[j]->n_fan++] = to;
                }
    }
    return 0;
}

int rt_start_ops(int n, RtOp **ops)
{
    for (int i = 0; i < n; i++)
        if (ops[i]->vt->start && ops[i]->vt->start(ops[i]))
            return -1;
    return 0;
}

void rt_close_ops(int n, RtOp **ops)
{
    for (int i = n - 1; i >= 0; i--)
        if (ops[i]) {
            /* The readers of a shared node (rt_instantiate); a view's root
             * has sinks there, closed and freed by rt_dataflow_close first. */
            free(ops[i]->fan);
            ops[i]->fan = NULL;
            ops[i]->vt->close(ops[i]);
        }
}

/* The materialize instances' tables, one per shard, read as one. */
static int open_merged(RtDataflow *df)
{
    int at = -1;
    for (int i = 0; i < df->n_ops; i++)
        if (df->plan->nodes[i] == df->plan->root)
            at = i;
    int P = n_shards(df);
    StorTable **parts = xcalloc((size_t)P, sizeof *parts);
    for (int s = 0; s < P; s++)
        parts[s] = at >= 0 && shard_ops(df, s)[at] ? shard_ops(df, s)[at]->table : NULL;
    int rc = stor_table_open_merged(parts, P, &df->merged, &df->err);
    free(parts);
    return rc;
}

/* The view's rows without their key-group prefix (df->grouped). */
static int open_grouped(RtDataflow *df)
{
    StorTable *base = df->merged;
    for (int i = 0; i < df->n_ops && !base; i++)
        if (df->plan->nodes[i] == df->plan->root && df->ops[i])
            base = df->ops[i]->table;
    if (!base)
        return werr(&df->err, SQLSTATE_INTERNAL, 0, "a view's materialize without its table");
    return stor_table_open_grouped(base, df->plan->root->key_groups, &df->grouped, &df->err);
}

int rt_plan_repart_topics(const PlanView *plan, const char *cluster, char (*out)[256], int max)
{
    int n = 0;
    WError e = {0};
    for (int i = 0; cluster && plan->distributed && i < plan->n_nodes && n < max; i++)
        if (plan->nodes[i]->repartition &&
            !rt_repart_topic_name(out[n], sizeof out[n], cluster, plan->root->table_id, (uint32_t)plan->nodes[i]->id, &e))
            n++;
    return n;
}

/* A distributed view in a cluster that manages its source topic: the
 * node's source partitions and key groups (RtDist), else NULL (the view
 * runs whole here). Read once: the server reopens the view when they change. */
static RtDist *dist_of(const RtEnv *env, const PlanView *plan)
{
    if (!plan->distributed || !env || !env->cluster || !env->owned_partitions)
        return NULL;
    const PlanNode *src = NULL;
    for (int i = 0; i < plan->n_nodes && !src; i++)
        if (plan->nodes[i]->kind == PN_SOURCE)
            src = plan->nodes[i];
    const char *topic = src ? cat_option(src->source, "topic") : NULL;
    /* A source on a Kafka of its own is not the cluster's to assign. */
    if (!topic || cat_option(src->source, "properties.bootstrap.servers"))
        return NULL;
    RtDist *d = xcalloc(1, sizeof *d);
    d->src = xcalloc(RT_REPART_MAX_TASKS, sizeof(int32_t));
    d->kgs = xcalloc((size_t)plan->key_groups + 1, sizeof(int32_t));
    char topics[1][256];
    if (!topic || rt_plan_repart_topics(plan, env->cluster, topics, 1) != 1 ||
        (d->n_src = env->owned_partitions(env->ctx, topic, d->src, RT_REPART_MAX_TASKS)) < 0) {
        free(d->src);
        free(d->kgs);
        free(d);
        return NULL;
    }
    memcpy(d->topic, topics[0], sizeof d->topic);
    d->bootstrap = rt_source_bootstrap(src->source, env);
    /* Not managed yet (the work group has not subscribed it): none owned. */
    d->n_kgs = env->owned_partitions(env->ctx, d->topic, d->kgs, plan->key_groups);
    if (d->n_kgs < 0)
        d->n_kgs = 0;
    return d;
}

static void dist_free(RtDist *d)
{
    if (d) {
        free(d->src);
        free(d->kgs);
        free(d);
    }
}

/* The key groups the repartition exchange's last checkpoint owned and this
 * node does not own now: dropped from every keyed state table (their rows,
 * their state), so a later regain starts them clean from offset 0. */
static int drop_lost_kgs(RtDataflow *df)
{
    RtOp *rp = NULL;
    for (int i = 0; i < df->n_ops; i++)
        if (df->ops[i] && rt_op_is_repart_source(df->ops[i]))
            rp = df->ops[i];
    if (!rp)
        return 0;
    int G = df->plan->key_groups;
    int32_t *lost = xcalloc((size_t)G + 1, sizeof(int32_t));
    int n = rt_repart_lost_kgs(rp, lost, G, &df->err);
    for (int k = 0; k < n; k++)
        for (int i = 0; i < df->n_ops; i++) {
            RtOp *op = df->ops[i];
            if (!op->node->key_groups || op == rp || op->node->kind == PN_EXCHANGE)
                continue;
            if ((op->table && stor_kg_drop(op->table, lost[k], &df->err)) ||
                (op->table2 && stor_kg_drop(op->table2, lost[k], &df->err))) {
                n = -1;
                break;
            }
        }
    if (n > 0)
        wlog_info("cluster", "view %s: dropped %d key group%s this node no longer owns", df->plan->root->view_name, n,
                  n == 1 ? "" : "s");
    free(lost);
    return n < 0 ? -1 : 0;
}

int rt_dataflow_owned_kgs(RtDataflow *df, uint16_t *out, int max)
{
    int G = df->plan->key_groups, n = 0;
    if (df->rc.dist) {
        for (int i = 0; i < df->rc.dist->n_kgs && n < max; i++)
            out[n++] = (uint16_t)df->rc.dist->kgs[i];
        return n;
    }
    for (int k = 0; k < G && n < max; k++)
        out[n++] = (uint16_t)k;
    return n;
}

static bool same_ints(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na == nb && (!na || !memcmp(a, b, sizeof(int32_t) * (size_t)na));
}

bool rt_dataflow_assignment_changed(RtDataflow *df)
{
    if (!df->plan->distributed || df->rc.replay_of)
        return false;
    RtDist *now = dist_of(df->rc.env, df->plan), *was = df->rc.dist;
    bool changed = !now != !was ||
                   (now && (!same_ints(now->src, now->n_src, was->src, was->n_src) ||
                            !same_ints(now->kgs, now->n_kgs, was->kgs, was->n_kgs)));
    dist_free(now);
    return changed;
}

static void analyze_sample(RtDataflow *df, int64_t now_us);
static void sum_counters(RtDataflow *df, int i, RtOpCounters *out);

static int open_df(const RtEnv *env, const PlanView *plan, RtDataflow *replay_of, RtDataflow **out, WError *err)
{
    if (plan->parallelism > 1 && replay_of)
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0,
                    "feature not supported: VERIFY of a view with streaming_parallelism > 1");
    /* The live view holds this node's key groups only; a replay would read everything. */
    if (replay_of && replay_of->rc.dist)
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0,
                    "feature not supported: VERIFY of a view distributed over a cluster's nodes"),
               werr_hint(err, "This node holds only its key groups of the view; VERIFY a replicated view, or a "
                              "single weir's."),
               -1;
    RtDataflow *df = xcalloc(1, sizeof *df);
    df->plan = plan;
    df->rc.env = env;
    df->rc.batch = replay_of != NULL;
    df->rc.own_tz = true;
    df->rc.tz = plan->tz;
    df->rc.replay_of = replay_of;
    df->rc.err = &df->err;
    df->rc.chunk_arena = arena_new(1 << 20);
    df->rc.stats.watermark = TS_MINUS_INF;
    df->n_ops = plan->n_nodes;
    df->ops = xcalloc((size_t)df->n_ops, sizeof(RtOp *));
    df->sources = xcalloc((size_t)df->n_ops, sizeof(RtOp *));
    if (!replay_of)
        df->rc.dist = dist_of(env, plan);
    /* A parallel view: shard 0 is this dataflow's operators (every node);
     * the other shards' come next, and start before shard 0's, whose start
     * hooks may already send them rows. */
    if (plan->parallelism > 1)
        df->par = rt_par_new(plan, &df->rc, df->ops);
    if (rt_instantiate(&df->rc, plan->n_nodes, plan->nodes, df->ops) || (df->par && rt_par_open(df->par, &df->err))) {
        *err = df->err;
        rt_dataflow_close(df);
        return -1;
    }
    for (int i = 0; i < df->n_ops; i++) {
        if (plan->nodes[i]->kind == PN_SOURCE || plan->nodes[i]->kind == PN_VIEW_SOURCE ||
            plan->nodes[i]->kind == PN_TABLE_WRITE || rt_op_is_repart_source(df->ops[i]))
            df->sources[df->n_sources++] = df->ops[i];
        if (plan->nodes[i] == (plan->changes ? plan->changes : plan->root))
            df->root = df->ops[i];
    }
    if ((plan->changes && open_merged(df)) || drop_lost_kgs(df)) {
        *err = df->err;
        rt_dataflow_close(df);
        return -1;
    }
    if (plan->root->key_groups && open_grouped(df)) {
        *err = df->err;
        rt_dataflow_close(df);
        return -1;
    }
    if ((df->par && rt_par_start(df->par, &df->err)) || rt_start_ops(df->n_ops, df->ops)) {
        *err = df->err;
        rt_dataflow_close(df);
        return -1;
    }
    arena_reset(df->rc.chunk_arena);
    /* The first window starts at the open. */
    df->samples = xcalloc((size_t)RT_ANALYZE_SAMPLES * (size_t)df->n_ops, sizeof *df->samples);
    analyze_sample(df, clock_mono_us());
    *out = df;
    return 0;
}

/* Takes the counters of every op into the next slot of the ring when the
 * last sample is a second old (between steps: no shard is running). */
static void analyze_sample(RtDataflow *df, int64_t now_us)
{
    int last = (df->next_sample + RT_ANALYZE_SAMPLES - 1) % RT_ANALYZE_SAMPLES;
    if (df->sample_us[last] && now_us - df->sample_us[last] < 1000000)
        return;
    int k = df->next_sample;
    for (int i = 0; i < df->n_ops; i++)
        sum_counters(df, i, &df->samples[(size_t)k * (size_t)df->n_ops + (size_t)i]);
    df->sample_us[k] = now_us;
    df->next_sample = (k + 1) % RT_ANALYZE_SAMPLES;
}

int rt_dataflow_step(RtDataflow *df, int timeout_ms, bool *did_work, WError *err)
{
    *did_work = false;
    analyze_sample(df, clock_mono_us());
    if (df->par)
        return rt_par_step(df->par, timeout_ms, did_work, err);
    int rcode = 0;
    for (int i = 0; i < df->n_sources && !rcode; i++)
        /* A distributed view's repartition reader waits a little too: its
         * source may read no partition on this node. */
        rcode = rt_source_poll(df->sources[i],
                               i == 0                                   ? timeout_ms
                               : rt_op_is_repart_source(df->sources[i]) ? (timeout_ms < 20 ? timeout_ms : 20)
                                                                        : 0,
                               did_work);
    /* Every chunk of this step has gone all the way down. */
    arena_reset(df->rc.chunk_arena);
    if (rcode) {
        *err = df->err;
        return -1;
    }
    return 0;
}

int rt_dataflow_open(const RtEnv *env, const PlanView *plan, RtDataflow **out, WError *err)
{
    return open_df(env, plan, NULL, out, err);
}

/* Why recomputing plan from its upstream views' current rows (instead of
 * their changelogs as they happened) may not give the view's contents: a
 * node whose result depends on the order or timing of its input. NULL when
 * every node is a function of its input multisets. */
static const char *order_dependent(const PlanView *plan)
{
    for (int i = 0; i < plan->n_nodes; i++) {
        const PlanNode *n = plan->nodes[i];
        switch (n->kind) {
        case PN_WINDOW:
            return "it has a window function (windows close by the watermark, which follows the order of changes)";
        case PN_AGG:
            if (n->win_group_idx >= 0 || n->session || n->pane_us || n->emit == PLAN_EMIT_ON_CLOSE)
                return "it has a windowed aggregation (closed by the watermark)";
            for (int k = 0; k < n->n_aggs; k++)
                if (n->aggs[k].kind == AGG_STRING_AGG || n->aggs[k].kind == AGG_FIRST || n->aggs[k].kind == AGG_LAST)
                    return "it uses string_agg, first_value or last_value (they depend on arrival order)";
            break;
        case PN_JOIN:
            if (n->interval)
                return "it has an interval join (its state is dropped by the watermark)";
            break;
        case PN_TEMPORAL_JOIN:
            return "it has a temporal join (it answers with the versions present when each row came)";
        default:
            break;
        }
    }
    return NULL;
}

int rt_dataflow_replay_open(const RtEnv *env, const PlanView *plan, RtDataflow *live, RtDataflow **out, WError *err)
{
    bool reads_views = false;
    for (int i = 0; i < plan->n_nodes; i++) {
        const PlanNode *n = plan->nodes[i];
        const char *conn = n->kind == PN_SOURCE ? cat_option(n->source, "connector") : NULL;
        if (n->kind == PN_SOURCE && n->source->proctime_wm)
            return werr(err, SQLSTATE_NOT_SUPPORTED, 0,
                        "feature not supported: VERIFY of a view over processing time (a PROCTIME() column): a "
                        "recomputation reads the records at another time");
        if (n->kind == PN_TABLE_WRITE || (n->kind == PN_SOURCE && (!conn || strcasecmp(conn, "kafka"))))
            return werr(err, SQLSTATE_NOT_SUPPORTED, 0, "feature not supported: VERIFY of a view that reads %s",
                        n->kind == PN_SOURCE ? "a non-Kafka source" : "a table's own input");
        reads_views |= n->kind == PN_VIEW_SOURCE;
    }
    /* Tables and views keep no log: the replay reads their current rows,
     * which is exact only for an order-independent plan. */
    const char *why = reads_views ? order_dependent(plan) : NULL;
    if (why)
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0,
                    "feature not supported: VERIFY of a view over a table or another view when %s: it is recomputed "
                    "from their current rows, not from the changes in the order they came", why);
    return open_df(env, plan, live, out, err);
}

RtOp *rt_dataflow_op_of(RtDataflow *df, const PlanNode *n)
{
    for (int i = 0; i < df->n_ops; i++)
        if (df->plan->nodes[i] == n)
            return df->ops[i];
    return NULL;
}

void rt_dataflow_positions(RtDataflow *df, Buf *out)
{
    for (int s = 0; s < n_shards(df); s++) {
        RtOp **srcs;
        int ns = shard_sources(df, s, &srcs);
        for (int i = 0; i < ns; i++) {
            const PlanNode *n = srcs[i]->node;
            if (n->kind != PN_SOURCE)
                continue;
            buf_printf(out, "%s%s ", out->len ? "; " : "", n->source ? n->source->name : "");
            rt_source_positions(srcs[i], out);
        }
    }
}

int rt_dataflow_source_progress(RtDataflow *df, RtSourceProgress *out, int max)
{
    int n = 0;
    for (int s = 0; s < n_shards(df); s++) {
        RtOp **srcs;
        int ns = shard_sources(df, s, &srcs);
        for (int i = 0; i < ns && n < max; i++)
            n += rt_source_progress(srcs[i], out + n, max - n);
    }
    return n;
}

bool rt_dataflow_replay_order_matters(RtDataflow *df)
{
    bool late = false, multi = false;
    for (int i = 0; i < df->n_ops; i++) {
        const PlanNode *n = df->plan->nodes[i];
        late |= (n->kind == PN_WINDOW && n->late_check) || n->kind == PN_JOIN || n->kind == PN_TEMPORAL_JOIN ||
                (n->kind == PN_AGG && n->win_kind == WIN_SESSION && n->win_group_idx >= 0);
        multi |= rt_source_partitions(df->ops[i]) > 1;
    }
    return late && multi;
}

RtOp *rt_dataflow_root(RtDataflow *df) { return df->root; }

RtOp *rt_dataflow_table_input(RtDataflow *df)
{
    for (int i = 0; i < df->n_sources; i++)
        if (df->sources[i]->node->kind == PN_TABLE_WRITE)
            return df->sources[i];
    return NULL;
}

void rt_dataflow_reset_arena(RtDataflow *df) { arena_reset(df->rc.chunk_arena); }

void rt_dataflow_add_fan(RtDataflow *df, RtOp *op)
{
    RtOp *r = df->root;
    r->fan = xrealloc(r->fan, sizeof(RtOp *) * (size_t)(r->n_fan + 1));
    r->fan[r->n_fan++] = op;
}

void rt_dataflow_remove_fan(RtDataflow *df, RtOp *op)
{
    RtOp *r = df->root;
    for (int i = 0; i < r->n_fan; i++)
        if (r->fan[i] == op) {
            memmove(&r->fan[i], &r->fan[i + 1], sizeof(RtOp *) * (size_t)(r->n_fan - i - 1));
            r->n_fan--;
            return;
        }
}

/* Plan operators of every shard, then the sinks hanging off the root; op_at
 * is NULL where a node has no instance in a shard. */
static int n_all(RtDataflow *df) { return df->n_ops * n_shards(df) + (df->root ? df->root->n_fan : 0); }
static RtOp *op_at(RtDataflow *df, int i)
{
    int all_ops = df->n_ops * n_shards(df);
    if (i >= all_ops)
        return df->root->fan[i - all_ops];
    return shard_ops(df, i / df->n_ops)[i % df->n_ops];
}

void rt_dataflow_committed(RtDataflow *df, uint64_t epoch)
{
    for (int i = 0; i < n_all(df); i++) {
        RtOp *op = op_at(df, i);
        if (op && op->vt->committed)
            op->vt->committed(op, epoch);
    }
    rt_bad_records_committed(&df->rc, epoch);
}

int rt_dataflow_checkpoint(RtDataflow *df, StorCheckpoint *ck, uint64_t epoch, WError *err)
{
    if (rt_bad_records_checkpoint(&df->rc, ck, epoch, err))
        return -1;
    for (int i = 0; i < n_all(df); i++) {
        RtOp *op = op_at(df, i);
        if (!op)
            continue;
        if (op->vt->flush_state && op->vt->flush_state(op, epoch)) {
            *err = *op->rc->err;
            return -1;
        }
        if (op->table && stor_checkpoint_add_table(ck, op->table, err))
            return -1;
        if (op->table2 && stor_checkpoint_add_table(ck, op->table2, err))
            return -1;
    }
    return 0;
}

int rt_dataflow_flush_target(RtDataflow *df, WError *err)
{
    for (int s = 0; s < n_shards(df); s++) {
        RtOp **srcs;
        int ns = shard_sources(df, s, &srcs);
        for (int i = 0; i < ns; i++)
            if (((RtSource *)srcs[i])->src->flush_target(srcs[i], err))
                return -1;
    }
    return 0;
}

bool rt_dataflow_flushed(RtDataflow *df)
{
    for (int s = 0; s < n_shards(df); s++) {
        RtOp **srcs;
        int ns = shard_sources(df, s, &srcs);
        for (int i = 0; i < ns; i++)
            if (!((RtSource *)srcs[i])->src->flushed(srcs[i]))
                return false;
    }
    return true;
}

StorTable *rt_dataflow_view_table(RtDataflow *df)
{
    if (df->grouped)
        return df->grouped;
    if (df->merged)
        return df->merged;
    return df->root ? df->root->table : NULL;
}

StorTable *rt_dataflow_view_store(RtDataflow *df)
{
    if (df->merged)
        return df->merged;
    return df->root ? df->root->table : NULL;
}

StorTable *rt_dataflow_find_table(RtDataflow *df, uint64_t table_id)
{
    for (int i = 0; i < df->n_ops; i++) {
        const PlanNode *n = df->plan->nodes[i];
        if (df->ops[i]->table && (n->table_id == table_id || n->late_table_id == table_id))
            return df->ops[i]->table;
    }
    return NULL;
}

void rt_dataflow_stats(RtDataflow *df, RtStats *out)
{
    *out = df->rc.stats;
    /* Shards: counts add up; the watermark is the least of those that have one. */
    for (int s = 1; s < n_shards(df); s++) {
        const RtStats *x = &shard_rc(df, s)->stats;
        out->records_in += x->records_in;
        out->bad_records += x->bad_records;
        out->rows_out += x->rows_out;
        out->late_rows += x->late_rows;
        out->eval_errors += x->eval_errors;
        out->offset_gaps += x->offset_gaps;
        if (x->watermark != TS_MINUS_INF && (out->watermark == TS_MINUS_INF || x->watermark < out->watermark))
            out->watermark = x->watermark;
        if (!out->last_error[0] && x->last_error[0])
            memcpy(out->last_error, x->last_error, sizeof out->last_error);
    }
}

void rt_dataflow_set_name(RtDataflow *df, const char *name)
{
    for (int s = 0; s < n_shards(df); s++)
        shard_rc(df, s)->name = name;
}

uint64_t rt_dataflow_dirty_bytes(RtDataflow *df)
{
    uint64_t sum = 0;
    for (int i = 0; i < n_all(df); i++) {
        RtOp *op = op_at(df, i);
        if (!op)
            continue;
        if (op->table)
            sum += stor_table_dirty_bytes(op->table);
        if (op->table2)
            sum += stor_table_dirty_bytes(op->table2);
    }
    return sum;
}

bool rt_dataflow_failed_record(RtDataflow *df, RtFailedRecord *out)
{
    for (int s = 0; s < n_shards(df); s++)
        if (rt_dataflow_failed_record_rc(shard_rc(df, s), out))
            return true;
    return false;
}

bool rt_dataflow_dead_letters_pending(RtDataflow *df) { return rt_bad_records_pending(&df->rc); }

void rt_dataflow_skip_record(RtDataflow *df, const char *source, int32_t partition, int64_t offset)
{
    for (int s = 0; s < n_shards(df); s++)
        rt_dataflow_skip_record_rc(shard_rc(df, s), source, partition, offset);
}

/* Copies up to cap-1 bytes of src into dst as text safe to show anywhere:
 * well-formed UTF-8 sequences stay, control and invalid bytes become '?'. */
static void excerpt(char *dst, size_t cap, const char *src, size_t len)
{
    size_t w = 0;
    const unsigned char *p = (const unsigned char *)src;
    for (size_t i = 0; i < len && w + 1 < cap;) {
        unsigned char b = p[i];
        size_t n = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 && b >= 0xC2 ? 2 : (b & 0xF0) == 0xE0 ? 3
                 : (b & 0xF8) == 0xF0 && b <= 0xF4 ? 4 : 0;
        bool ok = n > 0 && i + n <= len && w + n < cap;
        for (size_t k = 1; ok && k < n; k++)
            ok = (p[i + k] & 0xC0) == 0x80;
        if (n == 1)
            ok = b >= 0x20 && b != 0x7F;
        if (ok) {
            memcpy(dst + w, p + i, n);
            w += n;
            i += n;
        } else {
            dst[w++] = '?';
            i++;
        }
    }
    dst[w] = 0;
}

/* The next entry of the ring of kept source errors (weir_source_errors),
 * filled with what both kinds share; the caller writes the message. */
static RtSourceError *source_error_entry(RtCtx *rc, const CatRelation *src, int32_t partition, int64_t offset)
{
    if (!rc->src_errs)
        rc->src_errs = xcalloc(RT_SOURCE_ERRORS_KEPT, sizeof *rc->src_errs);
    RtSourceError *e = &rc->src_errs[rc->n_src_errs++ % RT_SOURCE_ERRORS_KEPT];
    e->at_us = clock_wall_us();
    snprintf(e->source, sizeof e->source, "%s", src && src->name ? src->name : "");
    e->partition = partition;
    e->offset = offset;
    e->record[0] = 0;
    return e;
}

int rt_source_error(RtOp *op, const CatRelation *src, int32_t partition, int64_t offset, const char *record,
                    size_t record_len, const char *fmt, ...)
{
    RtCtx *rc = op->rc;
    rc->stats.bad_records++;
    op->counters.bad_records++;
    RtSourceError *e = source_error_entry(rc, src, partition, offset);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    excerpt(e->record, sizeof e->record, record ? record : "", record ? record_len : 0);
    snprintf(rc->stats.last_error, sizeof rc->stats.last_error, "%s", e->message);
    return rt_bad_record_route(op, src, partition, offset, e->message);
}

void rt_source_gap(RtOp *op, const CatRelation *src, int32_t partition, int64_t from, int64_t to, const char *fmt,
                   ...)
{
    (void)to;
    RtCtx *rc = op->rc;
    rc->stats.offset_gaps++;
    RtSourceError *e = source_error_entry(rc, src, partition, from);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    snprintf(rc->stats.last_error, sizeof rc->stats.last_error, "%s", e->message);
    wlog_info("dataflow", "%s", e->message);
}

int rt_dataflow_source_errors(RtDataflow *df, RtSourceError *out, int max)
{
    int n = 0;
    for (int s = 0; s < n_shards(df); s++) {
        const RtCtx *rc = shard_rc(df, s);
        uint64_t kept = rc->n_src_errs < RT_SOURCE_ERRORS_KEPT ? rc->n_src_errs : RT_SOURCE_ERRORS_KEPT;
        for (uint64_t k = rc->n_src_errs - kept; k < rc->n_src_errs && n < max; k++)
            out[n++] = rc->src_errs[k % RT_SOURCE_ERRORS_KEPT];
    }
    return n;
}

int rt_dataflow_watermarks(RtDataflow *df, RtPartitionWatermark *out, int max)
{
    int n = 0;
    for (int s = 0; s < n_shards(df); s++) {
        RtOp **ops = shard_ops(df, s);
        for (int i = 0; i < df->n_ops && n < max; i++)
            if (ops[i] && ops[i]->partitions)
                n += ops[i]->partitions(ops[i], out + n, max - n);
    }
    return n;
}

/* Plan node i's counters, its instances added up (open_windows left -1). */
static void sum_counters(RtDataflow *df, int i, RtOpCounters *out)
{
    memset(out, 0, sizeof *out);
    out->open_windows = -1;
    out->wm_out = TS_MINUS_INF;
    if (i < 0 || i >= df->n_ops)
        return;
    for (int s = 0; s < n_shards(df); s++) {
        RtOp *op = shard_ops(df, s)[i];
        if (!op)
            continue;
        const RtOpCounters *c = &op->counters;
        out->rows_in += c->rows_in;
        out->rows_out += c->rows_out;
        out->late_rows += c->late_rows;
        out->bad_records += c->bad_records;
        out->expired_keys += c->expired_keys;
        out->busy_ns += c->busy_ns;
        out->down_ns += c->down_ns;
        out->wait_ns += c->wait_ns;
        out->probes += c->probes;
        out->probe_hits += c->probe_hits;
        /* The least of the instances that emitted one, as for the view's. */
        if (c->wm_out != TS_MINUS_INF && (out->wm_out == TS_MINUS_INF || c->wm_out < out->wm_out))
            out->wm_out = c->wm_out;
    }
}

void rt_dataflow_op_counters(RtDataflow *df, int i, RtOpCounters *out)
{
    sum_counters(df, i, out);
    if (i < 0 || i >= df->n_ops)
        return;
    for (int s = 0; s < n_shards(df); s++) {
        RtOp *op = shard_ops(df, s)[i];
        if (op && op->open_windows) {
            int64_t w = op->open_windows(op);
            out->open_windows = out->open_windows < 0 ? w : out->open_windows + w;
        }
    }
}

uint64_t rt_dataflow_state_bytes(RtDataflow *df, int i)
{
    if (i < 0 || i >= df->n_ops)
        return 0;
    uint64_t sum = 0;
    for (int s = 0; s < n_shards(df); s++) {
        RtOp *op = shard_ops(df, s)[i];
        if (op)
            sum += (op->table ? stor_table_size_bytes(op->table) : 0) +
                   (op->table2 ? stor_table_size_bytes(op->table2) : 0);
    }
    return sum;
}

int rt_dataflow_analyze(RtDataflow *df, int i, int64_t now, RtOpAnalyze *out)
{
    memset(out, 0, sizeof *out);
    if (i < 0 || i >= df->n_ops || !df->samples)
        return -1;
    /* The newest sample at least RT_ANALYZE_WINDOW_S old, else the oldest. */
    int best = -1;
    for (int k = 0; k < RT_ANALYZE_SAMPLES; k++) {
        int64_t t = df->sample_us[k];
        if (!t)
            continue;
        bool old_enough = now - t >= (int64_t)RT_ANALYZE_WINDOW_S * 1000000;
        if (best < 0) {
            best = k;
            continue;
        }
        int64_t b = df->sample_us[best];
        bool best_old = now - b >= (int64_t)RT_ANALYZE_WINDOW_S * 1000000;
        if (old_enough ? (!best_old || t > b) : (!best_old && t < b))
            best = k;
    }
    sum_counters(df, i, &out->now);
    out->then = df->samples[(size_t)best * (size_t)df->n_ops + (size_t)i];
    out->window_us = now - df->sample_us[best];
    out->state_entries = -1;
    for (int s = 0; s < n_shards(df); s++) {
        RtOp *op = shard_ops(df, s)[i];
        StorTable *ts[2] = {op ? op->table : NULL, op ? op->table2 : NULL};
        for (int k = 0; k < 2; k++) {
            if (!ts[k])
                continue;
            out->state_bytes += stor_table_size_bytes(ts[k]);
            out->state_entries = (out->state_entries < 0 ? 0 : out->state_entries) +
                                 (int64_t)stor_table_committed_entries(ts[k]);
            out->state_pending += stor_table_dirty_count(ts[k]);
        }
    }
    return 0;
}

bool rt_dataflow_expiry_due(RtDataflow *df)
{
    int64_t now = INT64_MIN;
    for (int i = 0; i < df->n_ops * n_shards(df); i++) {
        RtOp *op = op_at(df, i);
        if (!op || !op->expiry_due)
            continue;
        if (now == INT64_MIN)
            now = rt_proc_now_us();
        /* An error (-1) shows again, and is reported, at the checkpoint's sweep. */
        if (op->expiry_due(op, now) != 0)
            return true;
    }
    return false;
}

void rt_dataflow_close(RtDataflow *df)
{
    if (!df)
        return;
    /* Sinks first: they read the root's table while attaching, never after. */
    while (df->root && df->root->n_fan) {
        RtOp *s = df->root->fan[df->root->n_fan - 1];
        df->root->n_fan--;
        s->vt->close(s);
    }
    if (df->root) {
        free(df->root->fan);
        df->root->fan = NULL;
    }
    stor_table_close(df->grouped); /* before the tables it reads */
    stor_table_close(df->merged);
    /* Workers stop first; the other shards close before shard 0, whose
     * operators they never reference. */
    rt_par_free(df->par);
    rt_close_ops(df->n_ops, df->ops);
    rt_bad_records_free(&df->rc);
    free(df->rc.src_errs);
    free(df->ops);
    free(df->samples);
    free(df->sources);
    dist_free(df->rc.dist);
    arena_free(df->rc.chunk_arena);
    free(df);
}

int rt_dataflow_drop_state(StorEnv *stor, const PlanView *plan, WError *err)
{
    for (int i = 0; i < plan->n_nodes; i++) {
        const PlanNode *n = plan->nodes[i];
        if (n->table_id && stor_table_drop(stor, n->table_id, err))
            return -1;
        /* A parallel node's other instances' tables. */
        for (int k = 2; n->shard_tables && k < 2 * plan->parallelism; k++)
            if (n->shard_tables[k] && stor_table_drop(stor, n->shard_tables[k], err))
                return -1;
    }
    return 0;
}
