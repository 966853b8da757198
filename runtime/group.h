/*
 * group.h: membership in a cluster's work group, Kafka's consumer-group
 * protocol used only to assign work (issue 16 part 3).
 *
 * A node of cluster C joins the consumer group `_weir.C.work` with
 * group.instance.id = its node id (static membership: a node restarted
 * within session.timeout.ms gets its partitions back without a rebalance
 * on a real broker) and partition.assignment.strategy = cooperative-sticky
 * (a rebalance moves only the partitions that must move; the others keep
 * running). It subscribes to the topics whose partitions are the units of
 * work: source topics and repartition topics (dataplane.md).
 *
 * Contract:
 *   - The group never reads records for the owner. The consumer carrying
 *     the membership pauses every partition it is given; the data is read
 *     by the dataflow's own assign-only sources (kafka.h), each at the
 *     offset of its view's checkpoint. One consumer per node for both, the
 *     shape of Kafka Streams, does not fit weir: several views read the same
 *     source partition, each at its own checkpointed offset, and a consumer
 *     has one position per partition.
 *   - Assignment changes are reported incrementally (a partition added, a
 *     partition revoked, or lost when the session expired) through a queue
 *     the owner polls (rt_group_poll) without blocking. librdkafka's
 *     rebalance callback runs on the group's own thread and only applies
 *     the change to the consumer and records it; it never waits for the
 *     owner. The owner learns of a revocation after the fact, so until
 *     cooperative hand-over of state exists (changelog topics, part 5) the
 *     checkpoint, not the group, decides what a node has written.
 *   - Offsets are committed to the group only when the owner says so
 *     (rt_group_commit, after a checkpoint) so that standard Kafka tooling
 *     (kafka-consumer-groups, kcat -Q, a consumer's committed()) sees weir's
 *     lag. The checkpoint stays the source of truth: nothing is ever read
 *     back from these commits by weir.
 *
 * Thread rules: every function is called by the one owner thread, except
 * that rt_group_assignment and rt_group_stats may be called from any thread
 * (system views, /metrics). `<librdkafka/rdkafka.h>` stays in group.c.
 */
#ifndef WEIR_RUNTIME_GROUP_H
#define WEIR_RUNTIME_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Topics a group subscribes to: the sources' and the repartition topics of
 * a cluster's views. A bound so that one subscription request stays small;
 * checked by rt_group_open and rt_group_subscribe (54000). */
#define RT_GROUP_MAX_TOPICS 4096

/* A topic name is at most 249 bytes (Kafka's limit). */
#define RT_GROUP_TOPIC_MAX 249

/* What changed for one partition of the node's assignment. */
typedef enum RtGroupEvent {
    RT_GROUP_ADDED = 1,   /* the partition is now this node's */
    RT_GROUP_REVOKED = 2, /* handed back in a rebalance (committing it was still allowed) */
    RT_GROUP_LOST = 3,    /* taken without a hand-back: the session expired (cut off from Kafka) */
} RtGroupEvent;

/* One assignment change. topic is owned by the change: rt_group_changes_free. */
typedef struct RtGroupChange {
    RtGroupEvent event;
    char *topic;
    int32_t partition;
} RtGroupChange;

/* One partition of the node's current assignment (rt_group_assignment). */
typedef struct RtGroupPartition {
    char topic[RT_GROUP_TOPIC_MAX + 1];
    int32_t partition;
} RtGroupPartition;

/* An offset to commit: offset is the next one to read (Kafka's
 * convention), i.e. one past the last record the checkpoint covers. */
typedef struct RtGroupOffset {
    const char *topic;
    int32_t partition;
    int64_t offset;
} RtGroupOffset;

/* Settings; zero fields take the defaults in brackets. */
typedef struct RtGroupOptions {
    int session_timeout_ms;    /* [10000] a member silent this long loses its partitions */
    int heartbeat_interval_ms; /* [session / 5, at least 100] */
} RtGroupOptions;

/* Counters for weir_cluster_assignment and /metrics. */
typedef struct RtGroupStats {
    int64_t rebalances;        /* assignment callbacks served (each add or revoke round) */
    int64_t commits;           /* commits acknowledged by the broker */
    int64_t commit_failures;   /* commits the broker refused or that timed out */
    int64_t commits_skipped;   /* offsets not sent: the partition was not this node's any more */
    int n_assigned;            /* partitions assigned now */
    bool joined;               /* the last rebalance gave this node a generation */
    char last_error[256];      /* the group's last error ("" none) */
} RtGroupStats;

typedef struct RtGroup RtGroup;

/* The group's name for cluster: "_weir.<cluster>.work" into out (size n). */
void rt_group_name(const char *cluster, char *out, size_t n);

/* Joins the work group of cluster as node_id at bootstrap and subscribes
 * to the n_topics topics (n_topics may be 0: the node is then no member
 * until rt_group_subscribe gives it topics). Starts the group's thread;
 * returns at once, the join happens in the background (seconds on a real
 * broker, more on the embedded one). opt may be NULL. On success *out owns
 * the group (rt_group_close). Errors: 22023 bad property or names,
 * 54000 more than RT_GROUP_MAX_TOPICS topics, 53200 no thread. */
int rt_group_open(const char *bootstrap, const char *cluster, const char *node_id,
                  const char *const *topics, int n_topics, const RtGroupOptions *opt,
                  RtGroup **out, WError *err);

/* Replaces the subscription (a view created or dropped changes the set of
 * topics). Partitions of topics left are revoked through the queue as in
 * any rebalance. Errors: 54000 too many topics, 58030 librdkafka refused. */
int rt_group_subscribe(RtGroup *g, const char *const *topics, int n_topics, WError *err);

/* Moves up to max pending changes, oldest first, into out (never blocks).
 * Returns the count. The queue is bounded without a limit of its own: a
 * partition added and then revoked before the owner polled cancels out, so
 * at most two changes per subscribed partition wait. Free each change's
 * topic with rt_group_changes_free. */
int rt_group_poll(RtGroup *g, RtGroupChange *out, int max);

/* Frees the topics of n changes returned by rt_group_poll. */
void rt_group_changes_free(RtGroupChange *changes, int n);

/* A copy of the current assignment, sorted by topic then partition: *out
 * is malloc'd (free() it), the count is returned. Any thread. */
int rt_group_assignment(RtGroup *g, RtGroupPartition **out);

/* The counters. Any thread. */
void rt_group_stats(RtGroup *g, RtGroupStats *out);

/* Commits offsets to the group, asynchronously (the engine thread never
 * waits on the broker; the outcome lands in rt_group_stats). Offsets of
 * partitions not assigned to this node now are skipped: a revoked
 * partition's new owner commits it, and an older offset from here must not
 * overwrite that. Returns how many were sent. Errors: 22023 negative
 * offset, 58030 librdkafka refused (e.g. not a member yet). */
int rt_group_commit(RtGroup *g, const RtGroupOffset *offsets, int n, WError *err);

/* Stops the thread and closes the consumer. As a static member it sends no
 * LeaveGroup: its partitions stay its own for session.timeout.ms, so a
 * restart within that time takes them back (what static membership is
 * for); after that the others take them. NULL is allowed. */
void rt_group_close(RtGroup *g);

#endif
