#!/usr/bin/python3
"""topic_lost.py --weir PATH: a deleted or shrunk topic stops the views reading it, and only them.

`weir broker` keeps its log in memory, so restarting it on the same port with other --topic and
--partitions arguments is how a topic disappears (the embedded broker has no DeleteTopics) or comes
back with fewer partitions. Three sources, each with topic.lost_after = '1 second' and
on_offset_gap = 'skip' (every topic comes back from a broker restart with its offsets starting
again at 0, past which the views had read: a gap, tests/robust/offset_gap.py; 'skip' reads the new
topic from its first record):

  bid   topic tl_bids, 4 partitions   -> after the first broker restart the topic is gone
  ask   topic tl_asks, 4 partitions   -> ...recreated with 2 partitions
  oth   topic tl_other, 1 partition   -> always there (and grown to 2, which is followed): its view
                                         keeps producing rows

Checks: after the restart the views over bid and ask are 'failed' in weir_views with errors naming
the source, the topic and what changed, weir_view_failed is 1 for them in /metrics, the log says
so, and the view over oth reads the records produced after the restart; RESUME while the topics are
still wrong fails with the same error; a server restart keeps them failed (checked at open, without
recreating the topic); when the broker has the topics again with 4 partitions, RESUME runs them
and they count the new records; a topic that is merely unreachable (broker down) stops nothing.

Prints TAP; exits 1 if a check failed.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Tap, free_port  # noqa: E402

tap = Tap()

try:
    import psycopg2
    from confluent_kafka import Producer
except ImportError as e:  # pragma: no cover
    print("1..0 # SKIP needs python3-psycopg2 and python3-confluent-kafka: %s" % e)
    sys.exit(77)


def _drain(f):
    for _ in f:
        pass


class Broker:
    def __init__(self, weir, port):
        self.weir, self.addr, self.proc = weir, "127.0.0.1:%d" % port, None

    def start(self, partitions, topics):
        args = [self.weir, "broker", "--listen", self.addr, "--partitions", str(partitions)]
        for t in topics:
            args += ["--topic", t]
        deadline = time.time() + 20
        while time.time() < deadline:  # the old one's port may linger for a moment
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            line = self.proc.stdout.readline()
            if "listening on" in line:
                threading.Thread(target=_drain, args=(self.proc.stdout,), daemon=True).start()
                return
            self.proc.wait()
            time.sleep(0.2)
        raise RuntimeError("the broker did not start on %s" % self.addr)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(20)
        self.proc = None


class Server:
    def __init__(self, weir, kafka, tmp):
        self.weir, self.kafka, self.tmp = weir, kafka, tmp
        self.log_path = os.path.join(tmp, "server.log")
        self.proc = None

    def start(self):
        self.port, self.http = free_port(), free_port()
        self.log_f = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            [self.weir, "serve", "--data-dir", os.path.join(self.tmp, "data"), "--port", str(self.port),
             "--kafka", self.kafka, "--no-broker", "--http-port", str(self.http), "--checkpoint-interval", "200"],
            stdout=self.log_f, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline and self.proc.poll() is None:
            try:
                c = psycopg2.connect(host="127.0.0.1", port=self.port, dbname="weir", user="weir", connect_timeout=2)
                c.autocommit = True
                self.cur = c.cursor()
                return
            except psycopg2.Error:
                time.sleep(0.1)
        raise RuntimeError("weir did not answer")

    def q(self, sql):
        self.cur.execute(sql)
        return self.cur.fetchall() if self.cur.description else None

    def metrics(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.http, timeout=10) as r:
            return r.read().decode()

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.log_f.close()
        self.proc = None


def produce(kafka, topic, partitions, n, start):
    p = Producer({"bootstrap.servers": kafka})
    for i in range(n):
        p.produce(topic, json.dumps({"v": start + i}).encode(), partition=i % partitions)
    if p.flush(20) != 0:
        raise RuntimeError("could not produce to %s" % topic)


def wait_for(fn, timeout=30):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = fn()
            if last is True:
                return True, None
        except psycopg2.Error as e:
            last = e
        time.sleep(0.1)
    return False, last


def views(s):
    return {r[0]: (r[1], r[2]) for r in s.q("SELECT name, state, last_error FROM weir_views")}


def count(s, view):
    return s.q("SELECT n FROM %s" % view)[0][0]


GONE = 'topic "tl_bids" of source "bid" no longer exists'
SHRUNK = 'topic "tl_asks" of source "ask" has 2 partitions, the source was reading 4 (partitions 2, 3 are gone)'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="weir-topiclost-", dir="/tmp")
    broker = Broker(a.weir, free_port())
    server = Server(a.weir, broker.addr, tmp)
    try:
        broker.start(1, [])
        server.start()
        for name, topic, parts, grace in (("bid", "tl_bids", 4, "1 second"), ("ask", "tl_asks", 4, "1 second"),
                                          ("oth", "tl_other", 1, "1 second"), ("slow", "tl_slow", 1, "1 hour")):
            server.q("CREATE SOURCE %s (v BIGINT) WITH (connector = 'kafka', topic = '%s', topic.partitions = '%d', "
                     "scan.startup.mode = 'earliest', topic.lost_after = '%s', on_offset_gap = 'skip') "
                     "FORMAT PLAIN ENCODE JSON"
                     % (name, topic, parts, grace))
            server.q("CREATE MATERIALIZED VIEW %s_n AS SELECT count(*) AS n FROM %s" % (name, name))
        produce(broker.addr, "tl_bids", 4, 40, 0)
        produce(broker.addr, "tl_asks", 4, 40, 0)
        produce(broker.addr, "tl_other", 1, 10, 0)
        ok, last = wait_for(lambda: [count(server, v) for v in ("bid_n", "ask_n", "oth_n")] == [40, 40, 10])
        tap(ok, "the three views read their topics", last)
        server.q("CHECKPOINT")

        # The broker down for a while: unreachable is not lost, nothing fails.
        broker.stop()
        time.sleep(2.5)  # over topic.lost_after: a wrong verdict would have stopped the views by now
        st = views(server)
        tap(all(st[v][0] == "running" for v in ("bid_n", "ask_n", "oth_n")),
            "an unreachable broker stops no view", st)

        # Back without tl_bids, with tl_asks at 2 partitions (and tl_other grown to 2: followed).
        broker.start(2, ["tl_asks", "tl_other"])
        produce(broker.addr, "tl_other", 2, 6, 100)
        ok, last = wait_for(lambda: views(server)["bid_n"][0] == "failed" and views(server)["ask_n"][0] == "failed")
        st = views(server)
        tap(ok, "the views over the deleted and the shrunk topic are failed", st)
        tap(st["bid_n"][1] == GONE, "weir_views names the deleted topic and its source", st["bid_n"])
        tap(st["ask_n"][1] == SHRUNK, "weir_views says which partitions of the shrunk topic are gone", st["ask_n"])
        ok, last = wait_for(lambda: count(server, "oth_n") == 16)
        tap(ok and views(server)["oth_n"][0] == "running",
            "the view over another topic keeps reading, its new partition too", last)
        tap('topic "tl_other" of source "oth" grew from 1 to 2 partitions' in server.log(),
            "the log says the topic grew", server.log()[-2000:])
        m = server.metrics()
        tap(re.search(r'^weir_view_failed\{view="bid_n"\} 1$', m, re.M) and
            re.search(r'^weir_view_failed\{view="ask_n"\} 1$', m, re.M) and
            re.search(r'^weir_view_failed\{view="oth_n"\} 0$', m, re.M) and
            re.search(r'^weir_view_running\{view="oth_n"\} 1$', m, re.M),
            "/metrics: weir_view_failed for the two views only", m)
        # tl_slow is gone too, but its source waits an hour: its view runs, and FLUSH has nothing
        # to wait for in a topic that is not there (it used to fail reading the end offsets).
        try:
            server.q("FLUSH")
            tap(views(server)["slow_n"][0] == "running", "FLUSH within topic.lost_after of a missing topic",
                views(server))
        except psycopg2.Error as e:
            tap(False, "FLUSH within topic.lost_after of a missing topic", "%s %s" % (e.pgcode, e))
        log = server.log()
        tap(GONE in log and SHRUNK in log and "view bid_n stopped" in log, "the log says why",
            log[-2000:])
        for v, want in (("bid_n", GONE), ("ask_n", SHRUNK)):
            try:
                server.q("ALTER MATERIALIZED VIEW %s RESUME" % v)
                tap(False, "RESUME of %s while its topic is still wrong fails" % v)
            except psycopg2.Error as e:
                tap(e.pgcode == "42704" and want in str(e), "RESUME of %s while its topic is still wrong fails" % v,
                    "%s %s" % (e.pgcode, e))

        # A restart: checked at open, the topic not recreated, the views stay failed.
        server.stop()
        server.start()
        st = views(server)
        tap(st["bid_n"] == ("failed", GONE) and st["ask_n"] == ("failed", SHRUNK),
            "after a server restart they are failed at once", st)
        topics = subprocess.run(["/usr/bin/python3", "-c", "from confluent_kafka.admin import AdminClient;"
                                 "print(sorted(AdminClient({'bootstrap.servers': '%s'}).list_topics(timeout=10)"
                                 ".topics))" % broker.addr], capture_output=True, text=True).stdout
        tap("tl_bids" not in topics, "the deleted topic was not recreated under the view", topics)
        ok, last = wait_for(lambda: views(server)["oth_n"][0] == "running")
        tap(ok, "the other view runs after the restart", views(server))

        # The topics back with 4 partitions: RESUME runs the views again.
        broker.stop()
        broker.start(4, ["tl_bids", "tl_asks", "tl_other"])
        produce(broker.addr, "tl_bids", 4, 8, 1000)
        produce(broker.addr, "tl_asks", 4, 8, 1000)
        for v in ("bid_n", "ask_n"):
            ok, last = wait_for(lambda: server.q("ALTER MATERIALIZED VIEW %s RESUME" % v) is None)
            tap(ok, "RESUME of %s once its topic is back" % v, last)
        # The counts come from the last checkpoint (40) plus the recreated topics' records.
        ok, last = wait_for(lambda: [count(server, v) for v in ("bid_n", "ask_n")] == [48, 48])
        tap(ok, "the resumed views read the recreated topics", last)
        st = views(server)
        tap(st["bid_n"][0] == "running" and st["ask_n"][0] == "running", "both running again", st)
    except Exception as e:  # noqa: BLE001
        tap(False, "no exception", repr(e))
    finally:
        server.stop()
        broker.stop()
        if tap.failed:
            try:
                print("# server log tail:\n# " + "\n# ".join(server.log()[-3000:].splitlines()))
            except OSError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)
    tap.end()


if __name__ == "__main__":
    main()
