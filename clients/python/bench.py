#!/usr/bin/env python3
"""Per-call overhead of the Python client against raw pipes.

Each variant sends ``session/get`` one call at a time (send, wait for the reply) to a
fresh ``convo --store memory`` and records each call's round trip; the overhead is the
difference of the medians against the raw variant, which writes LSP frames to the child's
stdin and reads the replies from its stdout with blocking reads and no client at all.

    python clients/python/bench.py [--calls 3000]

The binary is the one the client finds (``CONVO_BINARY``, else the installed wheel's).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import time

import convo


def raw_pipes(binary: str, calls: int, warmup: int) -> list[float]:
    proc = subprocess.Popen(
        [binary, "--store", "memory", "--framing", "lsp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        bufsize=0,
    )
    assert proc.stdin is not None and proc.stdout is not None
    out = proc.stdout
    buf = b""

    def call(rid: int, method: str, params: dict) -> dict:
        nonlocal buf
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
        proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)  # type: ignore[union-attr]
        while b"\r\n\r\n" not in buf:
            buf += out.read(65536)
        head, _, buf = buf.partition(b"\r\n\r\n")
        n = int(head.split(b":")[1])
        while len(buf) < n:
            buf += out.read(65536)
        msg, buf = buf[:n], buf[n:]
        return json.loads(msg)

    call(0, "session/create", {"session_id": "bench"})
    times = []
    for i in range(warmup + calls):
        t = time.perf_counter()
        reply = call(i + 1, "session/get", {"session_id": "bench"})
        dt = time.perf_counter() - t
        assert "result" in reply
        if i >= warmup:
            times.append(dt)
    proc.stdin.close()
    proc.wait()
    return times


async def async_client(calls: int, warmup: int) -> list[float]:
    async with convo.AsyncClient(store="memory") as c:
        await c.create("bench")
        times = []
        for i in range(warmup + calls):
            t = time.perf_counter()
            await c.get("bench")
            dt = time.perf_counter() - t
            if i >= warmup:
                times.append(dt)
    return times


def sync_client(calls: int, warmup: int) -> list[float]:
    with convo.Client(store="memory") as c:
        c.create("bench")
        times = []
        for i in range(warmup + calls):
            t = time.perf_counter()
            c.get("bench")
            dt = time.perf_counter() - t
            if i >= warmup:
                times.append(dt)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--warmup", type=int, default=300)
    args = ap.parse_args()
    binary = convo.find_convo_bin()
    raw = statistics.median(raw_pipes(binary, args.calls, args.warmup))
    aio = statistics.median(asyncio.run(async_client(args.calls, args.warmup)))
    blk = statistics.median(sync_client(args.calls, args.warmup))
    us = 1e6
    print(f"binary: {binary}")
    print(f"median round trip of session/get over {args.calls} sequential calls:")
    print(f"  raw pipes     {raw * us:8.1f} us")
    print(f"  AsyncClient   {aio * us:8.1f} us   overhead {(aio - raw) * us:+7.1f} us/call")
    print(f"  Client (sync) {blk * us:8.1f} us   overhead {(blk - raw) * us:+7.1f} us/call")


if __name__ == "__main__":
    main()
