#!/usr/bin/env python3
"""Bandwidth model of one allreduce on the emulated cluster (python3 stdlib only).

W workers (nodes), A aggregators; every worker link carries `link` bit/s in each direction,
every aggregator link `agg_link` (default: the same). S bytes are reduced; f = 2(W-1)/W.

  ring        every worker link carries f*S each way           algbw = link / f
  aggregator  worker link carries S each way (send once, get the sum once)
              aggregator link carries W*S/A each way (unicast results)
                                                                algbw = min(link, agg_link*A/W)
  split       a fraction x of S goes to the aggregators, the rest around the ring:
              worker link: x + (1-x)*f,  aggregator link: x*W/A   (docs/design.md)
              time = max((x + (1-x) f)/link, x W/(A agg_link)); the best x balances the two,
              x = f / (f - 1 + W link/(A agg_link)), or x = 1 when aggregators are not the
              bottleneck (W link <= A agg_link).

busbw = algbw * f for every algorithm (nccl-tests convention), so ring busbw == link rate and
a busbw above the link rate means fewer bytes crossed each link than a ring needs.

Rates are link rates (what tc tbf enforces, L2 framing included); TCP over Ethernet leaves
~95% of it as payload (measured 0.95-0.96 with bench/cluster's linktest), see `efficiency`.
"""
import argparse, json, sys


def predict(workers, aggs, link_mbit, agg_link_mbit=None, efficiency=1.0):
    """Returns a dict of predicted algbw/busbw (GB/s, 1e9 B/s) for ring, agg, split."""
    W, A = int(workers), int(aggs)
    L = float(link_mbit) * 1e6 / 8 / 1e9 * efficiency           # GB/s per direction
    La = float(agg_link_mbit if agg_link_mbit else link_mbit) * 1e6 / 8 / 1e9 * efficiency
    f = 2.0 * (W - 1) / W if W > 1 else 1.0
    out = {"workers": W, "aggs": A, "link_mbit": float(link_mbit),
           "agg_link_mbit": float(agg_link_mbit or link_mbit), "efficiency": efficiency,
           "busfactor": f}
    ring_alg = L / f
    out["ring"] = {"algbw_gbps": ring_alg, "busbw_gbps": ring_alg * f}
    if A > 0:
        agg_alg = min(L, La * A / W)
        out["agg"] = {"algbw_gbps": agg_alg, "busbw_gbps": agg_alg * f,
                      "bottleneck": "worker link" if L <= La * A / W else "aggregator link"}
        if W * L <= A * La:
            x = 1.0
        else:
            x = f / (f - 1.0 + W * L / (A * La))
        t = max((x + (1 - x) * f) / L, x * W / (A * La))      # seconds per GB
        split_alg = 1.0 / t
        out["split"] = {"algbw_gbps": split_alg, "busbw_gbps": split_alg * f, "fraction": x}
        out["ratio_split_ring"] = split_alg / ring_alg
        out["ratio_agg_ring"] = agg_alg / ring_alg
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", "-W", type=int, required=True)
    p.add_argument("--aggs", "-A", type=int, default=0)
    p.add_argument("--link-mbit", type=float, required=True)
    p.add_argument("--agg-link-mbit", type=float)
    p.add_argument("--efficiency", type=float, default=1.0,
                   help="payload share of the link rate (0.95 for TCP measured here)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    m = predict(a.workers, a.aggs, a.link_mbit, a.agg_link_mbit, a.efficiency)
    if a.json:
        print(json.dumps(m))
        return
    print(f"# model: W={m['workers']} A={m['aggs']} link {m['link_mbit']:g} Mbit/s"
          f" (aggregators {m['agg_link_mbit']:g}), efficiency {a.efficiency:g},"
          f" busbw = algbw * {m['busfactor']:.3f}")
    print(f"  {'algorithm':<10} {'algbw GB/s':>11} {'busbw GB/s':>11}  note")
    print(f"  {'ring':<10} {m['ring']['algbw_gbps']:11.4f} {m['ring']['busbw_gbps']:11.4f}")
    if "agg" in m:
        print(f"  {'agg':<10} {m['agg']['algbw_gbps']:11.4f} {m['agg']['busbw_gbps']:11.4f}"
              f"  limited by {m['agg']['bottleneck']}")
        print(f"  {'split':<10} {m['split']['algbw_gbps']:11.4f} {m['split']['busbw_gbps']:11.4f}"
              f"  aggregator share {m['split']['fraction']:.3f}")
        print(f"  sumcast(split)/ring = {m['ratio_split_ring']:.3f}   agg/ring = {m['ratio_agg_ring']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
