-- Nexmark q1: currency conversion (dollar to euro). The spec's sink column is DECIMAL(23, 3);
-- weir has no NUMERIC values yet, so the price is DOUBLE PRECISION.
CREATE MATERIALIZED VIEW q1 AS
SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid;
