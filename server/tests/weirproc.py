"""weirproc.py: start a weir server for a client test and stop it.

Used by the client tests in this directory (psql, psycopg2): each test gets
its own data directory and a free loopback port, and no Kafka broker (the
nexmark connector needs none; --kafka points at a closed port).
"""
import os
import shutil
import socket
import subprocess
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Weir:
    """A running `weir serve`; extra arguments are appended to its command line."""

    def __init__(self, exe, *extra):
        self.exe = exe
        self.dir = tempfile.mkdtemp(prefix="weir-client-")
        self.port = free_port()
        self.log_path = os.path.join(self.dir, "server.log")
        self.extra = list(extra)
        self.start_host = "127.0.0.1"   # where start() waits for the port
        self.proc = None
        self.start()

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [self.exe, "--data-dir", os.path.join(self.dir, "data"), "--port", str(self.port),
             "--http-port", "0", "--kafka", "127.0.0.1:%d" % free_port(), "--no-broker"] + self.extra,
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("weir exited: " + self.log())
            try:
                socket.create_connection((self.start_host, self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("weir did not start: " + self.log())

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-3000:]

    def stop(self):
        """SIGTERM; returns the exit status (non-zero: a sanitizer report, a crash)."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode if self.proc else 0
        self.proc = None
        return rc

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Tap:
    """TAP output: ok / not ok lines and the plan at the end."""

    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, name, diag=""):
        self.n += 1
        if not cond:
            self.failed += 1
        print("%s %d - %s" % ("ok" if cond else "not ok", self.n, name))
        if not cond and diag:
            for line in str(diag).splitlines():
                print("# " + line)
        return cond

    def done(self):
        print("1..%d" % self.n)
        return 1 if self.failed else 0
