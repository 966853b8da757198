#!/usr/bin/env bash
# bench/nexmark/profile.sh: where one Nexmark query spends its CPU (perf record of the server).
#
# Starts a fresh weir as run.sh does (own port, temp data dir, no Kafka), creates the sources
# and the query's view, records the whole server with `perf record -g` from CREATE VIEW until
# FLUSH returns, and prints the top of `perf report` (self time, then children) into
# --out DIR (default /tmp/weir-prof-<query>): perf.data, self.txt, children.txt.
#
#   bench/nexmark/profile.sh [--weir PATH] [--events N] [--rate R] [--interval MS] [--dwarf] QUERY
#
# --rate is events/s of event time (default 10000000, as run.sh; side_by_side.sh also runs 10000).
# --dwarf records call graphs with DWARF unwinding (heavier, but sees through frames that
# -fomit-frame-pointer leaves out). Needs `perf` (linux-perf) and the kernel's permission
# (kernel.perf_event_paranoid <= 1, or root).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
weir=${WEIR:-}
events=2000000
rate=10000000
interval=1000
cg="-g"
out=""
q=""
while [ $# -gt 0 ]; do
    case "$1" in
    --weir) weir=$2; shift 2 ;;
    --events) events=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --dwarf) cg="--call-graph dwarf,16384"; shift ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) q=$1; shift ;;
    esac
done
[ -n "$q" ] || { echo "usage: $0 [options] QUERY" >&2; exit 2; }
command -v perf >/dev/null || { echo "perf not found (apt-get install linux-perf)" >&2; exit 2; }
. "$here/../lib.sh"
find_weir
out=${out:-/tmp/weir-prof-$q}
mkdir -p "$out"
perf_pid=""
cleanup() { [ -n "$perf_pid" ] && kill -INT "$perf_pid" 2>/dev/null; stop_server; }
trap cleanup EXIT

tmp=$(mktemp -d /tmp/weir-prof-XXXXXX)
port=$(free_port)
"$weir" --data-dir "$tmp/data" --port "$port" --http-port 0 --no-broker \
    --checkpoint-interval "$interval" >"$tmp/server.log" 2>&1 &
server_pid=$!
conn="host=127.0.0.1 port=$port dbname=weir user=weir sslmode=disable"
for _ in $(seq 100); do
    psql "$conn" -Atqc 'SELECT 1' >/dev/null 2>&1 && break
    sleep 0.1
done
sql() { psql "$conn" -X -At -q -v ON_ERROR_STOP=1 "$@" 2>&1; }
EVENTS=$events RATE=$rate PACE=false envsubst <"$here/sources.sql" | sql -f - >/dev/null
# shellcheck disable=SC2086
perf record $cg -o "$out/perf.data" -p "$server_pid" >"$out/record.log" 2>&1 &
perf_pid=$!
sleep 0.5
EVENTS=$events RATE=$rate envsubst <"$here/$q.sql" | sql -f -
while :; do
    r=$(sql -c FLUSH)
    [ "$r" = "" ] && break
    echo "$r" | grep -q "timed out" || { echo "FLUSH: $r" >&2; break; }
done
kill -INT "$perf_pid"
wait "$perf_pid" 2>/dev/null
perf_pid=""
perf report -i "$out/perf.data" --no-children --percent-limit 0.7 --stdio -g none \
    --sort symbol 2>/dev/null | grep -v '^#' | grep -v '^$' >"$out/self.txt"
perf report -i "$out/perf.data" --children --percent-limit 2 --stdio -g none \
    --sort symbol 2>/dev/null | grep -v '^#' | grep -v '^$' >"$out/children.txt"
echo "# $q, $events events at $rate/s: $out/self.txt (self), $out/children.txt (with callees)"
head -40 "$out/self.txt"
