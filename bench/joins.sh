#!/usr/bin/env bash
# bench/joins.sh: an interval join and an event-time temporal join, throughput and state.
#
# Interval join: Nexmark bids (left, --left rows) with auctions (right, --right rows) on
# b.auction = a.id AND b.date_time BETWEEN a.date_time - 10 s AND a.date_time + 10 s, the bids'
# generator at --rate events/s of event time (default 10,000: 5M bids span about 9 minutes of
# event time, far more than the bound, so the state shows whether it stays flat). Temporal join: the same bids against a versioned
# writable table of --keys prices (FOR SYSTEM_TIME AS OF b.date_time on bidder % keys). Both feed
# a global count/sum, so the view stays one row and what is measured is the join. Each runs on
# a fresh weir with checkpoints every second; the join operator's state is sampled every 0.5 s
# from weir_state while it runs, with the view's watermark. Prints rows/s (both inputs), rows
# per CPU-second of the server (weir runs a view on one thread: rows/s per core), the state
# samples (min, median, max: flat when state grows with the bound, not with time), peak memory,
# and the state at eight points as the watermark advances.
#
#   bench/joins.sh [--weir PATH] [--left N] [--right N] [--keys N] [--rate EVENTS_PER_S]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
weir=${WEIR:-}
left=5000000
right=1000000
keys=100000
rate=10000
while [ $# -gt 0 ]; do
    case "$1" in
    --weir) weir=$2; shift 2 ;;
    --left) left=$2; shift 2 ;;
    --right) right=$2; shift 2 ;;
    --keys) keys=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
. "$here/lib.sh"
find_weir

trap 'stop_server' EXIT
trap 'exit 143' TERM INT
sql() { psql "$conn" -X -At -q -v ON_ERROR_STOP=1 "$@" 2>&1; }

# Nexmark: 46 of every 50 events are bids, 3 are auctions.
bid_events=$((left * 50 / 46 + 50))
auction_events=$((right * 50 / 3 + 50))
# Both inputs cover the same span of event time (the auctions' generator runs at a higher event
# rate) and advance it at the same pace per poll (fewer auction rows per chunk), as two topics
# read side by side would: otherwise one watermark runs ahead of the other, and the rows of the
# side waiting for the slower watermark pile up with the skew, which is not what is measured.
auction_rate=$((rate * auction_events / bid_events))
auction_chunk=$(( (1024 * right + left - 1) / left ))

start() {
    local port attempt
    # A free port can be taken by someone else before weir binds it: then try another.
    for attempt in 1 2 3; do
        tmp=$(mktemp -d /tmp/weir-joinbench-XXXXXX)
        port=$(free_port)
        "$weir" --data-dir "$tmp/data" --port "$port" --http-port 0 --no-broker --checkpoint-interval 1000 \
            >"$tmp/server.log" 2>&1 &
        server_pid=$!
        conn="host=127.0.0.1 port=$port dbname=weir user=weir sslmode=disable"
        for _ in $(seq 300); do
            sql -c 'SELECT 1' >/dev/null 2>&1 && break
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        sql -c 'SELECT 1' >/dev/null 2>&1 && break
        echo "weir did not start (attempt $attempt):" >&2
        tail -3 "$tmp/server.log" >&2
        stop_server
    done
    out=$(sql -c "CREATE SOURCE bid (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP,
        WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
      WITH (connector = 'nexmark', nexmark.table.type = 'bid', nexmark.event.num = '$bid_events',
            nexmark.events.per.second = '$rate')")
    [ -n "$out" ] && { echo "source: $out" >&2; tail -5 "$tmp/server.log" >&2; return 1; }
    return 0
}

# measure <label> <view SQL> <rows in> [<matches to wait for>]: runs it, samples the join's
# state; prints one result line. A temporal join emits a bid once the table's watermark passes
# it, which may be after FLUSH: then it waits for the expected matches (at most 60 s).
measure() {
    local label=$1 view=$2 rows_in=$3 want=${4:-} samples="$tmp/samples"
    : >"$samples"
    local t0 t1
    t0=$(date +%s.%N)
    out=$(sql -c "$view")
    [ -n "$out" ] && { echo "view: $out" >&2; return 1; }
    local cpu0
    cpu0=$(cpu_ticks)
    (
        while :; do
            b=$(sql -c "SELECT state_bytes FROM weir_state WHERE view = 'j' AND operator LIKE '%Join%'")
            w=$(sql -c "SELECT watermark FROM weir_views WHERE name = 'j'")
            echo "$b|$w" >>"$samples"
            sleep 0.5
        done
    ) &
    local sampler=$!
    while :; do
        out=$(sql -c FLUSH)
        [ -z "$out" ] && break
        echo "$out" | grep -q "timed out" || { echo "FLUSH: $out" >&2; break; }
    done
    if [ -n "$want" ]; then
        for _ in $(seq 600); do
            [ "$(sql -c "SELECT n FROM j")" = "$want" ] && break
            sleep 0.1
        done
    fi
    t1=$(date +%s.%N)
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
    local hwm n cpu
    hwm=$(awk '/VmHWM/ {print $2}' "/proc/$server_pid/status")
    cpu=$(awk -v a="$cpu0" -v b="$(cpu_ticks)" -v hz="$(getconf CLK_TCK)" 'BEGIN {print (b - a) / hz}')
    n=$(sql -c "SELECT n FROM j")
    grep -E '^[0-9]+[|]' "$samples" | cut -d'|' -f1 | sort -n | awk -v l="$label" -v a="$t0" -v b="$t1" \
        -v r="$rows_in" -v hwm="$hwm" -v n="$n" -v cpu="$cpu" '
        { v[NR] = $1 }
        END {
            s = b - a
            printf "%-9s %9.2f %12.0f %12.0f %10s %10.1f %10.1f %10.1f %9.0f  (%d samples)\n", l, s, r / s,
                (cpu > 0 ? r / cpu : 0), n, v[1] / 1048576, v[int((NR + 1) / 2)] / 1048576, v[NR] / 1048576,
                hwm / 1024, NR }'
    # State as the watermark advances: eight samples spread over those taken once it moved.
    grep -E '^[0-9]+[|][0-9]' "$samples" | awk -F'|' -v l="$label" '
        { b[NR] = $1; w[NR] = $2 }
        END {
            if (NR == 0) exit
            printf "  %s state by watermark:", l
            for (i = 1; i <= 8; i++) {
                k = int(1 + (NR - 1) * (i - 1) / 7)
                printf "  %s %.1f", substr(w[k], 12, 8), b[k] / 1048576
            }
            printf "  (MiB)\n"
        }'
}

# CPU time (user + system, clock ticks) the server has used so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }

echo "# joins: $left bids x $right auctions (interval, 10 s bound); $left bids x $keys-key versioned table (temporal); $(nproc) cores"
printf '%-9s %9s %12s %12s %10s %10s %10s %10s %9s\n' join seconds rows/s rows/cpu_s matches state_min state_med \
    state_max peak_MiB
echo "# state_* in MiB: the join operator's state as of the last checkpoint (weir_state), sampled every 0.5 s"

start || exit 1
out=$(sql -c "CREATE SOURCE auction (id BIGINT, date_time TIMESTAMP,
    WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
  WITH (connector = 'nexmark', nexmark.table.type = 'auction', nexmark.event.num = '$auction_events',
        nexmark.events.per.second = '$auction_rate', nexmark.max.chunk.size = '$auction_chunk')")
[ -n "$out" ] && { echo "source: $out" >&2; exit 1; }
measure interval "CREATE MATERIALIZED VIEW j AS SELECT count(*) AS n, sum(b.price) AS total
    FROM bid b JOIN auction a ON b.auction = a.id
     AND b.date_time BETWEEN a.date_time - INTERVAL '10' SECOND AND a.date_time + INTERVAL '10' SECOND" \
    $((left + right)) || exit 1
stop_server

start || exit 1
out=$(sql -c "CREATE TABLE prices (k BIGINT PRIMARY KEY, price BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts)")
[ -n "$out" ] && { echo "table: $out" >&2; exit 1; }
# Two versions of every key, both before the first bid (a writable table keeps the latest
# version of each key, so the probes join that one), then one far ahead so the table's
# watermark passes every bid.
for ((lo = 0; lo < keys; lo += 10000)); do
    hi=$((lo + 10000 < keys ? lo + 10000 : keys))
    awk -v lo="$lo" -v hi="$hi" 'BEGIN {
        printf "INSERT INTO prices VALUES "
        for (k = lo; k < hi; k++)
            printf "%s(%d, %d, TIMESTAMP '\''2025-12-31 23:59:00'\'')", (k > lo ? ", " : ""), k, (k * 7) % 1000
        print ""
    }' >"$tmp/ins.sql"
    out=$(sql -f "$tmp/ins.sql")
    [ -n "$out" ] && { echo "versions: $out" >&2; exit 1; }
done
out=$(sql -c "UPDATE prices SET price = price + 1, ts = TIMESTAMP '2025-12-31 23:59:30'")
[ -n "$out" ] && { echo "versions: $out" >&2; exit 1; }
out=$(sql -c "INSERT INTO prices VALUES (-1, 0, TIMESTAMP '2026-01-02 00:00:00')")
[ -n "$out" ] && { echo "versions: $out" >&2; exit 1; }
measure temporal "CREATE MATERIALIZED VIEW j AS SELECT count(*) AS n, sum(p.price) AS total
    FROM (SELECT price, date_time, bidder % $keys AS k FROM bid) b
    JOIN prices FOR SYSTEM_TIME AS OF b.date_time AS p ON b.k = p.k" "$left" \
    "$(awk -v e="$bid_events" 'BEGIN {n = 0; for (i = 0; i < e; i++) if (i % 50 >= 4) n++; print n}')" || exit 1
stop_server
