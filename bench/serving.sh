#!/usr/bin/env bash
# bench/serving.sh: serving over pgwire: ad hoc point and range queries on a big view, and
# SUBSCRIBE fan-out.
#
# Starts a broker and a weir on free loopback ports, produces --rows records (k, v) with
# INSERT INTO a Kafka source, and materializes kv = SELECT k, max(v), count(*) GROUP BY k (one
# row per key, keyed by k). Then, with bench/serving_client (libpq, prepared statements):
#   - point queries  SELECT k, v, n FROM kv WHERE k = $1          with 1, 8 and 64 clients
#   - range queries  SELECT k, v FROM kv WHERE k BETWEEN $1 AND $2 (100 rows), same clients
#   each for --seconds: queries/s and p50/p99/max latency;
#   - SUBSCRIBE fan-out: --subscribers connections on COPY (SUBSCRIBE ticks_v) while one
#     more connection INSERTs --changes rows 50 ms apart, each carrying its wall-clock time;
#     change latency p50/p99/max from the INSERT to the row at every subscriber.
#
#   bench/serving.sh [--weir PATH] [--rows N] [--seconds S] [--subscribers N] [--changes N]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
weir=${WEIR:-}
rows=1000000
seconds=5
subscribers=100
changes=100
while [ $# -gt 0 ]; do
    case "$1" in
    --weir) weir=$2; shift 2 ;;
    --rows) rows=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --subscribers) subscribers=$2; shift 2 ;;
    --changes) changes=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
. "$here/lib.sh"
find_weir
client="$(dirname "$(dirname "$weir")")/bench/serving_client"
[ -x "$client" ] || { echo "$client not built (ninja -C $(dirname "$(dirname "$weir")"))" >&2; exit 2; }

broker_pid=""
cleanup() {
    stop_server
    [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 143' TERM INT

tmp=$(mktemp -d /tmp/weir-servebench-XXXXXX)
kport=$(free_port)
"$weir" broker --listen "127.0.0.1:$kport" >"$tmp/broker.log" 2>&1 &
broker_pid=$!
port=$(free_port)
"$weir" --data-dir "$tmp/data" --port "$port" --http-port 0 --kafka "127.0.0.1:$kport" --no-broker \
    --max-connections $((subscribers + 80)) >"$tmp/server.log" 2>&1 &
server_pid=$!
conn="host=127.0.0.1 port=$port dbname=weir user=weir sslmode=disable"
sql() { psql "$conn" -X -At -q -v ON_ERROR_STOP=1 "$@" 2>&1; }
for _ in $(seq 100); do sql -c 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.1; done

out=$(sql -c "CREATE SOURCE kvsrc (k BIGINT, v BIGINT) WITH (connector = 'kafka', topic = 'kv',
                scan.startup.mode = 'earliest') FORMAT PLAIN ENCODE JSON" \
          -c "CREATE MATERIALIZED VIEW kv AS SELECT k, max(v) AS v, count(*) AS n FROM kvsrc GROUP BY k" \
          -c "CREATE SOURCE ticks (k BIGINT, v BIGINT) WITH (connector = 'kafka', topic = 'ticks')" \
          -c "CREATE MATERIALIZED VIEW ticks_v AS SELECT k, v FROM ticks")
[ -n "$out" ] && { echo "setup: $out" >&2; exit 1; }

# Load: INSERT statements of 10,000 rows each, with a FLUSH every 100,000 rows: the embedded
# broker keeps about 5 MiB per partition and drops the oldest records beyond, so the view must
# not fall further behind than that.
t0=$(date +%s.%N)
awk -v rows="$rows" 'BEGIN {
    for (i = 0; i < rows; i += 10000) {
        printf "INSERT INTO kvsrc VALUES ";
        for (j = i; j < i + 10000 && j < rows; j++)
            printf "%s(%d, %d)", (j > i ? ", " : ""), j, j * 7 % 1000003;
        print ";";
        if ((i / 10000) % 10 == 9)
            print "FLUSH;";
    }
}' | sql >/dev/null || { echo "load failed" >&2; exit 1; }
# FLUSH waits until the source is read; the aggregation hands its groups on at the next
# barrier, so poll the count until every key is there.
sql -c FLUSH >/dev/null
for _ in $(seq 600); do
    have=$(sql -c "SELECT count(*) FROM kv")
    [ "$have" = "$rows" ] && break
    sleep 0.1
done
t1=$(date +%s.%N)
[ "$have" = "$rows" ] || { echo "kv has $have rows, not $rows" >&2; exit 1; }
printf "loaded %d rows into kv in %.1f s\n" "$rows" "$(echo "$t1 - $t0" | bc)"
sql -c "EXPLAIN SELECT k, v, n FROM kv WHERE k = 1" | grep -q "lookup on key" ||
    echo "warning: the point query is not a key lookup" >&2

rc=0
for mode in point range; do
    for clients in 1 8 64; do
        "$client" "$mode" "$conn" "$clients" "$seconds" "$rows" || rc=1
    done
done
# A first tick creates the topic and lets the view's consumer find it, so that the measured
# changes do not include topic creation (the subscriptions start after it: no snapshot).
sql -c "INSERT INTO ticks VALUES (-1, 0)" -c FLUSH >/dev/null
"$client" fanout "$conn" "$subscribers" "$changes" || rc=1
rss=$(awk '/VmHWM/ {print $2}' /proc/"$server_pid"/status 2>/dev/null)
echo "server peak RSS: $((${rss:-0} / 1024)) MiB"
exit $rc
