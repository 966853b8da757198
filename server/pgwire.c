/*
 * pgwire.c: the PostgreSQL frontend/backend protocol v3, server side.
 *
 * Every byte of the wire format is encoded and decoded here (as in Postgres'
 * pqformat.c): the startup handshake, the simple and extended query
 * sub-protocols, COPY OUT, cancel requests, and the SrvResult calls that turn
 * the engine's output into messages. The last part of the file is the
 * listener: it accepts, runs each connection on its own thread (conn_main),
 * enforces the connection limit and routes cancel requests.
 *
 * Input is read message by message: a type byte and a length are read first
 * and checked against SrvConfig.max_message before any body memory is
 * reserved, and the body then grows as bytes actually arrive, so a lying
 * length costs nothing. Bodies are decoded through a bounds-checked cursor
 * (Rd); any structural defect is a protocol violation: a FATAL ErrorResponse
 * 08P01 and the connection closes. Semantic errors (unknown statement, wrong
 * parameter count, binary results) are ordinary ERRORs; in the extended
 * protocol they make the connection discard messages until Sync.
 *
 * Output accumulates in one buffer per connection and is sent at
 * ReadyForQuery, at COPY start, on Flush, or whenever it passes FLUSH_AT, so
 * a result set costs a handful of send() calls. send() uses MSG_NOSIGNAL and
 * a send timeout: a vanished or stalled client marks the connection dead,
 * further output is discarded, and the engine learns of it through the
 * return values of srv_result_row / srv_result_copy_data.
 */
#include "pgwire.h"

#include "arena.h"
#include "buf.h"
#include "crypto.h"
#include "fault.h"
#include "pgbinary.h"
#include "utf8.h"
#include "log.h"
#include "pg_oids.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum {
    PROTO_MAJOR = 3,
    CODE_CANCEL = 80877102,   /* 1234 << 16 | 5678 */
    CODE_SSL = 80877103,      /* 1234 << 16 | 5679 */
    CODE_GSSENC = 80877104,   /* 1234 << 16 | 5680 */
    MAX_STARTUP_LEN = 10000,  /* as Postgres: startup packets are small */
    MAX_REFUSING = 64,        /* clients turned away by the accept thread at once */
    REFUSE_MS = 2000,         /* time they get to send their startup packet */
    MAX_NEGOTIATIONS = 4,     /* SSL/GSS requests answered before giving up */
    MAX_AUTH_LEN = 10000,     /* SASL messages are small */
    FLUSH_AT = 64 * 1024,     /* output bytes that trigger a send */
    READ_STEP = 1 << 20,      /* body memory reserved per step of arrival */
    MAX_OBJECTS = 10000,      /* prepared statements + portals per connection */
    PROBE_NS = 100 * 1000 * 1000, /* srv_result_cancelled socket probe period */
    EXTRA_THREADS = 16,       /* threads beyond max_connections, so cancel
                                 requests and "too many clients" replies
                                 still get through when the server is full */
};

typedef struct Stmt Stmt;
typedef struct Portal Portal;
typedef struct SrvConn SrvConn;

/* A client past the thread limit, turned away by the accept thread. */
typedef struct Refusing {
    int fd;
    int64_t deadline_ms;       /* CLOCK_MONOTONIC; closed unanswered after it */
    unsigned char head[8];     /* a packet's length and code */
    size_t have;               /* bytes of head read */
    size_t skip;               /* bytes of the packet's body still to read */
    uint32_t code;
    int negotiations;          /* SSL/GSS requests answered 'N' */
} Refusing;

/* SrvServer: the listener and the set of live connections. mu guards the
 * connection list, the counters, and every SrvConn's fd/done fields. */
struct SrvServer {
    SrvConfig cfg;             /* defaults filled in; strings owned */
    SrvEngine eng;
    int lfd;                   /* listening socket */
    int port;
    int wake[2];               /* pipe: wakes the accept thread to stop */
    pthread_t acceptor;
    pthread_mutex_t mu;
    SrvConn *conns;            /* every connection whose thread is not joined */
    int n_threads;             /* connection threads not yet finished */
    int n_sessions;            /* connections past startup (the limited ones) */
    int32_t next_pid;          /* BackendKeyData process ids */
    atomic_bool stopping;
    int n_refusing;            /* clients past the thread limit being turned away (accept thread only) */
    Refusing refusing[MAX_REFUSING];
    TlsCtx *tls;               /* NULL: SSLRequest is answered 'N' */
};

/* SrvConn: one client connection, owned by its thread until done, then by
 * whoever joins it (the accept thread or srv_server_stop). */
struct SrvConn {
    SrvConn *next;             /* in srv->conns */
    SrvServer *srv;
    pthread_t thread;
    int fd;                    /* -1 once closed (under srv->mu) */
    bool done;                 /* thread finished (under srv->mu) */
    bool counted;              /* holds one of max_connections */
    int32_t pid, key;          /* BackendKeyData: cancel requests must match */
    atomic_bool cancel;        /* cancel requested; cleared per statement */
    atomic_bool terminate;     /* pg_terminate_backend: end the connection */
    bool dead;                 /* peer gone or stalled: output is discarded */
    bool eof;                  /* peer closed its side in an orderly way */
    bool skip_till_sync;       /* extended-protocol error: ignore until Sync */
    bool loopback;             /* the peer is on this machine (127.0.0.0/8, ::1) */
    char peer[64];             /* its address, for the log */
    TlsConn *tls;              /* after a TLS handshake: every byte goes through it */
    char rbuf[16384];          /* socket read buffer: rbuf[rpos..rlen) unread */
    size_t rpos, rlen;
    Buf in;                    /* body of the current message */
    Buf out;                   /* pending output */
    size_t msg_start;          /* offset in out of the message being built */
    bool spilling;             /* out is a portal's spill buffer for now: never sent */
    void *sess;                /* engine session state */
    bool sess_open;
    char *user, *database, *app_name;
    Stmt *stmts;
    Portal *portals;
    int n_objects;             /* statements + portals, bounded by MAX_OBJECTS */
    /* srv_serve_bytes: input comes from here instead of the socket (fd -1),
     * and output is discarded. */
    const unsigned char *feed;
    size_t feed_len, feed_pos;
};

static void cancel_backend(SrvConn *c, int32_t pid, int32_t key);
static int take_slot(SrvConn *c);
static void set_timeout(int fd, int opt, int ms);

/* A prepared statement (Parse). Parameter types are as the client declared
 * them, 0 = unspecified; n_params also covers $n the client left undeclared. */
struct Stmt {
    struct Stmt *next;
    char *name;           /* "" = the unnamed statement */
    char *sql;
    int n_params;         /* >= n_types */
    int n_types;
    uint32_t *types;      /* n_params entries; undeclared ones 0 until inferred */
    bool inferred;        /* the engine filled the undeclared types it could (stmt_infer) */
};

/* A bound portal (Bind): the statement text with its parameters decoded to
 * text. It copies the SQL so that closing the statement leaves it intact. */
struct Portal {
    struct Portal *next;
    char *name;           /* "" = the unnamed portal */
    char *sql;
    int n_params;
    char **params;        /* n_params entries, NULL = SQL NULL; owned */
    int n_rfmt;           /* result format codes from Bind: 0 = all text, */
    int16_t *rfmt;        /* 1 = one code for every column, else one per column */
    /* An Execute with a row limit (pgjdbc's setFetchSize, postgres.js
     * cursors): the rows past the limit, as framed DataRow messages, sent by
     * the next Executes, PortalSuspended after each until the last. */
    bool suspended;
    bool exhausted;       /* its last rows were fetched: another Execute gets none */
    Buf spill;
    size_t spill_at;      /* the next unsent message in spill */
};

typedef enum { RES_SIMPLE, RES_EXECUTE, RES_DESCRIBE } ResMode;

struct SrvResult {
    SrvConn *c;           /* NULL: a capture (srv_result_capture_new), nothing is sent */
    SrvCapture *cap;      /* a capture's record of what was emitted */
    ResMode mode;
    int n_cols;           /* -1 until srv_result_columns */
    long n_rows;          /* rows of the current statement */
    bool any;             /* anything at all was emitted */
    bool described;       /* RowDescription sent (describe mode) */
    bool completed;       /* CommandComplete sent for the last statement */
    bool errored;         /* ErrorResponse sent: drop everything after */
    bool in_copy;
    struct timespec next_probe;
    struct timespec deadline;  /* statement_timeout; tv_sec 0 = none */
    bool timed_out;
    int n_rfmt;           /* the portal's result format codes (borrowed) */
    const int16_t *rfmt;
    bool *binary;         /* per column of the current statement: send binary */
    uint32_t *oids;       /* per column: its type, for the binary encoding */
    long limit;           /* Execute's row limit (0: none); rows past it go to spill */
    Buf *spill;           /* the portal's spill buffer, with limit */
    long spilled;         /* rows put in spill */
};

/* ---- output: message framing and sending ---- */

/* Send every buffered byte. A failure (peer gone, send timeout) marks the
 * connection dead; what was buffered is dropped either way. */
static int conn_flush(SrvConn *c)
{
    size_t off = 0;
    if (c->feed) {
        buf_reset(&c->out);
        return c->dead ? -1 : 0;
    }
    while (!c->dead && off < c->out.len) {
        ssize_t n = c->tls ? crypto_tls_write(c->tls, c->out.data + off, c->out.len - off)
                           : send(c->fd, c->out.data + off, FAULT_SHORT("sock_write", c->out.len - off), MSG_NOSIGNAL);
        if (n > 0)
            off += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else
            c->dead = true;
    }
    buf_reset(&c->out);
    return c->dead ? -1 : 0;
}

static void msg_begin(SrvConn *c, char type)
{
    c->msg_start = c->out.len;
    buf_put_u8(&c->out, (uint8_t)type);
    buf_put_u32be(&c->out, 0);
}

/* Patch the length of the message begun last; flush when the buffer is big
 * (or just drop it when the client is already gone). */
static void msg_end(SrvConn *c)
{
    size_t len = c->out.len - c->msg_start - 1;
    unsigned char *p = (unsigned char *)c->out.data + c->msg_start + 1;
    p[0] = (unsigned char)(len >> 24);
    p[1] = (unsigned char)(len >> 16);
    p[2] = (unsigned char)(len >> 8);
    p[3] = (unsigned char)len;
    if (c->dead && !c->spilling)
        buf_reset(&c->out);
    else if (c->out.len >= FLUSH_AT && !c->spilling)
        conn_flush(c);
}

static void put_i16(SrvConn *c, int v)
{
    buf_put_u8(&c->out, (uint8_t)((unsigned)v >> 8));
    buf_put_u8(&c->out, (uint8_t)v);
}
static void put_i32(SrvConn *c, int32_t v) { buf_put_u32be(&c->out, (uint32_t)v); }
static void put_str(SrvConn *c, const char *s) { buf_append(&c->out, s, strlen(s) + 1); }

static void send_simple(SrvConn *c, char type)
{
    msg_begin(c, type);
    msg_end(c);
}

static void send_param_status(SrvConn *c, const char *k, const char *v)
{
    msg_begin(c, 'S');
    put_str(c, k);
    put_str(c, v);
    msg_end(c);
}

static bool in_transaction(SrvConn *c)
{
    const SrvEngine *eng = &c->srv->eng;
    return c->sess_open && eng->in_transaction && eng->in_transaction(eng->ctx, c->sess);
}

static void send_ready(SrvConn *c)
{
    msg_begin(c, 'Z');
    buf_put_u8(&c->out, in_transaction(c) ? 'T' : 'I');   /* transactions are the engine's business */
    msg_end(c);
    conn_flush(c);
}

static void send_error_fields(SrvConn *c, char type, const char *severity, const WError *e)
{
    msg_begin(c, type);
    buf_put_u8(&c->out, 'S');
    put_str(c, severity);
    buf_put_u8(&c->out, 'V');
    put_str(c, severity);
    buf_put_u8(&c->out, 'C');
    put_str(c, e->sqlstate[0] ? e->sqlstate : SQLSTATE_INTERNAL);
    buf_put_u8(&c->out, 'M');
    put_str(c, e->msg);
    if (e->detail[0]) {
        buf_put_u8(&c->out, 'D');
        put_str(c, e->detail);
    }
    if (e->hint[0]) {
        buf_put_u8(&c->out, 'H');
        put_str(c, e->hint);
    }
    if (e->pos > 0) {
        char pos[16];
        snprintf(pos, sizeof pos, "%d", e->pos);
        buf_put_u8(&c->out, 'P');
        put_str(c, pos);
    }
    buf_put_u8(&c->out, 0);
    msg_end(c);
}

static void send_errorv(SrvConn *c, const char *severity, const char *sqlstate,
                        const char *fmt, va_list ap)
{
    WError e;
    werr_clear(&e);
    werr_v(&e, sqlstate, 0, fmt, ap);
    send_error_fields(c, 'E', severity, &e);
}

/* A FATAL error: sent at once, and the caller closes the connection. Always
 * returns -1 so handlers can `return fatal(...)`. */
__attribute__((format(printf, 3, 4)))
static int fatal(SrvConn *c, const char *sqlstate, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    send_errorv(c, "FATAL", sqlstate, fmt, ap);
    va_end(ap);
    conn_flush(c);
    return -1;
}

/* An ERROR inside the extended protocol: skip to Sync. Returns 0 (the
 * connection goes on). */
__attribute__((format(printf, 3, 4)))
static int ext_error(SrvConn *c, const char *sqlstate, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    send_errorv(c, "ERROR", sqlstate, fmt, ap);
    va_end(ap);
    c->skip_till_sync = true;
    return 0;
}

/* ---- input: reading whole messages ---- */

/* Read exactly n bytes into dst. Returns 0, or -1 on EOF, error or timeout
 * (c->eof set on an orderly EOF so the close need not linger). */
static int read_exact(SrvConn *c, void *dst, size_t n)
{
    char *d = dst;
    while (n > 0) {
        if (c->rpos == c->rlen && c->feed) {
            size_t k = c->feed_len - c->feed_pos;
            if (k == 0) {
                c->eof = true;
                return -1;
            }
            if (k > sizeof c->rbuf)
                k = sizeof c->rbuf;
            memcpy(c->rbuf, c->feed + c->feed_pos, k);
            c->feed_pos += k;
            c->rpos = 0;
            c->rlen = k;
        }
        if (c->rpos == c->rlen) {
            ssize_t got = c->tls ? crypto_tls_read(c->tls, c->rbuf, sizeof c->rbuf)
                                 : recv(c->fd, c->rbuf, sizeof c->rbuf, 0);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) {
                if (got == 0)
                    c->eof = true;
                return -1;
            }
            c->rpos = 0;
            c->rlen = (size_t)got;
        }
        size_t k = c->rlen - c->rpos;
        if (k > n)
            k = n;
        memcpy(d, c->rbuf + c->rpos, k);
        c->rpos += k;
        d += k;
        n -= k;
    }
    return 0;
}

static int read_u32(SrvConn *c, uint32_t *v)
{
    unsigned char b[4];
    if (read_exact(c, b, 4) < 0)
        return -1;
    *v = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    return 0;
}

/* Read a body of n bytes into c->in. Memory is reserved in READ_STEP pieces
 * as the bytes arrive, so a hostile length within max_message cannot make
 * us allocate what the peer never sends. */
static int read_body(SrvConn *c, size_t n)
{
    buf_reset(&c->in);
    while (c->in.len < n) {
        size_t step = n - c->in.len;
        if (step > READ_STEP)
            step = READ_STEP;
        buf_reserve(&c->in, step);
        if (read_exact(c, c->in.data + c->in.len, step) < 0)
            return -1;
        c->in.len += step;
    }
    buf_reserve(&c->in, 0);
    c->in.data[c->in.len] = 0;
    return 0;
}

/* Rd: a bounds-checked cursor over one message body. Reads past the end set
 * bad and return zeros / "", so decoders check once at the end. */
typedef struct Rd {
    const unsigned char *p;
    size_t n, off;
    bool bad;
} Rd;

static Rd rd_of(const Buf *b, size_t off)
{
    Rd r = {(const unsigned char *)b->data, b->len, off, b->len < off};
    return r;
}

static const unsigned char *rd_bytes(Rd *r, size_t n)
{
    if (r->bad || n > r->n - r->off) {
        r->bad = true;
        return NULL;
    }
    const unsigned char *p = r->p + r->off;
    r->off += n;
    return p;
}

static int rd_u8(Rd *r)
{
    const unsigned char *p = rd_bytes(r, 1);
    return p ? p[0] : 0;
}

static int rd_i16(Rd *r)
{
    const unsigned char *p = rd_bytes(r, 2);
    return p ? (int16_t)(uint16_t)(p[0] << 8 | p[1]) : 0;
}

static int32_t rd_i32(Rd *r)
{
    const unsigned char *p = rd_bytes(r, 4);
    return p ? (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                         (uint32_t)p[2] << 8 | p[3])
             : 0;
}

/* A NUL-terminated string inside the body; "" and bad when unterminated. */
static const char *rd_str(Rd *r)
{
    if (r->bad)
        return "";
    const unsigned char *z = memchr(r->p + r->off, 0, r->n - r->off);
    if (!z) {
        r->bad = true;
        return "";
    }
    const char *s = (const char *)r->p + r->off;
    r->off = (size_t)(z - r->p) + 1;
    return s;
}

static bool rd_done(const Rd *r) { return !r->bad && r->off == r->n; }

/* ---- statements and portals ---- */

/* The highest $n referenced by sql, skipping string literals, quoted
 * identifiers, comments and dollar-quoted bodies (so '$1' is not a
 * parameter). Only used to size ParameterDescription and to check Bind;
 * the engine does the real parsing. */
static int max_param_ref(const char *s)
{
    int max = 0;
    const char *p = s;
#define IDENT_CHAR(ch) ((ch) == '_' || (ch) == '$' || ((ch) >= '0' && (ch) <= '9') || \
                        (((ch) | 0x20) >= 'a' && ((ch) | 0x20) <= 'z') || ((unsigned char)(ch) >= 0x80))
    while (*p) {
        char prev = p > s ? p[-1] : ' ';
        if (*p == '\'' || *p == '"') {
            char q = *p;
            bool esc = q == '\'' && (prev == 'e' || prev == 'E') &&
                       (p - 1 == s || !IDENT_CHAR(p[-2]));
            p++;
            while (*p) {
                if (esc && *p == '\\' && p[1]) {
                    p += 2;
                } else if (*p == q) {
                    p++;
                    if (*p != q)
                        break;
                    p++;
                } else {
                    p++;
                }
            }
        } else if (p[0] == '-' && p[1] == '-') {
            while (*p && *p != '\n')
                p++;
        } else if (p[0] == '/' && p[1] == '*') {
            int depth = 1;
            p += 2;
            while (*p && depth > 0) {
                if (p[0] == '/' && p[1] == '*')
                    depth++, p += 2;
                else if (p[0] == '*' && p[1] == '/')
                    depth--, p += 2;
                else
                    p++;
            }
        } else if (*p == '$' && !IDENT_CHAR(prev)) {
            if (p[1] >= '0' && p[1] <= '9') {
                long n = 0;
                p++;
                while (*p >= '0' && *p <= '9') {
                    if (n < 1000000)
                        n = n * 10 + (*p - '0');
                    p++;
                }
                if (n > max)
                    max = n > 1000000 ? 1000000 : (int)n;
            } else {
                const char *t = p + 1;
                while (*t && *t != '$' && IDENT_CHAR(*t))
                    t++;
                if (*t != '$') {
                    p++;
                    continue;
                }
                size_t tag = (size_t)(t - p) + 1;   /* "$tag$" */
                const char *body = t + 1, *end = body;
                for (;;) {
                    end = strchr(end, '$');
                    if (!end || strncmp(end, p, tag) == 0)
                        break;
                    end++;
                }
                p = end ? end + tag : body + strlen(body);
            }
        } else {
            p++;
        }
    }
#undef IDENT_CHAR
    return max;
}

static void stmt_free(Stmt *s)
{
    free(s->name);
    free(s->sql);
    free(s->types);
    free(s);
}

static void portal_free(Portal *p)
{
    for (int i = 0; i < p->n_params; i++)
        free(p->params[i]);
    free(p->params);
    free(p->rfmt);
    free(p->name);
    free(p->sql);
    buf_free(&p->spill);
    free(p);
}

static Stmt **stmt_find(SrvConn *c, const char *name)
{
    Stmt **pp = &c->stmts;
    while (*pp && strcmp((*pp)->name, name) != 0)
        pp = &(*pp)->next;
    return pp;
}

static Portal **portal_find(SrvConn *c, const char *name)
{
    Portal **pp = &c->portals;
    while (*pp && strcmp((*pp)->name, name) != 0)
        pp = &(*pp)->next;
    return pp;
}

static void stmt_drop(SrvConn *c, const char *name)
{
    Stmt **pp = stmt_find(c, name);
    if (*pp) {
        Stmt *s = *pp;
        *pp = s->next;
        stmt_free(s);
        c->n_objects--;
    }
}

static void portal_drop(SrvConn *c, const char *name)
{
    Portal **pp = portal_find(c, name);
    if (*pp) {
        Portal *p = *pp;
        *pp = p->next;
        portal_free(p);
        c->n_objects--;
    }
}

/* Portals live until the end of their transaction: the Sync of an implicit
 * one, or past COMMIT/ROLLBACK of a BEGIN block. */
static void portals_drop_all(SrvConn *c)
{
    while (c->portals) {
        Portal *p = c->portals;
        c->portals = p->next;
        portal_free(p);
        c->n_objects--;
    }
}

/* ---- SrvResult: engine output to messages ---- */

SrvResult *srv_result_capture_new(SrvCapture *cap)
{
    SrvResult *r = xcalloc(1, sizeof *r);
    r->mode = RES_SIMPLE;
    r->n_cols = -1;
    r->cap = cap;
    memset(cap, 0, sizeof *cap);
    cap->notices = (Buf)BUF_INIT;
    return r;
}

void srv_result_capture_free(SrvResult *r)
{
    if (!r)
        return;
    free(r->binary);
    free(r->oids);
    free(r);
}

static int oid_typlen(uint32_t oid)
{
    switch (oid) {
    case PG_OID_BOOL: return 1;
    case PG_OID_INT2: return 2;
    case PG_OID_INT4: case PG_OID_FLOAT4: case PG_OID_DATE: return 4;
    case PG_OID_INT8: case PG_OID_FLOAT8: case PG_OID_TIMESTAMP:
    case PG_OID_TIMESTAMPTZ: return 8;
    case PG_OID_INTERVAL: return 16;
    default: return -1;
    }
}

static void result_init(SrvResult *r, SrvConn *c, ResMode mode)
{
    memset(r, 0, sizeof *r);
    r->c = c;
    r->mode = mode;
    r->n_cols = -1;
}

static void result_fini(SrvResult *r)
{
    free(r->binary);
    free(r->oids);
    r->binary = NULL;
    r->oids = NULL;
}

/* The formats of a statement's columns, from the portal's Bind (Postgres'
 * rules: no code = text, one code = every column, else one per column).
 * Returns 0, or -1 with an ERROR sent: a code count that fits neither rule
 * (08P01), or binary asked for a type with no binary encoding (0A000). */
static int result_formats(SrvResult *r, int n_cols, const uint32_t *type_oids)
{
    result_fini(r);
    if (r->n_rfmt == 0)
        return 0;
    WError e;
    werr_clear(&e);
    if (r->n_rfmt > 1 && r->n_rfmt != n_cols) {
        werr(&e, SQLSTATE_PROTOCOL_VIOLATION, 0, "bind message has %d result formats but query has %d columns",
             r->n_rfmt, n_cols);
        srv_result_error(r, &e);
        return -1;
    }
    r->binary = xcalloc((size_t)n_cols + 1, sizeof *r->binary);
    r->oids = xcalloc((size_t)n_cols + 1, sizeof *r->oids);
    for (int i = 0; i < n_cols; i++) {
        uint32_t oid = type_oids ? type_oids[i] : PG_OID_TEXT;
        r->oids[i] = oid;
        r->binary[i] = r->rfmt[r->n_rfmt == 1 ? 0 : i] == 1;
        if (r->binary[i] && !pgbin_result_supported(oid)) {
            werr(&e, SQLSTATE_NOT_SUPPORTED, 0,
                 "feature not supported: binary format for result column %d of type %u", i + 1, oid);
            srv_result_error(r, &e);
            return -1;
        }
    }
    return 0;
}

void srv_result_columns(SrvResult *r, int n_cols, const char *const *names,
                        const uint32_t *type_oids)
{
    if (r->errored || n_cols < 0 || n_cols > 0x7fff)
        return;
    r->any = true;
    if (r->cap) {
        r->n_cols = n_cols;
        return;
    }
    if (r->mode != RES_SIMPLE && result_formats(r, n_cols, type_oids))
        return;
    r->n_cols = n_cols;
    r->n_rows = 0;
    r->completed = false;
    if (r->mode == RES_EXECUTE || (r->mode == RES_DESCRIBE && r->described))
        return;
    r->described = true;
    SrvConn *c = r->c;
    msg_begin(c, 'T');
    put_i16(c, n_cols);
    for (int i = 0; i < n_cols; i++) {
        uint32_t oid = type_oids ? type_oids[i] : PG_OID_TEXT;
        put_str(c, names && names[i] ? names[i] : "?column?");
        put_i32(c, 0);                  /* table OID */
        put_i16(c, 0);                  /* column number */
        put_i32(c, (int32_t)oid);
        put_i16(c, oid_typlen(oid));
        put_i32(c, -1);                 /* typmod */
        put_i16(c, r->binary && r->binary[i] ? 1 : 0);
    }
    msg_end(c);
}

static int row_message(SrvResult *r, const char *const *values, const int *lens);

int srv_result_row(SrvResult *r, const char *const *values, const int *lens)
{
    SrvConn *c = r->c;
    if (!r->spill || r->n_rows < r->limit || r->cap || r->errored || r->mode != RES_EXECUTE)
        return row_message(r, values, lens);
    /* Past an Execute's row limit: the DataRow is framed into the portal's
     * spill buffer instead, for the Executes that follow. */
    Buf saved = c->out;
    size_t saved_start = c->msg_start;
    c->out = *r->spill;
    c->spilling = true;
    int rc = row_message(r, values, lens);
    *r->spill = c->out;
    c->out = saved;
    c->msg_start = saved_start;
    c->spilling = false;
    if (rc == 0)
        r->spilled++;
    return rc;
}

static int row_message(SrvResult *r, const char *const *values, const int *lens)
{
    SrvConn *c = r->c;
    if (r->cap)
        return r->n_cols < 0 ? -1 : 0;
    if (c->dead || r->n_cols < 0)
        return -1;
    if (r->errored || r->mode == RES_DESCRIBE)
        return 0;
    msg_begin(c, 'D');
    put_i16(c, r->n_cols);
    for (int i = 0; i < r->n_cols; i++) {
        if (!values[i]) {
            put_i32(c, -1);
            continue;
        }
        size_t n = lens && lens[i] >= 0 ? (size_t)lens[i] : strlen(values[i]);
        if (r->binary && r->binary[i]) {
            size_t at = c->out.len;
            put_i32(c, 0);
            WError e;
            werr_clear(&e);
            if (pgbin_encode(r->oids[i], values[i], n, &c->out, &e)) {
                c->out.len = c->msg_start;
                srv_result_error(r, &e);
                return -1;
            }
            size_t vlen = c->out.len - at - 4;
            unsigned char *p = (unsigned char *)c->out.data + at;
            p[0] = (unsigned char)(vlen >> 24);
            p[1] = (unsigned char)(vlen >> 16);
            p[2] = (unsigned char)(vlen >> 8);
            p[3] = (unsigned char)vlen;
            continue;
        }
        if (n > 0x7fffffffu - 1024 || c->out.len - c->msg_start + n > 0x7fffffffu - 1024) {
            c->out.len = c->msg_start;   /* cannot be framed: drop the row */
            return -1;
        }
        put_i32(c, (int32_t)n);
        buf_append(&c->out, values[i], n);
    }
    msg_end(c);
    r->n_rows++;
    return c->dead ? -1 : 0;
}

void srv_result_complete(SrvResult *r, const char *tag)
{
    if (r->errored || r->mode == RES_DESCRIBE)
        return;
    r->any = true;
    r->completed = true;
    r->n_cols = -1;
    if (r->spilled > 0)
        return; /* the portal is suspended: its last Execute completes it */
    if (r->cap) {
        snprintf(r->cap->tag, sizeof r->cap->tag, "%s", tag ? tag : "");
        return;
    }
    msg_begin(r->c, 'C');
    put_str(r->c, tag ? tag : "");
    msg_end(r->c);
}

void srv_result_error(SrvResult *r, const WError *e)
{
    if (r->errored)
        return;
    r->errored = true;
    r->any = true;
    r->in_copy = false;
    if (r->cap) {
        r->cap->err = *e;
        return;
    }
    send_error_fields(r->c, 'E', "ERROR", e);
    if (r->mode != RES_SIMPLE)
        r->c->skip_till_sync = true;
}

void srv_result_parameter_status(SrvResult *r, const char *name, const char *value)
{
    if (r->cap || r->mode == RES_DESCRIBE || r->c->dead)
        return;
    send_param_status(r->c, name, value);
}

void srv_result_notice(SrvResult *r, const char *msg)
{
    if (r->cap) {
        if (r->cap->notices.len)
            buf_puts(&r->cap->notices, "\n");
        buf_puts(&r->cap->notices, msg ? msg : "");
        return;
    }
    WError e;
    werr_clear(&e);
    werr(&e, SQLSTATE_SUCCESSFUL_COMPLETION, 0, "%s", msg ? msg : "");
    send_error_fields(r->c, 'N', "NOTICE", &e);
}

int srv_result_copy_begin(SrvResult *r, int n_cols)
{
    SrvConn *c = r->c;
    if (r->cap)
        return -1; /* nobody reads a capture's stream */
    if (c->dead)
        return -1;
    if (r->errored || r->mode == RES_DESCRIBE || n_cols < 0 || n_cols > 0x7fff)
        return 0;
    r->any = true;
    r->in_copy = true;
    r->completed = false;
    msg_begin(c, 'H');
    buf_put_u8(&c->out, 0);             /* overall format: text */
    put_i16(c, n_cols);
    for (int i = 0; i < n_cols; i++)
        put_i16(c, 0);
    msg_end(c);
    return conn_flush(c);
}

int srv_result_copy_data(SrvResult *r, const char *line, int len)
{
    SrvConn *c = r->c;
    if (r->cap)
        return -1;
    if (c->dead)
        return -1;
    if (!r->in_copy || len < 0)
        return 0;
    msg_begin(c, 'd');
    buf_append(&c->out, line, (size_t)len);
    msg_end(c);
    return c->dead ? -1 : 0;
}

void srv_result_copy_end(SrvResult *r, const char *tag)
{
    if (!r->in_copy || r->cap)
        return;
    r->in_copy = false;
    send_simple(r->c, 'c');
    srv_result_complete(r, tag);
}

int srv_result_flush(SrvResult *r) { return r->cap ? 0 : conn_flush(r->c); }

bool srv_result_signal_backend(SrvResult *r, int32_t pid, bool terminate)
{
    if (r->cap)
        return false;
    SrvServer *s = r->c->srv;
    bool found = false;
    pthread_mutex_lock(&s->mu);
    for (SrvConn *o = s->conns; o; o = o->next)
        if (!o->done && o->sess_open && o->pid == pid) {
            found = true;
            atomic_store(&o->cancel, true);
            if (terminate) {
                atomic_store(&o->terminate, true);
                if (o->fd >= 0)
                    shutdown(o->fd, SHUT_RD);   /* wakes its read; it says FATAL 57P01 and closes */
            }
        }
    pthread_mutex_unlock(&s->mu);
    return found;
}

void srv_result_conn_info(SrvResult *r, SrvConnInfo *out)
{
    if (r->cap) {
        *out = (SrvConnInfo){.pid = 0, .application_name = "weir_catalog", .client_addr = ""};
        return;
    }
    out->pid = r->c->pid;
    out->application_name = r->c->app_name ? r->c->app_name : "";
    out->client_addr = r->c->peer;
}

void srv_result_set_timeout(SrvResult *r, long ms)
{
    r->timed_out = false;
    if (ms <= 0) {
        r->deadline.tv_sec = 0;
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &r->deadline);
    r->deadline.tv_sec += ms / 1000;
    r->deadline.tv_nsec += (ms % 1000) * 1000000L;
    if (r->deadline.tv_nsec >= 1000000000L) {
        r->deadline.tv_sec++;
        r->deadline.tv_nsec -= 1000000000L;
    }
}

const char *srv_result_cancel_message(SrvResult *r)
{
    return r->timed_out ? "canceling statement due to statement timeout" : "canceling statement due to user request";
}

bool srv_result_cancelled(SrvResult *r)
{
    SrvConn *c = r->c;
    if (r->cap)
        return false; /* a catalog record is applied whole on every node */
    if (atomic_load(&c->cancel) || c->dead)
        return true;
    if (r->deadline.tv_sec) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > r->deadline.tv_sec ||
            (now.tv_sec == r->deadline.tv_sec && now.tv_nsec >= r->deadline.tv_nsec)) {
            r->timed_out = true;
            return true;
        }
    }
    /* A client that hung up mid-statement would otherwise only be noticed at
     * the next write; a statement that writes nothing for minutes (a
     * SUBSCRIBE on a quiet view) must still stop. Probe, but rarely. */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    if (now.tv_sec > r->next_probe.tv_sec ||
        (now.tv_sec == r->next_probe.tv_sec && now.tv_nsec >= r->next_probe.tv_nsec)) {
        struct pollfd p = {c->fd, POLLRDHUP, 0};
        if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
            c->dead = true;
        now.tv_nsec += PROBE_NS;
        if (now.tv_nsec >= 1000000000L) {
            now.tv_sec++;
            now.tv_nsec -= 1000000000L;
        }
        r->next_probe = now;
    }
    return c->dead;
}

/* ---- startup ---- */

/* Reads one authentication message of the given type into c->in. */
static int read_auth_message(SrvConn *c, char want)
{
    unsigned char type;
    uint32_t len;
    if (read_exact(c, &type, 1) < 0)
        return -1;
    if (type != (unsigned char)want)
        return fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "expected SASL response, got message type %d", type);
    if (read_u32(c, &len) < 0)
        return -1;
    if (len < 4 || len - 4 > MAX_AUTH_LEN)
        return fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid SASL response length %u", len);
    return read_body(c, len - 4);
}

static void send_auth(SrvConn *c, int32_t code, const void *data, size_t n)
{
    msg_begin(c, 'R');
    put_i32(c, code);
    buf_append(&c->out, data, n);
    msg_end(c);
}

/* Authentication: trust for loopback clients unless SCRAM is required for
 * everyone (SrvConfig.auth); otherwise SCRAM-SHA-256 (AuthenticationSASL,
 * SASLInitialResponse, SASLContinue, SASLResponse, SASLFinal), the proofs
 * checked by crypto.c against the verifier the engine keeps for the user.
 * A wrong password, and an unknown user, is FATAL 28P01 after the whole
 * exchange, so the two cannot be told apart. */
static int authenticate(SrvConn *c)
{
    const SrvServer *s = c->srv;
    if (s->cfg.auth == SRV_AUTH_LOCAL_TRUST && c->loopback) {
        send_auth(c, 0, NULL, 0);       /* AuthenticationOk */
        return 0;
    }
    char verifier[SCRAM_VERIFIER_MAX];
    const SrvEngine *eng = &s->eng;
    bool known = eng->user_verifier && eng->user_verifier(eng->ctx, c->user, verifier, sizeof verifier) == 0;
    ScramServer *ss = crypto_scram_new(known ? verifier : NULL, c->user);
    int rc = -1;
    WError err;
    werr_clear(&err);
    Buf msg = BUF_INIT;
    send_auth(c, 10, "SCRAM-SHA-256\0", 15);   /* AuthenticationSASL: the list ends with an empty name */
    if (conn_flush(c) < 0 || read_auth_message(c, 'p') < 0)
        goto out;
    Rd rd = rd_of(&c->in, 0);
    const char *mech = rd_str(&rd);
    int32_t n = rd_i32(&rd);
    const unsigned char *first = n >= 0 ? rd_bytes(&rd, (size_t)n) : NULL;
    if (!rd_done(&rd) || !first) {
        fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid SASLInitialResponse message");
        goto out;
    }
    if (strcmp(mech, "SCRAM-SHA-256") != 0) {
        fatal(c, SQLSTATE_INVALID_AUTHORIZATION, "client selected an invalid SASL authentication mechanism");
        goto out;
    }
    if (crypto_scram_first(ss, (const char *)first, (size_t)n, &msg, &err) < 0) {
        send_error_fields(c, 'E', "FATAL", &err);
        conn_flush(c);
        goto out;
    }
    send_auth(c, 11, msg.data, msg.len);       /* AuthenticationSASLContinue */
    buf_reset(&msg);
    if (conn_flush(c) < 0 || read_auth_message(c, 'p') < 0)
        goto out;
    int ok = crypto_scram_final(ss, c->in.data, c->in.len, &msg, &err);
    if (ok < 0) {
        send_error_fields(c, 'E', "FATAL", &err);
        conn_flush(c);
        goto out;
    }
    if (ok == 0) {
        /* Logged, as Postgres does, so that failed logins can be seen. */
        wlog_warn("pgwire", "password authentication failed for user \"%s\" from %s%s", c->user, c->peer,
                known ? "" : " (no such user, or no password)");
        fatal(c, SQLSTATE_INVALID_PASSWORD, "password authentication failed for user \"%s\"", c->user);
        goto out;
    }
    send_auth(c, 12, msg.data, msg.len);       /* AuthenticationSASLFinal */
    send_auth(c, 0, NULL, 0);                  /* AuthenticationOk */
    rc = 0;
out:
    buf_free(&msg);
    crypto_scram_free(ss);
    return rc;
}

/* Decode the StartupMessage parameters (c->in from offset 4) into c->user,
 * c->database, c->app_name; unknown "_pq_." protocol options are collected
 * for NegotiateProtocolVersion. */
static int startup_params(SrvConn *c, int minor)
{
    Rd rd = rd_of(&c->in, 4);
    const char *user = NULL, *db = NULL, *app = "";
    int n_opts = 0;
    const char *opts[64];
    for (;;) {
        const char *k = rd_str(&rd);
        if (rd.bad)
            return fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid startup packet layout");
        if (!k[0])
            break;
        const char *v = rd_str(&rd);
        if (rd.bad)
            return fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid startup packet layout");
        if (strcmp(k, "user") == 0)
            user = v;
        else if (strcmp(k, "database") == 0)
            db = v;
        else if (strcmp(k, "application_name") == 0)
            app = v;
        else if (strncmp(k, "_pq_.", 5) == 0 && n_opts < 64)
            opts[n_opts++] = k;
        /* options, client_encoding (we speak UTF8 only), DateStyle...: ignored */
    }
    if (!rd_done(&rd))
        return fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid startup packet layout");
    if (!user || !user[0])
        return fatal(c, SQLSTATE_INVALID_AUTHORIZATION, "no PostgreSQL user name specified in startup packet");
    c->user = xstrdup(user);
    c->database = xstrdup(db && db[0] ? db : user);
    c->app_name = xstrdup(app);
    if (minor > 0 || n_opts > 0) {
        msg_begin(c, 'v');              /* NegotiateProtocolVersion: we speak 3.0 */
        put_i32(c, PROTO_MAJOR << 16);
        put_i32(c, n_opts);
        for (int i = 0; i < n_opts; i++)
            put_str(c, opts[i]);
        msg_end(c);
    }
    return 0;
}

/* Run the startup handshake up to ReadyForQuery. Returns 0 when a session is
 * open, -1 to close (cancel requests end here too). */
static int conn_startup(SrvConn *c)
{
    const SrvConfig *cfg = &c->srv->cfg;
    for (int round = 0;; round++) {
        uint32_t len;
        if (read_u32(c, &len) < 0)
            return -1;
        if (len < 8 || len > MAX_STARTUP_LEN)
            return fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid length of startup packet");
        if (read_body(c, len - 4) < 0)
            return -1;
        Rd rd = rd_of(&c->in, 0);
        uint32_t code = (uint32_t)rd_i32(&rd);
        if (code == CODE_SSL || code == CODE_GSSENC) {
            /* Bytes sent behind the request before our answer could be
             * mistaken for post-handshake data (CVE-2021-23214): refuse. */
            if (round >= MAX_NEGOTIATIONS || len != 8 || c->rpos != c->rlen || c->tls)
                return fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid encryption request");
            if (code == CODE_SSL && c->srv->tls) {
                /* 'S', then the handshake on the raw socket: anything the
                 * client sent that is not a TLS ClientHello fails it, and
                 * the connection closes without another byte. */
                buf_put_u8(&c->out, 'S');
                if (conn_flush(c) < 0)
                    return -1;
                WError terr;
                werr_clear(&terr);
                c->tls = crypto_tls_accept(c->srv->tls, c->fd, &terr);
                if (!c->tls)
                    return -1;
                continue;
            }
            buf_put_u8(&c->out, 'N');
            if (conn_flush(c) < 0)
                return -1;
            continue;
        }
        if (code == CODE_CANCEL) {
            if (len == 16) {
                int32_t pid = rd_i32(&rd), key = rd_i32(&rd);
                cancel_backend(c, pid, key);
            }
            return -1;                  /* no reply, as Postgres */
        }
        if (code >> 16 != PROTO_MAJOR)
            return fatal(c, SQLSTATE_NOT_SUPPORTED,
                         "unsupported frontend protocol %u.%u: server supports 3.0 to 3.0",
                         code >> 16, code & 0xffff);
        if (startup_params(c, (int)(code & 0xffff)) < 0)
            return -1;
        break;
    }
    if (take_slot(c) < 0)
        return fatal(c, SQLSTATE_TOO_MANY_CONNECTIONS, "sorry, too many clients already");
    if (authenticate(c) < 0)
        return -1;

    const SrvEngine *eng = &c->srv->eng;
    if (eng->session_open) {
        WError err;
        werr_clear(&err);
        c->sess = eng->session_open(eng->ctx, c->user, c->database, &err);
        if (!c->sess && err.set) {
            send_error_fields(c, 'E', "FATAL", &err);
            conn_flush(c);
            return -1;
        }
    }
    c->sess_open = true;

    send_param_status(c, "server_version", cfg->server_version);
    send_param_status(c, "server_encoding", "UTF8");
    send_param_status(c, "client_encoding", "UTF8");
    send_param_status(c, "DateStyle", "ISO, MDY");
    send_param_status(c, "TimeZone", "UTC");
    send_param_status(c, "IntervalStyle", "postgres");
    send_param_status(c, "integer_datetimes", "on");
    send_param_status(c, "standard_conforming_strings", "on");
    send_param_status(c, "application_name", c->app_name);
    send_param_status(c, "is_superuser", "on");
    send_param_status(c, "session_authorization", c->user);
    msg_begin(c, 'K');
    put_i32(c, c->pid);
    put_i32(c, c->key);
    msg_end(c);
    send_ready(c);
    return c->dead ? -1 : 0;
}

/* ---- the message loop: simple query ---- */

static bool query_is_empty(const char *sql)
{
    for (; *sql; sql++)
        if (!strchr(" \t\n\r\f\v;", *sql))
            return false;
    return true;
}

/* The client encoding is UTF8 (the only one weir speaks), so a statement
 * with other bytes is refused before it is parsed, as PostgreSQL does
 * (common/utf8.h: nothing that is not UTF-8 is ever stored). */
static bool bad_encoding(const char *sql, unsigned char *byte)
{
    size_t n = strlen(sql), at = utf8_invalid_at(sql, n);
    *byte = at < n ? (unsigned char)sql[at] : 0;
    return at < n;
}

static int on_query(SrvConn *c)
{
    Rd rd = rd_of(&c->in, 0);
    const char *sql = rd_str(&rd);
    if (!rd_done(&rd))
        return fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid Query message");
    unsigned char bad;
    if (bad_encoding(sql, &bad)) {
        WError e;
        werr_clear(&e);
        werr(&e, SQLSTATE_BAD_ENCODING, 0, "invalid byte sequence for encoding \"UTF8\": 0x%02x", bad);
        send_error_fields(c, 'E', "ERROR", &e);
        send_ready(c);
        return 0;
    }
    /* A simple query ends the unnamed statement and portal, as in Postgres. */
    stmt_drop(c, "");
    portal_drop(c, "");
    if (query_is_empty(sql)) {
        send_simple(c, 'I');
    } else {
        const SrvEngine *eng = &c->srv->eng;
        SrvResult r;
        result_init(&r, c, RES_SIMPLE);
        atomic_store(&c->cancel, false);
        eng->query(eng->ctx, c->sess, sql, &r);
        if (r.in_copy)                  /* engine forgot copy_end */
            srv_result_copy_end(&r, "COPY");
        if (!r.any)
            send_simple(c, 'I');
    }
    /* A COMMIT or ROLLBACK ends the portals kept open by BEGIN. */
    if (!in_transaction(c))
        portals_drop_all(c);
    send_ready(c);
    return 0;
}

/* ---- the message loop: extended query ---- */

static int on_parse(SrvConn *c)
{
    Rd rd = rd_of(&c->in, 0);
    const char *name = rd_str(&rd);
    const char *sql = rd_str(&rd);
    int n_types = rd_i16(&rd);
    if (n_types < 0)
        rd.bad = true;
    const unsigned char *types = rd_bytes(&rd, (size_t)(n_types > 0 ? n_types : 0) * 4);
    if (!rd_done(&rd))
        return fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid Parse message");
    unsigned char bad;
    if (bad_encoding(sql, &bad))
        return ext_error(c, SQLSTATE_BAD_ENCODING, "invalid byte sequence for encoding \"UTF8\": 0x%02x", bad);
    if (name[0] && *stmt_find(c, name))
        return ext_error(c, SQLSTATE_DUPLICATE_PREPARED_STATEMENT, "prepared statement \"%s\" already exists", name);
    stmt_drop(c, "");
    if (c->n_objects >= MAX_OBJECTS)
        return ext_error(c, SQLSTATE_PROGRAM_LIMIT,
                         "too many prepared statements and portals (limit %d)", MAX_OBJECTS);
    int n_refs = max_param_ref(sql);
    Stmt *s = xcalloc(1, sizeof *s);
    s->name = xstrdup(name);
    s->sql = xstrdup(sql);
    s->n_types = n_types;
    s->n_params = n_refs > n_types ? n_refs : n_types;
    s->types = xcalloc((size_t)s->n_params + 1, sizeof *s->types);
    for (int i = 0; i < n_types; i++) {
        const unsigned char *t = types + 4 * i;
        s->types[i] = (uint32_t)t[0] << 24 | (uint32_t)t[1] << 16 | (uint32_t)t[2] << 8 | t[3];
    }
    s->next = c->stmts;
    c->stmts = s;
    c->n_objects++;
    send_simple(c, '1');
    return 0;
}

/* Asks the engine for the types of s's undeclared parameters, once per
 * statement and only when needed (Describe of the statement, or a Bind with
 * a binary parameter of undeclared type): inferring plans the statement, a
 * cost pgbench-style Parse/Bind/Execute of text parameters never pays. Types
 * still undecided stay 0 and are described as text. */
static void stmt_infer(SrvConn *c, Stmt *s)
{
    const SrvEngine *eng = &c->srv->eng;
    if (s->inferred || !eng->param_types)
        return;
    s->inferred = true;
    /* A declared 0 is "unspecified" (pgjdbc's setNull(i, Types.OTHER)), as an undeclared one. */
    bool any = false;
    for (int i = 0; i < s->n_params; i++)
        any |= s->types[i] == 0;
    if (!any)
        return;
    eng->param_types(eng->ctx, c->sess, s->sql, s->n_params, s->types);
}

static uint64_t be_u(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* Decode one parameter to text. Returns a malloc'd string, or NULL with an
 * ERROR already sent. Text must not contain NUL: the engine gets C strings,
 * and Postgres refuses NUL in text as well. */
static char *param_to_text(SrvConn *c, int idx, uint32_t oid, int fmt,
                           const unsigned char *v, size_t len)
{
    WError e;
    werr_clear(&e);
    char *s = pgbin_param_to_text(idx, fmt == 0 ? PG_OID_TEXT : oid, v, len, &e);
    if (!s) {
        send_error_fields(c, 'E', "ERROR", &e);
        c->skip_till_sync = true;
    }
    return s;
}

static int on_bind(SrvConn *c)
{
    Rd rd = rd_of(&c->in, 0);
    const char *portal = rd_str(&rd);
    const char *stmt = rd_str(&rd);
    int n_pfmt = rd_i16(&rd);
    const unsigned char *pfmt = rd_bytes(&rd, (size_t)(n_pfmt > 0 ? n_pfmt : 0) * 2);
    int n_params = rd_i16(&rd);
    if (n_pfmt < 0 || n_params < 0 || (size_t)n_params * 4 > rd.n - rd.off)
        rd.bad = true;
    /* Locate every value before allocating anything for them. */
    const unsigned char **vals = NULL;
    int32_t *lens = NULL;
    if (!rd.bad && n_params > 0) {
        vals = xcalloc((size_t)n_params, sizeof *vals);
        lens = xcalloc((size_t)n_params, sizeof *lens);
    }
    for (int i = 0; i < n_params && !rd.bad; i++) {
        lens[i] = rd_i32(&rd);
        if (lens[i] < -1)
            rd.bad = true;
        else if (lens[i] >= 0)
            vals[i] = rd_bytes(&rd, (size_t)lens[i]);
    }
    int n_rfmt = rd_i16(&rd);
    const unsigned char *rfmt = rd_bytes(&rd, (size_t)(n_rfmt > 0 ? n_rfmt : 0) * 2);
    if (n_rfmt < 0 || !rd_done(&rd)) {
        free(vals);
        free(lens);
        return fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid Bind message");
    }

    char **params = NULL;
    int n_done = 0;
    Stmt *s = *stmt_find(c, stmt);
    if (!s) {
        ext_error(c, SQLSTATE_INVALID_SQL_STATEMENT_NAME, "prepared statement \"%s\" does not exist", stmt);
        goto out;
    }
    if (n_pfmt > 1 && n_pfmt != n_params) {
        ext_error(c, SQLSTATE_PROTOCOL_VIOLATION,
                  "bind message has %d parameter formats but %d parameters", n_pfmt, n_params);
        goto out;
    }
    if (n_params != s->n_params) {
        ext_error(c, SQLSTATE_PROTOCOL_VIOLATION,
                  "bind message supplies %d parameters, but prepared statement \"%s\" requires %d",
                  n_params, stmt, s->n_params);
        goto out;
    }
    for (int i = 0; i < n_rfmt; i++) {
        int f = (int16_t)be_u(rfmt + 2 * i, 2);
        if (f != 0 && f != 1) {
            ext_error(c, SQLSTATE_INVALID_PARAMETER, "unsupported format code: %d", f);
            goto out;
        }
    }
    if (portal[0] && *portal_find(c, portal)) {
        ext_error(c, SQLSTATE_DUPLICATE_CURSOR, "portal \"%s\" already exists", portal);
        goto out;
    }
    portal_drop(c, "");
    if (c->n_objects >= MAX_OBJECTS) {
        ext_error(c, SQLSTATE_PROGRAM_LIMIT,
                  "too many prepared statements and portals (limit %d)", MAX_OBJECTS);
        goto out;
    }
    params = n_params ? xcalloc((size_t)n_params, sizeof *params) : NULL;
    for (; n_done < n_params; n_done++) {
        int i = n_done;
        int f = n_pfmt == 0 ? 0 : (int16_t)be_u(pfmt + 2 * (n_pfmt == 1 ? 0 : i), 2);
        if (f != 0 && f != 1) {
            ext_error(c, SQLSTATE_INVALID_PARAMETER, "unsupported format code: %d", f);
            goto out;
        }
        if (lens[i] < 0)
            continue;
        if (f == 1 && !s->types[i])
            stmt_infer(c, s);
        params[i] = param_to_text(c, i, s->types[i], f, vals[i], (size_t)lens[i]);
        if (!params[i])
            goto out;
    }
    Portal *p = xcalloc(1, sizeof *p);
    p->name = xstrdup(portal);
    p->sql = xstrdup(s->sql);
    p->n_params = n_params;
    p->params = params;
    params = NULL;
    /* All-text result codes are kept as none, so text portals pay nothing. */
    bool any_binary = false;
    for (int i = 0; i < n_rfmt; i++)
        any_binary |= be_u(rfmt + 2 * i, 2) == 1;
    if (any_binary) {
        p->n_rfmt = n_rfmt;
        p->rfmt = xcalloc((size_t)n_rfmt, sizeof *p->rfmt);
        for (int i = 0; i < n_rfmt; i++)
            p->rfmt[i] = (int16_t)be_u(rfmt + 2 * i, 2);
    }
    p->next = c->portals;
    c->portals = p;
    c->n_objects++;
    send_simple(c, '2');
out:
    if (params) {
        for (int i = 0; i < n_done; i++)
            free(params[i]);
        free(params);
    }
    free(vals);
    free(lens);
    return 0;
}

/* RowDescription or NoData for sql, by asking the engine to describe it. */
static void describe_rows(SrvConn *c, const char *sql, int n_params, const char *const *params,
                          const Portal *p)
{
    if (query_is_empty(sql)) {
        send_simple(c, 'n');
        return;
    }
    const SrvEngine *eng = &c->srv->eng;
    SrvResult r;
    result_init(&r, c, RES_DESCRIBE);
    if (p) {
        r.n_rfmt = p->n_rfmt;
        r.rfmt = p->rfmt;
    }
    eng->execute(eng->ctx, c->sess, sql, n_params, params, true, 0, &r);
    result_fini(&r);
    if (!r.errored && !r.described)
        send_simple(c, 'n');
}

static int on_describe(SrvConn *c)
{
    Rd rd = rd_of(&c->in, 0);
    int kind = rd_u8(&rd);
    const char *name = rd_str(&rd);
    if (!rd_done(&rd) || (kind != 'S' && kind != 'P'))
        return fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid Describe message");
    if (kind == 'S') {
        Stmt *s = *stmt_find(c, name);
        if (!s)
            return ext_error(c, SQLSTATE_INVALID_SQL_STATEMENT_NAME, "prepared statement \"%s\" does not exist", name);
        stmt_infer(c, s);
        msg_begin(c, 't');
        put_i16(c, s->n_params);
        for (int i = 0; i < s->n_params; i++)
            put_i32(c, (int32_t)(s->types[i] ? s->types[i] : PG_OID_TEXT));
        msg_end(c);
        const char **nulls = xcalloc((size_t)s->n_params + 1, sizeof *nulls);
        describe_rows(c, s->sql, s->n_params, nulls, NULL);
        free(nulls);
    } else {
        Portal *p = *portal_find(c, name);
        if (!p)
            return ext_error(c, SQLSTATE_INVALID_CURSOR_NAME, "portal \"%s\" does not exist", name);
        describe_rows(c, p->sql, p->n_params, (const char *const *)p->params, p);
    }
    return 0;
}

/* An Execute of a suspended portal: the next max_rows (0: all) spilled
 * rows, then PortalSuspended, or CommandComplete after the last. */
static int portal_resume(SrvConn *c, Portal *p, int32_t max_rows)
{
    long sent = 0;
    while (p->spill_at < p->spill.len && (max_rows <= 0 || sent < max_rows)) {
        const unsigned char *m = (const unsigned char *)p->spill.data + p->spill_at;
        size_t len = 1 + ((size_t)m[1] << 24 | (size_t)m[2] << 16 | (size_t)m[3] << 8 | (size_t)m[4]);
        buf_append(&c->out, (const char *)m, len);
        p->spill_at += len;
        sent++;
        if (c->out.len >= FLUSH_AT)
            conn_flush(c);
    }
    if (p->spill_at < p->spill.len) {
        send_simple(c, 's');
        return 0;
    }
    p->suspended = false;
    p->exhausted = true;
    buf_free(&p->spill);
    p->spill_at = 0;
    /* As PostgreSQL: the tag counts the rows of this Execute. */
    char tag[48];
    snprintf(tag, sizeof tag, "SELECT %ld", sent);
    msg_begin(c, 'C');
    put_str(c, tag);
    msg_end(c);
    return 0;
}

static int on_execute(SrvConn *c)
{
    Rd rd = rd_of(&c->in, 0);
    const char *name = rd_str(&rd);
    int32_t max_rows = rd_i32(&rd);
    if (!rd_done(&rd))
        return fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid Execute message");
    Portal *p = *portal_find(c, name);
    if (!p)
        return ext_error(c, SQLSTATE_INVALID_CURSOR_NAME, "portal \"%s\" does not exist", name);
    if (query_is_empty(p->sql)) {
        send_simple(c, 'I');
        return 0;
    }
    if (p->suspended)
        return portal_resume(c, p, max_rows);
    if (p->exhausted) {
        msg_begin(c, 'C'); /* as PostgreSQL: a finished portal runs no more */
        put_str(c, "SELECT 0");
        msg_end(c);
        return 0;
    }
    const SrvEngine *eng = &c->srv->eng;
    SrvResult r;
    result_init(&r, c, RES_EXECUTE);
    r.n_rfmt = p->n_rfmt;
    r.rfmt = p->rfmt;
    if (max_rows > 0) {
        r.limit = max_rows;
        r.spill = &p->spill;
        buf_reset(&p->spill);
        p->spill_at = 0;
    }
    atomic_store(&c->cancel, false);
    eng->execute(eng->ctx, c->sess, p->sql, p->n_params, (const char *const *)p->params,
                 false, max_rows > 0 ? max_rows : 0, &r);
    result_fini(&r);
    if (r.spilled > 0) {
        if (r.errored) {
            /* The rows past the limit came before the error: all now, in order. */
            buf_append(&c->out, p->spill.data, p->spill.len);
            buf_reset(&p->spill);
            return 0;
        }
        p->suspended = true;
        send_simple(c, 's'); /* PortalSuspended: Execute again for more */
        return 0;
    }
    if (r.in_copy)
        srv_result_copy_end(&r, "COPY");
    if (!r.errored && !r.completed) {
        /* The client waits for a completion before Sync's ReadyForQuery
         * means anything; make one up rather than leave it guessing. */
        if (!r.any) {
            send_simple(c, 'I');
        } else {
            char tag[48];
            snprintf(tag, sizeof tag, "SELECT %ld", r.n_rows);
            srv_result_complete(&r, tag);
        }
    }
    return 0;
}

static int on_close(SrvConn *c)
{
    Rd rd = rd_of(&c->in, 0);
    int kind = rd_u8(&rd);
    const char *name = rd_str(&rd);
    if (!rd_done(&rd) || (kind != 'S' && kind != 'P'))
        return fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid Close message");
    if (kind == 'S')
        stmt_drop(c, name);
    else
        portal_drop(c, name);
    send_simple(c, '3');                /* closing what does not exist is fine */
    return 0;
}

static bool known_type(int t) { return t && strchr("QPBDESHCXFdcf", t); }

/* Handle the message in c->in. Returns 0 to go on, -1 to close. */
static int dispatch(SrvConn *c, int type)
{
    if (c->skip_till_sync && type != 'S' && type != 'X') {
        /* Messages are skipped until Sync, but the error itself must reach a
         * client that sent Flush and now waits (asyncpg's Parse, Describe,
         * Flush): Postgres flushes every ErrorResponse as it sends it. */
        if (type == 'H')
            conn_flush(c);
        return 0;
    }
    switch (type) {
    case 'Q': return on_query(c);
    case 'P': return on_parse(c);
    case 'B': return on_bind(c);
    case 'D': return on_describe(c);
    case 'E': return on_execute(c);
    case 'C': return on_close(c);
    case 'S':
        if (c->in.len != 0)
            return fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid Sync message");
        c->skip_till_sync = false;
        /* Portals live until the end of their transaction: an explicit
         * BEGIN keeps them (a client fetching a cursor in pieces) until
         * the Sync after COMMIT or ROLLBACK. */
        if (!in_transaction(c))
            portals_drop_all(c);
        send_ready(c);
        return 0;
    case 'H':
        if (c->in.len != 0)
            return fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid Flush message");
        conn_flush(c);
        return 0;
    case 'X':
        return -1;
    case 'F':
        send_error_fields(c, 'E', "ERROR", &(WError){.set = true, .sqlstate = SQLSTATE_NOT_SUPPORTED,
                                                     .msg = "function call protocol is not supported"});
        send_ready(c);
        return 0;
    case 'd': case 'c': case 'f':
        return 0;                       /* stray COPY IN traffic: ignored, as Postgres */
    default:
        return fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid frontend message type %d", type);
    }
}

/* Serve one connection from startup to close (on its own thread). */
static void conn_serve(SrvConn *c)
{
    const SrvConfig *cfg = &c->srv->cfg;
    if (conn_startup(c) < 0)
        goto out;
    set_timeout(c->fd, SO_RCVTIMEO, 0);     /* sessions may idle for ever */
    while (!c->dead) {
        unsigned char type;
        uint32_t len;
        /* idle_session_timeout (idle_in_transaction_session_timeout inside a
         * transaction): wait for the next message at most this long. */
        const SrvEngine *eng = &c->srv->eng;
        long idle = eng->idle_timeout_ms ? eng->idle_timeout_ms(eng->ctx, c->sess) : 0;
        if (idle > 0 && c->rpos == c->rlen && !(c->tls && crypto_tls_pending(c->tls))) {
            struct pollfd p = {c->fd, POLLIN, 0};
            int n;
            do
                n = poll(&p, 1, idle > INT32_MAX ? INT32_MAX : (int)idle);
            while (n < 0 && errno == EINTR);
            if (n == 0) {
                if (in_transaction(c))
                    fatal(c, SQLSTATE_IDLE_IN_TRANSACTION_SESSION_TIMEOUT, "terminating connection due to idle-in-transaction timeout");
                else
                    fatal(c, SQLSTATE_IDLE_SESSION_TIMEOUT, "terminating connection due to idle-session timeout");
                break;
            }
        }
        if (read_exact(c, &type, 1) < 0)
            break;
        /* Judge the type byte before trusting the length behind it: junk
         * must not make us wait for (or reserve) a bogus body. */
        if (!known_type(type)) {
            fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid frontend message type %d", type);
            break;
        }
        if (read_u32(c, &len) < 0)
            break;
        if (len < 4) {
            fatal(c, SQLSTATE_PROTOCOL_VIOLATION, "invalid message length %u", len);
            break;
        }
        if (len - 4 > cfg->max_message) {
            fatal(c, SQLSTATE_PROTOCOL_VIOLATION,
                  "message of %u bytes exceeds the limit of %zu bytes", len - 4, cfg->max_message);
            break;
        }
        if (read_body(c, len - 4) < 0)
            break;
        if (atomic_load(&c->terminate))
            break;
        if (dispatch(c, type) < 0)
            break;
    }
    if (atomic_load(&c->terminate) && !c->dead)
        fatal(c, SQLSTATE_ADMIN_SHUTDOWN, "terminating connection due to administrator command");
out:
    conn_flush(c);
    if (c->sess_open) {
        const SrvEngine *eng = &c->srv->eng;
        if (eng->session_close)
            eng->session_close(eng->ctx, c->sess);
        c->sess_open = false;
    }
    while (c->stmts) {
        Stmt *s = c->stmts;
        c->stmts = s->next;
        stmt_free(s);
    }
    portals_drop_all(c);
    c->n_objects = 0;
}

/* ---- listener: accept, threads, limits, cancel routing ---- */

static void set_timeout(int fd, int opt, int ms)
{
    struct timeval tv = {ms > 0 ? ms / 1000 : 0, ms > 0 ? (ms % 1000) * 1000 : 0};
    setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof tv);
}

/* Find the backend a CancelRequest names and raise its flag. The pid alone
 * is guessable; the random key is what authorizes the cancel. */
static void cancel_backend(SrvConn *c, int32_t pid, int32_t key)
{
    SrvServer *s = c->srv;
    pthread_mutex_lock(&s->mu);
    for (SrvConn *o = s->conns; o; o = o->next)
        if (o != c && !o->done && o->pid == pid && o->key == key)
            atomic_store(&o->cancel, true);
    pthread_mutex_unlock(&s->mu);
}

/* Claim one of max_connections once the client has shown it wants a
 * session (not a cancel). Returns 0, or -1 when the server is full. */
static int take_slot(SrvConn *c)
{
    SrvServer *s = c->srv;
    int rc = -1;
    pthread_mutex_lock(&s->mu);
    if (s->n_sessions < s->cfg.max_connections) {
        s->n_sessions++;
        c->counted = true;
        rc = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Close so that our last message (often a FATAL error) reaches the peer:
 * closing with unread input makes the kernel send RST, which can destroy
 * what is still in flight. So send FIN first and drain briefly. */
static void lingering_close(SrvConn *c)
{
    shutdown(c->fd, SHUT_WR);
    if (!c->eof) {
        set_timeout(c->fd, SO_RCVTIMEO, 200);
        char junk[4096];
        for (int i = 0; i < 64; i++)
            if (recv(c->fd, junk, sizeof junk, 0) <= 0)
                break;
    }
}

/* Fills c->peer (for the log) and c->loopback: the client is on this
 * machine when it comes from a loopback address, or from the very address
 * it connected to (Postgres' "samehost": weir's own HTTP endpoint reaches a
 * server bound to a LAN address that way). */
static void peer_info(SrvConn *c)
{
    struct sockaddr_storage peer, local;
    socklen_t plen = sizeof peer, llen = sizeof local;
    snprintf(c->peer, sizeof c->peer, "?");
    if (getpeername(c->fd, (struct sockaddr *)&peer, &plen) != 0)
        return;
    getnameinfo((struct sockaddr *)&peer, plen, c->peer, sizeof c->peer, NULL, 0, NI_NUMERICHOST);
    bool same = getsockname(c->fd, (struct sockaddr *)&local, &llen) == 0 && local.ss_family == peer.ss_family;
    if (peer.ss_family == AF_INET) {
        const struct sockaddr_in *p4 = (const struct sockaddr_in *)&peer;
        c->loopback = (ntohl(p4->sin_addr.s_addr) >> 24) == 127 ||
                      (same && p4->sin_addr.s_addr == ((const struct sockaddr_in *)&local)->sin_addr.s_addr);
    } else if (peer.ss_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)&peer)->sin6_addr;
        c->loopback = IN6_IS_ADDR_LOOPBACK(a6) || (IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127) ||
                      (same && !memcmp(a6, &((const struct sockaddr_in6 *)&local)->sin6_addr, sizeof *a6));
    } else if (peer.ss_family == AF_UNIX) {
        c->loopback = true;
    }
}

static void *conn_main(void *arg)
{
    SrvConn *c = arg;
    SrvServer *s = c->srv;
    pthread_setname_np(pthread_self(), "weir-conn");
    set_timeout(c->fd, SO_RCVTIMEO, s->cfg.startup_timeout_ms);
    peer_info(c);
    conn_serve(c);
    if (c->tls) {
        conn_flush(c);
        crypto_tls_close(c->tls);
        c->tls = NULL;
    }
    lingering_close(c);
    pthread_mutex_lock(&s->mu);
    close(c->fd);
    c->fd = -1;
    if (c->counted)
        s->n_sessions--;
    s->n_threads--;
    c->done = true;
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void conn_free(SrvConn *c)
{
    buf_free(&c->in);
    buf_free(&c->out);
    free(c->user);
    free(c->database);
    free(c->app_name);
    free(c);
}

/* Join and free finished connections (all of them when stopping). */
static void reap(SrvServer *s, bool all)
{
    SrvConn *dead = NULL;
    pthread_mutex_lock(&s->mu);
    for (SrvConn **pp = &s->conns; *pp;) {
        SrvConn *c = *pp;
        if (all || c->done) {
            *pp = c->next;
            c->next = dead;
            dead = c;
        } else {
            pp = &c->next;
        }
    }
    pthread_mutex_unlock(&s->mu);
    while (dead) {
        SrvConn *c = dead;
        dead = c->next;
        pthread_join(c->thread, NULL);
        conn_free(c);
    }
}

static int32_t random_key(void)
{
    int32_t k;
    if (getrandom(&k, sizeof k, 0) != (ssize_t)sizeof k) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        k = (int32_t)(t.tv_nsec ^ (t.tv_sec << 20) ^ (intptr_t)&t);
    }
    return k;
}

/* Past the thread limit the accept thread itself turns clients away, with
 * no thread per client and without blocking: each such socket is polled
 * with the listener, answers 'N' to SSL/GSS requests, and after the
 * startup packet gets FATAL 53300, then FIN (the packet was read, so the
 * close is not a reset that could destroy the answer). A cancel request is
 * closed unanswered. At most MAX_REFUSING at once, each for at most
 * REFUSE_MS; beyond that the socket is closed at once. */
static void refuse_close(SrvServer *s, int i)
{
    close(s->refusing[i].fd);
    s->refusing[i] = s->refusing[--s->n_refusing];
}

static void refuse_start(SrvServer *s, int fd)
{
    if (s->n_refusing == MAX_REFUSING) {
        close(fd);
        return;
    }
    Refusing *r = &s->refusing[s->n_refusing++];
    memset(r, 0, sizeof *r);
    r->fd = fd;
    r->deadline_ms = clock_mono_ms() + REFUSE_MS;
}

/* Reads what socket i has; returns after answering or when it would block. */
static void refuse_step(SrvServer *s, int i)
{
    static const char fields[] = "SFATAL\0VFATAL\0C53300\0Msorry, too many clients already\0";
    Refusing *r = &s->refusing[i];
    for (;;) {
        if (r->have < 8) {
            ssize_t n = recv(r->fd, r->head + r->have, 8 - r->have, MSG_DONTWAIT);
            if (n <= 0) {
                if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
                    refuse_close(s, i);
                return;
            }
            r->have += (size_t)n;
            if (r->have < 8)
                continue;
            uint32_t len = (uint32_t)r->head[0] << 24 | (uint32_t)r->head[1] << 16 | (uint32_t)r->head[2] << 8 | r->head[3];
            uint32_t code = (uint32_t)r->head[4] << 24 | (uint32_t)r->head[5] << 16 | (uint32_t)r->head[6] << 8 | r->head[7];
            if (len < 8 || len > MAX_STARTUP_LEN || code == CODE_CANCEL) {
                refuse_close(s, i);
                return;
            }
            r->skip = len - 8;
            r->code = code;
        }
        char junk[1024];
        while (r->skip > 0) {
            ssize_t n = recv(r->fd, junk, r->skip < sizeof junk ? r->skip : sizeof junk, MSG_DONTWAIT);
            if (n <= 0) {
                if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
                    refuse_close(s, i);
                return;
            }
            r->skip -= (size_t)n;
        }
        if ((r->code == CODE_SSL || r->code == CODE_GSSENC) && r->negotiations++ < MAX_NEGOTIATIONS) {
            if (send(r->fd, "N", 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1) {
                refuse_close(s, i);
                return;
            }
            r->have = 0;
            continue;
        }
        unsigned char msg[1 + 4 + sizeof fields];
        uint32_t mlen = 4 + sizeof fields;   /* sizeof counts the final NUL */
        msg[0] = 'E';
        msg[1] = (unsigned char)(mlen >> 24);
        msg[2] = (unsigned char)(mlen >> 16);
        msg[3] = (unsigned char)(mlen >> 8);
        msg[4] = (unsigned char)mlen;
        memcpy(msg + 5, fields, sizeof fields);
        if (send(r->fd, msg, sizeof msg, MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
            shutdown(r->fd, SHUT_WR);
        refuse_close(s, i);
        return;
    }
}

/* Closes refusals past their deadline (all of them when stopping). */
static void refuse_expire(SrvServer *s, bool all)
{
    int64_t ms = clock_mono_ms();
    for (int i = s->n_refusing - 1; i >= 0; i--)
        if (all || ms >= s->refusing[i].deadline_ms)
            refuse_close(s, i);
}

static void start_conn(SrvServer *s, int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  /* we batch ourselves */
    if (s->cfg.send_timeout_ms > 0)
        set_timeout(fd, SO_SNDTIMEO, s->cfg.send_timeout_ms);
    SrvConn *c = xcalloc(1, sizeof *c);
    c->srv = s;
    c->fd = fd;
    c->key = random_key();
    atomic_init(&c->cancel, false);
    atomic_init(&c->terminate, false);
    pthread_mutex_lock(&s->mu);
    if (s->n_threads >= s->cfg.max_connections + EXTRA_THREADS) {
        pthread_mutex_unlock(&s->mu);
        refuse_start(s, fd);
        free(c);
        return;
    }
    c->pid = s->next_pid++;
    if (s->next_pid <= 0)
        s->next_pid = 1000;
    c->next = s->conns;
    s->conns = c;
    s->n_threads++;
    /* Created under the lock so the thread cannot finish (and be reaped)
     * before c->thread is set; it blocks on mu only at its very end. */
    if (pthread_create(&c->thread, NULL, conn_main, c) != 0) {
        s->conns = c->next;
        s->n_threads--;
        pthread_mutex_unlock(&s->mu);
        close(fd);
        free(c);
        return;
    }
    pthread_mutex_unlock(&s->mu);
}

static void *accept_main(void *arg)
{
    SrvServer *s = arg;
    pthread_setname_np(pthread_self(), "weir-accept");
    while (!atomic_load(&s->stopping)) {
        struct pollfd p[2 + MAX_REFUSING] = {{s->lfd, POLLIN, 0}, {s->wake[0], POLLIN, 0}};
        int n_refusing = s->n_refusing;
        for (int i = 0; i < n_refusing; i++)
            p[2 + i] = (struct pollfd){s->refusing[i].fd, POLLIN, 0};
        int n = poll(p, 2 + (nfds_t)n_refusing, n_refusing ? 100 : 500);
        reap(s, false);
        /* Backwards: refuse_close moves the last entry into the closed slot. */
        for (int i = n_refusing - 1; n > 0 && i >= 0; i--)
            if (p[2 + i].revents)
                refuse_step(s, i);
        refuse_expire(s, false);
        if (n <= 0 || p[1].revents)
            continue;
        if (!(p[0].revents & POLLIN))
            continue;
        int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                poll(NULL, 0, 50);      /* out of descriptors: don't spin */
            continue;
        }
        start_conn(s, fd);
    }
    return NULL;
}

static int listen_on(SrvServer *s, const char *host, int port, WError *err)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0)
        return werr(err, SQLSTATE_IO_ERROR, 0, "could not resolve \"%s\": %s", host,
                    gai_strerror(rc));
    int saved = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) {
            struct sockaddr_storage ss;
            socklen_t sl = sizeof ss;
            getsockname(fd, (struct sockaddr *)&ss, &sl);
            s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                      : ((struct sockaddr_in *)&ss)->sin_port);
            s->lfd = fd;
            freeaddrinfo(res);
            return 0;
        }
        saved = errno;
        close(fd);
    }
    freeaddrinfo(res);
    return werr(err, SQLSTATE_IO_ERROR, 0, "could not listen on %s:%d: %s", host, port,
                strerror(saved));
}

/* out = cfg with the defaults filled in and the strings copied. */
static void config_defaults(SrvConfig *out, const SrvConfig *cfg)
{
    *out = *cfg;
    out->host = xstrdup(cfg->host ? cfg->host : "127.0.0.1");
    out->server_version = xstrdup(cfg->server_version ? cfg->server_version : "15.0");
    if (out->max_connections <= 0)
        out->max_connections = 100;
    if (out->max_message == 0)
        out->max_message = 64u << 20;
    if (out->max_message > 0x7ffffff0u)
        out->max_message = 0x7ffffff0u;   /* lengths are int32 on the wire */
    if (out->send_timeout_ms == 0)
        out->send_timeout_ms = 60000;
    if (out->startup_timeout_ms <= 0)
        out->startup_timeout_ms = 10000;
}

void srv_serve_bytes(const SrvConfig *cfg, const SrvEngine *engine, const void *data, size_t n)
{
    SrvServer s;
    memset(&s, 0, sizeof s);
    config_defaults(&s.cfg, cfg);
    s.eng = *engine;
    s.lfd = s.wake[0] = s.wake[1] = -1;
    s.next_pid = 1000;
    atomic_init(&s.stopping, false);
    pthread_mutex_init(&s.mu, NULL);
    SrvConn *c = xcalloc(1, sizeof *c);
    c->srv = &s;
    c->fd = -1;
    c->key = 42;
    atomic_init(&c->cancel, false);
    c->feed = data;
    c->feed_len = n;
    s.conns = c;
    s.n_threads = 1;
    conn_serve(c);
    conn_free(c);
    pthread_mutex_destroy(&s.mu);
    free((char *)s.cfg.host);
    free((char *)s.cfg.server_version);
}

int srv_server_start(const SrvConfig *cfg, const SrvEngine *engine, SrvServer **out,
                     WError *err)
{
    *out = NULL;
    if (!engine || !engine->query || !engine->execute)
        return werr(err, SQLSTATE_INTERNAL, 0, "engine must provide query and execute");
    SrvServer *s = xcalloc(1, sizeof *s);
    config_defaults(&s->cfg, cfg);
    s->eng = *engine;
    s->lfd = s->wake[0] = s->wake[1] = -1;
    s->next_pid = 1000 + (random_key() & 0xffff);
    atomic_init(&s->stopping, false);
    pthread_mutex_init(&s->mu, NULL);
    s->cfg.tls_cert = s->cfg.tls_key = NULL;   /* not kept: loaded now */
    if ((cfg->tls_cert != NULL) != (cfg->tls_key != NULL)) {
        werr(err, SQLSTATE_IO_ERROR, 0, "TLS needs both a certificate and a key");
        goto fail;
    }
    if (cfg->tls_cert && crypto_tls_ctx_new(cfg->tls_cert, cfg->tls_key, &s->tls, err) < 0)
        goto fail;
    if (listen_on(s, s->cfg.host, cfg->port, err) < 0)
        goto fail;
    if (pipe2(s->wake, O_CLOEXEC) < 0) {
        werr(err, SQLSTATE_IO_ERROR, 0, "pipe: %s", strerror(errno));
        goto fail;
    }
    if (pthread_create(&s->acceptor, NULL, accept_main, s) != 0) {
        werr(err, SQLSTATE_IO_ERROR, 0, "could not start the accept thread");
        goto fail;
    }
    *out = s;
    return 0;
fail:
    if (s->lfd >= 0)
        close(s->lfd);
    if (s->wake[0] >= 0) {
        close(s->wake[0]);
        close(s->wake[1]);
    }
    pthread_mutex_destroy(&s->mu);
    crypto_tls_ctx_free(s->tls);
    free((char *)s->cfg.host);
    free((char *)s->cfg.server_version);
    free(s);
    return -1;
}

int srv_server_port(const SrvServer *s) { return s->port; }

void srv_server_stop(SrvServer *s)
{
    if (!s)
        return;
    atomic_store(&s->stopping, true);
    ssize_t w = write(s->wake[1], "x", 1);
    (void)w;
    pthread_join(s->acceptor, NULL);
    close(s->lfd);
    refuse_expire(s, true);
    /* Wake every connection thread: blocked reads and writes fail, running
     * statements see srv_result_cancelled(). The fd is still open (threads
     * close it under mu), so shutdown cannot hit a reused descriptor. */
    pthread_mutex_lock(&s->mu);
    for (SrvConn *c = s->conns; c; c = c->next) {
        atomic_store(&c->cancel, true);
        if (c->fd >= 0)
            shutdown(c->fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&s->mu);
    reap(s, true);
    close(s->wake[0]);
    close(s->wake[1]);
    pthread_mutex_destroy(&s->mu);
    crypto_tls_ctx_free(s->tls);
    free((char *)s->cfg.host);
    free((char *)s->cfg.server_version);
    free(s);
}
