//! The whole flow against canned servers: login, use, refresh, step-up, limits.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::http::Response;
use super::http::canned::{Canned, json as answer};
use super::*;

const RS: &str = "http://rs/mcp";

/// What the fake authorization server saw and hands out.
#[derive(Default)]
struct Seen {
    challenge: String,
    authorizations: Vec<urls::Url>,
    token_forms: Vec<Vec<(String, String)>>,
    issued: u32,
}

fn server(seen: Arc<Mutex<Seen>>, expires_in: u64) -> Canned {
    let (at_authorize, at_token) = (seen.clone(), seen);
    Canned::default()
        .json(
            "http://rs/.well-known/oauth-protected-resource/mcp",
            json!({"resource": RS, "authorization_servers": ["http://as"], "scopes_supported": ["read", "write"]}),
        )
        .json(
            "http://as/.well-known/oauth-authorization-server",
            json!({
                "issuer": "http://as",
                "authorization_endpoint": "http://as/authorize",
                "token_endpoint": "http://as/token",
                "registration_endpoint": "http://as/register",
                "code_challenge_methods_supported": ["S256"],
            }),
        )
        .on("POST", "http://as/register", |_| answer(201, json!({"client_id": "dyn"})))
        .on("GET", "http://as/authorize", move |request| {
            let url = urls::parse(&request.url).expect("authorize URL");
            let mut seen = at_authorize.lock().expect("seen");
            seen.challenge = urls::param(&url, "code_challenge").unwrap_or_default();
            let redirect = format!(
                "{}?code=the-code&state={}",
                urls::param(&url, "redirect_uri").unwrap_or_default(),
                urls::encode(&urls::param(&url, "state").unwrap_or_default())
            );
            seen.authorizations.push(url);
            Response { status: 302, headers: vec![("Location".into(), redirect)], body: vec![] }
        })
        .on("POST", "http://as/token", move |request| {
            let form = urls::parse_form(std::str::from_utf8(&request.body).unwrap_or_default());
            let mut seen = at_token.lock().expect("seen");
            let value = |key: &str| form.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
            if let Some(verifier) = value("code_verifier") {
                assert_eq!(flow::Pkce::from_verifier(verifier).challenge, seen.challenge);
            }
            seen.issued += 1;
            seen.token_forms.push(form.clone());
            answer(200, json!({
                "access_token": format!("token-{}", seen.issued),
                "token_type": "Bearer",
                "expires_in": expires_in,
                "refresh_token": format!("refresh-{}", seen.issued),
            }))
        })
}

fn settings(dir: &Path, login: Login) -> Settings {
    Settings {
        login,
        dir: dir.to_owned(),
        // Never a developer's own keychain.
        token_store: TokenStore::File,
        ..Settings::from_env(&|_| None)
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-cli-oauth-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn challenge(status: u16, header: &str) -> Challenge {
    Challenge {
        url: RS.into(),
        status,
        www_authenticate: Some(header.into()),
        dpop_nonce: None,
    }
}

/// The `Authorization` value `oauth` supplies for a POST to the server.
async fn authorization(oauth: &OAuth) -> Result<Option<String>, String> {
    let request = mcp_smol::Outbound {
        method: "POST",
        url: RS,
        body: b"{}",
    };
    let headers = oauth.authorization(request).await?;
    let value = headers.iter().find(|(name, _)| name == "Authorization");
    Ok(value.map(|(_, value)| value.clone()))
}

#[test]
fn a_401_logs_in_and_the_token_is_used_and_kept() {
    let dir = temp_dir("login");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let oauth = OAuth::with_http(
        "fx",
        RS,
        settings(&dir, Login::Follow),
        Box::new(server(seen.clone(), 3600)),
    );
    async_io::block_on(async {
        assert_eq!(authorization(&oauth).await, Ok(None));
        let header =
            r#"Bearer resource_metadata="http://rs/.well-known/oauth-protected-resource/mcp""#;
        assert_eq!(oauth.challenged(&challenge(401, header)).await, Ok(true));
        assert_eq!(
            authorization(&oauth).await,
            Ok(Some("Bearer token-1".into()))
        );
    });
    let seen = seen.lock().expect("seen");
    let asked = &seen.authorizations[0];
    // No scope in the challenge: the resource's scopes_supported.
    assert_eq!(urls::param(asked, "scope").as_deref(), Some("read write"));
    assert_eq!(urls::param(asked, "resource").as_deref(), Some(RS));
    assert_eq!(urls::param(asked, "client_id").as_deref(), Some("dyn"));
    let kept = settings(&dir, Login::Never);
    assert!(has_token(&kept, "fx", RS));
    assert!(!has_token(&kept, "fx", "http://rs/other"));
    let mode = std::fs::metadata(store::path(&dir, "fx"))
        .expect("saved")
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
    let text = std::fs::read_to_string(store::path(&dir, "fx")).expect("saved");
    assert!(text.contains("\"client_id\": \"dyn\""), "{text}");

    // A new process uses the stored token without asking anyone.
    let quiet = Canned::default();
    let again = OAuth::with_http("fx", RS, settings(&dir, Login::Never), Box::new(quiet));
    assert_eq!(
        async_io::block_on(authorization(&again)),
        Ok(Some("Bearer token-1".into()))
    );
    assert!(reset(&kept, "fx", RS).expect("reset"));
    assert!(!has_token(&kept, "fx", RS));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn never_mode_does_not_log_in_and_expired_tokens_refresh() {
    let dir = temp_dir("refresh");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let never = OAuth::with_http(
        "fx",
        RS,
        settings(&dir, Login::Never),
        Box::new(server(seen.clone(), 10)),
    );
    assert_eq!(
        async_io::block_on(never.challenged(&challenge(401, "Bearer"))),
        Ok(false)
    );
    assert!(seen.lock().expect("seen").authorizations.is_empty());

    // A token within a minute of expiry is refreshed before use.
    let follow = OAuth::with_http(
        "fx",
        RS,
        settings(&dir, Login::Follow),
        Box::new(server(seen.clone(), 3600)),
    );
    async_io::block_on(async {
        assert_eq!(follow.challenged(&challenge(401, "Bearer")).await, Ok(true));
        assert_eq!(
            authorization(&follow).await,
            Ok(Some("Bearer token-1".into()))
        );
        let mut state = follow.state.lock().await;
        let tokens = state.record.as_mut().and_then(|r| r.tokens.as_mut());
        let tokens = tokens.expect("tokens");
        // An hour-long token, 30 s before it expires.
        tokens.expires_at = Some(store::now_secs() + 30);
        tokens.issued_at = Some(store::now_secs() - 3570);
        drop(state);
        assert_eq!(
            authorization(&follow).await,
            Ok(Some("Bearer token-2".into()))
        );
    });
    let seen = seen.lock().expect("seen");
    let last = seen.token_forms.last().expect("refresh");
    assert!(last.contains(&("grant_type".into(), "refresh_token".into())));
    assert!(last.contains(&("refresh_token".into(), "refresh-1".into())));
    assert!(last.contains(&("resource".into(), RS.into())));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_403_steps_up_with_the_union_of_scopes_once() {
    let dir = temp_dir("stepup");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let oauth = OAuth::with_http(
        "fx",
        RS,
        settings(&dir, Login::Follow),
        Box::new(server(seen.clone(), 3600)),
    );
    async_io::block_on(async {
        assert_eq!(
            oauth
                .challenged(&challenge(401, r#"Bearer scope="read""#))
                .await,
            Ok(true)
        );
        let more = challenge(403, r#"Bearer error="insufficient_scope", scope="write""#);
        assert_eq!(oauth.challenged(&more).await, Ok(true));
        // The same demand again: another login would not help.
        assert_eq!(oauth.challenged(&more).await, Ok(false));
        // A 403 that is not about scope is not ours to fix.
        assert_eq!(oauth.challenged(&challenge(403, "Bearer")).await, Ok(false));
    });
    let seen = seen.lock().expect("seen");
    let scopes: Vec<_> = seen
        .authorizations
        .iter()
        .map(|u| urls::param(u, "scope"))
        .collect();
    assert_eq!(scopes, [Some("read".into()), Some("read write".into())]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn logins_are_limited() {
    let dir = temp_dir("limit");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let oauth = OAuth::with_http(
        "fx",
        RS,
        settings(&dir, Login::Follow),
        Box::new(server(seen.clone(), 3600)),
    );
    let outcomes: Vec<_> = (0..4)
        .map(|n| {
            // A server that keeps asking for a new scope each time.
            let header = format!(r#"Bearer error="insufficient_scope", scope="s{n}""#);
            async_io::block_on(oauth.challenged(&challenge(403, &header)))
        })
        .collect();
    assert_eq!(outcomes[..3], [Ok(true), Ok(true), Ok(true)]);
    let error = outcomes[3].clone().expect_err("limit");
    assert!(error.contains("still refuses after 3 logins"), "{error}");
    assert_eq!(seen.lock().expect("seen").authorizations.len(), 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn errors_name_the_server_and_the_step() {
    let dir = temp_dir("errors");
    let oauth = OAuth::with_http(
        "fx",
        RS,
        settings(&dir, Login::Follow),
        Box::new(Canned::default().on(
            "GET",
            "http://rs/.well-known/oauth-protected-resource/mcp",
            |_| answer(200, json!({"resource": RS, "authorization_servers": []})),
        )),
    );
    let error = async_io::block_on(oauth.challenged(&challenge(401, "Bearer"))).expect_err("no AS");
    assert_eq!(
        error,
        "authorizing fx (http://rs/mcp): the protected-resource metadata at \
         http://rs/.well-known/oauth-protected-resource/mcp names no authorization server"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn debug_output_shows_no_secret() {
    let mut settings = settings(Path::new("/nowhere"), Login::Never);
    settings.client_secret = Some("hunter2".into());
    let oauth = OAuth::with_http("fx", RS, settings, Box::new(Canned::default()));
    let text = format!("{oauth:?}");
    assert!(
        text.contains("<secret>") && !text.contains("hunter2"),
        "{text}"
    );
}

#[test]
fn login_now_probes_the_server_for_its_challenge() {
    let dir = temp_dir("probe");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let guarded = server(seen.clone(), 3600).on("POST", RS, |_| Response {
        status: 401,
        headers: vec![("WWW-Authenticate".into(), r#"Bearer scope="write""#.into())],
        body: vec![],
    });
    let oauth = OAuth::with_http("fx", RS, settings(&dir, Login::Follow), Box::new(guarded));
    async_io::block_on(oauth.login_now()).expect("login");
    // A server that lets initialize through but publishes resource metadata: its scopes.
    let open = server(seen.clone(), 3600).on("POST", RS, |_| answer(200, json!({})));
    let oauth = OAuth::with_http("fx", RS, settings(&dir, Login::Follow), Box::new(open));
    async_io::block_on(oauth.login_now()).expect("login");
    let scopes: Vec<_> = (seen.lock().expect("seen").authorizations.iter())
        .map(|u| urls::param(u, "scope"))
        .collect();
    assert_eq!(scopes, [Some("write".into()), Some("write read".into())]);
    // One that publishes nothing needs no login.
    let plain = Canned::default().on("POST", RS, |_| answer(200, json!({})));
    let oauth = OAuth::with_http("fx", RS, settings(&dir, Login::Follow), Box::new(plain));
    let error = async_io::block_on(oauth.login_now()).expect_err("no login");
    assert!(error.ends_with("fx needs no login"), "{error}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_embedders_defaults_ignore_the_command_lines_variables() {
    let env = |key: &str| match key {
        "MCP_CLI_AUTH_FOLLOW" => Some("1".to_owned()),
        "MCP_CLI_OAUTH_CLIENT_ID" => Some("cli-client".to_owned()),
        "HOME" => Some("/home/a".to_owned()),
        _ => None,
    };
    let neutral = Settings::neutral(&env);
    assert_eq!((neutral.login, neutral.client_id), (Login::Never, None));
    assert_eq!(neutral.dir, Path::new("/home/a/.local/state/mcp-cli/auth"));
    // The command line still reads them.
    let cli = Settings::from_env(&env);
    assert_eq!(cli.login, Login::Follow);
    assert_eq!(cli.client_id.as_deref(), Some("cli-client"));
}

/// What a person does with the URL a browser login shows: opens it, and the authorization
/// server sends the browser back to our loopback with a code.
fn come_back(url: &str) {
    use std::io::{Read, Write};
    let url = urls::parse(url).expect("authorize URL");
    let redirect = urls::param(&url, "redirect_uri").expect("redirect_uri");
    let state = urls::param(&url, "state").expect("state");
    let rest = redirect.strip_prefix("http://").expect("loopback");
    let (address, path) = rest.split_once('/').expect("path");
    let mut stream = std::net::TcpStream::connect(address).expect("loopback listens");
    let request = format!(
        "GET /{path}?code=the-code&state={} HTTP/1.1\r\nHost: {address}\r\n\r\n",
        urls::encode(&state)
    );
    stream.write_all(request.as_bytes()).expect("sent");
    let _ = stream.read_to_end(&mut Vec::new());
}

#[test]
fn a_browser_login_shows_its_url_through_the_notice() {
    let dir = temp_dir("notice");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let prompts = Arc::new(Mutex::new(Vec::new()));
    let (record, at_authorize) = (prompts.clone(), seen.clone());
    let notice: LoginNotice = Arc::new(move |prompt: LoginPrompt| {
        if let LoginPrompt::Opening { url, .. } = &prompt {
            // What the authorization server would see, for its token endpoint to check.
            let parsed = urls::parse(url).expect("authorize URL");
            let challenge = urls::param(&parsed, "code_challenge").unwrap_or_default();
            at_authorize.lock().expect("seen").challenge = challenge;
            let url = url.clone();
            std::thread::spawn(move || come_back(&url));
        }
        record.lock().expect("prompts").push(prompt);
    });
    let settings = Settings {
        // An opener that succeeds and opens nothing: the notice is the only way in.
        browser: Some("true".to_owned()),
        notice: Some(notice),
        // Without the notice nobody comes back: the login then fails rather than hangs.
        login_timeout: Duration::from_secs(10),
        ..settings(&dir, Login::Browser)
    };
    let oauth = OAuth::with_http("fx", RS, settings, Box::new(server(seen.clone(), 3600)));
    async_io::block_on(async {
        let header =
            r#"Bearer resource_metadata="http://rs/.well-known/oauth-protected-resource/mcp""#;
        assert_eq!(oauth.challenged(&challenge(401, header)).await, Ok(true));
        assert_eq!(
            authorization(&oauth).await,
            Ok(Some("Bearer token-1".into()))
        );
    });
    let prompts = prompts.lock().expect("prompts");
    let [LoginPrompt::Opening { server, url, wait }] = prompts.as_slice() else {
        panic!("{prompts:?}");
    };
    assert_eq!(server, "fx");
    assert!(url.starts_with("http://as/authorize?"), "{url}");
    assert_eq!(*wait, Duration::from_secs(10));
    let _ = std::fs::remove_dir_all(dir);
}

/// The resource and authorization server of `server`, with `token` answering the token
/// endpoint and `extra` added to the server metadata.
fn canned_as(
    extra: serde_json::Value,
    token: impl Fn(&super::http::Request) -> Response + Send + Sync + 'static,
) -> Canned {
    let mut metadata = json!({
        "issuer": "http://as",
        "authorization_endpoint": "http://as/authorize",
        "token_endpoint": "http://as/token",
    });
    for (key, value) in extra.as_object().into_iter().flatten() {
        metadata[key] = value.clone();
    }
    Canned::default()
        .json(
            "http://rs/.well-known/oauth-protected-resource/mcp",
            json!({"resource": RS, "authorization_servers": ["http://as"]}),
        )
        .json("http://as/.well-known/oauth-authorization-server", metadata)
        .on("POST", "http://as/token", token)
}

fn form(request: &super::http::Request) -> Vec<(String, String)> {
    urls::parse_form(std::str::from_utf8(&request.body).unwrap_or_default())
}

fn has(form: &[(String, String)], key: &str, value: &str) -> bool {
    form.iter().any(|(k, v)| k == key && v == value)
}

#[test]
fn dpop_is_used_when_both_servers_offer_it_demanded_or_refused_by_the_setting() {
    let discovered = |algs: Option<&[&str]>, dpop: bool| Discovered {
        resource: RS.into(),
        scopes_supported: None,
        dpop,
        server: serde_json::from_value(json!({
            "issuer": "http://as",
            "authorization_endpoint": "http://as/authorize",
            "token_endpoint": "http://as/token",
            "dpop_signing_alg_values_supported": algs,
        }))
        .expect("metadata"),
    };
    let choose = |setting: Option<bool>, found: &Discovered| {
        let mut settings = settings(&temp_dir("dpop-choice"), Login::Never);
        settings.dpop = setting;
        let oauth = OAuth::with_http("fx", RS, settings, Box::new(Canned::default()));
        oauth.choose_dpop(found).map(|prover| prover.is_some())
    };
    let both = discovered(Some(&["RS256", "ES256"]), true);
    let only_as = discovered(Some(&["ES256"]), false);
    let no_es256 = discovered(Some(&["RS256"]), true);
    assert_eq!(choose(None, &both), Ok(true));
    assert_eq!(
        choose(None, &only_as),
        Ok(false),
        "the resource did not ask"
    );
    assert_eq!(choose(None, &no_es256), Ok(false));
    assert_eq!(choose(Some(false), &both), Ok(false));
    assert_eq!(choose(Some(true), &only_as), Ok(true));
    let error = choose(Some(true), &no_es256).expect_err("demanded, not offered");
    assert!(
        error.contains("takes no DPoP proofs signed with ES256"),
        "{error}"
    );
}

#[test]
fn a_dpop_login_binds_the_token_and_presents_it_with_a_fresh_proof() {
    let dir = temp_dir("dpop");
    let proofs = Arc::new(Mutex::new(Vec::new()));
    let seen = proofs.clone();
    let server = canned_as(
        json!({"dpop_signing_alg_values_supported": ["ES256"], "registration_endpoint": "http://as/register"}),
        move |request| {
            let proof = request.headers.iter().find(|(k, _)| k == "DPoP");
            seen.lock().expect("proofs").push(proof.map(|(_, v)| v.clone()));
            answer(200, json!({"access_token": "bound", "token_type": "DPoP", "expires_in": 3600}))
        },
    )
    .on("POST", "http://as/register", |_| answer(201, json!({"client_id": "dyn"})))
    .on("GET", "http://as/authorize", |request| {
        let url = urls::parse(&request.url).expect("url");
        let back = format!(
            "{}?code=c&state={}",
            urls::param(&url, "redirect_uri").unwrap_or_default(),
            urls::param(&url, "state").unwrap_or_default()
        );
        Response { status: 302, headers: vec![("Location".into(), back)], body: vec![] }
    });
    let oauth = OAuth::with_http("fx", RS, settings(&dir, Login::Follow), Box::new(server));
    async_io::block_on(async {
        let offer =
            r#"DPoP resource_metadata="http://rs/.well-known/oauth-protected-resource/mcp""#;
        assert_eq!(oauth.challenged(&challenge(401, offer)).await, Ok(true));
        let request = mcp_smol::Outbound {
            method: "POST",
            url: RS,
            body: b"{}",
        };
        let headers = oauth.authorization(request).await.expect("headers");
        assert_eq!(headers[0], ("Authorization".into(), "DPoP bound".into()));
        assert_eq!(headers[1].0, "DPoP");
        let again = oauth.authorization(request).await.expect("headers");
        assert_ne!(again[1], headers[1], "a fresh proof for each request");
        // The server's nonce: one more try, with the nonce in the next proof.
        oauth.nonce(RS, "n-7");
        let mut wants = challenge(401, r#"DPoP error="use_dpop_nonce""#);
        wants.dpop_nonce = Some("n-7".into());
        assert_eq!(oauth.challenged(&wants).await, Ok(true));
        let proof = &oauth.authorization(request).await.expect("headers")[1].1;
        let claims = proof.split('.').nth(1).expect("claims");
        use base64::Engine as _;
        let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(claims)
            .expect("b64");
        let claims: serde_json::Value = serde_json::from_slice(&claims).expect("json");
        assert_eq!(claims["nonce"], "n-7");
    });
    let proofs = proofs.lock().expect("proofs");
    assert!(
        proofs.len() == 1 && proofs[0].is_some(),
        "the token request proved the key"
    );
    // The key is kept with the token, and a new process takes both up.
    let record = store::Place {
        dir: dir.clone(),
        name: "fx".into(),
        url: RS.into(),
        choice: TokenStore::File,
    }
    .load()
    .expect("kept");
    assert!(record.dpop_key.is_some() && record.tokens.is_some_and(|t| t.dpop_bound));
    let later = OAuth::with_http(
        "fx",
        RS,
        settings(&dir, Login::Never),
        Box::new(Canned::default()),
    );
    let request = mcp_smol::Outbound {
        method: "GET",
        url: RS,
        body: b"",
    };
    let headers = async_io::block_on(later.authorization(request)).expect("headers");
    assert_eq!(headers.len(), 2, "{headers:?}");
    // Without its key a bound token is not sent at all.
    later.set_prover(None);
    assert_eq!(
        async_io::block_on(later.authorization(request)),
        Ok(Vec::new())
    );
}

#[test]
fn a_workload_jwt_refused_once_is_not_sent_again_and_no_other_grant_is_tried() {
    let dir = temp_dir("workload");
    std::fs::create_dir_all(&dir).expect("dir");
    let jwt = dir.join("workload.jwt");
    std::fs::write(&jwt, "e30.eyJhdWQiOiJodHRwOi8vYXMifQ.sig\n").expect("jwt");
    let forms = Arc::new(Mutex::new(Vec::new()));
    let seen = forms.clone();
    let server = canned_as(json!({}), move |request| {
        seen.lock().expect("forms").push(form(request));
        answer(
            400,
            json!({"error": "invalid_grant", "error_description": "JWT assertion is expired"}),
        )
    });
    let mut settings = settings(&dir, Login::Never);
    settings.grant = Grant::JwtBearer;
    settings.assertion = Some(Jwt::File(jwt.clone()));
    let oauth = OAuth::with_http("fx", RS, settings, Box::new(server));
    let first =
        async_io::block_on(oauth.challenged(&challenge(401, "Bearer"))).expect_err("refused");
    assert!(
        first.contains("the workload identity (JWT bearer) grant"),
        "{first}"
    );
    assert!(
        first.contains("invalid_grant (JWT assertion is expired)"),
        "{first}"
    );
    let second =
        async_io::block_on(oauth.challenged(&challenge(401, "Bearer"))).expect_err("again");
    assert!(
        second.contains("the same JWT is not sent again"),
        "{second}"
    );
    let forms = forms.lock().expect("forms");
    assert_eq!(
        forms.len(),
        1,
        "one token request, no retry, no other grant"
    );
    assert!(has(&forms[0], "grant_type", flow::JWT_BEARER));
    assert!(has(
        &forms[0],
        "assertion",
        "e30.eyJhdWQiOiJodHRwOi8vYXMifQ.sig"
    ));
    assert!(has(&forms[0], "resource", RS));
    assert!(
        !forms[0].iter().any(|(k, _)| k == "client_id"),
        "a workload has no client"
    );
    // The JWT never shows in a message.
    assert!(!first.contains("eyJhdWQ") && !second.contains("eyJhdWQ"));
}

#[test]
fn each_party_of_an_enterprise_grant_is_named_when_it_refuses() {
    let dir = temp_dir("enterprise");
    let run = |idp_answer: serde_json::Value, idp_status: u16, as_answer: serde_json::Value| {
        let (as_status, as_body) = (
            as_answer["status"].as_u64().unwrap_or(200),
            as_answer["body"].clone(),
        );
        let exchanged = Arc::new(Mutex::new(Vec::new()));
        let seen = exchanged.clone();
        let server = canned_as(json!({}), move |request| {
            assert!(has(&form(request), "grant_type", flow::JWT_BEARER));
            answer(as_status as u16, as_body.clone())
        })
        .json(
            "http://idp/.well-known/openid-configuration",
            json!({"issuer": "http://idp", "authorization_endpoint": "http://idp/authorize", "token_endpoint": "http://idp/token"}),
        )
        .on("POST", "http://idp/token", move |request| {
            seen.lock().expect("seen").push(form(request));
            answer(idp_status, idp_answer.clone())
        });
        let mut settings = settings(&dir, Login::Never);
        settings.grant = Grant::Enterprise;
        settings.client_id = Some("mcp-client".into());
        settings.client_secret = Some("s".into());
        settings.idp = Some(IdentityProvider {
            issuer: "http://idp".into(),
            client_id: Some("idp-client".into()),
            client_secret: None,
            id_token: Some(Jwt::Value("h.p.s".into())),
        });
        let oauth = OAuth::with_http("fx", RS, settings, Box::new(server));
        let outcome = async_io::block_on(oauth.challenged(&challenge(401, "Bearer")));
        let forms = exchanged.lock().expect("seen").clone();
        (outcome, forms)
    };
    let jag = json!({"access_token": "the.id.jag", "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag", "token_type": "N_A"});
    let ok = json!({"status": 200, "body": {"access_token": "at", "token_type": "Bearer"}});
    let (outcome, forms) = run(jag.clone(), 200, ok.clone());
    assert_eq!(outcome, Ok(true));
    assert!(has(&forms[0], "audience", "http://as") && has(&forms[0], "resource", RS));
    assert!(has(&forms[0], "subject_token", "h.p.s"));
    assert!(has(
        &forms[0],
        "subject_token_type",
        "urn:ietf:params:oauth:token-type:id_token"
    ));
    let (outcome, _) = run(
        json!({"error": "invalid_grant", "error_description": "Invalid ID token"}),
        400,
        ok.clone(),
    );
    let error = outcome.expect_err("the identity provider refuses");
    assert!(
        error.contains("the token exchange (identity provider http://idp)"),
        "{error}"
    );
    assert!(
        error.contains("invalid_grant (Invalid ID token)"),
        "{error}"
    );
    let refuse = json!({"status": 401, "body": {"error": "invalid_client"}});
    let error = run(jag, 200, refuse)
        .0
        .expect_err("the authorization server refuses");
    assert!(
        error.contains("the identity assertion grant (authorization server http://as)"),
        "{error}"
    );
    let untyped = json!({"access_token": "x", "token_type": "Bearer"});
    let error = run(untyped, 200, ok).0.expect_err("not an ID-JAG");
    assert!(error.contains("not an identity assertion grant"), "{error}");
}
