"""PNG plots through gnuplot, for the benches written in Python (bench/cluster/report.py,
bench/scale). python3 stdlib only; gnuplot is optional (scripts/deps.sh installs it).

  terminal(size)      the terminal line for a PNG of size "W,H": pngcairo when this gnuplot
                      has it, else png; None when gnuplot is missing or has neither
  render(script, cwd) runs a gnuplot script; None, or why it failed (one line)
"""
import subprocess


def terminal(size="900,600"):
    """pngcairo when this gnuplot has it, else png; None without gnuplot or PNG."""
    try:
        out = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True,
                             timeout=10)
        text = out.stdout + out.stderr
    except (OSError, subprocess.SubprocessError):
        return None
    if "pngcairo" in text:
        return f"pngcairo size {size} font 'sans,10'"
    if " png " in text or "\n png" in text or "png " in text:
        return f"png size {size}"
    return None


def render(script, cwd=None):
    """Runs the gnuplot script (text) in cwd: None, or why it failed."""
    try:
        r = subprocess.run(["gnuplot"], input=script, cwd=cwd, capture_output=True, text=True,
                           timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    if r.returncode:
        return (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
    return None
