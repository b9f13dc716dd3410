#!/usr/bin/env python3
"""bench/cluster/profile.py: tables of where the CPU went, from bench/cluster/profile's files.

  bench/cluster/profile.py [--calls N] [--top K] [--json FILE] A[,A2...] [B[,B2...]]

A (and B) are profiles (DIR/TAG, as bench/cluster/profile wrote them); several, comma
separated, are averaged. DIR/TAG@MODE takes only the samples of that mode's row: its
rounds' timed calls ("windows"), counted as "samples" x "per_sample" calls, so that one run
of interleaved modes (agg-mcast runs agg beside it) gives a profile of each. Without @MODE:
the first row's t_start..t_end. Per process kind (node = plugin_harness, the ranks; agg-data =
sumcastd-data0, the aggregators' data threads; agg-other = sumcastd's other threads) three
markdown tables in CPU milliseconds per timed call (samples / Hz / calls, summed over the
processes of that kind), A beside B and A - B:
  feature   what the sample was doing, from its whole call chain (the groups below);
  leaf      where the sampled instruction was (kernel by path, libc, libfabric, our files);
  function  the innermost frame in our binaries (plugin, sumcastd, harness), inclusive of
            the libc, libfabric and kernel frames under it; for a memcpy, the line of ours
            that calls it ("at") or that called into libfabric, which does ("under");
  and with --under SYM, the leaf table of only the samples with SYM in their call chain
  (sc_mc_udp_send, fabric_tsend: what a send costs, down to the kernel's softirqs that the
  sending thread runs itself: the emulated switch's bridge, tbf and veth).
Samples taken in interrupt context (the network's softirqs run on whatever was interrupted)
are a feature of their own, never charged to the interrupted function. libfabric 1.17 as
Debian builds it has no symbols: its frames count as one, and DWARF unwinding through it
sometimes stops inside it ("caller lost").
--json FILE also writes the feature table: {"a": {kind: {feature: ms/call, "all": ms/call}},
"b": ... (with B)}, which bench/cluster/prices reads.
"""
import argparse
import collections
import json
import os
import re
import sys

ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
ap.add_argument('a')
ap.add_argument('b', nargs='?')
ap.add_argument('--calls', type=int, default=0,
                help='timed calls per profile (default: the first row\'s "samples" x "per_sample")')
ap.add_argument('--hz', type=float, default=0, help='sample rate (default: from the perf log, else 299)')
ap.add_argument('--top', type=int, default=14)
ap.add_argument('--under', action='append', default=[], metavar='SYM',
                help='also a leaf table of the samples with SYM in their call chain (repeatable)')
ap.add_argument('--json', help='also write the feature tables (ms/call per kind) as JSON here')
args = ap.parse_args()

KINDS = (('node', 'plugin_harness'), ('agg-data', 'sumcastd-data0'), ('agg-other', 'sumcastd'))


def load_syms(prefix):
    own = {}
    try:
        for line in open(prefix + '.syms.txt'):
            b, n, f = line.split()
            k = (b, n)
            # one name, several files (static kernels per ISA): name them as one
            own[k] = f if k not in own or own[k] == f else re.sub(r'_[a-z0-9]+\.c$', '_<isa>.c', f)
    except OSError:
        sys.exit(f'{prefix}.syms.txt: missing (written by bench/cluster/profile)')
    return own


def parse(path, keep):
    """perf script -F comm,tid,time,ip,sym,dso,srcline: the samples whose time keep() takes, as
    lists of [sym, dso, srclines, ip]"""
    out, cur = [], None
    for line in open(path, errors='replace'):
        if not line.strip():
            if cur is not None:
                out.append(cur)
            cur = None
        elif not line.startswith((' ', '\t')):
            if cur is not None:
                out.append(cur)
            m = re.search(r'\s(\d+\.\d+):\s*$', line)
            if not m:
                sys.exit(f'{path}: a sample without its time (recorded by an older bench/cluster/profile?)')
            cur = [] if keep(float(m.group(1))) else None
        elif line.startswith('\t'):
            # perf prints no "(dso)" for a frame it names from inline data: an inlined
            # function (the next frame, at the same address, is the one it is in:
            # dropped) or one it names alone (glibc's memcpy entry points: kept)
            m = re.match(r'\s*([0-9a-f]+)\s+(.*?)(?:\s+\((.*)\))?\s*$', line)
            if m and cur is not None:
                sym = re.sub(r'\+0x[0-9a-f]+$', '', m.group(2))
                if cur and not cur[-1][1] and cur[-1][3] == m.group(1):
                    cur.pop()
                cur.append([sym, m.group(3) or '', [], m.group(1)])
        elif cur:
            cur[-1][2].append(line.strip())
    if cur is not None:
        out.append(cur)
    return out


def pick_row(prefix, mode):
    """the first row (of that mode) and the time windows of its timed calls"""
    try:
        for line in open(prefix + '.jsonl'):
            if not line.startswith('{'):
                continue
            r = json.loads(line)
            if r.get('bench') == 'timeline' or (mode and r.get('mode') != mode):
                continue
            if not mode:
                return r, [(r['t_start'], r['t_end'])]
            if not r.get('windows'):
                sys.exit(f'{prefix}.jsonl: the {mode} row has no "windows" (an older harness)')
            return r, [tuple(w) for w in r['windows']]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f'{prefix}.jsonl: no result row ({e})')
    sys.exit(f'{prefix}.jsonl: no result row' + (f' of mode {mode}' if mode else ''))


class Prof:
    def __init__(self, spec):
        prefix, _, mode = spec.partition('@')
        self.own = load_syms(prefix)
        if not any(os.path.exists(f'{prefix}.{comm}.txt') for _, comm in KINDS):
            sys.exit(f'{prefix}: no {prefix}.<process>.txt (written by bench/cluster/profile)')
        row, wins = pick_row(prefix, mode)

        def keep(t):
            return any(a <= t <= b for a, b in wins)
        self.samples = {k: parse(f'{prefix}.{comm}.txt', keep) if os.path.exists(f'{prefix}.{comm}.txt')
                        else [] for k, comm in KINDS}
        self.calls = args.calls or row.get('samples', 0) * row.get('per_sample', 1)
        if not self.calls:
            sys.exit(f'{prefix}.jsonl: no result row to count the calls; give --calls')
        self.hz = args.hz or 299
        if not args.hz:
            try:
                m = re.search(r' -F (\d+)', open(prefix + '.perf.log').read())
            except OSError:
                m = None
            self.hz = float(m.group(1)) if m else self.hz
        if self.calls <= 0 or self.hz <= 0:
            sys.exit('--calls and --hz must be positive')

    def ownfile(self, sym, dso):
        b = os.path.basename(dso)
        if re.match(r'plugin-.*\.so$', b):
            b = 'libnccl-net-sumcast.so'   # the harness's copy of the plugin
        return self.own.get((b, sym))


def in_irq(fr):
    return any(f[0].startswith(('asm_sysvec', 'asm_common_interrupt')) for f in fr)


def kernel_class(fr):
    syms = [f[0] for f in fr]
    leaf = syms[0]
    if any(s in ('net_rx_action', 'net_tx_action') for s in syms):
        if re.match(r'(br_|nf_|nft_|ipt_|tbf_|veth_|fdb_|__br|bfifo|pfifo|qdisc|sch_|__qdisc|memcmp$)', leaf):
            return 'k: network softirq: the emulated links (bridge, netfilter, tbf, veth)'
        return 'k: network softirq: IP/TCP receive, other'
    if leaf == 'handle_softirqs':
        return 'k: softirq entry (sampled where interrupts come back on)'
    if leaf == '_copy_from_iter' and any('sendmsg' in s for s in syms):
        return 'k: tcp send copy (_copy_from_iter)'
    if leaf == '_copy_to_iter':
        return 'k: tcp receive copy (_copy_to_iter)'
    if any('sendmsg' in s for s in syms):
        return 'k: send path, other (tcp, ip, veth xmit)'
    if any('recvfrom' in s or 'recvmsg' in s for s in syms):
        return 'k: receive path, other'
    if any(s in ('ksys_read', 'ksys_write') for s in syms):
        return 'k: read/write (eventfd, pipes, control sockets)'
    if any('poll' in s for s in syms):
        return 'k: poll/epoll'
    if any('nanosleep' in s for s in syms):
        return 'k: nanosleep'
    if any(s in ('__schedule', 'schedule', 'finish_task_switch.isra.0') for s in syms):
        return 'k: scheduler'
    if any('page_fault' in s for s in syms):
        return 'k: page faults'
    if any('futex' in s for s in syms):
        return 'k: futex'
    if any('sched_yield' in s for s in syms):
        return 'k: sched_yield'
    return 'k: other'


def leaf_class(p, fr):
    if not fr:
        return '(no frame)'
    sym, dso = fr[0][0], fr[0][1]
    if 'kernel' in dso:
        return kernel_class(fr)
    if 'libc.so' in dso or not dso:   # no dso: named from libc6-dbg's inline data
        for pat, name in (('memmove|memcpy', 'memcpy'), ('memcmp', 'memcmp'), ('memset', 'memset')):
            if re.search(pat, sym):
                if len(fr) > 1 and 'libfabric' in fr[1][1]:
                    return 'libc: ' + name + ' called by libfabric (rxm)'
                return 'libc: ' + name
        return 'libc: other'
    if 'libfabric' in dso:
        return 'libfabric (rxm + tcp, no symbols)'
    f = p.ownfile(sym, dso)
    if f:
        return ('reduce kernels' if f.startswith('common/reduce') else 'ours: ' + f)
    return 'other: ' + os.path.basename(dso)


def owner(p, fr):
    """innermost frame of ours, 'file function', '[memcpy at file:line]' for a copy"""
    if in_irq(fr):
        return '(interrupt)'
    for i, (sym, dso, src, _) in enumerate(fr):
        f = p.ownfile(sym, dso)
        if f:
            tag = f'{f} {sym}'
            if i > 0 and re.search('memmove|memcpy', fr[0][0]) and src:
                tag += (' [memcpy at ' if i == 1 else ' [memcpy under ') + src[-1].split()[0] + ']'
            return tag
    return '(caller lost)' if fr and any('libfabric' in f[1] for f in fr) else \
        '(no frame of ours: ' + (os.path.basename(fr[-1][1]) if fr else '?') + ')'


def feature(p, fr, kind):
    if in_irq(fr):
        syms = [f[0] for f in fr]
        if any(s in ('net_rx_action', 'net_tx_action', 'handle_softirqs') for s in syms):
            return 'interrupts: network softirqs (tbf, veth, bridge, TCP receive)'
        return 'interrupts: timer, other'
    o = owner(p, fr)
    f, fn = (o.split()[0], o.split()[1]) if not o.startswith('(') else ('', '')
    lost = o == '(caller lost)'
    if f == 'common/seal.c':
        return 'sealing (common/seal.c: AES-GCM in libcrypto)'
    if kind == 'node':
        if lost or fn in ('fabric_cq_poll', 'fabric_wait', 'fabric_trecv'):
            return 'transport: progress, receive (fabric_cq_poll: rxm, tcp, kernel)'
        if fn in ('fabric_tsend', 'fabric_tinject', 'fabric_tsendmsg'):
            return 'transport: send (fabric_tsend: rxm, kernel tcp send)'
        if fn in ('client_retain_req', 'client_retain_arrived', 'retain_chunk'):
            return 'failover: retention copy (client_retain.c)'
        if re.search(r'client_slot\.c:25\d', o) and 'memcpy' in o:
            return 'failover: bounce copy (client_slot_result_in)'
        if f.startswith('plugin/failover') or f in ('plugin/collnet_agree.c', 'client/client_retain.c'):
            return 'failover: bookkeeping (failover*.c, collnet_agree.c, client_retain.c)'
        if f.startswith('common/mcast') or f == 'client/client_mcast.c':
            return 'multicast: receive (recvmmsg, assembly: mcast_udp.c, mcast.c, client_mcast.c)'
        if f == 'client/client_ctl.c' and fn == 'client_ctl_poll':
            return 'control connection: poll() of the control sockets (client_ctl_poll)'
        if f == 'client/client_ctl.c':
            return 'PINGs: sends, liveness (client_ctl.c)'
        if f in ('plugin/collnet_adapt.c', 'plugin/split.c'):
            return 'adaptive split (collnet_adapt.c, split.c)'
        if f == 'plugin/collnet_trace.c':
            return 'trace (collnet_trace.c)'
        if f.startswith('client/'):
            return 'client data path (client.c, client_slot.c, client_req.c)'
        if f.startswith(('plugin/harness', 'support/')):
            return 'harness: the NCCL stand-in (poll sleeps, checks)'
        if f.startswith(('plugin/', 'common/')):
            return 'plugin engine (collnet_*.c, net_*.c, ring, split, common/)'
        return 'other ' + o
    if lost or fn in ('fabric_cq_poll', 'fabric_trecv'):
        return 'transport: progress, receive (fabric_cq_poll: rxm, tcp, kernel)'
    if fn == 'fabric_wait':
        return 'idle wait (fabric_wait)'
    if fn in ('fabric_tdiscard', 'fabric_cancel') or f == 'daemon/dp_sweep.c':
        return 'sweep (dp_sweep.c: FI_DISCARD peeks and the progress they run)'
    if fn in ('fabric_tsend', 'fabric_tinject'):
        return 'transport: result sends (fabric_tsend)'
    if f.startswith('common/mcast'):
        return 'multicast: result sends (mcast_udp.c: sendmsg with UDP_SEGMENT, the kernel under it)'
    if f.startswith('common/reduce'):
        return 'reduce kernels'
    if f == 'daemon/pacer.c':
        return 'pacer'
    if f == 'daemon/stats.c':
        return 'stats'
    if kind == 'agg-other' or f in ('daemon/main.c', 'daemon/ctl_main.c', 'daemon/http.c') or \
            f.startswith('daemon/ctl_'):
        return 'control thread (libevent loop: PING answers, control messages, HTTP)'
    if f.startswith('daemon/'):
        return 'data thread bookkeeping (dp_thread.c, dp_slot.c, dp_job.c, dp_result.c)'
    return 'other ' + o


def tally(profs, kind, fn):
    """ms per call of each key, averaged over the profiles"""
    tot = collections.Counter()
    for p in profs:
        for fr in p.samples[kind]:
            k = fn(p, fr)
            if k is not None:
                tot[k] += 1000.0 / p.hz / p.calls / len(profs)
    return tot


def under(sym):
    def fn(p, fr):
        return leaf_class(p, fr) if any(f[0] == sym for f in fr) else None
    return fn


def table(title, a, b, top):
    keys = sorted(set(a) | set(b), key=lambda k: -(a.get(k, 0) + b.get(k, 0)))
    if b is not None and profs_b:
        print(f'\n| {title} | A | B | A - B |\n|---|---:|---:|---:|')
    else:
        print(f'\n| {title} | ms/call |\n|---|---:|')
    for k in keys[:top]:
        x, y = a.get(k, 0.0), b.get(k, 0.0)
        print(f'| {k} | {x:.1f} | {y:.1f} | {x - y:+.1f} |' if profs_b else f'| {k} | {x:.1f} |')


profs_a = [Prof(x) for x in args.a.split(',')]
profs_b = [Prof(x) for x in args.b.split(',')] if args.b else []
if args.json:
    out = {}
    for name, profs in (('a', profs_a), ('b', profs_b)):
        if profs:
            out[name] = {kind: dict(tally(profs, kind, lambda p, fr, k=kind: feature(p, fr, k)),
                                    all=tally(profs, kind, lambda p, fr: 'all')['all'])
                         for kind, _ in KINDS}
    with open(args.json, 'w') as fh:
        json.dump(out, fh, indent=1, sort_keys=True)
print(f'A: {args.a}' + (f'\nB: {args.b}' if args.b else ''))
print('CPU ms per timed call, summed over the processes of a kind (1 core busy for the call = its time)')
for kind, comm in KINDS:
    a_n = sum(len(p.samples[kind]) for p in profs_a)
    if not a_n and not any(p.samples[kind] for p in profs_b):
        continue
    ta = tally(profs_a, kind, lambda p, fr: 'all')
    tb = tally(profs_b, kind, lambda p, fr: 'all') if profs_b else collections.Counter()
    print(f'\n## {kind} ({comm}): A {ta["all"]:.1f} ms/call ({a_n} samples)' +
          (f', B {tb["all"]:.1f} ms/call' if profs_b else ''))
    for title, fn in [('feature', lambda p, fr: feature(p, fr, kind)), ('leaf', leaf_class),
                      ('function (ours, inclusive)', owner)] + \
            [(f'leaf, samples under {u}', under(u)) for u in args.under]:
        table(title, tally(profs_a, kind, fn), tally(profs_b, kind, fn) if profs_b else collections.Counter(),
              args.top)
