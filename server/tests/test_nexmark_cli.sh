#!/bin/sh
# `weir nexmark` and the nexmark connector share one default rate (10,000 events/s of event
# time, the Nexmark generator's): without --rate, event n is at floor(n * 1000 / 10000) ms after
# 2026-01-01 00:00:00, as a source declared without nexmark.events.per.second reads it.
# TAP. Usage: test_nexmark_cli.sh WEIR
weir=$1
echo "1..3"
ok() { if [ "$1" = "$2" ]; then echo "ok - $3"; else echo "not ok - $3: got '$1', want '$2'"; fi; }
# 100 events: bid 99 (event 99) at 9.9 ms -> 9 ms; at 10M/s it would be at 0 ms.
last=$("$weir" nexmark --table bid --events 100 --format csv | tail -1 | cut -d, -f6)
ok "$last" "2026-01-01 00:00:00.009" "default rate: the last bid of 100 events at 9 ms"
a=$("$weir" nexmark --table auction --events 5000 --format csv | md5sum)
b=$("$weir" nexmark --table auction --events 5000 --rate 10000 --format csv | md5sum)
ok "$a" "$b" "no --rate is --rate 10000"
"$weir" nexmark --help | grep -q "default 10000," && echo "ok - --help states the default" ||
    echo "not ok - --help states the default"
