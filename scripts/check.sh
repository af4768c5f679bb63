#!/usr/bin/env bash
# The quick loop for every edit (`scripts/test.sh --quick` runs it): formatting, clippy
# for the default target, and the native tests of the crates the working tree changed
# (against HEAD, untracked files included; every workspace crate when a shared file —
# Cargo.toml, Cargo.lock — changed). A couple of minutes warm; CI runs the full
# scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
started=$SECONDS

echo "==> cargo fmt --check"
cargo fmt --all --check

echo "==> cargo clippy (native)"
cargo clippy --workspace --all-targets --locked -q -- -D warnings

changed="$( { git diff --name-only HEAD; git ls-files --others --exclude-standard; } | sort -u)"
packages=()
add() { case " ${packages[*]} " in *" $1 "*) ;; *) packages+=("$1") ;; esac; }
while read -r path; do
  case "$path" in
    "") ;;
    Cargo.toml | Cargo.lock) packages=(--workspace); break ;;
    crates/helix-edge-core/*) add helix-edge-core; add helix-edge; add reference-agents ;;
    crates/helix-edge-macros/* | crates/helix-edge-skill-md/*) add helix-edge-core ;;
    crates/helix-edge/*) add helix-edge; add reference-agents ;;
    crates/reference-agents/*) add reference-agents; add helix-edge-reference ;;
    crates/helix-edge-capacity/*) add helix-edge-capacity ;;
    src/* | tests/*.rs | migrations/*) add helix-edge-reference ;;
  esac
done <<< "$changed"

if [ "${packages[0]:-}" = --workspace ]; then
  echo "==> cargo test --workspace"
  cargo test --workspace --locked -q
elif [ ${#packages[@]} -gt 0 ]; then
  args=()
  for p in "${packages[@]}"; do args+=(-p "$p"); done
  echo "==> cargo test ${args[*]}"
  cargo test "${args[@]}" --locked -q
else
  echo "==> no crate changed: no tests to run"
fi
echo "==> quick checks passed in $((SECONDS - started)) s (the full suite: scripts/test.sh)"
