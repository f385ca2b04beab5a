//! The person's side of a login: the browser and its loopback redirect, the URL shown and the
//! redirect pasted back (`--no-browser`), the device code (`--device`).

use super::discovery::Discovered;
use super::flow::{self, Attempt};
use super::http::printable;
use super::{LoginPrompt, OAuth, browser, device, loopback, store, urls};

impl OAuth {
    /// `--device`: the code shown through the notice, the grant polled to its end.
    pub(super) async fn device_login(
        &self,
        found: &Discovered,
        client: &store::Client,
        attempt: &Attempt,
    ) -> Result<store::Tokens, String> {
        let show = |code: device::Code| {
            if let Some(notice) = &self.settings.notice {
                notice(LoginPrompt::DeviceCode {
                    server: self.name.clone(),
                    user_code: code.user_code,
                    verification_uri: code.verification_uri,
                    verification_uri_complete: code.verification_uri_complete,
                    expires_in: code.expires_in,
                });
            }
        };
        let (scopes, resource) = (&attempt.scopes, &attempt.resource);
        device::login(&*self.http, &found.server, client, scopes, resource, show).await
    }

    /// `--no-browser`: the URL shown, the redirect URL the person pastes read from stdin and
    /// checked as the loopback checks it (`state`, `iss`; the verifier at the exchange).
    pub(super) async fn pasted_login(
        &self,
        url: &str,
        attempt: &Attempt,
        found: &Discovered,
    ) -> Result<String, String> {
        if let Some(notice) = &self.settings.notice {
            notice(LoginPrompt::Paste {
                server: self.name.clone(),
                url: url.to_owned(),
            });
        }
        let line = blocking::unblock(|| {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map(|_| line)
        });
        let timeout = async {
            async_io::Timer::after(self.settings.login_timeout).await;
            Ok(String::new())
        };
        let line = futures_lite::future::or(line, timeout)
            .await
            .map_err(|error| format!("cannot read the redirect URL from stdin: {error}"))?;
        let pasted = line.trim();
        if pasted.is_empty() {
            return Err(format!(
                "no redirect URL was pasted for the login to {} (stdin ended or the wait ran out)",
                self.name
            ));
        }
        let redirect = urls::parse(pasted)
            .map_err(|_| format!("the pasted text is not a URL: {}", printable(pasted)))?;
        if !flow::is_redirect(&redirect, &attempt.redirect_uri) {
            return Err(format!(
                "the pasted URL is not the login's redirect (it should start with {})",
                attempt.redirect_uri
            ));
        }
        flow::read_redirect(&redirect, attempt, &found.server)
    }

    /// The loopback listener, on the port a stored registration names when it is free.
    pub(super) async fn bind_loopback(
        &self,
        stored: Option<&store::Client>,
    ) -> Result<loopback::Loopback, String> {
        let port = (stored.and_then(|c| c.redirect_uri.as_deref()))
            .and_then(|uri| urls::parse(uri).ok())
            .and_then(|uri| uri.port());
        if let Some(port) = port
            && let Ok(listener) = loopback::Loopback::bind(port).await
        {
            return Ok(listener);
        }
        (loopback::Loopback::bind(0).await)
            .map_err(|error| format!("cannot listen on 127.0.0.1 for the login redirect: {error}"))
    }

    pub(super) async fn browser_login(
        &self,
        loopback: &loopback::Loopback,
        url: &str,
        attempt: &Attempt,
        found: &Discovered,
    ) -> Result<String, String> {
        let minutes = self.settings.login_timeout.as_secs().div_ceil(60);
        let tell = |prompt| {
            if let Some(notice) = &self.settings.notice {
                notice(prompt);
            }
        };
        tell(LoginPrompt::Opening {
            server: self.name.clone(),
            url: url.to_owned(),
            wait: self.settings.login_timeout,
        });
        // The opener runs beside the wait: a text-mode browser in `$BROWSER` only exits once
        // it is done, which needs our loopback answering it.
        let opener = browser::open(url.to_owned(), self.settings.browser.clone());
        let notice = async {
            if !opener.await {
                tell(LoginPrompt::NoBrowser {
                    server: self.name.clone(),
                    url: url.to_owned(),
                });
            }
            std::future::pending().await
        };
        let wait = loopback.wait(|redirect| flow::read_redirect(redirect, attempt, &found.server));
        let timeout = async {
            async_io::Timer::after(self.settings.login_timeout).await;
            Err(format!(
                "the login for {} was not finished within {minutes} minutes",
                self.name
            ))
        };
        futures_lite::future::or(wait, futures_lite::future::or(timeout, notice)).await
    }
}
