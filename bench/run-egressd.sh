#!/usr/bin/env bash
# bench/run-egressd.sh - egressd beside a direct connection to the sink only:
# bench/run.sh with BENCH_PROXIES="direct egressd" (see there for the
# workloads, --smoke and the BENCH_* knobs).
#
#   bench/run-egressd.sh [--smoke] [BUILD_DIR]
BENCH_PROXIES="direct egressd" exec "$(dirname "$0")/run.sh" "$@"
