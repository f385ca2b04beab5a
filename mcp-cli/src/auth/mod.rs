//! OAuth 2.1 for remote servers, as the MCP authorization spec (2025-11-25) describes it.
//!
//! [`OAuth`] is the [`mcp_smol::Authorizer`] of one remote server: it supplies the stored
//! token, refreshes it when it expires, and on a `401` (or a `403` asking for more scope) runs
//! discovery, client registration and the authorization code grant with PKCE, if its
//! [`Login`] mode allows a login at all. Tokens live in the OS keychain or in
//! `$XDG_STATE_HOME/mcp-cli/auth/` ([`TokenStore`]); a refresh happens under a lock file there,
//! so that concurrent processes refresh once and never replay a rotated refresh token.
//!
//! The steps, one module each: `discovery` (challenge, resource and server metadata),
//! `register` (who we are to the server), `flow` (PKCE, the authorization URL, the code
//! exchange, refresh), `person` with `loopback`, `browser` and `device` (the person's side of a
//! login), `machine` (clients without one) with `jwt` (its signed assertions), `enterprise`
//! (a company's identity provider vouching for the person), `dpop` (tokens bound to a key),
//! `store` and `keychain` (where tokens are kept).
//!
//! What lives here:
//!
//! - `mod.rs`: `Settings`, `Login`, the `OAuth` authorizer a remote server's transport asks
//! - `discovery.rs`: from a 401 to an authorization server and its metadata
//! - `register.rs`: who we are to it: a configured client, a metadata document, or registration
//! - `flow.rs`: the authorization code grant with PKCE, and refreshing tokens
//! - `person.rs`: the person's side of a login: browser, pasted URL, what is shown
//! - `browser.rs`: opening the system browser
//! - `loopback.rs`: the loopback redirect listener on 127.0.0.1
//! - `device.rs`: the device authorization grant (RFC 8628)
//! - `machine.rs`: machine clients: `client_credentials`, secrets or signed JWTs, and the
//!   workload identity grant (a platform's JWT, RFC 7523)
//! - `enterprise.rs`: enterprise-managed authorization: the ID token, the token exchange at
//!   the identity provider, the identity assertion grant
//! - `dpop.rs`: DPoP (RFC 9449): our key, its proofs, the servers' nonces
//! - `jwt.rs`: signed JWTs (client assertions, DPoP proofs): ES256 and RS256 with ring
//! - `store.rs`: tokens and registrations: the keychain or a private file
//! - `keychain.rs`: the OS keychain through the `keyring` crate (the `keychain` feature)
//! - `http.rs`: the HTTP exchanges OAuth makes, behind a trait the tests answer
//! - `urls.rs`: the URL rules OAuth adds: absolute http(s), resource identifiers, Base64
//! - `tests.rs`: the whole flow against canned servers

pub(crate) mod browser;
mod device;
mod discovery;
mod dpop;
mod enterprise;
mod flow;
pub(crate) mod http;
mod jwt;
pub(crate) mod keychain;
mod loopback;
mod machine;
mod pending;
mod person;
mod register;
mod store;
mod urls;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mcp_smol::{Authorizer, Challenge, Outbound};

use self::discovery::{Bearer, Discovered};
use self::flow::Attempt;
use self::http::{BoxFuture, Http, Network, Request, printable};
use self::store::{Place, Record, Secret};

pub use self::pending::{Started, finish_login, start_login};
pub use self::store::auth_dir;
pub use crate::config::oauth::{
    Grant, IdentityProvider, Jwt, PrivateKey, Secret as ConfiguredSecret, SigningAlg, TokenStore,
};

/// Whether, and how, a login may start when a server asks for one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Login {
    /// Never: without a usable token the server stays unauthorized (listed `needs-auth`).
    /// Refreshing a stored token still happens.
    #[default]
    Never,
    /// Open the browser (and show the URL through [`Settings::notice`]), then wait on the
    /// loopback redirect for up to [`Settings::login_timeout`].
    Browser,
    /// `mcp-cli auth --no-browser`: show the authorization URL and read the redirect URL the
    /// person pastes on stdin.
    Pasted,
    /// `mcp-cli auth --device`: the device authorization grant (RFC 8628).
    Device,
    /// Unattended (`--auth-follow`, `MCP_CLI_AUTH_FOLLOW=1`): GET the authorization URL
    /// ourselves and take the code from its redirect. Only for servers that approve at once
    /// (test and conformance servers); a login page is an error.
    Follow,
}

/// What one server's OAuth needs to know beyond its URL.
#[derive(Clone)]
pub struct Settings {
    /// A client id registered by hand (`oauth_client_id`).
    pub client_id: Option<String>,
    /// Its secret, if it has one (read from the variable `oauth_client_secret_env` names).
    pub client_secret: Option<String>,
    /// An https URL serving our client ID metadata document (`oauth_client_metadata_url`),
    /// used when the server accepts those.
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for when the server's challenge names none (`oauth_scopes`).
    pub scopes: Vec<String>,
    /// How tokens are obtained (`oauth_grant`).
    pub grant: Grant,
    /// A private key to authenticate the client with instead of a secret
    /// (`oauth_private_key_file`, `oauth_signing_alg`).
    pub private_key: Option<PrivateKey>,
    /// The workload's JWT for [`Grant::JwtBearer`] (`oauth_assertion_file`,
    /// `oauth_assertion_env`).
    pub assertion: Option<Jwt>,
    /// The company's identity provider for [`Grant::Enterprise`] (`oauth_idp_*`).
    pub idp: Option<IdentityProvider>,
    /// DPoP-bound tokens (`oauth_dpop`): always, never, or (`None`) when the server's
    /// challenge or metadata asks for them and its authorization server offers ES256 proofs.
    pub dpop: Option<bool>,
    /// Whether and how a login may happen when no stored token serves: the library's default
    /// is [`Login::Never`]; the command line picks one from its flags.
    pub login: Login,
    /// `--stored-auth-only`: no login at all, not even one asked for with `mcp-cli auth`
    /// (the command line's business; here it only makes [`login`](Self::login) `Never`).
    pub stored_only: bool,
    /// Where tokens are kept (`token_store`, `MCP_CLI_TOKEN_STORE`).
    pub token_store: TokenStore,
    /// The folder of the token files and refresh locks: [`auth_dir`].
    pub dir: PathBuf,
    /// Budget of each HTTP exchange with the servers.
    pub timeout: Duration,
    /// How long a browser login may take.
    pub login_timeout: Duration,
    /// `$BROWSER`, the opener to try first.
    pub browser: Option<String>,
    /// Shows the person what a browser login needs of them (the URL to open); `None` shows
    /// nothing, as the library prints nothing itself. The command line prints to stderr.
    pub notice: Option<LoginNotice>,
}

/// What a browser login tells the person at the keyboard, for the embedder to render.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoginPrompt {
    /// A browser is being opened on `url`; the login waits up to `wait` for it to come back.
    Opening {
        /// The configured name of the server being logged in to.
        server: String,
        /// The authorization URL given to the browser.
        url: String,
        /// How long the loopback listener waits for the redirect ([`Settings::login_timeout`]).
        wait: Duration,
    },
    /// No browser could be opened: the person must open `url` themselves.
    NoBrowser {
        /// The configured name of the server being logged in to.
        server: String,
        /// The authorization URL the person opens.
        url: String,
    },
    /// `--no-browser`: the person opens `url` anywhere and pastes the address the browser
    /// ends on (our redirect URI, which may not load there) on stdin.
    Paste {
        /// The configured name of the server being logged in to.
        server: String,
        /// The authorization URL the person opens.
        url: String,
    },
    /// `--device`: the person opens `verification_uri` on any device and enters `user_code`
    /// (or opens `verification_uri_complete`, which carries it) within `expires_in`.
    DeviceCode {
        /// The configured name of the server being logged in to.
        server: String,
        /// The short code the person types at `verification_uri`.
        user_code: String,
        /// The page where the code is entered, as the authorization server sent it.
        verification_uri: String,
        /// The same page with the code already filled in, when the server offers one.
        verification_uri_complete: Option<String>,
        /// How long the code stays valid; the login polls for the token until then.
        expires_in: Duration,
    },
}

/// Renders a [`LoginPrompt`].
pub type LoginNotice = Arc<dyn Fn(LoginPrompt) + Send + Sync>;

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret itself: Debug output ends up in logs.
        f.debug_struct("Settings")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<secret>"),
            )
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scopes", &self.scopes)
            .field("grant", &self.grant)
            .field("private_key", &self.private_key)
            .field("assertion", &self.assertion)
            .field("idp", &self.idp)
            .field("dpop", &self.dpop)
            .field("login", &self.login)
            .field("stored_only", &self.stored_only)
            .field("token_store", &self.token_store)
            .field("dir", &self.dir)
            .field("timeout", &self.timeout)
            .field("login_timeout", &self.login_timeout)
            .field("browser", &self.browser)
            .field("notice", &self.notice.is_some())
            .finish()
    }
}

impl Default for Settings {
    /// No login, no client registered by hand, tokens under the state folder
    /// (`$XDG_STATE_HOME`, `$HOME`): no `MCP_CLI_*` variable is read, so what an embedder sets
    /// in code is all there is.
    fn default() -> Self {
        Self::neutral(&|key| std::env::var(key).ok())
    }
}

impl Settings {
    /// [`from_env`](Self::from_env) blind to the `MCP_CLI_*` variables.
    fn neutral(env: &dyn Fn(&str) -> Option<String>) -> Self {
        Self::from_env(&|key: &str| (!key.starts_with("MCP_CLI_")).then(|| env(key)).flatten())
    }

    /// Defaults, with what the environment says: `MCP_CLI_AUTH_FOLLOW=1` for [`Login::Follow`],
    /// `MCP_CLI_OAUTH_CLIENT_ID`, `MCP_CLI_OAUTH_CLIENT_SECRET` and
    /// `MCP_CLI_OAUTH_CLIENT_METADATA_URL` for a server configured with none (ad hoc `--http`),
    /// `MCP_CLI_OAUTH_GRANT=client_credentials` with `MCP_CLI_OAUTH_PRIVATE_KEY_FILE` and
    /// `MCP_CLI_OAUTH_SIGNING_ALG` (`ES256`, the default, or `RS256`) for a machine client,
    /// `MCP_CLI_OAUTH_GRANT=jwt_bearer` with `MCP_CLI_OAUTH_ASSERTION_FILE` for a workload,
    /// `MCP_CLI_OAUTH_GRANT=enterprise` with `MCP_CLI_OAUTH_IDP_ISSUER`,
    /// `MCP_CLI_OAUTH_IDP_CLIENT_ID`, `MCP_CLI_OAUTH_IDP_CLIENT_SECRET` and
    /// `MCP_CLI_OAUTH_ID_TOKEN_FILE` for enterprise-managed authorization, `MCP_CLI_OAUTH_DPOP`
    /// (`1` or `0`), and `MCP_CLI_TOKEN_STORE` for every server whose config names no
    /// `token_store`. A value these do not know counts as unset.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Self {
        let var = |key: &str| env(key).filter(|value| !value.is_empty());
        let token_store = var("MCP_CLI_TOKEN_STORE").and_then(|text| text.parse().ok());
        let private_key = var("MCP_CLI_OAUTH_PRIVATE_KEY_FILE").map(|path| PrivateKey {
            path: path.into(),
            alg: (var("MCP_CLI_OAUTH_SIGNING_ALG").and_then(|alg| alg.parse().ok()))
                .unwrap_or(SigningAlg::Es256),
        });
        let grant = var("MCP_CLI_OAUTH_GRANT").and_then(|grant| grant.parse().ok());
        let idp = var("MCP_CLI_OAUTH_IDP_ISSUER").map(|issuer| IdentityProvider {
            issuer,
            client_id: var("MCP_CLI_OAUTH_IDP_CLIENT_ID"),
            client_secret: var("MCP_CLI_OAUTH_IDP_CLIENT_SECRET").map(ConfiguredSecret),
            id_token: var("MCP_CLI_OAUTH_ID_TOKEN_FILE").map(|path| Jwt::File(path.into())),
        });
        Self {
            client_id: var("MCP_CLI_OAUTH_CLIENT_ID"),
            client_secret: var("MCP_CLI_OAUTH_CLIENT_SECRET"),
            client_metadata_url: var("MCP_CLI_OAUTH_CLIENT_METADATA_URL"),
            scopes: Vec::new(),
            grant: grant.unwrap_or_default(),
            private_key,
            assertion: var("MCP_CLI_OAUTH_ASSERTION_FILE").map(|path| Jwt::File(path.into())),
            idp,
            dpop: var("MCP_CLI_OAUTH_DPOP").and_then(|text| switch(&text)),
            stored_only: false,
            login: if follow_requested(env) {
                Login::Follow
            } else {
                Login::Never
            },
            token_store: token_store.unwrap_or_default(),
            dir: auth_dir(env),
            timeout: Duration::from_secs(30),
            login_timeout: Duration::from_secs(300),
            browser: var("BROWSER"),
            notice: None,
        }
    }

    fn identity(&self) -> register::Identity {
        register::Identity {
            client_id: self.client_id.clone(),
            client_secret: self.client_secret.clone(),
            metadata_url: self.client_metadata_url.clone(),
            private_key: self.private_key.clone(),
        }
    }
}

/// The OAuth variables [`Settings::from_env`] reads that hold a value it does not know (it
/// reads those as unset): the error to show before anything runs.
pub fn check_env(env: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
    let var = |key: &str| env(key).filter(|value| !value.is_empty());
    let named = |key: &str, error: String| format!("{key}: {error}");
    if let Some(text) = var("MCP_CLI_TOKEN_STORE") {
        text.parse::<TokenStore>()
            .map_err(|e| named("MCP_CLI_TOKEN_STORE", e))?;
    }
    if let Some(text) = var("MCP_CLI_OAUTH_GRANT") {
        let grant = (text.parse::<Grant>()).map_err(|e| named("MCP_CLI_OAUTH_GRANT", e))?;
        let needs = match grant {
            Grant::JwtBearer => Some("MCP_CLI_OAUTH_ASSERTION_FILE"),
            Grant::Enterprise => Some("MCP_CLI_OAUTH_IDP_ISSUER"),
            _ => None,
        };
        if let Some(needed) = needs.filter(|needed| var(needed).is_none()) {
            return Err(format!("MCP_CLI_OAUTH_GRANT={text} needs {needed}"));
        }
    }
    if let Some(text) = var("MCP_CLI_OAUTH_DPOP")
        && switch(&text).is_none()
    {
        return Err(format!("MCP_CLI_OAUTH_DPOP is 1 or 0, not {text:?}"));
    }
    if let Some(text) = var("MCP_CLI_OAUTH_SIGNING_ALG") {
        text.parse::<SigningAlg>()
            .map_err(|e| named("MCP_CLI_OAUTH_SIGNING_ALG", e))?;
        if var("MCP_CLI_OAUTH_PRIVATE_KEY_FILE").is_none() {
            return Err(
                "MCP_CLI_OAUTH_SIGNING_ALG is set without MCP_CLI_OAUTH_PRIVATE_KEY_FILE".into(),
            );
        }
    }
    Ok(())
}

/// `1`/`true`/`yes` or `0`/`false`/`no`.
fn switch(text: &str) -> Option<bool> {
    match text.trim() {
        "1" | "true" | "yes" => Some(true),
        "0" | "false" | "no" => Some(false),
        _ => None,
    }
}

/// Whether `MCP_CLI_AUTH_FOLLOW` asks for unattended logins.
pub fn follow_requested(env: &dyn Fn(&str) -> Option<String>) -> bool {
    env("MCP_CLI_AUTH_FOLLOW").is_some_and(|v| matches!(v.trim(), "1" | "true" | "yes"))
}

/// Whether server `name` at `url` has a stored token (or a refresh token) to try.
pub fn has_token(settings: &Settings, name: &str, url: &str) -> bool {
    place(settings, name, url)
        .load()
        .is_some_and(|r| r.tokens.is_some())
}

/// Forgets server `name`'s tokens and client registration, from the keychain and the file
/// alike; whether there were any.
pub fn reset(settings: &Settings, name: &str, url: &str) -> Result<bool, String> {
    place(settings, name, url).remove()
}

/// Where server `name`'s login is kept, for messages: "the system keychain" or the folder.
pub fn kept_in(settings: &Settings, name: &str, url: &str) -> String {
    place(settings, name, url).describe()
}

fn place(settings: &Settings, name: &str, url: &str) -> Place {
    Place {
        dir: settings.dir.clone(),
        name: name.to_owned(),
        url: url.to_owned(),
        choice: settings.token_store,
    }
}

/// Logs in to server `name` at `url` now, whatever is stored (`mcp-cli auth`): asks the
/// server without a token to learn its challenge, then runs the whole flow and saves.
/// `settings.login` must be [`Login::Browser`] or [`Login::Follow`].
pub async fn login(name: &str, url: &str, settings: Settings) -> Result<(), String> {
    OAuth::new(name, url, settings).login_now().await
}

impl OAuth {
    /// [`login`] for this server.
    async fn login_now(&self) -> Result<(), String> {
        let bearer = self.ask_unauthorized().await?;
        let mut state = self.state.lock().await;
        let scopes = bearer.as_ref().map(Bearer::scopes).unwrap_or_default();
        self.log_in(&mut state, bearer.as_ref(), scopes).await
    }

    /// Asks the server without a token, to learn its challenge (`None` from a server that
    /// guards only its tools but publishes protected-resource metadata); an error for one
    /// that needs no login.
    async fn ask_unauthorized(&self) -> Result<Option<Bearer>, String> {
        let (oauth, url, name) = (self, self.url.as_str(), self.name.as_str());
        let probe = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcp-cli","version":"0"}}}"#;
        let request = Request::post(url, "application/json", probe.into())
            .header("Accept", "application/json, text/event-stream".into());
        let response = oauth.http.send(request).await?;
        Ok(match response.status {
            401 | 403 => response.header("www-authenticate").and_then(Bearer::parse),
            // Some servers let `initialize` through and guard only their tools: published
            // protected-resource metadata says they still take logins.
            status if (200..300).contains(&status) => {
                let server = urls::parse(url)?;
                if discovery::resource_metadata(&*oauth.http, &server, None)
                    .await?
                    .is_none()
                {
                    return Err(format!(
                        "{url} answered without asking for authorization and publishes no \
                     protected-resource metadata: {name} needs no login"
                    ));
                }
                None
            }
            _ => None,
        })
    }
}

/// The [`Authorizer`] of one remote server.
#[derive(Debug)]
pub struct OAuth {
    name: String,
    url: String,
    settings: Settings,
    http: Box<dyn Http>,
    place: Place,
    state: async_lock::Mutex<State>,
    /// The DPoP key the tokens are bound to, if they are: outside [`State`], as the nonces
    /// the servers send arrive where no lock may be awaited.
    dpop: std::sync::Mutex<Option<Arc<dpop::Prover>>>,
    /// Bumped on every new token, so a challenge that raced a login can tell it is stale.
    generation: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    record: Option<Record>,
    /// When logins started, for the retry limit.
    logins: Vec<Instant>,
    /// The generation a refresh produced, so a token just refreshed is not refreshed again
    /// when the server still refuses it.
    refreshed: Option<u64>,
    /// The scopes of the last step-up, so the same demand is not chased twice.
    last_step_up: Option<Vec<String>>,
    /// A JWT grant the server refused (the JWT's digest) and why: the same JWT is never sent
    /// again, as a workload's errors are surfaced and not retried (SEP-1933).
    refused: Option<(String, String)>,
}

/// At most this many logins in [`LOGIN_WINDOW`]: a server that refuses every token must not
/// send us round the loop forever.
const MAX_LOGINS: usize = 3;
const LOGIN_WINDOW: Duration = Duration::from_secs(600);

impl OAuth {
    /// The authorizer of server `name` at `url` (the URL as configured: tokens stored for
    /// another URL are not used).
    pub fn new(name: &str, url: &str, settings: Settings) -> Arc<Self> {
        let http = Box::new(Network {
            timeout: settings.timeout,
        });
        Self::with_http(name, url, settings, http)
    }

    fn with_http(name: &str, url: &str, settings: Settings, http: Box<dyn Http>) -> Arc<Self> {
        let place = place(&settings, name, url);
        let mut oauth = Self {
            name: name.to_owned(),
            url: url.to_owned(),
            settings,
            http,
            place,
            state: async_lock::Mutex::new(State::default()),
            dpop: std::sync::Mutex::new(None),
            generation: AtomicU64::new(0),
        };
        let mut record = oauth.place.load();
        if let Some(record) = record.as_mut() {
            oauth.adopt(record);
        }
        oauth.state.get_mut().record = record;
        Arc::new(oauth)
    }

    /// The DPoP key of the tokens, when they are bound to one.
    fn prover(&self) -> Option<Arc<dpop::Prover>> {
        self.dpop.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set_prover(&self, prover: Option<Arc<dpop::Prover>>) {
        *self.dpop.lock().unwrap_or_else(|e| e.into_inner()) = prover;
    }

    /// A new token from the refresh token, saved. When the server refuses, the tokens are
    /// forgotten (only a new login helps); when it cannot be reached, they are kept.
    ///
    /// It runs under the server's lock file and starts by reading the store again: a token
    /// another process refreshed meanwhile is taken as it is, and its refresh token (a rotated
    /// one is only good once) is the one used next, never ours again.
    async fn refresh(&self, state: &mut State) -> Result<(), flow::TokenError> {
        let refused = |text: &str| flow::TokenError::Refused(text.to_owned());
        let _lock = self
            .place
            .lock()
            .await
            .map_err(flow::TokenError::Unreachable)?;
        let ours = (state.record.as_ref())
            .and_then(|r| r.tokens.as_ref())
            .map(|t| t.access_token.clone());
        if let Some(mut stored) = self.place.load() {
            let theirs = stored.tokens.as_ref();
            let newer = theirs.is_some_and(|t| Some(&t.access_token) != ours.as_ref());
            let usable = theirs.is_some_and(|t| !t.expires_within(0));
            self.adopt(&mut stored);
            state.record = Some(stored);
            if newer && usable {
                self.generation.fetch_add(1, Ordering::SeqCst);
                state.refreshed = Some(self.generation.load(Ordering::SeqCst));
                return Ok(());
            }
        }
        let Some(record) = &state.record else {
            return Err(refused("not logged in"));
        };
        let (Some(client), Some(tokens)) = (&record.client, &record.tokens) else {
            return Err(refused("not logged in"));
        };
        let outcome = flow::refresh(
            &*self.http,
            &record.token_endpoint,
            client,
            &record.resource,
            tokens,
        )
        .await;
        let mut record = record.clone();
        match outcome {
            Ok(tokens) => {
                record.tokens = Some(tokens);
                self.save(state, record)
                    .map_err(flow::TokenError::Unreachable)?;
                state.refreshed = Some(self.generation.load(Ordering::SeqCst));
                Ok(())
            }
            Err(flow::TokenError::Refused(error)) => {
                record.tokens = None;
                let _ = self.save(state, record);
                Err(flow::TokenError::Refused(error))
            }
            Err(error) => Err(error),
        }
    }

    /// Makes a record read from the store whole again: a configured client's secret and key
    /// (never written down: they come from the config), and the DPoP key of its tokens.
    fn adopt(&self, record: &mut Record) {
        let prover = (record.dpop_key.as_ref()).and_then(|key| {
            let current = self.prover().filter(|p| p.stored() == key.0);
            current.or_else(|| dpop::Prover::from_stored(&key.0).ok().map(Arc::new))
        });
        self.set_prover(prover.clone());
        if let Some(client) = record.client.as_mut() {
            client.dpop = prover;
            if client.source == "configured" {
                client.client_secret = self.settings.client_secret.clone().map(Secret);
                client.signer = (self.settings.private_key.clone()).map(|key| machine::Signer {
                    key,
                    audience: record.issuer.clone(),
                });
            }
        }
    }

    fn save(&self, state: &mut State, record: Record) -> Result<(), String> {
        let mut written = record.clone();
        if let Some(client) = written.client.as_mut()
            && client.source == "configured"
        {
            client.client_secret = None;
        }
        let saved = self.place.save(&written);
        state.record = Some(record);
        self.generation.fetch_add(1, Ordering::SeqCst);
        saved.map_err(|error| format!("{}: {error}", self.name))
    }

    /// Discovery, registration, the grant and the exchange; the new token saved.
    async fn log_in(
        &self,
        state: &mut State,
        bearer: Option<&Bearer>,
        wanted: Vec<String>,
    ) -> Result<(), String> {
        let now = Instant::now();
        state
            .logins
            .retain(|at| now.duration_since(*at) < LOGIN_WINDOW);
        if state.logins.len() >= MAX_LOGINS {
            return Err(format!(
                "{} still refuses after {MAX_LOGINS} logins; giving up",
                self.url
            ));
        }
        state.logins.push(now);
        let found = discovery::discover(&*self.http, &self.url, bearer).await?;
        match self.settings.grant {
            Grant::ClientCredentials | Grant::JwtBearer => {
                return self.machine_login(state, &found, wanted).await;
            }
            Grant::Enterprise => return self.enterprise_login(state, &found, wanted).await,
            Grant::AuthorizationCode => {}
        }
        let device = self.settings.login == Login::Device;
        let (loopback, attempt, client) = self.begin(state, &found, wanted, device).await?;
        let tokens = self
            .person_tokens(&found, &client, &attempt, &loopback)
            .await?;
        self.keep(state, &found, client, tokens)
    }

    /// The person's part of a login, by the [`Login`] mode: the code from the redirect
    /// traded for tokens, or the device grant's tokens.
    async fn person_tokens(
        &self,
        found: &Discovered,
        client: &store::Client,
        attempt: &Attempt,
        loopback: &loopback::Loopback,
    ) -> Result<store::Tokens, String> {
        let url = flow::authorize_url(&found.server, client, attempt);
        let code = match self.settings.login {
            Login::Follow => flow::follow(&*self.http, &url, attempt, &found.server).await?,
            Login::Browser => self.browser_login(loopback, &url, attempt, found).await?,
            Login::Pasted => self.pasted_login(&url, attempt, found).await?,
            Login::Device => return self.device_login(found, client, attempt).await,
            Login::Never => return Err(self.needs_login()),
        };
        let token_endpoint = &found.server.token_endpoint;
        flow::exchange(&*self.http, token_endpoint, client, attempt, &code).await
    }

    /// A login's first steps after discovery, shared by every way of logging in: PKCE
    /// checked, the scopes chosen, the loopback bound, the client registered (or the stored
    /// registration kept; for a `device` login one that may use the device grant), its DPoP
    /// key chosen.
    async fn begin(
        &self,
        state: &State,
        found: &Discovered,
        wanted: Vec<String>,
        device: bool,
    ) -> Result<(loopback::Loopback, Attempt, store::Client), String> {
        flow::check_pkce(&found.server)?;
        // What was stored for this issuer still counts (its registration, its scopes);
        // after a move to another authorization server none of it does.
        let previous = (state.record.clone()).filter(|r| r.issuer == found.server.issuer);
        let old_scopes = (previous.as_ref())
            .and_then(|r| r.tokens.as_ref())
            .map(|t| t.scopes.clone())
            .unwrap_or_default();
        let scopes = self.choose_scopes(found, wanted, old_scopes);
        let stored_client = (previous.as_ref())
            .and_then(|r| r.client.clone())
            .filter(|c| c.source == "dynamic");
        let loopback = self.bind_loopback(stored_client.as_ref()).await?;
        let attempt = Attempt {
            pkce: flow::Pkce::new()?,
            state: flow::random_token()?,
            redirect_uri: loopback.redirect_uri(),
            scopes,
            resource: found.resource.clone(),
        };
        let identity = self.settings.identity();
        let mut grants = vec!["authorization_code", "refresh_token"];
        if device {
            grants.push(register::DEVICE_GRANT);
        }
        let mut client = register::client(
            &*self.http,
            &found.server,
            &identity,
            stored_client,
            &attempt.redirect_uri,
            &grants,
        )
        .await?;
        client.dpop = self.choose_dpop(found)?;
        Ok((loopback, attempt, client))
    }

    /// The key this login's token requests prove, when its tokens are to be DPoP-bound:
    /// `oauth_dpop = true` demands it, `false` refuses it, and unset it is used when the
    /// server asked for DPoP (its challenge's scheme, or its metadata) and the authorization
    /// server takes ES256 proofs. The key of the tokens kept is used again.
    fn choose_dpop(&self, found: &Discovered) -> Result<Option<Arc<dpop::Prover>>, String> {
        let algorithms = found.server.dpop_signing_alg_values_supported.as_deref();
        let offered = dpop::offered(algorithms);
        let wanted = match self.settings.dpop {
            Some(false) => false,
            Some(true) if !offered => {
                return Err(format!(
                    "oauth_dpop is on, but the authorization server {} takes no DPoP proofs \
                     signed with {} (its dpop_signing_alg_values_supported: {:?})",
                    printable(&found.server.issuer),
                    dpop::ALG,
                    algorithms.unwrap_or_default()
                ));
            }
            Some(true) => true,
            None => offered && found.dpop,
        };
        if !wanted {
            return Ok(None);
        }
        match self.prover() {
            Some(prover) => Ok(Some(prover)),
            None => Ok(Some(Arc::new(dpop::Prover::generate()?))),
        }
    }

    /// Saves what a login brought, with the DPoP key when the tokens are bound to it.
    fn keep(
        &self,
        state: &mut State,
        found: &Discovered,
        client: store::Client,
        tokens: store::Tokens,
    ) -> Result<(), String> {
        let token_endpoint = &found.server.token_endpoint;
        let prover = client.dpop.clone().filter(|_| tokens.dpop_bound);
        let mut kept = client.clone();
        if kept.source == "configured" {
            kept.client_secret = None;
        }
        let record = Record {
            server_url: self.url.clone(),
            issuer: found.server.issuer.clone(),
            token_endpoint: token_endpoint.clone(),
            resource: found.resource.clone(),
            client: Some(kept),
            tokens: Some(tokens),
            dpop_key: prover.as_ref().map(|prover| Secret(prover.stored())),
        };
        self.set_prover(prover);
        self.save(state, record)?;
        // Keep the configured secret in memory for refreshes.
        if let Some(stored) = state.record.as_mut().and_then(|r| r.client.as_mut()) {
            stored.client_secret = client.client_secret;
        }
        Ok(())
    }

    /// The grants without a person: `client_credentials`, a token in the configured client's
    /// own name; `jwt_bearer`, a token for the workload's JWT (with no client at all unless
    /// one is configured).
    async fn machine_login(
        &self,
        state: &mut State,
        found: &Discovered,
        wanted: Vec<String>,
    ) -> Result<(), String> {
        let identity = self.settings.identity();
        let scopes = self.choose_scopes(found, wanted, Vec::new());
        let endpoint = &found.server.token_endpoint;
        if self.settings.grant == Grant::JwtBearer {
            let Some(jwt) = &self.settings.assertion else {
                return Err("the jwt_bearer grant needs the workload's JWT: set \
                            `oauth_assertion_file` or `oauth_assertion_env` (or \
                            MCP_CLI_OAUTH_ASSERTION_FILE)"
                    .into());
            };
            let assertion = jwt.read()?;
            let mut client = match identity.client_id {
                Some(_) => {
                    register::client(&*self.http, &found.server, &identity, None, "", &[]).await?
                }
                None => store::Client::anonymous(),
            };
            client.dpop = self.choose_dpop(found)?;
            let what = "the workload identity (JWT bearer) grant";
            let tokens = self
                .jwt_grant(state, endpoint, &client, &assertion, &scopes, found, what)
                .await?;
            return self.keep(state, found, client, tokens);
        }
        if identity.client_id.is_none() {
            return Err(
                "the client_credentials grant needs a client id: set `oauth_client_id` \
                        in the server's config entry (or MCP_CLI_OAUTH_CLIENT_ID)"
                    .into(),
            );
        }
        if identity.client_secret.is_none() && identity.private_key.is_none() {
            return Err("the client_credentials grant needs a client secret \
                        (`oauth_client_secret_env`, MCP_CLI_OAUTH_CLIENT_SECRET) or a private key \
                        (`oauth_private_key_file`, MCP_CLI_OAUTH_PRIVATE_KEY_FILE)"
                .into());
        }
        let mut client =
            register::client(&*self.http, &found.server, &identity, None, "", &[]).await?;
        client.dpop = self.choose_dpop(found)?;
        let tokens =
            machine::client_credentials(&*self.http, endpoint, &client, &scopes, &found.resource)
                .await?;
        self.keep(state, found, client, tokens)
    }

    /// The JWT authorization grant with `assertion`, once: a JWT the server refused is
    /// refused again here without asking, and no other grant is tried in its place.
    #[allow(clippy::too_many_arguments)]
    async fn jwt_grant(
        &self,
        state: &mut State,
        endpoint: &str,
        client: &store::Client,
        assertion: &str,
        scopes: &[String],
        found: &Discovered,
        what: &str,
    ) -> Result<store::Tokens, String> {
        let digest = ring::digest::digest(&ring::digest::SHA256, assertion.as_bytes());
        let digest = urls::base64url(digest.as_ref());
        if let Some((refused, error)) = &state.refused
            && *refused == digest
        {
            return Err(format!("{error} (the same JWT is not sent again)"));
        }
        let resource = &found.resource;
        let outcome = flow::jwt_bearer(
            &*self.http,
            endpoint,
            client,
            assertion,
            scopes,
            resource,
            what,
        )
        .await;
        match outcome {
            Ok(tokens) => Ok(tokens),
            Err(flow::TokenError::Refused(error)) => {
                state.refused = Some((digest, error.clone()));
                Err(error)
            }
            Err(flow::TokenError::Unreachable(error)) => Err(error),
        }
    }

    /// The scopes to ask for: the challenge's, else the configured ones, else the resource's
    /// `scopes_supported`; with what was granted before (a step-up adds, never swaps), and
    /// `offline_access` when the server offers it (so a refresh token comes back).
    fn choose_scopes(
        &self,
        found: &Discovered,
        wanted: Vec<String>,
        old: Vec<String>,
    ) -> Vec<String> {
        let base = if !wanted.is_empty() {
            wanted
        } else if !self.settings.scopes.is_empty() {
            self.settings.scopes.clone()
        } else {
            found.scopes_supported.clone().unwrap_or_default()
        };
        let mut scopes = old;
        for scope in base {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        let offered = found.server.scopes_supported.as_deref().unwrap_or_default();
        let offline = "offline_access".to_owned();
        if offered.contains(&offline) && !scopes.contains(&offline) {
            scopes.push(offline);
        }
        scopes
    }

    fn needs_login(&self) -> String {
        format!(
            "{} needs a login: run `mcp-cli auth {}`",
            self.name, self.name
        )
    }

    /// Whether a new token may be had without a person: a machine grant, or an enterprise
    /// one whose ID token needs no login.
    fn unattended(&self) -> bool {
        match self.settings.grant {
            Grant::ClientCredentials | Grant::JwtBearer => true,
            Grant::Enterprise => self.id_token_at_hand(),
            Grant::AuthorizationCode => false,
        }
    }

    async fn challenge(&self, challenge: &Challenge) -> Result<bool, String> {
        let seen = self.generation.load(Ordering::SeqCst);
        let bearer = challenge
            .www_authenticate
            .as_deref()
            .and_then(Bearer::parse);
        let mut state = self.state.lock().await;
        if self.generation.load(Ordering::SeqCst) != seen {
            // Another request's challenge brought a new token while we waited: try it.
            return Ok(true);
        }
        let bound = (state.record.as_ref())
            .and_then(|r| r.tokens.as_ref())
            .is_some_and(|t| t.dpop_bound);
        let wants_nonce =
            bearer.as_ref().and_then(|b| b.error.as_deref()) == Some("use_dpop_nonce");
        if challenge.status == 401 && wants_nonce && challenge.dpop_nonce.is_some() && bound {
            // RFC 9449 §9: the nonce is kept (`Authorizer::nonce`); the proof is made anew.
            return Ok(self.prover().is_some());
        }
        let asked = bearer.as_ref().map(Bearer::scopes).unwrap_or_default();
        let granted = (state.record.as_ref())
            .and_then(|r| r.tokens.as_ref())
            .map(|t| t.scopes.clone());
        if challenge.status == 403 {
            let insufficient = bearer.as_ref().is_some_and(|b| {
                b.error.as_deref() == Some("insufficient_scope") || b.scope.is_some()
            });
            // A plain 403 is a refusal no login changes; the same demand twice is a loop.
            if !insufficient || state.last_step_up.as_ref() == Some(&asked) {
                return Ok(false);
            }
            state.last_step_up = Some(asked.clone());
        } else if granted.is_some()
            && state.refreshed != Some(seen)
            && self.refresh(&mut state).await.is_ok()
        {
            return Ok(true);
        }
        // A grant without a person is not a login to hold back.
        if self.settings.login == Login::Never && !self.unattended() {
            return Ok(false);
        }
        self.log_in(&mut state, bearer.as_ref(), asked).await?;
        Ok(true)
    }

    /// The headers that present `tokens` on `request`: a Bearer token as it is; a DPoP-bound
    /// one with a fresh proof of its key, or, with the key gone, not at all (the server's
    /// challenge then leads to a new login).
    fn present(
        &self,
        tokens: &store::Tokens,
        request: Outbound<'_>,
    ) -> Result<Vec<(String, String)>, String> {
        let token = &tokens.access_token.0;
        if !tokens.dpop_bound {
            return Ok(vec![("Authorization".into(), format!("Bearer {token}"))]);
        }
        let Some(prover) = self.prover() else {
            return Ok(Vec::new());
        };
        let body = (request.method == "POST").then_some(request.body);
        let proof = prover.proof(request.method, request.url, Some(token), body)?;
        Ok(vec![
            ("Authorization".into(), format!("DPoP {token}")),
            ("DPoP".into(), proof),
        ])
    }
}

impl Authorizer for OAuth {
    fn authorization<'a>(
        &'a self,
        request: Outbound<'a>,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, String>> {
        Box::pin(async move {
            let mut state = self.state.lock().await;
            let Some(tokens) = state.record.as_ref().and_then(|r| r.tokens.clone()) else {
                return Ok(Vec::new());
            };
            if tokens.needs_refresh() && tokens.refresh_token.is_some() {
                match self.refresh(&mut state).await {
                    Ok(()) => {
                        let fresh = state.record.as_ref().and_then(|r| r.tokens.clone());
                        return match fresh {
                            Some(fresh) => self.present(&fresh, request),
                            None => Ok(Vec::new()),
                        };
                    }
                    // Refused: the tokens are gone, the server's challenge will say more.
                    Err(flow::TokenError::Refused(_)) => return Ok(Vec::new()),
                    Err(flow::TokenError::Unreachable(error)) if tokens.expires_within(0) => {
                        return Err(format!("refreshing the token of {}: {error}", self.name));
                    }
                    // Not yet expired: use it while the token endpoint is away.
                    Err(flow::TokenError::Unreachable(_)) => {}
                }
            } else if tokens.expires_within(0) {
                // Sending it would only earn a 401; without one the challenge says what the
                // server wants.
                return Ok(Vec::new());
            }
            self.present(&tokens, request)
        })
    }

    fn challenged<'a>(&'a self, challenge: &'a Challenge) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            self.challenge(challenge).await.map_err(|error| {
                format!(
                    "authorizing {} ({}): {}",
                    self.name,
                    self.url,
                    printable(&error)
                )
            })
        })
    }

    fn nonce(&self, url: &str, nonce: &str) {
        if let Some(prover) = self.prover() {
            prover.remember_nonce(url, nonce);
        }
    }
}

#[cfg(test)]
mod tests;
