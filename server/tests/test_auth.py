#!/usr/bin/python3
"""test_auth.py: users, SCRAM-SHA-256 and TLS with real clients (psql, libpq, psycopg2).

Creates users over a trusted loopback connection, checks that only SCRAM
verifiers reach the data directory, restarts weir with --auth scram-sha-256
and a self-signed certificate made with the openssl CLI, and logs in with
psql, psycopg2 (sslmode=require) and a hand-written SCRAM client that reads
the SQLSTATE of the failure (28P01). TAP output.

usage: test_auth.py WEIR_EXE
"""
import base64
import hashlib
import hmac
import os
import socket
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from weirproc import Tap, Weir  # noqa: E402

import psycopg2  # noqa: E402


def psql(port, conninfo_extra, *args, password=None):
    env = dict(os.environ, PGCONNECT_TIMEOUT="10")
    for k in ("PGPASSWORD", "PGSSLMODE", "PGUSER", "PGDATABASE", "PGHOST", "PGPORT", "PGOPTIONS"):
        env.pop(k, None)
    if password is not None:
        env["PGPASSWORD"] = password
    r = subprocess.run(["psql", "-X", "-At", "host=127.0.0.1 port=%d dbname=weir %s" % (port, conninfo_extra)]
                       + list(args), capture_output=True, text=True, env=env, timeout=60)
    return r.returncode, r.stdout + r.stderr


# ---- a minimal frontend, to see error fields libpq does not show at connect ----

def read_msg(s):
    head = b""
    while len(head) < 5:
        chunk = s.recv(5 - len(head))
        if not chunk:
            return None, None
        head += chunk
    typ, length = head[:1], struct.unpack("!i", head[1:])[0]
    body = b""
    while len(body) < length - 4:
        chunk = s.recv(length - 4 - len(body))
        if not chunk:
            return None, None
        body += chunk
    return typ, body


def error_fields(body):
    out = {}
    for f in body.split(b"\0"):
        if f:
            out[f[:1].decode()] = f[1:].decode()
    return out


def scram_login(port, user, password, source=None):
    """Returns 'ok', 'trusted' (AuthenticationOk at once), or the SQLSTATE of
    the ErrorResponse. source: the local address to connect from."""
    s = socket.create_connection(("127.0.0.1", port), 10, (source, 0) if source else None)
    params = b"user\0" + user.encode() + b"\0database\0weir\0\0"
    s.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
    typ, body = read_msg(s)
    if typ == b"E":
        return error_fields(body).get("C")
    if typ == b"R" and struct.unpack("!i", body[:4])[0] == 0:
        s.close()
        return "trusted"
    assert typ == b"R" and struct.unpack("!i", body[:4])[0] == 10, (typ, body)
    cnonce = base64.b64encode(os.urandom(18)).decode()
    first_bare = "n=,r=" + cnonce
    first = ("n,," + first_bare).encode()
    msg = b"SCRAM-SHA-256\0" + struct.pack("!i", len(first)) + first
    s.sendall(b"p" + struct.pack("!i", 4 + len(msg)) + msg)
    typ, body = read_msg(s)
    if typ == b"E":
        return error_fields(body).get("C")
    server_first = body[4:].decode()
    attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored = hashlib.sha256(client_key).digest()
    final_wo = "c=biws,r=" + attrs["r"]
    auth_msg = ",".join([first_bare, server_first, final_wo]).encode()
    sig = hmac.new(stored, auth_msg, hashlib.sha256).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig))).decode()
    final = (final_wo + ",p=" + proof).encode()
    s.sendall(b"p" + struct.pack("!i", 4 + len(final)) + final)
    typ, body = read_msg(s)
    if typ == b"E":
        return error_fields(body).get("C")
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    want = "v=" + base64.b64encode(hmac.new(server_key, auth_msg, hashlib.sha256).digest()).decode()
    if typ != b"R" or body[4:].decode() != want:
        return "bad server signature"
    typ, body = read_msg(s)
    s.close()
    return "ok" if typ == b"R" and body == struct.pack("!i", 0) else "no AuthenticationOk"


def local_address():
    """A non-loopback IPv4 address of this machine (read from `ip`, no traffic), or None.
    Tests use it only as a *source* address: every connection goes to 127.0.0.1."""
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True,
                             text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            addr = parts[parts.index("inet") + 1].split("/")[0]
            if not addr.startswith("127."):
                return addr
    return None


def libpq_verifier(port, user, password):
    """PQencryptPasswordConn(..., "scram-sha-256"), as psql's \\password calls it."""
    import ctypes
    pq = ctypes.CDLL("libpq.so.5")
    pq.PQconnectdb.restype = ctypes.c_void_p
    pq.PQencryptPasswordConn.restype = ctypes.c_void_p
    pq.PQencryptPasswordConn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]
    pq.PQfreemem.argtypes = [ctypes.c_void_p]
    pq.PQfinish.argtypes = [ctypes.c_void_p]
    conn = pq.PQconnectdb(("host=127.0.0.1 port=%d dbname=weir user=weir sslmode=disable" % port).encode())
    p = pq.PQencryptPasswordConn(conn, password.encode(), user.encode(), b"scram-sha-256")
    out = ctypes.cast(p, ctypes.c_char_p).value.decode() if p else ""
    if p:
        pq.PQfreemem(p)
    pq.PQfinish(conn)
    return out


def main():
    exe = sys.argv[1]
    t = Tap()
    w = Weir(exe)
    try:
        conn = psycopg2.connect(host="127.0.0.1", port=w.port, dbname="weir", user="weir", sslmode="disable")
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute("CREATE USER alice WITH PASSWORD 'alice-s3cret'")
        cur.execute("CREATE USER bob")
        cur.execute("CREATE USER dave")
        cur.execute("CREATE USER carol PASSWORD 'c'")
        cur.execute("DROP USER carol")
        cur.execute("ALTER USER weir WITH PASSWORD 'root-pw'")
        t.ok(True, "CREATE USER, ALTER USER, DROP USER")
        for sql, state in [("CREATE USER alice PASSWORD 'x'", "42710"), ("CREATE USER weir", "42710"),
                           ("DROP USER weir", "55006"), ("DROP USER carol", "42704"),
                           ("ALTER USER nobody PASSWORD 'x'", "42704")]:
            try:
                cur.execute(sql)
                t.ok(False, "%s: %s" % (state, sql), "no error")
            except psycopg2.Error as e:
                t.ok(e.pgcode == state, "%s: %s" % (state, sql), "%s %s" % (e.pgcode, e))
        # A verifier made by libpq (what psql's \password sends) is stored as given.
        verifier = libpq_verifier(w.port, "bob", "bob-pw")
        t.ok(verifier.startswith("SCRAM-SHA-256$"), "libpq made a verifier", verifier)
        cur.execute("ALTER USER bob PASSWORD %s", (verifier,))
        cur.execute("DROP USER IF EXISTS carol")
        other = psycopg2.connect(host="127.0.0.1", port=w.port, dbname="weir", user="weir", sslmode="disable")
        other.autocommit = True
        other.cursor().execute("CREATE USER eve PASSWORD 'eve-pw'")
        cur.execute("SELECT query FROM pg_stat_activity WHERE pid <> pg_backend_pid()")
        queries = [r[0] for r in cur.fetchall()]
        t.ok(queries and all("eve-pw" not in q for q in queries), "pg_stat_activity hides a password", queries)
        other.cursor().execute("DROP USER eve")
        other.close()
        t.ok(any("does not exist, skipping" in n for n in conn.notices), "DROP USER IF EXISTS notices", conn.notices)
        cur.execute("SELECT rolname FROM pg_catalog.pg_roles ORDER BY 1")
        t.ok(cur.fetchall() == [("alice",), ("bob",), ("dave",), ("weir",)], "pg_roles lists the users")
        conn.close()

        # A client that is not on this machine logs in with SCRAM even in the
        # default mode. Simulated by connecting to 127.0.0.1 from the
        # machine's LAN address: the server sees a peer that is neither
        # loopback nor the address it was reached at.
        lan = local_address()
        if lan:
            t.ok(scram_login(w.port, "alice", "alice-s3cret") == "trusted", "loopback is trusted by default")
            t.ok(scram_login(w.port, "alice", "alice-s3cret", lan) == "ok", "a remote client logs in with SCRAM")
            got = scram_login(w.port, "alice", "wrong", lan)
            t.ok(got == "28P01", "a remote client with a wrong password: 28P01", got)
            got = scram_login(w.port, "dave", "", lan)
            t.ok(got == "28P01", "a remote client as a user without a password: 28P01", got)
        else:
            for name in ["loopback trusted", "remote SCRAM", "remote wrong password", "remote no password"]:
                t.n += 1
                print("ok %d - %s # SKIP no non-loopback address" % (t.n, name))
        rc = w.stop()
        t.ok(rc == 0, "server exits cleanly")

        # Only verifiers are stored.
        blob = b""
        for root, _, files in os.walk(os.path.join(w.dir, "data")):
            for f in files:
                with open(os.path.join(root, f), "rb") as fh:
                    blob += fh.read()
        t.ok(b"alice-s3cret" not in blob and b"root-pw" not in blob, "no password in the data directory")
        t.ok(blob.count(b"SCRAM-SHA-256$4096:") >= 2, "SCRAM verifiers in the catalog")

        # Restart: SCRAM for everyone, TLS with a self-signed certificate.
        cert, key = os.path.join(w.dir, "cert.pem"), os.path.join(w.dir, "key.pem")
        r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                            "-days", "2", "-subj", "/CN=127.0.0.1"], capture_output=True, text=True)
        t.ok(r.returncode == 0, "openssl makes a self-signed certificate", r.stderr)
        w.extra = ["--auth", "scram-sha-256", "--tls-cert", cert, "--tls-key", key]
        w.start()

        rc, out = psql(w.port, "user=alice sslmode=require", "-c", "SELECT current_user", "-c", "\\conninfo",
                       password="alice-s3cret")
        t.ok(rc == 0 and out.startswith("alice\n") and "SSL connection" in out, "psql: SCRAM over TLS", out)
        rc, out = psql(w.port, "user=alice sslmode=verify-full sslrootcert=" + cert, "-c", "SELECT 'verified'",
                       password="alice-s3cret")
        t.ok(rc == 0 and out.strip() == "verified", "psql: sslmode=verify-full checks the certificate", out)
        other_key, other = os.path.join(w.dir, "other.key"), os.path.join(w.dir, "other.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", other_key, "-out",
                        other, "-days", "2", "-subj", "/CN=127.0.0.1"], capture_output=True)
        rc, out = psql(w.port, "user=alice sslmode=verify-full sslrootcert=" + other, "-c", "SELECT 1",
                       password="alice-s3cret")
        t.ok(rc != 0 and "certificate verify failed" in out, "psql: a certificate from another root is refused", out)
        rc, out = psql(w.port, "user=weir sslmode=disable", "-c", "SELECT 1", password="root-pw")
        t.ok(rc == 0 and out.strip() == "1", "psql: SCRAM without TLS (the bootstrap user)", out)
        rc, out = psql(w.port, "user=alice sslmode=require", "-c", "SELECT 1", password="wrong")
        t.ok(rc != 0 and 'password authentication failed for user "alice"' in out, "psql: wrong password", out)
        rc, out = psql(w.port, "user=alice sslmode=disable", "-c", "SELECT 1")
        t.ok(rc != 0 and "password" in out, "psql: no password", out)

        t.ok(scram_login(w.port, "alice", "alice-s3cret") == "ok", "SCRAM exchange, server signature checked")
        t.ok(scram_login(w.port, "bob", "bob-pw") == "ok", "login with the password behind libpq's verifier")
        for user, pw in [("alice", "nope"), ("bob", "x"), ("dave", ""), ("nobody", "x")]:
            got = scram_login(w.port, user, pw)
            t.ok(got == "28P01", "28P01 for %s (wrong password / no password / unknown)" % user, got)

        c2 = psycopg2.connect(host="127.0.0.1", port=w.port, dbname="weir", user="alice", password="alice-s3cret",
                              sslmode="require")
        t.ok(c2.info.ssl_in_use, "psycopg2: TLS in use")
        cur = c2.cursor()
        cur.execute("SELECT current_user, count(*) FROM pg_catalog.pg_class")
        row = cur.fetchone()
        t.ok(row[0] == "alice" and row[1] > 10, "psycopg2: query after SCRAM over TLS", row)
        c2.close()
        try:
            psycopg2.connect(host="127.0.0.1", port=w.port, dbname="weir", user="alice", password="bad",
                             sslmode="require").close()
            t.ok(False, "psycopg2: wrong password refused")
        except psycopg2.OperationalError as e:
            t.ok("password authentication failed" in str(e), "psycopg2: wrong password refused", e)

        # Hostile TLS starts: plaintext after 'S', bytes pipelined behind the request.
        s = socket.create_connection(("127.0.0.1", w.port), 10)
        s.sendall(struct.pack("!ii", 8, 80877103))
        answer = s.recv(1)
        s.sendall(b"this is not a ClientHello" * 20)
        try:
            rest = s.recv(100)
        except OSError:
            rest = b""
        s.close()
        t.ok(answer == b"S" and rest == b"", "plaintext after 'S' closes the connection", (answer, rest))
        s = socket.create_connection(("127.0.0.1", w.port), 10)
        s.sendall(struct.pack("!ii", 8, 80877103) + b"Q\0\0\0\x0bSELECT 1\0")
        typ, body = read_msg(s)
        s.close()
        t.ok(typ == b"E" and error_fields(body).get("C") == "08P01", "bytes behind an SSLRequest: 08P01")
        t.ok('password authentication failed for user "nobody" from 127.0.0.1 (no such user' in w.log(),
             "failed logins are logged", w.log())
        rc, out = psql(w.port, "user=weir sslmode=require", "-c", "SELECT 2", password="root-pw")
        t.ok(rc == 0 and out.strip() == "2", "server still serves", out)
        rc = w.stop()
        t.ok(rc == 0, "server exits cleanly", w.log())

        # (A server bound to a LAN address trusting connections from that very
        # address is not tested here: tests connect to loopback addresses only.)

        # A certificate without its key is refused at start.
        w.extra = ["--tls-cert", cert]
        try:
            w.start()
            t.ok(False, "--tls-cert without --tls-key refused")
        except RuntimeError as e:
            t.ok("go together" in str(e), "--tls-cert without --tls-key refused", e)
    finally:
        w.cleanup()
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
