//! Tokens and client registrations: in the OS keychain ([`keychain`](super::keychain)), or
//! one JSON file per server under `$XDG_STATE_HOME/mcp-cli/auth/`, mode 0600, replaced
//! atomically (temp file + rename), as `token_store` says. Beside them a lock file per server,
//! held while a token is refreshed, so processes refresh one at a time.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::keychain::{self, Unavailable};
use crate::config::oauth::TokenStore;
use crate::files::{self, ReplaceError};

/// `$XDG_STATE_HOME/mcp-cli/auth`, default `~/.local/state/mcp-cli/auth`.
pub fn auth_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    crate::state::Folder::of_env(env).tokens()
}

/// The file for server `name` in `dir`.
pub(crate) fn path(dir: &Path, name: &str) -> PathBuf {
    // The log file's name rules keep the name inside the folder.
    crate::logs::log_path(dir, name).with_extension("json")
}

/// A string never shown by `Debug` (tokens, secrets).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct Secret(pub(crate) String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<secret>")
    }
}

/// How we are known to the authorization server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Client {
    pub(crate) client_id: String,
    pub(crate) client_secret: Option<Secret>,
    /// `none`, `client_secret_basic` or `client_secret_post`.
    pub(crate) auth_method: String,
    /// The redirect URI registered with a dynamic registration (its port is reused).
    pub(crate) redirect_uri: Option<String>,
    /// `configured`, `metadata-document` or `dynamic`; only `dynamic` ones are stored.
    pub(crate) source: String,
    /// What a `private_key_jwt` client signs with: from the config, never written down.
    #[serde(skip)]
    pub(crate) signer: Option<super::machine::Signer>,
    /// The grants it was registered for (a dynamic registration), so one made for the
    /// browser is not reused for the device grant it was never allowed.
    #[serde(default)]
    pub(crate) grant_types: Vec<String>,
    /// The DPoP key its token requests carry proofs of; kept in [`Record::dpop_key`].
    #[serde(skip)]
    pub(crate) dpop: Option<std::sync::Arc<super::dpop::Prover>>,
}

impl Client {
    /// No client at all: a workload presents only its JWT (SEP-1933 needs no client id).
    pub(crate) fn anonymous() -> Self {
        Self {
            client_id: String::new(),
            client_secret: None,
            auth_method: "none".into(),
            redirect_uri: None,
            source: "workload".into(),
            signer: None,
            grant_types: Vec::new(),
            dpop: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Tokens {
    pub(crate) access_token: Secret,
    pub(crate) refresh_token: Option<Secret>,
    /// Seconds since the Unix epoch.
    pub(crate) expires_at: Option<u64>,
    /// When it was issued (seconds since the Unix epoch), to tell short-lived tokens.
    #[serde(default)]
    pub(crate) issued_at: Option<u64>,
    /// The scopes asked for (what a step-up adds to).
    #[serde(default)]
    pub(crate) scopes: Vec<String>,
    /// A `DPoP` token: bound to [`Record::dpop_key`], never sent without a proof of it.
    #[serde(default)]
    pub(crate) dpop_bound: bool,
    /// From an identity provider's login: the person's ID token (OpenID Connect).
    #[serde(default)]
    pub(crate) id_token: Option<Secret>,
}

/// A token this close to expiry (in seconds) is refreshed before use.
const REFRESH_MARGIN: u64 = 60;

impl Tokens {
    /// Whether the access token has expired or will within `margin` seconds.
    pub(crate) fn expires_within(&self, margin: u64) -> bool {
        self.expires_at.is_some_and(|at| now_secs() + margin >= at)
    }

    /// Whether to refresh before use: within a minute of expiry, or within half its life for
    /// tokens that live less than two minutes (else each would be refreshed at once).
    pub(crate) fn needs_refresh(&self) -> bool {
        let Some(at) = self.expires_at else {
            return false;
        };
        let life = self
            .issued_at
            .map_or(u64::MAX, |issued| at.saturating_sub(issued));
        self.expires_within(REFRESH_MARGIN.min(life / 2))
    }
}

pub(crate) fn now_secs() -> u64 {
    (SystemTime::now().duration_since(UNIX_EPOCH)).map_or(0, |d| d.as_secs())
}

/// Everything kept for one server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The MCP server these are for; a record for another URL is ignored.
    pub(crate) server_url: String,
    pub(crate) issuer: String,
    pub(crate) token_endpoint: String,
    pub(crate) resource: String,
    pub(crate) client: Option<Client>,
    pub(crate) tokens: Option<Tokens>,
    /// The DPoP key of the tokens ([`dpop::Prover::stored`](super::dpop::Prover::stored)).
    #[serde(default)]
    pub(crate) dpop_key: Option<Secret>,
}

/// Where one server's record lives: the keychain entry for its URL or the file for its name
/// in `dir`, as `choice` says; what sits in the other place is moved over when found, so
/// changing `token_store` loses no login.
#[derive(Clone, Debug)]
pub(crate) struct Place {
    pub(crate) dir: PathBuf,
    pub(crate) name: String,
    pub(crate) url: String,
    pub(crate) choice: TokenStore,
}

/// Which store a [`Place`] uses now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kept {
    Keychain,
    File,
}

impl Place {
    /// `Auto` settles on the keychain when it answers.
    fn kept(&self) -> Result<Kept, String> {
        match (self.choice, keychain::available()) {
            (TokenStore::File, _) | (TokenStore::Auto, Err(_)) => Ok(Kept::File),
            (_, Ok(())) => Ok(Kept::Keychain),
            (TokenStore::Keyring, Err(Unavailable(why))) => Err(format!(
                "token_store is \"keyring\" but the keychain cannot be used: {why}"
            )),
        }
    }

    /// Where the record is kept, for messages.
    pub(crate) fn describe(&self) -> String {
        match self.kept() {
            Ok(Kept::Keychain) => "the system keychain".into(),
            Ok(Kept::File) | Err(_) => self.dir.display().to_string(),
        }
    }

    /// The record for this server, if there is a readable one for its URL; one found in the
    /// other store is moved to this one. A damaged file is treated as absent (the next login
    /// rewrites it).
    pub(crate) fn load(&self) -> Option<Record> {
        let kept = self.kept().ok()?;
        let here = match kept {
            Kept::Keychain => keychain::load(&self.url).ok().flatten(),
            Kept::File => self.load_file(),
        };
        if here.is_some() {
            return here;
        }
        let there = match kept {
            Kept::Keychain => self.load_file(),
            Kept::File => keychain::load(&self.url).ok().flatten(),
        }?;
        // Moved only once safely kept here.
        if self.save(&there).is_ok() {
            // A copy left behind is only a duplicate of this one.
            let _ = match kept {
                Kept::Keychain => remove_file(&self.dir, &self.name).is_ok(),
                Kept::File => keychain::remove(&self.url).is_ok(),
            };
        }
        Some(there)
    }

    fn load_file(&self) -> Option<Record> {
        let text = files::read_private(&path(&self.dir, &self.name)).ok()?;
        let record: Record = serde_json::from_slice(&text).ok()?;
        (record.server_url == self.url).then_some(record)
    }

    pub(crate) fn save(&self, record: &Record) -> Result<(), String> {
        match self.kept()? {
            Kept::Keychain => keychain::save(record).map_err(|Unavailable(why)| {
                format!("cannot keep the login in the system keychain: {why}")
            }),
            Kept::File => save_file(&self.dir, &self.name, record).map_err(|error| {
                format!("cannot keep the login in {}: {error}", self.dir.display())
            }),
        }
    }

    /// Forgets the record in both stores; whether either held one.
    pub(crate) fn remove(&self) -> Result<bool, String> {
        let in_file = remove_file(&self.dir, &self.name).map_err(|error| {
            format!(
                "cannot delete {}: {error}",
                path(&self.dir, &self.name).display()
            )
        })?;
        let in_keychain = match keychain::remove(&self.url) {
            Ok(found) => found,
            // Nothing can be there when no keychain answers.
            Err(_) if self.choice != TokenStore::Keyring => false,
            Err(Unavailable(why)) => {
                return Err(format!(
                    "cannot delete the login from the system keychain: {why}"
                ));
            }
        };
        Ok(in_file || in_keychain)
    }

    /// Takes this server's refresh lock (`NAME.lock` beside the files), waiting while another
    /// process holds it; released when the returned file is dropped.
    pub(crate) async fn lock(&self) -> Result<fs::File, String> {
        let file = path(&self.dir, &self.name).with_extension("lock");
        let failed = |error: io::Error| format!("cannot lock {}: {error}", file.display());
        files::private_dir(&self.dir).map_err(failed)?;
        let lock = files::append_private(&file).map_err(failed)?;
        // `flock` blocks the thread: off the executor, so other servers keep going.
        blocking::unblock(move || lock.lock().map(|()| lock))
            .await
            .map_err(failed)
    }
}

/// Writes the record: to a private temp file first, renamed over the old one, so a crash
/// never leaves half a file and the token is never readable by others, not even briefly.
fn save_file(dir: &Path, name: &str, record: &Record) -> io::Result<()> {
    // The folder holds credentials: keep others out of it too.
    files::private_dir(dir)?;
    let text = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
    let replaced = files::replace(&path(dir, name), &text, 0o600, || Ok::<(), io::Error>(()));
    replaced.map_err(|error| match error {
        ReplaceError::Write { error, .. } | ReplaceError::Rename(error) => error,
        ReplaceError::Refused(error) => error,
    })
}

/// Deletes the file; whether there was one.
fn remove_file(dir: &Path, name: &str) -> io::Result<bool> {
    match fs::remove_file(path(dir, name)) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn record() -> Record {
        Record {
            server_url: "https://h/mcp".into(),
            issuer: "https://as".into(),
            token_endpoint: "https://as/token".into(),
            resource: "https://h/mcp".into(),
            client: Some(Client {
                client_id: "id".into(),
                client_secret: Some(Secret("s3cret".into())),
                auth_method: "client_secret_basic".into(),
                redirect_uri: None,
                source: "dynamic".into(),
                signer: None,
                grant_types: Vec::new(),
                dpop: None,
            }),
            tokens: Some(Tokens {
                access_token: Secret("tok".into()),
                refresh_token: None,
                expires_at: Some(now_secs() + 30),
                issued_at: None,
                scopes: vec!["a".into()],
                dpop_bound: false,
                id_token: None,
            }),
            dpop_key: None,
        }
    }

    #[test]
    fn round_trips_privately_and_removes() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-auth-store-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        // One record: two would differ across a second boundary (its expiry reads the clock).
        let saved = record();
        let place = Place {
            dir: dir.clone(),
            name: "../evil name".into(),
            url: saved.server_url.clone(),
            choice: TokenStore::File,
        };
        place.save(&saved).expect("save");
        let file = path(&dir, "../evil name");
        assert_eq!(file.parent(), Some(dir.as_path()));
        let mode = fs::metadata(&file).expect("file").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(place.load(), Some(saved.clone()));
        // Another URL's record is not this server's.
        let elsewhere = Place {
            url: "https://other/mcp".into(),
            ..place.clone()
        };
        assert_eq!(elsewhere.load(), None);
        assert_eq!(
            fs::read_dir(&dir).expect("dir").count(),
            1,
            "no temp file left"
        );
        assert!(place.remove().expect("remove"));
        assert!(!place.remove().expect("gone"));
        fs::write(&file, "{not json").expect("write");
        assert_eq!(place.load(), None);
        let _ = fs::remove_dir_all(&dir);
    }

    /// Without the `keychain` feature, `auto` is the file and `keyring` an error naming it.
    #[cfg(not(feature = "keychain"))]
    #[test]
    fn without_the_keychain_feature_auto_is_the_file_and_keyring_says_why() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-no-keychain-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let saved = record();
        let auto = Place {
            dir: dir.clone(),
            name: "fx".into(),
            url: saved.server_url.clone(),
            choice: TokenStore::Auto,
        };
        auto.save(&saved).expect("auto keeps the file");
        assert!(path(&dir, "fx").is_file());
        assert_eq!(auto.describe(), dir.display().to_string());
        let keyring = Place {
            choice: TokenStore::Keyring,
            ..auto.clone()
        };
        let error = keyring.save(&saved).expect_err("no keychain in this build");
        assert!(
            error.starts_with("token_store is \"keyring\" but the keychain cannot be used")
                && error.contains("`keychain` feature is off"),
            "{error}"
        );
        assert_eq!(keyring.load(), None);
        assert!(auto.remove().expect("remove"));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn debug_never_shows_secrets() {
        let text = format!("{:?}", record());
        assert!(
            !text.contains("tok\"") && !text.contains("s3cret"),
            "{text}"
        );
    }

    #[test]
    fn expiry_has_a_margin() {
        let mut tokens = record().tokens.expect("tokens");
        assert!(tokens.expires_within(60));
        assert!(!tokens.expires_within(0));
        assert!(tokens.needs_refresh());
        // A token that lives 40 s is fresh for its first 20.
        tokens.issued_at = Some(now_secs().saturating_sub(10));
        tokens.expires_at = Some(now_secs() + 30);
        assert!(!tokens.needs_refresh());
        tokens.expires_at = None;
        assert!(!tokens.needs_refresh());
    }
}
