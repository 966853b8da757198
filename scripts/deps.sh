#!/usr/bin/env bash
# deps.sh: install the Debian 12 packages weir needs to build and run;
# `deps.sh --test` adds what only the tests need (a browser for the dashboard test,
# clang for the fuzzers).
#
# Checks each package with dpkg first and only touches apt when something is
# missing: one `apt-get update`, then one `apt-get install -y` of the missing
# set. Runs apt directly as root, through sudo otherwise. Quiet on success.
set -euo pipefail

PACKAGES=(
    build-essential pkg-config meson ninja-build lemon
    librdkafka-dev liblmdb-dev libsqlite3-dev libpq-dev libmicrohttpd-dev libssl-dev libicu-dev libpcre2-dev
    libavro-dev libjansson-dev libcurl4-openssl-dev  # ENCODE AVRO and the schema registry (runtime/avro.c)
    python3-avro  # Avro records for tests/avro and bench/avro_decode
    postgresql postgresql-client kcat python3-confluent-kafka sqlite3 python3-psycopg2 python3-sqlalchemy openssl
    gettext-base iproute2  # envsubst and ss, for the benchmarks (bench/)
)
# clang + libclang-rt-14-dev: the libFuzzer targets (fuzz/), run by test.sh;
# valgrind: the memcheck subset test.sh runs.
# The Postgres drivers of tests/clients/drivers_test.py: psycopg 3, asyncpg, pgjdbc with a
# JDK, Go with lib/pq and pgx v4 (built offline from Debian's GOPATH).
TEST_PACKAGES=(chromium python3-websocket nodejs npm clang libclang-rt-14-dev valgrind
    python3-psycopg python3-asyncpg default-jdk-headless libpostgresql-jdbc-java golang-go golang-github-lib-pq-dev
    golang-github-jackc-pgx-v4-dev)
if [ "${1:-}" = "--test" ]; then
    PACKAGES+=("${TEST_PACKAGES[@]}")
fi

# A command some machines get from another package than Debian's (the
# nodesource nodejs package ships npm and conflicts with Debian's npm): when
# the command is there, the package is not needed.
command_of() {
    case "$1" in
    npm) echo npm ;;
    nodejs) echo node ;;
    chromium) echo chromium ;;
    default-jdk-headless) echo javac ;;   # any JDK will do
    golang-go) echo go ;;
    esac
}

missing=()
for p in "${PACKAGES[@]}"; do
    c=$(command_of "$p")
    if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1; then
        continue
    fi
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    if [ "$status" != "install ok installed" ]; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
else
    echo "deps.sh: missing packages: ${missing[*]}" >&2
    echo "deps.sh: not root and sudo is not available; install them as root" >&2
    exit 1
fi

echo "deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp /tmp/weir-deps.XXXXXX)
trap 'rm -f "$log"' EXIT
if ! "${SUDO[@]}" apt-get update -q >"$log" 2>&1; then
    cat "$log" >&2
    echo "deps.sh: apt-get update failed" >&2
    exit 1
fi
if ! "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "deps.sh: apt-get install failed for: ${missing[*]}" >&2
    exit 1
fi
