#!/usr/bin/env bash
# The [build] of wrangler.toml. Under `wrangler dev` (which sets WRANGLER_COMMAND): the
# quick `wasm-dev` profile with the `dev` feature (the demo model), no wasm-opt; an edit
# rebuilds in seconds. Otherwise (`wrangler deploy`): the release build.
#
# worker-build downloads wasm-bindgen (and esbuild, wasm-opt) from GitHub unless
# WASM_BINDGEN_BIN, ESBUILD_BIN and WASM_OPT_BIN name installed ones.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${WRANGLER_COMMAND:-}" = dev ]; then
  exec worker-build --profile wasm-dev --no-opt --features dev
fi
exec worker-build --release
