/*
 * test_plan_dist.c: the distribution pass's handling of a view's rows.
 *
 * A split materialize asks for its instances' tables last, so a view
 * created before the split (its catalog entry holds no ids for them) is
 * re-planned at start with the materialize single, its gather before it,
 * exactly as it was; with the ids there, it is split again the same way.
 * The catalog here hands out table ids from a counter, up to a budget
 * (a replayed catalog entry's list of ids).
 */
#include "planner.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Cat {
    uint64_t next;
    uint64_t budget;          /* ids handed out before new_table_id answers 0 */
} Cat;

static const char *COLS[] = {"k", "v", "ts"};
static const TypeId TYPES[] = {TYPE_INT8, TYPE_INT8, TYPE_TIMESTAMP};
static const CatOption OPTS[] = {{"connector", "kafka"}, {"topic", "t"}};
static const CatOption OPTS_LATEST[] = {{"connector", "kafka"}, {"topic", "t"}, {"scan.startup.mode", "latest"}};
static PlanExpr WM = {.kind = PE_COL, .col = 2, .type = TYPE_TIMESTAMP};

static const char *VCOLS[] = {"k", "n"};
static const TypeId VTYPES[] = {TYPE_INT8, TYPE_INT8};
static const int VPK[] = {0};

static const CatRelation *lookup(void *ctx, const char *name)
{
    static CatRelation src, view;
    if (!strcmp(name, "dview")) { /* a view distributed over a cluster */
        memset(&view, 0, sizeof view);
        view.id = 2;
        view.kind = CAT_VIEW;
        view.name = "dview";
        view.materialized = true;
        view.n_cols = 2;
        view.col_names = VCOLS;
        view.col_types = VTYPES;
        view.wm_col = -1;
        view.wm_delay_us = -1;
        view.n_pk = 1;
        view.pk = VPK;
        view.table_id = 50;
        view.distributed = true;
        return &view;
    }
    bool wm = !strcmp(name, "wsrc"); /* the same source with a watermark on ts */
    bool latest = !strcmp(name, "lsrc"); /* ... starting at 'latest' */
    if (strcmp(name, "src") && !wm && !latest)
        return NULL;
    memset(&src, 0, sizeof src);
    src.id = 1;
    src.kind = CAT_SOURCE;
    src.name = wm ? "wsrc" : "src";
    src.n_cols = 3;
    src.col_names = COLS;
    src.col_types = TYPES;
    src.wm_col = wm ? 2 : -1;
    src.wm_delay_us = wm ? 0 : -1;
    src.wm_expr = wm ? &WM : NULL;
    src.append_only = true;
    src.n_options = latest ? 3 : 2;
    src.options = latest ? OPTS_LATEST : OPTS;
    return &src;
}

static uint64_t new_table_id(void *ctx)
{
    Cat *c = ctx;
    return c->next < c->budget ? 100 + c->next++ : 0;
}

static PlanView *plan_opt(const char *sql, Cat *c, int P, bool cluster, int rev, Arena *a)
{
    AstStmt **st;
    int n;
    WError err = {0};
    if (parse_sql(sql, a, &st, &n, &err) || n != 1 || st[0]->kind != STMT_CREATE_VIEW) {
        diag("parse: %s", err.msg);
        return NULL;
    }
    PlanCatalog cat = {.ctx = c, .lookup = lookup, .new_table_id = new_table_id};
    PlanViewOptions opt = {.name = "v", .allow_unbounded = true, .parallelism = P, .cluster = cluster, .plan_rev = rev};
    PlanView *v = plan_view(st[0]->u.create_view, &cat, &opt, a, &err);
    if (!v)
        diag("plan: %s %s", err.sqlstate, err.msg);
    return v;
}

static PlanView *plan(const char *sql, Cat *c, int P, Arena *a) { return plan_opt(sql, c, P, false, 0, a); }

static void check(const char *what, const char *sql)
{
    Arena *a = arena_new(0);
    Cat full = {0, 1000};
    PlanView *v = plan(sql, &full, 3, a);
    ok(v && v->changes && v->root->parallelism == 3, what);
    if (!v || !v->changes) {
        arena_free(a);
        return;
    }
    const PlanNode *m = v->root;
    ok(v->nodes[v->n_nodes - 1] == v->changes && v->changes->inputs[0]->kind == PN_EXCHANGE &&
           v->changes->inputs[0]->ex_lazy && v->changes->inputs[0]->inputs[0] == m,
       "split: materialize -> lazy gather -> ViewChanges, last");
    ok(m->shard_tables && m->shard_tables[2] == 100 + full.next - 2 && m->shard_tables[4] == 100 + full.next - 1,
       "split: the materialize's other instances' tables are the last ids");
    uint64_t ids = full.next;

    /* The same view from a catalog entry written before the split: two ids short. */
    Cat old = {0, ids - 2};
    PlanView *w = plan(sql, &old, 3, a);
    ok(w && !w->changes && w->root->parallelism == 1 && w->root->dist == PLAN_DIST_SINGLE,
       "old entry: the materialize stays single");
    if (w) {
        const PlanNode *e = w->root->inputs[0];
        ok(e->kind == PN_EXCHANGE && e->dist == PLAN_DIST_SINGLE && !e->ex_lazy && e->out.n == e->inputs[0]->out.n,
           "old entry: the gather comes before it, with its input's columns");
        ok(w->nodes[w->n_nodes - 1] == w->root && w->nodes[w->n_nodes - 2] == e, "old entry: node order is topological");
        bool tables_same = true;
        for (int i = 0; i < w->n_nodes; i++)
            for (int s = 0; w->nodes[i]->shard_tables && s < 6; s++)
                tables_same &= w->nodes[i]->shard_tables[s] == 0 || w->nodes[i]->shard_tables[s] < 100 + ids - 2;
        ok(tables_same, "old entry: every other table keeps its id");
        Buf b = BUF_INIT;
        plan_explain_view(w, false, &b);
        ok(b.data && !strncmp(b.data, "StreamMaterialize", 17) && strstr(b.data, "why: materialize is single"),
           "old entry: EXPLAIN shows the single materialize");
        buf_free(&b);
    }
    arena_free(a);
}

/* A view planned in two phases: an entry written before both lacks the
 * local phases' ids too, which are asked for before the other instances'
 * tables, so it cannot be re-planned as it was: a clear 0A000, not state
 * read from another operator's tables. */
static void check_two_phase_old_entry(void)
{
    const char *sql = "CREATE MATERIALIZED VIEW v WITH (agg_phase_strategy = 'two_phase') AS "
                      "SELECT k, count(*) AS n FROM src GROUP BY k";
    Arena *a = arena_new(0);
    Cat full = {0, 1000};
    PlanView *v = plan(sql, &full, 3, a);
    bool local = false;
    for (int i = 0; v && i < v->n_nodes; i++)
        local |= v->nodes[i]->kind == PN_AGG && v->nodes[i]->agg_phase == PLAN_AGG_LOCAL;
    ok(v && v->changes && local, "two phases: planned split, with a local phase");
    /* Before: no local phase (1 table + 2 instances) and no store instances (2). */
    Cat old = {0, full.next - 5};
    AstStmt **st;
    int n;
    WError err = {0};
    PlanView *w = NULL;
    if (!parse_sql(sql, a, &st, &n, &err)) {
        PlanCatalog cat = {.ctx = &old, .lookup = lookup, .new_table_id = new_table_id};
        PlanViewOptions opt = {.name = "v", .allow_unbounded = true, .parallelism = 3};
        w = plan_view(st[0]->u.create_view, &cat, &opt, a, &err);
    }
    ok(!w && !strcmp(err.sqlstate, "0A000") && strstr(err.msg, "earlier weir"),
       "two phases, old entry: 0A000 asking to create the view again");
    arena_free(a);
}

/* "what: s", for a test's name (a few live at once). */
static const char *nm(const char *what, const char *s)
{
    static char buf[4][256];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s: %s", what, s);
    return buf[i];
}

static char *explain(const PlanView *v, bool json)
{
    Buf b = BUF_INIT;
    plan_explain_view(v, json, &b);
    return b.data; /* the caller frees it */
}

/* The placement of a view in a cluster (plan_place.c, revision 7): the one
 * shape that is distributed, with its repartition exchange and key-group
 * columns, and the same view's plan unchanged outside a cluster. */
static void check_distributed(const char *what, const char *sql, int n_mkg, const int *mkg)
{
    Arena *a = arena_new(0);
    Cat c1 = {0, 1000}, c2 = {0, 1000}, c3 = {0, 1000};
    PlanView *v = plan_opt(sql, &c1, 1, true, PLAN_REV_CURRENT, a);
    ok(v && v->distributed && v->placement && !strcmp(v->placement, "distributed over key groups"), nm(what, "distributed"));
    if (!v || !v->distributed) {
        arena_free(a);
        return;
    }
    int n_ex = 0;
    const PlanNode *ex = NULL;
    for (int i = 0; i < v->n_nodes; i++)
        if (v->nodes[i]->kind == PN_EXCHANGE) {
            n_ex++;
            ex = v->nodes[i];
        }
    ok(n_ex == 1 && ex->repartition && ex->dist == PLAN_DIST_HASH && ex->key_groups == v->key_groups &&
           ex->table_id == 100 + c1.next - 1,
       nm(what, "one repartition exchange, hashed, over the view's key groups"));
    const PlanNode *k = NULL;
    bool order_ok = true;
    for (int i = 0; i < v->n_nodes; i++) {
        for (int j = 0; j < v->nodes[i]->n_inputs; j++)
            for (int l = i; l < v->n_nodes; l++)
                order_ok &= v->nodes[i]->inputs[j] != v->nodes[l];
        if (v->nodes[i]->n_inputs && v->nodes[i]->inputs[0] == ex)
            k = v->nodes[i];
    }
    ok(order_ok && k && k->key_groups && k->n_kg_cols[0] == ex->n_dist_keys &&
           !memcmp(k->kg_cols[0], ex->dist_keys, sizeof(int) * (size_t)ex->n_dist_keys),
       nm(what, "topological, the keyed node reads the exchange and groups by its columns"));
    ok(v->root->n_kg_cols[0] == n_mkg && !memcmp(v->root->kg_cols[0], mkg, sizeof(int) * (size_t)n_mkg),
       nm(what, "the view's key groups follow the exchange's columns"));
    char *t = explain(v, false), *j = explain(v, true);
    if (getenv("SHOW"))
        diag("%s", t);
    ok(strstr(t, "placement: distributed over key groups\n") && strstr(t, "through: repartition topic") &&
           strstr(j, "\"placement\": \"distributed over key groups\", \"distributed\": true}") &&
           strstr(j, "\"repartition\": true"),
       nm(what, "EXPLAIN shows the placement and the repartition exchange"));
    free(t);
    free(j);
    /* Outside a cluster: revision 7 plans as revision 6, no placement, but
     * with one key group by default instead of 128 (planner.h, revision 7). */
    PlanView *s7 = plan_opt(sql, &c2, 1, false, PLAN_REV_CURRENT, a), *s6 = plan_opt(sql, &c3, 1, false, 6, a);
    char *e7 = s7 ? explain(s7, true) : NULL, *e6 = s6 ? explain(s6, true) : NULL;
    for (char *p; e6 && (p = strstr(e6, "\"key_groups\": 128"));)
        memmove(p + 15, p + 17, strlen(p + 17) + 1), p[14] = '1';
    bool no_ex = true;
    for (int i = 0; s7 && i < s7->n_nodes; i++)
        no_ex &= s7->nodes[i]->kind != PN_EXCHANGE;
    ok(s7 && s6 && !s7->distributed && !s7->placement && no_ex && e7 && e6 && !strcmp(e7, e6) && c2.next == c3.next &&
           s7->n_nodes == s6->n_nodes && s7->n_nodes + 1 == v->n_nodes && c1.next == c2.next + 1,
       nm(what, "standalone, the plan of revision 6 (and the same tables)"));
    free(e7);
    free(e6);
    arena_free(a);
}

static void check_replicated(const char *what, const char *sql, int P, int rev, const char *why)
{
    Arena *a = arena_new(0);
    Cat c = {0, 1000};
    PlanView *v = plan_opt(sql, &c, P, true, rev, a);
    bool no_rp = true;
    for (int i = 0; v && i < v->n_nodes; i++)
        no_rp &= !v->nodes[i]->repartition;
    ok(v && !v->distributed && no_rp && v->placement && !strncmp(v->placement, "every node (replicated): ", 25) &&
           strstr(v->placement, why),
       nm(what, v && v->placement ? v->placement : "no placement"));
    if (v) {
        char *t = explain(v, false);
        if (getenv("SHOW"))
            diag("%s", t);
        ok(strstr(t, "placement: every node (replicated): "), nm(what, "EXPLAIN shows the placement"));
        free(t);
    }
    arena_free(a);
}

int main(void)
{
    check_distributed("GROUP BY k", "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) AS n FROM src GROUP BY k", 1,
                      (int[]){0});
    check_distributed("GROUP BY k, v reordered, filtered",
                      "CREATE MATERIALIZED VIEW v AS SELECT v, sum(ts - ts) AS s, k FROM src WHERE v > 0 GROUP BY k, v",
                      2, (int[]){2, 0});
    check_distributed("Top-N per k",
                      "CREATE MATERIALIZED VIEW v AS SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k "
                      "ORDER BY v DESC) AS rn FROM src) t WHERE rn <= 2",
                      1, (int[]){2});
    check_distributed("DISTINCT rows", "CREATE MATERIALIZED VIEW v AS SELECT DISTINCT k, v FROM src", 2, (int[]){0, 1});
    check_replicated("aggregation without GROUP BY", "CREATE MATERIALIZED VIEW v AS SELECT count(*) AS n FROM src", 1,
                     PLAN_REV_CURRENT, "without GROUP BY");
    check_replicated("two shuffles",
                     "CREATE MATERIALIZED VIEW v AS SELECT n, count(*) AS c FROM (SELECT k, count(*) AS n FROM src "
                     "GROUP BY k) t GROUP BY n",
                     1, PLAN_REV_CURRENT, "second shuffle");
    check_replicated("self join",
                     "CREATE MATERIALIZED VIEW v AS SELECT a.k, a.v, b.v AS w FROM src a JOIN src b ON a.k = b.k", 1,
                     PLAN_REV_CURRENT, "two inputs");
    check_replicated("windowed aggregation",
                     "CREATE MATERIALIZED VIEW v AS SELECT window_start, k, count(*) AS n FROM TUMBLE(wsrc, ts, "
                     "INTERVAL '1' MINUTE) GROUP BY window_start, k",
                     1, PLAN_REV_CURRENT, "window");
    /* Without a watermark the window's bounds are plain group columns. */
    check_distributed("window bounds without a watermark",
                      "CREATE MATERIALIZED VIEW v AS SELECT window_start, k, count(*) AS n FROM TUMBLE(src, ts, "
                      "INTERVAL '1' MINUTE) GROUP BY window_start, k",
                      2, (int[]){0, 1});
    check_replicated("keyless append-only view", "CREATE MATERIALIZED VIEW v AS SELECT k, v FROM src WHERE v > 1", 1,
                     PLAN_REV_CURRENT, "not split into key groups");
    check_replicated("source at 'latest'", "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) AS n FROM lsrc GROUP BY k",
                     1, PLAN_REV_CURRENT, "'latest'");
    check_replicated("WITH (placement = 'replicated')",
                     "CREATE MATERIALIZED VIEW v WITH (placement = 'replicated') AS SELECT k, count(*) AS n FROM src "
                     "GROUP BY k",
                     1, PLAN_REV_CURRENT, "placement = 'replicated'");
    {
        Arena *a = arena_new(0);
        Cat c = {0, 1000};
        AstStmt **st;
        int n;
        WError err = {0};
        PlanCatalog cat = {.ctx = &c, .lookup = lookup, .new_table_id = new_table_id};
        PlanViewOptions opt = {.name = "w", .allow_unbounded = true, .cluster = true, .plan_rev = PLAN_REV_CURRENT};
        PlanView *w = NULL;
        if (!parse_sql("CREATE MATERIALIZED VIEW w AS SELECT k, n FROM dview WHERE n > 1", a, &st, &n, &err))
            w = plan_view(st[0]->u.create_view, &cat, &opt, a, &err);
        ok(!w && !strcmp(err.sqlstate, "0A000") && strstr(err.msg, "dview"),
           "a view over a distributed view: 0A000 in a cluster");
        opt.cluster = false;
        werr_clear(&err);
        w = plan_view(st[0]->u.create_view, &cat, &opt, a, &err);
        ok(w != NULL, "... planned as before outside a cluster");
        werr_clear(&err);
        w = NULL;
        if (!parse_sql("CREATE MATERIALIZED VIEW w WITH (placement = 'somewhere') AS SELECT k FROM src", a, &st, &n,
                       &err))
            w = plan_view(st[0]->u.create_view, &cat, &opt, a, &err);
        ok(!w && !strcmp(err.sqlstate, "22023"), "placement must be 'auto' or 'replicated': 22023");
        arena_free(a);
    }
    check_replicated("parallel view", "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) AS n FROM src GROUP BY k", 2,
                     PLAN_REV_CURRENT, "streaming_parallelism");
    check_replicated("planned at revision 6",
                     "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) AS n FROM src GROUP BY k", 1, 6,
                     "before revision 7");
    check_two_phase_old_entry();
    check("keyed view: split", "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) AS n FROM src GROUP BY k");
    check("keyless append-only view: split", "CREATE MATERIALIZED VIEW v AS SELECT k, v FROM src WHERE v > 1");
    check("view keyed otherwise than its input: split",
          "CREATE MATERIALIZED VIEW v AS SELECT n, count(*) AS c FROM (SELECT k, count(*) AS n FROM src GROUP BY k) t GROUP BY n");
    return tap_done();
}
