#!/usr/bin/env bash
# A/B of two builds of the kernel benchmark on one machine, in one call: a kernel change is judged
# against the code before it on the same GPU, not against a baseline from another machine.
#
#   bash cuda/gpu/ab_bench.sh OLD_DIR NEW_DIR [FILTER]
#
# OLD_DIR / NEW_DIR hold tests_cuda/cuda_kv_copy_gpu_bench (e.g. a carried build/gpu-old and
# build/gpu from `check.sh build`). FILTER defaults to 22 cases that run the copy kernel at device
# speed or over the link: every Llama-3.1-8B NHD device-only gather / scatter, the 70B TP4 and
# DeepSeek-V3 ones at 4,096 and 32,768 tokens, and the 8B zero-copy store / retrieve. Order:
# old, new, old, new (two processes each, so a drift shows as a disagreement between a build's
# two runs). Writes ab_{old,new}_{1,2}.json under $OUT (or build/gpu-out) and prints,
# per benchmark, the median GB/s of each run and new/old.
set -uo pipefail
source "$(dirname "$0")/paths.sh"
old="$1"
new="$2"
filter="${3:-(_device/llama3.1-8b/NHD/|_device/(llama3.1-70b-tp4|deepseek-v3)/[^/]+/[^/]+/tokens:(4096|32768)(/|$)|zero_copy/llama3.1-8b/NHD/KV_2LTD/tokens:(4096|32768)(/|$))}"
for run in 1 2; do
  for v in old new; do
    dir="$old"
    [ "$v" = new ] && dir="$new"
    timeout -k 5 "${KVTWIN_AB_TIMEOUT:-90}" "$dir/tests_cuda/cuda_kv_copy_gpu_bench" \
      --benchmark_filter="$filter" --benchmark_repetitions=3 \
      --benchmark_report_aggregates_only=true --benchmark_min_time=0.05 \
      --benchmark_out="$out/ab_${v}_$run.json" --benchmark_out_format=json \
      > "$out/ab_${v}_$run.log" 2>&1 || echo "ab: $v run $run exit $?"
  done
done
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
runs = {}
for v in ("old", "new"):
    for r in (1, 2):
        p = f"{out}/ab_{v}_{r}.json"
        if not os.path.exists(p):
            continue
        for b in json.load(open(p))["benchmarks"]:
            if b.get("aggregate_name") == "median":
                name = b["run_name"].replace("/manual_time", "")
                runs.setdefault(name, {})[f"{v}{r}"] = b["GBps"]
print(f"{'benchmark':58} {'old1':>7} {'old2':>7} {'new1':>7} {'new2':>7} {'new/old':>7}")
for name, g in sorted(runs.items()):
    o = [g[k] for k in ("old1", "old2") if k in g]
    n = [g[k] for k in ("new1", "new2") if k in g]
    ratio = (sum(n) / len(n)) / (sum(o) / len(o)) if o and n else 0
    cells = " ".join(f"{g.get(k, 0):7.0f}" for k in ("old1", "old2", "new1", "new2"))
    print(f"{name:58} {cells} {ratio:7.3f}")
PY
