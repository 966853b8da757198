/*
 * engine.c: the catalog, the engine thread and checkpoints.
 *
 * Catalog entries are the CREATE statements themselves plus the state
 * table ids their plans were given: at start the statements are parsed and
 * planned again, in creation order, with the same table ids handed back,
 * so each view resumes on its own state. (Re-planning rather than storing
 * serialized plans keeps one code path for creating and recovering; the
 * planner is deterministic for a given catalog.)
 *
 * The engine thread loops: step every running view (poll its sources, push
 * the records through), take a checkpoint when the interval has passed and
 * something changed, wake statements waiting for progress (FLUSH). It
 * holds the engine lock while it works and releases it between steps, so
 * statements interleave at step boundaries.
 */
#include "engine_int.h"
#include "tz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "crashpoint.h"
#include "row.h"

int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

CatObj *engine_find(Engine *e, const char *name)
{
    for (int i = 0; i < e->n_objs; i++)
        if (strcmp(e->objs[i]->name, name) == 0)
            return e->objs[i];
    return NULL;
}

void cat_obj_free(CatObj *o)
{
    if (!o)
        return;
    if (o->sink && o->from && o->from->df)
        rt_dataflow_detach_sink(o->from->df, o->sink);
    o->sink = NULL;
    rt_dataflow_close(o->df);
    free(o->name);
    for (int i = 0; i < o->n_old_names; i++)
        free(o->old_names[i]);
    free(o->old_names);
    free(o->sql);
    free(o->table_ids);
    free(o->skips);
    free(o->alter_sql);
    arena_free(o->arena);
    free(o);
}

/* ---- catalog persistence ---------------------------------------------------- */

/* The entry's body: kind, name, statement, state table ids. */
static void catalog_body(const CatObj *o, Buf *b)
{
    /* After the ids, optional trailing values told apart by their type, so
     * entries written before any existed still read: a bigint is the
     * streaming_parallelism (when > 1), a text the time zone (when not UTC),
     * an integer the planner revision of a view (when not 0, planner.h).
     * With a revision all three are written, NULL where there is nothing to
     * say: a weir from before revisions reads at most two and refuses the
     * entry (corrupt), where it would take a lone revision for a parallelism
     * and plan the view by older rules over state its plan did not write. */
    bool rev = o->plan_rev > 0;
    int n = 4 + o->n_table_ids + (rev ? 3 : (o->parallelism > 1) + (o->tz != NULL));
    Value *vals = xcalloc((size_t)n, sizeof(Value));
    vals[0] = value_int(TYPE_INT8, o->kind);
    vals[1] = value_str(TYPE_TEXT, o->name, strlen(o->name));
    vals[2] = value_str(TYPE_TEXT, o->sql, strlen(o->sql));
    vals[3] = value_int(TYPE_INT8, o->n_table_ids);
    for (int i = 0; i < o->n_table_ids; i++)
        vals[4 + i] = value_int(TYPE_INT8, (int64_t)o->table_ids[i]);
    int k = 4 + o->n_table_ids;
    if (o->parallelism > 1)
        vals[k++] = value_int(TYPE_INT8, o->parallelism);
    else if (rev)
        vals[k++] = value_null(TYPE_INT8);
    if (o->tz)
        vals[k++] = value_str(TYPE_TEXT, tz_name(o->tz), strlen(tz_name(o->tz)));
    else if (rev)
        vals[k++] = value_null(TYPE_TEXT);
    if (rev)
        vals[k++] = value_int(TYPE_INT4, o->plan_rev);
    row_encode(b, vals, n);
    free(vals);
}

static int persist(Engine *e, CatObj *o, WError *err)
{
    Buf b = BUF_INIT;
    catalog_body(o, &b);
    StorCatalogEntry ce = {.id = o->id, .kind = o->kind, .name = o->name, .body = b.data, .body_len = b.len};
    int rc = stor_catalog_put(e->stor, &ce, err);
    buf_free(&b);
    return rc;
}

int engine_add_object(Engine *e, CatObj *o, bool do_persist, WError *err)
{
    if (do_persist)
        o->tz = tz_current(); /* a new object: the zone its statement was planned in */
    if (do_persist && persist(e, o, err))
        return -1;
    if (e->n_objs == e->cap_objs) {
        e->cap_objs = e->cap_objs ? e->cap_objs * 2 : 16;
        e->objs = xrealloc(e->objs, sizeof(CatObj *) * (size_t)e->cap_objs);
    }
    e->objs[e->n_objs++] = o;
    return 0;
}

int engine_rename_object(Engine *e, CatObj *o, const char *new_name, WError *err)
{
    char *old = o->name;
    o->name = xstrdup(new_name);
    if (persist(e, o, err)) {
        free(o->name);
        o->name = old;
        return -1;
    }
    o->old_names = xrealloc(o->old_names, sizeof(char *) * (size_t)(o->n_old_names + 1));
    o->old_names[o->n_old_names++] = old;
    o->rel.name = o->name;
    /* The stored ALTER SOURCE names the object: say the new name from the
     * next checkpoint on (replay applies it by id whatever name it says). */
    const char *rest = o->alter_sql ? strstr(o->alter_sql, "\" SET (") : NULL;
    if (rest) {
        Buf b = BUF_INIT;
        buf_printf(&b, "ALTER %s \"%s%s", o->kind == CAT_TABLE ? "TABLE" : "SOURCE", o->name, rest);
        free(o->alter_sql);
        o->alter_sql = xstrdup(b.data);
        buf_free(&b);
        o->altered = true;
        e->dirty = true;
    }
    return 0;
}

void engine_swap_names(Engine *e, CatObj *a, CatObj *b)
{
    /* Running operators and changefeeds borrow the old strings: keep them. */
    char *na = xstrdup(b->name), *nb = xstrdup(a->name);
    CatObj *objs[2] = {a, b};
    char *names[2] = {na, nb};
    for (int k = 0; k < 2; k++) {
        CatObj *o = objs[k];
        o->old_names = xrealloc(o->old_names, sizeof(char *) * (size_t)(o->n_old_names + 1));
        o->old_names[o->n_old_names++] = o->name;
        o->name = names[k];
        o->rel.name = o->name;
        if (o->df)
            rt_dataflow_set_name(o->df, o->name);
        o->cat_dirty = true;
    }
    e->dirty = true;
}

int engine_remove_object(Engine *e, CatObj *o, WError *err)
{
    engine_checkpoint_wait(e, NULL); /* it may carry o's catalog entry */
    /* A view's late-rows relation goes with it (its table is among the view's). */
    for (int i = 0; i < e->n_objs; i++)
        if (e->objs[i]->late_of == o) {
            CatObj *l = e->objs[i];
            memmove(&e->objs[i], &e->objs[i + 1], sizeof(CatObj *) * (size_t)(e->n_objs - i - 1));
            e->n_objs--;
            cat_obj_free(l);
            i--;
        }
    if (stor_catalog_delete(e->stor, o->id, err) < 0)
        return -1;
    if (o->kind == CAT_SINK && o->sink && o->from && o->from->df) {
        rt_dataflow_detach_sink(o->from->df, o->sink);
        o->sink = NULL;
    }
    if (o->df)
        engine_stop_view(e, o);
    /* The catalog entry is gone first: a crash now leaves orphan state rows
     * at worst, never a view without its state. */
    for (int i = 0; i < o->n_table_ids; i++)
        if (stor_table_drop(e->stor, o->table_ids[i], err))
            return -1;
    for (int i = 0; i < e->n_objs; i++)
        if (e->objs[i] == o) {
            memmove(&e->objs[i], &e->objs[i + 1], sizeof(CatObj *) * (size_t)(e->n_objs - i - 1));
            e->n_objs--;
            break;
        }
    cat_obj_free(o);
    return 0;
}

/* ---- the planner's view of the catalog ----------------------------------------- */

typedef struct PlanCatCtx {
    Engine *e;
    Arena *a;
    CatObj *owner;
    bool replay;
    bool dry_run;
    int next_replay;
    uint64_t fake;
} PlanCatCtx;

static __thread PlanCatCtx plan_cat_ctx;

static const CatRelation *cat_lookup(void *ctx, const char *name)
{
    PlanCatCtx *c = ctx;
    CatObj *o = engine_find(c->e, name);
    if (o && o->sink_query)
        return NULL; /* a sink's own query: nothing else reads it */
    if (o)
        return &o->rel;
    return c->a ? sysview_lookup(c->e, name, c->a) : NULL;
}

static uint64_t cat_new_table(void *ctx)
{
    PlanCatCtx *c = ctx;
    if (c->dry_run)
        return ++c->fake;
    CatObj *o = c->owner;
    if (c->replay)
        return c->next_replay < o->n_table_ids ? o->table_ids[c->next_replay++] : 0;
    uint64_t id = 0;
    WError err = {0};
    if (stor_next_id(c->e->stor, &id, &err))
        return 0;
    o->table_ids = xrealloc(o->table_ids, sizeof(uint64_t) * (size_t)(o->n_table_ids + 1));
    o->table_ids[o->n_table_ids++] = id;
    return id;
}

PlanCatalog engine_plan_catalog(Engine *e, CatObj *owner, bool replay, bool dry_run, Arena *a)
{
    plan_cat_ctx = (PlanCatCtx){.e = e, .a = a, .owner = owner, .replay = replay, .dry_run = dry_run};
    return (PlanCatalog){.ctx = &plan_cat_ctx, .lookup = cat_lookup, .new_table_id = cat_new_table};
}

static RtDataflow *view_dataflow(void *ctx, uint64_t table_id)
{
    Engine *e = ctx;
    for (int i = 0; i < e->n_objs; i++)
        if ((e->objs[i]->kind == CAT_VIEW || e->objs[i]->kind == CAT_TABLE) && e->objs[i]->df &&
            e->objs[i]->rel.table_id == table_id)
            return e->objs[i]->df;
    return NULL;
}

static StorTable *view_table(void *ctx, uint64_t table_id)
{
    Engine *e = ctx;
    for (int i = 0; i < e->n_objs; i++) {
        CatObj *o = e->objs[i];
        if (o->df && o->rel.table_id == table_id)
            return rt_dataflow_view_table(o->df);
        StorTable *t = o->df ? rt_dataflow_find_table(o->df, table_id) : NULL;
        if (t)
            return t; /* a late-rows relation, kept by the view's window operator */
    }
    return NULL;
}

/* ---- Kafka producer for INSERT ---------------------------------------------- */

int engine_producer(Engine *e, const char *bootstrap, const RtKafkaProp *extra, int n_extra, RtKafkaProducer **out,
                    WError *err)
{
    /* One producer is kept for the last (bootstrap, properties) used: INSERTs
     * into one source in a row reuse it. */
    Buf id = BUF_INIT;
    buf_puts(&id, bootstrap);
    for (int i = 0; i < n_extra; i++)
        buf_printf(&id, "\n%s=%s", extra[i].key, extra[i].value);
    if (e->producer && strcmp(e->producer_bootstrap, id.data) == 0) {
        buf_free(&id);
        *out = e->producer;
        return 0;
    }
    rt_kafka_producer_close(e->producer);
    free(e->producer_bootstrap);
    e->producer = NULL;
    e->producer_bootstrap = NULL;
    RtKafkaProp props[66] = {{"linger.ms", "0"}, {"acks", "all"}};
    int n = 2;
    for (int i = 0; i < n_extra && n < 66; i++)
        props[n++] = extra[i];
    if (rt_kafka_producer_open(bootstrap, props, n, &e->producer, err)) {
        buf_free(&id);
        return -1;
    }
    e->producer_bootstrap = buf_take(&id);
    *out = e->producer;
    return 0;
}

/* ---- checkpoints ------------------------------------------------------------ */

static int64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Errors after which retrying cannot help: the view waits for RESUME (or
 * for ALTER SOURCE to change the policy), instead of the 2 s retry. */
static bool waits_for_resume(const WError *err)
{
    return strcmp(err->sqlstate, RT_SQLSTATE_SOURCE_LOST) == 0 || strcmp(err->sqlstate, RT_SQLSTATE_OFFSET_GAP) == 0;
}

int engine_start_view(Engine *e, CatObj *v, WError *err)
{
    if (rt_dataflow_open(&e->rt, v->plan, &v->df, err)) {
        snprintf(v->stop_error, sizeof v->stop_error, "%s", err->msg);
        /* A deleted or shrunk topic, or an offset gap, waits for RESUME, not the 2 s retry. */
        if (waits_for_resume(err) && !v->failed) {
            v->failed = true;
            memset(&v->fail, 0, sizeof v->fail);
            fprintf(stderr, "weir: view %s stopped: %s (ALTER MATERIALIZED VIEW %s RESUME retries)\n", v->name,
                    err->msg, v->name);
        }
        return -1;
    }
    rt_dataflow_set_name(v->df, v->name);
    for (int i = 0; i < v->n_skips; i++)
        rt_dataflow_skip_record(v->df, v->skips[i].source, v->skips[i].partition, v->skips[i].offset);
    v->stop_error[0] = 0;
    v->failed = false;
    for (int i = 0; i < e->n_objs; i++) {
        CatObj *s = e->objs[i];
        if (s->kind != CAT_SINK || s->from != v || s->sink)
            continue;
        WError serr = {0};
        if (rt_dataflow_attach_sink(v->df, &s->spec, s->view_cols, s->table_ids[0], &s->sink, &serr))
            fprintf(stderr, "weir: sink %s cannot start: %s\n", s->name, serr.msg);
    }
    return 0;
}

int engine_resume_view(Engine *e, CatObj *v, WError *err)
{
    if (v->df)
        return 0;
    if (v->failed && v->fail.source[0]) { /* a bad record, not a lost topic: skip it */
        v->skips = xrealloc(v->skips, sizeof(RtFailedRecord) * (size_t)(v->n_skips + 1));
        v->skips[v->n_skips++] = v->fail;
        fprintf(stderr, "weir: view %s resumed: skipping source %s partition %d offset %lld\n", v->name,
                v->fail.source, (int)v->fail.partition, (long long)v->fail.offset);
    }
    if (engine_start_view(e, v, err))
        return -1;
    fprintf(stderr, "weir: view %s is running again\n", v->name);
    return 0;
}

/* Does view d read view v's changelog? */
static bool reads_view(const CatObj *d, const CatObj *v)
{
    if (d->kind != CAT_VIEW || !d->plan)
        return false;
    for (int i = 0; i < d->plan->n_nodes; i++)
        if (d->plan->nodes[i]->kind == PN_VIEW_SOURCE && d->plan->nodes[i]->scan_rel == &v->rel)
            return true;
    return false;
}

void engine_stop_view(Engine *e, CatObj *v)
{
    engine_checkpoint_wait(e, NULL); /* it holds this view's tables */
    /* Views fed by this one stop first (the engine restarts them when it runs again). */
    for (int i = 0; i < e->n_objs; i++)
        if (e->objs[i]->df && reads_view(e->objs[i], v))
            engine_stop_view(e, e->objs[i]);
    /* Changefeeds first: their taps are freed with the dataflow. */
    subs_view_stopped(e, v);
    for (int i = 0; i < e->n_objs; i++) {
        CatObj *s = e->objs[i];
        if (s->kind == CAT_SINK && s->from == v && s->sink) {
            rt_dataflow_detach_sink(v->df, s->sink);
            s->sink = NULL;
        }
    }
    rt_dataflow_close(v->df);
    v->df = NULL;
}

/* The writer thread: only the frozen checkpoint and the environment. */
static void *ck_writer(void *arg)
{
    Engine *e = arg;
    pthread_setname_np(pthread_self(), "weir-ckpt");
    e->ck_rc = stor_checkpoint_write(e->ck, &e->ck_err);
    atomic_store(&e->ck_written, true);
    return NULL;
}

/* A checkpoint that could not be assembled: catalog entries it took go to the next one. */
static void checkpoint_abort(Engine *e, StorCheckpoint *ck)
{
    stor_checkpoint_abort(ck);
    for (int i = 0; i < e->n_objs; i++) {
        if (e->objs[i]->cat_in_ck)
            e->objs[i]->cat_dirty = true;
        e->objs[i]->cat_in_ck = false;
    }
}

/* Snapshot every dataflow into a new checkpoint and start writing it on
 * ck_thread. The engine keeps stepping meanwhile: writes after the
 * snapshot belong to the next epoch. Lock held, nothing in flight. */
static int checkpoint_start(Engine *e, WError *err)
{
    StorCheckpoint *ck;
    uint64_t epoch = e->epoch + 1;
    int64_t t0 = wall_us();
    if (stor_checkpoint_begin(e->stor, epoch, &ck, err))
        return -1;
    if (e->cluster_name) {
        /* The data directory's identity, and how far the catalog topic is applied. */
        char next[32];
        snprintf(next, sizeof next, "%lld", (long long)e->catalog_next);
        if (stor_checkpoint_put_meta(ck, "cluster/name", e->cluster_name, strlen(e->cluster_name), err) ||
            stor_checkpoint_put_meta(ck, "cluster/node", e->node_id, strlen(e->node_id), err) ||
            stor_checkpoint_put_meta(ck, "cluster/catalog_next", next, strlen(next), err)) {
            checkpoint_abort(e, ck);
            return -1;
        }
    }
    for (int i = 0; i < e->n_objs; i++) {
        CatObj *o = e->objs[i];
        if (o->altered) {
            char key[64];
            snprintf(key, sizeof key, "alter/%llu", (unsigned long long)o->id);
            const char *v = o->alter_sql ? o->alter_sql : "";
            if (stor_checkpoint_put_meta(ck, key, v, strlen(v), err)) {
                checkpoint_abort(e, ck);
                return -1;
            }
        }
        if (o->cat_dirty) {
            Buf body = BUF_INIT;
            catalog_body(o, &body);
            StorCatalogEntry ce = {.id = o->id, .kind = o->kind, .name = o->name, .body = body.data,
                                   .body_len = body.len};
            int rc = stor_checkpoint_put_catalog(ck, &ce, err);
            buf_free(&body);
            if (rc) {
                checkpoint_abort(e, ck);
                return -1;
            }
            o->cat_dirty = false;
            o->cat_in_ck = true;
        }
        if (o->df && rt_dataflow_checkpoint(o->df, ck, epoch, err)) {
            checkpoint_abort(e, ck);
            return -1;
        }
        crashpoint("checkpoint_mid");
    }
    e->ck = ck;
    e->ck_epoch = epoch;
    e->ck_started_us = t0;
    e->ck_rc = 0;
    e->ck_err = (WError){0};
    atomic_store(&e->ck_written, false);
    /* Changes from here on set dirty again and go into the next checkpoint. */
    e->dirty = false;
    if (pthread_create(&e->ck_thread, NULL, ck_writer, e) != 0) {
        /* No thread: write it here. */
        ck_writer(e);
        e->ck_busy = true;
        return 0;
    }
    e->ck_busy = true;
    e->ck_thread_started = true;
    return 0;
}

/* A failed checkpoint: the last good one stays; the state stays dirty and
 * the next try includes it. Shown in /api/status and the log. */
static void checkpoint_failed(Engine *e, const char *msg)
{
    e->ck_failing = true;
    snprintf(e->last_checkpoint_error, sizeof e->last_checkpoint_error, "%.500s", msg);
    fprintf(stderr, "weir: checkpoint failed: %s\n", msg);
}

/* Finish the checkpoint in flight once its writer is done (lock held):
 * on success the epoch is committed and the operators told (sinks may
 * deliver it, subscribers see progress); on failure the state stays dirty
 * and the last good checkpoint stays. */
static int checkpoint_finish(Engine *e, WError *err)
{
    if (e->ck_thread_started)
        pthread_join(e->ck_thread, NULL);
    e->ck_thread_started = false;
    e->ck_busy = false;
    int rc = e->ck_rc;
    stor_checkpoint_finish(e->ck);
    e->ck = NULL;
    for (int i = 0; i < e->n_objs; i++) {
        if (rc && e->objs[i]->cat_in_ck)
            e->objs[i]->cat_dirty = true;
        e->objs[i]->cat_in_ck = false;
    }
    if (rc) {
        e->dirty = true;
        checkpoint_failed(e, e->ck_err.msg);
        if (err)
            *err = e->ck_err;
        return -1;
    }
    uint64_t epoch = e->ck_epoch;
    e->ck_failing = false;
    crashpoint("checkpoint_committed");
    for (int i = 0; i < e->n_objs; i++)
        if (e->objs[i]->df) {
            RtStats vst;
            rt_dataflow_committed(e->objs[i]->df, epoch);
            rt_dataflow_stats(e->objs[i]->df, &vst);
            e->objs[i]->changes_at_commit = vst.rows_out;
        }
    e->epoch = epoch;
    e->checkpoints++;
    StorStats st;
    stor_stats(e->stor, &st);
    CkptRecord *h = &e->history[e->n_history++ % CKPT_HISTORY];
    *h = (CkptRecord){.epoch = epoch, .started_us = e->ck_started_us,
                      .duration_us = wall_us() - e->ck_started_us,
                      .bytes = st.last_commit_bytes, .rows = st.last_commit_rows};
    return 0;
}

int engine_checkpoint_wait(Engine *e, WError *err)
{
    return e->ck_busy ? checkpoint_finish(e, err) : 0;
}

int engine_checkpoint(Engine *e, WError *err)
{
    /* The one in flight first (a failure is logged; this checkpoint
     * includes its state again anyway). */
    engine_checkpoint_wait(e, NULL);
    if (checkpoint_start(e, err))
        return -1;
    int rc = checkpoint_finish(e, err);
    e->last_checkpoint_ms = now_ms();
    return rc;
}

/* ---- the engine thread ------------------------------------------------------- */

static uint64_t state_dirty_bytes(Engine *e)
{
    uint64_t sum = 0;
    for (int i = 0; i < e->n_objs; i++)
        if (e->objs[i]->df)
            sum += rt_dataflow_dirty_bytes(e->objs[i]->df);
    return sum;
}

/* --state-memory-limit: pause or resume stepping the views (lock held). */
static void update_pause(Engine *e)
{
    if (!e->state_limit)
        return;
    e->state_dirty = state_dirty_bytes(e);
    bool over = e->state_dirty > e->state_limit;
    if (over == e->paused)
        return;
    e->paused = over;
    if (over)
        fprintf(stderr, "weir: views paused: %llu bytes of operator state are not checkpointed, over "
                "--state-memory-limit %llu; reading resumes after a checkpoint succeeds%s%s\n",
                (unsigned long long)e->state_dirty, (unsigned long long)e->state_limit,
                e->ck_failing ? " (last checkpoint failed: " : "", e->ck_failing ? "see above)" : "");
    else
        fprintf(stderr, "weir: views resumed\n");
}

static void *engine_main(void *arg)
{
    Engine *e = arg;
    pthread_setname_np(pthread_self(), "weir-engine"); /* for top -H, perf, gdb */
    int64_t last_retry = 0;
    pthread_mutex_lock(&e->lock);
    while (!e->stop) {
        bool any = false;
        for (int i = 0; i < e->n_objs && !e->paused; i++) {
            CatObj *o = e->objs[i];
            if (!o->df)
                continue;
            bool did = false;
            WError err = {0};
            if (rt_dataflow_step(o->df, 0, &did, &err)) {
                /* A bad record under on_error = 'fail' keeps the view
                 * stopped until RESUME; anything else is retried. */
                o->failed = rt_dataflow_failed_record(o->df, &o->fail);
                snprintf(o->stop_error, sizeof o->stop_error, "%s", err.msg);
                if (!o->failed && waits_for_resume(&err)) {
                    /* Its topic was deleted or shrunk, or records it had not read were: stopped until RESUME. */
                    o->failed = true;
                    memset(&o->fail, 0, sizeof o->fail);
                    fprintf(stderr, "weir: view %s stopped: %s (ALTER MATERIALIZED VIEW %s RESUME retries)\n",
                            o->name, err.msg, o->name);
                } else if (o->failed)
                    fprintf(stderr, "weir: view %s stopped: %s (ALTER MATERIALIZED VIEW %s RESUME skips it)\n",
                            o->name, err.msg, o->name);
                else
                    fprintf(stderr, "weir: view %s stopped: %s\n", o->name, err.msg);
                engine_stop_view(e, o);
                continue;
            }
            any |= did;
        }
        if (any)
            e->dirty = true;
        /* A view's state past its state_ttl is deleted by a checkpoint, even when no row comes. */
        for (int i = 0; i < e->n_objs && !e->dirty; i++)
            if (e->objs[i]->df && rt_dataflow_expiry_due(e->objs[i]->df))
                e->dirty = true;
        int64_t now = now_ms();
        /* Checkpoints are asynchronous: the snapshot is taken here, the
         * LMDB write runs on its own thread while the views keep stepping,
         * and the next loop after it is done finishes it. */
        /* Over --state-memory-limit a checkpoint starts at once (unless
         * the last one failed: then at the interval, as usual). */
        bool over = e->state_limit && state_dirty_bytes(e) > e->state_limit;
        bool early = over && !e->ck_failing;
        if (e->ck_busy && atomic_load(&e->ck_written)) {
            checkpoint_finish(e, NULL);
        } else if (!e->ck_busy && e->dirty && (early || now - e->last_checkpoint_ms >= e->checkpoint_interval_ms)) {
            WError cerr = {0};
            if (early && now - e->last_checkpoint_ms < e->checkpoint_interval_ms)
                e->early_checkpoints++;
            e->last_checkpoint_ms = now;
            if (checkpoint_start(e, &cerr))
                checkpoint_failed(e, cerr.msg);
        }
        update_pause(e);
        /* Views whose dataflow could not start (broker down at start) are retried. */
        if (now - last_retry > 2000) {
            last_retry = now;
            for (int i = 0; i < e->n_objs; i++) {
                CatObj *o = e->objs[i];
                if ((o->kind == CAT_VIEW || o->kind == CAT_TABLE) && o->plan && !o->df && !o->failed) {
                    WError err = {0};
                    if (engine_start_view(e, o, &err) == 0)
                        fprintf(stderr, "weir: view %s is running again\n", o->name);
                }
            }
        }
        pthread_cond_broadcast(&e->progress);
        pthread_mutex_unlock(&e->lock);
        if (!any)
            usleep(2000);
        else
            sched_yield(); /* let waiting statements take the lock between steps */
        pthread_mutex_lock(&e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

/* ---- open / close ------------------------------------------------------------- */

typedef struct Loaded {
    uint64_t id;
    char *body;
    size_t len;
} Loaded;

typedef struct LoadList {
    int n, cap;
    Loaded *items;
} LoadList;

static int load_entry(void *arg, const StorCatalogEntry *ce)
{
    LoadList *l = arg;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->items = xrealloc(l->items, sizeof(Loaded) * (size_t)l->cap);
    }
    Loaded *it = &l->items[l->n++];
    it->id = ce->id;
    it->len = ce->body_len;
    it->body = xmalloc(ce->body_len + 1);
    memcpy(it->body, ce->body, ce->body_len);
    return 0;
}

/* Applies the ALTER SOURCE stored for o, if any (its views come later). */
static void replay_alter(Engine *e, CatObj *o)
{
    char key[64];
    snprintf(key, sizeof key, "alter/%llu", (unsigned long long)o->id);
    Buf b = BUF_INIT;
    WError err = {0};
    int found = stor_meta_get(e->stor, key, &b, &err);
    if (found == 1 && b.len > 0) {
        buf_reserve(&b, 1);
        b.data[b.len] = 0;
        Arena *a = arena_new(0);
        AstStmt **stmts;
        int n = 0;
        /* The entry is this object's by id; it may have been renamed since
         * the statement was written (the checkpoint after a rename rewrites it). */
        bool bad = parse_sql(b.data, a, &stmts, &n, &err) || n != 1 || stmts[0]->kind != STMT_ALTER_SOURCE;
        if (!bad) {
            ((AstAlterSource *)stmts[0]->u.alter_source)->name = o->name;
            bad = session_alter_source(e, stmts[0], true, &err) != 0;
        }
        if (bad)
            fprintf(stderr, "weir: cannot restore %s for %s: %s\n", b.data, o->name, err.msg);
        else
            o->altered = true;
        arena_free(a);
    } else if (found < 0) {
        fprintf(stderr, "weir: cannot read the ALTER SOURCE of %s: %s\n", o->name, err.msg);
    }
    buf_free(&b);
}

static int replay_catalog(Engine *e, WError *err)
{
    LoadList l = {0};
    if (stor_catalog_scan(e->stor, load_entry, &l, err))
        return -1;
    int rc = 0;
    /* Sinks last: a sink's statement names its view, and after ALTER
     * MATERIALIZED VIEW ... SWAP WITH that name may belong to a view created
     * after the sink. Nothing depends on a sink, so this order is safe. */
    for (int k = 0; k < 2 * l.n && !rc; k++) {
        int pass = k / l.n; /* 0: everything but sinks, 1: sinks */
        Loaded *it = &l.items[k % l.n];
        Value head[4];
        size_t used;
        if (row_decode_prefix(it->body, it->len, head, 4, &used) || head[0].null || head[3].null ||
            head[3].u.i < 0 || head[3].u.i > 100000) {
            rc = werr(err, SQLSTATE_INTERNAL, 0, "corrupt catalog entry %llu", (unsigned long long)it->id);
            break;
        }
        int nids = (int)head[3].u.i;
        Value *vals = xcalloc((size_t)(nids + 7), sizeof(Value));
        /* The ids, then up to three optional values (catalog_body): a bigint
         * streaming_parallelism, a text time zone, an integer planner revision. */
        size_t used_ids = 0;
        int n_extra = 0;
        bool bad = row_decode_prefix(it->body, it->len, vals, nids + 4, &used_ids) != 0;
        while (!bad && used_ids < it->len && n_extra < 3) {
            size_t u = 0;
            bad = row_decode_prefix((const char *)it->body + used_ids, it->len - used_ids, &vals[nids + 4 + n_extra], 1,
                                    &u) != 0;
            used_ids += u;
            n_extra++;
        }
        if (bad || used_ids != it->len) {
            free(vals);
            rc = werr(err, SQLSTATE_INTERNAL, 0, "corrupt catalog entry %llu", (unsigned long long)it->id);
            break;
        }
        if ((vals[0].u.i == CAT_SINK) != (pass == 1)) {
            free(vals);
            continue;
        }
        if (vals[0].u.i == CATALOG_KIND_USER) {
            char *name = strndup(vals[1].u.s.p, vals[1].u.s.len);
            char *ver = vals[2].null ? NULL : strndup(vals[2].u.s.p, vals[2].u.s.len);
            users_load(e, it->id, name, ver);
            free(name);
            free(ver);
            free(vals);
            continue;
        }
        CatObj *o = xcalloc(1, sizeof *o);
        o->id = it->id;
        o->kind = (CatKind)vals[0].u.i;
        o->name = strndup(vals[1].u.s.p, vals[1].u.s.len);
        o->sql = strndup(vals[2].u.s.p, vals[2].u.s.len);
        o->parallelism = 1;
        const Value *zone = NULL;
        for (int x = 0; x < n_extra; x++) {
            const Value *v = &vals[nids + 4 + x];
            if (v->null)
                continue;
            if (v->type == TYPE_TEXT)
                zone = v;
            else if (v->type == TYPE_INT4)
                o->plan_rev = (int)v->u.i;
            else if (v->u.i >= 1 && v->u.i <= PLAN_MAX_PARALLELISM)
                o->parallelism = (int)v->u.i;
        }
        o->n_table_ids = nids;
        o->table_ids = xcalloc((size_t)(nids ? nids : 1), sizeof(uint64_t));
        for (int k = 0; k < nids; k++)
            o->table_ids[k] = (uint64_t)vals[4 + k].u.i;
        if (zone) {
            char *zn = strndup(zone->u.s.p, zone->u.s.len);
            WError zerr = {0};
            if (tz_find(zn, &o->tz, &zerr))
                fprintf(stderr, "weir: %s was created in time zone %s, which this system does not know: using UTC\n",
                        o->name, zn);
            free(zn);
        }
        free(vals);
        Arena *a = arena_new(0);
        AstStmt **stmts;
        int n_stmts;
        WError perr = {0};
        if (parse_sql(o->sql, a, &stmts, &n_stmts, &perr) || n_stmts != 1) {
            fprintf(stderr, "weir: cannot replay %s: %s\n", o->name, perr.msg);
            arena_free(a);
            cat_obj_free(o);
            continue;
        }
        crashpoint("recovery");
        WError cerr = {0};
        tz_set_current(o->tz); /* planned again as it was planned at CREATE */
        int r = o->kind == CAT_SOURCE || o->kind == CAT_TABLE ? session_create_source(e, stmts[0], o->sql, o, &cerr)
              : o->kind == CAT_SINK   ? session_create_sink(e, stmts[0], o->sql, o, &cerr)
                                      : session_create_view(e, stmts[0], o->sql, o, &cerr);
        tz_set_current(NULL);
        if (r) {
            fprintf(stderr, "weir: cannot restore %s: %s\n", o->name, cerr.msg);
            cat_obj_free(o);
        } else if (o->kind == CAT_SOURCE || o->kind == CAT_TABLE) {
            replay_alter(e, o);
        }
        arena_free(a);
    }
    /* A sink's query whose sink is gone (the server stopped between
     * writing the two entries, or the sink could not be restored) is
     * dropped with its state: nothing can read it. */
    for (int i = 0; i < e->n_objs && !rc; i++)
        if (e->objs[i]->sink_query && !e->objs[i]->sink_owner) {
            fprintf(stderr, "weir: dropping %s: its sink is gone\n", e->objs[i]->name);
            WError derr = {0};
            if (engine_remove_object(e, e->objs[i], &derr))
                fprintf(stderr, "weir: cannot drop %s: %s\n", e->objs[i]->name, derr.msg);
            else
                i--;
        }
    for (int i = 0; i < l.n; i++)
        free(l.items[i].body);
    free(l.items);
    return rc;
}

int engine_open(const EngineConfig *cfg, Engine **out, WError *err)
{
    Engine *e = xcalloc(1, sizeof *e);
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->progress, NULL);
    e->data_dir = xstrdup(cfg->data_dir);
    e->kafka_bootstrap = xstrdup(cfg->kafka_bootstrap);
    e->checkpoint_interval_ms = cfg->checkpoint_interval_ms > 0 ? cfg->checkpoint_interval_ms : 1000;
    e->state_limit = cfg->state_memory_limit;
    StorOptions so = {0};
    /* A cap below the default initial map is the initial map too. */
    so.initial_map_size = cfg->max_map_size && cfg->max_map_size < ((size_t)256 << 20) ? cfg->max_map_size : 0;
    so.max_map_size = cfg->max_map_size;
    so.table_cache_bytes = (size_t)cfg->state_cache_size;
    if (stor_open(cfg->data_dir, &so, &e->stor, err)) {
        engine_close(e);
        return -1;
    }
    if (stor_last_epoch(e->stor, &e->epoch, err)) {
        engine_close(e);
        return -1;
    }
    e->rt = (RtEnv){.stor = e->stor, .kafka_bootstrap = e->kafka_bootstrap, .view_table = view_table,
                     .view_dataflow = view_dataflow, .ctx = e};
    e->last_checkpoint_ms = now_ms();
    /* A data directory serves one node of one cluster (or none): checked
     * before anything is written. */
    if (cluster_check_dir(e, cfg->cluster, cfg->node_id, err)) {
        engine_close(e);
        return -1;
    }
    pthread_mutex_lock(&e->lock);
    int rc = replay_catalog(e, err);
    pthread_mutex_unlock(&e->lock);
    if (rc) {
        engine_close(e);
        return -1;
    }
    /* A cluster node then applies what the catalog topic has beyond its
     * local catalog, before it serves anyone. */
    if (cfg->cluster && cluster_open(e, cfg->cluster, cfg->node_id, cfg->version, err)) {
        engine_close(e);
        return -1;
    }
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
        werr(err, SQLSTATE_INTERNAL, 0, "cannot start the engine thread");
        engine_close(e);
        return -1;
    }
    e->thread_started = true;
    *out = e;
    return 0;
}

void engine_close(Engine *e)
{
    if (!e)
        return;
    /* The catalog stops applying first: it runs statements on the engine. */
    cluster_close(e->cluster);
    e->cluster = NULL;
    if (e->thread_started) {
        pthread_mutex_lock(&e->lock);
        e->stop = true;
        pthread_mutex_unlock(&e->lock);
        pthread_join(e->thread, NULL);
    }
    if (e->stor)
        engine_checkpoint_wait(e, NULL);
    if (e->stor && e->dirty) {
        WError err = {0};
        if (engine_checkpoint(e, &err))
            fprintf(stderr, "weir: final checkpoint failed: %s\n", err.msg);
    }
    /* Sinks first: after a SWAP a sink may hang off a view created after it. */
    for (int i = e->n_objs - 1; i >= 0; i--)
        if (e->objs[i]->kind == CAT_SINK) {
            cat_obj_free(e->objs[i]);
            e->objs[i] = NULL;
        }
    for (int i = e->n_objs - 1; i >= 0; i--) {
        if (!e->objs[i])
            continue;
        subs_view_stopped(e, e->objs[i]);
        cat_obj_free(e->objs[i]);
    }
    free(e->objs);
    users_free(e);
    rt_kafka_producer_close(e->producer);
    free(e->producer_bootstrap);
    stor_close(e->stor);
    free(e->data_dir);
    free(e->kafka_bootstrap);
    free(e->cluster_name);
    free(e->node_id);
    pthread_cond_destroy(&e->progress);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

void engine_cluster_addresses(Engine *e, const char *pg_addr, const char *http_addr)
{
    if (e->cluster)
        cluster_set_addresses(e->cluster, pg_addr, http_addr);
}

/* Sessions are counted for /metrics. */
static void *counted_session_open(void *ctx, const char *user, const char *database, WError *err)
{
    Engine *e = ctx;
    void *s = session_open(ctx, user, database, err);
    if (s)
        atomic_fetch_add(&e->n_sessions, 1);
    return s;
}

static void counted_session_close(void *ctx, void *sess)
{
    Engine *e = ctx;
    if (sess)
        atomic_fetch_sub(&e->n_sessions, 1);
    session_close(ctx, sess);
}

SrvEngine engine_srv(Engine *e)
{
    return (SrvEngine){.ctx = e, .session_open = counted_session_open, .session_close = counted_session_close,
                       .query = session_query, .execute = session_execute, .user_verifier = users_verifier,
                       .idle_timeout_ms = session_idle_timeout, .in_transaction = session_in_transaction};
}
