#!/usr/bin/python3
"""cluster_reads.py --weir PATH: a SELECT on any node of a cluster sees a distributed view whole.

Issue 16 part 6. One `weir broker`, nodes a and b of cluster "r", a source over a topic of 4
partitions and a GROUP BY view over it, which the cluster distributes: each node keeps the rows of
the key groups the work group gave it (server/cluster_gather.c). Checks:

- the view is distributed, and a's and b's key groups (partitions of its repartition topic in
  weir_cluster_assignment) are disjoint, both non-empty and cover them all;
- SELECT on a and on b (whole view, a key lookup, an aggregate over the view, ORDER BY ... LIMIT)
  equal the oracle: each gathers the other's key groups over the Postgres protocol;
- the remote-read protocol itself: a malformed weir.read_key_groups is 22023, a key group a does
  not own is 40001 on a, an unknown view 42P01;
- b killed with kill -9: every SELECT on a until the group moves b's key groups either fails with
  57P03/08006/40001 or answers a view with each key once and no count above the oracle's (never
  a partial answer presented as whole, never a duplicate); once a owns every key group, a's
  answer equals the oracle again, with rows inserted after the kill.

Prints TAP; exits 1 if a check failed.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

import psycopg2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_test  # noqa: E402
from cluster_test import Node, eventually, tap  # noqa: E402

TOPIC = "reads_ev"
KEYS = 50


def view_rows(n, sql="SELECT k, c, s FROM sums ORDER BY k"):
    return [tuple(int(x) for x in r) for r in n.q(sql)]


def oracle(rows):
    out = {}
    for k, v in rows:
        c, s = out.get(k, (0, 0))
        out[k] = (c + 1, s + v)
    return [(k, c, s) for k, (c, s) in sorted(out.items())]


def rp_assignment(n):
    """{node_id: set of partitions} of the view's repartition topic, as n shows it."""
    out = {}
    for node, alive, topic, part in n.q("SELECT node_id, alive, topic, partition FROM weir_cluster_assignment"):
        if alive and ".rp." in topic:
            out.setdefault(node, set()).add(part)
    return out


def sqlstate(n, sql):
    try:
        n.q(sql)
        return None
    except psycopg2.Error as e:
        n.conn.rollback() if not n.conn.autocommit else None
        return e.pgcode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    args = ap.parse_args()
    broker, kafka = cluster_test.start_broker(args.weir)
    tmp = tempfile.mkdtemp(prefix="weir-creads-", dir="/tmp")
    nodes = []
    t0 = time.time()
    try:
        a, b = (Node(args.weir, tmp, kafka, x, cluster="r") for x in "ab")
        nodes += [a, b]
        a.start(wait=False)
        b.start(wait=False)
        a.wait_ready()
        b.wait_ready()
        a.q("CREATE SOURCE ev (k BIGINT, v BIGINT) WITH (connector = 'kafka', topic = '%s', "
            "topic.partitions = '4', scan.startup.mode = 'earliest')" % TOPIC)
        b.q("CREATE MATERIALIZED VIEW sums AS SELECT k, count(*) AS c, sum(v) AS s FROM ev GROUP BY k")
        plan = "\n".join(r[0] for r in a.q("EXPLAIN CREATE MATERIALIZED VIEW x AS SELECT k, count(*) AS c, "
                                           "sum(v) AS s FROM ev GROUP BY k"))
        tap("distributed" in plan, "the GROUP BY view is distributed over key groups", plan)
        sent = [(i % KEYS, i) for i in range(2000)]
        a.q("INSERT INTO ev VALUES " + ", ".join("(%d, %d)" % r for r in sent))
        want = oracle(sent)

        both = eventually(lambda: view_rows(a) == want and view_rows(b) == want, timeout=120, every=1)
        tap(bool(both), "SELECT on a and on b: the whole view, equal to the oracle",
            "a %r\nb %r" % (view_rows(a)[:5], view_rows(b)[:5]))
        split = rp_assignment(a)
        parts = sorted(p for s in split.values() for p in s)
        tap(set(split) == {"a", "b"} and len(parts) == len(set(parts)) and parts == list(range(len(parts))),
            "a's and b's key groups are disjoint, both hold some, and they cover the view's", repr(split))
        for n in (a, b):
            tap(view_rows(n, "SELECT k, c, s FROM sums WHERE k = 7") == [want[7]],
                "a key lookup on %s" % n.node_id, repr(view_rows(n, "SELECT k, c, s FROM sums WHERE k = 7")))
            tap(view_rows(n, "SELECT count(*), sum(c), max(s) FROM sums") ==
                [(KEYS, len(sent), max(r[2] for r in want))], "an aggregate over the view on %s" % n.node_id)
            tap(view_rows(n, "SELECT k, c, s FROM sums ORDER BY k DESC LIMIT 3") == want[::-1][:3],
                "ORDER BY k DESC LIMIT 3 on %s" % n.node_id)

        code = sqlstate(a, "SUBSCRIBE sums")
        tap(code == "0A000", "SUBSCRIBE to a distributed view: 0A000 (a changefeed from one node would miss the "
            "others' key groups)", "got %r" % code)
        tid = a.q("SELECT table_id FROM weir_state WHERE view = 'sums' AND operator LIKE '%aterialize%'")[0][0]
        theirs = sorted(split.get("b", {0}))[0]
        for value, code, what in [("nonsense", "22023", "a malformed request"),
                                  ("%d:%d" % (tid, theirs), "40001", "a key group of b asked of a"),
                                  ("424242:0", "42P01", "an unknown view")]:
            a.q("SET weir.read_key_groups = '%s'" % value)
            got = sqlstate(a, "SELECT kg, key, value FROM weir_key_group_rows")
            tap(got == code, "weir.read_key_groups: %s is %s" % (what, code), "got %r" % got)
        a.q("RESET weir.read_key_groups")

        b.kill9()
        more = [(i % KEYS, i) for i in range(2000, 2400)]
        a.q("INSERT INTO ev VALUES " + ", ".join("(%d, %d)" % r for r in more))
        want2 = oracle(sent + more)
        limit = dict((k, c) for k, c, s in want2)
        bad, errors, t1 = [], set(), time.time()
        final = None
        while time.time() - t1 < 90:
            try:
                rows = view_rows(a)
            except psycopg2.Error as e:
                errors.add(e.pgcode)
                if e.pgcode not in ("57P03", "08006", "40001"):
                    bad.append("error %s: %s" % (e.pgcode, e))
                time.sleep(0.5)
                continue
            keys = [r[0] for r in rows]
            if len(keys) != len(set(keys)) or any(c > limit.get(k, 0) for k, c, s in rows):
                bad.append(repr(rows[:8]))
            if rows == want2:
                final = rows
                break
            time.sleep(0.5)
        tap(not bad, "b killed: every SELECT on a errors (57P03/08006/40001) or has each key once, no count "
            "above the oracle's", "\n".join(bad[:5]))
        tap(final == want2, "a alone, once it owns b's key groups: the whole view with the rows sent after the "
            "kill", "errors on the way %r; last %r" % (sorted(errors), view_rows(a)[:5] if final is None else ""))
        print("# errors seen during the move: %r; %.0f s" % (sorted(errors), time.time() - t1))
    except Exception as e:  # a node that died: its log below says why
        tap(False, "the test ran to its end", "%s: %s" % (type(e).__name__, e))
    finally:
        for n in nodes:
            n.stop()
        if broker.poll() is None:
            broker.terminate()
            broker.wait(10)
        if tap.failed:
            for n in nodes:
                print("# ---- log of node %s" % n.node_id)
                for line in n.output().splitlines()[-30:]:
                    print("#   " + line)
        print("# took %.1f s" % (time.time() - t0))
        shutil.rmtree(tmp, ignore_errors=True)
    tap.end()


if __name__ == "__main__":
    main()
