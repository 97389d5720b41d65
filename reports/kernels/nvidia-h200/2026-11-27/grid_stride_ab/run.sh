#!/usr/bin/env bash
# Grid-stride experiment: old kernel (build/gpu-old) vs the grid-stride build (build/gpu-new) with
# KVTWIN_KV_COPY_BLOCKS_PER_SM unset (full grid) and 1, 2, 4, 8. Run from the repo root, with
# build/gpu-old holding main's stripped binaries and build/gpu-new those built with
# grid_stride.patch applied (both carried, with build/gpu-deps).
set -uo pipefail
source cuda/gpu/paths.sh
bash cuda/gpu/check.sh device > "$out/device.log" 2>&1 || true
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >> "$out/device.log" 2>&1
# correctness of the looping kernel: the kernel matrix and copy tests with one block per SM
for cap in 1 0; do
  KVTWIN_KV_COPY_BLOCKS_PER_SM=$cap timeout -k 5 120 build/gpu-new/tests_cuda/cuda_gpu_test --gtest_brief=1 \
    --gtest_filter='AllLayouts/GpuMatrix.*:KvCopyGpu.*:CudaMoverGpu.*:Paths/EngineGpu.*' > "$out/test_cap$cap.log" 2>&1
  echo "test cap=$cap rc=$? $(grep -E 'PASSED|FAILED' "$out/test_cap$cap.log" | head -3 | tr '\n' ' ')"
done
filter='(_device/llama3.1-8b/NHD/|_device/(llama3.1-70b-tp4|deepseek-v3)/[^/]+/[^/]+/tokens:(4096|32768)(/|$)|zero_copy/llama3.1-8b/NHD/KV_2LTD/tokens:(4096|32768)(/|$))'
bench() { # tag dir cap
  KVTWIN_KV_COPY_BLOCKS_PER_SM=$3 timeout -k 5 90 "$2/tests_cuda/cuda_kv_copy_gpu_bench" \
    --benchmark_filter="$filter" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_min_time=0.05 --benchmark_out="$out/gs_$1.json" --benchmark_out_format=json \
    > "$out/gs_$1.log" 2>&1 || echo "bench $1 exit $?"
}
SECONDS=0
bench old1 build/gpu-old 0; echo "old1 ${SECONDS}s"
bench full build/gpu-new 0
bench c1 build/gpu-new 1
bench c2 build/gpu-new 2
bench c4 build/gpu-new 4
bench c8 build/gpu-new 8
bench old2 build/gpu-old 0
bench c2b build/gpu-new 2
echo "bench total ${SECONDS}s"
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
tags = ["old1", "old2", "full", "c1", "c2", "c2b", "c4", "c8"]
rows = {}
for t in tags:
    p = f"{out}/gs_{t}.json"
    if not os.path.exists(p): continue
    for b in json.load(open(p))["benchmarks"]:
        if b.get("aggregate_name") == "median":
            rows.setdefault(b["run_name"].replace("/manual_time", ""), {})[t] = b["GBps"]
print(f"{'benchmark':58} " + " ".join(f"{t:>6}" for t in tags))
for n, g in sorted(rows.items()):
    print(f"{n:58} " + " ".join(f"{g.get(t, 0):6.0f}" for t in tags))
PY
