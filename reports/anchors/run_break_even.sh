#!/usr/bin/env bash
# The reuse-versus-recompute break-even of Mooncake FAST'25 (research/anchors.md C.1): the second
# request of break_even_trace.jsonl shares an 8,192-token prefix with the first; with LMCache it
# loads that prefix from host memory, without it recomputes it. Its time to first token under
# load is affine in 1/B, so three bandwidths give the line and a fourth checks it; the break-even
# is where the line meets the recompute time. Twice: the scenario as written (compute efficiency
# 0.6, NCCL all-reduce at 150 GB/s), and under the paper's assumptions (peak FLOP/s, free
# all-reduce), where the paper's formula gives about 6 GB/s.
#
#   bash reports/anchors/run_break_even.sh [KVTWIN] [WORKDIR]     (from the repo root)
set -euo pipefail
kvtwin="${1:-build/release/kvtwin}"
work="${2:-$(mktemp -d)}"
here="$(dirname "$0")"
mkdir -p "$work"
ttft() {  # out-dir, sets...: the second request's TTFT in ms
  local out="$1"
  shift
  "$kvtwin" run -q --scenario "$here/break_even_a800.toml" --trace "$here/break_even_trace.jsonl" \
    "$@" --out "$out" > /dev/null
  python3 -c "
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1] + '/requests.csv')))
print(rows[1]['ttft_ms'])" "$out"
}
for variant in as_written paper; do
  extra=()
  if [ $variant = paper ]; then
    extra=(--set gpu.compute_efficiency=1 --set gpu.allreduce_gbps=100000 --set gpu.allreduce_latency_us=0)
  fi
  recompute=$(ttft "$work/${variant}_recompute" "${extra[@]}" --set lmcache.enabled=false)
  loads=()
  for b in 0.25 0.5 1 2; do
    loads+=("$b:$(ttft "$work/${variant}_load_$b" "${extra[@]}" --set links.pcie_h2d_gbps=$b)")
  done
  python3 - "$variant" "$recompute" "${loads[@]}" <<'PY'
import sys
variant, recompute = sys.argv[1], float(sys.argv[2])
pts = [(float(b), float(t)) for b, t in (a.split(":") for a in sys.argv[3:])]
# TTFT = fixed + slope / B, from the points at 0.5 and 2 GB/s; the others check the line
(b1, t1), (b2, t2) = pts[1], pts[3]
slope = (t1 - t2) / (1 / b1 - 1 / b2)
fixed = t1 - slope / b1
worst = max(abs(fixed + slope / b - t) for b, t in pts)
per_rank = slope / (recompute - fixed)
print(f"{variant}: recompute TTFT {recompute:.1f} ms; load TTFT = {fixed:.1f} ms + "
      f"{slope:.1f} MB / B (line off by at most {worst:.2f} ms over "
      f"{', '.join(f'{b:g}' for b, _ in pts)} GB/s per rank)")
print(f"  break-even: {per_rank:.3f} GB/s per rank = {8 * per_rank:.2f} GB/s for the node's 8 links")
PY
done
