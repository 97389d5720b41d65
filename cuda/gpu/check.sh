#!/usr/bin/env bash
# The one command for a GPU machine (issue 5): builds the GPU-only target set, runs the CPU and
# GPU tests, runs the kernel benchmarks, writes their Google Benchmark JSON under
# reports/kernels/<gpu>/<date>/ (mirrored under $OUT/<gpu>/<date>/ so the device tool brings it
# back), compares with the newest earlier baseline for the same GPU (flags > 5% slowdowns) and
# prints a short table last.
#
#   on the Debian machine, once:  cuda/gpu/fetch_deps.sh            (fills build/gpu-deps/)
#   on the GPU machine:           bash cuda/gpu/check.sh             (carry build/gpu-deps)
#
# Stages: check.sh [all|build|test|bench]  (default all). Environment:
#   KVTWIN_CUDA_ARCH      CMAKE_CUDA_ARCHITECTURES (default 90: sm_90 SASS + compute_90 PTX)
#   KVTWIN_BENCH_ARGS     extra Google Benchmark flags (e.g. --benchmark_filter=llama3.1-8b)
#   KVTWIN_PREBUILT=DIR   skip the build and run the binaries under DIR/tests_cuda/ (built on the
#                         Debian machine with this same project; the fallback if the GPU
#                         machine cannot build)
#   KVTWIN_CPU_ONLY=1     no GPU: run the CPU benchmark instead, write under build/gpu-out only
#                         (exercises the JSON, comparison and table on a machine without a GPU)
# Exit status: 0 when everything passed and nothing regressed; 1 on a build or test failure;
# 3 when the comparison found a > 5% slowdown.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
stage="${1:-all}"
cpu_only="${KVTWIN_CPU_ONLY:-0}"
deps="$root/build/gpu-deps"
prefix="$deps/root"
build="${KVTWIN_PREBUILT:-$root/build/gpu}"
out="${OUT:-$root/build/gpu-out}"
mkdir -p "$out"
log() { echo "check.sh: $*" >&2; }
# libbenchmark.so.1 comes from the carried prefix (prebuilt binaries carry this machine's rpath).
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# --- the carried libraries -----------------------------------------------------------------------
unpack_deps() {
  if [ -d "$prefix/usr/lib" ]; then return 0; fi
  if ! ls "$deps"/*.deb >/dev/null 2>&1; then
    log "no .deb files in $deps: using the system's GTest/rapidcheck/benchmark (run fetch_deps.sh here to carry them)"
    return 0
  fi
  mkdir -p "$prefix"
  for f in "$deps"/*.deb; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$f" "$prefix" || return 1
    else
      python3 "$root/cuda/gpu/unpack_deb.py" "$f" "$prefix" || return 1
    fi
  done
}

# --- which GPU: from the benchmark's own context (cudaGetDeviceProperties), e.g. nvidia-h100-80gb-hbm3
gpu_slug() {
  python3 - "$1" <<'PY'
import json, re, sys
name = json.load(open(sys.argv[1])).get("context", {}).get("gpu_name") or "cpu-only"
print(re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-"))
PY
}

do_build() {
  unpack_deps || { log "unpacking the carried .deb files failed"; return 1; }
  if [ -n "${KVTWIN_PREBUILT:-}" ]; then
    log "using prebuilt binaries in $build"
    return 0
  fi
  log "configuring (CUDA arch ${KVTWIN_CUDA_ARCH:-90})"
  cmake -S cuda/gpu -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_PREFIX_PATH="$prefix/usr" -DCMAKE_CUDA_ARCHITECTURES="${KVTWIN_CUDA_ARCH:-90}" \
    > "$out/configure.log" 2>&1 || { tail -n 30 "$out/configure.log"; return 1; }
  log "building"
  cmake --build "$build" -j "$(nproc)" > "$out/build.log" 2>&1 || { tail -n 40 "$out/build.log"; return 1; }
}

do_test() {
  local rc=0
  log "CPU tests"
  RC_PARAMS=max_success=1000 "$build/tests_cuda/cuda_layout_test" --gtest_brief=1 \
    > "$out/tests_cpu.log" 2>&1 || rc=1
  tail -n 3 "$out/tests_cpu.log"
  log "GPU tests"
  local require=1
  [ "$cpu_only" = 1 ] && require=0
  KVTWIN_REQUIRE_GPU=$require "$build/tests_cuda/cuda_gpu_test" --gtest_brief=1 \
    > "$out/tests_gpu.log" 2>&1 || rc=1
  tail -n 3 "$out/tests_gpu.log"
  [ "$rc" = 0 ] || { grep -E "FAILED|Failure" "$out"/tests_*.log | head -n 30; }
  return "$rc"
}

do_bench() {
  local slug date dir json baseline rc=0 bin
  bin="$build/tests_cuda/cuda_kv_copy_gpu_bench"
  [ "$cpu_only" = 1 ] && bin="$build/tests_cuda/cuda_kv_copy_cpu_bench"
  log "benchmarks: $(basename "$bin")"
  # shellcheck disable=SC2086
  "$bin" --benchmark_out="$out/kv_copy.json" --benchmark_out_format=json \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_min_time=0.1 \
    ${KVTWIN_BENCH_ARGS:-} > "$out/bench.log" 2>&1 || { tail -n 20 "$out/bench.log"; return 1; }
  slug="$(gpu_slug "$out/kv_copy.json")"
  date="$(date -u +%Y-%m-%d)"
  if [ "$cpu_only" = 1 ]; then
    dir="$out/$slug/$date"  # never into reports/: no GPU figures were taken
  else
    dir="$root/reports/kernels/$slug/$date"
    mkdir -p "$out/$slug/$date"
    cp "$out/kv_copy.json" "$out/$slug/$date/kv_copy.json"  # what the device tool brings back
  fi
  mkdir -p "$dir"
  json="$dir/kv_copy.json"
  cp "$out/kv_copy.json" "$json"
  rm -f "$out/kv_copy.json"
  log "results: $json"
  # The newest earlier run for this GPU is the baseline.
  baseline="$(ls -d "$(dirname "$dir")"/*/ 2>/dev/null | sort | grep -v "/$date/\$" | tail -n 1)"
  baseline="${baseline:+${baseline}kv_copy.json}"
  if [ -n "$baseline" ] && [ -f "$baseline" ]; then
    python3 cuda/gpu/compare_baseline.py "$baseline" "$json" > "$out/compare.txt" 2>&1 || rc=3
    local gbench="$prefix/usr/share/benchmark/compare.py"
    if [ -f "$gbench" ] && python3 -c "import scipy, numpy" 2>/dev/null; then
      python3 "$gbench" -a benchmarks "$baseline" "$json" > "$out/compare_gbench.txt" 2>&1 || true
    fi
  else
    baseline=""
    echo "no earlier baseline for $slug: this run is the first" > "$out/compare.txt"
  fi
  python3 cuda/gpu/summarize.py "$json" ${baseline:+--baseline "$baseline"} > "$out/summary.txt" || rc=1
  return "$rc"
}

rc=0
case "$stage" in
  build) do_build || rc=1 ;;
  test) do_test || rc=1 ;;
  bench) do_bench || rc=$? ;;
  all)
    do_build || { log "build failed"; exit 1; }
    do_test || rc=1
    do_bench; brc=$?
    [ "$rc" = 0 ] && rc=$brc
    ;;
  *) log "unknown stage $stage (all|build|test|bench)"; exit 1 ;;
esac
[ -f "$out/compare.txt" ] && cat "$out/compare.txt"
[ -f "$out/summary.txt" ] && [ "$stage" != build ] && [ "$stage" != test ] && cat "$out/summary.txt"
log "exit $rc; logs in $out"
exit "$rc"
