#!/usr/bin/python3
"""analyze_sim.py: ANALYZE LATENESS checked against an independent model of the same log.

It generates out-of-order events with a known delay distribution (95% arrive up to 1.5 s
after their event time, 5% are stragglers 2 to 45 s late), spreads them over three Kafka
partitions with explicit record timestamps (their arrival times), adds a record that is not
JSON and a row without an event time, and runs ANALYZE LATENESS for TUMBLE and HOP
windows, and for SESSION windows per key (PARTITION BY k). A plain Python model of DESIGN.md's rules, written without looking at the engine's
simulation, predicts every figure of the three result sets (delay percentiles per partition
and overall, every candidate's counts, waits and open windows, the two recommendations),
and they must agree exactly. The read order it assumes is the documented one: by Kafka
record timestamp, then partition, each partition in offset order.

It also ties the analysis to the engine itself: on a one-partition topic, live views (HOP
and SESSION) with several (bound, lateness) pairs must drop exactly the rows ANALYZE LATENESS
says they drop, and a session view holds as many sessions as it counts.

    /usr/bin/python3 tests/sim/analyze_sim.py --weir build/server/weir [--rows N] [--seed S] [--table]

--table prints the candidate table (the sample in docs/time.md). The last line of stdout is
"N passed, N failed".
"""
import argparse
import datetime
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from lateness_sim import BASE, ts_text  # noqa: E402
from weirtest import Stack  # noqa: E402

try:
    from confluent_kafka import Producer
except ImportError as e:  # pragma: no cover
    sys.exit(f"analyze_sim.py: {e}: run it with /usr/bin/python3 (python3-confluent-kafka)")

N_PARTS = 3
STEP_MS = 100
BOUNDS_MS = [0, 500, 1_000, 2_000, 5_000, 10_000]
LATENESS_MS = [0, 5_000, 30_000]
TARGET = 99.0
WINDOWS = [("TUMBLE('10s')", 10_000, 10_000), ("HOP('2500ms', '10s')", 2_500, 10_000)]
GAP_MS = 700       # SESSION('700ms') PARTITION BY k: rows of a key are 500 ms apart, so gaps split some
N_KEYS = 5         # k = row index % 5
US = 1000  # microseconds per ms


def generate(n, seed):
    """Rows (partition, arrival_ms, ts_ms or None) in produce order: by arrival."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        ts = i * STEP_MS
        delay = rng.uniform(2_000, 45_000) if rng.random() < 0.05 else rng.uniform(0, 1_500)
        rows.append((int(ts + delay), i, i % N_PARTS, ts))
    rows.sort()
    out = [(p, arr, ts) for arr, _, p, ts in rows]
    # One row without an event time (no window, no watermark, no delay).
    out.insert(len(out) // 2, (1, out[len(out) // 2][1], None))
    return out


def read_order(rows, with_key=False):
    """The documented merge: by record timestamp, then partition; offset order kept.
    with_key: (partition, ts, k) with k the row's key (its index in rows % N_KEYS)."""
    per = {}
    for i, (p, arr, ts) in enumerate(rows):
        per.setdefault(p, []).append((arr, ts, i % N_KEYS))
    keyed = [(arr, p, off, ts, k) for p, lst in per.items() for off, (arr, ts, k) in enumerate(lst)]
    keyed.sort()
    return [(p, ts, k) if with_key else (p, ts) for arr, p, off, ts, k in keyed]


def nearest_rank(sorted_vals, permille):
    n = len(sorted_vals)
    if n == 0:
        return 0
    r = (n * permille + 999) // 1000
    return sorted_vals[max(r, 1) - 1]


def model_delays(order):
    seen, per = {}, {p: [] for p in range(N_PARTS)}
    allv = []
    for p, ts in order:
        if ts is None:
            continue
        m = seen.get(p)
        d = m - ts if m is not None and m > ts else 0
        seen[p] = ts if m is None or ts > m else m
        per[p].append(d)
        allv.append(d)

    def stats(name, v):
        v = sorted(v)
        return (name, len(v), sum(1 for x in v if x > 0), *(nearest_rank(v, q) for q in (500, 900, 990, 999)),
                v[-1] if v else 0)
    return [stats("all", allv)] + [stats(str(p), per[p]) for p in range(N_PARTS)]


def windows_of(ts, slide, size):
    last = ts - ts % slide
    return [s for s in (last - i * slide for i in range(size // slide)) if s + size > ts]


def model_candidate(order, bound, lateness, slide, size):
    """Replays the log: per-partition max(ts - bound), min over partitions (None until
    every partition has a row), each row judged at the watermark before it."""
    pmax = {}
    wm = None
    max_seen = None
    wins = {}          # end -> {"dropped": n, "state": bool}
    unfired, open_ = set(), set()
    r = dict(pairs=0, on_time=0, late_updates=0, dropped=0, fired=0, wait_sum=0, max_open=0)
    for p, ts in order:
        if ts is None:
            continue
        for start in windows_of(ts, slide, size):
            end = start + size
            w = wins.setdefault(end, {"dropped": 0, "state": False})
            r["pairs"] += 1
            if wm is not None and end + lateness <= wm:
                w["dropped"] += 1
                r["dropped"] += 1
                continue
            closed = wm is not None and end <= wm
            r["late_updates" if closed else "on_time"] += 1
            if not w["state"]:
                w["state"] = True
                open_.add(end)
                r["max_open"] = max(r["max_open"], len(open_))
                if not closed:
                    unfired.add(end)
        max_seen = ts if max_seen is None else max(max_seen, ts)
        v = ts - bound
        if p in pmax and v <= pmax[p]:
            continue
        pmax[p] = v
        if len(pmax) < N_PARTS:
            continue
        m = min(pmax.values())
        if wm is not None and m <= wm:
            continue
        wm = m
        for end in sorted(e for e in unfired if e <= wm):
            unfired.discard(end)
            r["fired"] += 1
            r["wait_sum"] += max_seen - end
        for end in [e for e in open_ if e + lateness <= wm]:
            open_.discard(end)
            wins[end]["state"] = False
    r["windows"] = len(wins)
    r["exact"] = sum(1 for w in wins.values() if w["dropped"] == 0)
    r["fired_at_end"] = len(unfired)
    return r


def model_session(order, bound, lateness, gap):
    """Session windows per key, as DESIGN.md and docs/time.md state them (Flink's): a row
    opens [ts, ts + gap) and joins every session of its key still kept that overlaps or
    touches it (start <= ts + gap and ts <= end): they merge into one; the row is late when
    that merged session is (end + lateness <= watermark), so only a row that joins nothing
    and whose own session is late is dropped; a session fires when the watermark reaches its
    end and is forgotten at end + lateness. Counts are of rows; windows are the sessions
    left after merging; a session is exact when no dropped row's [ts, ts + gap) overlaps
    or touches it (same key)."""
    pmax, wm, max_seen = {}, None, None
    sessions = []      # dicts: key, start, end, kept, merged, fired
    kept = {}          # key -> list of kept sessions
    lost = []          # (key, ts) of dropped rows
    r = dict(pairs=0, on_time=0, late_updates=0, dropped=0, fired=0, wait_sum=0, max_open=0)
    n_kept = 0
    for p, ts, k in order:
        if ts is None:
            continue
        r["pairs"] += 1
        start, end = ts, ts + gap
        mine = kept.setdefault(k, [])
        joined = [o for o in mine if o["start"] <= ts + gap and ts <= o["end"]]
        merged_end = max([end] + [o["end"] for o in joined])
        if wm is not None and merged_end + lateness <= wm:
            r["dropped"] += 1
            lost.append((k, ts))
        else:
            for o in joined:
                start, end = min(start, o["start"]), max(end, o["end"])
                o["kept"], o["merged"] = False, True
                mine.remove(o)
                n_kept -= 1
            closed = wm is not None and end <= wm
            r["late_updates" if closed else "on_time"] += 1
            sess = dict(key=k, start=start, end=end, kept=True, merged=False, fired=closed)
            sessions.append(sess)
            mine.append(sess)
            n_kept += 1
            r["max_open"] = max(r["max_open"], n_kept)
        max_seen = ts if max_seen is None else max(max_seen, ts)
        v = ts - bound
        if p in pmax and v <= pmax[p]:
            continue
        pmax[p] = v
        if len(pmax) < N_PARTS:
            continue
        m = min(pmax.values())
        if wm is not None and m <= wm:
            continue
        wm = m
        for sess in sessions:
            if sess["kept"] and not sess["fired"] and sess["end"] <= wm:
                sess["fired"] = True
                r["fired"] += 1
                r["wait_sum"] += max_seen - sess["end"]
        for key, mine in kept.items():
            for o in [o for o in mine if o["end"] + lateness <= wm]:
                o["kept"] = False
                mine.remove(o)
                n_kept -= 1
    final = [x for x in sessions if not x["merged"]]
    r["windows"] = len(final)
    r["exact"] = sum(1 for x in final
                     if not any(k == x["key"] and x["start"] <= ts + gap and ts <= x["end"] for k, ts in lost))
    r["fired_at_end"] = sum(1 for x in final if x["kept"] and not x["fired"])
    return r


def iv(ms):
    return datetime.timedelta(milliseconds=ms)


def wait_iv(r):
    """Mean wait, floored to the microsecond as the engine reports it."""
    return datetime.timedelta(microseconds=r["wait_sum"] * US // r["fired"]) if r["fired"] else None


def pct(num, den):
    return f"{100.0 * num / den:.3f}" if den else None


def expected_rows(order, slide, size, model=None):
    cands = []
    for b in BOUNDS_MS:
        for lt in LATENESS_MS:
            r = model(b, lt) if model else model_candidate(order, b, lt, slide, size)
            cands.append((b, lt, r))
    cand_rows = []
    for b, lt, r in cands:
        wait = wait_iv(r)
        first = 100.0 * r["on_time"] / r["pairs"] >= TARGET
        cand_rows.append((iv(b), iv(lt), r["pairs"], pct(r["on_time"], r["pairs"]), r["late_updates"], r["dropped"],
                          r["windows"], r["exact"], pct(r["exact"], r["windows"]), wait, r["fired_at_end"],
                          r["max_open"], first))
    rec_rows = []
    for final in (False, True):
        def share(r):
            return 100.0 * ((r["pairs"] - r["dropped"]) if final else r["on_time"]) / r["pairs"]
        hit = [c for c in cands if share(c[2]) >= TARGET]
        met = bool(hit)
        if hit:
            b, lt, r = hit[0]
        else:
            b, lt, r = max(cands, key=lambda c: (share(c[2]), -c[0], -c[1]))
        wait = wait_iv(r)
        rec_rows.append(("final result" if final else "first result", iv(b), iv(lt), pct(r["on_time"], r["pairs"]),
                         pct(r["pairs"] - r["dropped"], r["pairs"]), r["late_updates"], r["dropped"], wait,
                         r["max_open"], met))
    return cand_rows, rec_rows


def norm_row(row):
    """psycopg2 values -> comparable: Decimal -> 3-decimal text."""
    out = []
    for v in row:
        if v is not None and type(v).__name__ == "Decimal":
            v = f"{v:.3f}"
        out.append(v)
    return tuple(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weir", required=True)
    ap.add_argument("--rows", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--table", action="store_true", help="print the candidate table of the TUMBLE analysis")
    a = ap.parse_args()

    rows = generate(a.rows, a.seed)
    w = None
    passed = failed = 0

    def check(label, ok, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"ok - {label}")
        else:
            failed += 1
            print(f"not ok - {label} {detail}")

    try:
        w = Stack(a.weir, prefix="weir-analyze-")
        topic = "an_events"
        w.q(f"CREATE SOURCE an (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) "
                f"WITH (connector = 'kafka', topic = '{topic}', topic.partitions = {N_PARTS}, "
                f"properties.bootstrap.server = '{w.kafka}')")
        p = Producer({"bootstrap.servers": w.kafka, "linger.ms": 5})
        base_ms = int((BASE - datetime.datetime(1970, 1, 1)).total_seconds() * 1000)
        bad_at = len(rows) // 3
        for i, (part, arr, ts) in enumerate(rows):
            if i == bad_at:
                # Not JSON: skipped by a view, counted by the analysis.
                p.produce(topic, b"not json", partition=0, timestamp=base_ms + arr)
            val = {"k": i % 5, "ts": ts_text(ts) if ts is not None else None}
            p.produce(topic, json.dumps(val).encode(), partition=part, timestamp=base_ms + arr)
        if p.flush(30) != 0:
            raise RuntimeError("could not produce the events")
        order = read_order(rows)
        bounds = ", ".join(f"'{b}ms'" for b in BOUNDS_MS)
        lats = ", ".join(f"'{x}ms'" for x in LATENESS_MS)

        got = [tuple(r) for r in w.q("ANALYZE LATENESS ON an WITH (report = 'delays')")]
        want = [(n, rws, ooo, *(iv(x) for x in vals)) for n, rws, ooo, *vals in model_delays(order)]
        check("delay distribution (overall and per partition)", got == want, f"\n# got  {got}\n# want {want}")

        for wname, slide, size in WINDOWS:
            sql = f"ANALYZE LATENESS ON an FOR {wname} BOUNDS ({bounds}) LATENESS ({lats}) TARGET {TARGET}"
            cand_rows, rec_rows = expected_rows(order, slide, size)
            got = [norm_row(r) for r in w.q(sql + " WITH (report = 'candidates')")]
            if a.table and wname.startswith("TUMBLE"):
                print(f"# ANALYZE LATENESS ON an FOR {wname} BOUNDS (...) LATENESS (...) TARGET {TARGET}")
                print("# bound     lateness  rows  first%   late_upd dropped windows exact exact%   mean_wait"
                      "        at_end max_open meets")
                for r in got:
                    print("# " + " ".join(str(x) for x in r))
            for i, want in enumerate(cand_rows):
                g = got[i] if i < len(got) else None
                check(f"{wname}: bound {BOUNDS_MS[i // len(LATENESS_MS)]} ms, lateness "
                      f"{LATENESS_MS[i % len(LATENESS_MS)]} ms: every figure", g == want,
                      f"\n# got  {g}\n# want {want}")
            check(f"{wname}: one row per candidate", len(got) == len(cand_rows), f"{len(got)} rows")
            got = [norm_row(r) for r in w.q(sql + " WITH (report = 'recommendation')")]
            for want, g in zip(rec_rows, got):
                check(f"{wname}: recommendation '{want[0]}'", g[:len(want)] == want, f"\n# got  {g}\n# want {want}")
                check(f"{wname}: records read, skipped, complete", g[len(want):] == (len(rows) + 1, 1, True),
                      f"{g[len(want):]}")
        # SESSION per key: the same comparison, with the session model.
        korder = read_order(rows, with_key=True)
        sql = (f"ANALYZE LATENESS ON an FOR SESSION('{GAP_MS}ms') PARTITION BY k BOUNDS ({bounds}) "
               f"LATENESS ({lats}) TARGET {TARGET}")
        cand_rows, rec_rows = expected_rows(None, 0, 0, lambda b, lt: model_session(korder, b, lt, GAP_MS))
        got = [norm_row(r) for r in w.q(sql + " WITH (report = 'candidates')")]
        for i, want in enumerate(cand_rows):
            g = got[i] if i < len(got) else None
            check(f"SESSION('{GAP_MS}ms') PARTITION BY k: bound {BOUNDS_MS[i // len(LATENESS_MS)]} ms, lateness "
                  f"{LATENESS_MS[i % len(LATENESS_MS)]} ms: every figure", g == want, f"\n# got  {g}\n# want {want}")
        got = [norm_row(r) for r in w.q(sql + " WITH (report = 'recommendation')")]
        for want, g in zip(rec_rows, got):
            check(f"SESSION: recommendation '{want[0]}'", g[:len(want)] == want, f"\n# got  {g}\n# want {want}")
        merges = model_session(korder, 0, 0, GAP_MS)
        check(f"the session log merges and splits sessions ({merges['windows']} sessions of "
              f"{merges['pairs']} rows, {merges['dropped']} dropped at (0, 0))",
              N_KEYS < merges["windows"] < merges["pairs"] and merges["dropped"] > 0)

        # The stragglers make the candidates differ: tight bounds drop rows, loose ones do not.
        tight = model_candidate(order, 0, 0, 10_000, 10_000)["dropped"]
        loose = model_candidate(order, 10_000, 30_000, 10_000, 10_000)["dropped"]
        check(f"the log separates the candidates ({tight} dropped at (0, 0), {loose} at (10 s, 30 s))",
              tight > loose)

        # Live views drop what the analysis says (one partition: the read order is fixed).
        topic1 = "an_one"
        w.q(f"CREATE SOURCE one_probe (k BIGINT, ts TIMESTAMP) WITH (connector = 'kafka', topic = '{topic1}', "
                f"properties.bootstrap.server = '{w.kafka}')")
        for j, (part, arr, ts) in enumerate(rows):
            if ts is not None:
                p.produce(topic1, json.dumps({"k": j % N_KEYS, "ts": ts_text(ts)}).encode(), partition=0)
        if p.flush(30) != 0:
            raise RuntimeError("could not produce the events")
        pairs = [(0, 0), (2_000, 0), (2_000, 5_000), (500, 30_000)]
        for i, (b, lt) in enumerate(pairs):
            w.q(f"CREATE SOURCE one{i} (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '{b} milliseconds') "
                    f"WITH (connector = 'kafka', topic = '{topic1}', properties.bootstrap.server = '{w.kafka}', "
                    f"scan.bounded.mode = 'latest')")
            allow = f" ALLOW LATENESS INTERVAL '{lt} milliseconds'" if lt else ""
            w.q(f"CREATE MATERIALIZED VIEW hop{i} AS SELECT window_start, count(*) AS n FROM "
                    f"HOP(one{i}, ts, INTERVAL '2500 milliseconds', INTERVAL '10 seconds') GROUP BY window_start "
                    f"EMIT ON WINDOW CLOSE{allow}")
            w.q(f"CREATE MATERIALIZED VIEW sess{i} AS SELECT k, window_start, window_end, count(*) AS n FROM "
                    f"SESSION(one{i}, ts, INTERVAL '{GAP_MS} milliseconds') GROUP BY k, window_start, window_end "
                    f"EMIT ON WINDOW CLOSE{allow}")
        w.q("FLUSH")
        for i, (b, lt) in enumerate(pairs):
            live = w.q(f"SELECT late_rows FROM weir_views WHERE name = 'hop{i}'")[0][0]
            rep = w.q(f"ANALYZE LATENESS ON one{i} FOR HOP('2500ms', '10s') BOUNDS ('{b}ms') "
                          f"LATENESS ('{lt}ms') WITH (report = 'candidates')")[0]
            check(f"live HOP view, bound {b} ms, lateness {lt} ms: late_rows {live} = analysis dropped {rep[5]}",
                  live == rep[5])
            live = w.q(f"SELECT late_rows FROM weir_views WHERE name = 'sess{i}'")[0][0]
            n_sess = w.q(f"SELECT count(*) FROM sess{i}")[0][0]
            rep = w.q(f"ANALYZE LATENESS ON one{i} FOR SESSION('{GAP_MS}ms') PARTITION BY k BOUNDS ('{b}ms') "
                          f"LATENESS ('{lt}ms') WITH (report = 'candidates')")[0]
            check(f"live SESSION view, bound {b} ms, lateness {lt} ms: late_rows {live} = analysis dropped "
                  f"{rep[5]}, sessions {n_sess} = analysis windows {rep[6]}", live == rep[5] and n_sess == rep[6])
    except Exception as e:  # a harness failure is a failed test, with the reason
        failed += 1
        print(f"not ok - harness: {e!r}")
    finally:
        if w:
            w.stop()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
