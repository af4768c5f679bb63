#!/usr/bin/env bash
# The benchmarks, one command (the book's "Performance" page, docs/src/performance.md): native micro-benchmarks of the
# hot paths, the bundle size of a production build, and the end-to-end human-in-the-loop
# cycle against `wrangler dev` with local D1 and Durable Objects, next to its floor.
# Numbers only: the tests assert behaviour. BENCH_SESSIONS / BENCH_CONCURRENCY tune the
# end-to-end run (defaults 200 and "1,8"); then one session's growth over BENCH_TURNS
# turns (default 500), the cold start of the reference worker and the minimal example,
# and the capacity model of the queryable record (bench/capacity.mjs).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bootstrap.sh

cargo bench --bench hot_paths

echo
echo "## Bundle (wrangler deploy --dry-run) and the test flavour, built once"
# The benchmarks time the test flavour: optimised as the production build is.
export HELIX_TEST_FLAVOUR_WASM_OPT=1
bash scripts/artifacts.sh

echo
echo "## End-to-end human-in-the-loop cycle (wrangler dev, local D1 and Durable Objects)"
# The floor routes are the test flavour's: the end-to-end run uses it.
node bench/e2e.mjs

echo
echo "## The same cycle with the spans exported over OTLP (a receiver on loopback), then to one that takes 15 s"
BENCH_OTEL=on BENCH_CONCURRENCY=1 node bench/e2e.mjs
BENCH_OTEL=slow BENCH_CONCURRENCY=1 node bench/e2e.mjs

echo
echo "## One session, many turns: does a turn cost more as the session grows?"
BENCH_MODE=growth node bench/e2e.mjs

echo
echo "## Cold start (a fresh wrangler dev each time)"
node bench/cold.mjs

echo
echo "## Capacity: the queryable record (D1) for 1M sessions a day over 1-64 shards"
node bench/capacity.mjs
