-- Nexmark q12: processing-time windows: bids per bidder in 10 s windows of PROCTIME().
-- Needs PROCTIME() as a window time column.
CREATE MATERIALIZED VIEW q12 AS
SELECT bidder, count(*) AS bid_count, window_start AS starttime, window_end AS endtime
FROM TUMBLE((SELECT *, PROCTIME() AS p_time FROM bid), p_time, INTERVAL '10' SECOND)
GROUP BY bidder, window_start, window_end;
