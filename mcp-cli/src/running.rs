//! The servers this run has started, so that Ctrl-C, SIGTERM or SIGHUP takes them down too.
//!
//! Each server leads its own process group, so a terminal's Ctrl-C never reaches it: if we
//! exited without stopping them, stubborn servers (and whatever they started) would live on.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use mcp_smol::{Client, Options, ServerCommand};
use rustix::process::{Pid, Signal};

use crate::exit::{Exit, Failure};

/// How long servers get to exit on SIGTERM before SIGKILL: long enough to flush a file, short
/// enough that Ctrl-C still feels immediate.
const TERM_WAIT: Duration = Duration::from_millis(300);

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

    /// Stops every server now: SIGTERM to each process group, and SIGKILL to the groups of those
    /// still running after [`TERM_WAIT`]. Returns once every server has been reaped and its group
    /// emptied (mcp-smol's close ends with SIGKILL to the group once the leader is gone).
    pub(crate) async fn stop_all(&self) {
        let clients = {
            let mut state = self.state();
            state.stopping = true;
            std::mem::take(&mut state.clients)
        };
        signal_groups(&clients, Signal::TERM);
        let closed = async {
            for client in &clients {
                client.close().await;
            }
            true
        };
        let waited = async {
            smol::Timer::after(TERM_WAIT).await;
            false
        };
        if !smol::future::or(closed, waited).await {
            signal_groups(&clients, Signal::KILL);
            for client in &clients {
                client.close().await;
            }
        }
    }
}

fn signal_groups(clients: &[Client], signal: Signal) {
    for client in clients {
        let group = i32::try_from(client.pid()).ok().and_then(Pid::from_raw);
        if let Some(group) = group {
            // A group that is already empty is what we want, not an error.
            let _ = rustix::process::kill_process_group(group, signal);
        }
    }
}
