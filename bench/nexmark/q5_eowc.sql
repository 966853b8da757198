-- Nexmark q5 (hot items) with the HOP counts emitted once per window, when the watermark closes
-- it (EMIT ON WINDOW CLOSE), as Flink's window aggregations emit: the counts are a view of their
-- own (a view's emit mode applies to its top aggregation), and q5 joins them with their
-- per-window maximum. Same result as q5.sql; with final counts the HOP runs in panes and the
-- maximum never sees a retraction.
CREATE MATERIALIZED VIEW q5_counts AS
SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime
FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
GROUP BY auction, window_start, window_end EMIT ON WINDOW CLOSE;
CREATE MATERIALIZED VIEW q5 AS
SELECT c.auction, c.num
FROM q5_counts c JOIN (
    SELECT max(num) AS maxn, starttime, endtime FROM q5_counts GROUP BY starttime, endtime
) m ON c.starttime = m.starttime AND c.endtime = m.endtime AND c.num >= m.maxn;
