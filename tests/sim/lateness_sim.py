#!/usr/bin/python3
"""lateness_sim.py: the engine's event-time semantics checked against an independent
reference simulation.

It generates out-of-order events with a known delay distribution (most rows a little
late, a share of stragglers very late), writes them to one Kafka partition in arrival
order, and runs the same windowed count in weir for several (watermark bound, allowed
lateness) pairs. For each pair a plain Python model of DESIGN.md's rules (the watermark
in effect for a row is max(ts) - bound over the rows before it; a row is late for its
window when end + lateness <= that watermark; late rows are dropped and listed) predicts
exactly which rows are dropped and every window's final count, and the engine must
agree row for row: the view, the LATE ROWS INTO relation and the late-row counters.
A second, sparse log (rows seconds apart) closes many windows empty; its hopping views
are checked with and without LATE ROWS INTO (without it, they merge panes).

    /usr/bin/python3 tests/sim/lateness_sim.py --weir build/server/weir [--rows N] [--seed S]

The last line of stdout is "N passed, N failed" (one check per pair and kind).
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
    sys.exit(f"lateness_sim.py: {e}: run it with /usr/bin/python3 (python3-psycopg2, "
             "python3-confluent-kafka; scripts/deps.sh installs them)")

BASE = datetime.datetime(2026, 1, 1)
WINDOW_MS = 10_000
SLIDE_MS = 2_500                    # the HOP views: 10 s windows every 2.5 s
STEP_MS = 100                       # event time advances 100 ms per row
N_KEYS = 3
# (bound, lateness) pairs, in ms: tight to generous.
PAIRS = [(0, 0), (0, 10_000), (2_000, 0), (2_000, 5_000), (10_000, 0), (10_000, 40_000)]


def ts_text(ms):
    return (BASE + datetime.timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def norm(x):
    """A timestamp from psycopg2 -> ms since BASE."""
    return int((x - BASE) / datetime.timedelta(milliseconds=1))


def generate(n, seed):
    """Events (k, ts_ms) in arrival order: 95% arrive up to 1.5 s after their event
    time, 5% are stragglers arriving 2 to 45 s late."""
    rng = random.Random(seed)
    events = []
    for i in range(n):
        ts = i * STEP_MS
        delay = rng.uniform(2_000, 45_000) if rng.random() < 0.05 else rng.uniform(0, 1_500)
        events.append((ts + delay, i, i % N_KEYS, ts))
    events.sort()
    return [(k, ts) for _, _, k, ts in events]


def generate_sparse(n, seed):
    """Events (k, ts_ms) in arrival order, a few seconds apart in event time (0 to 8 s)
    and up to 6 s late, so many windows close with no row and a late row is often the
    first of its pane (a hopping window merged from panes must not show a window that
    closed empty because of it)."""
    rng = random.Random(seed)
    events, ts = [], 0
    for i in range(n):
        ts += rng.randrange(0, 8_000, 250)
        events.append((ts + rng.uniform(0, 6_000), i, i % N_KEYS, ts))
    events.sort()
    return [(k, ts) for _, _, k, ts in events]


def windows_of(ts, slide):
    """The window starts covering ts: one (tumbling) or WINDOW_MS / slide (hopping)."""
    last = ts - ts % slide
    return [last - i * slide for i in range(WINDOW_MS // slide) if last - i * slide + WINDOW_MS > ts]


def simulate(events, bound, lateness, slide=WINDOW_MS):
    """The reference: returns ({(window_start, k): count}, [(k, ts, window_start, wm)]).
    Lateness is judged per (row, window)."""
    wm = None
    counts, late = {}, []
    for k, ts in events:
        for start in windows_of(ts, slide):
            end = start + WINDOW_MS
            if wm is not None and end + lateness <= wm:
                late.append((k, ts, start, wm))
            else:
                counts[(start, k)] = counts.get((start, k), 0) + 1
        if wm is None or ts - bound > wm:
            wm = ts - bound
    return counts, late


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weir", required=True)
    ap.add_argument("--rows", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()

    logs = [("", generate(a.rows, a.seed)), ("sp", generate_sparse(a.rows // 3, a.seed))]
    w = None
    passed = failed = 0
    try:
        w = Stack(a.weir, prefix="weir-sim-")
        views = []
        for tag, events in logs:
            topic = f"sim_events{tag}"
            w.q(f"CREATE SOURCE probe{tag} (k BIGINT, ts TIMESTAMP) WITH (connector = 'kafka', topic = '{topic}', "
                    f"properties.bootstrap.server = '{w.kafka}')")
            p = Producer({"bootstrap.servers": w.kafka, "linger.ms": 5})
            for k, ts in events:
                p.produce(topic, json.dumps({"k": k, "ts": ts_text(ts)}).encode(), partition=0)
            if p.flush(30) != 0:
                raise RuntimeError("could not produce the events")
            for i, (bound, lateness) in enumerate(PAIRS):
                # A bounded source: its end is a watermark of +infinity, so every window fires.
                w.q(f"CREATE SOURCE s{tag}{i} (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '{bound} milliseconds') "
                        f"WITH (connector = 'kafka', topic = '{topic}', properties.bootstrap.server = '{w.kafka}', "
                        f"scan.bounded.mode = 'latest')")
                allow = f" ALLOW LATENESS INTERVAL '{lateness} milliseconds'" if lateness else ""
                for kind, slide in (("tumble", WINDOW_MS), ("hop", SLIDE_MS)):
                    name = f"{kind}{tag}{i}"
                    win = (f"TUMBLE(s{tag}{i}, ts, INTERVAL '{WINDOW_MS} milliseconds')" if kind == "tumble" else
                           f"HOP(s{tag}{i}, ts, INTERVAL '{SLIDE_MS} milliseconds', INTERVAL '{WINDOW_MS} milliseconds')")
                    w.q(f"CREATE MATERIALIZED VIEW {name} AS SELECT window_start, k, count(*) AS n "
                            f"FROM {win} GROUP BY window_start, k EMIT ON WINDOW CLOSE{allow} LATE ROWS INTO {name}_late")
                    views.append((events, name, bound, lateness, slide))
                    if kind == "hop":
                        # Without LATE ROWS INTO, merged from panes (EXPLAIN: "windows merged from panes").
                        w.q(f"CREATE MATERIALIZED VIEW {name}p AS SELECT window_start, k, count(*) AS n "
                                f"FROM {win} GROUP BY window_start, k EMIT ON WINDOW CLOSE{allow}")
                        views.append((events, name + "p", bound, lateness, slide))
        w.q("FLUSH")
        print(f"# {len(logs[0][1])} events (sparse log: {len(logs[1][1])}), {N_KEYS} keys, "
              f"{WINDOW_MS // 1000} s windows (hop: every {SLIDE_MS} ms)")
        print(f"# {'view':>8} {'bound_ms':>8} {'lateness_ms':>11} {'dropped':>8} {'windows':>8}")
        for events, name, bound, lateness, slide in views:
            counts, late = simulate(events, bound, lateness, slide)
            print(f"# {name:>8} {bound:8d} {lateness:11d} {len(late):8d} {len(counts):8d}")
            got = {(norm(ws), k): n for ws, k, n in w.q(f"SELECT window_start, k, n FROM {name}")}
            n_late = w.q(f"SELECT late_rows FROM weir_views WHERE name = '{name}'")[0][0]
            checks = [
                ("final counts", got == counts,
                 f"{len(set(got.items()) ^ set(counts.items()))} windows differ"),
                ("late_rows counter", n_late == len(late), f"engine {n_late}, reference {len(late)}"),
            ]
            if not name.endswith("p"):
                got_late = sorted((k, norm(ts), norm(ws), norm(wm)) for k, ts, ws, wm in
                                  w.q(f"SELECT k, ts, window_start, watermark FROM {name}_late"))
                checks.append(("late rows relation", got_late == sorted(late),
                               f"engine {len(got_late)}, reference {len(late)}"))
            for what, ok, detail in checks:
                label = f"{name}: bound {bound} ms, lateness {lateness} ms: {what}"
                if ok:
                    passed += 1
                    print(f"ok - {label}")
                else:
                    failed += 1
                    print(f"not ok - {label} ({detail})")
        events = logs[0][1]
        # The pairs differ, so the test can tell them apart: tighter settings drop more.
        drops = [len(simulate(events, b, l)[1]) for b, l in PAIRS]
        if drops[0] > drops[-1]:
            passed += 1
            print(f"ok - the reference drops {drops[0]} rows at (0, 0) and {drops[-1]} at the loosest pair")
        else:
            failed += 1
            print(f"not ok - the generated log does not separate the pairs (drops {drops})")
    except Exception as e:  # a harness failure is a failed test, with the reason
        failed += 1
        print(f"not ok - harness: {e}")
    finally:
        if w:
            w.stop()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
