#!/usr/bin/python3
"""disk_full.py --weir PATH: a full data directory and the state memory limit.

The data directory sits on a small tmpfs (when this process may mount one;
otherwise the LMDB map is capped with --max-map-size instead, which fills the
same way). The test fills the disk, then checks that:

  - CHECKPOINT answers 53100 and the failure is logged, while the server keeps
    answering queries and the views keep running;
  - dirty state past --state-memory-limit pauses the views
    (weir_views.state = 'paused'): their input waits in Kafka instead of memory;
  - a kill -9 while full loses nothing committed: the restarted server has the
    last good checkpoint and reads the rest again from Kafka;
  - when space returns (the filler is deleted, or the cap is raised), the views
    resume by themselves, the checkpoint succeeds, and after a clean restart
    every record is counted exactly once.

Prints TAP; exits 1 if any check failed.
"""
import argparse
import json
import os
import re
import shutil
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

LIMIT = 1 << 20          # --state-memory-limit
# The embedded broker keeps about 5 MiB per partition: everything produced
# here stays below that, so a restart can read it all again.
TMPFS = "24m"            # size of the data directory's filesystem
MAP_CAP = "6MB"          # --max-map-size when no tmpfs can be mounted


class Weir:
    def __init__(self, exe, tmp, data):
        self.exe, self.tmp, self.data = exe, tmp, data
        self.broker = self.server = None
        self.port = free_port()
        self.log_path = os.path.join(tmp, "server.log")

    def start_broker(self):
        self.broker = subprocess.Popen([self.exe, "broker", "--listen", "127.0.0.1:0"],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        deadline = time.time() + 20
        self.kafka = None
        while time.time() < deadline and not self.kafka:
            line = self.broker.stdout.readline()
            if not line:
                break
            m = re.search(r"listening on (\S+):(\d+)", line)
            if m:
                self.kafka = "%s:%s" % (m.group(1), m.group(2))
        if not self.kafka:
            raise RuntimeError("the broker did not start")
        threading.Thread(target=lambda f: [None for _ in f], args=(self.broker.stdout,), daemon=True).start()

    def start(self, extra):
        log = open(self.log_path, "a")
        self.server = subprocess.Popen(
            [self.exe, "serve", "--data-dir", self.data, "--port", str(self.port), "--kafka", self.kafka,
             "--no-broker", "--http-port", "0", "--checkpoint-interval", "200",
             "--state-memory-limit", str(LIMIT)] + extra,
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.server.poll() is not None:
                raise RuntimeError("weir exited with %s; see %s" % (self.server.returncode, self.log_path))
            try:
                c = psycopg2.connect(host="127.0.0.1", port=self.port, dbname="weir", user="weir",
                                     connect_timeout=1)
                c.autocommit = True
                self.conn = c
                return
            except psycopg2.Error:
                time.sleep(0.1)
        raise RuntimeError("weir did not answer")

    def kill(self, sig):
        if self.server and self.server.poll() is None:
            self.server.send_signal(sig)
            self.server.wait(30)

    def q(self, sql):
        cur = self.conn.cursor()
        cur.execute(sql)
        return cur.fetchall() if cur.description else None

    def err(self, sql):
        """The SQLSTATE sql fails with, or None."""
        try:
            self.q(sql)
            return None
        except psycopg2.Error as e:
            return e.pgcode

    def wait_for(self, sql, pred, timeout=30):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            try:
                last = self.q(sql)
                if pred(last):
                    return last
            except psycopg2.Error as e:
                last = str(e)
            time.sleep(0.1)
        return last

    def stop(self):
        for p in (self.server, self.broker):
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def produce(kafka, topic, rows):
    p = Producer({"bootstrap.servers": kafka, "linger.ms": 5})
    for k, pad in rows:
        p.produce(topic, json.dumps({"k": k, "pad": pad}).encode(), partition=0)
    if p.flush(30) != 0:
        raise RuntimeError("could not produce")


def fill(path):
    """Writes path until the filesystem is full; returns the bytes written."""
    n = 0
    with open(path, "wb", buffering=0) as f:
        for size in (1 << 20, 64 << 10, 4 << 10, 512):
            chunk = b"\0" * size
            try:
                while True:
                    n += f.write(chunk)
            except OSError:
                pass
    return n


def try_mount(mnt):
    if os.geteuid() != 0:
        return False
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + TMPFS, "tmpfs", mnt],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return r.returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weir", required=True)
    ap.add_argument("--no-tmpfs", action="store_true", help="use --max-map-size even if a tmpfs can be mounted")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="weir-diskfull-", dir="/tmp")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    tmpfs = not a.no_tmpfs and try_mount(mnt)
    print("# mode: %s" % ("tmpfs of " + TMPFS if tmpfs else "--max-map-size " + MAP_CAP))
    w = Weir(a.weir, tmp, os.path.join(mnt, "data"))
    full_args = [] if tmpfs else ["--max-map-size", MAP_CAP]
    filler = os.path.join(mnt, "filler")
    try:
        w.start_broker()
        w.start(full_args)
        topic = "df_%d" % os.getpid()
        w.q("CREATE SOURCE s (k BIGINT, pad VARCHAR) WITH (connector = 'kafka', topic = '%s')" % topic)
        w.q("CREATE MATERIALIZED VIEW v AS SELECT k, count(*) AS n, max(pad) AS p FROM s GROUP BY k")

        # A: committed before the disk fills.
        produce(w.kafka, topic, [(i % 100, "a") for i in range(200)])
        w.q("FLUSH")
        check(w.err("CHECKPOINT") is None, "checkpoint with space")
        total_rows, total_n = 100, 200

        if tmpfs:
            # B: the disk is full; a checkpoint fails, everything else works.
            fill(filler)
            produce(w.kafka, topic, [(100 + i, "b" * 1000) for i in range(300)])
            total_rows += 300
            total_n += 300
            w.q("FLUSH")
            code = w.err("CHECKPOINT")
            check(code == "53100", "CHECKPOINT on a full disk answers 53100", "got %s" % code)
            got = w.q("SELECT count(*), sum(n) FROM v")[0]
            check(tuple(got) == (total_rows, total_n), "queries are answered and the view kept running",
                  "got %s" % (got,))
            check("checkpoint failed" in open(w.log_path).read(), "the failed checkpoint is logged")

        # C: more dirty state than --state-memory-limit while checkpoints fail: the views pause.
        big = [(10000 + i, "c" * 1000) for i in range(2000)]
        produce(w.kafka, topic, big)
        total_rows += len(big)
        total_n += len(big)
        st = w.wait_for("SELECT state FROM weir_views WHERE name = 'v'", lambda r: r and r[0][0] == "paused")
        check(st and st[0][0] == "paused", "views pause over --state-memory-limit", "state %s" % (st,))
        n1 = w.q("SELECT sum(n) FROM v")[0][0]
        time.sleep(1)
        n2 = w.q("SELECT sum(n) FROM v")[0][0]
        check(n1 == n2 and n1 < total_n, "a paused view reads nothing more", "%s, %s of %s" % (n1, n2, total_n))
        code = w.err("CHECKPOINT")
        check(code == "53100", "CHECKPOINT still answers 53100", "got %s" % code)
        check("views paused" in open(w.log_path).read(), "the pause is logged")

        # A crash while full: the last good checkpoint is intact, the rest is read again.
        w.kill(9)
        w.start(full_args)
        got = w.q("SELECT sum(n) FROM v WHERE k < 100")[0][0]
        check(got == 200, "after kill -9 on a full disk the checkpointed rows are there", "got %s" % got)

        # Space returns.
        if tmpfs:
            os.unlink(filler)
        else:
            w.kill(9)
            w.start(["--max-map-size", "256MB"])
        st = w.wait_for("SELECT state FROM weir_views WHERE name = 'v'", lambda r: r and r[0][0] == "running")
        check(st and st[0][0] == "running", "views resume when space returns", "state %s" % (st,))
        w.q("FLUSH")
        check(w.err("CHECKPOINT") is None, "checkpoint succeeds again")
        got = w.q("SELECT count(*), sum(n) FROM v")[0]
        check(tuple(got) == (total_rows, total_n), "every record counted once", "got %s" % (got,))

        w.kill(15)
        w.start([])
        w.q("FLUSH")
        got = w.q("SELECT count(*), sum(n) FROM v")[0]
        check(tuple(got) == (total_rows, total_n), "after a clean restart, still every record once",
              "got %s" % (got,))
    except Exception as e:  # a crash of the test itself is a failure too
        check(False, "test ran to the end", repr(e))
    finally:
        w.stop()
        if tmpfs:
            subprocess.run(["umount", "-l", mnt])
        if check.failed:
            print("# server log: %s" % w.log_path)
            try:
                sys.stdout.write("".join("# " + line for line in open(w.log_path).readlines()[-30:]))
            except OSError:
                pass
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    check.end()


if __name__ == "__main__":
    main()
