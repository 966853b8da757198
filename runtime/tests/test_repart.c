/*
 * test_repart.c: repartition topics (runtime/repart.c) against a real
 * `weir broker` process (argv[1] is weir-broker-test, the same broker).
 *
 * 1. The codec: every weir type, NULLs, odd floats, strings with zero
 *    bytes, every op, round-trips bit for bit; another version is 0A000,
 *    a cut record or a row of other types XX001.
 * 2. Through the broker: rows land in partition kg only; a topic of
 *    another partition count is refused; barrier alignment with several
 *    tasks on two writers; the watermark is the minimum over tasks
 *    (idle tasks aside).
 * 3. A restored position continues exactly; records deleted behind a
 *    reader's position are 55000.
 * 4. Randomized kill and replay (seed argv[2], default 1): producer
 *    processes (this binary with --produce) write a deterministic input in
 *    epochs each run cuts anew, are killed with SIGKILL at random moments,
 *    then restarted from their last committed checkpoint (epoch, seq) or
 *    an older one; the reader is closed and restored from a saved position
 *    at random moments, dropping what it read since (as a consumer rolled
 *    back to its checkpoint). At the end every input row must have been
 *    read exactly once: no duplicate, no gap.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "chunk.h"
#include "numeric.h"
#include "repart.h"
#include "tap.h"

#define TIMEOUT_MS 10000

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    return x ^ (x >> 33);
}

/* ---- 1. codec ---- */

static const TypeId ALL_TYPES[] = {TYPE_BOOL,      TYPE_INT2,      TYPE_INT4,        TYPE_INT8,  TYPE_FLOAT4,
                                   TYPE_FLOAT8,    TYPE_NUMERIC,   TYPE_TEXT,        TYPE_BYTEA, TYPE_DATE,
                                   TYPE_TIMESTAMP, TYPE_TIMESTAMPTZ, TYPE_INTERVAL, TYPE_JSONB};
#define N_ALL ((int)(sizeof ALL_TYPES / sizeof ALL_TYPES[0]))

/* Row r of the all-types chunk: row 0 all NULL, the others edge values. */
static void fill_all_types(Chunk *c, int rows)
{
    static const char zstr[] = {'a', 0, 'b', 0};
    for (int r = 0; r < rows; r++) {
        Value v[N_ALL];
        for (int i = 0; i < N_ALL; i++) {
            TypeId t = ALL_TYPES[i];
            v[i] = value_null(t);
            if (r == 0)
                continue;
            v[i].null = false;
            switch (type_phys(t)) {
            case PHYS_I64: {
                static const int64_t iv[] = {0, 1, -1, INT64_MAX, INT64_MIN, 42};
                v[i].u.i = t == TYPE_BOOL ? r % 2 : iv[r % 6];
                break;
            }
            case PHYS_F64: {
                double fv[] = {-0.0, NAN, INFINITY, -INFINITY, 1e-310, 3.25};
                v[i].u.f = fv[r % 6];
                break;
            }
            case PHYS_STR:
                v[i].u.s = r % 3 == 1 ? (StrRef){"", 0} : r % 3 == 2 ? (StrRef){zstr, 4} : (StrRef){"{\"k\": \"é\"}", 12};
                break;
            case PHYS_IV: v[i].u.iv = (Interval){.months = -r, .days = 24 * r, .usecs = INT64_MIN + r}; break;
            case PHYS_NUM: {
                Numeric n;
                WError e = {0};
                num_parse(r % 2 ? "-12345678901234567890.1234500" : "0.000", r % 2 ? 29 : 5, &n, &e);
                v[i] = value_numeric(n);
                break;
            }
            }
        }
        chunk_append(c, (RowOp)(r % 4), v);
    }
}

/* Compares cell by cell, floats and numerics by their bits. */
static bool chunks_equal(const Chunk *a, const Chunk *b, int row_a, int row_b)
{
    if (a->ops[row_a] != b->ops[row_b])
        return false;
    for (int i = 0; i < a->n_cols; i++) {
        Value x, y;
        chunk_get(a, i, row_a, &x);
        chunk_get(b, i, row_b, &y);
        if (x.null != y.null || x.type != y.type)
            return false;
        if (x.null)
            continue;
        switch (type_phys(x.type)) {
        case PHYS_I64:
        case PHYS_F64:
            if (memcmp(&x.u.i, &y.u.i, 8))
                return false;
            break;
        case PHYS_STR:
            if (x.u.s.len != y.u.s.len || memcmp(x.u.s.p, y.u.s.p, x.u.s.len))
                return false;
            break;
        case PHYS_IV:
            if (x.u.iv.usecs != y.u.iv.usecs || x.u.iv.days != y.u.iv.days || x.u.iv.months != y.u.iv.months)
                return false;
            break;
        case PHYS_NUM:
            if (x.nscale != y.nscale || memcmp(&x.u.n, &y.u.n, sizeof x.u.n))
                return false;
            break;
        }
    }
    return true;
}

static void test_codec(void)
{
    Arena *a = arena_new(0);
    Chunk *c = chunk_new(a, N_ALL, ALL_TYPES, 16);
    fill_all_types(c, 13);
    Chunk *d = chunk_new(a, N_ALL, ALL_TYPES, 16);
    Buf b = BUF_INIT;
    bool all = true;
    WError e = {0};
    for (int r = 0; r < c->n_rows; r++) {
        buf_reset(&b);
        rt_repart_encode_row(&b, 7, 3, (uint64_t)r, c, r);
        RtRepartRecord rec;
        if (rt_repart_decode(b.data, b.len, &rec, &e) || rec.kind != RT_REPART_ROW || rec.task != 7 ||
            rec.epoch != 3 || rec.seq != (uint64_t)r || rt_repart_decode_row(&rec, d, &e) != r ||
            !chunks_equal(c, d, r, r))
            all = false;
    }
    ok(all, "codec: every type, NULLs, -0/NaN/inf, zero bytes, numeric scale, +I/-D/-U/+U round-trip exactly");
    ok(d->ops[1] == OP_DELETE && d->ops[2] == OP_UPDATE_BEFORE && d->ops[3] == OP_UPDATE_AFTER, "codec: ops kept");

    buf_reset(&b);
    rt_repart_encode_row(&b, 1, 1, 0, c, 5);
    ok(b.data[0] == 1 && b.data[1] == 0 && b.data[2] == 1 && b.data[6] == 1 && b.data[14] == 0,
       "codec: header is version 1, kind 0, task/epoch/seq little-endian");
    RtRepartRecord rec;
    b.data[0] = 2;
    werr_clear(&e);
    ok(rt_repart_decode(b.data, b.len, &rec, &e) < 0 && !strcmp(e.sqlstate, "0A000"), "codec: version 2 is 0A000");
    b.data[0] = 1;
    werr_clear(&e);
    ok(rt_repart_decode(b.data, 10, &rec, &e) < 0 && !strcmp(e.sqlstate, "XX001"), "codec: a cut header is XX001");
    werr_clear(&e);
    ok(rt_repart_decode(b.data, b.len - 3, &rec, &e) == 0 && rt_repart_decode_row(&rec, d, &e) < 0 &&
           !strcmp(e.sqlstate, "XX001"),
       "codec: a cut row is XX001");
    TypeId other[N_ALL];
    memcpy(other, ALL_TYPES, sizeof other);
    other[3] = TYPE_TEXT;
    Chunk *o = chunk_new(a, N_ALL, other, 4);
    werr_clear(&e);
    ok(rt_repart_decode(b.data, b.len, &rec, &e) == 0 && rt_repart_decode_row(&rec, o, &e) < 0 &&
           !strcmp(e.sqlstate, "XX001") && strstr(e.msg, "column 4"),
       "codec: a row of other types is XX001 naming the column");
    buf_reset(&b);
    rt_repart_encode_mark(&b, RT_REPART_WATERMARK, 9, 4, 17, -123456789);
    werr_clear(&e);
    ok(rt_repart_decode(b.data, b.len, &rec, &e) == 0 && rec.kind == RT_REPART_WATERMARK && rec.wm == -123456789 &&
           rec.task == 9 && rec.epoch == 4 && rec.seq == 17,
       "codec: watermark record");
    buf_free(&b);
    arena_free(a);
}

/* ---- broker helpers ---- */

static pid_t broker_pid;
static char broker_addr[128];
static FILE *broker_out; /* kept open: the broker may keep writing to it */

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
        if (sscanf(line, "weir broker listening on %127s", broker_addr) == 1)
            return 0;
    return -1;
}

/* Polls r into c until `records` more records were consumed or
 * deadline_ms passed; returns those consumed. */
static long drain(RtRepartReader *r, Chunk *c, long records, int wait_ms)
{
    long got = 0;
    int64_t end = now_ms() + wait_ms;
    WError e = {0};
    while (got < records && now_ms() < end) {
        int n = rt_repart_reader_poll(r, 100, c, &e);
        if (n < 0) {
            diag("poll: %s: %s", e.sqlstate, e.msg);
            return -1;
        }
        got += n;
    }
    return got;
}

static int topic_no;

static void next_topic(char *buf, size_t n)
{
    WError e = {0};
    rt_repart_topic_name(buf, n, "t", 1000 + (uint64_t)topic_no++, 3, &e);
}

static const TypeId ROW_TYPES[] = {TYPE_INT4, TYPE_INT8, TYPE_INT8, TYPE_TEXT};

/* ---- 2. through the broker ---- */

static void test_broker_roundtrip(void)
{
    char topic[128];
    next_topic(topic, sizeof topic);
    WError e = {0};
    uint32_t tasks[] = {0};
    RtRepartWriter *w = NULL;
    ok(rt_repart_writer_open(broker_addr, topic, 4, tasks, NULL, 1, 1, TIMEOUT_MS, &w, &e) == 0, "writer opens, creates the topic");
    if (!w) {
        diag("%s: %s", e.sqlstate, e.msg);
        return;
    }
    Arena *a = arena_new(0);
    Chunk *c = chunk_new(a, N_ALL, ALL_TYPES, 16);
    fill_all_types(c, 13);
    uint16_t kg[16];
    for (int r = 0; r < c->n_rows; r++)
        kg[r] = (uint16_t)(r % 4);
    ok(rt_repart_writer_push(w, 0, c, kg, &e) == 0 && rt_repart_writer_barrier(w, 1, &e) == 0 &&
           rt_repart_writer_sync(w, TIMEOUT_MS, &e) == 0,
       "writer: push, barrier, sync");
    kg[0] = 4;
    werr_clear(&e);
    ok(rt_repart_writer_push(w, 0, c, kg, &e) < 0 && !strcmp(e.sqlstate, "22023"), "writer: key group 4 of 4 is 22023");
    werr_clear(&e);
    ok(rt_repart_writer_push(w, 5, c, kg, &e) < 0 && !strcmp(e.sqlstate, "22023"), "writer: a task not its own is 22023");
    werr_clear(&e);
    ok(rt_repart_writer_barrier(w, 1, &e) < 0 && !strcmp(e.sqlstate, "55000"), "writer: a barrier for a past epoch is 55000");

    RtRepartReader *r = NULL;
    werr_clear(&e);
    ok(rt_repart_reader_open(broker_addr, topic, 4, 1, ALL_TYPES, N_ALL, TIMEOUT_MS, &r, &e) == 0, "reader opens");
    int32_t p2[] = {2};
    ok(r && rt_repart_reader_assign(r, 1, p2, &e) == 0, "reader: assign partition 2");
    Chunk *d = chunk_new(a, N_ALL, ALL_TYPES, 16);
    chunk_enable_wm(d);
    long got = drain(r, d, 4, TIMEOUT_MS); /* rows 2, 6, 10 and the barrier */
    bool same = d->n_rows == 3;
    for (int i = 0; same && i < 3; i++)
        same = chunks_equal(c, d, 2 + 4 * i, i);
    ok(got == 4 && same, "broker: partition 2 holds exactly rows 2, 6, 10, equal bit for bit");
    is_int((long long)rt_repart_reader_aligned_epoch(r), 1, "broker: the single task's barrier 1 read");
    rt_repart_reader_close(r);

    RtRepartWriter *w2 = NULL;
    werr_clear(&e);
    ok(rt_repart_writer_open(broker_addr, topic, 8, tasks, NULL, 1, 1, TIMEOUT_MS, &w2, &e) < 0 &&
           !strcmp(e.sqlstate, "22023") && strstr(e.msg, "has 4 partitions"),
       "a topic with another partition count is refused (22023)");
    diag("%s", e.msg);
    rt_repart_writer_close(w);
    arena_free(a);
}

/* Barrier alignment and watermarks: tasks 0 and 1 on writer A, task 2 on
 * writer B, 4 partitions; the reader owns partitions 1 and 3. */
static void test_alignment_watermark(void)
{
    char topic[128];
    next_topic(topic, sizeof topic);
    WError e = {0};
    uint32_t ta[] = {0, 1}, tb[] = {2};
    RtRepartWriter *A = NULL, *B = NULL;
    RtRepartReader *r = NULL;
    if (rt_repart_writer_open(broker_addr, topic, 4, ta, NULL, 2, 1, TIMEOUT_MS, &A, &e) ||
        rt_repart_writer_open(broker_addr, topic, 4, tb, NULL, 1, 1, TIMEOUT_MS, &B, &e) ||
        rt_repart_reader_open(broker_addr, topic, 4, 3, ROW_TYPES, 4, TIMEOUT_MS, &r, &e)) {
        ok(0, "open writers and reader");
        diag("%s: %s", e.sqlstate, e.msg);
        return;
    }
    int32_t mine[] = {1, 3};
    rt_repart_reader_assign(r, 2, mine, &e);
    Arena *a = arena_new(0);
    Chunk *d = chunk_new(a, 4, ROW_TYPES, 1024);
    chunk_enable_wm(d);
    /* Each mark goes to all 4 partitions, so 2 records per mark reach us. */
    rt_repart_writer_barrier(A, 1, &e);
    rt_repart_writer_sync(A, TIMEOUT_MS, &e);
    drain(r, d, 4, TIMEOUT_MS);
    drain(r, d, 1, 200);
    is_int((long long)rt_repart_reader_aligned_epoch(r), 0, "alignment: tasks 0 and 1 at barrier 1, task 2 not: 0");
    rt_repart_writer_barrier(B, 1, &e);
    rt_repart_writer_sync(B, TIMEOUT_MS, &e);
    drain(r, d, 2, TIMEOUT_MS);
    is_int((long long)rt_repart_reader_aligned_epoch(r), 1, "alignment: all three tasks at barrier 1: 1");
    rt_repart_writer_barrier(A, 2, &e);
    rt_repart_writer_barrier(B, 2, &e);
    rt_repart_writer_barrier(B, 3, &e);
    rt_repart_writer_sync(A, TIMEOUT_MS, &e);
    rt_repart_writer_sync(B, TIMEOUT_MS, &e);
    drain(r, d, 8, TIMEOUT_MS);
    is_int((long long)rt_repart_reader_aligned_epoch(r), 2, "alignment: A at 2, B at 3: 2");

    ok(rt_repart_reader_watermark(r) == TS_MINUS_INF, "watermark: none sent: -infinity");
    rt_repart_writer_watermark(A, 0, 100, &e);
    rt_repart_writer_watermark(A, 1, 50, &e);
    rt_repart_writer_sync(A, TIMEOUT_MS, &e);
    drain(r, d, 4, TIMEOUT_MS);
    ok(rt_repart_reader_watermark(r) == TS_MINUS_INF, "watermark: task 2 has sent none: still -infinity");
    rt_repart_writer_watermark(B, 2, 70, &e);
    rt_repart_writer_sync(B, TIMEOUT_MS, &e);
    drain(r, d, 2, TIMEOUT_MS);
    is_int(rt_repart_reader_watermark(r), 50, "watermark: min(100, 50, 70) = 50");
    rt_repart_writer_watermark(A, 1, 200, &e);
    rt_repart_writer_sync(A, TIMEOUT_MS, &e);
    drain(r, d, 2, TIMEOUT_MS);
    is_int(rt_repart_reader_watermark(r), 70, "watermark: task 1 moves to 200: min = 70");
    rt_repart_writer_watermark(B, 2, RT_REPART_WM_IDLE, &e);
    rt_repart_writer_sync(B, TIMEOUT_MS, &e);
    drain(r, d, 2, TIMEOUT_MS);
    is_int(rt_repart_reader_watermark(r), 100, "watermark: task 2 idle: min over the others = 100");

    /* A row pushed now carries the reader's watermark at its arrival. */
    Chunk *c = chunk_new(a, 4, ROW_TYPES, 4);
    Value v[4] = {value_int(TYPE_INT4, 0), value_int(TYPE_INT8, 1), value_int(TYPE_INT8, 2), value_null(TYPE_TEXT)};
    chunk_append(c, OP_INSERT, v);
    uint16_t kg[] = {3};
    int before = d->n_rows;
    rt_repart_writer_push(A, 0, c, kg, &e);
    rt_repart_writer_sync(A, TIMEOUT_MS, &e);
    drain(r, d, 1, TIMEOUT_MS);
    ok(d->n_rows == before + 1 && d->wm[before] == 100, "a row read carries the reader's watermark");
    rt_repart_writer_close(A);
    rt_repart_writer_close(B);
    rt_repart_reader_close(r);
    arena_free(a);
}

/* ---- 3. randomized kill, replay and restore ---- */

#define K_TASKS 3
#define K_PARTS 8
#define K_ROWS 1500      /* rows of each task's input */
#define K_MAX_KILLS 15
#define K_MAX_EPOCHS 200 /* epochs of 10 rows at least */

/* Row n of task t goes to this key group. */
static uint16_t row_kg(int t, int n) { return (uint16_t)(mix((uint64_t)t << 32 | (uint64_t)n) % K_PARTS); }

/* The producer process: task t's rows from `seq` on, in epochs from
 * `epoch` on, of 10 to 150 rows cut by `cut_seed` (each run cuts its own:
 * a replay's epochs differ from the original's, as a timer's would). It
 * prints "C <epoch> <next seq>" when an epoch's checkpoint is committed
 * (barrier synced), and sends +infinity as its watermark at the end. */
static int produce_main(const char *addr, const char *topic, int t, int epoch, uint64_t seq, uint64_t cut_seed)
{
    WError e = {0};
    uint32_t task = (uint32_t)t;
    RtRepartWriter *w;
    if (rt_repart_writer_open(addr, topic, K_PARTS, &task, &seq, 1, (uint64_t)epoch, TIMEOUT_MS, &w, &e)) {
        fprintf(stderr, "producer: %s\n", e.msg);
        return 1;
    }
    Arena *a = arena_new(0);
    char text[64];
    uint64_t rng = mix(cut_seed);
    int n = (int)seq;
    for (int ep = epoch; n < K_ROWS; ep++) {
        rng = mix(rng);
        int end = n + 10 + (int)(rng % 141);
        if (end > K_ROWS)
            end = K_ROWS;
        while (n < end) {
            rng = mix(rng);
            int m = 1 + (int)(rng % 40);
            Chunk *c = chunk_new(a, 4, ROW_TYPES, m);
            uint16_t kg[64];
            for (; c->n_rows < m && n < end; n++) {
                snprintf(text, sizeof text, "row %d/%d", t, n);
                Value v[4] = {value_int(TYPE_INT4, t), value_int(TYPE_INT8, ep), value_int(TYPE_INT8, n),
                              value_str(TYPE_TEXT, text, strlen(text))};
                kg[c->n_rows] = row_kg(t, n);
                chunk_append(c, OP_INSERT, v);
            }
            if (rt_repart_writer_push(w, task, c, kg, &e))
                return fprintf(stderr, "producer: %s\n", e.msg), 1;
            usleep(2000);
        }
        uint64_t next;
        if (rt_repart_writer_watermark(w, task, n == K_ROWS ? TS_PLUS_INF : (int64_t)n * 1000, &e) ||
            rt_repart_writer_barrier(w, (uint64_t)ep, &e) || rt_repart_writer_seq(w, task, &next, &e) ||
            rt_repart_writer_sync(w, TIMEOUT_MS, &e))
            return fprintf(stderr, "producer: %s\n", e.msg), 1;
        printf("C %d %" PRIu64 "\n", ep, next);
        fflush(stdout);
        arena_reset(a);
    }
    rt_repart_writer_close(w);
    arena_free(a);
    return 0;
}

typedef struct Prod {
    pid_t pid;
    int out;            /* its stdout, non-blocking */
    int committed;      /* last epoch committed (0 none) */
    uint64_t ckpt_seq[K_MAX_EPOCHS + 1]; /* per committed epoch, the next seq after it */
    int64_t kill_at;    /* ms, 0 = let it run */
    bool done;
    char line[64];
    int line_len;
} Prod;

static const char *self_path;
static int kills_left = K_MAX_KILLS;
static char k_topic[128];

static void prod_start(Prod *p, int t, uint64_t *rng)
{
    int fd[2];
    if (pipe(fd))
        abort();
    *rng = mix(*rng);
    uint64_t cut_seed = *rng;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        char ts[16], es[16], ss[32], cs[32];
        snprintf(ts, sizeof ts, "%d", t);
        snprintf(es, sizeof es, "%d", p->committed + 1);
        snprintf(ss, sizeof ss, "%" PRIu64, p->committed ? p->ckpt_seq[p->committed] : 0);
        snprintf(cs, sizeof cs, "%" PRIu64, cut_seed);
        execl(self_path, self_path, "--produce", broker_addr, k_topic, ts, es, ss, cs, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    fcntl(fd[0], F_SETFL, O_NONBLOCK);
    p->pid = pid;
    p->out = fd[0];
    p->line_len = 0;
    *rng = mix(*rng);
    p->kill_at = *rng % 4 && kills_left-- > 0 ? now_ms() + 20 + (int64_t)(*rng >> 8) % 400 : 0;
}

static void prod_read(Prod *p)
{
    char c;
    while (read(p->out, &c, 1) == 1) {
        if (c != '\n') {
            if (p->line_len < (int)sizeof p->line - 1)
                p->line[p->line_len++] = c;
            continue;
        }
        p->line[p->line_len] = 0;
        p->line_len = 0;
        int ep;
        uint64_t next;
        if (sscanf(p->line, "C %d %" SCNu64, &ep, &next) == 2 && ep > 0 && ep <= K_MAX_EPOCHS) {
            p->committed = ep;
            p->ckpt_seq[ep] = next;
        }
    }
}

/* The rows read: seen[t][n] counts. */
static int seen[K_TASKS][K_ROWS];

static void collect(Chunk *d)
{
    for (int r = 0; r < d->n_rows; r++) {
        Value t, n;
        chunk_get(d, 0, r, &t);
        chunk_get(d, 2, r, &n);
        seen[t.u.i][n.u.i]++;
    }
}

static void test_kill_replay(uint64_t seed)
{
    next_topic(k_topic, sizeof k_topic);
    uint64_t rng = mix(seed + 17);
    WError e = {0};
    RtRepartReader *r = NULL;
    if (rt_repart_reader_open(broker_addr, k_topic, K_PARTS, K_TASKS, ROW_TYPES, 4, TIMEOUT_MS, &r, &e)) {
        ok(0, "kill/replay: reader opens");
        diag("%s", e.msg);
        return;
    }
    int32_t all[K_PARTS];
    for (int p = 0; p < K_PARTS; p++)
        all[p] = p;
    rt_repart_reader_assign(r, K_PARTS, all, &e);

    static Prod prods[K_TASKS];
    for (int t = 0; t < K_TASKS; t++)
        prod_start(&prods[t], t, &rng);
    int kills = 0, restores = 0, replay_back = 0, events = 0;
    /* The reader's "checkpoint": its position and the rows it had then. */
    Buf saved = BUF_INIT;
    static int saved_seen[K_TASKS][K_ROWS];
    rt_repart_reader_position_save(r, &saved);
    memcpy(saved_seen, seen, sizeof seen);
    Arena *a = arena_new(0);
    int64_t deadline = now_ms() + 90000;
    int64_t next_restore = now_ms() + 300 + (int64_t)(rng % 600);
    bool failed = false;
    for (;;) {
        Chunk *d = chunk_new(a, 4, ROW_TYPES, 512);
        chunk_enable_wm(d);
        int n = rt_repart_reader_poll(r, 20, d, &e);
        if (n < 0) {
            diag("poll: %s: %s", e.sqlstate, e.msg);
            failed = true;
            break;
        }
        collect(d);
        arena_reset(a);
        bool all_done = true;
        for (int t = 0; t < K_TASKS; t++) {
            Prod *p = &prods[t];
            if (p->done)
                continue;
            all_done = false;
            prod_read(p);
            int st;
            if (p->kill_at && now_ms() >= p->kill_at) {
                kill(p->pid, SIGKILL);
                waitpid(p->pid, &st, 0);
                prod_read(p);
                close(p->out);
                kills++;
                /* Replay from the last committed checkpoint, or from one
                 * or two before it (an older checkpoint restored). */
                rng = mix(rng);
                int back = (int)(rng % 3);
                if (back && p->committed > back) {
                    p->committed -= back;
                    replay_back++;
                }
                prod_start(p, t, &rng);
            } else if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
                prod_read(p);
                close(p->out);
                if (!WIFEXITED(st) || WEXITSTATUS(st)) {
                    diag("producer %d failed (status %d)", t, st);
                    failed = true;
                }
                p->done = true;
            }
        }
        if (failed)
            break;
        if (now_ms() >= next_restore) {
            rng = mix(rng);
            if (events++ % 2 == 0) {
                /* Take a checkpoint of the reader now (every other time). */
                buf_reset(&saved);
                rt_repart_reader_position_save(r, &saved);
                memcpy(saved_seen, seen, sizeof seen);
            } else {
                /* Crash the reader: a new one from the last checkpoint. */
                rt_repart_reader_close(r);
                r = NULL;
                if (rt_repart_reader_open(broker_addr, k_topic, K_PARTS, K_TASKS, ROW_TYPES, 4, TIMEOUT_MS, &r, &e) ||
                    rt_repart_reader_position_restore(r, saved.data, saved.len, &e) ||
                    rt_repart_reader_assign(r, K_PARTS, all, &e)) {
                    diag("restore: %s", e.msg);
                    failed = true;
                    break;
                }
                memcpy(seen, saved_seen, sizeof seen);
                restores++;
            }
            next_restore = now_ms() + 200 + (int64_t)(rng >> 8) % 800;
        }
        /* Every task's last run sent +infinity after all its rows (the rows
         * before its start were delivered before it began), so a watermark
         * of +infinity means every row has been read. */
        if (all_done && rt_repart_reader_watermark(r) == TS_PLUS_INF)
            break;
        if (now_ms() > deadline) {
            diag("timed out: watermark %" PRId64, rt_repart_reader_watermark(r));
            failed = true;
            break;
        }
    }
    ok(!failed, "kill/replay: producers ran to the end and the reader read to their final watermark");
    int min_final = K_MAX_EPOCHS;
    for (int t = 0; t < K_TASKS; t++)
        if (prods[t].committed < min_final)
            min_final = prods[t].committed;
    ok(rt_repart_reader_aligned_epoch(r) >= (uint64_t)min_final, "kill/replay: the reader aligned on the last epochs");
    long dup = 0, gap = 0;
    for (int t = 0; t < K_TASKS; t++)
        for (int i = 0; i < K_ROWS; i++) {
            if (seen[t][i] > 1)
                dup += seen[t][i] - 1;
            if (seen[t][i] < 1)
                gap++;
        }
    diag("seed %" PRIu64 ": %d rows, %d kills (%d replays from an older checkpoint), %d reader restores, "
         "%ld duplicates dropped by the last reader, epochs cut anew by each run",
         seed, K_TASKS * K_ROWS, kills, replay_back, restores, rt_repart_reader_dropped(r));
    ok(kills >= 2 && restores >= 1, "kill/replay: producers were killed and the reader restored");
    is_int(dup, 0, "kill/replay: no duplicate row");
    is_int(gap, 0, "kill/replay: no missing row");
    for (int t = 0; t < K_TASKS; t++)
        if (!prods[t].done) {
            kill(prods[t].pid, SIGKILL);
            waitpid(prods[t].pid, NULL, 0);
        }
    rt_repart_reader_close(r);
    buf_free(&saved);
    arena_free(a);
}

/* The same rows, in any order across partitions (the fetch order of two
 * partitions is not fixed): each row of a matches one of b exactly. */
static bool same_rows(const Chunk *a, const Chunk *b)
{
    if (a->n_rows != b->n_rows)
        return false;
    bool *used = calloc((size_t)b->n_rows + 1, 1);
    bool all = true;
    for (int i = 0; all && i < a->n_rows; i++) {
        int j = 0;
        while (j < b->n_rows && (used[j] || !chunks_equal(a, b, i, j)))
            j++;
        if (j == b->n_rows)
            all = false;
        else
            used[j] = true;
    }
    free(used);
    return all;
}

/* A restored position continues exactly: save mid-stream, read on, then a
 * new reader restored from the save reads the same rest. */
static void test_restore_exact(void)
{
    char topic[128];
    next_topic(topic, sizeof topic);
    WError e = {0};
    uint32_t task = 0;
    RtRepartWriter *w = NULL;
    RtRepartReader *r = NULL, *r2 = NULL;
    if (rt_repart_writer_open(broker_addr, topic, 2, &task, NULL, 1, 1, TIMEOUT_MS, &w, &e) ||
        rt_repart_reader_open(broker_addr, topic, 2, 1, ROW_TYPES, 4, TIMEOUT_MS, &r, &e)) {
        ok(0, "restore: open");
        return;
    }
    Arena *a = arena_new(0);
    Chunk *c = chunk_new(a, 4, ROW_TYPES, 200);
    uint16_t kg[200];
    for (int i = 0; i < 200; i++) {
        Value v[4] = {value_int(TYPE_INT4, 0), value_int(TYPE_INT8, 1), value_int(TYPE_INT8, i), value_null(TYPE_TEXT)};
        chunk_append(c, OP_INSERT, v);
        kg[i] = (uint16_t)(i % 2);
    }
    rt_repart_writer_push(w, 0, c, kg, &e);
    rt_repart_writer_watermark(w, 0, 5000, &e);
    rt_repart_writer_sync(w, TIMEOUT_MS, &e);
    int32_t both[] = {0, 1};
    rt_repart_reader_assign(r, 2, both, &e);
    Chunk *d = chunk_new(a, 4, ROW_TYPES, 77); /* stops mid-stream */
    drain(r, d, 77, TIMEOUT_MS);
    Buf pos = BUF_INIT;
    rt_repart_reader_position_save(r, &pos);
    Chunk *rest1 = chunk_new(a, 4, ROW_TYPES, 400);
    drain(r, rest1, 202 - 77, TIMEOUT_MS);
    rt_repart_reader_open(broker_addr, topic, 2, 1, ROW_TYPES, 4, TIMEOUT_MS, &r2, &e);
    ok(r2 && rt_repart_reader_position_restore(r2, pos.data, pos.len, &e) == 0 &&
           rt_repart_reader_assign(r2, 2, both, &e) == 0,
       "restore: a new reader takes the saved position");
    Chunk *rest2 = chunk_new(a, 4, ROW_TYPES, 400);
    drain(r2, rest2, 202 - 77, TIMEOUT_MS);
    bool same = d->n_rows + rest1->n_rows == 200 && same_rows(rest1, rest2);
    ok(same, "restore: the restored reader reads exactly the rest the first one read");
    is_int(rt_repart_reader_watermark(r2), 5000, "restore: the watermark comes back with the position");
    /* A replay of everything: all dropped. */
    RtRepartWriter *w2 = NULL;
    rt_repart_writer_open(broker_addr, topic, 2, &task, NULL, 1, 1, TIMEOUT_MS, &w2, &e);
    rt_repart_writer_push(w2, 0, c, kg, &e);
    rt_repart_writer_sync(w2, TIMEOUT_MS, &e);
    Chunk *rest3 = chunk_new(a, 4, ROW_TYPES, 400);
    drain(r2, rest3, 200, TIMEOUT_MS);
    ok(rest3->n_rows == 0 && rt_repart_reader_dropped(r2) == 200, "restore: a replay of the same epoch is dropped whole");
    /* Restored into the first reader while it is assigned: it seeks back. */
    Chunk *rest4 = chunk_new(a, 4, ROW_TYPES, 400);
    ok(rt_repart_reader_position_restore(r, pos.data, pos.len, &e) == 0, "restore: into an assigned reader");
    drain(r, rest4, 202 - 77 + 200, TIMEOUT_MS);
    same = same_rows(rest1, rest4);
    if (!ok(same, "restore: an assigned reader re-reads the same rest, and drops the replay"))
        diag("re-read %d rows, the first time %d", rest4->n_rows, rest1->n_rows);
    werr_clear(&e);
    pos.data[1] ^= 1;
    ok(rt_repart_reader_position_restore(r2, pos.data, pos.len, &e) < 0 && !strcmp(e.sqlstate, "22023"),
       "restore: a position of another partition count is refused");
    werr_clear(&e);
    pos.data[1] ^= 1;
    ok(rt_repart_reader_position_restore(r2, pos.data, pos.len - 1, &e) < 0 && !strcmp(e.sqlstate, "XX001"),
       "restore: a cut position is XX001");
    buf_free(&pos);
    rt_repart_writer_close(w);
    rt_repart_writer_close(w2);
    rt_repart_reader_close(r);
    rt_repart_reader_close(r2);
    arena_free(a);
}

/* Records deleted before the reader read them (the embedded broker keeps
 * about 5 MiB per partition) are an error, not a silent gap. */
static void test_deleted_records(void)
{
    char topic[128];
    next_topic(topic, sizeof topic);
    WError e = {0};
    uint32_t task = 0;
    RtRepartWriter *w = NULL;
    RtRepartReader *r = NULL;
    if (rt_repart_writer_open(broker_addr, topic, 1, &task, NULL, 1, 1, TIMEOUT_MS, &w, &e) ||
        rt_repart_reader_open(broker_addr, topic, 1, 1, ROW_TYPES, 4, TIMEOUT_MS, &r, &e)) {
        ok(0, "deleted: open");
        return;
    }
    Arena *a = arena_new(0);
    static char big[1000];
    memset(big, 'x', sizeof big);
    Chunk *c = chunk_new(a, 4, ROW_TYPES, 1000);
    uint16_t kg[1000] = {0};
    for (int i = 0; i < 1000; i++) {
        Value v[4] = {value_int(TYPE_INT4, 0), value_int(TYPE_INT8, 1), value_int(TYPE_INT8, i),
                      value_str(TYPE_TEXT, big, sizeof big)};
        chunk_append(c, OP_INSERT, v);
    }
    c->n_rows = 1;
    rt_repart_writer_push(w, 0, c, kg, &e);
    rt_repart_writer_sync(w, TIMEOUT_MS, &e);
    int32_t p0[] = {0};
    rt_repart_reader_assign(r, 1, p0, &e);
    Chunk *d = chunk_new(a, 4, ROW_TYPES, 1000);
    drain(r, d, 1, TIMEOUT_MS);
    Buf pos = BUF_INIT;
    rt_repart_reader_position_save(r, &pos);
    c->n_rows = 1000;
    for (int k = 0; k < 7; k++) /* 7 MB: the oldest records go */
        rt_repart_writer_push(w, 0, c, kg, &e);
    ok(rt_repart_writer_sync(w, 30000, &e) == 0, "deleted: 7 MB written to one partition");
    rt_repart_reader_position_restore(r, pos.data, pos.len, &e);
    werr_clear(&e);
    int n = 0;
    for (int64_t end = now_ms() + TIMEOUT_MS; n >= 0 && now_ms() < end;) {
        d->n_rows = 0;
        n = rt_repart_reader_poll(r, 100, d, &e);
    }
    ok(n < 0 && !strcmp(e.sqlstate, "55000") && strstr(e.msg, "were deleted"),
       "deleted: a reader whose next records were deleted gets 55000, not a gap");
    diag("%s", e.msg);
    buf_free(&pos);
    rt_repart_writer_close(w);
    rt_repart_reader_close(r);
    arena_free(a);
}

int main(int argc, char **argv)
{
    if (argc == 8 && !strcmp(argv[1], "--produce"))
        return produce_main(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]), strtoull(argv[6], NULL, 10),
                            strtoull(argv[7], NULL, 10));
    self_path = argv[0];
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_codec();
    if (argc < 2 || start_broker(argv[1])) {
        ok(0, "weir broker starts");
        return tap_done();
    }
    signal(SIGPIPE, SIG_IGN);
    test_broker_roundtrip();
    test_alignment_watermark();
    test_restore_exact();
    test_deleted_records();
    test_kill_replay(argc > 2 ? strtoull(argv[2], NULL, 10) : 1);
    kill(broker_pid, SIGTERM);
    waitpid(broker_pid, NULL, 0);
    fclose(broker_out);
    return tap_done();
}
