"""convo's pydantic-ai adapters against the real pydantic-ai (pydantic-ai-slim 2.68.0) and
its own offline model, ``FunctionModel`` (and ``TestModel``): a tool loop with parallel
calls and signed thinking, a second turn, a crash between a call and its result, a reopen
in a new process, deferred tool calls left pending, and the differential runs against a
plain ``message_history`` list and ``InMemoryConversationStore``."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="pydantic-ai is not installed (pip install 'convo[pydantic-ai]')")

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict, InMemoryConversationStore
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

import convo
from conftest import arun
from convo.integrations.pydantic_ai import CANCELLED, ConvoConversationStore, ConvoMessageHistory

FORMATS = ("openai_chat", "openai_responses", "anthropic_messages")
PYTHONPATH = str(pathlib.Path(convo.__file__).resolve().parents[1])


def dump(messages: Any) -> Any:
    return ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")


class Model:
    """A FunctionModel script: parallel calls after signed thinking, then the answer; a
    second question answered directly. Records every request it is sent."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(dump(messages))
        last = messages[-1].parts[-1]
        if isinstance(last, UserPromptPart) and "weather" in str(last.content).lower():
            return ModelResponse(
                parts=[
                    ThinkingPart("Two cities: one call each.", signature="EqRb-sig-1", provider_name="anthropic"),
                    ToolCallPart("weather", {"city": "Paris"}, tool_call_id="toolu_P"),
                    ToolCallPart("weather", {"city": "London"}, tool_call_id="toolu_L"),
                ],
                model_name="claude-test",
            )
        if isinstance(last, ToolReturnPart):
            return ModelResponse(
                parts=[
                    ThinkingPart("Both came back.", signature="EqRb-sig-2", provider_name="anthropic"),
                    TextPart("Sunny in both."),
                ],
                model_name="claude-test",
            )
        return ModelResponse(parts=[TextPart("Pack sunglasses.")], model_name="claude-test")


def make_agent(model: Model) -> Agent[None, Any]:
    agent: Agent[None, Any] = Agent(FunctionModel(model), instructions="Be brief.")

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return agent


QUESTIONS = ("What's the weather in Paris and London?", "What should I pack?")


def assert_valid(client: convo.Client, sid: str) -> None:
    for fmt in FORMATS:
        assert client.validate(sid, fmt)["violations"] == [], fmt


# ---------------------------------------------------------------------------- ConvoMessageHistory


@arun
async def test_message_history_matches_a_plain_list(tmp_path: pathlib.Path) -> None:
    reference_model = Model()
    agent = make_agent(reference_model)
    messages: list[ModelMessage] = []
    for q in QUESTIONS:
        messages = (await agent.run(q, message_history=messages)).all_messages()

    model = Model()
    agent = make_agent(model)
    db = tmp_path / "convo.db"
    with convo.Client(store=f"sqlite:{db}") as client:
        history = ConvoMessageHistory("weather-1", client=client)
        for q in QUESTIONS:
            result = await agent.run(q, message_history=await history.load())
            await history.append(result.new_messages())
        loaded = await history.load()
        # What the model was sent, every request and so the last one, is the same.
        assert len(model.requests) == len(reference_model.requests) == 3
        for mine, theirs in zip(model.requests, reference_model.requests, strict=True):
            assert len(mine) == len(theirs)
        assert strip_times(model.requests[-1]) == strip_times(reference_model.requests[-1])
        # And the history comes back exactly as the framework serialises it.
        assert dump(loaded) == dump(result.all_messages())

        stored = client.history("weather-1", repair=False)["messages"]
        assert [(m["role"], m["content"]) for m in stored] == [
            ("user", QUESTIONS[0]),
            ("assistant", None),
            ("tool", "sunny in Paris"),
            ("tool", "sunny in London"),
            ("assistant", "Sunny in both."),
            ("user", QUESTIONS[1]),
            ("assistant", "Pack sunglasses."),
        ]
        calls = stored[1]
        assert [c["id"] for c in calls["tool_calls"]] == ["toolu_P", "toolu_L"]  # one message, both calls
        assert calls["native"]["format"] == "anthropic_messages"
        assert calls["native"]["body"][0] == {
            "type": "thinking",
            "thinking": "Two cities: one call each.",
            "signature": "EqRb-sig-1",
        }
        assert_valid(client, "weather-1")
        assert client.validate("weather-1", "anthropic_messages", thinking=True)["violations"] == []
        exported = client.export("weather-1", "anthropic_messages")["payload"]["messages"]
        assert exported[1]["content"][0]["signature"] == "EqRb-sig-1"  # replayed as it came
    # From a new process on the same store: equal.
    assert reopen(db, "weather-1") == dump(loaded)


def strip_times(messages: Any) -> Any:
    """A request without its time stamps and run ids (they differ from run to run)."""
    volatile = {"timestamp", "run_id", "conversation_id"}
    if isinstance(messages, list):
        return [strip_times(m) for m in messages]
    if isinstance(messages, dict):
        return {k: strip_times(v) for k, v in messages.items() if k not in volatile}
    return messages


def reopen(db: pathlib.Path, session_id: str) -> Any:
    code = (
        "import asyncio, json, sys\n"
        "from pydantic_ai.messages import ModelMessagesTypeAdapter as A\n"
        "from convo.integrations.pydantic_ai import ConvoMessageHistory\n"
        "h = ConvoMessageHistory(sys.argv[1], store='sqlite:' + sys.argv[2])\n"
        "print(json.dumps(A.dump_python(asyncio.run(h.load()), mode='json')))\n"
        "h.close()\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [PYTHONPATH, os.environ.get("PYTHONPATH")]))}
    out = subprocess.run(
        [sys.executable, "-c", code, session_id, str(db)], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


async def kill(client: convo.Client) -> None:
    assert client.pid is not None
    os.kill(client.pid, signal.SIGKILL)
    for _ in range(100):
        if client.returncode is not None:
            break
        await asyncio.sleep(0.05)
    client.close()


@arun
async def test_a_crash_between_a_call_and_its_result(tmp_path: pathlib.Path) -> None:
    """kill -9 after the calls were stored, before their results: the next run goes on,
    each call answered by a ToolReturnPart with convo's cancellation text."""
    db = tmp_path / "convo.db"
    model = Model()
    agent = make_agent(model)
    first = convo.Client(store=f"sqlite:{db}")
    history = ConvoMessageHistory("crashy", client=first)
    started = await agent.run(QUESTIONS[0])
    await history.append(started.all_messages()[:2])  # the prompt and the calls, no results
    await kill(first)

    with convo.Client(store=f"sqlite:{db}") as second:
        history = ConvoMessageHistory("crashy", client=second)
        loaded = await history.load()
        assert dump(loaded[:2]) == dump(started.all_messages()[:2])
        repaired = loaded[2]
        assert isinstance(repaired, ModelRequest)
        assert [(p.tool_name, p.content, p.tool_call_id) for p in repaired.parts] == [
            ("weather", CANCELLED, "toolu_P"),
            ("weather", CANCELLED, "toolu_L"),
        ]
        # Without the repair pydantic-ai refuses a new prompt ("unprocessed tool calls").
        result = await agent.run(QUESTIONS[1], message_history=loaded)
        assert result.output == "Pack sunglasses."
        await history.append(result)
        again = await history.load()
        # The cancellations are stored now, and read back as the same message.
        assert dump(again[:3]) == dump(loaded)
        assert dump(again[3:]) == dump(result.new_messages())
        stored = second.history("crashy", repair=False)["messages"]
        assert [m["metadata"] for m in stored if m["role"] == "tool"] == [{"synthetic": True}] * 2
        assert_valid(second, "crashy")
    assert reopen(db, "crashy") == dump(again)


@arun
async def test_deferred_calls_are_not_repaired() -> None:
    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if isinstance(messages[-1].parts[-1], UserPromptPart):
            return ModelResponse(
                parts=[
                    ToolCallPart("add", {"a": 1, "b": 2}, tool_call_id="c1"),
                    ToolCallPart("delete_all", {}, tool_call_id="c2"),
                ]
            )
        return ModelResponse(parts=[TextPart("done")])

    agent: Agent[None, Any] = Agent(FunctionModel(script), output_type=[str, DeferredToolRequests])

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    @agent.tool_plain(requires_approval=True)
    def delete_all() -> str:
        return "deleted"

    with convo.Client(store="memory") as client:
        history = ConvoMessageHistory("approvals", client=client)
        paused = await agent.run("clean up")
        assert isinstance(paused.output, DeferredToolRequests)
        await history.append(paused)  # the result: its pending calls are remembered
        loaded = await history.load()
        assert dump(loaded) == dump(paused.all_messages())  # c2 left pending, not cancelled
        resumed = await agent.run(
            message_history=loaded, deferred_tool_results=DeferredToolResults(approvals={"c2": True})
        )
        assert resumed.output == "done"
        await history.append(resumed)
        assert dump(await history.load()) == dump(resumed.all_messages())
        results = [m["content"] for m in client.history("approvals")["messages"] if m["role"] == "tool"]
        assert results == ["3", "deleted"]
        assert_valid(client, "approvals")


@arun
async def test_test_model_and_empty_answers() -> None:
    """TestModel (calls every tool, then answers) and a model that answers nothing: an
    empty response is stored (convo's allow_empty) and comes back equal."""
    agent: Agent[None, Any] = Agent(TestModel())

    @agent.tool_plain
    def ping(n: int) -> str:
        return f"pong {n}"

    with convo.Client(store="memory") as client:
        history = ConvoMessageHistory("test model", client=client)
        result = await agent.run("go", message_history=await history.load())
        await history.append(result.new_messages())
        empty = [ModelRequest(parts=[UserPromptPart("hello?")]), ModelResponse(parts=[])]
        await history.append(empty)
        loaded = await history.load()
        assert dump(loaded) == dump([*result.all_messages(), *empty])
        sid = history.convo_session_id
        assert sid.startswith("pydantic-ai-")
        assert client.history(sid)["messages"][-1]["content"] is None
        warnings = client.export(sid, "openai_chat")["warnings"]
        assert any(w["message"] == "an empty message was left out" for w in warnings)


# ---------------------------------------------------------------------------- ConvoConversationStore


async def two_turns_with(store: Any, cid: str) -> tuple[Model, Conversation]:
    model = Model()
    agent = make_agent(model)
    for q in QUESTIONS:
        conversation = await store.load(cid) or Conversation(conversation_id=cid)
        result = await agent.run(q, conversation=conversation)
        await store.save(result)
    loaded = await store.load(cid)
    assert loaded is not None
    return model, loaded


@arun
async def test_conversation_store_matches_the_in_memory_store(tmp_path: pathlib.Path) -> None:
    ref_model, ref = await two_turns_with(InMemoryConversationStore(), "weather")
    db = tmp_path / "convo.db"
    with convo.Client(store=f"sqlite:{db}") as client:
        store = ConvoConversationStore(client=client)
        model, mine = await two_turns_with(store, "weather")
        assert strip_times(model.requests[-1]) == strip_times(ref_model.requests[-1])
        assert strip_times(dump(mine.messages)) == strip_times(dump(ref.messages))
        assert mine.usage == ref.usage
        records = await store.list_conversations()
        assert [r.conversation_id for r in records] == ["weather"]
        assert_valid(client, "weather")
        assert [m["role"] for m in client.history("weather")["messages"]] == [
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
            "user",
            "assistant",
        ]
    # A new process (a new convo child, a new store) loads the same conversation.
    with convo.Client(store=f"sqlite:{db}") as client:
        again = await ConvoConversationStore(client=client).load("weather")
        assert again is not None
        assert dump(again.messages) == dump(mine.messages)
        assert again.revision == mine.revision and again.usage == mine.usage


@arun
async def test_conversation_store_revisions_branches_and_forks() -> None:
    with convo.Client(store="memory") as client:
        store = ConvoConversationStore(client=client)
        _, conversation = await two_turns_with(store, "c")
        stale = await store.load("c")
        assert stale is not None
        # A save over a copy loaded before another save is convo's 1003: ConversationConflict.
        agent = make_agent(Model())
        await store.save(await agent.run("What should I pack?", conversation=conversation))
        with pytest.raises(ConversationConflict):
            await store.save(await agent.run("What should I pack?", conversation=stale))
        with pytest.raises(ConversationConflict):
            await store.save(Conversation(conversation_id="c", messages=[]))  # exists, not loaded
        current = await store.load("c")
        assert current is not None and len(current.messages) == 8
        # Branch back to the first turn: the left history stays stored and can come back.
        branched = await store.branch("c", at=4, expected_revision=current.revision)
        assert dump(branched.messages) == dump(current.messages[:4])
        result = await agent.run("What should I pack?", conversation=branched)
        await store.save(result)
        record = await store.read_record("c")
        assert record is not None and len(record.branches) == 1
        reloaded = await store.load("c")
        assert reloaded is not None and len(reloaded.messages) == 6
        back = await store.branch("c", from_entry=record.branches[0], expected_revision=reloaded.revision)
        assert dump(back.messages) == dump(current.messages)
        # A fork shares the history (convo's own fork) and goes its own way.
        fork = await store.fork("c", at=6, new_conversation_id="c-fork")
        assert dump(fork.messages) == dump(current.messages[:6])
        assert client.get("c-fork")["forked_from"]["session_id"] == "c"
        await store.save(await agent.run("What should I pack?", conversation=fork))
        assert [r.conversation_id for r in await store.list_conversations()] == ["c-fork", "c"]
        for sid in ("c", "c-fork"):
            assert_valid(client, sid)
        await store.delete("c")
        assert await store.load("c") is None
        assert [s["session_id"] for s in client.list()["sessions"]] == ["c-fork"]


@arun
async def test_conversation_store_after_a_crash(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "convo.db"
    started = await make_agent(Model()).run(QUESTIONS[0])
    first = convo.Client(store=f"sqlite:{db}")
    await ConvoConversationStore(client=first).save(
        Conversation(conversation_id="crashy", messages=started.all_messages()[:2])
    )
    await kill(first)
    with convo.Client(store=f"sqlite:{db}") as second:
        store = ConvoConversationStore(client=second)
        loaded = await store.load("crashy")
        assert loaded is not None and len(loaded.messages) == 3
        assert [p.content for p in loaded.messages[2].parts] == [CANCELLED, CANCELLED]
        result = await make_agent(Model()).run(QUESTIONS[1], conversation=loaded)
        await store.save(result)
        again = await store.load("crashy")
        assert again is not None
        assert dump(again.messages[:3]) == dump(loaded.messages)
        assert len(again.messages) == 5
        assert_valid(second, "crashy")
