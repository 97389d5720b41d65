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
# Stages: check.sh [all|device|build|test|bench|calibrate|sanitize]  (default all: every stage in that
# order). Environment:
#   KVTWIN_CUDA_ARCH      CMAKE_CUDA_ARCHITECTURES (default 90: sm_90 SASS + compute_90 PTX)
#   KVTWIN_BENCH_ARGS     extra Google Benchmark flags (e.g. --benchmark_filter=llama3.1-8b)
#   KVTWIN_PREBUILT=DIR   skip the build and run the binaries under DIR/tests_cuda/ (built on the
#                         Debian machine with this same project; the fallback if the GPU
#                         machine cannot build)
#   KVTWIN_FALLBACK=DIR   binaries as for KVTWIN_PREBUILT, used only when the build here fails
#                         (a stripped copy of them is 4 MB: carry it with the first try)
#   KVTWIN_CPU_ONLY=1     no GPU: run the CPU benchmark instead, write under build/gpu-out only
#                         (exercises the JSON, comparison and table on a machine without a GPU)
#   KVTWIN_SANITIZE_FILTER  the gtest filter run under compute-sanitizer's memcheck (stage
#                         sanitize; default: the kernel matrix, the copy tests, the transfer
#                         engine and the mover)
#   KVTWIN_TEST_TIMEOUT, KVTWIN_BENCH_TIMEOUT, KVTWIN_CALIBRATE_TIMEOUT,
#   KVTWIN_SANITIZE_TIMEOUT  seconds per binary (default 240, 360, 120, 150): a hang costs one
#                         stage, not the lease
# With OUT set (the device tool), the logs are packed into $OUT/logs.tgz at the end, so that what
# comes back stays within the tool's 8 files: logs.tgz, compare.txt, summary.txt,
# pcie_samples.csv and <gpu>/<date>/kv_copy.json.
# Exit status: 0 when everything passed and nothing regressed; 1 on a build or test failure;
# 3 when the comparison found a > 5% slowdown.
set -uo pipefail
source "$(dirname "$0")/paths.sh"
stage="${1:-all}"
cpu_only="${KVTWIN_CPU_ONLY:-0}"
log() { echo "check.sh: $*" >&2; }
# Runs a binary under a time limit; 124 (or 137) means it ran past it.
limited() {
  local secs="$1"
  shift
  timeout -k 10 "$secs" "$@"
}
# libbenchmark.so.1 comes from the carried prefix (paths.sh puts it on LD_LIBRARY_PATH; prebuilt
# binaries carry this machine's rpath).

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

# What the machine is: the GPU, its driver, clocks and PCIe link (the link decides h2d / d2h).
do_device() {
  {
    date -u +%Y-%m-%dT%H:%M:%SZ
    uname -a
    grep -E '^(PRETTY_NAME)=' /etc/os-release 2>/dev/null
    echo "cpus: $(nproc)"
    free -g 2>/dev/null | head -n 2
    command -v nvcc >/dev/null && nvcc --version | tail -n 2
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
      nvidia-smi topo -m 2>/dev/null
    else
      echo "no nvidia-smi"
    fi
  } > "$out/device.log" 2>&1
  sed -n '1,3p;/^name,/,/^$/p' "$out/device.log" | head -n 8
}

do_build() {
  unpack_deps || { log "unpacking the carried .deb files failed"; return 1; }
  if [ -n "${KVTWIN_PREBUILT:-}" ]; then
    log "using prebuilt binaries in $build"
    return 0
  fi
  log "configuring (CUDA arch ${KVTWIN_CUDA_ARCH:-90})"
  local ok=1
  if ! cmake -S cuda/gpu -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_PREFIX_PATH="$prefix/usr" -DCMAKE_CUDA_ARCHITECTURES="${KVTWIN_CUDA_ARCH:-90}" \
    > "$out/configure.log" 2>&1; then
    tail -n 30 "$out/configure.log"
    ok=0
  else
    log "building"
    cmake --build "$build" -j "$(nproc)" > "$out/build.log" 2>&1 || { tail -n 40 "$out/build.log"; ok=0; }
  fi
  [ "$ok" = 1 ] && return 0
  if [ -n "${KVTWIN_FALLBACK:-}" ] && [ -x "$KVTWIN_FALLBACK/tests_cuda/cuda_gpu_test" ]; then
    log "the build failed here: using the carried binaries in $KVTWIN_FALLBACK"
    build="$KVTWIN_FALLBACK"
    return 0
  fi
  return 1
}

do_test() {
  local rc=0
  log "CPU tests"
  RC_PARAMS=max_success=1000 limited "${KVTWIN_TEST_TIMEOUT:-240}" \
    "$build/tests_cuda/cuda_layout_test" --gtest_brief=1 \
    > "$out/tests_cpu.log" 2>&1 || rc=1
  tail -n 3 "$out/tests_cpu.log"
  log "GPU tests"
  local require=1
  [ "$cpu_only" = 1 ] && require=0
  KVTWIN_REQUIRE_GPU=$require KVTWIN_PCIE_CALIBRATE="$build/cuda/kvtwin_pcie_calibrate" \
    limited "${KVTWIN_TEST_TIMEOUT:-240}" "$build/tests_cuda/cuda_gpu_test" --gtest_brief=1 \
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
  limited "${KVTWIN_BENCH_TIMEOUT:-360}" \
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

# The GPU <-> CPU link through the real mover: `kvtwin calibrate`'s samples CSV, fitted on the
# Debian machine with `kvtwin calibrate --refit pcie_samples.csv` (cuda/tools/pcie_calibrate.cc).
do_calibrate() {
  if [ "$cpu_only" = 1 ]; then log "calibrate: skipped without a GPU"; return 0; fi
  log "PCIe calibration through CudaMover"
  local rc=0
  limited "${KVTWIN_CALIBRATE_TIMEOUT:-120}" "$build/cuda/kvtwin_pcie_calibrate" \
    --out "$out/pcie_samples.csv" > "$out/calibrate.log" 2>&1 || rc=$?
  tail -n 40 "$out/calibrate.log"
  return "$rc"
}

# compute-sanitizer's memcheck over the kernels' tests: an out-of-bounds or misaligned access
# that happens to land in mapped memory passes the byte comparison but not this.
do_sanitize() {
  if [ "$cpu_only" = 1 ]; then log "sanitize: skipped without a GPU"; return 0; fi
  local cs
  cs="$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)"
  if [ -z "$cs" ]; then log "sanitize: compute-sanitizer not found"; return 1; fi
  log "compute-sanitizer memcheck"
  local rc=0
  KVTWIN_REQUIRE_GPU=1 limited "${KVTWIN_SANITIZE_TIMEOUT:-150}" "$cs" --tool memcheck \
    --error-exitcode 9 "$build/tests_cuda/cuda_gpu_test" --gtest_brief=1 \
    --gtest_filter="${KVTWIN_SANITIZE_FILTER:-AllLayouts/GpuMatrix.*:KvCopyGpu.*:CudaMoverGpu.*:Paths/EngineGpu.*}" \
    > "$out/sanitize.log" 2>&1 || rc=$?
  grep -E "ERROR SUMMARY|tests from|PASSED|FAILED" "$out/sanitize.log" | tail -n 4
  [ "$rc" = 0 ] || log "sanitize: exit $rc"
  return "$rc"
}

# The device tool brings back at most 8 files: the logs travel as one archive.
pack_logs() {
  [ -n "${OUT:-}" ] || return 0
  (cd "$out" && ls ./*.log >/dev/null 2>&1 && tar czf logs.tgz ./*.log && rm -f ./*.log)
}

rc=0
case "$stage" in
  device) do_device ;;
  build) do_build || rc=1 ;;
  test) do_test || rc=1 ;;
  bench) do_bench || rc=$? ;;
  calibrate) do_calibrate || rc=1 ;;
  sanitize) do_sanitize || rc=1 ;;
  all)
    do_device
    do_build || { log "build failed"; pack_logs; exit 1; }
    do_test || rc=1
    do_bench; brc=$?
    [ "$rc" = 0 ] && rc=$brc
    do_calibrate || { [ "$rc" = 0 ] && rc=1; }
    do_sanitize || { [ "$rc" = 0 ] && rc=1; }
    ;;
  *) log "unknown stage $stage (all|device|build|test|bench|calibrate|sanitize)"; exit 1 ;;
esac
pack_logs
[ -f "$out/compare.txt" ] && cat "$out/compare.txt"
[ -f "$out/summary.txt" ] && [ "$stage" != build ] && [ "$stage" != test ] && cat "$out/summary.txt"
log "exit $rc; logs in $out"
exit "$rc"
