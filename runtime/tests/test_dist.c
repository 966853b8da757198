/*
 * test_dist.c: a distributed view (planner/plan_place.c, runtime/op_repart.c)
 * run as two "nodes" against a `weir broker` process (argv[1] is
 * weir-broker-test, the same broker): two dataflows of one plan,
 * each with its own StorEnv and its own share of the source partitions and
 * key groups (RtEnv.owned_partitions), exchanging rows through the view's
 * repartition topic.
 *
 * 1. The union of the two nodes' view rows equals an oracle, each node
 *    holding only rows of the key groups it owns.
 * 2. A crash (closed without a checkpoint after more rows) and a reopen:
 *    replayed rows are dropped by (task, seq), the union is still exact.
 * 3. A key group and a source partition move from node A to node B (both
 *    checkpoint, close, reopen with the new assignment), more rows: A drops
 *    the key group it lost, B rebuilds it from offset 0 of its partition
 *    and reads the source partition from its start, and the union is still
 *    exact (no loss, no duplicate).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "kafka.h"
#include "keygroup.h"
#include "row.h"
#include "runtime.h"
#include "tap.h"

#define N_SRC 4     /* source partitions (tasks) */
#define G 8         /* key groups of the view */
#define N_KEYS 40

static const char *COLS[] = {"k", "v"};
static const TypeId TYPES[] = {TYPE_INT8, TYPE_INT8};
static char bootstrap[128];
static const CatOption OPTS[] = {
    {"connector", "kafka"}, {"topic", "dsrc"}, {"scan.startup.mode", "earliest"}, {"topic.partitions", "4"}};

static const CatRelation *lookup(void *ctx, const char *name)
{
    static CatRelation src;
    if (strcmp(name, "src"))
        return NULL;
    memset(&src, 0, sizeof src);
    src.id = 1;
    src.kind = CAT_SOURCE;
    src.name = "src";
    src.n_cols = 2;
    src.col_names = COLS;
    src.col_types = TYPES;
    src.wm_col = -1;
    src.wm_delay_us = -1;
    src.append_only = true;
    src.n_options = 4;
    src.options = OPTS;
    return &src;
}

static uint64_t next_table = 100;
static uint64_t new_table_id(void *ctx) { return next_table++; }

typedef struct Node {
    const char *name;
    char dir[64];
    StorEnv *stor;
    RtEnv env;
    RtDataflow *df;
    int32_t src[N_SRC];
    int n_src;
    int32_t kgs[G];
    int n_kgs;
    uint64_t epoch;
} Node;

static int owned(void *ctx, const char *topic, int32_t *out, int max)
{
    Node *n = ctx;
    if (!strcmp(topic, "dsrc")) {
        memcpy(out, n->src, sizeof(int32_t) * (size_t)n->n_src);
        return n->n_src;
    }
    if (!strncmp(topic, "_weir.tc.rp.", 12)) {
        memcpy(out, n->kgs, sizeof(int32_t) * (size_t)n->n_kgs);
        return n->n_kgs;
    }
    return -1;
}

static PlanView *plan;

static int node_open(Node *n)
{
    WError e = {0};
    n->env = (RtEnv){.stor = n->stor, .kafka_bootstrap = bootstrap, .ctx = n, .cluster = "tc",
                     .owned_partitions = owned};
    if (rt_dataflow_open(&n->env, plan, &n->df, &e)) {
        diag("%s: open: %s %s", n->name, e.sqlstate, e.msg);
        return -1;
    }
    return 0;
}

static int node_checkpoint(Node *n)
{
    WError e = {0};
    StorCheckpoint *ck;
    uint64_t ep = ++n->epoch;
    if (stor_checkpoint_begin(n->stor, ep, &ck, &e) || rt_dataflow_checkpoint(n->df, ck, ep, &e) ||
        stor_checkpoint_commit(ck, &e)) {
        diag("%s: checkpoint: %s %s", n->name, e.sqlstate, e.msg);
        return -1;
    }
    rt_dataflow_committed(n->df, ep);
    return 0;
}

static int kg_of(int64_t k)
{
    Value v = value_int(TYPE_INT8, k);
    return weir_key_group(weir_key_hash_value(WEIR_KEY_HASH_SEED, &v), G);
}

/* The view's rows of node n: count and sum per key (-1 absent); whether
 * every row is of a key group n owns. */
static bool node_rows(Node *n, int64_t *cnt, int64_t *sum, int *rows)
{
    WError e = {0};
    StorIter *it;
    *rows = 0;
    bool only_owned = true;
    uint16_t kgs[G];
    int nk = rt_dataflow_owned_kgs(n->df, kgs, G);
    if (stor_iter_open(rt_dataflow_view_table(n->df), NULL, 0, &it, &e))
        return false;
    const void *k, *v;
    size_t kl, vl;
    while (stor_iter_next(it, &k, &kl, &v, &vl, &e) == 1) {
        Value vals[3];
        if (row_decode(v, vl, vals, 3) || vals[0].u.i < 0 || vals[0].u.i >= N_KEYS)
            continue;
        int64_t key = vals[0].u.i;
        cnt[key] = vals[1].u.i;
        sum[key] = vals[2].null ? 0 : (int64_t)vals[2].u.i;
        (*rows)++;
        bool mine = false;
        for (int i = 0; i < nk; i++)
            mine |= kgs[i] == kg_of(key);
        only_owned &= mine;
    }
    stor_iter_close(it);
    return only_owned;
}

static int64_t o_cnt[N_KEYS], o_sum[N_KEYS];
static int produced;

static int produce(int n)
{
    WError e = {0};
    RtKafkaProducer *p;
    if (rt_kafka_producer_open(bootstrap, NULL, 0, &p, &e))
        return -1;
    for (int i = produced; i < produced + n; i++) {
        char val[64];
        int k = (i * 7) % N_KEYS;
        snprintf(val, sizeof val, "{\"k\": %d, \"v\": %d}", k, i);
        if (rt_kafka_produce(p, "dsrc", i % N_SRC, NULL, 0, val, strlen(val), &e) < 0)
            return -1;
        o_cnt[k]++;
        o_sum[k] += i;
    }
    produced += n;
    int rc = rt_kafka_producer_flush(p, 10000, &e);
    rt_kafka_producer_close(p);
    return rc;
}

/* Steps both nodes until the union of their rows equals the oracle (or
 * timeout); reports how it ends. */
static void converge(Node *a, Node *b, const char *what)
{
    int64_t deadline = clock_mono_ms() + 40000;
    bool equal = false, owned_only = false, dup = false, split = false;
    while (!equal && clock_mono_ms() < deadline) {
        WError e = {0};
        bool did;
        for (int s = 0; s < 20; s++)
            if (rt_dataflow_step(a->df, 10, &did, &e) || rt_dataflow_step(b->df, 10, &did, &e)) {
                diag("step: %s %s", e.sqlstate, e.msg);
                deadline = 0;
                break;
            }
        int64_t ca[N_KEYS], sa[N_KEYS], cb[N_KEYS], sb[N_KEYS];
        for (int i = 0; i < N_KEYS; i++)
            ca[i] = cb[i] = -1;
        int ra, rb;
        owned_only = node_rows(a, ca, sa, &ra) & node_rows(b, cb, sb, &rb);
        equal = true;
        dup = false;
        for (int i = 0; i < N_KEYS; i++) {
            dup |= ca[i] >= 0 && cb[i] >= 0;
            int64_t c = ca[i] >= 0 ? ca[i] : cb[i], s = ca[i] >= 0 ? sa[i] : sb[i];
            equal &= o_cnt[i] ? c == o_cnt[i] && s == o_sum[i] : c < 0;
        }
        equal &= !dup;
        split = ra > 0 && rb > 0 && ra < N_KEYS && rb < N_KEYS;
    }
    char name[160];
    snprintf(name, sizeof name, "%s: the union of both nodes' rows equals the oracle", what);
    ok(equal, name);
    snprintf(name, sizeof name, "%s: each node holds only its key groups, both some", what);
    ok(owned_only && split && !dup, name);
}

static void assign(Node *n, const int32_t *src, int ns, const int32_t *kgs, int nk)
{
    memcpy(n->src, src, sizeof(int32_t) * (size_t)ns);
    n->n_src = ns;
    memcpy(n->kgs, kgs, sizeof(int32_t) * (size_t)nk);
    n->n_kgs = nk;
}

static pid_t broker_pid;
static FILE *broker_out; /* kept open: the broker may keep writing to it */

/* Starts `bin --listen 127.0.0.1:0` and reads the address it listens on. */
static int start_broker(const char *bin)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    broker_pid = fork();
    if (broker_pid == 0) {
        dup2(fd[1], 1);
        int dn = open("/dev/null", O_WRONLY);
        dup2(dn, 2);
        close(fd[0]);
        execl(bin, bin, "--listen", "127.0.0.1:0", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    broker_out = fdopen(fd[0], "r");
    char line[256];
    while (fgets(line, sizeof line, broker_out))
        if (sscanf(line, "weir broker listening on %127s", bootstrap) == 1)
            return 0;
    return -1;
}

int main(int argc, char **argv)
{
    WError e = {0};
    if (argc < 2 || start_broker(argv[1])) {
        ok(0, "broker starts (argv[1]: weir-broker-test)");
        return tap_done();
    }
    /* The plan every node makes of the view (the catalog topic gives them one text). */
    Arena *a = arena_new(0);
    AstStmt **st;
    int nst;
    PlanCatalog cat = {.lookup = lookup, .new_table_id = new_table_id};
    PlanViewOptions opt = {.name = "v", .allow_unbounded = true, .plan_rev = PLAN_REV_CURRENT, .cluster = true};
    if (parse_sql("CREATE MATERIALIZED VIEW v WITH (key_groups = 8) AS SELECT k, count(*) AS n, sum(v) AS s "
                  "FROM src WHERE v >= 0 GROUP BY k",
                  a, &st, &nst, &e) == 0)
        plan = plan_view(st[0]->u.create_view, &cat, &opt, a, &e);
    ok(plan && plan->distributed, "the view is planned distributed");
    if (!plan || !plan->distributed) {
        diag("%s", e.msg);
        return tap_done();
    }
    char topics[2][256];
    ok(rt_plan_repart_topics(plan, "tc", topics, 2) == 1 && !strncmp(topics[0], "_weir.tc.rp.", 12) &&
           rt_plan_repart_topics(plan, NULL, topics, 2) == 0,
       "one repartition topic, named for the cluster");

    Node A = {.name = "A"}, B = {.name = "B"};
    Node *nodes[2] = {&A, &B};
    for (int i = 0; i < 2; i++) {
        snprintf(nodes[i]->dir, sizeof nodes[i]->dir, "/tmp/weir-test-dist-%d-%d", (int)getpid(), i);
        if (stor_open(nodes[i]->dir, NULL, &nodes[i]->stor, &e)) {
            diag("stor: %s", e.msg);
            return tap_done();
        }
    }
    assign(&A, (int32_t[]){0, 1}, 2, (int32_t[]){0, 2, 4, 6}, 4);
    assign(&B, (int32_t[]){2, 3}, 2, (int32_t[]){1, 3, 5, 7}, 4);
    /* The nodes first: their source creates the topic with its 4 partitions. */
    if (node_open(&A) || node_open(&B) || produce(400)) {
        ok(0, "nodes open");
        return tap_done();
    }
    converge(&A, &B, "two nodes");

    /* A crash: more rows applied, no checkpoint; both reopen from the last. */
    bool ck = !node_checkpoint(&A) && !node_checkpoint(&B);
    produce(200);
    converge(&A, &B, "before the crash");
    rt_dataflow_close(A.df);
    rt_dataflow_close(B.df);
    ok(ck && !node_open(&A) && !node_open(&B), "both reopen from their last checkpoint");
    produce(100);
    converge(&A, &B, "after the crash (replayed rows dropped)");

    /* Key group 0 and source partition 1 move from A to B. */
    ck = !node_checkpoint(&A) && !node_checkpoint(&B);
    rt_dataflow_close(A.df);
    rt_dataflow_close(B.df);
    assign(&A, (int32_t[]){0}, 1, (int32_t[]){2, 4, 6}, 3);
    assign(&B, (int32_t[]){1, 2, 3}, 3, (int32_t[]){0, 1, 3, 5, 7}, 5);
    ok(ck && !node_open(&A) && !node_open(&B), "both reopen with the new assignment");
    uint16_t kgs[G];
    int nk = rt_dataflow_owned_kgs(A.df, kgs, G);
    ok(nk == 3 && kgs[0] == 2, "A owns its three key groups");
    produce(300);
    converge(&A, &B, "after the move");

    for (int i = 0; i < 2; i++) {
        rt_dataflow_close(nodes[i]->df);
        stor_close(nodes[i]->stor);
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", nodes[i]->dir);
        if (system(cmd))
            diag("could not remove %s", nodes[i]->dir);
    }
    arena_free(a);
    kill(broker_pid, SIGTERM);
    waitpid(broker_pid, NULL, 0);
    return tap_done();
}
