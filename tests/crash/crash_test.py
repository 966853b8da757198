#!/usr/bin/python3
"""crash_test.py: kill weir at random moments and at its named crash points while
it consumes a known input, then prove that every view and every sink equals an
independent oracle (SQLite over the same rows): nothing lost, nothing twice.

    /usr/bin/python3 tests/crash/crash_test.py --weir build/server/weir
    /usr/bin/python3 tests/crash/crash_test.py --weir build/server/weir --long

See tests/crash/README.md. The last line of stdout is "N passed, N failed".
"""
import argparse
import datetime
import json
import math
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
import uuid

try:
    import psycopg2
    from confluent_kafka import Consumer, Producer, TopicPartition
except ImportError as e:  # pragma: no cover
    sys.exit(f"crash_test.py: {e}: run it with /usr/bin/python3 (Debian's python3-psycopg2, "
             "python3-confluent-kafka; scripts/deps.sh installs them)")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PG_TMP = os.path.join(REPO, "scripts", "pg-tmp.sh")

CRASH_POINTS = ["checkpoint_mid", "checkpoint_committed", "sink_before_write", "sink_after_write", "recovery"]
BASE = datetime.datetime(2026, 1, 1)
WM_DELAY_MS = 5000          # WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
MAX_DISORDER_MS = 4000      # strictly less than the watermark delay: no row is ever late
STEP_MS = 50                # event time advances 50 ms per row on average
N_KEYS = 40
SOURCE = "crash_src"
IN_TOPIC = "crash_in"
KAFKA_SINK_VIEW = "hop_cnt"
KAFKA_SINK_TOPIC = "crash_hop_out"
# Conservative bytes a record costs in the mock broker's per-partition log (JSON value ~60 B,
# record and batch overhead); the mock keeps ~5 MiB per partition; we stay under half of it.
RECORD_BYTES = 100
PARTITION_BUDGET = 5 * 1024 * 1024 // 2

# The views: name, SELECT, columns (name, kind), number of leading key columns,
# and the oracle query over rows(k, v, ts_ms, part).
VIEWS = [
    dict(name="tumble_kv",
         sql=f"SELECT window_start, k, count(*) AS n, sum(v) AS s "
             f"FROM TUMBLE({SOURCE}, ts, INTERVAL '10' SECOND) GROUP BY window_start, k",
         cols=[("window_start", "ts"), ("k", "int"), ("n", "int"), ("s", "int")], nkey=2,
         oracle="SELECT (ts_ms / 10000) * 10000, k, count(*), sum(v) FROM rows GROUP BY 1, 2"),
    dict(name="hop_cnt",
         sql=f"SELECT window_start, count(*) AS n "
             f"FROM HOP({SOURCE}, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND) GROUP BY window_start",
         cols=[("window_start", "ts"), ("n", "int")], nkey=1,
         oracle="SELECT ws, count(*) FROM ("
                " SELECT (ts_ms / 5000) * 5000 AS ws FROM rows"
                " UNION ALL SELECT (ts_ms / 5000) * 5000 - 5000 FROM rows) GROUP BY ws"),
    dict(name="per_k",
         sql=f"SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi FROM {SOURCE} GROUP BY k",
         cols=[("k", "int"), ("n", "int"), ("s", "int"), ("lo", "int"), ("hi", "int")], nkey=1,
         oracle="SELECT k, count(*), sum(v), min(v), max(v) FROM rows GROUP BY k"),
    dict(name="pairs_k",
         # an interval join (self-join within 1 s per key) aggregated per key
         sql=f"SELECT a.k, count(*) AS n, sum(b.v) AS s FROM {SOURCE} a JOIN {SOURCE} b "
             f"ON a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND GROUP BY a.k",
         cols=[("k", "int"), ("n", "int"), ("s", "int")], nkey=1,
         oracle="SELECT a.k, count(*), sum(b.v) FROM rows a JOIN rows b"
                " ON a.k = b.k AND b.ts_ms BETWEEN a.ts_ms AND a.ts_ms + 1000 GROUP BY a.k"),
    dict(name="eowc_kv",
         sql=f"SELECT window_start, k, count(*) AS n, sum(v) AS s, max(v) AS hi "
             f"FROM TUMBLE({SOURCE}, ts, INTERVAL '10' SECOND) GROUP BY window_start, k EMIT ON WINDOW CLOSE",
         cols=[("window_start", "ts"), ("k", "int"), ("n", "int"), ("s", "int"), ("hi", "int")], nkey=2,
         # only windows the final watermark closed (window_end <= wm); :wm is bound at run time
         oracle="SELECT (ts_ms / 10000) * 10000 AS ws, k, count(*), sum(v), max(v) FROM rows"
                " GROUP BY 1, 2 HAVING ws + 10000 <= :wm"),
]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def ts_text(ms):
    """Timestamp text of ms since BASE, as the source's JSON carries it."""
    return (BASE + datetime.timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def norm_ts(x):
    """Any timestamp form the targets give back -> 'YYYY-MM-DD HH:MM:SS[.ffffff]'."""
    if isinstance(x, (int, float)):          # BASE-relative ms (oracle)
        x = BASE + datetime.timedelta(milliseconds=x)
    if isinstance(x, str):
        s = x.strip().replace("T", " ")
        if s.endswith("Z"):
            s = s[:-1]
        if s.endswith("+00:00") or s.endswith("+00"):
            s = s.rsplit("+", 1)[0]
        x = datetime.datetime.fromisoformat(s)
    if isinstance(x, datetime.datetime):
        if x.tzinfo is not None:
            x = x.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        out = x.strftime("%Y-%m-%d %H:%M:%S")
        return out + (".%06d" % x.microsecond if x.microsecond else "")
    return repr(x)


def norm_row(view, row):
    out = []
    for (name, kind), val in zip(view["cols"], row):
        if val is None:
            out.append(None)
        elif kind == "ts":
            try:
                out.append(norm_ts(val))
            except (ValueError, TypeError):
                out.append(repr(val))
        else:
            try:
                out.append(int(val))
            except (ValueError, TypeError):
                out.append(repr(val))
    return tuple(out)


class Harness:
    def __init__(self, args):
        self.a = args
        self.rng = random.Random(args.seed)
        self.tmp = tempfile.mkdtemp(prefix="weir-crash-", dir="/tmp")
        os.chmod(self.tmp, 0o755)   # the PostgreSQL cluster runs as user postgres
        self.data_dir = os.path.join(self.tmp, "data")
        self.pg_dir = os.path.join(self.tmp, "pg")
        self.sqlite_path = os.path.join(self.tmp, "out.db")
        self.server_log = os.path.join(self.tmp, "server.log")
        self.broker = None
        self.broker_log = None
        self.server = None
        self.pg_started = False
        self.kafka = None
        self.pg_url = None
        self.port = None
        self.partitions = args.partitions or max(4, math.ceil(args.rows * RECORD_BYTES / PARTITION_BUDGET))
        self.bugs = []            # (what, details)
        self.notes = []
        self.recovery_ready = []  # seconds from spawn until a query answers
        self.recovery_change = []  # seconds from spawn until a view counts a change
        self.kills_random = 0
        self.kills_named = {}     # name -> count (died there)
        self.named_not_reached = 0
        self.runs = 0
        self.kills_done = 0
        self.bonus_shares = 0     # shares the producer may run further ahead (armed crash points)
        self.cycle_times = []
        self.kill_phase_over = threading.Event()
        self.stop = threading.Event()
        self.produced = 0
        self.producer_error = None
        self.rows = []

    # ---- processes -------------------------------------------------------------------------

    def start_broker(self):
        self.broker_log = open(os.path.join(self.tmp, "broker.log"), "w")
        self.broker = subprocess.Popen([self.a.weir, "broker", "--listen", "127.0.0.1:0", "--partitions", "4"],
                                       stdout=subprocess.PIPE, stderr=self.broker_log, text=True)
        deadline = time.time() + 20
        line = ""
        while time.time() < deadline:
            line = self.broker.stdout.readline()
            if not line:
                break
            m = re.search(r"listening on (\S+):(\d+)", line)
            if m:
                self.kafka = f"{m.group(1)}:{m.group(2)}"
                # keep draining its stdout so it never blocks on a full pipe
                threading.Thread(target=self._drain, args=(self.broker.stdout,), daemon=True).start()
                log(f"broker listening on {self.kafka} (pid {self.broker.pid})")
                return
        raise RuntimeError(f"the broker did not say it was listening (last line: {line!r})")

    @staticmethod
    def _drain(f):
        for _ in f:
            pass

    def start_pg(self):
        port = free_port()
        out = subprocess.run([PG_TMP, "start", self.pg_dir, str(port)], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"pg-tmp.sh start failed: {out.stderr.strip()}")
        self.pg_started = True
        self.pg_url = out.stdout.strip().splitlines()[-1]
        self.pg_port = port
        log(f"postgresql at {self.pg_url}")

    def spawn_server(self, crash_at=None):
        self.runs += 1
        env = dict(os.environ)
        env.pop("WEIR_CRASH_AT", None)
        if crash_at:
            env["WEIR_CRASH_AT"] = crash_at
        with open(self.server_log, "a") as f:
            f.write(f"\n===== crash_test: run {self.runs}{' WEIR_CRASH_AT=' + crash_at if crash_at else ''} "
                    f"at {time.strftime('%H:%M:%S')} =====\n")
        self.server_log_f = open(self.server_log, "a")
        self.server = subprocess.Popen(
            [self.a.weir, "serve", "--data-dir", self.data_dir, "--port", str(self.port),
             "--kafka", self.kafka, "--no-broker", "--http-port", "0", "--checkpoint-interval", str(self.a.checkpoint_interval)],
            stdout=self.server_log_f, stderr=subprocess.STDOUT, env=env)
        self.spawned_at = time.time()
        return self.server

    def server_log_since_last_run(self):
        try:
            with open(self.server_log, errors="replace") as f:
                text = f.read()
        except OSError:
            return ""
        i = text.rfind("===== crash_test: run")
        return text[i:] if i >= 0 else text

    def kill_server(self):
        if self.server and self.server.poll() is None:
            self.server.send_signal(signal.SIGKILL)
            self.server.wait()
        if self.server:
            self.server_log_f.close()

    def connect(self, timeout=2):
        c = psycopg2.connect(host="127.0.0.1", port=self.port, dbname="weir", user="weir",
                             connect_timeout=timeout)
        c.autocommit = True
        return c

    def wait_ready(self, timeout=60):
        """Polls until a query answers; returns a connection (None if the server died)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.server.poll() is not None:
                return None
            try:
                c = self.connect(1)
                c.cursor().execute("SELECT name FROM weir_views")
                return c
            except psycopg2.Error:
                time.sleep(0.05)
        raise RuntimeError(f"weir did not answer within {timeout} s (log: {self.server_log})")

    def cleanup(self):
        self.stop.set()
        producer = getattr(self, "producer", None)
        if producer is not None and producer.is_alive():
            producer.join(10)
        try:
            self.kill_server()
        except Exception:
            pass
        if self.broker and self.broker.poll() is None:
            self.broker.terminate()
            try:
                self.broker.wait(5)
            except subprocess.TimeoutExpired:
                self.broker.kill()
                self.broker.wait()
        if self.pg_started:
            subprocess.run([PG_TMP, "stop", self.pg_dir], capture_output=True)
            self.pg_started = False

    # ---- setup -----------------------------------------------------------------------------

    def create_objects(self, c):
        cur = c.cursor()
        stmts = [
            f"CREATE SOURCE {SOURCE} (k BIGINT, v BIGINT, ts TIMESTAMP, "
            f"WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) "
            f"WITH (connector = 'kafka', topic = '{IN_TOPIC}', topic.partitions = '{self.partitions}', "
            f"scan.startup.mode = 'earliest') FORMAT PLAIN ENCODE JSON"]
        for v in VIEWS:
            stmts.append(f"CREATE MATERIALIZED VIEW {v['name']} AS {v['sql']}")
        for v in VIEWS:
            pk = ", ".join(n for n, _ in v["cols"][:v["nkey"]])
            stmts.append(f"CREATE SINK pg_{v['name']} FROM {v['name']} WITH (connector = 'postgres', "
                         f"url = '{self.pg_url}', table = '{v['name']}', type = 'upsert', "
                         f"primary_key = '{pk}', create_table = 'true')")
            stmts.append(f"CREATE SINK sq_{v['name']} FROM {v['name']} WITH (connector = 'sqlite', "
                         f"path = '{self.sqlite_path}', table = '{v['name']}', type = 'upsert', "
                         f"primary_key = '{pk}', create_table = 'true')")
        stmts.append(f"CREATE SINK kf_{KAFKA_SINK_VIEW} FROM {KAFKA_SINK_VIEW} WITH (connector = 'kafka', "
                     f"topic = '{KAFKA_SINK_TOPIC}') FORMAT UPSERT ENCODE JSON")
        for s in stmts:
            cur.execute(s)
        log(f"created source {SOURCE} ({self.partitions} partitions), {len(VIEWS)} views, "
            f"{2 * len(VIEWS) + 1} sinks")

    # ---- input -----------------------------------------------------------------------------

    def generate(self):
        """The input, deterministic in the seed: (id, k, v, ts_ms, partition)."""
        rng = random.Random(self.a.seed * 7919 + 1)
        rows = []
        for i in range(self.a.rows):
            k = rng.randrange(N_KEYS)
            v = rng.randint(-1000, 1000)
            ts = i * STEP_MS + rng.randrange(MAX_DISORDER_MS)   # disorder < 4 s < watermark delay
            rows.append((i, k, v, ts, k % self.partitions))
        # A few rows an hour later, one per partition, so the watermark of every partition passes
        # every window of the real data (EMIT ON WINDOW CLOSE emits them all). 1 s past a window
        # boundary, so no window ends exactly at the final watermark.
        future = ((self.a.rows * STEP_MS + 3600 * 1000) // 10000) * 10000 + 1000
        for p in range(self.partitions):
            rows.append((self.a.rows + p, p, rng.randint(-1000, 1000), future, p))
        self.rows = rows

    def producer_main(self):
        try:
            p = Producer({"bootstrap.servers": self.kafka, "enable.idempotence": True, "linger.ms": 5,
                          "acks": "all"})
            errors = []

            def on_delivery(err, msg):
                if err is not None:
                    errors.append(str(err))

            rng = random.Random(self.a.seed * 31 + 7)
            real = self.a.rows
            kills = max(1, self.a.kills)
            # The input is cut in one share per kill; the producer may run one share ahead of the
            # kill loop, in bursts a few tenths of a second apart, so rows keep arriving while
            # the server is killed and restarted, to the end of the kill phase.
            burst = max(20, real // (kills * 4))
            i = 0
            while i < real and not self.stop.is_set():
                while (not self.kill_phase_over.is_set() and not self.stop.is_set()
                       and i >= real * (self.kills_done + 1 + self.bonus_shares) / kills):
                    time.sleep(0.02)
                n = min(real - i, max(1, int(burst * rng.uniform(0.5, 1.5))))
                for rid, k, v, ts, part in self.rows[i:i + n]:
                    value = json.dumps({"id": rid, "k": k, "v": v, "ts": ts_text(ts)})
                    p.produce(IN_TOPIC, value=value.encode(), partition=part, on_delivery=on_delivery)
                    p.poll(0)
                p.flush(30)
                if errors:
                    raise RuntimeError(f"produce failed: {errors[0]}")
                i += n
                self.produced = i
                if not self.kill_phase_over.is_set():
                    self.stop.wait(rng.uniform(0.05, 0.4))
            for rid, k, v, ts, part in self.rows[real:]:
                value = json.dumps({"id": rid, "k": k, "v": v, "ts": ts_text(ts)})
                p.produce(IN_TOPIC, value=value.encode(), partition=part, on_delivery=on_delivery)
            if self.a.self_test:
                # One row twice that the oracle counts once: every check over that row must fail.
                rid, k, v, ts, part = self.rows[0]
                value = json.dumps({"id": rid, "k": k, "v": v, "ts": ts_text(ts)})
                p.produce(IN_TOPIC, value=value.encode(), partition=part, on_delivery=on_delivery)
            p.flush(30)
            if errors:
                raise RuntimeError(f"produce failed: {errors[0]}")
            self.produced = len(self.rows)
        except Exception as e:   # reported by the main thread
            self.producer_error = e

    # ---- the kill phase --------------------------------------------------------------------

    def one_cycle(self, idx):
        """Starts the server (maybe with a crash point), lets it die or kills it."""
        named = self.rng.random() < self.a.named_fraction
        crash_at = None
        if named:
            point = self.named_order[self.named_i % len(self.named_order)]
            self.named_i += 1
            crash_at = f"{point}:{self.rng.randint(1, 5)}"
        delay = self.rng.uniform(0.2, 3.0)
        t_cycle = time.time()
        proc = self.spawn_server(crash_at)
        t0 = self.spawned_at
        deadline = t0 + (self.a.named_timeout if named else delay)
        ready = change = None
        conn = None
        next_bonus = t0 + 2
        while time.time() < deadline and proc.poll() is None:
            if named and time.time() >= next_bonus:
                # An armed point that needs more checkpoints or deliveries needs more input.
                self.bonus_shares += 1
                next_bonus += 2
            try:
                if ready is None:
                    conn = self.connect(1)
                    conn.cursor().execute("SELECT name FROM weir_views")
                    ready = time.time() - t0
                elif change is None:
                    cur = conn.cursor()
                    cur.execute("SELECT changes FROM weir_views")
                    if sum(r[0] or 0 for r in cur.fetchall()) > 0:
                        change = time.time() - t0
            except psycopg2.Error:
                conn = None if ready is None else conn
            time.sleep(0.03)
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass
        died_by_itself = proc.poll() is not None
        what = ""
        if named:
            if died_by_itself:
                text = self.server_log_since_last_run()
                point = crash_at.split(":")[0]
                if proc.returncode == -signal.SIGKILL and f"crashpoint {point} reached" in text:
                    self.kills_named[point] = self.kills_named.get(point, 0) + 1
                    what = f"died at crash point {crash_at}"
                else:
                    self.bugs.append((f"run {self.runs} ({crash_at}) exited with {proc.returncode} "
                                      f"without reaching its crash point", text[-3000:]))
                    what = f"UNEXPECTED exit {proc.returncode}"
            else:
                self.named_not_reached += 1
                self.kill_server()
                self.kills_random += 1
                what = f"crash point {crash_at} not reached in {self.a.named_timeout:.0f} s: SIGKILL"
        else:
            if died_by_itself:
                text = self.server_log_since_last_run()
                self.bugs.append((f"run {self.runs} exited by itself with {proc.returncode} "
                                  f"(no crash point armed)", text[-3000:]))
                what = f"UNEXPECTED exit {proc.returncode}"
            else:
                self.kill_server()
                self.kills_random += 1
                what = f"SIGKILL after {delay:.2f} s"
        self.kill_server()
        if ready is not None:
            self.recovery_ready.append(ready)
        if change is not None:
            self.recovery_change.append(change)
        self.bonus_shares = 0
        self.kills_done += 1
        self.cycle_times.append(time.time() - t_cycle)
        r = f"ready {ready:.2f} s" if ready is not None else "not ready"
        ch = f", first change {change:.2f} s" if change is not None else ""
        if self.a.verbose or not self.a.long or idx % 10 == 0:
            log(f"kill {idx + 1}/{self.a.kills}: {what} ({r}{ch}); produced {self.produced}/{len(self.rows)}")

    # ---- checking --------------------------------------------------------------------------

    def read_topic(self, topic):
        """Every record of topic, per partition in offset order: {partition: [(offset, key, value)]},
        plus the low watermark of each partition."""
        c = Consumer({"bootstrap.servers": self.kafka, "group.id": "crash-check-" + uuid.uuid4().hex,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "isolation.level": "read_committed"})
        try:
            md = c.list_topics(topic, timeout=10)
            if topic not in md.topics or md.topics[topic].error is not None:
                return {}, {}
            parts = sorted(md.topics[topic].partitions)
            lows, highs = {}, {}
            for p in parts:
                lows[p], highs[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            c.assign([TopicPartition(topic, p, lows[p]) for p in parts])
            out = {p: [] for p in parts}
            remaining = {p for p in parts if highs[p] > lows[p]}
            deadline = time.time() + 120
            while remaining and time.time() < deadline:
                for m in c.consume(1000, 1.0):
                    if m.error():
                        continue
                    out[m.partition()].append((m.offset(), m.key(), m.value()))
                    if m.offset() + 1 >= highs[m.partition()]:
                        remaining.discard(m.partition())
            if remaining:
                raise RuntimeError(f"could not read topic {topic} to its end (partitions {sorted(remaining)})")
            return out, lows
        finally:
            c.close()

    def check_input(self):
        """The input topic holds exactly the generated rows, none dropped by the broker."""
        recs, lows = self.read_topic(IN_TOPIC)
        got = {}
        dups = 0
        for p, lst in recs.items():
            for _, _, val in lst:
                d = json.loads(val)
                if d["id"] in got:
                    dups += 1
                got[d["id"]] = (d["id"], d["k"], d["v"], d["ts"], p)
        want = {r[0]: (r[0], r[1], r[2], ts_text(r[3]), r[4]) for r in self.rows}
        missing = sum(1 for i in want if i not in got)
        wrong = sum(1 for i in want if i in got and got[i] != want[i])
        extra = dups + sum(1 for i in got if i not in want)
        dropped = {p: lo for p, lo in lows.items() if lo > 0}
        return missing, extra, wrong, dropped

    def oracle(self):
        db = sqlite3.connect(":memory:")
        db.execute("CREATE TABLE rows (id INTEGER, k INTEGER, v INTEGER, ts_ms INTEGER, part INTEGER)")
        db.executemany("INSERT INTO rows VALUES (?, ?, ?, ?, ?)", self.rows)
        # the final watermark: min over partitions of (max ts) - delay
        wm = db.execute("SELECT min(m) FROM (SELECT max(ts_ms) - ? AS m FROM rows GROUP BY part)",
                        (WM_DELAY_MS,)).fetchone()[0]
        expected = {}
        for v in VIEWS:
            rows = db.execute(v["oracle"], {"wm": wm} if ":wm" in v["oracle"] else ()).fetchall()
            expected[v["name"]] = {}
            for r in rows:
                nr = norm_row(v, r)
                expected[v["name"]][nr[:v["nkey"]]] = nr[v["nkey"]:]
        db.close()
        return expected

    @staticmethod
    def diff(view, want, rows):
        got = {}
        dup = 0
        for r in rows:
            nr = norm_row(view, r)
            k = nr[:view["nkey"]]
            if k in got:
                dup += 1
            got[k] = nr[view["nkey"]:]
        missing = [k for k in want if k not in got]
        extra = [k for k in got if k not in want]
        wrong = [k for k in want if k in got and got[k] != want[k]]
        examples = ([f"missing {k} = {want[k]}" for k in missing[:3]] +
                    [f"extra {k} = {got[k]}" for k in extra[:3]] +
                    [f"wrong {k}: got {got[k]}, want {want[k]}" for k in wrong[:3]])
        return dict(missing=len(missing), extra=len(extra) + dup, wrong=len(wrong), rows=len(got),
                    examples=examples)

    def kafka_rows(self, view):
        recs, lows = self.read_topic(KAFKA_SINK_TOPIC)
        state = {}
        n = 0
        for p in sorted(recs):
            for _, key, val in recs[p]:
                n += 1
                kd = json.loads(key)
                k = tuple(kd.get(name) for name, _ in view["cols"][:view["nkey"]])
                k = norm_row(dict(cols=view["cols"][:view["nkey"]]), k)
                if val is None:
                    state.pop(k, None)
                else:
                    d = json.loads(val)
                    state[k] = tuple(d.get(name) for name, _ in view["cols"])
        dropped = {p: lo for p, lo in lows.items() if lo > 0}
        return list(state.values()), n, dropped

    def final_phase(self):
        log("final restart (no crash point)")
        self.spawn_server()
        t0 = self.spawned_at
        c = self.wait_ready()
        if c is None:
            raise RuntimeError("the final server exited at start:\n" + self.server_log_since_last_run()[-3000:])
        self.recovery_ready.append(time.time() - t0)
        log(f"ready after {time.time() - t0:.2f} s; waiting for the producer")
        self.producer.join()
        if self.producer_error:
            raise RuntimeError(f"producer: {self.producer_error}")
        cur = c.cursor()
        for attempt in range(5):
            try:
                t = time.time()
                cur.execute("FLUSH")
                log(f"FLUSH took {time.time() - t:.2f} s")
                break
            except psycopg2.Error as e:
                log(f"FLUSH failed: {str(e).strip()}; retrying")
                if attempt == 4:
                    raise
        cur.execute("CHECKPOINT")
        deadline = time.time() + 180
        last = None
        while time.time() < deadline:
            cur.execute("SELECT name, pending_epochs, delivered_epoch, state, last_error FROM weir_sinks")
            last = sorted(cur.fetchall())
            if all(r[1] == 0 for r in last):
                break
            time.sleep(0.2)
        else:
            self.bugs.append(("sinks still pending 180 s after CHECKPOINT", "\n".join(map(str, last))))
        self.sink_status = last
        cur.execute("SELECT name, running, records_in, bad_records, late_rows, eval_errors, changes, "
                    "watermark, last_error FROM weir_views")
        self.view_status = sorted(cur.fetchall())
        for r in self.view_status:
            if not r[1] or r[8]:
                self.bugs.append((f"view {r[0]} not running or has an error at the end", str(r)))
            if r[3] or r[4] or r[5]:
                self.bugs.append((f"view {r[0]} counted bad/late/failed rows in the final run", str(r)))
        for r in self.sink_status or []:
            if r[3] != "running" or r[4]:
                self.bugs.append((f"sink {r[0]} is {r[3]} at the end", str(r)))
        return c

    def check(self, c):
        expected = self.oracle()
        results = []   # (target, view, diff)
        cur = c.cursor()
        pg = psycopg2.connect(self.pg_url)
        pg.autocommit = True
        sq = sqlite3.connect(self.sqlite_path, timeout=30)
        for v in VIEWS:
            cols = ", ".join(n for n, _ in v["cols"])
            want = expected[v["name"]]
            try:
                cur.execute(f"SELECT {cols} FROM {v['name']}")
                results.append(("weir view", v["name"], self.diff(v, want, cur.fetchall())))
            except psycopg2.Error as e:
                results.append(("weir view", v["name"], dict(error=str(e).strip())))
            try:
                pc = pg.cursor()
                pc.execute(f"SELECT {cols} FROM {v['name']}")
                results.append(("postgres", v["name"], self.diff(v, want, pc.fetchall())))
            except psycopg2.Error as e:
                results.append(("postgres", v["name"], dict(error=str(e).strip())))
            try:
                results.append(("sqlite", v["name"],
                                self.diff(v, want, sq.execute(f"SELECT {cols} FROM {v['name']}").fetchall())))
            except sqlite3.Error as e:
                results.append(("sqlite", v["name"], dict(error=str(e))))
            if v["name"] == KAFKA_SINK_VIEW:
                try:
                    rows, n, dropped = self.kafka_rows(v)
                    d = self.diff(v, want, rows)
                    d["records"] = n
                    if dropped:
                        d["examples"].append(f"broker dropped the head of partitions {dropped}")
                        d["error"] = "the mock broker dropped records of the sink topic"
                    results.append(("kafka", v["name"], d))
                except Exception as e:
                    results.append(("kafka", v["name"], dict(error=str(e))))
        pg.close()
        sq.close()
        return expected, results

    # ---- main ------------------------------------------------------------------------------

    def run(self):
        t_start = time.time()
        a = self.a
        log(f"seed {a.seed}, rows {a.rows}, kills {a.kills}, checkpoint interval {a.checkpoint_interval} ms, "
            f"temp dir {self.tmp}")
        self.generate()
        self.start_broker()
        self.start_pg()
        self.port = free_port()
        self.spawn_server()
        c = self.wait_ready()
        if c is None:
            raise RuntimeError("weir exited at start:\n" + self.server_log_since_last_run()[-3000:])
        self.create_objects(c)
        c.close()
        self.named_order = list(CRASH_POINTS)
        self.rng.shuffle(self.named_order)
        self.named_i = 0
        self.producer = threading.Thread(target=self.producer_main, daemon=True)
        self.producer.start()
        # The first cycle runs the server just started (it is killed like the others).
        self.kill_server()
        for i in range(a.kills):
            if self.producer_error:
                raise RuntimeError(f"producer: {self.producer_error}")
            self.one_cycle(i)
        self.kill_phase_over.set()
        c = self.final_phase()
        in_missing, in_extra, in_wrong, in_dropped = self.check_input()
        expected, results = self.check(c)
        c.close()
        # a clean stop must work too
        self.server.send_signal(signal.SIGTERM)
        try:
            rc = self.server.wait(60)
            if rc != 0:
                self.bugs.append((f"clean stop (SIGTERM) exited {rc}", self.server_log_since_last_run()[-2000:]))
        except subprocess.TimeoutExpired:
            self.bugs.append(("clean stop (SIGTERM) did not finish in 60 s", ""))
            self.kill_server()
        self.server_log_f.close()
        run_time = time.time() - t_start
        return self.report(results, (in_missing, in_extra, in_wrong, in_dropped), run_time)

    def report(self, results, input_check, run_time):
        a = self.a
        passed = failed = 0
        print()
        print("=" * 78)
        print(f"weir crash test: seed {a.seed}, {len(self.rows)} rows ({a.rows} + {self.partitions} future) "
              f"over {self.partitions} partitions, checkpoint interval {a.checkpoint_interval} ms")
        named_total = sum(self.kills_named.values())
        print(f"kills: {self.kills_random + named_total} ({self.kills_random} random SIGKILL, "
              f"{named_total} at crash points: "
              + (", ".join(f"{k} {v}" for k, v in sorted(self.kills_named.items())) or "none")
              + (f"; {self.named_not_reached} armed crash points not reached, killed instead"
                 if self.named_not_reached else "") + ")")
        for label, xs in (("until a query answers", self.recovery_ready),
                          ("until the first change", self.recovery_change)):
            if xs:
                print(f"recovery {label}: min {min(xs):.2f} s, median {statistics.median(xs):.2f} s, "
                      f"max {max(xs):.2f} s ({len(xs)} restarts)")
            else:
                print(f"recovery {label}: no sample")
        print(f"{'target':<10} {'view':<10} {'rows':>7} {'missing':>8} {'extra':>6} {'wrong':>6}  result")
        m, e, w, dropped = input_check
        ok = m == 0 and e == 0 and w == 0 and not dropped
        passed += ok
        failed += not ok
        print(f"{'input':<10} {IN_TOPIC:<10} {len(self.rows):>7} {m:>8} {e:>6} {w:>6}  {'ok' if ok else 'FAIL'}"
              + (f" (broker dropped the head of partitions {dropped})" if dropped else ""))
        for target, view, d in results:
            if "error" in d and "rows" not in d:
                failed += 1
                print(f"{target:<10} {view:<10} {'-':>7} {'-':>8} {'-':>6} {'-':>6}  FAIL: {d['error']}")
                continue
            ok = d["missing"] == 0 and d["extra"] == 0 and d["wrong"] == 0 and "error" not in d
            passed += ok
            failed += not ok
            extra = f" ({d['records']} records read)" if "records" in d else ""
            print(f"{target:<10} {view:<10} {d['rows']:>7} {d['missing']:>8} {d['extra']:>6} {d['wrong']:>6}  "
                  f"{'ok' if ok else 'FAIL'}{extra}")
            for ex in d["examples"]:
                print(f"    {ex}")
        if self.sink_status:
            print("sinks at the end: " + "; ".join(f"{r[0]} delivered {r[2]} pending {r[1]}"
                                                    for r in self.sink_status))
        if self.bugs:
            print(f"PROBLEMS ({len(self.bugs)}):")
            for what, details in self.bugs:
                failed += 1
                print(f"  - {what}")
                for line in details.strip().splitlines()[-15:]:
                    print(f"      {line}")
        print(f"server runs: {self.runs}; run time {run_time:.1f} s; server log: {self.server_log}")
        print(f"{passed} passed, {failed} failed")
        return 0 if failed == 0 else 1


def main():
    ap = argparse.ArgumentParser(description="weir crash test: exactly-once across SIGKILLs")
    ap.add_argument("--weir", required=True, help="path of the weir binary")
    ap.add_argument("--rows", type=int, default=None, help="input rows (default 20000; --long 300000)")
    ap.add_argument("--kills", type=int, default=None, help="server kills (default 6; --long 200)")
    ap.add_argument("--seed", type=int, default=None, help="RNG seed (default: random, printed)")
    ap.add_argument("--checkpoint-interval", type=int, default=200, help="ms (default 200)")
    ap.add_argument("--partitions", type=int, default=0,
                    help="partitions of the input topic (default: max(4, enough for the mock's 5 MiB log))")
    ap.add_argument("--named-fraction", type=float, default=0.5,
                    help="share of the kills done at named crash points (default 0.5)")
    ap.add_argument("--named-timeout", type=float, default=30.0,
                    help="seconds to wait for an armed crash point before killing anyway")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--long", action="store_true", help="300000 rows, 200 kills")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--self-test", action="store_true",
                    help="produce one row twice behind the oracle's back: the run must fail "
                         "(shows that the checks see a duplicate)")
    a = ap.parse_args()
    a.weir = os.path.abspath(a.weir)
    if not os.access(a.weir, os.X_OK):
        ap.error(f"{a.weir} is not an executable")
    if a.rows is None:
        a.rows = 300000 if a.long else 20000
    if a.kills is None:
        a.kills = 200 if a.long else 6
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1, 1 << 31)

    def on_signal(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    h = Harness(a)
    rc = 2
    try:
        rc = h.run()
    except KeyboardInterrupt:
        log("interrupted; cleaning up")
        rc = 130
    except Exception as e:
        log(f"ERROR: {e}")
        print("0 passed, 1 failed")
        rc = 2
    finally:
        h.cleanup()
        if a.keep or rc not in (0, 130):
            log(f"kept {h.tmp}")
        else:
            shutil.rmtree(h.tmp, ignore_errors=True)
    sys.exit(rc)


if __name__ == "__main__":
    main()
