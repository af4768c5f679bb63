#!/usr/bin/env bash
# Builds the workers of the book (docs/src) from the book alone, as a reader pastes them:
# on each page, the block fenced as ```toml,worker is the worker's Cargo.toml and the
# blocks fenced as ```rust,worker are its src/lib.rs, in order. Each page's worker is
# built in ${CARGO_TARGET_DIR:-target}/book-workers/<page> with the path to helix-edge
# (`path = "../helix-edge/crates/helix-edge"` in the book) pointed at this checkout,
# checked for wasm32 and tested natively with plain `cargo test` — after writing its
# D1 migrations as the book tells a reader to (`HELIX_EDGE_WRITE_MIGRATIONS=1 cargo test
# migrations`).
#
# Every other ```rust block of the book must be marked `ignore` (mdBook renders
# `rust,ignore`, `rust,worker` and `toml,worker` fences as Rust and TOML).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
out="${CARGO_TARGET_DIR:-$root/target}/book-workers"
# The workers share the workspace's build artifacts unless told otherwise.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"

pages="$(python3 - "$root/docs/src" "$out" "$root" <<'PY'
import os, re, sys
src, out, root = sys.argv[1:]
# A fenced block, indented or not (in a list item): its info string and its body.
fence = re.compile(r"^([ \t]*)```([^\n`]*)\n(.*?)^\1```[ \t]*$", re.S | re.M)
problems, built = [], []
for name in sorted(os.listdir(src)):
    if not name.endswith(".md"):
        continue
    page = name[:-3]
    text = open(os.path.join(src, name), encoding="utf-8").read()
    cargo, lib = [], []
    for m in fence.finditer(text):
        info = [w.strip() for w in m[2].strip().split(",")]
        lang, attrs = info[0], set(info[1:])
        line = text[: m.start()].count("\n") + 1
        if lang == "toml" and "worker" in attrs:
            cargo.append(m[3])
        elif lang == "rust" and "worker" in attrs:
            lib.append(m[3])
        elif lang == "rust" and not attrs & {"ignore"}:
            problems.append(f"docs/src/{name}:{line}: a ```{m[2].strip()} block must be marked `ignore` (or `worker`)")
    if not cargo and not lib:
        continue
    if len(cargo) != 1 or not lib:
        problems.append(f"docs/src/{name}: a worker needs exactly one ```toml,worker block and at least one ```rust,worker block")
        continue
    manifest = cargo[0].replace('path = "../helix-edge/crates/helix-edge"', f'path = "{root}/crates/helix-edge"')
    if f'path = "{root}/crates/helix-edge"' not in manifest:
        problems.append(f'docs/src/{name}: its Cargo.toml must depend on helix-edge at path = "../helix-edge/crates/helix-edge"')
        continue
    if not re.search(r"^\[package\]", manifest, re.M):
        manifest = f'[package]\nname = "{page}"\nversion = "0.1.0"\nedition = "2024"\n\n' + manifest
    if not re.search(r"^\[workspace\]", manifest, re.M):
        manifest += "\n[workspace]\n"
    dir = os.path.join(out, page)
    os.makedirs(os.path.join(dir, "src"), exist_ok=True)
    open(os.path.join(dir, "Cargo.toml"), "w").write(manifest)
    open(os.path.join(dir, "src", "lib.rs"), "w").write("\n".join(lib))
    built.append(page)
if problems:
    print("\n".join(problems), file=sys.stderr)
    sys.exit(1)
print(" ".join(built))
PY
)"

for page in $pages; do
  dir="$out/$page"
  echo "==> the book's worker of docs/src/$page.md ($dir)"
  # The versions this checkout is tested with (cargo keeps what fits, adds the rest).
  [ -f "$dir/Cargo.lock" ] || cp "$root/Cargo.lock" "$dir/Cargo.lock"
  rm -rf "$dir/migrations"
  (
    cd "$dir"
    cargo check --quiet --target wasm32-unknown-unknown
    HELIX_EDGE_WRITE_MIGRATIONS=1 cargo test --quiet migrations
    cargo test --quiet
  )
done
echo "the book's workers ($(echo "$pages" | wc -w)) build for wasm32 and test natively; its other Rust blocks are marked ignore"
