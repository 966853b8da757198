-- weir extra (not a published query): bids, volume and top price per 10 ms tumbling window (at
-- the default 10M events/s of event time, ~100K events a window). A hot key: every bid of a
-- window goes to the one group of that window, so at streaming_parallelism > 1 in one phase a
-- single instance aggregates everything; in two phases (planner/plan_dist.c) each instance
-- pre-aggregates its bids and only partial rows cross the exchange.
CREATE MATERIALIZED VIEW q_window_count AS
SELECT window_start, window_end, count(*) AS bids, sum(price) AS volume, max(price) AS top
FROM TUMBLE(bid, date_time, INTERVAL '10 milliseconds')
GROUP BY window_start, window_end;
