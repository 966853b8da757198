-- Nexmark q7: highest bid per 10 s tumbling window, joined back to the bids.
CREATE MATERIALIZED VIEW q7 AS
SELECT B.auction, B.bidder, B.price, B.date_time, B.extra
FROM bid B
JOIN (
    SELECT MAX(price) AS maxprice, window_end AS date_time
    FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND)
    GROUP BY window_start, window_end
) B1
ON B.price = B1.maxprice
WHERE B.date_time BETWEEN B1.date_time - INTERVAL '10' SECOND AND B1.date_time;
