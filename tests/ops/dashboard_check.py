#!/usr/bin/env python3
"""Checks conf/grafana/sumcast.json against a real sumcastd.

  dashboard_check.py DASHBOARD.json SCRAPE.prom [--docs OPERATIONS.md]
                    [--prometheus URL] [--render DIR]

* every panel (rows aside) has a unit and at least one query; datasources are
  the ${datasource} variable, the one datasource the dashboard defines (no
  __inputs beside it), so the dashboard imports anywhere;
* every sumcast_* and process_* series a query names exists in SCRAPE (a
  real /metrics), and every label it groups or filters by exists on that
  series (instance and job are added by Prometheus);
* the panels titled Errors count no normal stop (sumcast_shutdown_*, kind
  "shutdown");
* files and README sections the descriptions cite exist;
* with --docs: every metric the Metrics table of OPERATIONS.md documents has
  a panel, and every metric a panel queries is documented there;
* with --prometheus (a server that scraped the daemon while a job ran): every
  query, with Grafana's variables filled in, evaluates without error over the
  scraped range and returns at least one non-NaN value; with --render, the
  panels are drawn from those results with gnuplot into DIR/dashboard.png.
Exit 0 pass, 1 fail.
"""
import json
import math
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request

PROM_LABELS = {"instance", "job"}
# Queries of these panels may be empty on a healthy daemon (no errors).
MAY_BE_EMPTY = {"Jobs aborted and joins refused, by reason", "Messages dropped, by kind"}
METRIC_RE = re.compile(r"\b((?:sumcast|process)_[a-zA-Z0-9_:]+)")
HIST_SUFFIX = re.compile(r"_(bucket|sum|count)$")


def documented_metrics(path):
    """Metric names in the first column of the table under '## Metrics'."""
    names, inside = set(), False
    for line in open(path):
        if line.startswith("## "):
            inside = line.strip() == "## Metrics"
            continue
        if inside and line.startswith("| `"):
            names |= set(METRIC_RE.findall(line.split("|")[1]))
    return names


def cited(text, root):
    """Problems with the files and README sections a description cites."""
    bad = []
    for f in re.findall(r"\b((?:docs|conf|tests|daemon|tools)/[A-Za-z0-9_./-]+\.[a-z]+)", text):
        if not os.path.exists(os.path.join(root, f)):
            bad.append("cites %s, which does not exist" % f)
    readme = open(os.path.join(root, "README.md")).read()
    for sec in re.findall(r"README \(([^)]*)\)", text):
        for name in (x.strip() for x in sec.split(",")):
            if not re.search(r"^#+ +%s\b" % re.escape(name), readme, re.M):
                bad.append("cites README section %r, which README.md does not have" % name)
    return bad


def walk(panels):
    for p in panels:
        if p.get("type") == "row":
            yield from walk(p.get("panels", []))
        else:
            yield p


def scrape_series(path):
    series = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?", line)
        labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(2) or ""))
        series.setdefault(m.group(1), set()).update(labels)
    return series


def fill(expr, rate_interval="4s"):
    return (expr.replace("$__rate_interval", rate_interval).replace("$__interval", "1s")
            .replace("$instance", ".*"))


def prom_get(url, path, params):
    q = urllib.parse.urlencode(params)
    with urllib.request.urlopen("%s%s?%s" % (url, path, q), timeout=10) as r:
        return json.load(r)


def render(results, outdir):
    """One PNG laid out like the dashboard (3 columns), from query_range data."""
    os.makedirs(outdir, exist_ok=True)
    plots = [(t, u, s) for t, u, s in results if s]
    n = len(plots)
    cols = 3
    rows = (n + cols - 1) // cols
    script = ['set terminal pngcairo size 1500,%d font "DejaVu Sans,9"' % (300 * rows),
              'set output "%s"' % os.path.join(outdir, "dashboard.png"),
              'set multiplot layout %d,%d title "Sumcast aggregators (rendered from a real Prometheus scrape of sumcastd)"' % (rows, cols),
              "set key bottom left font ',8'", "set grid", "set xlabel 'seconds'",
              "set format y '%.3s%c'"]
    data = []
    for i, (title, unit, series) in enumerate(plots):
        blocks = []
        for legend, pts in series:
            fn = os.path.join(outdir, "panel%02d_%d.dat" % (i, len(blocks)))
            with open(fn, "w") as f:
                for t, v in pts:
                    f.write("%g %g\n" % (t, v))
            data.append(fn)
            blocks.append("'%s' using 1:2 with lines lw 2 title '%s'" % (fn, legend.replace("'", "")[:40]))
        script.append("set title '%s (%s)'" % (title.replace("'", ""), unit))
        script.append("plot " + ", ".join(blocks))
    script.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(script), text=True, check=True)
    for fn in data:
        os.unlink(fn)
    print("rendered %s" % os.path.join(outdir, "dashboard.png"))


def main():
    args = sys.argv[1:]
    prom = render_dir = None
    if "--prometheus" in args:
        i = args.index("--prometheus")
        prom = args[i + 1]
        del args[i:i + 2]
    docs = None
    if "--docs" in args:
        i = args.index("--docs")
        docs = args[i + 1]
        del args[i:i + 2]
    if "--render" in args:
        i = args.index("--render")
        render_dir = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    dash = json.load(open(args[0]))
    have = scrape_series(args[1])
    bad = []
    queries = []
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(args[0]))))
    if "__inputs" in dash:
        bad.append("__inputs defines a datasource beside the ${datasource} variable")
    dsvars = [v for v in dash.get("templating", {}).get("list", []) if v.get("type") == "datasource"]
    if [v.get("name") for v in dsvars] != ["datasource"]:
        bad.append("want one datasource variable named datasource, have %r" % [v.get("name") for v in dsvars])
    for v in dash.get("templating", {}).get("list", []):
        if "datasource" in v and v["datasource"].get("uid") != "${datasource}":
            bad.append("variable %r: datasource is not ${datasource}" % v.get("name"))
    for b in cited(dash.get("description", ""), root):
        bad.append("dashboard description " + b)
    for p in walk(dash["panels"]):
        title = p.get("title", "?")
        unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit")
        if not unit:
            bad.append("panel %r has no unit" % title)
        if not p.get("targets"):
            bad.append("panel %r has no query" % title)
        if p.get("datasource", {}).get("uid") != "${datasource}":
            bad.append("panel %r: datasource is not ${datasource}" % title)
        for b in cited(p.get("description", ""), root):
            bad.append("panel %r: %s" % (title, b))
        for t in p.get("targets", []):
            if t.get("datasource", p.get("datasource", {})).get("uid") != "${datasource}":
                bad.append("panel %r: datasource is not ${datasource}" % title)
            expr = t.get("expr", "")
            queries.append((title, unit, t.get("legendFormat", ""), expr))
            names = set(METRIC_RE.findall(expr))
            if not names:
                bad.append("panel %r: query names no sumcast_ or process_ metric: %s" % (title, expr))
            if title.startswith("Errors") and "shutdown" in expr:
                bad.append("panel %r counts the normal stop (shutdown): %s" % (title, expr))
            used = set(re.findall(r"\bby \(([^)]*)\)", expr))
            used = {l.strip() for g in used for l in g.split(",")}
            used |= set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)=~?\"", expr))
            used |= set(re.findall(r"\{\{(\w+)\}\}", t.get("legendFormat", "")))
            for n in names:
                if n not in have:
                    bad.append("panel %r queries %s, which sumcastd's /metrics does not have" % (title, n))
                    continue
            for l in used - PROM_LABELS:
                if not any(l in have.get(n, set()) for n in names):
                    bad.append("panel %r uses label %s, which %s do not have" % (title, l, sorted(names)))
    used = {n for q in queries for n in METRIC_RE.findall(q[3])}
    print("dashboard: %d panels, %d queries, %d metric names checked against the scrape"
          % (len(list(walk(dash["panels"]))), len(queries), len(used)))
    if docs:
        documented = documented_metrics(docs)
        if not documented:
            bad.append("%s: no metrics found under '## Metrics'" % docs)
        families = {HIST_SUFFIX.sub("", n) if HIST_SUFFIX.sub("", n) in documented else n for n in used}
        for n in sorted(documented - families):
            bad.append("%s documents %s, which no panel shows" % (os.path.basename(docs), n))
        for n in sorted(families - documented):
            bad.append("a panel queries %s, which %s does not document" % (n, os.path.basename(docs)))
        print("docs: %d documented metrics, each with a panel" % len(documented))

    if prom:
        # Wait for the server to have scraped the daemon.
        deadline = time.monotonic() + 20
        while True:
            try:
                r = prom_get(prom, "/api/v1/query", {"query": "sumcast_build_info"})
                if r["data"]["result"]:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                bad.append("prometheus at %s never scraped sumcastd" % prom)
                break
            time.sleep(0.5)
        end = time.time()
        start = end - 120
        first = prom_get(prom, "/api/v1/query_range",
                         {"query": "sumcast_build_info", "start": start, "end": end, "step": 1})
        if first["data"]["result"]:
            start = float(first["data"]["result"][0]["values"][0][0])
        panels = {}
        for title, unit, legend, expr in queries:
            q = fill(expr)
            try:
                r = prom_get(prom, "/api/v1/query_range", {"query": q, "start": start, "end": end, "step": 1})
            except urllib.error.HTTPError as e:
                bad.append("panel %r: prometheus refused %s: %s" % (title, q, e.read()[:300]))
                continue
            if r.get("status") != "success":
                bad.append("panel %r: %s: %r" % (title, q, r))
                continue
            series = []
            for s in r["data"]["result"]:
                pts = [(float(t) - start, float(v)) for t, v in s["values"]
                       if not math.isnan(float(v)) and not math.isinf(float(v))]
                if pts:
                    lg = re.sub(r"\{\{(\w+)\}\}", lambda m: s["metric"].get(m.group(1), ""), legend)
                    series.append((lg or q[:30], pts))
            if not series and title not in MAY_BE_EMPTY:
                bad.append("panel %r: no data for %s" % (title, q))
            panels.setdefault((title, unit), []).extend(series)
        print("prometheus: %d queries evaluated over %.0f s of scrapes" % (len(queries), end - start))
        if render_dir:
            try:
                render([(t, u, s) for (t, u), s in panels.items()], render_dir)
            except (OSError, subprocess.CalledProcessError) as e:
                print("render failed (not a test failure): %s" % e)
    elif render_dir:
        print("no prometheus server: nothing rendered")
    for b in bad:
        print("FAIL:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
