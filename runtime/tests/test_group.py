#!/usr/bin/python3
"""The work group (runtime/group.h) against the embedded broker, with three
member processes (runtime/tests/group_member.c), so that one can die by
kill -9 as a node does. TAP output.

  test_group.py BROKER GROUP_MEMBER [--no-static-members]

Checks, against one broker (8 partitions, session.timeout.ms 6 s):
  1. members a, b, c: their assignments are disjoint and cover the 8 partitions;
  2. offsets committed through the group are what a plain librdkafka
     consumer's committed() reads for the group; an offset of a partition
     the member does not own is not sent;
  3. c killed with kill -9 and restarted at once with the same id gets its
     partitions back, and a and b lose none (static membership; the broker
     emulates it for the mock, see runtime/broker.c);
  4. b killed with kill -9 and not restarted: after the session timeout its
     partitions move to a and c, which keep their own (cooperative-sticky).

--no-static-members runs the broker without the emulation: check 3 then
fails on the mock (proof that the emulation is what makes it pass).
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

try:
    from confluent_kafka import Consumer, TopicPartition
except ImportError as e:  # pragma: no cover
    print("1..0 # SKIP needs python3-confluent-kafka: %s" % e)
    sys.exit(77)

TOPIC = "w8"
N_PARTS = 8
CLUSTER = "t"
SESSION_MS = 6000

n_test = 0
failed = 0


def ok(cond, what):
    global n_test, failed
    n_test += 1
    print(("ok %d - %s" if cond else "not ok %d - %s") % (n_test, what), flush=True)
    if not cond:
        failed += 1
    return cond


def diag(msg):
    print("# " + msg, flush=True)


class Member:
    """A group_member process; lines of its stdout are collected by a thread."""

    def __init__(self, binary, boot, node):
        self.node = node
        self.lines = []
        self.lock = threading.Lock()
        self.p = subprocess.Popen([binary, boot, CLUSTER, node, str(SESSION_MS), TOPIC],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            with self.lock:
                self.lines.append(line.rstrip("\n"))

    def assignment(self):
        """The last reported assignment, as a set of partitions (None before any)."""
        with self.lock:
            for line in reversed(self.lines):
                if line.startswith("assignment"):
                    return {int(x.split(":")[1]) for x in line.split()[1:]}
        return None

    def mark(self):
        with self.lock:
            return len(self.lines)

    def since(self, mark):
        with self.lock:
            return list(self.lines[mark:])

    def wait_line(self, prefix, mark, timeout):
        end = time.time() + timeout
        while time.time() < end:
            for line in self.since(mark):
                if line.startswith(prefix):
                    return line
            time.sleep(0.05)
        return None

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def kill9(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()

    def stop(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.p.kill()


def settled(members, quiet_s, timeout):
    """Waits until the members' assignments are disjoint, cover every
    partition and have not changed for quiet_s; returns {node: set} or None."""
    end = time.time() + timeout
    last, since = None, time.time()
    while time.time() < end:
        cur = {m.node: m.assignment() for m in members}
        if cur != last:
            last, since = cur, time.time()
        elif all(v is not None for v in cur.values()):
            parts = [p for v in cur.values() for p in v]
            if sorted(parts) == list(range(N_PARTS)) and time.time() - since >= quiet_s:
                return cur
        time.sleep(0.2)
    diag("not settled: %r" % last)
    return None


def start_broker(binary, extra):
    p = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--partitions", str(N_PARTS), "--topic", TOPIC]
                         + extra, stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "broker.log"), "w"),
                         text=True)
    line = p.stdout.readline()
    if "listening on" not in line:
        print("Bail out! broker did not start: %r" % line)
        sys.exit(1)
    return p, line.split()[-1]


def committed(boot, parts):
    c = Consumer({"bootstrap.servers": boot, "group.id": "_weir.%s.work" % CLUSTER,
                  "enable.auto.commit": False})
    try:
        res = c.committed([TopicPartition(TOPIC, p) for p in parts], timeout=20)
        return {tp.partition: tp.offset for tp in res}
    finally:
        c.close()


def main():
    global tmp
    broker_bin, member_bin = sys.argv[1], sys.argv[2]
    extra = ["--no-static-members"] if "--no-static-members" in sys.argv[3:] else []
    tmp = tempfile.mkdtemp(prefix="weir-group-")
    print("1..9", flush=True)
    t0 = time.time()
    broker, boot = start_broker(broker_bin, extra)
    members = {}
    try:
        for n in "abc":
            members[n] = Member(member_bin, boot, n)
        first = settled(list(members.values()), 6, 90)
        ok(first is not None, "three members: assignments disjoint and covering %d partitions" % N_PARTS)
        ok(first is not None and all(len(v) >= 2 for v in first.values()),
           "the assignment is balanced (2 or 3 partitions each): %r" % first)
        if first is None:
            return
        diag("first assignment %r after %.0f s" % (first, time.time() - t0))

        # 2. commits
        want = {}
        for n, m in members.items():
            for p in sorted(first[n]):
                mark = m.mark()
                want[p] = 1000 + 10 * p
                m.send("commit %s %d %d" % (TOPIC, p, want[p]))
                ok_line = m.wait_line("sent", mark, 10)
                if ok_line != "sent 1":
                    diag("%s: %r" % (n, m.since(mark)))
            # every commit acknowledged (group_member prints the running count)
            m.wait_line("commits %d" % len(first[n]), 0, 20)
        got = committed(boot, range(N_PARTS))
        ok(got == want, "committed() of a plain consumer reads the offsets each member committed: %r" % got)
        a = members["a"]
        foreign = min(set(range(N_PARTS)) - first["a"])
        mark = a.mark()
        a.send("commit %s %d 5" % (TOPIC, foreign))
        ok(a.wait_line("sent", mark, 10) == "sent 0",
           "a commit for a partition the member does not own is not sent")
        time.sleep(1)
        ok(committed(boot, [foreign]).get(foreign) == want[foreign], "and the owner's offset stays")

        # 3. kill -9 and a quick restart with the same id
        marks = {n: members[n].mark() for n in "ab"}
        members["c"].kill9()
        members["c"] = Member(member_bin, boot, "c")
        t1 = time.time()
        again = settled(list(members.values()), 8, 60)
        diag("after the restart of c: %r (%.0f s)" % (again, time.time() - t1))
        ok(again == first, "c restarted at once with the same id gets its partitions back, nothing else moves")
        lost = [l for n in "ab" for l in members[n].since(marks[n]) if l.startswith(("revoked", "lost"))]
        ok(not lost, "a and b lost no partition during c's restart: %r" % lost)

        # 4. kill -9 without a restart
        base = again or first
        members["b"].kill9()
        t2 = time.time()
        del members["b"]
        after = settled(list(members.values()), 4, 90)
        diag("after the kill of b: %r (%.0f s)" % (after, time.time() - t2))
        ok(after is not None and after["a"] | after["c"] == set(range(N_PARTS)),
           "b killed: its partitions %r moved to a and c" % sorted(base["b"]))
        ok(after is not None and base["a"] <= after["a"] and base["c"] <= after["c"],
           "a and c kept their own partitions (cooperative-sticky)")
    finally:
        for m in members.values():
            m.stop()
        broker.terminate()
        broker.wait()
        if failed:
            with open(os.path.join(tmp, "broker.log")) as f:
                for line in f.read().splitlines()[-20:]:
                    diag("broker: " + line)
        shutil.rmtree(tmp, ignore_errors=True)
        diag("run time %.0f s" % (time.time() - t0))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
