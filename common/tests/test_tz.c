/*
 * test_tz.c: tz.c against known facts of the tz database: offsets on both
 * sides of daylight saving changes (north and south), zones with offsets
 * that are not whole hours, local times that happen twice or never, names
 * in any case, unknown names, instants past the 2200 table end, and the
 * per-thread current zone.
 */
#include "tz.h"
#include "tap.h"

#include <pthread.h>
#include <string.h>

#define US(s) ((int64_t)(s) * 1000000)
#define H 3600

/* 2024-03-31 01:00:00 UTC and 2024-10-27 01:00:00 UTC: Europe's changes. */
#define SPRING 1711846800LL
#define FALL 1729990800LL

static const WTz *find(const char *name)
{
    const WTz *z = NULL;
    WError e = {0};
    if (tz_find(name, &z, &e))
        diag("tz_find(%s): %s", name, e.msg);
    return z;
}

static void *other_thread(void *arg)
{
    (void)arg;
    return (void *)tz_current(); /* a new thread starts in UTC */
}

int main(void)
{
    const WTz *berlin = find("europe/BERLIN");
    ok(berlin != NULL, "a name in any case");
    is_str(tz_name(berlin), "Europe/Berlin", "the database's spelling");
    ok(find("Europe/Berlin") == berlin, "interned: one zone per name");
    is_str(tz_name(NULL), "UTC", "NULL is UTC");

    is_int(tz_offset(berlin, US(SPRING - 1)), 1 * H, "before spring forward: +01");
    is_int(tz_offset(berlin, US(SPRING)), 2 * H, "at spring forward: +02");
    is_int(tz_offset(berlin, US(FALL - 1)), 2 * H, "before fall back: +02");
    is_int(tz_offset(berlin, US(FALL)), 1 * H, "at fall back: +01");
    is_int(tz_offset(NULL, US(SPRING)), 0, "UTC");

    /* 2024-03-31 02:30 never happens in Berlin: the offset before (+01). */
    int64_t local = US(SPRING + H + 30 * 60);
    is_int(tz_local_to_utc(berlin, local), US(SPRING + 30 * 60), "a skipped local time takes the earlier offset");
    /* 2024-10-27 02:30 happens twice: the offset after (+01). */
    local = US(FALL + H + 30 * 60);
    is_int(tz_local_to_utc(berlin, local), US(FALL + 30 * 60), "a repeated local time takes the later offset");
    /* Just before and after a change resolve to the only valid instant. */
    is_int(tz_local_to_utc(berlin, US(SPRING + H - 1)), US(SPRING - 1), "local time just before the gap");
    is_int(tz_local_to_utc(berlin, US(SPRING + 2 * H)), US(SPRING), "local time just after the gap");
    is_int(tz_utc_to_local(berlin, US(FALL)), US(FALL + H), "utc to local after fall back");

    const WTz *kol = find("Asia/Kolkata"), *ktm = find("Asia/Kathmandu"), *sj = find("America/St_Johns");
    is_int(tz_offset(kol, US(SPRING)), 5 * H + 30 * 60, "Kolkata +05:30");
    is_int(tz_offset(ktm, US(SPRING)), 5 * H + 45 * 60, "Kathmandu +05:45");
    is_int(tz_offset(sj, US(FALL - 86400)), -(2 * H + 30 * 60), "St John's in summer -02:30");

    /* Southern hemisphere: Sydney is +11 in January, +10 in July. */
    const WTz *syd = find("Australia/Sydney");
    is_int(tz_offset(syd, US(1704067200LL)), 11 * H, "Sydney in January +11");
    is_int(tz_offset(syd, US(1719792000LL)), 10 * H, "Sydney in July +10");

    /* Past the table (2200): ICU answers; 2250-06-30 in New York is daylight time, 2249-12-30 is not. */
    const WTz *ny = find("America/New_York");
    is_int(tz_offset(ny, US(8851507200LL)), -4 * H, "mid-2250 in New York: -04 (past the table)");
    is_int(tz_offset(ny, US(8835782400LL)), -5 * H, "end of 2249 in New York: -05");

    const WTz *z = NULL;
    WError e = {0};
    ok(tz_find("Nowhere/Land", &z, &e) == -1, "an unknown name fails");
    is_str(e.sqlstate, "22023", "with 22023");
    is_str(e.msg, "time zone \"Nowhere/Land\" not recognized", "and Postgres's message");
    char longname[300];
    memset(longname, 'A', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    WError e2 = {0};
    ok(tz_find(longname, &z, &e2) == -1 && !strcmp(e2.sqlstate, "22023"), "an over-long name fails before lookup");

    ok(tz_current() == NULL, "a thread starts in UTC");
    ok(tz_set_current(berlin) == NULL && tz_current() == berlin, "set returns the previous zone");
    pthread_t t;
    void *seen = (void *)1;
    pthread_create(&t, NULL, other_thread, NULL);
    pthread_join(t, &seen);
    ok(seen == NULL, "the current zone is per thread");
    tz_set_current(NULL);
    return tap_done();
}
