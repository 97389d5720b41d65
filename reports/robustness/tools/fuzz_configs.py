#!/usr/bin/env python3
"""Random valid configurations through `kvtwin run` (stop-17, 18 and 19 reports; stop 18 added
vllm.kv_load_failure_policy and counts requests ended by a KV load error: finished + rejected +
failed = total; stop 19 draws vllm.async_scheduling, 2 in 3 cases on; stop 20 the engine core's
CPU time, vllm.schedule_cpu_us / output_cpu_us, nonzero in half the cases; stop 21
vllm.scheduling_policy, priority in a third, then links.page_cache_gb and
lmcache.priority_limit in LMCache cases, and in a third of all cases a copy of the trace with
priorities 0-2; stop 22, in a quarter of the cases, a copy whose arrival times are floored to
10 s or 60 s, so that bursts of requests share one timestamp, and in a sixth a window of the
trace, workload.start_s; stop 23 a warm-up before half of those windows, workload.warmup_s,
keys no stop drew before (LMCache's save and retrieve options, the health monitor over Redis
and its fallback, the time-series interval, the seed, link bandwidths) and the first 2,000
requests of an Azure trace with synthetic prefixes; stop 24 the keys still undrawn (draw_stop24)
and two more output checks: the SLO attainment against requests.csv and the trace.json cap
(check_slo_and_trace); stop 28 the link bytes against the tokens LMCache moved
(check_link_bytes), the tokens the steps computed against the requests' (check_computed_tokens)
trace.json's transfers against the link bytes (check_trace_bytes) and the occupancy peaks against
timeseries.csv (check_peaks) and each request's load against its hits (check_request_loads);
stop 35 the links' peak rates against timeseries.csv and their bandwidths (check_peaks)).

usage: fuzz_configs.py KVTWIN REPO {lmcache|vllm} CASES SEED LOG

Each case draws --set values for one shipped scenario (LMCache: bulk / layerwise / async loading,
tiers and sizes, chunk sizes, policies, quirks reproduced or fixed, Redis faults, pool sizes,
instances, routers; vLLM: hybrid, Mamba, MLA, encoder-decoder models with prefix caching, chunked
prefill, budgets and block sizes varied) and runs it on the 10-minute example trace under a 90-s
timeout and a 2-GB file-size limit. A case is bad when the run crashes, exits non-zero (exit 2 with
a one-line error is a refusal, counted apart), times out (SLOW), loses a request (finished +
rejected + failed != total), reports GPU prefix hits with prefix caching off, splits a trace with
priorities into classes that do not add up to the requests, breaks an invariant of its outputs
(check_outputs: ordered percentiles and timestamps, hits within prompts, occupancy within
capacity, counts that add up; check_trace_lengths: prompts and outputs as long as the trace
says), or — every fifth case, run twice — writes different bytes, or — every seventh, from the
fourth, also swept over workload.rate_scale (its value and half of it) — its sweep point differs
from the plain run, or — a window warmed up from the trace's start (warmup_s = start_s) — its
requests.csv differs from the whole replay's rows of its requests (WARMUP). One JSON line per case
goes to LOG.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

TRACE = 'traces/examples/mooncake_conversation_10min.jsonl'


def draw(rnd, mode):
    """One case: (scenario name, {key: value}) for `kvtwin run --set`."""
    if mode == 'lmcache':
        sc = rnd.choice(['llama31_8b_h100_cpu', 'llama31_70b_tp4_cpu_disk_redis',
                         'deepseek_v3_mla_h200', 'default'])
        sets = {
            'workload.max_requests': rnd.choice([50, 150, 300]),
            'workload.rate_scale': rnd.choice([0.02, 0.2, 1, 5]),
            'lmcache.enabled': 'true',
            'lmcache.enable_async_loading': rnd.choice(['true', 'false', 'false']),
            'lmcache.use_layerwise': rnd.choice(['true', 'false', 'false']),
            'lmcache.upstream_fixes': rnd.choice(['true', 'false']),
            'lmcache.remote': rnd.choice(['true', 'false']),
            'lmcache.max_local_cpu_size_gb': rnd.choice([0.5, 2, 8, 64]),
            'lmcache.max_local_disk_size_gb': rnd.choice([0, 2, 20, 200]),
            'lmcache.chunk_size': rnd.choice([64, 256, 512]),
            'lmcache.cache_policy': rnd.choice(['LRU', 'LFU', 'FIFO', 'MRU', 'S3FIFO']),
            'vllm.num_gpu_blocks': rnd.choice([1500, 3000, 8000, 40000]),
            'cluster.instances': rnd.choice([1, 2, 4]),
            'cluster.router': rnd.choice(['round_robin', 'least_loaded', 'prefix_aware']),
            'links.remote_get_failure_rate': rnd.choice([0, 0, 0.1, 0.5]),
            'vllm.kv_load_failure_policy': rnd.choice(['fail', 'recompute']),
        }
        if sets['lmcache.enable_async_loading'] == 'true':
            sets['lmcache.use_layerwise'] = 'false'
    else:
        sc = rnd.choice(['gemma3_27b_sliding', 'gpt_oss_120b_hybrid', 'nemotron_h_8b_mamba_hybrid',
                         'whisper_large_v3_encdec', 'deepseek_v3_mla_h200', 'llama31_8b_h100_cpu'])
        sets = {
            'workload.max_requests': rnd.choice([50, 150, 300]),
            'workload.rate_scale': rnd.choice([0.05, 0.5, 1, 5]),
            'vllm.num_gpu_blocks': rnd.choice([0, 600, 2000, 8000]),
            'vllm.max_num_seqs': rnd.choice([1, 8, 256]),
            'vllm.max_num_batched_tokens': rnd.choice([512, 2048, 8192, 32768]),
            'vllm.long_prefill_token_threshold': rnd.choice([0, 0, 256, 4096]),
            'vllm.block_size': rnd.choice([16, 16, 32, 64]),
            'vllm.enable_prefix_caching': rnd.choice(['true', 'true', 'false']),
            'vllm.enable_chunked_prefill': rnd.choice(['true', 'true', 'false']),
            'vllm.prefix_caching_hash_algo': rnd.choice(['sha256', 'xxhash', 'sha256_cbor']),
            'cluster.instances': rnd.choice([1, 2, 3]),
            'cluster.router': rnd.choice(['round_robin', 'least_loaded', 'prefix_aware']),
        }
        if sc == 'whisper_large_v3_encdec':
            sets['vllm.enable_prefix_caching'] = 'false'
        if sc == 'nemotron_h_8b_mamba_hybrid':
            sets['vllm.mamba_cache_mode'] = rnd.choice(['none', 'align', 'all'])
        if sets['vllm.enable_chunked_prefill'] == 'false':
            sets['vllm.max_num_batched_tokens'] = 0  # vLLM's default: max_model_len
    # Drawn last, so that the draws above match those of the stop-17 / stop-18 runs for a seed.
    sets['vllm.async_scheduling'] = rnd.choice(['true', 'true', 'false'])
    if rnd.random() < 0.5:
        sets['vllm.schedule_cpu_us'] = str(rnd.choice([100, 800, 1500, 4000]))
        sets['vllm.output_cpu_us'] = str(rnd.choice([0, 200, 500, 2000]))
    # Stop 21: vLLM's priority policy (the example trace has no priorities: all 0, so the order is
    # the arrival order and preemption takes the latest arrival). Drawn after the rest.
    sets['vllm.scheduling_policy'] = rnd.choice(['fcfs', 'fcfs', 'priority'])
    # Stop 21, later: the page cache over the disk tier's files, and
    # LMCache's priority_limit (every example request has priority 0: limit -1 stores nothing).
    if mode == 'lmcache':
        page_cache = rnd.choice([0, 0, 1, 16])
        if page_cache:
            sets['links.page_cache_gb'] = str(page_cache)
        limit = rnd.choice([None, None, 0, -1])
        if limit is not None:
            sets['lmcache.priority_limit'] = str(limit)
    # A third of the cases replay the example trace with a priority of 0, 1 or 2 per request
    # (drawn from this seed; see derived_trace), so that the priority policy and priority_limit
    # see requests that differ. Not a --set: command() turns it into the trace path.
    if rnd.random() < 1 / 3:
        sets['_trace_priorities'] = rnd.randrange(1 << 30)
    # Stop 22: arrival times floored to 10 s or 60 s (the example trace's are whole seconds, about
    # 3 requests to a second; tied priority-policy requests once preempted each other for ever).
    if rnd.random() < 1 / 4:
        sets['_trace_tie_s'] = rnd.choice([10, 60])
    # Stop 22: a window of the trace (workload.start_s) in a sixth of the cases.
    if rnd.random() < 1 / 6:
        sets['workload.start_s'] = rnd.choice([30, 120.5, 400])
        # Stop 23: a warm-up before the window in half of them; one as long as start_s replays
        # the trace from its beginning (then warmup_differs compares with the whole replay).
        if rnd.random() < 1 / 2:
            start = sets['workload.start_s']
            sets['workload.warmup_s'] = rnd.choice([start, start, start / 2, 17])
    # Stop 23: keys no earlier stop drew, and an Azure trace (no block ids) with synthetic
    # prefixes. Drawn last, so that earlier seeds keep their draws up to here.
    if mode == 'lmcache' and rnd.random() < 1 / 2:
        sets['lmcache.save_decode_cache'] = rnd.choice(['true', 'false'])
        sets['lmcache.save_unfull_chunk'] = rnd.choice(['true', 'false'])
        sets['lmcache.min_retrieve_tokens'] = rnd.choice([0, 256, 4096])
        sets['lmcache.local_cpu'] = rnd.choice(['true', 'true', 'false'])
    if mode == 'lmcache' and rnd.random() < 1 / 2:  # the health monitor over Redis
        sets['lmcache.health_fallback_policy'] = rnd.choice(['recompute', 'local_cpu'])
        sets['lmcache.get_blocking_failed_threshold'] = rnd.choice([1, 2, 10])
        sets['lmcache.ping_interval_s'] = rnd.choice([1, 30])
        sets['lmcache.waiting_time_for_recovery_s'] = rnd.choice([0, 5, 300])
        sets['lmcache.health_monitor'] = rnd.choice(['true', 'true', 'false'])
    if rnd.random() < 1 / 4:
        sets['output.timeseries_interval_s'] = rnd.choice([0.05, 7, 600])
    if rnd.random() < 1 / 4:
        sets['run.seed'] = rnd.randrange(1 << 40)
    if rnd.random() < 1 / 5:
        factor = rnd.choice([0.01, 0.1, 10])
        for key, base in (('links.pcie_h2d_gbps', 35), ('links.pcie_d2h_gbps', 50),
                          ('links.disk_read_gbps', 7), ('links.disk_write_gbps', 5),
                          ('links.network_gbps', 12.5)):
            sets[key] = base * factor
    if sc != 'whisper_large_v3_encdec' and rnd.random() < 1 / 6:
        sets['_trace_azure'] = rnd.choice(['conv', 'code'])
        sets['workload.prefix_groups'] = rnd.choice([1, 10, 200])
        sets['workload.prefix_tokens'] = rnd.choice([64, 1000, 4096])
        sets['workload.prefix_zipf'] = rnd.choice([0, 1, 1.5])
        sets.pop('_trace_tie_s', None)
        sets.pop('_trace_priorities', None)
        if 'workload.start_s' in sets:  # the first 2,000 rows span about 14 (conv) or 6 minutes
            sets['workload.start_s'] = rnd.choice([30, 120.5])
            if 'workload.warmup_s' in sets:
                sets['workload.warmup_s'] = min(sets['workload.warmup_s'], sets['workload.start_s'])
    draw_stop24(rnd, mode, sets)
    sets['output.plots'] = 'false'
    return sc, sets


def draw_stop24(rnd, mode, sets):
    """Stop 24: keys no earlier stop drew, each group in a part of the cases: the two measured
    PCIe profiles, link latencies, the page cache's rates and dirty share, the Redis server's NIC,
    the pool derived from GPU memory (vllm mode, num_gpu_blocks = 0), LMCache's lookup timing,
    MLA's save_only_first_rank and the blocking GET timeout (counted), an arrival cut-off, the
    SLOs, the trace.json cap and the percentile mode. Drawn after every earlier key, so that older seeds keep their cases."""
    if rnd.random() < 1 / 6:
        # A file of scenarios/hardware/; command() makes it a path.
        sets['hardware.profile'] = rnd.choice(['h100_80gb_hbm3_pcie5.toml', 'h200_pcie5.toml'])
    if rnd.random() < 1 / 5:
        for key in ('links.pcie_latency_us', 'links.disk_latency_us', 'links.network_latency_us'):
            sets[key] = rnd.choice([0, 10, 1000, 100000])
    if mode == 'lmcache' and rnd.random() < 1 / 5:
        sets['links.page_cache_gb'] = str(rnd.choice([1, 16]))
        sets['links.page_cache_gbps'] = rnd.choice([0.5, 10, 1000])
        sets['links.page_cache_write_gbps'] = rnd.choice([0.5, 8, 1000])
        sets['links.page_cache_dirty_ratio'] = rnd.choice([0, 0.2, 1])
    if mode == 'lmcache' and rnd.random() < 1 / 5:
        sets['links.remote_server_gbps'] = rnd.choice([0.1, 25, 400])
    if mode == 'vllm' and sets.get('vllm.num_gpu_blocks') == 0 and rnd.random() < 1 / 2:
        sets['gpu.memory_gb'] = rnd.choice([24, 80, 141])
        sets['vllm.gpu_memory_utilization'] = rnd.choice([0.3, 0.9, 1])
        sets['vllm.activation_reserve_gb'] = rnd.choice([0, 4, 20])
    if mode == 'lmcache' and rnd.random() < 1 / 4:
        sets['lmcache.lookup_timeout_ms'] = rnd.choice([1, 50, 3000])
        sets['lmcache.lookup_backoff_ms'] = rnd.choice([0, 10, 500])
        sets['lmcache.save_only_first_rank'] = rnd.choice(['true', 'false'])
        sets['lmcache.blocking_timeout_secs'] = rnd.choice([1, 10])
    if rnd.random() < 1 / 6:
        sets['workload.max_duration_s'] = rnd.choice([20, 120, 100000])
    if rnd.random() < 1 / 5:
        sets['slo.ttft_ms'] = rnd.choice([0, 200, 1e6])
        sets['slo.tpot_ms'] = rnd.choice([0, 20, 1e6])
    if rnd.random() < 1 / 5:
        sets['output.chrome_trace'] = rnd.choice(['true', 'false'])
        sets['output.chrome_trace_max_events'] = rnd.choice([0, 1, 1000])
    if rnd.random() < 1 / 4:
        sets['output.percentiles'] = 'linear'


def write_once(path, lines):
    """Writes `lines` to `path` through a temporary name, so that a concurrent fuzzer never reads
    a partial file."""
    tmp = f'{path}.{os.getpid()}'
    with open(tmp, 'w') as f:
        f.writelines(lines)
    os.replace(tmp, path)


def azure_trace(repo, kind):
    """The first 2,000 requests of the Azure LLM 2023 `kind` trace (conv or code), written once
    under the temp directory; its path."""
    path = os.path.join(tempfile.gettempdir(), f'kvtwin_fuzz_azure_{kind}.csv')
    if not os.path.exists(path):
        with open(f'{repo}/traces/azure_llm_2023/AzureLLMInferenceTrace_{kind}.csv') as f:
            write_once(path, [next(f) for _ in range(2001)])
    return path


def case_trace(repo, sets):
    """The trace file a case replays."""
    if '_trace_azure' in sets:
        return azure_trace(repo, sets['_trace_azure'])
    if '_trace_priorities' in sets or '_trace_tie_s' in sets:
        return derived_trace(repo, sets.get('_trace_priorities'), sets.get('_trace_tie_s'))
    return f'{repo}/{TRACE}'


def derived_trace(repo, priority_seed, tie_s):
    """The example trace with "priority" 0, 1 or 2 added to every request (drawn from
    `priority_seed`, when not None) and its timestamps (ms) floored to multiples of `tie_s`
    seconds (when not None), written once under the temp directory; its path."""
    path = os.path.join(tempfile.gettempdir(),
                        f'kvtwin_fuzz_trace_p{priority_seed}_t{tie_s}.jsonl')
    if not os.path.exists(path):
        rnd = random.Random(priority_seed)
        lines = []
        with open(f'{repo}/{TRACE}') as f:
            for line in f:
                row = json.loads(line)
                if priority_seed is not None:
                    row['priority'] = rnd.choice([0, 1, 2])
                if tie_s is not None:
                    row['timestamp'] = row['timestamp'] // (1000 * tie_s) * (1000 * tie_s)
                lines.append(json.dumps(row) + '\n')
        write_once(path, lines)
    return path


def upstream_stop(rc, err, sets):
    """A run stopped (exit 1) by an upstream defect the model reproduces by default (stop 16's
    resumed-request assertion): upstream's engine stops there too, and not with the fixes."""
    return rc == 1 and 'an upstream defect reproduced by default' in err and \
        sets.get('lmcache.upstream_fixes') == 'false'


def command(kvtwin, repo, sc, sets, out):
    args = [kvtwin, 'run', '-q', '--out', out]
    if sc != 'default':
        args += ['--scenario', f'{repo}/scenarios/{sc}.toml']
    if sc != 'whisper_large_v3_encdec':
        args += ['--trace', case_trace(repo, sets)]
    for k, v in sets.items():
        if k == 'hardware.profile':
            # Absolute: a relative profile path is read from the scenario file's folder.
            v = os.path.abspath(os.path.join(repo, 'scenarios/hardware', v))
        if not k.startswith('_'):
            args += ['--set', f'{k}={v}']
    return args



def run_kvtwin(kvtwin, repo, sc, sets, out, timeout):
    """One `kvtwin run` of the case into `out` (emptied first) under a 2-GB file-size limit:
    (exit code, stderr), the code 'TIMEOUT' past `timeout` seconds."""
    shutil.rmtree(out, ignore_errors=True)
    try:
        p = subprocess.run(['bash', '-c', 'ulimit -f 2000000; exec "$@"', 'x'] +
                           command(kvtwin, repo, sc, sets, out),
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 'TIMEOUT', ''
    return p.returncode, p.stderr.strip()


def case_loop(prefix, one_case):
    """The driver of this script and causality.py: argv KVTWIN REPO {lmcache|vllm} CASES SEED LOG
    [KEY=VALUE ...]; per case one drawn configuration, with each KEY=VALUE forced on it after the
    draw (so the other draws stay those of the seed; e.g. lmcache.cache_policy=LFU to reach LFU's
    failing stores, stop 30), one_case(kvtwin, repo, rnd, sc, sets, work) -> (record, bad), one
    JSON line per case in LOG (with i, scenario, wall_s, sets); prints the bad count."""
    kvtwin, repo, mode, cases, seed, log_path = sys.argv[1:7]
    forced = dict(arg.split('=', 1) for arg in sys.argv[7:])
    rnd = random.Random(int(seed))
    work = tempfile.mkdtemp(prefix=prefix)
    bad = 0
    with open(log_path, 'w') as log:
        for i in range(int(cases)):
            sc, sets = draw(rnd, mode)
            sets.update(forced)
            t0 = time.time()
            record, is_bad = one_case(kvtwin, repo, rnd, i, sc, sets, work)
            bad += is_bad
            log.write(json.dumps(dict({'i': i, 'scenario': sc}, **record,
                                      wall_s=round(time.time() - t0, 2), sets=sets)) + '\n')
            log.flush()
    shutil.rmtree(work, ignore_errors=True)
    print(f'{cases} cases, {bad} bad')


_TRACE_EVENTS = {}


def trace_events(path):
    """trace.json's events, parsed once per written file: three checks read them, and a file is
    known by its path, size and modification time (each case rewrites the same path)."""
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    if key not in _TRACE_EVENTS:
        _TRACE_EVENTS.clear()
        events = json.load(open(path))
        _TRACE_EVENTS[key] = events['traceEvents'] if isinstance(events, dict) else events
    return _TRACE_EVENTS[key]


def check_trace_lengths(out, trace_path):
    """Stop 22: every request's prompt_tokens is its trace row's input length, and a finished
    request generated its row's output length (when prompt + output fit vllm.max_model_len);
    trace.json parses and no event has a negative duration. The first violation, or None."""
    import csv
    import tomllib
    with open(f'{out}/scenario.toml', 'rb') as f:
        max_model_len = tomllib.load(f)['vllm']['max_model_len']
    if trace_path.endswith('.csv'):  # Azure
        lengths = [(int(row['ContextTokens']), int(row['GeneratedTokens']))
                   for row in csv.DictReader(open(trace_path))]
    else:
        lengths = [(row['input_length'], row['output_length'])
                   for row in map(json.loads, open(trace_path))]
    for r in csv.DictReader(open(f'{out}/requests.csv')):
        prompt, output = lengths[int(r['index'])]
        if int(r['prompt_tokens']) != prompt:
            return f'request {r["index"]}: prompt_tokens {r["prompt_tokens"]}, trace {prompt}'
        ended_well = r['rejected'] == '0' and r['load_error'] == '0'
        if ended_well and prompt + output <= max_model_len and int(r['output_tokens']) != output:
            return f'request {r["index"]}: output_tokens {r["output_tokens"]}, trace {output}'
    if not os.path.exists(f'{out}/trace.json'):  # output.chrome_trace off: check_slo_and_trace
        return None
    for e in trace_events(f'{out}/trace.json'):
        if e.get('dur', 0) < 0:
            return f'trace.json event with a negative duration: {e}'
    return None


def check_outputs(out):
    """Stop 22: what any run's outputs must satisfy; the first violation found, or None.
    summary.json: each latency's p50 <= p90 <= p99 <= max and 0 <= mean <= max; GPU prefix hits
    within the prompt tokens, KV usage mean <= peak <= 1; each LMCache tier's mean <= peak <=
    capacity (when bounded); SLO attainment in [0, 1], goodput <= throughput; links' bytes >= 0
    and busy fractions in [0, 1]. timeseries.csv: times increasing, no negative value, KV usage
    mean <= max <= 1 (values printed to 4 decimals), finishes adding up to the finished requests.
    requests.csv: one row per request; arrival <= first scheduled <= first token <= finish where
    they happened; a request's GPU and LMCache hits within its prompt; TTFT and E2E equal to
    their timestamps' differences; its prompt tokens, hits, loaded and failed tokens per tier and
    preemptions summing to summary.json's; a request rejected before its first schedule without
    hits or loads (stop 26); the input and output throughput times the duration equal to the
    finished requests' prompt and output tokens, and each latency's sample count the finished
    rows' (ITL: their token gaps) (stop 27)."""
    import csv
    s = json.load(open(f'{out}/summary.json'))
    eps = 1e-6
    for name in ('ttft_ms', 'tpot_ms', 'itl_ms', 'e2e_ms', 'queue_ms'):
        d = s.get(name, {})
        if not d or not d.get('count'):
            continue
        if not (0 <= d['p50'] <= d['p90'] + eps <= d['p99'] + 2 * eps <= d['max'] + 3 * eps):
            return f'{name} percentiles {d}'
        if not (-eps <= d['mean'] <= d['max'] + eps):
            return f'{name} mean {d}'
    g = s['gpu_prefix_cache']
    if not 0 <= g['hit_tokens'] <= g['prompt_tokens']:
        return f'gpu hits {g}'
    if not 0 <= g['kv_usage_mean'] <= g['kv_usage_peak'] + eps <= 1 + 2 * eps:
        return f'kv usage {g}'
    for tier in ('cpu', 'disk', 'remote'):
        t = s.get('lmcache', {}).get(tier)
        cap = t['capacity_bytes'] if t and t['capacity_bytes'] > 0 else float('inf')  # 0: unbounded
        if t and not 0 <= t['mean_bytes'] <= t['peak_bytes'] * (1 + eps) <= cap * (1 + 2 * eps) + 1:
            return f'lmcache {tier} occupancy {t}'
    if not 0 <= s['goodput']['slo_attainment'] <= 1 or \
            s['goodput']['requests_per_s'] > s['throughput']['requests_per_s'] * (1 + eps):
        return f'goodput {s["goodput"]} against throughput {s["throughput"]}'
    for name, link in s.get('links', {}).items():
        if link['bytes'] < 0 or not 0 <= link['busiest_busy_fraction'] <= 1 + eps:
            return f'link {name} {link}'
    last_t = -1.0
    series = list(csv.DictReader(open(f'{out}/timeseries.csv')))
    if series:  # finished_per_s (3 decimals) times each row's own interval adds up to the
        # finished requests. Rows are not evenly spaced (an idle gap keeps its first and last
        # rows only). The first row's rate is 0 at t = 0; with a warm-up, it counts from the last
        # sample before the window, one timeseries interval earlier (the window's start is an
        # event, so no idle gap is collapsed across it).
        finished, span = 0.0, 0.0
        if 'warmup' in s:
            import tomllib
            with open(f'{out}/scenario.toml', 'rb') as f:
                interval = tomllib.load(f)['output']['timeseries_interval_s']
            finished, span = float(series[0]['finished_per_s']) * interval, interval
        elif float(series[0]['finished_per_s']) != 0:
            return f'timeseries.csv first row {series[0]}'
        for prev, row in zip(series, series[1:]):
            dt = float(row['t_s']) - float(prev['t_s'])
            finished += float(row['finished_per_s']) * dt
            span += dt
        if abs(finished - s['requests']['finished']) > 0.0005 * span + 0.001 * len(series) + 1e-6:
            return f'timeseries.csv finishes {finished} against {s["requests"]["finished"]}'
    for row in series:
        t = float(row['t_s'])
        if t <= last_t:
            return f'timeseries.csv: time {t} after {last_t}'
        last_t = t
        usage_mean, usage_max = float(row['gpu_kv_usage_mean']), float(row['gpu_kv_usage_max'])
        if any(float(v) < 0 for k, v in row.items() if k != 't_s') or \
                not usage_mean <= usage_max + 1e-4 <= 1 + 2e-4:
            return f'timeseries.csv at {t}: {row}'
    rows = list(csv.DictReader(open(f'{out}/requests.csv')))
    if len(rows) != s['requests']['total']:
        return f'requests.csv has {len(rows)} rows for {s["requests"]["total"]} requests'
    # The summary's token counts are the requests' sums (the stop-21 layerwise bug broke this).
    lm = s.get('lmcache', {})
    totals = {'prompt_tokens': s['gpu_prefix_cache']['prompt_tokens'],
              'gpu_hit_tokens': s['gpu_prefix_cache']['hit_tokens'],
              'lmcache_hit_tokens': lm.get('hit_tokens', 0),
              'failed_load_tokens': lm.get('failed_load_tokens', 0),
              'preemptions': s['engine']['preemptions']}
    for tier in ('cpu', 'disk', 'remote'):
        totals[f'{tier}_loaded_tokens'] = lm.get(tier, {}).get('loaded_tokens', 0)
    for column, total in totals.items():
        if sum(int(r[column]) for r in rows) != total:
            return f'requests.csv {column} sums to {sum(int(r[column]) for r in rows)}, ' \
                   f'summary.json says {total}'
    # Stop 27: throughput counts the finished requests' tokens (as vllm bench serve does).
    done = [r for r in rows if r['rejected'] == '0' and r['load_error'] == '0']
    for key, column in (('input_tokens_per_s', 'prompt_tokens'),
                        ('output_tokens_per_s', 'output_tokens')):
        want = sum(int(r[column]) for r in done)
        got = s['throughput'][key] * s['duration_s']
        if s['duration_s'] > 0 and abs(got - want) > 1e-7 * want + 1e-3:
            return f'throughput.{key} x duration_s = {got}, finished requests\' {column}: {want}'
    # Stop 27: the latencies' sample counts follow the finished rows (ITL: one per token gap).
    counts = {'ttft_ms': len(done), 'e2e_ms': len(done), 'queue_ms': len(done),
              'tpot_ms': sum(1 for r in done if int(r['output_tokens']) > 1),
              'itl_ms': sum(int(r['output_tokens']) - 1 for r in done)}
    for name, want in counts.items():
        if s.get(name, {}).get('count', 0) != want:
            return f'{name}.count {s.get(name, {}).get("count")}, requests.csv gives {want}'
    for r in rows:
        times = [float(r[k]) for k in ('arrival_s', 'first_scheduled_s', 'first_token_s',
                                       'finish_s') if r[k] != '']
        if times != sorted(times):
            return f'request {r["index"]}: times out of order {times}'
        if int(r['gpu_hit_tokens']) + int(r['lmcache_hit_tokens']) > int(r['prompt_tokens']):
            return f'request {r["index"]}: hits beyond the prompt'
        # Stop 26: a request rejected before any admission used no hit and loaded nothing.
        if r['rejected'] == '1' and r['first_scheduled_s'] == '' and \
                any(int(r[k]) for k in ('gpu_hit_tokens', 'lmcache_hit_tokens', 'cpu_loaded_tokens',
                                        'disk_loaded_tokens', 'remote_loaded_tokens')):
            return f'request {r["index"]}: rejected before admission, with hits or loads'
        for ms, a, b in (('ttft_ms', 'arrival_s', 'first_token_s'),
                         ('e2e_ms', 'arrival_s', 'finish_s')):
            if r[ms] != '' and r[a] != '' and r[b] != '' and \
                    abs(float(r[ms]) - 1e3 * (float(r[b]) - float(r[a]))) > 2e-3:
                return f'request {r["index"]}: {ms} {r[ms]} vs timestamps {r[a]}, {r[b]}'
    return None


def check_slo_and_trace(out, sets):
    """Stop 24: the goodput's SLO attainment is the share of finished requests whose TTFT is at
    most slo.ttft_ms and whose TPOT (when they have one) at most slo.tpot_ms, taken from
    requests.csv and the run's scenario.toml (a request within 1 us of a threshold may count
    either way: requests.csv prints 3 decimals); trace.json is absent when output.chrome_trace
    is off, else holds at most chrome_trace_max_events events, and exactly that many when
    summary.json counts dropped ones. The first violation, or None."""
    import csv
    import tomllib
    s = json.load(open(f'{out}/summary.json'))
    sc = tomllib.load(open(f'{out}/scenario.toml', 'rb'))
    slo, output = sc['slo'], sc['output']
    sure = maybe = finished = 0
    with open(f'{out}/requests.csv', newline='') as f:
        for r in csv.DictReader(f):
            if r['finish_s'] == '' or r['rejected'] == '1' or r['load_error'] == '1':
                continue
            finished += 1
            ttft = float(r['ttft_ms'])
            tpot = float(r['tpot_ms']) if r['tpot_ms'] != '' else None
            ok = ttft <= slo['ttft_ms'] and (tpot is None or tpot <= slo['tpot_ms'])
            near = abs(ttft - slo['ttft_ms']) <= 1e-3 or \
                (tpot is not None and abs(tpot - slo['tpot_ms']) <= 1e-3)
            if near:
                maybe += 1
            elif ok:
                sure += 1
    if finished != s['requests']['finished']:
        return f'requests.csv has {finished} finished requests, summary.json {s["requests"]}'
    got = s['goodput']['slo_attainment'] * finished
    eps = 1e-6 * finished  # summary.json prints 9 significant digits
    if finished and not sure - eps <= got <= sure + maybe + eps:
        return f'SLO attainment {s["goodput"]["slo_attainment"]} of {finished}: requests.csv ' \
               f'gives {sure} (+{maybe} at a threshold)'
    path = f'{out}/trace.json'
    if not output['chrome_trace']:
        return 'trace.json written with output.chrome_trace off' if os.path.exists(path) else None
    kept = sum(1 for e in trace_events(path) if e.get('ph') != 'M')
    cap = output['chrome_trace_max_events']
    dropped = s['engine'].get('trace_events_dropped', 0)
    if kept > cap or (dropped > 0 and kept != cap):
        return f'trace.json holds {kept} events under a cap of {cap} with {dropped} dropped'
    return None


KV_BYTES = {'bfloat16': 2, 'float16': 2, 'float32': 4, 'fp8': 1}


def check_link_bytes(out):
    """Stop 28: summary.json's link bytes are whole numbers and add up to the tokens LMCache
    moved. B is one GPU's KV bytes per token (MLA: the latent, on every rank; otherwise the
    GPU's share of the KV heads), R the ranks that hold tiers (1 under MLA's
    save_only_first_rank). Then pcie_h2d = B x every tier's loaded tokens (one GPU's bytes);
    without async loading, disk reads (page-cache hits included) = B x R x the disk's loaded
    tokens and NIC receives = B x R x the remote's; with it, the two together are the prefetch
    bytes x R; the remote store sends what the NICs receive and receives what they send; the
    disk writes at most B x R x the stored tokens (pcie_d2h / B); with a remote tier and no
    Redis writes lost to the layerwise quirk or to the health monitor, the NICs send the stored
    tokens of the ranks that write to Redis (rank 0 alone under MLA), at most those when a store
    raised (bulk mode: its copy ran, its Redis put may not have); in layerwise mode with
    partial chunks saved, the writes carry each layer object's 4-KiB alignment, so there they
    are bounded below only. Not checked
    after a warm-up (the counters start mid-run). The first violation, or None."""
    import tomllib
    s = json.load(open(f'{out}/summary.json'))
    with open(f'{out}/scenario.toml', 'rb') as f:
        sc = tomllib.load(f)
    links = s['links']
    for kind, link in links.items():
        if not isinstance(link['bytes'], int):
            return f'links.{kind}.bytes is not a whole number: {link["bytes"]}'
    # With a warm-up the counters start mid-run: transfers in flight at the window's start count
    # in part, and chunks stored before it are written to disk after it.
    if not sc['lmcache']['enabled'] or 'warmup' in s:
        return None
    m, tp = sc['model'], sc['gpu']['tensor_parallel']
    kv = m['kv_cache_dtype'] if m['kv_cache_dtype'] != 'auto' else m['dtype']
    width = KV_BYTES.get(kv, 2)  # mxfp4 weights keep a bfloat16 cache
    if m['attention'] == 'mla':
        per_gpu = (m['kv_lora_rank'] + m['qk_rope_head_dim']) * m['num_layers'] * width
        ranks = 1 if sc['lmcache']['save_only_first_rank'] and \
            not sc['lmcache']['use_layerwise'] else tp
    else:
        per_gpu = 2 * m['num_layers'] * (m['num_kv_heads'] // tp) * m['head_size'] * width
        ranks = tp
    lm = s['lmcache']
    loaded = {t: lm[t]['loaded_tokens'] for t in ('cpu', 'disk', 'remote')}
    moved = {k: links[k]['bytes'] if k in links else 0 for k in
             ('pcie_h2d', 'pcie_d2h', 'disk_read', 'disk_write', 'nic_rx', 'nic_tx',
              'remote_rx', 'remote_tx')}
    disk_read = moved['disk_read'] + lm['disk'].get('page_cache', {}).get('hit_bytes', 0)
    want = [('pcie_h2d', moved['pcie_h2d'], per_gpu * sum(loaded.values())),
            ('remote_tx', moved['remote_tx'], moved['nic_rx']),
            ('remote_rx', moved['remote_rx'], moved['nic_tx'])]
    if 'async_loading' in lm:
        want.append(('disk_read + nic_rx', disk_read + moved['nic_rx'],
                     lm['async_loading']['prefetch_bytes_per_rank'] * ranks))
    else:
        want += [('disk_read', disk_read, per_gpu * ranks * loaded['disk']),
                 ('nic_rx', moved['nic_rx'], per_gpu * ranks * loaded['remote'])]
    # A layerwise store that raised counts the layers it had put (stop 28): whole tokens of one
    # layer each (stop 30: reached by LFU over a disk tier).
    unit = per_gpu // m['num_layers'] if sc['lmcache']['use_layerwise'] and lm['failed_stores'] \
        else per_gpu
    if moved['pcie_d2h'] % unit:
        return f'pcie_d2h {moved["pcie_d2h"]} is not whole tokens of {unit} bytes'
    stored = moved['pcie_d2h'] * ranks
    # Layerwise objects come from one batched allocation per chunk: each layer's byte_array is
    # its 4-KiB aligned unit, so a partial chunk's disk and Redis writes carry padding the GPU
    # copy does not (upstream's sizes): with partial chunks saved they are bounded below only.
    layerwise = sc['lmcache']['use_layerwise'] and sc['lmcache']['save_unfull_chunk']
    if moved['disk_write'] > stored and not layerwise:
        return f'disk_write {moved["disk_write"]} > the stored tokens\' {stored} bytes'
    # Under MLA only rank 0 writes to Redis (LMCache's remote_enable_mla_worker_id_as0).
    writers = 1 if m['attention'] == 'mla' and tp > 1 else ranks
    # Stop 30: a store that raised in its puts was copied (pcie_d2h) but may have stopped before
    # its Redis put, so with failed stores the NICs send at most the stored tokens.
    if sc['lmcache']['remote'] and not lm['failed_remote_writes'] and \
            not lm.get('health', {}).get('unhealthy_periods'):
        if not layerwise and not lm['failed_stores']:
            want.append(('nic_tx', moved['nic_tx'], moved['pcie_d2h'] * writers))
        elif layerwise and not lm['failed_stores'] and \
                moved['nic_tx'] < moved['pcie_d2h'] * writers:
            return f'nic_tx {moved["nic_tx"]} < the stored tokens\' ' \
                f'{moved["pcie_d2h"] * writers} bytes'
        elif not layerwise and moved['nic_tx'] > moved['pcie_d2h'] * writers:
            return f'nic_tx {moved["nic_tx"]} > the stored tokens\' ' \
                f'{moved["pcie_d2h"] * writers} bytes'
    for name, got, expected in want:
        if got != expected:
            return f'{name} {got} bytes, expected {expected}'
    return None


TRACE_PATH_LINKS = {'gpu->cpu': ['pcie_d2h'], 'cpu->gpu': ['pcie_h2d'],
                    'cpu->disk': ['disk_write'], 'disk->cpu': ['disk_read', '<page cache hits>'],
                    'cpu->remote': ['nic_tx'], 'remote->cpu': ['nic_rx']}


def check_trace_bytes(out):
    """Stop 28: trace.json's transfers add up to summary.json's link bytes, per path: gpu->cpu to
    pcie_d2h, cpu->gpu to pcie_h2d, cpu->disk to disk_write, disk->cpu to disk_read plus the
    page cache's hits, cpu->remote to nic_tx and remote->cpu to nic_rx; and its step events
    are engine.steps, their tokens steps x mean_batch_tokens. Only for a whole run written in
    full (no warm-up, no dropped event). The first violation, or None."""
    s = json.load(open(f'{out}/summary.json'))
    if not os.path.exists(f'{out}/trace.json') or 'warmup' in s or \
            s['engine']['trace_events_dropped']:
        return None
    moved = {}
    steps = step_tokens = 0
    for e in trace_events(f'{out}/trace.json'):
        path = e.get('args', {}).get('path') if e.get('ph') == 'X' else None
        if path is not None:
            moved[path] = moved.get(path, 0) + e['args']['bytes']
        elif e.get('ph') == 'X' and e.get('name') == 'step':
            steps += 1
            step_tokens += e['args']['tokens']
    engine = s['engine']
    summed = engine['steps'] * engine['mean_batch_tokens']  # the mean has 9 digits
    if steps != engine['steps'] or abs(step_tokens - summed) > 1e-8 * step_tokens + 0.5:
        return f'trace.json has {steps} steps of {step_tokens} tokens, summary.json ' \
            f'{engine["steps"]} of mean {engine["mean_batch_tokens"]}'
    hits = s['lmcache']['disk'].get('page_cache', {}).get('hit_bytes', 0)
    for path, links in TRACE_PATH_LINKS.items():
        want = sum(hits if k == '<page cache hits>' else
                   s['links'].get(k, {}).get('bytes', 0) for k in links)
        if moved.get(path, 0) != want:
            return f'trace.json {path} transfers move {moved.get(path, 0)} bytes, ' \
                f'summary.json {"+".join(links)} {want}'
    unknown = set(moved) - set(TRACE_PATH_LINKS)
    return f'trace.json paths without a link: {sorted(unknown)}' if unknown else None


def check_peaks(out):
    """Stop 28: summary.json's occupancy peaks are timeseries.csv's largest samples (the file
    rounds GiB to 3 decimals and KV usage to 4): each LMCache tier's peak_bytes and
    gpu_prefix_cache.kv_usage_peak. The first violation, or None."""
    import csv
    s = json.load(open(f'{out}/summary.json'))
    rows = list(csv.DictReader(open(f'{out}/timeseries.csv')))
    if not rows:
        return None
    for tier in ('cpu', 'disk', 'remote'):
        sampled = max(float(r[f'{tier}_gib']) for r in rows)
        peak = s['lmcache'][tier]['peak_bytes'] / 2**30
        if abs(sampled - peak) > 0.0005 + 1e-9 * peak:
            return f'lmcache.{tier}.peak_bytes is {peak:.4f} GiB, timeseries.csv {sampled} GiB'
    sampled = max(float(r['gpu_kv_usage_max']) for r in rows)
    if abs(sampled - s['gpu_prefix_cache']['kv_usage_peak']) > 0.00005 + 1e-12:
        return f'kv_usage_peak {s["gpu_prefix_cache"]["kv_usage_peak"]}, timeseries.csv {sampled}'
    # Stop 35: each link kind's peak rate is its timeseries.csv column's largest value (3
    # decimals of GB/s), and no link moves faster than its bandwidth (plus a byte per interval:
    # the counts are whole bytes).
    import tomllib
    with open(f'{out}/scenario.toml', 'rb') as f:
        sc = tomllib.load(f)
    links, interval = sc['links'], sc['output']['timeseries_interval_s']
    bandwidth = {'pcie_h2d': links['pcie_h2d_gbps'], 'pcie_d2h': links['pcie_d2h_gbps'],
                 'disk_read': links['disk_read_gbps'], 'disk_write': links['disk_write_gbps'],
                 'nic_rx': links['network_gbps'], 'nic_tx': links['network_gbps'],
                 'remote_rx': links['remote_server_gbps'],
                 'remote_tx': links['remote_server_gbps'],
                 'page_cache': links['page_cache_gbps'],
                 'page_cache_write': links['page_cache_write_gbps']}
    for kind, link in s['links'].items():
        peak = link['peak_gbps']
        if abs(link['capacity_gbps'] - bandwidth[kind]) > 1e-9 * bandwidth[kind]:
            return f'links.{kind}.capacity_gbps {link["capacity_gbps"]}, scenario {bandwidth[kind]}'
        if peak > bandwidth[kind] * (1 + 1e-9) + 1e-9 / interval:
            return f'links.{kind}.peak_gbps {peak} above the link\'s {bandwidth[kind]} GB/s'
        column = f'{kind}_gbps'
        if column in rows[0]:
            sampled = max(float(r[column]) for r in rows)
            if abs(sampled - peak) > 0.0005 + 1e-9 * peak:
                return f'links.{kind}.peak_gbps is {peak}, timeseries.csv {sampled}'
    return None


def check_request_loads(out):
    """Stop 28: each request's LMCache load, from requests.csv. A request whose LMCache hit h
    (beyond vLLM's hit g, of a p-token prompt) was loaded once and in full (not preempted, no
    failed load) loaded whole chunks from the one holding token g on: g + h tokens (+ 1 for a
    whole-prompt hit, whose last token vLLM recomputes), less g rounded down to the chunk size;
    a request without an LMCache hit loaded nothing. When g + h = p - 1 the file cannot tell a
    whole-prompt hit from a hit that ends one token short (a one-token partial chunk not
    cached): either load passes. The first violation, or None."""
    import csv
    import tomllib
    with open(f'{out}/scenario.toml', 'rb') as f:
        sc = tomllib.load(f)
    if not sc['lmcache']['enabled']:
        return None
    chunk = sc['lmcache']['chunk_size']
    for r in csv.DictReader(open(f'{out}/requests.csv')):
        if r['rejected'] == '1' or r['preemptions'] != '0' or r['failed_load_tokens'] != '0':
            continue
        g, h, p = (int(r[k]) for k in ('gpu_hit_tokens', 'lmcache_hit_tokens', 'prompt_tokens'))
        loaded = sum(int(r[f'{t}_loaded_tokens']) for t in ('cpu', 'disk', 'remote'))
        want = 0 if h == 0 else g + h + (1 if g + h == p - 1 else 0) - g // chunk * chunk
        if loaded != want and not (h > 0 and g + h == p - 1 and loaded == want - 1):
            return f'request {r["index"]}: loaded {loaded} tokens, expected {want} ' \
                f'(vLLM hit {g}, LMCache hit {h}, prompt {p})'
    return None


def check_computed_tokens(out):
    """Stop 28: without preemptions, failed KV loads or a warm-up, the engine's steps computed
    exactly what the requests needed: engine.steps x engine.mean_batch_tokens equals, over the
    requests not rejected, the prompt tokens neither vLLM's prefix cache nor LMCache held and one
    decode token per output token after the first (the first comes from the prefill). (A failed
    synchronous load also recomputes the tokens its step computed past the hit, as vLLM does.)
    The violation, or None."""
    import csv
    s = json.load(open(f'{out}/summary.json'))
    if s['engine']['preemptions'] or s['requests']['failed'] or 'warmup' in s or \
            s['lmcache']['failed_load_tokens']:
        return None
    computed = s['engine']['steps'] * s['engine']['mean_batch_tokens']  # the mean has 9 digits
    needed = 0
    for r in csv.DictReader(open(f'{out}/requests.csv')):
        if r['rejected'] == '1':
            continue
        needed += int(r['prompt_tokens']) - int(r['gpu_hit_tokens']) - \
            int(r['lmcache_hit_tokens']) + max(int(r['output_tokens']) - 1, 0)
    if abs(computed - needed) > 1e-8 * needed + 0.5:
        return f'the steps computed {computed:.0f} tokens, the requests needed {needed}'
    return None


def sweep_point_differs(kvtwin, repo, sc, sets, out_a, out_s):
    """Stop 22: `kvtwin sweep` over workload.rate_scale (the case's value, then half of it: a
    faster rate could leave a workload.start_s window without requests, an error) with
    the case's other settings, 2 jobs; the first point's outputs must be the plain run's (but the
    count of trace events dropped: a point records none). The first file that differs,
    'TIMEOUT', 'rc N: error' or None."""
    args = command(kvtwin, repo, sc, {k: v for k, v in sets.items() if k != 'workload.rate_scale'},
                   out_s)
    args[1] = 'sweep'
    rate = float(sets['workload.rate_scale'])
    args += ['--vary', f'workload.rate_scale={rate!r},{rate / 2!r}', '-j', '2']
    shutil.rmtree(out_s, ignore_errors=True)
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return 'TIMEOUT'
    if p.returncode != 0:
        return f'rc {p.returncode}: {p.stderr.strip()[-200:]}'
    # Sweep points write no trace.json, so none of their trace events is dropped at its cap.
    summaries = [json.load(open(f'{d}/summary.json')) for d in (out_a, f'{out_s}/points/0')]
    for s in summaries:
        s['engine'].pop('trace_events_dropped', None)
    if summaries[0] != summaries[1]:
        return 'summary.json'
    for f in ['requests.csv', 'timeseries.csv']:
        if open(f'{out_a}/{f}', 'rb').read() != open(f'{out_s}/points/0/{f}', 'rb').read():
            return f
    return None


def warmup_differs(kvtwin, repo, sc, sets, out_a, out_w):
    """Stop 23: a window whose warm-up starts at the trace's beginning (warmup_s = start_s) runs
    its requests exactly as the whole replay of the same requests does (max_requests: the
    warm-up's and the window's). Its requests.csv must be the whole replay's rows of the window's
    requests; the whole replay's other rows are the warm-up's. The first difference, or None."""
    import csv
    s = json.load(open(f'{out_a}/summary.json'))
    whole = {k: v for k, v in sets.items() if k not in ('workload.start_s', 'workload.warmup_s')}
    whole['workload.max_requests'] = s['warmup']['requests'] + s['requests']['total']
    if 'workload.max_duration_s' in sets:  # counted from start_s: the whole replay's from 0
        whole['workload.max_duration_s'] = \
            float(sets['workload.start_s']) + float(sets['workload.max_duration_s'])
    rc, err = run_kvtwin(kvtwin, repo, sc, whole, out_w, 200)
    if rc != 0:
        return f'whole replay rc {rc}: {err[-200:]}'
    window = {row['index']: row for row in csv.DictReader(open(f'{out_a}/requests.csv'))}
    rows = {row['index']: row for row in csv.DictReader(open(f'{out_w}/requests.csv'))}
    start = float(sets['workload.start_s'])
    for index, row in rows.items():
        if index in window:
            if window[index] != row:
                return f'request {index}: window {window[index]} whole {row}'
        elif float(row['arrival_s']) > start:  # printed to the µs: a warm-up's may read start
            return f'request {index} of the window is not in its requests.csv'
    if len(rows) != len(window) + s['warmup']['requests']:
        return f'{len(rows)} whole rows against {len(window)} + {s["warmup"]["requests"]}'
    return None


def file_differs(dir_a, dir_b, name):
    """Whether output file `name` differs between two run directories: present in one only
    (trace.json with output.chrome_trace off is in neither), or with other bytes."""
    a, b = os.path.join(dir_a, name), os.path.join(dir_b, name)
    if os.path.exists(a) != os.path.exists(b):
        return True
    return os.path.exists(a) and open(a, 'rb').read() != open(b, 'rb').read()


def fuzz_case(kvtwin, repo, rnd, i, sc, sets, work):
    out_a, out_b = f'{work}/a', f'{work}/b'
    rc, err = run_kvtwin(kvtwin, repo, sc, sets, out_a, 90)
    if rc == 0 and i % 5 == 0:
        run_kvtwin(kvtwin, repo, sc, sets, out_b, 200)
        for f in ['summary.json', 'requests.csv', 'timeseries.csv', 'trace.json']:
            if file_differs(out_a, out_b, f):
                rc, err = 'NONDET', f
    if rc == 0 and i % 7 == 3 and 'workload.rate_scale' in sets:
        differs = sweep_point_differs(kvtwin, repo, sc, sets, out_a, f'{work}/s')
        if differs:
            rc, err = 'SWEEP', differs
    if rc == 0 and sets.get('workload.warmup_s') == sets.get('workload.start_s', -1):
        differs = warmup_differs(kvtwin, repo, sc, sets, out_a, f'{work}/w')
        if differs:
            rc, err = 'WARMUP', differs
    status = 'ok'
    if rc == 'TIMEOUT':
        status = 'SLOW'
    elif rc == 2 and err.count('\n') == 0 and err.startswith('kvtwin:'):
        status = 'refused'
    elif err.count('\n') == 0 and upstream_stop(rc, err, sets):
        status = 'upstream-stop'
    elif rc != 0:
        status = 'BAD'
    else:
        s = json.load(open(f'{out_a}/summary.json'))
        r = s['requests']
        if r['finished'] + r['rejected'] + r.get('failed', 0) != r['total']:
            status = 'BAD-count'
        if sets.get('vllm.enable_prefix_caching') == 'false' and \
                s['gpu_prefix_cache']['hit_tokens'] != 0:
            status = 'BAD-hits'
        # A trace with priorities: the classes partition the requests and the finished ones.
        classes = s.get('by_priority', [])
        if '_trace_priorities' in sets and sc != 'whisper_large_v3_encdec' and (
                sum(c['requests'] for c in classes) != r['total'] or
                sum(c['finished'] for c in classes) != r['finished']):
            status = 'BAD-priorities'
        if status == 'ok':
            violation = check_outputs(out_a) or check_slo_and_trace(out_a, sets) or \
                check_link_bytes(out_a) or check_computed_tokens(out_a) or \
                check_trace_bytes(out_a) or check_peaks(out_a) or check_request_loads(out_a)
            if not violation and sc != 'whisper_large_v3_encdec':
                violation = check_trace_lengths(out_a, case_trace(repo, sets))
            if violation:
                status, err = 'BAD-outputs', violation
    return {'status': status, 'rc': rc, 'err': err[-300:]}, \
        status not in ('ok', 'refused', 'upstream-stop')


if __name__ == '__main__':
    case_loop('kvtwin-fuzz-', fuzz_case)
