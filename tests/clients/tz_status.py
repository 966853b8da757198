#!/usr/bin/python3
"""tz_status.py: SET TIME ZONE as a driver sees it.

A driver learns the session's TimeZone from ParameterStatus messages (at startup, and with
the answer to every SET/RESET of it), and reads timestamptz text with the offset weir prints.
psycopg2 exposes the first as connection.get_parameter_status() and turns the second into an
aware datetime, so both are checked here: the status follows SET, SET ... DEFAULT, RESET and
RESET ALL, a failed SET leaves it alone, and values read in two zones are the same instant.

    /usr/bin/python3 tests/clients/tz_status.py --weir build/server/weir

The last line of stdout is "N passed, N failed".
"""
import argparse
import datetime
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
try:
    import psycopg2
    from weirtest import Stack
except ImportError as e:  # pragma: no cover
    sys.exit(f"tz_status.py: {e}: run it with /usr/bin/python3 (python3-psycopg2)")

passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok - {what}")
    else:
        failed += 1
        print(f"not ok - {what}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    args = ap.parse_args()
    with Stack(args.weir, prefix="weir-tz-") as s:
        c = s.conn
        check(c.get_parameter_status("TimeZone") == "UTC", "TimeZone is UTC at startup")
        s.q("SET TIME ZONE 'asia/kolkata'")
        check(c.get_parameter_status("TimeZone") == "Asia/Kolkata", "SET TIME ZONE sends the zone's name")
        (ts,), = s.q("SELECT timestamptz '2024-03-31 12:00:00+00'")
        check(ts.utcoffset() == datetime.timedelta(hours=5, minutes=30), f"offset +05:30 read by the driver ({ts})")
        check(ts == datetime.datetime(2024, 3, 31, 12, tzinfo=datetime.timezone.utc), "the same instant")
        try:
            s.q("SET TIME ZONE 'Nowhere/Land'")
            check(False, "an unknown zone is refused")
        except psycopg2.Error as e:
            check(e.pgcode == "22023", f"an unknown zone is 22023 ({e.pgcode})")
        check(c.get_parameter_status("TimeZone") == "Asia/Kolkata", "a failed SET leaves the zone")
        s.q("SET timezone = 'America/New_York'")
        check(c.get_parameter_status("TimeZone") == "America/New_York", "SET timezone = ... sends it too")
        (ts,), = s.q("SELECT timestamptz '2024-07-01 12:00:00+00'")
        check(ts.utcoffset() == datetime.timedelta(hours=-4), f"daylight saving offset -04 ({ts})")
        s.q("SET TIME ZONE DEFAULT")
        check(c.get_parameter_status("TimeZone") == "UTC", "SET TIME ZONE DEFAULT: back to UTC")
        s.q("SET TIME ZONE 'Europe/Berlin'")
        s.q("RESET TIME ZONE")
        check(c.get_parameter_status("TimeZone") == "UTC", "RESET TIME ZONE: back to UTC")
        s.q("SET TIME ZONE 'Europe/Berlin'")
        s.q("RESET ALL")
        check(c.get_parameter_status("TimeZone") == "UTC", "RESET ALL: back to UTC")
        (tz,), = s.q("SHOW TIME ZONE")
        check(tz == "UTC", "SHOW TIME ZONE after RESET ALL")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
