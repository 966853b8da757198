/*
 * http.h: the HTTP endpoint (libmicrohttpd, loopback by default).
 *
 *   GET  /                          the live dashboard (one embedded HTML page)
 *   GET  /healthz                   200 while the process serves (liveness)
 *   GET  /readyz                    200 when it serves its views, else 503 with the reasons
 *   GET  /metrics                   Prometheus text exposition
 *   GET  /api/status                sources, views, sinks, checkpoints as JSON
 *   GET  /api/views                 the materialized views and their columns
 *   GET  /api/views/<v>             a snapshot of v as JSON
 *   GET  /api/views/<v>/stream      v's changefeed as Server-Sent Events
 *   GET  /api/views/<v>/analyze     EXPLAIN (ANALYZE, FORMAT JSON) MATERIALIZED VIEW v
 *   POST /api/sql                   run SQL (only with HttpConfig.enable_sql)
 *
 * Every connection has its own thread, so a slow client (a dashboard on a
 * bad network, a stalled SSE reader) never holds up the engine or other
 * clients; handlers take the engine lock only to copy what they answer.
 * The formats are documented in docs/operations.md.
 */
#ifndef WEIR_SERVER_HTTP_H
#define WEIR_SERVER_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "engine.h"

/* HttpConfig: zero-initialized fields take the defaults in brackets. */
typedef struct HttpConfig {
    const char *host;          /* listen address ["127.0.0.1"]; names and IPv6 ok */
    int port;                  /* 0 = pick a free port (srv_http_port tells which) */
    bool enable_sql;           /* POST /api/sql answers 403 unless set */
    const char *sql_conninfo;  /* libpq conninfo of this server's pgwire port, for /api/sql */
    int max_connections;       /* [64]; one more is answered 503 (http_door.c) */
    int max_streams;           /* [32] SSE streams at once; beyond: 503 */
    size_t max_body;           /* [1 MiB] request body; larger: 413, checked before reading */
    const char *version;       /* weir's version, for weir_build_info ["unknown"] */
} HttpConfig;

typedef struct SrvHttp SrvHttp;

/* Listens on cfg->host:cfg->port and starts serving. e must outlive the
 * server. Returns 0 and *out, or -1 with err (58030: address in use,
 * unresolvable host). */
int srv_http_start(const HttpConfig *cfg, Engine *e, SrvHttp **out, WError *err);

/* The TCP port actually bound. */
int srv_http_port(const SrvHttp *h);

/* Ends every stream, waits for the connection threads and frees h. Call
 * before engine_close. NULL is allowed. */
void srv_http_stop(SrvHttp *h);

#endif
