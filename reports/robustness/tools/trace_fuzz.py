#!/usr/bin/env python3
"""Malformed traces through every kvtwin command that reads one (stop 22).

usage: trace_fuzz.py KVTWIN REPO CASES SEED LOG

Each case takes a small valid trace in one of the formats kvtwin reads (the first 40 requests of
the example Mooncake trace; the same converted to the native CSV, with and without block ids; the
first 40 rows of the Azure conversation trace), applies one to three random mutations (a field
replaced by an odd value — empty, negative, huge, fractional, NaN, infinite, quoted, JSON of the
wrong type —, a field dropped or repeated, a line cut short or duplicated or moved, a header
changed or removed, NUL and non-UTF-8 bytes, CRLF line ends, a byte-order mark, gzip whole or cut
short), and runs `kvtwin trace stats`, `kvtwin trace convert --to native`, `kvtwin cache-replay`
and a 20-request `kvtwin run` on it, each under a 30-s timeout. A command may succeed or refuse;
it is BAD when it dies by a signal, times out, exits with a code other than 0 or 2, or refuses
with anything but one line starting "kvtwin:" on stderr. One JSON line per bad command goes to
LOG, with the mutated trace kept next to it (LOG.N.trace); it prints the outcomes per command, then
the count of bad ones.
"""
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

ODD = ['', '-1', '0', '-0', '1.5', '1e309', '-1e309', 'nan', 'NaN', 'inf', '-inf', '1e18',
       '18446744073709551615', '18446744073709551616', '-9223372036854775809',
       '99999999999999999999999999', '0x10', ' 7', '7 ', '"7"', '"', 'null', 'true', '[]', '{}',
       '[1,', '1e-320', '4294967296', '2147483648', '00012', '+5', '.5', '5.', '1_000']


def run_outcome(cmd, timeout, cwd):
    """Runs a kvtwin command: (kind, rc, stderr); kind 'ok' (exit 0), 'refused' (exit 2 with one
    line starting "kvtwin:") or 'BAD' (anything else: a signal, a timeout, another code)."""
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout, cwd=cwd)
        rc, err = p.returncode, p.stderr.decode('utf-8', 'replace').strip()
    except subprocess.TimeoutExpired:
        rc, err = 'TIMEOUT', ''
    if rc == 0:
        return 'ok', rc, err
    refused = rc == 2 and err.count('\n') == 0 and err.startswith('kvtwin:')
    return ('refused' if refused else 'BAD'), rc, err


def seeds(repo, work, kvtwin):
    """The valid starting traces: {name: (text, format)}."""
    src = f'{repo}/traces/examples/mooncake_conversation_10min.jsonl'
    with open(src) as f:
        moon = ''.join(f.readline() for _ in range(40))
    moon_path = f'{work}/seed.jsonl'
    with open(moon_path, 'w') as f:
        f.write(moon)
    out = {'mooncake': (moon, 'mooncake')}
    native_path = f'{work}/seed.csv'
    subprocess.run([kvtwin, 'trace', 'convert', moon_path, native_path, '--to', 'native'],
                   check=True, capture_output=True)
    with open(native_path) as f:
        native = f.read()
    out['native_blocks'] = (native, 'native')
    lines = native.splitlines()
    header = lines[0].split(',')
    keep = [i for i, h in enumerate(header) if h in ('arrival_s', 'prompt_tokens', 'output_tokens')]
    out['native_plain'] = ('\n'.join(','.join(l.split(',')[i] for i in keep) for l in lines) + '\n',
                           'native')
    with open(f'{repo}/traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv') as f:
        out['azure'] = (''.join(f.readline() for _ in range(41)), 'azure')
    return out


def mutate_json_line(rnd, line):
    try:
        row = json.loads(line)
    except ValueError:
        return line
    keys = list(row)
    if not keys:
        return line
    k = rnd.choice(keys)
    op = rnd.random()
    parts = []
    for key in keys:
        if key == k and op < 0.15:
            continue  # dropped
        value = json.dumps(row[key])
        if key == k and op >= 0.15:
            if key == 'hash_ids' and rnd.random() < 0.5:
                value = '[' + ', '.join(rnd.choice(ODD + ['1', '2']) or '0'
                                        for _ in range(rnd.randint(0, 4))) + ']'
            else:
                value = rnd.choice(ODD)
        parts.append(f'"{key}": {value}')
        if key == k and 0.15 <= op < 0.25:
            parts.append(f'"{key}": {rnd.choice(ODD) or "1"}')  # repeated key
    return '{' + ', '.join(parts) + '}'


def mutate_csv_line(rnd, line):
    fields = line.split(',')
    i = rnd.randrange(len(fields))
    op = rnd.random()
    if op < 0.15:
        del fields[i]
    elif op < 0.25:
        fields.insert(i, rnd.choice(ODD))
    else:
        fields[i] = rnd.choice(ODD)
    return ','.join(fields)


def mutate(rnd, text, fmt):
    """One to three mutations of `text`; the bytes to write."""
    lines = text.splitlines()
    data = None
    for _ in range(rnd.randint(1, 3)):
        op = rnd.randrange(10)
        body = 0 if fmt == 'mooncake' else 1
        if not lines:
            lines = ['']
        i = rnd.randrange(len(lines))
        if op <= 3 and len(lines) > body:
            j = rnd.randrange(body, len(lines))
            lines[j] = (mutate_json_line if fmt == 'mooncake' else mutate_csv_line)(rnd, lines[j])
        elif op == 4:
            lines[i] = lines[i][:rnd.randrange(len(lines[i]) + 1)]  # cut short
        elif op == 5:
            lines[i:i] = [lines[i]] * rnd.randint(1, 5)  # duplicated
        elif op == 6 and len(lines) > body + 1:
            j = rnd.randrange(body, len(lines))
            lines.insert(rnd.randrange(body, len(lines)), lines.pop(j))  # moved (time order)
        elif op == 7 and fmt != 'mooncake':
            lines[0] = rnd.choice(['', lines[0].upper(), lines[0] + ',extra',
                                   ','.join(reversed(lines[0].split(','))), lines[0] + ','])
            if rnd.random() < 0.3:
                del lines[0]
        elif op == 8:
            pos = rnd.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:pos] + rnd.choice(['\0', '\udcff', '\udc80', '\t', ' ', '\r',
                                                      '""', '\u2028']) + lines[i][pos:]
        else:
            lines.insert(i, rnd.choice(['', ' ', '#', '{}', ',,,', '\t']))
    sep = '\r\n' if rnd.random() < 0.1 else '\n'
    text = sep.join(lines) + (sep if rnd.random() < 0.8 else '')
    data = text.encode('utf-8', 'surrogateescape')
    if rnd.random() < 0.05:
        data = b'\xef\xbb\xbf' + data
    if rnd.random() < 0.1:
        data = gzip.compress(data)
        if rnd.random() < 0.5:
            data = data[:rnd.randrange(len(data))]
    return data


def commands(kvtwin, repo, path, work):
    out = f'{work}/out'
    shutil.rmtree(out, ignore_errors=True)
    return {
        'stats': [kvtwin, 'trace', 'stats', path],
        'convert': [kvtwin, 'trace', 'convert', path, f'{work}/converted.csv', '--to', 'native'],
        'cache-replay': [kvtwin, 'cache-replay', '-q', '--trace', path, '--tier', 'cpu',
                         '--capacity-gb', '1,8'],
        'run': [kvtwin, 'run', '-q', '--trace', path, '--set', 'workload.max_requests=20',
                '--set', 'output.plots=false', '--out', out],
    }


def main():
    kvtwin, repo, cases, seed, log_path = sys.argv[1:6]
    kvtwin = os.path.abspath(kvtwin)
    rnd = random.Random(int(seed))
    work = tempfile.mkdtemp(prefix='kvtwin-trace-fuzz-')
    base = seeds(repo, work, kvtwin)
    bad = 0
    outcomes = {}  # (command, 'ok' | 'refused' | 'BAD') -> count
    with open(log_path, 'w') as log:
        for i in range(int(cases)):
            name = rnd.choice(sorted(base))
            text, fmt = base[name]
            data = mutate(rnd, text, fmt)
            path = f'{work}/case.{"jsonl" if fmt == "mooncake" else "csv"}'
            with open(path, 'wb') as f:
                f.write(data)
            for cmd_name, cmd in commands(kvtwin, repo, path, work).items():
                kind, rc, err = run_outcome(cmd, 30, work)
                outcomes[(cmd_name, kind)] = outcomes.get((cmd_name, kind), 0) + 1
                if kind == 'BAD':
                    bad += 1
                    kept = f'{log_path}.{i}.trace'
                    shutil.copy(path, kept)
                    log.write(json.dumps({'i': i, 'seed_trace': name, 'command': cmd_name,
                                          'rc': rc, 'err': err[-400:], 'trace': kept}) + '\n')
                    log.flush()
    shutil.rmtree(work, ignore_errors=True)
    print(' '.join(f'{c}:{k}={n}' for (c, k), n in sorted(outcomes.items())))
    print(f'{cases} cases, {bad} bad')


if __name__ == '__main__':
    main()
