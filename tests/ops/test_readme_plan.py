#!/usr/bin/env python3
"""The sizing figures the docs paste are what sumcastctl plan prints now.

Every fenced block in README.md and docs/sizing.md whose first line is
`$ sumcastctl plan ...` is run (the same arguments, this build's
sumcastctl) and must print exactly the lines pasted below it. A change of
the model, the admission rules or the table's format fails here until the
docs are pasted again.

usage: test_readme_plan.py SUMCASTCTL SRCDIR   (77: sumcastctl not built)"""
import os
import re
import shlex
import subprocess
import sys

DOCS = ("README.md", "docs/sizing.md")


def blocks(text):
    """(command line, pasted lines) for each ``` block that starts with $ sumcastctl plan."""
    for m in re.finditer(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M):
        lines = m.group(1).splitlines()
        if lines and lines[0].startswith("$ sumcastctl plan "):
            yield lines[0][2:], lines[1:]


def main(ctl, src):
    failures, seen = [], 0
    for doc in DOCS:
        with open(os.path.join(src, doc)) as f:
            text = f.read()
        for cmd, pasted in blocks(text):
            seen += 1
            argv = shlex.split(cmd)
            p = subprocess.run([ctl] + argv[1:], capture_output=True, text=True, timeout=30)
            got = p.stdout.splitlines()
            if p.returncode != 0:
                failures.append(f"{doc}: `{cmd}` exits {p.returncode}: {p.stderr.strip()}")
            elif got != pasted:
                diff = [f"  line {i + 1}:\n    pasted: {a!r}\n    prints: {b!r}"
                        for i, (a, b) in enumerate(zip(pasted + [""] * len(got), got + [""] * len(pasted)))
                        if a != b][:5]
                failures.append(f"{doc}: `{cmd}` prints something else than the pasted block:\n" + "\n".join(diff))
    if seen < 2:
        failures.append(f"only {seen} `$ sumcastctl plan` blocks found in {', '.join(DOCS)} (README has two)")
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print(f"ok: {seen} pasted plan outputs are current")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or not sys.argv[1]:
        print("SKIP: sumcastctl not built")
        sys.exit(77)
    sys.exit(main(sys.argv[1], sys.argv[2]))
