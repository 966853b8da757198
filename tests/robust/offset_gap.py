#!/usr/bin/python3
"""offset_gap.py --weir PATH: a gap in a source's Kafka offsets is never skipped silently.

Issue 21 #2. The embedded broker keeps about 5 MiB per partition and deletes the oldest records
past that, as retention would. A view reads 10 records and is checkpointed; the server stops;
6 MiB more are produced, so records the view has not read are deleted; the server starts again.
Checks:
- on_offset_gap = 'fail' (the default): the view stops with 08P01 naming the partition and the
  offsets lost, in weir_views.last_error; FLUSH still finishes;
- ALTER SOURCE ... SET (on_offset_gap = 'skip') starts it again: it skips the gap, reads every
  record still kept, lists the gap in weir_source_errors (its first offset, and "skipped"), and
  /metrics counts it in weir_view_offset_gaps_total;
- a source created with on_offset_gap = 'skip' goes on by itself, with the gap listed;
- a bad on_offset_gap value is 22023.

Prints TAP; exits 1 if a check failed.
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Stack, Tap  # noqa: E402
import psycopg2  # noqa: E402

tap = Tap()
KCAT = "/usr/bin/kcat"


def produce(kafka, recs):
    subprocess.run([KCAT, "-P", "-b", kafka, "-t", "gap", "-p", "0"], input="\n".join(recs) + "\n", text=True,
                   check=True, timeout=120)


def flush_within(st, seconds):
    """FLUSH on its own connection; True if it answered (either way) within seconds."""
    done = []

    def run():
        try:
            c = psycopg2.connect(host="127.0.0.1", port=st.port, dbname="weir", user="weir")
            c.autocommit = True
            c.cursor().execute("FLUSH")
            c.close()
            done.append("ok")
        except psycopg2.Error as e:
            done.append(str(e))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    return bool(done)


def wait_for(fn, seconds=30):
    deadline = time.time() + seconds
    v = fn()
    while not v and time.time() < deadline:
        time.sleep(0.3)
        v = fn()
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    weir = ap.parse_args().weir
    with Stack(weir, http=True) as st:
        try:
            st.q("CREATE SOURCE bad (k BIGINT) WITH (connector = 'kafka', topic = 'gap', on_offset_gap = 'maybe') "
                 "FORMAT PLAIN ENCODE JSON")
            tap(False, "a bad on_offset_gap value is refused")
        except psycopg2.Error as e:
            tap(e.pgcode == "22023" and "on_offset_gap must be 'fail' or 'skip'" in str(e),
                "a bad on_offset_gap value is 22023", str(e))
        st.q("CREATE SOURCE s (k BIGINT, pad TEXT) WITH (connector = 'kafka', topic = 'gap', "
             "scan.startup.mode = 'earliest') FORMAT PLAIN ENCODE JSON")
        st.q("CREATE SOURCE s2 (k BIGINT, pad TEXT) WITH (connector = 'kafka', topic = 'gap', "
             "scan.startup.mode = 'earliest', on_offset_gap = 'skip') FORMAT PLAIN ENCODE JSON")
        st.q("CREATE MATERIALIZED VIEW v AS SELECT count(*) AS n, min(k) AS lo, max(k) AS hi FROM s")
        st.q("CREATE MATERIALIZED VIEW v2 AS SELECT count(*) AS n, min(k) AS lo, max(k) AS hi FROM s2")
        produce(st.kafka, ['{"k": %d, "pad": "x"}' % k for k in range(1, 11)])
        wait_for(lambda: st.q("FLUSH") is None and st.q("SELECT n FROM v") == [(10,)] and
                 st.q("SELECT n FROM v2") == [(10,)])
        tap(st.q("SELECT n, lo, hi FROM v") == [(10, 1, 10)], "the view read the first 10 records")
        st.q("CHECKPOINT")

        # Stop the server (not the broker), produce past the broker's ~5 MiB, start again.
        server = st.procs.pop()
        st.conn.close()
        server.terminate()
        server.wait(30)
        pad = "y" * 100000
        produce(st.kafka, ['{"k": %d, "pad": "%s"}' % (k, pad) for k in range(11, 81)])
        lo = subprocess.run([KCAT, "-Q", "-b", st.kafka, "-t", "gap:0:-2"], capture_output=True, text=True,
                            timeout=30).stdout
        first_kept = int(lo.split("offset")[-1].strip())
        tap(first_kept > 10, "the broker deleted records the view had not read (log start %d)" % first_kept, lo)
        st._start_server()

        def failed():
            r = st.q("SELECT running, last_error FROM weir_views WHERE name = 'v'")
            return r if r and not r[0][0] and r[0][1] else None
        r = wait_for(failed)
        msg = r[0][1] if r else ""
        tap(r is not None and "offsets 10 to %d of partition 0 of topic \"gap\" were deleted" % (first_kept - 1) in msg,
            "on_offset_gap = 'fail': the view stops, naming the partition and the offsets lost", repr(r))
        tap(flush_within(st, 30), "FLUSH finishes while the view is stopped by a gap")
        # Health endpoints (issue 20): alive, but not ready while a view is stopped.
        base = "http://127.0.0.1:%d" % st.http_port
        tap(urllib.request.urlopen(base + "/healthz", timeout=10).status == 200, "/healthz: 200")
        try:
            urllib.request.urlopen(base + "/readyz", timeout=10)
            tap(False, "/readyz: 503 while a view is stopped")
        except urllib.error.HTTPError as e:
            body = json.loads(e.read().decode())
            tap(e.code == 503 and body["ready"] is False and any("view v is not running" in w for w in body["not_ready"]),
                "/readyz: 503 naming the stopped view", repr(body))

        # The source created with 'skip' went on by itself.
        v2 = wait_for(lambda: st.q("FLUSH") is None and st.q("SELECT n, lo, hi FROM v2") == [(10 + 80 - first_kept, 1, 80)]
                      and st.q("SELECT n, lo, hi FROM v2"))
        tap(v2 == [(10 + 80 - first_kept, 1, 80)], "on_offset_gap = 'skip': the view reads every record still kept",
            repr(st.q("SELECT n, lo, hi FROM v2")))

        st.q("ALTER SOURCE s SET (on_offset_gap = 'skip')")
        v = wait_for(lambda: st.q("FLUSH") is None and st.q("SELECT n, lo, hi FROM v") == [(10 + 80 - first_kept, 1, 80)]
                     and st.q("SELECT n, lo, hi FROM v"))
        tap(v == [(10 + 80 - first_kept, 1, 80)], "ALTER SOURCE ... on_offset_gap = 'skip': the view goes on past the gap",
            repr(st.q("SELECT running, last_error FROM weir_views WHERE name = 'v'")) + repr(st.q("SELECT * FROM v")))
        errs = st.q("SELECT view, source, partition, record_offset, error FROM weir_source_errors ORDER BY view")
        tap(len(errs) == 2 and all(e[2] == 0 and e[3] == 10 and "skipped (on_offset_gap = 'skip'), continuing from "
                                   "offset %d" % first_kept in e[4] for e in errs),
            "weir_source_errors lists each view's gap: its first offset and what was done", repr(errs))
        body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % st.http_port, timeout=10).read().decode()
        gaps = sorted(ln for ln in body.splitlines() if ln.startswith("weir_view_offset_gaps_total{"))
        tap(gaps == ['weir_view_offset_gaps_total{view="v"} 1', 'weir_view_offset_gaps_total{view="v2"} 1'],
            "/metrics counts the gaps per view", repr(gaps))
        rss = [ln for ln in body.splitlines() if ln.startswith("process_resident_memory_bytes ")]
        tap(rss and int(rss[0].split()[1]) > 1000000 and 'weir_build_info{version="' in body and
            "process_open_fds " in body and "process_cpu_seconds_total " in body,
            "/metrics has weir_build_info and the process_* metrics", repr(rss))
        tap(urllib.request.urlopen(base + "/readyz", timeout=10).status == 200, "/readyz: 200 once every view runs")
        log = open(st.log_path).read()
        tap("were deleted before source \"s2\" read them" in log, "the log says so", log[-2000:])
        # The policy survives a restart (it is kept with the ALTER).
        server = st.procs.pop()
        st.conn.close()
        server.terminate()
        server.wait(30)
        st._start_server()
        opt = st.q("SELECT running FROM weir_views WHERE name = 'v'")
        tap(opt == [(True,)], "after a restart the view runs", repr(opt))
    tap.end()


if __name__ == "__main__":
    main()
