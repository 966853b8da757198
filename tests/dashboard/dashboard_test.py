#!/usr/bin/python3
"""dashboard_test.py: weir's live dashboard (GET /) in headless Chromium.

Starts an embedded broker and weir (pgwire and HTTP on free ports), creates a source and a
windowed view, inserts rows, and opens http://127.0.0.1:HTTP/#view in headless Chromium driven
over the DevTools protocol. Checks that the page lists the view, shows its rows in the live
table and draws them in the chart; then inserts more rows and checks that the table and the
chart change without a reload (the page follows the view's Server-Sent Events stream). Saves a
screenshot (--screenshot, default dashboard.png in the current directory) as an artifact.

    /usr/bin/python3 tests/dashboard/dashboard_test.py --weir build/server/weir [--screenshot F]

Needs chromium and python3-websocket (scripts/deps.sh --test installs them). The last line of
stdout is "N passed, N failed".
"""
import argparse
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
try:
    import websocket
    from weirtest import Stack, free_port
except ImportError as e:  # pragma: no cover
    sys.exit(f"dashboard_test.py: {e}: run it with /usr/bin/python3 (python3-psycopg2, python3-websocket; "
             "scripts/deps.sh --test installs them)")


class Browser:
    """Headless Chromium and one page, over the DevTools protocol."""

    def __init__(self, tmp):
        self.port = free_port()
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if not exe:
            raise RuntimeError("chromium not found (scripts/deps.sh --test installs it)")
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--window-size=1280,900", f"--remote-debugging-port={self.port}",
             f"--user-data-dir={os.path.join(tmp, 'chromium')}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        targets = None
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=2) as r:
                    targets = [t for t in json.load(r) if t.get("type") == "page"]
                if targets:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        if not targets:
            raise RuntimeError("chromium did not open its DevTools port")
        self.ws = websocket.create_connection(targets[0]["webSocketDebuggerUrl"], timeout=30)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True)
        return r.get("result", {}).get("value")

    def wait_for(self, expr, timeout=20):
        """Polls a JavaScript expression until it is truthy; returns its last value."""
        deadline = time.time() + timeout
        v = None
        while time.time() < deadline:
            v = self.eval(expr)
            if v:
                return v
            time.sleep(0.2)
        return v

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weir", required=True)
    ap.add_argument("--screenshot", default="dashboard.png")
    a = ap.parse_args()
    st = browser = None
    passed = failed = 0

    def check(ok, what, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"ok - {what}")
        else:
            failed += 1
            print(f"not ok - {what}{': ' + str(detail) if detail else ''}")

    try:
        st = Stack(a.weir, http=True, prefix="weir-dash-")
        http_port = st.http_port
        conn = st.conn
        cur = conn.cursor()
        cur.execute("CREATE SOURCE clicks (page TEXT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
                    "WITH (connector = 'kafka', topic = 'dash_clicks')")
        cur.execute("CREATE MATERIALIZED VIEW per_window AS SELECT window_start, count(*) AS clicks "
                    "FROM TUMBLE(clicks, ts, INTERVAL '10' SECOND) GROUP BY window_start")
        cur.execute("INSERT INTO clicks VALUES ('a', '2026-01-01 00:00:01'), ('b', '2026-01-01 00:00:02'), "
                    "('a', '2026-01-01 00:00:11')")
        cur.execute("FLUSH")

        browser = Browser(st.tmp)
        browser.call("Page.enable")
        browser.call("Page.navigate", url=f"http://127.0.0.1:{http_port}/#per_window")
        listed = browser.wait_for(
            "[...document.querySelectorAll('#views tbody tr')].map(r => r.cells[0].textContent).join(',')")
        check(listed and "per_window" in listed, "the page lists the view", listed)
        rows_js = "[...document.querySelectorAll('#rows tbody tr')].map(r => r.textContent).join('|')"
        got = browser.wait_for(f"(() => {{ const t = {rows_js}; return t.includes('00:00:10') ? t : ''; }})()")
        check(got and "00:00:00" in got and "00:00:10" in got, "the live table shows the view's rows", got)
        chart_js = "document.querySelector('#chart').innerHTML"
        chart0 = browser.eval(chart_js) or ""
        check("no rows" not in chart0 and re.search(r"<(path|polyline|circle|rect|line)", chart0),
              "the chart draws the rows", chart0[:200])

        # New rows: a new window and a changed count arrive over the stream, without a reload.
        cur.execute("INSERT INTO clicks VALUES ('c', '2026-01-01 00:00:12'), ('d', '2026-01-01 00:00:25')")
        cur.execute("FLUSH")
        got2 = browser.wait_for(f"(() => {{ const t = {rows_js}; return t.includes('00:00:20') ? t : ''; }})()")
        check(got2 and "00:00:20" in got2, "a new window appears in the table without a reload", got2)
        check(got2 and re.search(r"00:00:10[^|]*2", got2), "an updated count replaces the old one", got2)
        chart1 = browser.wait_for(f"(() => {{ const c = {chart_js}; return c !== {json.dumps(chart0)} ? c : ''; }})()")
        check(bool(chart1), "the chart changes with the new rows")
        nav = browser.eval("performance.getEntriesByType('navigation').length")
        check(nav == 1, "the page was not reloaded", nav)

        shot = browser.call("Page.captureScreenshot", format="png")
        with open(a.screenshot, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        check(os.path.getsize(a.screenshot) > 10000, f"screenshot saved to {a.screenshot}")
    except Exception as e:  # a harness failure is a failed test, with the reason
        check(False, "harness", e)
    finally:
        if browser:
            browser.close()
        if st:
            st.stop()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
