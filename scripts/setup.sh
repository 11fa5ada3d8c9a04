#!/usr/bin/env bash
# Brings up everything progscore needs on a fresh Debian machine, idempotently:
# Debian packages, the wasm32-wasip2 target, a Docker engine with gVisor (runsc)
# registered, the python sandbox image and the compiled-language images
# (debootstrap -> docker import), a local registry on 127.0.0.1:5000 holding
# them (so each has a real repo digest), the test fixture images, the CPython
# WASI runtime, and a generated progscore.toml whose profiles pin the digests.
#
#   setup.sh [--languages LIST]
# LIST: comma separated from c, cpp, rust, go, java, javascript, or `all`
# (default: c,cpp; env PROGSCORE_LANGUAGES works too). The python image is
# always built. c and cpp share one image (cc-sandbox).
#
# A second run only checks and returns quickly (root filesystems are cached as
# tarballs in $CACHE_DIR; delete one to rebuild that image).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_DIR="${PROGSCORE_CACHE_DIR:-/var/cache/progscore}"
REGISTRY_ADDR="127.0.0.1:5000"
IMAGE_TAG="bookworm"
PYTHON_IMAGE="python-sandbox"
LOCAL_IMAGE="progscore/${PYTHON_IMAGE}:${IMAGE_TAG}"
ALL_LANGUAGES="c cpp rust go java javascript"
LANGUAGES="${PROGSCORE_LANGUAGES:-c,cpp}"
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

# The sandbox image of each language, and the Debian packages in it.
language_image() {
    case "$1" in
        c|cpp) echo cc-sandbox ;;
        rust) echo rust-sandbox ;;
        go) echo go-sandbox ;;
        java) echo java-sandbox ;;
        javascript) echo node-sandbox ;;
        *) return 1 ;;
    esac
}

image_packages() {
    case "$1" in
        python-sandbox) echo python3-minimal ;;
        cc-sandbox) echo gcc,g++,libc6-dev ;;
        rust-sandbox) echo rustc,libc6-dev ;;   # debootstrap does not resolve rustc's virtual libc-dev
        go-sandbox) echo golang-go ;;
        java-sandbox) echo default-jdk-headless ;;
        node-sandbox) echo nodejs ;;
        *) return 1 ;;
    esac
}

# --languages LIST (or PROGSCORE_LANGUAGES) -> LANGUAGES, space separated, checked.
parse_args() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --languages) [ $# -ge 2 ] || { log "--languages needs a LIST"; exit 2; }; LANGUAGES="$2"; shift 2 ;;
            --languages=*) LANGUAGES="${1#--languages=}"; shift ;;
            -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
            *) log "unknown argument: $1 (usage: setup.sh [--languages LIST])"; exit 2 ;;
        esac
    done
    local wanted=() lang
    for lang in ${LANGUAGES//,/ }; do
        if [ "$lang" = all ]; then
            wanted+=($ALL_LANGUAGES)
        elif language_image "$lang" >/dev/null; then
            wanted+=("$lang")
        else
            log "unknown language: $lang (choose from: ${ALL_LANGUAGES// /, }, all)"
            exit 2
        fi
    done
    # In the canonical order, each once.
    LANGUAGES=""
    for lang in $ALL_LANGUAGES; do
        case " ${wanted[*]:-} " in *" $lang "*) LANGUAGES+="${LANGUAGES:+ }$lang" ;; esac
    done
}

# The root filesystem of image NAME (debootstrap minbase + its packages), as a
# tarball cached in $CACHE_DIR; prints its path.
build_rootfs_tarball() {
    local name="$1" packages="$2"
    local tarball="$CACHE_DIR/${name}-${IMAGE_TAG}.tar"
    if [ -s "$tarball" ]; then
        echo "$tarball"
        return
    fi
    local rootfs="$CACHE_DIR/rootfs-${name}-${IMAGE_TAG}"
    local debootstrap_log="$CACHE_DIR/debootstrap-${name}.log"
    rm -rf "$rootfs"
    log "debootstrap bookworm (minbase + $packages) into $rootfs"
    debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" >"$debootstrap_log" 2>&1 || {
        log "debootstrap failed; see $debootstrap_log"
        tail -20 "$debootstrap_log" >&2
        exit 1
    }
    # Keep the image small: package caches, lists and docs are not needed to run programs.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
        "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc "$rootfs"/usr/share/man \
        "$rootfs"/usr/share/info
    tar -C "$rootfs" -cf "$tarball.partial" .
    mv "$tarball.partial" "$tarball"
    rm -rf "$rootfs"
    echo "$tarball"
}

# Image NAME: built from its cached tarball, imported as progscore/NAME:bookworm,
# pushed to the local registry (so it has a repo digest). Any extra arguments
# are `docker import -c` changes (e.g. a CMD). Logs how long it took.
ensure_sandbox_image() {
    local name="$1"; shift
    local local_image="progscore/${name}:${IMAGE_TAG}"
    local registry_image="${REGISTRY_ADDR}/${name}:${IMAGE_TAG}"
    local started=$SECONDS did=""
    if ! /usr/bin/docker image inspect "$local_image" >/dev/null 2>&1; then
        local packages tarball change changes=()
        packages="$(image_packages "$name")"
        tarball="$(build_rootfs_tarball "$name" "$packages")"
        for change in "$@"; do changes+=(-c "$change"); done
        log "docker import $local_image"
        /usr/bin/docker import \
            -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            -c 'ENV LANG=C.UTF-8' \
            ${changes[@]+"${changes[@]}"} \
            "$tarball" "$local_image" >/dev/null
        did=1
    fi
    if [ -z "$(registry_digest "$name")" ]; then
        log "pushing to $registry_image"
        /usr/bin/docker tag "$local_image" "$registry_image"
        /usr/bin/docker push "$registry_image" >/dev/null
        did=1
    fi
    if [ -n "$did" ]; then
        log "image $name ready in $((SECONDS - started))s ($(/usr/bin/docker image inspect --format '{{.Size}}' "$local_image") bytes)"
    fi
}

# The repo digest the engine knows for the registry copy of image NAME (empty when not pushed).
registry_digest() {
    local name="$1"
    /usr/bin/docker image inspect "${REGISTRY_ADDR}/${name}:${IMAGE_TAG}" --format '{{range .RepoDigests}}{{println .}}{{end}}' 2>/dev/null \
        | grep "^${REGISTRY_ADDR}/${name}@sha256:" | head -1 || true
}

ensure_images() {
    ensure_sandbox_image "$PYTHON_IMAGE" 'CMD ["python3"]'
    local lang done_images=" "
    for lang in $LANGUAGES; do
        local name
        name="$(language_image "$lang")"
        case "$done_images" in *" $name "*) continue ;; esac
        ensure_sandbox_image "$name"
        done_images+="$name "
    done
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

# The docker profile of language LANG, its image pinned by DIGEST. The limits
# were checked with scripts/docker-compile-run-loop.sh's hardening (read-only
# root, no network, nobody, no capabilities, tmpfs /tmp) on hello world and
# on examples/languages/.
language_profile() {
    local lang="$1" digest="$2"
    case "$lang" in
        c) cat <<EOF
[profiles.c]
backend = "docker"
image = "${digest}"
source = "main.c"
compile = ["gcc", "-O2", "-std=c17", "-o", "/build/main", "/sandbox/main.c", "-lm"]
command = ["/build/main"]
[profiles.c.compile_limits]
memory = "512MiB"              # cc1 on hello world peaks ~10MiB; headroom for big sources
cpus = 1.0
pids = 32                      # gcc -> cc1, as, collect2, ld: a few processes at a time
timeout = "30s"
output = "64KiB"               # diagnostics
tmp = "64MiB"                  # gcc's temporary .s/.o files go to /tmp
[profiles.c.limits]
memory = "256MiB"
cpus = 1.0
pids = 64
timeout = "10s"
output = "64KiB"
EOF
        ;;
        cpp) cat <<EOF
[profiles.cpp]
backend = "docker"
image = "${digest}"
source = "main.cpp"
compile = ["g++", "-O2", "-std=c++17", "-o", "/build/main", "/sandbox/main.cpp"]
command = ["/build/main"]
[profiles.cpp.compile_limits]
memory = "512MiB"              # cc1plus at -O2 with <bits/stdc++.h> peaks ~180MiB (128MiB fails)
cpus = 1.0
pids = 32                      # g++ -> cc1plus, as, collect2, ld
timeout = "30s"                # hello world takes ~1s, <bits/stdc++.h> ~2s; template-heavy code much more
output = "64KiB"               # template errors are long: enough to show the first ones
tmp = "64MiB"                  # g++'s temporary .s/.o files go to /tmp
[profiles.cpp.limits]
memory = "256MiB"
cpus = 1.0
pids = 64
timeout = "10s"
output = "64KiB"
EOF
        ;;
        rust) cat <<EOF
[profiles.rust]
backend = "docker"
image = "${digest}"
source = "main.rs"
compile = ["rustc", "--edition", "2021", "-O", "-C", "codegen-units=1", "-o", "/build/main", "/sandbox/main.rs"]
command = ["/build/main"]
[profiles.rust.compile_limits]
memory = "512MiB"              # rustc 1.63 + LLVM at -O: hello world peaks ~80MiB; headroom for bigger crates
cpus = 1.0
pids = 32                      # rustc's threads plus cc and ld as the linker (~10 at peak)
timeout = "60s"                # hello world takes ~1.5s; LLVM at -O is slow on big functions
output = "64KiB"
tmp = "64MiB"                  # rustc needs a writable TMPDIR (rustcXXXX link dirs); hello world uses <1MiB
[profiles.rust.limits]
memory = "256MiB"
cpus = 1.0
pids = 64
timeout = "10s"
output = "64KiB"
EOF
        ;;
        go) cat <<EOF
[profiles.go]
backend = "docker"
image = "${digest}"
source = "main.go"
# The go tool needs a writable build cache and HOME (read-only root): both in
# /tmp. GOMAXPROCS=1: Go 1.19 sizes its thread pools by the host's CPUs, not the
# cgroup's, so on a big host it would run into the pids limit. CGO_ENABLED=0:
# no C toolchain in the image; static binaries.
compile = ["env", "GOMAXPROCS=1", "GOCACHE=/tmp/go-cache", "HOME=/tmp", "CGO_ENABLED=0", "go", "build", "-o", "/build/main", "/sandbox/main.go"]
command = ["env", "GOMAXPROCS=1", "/build/main"]
[profiles.go.compile_limits]
memory = "512MiB"              # hello world peaks ~40MiB: bookworm's Go ships std precompiled
cpus = 1.0
pids = 64                      # the go tool, compile and link, each with a few threads
timeout = "60s"                # hello world takes ~1.5s
output = "64KiB"
tmp = "64MiB"                  # GOCACHE + go build's work dir: <1MiB for hello world, more with CGO_ENABLED=0 rebuilds of net etc.
[profiles.go.limits]
memory = "256MiB"
cpus = 1.0
pids = 64                      # the Go runtime starts a handful of threads (GOMAXPROCS=1)
timeout = "10s"
output = "64KiB"
EOF
        ;;
        java) cat <<EOF
[profiles.java]
backend = "docker"
image = "${digest}"
source = "Main.java"           # javac wants the public class Main in Main.java; runs as: java -cp /build Main
# Both JVMs: serial GC (no parallel GC threads), C1 only (TieredStopAtLevel=1:
# faster start for short runs, fewer compiler threads), no hsperfdata file in
# /tmp (-UsePerfData), one CPU as the quota says. -Xss8m: deep recursion as
# on judges. -Xmx below the cgroup limit: too much allocation is a clean
# OutOfMemoryError, not an OOM kill.
compile = ["javac", "-J-XX:+UseSerialGC", "-J-XX:TieredStopAtLevel=1", "-J-Xmx256m", "-J-Xss8m", "-J-XX:-UsePerfData", "-d", "/build", "/sandbox/Main.java"]
command = ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx128m", "-Xss8m", "-XX:-UsePerfData", "-XX:ActiveProcessorCount=1", "-cp", "/build", "Main"]
[profiles.java.compile_limits]
memory = "512MiB"              # javac on hello world peaks ~40MiB (works in 128MiB); 256MiB heap + JVM overhead for big sources
cpus = 1.0
pids = 32                      # javac's JVM runs ~15 threads (works with 16)
timeout = "60s"                # hello world compiles in ~1.2s
output = "64KiB"
tmp = "64MiB"                  # nothing measurable goes to /tmp (hsperfdata is off)
[profiles.java.limits]
memory = "256MiB"              # hello world peaks ~16MiB (works in 64MiB); 128MiB heap + metaspace, code cache, stacks
cpus = 1.0
pids = 64                      # the JVM starts ~10 threads (8 is too few: "unable to create native thread"); room for the program's own
timeout = "10s"
output = "64KiB"
EOF
        ;;
        javascript) cat <<EOF
[profiles.javascript]
backend = "docker"
image = "${digest}"
source = "main.js"
# Nothing to compile: /sandbox/main.js is appended to the command, as for python.
# --max-old-space-size: V8's heap stops below the cgroup limit, so too much
# allocation is a clean "heap out of memory" error, not an OOM kill.
command = ["node", "--max-old-space-size=128"]
[profiles.javascript.limits]
memory = "256MiB"              # hello world peaks ~15MiB (works in 32MiB); 128MiB V8 heap + code and buffers
cpus = 1.0
pids = 64                      # node starts ~7 threads (V8 workers, libuv); the libuv pool adds 4 on file I/O
timeout = "10s"
output = "64KiB"
EOF
        ;;
    esac
}

write_config() {
    local digest image_id
    digest="$(registry_digest "$PYTHON_IMAGE")"
    image_id="$(/usr/bin/docker image inspect "$LOCAL_IMAGE" --format '{{.Id}}')"
    if [ -z "$digest" ]; then
        log "no repo digest for ${REGISTRY_ADDR}/${PYTHON_IMAGE}:${IMAGE_TAG} after push"
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
    # The compiled languages: the program is mounted at /sandbox/<source>;
    # `compile` runs once per program with /build writable, then each case
    # runs `command` + its arguments with /build read-only.
    local lang lang_digest
    for lang in $LANGUAGES; do
        lang_digest="$(registry_digest "$(language_image "$lang")")"
        if [ -z "$lang_digest" ]; then
            log "no repo digest for the $lang image after push"
            exit 1
        fi
        printf '\n' >> "$tmp"
        language_profile "$lang" "$lang_digest" >> "$tmp"
    done
    # The daemonless WASI profile, pinned by scripts/setup-wasi.sh.
    if [ -s "$CACHE_DIR/wasi-profile.toml" ]; then
        printf '\n' >> "$tmp"
        cat "$CACHE_DIR/wasi-profile.toml" >> "$tmp"
    fi
    mv "$tmp" "$CONFIG_OUT"
    log "wrote $CONFIG_OUT (python image ${digest}; languages: ${LANGUAGES:-none})"
}

# The published HTTP clients that tests/serve runs against `progscore serve`:
# the sandbox-fusion SDK in a cached venv, and verl's SandboxFusion reward
# module, the one file of its wheel that is used (fetched without verl's heavy
# dependencies; it needs only requests). Quick once done.
SERVE_CLIENTS_DIR="$CACHE_DIR/serve-clients"
VERL_VERSION=0.9.1
ensure_serve_clients() {
    local venv="$SERVE_CLIENTS_DIR/venv"
    local requirements="$REPO_ROOT/tests/serve/clients/requirements.txt"
    local stamp="$SERVE_CLIENTS_DIR/installed.txt"
    local verl_module="$SERVE_CLIENTS_DIR/verl_sandbox_fusion_utils.py"
    if [ -s "$verl_module" ] && cmp -s "$requirements" "$stamp" &&
        "$venv/bin/python" -c 'import sandbox_fusion, requests' 2>/dev/null; then
        return
    fi
    log "installing the SandboxFusion SDK and verl's reward module into $SERVE_CLIENTS_DIR"
    if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
        python3 -c 'import ensurepip, venv' 2>/dev/null ||
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv >/dev/null
        rm -rf "$venv"
        python3 -m venv "$venv"
    fi
    "$venv/bin/pip" install -q -r "$requirements"
    local wheels
    wheels="$(mktemp -d)"
    "$venv/bin/pip" download -q --no-deps -d "$wheels" "verl==$VERL_VERSION"
    "$venv/bin/python" - "$wheels"/verl-*.whl "$verl_module" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    source = wheel.read("verl/utils/reward_score/sandbox_fusion/utils.py")
with open(sys.argv[2], "wb") as out:
    out.write(source)
PY
    rm -rf "$wheels"
    cp "$requirements" "$stamp"
}

main() {
    parse_args "$@"
    need_root
    mkdir -p "$CACHE_DIR"
    install_packages
    install_wasm_target
    configure_dockerd
    start_dockerd
    start_registry
    ensure_images
    ensure_fixture_images
    PROGSCORE_CACHE_DIR="$CACHE_DIR" bash "$REPO_ROOT/scripts/setup-wasi.sh"
    write_config
    ensure_serve_clients
    log "ready"
}

main "$@"
