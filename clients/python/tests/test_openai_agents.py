"""ConvoSession against the real OpenAI Agents SDK (openai-agents 0.24.0) and its own
offline model, ``agents.testing.ScriptedModel``: a tool loop with parallel calls and
reasoning carrying ``encrypted_content``, a second turn, a crash between a call and its
result, a reopen in a new process, ``pop_item`` of grouped items, limits, and the
differential run against the SDK's in-memory ``SQLiteSession(":memory:")``."""

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

agents = pytest.importorskip("agents", reason="openai-agents is not installed (pip install 'convo[openai-agents]')")

from agents import Agent, RunConfig, Runner, SessionSettings, SQLiteSession, function_tool, set_tracing_disabled  # noqa: E402
from agents.memory import Session as SessionProtocol  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402
from openai.types.responses import ResponseReasoningItem  # noqa: E402
from openai.types.responses.response_reasoning_item import Summary  # noqa: E402

import convo  # noqa: E402
from conftest import arun  # noqa: E402
from convo.integrations.openai_agents import CANCELLED, ConvoSession  # noqa: E402

set_tracing_disabled(True)

FORMATS = ("openai_chat", "openai_responses", "anthropic_messages")
PYTHONPATH = str(pathlib.Path(convo.__file__).resolve().parents[1])


def wire(items: Any) -> Any:
    """Items as the SDK serialises them (SQLiteSession stores ``json.dumps(item)``)."""
    return json.loads(json.dumps(items))


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}, 21 °C"


def reasoning(item_id: str, text: str) -> ResponseReasoningItem:
    return ResponseReasoningItem(
        id=item_id,
        type="reasoning",
        summary=[Summary(text=text, type="summary_text")],
        encrypted_content=f"gAAAAB-{item_id}-opaque==",
    )


def script(model: ScriptedModel) -> None:
    """Turn 1: reasoning then two parallel calls; the answer. Turn 2: reasoning then text."""
    model.enqueue(
        [
            reasoning("rs_1", "Two cities: call the tool for each."),
            function_call("weather", {"city": "Paris"}, call_id="call_P", item_id="fc_1"),
            function_call("weather", {"city": "London"}, call_id="call_L", item_id="fc_2"),
        ]
    )
    model.enqueue([assistant_message("Sunny in both.", item_id="msg_1")])
    model.enqueue(
        [reasoning("rs_2", "They asked about packing."), assistant_message("Pack sunglasses.", item_id="msg_2")]
    )


async def two_turns(session: Any, runner: str) -> tuple[ScriptedModel, Any]:
    model = ScriptedModel()
    script(model)
    agent = Agent(name="weather", instructions="Be brief.", model=model, tools=[weather])
    outputs = []
    for text in ("Weather in Paris and London?", "What should I pack?"):
        if runner == "streamed":
            result = Runner.run_streamed(agent, text, session=session)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(agent, text, session=session)
        outputs.append(result.final_output)
    assert outputs == ["Sunny in both.", "Pack sunglasses."]
    model.assert_complete()
    return model, await session.get_items()


def stored(client: convo.Client, session: ConvoSession) -> list[dict[str, Any]]:
    return client.history(session.convo_session_id, repair=False)["messages"]


def assert_valid(client: convo.Client, sid: str) -> None:
    for fmt in FORMATS:
        assert client.validate(sid, fmt)["violations"] == [], fmt


@pytest.mark.parametrize("runner", ["run", "streamed"])
@arun
async def test_two_turn_run_matches_the_sdks_in_memory_session(runner: str, tmp_path: pathlib.Path) -> None:
    reference = SQLiteSession("ref", ":memory:")
    ref_model, ref_items = await two_turns(reference, runner)
    session = ConvoSession("weather-1", store=f"sqlite:{tmp_path / 'convo.db'}")
    assert isinstance(session, SessionProtocol)
    try:
        model, items = await two_turns(session, runner)
        # The model's last request is the same, and so is every request before it.
        assert [wire(c.input) for c in model.calls] == [wire(c.input) for c in ref_model.calls]
        assert wire(items) == wire(ref_items)
        assert len(items) == 10
    finally:
        session.close()
        reference.close()


@arun
async def test_convo_view_is_one_message_per_group_and_exports_validate(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "convo.db"
    with convo.Client(store=f"sqlite:{db}") as client:
        session = ConvoSession("weather-2", client=client)
        _, items = await two_turns(session, "run")
        messages = stored(client, session)
        assert [(m["role"], m["content"]) for m in messages] == [
            ("user", "Weather in Paris and London?"),
            ("assistant", None),
            ("tool", "sunny in Paris, 21 °C"),
            ("tool", "sunny in London, 21 °C"),
            ("assistant", "Sunny in both."),
            ("user", "What should I pack?"),
            ("assistant", "Pack sunglasses."),
        ]
        calls = messages[1]
        # Both parallel calls in ONE assistant message, kept as the Responses items they were.
        assert [c["id"] for c in calls["tool_calls"]] == ["call_P", "call_L"]
        assert calls["native"]["format"] == "openai_responses" and calls["native"]["model"] is None
        assert calls["native"]["body"] == wire(items[1:4])
        assert calls["native"]["body"][0]["encrypted_content"] == "gAAAAB-rs_1-opaque=="
        assert messages[6]["native"]["body"] == wire(items[8:10])
        assert_valid(client, session.convo_session_id)
        # The Responses export replays the items exactly (reasoning, fc_ ids, encrypted content).
        exported = client.export(session.convo_session_id, "openai_responses")
        assert exported["payload"]["input"][1:5] == wire(items[1:5])
        assert exported["payload"]["input"][8:] == wire(items[8:])
        assert not client.export(session.convo_session_id, "openai_responses", store=False)["warnings"]
        # Other providers get the common form, the reasoning left out with a warning.
        chat = client.export(session.convo_session_id, "openai_chat")
        assert any("reasoning left out" in w["message"] for w in chat["warnings"])
        assert "gAAAAB" not in json.dumps(chat["payload"])


def reopen_items(db: pathlib.Path, session_id: str) -> Any:
    """get_items() from a new Python process (and a new convo child) on the same store."""
    code = (
        "import asyncio, json, sys\n"
        "from convo.integrations.openai_agents import ConvoSession\n"
        "s = ConvoSession(sys.argv[1], store='sqlite:' + sys.argv[2])\n"
        "print(json.dumps(asyncio.run(s.get_items())))\n"
        "s.close()\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [PYTHONPATH, os.environ.get("PYTHONPATH")]))}
    out = subprocess.run(
        [sys.executable, "-c", code, session_id, str(db)], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@arun
async def test_items_come_back_equal_from_a_new_process(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "convo.db"
    session = ConvoSession("weather-3", store=f"sqlite:{db}")
    try:
        _, items = await two_turns(session, "run")
    finally:
        session.close()
    assert reopen_items(db, "weather-3") == wire(items)


@arun
async def test_a_crash_between_a_call_and_its_result(tmp_path: pathlib.Path) -> None:
    """kill -9 after the calls were stored, before their results: the next run goes on,
    the calls answered with convo's cancellation text as function_call_output items."""
    db = tmp_path / "convo.db"
    first = convo.Client(store=f"sqlite:{db}")
    session = ConvoSession("crashy", client=first)
    calls = wire(
        [
            {"content": "Weather in Paris and London?", "role": "user"},
            reasoning("rs_1", "Two cities.").model_dump(exclude_unset=True),
            function_call("weather", {"city": "Paris"}, call_id="call_P", item_id="fc_1").model_dump(
                exclude_unset=True
            ),
            function_call("weather", {"city": "London"}, call_id="call_L", item_id="fc_2").model_dump(
                exclude_unset=True
            ),
        ]
    )
    await session.add_items(calls)
    assert first.pid is not None
    os.kill(first.pid, signal.SIGKILL)
    for _ in range(100):
        if first.returncode is not None:
            break
        await asyncio.sleep(0.05)
    first.close()

    with convo.Client(store=f"sqlite:{db}") as second:
        session = ConvoSession("crashy", client=second)
        cancelled = [
            {"call_id": "call_P", "output": CANCELLED, "type": "function_call_output"},
            {"call_id": "call_L", "output": CANCELLED, "type": "function_call_output"},
        ]
        assert await session.get_items() == calls + cancelled
        assert await session.get_items(limit=2) == cancelled

        model = ScriptedModel()
        model.enqueue([assistant_message("Sorry, the lookup was interrupted. Again?", item_id="msg_9")])
        agent = Agent(name="weather", instructions="Be brief.", model=model, tools=[weather])
        result = await Runner.run(agent, "Still there?", session=session)
        assert result.final_output == "Sorry, the lookup was interrupted. Again?"
        # The provider was sent each call with a result: no dangling call.
        assert wire(model.calls[-1].input) == calls + cancelled + [{"content": "Still there?", "role": "user"}]
        items = await session.get_items()
        assert items[:6] == calls + cancelled and items[6] == {"content": "Still there?", "role": "user"}
        # Moving on stored the cancellations (so a late real result is refused, not lost silently).
        history = second.history(session.convo_session_id, repair=False)["messages"]
        assert [m["metadata"] for m in history if m["role"] == "tool"] == [{"synthetic": True}] * 2
        assert_valid(second, session.convo_session_id)
    assert reopen_items(db, "crashy") == items


@arun
async def test_pop_item_removes_one_item_of_a_group(tmp_path: pathlib.Path) -> None:
    with convo.Client(store="memory") as client:
        session = ConvoSession("pops", client=client)
        reference = SQLiteSession("pops")
        _, items = await two_turns(session, "run")
        await reference.add_items(items)
        # The last item of a grouped message: the rest of the group stays, as one message.
        popped = await session.pop_item()
        assert popped == items[-1] == await reference.pop_item()
        last = stored(client, session)[-1]
        assert last["native"]["body"] == wire(items[8:9]) and last["content"] is None
        # Popping every item gives the SQLite session's items, in the same order, and never
        # a repaired result.
        while True:
            mine, theirs = await session.pop_item(), await reference.pop_item()
            assert mine == theirs
            if mine is None:
                break
            if mine.get("type") == "function_call_output":
                # Its call is open again: the repaired view answers it, nothing is stored.
                view = await session.get_items()
                assert {"call_id": mine["call_id"], "output": CANCELLED, "type": "function_call_output"} in view
        assert stored(client, session) == []
        # One call of two popped: the other stays pending in the same message.
        await session.add_items(items[:4])
        assert await session.pop_item() == items[3]
        message = stored(client, session)[-1]
        assert [c["id"] for c in message["tool_calls"]] == ["call_P"]
        assert await session.get_items() == items[:3] + [
            {"call_id": "call_P", "output": CANCELLED, "type": "function_call_output"}
        ]
        # A result added now is still accepted (the repair was a view), and joins its call.
        await session.add_items([items[3], items[4]])
        assert await session.get_items() == items[:5] + [
            {"call_id": "call_L", "output": CANCELLED, "type": "function_call_output"}
        ]
        await session.add_items([items[5]])
        assert await session.get_items() == items[:6]
        assert [m["role"] for m in stored(client, session)] == ["user", "assistant", "tool", "tool"]
        reference.close()


@arun
async def test_calls_stored_one_at_a_time_stay_one_group() -> None:
    """Items appended one by one (a framework saving each item as it comes) are grouped
    as the Responses API groups them: consecutive calls are one convo message, so moving
    on to the second call does not cancel the first."""
    with convo.Client(store="memory") as client:
        session = ConvoSession("one-by-one", client=client)
        items = wire(
            [
                {"content": "go", "role": "user"},
                reasoning("rs_1", "two calls").model_dump(exclude_unset=True),
                function_call("weather", {"city": "A"}, call_id="c1", item_id="fc_1").model_dump(exclude_unset=True),
                function_call("weather", {"city": "B"}, call_id="c2", item_id="fc_2").model_dump(exclude_unset=True),
                {"call_id": "c2", "output": "B", "type": "function_call_output"},
                {"call_id": "c1", "output": "A", "type": "function_call_output"},
                assistant_message("done", item_id="m").model_dump(exclude_unset=True),
            ]
        )
        for item in items:
            await session.add_items([item])
        assert await session.get_items() == items
        assert [m["role"] for m in stored(client, session)] == ["user", "assistant", "tool", "tool", "assistant"]
        assert_valid(client, session.convo_session_id)


@arun
async def test_every_item_shape_comes_back_equal() -> None:
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    items = [
        {"role": "developer", "content": "Answer in French."},
        {"role": "system", "content": "Be brief."},
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is in this picture?"},
                {"type": "input_image", "image_url": f"data:image/png;base64,{png}", "detail": "auto"},
            ],
        },
        {"role": "assistant", "content": "A pixel."},
        {"role": "user", "content": "And this file?"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "read",
            "arguments": "",
            "id": "fc_9",
            "status": "completed",
        },
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [{"type": "input_text", "text": "contents"}],
            "id": "fco_1",
            "status": "completed",
        },
        {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "No."}], "id": "m1"},
        {
            "type": "computer_call",
            "call_id": "cc1",
            "id": "cu_1",
            "action": {"type": "screenshot"},
            "status": "completed",
            "pending_safety_checks": [],
        },
        {"type": "computer_call_output", "call_id": "cc1", "output": {"type": "computer_screenshot", "image_url": "x"}},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
        },
        {"role": "user", "content": ""},
    ]
    with convo.Client(store="memory") as client:
        session = ConvoSession("shapes ✓/with spaces", client=client, session_settings={"limit": None})
        assert session.convo_session_id.startswith("openai-agents-")
        await session.add_items(items)
        assert await session.get_items() == items
        for n in range(len(items) + 2):
            assert await session.get_items(limit=n) == (items[-n:] if n else [])
        assert await session.get_items(limit=-1) == items
        messages = stored(client, session)
        assert messages[2]["content"] == [{"type": "text", "text": "What is in this picture?"}]
        assert messages[2]["images"] == [png]
        assert messages[3]["content"] == "A pixel."
        assert client.get(session.convo_session_id)["metadata"] == {"openai_agents_session_id": "shapes ✓/with spaces"}
        for expected in reversed(items):
            assert await session.pop_item() == expected
        assert await session.pop_item() is None


@arun
async def test_limits_and_settings_as_the_sdk_sessions() -> None:
    with convo.Client(store="memory") as client:
        session = ConvoSession("limits", client=client, session_settings={"limit": 3})
        reference = SQLiteSession("limits", session_settings={"limit": 3})
        assert session.session_settings == reference.session_settings == SessionSettings(limit=3)
        with pytest.raises(TypeError, match="Unknown session settings: limitt"):
            ConvoSession("x", client=client, session_settings={"limitt": 1})
        assert ConvoSession("y", client=client).session_settings == SessionSettings()
        assert await session.get_items() == [] and await session.pop_item() is None
        _, items = await two_turns(ConvoSession("limits", client=client), "run")
        await reference.add_items(items)
        assert await session.get_items() == await reference.get_items() == items[-3:]
        for n in (None, -1, 0, 1, 2, 4, 7, 10, 11):
            assert await session.get_items(limit=n) == await reference.get_items(limit=n), n
        # A RunConfig override, as the SDK resolves it.
        model = ScriptedModel()
        model.enqueue([assistant_message("ok", item_id="m9")])
        agent = Agent(name="a", model=model)
        await Runner.run(
            agent, "again", session=session, run_config=RunConfig(session_settings=SessionSettings(limit=2))
        )
        assert wire(model.calls[-1].input) == wire(items[-2:]) + [{"content": "again", "role": "user"}]
        await session.clear_session()
        assert await session.get_items() == []
        assert client.get(session.convo_session_id)["message_count"] == 0
        reference.close()


def test_the_runner_runs_synchronously_across_loops(tmp_path: pathlib.Path) -> None:
    """``Runner.run_sync`` (a loop of its own per call) on a session shared by a blocking client."""
    with convo.Client(store=f"sqlite:{tmp_path / 'c.db'}") as client:
        session = ConvoSession("sync", client=client)
        model = ScriptedModel()
        script(model)
        agent = Agent(name="weather", model=model, tools=[weather])
        assert Runner.run_sync(agent, "Weather?", session=session).final_output == "Sunny in both."
        assert Runner.run_sync(agent, "Pack?", session=session).final_output == "Pack sunglasses."
        assert len(asyncio.run(session.get_items())) == 10
        session.close()  # a shared client stays open
        assert not client.closed


@arun
async def test_fit_bounds_what_get_items_gives_the_sdk() -> None:
    """``fit``: get_items is the Responses API body convo exports with that budget, so the
    model is sent a history that fits; without it, the items as stored."""
    with convo.Client(store="memory") as client:
        _, items = await two_turns(ConvoSession("fit", client=client), "run")
        whole = client.count_tokens("fit", "openai_responses")["tokens"]
        preview = client.count_tokens("fit", "openai_responses", fit={"max_tokens": whole - 1})
        done = ("cleared_tool_results", "cleared_thinking_turns", "turns_left_out")
        assert sum(preview["fit"][k] for k in done) > 0, preview

        session = ConvoSession("fit", client=client, fit={"max_tokens": whole - 1})
        fitted = await session.get_items()
        exported = client.export("fit", "openai_responses", fit={"max_tokens": whole - 1})
        assert fitted == exported["payload"]["input"] != wire(items)
        assert await session.get_items(limit=2) == fitted[-2:] and await session.get_items(limit=0) == []
        # A budget that holds everything: every stored item, as the Responses API gets it.
        roomy = await ConvoSession("fit", client=client, fit={"max_tokens": whole}).get_items()
        assert roomy == client.export("fit", "openai_responses")["payload"]["input"]
        # Too small even for the last turn: convo's 1005, before any model call.
        with pytest.raises(convo.TooLarge) as caught:
            await ConvoSession("fit", client=client, fit={"max_tokens": 5}).get_items()
        assert caught.value.max_tokens == 5 and caught.value.tokens is not None
        assert await ConvoSession("nothing", client=client, fit={"max_tokens": 5}).get_items() == []

        # The runner sends the model the fitted items, then the new input.
        model = ScriptedModel()
        model.enqueue([assistant_message("ok", item_id="m9")])
        await Runner.run(Agent(name="a", model=model), "again", session=session)
        assert wire(model.calls[-1].input) == wire(fitted) + [{"content": "again", "role": "user"}]
        # The stored items are untouched: a session without fit gives them back equal.
        assert wire((await ConvoSession("fit", client=client).get_items())[: len(items)]) == wire(items)
