#!/usr/bin/python3
"""sink_query_crash.py: CREATE SINK ... AS query killed between its two catalog entries.

CREATE SINK s AS query writes the query's view (s$query) first, then the sink. The server is
killed right after the first (WEIR_CRASH_AT=sink_query_view:1). At the next start the view has
no sink: it must be dropped with its state (nothing could read it), logged, and the name must
be free for the statement to be run again; the sink then runs and survives a restart.

    /usr/bin/python3 tests/robust/sink_query_crash.py --weir build/server/weir

Prints TAP; exits 1 on a failure.
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
try:
    import psycopg2
    from weirtest import Stack
except ImportError as e:  # pragma: no cover
    sys.exit(f"sink_query_crash.py: {e}: run it with /usr/bin/python3 (python3-psycopg2)")

n = failed = 0


def check(cond, what):
    global n, failed
    n += 1
    if not cond:
        failed += 1
    print(f"{'ok' if cond else 'not ok'} {n} - {what}", flush=True)


def restart(s, env_extra=None):
    """Stops s's server (if it still runs) and starts it again on the same data directory and port."""
    srv = s.procs[-1]
    if srv.poll() is None:
        srv.terminate()
        srv.wait(10)
    if s.conn is not None:
        try:
            s.conn.close()
        except psycopg2.Error:
            pass
    env = dict(os.environ)
    env.pop("WEIR_CRASH_AT", None)
    env.update(env_extra or {})
    log = open(s.log_path, "a")
    s.procs[-1] = subprocess.Popen(
        [s.weir, "serve", "--data-dir", os.path.join(s.tmp, "data"), "--port", str(s.port), "--kafka", s.kafka,
         "--no-broker", "--http-port", "0"], stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            s.conn = psycopg2.connect(host="127.0.0.1", port=s.port, dbname="weir", user="weir", connect_timeout=1)
            s.conn.autocommit = True
            return
        except psycopg2.Error:
            time.sleep(0.1)
    raise RuntimeError("weir did not come back")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    args = ap.parse_args()
    with Stack(args.weir, prefix="weir-sqc-") as s:
        s.q("CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT)")
        s.q("INSERT INTO t VALUES (1, 10), (2, 20)")
        restart(s, {"WEIR_CRASH_AT": "sink_query_view:1"})
        try:
            s.q("CREATE SINK s AS SELECT k, v FROM t WITH (connector = 'blackhole')")
            check(False, "the server died between the two entries")
        except psycopg2.Error:
            check(True, "the server died between the two entries")
        s.procs[-1].wait(10)
        restart(s)
        check(s.q("SELECT name FROM weir_views WHERE name = 's$query'") == [], "the sink's orphan query is dropped")
        check(s.q("SHOW SINKS") == [], "and there is no sink")
        with open(s.log_path) as f:
            check("dropping s$query: its sink is gone" in f.read(), "the drop is logged")
        s.q("CREATE SINK s AS SELECT k, v FROM t WITH (connector = 'blackhole')")
        check(s.q("SELECT name, view FROM weir_sinks") == [("s", "s$query")], "the name is free again")
        restart(s)
        check(s.q("SELECT name, view FROM weir_sinks") == [("s", "s$query")], "the sink and its query come back")
        check(s.q("SELECT name FROM weir_views WHERE name = 's$query'") == [("s$query",)], "with its view")
    print(f"1..{n}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
