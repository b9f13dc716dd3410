#!/usr/bin/env python3
"""Strict checker of the Prometheus text exposition format (version 0.0.4)
plus the naming rules Sumcast follows (https://prometheus.io/docs/practices/naming/).

  promlint.py FILE [FILE...]     exit 0 if every file passes, 1 otherwise

Checks, per file:
  * every line is a comment (# HELP / # TYPE / other) or a sample that matches
    the grammar: name, optional {label="value",...}, a float (or +Inf, -Inf,
    NaN), optional integer timestamp;
  * every family has exactly one # HELP and one # TYPE, TYPE before its
    samples, samples of a family contiguous, no series twice;
  * sample names fit the family's type (histogram: _bucket with le, _sum,
    _count; counter and gauge: the family name itself);
  * counters end in _total, nothing else does; names use base units (no
    _milliseconds, _ms, _kb, _percent, ...); every family starts with sumcast_, except the
    process collector's standard names (PROCESS_STANDARD) that every
    Prometheus client exports under the same name;
  * histograms: per label set, le ascending, counts cumulative, last bucket
    le="+Inf" equal to _count, _sum present;
  * labels: names match [a-zA-Z_][a-zA-Z0-9_]*, no unbounded identifiers (job
    ids, ranks, addresses) as labels, at most MAX_VALUES values per label;
  * sumcast_build_info is a gauge with value 1 and a version label.
"""
import math
import re
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LNAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
LVALUE = r'"(?:[^"\\\n]|\\\\|\\"|\\n)*"'
FLOAT = r"[+-]?(?:Inf|inf|NaN|nan|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
SAMPLE_RE = re.compile(r"^(%s)(\{(?:%s=%s(?:,%s=%s)*,?)?\})? (%s)(?: (-?\d+))?$"
                       % (NAME, LNAME, LVALUE, LNAME, LVALUE, FLOAT))
LABEL_RE = re.compile(r"(%s)=(%s)" % (LNAME, LVALUE))
HELP_RE = re.compile(r"^# HELP (%s) (.*)$" % NAME)
TYPE_RE = re.compile(r"^# TYPE (%s) (counter|gauge|histogram|summary|untyped)$" % NAME)
NON_BASE_UNITS = ("_milliseconds", "_microseconds", "_nanoseconds", "_minutes", "_hours",
                  "_ms", "_us", "_ns", "_kb", "_mb", "_gb", "_kib", "_mib", "_gib",
                  "_kilobytes", "_megabytes", "_gigabytes", "_bits", "_percent", "_percentage")
PROCESS_STANDARD = {"process_cpu_seconds_total", "process_resident_memory_bytes",
                    "process_virtual_memory_bytes", "process_start_time_seconds",
                    "process_open_fds", "process_max_fds"}
UNBOUNDED_LABELS = {"id", "job_id", "jobid", "job", "rank", "addr", "address", "peer", "host",
                    "ip", "port", "endpoint", "handle", "pid"}
MAX_VALUES = 300  # e.g. thread="0".."255" is bounded by the config's limit (256)


def parse_float(s):
    return float(s.replace("Inf", "inf").replace("NaN", "nan"))


def unescape(v):
    return v[1:-1].replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")


def lint(text, name="<input>"):
    errs = []
    helps, types = {}, {}
    family_order = []       # families in order of first appearance
    closed = set()          # families whose samples ended
    current = None
    series = set()
    samples = []            # (family, sample_name, labels dict, value)
    label_values = {}

    def err(lineno, msg):
        errs.append("%s:%d: %s" % (name, lineno, msg))

    def family_of(sample_name):
        for suffix in ("_bucket", "_sum", "_count"):
            if sample_name.endswith(suffix):
                base = sample_name[: -len(suffix)]
                if types.get(base) in ("histogram", "summary"):
                    return base
        return sample_name

    if not text.endswith("\n"):
        errs.append("%s: last line does not end with a newline" % name)
    for lineno, line in enumerate(text.split("\n")[:-1], 1):
        if line == "":
            err(lineno, "empty line")
            continue
        if line.startswith("#"):
            m = HELP_RE.match(line)
            if m:
                if m.group(1) in helps:
                    err(lineno, "second # HELP for %s" % m.group(1))
                if not m.group(2).strip():
                    err(lineno, "empty # HELP for %s" % m.group(1))
                helps[m.group(1)] = m.group(2)
                continue
            m = TYPE_RE.match(line)
            if m:
                fam = m.group(1)
                if fam in types:
                    err(lineno, "second # TYPE for %s" % fam)
                if fam in family_order:
                    err(lineno, "# TYPE %s after its samples" % fam)
                types[fam] = m.group(2)
                continue
            if line.startswith("# HELP") or line.startswith("# TYPE"):
                err(lineno, "malformed: %r" % line)
            continue
        m = SAMPLE_RE.match(line)
        if not m:
            err(lineno, "not a sample line: %r" % line)
            continue
        sname, lblock, value = m.group(1), m.group(2) or "", m.group(3)
        labels = {}
        for lm in LABEL_RE.finditer(lblock):
            if lm.group(1) in labels:
                err(lineno, "label %s twice" % lm.group(1))
            labels[lm.group(1)] = unescape(lm.group(2))
        fam = family_of(sname)
        if fam not in types:
            err(lineno, "sample %s has no # TYPE before it" % sname)
        if fam != current:
            if fam in closed:
                err(lineno, "samples of %s are not contiguous" % fam)
            if current is not None:
                closed.add(current)
            current = fam
            if fam not in family_order:
                family_order.append(fam)
        key = (sname, tuple(sorted(labels.items())))
        if key in series:
            err(lineno, "series %s%s twice" % (sname, lblock))
        series.add(key)
        samples.append((fam, sname, labels, parse_float(value), lineno))
        for k, v in labels.items():
            if k != "le":
                label_values.setdefault((fam, k), set()).add(v)

    for fam in sorted(set(helps) | set(types) | set(family_order)):
        t = types.get(fam)
        if fam not in helps:
            errs.append("%s: %s has no # HELP" % (name, fam))
        if t is None:
            errs.append("%s: %s has no # TYPE" % (name, fam))
        if fam not in family_order:
            errs.append("%s: %s has # HELP/# TYPE but no samples" % (name, fam))
        if not fam.startswith("sumcast_") and fam not in PROCESS_STANDARD:
            errs.append("%s: %s is not in the sumcast_ namespace" % (name, fam))
        if t == "counter" and not fam.endswith("_total"):
            errs.append("%s: counter %s does not end in _total" % (name, fam))
        if t != "counter" and fam.endswith("_total"):
            errs.append("%s: %s %s ends in _total (only counters do)" % (name, t, fam))
        if t in ("untyped", "summary"):
            errs.append("%s: %s is %s (use counter, gauge or histogram)" % (name, fam, t))
        for bad in NON_BASE_UNITS:
            if (fam + "_").find(bad + "_") >= 0:
                errs.append("%s: %s uses %s, not a base unit (seconds, bytes)" % (name, fam, bad[1:]))
        if t == "histogram" and not fam.endswith("_seconds") and not fam.endswith("_bytes"):
            errs.append("%s: histogram %s has no unit suffix (_seconds, _bytes)" % (name, fam))

    for (fam, label), values in sorted(label_values.items()):
        if label in UNBOUNDED_LABELS:
            errs.append("%s: %s has label %s: unbounded values (one series per job/rank/peer)"
                        % (name, fam, label))
        if len(values) > MAX_VALUES:
            errs.append("%s: %s{%s} has %d values (> %d)" % (name, fam, label, len(values), MAX_VALUES))

    # Per-type sample rules.
    hist = {}
    for fam, sname, labels, value, lineno in samples:
        t = types.get(fam)
        if t in ("counter", "gauge"):
            if sname != fam:
                errs.append("%s:%d: %s in %s family %s" % (name, lineno, sname, t, fam))
            if t == "counter" and (value < 0 or math.isnan(value)):
                errs.append("%s:%d: counter %s = %s" % (name, lineno, sname, value))
        elif t == "histogram":
            rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
            h = hist.setdefault((fam, rest), {"buckets": [], "sum": None, "count": None})
            if sname == fam + "_bucket":
                if "le" not in labels:
                    errs.append("%s:%d: %s without le" % (name, lineno, sname))
                    continue
                try:
                    le = parse_float(labels["le"])
                except ValueError:
                    errs.append("%s:%d: le=%r is not a number" % (name, lineno, labels["le"]))
                    continue
                h["buckets"].append((le, labels["le"], value, lineno))
            elif sname == fam + "_sum":
                h["sum"] = value
            elif sname == fam + "_count":
                h["count"] = value
            else:
                errs.append("%s:%d: %s in histogram %s" % (name, lineno, sname, fam))
            if "le" in labels and sname != fam + "_bucket":
                errs.append("%s:%d: le label on %s" % (name, lineno, sname))
    for (fam, rest), h in sorted(hist.items()):
        b = h["buckets"]
        where = "%s%s" % (fam, dict(rest) if rest else "")
        if not b:
            errs.append("%s: histogram %s has no buckets" % (name, where))
            continue
        for i in range(1, len(b)):
            if not b[i][0] > b[i - 1][0]:
                errs.append("%s:%d: %s le=%s not above the previous le" % (name, b[i][3], where, b[i][1]))
            if b[i][2] < b[i - 1][2]:
                errs.append("%s:%d: %s bucket le=%s (%g) below the previous (%g): not cumulative"
                            % (name, b[i][3], where, b[i][1], b[i][2], b[i - 1][2]))
        if b[-1][1] != "+Inf":
            errs.append("%s: %s last bucket is le=%s, not le=\"+Inf\"" % (name, where, b[-1][1]))
        if h["count"] is None:
            errs.append("%s: %s has no _count" % (name, where))
        elif b[-1][2] != h["count"]:
            errs.append("%s: %s le=\"+Inf\" is %g but _count is %g" % (name, where, b[-1][2], h["count"]))
        if h["sum"] is None:
            errs.append("%s: %s has no _sum" % (name, where))

    bi = [s for s in samples if s[0] == "sumcast_build_info"]
    if not bi:
        errs.append("%s: no sumcast_build_info" % name)
    for fam, sname, labels, value, lineno in bi:
        if types.get(fam) != "gauge" or value != 1 or "version" not in labels:
            errs.append("%s:%d: sumcast_build_info must be a gauge = 1 with a version label" % (name, lineno))
    return errs, {"families": len(family_order), "samples": len(samples), "types": types}


GOOD = """# HELP sumcast_build_info Build.
# TYPE sumcast_build_info gauge
sumcast_build_info{version="1"} 1
# HELP sumcast_x_total X.
# TYPE sumcast_x_total counter
sumcast_x_total{kind="a"} 3
# HELP sumcast_d_seconds D.
# TYPE sumcast_d_seconds histogram
sumcast_d_seconds_bucket{le="0.1"} 1
sumcast_d_seconds_bucket{le="+Inf"} 2
sumcast_d_seconds_sum 0.3
sumcast_d_seconds_count 2
# HELP process_cpu_seconds_total CPU.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 1.5
"""
# (replace, by, what the linter must say)
BAD = [
    ("sumcast_x_total", "sumcast_x", "does not end in _total"),
    ("sumcast_x_total", "other_x_total", "not in the sumcast_ namespace"),
    ("process_cpu_seconds_total", "process_cpu_total", "not in the sumcast_ namespace"),
    ('_bucket{le="+Inf"} 2', '_bucket{le="+Inf"} 0', "not cumulative"),
    ("_count 2", "_count 5", "_count is"),
    ("# HELP sumcast_x_total X.\n", "", "has no # HELP"),
    ('{kind="a"} 3', '{kind="a"} three', "not a sample line"),
    ('kind="a"', 'rank="17"', "unbounded"),
    ("sumcast_d_seconds", "sumcast_d_milliseconds", "not a base unit"),
    ('sumcast_d_seconds_bucket{le="+Inf"} 2\n', "", 'not le="+Inf"'),
    ('{version="1"} 1', '{version="1"} 2', "sumcast_build_info must be"),
]


def self_test():
    errs, _ = lint(GOOD, "good")
    bad = ["good input flagged: %s" % e for e in errs]
    for old, new, want in BAD:
        text = GOOD.replace(old, new)
        assert text != GOOD, old
        errs, _ = lint(text, "bad")
        if not any(want in e for e in errs):
            bad.append("%r -> %r not caught (want %r), got %r" % (old, new, want, errs))
    for b in bad:
        print("promlint self-test:", b)
    print("promlint self-test: %d cases, %d failed" % (len(BAD) + 1, len(bad)))
    return 1 if bad else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    bad = 0
    for path in sys.argv[1:]:
        with open(path) as f:
            errs, info = lint(f.read(), path)
        for e in errs:
            print(e)
        print("%s: %d families, %d samples, %d problems" % (path, info["families"], info["samples"], len(errs)))
        bad += len(errs)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
