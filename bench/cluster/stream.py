#!/usr/bin/env python3
"""Minimal TCP stream (iperf-like) for bench/cluster: python3 stdlib only.

server: accept connections for --seconds, discard what arrives, print bytes received.
client: connect, send for --seconds, print bytes sent and Mbit/s.
Both stop by themselves after --seconds (plus a short grace), whatever the peer does.
"""
import argparse, socket, sys, threading, time

def server(a):
    end = time.monotonic() + a.seconds
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((a.bind, a.port)); ls.listen(16); ls.settimeout(0.2)
    total = [0]
    def sink(c):
        c.settimeout(0.5)
        buf = bytearray(1 << 20)
        while time.monotonic() < end:
            try:
                n = c.recv_into(buf)
            except socket.timeout:
                continue
            except OSError:
                break
            if n == 0:
                break
            total[0] += n
        c.close()
    threads = []
    while time.monotonic() < end and len(threads) < 64:
        try:
            c, _ = ls.accept()
        except socket.timeout:
            continue
        t = threading.Thread(target=sink, args=(c,), daemon=True); t.start(); threads.append(t)
    for t in threads:
        t.join(timeout=1)
    print(f"received {total[0]} bytes")

def client(a):
    s = None
    deadline = time.monotonic() + 5
    while s is None:
        try:
            s = socket.create_connection((a.host, a.port), timeout=1)
        except OSError:
            if time.monotonic() > deadline:
                sys.exit("cannot connect")
            time.sleep(0.1)
    s.settimeout(2)
    buf = b"\0" * (1 << 20)
    sent, t0 = 0, time.monotonic()
    end = t0 + a.seconds
    while time.monotonic() < end:
        try:
            sent += s.send(buf)
        except OSError:
            break
    dt = time.monotonic() - t0
    s.close()
    print(f"sent {sent} bytes in {dt:.2f} s = {sent * 8 / dt / 1e6:.1f} Mbit/s")

p = argparse.ArgumentParser()
p.add_argument("role", choices=["server", "client"])
p.add_argument("--bind", default="0.0.0.0"); p.add_argument("--host")
p.add_argument("--port", type=int, default=5201)
p.add_argument("--seconds", type=float, default=5)
a = p.parse_args()
server(a) if a.role == "server" else client(a)
