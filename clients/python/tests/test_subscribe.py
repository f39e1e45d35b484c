"""Watching: ``subscribe()`` / ``unsubscribe()`` and the ``session/changed`` notifications,
through one client and across two convo processes on one SQLite file."""

from __future__ import annotations

import asyncio
import pathlib
import threading
import time
from typing import Any

import pytest

import convo
from conftest import arun

WAIT = 10.0  # seconds; another process's change is told within about 100 ms


async def _until(sub: convo.Subscription, session_id: str, revision: int, **more: int) -> list[convo.Change]:
    """Read ``sub`` until ``session_id`` (and each session of ``more``) reached its
    revision: every change read on the way."""
    todo = {session_id: revision, **more}
    seen: list[convo.Change] = []
    while todo:
        change = await sub.get(WAIT)
        assert change is not None, f"the subscription ended; seen {seen}"
        seen.append(change)
        if change.revision >= todo.get(change.session_id, change.revision + 1):
            del todo[change.session_id]
    return seen


def _in_order(changes: list[convo.Change]) -> None:
    by_session: dict[str, list[int]] = {}
    for ch in changes:
        by_session.setdefault(ch.session_id, []).append(ch.revision)
    for sid, revs in by_session.items():
        assert revs == sorted(revs), (sid, revs)


# ---------------------------------------------------------------------------- one client


@arun
async def test_a_subscription_sees_the_changes_of_its_own_client() -> None:
    async with convo.AsyncClient(store="memory") as c:
        async with c.subscribe("w") as sub:  # the session does not exist yet
            assert sub.active and sub.id and sub.session_id == "w"
            assert isinstance(sub, convo.Subscription)

            async def told(call: Any) -> convo.Change:
                await call
                change = await sub.get(WAIT)
                assert change is not None
                return change

            got = [await told(c.create("w", system="s"))]
            for i in range(3):
                got.append(await told(c.add_user("w", f"m{i}")))
            got.append(await told(c.update("w", title="t")))
            got.append(await told(c.trim("w", 1)))
            got.append(await told(c.clear("w")))
            got.append(await told(c.from_dict({"session_id": "w", "messages": []}, replace=True)))
            await c.create("other")  # another session: not this subscription's
            await c.add_user("other", "x")
            got.append(await told(c.delete("w")))

            assert [g.change for g in got] == [
                "created",
                "appended",
                "appended",
                "appended",
                "updated",
                "trimmed",
                "cleared",
                "imported",
                "deleted",
            ]
            assert [g.message_count for g in got[:4]] == [0, 1, 2, 3]
            assert [g.revision for g in got[:5]] == [0, 1, 2, 3, 4]
            _in_order(got)
            assert {g.session_id for g in got} == {"w"} and {g.subscription_id for g in got} == {sub.id}
            with pytest.raises(TimeoutError):
                await sub.get(0.2)
        assert sub.closed and not c._subscriptions
        assert await sub.get() is None  # ended


@arun
async def test_a_streams_draft_is_told() -> None:
    gate = asyncio.Event()

    async def runtime(params: dict[str, Any]) -> Any:
        yield "partial"
        await gate.wait()
        yield " answer"

    async with convo.AsyncClient(store="memory", runtime=runtime) as c:
        await c.create("s")
        async with c.subscribe("s") as sub:
            streaming = asyncio.ensure_future(c.stream("s", "go"))
            draft = await sub.get(WAIT)  # saved at least every 250 ms
            assert draft is not None and (draft.change, draft.revision) == ("draft", 0)
            gate.set()
            await streaming
            done = await _until(sub, "s", 1)
            assert (done[-1].change, done[-1].message_count) == ("appended", 2)


@arun
async def test_notifications_are_routed_by_subscription_id() -> None:
    seen: list[tuple[str, Any]] = []
    async with convo.AsyncClient(store="memory", on_notification=lambda m, p: seen.append((m, p))) as c:
        a = await c.subscribe("a")
        b = await c.subscribe("b")
        every = await c.subscribe()
        assert len({a.id, b.id, every.id}) == 3
        for sid in ("a", "b"):
            await c.create(sid)
            await c.add_user(sid, "hi")
        await c.add_user("a", "again")

        got_a = await _until(a, "a", 2)
        got_b = await _until(b, "b", 1)
        got_all = await _until(every, "a", 2, b=1)
        assert {ch.session_id for ch in got_a} == {"a"} and {ch.subscription_id for ch in got_a} == {a.id}
        assert {ch.session_id for ch in got_b} == {"b"} and {ch.subscription_id for ch in got_b} == {b.id}
        assert {ch.subscription_id for ch in got_all} == {every.id}
        for got in (got_a, got_b, got_all):
            _in_order(got)
        # on_notification still sees every notification
        assert {p["subscription_id"] for m, p in seen if m == "session/changed"} == {a.id, b.id, every.id}
        for sub in (a, b, every):
            await c.unsubscribe(sub)
            assert sub.closed
        assert not c._subscriptions


@arun
async def test_subscribe_errors() -> None:
    async with convo.AsyncClient(store="memory") as c:
        with pytest.raises(convo.InvalidParams):
            await c.subscribe("bad id with spaces")
        with pytest.raises(convo.InvalidParams):
            await c.unsubscribe("sub-999")
        assert not c._subscriptions


@arun
async def test_a_change_that_overtakes_the_subscribe_reply_is_kept() -> None:
    async with convo.AsyncClient(store="memory") as c:
        sub = c.subscribe()
        starting = asyncio.ensure_future(sub.start())
        await asyncio.sleep(0)  # the request is written; its reply has not been read yet
        assert c._subscribing == 1
        # As if convo had sent a change for the new id before its reply (ids count from 1).
        c._dispatch(
            {
                "jsonrpc": "2.0",
                "method": "session/changed",
                "params": {
                    "subscription_id": "sub-1",
                    "session_id": "early",
                    "revision": 7,
                    "change": "appended",
                    "message_count": 7,
                },
            }
        )
        await starting
        assert sub.id == "sub-1" and c._subscribing == 0 and not c._early_changes
        assert await sub.get(0) == convo.Change("sub-1", "early", 7, "appended", 7)
        await sub.close()


# ---------------------------------------------------------------------------- two processes


@arun
async def test_changes_of_another_process_reach_the_subscription_in_order(tmp_path: pathlib.Path) -> None:
    store = f"sqlite:{tmp_path / 'shared.db'}"
    async with convo.AsyncClient(store=store) as a, convo.AsyncClient(store=store) as b:
        assert a.pid != b.pid
        async with a.subscribe("shared") as one, a.subscribe() as every:
            await b.create("shared")
            await b.create("side")
            for i in range(60):
                await b.add_user("shared", f"m{i}")
                if i % 3 == 0:
                    await b.add_user("side", f"s{i}")
            await asyncio.gather(*(b.add_user("shared", f"p{i}") for i in range(40)))  # pipelined
            final = (await b.get("shared"))["revision"]
            side_final = (await b.get("side"))["revision"]
            assert final == 100

            got = await _until(one, "shared", final)
            _in_order(got)
            assert {g.session_id for g in got} == {"shared"}
            assert got[-1].revision == final and got[-1].message_count == 100 and got[-1].change == "appended"
            revs = [g.revision for g in got]
            assert len(set(revs)) == len(revs)  # appends: strictly increasing

            got_all = await _until(every, "shared", final, side=side_final)
            _in_order(got_all)
            assert {g.session_id for g in got_all} == {"shared", "side"}

            # the last change is always told, whatever it is
            await b.delete("side")
            change = await every.get(WAIT)
            assert change is not None and (change.session_id, change.change) == ("side", "deleted")


@arun
async def test_a_slow_reader_gets_the_last_change(tmp_path: pathlib.Path) -> None:
    store = f"sqlite:{tmp_path / 'shared.db'}"
    async with convo.AsyncClient(store=store) as a, convo.AsyncClient(store=store) as b:
        await b.create("s")
        async with a.subscribe("s") as sub:
            await asyncio.gather(*(b.add_user("s", f"m{i}") for i in range(200)))
            deadline = time.monotonic() + WAIT
            while (sub._unread.get("s") is None or sub._unread["s"].revision < 200) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            # nobody read: the unread changes were coalesced into the latest one
            assert sub.pending() == 1
            last = await sub.get(0)
            assert last is not None and last.revision == 200 and last.message_count == 200
            with pytest.raises(TimeoutError):
                await sub.get(0.3)


@arun
async def test_unsubscribing_stops_the_changes(tmp_path: pathlib.Path) -> None:
    store = f"sqlite:{tmp_path / 'shared.db'}"
    told: list[dict[str, Any]] = []

    def record(method: str, params: Any) -> None:
        if method == "session/changed":
            told.append(params)

    async with convo.AsyncClient(store=store, on_notification=record) as a, convo.AsyncClient(store=store) as b:
        await b.create("s")
        gone = await a.subscribe("s")
        sentinel = await a.subscribe("s")
        await b.add_user("s", "one")
        assert (await gone.get(WAIT)).revision == 1  # type: ignore[union-attr]
        assert (await sentinel.get(WAIT)).revision == 1  # type: ignore[union-attr]

        waiting = asyncio.ensure_future(gone.get())
        await asyncio.sleep(0.05)
        await a.unsubscribe(gone)
        assert await waiting is None  # a waiting reader sees the end
        assert gone.closed and not gone.active and gone.id not in a._subscriptions
        assert [ch async for ch in gone] == []  # iteration ends at once
        with pytest.raises(convo.InvalidParams):  # convo forgot it
            await a.unsubscribe(gone.id)  # type: ignore[arg-type]

        for i in range(5):
            await b.add_user("s", f"more {i}")
        # the sentinel, on the same process, has seen the last change: so would `gone` have
        await _until(sentinel, "s", 6)
        assert gone.pending() == 0 and await gone.get(0) is None
        assert all(p["subscription_id"] == sentinel.id for p in told if p["revision"] > 1)
        await sentinel.close()
        await sentinel.close()  # twice is fine


# ---------------------------------------------------------------------------- leaving unsubscribes


@arun
async def test_leaving_async_with_or_async_for_unsubscribes() -> None:
    async with convo.AsyncClient(store="memory") as c:
        async with c.subscribe("s") as sub:
            first_id = sub.id
            assert first_id in c._subscriptions
        assert first_id not in c._subscriptions
        with pytest.raises(convo.InvalidParams):
            await c.unsubscribe(first_id)  # type: ignore[arg-type]

        # a bare `async for` subscribes by itself, and `break` unsubscribes
        sub = c.subscribe("s")

        async def change_when_subscribed() -> None:
            while not sub.active:
                await asyncio.sleep(0.01)
            await c.create("s")

        maker = asyncio.ensure_future(change_when_subscribed())
        async for change in sub:
            assert change.change == "created"
            break
        await maker
        for _ in range(200):  # the loop's generator is closed as it is dropped
            if sub.closed and not c._subscriptions:
                break
            await asyncio.sleep(0.01)
        assert sub.closed and not c._subscriptions
        with pytest.raises(convo.InvalidParams):
            await c.unsubscribe(sub.id)  # type: ignore[arg-type]

        # `await` subscribes now; the subscription outlives loops over it until closed
        sub = await c.subscribe("s")
        await c.add_user("s", "a")
        async for change in sub:
            assert change.revision == 1
            break
        assert sub.active
        await c.add_user("s", "b")
        assert (await anext_change(sub)).revision == 2
        await sub.close()
        assert not c._subscriptions


async def anext_change(sub: convo.Subscription) -> convo.Change:
    return await asyncio.wait_for(sub.__anext__(), WAIT)


@arun
async def test_the_iteration_ends_when_the_client_closes_or_convo_dies() -> None:
    c = await convo.AsyncClient.spawn(store="memory")
    sub = await c.subscribe()
    await c.create("s")
    reader = asyncio.ensure_future(_collect(sub))
    await asyncio.sleep(0.1)
    await c.close()
    got = await asyncio.wait_for(reader, WAIT)
    assert [g.change for g in got] == ["created"]  # what had come, then the end
    assert sub.closed
    await sub.close()  # after the client closed: nothing to send

    async with convo.AsyncClient(store="memory") as c:
        sub = await c.subscribe()
        waiting = asyncio.ensure_future(sub.get())
        await asyncio.sleep(0.05)
        c._transport.kill()
        with pytest.raises(convo.ConnectionClosed):
            await asyncio.wait_for(waiting, WAIT)
        assert await sub.get() is None  # raised once, then ended


async def _collect(sub: convo.Subscription) -> list[convo.Change]:
    return [change async for change in sub]


# ---------------------------------------------------------------------------- the blocking client


def test_sync_subscribe_across_two_processes(tmp_path: pathlib.Path) -> None:
    store = f"sqlite:{tmp_path / 'shared.db'}"
    with convo.Client(store=store) as a, convo.Client(store=store) as b:
        with a.subscribe("s") as sub:
            assert isinstance(sub, convo.SyncSubscription) and sub.active
            b.create("s")
            for i in range(30):
                b.add_user("s", f"m{i}")
            got = []
            for change in sub:
                got.append(change)
                if change.revision == 30:
                    break
            assert sub.active  # the `with` owns it, not the loop
            _in_order(got)
            assert got[-1].message_count == 30 and got[-1].session_id == "s"

            b.update("s", title="x")
            updated = sub.get(WAIT)
            assert updated is not None and updated.change == "updated" and updated.revision == 31
            with pytest.raises(TimeoutError):
                sub.get(0.2)
        assert sub.closed and not a.async_client._subscriptions
        assert sub.get() is None

        # a bare `for` subscribes and unsubscribes by itself
        def later() -> None:
            while not a.async_client._subscriptions:
                time.sleep(0.01)
            b.add_user("s", "late")

        t = threading.Thread(target=later)
        t.start()
        for change in a.subscribe():
            assert change.revision == 32
            break
        t.join()
        assert not a.async_client._subscriptions

        sub = a.subscribe("s").start()
        sid = sub.id
        a.unsubscribe(sub)
        assert sub.closed and next(iter(sub), None) is None
        with pytest.raises(convo.InvalidParams):
            a.unsubscribe(sid)  # type: ignore[arg-type]


def test_sync_iteration_ends_when_the_client_closes() -> None:
    a = convo.Client(store="memory")
    sub = a.subscribe().start()
    got: list[convo.Change] = []
    reader = threading.Thread(target=lambda: got.extend(sub))
    reader.start()
    a.create("s")
    deadline = time.monotonic() + WAIT
    while not got and time.monotonic() < deadline:
        time.sleep(0.01)
    a.close()
    reader.join(WAIT)
    assert not reader.is_alive()
    assert [g.change for g in got] == ["created"]
    sub.close()  # after the client closed: fine
    assert sub.get() is None
