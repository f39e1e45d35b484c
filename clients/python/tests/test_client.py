"""The async and sync clients against the real binary: every method, an error of each
kind, pipelining, cancellation, shutdown."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import time

import pytest

import convo
from conftest import OPENRPC, arun, children_of, process_gone
from convo import errors

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()


# ---------------------------------------------------------------------------- the method set


def test_every_openrpc_method_has_a_client_method_and_back() -> None:
    doc = json.loads(OPENRPC.read_text())
    documented = {m["name"] for m in doc["methods"]}
    assert documented == set(convo.METHODS), documented ^ set(convo.METHODS)
    for name in convo.METHODS.values():
        assert callable(getattr(convo.AsyncClient, name)), name
        assert callable(getattr(convo.Client, name)), name


@arun
async def test_capabilities_list_the_client_methods() -> None:
    async with convo.AsyncClient(store="memory") as c:
        assert c.server_info["name"] == "convo"
        assert c.protocol_version == 1
        assert set(c.capabilities["methods"]) == set(convo.METHODS)
        assert c.capabilities["framing"] == "lsp"
        assert c.capabilities["store"] == "memory"


# ---------------------------------------------------------------------------- every method


@arun
async def test_every_method_async() -> None:
    async with convo.AsyncClient(store="memory") as c:
        info = await c.create("demo", system="Be brief.", cwd="/repo", title="t", metadata={"k": 1})
        assert info["session_id"] == "demo" and info["revision"] == 0 and info["cwd"] == "/repo"
        gen = await c.create()
        assert len(gen["session_id"]) == 36
        assert (await c.get("demo"))["title"] == "t"

        r = await c.add_user("demo", "look", [PNG])
        assert r["index"] == 0 and r["revision"] == 1
        calls = [{"id": "a", "name": "ls", "arguments": {"p": 1}}, {"id": "b", "name": "cat", "arguments": "{}"}]
        r = await c.add_assistant("demo", "Reading.", calls)
        assert r["index"] == 1
        r = await c.add_tool_result("demo", "b", "B")
        assert r["revision"] == 3
        hist = await c.history("demo")
        assert hist["repaired"] == 1 and hist["messages"][-1]["tool_call_id"] == "a"
        assert hist["messages"][-1]["metadata"] == {"synthetic": True}
        raw = await c.history("demo", repair=False)
        assert len(raw["messages"]) == 3
        found = await c.search("read*")
        assert [(h["session_id"], h["index"], h["snippet"]) for h in found["hits"]] == [("demo", 1, "[Reading]")]
        page = await c.history("demo", offset=1, limit=1)
        assert [m["index"] if "index" in m else m["role"] for m in page["messages"]] == ["assistant"]
        r = await c.add_tool_result("demo", "a", "A")
        r = await c.add_message(
            "demo", {"role": "user", "content": [{"type": "text", "text": "next"}], "metadata": {"m": 2}}
        )
        r = await c.add_messages(
            "demo",
            [
                {"role": "assistant", "content": None, "tool_calls": [{"id": "t1", "name": "test", "input": {}}]},
                {"role": "tool", "tool_call_id": "t1", "content": "ok"},
                {"role": "assistant", "content": "Done."},
            ],
        )
        assert len(r["message_ids"]) == 3
        n = 123456789012345678901234567890
        await c.add_user("demo", "big", expected_revision=r["revision"])
        info = await c.update("demo", title="Edits", cwd=None, metadata={"n": n, "z": 1, "a": 2})
        assert info["cwd"] is None and info["title"] == "Edits" and info["system"] == "Be brief."
        assert list(info["metadata"]) == ["n", "z", "a"] and info["metadata"]["n"] == n

        listing = await c.list(limit=1)
        assert len(listing["sessions"]) == 1 and listing["next_cursor"]
        ids = [s["session_id"] async for s in c.iter_sessions(page_size=1)]
        assert sorted(ids) == sorted(["demo", gen["session_id"]])

        exp = await c.export("demo", "anthropic_messages")
        assert exp["payload"]["system"] == "Be brief."
        for fmt in ("openai_chat", "gemini_contents"):
            assert "payload" in await c.export("demo", fmt, repair=False)
        assert (await c.validate("demo", "openai_chat"))["violations"] == []
        assert (await c.count_tokens("demo"))["tokens"] > 0
        assert (await c.count_tokens("demo", "anthropic_messages"))["tokens"] > 0

        fork = await c.fork("demo", "demo-alt", at_message_id=hist["messages"][1]["id"])
        assert fork["message_count"] == 2 and fork["forked_from"]["session_id"] == "demo"
        assert (await c.trim("demo", 1))["removed"] > 0
        tr = await c.trim("demo", max_tokens=10_000)
        assert tr["fits"] is True
        d = await c.to_dict("demo")
        assert d["session_id"] == "demo" and all("created_at" in m for m in d["messages"])
        d["session_id"] = "copy"
        imported = await c.from_dict(d)
        assert imported["repaired"] == {"added": 0, "dropped": 0}
        again = await c.from_dict(d, replace=True)
        assert again["revision"] == 1
        body = (await c.export("copy", "anthropic_messages"))["payload"]
        back = await c.from_dict(body, format="anthropic_messages", session_id="from-body")
        assert back["session_id"] == "from-body"
        assert (await c.export("from-body", "anthropic_messages"))["payload"] == body
        rep = await c.from_dict({"messages": [{"role": "tool", "tool_call_id": "x", "content": "?"}]}, repair=True)
        assert rep["repaired"]["dropped"] == 1
        assert (await c.clear("demo-alt"))["removed"] == 2
        assert await c.delete("copy") == {"deleted": True}
        assert not await c.exists("copy") and await c.exists("demo")
        assert await c.shutdown() is None
    assert c.returncode == 0


def test_every_method_sync(client: convo.Client) -> None:
    c = client
    c.create("s", system="sys")
    c.add_user("s", "hi")
    c.add_assistant("s", "", [{"id": "c1", "name": "f", "arguments": {}}])
    c.add_tool_result("s", "c1", "r")
    c.add_message("s", {"role": "assistant", "content": "ok"})
    c.add_messages("s", [{"role": "user", "content": "u"}])
    assert [m["role"] for m in c.messages("s")] == ["user", "assistant", "tool", "assistant", "user"]
    assert c.history("s", limit=2)["messages"][1]["role"] == "assistant"
    assert c.update("s", title="x")["title"] == "x"
    assert c.get("s")["message_count"] == 5
    assert c.list()["sessions"][0]["session_id"] == "s"
    assert [i["session_id"] for i in c.iter_sessions()] == ["s"]
    assert c.fork("s", "f")["message_count"] == 5
    assert c.trim("f", 1)["removed"] == 4
    assert c.clear("f")["removed"] == 1
    first = c.add_user("f", "one")["message_id"]
    c.add_user("f", "two")
    c.add_user("f", "pic", images=[PNG])
    ref = c.history("f", images="ref", offset=2)["messages"][0]["images"][0]["ref"]
    assert c.image(ref) == {"data": PNG, "media_type": "image/png"}
    assert ref in json.dumps(c.to_dict("f", images="ref")) and ref in json.dumps(c.export("f", images="ref"))
    found = c.search("two", session_id="f", limit=1)
    assert [(h["index"], h["role"], h["snippet"]) for h in found["hits"]] == [(1, "user", "[two]")]
    assert found["next_cursor"] is None
    rewound = c.rewind("f", first, archive=True)
    assert rewound["removed"] == 2 and c.get(rewound["archived_session_id"])["message_count"] == 3
    compacted = c.compact(rewound["archived_session_id"], 1, "earlier")
    assert compacted["removed"] == 2 and compacted["summary_message_id"]
    d = c.to_dict("s")
    d["session_id"] = "s2"
    assert c.from_dict(d)["message_count"] == 5
    assert "payload" in c.export("s")
    assert c.validate("s")["violations"] == []
    assert c.count_tokens("s")["tokens"] > 0
    assert c.delete("s2")["deleted"]
    c.create("gone")
    assert c.list(updated_before="2000-01-01T00:00:00Z")["sessions"] == []
    assert c.delete_many(["gone", "ghost"]) == {"deleted": 1}
    assert c.exists("s") and not c.exists("s2")
    assert c.call("session/get", {"session_id": "s"})["session_id"] == "s"
    assert c.initialize()["protocol_version"] == 1


# ---------------------------------------------------------------------------- errors, one of each kind


@arun
async def test_an_error_of_each_kind() -> None:
    async with convo.AsyncClient(store="memory") as c:
        await c.create("e")

        # -32700: a frame that is not JSON; convo answers with id null.
        c._write_raw(b"Content-Length: 5\r\n\r\n{bad}")
        await c.get("e")  # ordered after it, so its reply has arrived
        assert c.stray_errors, "no parse error came back"
        assert isinstance(errors.error_from_response(c.stray_errors[-1]), convo.ParseError)

        with pytest.raises(convo.MethodNotFound) as ei:
            await c.request("session/nope", {})
        assert ei.value.code == -32601 and ei.value.kind == "method_not_found"

        with pytest.raises(convo.InvalidParams) as ei:
            await c.add_user("e", "x", ["***not base64***"])
        assert isinstance(ei.value, ValueError) and "invalid_params" in str(ei.value)
        with pytest.raises(ValueError):
            await c.get("bad id with spaces")
        with pytest.raises(convo.InvalidParams):
            await c.add_assistant("e", "")

        with pytest.raises(convo.SessionNotFound) as ei:
            await c.get("missing")
        assert ei.value.code == 1001 and isinstance(ei.value, LookupError)
        with pytest.raises(convo.SessionExists):
            await c.create("e")
        with pytest.raises(convo.RevisionConflict) as ei:
            await c.add_user("e", "x", expected_revision=41)
        assert ei.value.current_revision == 0

        await c.add_user("e", "go")
        await c.add_assistant("e", None, [{"id": "c", "name": "f", "arguments": {}}])
        await c.add_tool_result("e", "c", "ok")
        with pytest.raises(convo.InvalidSequence) as ei:
            await c.add_tool_result("e", "c", "again")
        assert ei.value.reason == "duplicate_result" and isinstance(ei.value, ValueError)
        with pytest.raises(convo.InvalidSequence) as ei:
            await c.add_tool_result("e", "zz", "?")
        assert ei.value.reason == "unknown_tool_call_id"
        await c.add_user("e", "moved on")
        with pytest.raises(convo.InvalidSequence) as ei:
            await c.add_tool_result("e", "c", "late")
        assert ei.value.reason == "no_pending_tool_calls" and ei.value.tool_call_id == "c"

        with pytest.raises(convo.MessageNotFound):
            await c.fork("e", at_message_id="00000000-0000-7000-8000-000000000000")

        with pytest.raises(convo.RuntimeFailed) as ei:
            await c.run("e", "hello?")
        assert ei.value.reason == "no_runtime"

        c.set_runtime(lambda p: {"text": "not json"})
        with pytest.raises(convo.InvalidOutput) as ei:
            await c.json("e", "give", {"type": "object"})
        assert ei.value.text == "not json" and isinstance(ei.value, ValueError)

        # -32800: a request cancelled by $/cancelRequest while it waits for the host.
        gate = asyncio.Event()

        async def slow(params: dict) -> dict:
            await gate.wait()
            return {"text": "late"}

        c.set_runtime(slow)
        pending = c.send("session/run", {"session_id": "e", "input": "wait"})
        await asyncio.sleep(0.1)
        pending.cancel()
        with pytest.raises(convo.RequestCancelled) as ei:
            await pending
        assert ei.value.code == -32800 and ei.value.message_ids == []

        # -32600: any request after shutdown.
        await c.shutdown()
        with pytest.raises(convo.InvalidRequest):
            await c.get("e")

    # 1005: a frame over --max-message-bytes.
    async with convo.AsyncClient(store="memory", args=["--max-message-bytes", "2048"]) as c:
        await c.create("big")
        with pytest.raises(convo.TooLarge) as ei:
            await c.add_user("big", "x" * 4096)
        assert ei.value.code == 1005
        assert (await c.get("big"))["message_count"] == 0

    # -32603 cannot be provoked on a bug-free server: the mapping is all there is to test.
    err = errors.error_from_response({"code": -32603, "message": "internal error: boom"})
    assert isinstance(err, convo.InternalError) and err.kind == "internal_error"
    unknown = errors.error_from_response({"code": 4242, "message": "m", "data": {"kind": "new_kind"}})
    assert type(unknown) is convo.ConvoError and unknown.kind == "new_kind"


def test_storage_unavailable_under_a_file_size_limit(tmp_path: pathlib.Path, convo_bin: str) -> None:
    wrapper = tmp_path / "convo-limited"
    wrapper.write_text(f'#!/usr/bin/env bash\nulimit -f 200\nexec {convo_bin!s} "$@"\n')
    wrapper.chmod(0o755)
    db = tmp_path / "db.sqlite"
    with convo.Client(binary=wrapper, store=f"sqlite:{db}", stderr=subprocess.DEVNULL) as c:
        c.create("s")
        with pytest.raises(convo.StorageUnavailable) as ei:
            for _ in range(20):
                c.add_user("s", "x" * 60_000)
        assert ei.value.code == 1006
        before = c.get("s")["message_count"]
        with pytest.raises(convo.StorageUnavailable):
            c.add_user("s", "y" * 300_000)
        assert c.get("s")["message_count"] == before  # nothing half-applied; still serving


def test_every_code_has_its_class() -> None:
    codes = {e["code"] for e in json.loads(OPENRPC.read_text())["components"]["errors"].values()}
    assert codes >= {-32700, -32600, -32601, -32602, -32603, -32800, *range(1001, 1011)}
    assert set(errors.ERROR_CLASSES) == codes
    for code, cls in errors.ERROR_CLASSES.items():
        assert issubclass(cls, convo.ConvoError) and cls.code == code
        assert getattr(convo, cls.__name__) is cls and cls.__name__ in errors.__all__
    for cls in (convo.InvalidSequence, convo.InvalidParams, convo.InvalidOutput):
        assert issubclass(cls, ValueError)


# ---------------------------------------------------------------------------- pipelining


@arun
async def test_pipelined_concurrent_calls_keep_each_sessions_order() -> None:
    async with convo.AsyncClient(store="memory") as c:
        sids = [f"p{i}" for i in range(8)]
        await asyncio.gather(*(c.create(s) for s in sids))
        tasks = [asyncio.ensure_future(c.add_user(s, f"{s}-{k}")) for k in range(60) for s in sids]
        await asyncio.sleep(0)
        assert len(c._pending) > 100, "requests were not in flight together"
        results = await asyncio.gather(*tasks)
        assert len(results) == 480
        for s in sids:
            texts = [m["content"] for m in await c.messages(s)]
            assert texts == [f"{s}-{k}" for k in range(60)]
            assert (await c.get(s))["revision"] == 60


@arun
async def test_a_slow_request_does_not_stall_others() -> None:
    gate = asyncio.Event()

    async def runtime(params: dict) -> dict:
        await gate.wait()
        return {"text": "finally"}

    async with convo.AsyncClient(store="memory", runtime=runtime) as c:
        await c.create("slow")
        await c.create("fast")
        slow = asyncio.ensure_future(c.run("slow", "think hard"))
        await asyncio.sleep(0.05)
        for i in range(20):
            await c.add_user("fast", f"m{i}")
        await c.add_user("slow", "meanwhile")  # the session is not held while the host works
        assert not slow.done()
        gate.set()
        with pytest.raises(convo.RevisionConflict) as ei:  # the session changed meanwhile
            await slow
        assert ei.value.response["text"] == "finally"


def test_sync_client_from_many_threads(client: convo.Client) -> None:
    from concurrent.futures import ThreadPoolExecutor

    for i in range(4):
        client.create(f"t{i}")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: client.add_user(f"t{k % 4}", str(k)), range(200)))
    assert sum(client.get(f"t{i}")["message_count"] for i in range(4)) == 200


# ---------------------------------------------------------------------------- cancellation


@arun
async def test_task_cancel_sends_cancel_request_and_reaches_the_runtime() -> None:
    started = asyncio.Event()
    runtime_cancelled = asyncio.Event()

    async def runtime(params: dict) -> dict:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            runtime_cancelled.set()  # convo sent $/cancelRequest for its convo:N request
            raise
        return {"text": "never"}

    async with convo.AsyncClient(store="memory", runtime=runtime) as c:
        await c.create("s")
        task = asyncio.ensure_future(c.run("s", "long question"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(runtime_cancelled.wait(), 5)
        assert (await c.get("s"))["message_count"] == 0  # nothing appended
        # wait_for is a cancellation too
        started.clear()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(c.run("s", "again"), 0.2)
        assert (await c.get("s"))["message_count"] == 0
        assert not c._pending


@arun
async def test_cancelled_stream_keeps_its_draft() -> None:
    said = asyncio.Event()

    async def runtime(params: dict):
        yield "partial answer"
        said.set()
        await asyncio.sleep(30)
        yield "never"

    async with convo.AsyncClient(store="memory", runtime=runtime) as c:
        await c.create("s")
        pending = c.send("session/stream", {"session_id": "s", "input": "tell me"})
        await said.wait()
        # The draft is saved at least every 250 ms; 30 s is a deadline for a busy machine.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            draft = (await c.history("s", include_draft=True))["draft"]
            if draft and len(draft["messages"]) == 2 and draft["messages"][1]["content"]:
                break
            await asyncio.sleep(0.05)
        assert draft["messages"][1]["content"] == "partial answer"
        pending.cancel()
        with pytest.raises(convo.RequestCancelled) as ei:
            await pending
        assert len(ei.value.message_ids) == 2
        msgs = await c.messages("s", repair=False)
        assert msgs[1]["content"] == "partial answer"
        assert msgs[1]["metadata"]["partial"] is True and msgs[1]["metadata"]["reason"] == "cancelled"


def test_sync_timeout_cancels(client: convo.Client) -> None:
    import concurrent.futures
    import threading

    gate = threading.Event()

    def runtime(params: dict) -> dict:
        gate.wait(10)
        return {"text": "late"}

    client.set_runtime(runtime)
    client.create("s")
    with pytest.raises(concurrent.futures.TimeoutError):
        client.call("session/run", {"session_id": "s", "input": "q"}, timeout=0.3)
    time.sleep(0.5)  # convo ends the run and forgets its runtime request...
    gate.set()  # ...so this late answer is ignored
    time.sleep(0.2)
    assert client.get("s")["message_count"] == 0


# ---------------------------------------------------------------------------- shutdown


@arun
async def test_async_close_leaves_no_child() -> None:
    async with convo.AsyncClient(store="memory") as c:
        pid = c.pid
        assert pid is not None and not process_gone(pid)
        assert pid in children_of(os.getpid())
    assert c.returncode == 0
    assert process_gone(pid) and pid not in children_of(os.getpid())
    with pytest.raises(convo.ConnectionClosed):
        await c.get("x")
    assert await c.close() == 0  # twice is fine


def test_sync_close_leaves_no_child() -> None:
    c = convo.Client(store="memory")
    pid = c.pid
    assert pid in children_of(os.getpid())
    assert c.close() == 0
    assert process_gone(pid)
    assert pid not in children_of(os.getpid())
    assert not c._thread.is_alive()  # the loop thread is gone too


@arun
async def test_a_child_that_dies_fails_pending_calls() -> None:
    gate = asyncio.Event()

    async def runtime(params: dict) -> dict:
        await gate.wait()
        return {"text": "x"}

    async with convo.AsyncClient(store="memory", runtime=runtime) as c:
        await c.create("s")
        task = asyncio.ensure_future(c.run("s", "q"))
        await asyncio.sleep(0.1)
        c._transport.kill()
        with pytest.raises(convo.ConnectionClosed):
            await task
    assert process_gone(c.pid)


HOST = textwrap.dedent(
    """
    import sys, time, convo
    c = convo.Client(store="memory")
    print(c.pid, flush=True)
    if sys.argv[1] == "hang":
        time.sleep(60)
    # "exit": leave without close(); atexit shuts the child down
    """
)


@pytest.mark.parametrize("how", ["exit", "killed"])
def test_the_child_goes_when_the_host_goes(how: str) -> None:
    env = dict(os.environ)
    proc = subprocess.Popen(
        [sys.executable, "-c", HOST, "hang" if how == "killed" else "exit"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    if how == "killed":
        proc.kill()  # SIGKILL: no atexit; the child sees end of input and exits
    proc.wait(10)
    deadline = time.monotonic() + 10
    while not process_gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_gone(child)


def test_a_blocking_call_fails_when_the_child_dies() -> None:
    import threading

    gate = threading.Event()
    c = convo.Client(store="memory", runtime=lambda p: gate.wait(5) and {"text": "x"})
    try:
        c.create("s")
        threading.Timer(0.2, lambda: os.kill(c.pid, 9)).start()
        with pytest.raises(convo.ConnectionClosed):
            c.run("s", "q")
        with pytest.raises(convo.ConnectionClosed):
            c.get("s")
    finally:
        gate.set()
        c.close()
    assert process_gone(c.pid)


@arun
async def test_calls_after_the_child_exited_fail_at_once() -> None:
    async with convo.AsyncClient(store="memory") as c:
        c._transport.kill()
        await asyncio.wait_for(asyncio.shield(c._protocol.exited), 5)
        for _ in range(100):
            if c._protocol.eof:
                break
            await asyncio.sleep(0.01)
        with pytest.raises(convo.ConnectionClosed):
            await asyncio.wait_for(c.get("x"), 5)
