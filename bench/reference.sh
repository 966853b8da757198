#!/usr/bin/env bash
# bench/reference.sh: the same aggregation in weir, PostgreSQL and SQLite, on the same events.
#
# count(*) and max(price) of Nexmark bids per auction in 10-second tumbling windows. The events
# come from weir's own generator (`weir nexmark --format csv`: the rows a nexmark source reads).
#   weir        a materialized view over a nexmark source (checkpoints every second), from
#               CREATE to FLUSH done: results are current as events arrive.
#   PostgreSQL  a throwaway cluster: COPY the events into a table, then CREATE MATERIALIZED VIEW
#               (the first answer); then COPY 10% more events and REFRESH MATERIALIZED VIEW: the
#               refresh time is how stale the view is at best if refreshed in a loop.
#   SQLite      .import the CSV into a table, then CREATE TABLE ... AS SELECT; then the 10% more
#               and a recomputation, likewise.
# Prints events/s (events / seconds until the first complete answer), the window rows of that
# answer (the same in all three) and the freshness figure of each. Needs psql, sqlite3 and scripts/pg-tmp.sh (PostgreSQL 15).
#
#   bench/reference.sh [--weir PATH] [--events N]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
weir=${WEIR:-}
events=2000000
while [ $# -gt 0 ]; do
    case "$1" in
    --weir) weir=$2; shift 2 ;;
    --events) events=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
. "$here/lib.sh"
find_weir

work=$(mktemp -d /tmp/weir-ref-XXXXXX)
chmod 755 "$work"
pgdir="$work/pg"
cleanup() {
    stop_server
    "$root/scripts/pg-tmp.sh" stop "$pgdir" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }

more=$((events / 10))
"$weir" nexmark --table bid --events "$events" --rate 100000 --format csv >"$work/bids.csv"
# The next events of the same stream (events .. events + more): a second CSV.
"$weir" nexmark --table bid --events $((events + more)) --rate 100000 --format csv | tail -n +$(($(wc -l <"$work/bids.csv") + 1)) >"$work/more.csv"
chmod 644 "$work"/*.csv
nbids=$(wc -l <"$work/bids.csv")
nmore=$(wc -l <"$work/more.csv")
echo "# reference: $events events ($nbids bids, then $nmore more), count(*) and max(price) per auction per 10 s; $(nproc) cores"
printf '%-11s %10s %12s %14s  %s\n' engine seconds events/s refresh_s "freshness"

# weir
tmp="$work/weir"
mkdir -p "$tmp"
port=$(free_port)
"$weir" --data-dir "$tmp/data" --port "$port" --http-port 0 --no-broker --checkpoint-interval 1000 \
    >"$tmp/server.log" 2>&1 &
server_pid=$!
conn="host=127.0.0.1 port=$port dbname=weir user=weir sslmode=disable"
for _ in $(seq 100); do psql "$conn" -XAtqc 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.1; done
psql "$conn" -XAtq -v ON_ERROR_STOP=1 -c "CREATE SOURCE bid (auction BIGINT, price BIGINT, date_time TIMESTAMP,
    WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
  WITH (connector = 'nexmark', nexmark.table.type = 'bid', nexmark.event.num = '$events',
        nexmark.events.per.second = '100000')" || exit 1
t0=$(now)
psql "$conn" -XAtq -v ON_ERROR_STOP=1 -c "CREATE MATERIALIZED VIEW agg AS
    SELECT window_start, auction, count(*) AS n, max(price) AS top
    FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND) GROUP BY window_start, auction" || exit 1
while :; do
    out=$(psql "$conn" -XAtqc FLUSH 2>&1)
    [ -z "$out" ] && break
    echo "$out" | grep -q "timed out" || { echo "FLUSH: $out" >&2; exit 1; }
done
t1=$(now)
wrows=$(psql "$conn" -XAtqc "SELECT count(*) FROM agg")
stop_server
s=$(secs "$t0" "$t1")
printf '%-11s %10s %12.0f %14s  %s\n' weir "$s" "$(awk -v n="$events" -v s="$s" 'BEGIN {print n / s}')" - \
    "continuous: each event counted as it arrives ($wrows window rows)"

# PostgreSQL
pgport=$(free_port)
url=$("$root/scripts/pg-tmp.sh" start "$pgdir" "$pgport" 2>/dev/null) || { echo "PostgreSQL did not start" >&2; exit 1; }
pg() { psql "$url" -XAtq -v ON_ERROR_STOP=1 "$@"; }
pg -c "CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT,
                         date_time TIMESTAMP, extra TEXT)"
q="SELECT to_timestamp(floor(extract(epoch FROM date_time) / 10) * 10) AS window_start, auction,
          count(*) AS n, max(price) AS top FROM bid GROUP BY 1, 2"
t0=$(now)
pg -c "\\copy bid FROM '$work/bids.csv' WITH (FORMAT csv)"
pg -c "CREATE MATERIALIZED VIEW agg AS $q"
t1=$(now)
prows=$(pg -c "SELECT count(*) FROM agg")
pg -c "\\copy bid FROM '$work/more.csv' WITH (FORMAT csv)"
t2=$(now)
pg -c "REFRESH MATERIALIZED VIEW agg"
t3=$(now)
s=$(secs "$t0" "$t1")
printf '%-11s %10s %12.0f %14s  %s\n' postgresql "$s" "$(awk -v n="$events" -v s="$s" 'BEGIN {print n / s}')" \
    "$(secs "$t2" "$t3")" "stale until the next REFRESH ($prows window rows)"

# SQLite
db="$work/ref.db"
qs="SELECT (CAST(strftime('%s', date_time) AS INTEGER) / 10) * 10 AS window_start, auction,
           count(*) AS n, max(price) AS top FROM bid GROUP BY 1, 2"
t0=$(now)
sqlite3 "$db" "CREATE TABLE bid (auction INTEGER, bidder INTEGER, price INTEGER, channel TEXT, url TEXT,
                                 date_time TEXT, extra TEXT);" ".mode csv" ".import '$work/bids.csv' bid" \
    "CREATE TABLE agg AS $qs;"
t1=$(now)
srows=$(sqlite3 "$db" "SELECT count(*) FROM agg")
sqlite3 "$db" ".mode csv" ".import '$work/more.csv' bid"
t2=$(now)
sqlite3 "$db" "DROP TABLE agg; CREATE TABLE agg AS $qs;"
t3=$(now)
s=$(secs "$t0" "$t1")
printf '%-11s %10s %12.0f %14s  %s\n' sqlite "$s" "$(awk -v n="$events" -v s="$s" 'BEGIN {print n / s}')" \
    "$(secs "$t2" "$t3")" "stale until recomputed ($srows window rows)"
