#!/usr/bin/env python3
"""Causality of `kvtwin run` (stop-18 report): a request that finishes before request K arrives
cannot depend on requests K, K+1, ... So its row of requests.csv must be the same whether the
trace is cut at K requests or at N > K.

usage: causality.py KVTWIN REPO {lmcache|vllm} CASES SEED LOG

Each case draws a configuration as fuzz_configs.py does (64-token LMCache chunks replaced by 256:
those runs are slow, not different), N in {80, 150, 240} and K in [N/4, N-10], runs both under a
120-s timeout, and compares every row of the K run whose request finished before the K-th
arrival (sorted arrival times of the N run) with the same request's row in the N run. A case is
DIFF when one differs, ERR when a run fails unless it stops on a reproduced upstream defect
(upstream-stop, as in fuzz_configs.py) or refuses the configuration with one line (refused;
counted as an error before stop 28). One JSON line per case goes to
LOG.
"""
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuzz_configs import case_loop, run_kvtwin, upstream_stop  # noqa: E402


def rows(kvtwin, repo, sc, sets, n, out):
    """requests.csv of the first n requests, or (None, why)."""
    rc, err = run_kvtwin(kvtwin, repo, sc, dict(sets, **{'workload.max_requests': n}), out, 120)
    if rc != 0:
        return None, 'TIMEOUT' if rc == 'TIMEOUT' else f'rc {rc}: {err[-200:]}'
    return list(csv.DictReader(open(f'{out}/requests.csv'))), ''


def causal_case(kvtwin, repo, rnd, i, sc, sets, work):
    sets.pop('workload.max_requests', None)
    sets.pop('workload.max_duration_s', None)  # stop 24 draws it; the cut here is by count
    if sets.get('lmcache.chunk_size') == 64:
        sets['lmcache.chunk_size'] = 256
    n = rnd.choice([80, 150, 240])
    k = rnd.randint(n // 4, n - 10)
    full, e1 = rows(kvtwin, repo, sc, sets, n, f'{work}/full')
    cut, e2 = rows(kvtwin, repo, sc, sets, k, f'{work}/cut')
    if full is None or cut is None:
        err = e1 or e2
        if upstream_stop(1 if err.startswith('rc 1:') else None, err, sets):
            return {'n': n, 'k': k, 'status': 'upstream-stop', 'detail': err[-400:]}, False
        if err.startswith('rc 2: kvtwin:') and '\n' not in err:
            # A one-line refusal of the drawn configuration (e.g. a window with no request),
            # counted apart as fuzz_configs.py counts it: nothing to compare.
            return {'n': n, 'k': k, 'status': 'refused', 'detail': err[-400:]}, False
        return {'n': n, 'k': k, 'status': 'ERR', 'detail': err[-400:]}, True
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
            return {'n': n, 'k': k, 'status': 'DIFF',
                    'detail': f"index {r['index']}: {diff}"[-400:]}, True
    return {'n': n, 'k': k, 'status': 'ok', 'detail': f'{compared} rows compared'}, False


if __name__ == '__main__':
    case_loop('kvtwin-causal-', causal_case)
