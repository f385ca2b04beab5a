//! The HTTP transports through `mcp_smol::connect` with an `HttpServer`: the real server-everything in its
//! Streamable HTTP and SSE modes, and `mcp-http-fixture` for HTTPS and for every way an HTTP
//! server can misbehave. Each failure must be a clear error naming its cause, and close must
//! leave no socket open.

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcp_smol::proto::{CloseReason, Request, RequestError};
use mcp_smol::{
    Authorizer, Challenge, Client, Error, HttpServer, HttpTransport, Options, Outbound, connect,
};
use serde_json::json;

use crate::support::{Scratch, bounded, text};

/// What [`Authorizer`]'s methods return.
type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The headers of an `Authorization: VALUE`.
fn bearer(value: &str) -> Vec<(String, String)> {
    vec![("Authorization".to_owned(), value.to_owned())]
}

const HTTP_FIXTURE: &str = env!("CARGO_BIN_EXE_mcp-http-fixture");

/// Long budgets: a failure must come from the cause, at once, not from a timeout.
fn patient() -> Options {
    let defaults = Options::default();
    Options {
        core: mcp_smol::proto::Config {
            handshake_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(60),
            ..defaults.core
        },
        grace_period: Duration::from_secs(2),
        ..defaults
    }
}

/// A server process that is killed when the test ends, however it ends.
pub(crate) struct Server {
    child: Child,
    pub(crate) port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `mcp-http-fixture MODE` with extra arguments; waits for its port.
pub(crate) fn fixture(mode: &str, extra: &[&str]) -> Server {
    let mut child = Command::new(HTTP_FIXTURE)
        .arg(mode)
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().strip_prefix("PORT ").unwrap().parse().unwrap();
    Server { child, port }
}

/// server-everything in `mode` (`streamableHttp` or `sse`) on a free port, its stdout (its
/// log) going to `log`.
fn everything_logged(mode: &str, log: Stdio) -> Server {
    let bin = mcp_tests::npm_bin();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(bin.join("mcp-server-everything"))
        .arg(mode)
        .env("PORT", port.to_string())
        .stdout(log)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server { child, port };
    // Node takes a moment to listen; bounded, and a refused connect is the only wait.
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "server-everything {mode} did not listen on {port} within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

fn everything(mode: &str) -> Server {
    everything_logged(mode, Stdio::null())
}

fn server(url: String) -> HttpServer {
    HttpServer::new(url)
}

/// Our sockets still connected (or half-closed) to `port`, from /proc/net/tcp{,6}.
fn sockets_to(port: u16) -> usize {
    let mut count = 0;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(remote), Some(state)) = (fields.get(2), fields.get(3)) else {
                continue;
            };
            let remote_port = remote.rsplit(':').next().unwrap_or_default();
            // 01 established, 08 close-wait: a socket someone still holds.
            if u16::from_str_radix(remote_port, 16) == Ok(port) && matches!(*state, "01" | "08") {
                count += 1;
            }
        }
    }
    count
}

/// Closes the client and checks no socket of ours to the server is left.
pub(crate) async fn close_and_check(client: &Client, port: u16) {
    client.close().await;
    assert_eq!(
        sockets_to(port),
        0,
        "a socket to port {port} outlived close"
    );
}

fn transport_reason(error: &Error) -> String {
    match error {
        Error::Disconnected(disconnect) => match &disconnect.reason {
            CloseReason::Transport(reason) => reason.clone(),
            other => panic!("not a transport failure: {other:?}"),
        },
        Error::Http { url, detail } => format!("{url}: {detail}"),
        other => panic!("not a transport failure: {other:?}"),
    }
}

/// Calls `echo` and expects the transport to fail it; returns the failure's text.
async fn echo_fails_in_transport(client: &mcp_smol::Client) -> String {
    let error = client
        .call_tool("echo", json!({"message": "x"}))
        .await
        .unwrap_err();
    let Error::Request(RequestError::Transport(detail)) = error else {
        panic!("{error:?}");
    };
    detail
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn everything_over_streamable_http() {
    let scratch = Scratch::new("http-everything");
    let log = scratch.0.join("stdout.log");
    let stdout = Stdio::from(std::fs::File::create(&log).unwrap());
    let everything = everything_logged("streamableHttp", stdout);
    let url = format!("http://127.0.0.1:{}/mcp", everything.port);
    bounded(async {
        let client = connect(server(url), patient()).await.unwrap();
        assert_eq!(client.pid(), 0);
        let tools = client.list_tools().await.unwrap();
        assert!(tools.iter().any(|tool| tool.name == "echo"), "{tools:?}");
        let echoed = client
            .call_tool("echo", json!({"message": "over http"}))
            .await
            .unwrap();
        assert!(text(&echoed).contains("over http"), "{}", text(&echoed));

        // Calls side by side, each on a POST of its own, each with its own answer.
        let calls: Vec<_> = (0..20)
            .map(|n| {
                let client = client.clone();
                smol::spawn(async move {
                    let message = format!("call {n}");
                    let result = client.call_tool("echo", json!({"message": message}));
                    (message, result.await.unwrap())
                })
            })
            .collect();
        for call in calls {
            let (message, result) = call.await;
            assert!(text(&result).ends_with(&message), "{}", text(&result));
        }

        // Progress arrives on the call's own event stream, before its answer.
        let notifications = client.notifications().await;
        let call = Request::call_tool(
            "trigger-long-running-operation",
            json!({"duration": 0.4, "steps": 4}),
        );
        let result = client.request(call).await.unwrap();
        assert!(text(&result).contains("Steps: 4"), "{}", text(&result));
        let mut progress = 0;
        while let Ok(notification) = notifications.try_recv() {
            if notification.method == "notifications/progress" {
                progress += 1;
            }
        }
        assert_eq!(progress, 4);
        close_and_check(&client, everything.port).await;
    });
    // Close ended the session with DELETE (the server logs each one it gets).
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.contains("Received session termination request for session "),
        "{said}"
    );
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn everything_over_legacy_sse_explicitly_and_by_fallback() {
    let everything = everything("sse");
    let url = format!("http://127.0.0.1:{}/sse", everything.port);
    bounded(async {
        for transport in [HttpTransport::Sse, HttpTransport::Auto] {
            let server = HttpServer {
                transport,
                ..server(url.clone())
            };
            let client = connect(server, patient()).await.unwrap();
            let tools = client.list_tools().await.unwrap();
            assert!(tools.iter().any(|tool| tool.name == "echo"), "{tools:?}");
            let echoed = client
                .call_tool("echo", json!({"message": "over sse"}))
                .await
                .unwrap();
            assert!(text(&echoed).contains("over sse"), "{}", text(&echoed));
            close_and_check(&client, everything.port).await;
        }
    });
}

#[test]
fn a_16_mib_result_and_one_over_the_limit() {
    let fixture = fixture("good", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let client = connect(server(url.clone()), patient()).await.unwrap();
        let bytes = 16 * 1024 * 1024;
        let result = client
            .call_tool("big", json!({"bytes": bytes}))
            .await
            .unwrap();
        assert_eq!(text(&result).len(), bytes);
        close_and_check(&client, fixture.port).await;

        let mut small = patient();
        small.core.max_line_len = 1024 * 1024;
        let client = connect(server(url), small).await.unwrap();
        let error = client
            .call_tool("big", json!({"bytes": 2 * 1024 * 1024}))
            .await
            .unwrap_err();
        assert!(
            matches!(error, Error::Request(RequestError::ResponseTooLarge { limit, .. }) if limit == 1024 * 1024),
            "{error:?}"
        );
        // The connection goes on.
        assert_eq!(client.list_tools().await.unwrap().len(), 2);
        close_and_check(&client, fixture.port).await;
    });
}

#[test]
fn answers_as_event_streams_carry_progress_first() {
    let fixture = fixture("sse", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let client = connect(server(url), patient()).await.unwrap();
        let notifications = client.notifications().await;
        let result = client
            .call_tool("echo", json!({"message": "streamed"}))
            .await
            .unwrap();
        assert_eq!(text(&result), "streamed");
        let note = notifications.try_recv().unwrap();
        assert_eq!(note.method, "notifications/progress");
        close_and_check(&client, fixture.port).await;
    });
}

#[test]
fn close_ends_the_session_with_delete() {
    let scratch = Scratch::new("http-delete");
    let log = scratch.0.join("requests.log");
    let fixture = fixture("good", &["--log", log.to_str().unwrap()]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let client = connect(server(url), patient()).await.unwrap();
        client.list_tools().await.unwrap();
        close_and_check(&client, fixture.port).await;
    });
    let requests = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = requests.lines().collect();
    let at = |start: &str| {
        let found = lines.iter().position(|line| line.starts_with(start));
        found.unwrap_or_else(|| panic!("no {start:?} in\n{requests}"))
    };
    // The era's probe, refused by this handshake-era server, then `initialize`; `initialized`
    // is over before anything else goes out; DELETE comes after the work.
    assert_eq!(
        at("POST /mcp rpc=server/discover session=-"),
        0,
        "{requests}"
    );
    assert_eq!(at("POST /mcp rpc=initialize session=-"), 1, "{requests}");
    assert_eq!(
        at("POST /mcp rpc=notifications/initialized session=s1"),
        2,
        "{requests}"
    );
    assert!(at("POST /mcp rpc=tools/list session=s1") < at("DELETE /mcp rpc=- session=s1"));
}

/// Runs a `tools/list` and then a call against fixture `mode`, whose server forgets the
/// session in between; returns the fixture's request log.
fn call_after_the_session_is_forgotten(mode: &str) -> String {
    let scratch = Scratch::new(&format!("http-{mode}"));
    let log = scratch.0.join("requests.log");
    let fixture = fixture(mode, &["--log", log.to_str().unwrap()]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let client = connect(server(url), patient()).await.unwrap();
        client.list_tools().await.unwrap();
        // The server has forgotten session s1: this call is refused, then goes to a new one.
        let result = client
            .call_tool("echo", json!({"message": "again"}))
            .await
            .unwrap();
        assert_eq!(text(&result), "again");
        close_and_check(&client, fixture.port).await;
    });
    let requests = std::fs::read_to_string(&log).unwrap();
    assert_eq!(requests.matches("rpc=initialize").count(), 2, "{requests}");
    requests
}

#[test]
fn a_forgotten_session_is_started_again_and_the_request_resent() {
    let requests = call_after_the_session_is_forgotten("session-404");
    assert!(requests.contains("rpc=tools/call session=s"), "{requests}");
}

/// The Python SDK's servers take `initialized` in slowly and refuse a request that overtakes
/// it (the `python-404` fixture does both): the resent call must wait for it.
#[test]
fn a_request_resent_in_a_new_session_waits_for_its_initialized_notification() {
    let requests = call_after_the_session_is_forgotten("python-404");
    let lines: Vec<&str> = requests.lines().collect();
    let last = |rpc: &str| {
        let found = lines.iter().rposition(|line| line.contains(rpc));
        found.unwrap_or_else(|| panic!("no {rpc:?} in\n{requests}"))
    };
    assert!(
        last("rpc=notifications/initialized") < last("rpc=tools/call"),
        "{requests}"
    );
}

/// server-everything's and the TypeScript SDK's answer to a session they do not know.
const NO_VALID_SESSION: &str = r#"HTTP 400 Bad Request: {"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}"#;

#[test]
fn a_restarted_server_s_400_for_the_session_starts_a_new_one_and_resends() {
    let scratch = Scratch::new("http-400");
    let before = scratch.0.join("before.log");
    let after = scratch.0.join("after.log");
    let first = fixture("session-400", &["--log", before.to_str().unwrap()]);
    let port = first.port.to_string();
    let url = format!("http://127.0.0.1:{port}/mcp");
    bounded(async {
        let client = connect(server(url.clone()), patient()).await.unwrap();
        client.list_tools().await.unwrap();
        // The server restarts where it was, knowing no session.
        drop(first);
        let log = after.to_str().unwrap();
        let again = fixture("session-400", &["--port", &port, "--log", log]);
        let result = client
            .call_tool("echo", json!({"message": "again"}))
            .await
            .unwrap();
        assert_eq!(text(&result), "again");
        close_and_check(&client, again.port).await;
    });
    let requests = std::fs::read_to_string(&after).unwrap();
    assert!(
        requests.starts_with("POST /mcp rpc=tools/call session=s1 "),
        "{requests}"
    );
    assert_eq!(requests.matches("rpc=initialize").count(), 1, "{requests}");
    assert_eq!(requests.matches("rpc=tools/call").count(), 2, "{requests}");
}

#[test]
fn a_400_for_the_session_in_the_new_session_too_fails_the_call_without_looping() {
    refused_in_the_new_session_too("call-400", NO_VALID_SESSION);
}

#[test]
fn a_server_that_refuses_every_session_fails_the_connection_after_one_more() {
    let scratch = Scratch::new("http-no-sessions");
    let log = scratch.0.join("requests.log");
    let fixture = fixture("no-sessions", &["--log", log.to_str().unwrap()]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let client = connect(server(url.clone()), patient()).await.unwrap();
        let error = client.list_tools().await.unwrap_err();
        assert_eq!(
            transport_reason(&error),
            format!(
                "POST {url}: {NO_VALID_SESSION}, in a new session that had answered nothing yet"
            )
        );
        close_and_check(&client, fixture.port).await;
    });
    let requests = std::fs::read_to_string(&log).unwrap();
    assert_eq!(requests.matches("rpc=initialize").count(), 2, "{requests}");
}

#[test]
fn an_html_page_fails_the_connection_naming_it() {
    let fixture = fixture("html", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let error = connect(server(url.clone()), patient()).await.unwrap_err();
        let reason = transport_reason(&error);
        assert!(
            reason.starts_with(&format!("POST {url}: HTTP 200 OK with text/html")),
            "{reason}"
        );
        assert!(reason.contains("<!DOCTYPE html>"), "{reason}");
        assert_eq!(sockets_to(fixture.port), 0);
    });
}

#[test]
fn a_wrong_content_type_fails_the_connection_naming_it() {
    let fixture = fixture("wrong-type", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let error = connect(server(url), patient()).await.unwrap_err();
        let reason = transport_reason(&error);
        assert!(
            reason.contains("text/plain, not JSON or an event stream"),
            "{reason}"
        );
        assert!(reason.contains("hello from a plain web server"), "{reason}");
    });
}

#[test]
fn a_redirect_loop_is_cut_short() {
    let fixture = fixture("redirect-loop", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let error = connect(server(url), patient()).await.unwrap_err();
        assert!(matches!(error, Error::Http { .. }), "{error:?}");
        assert!(error.to_string().contains("redirect loop"), "{error}");
        assert_eq!(sockets_to(fixture.port), 0);
    });
}

#[test]
fn a_500_fails_that_call_and_the_connection_goes_on() {
    let fixture = fixture("fail-call", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let client = connect(server(url.clone()), patient()).await.unwrap();
        let detail = echo_fails_in_transport(&client).await;
        assert_eq!(
            &detail,
            &format!(
                "POST {url}: HTTP 500 Internal Server Error: boom: the tool crashed at line 1"
            )
        );
        assert_eq!(client.list_tools().await.unwrap().len(), 2);
        close_and_check(&client, fixture.port).await;
    });
}

/// A stateless-era refusal longer than what an error message quotes, arriving in pieces, is
/// read whole: the request fails with the server's JSON-RPC error, not as a broken exchange.
#[test]
fn a_refusal_arriving_in_pieces_is_read_whole() {
    let fixture = fixture("stateless-slow-refusal", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let client = connect(server(url), patient()).await.unwrap();
        let request = Request::new("prompts/list", None).untyped();
        let error = client.request(request).await.unwrap_err();
        let Error::Request(RequestError::Remote(error)) = &error else {
            panic!("the server's error, not {error:?}");
        };
        assert_eq!(error.code, -32601);
        assert_eq!(error.message, "Method not found: prompts/list");
        let detail = &error.data.as_ref().unwrap()["detail"];
        assert_eq!(detail.as_str().map(str::len), Some(1024));
        client.close().await;
    });
}

#[test]
fn a_stream_cut_before_the_answer_fails_the_call_at_once() {
    let fixture = fixture("truncated", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let client = connect(server(url), patient()).await.unwrap();
        let detail = echo_fails_in_transport(&client).await;
        assert!(
            detail.contains("the event stream ended before the answer, with no event id"),
            "{detail}"
        );
        close_and_check(&client, fixture.port).await;
    });
}

#[test]
fn a_stream_cut_with_an_event_id_resumes_with_last_event_id() {
    let scratch = Scratch::new("http-resume");
    let log = scratch.0.join("requests.log");
    let fixture = fixture("resume", &["--log", log.to_str().unwrap()]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let client = connect(server(url), patient()).await.unwrap();
        let result = client
            .call_tool("echo", json!({"message": "x"}))
            .await
            .unwrap();
        assert_eq!(text(&result), "resumed");
        close_and_check(&client, fixture.port).await;
    });
    let requests = std::fs::read_to_string(&log).unwrap();
    assert!(
        requests.contains("GET /mcp rpc=- session=s1 last-event-id=e1"),
        "{requests}"
    );
}

#[test]
fn unauthorized_without_an_authorizer() {
    let fixture = fixture("unauthorized", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let error = connect(server(url.clone()), patient()).await.unwrap_err();
        let Error::Unauthorized {
            url: refused,
            status,
            www_authenticate,
        } = &error
        else {
            panic!("{error:?}");
        };
        assert_eq!((refused.as_str(), *status), (url.as_str(), 401));
        assert!(
            www_authenticate
                .as_deref()
                .unwrap()
                .starts_with("Bearer resource_metadata=")
        );
        assert!(
            error.to_string().contains("needs authorization (HTTP 401)"),
            "{error}"
        );
    });
}

/// Offers a token and, when challenged, says it got a new one.
#[derive(Debug, Default)]
struct Eager {
    challenges: AtomicUsize,
}

impl Authorizer for Eager {
    fn authorization<'a>(
        &'a self,
        _request: Outbound<'a>,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, String>> {
        Box::pin(async { Ok(bearer("Bearer stale")) })
    }

    fn challenged<'a>(&'a self, challenge: &'a Challenge) -> BoxFuture<'a, Result<bool, String>> {
        assert_eq!(challenge.status, 401);
        self.challenges.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(true) })
    }
}

#[test]
fn an_authorizer_gets_one_more_try_then_unauthorized() {
    let fixture = fixture("unauthorized", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let authorizer = Arc::new(Eager::default());
        let server = HttpServer {
            authorizer: Some(authorizer.clone()),
            ..server(url)
        };
        let error = connect(server, patient()).await.unwrap_err();
        assert!(
            matches!(error, Error::Unauthorized { status: 401, .. }),
            "{error:?}"
        );
        assert_eq!(authorizer.challenges.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_refused_connection_is_an_http_error() {
    // Port 1 (tcpmux) is served nowhere any more, and no test picks it: a free port found by
    // binding could be handed to another test's server in the meantime.
    let port = 1;
    bounded(async {
        let url = format!("http://127.0.0.1:{port}/mcp");
        let error = connect(server(url), patient()).await.unwrap_err();
        let Error::Http { detail, .. } = &error else {
            panic!("{error:?}");
        };
        assert!(detail.contains("cannot connect to 127.0.0.1"), "{detail}");
    });
}

/// A certificate authority and a server certificate for 127.0.0.1 and localhost, as PEM files.
fn certificates(scratch: &Scratch) -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, &ca_key);
    let key = KeyPair::generate().unwrap();
    let params =
        CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let ca_file = scratch.write("ca.pem", &ca.pem());
    let cert_file = scratch.write("server.pem", &cert.pem());
    let key_file = scratch.write("server.key", &key.serialize_pem());
    let path = |p: std::path::PathBuf| p.to_str().unwrap().to_owned();
    (path(ca_file), path(cert_file), path(key_file))
}

/// `mcp-http-fixture probe URL` with these environment changes: (exit code, stdout).
fn probe(url: &str, env: &[(&str, &str)]) -> (i32, String) {
    let mut command = Command::new(HTTP_FIXTURE);
    command.args(["probe", url]);
    for (name, value) in env {
        command.env(name, value);
    }
    command.env_remove("SSL_CERT_DIR");
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status.code().unwrap_or(-1), stdout)
}

#[test]
fn https_with_a_trusted_authority_and_without() {
    let scratch = Scratch::new("http-tls");
    let (ca, cert, key) = certificates(&scratch);
    let fixture = fixture("good", &["--cert", &cert, "--key", &key]);
    let url = format!("https://127.0.0.1:{}/mcp", fixture.port);

    let (code, stdout) = probe(&url, &[("SSL_CERT_FILE", &ca)]);
    assert_eq!((code, stdout.trim()), (0, "TOOLS echo big"));

    // The system's roots do not include the test's authority.
    let (code, stdout) = probe(&url, &[]);
    assert_eq!(code, 3, "{stdout}");
    assert!(
        stdout.contains("TLS: certificate not trusted (issued by an unknown authority)"),
        "{stdout}"
    );
}

/// Holds a token that is refused until a challenge swaps it for a good one; gives up on
/// scope step-ups.
#[derive(Debug)]
struct Swapping {
    token: std::sync::Mutex<String>,
}

impl Authorizer for Swapping {
    fn authorization<'a>(
        &'a self,
        _request: Outbound<'a>,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, String>> {
        let token = self.token.lock().unwrap().clone();
        Box::pin(async move { Ok(bearer(&token)) })
    }

    fn challenged<'a>(&'a self, challenge: &'a Challenge) -> BoxFuture<'a, Result<bool, String>> {
        let fixed = challenge.status == 401;
        if fixed {
            *self.token.lock().unwrap() = "Bearer good".to_owned();
        }
        Box::pin(async move { Ok(fixed) })
    }
}

#[test]
fn an_authorizer_fixes_a_401_and_a_refused_step_up_fails_only_that_call() {
    let fixture = fixture("token", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let authorizer = Arc::new(Swapping {
            token: std::sync::Mutex::new("Bearer stale".to_owned()),
        });
        let server = HttpServer {
            authorizer: Some(authorizer),
            ..server(url.clone())
        };
        let client = connect(server, patient()).await.unwrap();
        assert_eq!(client.list_tools().await.unwrap().len(), 2);
        let error = client.call_tool("secret", json!({})).await.unwrap_err();
        let Error::Unauthorized {
            status,
            www_authenticate,
            ..
        } = &error
        else {
            panic!("{error:?}");
        };
        assert_eq!(*status, 403);
        assert!(
            www_authenticate
                .as_deref()
                .unwrap()
                .contains("insufficient_scope")
        );
        let echoed = client
            .call_tool("echo", json!({"message": "still here"}))
            .await
            .unwrap();
        assert_eq!(text(&echoed), "still here");
        close_and_check(&client, fixture.port).await;
    });
}

/// Logs in on a 401 and widens its scope on a 403, as OAuth does; `expire` makes the token
/// stale, as time would.
#[derive(Debug)]
struct Laddered {
    token: std::sync::Mutex<&'static str>,
}

impl Authorizer for Laddered {
    fn authorization<'a>(
        &'a self,
        _request: Outbound<'a>,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, String>> {
        let token = *self.token.lock().unwrap();
        Box::pin(async move { Ok(bearer(&format!("Bearer {token}"))) })
    }

    fn challenged<'a>(&'a self, challenge: &'a Challenge) -> BoxFuture<'a, Result<bool, String>> {
        *self.token.lock().unwrap() = if challenge.status == 401 {
            "good"
        } else {
            "wide"
        };
        Box::pin(async { Ok(true) })
    }
}

#[test]
fn one_request_may_need_a_login_and_then_more_scope() {
    let fixture = fixture("token", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let authorizer = Arc::new(Laddered {
            token: std::sync::Mutex::new("good"),
        });
        let server = HttpServer {
            authorizer: Some(authorizer.clone()),
            ..server(url.clone())
        };
        let client = connect(server, patient()).await.unwrap();
        *authorizer.token.lock().unwrap() = "stale";
        let result = (client
            .call_tool("secret", json!({"message": "opened"}))
            .await)
            .expect("401, login, 403, more scope, answer");
        assert_eq!(text(&result), "opened");
        assert_eq!(*authorizer.token.lock().unwrap(), "wide");
        close_and_check(&client, fixture.port).await;
    });
}

#[test]
fn server_messages_arrive_on_the_get_stream() {
    let fixture = fixture("push", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let client = connect(server(url), patient()).await.unwrap();
        let notifications = client.notifications().await;
        client.list_tools().await.unwrap();
        let note = notifications.recv().await.unwrap();
        assert_eq!(note.method, "notifications/tools/list_changed");
        close_and_check(&client, fixture.port).await;
    });
}

#[test]
fn no_mcp_server_at_all_names_both_attempts() {
    let fixture = fixture("not-found", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let error = connect(server(url.clone()), patient()).await.unwrap_err();
        let reason = transport_reason(&error);
        assert_eq!(
            reason,
            format!(
                "POST {url}: HTTP 404 Not Found: <pre>Cannot find it</pre>; and as an HTTP+SSE \
                 server: GET {url} (HTTP+SSE): HTTP 404 Not Found: <pre>Cannot find it</pre>"
            )
        );
    });
}

#[test]
fn a_moved_endpoint_is_followed() {
    let scratch = Scratch::new("http-moved");
    let log = scratch.0.join("requests.log");
    let fixture = fixture("moved", &["--log", log.to_str().unwrap()]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let client = connect(server(url), patient()).await.unwrap();
        let echoed = client
            .call_tool("echo", json!({"message": "moved"}))
            .await
            .unwrap();
        assert_eq!(text(&echoed), "moved");
        close_and_check(&client, fixture.port).await;
    });
    let requests = std::fs::read_to_string(&log).unwrap();
    assert!(
        requests.contains("POST /moved/mcp rpc=tools/call session=s1"),
        "{requests}"
    );
}

#[test]
fn close_during_a_call_fails_it_and_leaves_no_socket() {
    let scratch = Scratch::new("http-hang");
    let log = scratch.0.join("requests.log");
    let fixture = fixture("hang", &["--log", log.to_str().unwrap()]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let client = connect(server(url), patient()).await.unwrap();
        let call = {
            let client = client.clone();
            smol::spawn(async move { client.call_tool("echo", json!({"message": "x"})).await })
        };
        // The call is in flight once the server has logged it.
        while !std::fs::read_to_string(&log)
            .unwrap()
            .contains("rpc=tools/call")
        {
            smol::Timer::after(Duration::from_millis(10)).await;
        }
        client.close().await;
        let error = call.await.unwrap_err();
        assert!(matches!(error, Error::Disconnected(_)), "{error:?}");
        assert_eq!(sockets_to(fixture.port), 0);
    });
}

#[test]
fn the_driver_runs_under_tokio() {
    let fixture = fixture("good", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, driver) = mcp_smol::start(server(url), patient()).unwrap();
        tokio::spawn(driver);
        client.wait_ready().await.unwrap();
        let echoed = client
            .call_tool("echo", json!({"message": "tokio"}))
            .await
            .unwrap();
        assert_eq!(text(&echoed), "tokio");
        close_and_check(&client, fixture.port).await;
    });
}

#[test]
fn a_json_body_that_answers_nothing_fails_the_call_at_once() {
    let fixture = fixture("not-jsonrpc", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let client = connect(server(url.clone()), patient()).await.unwrap();
        let detail = echo_fails_in_transport(&client).await;
        assert_eq!(
            &detail,
            &format!(
                "POST {url}: HTTP 200 OK with a JSON body that does not answer the request: \
                 {{\"status\":\"ok\"}}"
            )
        );
        close_and_check(&client, fixture.port).await;
    });
}

#[test]
fn fetch_is_one_exchange_that_follows_no_redirect() {
    let good = fixture("good", &[]);
    let looping = fixture("redirect-loop", &[]);
    bounded(async {
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        let request = mcp_smol::authorize::Request {
            method: "POST".to_owned(),
            url: format!("http://127.0.0.1:{}/mcp", good.port),
            headers: vec![("Content-Type".to_owned(), "application/json".to_owned())],
            body: initialize.to_string().into_bytes(),
            timeout: Duration::from_secs(60),
        };
        let response = mcp_smol::authorize::send(request.clone()).await.unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.header("MCP-SESSION-ID"), Some("s1"));
        let body: serde_json::Value = serde_json::from_slice(&response.body).unwrap();
        assert_eq!(body["result"]["serverInfo"]["name"], "mcp-http-fixture");

        let moved = mcp_smol::authorize::Request {
            url: format!("http://127.0.0.1:{}/mcp", looping.port),
            ..request.clone()
        };
        let response = mcp_smol::authorize::send(moved).await.unwrap();
        assert_eq!(response.status, 307);
        assert_eq!(response.header("location"), Some("/loop-1"));

        let refused = mcp_smol::authorize::Request {
            url: "http://127.0.0.1:1/token".to_owned(),
            ..request
        };
        let error = mcp_smol::authorize::send(refused).await.unwrap_err();
        assert!(
            matches!(&error, Error::Http { url, .. } if url == "http://127.0.0.1:1/token"),
            "{error:?}"
        );
    });
}

#[test]
fn a_404_in_the_new_session_too_fails_the_call_without_looping() {
    refused_in_the_new_session_too("call-404", "HTTP 404 Not Found: no such thing");
}

/// A server in fixture `mode` refuses a call's session with `refusal`, and the call's again in
/// the new session: the call fails saying so, one restart and no more, and the new session
/// goes on working.
fn refused_in_the_new_session_too(mode: &str, refusal: &str) {
    let scratch = Scratch::new(&format!("http-{mode}-again"));
    let log = scratch.0.join("requests.log");
    let fixture = fixture(mode, &["--log", log.to_str().unwrap()]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let client = connect(server(url.clone()), patient()).await.unwrap();
        let detail = echo_fails_in_transport(&client).await;
        assert_eq!(
            detail,
            format!("POST {url}: {refusal}, in a new session too")
        );
        assert_eq!(client.list_tools().await.unwrap().len(), 2);
        close_and_check(&client, fixture.port).await;
    });
    let requests = std::fs::read_to_string(&log).unwrap();
    assert_eq!(requests.matches("rpc=initialize").count(), 2, "{requests}");
    assert_eq!(requests.matches("rpc=tools/call").count(), 2, "{requests}");
}

#[test]
fn resuming_a_stream_that_brings_nothing_new_gives_up() {
    let scratch = Scratch::new("http-resume-loop");
    let log = scratch.0.join("requests.log");
    let fixture = fixture("resume-loop", &["--log", log.to_str().unwrap()]);
    let url = format!("http://127.0.0.1:{}/mcp", fixture.port);
    bounded(async {
        let client = connect(server(url.clone()), patient()).await.unwrap();
        let detail = echo_fails_in_transport(&client).await;
        assert_eq!(
            &detail,
            &format!(
                "GET {url}: the event stream ended before the answer, 5 times without a new \
                 event; giving up"
            )
        );
        close_and_check(&client, fixture.port).await;
    });
    let requests = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        requests.matches("last-event-id=e1").count(),
        5,
        "{requests}"
    );
}

#[test]
fn an_http_sse_endpoint_on_another_origin_is_refused() {
    let fixture = fixture("legacy-foreign", &[]);
    let url = format!("http://127.0.0.1:{}/sse", fixture.port);
    bounded(async {
        let error = connect(server(url.clone()), patient()).await.unwrap_err();
        let reason = transport_reason(&error);
        assert!(reason.starts_with(&format!("POST {url}: HTTP 405 Method Not Allowed; and as an HTTP+SSE server: GET {url} (HTTP+SSE): the endpoint http://198.51.100.7/messages is on another origin; refused")), "{reason}");
        assert_eq!(sockets_to(fixture.port), 0);
    });
}
