#!/usr/bin/python3
"""disk_full_midwrite.py --weir PATH: a disk that fills in the middle of a write is 53100.

LMDB turns a short write (the filesystem ran out of space part way through) into EIO, which weir
reported as 58030 Input/output error. With a small tmpfs filled to within a few hundred kB:

  - INSERT whose checkpoint cannot be written answers 53100 (not 58030), and so does CHECKPOINT;
  - ALTER SYSTEM SAVEPOINT into a directory on the full tmpfs answers 53100;
  - after the filler is deleted, CHECKPOINT succeeds.

Needs to mount a tmpfs (root in a container that allows it); skips otherwise. Prints TAP.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Tap, free_port  # noqa: E402

import psycopg2  # noqa: E402

tap = Tap()


def fill(mnt, leave):
    """Fills mnt to within `leave` bytes of full."""
    vfs = os.statvfs(mnt)
    free = vfs.f_bavail * vfs.f_frsize
    with open(os.path.join(mnt, "filler"), "ab") as f:
        f.write(b"\0" * max(0, free - leave))


def sqlstate(cur, sql):
    try:
        cur.execute(sql)
        return "00000"
    except psycopg2.Error as e:
        return e.pgcode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    weir = ap.parse_args().weir
    tmp = tempfile.mkdtemp(prefix="weir-dfm-", dir="/tmp")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", mnt],
                      capture_output=True).returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        print("1..0 # SKIP cannot mount a tmpfs here")
        sys.exit(77)
    proc = None
    try:
        port = free_port()
        log = open(os.path.join(tmp, "server.log"), "w")
        proc = subprocess.Popen([weir, "serve", "--data-dir", os.path.join(mnt, "data"), "--port", str(port),
                                 "--no-broker", "--http-port", "0", "--checkpoint-interval", "600000"],
                                stdout=log, stderr=subprocess.STDOUT)
        conn = None
        for _ in range(300):
            try:
                conn = psycopg2.connect(host="127.0.0.1", port=port, dbname="weir", user="weir", connect_timeout=1)
                break
            except psycopg2.Error:
                time.sleep(0.1)
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, v TEXT)")
        cur.execute("CHECKPOINT")

        fill(mnt, 300_000)
        states = set()
        for i in range(0, 2000, 100):
            states.add(sqlstate(cur, "INSERT INTO t VALUES " +
                                ",".join("(%d, '%s')" % (j, "x" * 1000) for j in range(i, i + 100))))
        states.discard("00000")
        tap(states == {"53100"}, "INSERT on a disk that fills mid-write: 53100", repr(states))
        st = sqlstate(cur, "CHECKPOINT")
        tap(st == "53100", "CHECKPOINT on a full disk: 53100", st)

        os.unlink(os.path.join(mnt, "filler"))
        st = sqlstate(cur, "CHECKPOINT")
        tap(st == "00000", "space back: CHECKPOINT succeeds", st)

        fill(mnt, 300_000)
        st = sqlstate(cur, "ALTER SYSTEM SAVEPOINT TO '%s'" % os.path.join(mnt, "sp"))
        tap(st == "53100", "SAVEPOINT onto a full disk: 53100", st)
        conn.close()
    finally:
        if proc:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        subprocess.run(["umount", mnt], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    tap.end()


if __name__ == "__main__":
    main()
