#!/usr/bin/python3
"""avro_source.py --weir PATH: ENCODE AVRO sources end to end, from psql's side.

A broker and server (weirtest.Stack) and a registry of its own (`weir broker --no-kafka
--registry ... --registry-file ... --registry-user ...`, so it can be stopped and started).
Records are written with python3-avro in Confluent's wire format and produced with
confluent_kafka. Checks:
- CREATE validation: 22023 for each bad option, 0A000 for tables, UPSERT and sinks;
- every type of the mapping (null unions, enum, record, array, map, decimal, date,
  timestamp-millis/micros, uuid) reaches the view;
- schema evolution both ways: a newer writer (a field added with a default, one removed, int
  promoted to long) and an older one (lacking a declared column: NULL);
- bad records (wrong magic byte, unknown id, truncated, trailing bytes, a writer schema that does
  not resolve) are counted in weir_source_errors with their reasons, and the view goes on;
- the registry stopped: records of a schema id weir has not fetched wait (no bad record, no row),
  and are read once the registry is back;
- a source without a column list takes its columns from the latest schema of <topic>-value;
- schema.inline reads raw Avro binary.

Prints TAP; exits 1 if a check failed.
"""
import argparse
import base64
import datetime
import decimal
import io
import json
import os
import struct
import subprocess
import sys
import time
import urllib.request
import uuid

import avro.io
import avro.schema
import psycopg2
from confluent_kafka import Producer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Stack, Tap, free_port  # noqa: E402

tap = Tap()
USER, PASSWORD = "weir", "pw"

ENUM = {"type": "enum", "name": "channel", "symbols": ["WEB", "APP", "API"]}
V1 = {"type": "record", "name": "bid", "fields": [
    {"name": "auction", "type": "long"},
    {"name": "price", "type": "int"},
    {"name": "url", "type": ["null", "string"], "default": None},
    {"name": "channel", "type": ENUM},
    {"name": "dt", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "dtu", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "person", "type": {"type": "record", "name": "person", "fields": [{"name": "name", "type": "string"}]}},
]}
# Newer: url removed, note added with a default, price promoted to long.
V2 = {"type": "record", "name": "bid", "fields": [
    {"name": "auction", "type": "long"},
    {"name": "price", "type": "long"},
    {"name": "channel", "type": ENUM},
    {"name": "dt", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "note", "type": ["null", "string"], "default": None},
]}
# Registered under another subject: price a string, which a BIGINT column cannot read.
BAD = {"type": "record", "name": "bid", "fields": [{"name": "auction", "type": "long"},
                                                   {"name": "price", "type": "string"}]}
# Registered last, fetched only after the registry was stopped.
V3 = dict(V2, fields=V2["fields"] + [{"name": "extra", "type": "int", "default": 0}])

COLS = ("auction BIGINT, price BIGINT, url TEXT, channel TEXT, dt TIMESTAMPTZ, dtu TIMESTAMPTZ, day DATE, "
        "amount NUMERIC(10,2), id TEXT, tags JSONB, attrs JSONB, person JSONB, note TEXT")


def encode(schema, datum):
    b = io.BytesIO()
    avro.io.DatumWriter(avro.schema.parse(json.dumps(schema))).write(datum, avro.io.BinaryEncoder(b))
    return b.getvalue()


def framed(sid, schema, datum):
    return b"\0" + struct.pack(">I", sid) + encode(schema, datum)


class Registry:
    """A `weir broker --no-kafka --registry` process that can be stopped and started again."""

    def __init__(self, weir, tmp):
        self.addr = "127.0.0.1:%d" % free_port()
        self.url = "http://" + self.addr
        self.args = [weir, "broker", "--no-kafka", "--registry", self.addr, "--registry-file",
                     os.path.join(tmp, "schemas.jsonl"), "--registry-user", "%s:%s" % (USER, PASSWORD)]
        self.p = None
        self.start()

    def start(self):
        self.p = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.p.stdout.readline()

    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.terminate()
            self.p.wait(10)

    def register(self, subject, schema):
        req = urllib.request.Request(
            "%s/subjects/%s/versions" % (self.url, subject), method="POST",
            data=json.dumps({"schema": json.dumps(schema)}).encode(),
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json",
                     "Authorization": "Basic " + base64.b64encode(("%s:%s" % (USER, PASSWORD)).encode()).decode()})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())["id"]


def sqlstate(st, sql):
    try:
        st.q(sql)
        return None
    except psycopg2.Error as e:
        return e.pgcode


def wait_for(fn, timeout=30):
    deadline = time.time() + timeout
    v = fn()
    while not v and time.time() < deadline:
        time.sleep(0.3)
        v = fn()
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    weir = ap.parse_args().weir
    with Stack(weir) as st:
        reg = Registry(weir, st.tmp)
        try:
            run(st, reg)
        finally:
            reg.stop()
    tap.end()


def run(st, reg):
    enc = "FORMAT PLAIN ENCODE AVRO (schema.registry = '%s', schema.registry.username = '%s', " \
          "schema.registry.password = '%s')" % (reg.url, USER, PASSWORD)
    src = "CREATE SOURCE %s (" + COLS + ") WITH (connector = 'kafka', topic = '%s', " \
          "scan.startup.mode = 'earliest') "

    # CREATE validation.
    bad = [
        ("22023", src % ("e1", "bids") + "FORMAT PLAIN ENCODE AVRO"),
        ("22023", src % ("e2", "bids") + "FORMAT PLAIN ENCODE AVRO (schema.registry = 'ftp://x')"),
        ("22023", src % ("e3", "bids") + "FORMAT PLAIN ENCODE AVRO (schema.registry = 'http://x', "
                                         "schema.inline = '{\"type\": \"string\"}')"),
        ("22023", src % ("e4", "bids") + "FORMAT PLAIN ENCODE AVRO (schema.registry = 'http://x', "
                                         "schema.registry.username = 'u')"),
        ("22023", src % ("e5", "bids") + "FORMAT PLAIN ENCODE AVRO (schema.inline = '{\"type\": \"string\"}')"),
        ("22023", src % ("e6", "bids") + "FORMAT PLAIN ENCODE AVRO (schema.inline = 'not json')"),
        ("22023", src % ("e7", "bids") + "FORMAT PLAIN ENCODE AVRO (schema.registry = 'http://x', colour = 'red')"),
        ("0A000", "CREATE TABLE t (k BIGINT PRIMARY KEY, v TEXT) WITH (connector = 'kafka', topic = 'u') "
                  "FORMAT UPSERT ENCODE AVRO (schema.registry = 'http://x')"),
        ("0A000", src % ("e8", "bids") + "FORMAT UPSERT ENCODE AVRO (schema.registry = 'http://x')"),
        ("0A000", src % ("e9", "bids") + "FORMAT PLAIN ENCODE PROTOBUF"),
        ("0A000", "CREATE SOURCE e10 (a BIGINT) WITH (connector = 'nexmark') "
                  "FORMAT PLAIN ENCODE AVRO (schema.registry = 'http://x')"),
    ]
    for code, sql in bad:
        got = sqlstate(st, sql)
        tap(got == code, "CREATE refused with %s: %s" % (code, sql[sql.index("FORMAT"):][:70]), repr(got))

    v1 = reg.register("bids-value", V1)
    v2 = reg.register("bids-value", V2)
    badid = reg.register("other-value", BAD)
    v3 = reg.register("bids-value", V3)
    tap((v1, v2, badid, v3) == (1, 2, 3, 4), "schemas registered", repr((v1, v2, badid, v3)))

    st.q(src % ("bids", "bids") + enc)
    st.q("CREATE MATERIALIZED VIEW v AS SELECT * FROM bids")
    got = sqlstate(st, "INSERT INTO bids (auction) VALUES (1)")
    tap(got == "0A000", "INSERT INTO an Avro source is refused with 0A000 (it would write JSON)", repr(got))
    got = sqlstate(st, "ANALYZE LATENESS ON bids")
    tap(got == "0A000", "ANALYZE LATENESS of an Avro source is refused with 0A000", repr(got))
    got = sqlstate(st, "CREATE SINK k FROM v WITH (connector = 'kafka', topic = 'out') "
                       "FORMAT PLAIN ENCODE AVRO (schema.registry = 'http://x')")
    tap(got == "0A000", "an Avro sink is refused with 0A000", repr(got))

    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    when = datetime.datetime(2024, 3, 1, 12, 0, 0, 250000, tzinfo=datetime.timezone.utc)
    r1 = {"auction": 1, "price": 100, "url": "http://a", "channel": "APP", "dt": when,
          "dtu": when + datetime.timedelta(microseconds=1), "day": datetime.date(2024, 3, 1),
          "amount": decimal.Decimal("-12.34"), "id": str(u), "tags": ["x", "y"], "attrs": {"n": 3},
          "person": {"name": "ann"}}
    r2 = {"auction": 2, "price": 5000000000, "channel": "WEB", "dt": when, "note": "newer"}
    whole = framed(v1, V1, r1)
    recs = [
        whole,                                       # 0: older writer, every type
        framed(v2, V2, r2),                          # 1: newer writer
        b"\x01" + whole[1:],                         # 2: wrong magic byte
        b"\0" + struct.pack(">I", 77) + whole[5:],   # 3: unknown id
        whole[:-6],                                  # 4: truncated
        whole + b"\x02",                             # 5: trailing bytes
        framed(badid, BAD, {"auction": 6, "price": "cheap"}),  # 6: does not resolve
        framed(v1, V1, dict(r1, auction=7, url=None, dtu=None)),  # 7: nulls in unions
    ]
    p = Producer({"bootstrap.servers": st.kafka})
    for r in recs:
        p.produce("bids", r, partition=0)
    p.flush(30)

    def rows():
        st.q("FLUSH")
        return st.q("SELECT auction, price, url, channel, dt, dtu, day, amount, id, tags, attrs, person, note "
                    "FROM v ORDER BY auction")
    got = wait_for(lambda: len(rows()) >= 3 and rows()) or rows()
    if not tap(len(got) == 3, "three good records of eight", repr(got)):
        print("# " + repr(st.q("SELECT * FROM weir_source_errors")))
        print("# " + repr(st.q("SELECT name, running, records_in, bad_records, last_error FROM weir_views")))
        print("".join("# " + x for x in open(st.log_path).readlines()[-20:]))
    a = got[0]
    tap(a[:4] == (1, 100, "http://a", "APP"), "long, int promoted to BIGINT, a null union, an enum", repr(a))
    tap(a[4] == when and a[5] == when + datetime.timedelta(microseconds=1),
        "timestamp-millis and timestamp-micros", repr(a[4:6]))
    tap(a[6] == datetime.date(2024, 3, 1) and a[7] == decimal.Decimal("-12.34"), "date and decimal", repr(a[6:8]))
    tap(a[8] == str(u), "uuid as text", repr(a[8]))
    tap(a[9] == ["x", "y"] and a[10] == {"n": 3} and a[11] == {"name": "ann"}, "array, map, record as JSONB",
        repr(a[9:12]))
    tap(a[12] is None, "older writer: the column it lacks (note) is NULL", repr(a[12]))
    b = got[1]
    tap(b[:4] == (2, 5000000000, None, "WEB") and b[12] == "newer",
        "newer writer: long price, the removed field NULL, the added one read", repr(b))
    tap(got[2][0] == 7 and got[2][2] is None and got[2][5] is None, "null branches of unions", repr(got[2]))

    errs = st.q("SELECT record_offset, error FROM weir_source_errors WHERE view = 'v' ORDER BY record_offset")
    tap([e[0] for e in errs] == [2, 3, 4, 5, 6], "five bad records, by offset", repr(errs))
    reasons = {e[0]: e[1] for e in errs}
    tap("magic byte" in reasons.get(2, ""), "wrong magic byte named", reasons.get(2))
    tap("unknown schema id 77" in reasons.get(3, ""), "unknown id named", reasons.get(3))
    tap("truncated" in reasons.get(4, ""), "truncated record named", reasons.get(4))
    tap("after its end" in reasons.get(5, ""), "trailing bytes named", reasons.get(5))
    tap("price" in reasons.get(6, "") and "does not resolve" in reasons.get(6, ""),
        "a writer schema that does not resolve names the field", reasons.get(6))

    # The registry down: id 4 was never fetched, so its records must wait.
    reg.stop()
    for k in (10, 11):
        p.produce("bids", framed(v3, V3, {"auction": k, "price": k, "channel": "API", "dt": when, "note": None,
                                          "extra": 1}), partition=0)
    p.produce("bids", framed(v1, V1, dict(r1, auction=12)), partition=0)
    p.flush(30)
    time.sleep(4)
    n_rows = st.q("SELECT count(*) FROM v")[0][0]
    n_errs = st.q("SELECT count(*) FROM weir_source_errors WHERE view = 'v'")[0][0]
    tap(n_rows == 3 and n_errs == 5, "registry down: the records wait (no row, no bad record)",
        repr((n_rows, n_errs)))
    reg.start()
    got = wait_for(lambda: st.q("SELECT auction FROM v WHERE auction >= 10 ORDER BY auction") or None, 30)
    wait_for(lambda: len(st.q("SELECT auction FROM v WHERE auction >= 10")) == 3, 15)
    got = st.q("SELECT auction FROM v WHERE auction >= 10 ORDER BY auction")
    tap(got == [(10,), (11,), (12,)], "registry back: the waiting records are read", repr(got))
    n_errs = st.q("SELECT count(*) FROM weir_source_errors WHERE view = 'v'")[0][0]
    tap(n_errs == 5, "and none of them was bad", repr(n_errs))

    # Columns from the registry: the latest schema of bids-value (V3).
    st.q("CREATE STREAM auto WITH (connector = 'kafka', topic = 'bids', scan.startup.mode = 'earliest') " + enc)
    cur = st.conn.cursor()
    st.q("CREATE MATERIALIZED VIEW auto_v AS SELECT * FROM auto")
    cur.execute("SELECT * FROM auto_v LIMIT 0")
    names = [d[0] for d in cur.description]
    tap(names == ["auction", "price", "channel", "dt", "note", "extra"], "no column list: the latest schema's fields",
        repr(names))
    got = wait_for(lambda: (st.q("FLUSH"), st.q("SELECT count(*) FROM auto_v")[0][0] == 6)[1], 20)
    tap(got, "and its records are read (6 good ones)", repr(st.q("SELECT auction FROM auto_v ORDER BY 1")))
    got = sqlstate(st, "CREATE SOURCE none WITH (connector = 'kafka', topic = 'nosuch') " + enc)
    tap(got == "42704", "no column list and no such subject: 42704", repr(got))

    # schema.inline: raw Avro binary of one schema.
    inline = json.dumps(V2).replace("'", "''")
    st.q("CREATE SOURCE raw (auction BIGINT, note TEXT, channel TEXT) WITH (connector = 'kafka', topic = 'raw', "
         "scan.startup.mode = 'earliest') FORMAT PLAIN ENCODE AVRO (schema.inline = '%s')" % inline)
    st.q("CREATE MATERIALIZED VIEW raw_v AS SELECT * FROM raw")
    p.produce("raw", encode(V2, r2), partition=0)
    p.produce("raw", encode(V2, dict(r2, auction=3, note=None)), partition=0)
    p.flush(30)
    got = wait_for(lambda: (st.q("FLUSH"), st.q("SELECT * FROM raw_v ORDER BY auction"))[1] or None, 20)
    tap(got == [(2, "newer", "WEB"), (3, None, "WEB")], "schema.inline reads raw Avro binary", repr(got))

    # A restart replays the catalog: the sources come back with their options, the one whose
    # columns came from the registry with those columns, and go on reading.
    st.q("CHECKPOINT")
    st.conn.close()
    server = st.procs.pop()
    server.terminate()
    server.wait(20)
    st._start_server()
    p.produce("bids", framed(v3, V3, {"auction": 13, "price": 13, "channel": "API", "dt": when, "note": "after",
                                      "extra": 2}), partition=0)
    p.flush(30)
    got = wait_for(lambda: (st.q("FLUSH"), st.q("SELECT auction, note FROM v WHERE auction = 13"))[1] or None, 30)
    tap(got == [(13, "after")], "after a restart the Avro source reads on", repr(got))
    got = wait_for(lambda: (st.q("FLUSH"), st.q("SELECT auction, extra FROM auto_v WHERE auction = 13"))[1] or None,
                   30)
    tap(got == [(13, 2)], "and the source with registry columns keeps them", repr(got))


if __name__ == "__main__":
    main()
