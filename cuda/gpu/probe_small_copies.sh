#!/usr/bin/env bash
# An experiment for the GPU machine, after `check.sh build`: where the fixed cost of the small
# device-only copies goes (the four KV_T2D targets missed on the H100 and H200). It measures
#   1. the Llama-3.1-8B gather / scatter benchmarks (one-layer KV_T2D and all-layer KV_2LTD,
#      4,096 and 32,768 tokens) with the paged blocks shuffled (the benchmark's default) and in
#      address order (KVTWIN_BENCH_SLOTS=sequential): does the paged side's spread cost time?
#   2. Nsight Compute's full section set for one launch of the copy kernel in the 16-MiB one-layer
#      gather (both slot orders) and in the 512-MiB all-layer gather, which reaches 0.95.
# Writes probe_shuffled.json, probe_sequential.json and ncu_*.txt under $OUT (or build/gpu-out).
set -uo pipefail
source "$(dirname "$0")/paths.sh"
bench="$build/tests_cuda/cuda_kv_copy_gpu_bench"
filter='(gather|scatter)_device/llama3.1-8b/NHD/(KV_T2D|KV_2LTD)/tokens:(4096|32768)(/|$)'
for order in shuffled sequential; do
  KVTWIN_BENCH_SLOTS=$order timeout -k 5 90 "$bench" --benchmark_filter="$filter" \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_min_time=0.1 --benchmark_out="$out/probe_$order.json" \
    --benchmark_out_format=json > "$out/probe_$order.log" 2>&1 || echo "probe $order: exit $?"
done
ncu="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)"
if [ -z "$ncu" ]; then echo "probe: ncu not found"; exit 1; fi
profile() {  # name, slot order, benchmark filter
  KVTWIN_BENCH_SLOTS=$2 timeout -k 5 75 "$ncu" --clock-control none --set full \
    --kernel-name regex:kv_copy_kernel --launch-skip 2 --launch-count 1 --print-summary none \
    "$bench" --benchmark_filter="$3" --benchmark_min_time=0.01 \
    > "$out/ncu_$1.txt" 2>&1 || echo "ncu $1: exit $?"
}
profile t2d_4096_shuffled shuffled 'gather_device/llama3.1-8b/NHD/KV_T2D/tokens:4096(/|$)'
profile t2d_4096_sequential sequential 'gather_device/llama3.1-8b/NHD/KV_T2D/tokens:4096(/|$)'
profile 2ltd_32768_shuffled shuffled 'gather_device/llama3.1-8b/NHD/KV_2LTD/tokens:32768(/|$)'
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rows = {}
for order in ("shuffled", "sequential"):
    try:
        d = json.load(open(f"{out}/probe_{order}.json"))
    except Exception as e:
        print(f"probe_{order}.json: {e}")
        continue
    for b in d["benchmarks"]:
        if b.get("aggregate_name") == "median":
            rows.setdefault(b["run_name"].replace("/manual_time", ""), {})[order] = b
print(f"{'benchmark':52} {'shuffled':>9} {'sequent.':>9} {'kernel':>8} {'memcpy':>8}  GB/s")
for name, r in sorted(rows.items()):
    s, q = r.get("shuffled", {}), r.get("sequential", {})
    print(f"{name:52} {s.get('GBps', 0):9.0f} {q.get('GBps', 0):9.0f} "
          f"{s.get('kernel_GBps', 0):8.0f} {s.get('same_size_copy_GBps', 0):8.0f}")
PY
for f in "$out"/ncu_*.txt; do
  echo "== $(basename "$f")"
  grep -E "^\s+(Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per Thread|Grid Size|Waves Per SM|L2 Hit Rate|Elapsed Cycles)\s" "$f" | head -n 12
done
