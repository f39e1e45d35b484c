"""Baseline 1: what a Python host does today. pycodeloop's own Session class keeps the
state; python-lsp-jsonrpc speaks JSON-RPC over stdio in LSP framing. The methods and
params are convo's, so one load generator measures both."""

import os
import sys

from pycodeloop.core.session import Session
from pylsp_jsonrpc.endpoint import Endpoint
from pylsp_jsonrpc.streams import JsonRpcStreamReader, JsonRpcStreamWriter

sessions: dict[str, Session] = {}


def messages(session):
    # The fastest way a Python author would write it: each message's own attribute dict
    # (a plain dataclass keeps its fields there), handed to the JSON encoder as is.
    # `dataclasses.asdict` would deep-copy every message first, which made this baseline
    # about twice as slow as it need be.
    return [m.__dict__ for m in session.history()]


def create(p):
    sessions[p["session_id"]] = Session(system_prompt=p.get("system") or "")
    return {"session_id": p["session_id"]}


def add_user(p):
    s = sessions[p["session_id"]]
    s.add_user(p["text"], p.get("images"))
    return {"index": len(s.messages) - 1}


def add_assistant(p):
    s = sessions[p["session_id"]]
    s.add_assistant(p.get("text") or "", p.get("tool_calls"))
    return {"index": len(s.messages) - 1}


def add_tool_result(p):
    s = sessions[p["session_id"]]
    s.add_tool_result(p["tool_call_id"], p["content"])
    return {"index": len(s.messages) - 1}


def history(p):
    return {"messages": messages(sessions[p["session_id"]])}


def trim(p):
    s = sessions[p["session_id"]]
    before = len(s.messages)
    s.trim(p["max_turns"])
    return {"removed": before - len(s.messages)}


def fork(p):
    s = sessions[p["session_id"]]
    new_id = p.get("new_session_id") or f"{p['session_id']}-fork-{len(sessions)}"
    sessions[new_id] = Session(system_prompt=s.system_prompt, messages=list(s.history()), cwd=s.cwd)
    return {"session_id": new_id}


def to_dict(p):
    s = sessions[p["session_id"]]
    return {"session_id": p["session_id"], "system": s.system_prompt, "cwd": s.cwd, "messages": messages(s)}


def exit_(_p):
    os._exit(0)


handlers = {
    "initialize": lambda p: {"server_info": {"name": "pycodeloop-baseline"}},
    "shutdown": lambda p: None,
    "exit": exit_,
    "session/create": create,
    "session/add_user": add_user,
    "session/add_assistant": add_assistant,
    "session/add_tool_result": add_tool_result,
    "session/history": history,
    "session/trim": trim,
    "session/fork": fork,
    "session/to_dict": to_dict,
}

if __name__ == "__main__":
    writer = JsonRpcStreamWriter(sys.stdout.buffer)
    endpoint = Endpoint(handlers, writer.write)
    JsonRpcStreamReader(sys.stdin.buffer).listen(endpoint.consume)
