/* test_exchange.c: the watermark rule of an exchange receiver (op_exchange.c): its watermark is
 * the minimum over its senders' last watermarks, a shard that never sends does not hold it
 * back, watermarks never go back, and a row is judged against the other senders' too. */
#include "runtime_int.h"
#include "tap.h"

static void test_min_rule(void)
{
    int64_t last[3] = {TS_MINUS_INF, TS_MINUS_INF, TS_MINUS_INF};
    is_int(rt_exchange_wm_rule(last, 3, 0, 100), TS_MINUS_INF, "one sender ahead: still held by the others");
    is_int(rt_exchange_wm_rule(last, 3, 1, 50), TS_MINUS_INF, "two senders: the third holds it");
    is_int(rt_exchange_wm_rule(last, 3, 2, 70), 50, "all have sent: the minimum");
    is_int(rt_exchange_wm_rule(last, 3, 1, 120), 70, "the slowest moves: the next minimum");
    is_int(rt_exchange_wm_rule(last, 3, 1, 10), 70, "a sender's older watermark is ignored");
    is_int(last[1], 120, "the sender's watermark never goes back");
    is_int(rt_exchange_wm_rule(last, 3, 2, TS_PLUS_INF), 100, "a sender whose input ended stops counting");
}

static void test_idle_sender(void)
{
    /* The input has one instance (shard 0): shards 1 and 2 never send. */
    int64_t last[3] = {TS_MINUS_INF, TS_PLUS_INF, TS_PLUS_INF};
    is_int(rt_exchange_wm_rule(last, 3, 0, 42), 42, "only shard 0 sends: its watermark passes through");
    /* A source instance with no partitions sends +infinity at once. */
    int64_t l2[2] = {TS_MINUS_INF, TS_MINUS_INF};
    is_int(rt_exchange_wm_rule(l2, 2, 1, TS_PLUS_INF), TS_MINUS_INF, "an empty instance's +infinity...");
    is_int(rt_exchange_wm_rule(l2, 2, 0, 7), 7, "...leaves the other's watermark in charge");
}

static void test_row_rule(void)
{
    int64_t last[3] = {30, 10, 20};
    is_int(rt_exchange_row_wm(last, 3, 0, 25), 10, "a row is judged against the slowest other sender");
    is_int(rt_exchange_row_wm(last, 3, 1, 5), 5, "a row's own older watermark stays");
    is_int(rt_exchange_row_wm(last, 3, 1, 40), 20, "its own sender's last watermark does not count");
    int64_t one[1] = {TS_MINUS_INF};
    is_int(rt_exchange_row_wm(one, 1, 0, 99), 99, "a single sender: the row keeps its watermark");
}

int main(void)
{
    test_min_rule();
    test_idle_sender();
    test_row_rule();
    return tap_done();
}
