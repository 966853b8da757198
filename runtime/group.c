/*
 * group.c: the work group of a weir cluster over librdkafka (see group.h).
 *
 * One high-level consumer subscribed with the cooperative-sticky assignor.
 * A thread of the group's own calls rd_kafka_consumer_poll in a loop: that
 * serves the rebalance callback (which must call incremental_assign or
 * incremental_unassign before the group can proceed) and the commit
 * callback. The callback applies the change, pauses what it was given (so
 * the consumer does not fetch records nobody reads) and appends the change
 * to a queue under the lock. Nothing on that thread waits for the owner.
 *
 * Records fetched between an assign and its pause (a fetch may already be
 * on its way) are destroyed unread by the poll loop.
 */
#include "group.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "arena.h"

#define POLL_MS 100 /* the thread's poll wait: bounds close() latency */

struct RtGroup {
    rd_kafka_t *rk;
    pthread_t thread;
    pthread_mutex_t lock;   /* guards everything below */
    bool stop;
    RtGroupChange *q;       /* pending changes, oldest first */
    int n_q, cap_q;
    RtGroupPartition *asg;  /* current assignment, sorted */
    int n_asg, cap_asg;
    RtGroupStats stats;
};

void rt_group_name(const char *cluster, char *out, size_t n)
{
    snprintf(out, n, "_weir.%s.work", cluster);
}

static int part_cmp(const void *a, const void *b)
{
    const RtGroupPartition *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

/* Index of (topic, partition) in the assignment, or -1. Under the lock. */
static int asg_find(RtGroup *g, const char *topic, int32_t partition)
{
    if (g->n_asg == 0) /* g->asg may be NULL: bsearch wants a base */
        return -1;
    RtGroupPartition key = {.partition = partition};
    snprintf(key.topic, sizeof key.topic, "%s", topic);
    RtGroupPartition *p = bsearch(&key, g->asg, (size_t)g->n_asg, sizeof *g->asg, part_cmp);
    return p ? (int)(p - g->asg) : -1;
}

/* Records one change under the lock: updates the assignment and the queue.
 * An add still queued is cancelled by the revoke of the same partition, so
 * the owner never hears of a partition it could not have used. */
static void record(RtGroup *g, RtGroupEvent ev, const char *topic, int32_t partition)
{
    int k = asg_find(g, topic, partition);
    if (ev == RT_GROUP_ADDED && k < 0) {
        if (g->n_asg == g->cap_asg) {
            g->cap_asg = g->cap_asg ? 2 * g->cap_asg : 16;
            g->asg = xrealloc(g->asg, (size_t)g->cap_asg * sizeof *g->asg);
        }
        RtGroupPartition *p = &g->asg[g->n_asg++];
        snprintf(p->topic, sizeof p->topic, "%s", topic);
        p->partition = partition;
        qsort(g->asg, (size_t)g->n_asg, sizeof *g->asg, part_cmp);
    } else if (ev != RT_GROUP_ADDED && k >= 0) {
        memmove(&g->asg[k], &g->asg[k + 1], (size_t)(g->n_asg - k - 1) * sizeof *g->asg);
        g->n_asg--;
    }
    if (ev != RT_GROUP_ADDED) {
        for (int i = g->n_q - 1; i >= 0; i--) {
            RtGroupChange *c = &g->q[i];
            if (c->partition != partition || strcmp(c->topic, topic))
                continue;
            if (c->event == RT_GROUP_ADDED) {
                free(c->topic);
                memmove(c, c + 1, (size_t)(g->n_q - i - 1) * sizeof *c);
                g->n_q--;
                return;
            }
            break;
        }
    }
    if (g->n_q == g->cap_q) {
        g->cap_q = g->cap_q ? 2 * g->cap_q : 16;
        g->q = xrealloc(g->q, (size_t)g->cap_q * sizeof *g->q);
    }
    g->q[g->n_q++] = (RtGroupChange){.event = ev, .topic = xstrdup(topic), .partition = partition};
}

static void set_error(RtGroup *g, const char *what, const char *msg)
{
    pthread_mutex_lock(&g->lock);
    snprintf(g->stats.last_error, sizeof g->stats.last_error, "%s: %s", what, msg);
    pthread_mutex_unlock(&g->lock);
}

/* librdkafka's rebalance callback, on the group's thread (served by
 * rd_kafka_consumer_poll). Applies the change at once: the group cannot
 * proceed until it is applied, and the owner may be busy for seconds. */
static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t e, rd_kafka_topic_partition_list_t *parts,
                         void *opaque)
{
    RtGroup *g = opaque;
    rd_kafka_error_t *ae = NULL;
    bool adding = e == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS;
    RtGroupEvent ev = adding ? RT_GROUP_ADDED : rd_kafka_assignment_lost(rk) ? RT_GROUP_LOST : RT_GROUP_REVOKED;

    if (adding) {
        ae = rd_kafka_incremental_assign(rk, parts);
        /* The partitions are the unit of work, not a stream to read here. */
        if (!ae)
            rd_kafka_pause_partitions(rk, parts);
    } else {
        ae = rd_kafka_incremental_unassign(rk, parts);
    }
    if (ae) {
        set_error(g, adding ? "assign" : "unassign", rd_kafka_error_string(ae));
        rd_kafka_error_destroy(ae);
        /* Not applied: the consumer will be told again by the next round. */
        return;
    }
    pthread_mutex_lock(&g->lock);
    for (int i = 0; i < parts->cnt; i++)
        record(g, ev, parts->elems[i].topic, parts->elems[i].partition);
    g->stats.rebalances++;
    g->stats.joined = true;
    g->stats.n_assigned = g->n_asg;
    pthread_mutex_unlock(&g->lock);
}

static void commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t e, rd_kafka_topic_partition_list_t *offs, void *opaque)
{
    RtGroup *g = opaque;
    /* _NO_OFFSET: nothing to commit (an empty list); not a failure. */
    if (e == RD_KAFKA_RESP_ERR__NO_OFFSET)
        return;
    pthread_mutex_lock(&g->lock);
    if (e) {
        g->stats.commit_failures++;
        snprintf(g->stats.last_error, sizeof g->stats.last_error, "commit: %s", rd_kafka_err2str(e));
    } else {
        g->stats.commits++;
    }
    pthread_mutex_unlock(&g->lock);
}

/* Client-level errors: librdkafka retries transient ones itself; the last
 * one is kept for weir_cluster_assignment. */
static void error_cb(rd_kafka_t *rk, int e, const char *reason, void *opaque)
{
    set_error(opaque, "kafka", reason);
}

/* librdkafka's log: only errors, as in kafka.c. */
static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    if (level <= 3)
        fprintf(stderr, "weir: kafka group: %s: %s\n", fac, buf);
}

static void *group_main(void *arg)
{
    RtGroup *g = arg;
    pthread_setname_np(pthread_self(), "weir-group");
    for (;;) {
        pthread_mutex_lock(&g->lock);
        bool stop = g->stop;
        pthread_mutex_unlock(&g->lock);
        if (stop)
            break;
        rd_kafka_message_t *m = rd_kafka_consumer_poll(g->rk, POLL_MS);
        if (!m)
            continue;
        if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            set_error(g, "consumer", rd_kafka_message_errstr(m));
        rd_kafka_message_destroy(m); /* a record fetched before its pause: unread */
    }
    return NULL;
}

static int check_topics(const char *const *topics, int n, WError *err)
{
    if (n < 0 || n > RT_GROUP_MAX_TOPICS)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "a work group subscribes to at most %d topics, not %d",
                    RT_GROUP_MAX_TOPICS, n);
    for (int i = 0; i < n; i++)
        if (!topics[i][0] || strlen(topics[i]) > RT_GROUP_TOPIC_MAX)
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "invalid topic name \"%s\"", topics[i]);
    return 0;
}

int rt_group_subscribe(RtGroup *g, const char *const *topics, int n_topics, WError *err)
{
    if (check_topics(topics, n_topics, err))
        return -1;
    rd_kafka_resp_err_t e;
    if (n_topics == 0) {
        e = rd_kafka_unsubscribe(g->rk);
    } else {
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n_topics);
        for (int i = 0; i < n_topics; i++)
            rd_kafka_topic_partition_list_add(l, topics[i], RD_KAFKA_PARTITION_UA);
        e = rd_kafka_subscribe(g->rk, l);
        rd_kafka_topic_partition_list_destroy(l);
    }
    if (e)
        return werr(err, SQLSTATE_IO_ERROR, 0, "could not subscribe the work group: %s", rd_kafka_err2str(e));
    return 0;
}

int rt_group_open(const char *bootstrap, const char *cluster, const char *node_id,
                  const char *const *topics, int n_topics, const RtGroupOptions *opt,
                  RtGroup **out, WError *err)
{
    char errstr[512], name[300], num[2][16];
    int session = opt && opt->session_timeout_ms > 0 ? opt->session_timeout_ms : 10000;
    int hb = opt && opt->heartbeat_interval_ms > 0 ? opt->heartbeat_interval_ms : session / 5;
    if (hb < 100)
        hb = 100;

    *out = NULL;
    if (check_topics(topics, n_topics, err))
        return -1;
    rt_group_name(cluster, name, sizeof name);
    snprintf(num[0], sizeof num[0], "%d", session);
    snprintf(num[1], sizeof num[1], "%d", hb);
    const char *const conf_pairs[] = {
        "bootstrap.servers", bootstrap,
        "group.id", name,
        "group.instance.id", node_id,
        "client.id", node_id,
        "partition.assignment.strategy", "cooperative-sticky",
        "session.timeout.ms", num[0],
        "heartbeat.interval.ms", num[1],
        /* Commits only when the owner says so, of the offsets it gives. */
        "enable.auto.commit", "false",
        "enable.auto.offset.store", "false",
        /* Never create a topic by subscribing to it. */
        "allow.auto.create.topics", "false",
        /* Small prefetch: assigned partitions are paused at once anyway. */
        "queued.max.messages.kbytes", "64",
        "auto.offset.reset", "latest",
        "log_level", "3",
        "log.connection.close", "false",
        NULL,
    };
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    for (const char *const *p = conf_pairs; p[0]; p += 2)
        if (rd_kafka_conf_set(conf, p[0], p[1], errstr, sizeof errstr)) {
            rd_kafka_conf_destroy(conf);
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "work group property %s: %s", p[0], errstr);
        }
    RtGroup *g = xcalloc(1, sizeof *g);
    pthread_mutex_init(&g->lock, NULL);
    rd_kafka_conf_set_opaque(conf, g);
    rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
    rd_kafka_conf_set_offset_commit_cb(conf, commit_cb);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    rd_kafka_conf_set_log_cb(conf, log_cb);
    if (!(g->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr))) {
        rd_kafka_conf_destroy(conf);
        werr(err, SQLSTATE_INVALID_PARAMETER, 0, "could not create the work group consumer: %s", errstr);
        goto fail;
    }
    rd_kafka_poll_set_consumer(g->rk);
    if (n_topics > 0 && rt_group_subscribe(g, topics, n_topics, err))
        goto fail;
    if (pthread_create(&g->thread, NULL, group_main, g)) {
        werr(err, SQLSTATE_OUT_OF_MEMORY, 0, "cannot start the work group's thread");
        goto fail;
    }
    *out = g;
    return 0;
fail:
    if (g->rk)
        rd_kafka_destroy(g->rk);
    pthread_mutex_destroy(&g->lock);
    free(g);
    return -1;
}

int rt_group_poll(RtGroup *g, RtGroupChange *out, int max)
{
    pthread_mutex_lock(&g->lock);
    int n = g->n_q < max ? g->n_q : max;
    if (n > 0) { /* g->q is NULL before the first change */
        memcpy(out, g->q, (size_t)n * sizeof *out);
        memmove(g->q, g->q + n, (size_t)(g->n_q - n) * sizeof *g->q);
        g->n_q -= n;
    }
    pthread_mutex_unlock(&g->lock);
    return n;
}

void rt_group_changes_free(RtGroupChange *changes, int n)
{
    for (int i = 0; i < n; i++) {
        free(changes[i].topic);
        changes[i].topic = NULL;
    }
}

int rt_group_assignment(RtGroup *g, RtGroupPartition **out)
{
    pthread_mutex_lock(&g->lock);
    int n = g->n_asg;
    *out = xcalloc(n > 0 ? (size_t)n : 1, sizeof **out);
    if (n > 0)
        memcpy(*out, g->asg, (size_t)n * sizeof **out);
    pthread_mutex_unlock(&g->lock);
    return n;
}

void rt_group_stats(RtGroup *g, RtGroupStats *out)
{
    pthread_mutex_lock(&g->lock);
    *out = g->stats;
    out->n_assigned = g->n_asg;
    pthread_mutex_unlock(&g->lock);
}

int rt_group_commit(RtGroup *g, const RtGroupOffset *offsets, int n, WError *err)
{
    for (int i = 0; i < n; i++)
        if (offsets[i].offset < 0)
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "cannot commit offset %lld of \"%s\" partition %d",
                        (long long)offsets[i].offset, offsets[i].topic, (int)offsets[i].partition);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n > 0 ? n : 1);
    int skipped = 0;
    pthread_mutex_lock(&g->lock);
    for (int i = 0; i < n; i++) {
        if (asg_find(g, offsets[i].topic, offsets[i].partition) < 0) {
            skipped++;
            continue;
        }
        rd_kafka_topic_partition_list_add(l, offsets[i].topic, offsets[i].partition)->offset = offsets[i].offset;
    }
    g->stats.commits_skipped += skipped;
    pthread_mutex_unlock(&g->lock);
    int sent = l->cnt;
    rd_kafka_resp_err_t e = sent > 0 ? rd_kafka_commit(g->rk, l, 1) : RD_KAFKA_RESP_ERR_NO_ERROR;
    rd_kafka_topic_partition_list_destroy(l);
    if (e)
        return werr(err, SQLSTATE_IO_ERROR, 0, "could not commit to the work group: %s", rd_kafka_err2str(e));
    return sent;
}

void rt_group_close(RtGroup *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    g->stop = true;
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    /* A static member's close sends no LeaveGroup (KIP-345): see group.h. */
    rd_kafka_consumer_close(g->rk);
    rd_kafka_destroy(g->rk);
    rt_group_changes_free(g->q, g->n_q);
    free(g->q);
    free(g->asg);
    pthread_mutex_destroy(&g->lock);
    free(g);
}
