//! One host of `serve --listen`, in memory: the server-role machine over a socket pair,
//! served by the gateway as a stdio host is, with the messages of the host's HTTP requests
//! written into it and each answer routed back to the HTTP request waiting on its id.
//!
//! The host's HTTP requests carry no stream for requests of ours (answers are plain JSON), so
//! a request the gateway would send the host (a form) is answered at once with an error,
//! which the gateway takes as the host's "cancel": nothing waits for ever on a host that
//! cannot be reached.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_channel::Sender;
use async_net::unix::UnixStream;
use futures_lite::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use futures_lite::stream::StreamExt;
use serde_json::{Value, json};

use crate::gateway::rounds::Rounds;
use crate::gateway::{Gateway, Host, server_config};

/// At most this many requests of one host are answered at once; one more is refused.
pub(crate) const MAX_IN_FLIGHT: usize = 64;

/// Why a request was not answered by the gateway.
#[derive(Debug)]
pub(crate) enum Refused {
    /// [`MAX_IN_FLIGHT`] of the host's requests are open.
    Busy,
    /// A request with the same id is open.
    DuplicateId,
    /// The connection ended first (the session was deleted, the gateway stops).
    Closed,
}

/// The requests waiting on an answer, by their id's JSON text.
type Waiting = Arc<Mutex<BTreeMap<String, Sender<Value>>>>;

/// A server-role machine of the gateway's, for one session or one stateless-era request.
/// Dropping it ends the machine, which drops its calls and so cancels them at their backends.
pub(crate) struct Bridge {
    writer: Arc<async_lock::Mutex<UnixStream>>,
    waiting: Waiting,
    executor: Arc<async_executor::Executor<'static>>,
    _routing: async_executor::Task<()>,
    _serving: async_executor::Task<()>,
}

impl Bridge {
    /// A new machine served by `gateway`; a stateless-era host's `rounds` are shared by all
    /// its requests' machines, so that a retry finds the call it answers.
    pub(crate) fn open(gateway: Arc<Gateway>, rounds: Option<Rounds>) -> std::io::Result<Self> {
        let (ours, theirs) = UnixStream::pair()?;
        let executor = gateway.executor.clone();
        let serving = executor.spawn(async move {
            let executor = gateway.executor.clone();
            let config = server_config();
            let host = Host::connect_sharing(theirs.clone(), theirs, config, &executor, rounds);
            if let Some(host) = host.await {
                gateway.serve(host, None).await;
            }
        });
        let writer = Arc::new(async_lock::Mutex::new(ours.clone()));
        let waiting = Waiting::default();
        let routing = executor.spawn(route(ours, writer.clone(), waiting.clone()));
        Ok(Self {
            writer,
            waiting,
            executor,
            _routing: routing,
            _serving: serving,
        })
    }

    /// Sends a request and waits for its answer. If the caller stops waiting (the host hung
    /// up) and `cancel` is set, the gateway is told the host cancelled it.
    pub(crate) async fn request(&self, message: &Value, cancel: bool) -> Result<Value, Refused> {
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let key = id.to_string();
        let (answer, answered) = async_channel::bounded(1);
        {
            let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            if waiting.len() >= MAX_IN_FLIGHT {
                return Err(Refused::Busy);
            }
            if waiting.contains_key(&key) {
                return Err(Refused::DuplicateId);
            }
            waiting.insert(key.clone(), answer);
        }
        let mut pending = Pending {
            bridge: self,
            key,
            id,
            cancel,
        };
        if write_line(&self.writer, message).await.is_err() {
            return Err(Refused::Closed);
        }
        let result = answered.recv().await.map_err(|_| Refused::Closed);
        pending.cancel = false;
        result
    }

    /// Sends a notification, or the host's answer to a request of ours.
    pub(crate) async fn send(&self, message: &Value) -> Result<(), Refused> {
        (write_line(&self.writer, message).await).map_err(|_| Refused::Closed)
    }
}

/// A request on its way; when dropped before its answer, the gateway hears it was cancelled.
struct Pending<'a> {
    bridge: &'a Bridge,
    key: String,
    id: Value,
    cancel: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        let waiting = &self.bridge.waiting;
        (waiting.lock().unwrap_or_else(PoisonError::into_inner)).remove(&self.key);
        if !self.cancel {
            return;
        }
        let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": self.id, "reason": "the host hung up"}});
        let writer = self.bridge.writer.clone();
        (self.bridge.executor)
            .spawn(async move { _ = write_line(&writer, &note).await })
            .detach();
    }
}

async fn write_line(
    writer: &async_lock::Mutex<UnixStream>,
    message: &Value,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).unwrap_or_default();
    line.push(b'\n');
    writer.lock().await.write_all(&line).await
}

/// Reads what the machine writes: answers go to the requests waiting on them, requests of
/// ours are refused (the host has no stream to take them), notifications are dropped.
async fn route(ours: UnixStream, writer: Arc<async_lock::Mutex<UnixStream>>, waiting: Waiting) {
    let mut lines = BufReader::new(ours).lines();
    while let Some(Ok(line)) = lines.next().await {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let id = message.get("id");
        match (id, message.get("method")) {
            (Some(id), None) => {
                let waiting = waiting.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(answer) = waiting.get(&id.to_string()) {
                    let _ = answer.try_send(message.clone());
                }
            }
            (Some(id), Some(method)) => {
                let refusal = json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": -32601,
                    "message": format!("{method}: this host is served over HTTP without a stream for requests of the server's"),
                }});
                let _ = write_line(&writer, &refusal).await;
            }
            (None, _) => {}
        }
    }
}
