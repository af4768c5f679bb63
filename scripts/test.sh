#!/usr/bin/env bash
# README command 2: sets up what is missing, then runs every check in order:
# formatting, clippy (native and wasm32), native tests, wasm tests under Node, the
# TypeScript client's tests, the two artifacts of the reference worker (what `wrangler
# deploy` uploads, and the test flavour), and the end-to-end suite against them in
# `wrangler dev` (schemathesis included). Ends with a report: each phase's time, the
# test counts and the ten slowest end-to-end tests.
#
#   scripts/test.sh           everything (what CI runs)
#   scripts/test.sh --quick   the quick loop for an edit (scripts/check.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --quick ]; then exec bash scripts/check.sh; fi

report=target/test-report
mkdir -p "$report"
: > "$report/phases"
started=$SECONDS
phase_start=$SECONDS
phase_name=
# Starts phase $1 (ending the one before it).
phase() {
  [ -n "$phase_name" ] && printf '%s\t%s\n' "$phase_name" "$((SECONDS - phase_start))" >> "$report/phases"
  phase_name="$1"
  phase_start=$SECONDS
  printf '\n==> %s\n' "$1"
}

phase "installs (toolchain, npm packages, schemathesis, chromium)"
. scripts/bootstrap.sh
# The example worker (its own lockfile) shares the workspace's build artifacts.
export CARGO_TARGET_DIR="$PWD/target"
# A one-shot run keeps its artifacts lean: no incremental caches (never reused here) and
# line tables only for debug info (panics still name file and line). With full debug info
# a run wrote ~9 GB, more than a CI machine short of disk has.
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=line-tables-only

for component in rustfmt clippy; do
  if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
    rustup component add "$component"
  fi
done

# The test tools outside the toolchain, installed once per machine (as the toolchain
# is), each pinned in a directory of its version: a fresh clone does not build them
# again. HELIX_TOOLS_DIR moves them.
tools="${HELIX_TOOLS_DIR:-$HOME/.cache/helix-edge}"

# The outside schema fuzzer of the end-to-end suite (PyPI), in a venv of its own.
SCHEMATHESIS_VERSION=4.32.5
venv="$tools/schemathesis-$SCHEMATHESIS_VERSION"
export SCHEMATHESIS_BIN="$venv/bin/st"
if ! "$SCHEMATHESIS_BIN" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
  echo "installing schemathesis $SCHEMATHESIS_VERSION (PyPI) into $venv"
  command -v python3 >/dev/null || { echo "python3 (3.10 or later, with venv) is needed" >&2; exit 1; }
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

# The book's builder (crates.io), without its server and search (not needed to build
# and check the book).
MDBOOK_VERSION=0.5.4
export MDBOOK_BIN="$tools/mdbook-$MDBOOK_VERSION/bin/mdbook"
if [ "$("$MDBOOK_BIN" --version 2>/dev/null)" != "mdbook v$MDBOOK_VERSION" ]; then
  echo "installing mdbook $MDBOOK_VERSION (crates.io) into $tools"
  cargo install mdbook --version "$MDBOOK_VERSION" --locked --no-default-features \
    --root "$tools/mdbook-$MDBOOK_VERSION" --quiet
fi

# A real browser for the console's test: Debian's chromium (puppeteer-core drives it).
if [ -z "${CHROMIUM_BIN:-}" ] && ! command -v chromium >/dev/null; then
  echo "installing chromium (apt-get) for the browser test"
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

phase "cargo fmt --check"
cargo fmt --all --check
(cd examples/minimal-worker && cargo fmt --check)

phase "cargo clippy (native)"
cargo clippy --workspace --all-targets --locked -- -D warnings

phase "cargo clippy (wasm32-unknown-unknown)"
# One pass over everything: every capability (the reference's default), the test
# flavour's code and the embeddable console; the minimal example covers the paths with
# the capabilities off. The capacity model (crates/helix-edge-capacity) is a native tool.
cargo clippy --workspace --exclude helix-edge-capacity --all-targets --locked --target wasm32-unknown-unknown \
  --features test-flavour,helix-edge/console -- -D warnings
(cd examples/minimal-worker && cargo clippy --locked --target wasm32-unknown-unknown -- -D warnings)

# The artifacts build in the background from here, beside the native, wasm and client
# tests: their LTO links and wasm-opt passes keep one core of two busy, and the tests'
# runs leave the other idle. (Each uses build directories of its own in target/.)
bash scripts/artifacts.sh > "$report/artifacts.log" 2>&1 &
artifacts=$!
# A phase that fails stops the run: the build stops with it.
trap 'pkill -P "$artifacts" 2>/dev/null; kill "$artifacts" 2>/dev/null' EXIT

phase "cargo test (native)"
cargo test --workspace --locked 2>&1 | tee "$report/native.log"
# A worker crate's own tests, as a user runs them (plain `cargo test`).
(cd examples/minimal-worker && cargo clippy --locked --all-targets -- -D warnings && cargo test --locked) 2>&1 |
  tee -a "$report/native.log"
# The book's worker, from its snippets as pasted.
bash scripts/check-book.sh 2>&1 | tee -a "$report/native.log"

# The published crates, as crates.io would get them: packaged and each built from its
# package alone (the workspace's crates reached through a local registry).
cargo package -p helix-edge-skill-md -p helix-edge-macros -p helix-edge-core -p helix-edge \
  --allow-dirty --quiet

phase "the book (mdbook build, the API reference from the OpenAPI document, links offline)"
bash scripts/book.sh

phase "wasm-bindgen tests (wasm32, under Node)"
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  cargo test --locked --target wasm32-unknown-unknown -p helix-edge --lib --tests --features console,users,schedules 2>&1 |
  tee "$report/wasm.log"

phase "TypeScript client (clients/js): typecheck, build, unit tests; the console's typecheck"
npm --workspace clients/js test 2>&1 | tee "$report/client.log"
"$PWD/node_modules/.bin/tsc" -p crates/helix-edge/console/tsconfig.json

phase "the reference worker and the example as wrangler deploy builds them; the test flavour (what is left of their build beside the tests above)"
built=0
wait "$artifacts" || built=$?
trap - EXIT
cat "$report/artifacts.log"
[ "$built" = 0 ] || { echo "scripts/artifacts.sh failed (exit $built): its output is above" >&2; exit "$built"; }

phase "end-to-end suite (wrangler dev, local D1 and Durable Objects)"
# Files run two at a time (two cores; at three, connections of `wrangler dev` drop
# now and then), each with a worker and a mock model of its own (and a
# wrangler config of its own: `wrangler dev` reloads a worker whose config file changes);
# --test-force-exit: a handle a failed test leaves open (a server, a socket) must not
# keep the run alive; --test-timeout bounds any one test. Three files run after the
# others, one at a time: the two that load the machine on purpose (64 clients for a
# minute, 20 SIGKILLs; beside them, a test that times a stream sees the proxy of
# `wrangler dev` drop its connections) and `platform`, whose 8 MiB bodies that proxy now
# and then holds unanswered on a loaded machine. Its status is kept: the report below
# comes at the end of a failed run too.
alone=(tests/e2e/platform.test.mjs tests/e2e/load.test.mjs tests/e2e/crash.test.mjs)
# The longest files first (the report's slowest), so that none starts last and keeps
# one core busy alone at the end.
longest=(tests/e2e/starter.test.mjs tests/e2e/schemathesis.test.mjs tests/e2e/retention.test.mjs
  tests/e2e/shards.test.mjs tests/e2e/shards-faults.test.mjs tests/e2e/live-state.test.mjs)
shared=("${longest[@]}")
for file in tests/e2e/*.test.mjs; do
  case " ${alone[*]} ${longest[*]} " in *" $file "*) ;; *) shared+=("$file") ;; esac
done
e2e=0
: > "$report/e2e.log"
node --test --test-concurrency="${E2E_CONCURRENCY:-2}" --test-force-exit --test-timeout=600000 \
  --test-reporter=spec "${shared[@]}" 2>&1 | tee -a "$report/e2e.log" || e2e=$?
node --test --test-concurrency=1 --test-force-exit --test-timeout=600000 \
  --test-reporter=spec "${alone[@]}" 2>&1 | tee -a "$report/e2e.log" || e2e=$?
phase ""

# The report: where the time went, what ran, and the slowest end-to-end tests.
node scripts/test-report.mjs "$report" "$((SECONDS - started))"
[ "$e2e" = 0 ] || { echo "the end-to-end suite failed (exit $e2e): its failures are above" >&2; exit "$e2e"; }
