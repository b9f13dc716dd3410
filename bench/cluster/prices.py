#!/usr/bin/env python3
"""bench/cluster/prices.py: the table of what each data-path feature costs, from bench/cluster/prices.

  bench/cluster/prices.py [--max-foreign=0.05] DIR

DIR holds bench/cluster/profile's files (TAG = base-<n>, <feature>-<on|off>-<n>) and, for
multicast, bench/cluster/run's rows (multicast-on-<n>.jsonl). Per feature, a markdown row:
  where         the process kinds its own code runs in (ranks; the aggregators' data
                threads; their control threads), from the attribution groups below;
  attributed    CPU ms per 64 MiB call of its groups (bench/cluster/profile.py's feature
                table) in the profiles where it is on, summed over the kinds; and the same
                in CPU seconds per GB of contributions (W x 64 MiB per call: a node's buffer
                counts once on the ranks' side and once on the aggregators');
  on - off      the difference of the kinds' whole CPU per call (ranks / data / control),
                profiles with the feature on less those with it off: what it costs
                including what it makes the transport and the kernel do, and the noise;
  busbw         GB/s of the agg row, on / off (the mean of the runs) and on / off as a ratio.
The defaults' profiles (base-*) are averaged for whichever side is the default. Features
without a switch (reduce kernels, stats, the adaptive split, ...) get their attributed
cost in the defaults' profiles alone. Multicast: the aggregators' CPU per GB from their
/metrics (agg_cpu_s, both variants in one interleaved run), no profile.
A profile whose window has more than --max-foreign (5 %) of its samples in processes that
are not the run's (another bench or build on the host: PREFIX.comms.txt) is left out and
listed: a call that waits for a core costs the ranks more CPU in polling, so such a run's
CPU per call is not comparable.
"""
import glob
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MIB64 = 64 << 20
KINDS = ('node', 'agg-data', 'agg-other')
KIND_WORDS = {'node': 'ranks', 'agg-data': 'agg data threads', 'agg-other': 'agg control threads'}

# feature: (switch in words, default state, {kind: [attribution group prefixes]})
FEATURES = {
    'failover': ('`SUMCAST_FAILOVER=0`', 'on',
                 {'node': ['failover: retention copy', 'failover: bookkeeping', 'failover: bounce copy']}),
    'pings': ('`SUMCAST_AGG_DEADLINE=0`', 'on',
              {'node': ['PINGs'], 'agg-other': ['control thread']}),
    'sealing': ('`--key` (`SUMCAST_KEY_FILE`, `[auth] key-file`)', 'off',
                {'node': ['sealing'], 'agg-data': ['sealing']}),
    'pacer': ('`SUMCASTD_JOB_PACE=false`', 'on', {'agg-data': ['pacer'], 'agg-other': ['pacer']}),
    'idle-wait': ('`SUMCASTD_DATA_IDLE_WAIT=false`', 'on', {'agg-data': ['idle wait']}),
    'sweep': ('`SUMCASTD_DATA_SWEEP=false`', 'on', {'agg-data': ['sweep']}),
    'source-check': ('`SUMCASTD_FABRIC_SOURCE_CHECK=false`', 'on', {}),
    'deterministic': ('`SUMCAST_DETERMINISTIC=true`', 'off', {}),
    'multicast': ('`[fabric] multicast = ip` (run `--modes agg-mcast`)', 'off',
                  {'node': ['multicast'], 'agg-data': ['multicast']}),
}
# no switch: attributed in the defaults' profiles only
FIXED = {
    'reduce kernels': {'agg-data': ['reduce kernels']},
    'stats counters': {'agg-data': ['stats']},
    'adaptive split': {'node': ['adaptive split']},
    'client data path': {'node': ['client data path']},
    'control sockets\' poll': {'node': ['control connection']},
    'plugin engine': {'node': ['plugin engine']},
    'daemon bookkeeping': {'agg-data': ['data thread bookkeeping']},
}


OURS = ('plugin_harness', 'sumcastd-data0', 'sumcastd', 'perf', 'pgrep', 'sleep', 'swapper',
        'ksoftirqd/0', 'ksoftirqd/1', 'rcu_preempt', 'kworker', 'sh', 'timeout', 'run', 'bash')


def foreign_share(prefix):
    """share of the window's samples in processes other than the run's"""
    tot = other = 0
    try:
        for line in open(prefix + '.comms.txt'):
            n, comm = line.split(None, 1)
            comm = comm.strip()
            tot += int(n)
            if not comm.startswith(OURS):
                other += int(n)
    except OSError:
        return 0.0
    return other / tot if tot else 0.0


def load(prefix):
    """{kind: {feature: ms}} of one profile (cached in PREFIX.features.json)"""
    js = prefix + '.features.json'
    if not os.path.exists(js) or os.path.getmtime(js) < os.path.getmtime(prefix + '.jsonl'):
        subprocess.run([sys.executable, os.path.join(HERE, 'profile.py'), '--json', js, prefix],
                       check=True, stdout=subprocess.DEVNULL)
    return json.load(open(js))['a']


def row(prefix):
    for line in open(prefix + '.jsonl'):
        if line.startswith('{'):
            return json.loads(line)
    return None


def mean(xs):
    return sum(xs) / len(xs) if xs else float('nan')


def avg(profiles):
    """kind -> feature -> mean ms/call over the profiles"""
    out = {k: {} for k in KINDS}
    for k in KINDS:
        keys = set().union(*(p.get(k, {}).keys() for p in profiles)) if profiles else set()
        for f in keys:
            out[k][f] = mean([p.get(k, {}).get(f, 0.0) for p in profiles])
    return out


def attributed(prof, groups):
    per = {}
    for kind, prefixes in groups.items():
        per[kind] = sum(v for f, v in prof.get(kind, {}).items() if f != 'all' and f.startswith(tuple(prefixes)))
    return per


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--max-foreign=')]
    try:
        maxf = float(([a.split('=')[1] for a in sys.argv[1:] if a.startswith('--max-foreign=')] or ['0.05'])[0])
    except ValueError:
        sys.exit('--max-foreign=F: a share, 0..1')
    if not 0 <= maxf <= 1:
        sys.exit('--max-foreign=F: a share, 0..1')
    if len(args) != 1:
        sys.exit(__doc__)
    d = args[0]
    tags = sorted(os.path.basename(p)[:-6] for p in glob.glob(os.path.join(d, '*.jsonl')))
    runs = {}  # stem -> [prefix]
    for t in tags:
        m = re.match(r'(.*)-(\d+)$', t)
        # a profile still being written (or whose run failed) has no .syms.txt yet
        if m and os.path.exists(os.path.join(d, t + '.syms.txt')) and row(os.path.join(d, t)) \
                or m and m.group(1) == 'multicast-on' and row(os.path.join(d, t)):
            fs = foreign_share(os.path.join(d, t))
            if fs > maxf:
                print(f'{t}: left out, {100 * fs:.0f} % of its window\'s samples in other processes'
                      f' (busbw {row(os.path.join(d, t))["busbw_gbps"]:.4f})')
                continue
            runs.setdefault(m.group(1), []).append(os.path.join(d, t))
    if 'base' not in runs:
        sys.exit(f'{d}: no base-<n> profile with a result row')
    base_rows = [row(p) for p in runs['base']]
    w = base_rows[0].get('nranks', 8)
    calls_gb = w * MIB64 / 1e9
    base_each = [load(p) for p in runs['base']]
    base = avg(base_each)
    spread = ', '.join(f'{KIND_WORDS[k]} %.0f-%.0f' % (min(b[k]['all'] for b in base_each),
                                                       max(b[k]['all'] for b in base_each)) for k in KINDS)
    base_bw = mean([r['busbw_gbps'] for r in base_rows])
    print(f'{d}: base runs {len(runs["base"])} (busbw {", ".join("%.4f" % r["busbw_gbps"] for r in base_rows)}),'
          f' W = {w}, CPU per 64 MiB call; s/GB = per GB of contributions ({w} x 64 MiB a call)')
    print(f'the defaults\' whole CPU per call, lowest-highest of the base runs (the noise of on - off): {spread}')
    print('\n| feature | switch | where | attributed ms/call (on) | s/GB | on - off: ranks / data / control ms/call'
          ' | busbw on / off GB/s | on / off |')
    print('|---|---|---|---:|---:|---|---|---:|')
    for name, (switch, default, groups) in FEATURES.items():
        state = 'on' if default == 'off' else 'off'
        stem = f'{name}-{state}'
        if stem not in runs:
            continue
        if name == 'multicast':
            rs = [json.loads(l) for p in runs[stem] for l in open(p + '.jsonl') if l.startswith('{')]
            by = {}
            for r in rs:
                if r.get('agg_calls'):
                    by.setdefault(r['mode'], []).append(r)
            if 'agg' not in by or 'agg-mcast' not in by:
                print(f'| {name} | {switch} | (no agg / agg-mcast rows in {stem}) | | | | | |')
                continue
            def cpu_ms(rr):
                return mean([r['agg_cpu_s'] / r['agg_calls'] * 1e3 for r in rr])
            on_c, off_c = cpu_ms(by['agg-mcast']), cpu_ms(by['agg'])
            bon, boff = mean([r['busbw_gbps'] for r in by['agg-mcast']]), mean([r['busbw_gbps'] for r in by['agg']])
            print(f'| {name} | {switch} | aggregators (all threads, /metrics) | {on_c:.1f} (unicast {off_c:.1f}) |'
                  f' {on_c / 1e3 / calls_gb:.3f} (unicast {off_c / 1e3 / calls_gb:.3f}) |'
                  f' aggregators {on_c - off_c:+.1f} ({on_c / off_c:.2f} of unicast) | {bon:.4f} / {boff:.4f} |'
                  f' {bon / boff:.3f} |')
            continue
        other = avg([load(p) for p in runs[stem]])
        other_bw = mean([row(p)['busbw_gbps'] for p in runs[stem]])
        on, off = (base, other) if default == 'on' else (other, base)
        bw_on, bw_off = (base_bw, other_bw) if default == 'on' else (other_bw, base_bw)
        per = attributed(on, groups)
        att = sum(per.values())
        where = ', '.join(f'{KIND_WORDS[k]} {v:.1f}' for k, v in per.items()) or '(no group of its own)'
        diff = ' / '.join('%+.0f' % (on[k].get('all', 0) - off[k].get('all', 0)) for k in KINDS)
        print(f'| {name} | {switch} | {where} | {att:.1f} | {att / 1e3 / calls_gb:.3f} | {diff} |'
              f' {bw_on:.4f} / {bw_off:.4f} | {bw_on / bw_off:.3f} |')
    print('\nNo switch (attributed in the defaults\' profiles):\n')
    print('| feature | where | ms/call | s/GB |\n|---|---|---:|---:|')
    for name, groups in FIXED.items():
        per = attributed(base, groups)
        att = sum(per.values())
        where = ', '.join(f'{KIND_WORDS[k]} {v:.1f}' for k, v in per.items())
        print(f'| {name} | {where} | {att:.1f} | {att / 1e3 / calls_gb:.3f} |')
    tot = {k: base[k].get('all', 0) for k in KINDS}
    print(f'| (all, defaults) | ' + ', '.join(f'{KIND_WORDS[k]} {v:.0f}' for k, v in tot.items()) +
          f' | {sum(tot.values()):.0f} | {sum(tot.values()) / 1e3 / calls_gb:.3f} |')


if __name__ == '__main__':
    main()
