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
starting "kvtwin:". It prints each bad case, then the counts by exit code.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scenario_fuzz import documented_fields  # noqa: E402


def numeric_keys(repo):
    return [key for key, kind, _ in documented_fields(repo) if kind in ('integer', 'number')]


def main():
    kvtwin, scenario = sys.argv[1], sys.argv[2]
    keys = numeric_keys('.')
    bad, cases, outcomes = 0, 0, {}
    for key in keys:
        for slo in (['slo.ttft_ms=1e9', 'slo.tpot_ms=1e9'], ['slo.ttft_ms=0']):
            cases += 1
            args = [kvtwin, 'capacity', '-q', '--scenario', scenario, '--for', key,
                    '--set', 'workload.max_requests=3', '--set', 'output.plots=false',
                    '--precision', '1', '--probes', '2']
            for s in slo:
                args += ['--set', s]
            try:
                p = subprocess.run(args, capture_output=True, text=True, timeout=300)
            except subprocess.TimeoutExpired:
                bad += 1
                print('HANG', key, slo)
                continue
            err = p.stderr.strip()
            ok = p.returncode == 0 or (p.returncode == 2 and err.count('\n') == 0 and
                                       err.startswith('kvtwin:'))
            outcomes[p.returncode] = outcomes.get(p.returncode, 0) + 1
            if not ok:
                bad += 1
                print('BAD', p.returncode, key, slo, err[:300])
    print(f'{scenario}: {len(keys)} keys, {cases} searches, {bad} bad, exit codes {outcomes}')


if __name__ == '__main__':
    main()
