#!/usr/bin/python3
"""soak.py --weir PATH [--minutes M]: weir under sustained load and chaos, then checked.

Input at a set rate (--rate rows/s over 8 partitions) feeds four views; a PostgreSQL sink and a
SQLite sink take two views each. --clients threads query the views and SUBSCRIBE to them (each
subscription cancelled after a few seconds). Meanwhile, at random moments, the embedded broker
drops every client connection (SIGUSR1, as a broker restart would) and the sinks' PostgreSQL is
restarted (pg_ctl restart -m fast). Every 2 s the server's RSS, open fds and threads are sampled
from /proc.

At the end (input stopped, clients and chaos stopped, FLUSH, CHECKPOINT, sinks delivered):

  - every view and every sink table equals an independent oracle: SQLite over the rows produced;
  - RSS is flat after warm-up: the median of the last third of the samples is within
    max(16 MiB, 15 %) of the median of the first third after warm-up;
  - no fd or thread leak: after the clients are gone, the fd and thread counts are back within
    a small margin of the counts taken after warm-up, before any client or chaos;
  - the server never died, and its log has no sanitizer report.

The default (1 minute) is the short form the test suite runs (meson test `soak`); the long form
is `--minutes 30 --rate 100` (the embedded broker keeps about 5 MiB per partition, and the oracle
reads the input back from the topic, so rate x time must fit).
Prints TAP and a figures line; exits 1 if a check failed.
"""
import argparse
import datetime
import json
import os
import random
import re
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Tap, free_port  # noqa: E402

tap = Tap()

try:
    import psycopg2
    from confluent_kafka import Consumer, Producer, TopicPartition
except ImportError as e:  # pragma: no cover
    print("1..0 # SKIP needs python3-psycopg2 and python3-confluent-kafka: %s" % e)
    sys.exit(77)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PG_TMP = os.path.join(REPO, "scripts", "pg-tmp.sh")
PGBIN = "/usr/lib/postgresql/15/bin"
BASE = datetime.datetime(2026, 1, 1)
PARTITIONS = 8
N_KEYS = 20
TOPIC = "soak_in"
SANITIZER = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:")

# name, SELECT over the source, columns, key columns, the oracle over rows(k, v, ts_ms).
VIEWS = [
    dict(name="s_tumble", sql="SELECT window_start, k, count(*) AS n, sum(v) AS s "
                              "FROM TUMBLE(soak_src, ts, INTERVAL '10' SECOND) GROUP BY window_start, k",
         cols=["window_start", "k", "n", "s"], key="window_start,k", ts=True,
         oracle="SELECT (ts_ms / 10000) * 10000, k, count(*), sum(v) FROM rows GROUP BY 1, 2"),
    dict(name="s_per_k", sql="SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi "
                             "FROM soak_src GROUP BY k",
         cols=["k", "n", "s", "lo", "hi"], key="k", ts=False,
         oracle="SELECT k, count(*), sum(v), min(v), max(v) FROM rows GROUP BY k"),
    dict(name="s_hop", sql="SELECT window_start, count(*) AS n FROM HOP(soak_src, ts, INTERVAL '5' SECOND, "
                           "INTERVAL '10' SECOND) GROUP BY window_start",
         cols=["window_start", "n"], key="window_start", ts=True,
         oracle="SELECT ws, count(*) FROM (SELECT (ts_ms / 5000) * 5000 AS ws FROM rows "
                "UNION ALL SELECT (ts_ms / 5000) * 5000 - 5000 FROM rows) GROUP BY ws"),
    dict(name="s_big", sql="SELECT k, count(*) AS n FROM soak_src WHERE v > 500 GROUP BY k",
         cols=["k", "n"], key="k", ts=False,
         oracle="SELECT k, count(*) FROM rows WHERE v > 500 GROUP BY k"),
]
PG_VIEWS = ["s_tumble", "s_per_k"]
SQLITE_VIEWS = ["s_hop", "s_big"]


def log(msg):
    print("# [%s] %s" % (time.strftime("%H:%M:%S"), msg))
    sys.stdout.flush()


def ts_norm(x):
    """A timestamp from any target, or BASE-relative ms from the oracle -> 'YYYY-MM-DD HH:MM:SS'."""
    if isinstance(x, int):
        x = BASE + datetime.timedelta(milliseconds=x)
    if isinstance(x, datetime.datetime):
        return x.strftime("%Y-%m-%d %H:%M:%S")
    return str(x).replace("T", " ")[:19]


def norm(view, rows):
    out = set()
    for r in rows:
        out.add(tuple(ts_norm(x) if (view["ts"] and i == 0) else int(x) for i, x in enumerate(r)))
    return out


class Soak:
    def __init__(self, a):
        self.a = a
        self.tmp = tempfile.mkdtemp(prefix="weir-soak-", dir="/tmp")
        os.chmod(self.tmp, 0o755)  # PostgreSQL runs as its own user when we are root
        self.pg_dir = os.path.join(self.tmp, "pg")
        self.sqlite_path = os.path.join(self.tmp, "out.db")
        self.rng = random.Random(a.seed)
        self.stop_input = threading.Event()
        self.stop_clients = threading.Event()
        self.rows = []              # (k, v, ts_ms) produced and acknowledged
        self.rows_lock = threading.Lock()
        self.errors = []            # unexpected errors from the helper threads
        self.samples = []           # (t, rss_kb, fds, threads)
        self.stats = dict(queries=0, query_errors=0, subscribes=0, sub_rows=0, broker_drops=0,
                          pg_restarts=0)
        self.broker = self.server = None
        self.pg_started = False

    # ---- processes ----

    def start(self):
        self.broker = subprocess.Popen([self.a.weir, "broker", "--listen", "127.0.0.1:0",
                                        "--partitions", str(PARTITIONS)],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
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
        out = subprocess.run([PG_TMP, "start", self.pg_dir, str(free_port())], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError("pg-tmp.sh start failed: " + out.stderr.strip())
        self.pg_started = True
        self.pg_url = out.stdout.strip().splitlines()[-1]
        self.port = free_port()
        self.log_path = os.path.join(self.tmp, "server.log")
        self.log_f = open(self.log_path, "w")
        self.server = subprocess.Popen(
            [self.a.weir, "serve", "--data-dir", os.path.join(self.tmp, "data"), "--port", str(self.port),
             "--kafka", self.kafka, "--no-broker", "--http-port", "0"],
            stdout=self.log_f, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while True:
            try:
                self.conn = self.connect()
                break
            except psycopg2.Error:
                if time.time() > deadline or self.server.poll() is not None:
                    raise RuntimeError("weir did not answer:\n" + open(self.log_path).read()[-2000:])
                time.sleep(0.1)

    def connect(self):
        c = psycopg2.connect(host="127.0.0.1", port=self.port, dbname="weir", user="weir", connect_timeout=5)
        c.autocommit = True
        return c

    def stop(self):
        self.stop_input.set()
        self.stop_clients.set()
        if self.server and self.server.poll() is None:
            self.server.terminate()
            try:
                self.server.wait(60)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        if self.broker and self.broker.poll() is None:
            self.broker.terminate()
            self.broker.wait(10)
        if self.pg_started:
            subprocess.run([PG_TMP, "stop", self.pg_dir], capture_output=True)
        if not self.a.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def as_pg(self, argv):
        return (["runuser", "-u", "postgres", "--"] + argv) if os.getuid() == 0 else argv

    # ---- the workload ----

    def create(self):
        cur = self.conn.cursor()
        cur.execute("CREATE SOURCE soak_src (k BIGINT, v BIGINT, ts TIMESTAMP, "
                    "WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) WITH (connector = 'kafka', topic = '%s', "
                    "topic.partitions = '%d', scan.startup.mode = 'earliest') FORMAT PLAIN ENCODE JSON"
                    % (TOPIC, PARTITIONS))
        for v in VIEWS:
            cur.execute("CREATE MATERIALIZED VIEW %s AS %s" % (v["name"], v["sql"]))
        for v in VIEWS:
            if v["name"] in PG_VIEWS:
                cur.execute("CREATE SINK pg_%s FROM %s WITH (connector = 'postgres', url = '%s', table = '%s', "
                            "type = 'upsert', primary_key = '%s', create_table = 'true')"
                            % (v["name"], v["name"], self.pg_url, v["name"], v["key"]))
            else:
                cur.execute("CREATE SINK sq_%s FROM %s WITH (connector = 'sqlite', path = '%s', table = '%s', "
                            "type = 'upsert', primary_key = '%s', create_table = 'true')"
                            % (v["name"], v["name"], self.sqlite_path, v["name"], v["key"]))

    def producer_main(self):
        """Rows at --rate per second; event time follows the row count (never late)."""
        try:
            p = Producer({"bootstrap.servers": self.kafka, "linger.ms": 20, "acks": "all",
                          "enable.idempotence": True, "log_level": 3})
            failed = []
            acked = []

            def on_delivery(err, msg, row=None):
                (failed if err else acked).append(row if not err else str(err))

            rng = random.Random(self.a.seed + 1)
            i = 0
            t0 = time.time()
            while not self.stop_input.is_set():
                due = int((time.time() - t0) * self.a.rate)
                while i < due:
                    ms = i * 1000 // self.a.rate + rng.randint(0, 1500)
                    row = (rng.randint(1, N_KEYS), rng.randint(1, 1000), ms)
                    ts = (BASE + datetime.timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
                    p.produce(TOPIC, json.dumps({"id": i, "k": row[0], "v": row[1], "ts": ts}).encode(),
                              partition=rng.randrange(PARTITIONS),
                              on_delivery=lambda err, msg, row=row: on_delivery(err, msg, row))
                    i += 1
                p.poll(0.05)
            if p.flush(60) != 0:
                raise RuntimeError("%d rows still undelivered" % len(p))
            if failed:
                raise RuntimeError("produce failed: %s" % failed[0])
            with self.rows_lock:
                self.rows = acked
        except Exception as e:
            self.errors.append("producer: %s" % e)

    def client_main(self, idx):
        rng = random.Random(self.a.seed * 100 + idx)
        while not self.stop_clients.is_set():
            try:
                c = self.connect()
            except psycopg2.Error:
                self.stats["query_errors"] += 1
                time.sleep(0.5)
                continue
            try:
                for _ in range(rng.randint(5, 30)):
                    if self.stop_clients.is_set():
                        break
                    v = rng.choice(VIEWS)
                    if rng.random() < 0.15:
                        self.subscribe(c, v, rng.uniform(1, 4))
                        break  # a cancelled COPY leaves the connection usable, but start fresh
                    cur = c.cursor()
                    cur.execute("SELECT %s FROM %s ORDER BY 1 DESC LIMIT 50" % (", ".join(v["cols"]), v["name"]))
                    cur.fetchall()
                    self.stats["queries"] += 1
                    time.sleep(rng.uniform(0, 0.2))
            except psycopg2.Error as e:
                # An ad hoc query may fail while the view restarts; never with a crash.
                self.stats["query_errors"] += 1
                if self.server.poll() is not None:
                    self.errors.append("client: server died: %s" % e)
                    return
            finally:
                c.close()

    def subscribe(self, c, v, seconds):
        stats = self.stats

        class Rows:
            def write(self, data):
                stats["sub_rows"] += data.count("\n") if isinstance(data, str) else data.count(b"\n")

        t = threading.Timer(seconds, c.cancel)
        t.start()
        try:
            c.cursor().copy_expert("COPY (SUBSCRIBE %s) TO STDOUT" % v["name"], Rows())
        except psycopg2.extensions.QueryCanceledError:
            pass
        finally:
            t.cancel()
        self.stats["subscribes"] += 1

    def chaos_main(self):
        rng = random.Random(self.a.seed + 2)
        while not self.stop_clients.wait(rng.uniform(self.a.chaos_min, self.a.chaos_max)):
            if rng.random() < 0.5:
                self.broker.send_signal(signal.SIGUSR1)
                self.stats["broker_drops"] += 1
            else:
                # -l: the restarted postmaster must not inherit our pipes (run() would wait for it).
                out = subprocess.run(self.as_pg([PGBIN + "/pg_ctl", "-D", os.path.join(self.pg_dir, "pgdata"),
                                                 "-l", os.path.join(self.pg_dir, "pg.log"),
                                                 "restart", "-m", "fast", "-w", "-t", "30"]),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, timeout=60)
                if out.returncode != 0:
                    self.errors.append("pg_ctl restart failed: %s" % out.stderr.strip()[-300:])
                    return
                self.stats["pg_restarts"] += 1

    def sample(self):
        pid = self.server.pid
        try:
            with open("/proc/%d/status" % pid) as f:
                rss = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
            fds = len(os.listdir("/proc/%d/fd" % pid))
            threads = len(os.listdir("/proc/%d/task" % pid))
        except (OSError, AttributeError):
            return None
        s = (time.time(), rss, fds, threads)
        self.samples.append(s)
        return s

    def sampler_main(self, until):
        while not until.wait(2):
            self.sample()

    # ---- checks ----

    def read_input(self):
        """The input as the topic holds it: [(id, k, v, ts_ms)]. A producer retry after a dropped
        connection can store a record twice (the embedded broker does not de-duplicate): weir must
        count both copies, so the oracle reads the topic, not the producer's list."""
        c = Consumer({"bootstrap.servers": self.kafka, "group.id": "soak-check", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest"})
        out = []
        try:
            # The embedded broker drops the oldest records of a partition past about 5 MiB: then
            # the topic is no longer the input, and the comparison would mean nothing.
            marks = [c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10) for p in range(PARTITIONS)]
            lows = [lo for lo, _ in marks]
            tap(not any(lows), "the broker kept the whole input (partition start offsets %s)" % lows,
                "lower --rate or --minutes: the embedded broker keeps about 5 MiB per partition")
            c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
            # Up to each partition's end offset (the embedded broker returns one message set per
            # fetch, so a long input takes a while).
            next_off = [lo for lo in lows]
            seen = set()
            t0 = time.time()
            deadline = t0 + 900
            while any(next_off[p] < marks[p][1] for p in range(PARTITIONS)) and time.time() < deadline:
                for m in c.consume(1000, 1.0):
                    if m.error():
                        continue
                    next_off[m.partition()] = m.offset() + 1
                    if (m.partition(), m.offset()) in seen:
                        continue  # a record fetched twice is still one record
                    seen.add((m.partition(), m.offset()))
                    d = json.loads(m.value())
                    ms = int((datetime.datetime.fromisoformat(d["ts"]) - BASE).total_seconds() * 1000 + 0.5)
                    out.append((d["id"], d["k"], d["v"], ms))
            tap(all(next_off[p] >= marks[p][1] for p in range(PARTITIONS)),
                "read the input back to its end (%d records in %.0f s)" % (len(out), time.time() - t0),
                "stopped at %s, end offsets %s" % (next_off, [hi for _, hi in marks]))
        finally:
            c.close()
        return out

    def oracle(self):
        stored = self.read_input()
        ids = {}
        for r in stored:
            ids[r[0]] = ids.get(r[0], 0) + 1
        tap(len(ids) == len(self.rows), "every acknowledged row is in the topic (%d rows, %d records; %d stored "
            "twice by producer retries)" % (len(self.rows), len(stored), sum(1 for n in ids.values() if n > 1)))
        self.stored = len(stored)
        db = sqlite3.connect(":memory:")
        db.execute("CREATE TABLE rows (id INTEGER, k INTEGER, v INTEGER, ts_ms INTEGER)")
        db.executemany("INSERT INTO rows VALUES (?, ?, ?, ?)", stored)
        return {v["name"]: norm(v, db.execute(v["oracle"]).fetchall()) for v in VIEWS}

    def settle(self):
        """FLUSH, CHECKPOINT, then wait until no sink has pending epochs."""
        cur = self.conn.cursor()
        for attempt in range(5):
            try:
                cur.execute("FLUSH")
                break
            except psycopg2.Error as e:
                log("FLUSH: %s" % str(e).strip())
                time.sleep(1)
        cur.execute("CHECKPOINT")
        deadline = time.time() + 120
        while time.time() < deadline:
            cur.execute("SELECT name, pending_epochs, state, last_error FROM weir_sinks")
            st = cur.fetchall()
            if all(r[1] == 0 for r in st):
                return st
            time.sleep(0.5)
        return st

    def check_results(self):
        want = self.oracle()
        cur = self.conn.cursor()
        pg = psycopg2.connect(self.pg_url)
        sq = sqlite3.connect(self.sqlite_path, timeout=30)
        try:
            for v in VIEWS:
                cols = ", ".join(v["cols"])
                cur.execute("SELECT %s FROM %s" % (cols, v["name"]))
                got = norm(v, cur.fetchall())
                tap(got == want[v["name"]], "view %s equals the oracle (%d rows)" % (v["name"], len(want[v["name"]])),
                    "missing %s\nextra %s" % (sorted(want[v["name"]] - got)[:5], sorted(got - want[v["name"]])[:5]))
                if v["name"] in PG_VIEWS:
                    pc = pg.cursor()
                    pc.execute("SELECT %s FROM %s" % (cols, v["name"]))
                    got = norm(v, pc.fetchall())
                    target = "postgres"
                else:
                    got = norm(v, sq.execute("SELECT %s FROM %s" % (cols, v["name"])).fetchall())
                    target = "sqlite"
                tap(got == want[v["name"]], "%s sink of %s equals the oracle" % (target, v["name"]),
                    "missing %s\nextra %s" % (sorted(want[v["name"]] - got)[:5], sorted(got - want[v["name"]])[:5]))
        finally:
            pg.close()
            sq.close()

    def broker_drop_selftest(self):
        """SIGUSR1 really cuts a connection: an idle client socket sees EOF."""
        host, port = self.kafka.rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=5)
        time.sleep(0.2)
        self.broker.send_signal(signal.SIGUSR1)
        try:
            ok = s.recv(1) == b""
        except socket.timeout:
            ok = False      # still open 5 s later
        except ConnectionError:
            ok = True       # reset: closed too
        finally:
            s.close()
        time.sleep(0.2)
        alive = self.broker.poll() is None
        tap(ok and alive, "the broker drops client connections on SIGUSR1 and keeps running",
            "connection closed: %s, broker alive: %s" % (ok, alive))

    def run(self):
        t_start = time.time()
        self.start()
        self.broker_drop_selftest()
        self.create()
        producer = threading.Thread(target=self.producer_main)
        producer.start()
        sampling = threading.Event()
        sampler = threading.Thread(target=self.sampler_main, args=(sampling,), daemon=True)
        sampler.start()
        total = self.a.minutes * 60
        warm = min(self.a.warmup, total / 3)
        log("warm-up %.0f s at %d rows/s" % (warm, self.a.rate))
        time.sleep(warm)
        base = self.sample()
        log("after warm-up: rss %d KiB, %d fds, %d threads" % (base[1], base[2], base[3]))
        t_warm = time.time()
        threads = [threading.Thread(target=self.client_main, args=(i,)) for i in range(self.a.clients)]
        threads.append(threading.Thread(target=self.chaos_main))
        for t in threads:
            t.start()
        while time.time() - t_start < total and self.server.poll() is None and not self.errors:
            time.sleep(1)
        self.stop_clients.set()
        self.stop_input.set()
        for t in threads:
            t.join(60)
        producer.join(120)
        if not tap(self.server.poll() is None, "the server ran to the end",
                   open(self.log_path, errors="replace").read()[-3000:]):
            return
        tap(not self.errors, "no producer, client or chaos error", "\n".join(self.errors[:10]))
        # The last restart may have left PostgreSQL coming up: settle waits for the sinks.
        sinks = self.settle()
        tap(all(r[1] == 0 for r in sinks), "every sink delivered its epochs", repr(sinks))
        sampling.set()
        time.sleep(3)  # closed client sessions end their threads
        end = self.sample()
        self.check_results()

        # RSS after warm-up: first third vs last third of the samples taken while under load.
        load = [s for s in self.samples if s[0] >= t_warm]
        third = max(1, len(load) // 3)
        first = statistics.median(s[1] for s in load[:third])
        last = statistics.median(s[1] for s in load[-third:])
        allowed = max(16 * 1024, first * 0.15)
        hours = max((load[-1][0] - load[0][0]) / 3600, 1e-9)
        slope = (last - first) / 1024 / (hours * 2 / 3) if len(load) > 2 else 0
        # Under AddressSanitizer freed memory waits in a quarantine (256 MB by default) before it
        # is reused, so RSS climbs for a long while whatever the server does: the figure is
        # shown, and the check is the normal build's.
        try:
            asan = "libasan" in open("/proc/%d/maps" % self.server.pid).read()
        except OSError:
            asan = False
        if asan:
            print("# RSS after warm-up %.1f -> %.1f MiB (ASan build: not checked, its quarantine holds freed memory)"
                  % (first / 1024, last / 1024))
        else:
            tap(last - first <= allowed, "RSS flat after warm-up: %.1f -> %.1f MiB (allowed +%.1f)"
                % (first / 1024, last / 1024, allowed / 1024))
        tap(end[2] <= base[2] + 6, "no fd leak: %d fds after warm-up, %d at the end" % (base[2], end[2]))
        tap(end[3] <= base[3] + 2, "no thread leak: %d threads after warm-up, %d at the end" % (base[3], end[3]))
        text = open(self.log_path, errors="replace").read()
        tap(not SANITIZER.search(text), "no sanitizer report in the server log", text[-3000:])
        peak = max(s[1] for s in self.samples)
        print("# figures: %.1f min, %d rows at %d rows/s, %d queries (%d errors), %d subscriptions (%d rows), "
              "%d broker connection drops, %d PostgreSQL restarts; RSS %.1f MiB after warm-up, %.1f at the end, "
              "peak %.1f, trend %+.1f MiB/h; fds %d -> %d, threads %d -> %d"
              % ((time.time() - t_start) / 60, len(self.rows), self.a.rate, self.stats["queries"],
                 self.stats["query_errors"], self.stats["subscribes"], self.stats["sub_rows"],
                 self.stats["broker_drops"], self.stats["pg_restarts"], first / 1024, end[1] / 1024, peak / 1024,
                 slope, base[2], end[2], base[3], end[3]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--rate", type=int, default=200, help="input rows per second (default 200)")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--warmup", type=float, default=15, help="seconds before the baseline sample")
    ap.add_argument("--chaos-min", type=float, default=3)
    ap.add_argument("--chaos-max", type=float, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    a = ap.parse_args()
    s = Soak(a)
    try:
        s.run()
    except Exception as e:
        tap(False, "soak run: %s" % e)
    finally:
        s.stop()
    tap.end()


if __name__ == "__main__":
    main()
