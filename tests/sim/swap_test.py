#!/usr/bin/python3
"""swap_test.py: replacing a view while data flows (ALTER MATERIALIZED VIEW ... SWAP WITH).

A producer writes rows into a Kafka source without pause. The live view `totals` has a SQLite
upsert sink, a SUBSCRIBE reader and a Server-Sent Events reader attached. Two views are backfilled from the earliest
offsets while `totals` keeps serving: `totals_same` (the same query) and `totals_fix` (a new
definition). Checks:
- the backfilled `totals_same` equals `totals` once both read the same log (replay == live);
- weir_backfills reports `totals_fix` caught up (lag 0 on every partition);
- after `ALTER MATERIALIZED VIEW totals SWAP WITH totals_fix` (rows still arriving, but not for
  every key, so the switch-over difference is what changes the others), and again
  after swapping back: the subscribers' (SUBSCRIBE and SSE) accumulated changes equal the view
  under the name (and /api/views answers with it), with
  no gap (nothing missing) and no duplicate (no multiplicity above 1, never below 0); the SQLite
  sink's table ends equal to the view; both equal the expected result computed here from every
  row produced.

    /usr/bin/python3 tests/sim/swap_test.py --weir build/server/weir

The last line of stdout is "N passed, N failed".
"""
import argparse
import collections
import http.client
import json
import os
import random
import sqlite3
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
try:
    from confluent_kafka import Producer
    from weirtest import Stack, Subscriber
except ImportError as e:  # pragma: no cover
    sys.exit(f"swap_test.py: {e}: run it with /usr/bin/python3 (python3-psycopg2, python3-confluent-kafka)")

OLD_SQL = "SELECT k, count(*) AS n, sum(x) AS s FROM ev GROUP BY k"
# The new definition: the same columns and types, different rows (small amounts left out).
NEW_SQL = "SELECT k, count(*) AS n, sum(x) AS s FROM ev WHERE x >= 20 GROUP BY k"

passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok - {what}")
    else:
        failed += 1
        print(f"not ok - {what}\n#   {detail}")


def expected(rows, new):
    acc = {}
    for k, x in rows:
        if new and x < 20:
            continue
        n, s = acc.get(k, (0, 0))
        acc[k] = (n + 1, s + x)
    return {(str(k), str(n), str(s)) for k, (n, s) in acc.items()}


class Feeder(threading.Thread):
    """Produces rows (k, x) in small batches until stopped; keeps every row produced."""

    def __init__(self, kafka, topic, seed):
        super().__init__(daemon=True)
        self.p = Producer({"bootstrap.servers": kafka, "linger.ms": 0, "log_level": 3})
        self.topic = topic
        self.rng = random.Random(seed)
        self.rows = []
        self.stop = threading.Event()
        self.i = 0

    def batch(self, n, keys=40, lo=0):
        for _ in range(n):
            k, x = lo + self.rng.randrange(keys), self.rng.randrange(100)
            if k >= 60:
                x %= 20  # keys 60..64: only small amounts, absent from the new definition
            ts = f"2026-01-01 00:{self.i // 60 % 60:02d}:{self.i % 60:02d}"
            self.p.produce(self.topic, json.dumps({"k": k, "x": x, "ts": ts}).encode(), partition=self.i % 2)
            self.rows.append((k, x))
            self.i += 1
        self.p.flush(10)

    def run(self):
        while not self.stop.is_set():
            self.batch(20)
            time.sleep(0.02)




def norm(v):
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return None if v is None else str(v)


class SseReader(threading.Thread):
    """GET /api/views/<v>/stream: the snapshot event's rows, then each changes event's diffs."""

    def __init__(self, port, view):
        super().__init__(daemon=True)
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.conn.request("GET", f"/api/views/{view}/stream")
        self.resp = self.conn.getresponse()
        self.lock = threading.Lock()
        self.acc = collections.Counter()
        self.bad = []
        self.events = collections.Counter()

    def apply(self, row, diff):
        row = tuple(norm(v) for v in row)
        self.acc[row] += diff
        if self.acc[row] < 0 or self.acc[row] > 1:
            self.bad.append((row, self.acc[row]))
        if self.acc[row] == 0:
            del self.acc[row]

    def run(self):
        event = None
        try:
            while True:
                line = self.resp.readline()
                if not line:
                    return
                line = line.decode().rstrip("\r\n")
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event in ("snapshot", "changes"):
                    data = json.loads(line[6:])
                    with self.lock:
                        self.events[event] += 1
                        if event == "snapshot":
                            for row in data["rows"]:
                                self.apply(row, 1)
                        else:
                            for ch in data["changes"]:
                                self.apply(ch["row"], ch["diff"])
        except (OSError, ValueError):
            return

    def contents(self):
        with self.lock:
            return set(self.acc), list(self.bad)

    def close(self):
        self.conn.close()


def view_rows(st, name):
    return {tuple(str(v) for v in r) for r in st.q(f"SELECT k, n, s FROM {name}")}


def wait_for(what, fn, timeout=30):
    deadline = time.time() + timeout
    while True:
        ok, detail = fn()
        if ok or time.time() > deadline:
            check(ok, what, detail)
            return
        time.sleep(0.2)


def sink_rows(path):
    try:
        db = sqlite3.connect(path)
        rows = {tuple(str(v) for v in r) for r in db.execute("SELECT k, n, s FROM totals_out")}
        db.close()
        return rows
    except sqlite3.Error:
        return set()


def settle(st, feeder, sub, sink_db, name, new, sse=None):
    """Stops the feeder, waits for the view, and checks subscriber and sink against it."""
    feeder.stop.set()
    feeder.join()
    st.q("FLUSH")
    want = expected(feeder.rows, new)
    got = view_rows(st, name)
    check(got == want, f"{name} holds the {'new' if new else 'old'} definition's result over every row",
          f"missing {sorted(want - got)[:5]} extra {sorted(got - want)[:5]}")
    wait_for("the subscriber's accumulated changes equal the view (no gap)",
             lambda: (sub.contents()[0] == want, f"missing {sorted(want - sub.contents()[0])[:5]} "
                                                 f"extra {sorted(sub.contents()[0] - want)[:5]}"))
    bad = sub.contents()[1]
    check(not bad, "the subscriber never saw a row twice or a retraction of a row it did not have", str(bad[:5]))
    if sse:
        wait_for("the Server-Sent Events stream's accumulated changes equal the view",
                 lambda: (sse.contents()[0] == want, f"missing {sorted(want - sse.contents()[0])[:5]} "
                                                     f"extra {sorted(sse.contents()[0] - want)[:5]}"))
        check(not sse.contents()[1], "the SSE stream never had a row twice or below zero", str(sse.contents()[1][:5]))
    wait_for("the SQLite sink's table equals the view",
             lambda: (sink_rows(sink_db) == want, f"missing {sorted(want - sink_rows(sink_db))[:5]} "
                                                  f"extra {sorted(sink_rows(sink_db) - want)[:5]}"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    with Stack(args.weir, http=True) as st:
        sink_db = os.path.join(st.tmp, "out.db")
        st.q("CREATE SOURCE ev (k BIGINT, x BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) "
             f"WITH (connector = 'kafka', topic = 'ev', topic.partitions = '2', "
             f"properties.bootstrap.server = '{st.kafka}')")
        st.q(f"CREATE MATERIALIZED VIEW totals AS {OLD_SQL}")
        st.q(f"CREATE SINK totals_sink FROM totals WITH (connector = 'sqlite', path = '{sink_db}', "
             "table = 'totals_out', type = 'upsert', primary_key = 'k', create_table = 'true')")
        feeder = Feeder(st.kafka, "ev", args.seed)
        # Keys 40..64 appear only before the backfills start: at the swaps their rows change
        # only through the difference (no later update hides a missing one), and keys 60..64
        # leave the view altogether under the new definition.
        feeder.batch(400)
        feeder.batch(200, keys=25, lo=40)
        feeder.start()
        sub = Subscriber(st.port, "totals")
        sub.start()
        sse = SseReader(st.http_port, "totals")
        sse.start()
        time.sleep(1)
        # Backfills, while totals serves and rows keep coming.
        st.q(f"CREATE MATERIALIZED VIEW totals_same AS {OLD_SQL} WITH (backfill_from = 'earliest')")
        st.q(f"CREATE MATERIALIZED VIEW totals_fix AS {NEW_SQL} WITH (backfill_from = 'earliest')")

        def caught_up():
            rows = st.q("SELECT partition, lag, caught_up FROM weir_backfills WHERE view = 'totals_fix'")
            return len(rows) == 2 and all(r[2] for r in rows), str(rows)
        wait_for("weir_backfills shows totals_fix caught up on both partitions", caught_up)
        time.sleep(0.5)
        st.q("ALTER MATERIALIZED VIEW totals SWAP WITH totals_fix")
        time.sleep(1)
        settle(st, feeder, sub, sink_db, "totals", new=True, sse=sse)
        conn = http.client.HTTPConnection("127.0.0.1", st.http_port, timeout=10)
        conn.request("GET", "/api/views/totals")
        body = conn.getresponse().read().decode()
        conn.close()
        got = {tuple(norm(v) for v in r) for r in json.loads(body)["rows"]}
        check(got == expected(feeder.rows, True), "/api/views/totals answers with the new view's rows",
              body[:200])
        same, old = view_rows(st, "totals_same"), view_rows(st, "totals_fix")
        check(same == old and same == expected(feeder.rows, False),
              "the backfilled view equals the live one on the same log (now named totals_fix)",
              f"diff {sorted(same ^ old)[:5]}")

        # Swap back, again with rows arriving.
        feeder2 = Feeder(st.kafka, "ev", args.seed + 1)
        feeder2.rows = feeder.rows
        feeder2.i = feeder.i
        feeder2.start()
        time.sleep(0.5)
        st.q("ALTER MATERIALIZED VIEW totals SWAP WITH totals_fix")
        time.sleep(1)
        settle(st, feeder2, sub, sink_db, "totals", new=False, sse=sse)
        check(sub.error is None and sub.is_alive(), "the subscription stayed open across both swaps", str(sub.error))
        sub.close()
        sse.close()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
