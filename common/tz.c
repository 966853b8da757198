/*
 * tz.c: time zones over ICU's copy of the tz database (the only file that
 * includes ICU). See tz.h.
 *
 * ICU calendars are not thread-safe and slow to ask per row, so a zone is
 * turned into a table of offset changes once, when it is first named:
 * every change from 1800 to 2200 (a few hundred entries for a zone with
 * daylight saving time). Lookups in that range are a binary search with no
 * lock; an instant after it asks ICU under the zone's mutex. Before 1800 the
 * first offset of the table holds (local mean time, as Postgres keeps it).
 * Zones are interned and never freed: a session or a view holds a plain
 * pointer for as long as it likes.
 */
#include "tz.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <unicode/ucal.h>
#include <unicode/uenum.h>
#include <unicode/ustring.h>

#include "arena.h"

#define TZ_NAME_MAX 100
#define MS_1800 (-5364662400000.0) /* 1800-01-01 00:00 UTC, ms */
#define MS_2200 (7258118400000.0)  /* 2200-01-01 00:00 UTC, ms */

struct WTz {
    char *name;              /* as the tz database spells it */
    int n;                   /* offset changes in [1800, 2200) */
    int64_t *at_us;          /* n instants, ascending */
    int32_t *off;            /* n offsets (seconds east), from at_us[i] on */
    int32_t off_before;      /* before at_us[0] (or always, when n == 0) */
    pthread_mutex_t lock;    /* guards cal */
    UCalendar *cal;          /* for instants from 2200 on */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static WTz **g_zones;        /* interned, under g_lock */
static int g_n, g_cap;
static char **g_ids;         /* every zone ID ICU knows, loaded once */
static int g_n_ids;
static _Thread_local const WTz *t_current;

static void load_ids(void)
{
    UErrorCode st = U_ZERO_ERROR;
    UEnumeration *en = ucal_openTimeZoneIDEnumeration(UCAL_ZONE_TYPE_ANY, NULL, NULL, &st);
    if (U_FAILURE(st))
        return;
    int cap = 0;
    const char *id;
    int32_t len;
    while ((id = uenum_next(en, &len, &st)) && U_SUCCESS(st)) {
        if (g_n_ids == cap) {
            cap = cap ? cap * 2 : 512;
            g_ids = xrealloc(g_ids, sizeof(char *) * (size_t)cap);
        }
        g_ids[g_n_ids++] = xstrdup(id);
    }
    uenum_close(en);
}

static int32_t cal_offset(UCalendar *cal, UDate ms)
{
    UErrorCode st = U_ZERO_ERROR;
    ucal_setMillis(cal, ms, &st);
    int32_t z = ucal_get(cal, UCAL_ZONE_OFFSET, &st), d = ucal_get(cal, UCAL_DST_OFFSET, &st);
    return U_FAILURE(st) ? 0 : (z + d) / 1000;
}

/* A new zone for the ICU ID id, with its table built; NULL if ICU cannot open it. */
static WTz *build(const char *id)
{
    UChar uid[TZ_NAME_MAX + 1];
    u_uastrncpy(uid, id, TZ_NAME_MAX);
    uid[TZ_NAME_MAX] = 0;
    UErrorCode st = U_ZERO_ERROR;
    UCalendar *cal = ucal_open(uid, -1, "en_US", UCAL_GREGORIAN, &st);
    if (U_FAILURE(st))
        return NULL;
    WTz *z = xcalloc(1, sizeof *z);
    z->name = xstrdup(id);
    z->cal = cal;
    pthread_mutex_init(&z->lock, NULL);
    z->off_before = cal_offset(cal, MS_1800);
    int cap = 0;
    int32_t last = z->off_before;
    UDate at = MS_1800;
    for (;;) {
        UDate next;
        ucal_setMillis(cal, at, &st);
        if (!ucal_getTimeZoneTransitionDate(cal, UCAL_TZ_TRANSITION_NEXT, &next, &st) || U_FAILURE(st) ||
            next >= MS_2200 || next <= at)
            break;
        at = next;
        int32_t off = cal_offset(cal, next);
        if (off == last)
            continue; /* a change of name or of the DST flag only */
        if (z->n == cap) {
            cap = cap ? cap * 2 : 64;
            z->at_us = xrealloc(z->at_us, sizeof(int64_t) * (size_t)cap);
            z->off = xrealloc(z->off, sizeof(int32_t) * (size_t)cap);
        }
        z->at_us[z->n] = (int64_t)next * 1000;
        z->off[z->n++] = off;
        last = off;
    }
    return z;
}

int tz_find(const char *name, const WTz **out, WError *err)
{
    size_t len = strlen(name);
    if (len == 0 || len > TZ_NAME_MAX)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "time zone \"%.*s\" not recognized", TZ_NAME_MAX, name);
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_n; i++)
        if (strcasecmp(g_zones[i]->name, name) == 0) {
            *out = g_zones[i];
            pthread_mutex_unlock(&g_lock);
            return 0;
        }
    if (!g_ids)
        load_ids();
    const char *id = NULL;
    for (int i = 0; i < g_n_ids && !id; i++)
        if (strcasecmp(g_ids[i], name) == 0)
            id = g_ids[i];
    WTz *z = id ? build(id) : NULL;
    if (z) {
        if (g_n == g_cap) {
            g_cap = g_cap ? g_cap * 2 : 16;
            g_zones = xrealloc(g_zones, sizeof(WTz *) * (size_t)g_cap);
        }
        g_zones[g_n++] = z;
    }
    pthread_mutex_unlock(&g_lock);
    if (!z)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "time zone \"%s\" not recognized", name);
    *out = z;
    return 0;
}

const char *tz_name(const WTz *z)
{
    return z ? z->name : "UTC";
}

int32_t tz_offset(const WTz *z, int64_t utc_us)
{
    if (!z)
        return 0;
    if (utc_us >= (int64_t)MS_2200 * 1000) {
        WTz *m = (WTz *)z; /* the lock and calendar are the mutable part */
        pthread_mutex_lock(&m->lock);
        int32_t off = cal_offset(m->cal, (UDate)(utc_us / 1000));
        pthread_mutex_unlock(&m->lock);
        return off;
    }
    int lo = 0, hi = z->n; /* the first change after utc_us */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (z->at_us[mid] <= utc_us)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? z->off_before : z->off[lo - 1];
}

int64_t tz_local_to_utc(const WTz *z, int64_t local_us)
{
    if (!z)
        return local_us;
    /* Offset changes are never closer than a couple of days: the offsets a
     * day before and a day after are the only candidates. */
    const int64_t day = 86400LL * 1000000;
    int64_t before = (int64_t)tz_offset(z, local_us - day) * 1000000;
    int64_t after = (int64_t)tz_offset(z, local_us + day) * 1000000;
    if (before == after)
        return local_us - before;
    bool ok_before = (int64_t)tz_offset(z, local_us - before) * 1000000 == before;
    bool ok_after = (int64_t)tz_offset(z, local_us - after) * 1000000 == after;
    if (ok_before != ok_after)
        return local_us - (ok_before ? before : after);
    /* Twice (fall back: before > after) takes the offset after the change;
     * never (spring forward) the offset before it, as Postgres does. */
    return local_us - (before > after ? after : before);
}

const WTz *tz_current(void)
{
    return t_current;
}

const WTz *tz_set_current(const WTz *z)
{
    const WTz *old = t_current;
    t_current = z;
    return old;
}
