"""convo: keeps LLM conversation state for agent hosts.

The wheel carries the ``convo`` executable (a JSON-RPC 2.0 sidecar over stdio) and this
client package:

- :class:`AsyncClient` (asyncio) and :class:`Client` (blocking) spawn ``convo`` and call
  its methods; every error code is an exception class (see :mod:`convo.errors`);
  ``subscribe()`` gives the sessions' changes (:class:`Change`) as they commit;
  ``add_response()`` appends a provider's whole response, kept as it came.
- :mod:`convo.types`: the protocol's objects (``Message``, ``SessionInfo``, ``Usage``,
  ``Native``, ``Format``, …) as ``TypedDict`` s and literals, for annotations.
- :mod:`convo.pycodeloop` and :mod:`convo.agent` hold drop-in ``Session`` classes with
  the seed libraries' APIs, stored by convo.
"""

from __future__ import annotations

from . import types
from ._binary import find_convo_bin
from ._client import METHODS, UNSET, AsyncClient, Final, PendingRequest, RuntimeHandler
from ._default import default_client, set_default_client
from ._subscription import Change, Subscription
from ._sync import Client, SyncSubscription
from .errors import (
    ConnectionClosed,
    ConvoError,
    InternalError,
    InvalidOutput,
    InvalidParams,
    InvalidRequest,
    InvalidSequence,
    MessageExists,
    MessageNotFound,
    MethodNotFound,
    ParseError,
    RequestCancelled,
    RevisionConflict,
    RuntimeFailed,
    SessionExists,
    SessionNotFound,
    StorageUnavailable,
    TooLarge,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "Client",
    "Final",
    "PendingRequest",
    "Change",
    "Subscription",
    "SyncSubscription",
    "RuntimeHandler",
    "METHODS",
    "types",
    "UNSET",
    "find_convo_bin",
    "default_client",
    "set_default_client",
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
]
