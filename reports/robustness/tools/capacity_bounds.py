#!/usr/bin/env python3
"""Every numeric scenario field walked to both ends of its range by `kvtwin capacity` (stop 32).

usage: capacity_bounds.py KVTWIN SCENARIO   (run from the repository root)

For each integer or number field that scenarios/README.md documents, two searches on the first 3
requests of SCENARIO's trace: `--for KEY` with SLOs every run meets (slo.ttft_ms = tpot_ms = 1e9),
and with one no run meets (slo.ttft_ms = 0). For a resource the first halves toward the field's
lower bound and the second doubles toward its upper one (the rate the other way), so each field
runs at values near both bounds, through every probe's validation and simulation. A search may
answer or refuse (a field that is not a resource, a start of 0); it is BAD when it dies by a
signal, hangs (300 s), exits with a code other than 0 or 2, or refuses with anything but one line
starting "kvtwin:", or takes more than kMaxProbes probes. A field whose scenario value is 0 (a
refused start) is searched again from 1. Each search runs twice, the second time with --most
(stop 34), which turns its direction: every field goes toward both bounds under both SLOs. It
prints each bad case, then the counts by exit code.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scenario_fuzz import documented_fields  # noqa: E402


# A search's bracket doubles or halves at most ~50 times between a field's bounds, and narrowing
# takes a few rounds more: more probes than this is a search that walks instead of bisecting.
kMaxProbes = 120


def numeric_keys(repo):
    return [key for key, kind, _ in documented_fields(repo) if kind in ('integer', 'number')]


def search(kvtwin, scenario, key, slo, start, out, most):
    """One `capacity --for KEY [--most]` search into `out`: (process or None on a hang, probes)."""
    args = [kvtwin, 'capacity', '-q', '--scenario', scenario, '--for', key,
            '--set', 'workload.max_requests=3', '--set', 'output.plots=false',
            '--precision', '1', '--probes', '2', '--out', out] + (['--most'] if most else [])
    for s in slo + ([f'{key}={start}'] if start else []):
        args += ['--set', s]
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None, 0
    probes = 0
    if os.path.exists(f'{out}/capacity.csv'):
        with open(f'{out}/capacity.csv') as f:
            probes = sum(1 for _ in f) - 1
    return p, probes


def main():
    kvtwin, scenario = sys.argv[1], sys.argv[2]
    keys = numeric_keys('.')
    bad, cases, outcomes = 0, 0, {}
    slos = (['slo.ttft_ms=1e9', 'slo.tpot_ms=1e9'], ['slo.ttft_ms=0'])
    for key, slo, most in [(k, s, m) for k in keys for s in slos for m in (False, True)]:
        # The scenario's own start, and a start of 1 where its value is 0 (stop 33: a disk
        # size that held everywhere was halved 1,025 times toward 0, unseen while every such
        # field started at the scenario's 0 and was refused).
        for start in (None, '1'):
            with tempfile.TemporaryDirectory() as out:
                p, probes = search(kvtwin, scenario, key, slo, start, out, most)
            cases += 1
            if p is None:
                bad += 1
                print('HANG', key, slo, start, most)
                break
            err = p.stderr.strip()
            ok = p.returncode == 0 or (p.returncode == 2 and err.count('\n') == 0 and
                                       err.startswith('kvtwin:'))
            outcomes[p.returncode] = outcomes.get(p.returncode, 0) + 1
            if not ok:
                bad += 1
                print('BAD', p.returncode, key, slo, start, most, err[:300])
            elif probes > kMaxProbes:
                bad += 1
                print('LONG', probes, 'probes', key, slo, start, most)
            if 'give a start above 0' not in err:
                break  # the scenario's value was a start: no second one needed
    print(f'{scenario}: {len(keys)} keys, {cases} searches, {bad} bad, exit codes {outcomes}')


if __name__ == '__main__':
    main()
