/* test_exchange.c: the watermark rule of an exchange receiver (op_exchange.c): its watermark is
 * the minimum over its senders' last watermarks, a shard that never sends does not hold it
 * back, watermarks never go back, a sender whose partitions are all idle is left out until it
 * sends again, and a row is judged against the other senders' too. */
#include "runtime_int.h"
#include "tap.h"

static void test_min_rule(void)
{
    int64_t last[3] = {TS_MINUS_INF, TS_MINUS_INF, TS_MINUS_INF};
    bool idle[3] = {false, false, false};
    is_int(rt_exchange_wm_rule(last, idle, 3, 0, 100), TS_MINUS_INF, "one sender ahead: still held by the others");
    is_int(rt_exchange_wm_rule(last, idle, 3, 1, 50), TS_MINUS_INF, "two senders: the third holds it");
    is_int(rt_exchange_wm_rule(last, idle, 3, 2, 70), 50, "all have sent: the minimum");
    is_int(rt_exchange_wm_rule(last, idle, 3, 1, 120), 70, "the slowest moves: the next minimum");
    is_int(rt_exchange_wm_rule(last, idle, 3, 1, 10), 70, "a sender's older watermark is ignored");
    is_int(last[1], 120, "the sender's watermark never goes back");
    is_int(rt_exchange_wm_rule(last, idle, 3, 2, TS_PLUS_INF), 100, "a sender whose input ended stops counting");
}

static void test_idle_sender(void)
{
    /* The input has one instance (shard 0): shards 1 and 2 never send. */
    int64_t last[3] = {TS_MINUS_INF, TS_PLUS_INF, TS_PLUS_INF};
    bool idle[3] = {false, false, false};
    is_int(rt_exchange_wm_rule(last, idle, 3, 0, 42), 42, "only shard 0 sends: its watermark passes through");
    /* A source instance with no partitions sends +infinity at once. */
    int64_t l2[2] = {TS_MINUS_INF, TS_MINUS_INF};
    bool i2[2] = {false, false};
    is_int(rt_exchange_wm_rule(l2, i2, 2, 1, TS_PLUS_INF), TS_MINUS_INF, "an empty instance's +infinity...");
    is_int(rt_exchange_wm_rule(l2, i2, 2, 0, 7), 7, "...leaves the other's watermark in charge");
}

static void test_idle_partitions(void)
{
    /* Instance 1's partitions went idle (idle_timeout) before any data. */
    int64_t last[2] = {TS_MINUS_INF, TS_MINUS_INF};
    bool idle[2] = {false, false};
    is_int(rt_exchange_wm_rule(last, idle, 2, 0, 12), TS_MINUS_INF, "a silent instance holds the watermark...");
    is_int(rt_exchange_wm_rule(last, idle, 2, 1, RT_WM_IDLE), 12, "...until it says it is idle");
    is_int(rt_exchange_wm_rule(last, idle, 2, 0, 20), 20, "the active instance leads");
    is_int(rt_exchange_row_wm(last, idle, 2, 0, 19), 19, "rows are not held by an idle instance");
    is_int(rt_exchange_wm_rule(last, idle, 2, 0, RT_WM_IDLE), 20,
           "all idle: those that had a watermark keep it, the others do not count");
    is_int(rt_exchange_wm_rule(last, idle, 2, 1, TS_MINUS_INF), TS_MINUS_INF,
           "data again at the idle instance: it counts again (the receiver does not move back)");
    ok(!idle[1], "the instance is active again");
}

static void test_row_rule(void)
{
    int64_t last[3] = {30, 10, 20};
    bool idle[3] = {false, false, false};
    is_int(rt_exchange_row_wm(last, idle, 3, 0, 25), 10, "a row is judged against the slowest other sender");
    is_int(rt_exchange_row_wm(last, idle, 3, 1, 5), 5, "a row's own older watermark stays");
    is_int(rt_exchange_row_wm(last, idle, 3, 1, 40), 20, "its own sender's last watermark does not count");
    int64_t one[1] = {TS_MINUS_INF};
    bool none[1] = {false};
    is_int(rt_exchange_row_wm(one, none, 1, 0, 99), 99, "a single sender: the row keeps its watermark");
}

int main(void)
{
    test_min_rule();
    test_idle_sender();
    test_idle_partitions();
    test_row_rule();
    return tap_done();
}
