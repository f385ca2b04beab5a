#!/usr/bin/env bash
# The client command the official MCP conformance suite runs for each client scenario: mcp-cli
# against the scenario's server, whose URL is the last argument. The scenario's name comes in
# MCP_CONFORMANCE_SCENARIO, its extra facts (a pre-registered client) in MCP_CONFORMANCE_CONTEXT.
# MCP_CLI names the mcp-cli binary (default: the one on PATH); when CONFORMANCE_CLIENT_STATUS
# names a file, this script's exit status is written there (the suite does not record it).
set -euo pipefail

url="${!#}"
scenario="${MCP_CONFORMANCE_SCENARIO:?the conformance suite sets MCP_CONFORMANCE_SCENARIO}"
mcp_cli="${MCP_CLI:-mcp-cli}"

# Tokens (in a file, never the keychain), client registrations and logs of this run only; no
# warm daemon.
state="$(mktemp -d)"
finish() {
    local status=$?
    rm -rf "$state"
    if [ -n "${CONFORMANCE_CLIENT_STATUS:-}" ]; then
        echo "$status" >"$CONFORMANCE_CLIENT_STATUS"
    fi
}
trap finish EXIT
export XDG_STATE_HOME="$state" MCP_CLI_NO_DAEMON=1 MCP_CLI_TOKEN_STORE=file

# The JSON context, read by the Node.js the suite itself runs on: `context FIELD` prints one
# string field; `tool_calls` prints each of `toolCalls` as a tool name, a tab, then its
# arguments as one line of JSON (escapes kept, so control characters reach mcp-cli intact).
context() {
    node -e 'const v = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || "{}")[process.argv[1]];
        if (typeof v === "string") console.log(v);' "$1"
}
tool_calls() {
    node -e 'for (const call of JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT).toolCalls)
        console.log(call.name + "\t" + JSON.stringify(call.arguments));'
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
auth/client-credentials-basic | auth/client-credentials-jwt)
    # A machine client (an extension scenario): no login, a token in the client's own name,
    # the client proven by its secret or by a JWT signed with the context's private key.
    MCP_CLI_OAUTH_GRANT=client_credentials
    MCP_CLI_OAUTH_CLIENT_ID="$(context client_id)"
    export MCP_CLI_OAUTH_GRANT MCP_CLI_OAUTH_CLIENT_ID
    if [ "$scenario" = auth/client-credentials-jwt ]; then
        context private_key_pem >"$state/client-key.pem"
        MCP_CLI_OAUTH_SIGNING_ALG="$(context signing_algorithm)"
        export MCP_CLI_OAUTH_PRIVATE_KEY_FILE="$state/client-key.pem" MCP_CLI_OAUTH_SIGNING_ALG
    else
        MCP_CLI_OAUTH_CLIENT_SECRET="$(context client_secret)"
        export MCP_CLI_OAUTH_CLIENT_SECRET
    fi
    "$mcp_cli" --http "$url" call test-tool
    ;;
auth/wif-jwt-bearer)
    # A workload (an extension scenario): the JWT its platform gave it is the grant, read
    # from a file as CI systems provide it; no client, no login.
    context valid_jwt >"$state/workload.jwt"
    MCP_CLI_OAUTH_GRANT=jwt_bearer MCP_CLI_OAUTH_ASSERTION_FILE="$state/workload.jwt" \
        "$mcp_cli" --http "$url" call test-tool
    ;;
auth/enterprise-managed-authorization)
    # Enterprise-managed authorization (an extension scenario): the person's ID token from
    # the identity provider (handed over in a file, as a program would), exchanged there for
    # an identity assertion grant, traded for a token by our client at the server's
    # authorization server.
    context idp_id_token >"$state/id-token.jwt"
    MCP_CLI_OAUTH_GRANT=enterprise
    MCP_CLI_OAUTH_IDP_ISSUER="$(context idp_issuer)"
    MCP_CLI_OAUTH_IDP_CLIENT_ID="$(context idp_client_id)"
    MCP_CLI_OAUTH_ID_TOKEN_FILE="$state/id-token.jwt"
    MCP_CLI_OAUTH_CLIENT_ID="$(context client_id)"
    MCP_CLI_OAUTH_CLIENT_SECRET="$(context client_secret)"
    export MCP_CLI_OAUTH_GRANT MCP_CLI_OAUTH_IDP_ISSUER MCP_CLI_OAUTH_IDP_CLIENT_ID \
        MCP_CLI_OAUTH_ID_TOKEN_FILE MCP_CLI_OAUTH_CLIENT_ID MCP_CLI_OAUTH_CLIENT_SECRET
    "$mcp_cli" --http "$url" call test-tool
    ;;
auth/dpop | auth/dpop-nonce)
    # DPoP (an extension scenario) needs no setting: the server's challenge offers the DPoP
    # scheme and its authorization server takes ES256 proofs, so the tokens are bound to a
    # key of ours; the nonces both servers ask for are taken up. The login is unattended.
    "$mcp_cli" --auth-follow --http "$url" call test-tool
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
request-metadata | json-schema-ref-no-deref)
    # Every request's metadata; a tool whose schema has a `$ref` we must never fetch.
    "$mcp_cli" --http "$url" tools
    "$mcp_cli" --json --http "$url" tools >/dev/null
    ;;
sep-2322-client-request-state)
    # input_required rounds: --yes answers the elicitation (a form without defaults).
    "$mcp_cli" --yes --http "$url" call test_mrtr_echo_state
    "$mcp_cli" --yes --http "$url" call test_mrtr_no_state
    "$mcp_cli" --http "$url" call test_mrtr_unrelated
    "$mcp_cli" --http "$url" call test_mrtr_no_result_type
    ;;
http-standard-headers)
    # Mcp-Method and Mcp-Name on each kind of request.
    "$mcp_cli" --http "$url" tools
    "$mcp_cli" --http "$url" call test_headers
    "$mcp_cli" --http "$url" resources
    "$mcp_cli" --http "$url" read 'file:///path/to/file%20name.txt'
    "$mcp_cli" --http "$url" prompts
    "$mcp_cli" --http "$url" prompt test_prompt
    ;;
http-custom-headers)
    # The x-mcp-header arguments the context lists, mirrored into Mcp-Param-* headers.
    tool_calls | while IFS=$'\t' read -r tool arguments; do
        "$mcp_cli" --http "$url" call "$tool" --args "$arguments" </dev/null
    done
    ;;
http-invalid-tool-headers)
    # Tools with an invalid x-mcp-header annotation are left out, with a warning.
    "$mcp_cli" --http "$url" tools
    "$mcp_cli" --http "$url" call valid_tool region=us-west1
    ;;
sep-2640-client-no-prefetch)
    # The skills extension: listing reads the list, never a skill's files; in both eras.
    for protocol in 2025-11-25 2026-07-28; do
        "$mcp_cli" --http "$url" --protocol "$protocol" skills
    done
    ;;
sep-2640-client-verify-digest | sep-2640-client-verify-size | sep-2640-client-verify-frontmatter)
    # The server serves a SKILL.md that fails its entry (by digest, by size, or by its
    # frontmatter): in both eras the fetch must refuse it for that reason, read no further
    # file and write nothing. This script exits 0 only then.
    case "$scenario" in
    *digest) why="has digest sha256:" ;;
    *size) why="bytes, the entry says" ;;
    *) why="has another frontmatter than the entry" ;;
    esac
    for protocol in 2025-11-25 2026-07-28; do
        if errors="$("$mcp_cli" --http "$url" --protocol "$protocol" skill pdf-processing \
            --to "$state/skills" 2>&1 >/dev/null)"; then
            echo "$protocol: the tampered skill was accepted" >&2
            exit 90
        fi
        echo "$protocol: $errors" >&2
        case "$errors" in
        *"$why"*"nothing was written"*) ;;
        *)
            echo "$protocol: refused, but not for the tampering ($why)" >&2
            exit 91
            ;;
        esac
        if [ -e "$state/skills" ]; then
            echo "$protocol: something was written: $(ls -A "$state/skills")" >&2
            exit 92
        fi
    done
    ;;
*)
    # Scenarios not required (extensions, later additions): what any client does first.
    "$mcp_cli" --http "$url" tools
    ;;
esac
