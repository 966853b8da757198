/*
 * tap.h: a tiny TAP producer for unit tests (header only).
 *   ok(cond, "name"); is_int(got, want, "name"); is_str(got, want, "name");
 *   return tap_done();   -- prints the plan and returns nonzero on failure
 */
#ifndef WEIR_COMMON_TAP_H
#define WEIR_COMMON_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_n_ = 0, tap_failed_ = 0;

static inline int tap_ok_(int cond, const char *name, const char *file, int line)
{
    ++tap_n_;
    printf("%sok %d - %s\n", cond ? "" : "not ", tap_n_, name);
    if (!cond) {
        ++tap_failed_;
        printf("#   failed at %s:%d\n", file, line);
    }
    fflush(stdout);
    return cond;
}

#define ok(cond, name) tap_ok_(!!(cond), (name), __FILE__, __LINE__)
#define is_int(got, want, name)                                                        \
    do {                                                                               \
        long long g_ = (long long)(got), w_ = (long long)(want);                      \
        if (!tap_ok_(g_ == w_, (name), __FILE__, __LINE__))                            \
            printf("#   got %lld, want %lld\n", g_, w_);                               \
    } while (0)
#define is_str(got, want, name)                                                        \
    do {                                                                               \
        const char *g_ = (got), *w_ = (want);                                          \
        if (!tap_ok_(g_ && w_ && strcmp(g_, w_) == 0, (name), __FILE__, __LINE__))     \
            printf("#   got '%s', want '%s'\n", g_ ? g_ : "(null)", w_ ? w_ : "(null)"); \
    } while (0)
/* A comment line; a message of several lines (libpq's errors) stays a
 * comment on each, so the TAP reader does not see stray output. */
__attribute__((format(printf, 1, 2))) static inline void diag(const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (const char *p = buf;;) {
        const char *nl = strchr(p, '\n');
        printf("# %.*s\n", nl ? (int)(nl - p) : (int)strlen(p), p);
        if (!nl || !nl[1])
            break;
        p = nl + 1;
    }
}

static inline int tap_done(void)
{
    printf("1..%d\n", tap_n_);
    return tap_failed_ ? 1 : 0;
}

#endif
