/* log.c: see log.h. A level read once from the environment, a line
 * formatted on the stack and written with one write(2). */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static const char *const NAMES[] = {"ERROR", "WARN", "INFO", "DEBUG"};

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static _Atomic int level = WLOG_INFO;
static _Atomic bool level_set;   /* wlog_set_level was called: the environment does not apply */
static _Atomic int out_fd = 2;
static const char *bad_env;      /* an unknown WEIR_LOG_LEVEL, reported by the first wlog_enabled */
static _Atomic bool bad_env_told;

/* WEIR_LOG_LEVEL, once; an unknown value is reported and ignored. */
static void read_env(void)
{
    const char *v = getenv("WEIR_LOG_LEVEL");
    WLogLevel l;
    if (!v || !*v || atomic_load(&level_set))
        return;
    if (wlog_level_parse(v, &l) == 0)
        atomic_store(&level, (int)l);
    else
        bad_env = v;  /* wlog here would re-enter pthread_once */
}

int wlog_level_parse(const char *s, WLogLevel *out)
{
    static const struct { const char *name; WLogLevel l; } L[] = {
        {"error", WLOG_ERROR}, {"warn", WLOG_WARN}, {"warning", WLOG_WARN}, {"info", WLOG_INFO}, {"debug", WLOG_DEBUG},
    };
    for (size_t i = 0; s && i < sizeof L / sizeof L[0]; i++)
        if (strcasecmp(s, L[i].name) == 0) {
            *out = L[i].l;
            return 0;
        }
    return -1;
}

void wlog_set_level(WLogLevel lvl)
{
    atomic_store(&level_set, true);
    atomic_store(&level, (int)lvl);
}

void wlog_set_fd(int fd) { atomic_store(&out_fd, fd); }

bool wlog_enabled(WLogLevel lvl)
{
    pthread_once(&env_once, read_env);
    if (bad_env && !atomic_exchange(&bad_env_told, true))
        wlog(WLOG_WARN, "log", "ignoring WEIR_LOG_LEVEL=\"%s\" (want error, warn, info or debug)", bad_env);
    return (int)lvl <= atomic_load(&level);
}

void wlog_v(WLogLevel lvl, const char *module, const char *fmt, va_list ap)
{
    if (!wlog_enabled(lvl))
        return;
    int saved_errno = errno;  /* callers may log between a failure and reading errno */
    char line[WLOG_MAX_LINE];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s [%s] weir: ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L,
                     NAMES[lvl < WLOG_ERROR || lvl > WLOG_DEBUG ? WLOG_ERROR : lvl], module ? module : "weir");
    if (n < 0 || n >= (int)sizeof line - 1)
        n = 0;
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);  /* one byte kept for the newline */
    if (m < 0)
        m = 0;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof line - 2) {  /* cut: mark it */
        len = sizeof line - 2;
        line[len - 3] = line[len - 2] = line[len - 1] = '.';
    }
    line[len++] = '\n';
    for (size_t off = 0; off < len;) {
        ssize_t w = write(atomic_load(&out_fd), line + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;  /* nowhere to report that the log failed */
        off += (size_t)w;
    }
    errno = saved_errno;
}

void wlog(WLogLevel lvl, const char *module, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    wlog_v(lvl, module, fmt, ap);
    va_end(ap);
}
