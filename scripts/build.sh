#!/usr/bin/env bash
# The wrangler [build] command: builds the worker bundle into build/ with worker-build.
# Skips the build when build/ is newer than every input, so restarts of `wrangler dev`
# (and the end-to-end suite's restarts) start in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bootstrap.sh

# HELIX_BUILD_FEATURES: cargo features of the bundle (scripts/test.sh: test-routes).
# Unset, `wrangler dev` (which sets WRANGLER_COMMAND for its build) builds the demo
# agents in (`dev-agents`) with the quick `wasm-dev` profile (an edit rebuilds in
# seconds); `wrangler deploy` builds the production bundle without them, `release`.
# HELIX_BUILD_PROFILE overrides the profile (`release` or `wasm-dev`).
if [ -z "${HELIX_BUILD_FEATURES+set}" ] && [ "${WRANGLER_COMMAND:-}" = dev ]; then
  features=dev-agents
  profile="${HELIX_BUILD_PROFILE:-wasm-dev}"
else
  features="${HELIX_BUILD_FEATURES:-}"
  profile="${HELIX_BUILD_PROFILE:-release}"
fi
out=build/worker/shim.mjs
stamp=build/.features
if [ -f "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$features $profile" ] &&
  [ -z "$(find src crates .cargo Cargo.toml Cargo.lock -newer "$out" -print -quit)" ]; then
  echo "[build] build/ is up to date (profile $profile${features:+, features: $features})"
  exit 0
fi
if [ "$profile" != release ]; then
  worker-build --profile "$profile" --no-opt ${features:+--features "$features"}
  echo "$features $profile" > "$stamp"
  exit 0
fi
worker-build --release ${features:+--features "$features"}

# Shrink the wasm: -Oz without the names section, with the feature set worker-build
# would enable (what workerd supports). --low-memory-unused lets wasm-opt fold a pointer's
# constant offset into the load or store (~1.5 KiB gzip less): valid as Rust's pointers
# never wrap around the 32-bit address space.
wasm=build/index_bg.wasm
wasm-opt "$wasm" -o "$wasm.opt" -Oz --gufa --dae-optimizing -Oz --converge --low-memory-unused \
  --strip-debug --strip-producers \
  --enable-mutable-globals --enable-sign-ext --enable-nontrapping-float-to-int \
  --enable-bulk-memory --enable-multivalue --enable-reference-types --enable-exception-handling
mv "$wasm.opt" "$wasm"
echo "$features $profile" > "$stamp"
