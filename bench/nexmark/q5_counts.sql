-- weir extra (not a published query): the inner half of q5, bids per auction in HOP windows
-- of 2 s slide and 10 s size. A windowed aggregation that weir runs today.
CREATE MATERIALIZED VIEW q5_counts AS
SELECT auction, count(*) AS num, window_start, window_end
FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
GROUP BY auction, window_start, window_end;
