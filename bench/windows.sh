#!/usr/bin/env bash
# bench/windows.sh: what a hopping window costs against a tumbling one.
#
# count(*) and max(price) per bidder % KEYS over nexmark bids (100,000 events/s of event time),
# in 10 s TUMBLE windows and in 10 s HOP windows sliding every 1 s (each row in 10 windows),
# each on a fresh weir with checkpoints every second. With EMIT ON WINDOW CLOSE a HOP
# aggregation works in panes (each row updates one 1 s pane; closing a window merges its
# panes), so it should cost at most 2x a TUMBLE per event (issue 5's target). With EMIT
# CHANGES every row changes 10 window results, each of which is emitted: --changes adds those
# two runs for comparison. Prints events/s, the HOP/TUMBLE time ratio, peak memory and rows.
#
#   bench/windows.sh [--weir PATH] [--events N] [--keys K] [--changes]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
weir=${WEIR:-}
events=10000000
keys=10000
changes=0
while [ $# -gt 0 ]; do
    case "$1" in
    --weir) weir=$2; shift 2 ;;
    --events) events=$2; shift 2 ;;
    --keys) keys=$2; shift 2 ;;
    --changes) changes=1; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
. "$here/lib.sh"
find_weir

trap 'stop_server' EXIT
trap 'exit 143' TERM INT
sql() { psql "$conn" -X -At -q -v ON_ERROR_STOP=1 "$@" 2>&1; }

# run <window expression> <emit clause>: prints "seconds|peak_kib|view_rows"
run() {
    tmp=$(mktemp -d /tmp/weir-winbench-XXXXXX)
    local port
    port=$(free_port)
    "$weir" --data-dir "$tmp/data" --port "$port" --http-port 0 --no-broker \
        --checkpoint-interval 1000 >"$tmp/server.log" 2>&1 &
    server_pid=$!
    conn="host=127.0.0.1 port=$port dbname=weir user=weir sslmode=disable"
    for _ in $(seq 100); do sql -c 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.1; done
    local out
    out=$(sql <<EOF
CREATE SOURCE bid (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP,
    WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
  WITH (connector = 'nexmark', nexmark.table.type = 'bid', nexmark.event.num = '$events',
        nexmark.events.per.second = '100000');
EOF
)
    [ -n "$out" ] && { echo "source: $out" >&2; stop_server; return 1; }
    local t0 t1
    t0=$(date +%s.%N)
    out=$(sql -c "CREATE MATERIALIZED VIEW w AS
        SELECT window_start, bidder % $keys AS k, count(*) AS n, max(price) AS top
        FROM $1 GROUP BY window_start, bidder % $keys $2")
    [ -n "$out" ] && { echo "view: $out" >&2; stop_server; return 1; }
    while :; do
        out=$(sql -c FLUSH)
        [ -z "$out" ] && break
        echo "$out" | grep -q "timed out" || { echo "FLUSH: $out" >&2; break; }
    done
    t1=$(date +%s.%N)
    local hwm vrows
    hwm=$(awk '/VmHWM/ {print $2}' "/proc/$server_pid/status")
    vrows=$(sql -c "SELECT count(*) FROM w")
    echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')|$hwm|$vrows"
    stop_server
}

TUMBLE="TUMBLE(bid, date_time, INTERVAL '10' SECOND)"
HOP="HOP(bid, date_time, INTERVAL '1' SECOND, INTERVAL '10' SECOND)"
echo "# windows: $events nexmark bids, count(*) and max(price) per bidder % $keys; $(nproc) cores"
printf '%-6s %-22s %9s %12s %9s %10s\n' window emit seconds events/s peak_MiB view_rows
row() { # row <window> <emit> <run output>
    IFS='|' read -r s hwm vrows <<<"$3"
    awk -v w="$1" -v e="$2" -v s="$s" -v ev="$events" -v hwm="$hwm" -v vrows="$vrows" 'BEGIN {
        printf "%-6s %-22s %9.2f %12.0f %9.0f %10s\n", w, e, s, ev / s, hwm / 1024, vrows }'
}
ratio() { # ratio <label> <tumble output> <hop output>
    awk -v l="$1" -v t="${2%%|*}" -v h="${3%%|*}" 'BEGIN {
        r = h / t; v = r <= 2.0 ? "meets" : "misses"
        printf "# %s: HOP takes %.2fx the time of TUMBLE per event (%s the 2x target)\n", l, r, v }'
}
t=$(run "$TUMBLE" "EMIT ON WINDOW CLOSE") || exit 1
row TUMBLE "EMIT ON WINDOW CLOSE" "$t"
h=$(run "$HOP" "EMIT ON WINDOW CLOSE") || exit 1
row HOP "EMIT ON WINDOW CLOSE" "$h"
ratio "on window close" "$t" "$h"
if [ "$changes" = 1 ]; then
    tc=$(run "$TUMBLE" "") || exit 1
    row TUMBLE "EMIT CHANGES" "$tc"
    hc=$(run "$HOP" "") || exit 1
    row HOP "EMIT CHANGES" "$hc"
    awk -v t="${tc%%|*}" -v h="${hc%%|*}" 'BEGIN {
        printf "# emit changes: HOP takes %.2fx the time of TUMBLE (every row changes 10 window results)\n", h / t }'
fi
