#!/bin/bash
# The measurements behind reports/tiers/: run from the repository root.
set -e
K=build/release/kvtwin
R=build/rep   # copied here afterwards
uptime > $R/uptime_before.txt
$K calibrate --disk-path $R/disk --remote-url redis://127.0.0.1:16379 -o $R/profile.toml --samples $R/calibrate_samples.csv > $R/calibrate.txt 2>&1
$K validate --profile $R/profile.toml --disk-path $R/disk --remote-url redis://127.0.0.1:16379 -o $R/validate > $R/validate.txt 2>&1 || true
build/release/tests/cuda/tiers/tiers_bench --disk-path $R/bench --rounds 5 > $R/tiers_bench.txt 2>&1
uptime > $R/uptime_after.txt
