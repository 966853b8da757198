#!/usr/bin/env bash
# run.sh: the README's first command. Installs what is missing, builds weir in
# ./build (scripts/build.sh), and runs it. With no arguments weir serves on its
# embedded defaults (pgwire 127.0.0.1:4566, HTTP 127.0.0.1:4567, data dir ./data,
# and an embedded Kafka broker on 127.0.0.1:9092 unless one already listens
# there). Arguments are passed to weir unchanged, e.g. `./scripts/run.sh --port 5433`.
set -euo pipefail

cd "$(dirname "$0")/.."
./scripts/build.sh
exec build/server/weir "$@"
