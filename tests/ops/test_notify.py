#!/usr/bin/env python3
"""systemd notify protocol of sumcastd, without systemd as PID 1.

The test plays systemd's side: it listens on a unix datagram socket named by
NOTIFY_SOCKET (abstract, and a filesystem path in a second run), starts the
real daemon with ports 0 + a port file, and checks what a Type=notify unit
with NotifyAccess=main relies on:

  * every message comes from the main PID (SO_PASSCRED);
  * READY=1 arrives only once the control port accepts connections and
    /healthz answers 200 (systemd starts dependent units on READY);
  * READY=1 comes with a STATUS= line;
  * SIGHUP: RELOADING=1, then READY=1 again (ExecReload=kill -HUP);
  * SIGTERM: STOPPING=1, then a clean exit 0.

Usage: test_notify.py SUMCASTD
Exit 0 pass, 1 fail. tests/ops/test_systemd.sh runs the package under a
real systemd (in systemd-nspawn).
"""
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

TIMEOUT = 15.0
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def recv_msg(sock, deadline):
    """One datagram as (pid, {key: value}, raw), or None at the deadline."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        sock.settimeout(left)
        try:
            data, anc, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(12))
        except socket.timeout:
            return None
        pid = None
        for level, typ, cdata in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_CREDENTIALS:
                pid, _, _ = struct.unpack("iII", cdata[:12])
        text = data.decode("utf-8", "replace")
        kv = {}
        for line in text.split("\n"):
            if "=" in line:
                k, v = line.split("=", 1)
                kv[k] = v
        return pid, kv, text


def wait_for(sock, key, deadline, seen):
    """Messages until one carries key; every message is appended to seen."""
    while True:
        m = recv_msg(sock, deadline)
        if m is None:
            return None
        seen.append(m)
        if key in m[1]:
            return m


def http_status(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def run(sumcastd, abstract):
    tmp = tempfile.mkdtemp(prefix="sumcast-notify.")
    ports = os.path.join(tmp, "ports")
    conf = os.path.join(tmp, "sumcastd.conf")
    with open(conf, "w") as f:
        f.write("[control]\nport = 0\nport-file = %s\ndrain-timeout = 1s\n"
                "[http]\nport = 0\n[fabric]\nprovider = tcp;ofi_rxm\n" % ports)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    if abstract:
        name = "sumcast-notify-%d-%d" % (os.getpid(), time.monotonic_ns())
        sock.bind("\0" + name)
        notify = "@" + name
    else:
        notify = os.path.join(tmp, "notify")
        sock.bind(notify)
    env = dict(os.environ, NOTIFY_SOCKET=notify)
    log = open(os.path.join(tmp, "log"), "w")
    p = subprocess.Popen([sumcastd, "-c", conf], env=env, stdout=log, stderr=subprocess.STDOUT)
    seen = []
    kind = "abstract" if abstract else "path"
    try:
        ready = wait_for(sock, "READY", time.monotonic() + TIMEOUT, seen)
        if not check(ready is not None, "%s: no READY=1 within %.0f s" % (kind, TIMEOUT)):
            return
        # At READY the endpoints must be up: port file, control port, /healthz.
        try:
            with open(ports) as f:
                kv = dict(x.split("=") for x in f.read().split())
            ctl, http = int(kv["control"]), int(kv["http"])
        except (OSError, KeyError, ValueError) as e:
            check(False, "%s: port file not written before READY: %s" % (kind, e))
            return
        check(http_status(http, "/healthz") == 200, "%s: /healthz not 200 at READY" % kind)
        try:
            socket.create_connection(("127.0.0.1", ctl), timeout=2).close()
            ok = True
        except OSError:
            ok = False
        check(ok, "%s: control port %d not accepting at READY" % (kind, ctl))
        check(http_status(http, "/metrics") == 200, "%s: /metrics not 200 at READY" % kind)
        check(ready[1].get("READY") == "1", "%s: READY=%s" % (kind, ready[1].get("READY")))
        check("STATUS" in ready[1] and ready[1]["STATUS"],
              "%s: READY without a STATUS= line: %r" % (kind, ready[2]))
        print("%s: READY with STATUS=%s" % (kind, ready[1].get("STATUS")))

        # SIGHUP: RELOADING=1, then READY=1.
        os.kill(p.pid, signal.SIGHUP)
        first = recv_msg(sock, time.monotonic() + TIMEOUT)
        if check(first is not None, "%s: nothing after SIGHUP" % kind):
            seen.append(first)
            check(first[1].get("RELOADING") == "1",
                  "%s: first message after SIGHUP is %r, want RELOADING=1" % (kind, first[2]))
            again = first if "READY" in first[1] else wait_for(sock, "READY",
                                                                time.monotonic() + TIMEOUT, seen)
            check(again is not None and again[1].get("READY") == "1",
                  "%s: no READY=1 after RELOADING=1" % kind)
            if again is not None:
                print("%s: SIGHUP -> RELOADING=1 ... READY=1 STATUS=%s"
                      % (kind, again[1].get("STATUS")))
        check(http_status(http, "/healthz") == 200, "%s: /healthz not 200 after reload" % kind)

        # SIGTERM: STOPPING=1, then exit 0.
        os.kill(p.pid, signal.SIGTERM)
        stop = wait_for(sock, "STOPPING", time.monotonic() + TIMEOUT, seen)
        check(stop is not None and stop[1].get("STOPPING") == "1",
              "%s: no STOPPING=1 after SIGTERM" % kind)
        try:
            rc = p.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            rc = None
        check(rc == 0, "%s: exit status %r after SIGTERM, want 0" % (kind, rc))
        if stop is not None:
            print("%s: SIGTERM -> STOPPING=1 (STATUS=%s), exit %r"
                  % (kind, stop[1].get("STATUS"), rc))
        for pid, _, text in seen:
            check(pid == p.pid, "%s: message %r from pid %r, not the main pid %d "
                  "(NotifyAccess=main would drop it)" % (kind, text, pid, p.pid))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        log.close()
        if failures:
            with open(os.path.join(tmp, "log")) as f:
                sys.stderr.write("--- daemon log (%s)\n%s" % (kind, f.read()[-4000:]))
        sock.close()
        for f in ("ports", "notify", "log", "sumcastd.conf"):
            try:
                os.unlink(os.path.join(tmp, f))
            except OSError:
                pass
        os.rmdir(tmp)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 1
    for abstract in (True, False):
        run(sys.argv[1], abstract)
    print("test_notify: %s" % ("FAILED: %d" % len(failures) if failures else "passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
