#!/usr/bin/env python3
"""Results of bench/cluster/run: tag rows, per-configuration tables, ratios, plots.

  report.py tag --mode M --workers W --aggs A --link-mbit R [--linkstat FILE] < raw > rows
      adds "workers","aggs","link_mbit" (and "mode" when missing) to every JSON row, and,
      when the row has t_start/t_end and the link sampler caught >= 2 samples inside that
      window, "sampled_link_mbit" (busiest worker link, max of tx/rx), "sampled_agg_link_mbit"
      and "cpu_busy" (share of all cores busy). --sweep marks rows of a split sweep.
  report.py config --results F --workers W --aggs A --link-mbit R [--linkstat FILE]
      table of this configuration's rows next to the model, and per-link utilisation.
  report.py final --results F --out DIR
      nccl-tests style table per configuration and mode, ratio tables (sumcast/ring,
      sumcast/mpi per size next to the model's ratio), the split sweep (fixed splits vs auto),
      summary.md, busbw-vs-size PNG per configuration and type (gnuplot).
python3 stdlib only.
"""
import argparse, collections, json, os, shutil, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import model  # noqa: E402
import gnuplot_png  # noqa: E402  (bench/gnuplot_png.py, shared with bench/scale)

SUMCAST_MODES = ("ring", "agg", "split")


def load_rows(path):
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return rows


# sc_link_snapshot's series that are not a host's link: all cores' jiffies, runnable threads
NOT_HOSTS = ("cpu", "run")


def load_linkstat(path):
    """{host: [(t, tx, rx)]} plus 'cpu': [(t, busy, total)] and 'run': [(t, threads, 0)] from
    sc_link_snapshot lines."""
    d = collections.defaultdict(list)
    if not path or not os.path.exists(path):
        return d
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) == 4:
                try:
                    d[p[1]].append((float(p[0]), int(p[2]), int(p[3])))
                except ValueError:
                    pass
    return d


def window_rates(series, t0, t1):
    """Mbit/s (tx, rx) between the first and last samples inside [t0, t1], or None."""
    inside = [s for s in series if t0 <= s[0] <= t1]
    if len(inside) < 2 or inside[-1][0] - inside[0][0] < 0.2:
        return None
    a, b = inside[0], inside[-1]
    dt = b[0] - a[0]
    return ((b[1] - a[1]) * 8 / dt / 1e6, (b[2] - a[2]) * 8 / dt / 1e6)


def cpu_busy(series, t0, t1):
    inside = [s for s in series if t0 <= s[0] <= t1]
    if len(inside) < 2:
        return None
    a, b = inside[0], inside[-1]
    return (b[1] - a[1]) / max(1, b[2] - a[2])


def runnable(series, t0, t1):
    """The machine's mean runnable threads (procs_running) over the snapshots in [t0, t1], or
    None: ours and any other work's (on 2 cores, other work's slows the emulation)."""
    inside = [s[1] for s in series if t0 <= s[0] <= t1]
    return sum(inside) / len(inside) if inside else None


def peak_rates(series):
    """Highest (tx, rx) Mbit/s between consecutive samples, and total bytes."""
    ptx = prx = 0.0
    for a, b in zip(series, series[1:]):
        dt = b[0] - a[0]
        if dt <= 0:
            continue
        ptx = max(ptx, (b[1] - a[1]) * 8 / dt / 1e6)
        prx = max(prx, (b[2] - a[2]) * 8 / dt / 1e6)
    tot = (series[-1][1] - series[0][1], series[-1][2] - series[0][2]) if series else (0, 0)
    return ptx, prx, tot


def cmd_tag(a):
    ls = load_linkstat(a.linkstat)
    for line in sys.stdin:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        r.setdefault("mode", a.mode)
        r["workers"], r["aggs"], r["link_mbit"] = a.workers, a.aggs, a.link_mbit
        if a.agg_link_mbit:
            r["agg_link_mbit"] = a.agg_link_mbit
        if a.sweep:
            r["sweep"] = True
        t0, t1 = r.get("t_start"), r.get("t_end")
        if t0 and t1:
            best = {"w": None, "a": None}
            for h, s in ls.items():
                if h in NOT_HOSTS:
                    continue
                w = window_rates(s, t0, t1)
                if w is None:
                    continue
                k = h[0]
                best[k] = max(best[k] or 0.0, w[0], w[1])
            if best["w"] is not None:
                r["sampled_link_mbit"] = round(best["w"], 1)
            if best["a"] is not None:
                r["sampled_agg_link_mbit"] = round(best["a"], 1)
            c = cpu_busy(ls.get("cpu", []), t0, t1)
            if c is not None:
                r["cpu_busy"] = round(c, 3)
        if r.get("bench") == "timeline" and r.get("t") and r.get("time_us"):
            n = runnable(ls.get("run", []), r["t"] - r["time_us"] / 1e6, r["t"])
            if n is not None:
                r["runnable"] = round(n, 1)
        try:   # other work on the machine skews results: keep the load next to them
            r.setdefault("loadavg1", float(open("/proc/loadavg").read().split()[0]))
        except (OSError, ValueError, IndexError):
            pass
        print(json.dumps(r))


def fmt_size(b):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div}{unit}"
    return str(b)


def config_rows(rows, W, A, R):
    """The configuration's bandwidth rows (not its fabric_rtt latency probes)."""
    return [r for r in rows if r.get("workers") == W and r.get("aggs") == A
            and float(r.get("link_mbit", 0)) == float(R) and "algbw_gbps" in r
            and r.get("bench") != "timeline" and "scenario" not in r]


def key(r):
    """Mode name, with the type when it is not f32 (ring/bf16)."""
    t = r.get("type", "f32")
    return r.get("mode", "?") + ("" if t == "f32" else "/" + t)


MODE_ORDER = ("mpi", "mpi-ring") + SUMCAST_MODES


def mode_sort(k):
    m, _, t = k.partition("/")
    return (t, MODE_ORDER.index(m) if m in MODE_ORDER else 99, m)


def util_cols(r, R, RA):
    """(worker util, aggregator util, cpu) strings: worker from in-band counters, else sampler."""
    mx = r.get("link_max_mbit", r.get("sampled_link_mbit"))
    ag = r.get("sampled_agg_link_mbit")
    wu = f"{mx / R:.2f}" if mx is not None else "-"
    au = f"{ag / RA:.2f}" if ag is not None and r.get("mode") not in ("mpi", "mpi-ring", "ring") else "-"
    cpu = f"{r['cpu_busy']:.2f}" if "cpu_busy" in r else "-"
    return wu, au, cpu


def nccl_table(rows, mode_key, W, R, RA, P):
    """nccl-tests style: one line per size of one mode."""
    es = {"f32": 4, "bf16": 2, "f16": 2, "f64": 8, "i32": 4, "u32": 4, "i64": 8, "u64": 8,
          "i8": 1, "u8": 1}
    P(f"#  mode {mode_key}: W={W}, link {R:g} Mbit/s")
    P(f"#{'size':>11} {'count':>11} {'type':>5} {'redop':>5} {'time(us)':>12} {'algbw':>8}"
      f" {'busbw':>8} {'#wrong':>6} {'w_util':>6} {'a_util':>6} {'cpu':>5} {'n':>3}")
    for r in sorted(rows, key=lambda r: r["bytes"]):
        wu, au, cpu = util_cols(r, R, RA)
        t = r.get("type", "f32")
        n = r.get("samples", r.get("reps", "-"))
        P(f" {r['bytes']:11d} {r['bytes'] // es.get(t, 4):11d} {t:>5} {'sum':>5}"
          f" {r['time_us']:12.1f} {r['algbw_gbps']:8.4f} {r['busbw_gbps']:8.4f}"
          f" {r.get('wrong', '-'):>6} {wu:>6} {au:>6} {cpu:>5} {n:>3}")


def cmd_config(a):
    rows = config_rows(load_rows(a.results), a.workers, a.aggs, a.link_mbit)
    m = model.predict(a.workers, a.aggs, a.link_mbit, a.agg_link_mbit)
    RA = a.agg_link_mbit or a.link_mbit
    print(f"\n## W={a.workers} A={a.aggs} link {a.link_mbit:g} Mbit/s"
          f" (model busbw: ring {m['ring']['busbw_gbps']:.4f} GB/s"
          + (f", agg {m['agg']['busbw_gbps']:.4f}, split {m['split']['busbw_gbps']:.4f}"
             if "agg" in m else "") + ")")
    print("  w_util: busiest worker link / configured (in-band counters of the ranks), a_util: busiest"
          " aggregator link (sampler, this size's window), cpu: all cores busy (sampler)")
    by = collections.defaultdict(list)
    for r in rows:
        by[key(r)].append(r)
    for k in sorted(by, key=mode_sort):
        out = []
        nccl_table(by[k], k, a.workers, a.link_mbit, RA, out.append)
        print("\n".join("  " + x for x in out))
    ls = load_linkstat(a.linkstat)
    hosts = sorted((h for h in ls if h not in NOT_HOSTS), key=lambda h: (h[0] != "w", int(h[1:])))
    if hosts:
        print(f"  link utilisation over the whole configuration (sampler, {a.linkstat and os.path.basename(a.linkstat)}):")
        print(f"    {'host':<5} {'configured':>10} {'peak_tx':>8} {'peak_rx':>8} {'peak/conf':>9}"
              f" {'tx_MiB':>9} {'rx_MiB':>9}")
        for h in hosts:
            ptx, prx, tot = peak_rates(ls[h])
            conf = a.link_mbit if h.startswith("w") else RA
            print(f"    {h:<5} {conf:10g} {ptx:8.1f} {prx:8.1f} {max(ptx, prx) / conf:9.3f}"
                  f" {tot[0] / 2**20:9.1f} {tot[1] / 2**20:9.1f}")
        c = ls.get("cpu", [])
        if len(c) >= 2:
            peak = max(((b[1] - x[1]) / max(1, b[2] - x[2]) for x, b in zip(c, c[1:])), default=0)
            print(f"    cpu busy (all cores): peak {peak:.2f} over one sample interval")


def fr(a, b):
    return f"{a / b:.3f}" if a and b else "-"


def cmd_final(a):
    rows = load_rows(a.results)
    os.makedirs(a.out, exist_ok=True)
    configs = sorted({(r["workers"], r["aggs"], float(r["link_mbit"])) for r in rows
                      if "workers" in r})
    lines = []
    P = lines.append
    P("# Emulated cluster: allreduce results\n")
    P("busbw = algbw * 2(W-1)/W (nccl-tests), GB/s. Model: bench/cluster/model.py (link rate, no TCP"
      " overhead). w_util = busiest worker link's measured rate / configured rate (in-band"
      " counters), a_util = busiest aggregator link (sampler), cpu = share of both cores busy."
      " Sumcast / MPI uses the better of mpi and mpi-ring at each size (f32).\n")
    term = None if a.no_plots else gnuplot_png.terminal()
    for (W, A, R) in configs:
        cr = config_rows(rows, W, A, R)
        RA = next((float(r["agg_link_mbit"]) for r in cr if r.get("agg_link_mbit")), R)
        m = model.predict(W, A, R, RA)
        main = [r for r in cr if not r.get("sweep")]
        sweep = [r for r in cr if r.get("sweep")]
        by = collections.defaultdict(dict)
        for r in main:
            by[key(r)][r["bytes"]] = r
        keys = sorted(by, key=mode_sort)
        sizes = sorted({r["bytes"] for r in main})
        load = sorted(r["loadavg1"] for r in cr if "loadavg1" in r)
        P(f"\n## W={W} A={A} link {R:g} Mbit/s" + (f" (aggregators {RA:g})" if RA != R else ""))
        mr = m["ring"]["busbw_gbps"]
        P(f"\nmodel busbw: ring {mr:.4f}" + (
            f", agg {m['agg']['busbw_gbps']:.4f}, split {m['split']['busbw_gbps']:.4f}"
            f" (aggregator share {m['split']['fraction']:.3f}; split/ring {m['ratio_split_ring']:.3f},"
            f" agg/ring {m['ratio_agg_ring']:.3f})" if "agg" in m else "")
          + (f". loadavg1 at the rows: {load[0]:g}..{load[-1]:g}" if load else "") + "\n")
        P("```")
        for k in keys:
            nccl_table(by[k].values(), k, W, R, RA, P)
        P("```")
        types = sorted({k.partition("/")[2] for k in keys})
        mpis = [x for x in ("mpi", "mpi-ring") if x in by]
        for t in types:
            sfx = "" if not t else "/" + t
            sc = [x + sfx for x in SUMCAST_MODES if x + sfx in by]
            if not sc:
                continue
            P(f"\n### Ratios ({t or 'f32'}): Sumcast / ring (same run) and Sumcast / MPI, per size,"
              " next to the model\n")
            hdr = ["size"] + [f"{x} busbw" for x in sc] + [f"{x} busbw" for x in mpis]
            for x in sc:
                if x.startswith("ring"):
                    continue
                mod = m.get("ratio_" + x.partition("/")[0] + "_ring")
                hdr += [f"{x}/ring", f"model {mod:.3f}" if mod else "model"]
            for x in sc:
                mod = m.get("ratio_" + x.partition("/")[0] + "_ring") if not x.startswith("ring") else 1.0
                hdr += [f"{x}/MPI", f"model {mod:.3f}" if mod else "model"]
            P("| " + " | ".join(hdr) + " |")
            P("|" + "---|" * len(hdr))
            ring = by.get("ring" + sfx, {})
            for s in sizes:
                c = [fmt_size(s)]
                for x in sc + mpis:
                    r = by[x].get(s)
                    c.append(f"{r['busbw_gbps']:.4f}" if r else "-")
                cand = [by[x][s] for x in mpis if s in by[x]]
                mp = max(cand, key=lambda q: q["busbw_gbps"]) if cand else None
                for x in sc:
                    if x.startswith("ring"):
                        continue
                    r, rr = by[x].get(s), ring.get(s)
                    c.append(fr(r and r["busbw_gbps"], rr and rr["busbw_gbps"]))
                    c.append(f"{m.get('ratio_' + x.partition('/')[0] + '_ring', 0):.3f}")
                for x in sc:
                    r = by[x].get(s)
                    c.append(fr(r and r["busbw_gbps"], mp and mp["busbw_gbps"]))
                    c.append("1.000" if x.startswith("ring") else
                             f"{m.get('ratio_' + x.partition('/')[0] + '_ring', 0):.3f}")
                P("| " + " | ".join(c) + " |")
        if sweep:
            sw = collections.defaultdict(dict)
            for r in sweep:
                sw[r["mode"]][r["bytes"]] = r
            names = sorted(sw, key=lambda n: (n == "auto", float(n[1:]) if n[0] == "x" else 2))
            fixed = [n for n in names if n != "auto"]
            P(f"\n### Split sweep (f32, splits interleaved in one run): busbw, best fixed split,"
              f" auto / best fixed. Model: best split {m['split']['fraction']:.3f},"
              f" split/ring {m['ratio_split_ring']:.3f}\n")
            hdr = ["size"] + [f"{n} busbw" for n in names] + ["best fixed", "auto split", "auto/best",
                                                                "w_util auto", "model busbw"]
            P("| " + " | ".join(hdr) + " |")
            P("|" + "---|" * len(hdr))
            for s in sorted({r["bytes"] for r in sweep}):
                c = [fmt_size(s)]
                for n in names:
                    r = sw[n].get(s)
                    c.append(f"{r['busbw_gbps']:.4f}" if r else "-")
                fx = [(sw[n][s]["busbw_gbps"], n) for n in fixed if s in sw[n]]
                best = max(fx) if fx else None
                au = sw.get("auto", {}).get(s)
                c.append(f"{best[1][1:]} ({best[0]:.4f})" if best else "-")
                c.append(f"{au['split']:.3f}" if au else "-")
                c.append(fr(au and au["busbw_gbps"], best and best[0]))
                c.append(util_cols(au, R, RA)[0] if au else "-")
                c.append(f"{m['split']['busbw_gbps']:.4f}")
                P("| " + " | ".join(c) + " |")
        # gnuplot: one plot per type, all modes of that type plus MPI (f32), model lines
        for t in types or [""]:
            sfx = "" if not t else "/" + t
            pk = [k for k in keys if (k.partition("/")[2] == t) or (k in mpis)]
            if not pk:
                continue
            base = f"busbw-W{W}-A{A}-R{R:g}" + (f"-{t}" if t else "")
            for x in pk:
                with open(os.path.join(a.out, f"{base}-{x.replace('/', '_')}.dat"), "w") as f:
                    f.write("# bytes busbw_gbps\n")
                    for s in sorted(by[x]):
                        f.write(f"{s} {by[x][s]['busbw_gbps']}\n")
            if term and shutil.which("gnuplot") and sizes:
                plots = [f"'{base}-{x.replace('/', '_')}.dat' using 1:2 with linespoints lw 2 pt 7"
                         f" title '{x}'" for x in pk]
                plots.append(f"{mr} with lines dt 2 lw 1.5 lc rgb '#444444' title 'model: ring = link'")
                if "agg" in m:
                    plots.append(f"{m['split']['busbw_gbps']} with lines dt 3 lw 1.5 lc rgb '#aa0000'"
                                 f" title 'model: sumcast ({m['ratio_split_ring']:.2f}x ring)'")
                script = (f"set terminal {term}\nset output '{base}.png'\n"
                          f"set title 'allreduce sum ({t or 'f32'}; MPI f32), W={W} workers, A={A}"
                          f" aggregators, {R:g} Mbit/s links (tc tbf, netns)'\n"
                          "set logscale x 2\nset format x '%.0b%BB'\nset xlabel 'message size'\n"
                          "set ylabel 'busbw (GB/s)'\nset yrange [0:*]\nset grid\n"
                          f"set xrange [{sizes[0] / 1.5}:{sizes[-1] * 1.5}]\n"
                          "set key bottom right\n"
                          "plot " + ", \\\n     ".join(plots) + "\n")
                with open(os.path.join(a.out, f"{base}.gp"), "w") as f:
                    f.write(script)
                err = gnuplot_png.render(script, cwd=a.out)
                if err is None:
                    P(f"\n![busbw W={W} A={A} {t or 'f32'}]({base}.png)\n")
                else:
                    print(f"gnuplot failed for {base}: {err}", file=sys.stderr)
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def trace_files(pattern):
    """Each rank-0 SUMCAST_TRACE file matching pattern: its completed requests (status ok),
    as they were written."""
    import glob
    for fn in glob.glob(pattern):
        rows = []
        with open(fn) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if r.get("status") == "ok":
                    rows.append(r)
        yield rows


def req_end(r):
    """A traced request's completion (ns, the trace's clock)."""
    return r["start_ns"] + r["time_us"] * 1e3


def trace_load(pattern):
    """Rank 0's SUMCAST_TRACE rows of the adaptive communicator among the files matching
    pattern (<prefix>.<job>.0.jsonl): its adaptive allreduces in issue order."""
    best = []
    for rows in trace_files(pattern):
        rows = [r for r in rows if r.get("adaptive")]
        if len(rows) > len(best):
            best = rows
    return sorted(best, key=lambda r: r["start_ns"])


def trace_load_fixed(pattern):
    """Rank 0's SUMCAST_TRACE rows of each fixed-split communicator among the files matching
    pattern, by split ({0.25: rows in issue order}); the adaptive one is left out."""
    out = {}
    for rows in trace_files(pattern):
        big = [r for r in rows if r["bytes"] >= TRACE_MIN_BYTES]
        if big and not any(r.get("adaptive") for r in big):
            out[round(big[0]["split"], 4)] = sorted(rows, key=lambda r: r["start_ns"])
    return out


# requests smaller than this in a trace are not the sample's own (the harness's 4-byte
# allreduce before each sample)
TRACE_MIN_BYTES = 1 << 18
# the controller's window (plugin/split.h SPLIT_ADAPT_WINDOW): the grain of converge_s
ADAPT_WINDOW = 8


def trace_samples(rows):
    """A trace's samples: runs of requests with no gap of nothing in flight between them
    (the other modes' samples run in the gaps), each the list of its requests of
    TRACE_MIN_BYTES or more in completion order."""
    out, cur, end = [], [], None
    for r in sorted(rows, key=lambda r: r["start_ns"]):
        e = req_end(r)
        if cur and r["start_ns"] > end:
            out.append(cur)
            cur, end = [], None
        cur.append(r)
        end = e if end is None else max(end, e)
    if cur:
        out.append(cur)
    return [sorted((r for r in s if r["bytes"] >= TRACE_MIN_BYTES), key=req_end) for s in out
            if any(r["bytes"] >= TRACE_MIN_BYTES for r in s)]


def suffix_rates(sample):
    """[(t_k, bytes/s of the sample's requests from the k-th on)] for k = 0, 8, 16, ...
    in completion order: time from the completion of the (k-1)-th (the sample's first
    start for k = 0) to the sample's last completion. The same positions of two samples
    of one size compare like with like: the pipeline fills at a sample's start and drains
    at its end at any split."""
    ends = [req_end(r) for r in sample]
    t_start = min(r["start_ns"] for r in sample)
    out = []
    for k in range(0, len(sample), ADAPT_WINDOW):
        t_k = t_start if k == 0 else ends[k - 1]
        if ends[-1] > t_k:
            out.append((t_k, sum(r["bytes"] for r in sample[k:]) / (ends[-1] - t_k) * 1e9))
    return out


def union(iv):
    """The length of the union of intervals (start, end); empty ones count nothing."""
    u, e = 0.0, 0.0
    for x, y in sorted(iv):
        if y <= x:
            continue
        if x >= e:
            u += y - x
        elif y > e:
            u += y - e
        e = max(e, y)
    return u


def trace_rolling(rows, n=16):
    """Per request from the n-th on, in completion order: (end ns, busy ns so far, X over
    the last n requests to complete in bytes/s, split). X counts time from the completion
    before those n on (their first ones were issued while earlier ones were in flight), and
    neither X nor busy time counts gaps with nothing in flight (the other modes' samples)."""
    iv = sorted((r["start_ns"], req_end(r), r["bytes"], r["split"])
                for r in rows)
    # busy time so far at each completion: the union of the intervals that ended by then
    by_end = sorted(iv, key=lambda v: v[1])
    out = []
    for i in range(n, len(by_end)):
        lo = by_end[i - n][1]
        last = by_end[i - n + 1:i + 1]
        u = union([(max(x, lo), y) for x, y, _, _ in last])
        busy = union([(x, min(y, by_end[i][1])) for x, y, _, _ in iv if x < by_end[i][1]])
        nb = sum(b for _, _, b, _ in last)
        out.append((by_end[i][1], busy, nb / u * 1e9 if u else 0.0, by_end[i][3]))
    return out


def merged_busy(iv):
    """Disjoint sorted [start, end] lists covering the intervals iv."""
    out = []
    for x, y in sorted(iv):
        if out and x <= out[-1][1]:
            out[-1][1] = max(out[-1][1], y)
        else:
            out.append([x, y])
    return out


def agg_shares(auto, other, lo, hi):
    """Two adaptive jobs on the same aggregators: each one's share of what the aggregators
    carried for the two while both had requests in flight between lo and hi (ns): each
    request's aggregator bytes (a rank's agg_bytes) pro-rated by how much of it overlapped
    the time both jobs were busy, so that neither job's time alone (the second job's
    start-up, gaps between the first one's samples) counts as a share taken from the
    other. Returns (auto's share, auto's and the other's aggregator MB/s over that time),
    or None."""
    def ivs(rows):
        return [(r["start_ns"], req_end(r), r["agg_bytes"]) for r in rows
                if r["start_ns"] < hi and req_end(r) > lo
                and r["time_us"] > 0]
    ia, io = ivs(auto), ivs(other)
    ma, mo = merged_busy([(x, y) for x, y, _ in ia]), merged_busy([(x, y) for x, y, _ in io])
    both = []
    for x, y in ma:  # the intersection of the two jobs' busy time, clipped to [lo, hi]
        for s, e in mo:
            a, b = max(x, s, lo), min(y, e, hi)
            if a < b:
                both.append((a, b))
    busy = sum(b - a for a, b in both)

    def share(iv):
        return sum(n * sum(max(0.0, min(y, b) - max(x, a)) for a, b in both) / (y - x)
                   for x, y, n in iv)
    a_bytes, o_bytes = share(ia), share(io)
    if a_bytes + o_bytes <= 0 or busy <= 0:
        return None
    return a_bytes / (a_bytes + o_bytes), a_bytes / busy * 1e3, o_bytes / busy * 1e3


def plot_adapt(path, marks, t0, scenario):
    """<path without .jsonl>.png: auto's split (right axis) and the throughput of its last 16
    requests (left) over auto's own time (the time it had requests in flight: the fixed
    splits' samples in between left out), the changes as vertical lines (gnuplot)."""
    term = gnuplot_png.terminal()
    if not term or not shutil.which("gnuplot"):
        return
    base = os.path.splitext(path)[0]
    with open(path) as f:
        rows = [json.loads(line) for line in f]
    with open(base + ".dat", "w") as d:
        for r in rows:
            d.write(f"{r['busy_s']:.3f} {r['algbw_gbps'] * 1e3:.2f} {r['split']:.4f}\n")
    # the changes on auto's own time axis: where its first request after each ended
    at = [next((r["busy_s"] for r in rows if r["t"] - t0 >= m), None) for m in marks]
    arrows = "".join(f"set arrow from {m:.2f}, graph 0 to {m:.2f}, graph 1 nohead dt 2\n"
                     for m in at if m is not None)
    gp = (f"set terminal {term}\nset output '{base}.png'\n"
          f"set title 'scenario {scenario}: auto, split and throughput per request'\n"
          "set xlabel 'auto time (s): time with requests in flight'\nset ylabel 'algbw of the last 16 requests (MB/s)'\n"
          "set y2label 'split (share to the aggregators)'\nset y2range [0:1]\n"
          "set ytics nomirror\nset y2tics\nset key top right\n" + arrows +
          f"plot '{base}.dat' using 1:2 with points pt 7 ps 0.3 title 'algbw', "
          f"'' using 1:3 axes x1y2 with points pt 7 ps 0.3 title 'split'\n")
    err = gnuplot_png.render(gp)
    if err is not None:
        print(f"gnuplot failed for {base}: {err}", file=sys.stderr)


def cmd_scenario(a):
    """Per mode and phase of a scenario run (bench/cluster/run --scenario): the median algbw
    of the samples wholly before / wholly after the change, the best fixed split of each
    phase, auto / best fixed, and auto's converge_s: the time from the change until auto
    stays within 5% of the phase's best fixed split (null: never). With --traces that time
    is auto's own (the time it had requests in flight: the other modes' samples run in
    between) and counts at the grain of the controller's windows (8 requests): to the
    first window of a sample from which on the rest of that sample is within 5% of the
    best fixed split's rest from the same position (the median over its samples in the
    phase), every later sample whole within 5%; converge_sample_s counts to the start of
    the first 64 MiB sample from which on every one is within 5%, and converge_req_s until
    the throughput of auto's last 16 requests stays within 5% (sample boundaries, where
    the pipeline drains and refills, included). Without traces, wall time at the sample
    grain. In second-tenant with the second job traced, "during" counts from the second
    job's first request (traffic_s after its launch: its start, connecting and joining
    load nothing), over the auto samples that ended after it; converge_launch_s counts
    from its launch. Rows on stdout, a table on stderr."""
    rows = [r for r in load_rows(a.results) if r.get("bench") == "timeline"]
    try:
        with open(a.change) as f:
            marks = [float(x) for x in f.read().split()]
    except (OSError, ValueError):
        marks = []
    if not marks:
        print("scenario: no change time (the run ended before the change?)", file=sys.stderr)
        return
    change = marks[0]
    # the monotonic clock (the trace's start_ns) at each change, and auto's trace
    mono, trace = [], []
    if a.change_mono and os.path.exists(a.change_mono):
        with open(a.change_mono) as f:
            mono = [int(x) for x in f.read().split()]
    fixed_traces = {}
    if a.traces:
        trace = trace_load(a.traces)
        fixed_traces = trace_load_fixed(a.traces)
    if trace and mono and a.timeline_out:
        # split and throughput over time, for the plots: wall time from the first change
        t0 = None
        with open(a.timeline_out, "w") as f:
            for end, busy, x, split in trace_rolling(trace):
                t = marks[0] + (end - mono[0]) / 1e9
                t0 = t if t0 is None else t0
                f.write(json.dumps({"bench": "adapt", "scenario": a.scenario, "mode": "auto",
                                    "t": round(t, 3), "busy_s": round(busy / 1e9, 3),
                                    "split": split, "algbw_gbps": round(x / 1e9, 4)}) + "\n")
        plot_adapt(a.timeline_out, [m - t0 for m in marks], t0, a.scenario)
    if not rows:
        print("scenario: no timeline rows", file=sys.stderr)
        return
    base = {k: rows[0][k] for k in ("workers", "aggs", "link_mbit", "bytes", "nranks", "naggs")
            if k in rows[0]}

    def start(r):
        return r["t"] - r["time_us"] / 1e6

    if len(marks) == 1:  # one change: before, after
        phases = {"before": [r for r in rows if r["t"] <= change],
                  "after": [r for r in rows if start(r) >= change]}
    else:  # a second tenant from marks[0] to marks[1]: before, during, after
        phases = {"before": [r for r in rows if r["t"] <= marks[0]],
                  "during": [r for r in rows if start(r) >= marks[0] and r["t"] <= marks[1]],
                  "after": [r for r in rows if start(r) >= marks[1]]}
    out = []
    t2rows = trace_load(a.tenant_traces) if a.tenant_traces and trace else []

    def shares(ph, med):
        """Two auto jobs of one shape (second-tenant): each one's share of their algbw,
        and with both traced of what the aggregators carried while auto ran."""
        if "auto" not in med or "tenant2" not in med:
            return
        row = next(o for o in out if o["mode"] == "auto" and o["phase"] == ph)
        t2 = next(o for o in out if o["mode"] == "tenant2" and o["phase"] == ph)
        row["share"] = round(med["auto"] / (med["auto"] + med["tenant2"]), 4)
        t2["share"] = round(1 - row["share"], 4)
        i = {"during": 0}.get(ph)
        if t2rows and i is not None and i < len(mono):
            agg = agg_shares(trace, t2rows, mono[i], mono[i + 1] if i + 1 < len(mono) else float("inf"))
            if agg:
                row["agg_share"], row["agg_mbps"] = round(agg[0], 4), round(agg[1], 2)
                t2["agg_share"], t2["agg_mbps"] = round(1 - agg[0], 4), round(agg[2], 2)

    for ph, pr in phases.items():
        by = collections.defaultdict(list)
        for r in pr:
            by[r["mode"]].append(r["algbw_gbps"])
        med = {m: statistics.median(v) for m, v in by.items()}
        # the machine's runnable threads over the phase's samples (all modes), when sampled:
        # on 2 cores other work's threads slow the emulation and scatter every figure
        rn = [r["runnable"] for r in pr if "runnable" in r]
        pb = dict(base, runnable=round(statistics.median(rn), 1)) if rn else base
        fixed = {m: v for m, v in med.items() if m not in ("auto", "tenant2")}
        if not fixed:  # auto alone (--splits auto): the two jobs' shares only
            for m in sorted(med):
                out.append(dict(pb, bench="cluster", scenario=a.scenario, mode=m, phase=ph,
                                algbw_gbps=round(med[m], 4), samples=len(by[m])))
            shares(ph, med)
            continue
        bm = max(fixed, key=fixed.get)
        best = fixed[bm]
        for m in sorted(med):
            out.append(dict(pb, bench="cluster", scenario=a.scenario, mode=m, phase=ph,
                            algbw_gbps=round(med[m], 4), samples=len(by[m])))
        out.append(dict(pb, bench="cluster", scenario=a.scenario, mode="best-fixed", phase=ph,
                        split=bm, algbw_gbps=round(best, 4), samples=len(by[bm])))
        if "auto" in med:
            conv = None
            t_ph = {"during": marks[0], "after": marks[-1]}.get(ph)
            ph_i = {"during": 0, "after": len(marks) - 1}.get(ph)
            conv_req = conv_sample = None
            row_t = None
            au = sorted((r for r in pr if r["mode"] == "auto"), key=lambda r: r["t"])
            def first_good_of(samples):
                """the first sample from which on every one is within 5 % of best"""
                return next((i for i in range(len(samples))
                             if all(x["algbw_gbps"] >= 0.95 * best for x in samples[i:])), None)
            first_good = first_good_of(au)
            if t_ph is not None and trace and ph_i < len(mono):
                # auto's own time: from the change, the time auto had requests in flight
                # (the fixed splits' samples in between do not count)
                lo = mono[ph_i]
                hi = mono[ph_i + 1] if ph == "during" and ph_i + 1 < len(mono) else float("inf")
                ph_rows = [r for r in trace if r["start_ns"] >= lo and req_end(r) <= hi]

                def busy_until(t_mono, frm=lo):
                    return union((max(r["start_ns"], frm),
                                  min(req_end(r), t_mono))
                                 for r in trace)

                def wall2mono(t):
                    return mono[0] + (t - marks[0]) * 1e9
                # the best fixed split's samples in this phase, by trace: its throughput
                # from each window of a sample on, the median at each position
                au_ts = trace_samples(ph_rows)
                bf = fixed_traces.get(round(float(bm.lstrip("x")), 4), []) if bm.startswith("x") else []
                bf_ts = trace_samples([r for r in bf if r["start_ns"] >= lo and req_end(r) <= hi])
                ref = [statistics.median(v) for v in zip(*[[q for _, q in suffix_rates(x)]
                                                           for x in bf_ts])] if bf_ts else []

                def converge_at(samples):
                    """(the sample grain, the window grain) as monotonic times: the start
                    of the first sample from which on every one is within 5 % (the unit of
                    the best fixed split's figure); and the first window of the sample
                    before it from which on the rest of that sample is within 5 % of the
                    best fixed split's rest from the same position (a decision applies two
                    windows on: a sample that begins with the change cannot be within 5 %
                    as a whole), else the former. None: never."""
                    fg = first_good_of(samples)
                    if fg is None:
                        return None, None
                    at = wall2mono(start(samples[fg]))
                    if fg == 0 or not ref:
                        return at, at
                    prev = samples[fg - 1]
                    p0, p1 = wall2mono(start(prev)), wall2mono(prev["t"])
                    ts = max(au_ts, default=None, key=lambda x: min(p1, req_end(x[-1]))
                             - max(p0, min(r["start_ns"] for r in x)))
                    if ts and len(ts) == len(bf_ts[0]):
                        # from the second and third window (the rest at least two
                        # windows: the last one alone, a pipeline draining, differs by
                        # split by up to 8 %, the rest from the third by up to 4 %)
                        for (t_k, q), q_ref in list(zip(suffix_rates(ts), ref))[1:3]:
                            if q >= 0.95 * q_ref:
                                return at, t_k
                    return at, at
                # converge_s: until auto stays within 5 %, at the controller's window
                # grain; converge_sample_s: at the sample grain (a sample's start)
                at_sample, at = converge_at(au)
                if at is not None:
                    conv = round(busy_until(at) / 1e9, 3)
                    conv_sample = round(busy_until(at_sample) / 1e9, 3)
                # second-tenant, during: the change is the second job's first request; its
                # launch (the mark) comes seconds before (process start, connecting and
                # joining its ranks load nothing but the 2 cores): converge_launch_s
                # counts from the launch, over every auto sample of the phase
                if ph == "during" and t2rows and conv is not None:
                    t2_first = min(r["start_ns"] for r in t2rows)
                    au_t = [r for r in au if wall2mono(r["t"]) > t2_first]
                    ts_at, t_at = converge_at(au_t)
                    row_t = {"traffic_s": round((t2_first - lo) / 1e9, 3), "converge_launch_s": conv}
                    conv = conv_sample = None
                    if t_at is not None:
                        conv = round(busy_until(max(t2_first, t_at), t2_first) / 1e9, 3)
                        conv_sample = round(busy_until(max(t2_first, ts_at), t2_first) / 1e9, 3)
                # converge_req_s: until the throughput of its last 16 requests (32 MiB,
                # sample boundaries included) stays within 5 %
                roll = trace_rolling(ph_rows)
                for i, (_, busy, x, _) in enumerate(roll):
                    if all(y[2] >= 0.95 * best * 1e9 for y in roll[i:]):
                        conv_req = round(busy / 1e9, 3)
                        break
            elif t_ph is not None and first_good is not None:  # no trace: wall time
                conv = round(max(0.0, start(au[first_good]) - t_ph), 3)
            row = next(o for o in out if o["mode"] == "auto" and o["phase"] == ph)
            row["ratio_best_fixed"] = round(med["auto"] / best, 4)
            if row_t:
                row.update(row_t)
            if t_ph is not None:
                row["converge_s"] = conv
                if trace:
                    row["converge_sample_s"] = conv_sample
                    row["converge_req_s"] = conv_req
            shares(ph, med)
    for o in out:
        print(json.dumps(o))
    print(f"\n## scenario {a.scenario}: {base.get('workers')} workers, {base.get('aggs')} aggregator(s),"
          f" {base.get('bytes', 0) >> 20} MiB (algbw GB/s, median of the samples wholly in a phase)",
          file=sys.stderr)
    for o in out:
        extra = ""
        if o["mode"] == "best-fixed":
            extra = f"  (split {o['split']})"
        if "ratio_best_fixed" in o:
            extra = f"  auto/best-fixed {o['ratio_best_fixed']:.3f}"
            if "converge_s" in o:
                extra += f", converge_s {o['converge_s']}"
            if "converge_sample_s" in o:
                extra += f" (sample grain {o['converge_sample_s']}, per request {o['converge_req_s']})"
            if "converge_launch_s" in o:
                extra += (f"; counted from the second job's launch ({o['traffic_s']} s before"
                          f" its first request) {o['converge_launch_s']}")
        if "share" in o:
            extra += f"  share {o['share']:.3f}"
        if "agg_share" in o:
            extra += f", of the aggregators {o['agg_share']:.3f} ({o['agg_mbps']:.1f} MB/s)"
        if o["mode"] == "best-fixed" and "runnable" in o:
            extra += f"  runnable threads {o['runnable']:.1f} (median over the phase)"
        print(f"  {o['phase']:6} {o['mode']:10} {o['algbw_gbps']:8.4f}  n={o['samples']}{extra}",
              file=sys.stderr)


def cmd_linktest(a):
    for line in sys.stdin:
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        print(f"  linktest {r['host']}: tx {r['tx_mbit']:.1f} rx {r['rx_mbit']:.1f} Mbit/s of"
              f" {r['link_mbit']:g} (util {max(r['tx_util'], r['rx_util']):.3f}),"
              f" cpu busy {r['cpu_busy']:.2f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tag")
    c = sub.add_parser("config")
    for q in (t, c):
        q.add_argument("--workers", type=int, required=True)
        q.add_argument("--aggs", type=int, required=True)
        q.add_argument("--link-mbit", type=float, required=True)
        q.add_argument("--agg-link-mbit", type=float)
        q.add_argument("--linkstat")
    t.add_argument("--mode", required=True)
    t.add_argument("--sweep", action="store_true")
    c.add_argument("--results", required=True)
    f = sub.add_parser("final")
    f.add_argument("--results", required=True)
    f.add_argument("--out", required=True)
    f.add_argument("--no-plots", action="store_true")
    sub.add_parser("linktest")
    sc = sub.add_parser("scenario")
    sc.add_argument("--results", required=True)
    sc.add_argument("--scenario", required=True)
    sc.add_argument("--change", required=True)
    sc.add_argument("--change-mono", help="CLOCK_MONOTONIC ns of each change (the trace's clock)")
    sc.add_argument("--tenant-traces", help="glob of the second job's rank-0 SUMCAST_TRACE files: "
                    "each job's share of the aggregators' throughput while auto ran")
    sc.add_argument("--traces", help="glob of auto's rank-0 SUMCAST_TRACE files: converge_s from "
                    "its requests")
    sc.add_argument("--timeline-out", help="write auto's split and throughput over time here")
    a = p.parse_args()
    {"linktest": cmd_linktest, "tag": cmd_tag, "config": cmd_config, "final": cmd_final,
     "scenario": cmd_scenario}[a.cmd](a)


if __name__ == "__main__":
    main()
