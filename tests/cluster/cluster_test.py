#!/usr/bin/python3
"""cluster_test.py --weir PATH: a weir cluster's control plane, phase 1 (docs/cluster.md).

One `weir broker` and nodes a, b, c of cluster "t" (then d, a late joiner with an empty data
directory). Checks:

- DDL issued on different nodes (a source on a, a view on b, a table and its rows on c, a join view
  on a) reaches every node: the same views, the same state table ids (weir_state), the same rows
  once each node has read the source topic to its end (FLUSH);
- two nodes creating one name at the same moment: one succeeds, the other gets 42P07, and every
  node ends with one object of that name;
- a node killed with kill -9 shows 'gone' in weir_cluster on the others; restarted, it applies
  what it missed (a view created while it was down) and catches up;
- a fourth node with an empty data directory replays the whole catalog topic;
- refused at start, nothing changed: a data directory of another node or cluster (or started
  without --cluster), a node id a live node has, another weir version (WEIR_TEST_FAKE_VERSION);
- the limits of phase 1: CREATE SINK, INSERT ... SELECT into a table, now() in DML: 0A000;
- a password in clear text is refused in a cluster (the statement stays in the topic);
- the broker gone: nodes keep answering queries, weir_cluster says 'cut off', /metrics
  weir_cluster_connected 0, DDL fails with 08006, a new node refuses to start;
- SUBSCRIBE on two nodes gives the same rows; RENAME goes through the topic too.

Prints TAP; exits 1 if a check failed.
"""
import argparse
import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Subscriber, Tap, free_port  # noqa: E402

try:
    import psycopg2
except ImportError as e:  # pragma: no cover
    print("1..0 # SKIP needs python3-psycopg2: %s" % e)
    sys.exit(77)

tap = Tap()
CLUSTER = "t"


def _drain(f):
    for _ in f:
        pass


def broker_log(broker, lines=20):
    """The last lines of a broker's stderr (start_broker), with its exit status if it stopped."""
    try:
        with open(broker.err_path, errors="replace") as f:
            tail = f.read().splitlines()[-lines:]
    except OSError:
        tail = []
    status = broker.poll()
    return "\n".join(tail + (["(the broker exited with status %s)" % status] if status is not None else []))


def start_broker(weir):
    """Starts `weir broker` on a free port: (process, "host:port"). Its output is drained from
    then on. Raises (the process stopped) when it does not say where it listens within 20 s."""
    # Its stderr goes to a file (broker.err_path) that a failed test prints: a broker that dies
    # (an assertion in the mock) must be visible in CI's log, not only as refused connections.
    err = tempfile.NamedTemporaryFile(prefix="weir-broker-", suffix=".log", dir="/tmp", delete=False)
    broker = subprocess.Popen([weir, "broker", "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                              stderr=err, text=True)
    err.close()
    broker.err_path = err.name
    atexit.register(lambda path=err.name: os.path.exists(path) and os.unlink(path))
    addr = None
    deadline = time.time() + 20
    while time.time() < deadline and not addr:
        m = re.search(r"listening on (\S+:\d+)", broker.stdout.readline() or "")
        addr = m.group(1) if m else None
    if not addr:
        broker.terminate()
        broker.wait(10)
        raise RuntimeError("the broker did not start: " + broker_log(broker))
    threading.Thread(target=_drain, args=(broker.stdout,), daemon=True).start()
    return broker, addr


class Node:
    """One weir process of the cluster, with its own data directory and ports."""

    def __init__(self, weir, tmp, kafka, node_id, data=None, cluster=CLUSTER, env=None, extra=None):
        self.weir, self.kafka, self.node_id, self.cluster = weir, kafka, node_id, cluster
        self.data = data or os.path.join(tmp, "data-" + node_id)
        self.log_path = os.path.join(tmp, "%s-%d.log" % (node_id, int(time.time() * 1000)))
        self.env = env
        self.extra = extra or []
        self.proc = None
        self.conn = None

    def start(self, wait=True):
        self.port, self.http_port = free_port(), free_port()
        args = [self.weir, "serve", "--data-dir", self.data, "--port", str(self.port), "--kafka", self.kafka,
                "--no-broker", "--http-port", str(self.http_port)]
        if self.cluster:
            args += ["--cluster", self.cluster, "--node-id", self.node_id]
        args += self.extra
        env = dict(os.environ)
        env.update(self.env or {})
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=40):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("node %s exited: %s" % (self.node_id, self.output()))
            try:
                self.conn = psycopg2.connect(host="127.0.0.1", port=self.port, dbname="weir", user="weir",
                                             connect_timeout=1)
                self.conn.autocommit = True
                return
            except psycopg2.Error:
                time.sleep(0.1)
        raise RuntimeError("node %s did not answer: %s" % (self.node_id, self.output()))

    def output(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def q(self, sql):
        cur = self.conn.cursor()
        cur.execute(sql)
        return cur.fetchall() if cur.description else None

    def err(self, sql):
        """The SQLSTATE the statement fails with, or None when it succeeds."""
        try:
            self.q(sql)
            return None
        except psycopg2.Error as e:
            return e.pgcode

    def metrics(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.http_port, timeout=5) as r:
            return r.read().decode()

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._close_conn()

    def stop(self):
        self._close_conn()
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def _close_conn(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except psycopg2.Error:
                pass
            self.conn = None

    def run_refused(self, timeout=40):
        """Starts the node expecting a refusal: (exit code, output)."""
        self.start(wait=False)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            rc = None
        return rc, self.output()


def eventually(fn, timeout=20, every=0.2):
    """fn() until it returns a true value (returned) or timeout (the last value)."""
    deadline = time.time() + timeout
    v = None
    while time.time() < deadline:
        try:
            v = fn()
        except psycopg2.Error as e:
            v = None
            last = e  # noqa: F841
        if v:
            return v
        time.sleep(every)
    return v


def members(n):
    return {r[0]: r[1] for r in n.q("SELECT node_id, state FROM weir_cluster")}


def catalog_of(n):
    """What must be equal on every node: the views with their state table ids, and the tables."""
    views = n.q("SELECT name FROM weir_views ORDER BY name")
    state = n.q("SELECT view, operator, table_id FROM weir_state ORDER BY view, operator, table_id")
    return views, state


def contents(n):
    n.q("FLUSH")
    return (n.q("SELECT k, s, c FROM sums ORDER BY k"), n.q("SELECT name, s FROM named ORDER BY name"),
            n.q("SELECT k, name FROM ref ORDER BY k"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    args = ap.parse_args()
    broker, kafka = start_broker(args.weir)
    tmp = tempfile.mkdtemp(prefix="weir-cluster-", dir="/tmp")
    nodes = []
    try:
        run(args.weir, tmp, kafka, broker, nodes)
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
        shutil.rmtree(tmp, ignore_errors=True)
    tap.end()


def run(weir, tmp, kafka, broker, nodes):
    a, b, c = (Node(weir, tmp, kafka, x) for x in "abc")
    nodes += [a, b, c]
    # Started together: each watches the heartbeats for a moment before it serves.
    for n in (a, b, c):
        n.start(wait=False)
    for n in (a, b, c):
        n.wait_ready()
    m = eventually(lambda: (lambda x: x if len(x) == 3 and set(x.values()) == {"running"} else None)(members(a)))
    tap(m is not None, "weir_cluster on a lists a, b and c, all running", members(a))

    # DDL on different nodes, each answered with the result of applying it.
    a.q("CREATE SOURCE ev (k BIGINT, v BIGINT) WITH (connector = 'kafka', topic = 'cl_ev', "
        "topic.partitions = '2', scan.startup.mode = 'earliest')")
    # Replicated (phase 1's behaviour): `named` reads it, and every node must show all of it.
    b.q("CREATE MATERIALIZED VIEW sums WITH (placement = 'replicated') AS "
        "SELECT k, sum(v) AS s, count(*) AS c FROM ev GROUP BY k")
    plan = "\n".join(r[0] for r in a.q("EXPLAIN CREATE MATERIALIZED VIEW x AS SELECT k, count(*) FROM ev GROUP BY k"))
    tap("key groups: 128 by [k]" in plan, "in a cluster a view has 128 key groups by default", plan)
    c.q("CREATE TABLE ref (k BIGINT, name TEXT, PRIMARY KEY (k))")
    c.q("INSERT INTO ref VALUES (1, 'one'), (2, 'two'), (3, 'three')")
    a.q("UPDATE ref SET name = 'TWO' WHERE k = 2")
    a.q("CREATE MATERIALIZED VIEW named AS SELECT r.name, s.s FROM sums s JOIN ref r ON s.k = r.k")
    b.q("INSERT INTO ev VALUES " + ", ".join("(%d, %d)" % (i % 4, i) for i in range(200)))
    ok = eventually(lambda: catalog_of(a) == catalog_of(b) == catalog_of(c) and len(catalog_of(a)[0]) == 3)
    tap(bool(ok), "every node has the same views and state table ids", [catalog_of(x) for x in (a, b, c)])
    want = contents(a)
    tap(len(want[0]) == 4 and want[2][1] == (2, "TWO") and len(want[1]) == 3, "the rows on a are as expected", want)
    tap(contents(b) == want and contents(c) == want, "b and c have the same rows as a",
        [contents(x) for x in (b, c)])

    # Conflicting DDL from two nodes at once: topic order decides.
    for i in range(3):
        codes = {}
        gate = threading.Barrier(2)

        def create(n, key):
            gate.wait()
            codes[key] = n.err("CREATE MATERIALIZED VIEW dup%d AS SELECT k, count(*) AS c FROM ev GROUP BY k" % i)

        ts = [threading.Thread(target=create, args=(n, n.node_id)) for n in (a, b)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        tap(sorted(codes.values(), key=str) == sorted([None, "42P07"], key=str),
            "concurrent CREATE dup%d on a and b: one succeeds, the other gets 42P07" % i, codes)
    ok = eventually(lambda: catalog_of(a) == catalog_of(b) == catalog_of(c))
    tap(bool(ok), "after the conflicts every node has the same catalog", [catalog_of(x)[0] for x in (a, b, c)])

    # The limits of phase 1.
    tap(a.err("CREATE SINK s FROM sums WITH (connector = 'blackhole')") == "0A000", "CREATE SINK: 0A000")
    tap(b.err("INSERT INTO ref SELECT k, 'x' FROM sums") == "0A000", "INSERT INTO table ... SELECT: 0A000")
    tap(c.err("INSERT INTO ref VALUES (9, now()::text)") == "0A000", "now() in DML on a table: 0A000")
    before = a.q("SELECT catalog_applied FROM weir_cluster WHERE self")
    code = a.err("INSERT INTO ref VALUES (99, '%s')" % ("x" * 950000))
    tap(code == "54000" and a.q("SELECT catalog_applied FROM weir_cluster WHERE self") == before,
        "a statement too long for one Kafka record: 54000, nothing produced", code)
    tap(a.err("CREATE USER u1 PASSWORD 'secret'") == "0A000", "a password in clear text: 0A000 (kept in the topic)")
    a.q("CREATE USER u2")
    ok = eventually(lambda: b.q("SELECT rolname FROM pg_roles WHERE rolname = 'u2'") == [("u2",)])
    tap(bool(ok), "CREATE USER on a: the user exists on b")
    tap(a.err("CREATE TABLE ref (k INT)") == "42P07", "CREATE of an existing name: 42P07 through the topic")
    tap(b.err("DROP MATERIALIZED VIEW nosuch") == "42P01", "DROP of a missing view: 42P01 through the topic")

    # kill -9 of c: gone for the others; what it missed is applied when it returns.
    c.kill9()
    a.q("CREATE MATERIALIZED VIEW missed AS SELECT count(*) AS n FROM ev")
    b.q("INSERT INTO ev VALUES " + ", ".join("(%d, %d)" % (i % 5, i) for i in range(200, 300)))
    a.q("INSERT INTO ref VALUES (4, 'four')")
    st = eventually(lambda: members(a).get("c") == "gone" and members(b).get("c") == "gone", timeout=25)
    tap(bool(st), "weir_cluster says c is gone after kill -9", members(a))
    c.start()
    ok = eventually(lambda: catalog_of(c) == catalog_of(a))
    tap(bool(ok), "c restarted: it applied what it missed (view 'missed')", catalog_of(c)[0])
    # c reads what it missed from Kafka after its restart: wait for it (a busy machine is slow).
    ok = eventually(lambda: len(contents(a)[0]) == 5 and contents(c) == contents(a), timeout=40)
    want = contents(a)
    tap(bool(ok) and len(want[0]) == 5, "c restarted: its rows equal a's", [contents(c), want])
    lag = c.q("SELECT catalog_lag FROM weir_cluster WHERE self")
    tap(lag == [(0,)], "c restarted: catalog_lag 0", lag)
    st = eventually(lambda: members(a).get("c") == "running")
    tap(bool(st), "c is running again in a's weir_cluster", members(a))

    # A late joiner with an empty data directory replays the whole catalog.
    d = Node(weir, tmp, kafka, "d", extra=["--advertise-host", "node-d.test"])
    nodes.append(d)
    d.start()
    addr = eventually(lambda: (lambda r: r if r and r[0][0] == "node-d.test:%d" % d.port else None)(
        b.q("SELECT postgres_address, http_address FROM weir_cluster WHERE node_id = 'd'")))
    tap(addr == [("node-d.test:%d" % d.port, "node-d.test:%d" % d.http_port)],
        "weir_cluster on b shows d's --advertise-host addresses", addr)
    tap(catalog_of(d) == catalog_of(a), "d (empty data directory) replayed the catalog: same views and ids",
        [catalog_of(d), catalog_of(a)])
    tap(contents(d) == contents(a), "d has the same rows as a")
    subs = [Subscriber(n.port, "sums") for n in (a, d)]
    for sub in subs:
        sub.start()
    b.q("INSERT INTO ev VALUES (7, 700), (1, 1)")
    for n in (a, d):
        n.q("FLUSH")
    got = eventually(lambda: (lambda x, y: x if x == y and len(x[0]) == 6 else None)(subs[0].contents(),
                                                                                      subs[1].contents()))
    tap(got is not None and not got[1], "SUBSCRIBE sums on a and on d: the same rows",
        [sub.contents() for sub in subs])
    for sub in subs:
        sub.close()
    a.q("ALTER MATERIALIZED VIEW missed RENAME TO missed2")
    ok = eventually(lambda: ("missed2",) in catalog_of(d)[0] and catalog_of(b) == catalog_of(a) == catalog_of(d))
    tap(bool(ok), "ALTER ... RENAME on a reaches b and d", catalog_of(d)[0])
    tap(len(eventually(lambda: (lambda x: x if len(x) == 4 else None)(members(b))) or {}) == 4,
        "weir_cluster on b lists four nodes", members(b))

    # A statement that fails on one node only (its broker unreachable from there) leaves that
    # node's catalog different: weir_cluster and /metrics say so.
    b2, b2_addr = start_broker(weir)
    a.q("CREATE SOURCE s2 (k BIGINT) WITH (connector = 'kafka', topic = 'cl_s2', topic.partitions = '1', "
        "properties.bootstrap.server = '%s')" % b2_addr)
    agree = eventually(lambda: (lambda r: r if len(r) == 4 and all(x[1] is True for x in r) else None)(
        a.q("SELECT node_id, catalog_agrees FROM weir_cluster WHERE alive")))
    tap(bool(agree), "every node at the same position agrees with a's catalog",
        a.q("SELECT node_id, catalog_applied, catalog_agrees FROM weir_cluster"))
    b2.terminate()
    b2.wait(10)
    f = Node(weir, tmp, kafka, "f")
    nodes.append(f)
    f.start()
    dis = eventually(lambda: a.q("SELECT catalog_agrees FROM weir_cluster WHERE node_id = 'f'") == [(False,)])
    tap(bool(dis), "f could not create s2 (its broker is gone): a's weir_cluster says f disagrees",
        a.q("SELECT node_id, catalog_applied, catalog_digest, catalog_agrees FROM weir_cluster"))
    tap(f.q("SELECT catalog_agrees FROM weir_cluster WHERE node_id = 'a'") == [(False,)],
        "f's weir_cluster says a disagrees")
    tap("weir_cluster_catalog_disagreements 1" in a.metrics(), "/metrics on a: weir_cluster_catalog_disagreements 1")
    f.stop()

    # Refusals at start, nothing changed.
    d.stop()
    st = eventually(lambda: b.q("SELECT alive, state FROM weir_cluster WHERE node_id = 'd'") == [(False, "stopped")])
    tap(bool(st), "d stopped cleanly: weir_cluster on b says stopped", b.q("SELECT * FROM weir_cluster"))
    before = sorted(os.listdir(d.data))
    rc, out = Node(weir, tmp, kafka, "x", data=d.data).run_refused()
    tap(rc not in (0, None) and 'belongs to node "d" of weir cluster "t"' in out,
        "another node id on d's data directory: refused", out)
    rc, out = Node(weir, tmp, kafka, "d", data=d.data, cluster="other").run_refused()
    tap(rc not in (0, None) and 'belongs to node "d" of weir cluster "t"' in out,
        "another cluster name on d's data directory: refused", out)
    rc, out = Node(weir, tmp, kafka, "d", data=d.data, cluster=None).run_refused()
    tap(rc not in (0, None) and "--cluster t --node-id d" in out, "d's data directory without --cluster: refused",
        out)
    rc, out = Node(weir, tmp, kafka, "a", data=os.path.join(tmp, "data-a2")).run_refused()
    tap(rc not in (0, None) and 'node id "a" is in use by a live node' in out, "a second live node a: refused",
        out)
    rc, out = Node(weir, tmp, kafka, "v", env={"WEIR_TEST_FAKE_VERSION": "0.0.1-test"}).run_refused()
    tap(rc not in (0, None) and "runs version" in out and "0.0.1-test" in out,
        "a node of another version: refused", out)
    for extra, want_msg in ((["--cluster", "bad/name", "--node-id", "z"], "only letters, digits"),
                            (["--cluster", "t", "--node-id", "z" * 65], "1 to 64 characters"),
                            (["--cluster", "t"], "--cluster and --node-id go together")):
        p = subprocess.run([weir, "serve", "--data-dir", os.path.join(tmp, "never"), "--kafka", kafka,
                            "--no-broker"] + extra, capture_output=True, text=True, timeout=30)
        tap(p.returncode == 2 and want_msg in p.stderr and not os.path.exists(os.path.join(tmp, "never")),
            "bad cluster flags %s: refused before anything is created" % " ".join(x[:10] for x in extra),
            p.stderr)
    tap(sorted(os.listdir(d.data)) == before, "d's data directory is as it was")
    d.start()
    tap(catalog_of(d) == catalog_of(a), "d starts again on its own data directory")
    tap("weir_cluster_connected 1" in a.metrics(), "/metrics: weir_cluster_connected 1")

    # Catalog records deleted before a node applied them (the embedded broker keeps about 5 MiB
    # per partition; retention on Kafka): a new node refuses to start instead of building a
    # catalog without them, and the nodes that applied everything carry on.
    pad = "/* " + "x" * (800 * 1024) + " */"
    for i in range(8):
        a.q("CREATE TABLE pad%d %s (k INT, PRIMARY KEY (k))" % (i, pad))
        # Each node applies each record before the next one comes: a node held up (d's restart
        # rebalanced the work group, and every node reopens its distributed views) must not
        # find the records it still needs deleted; that case is the new node's, below.
        eventually(lambda: all(x.q("SELECT count(*) FROM pad%d" % i) == [(0,)] for x in (a, b, c, d)), timeout=60)
    rc, out = Node(weir, tmp, kafka, "g").run_refused()
    tap(rc not in (0, None) and "records it needs were deleted" in out,
        "catalog records deleted before a new node applied them: it refuses to start", out[-600:])
    a.q("DROP TABLE pad0")
    ok = eventually(lambda: all(x.err("SELECT * FROM pad0") == "42P01" and x.q("SELECT count(*) FROM pad1") == [(0,)]
                                for x in (a, b, c, d)), timeout=60)
    tap(bool(ok), "the nodes that applied every record go on applying new ones",
        [(x.node_id, x.q("SELECT state, catalog_lag FROM weir_cluster WHERE self")) for x in (a, b, c, d)])

    # The broker gone: reads go on, the node says it is cut off.
    want = contents(a)
    broker.terminate()
    broker.wait(10)
    st = eventually(lambda: a.q("SELECT state FROM weir_cluster WHERE self") == [("cut off",)], timeout=15)
    tap(bool(st), "broker gone: weir_cluster says a is cut off", a.q("SELECT * FROM weir_cluster WHERE self"))
    tap(a.q("SELECT k, s, c FROM sums ORDER BY k") == want[0], "broker gone: a still answers SELECT")
    tap("weir_cluster_connected 0" in a.metrics(), "broker gone: /metrics weir_cluster_connected 0")
    t0 = time.time()
    code = a.err("CREATE TABLE late (k INT, PRIMARY KEY (k))")
    tap(code == "08006" and time.time() - t0 < 30, "broker gone: DDL fails with 08006 within the produce timeout",
        (code, time.time() - t0))
    rc, out = Node(weir, tmp, kafka, "e").run_refused()
    tap(rc not in (0, None) and "could not reach kafka" in out, "broker gone: a new node refuses to start", out)


if __name__ == "__main__":
    main()
