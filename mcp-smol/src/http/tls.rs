//! The TLS client setup shared by every HTTPS exchange: rustls with ring and the system's roots.

use std::sync::{Arc, OnceLock};

use futures_rustls::rustls::{self, CertificateError, ClientConfig, RootCertStore};

/// The client configuration, built once per process: reading the system's roots costs a
/// directory scan. `SSL_CERT_FILE` and `SSL_CERT_DIR` are honoured as they are at first use.
pub(crate) fn client_config() -> Result<Arc<ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    CONFIG.get_or_init(build).clone()
}

fn build() -> Result<Arc<ClientConfig>, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = match found.errors.first() {
            Some(error) => format!(": {error}"),
            None => String::new(),
        };
        return Err(format!(
            "TLS: no trusted root certificates found on this system{why}"
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS: {error}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Says what a failed handshake or TLS read means, in words a user can act on.
pub(crate) fn describe(error: &std::io::Error) -> String {
    let tls = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match tls {
        Some(rustls::Error::InvalidCertificate(cert)) => {
            let why = match cert {
                CertificateError::UnknownIssuer => "issued by an unknown authority".to_owned(),
                CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                    "expired".to_owned()
                }
                CertificateError::NotValidForName
                | CertificateError::NotValidForNameContext { .. } => {
                    "not valid for this host name".to_owned()
                }
                CertificateError::BadSignature => "bad signature".to_owned(),
                other => format!("{other:?}"),
            };
            format!("TLS: certificate not trusted ({why})")
        }
        Some(other) => format!("TLS: {other}"),
        None => error.to_string(),
    }
}
