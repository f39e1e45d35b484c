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
    "Compaction",
    "ClearToolResults",
    "ClearThinking",
    "Fit",
    "CacheOptions",
    "Cache",
    "ContextLeftOut",
    "Edits",
    "Fitted",
    "ExportWarning",
    "Exported",
    "Counted",
    "TooLargeData",
]

# The provider body formats: what export, validate, count_tokens, trim, from_dict and
# add_response take (initialize lists them in `capabilities["formats"]`).
Format = Literal["openai_chat", "openai_responses", "anthropic_messages", "gemini_contents", "gemini_interactions"]
FORMATS: tuple[Format, ...] = (
    "openai_chat",
    "openai_responses",
    "anthropic_messages",
    "gemini_contents",
    "gemini_interactions",
)

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
    ``google.genai.types.GenerateContentResponse``, google-genai's Interactions
    ``Interaction``)."""

    def model_dump(self, *args: Any, **kwargs: Any) -> dict[str, Any]: ...


# What add_response takes: the response as JSON (a dict, as the HTTP body decodes), or the
# SDK object the provider's client returned.
ResponseObject = Mapping[str, Any] | SupportsModelDump


# ---------------------------------------------------------------- context management (§17)
# The options `export` and `count_tokens` take (`validate` takes `cache`). They edit the
# body on its way out, never the stored history, in this order: compaction,
# clear_thinking, clear_tool_results, fit, then cache.

# "use" (convo's default): an export to the format of the latest compaction point (an
# Anthropic `compaction` block, a Responses `compaction` item) starts there, the messages
# before it left out (the reply's `context`); "ignore": the whole history is sent.
Compaction = Literal["use", "ignore"]


class ClearToolResults(TypedDict, total=False):
    """``clear_tool_results``: the results of all but the last ``keep`` (default 3) tool
    calls are sent with their content ``placeholder`` (default ``"[tool result cleared to
    save context]"``) and no images; the calls of ``exclude_tools`` are never cleared,
    nor counted."""

    keep: int
    exclude_tools: list[str]
    placeholder: str


class ClearThinking(TypedDict, total=False):
    """``clear_thinking``: the reasoning of all but the last ``keep`` (default 1)
    assistant messages that carry reasoning is left out, never the current turn's."""

    keep: int


class _Fit(TypedDict):
    max_tokens: int


class Fit(_Fit, total=False):
    """``fit``: when the body is larger than ``max_tokens``, tool results are cleared
    oldest first, then the reasoning of older turns left out, then whole oldest turns,
    never the last ``keep_turns`` (default 1). One that cannot fit is
    :class:`~convo.TooLarge` (``tokens``, ``max_tokens``), and nothing is exported."""

    keep_turns: int


class CacheOptions(TypedDict, total=False):
    """``cache`` as an object. ``anthropic_messages``: ``ttl`` on every breakpoint (the
    system prompt's too, without ``system_ttl``), ``system_ttl`` the system prompt's (not
    shorter than ``ttl``). ``openai_chat``, ``openai_responses``: ``key`` the
    ``prompt_cache_key`` (default: the session id), ``retention`` the
    ``prompt_cache_retention``."""

    ttl: Literal["5m", "1h"]
    system_ttl: Literal["5m", "1h"]
    key: str
    retention: Literal["in_memory", "24h"]


# ``cache``: ``True`` (convo's placement, the provider's default TTL) or the options.
# Anthropic: cache_control breakpoints on the system prompt, the end of the previous
# request and the body's end (at most 4); OpenAI: prompt_cache_key; Gemini: nothing,
# with a warning (it caches implicitly).
Cache = bool | CacheOptions


class ContextLeftOut(TypedDict):
    """The reply's ``context``: the body starts at the compaction point at history index
    ``from_index``; the messages before it were left out."""

    from_index: int


class Edits(TypedDict):
    """The reply's ``edits`` (``clear_tool_results`` or ``clear_thinking`` given); tokens
    counted as ``count_tokens`` counts them."""

    cleared_tool_results: int
    cleared_thinking_turns: int
    cleared_tokens: int


class Fitted(TypedDict):
    """The reply's ``fit`` (``fit`` given): the body's tokens before and after, and what
    was cleared or left out to get there."""

    tokens_before: int
    tokens: int
    cleared_tool_results: int
    cleared_thinking_turns: int
    turns_left_out: int


class ExportWarning(TypedDict):
    """What export changed or could not express; ``index`` is the history message's."""

    index: int | None
    message: str


class _Exported(TypedDict):
    payload: dict[str, Any]
    warnings: list[ExportWarning]


class Exported(_Exported, total=False):
    """``export``'s result. ``context``, ``edits`` and ``fit`` are present only when the
    option was given or messages before a compaction point were left out."""

    context: ContextLeftOut
    edits: Edits
    fit: Fitted


class _Counted(TypedDict):
    tokens: int


class Counted(_Counted, total=False):
    """``count_tokens``' result: the tokens of the body :meth:`~convo.AsyncClient.export`
    would send with the same options, and ``context``, ``edits``, ``fit`` as it has them."""

    context: ContextLeftOut
    edits: Edits
    fit: Fitted


class _TooLargeData(TypedDict):
    kind: Literal["too_large"]


class TooLargeData(_TooLargeData, total=False):
    """The ``data`` of 1005 (:class:`~convo.TooLarge`): ``limit`` when a reply would be
    over ``--max-message-bytes``; ``tokens`` (the smallest body convo could make) and
    ``max_tokens`` when a ``fit`` cannot be met."""

    limit: int
    tokens: int
    max_tokens: int
