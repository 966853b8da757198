-- Nexmark q1: currency conversion (dollar to euro). The spec's sink column is DECIMAL(23, 3);
-- 0.908 is a numeric literal (as in PostgreSQL), so the price is an exact numeric (332.328).
CREATE MATERIALIZED VIEW q1 AS
SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid;
