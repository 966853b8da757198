-- Nexmark q0: pass through. Measures the source, the chunk path and the view's row store
-- (a non-grouped view keeps one row per input row: there is no stateless sink-only view).
CREATE MATERIALIZED VIEW q0 AS
SELECT auction, bidder, price, date_time, extra FROM bid;
