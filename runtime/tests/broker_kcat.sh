#!/bin/sh
# broker_kcat.sh BROKER_BIN: kcat round trip through the embedded broker.
# Starts BROKER_BIN on a free port, lists metadata, produces and consumes
# with kcat, checks that a second broker on the same port exits 1, and that
# SIGTERM exits 0. Exit 77 (skip) when kcat is missing.
set -u
BIN=$1
command -v kcat >/dev/null 2>&1 || { echo "kcat not found: skipping"; exit 77; }
DIR=$(mktemp -d)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$DIR"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$DIR/err" ] && cat "$DIR/err"; exit 1; }

"$BIN" --listen 127.0.0.1:0 --partitions 2 --topic pre >"$DIR/out" 2>"$DIR/err" &
PID=$!
i=0
while ! grep -q '^weir broker listening on ' "$DIR/out"; do
    i=$((i + 1)); [ $i -gt 100 ] && fail "broker did not start"
    sleep 0.1
done
ADDR=$(sed -n 's/^weir broker listening on //p' "$DIR/out")
echo "broker at $ADDR"

kcat -b "$ADDR" -L -t pre >"$DIR/meta" 2>&1 || fail "kcat -L: $(cat "$DIR/meta")"
grep -q 'topic "pre" with 2 partitions' "$DIR/meta" || fail "pre-created topic: $(cat "$DIR/meta")"

printf 'one\ntwo\nthree\n' | kcat -b "$ADDR" -P -t rt -p 0 || fail "kcat -P"
kcat -b "$ADDR" -C -t rt -p 0 -o beginning -e -q >"$DIR/got" 2>"$DIR/cerr" || fail "kcat -C: $(cat "$DIR/cerr")"
printf 'one\ntwo\nthree\n' | cmp -s - "$DIR/got" || fail "consumed: $(cat "$DIR/got")"
echo "kcat round trip ok"

"$BIN" --listen "$ADDR" >/dev/null 2>"$DIR/err2"
rc=$?
[ $rc -eq 1 ] || fail "second broker on $ADDR exited $rc, want 1"
grep -q 'in use' "$DIR/err2" || fail "second broker message: $(cat "$DIR/err2")"
echo "port in use: $(head -1 "$DIR/err2")"

kill -TERM "$PID"
wait "$PID"; rc=$?
PID=
[ $rc -eq 0 ] || fail "broker exited $rc after SIGTERM"
echo "ok"
