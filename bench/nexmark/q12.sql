-- Nexmark q12: processing-time windows: bids per bidder in 10 s windows of processing time.
-- Flink declares `p_time AS PROCTIME()` on the bid table; here a second bid source carries that
-- computed column (the same generator, so the same events) and no WATERMARK clause, so p_time is
-- its time attribute: its watermark follows the clock.
CREATE SOURCE bid_p (
    auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
    date_time TIMESTAMP, extra VARCHAR, p_time AS PROCTIME()
) WITH (connector = 'nexmark', nexmark.table.type = 'bid', nexmark.event.num = '${EVENTS}',
        nexmark.events.per.second = '${RATE}', nexmark.pace = 'false', nexmark.split.num = '1');
CREATE MATERIALIZED VIEW q12 AS
SELECT bidder, count(*) AS bid_count, window_start AS starttime, window_end AS endtime
FROM TUMBLE(bid_p, p_time, INTERVAL '10' SECOND)
GROUP BY bidder, window_start, window_end;
