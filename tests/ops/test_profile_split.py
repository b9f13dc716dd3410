#!/usr/bin/env python3
"""bench/cluster/profile.py on saved files (no perf, no run): DIR/TAG@MODE takes only the
samples inside that mode's "windows" and counts that row's calls; without @MODE, the first
row's t_start..t_end; --under SYM tables only the samples with SYM in their call chain; a
mode with no row, a row without windows and samples without their time are clear errors.

  test_profile_split.py PROFILE_PY
"""
import os
import subprocess
import sys
import tempfile

PROFILE_PY = sys.argv[1]
HZ = 100
T0 = 1795700000.0
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print('FAIL:', what)


def sample(t, frames):
    """one perf script sample (-F comm,tid,time,ip,sym,dso,srcline), frames innermost first"""
    out = [f'sumcastd-data0  4242 {t:.6f}: ']
    for i, (sym, dso) in enumerate(frames):
        out.append(f'\t    {0xffff0000 + i:x} {sym}+0x10 ({dso})')
    return '\n'.join(out) + '\n\n'


UNI = [('_copy_from_iter', '[kernel.kallsyms]'), ('tcp_sendmsg', '[kernel.kallsyms]'),
       ('fabric_tsend', '/b/daemon/sumcastd'), ('dthread_main', '/b/daemon/sumcastd')]
MC = [('_copy_from_iter', '[kernel.kallsyms]'), ('udp_sendmsg', '[kernel.kallsyms]'),
      ('sc_mc_udp_send', '/b/daemon/sumcastd'), ('dthread_main', '/b/daemon/sumcastd')]
RECV = [('_copy_to_iter', '[kernel.kallsyms]'), ('tcp_recvmsg', '[kernel.kallsyms]'),
        ('fabric_cq_poll', '/b/daemon/sumcastd'), ('dthread_main', '/b/daemon/sumcastd')]


def run(args):
    p = subprocess.run([sys.executable, PROFILE_PY] + args, capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout, p.stderr


def row_ms(out, section, key):
    """the A column of a table row whose first cell starts with key, in the kind's section"""
    on = False
    for line in out.splitlines():
        if line.startswith('## '):
            on = line.startswith('## ' + section)
        elif on and line.startswith('| ' + key):
            return float(line.split('|')[2])
    return None


with tempfile.TemporaryDirectory() as d:
    pre = os.path.join(d, 'p')
    # two interleaved modes: agg windows [0,1] and [2,3], agg-mcast [1,2] and [3,4]; 2 calls
    # each; the whole window 0..5 (the tail 4..5 belongs to neither)
    rows = [
        '{"bench":"allreduce","mode":"agg","samples":2,"per_sample":1,'
        f'"t_start":{T0},"t_end":{T0 + 5},"windows":[[{T0},{T0 + 1}],[{T0 + 2},{T0 + 3}]]}}',
        '{"bench":"allreduce","mode":"agg-mcast","samples":2,"per_sample":1,'
        f'"t_start":{T0},"t_end":{T0 + 5},"windows":[[{T0 + 1.01},{T0 + 2}],[{T0 + 3.01},{T0 + 4}]]}}',
        '{"bench":"allreduce","mode":"plain","samples":1,"per_sample":1,'
        f'"t_start":{T0},"t_end":{T0 + 5}}}',
    ]
    open(pre + '.jsonl', 'w').write('# a comment line\n' + '\n'.join(rows) + '\n')
    open(pre + '.perf.log', 'w').write(f'# perf record -a -k CLOCK_REALTIME -F {HZ} --call-graph\n')
    open(pre + '.syms.txt', 'w').write('sumcastd fabric_tsend common/fabric.c\n'
                                       'sumcastd fabric_cq_poll common/fabric.c\n'
                                       'sumcastd sc_mc_udp_send common/mcast_udp.c\n'
                                       'sumcastd dthread_main daemon/dp_thread.c\n')
    txt = []
    # agg windows: 30 unicast sends + 10 receives; agg-mcast: 6 multicast sends + 10 receives;
    # between 4 and 5 (no window): 50 unicast sends that must count nowhere but in the
    # first row's t_start..t_end (no @MODE)
    for k in range(30):
        txt.append(sample(T0 + 0.1 + (k % 15) * 0.05 + (2 if k >= 15 else 0), UNI))
    for k in range(10):
        txt.append(sample(T0 + 0.05 + k * 0.09 + (2 if k % 2 else 0), RECV))
    for k in range(6):
        txt.append(sample(T0 + 1.2 + k * 0.1 + (2 if k % 2 else 0), MC))
    for k in range(10):
        txt.append(sample(T0 + 1.1 + k * 0.08 + (2 if k % 2 else 0), RECV))
    for k in range(50):
        txt.append(sample(T0 + 4.1 + k * 0.01, UNI))
    open(pre + '.sumcastd-data0.txt', 'w').write(''.join(txt))

    rc, out, err = run([pre + '@agg-mcast', pre + '@agg', '--under', 'sc_mc_udp_send',
                        '--under', 'fabric_tsend'])
    check(rc == 0, f'split run: rc {rc}, {err.strip()}')
    ms = 1000.0 / HZ / 2  # one sample, per call, 2 calls
    tot = None
    for line in out.splitlines():
        if line.startswith('## agg-data'):
            tot = line
    check(tot is not None and f'A {16 * ms:.1f} ms/call' in tot and f'B {40 * ms:.1f} ms/call' in tot,
          f'totals: 16 and 40 samples over 2 calls each: {tot!r}')
    mc = row_ms(out, 'agg-data', 'multicast: result sends')
    check(mc is not None and abs(mc - 6 * ms) < 0.05, f'multicast sends in agg-mcast: {mc}, want {6 * ms}')
    uni_line = [l for l in out.splitlines() if l.startswith('| transport: result sends (fabric_tsend)')]
    check(uni_line and abs(float(uni_line[0].split('|')[2]) - 0) < 0.05 and
          abs(float(uni_line[0].split('|')[3]) - 30 * ms) < 0.05,
          f'unicast sends: none in agg-mcast, 30 samples in agg: {uni_line}')
    under_mc = out.split('samples under sc_mc_udp_send')[1].split('\n\n')[0] if \
        'samples under sc_mc_udp_send' in out else ''
    check('tcp send copy' in under_mc and f'{6 * ms:.1f}' in under_mc and 'receive copy' not in under_mc,
          f'--under sc_mc_udp_send: only the 6 send samples: {under_mc!r}')

    # no @MODE: the first row's t_start..t_end, and its calls (2): all 106 samples
    rc, out, err = run([pre])
    tot = [l for l in out.splitlines() if l.startswith('## agg-data')]
    check(rc == 0 and tot and f'A {106 * ms:.1f} ms/call' in tot[0], f'whole window: {tot}, {err.strip()}')

    # errors: a mode with no row, a row without windows, samples without their time
    rc, out, err = run([pre + '@nosuch'])
    check(rc != 0 and 'no result row of mode nosuch' in err, f'unknown mode: rc {rc}, {err.strip()}')
    rc, out, err = run([pre + '@plain'])
    check(rc != 0 and 'has no "windows"' in err, f'row without windows: rc {rc}, {err.strip()}')
    open(pre + '.sumcastd-data0.txt', 'w').write('sumcastd-data0  4242 \n\t ffff0000 x+0x1 (y)\n\n')
    rc, out, err = run([pre])
    check(rc != 0 and 'without its time' in err, f'samples without time: rc {rc}, {err.strip()}')

print('FAILED: %d check(s)' % len(fails) if fails else 'ok')
sys.exit(1 if fails else 0)
