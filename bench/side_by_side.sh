#!/usr/bin/env bash
# bench/side_by_side.sh: Nexmark queries in weir, DuckDB, PostgreSQL and SQLite on the same events,
# printed as one table with a row per query and rate: events per CPU-second of each engine,
# weir / DuckDB, weir's freshness, and whether each answer equals DuckDB's (bench/side_by_side.py
# does the work; bench/README.md says what each figure measures).
#
#   bench/side_by_side.sh [EVENTS [RATES]] [--weir PATH] [--queries "q0 q5"]
#                         [--engines "weir duckdb postgresql sqlite"] [--keep DIR]
#
# EVENTS defaults to 2000000; RATES (events/s of event time, quoted list) to "10000000 10000":
# the published suite's 10M/s and the generator's default 10K/s. Without --weir it builds a
# release weir in ./build-release (NDEBUG, -O3; werror off: a maybe-uninitialized warning that
# only -O3 gives must not stop a benchmark) and uses it. DuckDB is the npm package
# @duckdb/node-api (bench/package.json), installed into bench/node_modules by `npm ci` on the
# first run; if that fails (no registry), DuckDB is skipped with a message and answers are
# checked against PostgreSQL instead. Needs psql, sqlite3, node, /usr/bin/python3 with psycopg2
# and PostgreSQL 15 (scripts/pg-tmp.sh). Exit status 1 when an answer differs or a run fails.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
weir=${WEIR:-}
args=()
pos=()
engines="weir duckdb postgresql sqlite"
while [ $# -gt 0 ]; do
    case "$1" in
    --weir) weir=$2; shift 2 ;;
    --engines) engines=$2; shift 2 ;;
    --queries|--keep|--checkpoint-interval) args+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) pos+=("$1"); shift ;;
    esac
done
[ ${#pos[@]} -ge 1 ] && args+=(--events "${pos[0]}")
[ ${#pos[@]} -ge 2 ] && args+=(--rates "${pos[1]}")

if [ -z "$weir" ]; then
    if [ ! -f "$root/build-release/build.ninja" ]; then
        meson setup "$root/build-release" "$root" --buildtype=release -Dwerror=false >/dev/null || exit 2
    fi
    ninja -C "$root/build-release" -j"$(nproc)" server/weir >/dev/null || exit 2
    weir="$root/build-release/server/weir"
fi
[ -x "$weir" ] || { echo "weir binary not found: $weir" >&2; exit 2; }

case " $engines " in
*" duckdb "*)
    if [ ! -d "$here/node_modules/@duckdb/node-api" ]; then
        echo "# installing @duckdb/node-api into bench/node_modules (npm registry)" >&2
        if ! (cd "$here" && npm ci --no-audit --no-fund >/dev/null 2>&1); then
            echo "# DuckDB skipped: npm could not install @duckdb/node-api (registry unreachable?);" \
                "answers are checked against the next reference engine" >&2
            engines=$(echo " $engines " | sed 's/ duckdb / /')
        fi
    fi ;;
*) echo "# DuckDB skipped: not in --engines ($engines)" >&2 ;;
esac

exec /usr/bin/python3 "$here/side_by_side.py" --weir "$weir" --engines "$engines" "${args[@]}"
