#!/usr/bin/env bash
# Runs the worker locally: installs the pinned wrangler, creates .dev.vars from
# .dev.vars.example (the demo model, scripted by LLM_SCRIPT), applies the D1 schema to
# the local database and starts `wrangler dev` on 127.0.0.1 (PORT, default 8787).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v worker-build >/dev/null || cargo install worker-build --version 0.8.7
[ -x node_modules/.bin/wrangler ] || npm install --no-audit --no-fund
[ -f .dev.vars ] || { cp .dev.vars.example .dev.vars; echo "[dev] created .dev.vars from .dev.vars.example"; }
export WRANGLER_SEND_METRICS=false
npx wrangler d1 migrations apply DB --local
exec npx wrangler dev --ip 127.0.0.1 --port "${PORT:-8787}" "$@"
