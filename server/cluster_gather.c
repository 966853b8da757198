/*
 * cluster_gather.c: ad hoc reads of distributed views in a cluster (issue 16
 * part 6).
 *
 * A distributed view's rows are split by key group over the nodes: each node
 * keeps the rows of the key groups the work group assigned to it (the
 * partitions of the view's repartition topic). A SELECT on any node must see
 * the whole view, so before the query runs the node gathers:
 *
 *   lock:    plan the query; for every distributed view it scans, the key
 *            groups this node owns, and every node's assignment as its last
 *            heartbeat says (cluster_nodes: "topic:0,3,6 ...")
 *   unlock:  for each other node owning some of the missing groups, over the
 *            Postgres protocol (libpq): SET weir.read_key_groups = 'ID:kg,..'
 *            then SELECT kg, key, value FROM weir_key_group_rows: that node
 *            checks under its lock that it owns every group asked (40001
 *            otherwise) and answers the stored entries of exactly those
 *            groups (key with its 2-byte group prefix, value as stored)
 *   lock:    the owned groups are the same as at the start (else 40001, the
 *            caller retries); a temporary table gets the local groups'
 *            entries and the remote ones, keys without the prefix, as the
 *            view's grouped read handle gives them
 *   query:   the engine's view_table callback hands the temporary table to
 *            the scans of the view (engine.c), so the query reads one whole,
 *            ordered, consistent-per-group copy of the view
 *
 * Never a partial answer: a group no live node claims is 57P03, a node that
 * cannot be reached 08006, a node that no longer owns a group it was asked
 * for 40001 (a rebalance: retry), a view too big to gather 54000. No engine
 * lock is held while waiting on another node, so two nodes gathering from
 * each other cannot deadlock.
 */
#include "commands.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cluster.h"
#include "keygroup.h"
#include "log.h"

/* The bytes (keys + values) one SELECT may gather into memory, over all the
 * distributed views it reads. Checked as entries arrive (54000). */
#define GATHER_MAX_BYTES ((size_t)1 << 30)
/* How long a remote node has to answer (connect + query). */
#define GATHER_CONNECT_TIMEOUT_S 5

typedef struct GatherView {
    uint64_t table_id;
    const char *name;
    int G;
    char topic[256];
    int n_owned;
    uint16_t owned[WEIR_MAX_KEY_GROUPS];
    int owner[WEIR_MAX_KEY_GROUPS];   /* index into the node list; -1 nobody, -2 this node */
    Buf remote;                       /* entries from other nodes: u32 klen, key, u32 vlen, value */
    StorTable *temp;
} GatherView;

struct ClusterGather {
    int n;
    GatherView *v;
    size_t bytes;
};

/* ---- requests ("<table id>:<kg>,<kg>,...") ------------------------------------------------ */

int cluster_gather_parse_request(const char *s, uint64_t *table_id, uint16_t *kgs, int max, int *n, WError *err)
{
    char *end;
    *n = 0;
    unsigned long long id = strtoull(s, &end, 10);
    if (end == s || *end != ':')
        goto bad;
    *table_id = id;
    const char *p = end + 1;
    while (*p) {
        long kg = strtol(p, &end, 10);
        if (end == p || kg < 0 || kg >= WEIR_MAX_KEY_GROUPS || *n >= max || (*end && *end != ','))
            goto bad;
        kgs[(*n)++] = (uint16_t)kg;
        p = *end ? end + 1 : end;
    }
    return 0;
bad:
    return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                "invalid value for parameter \"weir.read_key_groups\": \"%s\" (want \"<view table id>:<key "
                "group>,...\")",
                s);
}

static CatObj *view_by_table(Engine *e, uint64_t table_id)
{
    CAT_FOREACH(e->cat, CAT_ANY, o)
        if (o->kind == CAT_VIEW && o->rel.table_id == table_id)
            return o;
    return NULL;
}

static bool holds(const uint16_t *set, int n, uint16_t kg)
{
    for (int i = 0; i < n; i++)
        if (set[i] == kg)
            return true;
    return false;
}

int cluster_gather_check_request(Engine *e, const char *setting, WError *err)
{
    uint64_t id;
    uint16_t want[WEIR_MAX_KEY_GROUPS], owned[WEIR_MAX_KEY_GROUPS];
    int n;
    if (cluster_gather_parse_request(setting, &id, want, WEIR_MAX_KEY_GROUPS, &n, err))
        return -1;
    CatObj *o = view_by_table(e, id);
    if (!o)
        return werr(err, SQLSTATE_UNDEFINED_TABLE, 0, "no materialized view has state table %llu on node \"%s\"",
                    (unsigned long long)id, e->node_id ? e->node_id : "");
    if (!o->flow.df)
        return werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, 0, "materialized view \"%s\" is not running on node \"%s\"",
                    o->name, e->node_id ? e->node_id : "");
    int n_owned = rt_dataflow_owned_kgs(o->flow.df, owned, WEIR_MAX_KEY_GROUPS);
    for (int i = 0; i < n; i++)
        if (n_owned >= 0 && !holds(owned, n_owned, want[i]))
            return werr(err, SQLSTATE_SERIALIZATION_FAILURE, 0,
                        "key group %d of materialized view \"%s\" is not on node \"%s\" any more (the cluster is "
                        "rebalancing)",
                        (int)want[i], o->name, e->node_id ? e->node_id : ""),
                   werr_hint(err, "Run the statement again."), -1;
    return 0;
}

/* ---- the remote side: weir_key_group_rows ------------------------------------------------ */

typedef struct RowsOut {
    Arena *a;
    CatRelation *rel;
    int kg;
    int cap;
} RowsOut;

static int add_row(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    RowsOut *r = arg;
    if (r->rel->n_rows == r->cap) {
        int cap = r->cap ? r->cap * 2 : 256;
        Value **rows = arena_alloc(r->a, sizeof *rows * (size_t)cap);
        if (r->rel->n_rows)
            memcpy(rows, r->rel->rows, sizeof *rows * (size_t)r->rel->n_rows);
        r->rel->rows = rows;
        r->cap = cap;
    }
    Value *row = arena_alloc(r->a, sizeof(Value) * 3);
    row[0] = value_int(TYPE_INT4, r->kg);
    void *k = arena_alloc(r->a, klen ? klen : 1), *v = arena_alloc(r->a, vlen ? vlen : 1);
    memcpy(k, key, klen);
    memcpy(v, val, vlen);
    row[1] = value_str(TYPE_BYTEA, k, klen);
    row[2] = value_str(TYPE_BYTEA, v, vlen);
    r->rel->rows[r->rel->n_rows++] = row;
    return 0;
}

const CatRelation *cluster_key_group_rows(Engine *e, Arena *a)
{
    static const char *const names[] = {"kg", "key", "value"};
    static const TypeId types[] = {TYPE_INT4, TYPE_BYTEA, TYPE_BYTEA};
    CatRelation *rel = arena_zalloc(a, sizeof *rel);
    rel->kind = CAT_SYSTEM;
    rel->name = "weir_key_group_rows";
    rel->n_cols = 3;
    rel->col_names = (const char **)names;
    rel->col_types = types;
    rel->wm_col = -1;
    rel->wm_delay_us = -1;
    rel->append_only = true;
    uint64_t id;
    uint16_t want[WEIR_MAX_KEY_GROUPS];
    int n;
    WError err = {0};
    /* Checked by cluster_gather_check_request before planning; an empty
     * relation without a request (a user looking at it). */
    if (!e->read_key_groups || !*e->read_key_groups ||
        cluster_gather_parse_request(e->read_key_groups, &id, want, WEIR_MAX_KEY_GROUPS, &n, &err))
        return rel;
    CatObj *o = view_by_table(e, id);
    StorTable *store = o && o->flow.df ? rt_dataflow_view_store(o->flow.df) : NULL;
    if (!store)
        return rel;
    RowsOut r = {a, rel, 0, 0};
    for (int i = 0; i < n; i++) {
        r.kg = want[i];
        if (stor_kg_export(store, want[i], add_row, &r, &err) < 0) {
            wlog_error("cluster", "reading key group %d of %s for another node: %s", (int)want[i], o->name, err.msg);
            rel->n_rows = 0;
            break;
        }
    }
    return rel;
}

/* ---- the gathering side --------------------------------------------------------------------- */

static bool in_list(const char *list, const char *topic, int32_t part)
{
    /* list: "topic:0,3,6 t2:1"; topic names have no spaces or colons */
    size_t tl = strlen(topic);
    for (const char *p = list; p && *p;) {
        const char *colon = strchr(p, ':');
        const char *sp = strchr(p, ' ');
        if (!colon || (sp && sp < colon))
            return false;
        bool match = (size_t)(colon - p) == tl && !memcmp(p, topic, tl);
        const char *q = colon + 1;
        while (*q && *q != ' ') {
            char *end;
            long v = strtol(q, &end, 10);
            if (end == q)
                break;
            if (match && v == part)
                return true;
            q = *end == ',' ? end + 1 : end;
        }
        p = *q == ' ' ? q + 1 : q;
    }
    return false;
}

/* Under the lock: the distributed views the query scans, with what this
 * node owns of each. */
static int find_views(Engine *e, const AstStmt *st, ClusterGather *g, WError *err)
{
    Arena *a = arena_new(0);
    PlanCatCtx pcx;
    PlanCatalog cat = engine_plan_catalog(e, &pcx, NULL, false, true, a);
    PlanQuery *q = plan_query(st->u.select, &cat, a, err);
    if (!q) {
        arena_free(a);
        return 1; /* the query itself fails: the normal path reports it */
    }
    for (int i = 0; i < q->n_nodes; i++) {
        const PlanNode *n = q->nodes[i];
        if (n->kind != PN_VIEW_SCAN || !n->scan_rel)
            continue;
        CatObj *o = view_by_table(e, n->scan_rel->table_id);
        if (!o || !o->flow.df || !o->flow.plan->distributed)
            continue;
        bool seen = false;
        for (int k = 0; k < g->n; k++)
            seen |= g->v[k].table_id == o->rel.table_id;
        if (seen)
            continue;
        char topics[1][256];
        if (rt_plan_repart_topics(o->flow.plan, e->cluster_name, topics, 1) < 1)
            continue;
        g->v = xrealloc(g->v, sizeof *g->v * (size_t)(g->n + 1));
        GatherView *v = &g->v[g->n++];
        memset(v, 0, sizeof *v);
        v->table_id = o->rel.table_id;
        v->name = xstrdup(o->name);
        v->G = o->flow.plan->key_groups;
        snprintf(v->topic, sizeof v->topic, "%s", topics[0]);
        v->n_owned = rt_dataflow_owned_kgs(o->flow.df, v->owned, WEIR_MAX_KEY_GROUPS);
        if (v->n_owned < 0)
            v->n_owned = 0;
        if (v->n_owned == v->G) /* all here (a cluster of one): read in place, as outside a cluster */
            free((char *)v->name), g->n--;
    }
    arena_free(a);
    return 0;
}

/* Who owns each group: this node its own, the others by their heartbeats. */
static int map_owners(GatherView *v, const ClusterNode *nodes, int n_nodes, WError *err)
{
    int64_t now = clock_wall_us();
    int64_t newest[WEIR_MAX_KEY_GROUPS];
    for (int kg = 0; kg < v->G; kg++) {
        v->owner[kg] = -1;
        newest[kg] = INT64_MIN;
    }
    for (int i = 0; i < v->n_owned; i++)
        v->owner[v->owned[i]] = -2;
    for (int j = 0; j < n_nodes; j++) {
        const ClusterNode *nd = &nodes[j];
        if (nd->self || now - nd->sent_us > (int64_t)CLUSTER_GONE_MS * 1000 || !nd->pg_addr[0] ||
            strcmp(nd->state, "running") != 0)
            continue;
        for (int kg = 0; kg < v->G; kg++)
            if (v->owner[kg] != -2 && nd->sent_us > newest[kg] && in_list(nd->work, v->topic, kg)) {
                v->owner[kg] = j;
                newest[kg] = nd->sent_us; /* two claims (a stale heartbeat): the newest; the owner checks */
            }
    }
    for (int kg = 0; kg < v->G; kg++)
        if (v->owner[kg] == -1)
            return werr(err, SQLSTATE_CANNOT_CONNECT_NOW, 0,
                        "key group %d of materialized view \"%s\" has no live owner in the cluster", kg, v->name),
                   werr_hint(err, "A node is down or the cluster is rebalancing (it takes up to %d s after a node "
                                  "is lost); run the statement again.",
                             CLUSTER_WORK_SESSION_MS / 1000),
                   -1;
    return 0;
}

/* v->remote's entries: u32 BE key length, key, u32 BE value length, value. */
static void put_entry(Buf *b, const void *k, size_t kl, const void *v, size_t vl)
{
    buf_put_u32be(b, (uint32_t)kl);
    buf_append(b, k, kl);
    buf_put_u32be(b, (uint32_t)vl);
    buf_append(b, v, vl);
}

static uint32_t get_u32be(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads the groups v->owner[] gives node j from it, into v->remote. */
static int fetch_node(ClusterGather *g, GatherView *v, const ClusterNode *nd, int j, const char *user, WError *err)
{
    Buf req = BUF_INIT;
    buf_printf(&req, "%llu:", (unsigned long long)v->table_id);
    int n = 0;
    for (int kg = 0; kg < v->G; kg++)
        if (v->owner[kg] == j)
            buf_printf(&req, "%s%d", n++ ? "," : "", kg);
    if (!n) {
        buf_free(&req);
        return 0;
    }
    char host[128], conninfo[512];
    snprintf(host, sizeof host, "%s", nd->pg_addr);
    char *colon = strrchr(host, ':');
    const char *port = "5432";
    if (colon) {
        *colon = 0;
        port = colon + 1;
    }
    snprintf(conninfo, sizeof conninfo,
             "host='%s' port='%s' dbname=weir user='%s' connect_timeout=%d application_name=weir-gather", host, port,
             user, GATHER_CONNECT_TIMEOUT_S);
    PGconn *c = PQconnectdb(conninfo);
    int rc = 0;
    if (PQstatus(c) != CONNECTION_OK) {
        rc = werr(err, SQLSTATE_CONNECTION_FAILURE, 0,
                  "cannot read key groups of materialized view \"%s\" from node \"%s\" (%s): %s", v->name,
                  nd->node_id, nd->pg_addr, PQerrorMessage(c));
        goto out;
    }
    /* The request is digits, ':' and ','s only: no quoting to get wrong. */
    Buf set = BUF_INIT;
    buf_printf(&set, "SET weir.read_key_groups = '%s'", req.data);
    PGresult *r = PQexec(c, set.data);
    buf_free(&set);
    if (PQresultStatus(r) == PGRES_COMMAND_OK) {
        PQclear(r);
        r = PQexecParams(c, "SELECT kg, key, value FROM weir_key_group_rows", 0, NULL, NULL, NULL, NULL, 1);
    }
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
        /* A node that no longer owns a group says 40001: passed on as it is, so the client retries. */
        werr(err, state && !strcmp(state, SQLSTATE_SERIALIZATION_FAILURE) ? SQLSTATE_SERIALIZATION_FAILURE
                                                                             : SQLSTATE_CONNECTION_FAILURE,
             0, "node \"%s\" could not give key groups of materialized view \"%s\": %s", nd->node_id, v->name,
             msg ? msg : PQerrorMessage(c));
        PQclear(r);
        rc = -1;
        goto out;
    }
    int rows = PQntuples(r);
    for (int i = 0; i < rows && !rc; i++) {
        const unsigned char *kgp = (const unsigned char *)PQgetvalue(r, i, 0);
        int kg = PQgetlength(r, i, 0) == 4 ? (int)get_u32be(kgp) : -1;
        const unsigned char *key = (const unsigned char *)PQgetvalue(r, i, 1);
        size_t kl = (size_t)PQgetlength(r, i, 1), vl = (size_t)PQgetlength(r, i, 2);
        if (kg < 0 || kg >= v->G || v->owner[kg] != j || kl < 2 || (key[0] << 8 | key[1]) != kg) {
            rc = werr(err, SQLSTATE_INTERNAL, 0, "node \"%s\" answered an entry of key group %d it was not asked for",
                      nd->node_id, kg);
            break;
        }
        g->bytes += kl + vl;
        if (g->bytes > GATHER_MAX_BYTES) {
            rc = werr(err, SQLSTATE_PROGRAM_LIMIT, 0,
                      "materialized view \"%s\" is larger than the %zu MiB one query may gather from other nodes",
                      v->name, GATHER_MAX_BYTES >> 20);
            werr_hint(err, "Filter on the view's key, or query the view on the node that owns its key groups.");
            break;
        }
        put_entry(&v->remote, key + 2, kl - 2, PQgetvalue(r, i, 2), vl);
    }
    PQclear(r);
out:
    PQfinish(c);
    buf_free(&req);
    return rc ? -1 : 0;
}

typedef struct PutCtx {
    StorTable *t;
    ClusterGather *g;
    const char *name;
    WError *err;
} PutCtx;

static int put_local(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    PutCtx *p = arg;
    p->g->bytes += klen + vlen;
    if (p->g->bytes > GATHER_MAX_BYTES) {
        werr(p->err, SQLSTATE_PROGRAM_LIMIT, 0,
             "materialized view \"%s\" is larger than the %zu MiB one query may gather from other nodes", p->name,
             GATHER_MAX_BYTES >> 20);
        return -1;
    }
    return stor_table_put(p->t, (const char *)key + 2, klen - 2, val, vlen, p->err) ? -1 : 0;
}

/* Under the lock: this node's groups (unchanged since find_views) and the
 * fetched ones into a temporary table per view. 1 = the ownership changed. */
static int build_tables(Engine *e, ClusterGather *g, WError *err)
{
    uint16_t now[WEIR_MAX_KEY_GROUPS];
    for (int i = 0; i < g->n; i++) {
        GatherView *v = &g->v[i];
        CatObj *o = view_by_table(e, v->table_id);
        int n = o && o->flow.df ? rt_dataflow_owned_kgs(o->flow.df, now, WEIR_MAX_KEY_GROUPS) : -1;
        if (n != v->n_owned || memcmp(now, v->owned, sizeof *now * (size_t)(n > 0 ? n : 0)))
            return 1;
        if (stor_table_open(e->stor, rt_temp_table_id(), &v->temp, err))
            return -1;
        StorTable *store = rt_dataflow_view_store(o->flow.df);
        PutCtx p = {v->temp, g, v->name, err};
        for (int k = 0; k < v->n_owned; k++)
            if (stor_kg_export(store, v->owned[k], put_local, &p, err))
                return -1;
        for (size_t off = 0; off + 8 <= v->remote.len;) {
            const unsigned char *b = (const unsigned char *)v->remote.data + off;
            uint32_t kl = get_u32be(b), vl = get_u32be(b + 4 + kl);
            if (stor_table_put(v->temp, b + 4, kl, b + 8 + kl, vl, err))
                return -1;
            off += 8 + (size_t)kl + vl;
        }
        buf_free(&v->remote);
    }
    return 0;
}

void cluster_gather_free(Engine *e, ClusterGather *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n; i++) {
        stor_table_close(g->v[i].temp);
        buf_free(&g->v[i].remote);
        free((char *)g->v[i].name);
    }
    free(g->v);
    free(g);
    (void)e;
}

bool cluster_view_whole_here(RtDataflow *df, const PlanView *plan)
{
    if (!plan->distributed)
        return true;
    uint16_t kgs[WEIR_MAX_KEY_GROUPS];
    return rt_dataflow_owned_kgs(df, kgs, WEIR_MAX_KEY_GROUPS) == plan->key_groups;
}

StorTable *cluster_gather_table(ClusterGather *g, uint64_t table_id)
{
    for (int i = 0; g && i < g->n; i++)
        if (g->v[i].table_id == table_id)
            return g->v[i].temp;
    return NULL;
}

static int gather_once(Engine *e, const AstStmt *st, const char *user, ClusterGather **out, WError *err)
{
    ClusterGather *g = xcalloc(1, sizeof *g);
    ClusterNode *nodes = NULL;
    int n_nodes = 0;
    pthread_mutex_lock(&e->lock);
    int rc = find_views(e, st, g, err);
    int64_t catalog_end;
    if (rc == 0 && g->n)
        n_nodes = cluster_nodes(e->cluster, &nodes, &catalog_end);
    pthread_mutex_unlock(&e->lock);
    if (rc == 1) { /* the query does not plan: no gather, the normal path reports it */
        *err = (WError){0};
        rc = 0;
    }
    for (int i = 0; !rc && i < g->n; i++) {
        GatherView *v = &g->v[i];
        rc = map_owners(v, nodes, n_nodes, err);
        for (int j = 0; !rc && j < n_nodes; j++)
            rc = fetch_node(g, v, &nodes[j], j, user, err);
    }
    free(nodes);
    if (!rc && g->n) {
        pthread_mutex_lock(&e->lock);
        rc = build_tables(e, g, err);
        pthread_mutex_unlock(&e->lock);
    }
    if (rc) {
        pthread_mutex_lock(&e->lock);
        cluster_gather_free(e, g);
        pthread_mutex_unlock(&e->lock);
        return rc;
    }
    if (!g->n) {
        cluster_gather_free(e, g);
        g = NULL;
    }
    *out = g;
    return 0;
}

int cluster_gather_prepare(Engine *e, const AstStmt *st, const char *user, ClusterGather **out, WError *err)
{
    *out = NULL;
    /* A SELECT, or the SELECT of a cursor (run at DECLARE). */
    if (st->kind == STMT_DECLARE && st->u.declare->query && st->u.declare->query->kind == STMT_SELECT)
        st = st->u.declare->query;
    if (!e->cluster || st->kind != STMT_SELECT)
        return 0;
    /* A rebalance between the two looks at this node's groups: try again
     * with the new assignment, a few times, before telling the client. */
    for (int attempt = 0; attempt < 3; attempt++) {
        int rc = gather_once(e, st, user, out, err);
        if (rc <= 0)
            return rc;
    }
    return werr(err, SQLSTATE_SERIALIZATION_FAILURE, 0,
                "the key groups of this node changed while the query gathered the rows of other nodes (the "
                "cluster is rebalancing)"),
           werr_hint(err, "Run the statement again."), -1;
}
