#!/usr/bin/env bash
# README command 1: sets up what is missing, applies the D1 migrations to the local
# database, and runs the worker with `wrangler dev` on 127.0.0.1 (PORT, default 8787).
#
# Local data persists in .wrangler/state across restarts. Without .dev.vars the worker
# starts from .dev.vars.example: the `demo` model, no credentials needed.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bootstrap.sh

port="${PORT:-8787}"
state=.wrangler/state

if [ ! -f .dev.vars ]; then
  # The dev agent `dispatcher` calls this worker itself as its remote deployment.
  sed "s#127.0.0.1:8787#127.0.0.1:$port#" .dev.vars.example > .dev.vars
  echo "[dev] created .dev.vars from .dev.vars.example (edit it to set a token or an LLM)"
fi

WRANGLER_COMMAND=dev bash scripts/build.sh
wrangler d1 migrations apply DB --local --persist-to "$state"
# The dev agent `librarian` reads its skills from the local R2 bucket: put the example
# skills there (a skill edited in the bucket is seen by the next run).
skills=crates/reference-agents/skills
find "$skills" -type f | sort | while read -r file; do
  wrangler r2 object put "helix-edge-files/skills/${file#"$skills"/}" --local \
    --persist-to "$state" --file "$file" > /dev/null
done
echo "[dev] skills in the local R2 bucket: $(ls "$skills" | tr '\n' ' ')"
echo "[dev] console: http://127.0.0.1:$port/  (API: http://127.0.0.1:$port/v1/agents)"
exec wrangler dev --ip 127.0.0.1 --port "$port" --persist-to "$state" "$@"
