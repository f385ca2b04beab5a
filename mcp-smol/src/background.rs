//! Where [`connect`](crate::connect) runs drivers when the caller brings no executor: one
//! thread of this crate's, started on first use and shared by every connection.
//!
//! With the pilot (a waiting caller drives its connection itself) this thread runs a driver
//! only between calls and while callers of several tasks wait, so one is plenty.

use std::future::Future;
use std::sync::OnceLock;

use async_executor::Executor;

static EXECUTOR: Executor<'static> = Executor::new();

/// Runs `driver` on the shared thread until it completes.
pub(crate) fn spawn(driver: impl Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
    static STARTED: OnceLock<Result<(), String>> = OnceLock::new();
    let started = STARTED.get_or_init(|| {
        // A plain block_on, which parks without touching the reactor: async-io's would sit
        // in the reactor while idle, so that the event a pilot waits for would wake this
        // thread first and reach the pilot's only through it, two context switches more.
        // The reactor is driven by the pilot's thread, or by async-io's own when none does.
        let run = || futures_lite::future::block_on(EXECUTOR.run(std::future::pending::<()>()));
        let thread = std::thread::Builder::new().name("mcp-smol".to_owned());
        thread
            .spawn(run)
            .map(drop)
            .map_err(|error| error.to_string())
    });
    started.clone().map_err(std::io::Error::other)?;
    EXECUTOR.spawn(driver).detach();
    Ok(())
}
