/*
 * http_door.c: the HTTP listener. weir accepts HTTP connections itself and
 * hands one to libmicrohttpd only when its request line has arrived whole
 * and is well formed.
 *
 * Why not MHD's own listener: with it, (1) a connection that never sends a
 * byte holds one of the max_connections slots (and its thread) until MHD's
 * timeout, so 64 idle sockets made the dashboard and /metrics unreachable;
 * (2) past the limit MHD closes new sockets without a word, so a client
 * cannot tell "full" from "down"; (3) MHD closes a request line it cannot
 * parse ("GARBAGE", binary) without an answer. Here:
 *
 *   accept ──► full (open + waiting >= max)?      503, close
 *          ──► waiting list (no thread, one pollfd each)
 *                 line whole and well formed       MHD_add_connection (MHD owns it)
 *                 line whole and malformed         400, close
 *                 8 KiB and no line end            400, close
 *                 no whole line within the timeout 408, close
 *                 peer closed                      close
 *
 * The line is only peeked (MSG_PEEK), so MHD reads the request from its
 * first byte. A socket that holds part of a line stays readable, so it is
 * not polled again but peeked once per tick (TICK_MS) until the rest comes.
 * Only the line is checked (METHOD SP target SP HTTP/d.d): everything past
 * it, and versions other than 1.0/1.1 (505), are MHD's to answer.
 */
#include "http_door.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"

#define LINE_MAX_BYTES 8192   /* a request line longer than this is refused (MHD's own buffer is 32 KiB) */
#define TICK_MS 50            /* how often sockets holding part of a line are peeked again */

typedef struct Waiting {
    int fd;
    struct sockaddr_storage addr;
    socklen_t alen;
    int64_t since_ms;
    bool partial;             /* holds bytes but no line end yet: peeked each tick, not polled */
} Waiting;

struct HttpDoor {
    int lfd;
    int wake[2];              /* a byte here stops the thread */
    struct MHD_Daemon *d;
    int max_conns;
    int line_timeout_ms;
    atomic_int *open;         /* connections MHD holds, counted by http.c's notify callback */
    atomic_long *refused;     /* 503s, 400s and 408s, for /metrics */
    Waiting *w;
    int n_w;
    pthread_t th;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Best effort: the socket is non-blocking and the answer is small; a client
 * that does not read it loses nothing of anyone else's. */
static void answer_close(HttpDoor *door, int fd, int status, const char *reason, const char *sqlstate,
                         const char *msg)
{
    char body[256], out[512];
    int bl = snprintf(body, sizeof body, "{\"error\": {\"sqlstate\": \"%s\", \"message\": \"%s\"}}\n", sqlstate, msg);
    int ol = snprintf(out, sizeof out,
                      "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nConnection: close\r\n%s"
                      "Content-Length: %d\r\n\r\n%s",
                      status, reason, status == 503 ? "Retry-After: 1\r\n" : "", bl, body);
    ssize_t wr = send(fd, out, (size_t)ol, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)wr;
    /* Half-close, then drain briefly is not worth a thread here: shutdown
     * makes the peer see the answer before the FIN in the common case. */
    shutdown(fd, SHUT_WR);
    close(fd);
    atomic_fetch_add(door->refused, 1);
}

static bool tchar(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

int http_door_check_line(const char *p, size_t n)
{
    const char *end = memchr(p, '\n', n);
    if (!end)
        return n >= LINE_MAX_BYTES ? -1 : 0;
    size_t len = (size_t)(end - p);
    if (len && p[len - 1] == '\r')
        len--;
    size_t i = 0;
    while (i < len && i < 32 && tchar((unsigned char)p[i]))
        i++;
    if (i == 0 || i >= len || p[i] != ' ')
        return -1;
    size_t t = ++i;
    while (i < len && (unsigned char)p[i] > ' ' && (unsigned char)p[i] < 0x7f)
        i++;
    if (i == t || i >= len || p[i] != ' ')
        return -1;
    i++;
    /* HTTP/d.d and nothing after it */
    if (len - i != 8 || memcmp(p + i, "HTTP/", 5) != 0 || p[i + 5] < '0' || p[i + 5] > '9' || p[i + 6] != '.' ||
        p[i + 7] < '0' || p[i + 7] > '9')
        return -1;
    return 1;
}

static void drop_waiting(HttpDoor *door, int k)
{
    door->w[k] = door->w[--door->n_w];
}

/* 1: handed to MHD or answered (k is gone); 0: still waiting. */
static int examine(HttpDoor *door, int k)
{
    Waiting *w = &door->w[k];
    char buf[LINE_MAX_BYTES];
    ssize_t got = recv(w->fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        close(w->fd);
        drop_waiting(door, k);
        return 1;
    }
    if (got < 0)
        return 0;
    int v = http_door_check_line(buf, (size_t)got);
    if (v < 0) {
        answer_close(door, w->fd, 400, "Bad Request", "08P01", "malformed HTTP request line");
        drop_waiting(door, k);
        return 1;
    }
    if (v == 0) {
        w->partial = true;
        return 0;
    }
    /* MHD wants a blocking socket in thread-per-connection mode. */
    int fl = fcntl(w->fd, F_GETFL);
    if (fl >= 0)
        fcntl(w->fd, F_SETFL, fl & ~O_NONBLOCK);
    if (MHD_add_connection(door->d, w->fd, (const struct sockaddr *)&w->addr, w->alen) != MHD_YES) {
        /* MHD closes the socket itself on failure (its documented contract). */
        atomic_fetch_add(door->refused, 1);
    }
    drop_waiting(door, k);
    return 1;
}

static void accept_one(HttpDoor *door)
{
    Waiting w = {.alen = sizeof w.addr};
    int fd = accept4(door->lfd, (struct sockaddr *)&w.addr, &w.alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return;
    if (atomic_load(door->open) + door->n_w >= door->max_conns) {
        char msg[96];
        snprintf(msg, sizeof msg, "too many HTTP connections (at most %d); retry later", door->max_conns);
        answer_close(door, fd, 503, "Service Unavailable", "53300", msg);
        return;
    }
    w.fd = fd;
    w.since_ms = mono_ms();
    door->w[door->n_w++] = w;
}

static void *door_main(void *arg)
{
    HttpDoor *door = arg;
    struct pollfd *pf = xmalloc(sizeof *pf * (size_t)(door->max_conns + 2));
    int *idx = xmalloc(sizeof *idx * (size_t)(door->max_conns + 2));
    for (;;) {
        int n = 0;
        pf[n++] = (struct pollfd){.fd = door->wake[0], .events = POLLIN};
        pf[n++] = (struct pollfd){.fd = door->lfd, .events = POLLIN};
        for (int k = 0; k < door->n_w; k++) {
            if (door->w[k].partial)
                continue;
            idx[n] = k;
            pf[n++] = (struct pollfd){.fd = door->w[k].fd, .events = POLLIN};
        }
        int timeout = door->n_w ? TICK_MS : -1;
        int r = poll(pf, (nfds_t)n, timeout);
        if (r < 0 && errno != EINTR)
            break;
        if (pf[0].revents)
            break;
        /* Waiting sockets first, from the end, so removing one (swap with
         * the last) never moves one not yet looked at. */
        for (int j = n - 1; j >= 2; j--)
            if (pf[j].revents)
                examine(door, idx[j]);
        int64_t now = mono_ms();
        for (int k = door->n_w - 1; k >= 0; k--) {
            if (door->w[k].partial && examine(door, k))
                continue;
            if (now - door->w[k].since_ms >= door->line_timeout_ms) {
                answer_close(door, door->w[k].fd, 408, "Request Timeout", "57014",
                             "no whole HTTP request line within the timeout");
                drop_waiting(door, k);
            }
        }
        if (pf[1].revents & POLLIN)
            accept_one(door);
    }
    for (int k = 0; k < door->n_w; k++)
        close(door->w[k].fd);
    door->n_w = 0;
    free(pf);
    free(idx);
    return NULL;
}

int http_door_start(int lfd, struct MHD_Daemon *d, int max_conns, int line_timeout_ms, atomic_int *open,
                    atomic_long *refused, HttpDoor **out)
{
    HttpDoor *door = xcalloc(1, sizeof *door);
    door->lfd = lfd;
    door->d = d;
    door->max_conns = max_conns;
    door->line_timeout_ms = line_timeout_ms;
    door->open = open;
    door->refused = refused;
    door->w = xcalloc((size_t)max_conns + 1, sizeof *door->w);
    if (pipe2(door->wake, O_CLOEXEC) != 0) {
        free(door->w);
        free(door);
        return -1;
    }
    if (pthread_create(&door->th, NULL, door_main, door) != 0) {
        close(door->wake[0]);
        close(door->wake[1]);
        free(door->w);
        free(door);
        return -1;
    }
    pthread_setname_np(door->th, "weir-http-door");
    *out = door;
    return 0;
}

void http_door_stop(HttpDoor *door)
{
    if (!door)
        return;
    char c = 0;
    ssize_t wr = write(door->wake[1], &c, 1);
    (void)wr;
    pthread_join(door->th, NULL);
    close(door->wake[0]);
    close(door->wake[1]);
    close(door->lfd);
    free(door->w);
    free(door);
}
