/*
 * tz.h: time zones from the system tz database (through ICU, the only file
 * that includes it is tz.c), and the time zone code runs in.
 *
 * A zone is looked up by name once (tz_find) and is then a read-only table
 * of its UTC offset changes, shared by every thread: the hot path (an
 * offset for an instant, a local time to UTC) is a binary search and takes
 * no lock. Instants past the table (after 2200) ask ICU under the zone's lock.
 *
 * The zone code runs in is per thread (tz_current): a session sets its
 * TimeZone around each statement, the engine thread the zone a view was
 * created in around each step of that view. NULL means UTC everywhere.
 */
#ifndef WEIR_COMMON_TZ_H
#define WEIR_COMMON_TZ_H

#include <stdint.h>

#include "error.h"

/* A zone; interned: lives until the process exits, never freed. */
typedef struct WTz WTz;

/*
 * Looks up a zone: a tz database name, case-insensitively ("Europe/Berlin",
 * "america/new_york", "UTC", "Etc/GMT+3"). A NULL zone means UTC to every
 * function here. Returns 0, or -1 with err 22023 'time zone "X" not
 * recognized'. Names longer than 100 bytes are refused before any lookup.
 */
int tz_find(const char *name, const WTz **out, WError *err);

/* The zone's name as the tz database spells it; "UTC" for NULL. */
const char *tz_name(const WTz *z);

/* The zone's UTC offset (seconds east of Greenwich) at the instant
 * utc_us (microseconds since the epoch). 0 for NULL. */
int32_t tz_offset(const WTz *z, int64_t utc_us);

/*
 * The instant a local time (microseconds since 1970-01-01 00:00 on the
 * zone's wall clock) names, as Postgres resolves it: a local time in a gap
 * (spring forward) takes the offset before the change, one that occurs
 * twice (fall back) the offset after it.
 */
int64_t tz_local_to_utc(const WTz *z, int64_t local_us);

/* utc_us on the zone's wall clock (utc_us + tz_offset). */
static inline int64_t tz_utc_to_local(const WTz *z, int64_t utc_us)
{
    return utc_us + (int64_t)tz_offset(z, utc_us) * 1000000;
}

/* The zone of the calling thread (NULL: UTC), and setting it; returns the
 * previous one so callers can restore it. */
const WTz *tz_current(void);
const WTz *tz_set_current(const WTz *z);

#endif
