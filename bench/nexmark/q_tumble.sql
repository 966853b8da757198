-- weir extra (not a published query): bids and top price per auction per 10 s tumbling window,
-- the aggregation bench/reference.sh computes in PostgreSQL and SQLite (and
-- bench/side_by_side.sh in DuckDB too).
CREATE MATERIALIZED VIEW q_tumble AS
SELECT window_start, auction, count(*) AS n, max(price) AS top
FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND)
GROUP BY window_start, auction;
