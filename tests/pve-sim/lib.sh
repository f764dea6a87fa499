# tests/pve-sim/lib.sh - start and stop the Proxmox VE API simulator from a
# test script. Source it from bash:
#
#   . "$TOP/tests/pve-sim/lib.sh"
#   trap pve_sim_stop EXIT
#   pve_sim_start 8 "$world_json" --task-ms 50 || exit 1
#   curl --cacert "$PVE_SIM_CA" -H "Authorization: PVEAPIToken=..." "$PVE_SIM_URL/version"
#
# pve_sim_start VERSION WORLD_JSON [extra pve_sim.py options...]
#   VERSION is 8 or 9 (selects $DATA_DIR/proxmox/pve-8.4- or
#   pve-9.1-apischema.json, DATA_DIR defaulting to tests/data of this tree;
#   PVE_SIM_SCHEMA overrides). WORLD_JSON is a file
#   name or the JSON text itself. Makes a CA and a server certificate for
#   127.0.0.1/localhost in a temp dir, starts the simulator on 127.0.0.1:0
#   and waits (up to 20 s) for its port. Exports:
#     PVE_SIM_URL          https://127.0.0.1:PORT/api2/json
#     PVE_SIM_BASE         https://127.0.0.1:PORT (for the /_sim/ endpoints)
#     PVE_SIM_PORT         the port
#     PVE_SIM_CA           the CA certificate (PEM) that signed the server cert
#     PVE_SIM_CERT         the server certificate (PEM)
#     PVE_SIM_FINGERPRINT  SHA-256 of the server cert, AA:BB:... (upper case)
#     PVE_SIM_PID          the simulator's pid
#     PVE_SIM_DIR          the temp dir (certs, world, state/, sim.log)
#   Returns non-zero (and prints the log) when the simulator does not come up.
#
# pve_sim_stop
#   Stops the simulator (SIGTERM, then SIGKILL after 5 s) and removes
#   PVE_SIM_DIR. Safe to call twice and from an EXIT trap.
#
# pve_sim_token_file SECRETLINE FILE
#   Writes SECRETLINE (e.g. "sandboxctl@pve!ctl=5f0c...") to FILE, mode 0600.
#
# pve_sim_ctl METHOD WHAT [JSON]
#   Calls a control endpoint (/_sim/WHAT) and prints the answer, e.g.
#   pve_sim_ctl POST faults '{"path":"/clone$","kind":"task_fail"}'.

PVE_SIM_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

pve_sim_start() {
    local version=$1 world=$2 schema dir i
    shift 2
    case $version in
    8) schema=${PVE_SIM_SCHEMA:-${DATA_DIR:-$PVE_SIM_LIB_DIR/../data}/proxmox/pve-8.4-apischema.json} ;;
    9) schema=${PVE_SIM_SCHEMA:-${DATA_DIR:-$PVE_SIM_LIB_DIR/../data}/proxmox/pve-9.1-apischema.json} ;;
    *)
        echo "pve_sim_start: VERSION must be 8 or 9, not '$version'" >&2
        return 2
        ;;
    esac
    if [ ! -r "$schema" ]; then
        echo "pve_sim_start: schema $schema not readable" >&2
        return 2
    fi
    dir=$(mktemp -d "${TMPDIR:-/tmp}/pve-sim.XXXXXX") || return 1
    PVE_SIM_DIR=$dir
    export PVE_SIM_DIR
    if [ -f "$world" ]; then
        cp "$world" "$dir/world.json"
    else
        printf '%s\n' "$world" >"$dir/world.json"
    fi
    if ! _pve_sim_certs "$dir" >"$dir/openssl.log" 2>&1; then
        echo "pve_sim_start: making the certificates failed:" >&2
        cat "$dir/openssl.log" >&2
        return 1
    fi
    python3 "$PVE_SIM_LIB_DIR/pve_sim.py" --schema "$schema" --pve "$version" \
        --world "$dir/world.json" --cert "$dir/server.pem" --key "$dir/server.key" \
        --listen 127.0.0.1:0 --port-file "$dir/port" --state-dir "$dir/state" "$@" \
        >"$dir/sim.log" 2>&1 &
    PVE_SIM_PID=$!
    export PVE_SIM_PID
    for ((i = 0; i < 200; i++)); do
        [ -s "$dir/port" ] && break
        if ! kill -0 "$PVE_SIM_PID" 2>/dev/null; then
            break
        fi
        sleep 0.1
    done
    if [ ! -s "$dir/port" ]; then
        echo "pve_sim_start: the simulator did not come up; its log:" >&2
        cat "$dir/sim.log" >&2
        return 1
    fi
    PVE_SIM_PORT=$(cat "$dir/port")
    PVE_SIM_BASE=https://127.0.0.1:$PVE_SIM_PORT
    PVE_SIM_URL=$PVE_SIM_BASE/api2/json
    PVE_SIM_CA=$dir/ca.pem
    PVE_SIM_CERT=$dir/server.pem
    PVE_SIM_FINGERPRINT=$(openssl x509 -in "$dir/server.pem" -noout -fingerprint -sha256 | sed 's/^.*=//')
    export PVE_SIM_PORT PVE_SIM_BASE PVE_SIM_URL PVE_SIM_CA PVE_SIM_CERT PVE_SIM_FINGERPRINT
}

# _pve_sim_certs DIR: a CA and a server certificate for 127.0.0.1 and localhost.
_pve_sim_certs() {
    local d=$1
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=pve-sim test CA" \
        -keyout "$d/ca.key" -out "$d/ca.pem" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" &&
        openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
            -keyout "$d/server.key" -out "$d/server.csr" &&
        printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=CA:FALSE" \
            "keyUsage=digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" >"$d/server.ext" &&
        openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
            -days 2 -out "$d/server.pem" -extfile "$d/server.ext"
}

pve_sim_stop() {
    local i
    if [ -n "${PVE_SIM_PID:-}" ]; then
        kill -TERM "$PVE_SIM_PID" 2>/dev/null
        for ((i = 0; i < 50; i++)); do
            kill -0 "$PVE_SIM_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$PVE_SIM_PID" 2>/dev/null
        wait "$PVE_SIM_PID" 2>/dev/null
        PVE_SIM_PID=
    fi
    if [ -n "${PVE_SIM_DIR:-}" ] && [ -d "$PVE_SIM_DIR" ]; then
        rm -rf "$PVE_SIM_DIR"
        PVE_SIM_DIR=
    fi
}

pve_sim_token_file() {
    (umask 077 && printf '%s\n' "$1" >"$2")
}

pve_sim_ctl() {
    local method=$1 what=$2 body=${3:-}
    if [ -n "$body" ]; then
        curl -sS --cacert "$PVE_SIM_CA" -X "$method" -H 'Content-Type: application/json' \
            --data-binary "$body" "$PVE_SIM_BASE/_sim/$what"
    else
        curl -sS --cacert "$PVE_SIM_CA" -X "$method" "$PVE_SIM_BASE/_sim/$what"
    fi
}
