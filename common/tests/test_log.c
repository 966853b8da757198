/* test_log.c: the logger (log.h): one line per message with an ISO timestamp,
 * the level, the module and "weir: "; levels filter; WEIR_LOG_LEVEL and
 * wlog_set_level; an over-long message is cut, never overflowing. Also the
 * clock helpers (clock.h) and xstrndup (arena.h). */
#include "arena.h"
#include "clock.h"
#include "log.h"
#include "tap.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char got[2 * WLOG_MAX_LINE];

/* What the logger wrote to fd since the last call (the file is emptied). */
static const char *drain(int fd)
{
    off_t n = lseek(fd, 0, SEEK_END);
    ssize_t r = n > 0 ? pread(fd, got, (size_t)n < sizeof got ? (size_t)n : sizeof got - 1, 0) : 0;
    got[r > 0 ? r : 0] = 0;
    if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0)
        got[0] = 0;
    return got;
}

static int matches(const char *s, const char *re)
{
    regex_t rx;
    if (regcomp(&rx, re, REG_EXTENDED | REG_NEWLINE) != 0)
        return 0;
    int m = regexec(&rx, s, 0, NULL, 0) == 0;
    regfree(&rx);
    return m;
}

int main(void)
{
    /* The environment is read at the first message: set before any. */
    setenv("WEIR_LOG_LEVEL", "warn", 1);
    char path[] = "/tmp/test_log_XXXXXX";
    int f = mkstemp(path);
    unlink(path);
    wlog_set_fd(f);

    wlog_info("engine", "not written at warn");
    ok(drain(f)[0] == 0, "WEIR_LOG_LEVEL=warn: info is not written");
    wlog_warn("engine", "view %s stopped: %s", "v", "boom");
    const char *l = drain(f);
    ok(matches(l, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z WARN \\[engine\\] "
                  "weir: view v stopped: boom\n$"),
       "one line: ISO timestamp, level, module, weir: and the message");
    diag("%s", l);
    wlog_error("arena", "out of memory allocating %zu bytes", (size_t)12);
    ok(strstr(drain(f), " ERROR [arena] weir: out of memory allocating 12 bytes\n") != NULL, "error is written at warn");

    WLogLevel lv;
    ok(wlog_level_parse("DEBUG", &lv) == 0 && lv == WLOG_DEBUG, "parse: DEBUG (any case)");
    ok(wlog_level_parse("warning", &lv) == 0 && lv == WLOG_WARN, "parse: warning");
    ok(wlog_level_parse("loud", &lv) == -1, "parse: an unknown level is refused");

    wlog_set_level(WLOG_ERROR);
    wlog_warn("engine", "quiet");
    ok(drain(f)[0] == 0 && !wlog_enabled(WLOG_WARN) && wlog_enabled(WLOG_ERROR),
       "wlog_set_level(error) overrides the environment: warn is not written");
    wlog_set_level(WLOG_DEBUG);
    wlog_debug("planner", "%d", 42);
    ok(strstr(drain(f), " DEBUG [planner] weir: 42\n") != NULL, "debug is written at debug");

    static char big[3 * WLOG_MAX_LINE];
    memset(big, 'x', sizeof big - 1);
    wlog_info("engine", "%s", big);
    l = drain(f);
    size_t n = strlen(l);
    ok(n == WLOG_MAX_LINE - 1 && l[n - 1] == '\n' && !strncmp(l + n - 4, "...", 3) && !strchr(l, '\n')[1],
       "an over-long message is cut to one line of WLOG_MAX_LINE bytes ending in ...");

    int64_t m0 = clock_mono_ms(), u0 = clock_mono_us(), w = clock_wall_us(), wm = clock_wall_ms();
    usleep(20000);
    ok(clock_mono_ms() - m0 >= 19 && clock_mono_us() - u0 >= 19000, "the monotonic clock advances (ms and us)");
    ok(w > INT64_C(1600000000) * 1000000 && wm / 1000 - w / 1000000 <= 1, "wall clock: microseconds and ms since 1970");

    char *d = xstrndup("abcdef", 3);
    is_str(d, "abc", "xstrndup: the first n bytes");
    free(d);
    d = xstrndup("ab", 10);
    is_str(d, "ab", "xstrndup: a shorter string whole");
    free(d);
    close(f);
    return tap_done();
}
