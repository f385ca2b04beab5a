//! What the gateway hands a host to bring back later (an input round's `requestState`),
//! sealed with HMAC-SHA256, so that whichever replica the host's next request reaches can
//! trust what it carries without asking the replica that made it. Replicas share the keys
//! through a file (`--replica-key FILE`, or `MCP_CLI_REPLICA_KEY_FILE`): one key a line, the
//! first seals and every one opens, so a new key goes in on top and the old one stays until
//! what it sealed has expired; the file is read again when it changes. Without a file, each
//! process seals with a key of its own, made at start.
//!
//! A sealed text is `KIND.KEY.PAYLOAD.MAC`: what it is, which key sealed it (the first eight
//! hex digits of the key's SHA-256), the payload (JSON, base64url) and the MAC over the three.
//! Sealing proves where a text came from, not that it is secret: the host may read its own
//! answers in it, and nothing else goes in.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use base64::Engine;
use ring::hmac;
use serde_json::Value;

use crate::files::Stamp;

/// The shortest key taken: 32 characters, such as 16 random bytes in hex.
const SHORTEST_KEY: usize = 32;

/// Why a sealed text was not opened.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unsealed {
    /// Not a text of ours of this kind.
    Malformed,
    /// Sealed under a key this replica does not hold (rotated out, or another deployment's).
    UnknownKey,
    /// The MAC does not match: it was altered, or made by someone without the key.
    Forged,
}

impl std::fmt::Display for Unsealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unsealed::Malformed => "is not one this gateway made",
            Unsealed::UnknownKey => {
                "was sealed under a key this gateway no longer holds (or never held)"
            }
            Unsealed::Forged => "does not match its seal: it was altered or forged",
        })
    }
}

/// One key: its id and what it seals with.
struct Key {
    id: String,
    hmac: hmac::Key,
}

impl Key {
    fn new(secret: &[u8]) -> Self {
        let digest = ring::digest::digest(&ring::digest::SHA256, secret);
        let id = (digest.as_ref()[..4].iter())
            .map(|byte| format!("{byte:02x}"))
            .collect();
        Self {
            id,
            hmac: hmac::Key::new(hmac::HMAC_SHA256, secret),
        }
    }
}

/// The keys that seal and open, the first sealing.
pub(crate) struct Seal {
    from: Option<PathBuf>,
    keys: Mutex<(Option<Stamp>, Vec<Key>)>,
}

impl Seal {
    /// A key of this process's own: what it seals only it opens.
    pub(crate) fn of_this_process() -> Self {
        let mut secret = [0u8; 32];
        // Without the system's random source the time still tells processes apart; a
        // deployment that needs more gives a key file.
        if getrandom::getrandom(&mut secret).is_err() {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            let nanos = now.map(|since| since.as_nanos()).unwrap_or_default();
            secret[..16].copy_from_slice(&nanos.to_le_bytes());
        }
        Self {
            from: None,
            keys: Mutex::new((None, vec![Key::new(&secret)])),
        }
    }

    /// The keys in `path`, which replicas share; read again whenever the file changes.
    pub(crate) fn from_file(path: &Path) -> Result<Self, String> {
        let keys = read_keys(path)?;
        Ok(Self {
            from: Some(path.to_owned()),
            keys: Mutex::new((crate::files::stamp(path), keys)),
        })
    }

    /// Runs `with` on the keys now, the file read again first if it changed (a file that
    /// became unusable leaves the keys it last held, and says why on stderr).
    fn keys<T>(&self, with: impl FnOnce(&[Key]) -> T) -> T {
        let mut kept = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(path) = &self.from {
            let stamp = crate::files::stamp(path);
            if stamp != kept.0 {
                match read_keys(path) {
                    Ok(keys) => *kept = (stamp, keys),
                    Err(why) => {
                        eprintln!("mcp-cli serve: {why}; the keys read before stay in use");
                        kept.0 = stamp;
                    }
                }
            }
        }
        with(&kept.1)
    }

    /// `payload` sealed as a text of `kind` (letters and digits) under the first key.
    pub(crate) fn seal(&self, kind: &str, payload: &Value) -> String {
        let payload = base64url(&serde_json::to_vec(payload).unwrap_or_default());
        self.keys(|keys| {
            let key = &keys[0];
            let sealed = format!("{kind}.{}.{payload}", key.id);
            let mac = hmac::sign(&key.hmac, sealed.as_bytes());
            format!("{sealed}.{}", base64url(mac.as_ref()))
        })
    }

    /// The payload of `text`, a text of `kind` that one of the keys sealed.
    pub(crate) fn open(&self, kind: &str, text: &str) -> Result<Value, Unsealed> {
        let (sealed, mac) = text.rsplit_once('.').ok_or(Unsealed::Malformed)?;
        let mut parts = sealed.splitn(3, '.');
        let (Some(found), Some(id), Some(payload)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(Unsealed::Malformed);
        };
        if found != kind {
            return Err(Unsealed::Malformed);
        }
        let mac = unbase64url(mac).ok_or(Unsealed::Malformed)?;
        self.keys(|keys| {
            let key = (keys.iter().find(|key| key.id == id)).ok_or(Unsealed::UnknownKey)?;
            hmac::verify(&key.hmac, sealed.as_bytes(), &mac).map_err(|_| Unsealed::Forged)
        })?;
        let payload = unbase64url(payload).ok_or(Unsealed::Malformed)?;
        serde_json::from_slice(&payload).map_err(|_| Unsealed::Malformed)
    }
}

/// The keys of a key file: each line that is not blank or a `#` comment, at least
/// [`SHORTEST_KEY`] characters. The file must be a regular file of ours that nobody else can
/// read: a key others could read seals nothing.
fn read_keys(path: &Path) -> Result<Vec<Key>, String> {
    use std::os::unix::fs::MetadataExt;
    let shown = path.display();
    let metadata = std::fs::symlink_metadata(path)
        .map_err(|error| format!("replica key file {shown}: {error}"))?;
    if metadata.is_file() && metadata.mode() & 0o077 != 0 {
        return Err(format!(
            "replica key file {shown}: others than its owner can read or write it (mode {:o}); \
             make a new key in a file of mode 0600",
            metadata.mode() & 0o777
        ));
    }
    let text = crate::files::read_private_text(path)
        .map_err(|error| format!("replica key file {shown}: {error}"))?;
    let lines = text.lines().map(str::trim);
    let lines: Vec<&str> = lines
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect();
    if let Some(short) = lines.iter().position(|line| line.len() < SHORTEST_KEY) {
        return Err(format!(
            "replica key file {shown}: key {} is shorter than {SHORTEST_KEY} characters",
            short + 1
        ));
    }
    if lines.is_empty() {
        return Err(format!("replica key file {shown}: holds no key"));
    }
    Ok(lines.iter().map(|line| Key::new(line.as_bytes())).collect())
}

fn base64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn unbase64url(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;

    fn key_file(name: &str, lines: &[&str]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mcp-cli-seal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("keys");
        std::fs::write(&path, lines.join("\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        path
    }

    const OLD: &str = "0123456789abcdef0123456789abcdef";
    const NEW: &str = "fedcba9876543210fedcba9876543210";

    #[test]
    fn what_one_replica_seals_another_with_the_key_opens_and_nobody_alters() {
        let path = key_file("share", &[OLD]);
        let (one, other) = (
            Seal::from_file(&path).unwrap(),
            Seal::from_file(&path).unwrap(),
        );
        let payload = json!({"park": "p", "answers": [1, 2]});
        let sealed = one.seal("round1", &payload);
        assert_eq!(other.open("round1", &sealed), Ok(payload));
        assert_eq!(other.open("task1", &sealed), Err(Unsealed::Malformed));
        // One character of the payload changed: the MAC no longer matches.
        let (head, rest) = sealed.split_at(sealed.find('.').unwrap() + 12);
        let flipped = if rest.starts_with('A') { "B" } else { "A" };
        let altered = format!("{head}{flipped}{}", &rest[1..]);
        assert_eq!(other.open("round1", &altered), Err(Unsealed::Forged));
        assert_eq!(other.open("round1", "x"), Err(Unsealed::Malformed));
        // A process's own key opens nothing another sealed.
        let lone = Seal::of_this_process();
        assert_eq!(lone.open("round1", &sealed), Err(Unsealed::UnknownKey));
    }

    #[test]
    fn a_new_key_on_top_seals_and_the_old_one_still_opens_until_it_is_removed() {
        let path = key_file("rotate", &[OLD]);
        let seal = Seal::from_file(&path).unwrap();
        let before = seal.seal("round1", &json!(1));
        std::fs::write(&path, format!("{NEW}\n{OLD}\n")).unwrap();
        let after = seal.seal("round1", &json!(2));
        assert_ne!(before.split('.').nth(1), after.split('.').nth(1));
        assert_eq!(seal.open("round1", &before), Ok(json!(1)));
        std::fs::write(&path, format!("# rotated\n{NEW}\n")).unwrap();
        assert_eq!(seal.open("round1", &before), Err(Unsealed::UnknownKey));
        assert_eq!(seal.open("round1", &after), Ok(json!(2)));
    }

    #[test]
    fn a_key_file_others_can_read_a_short_key_or_none_is_refused() {
        let path = key_file("refused", &[OLD]);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let error = Seal::from_file(&path).err().unwrap();
        assert!(error.contains("others than its owner"), "{error}");
        let path = key_file("short", &["short"]);
        let error = Seal::from_file(&path).err().unwrap();
        assert!(error.contains("shorter than 32"), "{error}");
        let path = key_file("empty", &["# nothing"]);
        let error = Seal::from_file(&path).err().unwrap();
        assert!(error.contains("holds no key"), "{error}");
        let missing = path.with_file_name("missing");
        assert!(Seal::from_file(&missing).is_err());
    }
}
