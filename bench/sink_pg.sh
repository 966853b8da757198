#!/usr/bin/env bash
# bench/sink_pg.sh: how fast the PostgreSQL sink upserts.
#
# A throwaway PostgreSQL cluster (scripts/pg-tmp.sh) and a fresh weir. The nexmark generator's
# bids (--events of them, 1M events/s of event time, so nearly every bid has its own
# microsecond) feed a view keyed by (auction, bidder, date_time): about one row per bid, so
# the sink upserts about one row per bid. The sink (type upsert, create_table) writes each
# checkpoint's rows in one PostgreSQL transaction. The script waits until the target holds
# every row and prints: rows upserted, seconds from CREATE MATERIALIZED VIEW + CREATE SINK to
# the last row in PostgreSQL (the view computes meanwhile; the sink exists from the start, so
# each checkpoint's changes are one upsert transaction), rows/s, and
# rows per CPU-second of weir's sink thread (weir-sink: the encoding and the libpq calls;
# PostgreSQL's own work runs in its server processes). Target (issue 3): 100,000 upserted
# rows/s on this machine's PostgreSQL.
#
#   bench/sink_pg.sh [--weir PATH] [--events N]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
weir=${WEIR:-}
events=1000000
while [ $# -gt 0 ]; do
    case "$1" in
    --weir) weir=$2; shift 2 ;;
    --events) events=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
. "$here/lib.sh"
find_weir

pgdir=$(mktemp -d /tmp/weir-sinkbench-pg-XXXXXX)
tmp=$(mktemp -d /tmp/weir-sinkbench-XXXXXX)
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && sleep 1 && kill -9 "$server_pid" 2>/dev/null
    "$root/scripts/pg-tmp.sh" stop "$pgdir" >/dev/null 2>&1
    rm -rf "$pgdir" "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

pgport=$(free_port)
pgurl=$("$root/scripts/pg-tmp.sh" start "$pgdir" "$pgport" 2>"$tmp/pg.log") || { cat "$tmp/pg.log" >&2; exit 1; }
port=$(free_port)
"$weir" --data-dir "$tmp/data" --port "$port" --http-port 0 --no-broker >"$tmp/server.log" 2>&1 &
server_pid=$!
conn="host=127.0.0.1 port=$port dbname=weir user=weir sslmode=disable"
sql() { psql "$conn" -X -At -q -v ON_ERROR_STOP=1 "$@" 2>&1; }
for _ in $(seq 100); do sql -c 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.1; done

out=$(sql <<EOF
CREATE SOURCE bid (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP,
    WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
  WITH (connector = 'nexmark', nexmark.table.type = 'bid', nexmark.event.num = '$events',
        nexmark.events.per.second = '1000000');
EOF
)
[ -n "$out" ] && { echo "setup: $out" >&2; exit 1; }
# The sink exists before the view has any row: every row reaches PostgreSQL as a change of
# some checkpoint, as in a running system, not as one initial snapshot.
t0=$(date +%s.%N)
out=$(sql <<EOF
CREATE MATERIALIZED VIEW bids_by_key AS
  SELECT auction, bidder, date_time, max(price) AS price FROM bid GROUP BY auction, bidder, date_time;
CREATE SINK bids_pg FROM bids_by_key WITH (connector = 'postgres', url = '$pgurl',
  table = 'bids_by_key', type = 'upsert', create_table = 'true');
FLUSH;
EOF
)
[ -n "$out" ] && { echo "view and sink: $out" >&2; exit 1; }
rows=$(sql -c "SELECT count(*) FROM bids_by_key")
got=0
for _ in $(seq 1200); do
    got=$(psql "$pgurl" -X -At -c "SELECT count(*) FROM bids_by_key" 2>/dev/null || echo 0)
    [ "$got" = "$rows" ] && break
    sleep 0.1
done
t1=$(date +%s.%N)
scpu=$(for t in /proc/$server_pid/task/*; do
    [ "$(cat "$t/comm" 2>/dev/null)" = weir-sink ] && awk '{s += ($14 + $15) / 100} END {printf "%.2f", s}' "$t/stat"
done | awk '{s += $1} END {printf "%.2f", s}')
[ "$got" = "$rows" ] || { echo "the target has $got of $rows rows after 120 s" >&2; exit 1; }
echo "# PostgreSQL sink: $events bids -> $rows keyed rows, type upsert; $(nproc) cores"
awk -v r="$rows" -v a="$t0" -v b="$t1" -v c="$scpu" 'BEGIN {
    s = b - a
    printf "rows %d  seconds %.2f  rows/s %.0f  sink-thread CPU %.2f s  rows per sink CPU-second %.0f\n",
        r, s, r / s, c, (c > 0 ? r / c : 0) }'
