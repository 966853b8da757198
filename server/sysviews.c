/*
 * sysviews.c: the weir_* system views, computed when a statement names them.
 *
 *   weir_views        one row per materialized view: records read, bad records
 *                     skipped, late rows dropped, evaluation errors, changes
 *                     applied, the watermark and the last error
 *   weir_sinks        one row per sink: delivery state, last delivered epoch,
 *                     epochs waiting, changes delivered, last error
 *   weir_checkpoints  the last checkpoints: epoch, start, duration, size
 *   weir_state        state size per stateful operator
 *   weir_operators    per operator: rows in and out, late rows, bad records,
 *                     windows held open, keys expired by state_ttl
 *   weir_watermarks   per view, source and partition: the watermark, the
 *                     largest event time, lag behind the clock, idleness
 *   weir_source_errors the last source records each view could not use
 *   weir_verifications the last VERIFY result per view (cmd_verify.c)
 *   weir_backfills    per view created WITH (backfill_from = ...), source and
 *                     partition: read position, end offset, lag, watermark,
 *                     and whether the whole view has caught up
 *   weir_cluster_assignment  per node, its partitions in the cluster's work group
 *   weir_cluster      the nodes of this weir's cluster: alive or gone, state,
 *                     version, addresses, catalog position and lag
 *
 * They are ordinary relations to the planner (CAT_SYSTEM with their rows),
 * built in the statement's arena under the engine lock, so one query sees
 * one consistent moment.
 */
#include "cluster.h"
#include "group.h"
#include "commands.h"
#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct SysBuild {
    Arena *a;
    CatRelation *r;
    int cap;
} SysBuild;

static CatRelation *sys_new(Arena *a, const char *name, int n, const char *const *names, const TypeId *types)
{
    CatRelation *r = arena_zalloc(a, sizeof *r);
    r->kind = CAT_SYSTEM;
    r->name = name;
    r->n_cols = n;
    r->col_names = (const char **)names;
    r->col_types = types;
    r->wm_col = -1;
    r->wm_delay_us = -1;
    r->append_only = true;
    return r;
}

static Value *sys_row(SysBuild *b)
{
    CatRelation *r = b->r;
    if (r->n_rows == b->cap) {
        int cap = b->cap ? b->cap * 2 : 16;
        Value **rows = arena_alloc(b->a, sizeof(Value *) * (size_t)cap);
        if (r->n_rows)
            memcpy(rows, r->rows, sizeof(Value *) * (size_t)r->n_rows);
        r->rows = rows;
        b->cap = cap;
    }
    Value *row = arena_zalloc(b->a, sizeof(Value) * (size_t)r->n_cols);
    r->rows[r->n_rows++] = row;
    return row;
}

static Value text(Arena *a, const char *s)
{
    if (!s)
        return value_null(TYPE_TEXT);
    return value_str(TYPE_TEXT, arena_strdup(a, s), strlen(s));
}

static const CatRelation *views(Engine *e, Arena *a)
{
    static const char *names[] = {"name", "running", "records_in", "bad_records", "late_rows", "eval_errors",
                                  "changes", "watermark", "last_error", "state"};
    static const TypeId types[] = {TYPE_TEXT, TYPE_BOOL, TYPE_INT8, TYPE_INT8, TYPE_INT8,
                                   TYPE_INT8, TYPE_INT8, TYPE_TIMESTAMP, TYPE_TEXT, TYPE_TEXT};
    SysBuild b = {a, sys_new(a, "weir_views", 10, names, types), 0};
    CAT_FOREACH(e->cat, CAT_ANY, o) {
        if ((o->kind != CAT_VIEW && o->kind != CAT_TABLE) || o->view.late_of)
            continue;
        Value *row = sys_row(&b);
        RtStats st = {0};
        st.watermark = TS_MINUS_INF;
        if (o->flow.df)
            rt_dataflow_stats(o->flow.df, &st);
        row[0] = text(a, o->name);
        row[1] = value_bool(o->flow.df != NULL);
        row[2] = value_int(TYPE_INT8, (int64_t)st.records_in);
        row[3] = value_int(TYPE_INT8, (int64_t)st.bad_records);
        row[4] = value_int(TYPE_INT8, (int64_t)st.late_rows);
        row[5] = value_int(TYPE_INT8, (int64_t)st.eval_errors);
        row[6] = value_int(TYPE_INT8, (int64_t)st.rows_out);
        row[7] = st.watermark == TS_MINUS_INF ? value_null(TYPE_TIMESTAMP) : value_int(TYPE_TIMESTAMP, st.watermark);
        row[8] = !o->flow.df && o->flow.stop_error[0] ? text(a, o->flow.stop_error)
               : st.last_error[0]            ? text(a, st.last_error)
                                             : value_null(TYPE_TEXT);
        /* running; paused: over --state-memory-limit until a checkpoint
         * succeeds; failed: stopped at a bad record (on_error = 'fail') or its topic was deleted or shrunk, waits
         * for RESUME; stopped: its dataflow failed or cannot start, retried every 2 s. */
        row[9] = text(a, o->flow.df ? (e->paused ? "paused" : "running") : o->flow.failed ? "failed" : "stopped");
    }
    return b.r;
}

/* weir_cluster: the nodes of this weir's cluster, as their heartbeats in
 * the nodes topic describe them (cluster.c); outside a cluster one row for
 * this process, the cluster of one. alive: a heartbeat within
 * CLUSTER_GONE_MS and not "stopped" (a node's last heartbeat at a clean
 * shutdown); "gone" otherwise. This node's own row says "cut off" while its
 * heartbeats cannot be delivered. catalog_lag: records of the catalog topic the node
 * has not applied. catalog_agrees: its catalog digest equals this node's
 * (NULL when the two are at different positions of the catalog topic).
 * work_partitions: how many partitions the node holds in the work group
 * (weir_cluster_assignment lists them); NULL before its first assignment.
 * key_groups: per distributed view, the key groups the node holds
 * (view_key_groups); NULL when none. */
/* A node's key groups per distributed view, from its work text ("topic:0,3,6
 * t2:1", cluster.c work_text): "view: 0,2,4; view2: 1" for each view whose
 * repartition topic it holds partitions of (phase 2). Engine lock held. */
static Value view_key_groups(Engine *e, Arena *a, const char *work)
{
    Buf kb = BUF_INIT;
    CAT_FOREACH(e->cat, CAT_KINDS(CAT_VIEW), o) {
        char rp[1][256];
        if (!o->flow.plan || rt_plan_repart_topics(o->flow.plan, cluster_name(e->cluster), rp, 1) != 1)
            continue;
        size_t tl = strlen(rp[0]);
        for (const char *p = work; (p = strstr(p, rp[0])); p += tl) {
            if ((p != work && p[-1] != ' ') || p[tl] != ':')
                continue;
            const char *list = p + tl + 1;
            buf_printf(&kb, "%s%s: %.*s", kb.len ? "; " : "", o->name, (int)strcspn(list, " "), list);
            break;
        }
    }
    Value v = kb.len ? text(a, kb.data) : value_null(TYPE_TEXT);
    buf_free(&kb);
    return v;
}

static const CatRelation *cluster(Engine *e, Arena *a)
{
    static const char *names[] = {"cluster", "node_id", "self", "alive", "state", "version", "postgres_address",
                                  "http_address", "started_at", "last_heartbeat", "catalog_applied",
                                  "catalog_lag", "instance", "catalog_digest", "catalog_agrees", "work_partitions",
                                  "key_groups"};
    static const TypeId types[] = {TYPE_TEXT, TYPE_TEXT, TYPE_BOOL, TYPE_BOOL, TYPE_TEXT, TYPE_TEXT, TYPE_TEXT,
                                   TYPE_TEXT, TYPE_TIMESTAMPTZ, TYPE_TIMESTAMPTZ, TYPE_INT8, TYPE_INT8, TYPE_TEXT,
                                   TYPE_TEXT, TYPE_BOOL, TYPE_INT4, TYPE_TEXT};
    SysBuild b = {a, sys_new(a, "weir_cluster", 17, names, types), 0};
    if (!e->cluster) {
        Value *row = sys_row(&b);
        row[0] = value_null(TYPE_TEXT);
        row[1] = value_null(TYPE_TEXT);
        row[2] = value_bool(true);
        row[3] = value_bool(true);
        row[4] = text(a, "standalone");
        for (int k = 5; k < 17; k++)
            row[k] = value_null(types[k]);
        return b.r;
    }
    ClusterNode *nodes;
    int64_t end = 0;
    int n = cluster_nodes(e->cluster, &nodes, &end);
    nodes[0].catalog_next = e->catalog_next; /* with the digest, under the engine lock */
    nodes[0].catalog_digest = cluster_catalog_digest(e);
    int64_t now = clock_wall_us();
    for (int i = 0; i < n; i++) {
        const ClusterNode *nd = &nodes[i];
        bool stopped = !nd->self && !strcmp(nd->state, "stopped");
        bool alive = nd->self || (!stopped && now - nd->sent_us < (int64_t)CLUSTER_GONE_MS * 1000);
        Value *row = sys_row(&b);
        row[0] = text(a, cluster_name(e->cluster));
        row[1] = text(a, nd->node_id);
        row[2] = value_bool(nd->self);
        row[3] = value_bool(alive);
        row[4] = text(a, alive || stopped ? nd->state : "gone");
        row[5] = text(a, nd->version);
        row[6] = nd->pg_addr[0] ? text(a, nd->pg_addr) : value_null(TYPE_TEXT);
        row[7] = nd->http_addr[0] ? text(a, nd->http_addr) : value_null(TYPE_TEXT);
        row[8] = value_int(TYPE_TIMESTAMPTZ, nd->started_us);
        row[9] = value_int(TYPE_TIMESTAMPTZ, nd->sent_us);
        row[10] = value_int(TYPE_INT8, nd->catalog_next);
        row[11] = value_int(TYPE_INT8, end > nd->catalog_next ? end - nd->catalog_next : 0);
        row[12] = text(a, nd->instance);
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)nd->catalog_digest);
        row[13] = text(a, hex);
        /* Comparable only at the same position: NULL while one is behind. */
        row[14] = nd->catalog_next == nodes[0].catalog_next ? value_bool(nd->catalog_digest == nodes[0].catalog_digest)
                                                            : value_null(TYPE_BOOL);
        row[15] = nd->work_partitions >= 0 ? value_int(TYPE_INT4, nd->work_partitions) : value_null(TYPE_INT4);
        row[16] = view_key_groups(e, a, nd->work);
    }
    free(nodes);
    return b.r;
}

/* weir_cluster_assignment: per node, the partitions it holds in the
 * cluster's work group (_weir.NAME.work, runtime/group.h), one row each:
 * this node's live, the others' from their last heartbeat (a node gone
 * keeps its last list until its session expires and the others report
 * its partitions). Empty outside a cluster and for a node with no
 * assignment yet. A list cut at CLUSTER_WORK_TEXT_MAX ends in a row with
 * topic '...' and partition NULL: weir_cluster's work_partitions has the
 * whole count. Distributed views obey the assignment (a view's key groups
 * are the partitions of its repartition topic); replicated views run every
 * partition. */
static const CatRelation *cluster_assignment(Engine *e, Arena *a)
{
    static const char *names[] = {"node_id", "self", "alive", "topic", "partition"};
    static const TypeId types[] = {TYPE_TEXT, TYPE_BOOL, TYPE_BOOL, TYPE_TEXT, TYPE_INT4};
    SysBuild b = {a, sys_new(a, "weir_cluster_assignment", 5, names, types), 0};
    if (!e->cluster)
        return b.r;
    ClusterNode *nodes;
    int64_t end = 0;
    int n = cluster_nodes(e->cluster, &nodes, &end);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    for (int i = 0; i < n; i++) {
        const ClusterNode *nd = &nodes[i];
        bool alive = nd->self || (strcmp(nd->state, "stopped") != 0 && now - nd->sent_us < (int64_t)CLUSTER_GONE_MS * 1000);
        /* "topic:0,3,6 t2:1" (cluster.c work_text) */
        char topic[RT_GROUP_TOPIC_MAX + 1] = "";
        for (const char *p = nd->work; *p;) {
            const char *q = p + strcspn(p, ":, ");
            if (*q == ':') {
                snprintf(topic, sizeof topic, "%.*s", (int)(q - p), p);
                p = q + 1;
                continue;
            }
            Value *row = sys_row(&b);
            row[0] = text(a, nd->node_id);
            row[1] = value_bool(nd->self);
            row[2] = value_bool(alive);
            if (!strncmp(p, "...", 3)) {
                row[3] = text(a, "...");
                row[4] = value_null(TYPE_INT4);
                break;
            }
            row[3] = text(a, topic);
            row[4] = value_int(TYPE_INT4, atoi(p));
            p = *q ? q + 1 : q;
        }
    }
    free(nodes);
    return b.r;
}

static const CatRelation *sinks(Engine *e, Arena *a)
{
    static const char *names[] = {"name", "view", "connector", "state", "delivered_epoch", "pending_epochs",
                                  "changes_delivered", "last_error", "rows_rejected"};
    static const TypeId types[] = {TYPE_TEXT, TYPE_TEXT, TYPE_TEXT, TYPE_TEXT,
                                   TYPE_INT8, TYPE_INT8, TYPE_INT8, TYPE_TEXT, TYPE_INT8};
    SysBuild b = {a, sys_new(a, "weir_sinks", 9, names, types), 0};
    CAT_FOREACH(e->cat, CAT_ANY, o) {
        if (o->kind != CAT_SINK)
            continue;
        Value *row = sys_row(&b);
        RtSinkStatus st = {0};
        if (o->sink.rt)
            rt_sink_status(o->sink.rt, &st);
        else
            strcpy(st.state, "stopped");
        row[0] = text(a, o->name);
        row[1] = text(a, o->sink.from ? o->sink.from->name : NULL);
        row[2] = text(a, rt_sink_option(&o->sink.spec, "connector"));
        row[3] = text(a, st.state);
        row[4] = value_int(TYPE_INT8, (int64_t)st.delivered_epoch);
        row[5] = value_int(TYPE_INT8, st.pending_epochs);
        row[6] = value_int(TYPE_INT8, (int64_t)st.rows_delivered);
        row[7] = st.last_error[0] ? text(a, st.last_error) : value_null(TYPE_TEXT);
        row[8] = value_int(TYPE_INT8, (int64_t)st.rows_rejected);
    }
    return b.r;
}

static const CatRelation *checkpoints(Engine *e, Arena *a)
{
    static const char *names[] = {"epoch", "started_at", "duration_ms", "bytes", "rows"};
    static const TypeId types[] = {TYPE_INT8, TYPE_TIMESTAMPTZ, TYPE_FLOAT8, TYPE_INT8, TYPE_INT8};
    SysBuild b = {a, sys_new(a, "weir_checkpoints", 5, names, types), 0};
    int n = e->n_history < CKPT_HISTORY ? e->n_history : CKPT_HISTORY;
    for (int k = 0; k < n; k++) {
        const CkptRecord *h = &e->history[(e->n_history - n + k) % CKPT_HISTORY];
        Value *row = sys_row(&b);
        row[0] = value_int(TYPE_INT8, (int64_t)h->epoch);
        row[1] = value_int(TYPE_TIMESTAMPTZ, h->started_us);
        row[2] = value_float(TYPE_FLOAT8, (double)h->duration_us / 1000.0);
        row[3] = value_int(TYPE_INT8, (int64_t)h->bytes);
        row[4] = value_int(TYPE_INT8, (int64_t)h->rows);
    }
    return b.r;
}

static const CatRelation *state(Engine *e, Arena *a)
{
    static const char *names[] = {"view", "operator", "table_id", "state_bytes"};
    static const TypeId types[] = {TYPE_TEXT, TYPE_TEXT, TYPE_INT8, TYPE_INT8};
    SysBuild b = {a, sys_new(a, "weir_state", 4, names, types), 0};
    CAT_FOREACH(e->cat, CAT_ANY, o) {
        if ((o->kind != CAT_VIEW && o->kind != CAT_TABLE) || !o->flow.plan)
            continue;
        for (int k = 0; k < o->flow.plan->n_nodes; k++) {
            const PlanNode *n = o->flow.plan->nodes[k];
            if (!n->table_id)
                continue;
            Value *row = sys_row(&b);
            row[0] = text(a, o->name);
            row[1] = value_str(TYPE_TEXT, arena_printf(a, "%s#%d", plan_node_kind_name(n->kind), n->id), 0);
            row[1].u.s.len = (uint32_t)strlen(row[1].u.s.p);
            row[2] = value_int(TYPE_INT8, (int64_t)n->table_id);
            row[3] = value_int(TYPE_INT8, o->flow.df ? (int64_t)rt_dataflow_state_bytes(o->flow.df, k) : 0);
        }
    }
    return b.r;
}

static const char *op_name(Arena *a, const PlanNode *n)
{
    return arena_printf(a, "%s#%d", plan_node_kind_name(n->kind), n->id);
}

static const CatRelation *operators(Engine *e, Arena *a)
{
    static const char *names[] = {"view", "operator", "rows_in", "rows_out", "late_rows", "bad_records",
                                  "open_windows", "expired_keys"};
    static const TypeId types[] = {TYPE_TEXT, TYPE_TEXT, TYPE_INT8, TYPE_INT8, TYPE_INT8, TYPE_INT8, TYPE_INT8,
                                   TYPE_INT8};
    SysBuild b = {a, sys_new(a, "weir_operators", 8, names, types), 0};
    CAT_FOREACH(e->cat, CAT_ANY, o) {
        if ((o->kind != CAT_VIEW && o->kind != CAT_TABLE) || !o->flow.plan || o->view.late_of)
            continue;
        for (int k = 0; k < o->flow.plan->n_nodes; k++) {
            RtOpCounters c = {.open_windows = -1};
            if (o->flow.df)
                rt_dataflow_op_counters(o->flow.df, k, &c);
            Value *row = sys_row(&b);
            row[0] = text(a, o->name);
            row[1] = text(a, op_name(a, o->flow.plan->nodes[k]));
            row[2] = value_int(TYPE_INT8, (int64_t)c.rows_in);
            row[3] = value_int(TYPE_INT8, (int64_t)c.rows_out);
            row[4] = value_int(TYPE_INT8, (int64_t)c.late_rows);
            row[5] = value_int(TYPE_INT8, (int64_t)c.bad_records);
            row[6] = c.open_windows >= 0 ? value_int(TYPE_INT8, c.open_windows) : value_null(TYPE_INT8);
            row[7] = o->flow.plan->nodes[k]->state_ttl_us ? value_int(TYPE_INT8, (int64_t)c.expired_keys)
                                                     : value_null(TYPE_INT8);
        }
    }
    return b.r;
}

static Value ts_or_null(int64_t t)
{
    return t == TS_MINUS_INF ? value_null(TYPE_TIMESTAMP) : value_int(TYPE_TIMESTAMP, t);
}

static const CatRelation *watermarks(Engine *e, Arena *a)
{
    static const char *names[] = {"view", "source", "partition", "watermark", "max_event_time",
                                  "source_watermark", "watermark_lag_ms", "idle", "ms_since_last_row"};
    static const TypeId types[] = {TYPE_TEXT, TYPE_TEXT, TYPE_INT4, TYPE_TIMESTAMP, TYPE_TIMESTAMP,
                                   TYPE_TIMESTAMP, TYPE_INT8, TYPE_BOOL, TYPE_INT8};
    enum { MAX_PARTS = 4096 };
    SysBuild b = {a, sys_new(a, "weir_watermarks", 9, names, types), 0};
    RtPartitionWatermark *pw = arena_alloc(a, sizeof *pw * MAX_PARTS);
    int64_t now = clock_wall_us();
    CAT_FOREACH(e->cat, CAT_ANY, o) {
        if ((o->kind != CAT_VIEW && o->kind != CAT_TABLE) || !o->flow.df || o->view.late_of)
            continue;
        int n = rt_dataflow_watermarks(o->flow.df, pw, MAX_PARTS);
        for (int k = 0; k < n; k++) {
            Value *row = sys_row(&b);
            int64_t wm = pw[k].watermark;
            bool finite = wm != TS_MINUS_INF && wm != TS_PLUS_INF;
            row[0] = text(a, o->name);
            row[1] = text(a, pw[k].source);
            row[2] = value_int(TYPE_INT4, pw[k].partition);
            row[3] = ts_or_null(wm);
            row[4] = ts_or_null(pw[k].max_event_time);
            row[5] = ts_or_null(pw[k].source_watermark);
            row[6] = finite ? value_int(TYPE_INT8, (now - wm) / 1000) : value_null(TYPE_INT8);
            row[7] = value_bool(pw[k].idle);
            row[8] = value_int(TYPE_INT8, pw[k].idle_ms);
        }
    }
    return b.r;
}

/* The end offsets are those the broker reported in its last fetch answer
 * (nothing is asked under the engine lock), so lag is at most one fetch
 * old; caught_up is true once every partition of the view has lag 0. */
static const CatRelation *backfills(Engine *e, Arena *a)
{
    static const char *names[] = {"view", "backfill_from", "source", "partition", "position", "end_offset",
                                  "lag", "watermark", "caught_up"};
    static const TypeId types[] = {TYPE_TEXT, TYPE_TEXT, TYPE_TEXT, TYPE_INT4, TYPE_INT8,
                                   TYPE_INT8, TYPE_INT8, TYPE_TIMESTAMP, TYPE_BOOL};
    enum { MAX_PARTS = 4096 };
    SysBuild b = {a, sys_new(a, "weir_backfills", 9, names, types), 0};
    RtSourceProgress *sp = arena_alloc(a, sizeof *sp * MAX_PARTS);
    RtPartitionWatermark *pw = arena_alloc(a, sizeof *pw * MAX_PARTS);
    CAT_FOREACH(e->cat, CAT_ANY, o) {
        if (o->kind != CAT_VIEW || !o->flow.df || !o->flow.plan || !o->flow.plan->backfill_from)
            continue;
        int n = rt_dataflow_source_progress(o->flow.df, sp, MAX_PARTS);
        int nw = rt_dataflow_watermarks(o->flow.df, pw, MAX_PARTS);
        bool caught_up = true;
        for (int k = 0; k < n; k++)
            caught_up &= sp[k].position >= 0 && sp[k].end_offset >= 0 && sp[k].position >= sp[k].end_offset;
        for (int k = 0; k < n; k++) {
            Value *row = sys_row(&b);
            row[0] = text(a, o->name);
            row[1] = text(a, o->flow.plan->backfill_from);
            row[2] = text(a, sp[k].source);
            row[3] = value_int(TYPE_INT4, sp[k].partition);
            row[4] = sp[k].position >= 0 ? value_int(TYPE_INT8, sp[k].position) : value_null(TYPE_INT8);
            row[5] = sp[k].end_offset >= 0 ? value_int(TYPE_INT8, sp[k].end_offset) : value_null(TYPE_INT8);
            bool known = sp[k].position >= 0 && sp[k].end_offset >= 0;
            int64_t lag = known && sp[k].end_offset > sp[k].position ? sp[k].end_offset - sp[k].position : 0;
            row[6] = known ? value_int(TYPE_INT8, lag) : value_null(TYPE_INT8);
            row[7] = value_null(TYPE_TIMESTAMP);
            for (int w = 0; w < nw; w++)
                if (pw[w].partition == sp[k].partition && strcmp(pw[w].source, sp[k].source) == 0)
                    row[7] = ts_or_null(pw[w].watermark);
            row[8] = value_bool(caught_up);
        }
    }
    return b.r;
}

static const CatRelation *source_errors(Engine *e, Arena *a)
{
    static const char *names[] = {"view", "source", "partition", "record_offset", "seen_at", "error", "record"};
    static const TypeId types[] = {TYPE_TEXT, TYPE_TEXT, TYPE_INT4, TYPE_INT8, TYPE_TIMESTAMPTZ, TYPE_TEXT,
                                   TYPE_TEXT};
    SysBuild b = {a, sys_new(a, "weir_source_errors", 7, names, types), 0};
    RtSourceError *errs = arena_alloc(a, sizeof *errs * RT_SOURCE_ERRORS_KEPT);
    CAT_FOREACH(e->cat, CAT_ANY, o) {
        if ((o->kind != CAT_VIEW && o->kind != CAT_TABLE) || !o->flow.df || o->view.late_of)
            continue;
        int n = rt_dataflow_source_errors(o->flow.df, errs, RT_SOURCE_ERRORS_KEPT);
        for (int k = 0; k < n; k++) {
            const RtSourceError *x = &errs[k];
            Value *row = sys_row(&b);
            row[0] = text(a, o->name);
            row[1] = text(a, x->source);
            row[2] = x->partition >= 0 ? value_int(TYPE_INT4, x->partition) : value_null(TYPE_INT4);
            row[3] = x->offset >= 0 ? value_int(TYPE_INT8, x->offset) : value_null(TYPE_INT8);
            row[4] = value_int(TYPE_TIMESTAMPTZ, x->at_us);
            row[5] = text(a, x->message);
            row[6] = x->record[0] ? text(a, x->record) : value_null(TYPE_TEXT);
        }
    }
    return b.r;
}

/* Every system view: the planner finds them by name, pg_catalog lists them. */
static const struct {
    const char *name;
    const CatRelation *(*build)(Engine *e, Arena *a);
} SYSVIEWS[] = {
    {"weir_views", views},         {"weir_sinks", sinks},           {"weir_checkpoints", checkpoints},
    {"weir_state", state},         {"weir_operators", operators},   {"weir_watermarks", watermarks},
    {"weir_source_errors", source_errors}, {"weir_verifications", verify_sysview},
    {"weir_backfills", backfills}, {"weir_cluster", cluster}, {"weir_cluster_assignment", cluster_assignment},
    {"weir_key_group_rows", cluster_key_group_rows},
};

const CatRelation *sysview_lookup(Engine *e, const char *name, Arena *a)
{
    for (size_t i = 0; i < sizeof SYSVIEWS / sizeof SYSVIEWS[0]; i++)
        if (strcmp(name, SYSVIEWS[i].name) == 0)
            return SYSVIEWS[i].build(e, a);
    return NULL;
}

const char *sysview_name(int i)
{
    return i >= 0 && (size_t)i < sizeof SYSVIEWS / sizeof SYSVIEWS[0] ? SYSVIEWS[i].name : NULL;
}
