"""bench/side_by_side_queries.py: the queries of bench/side_by_side.py in DuckDB, PostgreSQL and SQLite.

Each entry is one weir view (bench/nexmark/<name>.sql) written the way a user of the other engine
would write it, over the three tables a CSV of `weir nexmark` loads (every field, in the order
the spec lists them). Windows are the same: TUMBLE(10 s) starts at multiples of 10 s since the
epoch, HOP(2 s slide, 10 s size) puts an event in the five windows starting at floor(t / 2 s) * 2 s
minus 0..4 slides. SQLite has no timestamp type: its date_time columns hold the CSV's text and
windows are computed on epoch milliseconds (julianday, rounded: exact to the millisecond).
"""

# Columns per table, as weir nexmark --format csv prints them. "ts" = a timestamp.
TABLES = {
    "person": [("id", "int"), ("name", "text"), ("email_address", "text"), ("credit_card", "text"),
               ("city", "text"), ("state", "text"), ("date_time", "ts"), ("extra", "text")],
    "auction": [("id", "int"), ("item_name", "text"), ("description", "text"), ("initial_bid", "int"),
                ("reserve", "int"), ("date_time", "ts"), ("expires", "ts"), ("seller", "int"),
                ("category", "int"), ("extra", "text")],
    "bid": [("auction", "int"), ("bidder", "int"), ("price", "int"), ("channel", "text"), ("url", "text"),
            ("date_time", "ts"), ("extra", "text")],
}

TYPES = {
    "duckdb": {"int": "BIGINT", "text": "VARCHAR", "ts": "TIMESTAMP"},
    "postgresql": {"int": "BIGINT", "text": "TEXT", "ts": "TIMESTAMP"},
    "sqlite": {"int": "INTEGER", "text": "TEXT", "ts": "TEXT"},
}


def create_table(engine, table):
    cols = ", ".join(f"{n} {TYPES[engine][t]}" for n, t in TABLES[table])
    return f"CREATE TABLE {table} ({cols})"


# Window helpers per engine, as SQL text with {t} for the timestamp column.
_MS = {
    "duckdb": "epoch_ms({t})",
    "postgresql": "(extract(epoch FROM {t}) * 1000)::bigint",
    "sqlite": "CAST(round((julianday({t}) - 2440587.5) * 86400000) AS INTEGER)",
}
_TS = {  # epoch ms (an integer expression) back to the engine's timestamp
    "duckdb": "epoch_ms({ms})",
    "postgresql": "(to_timestamp(({ms}) / 1000.0) AT TIME ZONE 'UTC')",
    "sqlite": "strftime('%Y-%m-%d %H:%M:%f', ({ms}) / 1000.0, 'unixepoch')",
}


def _tumble_start(engine, t, ms):
    """The start of t's tumbling window of ms milliseconds (a timestamp in DuckDB and PostgreSQL)."""
    if engine == "duckdb":
        return f"time_bucket(INTERVAL '{ms} milliseconds', {t}, TIMESTAMP '1970-01-01')"
    if engine == "postgresql":
        return f"date_bin(INTERVAL '{ms} milliseconds', {t}, TIMESTAMP '1970-01-01')"
    m = _MS[engine].format(t=t)
    return _TS[engine].format(ms=f"({m}) / {ms} * {ms}")


def _plus(engine, ts, ms):
    """Timestamp expression ts plus ms milliseconds."""
    if engine == "sqlite":
        return _TS[engine].format(ms=f"{_MS[engine].format(t=ts)} + ({ms})")
    return f"({ts} + INTERVAL '{ms} milliseconds')"


def _hop(engine):
    """bid with a column ws: the start of each of its five HOP(2 s, 10 s) windows (one row each)."""
    if engine == "sqlite":
        ms = _MS[engine].format(t="date_time")
        ws = _TS[engine].format(ms=f"({ms} / 2000 - k.k) * 2000")
        return f"(SELECT bid.auction, {ws} AS ws FROM bid, (SELECT 0 AS k UNION ALL SELECT 1 UNION ALL " \
               f"SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4) k)"
    start = _tumble_start(engine, "date_time", 2000)
    return f"(SELECT bid.auction, {start} - k.k * INTERVAL '2 seconds' AS ws FROM bid, " \
           f"(VALUES (0), (1), (2), (3), (4)) AS k(k))"


def query(engine, name):
    """(tables needed, SELECT text) of view name in engine; None if not written here."""
    if name == "q0":
        return ["bid"], "SELECT auction, bidder, price, date_time, extra FROM bid"
    if name == "q1":
        return ["bid"], "SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid"
    if name == "q2":
        return ["bid"], "SELECT auction, price FROM bid WHERE auction % 123 = 0"
    if name == "q3":
        return ["person", "auction"], (
            "SELECT P.name, P.city, P.state, A.id FROM auction AS A JOIN person AS P ON A.seller = P.id "
            "WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')")
    if name == "q4":
        between = "B.date_time BETWEEN A.date_time AND A.expires"
        if engine == "sqlite":  # text times of varying length: compare as milliseconds
            m = _MS[engine]
            between = f"{m.format(t='B.date_time')} BETWEEN {m.format(t='A.date_time')} AND {m.format(t='A.expires')}"
        return ["auction", "bid"], (
            "SELECT Q.category, AVG(Q.final) AS avg_final FROM ("
            " SELECT MAX(B.price) AS final, A.category FROM auction A, bid B"
            f" WHERE A.id = B.auction AND {between}"
            " GROUP BY A.id, A.category) Q GROUP BY Q.category")
    if name == "q5":
        h = _hop(engine)
        return ["bid"], (
            f"WITH counts AS (SELECT auction, ws, count(*) AS num FROM {h} AS h GROUP BY auction, ws), "
            "maxes AS (SELECT ws, max(num) AS maxn FROM counts GROUP BY ws) "
            "SELECT c.auction, c.num FROM counts c JOIN maxes m ON c.ws = m.ws AND c.num >= m.maxn")
    if name == "q7" and engine == "sqlite":  # on milliseconds, as above
        m = _MS[engine].format(t="date_time")
        return ["bid"], (
            "SELECT B.auction, B.bidder, B.price, B.date_time, B.extra FROM bid B JOIN ("
            f" SELECT MAX(price) AS maxprice, ({m}) / 10000 * 10000 + 10000 AS we FROM bid GROUP BY 2) B1"
            f" ON B.price = B1.maxprice WHERE {_MS[engine].format(t='B.date_time')} BETWEEN B1.we - 10000 AND B1.we")
    if name == "q7":
        we = _plus(engine, _tumble_start(engine, "date_time", 10000), 10000)
        lo = _plus(engine, "B1.date_time", -10000)
        return ["bid"], (
            "SELECT B.auction, B.bidder, B.price, B.date_time, B.extra FROM bid B JOIN ("
            f" SELECT MAX(price) AS maxprice, {we} AS date_time FROM bid GROUP BY 2) B1"
            f" ON B.price = B1.maxprice WHERE B.date_time BETWEEN {lo} AND B1.date_time")
    if name == "q8":
        pw = _tumble_start(engine, "date_time", 10000)
        return ["person", "auction"], (
            f"SELECT P.id, P.name, P.starttime FROM ("
            f" SELECT id, name, {pw} AS starttime FROM person GROUP BY id, name, 3) P JOIN ("
            f" SELECT seller, {pw} AS starttime FROM auction GROUP BY seller, 2) A"
            " ON P.id = A.seller AND P.starttime = A.starttime")
    if name == "q_tumble":
        ws = _tumble_start(engine, "date_time", 10000)
        return ["bid"], f"SELECT {ws} AS window_start, auction, count(*) AS n, max(price) AS top FROM bid GROUP BY 1, 2"
    return None
