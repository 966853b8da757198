#!/usr/bin/python3
"""test_session.py: statement_timeout and the idle timeouts, with psycopg2.

A statement that outlives statement_timeout ends with 57014 "canceling
statement due to statement timeout" (a SUBSCRIBE, a slow catalog query) and
the session goes on; a session idle past idle_session_timeout is closed with
FATAL 57P05, one idle inside BEGIN past idle_in_transaction_session_timeout
with FATAL 25P03; pg_cancel_backend and pg_terminate_backend reach a
session found in pg_stat_activity. TAP output.

usage: test_session.py WEIR_EXE
"""
import io
import os
import socket
import threading
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from weirproc import Tap, Weir  # noqa: E402

import psycopg2  # noqa: E402


def unsolicited(conn):
    """What the server sent on an idle connection (libpq would not show it
    before failing the next statement, with Postgres as with weir)."""
    s = socket.fromfd(conn.fileno(), socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        return s.recv(4096)
    except OSError as e:
        return repr(e).encode()
    finally:
        s.close()


def main():
    t = Tap()
    w = Weir(sys.argv[1])
    try:
        conn = psycopg2.connect(host="127.0.0.1", port=w.port, dbname="weir", user="weir", sslmode="disable")
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute("CREATE SOURCE bid (auction BIGINT, price BIGINT, date_time TIMESTAMP) WITH ("
                    "connector = 'nexmark', nexmark.table.type = 'bid', nexmark.event.num = '100')")
        cur.execute("CREATE MATERIALIZED VIEW top AS SELECT auction, max(price) AS top FROM bid GROUP BY auction")
        for bad in ["'abc'", "'-1'", "'5 parsecs'"]:
            try:
                cur.execute("SET statement_timeout = " + bad)
                t.ok(False, "SET statement_timeout = %s refused" % bad)
            except psycopg2.Error as e:
                t.ok(e.pgcode == "22023", "SET statement_timeout = %s refused (22023)" % bad, e)
        cur.execute("SET statement_timeout = '300ms'")
        cur.execute("SHOW statement_timeout")
        t.ok(cur.fetchone() == ("300ms",), "SHOW statement_timeout")

        start = time.time()
        try:
            cur.copy_expert("COPY (SUBSCRIBE top) TO STDOUT", io.StringIO())
            t.ok(False, "SUBSCRIBE stopped by statement_timeout")
        except psycopg2.Error as e:
            took = time.time() - start
            t.ok(e.pgcode == "57014" and "statement timeout" in str(e) and 0.25 < took < 5,
                 "SUBSCRIBE stopped by statement_timeout (57014)", "%s %s %.2fs" % (e.pgcode, e, took))
        try:
            cur.execute("SELECT count(*) FROM pg_catalog.generate_series(1, 1000000) a, "
                        "pg_catalog.generate_series(1, 1000000) b")
            t.ok(False, "slow catalog query stopped")
        except psycopg2.Error as e:
            t.ok(e.pgcode == "57014" and "statement timeout" in str(e), "slow catalog query stopped (57014)", e)
        cur.execute("SELECT count(*) FROM top")
        t.ok(cur.fetchone()[0] > 0, "the session goes on after a timeout")
        cur.execute("SET statement_timeout = 0")
        cur.execute("SELECT count(*) FROM pg_catalog.pg_class")
        t.ok(cur.fetchone()[0] > 0, "statement_timeout = 0 lifts the limit")

        # pg_cancel_backend / pg_terminate_backend, found through pg_stat_activity.
        victim = psycopg2.connect(host="127.0.0.1", port=w.port, dbname="weir", user="weir", sslmode="disable",
                                  application_name="victim")
        victim.autocommit = True
        outcome = {}

        def stream():
            try:
                victim.cursor().copy_expert("COPY (SUBSCRIBE top) TO STDOUT", io.StringIO())
                outcome["err"] = None
            except psycopg2.Error as e:
                outcome["err"] = e

        th = threading.Thread(target=stream)
        th.start()
        cur.execute("RESET statement_timeout")
        pid = None
        for _ in range(400):   # up to 20 s on a loaded machine
            cur.execute("SELECT pid FROM pg_stat_activity WHERE application_name = 'victim' AND state = 'active'")
            row = cur.fetchone()
            if row:
                pid = row[0]
                break
            time.sleep(0.05)
        t.ok(pid is not None, "the running SUBSCRIBE is in pg_stat_activity")
        cur.execute("SELECT pg_cancel_backend(%s), pg_cancel_backend(-1)", (pid,))
        t.ok(cur.fetchone() == (1, 0), "pg_cancel_backend finds the session (and not a made-up pid)")
        th.join(20)
        e = outcome.get("err")
        t.ok(e is not None and e.pgcode == "57014" and "user request" in str(e),
             "pg_cancel_backend stops its statement (57014)", e)
        cur.execute("SELECT pg_terminate_backend(%s)", (pid,))
        t.ok(cur.fetchone() == (1,), "pg_terminate_backend finds the session")
        got = unsolicited(victim)
        t.ok(b"C57P01\0" in got, "the terminated session gets FATAL 57P01", got)
        victim.close()

        cur.execute("SET idle_session_timeout = 300")
        time.sleep(1.0)
        got = unsolicited(conn)
        t.ok(b"C57P05\0" in got and b"idle-session timeout" in got, "idle session closed with FATAL 57P05", got)
        try:
            cur.execute("SELECT 1")
            t.ok(False, "the closed session refuses statements")
        except psycopg2.Error:
            t.ok(True, "the closed session refuses statements")
        conn3 = psycopg2.connect(host="127.0.0.1", port=w.port, dbname="weir", user="weir", sslmode="disable")
        conn3.autocommit = True
        c3 = conn3.cursor()
        c3.execute("SET idle_in_transaction_session_timeout = '300ms'")
        time.sleep(0.5)
        c3.execute("SELECT 1")
        t.ok(conn3.info.transaction_status == 0, "outside a transaction the idle-in-transaction limit does not apply")
        c3.execute("BEGIN")
        t.ok(conn3.info.transaction_status == 2, "ReadyForQuery reports T after BEGIN", conn3.info.transaction_status)
        time.sleep(1.0)
        got = unsolicited(conn3)
        t.ok(b"C25P03\0" in got and b"idle-in-transaction timeout" in got,
             "idle in transaction: closed with FATAL 25P03", got)
        conn2 = psycopg2.connect(host="127.0.0.1", port=w.port, dbname="weir", user="weir", sslmode="disable")
        c2 = conn2.cursor()
        c2.execute("SET idle_session_timeout = '2s'")
        time.sleep(0.5)
        c2.execute("SELECT 1")
        t.ok(c2.fetchone() == (1,), "a session active within idle_session_timeout stays")
        conn2.close()
    finally:
        rc = w.stop()
        t.ok(rc == 0, "server exits cleanly", w.log())
        w.cleanup()
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
