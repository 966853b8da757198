#!/usr/bin/python3
"""config_sources.py --weir PATH: settings from --name=value, a file and the environment.

Issue 20: every flag accepts --name=value, settings come from a file (--config FILE, name = value
lines) and from WEIR_NAME environment variables; the command line wins over the environment,
which wins over the file. Checks that a server started each way listens where it was told, that
the precedence holds, and that a bad file is refused at start with the file, line and name.

Prints TAP; exits 1 if a check failed.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Tap, free_port  # noqa: E402
import psycopg2  # noqa: E402

tap = Tap()


def answers(port, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            c = psycopg2.connect(host="127.0.0.1", port=port, dbname="weir", user="weir", connect_timeout=1)
            c.close()
            return True
        except psycopg2.Error:
            time.sleep(0.2)
    return False


def run(weir, args, env=None, expect_exit=False):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.Popen([weir] + args, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if expect_exit:
        out, _ = p.communicate(timeout=20)
        return p.returncode, out
    return p


def stop(p):
    p.terminate()
    try:
        p.wait(15)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    weir = ap.parse_args().weir
    tmp = tempfile.mkdtemp(prefix="weir-config-", dir="/tmp")
    broker = subprocess.Popen([weir, "broker", "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    kafka = None
    while not kafka:
        line = broker.stdout.readline()
        if "listening on" in line:
            kafka = line.split("listening on")[1].split()[0]
    try:
        # --name=value
        port = free_port()
        p = run(weir, ["--data-dir=" + os.path.join(tmp, "d1"), "--port=%d" % port, "--kafka=" + kafka,
                       "--no-broker", "--http-port=0"])
        tap(answers(port), "--name=value: the server listens on --port=%d" % port)
        stop(p)

        # A file, and the environment over it, and the command line over both.
        fport, eport, cport = free_port(), free_port(), free_port()
        cfg = os.path.join(tmp, "weir.toml")
        with open(cfg, "w") as f:
            f.write('# weir settings\ndata_dir = "%s"\nport = %d   # the file\'s port\nkafka = %s\n'
                    'no-broker = true\nhttp-port = 0\n' % (os.path.join(tmp, "d2"), fport, kafka))
        p = run(weir, ["--config", cfg])
        tap(answers(fport) and os.path.isdir(os.path.join(tmp, "d2")), "--config FILE: its port and data directory")
        stop(p)
        p = run(weir, ["--config=" + cfg], env={"WEIR_PORT": str(eport)})
        tap(answers(eport) and not answers(fport, 1), "WEIR_PORT wins over the file")
        stop(p)
        p = run(weir, ["--config", cfg, "--port", str(cport)], env={"WEIR_PORT": str(eport)})
        tap(answers(cport) and not answers(eport, 1), "the command line wins over the environment")
        stop(p)

        # Refusals name the file, the line and the setting.
        bad = os.path.join(tmp, "bad.toml")
        with open(bad, "w") as f:
            f.write("port = 4566\nno_such_thing = 1\n")
        rc, out = run(weir, ["--config", bad], expect_exit=True)
        tap(rc == 2 and "bad.toml line 2: unknown setting \"no_such_thing\"" in out, "an unknown setting is refused",
            out)
        rc, out = run(weir, ["--config", bad + ".missing"], expect_exit=True)
        tap(rc == 2 and "cannot read the configuration file" in out, "a missing file is refused", out)
        rc, out = run(weir, ["--no-broker", "--http-port=0"], env={"WEIR_HTTP_SQL": "maybe"}, expect_exit=True)
        tap(rc == 2 and "WEIR_HTTP_SQL: http-sql must be true or false" in out, "a bad switch value is refused", out)
        rc, out = run(weir, ["--port=99999"], expect_exit=True)
        tap(rc == 2 and "bad option: --port 99999" in out, "a bad value gets the command line's error", out)
    finally:
        stop(broker)
        subprocess.run(["rm", "-rf", tmp])
    tap.end()


if __name__ == "__main__":
    main()
