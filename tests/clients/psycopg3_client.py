#!/usr/bin/python3
"""psycopg3_client.py PORT: psycopg 3 (python3-psycopg) against a running weir, run by
drivers_test.py. Server-side prepared statements (prepare=True: Parse once, Describe, then
Bind/Execute) with parameters of every common type, in text and in binary format; NULLs; a
materialized view; a transaction; an error that leaves the session usable. Prints one
"ok - what" / "not ok - what: detail" line per check."""
import datetime
import decimal
import sys

import psycopg

ROW = dict(k=1, i2=32767, i4=-2147483648, i8=9007199254740993, n=decimal.Decimal("12345.6789"), f=2.5,
           s="h\u00e9llo 'quoted'", b=True, ts=datetime.datetime(2024, 2, 29, 13, 14, 15, 123456),
           tz=datetime.datetime(2024, 2, 29, 13, 14, 15, 123456, tzinfo=datetime.timezone.utc),
           d=datetime.date(2024, 2, 29), iv=datetime.timedelta(days=1, hours=2, minutes=3, seconds=4),
           by=b"\x00\xff", j={"a": [1, 2]})
COLS = list(ROW)


def check(ok, what, detail=""):
    print(f"{'ok' if ok else 'not ok'} - {what}{'' if ok or not detail else ': ' + str(detail)[:300]}", flush=True)


def attempt(what, fn):
    try:
        r = fn()
        check(r is True or r is None, what, r)   # anything else is what went wrong
    except Exception as e:  # a failed step is a failed check, with the driver's reason
        check(False, what, f"{type(e).__name__}: {e}")


def main():
    port = int(sys.argv[1])
    conn = psycopg.connect(host="127.0.0.1", port=port, user="weir", dbname="weir", autocommit=True,
                           prepare_threshold=0)   # every parameterized statement prepared server-side
    check(True, "psycopg: connects")
    Jsonb = psycopg.types.json.Jsonb
    cur = conn.cursor()
    attempt("psycopg: CREATE TABLE and MATERIALIZED VIEW", lambda: [
        cur.execute("CREATE TABLE pg3 (k BIGINT PRIMARY KEY, i2 SMALLINT, i4 INT, i8 BIGINT, n NUMERIC, "
                    "f DOUBLE PRECISION, s TEXT, b BOOLEAN, ts TIMESTAMP, tz TIMESTAMPTZ, d DATE, iv INTERVAL, "
                    "by BYTEA, j JSONB)"),
        cur.execute("CREATE MATERIALIZED VIEW pg3_v AS SELECT k, s, n FROM pg3 WHERE b")] and None)
    ph = ", ".join(["%s"] * len(COLS))
    vals = [Jsonb(v) if c == "j" else v for c, v in ROW.items()]

    def ins():
        cur.execute(f"INSERT INTO pg3 VALUES ({ph.replace('%s', '%b')})", vals, prepare=True)
        cur.execute(f"INSERT INTO pg3 VALUES ({ph})", [2] + [None] * (len(COLS) - 1), prepare=True)
    attempt("psycopg: prepared INSERT with a binary parameter of every type, and NULLs", ins)

    for binary in (False, True):
        fmt = "binary" if binary else "text"
        bc = conn.cursor(binary=binary)
        P = "%b" if binary else "%t"   # parameters in the same format as the results

        def sel():
            bc.execute(f"SELECT * FROM pg3 WHERE k = {P}", [1], prepare=True)
            got = dict(zip(COLS, bc.fetchone()))
            bad = {c: (got[c], ROW[c]) for c in COLS if got[c] != ROW[c]}
            return not bad or bad
        attempt(f"psycopg ({fmt}): every type read back equal", sel)

        def where():
            cond = " AND ".join(f"{c} = {P}" for c in COLS if c != "k")
            bc.execute(f"SELECT k FROM pg3 WHERE {cond}", vals[1:], prepare=True)
            return bc.fetchall() == [(1,)] or bc.fetchall()
        attempt(f"psycopg ({fmt}): a parameter of every type in WHERE", where)

        def nulls():
            bc.execute(f"SELECT k, i4, s, ts FROM pg3 WHERE k = {P} AND i4 IS NULL", [2], prepare=True)
            r = bc.fetchall()
            return r == [(2, None, None, None)] or r
        attempt(f"psycopg ({fmt}): NULLs read back", nulls)

        def view():
            bc.execute(f"SELECT k, s, n FROM pg3_v WHERE k = {P} AND n > {P}", [1, decimal.Decimal("1.5")], prepare=True)
            r = bc.fetchall()
            return r == [(1, ROW["s"], ROW["n"])] or r
        attempt(f"psycopg ({fmt}): the view, with parameters", view)

    def limit():
        cur.execute("SELECT k FROM pg3 ORDER BY k LIMIT %s", [1], prepare=True)
        return cur.fetchall() == [(1,)]
    attempt("psycopg: LIMIT as a parameter", limit)

    def txn():
        with psycopg.connect(host="127.0.0.1", port=port, user="weir", dbname="weir") as tc:
            tc.execute("INSERT INTO pg3 (k, s) VALUES (%s, %s)", [3, "txn"], prepare=True)
            tc.commit()
        cur.execute("SELECT s FROM pg3 WHERE k = %s", [3], prepare=True)
        return cur.fetchall() == [("txn",)]
    attempt("psycopg: a transaction (BEGIN ... COMMIT)", txn)

    def error():
        try:
            cur.execute("SELECT * FROM no_such_table WHERE k = %s", [1], prepare=True)
            return "no error"
        except psycopg.errors.UndefinedTable:
            pass
        cur.execute("SELECT count(*) FROM pg3 WHERE k > %s", [0], prepare=True)
        return cur.fetchone() == (3,)
    attempt("psycopg: an error (42P01) leaves the session usable", error)

    def error_in_txn():
        with psycopg.connect(host="127.0.0.1", port=port, user="weir", dbname="weir") as tc:
            try:
                tc.execute("SELECT 1 / %s", [0], prepare=True)
                return "no error"
            except psycopg.errors.DivisionByZero:
                tc.rollback()
            return tc.execute("SELECT %s::int + 1", [41], prepare=True).fetchone() == (42,)
    attempt("psycopg: an error in a transaction, ROLLBACK, then the session goes on", error_in_txn)
    conn.close()
    print("done")   # drivers_test.py: the program ran to its end


if __name__ == "__main__":
    main()
