/*
 * cmd_swap.c: ALTER MATERIALIZED VIEW a SWAP WITH b.
 *
 * The way to replace a view without a gap: build the new definition as b
 * (usually WITH (backfill_from = ...), replaying the retained Kafka log
 * while a keeps serving), wait until weir_backfills says it caught up, then
 * swap the two names. Everything that finds a view by name follows the
 * name: ad hoc queries, /api/views, new SUBSCRIBE and SSE streams. What is
 * attached to a view object moves with the name, in the same critical
 * section of the engine lock (no engine step in between):
 *
 *   - sinks (CREATE SINK ... FROM a) switch to b's dataflow; their open
 *     epoch gets the difference a -> b netted per key (rt_sink_switch), so
 *     the target ends equal to the view now named a;
 *   - open subscriptions get the difference as -1/+1 rows, then b's changes
 *     (subs_view_swap): their accumulated contents equal the view after the
 *     swap, with no gap and no duplicate.
 *
 * The two catalog entries are written by a checkpoint taken before the
 * statement answers, in the same LMDB transaction as the sinks' switch-over
 * batches: a crash leaves either the old names and the old deliveries or
 * both new. Swapping again swaps back (the old view kept running).
 *
 * Refused: objects that are not materialized views (42809), different
 * visible columns (42804), a view other views read (2BP01: their plans are
 * wired to the view object, and their statements name it), append-only
 * sinks (0A000: the difference needs retractions), views not running
 * (55000: their rows are needed for the difference).
 */
#include "commands.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *type_word(TypeId t)
{
    const char *n = type_name(t);
    return n ? n : "?";
}

/* a and b show the same columns, in the same order, with the same types. */
static int same_columns(const CatObj *a, const CatObj *b, int pos, WError *err)
{
    SubSchema *x = xcalloc(2, sizeof *x), *y = x + 1;
    sub_schema_init((CatObj *)a, x, NULL);
    sub_schema_init((CatObj *)b, y, NULL);
    int rc = 0;
    for (int i = 0; i < x->n_cols || i < y->n_cols; i++) {
        bool same = i < x->n_cols && i < y->n_cols && strcmp(x->names[i], y->names[i]) == 0 &&
                    x->types[i] == y->types[i];
        if (same)
            continue;
        werr(err, SQLSTATE_DATATYPE_MISMATCH, pos, "cannot swap materialized views %s and %s: their columns differ",
             a->name, b->name);
        if (i >= x->n_cols || i >= y->n_cols)
            werr_detail(err, "%s has %d columns, %s has %d", a->name, x->n_cols, b->name, y->n_cols);
        else
            werr_detail(err, "column %d is %s %s in %s and %s %s in %s", i + 1, x->names[i], type_word(x->types[i]),
                        a->name, y->names[i], type_word(y->types[i]), b->name);
        werr_hint(err, "A swap replaces a view by one that readers can take in its place: same column names and "
                       "types, in the same order.");
        rc = -1;
        break;
    }
    free(x);
    return rc;
}

static CatObj *find_view(Engine *e, const char *name, int pos, WError *err)
{
    CatObj *o = cat_find(e->cat, name);
    if (!o)
        return werr(err, SQLSTATE_UNDEFINED_TABLE, pos, "materialized view \"%s\" does not exist", name), NULL;
    if (o->kind != CAT_VIEW || o->view.late_of || o->view.sink_query)
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, pos, "\"%s\" is not a materialized view", name),
               werr_hint(err, "Only two materialized views can swap names."), NULL;
    return o;
}

/* Does d read view v (its plan scans v)? */
static bool plan_reads(const CatObj *d, const CatObj *v)
{
    if (d->kind != CAT_VIEW || !d->flow.plan)
        return false;
    for (int i = 0; i < d->flow.plan->n_nodes; i++) {
        const PlanNode *n = d->flow.plan->nodes[i];
        if ((n->kind == PN_VIEW_SCAN || n->kind == PN_VIEW_SOURCE) && n->scan_rel == &v->rel)
            return true;
    }
    return false;
}

/* The view column of each visible column of v (what a sink's view_cols holds). */
static int *visible_cols(CatObj *sink, CatObj *v)
{
    int *cols = arena_alloc(sink->arena, sizeof(int) * (size_t)(v->rel.n_cols ? v->rel.n_cols : 1));
    for (int i = 0, k = 0; i < v->rel.n_cols; i++)
        if (!(v->rel.col_hidden && v->rel.col_hidden[i]))
            cols[k++] = i;
    return cols;
}

int session_swap_view(Engine *e, const AstStmt *st, SrvResult *out, WError *err)
{
    const AstAlterRename *r = st->u.rename;
    CatObj *a = find_view(e, r->name, st->pos, err);
    CatObj *b = a ? find_view(e, r->new_name, r->new_pos, err) : NULL;
    if (!b)
        return -1;
    if (a == b)
        return werr(err, SQLSTATE_INVALID_PARAMETER, r->new_pos, "cannot swap materialized view %s with itself",
                    a->name);
    if (same_columns(a, b, r->new_pos, err))
        return -1;
    CAT_FOREACH(e->cat, CAT_ANY, d) {
        CatObj *v = plan_reads(d, a) ? a : plan_reads(d, b) ? b : NULL;
        if (v)
            return werr(err, SQLSTATE_DEPENDENT_OBJECTS, st->pos,
                        "cannot swap materialized view %s because materialized view %s reads it", v->name, d->name),
                   werr_hint(err, "Drop %s, swap, and create it again.", d->name), -1;
        if (d->kind == CAT_SINK && (d->sink.from == a || d->sink.from == b) && !d->sink.spec.upsert)
            return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos,
                        "feature not supported: swapping %s, read by append-only sink %s (the switch-over "
                        "retracts rows)", d->sink.from->name, d->name),
                   werr_hint(err, "Use an upsert sink (type = 'upsert', primary_key = '...')."), -1;
    }
    if (!a->flow.df || !b->flow.df)
        return werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, st->pos, "materialized view \"%s\" is not running", !a->flow.df ? a->name : b->name),
               werr_hint(err, "weir_views shows why; ALTER MATERIALIZED VIEW ... RESUME restarts a failed view."),
               -1;
    /* The checkpoint in flight (if any) holds the tables the differences
     * are read from and the sinks' sealed batches: finish it first. */
    engine_checkpoint_wait(e, NULL);
    if (subs_view_swap(e, a, b, err))
        return -1;
    CAT_FOREACH(e->cat, CAT_ANY, s) {
        if (s->kind != CAT_SINK || (s->sink.from != a && s->sink.from != b))
            continue;
        CatObj *from = s->sink.from, *to = s->sink.from == a ? b : a;
        int *cols = visible_cols(s, to);
        if (s->sink.rt && rt_sink_switch(s->sink.rt, from->flow.df, to->flow.df, cols, err)) {
            /* Half-way: stop the sink; its target keeps what it had delivered. */
            wlog_warn("cmd_swap", "sink %s stopped during a swap: %s", s->name, err->msg);
            rt_dataflow_detach_sink(to->flow.df, s->sink.rt);
            s->sink.rt = NULL;
        }
        s->sink.from = to;
        s->sink.view_cols = cols;
    }
    engine_swap_names(e, a, b);
    WError cerr = {0};
    if (engine_checkpoint(e, &cerr)) {
        /* The swap is in effect; the next checkpoint that succeeds stores it. */
        char msg[700];
        snprintf(msg, sizeof msg, "the swap is in effect but not stored yet (checkpoint failed: %s); it is stored "
                 "by the next checkpoint that succeeds", cerr.msg);
        srv_result_notice(out, msg);
    }
    srv_result_complete(out, "ALTER MATERIALIZED VIEW");
    return 0;
}
