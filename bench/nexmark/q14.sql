-- Nexmark q14 (extended suite): calculation. The published query calls a count_char UDF on
-- extra and HOUR(dateTime); here EXTRACT(HOUR FROM date_time) and no UDF.
CREATE MATERIALIZED VIEW q14 AS
SELECT auction, bidder, 0.908 * price AS price,
    CASE
        WHEN EXTRACT(HOUR FROM date_time) >= 8 AND EXTRACT(HOUR FROM date_time) <= 18 THEN 'dayTime'
        WHEN EXTRACT(HOUR FROM date_time) <= 6 OR EXTRACT(HOUR FROM date_time) >= 20 THEN 'nightTime'
        ELSE 'otherTime'
    END AS bid_time_type,
    date_time, extra
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000;
