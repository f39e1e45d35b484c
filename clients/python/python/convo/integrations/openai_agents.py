"""The OpenAI Agents SDK's ``Session``, stored by convo (``pip install 'convo[openai-agents]'``).

Change one constructor::

    # session = SQLiteSession("user-42", "conversations.db")
    from convo.integrations.openai_agents import ConvoSession
    session = ConvoSession("user-42", store="sqlite:conversations.db")
    result = await Runner.run(agent, "What's the weather in Paris?", session=session)

How the SDK's items are kept (spec section 16):

- each run of assistant-side items (reasoning, assistant messages, function calls, hosted
  tool calls) is ONE convo assistant message whose ``native`` is ``{format:
  "openai_responses", model: null, body: [the items]}``: parallel calls are one message
  with several ``tool_calls``, and ``session/export`` to ``openai_responses`` replays the
  items exactly (reasoning, ``encrypted_content``, ``fc_`` ids);
- each ``function_call_output`` is a convo ``tool`` message; user, system and developer
  messages are convo messages of their role. What convo's shape cannot hold (an item's
  extra members, a content list's exact parts, an assistant message written without
  ``type``) is kept in the message's ``metadata["openai_agents"]``, so every item comes
  back equal, from any process on the same store;
- :meth:`ConvoSession.get_items` reads convo's repaired history: a call a crash left
  without its result comes back answered by a ``function_call_output`` carrying convo's
  cancellation text (in that view only: a real result added later is still accepted);
- :meth:`ConvoSession.pop_item` removes exactly one item: the last item of a grouped
  message is popped with convo's ``session/pop`` and ``replace_with`` = the rest of the
  group, in one step; a repaired result is never returned.

A tool approval the SDK is waiting on leaves its call without a result in the session, as
a crash does: :meth:`get_items` shows it answered by the cancellation text (nothing is
stored), and resuming the run from its ``RunState`` stores the real output, which convo
accepts. Starting a new turn instead abandons the approval, as it does with the SDK's own
sessions (which drop the unanswered call).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import json
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

from agents.memory import SessionSettings
from agents.memory.session_settings import coerce_session_settings, resolve_session_limit

from .._client import AsyncClient
from .._default import default_client
from .._sync import Client
from ..errors import RevisionConflict, SessionExists, SessionNotFound
from ..types import Fit
from . import CANCELLED, _Bridge, convo_session_id

__all__ = ["ConvoSession", "CANCELLED", "items_of_message", "message_for_items"]

T = TypeVar("T")

META = "openai_agents"
_INPUT_ROLES = ("user", "system", "developer")


# ---------------------------------------------------------------------------- items <-> messages


def _kind(item: Mapping[str, Any]) -> str:
    """``input`` (a user/system/developer message), ``output`` (a function call's result)
    or ``run`` (an assistant-side item: reasoning, assistant message, a call of any kind,
    and whatever else the Responses API puts between two inputs)."""
    kind = item.get("type")
    if kind == "function_call_output":
        return "output"
    if kind in (None, "message") and item.get("role") in _INPUT_ROLES:
        return "input"
    return "run"


def _wire(item: Mapping[str, Any]) -> Any:
    """The item as a Responses output item convo reads: an assistant message written
    without ``type`` (``{"role": "assistant", "content": "Hi"}``, as the Responses API
    accepts in input) gets ``type: "message"`` and its text as an ``output_text`` part,
    so convo derives its text; every other item is the item itself."""
    if "type" in item:
        return item
    if item.get("role") == "assistant" and isinstance(item.get("content"), str):
        return {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": item["content"], "annotations": []}],
        }
    return {"type": "message", **item}


def _data_url_image(part: Mapping[str, Any]) -> str | None:
    """The base64 of an ``input_image`` part with a base64 data URL, else None."""
    url = part.get("image_url")
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        return None
    data = url.split(";base64,", 1)[1]
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    return data if data else None


def _common_parts(content: Sequence[Any], *, images: list[str] | None) -> list[Any]:
    """Responses content parts as convo's: ``input_text``/``output_text`` become ``text``
    parts; base64 ``input_image`` parts become attached images when ``images`` is a list;
    other parts are kept as they are (convo keeps a part of any ``type``)."""
    parts: list[Any] = []
    for part in content:
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            continue
        kind = part["type"]
        if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
            continue
        if kind == "input_image" and images is not None:
            data = _data_url_image(part)
            if data is not None:
                images.append(data)
                continue
        parts.append(dict(part))
    return parts


def _with_meta(message: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    if meta:
        message["metadata"] = {META: meta}
    return message


def _run_message(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    body: list[Any] = []
    originals: dict[str, Any] = {}
    for i, item in enumerate(items):
        wire = _wire(item)
        if wire is not item:
            originals[str(i)] = item
        body.append(wire)
    message = {"role": "assistant", "native": {"format": "openai_responses", "model": None, "body": body}}
    return _with_meta(message, {"originals": originals} if originals else {})


def _input_message(item: Mapping[str, Any]) -> dict[str, Any]:
    role = item["role"]
    content = item.get("content")
    meta: dict[str, Any] = {}
    message: dict[str, Any] = {"role": "user" if role == "user" else "system"}
    if role == "developer":
        meta["role"] = role
    if isinstance(content, str):
        message["content"] = content
    else:
        images: list[str] = []
        message["content"] = _common_parts(content or [], images=images if role == "user" else None)
        if images:
            message["images"] = images
        meta["content"] = content
    extra = {k: v for k, v in item.items() if k not in ("role", "content")}
    if extra:
        meta["extra"] = extra
    return _with_meta(message, meta)


def _output_message(item: Mapping[str, Any]) -> dict[str, Any]:
    output = item.get("output")
    meta: dict[str, Any] = {}
    if isinstance(output, str):
        content: Any = output
    else:
        meta["output"] = output
        content = _common_parts(output, images=None) if isinstance(output, list) else json.dumps(output)
    extra = {k: v for k, v in item.items() if k not in ("type", "call_id", "output")}
    if extra:
        meta["extra"] = extra
    message = {"role": "tool", "tool_call_id": item["call_id"], "content": content}
    return _with_meta(message, meta)


def message_for_items(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The convo message (as ``add_message`` takes it) that holds ``items``: one input or
    output item, or a run of assistant-side items."""
    if len(items) == 1 and _kind(items[0]) == "input":
        return _input_message(items[0])
    if len(items) == 1 and _kind(items[0]) == "output":
        return _output_message(items[0])
    return _run_message(items)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text") or "" for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return ""


def _input_content(message: Mapping[str, Any]) -> Any:
    """A message written by another convo client, as Responses content."""
    content = message.get("content")
    images = message.get("images") or []
    if not images and not isinstance(content, list):
        return content if content is not None else ""
    parts: list[Any] = []
    if isinstance(content, str):
        if content:
            parts.append({"type": "input_text", "text": content})
    else:
        for part in content or []:
            if isinstance(part, Mapping) and part.get("type") == "text":
                parts.append({"type": "input_text", "text": part.get("text") or ""})
            else:
                parts.append(part)
    for image in images:
        if isinstance(image, str):
            parts.append(
                {"type": "input_image", "image_url": f"data:{_media_type(image)};base64,{image}", "detail": "auto"}
            )
    return parts


def _media_type(b64: str) -> str:
    try:
        head = base64.b64decode(b64[:16] + "=" * (-len(b64[:16]) % 4))
    except (binascii.Error, ValueError):
        return "application/octet-stream"
    for magic, media in ((b"\x89PNG", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif")):
        if head.startswith(magic):
            return media
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return "application/octet-stream"


def items_of_message(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Agents SDK items a convo message holds (``[]`` for an empty assistant turn).

    A message this adapter stored gives back the items it was given; one written by any
    other convo client is converted from convo's common form (a repaired result is a
    ``function_call_output`` with the cancellation text)."""
    role = message.get("role")
    meta = (message.get("metadata") or {}).get(META) or {}
    if not isinstance(meta, Mapping):
        meta = {}
    if role == "assistant":
        native = message.get("native")
        if isinstance(native, Mapping) and native.get("format") == "openai_responses":
            body = native.get("body")
            if isinstance(body, list):
                originals = meta.get("originals") or {}
                return [copy.deepcopy(originals.get(str(i), item)) for i, item in enumerate(body)]
        items: list[dict[str, Any]] = []
        text = _text_of(message.get("content"))
        if text:
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
            name = call.get("name") or function.get("name") or ""
            args = call.get("arguments", call.get("input", function.get("arguments", {})))
            items.append(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
                }
            )
        return items
    if role == "tool":
        if "output" in meta:
            output = copy.deepcopy(meta["output"])
        else:
            output = message.get("content")
            if output is None:
                output = ""
            elif isinstance(output, list):
                output = [
                    {"type": "input_text", "text": p.get("text") or ""}
                    if isinstance(p, Mapping) and p.get("type") == "text"
                    else p
                    for p in output
                ]
        item = {"call_id": message.get("tool_call_id"), "output": output, "type": "function_call_output"}
        item.update(copy.deepcopy(meta.get("extra") or {}))
        return [item]
    content = copy.deepcopy(meta["content"]) if "content" in meta else _input_content(message)
    item = {"content": content, "role": meta.get("role") or ("system" if role == "system" else "user")}
    item.update(copy.deepcopy(meta.get("extra") or {}))
    return [item]


def _segments(items: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Consecutive assistant-side items grouped into runs; each input or output alone."""
    groups: list[list[Mapping[str, Any]]] = []
    run_open = False
    for item in items:
        if not isinstance(item, Mapping):
            raise TypeError(f"a session item is a dict, got {type(item).__name__}")
        if _kind(item) == "run":
            if run_open:
                groups[-1].append(item)
            else:
                groups.append([item])
                run_open = True
        else:
            groups.append([item])
            run_open = False
    return groups


def _is_native_run(message: Mapping[str, Any] | None) -> bool:
    if message is None or message.get("role") != "assistant":
        return False
    native = message.get("native")
    return isinstance(native, Mapping) and native.get("format") == "openai_responses"


async def _settle(awaitable: Awaitable[T]) -> T:
    """Wait for a write's outcome even if the caller is cancelled meanwhile (then re-raise
    the cancellation): a cancelled run never leaves it unknown whether a write landed."""
    task = asyncio.ensure_future(awaitable)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as e:
            cancelled = cancelled or e
    result = task.result()
    if cancelled is not None:
        raise cancelled
    return result


# ---------------------------------------------------------------------------- the session


class ConvoSession:
    """An ``agents.memory.Session`` whose items convo keeps.

    ``session_id``: the SDK's id; it is the convo session id when convo's charset allows
    it (``A-Z a-z 0-9 . _ : -``, 1–128 characters), else ``openai-agents-<sha256>`` (the
    SDK's id is kept in the session's metadata). The convo session is created on the first
    write. ``store``: a convo store (``"memory"``, ``"sqlite"``, ``"sqlite:PATH"``, a
    PostgreSQL URL) for a convo child of this session's own, closed by :meth:`close`;
    ``client``: a :class:`convo.Client` to share (or an :class:`convo.AsyncClient`, used
    from its own loop); neither: the process-wide :func:`convo.default_client`.
    ``session_settings``: a ``SessionSettings`` or a dict of its fields (its ``limit`` is
    the default of :meth:`get_items`). ``fit``: a token budget for what :meth:`get_items`
    gives the SDK (``{"max_tokens": N, "keep_turns": 1}``, spec section 17): the items
    are then the ``input`` of convo's ``openai_responses`` export with that ``fit``
    (oldest tool outputs cleared, then older reasoning, then whole oldest turns left out;
    from the latest compaction item on) — the body the Responses API is sent, not the
    stored items verbatim; a budget even the last turns exceed raises
    :class:`convo.TooLarge`. The SDK's ``Session`` has no token budget of its own:
    ``SessionSettings.limit`` counts items.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        *,
        store: str | None = None,
        client: Client | AsyncClient | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        fit: Fit | None = None,
    ) -> None:
        self.session_id = session_id
        self.fit = fit
        self.session_settings = (
            coerce_session_settings(session_settings)  # type: ignore[arg-type]
            if session_settings is not None
            else SessionSettings()
        )
        self.convo_session_id = convo_session_id(session_id, "openai-agents")
        self._bridge = _Bridge(client, store, default_client)

    @property
    def client(self) -> Client | AsyncClient:
        return self._bridge.client

    def close(self) -> None:
        """Close the convo child this session started (``store=``); a shared client is
        left open."""
        self._bridge.close()

    def __repr__(self) -> str:
        return f"ConvoSession(session_id={self.session_id!r})"

    # ------------------------------------------------------------------ reading

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await self._bridge.call(method, self.convo_session_id, *args, **kwargs)

    async def _messages(self, *, offset: int | None = None, repair: bool = True) -> list[dict[str, Any]]:
        try:
            page = await self._call("history", offset=offset, repair=repair)
        except SessionNotFound:
            return []
        return page["messages"]

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The session's items, oldest first; with ``limit`` (default: the settings'), the
        latest ``limit`` of them (0: none; a negative one: all, as SQLite's LIMIT reads it).
        Read from convo's repaired history: a call left without its result comes back
        answered by a ``function_call_output`` with convo's cancellation text."""
        session_limit = resolve_session_limit(limit, self.session_settings)
        if self.fit is not None:
            items = await self._fitted_items()
            if session_limit is None or session_limit < 0:
                return items
            return items[-session_limit:] if session_limit > 0 else []
        if session_limit is None or session_limit < 0:
            return [item for m in await self._messages() for item in items_of_message(m)]
        if session_limit == 0:
            return []
        window = session_limit
        while True:
            try:
                count = (await self._call("get"))["message_count"]
            except SessionNotFound:
                return []
            offset = max(0, count - window)
            items = [item for m in await self._messages(offset=offset) for item in items_of_message(m)]
            if len(items) >= session_limit or offset == 0:
                return items[-session_limit:]
            window *= 2

    async def _fitted_items(self) -> list[Any]:
        """The items of the Responses API body convo exports with :attr:`fit`."""
        try:
            exported = await self._call("export", "openai_responses", fit=self.fit)
        except SessionNotFound:
            return []
        items: list[Any] = exported["payload"]["input"]
        return items

    async def _last_stored(self) -> tuple[dict[str, Any] | None, int | None]:
        """The last stored message (no repair) and the revision it was read at."""
        while True:
            try:
                info = await self._call("get")
            except SessionNotFound:
                return None, None
            count = info["message_count"]
            if count == 0:
                return None, info["revision"]
            try:
                page = await self._call("history", offset=count - 1, repair=False)
            except SessionNotFound:
                return None, None
            if page["messages"]:
                return page["messages"][-1], page["revision"]

    # ------------------------------------------------------------------ writing

    async def _create(self) -> None:
        metadata = None
        if self.convo_session_id != self.session_id:
            metadata = {"openai_agents_session_id": self.session_id}
        try:
            await self._call("create", metadata=metadata)
        except SessionExists:
            pass

    async def add_items(self, items: list[Any]) -> None:
        """Append items. Consecutive assistant-side items become one convo assistant
        message, joined to the last stored one when that is a run too (through
        ``session/pop`` with ``replace_with``, so its pending calls stay pending)."""
        groups = _segments(items)
        if not groups:
            return
        await _settle(self._add(groups))

    async def _add(self, groups: list[list[Mapping[str, Any]]]) -> None:
        if _kind(groups[0][0]) == "run":
            while True:
                last, revision = await self._last_stored()
                if not _is_native_run(last):
                    break
                assert last is not None
                merged = _run_message([*items_of_message(last), *groups[0]])
                try:
                    await self._call("pop", replace_with=merged, expected_revision=revision)
                except RevisionConflict:
                    continue
                groups = groups[1:]
                break
        if not groups:
            return
        messages = [message_for_items(group) for group in groups]
        try:
            await self._call("add_messages", messages)
        except SessionNotFound:
            await self._create()
            await self._call("add_messages", messages)

    async def pop_item(self) -> Any | None:
        """Remove and return the most recent item (``None`` when there is none). The last
        item of a grouped message is removed with the rest of the group stored in its
        place in the same step; a repaired result is never returned (popping a result
        opens its call again)."""
        return await _settle(self._pop())

    async def _pop(self) -> Any | None:
        while True:
            last, revision = await self._last_stored()
            if last is None:
                return None
            items = items_of_message(last)
            try:
                if len(items) > 1:
                    await self._call("pop", replace_with=_run_message(items[:-1]), expected_revision=revision)
                else:
                    await self._call("pop", expected_revision=revision)
            except RevisionConflict:
                continue
            except SessionNotFound:
                return None
            if items:
                return items[-1]
            # An empty assistant turn another writer stored holds no item: go on.

    async def clear_session(self) -> None:
        """Drop every item (the convo session itself, its id and metadata, stay)."""
        try:
            await _settle(self._call("clear"))
        except SessionNotFound:
            pass
