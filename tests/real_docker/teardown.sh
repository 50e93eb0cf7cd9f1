#!/usr/bin/env bash
# Stop the dockerd that tests/real_docker/setup.sh started (by its recorded
# pid; a daemon that was already running is left alone). The images, the
# cached rootfs tarball and the user stay, so the next set-up is fast.
set -uo pipefail
RUN_DIR="${TAO_REAL_DOCKER_RUN:-/run/tao-real-docker}"
pidfile="$RUN_DIR/started.pid"
[ -s "$pidfile" ] || { echo "real-docker teardown: no daemon started by setup.sh" >&2; exit 0; }
pid="$(cat "$pidfile")"
if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then
        echo "real-docker teardown: dockerd $pid ignored SIGTERM for 30 s; SIGKILL" >&2
        kill -KILL "$pid"
    fi
fi
rm -f "$pidfile"
echo "real-docker teardown: dockerd $pid stopped" >&2
