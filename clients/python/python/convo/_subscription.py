"""Watching sessions: ``session/subscribe``, ``session/unsubscribe`` and the
``session/changed`` notifications, routed by ``subscription_id`` to a :class:`Subscription`.

A subscription keeps the changes not yet read one per session (a newer change of a session
replaces its unread one, in its place), as convo itself does for a slow reader: per session
they stay in revision order and the last change is always kept, and a subscription nobody
reads costs one change per session, not one per change.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import ConnectionClosed, InvalidParams, InvalidRequest

if TYPE_CHECKING:
    from ._client import AsyncClient

__all__ = ["Change", "Subscription"]


@dataclass(frozen=True)
class Change:
    """One ``session/changed`` notification: a committed change of a session, by this
    process or by any other on the same store.

    ``change`` is ``created``, ``appended``, ``updated``, ``trimmed``, ``cleared``,
    ``imported``, ``deleted`` or ``draft`` (a stream's draft was saved; ``revision`` is
    then the session's, unchanged). Several changes may have been coalesced into one
    carrying the latest revision.
    """

    subscription_id: str
    session_id: str
    revision: int
    change: str
    message_count: int

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Change:
        return cls(
            subscription_id=str(params.get("subscription_id", "")),
            session_id=str(params.get("session_id", "")),
            revision=int(params.get("revision", 0)),
            change=str(params.get("change", "")),
            message_count=int(params.get("message_count", 0)),
        )


class Subscription:
    """The changes of one ``session/subscribe``: what :meth:`AsyncClient.subscribe` gives.

    - ``async with client.subscribe("demo") as sub: async for change in sub: ...`` —
      subscribed on entry, unsubscribed on exit;
    - ``async for change in client.subscribe():`` — subscribed by the loop, unsubscribed
      when the loop is left (``break``, an exception, or the subscription ending);
    - ``sub = await client.subscribe("demo")`` — subscribed now; :meth:`close` unsubscribes.

    Iteration ends after :meth:`close` (unread changes are dropped) and when the client
    closes (unread changes are read first); if convo exited on its own, it then raises
    :class:`ConnectionClosed`.
    """

    def __init__(self, client: AsyncClient, session_id: str | None = None) -> None:
        self._client = client
        self.session_id = session_id
        #: The ``subscription_id`` convo gave; ``None`` until started.
        self.id: str | None = None
        self._unread: collections.OrderedDict[str, Change] = collections.OrderedDict()
        self._waiters: list[asyncio.Future[None]] = []
        self._starting: asyncio.Future[None] | None = None
        self._ended = False
        self._closed = False
        self._error: BaseException | None = None

    # ------------------------------------------------------------------ state

    @property
    def active(self) -> bool:
        """Subscribed and not yet ended."""
        return self.id is not None and not self._ended

    @property
    def closed(self) -> bool:
        """Ended: unsubscribed, or the client's connection is gone."""
        return self._ended

    def __repr__(self) -> str:
        state = "active" if self.active else ("ended" if self._ended else "not started")
        return f"<convo.Subscription id={self.id!r} session_id={self.session_id!r} {state}>"

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> Subscription:
        """Send ``session/subscribe`` (once) and wait for the ``subscription_id``; from then
        on every committed change is kept for this subscription."""
        if self._ended:
            raise ConnectionClosed("the subscription has ended")
        if self.id is not None:
            return self
        if self._starting is not None:
            await asyncio.shield(self._starting)
            return self
        loop = asyncio.get_running_loop()
        self._starting = loop.create_future()
        try:
            await self._subscribe()
        except BaseException as e:
            self._ended = True
            self._closed = True
            if isinstance(e, Exception):
                self._starting.set_exception(e)
                self._starting.exception()  # retrieved here; other starters get it too
            else:
                self._starting.cancel()
            raise
        else:
            self._starting.set_result(None)
        return self

    async def _subscribe(self) -> None:
        client = self._client
        params: dict[str, Any] = {}
        if self.session_id is not None:
            params["session_id"] = self.session_id
        # A notification may overtake the reply (a change another process commits while
        # convo answers): the client keeps those of unknown ids while a subscribe is out.
        client._subscribing += 1
        pending = None
        try:
            pending = client.send("session/subscribe", params)
            result = await asyncio.shield(pending.future)
        except asyncio.CancelledError:
            if pending is not None:
                # convo may still subscribe: unsubscribe whatever id it gives.
                pending.future.add_done_callback(client._drop_orphan_subscription)
            raise
        finally:
            client._subscribing -= 1
            early = None
            if pending is not None and pending.future.done() and not pending.future.cancelled():
                if pending.future.exception() is None:
                    early = client._early_changes.pop(str(pending.future.result()["subscription_id"]), None)
            if client._subscribing == 0:
                client._early_changes.clear()
        self.id = str(result["subscription_id"])
        if client.closed or client._protocol.eof:
            # The connection ended while the reply was on its way.
            self._end(None if client.closed else ConnectionClosed(client._close_reason or "convo exited"))
            return
        client._subscriptions[self.id] = self
        for change in (early or {}).values():
            self._deliver(change)

    async def close(self) -> None:
        """Unsubscribe (``session/unsubscribe``, once) and end the iteration; unread changes
        are dropped. Safe to call twice, and after the client closed."""
        if self._closed:
            return
        self._closed = True
        if self._starting is not None and not self._starting.done():
            try:
                await asyncio.shield(self._starting)
            except BaseException:
                pass
        self._unread.clear()
        was_active = self.id is not None and not self._ended
        self._end(None)
        client = self._client
        if self.id is not None:
            client._subscriptions.pop(self.id, None)
        if was_active and not client.closed and not client._protocol.eof:
            try:
                await client.request("session/unsubscribe", {"subscription_id": self.id})
            except (ConnectionClosed, InvalidParams, InvalidRequest):
                pass  # the connection is gone, convo no longer knows the id, or it shut down

    unsubscribe = close

    def __await__(self) -> Generator[Any, None, Subscription]:
        return self.start().__await__()

    async def __aenter__(self) -> Subscription:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # ------------------------------------------------------------------ reading

    def __aiter__(self) -> AsyncIterator[Change]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Change]:
        owned = self.id is None and not self._ended  # this loop subscribed: it unsubscribes
        if owned:
            await self.start()
        try:
            while True:
                change = await self._next(None)
                if change is None:
                    return
                yield change
        finally:
            if owned:
                await self.close()

    async def __anext__(self) -> Change:
        if self.id is None and not self._ended:
            await self.start()
        change = await self._next(None)
        if change is None:
            raise StopAsyncIteration
        return change

    async def get(self, timeout: float | None = None) -> Change | None:
        """The next change, waiting at most ``timeout`` seconds (``0``: not at all) and
        then raising ``TimeoutError``; ``None`` once the subscription has ended.
        Subscribes first if not yet done."""
        if self.id is None and not self._ended:
            await self.start()
        return await self._next(timeout)

    def pending(self) -> int:
        """How many changes (sessions) are waiting to be read."""
        return len(self._unread)

    async def _next(self, timeout: float | None) -> Change | None:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            if self._unread:
                return self._unread.popitem(last=False)[1]
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            if self._ended:
                return None
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                raise TimeoutError("no change within the timeout")
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                if remaining is None:
                    await waiter
                else:
                    await asyncio.wait_for(waiter, remaining)
            except asyncio.TimeoutError:
                raise TimeoutError("no change within the timeout") from None
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    # ------------------------------------------------------------------ from the client

    def _deliver(self, change: Change) -> None:
        if self._ended:
            return
        # A session already unread keeps its place and takes the newer change.
        self._unread[change.session_id] = change
        self._wake()

    def _end(self, error: BaseException | None) -> None:
        """No more changes come: after close() (error None) or when the connection ended."""
        if self._ended:
            return
        self._ended = True
        if error is not None and not self._closed:
            self._error = error
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)
