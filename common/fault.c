/* fault.c: see fault.h. Only compiled with -Dfault_injection=true; the
 * rules are parsed once from WEIR_FAULT, and every point's calls are counted
 * under one mutex (test builds only, so simplicity beats speed). */
#include "fault.h"
#include "log.h"

#ifdef WEIR_FAULT_INJECTION

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_POINTS 64

typedef struct Rule {
    char name[48];
    long nth;        /* the first call that fails (1-based) */
    bool always;     /* every call from nth on fails, not just that one */
    bool hold;       /* every call from nth on waits while $WEIR_FAULT_HOLD exists, then succeeds */
} Rule;

typedef struct Point {
    const char *name;  /* the literal passed to FAULT() */
    long calls;
} Point;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static Rule rules[FAULT_MAX_RULES];
static int n_rules;
static Point points[MAX_POINTS];
static int n_points;
static const char *counts_path;
static const char *hold_path;

static void counts_at_exit(void)
{
    FILE *f = fopen(counts_path, "w");
    if (!f)
        return;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n_points; i++)
        fprintf(f, "%s %ld\n", points[i].name, points[i].calls);
    pthread_mutex_unlock(&mu);
    fclose(f);
}

/* Parses "name:N[:once|:always|:hold]" rules separated by commas; a malformed
 * rule is reported and ignored, so a typo cannot pass for a clean run. */
static void init(void)
{
    const char *v = getenv("WEIR_FAULT");
    counts_path = getenv("WEIR_FAULT_COUNTS");
    hold_path = getenv("WEIR_FAULT_HOLD");
    if (counts_path && *counts_path)
        atexit(counts_at_exit);
    while (v && *v && n_rules < FAULT_MAX_RULES) {
        const char *end = strchr(v, ',');
        size_t len = end ? (size_t)(end - v) : strlen(v);
        char spec[128];
        if (len < sizeof spec) {
            memcpy(spec, v, len);
            spec[len] = 0;
            char *c1 = strchr(spec, ':');
            char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
            Rule *r = &rules[n_rules];
            if (c1 && (size_t)(c1 - spec) < sizeof r->name) {
                *c1 = 0;
                if (c2)
                    *c2 = 0;
                char *num_end;
                long nth = strtol(c1 + 1, &num_end, 10);
                bool always = c2 && !strcmp(c2 + 1, "always");
                bool hold = c2 && !strcmp(c2 + 1, "hold") && hold_path && *hold_path;
                if (nth >= 1 && *num_end == 0 && (!c2 || always || hold || !strcmp(c2 + 1, "once"))) {
                    memcpy(r->name, spec, (size_t)(c1 - spec) + 1); /* length checked above */
                    r->nth = nth;
                    r->always = always;
                    r->hold = hold;
                    n_rules++;
                    v = end ? end + 1 : NULL;
                    continue;
                }
            }
        }
        wlog_warn("fault", "WEIR_FAULT: ignoring malformed rule \"%.*s\" (want point:N[:once|:always], or "
                        "point:N:hold with WEIR_FAULT_HOLD set)",
                (int)len, v);
        v = end ? end + 1 : NULL;
    }
}

bool fault_hit(const char *name)
{
    pthread_once(&once, init);
    if (n_rules == 0 && !counts_path)
        return false;
    pthread_mutex_lock(&mu);
    Point *p = NULL;
    for (int i = 0; i < n_points && !p; i++)
        if (points[i].name == name || !strcmp(points[i].name, name))
            p = &points[i];
    if (!p && n_points < MAX_POINTS) {
        p = &points[n_points++];
        p->name = name;
        p->calls = 0;
    }
    long call = p ? ++p->calls : 0;
    bool fail = false, hold = false;
    for (int i = 0; i < n_rules && !fail && !hold; i++)
        if (!strcmp(rules[i].name, name)) {
            hold = rules[i].hold && call >= rules[i].nth;
            fail = !rules[i].hold && (rules[i].always ? call >= rules[i].nth : call == rules[i].nth);
        }
    pthread_mutex_unlock(&mu);
    if (hold && access(hold_path, F_OK) == 0) {
        /* A target that hangs, then comes back: the call goes on once the test removes the file. */
        wlog_warn("fault", "fault injected: %s (call %ld) held while %s exists", name, call, hold_path);
        while (access(hold_path, F_OK) == 0)
            usleep(20 * 1000);
    }
    if (fail)
        wlog_warn("fault", "fault injected: %s (call %ld)", name, call);
    return fail;
}

#endif
