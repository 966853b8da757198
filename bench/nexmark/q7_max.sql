-- weir extra (not a published query): the inner half of q7, the highest price per 10 s
-- tumbling window, final results only.
CREATE MATERIALIZED VIEW q7_max AS
SELECT window_start, window_end, max(price) AS maxprice, count(*) AS n
FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND)
GROUP BY window_start, window_end
EMIT ON WINDOW CLOSE;
