#!/usr/bin/python3
"""test_grafana.py: the statements Grafana's PostgreSQL data source sends, against weir.

An emulation: Grafana itself is not run. The statements are those of Grafana's data
source (public/app/plugins/datasource/grafana-postgresql-datasource/postgresMetaQuery.ts,
pkg/tsdb/grafana-postgresql-datasource/macros.go), with the macros expanded as its
backend expands them, in the order Grafana sends them:
  - "Save & test": the pgx driver's ping (an empty query, "-- ping") and the version query;
  - the query builder: the timescaledb probe, the schema list, the table list (over
    information_schema.tables, quote_ident, the search_path expansion), the column
    list of a table (information_schema.columns, parse_ident);
  - a time-series panel: $__timeGroupAlias / $__timeFilter / $__time / $__timeEpoch.
Each runs through psycopg2 (simple protocol) and through libpq's extended protocol
(ctypes: Parse of a named statement, Describe, Bind asking for binary results as pgx
does, Execute), and the answers are checked. TAP output.

usage: test_grafana.py WEIR_EXE
"""
import ctypes
import ctypes.util
import datetime
import decimal
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from weirproc import Tap, Weir  # noqa: E402

import psycopg2  # noqa: E402

SEARCH_PATH = """
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          )"""

VERSION = "SELECT current_setting('server_version_num')::int/100 as version"
TIMESCALE = "SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'"
SCHEMAS = """SELECT schema_name AS "name"
    FROM information_schema.schemata
    WHERE schema_name NOT IN ('information_schema',
                              'pg_catalog',
                              'pg_toast',
                              '_timescaledb_cache',
                              '_timescaledb_catalog',
                              '_timescaledb_internal',
                              '_timescaledb_config',
                              'timescaledb_information',
                              'timescaledb_experimental')
    ORDER BY schema_name"""
TABLES = """SELECT
    CASE WHEN %s
      THEN quote_ident(table_name)
      ELSE quote_ident(table_schema) || '.' || quote_ident(table_name)
    END AS "table"
    FROM information_schema.tables
    WHERE quote_ident(table_schema) NOT IN ('information_schema',
                             'pg_catalog',
                             '_timescaledb_cache',
                             '_timescaledb_catalog',
                             '_timescaledb_internal',
                             '_timescaledb_config',
                             'timescaledb_information',
                             'timescaledb_experimental')
    ORDER BY CASE WHEN %s THEN 0 ELSE 1 END, 1""" % (SEARCH_PATH, SEARCH_PATH)
TABLES_IN = """SELECT quote_ident(table_name) AS "table"
      FROM information_schema.tables
      WHERE quote_ident(table_schema) = 'public'
      ORDER BY 1"""


def columns(table):
    lit = "'" + table.replace("'", "''") + "'"
    return """SELECT quote_ident(column_name) AS "column", data_type AS "type"
    FROM information_schema.columns
    WHERE
      CASE WHEN array_length(parse_ident(%s),1) = 2
        THEN quote_ident(table_schema) = (parse_ident(%s))[1]
          AND quote_ident(table_name) = (parse_ident(%s))[2]
        ELSE quote_ident(table_name) = %s
          AND %s
      END""" % (lit, lit, lit, lit, SEARCH_PATH)


# A time-series panel: the builder's SQL (toRawSql) for avg(v) per minute, and the
# raw-SQL forms of Grafana's documentation, with the macros expanded by macros.go
# for the range 2024-01-01T00:00:00Z .. 2024-01-01T01:00:00Z.
FILTER = "ts BETWEEN '2024-01-01T00:00:00Z' AND '2024-01-01T01:00:00Z'"
PANEL = ('SELECT floor(extract(epoch from ts)/60)*60 AS "time", avg(v) AS "v" FROM mv WHERE %s '
         'GROUP BY 1 ORDER BY 1 LIMIT 50 ' % FILTER)
PANEL_METRIC = ('SELECT floor(extract(epoch from ts)/300)*300 AS "time", host AS metric, avg(v) AS value '
                'FROM mv WHERE %s GROUP BY 1, 2 ORDER BY 1, 2' % FILTER)
PANEL_TIME = 'SELECT ts AS "time", v FROM mv WHERE %s ORDER BY 1' % FILTER
PANEL_EPOCH = 'SELECT extract(epoch from ts) as "time", v FROM mv WHERE %s ORDER BY 1' % FILTER


class LibPQ:
    """The extended protocol through libpq, the way pgx runs a query: a named
    statement (Parse), its description, then Bind with binary result formats."""

    def __init__(self, port):
        self.pq = ctypes.CDLL(ctypes.util.find_library("pq") or "libpq.so.5")
        pq = self.pq
        pq.PQconnectdb.restype = ctypes.c_void_p
        pq.PQconnectdb.argtypes = [ctypes.c_char_p]
        for f in ("PQstatus", "PQresultStatus", "PQntuples", "PQnfields", "PQgetlength", "PQgetisnull",
                  "PQfformat"):
            getattr(pq, f).restype = ctypes.c_int
        pq.PQstatus.argtypes = [ctypes.c_void_p]
        pq.PQprepare.restype = ctypes.c_void_p
        pq.PQprepare.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
        pq.PQdescribePrepared.restype = ctypes.c_void_p
        pq.PQdescribePrepared.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        pq.PQexecPrepared.restype = ctypes.c_void_p
        pq.PQexecPrepared.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p,
                                      ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        pq.PQexec.restype = ctypes.c_void_p
        pq.PQexec.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        pq.PQresultStatus.argtypes = [ctypes.c_void_p]
        pq.PQresultErrorMessage.restype = ctypes.c_char_p
        pq.PQresultErrorMessage.argtypes = [ctypes.c_void_p]
        pq.PQntuples.argtypes = pq.PQnfields.argtypes = [ctypes.c_void_p]
        pq.PQfname.restype = ctypes.c_char_p
        pq.PQfname.argtypes = [ctypes.c_void_p, ctypes.c_int]
        pq.PQftype.restype = ctypes.c_uint
        pq.PQftype.argtypes = [ctypes.c_void_p, ctypes.c_int]
        pq.PQfformat.argtypes = [ctypes.c_void_p, ctypes.c_int]
        pq.PQgetvalue.restype = ctypes.POINTER(ctypes.c_char)
        pq.PQgetvalue.argtypes = pq.PQgetlength.argtypes = pq.PQgetisnull.argtypes = [
            ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        pq.PQclear.argtypes = [ctypes.c_void_p]
        pq.PQfinish.argtypes = [ctypes.c_void_p]
        self.conn = pq.PQconnectdb(("host=127.0.0.1 port=%d dbname=weir user=weir sslmode=disable" % port).encode())
        if pq.PQstatus(self.conn) != 0:
            raise RuntimeError("libpq cannot connect")
        self.n = 0

    def empty_query(self, sql):
        r = self.pq.PQexec(self.conn, sql.encode())
        st = self.pq.PQresultStatus(r)
        self.pq.PQclear(r)
        return st == 0   # PGRES_EMPTY_QUERY

    def query(self, sql, binary):
        """Rows (decoded), column names, and the formats the server used."""
        pq = self.pq
        self.n += 1
        name = ("stmtcache_%d" % self.n).encode()
        r = pq.PQprepare(self.conn, name, sql.encode(), 0, None)
        if pq.PQresultStatus(r) != 1:   # PGRES_COMMAND_OK
            msg = pq.PQresultErrorMessage(r)
            pq.PQclear(r)
            raise RuntimeError(msg.decode())
        pq.PQclear(r)
        pq.PQclear(pq.PQdescribePrepared(self.conn, name))
        r = pq.PQexecPrepared(self.conn, name, 0, None, None, None, 1 if binary else 0)
        if pq.PQresultStatus(r) != 2:   # PGRES_TUPLES_OK
            msg = pq.PQresultErrorMessage(r)
            pq.PQclear(r)
            raise RuntimeError(msg.decode())
        nf = pq.PQnfields(r)
        names = [pq.PQfname(r, j).decode() for j in range(nf)]
        formats = [pq.PQfformat(r, j) for j in range(nf)]
        rows = []
        for i in range(pq.PQntuples(r)):
            row = []
            for j in range(nf):
                if pq.PQgetisnull(r, i, j):
                    row.append(None)
                    continue
                raw = ctypes.string_at(pq.PQgetvalue(r, i, j), pq.PQgetlength(r, i, j))
                row.append(decode(pq.PQftype(r, j), raw) if formats[j] == 1 else raw.decode())
            rows.append(tuple(row))
        pq.PQclear(r)
        return rows, names, formats

    def close(self):
        self.pq.PQfinish(self.conn)


decimal.getcontext().prec = 100  # 38-digit numerics and their base-10000 sums, exactly
PG_EPOCH = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)


def decode(oid, raw):
    """PostgreSQL's binary formats, as a driver decodes them."""
    if oid == 20:
        return struct.unpack(">q", raw)[0]
    if oid == 23:
        return struct.unpack(">i", raw)[0]
    if oid == 701:
        return struct.unpack(">d", raw)[0]
    if oid in (1114, 1184):
        return PG_EPOCH + datetime.timedelta(microseconds=struct.unpack(">q", raw)[0])
    if oid == 1700:
        # numeric: ndigits, weight, sign, dscale, then base-10000 digits
        nd, weight, sign, dscale = struct.unpack(">hhHH", raw[:8])
        digits = struct.unpack(">%dH" % nd, raw[8:8 + 2 * nd])
        assert len(raw) == 8 + 2 * nd and sign in (0, 0x4000) and all(d < 10000 for d in digits), raw
        v = sum((decimal.Decimal(d) * decimal.Decimal(10000) ** (weight - i) for i, d in enumerate(digits)),
                decimal.Decimal(0))
        v = v.quantize(decimal.Decimal(1).scaleb(-dscale)) if dscale else v.quantize(decimal.Decimal(1))
        return -v if sign == 0x4000 else v
    return raw.decode()


def main():
    t = Tap()
    w = Weir(sys.argv[1])
    lp = None
    try:
        conn = psycopg2.connect(host="127.0.0.1", port=w.port, dbname="weir", user="weir", sslmode="disable")
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute("CREATE TABLE m (id BIGINT PRIMARY KEY, ts TIMESTAMPTZ, host VARCHAR, v DOUBLE PRECISION)")
        cur.execute("INSERT INTO m VALUES (1, '2024-01-01 00:00:10+00', 'a', 1.0), "
                    "(2, '2024-01-01 00:00:50+00', 'b', 3.0), (3, '2024-01-01 00:01:30+00', 'a', 5.0), "
                    "(4, '2024-01-01 02:00:00+00', 'a', 100.0)")
        cur.execute("CREATE MATERIALIZED VIEW mv AS SELECT id, ts, host, v FROM m")
        lp = LibPQ(w.port)

        def both(sql, want, what, binary=False, check=None):
            """Runs sql through psycopg2 and through libpq's extended protocol."""
            try:
                cur.execute(sql)
                got = cur.fetchall()
            except psycopg2.Error as e:
                got = e
            t.ok(got == want if check is None else check(got), what + " (psycopg2)", got)
            try:
                got, names, formats = lp.query(sql, binary)
            except RuntimeError as e:
                got, formats = e, []
            if binary:
                t.ok(formats and all(f == 1 for f in formats), what + ": binary results as pgx asks", formats)
            t.ok(got == want if check is None else check(got), what + " (extended protocol)", got)

        t.ok(lp.empty_query("-- ping"), "pgx's ping (-- ping): an empty query")
        both(VERSION, None, "version query",
             check=lambda g: isinstance(g, list) and [str(x[0]) for x in g] == ["1500"])
        both(TIMESCALE, [], "timescaledb probe: no rows")
        both(SCHEMAS, [("public",)], "schema list", check=lambda g: isinstance(g, list) and ("public",) in g)
        both(TABLES, None, "table list (search_path expansion, quote_ident)",
             check=lambda g: isinstance(g, list) and ("mv",) in g and ("m",) in g
             and not any("information_schema" in x[0] or "pg_" in x[0] for x in g))
        both(TABLES_IN, None, "table list of schema public",
             check=lambda g: isinstance(g, list) and ("mv",) in g)
        want_cols = [("id", "bigint"), ("ts", "timestamp with time zone"), ("host", "character varying"),
                     ("v", "double precision")]
        both(columns("mv"), want_cols, "column list of mv")
        both(columns("public.mv"), want_cols, "column list of public.mv (parse_ident)")
        both("SELECT version()", None, "SELECT version()",
             check=lambda g: isinstance(g, list) and str(g[0][0]).startswith("PostgreSQL 15"))

        t0 = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
        both(PANEL, [(t0.timestamp(), 2.0), (t0.timestamp() + 60, 5.0)], "panel: $__timeGroupAlias(ts, 1m), avg(v)",
             binary=True)
        both(PANEL_METRIC, [(t0.timestamp(), "a", 3.0), (t0.timestamp(), "b", 3.0)],
             "panel: $__timeGroupAlias(ts, 5m), host AS metric", binary=True)
        ts = [t0 + datetime.timedelta(seconds=s) for s in (10, 50, 90)]
        both(PANEL_TIME, list(zip(ts, [1.0, 3.0, 5.0])), "panel: $__time(ts), $__timeFilter(ts)", binary=True)
        both(PANEL_EPOCH, [(x.timestamp(), y) for x, y in zip(ts, [1.0, 3.0, 5.0])], "panel: $__timeEpoch(ts)",
             binary=True)

        # NUMERIC: psycopg2 decodes OID 1700 as Decimal (text); binary results
        # carry Postgres's base-10000 format with the display scale.
        cur.execute("CREATE TABLE prices (id INT PRIMARY KEY, p NUMERIC(20,4), q NUMERIC)")
        cur.execute("INSERT INTO prices VALUES (1, 12345.678, -0.0001), (2, 0, 99999999999999999999999999999999999999), "
                    "(3, -1.5, 10000.00), (4, NULL, 1e-38)")
        D = decimal.Decimal
        want = [(1, D("12345.6780"), D("-0.0001")), (2, D("0.0000"), D("99999999999999999999999999999999999999")),
                (3, D("-1.5000"), D("10000.00")), (4, None, D("1E-38"))]
        both("SELECT id, p, q FROM prices ORDER BY id", want, "numeric columns", binary=True,
             check=lambda g: g == want and all(str(a) == str(b) for r, s in zip(g, want) for a, b in zip(r, s)))
        both("SELECT sum(p), avg(p) FROM prices", [(D("12344.1780"), D("4114.7260000000000000"))],
             "numeric aggregates", binary=True)

        cur.execute("SET statement_timeout = '30s'")
        cur.execute("SHOW statement_timeout")
        t.ok(cur.fetchone() == ("30s",), "SET and SHOW")
        conn.close()
        lp.close()
        lp = None
        t.ok(w.stop() == 0, "clean shutdown")
    except Exception as e:  # a harness failure is a failed test, with the reason
        t.ok(False, "harness", repr(e) + "\n" + w.log())
    finally:
        if lp:
            lp.close()
        w.cleanup()
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
