#!/usr/bin/python3
"""clients_test.py: real Postgres clients against weir.

Starts an embedded broker and weir on free ports, creates a source and a view, and runs:
- pgbench (-M extended and -M prepared) with a parameterized point query on the view, for a
  bounded number of transactions: none may fail;
- node-postgres (`pg` from npm, installed once into --node-dir): parameters ($1), a named
  prepared statement run twice, a plain query, type OIDs, binary results, an error's SQLSTATE;
- psycopg2 with a bound parameter (psycopg2 interpolates parameters on the client, so this is
  the simple protocol).

    /usr/bin/python3 tests/clients/clients_test.py --weir build/server/weir [--node-dir DIR]

The last line of stdout is "N passed, N failed". Needs pgbench (postgresql-client), nodejs and
npm (scripts/deps.sh --test); npm reaches the npm registry the first time.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
try:
    from weirtest import Stack
except ImportError as e:  # pragma: no cover
    sys.exit(f"clients_test.py: {e}: run it with /usr/bin/python3 (python3-psycopg2)")

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weir", required=True)
    ap.add_argument("--node-dir", default=os.path.join(tempfile.gettempdir(), "weir-node-clients"))
    a = ap.parse_args()
    st = None
    passed = failed = 0

    def check(ok, what, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"ok - {what}")
        else:
            failed += 1
            print(f"not ok - {what}{': ' + str(detail) if detail else ''}")

    try:
        st = Stack(a.weir, prefix="weir-clients-")
        port = st.port
        conn = st.conn
        cur = conn.cursor()
        cur.execute("CREATE SOURCE s (k BIGINT, v BIGINT) WITH (connector = 'kafka', topic = 'clients')")
        cur.execute("CREATE MATERIALIZED VIEW mv AS SELECT k, sum(v) AS total FROM s GROUP BY k")
        cur.execute("INSERT INTO s VALUES (1, 10), (2, 20), (3, 30)")
        cur.execute("FLUSH")

        cur.execute("SELECT total FROM mv WHERE k = %s", (2,))
        check(cur.fetchall() == [(20,)], "psycopg2: a query with a bound parameter")

        # pgbench: a parameterized point query, extended and prepared protocol.
        script = os.path.join(st.tmp, "point.sql")
        with open(script, "w") as f:
            f.write("\\set k random(1, 3)\nSELECT k, total FROM mv WHERE k = :k;\n")
        dsn = f"host=127.0.0.1 port={port} dbname=weir user=weir"
        for mode in ("extended", "prepared"):
            r = subprocess.run(["pgbench", "-n", "-M", mode, "-f", script, "-c", "4", "-j", "2", "-t", "500", dsn],
                               capture_output=True, text=True, timeout=120)
            m = re.search(r"number of transactions actually processed: (\d+)/(\d+)", r.stdout)
            ok = r.returncode == 0 and m and m.group(1) == m.group(2) == "2000"
            tps = re.search(r"tps = ([\d.]+)", r.stdout)
            check(ok, f"pgbench -M {mode}: 2000 parameterized point queries"
                  + (f" ({float(tps.group(1)):.0f} tps)" if tps else ""), (r.stdout + r.stderr)[-400:])

        # node-postgres from npm.
        nd = a.node_dir
        if not os.path.isdir(os.path.join(nd, "node_modules", "pg")):
            os.makedirs(nd, exist_ok=True)
            shutil.copy(os.path.join(HERE, "package.json"), nd)
            r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"], cwd=nd,
                               capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                raise RuntimeError(f"npm install pg failed: {(r.stdout + r.stderr)[-400:]}")
        env = dict(os.environ, NODE_PATH=os.path.join(nd, "node_modules"))
        r = subprocess.run(["node", os.path.join(HERE, "node_pg.js"), str(port)], capture_output=True, text=True,
                           timeout=60, env=env)
        got = {}
        for line in r.stdout.splitlines():
            try:
                d = json.loads(line)
                got[d["name"]] = d["v"]
            except (ValueError, KeyError):
                pass
        check(r.returncode == 0, "node pg: connects and runs", r.stderr[-300:])
        check(got.get("param") == [{"k": "2", "total": "20"}], "node pg: $1 parameter", got.get("param"))
        check(got.get("prepared1") == [{"n": "2"}] and got.get("prepared2") == [{"n": "1"}],
              "node pg: a named prepared statement, run twice", (got.get("prepared1"), got.get("prepared2")))
        check(got.get("plain") == [{"k": "1", "total": "10"}, {"k": "2", "total": "20"}, {"k": "3", "total": "30"}],
              "node pg: a plain query", got.get("plain"))
        # sum(bigint) is numeric, as in PostgreSQL (OID 1700)
        check(got.get("types") == [20, 1700], "node pg: bigint and numeric columns have OIDs 20 and 1700",
              got.get("types"))
        check(got.get("binary_formats") == ["binary"] * 3 and
              got.get("binary") == [{"k": "2", "total": 20, "big": True}],
              "node pg: binary results (bigint, numeric, boolean)",
              (got.get("binary_formats"), got.get("binary")))
        check(got.get("error") == "42P01", "node pg: an error carries its SQLSTATE", got.get("error"))
    except Exception as e:  # a harness failure is a failed test, with the reason
        check(False, "harness", e)
    finally:
        if st:
            st.stop()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
