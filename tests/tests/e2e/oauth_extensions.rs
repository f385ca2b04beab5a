//! OAuth's extensions through the `mcp-cli` binary against `mcp-oauth-fixture`, on the paths
//! the conformance suite does not walk: DPoP-bound tokens (RFC 9449) kept, refreshed, with
//! nonces, turned off and demanded; workload identity (SEP-1933) with its refusals and a
//! rotated JWT; enterprise-managed authorization (SEP-990) with each party's refusal and one
//! login at the identity provider for every server behind it; a device login after a browser
//! login registering again for the device grant.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::oauth::{Fixture, configure};
use crate::support::{Run, Scratch};

/// The fixture's origin: its authorization server's issuer.
fn base(fixture: &Fixture) -> String {
    fixture.url.trim_end_matches("/mcp").to_owned()
}

/// GETs `path` on the fixture: the status line and the body.
fn get(fixture: &Fixture, path: &str) -> (String, String) {
    let authority = base(fixture).trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&authority).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

/// A JWT the fixture issues at `path` (its workload platform or its identity provider).
fn fixture_jwt(fixture: &Fixture, path: &str) -> String {
    let (status, body) = get(fixture, path);
    assert!(status.contains("200"), "{path}: {status}");
    body
}

/// How many requests reached the authorization server's and the identity provider's token
/// endpoints.
fn token_requests(fixture: &Fixture) -> (u64, u64) {
    let stats: Value = serde_json::from_str(&get(fixture, "/stats/tokens").1).unwrap();
    let count = |key: &str| stats[key].as_u64().unwrap();
    (count("token_requests"), count("idp_token_requests"))
}

/// `mcp-cli args` with `env`, no daemon: each run is the one process it looks like.
fn cli(scratch: &Scratch, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut env = env.to_vec();
    env.push(("MCP_CLI_NO_DAEMON", "1"));
    scratch.cli_with(args, &env, None)
}

fn auth_dir(scratch: &Scratch) -> PathBuf {
    scratch.0.join("state/mcp-cli/auth")
}

/// The token record of the one ad hoc `--http` server of the scratch folder.
fn adhoc_record(scratch: &Scratch) -> PathBuf {
    auth_dir(scratch).join("127_0_0_1.json")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap()
}

fn now_secs() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.unwrap().as_secs() as i64
}

/// Moves the stored token's expiry to `secs` from now (negative: already expired), as time
/// would.
fn age_token(record: &Path, secs: i64) {
    let mut kept = read_json(record);
    kept["tokens"]["expires_at"] = json!(now_secs() + secs);
    kept["tokens"]["issued_at"] = json!(now_secs() + secs - 3600);
    std::fs::write(record, kept.to_string()).unwrap();
}

/// Writes the user's own config file (no approval needed, unlike a project file).
fn user_config(scratch: &Scratch, text: &str) {
    let dir = scratch.0.join("config-home/mcp-cli");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

fn assert_ok(run: &Run, stdout: &str) {
    assert_eq!((run.code, run.stdout.as_str()), (0, stdout), "{run:?}");
}

fn assert_failed(run: &Run, expected: &[&str]) {
    assert_ne!(run.code, 0, "{run:?}");
    for text in expected {
        assert!(run.stderr.contains(text), "{text:?} not in {run:?}");
    }
}

// DPoP

#[test]
fn a_dpop_login_binds_the_token_and_the_next_process_proves_the_same_key() {
    let scratch = Scratch::new("oauth-ext-dpop");
    let fixture = Fixture::start("dpop", &scratch);
    let url = fixture.url.as_str();
    let login = cli(&scratch, &["--auth-follow", "--http", url, "tools"], &[]);
    assert_eq!(login.code, 0, "{login:?}");
    assert!(login.stdout.contains("whoami"), "{login:?}");
    let exchange = fixture.seen("token grant=authorization_code");
    assert_eq!(exchange.len(), 1, "{exchange:?}");
    assert!(exchange[0].ends_with("dpop=ok"), "{exchange:?}");
    let authorized = fixture.seen("mcp rpc=");
    // The first request has no token yet; every one after carries the bound token.
    assert!(authorized[0].ends_with("auth=none"), "{authorized:?}");
    assert!(authorized.len() > 2, "{authorized:?}");
    assert!(
        authorized[1..]
            .iter()
            .all(|line| line.ends_with("auth=dpop")),
        "{authorized:?}"
    );

    let record = adhoc_record(&scratch);
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&record).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let kept = read_json(&record);
    assert_eq!(kept["tokens"]["dpop_bound"], true, "{kept}");
    let key = kept["dpop_key"].as_str().unwrap_or_default();
    assert!(key.len() > 100, "the key pair is kept: {kept}");

    // Another process: the same token and key, the fixture checks its proofs; no new token.
    let call = cli(&scratch, &["--http", url, "call", "whoami"], &[]);
    assert_ok(&call, "scopes: read\n");
    assert_eq!(fixture.seen("token grant=").len(), 1);
    let calls = fixture.seen("mcp rpc=tools/call");
    assert_eq!(calls, ["mcp rpc=tools/call auth=dpop"]);
    assert_eq!(read_json(&record)["dpop_key"], key);
    let all = fixture.seen("mcp rpc=");
    assert!(
        all.iter()
            .all(|l| !l.contains("bearer") && !l.contains("rejected")),
        "{all:?}"
    );
    for run in [&login, &call] {
        assert!(!run.stderr.contains(key) && !run.stdout.contains(key));
    }
}

#[test]
fn an_expired_dpop_token_is_refreshed_with_a_proof_of_its_key() {
    let scratch = Scratch::new("oauth-ext-dpop-refresh");
    let fixture = Fixture::start("dpop", &scratch);
    let url = fixture.url.as_str();
    let login = cli(&scratch, &["--auth-follow", "--http", url, "tools"], &[]);
    assert_eq!(login.code, 0, "{login:?}");
    let record = adhoc_record(&scratch);
    let first = read_json(&record);
    age_token(&record, -5);
    let call = cli(&scratch, &["--http", url, "call", "whoami"], &[]);
    assert_ok(&call, "scopes: read\n");
    let refresh = fixture.seen("token grant=refresh_token");
    assert_eq!(refresh.len(), 1, "{refresh:?}");
    assert!(refresh[0].ends_with("dpop=ok"), "{refresh:?}");
    // The fixture refreshes a bound refresh token only for a proof of the same key.
    assert_eq!(fixture.seen("refresh bound key proved").len(), 1);
    assert!(fixture.seen("token refused").is_empty());
    let kept = read_json(&record);
    assert_ne!(
        kept["tokens"]["access_token"],
        first["tokens"]["access_token"]
    );
    assert_eq!(kept["tokens"]["dpop_bound"], true, "{kept}");
    assert_eq!(kept["dpop_key"], first["dpop_key"]);
    assert_eq!(
        fixture.seen("mcp rpc=tools/call"),
        ["mcp rpc=tools/call auth=dpop"]
    );
}

#[test]
fn dpop_nonces_from_both_ends_are_used_and_kept_up_to_date() {
    let scratch = Scratch::new("oauth-ext-dpop-nonce");
    // This mode's challenge is plain Bearer: its metadata's dpop_bound_access_tokens_required
    // is what asks for DPoP.
    let fixture = Fixture::start("dpop-nonce", &scratch);
    let url = fixture.url.as_str();
    let login = cli(
        &scratch,
        &["--auth-follow", "--http", url, "call", "whoami"],
        &[],
    );
    assert_ok(&login, "scopes: read\n");
    let exchange = fixture.seen("token grant=authorization_code");
    assert_eq!(exchange.len(), 2, "one retry with the nonce: {exchange:?}");
    assert!(exchange[0].ends_with("dpop=no-nonce"), "{exchange:?}");
    assert!(exchange[1].ends_with("dpop=ok"), "{exchange:?}");

    let requests = fixture.seen("mcp rpc=");
    let refused: Vec<&String> = (requests.iter())
        .filter(|line| line.ends_with("auth=dpop-no-nonce"))
        .collect();
    assert_eq!(refused.len(), 1, "{requests:?}");
    let nonces: Vec<&str> = (requests.iter())
        .filter_map(|line| line.split(" nonce=").nth(1))
        .collect();
    assert!(nonces.len() >= 3, "{requests:?}");
    // Each answer hands out a new nonce, and the next proof carries it: no two requests in a
    // row carry the same one.
    let mut unique = nonces.clone();
    unique.dedup();
    assert_eq!(unique, nonces, "{requests:?}");

    let again = cli(&scratch, &["--http", url, "call", "whoami"], &[]);
    assert_ok(&again, "scopes: read\n");
    assert_eq!(fixture.seen("token grant=").len(), 2, "no new token");
    let refused = fixture.seen("mcp rpc=initialize auth=dpop-no-nonce");
    assert_eq!(refused.len(), 1, "a new process learns the nonce once");
    let all = fixture.seen("mcp rpc=");
    assert!(all.iter().all(|l| !l.contains("rejected")), "{all:?}");
}

#[test]
fn dpop_turned_off_gets_a_bearer_token_and_demanded_without_es256_fails() {
    let scratch = Scratch::new("oauth-ext-dpop-off");
    let fixture = Fixture::start("dpop", &scratch);
    let url = fixture.url.as_str();
    let off = [("MCP_CLI_OAUTH_DPOP", "0")];
    let call = cli(
        &scratch,
        &["--auth-follow", "--http", url, "call", "whoami"],
        &off,
    );
    assert_ok(&call, "scopes: read\n");
    let exchange = fixture.seen("token grant=authorization_code");
    assert_eq!(exchange.len(), 1, "{exchange:?}");
    assert!(!exchange[0].contains("dpop="), "no proof: {exchange:?}");
    assert_eq!(
        fixture.seen("mcp rpc=tools/call"),
        ["mcp rpc=tools/call auth=bearer"]
    );
    let kept = read_json(&adhoc_record(&scratch));
    assert_eq!(kept["tokens"]["dpop_bound"], false, "{kept}");
    assert!(kept["dpop_key"].is_null(), "{kept}");

    // The same through a config entry's `oauth_dpop = false`.
    user_config(
        &scratch,
        &format!("[mcp.plain]\nurl = \"{url}\"\noauth_dpop = false\n"),
    );
    let login = cli(&scratch, &["--auth-follow", "auth", "plain"], &[]);
    assert_eq!(login.code, 0, "{login:?}");
    let call = cli(&scratch, &["call", "plain", "whoami"], &[]);
    assert_ok(&call, "scopes: read\n");
    let exchanges = fixture.seen("token grant=authorization_code");
    assert_eq!(exchanges.len(), 2, "{exchanges:?}");
    assert!(!exchanges[1].contains("dpop="), "{exchanges:?}");
    let kept = read_json(&auth_dir(&scratch).join("plain.json"));
    assert_eq!(kept["tokens"]["dpop_bound"], false, "{kept}");
    let calls = fixture.seen("mcp rpc=tools/call");
    assert_eq!(calls.len(), 2);
    assert!(
        calls.iter().all(|l| l.ends_with("auth=bearer")),
        "{calls:?}"
    );

    // Demanded of an authorization server that takes no proofs: a clear error, no token.
    let plain = Scratch::new("oauth-ext-dpop-demanded");
    let good = Fixture::start("good", &plain);
    let on = [("MCP_CLI_OAUTH_DPOP", "1")];
    let run = cli(
        &plain,
        &["--auth-follow", "--http", &good.url, "tools"],
        &on,
    );
    assert_failed(&run, &["takes no DPoP proofs", "ES256"]);
    assert!(good.seen("token grant=").is_empty());
}

#[test]
fn a_bound_token_whose_key_is_lost_is_never_sent_as_bearer() {
    let scratch = Scratch::new("oauth-ext-dpop-lost");
    let fixture = Fixture::start("dpop", &scratch);
    let url = fixture.url.as_str();
    let login = cli(&scratch, &["--auth-follow", "--http", url, "tools"], &[]);
    assert_eq!(login.code, 0, "{login:?}");
    let record = adhoc_record(&scratch);
    let mut kept = read_json(&record);
    kept.as_object_mut().unwrap().remove("dpop_key");
    std::fs::write(&record, kept.to_string()).unwrap();
    let call = cli(&scratch, &["--http", url, "call", "whoami"], &[]);
    // With the key gone only a new login helps, and none may start here.
    assert_eq!(call.code, 3, "{call:?}");
    assert!(call.stderr.contains("auth`"), "{call:?}");
    let requests = fixture.seen("mcp rpc=");
    assert!(
        requests.iter().all(|l| !l.contains("bearer")),
        "a bound token went out as Bearer: {requests:?}"
    );
    // Its refresh token is bound too: refreshing it without the key is refused.
    let refused = fixture.seen("token refused invalid_grant: the refresh token is DPoP-bound");
    assert_eq!(refused.len(), 1, "{requests:?}");
    assert!(
        fixture.seen("refresh bound key proved").is_empty(),
        "nothing could prove the lost key"
    );
}

// Workload identity

/// `mcp-cli --http URL` as a workload: the jwt_bearer grant with its JWT in `jwt_file`.
fn workload_env(jwt_file: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("MCP_CLI_OAUTH_GRANT", "jwt_bearer".into()),
        (
            "MCP_CLI_OAUTH_ASSERTION_FILE",
            jwt_file.display().to_string(),
        ),
    ]
}

fn workload_call(scratch: &Scratch, fixture: &Fixture, jwt_file: &Path, flags: &[&str]) -> Run {
    let env = workload_env(jwt_file);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut args = flags.to_vec();
    args.extend(["--http", &fixture.url, "call", "whoami"]);
    cli(scratch, &args, &env)
}

#[test]
fn a_workload_jwt_gets_tokens_without_a_login_and_a_rotated_file_is_read_again() {
    let scratch = Scratch::new("oauth-ext-workload");
    let fixture = Fixture::start("workload", &scratch);
    let first = fixture_jwt(&fixture, "/workload-jwt?sub=first&ttl=600");
    let jwt_file = scratch.write("workload.jwt", &format!("{first}\n"));
    // No login flag, no terminal: the workload needs no person.
    let call = workload_call(&scratch, &fixture, &jwt_file, &[]);
    assert_ok(&call, "scopes: read\n");
    assert_eq!(
        fixture.seen("jwt-bearer workload"),
        ["jwt-bearer workload sub=first client=none scope=read"]
    );
    assert!(fixture.seen("authorize").is_empty() && fixture.seen("register").is_empty());
    let record = adhoc_record(&scratch);
    let kept = std::fs::read_to_string(&record).unwrap();
    for text in [&call.stdout, &call.stderr, &kept] {
        assert!(!text.contains(&first), "the JWT leaked: {text}");
    }

    // The stored token serves the next process: no new grant.
    let again = workload_call(&scratch, &fixture, &jwt_file, &[]);
    assert_ok(&again, "scopes: read\n");
    assert_eq!(token_requests(&fixture).0, 1);

    // The platform rotates the file; once the token expires, the new JWT is the grant.
    let second = fixture_jwt(&fixture, "/workload-jwt?sub=second&ttl=600");
    std::fs::write(&jwt_file, &second).unwrap();
    age_token(&record, -5);
    let rotated = workload_call(&scratch, &fixture, &jwt_file, &[]);
    assert_ok(&rotated, "scopes: read\n");
    let grants = fixture.seen("jwt-bearer workload");
    assert_eq!(grants.len(), 2, "{grants:?}");
    assert!(grants[1].contains("sub=second"), "{grants:?}");

    // --stored-auth-only forbids logins, and a workload's grant is none.
    let fresh = Scratch::new("oauth-ext-workload-stored-only");
    let call = workload_call(&fresh, &fixture, &jwt_file, &["--stored-auth-only"]);
    assert_ok(&call, "scopes: read\n");
    assert_eq!(fixture.seen("jwt-bearer workload").len(), 3);
    assert!(fixture.seen("authorize").is_empty());
}

#[test]
fn a_refused_workload_jwt_is_surfaced_once_and_never_retried() {
    let scratch = Scratch::new("oauth-ext-workload-refused");
    let fixture = Fixture::start("workload", &scratch);
    for (query, error) in [
        ("sub=late&ttl=-60", "invalid_grant (the JWT expired)"),
        ("sub=narrow&ttl=600&refuse=invalid_scope", "invalid_scope"),
        (
            "sub=stranger&ttl=600&refuse=unauthorized_client",
            "unauthorized_client",
        ),
    ] {
        let jwt = fixture_jwt(&fixture, &format!("/workload-jwt?{query}"));
        let jwt_file = scratch.write("refused.jwt", &jwt);
        let before = token_requests(&fixture).0;
        let run = workload_call(&scratch, &fixture, &jwt_file, &[]);
        let endpoint = format!("{}/token", base(&fixture));
        let expected = format!(
            "the workload identity (JWT bearer) grant at {endpoint} failed: HTTP 400: {error}"
        );
        assert_failed(&run, &[&expected]);
        assert!(!run.stderr.contains(&jwt) && !run.stdout.contains(&jwt));
        // One token request: the refused JWT is not sent again, and no other grant is tried.
        assert_eq!(token_requests(&fixture).0, before + 1, "{query}: {run:?}");
        assert!(
            !adhoc_record(&scratch).exists(),
            "nothing kept for a refusal"
        );
    }
    assert!(fixture.seen("authorize").is_empty() && fixture.seen("register").is_empty());
    let grants = fixture.seen("token grant=");
    assert!(
        grants
            .iter()
            .all(|l| l.starts_with("token grant=urn:ietf:params:oauth:grant-type:jwt-bearer")),
        "{grants:?}"
    );
}

#[test]
fn a_workload_configured_in_the_config_file_reads_its_jwt_from_a_variable() {
    let scratch = Scratch::new("oauth-ext-workload-config");
    let fixture = Fixture::start("workload", &scratch);
    let jwt = fixture_jwt(&fixture, "/workload-jwt?sub=configured&ttl=600");
    user_config(
        &scratch,
        &format!(
            "[mcp.wl]\nurl = \"{}\"\noauth_grant = \"jwt_bearer\"\n\
             oauth_assertion_env = \"WL_JWT\"\n",
            fixture.url
        ),
    );
    let call = cli(&scratch, &["call", "wl", "whoami"], &[("WL_JWT", &jwt)]);
    assert_ok(&call, "scopes: read\n");
    assert_eq!(
        fixture.seen("jwt-bearer workload"),
        ["jwt-bearer workload sub=configured client=none scope=read"]
    );
    let kept = std::fs::read_to_string(auth_dir(&scratch).join("wl.json")).unwrap();
    assert!(!kept.contains(&jwt), "{kept}");
}

// Enterprise-managed authorization

/// The ad hoc environment of enterprise-managed authorization against `fixture`, with the
/// ID token in `id_token_file` and the authorization server's client secret `secret`.
fn enterprise_env(fixture: &Fixture, id_token_file: &Path, secret: &str) -> Vec<(String, String)> {
    [
        ("MCP_CLI_OAUTH_GRANT", "enterprise".to_owned()),
        ("MCP_CLI_OAUTH_IDP_ISSUER", format!("{}/idp", base(fixture))),
        ("MCP_CLI_OAUTH_IDP_CLIENT_ID", "idp-client".into()),
        ("MCP_CLI_OAUTH_IDP_CLIENT_SECRET", "idp-secret".into()),
        (
            "MCP_CLI_OAUTH_ID_TOKEN_FILE",
            id_token_file.display().to_string(),
        ),
        ("MCP_CLI_OAUTH_CLIENT_ID", "ent-client".into()),
        ("MCP_CLI_OAUTH_CLIENT_SECRET", secret.into()),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value))
    .collect()
}

fn enterprise_call(
    scratch: &Scratch,
    fixture: &Fixture,
    id_token_query: &str,
    secret: &str,
) -> Run {
    let id_token = fixture_jwt(fixture, &format!("/idp/id-token?{id_token_query}"));
    let file = scratch.write("id.jwt", &id_token);
    let env = enterprise_env(fixture, &file, secret);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let run = cli(scratch, &["--http", &fixture.url, "call", "whoami"], &env);
    assert!(!run.stderr.contains(&id_token) && !run.stdout.contains(&id_token));
    run
}

#[test]
fn enterprise_authorization_with_a_handed_id_token_exchanges_then_grants() {
    let scratch = Scratch::new("oauth-ext-enterprise");
    let fixture = Fixture::start("enterprise", &scratch);
    let run = enterprise_call(&scratch, &fixture, "sub=alice&ttl=600", "ent-secret");
    assert_ok(&run, "scopes: read\n");
    let issuer = base(&fixture);
    assert_eq!(
        fixture.seen("idp token grant=token-exchange"),
        [format!(
            "idp token grant=token-exchange audience={issuer} resource={issuer}/mcp scope=read \
             requested_token_type=urn:ietf:params:oauth:token-type:id-jag \
             subject_token_type=urn:ietf:params:oauth:token-type:id_token"
        )]
    );
    assert_eq!(
        fixture.seen("jwt-bearer"),
        ["jwt-bearer id-jag sub=alice client=ent-client"]
    );
    assert_eq!(
        fixture.seen("token grant="),
        [format!(
            "token grant=urn:ietf:params:oauth:grant-type:jwt-bearer resource={issuer}/mcp"
        )]
    );
    // A handed ID token needs no login at the identity provider, nor a registration here.
    assert!(fixture.seen("idp authorize").is_empty());
    assert!(fixture.seen("authorize").is_empty() && fixture.seen("register").is_empty());
    let kept = std::fs::read_to_string(adhoc_record(&scratch)).unwrap();
    assert!(
        !kept.contains("ent-secret") && !kept.contains("idp-secret"),
        "{kept}"
    );
}

#[test]
fn enterprise_refusals_name_the_party_that_refused() {
    let scratch = Scratch::new("oauth-ext-enterprise-refused");
    let fixture = Fixture::start("enterprise", &scratch);
    let issuer = base(&fixture);
    let exchange = format!(
        "the token exchange (identity provider {issuer}/idp) at {issuer}/idp/token failed: \
         HTTP 400: invalid_grant"
    );
    let expired = enterprise_call(&scratch, &fixture, "sub=alice&ttl=-60", "ent-secret");
    assert_failed(&expired, &[&exchange, "the ID token expired"]);
    let refused = enterprise_call(
        &scratch,
        &fixture,
        "sub=bob&ttl=600&exchange=refuse",
        "ent-secret",
    );
    assert_failed(&refused, &[&exchange, "policy forbids"]);
    // Neither reached the authorization server.
    assert_eq!(token_requests(&fixture), (0, 2));

    let wrong_secret = enterprise_call(&scratch, &fixture, "sub=alice&ttl=600", "guess");
    let grant = format!(
        "the identity assertion grant (authorization server {issuer}) at {issuer}/token failed: \
         HTTP 401: invalid_client"
    );
    assert_failed(&wrong_secret, &[&grant]);
    assert_eq!(
        fixture.seen("jwt-bearer"),
        ["jwt-bearer id-jag sub=alice client=bad"]
    );

    let mistyped = enterprise_call(
        &scratch,
        &fixture,
        "sub=alice&ttl=600&exchange=access_token",
        "ent-secret",
    );
    assert_failed(
        &mistyped,
        &[
            "issued a urn:ietf:params:oauth:token-type:access_token token, not an identity \
             assertion grant",
            "identity provider",
        ],
    );
    assert_eq!(
        token_requests(&fixture),
        (1, 4),
        "the mistyped grant went no further"
    );
}

#[test]
fn an_idp_login_is_kept_and_serves_every_server_behind_that_idp() {
    let scratch = Scratch::new("oauth-ext-enterprise-login");
    let fixture = Fixture::start("enterprise", &scratch);
    let issuer = base(&fixture);
    let entry = |name: &str| {
        format!(
            "[mcp.{name}]\nurl = \"{}\"\noauth_grant = \"enterprise\"\n\
             oauth_idp_issuer = \"{issuer}/idp\"\noauth_idp_client_id = \"idp-client\"\n\
             oauth_idp_client_secret_env = \"IDP_SECRET\"\noauth_client_id = \"ent-client\"\n\
             oauth_client_secret_env = \"ENT_SECRET\"\n",
            fixture.url
        )
    };
    user_config(&scratch, &format!("{}\n{}", entry("ent-a"), entry("ent-b")));
    let secrets = [("IDP_SECRET", "idp-secret"), ("ENT_SECRET", "ent-secret")];

    // Without a login at the identity provider, and none allowed: the server needs one.
    let before = cli(&scratch, &["call", "ent-a", "whoami"], &secrets);
    assert_eq!(before.code, 3, "{before:?}");
    assert!(
        before.stderr.contains("run `mcp-cli auth ent-a`"),
        "{before:?}"
    );
    assert!(fixture.seen("idp authorize").is_empty());
    assert_eq!(token_requests(&fixture), (0, 0));

    let login = cli(&scratch, &["--auth-follow", "auth", "ent-a"], &secrets);
    assert_eq!(login.code, 0, "{login:?}");
    let authorize = fixture.seen("idp authorize");
    assert_eq!(authorize.len(), 1, "{authorize:?}");
    // OpenID Connect at the identity provider: for the person, for no resource of ours.
    assert!(
        authorize[0].ends_with("client=idp-client scope=openid offline_access resource="),
        "{authorize:?}"
    );
    let call = cli(&scratch, &["call", "ent-a", "whoami"], &secrets);
    assert_ok(&call, "scopes: read\n");

    // The second server behind the same identity provider: no new login there, only a token
    // exchange and the grant.
    let other = cli(&scratch, &["call", "ent-b", "whoami"], &secrets);
    assert_ok(&other, "scopes: read\n");
    assert_eq!(fixture.seen("idp authorize").len(), 1);
    assert_eq!(fixture.seen("idp token grant=authorization_code").len(), 1);
    assert_eq!(fixture.seen("idp token grant=token-exchange").len(), 2);
    assert_eq!(
        fixture.seen("jwt-bearer"),
        [
            "jwt-bearer id-jag sub=alice client=ent-client",
            "jwt-bearer id-jag sub=alice client=ent-client"
        ]
    );
    let session = auth_dir(&scratch).join(format!(
        "{}.json",
        file_stem(&format!("identity provider {issuer}/idp"))
    ));
    let kept = read_json(&session);
    assert!(kept["tokens"]["refresh_token"].is_string(), "{kept}");
    assert!(
        !kept.to_string().contains("idp-secret"),
        "the secret is never written down: {kept}"
    );

    // Its ID token expired: the kept refresh token brings a new one, with no person.
    let mut aged = kept.clone();
    aged["tokens"]["id_token"] = json!(fixture_jwt(&fixture, "/idp/id-token?sub=alice&ttl=-120"));
    std::fs::write(&session, aged.to_string()).unwrap();
    std::fs::remove_file(auth_dir(&scratch).join("ent-b.json")).unwrap();
    let refreshed = cli(&scratch, &["call", "ent-b", "whoami"], &secrets);
    assert_ok(&refreshed, "scopes: read\n");
    assert_eq!(fixture.seen("idp token grant=refresh_token").len(), 1);
    assert_eq!(fixture.seen("idp token grant=token-exchange").len(), 3);
    assert_eq!(fixture.seen("idp authorize").len(), 1);
    assert!(fixture.seen("idp token refused").is_empty());

    // The login there revoked: no person to log in again, so the error says where to.
    let mut revoked = read_json(&session);
    revoked["tokens"]["id_token"] = aged["tokens"]["id_token"].clone();
    revoked["tokens"]["refresh_token"] = json!("revoked");
    std::fs::write(&session, revoked.to_string()).unwrap();
    std::fs::remove_file(auth_dir(&scratch).join("ent-b.json")).unwrap();
    let revoked = cli(&scratch, &["call", "ent-b", "whoami"], &secrets);
    assert_failed(
        &revoked,
        &[&format!(
            "ent-b needs a login at the identity provider {issuer}/idp: run `mcp-cli auth ent-b`"
        )],
    );
    assert_eq!(
        fixture.seen("idp token refused"),
        ["idp token refused invalid_grant: unknown refresh token"]
    );
    assert_eq!(fixture.seen("idp authorize").len(), 1);
}

/// `name` as mcp-cli names its files: letters, digits, `-` and `_` kept, `.` kept but first,
/// every other byte `%` and hex.
fn file_stem(name: &str) -> String {
    let mut stem = String::new();
    for (at, c) in name.char_indices() {
        if c.is_ascii_alphanumeric() || "-_".contains(c) || (c == '.' && at > 0) {
            stem.push(c);
        } else {
            for byte in c.to_string().bytes() {
                stem.push_str(&format!("%{byte:02X}"));
            }
        }
    }
    stem
}

// The device grant's registration

#[test]
fn a_device_login_after_a_browser_login_registers_again_for_the_device_grant() {
    let scratch = Scratch::new("oauth-ext-device-registration");
    let fixture = Fixture::start("good", &scratch);
    configure(&scratch, &fixture);
    let login = cli(&scratch, &["--auth-follow", "auth", "fx"], &[]);
    assert_eq!(login.code, 0, "{login:?}");
    assert_eq!(
        fixture.seen("register"),
        ["register client-1 grants=authorization_code,refresh_token"]
    );

    let mut device = scratch
        .command(&["auth", "fx", "--device"])
        .env("MCP_CLI_NO_DAEMON", "1")
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(device.stderr.take().unwrap());
    let mut transcript = String::new();
    let code = loop {
        let mut line = String::new();
        let read = stderr.read_line(&mut line).unwrap();
        assert!(read > 0, "stderr ended before the code:\n{transcript}");
        transcript.push_str(&line);
        if line.contains("enter the code") {
            break line.split_whitespace().last().unwrap().to_owned();
        }
    };
    let (status, _) = get(
        &fixture,
        &format!("/device?user_code={code}&action=approve"),
    );
    assert!(status.contains("200"), "{status}");
    stderr.read_to_string(&mut transcript).unwrap();
    let output = device.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{transcript}");
    // The browser login's registration lacked the device grant (the fixture would have refused
    // it `unauthorized_client`): a new one names it.
    let registrations = fixture.seen("register");
    assert_eq!(registrations.len(), 2, "{registrations:?}");
    assert!(
        registrations[1].ends_with(
            " grants=authorization_code,refresh_token,urn:ietf:params:oauth:grant-type:device_code"
        ),
        "{registrations:?}"
    );
    assert!(fixture.seen("device refused").is_empty());
    assert_eq!(fixture.seen("token grant=device_code").len(), 1);
    let call = cli(
        &scratch,
        &["--stored-auth-only", "call", "fx", "whoami"],
        &[],
    );
    assert_ok(&call, "scopes: read\n");
}
