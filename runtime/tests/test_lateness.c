/* test_lateness.c: the shared window rules and the ANALYZE LATENESS simulation, on
 * hand-made logs (no broker). */
#include "runtime.h"
#include "tap.h"
#include "types.h"

#define S (1000000LL)

static void test_assign(void)
{
    int64_t st[8], en[8];
    RtWindowDef tumble = {WIN_TUMBLE, 10 * S, 10 * S, 0};
    is_int(rt_window_assign(&tumble, 10 * S, st, en, 8), 1, "tumble: one window");
    is_int(st[0], 10 * S, "tumble: a row on a boundary starts the next window");
    rt_window_assign(&tumble, -1, st, en, 8);
    is_int(st[0], -10 * S, "tumble: negative times floor");
    RtWindowDef off = {WIN_TUMBLE, 10 * S, 10 * S, 3 * S};
    rt_window_assign(&off, 2 * S, st, en, 8);
    is_int(st[0], -7 * S, "tumble with offset: aligned to the offset");
    RtWindowDef hop = {WIN_HOP, 10 * S, 5 * S, 0};
    is_int(rt_window_assign(&hop, 7 * S, st, en, 8), 2, "hop: size / slide windows");
    ok(st[0] == 0 && en[0] == 10 * S && st[1] == 5 * S && en[1] == 15 * S, "hop: oldest first");
    RtWindowDef cum = {WIN_CUMULATE, 15 * S, 5 * S, 0};
    is_int(rt_window_assign(&cum, 7 * S, st, en, 8), 2, "cumulate: the windows that end after the row");
    ok(st[0] == 0 && en[0] == 10 * S && en[1] == 15 * S, "cumulate: [0, 10) and [0, 15)");
}

static void test_late(void)
{
    ok(!rt_window_late(10 * S, TS_MINUS_INF, 0), "nothing is late before the first watermark");
    ok(rt_window_late(10 * S, 15 * S, 5 * S), "end + lateness == watermark: late");
    ok(!rt_window_late(10 * S, 15 * S - 1, 5 * S), "one microsecond before: on time");
    ok(rt_window_late(10 * S, TS_PLUS_INF, 5 * S), "the end of input makes everything late");
    ok(rt_window_closed(10 * S, 10 * S) && !rt_window_closed(10 * S, 10 * S - 1), "closed at wm >= end");
}

static void test_simulate(void)
{
    /* One partition: :01 :12 :05 :25 :09 :26, 10 s tumbling windows. */
    int64_t ts[] = {1 * S, 12 * S, 5 * S, 25 * S, 9 * S, 26 * S};
    int32_t part[6] = {0};
    int64_t prows[1] = {6};
    RtLatenessLog log = {.n_parts = 1, .n_rows = 6, .ts = ts, .part = part, .part_rows = prows,
                         .clamp_limit_us = TS_PLUS_INF};
    RtWindowDef w = {WIN_TUMBLE, 10 * S, 10 * S, 0};
    int64_t bounds[] = {0, 5 * S}, lat[] = {0, 10 * S};
    RtDelayStats d[2];
    RtLatenessResult r[4];
    rt_lateness_simulate(&log, &w, 2, bounds, 2, lat, d, r, NULL, NULL);
    is_int(d[0].out_of_order, 2, "two rows out of order");
    is_int(d[0].p50_us, 0, "p50 is 0 (nearest rank)");
    is_int(d[0].max_us, 16 * S, "the largest delay: :25 then :09");
    is_int(r[0].dropped, 2, "(0, 0): :05 and :09 dropped");
    is_int(r[0].on_time, 4, "(0, 0): four in first results");
    is_int(r[1].late_updates, 1, "(0, 10 s): :05 is an update");
    is_int(r[1].dropped, 1, "(0, 10 s): :09 still dropped");
    is_int(r[0].wait_sum_us, 7 * S, "(0, 0): waits 2 s and 5 s");
    is_int(r[0].fired, 2, "(0, 0): two windows fired by the watermark");
    is_int(r[0].fired_at_end, 1, "(0, 0): one window left for the end");
    is_int(r[2].on_time, 5, "(5 s, 0): :05 on time");
    is_int(r[1].max_open, 3, "(0, 10 s): lateness keeps three windows open");
    is_int(r[0].exact_windows, 2, "(0, 0): two of three windows exact");

    /* Two partitions, the second without rows: the watermark never moves... */
    int64_t prows2[2] = {6, 0};
    log.n_parts = 2;
    log.part_rows = prows2;
    RtDelayStats d2[3];
    rt_lateness_simulate(&log, &w, 1, bounds, 1, lat, d2, r, NULL, NULL);
    is_int(r[0].dropped, 0, "an empty partition holds the watermark back");
    is_int(r[0].fired_at_end, 3, "...so every window fires at the end");
    /* ...unless the source has an idle_timeout. */
    log.idle_timeout = true;
    rt_lateness_simulate(&log, &w, 1, bounds, 1, lat, d2, r, NULL, NULL);
    is_int(r[0].dropped, 2, "with idle_timeout an empty partition does not hold it");

    /* far_future = 'clamp': the watermark stops at the limit. */
    log.n_parts = 1;
    log.part_rows = prows;
    log.idle_timeout = false;
    log.clamp_limit_us = 11 * S;
    rt_lateness_simulate(&log, &w, 1, bounds, 1, lat, d, r, NULL, NULL);
    is_int(r[0].dropped, 2, "clamped at :11: :05 and :09 still late for [:00, :10)");
    is_int(r[0].fired, 1, "clamped at :11: only [:00, :10) fires before the end");
}

static void test_session(void)
{
    /* Gap 5 s, keys 0 and 1: (0,:01) (0,:03) (1,:04) (0,:20) (0,:06) (1,:19). */
    int64_t ts[] = {1 * S, 3 * S, 4 * S, 20 * S, 6 * S, 19 * S};
    int32_t part[6] = {0}, key[] = {0, 0, 1, 0, 0, 1};
    int64_t prows[1] = {6};
    RtLatenessLog log = {.n_parts = 1, .n_rows = 6, .ts = ts, .part = part, .key = key, .n_keys = 2,
                         .part_rows = prows, .clamp_limit_us = TS_PLUS_INF};
    RtWindowDef w = {WIN_SESSION, 5 * S, 5 * S, 0};
    int64_t bounds[] = {0}, lat[] = {0, 10 * S};
    RtDelayStats d[2];
    RtLatenessResult r[2];
    rt_lateness_simulate(&log, &w, 1, bounds, 2, lat, d, r, NULL, NULL);
    /* (0, 0): :03 merges into [:01, :08); :20 fires [:01, :08) and [:04, :09) (waits 12 s
     * and 11 s) and drops them; :06's own [:06, :11) is then late. */
    is_int(r[0].pairs, 6, "session: every row counts once");
    is_int(r[0].dropped, 1, "session (0, 0): :06 dropped");
    is_int(r[0].on_time, 5, "session (0, 0): the others on time");
    is_int(r[0].windows, 4, "session (0, 0): four sessions after the merge");
    is_int(r[0].exact_windows, 3, "session (0, 0): [:01, :08) lost :06");
    is_int(r[0].fired, 2, "session (0, 0): two fired by the watermark");
    is_int(r[0].wait_sum_us, 23 * S, "session (0, 0): waits 12 s and 11 s");
    is_int(r[0].fired_at_end, 2, "session (0, 0): two open at the end");
    is_int(r[0].max_open, 3, "session (0, 0): at most three held");
    /* (0, 10 s): [:01, :08) is gone from state at :20 (8 + 10 <= 20), so :06 starts
     * [:06, :11), already closed: an update, not a merge. */
    is_int(r[1].dropped, 0, "session (0, 10 s): nothing dropped");
    is_int(r[1].late_updates, 1, "session (0, 10 s): :06 is an update");
    is_int(r[1].windows, 5, "session (0, 10 s): :06 is a session of its own");
    is_int(r[1].exact_windows, 5, "session (0, 10 s): all exact");
    /* Without keys the rows share sessions: :04 joins [:01, :08). */
    log.key = NULL;
    rt_lateness_simulate(&log, &w, 1, bounds, 1, lat, d, r, NULL, NULL);
    is_int(r[0].windows, 2, "session without keys: [:01, :09) and [:19, :25)");
    is_int(r[0].dropped, 1, "session without keys: :06 still late");
}

/* Flink's sessions: windows that touch merge, and lateness is judged after merging. */
static void test_session_touch(void)
{
    ok(rt_session_joins(0, 5 * S, 5 * S, 10 * S), "sessions that touch are one");
    ok(rt_session_joins(5 * S, 10 * S, 0, 5 * S), "... in either order");
    ok(rt_session_joins(2 * S, 7 * S, 0, 5 * S), "sessions that overlap are one");
    ok(!rt_session_joins(0, 5 * S, 5 * S + 1, 10 * S), "a microsecond apart: two sessions");
    /* Gap 5 s, one key, watermark = ts: :00, :05 (exactly the gap), :01, then :20, :15
     * (own [:15, :20) late at :20, but it touches [:20, :25)), then :07 (joins nothing
     * held: [:00, :10) went at :20; own session late: dropped). */
    int64_t ts[] = {0, 5 * S, 1 * S, 20 * S, 15 * S, 7 * S};
    int32_t part[6] = {0};
    int64_t prows[1] = {6};
    RtLatenessLog log = {.n_parts = 1, .n_rows = 6, .ts = ts, .part = part, .n_keys = 1, .part_rows = prows,
                         .clamp_limit_us = TS_PLUS_INF};
    RtWindowDef w = {WIN_SESSION, 5 * S, 5 * S, 0};
    int64_t bounds[] = {0}, lat[] = {0};
    RtDelayStats d[2];
    RtLatenessResult r[1];
    rt_lateness_simulate(&log, &w, 1, bounds, 1, lat, d, r, NULL, NULL);
    is_int(r[0].windows, 2, "touching sessions: [:00, :10) and [:15, :25)");
    is_int(r[0].dropped, 1, "touching sessions: only :07 dropped");
    is_int(r[0].on_time, 5, "touching sessions: :15 joins the open [:20, :25)");
    is_int(r[0].exact_windows, 1, "touching sessions: :07's [:07, :12) reaches [:00, :10)");
}

int main(void)
{
    test_assign();
    test_late();
    test_simulate();
    test_session();
    test_session_touch();
    return tap_done();
}
