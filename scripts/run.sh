#!/usr/bin/env bash
# run.sh: the README's first command. Installs what is missing, builds weir in
# ./build, and runs it. With no arguments weir serves on its embedded defaults
# (pgwire 127.0.0.1:4566, HTTP 127.0.0.1:4567, data dir ./data, and an embedded
# Kafka broker on 127.0.0.1:9092 unless one already listens there). Arguments
# are passed to weir unchanged, e.g. `./scripts/run.sh --port 5433`.
set -euo pipefail

cd "$(dirname "$0")/.."
./scripts/deps.sh

if [ ! -f build/build.ninja ]; then
    if ! log=$(meson setup build 2>&1); then
        printf '%s\n' "$log" >&2
        echo "run.sh: meson setup failed" >&2
        exit 1
    fi
fi
if ! log=$(ninja -C build 2>&1); then
    printf '%s\n' "$log" >&2
    echo "run.sh: build failed" >&2
    exit 1
fi

if [ ! -x build/server/weir ]; then
    echo "run.sh: build/server/weir was not built" >&2
    exit 1
fi
exec build/server/weir "$@"
