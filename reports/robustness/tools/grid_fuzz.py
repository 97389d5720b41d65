#!/usr/bin/env python3
"""`kvtwin sweep --vary` and `kvtwin capacity --vary / --for` with odd option strings (stop 32).

usage: grid_fuzz.py KVTWIN CASES SEED   (run from the repository root)

Each case draws sweep or capacity, one to three --vary axes (one to three keys joined by '/',
known, misspelt and empty keys; zero to three values of legal, odd and malformed parts, the
parts' count sometimes not the keys'), for capacity a --for key, a precision and a probe count,
and (stop 34) sometimes --most, --least or both, on the first 2 to 5 requests of the embedded
trace. The direction flags come from a second generator. Stop 34 also added vllm.max_model_len and
the values 524288 (which vLLM refuses to start with on 80 GB) and 2048, so seeds before stop 34
draw other cases now. A case is BAD when it dies by a signal, hangs
(120 s), exits with a code other than 0 or 2, or refuses with more or less than one line. It
prints each bad case, then the count.
"""
import random, subprocess, sys, os, tempfile
kvtwin, cases, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
direction = random.Random(seed ^ 0x5EED)
keys = ['cluster.instances', 'cluster.router', 'lmcache.max_local_cpu_size_gb', 'lmcache.chunk_size',
        'workload.rate_scale', 'slo.ttft_ms', 'gpu.memory_gb', 'gpu.name', 'vllm.block_size',
        'workload.arrivals', 'lmcache.enabled', 'vllm.num_gpu_blocks', 'no.such_key', 'cluster',
        'cluster.instance', '', 'workload.trace', 'cost.gpu_per_hour',
        'cost.cpu_memory_gib_per_hour', 'cost.remote_gib_per_hour', 'vllm.max_model_len']
vals = ['1', '2', '4', '0', '-1', '1e9', '1e300', 'nan', 'inf', 'round_robin', 'prefix_aware', 'x',
        'true', 'false', 'spread', 'trace', '16', '64', '0.5', '', ' ', 'H100', '1/2', 'a,b', '=',
        '3e-7', '80', '141', '524288', '2048']
def part(n): return '/'.join(rnd.choice(vals) for _ in range(n))
def axis():
    k = rnd.randint(1, 3)
    ks = '/'.join(rnd.choice(keys) for _ in range(k))
    if rnd.random() < 0.1: ks = rnd.choice(['', '/', ks + '/'])
    nv = rnd.randint(0, 3)
    vs = ','.join(part(k if rnd.random() < 0.8 else rnd.randint(1, 4)) for _ in range(nv))
    sep = '=' if rnd.random() < 0.95 else rnd.choice(['', '==', ':'])
    return ks + sep + vs
bad = 0
for c in range(cases):
    cmd = rnd.choice(['sweep', 'capacity'])
    args = [kvtwin, cmd, '-q', '--set', 'workload.max_requests=%d' % rnd.choice([2, 3, 5]),
            '--set', 'output.plots=false', '-j', str(rnd.choice([1, 2, 3]))]
    for _ in range(rnd.randint(0 if cmd == 'capacity' else 1, 3)):
        args += ['--vary', axis()]
    if cmd == 'capacity':
        if rnd.random() < 0.5: args += ['--for', rnd.choice(keys)]
        args += ['--precision', rnd.choice(['0.5', '1', '0.05']), '--probes', rnd.choice(['1', '2', '3'])]
        if rnd.random() < 0.3: args += ['--set', 'slo.ttft_ms=1e9', '--set', 'slo.tpot_ms=1e9']
        args += direction.choice([[], [], ['--most'], ['--least'], ['--most', '--least']])
    out = tempfile.mkdtemp(prefix='fz', dir=None)
    args += ['--out', out]
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        print('HANG', args); bad += 1; continue
    err = p.stderr.strip('\n')
    ok = p.returncode == 0 or (p.returncode == 2 and err.count('\n') == 0 and err)
    if not ok:
        bad += 1
        print('BAD rc=%d' % p.returncode, args, '\n  ', err[:500])
    subprocess.run(['rm', '-rf', out])
print('cases', cases, 'bad', bad)
