#!/usr/bin/python3
"""bench/side_by_side.py: Nexmark queries in weir, DuckDB, PostgreSQL and SQLite on the same events.

Run through bench/side_by_side.sh (which builds weir and installs DuckDB's npm package); the
options are described there and in bench/README.md. For each rate (events per second of event
time) it writes the events of `weir nexmark --format csv` (person, auction, bid: every field),
then for each query:

  weir        a fresh server (--no-broker, checkpoints every second), the three nexmark sources
              of bench/nexmark/sources.sql (the same generator, hence the same rows as the CSV)
              and the view of bench/nexmark/<query>.sql, FLUSHed until the bounded generator has
              ended and the view has consumed everything. Figure: events / CPU seconds of the
              server process from CREATE MATERIALIZED VIEW to FLUSH done (events per busy core).
              Freshness: from the last poll (every 10 ms, weir_views.records_in) that saw the
              view short of its last event to FLUSH returning with the final answer: an upper
              bound of the time from the last event appended to the final answer.
  duckdb      bench/duckdb_run.mjs: one thread, COPY of the CSVs + CREATE TABLE r AS query,
              timed together; figure: events / CPU seconds of that (one thread).
  postgresql  scripts/pg-tmp.sh (defaults, no tuning): CREATE TABLE + COPY of the CSVs + CREATE
              TABLE r AS query; figure: events / CPU seconds of the whole cluster (every process
              of the postmaster, background writers included).
  sqlite      the sqlite3 CLI on a file (journal and sync off): .import of the CSVs + CREATE
              TABLE r AS query; figure: events / CPU seconds of the sqlite3 process.

Every answer is written as CSV and compared with DuckDB's (or, when DuckDB does not run, with
the first reference engine that does) as a multiset of rows, after normalizing how engines print
numbers and timestamps (see norm()). A figure whose answer differs is marked `!` and the
difference is listed under the table; the exit status is 1 when any answer differs or any run
failed, so the smoke test (bench/meson.build) fails on it.
"""
import argparse
import collections
import csv
import json
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from side_by_side_queries import TABLES, create_table, query  # noqa: E402

HZ = os.sysconf("SC_CLK_TCK")
QUERIES = "q0 q1 q2 q3 q4 q5 q7 q8 q_tumble"
REFS = ["duckdb", "postgresql", "sqlite"]
POLL_S = 0.010  # freshness poll interval: the resolution of the freshness figure


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def proc_cpu(pid):
    """CPU seconds (user + system, all threads) of process pid; 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / HZ
    except OSError:
        return 0.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# Answers: normalize what differs only in printing, then compare as multisets.

INT_RE = re.compile(r"-?\d+")
FLOAT_RE = re.compile(r"-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?")
TS_RE = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?:\.(\d+))?")


def norm(v):
    """One field as all engines agree to print it: integers plain, other numbers to 9 significant
    digits (DOUBLE vs DECIMAL arithmetic, the order of a sum), timestamps without trailing zeros."""
    if INT_RE.fullmatch(v):
        return str(int(v))
    if FLOAT_RE.fullmatch(v):
        f = float(v)
        return str(int(f)) if f.is_integer() and abs(f) < 2**53 else "%.9g" % f
    m = TS_RE.fullmatch(v)
    if m:
        frac = (m.group(3) or "").rstrip("0")
        return f"{m.group(1)} {m.group(2)}" + ("." + frac if frac else "")
    return v


def read_answer(path):
    with open(path, newline="") as f:
        return collections.Counter(tuple(norm(v) for v in row) for row in csv.reader(f))


def compare(mine, ref):
    """None when the multisets are equal, else a short description of the difference."""
    if mine == ref:
        return None
    extra, missing = mine - ref, ref - mine
    n_mine, n_ref = sum(mine.values()), sum(ref.values())
    d = f"{n_mine} rows vs {n_ref}; {sum(extra.values())} not in the reference, {sum(missing.values())} missing"
    if extra:
        d += f"; e.g. extra {list(extra)[0]}"
    if missing:
        d += f"; e.g. missing {list(missing)[0]}"
    return d


# ---------------------------------------------------------------------------------------------
# weir


class Weir:
    def __init__(self, exe, work, events, rate, interval):
        self.exe, self.work, self.events, self.rate, self.interval = exe, work, events, rate, interval

    def sql_file(self, conninfo, text):
        r = subprocess.run(["psql", conninfo, "-X", "-At", "-q", "-v", "ON_ERROR_STOP=1", "-f", "-"],
                           input=text, capture_output=True, text=True)
        return r.returncode, (r.stdout + r.stderr).strip()

    def start(self, tmp):
        for _ in range(5):
            port = free_port()
            logf = open(os.path.join(tmp, "server.log"), "w")
            p = subprocess.Popen([self.exe, "--data-dir", os.path.join(tmp, "data"), "--port", str(port),
                                  "--http-port", "0", "--no-broker", "--checkpoint-interval", str(self.interval)],
                                 stdout=logf, stderr=subprocess.STDOUT)
            conninfo = f"host=127.0.0.1 port={port} dbname=weir user=weir sslmode=disable"
            for _ in range(100):
                try:
                    c = psycopg2.connect(conninfo)
                    c.autocommit = True
                    return p, conninfo, c
                except psycopg2.OperationalError:
                    if p.poll() is not None:
                        break
                    time.sleep(0.1)
            p.kill()
            p.wait()
            shutil.rmtree(os.path.join(tmp, "data"), ignore_errors=True)
        raise RuntimeError("weir did not start: " + open(os.path.join(tmp, "server.log")).read()[-500:])

    def run(self, q, out):
        """Returns a result dict (cpu, wall, fresh, rows) or one with 'error'."""
        tmp = tempfile.mkdtemp(prefix="weir-sbs-", dir=self.work)
        p = None
        try:
            p, conninfo, c = self.start(tmp)
            with open(os.path.join(HERE, "nexmark", "sources.sql")) as f:
                src = f.read()
            for k, v in (("EVENTS", self.events), ("RATE", self.rate), ("PACE", "false")):
                src = src.replace("${%s}" % k, str(v))
            rc, msg = self.sql_file(conninfo, src)
            if rc:
                return {"error": "sources: " + msg.splitlines()[-1]}
            with open(os.path.join(HERE, "nexmark", q + ".sql")) as f:
                view_sql = f.read()
            view = re.findall(r"CREATE MATERIALIZED VIEW (\w+)", view_sql, re.I)[-1]
            samples = []
            stop = threading.Event()

            def poll():
                pc = psycopg2.connect(conninfo)
                pc.autocommit = True
                cur = pc.cursor()
                while not stop.is_set():
                    cur.execute("SELECT records_in FROM weir_views WHERE name = %s", (view,))
                    r = cur.fetchone()
                    samples.append((time.monotonic(), r[0] if r else 0))
                    time.sleep(POLL_S)
                pc.close()

            c0, t0 = proc_cpu(p.pid), time.monotonic()
            rc, msg = self.sql_file(conninfo, view_sql)
            if rc:
                return {"error": "not supported: " + msg.splitlines()[-1]}
            th = threading.Thread(target=poll)
            th.start()
            cur = c.cursor()
            try:
                while True:
                    try:
                        cur.execute("FLUSH")
                        break
                    except psycopg2.errors.QueryCanceled:  # 57014: timed out after 60 s, keep waiting
                        pass
                t1 = time.monotonic()
                c1 = proc_cpu(p.pid)
            finally:
                stop.set()
                th.join()
            cur.execute("SELECT running, records_in FROM weir_views WHERE name = %s", (view,))
            running, records = cur.fetchone()
            if not running:
                return {"error": "view stopped: " + open(os.path.join(tmp, "server.log")).read()[-300:]}
            before = [t for t, n in samples if n < records]
            fresh = t1 - (before[-1] if before else t0)
            with open(out, "w") as f:
                r = subprocess.run(["psql", conninfo, "-X", "--csv", "-t", "-c", f"SELECT * FROM {view}"],
                                   stdout=f, stderr=subprocess.PIPE, text=True)
            if r.returncode:
                return {"error": "export: " + r.stderr.strip()}
            return {"cpu": c1 - c0, "wall": t1 - t0, "fresh": fresh, "records_in": records}
        except Exception as e:  # noqa: BLE001 -- a failed run is a row of the table, not the end
            return {"error": str(e)}
        finally:
            if p:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# The reference engines: load the CSVs + compute the answer once.


def run_duckdb(work, csvs, q, out):
    tables, sel = query("duckdb", q)
    spec = {"tables": [[t, create_table("duckdb", t), csvs[t]] for t in tables], "query": sel, "out": out}
    path = os.path.join(work, "duckdb_spec.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    r = subprocess.run(["node", os.path.join(HERE, "duckdb_run.mjs"), path], capture_output=True, text=True)
    if r.returncode:
        return {"error": (r.stderr.strip().splitlines() or ["node failed"])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


class Postgres:
    def __init__(self, work):
        self.dir = os.path.join(work, "pg")
        os.makedirs(self.dir)
        url = subprocess.run([os.path.join(ROOT, "scripts", "pg-tmp.sh"), "start", self.dir, str(free_port())],
                             capture_output=True, text=True, check=True).stdout.strip()
        try:
            self.conn = psycopg2.connect(url)
            self.conn.autocommit = True
            with open(os.path.join(self.dir, "pgdata", "postmaster.pid")) as f:
                self.postmaster = int(f.readline())
            cur = self.conn.cursor()
            cur.execute("SELECT version()")
            self.version = cur.fetchone()[0].split(" on ")[0]
        except (psycopg2.Error, OSError):
            subprocess.run([os.path.join(ROOT, "scripts", "pg-tmp.sh"), "stop", self.dir], capture_output=True)
            raise

    def cluster_cpu(self):
        """CPU seconds of the postmaster and all its children (backends and background workers)."""
        total = proc_cpu(self.postmaster)
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == self.postmaster:
                            total += proc_cpu(int(d))
                except (OSError, ValueError, IndexError):
                    pass
        return total

    def run(self, csvs, q, out):
        tables, sel = query("postgresql", q)
        cur = self.conn.cursor()
        try:
            for t in ["r"] + tables:
                cur.execute(f"DROP TABLE IF EXISTS {t}")
            cur.execute("CHECKPOINT")
            c0, t0 = self.cluster_cpu(), time.monotonic()
            for t in tables:
                cur.execute(create_table("postgresql", t))
                cur.execute(f"COPY {t} FROM %s WITH (FORMAT csv)", (csvs[t],))
            cur.execute(f"CREATE TABLE r AS {sel}")
            t1 = time.monotonic()
            c1 = self.cluster_cpu()
            with open(out, "w") as f:
                cur.copy_expert("COPY r TO STDOUT WITH (FORMAT csv)", f)
            return {"cpu": c1 - c0, "wall": t1 - t0}
        except psycopg2.Error as e:
            return {"error": str(e).strip().splitlines()[0]}

    def close(self):
        self.conn.close()
        subprocess.run([os.path.join(ROOT, "scripts", "pg-tmp.sh"), "stop", self.dir], capture_output=True)


def run_sqlite(work, csvs, q, out):
    tables, sel = query("sqlite", q)
    db = os.path.join(work, "ref.db")
    if os.path.exists(db):
        os.unlink(db)
    script = "PRAGMA journal_mode = OFF;\nPRAGMA synchronous = OFF;\n"
    for t in tables:
        script += create_table("sqlite", t) + ";\n"
    script += ".mode csv\n" + "".join(f".import '{csvs[t]}' {t}\n" for t in tables)
    script += f"CREATE TABLE r AS {sel};\n"
    t0 = time.monotonic()
    p = subprocess.Popen(["sqlite3", "-bail", db], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    p.stdin.write(script)
    p.stdin.close()
    _, status, ru = os.wait4(p.pid, 0)
    t1 = time.monotonic()
    err = p.stderr.read().strip()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode or err:
        return {"error": (err.splitlines() or ["sqlite3 failed"])[0]}
    with open(out, "w") as f:
        subprocess.run(["sqlite3", "-csv", db, "SELECT * FROM r"], stdout=f, check=True)
    os.unlink(db)
    return {"cpu": ru.ru_utime + ru.ru_stime, "wall": t1 - t0}


# ---------------------------------------------------------------------------------------------


def kfmt(x):
    if x is None:
        return "-"
    return f"{x / 1e6:.2f}M" if x >= 999.5e3 else f"{x / 1e3:.0f}K"


def rfmt(rate):
    """A rate as 10M/s, 10K/s or 250/s."""
    for div, unit in ((1000000, "M"), (1000, "K")):
        if rate >= div and rate % div == 0:
            return f"{rate // div}{unit}/s"
    return f"{rate}/s"


def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} cores ({model}), load {os.getloadavg()[0]:.2f}"


def main():
    ap = argparse.ArgumentParser(description="see bench/side_by_side.sh")
    ap.add_argument("--weir", required=True)
    ap.add_argument("--events", type=int, default=2000000)
    ap.add_argument("--rates", default="10000000 10000")
    ap.add_argument("--queries", default=QUERIES)
    ap.add_argument("--engines", default="weir duckdb postgresql sqlite")
    ap.add_argument("--checkpoint-interval", type=int, default=1000)
    ap.add_argument("--keep", help="keep the CSVs and answers in this directory")
    a = ap.parse_args()
    engines = a.engines.split()
    refs = [e for e in REFS if e in engines]
    work = a.keep or tempfile.mkdtemp(prefix="weir-sbs-")
    os.makedirs(work, exist_ok=True)
    os.chmod(work, 0o755)  # PostgreSQL (as user postgres when run as root) reads the CSVs
    failed = False
    pg = None
    try:
        versions = []
        if "postgresql" in engines:
            try:
                pg = Postgres(work)
                versions.append(pg.version)
            except (subprocess.CalledProcessError, psycopg2.Error, OSError) as e:
                # Not the end of the comparison: its column says fail and the status is 1.
                log(f"# PostgreSQL did not start: {e}")
                failed = True
        if "sqlite" in engines:
            versions.append("SQLite " + subprocess.run(["sqlite3", "--version"], capture_output=True,
                                                       text=True).stdout.split()[0])
        rates = [int(r) for r in a.rates.split()]
        rows, notes = [], []
        for rate in rates:
            csvs = {}
            for t in TABLES:
                csvs[t] = os.path.join(work, f"{t}.csv")
                with open(csvs[t], "w") as f:
                    subprocess.run([a.weir, "nexmark", "--table", t, "--events", str(a.events), "--rate", str(rate),
                                    "--format", "csv"], stdout=f, check=True)
                os.chmod(csvs[t], 0o644)
            print(f"# {a.events} events at {rate} events/s of event time "
                  f"({a.events / rate:g} s of event time); {machine()} at the start", flush=True)
            weir = Weir(a.weir, work, a.events, rate, a.checkpoint_interval)
            for q in a.queries.split():
                res = {}
                for e in engines:
                    out = os.path.join(work, f"{q}.{rate}.{e}.csv")
                    log(f"{q} rate {rate}: {e} ...")
                    if e == "weir":
                        r = weir.run(q, out)
                    elif query(e, q) is None:
                        r = {"error": "no query written"}
                    elif e == "duckdb":
                        r = run_duckdb(work, csvs, q, out)
                        if "version" in r and not any(v.startswith("DuckDB") for v in versions):
                            versions.append("DuckDB " + r["version"])
                    elif e == "postgresql":
                        r = pg.run(csvs, q, out) if pg else {"error": "PostgreSQL did not start"}
                    else:
                        r = run_sqlite(work, csvs, q, out)
                    r["out"] = out
                    res[e] = r
                ref = next((e for e in refs if "error" not in res[e]), None)
                ref_ans = read_answer(res[ref]["out"]) if ref else None
                for e in engines:
                    r = res[e]
                    if "error" in r:
                        failed = True
                        notes.append(f"{q} at {rfmt(rate)} {e}: {r['error']}")
                        continue
                    r["evs"] = a.events / max(r["cpu"], 1.0 / HZ)
                    if e != ref and ref:
                        d = compare(read_answer(r["out"]), ref_ans)
                        if d:
                            r["differs"] = True
                            failed = True
                            notes.append(f"{q} at {rfmt(rate)} {e} differs from {ref}: {d}")
                rows.append((q, rate, res, ref))
        # One table: each query at each rate, side by side.
        order = {q: i for i, q in enumerate(a.queries.split())}
        rows.sort(key=lambda x: (order[x[0]], rates.index(x[1])))
        print("# events/s per CPU-second: weir = server process, checkpoints every "
              f"{a.checkpoint_interval} ms; references = load + query")
        hdr = ["query", "rate"] + [f"{e} ev/s" for e in engines]
        if "weir" in engines and "duckdb" in engines:
            hdr.append("weir/duckdb")
        if "weir" in engines:
            hdr += ["weir fresh ms"]
        hdr.append("answers")
        print("| " + " | ".join(hdr) + " |")
        print("|" + "---|" * len(hdr))
        for q, rate, res, ref in rows:
            cells = [q, rfmt(rate)]
            for e in engines:
                r = res[e]
                cells.append("fail" if "error" in r else kfmt(r["evs"]) + ("!" if r.get("differs") else ""))
            if "weir" in engines and "duckdb" in engines:
                w, d = res["weir"], res["duckdb"]
                ok = "evs" in w and "evs" in d
                cells.append(f"{w['evs'] / d['evs']:.2f}x" if ok else "-")
            if "weir" in engines:
                cells.append(f"{res['weir']['fresh'] * 1000:.0f}" if "fresh" in res["weir"] else "-")
            bad = [e for e in engines if res[e].get("differs") or "error" in res[e]]
            if not ref:
                cells.append("not checked (no reference engine ran)" + (", see " + " ".join(bad) if bad else ""))
            else:
                cells.append("ref " + ref + (", see " + " ".join(bad) if bad else ", all same"))
            print("| " + " | ".join(cells) + " |")
        for n in notes:
            print(f"- {n}")
        print(f"# {'; '.join(versions + [f'load average at the end {os.getloadavg()[0]:.2f}'])}")
    finally:
        if pg:
            pg.close()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
