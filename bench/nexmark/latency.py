#!/usr/bin/python3
"""latency.py: Nexmark latency from event time to output, and freshness, at a fixed input rate.

    bench/nexmark/latency.py [--weir PATH] [--rate R] [--seconds S] [--warmup W]
                             [--queries "q0 q7"] [--checkpoint-interval MS]

Throughput (run.sh) runs the generator as fast as weir reads. Latency needs event time to be wall
time: here the three Nexmark sources are paced (`nexmark.pace = 'true'`), so an event's
date_time is the moment the generator releases it, at --rate events/s, below capacity. For each
query a fresh server (no broker, --checkpoint-interval, 1 s by default) gets the sources and the
query's view; then, for --seconds after --warmup:

- row latency: a SUBSCRIBE cursor (no snapshot) receives every change of the view; for each
  inserted row that has timestamp columns, latency = the time the client receives the row minus
  the latest of them. Changes are sent as they are applied (a later progress row says when their
  epoch is durable: a consumer that waits for it adds up to one checkpoint interval). Rows of a
  query that emits on window close carry window bounds, so its latency includes the wait for the
  window to close (what a user of the view sees); q5 and q7 as written emit changes as windows
  fill. Queries whose rows carry no time (q2, q3, q4, q5) show "-".
- freshness lag: every 100 ms, now minus the newest event time the view has consumed
  (`weir_watermarks.max_event_time`, over the query's views): how far its state is behind the input,
  whatever the query; ad hoc reads see that state at once.

Prints one row per query: events/s actually generated, changes/s out, row latency p50/p99/max
(ms), freshness lag p50/p99/max (ms), and peak RSS.
"""
import argparse
import datetime
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

try:
    import psycopg2
except ImportError:
    sys.exit("latency.py needs python3-psycopg2 (scripts/deps.sh installs it); run it with /usr/bin/python3")

HERE = os.path.dirname(os.path.abspath(__file__))
EPOCH = datetime.datetime(1970, 1, 1)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def pct(sorted_vals, p):
    if not sorted_vals:
        return None
    return sorted_vals[min(len(sorted_vals) - 1, int(len(sorted_vals) * p / 100.0))]


def fmt(v):
    return "-" if v is None else "%.0f" % v


def subst(text, env):
    return re.sub(r"\$\{(\w+)\}", lambda m: str(env[m.group(1)]), text)


def connect(port):
    deadline = time.time() + 30
    while True:
        try:
            c = psycopg2.connect(host="127.0.0.1", port=port, dbname="weir", user="weir", connect_timeout=1)
            c.autocommit = True
            return c
        except psycopg2.Error:
            if time.time() > deadline:
                raise
            time.sleep(0.1)


def peak_rss_mib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def run_query(a, q):
    tmp = tempfile.mkdtemp(prefix="weir-latency-", dir="/tmp")
    port = free_port()
    log = open(os.path.join(tmp, "server.log"), "w")
    srv = subprocess.Popen([a.weir, "--data-dir", os.path.join(tmp, "data"), "--port", str(port), "--http-port", "0",
                            "--no-broker", "--checkpoint-interval", str(a.checkpoint_interval)],
                           stdout=log, stderr=subprocess.STDOUT)
    try:
        conn = connect(port)
        cur = conn.cursor()
        events = int(a.rate * (a.warmup + a.seconds + 5))
        env = {"EVENTS": events, "RATE": a.rate, "PACE": "true"}
        with open(os.path.join(HERE, "sources.sql")) as f:
            cur.execute(subst(f.read(), env))
        with open(os.path.join(HERE, q + ".sql")) as f:
            text = f.read()
        view = re.findall(r"CREATE MATERIALIZED VIEW (\w+)", text, re.I)[-1]
        cur.execute(subst(text, env))

        sub = connect(port)
        sub.autocommit = False
        scur = sub.cursor()
        scur.execute("DECLARE c CURSOR FOR SUBSCRIBE %s WITH (snapshot = false)" % view)
        t_start = time.time() + a.warmup
        t_end = t_start + a.seconds
        lat, lag = [], []
        n_changes = [0]
        stop = threading.Event()

        def sample():
            mon = connect(port)
            mcur = mon.cursor()
            while not stop.is_set():
                mcur.execute("SELECT max(max_event_time) FROM weir_watermarks")  # views over views have none
                newest = mcur.fetchone()[0]
                now = time.time()
                if newest is not None and t_start <= now < t_end:
                    lag.append((now - (newest - EPOCH).total_seconds()) * 1000.0)
                time.sleep(0.1)
            mon.close()

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        ts_cols = None
        while time.time() < t_end:
            scur.execute("FETCH 10000 c WITH (timeout = '100ms')")
            rows = scur.fetchall()
            now = time.time()
            if ts_cols is None and scur.description:
                ts_cols = []
            for r in rows:
                if not (t_start <= now < t_end):
                    continue
                n_changes[0] += 1
                if r[1] <= 0:
                    continue
                times = [v for v in r[2:] if isinstance(v, datetime.datetime)]
                if times:
                    newest = max(times)
                    if newest.tzinfo is not None:
                        newest = newest.astimezone(datetime.timezone.utc).replace(tzinfo=None)
                    lat.append((now - (newest - EPOCH).total_seconds()) * 1000.0)
        stop.set()
        sampler.join()
        rss = peak_rss_mib(srv.pid)
        lat.sort()
        lag.sort()
        print("%-6s %9d %10.0f %8s %8s %8s %8s %8s %8s %8.0f" % (
            q, a.rate, n_changes[0] / a.seconds, fmt(pct(lat, 50)), fmt(pct(lat, 99)), fmt(lat[-1] if lat else None),
            fmt(pct(lag, 50)), fmt(pct(lag, 99)), fmt(lag[-1] if lag else None), rss))
        sys.stdout.flush()
        sub.close()
        conn.close()
    finally:
        srv.terminate()
        try:
            srv.wait(timeout=20)
        except subprocess.TimeoutExpired:
            srv.kill()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--weir", help="a weir binary (default: build ./build with scripts/build.sh and use it)")
    p.add_argument("--rate", type=int, default=50000, help="events/s of the paced generator (all three streams)")
    p.add_argument("--seconds", type=float, default=20.0, help="measured seconds per query")
    p.add_argument("--warmup", type=float, default=15.0, help="seconds before measuring (windows fill, first closes)")
    p.add_argument("--queries", default="q0 q1 q2 q3 q4 q5 q7 q8")
    p.add_argument("--checkpoint-interval", type=int, default=1000)
    a = p.parse_args()
    if not a.weir:
        root = os.path.normpath(os.path.join(HERE, "..", ".."))
        if subprocess.run([os.path.join(root, "scripts", "build.sh")]).returncode:
            sys.exit(2)
        a.weir = os.path.join(root, "build", "server", "weir")
    print("# weir Nexmark latency: paced at %d events/s, %g s measured after %g s warm-up, checkpoints every %d ms; "
          "%d cores; %s" % (a.rate, a.seconds, a.warmup, a.checkpoint_interval, os.cpu_count(), a.weir))
    print("# row latency: receipt at a SUBSCRIBE client minus the row's latest timestamp column (ms);"
          " lag: now minus the newest event time the view consumed (ms)")
    print("%-6s %9s %10s %8s %8s %8s %8s %8s %8s %8s" % ("query", "events/s", "changes/s", "lat_p50", "lat_p99",
                                                       "lat_max", "lag_p50", "lag_p99", "lag_max", "peak_MiB"))
    for q in a.queries.split():
        if not os.path.exists(os.path.join(HERE, q + ".sql")):
            print("%s: no such query file" % q, file=sys.stderr)
            continue
        try:
            run_query(a, q)
        except psycopg2.Error as e:
            print("%-6s failed: %s" % (q, str(e).strip().splitlines()[0]))


if __name__ == "__main__":
    main()
