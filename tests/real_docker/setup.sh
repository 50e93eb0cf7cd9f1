#!/usr/bin/env bash
# Set-up of the real-Docker test tier (`pytest -m real_docker`), as root, offline:
#   1. installs the Docker engine (docker.io) and debootstrap when missing;
#   2. starts dockerd in the background (unless a daemon already answers) with a
#      stand-in `nvidia-container-runtime-hook` on its PATH: moby registers its
#      NVIDIA `--gpus` driver only when that executable is found at start
#      (moby daemon/nvidia_linux.go), so `--gpus all` works without a GPU;
#   3. builds the test images from a Debian rootfs (debootstrap, cached as a
#      tarball under $TAO_REAL_DOCKER_CACHE) - nothing is pulled from a registry:
#        tao-rd/base:bookworm       the rootfs, `docker import`-ed
#        nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt   the TAO stand-in behind an
#                                   NGC-style entrypoint wrapper (banner, then exec "$@")
#        nvidia/cuda:12.4.1-base-ubuntu22.04         a stand-in nvidia-smi (gpu smoke)
#   4. creates the non-root remote user ($TAO_REAL_DOCKER_USER, default ubuntu,
#      as on Brev) in the docker group.
# Idempotent; a second run reuses the daemon, the cached rootfs and the images.
# Exit 0 when `docker run --rm --gpus all` of the smoke image lists a GPU as
# that user; non-zero (with the daemon's log tail) otherwise. Stop the daemon
# with tests/real_docker/teardown.sh.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
USER_NAME="${TAO_REAL_DOCKER_USER:-ubuntu}"
CACHE="${TAO_REAL_DOCKER_CACHE:-/var/cache/tao-run-on-brev}"
RUN_DIR="${TAO_REAL_DOCKER_RUN:-/run/tao-real-docker}"
SUITE="${TAO_REAL_DOCKER_SUITE:-bookworm}"
MIRROR="${TAO_REAL_DOCKER_MIRROR:-http://deb.debian.org/debian}"
BASE=tao-rd/base:$SUITE
TAO_IMAGE=nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt
SMOKE_IMAGE=nvidia/cuda:12.4.1-base-ubuntu22.04
log() { printf 'real-docker setup: %s\n' "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs packages, starts dockerd, creates a user)"
mkdir -p "$CACHE" "$RUN_DIR/bin"

# 1. packages -----------------------------------------------------------------
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v docker >/dev/null 2>&1 || need+=(docker.io)
[ -s "$CACHE/rootfs-$SUITE.tar" ] || command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends "${need[@]}" >&2 \
        || { apt-get update >&2 && apt-get install -y --no-install-recommends "${need[@]}" >&2; } \
        || die "apt-get install ${need[*]}"
fi

# 2. the daemon -----------------------------------------------------------------
printf '#!/bin/sh\n# stand-in: the real hook (NVIDIA Container Toolkit) injects the GPUs\nexit 0\n' \
    > "$RUN_DIR/bin/nvidia-container-runtime-hook"
chmod 755 "$RUN_DIR/bin/nvidia-container-runtime-hook"
if docker info >/dev/null 2>&1; then
    log "a Docker daemon already answers: reusing it (not stopped by teardown.sh)"
else
    log "starting dockerd (log: $RUN_DIR/dockerd.log)"
    PATH="$RUN_DIR/bin:$PATH" setsid dockerd --pidfile "$RUN_DIR/dockerd.pid" \
        >"$RUN_DIR/dockerd.log" 2>&1 < /dev/null &
    echo $! > "$RUN_DIR/started.pid"
    for _ in $(seq 1 120); do
        docker info >/dev/null 2>&1 && break
        kill -0 "$(cat "$RUN_DIR/started.pid")" 2>/dev/null || break
        sleep 0.5
    done
    if ! docker info >/dev/null 2>&1; then
        tail -n 30 "$RUN_DIR/dockerd.log" >&2 || true
        die "dockerd did not start (log above: $RUN_DIR/dockerd.log)"
    fi
fi
log "$(docker version --format 'engine {{.Server.Version}}, cli {{.Client.Version}}')"

# 3. images -----------------------------------------------------------------------
if ! docker image inspect "$BASE" >/dev/null 2>&1; then
    if [ ! -s "$CACHE/rootfs-$SUITE.tar" ]; then
        log "debootstrap $SUITE (minbase + python3-minimal, python3-yaml) - a few minutes, cached after"
        tmp="$(mktemp -d "$CACHE/rootfs.XXXXXX")"
        debootstrap --variant=minbase --include=python3-minimal,python3-yaml "$SUITE" "$tmp" "$MIRROR" \
            > "$CACHE/debootstrap.log" 2>&1 || { tail -n 20 "$CACHE/debootstrap.log" >&2; rm -rf "$tmp"; die debootstrap; }
        rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*
        tar -C "$tmp" -cf "$CACHE/rootfs-$SUITE.tar.part" . && mv "$CACHE/rootfs-$SUITE.tar.part" "$CACHE/rootfs-$SUITE.tar"
        rm -rf "$tmp"
    fi
    log "docker import $BASE"
    docker import "$CACHE/rootfs-$SUITE.tar" "$BASE" >/dev/null
fi

# Layers added with create + cp + commit: no builder (BuildKit/buildx) needed.
layer() {   # layer IMAGE CHANGE... : files from $stage added on top of $BASE
    local image="$1"; shift
    local cid rc=0
    cid="$(docker create "$BASE" /bin/true)"
    docker cp "$stage/." "$cid:/" >/dev/null && docker commit "$@" "$cid" "$image" >/dev/null || rc=$?
    docker rm "$cid" >/dev/null
    return $rc
}
fingerprint="$(cat "$HERE/nvidia_entrypoint.sh" "$HERE/nvidia-smi" "$REPO/tests/sim/tao_standin.py" "$REPO/tests/sim/tao_lightning.py" "$0" | sha256sum | cut -c1-16)"
label_of() { docker image inspect --format '{{index .Config.Labels "tao-rd.fingerprint"}}' "$1" 2>/dev/null || true; }
if [ "$(label_of tao-rd/tao-standin:test)" != "$fingerprint" ] || [ "$(label_of tao-rd/cuda-smoke:test)" != "$fingerprint" ]; then
    log "layering the TAO stand-in and the smoke image"
    stage="$(mktemp -d)"
    trap 'rm -rf "$stage"' EXIT
    install -D -m 755 "$HERE/nvidia-smi" "$stage/usr/bin/nvidia-smi"
    install -D -m 755 "$HERE/nvidia_entrypoint.sh" "$stage/opt/nvidia/nvidia_entrypoint.sh"
    # nvidia/cuda images print their banner too (same wrapper, another product name)
    layer tao-rd/cuda-smoke:test --change "LABEL tao-rd.fingerprint=$fingerprint" --change 'ENV TAO_RD_IMAGE=1' \
        --change 'ENV NVIDIA_PRODUCT_NAME=CUDA' \
        --change 'ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh"]' --change 'CMD ["/bin/bash"]'
    install -D -m 644 "$REPO/tests/sim/tao_standin.py" "$stage/opt/tao/tao_standin.py"
    install -D -m 644 "$REPO/tests/sim/tao_lightning.py" "$stage/opt/tao/tao_lightning.py"
    # TAO 5+ puts one executable per network arch on PATH; an unknown arch is "not found" (127).
    mkdir -p "$stage/usr/local/bin"
    for arch in $(python3 "$REPO/tests/sim/tao_standin.py" --list-arches); do
        printf '#!/bin/sh\nexec python3 /opt/tao/tao_standin.py %s "$@"\n' "$arch" > "$stage/usr/local/bin/$arch"
        chmod 755 "$stage/usr/local/bin/$arch"
    done
    layer tao-rd/tao-standin:test --change "LABEL tao-rd.fingerprint=$fingerprint" --change 'ENV TAO_RD_IMAGE=1' \
        --change 'ENV NVIDIA_PRODUCT_NAME="TAO Toolkit PyTorch"' \
        --change 'ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh"]' --change 'CMD ["/bin/bash"]' \
        --change 'WORKDIR /workspace' --change 'ENV NVIDIA_TAO_TOOLKIT_VERSION=7.3.0'
    rm -rf "$stage"
fi
docker tag tao-rd/tao-standin:test "$TAO_IMAGE"
docker tag tao-rd/cuda-smoke:test "$SMOKE_IMAGE"

# 4. the remote user ----------------------------------------------------------------
getent group docker >/dev/null || groupadd --system docker
if ! id "$USER_NAME" >/dev/null 2>&1; then
    log "creating user $USER_NAME (docker group)"
    useradd --create-home --shell /bin/bash --groups docker "$USER_NAME"
else
    usermod -aG docker "$USER_NAME"
fi
chmod 755 "$(getent passwd "$USER_NAME" | cut -d: -f6)"

# proof: the user reaches the daemon and --gpus works --------------------------------
out="$(runuser -u "$USER_NAME" -- docker run --rm --gpus all "$SMOKE_IMAGE" nvidia-smi -L 2>&1)" \
    || { printf '%s\n' "$out" >&2; tail -n 20 "$RUN_DIR/dockerd.log" >&2 2>/dev/null || true; die "docker run --gpus all as $USER_NAME"; }
log "ready: $out"
