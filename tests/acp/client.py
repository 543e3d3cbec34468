"""An ACP client built on the Python SDK (`agent-client-protocol` on PyPI), driving `wright acp`
through a scenario for tests/tests/acp.rs: the same scenario format and the same records on
stdout as client.mjs (see there). The SDK parses every message wright sends with its pydantic
models of the published schema, so a malformed one fails here.

Usage: python client.py SCENARIO.json, with WRIGHT_BIN naming the binary.
"""

import asyncio
import json
import os
import sys

from acp import PROTOCOL_VERSION, spawn_agent_process
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
    PromptRequest,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)


def record(entry):
    sys.stdout.write(json.dumps(entry) + "\n")
    sys.stdout.flush()


def dump(model):
    return None if model is None else model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Client:
    def __init__(self, scenario, waiters):
        self.unsaved = dict(scenario.get("unsaved", {}))
        self.permissions = list(scenario.get("permissions", []))
        self.waiters = waiters

    async def session_update(self, session_id, update, **kwargs):
        update = dump(update)
        record({"type": "update", "sessionId": session_id, "update": update})
        for waiter in list(self.waiters):
            if waiter[0] == update.get("sessionUpdate") and not waiter[1].done():
                waiter[1].set_result(None)
                self.waiters.remove(waiter)

    async def read_text_file(self, session_id, path, line=None, limit=None, **kwargs):
        record({"type": "request", "method": "fs/read_text_file", "params": {"sessionId": session_id, "path": path}})
        if path in self.unsaved:
            return ReadTextFileResponse(content=self.unsaved[path])
        with open(path, encoding="utf-8") as file:
            return ReadTextFileResponse(content=file.read())

    async def write_text_file(self, session_id, path, content, **kwargs):
        params = {"sessionId": session_id, "path": path, "content": content}
        record({"type": "request", "method": "fs/write_text_file", "params": params})
        self.unsaved[path] = content
        return WriteTextFileResponse()

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        params = {"sessionId": session_id, "toolCall": dump(tool_call), "options": [dump(o) for o in options]}
        record({"type": "request", "method": "session/request_permission", "params": params})
        option = self.permissions.pop(0) if self.permissions else "reject_once"
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option))


async def perform(conn, scenario, state, step, waiters):
    op = step["op"]
    try:
        if op == "initialize":
            fs = scenario.get("fs", {})
            result = await conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(
                        read_text_file=bool(fs.get("read")), write_text_file=bool(fs.get("write"))
                    ),
                    terminal=True,
                ),
                client_info=Implementation(name="wright-tests-py", version="1"),
            )
        elif op == "new":
            result = await conn.new_session(cwd=step["cwd"], mcp_servers=[])
            state["sessionId"] = result.session_id
        elif op == "load":
            result = await conn.load_session(cwd=step["cwd"], session_id=state["sessionId"], mcp_servers=[])
        elif op in ("prompt", "prompt_then_cancel"):
            blocks = PromptRequest.model_validate({"sessionId": state["sessionId"], "prompt": step["prompt"]}).prompt
            prompt = asyncio.ensure_future(conn.prompt(session_id=state["sessionId"], prompt=blocks))
            if op == "prompt_then_cancel":
                begun = asyncio.get_running_loop().create_future()
                waiters.append((step["after"], begun))
                await begun
                await conn.cancel(session_id=state["sessionId"])
                record({"type": "cancelled"})
            result = await prompt
        elif op == "set_mode":
            result = await conn.set_session_mode(session_id=state["sessionId"], mode_id=step["modeId"])
        elif op == "set_model":
            result = await conn.set_config_option(config_id="model", session_id=state["sessionId"], value=step["value"])
        else:
            raise ValueError(f"unknown step {op}")
        record({"type": "answer", "op": op, "result": dump(result)})
    except Exception as error:  # recorded for the Rust test to judge
        record({"type": "error", "op": op, "code": getattr(error, "code", None), "message": str(error)})


async def main():
    with open(sys.argv[1], encoding="utf-8") as file:
        scenario = json.load(file)
    segments = [[]]
    for step in scenario["steps"]:
        if step["op"] == "restart":
            segments.append([])
        else:
            segments[-1].append(step)
    state = {"sessionId": scenario.get("sessionId")}
    for steps in segments:
        waiters = []
        client = Client(scenario, waiters)
        # The SDK passes only a few variables by default; wright needs its model and folders.
        command = os.environ["WRIGHT_BIN"]
        async with spawn_agent_process(client, command, "acp", env=dict(os.environ)) as (conn, process):
            for step in steps:
                await perform(conn, scenario, state, step, waiters)
            process.stdin.close()
            record({"type": "exit", "code": await process.wait()})


if __name__ == "__main__":
    asyncio.run(main())
