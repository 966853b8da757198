#!/usr/bin/python3
"""id_alloc.py --weir PATH: a state table id that cannot be allocated fails the statement.

Needs a -Dfault_injection=true build (registered only there). The fault point next_id fails one
call of stor_next_id (storage/env.c), as a failed LMDB write would. Planning a table or a view asks
the catalog for its state table ids through a callback with no error path (planner.h); the server
used to hand the planner id 0 and carry on, so the object was created over state table 0, shared
with any other such object. Now the statement fails with the storage error's SQLSTATE (58030) and
nothing is created:

  - a counting run learns how many ids CREATE TABLE takes (WEIR_FAULT_COUNTS);
  - next_id:1 fails CREATE TABLE's first state table id: 58030, no table; the retry succeeds;
  - next_id:<after the table's> fails CREATE MATERIALIZED VIEW's first state table id: 58030, no
    view; the retry succeeds, and the view's rows are right, also after a restart.

Prints TAP; exits 1 if a check failed.
"""
import argparse
import os
import shutil
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
except ImportError as e:  # pragma: no cover
    print("1..0 # SKIP needs python3-psycopg2: %s" % e)
    sys.exit(77)

TABLE = "CREATE TABLE ia_t (k INT PRIMARY KEY, v BIGINT)"
VIEW = "CREATE MATERIALIZED VIEW ia_v AS SELECT k % 2 AS p, sum(v) AS s FROM ia_t GROUP BY k % 2"


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
    def __init__(self, weir, kafka, data, log_path):
        self.weir, self.kafka, self.data, self.log_path = weir, kafka, data, log_path
        self.proc = None
        self.last = ""

    def start(self, env_extra=None):
        env = {k: v for k, v in os.environ.items() if k not in ("WEIR_FAULT", "WEIR_FAULT_COUNTS", "WEIR_CRASH_AT")}
        env.update(env_extra or {})
        self.port = free_port()
        self.log_f = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            [self.weir, "serve", "--data-dir", self.data, "--port", str(self.port), "--kafka", self.kafka,
             "--no-broker", "--http-port", "0"],
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

    def error(self, sql):
        """The SQLSTATE sql fails with, None if it succeeds."""
        try:
            self.q(sql)
            return None
        except psycopg2.Error as e:
            self.last = str(e).strip()
            return e.pgcode

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="weir-id-alloc-")
    broker, kafka = start_broker(a.weir)
    srv = None
    try:
        # How many ids CREATE TABLE allocates (its state tables, then the object's own id).
        counts = os.path.join(tmp, "counts")
        srv = Server(a.weir, kafka, os.path.join(tmp, "d0"), os.path.join(tmp, "d0.log"))
        srv.start({"WEIR_FAULT_COUNTS": counts})
        srv.q(TABLE)
        srv.stop()
        n_table = 0
        with open(counts) as f:
            for line in f:
                p = line.split()
                if len(p) == 2 and p[0] == "next_id":
                    n_table = int(p[1])
        tap(n_table >= 2, "CREATE TABLE allocates ids (%d)" % n_table)

        # CREATE TABLE's first state table id fails.
        srv = Server(a.weir, kafka, os.path.join(tmp, "d1"), os.path.join(tmp, "d1.log"))
        srv.start({"WEIR_FAULT": "next_id:1"})
        code = srv.error(TABLE)
        tap(code == "58030", "CREATE TABLE whose state table id fails: 58030", "got %r: %s" % (code, srv.last))
        tap("fault injected: next_id (call 1)" in srv.log(), "the fault fired")
        tap(srv.error("SELECT * FROM ia_t") == "42P01", "no table was created")
        tap(srv.error(TABLE) is None, "the retry creates the table")
        srv.stop()

        # CREATE MATERIALIZED VIEW's first state table id fails.
        srv = Server(a.weir, kafka, os.path.join(tmp, "d2"), os.path.join(tmp, "d2.log"))
        srv.start({"WEIR_FAULT": "next_id:%d" % (n_table + 1)})
        srv.q(TABLE)
        code = srv.error(VIEW)
        tap(code == "58030", "CREATE MATERIALIZED VIEW whose state table id fails: 58030",
            "got %r: %s" % (code, srv.last))
        tap(("fault injected: next_id (call %d)" % (n_table + 1)) in srv.log(), "the fault fired")
        tap(srv.error("SELECT * FROM ia_v") == "42P01", "no view was created")
        tap(srv.error(VIEW) is None, "the retry creates the view")
        srv.q("INSERT INTO ia_t VALUES (1, 10), (2, 20), (3, 30)")
        want = [(0, 20), (1, 40)]
        got = srv.q("SELECT p, s FROM ia_v ORDER BY p")
        tap(got == want, "the view's rows", "got %r" % got)
        srv.stop()
        srv.start()
        got = srv.q("SELECT p, s FROM ia_v ORDER BY p")
        tap(got == want, "the view's rows after a restart", "got %r" % got)
        srv.q("INSERT INTO ia_t VALUES (4, 40)")
        got = srv.q("SELECT p, s FROM ia_v ORDER BY p")
        tap(got == [(0, 60), (1, 40)], "the view keeps counting after the restart", "got %r" % got)
        srv.stop()
        srv = None
    finally:
        if srv:
            srv.stop()
        broker.terminate()
        broker.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return tap.end()


if __name__ == "__main__":
    sys.exit(main())
