#!/usr/bin/python3
"""json_depth.py --weir PATH: a JSON record nested too deeply is a bad record with its reason.

The JSON decoder stops at 64 levels (the record's object is level 1) to bound its recursion on
hostile input. Records on both sides of the limit, in a value column (JSONB) and in a key no
column reads, are produced with kcat; checks that the records up to 64 levels reach the view, and
that each deeper one is counted in weir_source_errors with its offset and the reason "JSON nested
more than 64 levels deep" (never dropped silently).

Prints TAP; exits 1 if a check failed.
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from weirtest import Stack, Tap  # noqa: E402

tap = Tap()
KCAT = "/usr/bin/kcat"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    weir = ap.parse_args().weir
    with Stack(weir) as st:
        st.q("CREATE SOURCE s (k BIGINT, j JSONB) WITH (connector = 'kafka', topic = 'deep', "
             "scan.startup.mode = 'earliest') FORMAT PLAIN ENCODE JSON")
        st.q("CREATE MATERIALIZED VIEW v AS SELECT k FROM s")

        def deep(d):
            return "[" * d + "1" + "]" * d
        # Levels: the record's object, then d arrays.
        recs = ['{"k": 1, "j": %s}' % deep(62), '{"k": 2, "j": %s}' % deep(63),
                '{"k": 3, "j": %s}' % deep(64), '{"k": 4, "other": %s}' % deep(64),
                '{"k": 5, "j": %s}' % deep(100000)]
        subprocess.run([KCAT, "-P", "-b", st.kafka, "-t", "deep", "-p", "0"], input="\n".join(recs) + "\n",
                       text=True, check=True, timeout=60)
        deadline = time.time() + 20
        rows, errs = [], []
        while time.time() < deadline:
            st.q("FLUSH")
            rows = [r[0] for r in st.q("SELECT k FROM v ORDER BY k")]
            errs = st.q("SELECT record_offset, error FROM weir_source_errors ORDER BY record_offset")
            if len(rows) + len(errs) >= len(recs):
                break
            time.sleep(0.5)
        tap(rows == [1, 2], "63 and 64 levels are read", repr(rows))
        tap([e[0] for e in errs] == [2, 3, 4], "65 levels and more: bad records at offsets 2, 3, 4", repr(errs))
        tap(all("JSON nested more than 64 levels deep" in e[1] for e in errs), "the reason names the limit",
            repr([e[1] for e in errs]))
    tap.end()


if __name__ == "__main__":
    main()
