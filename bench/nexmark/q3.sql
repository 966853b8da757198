-- Nexmark q3: local item suggestion, an incremental (regular, unbounded-state) join of
-- auctions and persons. Needs regular joins and streaming_allow_unbounded_state.
SET streaming_allow_unbounded_state = true;
CREATE MATERIALIZED VIEW q3 AS
SELECT P.name, P.city, P.state, A.id
FROM auction AS A INNER JOIN person AS P ON A.seller = P.id
WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');
