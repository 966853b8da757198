#!/usr/bin/env bash
# bench/nexmark/run.sh: the Nexmark queries against weir's built-in generator.
#
# For every query file and every checkpoint interval it starts a fresh weir (own port, temp
# data dir, no Kafka), creates the three nexmark sources (bounded at --events), creates the
# query's view, and waits with FLUSH until the generator has produced every event and the
# view has consumed it. It prints one table row per run: events/s (all event kinds generated
# / wall time), rows/s into the view, the server's CPU use (cores busy, events/s per busy
# core), peak RSS (VmHWM), checkpoints taken and their mean duration and size. A query weir
# cannot run yet is reported "not supported: <error>".
#
#   bench/nexmark/run.sh [--weir PATH] [--events N] [--rate R] [--queries "q0 q1"]
#                        [--intervals "1000 3600000"] [--sink] [--parallelism "1 2"] [--runs N]
#
# --intervals are --checkpoint-interval values in ms (3600000 ~ no checkpoint during the run).
# --sink adds a blackhole sink on each view (as the published suite does).
# --parallelism runs each query at each streaming_parallelism given (default 1); with more
# than one, a line per query and interval gives each one's events/s over the first one's.
# --runs N repeats each measurement N times (a fresh server each time), prints every run and a
# line with the medians of events/s and ev/s/core; the scaling lines then compare medians.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
weir=${WEIR:-}
events=10000000
rate=10000000
queries=""
intervals="1000 3600000"
sink=0
parallelism=1
ratios=""
runs=1
while [ $# -gt 0 ]; do
    case "$1" in
    --weir) weir=$2; shift 2 ;;
    --events) events=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --queries) queries=$2; shift 2 ;;
    --intervals) intervals=$2; shift 2 ;;
    --sink) sink=1; shift ;;
    --parallelism) parallelism=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
. "$here/../lib.sh"
find_weir
if [ -z "$queries" ]; then
    queries=$(cd "$here" && ls q*.sql | sed 's/\.sql$//' | sort -V | tr '\n' ' ')
fi

hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
trap stop_server EXIT

start_server() { # $1 = checkpoint interval
    tmp=$(mktemp -d /tmp/weir-bench-XXXXXX)
    local attempt
    for attempt in 1 2 3 4 5; do
        port=$(free_port)
        "$weir" --data-dir "$tmp/data" --port "$port" --http-port 0 --no-broker \
            --checkpoint-interval "$1" >"$tmp/server.log" 2>&1 &
        server_pid=$!
        conn="host=127.0.0.1 port=$port dbname=weir user=weir sslmode=disable"
        for _ in $(seq 100); do
            psql "$conn" -Atqc 'SELECT 1' >/dev/null 2>&1 && return 0
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        # Another process took the free port first (a test suite beside): another port.
        grep -q "Address already in use" "$tmp/server.log" || break
        wait "$server_pid" 2>/dev/null
        rm -rf "$tmp/data"
    done
    echo "weir did not start; log:" >&2
    cat "$tmp/server.log" >&2
    return 1
}

# The middle value of the arguments (the lower middle of an even count).
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

sql() { psql "$conn" -X -At -q -v ON_ERROR_STOP=1 "$@" 2>&1; }

echo "# weir Nexmark: $events events at $rate events/s of event time; $(nproc) cores; $weir"
gen=$(dirname "$weir")/../runtime/test_nexmark
[ -x "$gen" ] && "$gen" --bench "$events" | sed 's/^/# /'
printf '%-10s %3s %9s %12s %12s %6s %14s %9s %6s %9s %10s %10s  %s\n' query P ckpt_ms events/s rows/s cores "ev/s/core" peak_MiB ckpts ckpt_ms "ckpt_KiB" view_rows note
for q in $queries; do
    f="$here/$q.sql"
    [ -f "$f" ] || { echo "$q: no such file $f" >&2; continue; }
    for iv in $intervals; do
    base=""
    for par in $parallelism; do
        evs_runs=""; evc_runs=""
        for rep in $(seq "$runs"); do
            start_server "$iv" || exit 1
            out=$(EVENTS=$events RATE=$rate PACE=false envsubst <"$here/sources.sql" | sql -f -)
            if [ -n "$out" ]; then
                printf '%-10s %3s %9s  sources failed: %s\n' "$q" "$par" "$iv" "$(echo "$out" | head -1)"
                stop_server
                continue 2
            fi
            c0=$(cpu_ticks "$server_pid")
            t0=$(date +%s.%N)
            out=$( (echo "SET streaming_parallelism = $par;"; EVENTS=$events RATE=$rate envsubst <"$f") | sql -f -)
            if echo "$out" | grep -q ERROR; then
                printf '%-10s %3s %9s  not supported: %s\n' "$q" "$par" "$iv" "$(echo "$out" | grep ERROR | head -1 | sed 's/.*ERROR: *//')"
                stop_server
                continue 2
            fi
            view=$(grep -io 'CREATE MATERIALIZED VIEW [a-z0-9_]*' "$f" | tail -1 | awk '{print $4}')
            if [ "$sink" = 1 ]; then
                sql -c "CREATE SINK ${view}_sink FROM $view WITH (connector = 'blackhole')" >/dev/null
            fi
            note=""
            while :; do
                r=$(sql -c FLUSH)
                [ "$r" = "" ] && break
                if ! echo "$r" | grep -q "timed out"; then note="FLUSH: $r"; break; fi
                run=$(sql -c "SELECT running FROM weir_views WHERE name = '$view'")
                [ "$run" = "t" ] || { note="view stopped: $(tail -1 "$tmp/server.log")"; break; }
            done
            t1=$(date +%s.%N)
            # FLUSH skips a view whose dataflow stopped: that is a failure, not a figure.
            if [ -z "$note" ] && [ "$(sql -c "SELECT running FROM weir_views WHERE name = '$view'")" != "t" ]; then
                printf '%-10s %3s %9s  failed: view stopped: %s\n' "$q" "$par" "$iv" \
                    "$(grep 'stopped' "$tmp/server.log" | head -1 | sed 's/^weir: //')"
                stop_server
                continue 2
            fi
            c1=$(cpu_ticks "$server_pid")
            hwm=$(awk '/VmHWM/ {print $2}' "/proc/$server_pid/status")
            rows=$(sql -c "SELECT records_in FROM weir_views WHERE name = '$view'")
            vrows=$(sql -c "SELECT count(*) FROM $view")
            ck=$(sql -c "SELECT count(*), coalesce(avg(duration_ms), 0), coalesce(avg(bytes), 0) FROM weir_checkpoints")
            IFS='|' read -r nck ckms ckb <<<"$ck"
            evs=$(awk -v ev="$events" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.0f", ev / (t1 - t0) }')
            evc=$(awk -v ev="$events" -v c0="$c0" -v c1="$c1" -v hz="$hz" 'BEGIN {
                cpu = (c1 - c0) / hz; if (cpu <= 0) cpu = 1 / hz; printf "%.0f", ev / cpu }')
            evs_runs="$evs_runs $evs"; evc_runs="$evc_runs $evc"
            awk -v q="$q" -v par="$par" -v iv="$iv" -v ev="$events" -v rows="${rows:-0}" -v t0="$t0" -v t1="$t1" \
                -v c0="$c0" -v c1="$c1" -v hz="$hz" -v hwm="${hwm:-0}" -v nck="${nck:-0}" -v ckms="${ckms:-0}" \
                -v ckb="${ckb:-0}" -v note="$note" -v vrows="$vrows" 'BEGIN {
                    s = t1 - t0; cpu = (c1 - c0) / hz; if (cpu <= 0) cpu = 1 / hz
                    printf "%-10s %3s %9s %12.0f %12.0f %6.2f %14.0f %9.0f %6d %9.1f %10.0f %10s  %s\n",
                        q, par, iv, ev / s, rows / s, cpu / s, ev / cpu, hwm / 1024, nck, ckms, ckb / 1024, vrows, note
                }'
            stop_server
        done
        if [ "$runs" -gt 1 ] && [ -n "$evs_runs" ]; then
            evs=$(median $evs_runs); evc=$(median $evc_runs)
            printf '%-10s %3s %9s %12s %27s %14s  median of %d runs\n' "$q" "$par" "$iv" "$evs" "" "$evc" "$(echo $evs_runs | wc -w)"
        fi
        if [ -n "$evs_runs" ]; then
            if [ -z "$base" ]; then base=$evs; base_par=$par; fi
            [ "$par" != "$base_par" ] && ratios="${ratios}$(printf '%-10s ckpt_ms %-8s P=%s / P=%s: %.2fx (%s / %s events/s)' "$q" "$iv" "$par" "$base_par" \
                "$(awk -v a="$evs" -v b="$base" 'BEGIN { print a / b }')" "$evs" "$base")
"
        fi
    done
    done
done
[ -n "${ratios:-}" ] && printf '\n# scaling\n%s' "$ratios"
