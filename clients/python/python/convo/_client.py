"""The asyncio client: spawns convo, speaks JSON-RPC 2.0 with LSP framing over its stdio.

Stdlib only. Many requests may be in flight at once (pipelining); cancelling the task
that awaits one sends ``$/cancelRequest`` for it. convo's own requests to the host
(``runtime/run``, ``runtime/stream``) are answered by the runtime handler you give, and
its ``session/changed`` notifications go to the :class:`Subscription` they name.
"""

from __future__ import annotations

import asyncio
import builtins
import collections
import functools
import inspect
import itertools
import json
import os
import select
import subprocess
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._binary import find_convo_bin
from ._response import response_object
from ._subscription import Change, Subscription
from .errors import ConnectionClosed, ConvoError, StorageUnavailable, error_from_response
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

__all__ = ["AsyncClient", "PendingRequest", "Final", "RuntimeHandler", "UNSET", "METHODS", "Change", "Subscription"]


class _Unset:
    """Marks a parameter left out (as opposed to ``None``, which sends ``null``)."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Any = _Unset()


@dataclass
class Final:
    """Yield this from a streaming runtime handler to give the final answer explicitly
    (``text``, ``tool_calls``, ``usage``, ``model``, ``stop_reason``; or ``format`` and
    ``response``, the provider's assembled response). Without it the final answer is the
    concatenated text deltas and the collected tool calls."""

    answer: dict[str, Any] = field(default_factory=dict)


# A runtime handler receives the params of `runtime/run` or `runtime/stream` and returns
# the answer (a dict), an awaitable of it, or an (async) iterator of deltas: `str`
# pieces of text, dicts `{text?, tool_calls?}`, and optionally a last `Final(...)`.
# An answer may be `{"format": ..., "response": ...}`: the provider's whole response (a
# dict or the SDK's object), stored as `add_response` stores it.
RuntimeHandler = Callable[[dict[str, Any]], Any]

# Every method convo registers, and the client method that calls it.
METHODS: dict[str, str] = {
    "initialize": "initialize",
    "shutdown": "shutdown",
    "session/create": "create",
    "session/get": "get",
    "session/list": "list",
    "session/update": "update",
    "session/delete": "delete",
    "session/delete_many": "delete_many",
    "session/add_user": "add_user",
    "session/add_assistant": "add_assistant",
    "session/add_tool_result": "add_tool_result",
    "session/add_message": "add_message",
    "session/add_messages": "add_messages",
    "session/add_response": "add_response",
    "session/history": "history",
    "session/trim": "trim",
    "session/fork": "fork",
    "session/clear": "clear",
    "session/rewind": "rewind",
    "session/pop": "pop",
    "session/image": "image",
    "session/compact": "compact",
    "session/search": "search",
    "session/to_dict": "to_dict",
    "session/from_dict": "from_dict",
    "session/export": "export",
    "session/validate": "validate",
    "session/count_tokens": "count_tokens",
    "session/run": "run",
    "session/json": "json",
    "session/stream": "stream",
    "session/subscribe": "subscribe",
    "session/unsubscribe": "unsubscribe",
}


def _params(**kw: Any) -> dict[str, Any]:
    """Drop members left out: ``None`` for optional members (convo reads null as absent)
    and ``UNSET`` where ``None`` means ``null``."""
    return {k: v for k, v in kw.items() if v is not None and v is not UNSET}


def _with_message_ids(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` of an append with a message id for every message that has none: a
    random UUID v4 (``uuid.uuid4()``); for ``add_message`` the id may be given beside the
    message or in it, for ``add_messages`` each element carries its own. A new dict; the
    caller's messages are not changed."""
    if method == "session/add_messages":
        messages = params.get("messages")
        if isinstance(messages, builtins.list):
            params = {
                **params,
                "messages": [
                    {**m, "message_id": str(uuid.uuid4())}
                    if isinstance(m, Mapping) and m.get("message_id") is None
                    else m
                    for m in messages
                ],
            }
        return params
    if params.get("message_id") is not None:
        return params
    message = params.get("message")
    if method == "session/add_message" and isinstance(message, Mapping) and message.get("message_id") is not None:
        return params
    return {**params, "message_id": str(uuid.uuid4())}


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class AsyncClient:
    """An asyncio client for one convo child process.

    ``async with AsyncClient(store="memory") as c: ...`` spawns ``convo`` (see
    :func:`convo.find_convo_bin`), sends ``initialize``, and on exit sends ``shutdown``
    and ``exit`` and waits for the child, killing it if it does not go.

    Parameters: ``binary`` (path of the executable), ``store`` (``--store``: ``memory``,
    ``sqlite``, ``sqlite:PATH``; default: convo's own, which honours ``CONVO_STORE``),
    ``args`` (more command-line flags), ``env`` (extra environment variables),
    ``runtime`` (the default handler for ``runtime/run`` and ``runtime/stream``),
    ``runtime_format`` (``openai_chat`` etc.: runtime requests then carry ``payload``),
    ``stderr`` (``None``: the child's log lines go to this process's stderr; a callable
    receiving each line; or a file object / ``subprocess.DEVNULL``), ``on_notification``
    (called with ``(method, params)`` for every notification convo sends, including the
    ``session/changed`` ones that also go to their :meth:`subscribe` iterator),
    ``initialize`` (extra ``initialize`` params).
    """

    def __init__(
        self,
        *,
        binary: str | os.PathLike[str] | None = None,
        store: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        runtime: RuntimeHandler | None = None,
        runtime_format: str | None = None,
        stderr: Any = None,
        on_notification: Callable[[str, Any], Any] | None = None,
        initialize: Mapping[str, Any] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.binary = find_convo_bin(binary)
        self._argv = [self.binary]
        if store is not None:
            self._argv += ["--store", store]
        self._argv += ["--framing", "lsp", *args]
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._stderr = stderr
        self._init_params: dict[str, Any] = dict(initialize or {})
        if runtime_format is not None:
            self._init_params["runtime"] = {"format": runtime_format}
        self.runtime: RuntimeHandler | None = runtime
        self._session_runtimes: dict[str, RuntimeHandler] = {}
        # session_id -> callable(delta): sees the deltas a streaming runtime sends.
        self._delta_listeners: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self.on_notification = on_notification
        # subscription_id -> Subscription: where `session/changed` notifications go.
        self._subscriptions: dict[str, Subscription] = {}
        # While a session/subscribe is out, the changes of ids not yet known (a change
        # may overtake the reply), coalesced per session as a Subscription keeps them.
        self._subscribing = 0
        self._early_changes: dict[str, collections.OrderedDict[str, Change]] = {}
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[Any, str]] = {}  # asyncio or concurrent futures
        self._server_tasks: dict[Any, asyncio.Task[Any]] = {}
        self._transport: asyncio.SubprocessTransport | None = None
        self._stdin: Any = None
        # The blocking Client writes frames itself, from the calling thread, to this fd
        # (one thread hop fewer per call); every frame then goes through _write_fd.
        self._direct_writes = False
        self._direct_fd: int | None = None
        self._write_lock = threading.Lock()
        self._protocol: _Protocol = None  # type: ignore[assignment]
        self._closed = False
        self._close_reason: str | None = None
        self.server_info: dict[str, Any] = {}
        # Error replies that answer no request of ours (id null: a frame convo could not read).
        self.stray_errors: collections.deque[dict[str, Any]] = collections.deque(maxlen=100)
        self.capabilities: dict[str, Any] = {}
        self.protocol_version: int | None = None

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def spawn(cls, **kwargs: Any) -> AsyncClient:
        """Construct, start and initialize: ``c = await AsyncClient.spawn(store="memory")``."""
        client = cls(**kwargs)
        await client.start()
        return client

    async def start(self) -> AsyncClient:
        if self._transport is not None:
            return self
        loop = asyncio.get_running_loop()
        env = None
        if self._env is not None:
            env = {**os.environ, **self._env}
        stderr_arg: Any
        if self._stderr is None:
            stderr_arg = None
        elif callable(self._stderr):
            stderr_arg = subprocess.PIPE
        else:
            stderr_arg = self._stderr
        self._protocol = _Protocol(self, loop)
        transport, _ = await loop.subprocess_exec(
            lambda: self._protocol,
            *self._argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr_arg,
            env=env,
            cwd=self._cwd,
        )
        self._transport = transport
        self._stdin = transport.get_pipe_transport(0)
        if self._direct_writes:
            self._direct_fd = self._stdin.get_extra_info("pipe").fileno()
        try:
            result = await self.initialize(self._init_params)
        except BaseException:
            await self._kill()
            raise
        self.server_info = result.get("server_info", {})
        self.capabilities = result.get("capabilities", {})
        self.protocol_version = result.get("protocol_version")
        return self

    @property
    def pid(self) -> int | None:
        return self._transport.get_pid() if self._transport is not None else None

    @property
    def returncode(self) -> int | None:
        return self._transport.get_returncode() if self._transport is not None else None

    @property
    def closed(self) -> bool:
        return self._closed

    async def __aenter__(self) -> AsyncClient:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self, timeout: float = 5.0) -> int | None:
        """Shut convo down (``shutdown``, ``exit``, end of input) and wait for it; kill it
        after ``timeout`` seconds. Returns its exit code. Safe to call twice."""
        if self._transport is None:
            return None
        if not self._closed:
            try:
                if self.returncode is None and not self._protocol.eof:
                    try:
                        await asyncio.wait_for(self.shutdown(), timeout)
                        self.notify("exit")
                    except (ConvoError, asyncio.TimeoutError, OSError):
                        pass
            finally:
                self._closed = True
                self._close_reason = "the client was closed"
                self._close_stdin()
        try:
            await asyncio.wait_for(asyncio.shield(self._protocol.exited), timeout)
        except asyncio.TimeoutError:
            await self._kill()
        self._finish()
        return self.returncode

    async def _kill(self) -> None:
        self._closed = True
        if self._transport is not None and self._transport.get_returncode() is None:
            try:
                self._transport.kill()
            except ProcessLookupError:
                pass
            await asyncio.shield(self._protocol.exited)
        self._finish()

    def _close_stdin(self) -> None:
        if self._stdin is not None and not self._stdin.is_closing():
            with self._write_lock:
                self._stdin.close()

    def _finish(self) -> None:
        self._close_stdin()
        for task in list(self._server_tasks.values()):
            task.cancel()
        self._fail_pending(self._close_reason or "convo exited")
        self._end_subscriptions()
        if self._transport is not None:
            self._transport.close()

    def _fail_pending(self, reason: str) -> None:
        pending, self._pending = self._pending, {}
        for fut, method in pending.values():
            if not fut.done():
                fut.set_exception(ConnectionClosed(f"{reason} before answering {method}", method=method))

    def _on_eof(self) -> None:
        """stdout ended: convo exited (or closed its output)."""
        if self._close_reason is None:
            code = self.returncode
            self._close_reason = "convo exited" + (f" (code {code})" if code is not None else "")
        self._fail_pending(self._close_reason)
        self._end_subscriptions()

    def _end_subscriptions(self) -> None:
        """The connection ended: every subscription's iteration ends after its unread
        changes (raising ConnectionClosed once if convo went on its own)."""
        subs, self._subscriptions = self._subscriptions, {}
        self._early_changes.clear()
        error = None if self._closed else ConnectionClosed(self._close_reason or "convo exited")
        for sub in subs.values():
            sub._end(error)

    # ------------------------------------------------------------------ framing

    def _write(self, obj: Any) -> None:
        stdin = self._stdin
        if stdin is None:
            raise ConnectionClosed("the client is not started")
        if self._closed or stdin.is_closing() or self._protocol.eof:
            raise ConnectionClosed(self._close_reason or "the client is closed")
        body = _dumps(obj)
        data = b"Content-Length: %d\r\n\r\n" % len(body) + body
        if self._direct_fd is not None:
            self._write_fd(data)
        else:
            stdin.write(data)

    def _write_fd(self, data: bytes) -> None:
        """Write a whole frame to the (non-blocking) pipe, waiting while it is full;
        frames written by several threads never interleave."""
        fd = self._direct_fd
        assert fd is not None
        view = memoryview(data)
        with self._write_lock:
            if self._stdin.is_closing():
                raise ConnectionClosed(self._close_reason or "the client is closed")
            while view:
                try:
                    n = os.write(fd, view)
                except BlockingIOError:
                    select.select([], [fd], [], 1.0)
                    continue
                except (BrokenPipeError, OSError) as e:
                    raise ConnectionClosed(f"convo's input is closed: {e}") from e
                view = view[n:]

    def _write_raw(self, data: bytes) -> None:
        """Write bytes as they are (tests use this to send malformed frames)."""
        assert self._stdin is not None
        if self._direct_fd is not None:
            self._write_fd(data)
        else:
            self._stdin.write(data)

    def _on_frame(self, body: bytes) -> None:
        try:
            msg = json.loads(body)
        except ValueError:
            return
        if isinstance(msg, list):
            for m in msg:
                self._dispatch(m)
        else:
            self._dispatch(msg)

    def _on_stderr_line(self, line: str) -> None:
        sink = self._stderr
        try:
            r = sink(line)
            if inspect.isawaitable(r):
                asyncio.ensure_future(r)
        except Exception:
            pass

    def _served(self, rid: Any, _task: Any) -> None:
        self._server_tasks.pop(rid, None)

    def _dispatch(self, msg: Any) -> None:
        if not isinstance(msg, dict):
            return
        method = msg.get("method")
        if method is None:
            rid = msg.get("id")
            entry = self._pending.pop(rid, None) if isinstance(rid, int) else None
            if entry is None:
                if "error" in msg:
                    self.stray_errors.append(msg["error"])
                return
            fut, name = entry
            if fut.done():
                return
            if "error" in msg:
                fut.set_exception(error_from_response(msg["error"], name))
            else:
                fut.set_result(msg.get("result"))
            return
        params = msg.get("params")
        if "id" in msg:
            rid = msg["id"]
            serving = asyncio.ensure_future(self._serve(rid, method, params))
            self._server_tasks[rid] = serving
            serving.add_done_callback(functools.partial(self._served, rid))
            return
        if method == "$/cancelRequest":
            target = params.get("id") if isinstance(params, dict) else None
            running = self._server_tasks.get(target)
            if running is not None:
                running.cancel()
            return
        if method == "session/changed" and isinstance(params, dict):
            self._route_change(params)
        if self.on_notification is not None:
            try:
                r = self.on_notification(method, params)
                if inspect.isawaitable(r):
                    asyncio.ensure_future(r)
            except Exception:
                pass

    def _route_change(self, params: dict[str, Any]) -> None:
        sid = params.get("subscription_id")
        if not isinstance(sid, str):
            return
        try:
            change = Change.from_params(params)
        except (TypeError, ValueError):
            return
        sub = self._subscriptions.get(sid)
        if sub is not None:
            sub._deliver(change)
        elif self._subscribing:
            self._early_changes.setdefault(sid, collections.OrderedDict())[change.session_id] = change

    def _drop_orphan_subscription(self, fut: asyncio.Future[Any]) -> None:
        """A subscribe whose caller was cancelled got its reply: unsubscribe it."""
        if fut.cancelled() or fut.exception() is not None:
            return
        result = fut.result()
        sid = result.get("subscription_id") if isinstance(result, dict) else None
        if not isinstance(sid, str):
            return
        self._early_changes.pop(sid, None)
        if self._closed or self._protocol.eof:
            return
        try:
            pending = self.send("session/unsubscribe", {"subscription_id": sid})
        except ConvoError:
            return
        pending.future.add_done_callback(lambda f: f.cancelled() or f.exception())

    # ------------------------------------------------------------------ requests

    def send(self, method: str, params: Mapping[str, Any] | None = None) -> PendingRequest:
        """Send a request and return at once: a :class:`PendingRequest` (its ``id``,
        awaitable for the result; its ``cancel()`` sends ``$/cancelRequest`` and lets the
        reply, -32800 :class:`RequestCancelled` with a stream's ``message_ids``, arrive)."""
        loop = asyncio.get_running_loop()
        rid = next(self._ids)
        fut: asyncio.Future[Any] = loop.create_future()
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self._pending[rid] = (fut, method)
        try:
            self._write(msg)
        except BaseException:
            self._pending.pop(rid, None)
            raise
        return PendingRequest(self, rid, method, fut)

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Send a request and wait for its result (or raise its :class:`ConvoError`).
        Cancelling the awaiting task sends ``$/cancelRequest`` for it."""
        pending = self.send(method, params)
        try:
            if self._protocol._paused:
                await self._protocol.drain()
            return await pending.future
        except asyncio.CancelledError:
            if self._pending.pop(pending.id, None) is not None and not self._closed:
                try:
                    self._cancel_notice(pending.id)
                except ConvoError:
                    pass
            raise

    @property
    def exactly_once(self) -> bool:
        """Whether convo's ``initialize`` said ``capabilities.exactly_once``: then every
        append (``add_user``, ``add_assistant``, ``add_tool_result``, ``add_message``,
        ``add_messages``, ``add_response``) is sent with a message id (a UUID v4 chosen
        here when the caller gave none) and sent once more, the same, after 1006
        :class:`StorageUnavailable`; a retry of a write that did commit is answered as the
        first time, plus ``duplicate: True``. Against an older server (which would ignore
        the ids) appends are sent as given, once."""
        return self.capabilities.get("exactly_once") is True

    async def _append(self, method: str, params: dict[str, Any]) -> Any:
        """An append, exactly once (see :attr:`exactly_once`): its ids filled in, and one
        retry of the same request after 1006. No other error is retried."""
        if not self.exactly_once:
            return await self.request(method, params)
        params = _with_message_ids(method, params)
        try:
            return await self.request(method, params)
        except StorageUnavailable:
            return await self.request(method, params)

    def _abandon(self, rid: int) -> None:
        """The blocking caller gave up on ``rid``: tell convo."""
        if self._pending.pop(rid, None) is not None and not self._closed:
            try:
                self._cancel_notice(rid)
            except ConvoError:
                pass

    def _cancel_notice(self, rid: int) -> None:
        self._write({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": rid}})

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification (no reply)."""
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._write(msg)

    async def drain(self) -> None:
        """Wait while the pipe to convo is full (convo applies back-pressure when it has
        more than ``--max-pending-bytes`` unanswered): pipelining loops may await this."""
        if self._protocol is not None:
            await self._protocol.drain()

    # ------------------------------------------------------------------ runtime (server -> client)

    def set_runtime(self, handler: RuntimeHandler | None, session_id: str | None = None) -> None:
        """Set (or with ``None`` remove) the handler for convo's runtime requests: the
        default one, or the one for the requests about ``session_id``."""
        if session_id is None:
            self.runtime = handler
        elif handler is None:
            self._session_runtimes.pop(session_id, None)
        else:
            self._session_runtimes[session_id] = handler

    async def _serve(self, rid: Any, method: str, params: Any) -> None:
        try:
            if method in ("runtime/run", "runtime/stream") and isinstance(params, dict):
                handler = self._session_runtimes.get(str(params.get("session_id"))) or self.runtime
                if handler is None:
                    raise _RpcError(-32601, "no runtime: this host gave the convo client no runtime handler")
                result = _runtime_answer(await _call_runtime(self, handler, params, method == "runtime/stream"))
            else:
                raise _RpcError(-32601, f"method not found: {method}")
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "result": result}
        except asyncio.CancelledError:
            # convo gave up on this request ($/cancelRequest or shutdown): no reply.
            return
        except _RpcError as e:
            reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": e.code, "message": e.message}}
            if e.data is not None:
                reply["error"]["data"] = e.data
        except Exception as e:  # the host's own failure: convo answers 1008 reason error
            reply = {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {"code": -32000, "message": f"{type(e).__name__}: {e}", "data": {"type": type(e).__name__}},
            }
        if not self._closed:
            try:
                self._write(reply)
            except ConvoError:
                pass

    # ------------------------------------------------------------------ typed methods

    async def initialize(self, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return await self.request("initialize", dict(params or {}))

    async def shutdown(self) -> None:
        await self.request("shutdown")

    async def create(
        self,
        session_id: str | None = None,
        *,
        system: str | None = None,
        cwd: str | None = None,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``session/create`` → SessionInfo. 1002 :class:`SessionExists` when the id is taken."""
        return await self.request(
            "session/create", _params(session_id=session_id, system=system, cwd=cwd, title=title, metadata=metadata)
        )

    async def get(self, session_id: str) -> dict[str, Any]:
        """``session/get`` → SessionInfo."""
        return await self.request("session/get", {"session_id": session_id})

    async def exists(self, session_id: str) -> bool:
        from .errors import SessionNotFound

        try:
            await self.get(session_id)
            return True
        except SessionNotFound:
            return False

    async def list(
        self, limit: int | None = None, cursor: str | None = None, *, updated_before: str | None = None
    ) -> dict[str, Any]:
        """``session/list`` → ``{sessions, next_cursor}``, newest first; ``updated_before``
        (RFC 3339) keeps the sessions last updated strictly before it."""
        return await self.request(
            "session/list", _params(limit=limit, cursor=cursor, updated_before=updated_before)
        )

    async def iter_sessions(self, page_size: int = 100) -> AsyncIterator[dict[str, Any]]:
        """Every session, page by page."""
        cursor = None
        while True:
            page = await self.list(limit=page_size, cursor=cursor)
            for info in page["sessions"]:
                yield info
            cursor = page.get("next_cursor")
            if not cursor:
                return

    async def update(
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
        params: dict[str, Any] = {"session_id": session_id}
        for k, v in (("system", system), ("cwd", cwd), ("title", title), ("metadata", metadata)):
            if v is not UNSET:
                params[k] = v
        if expected_revision is not None:
            params["expected_revision"] = expected_revision
        return await self.request("session/update", params)

    async def delete(self, session_id: str, *, expected_revision: int | None = None) -> dict[str, Any]:
        return await self.request("session/delete", _params(session_id=session_id, expected_revision=expected_revision))

    async def delete_many(
        self, session_ids: builtins.list[str] | None = None, *, updated_before: str | None = None
    ) -> dict[str, Any]:
        """``session/delete_many`` → ``{deleted}``: the sessions named (unknown ones
        skipped), or every one last updated before ``updated_before``, atomically."""
        return await self.request(
            "session/delete_many", _params(session_ids=session_ids, updated_before=updated_before)
        )

    async def add_user(
        self,
        session_id: str,
        text: Any,
        images: Sequence[str | Mapping[str, Any]] | None = None,
        *,
        message_id: str | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """``session/add_user`` → ``{message_id, index, revision}`` (and ``duplicate:
        True`` when ``message_id`` names this message, already stored). ``message_id``: a
        UUID, the message's id; one is chosen when left out (see :attr:`exactly_once`)."""
        return await self._append(
            "session/add_user",
            _params(
                session_id=session_id,
                text=text,
                images=list(images) if images is not None else None,
                message_id=message_id,
                expected_revision=expected_revision,
            ),
        )

    async def add_assistant(
        self,
        session_id: str,
        text: Any = None,
        tool_calls: Sequence[Mapping[str, Any]] | None = None,
        *,
        allow_empty: bool = False,
        message_id: str | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """``session/add_assistant`` → ``{message_id, index, revision}``. A turn with neither
        text nor tool calls is -32602 :class:`InvalidParams` unless ``allow_empty=True``: then
        it is stored as given (a model that answered nothing), and ``export`` leaves it out
        with a warning. ``message_id`` as in :meth:`add_user`."""
        params = _params(session_id=session_id, message_id=message_id, expected_revision=expected_revision)
        params["text"] = text
        if tool_calls is not None:
            params["tool_calls"] = list(tool_calls)
        if allow_empty:
            params["allow_empty"] = True
        return await self._append("session/add_assistant", params)

    async def add_tool_result(
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
        result. ``images``: what the tool returned as images (a screenshot, a plot), as in
        :meth:`add_user` (base64 strings or ``{"ref": ...}``); exported inside the result
        where the format carries them (Chat Completions leaves them out with a warning).
        ``message_id`` as in :meth:`add_user`."""
        params = _params(
            session_id=session_id, tool_call_id=tool_call_id, message_id=message_id, expected_revision=expected_revision
        )
        params["content"] = content
        if images is not None:
            params["images"] = list(images)
        return await self._append("session/add_tool_result", params)

    async def add_message(
        self,
        session_id: str,
        message: Mapping[str, Any],
        *,
        allow_empty: bool = False,
        message_id: str | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """``session/add_message``. ``allow_empty=True`` stores an assistant message with
        neither text nor tool calls (sent as the message's ``allow_empty`` member).
        ``message_id`` as in :meth:`add_user` (or a ``message_id`` member of ``message``)."""
        msg = dict(message)
        if allow_empty:
            msg["allow_empty"] = True
        return await self._append(
            "session/add_message",
            _params(session_id=session_id, message=msg, message_id=message_id, expected_revision=expected_revision),
        )

    async def add_messages(
        self,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """All or nothing: ``{message_ids, revision}``. Each message may carry its
        ``message_id`` (a UUID); one is chosen for each that has none (see
        :attr:`exactly_once`). ``duplicate: True`` when every one is stored already, the
        same."""
        return await self._append(
            "session/add_messages",
            _params(
                session_id=session_id,
                messages=[dict(m) for m in messages],
                expected_revision=expected_revision,
            ),
        )

    async def add_response(
        self,
        session_id: str,
        format: Format,
        response: ResponseObject,
        *,
        metadata: Mapping[str, Any] | None = None,
        message_id: str | None = None,
        expected_revision: int | None = None,
    ) -> AddedResponse:
        """``session/add_response`` → ``{message_id, index, revision, tool_call_ids}``:
        appends a provider's whole response as one assistant message, the turn kept as it
        came (``native``: thinking, signatures, reasoning items), its ``usage`` normalised.
        An export to the same ``format`` replays it verbatim.

        ``format``: ``anthropic_messages`` (a Message), ``openai_responses`` (a Response,
        or the compact endpoint's result, a CompactedResponse: stored as a compaction
        point), ``openai_chat`` (a ChatCompletion), ``gemini_contents`` (a
        GenerateContentResponse; candidate 0), ``gemini_interactions`` (an Interaction,
        ``completed`` or ``requires_action``; its ``steps`` are the turn). ``response``: the response as a dict (sent
        as it is, member order kept) or the SDK's object, sent as the SDK sends a model
        back: ``model_dump(mode="json", by_alias=True, exclude_unset=True)`` without its
        ``__api_exclude__`` fields, bytes as standard base64 (see :mod:`convo._response`).
        ``tool_call_ids`` are what the results of the turn's calls must name.
        ``metadata`` is merged with ``{response_id, stop_reason}``. A response of another
        format, or with no assistant output (failed, refused with empty content, stopped
        by the content filter with no content, no candidate), is -32602
        :class:`InvalidParams` and stores nothing. ``message_id`` as in :meth:`add_user`."""
        return await self._append(
            "session/add_response",
            _params(
                session_id=session_id,
                format=format,
                response=response_object(response),
                metadata=dict(metadata) if metadata is not None else None,
                message_id=message_id,
                expected_revision=expected_revision,
            ),
        )

    async def history(
        self,
        session_id: str,
        *,
        repair: bool = True,
        offset: int | None = None,
        limit: int | None = None,
        include_draft: bool = False,
        images: str | None = None,
    ) -> dict[str, Any]:
        """``session/history`` → ``{messages, revision, repaired}`` (and ``draft``);
        ``images="ref"`` shows each image as ``{ref, media_type, bytes}``."""
        params = _params(session_id=session_id, offset=offset, limit=limit, images=images)
        if not repair:
            params["repair"] = False
        if include_draft:
            params["include_draft"] = True
        return await self.request("session/history", params)

    async def messages(self, session_id: str, *, repair: bool = True) -> builtins.list[dict[str, Any]]:
        """Just the messages of :meth:`history`."""
        return (await self.history(session_id, repair=repair))["messages"]

    async def trim(
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
        """Exactly one of ``max_turns`` and ``max_tokens``: ``{removed, revision, tokens?, fits?}``.
        With ``max_tokens``, the tokens are those of the ``format`` body (default
        ``openai_chat``) built with ``model``, ``thinking`` and ``store`` (see :meth:`export`)."""
        return await self.request(
            "session/trim",
            _params(
                session_id=session_id,
                max_turns=max_turns,
                max_tokens=max_tokens,
                format=format,
                model=model,
                thinking=thinking,
                store=store,
                expected_revision=expected_revision,
            ),
        )

    async def fork(
        self, session_id: str, new_session_id: str | None = None, *, at_message_id: str | None = None
    ) -> dict[str, Any]:
        """SessionInfo of the new session (message ids kept; O(1))."""
        return await self.request(
            "session/fork", _params(session_id=session_id, new_session_id=new_session_id, at_message_id=at_message_id)
        )

    async def rewind(
        self,
        session_id: str,
        to_message_id: str,
        *,
        archive: bool | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """``session/rewind`` → ``{removed, revision, archived_session_id}``: drops every
        message after ``to_message_id`` (a tool-call group stays whole); with ``archive``
        the history as it was is first kept as a new session."""
        return await self.request(
            "session/rewind",
            _params(
                session_id=session_id,
                to_message_id=to_message_id,
                archive=archive,
                expected_revision=expected_revision,
            ),
        )

    async def pop(
        self,
        session_id: str,
        *,
        replace_with: Mapping[str, Any] | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """``session/pop`` → ``{message, revision}``: removes the last stored message,
        whatever its role, and returns it (``None`` on an empty session); ``replace_with``
        (a message as ``add_message`` takes it) is stored in its place in the same step."""
        return await self.request(
            "session/pop",
            _params(session_id=session_id, replace_with=replace_with, expected_revision=expected_revision),
        )

    async def clear(self, session_id: str, *, expected_revision: int | None = None) -> dict[str, Any]:
        return await self.request("session/clear", _params(session_id=session_id, expected_revision=expected_revision))

    async def to_dict(self, session_id: str, *, images: str | None = None) -> dict[str, Any]:
        return await self.request("session/to_dict", _params(session_id=session_id, images=images))

    async def compact(
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
        """``session/compact`` → ``{removed, revision, summary_message_id, archived_session_id}``:
        the turns before the last ``keep_turns`` replaced by ``summary``, or by one the
        runtime writes (``summarize=True``, ``purpose: "summarize"``). With
        ``max_input_tokens``, no request to the runtime is larger: the turns are summarised
        in parts (``part: {index, count}`` in its params), then merged."""
        return await self.request(
            "session/compact",
            _params(
                session_id=session_id,
                keep_turns=keep_turns,
                summary=summary,
                summarize=summarize,
                archive=archive,
                timeout_ms=timeout_ms,
                expected_revision=expected_revision,
                max_input_tokens=max_input_tokens,
            ),
        )

    async def image(self, ref: str) -> dict[str, Any]:
        """``session/image`` → ``{data, media_type}``: the image a ref names."""
        return await self.request("session/image", {"ref": ref})

    async def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """``session/search`` → ``{hits: [{session_id, message_id, index, role, snippet}],
        next_cursor}``: full-text search over message text (words, ``prefix*``,
        ``"phrases"``, all required), best match first; a message shared by forks is a hit
        in each session holding it."""
        return await self.request(
            "session/search", _params(query=query, session_id=session_id, limit=limit, cursor=cursor)
        )

    async def from_dict(
        self,
        data: Mapping[str, Any],
        *,
        replace: bool = False,
        repair: bool = False,
        expected_revision: int | None = None,
        format: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """SessionInfo plus ``repaired: {added, dropped}``. With ``format``
        (``openai_chat``, ``openai_responses``, ``anthropic_messages``,
        ``gemini_contents``) ``data`` is that provider's request body (each assistant turn
        kept as its ``native`` form, so exporting it back gives the same body), and
        ``session_id`` names the new session."""
        params: dict[str, Any] = {"data": dict(data)}
        if format is not None:
            params["format"] = format
        if session_id is not None:
            params["session_id"] = session_id
        if replace:
            params["replace"] = True
        if repair:
            params["repair"] = True
        if expected_revision is not None:
            params["expected_revision"] = expected_revision
        return await self.request("session/from_dict", params)

    async def export(
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
        """``{payload, warnings, context?, edits?, fit?}``: the provider-ready request body parts
        (``openai_chat``: ``{messages}``; ``openai_responses``: ``{instructions?, input}``;
        ``anthropic_messages``: ``{system?, messages}``; ``gemini_contents``:
        ``{system_instruction?, contents}``). A turn stored with ``native`` of this format
        is replayed verbatim; the others are built from the common form, what the format
        cannot carry left out with a warning.

        ``model``: the model the request is for — only native bodies of that model (or it
        plus a date) are replayed verbatim. ``thinking`` (``anthropic_messages``):
        ``False`` leaves thinking blocks out. ``store`` (``openai_responses``): ``False``
        for a stateless request, leaving out reasoning without ``encrypted_content``.
        ``None`` leaves an option out (convo's default).

        The context options (spec section 17; see :mod:`convo.types`) edit the body on
        its way out, never the stored history: ``compaction`` (``"use"``, the default:
        the body starts at the latest compaction point of this format, and ``context``
        says where; ``"ignore"``), ``clear_thinking`` (``{"keep": 1}``),
        ``clear_tool_results`` (``{"keep": 3, "exclude_tools": [...], "placeholder":
        ...}``; the reply's ``edits``), ``fit`` (``{"max_tokens": N, "keep_turns": 1}``:
        the reply's ``fit``; :class:`~convo.TooLarge` with ``tokens`` and ``max_tokens``
        when it cannot fit) and ``cache`` (``True``, or ``{"ttl", "system_ttl"}`` for
        Anthropic breakpoints, ``{"key", "retention"}`` for OpenAI's prompt cache)."""
        params: dict[str, Any] = _params(
            session_id=session_id,
            format=format,
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
        if not repair:
            params["repair"] = False
        return await self.request("session/export", params)

    async def validate(
        self,
        session_id: str,
        format: str = "openai_chat",
        *,
        model: str | None = None,
        thinking: bool | None = None,
        store: bool | None = None,
        cache: Cache | None = None,
    ) -> dict[str, Any]:
        """``{violations: [{index, rule, provider_error}]}`` for the history as
        :meth:`export` with ``repair=False`` and these options would send it (with
        ``cache``, the breakpoints export would place are checked too:
        ``cache_breakpoints``, ``cache_ttl_order``)."""
        return await self.request(
            "session/validate",
            _params(session_id=session_id, format=format, model=model, thinking=thinking, store=store, cache=cache),
        )

    async def count_tokens(
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
        """``{tokens, context?, edits?, fit?}``: the tokens of what :meth:`export` with
        these options (the context options included) would send; with ``fit``, a preview
        of the fitted body, ``fit`` saying what it took."""
        return await self.request(
            "session/count_tokens",
            _params(
                session_id=session_id,
                format=format,
                model=model,
                thinking=thinking,
                store=store,
                compaction=compaction,
                clear_thinking=clear_thinking,
                clear_tool_results=clear_tool_results,
                fit=fit,
                cache=cache,
            ),
        )

    def _turn_params(
        self,
        session_id: str,
        input: str,
        images: Sequence[str] | None,
        temperature: float | None,
        max_tokens: int | None,
        tools: Sequence[Any] | None,
        metadata: Mapping[str, Any] | None,
        timeout_ms: int | None,
        expected_revision: int | None,
    ) -> dict[str, Any]:
        return _params(
            session_id=session_id,
            input=input,
            images=list(images) if images is not None else None,
            temperature=temperature,
            max_tokens=max_tokens,
            tools=list(tools) if tools is not None else None,
            metadata=dict(metadata) if metadata is not None else None,
            timeout_ms=timeout_ms,
            expected_revision=expected_revision,
        )

    async def run(
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
        return await self.request(
            "session/run",
            self._turn_params(
                session_id, input, images, temperature, max_tokens, tools, metadata, timeout_ms, expected_revision
            ),
        )

    async def json(
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
        params = self._turn_params(
            session_id, input, images, temperature, max_tokens, tools, metadata, timeout_ms, expected_revision
        )
        params["schema"] = dict(schema)
        if retries is not None:
            params["retries"] = retries
        return await self.request("session/json", params)

    async def stream(
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
        return await self.request(
            "session/stream",
            self._turn_params(
                session_id, input, images, temperature, max_tokens, tools, metadata, timeout_ms, expected_revision
            ),
        )

    # ------------------------------------------------------------------ watching

    def subscribe(self, session_id: str | None = None) -> Subscription:
        """Watch the committed changes of ``session_id`` (which need not exist yet: its
        ``created`` is told) or, without it, of every session — made through this client,
        or by any other process on the same store (SQLite: within about 100 ms).

        Gives a :class:`Subscription`, an async context manager and async iterator of
        :class:`Change` objects (``session_id``, ``revision``, ``change``,
        ``message_count``): ``async with c.subscribe("demo") as sub: async for change in
        sub: ...``. Leaving the ``async with`` (or an ``async for`` that subscribed by
        itself) sends ``session/unsubscribe``. Per session the changes come in revision
        order and the last one always comes; unread ones are coalesced per session.
        ``sub = await c.subscribe()`` subscribes at once (then :meth:`Subscription.close`).
        """
        return Subscription(self, session_id)

    async def unsubscribe(self, subscription: Subscription | str) -> None:
        """``session/unsubscribe``: stop a :class:`Subscription` (its iteration ends), or a
        subscription by its id (an id convo does not know is -32602 :class:`InvalidParams`)."""
        if isinstance(subscription, Subscription):
            await subscription.close()
            return
        sub = self._subscriptions.get(subscription)
        if sub is not None:
            await sub.close()
            return
        await self.request("session/unsubscribe", {"subscription_id": subscription})


_HEADER_END = b"\r\n\r\n"


class _Protocol(asyncio.SubprocessProtocol):
    """Reads LSP frames from convo's stdout (and lines from its stderr) as they arrive."""

    def __init__(self, client: AsyncClient, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.buf = bytearray()
        self.err = bytearray()
        self.eof = False
        self.exited: asyncio.Future[None] = loop.create_future()
        self._paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._loop = loop

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            buf = self.buf
            buf += data
            while True:
                end = buf.find(_HEADER_END)
                if end < 0:
                    return
                length = -1
                for line in bytes(buf[:end]).split(b"\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value.strip())
                start = end + 4
                if length < 0:  # not a header block: skip it
                    del buf[:start]
                    continue
                if len(buf) < start + length:
                    return
                body = bytes(buf[start : start + length])
                del buf[: start + length]
                self.client._on_frame(body)
        elif fd == 2:
            self.err += data
            while True:
                i = self.err.find(b"\n")
                if i < 0:
                    return
                text = bytes(self.err[:i]).decode("utf-8", "replace")
                del self.err[: i + 1]
                self.client._on_stderr_line(text)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self.eof = True
            self.client._on_eof()
        elif fd == 0:
            self._wake(None)

    def process_exited(self) -> None:
        if not self.eof:
            # stdout may still hold frames; _on_eof runs when it is drained.
            pass
        if not self.exited.done():
            self.exited.set_result(None)
        self._wake(None)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake(None)

    def _wake(self, _: Any) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def drain(self) -> None:
        if not self._paused or self.exited.done():
            return
        w = self._loop.create_future()
        self._drain_waiters.append(w)
        await w


class PendingRequest:
    """A request in flight (from :meth:`AsyncClient.send`): ``await`` it for the result."""

    def __init__(self, client: AsyncClient, rid: int, method: str, future: asyncio.Future[Any]) -> None:
        self.id = rid
        self.method = method
        self.future = future
        self._client = client

    def cancel(self) -> None:
        """Ask convo to end the request (``$/cancelRequest``); awaiting it then raises
        :class:`RequestCancelled` (or gives the result, if it had already committed)."""
        if not self.future.done():
            self._client._cancel_notice(self.id)

    def done(self) -> bool:
        return self.future.done()

    def __await__(self) -> Any:
        return self.future.__await__()


class _RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


_STOP = object()


def _runtime_answer(answer: Any) -> Any:
    """A ``{format, response}`` answer whose response is an SDK object, made JSON."""
    if isinstance(answer, dict) and "format" in answer and "response" in answer:
        response = answer["response"]
        if response is not None and not isinstance(response, Mapping):
            return {**answer, "response": response_object(response)}
    return answer


async def _call_runtime(client: AsyncClient, handler: RuntimeHandler, params: dict[str, Any], stream: bool) -> Any:
    """Run a runtime handler and turn what it gives into the answer; send deltas on a stream."""
    if inspect.iscoroutinefunction(handler) or inspect.isasyncgenfunction(handler):
        out = handler(params)
    elif getattr(handler, "__convo_inline__", False):
        out = handler(params)
    else:
        # A plain function may block (an HTTP call to the provider): keep it off the loop.
        out = await asyncio.get_running_loop().run_in_executor(None, handler, params)
    if inspect.isawaitable(out):
        out = await out
    if isinstance(out, Final):
        return out.answer
    if isinstance(out, dict) or out is None:
        return out if out is not None else {}
    stream_id = params.get("stream_id")
    texts: list[str] = []
    calls: list[Any] = []
    final: dict[str, Any] | None = None

    def on_item(item: Any) -> None:
        nonlocal final
        if isinstance(item, Final):
            final = item.answer
            return
        if isinstance(item, str):
            delta: dict[str, Any] = {"text": item}
        elif isinstance(item, Mapping):
            delta = {k: v for k, v in item.items() if k in ("text", "tool_calls") and v is not None}
        else:
            raise TypeError(f"a streaming runtime yields str, dict or Final, got {type(item).__name__}")
        if "text" in delta:
            texts.append(delta["text"])
        if "tool_calls" in delta:
            calls.extend(delta["tool_calls"])
        if stream and stream_id is not None and delta:
            client.notify("runtime/delta", {"stream_id": stream_id, **delta})
            listener = client._delta_listeners.get(params.get("session_id"))  # type: ignore[arg-type]
            if listener is not None:
                listener(delta)

    if hasattr(out, "__aiter__"):
        async for item in out:
            on_item(item)
    elif isinstance(out, Iterator) or hasattr(out, "__iter__"):
        it = iter(out)
        loop = asyncio.get_running_loop()
        while True:
            item = await loop.run_in_executor(None, next, it, _STOP)
            if item is _STOP:
                break
            on_item(item)
    else:
        raise TypeError(f"a runtime handler returns a dict or an iterator of deltas, got {type(out).__name__}")
    if final is not None:
        return final
    return {"text": "".join(texts) if texts else None, "tool_calls": calls or None}
