"""The agent-style Session against the real agent-core-py: its to_dict() loads into the
library's Session.from_dict unchanged, the library's to_dict() loads back exactly, an
existing id resumes, and run/json/stream go through convo's host runtime."""

from __future__ import annotations

import asyncio
import random

import agent as seedlib
import pytest
from agent.testing.fake_provider import FakeResponse
from agent.testing.fixtures import create_test_agent
from agent.types.tools import ToolCall as SeedToolCall
from pydantic import BaseModel

import convo
from convo.agent import Session


def random_seed_messages(rng: random.Random) -> list:
    M = seedlib.Message
    out = []
    for turn in range(rng.randint(1, 6)):
        if rng.random() < 0.2:
            out.append(
                M.user(
                    [
                        seedlib.ContentPart.text_part(f"look {turn}"),
                        seedlib.ContentPart.image_url_part("https://example.invalid/cat.png"),
                    ]
                )
            )
        else:
            out.append(M.user(rng.choice(["hi", "what now?", "ünïcode ✓", ""])))
        if rng.random() < 0.5:
            calls = [
                {"id": f"t{turn}_{k}", "name": rng.choice(["ls", "read"]), "arguments": {"k": k, "big": 10**25}}
                for k in range(rng.randint(1, 3))
            ]
            out.append(M.assistant(rng.choice([None, "checking"]), tool_calls=calls))
            for c in calls:
                out.append(M.tool(rng.choice(["ok", "a\nb"]), c["id"], name=c["name"]))
        out.append(M.assistant(rng.choice(["Done.", "Sure — here.", "x" * 30])))
    if rng.random() < 0.3:
        out.insert(0, M.system("extra system note"))
    return out


@pytest.mark.parametrize("seed", range(25))
def test_to_dict_round_trips_with_the_real_library(seed: int, default_client: convo.Client) -> None:
    rng = random.Random(seed)
    agent, _ = create_test_agent()
    msgs = random_seed_messages(rng)
    real = seedlib.Session(agent, session_id=f"conv-{seed}", system=rng.choice([None, "Be kind."]), messages=msgs)

    # the library's to_dict loads into convo, and convo's to_dict gives it back exactly
    ours = Session.from_dict(real.to_dict(), agent)
    assert ours.session_id == real.session_id
    assert ours.to_dict() == real.to_dict()

    # convo's to_dict loads into the library's from_dict unchanged, and back again
    reloaded = seedlib.Session.from_dict(ours.to_dict(), agent)
    assert reloaded.to_dict() == ours.to_dict()
    assert [m.model_dump() for m in reloaded.history()] == [m.model_dump() for m in real.history()]

    # history() holds the library's Message objects, unrepaired
    assert [m.model_dump() for m in ours.history()] == [m.model_dump() for m in real.history()]

    # the same through the constructor (an existing id: messages replace the history)
    again = Session(agent, session_id=f"conv-{seed}", messages=real.history())
    assert again.to_dict()["messages"] == real.to_dict()["messages"]


def test_a_session_built_here_loads_into_the_library(default_client: convo.Client) -> None:
    agent, _ = create_test_agent()
    s = Session(agent, system="S")
    s.add_message(seedlib.Message.user("hi"))
    s.add_message(seedlib.Message.assistant(None, tool_calls=[{"id": "c", "name": "f", "arguments": {}}]))
    s.add_message({"role": "tool", "content": "r", "tool_call_id": "c"})
    s.add_message(seedlib.Message.user([seedlib.ContentPart.text_part("and this")]))
    d = s.to_dict()
    real = seedlib.Session.from_dict(d, agent)
    assert real.to_dict() == d
    assert real.history()[1].tool_calls == [{"id": "c", "name": "f", "arguments": {}}]
    assert real.history()[3].text == "and this"


def test_existing_id_resumes_and_invalid_id_is_a_value_error(default_client: convo.Client) -> None:
    agent, _ = create_test_agent()
    first = Session(agent, session_id="persist-me", system="Remember.")
    first.add_message(seedlib.Message.user("my name is Ada"))
    resumed = Session(agent, "persist-me")
    assert resumed.system == "Remember."
    assert [m.content for m in resumed.history()] == ["my name is Ada"]
    assert [m.content for m in resumed.messages] == ["my name is Ada"]
    with pytest.raises(ValueError, match="A-Z a-z 0-9"):
        Session(agent, session_id="has spaces/and slashes")
    # from_dict of an existing id replaces it
    Session.from_dict({"session_id": "persist-me", "system": "New.", "messages": []}, agent)
    assert Session(agent, "persist-me").history() == []


def test_history_clear_fork(default_client: convo.Client) -> None:
    agent, _ = create_test_agent()
    s = Session(agent)
    s.add_message(seedlib.Message.user("q"))
    s.add_message(seedlib.Message.assistant("", tool_calls=[{"id": "d", "name": "f", "arguments": {}}]))
    assert [m.role for m in s.history()] == ["user", "assistant"]  # no repair, as in the seed
    with pytest.raises(ValueError, match="invalid_sequence"):
        s.add_message(seedlib.Message.tool("r", "unknown-id"))
    f = s.fork("forked")
    assert f.session_id == "forked" and len(f.history()) == 2
    s.clear()
    assert s.history() == [] and len(f.history()) == 2
    g = f.fork()
    assert g.session_id != f.session_id and len(g.history()) == 2


def test_run_json_stream_through_a_real_agent(default_client: convo.Client) -> None:
    agent, provider = create_test_agent(temperature=0.7)
    seed_agent, seed_provider = create_test_agent(temperature=0.7)
    responses = [FakeResponse(text="Hello Ada"), FakeResponse(text="Your name is Ada")]
    provider.set_responses(list(responses))
    seed_provider.set_responses(list(responses))

    ours = Session(agent, system="Be brief.")
    seed = seedlib.Session(seed_agent, system="Be brief.")
    for text in ["I am Ada", "Who am I?"]:
        r1 = ours.run(text)
        r2 = seed.run(text)
        assert r1.text == r2.text
    mine, theirs = provider.get_requests(), seed_provider.get_requests()
    for a, b in zip(mine, theirs, strict=True):
        assert (a.input, a.system, a.temperature) == (b.input, b.system, b.temperature)
        assert [m.model_dump() for m in a.messages] == [m.model_dump() for m in b.messages]
    assert [m.model_dump() for m in ours.history()] == [m.model_dump() for m in seed.history()]

    # temperature=0 reaches the provider as 0 (the seed's `or` turned it into 0.7)
    ours.run("cold", temperature=0)
    assert provider.get_last_request().temperature == 0

    provider.set_responses([FakeResponse(text='{"name": "Ada", "age": 36}')])

    class Person(BaseModel):
        name: str
        age: int

    r = ours.json("Who?", schema=Person)
    assert r.output == Person(name="Ada", age=36)

    provider.set_responses([FakeResponse(text="one two three")])
    stream = ours.stream("count")
    events = list(stream)
    assert [e.text for e in events if e.type == "text_delta"] == ["one", " two", " three"]
    assert events[-1].type == "message_end" and stream.text == "one two three"
    assert ours.history()[-1].content == "one two three"

    provider.set_responses(
        [FakeResponse(text="", tool_calls=[SeedToolCall(id="t1", name="lookup", arguments={"q": "x"})])]
    )
    r = ours.run("use a tool")
    assert r.has_tool_calls and r.tool_calls[0].name == "lookup" and r.tool_calls[0].arguments == {"q": "x"}


def test_run_through_a_runtime_callable_and_async_forms(default_client: convo.Client) -> None:
    seen = []

    async def runtime(params: dict):
        seen.append(params)
        if "stream_id" in params:

            async def deltas():
                yield "str"
                yield "eamed"

            return deltas()
        return {"text": f"echo: {params['messages'][-1]['content']}", "usage": {"total_tokens": 3}}

    s = Session(runtime, system="sys")
    r = s.run("ping", max_tokens=0)
    assert r.text == "echo: ping" and r.usage.total_tokens == 3 and len(r.message_ids) == 2
    assert seen[0]["max_tokens"] == 0 and seen[0]["system"] == "sys"

    async def main() -> None:
        r = await s.run_async("pong")
        assert r.text == "echo: pong"
        events = [e async for e in s.stream_async("go")]
        assert "".join(e.text for e in events if e.text) == "streamed"

    asyncio.run(main())
    assert [m.content for m in s.history()][-2:] == ["go", "streamed"]

    none = Session(None)
    with pytest.raises(convo.RuntimeFailed) as ei:
        none.run("anyone?")
    assert ei.value.reason == "no_runtime"
