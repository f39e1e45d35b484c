"""pydantic-ai's message history, stored by convo (``pip install 'convo[pydantic-ai]'``).

Two ways in, one constructor each:

``message_history=`` — :class:`ConvoMessageHistory` loads and appends ``ModelMessage`` s::

    history = ConvoMessageHistory("chat-42", store="sqlite:chats.db")
    result = await agent.run("Hello", message_history=await history.load())
    await history.append(result)            # or result.new_messages()

``ConversationStore`` — :class:`ConvoConversationStore` keeps each ``Conversation`` as a
convo session (``conversation_id`` is the session id) holding its current branch::

    # store = InMemoryConversationStore()
    store = ConvoConversationStore(store="sqlite:chats.db")
    conversation = await store.load(cid) or Conversation(conversation_id=cid)
    result = await agent.run("Hello", conversation=conversation)
    await store.save(result)

How messages are kept: each ``ModelMessage`` becomes the convo messages a provider would
see — a request's user prompt a ``user`` message, each tool return (and tool retry) a
``tool`` message, a response ONE ``assistant`` message with its text and all its tool
calls (an empty response is kept with ``allow_empty``) — and the message itself, as
``ModelMessagesTypeAdapter`` serialises it, rides in the first one's
``metadata["pydantic_ai"]``, so it comes back equal from any process. A response whose
thinking carries a provider signature (Anthropic ``signature``, OpenAI Responses
``encrypted_content``) is stored with ``native`` in that provider's format, so convo's
export to it replays the thinking exactly.

Loading reads convo's repaired history: a tool call a crash left without its result comes
back answered, by a ``ToolReturnPart`` carrying convo's cancellation text, so the next
run does not stop at "unprocessed tool calls". Calls the framework itself is waiting on
(``DeferredToolRequests``: approvals, external calls) are left as they are.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai._deferred import DeferredToolRequests
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RunUsage

from .._client import AsyncClient
from .._default import default_client
from .._sync import Client
from ..errors import RevisionConflict, SessionExists, SessionNotFound
from . import CANCELLED, _Bridge, convo_session_id

try:  # pydantic-ai 2.68 has the ConversationStore base class
    from pydantic_ai.conversation_store import (
        ConversationConflict,
        ConversationEntry,
        ConversationRecord,
        ConversationStore,
    )
except ImportError:  # pragma: no cover - an older pydantic-ai
    ConversationStore = None  # type: ignore[assignment,misc]

__all__ = ["ConvoMessageHistory", "ConvoConversationStore", "CANCELLED", "convo_messages_for"]

META = "pydantic_ai"
RECORD = "pydantic_ai_conversation"
BRANCH = "pydantic_ai_branch"
DEFERRED = "pydantic_ai_deferred"

_usage_adapter: TypeAdapter[RunUsage] = TypeAdapter(RunUsage)
_deferred_adapter: TypeAdapter[DeferredToolRequests | None] = TypeAdapter(DeferredToolRequests | None)


def _dump(message: ModelMessage) -> Any:
    return ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]


def _load(data: Any) -> ModelMessage:
    return ModelMessagesTypeAdapter.validate_python([data])[0]


def _parse_time(text: str | None) -> datetime:
    if not text:
        return datetime.now(timezone.utc)
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# ---------------------------------------------------------------------------- messages -> convo


def _user_message(part: UserPromptPart) -> dict[str, Any]:
    content = part.content
    if isinstance(content, str):
        return {"role": "user", "content": content}
    parts: list[Any] = []
    images: list[str] = []
    for item in content:
        if isinstance(item, str):
            parts.append({"type": "text", "text": item})
        elif isinstance(item, BinaryContent) and item.is_image:
            images.append(item.base64)
        elif isinstance(item, TextContent):
            parts.append({"type": "text", "text": item.content})
    message: dict[str, Any] = {"role": "user", "content": parts}
    if images:
        message["images"] = images
    return message


def _anthropic_body(parts: Sequence[Any]) -> list[Any] | None:
    body: list[Any] = []
    for part in parts:
        if isinstance(part, ThinkingPart):
            if part.signature is None:
                continue
            body.append({"type": "thinking", "thinking": part.content, "signature": part.signature})
        elif isinstance(part, TextPart):
            body.append({"type": "text", "text": part.content})
        elif type(part) is ToolCallPart:
            body.append(
                {"type": "tool_use", "id": part.tool_call_id, "name": part.tool_name, "input": part.args_as_dict()}
            )
        else:
            return None
    return body


def _responses_body(parts: Sequence[Any]) -> list[Any] | None:
    body: list[Any] = []
    for part in parts:
        if isinstance(part, ThinkingPart):
            item: dict[str, Any] = {"type": "reasoning"}
            if part.id:
                item["id"] = part.id
            item["summary"] = [{"type": "summary_text", "text": part.content}] if part.content else []
            if part.signature is not None:
                item["encrypted_content"] = part.signature
            body.append(item)
        elif isinstance(part, TextPart):
            message: dict[str, Any] = {"type": "message", "role": "assistant"}
            if part.id:
                message["id"] = part.id
            message["content"] = [{"type": "output_text", "text": part.content, "annotations": []}]
            body.append(message)
        elif type(part) is ToolCallPart:
            call: dict[str, Any] = {"type": "function_call"}
            if part.id:
                call["id"] = part.id
            call.update(call_id=part.tool_call_id, name=part.tool_name, arguments=part.args_as_json_str())
            body.append(call)
        else:
            return None
    return body


def _native(response: ModelResponse) -> dict[str, Any] | None:
    """The provider's own form of a response whose thinking is signed, so convo replays it."""
    signed = {p.provider_name for p in response.parts if isinstance(p, ThinkingPart) and p.signature is not None}
    if len(signed) != 1:
        return None
    (provider,) = signed
    if provider == "anthropic":
        body, fmt = _anthropic_body(response.parts), "anthropic_messages"
    elif provider == "openai":
        body, fmt = _responses_body(response.parts), "openai_responses"
    else:
        return None
    if body is None:
        return None
    return {"format": fmt, "model": response.model_name, "body": body}


def _response_message(response: ModelResponse) -> dict[str, Any]:
    native = _native(response)
    if native is not None:
        return {"role": "assistant", "native": native}
    texts = [p.content for p in response.parts if isinstance(p, TextPart) and p.content]
    calls = [
        {"id": p.tool_call_id, "name": p.tool_name, "arguments": p.args_as_dict()}
        for p in response.parts
        if type(p) is ToolCallPart
    ]
    content: Any = None
    if len(texts) == 1:
        content = texts[0]
    elif texts:
        content = [{"type": "text", "text": t} for t in texts]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    if content is None and not calls:
        message["allow_empty"] = True  # the model answered nothing (or only what convo cannot show)
    return message


def convo_messages_for(message: ModelMessage, entry_id: str) -> list[dict[str, Any]]:
    """The convo messages (as ``add_messages`` takes them) that hold one ``ModelMessage``;
    the first carries the message itself in ``metadata["pydantic_ai"]``."""
    out: list[dict[str, Any]] = []
    if isinstance(message, ModelResponse):
        out.append(_response_message(message))
    else:
        system: list[str] = []
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                out.append(_user_message(part))
            elif isinstance(part, ToolReturnPart):
                out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response_str()})
            elif isinstance(part, RetryPromptPart):
                if part.tool_name is not None:
                    out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response()})
                else:
                    out.append({"role": "user", "content": part.model_response()})
            elif isinstance(part, SystemPromptPart):
                system.append(part.content)
        if not out:
            # Nothing a provider sees as a turn (system prompts, instructions only).
            out.append(
                {"role": "system", "content": "\n\n".join(system)} if system else {"role": "user", "content": ""}
            )
    out[0]["metadata"] = {META: {"entry": entry_id, "message": _dump(message)}}
    for extra in out[1:]:
        extra["metadata"] = {META: {"entry": entry_id}}
    return out


# ---------------------------------------------------------------------------- convo -> messages


@dataclasses.dataclass
class _Entry:
    id: str
    message: ModelMessage
    convo_ids: list[str | None]  # the convo messages holding it (None: a repaired view's)


def _entry_of(meta: Any) -> tuple[str | None, Any]:
    if isinstance(meta, Mapping):
        mine = meta.get(META)
        if isinstance(mine, Mapping) and isinstance(mine.get("entry"), str):
            return mine["entry"], mine.get("message")
    return None, None


def _foreign_response(message: Mapping[str, Any]) -> ModelResponse:
    parts: list[Any] = []
    content = message.get("content")
    if isinstance(content, str) and content:
        parts.append(TextPart(content))
    elif isinstance(content, list):
        parts.extend(
            TextPart(p.get("text") or "") for p in content if isinstance(p, Mapping) and p.get("type") == "text"
        )
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
        args = call.get("arguments", call.get("input", function.get("arguments")))
        parts.append(ToolCallPart(call.get("name") or function.get("name") or "", args, tool_call_id=call["id"]))
    return ModelResponse(parts=parts, timestamp=_parse_time(message.get("created_at")))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text") or "" for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return "" if content is None else json.dumps(content)


def _entries(messages: Sequence[Mapping[str, Any]], skip_repair: set[str]) -> list[_Entry]:
    """Group convo messages into ModelMessages. Ours come back as they were stored; those of
    another writer, and the results convo's rules or repair added, are converted: a run of
    user and tool messages is one ModelRequest, an assistant message one ModelResponse."""
    entries: list[_Entry] = []
    names: dict[str, str] = {}  # call id -> tool name
    call_time: dict[str, datetime | None] = {}
    foreign_parts: list[Any] = []
    foreign_ids: list[str | None] = []
    foreign_time: datetime | None = None

    def flush() -> None:
        nonlocal foreign_parts, foreign_ids, foreign_time
        if foreign_parts:
            first = next((i for i in foreign_ids if i), None)
            eid = f"convo:{first}" if first else f"{entries[-1].id if entries else 'start'}:repaired"
            request = ModelRequest(parts=foreign_parts, timestamp=foreign_time)
            entries.append(_Entry(eid, request, foreign_ids))
        foreign_parts, foreign_ids, foreign_time = [], [], None

    for m in messages:
        eid, data = _entry_of(m.get("metadata"))
        if eid is not None:
            flush()
            if entries and entries[-1].id == eid and data is None:
                entries[-1].convo_ids.append(m.get("id"))
                continue
            message = _load(data) if data is not None else None
            if message is None:
                continue
            entries.append(_Entry(eid, message, [m.get("id")]))
            if isinstance(message, ModelResponse):
                for p in message.parts:
                    if isinstance(p, ToolCallPart):
                        names[p.tool_call_id] = p.tool_name
                        call_time[p.tool_call_id] = message.timestamp
            continue
        role = m.get("role")
        if role == "assistant":
            flush()
            response = _foreign_response(m)
            for p in response.parts:
                if isinstance(p, ToolCallPart):
                    names[p.tool_call_id] = p.tool_name
                    call_time[p.tool_call_id] = response.timestamp
            entries.append(_Entry(f"convo:{m.get('id')}", response, [m.get("id")]))
            continue
        synthetic = m.get("id") is None or (m.get("metadata") or {}).get("synthetic") is True
        if role == "tool":
            call_id = m.get("tool_call_id") or ""
            if m.get("id") is None and call_id in skip_repair:
                continue  # a call the framework is waiting on: not repaired
            # A cancellation (stored or repaired) is dated as its call, so the stored one
            # and the repaired view's are the same message.
            when = call_time.get(call_id) if synthetic else None
            when = when or _parse_time(m.get("created_at"))
            foreign_parts.append(
                ToolReturnPart(names.get(call_id, ""), _text(m.get("content")), tool_call_id=call_id, timestamp=when)
            )
        elif role == "user":
            when = _parse_time(m.get("created_at"))
            foreign_parts.append(UserPromptPart(_text(m.get("content")), timestamp=when))
        elif role == "system":
            foreign_parts.append(SystemPromptPart(_text(m.get("content"))))
        else:
            continue
        if foreign_time is None:
            foreign_time = foreign_parts[-1].timestamp if hasattr(foreign_parts[-1], "timestamp") else None
        foreign_ids.append(m.get("id"))
    flush()
    return entries


def _deferred_ids(requests: DeferredToolRequests | None) -> set[str]:
    if requests is None:
        return set()
    return {c.tool_call_id for c in [*requests.calls, *requests.approvals]}


# ---------------------------------------------------------------------------- message history


class ConvoMessageHistory:
    """A pydantic-ai message history kept in a convo session.

    ``session_id``: the convo session (created on the first append; an id outside convo's
    charset is mapped to ``pydantic-ai-<sha256>``). ``store`` / ``client``: as for
    :class:`convo.integrations.openai_agents.ConvoSession` (a convo child of its own, a
    shared :class:`convo.Client`, or the process-wide default).
    """

    def __init__(self, session_id: str, *, store: str | None = None, client: Client | AsyncClient | None = None):
        self.session_id = session_id
        self.convo_session_id = convo_session_id(session_id, "pydantic-ai")
        self._bridge = _Bridge(client, store, default_client)

    @property
    def client(self) -> Client | AsyncClient:
        return self._bridge.client

    def close(self) -> None:
        """Close the convo child this history started (``store=``)."""
        self._bridge.close()

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await self._bridge.call(method, self.convo_session_id, *args, **kwargs)

    async def load(self) -> list[ModelMessage]:
        """The stored messages, to pass as ``message_history=``. A tool call left without its
        result (a crash) comes back answered by a ``ToolReturnPart`` with convo's
        cancellation text (nothing is stored); calls the last run deferred do not."""
        try:
            page, info = await asyncio.gather(self._call("history"), self._call("get"))
        except SessionNotFound:
            return []
        metadata = info.get("metadata") or {}
        deferred = set(metadata.get(DEFERRED) or [])
        return [e.message for e in _entries(page["messages"], deferred)]

    async def append(
        self,
        messages: Sequence[ModelMessage] | Any,
        *,
        deferred_tool_requests: DeferredToolRequests | None = None,
    ) -> None:
        """Append a run's new messages (``result.new_messages()``), or give the run's result
        itself: then its new messages are appended, and when it ended waiting on deferred
        tool calls (``DeferredToolRequests``) those calls are not repaired on load."""
        if hasattr(messages, "new_messages"):
            result: Any = messages
            messages = result.new_messages()
            if deferred_tool_requests is None and isinstance(getattr(result, "output", None), DeferredToolRequests):
                deferred_tool_requests = result.output
        convo = [m for message in messages for m in convo_messages_for(message, str(uuid.uuid4()))]
        pending = sorted(_deferred_ids(deferred_tool_requests))
        if convo:
            try:
                await self._call("add_messages", convo)
            except SessionNotFound:
                try:
                    await self._call("create")
                except SessionExists:
                    pass
                await self._call("add_messages", convo)
        try:
            info = await self._call("get")
        except SessionNotFound:
            if not pending:
                return
            await self._call("create")
            info = await self._call("get")
        metadata = dict(info.get("metadata") or {})
        if (metadata.get(DEFERRED) or []) != pending:
            if pending:
                metadata[DEFERRED] = pending
            else:
                metadata.pop(DEFERRED, None)
            await self._call("update", metadata=metadata or None)

    async def clear(self) -> None:
        """Drop every message (the session stays)."""
        try:
            await self._call("clear")
        except SessionNotFound:
            pass


# ---------------------------------------------------------------------------- conversation store


def _token(info: Mapping[str, Any]) -> str:
    """A record revision: convo's revision, tied to the session's creation (a session
    deleted and created again under the same id never matches an old token)."""
    return f"{info['revision']}@{info['created_at']}"


def _untoken(token: str) -> tuple[int, str]:
    revision, _, created = token.partition("@")
    return int(revision), created


if ConversationStore is not None:

    class ConvoConversationStore(ConversationStore):
        """A pydantic-ai ``ConversationStore`` on convo.

        Each conversation is a convo session whose id is the ``conversation_id`` (mapped to
        ``pydantic-ai-<sha256>`` outside convo's charset) and whose history is the
        conversation's current branch, one ``ConversationEntry`` per ``ModelMessage``. The
        record (usage, deferred tool requests, scope, fork origin, branches) is the
        session's metadata; its ``revision`` is convo's, so a save over a stale copy is
        convo's 1003, raised as ``ConversationConflict``. A branch the conversation leaves is
        kept as a convo fork of the history it had (O(1)); ``fork`` is convo's fork.

        ``store`` / ``client``: a convo child of its own, a shared :class:`convo.Client`,
        or the process-wide default.
        """

        def __init__(self, *, store: str | None = None, client: Client | AsyncClient | None = None) -> None:
            self._bridge = _Bridge(client, store, default_client)
            # entry id -> the convo session holding it (filled as sessions are read)
            self._convo_where: dict[str, str] = {}
            # convo session id -> its stored entries as last read
            self._convo_entries: dict[str, list[_Entry]] = {}
            # convo session id -> the repaired view's entry after its stored head, if any
            self._convo_repaired: dict[str, _Entry] = {}

        @property
        def client(self) -> Client | AsyncClient:
            return self._bridge.client

        def close(self) -> None:
            """Close the convo child this store started (``store=``)."""
            self._bridge.close()

        async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
            return await self._bridge.call(method, *args, **kwargs)

        @staticmethod
        def _sid(conversation_id: str) -> str:
            return convo_session_id(conversation_id, "pydantic-ai")

        async def _snapshot(self, sid: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
            """A session's info and stored messages at one revision."""
            while True:
                try:
                    page = await self._call("history", sid, repair=False)
                    info = await self._call("get", sid)
                except SessionNotFound:
                    return None
                if info["revision"] == page["revision"]:
                    return info, page["messages"]

        def _remember(self, sid: str, messages: list[dict[str, Any]]) -> list[_Entry]:
            entries = _entries(messages, set())
            self._convo_entries[sid] = entries
            for entry in entries:
                self._convo_where[entry.id] = sid
            return entries

        # -------------------------------------------------------------- reading

        async def read_record(self, conversation_id: str) -> ConversationRecord | None:
            sid = self._sid(conversation_id)
            snapshot = await self._snapshot(sid)
            if snapshot is None:
                return None
            info, messages = snapshot
            metadata = info.get("metadata") or {}
            meta = metadata.get(RECORD)
            if not isinstance(meta, Mapping):
                if metadata.get(BRANCH) is not None:
                    return None  # a branch archive is not a conversation
                meta = {}
            deferred = _deferred_adapter.validate_python(meta.get("deferred_tool_requests"))
            entries = self._remember(sid, messages)
            for tip, archive in (meta.get("branch_sessions") or {}).items():
                self._convo_where.setdefault(tip, archive)
            # A call left without its result (a crash) is answered in the loaded view,
            # unless the conversation is waiting on it (deferred tool requests).
            repaired = await self._repaired_tail(sid, messages, _deferred_ids(deferred))
            if repaired is not None:
                self._convo_repaired[sid] = repaired
            else:
                self._convo_repaired.pop(sid, None)
            return ConversationRecord(
                conversation_id=conversation_id,
                head_id=entries[-1].id if entries else None,
                usage=_usage_adapter.validate_python(meta["usage"]) if meta.get("usage") else RunUsage(),
                deferred_tool_requests=deferred,
                scope=meta.get("scope"),
                forked_from=meta.get("forked_from"),
                forked_at=meta.get("forked_at"),
                branches=list(meta.get("branches") or []),
                revision=_token(info),
                updated_at=_parse_time(info.get("updated_at")),
            )

        async def _repaired_tail(self, sid: str, stored: list[dict[str, Any]], skip: set[str]) -> _Entry | None:
            if not stored or stored[-1].get("role") not in ("assistant", "tool"):
                return None
            try:
                page = await self._call("history", sid, offset=len(stored))
            except SessionNotFound:
                return None
            synthetic = [m for m in page["messages"] if m.get("id") is None and m.get("tool_call_id") not in skip]
            if not synthetic:
                return None
            last = _entries([*stored, *synthetic], skip)[-1]
            return last if last.convo_ids and all(i is None for i in last.convo_ids) else None

        async def read_records(
            self, *, scope: str | None = None, limit: int | None = None
        ) -> Sequence[ConversationRecord]:
            records: list[ConversationRecord] = []
            cursor = None
            while True:
                page = await self._call("list", 1000, cursor)
                for info in page["sessions"]:
                    meta = (info.get("metadata") or {}).get(RECORD)
                    if not isinstance(meta, Mapping):
                        continue
                    if scope is not None and meta.get("scope") != scope:
                        continue
                    record = await self.read_record(meta.get("conversation_id") or info["session_id"])
                    if record is not None:
                        records.append(record)
                cursor = page.get("next_cursor")
                if not cursor:
                    break
            records.sort(key=lambda r: r.updated_at, reverse=True)
            return records[:limit] if limit is not None else records

        async def _entries_of(self, sid: str) -> list[_Entry]:
            entries = self._convo_entries.get(sid)
            if entries is None:
                snapshot = await self._snapshot(sid)
                if snapshot is None:
                    raise LookupError(sid)
                entries = self._remember(sid, snapshot[1])
            return entries

        async def read_history(self, head_id: str | None, *, limit: int | None = None) -> list[ConversationEntry]:
            if head_id is None:
                return []
            sid = self._convo_where.get(head_id)
            if sid is None:
                raise LookupError(f"entry {head_id!r} is in no conversation this store has read")
            entries = await self._entries_of(sid)
            if head_id not in [e.id for e in entries]:
                snapshot = await self._snapshot(sid)
                entries = self._remember(sid, snapshot[1]) if snapshot is not None else []
            ids = [e.id for e in entries]
            if head_id not in ids:
                raise LookupError(head_id)
            chain = entries[: ids.index(head_id) + 1]
            repaired = self._convo_repaired.get(sid)
            if repaired is not None and head_id == ids[-1]:
                chain = [*chain, repaired]
            out: list[ConversationEntry] = []
            parent: str | None = None
            for e in chain:
                out.append(ConversationEntry(id=e.id, parent_id=parent, message=e.message))
                parent = e.id
            if limit is not None:
                out = out[-limit:] if limit else []
            return out

        async def read_entry(self, entry_id: str) -> ConversationEntry:
            history = await self.read_history(entry_id)
            if not history:
                raise LookupError(entry_id)
            return history[-1]

        # -------------------------------------------------------------- writing

        def _record_meta(self, record: ConversationRecord, branch_sessions: Mapping[str, str]) -> dict[str, Any]:
            return {
                RECORD: {
                    "conversation_id": record.conversation_id,
                    "usage": _usage_adapter.dump_python(record.usage, mode="json"),
                    "deferred_tool_requests": _deferred_adapter.dump_python(record.deferred_tool_requests, mode="json"),
                    "scope": record.scope,
                    "forked_from": record.forked_from,
                    "forked_at": record.forked_at,
                    "branches": list(record.branches),
                    "branch_sessions": dict(branch_sessions),
                    "format_version": record.format_version,
                }
            }

        async def write_record(
            self,
            record: ConversationRecord,
            *,
            new_entries: Sequence[ConversationEntry] = (),
            expected_revision: str | None,
        ) -> None:
            sid = self._sid(record.conversation_id)
            try:
                info = await self._write(sid, record, list(new_entries), expected_revision)
            except (RevisionConflict, SessionExists, SessionNotFound) as e:
                raise ConversationConflict(record.conversation_id) from e
            # The base class reads the token back from the record it passed.
            record.revision = _token(info)
            self._convo_entries.pop(sid, None)
            self._convo_repaired.pop(sid, None)

        async def _write(
            self,
            sid: str,
            record: ConversationRecord,
            new_entries: list[ConversationEntry],
            expected_revision: str | None,
        ) -> dict[str, Any]:
            if expected_revision is None:
                return await self._create(sid, record, new_entries)
            revision, created = _untoken(expected_revision)
            snapshot = await self._snapshot(sid)
            if snapshot is None:
                raise SessionNotFound(f"session not found: {sid}")
            info, messages = snapshot
            if info["created_at"] != created or info["revision"] != revision:
                raise RevisionConflict(f"revision conflict on {sid}", data={"current_revision": info["revision"]})
            stored = self._remember(sid, messages)
            meta = ((info.get("metadata") or {}).get(RECORD)) or {}
            branch_sessions = dict(meta.get("branch_sessions") or {})
            current_head = stored[-1].id if stored else None
            base = new_entries[0].parent_id if new_entries else record.head_id
            repaired = self._convo_repaired.get(sid)
            if repaired is not None and base == repaired.id:
                base = current_head  # the repaired view's results: moving on stores them
            if record.head_id is not None and repaired is not None and record.head_id == repaired.id:
                record.head_id = current_head
            if base != current_head:
                # The history moves off its current branch: keep that branch as a fork.
                if current_head is not None and current_head not in branch_sessions:
                    archive = f"{sid[:100]}.branch.{uuid.uuid4().hex[:12]}"
                    await self._call("fork", sid, archive)
                    await self._call("update", archive, metadata={BRANCH: {"conversation_id": record.conversation_id}})
                    branch_sessions[current_head] = archive
                    self._convo_where[current_head] = archive
                revision = await self._move_to(sid, messages, stored, base, revision)
            messages_out = [m for e in new_entries for m in convo_messages_for(e.message, e.id)]
            if messages_out:
                revision = (await self._call("add_messages", sid, messages_out, expected_revision=revision))["revision"]
            updated = await self._call(
                "update", sid, metadata=self._record_meta(record, branch_sessions), expected_revision=revision
            )
            for e in new_entries:
                self._convo_where[e.id] = sid
            return updated

        async def _move_to(
            self, sid: str, messages: list[dict[str, Any]], stored: list[_Entry], base: str | None, revision: int
        ) -> int:
            """Make the session's history end at entry ``base`` (from its history, or from a
            branch or conversation this store read)."""
            ids = [e.id for e in stored]
            if base is None:
                return (await self._call("clear", sid, expected_revision=revision))["revision"]
            if base in ids:
                at = ids.index(base)
                following = stored[at + 1].convo_ids[0] if at + 1 < len(stored) else None
                splits_group = any(m.get("id") == following and m.get("role") == "tool" for m in messages)
                if not splits_group:
                    last_convo = next(i for i in reversed(stored[at].convo_ids) if i)
                    result = await self._call("rewind", sid, last_convo, expected_revision=revision)
                    return result["revision"] if result["removed"] else revision
                source_messages, entries = messages, stored
            else:
                # An entry of another branch: copy that branch up to it.
                source = self._convo_where.get(base)
                if source is None:
                    raise LookupError(base)
                source_messages = (await self._call("history", source, repair=False))["messages"]
                entries = _entries(source_messages, set())
                at = [e.id for e in entries].index(base)
            # Rewind keeps a tool-call group whole, so a cut between a call and its result
            # (or a branch of another history) is written as the kept messages themselves.
            keep_ids = {i for e in entries[: at + 1] for i in e.convo_ids if i}
            kept = [m for m in source_messages if m.get("id") in keep_ids]
            info = await self._call("get", sid)
            data = {"session_id": sid, "system": info.get("system"), "metadata": info.get("metadata"), "messages": kept}
            return (await self._call("from_dict", data, replace=True, expected_revision=revision))["revision"]

        async def _create(
            self, sid: str, record: ConversationRecord, new_entries: list[ConversationEntry]
        ) -> dict[str, Any]:
            meta = self._record_meta(record, {})
            if new_entries and new_entries[0].parent_id is not None or not new_entries and record.head_id is not None:
                # A fork: convo's own, sharing the history up to the entry.
                at = new_entries[0].parent_id if new_entries else record.head_id
                source = self._convo_where.get(at)  # type: ignore[arg-type]
                if source is None:
                    raise LookupError(at)
                entries = await self._entries_of(source)
                entry = next(e for e in entries if e.id == at)
                at_message = next(i for i in reversed(entry.convo_ids) if i)
                info = await self._call("fork", source, sid, at_message_id=at_message)
                info = await self._call("update", sid, metadata=meta, expected_revision=info["revision"])
            else:
                info = await self._call("create", sid, metadata=meta)
            revision = info["revision"]
            messages_out = [m for e in new_entries for m in convo_messages_for(e.message, e.id)]
            if messages_out:
                revision = (await self._call("add_messages", sid, messages_out, expected_revision=revision))["revision"]
                info = await self._call("get", sid)
            for e in new_entries:
                self._convo_where[e.id] = sid
            return info

        async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
            sid = self._sid(conversation_id)
            revision, created = _untoken(expected_revision)
            try:
                info = await self._call("get", sid)
                if info["created_at"] != created:
                    raise ConversationConflict(conversation_id)
                meta = ((info.get("metadata") or {}).get(RECORD)) or {}
                await self._call("delete", sid, expected_revision=revision)
            except (RevisionConflict, SessionNotFound) as e:
                raise ConversationConflict(conversation_id) from e
            archives = list((meta.get("branch_sessions") or {}).values())
            if archives:
                await self._call("delete_many", archives)
            self._convo_entries.pop(sid, None)

else:  # pragma: no cover
    ConvoConversationStore = None  # type: ignore[assignment,misc]
