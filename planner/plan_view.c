/*
 * plan_view.c: CREATE MATERIALIZED VIEW, the driver of a view's passes.
 *
 *   options (view_options) -> the query lowered (plan_select, plan_query.c)
 *   -> WITH (state_ttl) (set_state_ttl) -> window/lateness analysis
 *   (plan_view_lateness, plan_late.c) -> checks (sessions, no clock)
 *   -> MATERIALIZE (view_materialize) -> PlanView (backfill, late rows)
 *   -> pruning (plan_prune.c) -> sharing (plan_share.c, revision 2)
 *   -> distribution (plan_dist.c) -> width and limit checks
 *
 * The order is part of the stored state: table ids are asked for in it
 * (new_table), and a view is re-planned at every start to get them back.
 */
#include "planner_int.h"

#include <strings.h>
#include <string.h>

/* WITH (backfill_from = 'earliest' | 'latest' | '<timestamp>'). */
static int backfill_option(const AstOption *o, PlanStart *start, int64_t *ts, WError *err)
{
    const char *v = o->value ? o->value : "";
    if (!strcasecmp(v, "earliest"))
        *start = PLAN_START_EARLIEST;
    else if (!strcasecmp(v, "latest"))
        *start = PLAN_START_LATEST;
    else if (parse_timestamp(v, strlen(v), ts) == 0)
        *start = PLAN_START_TIMESTAMP;
    else
        return werr(err, SQLSTATE_INVALID_PARAMETER, o->pos,
                    "backfill_from must be 'earliest', 'latest' or a timestamp, not '%s'", v),
               werr_hint(err, "For example backfill_from = '2026-01-31 12:00:00' (UTC)."), -1;
    return 0;
}

/* Marks the view's Kafka sources with where to start. Only Kafka keeps a
 * log to replay: another connector is refused (0A000); views over tables
 * and views read their current rows whatever the option says, so a view
 * with no Kafka source at all is refused too. */
static int apply_backfill(Arena *a, PlanView *v, const AstOption *o, PlanStart start, int64_t ts, WError *err)
{
    int n_kafka = 0;
    for (int i = 0; i < v->n_nodes; i++) {
        PlanNode *n = v->nodes[i];
        if (n->kind != PN_SOURCE)
            continue;
        const char *conn = cat_option(n->source, "connector");
        if (!conn || strcasecmp(conn, "kafka") != 0)
            return werr(err, SQLSTATE_NOT_SUPPORTED, o->pos,
                        "feature not supported: backfill_from over source \"%s\" (connector '%s'): only Kafka "
                        "sources keep a log to replay", n->source->name, conn ? conn : "");
        n->start = start;
        n->start_ts_us = ts;
        n_kafka++;
    }
    if (!n_kafka)
        return werr(err, SQLSTATE_NOT_SUPPORTED, o->pos,
                    "feature not supported: backfill_from on a view that reads no Kafka source"),
               werr_hint(err, "A view over tables or views starts from their current rows."), -1;
    v->backfill_from = arena_strdup(a, o->value);
    return 0;
}

/* WITH (state_ttl): bounds every operator whose state is kept per key with
 * no event-time bound (regular joins, unwindowed aggregations and DISTINCT,
 * unwindowed Top-N and DISTINCT ON). Other stateful operators are bounded by
 * watermarks already, or (INTERSECT, EXCEPT) do not expire keys; a view with
 * nothing to bound is an error, so a user does not believe an option
 * protects what it does not. */
static int set_state_ttl(PlanCtx *p, const AstOption *o)
{
    int n = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        PlanNode *x = p->nodes[i];
        if ((x->kind == PN_JOIN && !x->interval) || (x->kind == PN_AGG && x->win_group_idx < 0 && !x->session) ||
            (x->kind == PN_TOPN && x->win_group_idx < 0)) {
            x->state_ttl_us = p->state_ttl_us;
            n++;
        }
    }
    if (n == 0) {
        werr(p->b.err, SQLSTATE_INVALID_PARAMETER, o->pos,
             "state_ttl bounds regular joins, aggregations and Top-N without a window, and this view has none");
        werr_hint(p->b.err, "Its state is bounded by watermarks already (or not by keys): drop the option.");
        return -1;
    }
    return 0;
}

/* A SESSION window only means something to the aggregation that merges
 * rows into sessions: refuse plans where its rows go elsewhere. */
static int check_sessions(PlanCtx *p)
{
    int windows = 0, aggs = 0, any_aggs = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        windows += p->nodes[i]->kind == PN_WINDOW && p->nodes[i]->win_kind == WIN_SESSION;
        aggs += p->nodes[i]->kind == PN_AGG && p->nodes[i]->session;
        any_aggs += p->nodes[i]->kind == PN_AGG;
    }
    if (windows > aggs && !any_aggs) {
        /* Flink's SESSION table function alone: each row with its session's final bounds. */
        werr(p->b.err, SQLSTATE_NOT_SUPPORTED, p->session_pos,
             "feature not supported: the SESSION table function without an aggregation");
        werr_hint(p->b.err, "A row's session is known only once the session closes (later rows may still merge it); "
                            "aggregate per session instead: GROUP BY window_start, window_end (and the partition keys).");
        return -1;
    }
    if (windows > aggs)
        return werr(p->b.err, SQLSTATE_WINDOWING_ERROR, p->session_pos,
                    "a SESSION window needs an aggregation with GROUP BY window_start, window_end (and its keys)");
    return 0;
}

/* The view's WITH options, read before its query is planned. */
typedef struct ViewOpts {
    const AstOption *backfill;   /* WITH (backfill_from), or NULL */
    const AstOption *ttl_opt;    /* WITH (state_ttl), or NULL (its value is in PlanCtx.state_ttl_us) */
    int parallelism;             /* PlanViewOptions.parallelism or WITH (streaming_parallelism); 1 none */
    PlanStart start;
    int64_t start_ts;
} ViewOpts;

/* Reads cv's WITH list into vo and p (state_ttl_us, agg_phase_strategy).
 * 0, or -1 with err (22023 for a bad or unknown option). */
static int view_options(PlanCtx *p, const AstCreateView *cv, ViewOpts *vo)
{
    WError *err = p->b.err;
    for (int i = 0; i < ast_list_len(cv->options); i++) {
        const AstOption *o = AST_AT(cv->options, i);
        if (strcasecmp(o->key, "backfill_from") == 0) {
            if (backfill_option(o, &vo->start, &vo->start_ts, err))
                return -1;
            vo->backfill = o;
            continue;
        }
        if (strcasecmp(o->key, "streaming_parallelism") == 0) {
            if (plan_parallelism_value(o->value, &vo->parallelism)) {
                werr(err, SQLSTATE_INVALID_PARAMETER, o->pos,
                     "streaming_parallelism must be an integer from 1 to %d, not '%s'", PLAN_MAX_PARALLELISM,
                     o->value ? o->value : "");
                return -1;
            }
            continue;
        }
        if (strcasecmp(o->key, "key_groups") == 0) {
            if (plan_key_groups_option(p, o, err))
                return -1;
            continue;
        }
        if (strcasecmp(o->key, "placement") == 0) {
            /* In a cluster (plan_place.c): 'auto' distributes the views of
             * the one shape that can be, 'replicated' keeps this one on
             * every node (views over it, whole reads on every node). Kept
             * in the text; ignored outside a cluster. */
            bool repl = o->value && !strcasecmp(o->value, "replicated");
            if (!repl && (!o->value || strcasecmp(o->value, "auto"))) {
                werr(err, SQLSTATE_INVALID_PARAMETER, o->pos, "placement must be 'auto' or 'replicated', not '%s'",
                     o->value ? o->value : "");
                return -1;
            }
            p->placement_replicated = repl;
            continue;
        }
        if (strcasecmp(o->key, "agg_phase_strategy") == 0) {
            /* Flink's table.optimizer.agg-phase-strategy (plan_dist.c, split_agg).
             * Kept in the view's text, so re-planning at start gives the same shape. */
            static const char *const strategies[] = {"auto", "one_phase", "two_phase"};
            p->agg_phase_strategy = -1;
            for (int k = 0; k < 3 && o->value; k++)
                if (strcasecmp(o->value, strategies[k]) == 0)
                    p->agg_phase_strategy = k;
            if (p->agg_phase_strategy < 0) {
                werr(err, SQLSTATE_INVALID_PARAMETER, o->pos,
                     "agg_phase_strategy must be 'auto', 'one_phase' or 'two_phase', not '%s'", o->value ? o->value : "");
                return -1;
            }
            continue;
        }
        if (strcasecmp(o->key, "state_ttl") != 0) {
            werr(err, SQLSTATE_INVALID_PARAMETER, o->pos, "unknown view option \"%s\"", o->key);
            werr_hint(err, "View options: agg_phase_strategy, backfill_from, key_groups, placement, state_ttl, "
                           "streaming_parallelism.");
            return -1;
        }
        Interval iv;
        int64_t us;
        if (!o->value || parse_interval(o->value, strlen(o->value), &iv) || interval_to_usecs(&iv, &us) ||
            us <= 0) {
            werr(err, SQLSTATE_INVALID_PARAMETER, o->pos, "state_ttl must be a positive interval such as '1 hour'");
            return -1;
        }
        vo->ttl_opt = o;
        p->state_ttl_us = us;
    }
    return 0;
}

/* A view must give the same result when its log is replayed: no clock. */
static int view_no_clock(PlanCtx *p, const AstCreateView *cv)
{
    WError *err = p->b.err;
    for (int i = 0; i < p->n_nodes; i++) {
        const PlanNode *n = p->nodes[i];
        int pos = 0;
        for (int k = 0; k < n->n_exprs && !pos; k++)
            pos = expr_find_fn(n->exprs[k], FN_NOW);
        if (!pos && n->pred)
            pos = expr_find_fn(n->pred, FN_NOW);
        if (!pos && n->residual)
            pos = expr_find_fn(n->residual, FN_NOW);
        if (pos) {
            werr(err, SQLSTATE_NOT_SUPPORTED, pos > 0 ? pos : cv->query_pos,
                 "feature not supported: now() or current_timestamp in a materialized view");
            werr_hint(err, "A view is recomputed from its log after a restart and must not depend on the clock; "
                           "use the event time columns instead.");
            return -1;
        }
    }

    return 0;
}

/* The MATERIALIZE over in that keeps the view's rows: keyed by in's key (a
 * hidden row id when in is keyless and append-only), with the view's column
 * names. NULL with err (42701 duplicate names, 42601 a wrong count of names). */
static PlanNode *view_materialize(PlanCtx *p, const AstCreateView *cv, const PlanViewOptions *opt, PlanNode *in)
{
    Arena *a = p->b.a;
    WError *err = p->b.err;
    PlanNode *m = new_node(p, PN_MATERIALIZE, in);
    m->view_name = opt && opt->name ? arena_strdup(a, opt->name) : "view";
    m->table_id = new_table(p);
    m->append_only = in->append_only;
    m->wm_col = in->wm_col;
    if (in->n_keys || !in->append_only) {
        /* Keyed rows; a retracting input without key columns is a single row
         * (a global aggregation), whose key is empty. Keys that may repeat
         * (whole rows of a join without unique keys) are counted. */
        m->counted = in->dup_keys;
        alloc_schema(a, &m->out, in->out.n);
        memcpy(m->out.names, in->out.names, sizeof(char *) * (size_t)in->out.n);
        memcpy(m->out.types, in->out.types, sizeof(TypeId) * (size_t)in->out.n);
        memcpy(m->out.hidden, in->out.hidden, sizeof(bool) * (size_t)in->out.n);
        m->n_keys = in->n_keys;
        m->keys = in->keys;
    } else {
        /* A keyless stream: every row is distinct; a hidden row id keys it. */
        m->row_id_key = true;
        alloc_schema(a, &m->out, in->out.n + 1);
        for (int i = 0; i < in->out.n; i++) {
            m->out.names[i] = in->out.names[i];
            m->out.types[i] = in->out.types[i];
            m->out.hidden[i] = in->out.hidden[i];
        }
        m->out.names[in->out.n] = "_row_id";
        m->out.types[in->out.n] = TYPE_INT8;
        m->out.hidden[in->out.n] = true;
        m->n_keys = 1;
        m->keys = arena_alloc(a, sizeof(int));
        m->keys[0] = in->out.n;
    }
    /* Duplicate output names are ambiguous for users of the view. */
    for (int i = 0; i < m->out.n; i++)
        for (int j = 0; j < i; j++)
            if (!m->out.hidden[i] && !m->out.hidden[j] && strcmp(m->out.names[i], m->out.names[j]) == 0) {
                werr(err, SQLSTATE_DUPLICATE_COLUMN, cv->query_pos,
                     "column \"%s\" specified more than once", m->out.names[i]);
                werr_hint(err, "Give the columns distinct names with AS.");
                return NULL;
            }
    if (cv->col_names) {
        int k = 0;
        for (int i = 0; i < m->out.n; i++)
            if (!m->out.hidden[i] && k < ast_list_len(cv->col_names))
                m->out.names[i] = arena_strdup(a, AST_AT(cv->col_names, k++));
        if (k != ast_list_len(cv->col_names)) {
            werr(err, SQLSTATE_SYNTAX_ERROR, cv->query_pos, "the view has %d columns but %d names were given", k,
                 ast_list_len(cv->col_names));
            return NULL;
        }
    }

    return m;
}

/* The PlanView of materialize m with the view's options (backfill, late rows). */
static PlanView *view_describe(PlanCtx *p, const AstCreateView *cv, const ViewOpts *vo, PlanNode *m, PlanNode *agg,
                               PlanNode *late_win)
{
    Arena *a = p->b.a;
    WError *err = p->b.err;
    PlanView *v = view_of(a, p, m);
    v->counted = m->counted;
    v->emit = agg ? agg->emit : PLAN_EMIT_CHANGES;
    if (vo->backfill && apply_backfill(a, v, vo->backfill, vo->start, vo->start_ts, err))
        return NULL;
    if (late_win) {
        v->late_name = arena_strdup(a, cv->late_rows_into);
        v->late_table_id = late_win->late_table_id;
        int nw = late_win->out.n;
        alloc_schema(a, &v->late_schema, nw + 1);
        for (int i = 0; i < nw; i++) {
            v->late_schema.names[i] = late_win->out.names[i];
            v->late_schema.types[i] = late_win->out.types[i];
            v->late_schema.hidden[i] = late_win->out.hidden[i];
        }
        v->late_schema.names[nw] = "watermark";
        v->late_schema.types[nw] = TYPE_TIMESTAMP;
    }
    return v;
}

PlanView *plan_view(const AstCreateView *cv, const PlanCatalog *cat, const PlanViewOptions *opt, Arena *a, WError *err)
{
    PlanCtx p;
    init_ctx(&p, cat, a, err, true);
    p.allow_unbounded = opt && opt->allow_unbounded;
    if (opt) {
        p.plan_rev = p.b.plan_rev = opt->plan_rev;
        p.cluster = opt->cluster;
    }
    if (!cv->materialized) {
        werr(err, SQLSTATE_NOT_SUPPORTED, cv->query_pos, "feature not supported: non-materialized views");
        werr_hint(err, "Use CREATE MATERIALIZED VIEW.");
        return NULL;
    }
    if (cv->or_replace) {
        werr(err, SQLSTATE_NOT_SUPPORTED, cv->query_pos, "feature not supported: CREATE OR REPLACE MATERIALIZED VIEW");
        werr_hint(err, "Drop the view and create it again.");
        return NULL;
    }
    ViewOpts vo = {.parallelism = opt && opt->parallelism > 0 ? opt->parallelism : 1, .start = PLAN_START_DEFAULT};
    if (view_options(&p, cv, &vo))
        return NULL;
    /* A view's rows have no order to cut (a LIMIT inside it is a Top-N). */
    if (plan_limit(&p, cv->query, NULL))
        return NULL;
    Rel r;
    if (plan_select(&p, cv->query, &r, NULL))
        return NULL;
    PlanNode *in = r.node;
    if (vo.ttl_opt && set_state_ttl(&p, vo.ttl_opt))
        return NULL;
    PlanNode *agg = NULL, *late_win = NULL;
    if (plan_view_lateness(&p, cv, in, &agg, &late_win) || check_sessions(&p) || view_no_clock(&p, cv))
        return NULL;
    PlanNode *m = view_materialize(&p, cv, opt, in);
    PlanView *v = m ? view_describe(&p, cv, &vo, m, agg, late_win) : NULL;
    if (!v)
        return NULL;
    plan_prune_joins(a, v);
    /* Before the distribution: a shared node's readers each get the
     * exchange they need from it (planner/README.md "Shared sub-plans"). */
    if (p.plan_rev >= 2 && plan_share(a, v)) {
        p.nodes = v->nodes;
        p.n_nodes = v->n_nodes;
    }
    if (plan_distribute(&p, v, vo.parallelism) || plan_place(&p, v, opt && opt->cluster, vo.parallelism) ||
        check_widths(v->nodes, v->n_nodes, err) ||
        check_limits(v->nodes, v->n_nodes, cv->query_pos, err))
        return NULL;
    return v;
}
