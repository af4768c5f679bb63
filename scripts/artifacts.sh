#!/usr/bin/env bash
# Builds the reference worker's two artifacts that the end-to-end suite runs
# (tests/e2e/harness.mjs), each only when its inputs changed:
#   target/artifacts/deploy      what `wrangler deploy --dry-run` writes: the upload itself
#   target/artifacts/production  the same build's worker (its wasm is the upload's; the
#                                suite checks the hash), run by every test that injects
#                                no fault
#   target/artifacts/test        the test flavour (release; without the wasm-opt pass
#                                unless HELIX_TEST_FLAVOUR_WASM_OPT=1, as the benchmarks,
#                                which time it, build it): the product plus the test-only routes,
#                                fault injection and the `ledger` agent (feature
#                                `test-flavour`), for the tests that need them
#   target/artifacts/example     the minimal example as its `wrangler deploy --dry-run`
#                                builds it (its upload in target/artifacts/example-deploy)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bootstrap.sh
art=target/artifacts
mkdir -p "$art"

# The production build is wrangler's own: `wrangler deploy` runs the [build] command
# (scripts/build.sh, release, every capability) into build/ and bundles it.
rm -rf "$art/deploy"
"$WRANGLER" deploy --dry-run --outdir "$art/deploy" 2>&1 | grep -E "Total Upload|error|Error" || true
[ -n "$(ls "$art"/deploy/*.wasm 2>/dev/null)" ] || { echo "wrangler deploy --dry-run wrote no wasm" >&2; exit 1; }
rm -rf "$art/production"
cp -R build "$art/production"

HELIX_BUILD_FEATURES=test-flavour HELIX_BUILD_WASM_OPT="${HELIX_TEST_FLAVOUR_WASM_OPT:-0}" HELIX_BUILD_OUT="$art/test" bash scripts/build.sh

# The example, a user's worker with its own lockfile, shares the workspace's compiled
# dependencies (CARGO_TARGET_DIR).
rm -rf "$art/example-deploy"
(cd examples/minimal-worker && CARGO_TARGET_DIR="$PWD/../../target" "$WRANGLER" deploy --dry-run \
  --outdir "../../$art/example-deploy" 2>&1 | grep -E "Total Upload|error|Error" || true)
[ -n "$(ls "$art"/example-deploy/*.wasm 2>/dev/null)" ] || { echo "the example's dry run wrote no wasm" >&2; exit 1; }
rm -rf "$art/example"
cp -R examples/minimal-worker/build "$art/example"
