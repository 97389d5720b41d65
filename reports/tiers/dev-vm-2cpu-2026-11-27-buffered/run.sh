#!/usr/bin/env bash
# The disk tier's buffered mode against O_DIRECT, and dd's buffered write / page-cache read, on
# the development VM (2026-11-27). Run from the repository root after the release build.
set -u
D=reports/tiers/dev-vm-2cpu-2026-11-27-buffered
build/release/tests/cuda/tiers/tiers_bench --no-redis --rounds 5 > $D/tiers_bench.txt 2>&1
mkdir -p build/bench_scratch
for i in 1 2 3 4 5; do
  dd if=/dev/zero of=build/bench_scratch/pc.bin bs=32M count=16 2>&1 | tail -1
  dd if=build/bench_scratch/pc.bin of=/dev/null bs=32M 2>&1 | tail -1
  rm -f build/bench_scratch/pc.bin
done > $D/dd_buffered.txt
