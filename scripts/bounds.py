#!/usr/bin/env python3
"""Measures the resource bounds of issue 9 for one convo binary, as a client would see
them over pipes (figures for the closing note and BENCHMARKS.md; not a test):

  1. peak RSS while 700 history requests of a 2,000 x 1 KB session go unread for 9 s;
  2. how long a session/get on another session waits behind count_tokens of a 20 MB
     message (and the count's own time);
  3. threads and open descriptors after 1,000 concurrent history reads on 1,000 SQLite
     sessions.

usage: scripts/bounds.py BINARY
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time


def status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def req(i, method, params):
    return (json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode()


def spawn(binary, *args):
    return subprocess.Popen([binary, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def slow_reader(binary):
    p = spawn(binary, "--store", "memory")
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": "x" * 1000} for i in range(2000)]
    p.stdin.write(req(0, "session/create", {"session_id": "big"}))
    p.stdin.write(req(1, "session/add_messages", {"session_id": "big", "messages": msgs}))
    p.stdin.flush()

    def send():
        for i in range(2, 702):
            p.stdin.write(req(i, "session/history", {"session_id": "big"}))
        p.stdin.flush()

    t = threading.Thread(target=send)
    t.start()
    time.sleep(9)
    peak = status(p.pid, "VmHWM") // 1024
    n = sum(1 for _ in zip(range(702), p.stdout))
    t.join()
    p.stdin.close()
    p.wait()
    return f"peak RSS {peak} MiB with 700 unread replies ({n} replies read afterwards)"


def stall(binary):
    p = spawn(binary, "--store", "memory")
    text = "lorem ipsum dolor sit amet, consectetur adipiscing elit " * (20 * 1024 * 1024 // 57)
    for i, (m, prm) in enumerate([
        ("session/create", {"session_id": "heavy"}),
        ("session/create", {"session_id": "light"}),
        ("session/add_user", {"session_id": "heavy", "text": text}),
    ]):
        p.stdin.write(req(i, m, prm))
        p.stdin.flush()
        p.stdout.readline()
    start = time.monotonic()
    p.stdin.write(req(10, "session/count_tokens", {"session_id": "heavy"}))
    p.stdin.write(req(11, "session/get", {"session_id": "light"}))
    p.stdin.flush()
    seen = {}
    for _ in range(2):
        reply = json.loads(p.stdout.readline())
        seen[reply["id"]] = time.monotonic() - start
    p.stdin.close()
    p.wait()
    return f"session/get on another session answered after {seen[11]:.3f} s; count_tokens of 20 MB took {seen[10]:.1f} s"


def reader_pool(binary):
    with tempfile.TemporaryDirectory() as d:
        p = spawn(binary, "--store", f"sqlite:{d}/s.db")
        for i in range(1000):
            p.stdin.write(req(i, "session/create", {"session_id": f"s{i}"}))
        p.stdin.flush()
        for _ in range(1000):
            p.stdout.readline()
        for i in range(1000):
            p.stdin.write(req(1000 + i, "session/history", {"session_id": f"s{i}"}))
        p.stdin.flush()
        for _ in range(1000):
            p.stdout.readline()
        threads, fds = status(p.pid, "Threads"), len(os.listdir(f"/proc/{p.pid}/fd"))
        rss = status(p.pid, "VmRSS") // 1024
        p.stdin.close()
        p.wait()
        return f"after 1,000 concurrent reads: {threads} threads, {fds} descriptors, RSS {rss} MiB"


if __name__ == "__main__":
    binary = sys.argv[1]
    for name, f in [("1 slow reader", slow_reader), ("2 token count", stall), ("3 reader pool", reader_pool)]:
        print(f"{name}: {f(binary)}", flush=True)
