#!/usr/bin/env bash
# build.sh: installs the Debian packages weir needs (scripts/deps.sh) and builds
# it in ./build (release-like: meson's debugoptimized default). run.sh and the
# benchmarks call it; ninja makes a second call a no-op. Build output is shown
# only when something fails.
set -euo pipefail

cd "$(dirname "$0")/.."
./scripts/deps.sh

if [ ! -f build/build.ninja ]; then
    if ! log=$(meson setup build 2>&1); then
        printf '%s\n' "$log" >&2
        echo "build.sh: meson setup failed" >&2
        exit 1
    fi
fi
if ! log=$(ninja -C build 2>&1); then
    printf '%s\n' "$log" >&2
    echo "build.sh: build failed" >&2
    exit 1
fi
if [ ! -x build/server/weir ]; then
    echo "build.sh: build/server/weir was not built" >&2
    exit 1
fi
