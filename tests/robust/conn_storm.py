#!/usr/bin/python3
"""conn_storm.py --weir PATH: hundreds of connections while views run.

A server with --max-connections 40 runs a view over a topic that a producer
keeps feeding. Meanwhile 16 threads open, query and close 2000 sessions in
all, 300 raw sockets connect and hang up (half of them mid-startup), and 40
idle sessions hold every slot so that the next client is refused (then 30
hold slots, so the storm competes for the other 9). Checks:

  - a client past the limit gets FATAL 53300 "sorry, too many clients already";
  - every storm session that got a slot was answered correctly;
  - the view kept reading during the storm (records_in grew) and, after it,
    FLUSH catches up and every record is counted exactly once;
  - slots are given back: 40 sessions can be opened again afterwards.

Prints TAP; exits 1 if any check failed.
"""
import argparse
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Tap, free_port  # noqa: E402

check = Tap()

try:
    import psycopg2
    from confluent_kafka import Producer
except ImportError as e:  # pragma: no cover
    print("1..0 # SKIP needs python3-psycopg2 and python3-confluent-kafka: %s" % e)
    sys.exit(77)

MAX_CONN = 40
THREADS = 16
SESSIONS = 2000
RAW = 300
RECORDS = 20000


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weir", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="weir-storm-", dir="/tmp")
    log_path = os.path.join(tmp, "server.log")
    broker = server = None
    try:
        broker = subprocess.Popen([a.weir, "broker", "--listen", "127.0.0.1:0"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        kafka = None
        deadline = time.time() + 20
        while time.time() < deadline and not kafka:
            m = re.search(r"listening on (\S+):(\d+)", broker.stdout.readline() or "x")
            if m:
                kafka = "%s:%s" % (m.group(1), m.group(2))
        if not kafka:
            raise RuntimeError("the broker did not start")
        threading.Thread(target=lambda f: [None for _ in f], args=(broker.stdout,), daemon=True).start()
        port = free_port()
        server = subprocess.Popen([a.weir, "serve", "--data-dir", os.path.join(tmp, "data"), "--port", str(port),
                                   "--kafka", kafka, "--no-broker", "--http-port", "0",
                                   "--max-connections", str(MAX_CONN)],
                                  stdout=open(log_path, "w"), stderr=subprocess.STDOUT)

        def connect(timeout=5):
            c = psycopg2.connect(host="127.0.0.1", port=port, dbname="weir", user="weir", connect_timeout=timeout)
            c.autocommit = True
            return c

        admin = None
        deadline = time.time() + 30
        while admin is None and time.time() < deadline:
            try:
                admin = connect(1)
            except psycopg2.Error:
                time.sleep(0.1)
        if admin is None:
            raise RuntimeError("weir did not answer")
        cur = admin.cursor()
        topic = "storm_%d" % os.getpid()
        cur.execute("CREATE SOURCE s (k BIGINT) WITH (connector = 'kafka', topic = '%s')" % topic)
        cur.execute("CREATE MATERIALIZED VIEW v AS SELECT k, count(*) AS n FROM s GROUP BY k")

        def records_in():
            cur.execute("SELECT records_in FROM weir_views WHERE name = 'v'")
            return cur.fetchone()[0]

        stop_producing = threading.Event()

        def producer():
            p = Producer({"bootstrap.servers": kafka, "linger.ms": 5})
            for i in range(RECORDS):
                p.produce(topic, json.dumps({"k": i % 50}).encode(), partition=0)
                if i % 200 == 199:
                    p.flush(10)
                    time.sleep(0.01)
            p.flush(30)
            stop_producing.set()

        prod = threading.Thread(target=producer)
        prod.start()

        # Fill every slot (the admin session holds one), then one more is refused.
        idle = [connect() for _ in range(MAX_CONN - 1)]
        refused = None
        try:
            connect().close()
        except psycopg2.OperationalError as e:
            refused = str(e)
        check(refused is not None and "too many clients" in refused, "past --max-connections: 53300",
              "got %r" % refused)
        # 30 stay idle, so the 16 storm threads compete for 9 slots.
        for c in idle[: MAX_CONN - 1 - 30]:
            c.close()
        idle = idle[MAX_CONN - 1 - 30:]

        # The view's first fetch takes about half a second: start once it reads.
        deadline = time.time() + 20
        while records_in() == 0 and time.time() < deadline:
            time.sleep(0.05)
        before = records_in()
        t0 = time.time()
        results = {"ok": 0, "refused": 0, "wrong": 0, "other": []}
        lock = threading.Lock()

        def storm(n):
            for i in range(n):
                try:
                    c = connect()
                    try:
                        cc = c.cursor()
                        cc.execute("SELECT %d AS x" % i)
                        good = cc.fetchone() == (i,)
                        cc.execute("SELECT count(*) FROM v")
                        cc.fetchone()
                    finally:
                        c.close()
                    with lock:
                        results["ok" if good else "wrong"] += 1
                except psycopg2.OperationalError as e:
                    with lock:
                        if "too many clients" in str(e):
                            results["refused"] += 1
                        else:
                            results["other"].append(str(e).strip())

        def raw(n):
            for i in range(n):
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                if i % 2:
                    s.sendall(struct.pack("!II", 40, 196608) + b"user\0we")  # startup cut short
                s.close()

        threads = [threading.Thread(target=storm, args=(SESSIONS // THREADS,)) for _ in range(THREADS)]
        threads += [threading.Thread(target=raw, args=(RAW // 4,)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        storm_s = time.time() - t0
        during = records_in() - before
        print("# storm: %d sessions answered, %d refused (53300), %d raw sockets in %.1f s; the view read %d records "
              "meanwhile" % (results["ok"], results["refused"], RAW, storm_s, during))
        check(results["wrong"] == 0 and not results["other"], "every storm session got a right answer or 53300",
              "wrong %d, other %s" % (results["wrong"], results["other"][:3]))
        check(results["ok"] + results["refused"] == SESSIONS // THREADS * THREADS and results["ok"] > 0,
              "each storm session was served or refused", "%d + %d" % (results["ok"], results["refused"]))
        check(during > 0, "the view kept reading during the storm", "records_in grew by %d" % during)

        prod.join()
        for c in idle:
            c.close()
        t1 = time.time()
        cur.execute("FLUSH")
        print("# FLUSH after the storm took %.2f s" % (time.time() - t1))
        cur.execute("SELECT count(*), sum(n) FROM v")
        got = cur.fetchone()
        check(tuple(got) == (50, RECORDS), "every record counted exactly once", "got %s" % (got,))

        # The slots come back (closing is asynchronous on the server: allow a moment).
        again = []
        deadline = time.time() + 10
        while len(again) < MAX_CONN - 1 and time.time() < deadline:
            try:
                again.append(connect())
            except psycopg2.OperationalError:
                time.sleep(0.1)
        check(len(again) == MAX_CONN - 1, "every slot is free again afterwards", "%d of %d" % (len(again), MAX_CONN - 1))
        for c in again:
            c.close()
        check(server.poll() is None, "the server is still running")
    except Exception as e:
        check(False, "test ran to the end", repr(e))
    finally:
        for p in (server, broker):
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if server is not None and server.returncode not in (0, -15, None):
            check(False, "the server exits cleanly", "exit status %s" % server.returncode)
        if check.failed:
            try:
                sys.stdout.write("".join("# " + l for l in open(log_path).readlines()[-30:]))
            except OSError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)
    check.end()


if __name__ == "__main__":
    main()
