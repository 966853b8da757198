/*
 * http_door.h: weir's own HTTP listener in front of libmicrohttpd (why, and
 * the path of a connection: http_door.c). http.c is its only user.
 */
#ifndef WEIR_SERVER_HTTP_DOOR_H
#define WEIR_SERVER_HTTP_DOOR_H

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct HttpDoor HttpDoor;

/* Starts the thread "weir-http-door" accepting on the listening socket lfd
 * (which it then owns) for MHD daemon d (started with
 * MHD_USE_NO_LISTEN_SOCKET). At most max_conns connections exist at once,
 * counting *open (those MHD holds; the caller keeps it with
 * MHD_OPTION_NOTIFY_CONNECTION) and those still waiting for their request
 * line: one more is answered 503. A request line must arrive whole within
 * line_timeout_ms (else 408). Every refusal adds 1 to *refused. */
int http_door_start(int lfd, struct MHD_Daemon *d, int max_conns, int line_timeout_ms, atomic_int *open,
                    atomic_long *refused, HttpDoor **out);

/* Stops accepting, closes the waiting sockets and lfd. Before MHD_stop_daemon. */
void http_door_stop(HttpDoor *door);

/* Whether the first n bytes of a connection hold a well-formed request
 * line (METHOD SP target SP HTTP/d.d CRLF): 1 yes, 0 not whole yet, -1
 * malformed or longer than 8 KiB. Public for the unit test. */
int http_door_check_line(const char *p, size_t n);

#endif
