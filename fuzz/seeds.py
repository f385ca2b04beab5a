#!/usr/bin/env python3
# Regenerates the seed corpus from live transcripts of the fixture (and any real servers given
# with --real BIN...). Run from the repository root after `cargo build -p mcp-tests`.
import json, os, subprocess, sys

ROOT = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(ROOT, "..", "target", "debug", "mcp-fixture")
MAX = 65536

def request(i, method, params=None):
    m = {"jsonrpc": "2.0", "id": i, "method": method}
    if params is not None:
        m["params"] = params
    return json.dumps(m)

SCRIPT = "\n".join([
    request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "seed", "version": "0"}}),
    json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    request(2, "tools/list"),
    request(3, "tools/call", {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": 3}}),
    request(4, "tools/call", {"name": "rich", "arguments": {}, "_meta": {"progressToken": 4}}),
    request(5, "tools/call", {"name": "progress", "arguments": {"steps": 2, "ms": 1}, "_meta": {"progressToken": 5}}),
    request(6, "tools/call", {"name": "fail", "arguments": {"message": "x"}}),
    request(7, "tools/call", {"name": "nope", "arguments": {}}),
]) + "\n"

def transcript(cmd, script=SCRIPT, seconds=3):
    try:
        p = subprocess.run(cmd, input=script.encode(), capture_output=True, timeout=seconds)
        return p.stdout[:MAX]
    except subprocess.TimeoutExpired as e:
        return (e.stdout or b"")[:MAX]

def write(target, name, data):
    d = os.path.join(ROOT, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data[:MAX])

def chunked_ops(data, op=0, size=200):
    out = bytearray()
    for i in range(0, len(data), size):
        piece = data[i:i + size]
        out += bytes([op, len(piece)]) + piece
    return bytes(out)

modes = ["good", "noisy-stdout", "invalid-utf8", "unknown-id", "double-answer", "batch",
         "server-requests", "ping-client", "odd-ids", "bad-version", "list-changed", "out-of-order",
         "partial-line-stall", "repeat-cursor"]
transcripts = {m: transcript([FIXTURE, m]) for m in modes}
transcripts["long-line"] = transcript([FIXTURE, "long-line", "--bytes", "300"])
for real in sys.argv[sys.argv.index("--real") + 1:] if "--real" in sys.argv else []:
    transcripts["real-" + os.path.basename(real)] = transcript([real], seconds=10)

edge = {
    "bom-crlf-blank": b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\r\n\n\r\n  \n",
    "no-newline": b"{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}",
    "empty-batch": b"[]\n[1,2]\n[{\"id\":2,\"result\":{}},{\"method\":\"n\"}]\n",
    "null-id": b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"parse\"}}\n",
    "float-string-ids": b"{\"id\":2.0,\"result\":{}}\n{\"id\":\"3\",\"result\":{}}\n{\"id\":1e400,\"result\":{}}\n",
    "bad-error": b"{\"id\":2,\"error\":\"boom\"}\n{\"id\":3,\"result\":1,\"error\":{}}\n",
    "invalid-utf8": b"\xff\xfe\xfd\n\xc3\x28\n",
}

for name, data in list(transcripts.items()) + list(edge.items()):
    write("line_decoder", name, bytes([7, 3]) + data)
    write("line_decoder", name + "-max64", bytes([63, 9]) + data)
    calls = bytes([3, 0] * 8)
    write("connection", name, calls + chunked_ops(data))
    write("connection", name + "-timeouts", calls + chunked_ops(data[:400]) + bytes([6, 255, 5, 1, 8, 0]))
    write("handshake", name, chunked_ops(data[:2000]) + bytes([3, 0, 4, 0, 2, 0]))
    write("handshake", name + "-late-init", bytes([3, 0, 2, 0]) + chunked_ops(data[:2000]))

# The stateless era: the first byte's top bits choose it (0x80.. probed, 0xc0.. fixed); 0x80
# and 0xc8 are also the first op, which reads no bytes here.
stateless = {
    # Probed: the discover result comes from the check itself; a call, then its answer.
    "stateless-discover": bytes([0x80, 0, 3, 0, 7, 0]),
    # An input round with a question, our refusal of it, another round without one, the result.
    "stateless-input-required": bytes([0xc8, 0, 3, 0, 7, 3, 8, 8, 7, 4, 6, 1, 7, 0]),
    # A subscription acknowledged, time passing, then cancelled.
    "stateless-listen-ack": bytes([0x80, 0, 8, 9, 7, 5, 6, 255, 6, 255, 5, 0]),
    # `ping` refused, a subscription never acknowledged.
    "stateless-listen-timeout": bytes([0xc8, 0, 4, 0, 8, 9, 6, 255, 6, 255]),
}
for name, data in stateless.items():
    write("connection", name, data)

configs = {
    "native.toml": (0, '[mcp.fs]\ncommand = "npx"\nargs = ["-y", "@modelcontextprotocol/server-filesystem", "${HOME:-/tmp}"]\nenv = { KEY = "${SET}" }\ncwd = "."\nenabled = true\ntimeout_sec = 10\ncall_timeout_sec = 60\n'),
    "codex.toml": (0, '[mcp_servers.git]\ncommand = "uvx"\nargs = ["mcp-server-git"]\nstartup_timeout_sec = 20\ntool_timeout_sec = 30\n[mcp_servers.remote]\nurl = "https://example.invalid/mcp"\n'),
    "claude.json": (1, '{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "x"], "env": {"A": "${UNSET}"}}, "r": {"type": "http", "url": "https://x.invalid"}, "off": {"command": "x", "disabled": true}}}'),
    "vscode.jsonc": (2, '{\n  // comment\n  "servers": {\n    "a": {"type": "stdio", "command": "node", "args": ["s.js",],},\n    /* block */ "b": {"type": "sse", "url": "http://x"}\n  },\n  "inputs": []\n}'),
    "opencode.json": (1, '{"mcp": {"local": {"type": "local", "command": ["bun", "x", "y"], "environment": {"K": "v"}, "enabled": true}, "remote": {"type": "remote", "url": "https://x"}}}'),
    "zed.json": (1, '{"context_servers": {"a": {"command": "p", "args": [], "env": {}}, "b": {"command": {"path": "q", "args": ["1"]}}, "c": {"source": "extension", "settings": {}}}}'),
    "broken.toml": (0, '[mcp.x]\ncommand = 5\n'),
    "broken.json": (1, '{"mcpServers": {"x": {"command": ["a"]}}'),
}
for name, (selector, text) in configs.items():
    write("config", name, bytes([selector]) + text.encode())
