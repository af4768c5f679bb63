#!/usr/bin/env bash
# Builds the worker of the README's "Your own agents" from the README alone: its
# Cargo.toml and src/lib.rs blocks, as pasted (the path to helix-edge pointed at this
# checkout), checked for wasm32 and tested natively with plain `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
dir="${CARGO_TARGET_DIR:-$root/target}/readme-worker"
rm -rf "$dir" && mkdir -p "$dir/src"
# The first ```toml block after the section's heading that has [lib], and the first
# ```rust block after it.
python3 - "$root/README.md" "$dir" "$root" <<'PY'
import re, sys
readme, out, root = sys.argv[1:]
text = open(readme).read()
section = text[text.index("## Your own agents"):]
section = section[:section.index("\n## ", 5)]
blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
cargo = next(body for lang, body in blocks if lang == "toml" and "[lib]" in body)
lib = next(body for lang, body in blocks if lang == "rust")
cargo = cargo.replace('path = "../helix-edge/crates/helix-edge"', f'path = "{root}/crates/helix-edge"')
open(f"{out}/Cargo.toml", "w").write('[package]\nname = "support-worker"\nversion = "0.1.0"\nedition = "2024"\n\n' + cargo + "\n[workspace]\n")
open(f"{out}/src/lib.rs", "w").write(lib)
PY
cd "$dir"
cargo check --quiet --target wasm32-unknown-unknown
cargo test --quiet
echo "the README's worker builds for wasm32 and tests natively"
