"""The blocking client: a thin wrapper that runs an :class:`AsyncClient` on a private
event loop in a background thread. Every method blocks until convo answers; calls from
several threads are pipelined on the one connection. Interrupting a call
(``KeyboardInterrupt``) or passing ``timeout`` to :meth:`Client.call` cancels it, which
sends ``$/cancelRequest``. :meth:`Client.subscribe` gives a blocking iterator of changes.
"""

from __future__ import annotations

import asyncio
import atexit
import builtins
import concurrent.futures
import threading
import time
import weakref
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from ._client import UNSET, AsyncClient, RuntimeHandler, _with_message_ids
from ._subscription import Change, Subscription
from .errors import ConnectionClosed, SessionNotFound, StorageUnavailable
from .types import (
    AddedResponse,
    Cache,
    ClearThinking,
    ClearToolResults,
    Compaction,
    Counted,
    Exported,
    Fit,
    Format,
    ResponseObject,
)

__all__ = ["Client", "SyncSubscription"]

T = TypeVar("T")

_live: weakref.WeakSet[Client] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for client in list(_live):
        try:
            client.close(timeout=2.0)
        except Exception:
            pass


class _Captured(Exception):
    def __init__(self, method: str, params: Any, append: bool = False) -> None:
        self.method = method
        self.params = params
        self.append = append  # sent by AsyncClient._append: exactly once


class _Recorder:
    """Stands in for an AsyncClient to read the request one of its methods would send."""

    _turn_params = AsyncClient._turn_params

    async def request(self, method: str, params: Any = None) -> Any:
        raise _Captured(method, params)

    async def _append(self, method: str, params: Any) -> Any:
        raise _Captured(method, params, append=True)


_RECORDER: Any = _Recorder()


class Client:
    """A blocking convo client; takes the same arguments as :class:`AsyncClient`.

    ``with Client(store="memory") as c: c.create("demo"); c.add_user("demo", "hi")``.
    The child is spawned and initialized by the constructor, and shut down by
    :meth:`close` (also on ``with`` exit and when the interpreter exits).
    """

    def __init__(self, **kwargs: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="convo-client", daemon=True)
        self._thread.start()
        self._closed = False
        try:
            self._async = AsyncClient(**kwargs)
            self._async._direct_writes = True
            self._call(self._async.start())
        except BaseException:
            self._stop_loop()
            raise
        _live.add(self)

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _stop_loop(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        if threading.current_thread() is not self._thread:
            self._thread.join(5.0)
        if not self._loop.is_running() and not self._loop.is_closed():
            self._loop.close()

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a blocking convo call from inside the client's own loop (use the AsyncClient there)")
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(timeout)
        except (KeyboardInterrupt, concurrent.futures.TimeoutError):
            # Cancels the task on the loop, which sends $/cancelRequest.
            fut.cancel()
            raise

    def call(self, method: str, params: Mapping[str, Any] | None = None, *, timeout: float | None = None) -> Any:
        """Any request by name; ``timeout`` (seconds) cancels it with ``$/cancelRequest``."""
        return self._request(method, params, timeout)

    def _request(self, method: str, params: Mapping[str, Any] | None, timeout: float | None = None) -> Any:
        # The fast path: the frame is written from this thread and the reader on the loop
        # completes a concurrent Future; no Task, no hop to the loop thread.
        if threading.current_thread() is self._thread:
            raise RuntimeError("a blocking convo call from inside the client's own loop (use the AsyncClient there)")
        aclient = self._async
        rid = next(aclient._ids)
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        aclient._pending[rid] = (fut, method)
        try:
            aclient._write(msg)
        except BaseException:
            aclient._pending.pop(rid, None)
            raise
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                wait = 0.5 if deadline is None else min(0.5, max(0.0, deadline - time.monotonic()))
                try:
                    return fut.result(wait)
                except concurrent.futures.TimeoutError:
                    if deadline is not None and time.monotonic() >= deadline:
                        raise
                    if aclient._protocol.eof or aclient.closed:
                        if fut.done():
                            return fut.result()
                        raise ConnectionClosed(aclient._close_reason or "convo exited", method=method) from None
        except (KeyboardInterrupt, concurrent.futures.TimeoutError):
            self._loop.call_soon_threadsafe(aclient._abandon, rid)
            raise

    def _fast(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call an AsyncClient method's request without running it on the loop: read the
        (method, params) it would send, then send them with :meth:`_request`."""
        coro = fn(_RECORDER, *args, **kwargs)
        try:
            coro.send(None)
        except _Captured as c:
            if c.append:
                return self._append(c.method, c.params)
            return self._request(c.method, c.params)
        coro.close()
        raise RuntimeError(f"{fn.__name__} did not send a request")

    def _append(self, method: str, params: dict[str, Any]) -> Any:
        """An append, exactly once: see :attr:`AsyncClient.exactly_once`."""
        if not self._async.exactly_once:
            return self._request(method, params)
        params = _with_message_ids(method, params)
        try:
            return self._request(method, params)
        except StorageUnavailable:
            return self._request(method, params)

    request = call

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        self._loop.call_soon_threadsafe(self._async.notify, method, params)

    @property
    def async_client(self) -> AsyncClient:
        """The underlying :class:`AsyncClient` (it lives on this client's loop thread)."""
        return self._async

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def pid(self) -> int | None:
        return self._async.pid

    @property
    def returncode(self) -> int | None:
        return self._async.returncode

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def server_info(self) -> dict[str, Any]:
        return self._async.server_info

    @property
    def capabilities(self) -> dict[str, Any]:
        return self._async.capabilities

    @property
    def exactly_once(self) -> bool:
        """See :attr:`AsyncClient.exactly_once`: appends carry message ids and are sent once
        more after 1006."""
        return self._async.exactly_once

    def set_runtime(self, handler: RuntimeHandler | None, session_id: str | None = None) -> None:
        """See :meth:`AsyncClient.set_runtime`. A plain function runs in a worker thread."""
        self._async.set_runtime(handler, session_id)

    def close(self, timeout: float = 5.0) -> int | None:
        """Shut convo down and wait for it (killing it after ``timeout``); stop the loop."""
        if self._closed:
            return self._async.returncode
        self._closed = True
        _live.discard(self)
        try:
            if self._loop.is_running():
                return self._call(self._async.close(timeout))
            return self._async.returncode
        finally:
            self._stop_loop()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<convo.Client pid={self.pid} closed={self._closed}>"

    # ------------------------------------------------------------------ typed methods
    # (the same as AsyncClient's, blocking)

    def initialize(self, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self._fast(AsyncClient.initialize, params)

    def shutdown(self) -> None:
        return self._fast(AsyncClient.shutdown)

    def create(
        self,
        session_id: str | None = None,
        *,
        system: str | None = None,
        cwd: str | None = None,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``session/create`` → SessionInfo. 1002 :class:`SessionExists` when the id is taken."""
        return self._fast(AsyncClient.create, session_id, system=system, cwd=cwd, title=title, metadata=metadata)

    def get(self, session_id: str) -> dict[str, Any]:
        """``session/get`` → SessionInfo."""
        return self._fast(AsyncClient.get, session_id)

    def list(
        self, limit: int | None = None, cursor: str | None = None, *, updated_before: str | None = None
    ) -> dict[str, Any]:
        """``session/list`` → ``{sessions, next_cursor}``, newest first."""
        return self._fast(AsyncClient.list, limit, cursor, updated_before=updated_before)

    def update(
        self,
        session_id: str,
        *,
        system: Any = UNSET,
        cwd: Any = UNSET,
        title: Any = UNSET,
        metadata: Any = UNSET,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """``session/update``: a field left out is kept, ``None`` clears it."""
        return self._fast(
            AsyncClient.update,
            session_id,
            system=system,
            cwd=cwd,
            title=title,
            metadata=metadata,
            expected_revision=expected_revision,
        )

    def delete(self, session_id: str, *, expected_revision: int | None = None) -> dict[str, Any]:
        return self._fast(AsyncClient.delete, session_id, expected_revision=expected_revision)

    def delete_many(
        self, session_ids: builtins.list[str] | None = None, *, updated_before: str | None = None
    ) -> dict[str, Any]:
        """``session/delete_many`` → ``{deleted}``, atomically."""
        return self._fast(AsyncClient.delete_many, session_ids, updated_before=updated_before)

    def add_user(
        self,
        session_id: str,
        text: Any,
        images: Sequence[str | Mapping[str, Any]] | None = None,
        *,
        message_id: str | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """``session/add_user`` → ``{message_id, index, revision}``; ``message_id``: see
        :meth:`AsyncClient.add_user`."""
        return self._fast(
            AsyncClient.add_user, session_id, text, images, message_id=message_id, expected_revision=expected_revision
        )

    def add_assistant(
        self,
        session_id: str,
        text: Any = None,
        tool_calls: Sequence[Mapping[str, Any]] | None = None,
        *,
        allow_empty: bool = False,
        message_id: str | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """``session/add_assistant``; ``allow_empty=True`` stores a turn that said nothing."""
        return self._fast(
            AsyncClient.add_assistant,
            session_id,
            text,
            tool_calls,
            allow_empty=allow_empty,
            message_id=message_id,
            expected_revision=expected_revision,
        )

    def add_tool_result(
        self,
        session_id: str,
        tool_call_id: str,
        content: Any,
        images: Sequence[str | Mapping[str, Any]] | None = None,
        *,
        message_id: str | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """1004 :class:`InvalidSequence` (a ``ValueError``) for a late, duplicate or unknown
        result; ``images`` as in :meth:`AsyncClient.add_tool_result`."""
        return self._fast(
            AsyncClient.add_tool_result,
            session_id,
            tool_call_id,
            content,
            images,
            message_id=message_id,
            expected_revision=expected_revision,
        )

    def add_message(
        self,
        session_id: str,
        message: Mapping[str, Any],
        *,
        allow_empty: bool = False,
        message_id: str | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """``session/add_message``; ``allow_empty=True`` stores an assistant message that said nothing."""
        return self._fast(
            AsyncClient.add_message,
            session_id,
            message,
            allow_empty=allow_empty,
            message_id=message_id,
            expected_revision=expected_revision,
        )

    def add_messages(
        self,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """All or nothing: ``{message_ids, revision}``; each message may carry its ``message_id``."""
        return self._fast(AsyncClient.add_messages, session_id, messages, expected_revision=expected_revision)

    def add_response(
        self,
        session_id: str,
        format: Format,
        response: ResponseObject,
        *,
        metadata: Mapping[str, Any] | None = None,
        message_id: str | None = None,
        expected_revision: int | None = None,
    ) -> AddedResponse:
        """``session/add_response`` → ``{message_id, index, revision, tool_call_ids}``: a
        provider's whole response (a dict, or the SDK's object) appended as one assistant
        message kept as it came; see :meth:`AsyncClient.add_response`."""
        return self._fast(
            AsyncClient.add_response,
            session_id,
            format,
            response,
            metadata=metadata,
            message_id=message_id,
            expected_revision=expected_revision,
        )

    def history(
        self,
        session_id: str,
        *,
        repair: bool = True,
        offset: int | None = None,
        limit: int | None = None,
        include_draft: bool = False,
        images: str | None = None,
    ) -> dict[str, Any]:
        """``session/history`` → ``{messages, revision, repaired}`` (and ``draft``)."""
        return self._fast(
            AsyncClient.history,
            session_id,
            repair=repair,
            offset=offset,
            limit=limit,
            include_draft=include_draft,
            images=images,
        )

    def trim(
        self,
        session_id: str,
        max_turns: int | None = None,
        *,
        max_tokens: int | None = None,
        format: Format | None = None,
        model: str | None = None,
        thinking: bool | None = None,
        store: bool | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """Exactly one of ``max_turns`` and ``max_tokens``: ``{removed, revision, tokens?, fits?}``;
        with ``max_tokens``, counted in the ``format`` body (see :meth:`AsyncClient.trim`)."""
        return self._fast(
            AsyncClient.trim,
            session_id,
            max_turns,
            max_tokens=max_tokens,
            format=format,
            model=model,
            thinking=thinking,
            store=store,
            expected_revision=expected_revision,
        )

    def fork(
        self, session_id: str, new_session_id: str | None = None, *, at_message_id: str | None = None
    ) -> dict[str, Any]:
        """SessionInfo of the new session (message ids kept; O(1))."""
        return self._fast(AsyncClient.fork, session_id, new_session_id, at_message_id=at_message_id)

    def pop(
        self,
        session_id: str,
        *,
        replace_with: Mapping[str, Any] | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """``session/pop`` → ``{message, revision}``."""
        return self._fast(AsyncClient.pop, session_id, replace_with=replace_with, expected_revision=expected_revision)

    def rewind(
        self,
        session_id: str,
        to_message_id: str,
        *,
        archive: bool | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """``session/rewind`` → ``{removed, revision, archived_session_id}``."""
        return self._fast(
            AsyncClient.rewind, session_id, to_message_id, archive=archive, expected_revision=expected_revision
        )

    def clear(self, session_id: str, *, expected_revision: int | None = None) -> dict[str, Any]:
        return self._fast(AsyncClient.clear, session_id, expected_revision=expected_revision)

    def to_dict(self, session_id: str, *, images: str | None = None) -> dict[str, Any]:
        return self._fast(AsyncClient.to_dict, session_id, images=images)

    def compact(
        self,
        session_id: str,
        keep_turns: int,
        summary: str | None = None,
        *,
        summarize: bool | None = None,
        archive: bool | None = None,
        timeout_ms: int | None = None,
        expected_revision: int | None = None,
        max_input_tokens: int | None = None,
    ) -> dict[str, Any]:
        """``session/compact`` → ``{removed, revision, summary_message_id, archived_session_id}``."""
        return self._fast(
            AsyncClient.compact,
            session_id,
            keep_turns,
            summary,
            summarize=summarize,
            archive=archive,
            timeout_ms=timeout_ms,
            expected_revision=expected_revision,
            max_input_tokens=max_input_tokens,
        )

    def image(self, ref: str) -> dict[str, Any]:
        """``session/image`` → ``{data, media_type}``."""
        return self._fast(AsyncClient.image, ref)

    def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """``session/search`` → ``{hits, next_cursor}``."""
        return self._fast(AsyncClient.search, query, session_id=session_id, limit=limit, cursor=cursor)

    def from_dict(
        self,
        data: Mapping[str, Any],
        *,
        replace: bool = False,
        repair: bool = False,
        expected_revision: int | None = None,
        format: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """SessionInfo plus ``repaired: {added, dropped}``; with ``format``, ``data`` is
        that provider's request body."""
        return self._fast(
            AsyncClient.from_dict,
            data,
            replace=replace,
            repair=repair,
            expected_revision=expected_revision,
            format=format,
            session_id=session_id,
        )

    def export(
        self,
        session_id: str,
        format: str = "openai_chat",
        *,
        repair: bool = True,
        images: str | None = None,
        model: str | None = None,
        thinking: bool | None = None,
        store: bool | None = None,
        compaction: Compaction | None = None,
        clear_thinking: ClearThinking | None = None,
        clear_tool_results: ClearToolResults | None = None,
        fit: Fit | None = None,
        cache: Cache | None = None,
    ) -> Exported:
        """``{payload, warnings, context?, edits?, fit?}``: the provider-ready request body
        parts; native turns of this format replayed verbatim (``model``, ``thinking``,
        ``store``, and the context options ``compaction``, ``clear_thinking``,
        ``clear_tool_results``, ``fit``, ``cache``: see :meth:`AsyncClient.export`)."""
        return self._fast(
            AsyncClient.export,
            session_id,
            format,
            repair=repair,
            images=images,
            model=model,
            thinking=thinking,
            store=store,
            compaction=compaction,
            clear_thinking=clear_thinking,
            clear_tool_results=clear_tool_results,
            fit=fit,
            cache=cache,
        )

    def validate(
        self,
        session_id: str,
        format: str = "openai_chat",
        *,
        model: str | None = None,
        thinking: bool | None = None,
        store: bool | None = None,
        cache: Cache | None = None,
    ) -> dict[str, Any]:
        """``{violations: [{index, rule, provider_error}]}`` (``cache``: the breakpoints
        export would place are checked too)."""
        return self._fast(
            AsyncClient.validate, session_id, format, model=model, thinking=thinking, store=store, cache=cache
        )

    def count_tokens(
        self,
        session_id: str,
        format: str | None = None,
        *,
        model: str | None = None,
        thinking: bool | None = None,
        store: bool | None = None,
        compaction: Compaction | None = None,
        clear_thinking: ClearThinking | None = None,
        clear_tool_results: ClearToolResults | None = None,
        fit: Fit | None = None,
        cache: Cache | None = None,
    ) -> Counted:
        """``{tokens, context?, edits?, fit?}``: see :meth:`AsyncClient.count_tokens`."""
        return self._fast(
            AsyncClient.count_tokens,
            session_id,
            format,
            model=model,
            thinking=thinking,
            store=store,
            compaction=compaction,
            clear_thinking=clear_thinking,
            clear_tool_results=clear_tool_results,
            fit=fit,
            cache=cache,
        )

    def run(
        self,
        session_id: str,
        input: str,
        *,
        images: Sequence[str] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        tools: Sequence[Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        timeout_ms: int | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """``session/run``: convo asks this client's runtime handler (``runtime/run``) and
        appends the user message and the answer in one step. ``{text, tool_calls, usage,
        message_ids, revision}``."""
        return self._fast(
            AsyncClient.run,
            session_id,
            input,
            images=images,
            temperature=temperature,
            max_tokens=max_tokens,
            tools=tools,
            metadata=metadata,
            timeout_ms=timeout_ms,
            expected_revision=expected_revision,
        )

    def json(
        self,
        session_id: str,
        input: str,
        schema: Mapping[str, Any],
        *,
        retries: int | None = None,
        images: Sequence[str] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        tools: Sequence[Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        timeout_ms: int | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """``session/json``: like :meth:`run`, the answer validated against ``schema``:
        ``{value, text, usage, message_ids, revision}``; 1009 :class:`InvalidOutput`."""
        return self._fast(
            AsyncClient.json,
            session_id,
            input,
            schema,
            retries=retries,
            images=images,
            temperature=temperature,
            max_tokens=max_tokens,
            tools=tools,
            metadata=metadata,
            timeout_ms=timeout_ms,
            expected_revision=expected_revision,
        )

    def stream(
        self,
        session_id: str,
        input: str,
        *,
        images: Sequence[str] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        tools: Sequence[Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        timeout_ms: int | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """``session/stream``: convo sends ``runtime/stream``; the handler's deltas go back
        as ``runtime/delta`` notifications and are kept as a draft until the final answer."""
        return self._fast(
            AsyncClient.stream,
            session_id,
            input,
            images=images,
            temperature=temperature,
            max_tokens=max_tokens,
            tools=tools,
            metadata=metadata,
            timeout_ms=timeout_ms,
            expected_revision=expected_revision,
        )

    def subscribe(self, session_id: str | None = None) -> SyncSubscription:
        """Watch the committed changes of ``session_id`` or, without it, of every session
        (see :meth:`AsyncClient.subscribe`): a :class:`SyncSubscription`, a context manager
        and blocking iterator of :class:`Change` objects.

        ``with c.subscribe("demo") as sub: for change in sub: ...`` subscribes on entry and
        unsubscribes on exit; a ``for`` loop over ``c.subscribe()`` subscribes by itself
        and unsubscribes when it is left. ``sub.get(timeout)`` waits for one change.
        """
        return SyncSubscription(self, self._async.subscribe(session_id))

    def unsubscribe(self, subscription: SyncSubscription | Subscription | str) -> None:
        """``session/unsubscribe``: stop a subscription (its iteration ends), or one by its
        id (an id convo does not know is -32602 :class:`InvalidParams`)."""
        if isinstance(subscription, SyncSubscription):
            subscription.close()
            return
        self._call(self._async.unsubscribe(subscription))

    def exists(self, session_id: str) -> bool:
        try:
            self.get(session_id)
            return True
        except SessionNotFound:
            return False

    def messages(self, session_id: str, *, repair: bool = True) -> builtins.list[dict[str, Any]]:
        """Just the messages of :meth:`history`."""
        return self.history(session_id, repair=repair)["messages"]

    def iter_sessions(self, page_size: int = 100) -> Any:
        """Every session, page by page."""
        cursor = None
        while True:
            page = self.list(limit=page_size, cursor=cursor)
            yield from page["sessions"]
            cursor = page.get("next_cursor")
            if not cursor:
                return


class SyncSubscription:
    """The blocking face of a :class:`Subscription` (what :meth:`Client.subscribe` gives):
    a context manager and iterator of :class:`Change` objects.

    Iteration ends after :meth:`close` (unread changes are dropped) and when the client
    closes; if convo exited on its own it then raises :class:`ConnectionClosed`.
    Interrupting a wait (``KeyboardInterrupt``) leaves the subscription as it was.
    """

    def __init__(self, client: Client, subscription: Subscription) -> None:
        self._client = client
        self._sub = subscription

    @property
    def id(self) -> str | None:
        """The ``subscription_id`` convo gave; ``None`` until started."""
        return self._sub.id

    @property
    def session_id(self) -> str | None:
        return self._sub.session_id

    @property
    def active(self) -> bool:
        return self._sub.active

    @property
    def closed(self) -> bool:
        return self._sub.closed

    @property
    def async_subscription(self) -> Subscription:
        """The underlying :class:`Subscription` (it lives on the client's loop thread)."""
        return self._sub

    def __repr__(self) -> str:
        return repr(self._sub).replace("convo.Subscription", "convo.SyncSubscription", 1)

    def _usable(self) -> bool:
        return not self._client.closed and self._client.loop.is_running()

    def start(self) -> SyncSubscription:
        """Send ``session/subscribe`` (once) and wait for the ``subscription_id``."""
        if not self._usable():
            raise ConnectionClosed("the client is closed")
        self._client._call(self._sub.start())
        return self

    def close(self) -> None:
        """Unsubscribe (once) and end the iteration; safe after the client closed."""
        if self._usable():
            self._client._call(self._sub.close())
        else:
            self._sub._closed = True
            self._sub._end(None)

    unsubscribe = close

    def __enter__(self) -> SyncSubscription:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def get(self, timeout: float | None = None) -> Change | None:
        """The next change, waiting at most ``timeout`` seconds (``0``: not at all) and
        then raising ``TimeoutError``; ``None`` once the subscription has ended.
        Subscribes first if not yet done."""
        if not self._usable():
            # The loop is gone: what was read before the client closed, then the end.
            if self._sub._unread:
                return self._sub._unread.popitem(last=False)[1]
            return None
        return self._client._call(self._sub.get(timeout))

    def pending(self) -> int:
        """How many changes (sessions) are waiting to be read."""
        return self._sub.pending()

    def __iter__(self) -> Iterator[Change]:
        owned = self._sub.id is None and not self._sub.closed  # this loop subscribed
        if owned:
            self.start()
        try:
            while True:
                change = self.get()
                if change is None:
                    return
                yield change
        finally:
            if owned:
                self.close()

    def __next__(self) -> Change:
        change = self.get()
        if change is None:
            raise StopIteration
        return change
