# bench/lib.sh: shell helpers the benchmark scripts share (sourced, not run).
#
#   find_weir      sets $weir (unless --weir gave it) to $root/build/server/weir,
#                  building it first with scripts/build.sh; exits 2 if that fails
#   free_port      prints a TCP port nobody listens on (20000-39999)
#   stop_server    stops $server_pid (TERM, then KILL after 5 s) and removes $tmp;
#                  the caller sets both when it starts a weir

find_weir() {
    if [ -z "$weir" ]; then
        # The README's "one command": install, build ./build (a no-op when it is up to date), run.
        "$root/scripts/build.sh" || exit 2
        weir="$root/build/server/weir"
    fi
    [ -x "$weir" ] || { echo "weir binary not found: $weir" >&2; exit 2; }
}

free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 20000))
        ss -ltn 2>/dev/null | awk '{print $4}' | grep -q ":$p\$" || { echo $p; return; }
    done
}

server_pid=""
tmp=""
stop_server() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$server_pid" 2>/dev/null
        wait "$server_pid" 2>/dev/null
        server_pid=""
    fi
    [ -n "$tmp" ] && rm -rf "$tmp"
    tmp=""
}
