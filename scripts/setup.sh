#!/usr/bin/env bash
# Brings up everything progscore needs on a fresh Debian machine, idempotently:
# Debian packages, the wasm32-wasip2 target, a Docker engine with gVisor (runsc)
# registered, the python sandbox image (debootstrap -> docker import), a local
# registry on 127.0.0.1:5000 holding that image (so it has a real repo digest),
# the test fixture images, the CPython WASI runtime, and a generated
# progscore.toml whose profiles pin the digest.
#
# A second run only checks and returns quickly.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_DIR="${PROGSCORE_CACHE_DIR:-/var/cache/progscore}"
REGISTRY_ADDR="127.0.0.1:5000"
IMAGE_NAME="python-sandbox"
IMAGE_TAG="bookworm"
LOCAL_IMAGE="progscore/${IMAGE_NAME}:${IMAGE_TAG}"
REGISTRY_IMAGE="${REGISTRY_ADDR}/${IMAGE_NAME}:${IMAGE_TAG}"
CONFIG_OUT="${PROGSCORE_CONFIG_OUT:-$REPO_ROOT/progscore.toml}"
DOCKERD_LOG="/var/log/progscore-dockerd.log"
REGISTRY_LOG="/var/log/progscore-registry.log"

log() { printf '[setup] %s\n' "$*" >&2; }

need_root() {
    if [ "$(id -u)" != 0 ]; then
        log "must run as root (it installs packages and starts dockerd)"
        exit 1
    fi
}

install_packages() {
    local missing=()
    command -v dockerd >/dev/null || missing+=(docker.io)
    command -v runsc >/dev/null || missing+=(runsc)
    command -v runc >/dev/null || missing+=(runc)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    command -v docker-registry >/dev/null || missing+=(docker-registry)
    command -v curl >/dev/null || missing+=(curl)
    # The report's tests open it in a real headless browser.
    command -v chromium >/dev/null || missing+=(chromium)
    command -v unzip >/dev/null || missing+=(unzip)
    if [ "${#missing[@]}" -gt 0 ]; then
        log "installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    # The Debian docker.io client is the one that matches the engine's API.
    export PATH="/usr/sbin:/usr/bin:$PATH"
}

install_wasm_target() {
    if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
        log "adding rust target wasm32-wasip2"
        rustup target add wasm32-wasip2 >/dev/null
    fi
}

configure_dockerd() {
    mkdir -p /etc/docker
    local want
    want='{
  "runtimes": {
    "runsc": { "path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"] }
  },
  "insecure-registries": ["127.0.0.1:5000"]
}'
    if [ ! -f /etc/docker/daemon.json ] || [ "$(cat /etc/docker/daemon.json)" != "$want" ]; then
        log "writing /etc/docker/daemon.json (runsc runtime registered)"
        printf '%s\n' "$want" > /etc/docker/daemon.json
        if docker_up; then
            log "reloading dockerd for the new runtime"
            pkill -HUP -x dockerd || true
            sleep 1
        fi
    fi
}

docker_up() { /usr/bin/docker info >/dev/null 2>&1; }

start_dockerd() {
    if docker_up; then
        return
    fi
    log "starting dockerd (log: $DOCKERD_LOG)"
    # setsid: the engine must outlive this script and the shell that ran it.
    setsid nohup /usr/sbin/dockerd >"$DOCKERD_LOG" 2>&1 < /dev/null &
    for _ in $(seq 1 60); do
        if docker_up; then
            return
        fi
        sleep 0.5
    done
    log "dockerd did not come up; last lines of $DOCKERD_LOG:"
    tail -20 "$DOCKERD_LOG" >&2
    exit 1
}

registry_up() { curl -fsS "http://${REGISTRY_ADDR}/v2/" >/dev/null 2>&1; }

start_registry() {
    if registry_up; then
        return
    fi
    mkdir -p /var/lib/progscore-registry
    cat > "$CACHE_DIR/registry.yml" <<EOF
version: 0.1
storage:
  filesystem:
    rootdirectory: /var/lib/progscore-registry
http:
  addr: ${REGISTRY_ADDR}
EOF
    log "starting local registry on ${REGISTRY_ADDR} (log: $REGISTRY_LOG)"
    setsid nohup /usr/bin/docker-registry serve "$CACHE_DIR/registry.yml" >"$REGISTRY_LOG" 2>&1 < /dev/null &
    for _ in $(seq 1 40); do
        if registry_up; then
            return
        fi
        sleep 0.25
    done
    log "registry did not come up; last lines of $REGISTRY_LOG:"
    tail -20 "$REGISTRY_LOG" >&2
    exit 1
}

build_rootfs_tarball() {
    local tarball="$CACHE_DIR/${IMAGE_NAME}-${IMAGE_TAG}.tar"
    if [ -s "$tarball" ]; then
        echo "$tarball"
        return
    fi
    local rootfs="$CACHE_DIR/rootfs-${IMAGE_TAG}"
    rm -rf "$rootfs"
    log "debootstrap bookworm (minbase + python3-minimal) into $rootfs"
    debootstrap --variant=minbase --include=python3-minimal bookworm "$rootfs" >"$CACHE_DIR/debootstrap.log" 2>&1 || {
        log "debootstrap failed; see $CACHE_DIR/debootstrap.log"
        tail -20 "$CACHE_DIR/debootstrap.log" >&2
        exit 1
    }
    # Keep the image small: package caches and docs are not needed to run python.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/usr/share/doc "$rootfs"/usr/share/man
    tar -C "$rootfs" -cf "$tarball.partial" .
    mv "$tarball.partial" "$tarball"
    rm -rf "$rootfs"
    echo "$tarball"
}

ensure_image() {
    if ! /usr/bin/docker image inspect "$LOCAL_IMAGE" >/dev/null 2>&1; then
        local tarball
        tarball="$(build_rootfs_tarball)"
        log "docker import $LOCAL_IMAGE"
        /usr/bin/docker import \
            -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            -c 'ENV LANG=C.UTF-8' \
            -c 'CMD ["python3"]' \
            "$tarball" "$LOCAL_IMAGE" >/dev/null
    fi
    if [ -z "$(registry_digest)" ]; then
        log "pushing to $REGISTRY_IMAGE"
        /usr/bin/docker tag "$LOCAL_IMAGE" "$REGISTRY_IMAGE"
        /usr/bin/docker push "$REGISTRY_IMAGE" >/dev/null
    fi
}

# The repo digest the engine knows for the registry copy (empty when not pushed).
registry_digest() {
    /usr/bin/docker image inspect "$REGISTRY_IMAGE" --format '{{range .RepoDigests}}{{println .}}{{end}}' 2>/dev/null \
        | grep "^${REGISTRY_ADDR}/${IMAGE_NAME}@sha256:" | head -1 || true
}

# Images the tests need: one whose own ENTRYPOINT is python3 (the profile's
# command must still win) and one that declares a VOLUME (must be refused).
ensure_fixture_images() {
    local entry="progscore/fixture-entrypoint:latest" vol="progscore/fixture-volume:latest"
    if ! /usr/bin/docker image inspect "$entry" >/dev/null 2>&1; then
        log "building fixture image $entry"
        printf 'FROM %s\nENTRYPOINT ["python3", "-c", "print(\\"image entrypoint ran\\")"]\n' "$LOCAL_IMAGE" \
            | DOCKER_BUILDKIT=0 /usr/bin/docker build -q -t "$entry" - >/dev/null
    fi
    if ! /usr/bin/docker image inspect "$vol" >/dev/null 2>&1; then
        log "building fixture image $vol"
        printf 'FROM %s\nVOLUME /data\n' "$LOCAL_IMAGE" \
            | DOCKER_BUILDKIT=0 /usr/bin/docker build -q -t "$vol" - >/dev/null
    fi
    # The daemonless backend reads images from the registry only: the
    # fixtures go there too (their digests: `docker image inspect` RepoDigests).
    local fixture pushed
    for fixture in fixture-entrypoint fixture-volume; do
        pushed="${REGISTRY_ADDR}/progscore-${fixture}:latest"
        if ! /usr/bin/docker image inspect "$pushed" --format '{{range .RepoDigests}}{{println .}}{{end}}' 2>/dev/null \
            | grep -q "^${REGISTRY_ADDR}/progscore-${fixture}@sha256:"; then
            log "pushing $pushed"
            /usr/bin/docker tag "progscore/${fixture}:latest" "$pushed"
            /usr/bin/docker push "$pushed" >/dev/null
        fi
    done
}

write_config() {
    local digest image_id
    digest="$(registry_digest)"
    image_id="$(/usr/bin/docker image inspect "$LOCAL_IMAGE" --format '{{.Id}}')"
    if [ -z "$digest" ]; then
        log "no repo digest for $REGISTRY_IMAGE after push"
        exit 1
    fi
    local tmp="$CONFIG_OUT.tmp"
    cat > "$tmp" <<EOF
# Generated by scripts/setup.sh: the image is pinned by the digest the local
# registry gave it. Re-run the script to regenerate.
[store]
path = "progscore.db"

[profiles.python]
backend = "docker"
image = "${digest}"
command = ["python3", "-I"]
[profiles.python.limits]
memory = "256MiB"
cpus = 1.0
pids = 64
timeout = "10s"
output = "64KiB"

[profiles.python-gvisor]
backend = "docker"
image = "${digest}"
command = ["python3", "-I"]
runtime = "runsc"
[profiles.python-gvisor.limits]
memory = "256MiB"
cpus = 1.0
pids = 64
timeout = "10s"
output = "64KiB"

# The daemonless backend: runc (or runsc) run directly, the image fetched by
# digest from the registry into /var/cache/progscore/oci.
[profiles.python-oci]
backend = "oci"
image = "${digest}"
command = ["python3", "-I"]
[profiles.python-oci.limits]
memory = "256MiB"
cpus = 1.0
pids = 64
timeout = "10s"
output = "64KiB"

[profiles.python-oci-gvisor]
backend = "oci"
image = "${digest}"
command = ["python3", "-I"]
runtime = "runsc"
[profiles.python-oci-gvisor.limits]
memory = "256MiB"
cpus = 1.0
pids = 64
timeout = "10s"
output = "64KiB"

# The same image by image id, for users who do not run a registry.
[profiles.python-by-id]
backend = "docker"
image = "${image_id}"
command = ["python3", "-I"]
[profiles.python-by-id.limits]
memory = "256MiB"
cpus = 1.0
pids = 64
timeout = "10s"
output = "64KiB"
EOF
    # The daemonless WASI profile, pinned by scripts/setup-wasi.sh.
    if [ -s "$CACHE_DIR/wasi-profile.toml" ]; then
        printf '\n' >> "$tmp"
        cat "$CACHE_DIR/wasi-profile.toml" >> "$tmp"
    fi
    mv "$tmp" "$CONFIG_OUT"
    log "wrote $CONFIG_OUT (python image ${digest})"
}

main() {
    need_root
    mkdir -p "$CACHE_DIR"
    install_packages
    install_wasm_target
    configure_dockerd
    start_dockerd
    start_registry
    ensure_image
    ensure_fixture_images
    PROGSCORE_CACHE_DIR="$CACHE_DIR" bash "$REPO_ROOT/scripts/setup-wasi.sh"
    write_config
    log "ready"
}

main "$@"
