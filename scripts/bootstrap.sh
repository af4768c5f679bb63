#!/usr/bin/env bash
# Installs the pinned build and test toolchain when something is missing, and exports
# the overrides worker-build needs to build without downloading from GitHub.
#
# Source it (`. scripts/bootstrap.sh`) to get the environment, or run it to install only.
# Idempotent: when everything is present it only checks versions (well under a second).
# Everything comes from crates.io and the npm registry; nothing is fetched elsewhere.

WORKER_BUILD_VERSION=0.8.7

_he_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

_he_log() { printf '[bootstrap] %s\n' "$*" >&2; }

# The wasm-bindgen CLI must equal the wasm-bindgen crate in Cargo.lock exactly.
_he_wasm_bindgen_version() {
  awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' \
    "$_he_root/Cargo.lock"
}

_he_bootstrap() {
  local cargo_bin="${CARGO_HOME:-$HOME/.cargo}/bin"
  case ":$PATH:" in *":$cargo_bin:"*) ;; *) export PATH="$cargo_bin:$PATH" ;; esac

  command -v cargo >/dev/null || { _he_log "cargo not found: install Rust (rustup) first"; return 1; }
  command -v npm >/dev/null || { _he_log "npm not found: install Node.js 20 or later first"; return 1; }

  if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    _he_log "adding the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown || return 1
  fi

  if [ "$(worker-build --version 2>/dev/null)" != "$WORKER_BUILD_VERSION" ]; then
    _he_log "installing worker-build $WORKER_BUILD_VERSION (takes a few minutes, once)"
    cargo install worker-build --version "$WORKER_BUILD_VERSION" --force || return 1
  fi

  local wbg
  wbg="$(_he_wasm_bindgen_version)"
  [ -n "$wbg" ] || (cd "$_he_root" && cargo generate-lockfile) || return 1
  wbg="$(_he_wasm_bindgen_version)"
  if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $wbg" ]; then
    _he_log "installing wasm-bindgen-cli $wbg (takes a few minutes, once)"
    # --locked is not used: its lockfile names a crate the registry view here lacks.
    cargo install wasm-bindgen-cli --version "$wbg" --force || return 1
  fi

  # npm ci whenever the lockfile changed since the last install.
  local stamp="$_he_root/node_modules/.helix-edge-stamp"
  if [ ! -f "$stamp" ] || [ "$_he_root/package-lock.json" -nt "$stamp" ]; then
    _he_log "installing pinned npm packages (wrangler, esbuild, binaryen)"
    (cd "$_he_root" && npm ci --no-audit --no-fund --loglevel=error) || return 1
    touch "$stamp"
  fi

  export WASM_BINDGEN_BIN="$cargo_bin/wasm-bindgen"
  export ESBUILD_BIN="$_he_root/node_modules/.bin/esbuild"
  export WASM_OPT_BIN="$_he_root/node_modules/.bin/wasm-opt"
  export WRANGLER="$_he_root/node_modules/.bin/wrangler"
  export WRANGLER_SEND_METRICS=false
  export PATH="$_he_root/node_modules/.bin:$PATH"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  _he_bootstrap
else
  _he_bootstrap
fi
