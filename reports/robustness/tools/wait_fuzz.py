#!/usr/bin/env python3
"""Random runs with small CPU tiers, which reach LMCache's busy-wait for CPU memory (stop 37).

usage: wait_fuzz.py KVTWIN REPO CASES SEED

Each case draws a shipped LMCache scenario with a disk tier, a CPU tier of 0.05-2 GiB per rank and
slow disk writes, among other keys, and runs it twice. A case is bad when a run exits non-zero,
loses a request (finished + rejected + failed != total), reports a wait that is not a whole
number of 0.1-s sleeps (or fewer sleeps than waiting loads), or the two runs differ in a byte of
summary.json, requests.csv, timeseries.csv or trace.json.
"""
import filecmp, json, random, shutil, subprocess, sys, tempfile
binary, repo, cases, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
work = tempfile.mkdtemp(prefix='wait_fuzz_')
rnd = random.Random(seed)
bad = waits = 0
for i in range(cases):
    sc = rnd.choice(['llama31_8b_h100_cpu', 'llama31_70b_tp4_cpu_disk_redis'])
    sets = {'workload.max_requests': rnd.choice([150, 300, 600]),
            'lmcache.max_local_cpu_size_gb': rnd.choice([0.05, 0.1, 0.25, 0.5, 1, 2]),
            'lmcache.max_local_disk_size_gb': rnd.choice([1, 5, 50]),
            'links.disk_write_gbps': rnd.choice([0.2, 1, 5]),
            'lmcache.chunk_size': rnd.choice([256, 512]),
            'lmcache.remote': rnd.choice(['true', 'false']),
            'vllm.async_scheduling': rnd.choice(['true', 'false']),
            'vllm.kv_load_failure_policy': rnd.choice(['fail', 'recompute']),
            'cluster.instances': rnd.choice([1, 2, 4]),
            'lmcache.upstream_fixes': rnd.choice(['true', 'false']),
            'output.plots': 'false'}
    outs = []
    for k in range(2):
        d = f'{work}/{i}_{k}'
        shutil.rmtree(d, ignore_errors=True)
        args = [binary, 'run', '-q', '--scenario', f'scenarios/{sc}.toml', '--out', d]
        for a, v in sets.items(): args += ['--set', f'{a}={v}']
        r = subprocess.run(args, cwd=repo, capture_output=True, text=True, timeout=300)
        outs.append(d)
        if r.returncode:
            print('BAD rc', i, r.returncode, r.stderr[:300], sets); bad += 1; break
    else:
        s = json.load(open(outs[0] + '/summary.json'))
        q = s['requests']
        ok = q['finished'] + q['rejected'] + q['failed'] == q['total']
        same = all(filecmp.cmp(f'{outs[0]}/{f}', f'{outs[1]}/{f}', shallow=False)
                   for f in ('summary.json', 'requests.csv', 'timeseries.csv', 'trace.json'))
        mw = s['lmcache'].get('memory_waits')
        if mw:
            waits += 1
            sleeps = mw['wait_s'] / 0.1
            if abs(sleeps - round(sleeps)) > 1e-6 or mw['loads'] > round(sleeps): ok = False
        if not ok or not same:
            print('BAD', i, 'ok', ok, 'same', same, sets); bad += 1
        print(i, sc, 'waits', mw, 'stalled', s['lmcache']['stalled_loads'], flush=True)
print(f'{cases} cases, {waits} with memory waits, {bad} bad')
shutil.rmtree(work)
sys.exit(1 if bad else 0)
