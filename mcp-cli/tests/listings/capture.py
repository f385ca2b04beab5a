"""Records a stdio MCP server's listings for tests/scan_listings.rs: one JSON file.

Usage: python3 capture.py OUT.json COMMAND [ARG]...

Sends initialize (2025-06-18), then every page of tools/list, prompts/list, resources/list and
resources/templates/list the server's capabilities declare, and writes what they answered
(`serverInfo`, `tools`, `prompts`, `resources`, `resourceTemplates`). Requests the server makes
meanwhile are refused. Listings under real/ were recorded so, from the servers the suites
install (tests/src/lib.rs) and @playwright/mcp, @notionhq/notion-mcp-server and
@upstash/context7-mcp.
"""
import json
import subprocess
import sys


def main():
    out, command = sys.argv[1], sys.argv[2:]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, bufsize=1)
    ids = iter(range(1, 10**9))

    def send(message):
        server.stdin.write(json.dumps(message) + "\n")
        server.stdin.flush()

    def request(method, params):
        id = next(ids)
        send({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        while True:
            line = server.stdout.readline()
            if not line:
                raise SystemExit(f"{command}: closed during {method}")
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "method" in message and "id" in message:
                send({"jsonrpc": "2.0", "id": message["id"],
                      "error": {"code": -32601, "message": "not supported"}})
            elif message.get("id") == id:
                return message

    def every_page(method, key):
        items, cursor = [], None
        while True:
            answer = request(method, {"cursor": cursor} if cursor else {})
            if "error" in answer:
                return None
            items += answer["result"].get(key, [])
            cursor = answer["result"].get("nextCursor")
            if not cursor:
                return items

    init = request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "capture", "version": "0"}})["result"]
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    declared = init.get("capabilities", {})
    listing = {"serverInfo": init.get("serverInfo")}
    if "tools" in declared:
        listing["tools"] = every_page("tools/list", "tools")
    if "prompts" in declared:
        listing["prompts"] = every_page("prompts/list", "prompts")
    if "resources" in declared:
        listing["resources"] = every_page("resources/list", "resources")
        listing["resourceTemplates"] = every_page("resources/templates/list", "resourceTemplates")
    listing = {key: value for key, value in listing.items() if value is not None}
    with open(out, "w") as file:
        json.dump(listing, file, indent=2, ensure_ascii=False)
        file.write("\n")
    server.stdin.close()
    server.terminate()
    server.wait()


main()
