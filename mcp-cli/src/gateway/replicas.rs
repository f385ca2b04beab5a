//! Replicas of `serve --listen` behind a load balancer. A stateless-era host's requests may
//! reach any replica; what one replica hands a host to bring back must therefore say where it
//! goes. Input rounds carry their answers ([`rounds`](super::rounds)); a task runs in one
//! replica's backend, so its handle names that replica (sealed with the keys the replicas
//! share, so a host cannot forge one), and a replica that gets a request for another's task
//! forwards it there, over plain HTTP with the shared bearer token, and answers with what
//! that replica answered.

use std::sync::Arc;

use async_net::TcpStream;
use futures_lite::future::FutureExt;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use mcp_smol::proto::RpcError;
use serde_json::{Value, json};
use smol_hyper::rt::FuturesIo;

use crate::gateway::errors::{internal_error, invalid_params};
use crate::gateway::sealed::Seal;

/// The kind of text a task handle is sealed as.
const SEALED_AS: &str = "mcp-cli-task1";

/// Marks a request one replica forwarded to another, which answers it itself.
const FORWARDED: &str = "mcp-cli/forwarded";

/// The largest answer taken from another replica.
const ANSWER_LIMIT: usize = 4 * 1024 * 1024;

/// How long another replica may take to answer a task request (`tasks/get` and the like
/// answer at once): one that took the connection and hangs does not hold the host for ever.
const FORWARD_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// This replica, as the others reach it, and what they share.
pub(crate) struct Replicas {
    /// `http://HOST:PORT/mcp`: where the others forward this one's tasks.
    pub(crate) me: url::Url,
    pub(crate) token: String,
    pub(crate) seal: Arc<Seal>,
}

/// Where a task handle leads.
pub(crate) struct Routed {
    pub(crate) server: String,
    pub(crate) id: String,
    replica: String,
}

/// Where another replica should forward a task: `given` (`--replica-url`), else the address
/// this one listens on (`bound`, its MCP `endpoint`), which must then be one the others can
/// name.
pub(crate) fn own_url(
    given: Option<&str>,
    (bound, endpoint): (std::net::SocketAddr, &str),
) -> Result<url::Url, String> {
    let text = match given {
        Some(given) => given.to_owned(),
        None if bound.ip().is_unspecified() => {
            return Err(format!(
                "serve --listen {bound} with --replica-key: give --replica-url, the address the \
                 other replicas reach this one at (it listens on every interface)"
            ));
        }
        None => format!("http://{bound}{endpoint}"),
    };
    let url = url::Url::parse(&text).map_err(|error| format!("--replica-url {text}: {error}"))?;
    if url.scheme() != "http" || url.host().is_none() {
        return Err(format!(
            "--replica-url {text}: give http://HOST:PORT/mcp; replicas reach each other on the \
             network behind their load balancer, in plain HTTP"
        ));
    }
    Ok(url)
}

impl Replicas {
    /// The handle a host gets for task `id` of `server`, which runs here.
    pub(crate) fn handle(&self, server: &str, id: &str) -> String {
        let payload = json!({"server": server, "id": id, "replica": self.me.as_str()});
        self.seal.seal(SEALED_AS, &payload)
    }

    /// Where `handle` leads: `None` when it is not a sealed handle (a handshake-era one, or
    /// a gateway's own), an error when it is one no replica made.
    pub(crate) fn open(&self, handle: &str) -> Option<Result<Routed, RpcError>> {
        if !handle.starts_with(&format!("{SEALED_AS}.")) {
            return None;
        }
        let opened = self
            .seal
            .open(SEALED_AS, handle)
            .map_err(|why| invalid_params(format!("unknown task: its handle {why}")));
        Some(opened.and_then(|payload| {
            let text = |key: &str| payload[key].as_str().map(str::to_owned);
            match (text("server"), text("id"), text("replica")) {
                (Some(server), Some(id), Some(replica)) => Ok(Routed {
                    server,
                    id,
                    replica,
                }),
                _ => Err(invalid_params(
                    "unknown task: its handle is not one of ours".to_owned(),
                )),
            }
        }))
    }

    /// Whether `routed` is answered here: its task runs here, or the request came forwarded
    /// already (it is not sent on twice).
    pub(crate) fn answers_here(&self, routed: &Routed, params: &Value) -> bool {
        let forwarded = (params.get("_meta")).is_some_and(|meta| meta.get(FORWARDED).is_some());
        routed.replica == self.me.as_str() || forwarded
    }

    /// The answer of the replica `routed` names to the host's `method` request with `params`,
    /// within [`FORWARD_WAIT`].
    pub(crate) async fn forward(
        &self,
        routed: &Routed,
        method: &str,
        params: &Value,
    ) -> Result<Value, RpcError> {
        let waited = async {
            async_io::Timer::after(FORWARD_WAIT).await;
            let secs = FORWARD_WAIT.as_secs();
            Err(unreachable(
                routed,
                format!("did not answer within {secs} s"),
            ))
        };
        self.ask(routed, method, params).or(waited).await
    }

    async fn ask(&self, routed: &Routed, method: &str, params: &Value) -> Result<Value, RpcError> {
        let unreachable = |why: String| unreachable(routed, why);
        let mut params = params.clone();
        let meta = (params.as_object_mut())
            .map(|params| params.entry("_meta").or_insert_with(|| json!({})));
        let version = match meta {
            Some(Value::Object(meta)) => {
                meta.insert(FORWARDED.to_owned(), json!(true));
                let version = meta.get("io.modelcontextprotocol/protocolVersion");
                version
                    .and_then(Value::as_str)
                    .unwrap_or("2026-07-28")
                    .to_owned()
            }
            _ => return Err(invalid_params("params must be an object".to_owned())),
        };
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let url = url::Url::parse(&routed.replica).map_err(|e| unreachable(e.to_string()))?;
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return Err(unreachable("has no host".to_owned()));
        };
        let stream = (TcpStream::connect((host, port)).await)
            .map_err(|error| unreachable(format!("does not answer: {error}")))?;
        let (mut sender, connection) =
            (hyper::client::conn::http1::handshake(FuturesIo::new(stream)).await)
                .map_err(|error| unreachable(format!("does not answer: {error}")))?;
        let request = hyper::Request::post(url.path())
            .header("host", format!("{host}:{port}"))
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", version)
            .header("mcp-method", method)
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|error| unreachable(error.to_string()))?;
        let exchange = async {
            let response = (sender.send_request(request).await)
                .map_err(|error| unreachable(format!("failed: {error}")))?;
            let status = response.status();
            let collected = Limited::new(response.into_body(), ANSWER_LIMIT)
                .collect()
                .await;
            let body = collected.map_err(|error| unreachable(format!("failed: {error}")))?;
            Ok::<_, RpcError>((status, body.to_bytes()))
        };
        // The connection is driven beside the exchange, until the answer has come whole.
        let driven = async {
            let _ = connection.await;
            std::future::pending().await
        };
        let (status, body) = exchange.or(driven).await?;
        let answer = answer_in(&body).ok_or_else(|| {
            let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
            unreachable(format!(
                "answered {status} without a JSON-RPC answer: {text}"
            ))
        })?;
        match (answer.get("result"), answer.get("error")) {
            (Some(result), _) => Ok(result.clone()),
            (_, error) => Err(RpcError {
                code: error
                    .and_then(|error| error["code"].as_i64())
                    .unwrap_or(RpcError::INTERNAL_ERROR),
                message: (error.and_then(|error| error["message"].as_str()))
                    .unwrap_or("another replica failed")
                    .to_owned(),
                data: error.and_then(|error| error.get("data")).cloned(),
            }),
        }
    }
}

/// The error for a task request that the replica `routed` names did not answer.
fn unreachable(routed: &Routed, why: String) -> RpcError {
    internal_error(format!(
        "task {}/{} runs on the replica at {}, which {why}",
        routed.server, routed.id, routed.replica
    ))
}

/// The JSON-RPC answer in a body: the body itself, or an event stream's event that holds one.
fn answer_in(body: &[u8]) -> Option<Value> {
    let answers = |value: &Value| value.get("result").is_some() || value.get("error").is_some();
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        return answers(&value).then_some(value);
    }
    let text = std::str::from_utf8(body).ok()?;
    let data = text.lines().filter_map(|line| line.strip_prefix("data:"));
    data.filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(url: &str, seal: &Arc<Seal>) -> Replicas {
        Replicas {
            me: url::Url::parse(url).unwrap(),
            token: "t".repeat(64),
            seal: seal.clone(),
        }
    }

    #[test]
    fn a_handle_names_the_replica_its_task_runs_on_and_cannot_be_forged() {
        let seal = Arc::new(Seal::of_this_process());
        let one = replica("http://10.0.0.1:8931/mcp", &seal);
        let other = replica("http://10.0.0.2:8931/mcp", &seal);
        let handle = one.handle("fx", "task-1");
        let routed = other.open(&handle).unwrap().unwrap();
        assert_eq!(
            (routed.server.as_str(), routed.id.as_str()),
            ("fx", "task-1")
        );
        assert!(one.answers_here(&routed, &json!({})));
        assert!(!other.answers_here(&routed, &json!({})));
        // Forwarded once, a request is answered where it came, never sent on again.
        let forwarded = json!({"_meta": {FORWARDED: true}});
        assert!(other.answers_here(&routed, &forwarded));

        assert!(
            other.open("fx/task-1").is_none(),
            "a plain handle is not sealed"
        );
        let forged = handle.replacen("mcp-cli-task1.", "mcp-cli-task1.0", 1);
        let refused = other.open(&forged).unwrap().err().unwrap();
        assert_eq!(refused.code, RpcError::INVALID_PARAMS);
        let elsewhere = replica(
            "http://10.0.0.3:8931/mcp",
            &Arc::new(Seal::of_this_process()),
        );
        let refused = elsewhere.open(&handle).unwrap().err().unwrap();
        assert!(refused.message.contains("unknown task"), "{refused:?}");
    }

    #[test]
    fn a_replica_is_reached_in_plain_http_at_an_address_the_others_can_name() {
        let bound: std::net::SocketAddr = "127.0.0.1:8931".parse().unwrap();
        assert_eq!(
            own_url(None, (bound, "/mcp")).unwrap().as_str(),
            "http://127.0.0.1:8931/mcp"
        );
        let everywhere: std::net::SocketAddr = "0.0.0.0:8931".parse().unwrap();
        let error = own_url(None, (everywhere, "/mcp")).unwrap_err();
        assert!(error.contains("give --replica-url"), "{error}");
        let given = own_url(Some("http://gw-1.internal:8931/mcp"), (everywhere, "/mcp")).unwrap();
        assert_eq!(given.host_str(), Some("gw-1.internal"));
        let error = own_url(Some("https://gw-1:8931/mcp"), (everywhere, "/mcp")).unwrap_err();
        assert!(error.contains("plain HTTP"), "{error}");
    }

    #[test]
    fn a_task_whose_replica_is_gone_is_answered_with_an_error_naming_it() {
        let seal = Arc::new(Seal::of_this_process());
        let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = gone.local_addr().unwrap().port();
        drop(gone);
        let maker = replica(&format!("http://127.0.0.1:{port}/mcp"), &seal);
        let handle = maker.handle("fx", "task-1");
        let asked = replica("http://127.0.0.1:1/mcp", &seal);
        let routed = asked.open(&handle).unwrap().unwrap();
        let params = json!({"taskId": handle});
        let failed = futures_lite::future::block_on(asked.forward(&routed, "tasks/get", &params));
        let error = failed.unwrap_err();
        assert_eq!(error.code, RpcError::INTERNAL_ERROR);
        assert!(
            error.message.contains(&format!("127.0.0.1:{port}")),
            "{error:?}"
        );
        assert!(error.message.contains("does not answer"), "{error:?}");
    }

    #[test]
    fn the_answer_is_found_in_json_or_in_an_event_stream() {
        let json = br#"{"jsonrpc":"2.0","id":1,"result":{"taskId":"x"}}"#;
        assert_eq!(answer_in(json).unwrap()["result"]["taskId"], "x");
        let stream = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\n\
                       event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"m\"}}\n\n";
        assert_eq!(answer_in(stream).unwrap()["error"]["code"], -32602);
        assert!(answer_in(b"not json").is_none());
        assert!(answer_in(br#"{"jsonrpc":"2.0","method":"n"}"#).is_none());
    }
}
