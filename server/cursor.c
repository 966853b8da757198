/*
 * cursor.c: DECLARE name CURSOR FOR {SELECT ... | SUBSCRIBE ...}, FETCH and
 * CLOSE, inside a transaction block (BEGIN ... COMMIT), as in Postgres and,
 * for SUBSCRIBE, Materialize.
 *
 * A SELECT cursor runs its query at DECLARE, on the snapshot the engine
 * lock gives, and keeps the rows (text form, as SubEvents) until FETCH hands
 * them out: every FETCH reads the same consistent snapshot, whatever the
 * views do meanwhile. Its size is bounded (CURSOR_MAX_BYTES, 54000).
 *
 * A SUBSCRIBE cursor opens a Subscription (subscribe.c) at DECLARE: the
 * snapshot and every later change queue up in it, and each FETCH takes up
 * to n of them, as rows of the same columns as COPY (SUBSCRIBE ...) TO
 * STDOUT (epoch, diff, the view's columns). When nothing is pending, FETCH
 * waits: until at least one row (the default), or until WITH (timeout =
 * '...') has passed, then answers what it has, possibly nothing. It waits
 * on the subscription's queue with the engine lock released, so the engine
 * and the other sessions go on; cancel and statement_timeout end the wait
 * (57014). The subscription's own limit applies: a cursor that lets more
 * than SUB_MAX_QUEUE changes pile up between FETCHes is cut off (54000,
 * after the rows queued before).
 *
 * Cursors belong to their session and end at COMMIT, ROLLBACK, CLOSE or the
 * end of the session, always under the engine lock (a subscription is
 * detached under it).
 */
#include "engine_int.h"
#include "clock.h"
#include "pg_oids.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

enum {
    MAX_CURSORS = 1000,                          /* per session (54000 beyond) */
    CURSOR_POLL_MS = 100,                        /* cancel checks while FETCH waits */
};
#define CURSOR_MAX_BYTES ((size_t)256 << 20)    /* a SELECT cursor's rows, text form */

typedef struct Cursor {
    struct Cursor *next;          /* in Session.cursors */
    char *name;
    Subscription *sub;            /* a SUBSCRIBE cursor; NULL for SELECT */
    bool progress;                /* SUBSCRIBE WITH (progress): progress rows are fetched too */
    int n_cols;                   /* FETCH's columns */
    char **names;
    uint32_t *oids;
    SubEvent *head, *tail;        /* rows not fetched yet, in order */
    bool ended;                   /* the subscription is over: end_err follows the rows */
    WError end_err;
} Cursor;

static void cursor_free(Cursor *c)
{
    sub_close(c->sub);
    sub_events_free(c->head);
    for (int i = 0; i < c->n_cols; i++)
        free(c->names[i]);
    free(c->names);
    free(c->oids);
    free(c->name);
    free(c);
}

static Cursor **cursor_find(Session *s, const char *name)
{
    Cursor **pp = &s->cursors;
    while (*pp && strcmp((*pp)->name, name) != 0)
        pp = &(*pp)->next;
    return pp;
}

void cursors_close_all(Session *s)
{
    while (s->cursors) {
        Cursor *c = s->cursors;
        s->cursors = c->next;
        cursor_free(c);
    }
    s->n_cursors = 0;
}

static void append(Cursor *c, SubEvent *evs)
{
    while (evs) {
        SubEvent *ev = evs;
        evs = ev->next;
        ev->next = NULL;
        if (ev->kind == SUB_PROGRESS && !c->progress) {
            free(ev);
            continue;
        }
        if (c->tail)
            c->tail->next = ev;
        else
            c->head = ev;
        c->tail = ev;
    }
}

static void set_columns(Cursor *c, int n, const char *const *names, const uint32_t *oids)
{
    c->n_cols = n;
    c->names = xcalloc((size_t)n + 1, sizeof *c->names);
    c->oids = xcalloc((size_t)n + 1, sizeof *c->oids);
    for (int i = 0; i < n; i++) {
        c->names[i] = xstrdup(names[i]);
        c->oids[i] = oids[i];
    }
}

/* ---- DECLARE ---------------------------------------------------------------------- */

typedef struct Collect {
    Cursor *c;
    size_t bytes;
    bool too_big;
    SrvResult *out;
} Collect;

static int collect_row(void *arg, int n, const char *const *vals, const int *lens)
{
    Collect *k = arg;
    if (srv_result_cancelled(k->out))
        return 1;
    int l[SUB_MAX_COLS];
    if (n > SUB_MAX_COLS)
        return 1;
    size_t bytes = sizeof(SubEvent) + (size_t)n * (sizeof(char *) + sizeof(int));
    for (int i = 0; i < n; i++) {
        l[i] = vals[i] ? (lens && lens[i] >= 0 ? lens[i] : (int)strlen(vals[i])) : -1;
        bytes += vals[i] ? (size_t)l[i] + 1 : 0;
    }
    if (k->bytes + bytes > CURSOR_MAX_BYTES) {
        k->too_big = true;
        return 1;
    }
    k->bytes += bytes;
    append(k->c, sub_event_new(SUB_ROW, 0, 1, n, vals, l));
    return 0;
}

static int declare_select(Engine *e, Cursor *c, const AstStmt *q, SrvResult *out, WError *err)
{
    Arena *a = arena_new(0);
    PlanCatCtx pcx;
    PlanCatalog cat = engine_plan_catalog(e, &pcx, NULL, false, true, a);
    PlanQuery *pq = plan_query(q->u.select, &cat, a, err);
    if (!pq) {
        arena_free(a);
        return -1;
    }
    const char *names[SUB_MAX_COLS];
    uint32_t oids[SUB_MAX_COLS];
    int n = 0;
    for (int i = 0; i < pq->schema.n && n < SUB_MAX_COLS; i++) {
        if (pq->schema.hidden[i])
            continue;
        names[n] = pq->schema.names[i];
        oids[n++] = type_oid(pq->schema.types[i]);
    }
    set_columns(c, n, names, oids);
    Collect k = {c, 0, false, out};
    long rows = rt_query_run(&e->rt, pq, collect_row, &k, err);
    arena_free(a);
    if (rows < 0)
        return -1;
    if (k.too_big)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, q->pos, "cursor \"%s\" would hold more than %zu MiB of rows",
                    c->name, CURSOR_MAX_BYTES >> 20),
               werr_hint(err, "Add a WHERE or LIMIT, or read the view with several cursors."), -1;
    if (srv_result_cancelled(out))
        return werr(err, SQLSTATE_QUERY_CANCELED, 0, "%s", srv_result_cancel_message(out));
    return 0;
}

static int declare_subscribe(Engine *e, Cursor *c, const AstStmt *q, WError *err)
{
    SubOpts o;
    if (sub_options(q->u.subscribe, &o, err))
        return -1;
    c->progress = o.progress;
    if (q->u.subscribe->copy)
        return werr(err, SQLSTATE_SYNTAX_ERROR, q->pos, "syntax error at or near \"COPY\""),
               werr_hint(err, "Write DECLARE c CURSOR FOR SUBSCRIBE v."), -1;
    CatObj *v = sub_view(e, q, err);
    if (!v)
        return -1;
    if (sub_open_opts(e, v, &o, &c->sub, err))
        return err->pos = q->pos, -1;
    /* The columns of COPY (SUBSCRIBE v) TO STDOUT, named. */
    const SubSchema *sc = sub_schema(c->sub);
    const char *names[SUB_MAX_COLS + 2];
    uint32_t oids[SUB_MAX_COLS + 2];
    names[0] = "epoch";
    names[1] = sc->upsert ? "state" : "diff";
    oids[0] = PG_OID_INT8;
    oids[1] = sc->upsert ? PG_OID_TEXT : PG_OID_INT8;
    int n = 2;
    for (int i = 0; i < sc->n_cols && n < SUB_MAX_COLS + 2; i++) {
        names[n] = sc->names[i];
        oids[n++] = type_oid(sc->types[i]);
    }
    set_columns(c, n, names, oids);
    return 0;
}

int cursor_declare(Engine *e, Session *s, const AstStmt *st, bool describe_only, SrvResult *out, WError *err)
{
    const AstDeclare *d = st->u.declare;
    const AstStmt *q = d->query;
    if (q->kind != STMT_SELECT && q->kind != STMT_SUBSCRIBE)
        return werr(err, SQLSTATE_SYNTAX_ERROR, q->pos, "syntax error: DECLARE ... CURSOR FOR takes SELECT or SUBSCRIBE");
    if (describe_only)
        return 0;
    if (!s->in_txn)
        return werr(err, SQLSTATE_NO_ACTIVE_SQL_TRANSACTION, st->pos, "DECLARE CURSOR can only be used in transaction blocks"),
               werr_hint(err, "BEGIN first; the cursor lasts until COMMIT, ROLLBACK or CLOSE."), -1;
    if (*cursor_find(s, d->name))
        return werr(err, SQLSTATE_DUPLICATE_CURSOR, st->pos, "cursor \"%s\" already exists", d->name);
    if (s->n_cursors >= MAX_CURSORS)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, st->pos, "too many open cursors (limit %d)", MAX_CURSORS);
    Cursor *c = xcalloc(1, sizeof *c);
    c->name = xstrdup(d->name);
    int rc = q->kind == STMT_SELECT ? declare_select(e, c, q, out, err) : declare_subscribe(e, c, q, err);
    if (rc) {
        cursor_free(c);
        return -1;
    }
    c->next = s->cursors;
    s->cursors = c;
    s->n_cursors++;
    srv_result_complete(out, "DECLARE CURSOR");
    return 0;
}

/* ---- FETCH ---------------------------------------------------------------------------- */

/* WITH (timeout = '1s'): ms in *timeout_ms; -1 when not given (wait for a row). */
static int fetch_options(const AstFetch *f, long *timeout_ms, WError *err)
{
    *timeout_ms = -1;
    for (int i = 0; i < ast_list_len(f->options); i++) {
        const AstOption *o = AST_AT(f->options, i);
        if (strcasecmp(o->key, "timeout") != 0)
            return werr(err, SQLSTATE_SYNTAX_ERROR, o->pos, "unrecognized FETCH option \"%s\"", o->key),
                   werr_hint(err, "Options: timeout."), -1;
        const char *v = o->value ? o->value : "";
        Interval iv;
        int64_t us;
        char *end;
        double secs = strtod(v, &end);
        if (*v && !*end)
            us = (int64_t)(secs * 1e6);   /* a bare number: seconds */
        else if (parse_interval(v, strlen(v), &iv) || interval_to_usecs(&iv, &us))
            return werr(err, SQLSTATE_INVALID_PARAMETER, o->pos, "invalid FETCH timeout \"%s\"", v),
                   werr_hint(err, "Give an interval, e.g. timeout = '1s' or '250ms'."), -1;
        if (us < 0)
            return werr(err, SQLSTATE_INVALID_PARAMETER, o->pos, "FETCH timeout must not be negative");
        *timeout_ms = us / 1000 > 86400000 ? 86400000 : (long)(us / 1000);
    }
    return 0;
}

/* Moves what the subscription has queued into the cursor, waiting up to
 * wait_ms (engine lock released meanwhile) when nothing is pending. */
static void pull(Engine *e, Cursor *c, int wait_ms)
{
    SubEvent *evs;
    WError serr = {0};
    if (wait_ms > 0)
        pthread_mutex_unlock(&e->lock);
    int r = sub_take(c->sub, wait_ms, &evs, &serr);
    if (wait_ms > 0)
        pthread_mutex_lock(&e->lock);
    if (r < 0) {
        c->ended = true;
        c->end_err = serr;
        return;
    }
    append(c, evs);
}

static int emit_row(Cursor *c, const SubEvent *ev, SrvResult *out, Buf *tmp)
{
    if (!c->sub)
        return srv_result_row(out, ev->vals, ev->lens);
    const char *vals[SUB_MAX_COLS + 2];
    int lens[SUB_MAX_COLS + 2];
    buf_reset(tmp);
    buf_printf(tmp, "%llu", (unsigned long long)ev->epoch);
    size_t epoch_len = tmp->len;
    const SubSchema *sc = sub_schema(c->sub);
    buf_puts(tmp, sub_diff_text(sc, ev));
    vals[0] = tmp->data;
    lens[0] = (int)epoch_len;
    if (ev->kind == SUB_PROGRESS) {
        for (int i = 1; i < c->n_cols; i++)
            vals[i] = NULL, lens[i] = -1;
    } else {
        vals[1] = tmp->data + epoch_len;
        lens[1] = (int)(tmp->len - epoch_len);
        for (int i = 2; i < c->n_cols; i++) {
            bool shown = i - 2 < ev->n_vals && sub_value_shown(sc, ev, i - 2);
            vals[i] = shown ? ev->vals[i - 2] : NULL;
            lens[i] = shown ? ev->lens[i - 2] : -1;
        }
    }
    return srv_result_row(out, vals, lens);
}

int cursor_fetch(Engine *e, Session *s, const AstStmt *st, bool describe_only, SrvResult *out, WError *err)
{
    const AstFetch *f = st->u.fetch;
    Cursor *c = *cursor_find(s, f->name);
    if (!c)
        return werr(err, SQLSTATE_INVALID_CURSOR_NAME, st->pos, "cursor \"%s\" does not exist", f->name);
    long timeout_ms;
    if (fetch_options(f, &timeout_ms, err))
        return -1;
    if (timeout_ms >= 0 && !c->sub)
        return werr(err, SQLSTATE_INVALID_PARAMETER, st->pos,
                    "FETCH timeout applies to SUBSCRIBE cursors only (\"%s\" is a SELECT cursor)", c->name);
    srv_result_columns(out, c->n_cols, (const char *const *)c->names, c->oids);
    if (describe_only)
        return 0;
    long want = f->count == AST_FETCH_ALL ? -1 : f->count;
    if (c->sub && want != 0) {
        pull(e, c, 0);
        int64_t deadline = timeout_ms >= 0 ? clock_mono_ms() + timeout_ms : -1;
        while (!c->head && !c->ended) {
            if (srv_result_cancelled(out))
                return werr(err, SQLSTATE_QUERY_CANCELED, 0, "%s", srv_result_cancel_message(out));
            int64_t left = deadline < 0 ? CURSOR_POLL_MS : deadline - clock_mono_ms();
            if (left <= 0)
                break;
            pull(e, c, (int)(left < CURSOR_POLL_MS ? left : CURSOR_POLL_MS));
        }
    }
    long n = 0;
    Buf tmp = BUF_INIT;
    while (c->head && (want < 0 || n < want)) {
        SubEvent *ev = c->head;
        c->head = ev->next;
        if (!c->head)
            c->tail = NULL;
        int gone = emit_row(c, ev, out, &tmp);
        free(ev);
        n++;
        if (gone < 0)
            break;
    }
    buf_free(&tmp);
    if (n == 0 && c->ended && c->end_err.set) {
        *err = c->end_err;
        return -1;
    }
    char tag[48];
    snprintf(tag, sizeof tag, "FETCH %ld", n);
    srv_result_complete(out, tag);
    return 0;
}

/* ---- CLOSE ------------------------------------------------------------------------------ */

int cursor_close(Engine *e, Session *s, const AstStmt *st, bool describe_only, SrvResult *out, WError *err)
{
    (void)e;
    if (describe_only)
        return 0;
    const char *name = st->u.close_name;
    if (!name) {
        cursors_close_all(s);
        srv_result_complete(out, "CLOSE CURSOR ALL");
        return 0;
    }
    Cursor **pp = cursor_find(s, name);
    if (!*pp)
        return werr(err, SQLSTATE_INVALID_CURSOR_NAME, st->pos, "cursor \"%s\" does not exist", name);
    Cursor *c = *pp;
    *pp = c->next;
    s->n_cursors--;
    cursor_free(c);
    srv_result_complete(out, "CLOSE CURSOR");
    return 0;
}
