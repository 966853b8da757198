/*
 * pgwire.h: the PostgreSQL wire protocol (v3) server, the only way clients
 * (psql, libpq, JDBC, any Postgres driver) reach the engine.
 *
 * The server owns sockets, threads and the byte format; the engine owns SQL.
 * They meet through two small surfaces:
 *
 *   - SrvEngine: callbacks the server makes into the engine (open/close a
 *     session, run a simple query, run or describe one extended-protocol
 *     statement). Each call runs on the connection's own thread, so a slow
 *     statement blocks only its own client.
 *   - SrvResult: what the engine calls back while one statement runs, to emit
 *     columns, rows, a completion tag, an error, notices or a COPY OUT stream.
 *     The server turns each call into protocol messages for that client.
 *
 * Threading: one thread accepts, one thread per connection. The engine's
 * callbacks may be called concurrently for different sessions, never
 * concurrently for the same session.
 */
#ifndef WEIR_SERVER_PGWIRE_H
#define WEIR_SERVER_PGWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "error.h"

/* Type OIDs: common/pg_oids.h (PG_OID_*). The server knows the width
 * (RowDescription typlen) of those pgwire.c's type_len lists and decodes
 * binary Bind parameters of those pgbinary.c lists; any other OID is passed
 * through as-is. */
#include "pg_oids.h"

/*
 * SrvResult: the response being written to one client for one engine call.
 *
 * Valid only during the SrvEngine.query / SrvEngine.execute call that
 * received it, on that call's thread (or on one other thread at a time while
 * that call waits for it). Output is buffered and sent at ReadyForQuery, when
 * the buffer grows large, or on srv_result_flush().
 *
 * Once srv_result_error() has been called, every later emit on the same
 * SrvResult is dropped: the statement (and, for a simple query, the rest of
 * the query string) is over.
 */
typedef struct SrvResult SrvResult;

/* What a capture result recorded: the last CommandComplete tag, the
 * notices (one per line), and the error if one was emitted (err.set).
 * Rows and COPY streams are dropped. */
typedef struct SrvCapture {
    char tag[64];
    Buf notices;
    WError err;
} SrvCapture;

/* A SrvResult that sends nothing and records into *cap (cleared first;
 * the caller frees cap->notices with buf_free): for running a statement
 * with no client, e.g. a catalog record of a weir cluster applied on
 * every node (server/cluster.c). Never cancelled; any thread, one at a
 * time. Free with srv_result_capture_free (cap stays the caller's). */
SrvResult *srv_result_capture_new(SrvCapture *cap);
void srv_result_capture_free(SrvResult *r);

/* RowDescription for the statement about to emit rows (text format).
 * names[i] are column names; type_oids may be NULL (all text, OID 25).
 * Must precede srv_result_row(); it also resets the row count used by the
 * server if it has to invent a completion tag. In an extended-protocol
 * Execute the description was already sent by Describe, so the message is
 * suppressed, but the column count is still needed: always call this. */
void srv_result_columns(SrvResult *r, int n_cols, const char *const *names,
                        const uint32_t *type_oids);

/* DataRow with as many values as the last srv_result_columns() declared.
 * values[i] == NULL is SQL NULL; lens may be NULL, and lens[i] < 0 means
 * strlen(values[i]). Returns 0, or <0 if the client is gone (or no columns
 * were declared): the engine should stop producing and return. */
int srv_result_row(SrvResult *r, const char *const *values, const int *lens);

/* CommandComplete, e.g. "SELECT 3", "INSERT 0 1", "CREATE SOURCE". Ends one
 * statement; in a simple query more statements may follow. */
void srv_result_complete(SrvResult *r, const char *tag);

/* ErrorResponse with severity ERROR: C=e->sqlstate, M=e->msg, D/H when set,
 * P=e->pos when > 0. After it the engine must stop the query (a simple query
 * does not run its later statements); in the extended protocol the server
 * then skips messages until Sync, as the protocol requires. */
void srv_result_error(SrvResult *r, const WError *e);

/* NoticeResponse (severity NOTICE, SQLSTATE 00000). Allowed at any time. */
void srv_result_notice(SrvResult *r, const char *msg);
/* ParameterStatus name=value, sent with the statement's answer (SET
 * TIME ZONE tells the client its new TimeZone, as Postgres does). */
void srv_result_parameter_status(SrvResult *r, const char *name, const char *value);

/* CopyOutResponse (text, n_cols columns) for SUBSCRIBE-like streams; sent
 * immediately. Returns 0, or <0 if the client is gone. */
int srv_result_copy_begin(SrvResult *r, int n_cols);

/* One CopyData message carrying line[0..len). Buffered: call
 * srv_result_flush() after each batch (e.g. each epoch) so the client sees
 * it promptly. Returns 0, or <0 if the client is gone (stop streaming). */
int srv_result_copy_data(SrvResult *r, const char *line, int len);

/* CopyDone, then CommandComplete with tag. */
void srv_result_copy_end(SrvResult *r, const char *tag);

/* Send everything buffered so far. Returns 0, or <0 if the client is gone.
 * Blocks at most SrvConfig.send_timeout_ms on a client that does not read. */
int srv_result_flush(SrvResult *r);

/* True when the statement should stop: a CancelRequest for this backend
 * arrived since the statement began, the client hung up, or the server is
 * stopping. Cheap (an atomic load, plus a socket probe at most every 100 ms):
 * long-running statements poll it and then report SQLSTATE 57014. */
bool srv_result_cancelled(SrvResult *r);

/* Facts about the connection r answers, for pg_stat_activity. Strings are
 * valid during the engine call that received r. */
typedef struct SrvConnInfo {
    int32_t pid;                  /* as sent in BackendKeyData (what a CancelRequest names) */
    const char *application_name; /* from the startup packet, "" if none */
    const char *client_addr;      /* numeric peer address */
} SrvConnInfo;
void srv_result_conn_info(SrvResult *r, SrvConnInfo *out);

/* pg_cancel_backend / pg_terminate_backend: signal the session whose
 * BackendKeyData pid is pid, on r's server. Cancel: its running statement
 * stops (57014), as a CancelRequest would. Terminate: also its connection
 * ends, with FATAL 57P01. Returns true when such a session exists. */
bool srv_result_signal_backend(SrvResult *r, int32_t pid, bool terminate);

/* statement_timeout: the statement that r answers must end within ms from
 * now (0 = no limit); after that srv_result_cancelled() is true. Call it
 * when each statement starts (the limit applies to each statement of a
 * query string separately, as in Postgres). */
void srv_result_set_timeout(SrvResult *r, long ms);

/* The message for SQLSTATE 57014 once srv_result_cancelled() is true:
 * "canceling statement due to statement timeout" or "... user request". */
const char *srv_result_cancel_message(SrvResult *r);

/*
 * SrvEngine: the engine as the server sees it. ctx is passed back verbatim.
 * Every function is called on the connection's thread.
 */
typedef struct SrvEngine {
    void *ctx;
    /* A client finished startup. Returns per-session state; to refuse, fill
     * err (the client gets it as a FATAL ErrorResponse) and return NULL.
     * NULL with err unset is a valid session state. May be NULL. */
    void *(*session_open)(void *ctx, const char *user, const char *database, WError *err);
    /* The connection is over (whatever the reason). May be NULL. */
    void (*session_close)(void *ctx, void *sess);
    /* Simple Query: run every statement of sql in order; after an error the
     * engine stops (the server then sends ReadyForQuery). Emits through out.
     * An empty query string (only blanks and semicolons) never reaches the
     * engine: the server answers EmptyQueryResponse itself; if the engine
     * emits nothing at all (say, only comments) the server does the same. */
    void (*query)(void *ctx, void *sess, const char *sql, SrvResult *out);
    /* Extended protocol: one statement with n_params text parameters
     * ($1..$n; NULL = SQL NULL; binary parameters were already decoded to
     * text). describe_only: emit only srv_result_columns (or nothing if the
     * statement returns no rows), run nothing; the params are then all NULL
     * when a prepared statement (not a portal) is described. max_rows 0 = all.
     * The engine may ignore max_rows: the server keeps the rows past it in
     * the portal and sends them to the next Executes, PortalSuspended
     * between (an engine that stops after max_rows loses nothing either). */
    void (*execute)(void *ctx, void *sess, const char *sql, int n_params,
                    const char *const *params, bool describe_only, long max_rows,
                    SrvResult *out);
    /* Parse/Describe: the types of sql's parameters $1..$n as the engine
     * infers them from their context (`k = $1` is k's type). Fills oids[i]
     * with a type OID, or leaves the 0 the server put there when nothing
     * decides (the server then describes text). Runs nothing and reports no
     * error (Execute does). May be NULL (every undeclared parameter is text). */
    void (*param_types)(void *ctx, void *sess, const char *sql, int n_params, uint32_t *oids);
    /* SCRAM authentication: copy user's stored SCRAM-SHA-256 verifier into
     * out[0..n) and return 0, or return -1 when the user is unknown or has no
     * password. Called during startup on the connection's thread. May be NULL
     * (then nobody can authenticate with a password). */
    int (*user_verifier)(void *ctx, const char *user, char *out, size_t n);
    /* idle_session_timeout / idle_in_transaction_session_timeout: how long
     * (ms) the session may wait for its next message before the server ends
     * it with FATAL 57P05 (25P03 inside a transaction); 0 = for ever. Asked
     * before each read of a new message. May be NULL. */
    long (*idle_timeout_ms)(void *ctx, void *sess);
    /* True between BEGIN and COMMIT/ROLLBACK: ReadyForQuery then reports
     * 'T' (else 'I'). May be NULL. */
    bool (*in_transaction)(void *ctx, void *sess);
} SrvEngine;

/* Who must prove a password (SrvConfig.auth). */
typedef enum SrvAuth {
    SRV_AUTH_LOCAL_TRUST = 0,   /* loopback clients are trusted; others use SCRAM-SHA-256 */
    SRV_AUTH_SCRAM = 1,         /* every client uses SCRAM-SHA-256 */
} SrvAuth;

/* SrvConfig: zero-initialized fields take the defaults in brackets. */
typedef struct SrvConfig {
    const char *host;           /* listen address ["127.0.0.1"]; names and IPv6 ok */
    int port;                   /* 0 = pick a free port (srv_server_port tells which) */
    int max_connections;        /* [100]; beyond it: ErrorResponse 53300, then close.
                                   Cancel requests are not counted. */
    size_t max_message;         /* [64 MiB]; a larger length field: ErrorResponse
                                   08P01 then close, checked before allocating */
    const char *server_version; /* ParameterStatus server_version ["15.0"]; keep
                                   a leading "major.minor" that drivers parse,
                                   e.g. "15.0 (weir 0.1.0)" */
    int send_timeout_ms;        /* [60000]; a client that reads nothing for this
                                   long is treated as gone; <0 = wait forever */
    int startup_timeout_ms;     /* [10000]; time allowed to finish startup */
    SrvAuth auth;               /* [SRV_AUTH_LOCAL_TRUST] */
    const char *tls_cert;       /* PEM certificate chain and key: with both, */
    const char *tls_key;        /* SSLRequest is answered 'S' and TLS runs
                                   (OpenSSL writes with write(2): the process
                                   must ignore SIGPIPE, as weir's main does) */
} SrvConfig;

typedef struct SrvServer SrvServer;

/* Bind and listen on cfg->host:cfg->port and start the accept thread.
 * engine is copied; cfg strings are copied. Returns 0 and *out, or -1 with
 * err filled (SQLSTATE 58030, e.g. address in use or unresolvable host, an
 * unreadable TLS certificate or key, or only one of the two given). */
int srv_server_start(const SrvConfig *cfg, const SrvEngine *engine, SrvServer **out,
                     WError *err);

/* For fuzzing and tests: serves one connection, on this thread, whose
 * whole input is data[0..n) followed by EOF, exactly as a socket would
 * (startup, then the message loop), calling engine; everything sent is
 * discarded. No socket, no thread; cancel requests find no other backend. */
void srv_serve_bytes(const SrvConfig *cfg, const SrvEngine *engine, const void *data, size_t n);

/* The TCP port actually bound (useful with cfg.port = 0). */
int srv_server_port(const SrvServer *s);

/* Close the listener and every connection (running statements see
 * srv_result_cancelled() and a dead client), wait for all threads, call
 * session_close for each open session, and free s. NULL is allowed. */
void srv_server_stop(SrvServer *s);

#endif
