#!/usr/bin/python3
"""broker_big_record.py --weir PATH: the embedded broker refuses a record batch it cannot keep.

The mock behind `weir broker` keeps about 5 MiB per partition and, trimming, also hid the batch it
had just acknowledged: kcat produced one 10 MB record and 28 small ones, exited 0, and the
partition was empty. Checks, with kcat as the producer (its own message.max.bytes raised so the
big record leaves the client):

  - default limit: a 10 MB record is refused with "Message size too large" (kcat exits non-zero),
    the 28 small records around it are all kept and read back;
  - --max-message-bytes 100000: a 200 kB record is refused, a 50 kB one is kept;
  - --max-message-bytes out of range is refused at start.

Prints TAP; exits 1 if a check failed.
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Tap  # noqa: E402

tap = Tap()
KCAT = "/usr/bin/kcat"


def start_broker(weir, *extra):
    b = subprocess.Popen([weir, "broker", "--listen", "127.0.0.1:0", "--topic", "big"] + list(extra),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = b.stdout.readline()
    m = re.search(r"listening on (\S+:\d+)", line)
    if not m:
        b.kill()
        raise RuntimeError("the broker did not start: " + line + b.stderr.read())
    return b, m.group(1)


def stop(b):
    b.terminate()
    try:
        b.wait(10)
    except subprocess.TimeoutExpired:
        b.kill()
        b.wait()


def produce(kafka, lines):
    """Produces one record per line; returns (exit code, stderr)."""
    p = subprocess.run([KCAT, "-P", "-b", kafka, "-t", "big", "-p", "0", "-X", "message.max.bytes=20000000",
                        "-X", "linger.ms=0"],
                       input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120)
    return p.returncode, p.stderr


def consume(kafka):
    """Every record of big[0] from the start: a list of (offset, length)."""
    p = subprocess.run([KCAT, "-C", "-b", kafka, "-t", "big", "-p", "0", "-o", "beginning", "-e",
                        "-X", "fetch.message.max.bytes=20000000", "-f", "%o %S\\n"],
                       capture_output=True, text=True, timeout=60)
    return [tuple(int(x) for x in ln.split()) for ln in p.stdout.splitlines() if ln.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    weir = ap.parse_args().weir
    if not os.access(KCAT, os.X_OK):
        print("1..0 # SKIP kcat is not installed")
        return

    b, kafka = start_broker(weir)
    try:
        small = ["small%02d" % i for i in range(28)]
        rc, err = produce(kafka, small[:14] + ["x" * 10_000_000] + small[14:])
        tap(rc != 0 and "too large" in err.lower(), "a 10 MB record is refused to the producer",
            "kcat exit %d: %s" % (rc, err))
        got = consume(kafka)
        tap(sorted(n for _, n in got) == [7] * 28, "the 28 small records are all kept", repr(got[:40]))
        tap(all(n < 1_000_000 for _, n in got), "nothing over the limit was stored", repr(got[:40]))
    finally:
        stop(b)

    b, kafka = start_broker(weir, "--max-message-bytes", "100000")
    try:
        rc, err = produce(kafka, ["y" * 200_000])
        tap(rc != 0 and "too large" in err.lower(), "--max-message-bytes 100000: 200 kB refused",
            "kcat exit %d: %s" % (rc, err))
        rc, err = produce(kafka, ["z" * 50_000])
        tap(rc == 0, "--max-message-bytes 100000: 50 kB accepted", err)
        tap([n for _, n in consume(kafka)] == [50_000], "only the 50 kB record is in the topic")
    finally:
        stop(b)

    p = subprocess.run([weir, "broker", "--listen", "127.0.0.1:0", "--max-message-bytes", "10000000"],
                       capture_output=True, text=True, timeout=30)
    tap(p.returncode == 2 and "max-message-bytes" in p.stderr, "--max-message-bytes over 2621440 refused",
        p.stderr)
    tap.end()


if __name__ == "__main__":
    main()
