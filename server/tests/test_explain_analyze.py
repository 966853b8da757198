#!/usr/bin/python3
"""test_explain_analyze.py: EXPLAIN ANALYZE MATERIALIZED VIEW v, with psycopg2.

Views over writable tables (no Kafka), fed by INSERT, so the test knows
every count: a filter's rows in and out and its view's state entries after
the DML's checkpoint; a windowed aggregation's late rows after a late row
and its watermark; a join's probes and hits with known matches; a parallel view over the
nexmark generator (its source's rows are the view's records). Rates times
the window give the counts back (every view here is younger than the
window). The text form has one figures line per operator; FORMAT JSON the
same figures per node; GET /api/views/<v>/analyze the same document.
Errors: EXPLAIN ANALYZE of a statement 0A000 (with a hint), an unknown view
42P01, a table 42809. TAP output.

usage: test_explain_analyze.py WEIR_EXE
"""
import json
import os
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from weirproc import Tap, Weir, free_port  # noqa: E402

import psycopg2  # noqa: E402


def connect(w):
    c = psycopg2.connect(host="127.0.0.1", port=w.port, dbname="weir", user="weir", sslmode="disable")
    c.autocommit = True
    return c


def error_of(cur, sql):
    try:
        cur.execute(sql)
        return None, None
    except psycopg2.Error as e:
        return e.pgcode, e.diag.message_hint


def analyze_json(cur, view):
    cur.execute("EXPLAIN (ANALYZE, FORMAT JSON) MATERIALIZED VIEW %s" % view)
    rows = cur.fetchall()
    assert len(rows) == 1, rows
    return json.loads(rows[0][0])


def nodes(plan):
    """Every node of an EXPLAIN JSON tree, depth first."""
    out = [plan]
    for i in plan.get("inputs", []):
        out += nodes(i)
    return out


def by_operator(doc, name):
    return [n for n in nodes(doc["plan"]) if n["operator"] == name]


def main():
    t = Tap()
    http_port = free_port()
    w = Weir(sys.argv[1], "--http-port", str(http_port))
    try:
        c = connect(w)
        cur = c.cursor()

        # A filter: 5 rows in, 3 out, 3 entries in the view's state.
        cur.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT)")
        cur.execute("CREATE MATERIALIZED VIEW f AS SELECT k, v FROM t WHERE v > 10")
        cur.execute("INSERT INTO t VALUES (1, 5), (2, 15), (3, 25), (4, 0), (5, 50)")
        doc = analyze_json(cur, "f")
        t.ok(doc["view"] == "f" and doc["window_s"] > 0, "JSON: the view and the window", doc)
        flt = by_operator(doc, "Filter")
        mat = by_operator(doc, "Materialize")
        t.ok(len(flt) == 1 and len(mat) == 1, "JSON: the plan's tree", json.dumps(doc)[:2000])
        fa, ma = flt[0]["analyze"], mat[0]["analyze"]
        t.ok(fa["rows_in"] == 5 and fa["rows_out"] == 3, "filter: 5 rows in, 3 out", fa)
        t.ok(ma["rows_in"] == 3, "materialize: 3 rows in", ma)
        t.ok(ma["state_entries"] == 3 and ma["state_pending"] == 0 and ma["state_bytes"] > 0,
             "materialize: 3 entries checkpointed by the INSERT, none pending", ma)
        t.ok(fa["state_entries"] is None and fa["probes"] is None and fa["watermark"] is None,
             "filter: no state, no probes, no watermark", fa)
        win = doc["window_s"]
        # Both rates are over the same window (the view's age here, a few ms, shown rounded to
        # the ms): their ratio is exact, and each times the window is its count to within the
        # window's rounding.
        rin, rout = fa["rows_in_per_s"], fa["rows_out_per_s"]
        t.ok(rin > 0 and abs(rout / rin - 3 / 5) < 1e-3 and abs(rin * win - 5) <= max(0.2, rin * 0.0006),
             "rates over the window give the counts back (the view is younger than the window)", (fa, win))
        t.ok(all(0 <= n["analyze"]["busy"] <= 1 and 0 <= n["analyze"]["backpressure"] <= 1 for n in nodes(doc["plan"])),
             "busy and backpressure are shares", doc)
        t.ok(any(n["analyze"]["busy"] > 0 for n in nodes(doc["plan"])),
             "some operator was busy", doc)
        t.ok(fa["backpressure"] > 0, "the filter waited on the materialize below it", fa)

        # The counters move.
        cur.execute("INSERT INTO t VALUES (6, 60)")
        fa2 = by_operator(analyze_json(cur, "f"), "Filter")[0]["analyze"]
        t.ok(fa2["rows_in"] == 6 and fa2["rows_out"] == 4, "filter: counters move with the next row", fa2)

        # Text: a header, then per operator its line and a line of figures.
        cur.execute("EXPLAIN ANALYZE MATERIALIZED VIEW f")
        lines = [r[0] for r in cur.fetchall()]
        t.ok(lines[0].startswith("EXPLAIN ANALYZE of f: totals since the view started, rates over the last"),
             "text: the header", lines)
        ops = [ln for ln in lines if "Stream" in ln]
        figs = [ln for ln in lines if "rows in:" in ln]
        t.ok(len(ops) >= 3 and len(figs) == len(ops), "text: one figures line per operator", "\n".join(lines))
        t.ok(any("rows in: 6 (" in ln and ", out: 4 (" in ln for ln in figs), "text: the filter's counts",
             "\n".join(lines))
        t.ok(any("state: " in ln and " 3 entries" not in ln and "4 entries (+0 pending)" in ln for ln in figs),
             "text: the materialize's state", "\n".join(lines))

        # Plain EXPLAIN of the running view: its plan, no figures.
        cur.execute("EXPLAIN MATERIALIZED VIEW f")
        plain = [r[0] for r in cur.fetchall()]
        t.ok(plain and not any("rows in:" in ln for ln in plain) and any("StreamFilter" in ln for ln in plain),
             "EXPLAIN MATERIALIZED VIEW: the plan without figures", plain)

        # Late rows and the watermark: a tumbling window closed by the watermark.
        cur.execute("CREATE TABLE hits (id INT PRIMARY KEY, ts TIMESTAMP, WATERMARK FOR ts AS ts) APPEND ONLY")
        cur.execute("CREATE MATERIALIZED VIEW per10 AS SELECT window_start, count(*) AS n "
                    "FROM TUMBLE(hits, ts, INTERVAL '10' SECOND) GROUP BY window_start EMIT ON WINDOW CLOSE")
        cur.execute("INSERT INTO hits VALUES (1, '2026-01-01 00:00:01'), (2, '2026-01-01 00:00:05'), "
                    "(3, '2026-01-01 00:00:12')")
        doc = analyze_json(cur, "per10")
        late0 = sum(n["analyze"]["late_rows"] for n in nodes(doc["plan"]))
        cur.execute("INSERT INTO hits VALUES (4, '2026-01-01 00:00:03')")
        doc = analyze_json(cur, "per10")
        agg = by_operator(doc, "HashAgg")
        wop = by_operator(doc, "Window")
        late = sum(n["analyze"]["late_rows"] for n in nodes(doc["plan"]))
        t.ok(late0 == 0 and late == 1 and wop and wop[0]["analyze"]["late_rows"] == 1,
             "one late row counted (by the window, which drops it) after a late row is sent", (late0, late))
        wms = [n["analyze"]["watermark"] for n in nodes(doc["plan"]) if n["analyze"]["watermark"]]
        t.ok(wms and all(x == "2026-01-01 00:00:12" for x in wms), "the operators' watermark", wms)
        t.ok(all(n["analyze"]["watermark_delay_ms"] > 0 for n in nodes(doc["plan"]) if n["analyze"]["watermark"]),
             "the watermark's delay behind the clock", doc)
        vs = by_operator(doc, "ViewSource")
        t.ok(vs and vs[0]["analyze"]["rows_out"] == 4 and vs[0]["analyze"]["rows_in"] == 4,
             "the view source: the table's 4 rows in and out", vs)
        t.ok(all(0 <= n["analyze"]["busy"] <= 1 for n in nodes(doc["plan"])), "busy shares over a view source", doc)
        t.ok(agg and agg[0]["analyze"]["state_entries"] is not None, "the aggregation's state",
             [n["operator"] for n in nodes(doc["plan"])])

        # A join: b's 2 rows probe an empty a (no hit), then a's 4 rows find 2 partners.
        cur.execute("CREATE TABLE a (k INT PRIMARY KEY, x INT)")
        cur.execute("CREATE TABLE b (k INT PRIMARY KEY, y INT)")
        cur.execute("CREATE MATERIALIZED VIEW j AS SELECT a.k, x, y FROM a JOIN b ON a.k = b.k")
        cur.execute("INSERT INTO b VALUES (1, 10), (2, 20)")
        cur.execute("INSERT INTO a VALUES (1, 1), (2, 2), (3, 3), (4, 4)")
        doc = analyze_json(cur, "j")
        ja = by_operator(doc, "Join")
        t.ok(len(ja) == 1, "the join", [n["operator"] for n in nodes(doc["plan"])])
        if ja:
            x = ja[0]["analyze"]
            t.ok(x["probes"] == 6 and x["probe_hits"] == 2 and abs(x["probe_hit_rate"] - 2 / 6) < 1e-6,
                 "join: 6 probes, 2 hits", x)
            t.ok(x["rows_in"] == 6 and x["rows_out"] == 2, "join: 6 rows in, 2 out", x)
            t.ok(x["busy"] > 0, "join: its ports' time is the join's", x)
        cur.execute("EXPLAIN ANALYZE MATERIALIZED VIEW j")
        text = "\n".join(r[0] for r in cur.fetchall())
        t.ok("probes: 6, hits: 2 (33.3%)" in text, "text: the join's hit rate", text)

        # A parallel view: a node's instances add up, exchanges in the tree.
        cur.execute("CREATE SOURCE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, "
                    "date_time TIMESTAMP, extra VARCHAR, WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND) "
                    "WITH (connector = 'nexmark', nexmark.table.type = 'bid', nexmark.event.num = '20000', "
                    "nexmark.events.per.second = '200', nexmark.max.chunk.size = '256')")
        cur.execute("CREATE MATERIALIZED VIEW per_auction WITH (streaming_parallelism = 2) AS "
                    "SELECT auction, count(*) AS n FROM bid GROUP BY auction")
        cur.execute("FLUSH")
        cur.execute("SELECT records_in FROM weir_views WHERE name = 'per_auction'")
        records = cur.fetchone()[0]
        doc = analyze_json(cur, "per_auction")
        src = by_operator(doc, "Source")
        agg = by_operator(doc, "HashAgg")
        t.ok(records > 0 and src and src[0]["analyze"]["rows_out"] == records and "broker_wait" in src[0]["analyze"],
             "parallel: the source's rows out are the view's records", (records, src and src[0]["analyze"]))
        t.ok(agg and agg[0]["analyze"]["rows_in"] == records and by_operator(doc, "Exchange"),
             "parallel: the aggregation's rows in, through an exchange", [n["operator"] for n in nodes(doc["plan"])])
        t.ok(all(0 <= n["analyze"]["busy"] <= 2 for n in nodes(doc["plan"]) if n.get("analyze")),
             "parallel: busy shares of 2 instances", doc)
        t.ok(agg and agg[0]["analyze"]["state_entries"] is not None and agg[0]["analyze"]["state_bytes"] > 0,
             "parallel: the aggregation's state over its instances", agg and agg[0]["analyze"])

        # Errors.
        code, hint = error_of(cur, "EXPLAIN ANALYZE SELECT 1")
        t.ok(code == "0A000" and hint and "MATERIALIZED VIEW" in hint, "EXPLAIN ANALYZE SELECT: 0A000 with a hint",
             (code, hint))
        code, _ = error_of(cur, "EXPLAIN (ANALYZE, FORMAT JSON) CREATE MATERIALIZED VIEW z AS SELECT k FROM t")
        t.ok(code == "0A000", "EXPLAIN ANALYZE CREATE MATERIALIZED VIEW: 0A000", code)
        code, _ = error_of(cur, "EXPLAIN (ANALYZE false) SELECT 1")
        t.ok(code is None, "ANALYZE false is a plain EXPLAIN", code)
        code, _ = error_of(cur, "EXPLAIN ANALYZE MATERIALIZED VIEW nosuch")
        t.ok(code == "42P01", "an unknown view: 42P01", code)
        code, _ = error_of(cur, "EXPLAIN ANALYZE MATERIALIZED VIEW t")
        t.ok(code == "42809", "a table: 42809", code)

        # HTTP: the same document.
        with urllib.request.urlopen("http://127.0.0.1:%d/api/views/j/analyze" % http_port, timeout=10) as r:
            hd = json.loads(r.read())
        hj = by_operator(hd, "Join")
        t.ok(hd["view"] == "j" and hj and hj[0]["analyze"]["probe_hits"] == 2, "GET /api/views/j/analyze", hd)
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/api/views/nosuch/analyze" % http_port, timeout=10)
            status = 200
        except urllib.error.HTTPError as e:
            status = e.code
        t.ok(status == 404, "GET /api/views/nosuch/analyze: 404", status)
        c.close()
    finally:
        rc = w.stop()
        t.ok(rc == 0, "server exits cleanly", w.log() if rc else "")
        w.cleanup()
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
