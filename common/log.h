/*
 * log.h: the one logger of the server's modules.
 *
 * Every message the server writes for its operator (a view stopped, a
 * checkpoint failed, Kafka unreachable) goes through wlog_*: one line on
 * standard error, written with one write(2) so lines of concurrent threads
 * never interleave:
 *
 *     2026-12-02T02:40:51.002Z WARN [engine] weir: view v stopped: ...
 *
 * an ISO 8601 UTC timestamp with milliseconds, the level, the module (the
 * file or subsystem that speaks), then the message after "weir: ". The
 * "weir: " stays so a line reads the same as the messages of `main` (usage
 * errors, refusals at start) that are printed plainly and that scripts grep.
 *
 * The level is the most verbose one written: error < warn < info < debug.
 * It is set by `--log-level` (server/main.c, wlog_set_level), else by the
 * environment variable WEIR_LOG_LEVEL, else info. Levels: error (something
 * failed and was not retried), warn (something degraded or is retried),
 * info (a state change an operator wants to see: running again, resumed),
 * debug (detail for a developer).
 *
 * Never allocates (a line is formatted on the stack, at most
 * WLOG_MAX_LINE bytes, longer ones end in "..."), so xmalloc's
 * out-of-memory report can use it.
 */
#ifndef WEIR_COMMON_LOG_H
#define WEIR_COMMON_LOG_H

#include <stdarg.h>
#include <stdbool.h>

typedef enum WLogLevel {
    WLOG_ERROR = 0,
    WLOG_WARN = 1,
    WLOG_INFO = 2,
    WLOG_DEBUG = 3,
} WLogLevel;

/* Longest line written, newline included; a longer message is cut. */
#define WLOG_MAX_LINE 4096

/* Writes one line at level lvl for module (a short lowercase word) unless
 * the current level is less verbose. Thread-safe. */
void wlog(WLogLevel lvl, const char *module, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void wlog_v(WLogLevel lvl, const char *module, const char *fmt, va_list ap);

#define wlog_error(module, ...) wlog(WLOG_ERROR, module, __VA_ARGS__)
#define wlog_warn(module, ...)  wlog(WLOG_WARN, module, __VA_ARGS__)
#define wlog_info(module, ...)  wlog(WLOG_INFO, module, __VA_ARGS__)
#define wlog_debug(module, ...) wlog(WLOG_DEBUG, module, __VA_ARGS__)

/* True when a message at lvl would be written (to skip building costly
 * arguments of a debug message). */
bool wlog_enabled(WLogLevel lvl);

/* Sets the level, overriding WEIR_LOG_LEVEL. */
void wlog_set_level(WLogLevel lvl);

/* Parses "error", "warn" (or "warning"), "info" or "debug" (any case).
 * Returns 0 and sets *out, or -1 for anything else. */
int wlog_level_parse(const char *s, WLogLevel *out);

/* Where lines go: a file descriptor, 2 (standard error) by default. For
 * tests; not thread-safe against concurrent wlog calls. */
void wlog_set_fd(int fd);

#endif
