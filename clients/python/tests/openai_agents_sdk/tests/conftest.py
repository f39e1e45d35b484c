"""The OpenAI Agents SDK's own generic session tests, run against ``ConvoSession``.

``memory/test_session.py`` and ``memory/test_session_limit.py`` (with the helpers they
import from ``test_responses.py``) are copied unmodified from the openai-agents 0.24.0
sdist (see ../README.md). They construct ``SQLiteSession(session_id, db_path,
session_settings=...)``; the fixture below makes that name, in those two modules only,
build a :class:`convo.integrations.openai_agents.ConvoSession` on a convo child of its own:
``sqlite:<db_path>`` for a file (so two sessions on one file are two convo processes on one
database), ``memory`` for ``":memory:"``. The tests that inspect SQLiteSession's own
internals (its connections, locks, raw SQL tables, its corrupt-row handling, its error
messages) are deselected: ``SQLITE_INTERNAL`` lists them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

collect_ignore = ["test_responses.py"]

try:
    import agents  # noqa: F401
    import pytest_asyncio  # noqa: F401
except ImportError:  # the framework (or the asyncio plugin its tests use) is not installed:
    # test_sdk_tests_available.py says so as a skip.
    collect_ignore_glob = ["memory/*"]
    _MISSING = True
else:
    _MISSING = False

# SQLiteSession internals: what they check does not exist in another store.
SQLITE_INTERNAL = (
    "test_sqlite_session_close_closes_worker_thread_connections",  # session._connections
    "test_sqlite_session_reaps_connections_from_exited_worker_threads",  # session._connections
    "test_sqlite_session_closes_retired_connections_before_the_next_allocation",  # sqlite3.connect
    "test_sqlite_session_keeps_connections_of_live_worker_threads",  # session._connections
    "test_sqlite_session_closed_rejects_empty_add_items",  # "SQLiteSession is closed"
    "test_sqlite_session_pop_item_skips_corrupt_most_recent",  # raw INSERT into agent_messages
    "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows",  # raw INSERT
    "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows",  # raw INSERT
    "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows",  # raw INSERT
    "test_sqlite_session_file_lock_is_shared_across_instances",  # SQLiteSession._file_locks
    "test_sqlite_session_failed_add_items_releases_write_lock",  # sqlite3 probe of agent_sessions
    "test_sqlite_session_failed_clear_session_rolls_back",  # DROP TABLE agent_sessions
    "test_sqlite_session_failed_pop_item_releases_write_lock",  # DROP TABLE agent_messages
    "test_sqlite_session_rollback_failure_evicts_connection",  # session._get_connection
    "test_sqlite_session_close_retries_quarantined_connection",  # session._quarantined_connections
    "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome",  # sqlite3 commit hook
)

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = [], []
    for item in items:
        mine = Path(str(item.fspath)).resolve().is_relative_to(_HERE)
        name = getattr(item, "originalname", item.name)
        (drop if mine and name in SQLITE_INTERNAL else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


if not _MISSING:
    from agents import set_tracing_disabled

    from convo.integrations.openai_agents import ConvoSession

    def _convo_sqlite_session(
        session_id: str,
        db_path: str | os.PathLike[str] = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
    ) -> ConvoSession:
        """``SQLiteSession``'s constructor, answered by a ConvoSession."""
        store = "memory" if str(db_path) == ":memory:" else f"sqlite:{os.fspath(db_path)}"
        return ConvoSession(session_id, store=store, session_settings=session_settings)

    @pytest.fixture(autouse=True)
    def _sqlite_session_is_convo(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
        # No trace export from these offline runs.
        set_tracing_disabled(True)
        module = request.module
        if module is not None and hasattr(module, "SQLiteSession"):
            monkeypatch.setattr(module, "SQLiteSession", _convo_sqlite_session)
