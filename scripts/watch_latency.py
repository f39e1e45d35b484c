#!/usr/bin/env python3
"""Measures watching across processes (issue 12) for one convo binary: the median time
from a commit in process A (its reply) to the `session/changed` notification in process
B on the same SQLite file, and the CPU a subscribed, idle process uses over 10 s.

usage: scripts/watch_latency.py BINARY
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def spawn(binary, db):
    return subprocess.Popen([binary, "--store", f"sqlite:{db}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, bufsize=0)


def send(p, i, method, params):
    p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(binary):
    with tempfile.TemporaryDirectory() as d:
        db = f"{d}/s.db"
        a, b = spawn(binary, db), spawn(binary, db)
        send(a, 0, "session/create", {"session_id": "w"})
        a.stdout.readline()
        send(b, 0, "session/subscribe", {"session_id": "w"})
        b.stdout.readline()
        seen = {}

        def read_b():
            for line in b.stdout:
                n = json.loads(line)
                if n.get("method") == "session/changed":
                    seen[n["params"]["revision"]] = time.monotonic()

        threading.Thread(target=read_b, daemon=True).start()
        committed = {}
        for i in range(1, 201):
            send(a, i, "session/add_user", {"session_id": "w", "text": "x"})
            reply = json.loads(a.stdout.readline())
            committed[reply["result"]["revision"]] = time.monotonic()
            time.sleep(0.02)
        time.sleep(0.5)
        # A change coalesced into a later one is told by that one.
        lat = [min(t2 for r2, t2 in seen.items() if r2 >= r) - t for r, t in committed.items()]
        print(f"commit in A -> session/changed in B: median {statistics.median(lat) * 1000:.1f} ms, "
              f"p90 {sorted(lat)[int(len(lat) * 0.9)] * 1000:.1f} ms "
              f"({len(seen)} notifications for {len(committed)} changes)")
        before = cpu_seconds(b.pid)
        time.sleep(10)
        used = cpu_seconds(b.pid) - before
        print(f"idle subscribed process: {used * 1000:.0f} ms of CPU in 10 s ({used / 10 * 100:.2f}%)")
        for p in (a, b):
            p.stdin.close()
            p.wait()


if __name__ == "__main__":
    main(sys.argv[1])
