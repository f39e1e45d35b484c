"""What a host does with the installed wheel, as the README shows it: scripts/release runs
this with a platform's wheel installed into a fresh virtual environment, with no
CONVO_BINARY, so the binary is the one that wheel put in the environment's scripts folder
(on aarch64 run by qemu-user, on Windows by Wine). With an argument, a SQLite file is used
as well: created, appended to, read back by a second process.

    python smoke.py [SQLITE_PATH]
"""

from __future__ import annotations

import os
import pathlib
import sys
import sysconfig

import convo

binary = pathlib.Path(convo.find_convo_bin())
if "CONVO_BINARY" in os.environ:  # a binary this Python cannot start itself (Windows' under Wine)
    assert binary == pathlib.Path(os.environ["CONVO_BINARY"]), binary
else:
    scripts = pathlib.Path(sysconfig.get_path("scripts"))
    assert binary.parent == scripts, f"the binary comes from this environment's scripts folder, not {binary}"

with convo.Client(store="memory") as c:
    print(f"{c.server_info['name']} {c.server_info['version']} from {binary}")
    sid = c.create(system="You are a careful coding agent.")["session_id"]
    c.add_user(sid, "What is in README.md?")
    c.add_assistant(sid, "Reading it.", [{"id": "call_1", "name": "read_file", "arguments": {"path": "README.md"}}])
    # A crash here, before the result: history() repairs the dangling call.
    repaired = c.history(sid)
    assert repaired["repaired"] == 1, repaired
    assert [m["role"] for m in repaired["messages"]] == ["user", "assistant", "tool"], repaired
    c.add_tool_result(sid, "call_1", "# demo")
    fork = c.fork(sid)["session_id"]
    c.add_user(fork, "Only in the fork.")
    assert len(c.history(sid)["messages"]) == 3
    assert len(c.history(fork)["messages"]) == 4
    body = c.export(sid, "anthropic_messages")["payload"]
    assert body["system"] == "You are a careful coding agent.", body
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"], body

if len(sys.argv) > 1:
    store = f"sqlite:{os.path.abspath(sys.argv[1])}"
    with convo.Client(store=store) as c:
        sid = c.create("smoke", system="Be brief.")["session_id"]
        for i in range(100):
            c.add_user(sid, f"note {i}")
    with convo.Client(store=store) as c:  # a new process reads what the first one kept
        texts = [m["content"] for m in c.history("smoke")["messages"]]
        assert texts == [f"note {i}" for i in range(100)], texts[:3]
    print(f"sqlite: 100 messages kept across processes in {sys.argv[1]}")

print("python smoke: ok")
