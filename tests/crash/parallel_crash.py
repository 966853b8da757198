#!/usr/bin/python3
"""parallel_crash.py: parallel views (streaming_parallelism 2 and 3) survive kill -9 exactly.

A source over a 4-partition topic feeds seven views planned with parallelism 2 or 3 (each
instance keeps its own state tables, its part of the view's rows and its share of the
partitions' offsets): keyed and windowed aggregations, EMIT ON WINDOW CLOSE, an interval join,
two-phase aggregations and a join with a broadcast side. Rows are
produced in bursts while the server is SIGKILLed several times and restarted on the same data
directory; at the end every view must equal what an oracle computes in Python from the rows
produced: nothing lost, nothing counted twice, in any instance.

    /usr/bin/python3 tests/crash/parallel_crash.py --weir build/server/weir [--rows N] [--kills N] [--seed N]
                                                   [--self-test: one row produced twice, so it must fail]

Exit status 0 when every view matches; the last line is "N passed, N failed".
"""
import argparse
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Stack  # noqa: E402

try:
    from confluent_kafka import Producer
except ImportError:
    sys.exit("parallel_crash.py needs python3-confluent-kafka (scripts/deps.sh)")

PARTS = 4
KEYS = 13
BASE_US = 1767225600 * 1000000  # 2026-01-01 00:00:00 UTC


def ts_text(us):
    frac = ".%06d" % (us % 1000000) if us % 1000000 else ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(us // 1000000)) + frac


class Server(Stack):
    """Stack whose server can be killed and restarted on the same data directory."""

    def kill_server(self):
        srv = self.procs.pop()
        srv.send_signal(signal.SIGKILL)
        srv.wait()
        try:
            self.conn.close()
        except Exception:
            pass

    def restart(self):
        with open(self.log_path, "a") as log:
            log.write("===== parallel_crash: restart\n")
        self._start_server()


def make_rows(n, rng):
    """(partition, k, v, ts_us): times rise 40 ms per row with up to 1 s of disorder (the
    watermark delay is 3 s, so no row is ever late), key k goes to partition k % PARTS."""
    rows = []
    for i in range(n):
        k = rng.randrange(KEYS)
        t = BASE_US + i * 40000 - rng.randrange(0, 1000000)
        rows.append((k % PARTS, k, rng.randrange(1, 1000), t))
    # Last, one row per partition an hour later: every window of the real data closes.
    for p in range(PARTS):
        rows.append((p, p, 0, BASE_US + n * 40000 + 3600 * 1000000))
    return rows


def produce(kafka, topic, rows, rng, done):
    p = Producer({"bootstrap.servers": kafka, "enable.idempotence": True, "linger.ms": 5})
    i = 0
    while i < len(rows):
        burst = rng.randrange(100, 600)
        for part, k, v, t in rows[i:i + burst]:
            p.produce(topic, ('{"k": %d, "v": %d, "ts": "%s"}' % (k, v, ts_text(t))).encode(), partition=part)
        p.flush()
        i += burst
        time.sleep(rng.uniform(0.05, 0.3))
    p.flush()
    done.set()


def oracle(rows):
    per_k = defaultdict(lambda: [0, 0])
    tumble = defaultdict(lambda: [0, 0])
    by_k = defaultdict(list)
    for _, k, v, t in rows:
        per_k[k][0] += 1
        per_k[k][1] += v
        ws = t - (t - BASE_US) % 10000000
        tumble[(ts_text(ws), k)][0] += 1
        tumble[(ts_text(ws), k)][1] += v
        by_k[k].append(t)
    pairs = {}
    for k, ts in by_k.items():
        ts.sort()
        n, lo = 0, 0
        for hi, t in enumerate(ts):
            while ts[lo] < t - 1000000:
                lo += 1
            n += hi - lo + 1  # b.ts in [a.ts - 1 s, a.ts], a itself included
        # ties: rows with equal times pair both ways
        c = Counter(ts)
        n += sum(m * (m - 1) // 2 for m in c.values())
        pairs[k] = n
    return {
        "per_k": sorted((k, c, s) for k, (c, s) in per_k.items()),
        "tumble": sorted((w, k, c, s) for (w, k), (c, s) in tumble.items()),
        "pairs": sorted(pairs.items()),
    }


VIEWS = [
    ("per_k", 2, "SELECT k, count(*) AS n, sum(v) AS s FROM src GROUP BY k",
     "SELECT k, n, s FROM per_k ORDER BY k"),
    ("tumble", 3, "SELECT window_start, k, count(*) AS n, sum(v) AS s FROM TUMBLE(src, ts, INTERVAL '10' SECOND) "
                  "GROUP BY window_start, window_end, k",
     "SELECT window_start::text, k, n, s FROM tumble ORDER BY 1, 2"),
    ("eowc", 2, "SELECT window_start, k, count(*) AS n, sum(v) AS s FROM TUMBLE(src, ts, INTERVAL '10' SECOND) "
                "GROUP BY window_start, window_end, k EMIT ON WINDOW CLOSE",
     "SELECT window_start::text, k, n, s FROM eowc ORDER BY 1, 2"),
    ("pairs", 3, "SELECT a.k, count(*) AS n FROM src a JOIN src2 b ON a.k = b.k "
                 "AND b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts GROUP BY a.k",
     "SELECT k, n FROM pairs ORDER BY k"),
    # Two-phase aggregations (planner/plan_dist.c): a count per window (split by default) and
    # per_k forced into two phases; each instance's local state and the global one restart
    # from the same checkpoint.
    ("wsum", 3, "SELECT window_start, count(*) AS n, sum(v) AS s FROM TUMBLE(src, ts, INTERVAL '10' SECOND) "
                "GROUP BY window_start EMIT ON WINDOW CLOSE",
     "SELECT window_start::text, n, s FROM wsum ORDER BY 1"),
    ("per_k2", 2, "SELECT k, count(*) AS n, sum(v) AS s FROM src GROUP BY k",
     "SELECT k, n, s FROM per_k2 ORDER BY k"),
    # Nexmark q5's shape: the counts per (window, k) joined with the max count per window, whose
    # one row per window is broadcast to every instance (each instance's copy restarts too).
    ("hot", 2, "SELECT c.window_start, c.k, c.n FROM (SELECT window_start, k, count(*) AS n "
               "FROM TUMBLE(src, ts, INTERVAL '10' SECOND) GROUP BY window_start, window_end, k) c "
               "JOIN (SELECT window_start, max(n) AS m FROM (SELECT window_start, k, count(*) AS n "
               "FROM TUMBLE(src, ts, INTERVAL '10' SECOND) GROUP BY window_start, window_end, k) x "
               "GROUP BY window_start) mx ON c.window_start = mx.window_start AND c.n >= mx.m",
     "SELECT window_start::text, k, n FROM hot ORDER BY 1, 2"),
]
# More view options, after streaming_parallelism.
OPTIONS = {"per_k2": ", agg_phase_strategy = 'two_phase'"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    ap.add_argument("--rows", type=int, default=6000)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    ap.add_argument("--self-test", action="store_true",
                    help="produce one row twice behind the oracle's back: the run must then fail")
    a = ap.parse_args()
    print("seed", a.seed)
    rng = random.Random(a.seed)
    rows = make_rows(a.rows, rng)
    passed = failed = 0
    st = Server(a.weir, prefix="weir-parcrash-")
    try:
        topic = "src_%d" % a.seed
        for name in ("src", "src2"):
            st.q(f"CREATE SOURCE {name} (k BIGINT, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) "
                 f"WITH (connector = 'kafka', topic = '{topic}', properties.bootstrap.server = '{st.kafka}', "
                 f"topic.partitions = '{PARTS}')")
        for name, par, sql, _ in VIEWS:
            st.q(f"CREATE MATERIALIZED VIEW {name} WITH (streaming_parallelism = {par}{OPTIONS.get(name, '')}) "
                 f"AS {sql}")
        done = threading.Event()
        sent = rows + [rows[0]] if a.self_test else rows
        prod = threading.Thread(target=produce, args=(st.kafka, topic, sent, random.Random(a.seed + 1), done))
        prod.start()
        for i in range(a.kills):
            time.sleep(rng.uniform(0.4, 2.0))
            st.kill_server()
            st.restart()
            print("kill %d: restarted" % (i + 1))
        prod.join()
        st.kill_server()
        st.restart()
        st.q("FLUSH")
        want = oracle(rows)
        want["per_k2"] = want["per_k"]
        per_w = {}
        for w, _, c, s in want["tumble"]:
            n0, s0 = per_w.get(w, (0, 0))
            per_w[w] = (n0 + c, s0 + s)
        want["wsum"] = sorted((w, c, s) for w, (c, s) in per_w.items())
        top = {}
        for w, _, c, _ in want["tumble"]:
            top[w] = max(top.get(w, 0), c)
        want["hot"] = sorted((w, k, c) for w, k, c, _ in want["tumble"] if c == top[w])
        for name, par, _, query in VIEWS:
            got = [tuple(r) for r in st.q(query)]
            exp = want["tumble" if name == "eowc" else name]
            if name in ("eowc", "wsum"):
                # The closing rows an hour later leave their own window open.
                last = max(w for w, *_ in exp)
                exp = [r for r in exp if r[0] != last]
            exp = [tuple(r) for r in exp]
            missing = len(Counter(exp) - Counter(got))
            extra = len(Counter(got) - Counter(exp))
            ok = missing == 0 and extra == 0
            print("%-7s P=%d rows %d missing %d extra/wrong %d %s" % (name, par, len(got), missing, extra,
                                                                     "ok" if ok else "FAILED"))
            passed += ok
            failed += not ok
        for name, running in st.q("SELECT name, running FROM weir_views"):
            if not running:
                print("view %s is not running" % name)
                failed += 1
    except Exception as e:  # a harness failure counts as a failure, with the log kept
        print("error:", e)
        failed += 1
    finally:
        if failed:
            subprocess.run(["tail", "-30", st.log_path])
        st.stop()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
