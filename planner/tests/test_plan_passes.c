/*
 * test_plan_passes.c: the lowering passes one by one, each on the plan a
 * small view gets: join classification (plan_join.c: equality keys,
 * interval bounds, window joins, residual), the aggregate's window analysis
 * (plan_agg.c), the lateness pass (plan_late.c) and the order in which a
 * view asks for its state table ids (plan_view.c: replay depends on it).
 */
#include "planner.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

typedef struct Cat {
    uint64_t next;
} Cat;

static const char *COLS[] = {"k", "v", "ts"};
static const TypeId TYPES[] = {TYPE_INT8, TYPE_INT8, TYPE_TIMESTAMP};
static const CatOption OPTS[] = {{"connector", "kafka"}, {"topic", "t"}};
static PlanExpr WM = {.kind = PE_COL, .col = 2, .type = TYPE_TIMESTAMP};

/* src and src2: (k, v, ts) with a WATERMARK FOR ts AS ts; keyless: without a watermark. */
static const CatRelation *lookup(void *ctx, const char *name)
{
    static CatRelation src[3];
    int i = !strcmp(name, "src") ? 0 : !strcmp(name, "src2") ? 1 : !strcmp(name, "nowm") ? 2 : -1;
    if (i < 0)
        return NULL;
    CatRelation *r = &src[i];
    memset(r, 0, sizeof *r);
    r->id = 1 + i;
    r->kind = CAT_SOURCE;
    r->name = name;
    r->n_cols = 3;
    r->col_names = COLS;
    r->col_types = TYPES;
    r->wm_col = i < 2 ? 2 : -1;
    r->wm_expr = i < 2 ? &WM : NULL;
    r->wm_delay_us = i < 2 ? 0 : -1;
    r->append_only = true;
    r->n_options = 2;
    r->options = OPTS;
    return r;
}

static uint64_t new_table_id(void *ctx)
{
    Cat *c = ctx;
    return 100 + c->next++;
}

static PlanView *plan_rev(const char *sql, int rev, Cat *c, Arena *a, WError *err);

static PlanView *plan(const char *sql, Cat *c, Arena *a, WError *err)
{
    return plan_rev(sql, PLAN_REV_CURRENT, c, a, err);
}

static PlanView *plan_rev(const char *sql, int rev, Cat *c, Arena *a, WError *err)
{
    AstStmt **st;
    int n;
    if (parse_sql(sql, a, &st, &n, err) || n != 1 || st[0]->kind != STMT_CREATE_VIEW) {
        diag("parse: %s", err->msg);
        return NULL;
    }
    PlanCatalog cat = {.ctx = c, .lookup = lookup, .new_table_id = new_table_id};
    PlanViewOptions opt = {.name = "v", .allow_unbounded = true, .plan_rev = rev};
    return plan_view(st[0]->u.create_view, &cat, &opt, a, err);
}

static const PlanNode *find(const PlanView *v, PlanNodeKind k)
{
    for (int i = 0; v && i < v->n_nodes; i++)
        if (v->nodes[i]->kind == k)
            return v->nodes[i];
    return NULL;
}

static void join_classification(void)
{
    Arena *a = arena_new(0);
    Cat c = {0};
    WError err = {0};
    PlanView *v = plan("CREATE MATERIALIZED VIEW v AS SELECT a.k, b.v FROM src a JOIN src2 b ON a.k = b.k "
                       "AND b.ts >= a.ts - INTERVAL '1' SECOND AND b.ts < a.ts + INTERVAL '2' SECOND AND a.v > b.v",
                       &c, a, &err);
    const PlanNode *j = find(v, PN_JOIN);
    ok(j && j->interval, "interval join: both time bounds over append-only inputs");
    ok(j && j->n_join_keys == 1 && j->left_keys[0] == 0 && j->right_keys[0] == 0, "interval join: the equality is the key");
    is_int(j ? j->lo_us : 0, -1000000, "interval join: lower bound of right - left, inclusive");
    is_int(j ? j->hi_us : 0, 1999999, "interval join: a strict upper bound is one microsecond less");
    ok(j && j->left_time_col == 2 && j->right_time_col == 2, "interval join: the event-time columns");
    ok(j && j->residual && j->residual->kind == PE_CALL && j->residual->fn != FN_AND,
       "interval join: the one other condition is the residual");
    ok(j && j->append_only, "interval join: append-only");

    v = plan("CREATE MATERIALIZED VIEW v AS SELECT a.k FROM src a JOIN src2 b ON a.k = b.k AND a.v = b.v", &c, a, &err);
    j = find(v, PN_JOIN);
    ok(j && !j->interval && j->n_join_keys == 2 && !j->residual, "regular join: two keys, no residual");
    ok(j && j->table_id && j->table_id2 == j->table_id + 1, "regular join: two state tables, asked for in a row");

    v = plan("CREATE MATERIALIZED VIEW v AS SELECT a.window_end FROM "
             "(SELECT window_start, window_end, count(*) AS n FROM TUMBLE(src, ts, INTERVAL '1' MINUTE) "
             "GROUP BY window_start, window_end) a JOIN "
             "(SELECT window_start, window_end, count(*) AS n FROM TUMBLE(src2, ts, INTERVAL '1' MINUTE) "
             "GROUP BY window_start, window_end) b ON a.window_end = b.window_end",
             &c, a, &err);
    j = find(v, PN_JOIN);
    ok(j && j->n_join_keys == 1, "window join: window_end is the key");
    ok(!v || !j || (j->interval == (j->inputs[0]->append_only && j->inputs[1]->append_only)),
       "window join: an interval join exactly when both inputs are append-only");
    ok(j && (!j->interval || (j->window_join && j->lo_us == 0 && j->hi_us == 0)),
       "window join: bounds [0, 0] when it is an interval join");

    v = plan("CREATE MATERIALIZED VIEW v AS SELECT a.k FROM src a LEFT JOIN src2 b USING (k)", &c, a, &err);
    j = find(v, PN_JOIN);
    ok(j && j->n_join_keys == 1 && j->join_type == JOIN_LEFT && !j->append_only && j->wm_col == -1,
       "LEFT JOIN USING: the key, a changelog, no watermark");
    arena_free(a);
}

static void aggregate_and_lateness(void)
{
    Arena *a = arena_new(0);
    Cat c = {0};
    WError err = {0};
    PlanView *v = plan("CREATE MATERIALIZED VIEW v AS SELECT k, window_end, sum(v) AS s FROM "
                       "TUMBLE(src, ts, INTERVAL '1' MINUTE) GROUP BY k, window_end "
                       "EMIT ON WINDOW CLOSE ALLOW LATENESS INTERVAL '5' SECOND",
                       &c, a, &err);
    const PlanNode *g = find(v, PN_AGG), *w = find(v, PN_WINDOW);
    ok(g && g->win_group_idx == 1 && g->wm_col == 1 && g->n_group_bounds == 1,
       "aggregate: window_end (the second key) bounds the state");
    ok(g && g->emit == PLAN_EMIT_ON_CLOSE && g->lateness_us == 5000000, "lateness pass: emit mode and lateness");
    ok(g && !g->append_only, "lateness pass: with lateness, closed windows may still change");
    ok(w && w->late_check && w->lateness_us == 5000000, "lateness pass: the window drops late rows");

    v = plan("CREATE MATERIALIZED VIEW v AS SELECT k, count(*) FROM nowm GROUP BY k", &c, a, &err);
    g = find(v, PN_AGG);
    ok(g && g->win_group_idx < 0 && !g->session, "aggregate: no window key, no bound");

    err = (WError){0};
    v = plan("CREATE MATERIALIZED VIEW v AS SELECT k, count(*) FROM nowm GROUP BY k EMIT ON WINDOW CLOSE", &c, a, &err);
    ok(!v && !strcmp(err.sqlstate, "42P20"), "lateness pass: EMIT ON WINDOW CLOSE needs a window (42P20)");

    err = (WError){0};
    v = plan("CREATE MATERIALIZED VIEW v AS SELECT window_start, count(*) FROM SESSION(src, ts, INTERVAL '1' MINUTE) "
             "GROUP BY window_start",
             &c, a, &err);
    ok(!v && !strcmp(err.sqlstate, "42P20"), "aggregate: a session needs both bounds grouped (42P20)");
    arena_free(a);
}

/* The ids a view asks for, in order: each stateful node as it is made
 * (bottom up), the materialize last. */
static void table_id_order(void)
{
    Arena *a = arena_new(0);
    Cat c = {0};
    WError err = {0};
    PlanView *v = plan("CREATE MATERIALIZED VIEW v AS SELECT a.k, count(*) AS n FROM src a JOIN src2 b ON a.k = b.k "
                       "GROUP BY a.k",
                       &c, a, &err);
    const PlanNode *j = find(v, PN_JOIN), *g = find(v, PN_AGG), *m = v ? v->root : NULL;
    ok(j && g && m, "join + aggregate: planned");
    /* The sources ask for theirs first (their offsets), in FROM order. */
    ok(j && j->table_id2 == j->table_id + 1, "ids: the join's two tables in a row");
    ok(j && g && g->table_id == j->table_id2 + 1, "ids: then the aggregation");
    ok(m && g && m->table_id == g->table_id + 1 && m->table_id == 100 + c.next - 1, "ids: the materialize last");
    uint64_t prev = 0;
    bool rising = true;
    for (int i = 0; v && i < v->n_nodes; i++)
        if (v->nodes[i]->table_id) {
            rising &= v->nodes[i]->table_id > prev;
            prev = v->nodes[i]->table_id;
        }
    ok(rising, "ids: rising in node order (the order nodes are made)");
    arena_free(a);
}

/* Planner revision 7: decimal literals are numeric, a deduplication is keyed
 * by its partition; a view planned at revision 6 keeps both as they were. */
static void revision_7(void)
{
    Arena *a = arena_new(0);
    Cat c = {0};
    WError err = {0};
    const char *lit = "CREATE MATERIALIZED VIEW v AS SELECT 0.908 * v AS p, 7.0 / 2 AS h, 1e300 AS big FROM src";
    const PlanView *v6 = plan_rev(lit, 6, &c, a, &err), *v7 = plan_rev(lit, 7, &c, a, &err);
    const PlanNode *p6 = find(v6, PN_PROJECT), *p7 = find(v7, PN_PROJECT);
    ok(p6 && p6->out.types[0] == TYPE_FLOAT8 && p6->out.types[1] == TYPE_FLOAT8, "rev 6: decimal literals are doubles");
    ok(p7 && p7->out.types[0] == TYPE_NUMERIC && p7->out.types[1] == TYPE_NUMERIC, "rev 7: decimal literals are numeric");
    ok(p7 && p7->out.types[2] == TYPE_FLOAT8, "rev 7: a literal past 38 digits stays a double");
    const char *dd = "CREATE MATERIALIZED VIEW v AS SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER "
                     "(PARTITION BY k ORDER BY ts DESC) AS rn FROM src) WHERE rn = 1";
    v6 = plan_rev(dd, 6, &c, a, &err);
    v7 = plan_rev(dd, 7, &c, a, &err);
    const PlanNode *t6 = find(v6, PN_TOPN), *t7 = find(v7, PN_TOPN);
    ok(t6 && t6->n_keys == 2 && t6->wm_col == -1, "rev 6: a dedup is keyed by (partition, rn), no watermark");
    ok(t7 && t7->n_keys == 1 && t7->keys[0] == 0 && t7->wm_col == 2,
       "rev 7: a dedup is keyed by the selected partition column and keeps the watermark of ORDER BY ts DESC");
    const PlanNode *m7 = find(v7, PN_MATERIALIZE);
    ok(m7 && m7->n_keys == 1 && m7->keys[0] == 0 && m7->wm_col == 2, "rev 7: the view's key is k, its watermark ts");
    v7 = plan_rev("CREATE MATERIALIZED VIEW v AS SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER "
                  "(PARTITION BY k ORDER BY ts) AS rn FROM src) WHERE rn = 1", 7, &c, a, &err);
    t7 = find(v7, PN_TOPN);
    ok(t7 && t7->n_keys == 1 && t7->wm_col == -1, "rev 7: the first row per key (ORDER BY ts) keeps no watermark");
    v7 = plan_rev("CREATE MATERIALIZED VIEW v AS SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER "
                  "(PARTITION BY k ORDER BY ts DESC) AS rn FROM src) WHERE rn <= 2", 7, &c, a, &err);
    t7 = find(v7, PN_TOPN);
    ok(t7 && t7->n_keys == 2, "rev 7: a Top-2 is still keyed by (partition, rn)");
    /* A source's computed columns are bound by the revision it was created
     * at (kept in the catalog), so a restart under this weir keeps their
     * types: its views were planned over them. */
    AstStmt **st;
    int n;
    TypeId ty[2] = {TYPE_NULL, TYPE_NULL};
    for (int rev = 6; rev <= 7; rev++) {
        if (parse_sql("CREATE SOURCE s (price BIGINT, tax AS price * 1.1) WITH (connector = 'kafka', topic = 't')", a,
                      &st, &n, &err) == 0 && n == 1) {
            CatRelation rel = {.name = "s"};
            if (plan_source(st[0]->u.create_source, &rel, rev, a, &err) == 0 && rel.n_cols == 2)
                ty[rev - 6] = rel.col_types[1];
        }
    }
    ok(ty[0] == TYPE_FLOAT8 && ty[1] == TYPE_NUMERIC,
       "a source's computed column `price * 1.1`: double precision at revision 6, numeric at 7");
    arena_free(a);
}

int main(void)
{
    revision_7();
    join_classification();
    aggregate_and_lateness();
    table_id_order();
    return tap_done();
}
