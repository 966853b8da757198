#!/usr/bin/python3
"""cluster_kill.py --weir PATH [--rows N] [--seed S]: a weir cluster (docs/cluster.md) under kill -9.

One `weir broker`; nodes a, b, c of cluster "k"; one source `ev` over a topic with 8 partitions
(scan.startup.mode earliest) and three views over it, created through the cluster from
different nodes:

- `win`: a TUMBLE of 10 s over a source with a WATERMARK (count and sum per window);
- `joined`: the stream joined with a table `ref` created and filled through the cluster;
- `top`: a Top-N, the 3 largest `v` per group `g` (ROW_NUMBER() ... <= 3), distributed over key
  groups: its state moves between the nodes with the work group, and every read gathers it.

A producer inserts N deterministic rows (INSERT INTO ev, in batches, through node a) while the
main thread, at set points of the production, kills a random node other than a with kill -9
five times (restarting it on its own data directory each time), adds a fourth node d with an
empty data directory, and near the end stops one node cleanly. Event times grow with the row
number, so no row is ever late and every window is in the oracle.

At the end, after FLUSH, every view on every live node must equal an oracle computed in Python
from the generated rows (exact multiset equality: no loss, no duplicate, no wrong row), and a
SUBSCRIBE to `win` on a, open during all of it, must never have shown a row twice or retracted
a row it did not have, and its accumulated state must equal the oracle.

Seeded (--seed, printed); prints TAP; exits 1 if a check failed. The CI form has 50,000 rows;
a long run: --rows 500000.
"""
import argparse
import collections
import datetime
import os
import random
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Subscriber, Tap, free_port  # noqa: E402,F401

try:
    import psycopg2
except ImportError as e:  # pragma: no cover
    print("1..0 # SKIP needs python3-psycopg2: %s" % e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
import cluster_test  # noqa: E402
from cluster_test import eventually  # noqa: E402

tap = Tap()
CLUSTER = "k"
BASE = datetime.datetime(2024, 1, 1)
WINDOW = 10          # seconds
GROUPS = 20          # Top-N groups
TOPN = 3
KEYS = 50            # join keys of the stream; ref has 0 .. REFKEYS-1
REFKEYS = 40


def row(i):
    """Row i of the generator: (id, k, g, v, ts). v is unique (104729 is prime, < 1000003 rows)."""
    return (i, (i * 7919) % KEYS, i % GROUPS, (i * 104729) % 1000003, BASE + datetime.timedelta(milliseconds=10 * i))


def oracle(n):
    win = collections.Counter()
    acc = collections.defaultdict(lambda: [0, 0])
    joined = collections.Counter()
    best = collections.defaultdict(list)
    for i in range(n):
        id_, k, g, v, ts = row(i)
        ws = ts.replace(microsecond=0) - datetime.timedelta(seconds=ts.second % WINDOW)
        acc[ws][0] += 1
        acc[ws][1] += v
        if k < REFKEYS:
            joined[(id_, k, "name%d" % k)] += 1
        best[g].append((v, id_))
    for ws, (c, s) in acc.items():
        win[(ws, c, s)] += 1
    top = collections.Counter()
    for g, lst in best.items():
        for v, id_ in sorted(lst, reverse=True)[:TOPN]:
            top[(g, id_, v)] += 1
    return {"win": win, "joined": joined, "top": top}


QUERIES = {
    "win": "SELECT window_start, n, s FROM win",
    "joined": "SELECT id, k, name FROM joined",
    "top": "SELECT g, id, v FROM top",
}


def norm(r):
    return tuple(x if isinstance(x, (datetime.datetime, str)) else int(x) for x in r)


def view_of(n, name):
    return collections.Counter(norm(r) for r in n.q(QUERIES[name]))


def diff(got, want, limit=8):
    missing = list((want - got).items())[:limit]
    extra = list((got - want).items())[:limit]
    return "rows %d, want %d; missing %s; extra %s" % (sum(got.values()), sum(want.values()), missing, extra)


class Producer(threading.Thread):
    """Inserts rows 0 .. n-1 through node a in batches; waits at each gate until the main thread
    has started the event at that point (so every event happens while rows flow)."""

    def __init__(self, node, n, batch, gates):
        super().__init__(daemon=True)
        self.node, self.n, self.batch, self.gates = node, n, batch, gates
        self.cond = threading.Condition()
        self.produced = 0
        self.released = 0          # events started by the main thread
        self.error = None

    def run(self):
        try:
            cur = self.node.conn.cursor()
            i = 0
            while i < self.n:
                with self.cond:
                    while self.released < sum(1 for g in self.gates if g * self.n <= i):
                        self.cond.wait(1)
                j = min(self.n, i + self.batch)
                cur.execute("INSERT INTO ev VALUES " + ", ".join(
                    "(%d, %d, %d, %d, '%s')" % row(x) for x in range(i, j)))
                i = j
                with self.cond:
                    self.produced = i
                    self.cond.notify_all()
        except Exception as e:  # noqa: BLE001
            self.error = e
            with self.cond:
                self.cond.notify_all()

    def wait_produced(self, count):
        with self.cond:
            while self.produced < count and self.error is None and self.is_alive():
                self.cond.wait(1)

    def release(self):
        with self.cond:
            self.released += 1
            self.cond.notify_all()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    ap.add_argument("--rows", type=int, default=50000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 31)
    print("# cluster_kill: --seed %d --rows %d" % (args.seed, args.rows))
    broker, kafka = cluster_test.start_broker(args.weir)
    tmp = tempfile.mkdtemp(prefix="weir-ckill-", dir="/tmp")
    nodes = []
    t0 = time.time()
    try:
        try:
            run(args, tmp, kafka, nodes)
        except Exception as e:  # noqa: BLE001
            tap(False, "the run went through without an exception", repr(e))
    finally:
        for n in nodes:
            n.stop()
        died = broker.poll() is not None
        if not died:
            broker.terminate()
            broker.wait(10)
        if tap.failed:
            print("# FAILED with --seed %d --rows %d" % (args.seed, args.rows))
            print("# ---- the broker's log%s" % (" (it died during the run)" if died else ""))
            for line in cluster_test.broker_log(broker).splitlines():
                print("#   " + line)
            for n in nodes:
                print("# ---- log of node %s" % n.node_id)
                for line in n.output().splitlines()[-20:]:
                    print("#   " + line)
        print("# took %.1f s" % (time.time() - t0))
        if args.keep:
            print("# kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    tap.end()


def run(args, tmp, kafka, nodes):
    rnd = random.Random(args.seed)
    a, b, c = (cluster_test.Node(args.weir, tmp, kafka, x, cluster=CLUSTER) for x in "abc")
    nodes += [a, b, c]
    for n in (a, b, c):
        n.start(wait=False)
    for n in (a, b, c):
        n.wait_ready(timeout=90)
    m = eventually(lambda: (lambda x: x if len(x) == 3 and set(x.values()) == {"running"} else None)(
        cluster_test.members(a)), timeout=60)
    tap(m is not None, "a, b and c are running", cluster_test.members(a))

    # The catalog, from different nodes.
    a.q("CREATE SOURCE ev (id BIGINT, k BIGINT, g BIGINT, v BIGINT, ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (connector = 'kafka', topic = 'ck_ev', "
        "topic.partitions = '8', scan.startup.mode = 'earliest')")
    b.q("CREATE TABLE ref (k BIGINT, name TEXT, PRIMARY KEY (k))")
    b.q("INSERT INTO ref VALUES " + ", ".join("(%d, 'name%d')" % (k, k) for k in range(REFKEYS)))
    c.q("CREATE MATERIALIZED VIEW win AS SELECT window_start, count(*) AS n, sum(v) AS s "
        "FROM TUMBLE(ev, ts, INTERVAL '%d' SECOND) GROUP BY window_start" % WINDOW)
    a.q("CREATE MATERIALIZED VIEW joined AS SELECT e.id, e.k, r.name FROM ev e JOIN ref r ON e.k = r.k")
    # Distributed over key groups (by g): each node holds its groups' Top-3s, and a SELECT on any
    # node gathers the others' (server/cluster_gather.c), through every kill and restart.
    top_sql = ("SELECT g, id, v FROM (SELECT g, id, v, ROW_NUMBER() OVER "
               "(PARTITION BY g ORDER BY v DESC) AS rn FROM ev) WHERE rn <= %d" % TOPN)
    b.q("CREATE MATERIALIZED VIEW top AS " + top_sql)
    plan = "\n".join(r[0] for r in b.q("EXPLAIN CREATE MATERIALIZED VIEW top2 AS " + top_sql))
    tap("placement: distributed over key groups" in plan, "top is distributed over key groups", plan)
    ok = eventually(lambda: all({"win", "joined", "top"} <= {r[0] for r in n.q("SELECT name FROM weir_views")} and
                                n.q("SELECT count(*) FROM ref") == [(REFKEYS,)] for n in (a, b, c)), timeout=60)
    tap(bool(ok), "every node has the three views and the table's rows",
        [(n.q("SELECT name FROM weir_views"), n.q("SELECT count(*) FROM ref")) for n in (a, b, c)])

    sub = Subscriber(a.port, "win")
    sub.start()

    # The events, at fractions of the production: five kills, d joins after the second, one
    # node is stopped cleanly near the end.
    events = [(0.08, "kill"), (0.2, "kill"), (0.3, "add"), (0.42, "kill"), (0.56, "kill"), (0.7, "kill"),
              (0.85, "remove")]
    prod = Producer(a, args.rows, args.batch, [f for f, _ in events])
    t_prod = time.time()
    prod.start()
    live = [b, c]          # nodes other than a (a takes the inserts and the SUBSCRIBE)
    removed = []
    log = []
    refused = 0
    done = 0
    for frac, what in events:
        prod.wait_produced(int(frac * args.rows))
        if prod.error is not None:
            break
        if what == "kill":
            victim = rnd.choice(live)
            victim.kill9()
            log.append("killed %s at row %d" % (victim.node_id, prod.produced))
            prod.release()
            time.sleep(rnd.uniform(0, 2))    # pacing only: rows go on flowing while it is down
            for attempt in range(3):
                try:
                    victim.start(wait=False)
                    victim.wait_ready(timeout=120)
                    break
                except RuntimeError as e:
                    refused += 1
                    log.append("restart of %s refused: %s" % (victim.node_id, str(e)[-300:]))
                    time.sleep(3)
        elif what == "add":
            d = cluster_test.Node(args.weir, tmp, kafka, "d", cluster=CLUSTER)
            nodes.append(d)
            log.append("added d at row %d" % prod.produced)
            prod.release()
            d.start(wait=False)
            d.wait_ready(timeout=120)
            live.append(d)
        elif what == "remove":
            victim = rnd.choice(live)
            live.remove(victim)
            removed.append(victim)
            log.append("stopped %s at row %d" % (victim.node_id, prod.produced))
            prod.release()
            victim.stop()
        done += 1
    for _ in events[done:]:
        prod.release()
    prod.join(600)
    print("# events: " + "; ".join(log))
    print("# produced %d rows in %.1f s" % (prod.produced, time.time() - t_prod))
    tap(prod.error is None and prod.produced == args.rows, "every INSERT succeeded (%d rows)" % args.rows,
        repr(prod.error))
    tap(refused == 0, "no restart after kill -9 was refused", "\n".join(log))
    tap(all(n.proc.poll() is None for n in [a] + live), "every live node is still running",
        [(n.node_id, n.proc.poll()) for n in [a] + live])

    want = oracle(args.rows)
    for n in [a] + live:
        got = {}

        def check():
            n.q("FLUSH")
            for name in ("win", "joined", "top"):
                got[name] = view_of(n, name)
            return all(got[name] == want[name] for name in want)

        eventually(check, timeout=120, every=1)   # a node restarted late may still be catching up
        for name in ("win", "joined", "top"):
            v = got.get(name, collections.Counter())
            tap(v == want[name], "node %s: view %s equals the oracle (%d rows)" % (n.node_id, name,
                                                                                   sum(want[name].values())),
                diff(v, want[name]))

    want_sub = {(str(ws), str(c), str(s)) for (ws, c, s) in want["win"]}
    got = eventually(lambda: (lambda x: x if x[0] == want_sub else None)(sub.contents()), timeout=60)
    acc, bad = sub.contents()
    tap(sub.error is None and not bad, "SUBSCRIBE win on a: no row twice, no retraction of a missing row",
        "%r %r" % (sub.error, bad[:10]))
    tap(got is not None, "SUBSCRIBE win on a: the accumulated state equals the oracle and the view",
        "missing %s; extra %s" % (sorted(want_sub - acc)[:5], sorted(acc - want_sub)[:5]))
    sub.close()
    st = eventually(lambda: (lambda x: x if all(x.get(n.node_id) == "stopped" for n in removed) and all(
        x.get(n.node_id) == "running" for n in [a] + live) else None)(cluster_test.members(a)), timeout=30)
    tap(st is not None, "weir_cluster on a: the stopped node is 'stopped', the others 'running'",
        cluster_test.members(a))


if __name__ == "__main__":
    main()
