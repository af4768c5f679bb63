#!/usr/bin/env bash
# Generates a worker crate of your own from templates/worker: the entry, one agent with
# an approval-gated tool and typed state, its native test, a dev script with the demo
# model scripted for it, .gitignore, .dev.vars.example and wrangler pinned in a
# package.json. It depends on this checkout by path, starts from the checkout's
# Cargo.lock (the versions helix-edge is tested with) and gets a copy of the library's
# D1 migrations in its own migrations/ (its tests/migrations.rs keeps the copy current).
#
#   scripts/new-worker.sh NAME [DIR]    # DIR defaults to ../NAME
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
name="${1:-}"
if ! [[ "$name" =~ ^[a-z][a-z0-9-]{0,62}$ ]]; then
  echo "usage: scripts/new-worker.sh NAME [DIR]  (NAME: lowercase letters, digits and '-', a letter first)" >&2
  exit 2
fi
dir="${2:-$root/../$name}"
if [ -e "$dir" ]; then
  echo "$dir exists already: choose another DIR" >&2
  exit 1
fi
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
cp -R "$root/templates/worker/." "$dir/"
rel() { node -e 'console.log(require("path").relative(process.argv[1], process.argv[2]) || ".")' "$dir" "$1"; }
helix="$(rel "$root/crates/helix-edge")"
readme="$(rel "$root/README.md")"
find "$dir" -type f -print0 | while IFS= read -r -d '' f; do
  sed -i.bak -e "s#{{name}}#$name#g" -e "s#{{helix_edge}}#$helix#g" \
    -e "s#{{helix_readme}}#$readme#g" "$f"
  rm -f "$f.bak"
done
# The dependency versions this checkout is tested with (cargo drops what the new crate
# does not use; `cargo update` moves on when you choose).
cp "$root/Cargo.lock" "$dir/Cargo.lock"
mkdir -p "$dir/migrations"
cp "$root"/crates/helix-edge/migrations/*.sql "$dir/migrations/"
echo "Created $dir. Next:"
echo "  cd $dir"
echo "  cargo test        # the agent, natively"
echo "  scripts/dev.sh    # wrangler dev with the demo model (LLM_SCRIPT in .dev.vars)"
