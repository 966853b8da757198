#!/usr/bin/python3
"""cluster_work.py --weir PATH: the work group of a weir cluster as its nodes show it.

One `weir broker`, nodes a and b of cluster "w", a source over a topic of 8 partitions created
through the cluster. Each node is a static member of the consumer group `_weir.w.work`
(runtime/group.h); phase 1 shows the assignment and does not act on it. Checks:

- weir_cluster_assignment on a lists a's and b's partitions: disjoint, covering the 8; the
  counts agree with weir_cluster.work_partitions and /metrics weir_cluster_work_partitions;
- b killed with kill -9 and restarted at once (same node id, within the session timeout): it
  holds the same partitions again and a's did not change;
- b killed with kill -9 for good: a holds all 8 after the session timeout (10 s).

Prints TAP; exits 1 if a check failed.
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

TOPIC = "work_ev"


def assignment(n):
    """{node_id: set of partitions of TOPIC} as n shows it (live nodes only)."""
    out = {}
    for node, alive, topic, part in n.q("SELECT node_id, alive, topic, partition FROM weir_cluster_assignment"):
        if alive and topic == TOPIC:
            out.setdefault(node, set()).add(part)
    return out


def covering(n, want_nodes):
    """n's view of the assignment once it covers the 8 partitions disjointly over want_nodes."""
    a = assignment(n)
    parts = sorted(p for s in a.values() for p in s)
    return a if set(a) == set(want_nodes) and parts == list(range(8)) else None


def stable(n, want_nodes, timeout):
    """covering() twice, 4 s apart, with the same answer (a rebalance has settled)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        a = eventually(lambda: covering(n, want_nodes), timeout=max(1, deadline - time.time()), every=0.5)
        if not a:
            return None
        time.sleep(4)
        if covering(n, want_nodes) == a:
            return a
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    args = ap.parse_args()
    broker, kafka = cluster_test.start_broker(args.weir)
    tmp = tempfile.mkdtemp(prefix="weir-cwork-", dir="/tmp")
    nodes = []
    t0 = time.time()
    try:
        a, b = (Node(args.weir, tmp, kafka, x, cluster="w") for x in "ab")
        nodes += [a, b]
        a.start(wait=False)
        b.start(wait=False)
        a.wait_ready()
        b.wait_ready()
        a.q("CREATE SOURCE ev (k BIGINT) WITH (connector = 'kafka', topic = '%s', topic.partitions = '8')" % TOPIC)

        first = stable(a, "ab", 90)
        tap(first is not None, "weir_cluster_assignment: a's and b's partitions are disjoint and cover the 8",
            repr(assignment(a)))
        if first is None:
            return
        print("# assignment %r after %.0f s" % (first, time.time() - t0))
        counts = dict(a.q("SELECT node_id, work_partitions FROM weir_cluster"))
        tap(counts == {k: len(v) for k, v in first.items()}, "weir_cluster.work_partitions counts them", repr(counts))
        m = [ln for ln in a.metrics().splitlines() if ln.startswith("weir_cluster_work_partitions ")]
        tap(m == ["weir_cluster_work_partitions %d" % len(first["a"])], "/metrics weir_cluster_work_partitions",
            repr(m))

        b.kill9()
        b.start()
        again = stable(a, "ab", 60)
        tap(again == first, "b killed with kill -9 and restarted at once holds its partitions again, a's stay",
            "%r, was %r" % (again, first))

        b.kill9()
        t1 = time.time()
        after = eventually(lambda: (lambda s: s if s == {"a": set(range(8))} else None)(
            {k: v for k, v in assignment(a).items() if k == "a"}), timeout=60, every=0.5)
        tap(after is not None, "b killed for good: a holds the 8 partitions", repr(assignment(a)))
        print("# moved after %.0f s" % (time.time() - t1))
    finally:
        for n in nodes:
            n.stop()
        if broker.poll() is None:
            broker.terminate()
            broker.wait(10)
        if tap.failed:
            for n in nodes:
                print("# ---- log of node %s" % n.node_id)
                for line in n.output().splitlines()[-20:]:
                    print("#   " + line)
        print("# took %.1f s" % (time.time() - t0))
        shutil.rmtree(tmp, ignore_errors=True)
    tap.end()


if __name__ == "__main__":
    main()
