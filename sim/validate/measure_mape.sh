#!/bin/bash
# Measures how well kvtwin's calibrated link models predict this machine's real tiers (issue 6:
# MAPE <= 10% per transfer class for objects >= 1 MiB, validated on the machine calibrated).
#
#   sim/validate/measure_mape.sh [OUT_DIR]
#
# Starts a redis-server on a free 127.0.0.1 port (no persistence), then, on one disk directory:
#   1. kvtwin calibrate                  -> profile.toml, calibrate.txt, calibrate_samples.csv
#   2. kvtwin validate (synthetic mix)   -> synthetic/ (report.md, samples.csv, plot), synthetic.txt
#   3. kvtwin validate --scenario: scenarios/llama31_70b_tp4_cpu_disk_redis.toml on the first 300
#      requests of the Azure conversation trace with 8 shared 4096-token prefixes, cut to one
#      instance, 2 layers (2 MiB chunks of all ranks) and GPU / CPU / disk pools small enough that
#      chunks come back from the disk and Redis
#                                        -> scenario/ (report, link_models/, run/), scenario.txt
# and writes machine.txt (CPU, memory, disk, load before and after) and summary.md (the
# per-class MAPE of both validations) under OUT_DIR, by default
# reports/validate/<machine>-<date>/. Run it from a release build (cmake --preset release &&
# cmake --build --preset release --target kvtwin) on a quiet machine: other processes' load
# shows up as error, not as a property of the link.
#
# Environment: KVTWIN (binary, default build/release/kvtwin), DISK_DIR (the disk tier directory,
# on the disk to be measured; default a fresh directory under the build tree), CALIBRATE_ARGS,
# SYNTH_ARGS, SCENARIO_ARGS (extra arguments), MACHINE (name used in OUT_DIR).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
K=${KVTWIN:-$ROOT/build/release/kvtwin}
MACHINE=${MACHINE:-$(hostname -s)}
OUT=${1:-$ROOT/reports/validate/$MACHINE-$(date -u +%F)}
DISK_DIR=${DISK_DIR:-$ROOT/build/measure_mape_disk.$$}
[ -x "$K" ] || { echo "measure_mape.sh: no kvtwin binary at $K (build it first)" >&2; exit 2; }
command -v redis-server > /dev/null || { echo "measure_mape.sh: redis-server not installed" >&2; exit 2; }
mkdir -p "$OUT" "$DISK_DIR"
OUT=$(cd "$OUT" && pwd)

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=redis://127.0.0.1:$PORT
redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no > "$DISK_DIR/redis.log" 2>&1 &
REDIS_PID=$!
cleanup() {
  kill "$REDIS_PID" 2> /dev/null || true
  wait "$REDIS_PID" 2> /dev/null || true
  rm -rf "$DISK_DIR"
}
trap cleanup EXIT
for _ in $(seq 50); do
  redis-cli -p "$PORT" ping > /dev/null 2>&1 && break
  sleep 0.1
done
redis-cli -p "$PORT" ping > /dev/null

{
  echo "date: $(date -u '+%F %T') UTC"
  echo "cpu: $(nproc) x $(lscpu | sed -n 's/^Model name: *//p')"
  echo "memory: $(free -g | awk '/^Mem:/ {print $2}') GiB"
  echo "disk directory: $DISK_DIR on $(df -h --output=source,fstype,size "$DISK_DIR" | tail -1)"
  echo "redis: $(redis-server --version)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT/machine.txt"

echo "== calibrate (a few minutes)" >&2
# shellcheck disable=SC2086
"$K" calibrate --disk-path "$DISK_DIR/tier" --remote-url "$URL" -o "$OUT/profile.toml" \
  --samples "$OUT/calibrate_samples.csv" ${CALIBRATE_ARGS:-} > "$OUT/calibrate.txt"

echo "== validate: synthetic mix" >&2
# shellcheck disable=SC2086
"$K" validate --profile "$OUT/profile.toml" --disk-path "$DISK_DIR/tier" --remote-url "$URL" \
  --repeats 3 -o "$OUT/synthetic" ${SYNTH_ARGS:-} > "$OUT/synthetic.txt"

echo "== validate: scenario slice" >&2
# shellcheck disable=SC2086
"$K" validate --scenario "$ROOT/scenarios/llama31_70b_tp4_cpu_disk_redis.toml" \
  --trace "$ROOT/traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv" --max-requests 300 \
  --set workload.prefix_groups=8 --set workload.prefix_tokens=4096 --set cluster.instances=1 \
  --set model.num_layers=2 --set vllm.num_gpu_blocks=600 --set lmcache.max_local_cpu_size_gb=0.01 \
  --set lmcache.max_local_disk_size_gb=0.02 --set output.plots=false \
  --profile "$OUT/profile.toml" --disk-path "$DISK_DIR/tier" --remote-url "$URL" \
  -o "$OUT/scenario" ${SCENARIO_ARGS:-} \
  > "$OUT/scenario.txt"
rm -rf "$OUT/scenario/run/trace.json"  # the timeline: large, and not what this measures

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
header() {
  echo "| class | objects | transfers | MAPE % | bias % | p90 |e| % | max |e| % | measured ms | predicted ms |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
}
table() {  # the per-class rows for objects >= 1 MiB of a validate report, every transfer
  header
  sed -n '/target: MAPE/,/^Per class/p' "$1" | grep '^| [a-z_]* | >=1M |' || true
}
medians() {  # the same, one row per repeated point
  header
  sed -n '/one row per repeated point/,/^Per class and object size/p' "$1" |
    grep '^| [a-z_]* | >=1M |' || true
}
{
  echo "# kvtwin link-model accuracy on $MACHINE"
  echo
  sed 's/^/    /' "$OUT/machine.txt"
  echo
  echo "## Synthetic mix (kvtwin validate --profile profile.toml --repeats 3)"
  echo
  echo "Every transfer:"
  echo
  table "$OUT/synthetic/report.md"
  echo
  echo "Each repeated point once, median measured vs median predicted:"
  echo
  medians "$OUT/synthetic/report.md"
  echo
  echo "## Scenario slice: the simulator's links (latency + bandwidth from profile.toml [links])"
  echo
  table "$OUT/scenario/report.md"
  echo
  echo "## Scenario slice: the same transfers against the profile's link models"
  echo
  table "$OUT/scenario/link_models/report.md"
} > "$OUT/summary.md"
cat "$OUT/summary.md"
echo "reports: $OUT" >&2
