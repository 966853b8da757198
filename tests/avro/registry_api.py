#!/usr/bin/python3
"""registry_api.py --weir PATH: the schema registry `weir broker --registry` serves.

Starts `weir broker --no-kafka --registry 127.0.0.1:PORT` and speaks Confluent's REST API to it
with urllib: registering (ids global and stable for an equal schema), listing subjects and
versions, a version by number and `latest`, a schema by id, the BACKWARD compatibility check
(a field added with and without a default, a field removed, a type promoted and narrowed), a
registration refused as incompatible (409), and Confluent's error bodies (40401, 40402, 40403,
42201, 42202).

Prints TAP; exits 1 if a check failed.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Tap, free_port  # noqa: E402

tap = Tap()
CT = "application/vnd.schemaregistry.v1+json"


def rec(name, fields):
    return json.dumps({"type": "record", "name": name, "fields": fields})


V1 = rec("bid", [{"name": "auction", "type": "long"}, {"name": "price", "type": "int"}])
V2 = rec("bid", [{"name": "auction", "type": "long"}, {"name": "price", "type": "long"},
                 {"name": "channel", "type": ["null", "string"], "default": None}])
NO_DEFAULT = rec("bid", [{"name": "auction", "type": "long"}, {"name": "price", "type": "long"},
                         {"name": "url", "type": "string"}])
NARROWED = rec("bid", [{"name": "auction", "type": "int"}, {"name": "price", "type": "long"}])
REMOVED = rec("bid", [{"name": "auction", "type": "long"}])


class Registry:
    def __init__(self, url):
        self.url = url

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": CT, "Accept": CT})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    weir = ap.parse_args().weir
    addr = "127.0.0.1:%d" % free_port()
    p = subprocess.Popen([weir, "broker", "--no-kafka", "--registry", addr], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        line = p.stdout.readline()
        tap("schema registry listening on http://" + addr in line, "weir broker --registry announces its URL", line)
        r = Registry("http://" + addr)
        tap(r.call("GET", "/subjects") == (200, []), "no subjects at first")
        s, b = r.call("POST", "/subjects/bids-value/versions", {"schema": V1})
        tap((s, b) == (200, {"id": 1}), "register v1: id 1", repr((s, b)))
        s, b = r.call("POST", "/subjects/bids-value/versions", {"schema": V1})
        tap((s, b) == (200, {"id": 1}), "registering v1 again gives its id", repr((s, b)))
        s, b = r.call("POST", "/subjects/other-value/versions", {"schema": V1, "schemaType": "AVRO"})
        tap((s, b) == (200, {"id": 1}), "an equal schema under another subject has the same id", repr((s, b)))
        s, b = r.call("POST", "/compatibility/subjects/bids-value/versions/latest", {"schema": V2})
        tap((s, b) == (200, {"is_compatible": True}),
            "BACKWARD: a field added with a default and int promoted to long are compatible", repr((s, b)))
        s, b = r.call("POST", "/compatibility/subjects/bids-value/versions/latest", {"schema": REMOVED})
        tap((s, b) == (200, {"is_compatible": True}), "BACKWARD: a field removed is compatible", repr((s, b)))
        s, b = r.call("POST", "/subjects/bids-value/versions", {"schema": V2})
        tap((s, b) == (200, {"id": 2}), "register v2: id 2", repr((s, b)))
        s, b = r.call("POST", "/compatibility/subjects/bids-value/versions/latest", {"schema": NO_DEFAULT})
        tap((s, b) == (200, {"is_compatible": False}), "BACKWARD: a field added without a default is not",
            repr((s, b)))
        s, b = r.call("POST", "/compatibility/subjects/bids-value/versions/latest", {"schema": NARROWED})
        tap((s, b) == (200, {"is_compatible": False}), "BACKWARD: long narrowed to int is not", repr((s, b)))
        s, b = r.call("POST", "/subjects/bids-value/versions", {"schema": NO_DEFAULT})
        tap(s == 409 and b.get("error_code") == 409, "an incompatible registration is refused with 409",
            repr((s, b)))
        tap(r.call("GET", "/subjects") == (200, ["bids-value", "other-value"]), "subjects listed")
        tap(r.call("GET", "/subjects/bids-value/versions") == (200, [1, 2]), "versions listed")
        s, b = r.call("GET", "/subjects/bids-value/versions/latest")
        tap(s == 200 and b == {"subject": "bids-value", "version": 2, "id": 2, "schema": V2}, "latest version",
            repr((s, b)))
        s, b = r.call("GET", "/subjects/bids-value/versions/1")
        tap(s == 200 and b["id"] == 1 and b["version"] == 1, "version 1", repr((s, b)))
        s, b = r.call("GET", "/schemas/ids/2")
        tap((s, b) == (200, {"schema": V2}), "schema by id", repr((s, b)))
        s, b = r.call("GET", "/schemas/ids/99")
        tap(s == 404 and b.get("error_code") == 40403 and "message" in b, "unknown id: 404, 40403", repr((s, b)))
        s, b = r.call("GET", "/subjects/nope/versions")
        tap(s == 404 and b.get("error_code") == 40401, "unknown subject: 404, 40401", repr((s, b)))
        s, b = r.call("GET", "/subjects/bids-value/versions/7")
        tap(s == 404 and b.get("error_code") == 40402, "unknown version: 404, 40402", repr((s, b)))
        s, b = r.call("GET", "/subjects/bids-value/versions/x")
        tap(s == 422 and b.get("error_code") == 42202, "bad version: 422, 42202", repr((s, b)))
        s, b = r.call("POST", "/subjects/bids-value/versions", {"schema": "{\"type\": \"nope\"}"})
        tap(s == 422 and b.get("error_code") == 42201, "invalid schema: 422, 42201", repr((s, b)))
        s, b = r.call("POST", "/compatibility/subjects/nope/versions/latest", {"schema": V1})
        tap(s == 404 and b.get("error_code") == 40401, "compatibility with an unknown subject: 40401",
            repr((s, b)))
    finally:
        p.terminate()
        p.wait(10)
    restart_and_auth(weir)
    tap.end()


def restart_and_auth(weir):
    """--registry-file keeps ids across a restart; --registry-user asks for basic auth."""
    import tempfile
    d = tempfile.mkdtemp(prefix="weir-registry-")
    path = os.path.join(d, "schemas.jsonl")
    addr = "127.0.0.1:%d" % free_port()
    args = [weir, "broker", "--no-kafka", "--registry", addr, "--registry-file", path,
            "--registry-user", "ann:s3cret"]
    import base64
    basic = "Basic " + base64.b64encode(b"ann:s3cret").decode()

    def start():
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        p.stdout.readline()
        return p

    def call(method, path_, body=None, creds=True):
        h = {"Content-Type": CT}
        if creds:
            h["Authorization"] = basic
        req = urllib.request.Request("http://" + addr + path_, method=method,
                                     data=json.dumps(body).encode() if body is not None else None, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    p = start()
    try:
        s, _ = call("GET", "/subjects", creds=False)
        tap(s == 401, "--registry-user: a request without credentials gets 401", repr(s))
        call("POST", "/subjects/a-value/versions", {"schema": V1})
        s, b = call("POST", "/subjects/b-value/versions", {"schema": V2})
        tap((s, b) == (200, {"id": 2}), "with credentials: registered", repr((s, b)))
    finally:
        p.terminate()
        p.wait(10)
    p = start()
    try:
        tap(call("GET", "/schemas/ids/2") == (200, {"schema": V2}), "--registry-file: ids survive a restart")
        tap(call("GET", "/subjects") == (200, ["a-value", "b-value"]), "--registry-file: subjects survive")
        s, b = call("POST", "/subjects/c-value/versions", {"schema": REMOVED})
        tap((s, b) == (200, {"id": 3}), "the next id follows the loaded ones", repr((s, b)))
    finally:
        p.terminate()
        p.wait(10)


if __name__ == "__main__":
    main()
