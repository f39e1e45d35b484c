"""The protocol's objects as ``TypedDict`` s, for annotations.

Results are plain dicts (JSON objects as convo sent them); these types name their members
for a type checker: ``info: convo.types.SessionInfo = c.get("demo")`` needs a ``cast``
where a method is annotated ``dict[str, Any]``. :meth:`~convo.AsyncClient.add_response`
returns :class:`AddedResponse`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol, TypedDict

__all__ = [
    "Format",
    "FORMATS",
    "Role",
    "Usage",
    "UsageTotals",
    "Native",
    "ToolCall",
    "Message",
    "ForkedFrom",
    "SessionInfo",
    "Added",
    "AddedMany",
    "AddedResponse",
    "SupportsModelDump",
    "ResponseObject",
]

# The provider body formats: what export, validate, count_tokens, trim, from_dict and
# add_response take (initialize lists them in `capabilities["formats"]`).
Format = Literal["openai_chat", "openai_responses", "anthropic_messages", "gemini_contents"]
FORMATS: tuple[Format, ...] = ("openai_chat", "openai_responses", "anthropic_messages", "gemini_contents")

Role = Literal["system", "user", "assistant", "tool"]


class Usage(TypedDict):
    """What one response cost, normalised across providers; ``None`` where the provider
    did not say. ``input_tokens`` counts cached input too, ``output_tokens`` reasoning."""

    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None


class UsageTotals(TypedDict):
    """``SessionInfo.usage``: each member the sum of the non-null :class:`Usage` values of
    every response appended since the session was created (trim, rewind, clear and
    compact do not lower it; a fork starts at zero)."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int


class Native(TypedDict):
    """An assistant turn in its provider's own form. ``body`` is the turn exactly as the
    provider returned it (Anthropic the Message's ``content``; the Responses API the
    ``output`` items; Chat ``choices[0].message``; Gemini the candidate's ``content``);
    an export to ``format`` replays it verbatim."""

    format: Format
    model: str | None
    body: Any


class ToolCall(TypedDict, total=False):
    id: str
    name: str
    arguments: Any


class Message(TypedDict):
    """A stored message (``session/history``, ``to_dict``). ``native`` and ``usage`` are
    set on a turn appended with ``add_response`` (or given ``native``), else ``None``."""

    id: str | None
    role: Role
    content: str | list[dict[str, Any]] | None
    name: str | None
    tool_call_id: str | None
    tool_calls: list[ToolCall] | None
    images: list[Any] | None
    metadata: dict[str, Any] | None
    native: Native | None
    usage: Usage | None
    created_at: str


class ForkedFrom(TypedDict):
    session_id: str
    message_id: str | None


class SessionInfo(TypedDict):
    session_id: str
    system: str | None
    cwd: str | None
    title: str | None
    metadata: dict[str, Any] | None
    message_count: int
    revision: int
    created_at: str
    updated_at: str
    forked_from: ForkedFrom | None
    usage: UsageTotals


class _Added(TypedDict):
    message_id: str
    index: int
    revision: int


class Added(_Added, total=False):
    """What ``add_user``, ``add_assistant``, ``add_tool_result`` and ``add_message`` answer.
    ``duplicate`` (only ever ``True``, absent otherwise): the append was a retry of one the
    history holds (its ``message_id``); this is the first reply, and nothing changed."""

    duplicate: Literal[True]


class _AddedMany(TypedDict):
    message_ids: list[str]
    revision: int


class AddedMany(_AddedMany, total=False):
    """``session/add_messages``'s result; ``duplicate`` as in :class:`Added` (every
    message was stored already, the same)."""

    duplicate: Literal[True]


class _AddedResponse(_Added):
    tool_call_ids: list[str]


class AddedResponse(_AddedResponse, total=False):
    """``session/add_response``'s result: ``tool_call_ids`` are the ids of the calls the
    turn made, in order (``[]`` for none) — what their results must name (the Responses
    API's ``call_id``; ``call_<n>`` for a Gemini call without an id). ``duplicate`` as in
    :class:`Added`."""

    duplicate: Literal[True]


class SupportsModelDump(Protocol):
    """A provider SDK's response object: a pydantic model (``anthropic.types.Message``,
    ``openai.types.responses.Response``, ``openai.types.chat.ChatCompletion``,
    ``google.genai.types.GenerateContentResponse``)."""

    def model_dump(self, *args: Any, **kwargs: Any) -> dict[str, Any]: ...


# What add_response takes: the response as JSON (a dict, as the HTTP body decodes), or the
# SDK object the provider's client returned.
ResponseObject = Mapping[str, Any] | SupportsModelDump
