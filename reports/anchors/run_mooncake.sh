#!/usr/bin/env bash
# The Mooncake FAST'25 anchors (research/anchors.md C.1) on the two shipped Mooncake traces:
#   Table 2   prompt / output means and the infinite-cache reuse ("cache ratio"): kvtwin trace stats
#   Fig. 9    hit rate against cache capacity in tokens, request order, no timing: kvtwin
#             cache-replay of vLLM's GPU prefix cache (16-token blocks, its LRU free queue) at
#             0.3 M ... 100 M tokens (Llama-3.1-8B: 128 KiB per token)
#   Fig. 10   10 prefill nodes of 3 M tokens each, output length 1: a global pool (one 30 M-token
#             cache, as cache-replay) against local pools (kvtwin run at the trace's own rate,
#             10 instances, each a 3 M-token GPU cache, round-robin and prefix-aware routing)
#
#   bash reports/anchors/run_mooncake.sh [KVTWIN] [WORKDIR]     (from the repo root; ~2 min)
set -euo pipefail
kvtwin="${1:-build/release/kvtwin}"
work="${2:-$(mktemp -d)}"
mkdir -p "$work"
scenario=scenarios/llama31_8b_h100_cpu.toml
tokens_to_gib() { python3 -c "import sys; print(','.join(f'{float(t) * 131072 / 2**30:.4f}' for t in sys.argv[1:]))" "$@"; }
for t in conversation synthetic; do
  trace=traces/mooncake_fast25/${t}_trace.jsonl
  echo "== $t: kvtwin trace stats"
  "$kvtwin" trace stats "$trace" | grep -E "prompt tokens|output tokens|prefix reuse"
  echo "== $t: Fig. 9 (cache-replay, GPU prefix cache alone)"
  "$kvtwin" cache-replay -q --scenario $scenario --set lmcache.enabled=false --trace "$trace" \
    --tier gpu --capacity-gb "$(tokens_to_gib 300000 1000000 3000000 10000000 30000000 50000000 100000000)" \
    -j 2 --csv "$work/fig9_$t.csv"
  python3 - "$work/fig9_$t.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
top = max(float(r["gpu_hit_rate"]) for r in rows)
for r in rows:
    h = float(r["gpu_hit_rate"])
    print(f"  {int(float(r['capacity_tokens'])):>10,} tokens  hit {100 * h:5.2f} %  "
          f"= {100 * h / top:5.1f} % of the 100 M-token plateau")
PY
  echo "== $t: Fig. 10 local pools (kvtwin run, 10 instances x 3 M tokens, output length 1)"
  python3 -c "
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l); d['output_length'] = 1; print(json.dumps(d))" "$trace" > "$work/${t}_out1.jsonl"
  for router in round_robin prefix_aware; do
    "$kvtwin" run -q --scenario $scenario --trace "$work/${t}_out1.jsonl" \
      --set lmcache.enabled=false --set cluster.instances=10 --set cluster.router=$router \
      --set vllm.num_gpu_blocks=187500 --set workload.rate_scale=1 --set output.plots=false --out "$work/fig10_${t}_$router" \
      > /dev/null
    python3 -c "
import json, sys
s = json.load(open(sys.argv[1] + '/summary.json'))
print(f'  {sys.argv[2]:>13}: GPU prefix hit {100 * s[\"gpu_prefix_cache\"][\"hit_rate\"]:5.2f} %')" \
      "$work/fig10_${t}_$router" $router
  done
done
