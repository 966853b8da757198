-- Nexmark q4: average closing price per category: a join of auctions and bids, then two
-- levels of aggregation (the inner max is retracted and updated). Needs joins over two
-- sources, subqueries over a join, and streaming_allow_unbounded_state.
SET streaming_allow_unbounded_state = true;
CREATE MATERIALIZED VIEW q4 AS
SELECT Q.category, AVG(Q.final) AS avg_final
FROM (
    SELECT MAX(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category;
