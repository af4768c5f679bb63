#!/usr/bin/env bash
# Builds the book to docs/book: the pages with mdBook (pinned: scripts/test.sh installs
# it under ~/.cache/helix-edge, or set MDBOOK_BIN), the HTTP API's reference rendered from
# api/openapi.json by Redocly's CLI (docs/book/api.html, prerendered: readable without
# its script), then every internal link and anchor checked offline.
set -euo pipefail
cd "$(dirname "$0")/.."
mdbook="${MDBOOK_BIN:-${HELIX_TOOLS_DIR:-$HOME/.cache/helix-edge}/mdbook-0.5.4/bin/mdbook}"
[ -x "$mdbook" ] || mdbook="$(command -v mdbook)" || {
  echo "mdbook not found: scripts/test.sh installs it (or: cargo install mdbook --version 0.5.4)" >&2
  exit 1
}
"$mdbook" build docs
node_modules/.bin/redocly build-docs api/openapi.json --output docs/book/api.html \
  --title "helix-edge HTTP API" >/dev/null
python3 scripts/check-links.py docs/book
