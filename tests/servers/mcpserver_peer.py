"""A FastMCP-style server on the Python SDK `mcp` 2.x (`MCPServer`), a modern test peer.

Usage: python mcpserver_peer.py [--http PORT]
Over HTTP it prints `http://127.0.0.1:PORT/mcp` on stdout once listening (PORT 0 picks a
free port).

Offers: `add {a, b}`, `confirm {action}` (asks through `input_required`), `sleep {ms}`
(reports progress until cancelled), `add_tool` (adds `extra`, so the tool list changes),
the resource `peer://greeting`, and the prompt `greet {name}`.
"""

import socket
import sys
from typing import Annotated

import anyio
import uvicorn
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from pydantic import BaseModel

server = MCPServer(
    name="mcpserver-peer",
    version="1.0.0",
    cache_hints={"resources/read": CacheHint(ttl_ms=60000, scope="public")},
)


class Confirmation(BaseModel):
    ok: bool


@server.tool()
def add(a: float, b: float) -> str:
    """Adds two numbers"""
    return f"{a + b:g}"


def ask(action: str) -> Elicit[Confirmation]:
    return Elicit(f"Really {action}?", Confirmation)


@server.tool()
def confirm(action: str, answer: Annotated[Confirmation, Resolve(ask)]) -> str:
    """Asks the user to confirm an action"""
    return f"{'confirmed' if answer.ok else 'declined'} {action}"


@server.tool()
async def sleep(ms: int, ctx: Context) -> str:
    """Sleeps until cancelled or ms pass, reporting progress"""
    try:
        for waited in range(0, ms, 100):
            await ctx.report_progress(waited, ms)
            await anyio.sleep(0.1)
    except anyio.get_cancelled_exc_class():
        print("mcpserver-peer: sleep cancelled", file=sys.stderr, flush=True)
        raise
    return "slept"


def extra() -> str:
    """Added by add_tool"""
    return "extra"


@server.tool()
async def add_tool(ctx: Context) -> str:
    """Adds the tool `extra`"""
    if "extra" not in [tool.name for tool in await server.list_tools()]:
        server.add_tool(extra)
        await ctx.notify_tools_changed()
    return "added extra"


@server.resource("peer://greeting", mime_type="text/plain")
def greeting() -> str:
    return "hello from mcpserver-peer"


@server.prompt()
def greet(name: str) -> str:
    """Greets someone"""
    return f"Say hello to {name}."


async def serve_http(port: int) -> None:
    # Bound here rather than by uvicorn so that port 0 works and the URL can be printed.
    listener = socket.create_server(("127.0.0.1", port))
    print(f"http://127.0.0.1:{listener.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    await uvicorn.Server(config).serve(sockets=[listener])


if __name__ == "__main__":
    if "--http" in sys.argv:
        anyio.run(serve_http, int(sys.argv[sys.argv.index("--http") + 1]))
    else:
        server.run()
