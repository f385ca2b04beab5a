//! `mcp-oauth-fixture MODE [--log FILE]`: an OAuth 2.1 authorization server and the MCP
//! server it protects, in one process on 127.0.0.1 (a free port, printed as `PORT <n>`), for
//! the end-to-end suites; with an identity provider beside them at `/idp` for `enterprise`.
//! The MCP endpoint is `/mcp` (Streamable HTTP, JSON answers); the authorization endpoint
//! approves at once and redirects, as the conformance suite's does. Plain std sockets, one
//! thread per connection, one exchange per connection ([`mcp_tests::http`]).
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
//! - `dpop`: DPoP (RFC 9449). The server metadata lists `ES256` in
//!   `dpop_signing_alg_values_supported`; the MCP endpoint's challenge is
//!   `DPoP algs="ES256", resource_metadata=...`. A token request with a `DPoP` proof gets a
//!   `token_type: DPoP` token (and refresh token) bound to the proof key's thumbprint
//!   (RFC 7638); one without gets a Bearer token, which the MCP endpoint also takes.
//! - `dpop-nonce`: as `dpop`, but the challenge is a plain `Bearer` one and the resource
//!   metadata says `dpop_bound_access_tokens_required` (that is what asks for DPoP); the
//!   token endpoint issues only DPoP tokens, and both ends demand nonces: a proof without one
//!   they handed out is answered `use_dpop_nonce` with a `DPoP-Nonce` (the token endpoint
//!   with a 400, the MCP endpoint with a 401), and every MCP answer hands out a new nonce.
//! - `workload`: the JWT bearer grant (RFC 7523) for workload identity (SEP-1933), below.
//! - `enterprise`: enterprise-managed authorization (SEP-990), with the identity provider,
//!   below.
//!
//! DPoP proofs, wherever they come, are checked as RFC 9449 §4.3 says: one `DPoP` header,
//! `typ` `dpop+jwt`, `alg` `ES256`, a public P-256 `jwk` the ES256 signature verifies
//! against, `htm` and `htu` those of the request, `iat` within a minute, a `jti` never seen
//! before; at the MCP endpoint also `ath` (the token's SHA-256), `content_digest` (the
//! body's, RFC 9530) and the key the token is bound to. A bad proof is refused
//! `invalid_dpop_proof`; a bound token sent as Bearer (in `dpop-nonce`, any Bearer token) is
//! refused (logged `auth=bearer-bound`); a bound refresh token is refreshed only with a proof
//! of its key (logged `refresh bound key proved`).
//!
//! The device authorization grant (RFC 8628): `POST /device_authorization` hands out a code
//! (poll interval 1 s) to a client whose registration names the device grant (others are
//! refused `unauthorized_client`, logged `device refused CLIENT`, as RFC 7591 §2 holds a
//! client to the grants it registered); `GET /device?user_code=CODE&action=approve|deny|expire`
//! is the person's page (the tests call it). A poll sooner than the interval is answered
//! `slow_down` and logged `device poll too early`.
//!
//! The client credentials grant: client `machine` with secret `machine-secret`, sent by HTTP
//! Basic or in the form (logged `token grant=client_credentials auth=basic|post`).
//!
//! Workload identity (`workload`): `GET /workload-jwt?sub=NAME&ttl=SECS[&refuse=CODE]`
//! answers a JWT as a platform would issue one to a workload (HS256 with the fixture's own
//! key, `aud` the authorization server's issuer, `exp` `ttl` seconds from now, negative for an
//! expired one). The token endpoint takes it as `assertion` of the JWT bearer grant (logged
//! `jwt-bearer workload sub=NAME client=none|ID`): refused `invalid_grant` when expired or
//! not ours, refused `CODE` when its `refuse` claim says so (`invalid_scope`,
//! `unauthorized_client`); else an hour's access token, with no refresh token.
//!
//! Enterprise (`enterprise`): the identity provider, issuer `/idp` (metadata at
//! `/idp/.well-known/openid-configuration`), its client `idp-client` with secret `idp-secret`
//! (HTTP Basic). `GET /idp/id-token?sub=NAME&ttl=SECS[&exchange=refuse|access_token]` answers
//! an ID token as if handed to a program. `/idp/authorize` and `/idp/token` log a person in
//! (OpenID Connect, PKCE S256, scope `openid`, any loopback redirect URI), answering an
//! `id_token` (an hour) and a refresh token, which refreshes it (logged
//! `idp authorize ...`, `idp token grant=authorization_code|refresh_token`). The token
//! exchange (RFC 8693) at `/idp/token` (logged `idp token grant=token-exchange` with its
//! parameters) trades a good ID token for an ID-JAG naming the audience and resource asked
//! for: refused `invalid_grant` when the ID token expired or its `exchange` claim is `refuse`;
//! with `exchange=access_token` the answer's `issued_token_type` is an access token's. The
//! authorization server takes an ID-JAG as the JWT bearer grant from its client `ent-client`
//! with secret `ent-secret` (HTTP Basic; others are refused `invalid_client`), logged
//! `jwt-bearer id-jag sub=NAME client=ent-client|bad`.
//!
//! `--log FILE` appends one line per OAuth step or MCP request, e.g. `authorize scope=read`,
//! `token grant=refresh_token resource=URL dpop=ok`, `token refused invalid_grant: ...`,
//! `register client-1 grants=...`, `mcp rpc=tools/list auth=bearer|dpop|none|invalid`.
//!
//! Refresh tokens rotate: each is good once. `GET /stats` answers the counts so far,
//! `{"refreshes": n, "replays": m}`: refresh grants that succeeded, and spent refresh tokens
//! presented again (a client that replays a rotated token; providers revoke the login for it).
//! `GET /stats/tokens` answers `{"token_requests": n, "idp_token_requests": m}`: every
//! request to the authorization server's token endpoint and to the identity provider's.
//!
//! `mcp-oauth-fixture browse URL`: a stand-in for a browser (for `$BROWSER`): GETs `URL`,
//! follows redirects, exits 0 once a page answers 2xx.
//!
//! What lives here (the authorization server's core, the device grant, the MCP endpoint and
//! `browse` are in this file):
//! - `dpop.rs`: DPoP proofs checked, keys' thumbprints, tokens bound to them, nonces.
//! - `workload.rs`: the platform's workload JWT and the JWT bearer grant that takes it.
//! - `idp.rs`: the identity provider (metadata, ID tokens, its login, the token exchange)
//!   and the ID-JAG grant at the authorization server.
//! - `codec.rs`: base64 and base64url, HS256 JWTs, URL and form encoding, scope lists,
//!   the clock.

// A poisoned lock here means the fixture itself crashed; panicking further is the right answer.
#![allow(clippy::unwrap_used)]

mod codec;
mod dpop;
mod idp;
mod workload;

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mcp_tests::http::{self, Request, Response};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use codec::{base64, base64url, encode, form, split};

const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

struct Grant {
    challenge: String,
    redirect_uri: String,
    scopes: Vec<String>,
}

struct Token {
    scopes: Vec<String>,
    expires: Instant,
    /// The thumbprint of the DPoP key the token is bound to, if it is.
    binding: Option<String>,
}

/// A refresh token's grant: its scopes and the DPoP key it is bound to, if any.
struct Refresh {
    scopes: Vec<String>,
    binding: Option<String>,
}

/// A dynamically registered client.
struct Registration {
    redirect_uris: Vec<String>,
    grant_types: Vec<String>,
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
    clients: Mutex<HashMap<String, Registration>>,
    codes: Mutex<HashMap<String, Grant>>,
    tokens: Mutex<HashMap<String, Token>>,
    refresh: Mutex<HashMap<String, Refresh>>,
    /// Device codes by `device_code`.
    devices: Mutex<HashMap<String, Device>>,
    /// Refresh tokens already used once.
    spent: Mutex<Vec<String>>,
    /// The identity provider's login codes, and its refresh tokens (with the person's name).
    idp_codes: Mutex<HashMap<String, Grant>>,
    idp_refresh: Mutex<HashMap<String, String>>,
    /// Every DPoP proof's `jti` so far: a proof is good once.
    jtis: Mutex<HashSet<String>>,
    /// The DPoP nonces handed out (`as-nonce-N` by the token endpoint, `rs-nonce-N` by the
    /// MCP endpoint).
    nonces: Mutex<Vec<String>>,
    refreshes: AtomicU64,
    replays: AtomicU64,
    token_requests: AtomicU64,
    idp_token_requests: AtomicU64,
    next: AtomicU64,
    log: Option<Mutex<std::fs::File>>,
}

impl State {
    fn new(mode: String, base: String, log: Option<Mutex<std::fs::File>>) -> Self {
        State {
            mode,
            base,
            clients: Mutex::default(),
            codes: Mutex::default(),
            tokens: Mutex::default(),
            refresh: Mutex::default(),
            devices: Mutex::default(),
            spent: Mutex::default(),
            idp_codes: Mutex::default(),
            idp_refresh: Mutex::default(),
            jtis: Mutex::default(),
            nonces: Mutex::default(),
            refreshes: AtomicU64::new(0),
            replays: AtomicU64::new(0),
            token_requests: AtomicU64::new(0),
            idp_token_requests: AtomicU64::new(0),
            next: AtomicU64::new(1),
            log,
        }
    }

    fn log(&self, line: String) {
        if let Some(file) = &self.log {
            writeln!(file.lock().unwrap(), "{line}").unwrap();
        }
    }

    fn fresh(&self, what: &str) -> String {
        format!("{what}-{}", self.next.fetch_add(1, Ordering::SeqCst))
    }

    fn idp_issuer(&self) -> String {
        format!("{}/idp", self.base)
    }

    /// A new access token for `scopes` (bound to the DPoP key `binding` when there is one,
    /// with a refresh token when `refreshable`), as the token endpoint's answer.
    fn issue(&self, scopes: Vec<String>, binding: Option<String>, refreshable: bool) -> Value {
        let access = self.fresh("access");
        let lifetime = 3600;
        let mut answer = json!({
            "access_token": access,
            "token_type": if binding.is_some() { "DPoP" } else { "Bearer" },
            "expires_in": lifetime,
            "scope": scopes.join(" "),
        });
        if refreshable {
            let refresh = self.fresh("refresh");
            answer["refresh_token"] = json!(refresh);
            let grant = Refresh {
                scopes: scopes.clone(),
                binding: binding.clone(),
            };
            self.refresh.lock().unwrap().insert(refresh, grant);
        }
        let expires = Instant::now() + Duration::from_secs(lifetime);
        let token = Token {
            scopes,
            expires,
            binding,
        };
        self.tokens.lock().unwrap().insert(access, token);
        answer
    }

    fn dpop_mode(&self) -> bool {
        matches!(self.mode.as_str(), "dpop" | "dpop-nonce")
    }

    fn nonce_mode(&self) -> bool {
        self.mode == "dpop-nonce"
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

/// A token endpoint's refusal, logged `token refused ERROR: DESCRIPTION` (prefixed `idp` at
/// the identity provider).
fn refuse(
    state: &State,
    at: &str,
    status: &'static str,
    error: &str,
    description: &str,
) -> Response {
    state.log(format!("{at}token refused {error}: {description}"));
    oauth_error(status, error, description)
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
    let state = State::new(mode, format!("http://127.0.0.1:{port}"), log);
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
            let mut metadata = json!({
                "resource": format!("{base}/mcp"),
                "authorization_servers": [base],
                "scopes_supported": ["read", "write"],
            });
            if state.dpop_mode() {
                metadata["dpop_signing_alg_values_supported"] = json!(["ES256"]);
            }
            if state.nonce_mode() {
                metadata["dpop_bound_access_tokens_required"] = json!(true);
            }
            reply("200 OK", &metadata)
        }
        ("GET", "/.well-known/oauth-authorization-server") => server_metadata(state),
        ("GET", "/stats") => reply(
            "200 OK",
            &json!({
                "refreshes": state.refreshes.load(Ordering::SeqCst),
                "replays": state.replays.load(Ordering::SeqCst),
            }),
        ),
        ("GET", "/stats/tokens") => reply(
            "200 OK",
            &json!({
                "token_requests": state.token_requests.load(Ordering::SeqCst),
                "idp_token_requests": state.idp_token_requests.load(Ordering::SeqCst),
            }),
        ),
        ("GET", "/workload-jwt") => workload::jwt(state, request),
        ("POST", "/register") => register(state, request),
        ("POST", "/device_authorization") => device_authorization(state, request),
        ("GET", "/device") => device_page(state, request),
        ("GET", "/authorize") => authorize(state, request),
        ("POST", "/token") => token(state, request),
        ("POST", "/mcp") => mcp(state, request),
        ("GET", "/mcp") => Response::empty("405 Method Not Allowed", vec![]),
        ("GET", "/idp/.well-known/openid-configuration") => idp::metadata(state),
        ("GET", "/idp/id-token") => {
            let query = form(request.query());
            let get = |key: &str| query.get(key).cloned().unwrap_or_default();
            let ttl = get("ttl").parse().unwrap_or(3600);
            let token = idp::id_token(state, &get("sub"), ttl, &get("exchange"));
            Response::new("200 OK", "text/plain", token)
        }
        ("GET", "/idp/authorize") => idp::authorize(state, request),
        ("POST", "/idp/token") => idp::token(state, request),
        _ => reply("404 Not Found", &json!({"error": "not_found"})),
    }
}

fn server_metadata(state: &State) -> Response {
    let base = &state.base;
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
            DEVICE_GRANT,
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
            metadata["token_endpoint_auth_methods_supported"] = json!(["client_secret_post"]);
        }
        "no-device" => {
            metadata
                .as_object_mut()
                .unwrap()
                .remove("device_authorization_endpoint");
        }
        "dpop" | "dpop-nonce" => {
            metadata["dpop_signing_alg_values_supported"] = json!(["ES256"]);
        }
        "workload" | "enterprise" => {
            metadata["grant_types_supported"] = json!([JWT_BEARER]);
        }
        _ => {}
    }
    reply("200 OK", &metadata)
}

fn register(state: &State, request: &Request) -> Response {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
    let strings = |key: &str| -> Vec<String> {
        (body[key].as_array().into_iter().flatten())
            .filter_map(|value| value.as_str().map(str::to_owned))
            .collect()
    };
    let uris = strings("redirect_uris");
    if uris.is_empty() {
        return oauth_error(
            "400 Bad Request",
            "invalid_redirect_uri",
            "no redirect_uris",
        );
    }
    let mut grants = strings("grant_types");
    // RFC 7591 §2: a registration that names no grant is for the authorization code only.
    if grants.is_empty() {
        grants.push("authorization_code".into());
    }
    let id = state.fresh("client");
    state.log(format!("register {id} grants={}", grants.join(",")));
    let registration = Registration {
        redirect_uris: uris.clone(),
        grant_types: grants.clone(),
    };
    state
        .clients
        .lock()
        .unwrap()
        .insert(id.clone(), registration);
    reply(
        "201 Created",
        &json!({"client_id": id, "redirect_uris": uris, "grant_types": grants}),
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
    let known = (state.clients.lock().unwrap().get(&get("client_id")))
        .map(|registration| registration.redirect_uris.clone());
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
    state.token_requests.fetch_add(1, Ordering::SeqCst);
    let body = form(std::str::from_utf8(&request.body).unwrap_or_default());
    let get = |key: &str| body.get(key).cloned().unwrap_or_default();
    let grant = get("grant_type");
    let line = format!("token grant={grant} resource={}", get("resource"));
    let proof = match dpop::token_proof(state, request) {
        Ok(proof) => proof,
        Err((shown, refusal)) => {
            state.log(format!("{line} dpop={shown}"));
            return refusal;
        }
    };
    let shown = if proof.is_some() { " dpop=ok" } else { "" };
    state.log(format!("{line}{shown}"));
    let binding = proof.map(|proof| proof.jkt);
    let bad = "400 Bad Request";
    match grant.as_str() {
        "authorization_code" => {
            let Some(grant) = state.codes.lock().unwrap().remove(&get("code")) else {
                return refuse(state, "", bad, "invalid_grant", "unknown code");
            };
            let verifier = get("code_verifier");
            let computed = base64url(&Sha256::digest(verifier.as_bytes()));
            if computed != grant.challenge {
                return refuse(state, "", bad, "invalid_grant", "PKCE verifier mismatch");
            }
            if get("redirect_uri") != grant.redirect_uri {
                return refuse(state, "", bad, "invalid_grant", "redirect_uri mismatch");
            }
            reply("200 OK", &state.issue(grant.scopes, binding, true))
        }
        "refresh_token" if state.mode == "no-refresh" => {
            refuse(state, "", bad, "invalid_grant", "refresh token revoked")
        }
        "refresh_token" => refresh(state, &get("refresh_token"), binding),
        "client_credentials" => client_credentials(state, request, &body, binding),
        DEVICE_GRANT => device_poll(state, &get("device_code"), binding),
        JWT_BEARER if state.mode == "workload" => workload::grant(state, request, &body, binding),
        JWT_BEARER if state.mode == "enterprise" => {
            idp::id_jag_grant(state, request, &body, binding)
        }
        _ => refuse(state, "", bad, "unsupported_grant_type", &grant),
    }
}

/// A refresh grant: a rotated refresh token is good once; one bound to a DPoP key only with
/// a proof of that key (RFC 9449 §5).
fn refresh(state: &State, presented: &str, binding: Option<String>) -> Response {
    let bad = "400 Bad Request";
    let Some(grant) = state.refresh.lock().unwrap().remove(presented) else {
        if state
            .spent
            .lock()
            .unwrap()
            .iter()
            .any(|spent| spent == presented)
        {
            state.replays.fetch_add(1, Ordering::SeqCst);
            state.log("replay".into());
        }
        return refuse(state, "", bad, "invalid_grant", "unknown refresh token");
    };
    state.spent.lock().unwrap().push(presented.to_owned());
    if let Some(bound) = &grant.binding {
        let why = match &binding {
            None => Some("the refresh token is DPoP-bound: a proof of its key is needed"),
            Some(key) if key != bound => Some("the proof is of another key than the token's"),
            Some(_) => None,
        };
        if let Some(why) = why {
            return refuse(state, "", bad, "invalid_grant", why);
        }
        state.log("refresh bound key proved".into());
    }
    state.refreshes.fetch_add(1, Ordering::SeqCst);
    reply("200 OK", &state.issue(grant.scopes, binding, true))
}

/// The machine client `machine`, authenticated by HTTP Basic or in the form.
fn client_credentials(
    state: &State,
    request: &Request,
    body: &HashMap<String, String>,
    binding: Option<String>,
) -> Response {
    let basic = (request.header("authorization"))
        .and_then(|value| value.strip_prefix("Basic "))
        .map(str::to_owned);
    let form = body.get("client_secret").cloned();
    let (how, good) = match (basic, form) {
        (Some(basic), None) => ("basic", basic == base64(b"machine:machine-secret")),
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
    let scopes = split(body.get("scope"));
    reply("200 OK", &state.issue(scopes, binding, true))
}

fn device_authorization(state: &State, request: &Request) -> Response {
    let body = form(std::str::from_utf8(&request.body).unwrap_or_default());
    let client = body.get("client_id").cloned().unwrap_or_default();
    let registered = (state.clients.lock().unwrap().get(&client))
        .map(|registration| registration.grant_types.iter().any(|g| g == DEVICE_GRANT));
    match registered {
        None => return oauth_error("401 Unauthorized", "invalid_client", "unknown client_id"),
        Some(false) => {
            state.log(format!("device refused {client}: unauthorized_client"));
            return oauth_error(
                "400 Bad Request",
                "unauthorized_client",
                "the client did not register the device grant",
            );
        }
        Some(true) => {}
    }
    let device_code = state.fresh("device");
    let user_code = format!("CODE-{}", state.next.fetch_add(1, Ordering::SeqCst));
    state.log(format!("device_authorization user_code={user_code}"));
    state.devices.lock().unwrap().insert(
        device_code.clone(),
        Device {
            user_code: user_code.clone(),
            scopes: split(body.get("scope")),
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

fn device_poll(state: &State, device_code: &str, binding: Option<String>) -> Response {
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
            reply("200 OK", &state.issue(scopes, binding, true))
        }
    }
}

/// The MCP endpoint's challenge, with `error` when there is one to name.
fn challenge(state: &State, error: Option<&str>) -> String {
    let metadata = format!("{}/.well-known/oauth-protected-resource/mcp", state.base);
    let error = error
        .map(|e| format!(r#"error="{e}", "#))
        .unwrap_or_default();
    match state.mode.as_str() {
        "dpop" => {
            format!(r#"DPoP algs="ES256", {error}resource_metadata="{metadata}", scope="read""#)
        }
        _ => format!(r#"Bearer {error}resource_metadata="{metadata}", scope="read""#),
    }
}

fn unauthorized(www_authenticate: String, extra: Vec<(String, String)>) -> Response {
    let mut headers = vec![("WWW-Authenticate".into(), www_authenticate)];
    headers.extend(extra);
    Response {
        status: "401 Unauthorized",
        headers,
        body: b"{\"error\":\"invalid_token\"}".to_vec(),
    }
}

/// The scopes of the request's token, with how it was presented for the log (`bearer`,
/// `dpop`, with the nonce its proof carried in `dpop-nonce`); or how it failed (`none`,
/// `invalid`, `bearer-bound`, `dpop-rejected (why)`, `dpop-no-nonce`) and the 401 to answer.
fn authenticate(
    state: &State,
    request: &Request,
) -> Result<(Vec<String>, String), (String, Response)> {
    let authorization = request.header("authorization").unwrap_or_default();
    let (scheme, token) = authorization.split_once(' ').unwrap_or((authorization, ""));
    let scheme = scheme.to_ascii_lowercase();
    if token.is_empty() || !matches!(scheme.as_str(), "bearer" | "dpop") {
        return Err(("none".into(), unauthorized(challenge(state, None), vec![])));
    }
    let known = (state.tokens.lock().unwrap().get(token))
        .filter(|known| known.expires > Instant::now())
        .map(|known| (known.scopes.clone(), known.binding.clone()));
    let Some((scopes, binding)) = known else {
        return Err((
            "invalid".into(),
            unauthorized(challenge(state, None), vec![]),
        ));
    };
    let invalid_token = || unauthorized(challenge(state, Some("invalid_token")), vec![]);
    match (scheme.as_str(), binding) {
        ("bearer", None) if !state.nonce_mode() => Ok((scopes, "bearer".into())),
        ("bearer", _) => Err(("bearer-bound".into(), invalid_token())),
        (_, None) => Err(("dpop-unbound".into(), invalid_token())),
        (_, Some(bound)) => {
            dpop::bound_proof(state, request, token, &bound).map(|shown| (scopes, shown))
        }
    }
}

fn mcp(state: &State, request: &Request) -> Response {
    let message: Value = serde_json::from_slice(&request.body).unwrap_or_default();
    let method = message["method"].as_str().unwrap_or("-").to_owned();
    let (scopes, shown) = match authenticate(state, request) {
        Ok(authenticated) => authenticated,
        Err((shown, refusal)) => {
            state.log(format!("mcp rpc={method} auth={shown}"));
            return refusal;
        }
    };
    state.log(format!("mcp rpc={method} auth={shown}"));
    let mut response = answer(state, &message, &method, &scopes);
    if state.nonce_mode() {
        // A new nonce on every answer: the client must keep the latest it was given.
        (response.headers).push(("DPoP-Nonce".into(), state.new_nonce("rs")));
    }
    response
}

/// The MCP answer to `message` for a caller whose token has `scopes`.
fn answer(state: &State, message: &Value, method: &str, scopes: &[String]) -> Response {
    if state.mode == "step-up" && method == "tools/call" && !scopes.iter().any(|s| s == "write") {
        let metadata = format!("{}/.well-known/oauth-protected-resource/mcp", state.base);
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
    let result = match method {
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
