"""A drop-in for ``pycodeloop.Session`` (pycodeloop 0.8.2) whose history convo keeps.

Change ``from pycodeloop import Session`` (or ``pycodeloop.core.session``) to
``from convo.pycodeloop import Session`` and keep the rest::

    session = Session(system_prompt="You are terse.", cwd="/repo")
    session.add_user("List the files")
    session.add_assistant("", tool_calls=[{"id": "c1", "name": "ls", "arguments": {}}])
    session.add_tool_result("c1", "README.md")
    session.history()          # [Message(role='user', ...), ...]
    Agent(provider).run("and now?", session=session)   # pycodeloop's own Agent works

Where convo must differ from the seed (spec section 12):

- A tool result the seed stored silently but convo refuses (late: the conversation moved
  on; duplicate; unknown id) raises :class:`convo.InvalidSequence`, and bad base64 raises
  :class:`convo.InvalidParams`; both subclass ``ValueError`` and their message starts with
  the convo error kind. An assistant turn with neither text nor tool calls (a model that
  answered nothing) is stored, as the seed stores it, with convo's ``allow_empty``.
- ``history()`` repairs the trailing group's unanswered calls in the returned view only
  (nothing is stored), so a real result that arrives later is still accepted; calls left
  unanswered when the conversation moves on get their "Cancelled" result stored at once.
- ``trim(0)`` drops every message; messages before the first user message count as the
  oldest turn.
- ``messages`` is a read-only snapshot (a tuple) of the stored messages; change the history
  with the methods (``replace_messages`` swaps it whole).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ._default import default_client
from ._sync import Client
from .errors import SessionNotFound

__all__ = ["Message", "Session"]

CANCELLED = "Cancelled — connection was lost before this tool ran."


@dataclass
class Message:
    """pycodeloop's ``Message``: the same fields, in the same order."""

    role: str
    content: Any
    tool_call_id: str | None = None
    tool_calls: list[dict] | None = None
    images: list[str] | None = None
    """Base64-encoded PNG data, one entry per attached image."""


def _to_wire(m: Any) -> dict[str, Any]:
    if isinstance(m, Mapping):
        get = m.get
    else:

        def get(key: str, default: Any = None) -> Any:
            return getattr(m, key, default)

    out: dict[str, Any] = {"role": get("role"), "content": get("content")}
    for key in ("tool_call_id", "tool_calls", "images"):
        value = get(key)
        if value is not None:
            out[key] = value
    return out


def _from_wire(m: Mapping[str, Any]) -> Message:
    return Message(
        role=m["role"],
        content=m.get("content"),
        tool_call_id=m.get("tool_call_id"),
        tool_calls=m.get("tool_calls"),
        images=m.get("images"),
    )


class Session:
    """pycodeloop's ``Session``, stored in convo.

    Constructed as pycodeloop's: ``Session(system_prompt="", messages=[...], cwd=".")``
    (also ``dirty`` and ``last_context_tokens``). Extra keywords: ``session_id`` (an id
    that exists in the store is resumed when ``messages`` is not given, replaced when it
    is) and ``client`` (a :class:`convo.Client`; default: the shared
    :func:`convo.default_client`, started on first use).
    """

    def __init__(
        self,
        system_prompt: str = "",
        messages: Iterable[Any] | None = None,
        cwd: str = ".",
        dirty: bool = False,
        last_context_tokens: int = 0,
        *,
        session_id: str | None = None,
        client: Client | None = None,
    ) -> None:
        self._client = client if client is not None else default_client()
        self._lock = threading.RLock()
        self.dirty = dirty
        self.last_context_tokens = last_context_tokens
        self._system = system_prompt
        self._cwd = cwd
        if session_id is not None and messages is None:
            try:
                info = self._client.get(session_id)
            except SessionNotFound:
                info = None
            if info is not None:
                self._session_id = session_id
                self._system = str(info.get("system") or "")
                self._cwd = str(info["cwd"]) if info.get("cwd") is not None else "."
                changes: dict[str, Any] = {}
                if system_prompt and system_prompt != self._system:
                    changes["system"] = self._system = system_prompt
                if cwd != "." and cwd != self._cwd:
                    changes["cwd"] = self._cwd = cwd
                if changes:
                    self._client.update(session_id, **changes)
                return
        data: dict[str, Any] = {
            "system": system_prompt,
            "cwd": cwd,
            "messages": [_to_wire(m) for m in (messages or [])],
        }
        if session_id is not None:
            data["session_id"] = session_id
        # With an id: an existing session is replaced by the given messages.
        info = self._client.from_dict(data, replace=session_id is not None)
        self._session_id = info["session_id"]

    # ---------------------------------------------------------------- the seed's API

    def add_user(self, text: str, images: list[str] | None = None) -> None:
        with self._lock:
            self._client.add_user(self._session_id, text, images)

    def add_assistant(self, text: str, tool_calls: list[dict] | None = None) -> None:
        """Stores the turn as the seed does, an empty one too: a model that answered
        nothing (``""``, no calls) is kept with convo's ``allow_empty`` (``export`` leaves
        it out with a warning) instead of raising, so the loop that stores it goes on."""
        with self._lock:
            empty = not text and not tool_calls
            self._client.add_assistant(self._session_id, text, tool_calls, allow_empty=empty)

    def add_tool_result(self, tool_call_id: str, content: str, images: list[str] | None = None) -> None:
        """Raises :class:`convo.InvalidSequence` (a ``ValueError``) for a result convo
        does not accept: late, duplicate or for an unknown call. ``images`` (not in the
        seed, whose ``Message`` has the field all the same): base64 images the tool
        returned (a screenshot), exported inside the result where the format carries them."""
        with self._lock:
            self._client.add_tool_result(self._session_id, tool_call_id, content, images)

    def get_last_context_tokens(self) -> int:
        with self._lock:
            return self.last_context_tokens

    def update_last_context_tokens(self, value: int) -> None:
        with self._lock:
            self.last_context_tokens = value

    def history(self) -> list[Message]:
        """A new list: the stored messages plus, for the trailing group's unanswered
        calls, "Cancelled" results (in this view only)."""
        with self._lock:
            return [_from_wire(m) for m in self._client.history(self._session_id)["messages"]]

    @property
    def messages(self) -> tuple[Message, ...]:
        """A read-only snapshot of the stored messages."""
        with self._lock:
            return tuple(_from_wire(m) for m in self._client.history(self._session_id, repair=False)["messages"])

    @messages.setter
    def messages(self, value: Any) -> None:
        raise AttributeError("Session.messages is a read-only snapshot: use replace_messages(...)")

    def replace_messages(self, messages: list[Any]) -> None:
        """Swap in a whole new message list (checked by convo's rules)."""
        with self._lock:
            self._client.from_dict(
                {
                    "session_id": self._session_id,
                    "system": self._system,
                    "cwd": self._cwd,
                    "messages": [_to_wire(m) for m in messages],
                },
                replace=True,
            )
            self.dirty = True

    def trim(self, max_turns: int) -> None:
        """Keep the last ``max_turns`` turns whole (``0`` drops every message)."""
        with self._lock:
            if self._client.trim(self._session_id, max_turns)["removed"]:
                self.dirty = True

    # ---------------------------------------------------------------- fields

    @property
    def system_prompt(self) -> str:
        return self._system

    @system_prompt.setter
    def system_prompt(self, value: str) -> None:
        with self._lock:
            self._client.update(self._session_id, system=value)
            self._system = value

    @property
    def cwd(self) -> str:
        return self._cwd

    @cwd.setter
    def cwd(self, value: str) -> None:
        with self._lock:
            self._client.update(self._session_id, cwd=value)
            self._cwd = value

    # ---------------------------------------------------------------- convo's extras

    @property
    def session_id(self) -> str:
        """The convo session id (pass it back as ``session_id=`` to resume)."""
        return self._session_id

    @property
    def client(self) -> Client:
        return self._client

    def delete(self) -> None:
        """Delete the session from the store."""
        self._client.delete(self._session_id)

    def __bool__(self) -> bool:  # `session or Session(...)` in pycodeloop's Agent
        return True

    def __repr__(self) -> str:
        return f"Session(session_id={self._session_id!r}, system_prompt={self._system!r}, cwd={self._cwd!r})"
