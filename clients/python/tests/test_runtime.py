"""The host runtime: convo's runtime/run and runtime/stream answered by this client."""

from __future__ import annotations

import asyncio
import threading

import pytest

import convo
from conftest import arun


@arun
async def test_run_with_an_async_runtime_gets_the_history_and_exact_params() -> None:
    seen: list[dict] = []

    async def runtime(params: dict) -> dict:
        seen.append(params)
        return {"text": "4", "usage": {"input_tokens": 12, "output_tokens": 1}, "model": "m-1", "stop_reason": "end"}

    async with convo.AsyncClient(store="memory", runtime=runtime) as c:
        await c.create("s", system="Be exact.")
        await c.add_user("s", "hi")
        await c.add_assistant("s", "hello")
        r = await c.run("s", "What is 2+2?", temperature=0, max_tokens=5, metadata={"trace": "t1"})
        assert r["text"] == "4" and r["tool_calls"] is None and len(r["message_ids"]) == 2
        p = seen[0]
        assert p["purpose"] == "run" and p["system"] == "Be exact." and p["session_id"] == "s"
        assert p["temperature"] == 0 and p["max_tokens"] == 5  # 0 stays 0
        assert [m["content"] for m in p["messages"]] == ["hi", "hello", "What is 2+2?"]
        msgs = await c.messages("s")
        assert msgs[-2]["metadata"] == {"trace": "t1"}
        assert msgs[-1]["metadata"]["model"] == "m-1" and msgs[-1]["metadata"]["usage"]["input_tokens"] == 12


def test_run_with_a_blocking_function_runtime_and_tool_calls(client: convo.Client) -> None:
    calls = [{"id": "c1", "name": "ls", "arguments": {"path": "/"}}]

    def runtime(params: dict) -> dict:
        assert threading.current_thread() is not threading.main_thread()
        return {"text": None, "tool_calls": calls}

    client.set_runtime(runtime)
    client.create("s")
    r = client.run("s", "list /")
    assert r["tool_calls"] == calls and r["text"] is None
    client.add_tool_result("s", "c1", "bin etc")
    assert [m["role"] for m in client.messages("s")] == ["user", "assistant", "tool"]


@arun
async def test_per_session_runtimes_and_payload() -> None:
    async with convo.AsyncClient(store="memory", runtime_format="openai_chat") as c:
        await c.create("a", system="A")
        await c.create("b")
        c.set_runtime(lambda p: {"text": "from a"}, session_id="a")
        c.set_runtime(lambda p: {"text": "default:" + str(p["payload"]["messages"][0]["role"])})
        assert (await c.run("a", "x"))["text"] == "from a"
        assert (await c.run("b", "y"))["text"] == "default:user"
        c.set_runtime(None, session_id="a")
        assert (await c.run("a", "z"))["text"] == "default:system"


@arun
async def test_runtime_errors_are_runtime_failed() -> None:
    def broken(params: dict) -> dict:
        raise RuntimeError("provider is down")

    async with convo.AsyncClient(store="memory", runtime=broken) as c:
        await c.create("s")
        with pytest.raises(convo.RuntimeFailed) as ei:
            await c.run("s", "q")
        assert ei.value.reason == "error" and "provider is down" in str(ei.value.data["error"])
        c.set_runtime(lambda p: {"nonsense": True})
        with pytest.raises(convo.RuntimeFailed) as ei:
            await c.run("s", "q")
        assert ei.value.reason == "invalid_response"
        c.set_runtime(lambda p: asyncio.sleep(5))
        with pytest.raises(convo.RuntimeFailed) as ei:
            await c.run("s", "q", timeout_ms=100)
        assert ei.value.reason == "timeout"
        assert (await c.get("s"))["message_count"] == 0


@arun
async def test_json_with_a_retry() -> None:
    asks: list[dict] = []

    async def runtime(params: dict) -> dict:
        asks.append(params)
        return {"text": '{"n": "two"}' if len(asks) == 1 else '{"n": 2}'}

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    async with convo.AsyncClient(store="memory", runtime=runtime) as c:
        await c.create("s")
        r = await c.json("s", "How many?", schema, retries=1)
        assert r["value"] == {"n": 2}
        assert asks[0]["purpose"] == "json" and asks[0]["response_format"]["schema"] == schema
        assert asks[1]["messages"][-2]["content"] == '{"n": "two"}'  # the rejected answer, then the errors
        assert [m["content"] for m in await c.messages("s")] == ["How many?", '{"n": 2}']


@arun
async def test_stream_sends_deltas_keeps_a_draft_and_stores_the_final_answer() -> None:
    gate = asyncio.Event()

    async def runtime(params: dict):
        assert "stream_id" in params
        yield "Hel"
        yield {"text": "lo"}
        await gate.wait()
        yield convo.Final({"text": "Hello!", "usage": {"output_tokens": 2}})

    async with convo.AsyncClient(store="memory", runtime=runtime) as c:
        await c.create("s")
        task = asyncio.ensure_future(c.stream("s", "greet me"))
        draft = None
        for _ in range(60):
            draft = (await c.history("s", include_draft=True))["draft"]
            if draft and len(draft["messages"]) == 2 and draft["messages"][1]["content"] == "Hello":
                break
            await asyncio.sleep(0.05)
        assert draft is not None and draft["messages"][1]["content"] == "Hello"
        assert (await c.history("s"))["messages"] == []  # a draft is never inside messages
        gate.set()
        r = await task
        assert r["text"] == "Hello!" and r["usage"] == {"output_tokens": 2}
        assert [m["content"] for m in await c.messages("s")] == ["greet me", "Hello!"]


def test_stream_with_a_sync_generator_and_no_final(client: convo.Client) -> None:
    def runtime(params: dict):
        yield "a"
        yield "b"
        yield {"tool_calls": [{"id": "t", "name": "f", "arguments": {}}]}

    client.set_runtime(runtime)
    client.create("s")
    r = client.stream("s", "go")
    assert r["text"] == "ab" and r["tool_calls"][0]["id"] == "t"


def test_a_stream_whose_host_fails_keeps_the_partial_text(client: convo.Client) -> None:
    def runtime(params: dict):
        yield "half an ans"
        raise ConnectionError("provider hung up")

    client.set_runtime(runtime)
    client.create("s")
    with pytest.raises(convo.RuntimeFailed):
        client.stream("s", "q")
    msgs = client.messages("s", repair=False)
    assert msgs[1]["content"] == "half an ans" and msgs[1]["metadata"]["reason"] == "error"
