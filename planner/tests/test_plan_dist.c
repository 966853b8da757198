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

#include <string.h>

typedef struct Cat {
    uint64_t next;
    uint64_t budget;          /* ids handed out before new_table_id answers 0 */
} Cat;

static const char *COLS[] = {"k", "v", "ts"};
static const TypeId TYPES[] = {TYPE_INT8, TYPE_INT8, TYPE_TIMESTAMP};
static const CatOption OPTS[] = {{"connector", "kafka"}, {"topic", "t"}};

static const CatRelation *lookup(void *ctx, const char *name)
{
    static CatRelation src;
    if (strcmp(name, "src"))
        return NULL;
    memset(&src, 0, sizeof src);
    src.id = 1;
    src.kind = CAT_SOURCE;
    src.name = "src";
    src.n_cols = 3;
    src.col_names = COLS;
    src.col_types = TYPES;
    src.wm_col = -1;
    src.wm_delay_us = -1;
    src.append_only = true;
    src.n_options = 2;
    src.options = OPTS;
    return &src;
}

static uint64_t new_table_id(void *ctx)
{
    Cat *c = ctx;
    return c->next < c->budget ? 100 + c->next++ : 0;
}

static PlanView *plan(const char *sql, Cat *c, int P, Arena *a)
{
    AstStmt **st;
    int n;
    WError err = {0};
    if (parse_sql(sql, a, &st, &n, &err) || n != 1 || st[0]->kind != STMT_CREATE_VIEW) {
        diag("parse: %s", err.msg);
        return NULL;
    }
    PlanCatalog cat = {.ctx = c, .lookup = lookup, .new_table_id = new_table_id};
    PlanViewOptions opt = {.name = "v", .allow_unbounded = true, .parallelism = P};
    PlanView *v = plan_view(st[0]->u.create_view, &cat, &opt, a, &err);
    if (!v)
        diag("plan: %s %s", err.sqlstate, err.msg);
    return v;
}

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

int main(void)
{
    check_two_phase_old_entry();
    check("keyed view: split", "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) AS n FROM src GROUP BY k");
    check("keyless append-only view: split", "CREATE MATERIALIZED VIEW v AS SELECT k, v FROM src WHERE v > 1");
    check("view keyed otherwise than its input: split",
          "CREATE MATERIALIZED VIEW v AS SELECT n, count(*) AS c FROM (SELECT k, count(*) AS n FROM src GROUP BY k) t GROUP BY n");
    return tap_done();
}
