#!/usr/bin/python3
"""insert_withdraw.py --weir PATH: INSERT INTO a source that fails does not write its row later.

INSERT INTO a Kafka source waits 10 s for the broker's acknowledgement. It used to answer 08006
and leave the record queued in the server's producer, which delivered it once the broker was
back, so a client that retried wrote the row twice. Now:

  - broker gone (killed): INSERT answers 08006 "No row was written"; when a broker is back on the
    same port, the topic stays empty (the record was withdrawn), and the next INSERT works;
  - broker paused (SIGSTOP, the request already sent): INSERT answers 08007, naming the rows sent
    without an answer (they may or may not be written).

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


def start_broker(weir, port):
    b = subprocess.Popen([weir, "broker", "--listen", "127.0.0.1:%d" % port, "--topic", "ins"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if "listening on" not in b.stdout.readline():
        b.kill()
        raise RuntimeError("the broker did not start")
    return b


def topic_count(kafka):
    p = subprocess.run([KCAT, "-C", "-b", kafka, "-t", "ins", "-o", "beginning", "-e", "-q", "-f", "%o\\n"],
                       capture_output=True, text=True, timeout=60)
    return len([ln for ln in p.stdout.splitlines() if ln.strip()])


def insert(cur, k):
    try:
        cur.execute("INSERT INTO src VALUES (%d)" % k)
        return None
    except psycopg2.Error as e:
        return e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    weir = ap.parse_args().weir
    tmp = tempfile.mkdtemp(prefix="weir-insw-", dir="/tmp")
    bport = free_port()
    kafka = "127.0.0.1:%d" % bport
    broker = start_broker(weir, bport)
    port = free_port()
    log = open(os.path.join(tmp, "server.log"), "w")
    srv = subprocess.Popen([weir, "serve", "--data-dir", os.path.join(tmp, "data"), "--port", str(port),
                            "--kafka", kafka, "--no-broker", "--http-port", "0"], stdout=log, stderr=subprocess.STDOUT)
    try:
        conn = None
        for _ in range(300):
            try:
                conn = psycopg2.connect(host="127.0.0.1", port=port, dbname="weir", user="weir", connect_timeout=1)
                break
            except psycopg2.Error:
                time.sleep(0.1)
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute("CREATE SOURCE src (k BIGINT) WITH (connector = 'kafka', topic = 'ins', "
                    "scan.startup.mode = 'earliest') FORMAT PLAIN ENCODE JSON")
        tap(insert(cur, 1) is None, "INSERT with the broker up")

        broker.kill()
        broker.wait()
        e = insert(cur, 2)
        tap(e is not None and e.pgcode == "08006" and "No row was written" in (e.diag.message_detail or ""),
            "broker gone: 08006, no row was written", repr(e and (e.pgcode, e.pgerror, e.diag.message_detail)))
        broker = start_broker(weir, bport)  # empty: the old log was in memory
        time.sleep(8)  # the producer reconnects
        n = topic_count(kafka)
        tap(n == 0, "broker back: the failed INSERT's row never arrives", "%d records in the topic" % n)
        e = insert(cur, 3)
        tap(e is None and topic_count(kafka) == 1, "the next INSERT is written once", repr(e))

        broker.send_signal(signal.SIGSTOP)
        e = insert(cur, 4)
        broker.send_signal(signal.SIGCONT)
        tap(e is not None and e.pgcode == "08007" and "sent without an answer" in (e.pgerror or ""),
            "broker paused: 08007, the row may or may not be written",
            repr(e and (e.pgcode, e.pgerror, e.diag.message_detail)))
        conn.close()
    finally:
        srv.terminate()
        try:
            srv.wait(30)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()
        broker.send_signal(signal.SIGCONT)
        broker.terminate()
        broker.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    tap.end()


if __name__ == "__main__":
    main()
