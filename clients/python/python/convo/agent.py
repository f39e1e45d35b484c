"""A drop-in for the generic agent library's ``Session`` (``agent-core-py``: ``from agent
import Session``) whose history convo keeps, so it persists and can be resumed.

Change ``from agent import Session`` to ``from convo.agent import Session``::

    session = Session(my_agent, session_id="support-42", system="Be brief.")
    session.run("Hello")                  # the model call goes through convo's host runtime
    Session(my_agent, session_id="support-42").history()   # resumed from the store

``agent`` is what answers the model calls (spec section 7): a real ``agent.Agent`` (its
provider is called with the session's history, as the seed does), or any runtime callable
``f(params) -> {"text", "tool_calls", "usage", ...}`` (sync or async, or a generator of
text deltas for :meth:`Session.stream`), or ``None`` (then the client's default runtime).

Where convo differs from the seed: an existing ``session_id`` resumes the stored session;
an id outside convo's charset raises ``ValueError``; a tool message that breaks the
conversation rules raises :class:`convo.InvalidSequence` (a ``ValueError``);
``temperature=0`` is sent as 0 (the seed's ``or`` fallback dropped it).
"""

from __future__ import annotations

import asyncio
import base64
import json as _json
import queue
import re
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._client import Final, RuntimeHandler
from ._default import default_client
from ._sync import Client
from .errors import SessionNotFound

__all__ = ["Session", "Message", "ToolCall", "Usage", "Response", "StreamEvent", "StreamResponse", "agent_runtime"]

_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

try:  # the real library's message types, when it is installed
    from agent.types.messages import ContentPart as _ContentPart  # type: ignore
    from agent.types.messages import Message as _AgentMessage  # type: ignore
except Exception:  # pragma: no cover - exercised only without agent-core-py
    _AgentMessage = None
    _ContentPart = None


@dataclass
class _FallbackMessage:
    """The library's ``Message`` fields, for hosts without ``agent-core-py`` installed."""

    role: str
    content: Any
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[dict[str, Any]] | None = None

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(p.get("text") or "" for p in self.content or [] if p.get("type") == "text")

    @classmethod
    def user(cls, content: Any) -> _FallbackMessage:
        return cls(role="user", content=content)

    @classmethod
    def assistant(cls, content: str | None = None, tool_calls: list[dict[str, Any]] | None = None) -> _FallbackMessage:
        return cls(role="assistant", content=content or "", tool_calls=tool_calls)

    @classmethod
    def system(cls, content: str) -> _FallbackMessage:
        return cls(role="system", content=content)

    @classmethod
    def tool(cls, content: str, tool_call_id: str, name: str | None = None) -> _FallbackMessage:
        return cls(role="tool", content=content, tool_call_id=tool_call_id, name=name)


#: The message class :meth:`Session.history` returns: ``agent.Message`` when
#: agent-core-py is installed, else a dataclass with the same fields.
Message: Any = _AgentMessage if _AgentMessage is not None else _FallbackMessage


def _part_to_wire(p: Any) -> dict[str, Any]:
    if isinstance(p, Mapping):
        return dict(p)
    out: dict[str, Any] = {
        "type": getattr(p, "type", None),
        "text": getattr(p, "text", None),
        "image_url": getattr(p, "image_url", None),
    }
    data = getattr(p, "image_data", None)
    if data is not None:
        out["image_data"] = base64.b64encode(data).decode("ascii")
        out["media_type"] = getattr(p, "media_type", None)
    return out


def _message_to_wire(m: Any) -> dict[str, Any]:
    if isinstance(m, Mapping):
        src = dict(m)
    else:
        src = {k: getattr(m, k, None) for k in ("role", "content", "name", "tool_call_id", "tool_calls")}
    content = src.get("content")
    if isinstance(content, list):
        content = [_part_to_wire(p) for p in content]
    out: dict[str, Any] = {"role": src.get("role"), "content": content}
    for key in ("name", "tool_call_id", "tool_calls", "images", "metadata"):
        if src.get(key) is not None:
            out[key] = src[key]
    return out


def _part_from_wire(p: Any) -> Any:
    if _ContentPart is None or not isinstance(p, Mapping):
        return p
    fields = {k: p.get(k) for k in ("type", "text", "image_url", "media_type") if p.get(k) is not None}
    if isinstance(p.get("image_data"), str):
        try:
            fields["image_data"] = base64.b64decode(p["image_data"])
        except ValueError:
            pass
    try:
        return _ContentPart(**fields)
    except Exception:
        return _ContentPart.model_construct(**fields)


def _message_from_wire(m: Mapping[str, Any]) -> Any:
    content = m.get("content")
    if content is None:
        content = ""
    elif isinstance(content, list):
        content = [_part_from_wire(p) for p in content]
    fields = {
        "role": m["role"],
        "content": content,
        "name": m.get("name"),
        "tool_call_id": m.get("tool_call_id"),
        "tool_calls": m.get("tool_calls"),
    }
    try:
        return Message(**fields)
    except Exception:
        return Message.model_construct(**fields) if hasattr(Message, "model_construct") else _FallbackMessage(**fields)


def _seed_message_dict(m: Mapping[str, Any]) -> dict[str, Any]:
    """One message as the seed's ``to_dict`` writes it."""
    content = m.get("content")
    if content is None:
        content = ""
    elif not isinstance(content, str):
        content = [
            {"type": p.get("type"), "text": p.get("text"), "image_url": p.get("image_url")}
            if isinstance(p, Mapping)
            else p
            for p in content
        ]
    return {
        "role": m["role"],
        "content": content,
        "name": m.get("name"),
        "tool_call_id": m.get("tool_call_id"),
        "tool_calls": m.get("tool_calls"),
    }


@dataclass
class ToolCall:
    """A tool call with the library's attributes (``id``, ``name``, ``arguments``)."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_wire(cls, call: Mapping[str, Any]) -> ToolCall:
        fn = call.get("function") if isinstance(call.get("function"), Mapping) else None
        name = (fn or call).get("name") or ""
        args: Any = (fn or call).get("arguments", call.get("input", {}))
        if isinstance(args, str):
            try:
                args = _json.loads(args)
            except ValueError:
                args = {"_raw": args}
        return cls(
            id=str(call.get("id")), name=str(name), arguments=args if isinstance(args, dict) else {"value": args}
        )


class Usage(dict):  # type: ignore[type-arg]
    """The host's usage object; attribute access with 0 for what it did not give."""

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__"):
            raise AttributeError(key)
        return self.get(key, 0)


@dataclass
class Response:
    """What ``run`` / ``json`` return: the library's ``AgentResponse`` attributes that
    convo knows, plus ``message_ids`` and ``revision``."""

    text: str | None
    tool_calls: list[ToolCall]
    usage: Usage | None
    output: Any = None
    message_ids: list[str] = field(default_factory=list)
    revision: int | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    stop_reason: str | None = None

    @property
    def has_tool_calls(self) -> bool:
        return len(self.tool_calls) > 0

    @classmethod
    def from_result(cls, result: Mapping[str, Any], output: Any = None, answer: Any = None) -> Response:
        usage = result.get("usage")
        return cls(
            text=result.get("text"),
            tool_calls=[ToolCall.from_wire(c) for c in result.get("tool_calls") or []],
            usage=Usage(usage) if isinstance(usage, Mapping) else None,
            output=output,
            message_ids=list(result.get("message_ids") or []),
            revision=result.get("revision"),
            raw=dict(result),
            model=(answer or {}).get("model", "") if isinstance(answer, Mapping) else "",
            stop_reason=(answer or {}).get("stop_reason") if isinstance(answer, Mapping) else None,
        )


@dataclass
class StreamEvent:
    """A streaming event with the library's attribute names."""

    type: str
    text: str | None = None
    tool_call: ToolCall | None = None
    usage: Usage | None = None


def agent_runtime(agent: Any) -> RuntimeHandler:
    """A runtime handler that answers convo's runtime requests with a real
    ``agent.Agent`` (its provider, middleware and retries), as the seed's Session did."""
    from agent.messages import AgentRequest  # type: ignore

    def handler(params: dict[str, Any]) -> Any:
        history = [_message_from_wire(m) for m in params.get("messages") or []]
        last = history.pop() if history and history[-1].role == "user" else None
        input_text = last.content if last is not None and isinstance(last.content, str) else None
        if last is not None and input_text is None:
            history.append(last)
        cfg = getattr(agent, "config", None)
        temperature = params.get("temperature")
        max_tokens = params.get("max_tokens")
        request = AgentRequest(
            input=input_text,
            messages=history,
            system=params.get("system"),
            temperature=temperature if temperature is not None else getattr(cfg, "temperature", None),
            max_tokens=max_tokens if max_tokens is not None else getattr(cfg, "max_tokens", None),
            metadata=params.get("metadata") or {},
            session_id=params.get("session_id"),
        )

        def answer(
            text: Any, tool_calls: Any, usage: Any, model: Any = None, stop_reason: Any = None
        ) -> dict[str, Any]:
            out: dict[str, Any] = {"text": text, "tool_calls": [tc.to_dict() for tc in tool_calls] or None}
            if usage is not None:
                out["usage"] = usage.model_dump() if hasattr(usage, "model_dump") else dict(usage)
            if model:
                out["model"] = model
            if stop_reason:
                out["stop_reason"] = stop_reason
            return out

        if "stream_id" in params:

            def deltas() -> Iterator[Any]:
                stream = agent._runtime.stream(request)
                for event in stream:
                    if event.type == "text_delta" and event.text:
                        yield event.text
                    elif event.type == "tool_call_start" and event.tool_call is not None:
                        yield {"tool_calls": [event.tool_call.to_dict()]}
                yield Final(answer(stream.text, stream.tool_calls, stream.usage, getattr(stream, "model", None)))

            return deltas()
        if params.get("purpose") == "json":
            schema = (params.get("response_format") or {}).get("schema")
            resp = agent._runtime.run(request, schema=schema)
        else:
            resp = agent._runtime.run(request)
        return answer(resp.text, resp.tool_calls, resp.usage, resp.model, resp.stop_reason)

    return handler


def _runtime_for(agent: Any) -> RuntimeHandler | None:
    if agent is None:
        return None
    if hasattr(agent, "_runtime") and hasattr(agent, "config"):
        return agent_runtime(agent)
    if callable(agent):
        return agent
    raise TypeError(f"agent must be an agent.Agent, a runtime callable or None, got {type(agent).__name__}")


def _check_id(session_id: str) -> None:
    if not isinstance(session_id, str) or not _ID_RE.match(session_id):
        raise ValueError(
            f"session_id must be 1-128 characters of A-Z a-z 0-9 . _ : - (convo's charset), got {session_id!r}"
        )


class StreamResponse:
    """Iterate for :class:`StreamEvent` s as the runtime streams; afterwards ``text``,
    ``tool_calls``, ``usage`` and ``response`` hold the stored answer."""

    def __init__(self, session: Session, input: str, kwargs: dict[str, Any]) -> None:
        self._session = session
        self._input = input
        self._queue: queue.Queue[Any] = queue.Queue()
        self._kwargs = kwargs
        self._future: Any = None
        self.response: Response | None = None

    def _start(self) -> None:
        client = self._session._client
        sid = self._session.session_id
        aclient = client.async_client
        aclient._delta_listeners[sid] = self._queue.put
        self._future = asyncio.run_coroutine_threadsafe(aclient.stream(sid, self._input, **self._kwargs), client.loop)

    def __iter__(self) -> Iterator[StreamEvent]:
        if self._future is None:
            self._start()
        sid = self._session.session_id
        try:
            while True:
                try:
                    delta = self._queue.get(timeout=0.02)
                except queue.Empty:
                    if self._future.done() and self._queue.empty():
                        break
                    continue
                if delta.get("text"):
                    yield StreamEvent(type="text_delta", text=delta["text"])
                for call in delta.get("tool_calls") or []:
                    yield StreamEvent(type="tool_call_start", tool_call=ToolCall.from_wire(call))
            result = self._future.result()
        finally:
            listeners = self._session._client.async_client._delta_listeners
            if listeners.get(sid) == self._queue.put:
                listeners.pop(sid, None)
        self.response = Response.from_result(result)
        yield StreamEvent(type="message_end", usage=self.response.usage)

    def cancel(self) -> None:
        """Cancel the stream (``$/cancelRequest``): convo keeps what was said so far."""
        if self._future is not None:
            self._future.cancel()

    def collect(self) -> StreamResponse:
        for _ in self:
            pass
        return self

    @property
    def text(self) -> str:
        return (self.response.text or "") if self.response else ""

    @property
    def tool_calls(self) -> list[ToolCall]:
        return self.response.tool_calls if self.response else []

    @property
    def usage(self) -> Usage | None:
        return self.response.usage if self.response else None


class Session:
    """The generic agent library's ``Session``, stored in convo.

    ``Session(agent, session_id=None, system=None, messages=None)``; extra keywords
    ``client`` (a :class:`convo.Client`, default the shared one) and ``runtime`` (a
    runtime callable, in place of the one made from ``agent``). A ``session_id`` that
    exists in the store resumes that session (``messages``, when given, replace its
    history; ``system``, when given, replaces its system prompt).
    """

    def __init__(
        self,
        agent: Any = None,
        session_id: str | None = None,
        system: str | None = None,
        messages: list[Any] | None = None,
        *,
        client: Client | None = None,
        runtime: RuntimeHandler | None = None,
        _info: Mapping[str, Any] | None = None,
    ) -> None:
        self._agent = agent
        self._client = client if client is not None else default_client()
        self._runtime = runtime if runtime is not None else _runtime_for(agent)
        if _info is not None:
            self._session_id = _info["session_id"]
            self._system = _info.get("system")
        else:
            if session_id is not None:
                _check_id(session_id)
            info = None
            if session_id is not None:
                try:
                    info = self._client.get(session_id)
                except SessionNotFound:
                    info = None
            if info is not None and session_id is not None:
                self._session_id = session_id
                self._system = info.get("system")
                if messages is not None:
                    self._client.from_dict(
                        {
                            "session_id": session_id,
                            "system": system if system is not None else self._system,
                            "cwd": info.get("cwd"),
                            "messages": [_message_to_wire(m) for m in messages],
                        },
                        replace=True,
                    )
                    if system is not None:
                        self._system = system
                elif system is not None and system != self._system:
                    self._client.update(session_id, system=system)
                    self._system = system
            else:
                data: dict[str, Any] = {"system": system, "messages": [_message_to_wire(m) for m in messages or []]}
                if session_id is not None:
                    data["session_id"] = session_id
                created = self._client.from_dict(data)
                self._session_id = created["session_id"]
                self._system = created.get("system")
        if self._runtime is not None:
            self._client.set_runtime(self._runtime, self._session_id)

    # ---------------------------------------------------------------- properties

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def system(self) -> str | None:
        return self._system

    @property
    def messages(self) -> list[Any]:
        """The message history (a copy)."""
        return self.history()

    @property
    def client(self) -> Client:
        return self._client

    # ---------------------------------------------------------------- history

    def history(self) -> list[Any]:
        """The stored messages (no repair), as the library's ``Message`` objects."""
        result = self._client.history(self._session_id, repair=False)
        return [_message_from_wire(m) for m in result["messages"]]

    def add_message(self, message: Any) -> None:
        """Append one message (an ``agent.Message`` or a dict). Tool messages follow
        convo's rules: a late, duplicate or unknown result raises ``InvalidSequence``."""
        self._client.add_message(self._session_id, _message_to_wire(message))

    def clear(self) -> None:
        self._client.clear(self._session_id)

    def fork(self, session_id: str | None = None) -> Session:
        """A new session with a copy of this history (O(1) in convo), same agent."""
        if session_id is not None:
            _check_id(session_id)
        info = self._client.fork(self._session_id, session_id)
        return Session(self._agent, client=self._client, runtime=self._runtime, _info=info)

    def delete(self) -> None:
        self._client.delete(self._session_id)

    def to_dict(self) -> dict[str, Any]:
        """The library's format, ``{session_id, system, messages: [{role, content, name,
        tool_call_id, tool_calls}]}``, which its ``Session.from_dict`` loads unchanged."""
        d = self._client.to_dict(self._session_id)
        return {
            "session_id": d["session_id"],
            "system": d.get("system"),
            "messages": [_seed_message_dict(m) for m in d.get("messages") or []],
        }

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        agent: Any = None,
        *,
        client: Client | None = None,
        runtime: RuntimeHandler | None = None,
    ) -> Session:
        """Load the library's (or convo's) ``to_dict`` format; an existing id is replaced."""
        client = client if client is not None else default_client()
        sid = data.get("session_id")
        if sid is not None:
            _check_id(sid)
        info = client.from_dict(data, replace=sid is not None)
        return cls(agent, client=client, runtime=runtime, _info=info)

    # ---------------------------------------------------------------- the model, through convo

    def _turn_kwargs(
        self,
        temperature: float | None,
        max_tokens: int | None,
        metadata: Mapping[str, Any] | None,
        extra: dict[str, Any],
    ) -> dict[str, Any]:
        cfg = getattr(self._agent, "config", None)
        kw: dict[str, Any] = {
            "temperature": temperature if temperature is not None else getattr(cfg, "temperature", None),
            "max_tokens": max_tokens if max_tokens is not None else getattr(cfg, "max_tokens", None),
            "metadata": dict(metadata) if metadata else None,
        }
        kw.update(extra)
        return kw

    def run(
        self,
        input: str,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        metadata: dict[str, Any] | None = None,
        **extra: Any,
    ) -> Response:
        """One turn: convo asks the runtime and stores the input and the answer atomically.
        Extra keywords (``images``, ``tools``, ``timeout_ms``, ``expected_revision``) go
        to ``session/run``."""
        result = self._client.run(
            self._session_id, input, **self._turn_kwargs(temperature, max_tokens, metadata, extra)
        )
        return Response.from_result(result)

    def json(
        self,
        input: str,
        *,
        schema: Any,
        temperature: float | None = None,
        max_tokens: int | None = None,
        metadata: dict[str, Any] | None = None,
        **extra: Any,
    ) -> Response:
        """Structured output: ``schema`` is a JSON Schema dict or a pydantic model class;
        ``response.output`` is the validated value (a model instance for a model class).
        ``retries=N`` asks again with the errors; :class:`convo.InvalidOutput` after."""
        model_cls = None
        if isinstance(schema, Mapping):
            json_schema = dict(schema)
        elif hasattr(schema, "model_json_schema"):
            model_cls = schema
            json_schema = schema.model_json_schema()
        else:
            raise TypeError("schema must be a JSON Schema dict or a pydantic model class")
        result = self._client.json(
            self._session_id, input, json_schema, **self._turn_kwargs(temperature, max_tokens, metadata, extra)
        )
        value = result.get("value")
        if model_cls is not None:
            value = model_cls.model_validate(value)
        return Response.from_result(result, output=value)

    def stream(
        self,
        input: str,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        metadata: dict[str, Any] | None = None,
        **extra: Any,
    ) -> StreamResponse:
        """Stream a turn: iterate the result for events as the runtime sends deltas;
        convo keeps a draft meanwhile and stores the final answer."""
        return StreamResponse(self, input, self._turn_kwargs(temperature, max_tokens, metadata, extra))

    async def run_async(self, input: str, **kwargs: Any) -> Response:
        return await asyncio.to_thread(self.run, input, **kwargs)

    async def json_async(self, input: str, **kwargs: Any) -> Response:
        return await asyncio.to_thread(self.json, input, **kwargs)

    async def stream_async(self, input: str, **kwargs: Any) -> AsyncIterator[StreamEvent]:
        stream = self.stream(input, **kwargs)
        it = iter(stream)
        done = object()
        while True:
            event = await asyncio.to_thread(next, it, done)
            if event is done:
                return
            yield event  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"Session(id={self._session_id!r})"
