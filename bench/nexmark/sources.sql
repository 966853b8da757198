-- The three Nexmark streams as sources of one generator (bench/nexmark/run.sh substitutes
-- ${EVENTS}, ${RATE} and ${PACE}). Same options on all three, so they describe one stream:
-- bids refer to the auctions and persons the other two produce.
CREATE SOURCE person (
    id BIGINT, name VARCHAR, email_address VARCHAR, credit_card VARCHAR, city VARCHAR, state VARCHAR,
    date_time TIMESTAMP, extra VARCHAR,
    WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (connector = 'nexmark', nexmark.table.type = 'person', nexmark.event.num = '${EVENTS}',
        nexmark.events.per.second = '${RATE}', nexmark.pace = '${PACE}', nexmark.split.num = '1');
CREATE SOURCE auction (
    id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT, reserve BIGINT,
    date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra VARCHAR,
    WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (connector = 'nexmark', nexmark.table.type = 'auction', nexmark.event.num = '${EVENTS}',
        nexmark.events.per.second = '${RATE}', nexmark.pace = '${PACE}', nexmark.split.num = '1');
CREATE SOURCE bid (
    auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
    date_time TIMESTAMP, extra VARCHAR,
    WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (connector = 'nexmark', nexmark.table.type = 'bid', nexmark.event.num = '${EVENTS}',
        nexmark.events.per.second = '${RATE}', nexmark.pace = '${PACE}', nexmark.split.num = '1');
