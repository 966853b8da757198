"""difflib_weir.py: what both differential testers share (tests/diff/README.md).

- Pg: a throwaway PostgreSQL 15 (scripts/pg-tmp.sh) with a database in C collation, so text
  sorts by bytes as weir's does; stopped and deleted by stop().
- Server: a broker and a weir server on a data directory that can be restarted (SIGTERM) or
  killed (SIGKILL) and started again on the same directory, as tests/crash does.
- raw_cursor(): results as the text the server sent, never converted by the driver, with each
  column's type OID, so values are compared as the engines print them.
- Expectations: the two checked-in lists a difference is looked up in, intended.txt (documented
  differences, each with the docs line that states it) and known_defects.txt (open defects, each
  with its issue-17 item); whatever matches neither fails the test.
"""
import configparser
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import psycopg2
import psycopg2.extensions

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PG_TMP = os.path.join(REPO, "scripts", "pg-tmp.sh")

# Every type either engine may answer with is read back as its text: the comparison decides how
# to normalise it, not the driver.
_RAW_OIDS = (16, 17, 18, 19, 20, 21, 23, 25, 26, 114, 700, 701, 705, 1042, 1043, 1082, 1083, 1114,
             1184, 1186, 1266, 1700, 2249, 3802)
_RAW = psycopg2.extensions.new_type(_RAW_OIDS, "WEIR_DIFF_RAW", lambda s, cur: s)
psycopg2.extensions.register_type(_RAW)

# Type OIDs by family: two engines agree on a column's type when the families are equal.
FAMILY = {16: "bool", 20: "int8", 21: "int2", 23: "int4", 25: "text", 1043: "text", 1042: "text",
          705: "text", 700: "float4", 701: "float8", 1700: "numeric", 1082: "date", 1114: "timestamp",
          1184: "timestamptz", 1186: "interval", 17: "bytea", 3802: "jsonb", 114: "jsonb"}


def family(oid):
    return FAMILY.get(oid, "oid%d" % oid)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def exit_on_signals():
    """SIGTERM (meson's timeout) and SIGINT end the test through SystemExit, so the finally
    blocks stop the server, the broker and PostgreSQL and delete their directories. SIGINT is set
    too because a shell starts background jobs with it ignored."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))


def log(msg):
    print("# " + msg)
    sys.stdout.flush()


class Pg:
    """A throwaway PostgreSQL 15 with database `diff` (C collation, UTF8)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="wdpg-", dir="/tmp")
        os.chmod(self.dir, 0o755)
        self.port = free_port()
        try:
            out = subprocess.run([PG_TMP, "start", self.dir, str(self.port)], capture_output=True, text=True)
        except OSError:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        if out.returncode != 0:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise RuntimeError("pg-tmp.sh start failed: " + out.stderr.strip())
        c = psycopg2.connect(host="127.0.0.1", port=self.port, dbname="postgres", user="postgres")
        c.autocommit = True
        c.cursor().execute("CREATE DATABASE diff TEMPLATE template0 ENCODING 'UTF8' "
                           "LC_COLLATE 'C' LC_CTYPE 'C'")
        c.close()
        self.conn = self.connect()

    def connect(self):
        c = psycopg2.connect(host="127.0.0.1", port=self.port, dbname="diff", user="postgres")
        c.autocommit = True
        return c

    def stop(self):
        try:
            self.conn.close()
        except Exception:
            pass
        subprocess.run([PG_TMP, "stop", self.dir], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


class Server:
    """A broker and a weir server whose data directory outlives restart() and kill()."""

    def __init__(self, weir, checkpoint_interval=None):
        self.weir = weir
        self.tmp = tempfile.mkdtemp(prefix="weir-diff-", dir="/tmp")
        self.data = os.path.join(self.tmp, "data")
        self.log_path = os.path.join(self.tmp, "server.log")
        self.checkpoint_interval = checkpoint_interval
        self.broker = None
        self.server = None
        self.conn = None
        self.port = free_port()
        self._start_broker()
        try:
            self.start()
        except Exception:
            self.stop()
            raise

    def _start_broker(self):
        self.broker = subprocess.Popen([self.weir, "broker", "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL, text=True)
        self.kafka = None
        deadline = time.time() + 20
        while time.time() < deadline and not self.kafka:
            line = self.broker.stdout.readline()
            if not line:
                break
            m = re.search(r"listening on (\S+:\d+)", line)
            self.kafka = m.group(1) if m else None
        if not self.kafka:
            raise RuntimeError("the broker did not start")
        threading.Thread(target=lambda f: [None for _ in f], args=(self.broker.stdout,), daemon=True).start()

    def start(self):
        """Starts the server on the data directory; a port taken since free_port() picked it (a
        race with other tests) gets another try on a new port, twice."""
        for attempt in range(3):
            try:
                return self._start_once()
            except RuntimeError as e:
                if attempt == 2 or "Address already in use" not in self.log_tail(3):
                    raise
                self.port = free_port()

    def _start_once(self):
        args = [self.weir, "serve", "--data-dir", self.data, "--port", str(self.port), "--kafka", self.kafka,
                "--no-broker", "--http-port", "0"]
        if self.checkpoint_interval:
            args += ["--checkpoint-interval", str(self.checkpoint_interval)]
        with open(self.log_path, "a") as f:
            f.write("\n===== difftest: start at %s =====\n" % time.strftime("%H:%M:%S"))
            self.server = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.server.poll() is not None:
                raise RuntimeError("weir exited with %s (log %s)" % (self.server.returncode, self.log_path))
            try:
                self.conn = psycopg2.connect(host="127.0.0.1", port=self.port, dbname="weir", user="weir",
                                             connect_timeout=2)
                self.conn.autocommit = True
                return
            except psycopg2.Error:
                time.sleep(0.1)
        raise RuntimeError("weir did not answer (log %s)" % self.log_path)

    def alive(self):
        return self.server is not None and self.server.poll() is None

    def _close_conn(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
            self.conn = None

    def restart(self):
        """SIGTERM, wait, start again on the same data directory."""
        self._close_conn()
        self.server.terminate()
        try:
            self.server.wait(15)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()
        self.start()

    def kill(self):
        """SIGKILL, then start again on the same data directory."""
        self._close_conn()
        self.server.send_signal(signal.SIGKILL)
        self.server.wait()
        self.start()

    def reconnect(self):
        """After a crash: start the server again if it died, then connect."""
        self._close_conn()
        if not self.alive():
            self.start()
        else:
            self.conn = psycopg2.connect(host="127.0.0.1", port=self.port, dbname="weir", user="weir",
                                         connect_timeout=5)
            self.conn.autocommit = True

    def log_tail(self, n=15):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def stop(self, keep=False):
        self._close_conn()
        for p in (self.server, self.broker):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if not keep:
            shutil.rmtree(self.tmp, ignore_errors=True)


class Result:
    """One statement's outcome: rows of text (None for NULL) with column type OIDs, or an error."""

    def __init__(self, rows=None, oids=None, state=None, msg=None):
        self.rows, self.oids, self.state, self.msg = rows, oids, state, msg

    @property
    def ok(self):
        return self.state is None

    def describe(self):
        if self.ok:
            return "ok (%d rows)" % len(self.rows)
        return "%s %s" % (self.state, self.msg)


def run(conn, sql, timeout_ms=None):
    """Runs sql on conn; returns a Result. A broken connection comes back as state 'CRASH'."""
    try:
        cur = conn.cursor()
        cur.execute(sql)
        if cur.description is None:
            return Result([], [])
        return Result([tuple(r) for r in cur.fetchall()], [d.type_code for d in cur.description])
    except psycopg2.Error as e:
        if e.pgcode is None:
            return Result(state="CRASH", msg=str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
        return Result(state=e.pgcode, msg=(e.pgerror or "").strip().splitlines()[0] if e.pgerror else str(e))


def check_doc_quote(path, name, doc):
    """An intended difference cites the docs that state it: `FILE[, section]: "quoted text"`.
    The quoted text (each `...` part of it) must still be in FILE, so an entry cannot outlive
    the documentation that made it intended (avg of integers became numeric at planner revision
    4 and its entry stayed, hiding any avg(int) difference)."""
    m = re.match(r'\s*([\w./-]+\.md)\b[^"]*"(.*)"', doc, re.S)
    if not m:
        raise ValueError('%s [%s]: doc must be FILE: "quoted text"' % (path, name))
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), "..", ".."))
    with open(os.path.join(root, m.group(1))) as f:
        text = " ".join(f.read().split())
    for part in m.group(2).split("..."):
        part = " ".join(part.split())
        if part and part not in text:
            raise ValueError('%s [%s]: the quoted docs text is no longer in %s: "%s"' % (path, name, m.group(1), part))


class Expectations:
    """intended.txt and known_defects.txt: sections whose `match` regex (Python, re.S) is searched
    in a difference's signature text. known_defects.txt entries carry `issue` (an issue-17 item
    number, or `new`); intended.txt entries carry `reason` and `doc`."""

    def __init__(self, *paths):
        self.entries = []
        for path in paths:
            cp = configparser.RawConfigParser()
            with open(path) as f:
                cp.read_file(f)
            kind = "known" if "known" in os.path.basename(path) else "intended"
            for name in cp.sections():
                sec = cp[name]
                if "match" not in sec:
                    raise ValueError("%s [%s]: no match" % (path, name))
                if kind == "intended" and not ("reason" in sec and "doc" in sec):
                    raise ValueError("%s [%s]: an intended difference needs reason and doc" % (path, name))
                if kind == "intended":
                    check_doc_quote(path, name, sec["doc"])
                if kind == "known" and "issue" not in sec:
                    raise ValueError("%s [%s]: a known defect needs issue" % (path, name))
                self.entries.append((kind, name, re.compile(sec["match"].strip(), re.S | re.M), dict(sec)))
        self.hits = {}

    def lookup(self, signature):
        """The (kind, name) of the first entry matching signature, or None."""
        for kind, name, rx, _ in self.entries:
            if rx.search(signature):
                self.hits[(kind, name)] = self.hits.get((kind, name), 0) + 1
                return kind, name
        return None
