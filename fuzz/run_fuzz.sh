#!/bin/sh
# run_fuzz.sh FUZZER MODE SRCROOT ARTIFACTDIR: the bounded fuzz run that
# meson test (suite "fuzz", clang builds) and scripts/test.sh use. Seeds a
# corpus from the sql-tests (fuzz/seed_corpus.py MODE), then runs the
# libFuzzer binary FUZZER (ASan + UBSan) for WEIR_FUZZ_SECONDS (default 60).
# Exit status: 0 when no crash, leak, sanitizer report, timeout (10 s per
# input) or out-of-memory was found; otherwise libFuzzer's, with the input
# saved in ARTIFACTDIR (reproduce with: FUZZER ARTIFACTDIR/crash-...).
set -eu
fuzzer=$1 mode=$2 root=$3 artifacts=$4
secs=${WEIR_FUZZ_SECONDS:-60}
work=$(mktemp -d /tmp/weir-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$root/fuzz/seed_corpus.py" "$mode" "$work/seeds" "$root"/sql-tests/*.slt
mkdir -p "$work/corpus" "$artifacts"
# Deep-nesting seeds are up to ~60 KB; mutations stay under 64 KB.
exec "$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$work/corpus" "$work/seeds"
