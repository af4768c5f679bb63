#!/usr/bin/env bash
# The wrangler [build] command: builds the worker bundle with worker-build. Skips the
# build when the output is newer than every input and was built the same way, so
# restarts of `wrangler dev` start in seconds.
#
# What is built (every capability is on by default, as `wrangler deploy` uploads it):
#   HELIX_BUILD_FEATURES      cargo features on top (`test-flavour`: the e2e suite's
#                             test flavour)
#   HELIX_BUILD_NO_DEFAULT=1  without the default features (scripts/costs.sh measures
#                             each capability by leaving it out)
#   HELIX_BUILD_PROFILE       `release` (default; with wasm-opt) or `wasm-dev` (what
#                             `wrangler dev` builds unless told: no LTO, incremental, no
#                             wasm-opt — a larger bundle that is never deployed)
#   HELIX_BUILD_OUT           the output directory (default `build`, where
#                             wrangler.toml's `main` points)
#   HELIX_BUILD_WASM_OPT=0    a release build without the wasm-opt pass (the test
#                             flavour: never deployed, and the pass takes ~50 s)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bootstrap.sh

features="${HELIX_BUILD_FEATURES:-}"
if [ "${WRANGLER_COMMAND:-}" = dev ]; then
  profile="${HELIX_BUILD_PROFILE:-wasm-dev}"
else
  profile="${HELIX_BUILD_PROFILE:-release}"
fi
out="${HELIX_BUILD_OUT:-build}"
args=()
[ "${HELIX_BUILD_NO_DEFAULT:-}" = 1 ] && args+=(--no-default-features)
[ -n "$features" ] && args+=(--features "$features")
wasm_opt="${HELIX_BUILD_WASM_OPT:-1}"
recipe="${args[*]:-default} $profile opt=$wasm_opt"

stamp="$out/.recipe"
if [ -f "$out/worker/shim.mjs" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$recipe" ] &&
  [ -z "$(find src crates tests/flavour .cargo Cargo.toml Cargo.lock -newer "$out/worker/shim.mjs" -print -quit 2>/dev/null)" ]; then
  echo "[build] $out/ is up to date ($recipe)"
  exit 0
fi
# A build that stops half way leaves no stamp claiming it finished.
rm -f "$stamp"
if [ "$profile" != release ]; then
  worker-build --profile "$profile" --no-opt --out-dir "$out" "${args[@]}"
  echo "$recipe" > "$stamp"
  exit 0
fi
worker-build --release --out-dir "$out" "${args[@]}"
if [ "$wasm_opt" = 0 ]; then
  echo "$recipe" > "$stamp"
  exit 0
fi

# Shrink the wasm: -Oz without the names section, with the feature set worker-build
# would enable (what workerd supports). --low-memory-unused lets wasm-opt fold a pointer's
# constant offset into the load or store (~1.5 KiB gzip less): valid as Rust's pointers
# never wrap around the 32-bit address space. (--converge, which runs the passes again
# until nothing changes, took a minute more for the same gzip size.)
wasm="$out/index_bg.wasm"
wasm-opt "$wasm" -o "$wasm.opt" -Oz --gufa --dae-optimizing -Oz --low-memory-unused \
  --strip-debug --strip-producers \
  --enable-mutable-globals --enable-sign-ext --enable-nontrapping-float-to-int \
  --enable-bulk-memory --enable-multivalue --enable-reference-types --enable-exception-handling
mv "$wasm.opt" "$wasm"
echo "$recipe" > "$stamp"
