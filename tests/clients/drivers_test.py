#!/usr/bin/python3
"""drivers_test.py: one Postgres driver, unmodified, against a fresh weir.

    /usr/bin/python3 tests/clients/drivers_test.py --weir build/server/weir --client NAME --work DIR

NAME is one of:
  psycopg  psycopg 3 (python3-psycopg): server-side prepared statements, text and binary
  asyncpg  asyncpg (python3-asyncpg): prepared statements typed by ParameterDescription, cursors
  jdbc     pgjdbc (libpostgresql-jdbc-java, default-jdk-headless): PreparedStatement of every
           type, setFetchSize, DatabaseMetaData.getTables/getColumns
  libpq    Go's database/sql with lib/pq (golang-github-lib-pq-dev, golang-go), built offline
           from Debian's GOPATH
  pgx      Go's pgx v4 (golang-github-jackc-pgx-v4-dev): binary parameters typed by
           ParameterDescription, built the same way

Starts an embedded broker and weir on free ports (tests/lib/weirtest.py), builds the client
program if it is compiled (into --work), runs it with the server's port and passes its
"ok - ..." / "not ok - ..." lines through. Each program creates a table and a materialized
view, inserts and queries with parameters of every common type (int2/4/8, numeric, float8,
text, bool, timestamp, timestamptz, date, interval, bytea, jsonb, NULLs), runs a transaction
and an error that must leave the session usable; it prints "done" at its end, so a program
that stops early fails. The last line is "N passed, N failed"; the exit status is 1 when any
check failed. The packages come from scripts/deps.sh --test.
"""
import argparse
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
try:
    from weirtest import Stack
except ImportError as e:  # pragma: no cover
    sys.exit(f"drivers_test.py: {e}: run it with /usr/bin/python3 (python3-psycopg2)")

HERE = os.path.dirname(os.path.abspath(__file__))
PGJDBC = "/usr/share/java/postgresql.jar"   # libpostgresql-jdbc-java
GOPATH = "/usr/share/gocode"                # golang-github-lib-pq-dev, golang-github-jackc-pgx-v4-dev
CLIENT_TIMEOUT = 60                         # s; each program takes a few seconds


def build(client, work):
    """The command that runs client's program (without the port), building it first if needed."""
    if client in ("psycopg", "asyncpg"):
        return ["/usr/bin/python3", os.path.join(HERE, {"psycopg": "psycopg3_client.py",
                                                        "asyncpg": "asyncpg_client.py"}[client])]
    if client == "jdbc":
        out = os.path.join(work, "jdbc-classes")
        os.makedirs(out, exist_ok=True)
        for tool in ("javac", "java"):
            if not shutil.which(tool):
                raise RuntimeError(f"{tool} not found: install default-jdk-headless (scripts/deps.sh --test)")
        if not os.path.exists(PGJDBC):
            raise RuntimeError(f"{PGJDBC} not found: install libpostgresql-jdbc-java (scripts/deps.sh --test)")
        subprocess.run(["javac", "-d", out, "-cp", PGJDBC, os.path.join(HERE, "jdbc", "JdbcClient.java")],
                       check=True, capture_output=True, text=True, timeout=120)
        return ["java", "-cp", f"{out}:{PGJDBC}", "JdbcClient"]
    if client in ("libpq", "pgx"):
        if not shutil.which("go"):
            raise RuntimeError("go not found: install golang-go (scripts/deps.sh --test)")
        exe = os.path.join(work, f"{client}_client")
        # Offline: GOPATH mode over Debian's packaged sources, nothing fetched.
        env = dict(os.environ, GOPATH=GOPATH, GO111MODULE="off", GOFLAGS="", GOPROXY="off",
                   GOCACHE=os.path.join(work, "gocache"))
        subprocess.run(["go", "build", "-o", exe, "."], cwd=os.path.join(HERE, client), env=env, check=True,
                       capture_output=True, text=True, timeout=300)
        return [exe]
    raise ValueError(f"unknown client {client}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weir", required=True)
    ap.add_argument("--client", required=True, choices=["psycopg", "asyncpg", "jdbc", "libpq", "pgx"])
    ap.add_argument("--work", default="/tmp/weir-drivers")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    passed = failed = 0
    st = None
    try:
        cmd = build(a.client, a.work)
        st = Stack(a.weir, prefix=f"weir-{a.client}-")
        r = subprocess.run(cmd + [str(st.port)], capture_output=True, text=True, timeout=CLIENT_TIMEOUT)
        lines = r.stdout.splitlines()
        for line in lines:
            if line.startswith("ok - "):
                passed += 1
            elif line.startswith("not ok - "):
                failed += 1
            else:
                continue
            print(line)
        if r.returncode != 0 or "done" not in lines:
            failed += 1
            print(f"not ok - {a.client}: the program ran to its end (exit {r.returncode}): {r.stderr[-1500:]}")
    except subprocess.CalledProcessError as e:  # a build that failed
        failed += 1
        print(f"not ok - {a.client}: build: {(e.stdout or '') + (e.stderr or '')}"[-2000:])
    except Exception as e:  # a harness failure (or a hung client: TimeoutExpired) is a failed test
        failed += 1
        print(f"not ok - {a.client}: harness: {e}")
    finally:
        if st:
            st.stop()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
