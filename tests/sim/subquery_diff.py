#!/usr/bin/python3
"""subquery_diff.py: subqueries in views and ad hoc queries, checked against SQLite.

Two writable tables ta (id, k, x) and tb (id, k, y) get random rows (keys and values from small
ranges, some NULL), then rounds of random inserts, updates and deletes on both. Views with
[NOT] IN, [NOT] EXISTS (correlated on k), correlated IN / NOT IN, IN as a value (true, false or
NULL) and scalar subqueries (correlated count and max, an uncorrelated sum) are kept up to date
by weir's semi, anti, mark and scalar joins; after each round every view's contents (a multiset
of rows), and the same query run ad hoc, must equal what SQLite computes over the same rows.

    /usr/bin/python3 tests/sim/subquery_diff.py --weir build/server/weir [--rows N] [--rounds R] [--seed S]

The last line of stdout is "N passed, N failed".
"""
import argparse
import collections
import os
import random
import sqlite3
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
try:
    from weirtest import Stack
except ImportError as e:  # pragma: no cover
    sys.exit(f"subquery_diff.py: {e}: run it with /usr/bin/python3 (python3-psycopg2)")

# name -> query; the same text runs in weir (view and ad hoc) and in SQLite.
QUERIES = {
    "in": "SELECT id FROM ta WHERE x IN (SELECT y FROM tb)",
    "not_in": "SELECT id FROM ta WHERE x NOT IN (SELECT y FROM tb WHERE tb.k = 3)",
    "exists": "SELECT id, x FROM ta WHERE EXISTS (SELECT 1 FROM tb WHERE tb.k = ta.k)",
    "not_exists": "SELECT id, x FROM ta WHERE NOT EXISTS (SELECT 1 FROM tb WHERE tb.k = ta.k AND tb.y > 5)",
    "corr_in": "SELECT id FROM ta WHERE x IN (SELECT y FROM tb WHERE tb.k = ta.k)",
    "corr_not_in": "SELECT id FROM ta WHERE x NOT IN (SELECT y FROM tb WHERE tb.k = ta.k)",
    "mark": "SELECT id, x IN (SELECT y FROM tb) AS m, x NOT IN (SELECT y FROM tb WHERE tb.k = ta.k) AS n FROM ta",
    "scalar": "SELECT id, (SELECT count(*) FROM tb WHERE tb.k = ta.k) AS c, "
              "(SELECT max(y) FROM tb WHERE tb.k = ta.k) AS m, (SELECT sum(y) FROM tb) AS s FROM ta",
    "scalar_where": "SELECT id FROM ta WHERE x >= (SELECT count(*) FROM tb WHERE tb.k = ta.k)",
}


def norm(row):
    """Booleans as SQLite has them (1/0), so rows compare across the two."""
    return tuple(int(v) if isinstance(v, bool) else v for v in row)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weir", required=True)
    ap.add_argument("--rows", type=int, default=120)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    db = sqlite3.connect(":memory:")
    passed = failed = 0

    def check(name, got, want):
        nonlocal passed, failed
        g, e = collections.Counter(map(norm, got)), collections.Counter(map(norm, want))
        if g == e:
            passed += 1
            print(f"ok - {name} ({sum(e.values())} rows)")
        else:
            failed += 1
            print(f"not ok - {name}: {sum((e - g).values())} missing, {sum((g - e).values())} extra "
                  f"(e.g. missing {list(e - g)[:3]}, extra {list(g - e)[:3]})")

    def val(p_null):
        return None if rng.random() < p_null else rng.randrange(8)

    w = None
    try:
        w = Stack(a.weir, prefix="weir-subqdiff-")
        for t, c in (("ta", "x"), ("tb", "y")):
            w.q(f"CREATE TABLE {t} (id BIGINT PRIMARY KEY, k BIGINT, {c} BIGINT)")
            db.execute(f"CREATE TABLE {t} (id INTEGER PRIMARY KEY, k INTEGER, {c} INTEGER)")
        for name, sql in QUERIES.items():
            w.q(f"CREATE MATERIALIZED VIEW v_{name} AS {sql}")
        next_id = {"ta": 0, "tb": 0}

        def insert(t, n):
            for _ in range(n):
                row = (next_id[t], val(0.05), val(0.08))
                next_id[t] += 1
                w.q(f"INSERT INTO {t} VALUES (%s, %s, %s)", row)
                db.execute(f"INSERT INTO {t} VALUES (?, ?, ?)", row)

        # The subquery's side first, in part, so rows arrive on both sides in both orders.
        insert("tb", a.rows // 4)
        insert("ta", a.rows)
        insert("tb", a.rows // 4)
        for rnd in range(a.rounds + 1):
            if rnd:
                for _ in range(a.rows // 3):
                    t = rng.choice(("ta", "tb"))
                    c = "x" if t == "ta" else "y"
                    i = rng.randrange(max(next_id[t], 1))
                    r = rng.random()
                    if r < 0.3:
                        w.q(f"DELETE FROM {t} WHERE id = %s", (i,))
                        db.execute(f"DELETE FROM {t} WHERE id = ?", (i,))
                    elif r < 0.8:
                        k, v = val(0.05), val(0.08)
                        w.q(f"UPDATE {t} SET k = %s, {c} = %s WHERE id = %s", (k, v, i))
                        db.execute(f"UPDATE {t} SET k = ?, {c} = ? WHERE id = ?", (k, v, i))
                    else:
                        insert(t, 1)
            w.q("FLUSH")
            for name, sql in QUERIES.items():
                want = db.execute(sql).fetchall()
                check(f"round {rnd}: view {name}", w.q(f"SELECT * FROM v_{name}"), want)
                check(f"round {rnd}: ad hoc {name}", w.q(sql), want)
    except Exception as e:  # a failure to run is a failure, reported like the others
        failed += 1
        print(f"not ok - subquery_diff could not run: {e}")
    finally:
        if w is not None:
            w.stop()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
