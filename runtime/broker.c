/*
 * broker.c: the embedded Kafka broker: librdkafka's mock cluster behind a
 * forwarder on a fixed address (see broker.h for why and what it changes).
 *
 * The forwarder is one thread running a poll() loop over the listening
 * socket, a wake-up pipe and every proxied connection. Bytes are cut into
 * Kafka frames (a 4-byte size, then the payload); each request is recorded
 * (correlation id, API key, version) so its response can be recognised and,
 * for the few APIs in question, rewritten. A side is read only while the
 * other side's output backlog is under FWD_OUT_LIMIT, so a slow reader slows
 * its writer. The wire decoding lives in this file only.
 */
#include "broker.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "arena.h"
#include "avro_codec.h"
#include "buf.h"
#include "log.h"

#define FWD_READ_CHUNK (64 * 1024)         /* bytes per recv() */
#define FWD_OUT_LIMIT (4 * 1024 * 1024)    /* stop reading a side while the other lags this much */
#define FWD_MAX_FRAME (256 * 1024 * 1024)  /* larger frames close the connection */
#define MAX_TOPIC_LEN 249                  /* Kafka's limit on topic names */

/* Bytes written to the forwarder's wake-up pipe. */
enum { WAKE_STOP = 1, WAKE_DROP = 2 };

/* Kafka API keys the forwarder looks into. */
enum { API_PRODUCE = 0, API_METADATA = 3, API_FIND_COORDINATOR = 10, API_JOIN_GROUP = 11,
       API_LEAVE_GROUP = 13, API_API_VERSIONS = 18, API_CREATE_TOPICS = 19 };
#define JOIN_GROUP_STATIC_VERSION 5 /* the one non-flexible version with group.instance.id */
#define LEAVE_GROUP_MAX_VERSION 3   /* the last non-flexible version */
/* Static members the forwarder remembers (group, group.instance.id ->
 * member id): one per node of every cluster that used this broker. Past
 * this the oldest is forgotten; that member then rejoins as a new member,
 * as on a mock without the emulation. */
#define STATIC_MEMBERS_MAX 4096
#define CREATE_TOPICS_MAX_VERSION 4 /* the last non-flexible version */
#define PRODUCE_MAX_VERSION 8       /* the last non-flexible version */

/* Kafka error codes the forwarder answers with. */
enum { KERR_MESSAGE_TOO_LARGE = 10, KERR_NOT_ENOUGH_REPLICAS = 19, KERR_INVALID_TOPIC = 17, KERR_TOPIC_EXISTS = 36, KERR_INVALID_PARTITIONS = 37,
       KERR_INVALID_REPLICATION = 38 };

/* A request in flight on one connection, in arrival order: either forwarded
 * to the mock (the answer will come from there) or answered by the forwarder
 * itself (local, resp holds the whole response frame). Responses go back to
 * the client in request order, as Kafka clients expect. */
typedef struct Pending {
    int32_t corr;   /* correlation id */
    int16_t key;    /* API key */
    int16_t ver;    /* API version */
    bool local;
    Buf resp;       /* local only */
    char *group;    /* JoinGroup v5 with a group.instance.id: the group... */
    char *instance; /* ...and the instance id, to learn the member id from the answer */
} Pending;

/* A static member (group.instance.id) and the member id the mock gave it. */
typedef struct StaticMember {
    char *group;
    char *instance;
    char *member;
    bool joining;   /* a JoinGroup of this member was forwarded and not answered yet */
} StaticMember;

/* A client connection and its twin to the mock. fd[0] is the client, fd[1]
 * the mock; in[i] holds bytes read from fd[i] that do not yet make a whole
 * frame, out[i] bytes waiting to be written to fd[i]. */
typedef struct FwdConn {
    int fd[2];
    Buf in[2];
    Buf out[2];
    size_t out_off[2];        /* bytes of out[i] already written */
    bool eof[2];              /* fd[i] reached end of stream */
    char adv_host[64];        /* our address as this client reached it */
    Pending *pend;            /* n_pend requests in flight, oldest first */
    int n_pend;
    int cap_pend;
} FwdConn;

struct RtBroker {
    rd_kafka_t *rk;                   /* owns the mock cluster's handle */
    rd_kafka_mock_cluster_t *mcluster;
    int partitions;                   /* for --topic and auto-created topics */
    atomic_long max_msg;              /* largest record batch accepted, bytes */
    int port;                         /* the forwarder's port, advertised to clients */
    char mock_addr[64];               /* "127.0.0.1:PORT" of the mock */
    struct sockaddr_storage mock_sa;  /* resolved mock_addr */
    socklen_t mock_sa_len;
    int listen_fd;
    int wake[2];                      /* pipe: WAKE_STOP ends the loop, WAKE_DROP drops connections */
    pthread_t thread;
    bool thread_started;
    FwdConn **conns;                  /* owned; n_conns in use */
    int n_conns;
    int cap_conns;
    atomic_bool static_members;       /* emulate static membership (--no-static-members turns it off) */
    StaticMember *statics;            /* forwarder thread only; oldest first */
    int n_statics;
};

/* librdkafka logs only errors, prefixed like every weir message. */
static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    if (level <= LOG_ERR)
        wlog_error("kafka", "%s: %s", fac, buf);
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Splits "HOST:PORT" or "[HOST]:PORT" into host (may be "") and port. */
static int split_hostport(const char *s, char *host, size_t host_len, char *port,
                          size_t port_len)
{
    const char *colon, *h = s, *hend;
    if (s[0] == '[') {
        hend = strchr(s, ']');
        if (!hend || hend[1] != ':')
            return -1;
        h = s + 1;
        colon = hend + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon)
            return -1;
        hend = colon;
    }
    if ((size_t)(hend - h) >= host_len || strlen(colon + 1) >= port_len ||
        colon[1] == '\0' || strspn(colon + 1, "0123456789") != strlen(colon + 1))
        return -1;
    memcpy(host, h, (size_t)(hend - h));
    host[hend - h] = '\0';
    strcpy(port, colon + 1);
    return 0;
}

/* Binds and listens on listen; on success fills the bound port. */
static int open_listener(const char *listen_addr, int *fd_out, int *port_out, char *addr_out,
                         size_t addr_len, WError *err)
{
    char host[256], port[16];
    struct addrinfo hints = {0}, *res = NULL, *ai;
    int fd = -1, rc, saved = 0;

    if (split_hostport(listen_addr, host, sizeof host, port, sizeof port) < 0 ||
        atoi(port) > 65535)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                    "invalid listen address \"%s\": want HOST:PORT", listen_addr);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (rc != 0)
        return werr(err, SQLSTATE_IO_ERROR, 0, "could not resolve \"%s\": %s", host,
                    gai_strerror(rc));
    for (ai = res; ai; ai = ai->ai_next) {
        int one = 1;
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 128) == 0)
            break;
        saved = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        werr(err, SQLSTATE_IO_ERROR, 0, "could not listen on %s: %s", listen_addr,
             strerror(saved));
        if (saved == EADDRINUSE)
            werr_hint(err, "Another broker may already be running there; choose "
                           "another port with --listen HOST:PORT (port 0 picks a free one).");
        return -1;
    }

    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int bound_port = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        bound_port = ss.ss_family == AF_INET6
                         ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                         : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (strchr(host, ':'))
        snprintf(addr_out, addr_len, "[%s]:%d", host, bound_port);
    else
        snprintf(addr_out, addr_len, "%s:%d", host[0] ? host : "0.0.0.0", bound_port);
    set_nonblock(fd);
    *fd_out = fd;
    *port_out = bound_port;
    return 0;
}

/* --- Kafka wire helpers: a bounds-checked reader and Buf writers --- */

typedef struct Rd {
    const uint8_t *p;
    size_t n;        /* bytes in p */
    size_t off;      /* read position */
    bool bad;        /* read past the end or malformed */
} Rd;

static bool rd_need(Rd *r, size_t k)
{
    if (r->bad || r->n - r->off < k)
        return !(r->bad = true);
    return true;
}

static int32_t rd_i32(Rd *r)
{
    if (!rd_need(r, 4))
        return 0;
    const uint8_t *q = r->p + r->off;
    r->off += 4;
    return (int32_t)((uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3]);
}

static int16_t rd_i16(Rd *r)
{
    if (!rd_need(r, 2))
        return 0;
    const uint8_t *q = r->p + r->off;
    r->off += 2;
    return (int16_t)((uint16_t)q[0] << 8 | q[1]);
}

static int8_t rd_i8(Rd *r)
{
    return rd_need(r, 1) ? (int8_t)r->p[r->off++] : 0;
}

static uint64_t rd_uvar(Rd *r)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (!rd_need(r, 1))
            return 0;
        uint8_t byte = r->p[r->off++];
        v |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80))
            return v;
    }
    r->bad = true;
    return 0;
}

static void rd_skip(Rd *r, uint64_t k)
{
    if (k > r->n - r->off || r->bad)
        r->bad = true;
    else
        r->off += (size_t)k;
}

/* A (compact when flex) nullable string; *len = -1 for null. */
static const char *rd_str(Rd *r, bool flex, int *len)
{
    int64_t l = flex ? (int64_t)rd_uvar(r) - 1 : rd_i16(r);
    *len = -1;
    if (r->bad || l < 0)
        return NULL;
    const char *s = (const char *)r->p + r->off;
    rd_skip(r, (uint64_t)l);
    if (r->bad)
        return NULL;
    *len = (int)l;
    return s;
}

/* An array length (compact when flex); -1 for null. */
static int64_t rd_arraylen(Rd *r, bool flex)
{
    int64_t n = flex ? (int64_t)rd_uvar(r) - 1 : rd_i32(r);
    if (n > (int64_t)(r->n - r->off)) /* every element takes at least a byte */
        r->bad = true;
    return n;
}

static void rd_skip_tags(Rd *r)
{
    uint64_t n = rd_uvar(r);
    while (n-- > 0 && !r->bad) {
        rd_uvar(r);
        rd_skip(r, rd_uvar(r));
    }
}

static void w_i16(Buf *b, int16_t v)
{
    buf_put_u8(b, (uint8_t)((uint16_t)v >> 8));
    buf_put_u8(b, (uint8_t)v);
}

static void w_i32(Buf *b, int32_t v)
{
    buf_put_u32be(b, (uint32_t)v);
}

static void w_i64(Buf *b, int64_t v)
{
    w_i32(b, (int32_t)(uint32_t)((uint64_t)v >> 32));
    w_i32(b, (int32_t)(uint32_t)(uint64_t)v);
}

static void w_uvar(Buf *b, uint64_t v)
{
    while (v >= 0x80) {
        buf_put_u8(b, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    buf_put_u8(b, (uint8_t)v);
}

static void w_str(Buf *b, const char *s, int len, bool flex)
{
    if (flex)
        w_uvar(b, len < 0 ? 0 : (uint64_t)len + 1);
    else
        w_i16(b, (int16_t)len);
    if (len > 0)
        buf_append(b, s, (size_t)len);
}

static void w_arraylen(Buf *b, int64_t n, bool flex)
{
    if (flex)
        w_uvar(b, n < 0 ? 0 : (uint64_t)n + 1);
    else
        w_i32(b, (int32_t)n);
}

/* Starts a frame in b; returns where its size goes (for frame_end). */
static size_t frame_begin(Buf *b)
{
    size_t at = b->len;
    w_i32(b, 0);
    return at;
}

static void frame_end(Buf *b, size_t at)
{
    uint32_t n = (uint32_t)(b->len - at - 4);
    uint8_t *q = (uint8_t *)b->data + at;
    q[0] = (uint8_t)(n >> 24), q[1] = (uint8_t)(n >> 16), q[2] = (uint8_t)(n >> 8), q[3] = (uint8_t)n;
}

static bool topic_name_ok(const char *s, int len)
{
    if (len < 1 || len > MAX_TOPIC_LEN || (len == 1 && s[0] == '.') ||
        (len == 2 && s[0] == '.' && s[1] == '.'))
        return false;
    for (int i = 0; i < len; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", s[i]) ||
            s[i] == '\0')
            return false;
    return true;
}

/* --- what the forwarder changes --- */

/* Metadata response: every broker is advertised at the forwarder (the
 * address this client used, the forwarder's port), so all of a client's
 * traffic comes back through the fixed address; a controller id that names
 * no broker (the 2.0.2 mock reports 0, its brokers are numbered from 1)
 * becomes the first broker, so admin requests have a controller to go to. False if the frame does not parse (sent unchanged). */
static bool rewrite_metadata(RtBroker *b, FwdConn *c, int16_t ver, const uint8_t *f, size_t n,
                             Buf *out)
{
    bool flex = ver >= 9;
    Rd r = {f, n, 0, false};
    size_t at = out->len, mark;
    int32_t first_id = -1;
    bool ctl_known = false;
    int32_t ids[16];
    int n_ids = 0, len;

    if (ver > 12)
        return false;
    rd_i32(&r);
    if (flex)
        rd_skip_tags(&r);
    if (ver >= 3)
        rd_i32(&r);
    size_t head = r.off; /* correlation id, header tags, throttle time */
    int64_t nb = rd_arraylen(&r, flex);
    if (r.bad || nb < 0)
        return false;
    frame_begin(out);
    buf_append(out, f, head);
    w_arraylen(out, nb, flex);
    for (int64_t i = 0; i < nb && !r.bad; i++) {
        int32_t id = rd_i32(&r);
        rd_str(&r, flex, &len);
        rd_i32(&r);
        if (first_id < 0)
            first_id = id;
        if (n_ids < 16)
            ids[n_ids++] = id;
        w_i32(out, id);
        w_str(out, c->adv_host, (int)strlen(c->adv_host), flex);
        w_i32(out, b->port);
        if (ver >= 1) {
            const char *rack = rd_str(&r, flex, &len);
            w_str(out, rack, len, flex);
        }
        if (flex) {
            mark = r.off;
            rd_skip_tags(&r);
            buf_append(out, f + mark, r.off - mark);
        }
    }
    if (ver >= 2) {
        mark = r.off;
        rd_str(&r, flex, &len);
        buf_append(out, f + mark, r.off - mark);
    }
    if (ver >= 1) {
        int32_t ctl = rd_i32(&r);
        for (int i = 0; i < n_ids; i++)
            ctl_known |= ids[i] == ctl;
        w_i32(out, ctl_known ? ctl : first_id);
    }
    if (r.bad) {
        out->len = at;
        return false;
    }
    buf_append(out, f + r.off, n - r.off);
    frame_end(out, at);
    return true;
}

/* FindCoordinator response (v0-v3): the coordinator is the forwarder. */
static bool rewrite_find_coordinator(RtBroker *b, FwdConn *c, int16_t ver, const uint8_t *f,
                                     size_t n, Buf *out)
{
    bool flex = ver >= 3;
    Rd r = {f, n, 0, false};
    int len;

    if (ver > 3)
        return false;
    rd_i32(&r);
    if (flex)
        rd_skip_tags(&r);
    if (ver >= 1)
        rd_i32(&r);
    rd_i16(&r);
    if (ver >= 1)
        rd_str(&r, flex, &len);
    int32_t id = rd_i32(&r);
    size_t keep = r.off;
    rd_str(&r, flex, &len);
    rd_i32(&r);
    if (r.bad || id < 0)
        return false;
    size_t at = frame_begin(out);
    buf_append(out, f, keep);
    w_str(out, c->adv_host, (int)strlen(c->adv_host), flex);
    w_i32(out, b->port);
    buf_append(out, f + r.off, n - r.off);
    frame_end(out, at);
    return true;
}

/* ApiVersions response (v0-v2): adds CreateTopics, which the forwarder
 * implements on the mock's behalf. */
static bool rewrite_api_versions(const uint8_t *f, size_t n, int16_t ver, Buf *out)
{
    Rd r = {f, n, 0, false};
    if (ver > 2)
        return false;
    rd_i32(&r);
    int16_t e = rd_i16(&r);
    int32_t cnt = rd_i32(&r);
    size_t entries = r.off;
    if (r.bad || e != 0 || cnt < 0 || (size_t)cnt > (n - entries) / 6)
        return false;
    for (int32_t i = 0; i < cnt; i++)
        if (rd_i16(&r) == API_CREATE_TOPICS)
            return false;
        else
            rd_skip(&r, 4);
    size_t at = frame_begin(out);
    buf_append(out, f, entries - 4);
    w_i32(out, cnt + 1);
    buf_append(out, f + entries, (size_t)cnt * 6);
    w_i16(out, API_CREATE_TOPICS);
    w_i16(out, 0);
    w_i16(out, CREATE_TOPICS_MAX_VERSION);
    buf_append(out, f + r.off, n - r.off);
    frame_end(out, at);
    return true;
}

/* Metadata request: topics a client may auto-create are created here first
 * with the broker's --partitions, since the mock's own default (4) cannot be
 * changed. r is positioned at the request body. */
static void metadata_autocreate(RtBroker *b, int16_t ver, Rd *r)
{
    bool flex = ver >= 9;
    const char *names[64];
    int lens[64], n = 0, len;

    if (ver > 9)
        return;
    int64_t cnt = rd_arraylen(r, flex);
    for (int64_t i = 0; i < cnt && !r->bad; i++) {
        const char *s = rd_str(r, flex, &len);
        if (flex)
            rd_skip_tags(r);
        if (s && n < 64 && topic_name_ok(s, len))
            names[n] = s, lens[n++] = len;
    }
    bool allow = ver >= 4 ? rd_i8(r) != 0 : true;
    if (r->bad || !allow)
        return;
    for (int i = 0; i < n; i++) {
        char name[MAX_TOPIC_LEN + 1];
        memcpy(name, names[i], (size_t)lens[i]);
        name[lens[i]] = '\0';
        /* TOPIC_ALREADY_EXISTS is the common answer and fine. */
        rd_kafka_mock_topic_create(b->mcluster, name, b->partitions, 1);
    }
}

/* CreateTopics request (v0-v4), answered by the forwarder: the mock has no
 * CreateTopics handler, but its control API can create topics. r is at the
 * request body; the response frame goes to resp. False if malformed. */
static bool create_topics(RtBroker *b, int16_t ver, int32_t corr, Rd *r, Buf *resp)
{
    typedef struct { const char *name; int len; int32_t parts; int16_t rf; } Req;
    int64_t cnt = rd_arraylen(r, false);
    int len;

    if (r->bad || cnt < 0 || cnt > 10000)
        return false;
    Req *req = xcalloc((size_t)cnt + 1, sizeof *req);
    for (int64_t i = 0; i < cnt && !r->bad; i++) {
        req[i].name = rd_str(r, false, &req[i].len);
        req[i].parts = rd_i32(r);
        req[i].rf = rd_i16(r);
        int64_t na = rd_arraylen(r, false);
        for (int64_t k = 0; k < na && !r->bad; k++) {
            rd_i32(r);
            rd_skip(r, 4 * (uint64_t)rd_arraylen(r, false));
        }
        if (na > 0)
            req[i].parts = (int32_t)na; /* explicit assignments: one per partition */
        int64_t nc = rd_arraylen(r, false);
        for (int64_t k = 0; k < nc && !r->bad; k++) {
            rd_str(r, false, &len);
            rd_str(r, false, &len);
        }
    }
    rd_i32(r); /* timeout_ms */
    bool validate_only = ver >= 1 ? rd_i8(r) != 0 : false;
    if (r->bad) {
        free(req);
        return false;
    }

    size_t at = frame_begin(resp);
    w_i32(resp, corr);
    if (ver >= 2)
        w_i32(resp, 0); /* throttle_time_ms */
    w_i32(resp, (int32_t)cnt);
    for (int64_t i = 0; i < cnt; i++) {
        int16_t code = 0;
        char msg[200] = "";
        int32_t parts = req[i].parts == -1 ? b->partitions : req[i].parts;
        char name[MAX_TOPIC_LEN + 1] = "";
        if (!req[i].name || !topic_name_ok(req[i].name, req[i].len)) {
            code = KERR_INVALID_TOPIC;
            snprintf(msg, sizeof msg, "invalid topic name");
        } else if (parts < 1 || parts > 100000) {
            code = KERR_INVALID_PARTITIONS;
            snprintf(msg, sizeof msg, "invalid partition count %d", (int)parts);
        } else if (req[i].rf != -1 && req[i].rf != 1) {
            code = KERR_INVALID_REPLICATION;
            snprintf(msg, sizeof msg, "replication factor %d larger than the 1 available broker",
                     (int)req[i].rf);
        } else if (!validate_only) {
            memcpy(name, req[i].name, (size_t)req[i].len);
            name[req[i].len] = '\0';
            rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(b->mcluster, name, parts, 1);
            if (e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
                code = KERR_TOPIC_EXISTS;
                snprintf(msg, sizeof msg, "Topic '%s' already exists.", name);
            } else if (e) {
                code = (int16_t)e;
                snprintf(msg, sizeof msg, "%s", rd_kafka_err2str(e));
            }
        }
        w_str(resp, req[i].name, req[i].name ? req[i].len : -1, false);
        w_i16(resp, code);
        if (ver >= 1)
            w_str(resp, msg, code ? (int)strlen(msg) : -1, false);
    }
    frame_end(resp, at);
    free(req);
    return true;
}

/* --- connections --- */

static Pending *pend_push(FwdConn *c)
{
    if (c->n_pend == c->cap_pend) {
        c->cap_pend = c->cap_pend ? 2 * c->cap_pend : 8;
        c->pend = xrealloc(c->pend, (size_t)c->cap_pend * sizeof *c->pend);
    }
    Pending *p = &c->pend[c->n_pend++];
    memset(p, 0, sizeof *p);
    return p;
}

static void pend_remove(FwdConn *c, int k)
{
    buf_free(&c->pend[k].resp);
    free(c->pend[k].group);
    free(c->pend[k].instance);
    memmove(&c->pend[k], &c->pend[k + 1], (size_t)(c->n_pend - k - 1) * sizeof *c->pend);
    c->n_pend--;
}

/* Sends the local answers that are now next in request order. */
static void flush_locals(FwdConn *c)
{
    while (c->n_pend > 0 && c->pend[0].local) {
        buf_append(&c->out[0], c->pend[0].resp.data, c->pend[0].resp.len);
        pend_remove(c, 0);
    }
}

/* Produce request (v0-v8): walks every topic's partitions and counts the
 * record batches larger than max. With resp non-NULL it also writes the
 * whole response frame: MESSAGE_TOO_LARGE for each oversized batch and
 * NOT_ENOUGH_REPLICAS for the others, a retriable error that tells the
 * client nothing was written (this request never reaches the mock). r is at
 * the request body. Returns -1 if the request does not parse. */
static int64_t produce_walk(int16_t ver, int32_t corr, Rd r, long max, int16_t *acks,
                            Buf *resp)
{
    int64_t n_big = 0;
    int len;
    size_t at = 0;

    if (ver >= 3)
        rd_str(&r, false, &len); /* transactional_id */
    *acks = rd_i16(&r);
    rd_i32(&r); /* timeout_ms */
    int64_t nt = rd_arraylen(&r, false);
    if (r.bad || nt < 0)
        return -1;
    if (resp) {
        at = frame_begin(resp);
        w_i32(resp, corr);
        w_i32(resp, (int32_t)nt);
    }
    for (int64_t t = 0; t < nt && !r.bad; t++) {
        const char *name = rd_str(&r, false, &len);
        int64_t np = rd_arraylen(&r, false);
        if (r.bad || np < 0)
            return -1;
        if (resp) {
            w_str(resp, name, name ? len : -1, false);
            w_i32(resp, (int32_t)np);
        }
        for (int64_t k = 0; k < np && !r.bad; k++) {
            int32_t part = rd_i32(&r);
            int32_t n = rd_i32(&r);
            rd_skip(&r, n > 0 ? (uint64_t)n : 0);
            bool big = n > max;
            n_big += big;
            if (!resp)
                continue;
            w_i32(resp, part);
            w_i16(resp, big ? KERR_MESSAGE_TOO_LARGE : KERR_NOT_ENOUGH_REPLICAS);
            w_i64(resp, -1); /* base_offset */
            if (ver >= 2)
                w_i64(resp, -1); /* log_append_time_ms */
            if (ver >= 5)
                w_i64(resp, 0); /* log_start_offset */
            if (ver >= 8) {
                char msg[160];
                if (big)
                    snprintf(msg, sizeof msg,
                             "record batch of %ld bytes is larger than the broker's "
                             "--max-message-bytes %ld", (long)n, max);
                else
                    snprintf(msg, sizeof msg,
                             "not written: another batch in the request was too large");
                w_i32(resp, 0); /* record_errors */
                w_str(resp, msg, (int)strlen(msg), false);
            }
        }
    }
    if (r.bad)
        return -1;
    if (resp) {
        if (ver >= 1)
            w_i32(resp, 0); /* throttle_time_ms */
        frame_end(resp, at);
    }
    return n_big;
}

/* A Produce request with a batch over max_msg is answered here (or, with
 * acks=0, dropped: the client expects no answer); true if it was. The mock
 * would acknowledge such a batch and then lose it (see broker.h). */
static bool produce_refuse(RtBroker *b, FwdConn *c, int16_t ver, int32_t corr, Rd *r)
{
    long max = atomic_load(&b->max_msg);
    int16_t acks;

    if (ver > PRODUCE_MAX_VERSION || produce_walk(ver, corr, *r, max, &acks, NULL) <= 0)
        return false;
    wlog_warn("broker", "refused a Produce request: a record batch is larger than --max-message-bytes %ld", max);
    if (acks == 0)
        return true;
    Pending *p = pend_push(c);
    p->corr = corr, p->key = API_PRODUCE, p->ver = ver, p->local = true;
    produce_walk(ver, corr, *r, max, &acks, &p->resp);
    flush_locals(c);
    return true;
}

/* --- static membership (KIP-345) on the mock's behalf ---
 *
 * The 2.0.2 mock reads a JoinGroup's group.instance.id and ignores it: it
 * knows members by member id only, so a member restarted with the same
 * instance id (and, as every new process, an empty member id) is a new
 * member, while the old one stays in the group until its session expires.
 * Measured with three cooperative-sticky members of 8 partitions: a kill -9
 * and restart of one within the session timeout moved partitions of all
 * three (tests/test_group.py shows it with the emulation off).
 * So the forwarder remembers the member id the mock gave each
 * (group, instance id) and puts it into a JoinGroup that comes with that
 * instance id and an empty member id: the mock sees the old member
 * rejoin. The mock accepts any member id it is given, and it still starts a
 * rebalance on every join (a real broker would not); the cooperative-sticky
 * assignor then gives the member back the partitions nobody owns, which
 * are its own, and moves nothing else. A LeaveGroup forgets the member. */

static char *dupn(const char *s, size_t n)
{
    char *d = xcalloc(1, n + 1);
    memcpy(d, s, n);
    return d;
}

static void static_free(StaticMember *m)
{
    free(m->group);
    free(m->instance);
    free(m->member);
}

static StaticMember *static_find(RtBroker *b, const char *group, const char *instance)
{
    for (int k = 0; k < b->n_statics; k++)
        if (!strcmp(b->statics[k].group, group) && !strcmp(b->statics[k].instance, instance))
            return &b->statics[k];
    return NULL;
}

static void static_remove(RtBroker *b, StaticMember *m)
{
    int k = (int)(m - b->statics);
    static_free(m);
    memmove(m, m + 1, (size_t)(b->n_statics - k - 1) * sizeof *m);
    b->n_statics--;
}

static void static_set(RtBroker *b, const char *group, const char *instance, const char *member, int mlen)
{
    StaticMember *m = static_find(b, group, instance);
    if (m) {
        free(m->member);
        m->member = dupn(member, (size_t)mlen);
        return;
    }
    if (b->n_statics == STATIC_MEMBERS_MAX)
        static_remove(b, &b->statics[0]);
    b->statics = xrealloc(b->statics, (size_t)(b->n_statics + 1) * sizeof *b->statics);
    b->statics[b->n_statics++] = (StaticMember){xstrdup(group), xstrdup(instance), dupn(member, (size_t)mlen), false};
}

/* JoinGroup v5 request; r is past the client id. Forwards it, with the
 * remembered member id of a returning static member, and notes the group
 * and instance id to learn the member id from the answer. False if it is
 * not one to look into (forwarded unchanged by the caller). */
static bool join_group_request(RtBroker *b, FwdConn *c, int16_t ver, int32_t corr, const uint8_t *f,
                               size_t n, Rd *r)
{
    int glen, mlen, ilen;
    if (ver != JOIN_GROUP_STATIC_VERSION)
        return false;
    const char *group = rd_str(r, false, &glen);
    rd_i32(r); /* session_timeout_ms */
    rd_i32(r); /* rebalance_timeout_ms */
    size_t mem_at = r->off;
    rd_str(r, false, &mlen);
    size_t mem_end = r->off;
    const char *inst = rd_str(r, false, &ilen);
    if (r->bad || !group || !inst || ilen == 0)
        return false;
    Pending *p = pend_push(c);
    p->corr = corr, p->key = API_JOIN_GROUP, p->ver = ver;
    p->group = dupn(group, (size_t)glen);
    p->instance = dupn(inst, (size_t)ilen);
    StaticMember *known = static_find(b, p->group, p->instance);
    StaticMember *m = mlen == 0 ? known : NULL;
    /* A member whose last JoinGroup is still unanswered (its process was
     * killed mid-rebalance) is parked in the mock with that request: giving
     * the new process its member id makes the mock abort
     * (rd_kafka_mock_cgrp_member_add: !member->resp). It joins as a new
     * member instead; the old one leaves when its session expires. */
    if (m && m->joining) {
        fprintf(stderr, "weir broker: static member \"%s\" of group \"%s\" joins as a new member: its last join is "
                        "still in progress\n", p->instance, p->group);
        m = NULL;
    }
    if (known)
        known->joining = true;
    Buf *o = &c->out[1];
    if (!m) {
        w_i32(o, (int32_t)n);
        buf_append(o, f, n);
        return true;
    }
    fprintf(stderr, "weir broker: static member \"%s\" of group \"%s\" rejoins as member %s\n", p->instance,
            p->group, m->member);
    size_t at = frame_begin(o);
    buf_append(o, f, mem_at);
    w_str(o, m->member, (int)strlen(m->member), false);
    buf_append(o, f + mem_end, n - mem_end);
    frame_end(o, at);
    return true;
}

/* JoinGroup v5 response to a static member: remembers its member id. */
static void join_group_response(RtBroker *b, const Pending *p, const uint8_t *f, size_t n)
{
    Rd r = {f, n, 0, false};
    int len, mlen;
    rd_i32(&r); /* correlation id */
    rd_i32(&r); /* throttle_time_ms */
    int16_t code = rd_i16(&r);
    rd_i32(&r); /* generation_id */
    rd_str(&r, false, &len); /* protocol_name */
    rd_str(&r, false, &len); /* leader */
    const char *member = rd_str(&r, false, &mlen);
    StaticMember *m = static_find(b, p->group, p->instance);
    if (m)
        m->joining = false;
    if (!r.bad && code == 0 && member && mlen > 0)
        static_set(b, p->group, p->instance, member, mlen);
}

/* LeaveGroup v0-v3 request; r is past the client id: forgets the members
 * that leave. */
static void leave_group_request(RtBroker *b, int16_t ver, Rd *r)
{
    int glen, len;
    if (ver > LEAVE_GROUP_MAX_VERSION)
        return;
    const char *g = rd_str(r, false, &glen);
    int64_t nm = ver >= 3 ? rd_arraylen(r, false) : 1;
    if (r->bad || !g)
        return;
    char *group = dupn(g, (size_t)glen);
    for (int64_t i = 0; i < nm && !r->bad; i++) {
        const char *mem = rd_str(r, false, &len);
        if (ver >= 3)
            rd_str(r, false, &glen); /* group_instance_id */
        for (int k = 0; mem && k < b->n_statics; k++)
            if (!strcmp(b->statics[k].group, group) && (int)strlen(b->statics[k].member) == len &&
                !memcmp(b->statics[k].member, mem, (size_t)len)) {
                static_remove(b, &b->statics[k]);
                break;
            }
    }
    free(group);
}

/* One whole request frame f[0..n) (after the size) from the client. */
static bool on_request(RtBroker *b, FwdConn *c, const uint8_t *f, size_t n)
{
    Rd r = {f, n, 0, false};
    int16_t key = rd_i16(&r), ver = rd_i16(&r);
    int32_t corr = rd_i32(&r);
    int len;

    if (r.bad)
        return false;
    if (key == API_CREATE_TOPICS && ver <= CREATE_TOPICS_MAX_VERSION) {
        rd_str(&r, false, &len); /* client_id */
        Pending *p = pend_push(c);
        p->corr = corr, p->key = key, p->ver = ver, p->local = true;
        if (!create_topics(b, ver, corr, &r, &p->resp))
            return false;
        flush_locals(c);
        return true;
    }
    if (key == API_PRODUCE) {
        Rd body = r;
        rd_str(&body, false, &len); /* client_id */
        if (!body.bad && produce_refuse(b, c, ver, corr, &body))
            return true;
    }
    if (key == API_JOIN_GROUP && atomic_load(&b->static_members)) {
        Rd body = r;
        rd_str(&body, false, &len); /* client_id */
        if (!body.bad && join_group_request(b, c, ver, corr, f, n, &body))
            return true;
    }
    if (key == API_LEAVE_GROUP) {
        Rd body = r;
        rd_str(&body, false, &len); /* client_id */
        leave_group_request(b, ver, &body);
    }
    if (key == API_METADATA) {
        rd_str(&r, false, &len); /* client_id (never compact in headers) */
        if (ver >= 9)
            rd_skip_tags(&r);
        metadata_autocreate(b, ver, &r);
    }
    Pending *p = pend_push(c);
    p->corr = corr, p->key = key, p->ver = ver;
    w_i32(&c->out[1], (int32_t)n);
    buf_append(&c->out[1], f, n);
    return true;
}

/* One whole response frame from the mock. */
static bool on_response(RtBroker *b, FwdConn *c, const uint8_t *f, size_t n)
{
    Rd r = {f, n, 0, false};
    int32_t corr = rd_i32(&r);
    int k = 0;
    bool done = false;

    while (k < c->n_pend && (c->pend[k].local || c->pend[k].corr != corr))
        k++;
    if (k < c->n_pend) {
        Pending p = c->pend[k];
        if (p.key == API_METADATA)
            done = rewrite_metadata(b, c, p.ver, f, n, &c->out[0]);
        else if (p.key == API_FIND_COORDINATOR)
            done = rewrite_find_coordinator(b, c, p.ver, f, n, &c->out[0]);
        else if (p.key == API_API_VERSIONS)
            done = rewrite_api_versions(f, n, p.ver, &c->out[0]);
        else if (p.key == API_JOIN_GROUP && p.group)
            join_group_response(b, &p, f, n);
        pend_remove(c, k);
    }
    if (!done) {
        w_i32(&c->out[0], (int32_t)n);
        buf_append(&c->out[0], f, n);
    }
    flush_locals(c);
    return true;
}

/* Handles every whole frame in c->in[i]; false to drop the connection. */
static bool drain_frames(RtBroker *b, FwdConn *c, int i)
{
    Buf *in = &c->in[i];
    size_t off = 0;
    bool ok = true;
    while (ok && in->len - off >= 4) {
        const uint8_t *q = (const uint8_t *)in->data + off;
        uint32_t n = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
        if (n > FWD_MAX_FRAME)
            return false;
        if (in->len - off - 4 < n)
            break;
        ok = i == 0 ? on_request(b, c, q + 4, n) : on_response(b, c, q + 4, n);
        off += 4 + (size_t)n;
    }
    memmove(in->data, in->data + off, in->len - off);
    in->len -= off;
    return ok;
}

static size_t backlog(const FwdConn *c, int i)
{
    return c->out[i].len - c->out_off[i];
}

static void conn_free(FwdConn *c)
{
    close(c->fd[0]);
    close(c->fd[1]);
    for (int i = 0; i < 2; i++) {
        buf_free(&c->in[i]);
        buf_free(&c->out[i]);
    }
    for (int k = 0; k < c->n_pend; k++) {
        buf_free(&c->pend[k].resp);
        free(c->pend[k].group);
        free(c->pend[k].instance);
    }
    free(c->pend);
    free(c);
}

/* Accepts every pending client and pairs it with a new connection to the
 * mock. A client whose twin cannot be opened is closed at once (it will
 * retry, as Kafka clients do). */
static void accept_all(RtBroker *b)
{
    for (;;) {
        int cfd = accept4(b->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
            return; /* EAGAIN, or a transient error: poll will tell us again */
        int mfd = socket(b->mock_sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (mfd < 0 || connect(mfd, (struct sockaddr *)&b->mock_sa, b->mock_sa_len) < 0) {
            wlog_error("broker", "cannot reach mock broker at %s: %s",
                    b->mock_addr, strerror(errno));
            if (mfd >= 0)
                close(mfd);
            close(cfd);
            continue;
        }
        int one = 1;
        set_nonblock(mfd);
        setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(mfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        FwdConn *c = xcalloc(1, sizeof *c);
        c->fd[0] = cfd;
        c->fd[1] = mfd;
        /* Advertise the address the client reached us on. */
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getsockname(cfd, (struct sockaddr *)&ss, &sl) != 0 ||
            getnameinfo((struct sockaddr *)&ss, sl, c->adv_host, sizeof c->adv_host, NULL, 0,
                        NI_NUMERICHOST) != 0)
            snprintf(c->adv_host, sizeof c->adv_host, "127.0.0.1");
        if (b->n_conns == b->cap_conns) {
            b->cap_conns = b->cap_conns ? 2 * b->cap_conns : 16;
            b->conns = xrealloc(b->conns, (size_t)b->cap_conns * sizeof *b->conns);
        }
        b->conns[b->n_conns++] = c;
    }
}

/* Moves bytes for one connection after poll; false when it is finished or
 * broken. */
static bool conn_pump(RtBroker *b, FwdConn *c, const short *revents)
{
    for (int i = 0; i < 2; i++) {
        if ((revents[i] & (POLLIN | POLLHUP | POLLERR)) && !c->eof[i] &&
            backlog(c, 1 - i) < FWD_OUT_LIMIT) {
            buf_reserve(&c->in[i], FWD_READ_CHUNK);
            ssize_t n = recv(c->fd[i], c->in[i].data + c->in[i].len, FWD_READ_CHUNK, 0);
            if (n > 0) {
                c->in[i].len += (size_t)n;
                if (!drain_frames(b, c, i))
                    return false;
            } else if (n == 0) {
                c->eof[i] = true;
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return false;
            }
        }
    }
    for (int i = 0; i < 2; i++) {
        if (backlog(c, i) == 0)
            continue;
        ssize_t n = send(c->fd[i], c->out[i].data + c->out_off[i], backlog(c, i), MSG_NOSIGNAL);
        if (n > 0)
            c->out_off[i] += (size_t)n;
        else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return false;
        if (c->out_off[i] == c->out[i].len) {
            c->out_off[i] = 0;
            buf_reset(&c->out[i]);
        }
    }
    /* Kafka never half-closes: once a side ends and what it sent has been
     * passed on, the connection is over. */
    return !((c->eof[0] && backlog(c, 1) == 0) || (c->eof[1] && backlog(c, 0) == 0));
}

static void *forwarder_main(void *arg)
{
    RtBroker *b = arg;
    struct pollfd *pfd = NULL;
    int cap = 0;

    for (;;) {
        int n = 2 + 2 * b->n_conns;
        if (n > cap) {
            cap = 2 * n;
            pfd = xrealloc(pfd, (size_t)cap * sizeof *pfd);
        }
        pfd[0] = (struct pollfd){.fd = b->wake[0], .events = POLLIN};
        pfd[1] = (struct pollfd){.fd = b->listen_fd, .events = POLLIN};
        for (int k = 0; k < b->n_conns; k++) {
            FwdConn *c = b->conns[k];
            for (int i = 0; i < 2; i++) {
                short ev = 0;
                if (!c->eof[i] && backlog(c, 1 - i) < FWD_OUT_LIMIT)
                    ev |= POLLIN;
                if (backlog(c, i) > 0)
                    ev |= POLLOUT;
                pfd[2 + 2 * k + i] = (struct pollfd){.fd = c->fd[i], .events = ev};
            }
        }
        if (poll(pfd, (nfds_t)n, -1) < 0) {
            if (errno == EINTR)
                continue;
            wlog_error("broker", "poll: %s", strerror(errno));
            break;
        }
        if (pfd[0].revents) {
            char cmd[64];
            ssize_t got = read(b->wake[0], cmd, sizeof cmd);
            if (got <= 0 || memchr(cmd, WAKE_STOP, (size_t)got))
                break;
            /* WAKE_DROP: every client connection ends at once, as when a
             * broker restarts; the topics stay. The pollfd slots are stale. */
            for (int k = 0; k < b->n_conns; k++)
                conn_free(b->conns[k]);
            b->n_conns = 0;
            continue;
        }
        /* Connections first, then accept: accepting appends to conns, and the
         * pollfd slots only describe the connections that existed before.
         * Walking down keeps the swap-with-last removal safe. */
        for (int k = n / 2 - 2; k >= 0; k--) {
            short rev[2] = {pfd[2 + 2 * k].revents, pfd[3 + 2 * k].revents};
            if (!(rev[0] | rev[1]))
                continue;
            if (!conn_pump(b, b->conns[k], rev)) {
                conn_free(b->conns[k]);
                b->conns[k] = b->conns[--b->n_conns];
            }
        }
        if (pfd[1].revents & POLLIN)
            accept_all(b);
    }
    free(pfd);
    return NULL;
}

int rt_broker_start(const char *listen_addr, int partitions, RtBroker **out,
                    char *addr_out, size_t addr_len, WError *err)
{
    char errstr[512];
    RtBroker *b;

    *out = NULL;
    if (partitions < 1 || partitions > 100000)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                    "invalid partition count %d: want 1 to 100000", partitions);
    b = xcalloc(1, sizeof *b);
    b->partitions = partitions;
    atomic_init(&b->max_msg, BROKER_MAX_MESSAGE_BYTES_DEFAULT);
    atomic_init(&b->static_members, true);
    b->listen_fd = b->wake[0] = b->wake[1] = -1;
    if (open_listener(listen_addr, &b->listen_fd, &b->port, addr_out, addr_len, err) < 0)
        goto fail;

    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, log_cb);
    if (rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof errstr) != RD_KAFKA_CONF_OK ||
        !(b->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr))) {
        rd_kafka_conf_destroy(conf);
        werr(err, SQLSTATE_INTERNAL, 0, "could not create the broker's kafka handle: %s",
             errstr);
        goto fail;
    }
    b->mcluster = rd_kafka_mock_cluster_new(b->rk, 1);
    if (!b->mcluster) {
        werr(err, SQLSTATE_INTERNAL, 0, "could not create the mock kafka cluster");
        goto fail;
    }
    /* The mock parses Metadata v4's AllowAutoTopicCreation but advertises
     * v2 at most, so every client's Metadata request for a missing topic
     * created it, consumers' included (allow.auto.create.topics = false):
     * a deleted topic came back at once under a reading source. v3-v4
     * only add the throttle time (the forwarder's rewrite handles it) and
     * that flag, which the mock honours. */
    rd_kafka_mock_set_apiversion(b->mcluster, API_METADATA, 0, 4);
    snprintf(b->mock_addr, sizeof b->mock_addr, "%s",
             rd_kafka_mock_cluster_bootstraps(b->mcluster));

    /* The mock listens on a numeric IPv4 loopback address. */
    char host[64], port[16];
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    if (split_hostport(b->mock_addr, host, sizeof host, port, sizeof port) < 0 ||
        getaddrinfo(host, port, &hints, &res) != 0) {
        werr(err, SQLSTATE_INTERNAL, 0, "unexpected mock broker address \"%s\"",
             b->mock_addr);
        goto fail;
    }
    memcpy(&b->mock_sa, res->ai_addr, res->ai_addrlen);
    b->mock_sa_len = res->ai_addrlen;
    freeaddrinfo(res);

    if (pipe2(b->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        werr(err, SQLSTATE_IO_ERROR, 0, "pipe: %s", strerror(errno));
        goto fail;
    }
    if (pthread_create(&b->thread, NULL, forwarder_main, b) != 0) {
        werr(err, SQLSTATE_INTERNAL, 0, "could not start the broker forwarder thread");
        goto fail;
    }
    b->thread_started = true;
    *out = b;
    return 0;

fail:
    rt_broker_stop(b);
    return -1;
}

const char *rt_broker_mock_address(const RtBroker *b)
{
    return b->mock_addr;
}

int rt_broker_set_max_message_bytes(RtBroker *b, long bytes, WError *err)
{
    if (bytes < BROKER_MAX_MESSAGE_BYTES_MIN || bytes > BROKER_MAX_MESSAGE_BYTES_MAX)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                    "invalid --max-message-bytes %ld: want %d to %d (the embedded broker "
                    "keeps about 5 MiB per partition)",
                    bytes, BROKER_MAX_MESSAGE_BYTES_MIN, BROKER_MAX_MESSAGE_BYTES_MAX);
    atomic_store(&b->max_msg, bytes);
    return 0;
}

void rt_broker_set_static_members(RtBroker *b, bool on)
{
    atomic_store(&b->static_members, on);
}

int rt_broker_create_topic(RtBroker *b, const char *topic, int partitions, WError *err)
{
    if (partitions == 0)
        partitions = b->partitions;
    if (partitions < 1 || partitions > 100000)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                    "invalid partition count %d: want 1 to 100000", partitions);
    size_t len = strlen(topic);
    if (len == 0 || len > MAX_TOPIC_LEN ||
        strspn(topic, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != len)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "invalid topic name \"%s\"", topic);
    rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(b->mcluster, topic, partitions, 1);
    if (e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
        return werr(err, SQLSTATE_DUPLICATE_OBJECT, 0, "topic \"%s\" already exists", topic);
    if (e)
        return werr(err, SQLSTATE_INTERNAL, 0, "could not create topic \"%s\": %s", topic,
                    rd_kafka_err2str(e));
    return 0;
}

void rt_broker_drop_connections(RtBroker *b)
{
    char drop = WAKE_DROP;
    if (b && b->thread_started)
        while (write(b->wake[1], &drop, 1) < 0 && errno == EINTR)
            ;
}

void rt_broker_stop(RtBroker *b)
{
    if (!b)
        return;
    if (b->thread_started) {
        char one = WAKE_STOP;
        while (write(b->wake[1], &one, 1) < 0 && errno == EINTR)
            ;
        pthread_join(b->thread, NULL);
    }
    for (int k = 0; k < b->n_conns; k++)
        conn_free(b->conns[k]);
    free(b->conns);
    for (int k = 0; k < b->n_statics; k++)
        static_free(&b->statics[k]);
    free(b->statics);
    if (b->listen_fd >= 0)
        close(b->listen_fd);
    if (b->wake[0] >= 0) {
        close(b->wake[0]);
        close(b->wake[1]);
    }
    if (b->mcluster)
        rd_kafka_mock_cluster_destroy(b->mcluster);
    if (b->rk)
        rd_kafka_destroy(b->rk);
    free(b);
}

static int usage(FILE *f)
{
    fprintf(f, "usage: weir broker [--listen HOST:PORT] [--partitions N] [--topic NAME]...\n"
               "                   [--max-message-bytes N] [--no-static-members]\n"
               "                   [--registry HOST:PORT [--registry-file PATH] [--registry-user U:P]]\n"
               "                   [--no-kafka]\n"
               "  --listen HOST:PORT  bootstrap address (default 127.0.0.1:9092; port 0 = any)\n"
               "  --partitions N      partitions of new topics: --topic, auto-created, and\n"
               "                      CreateTopics without a count (default 1)\n"
               "  --topic NAME        create NAME at start-up (repeatable)\n"
               "  --max-message-bytes N  largest record batch accepted; larger ones get\n"
               "                      MESSAGE_TOO_LARGE (default 1048588, at most 2621440)\n"
               "  --no-static-members do not emulate static group membership (group.instance.id)\n"
               "                      for the mock, which ignores it (for tests)\n"
               "  --registry HOST:PORT  also serve a Confluent-compatible schema registry there\n"
               "                      (in memory; docs/connectors.md lists its REST API)\n"
               "  --registry-file PATH  keep the registered schemas in PATH (one JSON line each),\n"
               "                      loaded again at start, so ids survive a restart\n"
               "  --registry-user U:P ask every registry request for HTTP basic auth\n"
               "  --no-kafka          serve the registry only (with --registry)\n"
               "SIGUSR1 drops every client connection (as a broker restart would); the topics stay.\n");
    return 2;
}

/* Returns the value of option name at argv[*i] ("--name V" or "--name=V"),
 * advancing *i; NULL if argv[*i] is not that option. *bad is set when the
 * option is present without a value. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, bool *bad)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *bad = true;
        return NULL;
    }
    return argv[++*i];
}

int rt_broker_main(int argc, char **argv)
{
    const char *listen_addr = "127.0.0.1:9092";
    int partitions = 1, n_topics = 0;
    long max_msg = BROKER_MAX_MESSAGE_BYTES_DEFAULT;
    bool static_members = true, no_kafka = false;
    const char *registry_addr = NULL, *registry_file = NULL, *registry_user = NULL;
    RtSchemaRegistry *reg = NULL;
    const char **topics = xcalloc((size_t)argc + 1, sizeof *topics);
    char addr[300];
    WError err;
    RtBroker *b = NULL;
    sigset_t sigs;
    int sig, rc = 1;

    werr_clear(&err);
    for (int i = 1; i < argc; i++) {
        const char *v;
        bool bad = false;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            free(topics);
            usage(stdout);
            return 0;
        } else if ((v = opt_value(argc, argv, &i, "--listen", &bad))) {
            listen_addr = v;
        } else if ((v = opt_value(argc, argv, &i, "--partitions", &bad))) {
            char *end;
            long p = strtol(v, &end, 10);
            if (*end || p < 1 || p > 100000) {
                fprintf(stderr, "weir broker: invalid --partitions \"%s\"\n", v);
                free(topics);
                return usage(stderr);
            }
            partitions = (int)p;
        } else if ((v = opt_value(argc, argv, &i, "--max-message-bytes", &bad))) {
            char *end;
            max_msg = strtol(v, &end, 10);
            if (*end || !*v || max_msg < BROKER_MAX_MESSAGE_BYTES_MIN ||
                max_msg > BROKER_MAX_MESSAGE_BYTES_MAX) {
                fprintf(stderr, "weir broker: invalid --max-message-bytes \"%s\": want %d to %d\n",
                        v, BROKER_MAX_MESSAGE_BYTES_MIN, BROKER_MAX_MESSAGE_BYTES_MAX);
                free(topics);
                return usage(stderr);
            }
        } else if ((v = opt_value(argc, argv, &i, "--registry", &bad))) {
            registry_addr = v;
        } else if ((v = opt_value(argc, argv, &i, "--registry-file", &bad))) {
            registry_file = v;
        } else if ((v = opt_value(argc, argv, &i, "--registry-user", &bad))) {
            registry_user = v;
        } else if (!strcmp(argv[i], "--no-kafka")) {
            no_kafka = true;
        } else if (!strcmp(argv[i], "--no-static-members")) {
            static_members = false;
        } else if ((v = opt_value(argc, argv, &i, "--topic", &bad))) {
            topics[n_topics++] = v;
        } else {
            fprintf(stderr, "weir broker: %s \"%s\"\n",
                    bad ? "missing value for" : "unknown argument", argv[i]);
            free(topics);
            return usage(stderr);
        }
    }

    /* Block the stop signals before any thread starts, so every librdkafka
     * and forwarder thread inherits the mask and sigwait() below gets them. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    if (no_kafka && !registry_addr) {
        fprintf(stderr, "weir broker: --no-kafka needs --registry\n");
        free(topics);
        return usage(stderr);
    }
    if (registry_addr) {
        /* Without Kafka the registry is the whole job; beside it, a taken
         * port leaves Kafka serving (the embedded set-up must not lose its
         * broker to another registry on 8081). */
        if (!(reg = rt_schema_registry_start(registry_addr, registry_file, registry_user, &err))) {
            if (no_kafka)
                goto out;
            wlog_warn("broker", "no schema registry: %s", err.msg);
            werr_clear(&err);
        } else {
            printf("weir schema registry listening on http://%s\n", registry_addr);
            fflush(stdout);
        }
    }
    if (!no_kafka) {
        if (rt_broker_start(listen_addr, partitions, &b, addr, sizeof addr, &err) < 0 ||
            rt_broker_set_max_message_bytes(b, max_msg, &err) < 0)
            goto out;
        rt_broker_set_static_members(b, static_members);
        for (int i = 0; i < n_topics; i++)
            if (rt_broker_create_topic(b, topics[i], partitions, &err) < 0)
                goto out;
        printf("weir broker listening on %s\n", addr);
        fflush(stdout);
    }
    for (;;) {
        if (sigwait(&sigs, &sig) != 0)
            continue;
        if (sig != SIGUSR1)
            break;
        wlog_info("broker", "SIGUSR1: dropping every client connection");
        if (b)
            rt_broker_drop_connections(b);
    }
    rc = 0;
out:
    if (rc)
        fprintf(stderr, "weir broker: %s%s%s\n", err.msg, err.hint[0] ? "\nHINT: " : "",
                err.hint);
    if (b)
        rt_broker_stop(b);
    rt_schema_registry_stop(reg);
    free(topics);
    return rc;
}
