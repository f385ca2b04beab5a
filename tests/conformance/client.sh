#!/usr/bin/env bash
# The client command the official MCP conformance suite runs for each client scenario: mcp-cli
# against the scenario's server, whose URL is the last argument. The scenario's name comes in
# MCP_CONFORMANCE_SCENARIO, its extra facts (a pre-registered client) in MCP_CONFORMANCE_CONTEXT.
# MCP_CLI names the mcp-cli binary (default: the one on PATH).
set -euo pipefail

url="${!#}"
scenario="${MCP_CONFORMANCE_SCENARIO:?the conformance suite sets MCP_CONFORMANCE_SCENARIO}"
mcp_cli="${MCP_CLI:-mcp-cli}"

# Tokens, client registrations and logs of this run only; no warm daemon.
state="$(mktemp -d)"
trap 'rm -rf "$state"' EXIT
export XDG_STATE_HOME="$state" MCP_CLI_NO_DAEMON=1

# One string field of the JSON context (the suite writes it compactly, without escapes).
context() {
    printf '%s' "${MCP_CONFORMANCE_CONTEXT:-}" | sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"
}

case "$scenario" in
initialize)
    "$mcp_cli" --http "$url" tools
    ;;
tools_call)
    "$mcp_cli" --http "$url" call add_numbers a=2 b=3
    ;;
elicitation-sep1034-client-defaults)
    # No terminal here: --yes answers the server's form with its defaults.
    "$mcp_cli" --yes --http "$url" call test_client_elicitation_defaults
    ;;
sse-retry)
    # The server ends the call's event stream after a priming event with `retry`, and answers
    # on the GET stream we must open that long after, with Last-Event-ID.
    "$mcp_cli" --http "$url" call test_reconnection
    ;;
auth/*)
    # The suite's authorization server approves at once and redirects: the unattended login.
    export MCP_CLI_OAUTH_CLIENT_METADATA_URL="https://conformance-test.local/client-metadata.json"
    if [ "$scenario" = auth/pre-registration ]; then
        MCP_CLI_OAUTH_CLIENT_ID="$(context client_id)"
        MCP_CLI_OAUTH_CLIENT_SECRET="$(context client_secret)"
        export MCP_CLI_OAUTH_CLIENT_ID MCP_CLI_OAUTH_CLIENT_SECRET
    fi
    "$mcp_cli" --auth-follow --http "$url" call test-tool
    ;;
*)
    # Scenarios of later revisions (reported, not required): what any client does first.
    "$mcp_cli" --http "$url" tools
    ;;
esac
