//! Driving a task to its end over a [`Client`]: the core's [`TaskWatch`] says what to send and
//! when; this sends it, sleeps, and hears the server's task notifications meanwhile.

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use async_io::Timer;
use futures_lite::future;
use serde_json::{Map, Value};

use crate::proto::{
    Era, ListenFilter, Request, RpcError,
    tasks::{Task, TaskEnd, TaskStep, TaskWatch},
};
use crate::{Client, Error};

/// Answers one input request a task makes (stateless era): its method and params in, the
/// result (or a refusal, which leaves it unanswered) out.
pub type TaskInput = dyn Fn(String, Option<Value>) -> Pin<Box<dyn Future<Output = Result<Value, RpcError>> + Send>>
    + Send
    + Sync;

impl Client {
    /// Watches a task until it ends: `tasks/get` at the server's (bounded) poll interval,
    /// `tasks/result` in the handshake era, `tasks/update` with what `input` answers in the
    /// stateless era (without `input` every input request is left unanswered). `on_update`
    /// hears each new state of the task, from a poll or a notification: a stateless-era server
    /// that declares the tasks extension is asked for the task's notifications with a
    /// `subscriptions/listen` naming it, for as long as the wait lasts. A failed poll of our
    /// own (a timeout) is tried again at the next interval; the connection ending is an
    /// error. Dropping the future stops watching and leaves the task running.
    pub async fn wait_task(
        &self,
        watch: &mut TaskWatch,
        input: Option<&TaskInput>,
        on_update: &(dyn Fn(&Task) + Send + Sync),
    ) -> Result<TaskEnd, Error> {
        let info = self.wait_ready().await?;
        let listen = (info.era() == Some(Era::Stateless) && info.capabilities.tasks.extension)
            .then(|| ListenFilter {
                task_ids: vec![watch.task().id.clone()],
                ..ListenFilter::default()
            });
        let listening = async {
            if let Some(filter) = listen {
                // Ended by the server or refused: polling goes on alone.
                let _ = self.request(Request::listen(&filter)).await;
            }
            future::pending().await
        };
        future::or(self.follow_task(watch, input, on_update), listening).await
    }

    async fn follow_task(
        &self,
        watch: &mut TaskWatch,
        input: Option<&TaskInput>,
        on_update: &(dyn Fn(&Task) + Send + Sync),
    ) -> Result<TaskEnd, Error> {
        let notes = self.notifications().await;
        loop {
            let Some(step) = watch.step(Instant::now()) else {
                // The watch waits for an answer no step of ours sends: cannot happen, as each
                // step below feeds its answer back before looping.
                return Err(Error::Request(crate::proto::RequestError::InvalidResponse(
                    "the task watch stalled".to_owned(),
                )));
            };
            match step {
                TaskStep::Done(end) => return Ok(end),
                TaskStep::Wait(until) => {
                    let sleep = async {
                        Timer::at(until).await;
                        None
                    };
                    let heard = async {
                        while let Ok(note) = notes.recv().await {
                            if let Some(task) = Task::of_notification(&note) {
                                return Some(task);
                            }
                        }
                        // The connection ended: the next poll says so.
                        future::pending().await
                    };
                    if let Some(task) = future::or(sleep, heard).await
                        && task.id == watch.task().id
                    {
                        watch.handle_task(Instant::now(), task);
                        on_update(watch.task());
                    }
                }
                TaskStep::Get(get) => match self.request(get).await {
                    Ok(task) => {
                        watch.handle_task(Instant::now(), task);
                        on_update(watch.task());
                    }
                    Err(Error::Request(error)) => watch.handle_error(Instant::now(), &error),
                    Err(other) => return Err(other),
                },
                TaskStep::Fetch(fetch) => match self.request(fetch).await {
                    Ok(result) => watch.handle_result(Instant::now(), Ok(result)),
                    Err(Error::Request(error)) => watch.handle_result(Instant::now(), Err(error)),
                    Err(other) => return Err(other),
                },
                TaskStep::Input(requests) => {
                    let mut responses = Map::new();
                    if let Some(input) = input {
                        for (key, method, params) in requests {
                            if let Ok(result) = input(method, params).await {
                                responses.insert(key, result);
                            }
                        }
                    }
                    if !responses.is_empty() {
                        let update = Request::update_task(&watch.task().id, responses);
                        match self.request(update).await {
                            Ok(_) => {}
                            Err(Error::Request(error)) => {
                                watch.handle_error(Instant::now(), &error);
                                continue;
                            }
                            Err(other) => return Err(other),
                        }
                    }
                    watch.answered(Instant::now());
                }
            }
        }
    }

    /// Where a task stands now: one `tasks/get`.
    pub async fn get_task(&self, id: &str) -> Result<Task, Error> {
        self.request(Request::get_task(id)).await
    }

    /// Asks the server to cancel a task (`tasks/cancel`). Cancellation is the server's to
    /// honour: the task may still end otherwise.
    pub async fn cancel_task(&self, id: &str) -> Result<(), Error> {
        self.request(Request::cancel_task(id)).await.map(|_| ())
    }
}
