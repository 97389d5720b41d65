#!/usr/bin/env python3
"""Causality of `kvtwin run` (stop-18 report): a request that finishes before request K arrives
cannot depend on requests K, K+1, ... So its row of requests.csv must be the same whether the
trace is cut at K requests or at N > K.

usage: causality.py KVTWIN REPO {lmcache|vllm} CASES SEED LOG

Each case draws a configuration as fuzz_configs.py does (64-token LMCache chunks replaced by 256:
those runs are slow, not different), N in {80, 150, 240} and K in [N/4, N-10], runs both under a
120-s timeout, and compares every row of the K run whose request finished before the K-th
arrival (sorted arrival times of the N run) with the same request's row in the N run. A case is
DIFF when one differs, ERR when a run fails (a one-line refusal included). One JSON line per case
goes to LOG.
"""
import csv
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuzz_configs import command, draw  # noqa: E402


def run(kvtwin, repo, sc, sets, n, out):
    shutil.rmtree(out, ignore_errors=True)
    args = command(kvtwin, repo, sc, dict(sets, **{'workload.max_requests': n}), out)
    try:
        p = subprocess.run(['bash', '-c', 'ulimit -f 2000000; exec "$@"', 'x'] + args,
                           capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return None, 'TIMEOUT'
    if p.returncode != 0:
        return None, f'rc {p.returncode}: {p.stderr.strip()[-200:]}'
    return list(csv.DictReader(open(f'{out}/requests.csv'))), ''


def main():
    kvtwin, repo, mode, cases, seed, log_path = sys.argv[1:7]
    rnd = random.Random(int(seed))
    work = tempfile.mkdtemp(prefix='kvtwin-causal-')
    bad = 0
    with open(log_path, 'w') as log:
        for i in range(int(cases)):
            sc, sets = draw(rnd, mode)
            sets.pop('workload.max_requests', None)
            if sets.get('lmcache.chunk_size') == 64:
                sets['lmcache.chunk_size'] = 256
            n = rnd.choice([80, 150, 240])
            k = rnd.randint(n // 4, n - 10)
            t0 = time.time()
            full, e1 = run(kvtwin, repo, sc, sets, n, f'{work}/full')
            cut, e2 = run(kvtwin, repo, sc, sets, k, f'{work}/cut')
            status, detail = 'ok', ''
            if full is None or cut is None:
                status, detail = 'ERR', e1 or e2
            else:
                by_index = {int(r['index']): r for r in full}
                t_k = sorted(float(r['arrival_s']) for r in full)[k]
                compared = 0
                for r in cut:
                    if float(r['finish_s']) >= t_k - 2e-6:
                        continue
                    compared += 1
                    f = by_index[int(r['index'])]
                    if f != r:
                        diff = {c: (r[c], f[c]) for c in r if r[c] != f[c]}
                        status, detail = 'DIFF', f"index {r['index']}: {diff}"
                        break
                detail = detail or f'{compared} rows compared'
            bad += status != 'ok'
            log.write(json.dumps({'i': i, 'scenario': sc, 'n': n, 'k': k, 'status': status,
                                  'detail': detail[-400:], 'wall_s': round(time.time() - t0, 2),
                                  'sets': sets}) + '\n')
            log.flush()
    shutil.rmtree(work, ignore_errors=True)
    print(f'{cases} cases, {bad} not ok')


if __name__ == '__main__':
    main()
