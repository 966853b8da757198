/* crashpoint.c: see crashpoint.h. */
#include "crashpoint.h"
#include "log.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char target[64];
static long nth;
static _Atomic long hits;

static void init(void)
{
    const char *v = getenv("WEIR_CRASH_AT");
    if (!v)
        return;
    const char *colon = strchr(v, ':');
    size_t n = colon ? (size_t)(colon - v) : strlen(v);
    if (n >= sizeof target)
        return;
    memcpy(target, v, n);
    target[n] = 0;
    nth = colon ? atol(colon + 1) : 1;
    if (nth < 1)
        nth = 1;
}

void crashpoint(const char *name)
{
    pthread_once(&once, init);
    if (!target[0] || strcmp(target, name) != 0)
        return;
    if (atomic_fetch_add(&hits, 1) + 1 == nth) {
        wlog_warn("crashpoint", "crashpoint %s reached (hit %ld): killing myself", name, nth);
        kill(getpid(), SIGKILL);
    }
}
