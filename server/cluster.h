/*
 * cluster.h: a weir cluster's control plane, phase 1 (server-internal; see
 * docs/cluster.md and server/README.md "A weir cluster").
 *
 * Several weir processes started with one --cluster NAME and one Kafka form
 * a cluster. Two compacted single-partition topics carry it:
 *
 *   _weir.NAME.catalog  every catalog statement (DDL, and DML on tables),
 *                       produced first and applied by every node in offset
 *                       order, the issuing one included (ksqlDB's command
 *                       topic). Its record: format, cluster, origin node,
 *                       instance, request id, weir version, user, the
 *                       statement's SQL, the session settings that shape
 *                       planning (row.h encoding; key "node/instance/req").
 *   _weir.NAME.nodes    one heartbeat per node per second, keyed by node id:
 *                       identity, version, addresses, start time, catalog
 *                       position, state, its work group partitions.
 *                       weir_cluster and weir_cluster_assignment read it.
 *
 * And one consumer group, _weir.NAME.work (runtime/group.h): each node is a
 * static member (group.instance.id = node id) subscribed to the topics of
 * the Kafka sources in the catalog. In phase 1 the assignment is shown
 * (weir_cluster_assignment, /metrics), not acted on: every node still runs
 * every view over every partition.
 *
 * The engine lock is never held while a session waits for its record: the
 * apply thread needs it. A record is applied by running its statement
 * through session.c like a client's (session_apply), with a capture result
 * (pgwire.h) whose outcome the issuing session answers with.
 *
 * Limits (checked by cluster_name_check): a cluster name and a node id are
 * 1 to CLUSTER_NAME_MAX characters of [A-Za-z0-9._-], so that topic names
 * stay within Kafka's 249 and carry no other character.
 */
#ifndef WEIR_SERVER_CLUSTER_H
#define WEIR_SERVER_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "error.h"

#define CLUSTER_NAME_MAX 64           /* cluster name, node id: characters */
#define CLUSTER_HEARTBEAT_MS 1000     /* a node publishes its heartbeat this often */
#define CLUSTER_GONE_MS 10000         /* no heartbeat for this long: the node is gone */
#define CLUSTER_STARTUP_WAIT_MS 2500  /* heartbeats watched at start for a live twin */
#define CLUSTER_SUBMIT_TIMEOUT_MS 30000 /* a statement waits this long for its record to apply */
#define CLUSTER_MAX_SETTINGS 16       /* session settings carried by a record */
#define CLUSTER_MAX_RECORD (900 * 1024) /* a catalog record's bytes: under Kafka's default 1 MB message.max.bytes */
#define CLUSTER_WORK_SESSION_MS 10000 /* work group session.timeout.ms: a silent node's partitions move after this */
/* A heartbeat's list of the node's work partitions ("topic:0,3,6 t2:1"):
 * at most this many bytes, so a heartbeat stays well under a Kafka record's
 * 1 MB; beyond it the list is cut at a whole entry and ends with "..."
 * (work_partitions, the count, is always whole). The other nodes find a
 * distributed view's key groups here to gather its rows (cluster_gather.c):
 * a key group cut off has no known owner and reads of its view answer 57P03.
 * 64 KiB holds about 13,000 partitions: a distributed view's 128 key groups
 * take about 30 + 4 per group bytes, so some 120 views on two nodes. */
#define CLUSTER_WORK_TEXT_MAX 65536

typedef struct Engine Engine;
typedef struct Cluster Cluster;

/* One node as its last heartbeat described it (weir_cluster). */
typedef struct ClusterNode {
    char node_id[CLUSTER_NAME_MAX + 1];
    char instance[33];            /* random per process: tells a restart (or a twin) apart */
    char version[32];
    char pg_addr[128];            /* host:port, "" before the server listens */
    char http_addr[128];          /* host:port, "" without HTTP */
    char state[16];               /* starting, running, stopped; this node also: cut off, catalog lost */
    int64_t started_us;           /* wall clock */
    int64_t sent_us;              /* wall clock of its last heartbeat */
    int64_t catalog_next;         /* catalog offsets it has applied: the next one it will */
    uint64_t catalog_digest;      /* of its catalog at catalog_next (cluster_catalog_digest) */
    bool self;
    /* Its partitions in the work group _weir.NAME.work (runtime/group.h):
     * the count, -1 while it is no member (before its first assignment or
     * subscribed to nothing); and the list, "topic:0,3,6 t2:1". */
    int work_partitions;
    char work[CLUSTER_WORK_TEXT_MAX];
} ClusterNode;

/* Checks a cluster name or node id (what = "cluster name" / "node id"):
 * 22023 when empty, too long or with a character outside [A-Za-z0-9._-]. */
int cluster_name_check(const char *what, const char *s, WError *err);

/* Checks the data directory against the identity it recorded (checkpoint
 * metadata cluster/name and cluster/node): 55000 when it belongs to another
 * cluster or node, when it was made by a cluster node and name is NULL, or
 * when it has catalog entries from before a cluster was named. Reads only.
 * name, node: NULL outside a cluster. */
int cluster_check_dir(Engine *e, const char *name, const char *node, WError *err);

/* Joins the cluster (engine lock not held, engine thread not started):
 * opens the topics (creating them if missing), watches heartbeats for
 * CLUSTER_STARTUP_WAIT_MS and refuses (55000) a live node with this node id
 * and another instance, or a live node of another weir version; then applies
 * the catalog records after the last one this data directory applied, up
 * to the end, and starts the apply and heartbeat threads. Errors: 08006 no
 * broker; 55000 as above. On success e->cluster is set. */
int cluster_open(Engine *e, const char *name, const char *node, const char *version, WError *err);

/* Stops the threads and closes the topics (engine lock not held). NULL ok. */
void cluster_close(Cluster *c);

/* The addresses this node publishes in its heartbeats (main.c, once the
 * servers listen). Copied. */
void cluster_set_addresses(Cluster *c, const char *pg_addr, const char *http_addr);

/* Produces one catalog statement (sql: one statement, as the user wrote
 * it) with the session's settings and waits until this node has applied it,
 * then copies the outcome into cap (caller frees cap->notices). Engine lock
 * NOT held. Errors (the statement's own are in cap->err): 08006 the record
 * could not be written, or was not applied within
 * CLUSTER_SUBMIT_TIMEOUT_MS (it may still apply). */
typedef struct SrvCapture SrvCapture;
int cluster_submit(Cluster *c, const char *user, const char *sql, int n_settings, const char *const *keys,
                   const char *const *values, SrvCapture *cap, WError *err);

/* A snapshot of the known nodes, this one first (malloc'd; free it).
 * *catalog_end: the end of the catalog topic as last seen. */
int cluster_nodes(Cluster *c, ClusterNode **out, int64_t *catalog_end);

/* A digest (FNV-1a) of the catalog: every object's id, kind, name and
 * state table ids, and the users, in order. Nodes that applied the catalog
 * topic to the same position have the same digest unless a record failed
 * on one for a reason of its own (weir_cluster.catalog_agrees). Engine lock
 * held. */
uint64_t cluster_catalog_digest(Engine *e);

/* True when this node could not reach Kafka for its last heartbeats; since:
 * wall clock microseconds when that began. */
bool cluster_cut_off(Cluster *c, int64_t *since_us);

/* The work group's counters (runtime/group.h); false when this node has
 * no group (not started). Any thread. */
typedef struct RtGroupStats RtGroupStats;
bool cluster_work_stats(Cluster *c, RtGroupStats *out);

/* The partitions of topic the work group assigns this node now, sorted,
 * into out (at most max): RtEnv.owned_partitions (phase 2, distributed
 * views). 0 before the group has joined. Any thread. */
int cluster_owned_partitions(Cluster *c, const char *topic, int32_t *out, int max);
/* clock_mono_ms() of the last change of this node's assignment (0 none):
 * the engine reopens the distributed views whose assignment changed once
 * it has been quiet for CLUSTER_REBALANCE_QUIET_MS. Any thread. */
int64_t cluster_work_changed_ms(Cluster *c);
/* One rebalance moves partitions in several rounds (revoke, then assign):
 * a view is reopened once, this long after the last change. */
#define CLUSTER_REBALANCE_QUIET_MS 300

const char *cluster_name(const Cluster *c);
const char *cluster_node_id(const Cluster *c);

#endif
