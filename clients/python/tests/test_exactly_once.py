"""Exactly once: every append carries a message id (the caller's, or a UUID v4 the client
chooses), a repeat is answered ``duplicate``, and a write that failed with 1006 is sent
once more, the same. The 1006 is a real one: a SQLite store whose write lock another
connection holds past ``--busy-timeout-ms``."""

from __future__ import annotations

import contextlib
import pathlib
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import convo
from conftest import arun

ID = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"
CALL = {"id": "c1", "name": "ls", "arguments": {}}
RESPONSE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "Hello."}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 2},
}


def is_v4(value: str) -> bool:
    return uuid.UUID(value).version == 4 and str(uuid.UUID(value)) == value


# ---------------------------------------------------------------------------- ids given, ids chosen


@arun
async def test_a_given_id_is_the_messages_and_a_repeat_is_a_duplicate() -> None:
    async with convo.AsyncClient(store="memory") as c:
        assert c.capabilities["exactly_once"] is True and c.exactly_once
        await c.create("s")
        ids = [str(uuid.uuid4()) for _ in range(7)]
        appends: list[Any] = [
            lambda i: c.add_user("s", "hi", message_id=i),
            lambda i: c.add_assistant("s", None, [CALL], message_id=i),
            lambda i: c.add_tool_result("s", "c1", "README.md", message_id=i),
            lambda i: c.add_message("s", {"role": "user", "content": "next"}, message_id=i),
            lambda i: c.add_message("s", {"role": "assistant", "content": "in it", "message_id": i}),
            lambda i: c.add_response("s", "anthropic_messages", RESPONSE, message_id=i),
            lambda i: c.add_user("s", "shouted", message_id=i.upper()),
        ]
        for append, i in zip(appends, ids, strict=True):
            first = await append(i)
            assert first["message_id"] == i and "duplicate" not in first
            again = await append(i)
            assert again == {**first, "duplicate": True}
        assert [m["id"] for m in await c.messages("s", repair=False)] == ids
        assert (await c.get("s"))["revision"] == 7

        many = [
            {"role": "user", "content": "a", "message_id": str(uuid.uuid4())},
            {"role": "assistant", "content": "b", "message_id": str(uuid.uuid4())},
        ]
        first = await c.add_messages("s", many)
        assert first["message_ids"] == [m["message_id"] for m in many] and "duplicate" not in first
        assert await c.add_messages("s", many) == {**first, "duplicate": True}
        assert (await c.get("s"))["message_count"] == 9

        # The same id with a different message: 1010, MessageExists; nothing stored.
        with pytest.raises(convo.MessageExists) as ei:
            await c.add_user("s", "something else", message_id=ids[0])
        assert ei.value.code == 1010 and ei.value.kind == "message_exists" and ei.value.message_id == ids[0]
        with pytest.raises(convo.MessageExists):
            await c.add_messages("s", [many[0], {"role": "user", "content": "new"}])  # a partial retry
        with pytest.raises(convo.InvalidParams):
            await c.add_user("s", "x", message_id="not-a-uuid")
        assert (await c.get("s"))["message_count"] == 9


def test_the_client_chooses_a_uuid4_for_every_message_without_one(client: convo.Client) -> None:
    c = client
    assert c.exactly_once
    c.create("s")
    added = [
        c.add_user("s", "hi"),
        c.add_assistant("s", None, [CALL]),
        c.add_tool_result("s", "c1", "ok"),
        c.add_message("s", {"role": "user", "content": "more"}),
        c.add_response("s", "anthropic_messages", RESPONSE),
    ]
    mine = str(uuid.uuid4())
    given = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "message_id": mine}]
    many = c.add_messages("s", given)
    assert "message_id" not in given[0], "the caller's messages are left as they were"
    stored = [m["id"] for m in c.messages("s", repair=False)]
    assert stored == [a["message_id"] for a in added] + many["message_ids"]
    assert many["message_ids"][1] == mine
    assert all(is_v4(i) for i in stored), stored


@arun
async def test_an_older_server_gets_no_ids_and_no_retry() -> None:
    async with convo.AsyncClient(store="memory") as c:
        del c.capabilities["exactly_once"]  # as a server without it answers initialize
        assert not c.exactly_once
        await c.create("s")
        sent: list[Any] = []
        request = c.request

        async def spy(method: str, params: Any = None) -> Any:
            sent.append(params)
            return await request(method, params)

        c.request = spy  # type: ignore[method-assign]
        added = await c.add_user("s", "hi")
        await c.add_messages("s", [{"role": "assistant", "content": "ho"}])
        assert sent == [
            {"session_id": "s", "text": "hi"},
            {"session_id": "s", "messages": [{"role": "assistant", "content": "ho"}]},
        ]
        assert uuid.UUID(added["message_id"]).version == 7  # the server's own


# ---------------------------------------------------------------------------- one retry on 1006

BUSY_MS = 200


@contextlib.contextmanager
def write_lock(db: pathlib.Path) -> Iterator[Any]:
    """Holds the SQLite write lock of ``db`` (BEGIN IMMEDIATE) until the block ends or the
    returned ``release()`` is called (from any thread)."""
    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    held = [True]

    def release() -> None:
        if held[0]:
            held[0] = False
            conn.execute("ROLLBACK")

    try:
        yield release
    finally:
        release()
        conn.close()


def sqlite_client(tmp_path: pathlib.Path) -> tuple[convo.Client, pathlib.Path]:
    db = tmp_path / "db.sqlite"
    c = convo.Client(store=f"sqlite:{db}", args=["--busy-timeout-ms", str(BUSY_MS)], stderr=subprocess.DEVNULL)
    return c, db


def spy_on(c: convo.Client, on_error: Any = None) -> list[tuple[str, Any, str]]:
    """Records each request the blocking client sends and how it ended ("ok" or the
    error's kind); ``on_error(method)`` runs when one fails, before the client goes on."""
    attempts: list[tuple[str, Any, str]] = []
    request = c._request

    def spy(method: str, params: Any, timeout: float | None = None) -> Any:
        try:
            result = request(method, params, timeout)
        except convo.ConvoError as e:
            attempts.append((method, params, e.kind))
            if on_error is not None:
                on_error(method)
            raise
        attempts.append((method, params, "ok"))
        return result

    c._request = spy  # type: ignore[method-assign]
    return attempts


def test_a_write_that_failed_with_1006_is_sent_once_more_and_stored_once(tmp_path: pathlib.Path) -> None:
    c, db = sqlite_client(tmp_path)
    with c:
        c.create("s")
        with write_lock(db) as release:
            # The lock is released when the first attempt has failed, before the retry.
            attempts = spy_on(c, lambda method: release())
            added = c.add_user("s", "hi")
        assert [(m, kind) for m, _, kind in attempts] == [
            ("session/add_user", "storage_unavailable"),
            ("session/add_user", "ok"),
        ]
        assert attempts[0][1] == attempts[1][1], "the retry is the same request, the same id"
        assert is_v4(added["message_id"]) and "duplicate" not in added
        messages = c.messages("s", repair=False)
        assert [(m["id"], m["content"]) for m in messages] == [(added["message_id"], "hi")]

        # add_messages: one id per message, the same ones in the retry.
        with write_lock(db) as release:
            attempts = spy_on(c, lambda method: release())
            many = c.add_messages("s", [{"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}])
        assert [kind for _, _, kind in attempts] == ["storage_unavailable", "ok"]
        assert attempts[0][1] == attempts[1][1]
        assert [m["message_id"] for m in attempts[1][1]["messages"]] == many["message_ids"]
        assert c.get("s")["message_count"] == 3


def test_a_lock_that_outlasts_the_retry_fails_after_exactly_one_retry(tmp_path: pathlib.Path) -> None:
    c, db = sqlite_client(tmp_path)
    with c:
        c.create("s")
        with write_lock(db):
            attempts = spy_on(c)
            with pytest.raises(convo.StorageUnavailable) as ei:
                c.add_user("s", "hi", message_id=ID)
            assert ei.value.code == 1006
            assert [(m, p["message_id"], kind) for m, p, kind in attempts] == [
                ("session/add_user", ID, "storage_unavailable"),
                ("session/add_user", ID, "storage_unavailable"),
            ]
            # Other methods and other errors are not retried.
            attempts.clear()
            with pytest.raises(convo.StorageUnavailable):
                c.update("s", title="t")
            assert len(attempts) == 1
        assert c.get("s")["message_count"] == 0
        attempts.clear()
        with pytest.raises(convo.RevisionConflict):
            c.add_user("s", "hi", expected_revision=7)
        assert len(attempts) == 1
        # The host may send it again later with the same id: stored once.
        assert c.add_user("s", "hi", message_id=ID)["message_id"] == ID
        assert c.add_user("s", "hi", message_id=ID)["duplicate"] is True
        with pytest.raises(convo.MessageExists):
            c.add_user("s", "bye", message_id=ID)
        assert [kind for _, _, kind in attempts[1:]] == ["ok", "ok", "message_exists"]
        assert c.get("s")["message_count"] == 1


@arun
async def test_the_async_client_retries_the_same(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "db.sqlite"
    args = ["--busy-timeout-ms", str(BUSY_MS)]
    async with convo.AsyncClient(store=f"sqlite:{db}", args=args, stderr=subprocess.DEVNULL) as c:
        await c.create("s")
        sent: list[Any] = []
        request = c.request
        with write_lock(db) as release:

            async def spy(method: str, params: Any = None) -> Any:
                sent.append(params)
                try:
                    return await request(method, params)
                except convo.StorageUnavailable:
                    release()
                    raise

            c.request = spy  # type: ignore[method-assign]
            added = await c.add_response("s", "anthropic_messages", RESPONSE)
        assert len(sent) == 2 and sent[0] == sent[1] and sent[0]["message_id"] == added["message_id"]
        assert (await c.get("s"))["message_count"] == 1
