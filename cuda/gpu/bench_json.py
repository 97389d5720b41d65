"""Reading kvtwin's Google Benchmark JSON (shared by compare_baseline.py and summarize.py).

A row per benchmark name: the 'median' aggregate when the run had repetitions, else the single
iteration row. Fields used: GBps (counted bytes over the median iteration), ceiling_GBps,
frac_of_ceiling; names look like op/model/layout/format/tokens:N.
"""
import json


SUFFIXES = ("/manual_time", "/real_time")


def base_name(name):
    """The registered name, without the timing suffix Google Benchmark appends."""
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def load(path):
    with open(path) as f:
        doc = json.load(f)
    rows = {}
    plain = {}
    for b in doc.get("benchmarks", []):
        if b.get("error_occurred"):
            rows.setdefault(base_name(b.get("run_name", b["name"])),
                            {"error": b.get("error_message", "?")})
            continue
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                rows[base_name(b["run_name"])] = b
        else:
            plain[base_name(b.get("run_name", b["name"]))] = b
    for name, b in plain.items():
        rows.setdefault(name, b)
    return doc.get("context", {}), rows


def gbps(row):
    if "GBps" in row:
        return float(row["GBps"])
    if "bytes_per_second" in row:
        return float(row["bytes_per_second"]) / 1e9
    return None


def split_name(name):
    """op, model, layout, format, tokens (int or None)."""
    parts = name.split("/")
    tokens = None
    if parts and parts[-1].startswith("tokens:"):
        tokens = int(parts[-1].split(":")[1])
        parts = parts[:-1]
    parts += [""] * (4 - len(parts))
    return parts[0], parts[1], parts[2], parts[3], tokens
