#!/usr/bin/env bash
# The long-document-QA anchor (vLLM PR #10874 / #11533): 8, 16, 32 and 64 documents, each under
# three engine set-ups: no prefix caching, prefix caching, prefix caching + CPU offloading
# (LMCache's CPU tier sized for 30 documents). Prints the timed pass's makespan and hit rates
# beside the PR's run times, and each normalised by the no-caching run of the same N.
#
#   bash reports/anchors/run_long_doc_qa.sh [KVTWIN] [WORKDIR]     (from the repo root)
set -euo pipefail
kvtwin="${1:-build/release/kvtwin}"
work="${2:-$(mktemp -d)}"
here="$(dirname "$0")"
mkdir -p "$work"
declare -A sets=(
  [vllm]="--set vllm.enable_prefix_caching=false"
  [prefix]=""
  [offload]="--set lmcache.enabled=true")
for n in 8 16 32 64; do
  python3 "$here/long_doc_qa_trace.py" "$n" "$work/docs_$n.csv"
  for mode in vllm prefix offload; do
    # shellcheck disable=SC2086
    "$kvtwin" run -q --scenario "$here/long_doc_qa_a100.toml" --trace "$work/docs_$n.csv" \
      ${sets[$mode]} --out "$work/run_${n}_$mode" > /dev/null
  done
done
python3 - "$work" <<'PY'
import csv, json, sys
work = sys.argv[1]
# vLLM PR #11533's table (seconds): vLLM, + prefix caching, + prefix caching + CPU offloading
pr = {8: (13.66, 0.49, 0.5), 16: (27.28, 7.22, 2.3), 32: (54.54, 49.96, 17.26),
      64: (109.27, 126.08, 110.96)}
start = 100000.0
print(f"{'docs':>4} | {'PR: vLLM':>8} {'+PC':>6} {'+PC+CPU':>7} | {'kvtwin: vLLM':>12} {'+PC':>6} "
      f"{'+PC+CPU':>7} | {'PR normalised':>17} | {'kvtwin normalised':>17} | hit GPU / CPU (+PC+CPU)")
for n, (a, b, c) in pr.items():
    t, hits = {}, {}
    for mode in ("vllm", "prefix", "offload"):
        d = f"{work}/run_{n}_{mode}"
        with open(f"{d}/requests.csv") as f:
            rows = list(csv.DictReader(f))
        end = max(float(r["finish_s"]) for r in rows)
        t[mode] = end - start
        s = json.load(open(f"{d}/summary.json"))
        hits[mode] = (s["gpu_prefix_cache"]["hit_rate"], s["lmcache"]["cpu"]["hit_rate"])
    k = (t["vllm"], t["prefix"], t["offload"])
    print(f"{n:>4} | {a:8.2f} {b:6.2f} {c:7.2f} | {k[0]:12.2f} {k[1]:6.2f} {k[2]:7.2f} | "
          f"{b / a:8.3f} {c / a:8.3f} | {k[1] / k[0]:8.3f} {k[2] / k[0]:8.3f} | "
          f"{hits['offload'][0]:.3f} / {hits['offload'][1]:.3f}")
PY
