/*
 * clock.h: the two clocks weir reads, in one place.
 *
 * Monotonic time (CLOCK_MONOTONIC) measures intervals: timeouts, deadlines,
 * idle detection, how long a commit took. It never jumps when the system
 * clock is set, so a deadline computed from it holds. Wall-clock time
 * (CLOCK_REALTIME) is what a user or another process reads: now(), a
 * processing-time watermark, timestamps in system views and in the cluster's
 * heartbeat records. Never mix the two in one subtraction.
 *
 * A condition variable's or pthread_timedjoin_np's deadline is an absolute
 * struct timespec on CLOCK_REALTIME (their default clock); those callers
 * build it with clock_gettime directly, as POSIX wants.
 *
 * Inline: the watermark and the exchange read the clock per chunk.
 */
#ifndef WEIR_COMMON_CLOCK_H
#define WEIR_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Monotonic milliseconds since an arbitrary start (boot, usually). */
static inline int64_t clock_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Monotonic microseconds since an arbitrary start. */
static inline int64_t clock_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Monotonic nanoseconds since an arbitrary start: the operators' busy time
 * (EXPLAIN ANALYZE), read twice per chunk pushed, never per row. */
static inline int64_t clock_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Wall-clock microseconds since 1970-01-01 UTC (a timestamptz's unit). */
static inline int64_t clock_wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Wall-clock milliseconds since 1970-01-01 UTC (Kafka's timestamp unit). */
static inline int64_t clock_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
