#!/usr/bin/env bash
# test.sh: the README's second command. Installs what is missing, then builds
# and runs every registered test (unit tests and sql-tests) twice: a normal
# build in ./build and an ASan/UBSan build in ./build-asan (skip the latter
# locally with WEIR_SKIP_ASAN=1; CI always runs it). Results are read from
# each build's meson-logs/testlog.json, and the last line printed is exactly
#   N passed, N failed[, N skipped]
# summed over all builds. A third build, ./build-fuzz (clang), builds only the
# libFuzzer targets and runs each for WEIR_FUZZ_SECONDS (default 60) under
# ASan/UBSan, as two more tests (skip locally with WEIR_SKIP_FUZZ=1).
# The unit tests and two SQL files also run under valgrind from ./build (skip
# locally with WEIR_SKIP_VALGRIND=1). The ASan build has the fault-injection
# points compiled in (-Dfault_injection=true) and so also runs the 'fault' test
# (tests/fault/fault_walk.py).
# Exits non-zero if any test failed, a build failed, or no test ran at all.
set -uo pipefail

cd "$(dirname "$0")/.."
./scripts/deps.sh --test || exit 1

SUMMARY=$(mktemp /tmp/weir-test.XXXXXX)   # one "RESULT<TAB>build<TAB>name" per test
trap 'rm -f "$SUMMARY" "$SUMMARY".*.log' EXIT

# run_suite DIR [meson setup options...]: configure DIR if needed, build it,
# run meson test, and append its results to $SUMMARY. A failed setup or build
# is recorded as one failed pseudo-test so it shows in the final count.
run_suite() {
    local dir=$1; shift
    local log="$SUMMARY.$dir.log"
    echo "== $dir: configure and build"
    if [ ! -f "$dir/build.ninja" ]; then
        if ! meson setup "$dir" "$@" >"$log" 2>&1; then
            tail -n 40 "$log"
            printf 'FAIL\t%s\tmeson setup\n' "$dir" >>"$SUMMARY"
            return
        fi
    fi
    if ! ninja -C "$dir" >"$log" 2>&1; then
        grep -E 'error|FAILED' "$log" | head -n 60
        printf 'FAIL\t%s\tbuild\n' "$dir" >>"$SUMMARY"
        return
    fi
    echo "== $dir: meson test"
    rm -f "$dir/meson-logs/testlog.json"
    local extra=()
    case "$dir" in *asan*) extra=(--timeout-multiplier 3) ;; esac
    meson test -C "$dir" --print-errorlogs "${extra[@]}"
    collect "$dir"
}

# collect DIR [LOGBASE [LABEL]]: append DIR's meson test results (from
# meson-logs/LOGBASE.json, default testlog) to $SUMMARY, labelled LABEL.
collect() {
    local dir=$1 base=${2:-testlog} label=${3:-$1}
    if [ ! -f "$dir/meson-logs/$base.json" ]; then
        printf 'FAIL\t%s\tmeson test (no %s.json)\n' "$label" "$base" >>"$SUMMARY"
        return
    fi
    /usr/bin/python3 - "$label" "$dir/meson-logs/$base.json" >>"$SUMMARY" <<'PY'
import json, sys
build, path = sys.argv[1], sys.argv[2]
with open(path) as f:
    for line in f:
        line = line.strip()
        if not line:
            continue
        t = json.loads(line)
        print("%s\t%s\t%s" % (t.get("result", "ERROR"), build, t.get("name", "?")))
PY
}

# run_fuzz: the libFuzzer targets (fuzz/meson.build) need clang, so they get
# their own build directory, where only they are built; each is one test.
run_fuzz() {
    local dir=build-fuzz
    local log="$SUMMARY.$dir.log"
    echo "== $dir: configure (clang) and build the fuzz targets"
    if [ ! -f "$dir/build.ninja" ]; then
        if ! CC=clang meson setup "$dir" >"$log" 2>&1; then
            tail -n 40 "$log"
            printf 'FAIL\t%s\tmeson setup\n' "$dir" >>"$SUMMARY"
            return
        fi
    fi
    if ! ninja -C "$dir" fuzz/fuzz_parser fuzz/fuzz_pgwire fuzz/fuzz_json fuzz/fuzz_avro >"$log" 2>&1; then
        grep -E 'error|FAILED' "$log" | head -n 60
        printf 'FAIL\t%s\tbuild\n' "$dir" >>"$SUMMARY"
        return
    fi
    echo "== $dir: fuzzing, ${WEIR_FUZZ_SECONDS:-60} s per target"
    rm -f "$dir/meson-logs/testlog.json"
    meson test -C "$dir" --no-rebuild --suite fuzz --print-errorlogs
    collect "$dir"
}

# run_valgrind: the unit tests of common/, parser/, storage/, runtime/ and
# server/ (planner/ has none of its own: the SQL tests cover it) under
# valgrind memcheck from the normal build, then two SQL files with the broker
# and the server under valgrind (tests/valgrind/weir-vg.sh). A memory error or
# a definite leak fails the test. About one minute.
VALGRIND_UNIT=(common scalar parser parse_analyze storage runtime lateness pgwire pgtranslate)
VALGRIND_SQL=(smoke windows)
run_valgrind() {
    local dir=build label=valgrind
    if [ ! -x "$dir/server/weir" ]; then
        printf 'FAIL\t%s\tno build to run under valgrind\n' "$label" >>"$SUMMARY"
        return
    fi
    echo "== $label: ${VALGRIND_UNIT[*]} (unit), ${VALGRIND_SQL[*]} (sql)"
    # With --wrap, meson names the log LOGBASE-WRAPPER: valgrind-valgrind.json.
    rm -f "$dir/meson-logs/valgrind-valgrind.json"
    meson test -C "$dir" --no-rebuild --print-errorlogs --logbase valgrind --timeout-multiplier 10 \
        --wrap='valgrind --quiet --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite' \
        "${VALGRIND_UNIT[@]}"
    collect "$dir" valgrind-valgrind "$label"
    local f
    for f in "${VALGRIND_SQL[@]}"; do
        if WEIR_VG_EXE="$PWD/$dir/server/weir" timeout 600 "$dir/sql-tests/slt_runner" \
            --weir tests/valgrind/weir-vg.sh "sql-tests/$f.slt"; then
            printf 'OK\t%s\tsql %s\n' "$label" "$f" >>"$SUMMARY"
        else
            printf 'FAIL\t%s\tsql %s\n' "$label" "$f" >>"$SUMMARY"
        fi
    done
}

run_suite build
if [ "${WEIR_SKIP_VALGRIND:-0}" = "1" ] && [ "${CI:-}" != "true" ]; then
    echo "== valgrind: skipped (WEIR_SKIP_VALGRIND=1)"
else
    run_valgrind
fi
if [ "${WEIR_SKIP_ASAN:-0}" = "1" ] && [ "${CI:-}" != "true" ]; then
    echo "== build-asan: skipped (WEIR_SKIP_ASAN=1)"
else
    run_suite build-asan -Db_sanitize=address,undefined \
        -Dc_args=-fno-sanitize-recover=all -Db_lundef=false -Dfault_injection=true
fi
if [ "${WEIR_SKIP_FUZZ:-0}" = "1" ] && [ "${CI:-}" != "true" ]; then
    echo "== build-fuzz: skipped (WEIR_SKIP_FUZZ=1)"
else
    run_fuzz
fi

passed=0; failed=0; skipped=0; failures=()
while IFS=$'\t' read -r result build name; do
    case "$result" in
        OK|EXPECTEDFAIL) passed=$((passed + 1)) ;;
        SKIP) skipped=$((skipped + 1)) ;;
        *) failed=$((failed + 1)); failures+=("$build: $name ($result)") ;;
    esac
done <"$SUMMARY"

echo
if [ ${#failures[@]} -gt 0 ]; then
    echo "Failed tests:"
    printf '  %s\n' "${failures[@]}"
fi
if [ $((passed + failed)) -eq 0 ]; then
    echo "no tests ran"
fi
line="$passed passed, $failed failed"
[ "$skipped" -gt 0 ] && line="$line, $skipped skipped"
echo "$line"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
