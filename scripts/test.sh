#!/usr/bin/env bash
# README command 2: sets up what is missing, then runs every check in order:
# formatting, clippy (native and wasm32), native tests, wasm tests under Node, and the
# end-to-end suite against the real worker in `wrangler dev` (schemathesis included).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bootstrap.sh
# The example worker (its own lockfile) shares the workspace's build artifacts.
export CARGO_TARGET_DIR="$PWD/target"
# A one-shot run keeps its artifacts lean: no incremental caches (never reused here) and
# line tables only for debug info (panics still name file and line). With full debug info
# a run wrote ~9 GB, more than a CI machine short of disk has.
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=line-tables-only

step() { printf '\n==> %s\n' "$*"; }

for component in rustfmt clippy; do
  if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
    rustup component add "$component"
  fi
done

# The outside schema fuzzer of the end-to-end suite (PyPI), pinned, in a venv of its own.
SCHEMATHESIS_VERSION=4.32.5
export SCHEMATHESIS_BIN="$CARGO_TARGET_DIR/schemathesis/bin/st"
if ! "$SCHEMATHESIS_BIN" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
  step "installing schemathesis $SCHEMATHESIS_VERSION (PyPI)"
  command -v python3 >/dev/null || { echo "python3 (3.10 or later, with venv) is needed" >&2; exit 1; }
  python3 -m venv "$CARGO_TARGET_DIR/schemathesis"
  "$CARGO_TARGET_DIR/schemathesis/bin/pip" install --quiet --disable-pip-version-check \
    "schemathesis==$SCHEMATHESIS_VERSION"
fi

# A real browser for the console's test: Debian's chromium (puppeteer-core drives it).
if [ -z "${CHROMIUM_BIN:-}" ] && ! command -v chromium >/dev/null; then
  step "installing chromium (apt-get) for the browser test"
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

step "cargo fmt --check"
cargo fmt --all --check
(cd examples/minimal-worker && cargo fmt --check)

step "cargo clippy (native)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo clippy (wasm32-unknown-unknown)"
# The capacity model (crates/helix-edge-capacity) is a native tool: it is not built for wasm.
cargo clippy --workspace --exclude helix-edge-capacity --all-targets --locked --target wasm32-unknown-unknown -- -D warnings
cargo clippy --workspace --exclude helix-edge-capacity --all-targets --locked --target wasm32-unknown-unknown --features test-routes -- -D warnings
cargo clippy -p helix-edge --all-targets --locked --target wasm32-unknown-unknown --features console,users -- -D warnings
(cd examples/minimal-worker && cargo clippy --locked --target wasm32-unknown-unknown -- -D warnings)

step "cargo test (native)"
cargo test --workspace --locked
# A worker crate's own tests, as a user runs them (plain `cargo test`).
(cd examples/minimal-worker && cargo clippy --locked --all-targets -- -D warnings && cargo test --locked)
# The README's own worker, from its snippets as pasted.
bash scripts/check-readme-worker.sh

step "wasm-bindgen tests (wasm32, under Node)"
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  cargo test --locked --target wasm32-unknown-unknown -p helix-edge --lib --tests --features console,users

step "TypeScript client (clients/js): typecheck, build, unit tests; the console's typecheck"
npm --workspace clients/js test
"$PWD/node_modules/.bin/tsc" -p crates/helix-edge/console/tsconfig.json

step "build the worker (with the test-only routes)"
export HELIX_BUILD_FEATURES=test-routes
bash scripts/build.sh

step "build the example worker as a user does (wrangler deploy --dry-run)"
(cd examples/minimal-worker && "$WRANGLER" deploy --dry-run --outdir "$CARGO_TARGET_DIR/example-bundle" 2>&1 | tail -n 5)

step "end-to-end suite (wrangler dev, local D1 and Durable Objects)"
# --test-force-exit: a handle a failed test leaves open (a server, a socket) must not keep
# the run alive; --test-timeout bounds any one test (the longest take about 90 s).
node --test --test-concurrency=1 --test-force-exit --test-timeout=600000 tests/e2e/
