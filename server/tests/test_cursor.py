#!/usr/bin/python3
"""test_cursor.py: DECLARE / FETCH / CLOSE with psycopg2 (plain execute).

A SUBSCRIBE cursor: FETCH returns the snapshot, then changes made after
DECLARE (by another session) in later FETCHes, as rows (epoch, diff, the
view's columns); FETCH n takes at most n; WITH (timeout) answers empty when
nothing comes; without a timeout FETCH waits for a row while other sessions
are served; a waiting FETCH is cancelled with 57014. A SELECT cursor reads
one snapshot in pieces, and psycopg2's named (server-side) cursors work, over
SELECT and over SUBSCRIBE (a live feed).
Errors: DECLARE outside a transaction block 25P01, an unknown cursor 34000,
a duplicate 42P03, WITH HOLD and FETCH BACKWARD 0A000; COMMIT closes every
cursor. TAP output.

usage: test_cursor.py WEIR_EXE
"""
import collections
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from weirproc import Tap, Weir  # noqa: E402

import psycopg2  # noqa: E402
import psycopg2.extensions  # noqa: E402


def connect(w, autocommit=True):
    c = psycopg2.connect(host="127.0.0.1", port=w.port, dbname="weir", user="weir", sslmode="disable")
    c.autocommit = autocommit
    return c


def error_code(cur, sql):
    try:
        cur.execute(sql)
        return None
    except psycopg2.Error as e:
        return e.pgcode


def read_past_changes(cur, name, rows):
    """FETCHes from cursor `name` into rows until a progress row comes after the
    last change; returns that progress epoch."""
    for _ in range(40):
        cur.execute("FETCH ALL %s WITH (timeout = '0.5s')" % name)
        rows += cur.fetchall()
        changes = [r[0] for r in rows if r[1] is not None]
        done = [r[0] for r in rows if r[1] is None and changes and r[0] >= max(changes)]
        if done:
            return done[0]
    raise RuntimeError("no progress after the changes: %r" % rows)


def apply(rows, upto, state=None):
    """The view's rows from a stream: snapshot and changes (diff +1/-1) of epochs up to `upto`."""
    state = collections.Counter() if state is None else state
    for r in rows:
        if r[1] is None or (upto is not None and r[0] > upto):
            continue
        state[tuple(r[2:])] += r[1]
    return +state


def main():
    t = Tap()
    w = Weir(sys.argv[1])
    try:
        conn = connect(w)
        other = connect(w)
        cur, ocur = conn.cursor(), other.cursor()
        cur.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT)")
        cur.execute("INSERT INTO t VALUES (1, 10), (2, 20)")
        cur.execute("CREATE MATERIALIZED VIEW mv AS SELECT k, v FROM t WHERE v > 0")

        t.ok(error_code(cur, "DECLARE c CURSOR FOR SUBSCRIBE mv") == "25P01",
             "DECLARE outside a transaction block: 25P01")
        cur.execute("BEGIN")
        cur.execute("DECLARE c CURSOR FOR SUBSCRIBE mv")
        t.ok(cur.statusmessage == "DECLARE CURSOR", "DECLARE c CURSOR FOR SUBSCRIBE mv", cur.statusmessage)
        t.ok(error_code(cur, "DECLARE c CURSOR FOR SUBSCRIBE mv") == "42P03", "a second cursor c: 42P03")
        cur.execute("FETCH ALL c")
        rows = cur.fetchall()
        t.ok([d.name for d in cur.description] == ["epoch", "diff", "k", "v"],
             "FETCH's columns are COPY (SUBSCRIBE)'s: epoch, diff, k, v", [d.name for d in cur.description])
        t.ok(sorted(r[1:] for r in rows) == [(1, 1, 10), (1, 2, 20)] and all(r[0] > 0 for r in rows),
             "FETCH ALL: the snapshot", rows)
        t.ok(cur.statusmessage == "FETCH 2", "tag FETCH 2", cur.statusmessage)

        start = time.time()
        cur.execute("FETCH 1 c WITH (timeout = '300ms')")
        took = time.time() - start
        t.ok(cur.fetchall() == [] and 0.25 <= took < 3, "FETCH WITH (timeout = '300ms'): nothing after the timeout",
             "%.2fs" % took)

        ocur.execute("INSERT INTO t VALUES (3, 30)")
        cur.execute("FETCH c")
        t.ok([r[1:] for r in cur.fetchall()] == [(1, 3, 30)], "a row inserted after DECLARE comes in a later FETCH")

        ocur.execute("UPDATE t SET v = 11 WHERE k = 1")
        got, biggest = [], 0
        deadline = time.time() + 10
        while len(got) < 2 and time.time() < deadline:
            cur.execute("FETCH 1 FROM c WITH (timeout = '1s')")
            batch = cur.fetchall()
            biggest = max(biggest, len(batch))
            got += [r[1:] for r in batch]
        t.ok(sorted(got) == [(-1, 1, 10), (1, 1, 11)] and biggest == 1,
             "an update: retraction and insertion, one per FETCH 1", got)

        # A FETCH waiting for a row does not hold up the engine or other sessions.
        waited = {}

        def wait_fetch():
            c2 = conn.cursor()
            c2.execute("FETCH c")
            waited["rows"] = [r[1:] for r in c2.fetchall()]
        th = threading.Thread(target=wait_fetch)
        th.start()
        time.sleep(0.3)
        start = time.time()
        ocur.execute("SELECT count(*) FROM mv")
        n = ocur.fetchone()[0]
        ocur.execute("INSERT INTO t VALUES (4, 40)")
        quick = time.time() - start
        th.join(10)
        t.ok(n == 3 and quick < 2, "another session is served while FETCH waits", "%.2fs" % quick)
        t.ok(waited.get("rows") == [(1, 4, 40)], "the waiting FETCH gets the row inserted meanwhile", waited)

        ocur.execute("INSERT INTO t VALUES (5, 50), (6, 60), (7, 70)")
        time.sleep(0.2)
        cur.execute("FETCH 2 c WITH (timeout = '2s')")
        two = cur.fetchall()
        cur.execute("FETCH ALL c WITH (timeout = '2s')")
        rest = cur.fetchall()
        t.ok(len(two) == 2 and sorted(r[2] for r in two + rest) == [5, 6, 7], "FETCH 2 then FETCH ALL",
             (two, rest))

        # Cancel a waiting FETCH.
        def cancel_later():
            time.sleep(0.5)
            conn.cancel()
        threading.Thread(target=cancel_later).start()
        t.ok(error_code(cur, "FETCH c") == "57014", "a waiting FETCH is cancelled: 57014")

        cur.execute("CLOSE c")
        t.ok(cur.statusmessage == "CLOSE CURSOR", "CLOSE c")
        t.ok(error_code(cur, "FETCH c") == "34000", "FETCH after CLOSE: 34000")
        t.ok(error_code(cur, "FETCH 5 FROM nosuch") == "34000", "FETCH from an unknown cursor: 34000")
        t.ok(error_code(cur, "CLOSE nosuch") == "34000", "CLOSE an unknown cursor: 34000")
        t.ok(error_code(cur, "DECLARE h CURSOR WITH HOLD FOR SELECT k FROM t") == "0A000", "WITH HOLD: 0A000")
        t.ok(error_code(cur, "DECLARE x CURSOR FOR SUBSCRIBE t2") == "42P01", "SUBSCRIBE to an unknown view: 42P01")

        # A SELECT cursor: one snapshot, read in pieces.
        cur.execute("DECLARE s NO SCROLL CURSOR FOR SELECT k, v FROM t ORDER BY k")
        cur.execute("FETCH 2 FROM s")
        first = cur.fetchall()
        ocur.execute("INSERT INTO t VALUES (8, 80)")
        cur.execute("FETCH FORWARD ALL FROM s")
        rest = cur.fetchall()
        t.ok(first == [(1, 11), (2, 20)] and [r[0] for r in rest] == [3, 4, 5, 6, 7],
             "a SELECT cursor reads the snapshot of DECLARE in pieces", (first, rest))
        cur.execute("FETCH NEXT FROM s")
        t.ok(cur.fetchall() == [] and cur.statusmessage == "FETCH 0", "past its end: FETCH 0")
        t.ok(error_code(cur, "FETCH BACKWARD 1 FROM s") == "0A000", "FETCH BACKWARD: 0A000")
        t.ok(error_code(cur, "FETCH s WITH (timeout = '1s')") == "22023", "timeout on a SELECT cursor: 22023")
        cur.execute("DECLARE s2 CURSOR FOR SUBSCRIBE mv WITH (snapshot = false)")
        cur.execute("COMMIT")
        t.ok(error_code(cur, "FETCH s") == "34000" and error_code(cur, "FETCH s2") == "34000",
             "COMMIT closes every cursor")

        # psycopg2's named cursors: DECLARE ... WITHOUT HOLD, FETCH FORWARD n, CLOSE.
        tx = connect(w, autocommit=False)
        named = tx.cursor("named")
        named.itersize = 3
        named.execute("SELECT k FROM t ORDER BY k")
        part = named.fetchmany(2)
        everything = part + named.fetchall()
        t.ok([r[0] for r in everything] == [1, 2, 3, 4, 5, 6, 7, 8], "psycopg2 named cursor", everything)
        named.close()
        tx.commit()

        # A named cursor over SUBSCRIBE is a live feed: iterating waits for changes.
        feed = tx.cursor("feed")
        feed.itersize = 100
        feed.execute("SUBSCRIBE mv WITH (snapshot = false)")
        threading.Timer(0.3, lambda: ocur.execute("INSERT INTO t VALUES (9, 90)")).start()
        live = next(iter(feed))
        t.ok(live[1:] == (1, 9, 90), "psycopg2 named cursor over SUBSCRIBE: a change as it happens", live)
        feed.close()
        tx.commit()
        tx.close()

        # Resuming after an epoch: a consumer that kept the rows up to a progress
        # epoch reconnects with resume_after and gets the changes since, from the
        # view's history, then live ones: no gap, no duplicate, no snapshot.
        cur.execute("BEGIN")
        cur.execute("DECLARE r CURSOR FOR SUBSCRIBE mv WITH (progress = true)")
        rows = []
        cur.execute("FETCH ALL r")
        rows += cur.fetchall()
        ocur.execute("INSERT INTO t VALUES (20, 200)")
        ocur.execute("UPDATE t SET v = 21 WHERE k = 2")
        ocur.execute("CHECKPOINT")
        seen = read_past_changes(cur, "r", rows)
        cur.execute("COMMIT")  # the consumer goes away at epoch `seen`
        state = apply(rows, seen)
        ocur.execute("INSERT INTO t VALUES (21, 210)")
        ocur.execute("DELETE FROM t WHERE k = 1")
        ocur.execute("CHECKPOINT")
        cur.execute("BEGIN")
        cur.execute("DECLARE r2 CURSOR FOR SUBSCRIBE mv WITH (resume_after = %d, progress = true)" % seen)
        more = []
        read_past_changes(cur, "r2", more)
        t.ok(more and all(r[0] > seen for r in more), "resume_after: only epochs after it, no snapshot", more)
        state = apply(more, None, state)
        ocur.execute("SELECT k, v FROM mv")
        t.ok(state == collections.Counter(ocur.fetchall()), "resumed stream + kept rows = the view",
             (sorted(state.elements()), more))
        ocur.execute("CREATE MATERIALIZED VIEW mv_new AS SELECT k FROM t")
        t.ok(error_code(cur, "DECLARE r3 CURSOR FOR SUBSCRIBE mv_new WITH (resume_after = %d)" % seen)
             == "55000", "resume_after on a view that never had a subscriber (no history): 55000")
        cur.execute("ROLLBACK")
        cur.execute("BEGIN")
        t.ok(error_code(cur, "DECLARE r3 CURSOR FOR SUBSCRIBE mv WITH (resume_after = 999999999)") == "22023",
             "resume_after an epoch not committed yet: 22023")
        cur.execute("ROLLBACK")

        # The upsert envelope: an update is one upsert, a delete carries only its key.
        ocur.execute("CREATE MATERIALIZED VIEW sums AS SELECT k, sum(v) AS s FROM t GROUP BY k")
        cur.execute("BEGIN")
        cur.execute("DECLARE u CURSOR FOR SUBSCRIBE sums WITH (envelope = 'upsert', snapshot = false, progress = true)")
        ocur.execute("UPDATE t SET v = v + 1 WHERE k = 2")
        ocur.execute("DELETE FROM t WHERE k = 5")
        ocur.execute("INSERT INTO t VALUES (40, 400)")
        ocur.execute("CHECKPOINT")
        got = []
        read_past_changes(cur, "u", got)
        t.ok([d[0] for d in cur.description][:3] == ["epoch", "state", "k"], "upsert envelope: epoch, state, columns",
             cur.description)
        ocur.execute("SELECT s FROM sums WHERE k = 2")
        s2 = ocur.fetchone()[0]
        changes = [r[1:] for r in got if r[1] is not None]
        t.ok(sorted(changes) == sorted([("upsert", 2, s2), ("delete", 5, None), ("upsert", 40, 400)]),
             "upsert envelope: one upsert per update, a delete by key, an insert as an upsert", got)
        cur.execute("COMMIT")
        ocur.execute("CREATE MATERIALIZED VIEW vals AS SELECT v FROM t")
        cur.execute("BEGIN")
        t.ok(error_code(cur, "DECLARE u2 CURSOR FOR SUBSCRIBE vals WITH (envelope = 'upsert')") == "42P10",
             "upsert envelope on a view without a key: 42P10")
        cur.execute("ROLLBACK")

        ocur.execute("SELECT 1")
        t.ok(ocur.fetchone() == (1,), "the server still serves")
        conn.close()
        other.close()
        t.ok(w.stop() == 0, "clean shutdown")
    except Exception as e:  # a harness failure is a failed test, with the reason
        t.ok(False, "harness", repr(e) + "\n" + w.log())
    finally:
        w.cleanup()
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
