-- Nexmark q22 (extended suite): get URL directories (SPLIT_INDEX in Flink, split_part here;
-- split_part counts from 1 and the URL starts "https:", "", "www.nexmark.com").
CREATE MATERIALIZED VIEW q22 AS
SELECT auction, bidder, price, channel,
    split_part(url, '/', 4) AS dir1,
    split_part(url, '/', 5) AS dir2,
    split_part(url, '/', 6) AS dir3
FROM bid;
