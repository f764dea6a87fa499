#!/usr/bin/env bash
# quickstart.sh - from a fresh Debian 12 machine (as root) to a built egressd.
#
# Installs the build dependencies with apt-get and builds a release build in
# build/release.  The daemon itself (proxy/) is not part of the tree yet: for
# now this builds the parts that exist (the sni library and its bench), runs
# the ClientHello bench once so you can see it work, and says so.  Once egressd
# exists this script starts it on 127.0.0.1:3128 with the `balanced` preset and
# metrics on 127.0.0.1:9464.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
SHARED_DIR=${SHARED_DIR:-$top/../shared}

deploy/install-deps.sh
if [ ! -f build/release/build.ninja ]; then
    meson setup build/release --buildtype=release
fi
ninja -C build/release

cat <<MSG

Built in build/release:
  sni/libsni.a          the TLS ClientHello parser (sni/README.md)
  bench/bench_sni       ns per parse on real ClientHellos

egressd (the proxy daemon) is not built yet, so there is nothing to start.
MSG

if [ -d "$SHARED_DIR/data/clienthello" ]; then
    echo
    build/release/bench/bench_sni -n 20000 -r 5 "$SHARED_DIR/data/clienthello"
fi
echo
echo "To run the whole test suite: tests/run.sh"
