"""What the ops tests read from a sumcastd's HTTP port on 127.0.0.1."""
import urllib.request


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
