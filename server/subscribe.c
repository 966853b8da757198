/*
 * subscribe.c: changefeeds over a materialized view, for SUBSCRIBE over
 * pgwire and for Server-Sent Events over HTTP (http.c).
 *
 * A Subscription taps the view's dataflow (rt_dataflow_subscribe). The
 * runtime calls its callbacks on the engine thread with the engine lock
 * held, so they only format the change as text and append it to the
 * subscription's own queue (its own mutex and condition variable); the
 * consumer (a session thread, an HTTP connection thread) waits on that
 * queue without the engine lock. A consumer that lets more than
 * SUB_MAX_QUEUE events pile up is cut off with an error rather than waited
 * for: the engine never slows down for a reader.
 *
 * The snapshot (the view's rows, as an ad hoc SELECT * would return them)
 * and the tap are taken in one critical section of the engine lock, so no
 * change falls between them or is seen twice. Snapshot rows carry the
 * epoch in progress (the last committed epoch + 1): they include whatever
 * of that epoch was applied before the subscription began, and the changes
 * that follow carry that epoch or later ones. A progress event for epoch E
 * says every change of E has been queued.
 *
 * When a view's dataflow stops (DROP, a failing dataflow, engine close)
 * engine_stop_view calls subs_view_stopped first: each subscription on the
 * view is detached and ends with an error, so no RtSubscriber outlives its
 * dataflow.
 *
 * Lock order: the engine lock, then a subscription's mutex. A consumer
 * never takes the engine lock while holding a subscription's mutex.
 */
#include "engine_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define SUB_POLL_MS 100       /* how often a waiting SUBSCRIBE checks for cancellation */

struct Subscription {
    Engine *e;
    CatObj *view;             /* NULL once the view's dataflow stopped */
    RtSubscriber *rs;         /* NULL once detached */
    struct Subscription *next; /* in e->subs */
    SubSchema schema;         /* copies: outlive the view */
    int *vis;                 /* view column of each visible column */
    pthread_mutex_t mu;       /* guards everything below */
    pthread_cond_t cond;
    SubEvent *head, *tail;
    long n_queued;            /* events in the queue, snapshot rows excluded */
    bool ended;
    WError end_err;           /* why it ended */
    /* A view's history (CatObj.flow.history): nobody reads the queue; over
     * SUB_HISTORY events the oldest go, and every change of an epoch after
     * `complete_after` is still in it. */
    bool history;
    uint64_t complete_after;
    size_t history_bytes;     /* of the events in the queue (history only) */
    SubEvent *pending;        /* upsert envelope: a -1 waiting to see whether a +1 of its key follows */
};

/* ---- events ------------------------------------------------------------------- */

/* One allocation: the event, then vals[n], lens[n], then the text. */
SubEvent *sub_event_new(SubEventKind kind, uint64_t epoch, int diff, int n, const char *const *vals,
                        const int *lens)
{
    size_t text = 0;
    for (int i = 0; i < n; i++)
        if (vals[i])
            text += (size_t)lens[i] + 1;
    size_t size = sizeof(SubEvent) + (sizeof(char *) + sizeof(int)) * (size_t)n + text;
    SubEvent *ev = xmalloc(size);
    memset(ev, 0, sizeof *ev);
    ev->size = size;
    ev->kind = kind;
    ev->epoch = epoch;
    ev->diff = diff;
    ev->n_vals = n;
    ev->vals = (const char **)(ev + 1);
    ev->lens = (int *)(ev->vals + n);
    char *p = (char *)(ev->lens + n);
    for (int i = 0; i < n; i++) {
        if (!vals[i]) {
            ev->vals[i] = NULL;
            ev->lens[i] = -1;
            continue;
        }
        memcpy(p, vals[i], (size_t)lens[i]);
        p[lens[i]] = 0;
        ev->vals[i] = p;
        ev->lens[i] = lens[i];
        p += lens[i] + 1;
    }
    return ev;
}

void sub_events_free(SubEvent *ev)
{
    while (ev) {
        SubEvent *next = ev->next;
        free(ev);
        ev = next;
    }
}

/* Appends ev (or drops it when the subscription is over). s->mu held. */
static void enqueue_locked(Subscription *s, SubEvent *ev, bool counted)
{
    if (s->ended) {
        free(ev);
        return;
    }
    while (s->history && s->head && (s->n_queued >= SUB_HISTORY || s->history_bytes + ev->size > SUB_HISTORY_BYTES)) {
        SubEvent *old = s->head;
        s->head = old->next;
        if (!s->head)
            s->tail = NULL;
        if (old->kind == SUB_ROW && old->epoch > s->complete_after)
            s->complete_after = old->epoch; /* a change of that epoch is gone */
        s->history_bytes -= old->size;
        free(old);
        s->n_queued--;
    }
    if (s->history)
        s->history_bytes += ev->size;
    if (counted && s->n_queued >= SUB_MAX_QUEUE) {
        free(ev);
        s->ended = true;
        werr(&s->end_err, SQLSTATE_PROGRAM_LIMIT, 0,
             "subscription to \"%s\" cut off: the client fell %d changes behind", s->schema.view, SUB_MAX_QUEUE);
        werr_hint(&s->end_err, "Read the stream faster, or subscribe again to start from a fresh snapshot.");
        sub_events_free(s->head);
        s->head = s->tail = NULL;
        s->n_queued = 0;
        pthread_cond_broadcast(&s->cond);
        return;
    }
    if (s->tail)
        s->tail->next = ev;
    else
        s->head = ev;
    s->tail = ev;
    if (counted)
        s->n_queued++;
    pthread_cond_broadcast(&s->cond);
}

/* Do rows a and b have the same key (upsert envelope)? */
static bool same_key(const SubSchema *sc, const SubEvent *a, const SubEvent *b)
{
    for (int k = 0; k < sc->n_key; k++) {
        int i = sc->key[k];
        if (a->lens[i] != b->lens[i] || (a->lens[i] > 0 && memcmp(a->vals[i], b->vals[i], (size_t)a->lens[i])))
            return false;
    }
    return true;
}

/* Queues a change or progress event; in the upsert envelope a -1 waits for
 * the next event: followed by a +1 of its key it was the first half of an
 * update and goes away (the +1 is the upsert), otherwise it is a delete.
 * The end of an epoch (its progress event) settles it too. s->mu held. */
static void deliver_locked(Subscription *s, SubEvent *ev)
{
    if (!s->schema.upsert) {
        enqueue_locked(s, ev, true);
        return;
    }
    if (s->pending) {
        SubEvent *p = s->pending;
        s->pending = NULL;
        if (ev->kind == SUB_ROW && ev->diff > 0 && same_key(&s->schema, p, ev))
            free(p);
        else
            enqueue_locked(s, p, true);
    }
    if (ev->kind == SUB_ROW && ev->diff < 0 && !s->ended)
        s->pending = ev;
    else
        enqueue_locked(s, ev, true);
}

/* ---- runtime callbacks (engine thread, engine lock held) ---------------------------- */

static void on_change(void *arg, uint64_t epoch, int n_cols, const Value *row, int diff)
{
    Subscription *s = arg;
    int n = s->schema.n_cols;
    const char *vals[SUB_MAX_COLS];
    int lens[SUB_MAX_COLS];
    size_t offs[SUB_MAX_COLS];
    Buf text = BUF_INIT;
    for (int i = 0; i < n; i++) {
        int k = s->vis[i];
        if (k >= n_cols || row[k].null) {
            offs[i] = (size_t)-1;
            continue;
        }
        offs[i] = text.len;
        value_to_text(&row[k], &text);
        lens[i] = (int)(text.len - offs[i]);
    }
    for (int i = 0; i < n; i++)
        vals[i] = offs[i] == (size_t)-1 ? NULL : text.data + offs[i];
    SubEvent *ev = sub_event_new(SUB_ROW, epoch, diff, n, vals, lens);
    buf_free(&text);
    pthread_mutex_lock(&s->mu);
    deliver_locked(s, ev);
    pthread_mutex_unlock(&s->mu);
}

static void on_progress(void *arg, uint64_t epoch)
{
    Subscription *s = arg;
    SubEvent *ev = sub_event_new(SUB_PROGRESS, epoch, 0, 0, NULL, NULL);
    pthread_mutex_lock(&s->mu);
    deliver_locked(s, ev);
    pthread_mutex_unlock(&s->mu);
}

/* ---- snapshots ----------------------------------------------------------------------- */

int view_snapshot(Engine *e, CatObj *v, RtRowFn fn, void *arg, WError *err)
{
    if (v->kind != CAT_VIEW && v->kind != CAT_TABLE)
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, 0, "\"%s\" is not a materialized view", v->name);
    if (!v->flow.df)
        return werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, 0, "materialized view \"%s\" is not running", v->name);
    /* The snapshot is the ad hoc query SELECT * FROM "v": the same rows, in
     * the same text form, as a client would get. */
    Buf sql = BUF_INIT;
    buf_puts(&sql, "SELECT * FROM \"");
    for (const char *p = v->name; *p; p++) {
        if (*p == '"')
            buf_putc(&sql, '"');
        buf_putc(&sql, *p);
    }
    buf_putc(&sql, '"');
    Arena *a = arena_new(0);
    AstStmt **stmts;
    int n = 0;
    long rows = -1;
    if (parse_sql(sql.data, a, &stmts, &n, err) == 0 && n == 1) {
        PlanCatCtx pcx;
        PlanCatalog cat = engine_plan_catalog(e, &pcx, NULL, false, true, a);
        PlanQuery *q = plan_query(stmts[0]->u.select, &cat, a, err);
        if (q)
            rows = rt_query_run(&e->rt, q, fn, arg, err);
    }
    arena_free(a);
    buf_free(&sql);
    return rows < 0 ? -1 : 0;
}

void sub_schema_init(CatObj *v, SubSchema *out, int *vis)
{
    memset(out, 0, sizeof *out);
    out->view = v->name;
    for (int i = 0; i < v->rel.n_cols && out->n_cols < SUB_MAX_COLS; i++) {
        if (v->rel.col_hidden && v->rel.col_hidden[i])
            continue;
        if (vis)
            vis[out->n_cols] = i;
        out->names[out->n_cols] = v->rel.col_names[i];
        out->types[out->n_cols] = v->rel.col_types[i];
        out->n_cols++;
    }
}

typedef struct SnapCtx {
    Subscription *s;
    uint64_t epoch;
} SnapCtx;

static int snapshot_row(void *arg, int n, const char *const *vals, const int *lens)
{
    SnapCtx *c = arg;
    Subscription *s = c->s;
    if (n != s->schema.n_cols)
        return 1;
    int l[SUB_MAX_COLS];
    for (int i = 0; i < n; i++)
        l[i] = vals[i] ? (lens && lens[i] >= 0 ? lens[i] : (int)strlen(vals[i])) : -1;
    SubEvent *ev = sub_event_new(SUB_ROW, c->epoch, 1, n, vals, l);
    ev->snapshot = true;
    pthread_mutex_lock(&s->mu);
    enqueue_locked(s, ev, false);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* ---- the subscription ------------------------------------------------------------------- */

static void sub_free(Subscription *s)
{
    free(s->pending);
    sub_events_free(s->head);
    free((char *)s->schema.view);
    for (int i = 0; i < s->schema.n_cols; i++)
        free((char *)s->schema.names[i]);
    free(s->vis);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cond);
    free(s);
}

static void history_start(Engine *e, CatObj *v);

/* A subscription to v, with or without its snapshot (engine lock held). */
static int open_sub(Engine *e, CatObj *v, bool snapshot, Subscription **out, WError *err)
{
    if (v->kind != CAT_VIEW && v->kind != CAT_TABLE)
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, 0, "\"%s\" is not a materialized view", v->name);
    if (!v->flow.df)
        return werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, 0, "materialized view \"%s\" is not running", v->name);
    /* A distributed view's changes happen on the nodes that own its key
     * groups, each on its own: a changefeed from one node would miss the
     * others' (and the groups it owns change in a rebalance). */
    if (v->flow.plan && v->flow.plan->distributed)
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0,
                    "feature not supported: SUBSCRIBE to materialized view \"%s\", whose rows are spread over the "
                    "cluster's nodes",
                    v->name),
               werr_hint(err, "Create the view WITH (placement = 'replicated') to subscribe to it on any node, or "
                              "read it with SELECT, which gathers it from every node."),
               -1;
    Subscription *s = xcalloc(1, sizeof *s);
    s->e = e;
    s->view = v;
    s->vis = xcalloc(SUB_MAX_COLS, sizeof(int));
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    sub_schema_init(v, &s->schema, s->vis);
    s->schema.view = xstrdup(v->name);
    for (int i = 0; i < s->schema.n_cols; i++)
        s->schema.names[i] = xstrdup(s->schema.names[i]);
    s->schema.epoch = engine_open_epoch(e);
    if (snapshot) {
        SnapCtx c = {s, s->schema.epoch};
        if (view_snapshot(e, v, snapshot_row, &c, err)) {
            sub_free(s);
            return -1;
        }
    }
    if (rt_dataflow_subscribe(v->flow.df, s->schema.epoch, on_change, on_progress, s, &s->rs)) {
        sub_free(s);
        return werr(err, SQLSTATE_INTERNAL, 0, "cannot subscribe to \"%s\"", v->name);
    }
    s->next = e->subs;
    e->subs = s;
    e->n_subs++;
    *out = s;
    return 0;
}

int sub_open(Engine *e, CatObj *v, bool snapshot, Subscription **out, WError *err)
{
    if (open_sub(e, v, snapshot, out, err))
        return -1;
    if (!v->flow.history)
        history_start(e, v);
    return 0;
}

/* Starts keeping v's changes, from the epoch in progress on (engine lock
 * held). A view without subscribers keeps none: its changes are not
 * formatted for nobody. */
static void history_start(Engine *e, CatObj *v)
{
    Subscription *h;
    WError err = {0};
    if (open_sub(e, v, false, &h, &err) == 0) {
        h->history = true;
        h->complete_after = h->schema.epoch - 1;
        e->n_subs--; /* not a changefeed anyone reads (/metrics counts those) */
        v->flow.history = h;
    }
}

/* Drops v's history (its view stopped or was swapped: the changes kept
 * no longer lead to what the name shows). Engine lock held. */
static void history_drop(Engine *e, CatObj *v)
{
    Subscription *h = v->flow.history;
    if (!h)
        return;
    v->flow.history = NULL;
    e->n_subs++; /* sub_close counts it out */
    sub_close(h);
}

static int upsert_key(CatObj *v, SubSchema *sc, const int *vis, WError *err);

static int open_after(Engine *e, CatObj *v, uint64_t after, bool upsert, Subscription **out, WError *err)
{
    if (after > e->epoch)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "epoch %llu of \"%s\" is not committed yet (the last is %llu)",
                    (unsigned long long)after, v->name, (unsigned long long)e->epoch);
    Subscription *h = v->flow.history;
    bool kept = false;
    if (h) {
        pthread_mutex_lock(&h->mu);
        kept = !h->ended && after >= h->complete_after;
        pthread_mutex_unlock(&h->mu);
    }
    if (!kept)
        return werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, 0, "cannot resume \"%s\" after epoch %llu: its changes since are not retained",
                    v->name, (unsigned long long)after),
               werr_hint(err, "weir keeps the last %d changes of a view from its first subscriber on, not across "
                              "restarts or a SWAP; subscribe with a snapshot.", SUB_HISTORY), -1;
    Subscription *s;
    if (open_sub(e, v, false, &s, err))
        return -1;
    if (upsert && upsert_key(v, &s->schema, s->vis, err)) {
        sub_close(s);
        return -1;
    }
    /* The engine lock is held: nothing reaches either queue meanwhile, so
     * the copied history and the live changes neither overlap nor leave a gap. */
    pthread_mutex_lock(&h->mu);
    pthread_mutex_lock(&s->mu);
    for (const SubEvent *ev = h->head; ev; ev = ev->next) {
        if (ev->epoch <= after)
            continue;
        SubEvent *c = sub_event_new(ev->kind, ev->epoch, ev->diff, ev->n_vals, ev->vals, ev->lens);
        deliver_locked(s, c);
    }
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&h->mu);
    *out = s;
    return 0;
}

int sub_open_after(Engine *e, CatObj *v, uint64_t after, Subscription **out, WError *err)
{
    return open_after(e, v, after, false, out, err);
}

/* The upsert envelope's key: v's primary key, every column of it visible. */
static int upsert_key(CatObj *v, SubSchema *sc, const int *vis, WError *err)
{
    const CatRelation *r = &v->rel;
    sc->n_key = 0;
    for (int k = 0; k < r->n_pk; k++) {
        int at = -1;
        for (int i = 0; i < sc->n_cols; i++)
            if (vis[i] == r->pk[k])
                at = i;
        if (at < 0) {
            sc->n_key = 0;
            break;
        }
        sc->key[sc->n_key++] = at;
    }
    if (sc->n_key == 0)
        return werr(err, SQLSTATE_INVALID_COLUMN_REFERENCE, 0, "envelope 'upsert' needs a key, and \"%s\" has none", v->name),
               werr_hint(err, "A view's key is its GROUP BY columns (or a table's PRIMARY KEY); subscribe to this "
                              "one with diffs."), -1;
    sc->upsert = true;
    return 0;
}

int sub_open_opts(Engine *e, CatObj *v, const SubOpts *o, Subscription **out, WError *err)
{
    if (o->after >= 0)
        return open_after(e, v, (uint64_t)o->after, o->upsert, out, err);
    Subscription *s;
    if (sub_open(e, v, o->snapshot, &s, err))
        return -1;
    /* Set before the engine lock is released: no change was delivered yet. */
    if (o->upsert && upsert_key(v, &s->schema, s->vis, err)) {
        sub_close(s);
        return -1;
    }
    *out = s;
    return 0;
}

const SubSchema *sub_schema(const Subscription *s) { return &s->schema; }

int sub_take(Subscription *s, int timeout_ms, SubEvent **events, WError *err)
{
    *events = NULL;
    pthread_mutex_lock(&s->mu);
    if (!s->head && !s->ended && timeout_ms > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += timeout_ms / 1000;
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        while (!s->head && !s->ended)
            if (pthread_cond_timedwait(&s->cond, &s->mu, &ts) == ETIMEDOUT)
                break;
    }
    /* What was queued before the end is still delivered; the error comes after it. */
    int rc = 0;
    if (s->head) {
        *events = s->head;
        s->head = s->tail = NULL;
        s->n_queued = 0;
    } else if (s->ended) {
        *err = s->end_err;
        rc = -1;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Detaches s from its view's dataflow (engine lock held). */
static void detach(Subscription *s)
{
    if (s->rs && s->view && s->view->flow.df)
        rt_dataflow_unsubscribe(s->view->flow.df, s->rs);
    s->rs = NULL;
    s->view = NULL;
}

void sub_close(Subscription *s)
{
    if (!s)
        return;
    Engine *e = s->e;
    detach(s);
    for (Subscription **p = &e->subs; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            e->n_subs--;
            break;
        }
    sub_free(s);
}

void subs_view_stopped(Engine *e, CatObj *v)
{
    history_drop(e, v);
    for (Subscription *s = e->subs; s; s = s->next) {
        if (s->view != v)
            continue;
        detach(s);
        pthread_mutex_lock(&s->mu);
        if (!s->ended) {
            s->ended = true;
            werr(&s->end_err, SQLSTATE_OBJECT_NOT_IN_STATE, 0, "materialized view \"%s\" stopped (dropped, or its dataflow failed)",
                 s->schema.view);
        }
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->mu);
    }
}

/* ---- ALTER MATERIALIZED VIEW ... SWAP WITH ------------------------------------------------ */

/* A view's rows as text, each encoded as one byte string (per column a
 * 4-byte length, 0xffffffff for NULL, then the bytes), so the two views'
 * rows compare with memcmp. */
typedef struct TextRows {
    int n, cap;
    Buf *rows;
} TextRows;

static int collect_row(void *arg, int n, const char *const *vals, const int *lens)
{
    TextRows *t = arg;
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->rows = xrealloc(t->rows, sizeof(Buf) * (size_t)t->cap);
    }
    Buf *b = &t->rows[t->n++];
    *b = (Buf)BUF_INIT;
    for (int i = 0; i < n; i++) {
        uint32_t len = vals[i] ? (uint32_t)(lens && lens[i] >= 0 ? lens[i] : (int)strlen(vals[i])) : UINT32_MAX;
        buf_append(b, &len, 4);
        if (vals[i])
            buf_append(b, vals[i], len);
    }
    return 0;
}

static int buf_cmp(const void *x, const void *y)
{
    const Buf *a = x, *b = y;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->data, b->data, n);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

static void text_rows_free(TextRows *t)
{
    for (int i = 0; i < t->n; i++)
        buf_free(&t->rows[i]);
    free(t->rows);
}

/* Queues the decoded row r as a change of diff (uncounted: a swap's
 * difference is bounded by the views' sizes, like a snapshot). */
static void queue_text_row(Subscription *s, const Buf *r, uint64_t epoch, int diff)
{
    const char *vals[SUB_MAX_COLS];
    int lens[SUB_MAX_COLS];
    size_t off = 0;
    int n = 0;
    while (off + 4 <= r->len && n < SUB_MAX_COLS) {
        uint32_t len;
        memcpy(&len, r->data + off, 4);
        off += 4;
        vals[n] = len == UINT32_MAX ? NULL : r->data + off;
        lens[n] = len == UINT32_MAX ? -1 : (int)len;
        off += len == UINT32_MAX ? 0 : len;
        n++;
    }
    SubEvent *ev = sub_event_new(SUB_ROW, epoch, diff, n, vals, lens);
    pthread_mutex_lock(&s->mu);
    enqueue_locked(s, ev, false);
    pthread_mutex_unlock(&s->mu);
}

/* Moves s to view to: queues the difference (rows of `gone` retracted,
 * rows of `came` inserted) and taps to's changes from the open epoch. */
static int move_sub(Engine *e, Subscription *s, CatObj *to, const TextRows *gone, const TextRows *came, WError *err)
{
    uint64_t epoch = engine_open_epoch(e);
    detach(s);
    for (int i = 0; i < gone->n; i++)
        queue_text_row(s, &gone->rows[i], epoch, -1);
    for (int i = 0; i < came->n; i++)
        queue_text_row(s, &came->rows[i], epoch, 1);
    SubSchema tmp;
    sub_schema_init(to, &tmp, s->vis);
    s->view = to;
    if (rt_dataflow_subscribe(to->flow.df, epoch, on_change, on_progress, s, &s->rs)) {
        s->view = NULL;
        pthread_mutex_lock(&s->mu);
        s->ended = true;
        werr(&s->end_err, SQLSTATE_INTERNAL, 0, "cannot subscribe to \"%s\" after the swap", s->schema.view);
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->mu);
        return werr(err, SQLSTATE_INTERNAL, 0, "cannot move a subscription of \"%s\"", s->schema.view);
    }
    return 0;
}

int subs_view_swap(Engine *e, CatObj *a, CatObj *b, WError *err)
{
    history_drop(e, a);
    history_drop(e, b);
    bool any = false;
    for (Subscription *s = e->subs; s && !any; s = s->next)
        any = s->view == a || s->view == b;
    if (!any)
        return 0;
    TextRows ra = {0}, rb = {0}, a_only = {0}, b_only = {0};
    int rc = view_snapshot(e, a, collect_row, &ra, err);
    if (!rc)
        rc = view_snapshot(e, b, collect_row, &rb, err);
    if (!rc) {
        /* Multiset difference by a merge of the sorted rows. The entries of
         * a_only and b_only borrow ra's and rb's buffers. */
        qsort(ra.rows, (size_t)ra.n, sizeof(Buf), buf_cmp);
        qsort(rb.rows, (size_t)rb.n, sizeof(Buf), buf_cmp);
        a_only.rows = xcalloc((size_t)ra.n + 1, sizeof(Buf));
        b_only.rows = xcalloc((size_t)rb.n + 1, sizeof(Buf));
        int i = 0, j = 0;
        while (i < ra.n || j < rb.n) {
            int c = i == ra.n ? 1 : j == rb.n ? -1 : buf_cmp(&ra.rows[i], &rb.rows[j]);
            if (c < 0)
                a_only.rows[a_only.n++] = ra.rows[i++];
            else if (c > 0)
                b_only.rows[b_only.n++] = rb.rows[j++];
            else
                i++, j++;
        }
        for (Subscription *s = e->subs; s && !rc; s = s->next) {
            if (s->view == a && s->rs)
                rc = move_sub(e, s, b, &a_only, &b_only, err);
            else if (s->view == b && s->rs)
                rc = move_sub(e, s, a, &b_only, &a_only, err);
        }
    }
    free(a_only.rows);
    free(b_only.rows);
    text_rows_free(&ra);
    text_rows_free(&rb);
    return rc;
}

/* ---- SUBSCRIBE over pgwire ----------------------------------------------------------------- */

static int bool_option(const AstOption *o, bool *out, WError *err)
{
    const char *v = o->value ? o->value : "true";
    if (!strcasecmp(v, "true") || !strcasecmp(v, "on") || !strcmp(v, "1"))
        *out = true;
    else if (!strcasecmp(v, "false") || !strcasecmp(v, "off") || !strcmp(v, "0"))
        *out = false;
    else
        return werr(err, SQLSTATE_INVALID_PARAMETER, o->pos, "option \"%s\" takes true or false, not \"%s\"",
                    o->key, v);
    return 0;
}

/* Appends v as one COPY text field: \N for NULL; backslash, tab, newline
 * and carriage return escaped. */
static void copy_field(Buf *b, const char *v, int len)
{
    if (!v) {
        buf_puts(b, "\\N");
        return;
    }
    for (int i = 0; i < len; i++) {
        char ch = v[i];
        switch (ch) {
        case '\\': buf_puts(b, "\\\\"); break;
        case '\t': buf_puts(b, "\\t"); break;
        case '\n': buf_puts(b, "\\n"); break;
        case '\r': buf_puts(b, "\\r"); break;
        default: buf_putc(b, ch); break;
        }
    }
}

/* Streams s to the client until it cancels, hangs up, or s ends. Runs
 * without the engine lock. Returns 0 when the client went away, -1 with
 * err otherwise (cancel: 57014). */
const char *sub_diff_text(const SubSchema *sc, const SubEvent *ev)
{
    if (sc->upsert)
        return ev->diff > 0 ? "upsert" : "delete";
    return ev->diff > 0 ? "1" : "-1";
}

bool sub_value_shown(const SubSchema *sc, const SubEvent *ev, int i)
{
    if (!sc->upsert || ev->diff > 0)
        return true;
    for (int k = 0; k < sc->n_key; k++)
        if (sc->key[k] == i)
            return true;
    return false; /* a delete carries only its key */
}

static int stream_copy(Subscription *s, bool progress, SrvResult *out, WError *err)
{
    Buf line = BUF_INIT;
    int n = s->schema.n_cols;
    int rc = 0;
    for (;;) {
        if (srv_result_cancelled(out)) {
            rc = werr(err, SQLSTATE_QUERY_CANCELED, 0, "%s", srv_result_cancel_message(out));
            break;
        }
        SubEvent *evs;
        WError serr = {0};
        int r = sub_take(s, SUB_POLL_MS, &evs, &serr);
        if (r < 0) {
            *err = serr;
            rc = -1;
            break;
        }
        bool gone = false;
        for (SubEvent *ev = evs; ev && !gone; ev = ev->next) {
            if (ev->kind == SUB_PROGRESS && !progress)
                continue;
            buf_reset(&line);
            buf_printf(&line, "%llu\t", (unsigned long long)ev->epoch);
            if (ev->kind == SUB_PROGRESS) {
                buf_puts(&line, "\\N");
                for (int i = 0; i < n; i++)
                    buf_puts(&line, "\t\\N");
            } else {
                buf_puts(&line, sub_diff_text(&s->schema, ev));
                for (int i = 0; i < n; i++) {
                    buf_putc(&line, '\t');
                    bool shown = sub_value_shown(&s->schema, ev, i);
                    copy_field(&line, shown ? ev->vals[i] : NULL, shown ? ev->lens[i] : -1);
                }
            }
            buf_putc(&line, '\n');
            gone = srv_result_copy_data(out, line.data, (int)line.len) < 0;
        }
        sub_events_free(evs);
        if (gone || (evs && srv_result_flush(out) < 0))
            break; /* the client is gone: nobody to tell */
    }
    buf_free(&line);
    return rc;
}

int sub_options(const AstSubscribe *sb, SubOpts *out, WError *err)
{
    bool snapshot = true, progress = false, snapshot_given = false, upsert = false;
    int64_t after = -1;
    for (int i = 0; i < ast_list_len(sb->options); i++) {
        const AstOption *o = AST_AT(sb->options, i);
        if (!strcasecmp(o->key, "snapshot")) {
            if (bool_option(o, &snapshot, err))
                return -1;
            snapshot_given = true;
        } else if (!strcasecmp(o->key, "progress")) {
            if (bool_option(o, &progress, err))
                return -1;
        } else if (!strcasecmp(o->key, "resume_after")) {
            char *end;
            errno = 0;
            long long v = o->value ? strtoll(o->value, &end, 10) : -1;
            if (!o->value || errno || *end || v < 0)
                return werr(err, SQLSTATE_INVALID_PARAMETER, o->pos,
                            "resume_after must be an epoch (a number from the stream's epoch column)");
            after = v;
        } else if (!strcasecmp(o->key, "envelope")) {
            if (!o->value || (strcasecmp(o->value, "upsert") && strcasecmp(o->value, "diff")))
                return werr(err, SQLSTATE_INVALID_PARAMETER, o->pos, "envelope must be 'diff' or 'upsert'");
            upsert = !strcasecmp(o->value, "upsert");
        } else {
            return werr(err, SQLSTATE_SYNTAX_ERROR, o->pos, "unrecognized SUBSCRIBE option \"%s\"", o->key),
                   werr_hint(err, "Options: snapshot, progress, resume_after, envelope."), -1;
        }
    }
    if (after >= 0 && snapshot_given && snapshot)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "resume_after continues a stream: it takes no snapshot");
    if (after >= 0)
        snapshot = false;
    for (int i = 0; i < ast_list_len(sb->copy_options); i++) {
        const AstOption *o = AST_AT(sb->copy_options, i);
        if (strcasecmp(o->key, "format") != 0 || !o->value || strcasecmp(o->value, "text") != 0)
            return werr(err, SQLSTATE_NOT_SUPPORTED, o->pos,
                        "feature not supported: COPY option %s %s (only FORMAT text)", o->key,
                        o->value ? o->value : "");
    }
    *out = (SubOpts){.snapshot = snapshot, .progress = progress, .upsert = upsert, .after = after};
    return 0;
}


CatObj *sub_view(Engine *e, const AstStmt *st, WError *err)
{
    const AstSubscribe *sb = st->u.subscribe;
    CatObj *v = cat_find(e->cat, sb->view);
    if (!v)
        return werr(err, SQLSTATE_UNDEFINED_TABLE, st->pos, "relation \"%s\" does not exist", sb->view), NULL;
    if (v->kind != CAT_VIEW && v->kind != CAT_TABLE)
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, st->pos, "cannot subscribe to \"%s\": not a materialized view or table",
                    v->name),
               werr_hint(err, "Create a materialized view over it and subscribe to that."), NULL;
    return v;
}

int session_subscribe(Engine *e, const AstStmt *st, SrvResult *out, WError *err)
{
    SubOpts o;
    if (sub_options(st->u.subscribe, &o, err))
        return -1;
    CatObj *v = sub_view(e, st, err);
    if (!v)
        return -1;
    Subscription *s;
    if (sub_open_opts(e, v, &o, &s, err))
        return err->pos = st->pos, -1;
    int rc = 0;
    if (srv_result_copy_begin(out, 2 + s->schema.n_cols) == 0) {
        /* Stream without the engine lock: the engine keeps running and the
         * callbacks fill the queue. The caller holds the lock around us. */
        pthread_mutex_unlock(&e->lock);
        rc = stream_copy(s, o.progress, out, err);
        pthread_mutex_lock(&e->lock);
    }
    sub_close(s);
    return rc;
}
