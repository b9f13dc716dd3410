"""A sumcastd for the ops tests: started on ports of its choice on 127.0.0.1,
what they read from its HTTP port, and stopped."""
import os
import subprocess
import time
import urllib.request


def clean_env():
    """This environment without libfabric's and the daemon's own settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("FI_", "SUMCASTD_"))}


def start(sumcastd, tmp, name, extra_env, provider=None, conf_extra=""):
    """A daemon with ports of its choice (and [fabric] provider, if given,
    and conf_extra's lines appended to its tmp/name.conf), its log in
    tmp/name.log: (process, control port, HTTP port), the ports None when
    it wrote no port file within 15 s."""
    ports = os.path.join(tmp, name + ".ports")
    conf = os.path.join(tmp, name + ".conf")
    with open(conf, "w") as f:
        f.write("[control]\nport = 0\nport-file = %s\n[http]\nport = 0\n" % ports)
        if provider:
            f.write("[fabric]\nprovider = %s\n" % provider)
        f.write(conf_extra)
    env = clean_env()
    env.update(extra_env)
    log = open(os.path.join(tmp, name + ".log"), "w")
    d = subprocess.Popen([sumcastd, "-c", conf], stdout=log, stderr=subprocess.STDOUT, env=env)
    end = time.monotonic() + 15
    while not os.path.exists(ports) and time.monotonic() < end and d.poll() is None:
        time.sleep(0.05)
    if not os.path.exists(ports):
        return d, None, None
    kv = dict(x.split("=") for x in open(ports).read().split())
    return d, int(kv["control"]), int(kv["http"])


def stop(d):
    """SIGTERM, then SIGKILL after 10 s; reaped."""
    if d.poll() is None:
        d.terminate()
        try:
            d.wait(timeout=10)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait()


def get(port, path):
    """The body of GET path, as text (urllib raises on an error status)."""
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as r:
        return r.read().decode()


def metric(text, name):
    """The value of an unlabelled metric in a /metrics text, or None."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None
