#!/usr/bin/env python3
"""How well a scenario's "latency + bytes / bandwidth" PCIe figures predict measured transfers.

Reads kvtwin_pcie_calibrate's samples (the CSV of `kvtwin calibrate --samples`; several files are
pooled), takes the median of each point (class, objects, object size), and prints per class the
mean absolute percentage error of t = latency + bytes / gbps against those medians, for all points
and for objects >= 1 MiB, and the mean signed error (positive: the figures are pessimistic).

Usage: link_error.py SAMPLES.csv [...] [--h2d-gbps 35] [--d2h-gbps 50] [--latency-us 10]
"""
import argparse
import csv
import statistics
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("samples", nargs="+")
    p.add_argument("--h2d-gbps", type=float, default=35.0)
    p.add_argument("--d2h-gbps", type=float, default=50.0)
    p.add_argument("--latency-us", type=float, default=10.0)
    a = p.parse_args()
    points = {}
    for path in a.samples:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            need = {"class", "objects", "object_bytes", "measured_ns"}
            if not need <= set(reader.fieldnames or []):
                print(f"{path}:1: header: expected the columns {sorted(need)}", file=sys.stderr)
                return 2
            for line, row in enumerate(reader, start=2):
                try:
                    key = (row["class"], int(row["objects"]), int(row["object_bytes"]))
                    points.setdefault(key, []).append(float(row["measured_ns"]))
                except (KeyError, TypeError, ValueError) as e:
                    print(f"{path}:{line}: bad row ({e})", file=sys.stderr)
                    return 2
    gbps = {"pcie_h2d": a.h2d_gbps, "pcie_d2h": a.d2h_gbps}
    print(f"figures: h2d {a.h2d_gbps} GB/s, d2h {a.d2h_gbps} GB/s, latency {a.latency_us} us")
    for cls, bw in gbps.items():
        errs, large, bias = [], [], []
        for (c, n, size), times in sorted(points.items()):
            if c != cls:
                continue
            measured = statistics.median(times)
            predicted = a.latency_us * 1e3 + n * size / bw
            errs.append(abs(predicted - measured) / measured)
            bias.append((predicted - measured) / measured)
            if size >= 1 << 20:
                large.append(errs[-1])
        if not errs:
            continue
        print(f"  {cls}: MAPE {100 * statistics.mean(errs):.1f}% over {len(errs)} points, "
              f"{100 * statistics.mean(large):.1f}% for objects >= 1 MiB; "
              f"bias {100 * statistics.mean(bias):+.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
