#!/usr/bin/python3
"""split_subscribe.py: SUBSCRIBE to a view whose rows are split across instances.

A view with streaming_parallelism 2 or 3 keeps its rows in every instance's table, and its
changes reach subscribers through a gather that moves rows only while someone reads them. For
each P: rows are inserted into a 3-partition Kafka source, a SUBSCRIBE reader attaches after
them (its snapshot is the merged rows of every instance), more rows come, and a second reader
attaches in between. Each reader's accumulated changes must equal the view (no gap: nothing
missing; no duplicate: a multiplicity never above 1 nor below 0) and the expected result
computed here; after both readers leave, rows still arrive in the view (the gather idles).

    /usr/bin/python3 tests/sim/split_subscribe.py --weir build/server/weir

The last line of stdout is "N passed, N failed".
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
try:
    from weirtest import Stack, Subscriber
except ImportError as e:  # pragma: no cover
    sys.exit(f"split_subscribe.py: {e}: run it with /usr/bin/python3 (python3-psycopg2)")

passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok - {what}")
    else:
        failed += 1
        print(f"not ok - {what}\n#   {detail}")


def insert(st, rows):
    vals = ", ".join(f"({k}, {x}, '2026-01-01 00:00:{i % 60:02d}')" for i, (k, x) in enumerate(rows))
    st.q(f"INSERT INTO ev VALUES {vals}")


def expected(rows):
    acc = {}
    for k, x in rows:
        n, s = acc.get(k, (0, 0))
        acc[k] = (n + 1, s + x)
    return {(str(k), str(n), str(s)) for k, (n, s) in acc.items()}


def view_rows(st, v):
    return {tuple(str(c) for c in r) for r in st.q(f"SELECT k, n, s FROM {v}")}


def settle(sub, want, timeout=30):
    """Waits until sub's accumulated rows equal want (changes arrive after each step)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        got, bad = sub.contents()
        if got == want or bad or sub.error:
            return got, bad
        time.sleep(0.05)
    return sub.contents()


def run(st, P):
    v = f"tot_{P}"
    st.q(f"CREATE MATERIALIZED VIEW {v} WITH (streaming_parallelism = {P}) AS "
         f"SELECT k, count(*) AS n, sum(x) AS s FROM ev GROUP BY k")
    plan = "\n".join(r[0] for r in st.q(f"EXPLAIN CREATE MATERIALIZED VIEW x WITH (streaming_parallelism = {P}) AS "
                                         f"SELECT k, count(*) AS n, sum(x) AS s FROM ev GROUP BY k"))
    check(f"parallelism: {P} (hash(k)), key groups: {P} by [k], state: the view's rows" in plan, f"P={P}: the view's rows are split", plan)
    rows = [(i % 29, i) for i in range(1, 401)]
    insert(st, rows)
    st.q("FLUSH")
    a = Subscriber(st.port, v)
    a.start()
    got, bad = settle(a, expected(rows))
    check(got == expected(rows) and not bad and not a.error, f"P={P}: the snapshot is every instance's rows",
          f"{len(got)} rows, bad {bad[:3]}, error {a.error}")
    more = [(i % 31, i) for i in range(401, 701)]
    insert(st, more[:150])
    st.q("FLUSH")
    b = Subscriber(st.port, v)
    b.start()
    insert(st, more[150:])
    st.q("FLUSH")
    want = expected(rows + more)
    check(view_rows(st, v) == want, f"P={P}: the view has every row")
    for name, sub in (("first", a), ("second", b)):
        got, bad = settle(sub, want)
        check(got == want and not bad and not sub.error, f"P={P}: the {name} subscriber's changes add up to the view",
              f"missing {sorted(want - got)[:3]}, extra {sorted(got - want)[:3]}, bad {bad[:3]}, error {sub.error}")
    a.close()
    b.close()
    last = [(i % 7, i) for i in range(701, 801)]
    insert(st, last)
    st.q("FLUSH")
    check(view_rows(st, v) == expected(rows + more + last), f"P={P}: rows still stored with nobody subscribed")
    st.q(f"DROP MATERIALIZED VIEW {v}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    args = ap.parse_args()
    with Stack(args.weir, prefix="weir-split-sub-") as st:
        for P in (2, 3):
            st.q(f"CREATE SOURCE ev (k BIGINT, x BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
                 f"WITH (connector = 'kafka', topic = 'ev{P}', properties.bootstrap.server = '{st.kafka}', "
                 f"topic.partitions = '3')")
            run(st, P)
            st.q("DROP SOURCE ev")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
