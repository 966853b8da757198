"""weirtest.py: an embedded broker and a weir server for the Python end-to-end tests.

Each test gets its own broker (`weir broker` on a free loopback port), its own server (a fresh
data directory, free ports) and a psycopg2 connection in autocommit mode. Used by tests/sim,
tests/clients and tests/dashboard:

    from weirtest import Stack
    with Stack(weir_exe, http=True) as st:
        st.q("CREATE SOURCE ...")
        ... st.kafka, st.port, st.http_port, st.tmp ...
"""
import collections
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import psycopg2


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Tap:
    """TAP output for the test scripts: tap(ok, what, detail) prints one numbered line per
    check (the detail's last lines as comments when it fails) and returns ok; tap.end() prints
    the plan and exits non-zero if any check failed."""

    def __init__(self):
        self.n = 0
        self.failed = 0

    def __call__(self, ok, what, detail=""):
        self.n += 1
        self.failed += 0 if ok else 1
        print("%s %d - %s" % ("ok" if ok else "not ok", self.n, what))
        if detail and not ok:
            for line in str(detail).strip().splitlines()[-30:]:
                print("#   " + line)
        sys.stdout.flush()
        return ok

    def end(self):
        print("1..%d" % self.n)
        sys.exit(1 if self.failed else 0)


def _drain(f):
    for _ in f:
        pass


class Stack:
    """A broker, a server and a connection; stop() (or leaving a with block) ends them."""

    def __init__(self, weir, http=False, prefix="weir-test-"):
        self.weir = weir
        self.tmp = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
        self.procs = []
        self.conn = None
        self.http_port = free_port() if http else 0
        try:
            self._start_broker()
            self._start_server()
        except Exception:
            self.stop()
            raise

    def _start_broker(self):
        b = subprocess.Popen([self.weir, "broker", "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        self.procs.append(b)
        self.kafka = None
        deadline = time.time() + 20
        while time.time() < deadline and not self.kafka:
            line = b.stdout.readline()
            if not line:
                break
            m = re.search(r"listening on (\S+:\d+)", line)
            self.kafka = m.group(1) if m else None
        if not self.kafka:
            raise RuntimeError("the broker did not start")
        # Keep reading its output so it never blocks on a full pipe.
        threading.Thread(target=_drain, args=(b.stdout,), daemon=True).start()

    def _start_server(self):
        self.port = free_port()
        self.log_path = os.path.join(self.tmp, "server.log")
        with open(self.log_path, "w") as log:
            self.procs.append(subprocess.Popen(
                [self.weir, "serve", "--data-dir", os.path.join(self.tmp, "data"), "--port", str(self.port),
                 "--kafka", self.kafka, "--no-broker", "--http-port", str(self.http_port)],
                stdout=log, stderr=subprocess.STDOUT))
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                self.conn = psycopg2.connect(host="127.0.0.1", port=self.port, dbname="weir", user="weir",
                                             connect_timeout=1)
                self.conn.autocommit = True
                return
            except psycopg2.Error:
                time.sleep(0.1)
        raise RuntimeError("weir did not answer")

    def q(self, sql, args=None):
        """Runs one statement; returns its rows (None for a statement without any)."""
        cur = self.conn.cursor()
        cur.execute(sql, args)
        return cur.fetchall() if cur.description else None

    def stop(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except psycopg2.Error:
                pass
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


class Subscriber(threading.Thread):
    """COPY (SUBSCRIBE v) TO STDOUT on its own connection, accumulating the changes."""

    def __init__(self, port, view):
        super().__init__(daemon=True)
        self.conn = psycopg2.connect(host="127.0.0.1", port=port, dbname="weir", user="weir")
        self.conn.autocommit = True
        self.view = view
        self.lock = threading.Lock()
        self.acc = collections.Counter()
        self.bad = []          # multiplicities that went below 0 or above 1
        self.buf = ""
        self.error = None

    def write(self, data):
        if isinstance(data, bytes):
            data = data.decode()
        with self.lock:
            self.buf += data
            while "\n" in self.buf:
                line, self.buf = self.buf.split("\n", 1)
                f = line.split("\t")
                row = tuple(f[2:])
                self.acc[row] += int(f[1])
                if self.acc[row] < 0 or self.acc[row] > 1:
                    self.bad.append((row, self.acc[row]))
                if self.acc[row] == 0:
                    del self.acc[row]

    def run(self):
        try:
            self.conn.cursor().copy_expert(f"COPY (SUBSCRIBE {self.view}) TO STDOUT", self)
        except psycopg2.Error as e:
            self.error = e

    def contents(self):
        with self.lock:
            return set(self.acc), list(self.bad)

    def close(self):
        self.conn.cancel()
        self.join(10)
        self.conn.close()
