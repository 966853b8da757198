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
 *
 * They are ordinary relations to the planner (CAT_SYSTEM with their rows),
 * built in the statement's arena under the engine lock, so one query sees
 * one consistent moment.
 */
#include "engine_int.h"

#include <string.h>

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
                                  "changes", "watermark", "last_error"};
    static const TypeId types[] = {TYPE_TEXT, TYPE_BOOL, TYPE_INT8, TYPE_INT8, TYPE_INT8,
                                   TYPE_INT8, TYPE_INT8, TYPE_TIMESTAMP, TYPE_TEXT};
    SysBuild b = {a, sys_new(a, "weir_views", 9, names, types), 0};
    for (int i = 0; i < e->n_objs; i++) {
        CatObj *o = e->objs[i];
        if (o->kind != CAT_VIEW || o->late_of)
            continue;
        Value *row = sys_row(&b);
        RtStats st = {0};
        st.watermark = TS_MINUS_INF;
        if (o->df)
            rt_dataflow_stats(o->df, &st);
        row[0] = text(a, o->name);
        row[1] = value_bool(o->df != NULL);
        row[2] = value_int(TYPE_INT8, (int64_t)st.records_in);
        row[3] = value_int(TYPE_INT8, (int64_t)st.bad_records);
        row[4] = value_int(TYPE_INT8, (int64_t)st.late_rows);
        row[5] = value_int(TYPE_INT8, (int64_t)st.eval_errors);
        row[6] = value_int(TYPE_INT8, (int64_t)st.rows_out);
        row[7] = st.watermark == TS_MINUS_INF ? value_null(TYPE_TIMESTAMP) : value_int(TYPE_TIMESTAMP, st.watermark);
        row[8] = st.last_error[0] ? text(a, st.last_error) : value_null(TYPE_TEXT);
    }
    return b.r;
}

static const CatRelation *sinks(Engine *e, Arena *a)
{
    static const char *names[] = {"name", "view", "connector", "state", "delivered_epoch", "pending_epochs",
                                  "changes_delivered", "last_error"};
    static const TypeId types[] = {TYPE_TEXT, TYPE_TEXT, TYPE_TEXT, TYPE_TEXT,
                                   TYPE_INT8, TYPE_INT8, TYPE_INT8, TYPE_TEXT};
    SysBuild b = {a, sys_new(a, "weir_sinks", 8, names, types), 0};
    for (int i = 0; i < e->n_objs; i++) {
        CatObj *o = e->objs[i];
        if (o->kind != CAT_SINK)
            continue;
        Value *row = sys_row(&b);
        RtSinkStatus st = {0};
        if (o->sink)
            rt_sink_status(o->sink, &st);
        else
            strcpy(st.state, "stopped");
        row[0] = text(a, o->name);
        row[1] = text(a, o->from ? o->from->name : NULL);
        row[2] = text(a, rt_sink_option(&o->spec, "connector"));
        row[3] = text(a, st.state);
        row[4] = value_int(TYPE_INT8, (int64_t)st.delivered_epoch);
        row[5] = value_int(TYPE_INT8, st.pending_epochs);
        row[6] = value_int(TYPE_INT8, (int64_t)st.rows_delivered);
        row[7] = st.last_error[0] ? text(a, st.last_error) : value_null(TYPE_TEXT);
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
    for (int i = 0; i < e->n_objs; i++) {
        CatObj *o = e->objs[i];
        if (o->kind != CAT_VIEW || !o->plan)
            continue;
        for (int k = 0; k < o->plan->n_nodes; k++) {
            const PlanNode *n = o->plan->nodes[k];
            if (!n->table_id)
                continue;
            Value *row = sys_row(&b);
            row[0] = text(a, o->name);
            row[1] = value_str(TYPE_TEXT, arena_printf(a, "%s#%d", plan_node_kind_name(n->kind), n->id), 0);
            row[1].u.s.len = (uint32_t)strlen(row[1].u.s.p);
            row[2] = value_int(TYPE_INT8, (int64_t)n->table_id);
            row[3] = value_int(TYPE_INT8, o->df ? (int64_t)rt_dataflow_state_bytes(o->df, k) : 0);
        }
    }
    return b.r;
}

const CatRelation *sysview_lookup(Engine *e, const char *name, Arena *a)
{
    if (strcmp(name, "weir_views") == 0)
        return views(e, a);
    if (strcmp(name, "weir_sinks") == 0)
        return sinks(e, a);
    if (strcmp(name, "weir_checkpoints") == 0)
        return checkpoints(e, a);
    if (strcmp(name, "weir_state") == 0)
        return state(e, a);
    return NULL;
}
