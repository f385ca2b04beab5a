//! `mcp-oauth-fixture MODE [--log FILE]`: an OAuth 2.1 authorization server and the MCP
//! server it protects, in one process on 127.0.0.1 (a free port, printed as `PORT <n>`), for
//! the end-to-end suites. The MCP endpoint is `/mcp` (Streamable HTTP, JSON answers); the
//! authorization endpoint approves at once and redirects, as the conformance suite's does.
//! Plain std sockets, one thread per connection, one exchange per connection
//! ([`mcp_tests::http`]).
//!
//! It checks what a client must get right: PKCE S256 (the verifier must match), `state`
//! carried through, `resource` equal to the protected resource, the registered redirect URI,
//! tokens only for the MCP endpoint's scopes. Modes:
//! - `good`: dynamic registration, tokens for an hour with a refresh token.
//! - `no-refresh`: refresh grants are refused (`invalid_grant`), as for a revoked login.
//! - `step-up`: `tools/call` needs scope `write` on top of `read`: a `403` with
//!   `error="insufficient_scope"` until the token has both.
//! - `no-registration`: the server metadata offers no registration endpoint.
//! - `plain-pkce`: the server metadata lists only the `plain` PKCE method.
//! - `slow-down`: as `good`, but the first device-code poll is answered `slow_down`.
//! - `no-device`: the server metadata offers no device authorization endpoint.
//! - `post-only`: the token endpoint takes client secrets only in the form.
//!
//! The device authorization grant (RFC 8628): `POST /device_authorization` hands out a code
//! (poll interval 1 s); `GET /device?user_code=CODE&action=approve|deny|expire` is the
//! person's page (the tests call it). A poll sooner than the interval is answered `slow_down`
//! and logged `device poll too early`.
//!
//! The client credentials grant: client `machine` with secret `machine-secret`, sent by HTTP
//! Basic or in the form (logged `token grant=client_credentials auth=basic|post`).
//!
//! `--log FILE` appends one line per OAuth step or MCP request, e.g. `authorize scope=read`,
//! `token grant=refresh_token`, `register`, `mcp rpc=tools/list auth=bearer`.
//!
//! Refresh tokens rotate: each is good once. `GET /stats` answers the counts so far,
//! `{"refreshes": n, "replays": m}`: refresh grants that succeeded, and spent refresh tokens
//! presented again (a client that replays a rotated token; providers revoke the login for it).
//!
//! `mcp-oauth-fixture browse URL`: a stand-in for a browser (for `$BROWSER`): GETs `URL`,
//! follows redirects, exits 0 once a page answers 2xx.

// A poisoned lock here means the fixture itself crashed; panicking further is the right answer.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mcp_tests::http::{self, Request, Response};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

struct Grant {
    challenge: String,
    redirect_uri: String,
    scopes: Vec<String>,
}

struct Token {
    scopes: Vec<String>,
    expires: Instant,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Approval {
    Pending,
    Approved,
    Denied,
    Expired,
}

/// One device code: what the person decided and how often the client polls.
struct Device {
    user_code: String,
    scopes: Vec<String>,
    approval: Approval,
    interval: Duration,
    last_poll: Option<Instant>,
    polls: u32,
}

struct State {
    mode: String,
    base: String,
    clients: Mutex<HashMap<String, Vec<String>>>,
    codes: Mutex<HashMap<String, Grant>>,
    tokens: Mutex<HashMap<String, Token>>,
    refresh: Mutex<HashMap<String, Vec<String>>>,
    /// Device codes by `device_code`.
    devices: Mutex<HashMap<String, Device>>,
    /// Refresh tokens already used once.
    spent: Mutex<Vec<String>>,
    refreshes: AtomicU64,
    replays: AtomicU64,
    next: AtomicU64,
    log: Option<Mutex<std::fs::File>>,
}

impl State {
    fn log(&self, line: String) {
        if let Some(file) = &self.log {
            writeln!(file.lock().unwrap(), "{line}").unwrap();
        }
    }

    fn fresh(&self, what: &str) -> String {
        format!("{what}-{}", self.next.fetch_add(1, Ordering::SeqCst))
    }

    /// A new access token (and refresh token) for `scopes`, as the token endpoint's answer.
    fn issue(&self, scopes: Vec<String>) -> Value {
        let access = self.fresh("access");
        let refresh = self.fresh("refresh");
        let lifetime = 3600;
        let answer = json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": lifetime,
            "refresh_token": refresh,
            "scope": scopes.join(" "),
        });
        let expires = Instant::now() + Duration::from_secs(lifetime);
        self.refresh.lock().unwrap().insert(refresh, scopes.clone());
        self.tokens
            .lock()
            .unwrap()
            .insert(access, Token { scopes, expires });
        answer
    }
}

fn reply(status: &'static str, body: &Value) -> Response {
    Response::new(status, "application/json", body.to_string())
}

fn oauth_error(status: &'static str, error: &str, description: &str) -> Response {
    reply(
        status,
        &json!({"error": error, "error_description": description}),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().cloned().unwrap_or_else(|| "good".to_owned());
    if mode == "browse" {
        std::process::exit(browse(args.get(1).cloned().unwrap_or_default()));
    }
    let log = (args.iter().position(|a| a == "--log"))
        .and_then(|i| args.get(i + 1))
        .map(|path| {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path);
            Mutex::new(file.unwrap())
        });
    let listener = http::listen(0).unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = State {
        mode,
        base: format!("http://127.0.0.1:{port}"),
        clients: Mutex::default(),
        codes: Mutex::default(),
        tokens: Mutex::default(),
        refresh: Mutex::default(),
        devices: Mutex::default(),
        spent: Mutex::default(),
        refreshes: AtomicU64::new(0),
        replays: AtomicU64::new(0),
        next: AtomicU64::new(1),
        log,
    };
    http::serve_each(listener, move |mut stream| {
        if let Some(request) = http::read_request(&mut stream) {
            let _ = route(&state, &request).write_to(&mut stream);
        }
    });
}

fn route(state: &State, request: &Request) -> Response {
    let base = &state.base;
    match (request.method.as_str(), request.path()) {
        ("GET", "/.well-known/oauth-protected-resource/mcp") => {
            state.log("metadata resource".into());
            reply(
                "200 OK",
                &json!({
                    "resource": format!("{base}/mcp"),
                    "authorization_servers": [base],
                    "scopes_supported": ["read", "write"],
                }),
            )
        }
        ("GET", "/.well-known/oauth-authorization-server") => {
            state.log("metadata server".into());
            let mut metadata = json!({
                "issuer": base,
                "authorization_endpoint": format!("{base}/authorize"),
                "token_endpoint": format!("{base}/token"),
                "registration_endpoint": format!("{base}/register"),
                "response_types_supported": ["code"],
                "device_authorization_endpoint": format!("{base}/device_authorization"),
                "grant_types_supported": [
                    "authorization_code",
                    "refresh_token",
                    "client_credentials",
                    "urn:ietf:params:oauth:grant-type:device_code",
                ],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": [
                    "none",
                    "client_secret_basic",
                    "client_secret_post",
                ],
            });
            match state.mode.as_str() {
                "no-registration" => {
                    metadata
                        .as_object_mut()
                        .unwrap()
                        .remove("registration_endpoint");
                }
                "plain-pkce" => metadata["code_challenge_methods_supported"] = json!(["plain"]),
                "post-only" => {
                    metadata["token_endpoint_auth_methods_supported"] =
                        json!(["client_secret_post"]);
                }
                "no-device" => {
                    metadata
                        .as_object_mut()
                        .unwrap()
                        .remove("device_authorization_endpoint");
                }
                _ => {}
            }
            reply("200 OK", &metadata)
        }
        ("GET", "/stats") => reply(
            "200 OK",
            &json!({
                "refreshes": state.refreshes.load(Ordering::SeqCst),
                "replays": state.replays.load(Ordering::SeqCst),
            }),
        ),
        ("POST", "/register") => register(state, request),
        ("POST", "/device_authorization") => device_authorization(state, request),
        ("GET", "/device") => device_page(state, request),
        ("GET", "/authorize") => authorize(state, request),
        ("POST", "/token") => token(state, request),
        ("POST", "/mcp") => mcp(state, request),
        ("GET", "/mcp") => Response::empty("405 Method Not Allowed", vec![]),
        _ => reply("404 Not Found", &json!({"error": "not_found"})),
    }
}

fn register(state: &State, request: &Request) -> Response {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
    let uris: Vec<String> = (body["redirect_uris"].as_array().into_iter().flatten())
        .filter_map(|uri| uri.as_str().map(str::to_owned))
        .collect();
    if uris.is_empty() {
        return oauth_error(
            "400 Bad Request",
            "invalid_redirect_uri",
            "no redirect_uris",
        );
    }
    let id = state.fresh("client");
    state.log(format!("register {id}"));
    state
        .clients
        .lock()
        .unwrap()
        .insert(id.clone(), uris.clone());
    reply(
        "201 Created",
        &json!({"client_id": id, "redirect_uris": uris}),
    )
}

fn authorize(state: &State, request: &Request) -> Response {
    let query = form(request.query());
    let get = |key: &str| query.get(key).cloned().unwrap_or_default();
    let scope = get("scope");
    state.log(format!(
        "authorize client={} scope={scope} resource={}",
        get("client_id"),
        get("resource")
    ));
    let known = state
        .clients
        .lock()
        .unwrap()
        .get(&get("client_id"))
        .cloned();
    let Some(uris) = known else {
        return oauth_error("400 Bad Request", "invalid_client", "unknown client_id");
    };
    let redirect = get("redirect_uri");
    if !uris.contains(&redirect) {
        return oauth_error(
            "400 Bad Request",
            "invalid_request",
            "unregistered redirect_uri",
        );
    }
    let mut params = format!("state={}", encode(&get("state")));
    if get("code_challenge_method") != "S256" || get("code_challenge").is_empty() {
        params.push_str("&error=invalid_request&error_description=PKCE%20S256%20required");
    } else if get("resource") != format!("{}/mcp", state.base) {
        params.push_str("&error=invalid_target");
    } else {
        let code = state.fresh("code");
        let grant = Grant {
            challenge: get("code_challenge"),
            redirect_uri: redirect.clone(),
            scopes: scope.split_whitespace().map(str::to_owned).collect(),
        };
        state.codes.lock().unwrap().insert(code.clone(), grant);
        params.push_str(&format!("&code={code}"));
    }
    let location = format!("{redirect}?{params}");
    Response::empty("302 Found", vec![("Location".into(), location)])
}

fn token(state: &State, request: &Request) -> Response {
    let body = form(std::str::from_utf8(&request.body).unwrap_or_default());
    let get = |key: &str| body.get(key).cloned().unwrap_or_default();
    let grant = get("grant_type");
    state.log(format!("token grant={grant} resource={}", get("resource")));
    match grant.as_str() {
        "authorization_code" => {
            let Some(grant) = state.codes.lock().unwrap().remove(&get("code")) else {
                return oauth_error("400 Bad Request", "invalid_grant", "unknown code");
            };
            let verifier = get("code_verifier");
            let computed = base64url(&Sha256::digest(verifier.as_bytes()));
            if computed != grant.challenge {
                return oauth_error("400 Bad Request", "invalid_grant", "PKCE verifier mismatch");
            }
            if get("redirect_uri") != grant.redirect_uri {
                return oauth_error("400 Bad Request", "invalid_grant", "redirect_uri mismatch");
            }
            reply("200 OK", &state.issue(grant.scopes))
        }
        "refresh_token" if state.mode == "no-refresh" => {
            oauth_error("400 Bad Request", "invalid_grant", "refresh token revoked")
        }
        "refresh_token" => {
            let presented = get("refresh_token");
            let Some(scopes) = state.refresh.lock().unwrap().remove(&presented) else {
                if state.spent.lock().unwrap().contains(&presented) {
                    state.replays.fetch_add(1, Ordering::SeqCst);
                    state.log("replay".into());
                }
                return oauth_error("400 Bad Request", "invalid_grant", "unknown refresh token");
            };
            state.spent.lock().unwrap().push(presented);
            state.refreshes.fetch_add(1, Ordering::SeqCst);
            reply("200 OK", &state.issue(scopes))
        }
        "client_credentials" => client_credentials(state, request, &body),
        "urn:ietf:params:oauth:grant-type:device_code" => device_poll(state, &get("device_code")),
        _ => oauth_error("400 Bad Request", "unsupported_grant_type", &grant),
    }
}

/// The machine client `machine`, authenticated by HTTP Basic or in the form.
fn client_credentials(
    state: &State,
    request: &Request,
    body: &HashMap<String, String>,
) -> Response {
    let basic = (request.header("authorization"))
        .and_then(|value| value.strip_prefix("Basic "))
        .map(str::to_owned);
    let form = body.get("client_secret").cloned();
    let (how, good) = match (basic, form) {
        // base64("machine:machine-secret")
        (Some(basic), None) => ("basic", basic == "bWFjaGluZTptYWNoaW5lLXNlY3JldA=="),
        (None, Some(secret)) => (
            "post",
            secret == "machine-secret"
                && body.get("client_id").map(String::as_str) == Some("machine"),
        ),
        _ => ("none", false),
    };
    state.log(format!("token grant=client_credentials auth={how}"));
    if !good {
        return oauth_error(
            "401 Unauthorized",
            "invalid_client",
            "bad client credentials",
        );
    }
    let scopes = (body.get("scope").map(String::as_str).unwrap_or_default())
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    reply("200 OK", &state.issue(scopes))
}

fn device_authorization(state: &State, request: &Request) -> Response {
    let body = form(std::str::from_utf8(&request.body).unwrap_or_default());
    let client = body.get("client_id").cloned().unwrap_or_default();
    if !state.clients.lock().unwrap().contains_key(&client) {
        return oauth_error("401 Unauthorized", "invalid_client", "unknown client_id");
    }
    let device_code = state.fresh("device");
    let user_code = format!("CODE-{}", state.next.fetch_add(1, Ordering::SeqCst));
    state.log(format!("device_authorization user_code={user_code}"));
    let scopes = (body.get("scope").map(String::as_str).unwrap_or_default())
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    state.devices.lock().unwrap().insert(
        device_code.clone(),
        Device {
            user_code: user_code.clone(),
            scopes,
            approval: Approval::Pending,
            interval: Duration::from_secs(1),
            last_poll: None,
            polls: 0,
        },
    );
    reply(
        "200 OK",
        &json!({
            "device_code": device_code,
            "user_code": user_code,
            "verification_uri": format!("{}/device", state.base),
            "verification_uri_complete": format!("{}/device?user_code={user_code}", state.base),
            "expires_in": 600,
            "interval": 1,
        }),
    )
}

/// The person's page: approves, denies or expires the code named.
fn device_page(state: &State, request: &Request) -> Response {
    let query = form(request.query());
    let code = query.get("user_code").cloned().unwrap_or_default();
    let approval = match query.get("action").map(String::as_str) {
        Some("approve") => Approval::Approved,
        Some("deny") => Approval::Denied,
        Some("expire") => Approval::Expired,
        _ => return reply("400 Bad Request", &json!({"error": "action?"})),
    };
    let mut devices = state.devices.lock().unwrap();
    let Some(device) = devices.values_mut().find(|d| d.user_code == code) else {
        return reply("404 Not Found", &json!({"error": "no such code"}));
    };
    device.approval = approval;
    reply("200 OK", &json!({"ok": true}))
}

fn device_poll(state: &State, device_code: &str) -> Response {
    let mut devices = state.devices.lock().unwrap();
    let Some(device) = devices.get_mut(device_code) else {
        return oauth_error("400 Bad Request", "invalid_grant", "unknown device_code");
    };
    let now = Instant::now();
    let early = device
        .last_poll
        .is_some_and(|last| now.duration_since(last) < device.interval);
    device.last_poll = Some(now);
    device.polls += 1;
    if early || (state.mode == "slow-down" && device.polls == 1) {
        if early {
            state.log("device poll too early".into());
        }
        state.log("device slow_down".into());
        device.interval += Duration::from_secs(5);
        return oauth_error("400 Bad Request", "slow_down", "poll less often");
    }
    match device.approval {
        Approval::Pending => oauth_error("400 Bad Request", "authorization_pending", "not yet"),
        Approval::Denied => oauth_error("400 Bad Request", "access_denied", "the person said no"),
        Approval::Expired => oauth_error("400 Bad Request", "expired_token", "too late"),
        Approval::Approved => {
            let scopes = device.scopes.clone();
            drop(devices);
            state.log("token grant=device_code".into());
            reply("200 OK", &state.issue(scopes))
        }
    }
}

fn mcp(state: &State, request: &Request) -> Response {
    let message: Value = serde_json::from_slice(&request.body).unwrap_or_default();
    let method = message["method"].as_str().unwrap_or("-").to_owned();
    let metadata = format!("{}/.well-known/oauth-protected-resource/mcp", state.base);
    let bearer = (request.header("authorization"))
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::to_owned);
    let scopes = (bearer.as_ref()).and_then(|token| {
        let tokens = state.tokens.lock().unwrap();
        let token = tokens.get(token)?;
        (token.expires > Instant::now()).then(|| token.scopes.clone())
    });
    let shown = match (&bearer, &scopes) {
        (None, _) => "none",
        (Some(_), None) => "invalid",
        (Some(_), Some(_)) => "bearer",
    };
    state.log(format!("mcp rpc={method} auth={shown}"));
    let Some(scopes) = scopes else {
        let challenge = format!(r#"Bearer resource_metadata="{metadata}", scope="read""#);
        return Response {
            status: "401 Unauthorized",
            headers: vec![("WWW-Authenticate".into(), challenge)],
            body: b"{\"error\":\"invalid_token\"}".to_vec(),
        };
    };
    if state.mode == "step-up" && method == "tools/call" && !scopes.iter().any(|s| s == "write") {
        let challenge = format!(
            r#"Bearer error="insufficient_scope", scope="read write", resource_metadata="{metadata}""#
        );
        return Response::empty(
            "403 Forbidden",
            vec![("WWW-Authenticate".into(), challenge)],
        );
    }
    let Some(id) = message.get("id").cloned() else {
        return Response::empty("202 Accepted", vec![]);
    };
    let result = match method.as_str() {
        "initialize" => json!({
            "protocolVersion": message["params"]["protocolVersion"].as_str().unwrap_or("2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "mcp-oauth-fixture", "version": "0"},
        }),
        "tools/list" => json!({"tools": [{
            "name": "whoami",
            "description": "The scopes of the caller's token",
            "inputSchema": {"type": "object"},
        }]}),
        "tools/call" => {
            json!({"content": [{"type": "text", "text": format!("scopes: {}", scopes.join(" "))}]})
        }
        "ping" => json!({}),
        _ => {
            let error = json!({"code": -32601, "message": format!("no method {method}")});
            return reply(
                "200 OK",
                &json!({"jsonrpc": "2.0", "id": id, "error": error}),
            );
        }
    };
    reply(
        "200 OK",
        &json!({"jsonrpc": "2.0", "id": id, "result": result}),
    )
}

/// `browse URL`: follows redirects like a browser that is already logged in.
fn browse(mut url: String) -> i32 {
    for _ in 0..10 {
        let Some(rest) = url.strip_prefix("http://") else {
            eprintln!("browse: only http URLs: {url}");
            return 2;
        };
        let (authority, target) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let Ok(mut stream) = TcpStream::connect(authority) else {
            eprintln!("browse: cannot connect to {authority}");
            return 2;
        };
        let request =
            format!("GET {target} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        let status = answer
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let location = (answer.lines())
            .take_while(|line| !line.is_empty())
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("location")
                    .then(|| value.trim().to_owned())
            });
        match (status.chars().next(), location) {
            (Some('3'), Some(next)) => url = next,
            (Some('2'), _) => return 0,
            _ => {
                eprintln!("browse: {url} answered {status}");
                return 1;
            }
        }
    }
    1
}

fn form(text: &str) -> HashMap<String, String> {
    http::form_pairs(text).into_iter().collect()
}

fn encode(text: &str) -> String {
    (text.bytes())
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}
