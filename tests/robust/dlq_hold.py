#!/usr/bin/python3
"""dlq_hold.py --weir PATH: a dead-letter delivery that hangs does not stop the view.

Needs a -Dfault_injection=true build (registered only there). The server runs with
WEIR_FAULT=kafka_txn_begin:1:hold and WEIR_FAULT_HOLD=<file>: every Kafka transaction of the
dead-letter delivery blocks while the file exists (nothing else here uses transactions), as a
Kafka that hangs would. A source with on_error = 'dead_letter' then reads good records with bad
ones among them, in two rounds:

  - while the delivery is held, the view counts every good record of both rounds (its rows go on
    advancing: delivery is not on the engine thread) and the dead-letter topic is empty;
  - once the file is removed, the held delivery goes on and every bad record reaches the topic
    exactly once (by its weir.partition/weir.offset headers);
  - after a restart, FLUSH and CHECKPOINT, still exactly once, and the view's count is right.

With the delivery on the engine thread (as before), the engine holds its lock during the hang,
so the first query after the hold began never returns and the test runs into meson's timeout.

Prints TAP; exits 1 if a check failed.
"""
import argparse
import json
import os
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

GOOD = 30  # per round
BAD = 3    # per round
TOPIC, DLQ = "dh_in", "dh_dlq"


def _drain(f):
    for _ in f:
        pass


def start_broker(weir):
    b = subprocess.Popen([weir, "broker", "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    line = b.stdout.readline()
    if "listening on" not in line:
        raise RuntimeError("the broker did not start: %r" % line)
    threading.Thread(target=_drain, args=(b.stdout,), daemon=True).start()
    return b, line.split("listening on")[1].split()[0]


class Server:
    def __init__(self, weir, kafka, tmp):
        self.weir, self.kafka, self.tmp = weir, kafka, tmp
        self.log_path = os.path.join(tmp, "server.log")
        self.proc = None

    def start(self, env_extra=None):
        env = {k: v for k, v in os.environ.items() if k not in ("WEIR_FAULT", "WEIR_FAULT_HOLD", "WEIR_CRASH_AT")}
        env.update(env_extra or {})
        self.port = free_port()
        self.log_f = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            [self.weir, "serve", "--data-dir", os.path.join(self.tmp, "data"), "--port", str(self.port),
             "--kafka", self.kafka, "--no-broker", "--http-port", "0", "--checkpoint-interval", "200"],
            stdout=self.log_f, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 60
        while time.time() < deadline and self.proc.poll() is None:
            try:
                c = psycopg2.connect(host="127.0.0.1", port=self.port, dbname="weir", user="weir", connect_timeout=2)
                c.autocommit = True
                self.cur = c.cursor()
                return
            except psycopg2.Error:
                time.sleep(0.1)
        raise RuntimeError("weir did not answer")

    def q(self, sql):
        self.cur.execute(sql)
        return self.cur.fetchall() if self.cur.description else None

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.log_f.close()
        self.proc = None


def produce_round(kafka, start_off, round_no):
    """GOOD rows with BAD malformed records among them to partition 0; returns the bad offsets."""
    p = Producer({"bootstrap.servers": kafka})
    bad, off = [], start_off
    for i in range(GOOD):
        p.produce(TOPIC, json.dumps({"k": i % 5, "v": i}).encode(), partition=0)
        off += 1
        if i % (GOOD // BAD) == 4:
            p.produce(TOPIC, b"bad %d/%d" % (round_no, i), key=b"bad", partition=0)
            bad.append(str(off))
            off += 1
    if p.flush(20) != 0:
        raise RuntimeError("could not produce the input")
    return bad, off


def read_dlq(kafka):
    c = Consumer({"bootstrap.servers": kafka, "group.id": "dh-" + uuid.uuid4().hex, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                  "enable.partition.eof": True})
    out = []
    try:
        c.subscribe([DLQ])
        deadline = time.time() + 15
        eof = False
        while time.time() < deadline and not eof:
            for m in c.consume(100, 0.5):
                if m.error():
                    eof = eof or m.error().code() == KafkaError._PARTITION_EOF
                    continue
                h = {k: v.decode() for k, v in (m.headers() or [])}
                out.append((h.get("weir.partition"), h.get("weir.offset")))
    finally:
        c.close()
    return sorted(out)


def wait_for(fn, timeout=60):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fn()
        if last is True:
            return True, None
        time.sleep(0.1)
    return False, last


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="weir-dlqhold-", dir="/tmp")
    hold = os.path.join(tmp, "hold")
    open(hold, "w").close()
    broker, kafka = start_broker(a.weir)
    s = Server(a.weir, kafka, tmp)
    try:
        s.start({"WEIR_FAULT": "kafka_txn_begin:1:hold", "WEIR_FAULT_HOLD": hold})
        s.q("CREATE SOURCE dh (k BIGINT, v BIGINT) WITH (connector = 'kafka', topic = '%s', "
            "scan.startup.mode = 'earliest', on_error = 'dead_letter', error.topic = '%s') "
            "FORMAT PLAIN ENCODE JSON" % (TOPIC, DLQ))
        s.q("CREATE MATERIALIZED VIEW dh_n AS SELECT count(*) AS n FROM dh")
        count = lambda: s.q("SELECT n FROM dh_n")[0][0]  # noqa: E731
        bad1, off = produce_round(kafka, 0, 1)
        ok, last = wait_for(lambda: count() == GOOD or count())
        tap(ok, "the view counts the first round", last)
        ok, _ = wait_for(lambda: "held while" in s.log())
        tap(ok, "the dead-letter delivery is held (fault injected)", s.log()[-1500:])
        bad2, off = produce_round(kafka, off, 2)
        ok, last = wait_for(lambda: count() == 2 * GOOD or count())
        tap(ok, "while it hangs, the view goes on counting the second round", last)
        st = s.q("SELECT state FROM weir_views WHERE name = 'dh_n'")
        tap(st == [("running",)], "the view is running", st)
        got = read_dlq(kafka)
        tap(got == [], "nothing in the dead-letter topic while held", got)

        os.unlink(hold)
        want = sorted(("0", o) for o in bad1 + bad2)
        ok, last = wait_for(lambda: read_dlq(kafka) == want or read_dlq(kafka), timeout=90)
        tap(ok, "once the hold ends every bad record is in the topic exactly once", "want %s got %s" % (want, last))

        s.stop()
        s.start()
        s.q("FLUSH")
        s.q("CHECKPOINT")
        s.q("CHECKPOINT")
        got = read_dlq(kafka)
        tap(got == want, "after a restart still exactly once", "want %s got %s" % (want, got))
        tap(count() == 2 * GOOD, "the view counted every good record once", count())
    except Exception as e:  # noqa: BLE001
        tap(False, "no exception", repr(e))
    finally:
        if os.path.exists(hold):
            os.unlink(hold)
        s.stop()
        broker.terminate()
        broker.wait(20)
        if tap.failed:
            try:
                print("# server log tail:\n# " + "\n# ".join(s.log()[-3000:].splitlines()))
            except OSError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)
    tap.end()


if __name__ == "__main__":
    main()
