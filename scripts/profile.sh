#!/usr/bin/env bash
# A CPU profile of the worker's isolate over HITL cycles (bench/profile.mjs), on a
# release build of the test flavour that keeps the wasm's function names (no wasm-opt),
# so the profile names helix-edge's functions. BENCH_SESSIONS sets the cycles (default 100);
# PROFILE_JSON keeps the raw profile (loads in Chrome DevTools).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bootstrap.sh

# Into the test flavour's artifact (the harness starts it with no build step); the next
# scripts/artifacts.sh builds the optimised one again.
worker-build --release --out-dir target/artifacts/test --features test-flavour
rm -f target/artifacts/test/.recipe
node --experimental-websocket bench/profile.mjs
