#!/usr/bin/env bash
# bench/recovery.sh: how long weir takes to come back after kill -9 with a large state.
#
# A view keeps every bid of the built-in nexmark generator (append-only, one row per bid with
# its `extra` padding) until the data directory holds --gib GiB. Then: CHECKPOINT, kill -9,
# restart on the same data directory, and measure
#   - ready: restart until a query answers (LMDB open, catalog replay, dataflows rebuilt);
#   - first output: restart until the view has applied its first new change (the generator
#     resumes at the event number of the last checkpoint).
# The state is not loaded at start: LMDB maps it and operators read keys as they need them,
# so recovery time does not grow with the state size. Prints the figures.
#
#   bench/recovery.sh [--weir PATH] [--gib G]      (default 1 GiB)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
weir=""
gib=1
while [ $# -gt 0 ]; do
    case "$1" in
    --weir) weir=$2; shift 2 ;;
    --gib) gib=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
. "$here/lib.sh"
find_weir

tmp=$(mktemp -d /tmp/weir-recovery.XXXXXX)
port=$((20000 + RANDOM % 20000))
pid=""
cleanup() {
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
start() {
    "$weir" --data-dir "$tmp/data" --port "$port" --http-port 0 --no-broker --kafka 127.0.0.1:1 \
        >>"$tmp/server.log" 2>&1 &
    pid=$!
}
q() { psql -X -qAt -h 127.0.0.1 -p "$port" -U weir weir -c "$1" 2>/dev/null; }
now_ms() { date +%s%3N; }
wait_ready() {
    for _ in $(seq 600); do q "SELECT 1" >/dev/null && return 0; sleep 0.05; done
    return 1
}

start
wait_ready || { echo "server did not start"; tail "$tmp/server.log"; exit 1; }
q "CREATE SOURCE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
     date_time TIMESTAMP, extra VARCHAR, WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
   WITH (connector = 'nexmark', nexmark.table.type = 'bid', nexmark.event.num = '1000000000',
         nexmark.events.per.second = '1000000')" >/dev/null
q "CREATE MATERIALIZED VIEW all_bids AS SELECT auction, bidder, price, date_time, extra FROM bid" >/dev/null
target=$((gib * 1024 * 1024 * 1024))
t0=$(now_ms)
while :; do
    size=$(stat -c %s "$tmp/data/data.mdb" 2>/dev/null || echo 0)
    [ "$size" -ge "$target" ] && break
    if ! kill -0 "$pid" 2>/dev/null; then echo "server died"; tail "$tmp/server.log"; exit 1; fi
    sleep 1
done
fill_s=$(( ($(now_ms) - t0) / 1000 ))
q "CHECKPOINT" >/dev/null
rows=$(q "SELECT changes FROM weir_views WHERE name = 'all_bids'")
size=$(stat -c %s "$tmp/data/data.mdb")
kill -9 "$pid"
wait "$pid" 2>/dev/null
pid=""
t1=$(now_ms)
start
wait_ready || { echo "server did not come back"; tail "$tmp/server.log"; exit 1; }
t_ready=$(( $(now_ms) - t1 ))
for _ in $(seq 2000); do
    c=$(q "SELECT changes FROM weir_views WHERE name = 'all_bids'")
    [ -n "$c" ] && [ "$c" -gt 0 ] && break
    sleep 0.01
done
t_first=$(( $(now_ms) - t1 ))
printf 'state: %s rows, data.mdb %.2f GiB (filled in %s s)\n' "$rows" "$(echo "$size / 1073741824" | bc -l)" "$fill_s"
printf 'recovery after kill -9: ready in %d ms, first new output in %d ms\n' "$t_ready" "$t_first"
