#!/usr/bin/env bash
# Line coverage of the host code (model/, sim/, cuda/ without the CUDA sources) under the whole
# host test suite, from the repository root:
#
#   reports/robustness/tools/coverage.sh [OUT_DIR]      # default OUT_DIR: build/coverage/report
#
# Builds build/coverage with the `coverage` preset (gcc --coverage, -O0, atomic counters so that
# threaded code counts right), runs its ctest, and writes OUT_DIR/coverage.txt (per file: lines,
# executed, the missing line numbers) and OUT_DIR/summary.json (gcovr's per-file summary).
# Needs gcovr (Debian 12: apt-get install gcovr); CI does not run this.
set -euo pipefail
repo=$(pwd)
out=${1:-$repo/build/coverage/report}
case "$out" in /*) ;; *) out=$repo/$out ;; esac
cmake --preset coverage
cmake --build --preset coverage
find build/coverage -name '*.gcda' -delete
ctest --preset coverage
mkdir -p "$out"
work=$(mktemp -d)  # gcov writes its intermediate files into the working directory
trap 'rm -rf "$work"' EXIT
cd "$work"
gcovr -r "$repo" "$repo/build/coverage" --filter "$repo/model/" --filter "$repo/sim/" \
  --filter "$repo/cuda/" --gcov-ignore-parse-errors -j "$(nproc)" \
  --txt "$out/coverage.txt" --json-summary "$out/summary.json"
tail -n 2 "$out/coverage.txt"
