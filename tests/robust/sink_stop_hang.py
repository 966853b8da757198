#!/usr/bin/python3
"""sink_stop_hang.py --weir PATH: shutdown finishes in bounded time whatever a Kafka sink does.

SIGTERM waited forever on a Kafka sink's delivery thread: sink_close joined a thread that was
inside librdkafka (begin_transaction can wait without a timeout on a producer fenced by a second
server with the same transactional.id, as with a savepoint copy running beside the original), and
a stop flag cannot reach a thread inside such a call. Needs a -Dfault_injection=true build
(registered only there): WEIR_FAULT=kafka_txn_begin:1:hold with WEIR_FAULT_HOLD=<file> makes
every begin_transaction block while the file exists, as that librdkafka call did.

  - three times: a server with a table, a view and a Kafka sink delivering, then SIGTERM: it
    exits 0 within 10 s;
  - twice: the same with the sink's transaction held: SIGTERM still ends the server within 40 s
    (the delivery thread is waited for 20 s, then left behind with a log line);
  - the file removed and the server restarted without the fault: the rows reach the topic.

Prints TAP; exits 1 if a check failed.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Tap, free_port  # noqa: E402

import psycopg2  # noqa: E402

tap = Tap()
KCAT = "/usr/bin/kcat"


def start_broker(weir):
    b = subprocess.Popen([weir, "broker", "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    m = re.search(r"listening on (\S+:\d+)", b.stdout.readline())
    if not m:
        b.kill()
        raise RuntimeError("the broker did not start")
    return b, m.group(1)


class Server:
    def __init__(self, weir, tmp, kafka):
        self.weir, self.tmp, self.kafka = weir, tmp, kafka
        self.data = os.path.join(tmp, "data")
        self.log_path = os.path.join(tmp, "server.log")
        self.proc = None

    def start(self, env_extra=None):
        env = {k: v for k, v in os.environ.items() if k not in ("WEIR_FAULT", "WEIR_FAULT_HOLD")}
        env.update(env_extra or {})
        self.port = free_port()
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen([self.weir, "serve", "--data-dir", self.data, "--port", str(self.port),
                                      "--kafka", self.kafka, "--no-broker", "--http-port", "0"],
                                     stdout=log, stderr=subprocess.STDOUT, env=env)
        for _ in range(300):
            try:
                self.conn = psycopg2.connect(host="127.0.0.1", port=self.port, dbname="weir", user="weir",
                                             connect_timeout=1)
                self.conn.autocommit = True
                return
            except psycopg2.Error:
                time.sleep(0.1)
        raise RuntimeError("weir did not answer")

    def q(self, sql):
        cur = self.conn.cursor()
        cur.execute(sql)
        return cur.fetchall() if cur.description else None

    def term(self, limit):
        """SIGTERM; returns (seconds to exit, exit code), or (None, None) if it was still running after
        limit seconds (then killed)."""
        self.conn.close()
        t0 = time.time()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(limit)
            return time.time() - t0, rc
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None, None


def topic_count(kafka, topic):
    p = subprocess.run([KCAT, "-C", "-b", kafka, "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%o\\n",
                        "-X", "isolation.level=read_committed"], capture_output=True, text=True, timeout=60)
    return len([ln for ln in p.stdout.splitlines() if ln.strip()])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    weir = ap.parse_args().weir
    tmp = tempfile.mkdtemp(prefix="weir-ssh-", dir="/tmp")
    broker, kafka = start_broker(weir)
    srv = Server(weir, tmp, kafka)
    hold = os.path.join(tmp, "hold")
    try:
        srv.start()
        srv.q("CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT)")
        srv.q("CREATE MATERIALIZED VIEW tot AS SELECT k, sum(v) AS s FROM t GROUP BY k")
        srv.q("CREATE SINK ks FROM tot WITH (connector = 'kafka', topic = 'ks_out') FORMAT UPSERT ENCODE JSON")
        n = 0
        for rep in range(3):
            if rep:
                srv.start()
            for _ in range(10):
                srv.q("INSERT INTO t VALUES (%d, %d)" % (n, n))
                n += 1
            time.sleep(2)
            secs, rc = srv.term(30)
            tap(secs is not None and secs < 10 and rc == 0, "sink delivering: SIGTERM ends the server in < 10 s "
                "(run %d: %s s)" % (rep + 1, "%.1f" % secs if secs is not None else "hung"))
        delivered = topic_count(kafka, "ks_out")

        open(hold, "w").close()
        for rep in range(2):
            srv.start({"WEIR_FAULT": "kafka_txn_begin:1:hold", "WEIR_FAULT_HOLD": hold})
            for _ in range(10):
                srv.q("INSERT INTO t VALUES (%d, %d)" % (n, n))
                n += 1
            time.sleep(3)
            secs, rc = srv.term(60)
            tap(secs is not None and secs < 40, "sink held inside Kafka: SIGTERM ends the server in < 40 s "
                "(run %d: %s s)" % (rep + 1, "%.1f" % secs if secs is not None else "hung for 60"),
                open(srv.log_path).read()[-1500:])
        log = open(srv.log_path).read()
        tap("delivery thread did not stop" in log, "the log says the delivery thread was left behind", log[-1500:])

        os.unlink(hold)
        srv.start()
        deadline = time.time() + 30
        got = 0
        while time.time() < deadline:
            got = topic_count(kafka, "ks_out")
            if got >= delivered + 20:
                break
            time.sleep(1)
        tap(got >= delivered + 20, "without the fault, the held rows reach the topic", "%d records, %d before" %
            (got, delivered))
        srv.term(30)
    finally:
        if srv.proc and srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()
        broker.terminate()
        broker.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    tap.end()


if __name__ == "__main__":
    main()
