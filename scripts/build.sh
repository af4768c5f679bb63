#!/usr/bin/env bash
# The wrangler [build] command: builds the worker bundle into build/ with worker-build.
# Skips the build when build/ is newer than every input, so restarts of `wrangler dev`
# (and the end-to-end suite's restarts) start in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bootstrap.sh

out=build/worker/shim.mjs
if [ -f "$out" ] && [ -z "$(find src Cargo.toml Cargo.lock -newer "$out" -print -quit)" ]; then
  echo "[build] build/ is up to date"
  exit 0
fi
worker-build --release
