/*
 * test_plan_share.c: merging equal sub-plans (plan_share.c) and what it
 * keeps of the plan as it was.
 *
 * The shared plan asks the catalog for the same table ids in the same order
 * as the unshared one, and every node it keeps has the id and tables it had
 * there: that is what lets a view's state, written by either plan, be read
 * back by the same plan at start (planner/README.md "Shared sub-plans").
 * Also the typing rules of planner revision 4, old and new (rev4_types).
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

static const CatRelation *lookup(void *ctx, const char *name)
{
    static CatRelation src[2];
    int i = !strcmp(name, "src") ? 0 : !strcmp(name, "src2") ? 1 : -1;
    if (i < 0)
        return NULL;
    CatRelation *r = &src[i];
    memset(r, 0, sizeof *r);
    r->id = 1 + i;
    r->kind = CAT_SOURCE;
    r->name = i ? "src2" : "src";
    r->n_cols = 3;
    r->col_names = COLS;
    r->col_types = TYPES;
    r->wm_col = -1;
    r->wm_delay_us = -1;
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

static PlanView *plan(const char *sql, bool share, Cat *c, Arena *a)
{
    AstStmt **st;
    int n;
    WError err = {0};
    if (parse_sql(sql, a, &st, &n, &err) || n != 1 || st[0]->kind != STMT_CREATE_VIEW) {
        diag("parse: %s", err.msg);
        return NULL;
    }
    PlanCatalog cat = {.ctx = c, .lookup = lookup, .new_table_id = new_table_id};
    PlanViewOptions opt = {.name = "v", .allow_unbounded = true, .plan_rev = share ? PLAN_REV_CURRENT : 1};
    PlanView *v = plan_view(st[0]->u.create_view, &cat, &opt, a, &err);
    if (!v)
        diag("plan: %s %s", err.sqlstate, err.msg);
    return v;
}

/* The text EXPLAIN without its key-group notes: the plan at revision 1 (no
 * sharing) has no key groups (revision 6), and the comparisons are about
 * sharing only. */
static char *explain(const PlanView *v)
{
    Buf b = BUF_INIT;
    plan_explain_view(v, false, &b);
    char *p;
    while (b.data && (p = strstr(b.data, ", key groups: "))) {
        char *e = strchr(p, ']');
        memmove(p, e + 1, strlen(e + 1) + 1);
    }
    return b.data;
}

static int count_kind(const PlanView *v, PlanNodeKind k)
{
    int n = 0;
    for (int i = 0; i < v->n_nodes; i++)
        n += v->nodes[i]->kind == k;
    return n;
}

#define SUBQ "(SELECT k, count(*) AS n FROM src WHERE v > 0 GROUP BY k)"

static void self_join(void)
{
    const char *sql = "CREATE MATERIALIZED VIEW v AS SELECT a.k, a.n, b.n AS m FROM " SUBQ " a JOIN " SUBQ
                      " b ON a.k = b.k";
    Arena *a = arena_new(0);
    Cat c0 = {0}, c1 = {0};
    PlanView *u = plan(sql, false, &c0, a), *s = plan(sql, true, &c1, a);
    ok(u && s, "self-join: planned both ways");
    if (!u || !s) {
        arena_free(a);
        return;
    }
    ok(count_kind(u, PN_SOURCE) == 2 && count_kind(u, PN_AGG) == 2, "unshared: two sources, two aggregations");
    ok(count_kind(s, PN_SOURCE) == 1 && count_kind(s, PN_AGG) == 1, "shared: one source, one aggregation");
    const PlanNode *j = NULL;
    for (int i = 0; i < s->n_nodes; i++)
        if (s->nodes[i]->kind == PN_JOIN)
            j = s->nodes[i];
    ok(j && j->inputs[0] == j->inputs[1], "shared: the join reads one node on both sides");
    ok(c0.next == c1.next, "the same table ids are handed out either way");
    /* Every kept node is the unshared plan's node of the same id, with its tables. */
    bool same = true;
    for (int i = 0; i < s->n_nodes; i++) {
        const PlanNode *x = s->nodes[i], *y = NULL;
        for (int k = 0; k < u->n_nodes; k++)
            if (u->nodes[k]->id == x->id)
                y = u->nodes[k];
        same &= y && y->kind == x->kind && y->table_id == x->table_id && y->table_id2 == x->table_id2;
    }
    ok(same, "shared: every node keeps its id and state tables");
    bool topo = true;
    for (int i = 0; i < s->n_nodes; i++)
        for (int k = 0; k < s->nodes[i]->n_inputs; k++) {
            bool before = false;
            for (int m = 0; m < i; m++)
                before |= s->nodes[m] == s->nodes[i]->inputs[k];
            topo &= before;
        }
    ok(topo, "shared: nodes stay in topological order, inputs kept");
    char *e = explain(s);
    ok(e && strstr(e, "[shared #1, 2 readers]") && strstr(e, "[shared #1, shown above]"),
       "EXPLAIN: the shared node once in full, then a reference");
    free(e);
    e = explain(u);
    ok(e && !strstr(e, "shared"), "EXPLAIN unshared: no reference");
    free(e);
    Buf b = BUF_INIT;
    plan_explain_view(s, true, &b);
    ok(b.data && strstr(b.data, "\"shared\": 1, \"readers\": 2") && strstr(b.data, "\"shared\": 1, \"shown_above\": true}"),
       "EXPLAIN JSON: the shared node once with its readers, then a reference");
    buf_free(&b);
    arena_free(a);
}

/* Plans that must not change: no duplicates, or copies that differ. */
static void unchanged(const char *what, const char *sql)
{
    Arena *a = arena_new(0);
    Cat c0 = {0}, c1 = {0};
    PlanView *u = plan(sql, false, &c0, a), *s = plan(sql, true, &c1, a);
    char *eu = u ? explain(u) : NULL, *es = s ? explain(s) : NULL;
    ok(u && s && u->n_nodes == s->n_nodes && eu && es && !strcmp(eu, es) && !strstr(es, "shared"), what);
    free(eu);
    free(es);
    arena_free(a);
}

/* Planner revision 4 (issue 17): sum(bigint), avg over integers and
 * EXTRACT are numeric; a view planned under an older revision keeps the
 * types (and so the state layout) it was created with. */
static void rev4_types(void)
{
    const char *sql = "CREATE MATERIALIZED VIEW v AS SELECT k, sum(v) AS s, avg(v) AS a, "
                      "max(extract(epoch FROM ts)) AS e FROM src GROUP BY k";
    Arena *a = arena_new(0);
    Cat c0 = {0}, c1 = {0};
    PlanView *old = plan(sql, false, &c0, a), *cur = plan(sql, true, &c1, a);
    ok(old && old->schema.n == 4 && old->schema.types[1] == TYPE_INT8 && old->schema.types[2] == TYPE_FLOAT8 &&
           old->schema.types[3] == TYPE_FLOAT8,
       "revision 1: bigint sum, double avg and extract");
    ok(cur && cur->schema.n == 4 && cur->schema.types[1] == TYPE_NUMERIC && cur->schema.types[2] == TYPE_NUMERIC &&
           cur->schema.types[3] == TYPE_NUMERIC,
       "current revision: numeric sum, avg and extract, as in Postgres");
    arena_free(a);
}

int main(void)
{
    self_join();
    rev4_types();
    unchanged("no duplicates: the plan as before", "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) FROM src GROUP BY k");
    unchanged("another source with the same columns: not shared",
              "CREATE MATERIALIZED VIEW v AS SELECT a.k FROM src a JOIN src2 b ON a.k = b.k");
    /* Copies that differ above the source: the source is read once, the rest stays apart. */
    Arena *a = arena_new(0);
    Cat c = {0};
    PlanView *v = plan("CREATE MATERIALIZED VIEW v AS SELECT a.k FROM (SELECT k, count(*) AS n FROM src WHERE v > 0 "
                       "GROUP BY k) a JOIN (SELECT k, count(*) AS n FROM src WHERE v > 1 GROUP BY k) b ON a.k = b.k",
                       true, &c, a);
    ok(v && count_kind(v, PN_SOURCE) == 1 && count_kind(v, PN_FILTER) == 2 && count_kind(v, PN_AGG) == 2,
       "different filters: one source, two filters and aggregations");
    arena_free(a);
    return tap_done();
}
