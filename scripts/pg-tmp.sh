#!/usr/bin/env bash
# pg-tmp.sh: a throwaway PostgreSQL 15 cluster for tests.
#
#   pg-tmp.sh start DIR PORT   create DIR/pgdata (trust auth, superuser postgres),
#                              start it on 127.0.0.1:PORT with its socket in DIR,
#                              and print postgres://postgres@127.0.0.1:PORT/postgres
#   pg-tmp.sh stop DIR         (PORT optional) stop it (fast) and delete DIR/pgdata
#
# As root the cluster runs as the postgres user (DIR is chowned to it); as any
# other user it runs as that user. A stale cluster left in DIR by an earlier run
# is stopped and wiped before start. Everything but the URL goes to stderr.
set -euo pipefail

PGBIN=/usr/lib/postgresql/15/bin

die() { echo "pg-tmp.sh: $*" >&2; exit 1; }

[ $# -ge 2 ] || die "usage: pg-tmp.sh start DIR PORT | stop DIR [PORT]"
cmd=$1
dir=$2
port=${3:-}
[ -x "$PGBIN/initdb" ] || die "$PGBIN/initdb not found (install postgresql-15: scripts/deps.sh)"

# as_pg CMD...: run CMD as the cluster owner.
if [ "$(id -u)" -eq 0 ]; then
    as_pg() { runuser -u postgres -- "$@"; }
else
    as_pg() { "$@"; }
fi

# port_busy PORT: true if something accepts or holds PORT on 127.0.0.1.
port_busy() {
    /usr/bin/python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(0)
sys.exit(1)
PY
}

# stop_cluster: stop a running cluster in $dir/pgdata, if any.
stop_cluster() {
    if [ -f "$dir/pgdata/postmaster.pid" ]; then
        as_pg "$PGBIN/pg_ctl" -D "$dir/pgdata" stop -m fast -w >/dev/null 2>&1 || \
            as_pg "$PGBIN/pg_ctl" -D "$dir/pgdata" stop -m immediate -w >/dev/null 2>&1 || true
    fi
}

case "$cmd" in
start)
    [[ "$port" =~ ^[0-9]+$ ]] || die "start needs a numeric PORT"
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ ${#dir} -lt 80 ] || die "DIR path too long for a Unix socket: $dir"
    stop_cluster
    rm -rf "$dir/pgdata" "$dir/pg.log"
    if port_busy "$port"; then
        die "port $port on 127.0.0.1 is already in use"
    fi
    if [ "$(id -u)" -eq 0 ]; then
        chown postgres: "$dir"
        as_pg test -w "$dir" || die "postgres cannot write $dir (check the parent directories' permissions)"
    fi
    if ! out=$(as_pg "$PGBIN/initdb" -D "$dir/pgdata" -A trust -U postgres -E UTF8 --no-sync 2>&1); then
        printf '%s\n' "$out" >&2
        die "initdb failed in $dir/pgdata"
    fi
    if ! as_pg "$PGBIN/pg_ctl" -D "$dir/pgdata" -l "$dir/pg.log" \
            -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off" -w -t 30 start >/dev/null 2>&1; then
        tail -n 20 "$dir/pg.log" >&2 || true
        die "could not start PostgreSQL on port $port (log: $dir/pg.log)"
    fi
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    ;;
stop)
    [ -d "$dir" ] || exit 0
    stop_cluster
    rm -rf "$dir/pgdata" "$dir/pg.log"
    ;;
*)
    die "unknown command '$cmd' (start|stop)"
    ;;
esac
