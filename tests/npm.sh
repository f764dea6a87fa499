# tests/npm.sh - the one way the integration scripts install pinned npm
# packages: source it, then
#
#   npm_install_pinned DIR SPEC...
#       install the pinned SPECs (name@version) into DIR once: DIR/installed
#       names what is there, and a second call with the same SPECs asks npm
#       nothing; under a lock, so scripts run side by side share one
#       install.  Call it before entering a network namespace: npm reaches
#       the registry only outside.  npm uses this machine's own settings
#       (registry, cafile) for the install alone; node reads that cafile
#       only through NODE_EXTRA_CA_CERTS, which the suite clears, so it is
#       handed over for the install.  0 when DIR holds exactly the SPECs.

npm_install_pinned() {
    local dir=$1 want cafile
    shift
    want="$*"
    mkdir -p "$dir" || return 1
    (
        flock 9
        if [ "$(cat "$dir/installed" 2>/dev/null)" != "$want" ]; then
            cafile=$(npm config get cafile 2>/dev/null)
            case $cafile in null | undefined | "") cafile=${NODE_EXTRA_CA_CERTS:-} ;; esac
            NODE_EXTRA_CA_CERTS=$cafile npm install --prefix "$dir" --no-audit --no-fund \
                --loglevel=error "$@" >&2 && echo "$want" >"$dir/installed"
        fi
    ) 9>"$dir/.lock"
    [ "$(cat "$dir/installed" 2>/dev/null)" = "$want" ]
}
