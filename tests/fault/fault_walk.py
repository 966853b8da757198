#!/usr/bin/python3
"""fault_walk.py --weir PATH: walk every fault-injection point over a small workload.

Needs a weir built with -Dfault_injection=true (common/fault.h); run it from an ASan build so
a leak or a memory error on any failure path fails the run. One broker and one PostgreSQL serve
every run. The workload: a Kafka source (input produced once, with one malformed record that goes
to the dead-letter topic), a windowed view and a per-key view, a PostgreSQL sink and a SQLite
sink on the windowed view, an exactly-once Kafka sink on the per-key view, CHECKPOINT, and
client queries that read both views. "Expected" includes the malformed record in the dead-letter
topic exactly once per view.

A counting run (no fault, WEIR_FAULT_COUNTS) learns how many calls each point gets. Then, for
each point, runs with WEIR_FAULT=point:N:once for N spread over 1..calls, and one with
point:C/2:always (every call from the middle of the workload on fails). Every run must end in one of:

  - a retry: the fault fired, and the views and all three sinks still reach the expected rows;
  - a clear error (a SQLSTATE on a statement, or last_error in weir_views / weir_sinks), and
    after a restart without the fault, the views and sinks reach the expected rows;
  - a fault while the data directory is opened: the server refuses to start (exit 1) and says
    why ("weir: storage: ..."); a restart without the fault recovers;
  - for the "alloc" point only: an explained abort ("weir: out of memory allocating N bytes",
    SIGABRT), which is what xmalloc is designed to do; after it, too, a restart recovers.

and never in a crash, a sanitizer report (leak, memory error, UB), a hang or a wrong result.
Prints TAP (one line per run); exits 1 if any run failed.
"""
import argparse
import datetime
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Tap, free_port  # noqa: E402

tap = Tap()

try:
    import psycopg2
    from confluent_kafka import Consumer, Producer
except ImportError as e:  # pragma: no cover
    print("1..0 # SKIP needs python3-psycopg2 and python3-confluent-kafka: %s" % e)
    sys.exit(77)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PG_TMP = os.path.join(REPO, "scripts", "pg-tmp.sh")
BASE = datetime.datetime(2026, 1, 1)
N_ROWS = 400
N_KEYS = 8
TOPIC = "fw_in"
# Points the workload must reach (the counting run checks that each one is called): a renamed
# or lost point fails the walk instead of passing untested.
POINTS = ["alloc", "lmdb_read_begin", "lmdb_write_begin", "lmdb_commit", "lmdb_put", "next_id", "pg_connect", "pg_exec",
          "kafka_poll", "kafka_produce", "kafka_txn_begin", "kafka_txn_commit", "sock_write"]
# Points the workload may not reach (a state read misses LMDB when the cache has the row).
OPTIONAL_POINTS = ["lmdb_get", "kafka_flush"]
SANITIZER = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: UndefinedBehavior")


def make_rows():
    rng = random.Random(9)
    rows = []
    for i in range(N_ROWS):
        ms = i * 150 + rng.randint(0, 100)
        rows.append((rng.randint(1, N_KEYS), rng.randint(1, 1000), ms))
    return rows


def expected(rows):
    """The oracle, in plain Python: window_start text -> ..., and per key."""
    win, per_k = {}, {}
    for k, v, ms in rows:
        ws = (BASE + datetime.timedelta(milliseconds=ms // 10000 * 10000)).strftime("%Y-%m-%d %H:%M:%S")
        n, s = win.get((ws, k), (0, 0))
        win[(ws, k)] = (n + 1, s + v)
        n, s = per_k.get(k, (0, 0))
        per_k[k] = (n + 1, s + v)
    return ({(ws, k): nv for (ws, k), nv in win.items()}, per_k)


def norm_ts(x):
    if isinstance(x, datetime.datetime):
        return x.strftime("%Y-%m-%d %H:%M:%S")
    return str(x).replace("T", " ")[:19]


def win_rows(rows):
    return {(norm_ts(ws), int(k)): (int(n), int(s)) for ws, k, n, s in rows}


class Walk:
    def __init__(self, a):
        self.a = a
        self.tmp = tempfile.mkdtemp(prefix="weir-fault-", dir="/tmp")
        os.chmod(self.tmp, 0o755)  # PostgreSQL runs as its own user when we are root
        self.broker = None
        self.pg_started = False
        self.server = None
        self.run_id = 0

    # ---- shared services ----

    def start(self):
        self.broker = subprocess.Popen([self.a.weir, "broker", "--listen", "127.0.0.1:0"],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                       env={k: v for k, v in os.environ.items() if not k.startswith("WEIR_FAULT")})
        self.kafka = None
        deadline = time.time() + 20
        while time.time() < deadline and not self.kafka:
            line = self.broker.stdout.readline()
            if not line:
                break
            m = re.search(r"listening on (\S+:\d+)", line)
            self.kafka = m.group(1) if m else None
        if not self.kafka:
            raise RuntimeError("the broker did not start")
        threading.Thread(target=lambda f: [None for _ in f], args=(self.broker.stdout,), daemon=True).start()
        out = subprocess.run([PG_TMP, "start", os.path.join(self.tmp, "pg"), str(free_port())],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError("pg-tmp.sh start failed: " + out.stderr.strip())
        self.pg_started = True
        self.pg_url = out.stdout.strip().splitlines()[-1]
        self.rows = make_rows()
        self.want_win, self.want_k = expected(self.rows)
        p = Producer({"bootstrap.servers": self.kafka, "acks": "all"})
        for j, (k, v, ms) in enumerate(self.rows):
            ts = (BASE + datetime.timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
            p.produce(TOPIC, json.dumps({"k": k, "v": v, "ts": ts}).encode(), partition=0)
            if j == N_ROWS // 2:
                # One malformed record: dead-lettered (the Kafka producer's points), not counted.
                p.produce(TOPIC, b"not json", key=b"bad", partition=0)
        if p.flush(30) != 0:
            raise RuntimeError("could not produce the input")

    def stop(self):
        self.kill_server()
        if self.broker and self.broker.poll() is None:
            self.broker.terminate()
            self.broker.wait(10)
        if self.pg_started:
            subprocess.run([PG_TMP, "stop", os.path.join(self.tmp, "pg")], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- one weir ----

    def spawn(self, fault=None, counts=None):
        env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_FAULT")}
        if fault:
            env["WEIR_FAULT"] = fault
        if counts:
            env["WEIR_FAULT_COUNTS"] = counts
        # A leak report must fail the run, not scroll by.
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        self.port = free_port()
        self.log_f = open(self.log_path, "a")
        self.log_f.write("\n===== WEIR_FAULT=%s =====\n" % fault)
        self.log_f.flush()
        self.server = subprocess.Popen(
            [self.a.weir, "serve", "--data-dir", self.data, "--port", str(self.port), "--kafka", self.kafka,
             "--no-broker", "--http-port", "0", "--checkpoint-interval", "300"],
            stdout=self.log_f, stderr=subprocess.STDOUT, env=env)

    def connect(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline and self.server.poll() is None:
            try:
                c = psycopg2.connect(host="127.0.0.1", port=self.port, dbname="weir", user="weir",
                                     connect_timeout=2)
                c.autocommit = True
                return c
            except psycopg2.Error:
                time.sleep(0.1)
        return None

    def stop_server(self):
        """SIGTERM; returns the exit code (None if it had to be killed)."""
        if self.server is None:
            return 0
        rc = self.server.poll()
        if rc is None:
            self.server.terminate()
            try:
                rc = self.server.wait(60)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
                rc = None
        self.server = None
        self.log_f.close()
        return rc

    def kill_server(self):
        if self.server is not None and self.server.poll() is None:
            self.server.kill()
            self.server.wait()
        self.server = None

    def log_text(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    # ---- the workload ----

    def statements(self, i):
        return [
            ("source", "CREATE SOURCE fw_src (k BIGINT, v BIGINT, ts TIMESTAMP, "
                       "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (connector = 'kafka', "
                       "topic = '%s', scan.startup.mode = 'earliest', error.topic = 'fw_dlq_%d') FORMAT PLAIN ENCODE JSON"
                       % (TOPIC, i)),
            ("view", "CREATE MATERIALIZED VIEW fw_win AS SELECT window_start, k, count(*) AS n, sum(v) AS s "
                     "FROM TUMBLE(fw_src, ts, INTERVAL '10' SECOND) GROUP BY window_start, k"),
            ("view", "CREATE MATERIALIZED VIEW fw_k AS SELECT k, count(*) AS n, sum(v) AS s FROM fw_src GROUP BY k"),
            ("sink", "CREATE SINK fw_pg FROM fw_win WITH (connector = 'postgres', url = '%s', table = 'fw_%d', "
                     "type = 'upsert', primary_key = 'window_start,k', create_table = 'true')" % (self.pg_url, i)),
            ("sink", "CREATE SINK fw_sq FROM fw_win WITH (connector = 'sqlite', path = '%s', table = 'fw', "
                     "type = 'upsert', primary_key = 'window_start,k', create_table = 'true')" % self.sqlite),
            ("sink", "CREATE SINK fw_kf_%d FROM fw_k WITH (connector = 'kafka', topic = 'fw_out_%d') "
                     "FORMAT UPSERT ENCODE JSON" % (i, i)),
        ]

    def run_sql(self, c, sql, errors, tries=3):
        """Runs sql, retrying after an error (as a user would); records each error. True if it ran or
        the object is already there (a retry after an error whose statement did go through)."""
        for _ in range(tries):
            try:
                c.cursor().execute(sql)
                return True
            except psycopg2.Error as e:
                errors.append((e.pgcode, str(e).strip().splitlines()[0] if str(e).strip() else ""))
                if e.pgcode in ("42P07", "42710"):
                    return True
                if c.closed or self.server.poll() is not None:
                    return False
                time.sleep(0.2)
        return False

    def count_kafka(self, topic):
        """Committed records in topic (read to its end)."""
        c = Consumer({"bootstrap.servers": self.kafka, "group.id": "fw-" + uuid.uuid4().hex,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "isolation.level": "read_committed", "enable.partition.eof": True})
        n = 0
        try:
            c.subscribe([topic])
            deadline = time.time() + 10
            eof = False
            while time.time() < deadline and not eof:
                for m in c.consume(500, 0.5):
                    if m.error():
                        eof = eof or m.error().code() == -191  # _PARTITION_EOF
                        continue
                    n += 1
        finally:
            c.close()
        return n

    def read_kafka(self, topic):
        c = Consumer({"bootstrap.servers": self.kafka, "group.id": "fw-" + uuid.uuid4().hex,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "isolation.level": "read_committed", "enable.partition.eof": True})
        state = {}
        try:
            c.subscribe([topic])
            deadline = time.time() + 10
            eof = False
            while time.time() < deadline and not eof:
                for m in c.consume(500, 0.5):
                    if m.error():
                        eof = eof or m.error().code() == -191  # _PARTITION_EOF
                        continue
                    k = json.loads(m.key())["k"]
                    if m.value() is None:
                        state.pop(k, None)
                    else:
                        d = json.loads(m.value())
                        state[int(k)] = (int(d["n"]), int(d["s"]))
        finally:
            c.close()
        return state

    def results(self, c, i):
        """What each target holds now: {target: rows or an error string}."""
        out = {}
        cur = c.cursor()
        try:
            cur.execute("SELECT window_start, k, n, s FROM fw_win")
            out["view fw_win"] = win_rows(cur.fetchall())
            cur.execute("SELECT k, n, s FROM fw_k")
            out["view fw_k"] = {int(k): (int(n), int(s)) for k, n, s in cur.fetchall()}
        except psycopg2.Error as e:
            out["view"] = "error: %s" % str(e).strip()
        try:
            pg = psycopg2.connect(self.pg_url)
            try:
                pc = pg.cursor()
                pc.execute("SELECT window_start, k, n, s FROM fw_%d" % i)
                out["postgres"] = win_rows(pc.fetchall())
            finally:
                pg.close()
        except psycopg2.Error as e:
            out["postgres"] = "error: %s" % str(e).strip()
        try:
            sq = sqlite3.connect(self.sqlite, timeout=10)
            try:
                out["sqlite"] = win_rows(sq.execute("SELECT window_start, k, n, s FROM fw").fetchall())
            finally:
                sq.close()
        except sqlite3.Error as e:
            out["sqlite"] = "error: %s" % e
        return out

    def correct(self, res, kafka_fault=False):
        want = {"view fw_win": self.want_win, "view fw_k": self.want_k, "postgres": self.want_win,
                "sqlite": self.want_win, "kafka": self.want_k}
        bad = [t for t in want if res.get(t) != want[t]]
        # Dead letters are exactly-once. Only under a Kafka fault may a second copy show: the
        # embedded broker does not hide an aborted transaction's records from read_committed.
        # Each of the two views is its own consumer of the source: one copy each.
        n = res.get("dead letters")
        if not (n == 2 or (kafka_fault and isinstance(n, int) and n > 2)):
            bad.append("dead letters")
        return bad

    def converge(self, c, i, timeout):
        """Waits (CHECKPOINT now and then) until every target is right; returns (bad targets, results)."""
        deadline = time.time() + timeout
        res, bad = {}, ["(nothing read)"]
        while time.time() < deadline and self.server.poll() is None:
            try:
                c.cursor().execute("CHECKPOINT")
            except psycopg2.Error:
                pass
            try:
                res = self.results(c, i)
            except psycopg2.Error as e:
                res = {"view": "error: %s" % e}
            if res.get("view fw_k") == self.want_k:
                res["kafka"] = self.read_kafka("fw_out_%d" % i)
                res["dead letters"] = self.count_kafka("fw_dlq_%d" % i)
            bad = self.correct(res, self.kafka_fault)
            if not bad:
                return [], res
            time.sleep(0.3)
        return bad, res

    def status_errors(self, c):
        cur = c.cursor()
        cur.execute("SELECT name, last_error FROM weir_views WHERE last_error IS NOT NULL AND last_error <> ''")
        errs = [("view " + r[0], r[1]) for r in cur.fetchall()]
        cur.execute("SELECT name, last_error FROM weir_sinks WHERE last_error IS NOT NULL AND last_error <> ''")
        return errs + [("sink " + r[0], r[1]) for r in cur.fetchall()]

    def one(self, fault, counts=None):
        """One run; returns (ok, what happened, detail)."""
        self.run_id += 1
        i = self.run_id
        d = os.path.join(self.tmp, "run%d" % i)
        os.makedirs(d)
        self.data = os.path.join(d, "data")
        self.sqlite = os.path.join(d, "out.db")
        self.log_path = os.path.join(d, "server.log")
        point = fault.split(":")[0] if fault else None
        self.kafka_fault = bool(point and point.startswith("kafka_"))
        errors = []
        self.spawn(fault, counts)
        c = self.connect(30)
        res, bad = {}, ["(not reached)"]
        if c is not None:
            for _, sql in self.statements(i):
                if not self.run_sql(c, sql, errors):
                    break
            else:
                # A client query with many rows: the send path under short writes.
                try:
                    cur = c.cursor()
                    cur.execute("SELECT k, n, s, repeat('x', 2000) FROM fw_k")
                    cur.fetchall()
                except psycopg2.Error as e:
                    errors.append((e.pgcode, str(e).strip()))
                always = fault and fault.endswith(":always")
                bad, res = self.converge(c, i, 6 if always else 25)
                if self.server.poll() is None:
                    try:
                        errors += self.status_errors(c)
                    except psycopg2.Error:
                        pass
            try:
                c.close()
            except psycopg2.Error:
                pass
        died = self.server.poll()
        rc = self.stop_server()
        log = self.log_text()
        fired = fault is None or ("fault injected: %s " % point) in log
        if SANITIZER.search(log):
            return False, "sanitizer report", log[-4000:]
        if counts:
            return (not bad and rc == 0), "counting run", "wrong targets %s (%r)\n%s" % (bad, {t: res.get(t) for t in bad}, log[-3000:])
        if died is not None:
            # Only an allocation failure may end the process, and only as xmalloc's explained abort.
            if point == "alloc" and died == -signal.SIGABRT and "weir: out of memory allocating" in log:
                how = "explained abort"
            elif died == 1 and " is ready" not in log and re.search(r"^weir: storage: .*", log, re.M):
                # The data directory could not be opened: refusing to start, with the reason, is
                # the designed answer (the server cannot serve without its state).
                how = "startup refused with a clear error"
            else:
                return False, "the server died (exit %s)" % died, log[-3000:]
        elif rc != 0 and point == "alloc" and rc == -signal.SIGABRT and "weir: out of memory allocating" in log:
            how = "explained abort at shutdown"
        elif rc != 0:
            return False, "unclean shutdown (exit %s)" % rc, log[-3000:]
        elif not bad:
            if not fired:
                return True, "not reached", ""
            how = "retried"
        else:
            how = "clear error"
            clear = [e for e in errors if e[0] and len(e[0]) == 5] or \
                    [e for e in errors if e[1]] or re.findall(r"weir: .*(?:failed|error).*", log)
            if not clear:
                return False, "wrong result without an error: %s" % bad, repr(res)[:2000]
        # Recovery, also after a retry: the fault is gone, and the same data directory must still
        # give the expected result (what a failure path left behind in LMDB and the sinks'
        # progress must agree).
        self.spawn(None)
        c = self.connect(30)
        if c is None:
            self.stop_server()
            return False, "%s, then no restart" % how, self.log_text()[-3000:]
        for _, sql in self.statements(i):
            self.run_sql(c, sql, [])
        bad, res = self.converge(c, i, 40)
        c.close()
        rc = self.stop_server()
        log = self.log_text()
        if SANITIZER.search(log) or rc != 0:
            return False, "%s; recovery run exit %s" % (how, rc), log[-3000:]
        if bad:
            return False, "%s; after restart wrong %s" % (how, bad), repr(res)[:2000]
        return True, how + ", recovered", ""


def plan(counts, per_point):
    """N values per point: 1, 2, then spread geometrically over the calls the workload made."""
    runs = []
    for p in POINTS + OPTIONAL_POINTS:
        n = counts.get(p, 0)
        if n == 0:
            continue
        ns = [1, 2]
        x = 4
        while x < n:
            ns.append(x)
            x *= 4 if p != "alloc" else 16
        ns.append(max(1, n - 1))
        ns = sorted(set(v for v in ns if v <= n))
        if len(ns) > per_point:
            step = (len(ns) - 1) / (per_point - 1)
            ns = sorted(set(ns[round(j * step)] for j in range(per_point)))
        runs += ["%s:%d:once" % (p, v) for v in ns]
        if p != "alloc":
            runs.append("%s:%d:always" % (p, max(1, n // 2)))
    return runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    ap.add_argument("--per-point", type=int, default=3, help="once-runs per point (default 3)")
    ap.add_argument("--points", help="comma-separated subset of points")
    ap.add_argument("--fault", help="run just this WEIR_FAULT value (and a counting run)")
    a = ap.parse_args()
    w = Walk(a)
    t0 = time.time()
    try:
        w.start()
        counts_path = os.path.join(w.tmp, "counts")
        ok, what, detail = w.one(None, counts=counts_path)
        counts = {}
        if os.path.exists(counts_path):
            for line in open(counts_path):
                name, n = line.split()
                counts[name] = int(n)
        tap(ok, "counting run: %s" % " ".join("%s=%d" % kv for kv in sorted(counts.items())), detail)
        if not counts:
            tap(False, "the counting run wrote no counts: is this weir built with -Dfault_injection=true?")
            return
        wanted = a.points.split(",") if a.points else POINTS
        for p in wanted:
            if p in POINTS:
                tap(counts.get(p, 0) > 0, "the workload reaches point %s" % p)
        if a.fault:
            runs = [a.fault]
        else:
            runs = [r for r in plan(counts, a.per_point) if r.split(":")[0] in wanted + OPTIONAL_POINTS]
        for f in runs:
            ok, what, detail = w.one(f)
            tap(ok, "WEIR_FAULT=%s: %s" % (f, what), detail)
    finally:
        w.stop()
    print("# %d runs in %.0f s" % (w.run_id, time.time() - t0))


if __name__ == "__main__":
    main()
    tap.end()
