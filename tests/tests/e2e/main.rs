//! End-to-end suites: one test binary, one module per area.

// In tests a failed unwrap is a failed test, which is what we want.
#![allow(clippy::unwrap_used)]

/// Shared set-up: fixture commands, short timeouts, process checks.
mod support;

/// Every misbehaving fixture mode, driven through mcp-smol.
mod faults;

/// The fixtures' stateless-era (2026-07-28) modes, driven by raw JSON-RPC lines and raw HTTP.
mod fixtures_stateless;

/// The adapter's normal work: calls, pipelining, progress, cancellation, shutdown.
mod adapter;

/// The caller-drives hand-off under stress, over stdio and HTTP: many threads and tasks,
/// callers dropped mid-call, the driver's own thread racing them.
mod handoff;

/// mcp-smol choosing each server's era through `connect`: the fixture's stateless modes and
/// the modern peers, input requests answered like server requests.
mod adapter_eras;

/// The same connection driven under smol, tokio (both flavours) and a plain block_on.
mod runtimes;

/// The host layer (`mcp_client_cli::hub`) embedded as an agent would.
mod hub;

/// The host layer on stateless-era servers: listening, cache hints, schemas as sent, a missing
/// resource, nothing the era removed sent.
mod hub_stateless;

/// The `mcp-cli` binary against fixture servers: exit codes, arguments, config formats, output.
mod cli;

/// Config management through the `mcp-cli` binary: enable, disable, add, remove, import, --stdio.
mod config_edit;

/// Project files' servers wait for a person's approval; `approve` and `trust` are the
/// person's decisions.
mod project_approval;

/// Policy through the `mcp-cli` binary: lists, filters, rules, `ask` on a pseudo-terminal.
mod policy;

/// The command line as a newcomer meets it: mistakes, messages, logs, terminal safety.
mod newcomer;

/// The `mcp-cli` binary against the real reference servers from npm and PyPI.
mod real_servers;

/// The book's chapters (`docs/*.md`) run as written, one test per chapter.
mod book;

/// The modern (2026-07-28) test peers on the TypeScript, Python and Rust SDKs, by raw lines.
mod modern_servers;

/// The modern test peers through the `mcp-cli` binary, over stdio and HTTP: every command,
/// the era cached, `serve` as their client, a call cancelled by its timeout.
mod modern_cli;

/// The fixtures' stateless-era misbehaviours through the `mcp-cli` binary, over stdio and HTTP.
mod eras_cli;

/// Resources, prompts, completion, subscriptions, roots and elicitation, against the fixture
/// and the real server-everything.
mod resources;

/// Trust and sandbox: tool pinning and `trust`, and `permissions` (network, Landlock).
mod trust;

/// The network allowlist: the hub's proxy, refusals logged, `network = []`, the trust
/// chapter's sandbox examples with real servers.
mod sandbox_network;

/// The sandbox's walls: no Unix socket, process or /proc entry outside, no grandchild left.
mod sandbox_walls;

/// What a server takes from us and leaves behind: the minimal environment, `env_pass`, the
/// daemon refusing sandboxed peers, a `setsid` grandchild stopped with its server.
mod sandbox_env;

/// The poisoning scan: poisoned fixture tools withheld on first sight, `scan`, no false alarm on
/// the real servers.
mod scan;

/// The poisoning scan over schemas' values, prompts, resources and templates: withheld, reported.
mod scan_offer;

/// `mcp-cli serve` driven by the official TypeScript and Python SDK clients, and by raw lines.
mod gateway;

/// Hosts that list once: `serve`'s first list holds servers slow to start and, once seen,
/// every server's tools whatever their cache hints; past the wait the list says it goes on.
mod gateway_lists;

/// Tool search: `mcp-cli search` and `serve --search`, on eight real servers and the fixture.
mod search;

/// How well search finds what a person means: the benchmark over recorded real listings.
mod search_quality;

/// The catalogue on disk: listings answered without starting servers whatever their cache
/// hints, refreshed, calls listing live.
mod catalogue;

/// `mcp-cli daemon`: warm runs against cold ones, peer uid, stop, idle exit, stale sockets.
mod daemon;

/// The MCP Registry: `registry sync|search|show` and `install` against `mcp-registry-fixture`,
/// installing and calling real servers from npm and PyPI.
mod registry;

/// Calls parked on the daemon (`call --park`), answered by `answer`, listed by `parked`.
mod parked;

/// Remote servers over HTTP: server-everything's HTTP modes, HTTPS, and misbehaving servers.
mod http;

/// OAuth for remote servers: `mcp_client_cli::auth` against `mcp-oauth-fixture` over real HTTP.
mod oauth;
mod oauth_extensions;

/// OAuth for real use through the `mcp-cli` binary: the keychain (a private gnome-keyring),
/// one refresh across processes, headless logins, stored-auth-only, machine clients.
mod oauth_real;

/// The official conformance suite's client scenarios with `mcp-cli --http` as the client.
mod conformance;

/// Remote servers through the `mcp-cli` binary: config `url`, `--http`, headers, `needs-auth`.
mod remote;

/// mcp-cli kept from starting itself: its own gateway in its config, import, the depth marker.
mod nesting;

/// `mcp-cli serve` before stateless-era hosts (2026-07-28): our own client, raw lines, and the
/// TypeScript and Python SDK clients; forms as `input_required` rounds, `subscriptions/listen`.
mod gateway_stateless;
mod gateway_stateless_relays;

/// `mcp-cli serve --listen` over Streamable HTTP: both eras, many hosts, the token, the
/// Host/Origin checks, bounds, a host hanging up, SIGTERM.
mod gateway_listen;

/// Tasks through the binary: `call` waiting for one, `call --async` and `tasks` through the
/// daemon, failed, forgotten, asking and never-ending tasks, bounded polls, a daemon restart.
mod tasks;

/// `mcp-cli serve --listen` answering with event streams: progress, forms and list changes to
/// HTTP hosts of both eras (our client, the TypeScript SDK), `subscriptions/listen`, `GET`.
mod gateway_sse;

/// The MCP Inspector's command line as a host of `mcp-cli serve`, over stdio and `--listen`.
mod gateway_inspector;

/// Results too large to print: `call --max-output`, `max_result_bytes`, and the gateway's cut
/// to a host's `maxResultSizeChars` with the whole readable as a resource.
mod large;

/// Output schemas: `structuredContent` checked against the tool's `outputSchema` by `call` and
/// the gateway, the fixture's lying tool caught, the reference servers' tools clean.
mod output_schema;

/// Tasks through `mcp-cli serve` for hosts that ask: a handshake-era host's `task` parameter
/// on backends of both eras, forms before and during a task, and the stateless-era host's
/// form before its task.
mod gateway_tasks;

/// URL-mode elicitation through `mcp-cli serve`: a backend's link to a host that declared URL
/// mode, its completion notification after it, and a decline for a host that did not.
mod gateway_url_elicitation;

/// `serve --listen` keeps its long-lived event streams alive with comment lines.
mod gateway_keepalive;

mod gateway_roots;
/// `serve --listen`: a stateless-era call's progress after an input round reaches the host.
mod gateway_round_progress;

/// `serve --listen`: a backend's roots question goes to the session host whose call waits on it.
mod gateway_listen_roots;

/// `serve --listen` replicas behind a real haproxy: round robin, a replica killed mid-call, an
/// input round and a task carried from one replica to the other.
mod gateway_replicas;

/// What one server or host may cost us: listings cut at `max_listed`, `serve --listen`'s
/// connection cap.
mod limits;

/// State files are ours: folders 0700, files 0600, no symbolic links followed, the listen
/// token, the Bearer scheme in any case, a crash reported with its own stderr.
mod state_files;

/// Skills (SEP-2640) from the TypeScript SDK peer: listed, printed and installed in both eras,
/// and verified by a TypeScript SDK host through `serve`.
mod skills;
