#!/usr/bin/python3
"""seed_corpus.py MODE OUTDIR FILE.slt...: writes a libFuzzer seed corpus.

MODE sql: one file per SQL statement found in the sqllogictest files (the
text after each `statement ...` / `query ...` header up to `----` or a blank
line), with the runner's ${VARIABLES} filled in, plus deeply nested inputs
that must end in the parser's depth limit.

MODE json: Kafka JSON records for fuzz_json (no FILE needed), good and bad.

MODE pgwire: the same statements as client byte streams: a StartupMessage,
then either a simple Query or a Parse/Bind/Describe/Execute/Sync sequence
(some with text and binary parameters), plus SSLRequest, CancelRequest,
COPY noise and Terminate cases.
"""
import os
import re
import struct
import sys

VARS = {"KAFKA": "127.0.0.1:9092", "PGPORT": "4566", "FREEPORT": "4567", "DATADIR": "./data",
        "TESTDIR": "sql-tests", "UNIQUE": "u1"}


def statements(paths):
    out = []
    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        i = 0
        while i < len(lines):
            head = lines[i].strip()
            if head.startswith("statement") or (head.startswith("query") and not head.startswith("query error x")):
                i += 1
                body = []
                while i < len(lines) and lines[i].strip() and lines[i].strip() != "----":
                    body.append(lines[i])
                    i += 1
                sql = "\n".join(body)
                sql = re.sub(r"\$\{(\w+)\}", lambda m: VARS.get(m.group(1), m.group(1)), sql)
                if sql.strip():
                    out.append(sql)
            i += 1
    seen, uniq = set(), []
    for s in out:
        if s not in seen:
            seen.add(s)
            uniq.append(s)
    return uniq


def deep_inputs():
    n = 5000
    return ["SELECT " + "(" * n + "1" + ")" * n,
            "SELECT 1" + "+1" * 20000,
            "SELECT " + "NOT " * 20000 + "a",
            "SELECT " + "-" * 20000 + "1",
            "SELECT " + "CASE WHEN a THEN " * 3000 + "1" + " END" * 3000,
            "SELECT 1" + " UNION SELECT 1" * 3000,
            "SELECT * FROM " + "(" * 3000 + "SELECT 1" + ")" * 3000,
            "SELECT f(" * 3000 + "1" + ")" * 3000,
            "SELECT ARRAY[" * 3000 + "1" + "]" * 3000]


def msg(t, body):
    return t + struct.pack("!I", len(body) + 4) + body


def cstr(s):
    return s.encode("utf-8", "replace") + b"\0"


def startup(extra=b""):
    body = struct.pack("!I", 196608) + cstr("user") + cstr("weir") + cstr("database") + cstr("weir") + extra + b"\0"
    return struct.pack("!I", len(body) + 4) + body


def extended(sql, params=(), binary=False, binary_results=False):
    p = msg(b"P", cstr("") + cstr(sql) + struct.pack("!h", len(params)) +
            b"".join(struct.pack("!I", oid) for oid, _ in params))
    fmts = struct.pack("!h", 1) + struct.pack("!h", 1 if binary else 0)
    vals = b""
    for oid, v in params:
        vals += struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v
    rfmts = struct.pack("!hh", 1, 1) if binary_results else struct.pack("!h", 0)
    b = msg(b"B", cstr("") + cstr("") + (fmts if params else struct.pack("!h", 0)) +
            struct.pack("!h", len(params)) + vals + rfmts)
    return p + b + msg(b"D", b"P" + cstr("")) + msg(b"E", cstr("") + struct.pack("!i", 0)) + msg(b"S", b"")


def pgwire_inputs(stmts):
    out = []
    for k, sql in enumerate(stmts):
        if k % 2 == 0:
            out.append(startup() + msg(b"Q", cstr(sql)) + msg(b"X", b""))
        else:
            out.append(startup() + extended(sql) + msg(b"X", b""))
    out.append(struct.pack("!II", 8, 80877103) + startup() + msg(b"Q", cstr("SELECT 1")))
    out.append(struct.pack("!III", 16, 80877102, 1000) + struct.pack("!i", 42))
    out.append(startup(cstr("_pq_.foo") + cstr("x")) + msg(b"Q", cstr("")))
    out.append(startup() + extended("SELECT $1::int, $2", [(23, struct.pack("!i", 7)), (25, b"x")], binary=True))
    out.append(startup() + extended("SELECT $1", [(20, struct.pack("!q", -1))], binary=True))
    out.append(startup() + extended("SELECT $1", [(701, struct.pack("!d", 1.5))], binary=True))
    out.append(startup() + extended("SELECT $1", [(16, b"\x01")], binary=True) + msg(b"C", b"S" + cstr("")))
    out.append(startup() + extended("SELECT $1", [(25, None)]))
    # Binary results: the fuzz engine types the parameter's column by its first byte.
    for v in (b"\x01t", b"\x0212", b"\x05-1.5", b"\x082024-01-01", b"\x0b1 day 02:00:00", b"\x02\\x00ff"):
        out.append(startup() + extended("SELECT $1", [(25, v)], binary_results=True))
    out.append(startup() + msg(b"d", b"abc") + msg(b"c", b"") + msg(b"H", b"") + msg(b"F", b"\0\0"))
    out.append(startup() + msg(b"Q", cstr("SET a = 1; SELECT 1")) + msg(b"S", b""))
    for d in deep_inputs():
        out.append(startup() + msg(b"Q", cstr(d)))
    return out


def json_inputs():
    """Kafka JSON records over the target's columns (k, t, j, n, ts, b, d, iv, tz): good ones of
    every shape the decoder reads, and the bad kinds it must refuse."""
    good = [b'{"k": 1, "t": "caf\xc3\xa9", "j": {"a": [1, 2.5, null, true]}, "n": 12.345, "ts": 1700000000000, '
            b'"b": true, "d": -1e300, "iv": "1 day 02:00:00", "tz": "2026-01-01T00:00:03Z"}',
            b'{"t": "\\u00e9\\ud83d\\ude00 \\n\\"", "j": "str", "n": "1e-5", "ts": "2026-01-01 00:00:01"}',
            b'{"j": [[[[[[[[1]]]]]]]], "other": {"x": [1, {"y": null}]}}',
            b'{"k": "42", "b": "f", "d": "NaN", "iv": "PT1H"}', b'{}']
    bad = [b'{"t": "a\xffb"}', b'{"t": "\\ud800"}', b'{"t": "\\udc00"}', b'{"j": {"x": "\xc0\xaf"}}',
           b'{"k": 1', b'[1, 2]', b'{"k": 5.5}', b'{"j": ' + b"[" * 70 + b"]" * 70 + b'}']
    return good + bad


def zz(v):
    """An Avro long: zig-zag, then base-128 varint."""
    z = (v << 1) ^ (v >> 63)
    out = b""
    while z & ~0x7F:
        out += bytes([(z & 0x7F) | 0x80])
        z >>= 7
    return out + bytes([z])


def avro_s(b):
    return zz(len(b)) + b


def avro_inputs():
    """Records of fuzz_avro.c's schema: good ones with each union branch and a nested list,
    and the bad kinds (truncated, a huge length, a bad union index)."""
    def rec(t=b"\x00", m=b"\x00", l_depth=1, arr=(b"x",)):
        node = b""
        for i in range(l_depth):
            node += avro_s(b"v%d" % i) + zz(1 if i < l_depth - 1 else 0)
        a = (zz(len(arr)) + b"".join(avro_s(x) for x in arr) + zz(0)) if arr else zz(0)
        return (zz(7) + zz(-3) + t + zz(1) + avro_s(b"\x04\xd2") + zz(1700000000000000) + zz(19000) +
                b"\x00\x00\x00\x00\x00\x00\xf0\x3f" + a + m + node + b"abc")
    good = [rec(), rec(t=zz(1) + avro_s("h\u00e9".encode())), rec(m=zz(1) + avro_s(b"k") + zz(1) + zz(5) + zz(0)),
            rec(m=zz(2) + avro_s(b"a") + zz(2) + avro_s(b"s") + avro_s(b"b") + zz(0) + zz(0)), rec(l_depth=5),
            rec(arr=())]
    bad = [rec()[:-5], zz(1) + zz(1 << 40), rec(t=zz(9)), rec() + b"\x01", b"", rec(l_depth=70)]
    return good + bad


def main():
    mode, outdir, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(outdir, exist_ok=True)
    stmts = statements(paths)
    if mode == "sql":
        items = [s.encode() for s in stmts + deep_inputs()]
    elif mode == "pgwire":
        items = pgwire_inputs(stmts)
    elif mode == "json":
        items = json_inputs()
    elif mode == "avro":
        items = avro_inputs()
    else:
        sys.exit("mode must be sql, pgwire, json or avro")
    for i, data in enumerate(items):
        with open(os.path.join(outdir, "seed-%05d" % i), "wb") as f:
            f.write(data)
    print("%d seeds in %s" % (len(items), outdir))


if __name__ == "__main__":
    main()
