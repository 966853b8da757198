#!/usr/bin/python3
"""cluster_dist.py --weir PATH: a distributed view (issue 16 phase 2) on two nodes.

One `weir broker`, nodes a and b of cluster "d", a source over a topic of 4 partitions, and a
GROUP BY view with 8 key groups, which the cluster plans distributed: each node reads the
source partitions the work group assigns it, writes every row to the view's repartition topic,
and keeps the key groups (repartition partitions) assigned to it. Until reads gather the
other nodes' key groups, a SELECT on a node answers that node's own rows. Checks:

- EXPLAIN says "placement: distributed over key groups";
- weir_cluster_assignment: the repartition topic's 8 partitions are split between a and b, and
  weir_cluster.key_groups says so per view;
- each node holds a non-empty strict subset of the rows (weir_key_group_rows of its own key
  groups), the two add up to the whole view, and a SELECT on either gathers it, equal to a
  Python oracle;
- a view over it and VERIFY of it are 0A000 (each node holds only its key groups);
- b killed with kill -9: a takes b's source partitions and key groups, and a's rows alone equal
  the oracle (nothing lost, nothing counted twice).

Prints TAP; exits 1 if a check failed. About 60-80 s (most of it the work group's rebalances).
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_test  # noqa: E402
from cluster_test import Node, eventually, tap  # noqa: E402

TOPIC = "dist_ev"
VIEW = ("CREATE MATERIALIZED VIEW dv WITH (key_groups = 8) AS "
        "SELECT k, count(*) AS n, sum(v) AS s FROM dev GROUP BY k")


def rows(n):
    return {k: (c, int(s)) for k, c, s in n.q("SELECT k, n, s FROM dv")}


def rp_assignment(n):
    """{node_id: set of repartition partitions} as n shows it (live nodes only)."""
    out = {}
    for node, alive, topic, part in n.q("SELECT node_id, alive, topic, partition FROM weir_cluster_assignment"):
        if alive and topic and topic.startswith("_weir.d.rp."):
            out.setdefault(node, set()).add(part)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    args = ap.parse_args()
    broker, kafka = cluster_test.start_broker(args.weir)
    tmp = tempfile.mkdtemp(prefix="weir-cdist-", dir="/tmp")
    nodes = []
    t0 = time.time()
    try:
        a, b = (Node(args.weir, tmp, kafka, x, cluster="d") for x in "ab")
        nodes += [a, b]
        a.start(wait=False)
        b.start(wait=False)
        a.wait_ready()
        b.wait_ready()
        a.q("CREATE SOURCE dev (k BIGINT, v BIGINT) WITH (connector = 'kafka', topic = '%s', "
            "topic.partitions = '4')" % TOPIC)
        plan = "\n".join(r[0] for r in a.q("EXPLAIN " + VIEW))
        tap("placement: distributed over key groups" in plan, "EXPLAIN: distributed over key groups", plan)
        b.q(VIEW)
        oracle = {}
        for i in range(0, 400, 50):
            vals = []
            for j in range(i, i + 50):
                k = (j * 7) % 40
                vals.append("(%d, %d)" % (k, j))
                c, s = oracle.get(k, (0, 0))
                oracle[k] = (c + 1, s + j)
            a.q("INSERT INTO dev VALUES " + ", ".join(vals))

        split = eventually(lambda: (lambda x: x if set(x) == {"a", "b"} and
                                    sorted(p for s in x.values() for p in s) == list(range(8)) else None)(
            rp_assignment(a)), timeout=60, every=0.5)
        tap(split is not None, "the repartition topic's 8 partitions are split between a and b",
            repr(rp_assignment(a)))
        kgs = dict(a.q("SELECT node_id, key_groups FROM weir_cluster"))
        want = {x: "dv: " + ",".join(str(p) for p in sorted(split[x])) for x in split} if split else None
        tap(kgs == want, "weir_cluster.key_groups: each node's key groups of dv", "%r, want %r" % (kgs, want))

        # What each node holds itself: the stored rows of its own key groups (the remote-read
        # protocol of server/cluster_gather.c); a SELECT gathers the whole view on either.
        tid = a.q("SELECT table_id FROM weir_state WHERE view = 'dv' AND operator LIKE '%aterialize%'")[0][0]

        def own(n):
            if not split or not split.get(n.node_id):
                return -1
            n.q("SET weir.read_key_groups = '%d:%s'" % (tid, ",".join(str(p) for p in sorted(split[n.node_id]))))
            try:
                return n.q("SELECT count(*) FROM weir_key_group_rows")[0][0]
            finally:
                n.q("RESET weir.read_key_groups")

        def exact():
            ca, cb = own(a), own(b)
            ok = ca > 0 and cb > 0 and ca + cb == len(oracle) and rows(a) == oracle and rows(b) == oracle
            return (ca, cb) if ok else None
        got = eventually(exact, timeout=60, every=0.5)
        ca, cb = got if got else (own(a), own(b))
        tap(got is not None, "each node holds its own key groups' rows, together all of them once; SELECT on "
            "either gathers the oracle", "a holds %d rows, b %d, oracle %d; a reads %d, b reads %d" % (
                ca, cb, len(oracle), len(rows(a)), len(rows(b))))
        tap(0 < ca < len(oracle) and 0 < cb < len(oracle), "both nodes hold a strict subset",
            "%d and %d of %d" % (ca, cb, len(oracle)))

        tap(a.err("CREATE MATERIALIZED VIEW over_dv AS SELECT k, n FROM dv WHERE n > 1") == "0A000",
            "a view over the distributed view: 0A000")
        tap(a.err("VERIFY MATERIALIZED VIEW dv") == "0A000", "VERIFY of the distributed view: 0A000")

        b.kill9()
        t1 = time.time()
        alone = eventually(lambda: rows(a) == oracle or None, timeout=70, every=0.5)
        tap(alone is not None, "b killed with kill -9: a's rows alone equal the oracle",
            "a has %d rows of %d, %r" % (len(rows(a)), len(oracle), rp_assignment(a)))
        print("# a whole after %.0f s" % (time.time() - t1))
    finally:
        for n in nodes:
            n.stop()
        if tap.failed:
            for n in nodes:
                print("# ---- log of node %s" % n.node_id)
                for line in n.output().splitlines()[-25:]:
                    print("#   " + line)
            print("# ---- broker")
            print(cluster_test.broker_log(broker))
        if broker.poll() is None:
            broker.terminate()
            broker.wait(10)
        print("# took %.1f s" % (time.time() - t0))
        shutil.rmtree(tmp, ignore_errors=True)
    tap.end()


if __name__ == "__main__":
    main()
