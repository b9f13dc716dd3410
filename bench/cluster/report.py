#!/usr/bin/env python3
"""Results of bench/cluster/run: tag rows, per-configuration tables, ratios, plots.

  report.py tag --mode M --workers W --aggs A --link-mbit R [--linkstat FILE] < raw > rows
      adds "workers","aggs","link_mbit" (and "mode" when missing) to every JSON row, and,
      when the row has t_start/t_end and the link sampler caught >= 2 samples inside that
      window, "sampled_link_mbit" (busiest worker link, max of tx/rx), "sampled_agg_link_mbit"
      and "cpu_busy" (share of all cores busy).
  report.py config --results F --workers W --aggs A --link-mbit R [--linkstat FILE]
      table of this configuration's rows next to the model, and per-link utilisation.
  report.py final --results F --out DIR
      ratio tables (measured/model, sumcast/ring, sumcast/mpi per size), summary.md,
      busbw-vs-size PNG per configuration (gnuplot).
python3 stdlib only.
"""
import argparse, collections, json, os, shutil, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model  # noqa: E402

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


def load_linkstat(path):
    """{host: [(t, tx, rx)]} plus 'cpu': [(t, busy, total)] from sc_link_snapshot lines."""
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
        t0, t1 = r.get("t_start"), r.get("t_end")
        if t0 and t1:
            best = {"w": None, "a": None}
            for h, s in ls.items():
                if h == "cpu":
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
    return [r for r in rows if r.get("workers") == W and r.get("aggs") == A
            and float(r.get("link_mbit", 0)) == float(R)]


def cmd_config(a):
    rows = config_rows(load_rows(a.results), a.workers, a.aggs, a.link_mbit)
    m = model.predict(a.workers, a.aggs, a.link_mbit, a.agg_link_mbit)
    print(f"\n## W={a.workers} A={a.aggs} link {a.link_mbit:g} Mbit/s"
          f" (model busbw: ring {m['ring']['busbw_gbps']:.4f} GB/s"
          + (f", agg {m['agg']['busbw_gbps']:.4f}, split {m['split']['busbw_gbps']:.4f}"
             if "agg" in m else "") + ")")
    print(f"  {'mode':<6} {'size':>6} {'time_us':>12} {'algbw':>8} {'busbw':>8} {'bus/link':>8}"
          f" {'link_tx':>8} {'link_rx':>8} {'util':>6} {'cpu':>5} {'wrong':>5} {'reps':>4}")
    link_gbps = a.link_mbit / 8 / 1000
    for r in sorted(rows, key=lambda r: (r.get("mode", ""), r.get("bytes", 0))):
        tx = r.get("link_tx_mbit", r.get("sampled_link_mbit"))
        rx = r.get("link_rx_mbit", r.get("sampled_link_mbit"))
        mx = r.get("link_max_mbit", r.get("sampled_link_mbit"))
        util = f"{mx / a.link_mbit:6.2f}" if mx is not None else f"{'-':>6}"
        cpu = f"{r['cpu_busy']:5.2f}" if "cpu_busy" in r else f"{'-':>5}"
        print(f"  {r.get('mode', '?'):<6} {fmt_size(r['bytes']):>6} {r['time_us']:12.1f}"
              f" {r['algbw_gbps']:8.4f} {r['busbw_gbps']:8.4f} {r['busbw_gbps'] / link_gbps:8.3f}"
              f" {tx if tx is not None else '-':>8} {rx if rx is not None else '-':>8} {util}"
              f" {cpu} {r.get('wrong', '-'):>5} {r.get('reps', '-'):>4}")
    ls = load_linkstat(a.linkstat)
    hosts = sorted((h for h in ls if h != "cpu"), key=lambda h: (h[0] != "w", int(h[1:])))
    if hosts:
        print(f"  link utilisation over the whole configuration (sampler, {a.linkstat and os.path.basename(a.linkstat)}):")
        print(f"    {'host':<5} {'configured':>10} {'peak_tx':>8} {'peak_rx':>8} {'peak/conf':>9}"
              f" {'tx_MiB':>9} {'rx_MiB':>9}")
        for h in hosts:
            ptx, prx, tot = peak_rates(ls[h])
            conf = a.link_mbit if h.startswith("w") else (a.agg_link_mbit or a.link_mbit)
            print(f"    {h:<5} {conf:10g} {ptx:8.1f} {prx:8.1f} {max(ptx, prx) / conf:9.3f}"
                  f" {tot[0] / 2**20:9.1f} {tot[1] / 2**20:9.1f}")
        c = ls.get("cpu", [])
        if len(c) >= 2:
            peak = max(((b[1] - x[1]) / max(1, b[2] - x[2]) for x, b in zip(c, c[1:])), default=0)
            print(f"    cpu busy (all cores): peak {peak:.2f} over one sample interval")


def gnuplot_term():
    """pngcairo when this gnuplot has it, else png."""
    try:
        out = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True,
                             timeout=10)
        text = out.stdout + out.stderr
    except (OSError, subprocess.SubprocessError):
        return None
    if "pngcairo" in text:
        return "pngcairo size 900,600 font 'sans,10'"
    if " png " in text or "\n png" in text or "png " in text:
        return "png size 900,600"
    return None


def cmd_final(a):
    rows = load_rows(a.results)
    os.makedirs(a.out, exist_ok=True)
    configs = sorted({(r["workers"], r["aggs"], float(r["link_mbit"])) for r in rows
                      if "workers" in r})
    lines = []
    P = lines.append
    P("# Emulated cluster: allreduce results\n")
    P("busbw = algbw * 2(W-1)/W (nccl-tests); model: bench/cluster/model.py (link rate, no TCP"
      " overhead); `util` = busiest worker link's measured rate / configured rate.\n")
    term = None if a.no_plots else gnuplot_term()
    for (W, A, R) in configs:
        cr = config_rows(rows, W, A, R)
        m = model.predict(W, A, R)
        by_mode = collections.defaultdict(dict)
        for r in cr:
            by_mode[r.get("mode", "?")][r["bytes"]] = r
        sizes = sorted({r["bytes"] for r in cr})
        P(f"\n## W={W} A={A} link {R:g} Mbit/s\n")
        mr = m["ring"]["busbw_gbps"]
        P(f"model busbw (GB/s): ring {mr:.4f}" + (
            f", agg {m['agg']['busbw_gbps']:.4f}, split {m['split']['busbw_gbps']:.4f}"
            f" (split/ring {m['ratio_split_ring']:.3f})" if "agg" in m else "") + "\n")
        modes = [x for x in ("mpi", "mpi-ring") + SUMCAST_MODES if x in by_mode]
        mpis = [x for x in ("mpi", "mpi-ring") if x in by_mode]
        hdr = ("| size | " + " | ".join(f"{x} busbw" for x in modes) + " |"
               + "".join(f" {x}/model-ring | {x} util |" for x in mpis))
        for x in SUMCAST_MODES:
            if x in by_mode:
                hdr += f" {x}/ring-model | {x}/mpi |"
                if "ring" in by_mode and x != "ring":
                    hdr += f" {x}/ring |"
        P(hdr)
        P("|" + "---|" * (hdr.count("|") - 1))
        for s in sizes:
            cells = [fmt_size(s)]
            for x in modes:
                r = by_mode[x].get(s)
                cells.append(f"{r['busbw_gbps']:.4f}" if r else "-")
            for x in mpis:
                q = by_mode[x].get(s)
                cells.append(f"{q['busbw_gbps'] / mr:.3f}" if q else "-")
                u = q and (q.get("link_max_mbit") or q.get("sampled_link_mbit"))
                cells.append(f"{u / R:.2f}" if u else "-")
            # Sumcast is compared with the better of the two MPI runs at each size.
            cand = [by_mode[x][s] for x in mpis if s in by_mode[x]]
            mp = max(cand, key=lambda q: q["busbw_gbps"]) if cand else None
            for x in SUMCAST_MODES:
                if x not in by_mode:
                    continue
                r = by_mode[x].get(s)
                cells.append(f"{r['busbw_gbps'] / mr:.3f}" if r else "-")
                cells.append(f"{r['busbw_gbps'] / mp['busbw_gbps']:.3f}" if r and mp else "-")
                if "ring" in by_mode and x != "ring":
                    rr = by_mode["ring"].get(s)
                    cells.append(f"{r['busbw_gbps'] / rr['busbw_gbps']:.3f}" if r and rr else "-")
            P("| " + " | ".join(cells) + " |")
        # gnuplot: data per mode, model lines
        base = f"busbw-W{W}-A{A}-R{R:g}"
        for x in modes:
            with open(os.path.join(a.out, f"{base}-{x}.dat"), "w") as f:
                f.write("# bytes busbw_gbps\n")
                for s in sorted(by_mode[x]):
                    f.write(f"{s} {by_mode[x][s]['busbw_gbps']}\n")
        if term and shutil.which("gnuplot") and sizes:
            plots = [f"'{base}-{x}.dat' using 1:2 with linespoints lw 2 pt 7 title '{x} (measured)'"
                     for x in modes]
            plots.append(f"{mr} with lines dt 2 lw 1.5 lc rgb '#444444' title 'model: ring = link'")
            if "agg" in m:
                plots.append(f"{m['split']['busbw_gbps']} with lines dt 3 lw 1.5 lc rgb '#aa0000'"
                             f" title 'model: sumcast split ({m['ratio_split_ring']:.2f}x ring)'")
            gp = os.path.join(a.out, f"{base}.gp")
            with open(gp, "w") as f:
                f.write(f"set terminal {term}\nset output '{base}.png'\n"
                        f"set title 'allreduce f32 sum, W={W} workers, A={A} aggregators, "
                        f"{R:g} Mbit/s links (tc tbf, netns)'\n"
                        "set logscale x 2\nset format x '%.0b%BB'\nset xlabel 'message size'\n"
                        "set ylabel 'busbw (GB/s)'\nset yrange [0:*]\nset grid\n"
                        f"set xrange [{sizes[0] / 1.5}:{sizes[-1] * 1.5}]\n"
                        "set key bottom right\n"
                        "plot " + ", \\\n     ".join(plots) + "\n")
            r = subprocess.run(["gnuplot", os.path.basename(gp)], cwd=a.out, capture_output=True,
                               text=True, timeout=60)
            if r.returncode == 0:
                P(f"\n![busbw W={W} A={A}]({base}.png)\n")
            else:
                print(f"gnuplot failed for {base}: {r.stderr.strip()}", file=sys.stderr)
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


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
    c.add_argument("--results", required=True)
    f = sub.add_parser("final")
    f.add_argument("--results", required=True)
    f.add_argument("--out", required=True)
    f.add_argument("--no-plots", action="store_true")
    sub.add_parser("linktest")
    a = p.parse_args()
    {"linktest": cmd_linktest, "tag": cmd_tag, "config": cmd_config, "final": cmd_final}[a.cmd](a)


if __name__ == "__main__":
    main()
