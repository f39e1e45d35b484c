"""Context management (spec section 17) against the real binary: the options of export,
count_tokens and validate, the reply's ``context``, ``edits`` and ``fit``, and the
:class:`convo.TooLarge` of a fit that cannot be met."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

import convo
from conftest import arun
from convo.types import Counted, Exported

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "providers"


def tool_loop(c: convo.Client, session_id: str, turns: int = 3) -> None:
    """A system prompt and ``turns`` user turns, each a loop of four calls (``run`` and
    ``read_file`` in turn) with long results, then a final answer."""
    c.create(session_id, system="You are a coding agent.")
    for turn in range(turns):
        c.add_user(session_id, f"Task {turn}: fix the failing build.")
        for step in range(4):
            call_id = f"call_{turn}_{step}"
            name = "read_file" if step % 2 else "run"
            c.add_assistant(
                session_id, f"Step {step}.", [{"id": call_id, "name": name, "arguments": {"path": f"f{step}"}}]
            )
            c.add_tool_result(session_id, call_id, f"line of output {step} " * 60)
        c.add_assistant(session_id, "Fixed: the build passes.")


def breakpoints(payload: dict[str, Any]) -> list[Any]:
    """The cache_control of every block of an Anthropic body that has one, in order."""
    system = payload.get("system")
    blocks = system if isinstance(system, list) else []
    blocks = blocks + [b for m in payload["messages"] if isinstance(m["content"], list) for b in m["content"]]
    return [b["cache_control"] for b in blocks if "cache_control" in b]


def test_capabilities_list_the_context_options(client: convo.Client) -> None:
    assert client.capabilities["context"] == ["compaction", "clear_thinking", "clear_tool_results", "fit", "cache"]


def test_export_with_fit_and_cache(client: convo.Client) -> None:
    tool_loop(client, "loop")
    before = client.count_tokens("loop", "anthropic_messages")
    assert set(before) == {"tokens"}  # no option: the reply is as it always was

    budget = before["tokens"] // 2
    preview: Counted = client.count_tokens("loop", "anthropic_messages", fit={"max_tokens": budget})
    fitted = preview["fit"]
    assert fitted["tokens_before"] == before["tokens"]
    assert preview["tokens"] == fitted["tokens"] <= budget
    assert fitted["cleared_tool_results"] > 0 or fitted["turns_left_out"] > 0

    exported: Exported = client.export(
        "loop", "anthropic_messages", fit={"max_tokens": budget}, cache={"ttl": "5m", "system_ttl": "1h"}
    )
    assert exported["fit"] == fitted  # count_tokens previewed the very body export sends
    assert "context" not in exported and "edits" not in exported
    payload = exported["payload"]
    assert payload["system"] == [
        {"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    ]
    marks = breakpoints(payload)
    assert 2 <= len(marks) <= 4 and marks[1:] == [{"type": "ephemeral", "ttl": "5m"}] * (len(marks) - 1)
    # The last turn is kept whole (keep_turns 1); the oldest are cleared or left out.
    assert payload["messages"][-1]["content"][-1]["text"] == "Fixed: the build passes."
    assert client.validate("loop", "anthropic_messages", cache=True) == {"violations": []}

    # cache=True: OpenAI's prompt_cache_key is the session id; key and retention.
    chat = client.export("loop", "openai_chat", cache=True)["payload"]
    assert chat["prompt_cache_key"] == "loop" and "prompt_cache_retention" not in chat
    responses = client.export("loop", "openai_responses", cache={"key": "k-1", "retention": "24h"})["payload"]
    assert (responses["prompt_cache_key"], responses["prompt_cache_retention"]) == ("k-1", "24h")
    gemini = client.export("loop", "gemini_contents", cache=True)
    assert {"index": None, "message": "cache adds nothing: Gemini caches implicitly"} in gemini["warnings"]
    with pytest.raises(convo.InvalidParams, match="system_ttl"):
        client.export("loop", "anthropic_messages", cache={"ttl": "1h", "system_ttl": "5m"})

    # The stored history never changed.
    assert client.count_tokens("loop", "anthropic_messages") == before


def test_clearing_options(client: convo.Client) -> None:
    tool_loop(client, "loop")
    options: dict[str, Any] = {
        "clear_tool_results": {"keep": 2, "exclude_tools": ["run"], "placeholder": "[cleared]"},
        "clear_thinking": {"keep": 0},
    }
    exported = client.export("loop", "anthropic_messages", **options)
    # Six read_file results, the last two kept: four cleared; run's never.
    edits = exported["edits"]
    assert edits["cleared_tool_results"] == 4 and edits["cleared_thinking_turns"] == 0 and edits["cleared_tokens"] > 0
    results = [
        b
        for m in exported["payload"]["messages"]
        if m["role"] == "user"
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert len(results) == 12 and sum(r["content"] == "[cleared]" for r in results) == 4
    assert "fit" not in exported
    counted = client.count_tokens("loop", "anthropic_messages", **options)
    assert counted["edits"] == edits
    assert counted["tokens"] == client.count_tokens("loop", "anthropic_messages")["tokens"] - edits["cleared_tokens"]


def test_an_impossible_fit_is_too_large(client: convo.Client) -> None:
    tool_loop(client, "loop")
    with pytest.raises(convo.TooLarge) as caught:
        client.export("loop", "anthropic_messages", fit={"max_tokens": 10})
    e = caught.value
    assert e.code == 1005 and e.kind == "too_large"
    assert e.max_tokens == 10 and e.tokens is not None and e.tokens > 10
    assert e.data == {"kind": "too_large", "tokens": e.tokens, "max_tokens": 10}
    # The smallest body convo could make is what a fit to exactly that size gives.
    assert client.count_tokens("loop", "anthropic_messages", fit={"max_tokens": e.tokens})["tokens"] == e.tokens
    with pytest.raises(convo.TooLarge) as two:
        client.count_tokens("loop", "anthropic_messages", fit={"max_tokens": e.tokens, "keep_turns": 2})
    assert two.value.tokens is not None and two.value.tokens > e.tokens


@arun
async def test_compaction_point_from_an_anthropic_response() -> None:
    """A response whose content starts with a compaction block: usage summed over
    ``usage.iterations``, an Anthropic export from that point (``context.from_index``),
    the whole history to Chat Completions with a warning, ``compaction="ignore"``."""
    response = json.loads((FIXTURES / "anthropic_compaction_iterations.json").read_text(encoding="utf-8"))
    async with convo.AsyncClient(store="memory") as c:
        await c.create("trip", system="You are a concise travel assistant.")
        await c.add_user("trip", "Plan a week in Paris and London.")
        await c.add_assistant("trip", "Paris first, then London.")
        await c.add_user("trip", "How long is the train?")
        added = await c.add_response("trip", "anthropic_messages", response)
        assert added["index"] == 3
        usage = (await c.get("trip"))["usage"]
        assert (usage["input_tokens"], usage["output_tokens"]) == (180000 + 23000, 3500 + 1000)

        exported = await c.export("trip", "anthropic_messages")
        assert exported["context"] == {"from_index": 3}
        messages = exported["payload"]["messages"]
        assert messages[1] == {"role": "assistant", "content": response["content"]}
        assert "Plan a week" not in json.dumps(messages)

        counted = await c.count_tokens("trip", "anthropic_messages")
        whole = await c.count_tokens("trip", "anthropic_messages", compaction="ignore")
        assert counted["context"] == {"from_index": 3} and "context" not in whole
        assert whole["tokens"] > counted["tokens"]
        assert "context" not in await c.export("trip", "anthropic_messages", compaction="ignore")

        chat = await c.export("trip", "openai_chat")
        assert "context" not in chat and "Plan a week" in json.dumps(chat["payload"])
        assert {
            "index": 3,
            "message": "compaction left out: Chat Completions cannot read anthropic_messages's compaction; "
            "the history before it is sent instead",
        } in chat["warnings"]


def test_the_compact_endpoints_result_is_a_compaction_point(client: convo.Client) -> None:
    """``responses.compact``'s result (``object: "response.compaction"``): an
    ``openai_responses`` export starts at it and sends its output back as it is."""
    compacted = json.loads((FIXTURES / "openai_responses_compacted.json").read_text(encoding="utf-8"))
    client.create("gpt", system="Be brief.")
    client.add_user("gpt", "What should I pack?")
    client.add_assistant("gpt", "Rain gear.")
    added = client.add_response("gpt", "openai_responses", compacted)
    client.add_user("gpt", "And the train?")
    exported = client.export("gpt", "openai_responses")
    assert exported["context"] == {"from_index": added["index"]}
    assert exported["payload"]["input"][:-1] == compacted["output"]
    assert exported["payload"]["input"][-1]["content"][0]["text"] == "And the train?"
