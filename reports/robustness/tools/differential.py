#!/usr/bin/env python3
"""Two kvtwin binaries on the same random configurations, outputs compared byte for byte (stop 21;
stops 15-20 ran such comparisons by hand). For a change that must not move any output: a faster
path, a refactoring.

usage: differential.py OLD NEW REPO {lmcache|vllm} CASES SEED LOG [KEY=VALUE ...]

Each case draws a configuration as fuzz_configs.py does (same draws for a seed), applies the
KEY=VALUE overrides given (a value list a|b|c is drawn from per case, e.g.
lmcache.cache_policy=LRU|MRU|FIFO), and runs OLD, then NEW, each under a 300-s timeout. A case is
'same' when both exit 0 and summary.json, requests.csv, timeseries.csv and trace.json are
identical; 'both-refused' when both exit 2 with the same one-line error; 'both-upstream-stop'
when both stop with the same reproduced upstream defect (exit 1); otherwise DIFF (the
files that differ, or the two exit codes). One JSON line per case goes to LOG with both wall
times; the last line printed is the count of DIFF cases. Since stop 22 a sixth of the draws set
workload.start_s, which binaries before c6675c2 do not know: against those, such cases are DIFF
(exit 2 / 0, the old binary's error naming the unknown key).
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzz_configs  # noqa: E402

FILES = ['summary.json', 'requests.csv', 'timeseries.csv', 'trace.json']


def main():
    if len(sys.argv) < 8:
        sys.exit(__doc__)
    old, new, repo, mode, cases, seed, log_path = sys.argv[1:8]
    overrides = []
    for arg in sys.argv[8:]:
        key, sep, value = arg.partition('=')
        if not sep:
            sys.exit(f'differential.py: override {arg!r} is not KEY=VALUE')
        overrides.append((key, value.split('|')))

    def one_case(_kvtwin, repo_, rnd, _i, sc, sets, work):
        for key, values in overrides:
            sets[key] = rnd.choice(values)
        results = {}
        for name, binary in (('old', old), ('new', new)):
            t0 = time.time()
            rc, err = fuzz_configs.run_kvtwin(binary, repo_, sc, sets, f'{work}/{name}', 300)
            results[name] = (rc, err, round(time.time() - t0, 2))
        (rc_a, err_a, t_a), (rc_b, err_b, t_b) = results['old'], results['new']
        record = {'old_s': t_a, 'new_s': t_b}
        if rc_a == 0 and rc_b == 0:
            differ = [f for f in FILES
                      if fuzz_configs.file_differs(f'{work}/old', f'{work}/new', f)]
            status = 'DIFF' if differ else 'same'
            record['detail'] = ' '.join(differ)
        elif rc_a == rc_b == 2 and err_a == err_b:
            status, record['detail'] = 'both-refused', err_a[-200:]
        elif err_a == err_b and fuzz_configs.upstream_stop(rc_a, err_a, sets) and rc_a == rc_b:
            status, record['detail'] = 'both-upstream-stop', err_a[-200:]
        else:
            status = 'DIFF'
            record['detail'] = f'exit {rc_a} / {rc_b}: {(err_a or err_b)[-200:]}'
        record['status'] = status
        return record, status == 'DIFF'

    sys.argv = [sys.argv[0], new, repo, mode, cases, seed, log_path]
    fuzz_configs.case_loop('kvtwin-diff-', one_case)


if __name__ == '__main__':
    main()
