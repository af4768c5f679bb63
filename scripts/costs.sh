#!/usr/bin/env bash
# The bundle's cost table (README "What it weighs", docs/src/performance.md): the
# reference worker built with every capability, then without each in turn, the minimal
# example, and the cold start of both. `--write` puts the table into the docs.
# Takes about an hour on two cores (one release build per capability).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bootstrap.sh
exec node bench/costs.mjs "$@"
