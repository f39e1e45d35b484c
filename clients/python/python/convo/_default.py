"""The process-wide client that the drop-in Session classes start or reuse by themselves."""

from __future__ import annotations

import os
import threading

from ._sync import Client

__all__ = ["default_client", "set_default_client"]

_lock = threading.Lock()
_client: Client | None = None


def default_client() -> Client:
    """The shared blocking :class:`Client`, spawned on first use.

    It runs ``convo`` with its default store (``CONVO_STORE`` when set, else SQLite in
    the platform data folder, so sessions persist); ``CONVO_BINARY`` picks the binary.
    Replace it with :func:`set_default_client`.
    """
    global _client
    with _lock:
        if _client is None or _client.closed:
            _client = Client(store=os.environ.get("CONVO_STORE") or None)
        return _client


def set_default_client(client: Client | None) -> Client | None:
    """Use ``client`` for Sessions created without ``client=``; returns the previous one
    (not closed). ``None`` makes the next use spawn a fresh one."""
    global _client
    with _lock:
        previous, _client = _client, client
        return previous
