"""Adapters that let agent frameworks keep their history in convo.

- :mod:`convo.integrations.openai_agents`: ``ConvoSession``, the OpenAI Agents SDK's
  ``agents.memory.Session`` (``pip install 'convo[openai-agents]'``).
- :mod:`convo.integrations.pydantic_ai`: ``ConvoMessageHistory`` and
  ``ConvoConversationStore`` for pydantic-ai (``pip install 'convo[pydantic-ai]'``).

Each module imports its framework only when it is imported itself: installing ``convo``
pulls in no framework.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .._client import AsyncClient
from .._sync import Client

__all__: list[str] = []

T = TypeVar("T")

CANCELLED = "Cancelled — connection was lost before this tool ran."

_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def convo_session_id(name: str, prefix: str) -> str:
    """The convo session id for a framework's id: the id itself when convo's charset
    (``A-Z a-z 0-9 . _ : -``, 1–128) allows it, else ``<prefix>-<sha256 hex>`` (the same
    in every process, so a reopened session finds it)."""
    if _ID_RE.match(name):
        return name
    return f"{prefix}-{hashlib.sha256(name.encode('utf-8')).hexdigest()}"


class _Bridge:
    """Calls a convo client from any asyncio loop and thread.

    A blocking :class:`convo.Client` runs its :class:`AsyncClient` on a loop thread of its
    own: a call is scheduled there and awaited here without blocking this loop (so a
    framework's ``run_sync`` threads and several loops share one child). An
    :class:`AsyncClient` is awaited directly (use it from the loop it was started on).
    """

    def __init__(self, client: Client | AsyncClient | None, store: str | None, default: Callable[[], Client]) -> None:
        if client is not None and store is not None:
            raise TypeError("give `store` or `client`, not both")
        self.owned = False
        if client is None:
            if store is not None:
                client = Client(store=store)
                self.owned = True
            else:
                client = default()
        if not isinstance(client, (Client, AsyncClient)):
            raise TypeError(f"client must be a convo.Client or convo.AsyncClient, got {type(client).__name__}")
        self.client = client

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        client = self.client
        if isinstance(client, AsyncClient):
            return await getattr(client, method)(*args, **kwargs)
        coro: Coroutine[Any, Any, Any] = getattr(client.async_client, method)(*args, **kwargs)
        running = asyncio.get_running_loop()
        if running is client.loop:  # pragma: no cover - a handler on the client's own loop
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, client.loop))

    def close(self) -> None:
        if self.owned:
            client = self.client
            assert isinstance(client, Client)
            client.close()
