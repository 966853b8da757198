/*
 * cluster.c: a weir cluster's control plane, phase 1 (cluster.h has the
 * contract; docs/cluster.md the user's side).
 *
 * Two threads per node:
 *
 *   weir-catalog   reads _weir.NAME.catalog from the offset after the last
 *                  one this data directory applied and applies each record
 *                  with session_apply, the same path as a client's
 *                  statement; a record this process produced hands its
 *                  outcome to the session waiting for it (Pending).
 *   weir-members   produces this node's heartbeat every second and reads
 *                  _weir.NAME.nodes into the member table (weir_cluster); a
 *                  heartbeat that cannot be delivered marks the node cut off.
 *
 * Choices:
 * - The catalog position is checkpoint metadata written with the engine's
 *   checkpoints (cluster/catalog_next, engine.c), set under the engine lock
 *   together with the statement it follows (session.c run_weir), so a
 *   checkpoint a statement takes itself (SWAP, DML on a table) commits both.
 *   A crash between a CREATE's catalog write and the next checkpoint applies
 *   the record again at start: a CREATE then fails with 42P07 and a DROP
 *   with 42P01, logged and harmless, since the first application stands.
 * - Records are matched to waiting sessions by (instance, request id), not
 *   by offset: librdkafka's delivery report is not needed, and a record of
 *   an earlier process of this node is applied like anyone else's.
 * - Liveness compares the sender's wall clock in the heartbeat with ours:
 *   nodes' clocks must agree within a few seconds (NTP).
 */
#include "cluster.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "engine_int.h"
#include "group.h"
#include "pgwire.h"
#include "row.h"
#include "arena.h"
#include "clock.h"
#include "log.h"

#define RECORD_FORMAT 1           /* first value of every record we write */
#define OPEN_TIMEOUT_MS 10000     /* reaching the broker at start */
#define PRODUCE_TIMEOUT_MS 10000  /* a catalog record must be acknowledged within this */
#define MAX_RECORD_VALUES (9 + 2 * CLUSTER_MAX_SETTINGS)

/* A statement of this process waiting for its record to be applied. */
typedef struct Pending {
    struct Pending *next;
    uint64_t req;
    bool done;
    SrvCapture cap;
} Pending;

struct Cluster {
    Engine *e;
    char name[CLUSTER_NAME_MAX + 1];
    char node_id[CLUSTER_NAME_MAX + 1];
    char instance[33];
    char version[32];
    char catalog_topic[CLUSTER_NAME_MAX + 32];
    char nodes_topic[CLUSTER_NAME_MAX + 32];
    int64_t started_us;
    RtKafkaProducer *cat_prod;    /* catalog records; prod_mu serialises produce + flush */
    pthread_mutex_t prod_mu;
    RtKafkaProducer *hb_prod;     /* heartbeats: the members thread only */
    RtKafkaSource *cat_src;       /* the catalog thread only (and cluster_open before it) */
    RtKafkaSource *nodes_src;     /* the members thread only (and cluster_open before it) */
    pthread_mutex_t mu;           /* guards everything below */
    pthread_cond_t cond;          /* a Pending is done, or the applied position moved */
    Pending *pending;
    uint64_t next_req;
    int64_t applied_next;         /* catalog offsets applied here: the next one */
    int64_t catalog_end;          /* the catalog topic's end, as last seen */
    char pg_addr[128], http_addr[128];
    char state[16];
    int n_nodes, cap_nodes;
    ClusterNode *nodes;           /* the latest heartbeat per node id */
    bool cut_off;
    int64_t cut_off_since_us;
    bool catalog_lost;            /* the topic ends before what we applied: it was lost or recreated */
    RtGroup *group;               /* the work group; subscribed by the members thread */
    char **work_topics;           /* its subscription, sorted (members thread only) */
    _Atomic int64_t work_changed_ms; /* clock_mono_ms() of the last assignment change, 0 none */
    int n_work_topics;
    atomic_bool stop;
    pthread_t cat_thread, mem_thread;
    bool cat_started, mem_started;
};

int cluster_name_check(const char *what, const char *s, WError *err)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > CLUSTER_NAME_MAX)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "the %s must have 1 to %d characters", what,
                    CLUSTER_NAME_MAX);
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                  ch == '_' || ch == '-';
        if (!ok)
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                        "the %s \"%s\" has the character '%c': only letters, digits, '.', '_' and '-' are allowed "
                        "(it is part of Kafka topic names)",
                        what, s, ch);
    }
    return 0;
}

/* ---- the data directory's identity ----------------------------------------------------- */

static int count_entry(void *arg, const StorCatalogEntry *ce)
{
    (void)ce;
    (*(int *)arg)++;
    return 0;
}

/* Metadata name as a string into out (size n): 1 found, 0 not, <0 error. */
static int meta_string(Engine *e, const char *name, char *out, size_t n, WError *err)
{
    Buf b = BUF_INIT;
    int found = stor_meta_get(e->stor, name, &b, err);
    if (found == 1)
        snprintf(out, n, "%.*s", (int)b.len, b.data ? b.data : "");
    buf_free(&b);
    return found;
}

int cluster_check_dir(Engine *e, const char *name, const char *node, WError *err)
{
    char have_name[CLUSTER_NAME_MAX + 2] = "", have_node[CLUSTER_NAME_MAX + 2] = "";
    int f1 = meta_string(e, "cluster/name", have_name, sizeof have_name, err);
    int f2 = f1 < 0 ? -1 : meta_string(e, "cluster/node", have_node, sizeof have_node, err);
    if (f1 < 0 || f2 < 0)
        return -1;
    if (f1 == 1 && !name)
        return werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, 0,
                    "the data directory %s belongs to node \"%s\" of weir cluster \"%s\"", e->data_dir, have_node,
                    have_name),
               werr_hint(err, "Start it with --cluster %s --node-id %s, or use another --data-dir.", have_name,
                         have_node),
               -1;
    if (!name)
        return 0;
    if (f1 == 1 && (strcmp(have_name, name) != 0 || strcmp(have_node, node) != 0))
        return werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, 0,
                    "the data directory %s belongs to node \"%s\" of weir cluster \"%s\", not to node \"%s\" of "
                    "cluster \"%s\"; nothing was changed",
                    e->data_dir, have_node, have_name, node, name),
               werr_hint(err, "A data directory serves one node of one cluster: give this node an empty --data-dir, "
                              "or start the directory's own node (--cluster %s --node-id %s).",
                         have_name, have_node),
               -1;
    if (f1 == 0) {
        int n = 0;
        if (stor_catalog_scan(e->stor, count_entry, &n, err) < 0)
            return -1;
        if (n > 0)
            return werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, 0,
                        "the data directory %s holds a catalog of a weir outside any cluster (%d entries); it "
                        "cannot join cluster \"%s\"",
                        e->data_dir, n, name),
                   werr_hint(err, "A node starts from an empty --data-dir and replays the cluster's catalog topic."),
                   -1;
    }
    return 0;
}

/* ---- records ------------------------------------------------------------------------------------- */

static Value txt(const char *s) { return value_str(TYPE_TEXT, s, strlen(s)); }

/* A text value of a decoded record into out (size n); false when it is not text. */
static bool get_text(const Value *v, char *out, size_t n)
{
    if (v->null || v->type != TYPE_TEXT)
        return false;
    snprintf(out, n, "%.*s", (int)v->u.s.len, v->u.s.p);
    return true;
}

static bool get_int(const Value *v, int64_t *out)
{
    if (v->null || v->type != TYPE_INT8)
        return false;
    *out = v->u.i;
    return true;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * UINT64_C(0x100000001b3);
    return h;
}

uint64_t cluster_catalog_digest(Engine *e)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    CAT_FOREACH(e->cat, CAT_ANY, o) {
        int32_t kind = (int32_t)o->kind;
        h = fnv(h, &o->id, sizeof o->id);
        h = fnv(h, &kind, sizeof kind);
        h = fnv(h, o->name, strlen(o->name) + 1);
        for (int k = 0; k < o->n_table_ids; k++)
            h = fnv(h, &o->table_ids[k], sizeof o->table_ids[k]);
    }
    for (int i = 0; i < e->n_users; i++) {
        h = fnv(h, &e->users[i].id, sizeof e->users[i].id);
        h = fnv(h, e->users[i].name, strlen(e->users[i].name) + 1);
    }
    return h;
}

/* This node's catalog position with the digest of the catalog there, read
 * together under the engine lock (a statement sets the position with its
 * change, in one hold of the lock). */
static void catalog_position(Cluster *c, int64_t *next, uint64_t *digest)
{
    pthread_mutex_lock(&c->e->lock);
    *next = c->e->catalog_next;
    *digest = cluster_catalog_digest(c->e);
    pthread_mutex_unlock(&c->e->lock);
}

/* This node's work partitions as "topic:0,3,6 t2:1" into out (cut at a
 * whole entry with "..." when it does not fit); returns the count, -1
 * while the node has no assignment from the group yet. */
static int work_text(Cluster *c, char *out, size_t cap)
{
    out[0] = '\0';
    RtGroupStats st;
    if (!c->group || (rt_group_stats(c->group, &st), !st.joined))
        return -1;
    RtGroupPartition *a;
    int n = rt_group_assignment(c->group, &a);
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        char ent[RT_GROUP_TOPIC_MAX + 16];
        bool same = i > 0 && !strcmp(a[i].topic, a[i - 1].topic);
        int k = same ? snprintf(ent, sizeof ent, ",%d", (int)a[i].partition)
                     : snprintf(ent, sizeof ent, "%s%s:%d", i ? " " : "", a[i].topic, (int)a[i].partition);
        if (len + (size_t)k + 4 >= cap) {
            snprintf(out + len, cap - len, "...");
            break;
        }
        memcpy(out + len, ent, (size_t)k + 1);
        len += (size_t)k;
    }
    free(a);
    return n;
}

static void heartbeat_encode(Cluster *c, Buf *b)
{
    int64_t next;
    uint64_t digest;
    catalog_position(c, &next, &digest);
    char work[CLUSTER_WORK_TEXT_MAX];
    int n_work = work_text(c, work, sizeof work);
    pthread_mutex_lock(&c->mu);
    Value v[14] = {value_int(TYPE_INT8, RECORD_FORMAT), txt(c->name),        txt(c->node_id),
                   txt(c->instance),                   txt(c->version),     txt(c->pg_addr),
                   txt(c->http_addr),                  value_int(TYPE_INT8, c->started_us),
                   value_int(TYPE_INT8, clock_wall_us()), value_int(TYPE_INT8, next), txt(c->state),
                   value_int(TYPE_INT8, (int64_t)digest), value_int(TYPE_INT8, n_work), txt(work)};
    row_encode(b, v, 14);
    pthread_mutex_unlock(&c->mu);
}

/* A heartbeat record into *n; false when it is not one we understand. */
static bool heartbeat_decode(const void *p, size_t len, ClusterNode *n, char *cluster, size_t cluster_n)
{
    Value v[14];
    int64_t fmt = 0, digest = 0, n_work = -1;
    size_t used = 0;
    if (!p || row_decode_prefix(p, len, v, 12, &used) || !get_int(&v[0], &fmt) || fmt != RECORD_FORMAT)
        return false;
    /* The work group's fields came later: a heartbeat without them is a node with no group. */
    bool work = used < len && row_decode((const char *)p + used, len - used, v + 12, 2) == 0;
    memset(n, 0, sizeof *n);
    bool ok = get_text(&v[1], cluster, cluster_n) && get_text(&v[2], n->node_id, sizeof n->node_id) &&
              get_text(&v[3], n->instance, sizeof n->instance) && get_text(&v[4], n->version, sizeof n->version) &&
              get_text(&v[5], n->pg_addr, sizeof n->pg_addr) && get_text(&v[6], n->http_addr, sizeof n->http_addr) &&
              get_int(&v[7], &n->started_us) && get_int(&v[8], &n->sent_us) &&
              get_int(&v[9], &n->catalog_next) && get_text(&v[10], n->state, sizeof n->state) &&
              get_int(&v[11], &digest);
    n->catalog_digest = (uint64_t)digest;
    n->work_partitions = -1;
    if (ok && work && get_int(&v[12], &n_work) && get_text(&v[13], n->work, sizeof n->work))
        n->work_partitions = (int)n_work;
    return ok;
}

/* Keeps the newest heartbeat per node id (mu held). */
static void member_update(Cluster *c, const ClusterNode *n)
{
    for (int i = 0; i < c->n_nodes; i++)
        if (!strcmp(c->nodes[i].node_id, n->node_id)) {
            if (n->sent_us >= c->nodes[i].sent_us || strcmp(n->instance, c->nodes[i].instance) != 0)
                c->nodes[i] = *n;
            return;
        }
    if (c->n_nodes == c->cap_nodes) {
        c->cap_nodes = c->cap_nodes ? c->cap_nodes * 2 : 8;
        c->nodes = xrealloc(c->nodes, sizeof *c->nodes * (size_t)c->cap_nodes);
    }
    c->nodes[c->n_nodes++] = *n;
}

/* ---- applying the catalog ------------------------------------------------------------------ */

/* Records the position after a record that was not applied (not one of
 * ours, or for another cluster): nothing else changes. */
static void skip_record(Cluster *c, const RtKafkaRecord *r, const char *why)
{
    int64_t next = r->offset + 1;
    wlog_warn("cluster", "skipping catalog record at offset %lld: %s", (long long)r->offset, why);
    pthread_mutex_lock(&c->e->lock);
    if (c->e->catalog_next < next)
        c->e->catalog_next = next;
    c->e->dirty = true;
    pthread_mutex_unlock(&c->e->lock);
    pthread_mutex_lock(&c->mu);
    c->applied_next = next;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mu);
}

/* Applies catalog record r (engine lock not held) and hands the outcome to
 * the session waiting for it, if it is one of this process's. */
static void apply_record(Cluster *c, const RtKafkaRecord *r)
{
    Value v[MAX_RECORD_VALUES];
    size_t used = 0;
    int64_t fmt = 0, req = 0, n_set = 0;
    char cluster[CLUSTER_NAME_MAX + 2], origin[CLUSTER_NAME_MAX + 2], inst[40], version[40], user[128];
    bool ok = r->value && row_decode_prefix(r->value, r->value_len, v, 9, &used) == 0 && get_int(&v[0], &fmt) &&
              fmt == RECORD_FORMAT && get_text(&v[1], cluster, sizeof cluster) &&
              get_text(&v[2], origin, sizeof origin) && get_text(&v[3], inst, sizeof inst) && get_int(&v[4], &req) &&
              get_text(&v[5], version, sizeof version) && get_text(&v[6], user, sizeof user) &&
              v[7].type == TYPE_TEXT && !v[7].null && get_int(&v[8], &n_set) && n_set >= 0 &&
              n_set <= CLUSTER_MAX_SETTINGS;
    ok = ok && row_decode(r->value, r->value_len, v, 9 + 2 * (int)n_set) == 0;
    for (int i = 0; ok && i < 2 * n_set; i++)
        ok = v[9 + i].type == TYPE_TEXT && !v[9 + i].null;
    if (!ok || strcmp(cluster, c->name) != 0) {
        skip_record(c, r, ok ? "written for another cluster" : "not a weir catalog record of this version");
        return;
    }
    int64_t next = r->offset + 1;
    char *sql = xstrndup(v[7].u.s.p, v[7].u.s.len);
    char *keys[CLUSTER_MAX_SETTINGS], *vals[CLUSTER_MAX_SETTINGS];
    for (int i = 0; i < n_set; i++) {
        keys[i] = xstrndup(v[9 + 2 * i].u.s.p, v[9 + 2 * i].u.s.len);
        vals[i] = xstrndup(v[10 + 2 * i].u.s.p, v[10 + 2 * i].u.s.len);
    }
    SrvCapture cap;
    int rc = session_apply(c->e, user, sql, (int)n_set, (const char *const *)keys, (const char *const *)vals,
                           next, &cap);
    bool mine = !strcmp(origin, c->node_id) && !strcmp(inst, c->instance);
    if (rc && !mine)
        /* Expected for the loser of two conflicting statements: the
         * node that issued it told its client. */
        wlog_warn("cluster", "catalog record %lld from node %s: %s: %s", (long long)r->offset,
                origin, cap.err.sqlstate, cap.err.msg);
    pthread_mutex_lock(&c->mu);
    c->applied_next = next;
    if (c->catalog_end < next)
        c->catalog_end = next;
    Pending *p = mine ? c->pending : NULL;
    while (p && p->req != (uint64_t)req)
        p = p->next;
    if (p) {
        p->cap = cap; /* the notices move to the waiter */
        p->done = true;
    } else {
        buf_free(&cap.notices);
    }
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < n_set; i++) {
        free(keys[i]);
        free(vals[i]);
    }
    free(sql);
}

/* Polls the catalog once (up to wait_ms) and applies what came. Returns the
 * records applied, or <0 when the consumer failed. */
static int catalog_poll(Cluster *c, int wait_ms)
{
    RtKafkaRecord recs[64];
    int n = rt_kafka_source_poll(c->cat_src, wait_ms, recs, 64);
    for (int i = 0; i < n; i++) {
        /* A record behind what this directory applied (a re-delivery) is
         * skipped, and nothing is applied from a lost topic. */
        pthread_mutex_lock(&c->mu);
        bool old = recs[i].offset < c->applied_next || c->catalog_lost;
        pthread_mutex_unlock(&c->mu);
        if (!old)
            apply_record(c, &recs[i]);
    }
    int64_t lo, hi;
    if (rt_kafka_source_cached_offsets(c->cat_src, 0, &lo, &hi) && hi >= 0) {
        pthread_mutex_lock(&c->mu);
        if (hi > c->catalog_end)
            c->catalog_end = hi;
        if (lo > c->applied_next && !c->catalog_lost) {
            /* Records this node has not applied were deleted (retention, or
             * the embedded broker's size limit): applying what follows would
             * build a catalog without them. */
            c->catalog_lost = true;
            wlog_warn("cluster", "the catalog topic %s now starts at offset %lld, after the %lld records "
                            "this node applied: records it needs were deleted; catalog statements are refused "
                            "(docs/cluster.md)", c->catalog_topic, (long long)lo, (long long)c->applied_next);
        }
        if (hi < c->applied_next && !c->catalog_lost) {
            /* Its records would get offsets this node has applied already:
             * applying nothing more is the only safe choice. */
            c->catalog_lost = true;
            wlog_warn("cluster", "the catalog topic %s now ends at offset %lld, before the %lld records "
                            "this node applied: it was lost or recreated; catalog statements are refused "
                            "(docs/cluster.md)", c->catalog_topic, (long long)hi, (long long)c->applied_next);
        }
        pthread_mutex_unlock(&c->mu);
    }
    return n;
}

static void *catalog_main(void *arg)
{
    Cluster *c = arg;
    pthread_setname_np(pthread_self(), "weir-catalog");
    while (!atomic_load(&c->stop))
        if (catalog_poll(c, 100) < 0)
            usleep(100 * 1000);
    return NULL;
}

/* ---- heartbeats ------------------------------------------------------------------------------- */

static int nodes_poll(Cluster *c, int wait_ms, int64_t from_offset, bool *twin, ClusterNode *twin_node,
                      bool *other_version, ClusterNode *other_node)
{
    RtKafkaRecord recs[64];
    int n = rt_kafka_source_poll(c->nodes_src, wait_ms, recs, 64);
    for (int i = 0; i < n; i++) {
        ClusterNode nd;
        char cluster[CLUSTER_NAME_MAX + 2];
        if (!heartbeat_decode(recs[i].value, recs[i].value_len, &nd, cluster, sizeof cluster) ||
            strcmp(cluster, c->name) != 0)
            continue;
        nd.self = !strcmp(nd.node_id, c->node_id) && !strcmp(nd.instance, c->instance);
        /* At start: a heartbeat sent while we watch comes from a live process. */
        if (twin && recs[i].offset >= from_offset && !nd.self) {
            if (!strcmp(nd.node_id, c->node_id) && !*twin) {
                *twin = true;
                *twin_node = nd;
            } else if (strcmp(nd.node_id, c->node_id) != 0 && strcmp(nd.version, c->version) != 0 &&
                       !*other_version) {
                *other_version = true;
                *other_node = nd;
            }
        }
        pthread_mutex_lock(&c->mu);
        member_update(c, &nd);
        pthread_mutex_unlock(&c->mu);
    }
    return n;
}

static void heartbeat_send(Cluster *c)
{
    Buf b = BUF_INIT;
    heartbeat_encode(c, &b);
    WError err = {0};
    int rc = rt_kafka_produce(c->hb_prod, c->nodes_topic, 0, c->node_id, strlen(c->node_id), b.data, b.len, &err);
    buf_free(&b);
    if (!rc)
        rc = rt_kafka_producer_flush(c->hb_prod, CLUSTER_HEARTBEAT_MS * 2, &err);
    pthread_mutex_lock(&c->mu);
    if (rc && !c->cut_off) {
        c->cut_off = true;
        c->cut_off_since_us = clock_wall_us();
        wlog_warn("cluster", "cut off from Kafka (%s); serving reads of what this node has", err.msg);
    } else if (!rc && c->cut_off) {
        c->cut_off = false;
        wlog_info("cluster", "Kafka reachable again");
    }
    pthread_mutex_unlock(&c->mu);
}

/* ---- the work group ------------------------------------------------------------------------ */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Subscribes the work group to the topics of the catalog's Kafka sources
 * and tables (those on the cluster's own Kafka) when they changed. Members
 * thread. */
static void work_subscribe(Cluster *c)
{
    char **t = NULL;
    int n = 0;
    pthread_mutex_lock(&c->e->lock);
    t = xcalloc((size_t)cat_count(c->e->cat) + 1, sizeof *t);
    size_t cap = (size_t)cat_count(c->e->cat) + 1;
    CAT_FOREACH(c->e->cat, CAT_KINDS(CAT_VIEW), o) {
        /* A distributed view's key groups are the partitions of its
         * repartition topic (phase 2): assigned like source partitions. */
        char rp[4][256];
        int nrp = o->flow.plan ? rt_plan_repart_topics(o->flow.plan, c->name, rp, 4) : 0;
        for (int i = 0; i < nrp; i++) {
            if ((size_t)n + 1 >= cap)
                t = xrealloc(t, sizeof *t * (cap *= 2));
            t[n++] = xstrdup(rp[i]);
        }
    }
    CAT_FOREACH(c->e->cat, CAT_KINDS(CAT_SOURCE) | CAT_KINDS(CAT_TABLE), o) {
        const char *conn = cat_option(&o->rel, "connector"), *topic = cat_option(&o->rel, "topic");
        if ((size_t)n + 1 >= cap)
            t = xrealloc(t, sizeof *t * (cap *= 2));
        if ((o->kind == CAT_SOURCE || o->kind == CAT_TABLE) && conn && !strcmp(conn, "kafka") && topic &&
            *topic && !cat_option(&o->rel, "properties.bootstrap.servers"))
            t[n++] = xstrdup(topic);
    }
    pthread_mutex_unlock(&c->e->lock);
    qsort(t, (size_t)n, sizeof *t, cmp_str);
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (k > 0 && !strcmp(t[i], t[k - 1]))
            free(t[i]);
        else
            t[k++] = t[i];
    }
    n = k;
    bool same = n == c->n_work_topics;
    for (int i = 0; same && i < n; i++)
        same = !strcmp(t[i], c->work_topics[i]);
    WError err = {0};
    if (same) {
        for (int i = 0; i < n; i++)
            free(t[i]);
        free(t);
        return;
    }
    /* A refused set is kept too, so it is logged once and retried when the catalog changes. */
    if (rt_group_subscribe(c->group, (const char *const *)t, n, &err))
        wlog_info("cluster", "work group: %s", err.msg);
    for (int i = 0; i < c->n_work_topics; i++)
        free(c->work_topics[i]);
    free(c->work_topics);
    c->work_topics = t;
    c->n_work_topics = n;
}

/* Logs the assignment changes and notes when the last came: the engine
 * reopens the distributed views whose share changed (engine.c). Views
 * that stay replicated run every partition and ignore the group. */
static void work_drain(Cluster *c)
{
    RtGroupChange ch[64];
    int n;
    static const char *what[] = {"", "assigned", "revoked", "lost"};
    while ((n = rt_group_poll(c->group, ch, 64)) > 0) {
        atomic_store(&c->work_changed_ms, clock_mono_ms());
        /* One line per run of one event on one topic: a distributed view's
         * repartition topic moves by the dozen (a partition per key group). */
        for (int i = 0, j; i < n; i = j) {
            Buf parts = BUF_INIT;
            for (j = i; j < n && ch[j].event == ch[i].event && !strcmp(ch[j].topic, ch[i].topic); j++)
                buf_printf(&parts, "%s%d", j > i ? "," : "", (int)ch[j].partition);
            wlog_info("cluster", "work group: %s %s[%s]", what[ch[i].event], ch[i].topic, parts.data);
            buf_free(&parts);
        }
        rt_group_changes_free(ch, n);
    }
}

int cluster_owned_partitions(Cluster *c, const char *topic, int32_t *out, int max)
{
    RtGroupPartition *a = NULL;
    int n = c && c->group ? rt_group_assignment(c->group, &a) : 0, k = 0;
    for (int i = 0; i < n && k < max; i++)
        if (!strcmp(a[i].topic, topic))
            out[k++] = a[i].partition;
    free(a);
    return k;
}

int64_t cluster_work_changed_ms(Cluster *c) { return c ? atomic_load(&c->work_changed_ms) : 0; }

bool cluster_work_stats(Cluster *c, RtGroupStats *out)
{
    if (!c->group)
        return false;
    rt_group_stats(c->group, out);
    return true;
}

static void *members_main(void *arg)
{
    Cluster *c = arg;
    pthread_setname_np(pthread_self(), "weir-members");
    int64_t last = 0;
    while (!atomic_load(&c->stop)) {
        int64_t now = clock_mono_ms();
        if (now - last >= CLUSTER_HEARTBEAT_MS) {
            last = now;
            work_subscribe(c);
            work_drain(c);
            heartbeat_send(c);
        }
        nodes_poll(c, 100, 0, NULL, NULL, NULL, NULL);
    }
    return NULL;
}

/* ---- open / close ----------------------------------------------------------------------------- */

/* Reads the nodes topic to its end, then watches it for
 * CLUSTER_STARTUP_WAIT_MS while publishing our own heartbeats: a heartbeat
 * of our node id from another instance, or of another version, sent in
 * that window comes from a live process. */
static int startup_wait(Cluster *c, WError *err)
{
    int64_t end = 0;
    if (rt_kafka_source_end_offsets(c->nodes_src, &end, OPEN_TIMEOUT_MS, err))
        return -1;
    bool twin = false, other = false;
    ClusterNode tn = {0}, on = {0};
    int64_t t0 = clock_mono_ms(), last_hb = 0;
    /* Catch up on the history first (bounded by the open timeout). */
    while (end > 0 && !rt_kafka_source_at_end(c->nodes_src, 0) && clock_mono_ms() - t0 < OPEN_TIMEOUT_MS)
        nodes_poll(c, 100, end, &twin, &tn, &other, &on);
    int64_t w0 = clock_mono_ms();
    while (clock_mono_ms() - w0 < CLUSTER_STARTUP_WAIT_MS && !twin && !other) {
        if (clock_mono_ms() - last_hb >= CLUSTER_HEARTBEAT_MS) {
            last_hb = clock_mono_ms();
            heartbeat_send(c);
        }
        nodes_poll(c, 100, end, &twin, &tn, &other, &on);
    }
    if (twin)
        return werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, 0,
                    "node id \"%s\" is in use by a live node of cluster \"%s\" (instance %s, postgres at %s); "
                    "nothing was changed",
                    c->node_id, c->name, tn.instance, tn.pg_addr[0] ? tn.pg_addr : "?"),
               werr_hint(err, "Each node of a cluster needs its own --node-id. Stop the other process first, or "
                              "give this one another id (and its own data directory)."),
               -1;
    if (other)
        return werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, 0,
                    "this weir is version %s, but live node \"%s\" of cluster \"%s\" runs version %s; nothing was "
                    "changed",
                    c->version, on.node_id, c->name, on.version),
               werr_hint(err, "All nodes of a cluster run the same weir version: upgrade them together "
                              "(docs/cluster.md)."),
               -1;
    return 0;
}

/* Applies the catalog from the stored position up to the topic's end. */
static int catch_up(Cluster *c, WError *err)
{
    int64_t end = 0;
    if (rt_kafka_source_end_offsets(c->cat_src, &end, OPEN_TIMEOUT_MS, err))
        return -1;
    pthread_mutex_lock(&c->mu);
    c->catalog_end = end;
    int64_t applied = c->applied_next;
    pthread_mutex_unlock(&c->mu);
    if (end < applied)
        return werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, 0,
                    "the catalog topic %s ends at offset %lld, but this data directory applied it up to %lld: the "
                    "topic was lost or recreated; nothing was changed",
                    c->catalog_topic, (long long)end, (long long)applied),
               werr_hint(err, "A cluster's catalog topic must outlive its nodes (docs/cluster.md: the embedded "
                              "broker keeps topics in memory only). Start the nodes with new data directories to "
                              "form the cluster again."),
               -1;
    /* Records this node has not applied that are gone from the topic
     * (retention, or the embedded broker's size limit per partition) would
     * leave it with a catalog that silently lacks them. */
    int64_t start = 0;
    if (applied < end && rt_kafka_source_start_offset(c->cat_src, 0, &start, OPEN_TIMEOUT_MS, err))
        return -1;
    if (applied < end && start > applied)
        return werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, 0,
                    "the catalog topic %s starts at offset %lld, but this node has applied it only up to offset "
                    "%lld: records it needs were deleted; nothing was changed",
                    c->catalog_topic, (long long)start, (long long)applied),
               werr_hint(err, "A cluster's catalog topic must keep every record: retention.ms=-1 and "
                              "retention.bytes=-1 on Kafka (docs/cluster.md). The embedded broker keeps about "
                              "5 MiB per partition: there, start the cluster again with new data directories."),
               -1;
    int64_t t0 = clock_mono_ms(), last_progress = clock_mono_ms();
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int64_t at = c->applied_next;
        pthread_mutex_unlock(&c->mu);
        if (at >= end)
            return 0;
        int n = catalog_poll(c, 200);
        if (n > 0)
            last_progress = clock_mono_ms();
        else if (rt_kafka_source_at_end(c->cat_src, 0) && clock_mono_ms() - last_progress > 2000)
            return 0; /* records below the end were compacted away */
        if (n < 0 || clock_mono_ms() - last_progress > OPEN_TIMEOUT_MS)
            return werr(err, SQLSTATE_CONNECTION_FAILURE, 0,
                        "could not read the catalog topic %s up to offset %lld (at %lld after %lld ms)",
                        c->catalog_topic, (long long)end, (long long)at, (long long)(clock_mono_ms() - t0));
    }
}

int cluster_open(Engine *e, const char *name, const char *node, const char *version, WError *err)
{
    if (cluster_name_check("cluster name", name, err) || cluster_name_check("node id", node, err))
        return -1;
    Cluster *c = xcalloc(1, sizeof *c);
    c->e = e;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->prod_mu, NULL);
    pthread_cond_init(&c->cond, NULL);
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->node_id, sizeof c->node_id, "%s", node);
    snprintf(c->version, sizeof c->version, "%s", version ? version : "");
    snprintf(c->catalog_topic, sizeof c->catalog_topic, "_weir.%s.catalog", name);
    snprintf(c->nodes_topic, sizeof c->nodes_topic, "_weir.%s.nodes", name);
    snprintf(c->state, sizeof c->state, "starting");
    c->started_us = clock_wall_us();
    unsigned char rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        for (size_t i = 0; i < sizeof rnd; i++)
            rnd[i] = (unsigned char)(rand() ^ (int)(c->started_us >> (i % 8)));
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(c->instance + 2 * i, 3, "%02x", rnd[i]);

    char next_s[32] = "";
    int found = meta_string(e, "cluster/catalog_next", next_s, sizeof next_s, err);
    if (found < 0)
        goto fail;
    c->applied_next = found == 1 ? strtoll(next_s, NULL, 10) : 0;
    if (c->applied_next < 0)
        c->applied_next = 0;
    e->catalog_next = c->applied_next;

    static const RtKafkaProp cat_props[] = {{"linger.ms", "0"}, {"acks", "all"}, {"message.timeout.ms", "10000"}};
    static const RtKafkaProp hb_props[] = {{"linger.ms", "0"}, {"acks", "all"}, {"message.timeout.ms", "5000"}};
    if (rt_kafka_producer_open(e->kafka_bootstrap, cat_props, 3, &c->cat_prod, err) ||
        rt_kafka_producer_open(e->kafka_bootstrap, hb_props, 3, &c->hb_prod, err) ||
        rt_kafka_log_open(e->kafka_bootstrap, c->nodes_topic, RT_KAFKA_EARLIEST, OPEN_TIMEOUT_MS, &c->nodes_src,
                          err))
        goto fail;
    if (startup_wait(c, err))
        goto fail;
    /* Accepted: the directory is this node's from now on (written at once). */
    pthread_mutex_lock(&e->lock);
    e->cluster_name = xstrdup(name);
    e->node_id = xstrdup(node);
    int rc = engine_checkpoint(e, err);
    pthread_mutex_unlock(&e->lock);
    if (rc)
        goto fail;
    if (rt_kafka_log_open(e->kafka_bootstrap, c->catalog_topic, c->applied_next > 0 ? c->applied_next : RT_KAFKA_EARLIEST,
                          OPEN_TIMEOUT_MS, &c->cat_src, err) ||
        catch_up(c, err))
        goto fail;
    RtGroupOptions gopt = {.session_timeout_ms = CLUSTER_WORK_SESSION_MS};
    if (rt_group_open(e->kafka_bootstrap, name, node, NULL, 0, &gopt, &c->group, err))
        goto fail;
    snprintf(c->state, sizeof c->state, "running");
    if (pthread_create(&c->cat_thread, NULL, catalog_main, c) != 0)
        goto thread_fail;
    c->cat_started = true;
    if (pthread_create(&c->mem_thread, NULL, members_main, c) != 0)
        goto thread_fail;
    c->mem_started = true;
    pthread_mutex_lock(&e->lock);
    e->cluster = c;
    pthread_mutex_unlock(&e->lock);
    wlog_info("cluster", "cluster %s: node %s (instance %s) applied the catalog up to offset %lld", c->name,
            c->node_id, c->instance, (long long)c->applied_next);
    return 0;
thread_fail:
    werr(err, SQLSTATE_INTERNAL, 0, "cannot start the cluster threads");
fail:
    cluster_close(c);
    return -1;
}

void cluster_close(Cluster *c)
{
    if (!c)
        return;
    atomic_store(&c->stop, true);
    if (c->cat_started)
        pthread_join(c->cat_thread, NULL);
    if (c->mem_started) {
        pthread_join(c->mem_thread, NULL);
        /* A last heartbeat: the others show a clean stop, not a node gone silent. */
        pthread_mutex_lock(&c->mu);
        snprintf(c->state, sizeof c->state, "stopped");
        pthread_mutex_unlock(&c->mu);
        heartbeat_send(c);
    }
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->cond); /* waiters give up (they check stop) */
    while (c->pending) {              /* sessions still waiting hold their Pending: wait for them */
        pthread_mutex_unlock(&c->mu);
        usleep(10 * 1000);
        pthread_mutex_lock(&c->mu);
        pthread_cond_broadcast(&c->cond);
    }
    pthread_mutex_unlock(&c->mu);
    rt_group_close(c->group);
    for (int i = 0; i < c->n_work_topics; i++)
        free(c->work_topics[i]);
    free(c->work_topics);
    rt_kafka_source_close(c->cat_src);
    rt_kafka_source_close(c->nodes_src);
    rt_kafka_producer_close(c->cat_prod);
    rt_kafka_producer_close(c->hb_prod);
    free(c->nodes);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->prod_mu);
    free(c);
}

void cluster_set_addresses(Cluster *c, const char *pg_addr, const char *http_addr)
{
    pthread_mutex_lock(&c->mu);
    snprintf(c->pg_addr, sizeof c->pg_addr, "%s", pg_addr ? pg_addr : "");
    snprintf(c->http_addr, sizeof c->http_addr, "%s", http_addr ? http_addr : "");
    pthread_mutex_unlock(&c->mu);
}

/* ---- submitting a statement -------------------------------------------------------------------- */

int cluster_submit(Cluster *c, const char *user, const char *sql, int n_settings, const char *const *keys,
                   const char *const *values, SrvCapture *cap, WError *err)
{
    memset(cap, 0, sizeof *cap);
    pthread_mutex_lock(&c->mu);
    bool lost = c->catalog_lost;
    pthread_mutex_unlock(&c->mu);
    if (lost)
        return werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, 0,
                    "the catalog topic %s was lost or recreated: catalog statements are refused", c->catalog_topic),
               werr_hint(err, "Queries still run. Form the cluster again with new data directories (docs/cluster.md)."),
               -1;
    if (n_settings > CLUSTER_MAX_SETTINGS)
        n_settings = CLUSTER_MAX_SETTINGS;
    Pending *p = xcalloc(1, sizeof *p);
    pthread_mutex_lock(&c->mu);
    p->req = ++c->next_req;
    p->next = c->pending;
    c->pending = p;
    pthread_mutex_unlock(&c->mu);

    Value v[MAX_RECORD_VALUES];
    int n = 0;
    v[n++] = value_int(TYPE_INT8, RECORD_FORMAT);
    v[n++] = txt(c->name);
    v[n++] = txt(c->node_id);
    v[n++] = txt(c->instance);
    v[n++] = value_int(TYPE_INT8, (int64_t)p->req);
    v[n++] = txt(c->version);
    v[n++] = txt(user ? user : USER_BOOTSTRAP);
    v[n++] = txt(sql);
    v[n++] = value_int(TYPE_INT8, n_settings);
    for (int i = 0; i < n_settings; i++) {
        v[n++] = txt(keys[i]);
        v[n++] = txt(values[i] ? values[i] : "");
    }
    Buf b = BUF_INIT;
    row_encode(&b, v, n);
    if (b.len > CLUSTER_MAX_RECORD) {
        size_t len = b.len;
        buf_free(&b);
        pthread_mutex_lock(&c->mu);
        for (Pending **pp = &c->pending; *pp; pp = &(*pp)->next)
            if (*pp == p) {
                *pp = p->next;
                break;
            }
        pthread_mutex_unlock(&c->mu);
        free(p);
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0,
                    "the statement is too long for the catalog topic (%zu bytes with its settings, at most %d)",
                    len, CLUSTER_MAX_RECORD),
               werr_hint(err, "Kafka's default record limit is 1 MB; a statement of a cluster must fit in one record."),
               -1;
    }
    char key[2 * CLUSTER_NAME_MAX + 64];
    snprintf(key, sizeof key, "%s/%s/%llu", c->node_id, c->instance, (unsigned long long)p->req);
    pthread_mutex_lock(&c->prod_mu);
    int rc = rt_kafka_produce(c->cat_prod, c->catalog_topic, 0, key, strlen(key), b.data, b.len, err);
    if (!rc)
        rc = rt_kafka_producer_flush(c->cat_prod, PRODUCE_TIMEOUT_MS, err);
    pthread_mutex_unlock(&c->prod_mu);
    buf_free(&b);
    if (rc) {
        WError why = *err;
        werr_clear(err);
        werr(err, SQLSTATE_CONNECTION_FAILURE, 0, "could not write the statement to the catalog topic %s: %s",
             c->catalog_topic, why.msg);
        werr_hint(err, "The cluster's Kafka is unreachable: catalog statements wait for it; queries still run. "
                       "If it was written after all, every node applies it.");
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += CLUSTER_SUBMIT_TIMEOUT_MS / 1000;
    pthread_mutex_lock(&c->mu);
    while (!rc && !p->done && !atomic_load(&c->stop))
        if (pthread_cond_timedwait(&c->cond, &c->mu, &deadline) == ETIMEDOUT)
            break;
    if (!rc && !p->done)
        rc = werr(err, SQLSTATE_CONNECTION_FAILURE, 0,
                  "the statement was written to the catalog topic but this node did not apply it within %d s",
                  CLUSTER_SUBMIT_TIMEOUT_MS / 1000),
        werr_hint(err, "It will apply (on every node) once the node reads the topic again: see weir_cluster.");
    if (p->done)
        *cap = p->cap;
    for (Pending **pp = &c->pending; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    pthread_mutex_unlock(&c->mu);
    free(p);
    return rc ? -1 : 0;
}

/* ---- what weir_cluster shows ------------------------------------------------------------------ */

int cluster_nodes(Cluster *c, ClusterNode **out, int64_t *catalog_end)
{
    pthread_mutex_lock(&c->mu);
    int n = c->n_nodes + 1;
    ClusterNode *a = xcalloc((size_t)n, sizeof *a);
    ClusterNode *me = &a[0];
    snprintf(me->node_id, sizeof me->node_id, "%s", c->node_id);
    snprintf(me->instance, sizeof me->instance, "%s", c->instance);
    snprintf(me->version, sizeof me->version, "%s", c->version);
    snprintf(me->pg_addr, sizeof me->pg_addr, "%s", c->pg_addr);
    snprintf(me->http_addr, sizeof me->http_addr, "%s", c->http_addr);
    snprintf(me->state, sizeof me->state, "%s", c->catalog_lost ? "catalog lost" : c->cut_off ? "cut off" : c->state);
    me->started_us = c->started_us;
    me->sent_us = clock_wall_us();
    me->catalog_next = c->applied_next;
    me->self = true; /* catalog_digest: the caller's, under the engine lock (cluster_catalog_digest) */
    me->work_partitions = work_text(c, me->work, sizeof me->work);
    int k = 1;
    for (int i = 0; i < c->n_nodes; i++)
        if (strcmp(c->nodes[i].node_id, c->node_id) != 0)
            a[k++] = c->nodes[i];
    *catalog_end = c->catalog_end > c->applied_next ? c->catalog_end : c->applied_next;
    for (int i = 0; i < k; i++)
        if (a[i].catalog_next > *catalog_end)
            *catalog_end = a[i].catalog_next;
    pthread_mutex_unlock(&c->mu);
    *out = a;
    return k;
}

bool cluster_cut_off(Cluster *c, int64_t *since_us)
{
    pthread_mutex_lock(&c->mu);
    bool cut = c->cut_off;
    if (since_us)
        *since_us = c->cut_off_since_us;
    pthread_mutex_unlock(&c->mu);
    return cut;
}

const char *cluster_name(const Cluster *c) { return c->name; }
const char *cluster_node_id(const Cluster *c) { return c->node_id; }
