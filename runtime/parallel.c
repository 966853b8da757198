/*
 * parallel.c: the shards of a parallel view, their worker threads, and the
 * step protocol that keeps "between two steps no chunk is in flight".
 *
 * A view planned with parallelism P (plan_dist.c) runs P instances of its
 * plan. Shard 0 holds every node (its parallel nodes' instance 0 and all
 * SINGLE nodes: the view's ViewChanges node, sinks, subscribers) and runs on the engine
 * thread; shards 1..P-1 hold the parallel nodes only, built from copies of
 * the plan nodes that carry their own state table ids, each with its own
 * RtCtx and chunk arena, and run on the view's worker threads
 * ("weir-worker-N"). Exchanges (op_exchange.c) move rows between shards
 * through one queue per (exchange, sender, receiver).
 *
 * One rt_dataflow_step is one time slice:
 *
 *   run      every shard drains its inbound queues and polls its sources
 *            (not while its own outbound queues hold more than OUT_LIMIT
 *            messages: backpressure without blocking, so no deadlock) until
 *            the slice ends (SLICE_MS) or nothing comes;
 *   quiesce  every shard has stopped polling; each keeps draining until no
 *            message is queued or being processed anywhere (in_flight == 0
 *            once every shard has stopped means nothing can make more);
 *   park     the workers wait for the next step.
 *
 * So between steps every chunk has gone all the way down, as on one thread:
 * checkpoints, ad hoc reads, stats and sinks see every shard's operators
 * while the workers are parked (the mutex hand-off orders their memory).
 * Outside a step (a view source fed by its upstream's step, a table write,
 * start hooks) an exchange delivers to the other shards' operators at once
 * on the calling thread, which is safe for the same reason.
 */
#include "runtime_int.h"
#include "clock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLICE_MS 10           /* a shard's run phase at most this long per step */
#define OUT_LIMIT 64          /* queued messages a shard may have outstanding before it stops polling */
#define MSG_BLOCK (256 << 10) /* message arenas' block: a 1024-row chunk of a dozen columns fits */
#define POOL_MAX 64           /* message arenas kept for reuse (16 MiB at most) */

typedef struct Msg {
    struct Msg *next;
    Arena *arena;             /* owns c, or NULL for a watermark */
    Chunk *c;
    int64_t wm;
} Msg;

typedef struct Queue {
    pthread_mutex_t mu;
    Msg *head, *tail;
} Queue;

typedef struct Shard {
    RtCtx *rc;                /* shard 0: the dataflow's; else &own */
    RtCtx own;
    WError err;
    RtOp **ops;               /* parallel to plan->nodes; NULL where the node has no instance here */
    PlanNode **nodes;         /* shards >= 1: copies with this shard's table ids */
    int n_sources;
    RtOp **sources;
    bool work;                /* this step's did_work */
    int rcode;
} Shard;

struct RtPar {
    const PlanView *plan;
    int P;
    int n_ex;
    int *ex_id;               /* node id of each exchange */
    int *ex_at;               /* node index of each exchange */
    Queue *q;                 /* [ex][from][to] */
    Shard *sh;
    Arena *arena;             /* node copies */
    pthread_t *th;
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t start_cv, done_cv;
    uint64_t gen;             /* step number (workers run when it moves) */
    int done;                 /* workers finished with this step */
    bool quit;
    bool in_step;             /* exchanges queue (else they deliver at once) */
    int timeout_ms;
    int64_t deadline_ms;
    _Atomic long in_flight;   /* messages queued or being processed */
    _Atomic int stopped;      /* shards past their run phase */
    _Atomic int abort;        /* a shard failed: everyone stops */
    _Atomic int *outbound;    /* per shard: its messages still queued */
    /* Quiescing shards with nothing to do sleep on qcv (at most 1 ms) rather
     * than spin: the machine is shared. Whoever queues a message, stops, or
     * brings in_flight to 0 wakes them when there are sleepers. */
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    _Atomic int sleepers;
    pthread_mutex_t pool_mu;  /* message arenas for reuse */
    int n_pool;
    Arena *pool[POOL_MAX];
};

Arena *rt_par_arena(RtPar *par)
{
    Arena *a = NULL;
    pthread_mutex_lock(&par->pool_mu);
    if (par->n_pool)
        a = par->pool[--par->n_pool];
    pthread_mutex_unlock(&par->pool_mu);
    return a ? a : arena_new(MSG_BLOCK);
}

/* A delivered message's arena: back to the pool (reset), or freed. */
static void arena_done(RtPar *par, Arena *a)
{
    if (!a)
        return;
    arena_reset(a);
    pthread_mutex_lock(&par->pool_mu);
    if (par->n_pool < POOL_MAX) {
        par->pool[par->n_pool++] = a;
        a = NULL;
    }
    pthread_mutex_unlock(&par->pool_mu);
    if (a)
        arena_free(a);
}

static void wake(RtPar *par)
{
    if (atomic_load(&par->sleepers)) {
        pthread_mutex_lock(&par->qmu);
        pthread_cond_broadcast(&par->qcv);
        pthread_mutex_unlock(&par->qmu);
    }
}

/* Whether node n has an instance in shard s. */
static bool in_shard(const PlanNode *n, int s)
{
    return s == 0 || n->parallelism > 1 || (n->kind == PN_EXCHANGE && n->inputs[0]->parallelism > 1);
}

static bool is_source(const PlanNode *n)
{
    return n->kind == PN_SOURCE || n->kind == PN_VIEW_SOURCE || n->kind == PN_TABLE_WRITE;
}

RtPar *rt_par_new(const PlanView *plan, RtCtx *rc0, RtOp **ops0)
{
    RtPar *par = xcalloc(1, sizeof *par);
    par->plan = plan;
    par->P = plan->parallelism;
    par->arena = arena_new(0);
    for (int i = 0; i < plan->n_nodes; i++)
        par->n_ex += plan->nodes[i]->kind == PN_EXCHANGE;
    par->ex_id = xcalloc((size_t)par->n_ex + 1, sizeof(int));
    par->ex_at = xcalloc((size_t)par->n_ex + 1, sizeof(int));
    for (int i = 0, k = 0; i < plan->n_nodes; i++)
        if (plan->nodes[i]->kind == PN_EXCHANGE) {
            par->ex_at[k] = i;
            par->ex_id[k++] = plan->nodes[i]->id;
        }
    size_t nq = (size_t)par->n_ex * (size_t)par->P * (size_t)par->P;
    par->q = xcalloc(nq + 1, sizeof(Queue));
    for (size_t i = 0; i < nq; i++)
        pthread_mutex_init(&par->q[i].mu, NULL);
    par->outbound = xcalloc((size_t)par->P, sizeof(_Atomic int));
    par->sh = xcalloc((size_t)par->P, sizeof(Shard));
    par->sh[0].rc = rc0;
    par->sh[0].ops = ops0;
    rc0->par = par;
    rc0->shard = 0;
    rc0->n_shards = par->P;
    pthread_mutex_init(&par->mu, NULL);
    pthread_cond_init(&par->start_cv, NULL);
    pthread_cond_init(&par->done_cv, NULL);
    pthread_mutex_init(&par->qmu, NULL);
    pthread_cond_init(&par->qcv, NULL);
    pthread_mutex_init(&par->pool_mu, NULL);
    return par;
}

int rt_par_shards(const RtPar *par) { return par->P; }
RtCtx *rt_par_ctx(RtPar *par, int s) { return par->sh[s].rc; }
RtOp **rt_par_ops(RtPar *par, int s) { return par->sh[s].ops; }

RtOp *rt_par_changes_op(RtPar *par)
{
    for (int i = 0; i < par->plan->n_nodes; i++)
        if (par->plan->nodes[i] == par->plan->changes)
            return par->sh[0].ops[i];
    return NULL;
}

int rt_par_sources(RtPar *par, int s, RtOp ***out)
{
    *out = par->sh[s].sources;
    return par->sh[s].n_sources;
}

/* Shard s's copy of the plan's nodes: its own state tables, inputs pointing
 * at the copies. Nodes without an instance in s are left NULL. */
static PlanNode **copy_nodes(RtPar *par, int s)
{
    const PlanView *plan = par->plan;
    PlanNode **c = arena_zalloc(par->arena, sizeof(PlanNode *) * (size_t)plan->n_nodes);
    for (int i = 0; i < plan->n_nodes; i++) {
        const PlanNode *n = plan->nodes[i];
        if (!in_shard(n, s))
            continue;
        PlanNode *x = arena_alloc(par->arena, sizeof *x);
        *x = *n;
        if (n->shard_tables) {
            x->table_id = n->shard_tables[2 * s];
            x->table_id2 = n->shard_tables[2 * s + 1];
        }
        for (int k = 0; k < n->n_inputs; k++)
            for (int j = 0; j < i; j++)
                if (plan->nodes[j] == n->inputs[k] && c[j])
                    x->inputs[k] = c[j]; /* else the original: read, never wired (no instance here) */
        c[i] = x;
    }
    return c;
}

static void collect_sources(RtPar *par, int s)
{
    Shard *sh = &par->sh[s];
    sh->sources = xcalloc((size_t)par->plan->n_nodes + 1, sizeof(RtOp *));
    for (int i = 0; i < par->plan->n_nodes; i++)
        if (sh->ops[i] && is_source(par->plan->nodes[i]))
            sh->sources[sh->n_sources++] = sh->ops[i];
}

int rt_par_open(RtPar *par, WError *err)
{
    const PlanView *plan = par->plan;
    RtCtx *rc0 = par->sh[0].rc;
    collect_sources(par, 0);
    for (int s = 1; s < par->P; s++) {
        Shard *sh = &par->sh[s];
        sh->rc = &sh->own;
        sh->own.env = rc0->env;
        sh->own.err = &sh->err;
        sh->own.chunk_arena = arena_new(1 << 20);
        sh->own.stats.watermark = TS_MINUS_INF;
        sh->own.name = rc0->name;
        /* The view's time zone (rt_eval sets it on the worker threads too). */
        sh->own.own_tz = rc0->own_tz;
        sh->own.tz = rc0->tz;
        sh->own.par = par;
        sh->own.shard = s;
        sh->own.n_shards = par->P;
        sh->nodes = copy_nodes(par, s);
        sh->ops = xcalloc((size_t)plan->n_nodes, sizeof(RtOp *));
        /* Shard 0's sources exist already: shard s's come from the same plan. */
        int m = 0;
        PlanNode **nodes = xcalloc((size_t)plan->n_nodes, sizeof(PlanNode *));
        int *at = xcalloc((size_t)plan->n_nodes, sizeof(int));
        for (int i = 0; i < plan->n_nodes; i++)
            if (sh->nodes[i]) {
                at[m] = i;
                nodes[m++] = sh->nodes[i];
            }
        RtOp **ops = xcalloc((size_t)m + 1, sizeof(RtOp *));
        int rc = rt_instantiate(sh->rc, m, nodes, ops);
        for (int k = 0; k < m; k++)
            sh->ops[at[k]] = ops[k];
        free(ops);
        free(nodes);
        free(at);
        if (rc) {
            *err = sh->err;
            return -1;
        }
        collect_sources(par, s);
    }
    return 0;
}

static void *worker_main(void *arg);

typedef struct WorkerArg {
    RtPar *par;
    int shard;
} WorkerArg;

int rt_par_start(RtPar *par, WError *err)
{
    const PlanView *plan = par->plan;
    for (int s = 1; s < par->P; s++) {
        Shard *sh = &par->sh[s];
        for (int i = 0; i < plan->n_nodes; i++) {
            RtOp *op = sh->ops[i];
            if (op && op->vt->start && op->vt->start(op)) {
                *err = sh->err;
                return -1;
            }
        }
        arena_reset(sh->rc->chunk_arena);
    }
    par->th = xcalloc((size_t)par->P, sizeof(pthread_t));
    for (int s = 1; s < par->P; s++) {
        WorkerArg *a = xcalloc(1, sizeof *a);
        a->par = par;
        a->shard = s;
        if (pthread_create(&par->th[s], NULL, worker_main, a)) {
            free(a);
            return werr(err, SQLSTATE_INTERNAL, 0, "cannot start a worker thread");
        }
        par->n_started = s;
    }
    return 0;
}

static Queue *queue_of(RtPar *par, int ex, int from, int to)
{
    return &par->q[((size_t)ex * (size_t)par->P + (size_t)from) * (size_t)par->P + (size_t)to];
}

static int ex_index(const RtPar *par, int node_id)
{
    for (int k = 0; k < par->n_ex; k++)
        if (par->ex_id[k] == node_id)
            return k;
    return -1;
}

int rt_par_send(RtPar *par, const PlanNode *n, int from, int to, Arena *a, Chunk *c, int64_t wm)
{
    int ex = ex_index(par, n->id);
    if (ex < 0) {
        if (a)
            arena_free(a);
        return werr(par->sh[from].rc->err, SQLSTATE_INTERNAL, 0, "exchange %d unknown", n->id);
    }
    if (!par->in_step) {
        /* Workers parked: run the receiving shard's operators here. */
        RtOp *recv = par->sh[to].ops[par->ex_at[ex]];
        int rc = recv ? rt_exchange_receive(recv, from, c, wm) : 0;
        arena_done(par, a);
        if (rc && par->sh[from].rc->err != par->sh[to].rc->err)
            *par->sh[from].rc->err = *par->sh[to].rc->err;
        return rc;
    }
    Msg *m = xcalloc(1, sizeof *m);
    m->arena = a;
    m->c = c;
    m->wm = wm;
    Queue *q = queue_of(par, ex, from, to);
    atomic_fetch_add(&par->in_flight, 1);
    atomic_fetch_add(&par->outbound[from], 1);
    pthread_mutex_lock(&q->mu);
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
    pthread_mutex_unlock(&q->mu);
    wake(par);
    return 0;
}

/* Delivers everything queued for shard s. Returns 0 (and sets *work when
 * something came), or -1 when an operator failed. */
static int drain(RtPar *par, int s, bool *work)
{
    Shard *sh = &par->sh[s];
    for (int ex = 0; ex < par->n_ex; ex++) {
        RtOp *recv = sh->ops[par->ex_at[ex]];
        for (int from = 0; from < par->P; from++) {
            if (from == s)
                continue;
            Queue *q = queue_of(par, ex, from, s);
            pthread_mutex_lock(&q->mu);
            Msg *m = q->head;
            q->head = q->tail = NULL;
            pthread_mutex_unlock(&q->mu);
            while (m) {
                Msg *next = m->next;
                int rc = 0;
                if (!atomic_load(&par->abort))
                    rc = recv ? rt_exchange_receive(recv, from, m->c, m->wm) : 0;
                arena_done(par, m->arena);
                free(m);
                atomic_fetch_sub(&par->outbound[from], 1);
                if (atomic_fetch_sub(&par->in_flight, 1) == 1)
                    wake(par);
                *work = true;
                if (rc) {
                    /* The rest is dropped: the dataflow is closed after a failed step. */
                    for (m = next; m; m = next) {
                        next = m->next;
                        if (m->arena)
                            arena_free(m->arena);
                        free(m);
                        atomic_fetch_sub(&par->outbound[from], 1);
                        atomic_fetch_sub(&par->in_flight, 1);
                    }
                    wake(par);
                    return -1;
                }
                m = next;
            }
        }
    }
    return 0;
}

static void fail(RtPar *par, Shard *sh)
{
    sh->rcode = -1;
    atomic_store(&par->abort, 1);
    wake(par);
}

static bool quiet(RtPar *par)
{
    return atomic_load(&par->stopped) == par->P &&
           (atomic_load(&par->in_flight) == 0 || atomic_load(&par->abort));
}

/* Whether anything waits in shard s's inbound queues (a racy peek: a
 * message queued right after is seen by the waker's broadcast). */
static bool inbound(RtPar *par, int s)
{
    for (int ex = 0; ex < par->n_ex; ex++)
        for (int from = 0; from < par->P; from++)
            if (from != s) {
                Queue *q = queue_of(par, ex, from, s);
                pthread_mutex_lock(&q->mu);
                bool any = q->head != NULL;
                pthread_mutex_unlock(&q->mu);
                if (any)
                    return true;
            }
    return false;
}

/* Shard s's part of one step (see the file comment). */
static void run_shard(RtPar *par, int s)
{
    Shard *sh = &par->sh[s];
    sh->work = false;
    sh->rcode = 0;
    bool first = true;
    for (;;) {
        bool work = false;
        if (drain(par, s, &work)) {
            fail(par, sh);
            break;
        }
        if (atomic_load(&par->outbound[s]) < OUT_LIMIT && !atomic_load(&par->abort))
            for (int i = 0; i < sh->n_sources; i++) {
                RtOp *src = sh->sources[i];
                int timeout = first && s == 0 && i == 0 ? par->timeout_ms : 0;
                if (rt_source_poll(src, timeout, &work)) {
                    fail(par, sh);
                    break;
                }
            }
        arena_reset(sh->rc->chunk_arena);
        first = false;
        sh->work |= work;
        if (!work || atomic_load(&par->abort) || clock_mono_ms() >= par->deadline_ms)
            break;
    }
    atomic_fetch_add(&par->stopped, 1);
    wake(par);
    for (;;) {
        bool work = false;
        if (!sh->rcode && drain(par, s, &work))
            fail(par, sh);
        arena_reset(sh->rc->chunk_arena);
        if (quiet(par))
            break;
        if (work)
            continue;
        pthread_mutex_lock(&par->qmu);
        atomic_fetch_add(&par->sleepers, 1);
        if (!quiet(par) && !inbound(par, s)) {
            rt_cond_wait_ms(&par->qcv, &par->qmu, 1);
        }
        atomic_fetch_sub(&par->sleepers, 1);
        pthread_mutex_unlock(&par->qmu);
    }
}

static void *worker_main(void *arg)
{
    WorkerArg *a = arg;
    RtPar *par = a->par;
    int s = a->shard;
    free(a);
    char name[16];
    snprintf(name, sizeof name, "weir-worker-%d", s);
    pthread_setname_np(pthread_self(), name);
    uint64_t seen = 0;
    pthread_mutex_lock(&par->mu);
    for (;;) {
        while (par->gen == seen && !par->quit)
            pthread_cond_wait(&par->start_cv, &par->mu);
        if (par->quit)
            break;
        seen = par->gen;
        pthread_mutex_unlock(&par->mu);
        run_shard(par, s);
        pthread_mutex_lock(&par->mu);
        par->done++;
        pthread_cond_signal(&par->done_cv);
    }
    pthread_mutex_unlock(&par->mu);
    return NULL;
}

int rt_par_step(RtPar *par, int timeout_ms, bool *did_work, WError *err)
{
    pthread_mutex_lock(&par->mu);
    par->in_step = true;
    par->timeout_ms = timeout_ms;
    par->deadline_ms = clock_mono_ms() + SLICE_MS + (timeout_ms > 0 ? timeout_ms : 0);
    atomic_store(&par->stopped, 0);
    atomic_store(&par->abort, 0);
    par->done = 0;
    par->gen++;
    pthread_cond_broadcast(&par->start_cv);
    pthread_mutex_unlock(&par->mu);
    run_shard(par, 0);
    pthread_mutex_lock(&par->mu);
    while (par->done < par->P - 1)
        pthread_cond_wait(&par->done_cv, &par->mu);
    par->in_step = false;
    pthread_mutex_unlock(&par->mu);
    int rcode = 0;
    for (int s = 0; s < par->P; s++) {
        *did_work |= par->sh[s].work;
        if (par->sh[s].rcode && !rcode) {
            *err = *par->sh[s].rc->err;
            rcode = -1;
        }
    }
    return rcode;
}

void rt_par_free(RtPar *par)
{
    if (!par)
        return;
    pthread_mutex_lock(&par->mu);
    par->quit = true;
    pthread_cond_broadcast(&par->start_cv);
    pthread_mutex_unlock(&par->mu);
    for (int s = 1; s <= par->n_started; s++)
        pthread_join(par->th[s], NULL);
    for (int s = 1; s < par->P; s++) {
        Shard *sh = &par->sh[s];
        if (sh->ops)
            rt_close_ops(par->plan->n_nodes, sh->ops); /* with the shared nodes' readers (fan) */
        rt_bad_records_free(sh->rc ? sh->rc : &sh->own);
        free(sh->own.src_errs);
        free(sh->ops);
        free(sh->sources);
        if (sh->own.chunk_arena)
            arena_free(sh->own.chunk_arena);
    }
    free(par->sh[0].sources);
    size_t nq = (size_t)par->n_ex * (size_t)par->P * (size_t)par->P;
    for (size_t i = 0; i < nq; i++) {
        for (Msg *m = par->q[i].head, *next; m; m = next) {
            next = m->next;
            if (m->arena)
                arena_free(m->arena);
            free(m);
        }
        pthread_mutex_destroy(&par->q[i].mu);
    }
    pthread_mutex_destroy(&par->mu);
    pthread_mutex_destroy(&par->qmu);
    for (int i = 0; i < par->n_pool; i++)
        arena_free(par->pool[i]);
    pthread_mutex_destroy(&par->pool_mu);
    pthread_cond_destroy(&par->qcv);
    pthread_cond_destroy(&par->start_cv);
    pthread_cond_destroy(&par->done_cv);
    free(par->q);
    free(par->outbound);
    free(par->sh);
    free(par->th);
    free(par->ex_id);
    free(par->ex_at);
    arena_free(par->arena);
    free(par);
}
