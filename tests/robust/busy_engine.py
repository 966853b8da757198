#!/usr/bin/python3
"""busy_engine.py --weir PATH: a long ad hoc query can be cancelled, and monitoring never waits on it.

Issue 21 #6. An ad hoc query holds the engine while it computes; a join without an equality key
over 6,000 x 6,000 rows takes minutes. Before: statement_timeout = '2s' ended it only after
87 s (cancel was looked at only between result rows, and a count sends one), and /metrics
waited 156 s behind it. Checks:
- statement_timeout = '2s' ends that query within a few seconds (57014, "statement timeout");
- a client's CancelRequest ends it within a few seconds (57014, "user request");
- during such a query /metrics answers within 3 s, with weir_metrics_engine_busy 1 and the
  engine's figures as last read; /api/status answers 200 with X-Weir-Stale-Seconds;
- afterwards /metrics is current again (weir_metrics_engine_busy 0) and the server serves SQL.

Prints TAP; exits 1 if a check failed.
"""
import argparse
import os
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Stack, Tap  # noqa: E402
import psycopg2  # noqa: E402

tap = Tap()
LONG = "SELECT count(*) FROM t a, t b WHERE a.v + b.v > 3"


def get(url, timeout=30):
    t0 = time.time()
    r = urllib.request.urlopen(url, timeout=timeout)
    return r.read().decode(), dict(r.headers), time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    weir = ap.parse_args().weir
    with Stack(weir, http=True) as st:
        st.q("CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)")
        for i in range(0, 6000, 1000):
            st.q("INSERT INTO t VALUES " + ",".join("(%d,%d)" % (j, j % 7) for j in range(i, i + 1000)))
        base = "http://127.0.0.1:%d" % st.http_port
        get(base + "/metrics")
        get(base + "/api/status")

        c = psycopg2.connect(host="127.0.0.1", port=st.port, dbname="weir", user="weir")
        c.autocommit = True
        cur = c.cursor()
        cur.execute("SET statement_timeout = '2s'")
        t0 = time.time()
        try:
            cur.execute(LONG)
            tap(False, "statement_timeout ends a long join", "it finished")
        except psycopg2.Error as e:
            took = time.time() - t0
            tap(e.pgcode == "57014" and "statement timeout" in str(e) and took < 10,
                "statement_timeout = '2s' ends a long join within seconds (%.1f s)" % took, str(e))
        cur.execute("SET statement_timeout = 0")

        out = {}

        def run():
            t1 = time.time()
            try:
                cur.execute(LONG)
                out["r"] = "finished"
            except psycopg2.Error as e:
                out["r"] = e
            out["took"] = time.time() - t1
        th = threading.Thread(target=run, daemon=True)
        th.start()
        time.sleep(1.5)
        body, _, took = get(base + "/metrics")
        busy = [ln for ln in body.splitlines() if ln.startswith("weir_metrics_engine_busy ")]
        tap(took < 3 and busy == ["weir_metrics_engine_busy 1"] and "weir_checkpoints_total" in body,
            "during the query /metrics answers at once (%.2f s) with the engine's last figures" % took, repr(busy))
        _, headers, took = get(base + "/api/status")
        tap(took < 3 and "X-Weir-Stale-Seconds" in headers, "/api/status too, marked stale (%.2f s)" % took,
            repr(headers))
        c.cancel()
        th.join(30)
        r = out.get("r")
        tap(isinstance(r, psycopg2.Error) and r.pgcode == "57014" and "user request" in str(r) and out["took"] < 10,
            "a CancelRequest ends it within seconds (%.1f s)" % out.get("took", -1), repr(r))
        body, _, _ = get(base + "/metrics")
        tap("weir_metrics_engine_busy 0" in body, "afterwards /metrics is current again")
        tap(st.q("SELECT count(*) FROM t") == [(6000,)], "the server serves SQL")
        c.close()
    tap.end()


if __name__ == "__main__":
    main()
