//! The core's suites in virtual time: one test binary, one module per kind of test.

// In tests a failed unwrap is a failed test, which is what we want.
#![allow(clippy::unwrap_used)]

/// A scripted fake server and helpers that drain the connection.
mod peer;

/// One behaviour per test: the handshake, requests, server requests, time, malformed input.
mod scenarios;

/// Answers that cannot be read (too long, not JSON): each fails its request at once.
mod unreadable;

/// Message-level inputs for HTTP: whole bodies, transport failures, restarted sessions.
mod messages;

/// proptest: chunking invariance, handshake orderings, every request ending exactly once.
mod properties;

/// The server role: its handshake, host requests, progress, cancellation, limits, bad input.
mod server;

/// The HTTP transports' machine, without sockets: sessions, restarts, fallback, resumption.
mod streamable;

/// HTTP bodies and event data fed in pieces: the same events as fed whole.
mod streamable_pieces;

/// The stateless era: era selection, `_meta`, removed methods, `resultType`, input rounds,
/// subscriptions, cache hints.
mod stateless;

/// The server role in the stateless era: discover, per-request `_meta`, version refusals,
/// input rounds, subscriptions.
mod server_stateless;

/// Tasks on the wire: the extension declared, task results handed over, the `task` param.
mod tasks;
