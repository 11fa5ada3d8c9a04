#!/usr/bin/env bash
# Runs a second Docker engine beside the one scripts/setup.sh starts, on this
# same machine, for the engine-pool tests and benchmark. It has everything of
# its own (socket, data root, exec root, pid file, containerd and containerd
# namespaces, config file) so the first engine at /var/run/docker.sock never
# sees its containers, and no bridge or iptables rules (the sandboxes run with
# --network none; the first engine owns docker0 and the host's firewall).
#
#   second-engine.sh start          start it unless it answers; then make sure
#                                   it has the images progscore.toml pins
#   second-engine.sh stop [--kill]  SIGTERM (wait up to 20 s) or, with --kill,
#                                   SIGKILL to dockerd: a crash (its containerd
#                                   dies with it; the containers' shims and
#                                   the containers live on, as after a real
#                                   crash, until the next start)
#   second-engine.sh status         exit 0 when it answers, 1 otherwise
#
# The images come from the local registry of scripts/setup.sh (run it first),
# pulled by the digests the config ($PROGSCORE_CONFIG, else progscore.toml at
# the repo root) pins.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONFIG="${PROGSCORE_CONFIG:-$REPO_ROOT/progscore.toml}"
SOCKET="/run/docker-second.sock"
HOST="unix://$SOCKET"
DATA_ROOT="/var/lib/docker-second"
EXEC_ROOT="/run/docker-second"
PIDFILE="/run/docker-second.pid"
DAEMON_CONFIG="/etc/docker/second.json"
KEY_FILE="$DATA_ROOT/key.json"
FIRST_DAEMON_CONFIG="/etc/docker/daemon.json"
DOCKERD_LOG="/var/log/progscore-dockerd-second.log"
# It also answers over TCP with mutual TLS on the loopback, as a remote
# engine would (`tcp://` engines get the program through volumes, not bind
# mounts): the CA, its server certificate and a client certificate.
TLS_ADDR="127.0.0.1:2376"
TLS_DIR="$DATA_ROOT/tls"
# And over SSH, as `docker -H ssh://` reaches an engine: an sshd of its own on
# the loopback (key login for root only), whose sessions run `docker system
# dial-stdio` against this engine (bollard's SSH transport does that).
SSH_PORT=22
SSH_DIR="$DATA_ROOT/ssh"
SSHD_PIDFILE="/run/progscore-second-sshd.pid"
REGISTRY_ADDR="127.0.0.1:5000"
# /usr/bin/docker: the Debian client that matches the engine's API (another
# docker may come first on PATH).
DOCKER="/usr/bin/docker"
DOCKERD="/usr/sbin/dockerd"
START_TIMEOUT_HALF_SECONDS=60   # ~30 s
STOP_TIMEOUT_HALF_SECONDS=40    # ~20 s

log() { printf '[second-engine] %s\n' "$*" >&2; }

now_ms() { date +%s%3N; }

# "N.NNN s" since START (from now_ms).
since() {
    local ms=$(($(now_ms) - $1))
    printf '%d.%03d s' $((ms / 1000)) $((ms % 1000))
}

need_root() {
    if [ "$(id -u)" != 0 ]; then
        log "must run as root (it starts dockerd)"
        exit 1
    fi
}

second() { "$DOCKER" -H "$HOST" "$@"; }

# Answers the API. `timeout`: a hung engine must not hang the caller.
second_up() { timeout 10 "$DOCKER" -H "$HOST" info >/dev/null 2>&1; }

# Answers over TCP with TLS, with the client certificate.
tls_up() {
    timeout 10 "$DOCKER" --tlsverify --tlscacert "$TLS_DIR/ca.pem" \
        --tlscert "$TLS_DIR/cert.pem" --tlskey "$TLS_DIR/key.pem" \
        -H "tcp://$TLS_ADDR" info >/dev/null 2>&1
}

# Key login as root over 127.0.0.1:$SSH_PORT, with its own host key, client
# key and known_hosts line, all under $SSH_DIR.
ssh_args() {
    printf '%s\n' -p "$SSH_PORT" -i "$SSH_DIR/id_ed25519" -o BatchMode=yes \
        -o "UserKnownHostsFile=$SSH_DIR/known_hosts" -o StrictHostKeyChecking=yes
}

ssh_up() {
    local args
    mapfile -t args < <(ssh_args)
    timeout 10 ssh "${args[@]}" root@127.0.0.1 docker version >/dev/null 2>&1
}

ensure_ssh() {
    local started
    started="$(now_ms)"
    if ! command -v sshd >/dev/null 2>&1 && [ ! -x /usr/sbin/sshd ]; then
        log "installing openssh-server (the engine is also reached over SSH)"
        # Installed, not started as a system service: this script runs its own.
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server >/dev/null ||
            { rm -f /usr/sbin/policy-rc.d; apt-get update -qq;
              printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d;
              DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server >/dev/null; }
        rm -f /usr/sbin/policy-rc.d
    fi
    mkdir -p "$SSH_DIR" /run/sshd
    chmod 700 "$SSH_DIR"
    [ -s "$SSH_DIR/host_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$SSH_DIR/host_key"
    [ -s "$SSH_DIR/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$SSH_DIR/id_ed25519"
    cp "$SSH_DIR/id_ed25519.pub" "$SSH_DIR/authorized_keys"
    # Port 22: bollard's SSH transport takes no port (another one would need
    # a Host alias in ~/.ssh/config), and known_hosts names port 22 plainly.
    printf '127.0.0.1 %s\n' "$(cut -d' ' -f1,2 "$SSH_DIR/host_key.pub")" > "$SSH_DIR/known_hosts"
    cat > "$SSH_DIR/sshd_config" <<CONFIG
Port $SSH_PORT
ListenAddress 127.0.0.1
HostKey $SSH_DIR/host_key
PidFile $SSHD_PIDFILE
AuthorizedKeysFile $SSH_DIR/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
SetEnv DOCKER_HOST=$HOST PATH=/usr/bin:/bin:/usr/sbin:/sbin
CONFIG
    if ssh_up; then
        return
    fi
    if [ -s "$SSHD_PIDFILE" ]; then
        kill "$(cat "$SSHD_PIDFILE")" 2>/dev/null || true
        sleep 0.2
    fi
    /usr/sbin/sshd -f "$SSH_DIR/sshd_config" -E /var/log/progscore-second-sshd.log
    local i
    for ((i = 0; i < 20; i++)); do
        if ssh_up; then
            log "sshd answers on 127.0.0.1:$SSH_PORT (docker over SSH) after $(since "$started")"
            return
        fi
        sleep 0.5
    done
    log "sshd on 127.0.0.1:$SSH_PORT did not come up; last lines of /var/log/progscore-second-sshd.log:"
    tail -15 /var/log/progscore-second-sshd.log >&2 || true
    exit 1
}

# A CA, a server certificate for 127.0.0.1 and a client certificate, made
# once (10 years; nothing leaves this machine).
ensure_tls() {
    [ -s "$TLS_DIR/cert.pem" ] && [ -s "$TLS_DIR/server-cert.pem" ] && return
    local started
    started="$(now_ms)"
    mkdir -p "$TLS_DIR"
    chmod 700 "$TLS_DIR"
    (
        cd "$TLS_DIR"
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=progscore test CA" \
            -keyout ca-key.pem -out ca.pem 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
            -keyout server-key.pem -out server.csr 2>/dev/null
        printf 'subjectAltName = IP:127.0.0.1\nextendedKeyUsage = serverAuth\n' > server.ext
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
            -days 3650 -extfile server.ext -out server-cert.pem 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -subj "/CN=progscore" \
            -keyout key.pem -out client.csr 2>/dev/null
        printf 'extendedKeyUsage = clientAuth\n' > client.ext
        openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
            -days 3650 -extfile client.ext -out cert.pem 2>/dev/null
        rm -f server.csr client.csr server.ext client.ext
    )
    log "made TLS certificates in $TLS_DIR in $(since "$started")"
}

# The pid of the second dockerd when it is alive (a zombie or a recycled pid
# that is not our dockerd does not count), else nothing. The pid file is the
# only handle: no matching by process name, which would also find the first.
dockerd_pid() {
    local pid state
    [ -s "$PIDFILE" ] || return 0
    pid="$(cat "$PIDFILE")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 0
    state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)"
    case "$state" in ''|Z|X) return 0 ;; esac
    if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "--pidfile $PIDFILE"; then
        echo "$pid"
    fi
}

# The containerd dockerd started for itself (it writes its pid under the
# exec root), when it is alive: after a SIGKILL of dockerd it lives on.
containerd_pid() {
    local pidfile="$EXEC_ROOT/containerd/containerd.pid" pid state
    [ -s "$pidfile" ] || return 0
    pid="$(cat "$pidfile")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 0
    state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)"
    case "$state" in ''|Z|X) return 0 ;; esac
    if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$EXEC_ROOT/containerd"; then
        echo "$pid"
    fi
}

# /etc/docker/second.json: the first engine's daemon.json (its runtimes -
# runsc with --network=none -, insecure registries, cgroup driver, log
# settings...) minus what must differ between the two engines or is given as a
# flag (dockerd refuses a setting given both ways). Without jq, the runtimes
# setup.sh registers. Plus a key file of its own: dockerd 20.10 derives the
# engine ID (`docker info` ID) from /etc/docker/key.json, so both engines
# would report the same ID, as two real hosts never do.
# Prints "changed" when it rewrote the file.
write_daemon_config() {
    local want
    if command -v jq >/dev/null && [ -s "$FIRST_DAEMON_CONFIG" ]; then
        want="$(jq --arg key "$KEY_FILE" \
            'del(.hosts, ."data-root", .graph, ."exec-root", .pidfile,
                 .containerd, ."containerd-namespace", ."containerd-plugins-namespace",
                 .bridge, .bip, ."fixed-cidr", ."fixed-cidr-v6", ."default-gateway",
                 ."default-gateway-v6", .iptables, .ip6tables, ."default-address-pools",
                 .tls, .tlsverify, ."metrics-addr", ."live-restore", ."deprecated-key-path")
             + {"deprecated-key-path": $key}' "$FIRST_DAEMON_CONFIG")"
    else
        want='{
  "runtimes": {
    "runsc": { "path": "/usr/local/lib/progscore/runsc-traced", "runtimeArgs": ["--network=none"] }
  },
  "insecure-registries": ["127.0.0.1:5000"],
  "deprecated-key-path": "'"$KEY_FILE"'"
}'
    fi
    if [ ! -f "$DAEMON_CONFIG" ] || [ "$(cat "$DAEMON_CONFIG")" != "$want" ]; then
        mkdir -p "$(dirname "$DAEMON_CONFIG")"
        printf '%s\n' "$want" > "$DAEMON_CONFIG.tmp"
        mv "$DAEMON_CONFIG.tmp" "$DAEMON_CONFIG"
        echo changed
    fi
}

start_dockerd() {
    local started pid
    started="$(now_ms)"
    # A dockerd of ours that is alive but does not answer yet is starting (or
    # hung): wait for it rather than start another (it would refuse the pid file).
    pid="$(dockerd_pid)"
    if [ -z "$pid" ]; then
        # A pid file left by a killed dockerd: dockerd itself only refuses a
        # pid file whose process exists, but a zombie still exists.
        rm -f "$PIDFILE"
        # dockerd adopts the containerd whose pid it finds in its exec root
        # if that pid exists - a zombie does (nothing here reaps at once:
        # dockerd gives its containerd Pdeathsig=SIGKILL, so after a SIGKILL
        # of dockerd the containerd dies too and may linger as a zombie).
        # dockerd would then wait ~15 s for the zombie's socket and give up.
        local orphan
        orphan="$(containerd_pid)"
        if [ -n "$orphan" ]; then
            # dockerd may have been killed a moment ago (by a test, not by
            # `stop --kill`, which waits): give its containerd time to die.
            wait_gone "$orphan" 4 || true
            orphan="$(containerd_pid)"
        fi
        if [ -n "$orphan" ]; then
            log "containerd $orphan of a dead dockerd is still running: dockerd will adopt it"
        else
            rm -f "$EXEC_ROOT/containerd/containerd.pid"
        fi
        mkdir -p "$DATA_ROOT" "$EXEC_ROOT"
        log "starting dockerd on $SOCKET (log: $DOCKERD_LOG)"
        printf '\n===== %s second-engine.sh start =====\n' "$(date -Is)" >> "$DOCKERD_LOG"
        # setsid + nohup, stdin from /dev/null, output to the log: the engine
        # outlives this script and the shell (or test) that ran it, and holds
        # none of the caller's pipes open.
        setsid nohup "$DOCKERD" \
            --config-file "$DAEMON_CONFIG" \
            --host "$HOST" \
            --host "tcp://$TLS_ADDR" \
            --tlsverify \
            --tlscacert "$TLS_DIR/ca.pem" \
            --tlscert "$TLS_DIR/server-cert.pem" \
            --tlskey "$TLS_DIR/server-key.pem" \
            --data-root "$DATA_ROOT" \
            --exec-root "$EXEC_ROOT" \
            --pidfile "$PIDFILE" \
            --containerd-namespace progscore-second \
            --containerd-plugins-namespace progscore-second-plugins \
            --bridge none \
            --iptables=false \
            --ip6tables=false \
            >>"$DOCKERD_LOG" 2>&1 </dev/null &
        pid=$!
    else
        log "dockerd $pid is running but does not answer yet: waiting for it"
    fi
    local i
    for ((i = 0; i < START_TIMEOUT_HALF_SECONDS; i++)); do
        if second_up; then
            log "dockerd $(dockerd_pid) answers on $SOCKET after $(since "$started")"
            return
        fi
        # Gone already (bad flag, config error): no point waiting.
        if ! kill -0 "$pid" 2>/dev/null; then
            break
        fi
        sleep 0.5
    done
    log "the second dockerd did not come up in $(since "$started"); last lines of $DOCKERD_LOG:"
    tail -25 "$DOCKERD_LOG" >&2
    exit 1
}

# The distinct registry images the config pins by digest, of its profiles
# with backend = "docker" (the others never reach an engine). One per line.
pinned_images() {
    awk -v registry="$REGISTRY_ADDR" '
        function value(line) { sub(/^[^=]*=[ \t]*"/, "", line); sub(/".*$/, "", line); return line }
        /^\[/ {
            profile = ""
            if (match($0, /^\[profiles\.[^].]+\]/)) profile = substr($0, 11, RLENGTH - 11)
            next
        }
        profile != "" && /^backend[ \t]*=/ { backend[profile] = value($0) }
        profile != "" && /^image[ \t]*=/   { image[profile] = value($0) }
        END {
            for (p in image)
                if (backend[p] == "docker" && index(image[p], registry "/") == 1 && image[p] ~ /@sha256:[0-9a-f]+$/ && !(image[p] in seen)) {
                    seen[image[p]] = 1
                    print image[p]
                }
        }' "$CONFIG" | sort
}

# Image ids (sha256:...) the config pins for docker profiles: they cannot be
# pulled, but pulling the same image by digest gives the same id.
id_pinned_images() {
    awk '
        /^\[/ { profile = ""; if (match($0, /^\[profiles\.[^].]+\]/)) profile = substr($0, 11, RLENGTH - 11); next }
        profile != "" && /^image[ \t]*=[ \t]*"sha256:[0-9a-f]+"/ { s = $0; sub(/^[^"]*"/, "", s); sub(/".*$/, "", s); print s }
    ' "$CONFIG" | sort -u
}

ensure_images() {
    local started ref pulled=0 present=0
    started="$(now_ms)"
    if [ ! -s "$CONFIG" ]; then
        log "no config at $CONFIG (run scripts/setup.sh): no images to load"
        return
    fi
    local refs
    refs="$(pinned_images)"
    for ref in $refs; do
        if second image inspect "$ref" >/dev/null 2>&1; then
            present=$((present + 1))
            continue
        fi
        local one
        one="$(now_ms)"
        log "pulling $ref"
        if ! second pull -q "$ref" >/dev/null; then
            log "could not pull $ref into the second engine (is the registry of scripts/setup.sh up at $REGISTRY_ADDR?)"
            exit 1
        fi
        pulled=$((pulled + 1))
        log "pulled ${ref%@*} in $(since "$one")"
    done
    local id
    for id in $(id_pinned_images); do
        if ! second image inspect "$id" >/dev/null 2>&1; then
            log "note: image $id (pinned by id in $CONFIG) is not in the second engine"
        fi
    done
    log "images: $present present, $pulled pulled, in $(since "$started")"
}

cmd_start() {
    need_root
    local started
    started="$(now_ms)"
    local changed
    changed="$(write_daemon_config)"
    ensure_tls
    if second_up && ! tls_up; then
        # Started before it answered over TLS too (an older version of this
        # script): restarted with every listener.
        log "up on $SOCKET but not on tcp://$TLS_ADDR: restarting it"
        cmd_stop
    fi
    if second_up; then
        if [ -n "$changed" ]; then
            # Runtimes and registries are reloaded on SIGHUP, as setup.sh does
            # for the first engine.
            log "wrote $DAEMON_CONFIG: reloading the running engine"
            kill -HUP "$(dockerd_pid)" 2>/dev/null || true
            sleep 1
        else
            log "already up on $SOCKET"
        fi
    else
        [ -z "$changed" ] || log "wrote $DAEMON_CONFIG"
        start_dockerd
    fi
    ensure_images
    ensure_ssh
    log "start: ready in $(since "$started")"
}

cmd_stop() {
    need_root
    local signal=TERM
    case "${1:-}" in
        "") ;;
        --kill) signal=KILL ;;
        *) log "unknown argument: $1 (usage: second-engine.sh stop [--kill])"; exit 2 ;;
    esac
    local started pid
    started="$(now_ms)"
    pid="$(dockerd_pid)"
    if [ -z "$pid" ]; then
        local orphan
        orphan="$(containerd_pid)"
        if [ "$signal" = TERM ] && [ -n "$orphan" ]; then
            # Left by a dockerd that was killed: a clean stop takes it down
            # too (a start would have adopted it).
            log "stopping containerd $orphan left by a killed dockerd"
            kill -TERM "$orphan" 2>/dev/null || true
            wait_gone "$orphan" || kill -KILL "$orphan" 2>/dev/null || true
        fi
        log "already stopped"
        return
    fi
    if [ "$signal" = KILL ]; then
        # A crash: SIGKILL to dockerd only. Its containerd follows it (dockerd
        # starts it with Pdeathsig=SIGKILL); the shims and their containers
        # live on, as after a real crash, until a start restores them.
        local containerd
        containerd="$(containerd_pid)"
        kill -KILL "$pid"
        wait_gone "$pid" || true
        if [ -n "$containerd" ]; then
            wait_gone "$containerd" 4 || true
            containerd="$(containerd_pid)"
        fi
        log "killed dockerd $pid (SIGKILL) in $(since "$started"); containerd: ${containerd:-gone too}; $(shim_count) shims left running"
        return
    fi
    # SIGTERM: dockerd stops its containers and its containerd, then exits.
    kill -TERM "$pid"
    if ! wait_gone "$pid"; then
        log "dockerd $pid still running after ~20 s of SIGTERM; last lines of $DOCKERD_LOG:"
        tail -15 "$DOCKERD_LOG" >&2
        exit 1
    fi
    log "stopped dockerd $pid in $(since "$started")"
}

# Waits up to ~20 s (or HALF_SECONDS/2 s) for PID to be gone or a zombie;
# 1 if it is not.
wait_gone() {
    local pid="$1" half_seconds="${2:-$STOP_TIMEOUT_HALF_SECONDS}" i state
    for ((i = 0; i < half_seconds; i++)); do
        state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)"
        case "$state" in ''|Z|X) return 0 ;; esac
        sleep 0.5
    done
    return 1
}

# The containerd shims of the second engine's containers (they carry its
# containerd namespace on their command line).
shim_count() {
    local n=0 cmdline
    for cmdline in /proc/[0-9]*/cmdline; do
        if tr '\0' ' ' < "$cmdline" 2>/dev/null | grep -q -- "^/usr/bin/containerd-shim-runc-v2 -namespace progscore-second "; then
            n=$((n + 1))
        fi
    done
    echo "$n"
}

cmd_status() {
    if second_up; then
        echo "$HOST: up (dockerd $(dockerd_pid))"
        return 0
    fi
    echo "$HOST: down"
    return 1
}

main() {
    local command="${1:-}"
    [ $# -eq 0 ] || shift
    case "$command" in
        start) [ $# -eq 0 ] || { log "start takes no arguments"; exit 2; }; cmd_start ;;
        stop) cmd_stop "$@" ;;
        status) cmd_status ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" ;;
        *) log "usage: second-engine.sh start | stop [--kill] | status"; exit 2 ;;
    esac
}

main "$@"
