#!/bin/sh
# parallel_rerun.sh: runs .slt files with every view created at streaming_parallelism 2, so
# streaming results (windows, sessions, window functions without aggregation, joins, Top-N,
# aggregates, subqueries, views over views and tables, nexmark, SWAP WITH, sinks, clock skew,
# bad records, numeric keys and sums, time zones, sinks of a query) must come out of the split
# runtime exactly as out of one thread.
#
#   sql-tests/parallel_rerun.sh SLT_RUNNER WEIR FILE.slt...
#
# Each file gets "SET streaming_parallelism = 2" as its first record (one session per file).
# Files whose results legitimately differ are not listed in meson.build: setops.slt (VERIFY of
# a split view is 0A000), time.slt (weir_watermarks lists, per instance, only the partitions
# it has read) and temporal.slt (temporal joins stay single; its kill -9 check of a late
# order needs a checkpoint between FLUSH and the kill, which the extra gather makes rarer).
set -eu
runner=$1
weir=$2
shift 2
tmp=$(mktemp -d /tmp/weir-par-rerun-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
status=0
for f in "$@"; do
    out="$tmp/$(basename "$f")"
    # ${TESTDIR} in a file means its own directory: keep it pointing there.
    { printf 'statement ok\nSET streaming_parallelism = 2\n\n'; sed "s|\${TESTDIR}|$(cd "$(dirname "$f")" && pwd)|g" "$f"; } >"$out"
    "$runner" --weir "$weir" "$out" || status=1
done
exit $status
