#!/usr/bin/python3
"""encoding_doors.py --weir PATH: text that is not UTF-8, and jsonb that is not JSON, never get in.

Issue 21 #4: invalid UTF-8 and invalid JSON were accepted and stored; then psycopg2 raised
UnicodeDecodeError on SELECT, the HTTP API returned invalid JSON, and a PostgreSQL sink retried
forever. Every door is checked (common/utf8.h):
- pgwire, simple query: a statement with a 0xff byte is 22021, the connection goes on;
- pgwire, extended query: a Parse with such bytes, and a text parameter with them, are 22021;
- a Kafka JSON record with a raw 0xff byte in a string, a lone surrogate escape, or a number that
  is not JSON (0001, NaN: a JSONB column would keep its text), is a bad record with its reason;
  a record with real UTF-8 (é, an emoji as a surrogate pair) is read;
- afterwards SELECT through psycopg2 and GET /api/views/v decode cleanly.

Prints TAP; exits 1 if a check failed.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Stack, Tap  # noqa: E402
from rawpg import RawPg as Raw  # noqa: E402

tap = Tap()
KCAT = "/usr/bin/kcat"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    weir = ap.parse_args().weir
    with Stack(weir, http=True) as st:
        r = Raw(st.port)
        r.msg(b"Q", b"SELECT 'a\xffb'\0")
        tap(r.until_ready() == ["22021"], "simple query with a 0xff byte: 22021")
        r.msg(b"Q", b"SELECT 1\0")
        tap(r.until_ready() == [], "the connection goes on")
        r.msg(b"P", b"\0SELECT '\xc3\x28'\0\0\0")
        r.msg(b"S", b"")
        tap(r.until_ready() == ["22021"], "Parse with a broken sequence: 22021")
        r.msg(b"P", b"\0SELECT $1::text\0\0\0")
        r.msg(b"B", b"\0\0" + struct.pack("!hhi", 0, 1, 3) + b"a\xff" + b"b" + struct.pack("!h", 0))
        r.msg(b"E", b"\0" + struct.pack("!i", 0))
        r.msg(b"S", b"")
        tap(r.until_ready() == ["22021"], "a text parameter with a 0xff byte: 22021")

        st.q("CREATE SOURCE s (k BIGINT, t TEXT, j JSONB) WITH (connector = 'kafka', topic = 'enc', "
             "scan.startup.mode = 'earliest') FORMAT PLAIN ENCODE JSON")
        st.q("CREATE MATERIALIZED VIEW v AS SELECT k, t, j FROM s")
        recs = [b'{"k": 1, "t": "caf\xc3\xa9 \\ud83d\\ude00", "j": {"x": "\xc3\xa9"}}',
                b'{"k": 2, "t": "a\xffb"}',
                b'{"k": 3, "t": "\\ud800"}',
                b'{"k": 4, "j": {"x": "\xc0\xaf"}}',
                b'{"k": 5, "t": "\\udc00x"}',
                b'{"k": 6, "t": "ok"}',
                b'{"k": 7, "j": 0001}',
                b'{"k": 8, "j": NaN}']
        subprocess.run([KCAT, "-P", "-b", st.kafka, "-t", "enc", "-p", "0"], input=b"\n".join(recs) + b"\n",
                       check=True, timeout=60)
        deadline = time.time() + 20
        rows, errs = [], []
        while time.time() < deadline:
            st.q("FLUSH")
            rows = st.q("SELECT k, t FROM v ORDER BY k")
            errs = st.q("SELECT record_offset, error FROM weir_source_errors ORDER BY record_offset")
            if len(rows) + len(errs) >= len(recs):
                break
            time.sleep(0.3)
        tap(rows == [(1, "café \U0001F600"), (6, "ok")], "records in UTF-8 are read, and decode in psycopg2", repr(rows))
        tap([e[0] for e in errs] == [1, 2, 3, 4, 6, 7], "the others are bad records (numbers that are not JSON too)",
            repr(errs))
        reasons = [e[1] for e in errs]
        tap("invalid UTF-8 in a string" in reasons[0] and "invalid UTF-8 in a string" in reasons[2] and
            "high surrogate" in reasons[1] and "low surrogate" in reasons[3], "each with its reason", repr(reasons))
        body = urllib.request.urlopen("http://127.0.0.1:%d/api/views/v" % st.http_port, timeout=10).read()
        try:
            doc = json.loads(body.decode("utf-8"))
            ok = sorted(r[0] for r in doc["rows"]) == [1, 6]
        except (ValueError, KeyError) as e:
            ok, body = False, repr(e) + repr(body[:300])
        tap(ok, "GET /api/views/v is valid JSON in UTF-8", body)
    tap.end()


if __name__ == "__main__":
    main()
