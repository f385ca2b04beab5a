//! The HTTP driver: one future that owns the connection and every exchange in flight.

use std::sync::Arc;

use proto::CloseReason;
use smol::channel::Sender;

use super::HttpServer;
use crate::driver::{Driver, Op, Shared};
use crate::{Disconnect, Error, Options};

/// Builds the handles' side and the driver future.
pub(super) fn start(server: HttpServer, _options: Options) -> (Sender<Op>, Arc<Shared>, Driver) {
    let (ops_sender, ops) = smol::channel::unbounded::<Op>();
    let (done_sender, done) = smol::channel::bounded(1);
    let shared = Arc::new(Shared::without_process(done));
    let reason = CloseReason::Transport(format!(
        "{}: the HTTP transport is not built yet",
        server.url
    ));
    let state = shared.clone();
    let driver = async move {
        let disconnect = Disconnect::bare(reason);
        let _ = state.disconnect.set(disconnect.clone());
        ops.close();
        while let Ok(op) = ops.try_recv() {
            op.fail(Error::Disconnected(Box::new(disconnect.clone())));
        }
        drop(done_sender);
    };
    (ops_sender, shared, Driver(Box::pin(driver)))
}
