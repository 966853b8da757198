/*
 * cmd_verify.c: VERIFY MATERIALIZED VIEW v.
 *
 * Recomputes the view from its input and compares. The runtime opens a
 * second instance of the view's stored plan with empty temporary state
 * (rt_dataflow_replay_open) whose Kafka sources read from their first
 * offsets up to the positions the running view has reached now (and whose
 * view sources read the current rows of the tables and views it reads,
 * when the plan does not depend on their order of changes); the engine
 * lock is held throughout, so the running view does not move and its state
 * reflects exactly those positions. The replay applies the same operators,
 * so the same watermark and lateness rules: rows the view dropped as late
 * are dropped by the replay too and counted separately (late_rows), and
 * compared with the view's LATE ROWS INTO relation when it has one.
 *
 * The comparison is on the visible columns. Rows are matched by the view's
 * key when it has a visible one (a group key): the same key with other
 * values is "different"; otherwise rows are a multiset and only "missing"
 * (recomputed, not in the view) and "extra" (in the view only) exist.
 *
 * The last result per view is kept in memory (lost at restart) for the
 * weir_verifications system view.
 *
 * Testing: WITH (testing_corrupt = 'update' | 'delete') damages one row of
 * the running view's state first (the first row in key order: a BIGINT or
 * INT value incremented, or the row removed), so tests can plant a
 * difference. It really changes the view; it exists for tests only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "commands.h"
#include "keygroup.h"
#include "pgwire.h"
#include "row.h"
#include "arena.h"
#include "clock.h"
#include "pg_oids.h"

#define VERIFY_TIMEOUT_MS 120000

typedef struct VRow {
    char *key;                  /* the key's text (the whole visible row when keyless) */
    char *row;                  /* the visible row's text */
    int64_t count;
} VRow;

typedef struct VSet {
    VRow *rows;
    size_t n, cap;
} VSet;

typedef struct Example {
    const char *kind;           /* missing, extra, different */
    char *key, *in_view, *recomputed;
} Example;

typedef struct Diff {
    int64_t missing, extra, different;
    Example *ex;
    int n_ex;
    int max_per_kind;
    int per_kind[3];
} Diff;

/* Appends the text of v (NULL as "NULL") to b, columns separated by ", ". */
static void put_val(Buf *b, const Value *v, bool first)
{
    if (!first)
        buf_printf(b, ", ");
    if (v->null)
        buf_printf(b, "NULL");
    else
        value_to_text(v, b);
}

static char *take_text(Buf *b)
{
    char *s = xstrdup(b->data ? b->data : "");
    buf_free(b);
    return s;
}

/* Reads a view table into rows of visible-column text. */
static int read_rows(StorTable *t, const PlanView *p, VSet *out, WError *err)
{
    const PlanSchema *sc = &p->root->out;
    int n = sc->n;
    bool keyed = p->n_pk > 0 && !p->counted;
    for (int k = 0; k < p->n_pk && keyed; k++)
        keyed = !(sc->hidden && sc->hidden[p->pk[k]]);
    Value *vals = xcalloc((size_t)n + 2, sizeof(Value));
    StorIter *it;
    if (stor_iter_open(t, NULL, 0, &it, err)) {
        free(vals);
        return -1;
    }
    const void *k, *v;
    size_t kl, vl;
    int got;
    while ((got = stor_iter_next(it, &k, &kl, &v, &vl, err)) == 1) {
        if (kl && ((const unsigned char *)k)[0] == 0xff)
            continue; /* the _row_id counter */
        if (row_decode(v, vl, vals, p->counted ? n + 1 : n)) {
            got = werr(err, SQLSTATE_INTERNAL, 0, "corrupt row in the state of view \"%s\"", p->root->view_name);
            break;
        }
        Buf row = BUF_INIT, key = BUF_INIT;
        bool first = true;
        for (int c = 0; c < n; c++)
            if (!(sc->hidden && sc->hidden[c])) {
                put_val(&row, &vals[c], first);
                first = false;
            }
        for (int c = 0; c < p->n_pk && keyed; c++)
            put_val(&key, &vals[p->pk[c]], c == 0);
        if (out->n == out->cap) {
            out->cap = out->cap ? out->cap * 2 : 256;
            out->rows = xrealloc(out->rows, sizeof(VRow) * out->cap);
        }
        VRow *r = &out->rows[out->n++];
        r->row = take_text(&row);
        r->key = keyed ? take_text(&key) : xstrdup(r->row);
        if (!keyed)
            buf_free(&key);
        r->count = p->counted ? vals[n].u.i : 1;
    }
    stor_iter_close(it);
    free(vals);
    return got < 0 ? -1 : 0;
}

static void vset_free(VSet *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->rows[i].key);
        free(s->rows[i].row);
    }
    free(s->rows);
}

static int cmp_vrow(const void *a, const void *b)
{
    const VRow *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->row, y->row);
}

static void example(Diff *d, int kind, const char *key, const char *in_view, const char *recomputed)
{
    static const char *const kinds[3] = {"missing", "extra", "different"};
    if (d->per_kind[kind] >= d->max_per_kind)
        return;
    d->per_kind[kind]++;
    d->ex = xrealloc(d->ex, sizeof(Example) * (size_t)(d->n_ex + 1));
    Example *e = &d->ex[d->n_ex++];
    e->kind = kinds[kind];
    e->key = xstrdup(key);
    e->in_view = in_view ? xstrdup(in_view) : NULL;
    e->recomputed = recomputed ? xstrdup(recomputed) : NULL;
}

/* Compares one key's rows: view rows v[0..nv), recomputed rows r[0..nr), each sorted by row. */
static void compare_key(Diff *d, const VRow *v, size_t nv, const VRow *r, size_t nr)
{
    if (nv == 1 && nr == 1 && v[0].count == 1 && r[0].count == 1 && strcmp(v[0].row, r[0].row) != 0) {
        d->different++;
        example(d, 2, v[0].key, v[0].row, r[0].row);
        return;
    }
    size_t i = 0, j = 0;
    while (i < nv || j < nr) {
        int c = i == nv ? 1 : j == nr ? -1 : strcmp(v[i].row, r[j].row);
        int64_t vc = c <= 0 ? v[i].count : 0, rc = c >= 0 ? r[j].count : 0;
        const char *key = c <= 0 ? v[i].key : r[j].key, *row = c <= 0 ? v[i].row : r[j].row;
        if (rc > vc) {
            d->missing += rc - vc;
            example(d, 0, key, NULL, row);
        } else if (vc > rc) {
            d->extra += vc - rc;
            example(d, 1, key, row, NULL);
        }
        if (c <= 0)
            i++;
        if (c >= 0)
            j++;
    }
}

static void compare(Diff *d, VSet *view, VSet *re)
{
    qsort(view->rows, view->n, sizeof(VRow), cmp_vrow);
    qsort(re->rows, re->n, sizeof(VRow), cmp_vrow);
    size_t i = 0, j = 0;
    while (i < view->n || j < re->n) {
        int c = i == view->n ? 1 : j == re->n ? -1 : strcmp(view->rows[i].key, re->rows[j].key);
        size_t i2 = i, j2 = j;
        const char *key = c <= 0 ? view->rows[i].key : re->rows[j].key;
        while (c <= 0 && i2 < view->n && !strcmp(view->rows[i2].key, key))
            i2++;
        while (c >= 0 && j2 < re->n && !strcmp(re->rows[j2].key, key))
            j2++;
        compare_key(d, view->rows + i, i2 - i, re->rows + j, j2 - j);
        i = i2;
        j = j2;
    }
}

static int64_t count_late(StorTable *t, WError *err)
{
    if (!t)
        return -1;
    StorIter *it;
    if (stor_iter_open(t, NULL, 0, &it, err))
        return -1;
    const void *k, *v;
    size_t kl, vl;
    int64_t n = 0;
    int got;
    while ((got = stor_iter_next(it, &k, &kl, &v, &vl, err)) == 1)
        n += kl == 8; /* key 0xFF is the sequence counter */
    stor_iter_close(it);
    return got < 0 ? -1 : n;
}

/* testing_corrupt: damages the first row (in key order, as t reads the
 * view) of the running view's state, written to store (the table as
 * stored: with key groups, the key is prefixed by the row's group). */
static int corrupt(const PlanView *p, StorTable *t, StorTable *store, bool del, WError *err)
{
    const PlanSchema *sc = &p->root->out;
    StorIter *it;
    if (stor_iter_open(t, NULL, 0, &it, err))
        return -1;
    const void *k, *v;
    size_t kl, vl;
    int got;
    Buf key = BUF_INIT, val = BUF_INIT;
    while ((got = stor_iter_next(it, &k, &kl, &v, &vl, err)) == 1)
        if (!(kl && ((const unsigned char *)k)[0] == 0xff)) {
            buf_append(&key, k, kl);
            buf_append(&val, v, vl);
            break;
        }
    stor_iter_close(it);
    int rc = got < 0 ? -1 : 0;
    if (!rc && !key.len)
        rc = werr(err, SQLSTATE_INVALID_PARAMETER, 0, "testing_corrupt: the view has no row to damage");
    const PlanNode *m = p->root;
    if (!rc && m->key_groups) {
        /* The stored key: the row's key group (keygroup.h) before the key. */
        int n = p->counted ? sc->n + 1 : sc->n;
        Value *vals = xcalloc((size_t)n, sizeof(Value));
        if (row_decode(val.data, val.len, vals, n))
            rc = werr(err, SQLSTATE_INTERNAL, 0, "corrupt row");
        uint64_t h = WEIR_KEY_HASH_SEED;
        for (int i = 0; !rc && i < m->n_kg_cols[0]; i++)
            h = weir_key_hash_value(h, &vals[m->kg_cols[0][i]]);
        free(vals);
        unsigned char pre[WEIR_KG_PREFIX];
        weir_kg_put(pre, weir_key_group(h, m->key_groups));
        Buf k2 = BUF_INIT;
        buf_append(&k2, pre, WEIR_KG_PREFIX);
        buf_append(&k2, key.data, key.len);
        buf_free(&key);
        key = k2;
    }
    t = store;
    if (!rc && del) {
        rc = stor_table_delete(t, key.data, key.len, err);
    } else if (!rc) {
        int n = p->counted ? sc->n + 1 : sc->n;
        Value *vals = xcalloc((size_t)n, sizeof(Value));
        int col = -1;
        if (row_decode(val.data, val.len, vals, n))
            rc = werr(err, SQLSTATE_INTERNAL, 0, "corrupt row");
        for (int c = sc->n - 1; c >= 0 && !rc && col < 0; c--) {
            bool in_key = false;
            for (int q = 0; q < p->n_pk; q++)
                in_key |= p->pk[q] == c;
            if (!in_key && !(sc->hidden && sc->hidden[c]) && !vals[c].null &&
                (vals[c].type == TYPE_INT8 || vals[c].type == TYPE_INT4 || vals[c].type == TYPE_INT2))
                col = c;
        }
        if (!rc && col < 0)
            rc = werr(err, SQLSTATE_INVALID_PARAMETER, 0, "testing_corrupt = 'update' needs an integer value column");
        if (!rc) {
            vals[col].u.i++;
            Buf nv = BUF_INIT;
            row_encode(&nv, vals, n);
            rc = stor_table_put(t, key.data, key.len, nv.data, nv.len, err);
            buf_free(&nv);
        }
        free(vals);
    }
    buf_free(&key);
    buf_free(&val);
    return rc;
}

static bool cancelled(void *out) { return srv_result_cancelled(out); }

/* The last result per view (weir_verifications); guarded by the engine lock. */
typedef struct Verification {
    uint64_t view_id;
    char *view;
    int64_t at_us;              /* wall clock */
    char *positions;
    int64_t view_rows, recomputed_rows, missing, extra, different, late_recomputed, late_recorded;
    bool ok;
} Verification;

static Verification *g_ver;
static int g_n_ver;

static void remember(const Verification *v)
{
    int i = 0;
    while (i < g_n_ver && strcmp(g_ver[i].view, v->view) != 0)
        i++;
    if (i == g_n_ver) {
        g_ver = xrealloc(g_ver, sizeof *g_ver * (size_t)(g_n_ver + 1));
        g_n_ver++;
    } else {
        free(g_ver[i].view);
        free(g_ver[i].positions);
    }
    g_ver[i] = *v;
    g_ver[i].view = xstrdup(v->view);
    g_ver[i].positions = xstrdup(v->positions);
}

const CatRelation *verify_sysview(Engine *e, Arena *a)
{
    static const char *names[] = {"view", "verified_at", "input_positions", "rows_in_view", "rows_recomputed",
                                  "missing", "extra", "different", "late_rows_recomputed", "late_rows_recorded", "ok"};
    static const TypeId types[] = {TYPE_TEXT, TYPE_TIMESTAMP, TYPE_TEXT, TYPE_INT8, TYPE_INT8, TYPE_INT8,
                                   TYPE_INT8, TYPE_INT8, TYPE_INT8, TYPE_INT8, TYPE_BOOL};
    CatRelation *r = arena_zalloc(a, sizeof *r);
    r->kind = CAT_SYSTEM;
    r->name = "weir_verifications";
    r->n_cols = 11;
    r->col_names = names;
    r->col_types = types;
    r->wm_col = -1;
    r->wm_delay_us = -1;
    r->append_only = true;
    r->rows = arena_alloc(a, sizeof(Value *) * (size_t)(g_n_ver ? g_n_ver : 1));
    for (int i = 0; i < g_n_ver; i++) {
        const Verification *v = &g_ver[i];
        CatObj *o = cat_find(e->cat, v->view);
        if (!o || o->id != v->view_id)
            continue; /* dropped since */
        Value *row = arena_zalloc(a, sizeof(Value) * 11);
        row[0] = value_str(TYPE_TEXT, arena_strdup(a, v->view), strlen(v->view));
        row[1] = value_int(TYPE_TIMESTAMP, v->at_us);
        row[2] = value_str(TYPE_TEXT, arena_strdup(a, v->positions), strlen(v->positions));
        int64_t n[7] = {v->view_rows, v->recomputed_rows, v->missing, v->extra, v->different, v->late_recomputed,
                        v->late_recorded};
        for (int k = 0; k < 7; k++)
            row[3 + k] = k == 6 && n[k] < 0 ? value_null(TYPE_INT8) : value_int(TYPE_INT8, n[k]);
        row[10] = value_bool(v->ok);
        r->rows[r->n_rows++] = row;
    }
    return r;
}

static void columns_summary(SrvResult *out)
{
    static const char *const names[] = {"view", "input_positions", "rows_in_view", "rows_recomputed", "missing",
                                        "extra", "different", "late_rows_recomputed", "late_rows_recorded", "ok"};
    static const uint32_t oids[] = {PG_OID_TEXT, PG_OID_TEXT, PG_OID_INT8, PG_OID_INT8, PG_OID_INT8, PG_OID_INT8, PG_OID_INT8,
                                    PG_OID_INT8, PG_OID_INT8, PG_OID_BOOL};
    srv_result_columns(out, 10, names, oids);
}

static void columns_examples(SrvResult *out)
{
    static const char *const names[] = {"kind", "key", "in_view", "recomputed"};
    static const uint32_t oids[] = {PG_OID_TEXT, PG_OID_TEXT, PG_OID_TEXT, PG_OID_TEXT};
    srv_result_columns(out, 4, names, oids);
}

int srv_verify_view(Engine *e, const AstStmt *st, bool describe_only, SrvResult *out, WError *err)
{
    const AstVerify *a = st->u.verify;
    CatObj *o = cat_find(e->cat, a->view);
    if (!o)
        return werr(err, SQLSTATE_UNDEFINED_TABLE, st->pos, "materialized view \"%s\" does not exist", a->view);
    if (o->kind != CAT_VIEW || !o->rel.materialized || !o->flow.plan)
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, st->pos, "\"%s\" is not a materialized view", a->view);
    if (!o->flow.df)
        return werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, st->pos, "materialized view \"%s\" is not running", a->view);
    /* A replay reads every row at once, so no key idles: it would report the
     * expiries of the live view as differences. */
    for (int i = 0; i < o->flow.plan->n_nodes; i++)
        if (o->flow.plan->nodes[i]->state_ttl_us)
            return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos,
                        "feature not supported: VERIFY of a view with state_ttl (its result depends on when idle keys "
                        "expired, in processing time)");
    int max_ex = 5;
    int report = 3; /* bit 0 summary, bit 1 examples */
    const char *corrupt_mode = NULL;
    for (int i = 0; i < ast_list_len(a->options); i++) {
        const AstOption *op = AST_AT(a->options, i);
        if (!strcasecmp(op->key, "examples")) {
            char *end;
            long v = strtol(op->value, &end, 10);
            if (*end || v < 0 || v > 1000)
                return werr(err, SQLSTATE_INVALID_PARAMETER, op->pos, "examples must be an integer from 0 to 1000");
            max_ex = (int)v;
        } else if (!strcasecmp(op->key, "report")) {
            report = !strcasecmp(op->value, "summary") ? 1 : !strcasecmp(op->value, "examples") ? 2
                   : !strcasecmp(op->value, "all") ? 3 : 0;
            if (!report)
                return werr(err, SQLSTATE_INVALID_PARAMETER, op->pos, "report must be 'all', 'summary' or 'examples'");
        } else if (!strcasecmp(op->key, "testing_corrupt")) {
            if (strcasecmp(op->value, "update") != 0 && strcasecmp(op->value, "delete") != 0)
                return werr(err, SQLSTATE_INVALID_PARAMETER, op->pos, "testing_corrupt must be 'update' or 'delete'");
            corrupt_mode = op->value;
        } else {
            return werr(err, SQLSTATE_INVALID_PARAMETER, op->pos,
                        "unrecognized VERIFY option \"%s\" (examples, report)", op->key);
        }
    }
    if (describe_only) {
        /* The extended protocol describes one result set: the first one asked for. */
        if (report & 1)
            columns_summary(out);
        else
            columns_examples(out);
        return 0;
    }
    const PlanView *p = o->flow.plan;
    if (!cluster_view_whole_here(o->flow.df, p))
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0,
                    "feature not supported: VERIFY of materialized view \"%s\", whose rows are spread over the "
                    "cluster's nodes",
                    o->name),
               werr_hint(err, "VERIFY recomputes the whole view; it runs on a node that holds all of its key groups."),
               -1;
    StorTable *live_t = rt_dataflow_view_table(o->flow.df);
    if (corrupt_mode && corrupt(p, live_t, rt_dataflow_view_store(o->flow.df), !strcasecmp(corrupt_mode, "delete"), err))
        return -1;
    RtDataflow *re = NULL;
    if (rt_dataflow_replay_open(&e->rt, p, o->flow.df, &re, err))
        return -1;
    if (rt_dataflow_replay_order_matters(o->flow.df))
        srv_result_notice(out, "the view judges lateness over a source with several partitions: the recomputation "
                               "reads them in its own interleaving, so windows near the watermark may differ for "
                               "that reason alone");
    int rc = -1;
    VSet vs = {0}, rs = {0};
    Diff d = {.max_per_kind = max_ex};
    Buf pos = BUF_INIT;
    int64_t deadline = clock_mono_ms() + VERIFY_TIMEOUT_MS;
    /* Flushed = every source reached its bound (its live twin's position). */
    if (rt_dataflow_flush_target(re, err))
        goto done;
    while (!rt_dataflow_flushed(re)) {
        bool work;
        if (rt_dataflow_step(re, 50, &work, err))
            goto done;
        if (cancelled(out)) {
            werr(err, SQLSTATE_QUERY_CANCELED, 0, "canceling statement due to user request");
            goto done;
        }
        if (clock_mono_ms() > deadline) {
            werr(err, SQLSTATE_QUERY_CANCELED, 0, "VERIFY timed out after %d s reading the input",
                 VERIFY_TIMEOUT_MS / 1000);
            goto done;
        }
    }
    if (read_rows(live_t, p, &vs, err) || read_rows(rt_dataflow_view_table(re), p, &rs, err))
        goto done;
    int64_t view_rows = 0, re_rows = 0;
    for (size_t i = 0; i < vs.n; i++)
        view_rows += vs.rows[i].count;
    for (size_t i = 0; i < rs.n; i++)
        re_rows += rs.rows[i].count;
    compare(&d, &vs, &rs);
    RtStats rst;
    rt_dataflow_stats(re, &rst);
    int64_t late_recorded = p->late_table_id ? count_late(rt_dataflow_find_table(o->flow.df, p->late_table_id), err) : -1;
    int64_t late_replayed_recorded =
        p->late_table_id ? count_late(rt_dataflow_find_table(re, p->late_table_id), err) : -1;
    bool ok = !d.missing && !d.extra && !d.different && late_recorded == late_replayed_recorded;
    rt_dataflow_positions(o->flow.df, &pos);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    Verification rec = {o->id, o->name, (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000, pos.data ? pos.data : "",
                        view_rows, re_rows, d.missing, d.extra, d.different, (int64_t)rst.late_rows, late_recorded, ok};
    remember(&rec);
    Arena *ar = arena_new(0);
    if (report & 1) {
        columns_summary(out);
        const char *v[10] = {o->name, pos.data ? pos.data : "", arena_printf(ar, "%lld", (long long)view_rows),
                             arena_printf(ar, "%lld", (long long)re_rows), arena_printf(ar, "%lld", (long long)d.missing),
                             arena_printf(ar, "%lld", (long long)d.extra), arena_printf(ar, "%lld", (long long)d.different),
                             arena_printf(ar, "%llu", (unsigned long long)rst.late_rows),
                             late_recorded >= 0 ? arena_printf(ar, "%lld", (long long)late_recorded) : NULL,
                             ok ? "t" : "f"};
        srv_result_row(out, v, NULL);
        srv_result_complete(out, "VERIFY 1");
    }
    if (report & 2) {
        columns_examples(out);
        for (int i = 0; i < d.n_ex; i++) {
            const char *v[4] = {d.ex[i].kind, d.ex[i].key, d.ex[i].in_view, d.ex[i].recomputed};
            srv_result_row(out, v, NULL);
        }
        srv_result_complete(out, arena_printf(ar, "VERIFY %d", d.n_ex));
    }
    arena_free(ar);
    rc = 0;
done:
    rt_dataflow_close(re);
    vset_free(&vs);
    vset_free(&rs);
    for (int i = 0; i < d.n_ex; i++) {
        free(d.ex[i].key);
        free(d.ex[i].in_view);
        free(d.ex[i].recomputed);
    }
    free(d.ex);
    buf_free(&pos);
    return rc;
}
