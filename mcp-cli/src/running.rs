//! The servers this run has started, so that Ctrl-C, SIGTERM or SIGHUP takes them down too.
//!
//! Each server leads its own process group, so a terminal's Ctrl-C never reaches it: if we
//! exited without stopping them, stubborn servers (and whatever they started) would live on.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use mcp_smol::{Client, Options, ServerCommand};

use crate::exit::{Exit, Failure};

/// A cheap, cloneable record of the servers running now, and the executor their drivers run
/// on: the one [`run`](crate::run) drives on the main thread, so a call crosses no thread on
/// its way to the server and back.
#[derive(Debug, Clone, Default)]
pub(crate) struct Running {
    state: Arc<Mutex<State>>,
    executor: Arc<smol::Executor<'static>>,
}

#[derive(Debug, Default)]
struct State {
    clients: Vec<Client>,
    /// Set by [`Running::stop_all`]: no server may start after it.
    stopping: bool,
}

impl Running {
    fn state(&self) -> MutexGuard<'_, State> {
        // The state stays consistent whatever panicked while holding the lock.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The executor to run the command on; drivers and [`spawn`](Self::spawn)ed tasks run
    /// only while it does.
    pub(crate) fn executor(&self) -> Arc<smol::Executor<'static>> {
        self.executor.clone()
    }

    /// Runs a task beside the command, on the same executor.
    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        task: impl Future<Output = T> + Send + 'static,
    ) -> smol::Task<T> {
        self.executor.spawn(task)
    }

    /// Spawns a server, records it, and waits for its handshake. Spawning and recording happen
    /// under one lock, so a stop signal either sees the server or prevents it from starting.
    pub(crate) async fn connect(
        &self,
        name: &str,
        command: &ServerCommand,
        options: Options,
    ) -> Result<Client, Failure> {
        let client = {
            let mut state = self.state();
            if state.stopping {
                return Err(Failure {
                    exit: Exit::Server,
                    message: format!("server {name}: not started, mcp-cli is stopping"),
                });
            }
            let (client, driver) =
                mcp_smol::start(command, options).map_err(|e| Failure::server(name, &e))?;
            self.executor.spawn(driver).detach();
            state.clients.push(client.clone());
            client
        };
        match client.wait_ready().await {
            Ok(_) => Ok(client),
            Err(error) => {
                self.close(&client).await;
                Err(Failure::server(name, &error))
            }
        }
    }

    /// Closes a server the ordinary way (stdin, grace period, SIGTERM, SIGKILL) and forgets it.
    pub(crate) async fn close(&self, client: &Client) {
        client.close().await;
        // Only after it was reaped: a pid forgotten earlier could not be stopped.
        self.state().clients.retain(|c| c.pid() != client.pid());
    }

    /// Stops every server now and in parallel, through mcp-smol's terminate: SIGTERM to each
    /// process group at once, SIGKILL after the term period. Returns once every server has
    /// been reaped and its group emptied.
    pub(crate) async fn stop_all(&self) {
        let clients = {
            let mut state = self.state();
            state.stopping = true;
            std::mem::take(&mut state.clients)
        };
        let stops: Vec<_> = (clients.into_iter())
            .map(|client| self.executor.spawn(async move { client.terminate().await }))
            .collect();
        for stop in stops {
            stop.await;
        }
    }
}
