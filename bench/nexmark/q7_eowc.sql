-- Nexmark q7 (highest bid) with the per-window maximum emitted once per window, when the
-- watermark closes it (EMIT ON WINDOW CLOSE), as Flink's group window aggregation emits: the
-- maximum is a view of its own (a view's emit mode applies to its top aggregation). Both inputs
-- of the join are then append-only and the WHERE time bound makes it an interval join, whose
-- state the watermarks bound (q7.sql's maximum is a changelog, so its join keeps every bid).
-- Same result as q7.sql once the windows have closed.
CREATE MATERIALIZED VIEW q7_max AS
SELECT max(price) AS maxprice, window_end AS date_time
FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND)
GROUP BY window_start, window_end EMIT ON WINDOW CLOSE;
CREATE MATERIALIZED VIEW q7 AS
SELECT B.auction, B.bidder, B.price, B.date_time, B.extra
FROM bid B JOIN q7_max B1 ON B.price = B1.maxprice
WHERE B.date_time BETWEEN B1.date_time - INTERVAL '10' SECOND AND B1.date_time;
