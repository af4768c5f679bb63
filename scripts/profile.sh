#!/usr/bin/env bash
# A CPU profile of the worker's isolate over HITL cycles (bench/profile.mjs), on a
# release build of the test build that keeps the wasm's function names (no wasm-opt), so
# the profile names helix-edge's functions. BENCH_SESSIONS sets the cycles (default 100);
# PROFILE_JSON keeps the raw profile (loads in Chrome DevTools).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bootstrap.sh

worker-build --release --features test-routes
# scripts/build.sh (wrangler dev's [build] step) finds this build up to date and keeps it.
echo "test-routes release" > build/.features
node --experimental-websocket bench/profile.mjs
# The next scripts/build.sh builds the optimised bundle again.
rm -f build/.features
