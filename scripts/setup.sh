#!/usr/bin/env bash
# Brings up everything progscore needs on a fresh Debian machine, idempotently:
# Debian packages, the wasm32-wasip2 target, a Docker engine with gVisor (runsc)
# registered, the python sandbox image and the compiled-language images
# (debootstrap -> docker import), a local registry on 127.0.0.1:5000 holding
# them (so each has a real repo digest), the test fixture images, the CPython
# WASI runtime, and a generated progscore.toml whose profiles pin the digests.
#
#   setup.sh [--languages LIST]
# LIST: comma separated profile names, or `all`: python, python-minimal,
# python-sci, c, cpp, rust, go, go-test, java, java-problem, javascript,
# typescript, csharp, d, lua, php, perl, r, ruby, racket, scala, bash
# (default: c,cpp; env PROGSCORE_LANGUAGES works too). python is always
# built. Profiles of one toolchain share an image (c and cpp: cc-sandbox).
# Root filesystems are built PROGSCORE_IMAGE_JOBS (default 4) at a time.
#
# A second run only checks and returns quickly (root filesystems are cached as
# tarballs in $CACHE_DIR, named by image and package list; delete one to
# rebuild that image; a changed package list builds a new one).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_DIR="${PROGSCORE_CACHE_DIR:-/var/cache/progscore}"
REGISTRY_ADDR="127.0.0.1:5000"
IMAGE_JOBS="${PROGSCORE_IMAGE_JOBS:-4}"   # root filesystems built at once
IMAGE_TAG="bookworm"
PYTHON_IMAGE="python-sandbox"
LOCAL_IMAGE="progscore/${PYTHON_IMAGE}:${IMAGE_TAG}"
ALL_LANGUAGES="python python-minimal python-sci c cpp rust go go-test java java-problem javascript typescript csharp d lua php perl r ruby racket scala bash"
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
    # rusqlite links the system SQLite.
    [ -e /usr/include/sqlite3.h ] || missing+=(libsqlite3-dev)
    command -v pkg-config >/dev/null || missing+=(pkg-config)
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

# The engine's runsc is progscore's wrapper (scripts/engine/runsc-traced):
# runsc itself, plus the behaviour trace of a container progscore traces.
TRACED_RUNSC=/usr/local/lib/progscore/runsc-traced

install_traced_runsc() {
    if ! cmp -s "$REPO_ROOT/scripts/engine/runsc-traced" "$TRACED_RUNSC" 2>/dev/null; then
        log "installing $TRACED_RUNSC"
        install -D -m 0755 "$REPO_ROOT/scripts/engine/runsc-traced" "$TRACED_RUNSC"
    fi
}

configure_dockerd() {
    mkdir -p /etc/docker
    install_traced_runsc
    local want
    want='{
  "runtimes": {
    "runsc": { "path": "'"$TRACED_RUNSC"'", "runtimeArgs": ["--network=none"] }
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
    # setsid -f: the engine must outlive this script and the shell that ran
    # it, and must not be one of this shell's jobs (a later `wait` would wait
    # for it forever: a fresh machine's setup hung there).
    setsid -f nohup /usr/sbin/dockerd >"$DOCKERD_LOG" 2>&1 < /dev/null
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
    setsid -f nohup /usr/bin/docker-registry serve "$CACHE_DIR/registry.yml" >"$REGISTRY_LOG" 2>&1 < /dev/null
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

# The sandbox image of each language (profile), and the Debian packages in it.
# debootstrap installs Depends only: no Recommends, and the docs are removed.
language_image() {
    case "$1" in
        python) echo python-sandbox ;;
        python-minimal) echo python-minimal-sandbox ;;
        python-sci) echo python-sci-sandbox ;;
        c|cpp) echo cc-sandbox ;;
        rust) echo rust-sandbox ;;
        go|go-test) echo go-sandbox ;;
        java|java-problem) echo java-sandbox ;;
        javascript) echo node-sandbox ;;
        typescript) echo typescript-sandbox ;;
        csharp) echo mono-sandbox ;;
        d) echo d-sandbox ;;
        lua) echo lua-sandbox ;;
        php) echo php-sandbox ;;
        perl) echo perl-sandbox ;;
        r) echo r-sandbox ;;
        ruby) echo ruby-sandbox ;;
        racket) echo racket-sandbox ;;
        scala) echo scala-sandbox ;;
        bash) echo bash-sandbox ;;
        *) return 1 ;;
    esac
}

image_packages() {
    case "$1" in
        # The full standard library (json, statistics, decimal, sqlite3, ...) and
        # the zone data zoneinfo reads.
        python-sandbox) echo python3,tzdata ;;
        python-minimal-sandbox) echo python3-minimal ;;
        python-sci-sandbox) echo python3,python3-numpy,tzdata ;;
        cc-sandbox) echo gcc,g++,libc6-dev ;;
        # rustc-web: Debian's current Rust (1.85, edition 2024) beside the old
        # rustc 1.63. debootstrap does not resolve its virtual libc-dev.
        rust-sandbox) echo rustc-web,libc6-dev ;;
        go-sandbox) echo golang-go ;;
        # libjavatuples-java: MultiPL-E's Java imports org.javatuples.
        java-sandbox) echo default-jdk-headless,libjavatuples-java ;;
        node-sandbox) echo nodejs ;;
        typescript-sandbox) echo node-typescript ;;
        # System.Numerics is not part of mono-mcs's dependencies; MultiPL-E's C# uses it.
        mono-sandbox) echo mono-mcs,libmono-system-numerics4.0-cil ;;
        d-sandbox) echo gdc,libc6-dev ;;
        lua-sandbox) echo lua5.4,lua-unit ;;
        php-sandbox) echo php-cli ;;
        perl-sandbox) echo perl,libtest-deep-perl ;;
        r-sandbox) echo r-base-core ;;
        ruby-sandbox) echo ruby,ruby-test-unit ;;
        racket-sandbox) echo racket ;;
        scala-sandbox) echo scala ;;
        # bash is in minbase already; bc for the arithmetic shell programs do.
        bash-sandbox) echo bash,bc ;;
        *) return 1 ;;
    esac
}

# Node's type declarations for the TypeScript image, from npm (Debian has none):
# the release of tsc 4.8's time (Debian's node-typescript), so that its
# declarations parse. Programs that use Node's API (require, process) compile.
NODE_TYPES="@types/node@18.7.23"

# What an image holds beyond its Debian packages (npm packages, by name@version).
image_extras() {
    case "$1" in
        typescript-sandbox) echo "$NODE_TYPES" ;;
    esac
}

# The cache key of image NAME: the hash of its package list (and extras). A
# changed list is a new tarball and a new image (the old cache is never reused
# for it).
image_key() {
    printf '%s%s' "$(image_packages "$1")" "$(image_extras "$1")" | sha256sum | cut -c1-12
}

# Unpacks image NAME's npm extras into ROOTFS's /usr/lib/node_modules (the
# packages are fetched once by npm into $CACHE_DIR).
add_image_extras() {
    local name="$1" rootfs="$2" spec tgz target
    for spec in $(image_extras "$name"); do
        tgz="$CACHE_DIR/npm-$(printf '%s' "$spec" | tr '/@' '__').tgz"
        if [ ! -s "$tgz" ]; then
            command -v npm >/dev/null || { log "npm is needed to fetch $spec for $name"; return 1; }
            local packed
            packed="$(cd "$CACHE_DIR" && npm pack --silent "$spec")" || { log "npm pack $spec failed"; return 1; }
            mv "$CACHE_DIR/$packed" "$tgz"
        fi
        target="$rootfs/usr/lib/node_modules/${spec%@*}"
        mkdir -p "$target"
        tar -xzf "$tgz" -C "$target" --strip-components=1
    done
}

# --languages LIST (or PROGSCORE_LANGUAGES) -> LANGUAGES, space separated, checked.
parse_args() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --languages) [ $# -ge 2 ] || { log "--languages needs a LIST"; exit 2; }; LANGUAGES="$2"; shift 2 ;;
            --languages=*) LANGUAGES="${1#--languages=}"; shift ;;
            -h|--help) sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
            *) log "unknown argument: $1 (usage: setup.sh [--languages LIST])"; exit 2 ;;
        esac
    done
    # python is always built.
    local wanted=(python) lang
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
# tarball cached in $CACHE_DIR under its package key; prints its path.
build_rootfs_tarball() {
    local name="$1" packages="$2"
    local tarball="$CACHE_DIR/${name}-${IMAGE_TAG}-$(image_key "$name").tar"
    if [ -s "$tarball" ]; then
        echo "$tarball"
        return
    fi
    local rootfs="$CACHE_DIR/rootfs-${name}-${IMAGE_TAG}"
    local debootstrap_log="$CACHE_DIR/debootstrap-${name}.log"
    rm -rf "$rootfs"
    log "debootstrap bookworm (minbase + $packages) into $rootfs"
    # The mirror refuses a download now and then when many run at once: retry.
    local attempt
    for attempt in 1 2 3; do
        rm -rf "$rootfs"
        if debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" >"$debootstrap_log" 2>&1; then
            break
        fi
        if [ "$attempt" = 3 ]; then
            log "debootstrap of $name failed; see $debootstrap_log"
            tail -20 "$debootstrap_log" >&2
            return 1
        fi
        log "debootstrap of $name failed ($(grep -m1 '^E:' "$debootstrap_log" || echo 'see its log')); again"
        sleep $((attempt * 5))
    done
    add_image_extras "$name" "$rootfs" || return 1
    # Keep the image small: package caches, lists and docs are not needed to run programs.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
        "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc "$rootfs"/usr/share/man \
        "$rootfs"/usr/share/info
    tar -C "$rootfs" -cf "$tarball.partial" .
    mv "$tarball.partial" "$tarball"
    rm -rf "$rootfs"
    echo "$tarball"
}

# Image NAME: built from its cached tarball, imported as progscore/NAME:bookworm
# with its package key as a label (an image of another package list is
# rebuilt), pushed to the local registry (so it has a repo digest). Any extra
# arguments are `docker import -c` changes (e.g. a CMD). Logs how long it took.
ensure_sandbox_image() {
    local name="$1"; shift
    local local_image="progscore/${name}:${IMAGE_TAG}"
    local registry_image="${REGISTRY_ADDR}/${name}:${IMAGE_TAG}"
    local started=$SECONDS did="" key
    key="$(image_key "$name")"
    if [ "$(/usr/bin/docker image inspect "$local_image" --format '{{index .Config.Labels "progscore.packages"}}' 2>/dev/null)" != "$key" ]; then
        local packages tarball change changes=()
        packages="$(image_packages "$name")"
        tarball="$(build_rootfs_tarball "$name" "$packages")" || return 1
        for change in "$@"; do changes+=(-c "$change"); done
        log "docker import $local_image"
        /usr/bin/docker import \
            -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            -c 'ENV LANG=C.UTF-8' \
            -c "LABEL progscore.packages=$key" \
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
        log "image $name built in $((SECONDS - started))s ($(/usr/bin/docker image inspect --format '{{.Size}}' "$local_image") bytes)"
    fi
}

# The repo digest the engine knows for the registry copy of image NAME (empty
# when the registry's copy is not the local image's).
registry_digest() {
    local name="$1"
    local local_id pushed_id
    local_id="$(/usr/bin/docker image inspect "progscore/${name}:${IMAGE_TAG}" --format '{{.Id}}' 2>/dev/null || true)"
    pushed_id="$(/usr/bin/docker image inspect "${REGISTRY_ADDR}/${name}:${IMAGE_TAG}" --format '{{.Id}}' 2>/dev/null || true)"
    [ -n "$local_id" ] && [ "$local_id" = "$pushed_id" ] || return 0
    /usr/bin/docker image inspect "${REGISTRY_ADDR}/${name}:${IMAGE_TAG}" --format '{{range .RepoDigests}}{{println .}}{{end}}' 2>/dev/null \
        | grep "^${REGISTRY_ADDR}/${name}@sha256:" | head -1 || true
}

# Every image the languages need, the root filesystems built in parallel
# (debootstrap is mostly downloads and dpkg), then imported and pushed.
ensure_images() {
    local images=() lang name
    for lang in $LANGUAGES; do
        name="$(language_image "$lang")"
        case " ${images[*]:-} " in *" $name "*) ;; *) images+=("$name") ;; esac
    done
    # Only the builds started here are waited for (by pid: anything else
    # this shell started must not hold it up).
    local name_key builds=() pid live
    for name in "${images[@]}"; do
        # At most $IMAGE_JOBS at a time: more only make the mirror refuse downloads.
        while true; do
            live=()
            for pid in "${builds[@]}"; do
                kill -0 "$pid" 2>/dev/null && live+=("$pid")
            done
            builds=("${live[@]}")
            [ "${#builds[@]}" -lt "$IMAGE_JOBS" ] && break
            wait -n "${builds[@]}" || true
        done
        name_key="$(image_key "$name")"
        [ -s "$CACHE_DIR/${name}-${IMAGE_TAG}-${name_key}.tar" ] && continue
        if [ "$(/usr/bin/docker image inspect "progscore/${name}:${IMAGE_TAG}" --format '{{index .Config.Labels "progscore.packages"}}' 2>/dev/null)" != "$name_key" ]; then
            ( started=$SECONDS
              build_rootfs_tarball "$name" "$(image_packages "$name")" >/dev/null &&
                  log "root filesystem of $name ready in $((SECONDS - started))s" ) &
            builds+=("$!")
        fi
    done
    # Whether each one worked shows in its tarball (wait -n above took some statuses).
    for pid in "${builds[@]}"; do
        wait "$pid" || true
    done
    for name in "${images[@]}"; do
        case "$name" in
            python*) ensure_sandbox_image "$name" 'CMD ["python3"]' || exit 1 ;;
            *) ensure_sandbox_image "$name" || exit 1 ;;
        esac
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

# The profile of an interpreted language LANG: nothing to compile, the program
# at /sandbox/program appended to COMMAND (a TOML array); REASON is its comment.
interpreter_profile() {
    local lang="$1" digest="$2" command="$3" pids="$4" reason="$5"
    cat <<EOF
[profiles.${lang}]
backend = "docker"
image = "${digest}"
command = ${command}    # ${reason}
[profiles.${lang}.limits]
memory = "256MiB"
cpus = 1.0
pids = ${pids}
timeout = "10s"
output = "64KiB"
EOF
}

# C++ as contests build it, in the cc image pinned by DIGEST:
# - cpp-codeforces, cpp20-codeforces: Codeforces' compile line (-DONLINE_JUDGE
#   -O2, C++17 or C++20) and the stack unlimited (as Codeforces and open-r1's
#   package run programs: deep recursion is not a runtime error);
# - cpp-ioi: CMS's (-DEVAL -std=gnu++17 -O2) with the task's grader
#   (graders/grader.cpp or graders/stub.cpp, beside the program) linked in,
#   its headers found in graders/.
# The Piston dialect's `codeforces` and `cms_ioi` languages run on them.
contest_profiles() {
    local digest="$1"
    # sh raises the stack's soft limit to its hard one (the engine's default
    # hard limit is unlimited) and runs the program with its arguments.
    local unlimited_stack='["sh", "-c", "ulimit -s unlimited 2>/dev/null || ulimit -s \"$(ulimit -H -s)\"; exec /build/main \"$@\"", "main"]'
    # cpp-codeforces-file: file I/O, as old problems ask (see python-file).
    local file_io='["sh", "-c", "ulimit -s unlimited 2>/dev/null || ulimit -s \"$(ulimit -H -s)\"; cd /tmp && cat > input.txt && /build/main \"$@\" > /dev/null && exec cat output.txt", "main"]'
    local std name command
    for name in cpp-codeforces cpp20-codeforces cpp-codeforces-file; do
        std=c++17
        [ "$name" = cpp20-codeforces ] && std=c++20
        command="$unlimited_stack"
        [ "$name" = cpp-codeforces-file ] && command="$file_io"
        cat <<EOF
[profiles.${name}]
backend = "docker"
image = "${digest}"
source = "main.cpp"
compile = ["g++", "-DONLINE_JUDGE", "-O2", "-std=${std}", "-pipe", "-s", "-o", "/build/main", "/sandbox/main.cpp"]
command = ${command}
[profiles.${name}.compile_limits]
memory = "512MiB"
cpus = 1.0
pids = 32
timeout = "30s"
output = "64KiB"
tmp = "64MiB"
[profiles.${name}.limits]
memory = "256MiB"
cpus = 1.0
pids = 64
timeout = "10s"
output = "1MiB"                # tests' answers run to megabytes; a checker judges only a whole output
EOF
    done
    cat <<EOF
[profiles.cpp-ioi]
backend = "docker"
image = "${digest}"
source = "main.cpp"
compile = ["sh", "-c", "exec g++ -DEVAL -std=gnu++17 -O2 -pipe -s -I/sandbox/graders -o /build/main /sandbox/main.cpp \$(ls /sandbox/graders/grader.cpp /sandbox/graders/stub.cpp 2>/dev/null)"]
command = ${unlimited_stack}
[profiles.cpp-ioi.compile_limits]
memory = "512MiB"
cpus = 1.0
pids = 32
timeout = "60s"
output = "64KiB"
tmp = "64MiB"
[profiles.cpp-ioi.limits]
memory = "1GiB"                # IOI tasks allow 1 to 2 GiB; a task's own limit is the item's
cpus = 1.0
pids = 64
timeout = "10s"
output = "1MiB"
EOF
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
        contest_profiles "$digest"
        ;;
        rust) cat <<EOF
[profiles.rust]
backend = "docker"
image = "${digest}"
source = "main.rs"
# rustc-web 1.85, edition 2024 by default (let-else, is_some_and, ...).
compile = ["rustc", "--edition", "2024", "-O", "-C", "codegen-units=1", "-o", "/build/main", "/sandbox/main.rs"]
command = ["/build/main"]
[profiles.rust.compile_limits]
memory = "512MiB"              # rustc 1.85 + LLVM at -O: hello world peaks ~75MiB; headroom for bigger crates
cpus = 1.0
pids = 32                      # rustc's threads plus cc and ld as the linker (~10 at peak)
timeout = "60s"                # hello world takes ~0.8s; LLVM at -O is slow on big functions
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
        python|python-minimal|python-sci) cat <<EOF
[profiles.${lang}]
backend = "docker"
image = "${digest}"
command = ["python3", "-I"]    # -I: no user site, no PYTHON* variables, no script dir on sys.path
[profiles.${lang}.limits]
memory = "256MiB"
cpus = 1.0
pids = 64                      # as python always had; python-sci's numpy uses the single-threaded reference BLAS (no OpenBLAS: no Recommends)
timeout = "10s"
output = "64KiB"
EOF
        ;;
        go-test) cat <<EOF
[profiles.go-test]
backend = "docker"
image = "${digest}"
source = "main_test.go"        # a _test.go file (package x_test, func TestX), as go_test and MultiPL-E's Go are
# go test -c: the test binary is built once (vet's checks included, as go test
# runs them) and each case runs it. The same environment as go's, for the same reasons.
compile = ["env", "GOMAXPROCS=1", "GOCACHE=/tmp/go-cache", "HOME=/tmp", "CGO_ENABLED=0", "go", "test", "-c", "-o", "/build/main.test", "/sandbox/main_test.go"]
command = ["env", "GOMAXPROCS=1", "/build/main.test"]
[profiles.go-test.compile_limits]
memory = "512MiB"              # go test -c with vet peaks ~110MiB on a MultiPL-E file
cpus = 1.0
pids = 64                      # the go tool, vet, compile and link, each with a few threads
timeout = "60s"                # a test file takes ~4s: testing and its dependencies are compiled each time (no shared cache)
output = "64KiB"
tmp = "128MiB"                 # GOCACHE + the work dir: testing and its dependencies are compiled into it
[profiles.go-test.limits]
memory = "256MiB"
cpus = 1.0
pids = 64
timeout = "10s"
output = "64KiB"
EOF
        ;;
        java-problem) cat <<EOF
[profiles.java-problem]
backend = "docker"
image = "${digest}"
source = "Problem.java"        # MultiPL-E's Java: class Problem, importing org.javatuples (Debian's libjavatuples-java)
# As the java profile, plus javatuples on the class path and -ea: MultiPL-E's
# tests are assert statements, which the JVM skips without it.
compile = ["javac", "-J-XX:+UseSerialGC", "-J-XX:TieredStopAtLevel=1", "-J-Xmx256m", "-J-Xss8m", "-J-XX:-UsePerfData", "-cp", "/usr/share/java/javatuples.jar", "-d", "/build", "/sandbox/Problem.java"]
command = ["java", "-ea", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx128m", "-Xss8m", "-XX:-UsePerfData", "-XX:ActiveProcessorCount=1", "-cp", "/build:/usr/share/java/javatuples.jar", "Problem"]
[profiles.java-problem.compile_limits]
memory = "512MiB"              # as java's
cpus = 1.0
pids = 32                      # javac's JVM runs ~15 threads
timeout = "60s"
output = "64KiB"
tmp = "64MiB"
[profiles.java-problem.limits]
memory = "256MiB"              # 128MiB heap + metaspace, code cache, stacks
cpus = 1.0
pids = 64                      # the JVM starts ~10 threads
timeout = "10s"
output = "64KiB"
EOF
        ;;
        typescript) for name in typescript typescript-node; do
            # typescript: no declarations of Node's API, so programs declare
            # require themselves (MultiPL-E's 159 HumanEval items all write
            # `declare var require: any`, which Node's own declarations would
            # contradict). typescript-node: Node's type declarations
            # (@types/node, from npm: Debian has none), so programs that use
            # require and process as Node's API types them compile.
            local types=""
            [ "$name" = typescript-node ] && types='"--typeRoots", "/usr/lib/node_modules/@types", "--types", "node", '
            cat <<EOF
[profiles.${name}]
backend = "docker"
image = "${digest}"
source = "main.ts"
# tsc 4.8 (Debian's node-typescript) type-checks and emits /build/main.js;
# a type error is a compile error (--noEmitOnError), as MultiPL-E counts it.
# es2022: the language level node 18 runs.
compile = ["node", "--max-old-space-size=384", "/usr/bin/tsc", "--target", "es2022", "--module", "commonjs", "--skipLibCheck", "--noEmitOnError", ${types}"--outDir", "/build", "/sandbox/main.ts"]
command = ["node", "--max-old-space-size=128", "/build/main.js"]
[profiles.${name}.compile_limits]
memory = "512MiB"              # tsc peaks ~100MiB on hello world; its V8 heap is capped at 384MiB below the limit
cpus = 1.0
pids = 32                      # node's V8 and libuv threads (~11)
timeout = "60s"                # tsc starts slowly: ~3s for hello world
output = "64KiB"
tmp = "64MiB"
[profiles.${name}.limits]
memory = "256MiB"              # as javascript's: a 128MiB V8 heap
cpus = 1.0
pids = 64
timeout = "10s"
output = "64KiB"
EOF
        done
        ;;
        csharp) cat <<EOF
[profiles.csharp]
backend = "docker"
image = "${digest}"
source = "main.cs"
# mcs (Mono 6.8, C# 7). -d:DEBUG keeps Debug.Assert calls, which MultiPL-E's
# tests are. Mono wants a writable HOME (~/.mono): /tmp.
compile = ["env", "HOME=/tmp", "mcs", "-d:DEBUG", "-r:System.Numerics.dll", "-out:/build/main.exe", "/sandbox/main.cs"]
# A failed Debug.Assert under Mono prints nothing and the program goes on to
# exit 0. MONO_TRACE_LISTENER sends the failure's stack to stderr, which is
# kept in /tmp and passed on; an exit 0 whose stderr shows a Debug.Assert
# failure becomes exit 1, so the verdict rests on the exit as everywhere else.
command = ["sh", "-c", "MONO_TRACE_LISTENER=Console.Error mono /build/main.exe \\"\$@\\" 2>/tmp/stderr; status=\$?; cat /tmp/stderr >&2; if [ \$status = 0 ] && grep -q 'at System.Diagnostics.Debug.Assert' /tmp/stderr; then echo 'progscore: a Debug.Assert failed' >&2; exit 1; fi; exit \$status", "csharp"]
[profiles.csharp.compile_limits]
memory = "512MiB"              # mcs peaks ~30MiB on hello world (~0.4s)
cpus = 1.0
pids = 32                      # mono's GC and finalizer threads
timeout = "60s"
output = "64KiB"
tmp = "64MiB"
[profiles.csharp.limits]
memory = "256MiB"
cpus = 1.0
pids = 64
timeout = "10s"
output = "64KiB"
EOF
        ;;
        d) cat <<EOF
[profiles.d]
backend = "docker"
image = "${digest}"
source = "main.d"
# gdc 12 (D 2.100). -funittest: unittest blocks run before main, as D_ut and
# MultiPL-E's D (a unittest block and an empty main) expect.
compile = ["gdc", "-O2", "-funittest", "-o", "/build/main", "/sandbox/main.d"]
command = ["/build/main"]
[profiles.d.compile_limits]
memory = "512MiB"              # gdc peaks ~50MiB on hello world; Phobos templates take more
cpus = 1.0
pids = 32                      # gdc -> d21, as, collect2, ld
timeout = "60s"                # hello world takes ~0.6s
output = "64KiB"
tmp = "64MiB"                  # gdc's temporary .s/.o files
[profiles.d.limits]
memory = "256MiB"
cpus = 1.0
pids = 64
timeout = "10s"
output = "64KiB"
EOF
        ;;
        scala) cat <<EOF
[profiles.scala]
backend = "docker"
image = "${digest}"
source = "main.scala"
# scalac 2.11 writes a jar whose manifest names the one object with a main
# (MultiPL-E's Problem, or any other), and scala runs that jar. JAVA_OPTS as
# the java profile's JVMs (serial GC, C1 only, one CPU, no hsperfdata) with
# heaps below the limits.
compile = ["env", "JAVA_OPTS=-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xmx384m -Xss8m -XX:-UsePerfData -XX:ActiveProcessorCount=1", "scalac", "-d", "/build/main.jar", "/sandbox/main.scala"]
command = ["env", "JAVA_OPTS=-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xmx128m -Xss8m -XX:-UsePerfData -XX:ActiveProcessorCount=1", "scala", "/build/main.jar"]
[profiles.scala.compile_limits]
memory = "768MiB"              # scalac peaks ~130MiB on hello world; 384MiB heap + JVM overhead
cpus = 1.0
pids = 32                      # one JVM, ~15 threads
timeout = "60s"                # scalac takes ~4s for hello world (JVM start and the compiler's own classes)
output = "64KiB"
tmp = "64MiB"
[profiles.scala.limits]
memory = "256MiB"
cpus = 1.0
pids = 64
timeout = "10s"
output = "64KiB"
EOF
        ;;
        lua) interpreter_profile lua "${digest}" '["lua5.4"]' 64 "Lua 5.4; luaunit (Debian's lua-unit) on its path" ;;
        php) interpreter_profile php "${digest}" '["php"]' 64 "PHP 8.2 cli; no ini memory_limit (Debian's cli has none): the cgroup's limit ends a hog" ;;
        perl) interpreter_profile perl "${digest}" '["perl"]' 64 "Perl 5.36 with Test::Deep" ;;
        r) interpreter_profile r "${digest}" '["Rscript", "--vanilla"]' 64 "R 4.2: --vanilla reads no profile or site file and saves nothing" ;;
        ruby) interpreter_profile ruby "${digest}" '["ruby"]' 64 "Ruby 3.1 with test-unit (its tests run at exit)" ;;
        bash) cat <<EOF
[profiles.bash]
backend = "docker"
image = "${digest}"
command = ["bash"]    # bash 5.2 with coreutils, sed, grep, mawk and bc
[profiles.bash.limits]
memory = "256MiB"
cpus = 1.0
pids = 64
# A shell forks for most of its work, and the CPU waits of processes that
# ended are not measured: a fork loop's wall clock cannot prove its timeout
# (measured: 5.9 s of CPU in 10 s alone, undetermined). 10 s of CPU proves
# it whatever the load; the wall clock stops a sleeper.
cpu_time = "10s"
timeout = "20s"
output = "64KiB"
EOF
        ;;
        racket) cat <<EOF
[profiles.racket]
backend = "docker"
image = "${digest}"
source = "main.rkt"
# Racket 8.7 (CS). A failed rackunit check outside a test case prints and goes
# on; the handler set first makes it exit 1, so the verdict rests on the exit.
command = ["racket", "-l", "racket/base", "-l", "rackunit", "-e", "(let ([shown (current-check-handler)]) (current-check-handler (lambda (e) (shown e) (exit 1))))", "-u"]
[profiles.racket.limits]
memory = "256MiB"              # racket with rackunit at start peaks ~95MiB
cpus = 1.0
pids = 64
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

# The [languages] table: the names SandboxFusion and MultiPL-E give the
# languages built here, each naming its profile (a profile's own name works
# without an entry, so names equal to one are left out).
languages_table() {
    local line name profile
    printf '\n# Language names as SandboxFusion (nodejs, go_test, R, D_ut, ...) and\n'
    printf '# MultiPL-E (cs, rb, rkt, sh, ts, pl, js, rs, ...) spell them; a profile'"'"'s\n'
    printf '# own name works too. MultiPL-E'"'"'s go and java are go_test and java-problem\n'
    printf '# here: go and java are the SandboxFusion programs with a main.\n'
    printf '[languages]\n'
    for line in nodejs=javascript js=javascript go_test=go-test ts=typescript \
        cs=csharp sh=bash rs=rust R=r pl=perl D_ut=d rb=ruby rkt=racket \
        py=python python3=python; do
        name="${line%%=*}" profile="${line#*=}"
        case " $LANGUAGES " in *" $profile "*) printf '%s = "%s"\n' "$name" "$profile" ;; esac
    done
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

# File I/O, as old contest problems ask: the case's stdin becomes input.txt in
# the program's working folder (/tmp, writable), the program's stdout is
# dropped, and its output.txt is the case's stdout (a program that writes none
# fails: cat exits 1).
[profiles.python-file]
backend = "docker"
image = "${digest}"
command = ["sh", "-c", "cd /tmp && cat > input.txt && python3 -I \"\$@\" > /dev/null && exec cat output.txt", "main"]
[profiles.python-file.limits]
memory = "256MiB"
cpus = 1.0
pids = 64
timeout = "10s"
output = "1MiB"

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
        # python's profiles head the file (above).
        [ "$lang" != python ] || continue
        lang_digest="$(registry_digest "$(language_image "$lang")")"
        if [ -z "$lang_digest" ]; then
            log "no repo digest for the $lang image after push"
            exit 1
        fi
        printf '\n' >> "$tmp"
        language_profile "$lang" "$lang_digest" >> "$tmp"
    done
    languages_table >> "$tmp"
    # The daemonless WASI profile, pinned by scripts/setup-wasi.sh.
    if [ -s "$CACHE_DIR/wasi-profile.toml" ]; then
        printf '\n' >> "$tmp"
        cat "$CACHE_DIR/wasi-profile.toml" >> "$tmp"
    fi
    mv "$tmp" "$CONFIG_OUT"
    log "wrote $CONFIG_OUT (python image ${digest}; languages: ${LANGUAGES:-none})"
}

# A venv at $1 with $2 (a requirements file) installed, unless its stamp
# (the requirements it was made with) already matches.
install_venv() {
    local venv="$1" requirements="$2"
    if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
        python3 -c 'import ensurepip, venv' 2>/dev/null ||
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv >/dev/null
        rm -rf "$venv"
        python3 -m venv "$venv"
    fi
    "$venv/bin/pip" install -q -r "$requirements"
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
    install_venv "$venv" "$requirements"
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

# The Python package's test environment (maturin, pytest, mypy, and Ray for
# progscore.ray and its cluster tests): a cached venv, so that a second run
# installs nothing. scripts/test.sh builds the package into it.
PYTHON_VENV="$CACHE_DIR/venv"
ensure_python_test_env() {
    local requirements="$REPO_ROOT/host/python/requirements-test.txt"
    local stamp="$PYTHON_VENV/installed.txt"
    if cmp -s "$requirements" "$stamp" && "$PYTHON_VENV/bin/python" -c 'import ray, pytest' 2>/dev/null; then
        return
    fi
    log "installing the Python package's test environment (with Ray) into $PYTHON_VENV"
    install_venv "$PYTHON_VENV" "$requirements"
    cp "$requirements" "$stamp"
}

# The kernel's delay accounting: a program's block-I/O stalls (its binary
# paged in from a busy disk) are then measured and given back like CPU waits
# (see plugins/sandbox/src/timing.rs); without it a starved-looking timeout
# beside other programs has to be confirmed alone.
enable_delay_accounting() {
    local knob=/proc/sys/kernel/task_delayacct
    [ -w "$knob" ] || { log "no $knob: block-I/O stalls will not be measured"; return 0; }
    [ "$(cat "$knob")" = 1 ] || { echo 1 > "$knob" && log "kernel.task_delayacct turned on"; }
}

main() {
    parse_args "$@"
    need_root
    enable_delay_accounting
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
    ensure_python_test_env
    log "ready"
}

main "$@"
