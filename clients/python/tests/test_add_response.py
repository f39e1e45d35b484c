"""session/add_response through the async and the blocking client, against the real binary.

A provider's whole response (the fixtures in ./fixtures/providers, copies of the repo's
tests/fixtures/providers) is appended as it came and exported back to the same format byte
for byte; usage adds up on the session; the body options (model, thinking, store) reach
export, validate, count_tokens and trim; a response with no assistant output is -32602;
SDK objects (pydantic models) are sent as the SDK sends them; a runtime may answer with
``{format, response}``.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import pathlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

import convo
from conftest import REPO, arun
from convo.types import FORMATS, Format

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "providers"

# One tool loop per format: a turn with calls, their results, then the next turn.
LOOPS: dict[Format, tuple[str, str]] = {
    "anthropic_messages": ("anthropic_thinking_tool_use", "anthropic_final_answer"),
    "openai_responses": ("openai_responses_reasoning_calls", "openai_responses_final"),
    "gemini_contents": ("gemini_thought_signatures", "gemini_final"),
    "openai_chat": ("openai_chat_tool_calls", "deepseek_chat_reasoning_content"),
    "gemini_interactions": ("gemini_interactions_thought_calls", "gemini_interactions_final"),
}

# Responses that carry no assistant output: refused, nothing stored.
REFUSED: list[tuple[Format, str, str]] = [
    ("openai_responses", "openai_responses_failed", "its status is failed"),
    ("anthropic_messages", "anthropic_refusal_empty", "its `content` is empty"),
    ("gemini_contents", "gemini_no_candidates", "it has no candidate"),
    ("gemini_interactions", "gemini_interactions_failed", "its status is failed"),
    ("openai_chat", "openai_chat_content_filter", "stopped by the content filter with no content"),
]


def load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def wire(value: Any) -> str:
    """The bytes a JSON value is sent as (member order kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def turn_of(fmt: str, response: dict[str, Any]) -> Any:
    """The part of a response that is the assistant turn (what `native.body` keeps)."""
    if fmt == "anthropic_messages":
        return response["content"]
    if fmt == "openai_responses":
        return response["output"]
    if fmt == "openai_chat":
        return response["choices"][0]["message"]
    if fmt == "gemini_interactions":
        return response["steps"]
    return response["candidates"][0]["content"]


def model_of(fmt: str, response: dict[str, Any]) -> str:
    return response["modelVersion"] if fmt == "gemini_contents" else response["model"]


def call_ids(fmt: str, response: dict[str, Any], taken: int = 0) -> list[str]:
    """The ids the results of a response's calls name (Gemini: call_<n> when none)."""
    turn = turn_of(fmt, response)
    if fmt == "anthropic_messages":
        return [b["id"] for b in turn if b["type"] == "tool_use"]
    if fmt == "openai_responses":
        return [item["call_id"] for item in turn if item["type"] == "function_call"]
    if fmt == "openai_chat":
        return [c["id"] for c in turn.get("tool_calls") or []]
    if fmt == "gemini_interactions":
        return [step["id"] for step in turn if step["type"] == "function_call"]
    calls = [p["functionCall"] for p in turn["parts"] if "functionCall" in p]
    return [c.get("id") or f"call_{taken + i + 1}" for i, c in enumerate(calls)]


def replayed(fmt: str, payload: dict[str, Any]) -> list[Any]:
    """The assistant turns of an exported body, as the provider will read them."""
    if fmt == "anthropic_messages":
        return [m["content"] for m in payload["messages"] if m["role"] == "assistant"]
    if fmt == "openai_chat":
        return [m for m in payload["messages"] if m["role"] == "assistant"]
    if fmt == "gemini_contents":
        return [c for c in payload["contents"] if c["role"] == "model"]
    # Responses items, Interactions steps: each run of assistant-side ones is one turn.
    runs: list[list[Any]] = []
    previous_assistant = False
    for item in payload["input"]:
        assistant = (
            item["type"] not in ("function_call_output", "function_result", "user_input") and item.get("role") != "user"
        )
        if assistant and not previous_assistant:
            runs.append([])
        if assistant:
            runs[-1].append(item)
        previous_assistant = assistant
    return runs


def summed(usages: list[dict[str, Any] | None]) -> dict[str, int]:
    keys = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
    return {k: sum((u or {}).get(k) or 0 for u in usages) for k in keys}


def check_loop(
    fmt: Format, results: Sequence[Mapping[str, Any]], history: list[dict[str, Any]], info: dict[str, Any]
) -> None:
    """What a tool loop appended with add_response must look like afterwards."""
    names = LOOPS[fmt]
    responses = [load(n) for n in names]
    taken = 0
    for result, response in zip(results, responses, strict=True):
        assert set(result) == {"message_id", "index", "revision", "tool_call_ids"}
        assert result["tool_call_ids"] == call_ids(fmt, response, taken)
        taken += len(result["tool_call_ids"])
    stored = [m for m in history if m["native"] is not None]
    assert [m["id"] for m in stored] == [r["message_id"] for r in results]
    for message, response in zip(stored, responses, strict=True):
        assert message["role"] == "assistant"
        assert message["native"]["format"] == fmt
        assert message["native"]["model"] == model_of(fmt, response)
        assert wire(message["native"]["body"]) == wire(turn_of(fmt, response))
        assert message["metadata"]["response_id"] == response.get("id", response.get("responseId"))
        assert set(message["usage"]) == {
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
        }
    assert all(m["native"] is None and m["usage"] is None for m in history if m["role"] != "assistant")
    assert info["usage"] == summed([m["usage"] for m in history])
    assert info["usage"]["output_tokens"] > 0


def fixture_tool_result(i: int) -> str:
    return ["14 °C, light rain, wind 12 km/h", "11 °C, overcast, chance of drizzle"][i % 2]


# ---------------------------------------------------------------------------- the copies


def test_the_fixtures_are_the_repos() -> None:
    """The copies here keep the tests self-contained; they must not drift from the originals."""
    originals = REPO / "tests" / "fixtures" / "providers"
    if not originals.is_dir():
        pytest.skip("not in the source tree")
    copies = sorted(p.name for p in FIXTURES.glob("*.json"))
    assert copies == sorted(p.name for p in originals.glob("*.json"))
    for name in copies:
        assert (FIXTURES / name).read_bytes() == (originals / name).read_bytes(), name


# ---------------------------------------------------------------------------- tool loops


@pytest.mark.parametrize("fmt", list(LOOPS))
@arun
async def test_a_tool_loop_async_replays_every_turn_byte_for_byte(fmt: Format) -> None:
    async with convo.AsyncClient(store="memory") as c:
        assert set(c.capabilities["formats"]) == set(FORMATS)
        await c.create("s", system="You are a concise travel assistant. Use the tools instead of guessing.")
        await c.add_user("s", "What should I pack for Paris and London tomorrow?")
        results = []
        for name in LOOPS[fmt]:
            added = await c.add_response("s", fmt, load(name), metadata={"trace_id": "t-42"})
            results.append(added)
            for i, call_id in enumerate(added["tool_call_ids"]):
                await c.add_tool_result("s", call_id, fixture_tool_result(i))
        history = (await c.history("s", repair=False))["messages"]
        check_loop(fmt, results, history, await c.get("s"))
        assert all(m["metadata"]["trace_id"] == "t-42" for m in history if m["native"])

        exported = await c.export("s", fmt)
        assert exported["warnings"] == []
        turns = replayed(fmt, exported["payload"])
        assert [wire(t) for t in turns] == [wire(turn_of(fmt, load(n))) for n in LOOPS[fmt]]
        assert (await c.validate("s", fmt))["violations"] == []
        assert (await c.count_tokens("s", fmt))["tokens"] > 0

        # to_dict -> from_dict keeps each turn native: the copy exports the same bytes.
        data = await c.to_dict("s")
        data["session_id"] = "copy"
        imported = await c.from_dict(data)
        assert imported["usage"] == (await c.get("s"))["usage"]
        assert wire((await c.export("copy", fmt))["payload"]) == wire(exported["payload"])


@pytest.mark.parametrize("fmt", list(LOOPS))
def test_a_tool_loop_sync_replays_every_turn_byte_for_byte(client: convo.Client, fmt: Format) -> None:
    client.create("s", system="You are a concise travel assistant. Use the tools instead of guessing.")
    client.add_user("s", "What should I pack for Paris and London tomorrow?")
    results = []
    for name in LOOPS[fmt]:
        added = client.add_response("s", fmt, load(name), metadata={"trace_id": "t-42"})
        results.append(added)
        for i, call_id in enumerate(added["tool_call_ids"]):
            client.add_tool_result("s", call_id, fixture_tool_result(i))
    history = client.history("s", repair=False)["messages"]
    info = client.get("s")
    check_loop(fmt, results, history, info)

    exported = client.export("s", fmt)
    assert exported["warnings"] == []
    assert [wire(t) for t in replayed(fmt, exported["payload"])] == [wire(turn_of(fmt, load(n))) for n in LOOPS[fmt]]
    assert client.validate("s", fmt)["violations"] == []

    # A fork starts at zero usage; trim does not lower what was spent.
    assert client.fork("s", "f")["usage"] == summed([])
    client.trim("s", 0)
    assert client.get("s")["usage"] == info["usage"]


def test_usage_follows_the_providers_rules(client: convo.Client) -> None:
    """The spec's worked example: Anthropic input = input + cache creation + cache read."""
    client.create("claude")
    client.add_user("claude", "What should I pack?")
    first = client.add_response("claude", "anthropic_messages", load("anthropic_thinking_tool_use"))
    for i, call_id in enumerate(first["tool_call_ids"]):
        client.add_tool_result("claude", call_id, fixture_tool_result(i))
    client.add_response("claude", "anthropic_messages", load("anthropic_final_answer"))
    last = client.history("claude")["messages"][-1]
    assert last["usage"] == {
        "input_tokens": 2280,
        "output_tokens": 173,
        "cache_read_tokens": 1912,
        "cache_write_tokens": 356,
        "reasoning_tokens": 58,
    }
    assert last["metadata"] == {"response_id": "msg_011C6hrmmmtRZ3fiWJewB4n2", "stop_reason": "end_turn"}
    assert client.get("claude")["usage"] == {
        "input_tokens": 4230,
        "output_tokens": 387,
        "cache_read_tokens": 1912,
        "cache_write_tokens": 2268,
        "reasoning_tokens": 189,
    }
    # Gemini reports no cache write: null on the message, 0 in the session's sums.
    client.create("g")
    client.add_user("g", "Pack?")
    client.add_response("g", "gemini_contents", load("gemini_final"))
    assert client.history("g")["messages"][-1]["usage"]["cache_write_tokens"] is None
    assert client.get("g")["usage"]["cache_write_tokens"] == 0
    # Messages not appended from a response carry no usage.
    assert client.create("plain")["usage"] == summed([])


# ---------------------------------------------------------------------------- refusals


async def check_refusals(c: convo.AsyncClient | convo.Client) -> None:
    """The same checks through either client (a blocking call's result is used as is)."""

    async def call(method: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(c, method)(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result

    await call("create", "s")
    await call("add_user", "s", "hi")
    before = await call("get", "s")
    for fmt, name, why in REFUSED:
        with pytest.raises(convo.InvalidParams) as ei:
            await call("add_response", "s", fmt, load(name))
        assert ei.value.code == -32602 and isinstance(ei.value, ValueError)
        assert why in str(ei.value) and "nothing was stored" in str(ei.value)
    # A response of another format than the one named.
    with pytest.raises(convo.InvalidParams) as ei:
        await call("add_response", "s", "openai_chat", load("anthropic_final_answer"))
    assert ei.value.code == -32602 and "chat.completion" in str(ei.value)
    with pytest.raises(convo.InvalidParams):
        await call("add_response", "s", "not_a_format", load("anthropic_final_answer"))
    after = await call("get", "s")
    assert (after["revision"], after["message_count"], after["usage"]) == (
        before["revision"],
        before["message_count"],
        before["usage"],
    )
    with pytest.raises(convo.RevisionConflict):
        await call("add_response", "s", "anthropic_messages", load("anthropic_final_answer"), expected_revision=99)
    with pytest.raises(convo.SessionNotFound):
        await call("add_response", "nope", "anthropic_messages", load("anthropic_final_answer"))
    # Neither a dict nor an SDK object (here the body as text): refused before anything is sent.
    with pytest.raises(TypeError, match="response"):
        await call("add_response", "s", "anthropic_messages", json.dumps(load("anthropic_final_answer")))
    assert (await call("get", "s"))["revision"] == before["revision"]
    # The same response, once accepted, is stored.
    added = await call("add_response", "s", "anthropic_messages", load("anthropic_final_answer"))
    assert added["revision"] == before["revision"] + 1


@arun
async def test_refusals_async() -> None:
    async with convo.AsyncClient(store="memory") as c:
        await check_refusals(c)


def test_refusals_sync(client: convo.Client) -> None:
    asyncio.run(check_refusals(client))


# ---------------------------------------------------------------------------- body options


@arun
async def test_body_options_async() -> None:
    async with convo.AsyncClient(store="memory") as c:
        await c.create("s")
        await c.add_user("s", "What should I pack for Paris and London tomorrow?")
        for name in LOOPS["anthropic_messages"]:
            for i, call_id in enumerate((await c.add_response("s", "anthropic_messages", load(name)))["tool_call_ids"]):
                await c.add_tool_result("s", call_id, fixture_tool_result(i))

        plain = await c.export("s", "anthropic_messages", model="claude-opus-4-6")
        assert plain["warnings"] == []
        no_thinking = await c.export("s", "anthropic_messages", thinking=False)
        blocks = [b["type"] for t in replayed("anthropic_messages", no_thinking["payload"]) for b in t]
        assert "thinking" not in blocks and "tool_use" in blocks
        assert any("thinking left out" in w["message"] for w in no_thinking["warnings"])
        other = await c.export("s", "anthropic_messages", model="claude-sonnet-4-5")
        assert any("built from the common form" in w["message"] for w in other["warnings"])
        assert "thinking" not in [b["type"] for t in replayed("anthropic_messages", other["payload"]) for b in t]
        assert (await c.validate("s", "anthropic_messages", thinking=True))["violations"] == []
        assert (await c.validate("s", "anthropic_messages", model="claude-opus-4-6"))["violations"] == []
        full = (await c.count_tokens("s", "anthropic_messages"))["tokens"]
        assert (await c.count_tokens("s", "anthropic_messages", thinking=False))["tokens"] < full
        trimmed = await c.trim("s", max_tokens=1_000_000, format="anthropic_messages", model="claude-opus-4-6")
        assert trimmed["removed"] == 0 and trimmed["fits"] is True

        # The Responses API, stateless: reasoning without encrypted_content cannot go back.
        await c.create("r")
        await c.add_user("r", "Weather in Paris?")
        added = await c.add_response("r", "openai_responses", load("openai_responses_reasoning_no_encrypted"))
        await c.add_tool_result("r", added["tool_call_ids"][0], "14 °C")
        stored = await c.export("r", "openai_responses")
        assert stored["warnings"] == [] and stored["payload"]["input"][1]["type"] == "reasoning"
        stateless = await c.export("r", "openai_responses", store=False)
        assert [i["type"] for i in stateless["payload"]["input"]].count("reasoning") == 0
        assert any("reasoning left out" in w["message"] for w in stateless["warnings"])
        rules = [v["rule"] for v in (await c.validate("r", "openai_responses", store=False))["violations"]]
        assert rules == ["reasoning_not_replayable"]
        assert (await c.validate("r", "openai_responses"))["violations"] == []
        assert (await c.count_tokens("r", "openai_responses", store=False))["tokens"] > 0
        assert (await c.trim("r", max_tokens=0, format="openai_responses", store=False))["fits"] is False
        # The Responses turn goes to Chat Completions without its reasoning, with a warning.
        chat = await c.export("r", "openai_chat")
        assert any("export openai_responses" in w["message"] for w in chat["warnings"])


def test_body_options_sync(client: convo.Client) -> None:
    client.create("s")
    client.add_user("s", "What should I pack for Paris and London tomorrow?")
    for name in LOOPS["anthropic_messages"]:
        for i, call_id in enumerate(client.add_response("s", "anthropic_messages", load(name))["tool_call_ids"]):
            client.add_tool_result("s", call_id, fixture_tool_result(i))
    no_thinking = client.export("s", "anthropic_messages", thinking=False, model="claude-opus-4-6")
    assert "thinking" not in [b["type"] for t in replayed("anthropic_messages", no_thinking["payload"]) for b in t]
    other = client.export("s", "anthropic_messages", model="claude-sonnet-4-5")
    assert any("built from the common form" in w["message"] for w in other["warnings"])
    assert client.validate("s", "anthropic_messages", thinking=True, model="claude-opus-4-6")["violations"] == []
    full = client.count_tokens("s", "anthropic_messages")["tokens"]
    assert client.count_tokens("s", "anthropic_messages", thinking=False)["tokens"] < full
    assert client.trim("s", max_tokens=1_000_000, format="anthropic_messages", thinking=False)["fits"] is True

    client.create("r")
    client.add_user("r", "Weather in Paris?")
    added = client.add_response("r", "openai_responses", load("openai_responses_reasoning_no_encrypted"))
    client.add_tool_result("r", added["tool_call_ids"][0], "14 °C")
    stateless = client.export("r", "openai_responses", store=False)
    assert any("reasoning left out" in w["message"] for w in stateless["warnings"])
    rules = [v["rule"] for v in client.validate("r", "openai_responses", store=False)["violations"]]
    assert rules == ["reasoning_not_replayable"]
    assert client.count_tokens("r", "openai_responses", store=True)["tokens"] > 0


# ---------------------------------------------------------------------------- SDK objects


@pytest.fixture
def sdk_models() -> Iterator[dict[str, Any]]:
    """Stand-ins for the provider SDKs' response types, made as those SDKs make theirs:
    pydantic models with extra members allowed (Anthropic, OpenAI), optional fields the
    response may lack, a client-side field marked ``__api_exclude__`` (``parsed_output``);
    camelCase aliases and ``bytes`` signatures (google-genai)."""
    pydantic = pytest.importorskip("pydantic")
    from pydantic import BaseModel, ConfigDict, alias_generators

    class Block(BaseModel):
        model_config = ConfigDict(extra="allow")
        type: str
        text: str | None = None
        citations: list[Any] | None = None  # the SDK knows it; this response lacks it
        parsed_output: Any = None  # set by the SDK's parse helpers, never sent

        __api_exclude__ = {"parsed_output"}

    class Message(BaseModel):
        model_config = ConfigDict(extra="allow")
        id: str
        content: list[Block]
        container: Any = None
        model: str
        role: str
        stop_reason: str | None = None
        type: str
        usage: dict[str, Any]

    class Genai(BaseModel):
        model_config = ConfigDict(
            alias_generator=alias_generators.to_camel,
            populate_by_name=True,
            ser_json_bytes="base64",
            val_json_bytes="base64",
            extra="forbid",
        )

    class FunctionCall(Genai):
        id: str | None = None
        name: str | None = None
        args: dict[str, Any] | None = None

    class Part(Genai):
        function_call: FunctionCall | None = None
        text: str | None = None
        thought: bool | None = None
        thought_signature: bytes | None = None

    class Content(Genai):
        parts: list[Part] | None = None
        role: str | None = None

    class Candidate(Genai):
        content: Content | None = None
        finish_reason: str | None = None
        index: int | None = None
        finish_message: str | None = None

    class Response(Genai):
        candidates: list[Candidate] | None = None
        usage_metadata: dict[str, Any] | None = None
        model_version: str | None = None
        response_id: str | None = None

    assert pydantic.VERSION.startswith("2")
    yield {"Message": Message, "GenerateContentResponse": Response}


def test_sdk_objects_are_sent_as_the_sdk_sends_them(client: convo.Client, sdk_models: dict[str, Any]) -> None:
    raw = load("anthropic_final_answer")
    message = sdk_models["Message"].model_validate(raw)
    message.content[1].parsed_output = {"packing": ["jacket"]}
    # What a plain model_dump would add: members the response never had.
    plain = message.model_dump(mode="json")["content"][1]
    assert plain["citations"] is None and "parsed_output" in plain
    client.create("s")
    client.add_user("s", "Pack?")
    added = client.add_response("s", "anthropic_messages", message)
    assert added["tool_call_ids"] == []
    native = client.history("s")["messages"][-1]["native"]
    assert native["body"] == raw["content"]  # the members the API sent, no more
    assert native["model"] == "claude-opus-4-6"

    # google-genai: camelCase on the wire; a bytes signature goes back as the REST API
    # sent it (standard base64), not pydantic's URL-safe form.
    text = (FIXTURES / "gemini_thought_signatures.json").read_text(encoding="utf-8")
    gemini = sdk_models["GenerateContentResponse"].model_validate_json(text)
    signatures = [p.thought_signature for p in gemini.candidates[0].content.parts if p.thought_signature]
    assert any(set(base64.b64encode(s)) & set(b"+/") for s in signatures)  # URL-safe would differ
    client.create("g")
    client.add_user("g", "Pack?")
    added = client.add_response("g", "gemini_contents", gemini)
    assert added["tool_call_ids"] == ["call_1", "call_2"]
    native = client.history("g", repair=False)["messages"][-1]["native"]
    assert native["body"] == json.loads(text)["candidates"][0]["content"]
    assert native["model"] == "gemini-3-pro-preview"


@arun
async def test_sdk_objects_async(sdk_models: dict[str, Any]) -> None:
    message = sdk_models["Message"].model_validate(load("anthropic_thinking_tool_use"))
    async with convo.AsyncClient(store="memory") as c:
        await c.create("s")
        await c.add_user("s", "Pack?")
        added = await c.add_response("s", "anthropic_messages", message)
        assert added["tool_call_ids"] == ["toolu_01NRrZKi33evThhcqajiJafW", "toolu_01EbfuYLS2mb2ixXokwVJmU7"]
        body = (await c.history("s", repair=False))["messages"][-1]["native"]["body"]
        assert body == load("anthropic_thinking_tool_use")["content"]


@pytest.mark.parametrize(
    "module, type_name, fmt, name",
    [
        ("anthropic.types", "Message", "anthropic_messages", "anthropic_thinking_tool_use"),
        ("openai.types.responses", "Response", "openai_responses", "openai_responses_reasoning_calls"),
        ("openai.types.chat", "ChatCompletion", "openai_chat", "deepseek_chat_reasoning_content"),
    ],
)
def test_real_sdk_objects(client: convo.Client, module: str, type_name: str, fmt: Format, name: str) -> None:
    """With the provider's SDK installed: its parsed response stores the members the API sent."""
    sdk_type = getattr(pytest.importorskip(module), type_name)
    raw = load(name)
    response = sdk_type.construct(**raw)  # how the SDK builds the response it returns
    client.create("s")
    client.add_user("s", "Pack?")
    added = client.add_response("s", fmt, response)
    assert added["tool_call_ids"] == call_ids(fmt, raw)
    assert client.history("s", repair=False)["messages"][-1]["native"]["body"] == turn_of(fmt, raw)


# ---------------------------------------------------------------------------- runtime answers


@arun
async def test_a_runtime_may_answer_with_the_providers_response() -> None:
    seen: list[dict[str, Any]] = []

    async def runtime(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        return {"format": "openai_responses", "response": load("openai_responses_final")}

    async with convo.AsyncClient(store="memory", runtime=runtime, runtime_format="openai_responses") as c:
        await c.create("s", system="Be brief.")
        r = await c.run("s", "What should I pack?")
        assert seen[0]["payload"]["instructions"] == "Be brief."
        assert seen[0]["payload"]["input"][-1]["role"] == "user"
        last = (await c.history("s"))["messages"][-1]
        assert last["id"] == r["message_ids"][1]
        assert wire(last["native"]["body"]) == wire(load("openai_responses_final")["output"])
        assert (await c.get("s"))["usage"] == summed([last["usage"]])

        # A streaming runtime gives it as its Final answer.
        async def streaming(params: dict[str, Any]) -> Any:
            yield "Pack a "
            yield "jacket."
            yield convo.Final({"format": "anthropic_messages", "response": load("anthropic_final_answer")})

        c.set_runtime(streaming)
        await c.create("a")
        await c.stream("a", "Pack?")
        last = (await c.history("a"))["messages"][-1]
        assert wire(last["native"]["body"]) == wire(load("anthropic_final_answer")["content"])


def test_a_runtime_may_answer_with_an_sdk_object(client: convo.Client, sdk_models: dict[str, Any]) -> None:
    message = sdk_models["Message"].model_validate(load("anthropic_final_answer"))
    client.set_runtime(lambda params: {"format": "anthropic_messages", "response": message})
    client.create("s")
    client.run("s", "Pack?")
    assert client.history("s")["messages"][-1]["native"]["body"] == load("anthropic_final_answer")["content"]


def test_the_readme_tool_loop(client: convo.Client, sdk_models: dict[str, Any]) -> None:
    """The README's loop, with a stand-in for ``anthropic.Anthropic()`` that answers with
    the fixtures as SDK objects and records what it was sent."""
    answers = [load("anthropic_thinking_tool_use"), load("anthropic_final_answer")]
    sent: list[dict[str, Any]] = []

    class Messages:
        def create(self, **request: Any) -> Any:
            sent.append(json.loads(json.dumps(request)))
            return sdk_models["Message"].model_validate(answers[len(sent) - 1])

    class Claude:
        messages = Messages()

    def run_tool(name: str, arguments: dict[str, Any]) -> str:
        return f"{name}({arguments['location']}): 12 °C"

    claude, MODEL, TOOLS = Claude(), "claude-opus-4-6", [{"name": "get_weather"}]
    c = client
    sid = c.create(system="You are a careful coding agent.")["session_id"]
    c.add_user(sid, "What is in README.md?")
    while True:
        body = c.export(sid, "anthropic_messages", model=MODEL)["payload"]  # {system?, messages}
        response = claude.messages.create(
            model=MODEL, max_tokens=8192, tools=TOOLS, thinking={"type": "adaptive"}, **body
        )
        added = c.add_response(sid, "anthropic_messages", response)  # kept as it came
        if not added["tool_call_ids"]:
            break
        for block in response.content:
            if block.type == "tool_use":
                c.add_tool_result(sid, block.id, run_tool(block.name, block.input))

    assert len(sent) == 2 and sent[1]["system"] == "You are a careful coding agent."
    first_turn = sent[1]["messages"][1]
    assert first_turn == {"role": "assistant", "content": answers[0]["content"]}
    results = sent[1]["messages"][2]["content"]
    assert [r["tool_use_id"] for r in results] == call_ids("anthropic_messages", answers[0])
    assert [m["role"] for m in c.history(sid)["messages"]] == ["user", "assistant", "tool", "tool", "assistant"]


# ---------------------------------------------------------------------------- Gemini Interactions

# A 1×1 PNG: export sends an image on only when it can tell its type.
PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def test_an_interaction_without_an_id_and_one_with_built_in_tool_steps(client: convo.Client) -> None:
    """`store: false` leaves the Interaction without an id; built-in tool steps are kept
    in the turn as they came (their calls are the API's, not the host's)."""
    client.create("i")
    client.add_user("i", "Name Spain's three largest cities.")
    stateless = load("gemini_interactions_stateless")
    assert "id" not in stateless
    assert client.add_response("i", "gemini_interactions", stateless)["tool_call_ids"] == []
    last = client.history("i")["messages"][-1]
    assert last["metadata"] == {"response_id": None, "stop_reason": "completed"}
    assert last["usage"] == {
        "input_tokens": 14,
        "output_tokens": 31 + 158,
        "cache_read_tokens": 0,
        "cache_write_tokens": None,
        "reasoning_tokens": 158,
    }
    client.add_user("i", "Where is Euro 2028?")
    searched = load("gemini_interactions_builtin_tool")
    assert client.add_response("i", "gemini_interactions", searched)["tool_call_ids"] == []
    exported = client.export("i", "gemini_interactions")
    assert exported["warnings"] == []
    assert [wire(t) for t in replayed("gemini_interactions", exported["payload"])] == [
        wire(stateless["steps"]),
        wire(searched["steps"]),
    ]


def test_a_request_body_imports_and_exports_back(client: convo.Client) -> None:
    """from_dict takes an Interactions request body `{system_instruction, input}`: the
    model's steps come back as they were; a function result as its text (an object
    result as its JSON)."""
    body = load("gemini_interactions_request")
    info = client.from_dict(body, format="gemini_interactions", session_id="req")
    assert info["system"] == body["system_instruction"]
    exported = client.export("req", "gemini_interactions")["payload"]
    assert exported["system_instruction"] == body["system_instruction"]

    def as_text(step: dict[str, Any]) -> dict[str, Any]:
        if step["type"] == "function_result" and not isinstance(step["result"], str):
            return {**step, "result": json.dumps(step["result"], separators=(",", ":"))}
        return step

    assert exported["input"] == [as_text(step) for step in body["input"]]


@arun
async def test_tool_result_images_async() -> None:
    async with convo.AsyncClient(store="memory") as c:
        await c.create("s")
        await c.add_user("s", "Take a screenshot.")
        calls = [
            {"id": "c1", "name": "screenshot", "arguments": {}},
            {"id": "c2", "name": "screenshot", "arguments": {}},
        ]
        await c.add_assistant("s", None, calls)
        await c.add_tool_result("s", "c1", "the screen", [PNG_1X1])
        # The same image again, by the ref the store shows it as.
        shown = (await c.history("s", images="ref"))["messages"][2]["images"][0]
        await c.add_tool_result("s", "c2", "again", images=[{"ref": shown["ref"]}])
        exported = await c.export("s", "anthropic_messages")
        assert exported["warnings"] == []
        image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_1X1}}
        assert exported["payload"]["messages"][2]["content"] == [
            {"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text", "text": "the screen"}, image]},
            {"type": "tool_result", "tool_use_id": "c2", "content": [{"type": "text", "text": "again"}, image]},
        ]
        chat = await c.export("s", "openai_chat")
        assert [w["index"] for w in chat["warnings"]] == [2, 3]  # Chat Completions cannot carry them
        assert '"c1"' in chat["warnings"][0]["message"]


def test_tool_result_images_sync(client: convo.Client) -> None:
    client.create("s")
    client.add_user("s", "Take a screenshot.")
    client.add_assistant("s", None, [{"id": "c1", "name": "screenshot", "arguments": {}}])
    client.add_tool_result("s", "c1", "the screen", images=[PNG_1X1])
    assert client.history("s")["messages"][-1]["images"] == [PNG_1X1]
    result = client.export("s", "gemini_interactions")["payload"]["input"][-1]
    assert result == {
        "type": "function_result",
        "call_id": "c1",
        "name": "screenshot",
        "result": [
            {"type": "text", "text": "the screen"},
            {"type": "image", "data": PNG_1X1, "mime_type": "image/png"},
        ],
    }
