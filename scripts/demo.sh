#!/usr/bin/env bash
# The main job: builds Sumcast and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
build=${SUMCAST_BUILD_DIR:-build}
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j"$(nproc)"
echo "== reduce kernels (GB/s of input; ratio to the same-run memory roofline)"
"$build/bench/reduce" --type f32,f16,bf16 --sizes 1M,4M,64M
