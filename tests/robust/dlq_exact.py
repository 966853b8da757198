#!/usr/bin/python3
"""dlq_exact.py --weir PATH: dead letters are exactly-once across crashes.

A source with on_error = 'dead_letter' reads an input with BAD malformed records among good
ones. For each named crash point and hit count (WEIR_CRASH_AT, common/crashpoint.h) the server
is started on a fresh data directory, kills itself at that moment, and is started again without
it; after FLUSH and two CHECKPOINTs the dead-letter topic must hold each bad record exactly once
(identified by its weir.partition and weir.offset headers), and the view must count every good
record once:

  checkpoint_mid        a checkpoint is being taken: the dead letters found before it must not
                        be in Kafka yet (at-least-once delivery produced them here, and the
                        re-read produced them again);
  checkpoint_committed  the checkpoint holding them committed, not yet delivered: the restart
                        must deliver them from the checkpoint (the offsets are past them);
  (a later checkpoint_mid) delivered, but their checkpoint entry not yet deleted: the restart
                        must see in the control topic that they are there already.

Prints TAP; exits 1 if a check failed.
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
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Tap, free_port  # noqa: E402

tap = Tap()

try:
    import psycopg2
    from confluent_kafka import Consumer, KafkaError, Producer
except ImportError as e:  # pragma: no cover
    print("1..0 # SKIP needs python3-psycopg2 and python3-confluent-kafka: %s" % e)
    sys.exit(77)

GOOD = 60
BAD = 6
TOPIC = "dq_in"
# (crash point or "kill", hit): see the module comment. Phase 2 takes CHECKPOINT #1 (hits 1-2:
# two objects), reads the input, then CHECKPOINT #2 (hits 3-4, delivers), then #3 (hits 5-6).
CASES = [("kill", 0), ("checkpoint_committed", 2), ("checkpoint_mid", 5)]


class Run:
    def __init__(self, a, kafka, tmp, idx):
        self.a, self.kafka, self.idx = a, kafka, idx
        self.dir = os.path.join(tmp, "run%d" % idx)
        os.makedirs(self.dir)
        self.log_path = os.path.join(self.dir, "server.log")
        self.server = None

    def start(self, crash_at=None, interval=150):
        env = {k: v for k, v in os.environ.items() if k not in ("WEIR_CRASH_AT", "WEIR_FAULT")}
        if crash_at:
            env["WEIR_CRASH_AT"] = crash_at
        self.port = free_port()
        self.log_f = open(self.log_path, "a")
        self.server = subprocess.Popen(
            [self.a.weir, "serve", "--data-dir", os.path.join(self.dir, "data"), "--port", str(self.port),
             "--kafka", self.kafka, "--no-broker", "--http-port", "0", "--checkpoint-interval", str(interval)],
            stdout=self.log_f, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 30
        while time.time() < deadline and self.server.poll() is None:
            try:
                c = psycopg2.connect(host="127.0.0.1", port=self.port, dbname="weir", user="weir", connect_timeout=2)
                c.autocommit = True
                return c
            except psycopg2.Error:
                time.sleep(0.05)
        return None

    def stop(self):
        if self.server and self.server.poll() is None:
            self.server.terminate()
            try:
                self.server.wait(30)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        if self.server:
            self.log_f.close()
        self.server = None


def read_dlq(kafka, topic):
    c = Consumer({"bootstrap.servers": kafka, "group.id": "dq-" + uuid.uuid4().hex, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                  "enable.partition.eof": True})
    out = []
    try:
        c.subscribe([topic])
        deadline = time.time() + 15
        eof = False
        while time.time() < deadline and not eof:
            for m in c.consume(100, 0.5):
                if m.error():
                    eof = eof or m.error().code() == KafkaError._PARTITION_EOF
                    continue
                h = {k: v.decode() for k, v in (m.headers() or [])}
                out.append((h.get("weir.partition"), h.get("weir.offset"), m.value()))
    finally:
        c.close()
    return out


def produce_input(kafka, topic):
    """GOOD rows and BAD malformed records to topic; returns the bad records' offsets."""
    p = Producer({"bootstrap.servers": kafka})
    bad_offsets = []
    off = 0
    for i in range(GOOD):
        p.produce(topic, json.dumps({"k": i % 5, "v": i}).encode(), partition=0)
        off += 1
        if i % (GOOD // BAD) == 3:
            p.produce(topic, b"bad record %d" % i, key=b"bad", partition=0)
            bad_offsets.append(str(off))
            off += 1
    if p.flush(20) != 0:
        raise RuntimeError("could not produce the input")
    return bad_offsets


def one_case(a, kafka, tmp, idx, point, n):
    """The view is created and checkpointed first. Phase 2 (no automatic checkpoint: the interval
    is an hour) takes CHECKPOINT #1, then the input arrives and is read, then it ends: killed
    before any checkpoint holds the dead letters ("kill"), or at its crash point during
    CHECKPOINT #2 or #3. Phase 3 restarts without crashing and checks."""
    r = Run(a, kafka, tmp, idx)
    # The same view name in every case (each its own data directory, on one Kafka): a view of
    # another server must not make this one skip its dead letters.
    view, topic, dlq = "dq_v", "dq_in_%d" % idx, "dq_dlq_%d" % idx
    c = r.start()
    cur = c.cursor()
    cur.execute("CREATE SOURCE dq_src (k BIGINT, v BIGINT) WITH (connector = 'kafka', topic = '%s', "
                "scan.startup.mode = 'earliest', on_error = 'dead_letter', error.topic = '%s') "
                "FORMAT PLAIN ENCODE JSON" % (topic, dlq))
    cur.execute("CREATE MATERIALIZED VIEW %s AS SELECT count(*) AS n, sum(v) AS s FROM dq_src" % view)
    cur.execute("CHECKPOINT")
    c.close()
    r.stop()
    c = r.start(None if point == "kill" else "%s:%d" % (point, n), interval=3600000)
    crashed = False
    try:
        cur = c.cursor()
        cur.execute("CHECKPOINT")
        bad_offsets = produce_input(kafka, topic)
        deadline = time.time() + 20
        while time.time() < deadline:
            cur.execute("SELECT n FROM %s" % view)
            row = cur.fetchone()
            if row and row[0] == GOOD:
                break
            time.sleep(0.1)
        time.sleep(1.5)  # at-least-once delivery would have produced them by now
        if point == "kill":
            r.server.kill()
        else:
            for _ in range(3):
                cur.execute("CHECKPOINT")
    except psycopg2.Error:
        pass  # the crash point ended the server under a statement
    try:
        r.server.wait(5)
    except subprocess.TimeoutExpired:
        pass
    crashed = r.server.poll() == -9
    r.stop()
    want = sorted(("0", o) for o in bad_offsets)
    c = r.start()
    ok_view = False
    got = []
    try:
        if c is None:
            raise RuntimeError("the restarted server did not answer")
        cur = c.cursor()
        cur.execute("FLUSH")
        cur.execute("CHECKPOINT")
        cur.execute("CHECKPOINT")
        cur.execute("SELECT n, s FROM %s" % view)
        row = cur.fetchone()
        ok_view = row is not None and (int(row[0]), int(row[1])) == (GOOD, GOOD * (GOOD - 1) // 2)
        got = read_dlq(kafka, dlq)
        c.close()
    except (psycopg2.Error, RuntimeError) as e:
        got = [("error", str(e).strip())]
    r.stop()
    keys = sorted((pp, o) for pp, o, _ in got)
    what = "%s%s (%s)" % (point, ":%d" % n if n else "", "crashed there" if crashed else "NOT REACHED")
    tap(crashed, "%s: the server died there" % what)
    tap(keys == want, "%s: each of the %d dead letters once in %s" % (what, BAD, dlq),
        "got %s\nwant %s\n%s" % (keys, want, open(r.log_path, errors="replace").read()[-1500:]))
    tap(ok_view, "%s: the view counted every good record once" % what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="weir-dlq-", dir="/tmp")
    broker = subprocess.Popen([a.weir, "broker", "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        kafka = None
        deadline = time.time() + 20
        while time.time() < deadline and not kafka:
            m = re.search(r"listening on (\S+:\d+)", broker.stdout.readline() or "")
            kafka = m.group(1) if m else None
        if not kafka:
            tap(False, "the broker started")
            return
        threading.Thread(target=lambda f: [None for _ in f], args=(broker.stdout,), daemon=True).start()
        for idx, (point, n) in enumerate(CASES):
            one_case(a, kafka, tmp, idx, point, n)
    finally:
        broker.terminate()
        broker.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
    tap.end()
