#!/usr/bin/env python3
"""Odd scenario values through `kvtwin run`, as --set flags and as scenario files (stop 22).

usage: scenario_fuzz.py KVTWIN REPO CASES SEED LOG

The keys are those scenarios/README.md documents. Each case takes a shipped scenario and one to
three keys, and gives each, 3 times in 5, a legal value from the key's table row (a bound of its
range, just inside it, a middle value, one of its choices), else an odd value (trace_fuzz.ODD,
plus TOML-typed odd values: strings, booleans, arrays, tables, huge and tiny numbers) — half the
cases as --set flags, half written
into a copy of the scenario file (the key's line replaced or added, sometimes twice, or the file
cut short) — then runs `kvtwin run` on the first 10 requests of the example trace under a 60-s
timeout. A run may succeed or refuse; it is BAD when it dies by a signal, times out, exits with a
code other than 0 or 2, or refuses with anything but one line starting "kvtwin:". One JSON line
per bad case goes to LOG; it prints the outcomes, then the count of bad cases.
"""
import json
import os
import random
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trace_fuzz import ODD, run_outcome  # noqa: E402

TOML_ODD = ['"x"', '""', 'true', 'false', '[]', '[1, 2]', '{}', '{ a = 1 }', '1e400', '-1e400',
            '0.0', '-0.0', '1e-300', '9223372036854775807', '-9223372036854775808', 'nan', 'inf',
            '"1"', "'single'", '"""multi\nline"""', '2026-11-27', '0b101', '0o17', '1__0']


def documented_fields(repo):
    """(key, kind, range text) of every row of the field tables in scenarios/README.md, in order:
    kind is the table's type (integer, number, string, boolean)."""
    section = None
    with open(f'{repo}/scenarios/README.md') as f:
        for line in f:
            m = re.match(r'^### \[(\w+)\]', line)
            if m:
                section = m.group(1)
                continue
            m = re.match(r'^\| `([a-z0-9_]+)` \| (\w+) \|[^|]*\| ([^|]*) \|', line)
            if m and section:
                yield f'{section}.{m.group(1)}', m.group(2), m.group(3).strip()


def documented_keys(repo):
    """{key: [legal values worth trying]} from the field tables: a numeric field's bounds (and
    values just inside them, and a middle one), a field's listed choices, both booleans."""
    keys = {}
    for key, kind, rng in documented_fields(repo):
        legal = []
        b = re.match(r'^(-?[0-9.e+]+) … (-?[0-9.e+]+)$', rng)
        if b and kind in ('integer', 'number'):
            lo, hi = float(b.group(1)), float(b.group(2))
            mid = (lo + hi) / 2 if hi - lo < 100 else lo + (hi - lo) ** 0.5
            for v in (lo, hi, mid, lo + 1 if kind == 'integer' else lo * 1.001 + 1e-9):
                v = min(max(v, lo), hi)
                legal.append(str(int(v)) if kind == 'integer' else repr(v))
            if kind == 'number' and lo == 0:
                # Positive, but below one byte in GiB (stop 32: a CPU pool of 4e-10 GiB
                # passed the range check and aborted in the model).
                legal.append('4e-10')
        elif rng and kind == 'string':
            legal = [c.strip() for c in rng.split(',') if c.strip()]
        elif kind == 'boolean':
            legal = ['true', 'false']
        keys[key] = legal
    return keys


def edit_file(rnd, text, key, value):
    """`text` with key = value under its [section]: replacing the key's line, or added (once or
    twice) at the end of the section or of the file."""
    section, name = key.split('.', 1)
    lines = text.splitlines()
    head = f'[{section}]'
    for i, line in enumerate(lines):
        if re.match(rf'^\s*{re.escape(name)}\s*=', line) and rnd.random() < 0.7:
            lines[i] = f'{name} = {value}'
            return '\n'.join(lines) + '\n'
    try:
        at = lines.index(head) + 1
    except ValueError:
        lines += ['', head]
        at = len(lines)
    for _ in range(2 if rnd.random() < 0.2 else 1):
        lines.insert(at, f'{name} = {value}')
    return '\n'.join(lines) + '\n'


def main():
    kvtwin, repo, cases, seed, log_path = sys.argv[1:6]
    kvtwin = os.path.abspath(kvtwin)
    rnd = random.Random(int(seed))
    keys = documented_keys(repo)
    scenarios = sorted(f for f in os.listdir(f'{repo}/scenarios') if f.endswith('.toml'))
    work = tempfile.mkdtemp(prefix='kvtwin-scenario-fuzz-')
    trace = f'{repo}/traces/examples/mooncake_conversation_10min.jsonl'
    bad, outcomes = 0, {}
    with open(log_path, 'w') as log:
        for i in range(int(cases)):
            sc = rnd.choice(scenarios)
            picks = []
            for _ in range(rnd.randint(1, 3)):
                k = rnd.choice(sorted(keys))
                legal = keys[k]
                picks.append((k, rnd.choice(legal) if legal and rnd.random() < 0.6 else
                              rnd.choice(ODD + TOML_ODD)))
            as_flags = rnd.random() < 0.5
            args = [kvtwin, 'run', '-q', '--trace', trace, '--out', f'{work}/out',
                    '--set', 'workload.max_requests=10', '--set', 'output.plots=false']
            if as_flags:
                args += ['--scenario', f'{repo}/scenarios/{sc}']
                for k, v in picks:
                    args += ['--set', f'{k}={v}']
            else:
                with open(f'{repo}/scenarios/{sc}') as f:
                    text = f.read()
                for k, v in picks:
                    text = edit_file(rnd, text, k, v)
                if rnd.random() < 0.1:
                    text = text[:rnd.randrange(len(text))]
                path = f'{work}/{sc}'  # same directory depth: relative paths inside still resolve
                with open(path, 'w') as f:
                    f.write(text)
                args += ['--scenario', path]
            shutil.rmtree(f'{work}/out', ignore_errors=True)
            kind, rc, err = run_outcome(args, 60, repo)
            outcomes[kind] = outcomes.get(kind, 0) + 1
            if kind == 'BAD':
                bad += 1
                log.write(json.dumps({'i': i, 'scenario': sc, 'flags': as_flags, 'sets': picks,
                                      'rc': rc, 'err': err[-400:]}) + '\n')
                log.flush()
    shutil.rmtree(work, ignore_errors=True)
    print(' '.join(f'{k}={n}' for k, n in sorted(outcomes.items())))
    print(f'{cases} cases, {bad} bad')


if __name__ == '__main__':
    main()
