#!/usr/bin/python3
"""join_diff.py: every streaming join kind, checked against SQLite over the same rows.

Generates two bounded inputs with random keys (some NULL), event times with disorder within the
watermark bound (so no row is late) and duplicates, writes them to two Kafka topics, and runs in
weir, over bounded sources (whose end fires everything):
- interval joins INNER, LEFT, RIGHT and FULL (b.ts BETWEEN a.ts - 2 s AND a.ts + 3 s, inclusive);
- window joins INNER and FULL of 10 s tumbling windows;
- regular joins INNER and LEFT of two writable tables, after inserts, updates and deletes;
- an event-time temporal join (LEFT) of the stream against a versioned table.
Each view's final contents (a multiset of rows) must equal what SQLite computes with plain SQL
over the same rows: zero missing, zero extra.

    /usr/bin/python3 tests/sim/join_diff.py --weir build/server/weir [--rows N] [--seed S]

The last line of stdout is "N passed, N failed".
"""
import argparse
import collections
import datetime
import json
import os
import random
import sqlite3
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
try:
    from confluent_kafka import Producer
    from weirtest import Stack
except ImportError as e:  # pragma: no cover
    sys.exit(f"join_diff.py: {e}: run it with /usr/bin/python3 (python3-psycopg2, python3-confluent-kafka)")

BASE = datetime.datetime(2026, 1, 1)
BOUND_MS = 5_000          # watermark bound; disorder stays below it, so nothing is late


def ts_text(ms):
    return (BASE + datetime.timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def norm(v):
    if isinstance(v, datetime.datetime):
        return int((v - BASE) / datetime.timedelta(milliseconds=1))
    return v


def stream(rng, n, n_keys, step_ms, tag):
    """Rows (k, v, ts_ms) in arrival order: event time advances step_ms on average, arrival
    is disordered by up to 4 s, a few keys are NULL, some rows repeat exactly."""
    rows = []
    for i in range(n):
        k = None if rng.random() < 0.03 else rng.randrange(n_keys)
        ts = i * step_ms + rng.randrange(step_ms)
        rows.append((k, f"{tag}{i}", ts))
        if rng.random() < 0.02:
            rows.append(rows[-1])
    arrival = sorted(rows, key=lambda r: r[2] + rng.randrange(4000))
    return arrival


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weir", required=True)
    ap.add_argument("--rows", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=11)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    left = stream(rng, a.rows, 40, 200, "l")
    right = stream(rng, a.rows // 2, 40, 400, "r")
    # A versioned table: (k, price, ts) versions in time order; price None is a delete.
    versions = []
    for i in range(a.rows // 5):
        versions.append((rng.randrange(40), rng.randrange(1000), i * 1500 + rng.randrange(1500)))
    versions.sort(key=lambda r: r[2])
    # Tombstones: a delete ends its key at the largest version time read so far (a tombstone
    # carries only the key), so it sits at the time of the version before it in the topic.
    with_deletes = []
    for v in versions:
        with_deletes.append(v)
        if rng.random() < 0.05:
            with_deletes.append((rng.randrange(40), None, v[2]))
    versions = with_deletes

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE a (k INTEGER, v TEXT, ts INTEGER)")
    db.execute("CREATE TABLE b (k INTEGER, v TEXT, ts INTEGER)")
    db.executemany("INSERT INTO a VALUES (?, ?, ?)", left)
    db.executemany("INSERT INTO b VALUES (?, ?, ?)", right)

    w = None
    passed = failed = 0

    def check(name, got, want):
        nonlocal passed, failed
        g, e = collections.Counter(got), collections.Counter(want)
        if g == e:
            passed += 1
            print(f"ok - {name} ({sum(e.values())} rows)")
        else:
            failed += 1
            print(f"not ok - {name}: {sum((e - g).values())} missing, {sum((g - e).values())} extra "
                  f"(e.g. missing {list((e - g))[:2]}, extra {list((g - e))[:2]})")

    try:
        w = Stack(a.weir, prefix="weir-joindiff-")
        p = Producer({"bootstrap.servers": w.kafka, "linger.ms": 5})
        for topic, rows in (("jd_a", left), ("jd_b", right)):
            w.q(f"CREATE SOURCE probe_{topic} (k BIGINT) WITH (connector = 'kafka', topic = '{topic}')")
            for k, v, ts in rows:
                p.produce(topic, json.dumps({"k": k, "v": v, "ts": ts_text(ts)}).encode(), partition=0)
        if p.flush(30) != 0:
            raise RuntimeError("could not produce the inputs")
        for name, topic in (("a", "jd_a"), ("b", "jd_b")):
            w.q(f"CREATE SOURCE {name} (k BIGINT, v TEXT, ts TIMESTAMP, "
                f"WATERMARK FOR ts AS ts - INTERVAL '{BOUND_MS} milliseconds') "
                f"WITH (connector = 'kafka', topic = '{topic}', scan.bounded.mode = 'latest')")

        # Interval joins: b.ts within [a.ts - 2 s, a.ts + 3 s], inclusive.
        cond_w = "a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '2' SECOND AND a.ts + INTERVAL '3' SECOND"
        cond_s = "a.k = b.k AND b.ts BETWEEN a.ts - 2000 AND a.ts + 3000"
        kinds = {"inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT JOIN", "full": "FULL JOIN"}
        for kind, sqlk in kinds.items():
            w.q(f"CREATE MATERIALIZED VIEW ij_{kind} AS SELECT a.v AS av, b.v AS bv FROM a {sqlk} b ON {cond_w}")
        # Window joins on 10 s tumbling windows.
        for kind in ("inner", "full"):
            w.q(f"CREATE MATERIALIZED VIEW wj_{kind} AS SELECT l.v AS av, r.v AS bv, "
                f"COALESCE(l.window_start, r.window_start) AS ws "
                f"FROM (SELECT * FROM TUMBLE(a, ts, INTERVAL '10' SECOND)) l {kinds[kind]} "
                f"(SELECT * FROM TUMBLE(b, ts, INTERVAL '10' SECOND)) r "
                f"ON l.k = r.k AND l.window_start = r.window_start AND l.window_end = r.window_end")
        w.q("FLUSH")
        sqlite_kinds = {"inner": "JOIN", "left": "LEFT JOIN"}
        for kind in kinds:
            got = [tuple(r) for r in w.q(f"SELECT av, bv FROM ij_{kind}")]
            if kind in sqlite_kinds:
                want = db.execute(f"SELECT a.v, b.v FROM a {sqlite_kinds[kind]} b ON {cond_s}").fetchall()
            elif kind == "right":
                want = db.execute(f"SELECT a.v, b.v FROM b LEFT JOIN a ON {cond_s}").fetchall()
            else:
                want = db.execute(f"SELECT a.v, b.v FROM a LEFT JOIN b ON {cond_s}").fetchall() + db.execute(
                    f"SELECT NULL, b.v FROM b WHERE NOT EXISTS (SELECT 1 FROM a WHERE {cond_s})").fetchall()
            check(f"interval join {kind.upper()}", got, [tuple(r) for r in want])
        win = "(ts / 10000) * 10000"
        wcond = f"a.k = b.k AND {win.replace('ts', 'a.ts')} = {win.replace('ts', 'b.ts')}"
        got = [(r[0], r[1], norm(r[2])) for r in w.q("SELECT av, bv, ws FROM wj_inner")]
        want = db.execute(f"SELECT a.v, b.v, {win.replace('ts', 'a.ts')} FROM a JOIN b ON {wcond}").fetchall()
        check("window join INNER", got, [tuple(r) for r in want])
        got = [(r[0], r[1], norm(r[2])) for r in w.q("SELECT av, bv, ws FROM wj_full")]
        want = db.execute(f"SELECT a.v, b.v, {win.replace('ts', 'a.ts')} FROM a LEFT JOIN b ON {wcond}").fetchall() \
            + db.execute(f"SELECT NULL, b.v, {win.replace('ts', 'b.ts')} FROM b WHERE NOT EXISTS "
                         f"(SELECT 1 FROM a WHERE {wcond})").fetchall()
        check("window join FULL", got, [tuple(r) for r in want])

        # Regular joins of two writable tables, through inserts, updates and deletes.
        w.q("CREATE TABLE ta (id BIGINT PRIMARY KEY, k BIGINT, v TEXT)")
        w.q("CREATE TABLE tb (id BIGINT PRIMARY KEY, k BIGINT, v TEXT)")
        db.execute("CREATE TABLE ta (id INTEGER PRIMARY KEY, k INTEGER, v TEXT)")
        db.execute("CREATE TABLE tb (id INTEGER PRIMARY KEY, k INTEGER, v TEXT)")
        w.q("CREATE MATERIALIZED VIEW rj_inner AS SELECT ta.v AS av, tb.v AS bv FROM ta JOIN tb ON ta.k = tb.k")
        w.q("CREATE MATERIALIZED VIEW rj_left AS SELECT ta.v AS av, tb.v AS bv FROM ta LEFT JOIN tb ON ta.k = tb.k")
        for t in ("ta", "tb"):
            for i in range(200):
                row = (i, None if rng.random() < 0.05 else rng.randrange(30), f"{t}{i}")
                w.q(f"INSERT INTO {t} VALUES (%s, %s, %s)", row)
                db.execute(f"INSERT INTO {t} VALUES (?, ?, ?)", row)
        for _ in range(150):
            t, i = rng.choice(("ta", "tb")), rng.randrange(200)
            if rng.random() < 0.3:
                w.q(f"DELETE FROM {t} WHERE id = %s", (i,))
                db.execute(f"DELETE FROM {t} WHERE id = ?", (i,))
            else:
                k = rng.randrange(30)
                w.q(f"UPDATE {t} SET k = %s, v = v || 'u' WHERE id = %s", (k, i))
                db.execute(f"UPDATE {t} SET k = ?, v = v || 'u' WHERE id = ?", (k, i))
        w.q("FLUSH")
        got = [tuple(r) for r in w.q("SELECT av, bv FROM rj_inner")]
        check("regular join INNER of tables after updates and deletes", got,
              db.execute("SELECT ta.v, tb.v FROM ta JOIN tb ON ta.k = tb.k").fetchall())
        got = [tuple(r) for r in w.q("SELECT av, bv FROM rj_left")]
        check("regular join LEFT of tables after updates and deletes", got,
              db.execute("SELECT ta.v, tb.v FROM ta LEFT JOIN tb ON ta.k = tb.k").fetchall())

        # Event-time temporal join against a versioned table (Kafka upsert topic).
        for k, price, ts in versions:
            p.produce("jd_prices", key=json.dumps({"k": k}).encode(), partition=0,
                      value=None if price is None else json.dumps({"k": k, "price": price, "ts": ts_text(ts)}).encode())
        # A last version far ahead moves the table's watermark past every probe row.
        p.produce("jd_prices", key=json.dumps({"k": 999}).encode(),
                  value=json.dumps({"k": 999, "price": 0, "ts": ts_text(10 ** 9)}).encode(), partition=0)
        if p.flush(30) != 0:
            raise RuntimeError("could not produce the versions")
        w.q(f"CREATE TABLE prices (k BIGINT PRIMARY KEY, price BIGINT, ts TIMESTAMP, "
            f"WATERMARK FOR ts AS ts - INTERVAL '{BOUND_MS} milliseconds') "
            f"WITH (connector = 'kafka', topic = 'jd_prices', scan.startup.mode = 'earliest') FORMAT UPSERT ENCODE JSON")
        # The table has read every version before the join exists: the join must still see the
        # versions its probe rows fall on, not only each key's latest row.
        w.q("FLUSH")
        w.q("CREATE MATERIALIZED VIEW tj AS SELECT a.v AS av, p.price FROM a LEFT JOIN prices "
            "FOR SYSTEM_TIME AS OF a.ts AS p ON a.k = p.k")
        w.q("FLUSH")
        db.execute("CREATE TABLE versions (k INTEGER, price INTEGER, ts INTEGER)")
        db.executemany("INSERT INTO versions VALUES (?, ?, ?)", versions)
        want = db.execute("SELECT a.v, (SELECT price FROM versions v WHERE v.k = a.k AND v.ts <= a.ts "
                          "ORDER BY v.ts DESC, v.rowid DESC LIMIT 1) FROM a").fetchall()
        got = []
        deadline = time.time() + 20
        while time.time() < deadline:  # the table's watermark reaches the probe rows shortly after FLUSH
            got = [tuple(r) for r in w.q("SELECT av, price FROM tj")]
            if len(got) >= len(want):
                break
            time.sleep(0.3)
        check("event-time temporal join LEFT (versions as of each row's time)", got, [tuple(r) for r in want])
    except Exception as e:  # a harness failure is a failed test, with the reason
        failed += 1
        print(f"not ok - harness: {e}")
    finally:
        if w:
            w.stop()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
