#!/usr/bin/env python3
"""Compares a kernel benchmark run with a baseline run (Google Benchmark JSON, same GPU).

Flags every benchmark whose GBps fell by more than the threshold (default 5%) and exits 1 when
there is one. Stdlib only, so it runs where Google Benchmark's compare.py (scipy) cannot; the
GPU script runs that one too when scipy is present.

Usage: compare_baseline.py BASELINE.json NEW.json [--threshold 0.05]
"""
import argparse
import sys

import bench_json


def main():
    p = argparse.ArgumentParser()
    p.add_argument("baseline")
    p.add_argument("new")
    p.add_argument("--threshold", type=float, default=0.05)
    a = p.parse_args()
    base_ctx, base = bench_json.load(a.baseline)
    new_ctx, new = bench_json.load(a.new)
    if base_ctx.get("gpu_name") != new_ctx.get("gpu_name"):
        print(f"note: baseline GPU {base_ctx.get('gpu_name')!r}, new {new_ctx.get('gpu_name')!r}")
    slower, faster, compared = [], [], 0
    for name in sorted(set(base) & set(new)):
        old_v, new_v = bench_json.gbps(base[name]), bench_json.gbps(new[name])
        if not old_v or new_v is None:
            continue
        compared += 1
        change = new_v / old_v - 1
        if change < -a.threshold:
            slower.append((change, name, old_v, new_v))
        elif change > a.threshold:
            faster.append((change, name, old_v, new_v))
    print(f"compared {compared} benchmarks with {a.baseline}: "
          f"{len(slower)} slower and {len(faster)} faster by more than {a.threshold:.0%}")
    for change, name, old_v, new_v in sorted(slower):
        print(f"  SLOWER {change:+7.1%}  {name}: {old_v:.1f} -> {new_v:.1f} GB/s")
    only_base = sorted(set(base) - set(new))
    if only_base:
        print(f"  {len(only_base)} baseline benchmarks missing from the new run, e.g. {only_base[0]}")
    return 1 if slower else 0


if __name__ == "__main__":
    sys.exit(main())
