#!/usr/bin/env bash
# Start or stop a private Docker Engine for the harness's container tests.
#
#   .ci/dockerd.sh start   # installs docker.io if dockerd is missing, starts dockerd, waits for its socket,
#                          # prints `export DOCKER_HOST=unix://...` on stdout (eval it)
#   .ci/dockerd.sh stop    # stops that daemon by the pid in its pidfile (never by name)
#
# Everything lives under $HARNESS_DOCKERD_DIR (default /tmp/harness-dockerd): socket, data root, exec
# root, pidfile, log. The daemon runs with --bridge=none --iptables=false so that it never touches the
# host's network setup and several private daemons can coexist; containers use network "host" or "none".
# Extra dockerd flags: $HARNESS_DOCKERD_ARGS (split on spaces).
set -euo pipefail

DIR=${HARNESS_DOCKERD_DIR:-/tmp/harness-dockerd}
SOCK="$DIR/docker.sock"
PIDFILE="$DIR/dockerd.pid"
LOG="$DIR/dockerd.log"
WAIT_S=${HARNESS_DOCKERD_WAIT_S:-60}

log() { echo "dockerd.sh: $*" >&2; }

running() { [[ -s "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

answers() { docker --host "unix://$SOCK" version --format '{{.Server.Version}}' >/dev/null 2>&1; }

start() {
    if ! command -v dockerd >/dev/null 2>&1; then
        log "dockerd not found: installing Debian's docker.io"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq --no-install-recommends docker.io >&2
    fi
    mkdir -p "$DIR"
    if running && answers; then
        log "already running (pid $(cat "$PIDFILE"))"
    else
        rm -f "$SOCK"
        # shellcheck disable=SC2086  # HARNESS_DOCKERD_ARGS is a list of flags
        setsid dockerd --host "unix://$SOCK" --data-root "$DIR/data" --exec-root "$DIR/exec" \
            --pidfile "$PIDFILE" --storage-driver=overlay2 --bridge=none --iptables=false --ip6tables=false \
            ${HARNESS_DOCKERD_ARGS:-} >"$LOG" 2>&1 </dev/null &
        local launched=$! waited=0
        until answers; do
            if ! kill -0 "$launched" 2>/dev/null; then
                log "dockerd exited during start-up; last lines of $LOG:"
                tail -n 20 "$LOG" >&2
                exit 1
            fi
            if ((waited >= WAIT_S * 10)); then
                log "no answer on $SOCK after ${WAIT_S}s; last lines of $LOG:"
                tail -n 20 "$LOG" >&2
                exit 1
            fi
            sleep 0.1
            waited=$((waited + 1))
        done
        log "dockerd $(docker --host "unix://$SOCK" version --format '{{.Server.Version}}') up (pid $(cat "$PIDFILE"), log $LOG)"
    fi
    echo "export DOCKER_HOST=unix://$SOCK"
}

stop() {
    if ! running; then
        log "not running (no live pid in $PIDFILE)"
        rm -f "$PIDFILE"
        unmount_leftovers
        return 0
    fi
    local pid
    pid=$(cat "$PIDFILE")
    kill -TERM "$pid"
    for _ in $(seq 1 300); do  # dockerd stops its containers first (up to their stop timeouts)
        kill -0 "$pid" 2>/dev/null || { log "stopped (pid $pid)"; rm -f "$PIDFILE"; unmount_leftovers; return 0; }
        sleep 0.1
    done
    log "pid $pid still alive after 30s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$PIDFILE"
    unmount_leftovers
}

unmount_leftovers() {  # dockerd leaves its netns bind mount under the exec root; only paths under $DIR
    local m
    awk -v d="$DIR/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
        umount "$m" 2>/dev/null || log "could not unmount $m"
    done
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop  (dir: \$HARNESS_DOCKERD_DIR, default /tmp/harness-dockerd)" >&2; exit 2 ;;
esac
