#!/usr/bin/python3
"""session_oracle.py: SESSION windows checked against two oracles on random logs.

Session windows are Flink's (docs/time.md "Session windows"): a row at ts opens
[ts, ts + gap); sessions that overlap or touch merge; a row is late only when the session it
forms after merging is late. Each round draws a random multiset of timestamps per key (whole
seconds and half seconds, duplicates included, so rows exactly `gap` apart are common),
writes them to one Kafka partition in an order with bounded disorder, and compares the
views (EMIT CHANGES and EMIT ON WINDOW CLOSE, over a bounded source so every session
closes; each counts rows and distinct values of a column) with:

- the batch oracle, for a watermark bound larger than the disorder (nothing is late): per
  key, sort the timestamps and cut where two neighbours are more than `gap` apart; each run
  is a session [first, last + gap) with its row count. It depends on the multiset only, not
  on the order or on any streaming rule;
- a streaming model written from the rules above, for a tight bound (0) with and without
  allowed lateness: the sessions, the dropped rows (late_rows), and ANALYZE LATENESS's
  dropped rows and session count for the same log.

    /usr/bin/python3 tests/sim/session_oracle.py --weir build/server/weir [--rounds N] [--seed S]

The last line of stdout is "N passed, N failed".
"""
import argparse
import datetime
import json
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
try:
    from confluent_kafka import Producer
    from weirtest import Stack
except ImportError as e:  # pragma: no cover
    sys.exit(f"session_oracle.py: {e}: run it with /usr/bin/python3 (python3-psycopg2, "
             "python3-confluent-kafka; scripts/deps.sh installs them)")

BASE = datetime.datetime(2026, 1, 1)
GAP = 5_000            # ms
DISORDER = 9_000       # a row arrives at most this much (event time) after later rows
N_KEYS = 4


def ts_text(ms):
    return (BASE + datetime.timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def norm(x):
    return int((x - BASE) / datetime.timedelta(milliseconds=1))


def generate(rng, n):
    """(k, ts_ms, u) in arrival order: event times over 5 minutes, in steps of 500 ms; u is
    one of a few values (count(DISTINCT u) per session)."""
    rows = [(rng.randrange(N_KEYS), rng.randrange(0, 600) * 500, rng.randrange(5)) for _ in range(n)]
    arrival = sorted((ts + rng.uniform(0, DISORDER), i) for i, (_, ts, _) in enumerate(rows))
    return [rows[i] for _, i in arrival]


def batch_oracle(rows):
    """{(k, start, end): (n, distinct u)}: sessions of the multiset, order ignored."""
    out = {}
    per_key = {}
    for k, ts, u in rows:
        per_key.setdefault(k, []).append((ts, u))
    for k, tss in per_key.items():
        tss.sort()
        first = last = tss[0][0]
        us = []
        for ts, u in tss:
            if ts - last > GAP:
                out[(k, first, last + GAP)] = (len(us), len(set(us)))
                first, us = ts, []
            last = ts
            us.append(u)
        out[(k, first, last + GAP)] = (len(us), len(set(us)))
    return out


def streaming_model(rows, bound, lateness):
    """({(k, start, end): (n, distinct u)}, dropped): the rules applied row by row, one
    partition."""
    held = {}          # k -> list of [start, end, us]
    done = []          # (k, start, end, us): sessions forgotten at end + lateness
    wm = None
    dropped = 0
    for k, ts, u in rows:
        mine = held.setdefault(k, [])
        joined = [s for s in mine if s[0] <= ts + GAP and ts <= s[1]]
        start = min([ts] + [s[0] for s in joined])
        end = max([ts + GAP] + [s[1] for s in joined])
        if wm is not None and end + lateness <= wm:
            dropped += 1
        else:
            for s in joined:
                mine.remove(s)
            mine.append([start, end, [u] + [x for s in joined for x in s[2]]])
        if wm is None or ts - bound > wm:
            wm = ts - bound
            for key, ss in held.items():
                for s in [s for s in ss if s[1] + lateness <= wm]:
                    ss.remove(s)
                    done.append((key, s[0], s[1], s[2]))
    out = {}
    for k, s, e, us in done + [(k, s[0], s[1], s[2]) for k, ss in held.items() for s in ss]:
        # Equal bounds twice (a forgotten session and a new one) would be one row of the view.
        n, d = out.get((k, s, e), (0, 0))
        out[(k, s, e)] = (n + len(us), d + len(set(us)))
    return out, dropped


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weir", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", type=int, default=150)
    ap.add_argument("--seed", type=int, default=17)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    passed = failed = 0

    def check(ok, label, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"ok - {label}")
        else:
            failed += 1
            print(f"not ok - {label}")
            for line in str(detail).splitlines()[:20]:
                print(f"#   {line}")

    w = None
    try:
        w = Stack(a.weir, prefix="weir-sess-")
        cases = [("loose", DISORDER + 1_000, 0), ("tight", 0, 0), ("tight_late", 0, 2_000)]
        rounds = []
        for rnd in range(a.rounds):
            rows = generate(rng, a.rows)
            topic = f"sess{rnd}"
            p = Producer({"bootstrap.servers": w.kafka, "linger.ms": 5})
            for k, ts, u in rows:
                p.produce(topic, json.dumps({"k": k, "ts": ts_text(ts), "u": u}).encode(), partition=0)
            if p.flush(30) != 0:
                raise RuntimeError("could not produce the rows")
            for name, bound, lateness in cases:
                src = f"s{rnd}_{name}"
                w.q(f"CREATE SOURCE {src} (k BIGINT, ts TIMESTAMP, u BIGINT, WATERMARK FOR ts AS ts - INTERVAL "
                    f"'{bound} milliseconds') WITH (connector = 'kafka', topic = '{topic}', "
                    f"properties.bootstrap.server = '{w.kafka}', scan.bounded.mode = 'latest')")
                allow = f" ALLOW LATENESS INTERVAL '{lateness} milliseconds'" if lateness else ""
                for emit in ("", " EMIT ON WINDOW CLOSE"):
                    view = f"v{rnd}_{name}_{'eowc' if emit else 'changes'}"
                    w.q(f"CREATE MATERIALIZED VIEW {view} AS SELECT k, window_start, window_end, count(*) AS n, "
                        f"count(DISTINCT u) AS d "
                        f"FROM SESSION({src}, ts, INTERVAL '{GAP} milliseconds') "
                        f"GROUP BY k, window_start, window_end{emit}{allow}")
                    rounds.append((rows, src, view, name, bound, lateness))
        w.q("FLUSH")
        for rows, src, view, name, bound, lateness in rounds:
            got = {}
            for k, ws, we, n, d in w.q(f"SELECT k, window_start, window_end, n, d FROM {view}"):
                key = (k, norm(ws), norm(we))
                n0, d0 = got.get(key, (0, 0))
                got[key] = (n0 + n, d0 + d)
            n_late = w.q(f"SELECT late_rows FROM weir_views WHERE name = '{view}'")[0][0]
            if name == "loose":
                want, want_late = batch_oracle(rows), 0
                what = "batch oracle"
            else:
                want, want_late = streaming_model(rows, bound, lateness)
                what = "streaming model"
            diff = sorted(set(got.items()) ^ set(want.items()))
            check(got == want, f"{view}: sessions equal the {what} ({len(want)} sessions)",
                  "\n".join(f"{'view' if x in got.items() else 'oracle'}: {x}" for x in diff))
            check(n_late == want_late, f"{view}: late_rows {n_late}, {what} {want_late}")
            if name != "loose" and view.endswith("_changes"):
                # ANALYZE LATENESS replays the log by the same rules.
                res = w.q(f"ANALYZE LATENESS ON {src} FOR SESSION('{GAP}ms') PARTITION BY k "
                          f"BOUNDS ('{bound}ms') LATENESS ('{lateness}ms') WITH (report = 'candidates')")
                _, _, n_rows, _, _, dropped, windows = res[0][:7]
                check(n_rows == len(rows) and dropped == want_late and windows == len(want),
                      f"{src}: ANALYZE LATENESS drops {dropped} and counts {windows} sessions "
                      f"(model: {want_late}, {len(want)})")
    except Exception as e:  # a harness failure is a failed test, with the reason
        check(False, f"harness: {e}")
    finally:
        if w:
            w.stop()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
