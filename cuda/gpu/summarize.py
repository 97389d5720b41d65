#!/usr/bin/env python3
"""Prints the short table that ends cuda/gpu/check.sh: the measured ceilings, the main cases,
and which of issue 5's targets were met.

Targets: gather/scatter between paged and device chunks >= 90% of the measured D2D copy
bandwidth at Llama-3.1-8B shapes with >= 4,096 tokens; staged and zero-copy GPU<->pinned >= 90%
of the measured pinned memcpy bandwidth (checked at >= 4,096 tokens, every model).

Usage: summarize.py RUN.json [--baseline BASELINE.json]
"""
import argparse
import sys

import bench_json

TARGET = 0.90
SHOWN_TOKENS = (4096, 32768)


def is_target(op, model, tokens):
    if tokens is None or tokens < 4096:
        return False
    if op in ("gather_device", "scatter_device"):
        return model == "llama3.1-8b"
    return op.startswith("store_") or op.startswith("retrieve_")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run")
    p.add_argument("--baseline")
    a = p.parse_args()
    ctx, rows = bench_json.load(a.run)
    base = bench_json.load(a.baseline)[1] if a.baseline else {}
    print(f"kvtwin kernel benchmarks: {ctx.get('gpu_name', ctx.get('host_name', '?'))}, "
          f"{ctx.get('date', '?')}, driver {ctx.get('cuda_driver', '-')}")
    if "ceiling_d2d_GBps" in ctx:
        print(f"ceilings: d2d {float(ctx['ceiling_d2d_GBps']):.0f} GB/s (read+written), "
              f"h2d {float(ctx['ceiling_h2d_GBps']):.1f} GB/s, "
              f"d2h {float(ctx['ceiling_d2h_GBps']):.1f} GB/s")
    print(f"{'benchmark':<58} {'GB/s':>8} {'frac':>6} {'vs base':>8}")
    met, missed, errors = 0, [], []
    def order(name):
        op, model, layout, fmt, tokens = bench_json.split_name(name)
        return (op != "ceiling", op, model, layout, fmt, tokens or 0)

    for name in sorted(rows, key=order):
        row = rows[name]
        op, model, layout, fmt, tokens = bench_json.split_name(name)
        if "error" in row:
            errors.append(f"{name}: {row['error']}")
            continue
        frac = row.get("frac_of_ceiling")
        if frac is not None and is_target(op, model, tokens):
            if float(frac) >= TARGET:
                met += 1
            else:
                note = ""
                same = row.get("frac_of_same_size_copy")
                if same is not None:
                    note = f" ({float(same):.2f} of a cudaMemcpy of the same bytes)"
                missed.append(f"{name} at {float(frac):.2f}{note}")
        main_case = (layout in ("NHD", "MLA") and fmt in ("KV_2LTD", "KV_MLA")
                     and tokens in SHOWN_TOKENS) or op == "ceiling" or op.startswith("cpu_")
        if not main_case:
            continue
        v = bench_json.gbps(row)
        old = bench_json.gbps(base[name]) if name in base and "error" not in base[name] else None
        change = f"{v / old - 1:+.1%}" if old and v is not None else "-"
        frac_s = f"{float(frac):.2f}" if frac is not None else "-"
        print(f"{name:<58} {v if v is not None else float('nan'):>8.1f} {frac_s:>6} {change:>8}")
    if met or missed:
        print(f"targets (>= {TARGET:.0%} of ceiling): {met} met, {len(missed)} missed")
        for m in missed:
            print(f"  MISSED {m}")
    for e in errors:
        print(f"  ERROR {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
