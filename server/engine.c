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
#include "commands.h"
#include "tz.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "crashpoint.h"
#include "row.h"
#include "arena.h"
#include "clock.h"
#include "log.h"
#include "weir_limits.h"

int engine_add_object(Engine *e, CatObj *o, bool do_persist, WError *err)
{
    if (do_persist)
        o->tz = tz_current(); /* a new object: the zone its statement was planned in */
    if (do_persist && cat_entry_put(e->stor, o, err))
        return -1;
    cat_insert(e->cat, o);
    return 0;
}

int engine_rename_object(Engine *e, CatObj *o, const char *new_name, WError *err)
{
    char *old = o->name;
    o->name = xstrdup(new_name);
    if (cat_entry_put(e->stor, o, err)) {
        free(o->name);
        o->name = old;
        return -1;
    }
    o->old_names = xrealloc(o->old_names, sizeof(char *) * (size_t)(o->n_old_names + 1));
    o->old_names[o->n_old_names++] = old;
    o->rel.name = o->name;
    /* The stored ALTER SOURCE names the object: say the new name from the
     * next checkpoint on (replay applies it by id whatever name it says). */
    const char *rest = o->source.alter_sql ? strstr(o->source.alter_sql, "\" SET (") : NULL;
    if (rest) {
        Buf b = BUF_INIT;
        buf_printf(&b, "ALTER %s \"%s%s", o->kind == CAT_TABLE ? "TABLE" : "SOURCE", o->name, rest);
        free(o->source.alter_sql);
        o->source.alter_sql = xstrdup(b.data);
        buf_free(&b);
        o->source.altered = true;
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
        if (o->flow.df)
            rt_dataflow_set_name(o->flow.df, o->name);
        o->cat_dirty = true;
    }
    e->dirty = true;
}

int engine_remove_object(Engine *e, CatObj *o, WError *err)
{
    engine_checkpoint_wait(e, NULL); /* it may carry o's catalog entry */
    /* A view's late-rows relation goes with it (its table is among the view's). */
    CAT_FOREACH(e->cat, CAT_ANY, l)
        if (l->view.late_of == o) {
            cat_unlink(e->cat, l);
            cat_obj_free(l);
        }
    if (stor_catalog_delete(e->stor, o->id, err) < 0)
        return -1;
    if (o->kind == CAT_SINK && o->sink.rt && o->sink.from && o->sink.from->flow.df) {
        rt_dataflow_detach_sink(o->sink.from->flow.df, o->sink.rt);
        o->sink.rt = NULL;
    }
    if (o->flow.df)
        engine_stop_view(e, o);
    /* The catalog entry is gone first: a crash now leaves orphan state rows
     * at worst, never a view without its state. */
    for (int i = 0; i < o->n_table_ids; i++)
        if (stor_table_drop(e->stor, o->table_ids[i], err))
            return -1;
    cat_unlink(e->cat, o);
    cat_obj_free(o);
    return 0;
}

/* ---- the planner's view of the catalog ----------------------------------------- */

static const CatRelation *cat_lookup(void *ctx, const char *name)
{
    PlanCatCtx *c = ctx;
    CatObj *o = cat_find(c->e->cat, name);
    if (o && o->view.sink_query)
        return NULL; /* a sink's own query: nothing else reads it */
    if (o)
        return &o->rel;
    return c->a ? sysview_lookup(c->e, name, c->a) : NULL;
}

/* PlanCatalog.new_table_id. The planner has no error path for it (planner.h),
 * so a failure hands it 0, is kept in the context, and the caller turns it
 * into the statement's error once planning returns (engine_plan_ids_ok). */
static uint64_t cat_new_table(void *ctx)
{
    PlanCatCtx *c = ctx;
    if (c->dry_run)
        return ++c->fake;
    if (c->id_failed)
        return 0;
    CatObj *o = c->owner;
    if (c->replay) {
        if (c->next_replay < o->n_table_ids)
            return o->table_ids[c->next_replay++];
        c->id_failed = true;
        werr(&c->id_err, SQLSTATE_INTERNAL, 0,
             "the catalog entry of \"%s\" holds %d state table ids; its plan needs more", o->name, o->n_table_ids);
        return 0;
    }
    uint64_t id = 0;
    if (stor_next_id(c->e->stor, &id, &c->id_err)) {
        c->id_failed = true;
        return 0;
    }
    o->table_ids = xrealloc(o->table_ids, sizeof(uint64_t) * (size_t)(o->n_table_ids + 1));
    o->table_ids[o->n_table_ids++] = id;
    return id;
}

PlanCatalog engine_plan_catalog(Engine *e, PlanCatCtx *ctx, CatObj *owner, bool replay, bool dry_run, Arena *a)
{
    *ctx = (PlanCatCtx){.e = e, .a = a, .owner = owner, .replay = replay, .dry_run = dry_run};
    return (PlanCatalog){.ctx = ctx, .lookup = cat_lookup, .new_table_id = cat_new_table};
}

int engine_plan_ids_ok(const PlanCatCtx *ctx, WError *err)
{
    if (!ctx->id_failed)
        return 0;
    *err = ctx->id_err;
    return -1;
}

static RtDataflow *view_dataflow(void *ctx, uint64_t table_id)
{
    Engine *e = ctx;
    CAT_FOREACH(e->cat, CAT_ANY, o)
        if ((o->kind == CAT_VIEW || o->kind == CAT_TABLE) && o->flow.df &&
            o->rel.table_id == table_id)
            return o->flow.df;
    return NULL;
}

/* RtEnv.owned_partitions: the work group's assignment (cluster.c). Before
 * the cluster is open (views started by the local catalog's replay) a
 * node owns nothing yet; the group's first assignment reopens them. */
static int owned_partitions(void *ctx, const char *topic, int32_t *out, int max)
{
    Engine *e = ctx;
    if (!e->rt_cluster)
        return -1;
    return e->cluster ? cluster_owned_partitions(e->cluster, topic, out, max) : 0;
}

/* After a rebalance has been quiet for CLUSTER_REBALANCE_QUIET_MS: reopens
 * the distributed views whose share (source partitions, key groups)
 * changed. Stopped without a checkpoint, a view restarts from its last
 * one, with the new share: rows replayed are dropped by (task, seq), key
 * groups lost are dropped, key groups gained are read from offset 0.
 * Engine lock held. */
static void follow_assignment(Engine *e, int64_t now)
{
    int64_t changed = cluster_work_changed_ms(e->cluster);
    if (!changed || changed == e->work_seen_ms || now - changed < CLUSTER_REBALANCE_QUIET_MS)
        return;
    /* Cut off from Kafka, the group takes this node's share away ("lost")
     * but nothing can be reopened: each try would hold the engine lock for
     * the broker's connect timeout, and every statement with it. The views
     * keep what they hold and serve reads of it (docs/cluster.md, "Kafka
     * down"); the assignment that follows the broker's return reopens them. */
    if (cluster_cut_off(e->cluster, NULL))
        return;
    e->work_seen_ms = changed;
    CAT_FOREACH(e->cat, CAT_KINDS(CAT_VIEW), o) {
        if (!o->flow.df || !rt_dataflow_assignment_changed(o->flow.df))
            continue;
        WError err = {0};
        engine_stop_view(e, o);
        if (engine_start_view(e, o, &err))
            wlog_warn("engine", "view %s: cannot reopen with its new key groups: %s (retried)", o->name, err.msg);
        else
            wlog_info("engine", "view %s reopened with its new share of the cluster's work", o->name);
    }
}

static StorTable *view_table(void *ctx, uint64_t table_id)
{
    Engine *e = ctx;
    StorTable *gathered = e->gather ? cluster_gather_table(e->gather, table_id) : NULL;
    if (gathered)
        return gathered; /* a distributed view's whole rows, read from every node for this SELECT */
    CAT_FOREACH(e->cat, CAT_ANY, o) {
        /* A distributed view's rows here are only this node's key groups:
         * a reader that did not gather them gets none (the scan then says
         * so), never a part presented as the whole view. */
        if (o->flow.df && o->rel.table_id == table_id)
            return cluster_view_whole_here(o->flow.df, o->flow.plan) ? rt_dataflow_view_table(o->flow.df) : NULL;
        StorTable *t = o->flow.df ? rt_dataflow_find_table(o->flow.df, table_id) : NULL;
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
    RtKafkaProp props[2 + WEIR_MAX_KAFKA_PROPERTIES] = {{"linger.ms", "0"}, {"acks", "all"}};
    int n = 2;
    assert(n_extra <= WEIR_MAX_KAFKA_PROPERTIES); /* plan_source/plan_table refused more */
    for (int i = 0; i < n_extra && n < 2 + WEIR_MAX_KAFKA_PROPERTIES; i++)
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

/* Errors after which retrying cannot help: the view waits for RESUME (or
 * for ALTER SOURCE to change the policy), instead of the 2 s retry. */
static bool waits_for_resume(const WError *err)
{
    return strcmp(err->sqlstate, RT_SQLSTATE_SOURCE_LOST) == 0 || strcmp(err->sqlstate, RT_SQLSTATE_OFFSET_GAP) == 0;
}

int engine_start_view(Engine *e, CatObj *v, WError *err)
{
    if (rt_dataflow_open(&e->rt, v->flow.plan, &v->flow.df, err)) {
        snprintf(v->flow.stop_error, sizeof v->flow.stop_error, "%s", err->msg);
        /* A deleted or shrunk topic, or an offset gap, waits for RESUME, not the 2 s retry. */
        if (waits_for_resume(err) && !v->flow.failed) {
            v->flow.failed = true;
            memset(&v->flow.fail, 0, sizeof v->flow.fail);
            wlog_warn("engine", "view %s stopped: %s (ALTER MATERIALIZED VIEW %s RESUME retries)", v->name,
                    err->msg, v->name);
        }
        return -1;
    }
    rt_dataflow_set_name(v->flow.df, v->name);
    for (int i = 0; i < v->flow.n_skips; i++)
        rt_dataflow_skip_record(v->flow.df, v->flow.skips[i].source, v->flow.skips[i].partition, v->flow.skips[i].offset);
    v->flow.stop_error[0] = 0;
    v->flow.failed = false;
    CAT_FOREACH(e->cat, CAT_ANY, s) {
        if (s->kind != CAT_SINK || s->sink.from != v || s->sink.rt)
            continue;
        WError serr = {0};
        if (rt_dataflow_attach_sink(v->flow.df, &s->sink.spec, s->sink.view_cols, s->table_ids[0], &s->sink.rt, &serr))
            wlog_error("engine", "sink %s cannot start: %s", s->name, serr.msg);
    }
    return 0;
}

int engine_resume_view(Engine *e, CatObj *v, WError *err)
{
    if (v->flow.df)
        return 0;
    if (v->flow.failed && v->flow.fail.source[0]) { /* a bad record, not a lost topic: skip it */
        v->flow.skips = xrealloc(v->flow.skips, sizeof(RtFailedRecord) * (size_t)(v->flow.n_skips + 1));
        v->flow.skips[v->flow.n_skips++] = v->flow.fail;
        wlog_warn("engine", "view %s resumed: skipping source %s partition %d offset %lld", v->name,
                v->flow.fail.source, (int)v->flow.fail.partition, (long long)v->flow.fail.offset);
    }
    if (engine_start_view(e, v, err))
        return -1;
    wlog_info("engine", "view %s is running again", v->name);
    return 0;
}

/* Does view d read view v's changelog? */
static bool reads_view(const CatObj *d, const CatObj *v)
{
    if (d->kind != CAT_VIEW || !d->flow.plan)
        return false;
    for (int i = 0; i < d->flow.plan->n_nodes; i++)
        if (d->flow.plan->nodes[i]->kind == PN_VIEW_SOURCE && d->flow.plan->nodes[i]->scan_rel == &v->rel)
            return true;
    return false;
}

void engine_stop_view(Engine *e, CatObj *v)
{
    engine_checkpoint_wait(e, NULL); /* it holds this view's tables */
    /* Views fed by this one stop first (the engine restarts them when it runs again). */
    CAT_FOREACH(e->cat, CAT_ANY, o)
        if (o->flow.df && reads_view(o, v))
            engine_stop_view(e, o);
    /* Changefeeds first: their taps are freed with the dataflow. */
    subs_view_stopped(e, v);
    CAT_FOREACH(e->cat, CAT_ANY, s) {
        if (s->kind == CAT_SINK && s->sink.from == v && s->sink.rt) {
            rt_dataflow_detach_sink(v->flow.df, s->sink.rt);
            s->sink.rt = NULL;
        }
    }
    rt_dataflow_close(v->flow.df);
    v->flow.df = NULL;
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
    CAT_FOREACH(e->cat, CAT_ANY, o) {
        if (o->cat_in_ck)
            o->cat_dirty = true;
        o->cat_in_ck = false;
    }
}

/* Snapshot every dataflow into a new checkpoint and start writing it on
 * ck_thread. The engine keeps stepping meanwhile: writes after the
 * snapshot belong to the next epoch. Lock held, nothing in flight. */
static int checkpoint_start(Engine *e, WError *err)
{
    StorCheckpoint *ck;
    uint64_t epoch = e->epoch + 1;
    int64_t t0 = clock_wall_us();
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
    CAT_FOREACH(e->cat, CAT_ANY, o) {
        if (o->source.altered) {
            char key[64];
            snprintf(key, sizeof key, "alter/%llu", (unsigned long long)o->id);
            const char *v = o->source.alter_sql ? o->source.alter_sql : "";
            if (stor_checkpoint_put_meta(ck, key, v, strlen(v), err)) {
                checkpoint_abort(e, ck);
                return -1;
            }
        }
        if (o->cat_dirty) {
            Buf body = BUF_INIT;
            cat_entry_body(o, &body);
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
        if (o->flow.df && rt_dataflow_checkpoint(o->flow.df, ck, epoch, err)) {
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
    wlog_error("engine", "checkpoint failed: %s", msg);
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
    CAT_FOREACH(e->cat, CAT_ANY, o) {
        if (rc && o->cat_in_ck)
            o->cat_dirty = true;
        o->cat_in_ck = false;
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
    CAT_FOREACH(e->cat, CAT_ANY, o)
        if (o->flow.df) {
            RtStats vst;
            rt_dataflow_committed(o->flow.df, epoch);
            rt_dataflow_stats(o->flow.df, &vst);
            o->flow.changes_at_commit = vst.rows_out;
        }
    e->epoch = epoch;
    e->checkpoints++;
    StorStats st;
    stor_stats(e->stor, &st);
    CkptRecord *h = &e->history[e->n_history++ % CKPT_HISTORY];
    *h = (CkptRecord){.epoch = epoch, .started_us = e->ck_started_us,
                      .duration_us = clock_wall_us() - e->ck_started_us,
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
    e->last_checkpoint_ms = clock_mono_ms();
    return rc;
}

/* ---- the engine thread ------------------------------------------------------- */

static uint64_t state_dirty_bytes(Engine *e)
{
    uint64_t sum = 0;
    CAT_FOREACH(e->cat, CAT_ANY, o)
        if (o->flow.df)
            sum += rt_dataflow_dirty_bytes(o->flow.df);
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
        wlog_warn("engine", "views paused: %llu bytes of operator state are not checkpointed, over "
                "--state-memory-limit %llu; reading resumes after a checkpoint succeeds%s%s",
                (unsigned long long)e->state_dirty, (unsigned long long)e->state_limit,
                e->ck_failing ? " (last checkpoint failed: " : "", e->ck_failing ? "see above)" : "");
    else
        wlog_info("engine", "views resumed");
}

static void *engine_main(void *arg)
{
    Engine *e = arg;
    pthread_setname_np(pthread_self(), "weir-engine"); /* for top -H, perf, gdb */
    int64_t last_retry = 0;
    pthread_mutex_lock(&e->lock);
    while (!e->stop) {
        bool any = false;
        CAT_FOREACH(e->cat, CAT_ANY, o) {
            if (e->paused)
                break;
            if (!o->flow.df)
                continue;
            bool did = false;
            WError err = {0};
            if (rt_dataflow_step(o->flow.df, 0, &did, &err)) {
                /* A bad record under on_error = 'fail' keeps the view
                 * stopped until RESUME; anything else is retried. */
                o->flow.failed = rt_dataflow_failed_record(o->flow.df, &o->flow.fail);
                snprintf(o->flow.stop_error, sizeof o->flow.stop_error, "%s", err.msg);
                if (!o->flow.failed && waits_for_resume(&err)) {
                    /* Its topic was deleted or shrunk, or records it had not read were: stopped until RESUME. */
                    o->flow.failed = true;
                    memset(&o->flow.fail, 0, sizeof o->flow.fail);
                    wlog_warn("engine", "view %s stopped: %s (ALTER MATERIALIZED VIEW %s RESUME retries)",
                            o->name, err.msg, o->name);
                } else if (o->flow.failed)
                    wlog_warn("engine", "view %s stopped: %s (ALTER MATERIALIZED VIEW %s RESUME skips it)",
                            o->name, err.msg, o->name);
                else
                    wlog_warn("engine", "view %s stopped: %s", o->name, err.msg);
                engine_stop_view(e, o);
                continue;
            }
            any |= did;
        }
        if (any)
            e->dirty = true;
        /* A view's state past its state_ttl is deleted by a checkpoint, even when no row comes. */
        CAT_FOREACH(e->cat, CAT_ANY, o) {
            if (e->dirty)
                break;
            if (o->flow.df && rt_dataflow_expiry_due(o->flow.df))
                e->dirty = true;
        }
        int64_t now = clock_mono_ms();
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
        if (e->cluster)
            follow_assignment(e, now);
        /* Views whose dataflow could not start (broker down at start) are retried. */
        if (now - last_retry > 2000) {
            last_retry = now;
            CAT_FOREACH(e->cat, CAT_ANY, o) {
                if ((o->kind == CAT_VIEW || o->kind == CAT_TABLE) && o->flow.plan && !o->flow.df && !o->flow.failed) {
                    WError err = {0};
                    if (engine_start_view(e, o, &err) == 0)
                        wlog_info("engine", "view %s is running again", o->name);
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
            wlog_error("engine", "cannot restore %s for %s: %s", b.data, o->name, err.msg);
        else
            o->source.altered = true;
        arena_free(a);
    } else if (found < 0) {
        wlog_error("engine", "cannot read the ALTER SOURCE of %s: %s", o->name, err.msg);
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
    CatEntry *ents = xcalloc((size_t)(l.n ? l.n : 1), sizeof *ents);
    for (int k = 0; k < 2 * l.n && !rc; k++) {
        int pass = k / l.n; /* 0: everything but sinks, 1: sinks */
        Loaded *it = &l.items[k % l.n];
        CatEntry *ce = &ents[k % l.n];
        if (pass == 0 && cat_entry_decode(it->id, it->body, it->len, ce, err)) {
            rc = -1;
            break;
        }
        if (!ce->obj) {
            if (pass == 0)
                users_load(e, it->id, ce->user_name, ce->user_verifier);
            continue;
        }
        if ((ce->obj->kind == CAT_SINK) != (pass == 1))
            continue;
        CatObj *o = ce->obj;
        ce->obj = NULL; /* replayed: the catalog's or freed below */
        Arena *a = arena_new(0);
        AstStmt **stmts;
        int n_stmts;
        WError perr = {0};
        if (parse_sql(o->sql, a, &stmts, &n_stmts, &perr) || n_stmts != 1) {
            wlog_error("engine", "cannot replay %s: %s", o->name, perr.msg);
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
            wlog_error("engine", "cannot restore %s: %s", o->name, cerr.msg);
            cat_obj_free(o);
        } else if (o->kind == CAT_SOURCE || o->kind == CAT_TABLE) {
            replay_alter(e, o);
        }
        arena_free(a);
    }
    /* A sink's query whose sink is gone (the server stopped between
     * writing the two entries, or the sink could not be restored) is
     * dropped with its state: nothing can read it. */
    if (!rc)
        CAT_FOREACH(e->cat, CAT_KINDS(CAT_VIEW), o)
            if (o->view.sink_query && !o->view.sink_owner) {
                wlog_warn("engine", "dropping %s: its sink is gone", o->name);
                WError derr = {0};
                if (engine_remove_object(e, o, &derr)) /* removes o (and what follows it): the iteration allows it */
                    wlog_error("engine", "cannot drop %s: %s", o->name, derr.msg);
            }
    for (int i = 0; i < l.n; i++) {
        free(l.items[i].body);
        cat_obj_free(ents[i].obj); /* not replayed: an earlier entry was corrupt */
        free(ents[i].user_name);
        free(ents[i].user_verifier);
    }
    free(ents);
    free(l.items);
    return rc;
}

int engine_open(const EngineConfig *cfg, Engine **out, WError *err)
{
    Engine *e = xcalloc(1, sizeof *e);
    e->cat = cat_new();
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
                     .view_dataflow = view_dataflow, .ctx = e, .owned_partitions = owned_partitions};
    e->last_checkpoint_ms = clock_mono_ms();
    /* A data directory serves one node of one cluster (or none): checked
     * before anything is written. */
    if (cluster_check_dir(e, cfg->cluster, cfg->node_id, err)) {
        engine_close(e);
        return -1;
    }
    /* Distributed views run under the work group's assignment (phase 2).
     * Known before the local catalog's replay, which plans the views as
     * the cluster does (e->cluster_name is set only once the node is
     * accepted into the cluster). */
    if (cfg->cluster) {
        e->rt_cluster = xstrdup(cfg->cluster);
        e->rt.cluster = e->rt_cluster;
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
            wlog_error("engine", "final checkpoint failed: %s", err.msg);
    }
    /* Sinks first: after a SWAP a sink may hang off a view created after it. */
    CAT_FOREACH(e->cat, CAT_KINDS(CAT_SINK), s) {
        cat_unlink(e->cat, s);
        cat_obj_free(s);
    }
    CAT_FOREACH(e->cat, CAT_ANY, o)
        subs_view_stopped(e, o);
    cat_free(e->cat);
    users_free(e);
    rt_kafka_producer_close(e->producer);
    free(e->producer_bootstrap);
    stor_close(e->stor);
    free(e->data_dir);
    free(e->kafka_bootstrap);
    free(e->cluster_name);
    free(e->rt_cluster);
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
                       .query = session_query, .execute = session_execute,
                       .param_types = session_param_types, .user_verifier = users_verifier,
                       .idle_timeout_ms = session_idle_timeout, .in_transaction = session_in_transaction};
}
