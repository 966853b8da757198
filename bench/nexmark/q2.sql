-- Nexmark q2: selection. MOD(auction, 123) is written with weir's % operator.
CREATE MATERIALIZED VIEW q2 AS
SELECT auction, price FROM bid WHERE auction % 123 = 0;
