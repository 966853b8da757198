#!/usr/bin/python3
"""test_catalog.py: psql's \\d family and psycopg2 against weir's pg_catalog.

Starts weir on a free port with a nexmark source, a materialized view and a
blackhole sink, runs psql 15 describe commands and compares their output with
expected/catalog.out (run with --update to rewrite it after a deliberate
change), then introspects and queries with psycopg2, libpq's extended
protocol and SQLAlchemy's reflection. TAP output.

usage: test_catalog.py WEIR_EXE [--update]
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from weirproc import Tap, Weir  # noqa: E402

import psycopg2  # noqa: E402

SETUP = [
    "CREATE SOURCE bid (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP, "
    "WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND) WITH (connector = 'nexmark', "
    "nexmark.table.type = 'bid', nexmark.event.num = '1000')",
    "CREATE MATERIALIZED VIEW top AS SELECT auction, count(*) AS n, max(price) AS top FROM bid GROUP BY auction",
    "CREATE SINK top_out FROM top WITH (connector = 'blackhole')",
    "CREATE TABLE acct (id BIGINT PRIMARY KEY, owner TEXT NOT NULL, balance BIGINT)",
    "FLUSH",
]

COMMANDS = ["\\d", "\\dt", "\\dv", "\\dm", "\\dE", "\\l", "\\dn", "\\du", "\\d bid", "\\d acct", "\\dt+ acct", "\\d top", "\\d+ top",
            "\\d top_out", "\\dvS weir_views", "\\d weir_checkpoints", "\\d nosuch"]


def psql(w, *args):
    env = dict(os.environ, PGCONNECT_TIMEOUT="10")
    for k in ("PGPASSWORD", "PGSSLMODE", "PGUSER", "PGDATABASE", "PGHOST", "PGPORT", "PGOPTIONS"):
        env.pop(k, None)
    r = subprocess.run(["psql", "-X", "-P", "pager=off", "-h", "127.0.0.1", "-p", str(w.port), "-U", "weir",
                        "weir"] + list(args), capture_output=True, text=True, env=env, timeout=60)
    return r.returncode, r.stdout + r.stderr


def exec_params(port, sql, param):
    """One PQexecParams call through libpq (ctypes): the first row, as text."""
    import ctypes
    pq = ctypes.CDLL("libpq.so.5")
    pq.PQconnectdb.restype = ctypes.c_void_p
    pq.PQexecParams.restype = ctypes.c_void_p
    pq.PQexecParams.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p,
                                ctypes.POINTER(ctypes.c_char_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    pq.PQgetvalue.restype = ctypes.c_char_p
    pq.PQgetvalue.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    pq.PQresultErrorMessage.restype = ctypes.c_char_p
    pq.PQresultErrorMessage.argtypes = [ctypes.c_void_p]
    pq.PQntuples.argtypes = [ctypes.c_void_p]
    pq.PQclear.argtypes = [ctypes.c_void_p]
    pq.PQfinish.argtypes = [ctypes.c_void_p]
    conn = pq.PQconnectdb(("host=127.0.0.1 port=%d dbname=weir user=weir sslmode=disable" % port).encode())
    vals = (ctypes.c_char_p * 1)(param.encode())
    res = pq.PQexecParams(conn, sql.encode(), 1, None, vals, None, None, 0)
    if pq.PQntuples(res) < 1:
        out = pq.PQresultErrorMessage(res).decode()
    else:
        out = (pq.PQgetvalue(res, 0, 0).decode(), pq.PQgetvalue(res, 0, 1).decode())
    pq.PQclear(res)
    pq.PQfinish(conn)
    return out


def main():
    exe = sys.argv[1]
    update = "--update" in sys.argv
    here = os.path.dirname(os.path.abspath(__file__))
    expected_path = os.path.join(here, "expected", "catalog.out")
    t = Tap()
    w = Weir(exe)
    try:
        for sql in SETUP:
            rc, out = psql(w, "-q", "-c", sql)
            t.ok(rc == 0, "setup: " + sql[:40], out)

        got = []
        for cmd in COMMANDS:
            rc, out = psql(w, "-c", cmd)
            got.append("=== %s\n%s" % (cmd, out))
        got = "".join(got)
        if update:
            with open(expected_path, "w") as f:
                f.write(got)
        with open(expected_path) as f:
            want = f.read()
        if not t.ok(got == want, "psql \\d family output matches expected/catalog.out"):
            import difflib
            for line in difflib.unified_diff(want.splitlines(), got.splitlines(), "expected", "got", lineterm=""):
                print("# " + line)

        # Errors carry Postgres' SQLSTATEs.
        conn = psycopg2.connect(host="127.0.0.1", port=w.port, dbname="weir", user="weir")
        conn.autocommit = True
        cur = conn.cursor()
        for sql, state in [("SELECT * FROM pg_catalog.pg_nosuch", "42P01"),
                           ("SELECT pg_catalog.nosuch_function()", "42883"),
                           ("SELECT 'nosuch'::regclass", "42P01"),
                           ("SELECT 1 FROM pg_class JOIN top ON true", "0A000"),
                           ("SELECT relname FROM pg_class WHERE relname ~ '('", "2201B")]:
            try:
                cur.execute(sql)
                t.ok(False, "error %s: %s" % (state, sql), "no error")
            except psycopg2.Error as e:
                t.ok(e.pgcode == state, "error %s: %s" % (state, sql), "%s %s" % (e.pgcode, e))

        # psycopg2: introspection through information_schema and pg_catalog.
        cur.execute("SELECT table_name, table_type FROM information_schema.tables "
                    "WHERE table_schema = %s ORDER BY 1", ("public",))
        rows = cur.fetchall()
        t.ok(rows == [("acct", "BASE TABLE"), ("bid", "BASE TABLE"), ("top", "VIEW"), ("top_out", "FOREIGN")],
             "information_schema.tables", rows)
        cur.execute("SELECT tc.constraint_type, k.column_name FROM information_schema.table_constraints tc "
                    "JOIN information_schema.key_column_usage k ON k.constraint_name = tc.constraint_name "
                    "WHERE tc.table_name = 'acct'")
        rows = cur.fetchall()
        t.ok(rows == [("PRIMARY KEY", "id")], "a table's primary key in information_schema", rows)
        cur.execute("SELECT column_name, data_type, ordinal_position FROM information_schema.columns "
                    "WHERE table_name = %s ORDER BY ordinal_position", ("top",))
        rows = cur.fetchall()
        t.ok(rows == [("auction", "bigint", 1), ("n", "bigint", 2), ("top", "bigint", 3)],
             "information_schema.columns", rows)
        t.ok([d.type_code for d in cur.description] == [19, 1043, 23],
             "information_schema columns are typed name, varchar, int4", cur.description)
        cur.execute("SELECT table_name, view_definition FROM information_schema.views WHERE table_schema = 'public'")
        rows = cur.fetchall()
        t.ok(len(rows) == 1 and rows[0][0] == "top" and rows[0][1].startswith("SELECT auction"),
             "information_schema.views", rows)
        cur.execute("SELECT c.oid, c.relkind, c.relhasindex, c.relnatts FROM pg_catalog.pg_class c "
                    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = 'public' AND c.relname = %s", ("top",))
        oid, kind, hasindex, natts = cur.fetchone()
        t.ok(kind == "m" and hasindex is False and natts == 3 and oid > 16384, "pg_class row of a view",
             (oid, kind, hasindex, natts))
        t.ok([d.type_code for d in cur.description] == [26, 18, 16, 21], "pg_class columns typed oid, char, bool, int2",
             cur.description)
        cur.execute("SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), t.typname "
                    "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
                    "WHERE a.attrelid = 'bid'::regclass AND a.attnum > 0 ORDER BY a.attnum")
        rows = cur.fetchall()
        t.ok(rows == [("auction", "bigint", "int8"), ("bidder", "bigint", "int8"), ("price", "bigint", "int8"),
                      ("date_time", "timestamp without time zone", "timestamp")], "pg_attribute of a source", rows)
        cur.execute("SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relkind = ANY (ARRAY['r', 'm']) "
                    "AND c.relname OPERATOR(pg_catalog.~*) '^(T|B)' COLLATE pg_catalog.default ORDER BY 1")
        rows = cur.fetchall()
        t.ok(rows == [("bid",), ("top",)], "ANY(ARRAY[...]), OPERATOR(~*), COLLATE", rows)
        cur.execute("SELECT c.relname, pg_catalog.obj_description(c.oid, 'pg_class'), pg_table_size(c.oid) > 0 "
                    "FROM pg_class c WHERE c.relnamespace = 2200 ORDER BY 1")
        rows = cur.fetchall()
        t.ok(rows == [("acct", "table, key (id)", 0), ("bid", "source: nexmark bid events", 0),
                      ("top", "updating, key (auction), running", 1),
                      ("top_out", "sink from top to blackhole", 0)], "descriptions and sizes", rows)
        cur.execute("SELECT relname FROM pg_catalog.pg_class WHERE relkind = 'v' AND relnamespace = 11 "
                    "AND relname LIKE 'weir%'")
        names = {r[0] for r in cur.fetchall()}
        t.ok({"weir_views", "weir_sinks", "weir_checkpoints", "weir_state"} <= names,
             "every system view is in pg_class", names)
        cur.execute("SELECT current_database(), current_user, current_schema(), "
                    "current_setting('server_version_num'), pg_catalog.version() LIKE 'PostgreSQL 15%'")
        row = cur.fetchone()
        t.ok(row[:4] == ("weir", "weir", "public", "150000") and row[4] == 1, "session functions", row)
        cur.execute("SELECT name, setting FROM pg_settings WHERE name = %s", ("timezone",))
        t.ok(cur.fetchall() == [("timezone", "UTC")], "pg_settings")
        other = psycopg2.connect(host="127.0.0.1", port=w.port, dbname="weir", user="weir",
                                 application_name="other_app")
        other.cursor().execute("SELECT 42")   # psycopg2 opened a transaction first
        cur.execute("SELECT application_name, state, query, pid = pg_backend_pid(), pid "
                    "FROM pg_stat_activity ORDER BY application_name DESC")
        rows = cur.fetchall()
        t.ok(len(rows) == 2 and rows[0][:3] == ("other_app", "idle in transaction", "SELECT 42") and
             rows[0][3] == 0 and rows[1][1] == "active" and rows[1][3] == 1 and rows[1][4] == conn.get_backend_pid(),
             "pg_stat_activity: sessions, states, queries, pids", rows)
        other.close()
        cur.execute("SET application_name = 'catalog_test'")
        cur.execute("SELECT setting FROM pg_catalog.pg_settings WHERE name = 'application_name'")
        t.ok(cur.fetchall() == [("catalog_test",)], "pg_settings follows SET")

        # ... and the view's rows, through weir's own planner.
        cur.execute("SELECT auction, n FROM top ORDER BY auction LIMIT 2")
        rows = cur.fetchall()
        t.ok(len(rows) == 2 and all(isinstance(v, int) for r in rows for v in r), "query a view", rows)
        t.ok([d.type_code for d in cur.description] == [20, 20], "view columns typed int8", cur.description)

        # Extended protocol with a parameter (psycopg2 interpolates; libpq's PQexecParams does not).
        got = exec_params(w.port, "SELECT relname, relnatts FROM pg_catalog.pg_class WHERE relname = $1", "top")
        t.ok(got == ("top", "3"), "extended protocol with a parameter", got)
        conn.close()

        # SQLAlchemy's PostgreSQL dialect: connect (it asks SHOW TRANSACTION
        # ISOLATION LEVEL, version(), current_schema()), reflect, query.
        import sqlalchemy as sa
        eng = sa.create_engine("postgresql+psycopg2://weir@127.0.0.1:%d/weir?sslmode=disable" % w.port)
        insp = sa.inspect(eng)
        t.ok(sorted(insp.get_table_names()) == ["acct", "bid"] and insp.get_view_names() == ["top"],
             "sqlalchemy: tables and views", (insp.get_table_names(), insp.get_view_names()))
        cols = [(c["name"], str(c["type"]), c["nullable"]) for c in insp.get_columns("top")]
        t.ok(cols == [("auction", "BIGINT", True), ("n", "BIGINT", True), ("top", "BIGINT", True)],
             "sqlalchemy: columns", cols)
        t.ok(insp.get_pk_constraint("top")["constrained_columns"] == [] and insp.get_indexes("top") == [],
             "sqlalchemy: no keys, no indexes")
        t.ok(insp.get_view_definition("top").startswith("SELECT auction"), "sqlalchemy: view definition")
        with eng.connect() as c:
            top = sa.Table("top", sa.MetaData(), autoload_with=c)
            rows = c.execute(sa.select(top.c.auction, top.c.n).order_by(top.c.auction).limit(2)).fetchall()
            t.ok(len(rows) == 2 and rows[0][0] < rows[1][0], "sqlalchemy: reflected table queried", rows)
        eng.dispose()
    finally:
        rc = w.stop()
        t.ok(rc == 0, "server exits cleanly", w.log())
        w.cleanup()
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
