"""One exception class per convo error code, all subclasses of :class:`ConvoError`.

The classes for refusals that the seed libraries stored silently (a late, duplicate or
unknown tool result: :class:`InvalidSequence`; bad base64, an empty assistant message,
a bad session id: :class:`InvalidParams`; an answer that breaks a schema:
:class:`InvalidOutput`) also subclass :class:`ValueError`, so code written against the
seeds that catches ``ValueError`` keeps working. Lookups that find nothing
(:class:`SessionNotFound`, :class:`MessageNotFound`) also subclass :class:`LookupError`.
Every message starts with the convo error kind, e.g.
``[invalid_sequence] invalid sequence: no tool call is waiting for a result ...``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConvoError",
    "ConnectionClosed",
    "ParseError",
    "InvalidRequest",
    "MethodNotFound",
    "InvalidParams",
    "InternalError",
    "RequestCancelled",
    "SessionNotFound",
    "SessionExists",
    "RevisionConflict",
    "InvalidSequence",
    "TooLarge",
    "StorageUnavailable",
    "MessageNotFound",
    "RuntimeFailed",
    "InvalidOutput",
    "MessageExists",
    "error_from_response",
    "ERROR_CLASSES",
]


class ConvoError(Exception):
    """An error answered by convo (or the connection to it failing).

    Attributes: ``code`` (the JSON-RPC error code, ``None`` for a connection failure),
    ``message`` (convo's message), ``data`` (the error's ``data`` object or ``None``),
    ``kind`` (``data.kind`` for application errors, a fixed name for standard codes).
    """

    code: int | None = None
    default_kind: str = "error"

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        data: Any = None,
        method: str | None = None,
    ) -> None:
        if code is not None:
            self.code = code
        self.message = message
        self.data = data
        self.method = method
        kind = data.get("kind") if isinstance(data, dict) else None
        self.kind: str = kind if isinstance(kind, str) else self.default_kind
        super().__init__(message)

    def __str__(self) -> str:
        return f"[{self.kind}] {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, kind={self.kind!r}, message={self.message!r})"

    @property
    def reason(self) -> str | None:
        """``data.reason`` when convo gave one (invalid_sequence, runtime_failed)."""
        return self.data.get("reason") if isinstance(self.data, dict) else None


class ConnectionClosed(ConvoError):
    """The convo child exited, or the client was closed, before the reply came."""

    default_kind = "connection_closed"


class ParseError(ConvoError):
    code = -32700
    default_kind = "parse_error"


class InvalidRequest(ConvoError):
    code = -32600
    default_kind = "invalid_request"


class MethodNotFound(ConvoError):
    code = -32601
    default_kind = "method_not_found"


class InvalidParams(ConvoError, ValueError):
    """Wrong type, missing member, bad base64, bad session id, empty assistant message..."""

    code = -32602
    default_kind = "invalid_params"


class InternalError(ConvoError):
    code = -32603
    default_kind = "internal_error"


class RequestCancelled(ConvoError):
    """-32800: ``$/cancelRequest`` ended the request. ``message_ids``: what a stream kept."""

    code = -32800
    default_kind = "request_cancelled"

    @property
    def message_ids(self) -> list[str]:
        ids = self.data.get("message_ids") if isinstance(self.data, dict) else None
        return list(ids or [])


class SessionNotFound(ConvoError, LookupError):
    code = 1001
    default_kind = "session_not_found"


class SessionExists(ConvoError):
    code = 1002
    default_kind = "session_exists"


class RevisionConflict(ConvoError):
    """``expected_revision`` differed (or the session changed while the host answered)."""

    code = 1003
    default_kind = "revision_conflict"

    @property
    def current_revision(self) -> int | None:
        return self.data.get("current_revision") if isinstance(self.data, dict) else None

    @property
    def response(self) -> Any:
        """For run/json/stream: the host's answer, which was not stored."""
        return self.data.get("response") if isinstance(self.data, dict) else None


class InvalidSequence(ConvoError, ValueError):
    """A tool result that the conversation rules do not accept (nothing was stored)."""

    code = 1004
    default_kind = "invalid_sequence"

    @property
    def tool_call_id(self) -> str | None:
        return self.data.get("tool_call_id") if isinstance(self.data, dict) else None


class TooLarge(ConvoError):
    """1005: a frame, request or reply over convo's limits (``limit``), or a ``fit`` that
    cannot be met: ``tokens`` is the smallest body convo could make, ``max_tokens`` the
    budget asked for (``data`` is a :class:`convo.types.TooLargeData`)."""

    code = 1005
    default_kind = "too_large"

    @property
    def limit(self) -> int | None:
        return self.data.get("limit") if isinstance(self.data, dict) else None

    @property
    def tokens(self) -> int | None:
        return self.data.get("tokens") if isinstance(self.data, dict) else None

    @property
    def max_tokens(self) -> int | None:
        return self.data.get("max_tokens") if isinstance(self.data, dict) else None


class StorageUnavailable(ConvoError):
    code = 1006
    default_kind = "storage_unavailable"


class MessageNotFound(ConvoError, LookupError):
    code = 1007
    default_kind = "message_not_found"


class RuntimeFailed(ConvoError):
    """The host runtime failed: ``reason`` is error, no_runtime, timeout, disconnected or invalid_response."""

    code = 1008
    default_kind = "runtime_failed"


class InvalidOutput(ConvoError, ValueError):
    """``session/json``: the answer is not JSON or breaks the schema (``errors``, ``text``)."""

    code = 1009
    default_kind = "invalid_output"

    @property
    def errors(self) -> list[dict[str, Any]]:
        errs = self.data.get("errors") if isinstance(self.data, dict) else None
        return list(errs or [])

    @property
    def text(self) -> str | None:
        return self.data.get("text") if isinstance(self.data, dict) else None


class MessageExists(ConvoError):
    """A ``message_id`` given to an append is held in the session by a different message
    (or an ``add_messages`` retry matches only some of its messages). Nothing was stored."""

    code = 1010
    default_kind = "message_exists"

    @property
    def message_id(self) -> str | None:
        return self.data.get("message_id") if isinstance(self.data, dict) else None


ERROR_CLASSES: dict[int, type[ConvoError]] = {
    cls.code: cls  # type: ignore[misc]
    for cls in (
        ParseError,
        InvalidRequest,
        MethodNotFound,
        InvalidParams,
        InternalError,
        RequestCancelled,
        SessionNotFound,
        SessionExists,
        RevisionConflict,
        InvalidSequence,
        TooLarge,
        StorageUnavailable,
        MessageNotFound,
        RuntimeFailed,
        InvalidOutput,
        MessageExists,
    )
}


def error_from_response(error: Any, method: str | None = None) -> ConvoError:
    """The exception for a JSON-RPC ``error`` object."""
    if not isinstance(error, dict):
        return ConvoError(f"malformed error: {error!r}", method=method)
    code = error.get("code")
    message = str(error.get("message", ""))
    data = error.get("data")
    cls = ERROR_CLASSES.get(code, ConvoError) if isinstance(code, int) else ConvoError
    return cls(message, code=code if isinstance(code, int) else None, data=data, method=method)
