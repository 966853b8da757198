#!/usr/bin/python3
"""asyncpg_client.py PORT: asyncpg (python3-asyncpg) against a running weir, run by
drivers_test.py. asyncpg prepares every statement (Parse, Describe) and encodes each argument
in binary by the type ParameterDescription gives it, so every check here depends on weir
inferring parameter types from their context: prepared statements of every common type, NULLs,
fetch/fetchrow/fetchval, a cursor (Execute with a row limit, PortalSuspended), a materialized
view, a transaction, an error that leaves the session usable. Prints one "ok - what" /
"not ok - what: detail" line per check. Not tested, as weir lacks them: COPY TO (copy_from_query),
Cursor.forward (MOVE on a protocol portal), the pool (it calls pg_advisory_unlock_all())."""
import asyncio
import datetime
import decimal
import json
import sys

import asyncpg

ROW = dict(k=1, i2=32767, i4=-2147483648, i8=9007199254740993, n=decimal.Decimal("12345.6789"), f=2.5,
           s="h\u00e9llo 'quoted'", b=True, ts=datetime.datetime(2024, 2, 29, 13, 14, 15, 123456),
           tz=datetime.datetime(2024, 2, 29, 13, 14, 15, 123456, tzinfo=datetime.timezone.utc),
           d=datetime.date(2024, 2, 29), iv=datetime.timedelta(days=1, hours=2, minutes=3, seconds=4),
           by=b"\x00\xff", j='{"a": [1, 2]}')
COLS = list(ROW)


def check(ok, what, detail=""):
    print(f"{'ok' if ok else 'not ok'} - {what}{'' if ok or not detail else ': ' + str(detail)[:300]}", flush=True)


async def attempt(what, coro):
    try:
        r = await coro
        check(r is True or r is None, what, r)   # anything else is what went wrong
    except Exception as e:  # a failed step is a failed check, with the driver's reason
        check(False, what, f"{type(e).__name__}: {e}")


async def main():
    port = int(sys.argv[1])
    conn = await asyncpg.connect(host="127.0.0.1", port=port, user="weir", database="weir")
    check(True, "asyncpg: connects")

    async def create():
        await conn.execute("CREATE TABLE apg (k BIGINT PRIMARY KEY, i2 SMALLINT, i4 INT, i8 BIGINT, n NUMERIC, "
                           "f DOUBLE PRECISION, s TEXT, b BOOLEAN, ts TIMESTAMP, tz TIMESTAMPTZ, d DATE, "
                           "iv INTERVAL, by BYTEA, j JSONB)")
        await conn.execute("CREATE MATERIALIZED VIEW apg_v AS SELECT k, s, n FROM apg WHERE b")
        return True
    await attempt("asyncpg: CREATE TABLE and MATERIALIZED VIEW", create())

    async def params():
        ps = await conn.prepare("SELECT k FROM apg WHERE k = $1 AND i2 = $2 AND ts > $3 LIMIT $4")
        got = [t.name for t in ps.get_parameters()]
        return got == ["int8", "int2", "timestamp", "int8"] or got
    await attempt("asyncpg: parameter types described from their context", params())

    ph = ", ".join(f"${i + 1}" for i in range(len(COLS)))

    async def insert():
        ins = await conn.prepare(f"INSERT INTO apg VALUES ({ph})")
        await ins.fetch(*ROW.values())
        await ins.fetch(2, *[None] * (len(COLS) - 1))
        return True
    await attempt("asyncpg: prepared INSERT with a parameter of every type, and NULLs", insert())

    async def roundtrip():
        r = await conn.fetchrow("SELECT * FROM apg WHERE k = $1", 1)
        bad = {c: (r[c], ROW[c]) for c in COLS if r is None or r[c] != ROW[c]}
        return not bad or bad
    await attempt("asyncpg: every type read back equal", roundtrip())

    async def where():
        cond = " AND ".join(f"{c} = ${i}" for i, c in enumerate(COLS) if c != "k")
        r = await conn.fetch(f"SELECT k FROM apg WHERE {cond}", *list(ROW.values())[1:])
        return [x["k"] for x in r] == [1] or r
    await attempt("asyncpg: a parameter of every type in WHERE", where())

    async def nulls():
        r = await conn.fetchrow("SELECT k, i4, s, ts, j FROM apg WHERE k = $1", 2)
        return tuple(r) == (2, None, None, None, None) or tuple(r)
    await attempt("asyncpg: NULLs read back", nulls())

    async def arith():
        v = await conn.fetchval("SELECT $1 + 1", 41)
        w = await conn.fetchval("SELECT $1::bigint * 2", 2 ** 40)
        return (v, w) == (42, 2 ** 41) or (v, w)
    await attempt("asyncpg: $1 + 1 is an integer, $1::bigint a bigint", arith())

    async def reuse():
        ps = await conn.prepare("SELECT s, n FROM apg_v WHERE k = $1")
        a = await ps.fetchrow(1)
        b = await ps.fetchrow(2)
        return (tuple(a), b) == ((ROW["s"], ROW["n"]), None) or (a, b)
    await attempt("asyncpg: a prepared statement on the view, run twice", reuse())

    async def cursor():
        await conn.executemany("INSERT INTO apg (k, s) VALUES ($1, $2)", [(k, f"row{k}") for k in range(10, 30)])
        got = []
        async with conn.transaction():
            async for r in conn.cursor("SELECT k FROM apg WHERE k >= $1 ORDER BY k", 10, prefetch=7):
                got.append(r["k"])
            cur = await conn.cursor("SELECT k FROM apg WHERE k >= $1 ORDER BY k", 10)
            first = await cur.fetch(5)
            mid = await cur.fetchrow()
            rest = await cur.fetch(100)
        ok = got == list(range(10, 30)) and [r["k"] for r in first] == list(range(10, 15)) and \
            mid["k"] == 15 and [r["k"] for r in rest] == list(range(16, 30))
        return ok or (got, first, mid, rest)
    await attempt("asyncpg: executemany, and cursors fetching in batches (Execute row limits)", cursor())

    async def txn():
        async with conn.transaction():
            await conn.execute("INSERT INTO apg (k, s) VALUES ($1, $2)", 3, "txn")
        return await conn.fetchval("SELECT s FROM apg WHERE k = $1", 3) == "txn"
    await attempt("asyncpg: a transaction", txn())

    async def error():
        try:
            await conn.fetch("SELECT * FROM no_such_table WHERE k = $1", 1)
            return "no error"
        except asyncpg.exceptions.UndefinedTableError:
            pass
        try:
            async with conn.transaction():
                await conn.fetchval("SELECT 1 / $1", 0)
            return "no error"
        except asyncpg.exceptions.DivisionByZeroError:
            pass
        return await conn.fetchval("SELECT count(*) FROM apg WHERE k < $1", 4) == 3
    await attempt("asyncpg: errors (42P01, 22012 in a transaction) leave the session usable", error())
    await conn.close()
    print("done")   # drivers_test.py: the program ran to its end


if __name__ == "__main__":
    asyncio.run(main())
