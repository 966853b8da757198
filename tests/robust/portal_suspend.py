#!/usr/bin/python3
"""portal_suspend.py --weir PATH: an Execute with a row limit returns that many rows, then more.

Issue 20: pgjdbc's setFetchSize and postgres.js / pg-cursor cursors got every row at once,
because the Execute message's row limit was ignored (no PortalSuspended). With a raw pgwire
client, over a table of 10 rows:
- Execute(limit 4) three times on one portal, with Flush between (pg-cursor's way): 4, 4 and 2
  rows, PortalSuspended after the first two, CommandComplete "SELECT 2" after the last, the rows
  in order and none twice;
- inside BEGIN, with Sync between the Executes (pgjdbc's way): the portal survives each Sync,
  then COMMIT ends it (an Execute after it: 34000);
- outside a transaction a Sync ends the portal, as in PostgreSQL;
- Execute with no limit still returns every row.

Prints TAP; exits 1 if a check failed.
"""
import argparse
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Stack, Tap  # noqa: E402
from rawpg import RawPg  # noqa: E402

tap = Tap()


class Raw(RawPg):
    def execute(self, portal, limit, flush=True):
        self.msg(b"E", portal + b"\0" + struct.pack("!i", limit))
        self.msg(b"H" if flush else b"S")
        return self.until(b"s", b"C", b"E")


def rows(msgs):
    out = []
    for t, b in msgs:
        if t == b"D":
            n = struct.unpack("!h", b[:2])[0]
            ln = struct.unpack("!i", b[2:6])[0]
            out.append(int(b[6:6 + ln]))
    return out


def kinds(msgs):
    return [t.decode() for t, _ in msgs if t != b"D"]


def tag(msgs):
    return [b.rstrip(b"\0").decode() for t, b in msgs if t == b"C"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    weir = ap.parse_args().weir
    with Stack(weir) as st:
        st.q("CREATE TABLE pt (id BIGINT PRIMARY KEY)")
        st.q("INSERT INTO pt VALUES " + ",".join("(%d)" % i for i in range(1, 11)))
        r = Raw(st.port)
        sql = b"SELECT id FROM pt ORDER BY id\0"
        r.msg(b"P", b"\0" + sql + b"\0\0")
        r.msg(b"B", b"c1\0\0\0\0\0\0\0\0")
        r.msg(b"H")
        r.until(b"2")
        a = r.execute(b"c1", 4)
        b = r.execute(b"c1", 4)
        c = r.execute(b"c1", 4)
        tap(rows(a) == [1, 2, 3, 4] and kinds(a) == ["s"], "Execute(4): 4 rows, then PortalSuspended", repr(a))
        tap(rows(b) == [5, 6, 7, 8] and kinds(b) == ["s"], "Execute(4) again: the next 4, suspended", repr(b))
        tap(rows(c) == [9, 10] and tag(c) == ["SELECT 2"], "Execute(4) a third time: the last 2, SELECT 2", repr(c))
        d = r.execute(b"c1", 4)
        tap(rows(d) == [] and tag(d) == ["SELECT 0"], "a fourth Execute of the finished portal: no rows", repr(d))
        r.msg(b"S")
        r.until(b"Z")

        # pgjdbc with autocommit off: BEGIN, then Syncs between the fetches.
        r.msg(b"Q", b"BEGIN\0")
        r.until(b"Z")
        r.msg(b"P", b"\0" + sql + b"\0\0")
        r.msg(b"B", b"c2\0\0\0\0\0\0\0\0")
        r.msg(b"S")
        r.until(b"Z")
        a = r.execute(b"c2", 6, flush=False)
        r.until(b"Z")
        b = r.execute(b"c2", 6, flush=False)
        r.until(b"Z")
        tap(rows(a) + rows(b) == list(range(1, 11)) and kinds(a) == ["s"] and tag(b) == ["SELECT 4"],
            "inside BEGIN the portal survives Sync: 6 rows, then the last 4", repr(a) + repr(b))
        r.msg(b"Q", b"COMMIT\0")
        r.until(b"Z")
        r.msg(b"E", b"c2\0" + struct.pack("!i", 1))
        r.msg(b"S")
        m = r.until(b"Z")
        err = [x for t, x in m if t == b"E"]
        tap(err and b"C34000" in err[0], "after COMMIT the portal is gone (34000)", repr(m))

        # Outside a transaction, Sync ends the portal.
        r.msg(b"P", b"\0" + sql + b"\0\0")
        r.msg(b"B", b"c3\0\0\0\0\0\0\0\0")
        r.msg(b"S")
        r.until(b"Z")
        r.msg(b"E", b"c3\0" + struct.pack("!i", 0))
        r.msg(b"S")
        m = r.until(b"Z")
        tap([t for t, _ in m] == [b"E", b"Z"] and b"C34000" in m[0][1], "outside a transaction Sync ends the portal",
            repr(m))

        r.msg(b"P", b"\0" + sql + b"\0\0")
        r.msg(b"B", b"c4\0\0\0\0\0\0\0\0")
        a = r.execute(b"c4", 0)
        tap(rows(a) == list(range(1, 11)) and tag(a) == ["SELECT 10"], "Execute with no limit: every row", repr(a))
        r.msg(b"S")
        r.until(b"Z")
    tap.end()


if __name__ == "__main__":
    main()
