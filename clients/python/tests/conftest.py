"""Fixtures: every test talks to a real convo binary.

The binary is the one ``convo.find_convo_bin()`` finds: ``CONVO_BINARY`` when set (fast
iterations against a prebuilt server), else the one the installed wheel put in the
environment's scripts folder (what ``clients/python/test.sh`` checks).
"""

from __future__ import annotations

import asyncio
import functools
import pathlib
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

import convo

REPO = pathlib.Path(__file__).resolve().parents[3]
OPENRPC = REPO / "protocol" / "openrpc.json"


def arun(fn: Any) -> Any:
    """Run an async test function with asyncio.run (no plugin needed)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(asyncio.wait_for(fn(*args, **kwargs), 60))

    return wrapper


@pytest.fixture(scope="session")
def convo_bin() -> str:
    return convo.find_convo_bin()


@pytest.fixture
def client() -> Iterator[convo.Client]:
    with convo.Client(store="memory") as c:
        yield c


@pytest.fixture
def default_client() -> Iterator[convo.Client]:
    """A memory-store client made the default of the drop-in Session classes."""
    c = convo.Client(store="memory")
    previous = convo.set_default_client(c)
    try:
        yield c
    finally:
        convo.set_default_client(previous)
        c.close()


def process_gone(pid: int) -> bool:
    """True when no process has this pid (or only a zombie that is being reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state in ("Z", "X")
    except FileNotFoundError:
        return True


def children_of(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(x) for x in out.stdout.split()]
