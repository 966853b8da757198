/*
 * http.c: the HTTP endpoint over libmicrohttpd (see http.h for the routes).
 *
 * libmicrohttpd runs one thread per connection (MHD_USE_THREAD_PER_CONNECTION
 * with an internal listener thread), so a handler may block: a Server-Sent
 * Events stream is a content-reader callback that waits on its
 * subscription's queue (subscribe.c), never on the engine. Handlers take
 * the engine lock only long enough to copy what they answer (counters, a
 * view's rows), exactly as a SQL statement would.
 *
 * POST /api/sql runs the body as a simple query over a libpq connection
 * to this server's own pgwire port: one code path for SQL, with the same
 * sessions, errors and positions as psql gets.
 *
 * Limits: a request body over max_body is refused with 413 from its
 * Content-Length before anything is read (and cut off if a chunked body
 * grows past it), at most max_connections connections (http_door.c: past
 * it 503, a malformed request line 400, none within 10 s 408) and max_streams SSE
 * streams at once; errors are JSON {"error": {"message": ...}} with a 4xx
 * or 5xx status.
 */
#include "http.h"

#include <microhttpd.h>
#include <libpq-fe.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "cluster.h"
#include "http_door.h"
#include "group.h"
#include "engine_int.h"
#include "commands.h"
#include "clock.h"
#include "log.h"
#include "pg_oids.h"

#define DEFAULT_MAX_CONNECTIONS 64
#define HTTP_LINE_TIMEOUT_MS 10000 /* a connection must send its request line within this (else 408) */
#define HTTP_IDLE_TIMEOUT_S 15     /* a kept-alive connection idle this long is closed */
#define DEFAULT_MAX_STREAMS 32
#define DEFAULT_MAX_BODY (1024 * 1024)
#define SSE_POLL_MS 200            /* how often a stream checks for a gone client and shutdown */
#define SSE_HEARTBEAT_MS 3000      /* a comment line after this long without events */
#define SSE_BLOCK 16384

/* The dashboard page, embedded at build time (dashboard.html via embed_file). */
extern const unsigned char weir_dashboard_html[];
extern const unsigned int weir_dashboard_html_len;

struct SrvHttp {
    struct MHD_Daemon *d;
    Engine *e;
    HttpConfig cfg;
    char *host;
    char *sql_conninfo;
    int port;
    atomic_bool stopping;
    atomic_int n_streams;
    atomic_int n_open;        /* connections MHD holds (notify_connection) */
    atomic_long n_refused;    /* answered 503/400/408 by the door */
    HttpDoor *door;
    /* What /metrics, /api/status and /api/views last read under the engine
     * lock: served when the lock is busy past ENGINE_WAIT_MS (a long ad hoc
     * query, DDL, a backfill), so monitoring never waits behind them. */
    pthread_mutex_t cache_mu;
    Buf cache[4];
    int64_t cache_at_us[4];
    char version[32];
};

enum { CACHE_METRICS, CACHE_STATUS, CACHE_VIEWS, CACHE_READY, N_CACHES };
#define ENGINE_WAIT_MS 1000 /* long enough for a checkpoint's hand-off under load (ASan) */

/* Per request: the body being read. */
typedef struct Req {
    Buf body;
    bool too_large;
} Req;

/* ---- JSON ----------------------------------------------------------------------- */

static void json_str(Buf *b, const char *s, int len)
{
    if (len < 0)
        len = (int)strlen(s);
    buf_putc(b, '"');
    for (int i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        switch (ch) {
        case '"': buf_puts(b, "\\\""); break;
        case '\\': buf_puts(b, "\\\\"); break;
        case '\n': buf_puts(b, "\\n"); break;
        case '\r': buf_puts(b, "\\r"); break;
        case '\t': buf_puts(b, "\\t"); break;
        default:
            if (ch < 0x20 || ch == 0x7f)
                buf_printf(b, "\\u%04x", ch);
            else
                buf_putc(b, (char)ch);
        }
    }
    buf_putc(b, '"');
}

/* A value in text form as JSON: numbers and booleans unquoted, NULL as
 * null, everything else (timestamps, intervals, text) as a string. */
static void json_value(Buf *b, TypeId t, const char *v, int len)
{
    if (!v) {
        buf_puts(b, "null");
        return;
    }
    if (len < 0)
        len = (int)strlen(v);
    if (t == TYPE_BOOL) {
        buf_puts(b, len > 0 && (v[0] == 't' || v[0] == 'T') ? "true" : "false");
        return;
    }
    if (type_is_numeric(t) && len > 0) {
        /* NaN and Infinity are no JSON numbers. */
        bool ok = true;
        for (int i = 0; i < len && ok; i++)
            ok = strchr("0123456789+-.eE", v[i]) != NULL;
        if (ok) {
            buf_append(b, v, (size_t)len);
            return;
        }
    }
    json_str(b, v, len);
}

static void json_columns(Buf *b, const SubSchema *sc)
{
    buf_puts(b, "[");
    for (int i = 0; i < sc->n_cols; i++) {
        buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        json_str(b, sc->names[i], -1);
        buf_puts(b, ",\"type\":");
        json_str(b, type_name(sc->types[i]), -1);
        buf_puts(b, "}");
    }
    buf_puts(b, "]");
}

static void json_row(Buf *b, const SubSchema *sc, int n, const char *const *vals, const int *lens)
{
    buf_putc(b, '[');
    for (int i = 0; i < n; i++) {
        if (i)
            buf_putc(b, ',');
        json_value(b, i < sc->n_cols ? sc->types[i] : TYPE_TEXT, vals[i], lens ? lens[i] : -1);
    }
    buf_putc(b, ']');
}

/* ---- responses ------------------------------------------------------------------- */

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, const char *type, Buf *body)
{
    size_t len = body->len;
    char *data = buf_take(body);
    struct MHD_Response *r = MHD_create_response_from_buffer(len, data ? data : xstrdup(""), MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result respond_json(struct MHD_Connection *c, unsigned status, Buf *body)
{
    return respond(c, status, "application/json; charset=utf-8", body);
}

static enum MHD_Result respond_error(struct MHD_Connection *c, unsigned status, const char *sqlstate,
                                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static enum MHD_Result respond_error(struct MHD_Connection *c, unsigned status, const char *sqlstate,
                                     const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    Buf b = BUF_INIT;
    buf_puts(&b, "{\"error\":{");
    if (sqlstate) {
        buf_puts(&b, "\"sqlstate\":");
        json_str(&b, sqlstate, -1);
        buf_putc(&b, ',');
    }
    buf_puts(&b, "\"message\":");
    json_str(&b, msg, -1);
    buf_puts(&b, "}}\n");
    return respond_json(c, status, &b);
}

/* ---- /metrics --------------------------------------------------------------------- */

static void prom_label(Buf *b, const char *v)
{
    buf_putc(b, '"');
    for (const char *p = v ? v : ""; *p; p++) {
        if (*p == '\\' || *p == '"')
            buf_putc(b, '\\');
        if (*p == '\n') {
            buf_puts(b, "\\n");
            continue;
        }
        buf_putc(b, *p);
    }
    buf_putc(b, '"');
}

static void prom_head(Buf *b, const char *name, const char *type, const char *help)
{
    buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One metric family over the views: the value of field `what` per view. */
enum { VM_RECORDS, VM_BAD, VM_LATE, VM_EVAL, VM_GAPS, VM_CHANGES, VM_WATERMARK, VM_RUNNING, VM_FAILED };

static void view_family(Buf *b, Engine *e, const RtStats *st, int what, const char *name, const char *type,
                        const char *help)
{
    prom_head(b, name, type, help);
    int k = 0;
    CAT_FOREACH(e->cat, CAT_KINDS(CAT_VIEW), o) {
        const RtStats *s = &st[k++];
        char val[64];
        switch (what) {
        case VM_RECORDS: snprintf(val, sizeof val, "%llu", (unsigned long long)s->records_in); break;
        case VM_BAD: snprintf(val, sizeof val, "%llu", (unsigned long long)s->bad_records); break;
        case VM_LATE: snprintf(val, sizeof val, "%llu", (unsigned long long)s->late_rows); break;
        case VM_EVAL: snprintf(val, sizeof val, "%llu", (unsigned long long)s->eval_errors); break;
        case VM_GAPS: snprintf(val, sizeof val, "%llu", (unsigned long long)s->offset_gaps); break;
        case VM_CHANGES: snprintf(val, sizeof val, "%llu", (unsigned long long)s->rows_out); break;
        case VM_RUNNING: snprintf(val, sizeof val, "%d", o->flow.df != NULL); break;
        case VM_FAILED: snprintf(val, sizeof val, "%d", !o->flow.df && o->flow.failed); break;
        case VM_WATERMARK:
            if (s->watermark == TS_MINUS_INF)
                continue; /* no watermark yet: no sample */
            snprintf(val, sizeof val, "%.6f", (double)s->watermark / 1e6);
            break;
        }
        buf_printf(b, "%s{view=", name);
        prom_label(b, o->name);
        buf_printf(b, "} %s\n", val);
    }
}

/* Takes the engine lock, waiting at most ENGINE_WAIT_MS. */
static bool engine_lock_briefly(Engine *e)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += (long)ENGINE_WAIT_MS * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    return pthread_mutex_timedlock(&e->lock, &until) == 0;
}

static void cache_put(SrvHttp *h, int which, const Buf *b)
{
    pthread_mutex_lock(&h->cache_mu);
    buf_reset(&h->cache[which]);
    buf_append(&h->cache[which], b->data ? b->data : "", b->len);
    h->cache_at_us[which] = clock_wall_us();
    pthread_mutex_unlock(&h->cache_mu);
}

/* Copies the cached text into b; returns its age in µs, or -1 if none yet. */
static int64_t cache_get(SrvHttp *h, int which, Buf *b)
{
    pthread_mutex_lock(&h->cache_mu);
    int64_t age = -1;
    if (h->cache_at_us[which]) {
        buf_append(b, h->cache[which].data ? h->cache[which].data : "", h->cache[which].len);
        age = clock_wall_us() - h->cache_at_us[which];
    }
    pthread_mutex_unlock(&h->cache_mu);
    return age;
}

static enum MHD_Result engine_busy(struct MHD_Connection *c)
{
    return respond_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, SQLSTATE_LOCK_NOT_AVAILABLE,
                         "the engine is busy (a long statement holds it) and nothing was read before; retry");
}

/* Prometheus's standard process_* metrics, from /proc (no engine lock). */
static void process_metrics(Buf *b)
{
    long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    FILE *f = fopen("/proc/self/stat", "r");
    unsigned long long utime = 0, stime = 0, start = 0, vsize = 0;
    long rss = 0, threads = 0;
    if (f) {
        char line[1024];
        if (fgets(line, sizeof line, f)) {
            /* Fields after the command name, which may hold spaces: from the last ')'. */
            const char *p = strrchr(line, ')');
            if (p && sscanf(p + 2,
                            "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %ld %*d %llu "
                            "%llu %ld",
                            &utime, &stime, &threads, &start, &vsize, &rss) != 6)
                utime = stime = start = vsize = 0, rss = threads = 0;
        }
        fclose(f);
    }
    double boot = 0;
    f = fopen("/proc/stat", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "btime %lf", &boot) == 1)
                break;
        fclose(f);
    }
    int fds = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        for (struct dirent *de; (de = readdir(d));)
            fds += de->d_name[0] != '.';
        closedir(d);
        fds--; /* the directory's own descriptor */
    }
    prom_head(b, "process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.");
    buf_printf(b, "process_cpu_seconds_total %.2f\n", tick > 0 ? (double)(utime + stime) / (double)tick : 0.0);
    prom_head(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    buf_printf(b, "process_resident_memory_bytes %lld\n", (long long)rss * page);
    prom_head(b, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
    buf_printf(b, "process_virtual_memory_bytes %llu\n", vsize);
    prom_head(b, "process_open_fds", "gauge", "Open file descriptors.");
    buf_printf(b, "process_open_fds %d\n", fds);
    prom_head(b, "process_threads", "gauge", "Threads of the process.");
    buf_printf(b, "process_threads %ld\n", threads);
    prom_head(b, "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch, in seconds.");
    buf_printf(b, "process_start_time_seconds %.2f\n", tick > 0 ? boot + (double)start / (double)tick : 0.0);
}

/* ---- /healthz, /readyz -------------------------------------------------------------- */

/* Ready: every view and table is running (none stopped by an error, none
 * waiting to start) and, in a cluster, the node reaches Kafka. The body
 * lists what is not. A busy engine answers what it last found. */
static enum MHD_Result get_ready(SrvHttp *h, struct MHD_Connection *c)
{
    Engine *e = h->e;
    Buf b = BUF_INIT;
    if (!engine_lock_briefly(e)) {
        if (cache_get(h, CACHE_READY, &b) < 0) {
            buf_free(&b);
            return engine_busy(c);
        }
        bool ok = strstr(b.data, "\"ready\": true") != NULL;
        return respond_json(c, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, &b);
    }
    Buf why = BUF_INIT;
    int n = 0;
    CAT_FOREACH(e->cat, CAT_KINDS(CAT_VIEW) | CAT_KINDS(CAT_TABLE), o) {
        if (o->flow.df)
            continue;
        char msg[1024];
        snprintf(msg, sizeof msg, "%s %s is not running%s%s", o->kind == CAT_VIEW ? "view" : "table", o->name,
                 o->flow.stop_error[0] ? ": " : "", o->flow.stop_error);
        buf_puts(&why, n++ ? ", " : "");
        json_str(&why, msg, -1);
    }
    if (e->cluster && cluster_cut_off(e->cluster, NULL)) {
        buf_puts(&why, n++ ? ", " : "");
        json_str(&why, "this node is cut off from the cluster's Kafka", -1);
    }
    pthread_mutex_unlock(&e->lock);
    buf_printf(&b, "{\"ready\": %s, \"not_ready\": [%s]}\n", n ? "false" : "true", why.data ? why.data : "");
    buf_free(&why);
    cache_put(h, CACHE_READY, &b);
    return respond_json(c, n ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK, &b);
}

static enum MHD_Result get_metrics(SrvHttp *h, struct MHD_Connection *c)
{
    Engine *e = h->e;
    Buf b = BUF_INIT;
    int64_t stale = -1;
    if (!engine_lock_briefly(e)) {
        stale = cache_get(h, CACHE_METRICS, &b);
        if (stale < 0) {
            buf_free(&b);
            return engine_busy(c);
        }
        goto process;
    }
    int nv = 0;
    CAT_FOREACH(e->cat, CAT_KINDS(CAT_VIEW), o)
        nv++;
    RtStats *st = xcalloc((size_t)(nv ? nv : 1), sizeof *st);
    int k = 0;
    CAT_FOREACH(e->cat, CAT_KINDS(CAT_VIEW), o) {
        st[k].watermark = TS_MINUS_INF;
        if (o->flow.df)
            rt_dataflow_stats(o->flow.df, &st[k]);
        k++;
    }
    view_family(&b, e, st, VM_RUNNING, "weir_view_running", "gauge", "1 while the view's dataflow runs.");
    view_family(&b, e, st, VM_FAILED, "weir_view_failed", "gauge",
                "1 while the view waits for ALTER MATERIALIZED VIEW ... RESUME (a bad record under on_error = 'fail', "
                "or its topic was deleted or shrunk).");
    view_family(&b, e, st, VM_RECORDS, "weir_view_records_in_total", "counter",
                "Connector records read by the view's sources since start.");
    view_family(&b, e, st, VM_BAD, "weir_view_bad_records_total", "counter",
                "Records skipped as undecodable since start.");
    view_family(&b, e, st, VM_LATE, "weir_view_late_rows_total", "counter",
                "Rows dropped as late by window operators since start.");
    view_family(&b, e, st, VM_EVAL, "weir_view_eval_errors_total", "counter",
                "Rows dropped by expression errors since start.");
    view_family(&b, e, st, VM_GAPS, "weir_view_offset_gaps_total", "counter",
                "Kafka offset ranges deleted before the view read them and skipped (on_offset_gap = 'skip') since start.");
    view_family(&b, e, st, VM_CHANGES, "weir_view_changes_total", "counter",
                "Changes applied to the view since start.");
    view_family(&b, e, st, VM_WATERMARK, "weir_view_watermark_seconds", "gauge",
                "The view's source watermark, seconds since the Unix epoch (no sample before the first).");
    free(st);

    int ns = 0;
    CAT_FOREACH(e->cat, CAT_KINDS(CAT_SINK), o)
        ns++;
    RtSinkStatus *ss = xcalloc((size_t)(ns ? ns : 1), sizeof *ss);
    CatObj **so = xcalloc((size_t)(ns ? ns : 1), sizeof *so);
    k = 0;
    CAT_FOREACH(e->cat, CAT_KINDS(CAT_SINK), o) {
        so[k] = o;
        if (o->sink.rt)
            rt_sink_status(o->sink.rt, &ss[k]);
        else
            strcpy(ss[k].state, "stopped");
        k++;
    }
    static const struct {
        const char *name, *type, *help;
    } sink_fams[] = {
        {"weir_sink_delivered_epoch", "gauge", "The last epoch the sink's target has."},
        {"weir_sink_pending_epochs", "gauge", "Epochs sealed or committed, not yet delivered."},
        {"weir_sink_changes_delivered_total", "counter", "Changes delivered since start."},
        {"weir_sink_state", "gauge", "1 for the sink's current state (starting, running, retrying, unreachable, stopped)."},
        {"weir_sink_rows_rejected_total", "counter",
         "Rows the target refused since start, kept in its weir_sink_rejects table (on_error = 'skip')."},
    };
    for (int f = 0; f < 5; f++) {
        prom_head(&b, sink_fams[f].name, sink_fams[f].type, sink_fams[f].help);
        for (int k = 0; k < ns; k++) {
            buf_printf(&b, "%s{sink=", sink_fams[f].name);
            prom_label(&b, so[k]->name);
            if (f == 3) {
                buf_puts(&b, ",state=");
                prom_label(&b, ss[k].state);
                buf_puts(&b, "} 1\n");
                continue;
            }
            unsigned long long v = f == 0   ? ss[k].delivered_epoch
                                   : f == 1 ? (unsigned long long)ss[k].pending_epochs
                                   : f == 2 ? ss[k].rows_delivered
                                            : ss[k].rows_rejected;
            buf_printf(&b, "} %llu\n", v);
        }
    }
    free(ss);
    free(so);

    const CkptRecord *last = e->n_history ? &e->history[(e->n_history - 1) % CKPT_HISTORY] : NULL;
    prom_head(&b, "weir_checkpoints_total", "counter", "Checkpoints taken since start.");
    buf_printf(&b, "weir_checkpoints_total %llu\n", (unsigned long long)e->checkpoints);
    prom_head(&b, "weir_checkpoint_epoch", "gauge", "The last committed epoch.");
    buf_printf(&b, "weir_checkpoint_epoch %llu\n", (unsigned long long)e->epoch);
    prom_head(&b, "weir_checkpoint_last_duration_seconds", "gauge", "Duration of the last checkpoint.");
    buf_printf(&b, "weir_checkpoint_last_duration_seconds %.6f\n", last ? (double)last->duration_us / 1e6 : 0.0);
    prom_head(&b, "weir_checkpoint_last_bytes", "gauge", "Bytes written by the last checkpoint's commit.");
    buf_printf(&b, "weir_checkpoint_last_bytes %llu\n", last ? (unsigned long long)last->bytes : 0ULL);
    prom_head(&b, "weir_checkpoint_last_rows", "gauge", "State rows written by the last checkpoint.");
    buf_printf(&b, "weir_checkpoint_last_rows %llu\n", last ? (unsigned long long)last->rows : 0ULL);
    prom_head(&b, "weir_subscriptions", "gauge", "Open changefeeds (SUBSCRIBE and SSE streams).");
    buf_printf(&b, "weir_subscriptions %d\n", e->n_subs);
    if (e->cluster) {
        ClusterNode *nodes;
        int64_t end = 0, now = clock_wall_us();
        int n = cluster_nodes(e->cluster, &nodes, &end);
        int alive = 0;
        for (int i = 0; i < n; i++)
            alive += nodes[i].self ||
                     (strcmp(nodes[i].state, "stopped") != 0 && now - nodes[i].sent_us < (int64_t)CLUSTER_GONE_MS * 1000);
        prom_head(&b, "weir_cluster_connected", "gauge",
                  "1 while this node reaches the cluster's Kafka (its heartbeats are delivered); 0 when cut off.");
        buf_printf(&b, "weir_cluster_connected %d\n", !cluster_cut_off(e->cluster, NULL));
        prom_head(&b, "weir_cluster_nodes_alive", "gauge", "Nodes of the cluster with a heartbeat in the last 10 s.");
        buf_printf(&b, "weir_cluster_nodes_alive %d\n", alive);
        prom_head(&b, "weir_cluster_catalog_lag", "gauge",
                  "Catalog topic records this node has not applied yet.");
        buf_printf(&b, "weir_cluster_catalog_lag %lld\n", (long long)(end - nodes[0].catalog_next));
        uint64_t mine = cluster_catalog_digest(e);
        int disagree = 0;
        for (int i = 1; i < n; i++)
            disagree += nodes[i].catalog_next == e->catalog_next && nodes[i].catalog_digest != mine &&
                        now - nodes[i].sent_us < (int64_t)CLUSTER_GONE_MS * 1000;
        prom_head(&b, "weir_cluster_catalog_disagreements", "gauge",
                  "Live nodes at this node's catalog position whose catalog differs (a statement failed on one "
                  "of them for a reason of its own; docs/cluster.md).");
        buf_printf(&b, "weir_cluster_catalog_disagreements %d\n", disagree);
        RtGroupStats gs;
        if (cluster_work_stats(e->cluster, &gs)) {
            prom_head(&b, "weir_cluster_work_partitions", "gauge",
                      "Partitions this node holds in the cluster's work group (weir_cluster_assignment).");
            buf_printf(&b, "weir_cluster_work_partitions %d\n", gs.n_assigned);
            prom_head(&b, "weir_cluster_work_rebalances_total", "counter",
                      "Assignment changes (partitions added or revoked) this node took part in.");
            buf_printf(&b, "weir_cluster_work_rebalances_total %lld\n", (long long)gs.rebalances);
            prom_head(&b, "weir_cluster_work_commit_failures_total", "counter",
                      "Offset commits to the work group the broker refused.");
            buf_printf(&b, "weir_cluster_work_commit_failures_total %lld\n", (long long)gs.commit_failures);
        }
        free(nodes);
    }
    pthread_mutex_unlock(&e->lock);
    cache_put(h, CACHE_METRICS, &b);
process:
    prom_head(&b, "weir_metrics_engine_busy", "gauge",
              "1 when the engine's figures above were read earlier (weir_metrics_age_seconds ago): a long statement "
              "held the engine past 1 s; the process figures below are current.");
    buf_printf(&b, "weir_metrics_engine_busy %d\n", stale >= 0);
    prom_head(&b, "weir_metrics_age_seconds", "gauge", "Age of the engine's figures in this answer.");
    buf_printf(&b, "weir_metrics_age_seconds %.3f\n", stale >= 0 ? (double)stale / 1e6 : 0.0);
    prom_head(&b, "weir_build_info", "gauge", "Always 1; the version of this weir in its label.");
    buf_printf(&b, "weir_build_info{version=\"%s\"} 1\n", h->version);
    process_metrics(&b);
    prom_head(&b, "weir_pgwire_connections", "gauge", "Open Postgres protocol sessions.");
    buf_printf(&b, "weir_pgwire_connections %d\n", atomic_load(&e->n_sessions));
    prom_head(&b, "weir_http_streams", "gauge", "Open Server-Sent Events streams.");
    buf_printf(&b, "weir_http_streams %d\n", atomic_load(&h->n_streams));
    prom_head(&b, "weir_http_connections", "gauge", "Open HTTP connections past their request line.");
    buf_printf(&b, "weir_http_connections %d\n", atomic_load(&h->n_open));
    prom_head(&b, "weir_http_refused_total", "counter",
              "HTTP connections answered 503 (full), 400 (malformed request line) or 408 (no request line in time).");
    buf_printf(&b, "weir_http_refused_total %ld\n", atomic_load(&h->n_refused));
    return respond(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", &b);
}

/* ---- /api/status, /api/views ------------------------------------------------------- */

static void json_kv_u64(Buf *b, const char *k, uint64_t v) { buf_printf(b, ",\"%s\":%llu", k, (unsigned long long)v); }

static void json_ts(Buf *b, const char *k, int64_t ts)
{
    buf_printf(b, ",\"%s\":", k);
    if (ts == TS_MINUS_INF) {
        buf_puts(b, "null");
        return;
    }
    Value v = value_int(TYPE_TIMESTAMP, ts);
    Buf t = BUF_INIT;
    value_to_text(&v, &t);
    json_str(b, t.data ? t.data : "", (int)t.len);
    buf_free(&t);
}

static void json_rel_columns(Buf *b, const CatRelation *r)
{
    buf_puts(b, ",\"columns\":[");
    int n = 0;
    for (int i = 0; i < r->n_cols; i++) {
        if (r->col_hidden && r->col_hidden[i])
            continue;
        buf_puts(b, n++ ? ",{\"name\":" : "{\"name\":");
        json_str(b, r->col_names[i], -1);
        buf_puts(b, ",\"type\":");
        json_str(b, type_name(r->col_types[i]), -1);
        buf_putc(b, '}');
    }
    buf_putc(b, ']');
}

static enum MHD_Result get_status(SrvHttp *h, struct MHD_Connection *c, bool views_only)
{
    Engine *e = h->e;
    Buf b = BUF_INIT;
    int64_t now = clock_wall_us();
    int which = views_only ? CACHE_VIEWS : CACHE_STATUS;
    if (!engine_lock_briefly(e)) {
        /* Busy: the last answer, marked with its age in a header. */
        int64_t age = cache_get(h, which, &b);
        if (age < 0) {
            buf_free(&b);
            return engine_busy(c);
        }
        size_t len = b.len;
        struct MHD_Response *r = MHD_create_response_from_buffer(len, buf_take(&b), MHD_RESPMEM_MUST_FREE);
        char agebuf[32];
        snprintf(agebuf, sizeof agebuf, "%.3f", (double)age / 1e6);
        MHD_add_response_header(r, "Content-Type", "application/json; charset=utf-8");
        MHD_add_response_header(r, "Cache-Control", "no-store");
        MHD_add_response_header(r, "X-Weir-Stale-Seconds", agebuf);
        enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return rc;
    }
    if (!views_only) {
        const CkptRecord *last = e->n_history ? &e->history[(e->n_history - 1) % CKPT_HISTORY] : NULL;
        buf_printf(&b, "{\"epoch\":%llu,\"now\":", (unsigned long long)e->epoch);
        Value v = value_int(TYPE_TIMESTAMP, now);
        Buf t = BUF_INIT;
        value_to_text(&v, &t);
        json_str(&b, t.data, (int)t.len);
        buf_free(&t);
        buf_printf(&b, ",\"checkpoints\":{\"count\":%llu", (unsigned long long)e->checkpoints);
        if (last)
            buf_printf(&b, ",\"last_epoch\":%llu,\"last_duration_ms\":%.3f,\"last_bytes\":%llu",
                       (unsigned long long)last->epoch, (double)last->duration_us / 1000.0,
                       (unsigned long long)last->bytes);
        buf_puts(&b, ",\"last_error\":");
        if (e->last_checkpoint_error[0])
            json_str(&b, e->last_checkpoint_error, -1);
        else
            buf_puts(&b, "null");
        buf_printf(&b, ",\"failing\":%s,\"early\":%llu},\"state\":{\"dirty_bytes\":%llu,\"limit\":%llu,"
                   "\"paused\":%s}", e->ck_failing ? "true" : "false", (unsigned long long)e->early_checkpoints,
                   (unsigned long long)e->state_dirty, (unsigned long long)e->state_limit,
                   e->paused ? "true" : "false");
        buf_printf(&b, ",\"pgwire_connections\":%d,\"subscriptions\":%d,\"sources\":[",
                   atomic_load(&e->n_sessions), e->n_subs);
        int n = 0;
        CAT_FOREACH(e->cat, CAT_ANY, o) {
            if (o->kind != CAT_SOURCE && o->kind != CAT_TABLE)
                continue;
            buf_puts(&b, n++ ? ",{\"name\":" : "{\"name\":");
            json_str(&b, o->name, -1);
            const char *topic = cat_option(&o->rel, "topic");
            buf_puts(&b, ",\"topic\":");
            if (topic)
                json_str(&b, topic, -1);
            else
                buf_puts(&b, "null");
            json_rel_columns(&b, &o->rel);
            buf_putc(&b, '}');
        }
        buf_puts(&b, "],\"views\":");
    }
    buf_putc(&b, '[');
    int n = 0;
    CAT_FOREACH(e->cat, CAT_KINDS(CAT_VIEW), o) {
        RtStats st = {0};
        st.watermark = TS_MINUS_INF;
        if (o->flow.df)
            rt_dataflow_stats(o->flow.df, &st);
        buf_puts(&b, n++ ? ",{\"name\":" : "{\"name\":");
        json_str(&b, o->name, -1);
        buf_printf(&b, ",\"running\":%s", o->flow.df ? "true" : "false");
        json_rel_columns(&b, &o->rel);
        if (!views_only) {
            json_kv_u64(&b, "records_in", st.records_in);
            json_kv_u64(&b, "bad_records", st.bad_records);
            json_kv_u64(&b, "late_rows", st.late_rows);
            json_kv_u64(&b, "eval_errors", st.eval_errors);
            json_kv_u64(&b, "changes", st.rows_out);
            json_ts(&b, "watermark", st.watermark);
            if (st.watermark != TS_MINUS_INF)
                buf_printf(&b, ",\"lag_ms\":%lld", (long long)((now - st.watermark) / 1000));
            buf_puts(&b, ",\"last_error\":");
            if (st.last_error[0])
                json_str(&b, st.last_error, -1);
            else
                buf_puts(&b, "null");
        }
        buf_putc(&b, '}');
    }
    buf_putc(&b, ']');
    if (!views_only) {
        buf_puts(&b, ",\"sinks\":[");
        n = 0;
        CAT_FOREACH(e->cat, CAT_ANY, o) {
            if (o->kind != CAT_SINK)
                continue;
            RtSinkStatus st = {0};
            if (o->sink.rt)
                rt_sink_status(o->sink.rt, &st);
            else
                strcpy(st.state, "stopped");
            buf_puts(&b, n++ ? ",{\"name\":" : "{\"name\":");
            json_str(&b, o->name, -1);
            buf_puts(&b, ",\"view\":");
            json_str(&b, o->sink.from ? o->sink.from->name : "", -1);
            buf_puts(&b, ",\"connector\":");
            const char *conn = rt_sink_option(&o->sink.spec, "connector");
            json_str(&b, conn ? conn : "", -1);
            buf_puts(&b, ",\"state\":");
            json_str(&b, st.state, -1);
            json_kv_u64(&b, "delivered_epoch", st.delivered_epoch);
            buf_printf(&b, ",\"pending_epochs\":%d", st.pending_epochs);
            json_kv_u64(&b, "changes_delivered", st.rows_delivered);
            buf_puts(&b, ",\"last_error\":");
            if (st.last_error[0])
                json_str(&b, st.last_error, -1);
            else
                buf_puts(&b, "null");
            buf_putc(&b, '}');
        }
        buf_puts(&b, "]}");
    }
    pthread_mutex_unlock(&e->lock);
    buf_putc(&b, '\n');
    cache_put(h, which, &b);
    return respond_json(c, MHD_HTTP_OK, &b);
}

/* ---- /api/views/<v> ---------------------------------------------------------------- */

typedef struct SnapJson {
    Buf *b;
    const SubSchema *sc;
    long n;
} SnapJson;

static int snap_json_row(void *arg, int n, const char *const *vals, const int *lens)
{
    SnapJson *s = arg;
    if (s->n++)
        buf_putc(s->b, ',');
    json_row(s->b, s->sc, n, vals, lens);
    return 0;
}

static CatObj *find_view(Engine *e, const char *name, struct MHD_Connection *c, enum MHD_Result *res)
{
    CatObj *v = cat_find(e->cat, name);
    if (!v) {
        *res = respond_error(c, MHD_HTTP_NOT_FOUND, SQLSTATE_UNDEFINED_TABLE, "relation \"%s\" does not exist", name);
        return NULL;
    }
    if (v->kind != CAT_VIEW && v->kind != CAT_TABLE) {
        *res = respond_error(c, MHD_HTTP_BAD_REQUEST, SQLSTATE_WRONG_OBJECT_TYPE,
                             "\"%s\" is not a materialized view or table", name);
        return NULL;
    }
    return v;
}

static enum MHD_Result get_view(SrvHttp *h, struct MHD_Connection *c, const char *name)
{
    Engine *e = h->e;
    enum MHD_Result res = MHD_NO;
    SubSchema *sc = xcalloc(1, sizeof *sc);
    Buf b = BUF_INIT;
    pthread_mutex_lock(&e->lock);
    CatObj *v = find_view(e, name, c, &res);
    if (v) {
        sub_schema_init(v, sc, NULL);
        buf_puts(&b, "{\"view\":");
        json_str(&b, v->name, -1);
        buf_printf(&b, ",\"epoch\":%llu,\"committed_epoch\":%llu,\"columns\":", (unsigned long long)engine_open_epoch(e),
                   (unsigned long long)e->epoch);
        json_columns(&b, sc);
        buf_puts(&b, ",\"rows\":[");
        SnapJson sj = {&b, sc, 0};
        WError err = {0};
        if (view_snapshot(e, v, snap_json_row, &sj, &err)) {
            buf_free(&b);
            res = respond_error(c, strcmp(err.sqlstate, SQLSTATE_OBJECT_NOT_IN_STATE) == 0 ? MHD_HTTP_SERVICE_UNAVAILABLE
                                                                       : MHD_HTTP_INTERNAL_SERVER_ERROR,
                                err.sqlstate, "%s", err.msg);
            v = NULL;
        } else {
            buf_puts(&b, "]}\n");
        }
    }
    pthread_mutex_unlock(&e->lock);
    free(sc);
    if (v)
        res = respond_json(c, MHD_HTTP_OK, &b);
    return res;
}

/* ---- /api/views/<v>/analyze --------------------------------------------------------- */

/* EXPLAIN (ANALYZE, FORMAT JSON) MATERIALIZED VIEW v (cmd_explain_analyze.c):
 * the same document, for the dashboard and monitoring. 404 no such view, 400
 * not a materialized view, 503 not running. */
static enum MHD_Result get_analyze(SrvHttp *h, struct MHD_Connection *c, const char *name)
{
    Engine *e = h->e;
    Buf b = BUF_INIT;
    WError err = {0};
    pthread_mutex_lock(&e->lock);
    int rc = srv_explain_view(e, name, 0, true, true, &b, &err);
    pthread_mutex_unlock(&e->lock);
    if (rc) {
        buf_free(&b);
        unsigned status = !strcmp(err.sqlstate, SQLSTATE_UNDEFINED_TABLE)        ? MHD_HTTP_NOT_FOUND
                          : !strcmp(err.sqlstate, SQLSTATE_OBJECT_NOT_IN_STATE) ? MHD_HTTP_SERVICE_UNAVAILABLE
                                                                                 : MHD_HTTP_BAD_REQUEST;
        return respond_error(c, status, err.sqlstate, "%s", err.msg);
    }
    buf_putc(&b, '\n');
    return respond_json(c, MHD_HTTP_OK, &b);
}

/* ---- /api/views/<v>/stream: Server-Sent Events --------------------------------------------- */

typedef struct Stream {
    SrvHttp *h;
    Subscription *sub;
    const SubSchema *sc;
    int fd;                   /* the client's socket, polled for a hang-up */
    Buf out;                  /* formatted, not yet handed to MHD */
    size_t off;
    int64_t idle_ms;
    bool in_snapshot;         /* the snapshot event is open (rows still coming) */
    long n_snap_rows;
    bool done;                /* the last event is in out */
} Stream;

static void sse_event(Buf *b, const char *event, const char *id)
{
    if (id)
        buf_printf(b, "id: %s\n", id);
    buf_printf(b, "event: %s\ndata: ", event);
}

/* Formats a batch of events. The snapshot is one `snapshot` event; the
 * changes of one batch one `changes` event; each completed epoch a
 * `progress` event whose id is the epoch. */
static void stream_format(Stream *s, SubEvent *evs)
{
    Buf *b = &s->out;
    bool changes_open = false;
    for (SubEvent *ev = evs; ev; ev = ev->next) {
        if (ev->kind == SUB_ROW && ev->snapshot && s->in_snapshot) {
            if (s->n_snap_rows++)
                buf_putc(b, ',');
            json_row(b, s->sc, ev->n_vals, ev->vals, ev->lens);
            continue;
        }
        if (s->in_snapshot) {
            buf_puts(b, "]}\n\n");
            s->in_snapshot = false;
        }
        if (ev->kind == SUB_ROW) {
            if (!changes_open) {
                sse_event(b, "changes", NULL);
                buf_puts(b, "{\"changes\":[");
                changes_open = true;
            } else {
                buf_putc(b, ',');
            }
            buf_printf(b, "{\"epoch\":%llu,\"diff\":%d,\"row\":", (unsigned long long)ev->epoch, ev->diff);
            json_row(b, s->sc, ev->n_vals, ev->vals, ev->lens);
            buf_putc(b, '}');
            continue;
        }
        if (changes_open) {
            buf_puts(b, "]}\n\n");
            changes_open = false;
        }
        char id[32];
        snprintf(id, sizeof id, "%llu", (unsigned long long)ev->epoch);
        sse_event(b, "progress", id);
        buf_printf(b, "{\"epoch\":%llu}\n\n", (unsigned long long)ev->epoch);
    }
    if (changes_open)
        buf_puts(b, "]}\n\n");
}

static bool client_gone(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {fd, POLLRDHUP, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    Stream *s = cls;
    while (s->off >= s->out.len) {
        buf_reset(&s->out);
        s->off = 0;
        if (s->done || atomic_load(&s->h->stopping) || client_gone(s->fd))
            return MHD_CONTENT_READER_END_OF_STREAM;
        SubEvent *evs;
        WError err = {0};
        if (sub_take(s->sub, SSE_POLL_MS, &evs, &err) < 0) {
            if (s->in_snapshot)
                buf_puts(&s->out, "]}\n\n");
            s->in_snapshot = false;
            sse_event(&s->out, "stream_error", NULL);
            buf_puts(&s->out, "{\"error\":{\"sqlstate\":");
            json_str(&s->out, err.sqlstate, -1);
            buf_puts(&s->out, ",\"message\":");
            json_str(&s->out, err.msg, -1);
            buf_puts(&s->out, "}}\n\n");
            s->done = true;
            break;
        }
        if (evs) {
            s->idle_ms = 0;
            stream_format(s, evs);
            sub_events_free(evs);
        } else if (s->in_snapshot) {
            /* The snapshot rows were all queued when the stream opened: an
             * empty take means there are no more. */
            buf_puts(&s->out, "]}\n\n");
            s->in_snapshot = false;
        } else if ((s->idle_ms += SSE_POLL_MS) >= SSE_HEARTBEAT_MS) {
            s->idle_ms = 0;
            buf_puts(&s->out, ": heartbeat\n\n");
        }
    }
    size_t n = s->out.len - s->off;
    if (n > max)
        n = max;
    memcpy(buf, s->out.data + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    Stream *s = cls;
    Engine *e = s->h->e;
    pthread_mutex_lock(&e->lock);
    sub_close(s->sub);
    pthread_mutex_unlock(&e->lock);
    atomic_fetch_sub(&s->h->n_streams, 1);
    buf_free(&s->out);
    free(s);
}

static bool parse_epoch(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || *s == '-')
        return false;
    *out = v;
    return true;
}

static enum MHD_Result get_stream(SrvHttp *h, struct MHD_Connection *c, const char *name)
{
    Engine *e = h->e;
    if (atomic_fetch_add(&h->n_streams, 1) >= h->cfg.max_streams) {
        atomic_fetch_sub(&h->n_streams, 1);
        return respond_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, SQLSTATE_TOO_MANY_CONNECTIONS, "too many streams (at most %d)",
                             h->cfg.max_streams);
    }
    /* Last-Event-ID on a browser's reconnect; ?last_event_id= for the first
     * connection, which cannot set headers. */
    const char *last_s = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Last-Event-ID");
    if (!last_s)
        last_s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "last_event_id");
    uint64_t last = 0;
    bool have_last = parse_epoch(last_s, &last);
    enum MHD_Result res = MHD_NO;
    Stream *s = xcalloc(1, sizeof *s);
    s->h = h;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    s->fd = ci ? ci->connect_fd : -1;
    pthread_mutex_lock(&e->lock);
    CatObj *v = find_view(e, name, c, &res);
    WError err = {0};
    if (v) {
        /* Resuming without a snapshot is exact when the view still has every
         * change after the client's epoch (its recent changes are kept from its
         * first subscriber on), or when the client has the last committed
         * epoch and the view has not changed since: then nothing was missed
         * and nothing is in flight. Any other id gets a fresh snapshot. */
        RtStats st = {0};
        if (v->flow.df)
            rt_dataflow_stats(v->flow.df, &st);
        WError miss = {0};
        bool resume = have_last && v->flow.df && sub_open_after(e, v, last, &s->sub, &miss) == 0;
        bool unchanged = !resume && have_last && last == e->epoch && v->flow.df && st.rows_out == v->flow.changes_at_commit;
        if (!resume && sub_open(e, v, !unchanged, &s->sub, &err)) {
            res = respond_error(c, strcmp(err.sqlstate, SQLSTATE_OBJECT_NOT_IN_STATE) == 0 ? MHD_HTTP_SERVICE_UNAVAILABLE
                                                                       : MHD_HTTP_INTERNAL_SERVER_ERROR,
                                err.sqlstate, "%s", err.msg);
            v = NULL;
        } else {
            s->sc = sub_schema(s->sub);
            buf_puts(&s->out, "retry: 3000\n\n");
            if (resume || unchanged) {
                char id[32];
                snprintf(id, sizeof id, "%llu", (unsigned long long)last);
                sse_event(&s->out, "resumed", id);
                buf_puts(&s->out, "{\"view\":");
                json_str(&s->out, s->sc->view, -1);
                buf_printf(&s->out, ",\"epoch\":%llu,\"columns\":", (unsigned long long)last);
                json_columns(&s->out, s->sc);
                buf_puts(&s->out, "}\n\n");
            } else {
                sse_event(&s->out, "snapshot", NULL);
                buf_puts(&s->out, "{\"view\":");
                json_str(&s->out, s->sc->view, -1);
                buf_printf(&s->out, ",\"epoch\":%llu,\"resumed\":false", (unsigned long long)s->sc->epoch);
                if (have_last)
                    buf_printf(&s->out,
                               ",\"note\":\"epoch %llu cannot be replayed (the last committed epoch is %llu"
                               " and changes may be missing); this is a fresh snapshot\"",
                               (unsigned long long)last, (unsigned long long)e->epoch);
                buf_puts(&s->out, ",\"columns\":");
                json_columns(&s->out, s->sc);
                buf_puts(&s->out, ",\"rows\":[");
                s->in_snapshot = true;
            }
        }
    }
    pthread_mutex_unlock(&e->lock);
    if (!v) {
        atomic_fetch_sub(&h->n_streams, 1);
        buf_free(&s->out);
        free(s);
        return res;
    }
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SSE_BLOCK, stream_read, s,
                                                               stream_free);
    MHD_add_response_header(r, "Content-Type", "text/event-stream; charset=utf-8");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    res = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return res;
}

/* ---- POST /api/sql ------------------------------------------------------------------- */

static void pg_error(Buf *b, const PGresult *res, PGconn *pc)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    const char *pos = res ? PQresultErrorField(res, PG_DIAG_STATEMENT_POSITION) : NULL;
    const char *hint = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_HINT) : NULL;
    buf_puts(b, "\"error\":{\"sqlstate\":");
    json_str(b, state ? state : SQLSTATE_CONNECTION_FAILURE, -1);
    buf_puts(b, ",\"message\":");
    if (msg) {
        json_str(b, msg, -1);
    } else {
        const char *m = PQerrorMessage(pc);
        int len = (int)strlen(m);
        while (len > 0 && m[len - 1] == '\n')
            len--;
        json_str(b, m, len);
    }
    buf_printf(b, ",\"position\":%s", pos ? pos : "null");
    if (hint) {
        buf_puts(b, ",\"hint\":");
        json_str(b, hint, -1);
    }
    buf_putc(b, '}');
}

static TypeId oid_type(Oid oid)
{
    switch (oid) {
    case PG_OID_BOOL: return TYPE_BOOL;
    case PG_OID_INT2: return TYPE_INT2;
    case PG_OID_INT4: return TYPE_INT4;
    case PG_OID_INT8: return TYPE_INT8;
    case PG_OID_FLOAT4: return TYPE_FLOAT4;
    case PG_OID_FLOAT8: return TYPE_FLOAT8;
    default: return TYPE_TEXT;
    }
}

static enum MHD_Result post_sql(SrvHttp *h, struct MHD_Connection *c, Req *req)
{
    if (!h->cfg.enable_sql)
        return respond_error(c, MHD_HTTP_FORBIDDEN, NULL, "POST /api/sql is disabled; start weir with --http-sql");
    if (req->too_large)
        return respond_error(c, MHD_HTTP_CONTENT_TOO_LARGE, SQLSTATE_PROGRAM_LIMIT,
                             "request body over %zu bytes", h->cfg.max_body);
    if (!req->body.len || memchr(req->body.data, 0, req->body.len))
        return respond_error(c, MHD_HTTP_BAD_REQUEST, SQLSTATE_SYNTAX_ERROR,
                             "the body must be SQL text (no NUL bytes, not empty)");
    buf_putc(&req->body, 0);
    PGconn *pc = PQconnectdb(h->sql_conninfo);
    Buf b = BUF_INIT;
    buf_puts(&b, "{\"results\":[");
    unsigned status = MHD_HTTP_OK;
    if (PQstatus(pc) != CONNECTION_OK) {
        buf_puts(&b, "],");
        pg_error(&b, NULL, pc);
        status = MHD_HTTP_SERVICE_UNAVAILABLE;
        goto done;
    }
    if (!PQsendQuery(pc, req->body.data)) {
        buf_puts(&b, "],");
        pg_error(&b, NULL, pc);
        status = MHD_HTTP_SERVICE_UNAVAILABLE;
        goto done;
    }
    int n = 0;
    PGresult *err_res = NULL;
    bool copy = false;
    for (PGresult *r; (r = PQgetResult(pc));) {
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_COPY_OUT) {
            /* SUBSCRIBE never ends by itself: not over this endpoint. */
            copy = true;
            PQclear(r);
            break;
        }
        if (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE) {
            if (!err_res)
                err_res = r;
            else
                PQclear(r);
            continue;
        }
        if (st == PGRES_EMPTY_QUERY) {
            PQclear(r);
            continue;
        }
        buf_puts(&b, n++ ? ",{\"tag\":" : "{\"tag\":");
        json_str(&b, PQcmdStatus(r), -1);
        if (st == PGRES_TUPLES_OK) {
            int nf = PQnfields(r), nt = PQntuples(r);
            SubSchema *sc = xcalloc(1, sizeof *sc);
            sc->n_cols = nf < SUB_MAX_COLS ? nf : SUB_MAX_COLS;
            for (int i = 0; i < sc->n_cols; i++) {
                sc->names[i] = PQfname(r, i);
                sc->types[i] = oid_type(PQftype(r, i));
            }
            buf_puts(&b, ",\"columns\":");
            json_columns(&b, sc);
            buf_puts(&b, ",\"rows\":[");
            for (int t = 0; t < nt; t++) {
                buf_puts(&b, t ? ",[" : "[");
                for (int i = 0; i < sc->n_cols; i++) {
                    if (i)
                        buf_putc(&b, ',');
                    json_value(&b, sc->types[i], PQgetisnull(r, t, i) ? NULL : PQgetvalue(r, t, i),
                               PQgetlength(r, t, i));
                }
                buf_putc(&b, ']');
            }
            buf_putc(&b, ']');
            free(sc);
        }
        buf_putc(&b, '}');
        PQclear(r);
    }
    buf_putc(&b, ']');
    if (copy) {
        buf_puts(&b, ",\"error\":{\"sqlstate\":\"0A000\",\"message\":\"SUBSCRIBE is not supported over "
                     "/api/sql; use GET /api/views/<view>/stream\",\"position\":null}");
        status = MHD_HTTP_BAD_REQUEST;
    } else if (err_res) {
        buf_putc(&b, ',');
        pg_error(&b, err_res, pc);
        status = MHD_HTTP_BAD_REQUEST;
    }
    PQclear(err_res);
done:
    buf_puts(&b, "}\n");
    PQfinish(pc); /* a SUBSCRIBE still streaming sees its client go and ends */
    return respond_json(c, status, &b);
}

/* ---- dispatch ------------------------------------------------------------------------ */

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_size, void **con_cls)
{
    SrvHttp *h = cls;
    Req *req = *con_cls;
    bool post = strcmp(method, "POST") == 0;
    if (!req) {
        req = xcalloc(1, sizeof *req);
        *con_cls = req;
        if (post) {
            /* Refuse an oversized body before reading any of it. */
            const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
            if (cl && strtoull(cl, NULL, 10) > h->cfg.max_body)
                return respond_error(c, MHD_HTTP_CONTENT_TOO_LARGE, SQLSTATE_PROGRAM_LIMIT,
                                     "request body over %zu bytes", h->cfg.max_body);
            return MHD_YES; /* the body comes in the next calls */
        }
    }
    if (post && *upload_size) {
        if (!req->too_large && req->body.len + *upload_size <= h->cfg.max_body)
            buf_append(&req->body, upload_data, *upload_size);
        else
            req->too_large = true;
        *upload_size = 0;
        return MHD_YES;
    }
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    if (strcmp(url, "/api/sql") == 0) {
        if (!post)
            return respond_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, NULL, "use POST for /api/sql");
        return post_sql(h, c, req);
    }
    if (!get)
        return respond_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, NULL, "%s is not allowed on %s", method, url);
    if (strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0) {
        struct MHD_Response *r = MHD_create_response_from_buffer(
            weir_dashboard_html_len, (void *)weir_dashboard_html, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
        MHD_add_response_header(r, "Cache-Control", "no-store");
        enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return rc;
    }
    if (strcmp(url, "/healthz") == 0) {
        Buf b = BUF_INIT;
        buf_puts(&b, "{\"status\": \"ok\"}\n");
        return respond_json(c, MHD_HTTP_OK, &b);
    }
    if (strcmp(url, "/readyz") == 0)
        return get_ready(h, c);
    if (strcmp(url, "/metrics") == 0)
        return get_metrics(h, c);
    if (strcmp(url, "/api/status") == 0)
        return get_status(h, c, false);
    if (strcmp(url, "/api/views") == 0 || strcmp(url, "/api/views/") == 0)
        return get_status(h, c, true);
    if (strncmp(url, "/api/views/", 11) == 0) {
        const char *name = url + 11;
        const char *slash = strchr(name, '/');
        char vname[256];
        size_t len = slash ? (size_t)(slash - name) : strlen(name);
        if (len == 0 || len >= sizeof vname)
            return respond_error(c, MHD_HTTP_NOT_FOUND, NULL, "no such view");
        memcpy(vname, name, len);
        vname[len] = 0;
        if (!slash)
            return get_view(h, c, vname);
        if (strcmp(slash, "/stream") == 0)
            return get_stream(h, c, vname);
        if (strcmp(slash, "/analyze") == 0)
            return get_analyze(h, c, vname);
    }
    return respond_error(c, MHD_HTTP_NOT_FOUND, NULL, "no such endpoint: %s", url);
}

static void request_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    Req *req = *con_cls;
    if (!req)
        return;
    buf_free(&req->body);
    free(req);
    *con_cls = NULL;
}

static void notify_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                              enum MHD_ConnectionNotificationCode code)
{
    (void)c;
    (void)socket_ctx;
    SrvHttp *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        atomic_fetch_add(&h->n_open, 1);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        atomic_fetch_sub(&h->n_open, 1);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    /* libmicrohttpd's messages end in a newline already; wlog_v adds one. */
    char line[WLOG_MAX_LINE];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n')
        line[--n] = 0;
    wlog_warn("http", "%s", line);
}

/* ---- start / stop ------------------------------------------------------------------------- */

int srv_http_start(const HttpConfig *cfg, Engine *e, SrvHttp **out, WError *err)
{
    SrvHttp *h = xcalloc(1, sizeof *h);
    h->e = e;
    pthread_mutex_init(&h->cache_mu, NULL);
    snprintf(h->version, sizeof h->version, "%s", cfg->version ? cfg->version : "unknown");
    h->cfg = *cfg;
    h->host = xstrdup(cfg->host ? cfg->host : "127.0.0.1");
    h->sql_conninfo = xstrdup(cfg->sql_conninfo ? cfg->sql_conninfo : "");
    h->cfg.host = h->host;
    h->cfg.sql_conninfo = h->sql_conninfo;
    if (h->cfg.max_connections <= 0)
        h->cfg.max_connections = DEFAULT_MAX_CONNECTIONS;
    if (h->cfg.max_streams <= 0)
        h->cfg.max_streams = DEFAULT_MAX_STREAMS;
    if (!h->cfg.max_body)
        h->cfg.max_body = DEFAULT_MAX_BODY;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    int gai = getaddrinfo(h->host, port, &hints, &ai);
    if (gai != 0 || !ai) {
        werr(err, SQLSTATE_IO_ERROR, 0, "cannot resolve HTTP address %s: %s", h->host, gai_strerror(gai));
        goto fail;
    }
    /* Our own listening socket: the door (http_door.c) accepts, MHD serves. */
    int lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (lfd >= 0)
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (lfd < 0 || bind(lfd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(lfd, 128) != 0) {
        int saved = errno;
        freeaddrinfo(ai);
        if (lfd >= 0)
            close(lfd);
        werr(err, SQLSTATE_IO_ERROR, 0, "cannot listen for HTTP on %s:%d: %s", h->host, cfg->port, strerror(saved));
        goto fail;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    h->port = cfg->port;
    if (getsockname(lfd, (struct sockaddr *)&bound, &blen) == 0)
        h->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                    : ((struct sockaddr_in *)&bound)->sin_port);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
                     MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
    /* MHD's own limit is one above the door's, so a connection the door let
     * in is never closed unanswered by MHD; the idle timeout frees a slot a
     * kept-alive client no longer uses (an SSE stream writes a heartbeat
     * every SSE_HEARTBEAT_MS, well within it). */
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, h,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)h->cfg.max_connections + 1,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_TIMEOUT_S,
                            MHD_OPTION_NOTIFY_COMPLETED, request_done, h,
                            MHD_OPTION_NOTIFY_CONNECTION, notify_connection, h,
                            MHD_OPTION_END);
    if (!h->d) {
        close(lfd);
        werr(err, SQLSTATE_IO_ERROR, 0, "cannot start the HTTP server on %s:%d: libmicrohttpd refused to start",
             h->host, cfg->port);
        goto fail;
    }
    if (http_door_start(lfd, h->d, h->cfg.max_connections, HTTP_LINE_TIMEOUT_MS, &h->n_open, &h->n_refused,
                        &h->door) != 0) {
        close(lfd);
        MHD_stop_daemon(h->d);
        werr(err, SQLSTATE_IO_ERROR, 0, "cannot start the HTTP listener thread");
        goto fail;
    }
    *out = h;
    return 0;
fail:
    free(h->host);
    free(h->sql_conninfo);
    free(h);
    return -1;
}

int srv_http_port(const SrvHttp *h) { return h ? h->port : 0; }

void srv_http_stop(SrvHttp *h)
{
    if (!h)
        return;
    /* Streams notice within SSE_POLL_MS and end; MHD then joins every thread. */
    atomic_store(&h->stopping, true);
    http_door_stop(h->door);
    MHD_stop_daemon(h->d);
    for (int i = 0; i < N_CACHES; i++)
        buf_free(&h->cache[i]);
    pthread_mutex_destroy(&h->cache_mu);
    free(h->host);
    free(h->sql_conninfo);
    free(h);
}
