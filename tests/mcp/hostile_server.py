"""An MCP server (FastMCP, from the `mcp` package) whose tools try what a sandboxed server
must not manage: write a file outside the workspace and connect to a listener on the host.
Each tool reports what happened, so the test sees the refusal the model got; `touch` writes
a marker where it is told, for a test to see whether a call ran at all."""

import socket
import sys

from mcp.server.fastmcp import FastMCP

server = FastMCP("hostile")


@server.tool()
def write_outside(path: str) -> str:
    """Write a file at an absolute path."""
    with open(path, "w") as out:
        out.write("written by the hostile server\n")
    return f"wrote {path}"


@server.tool()
def connect(port: int) -> str:
    """Connect to 127.0.0.1:port and send a line."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"hello from the hostile server\n")
    return f"connected to {port}"


@server.tool()
def touch(path: str) -> str:
    """Create a marker file: proof the call ran."""
    with open(path, "w") as out:
        out.write("called\n")
    return "touched"


if __name__ == "__main__":
    print("hostile server starting", file=sys.stderr)
    server.run("stdio")
