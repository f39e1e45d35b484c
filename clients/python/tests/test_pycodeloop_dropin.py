"""The pycodeloop-style Session against the real pycodeloop==0.8.2: the same history()
over random conversations, the same provider requests from pycodeloop's own Agent, and
the refusals that the seed stored silently raised as ValueError naming the convo kind."""

from __future__ import annotations

import base64
import random
from dataclasses import astuple

import pycodeloop
import pytest
from pycodeloop.abc.provider import Provider, ProviderResponse, ToolCall, Usage
from pycodeloop.abc.tool import Tool, ToolResult

import convo
from convo.pycodeloop import Message, Session

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(24))).decode()

assert pycodeloop.__version__ == "0.8.2"


def fields(messages: list) -> list[tuple]:
    return [(m.role, m.content, m.tool_call_id, m.tool_calls, m.images) for m in messages]


class Conversation:
    """Drives a seed Session and a drop-in Session with the same random operations.

    Documented deviations (spec section 12) are avoided, not hidden: results are only
    given for an unanswered call of the last group while nothing but results followed
    (convo refuses anything else; tested below), no result is given for a call that a
    history() call showed as cancelled (convo's repair is a view), and trim uses N >= 1
    on conversations that start with a user message (trim(0) and a leading non-user
    prefix differ on purpose).
    """

    def __init__(self, rng: random.Random, client: convo.Client) -> None:
        self.rng = rng
        system = rng.choice(["", "You are terse.", "Σύστημα — prompt ✓"])
        cwd = rng.choice([".", "/repo", "/tmp/x y"])
        self.seed = pycodeloop.Session(system_prompt=system, cwd=cwd)
        self.ours = Session(system_prompt=system, cwd=cwd, client=client)
        self.pending: list[str] = []
        self.frozen = False  # history() showed the pending calls as cancelled
        self.next_call = 0
        self.checks = 0

    def text(self) -> str:
        return self.rng.choice(["hi", "Run the tests.", "", "ok ✓", "multi\nline", "x" * 50, '{"json": 1}'])

    def step(self) -> None:
        rng = self.rng
        op = rng.choices(
            ["user", "assistant", "result", "history", "trim", "tokens", "replace"],
            weights=[5, 6, 8, 4, 1, 1, 1],
        )[0]
        if op == "user":
            images = rng.choice([None, None, [PNG], [PNG, PNG], []])
            text = self.text()
            self.seed.add_user(text, images=images)
            self.ours.add_user(text, images=images)
            self.pending, self.frozen = [], False
        elif op == "assistant":
            calls = None
            if rng.random() < 0.6:
                calls = []
                for _ in range(rng.randint(1, 3)):
                    self.next_call += 1
                    args = rng.choice([{}, {"path": "README.md"}, {"n": 10**30, "f": 0.5, "l": [1, "two"]}])
                    calls.append({"id": f"call_{self.next_call}", "name": rng.choice(["ls", "cat"]), "arguments": args})
            text = self.text() if calls else rng.choice(["Done.", "Here it is", "ok"])
            self.seed.add_assistant(text, tool_calls=calls)
            self.ours.add_assistant(text, tool_calls=calls)
            self.pending = [c["id"] for c in calls or []]
            self.frozen = False
        elif op == "result":
            if not self.pending or self.frozen:
                return
            call_id = self.pending.pop(rng.randrange(len(self.pending)))
            content = rng.choice(["ok", "", "error: not found", "line1\nline2"])
            self.seed.add_tool_result(call_id, content)
            self.ours.add_tool_result(call_id, content)
        elif op == "history":
            self.check()
            if self.pending:
                self.frozen = True
        elif op == "trim":
            n = rng.randint(1, 4)
            self.seed.trim(n)
            self.ours.trim(n)
            if not any(m.role == "user" for m in self.seed.messages):
                pass
        elif op == "tokens":
            v = rng.randint(0, 10**6)
            self.seed.update_last_context_tokens(v)
            self.ours.update_last_context_tokens(v)
            assert self.seed.get_last_context_tokens() == self.ours.get_last_context_tokens() == v
        elif op == "replace":
            keep = self.seed.history()  # repairs (and stores) in the seed too
            self.ours.history()
            cut = [i for i, m in enumerate(keep) if m.role == "user"]
            if cut:
                keep = keep[rng.choice(cut) :]
            self.seed.replace_messages(list(keep))
            self.ours.replace_messages(list(keep))
            self.pending, self.frozen = [], False
            assert self.seed.dirty and self.ours.dirty

    def check(self) -> None:
        self.checks += 1
        theirs = self.seed.history()
        mine = self.ours.history()
        assert fields(mine) == fields(theirs)
        assert all(isinstance(m, Message) for m in mine)


@pytest.mark.parametrize("seed", range(60))
def test_history_matches_pycodeloop_over_random_conversations(seed: int, default_client: convo.Client) -> None:
    rng = random.Random(seed)
    conv = Conversation(rng, default_client)
    conv.seed.add_user("start")
    conv.ours.add_user("start")
    for _ in range(rng.randint(5, 60)):
        conv.step()
    conv.check()
    # A Session built from messages, as pycodeloop's stores build one, gives the same history.
    snapshot = conv.seed.history()
    rebuilt_seed = pycodeloop.Session(system_prompt="s", messages=list(snapshot), cwd="/c")
    rebuilt = Session(system_prompt="s", messages=list(snapshot), cwd="/c")
    assert fields(rebuilt.history()) == fields(rebuilt_seed.history())
    assert rebuilt.system_prompt == "s" and rebuilt.cwd == "/c"
    # The read-only snapshot holds the stored messages.
    assert fields(rebuilt.messages) == fields(snapshot)
    with pytest.raises(AttributeError):
        rebuilt.messages = []  # type: ignore[misc]


def test_refusals_are_value_errors_naming_the_kind(default_client: convo.Client) -> None:
    s = Session(system_prompt="x")
    s.add_user("go")
    s.add_assistant(
        "", tool_calls=[{"id": "a", "name": "f", "arguments": {}}, {"id": "b", "name": "g", "arguments": {}}]
    )
    s.add_tool_result("b", "B")
    with pytest.raises(ValueError, match="invalid_sequence") as ei:
        s.add_tool_result("b", "again")  # duplicate
    assert isinstance(ei.value, convo.InvalidSequence) and ei.value.reason == "duplicate_result"
    with pytest.raises(ValueError, match="invalid_sequence"):
        s.add_tool_result("zzz", "?")  # unknown
    s.add_user("moving on")  # cancels "a"
    with pytest.raises(ValueError, match="invalid_sequence") as ei:
        s.add_tool_result("a", "late")  # late
    assert ei.value.reason == "no_pending_tool_calls"
    with pytest.raises(ValueError, match="invalid_params"):
        s.add_user("look", images=["%%% not base64 %%%"])
    assert [m.content for m in s.history()][-2:] == [
        "Cancelled — connection was lost before this tool ran.",
        "moving on",
    ]


def test_documented_deviations(default_client: convo.Client) -> None:
    s = Session()
    s.add_user("a")
    s.add_assistant("b")
    s.trim(0)  # convo: drops all; the seed would keep everything from the first user message
    assert s.history() == []
    s.add_assistant("", tool_calls=[{"id": "x", "name": "f", "arguments": {}}])
    assert s.history()[-1].content.startswith("Cancelled")  # a view...
    s.add_tool_result("x", "real")  # ...so the real result is still accepted
    assert [m.content for m in s.history()] == ["", "real"]


def test_starts_or_reuses_a_child_by_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVO_STORE", "memory")
    previous = convo.set_default_client(None)
    try:
        a = Session(system_prompt="one")
        b = Session(system_prompt="two")
        assert a.client is b.client and a.client.pid is not None
        a.add_user("hi")
        again = Session(session_id=a.session_id)  # resumes
        assert again.system_prompt == "one" and [m.content for m in again.history()] == ["hi"]
        a.client.close()
    finally:
        convo.set_default_client(previous)


# ---------------------------------------------------------------------------- pycodeloop's own Agent


class ScriptedProvider(Provider):
    name = "scripted"

    def __init__(self, script: list[ProviderResponse]) -> None:
        super().__init__(model="scripted-model")
        self.script = list(script)
        self.requests: list[tuple] = []

    def complete(self, system_prompt, messages, tools, on_delta=None, cancel_event=None):  # type: ignore[override]
        self.requests.append((system_prompt, fields(messages), [t["name"] for t in tools]))
        return self.script.pop(0)


class Echo(Tool):
    name = "echo"
    description = "Echoes its arguments"
    parameters = {"type": "object", "properties": {"x": {"type": "integer"}}}

    def run(self, **kwargs):  # type: ignore[override]
        return ToolResult(output=f"echo {kwargs}")


def script() -> list[ProviderResponse]:
    return [
        ProviderResponse(text="Let me check.", tool_calls=[ToolCall("c1", "echo", {"x": 1})], usage=Usage(100, 5)),
        ProviderResponse(text="It says 1.", usage=Usage(120, 4)),
        ProviderResponse(
            text="",
            tool_calls=[ToolCall("c2", "echo", {"x": 2}), ToolCall("c3", "echo", {"x": 3})],
            usage=Usage(150, 6),
        ),
        ProviderResponse(text="Both done.", usage=Usage(170, 3)),
        ProviderResponse(text="Third turn.", usage=Usage(180, 3)),
    ]


def test_pycodeloop_agent_sends_the_same_requests(default_client: convo.Client) -> None:
    def drive(session) -> tuple[list, list]:
        provider = ScriptedProvider(script())
        agent = pycodeloop.Agent(provider, tools=[Echo()], system_prompt="S", max_history_turns=2)
        out = [
            agent.run("first", session=session),
            agent.run("second", session=session),
            agent.run("third", session=session, images=[PNG]),
        ]
        assert out == ["It says 1.", "Both done.", "Third turn."]
        assert session.get_last_context_tokens() == 180
        return provider.requests, fields(session.history())

    seed_requests, seed_history = drive(pycodeloop.Session(system_prompt="S"))
    our_requests, our_history = drive(Session(system_prompt="S"))
    assert our_requests == seed_requests
    assert our_history == seed_history
    assert len(our_requests) == 5


def test_message_is_pycodeloops_shape() -> None:
    from pycodeloop.protocol.messages import Message as SeedMessage

    m = Message(role="tool", content="x", tool_call_id="c")
    assert astuple(m) == astuple(SeedMessage(role="tool", content="x", tool_call_id="c"))


# ---------------------------------------------------------------------------- empty answers


def test_agent_goes_on_after_a_model_that_answered_nothing(default_client: convo.Client) -> None:
    """pycodeloop's own Agent against a provider that answers nothing once (an empty
    ``end_turn``: text "" and no calls), then normally: the run goes on, and the drop-in
    sends the same requests and keeps the same history as the seed."""

    def empty_then_normal() -> list[ProviderResponse]:
        return [
            ProviderResponse(text="", usage=Usage(90, 0)),
            ProviderResponse(text="", tool_calls=[ToolCall("e1", "echo", {"x": 7})], usage=Usage(95, 5)),
            ProviderResponse(text="", usage=Usage(100, 0)),
            ProviderResponse(text="Seven.", usage=Usage(110, 2)),
        ]

    def drive(session) -> tuple[list, list, str]:
        provider = ScriptedProvider(empty_then_normal())
        agent = pycodeloop.Agent(provider, tools=[Echo()], system_prompt="S")
        out = agent.run("go", session=session)
        assert provider.script == []
        return provider.requests, fields(session.history()), out

    seed = drive(pycodeloop.Session(system_prompt="S"))
    ours = drive(Session(system_prompt="S"))
    assert ours == seed
    assert ours[2] == "Seven."


def test_an_empty_assistant_turn_is_stored_as_the_seed_stores_it(default_client: convo.Client) -> None:
    """What a loop hands its session when a model answered nothing —
    ``add_assistant("", tool_calls=None)`` — is stored (convo's ``allow_empty``) and comes
    back equal, as the seed keeps it, instead of raising; export leaves it out with a
    warning. (pycodeloop 0.8.2's own ``Agent.run`` retries an empty answer before storing
    anything: the test above.)"""
    seed = pycodeloop.Session(system_prompt="S")
    ours = Session(system_prompt="S")
    for s in (seed, ours):
        s.add_user("hi")
        s.add_assistant("", tool_calls=None)
        s.add_user("still there?")
        s.add_assistant("Yes.")
    assert fields(ours.history()) == fields(seed.history())
    assert fields(ours.history())[1] == ("assistant", "", None, None, None)
    exported = default_client.export(ours.session_id, "openai_chat")
    assert [m["role"] for m in exported["payload"]["messages"]] == ["system", "user", "user", "assistant"]
    assert {"index": 1, "message": "an empty message was left out"} in exported["warnings"]
    # The client methods take it too, async and blocking alike.
    sid = default_client.create()["session_id"]
    default_client.add_user(sid, "q")
    default_client.add_assistant(sid, None, allow_empty=True)
    default_client.add_message(sid, {"role": "assistant", "content": ""}, allow_empty=True)
    with pytest.raises(convo.InvalidParams):
        default_client.add_assistant(sid, "")
    assert [m["content"] for m in default_client.history(sid)["messages"]] == ["q", None, ""]


def test_a_tool_result_may_carry_images(default_client: convo.Client) -> None:
    """``add_tool_result(..., images=)`` (not in the seed, whose ``Message`` has the field
    all the same): the screenshot comes back on the tool message, as a seed ``Message``
    would hold it; without it, the seed's two-argument call is unchanged."""
    s = Session()
    s.add_user("screenshot, then ls")
    s.add_assistant("", tool_calls=[{"id": "c1", "name": "screenshot", "arguments": {}}])
    s.add_tool_result("c1", "the screen", images=[PNG])
    s.add_assistant("", tool_calls=[{"id": "c2", "name": "ls", "arguments": {}}])
    s.add_tool_result("c2", "README.md")
    assert fields(s.history())[2] == ("tool", "the screen", "c1", None, [PNG])
    assert fields(s.history())[4] == ("tool", "README.md", "c2", None, None)
