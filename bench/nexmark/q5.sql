-- Nexmark q5: hot items. HOP windows (2 s slide, 10 s size) counted per auction, joined with
-- the per-window maximum. Needs a join of two aggregations of the same source.
CREATE MATERIALIZED VIEW q5 AS
SELECT AuctionBids.auction, AuctionBids.num
FROM (
    SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime
    FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
    GROUP BY auction, window_start, window_end
) AS AuctionBids
JOIN (
    SELECT max(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
    FROM (
        SELECT count(*) AS num, window_start AS starttime, window_end AS endtime
        FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
        GROUP BY auction, window_start, window_end
    ) AS CountBids
    GROUP BY CountBids.starttime, CountBids.endtime
) AS MaxBids
ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime
   AND AuctionBids.num >= MaxBids.maxn;
