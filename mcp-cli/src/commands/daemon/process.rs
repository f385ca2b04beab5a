//! `daemon run`, the daemon itself: one hub, served by the gateway to every connection on the socket, with
//! the private methods that let a command line run as if it were cold; it exits when stopped
//! or idle, stopping its servers and removing its socket.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender};
use clap::Parser;
use futures_lite::future::FutureExt;
use mcp_smol::proto::RpcError;
use serde_json::{Value, json};

use crate::cli::{Cli, Command};
use crate::commands::{self, Context};
use crate::config::{self, Config, Policy};
use crate::daemon::{Place, refusal};
use crate::exit::{Exit, Failure};
use crate::gateway::{Answer, BoxFuture, Extension, Gateway, Host, Mode, Relay, server_config};
use crate::host::Watch;
use crate::hub::{Hub, Settings};
use crate::output::Stdout;

use super::parking::{self, Parking};

/// The daemon's own methods, answered on its socket beside MCP.
impl Extension for Daemon {
    /// Notes a request: the idle time starts again.
    fn touch(&self) {
        self.activity().last = Instant::now();
    }

    fn handle(&self, method: &str, params: Option<Value>) -> BoxFuture<'_, Option<Answer>> {
        let method = method.to_owned();
        Box::pin(async move {
            let answer = match method.as_str() {
                "mcp-cli/run" => self.run_command(params.unwrap_or_default()).await,
                "mcp-cli/answer" => {
                    let params = params.unwrap_or_default();
                    self.parking.answer(&params, &self.executor).await
                }
                "mcp-cli/parked" => Ok(self.parking.list()),
                "mcp-cli/status" => Ok(self.status()),
                "mcp-cli/stop" => {
                    let _ = self.stop.try_send(());
                    Ok(json!({}))
                }
                _ => return None,
            };
            self.touch();
            Some(answer)
        })
    }
}

/// What the connections share.
pub(crate) struct Daemon {
    place: Place,
    hub: Hub,
    /// Runs the hub's servers and every connection.
    executor: Arc<async_executor::Executor<'static>>,
    state: crate::state::Folder,
    idle: Duration,
    started: Instant,
    activity: Mutex<Activity>,
    stop: Sender<()>,
    /// The policy the hub was made with: the hub keeps it, so runs under another go cold.
    policy: Policy,
    /// Passes the servers' forms to the connection waiting on them.
    relay: Relay,
    /// The config as last read, to notice edits before a run.
    seen: Mutex<Seen>,
    /// The questions parked calls wait on (`call --park`).
    parking: Arc<Parking>,
}

/// How many connections the daemon holds at once: far more than the command lines of one user
/// run together, far fewer than the descriptors a process has. One past it is closed at once,
/// and its command line runs cold.
const MAX_CONNECTIONS: usize = 256;

struct Activity {
    open: usize,
    last: Instant,
}

struct Seen {
    watch: Watch,
    /// Why runs cannot be served warm under the config as it now reads, if so, beside
    /// [`asks`](Self::asks).
    cold: Option<String>,
    /// Whether its policy has `ask` rules, which a run's caller answers on its terminal: such
    /// runs go cold. A call that parks its questions does not: an `ask` is never parked.
    asks: bool,
}

/// Runs the daemon for `configs` until it is stopped or idle for `idle`. Prints `ready` on
/// stdout once the socket takes connections (what `daemon start` waits for).
pub(crate) async fn run(ctx: &mut Context, idle: Duration) -> Result<Exit, Failure> {
    let env = crate::secrets::lookup;
    // Out of the shell's session: its hangup and its Ctrl-C are not ours. Fails only for a
    // group leader, which `daemon start` does not make us.
    let _ = rustix::process::setsid();
    let place = Place::of(&ctx.files, &env);
    place.check_dir(true).map_err(Failure::usage)?;
    let lock = crate::files::append_private(&place.lock)
        .map_err(|e| Failure::usage(format!("cannot open {}: {e}", place.lock.display())))?;
    let operation = rustix::fs::FlockOperation::NonBlockingLockExclusive;
    if rustix::fs::flock(&lock, operation).is_err() {
        return Err(Failure::usage(format!(
            "a daemon for these config files is already running: {}",
            place.socket.display()
        )));
    }
    // Under the lock nobody else serves it: a socket left there is stale.
    let _ = std::fs::remove_file(&place.socket);
    // Watched from before the first read: an edit made meanwhile is applied, not missed.
    let watch = ctx.files.watch();
    let config = (ctx.files.load(&env)).map_err(|error| Failure::usage(error.to_string()))?;
    let listener = async_net::unix::UnixListener::bind(&place.socket)
        .map_err(|e| Failure::usage(format!("cannot listen on {}: {e}", place.socket.display())))?;
    let _remove = RemoveOnDrop(place.socket.clone());
    // Ours alone, as the folder it is in (0700) already makes it.
    std::fs::set_permissions(&place.socket, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| Failure::usage(format!("cannot protect {}: {e}", place.socket.display())))?;
    // The command's own executor runs the servers' drivers and every connection, on its
    // thread: a call crosses no thread on its way to a server.
    let executor = ctx.executor.clone();
    let relay = Relay::default();
    let settings = Settings {
        // As a cold run does: servers may ask for forms, which go to the caller's terminal.
        elicit: Some(relay.handler()),
        // Runs under `ask` rules go cold, but for parked calls: their asks are refused, or
        // parked where the rule says `park = true`.
        ask: Some(parked_asks(&relay)),
        ..crate::host::settings(&ctx.state, &executor, &env)
    };
    let policy = config.policy.clone();
    let asks = has_ask_rules(&config);
    let hub = Hub::new(config, settings);
    // The command's hub from now on, which a signal terminates.
    ctx.hub = hub.clone();
    let (stop, stopped) = async_channel::bounded(1);
    let daemon = Arc::new(Daemon {
        seen: Mutex::new(Seen {
            watch,
            cold: None,
            asks,
        }),
        place,
        hub: hub.clone(),
        executor: executor.clone(),
        state: ctx.state.clone(),
        idle,
        started: Instant::now(),
        activity: Mutex::new(Activity {
            open: 0,
            last: Instant::now(),
        }),
        stop,
        policy,
        relay,
        parking: Arc::default(),
    });
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "ready").and_then(|()| stdout.flush());
    // Nobody reads our stdout any more: later writes must not fail, so it goes to /dev/null.
    if let Ok(null) = std::fs::File::options().write(true).open("/dev/null") {
        let _ = rustix::stdio::dup2_stdout(null);
    }
    eprintln!(
        "mcp-cli daemon {}: serving {} on {}",
        std::process::id(),
        daemon.files_text(),
        daemon.place.socket.display()
    );
    // Tasks a daemon before this one left running: watched until they end, so their
    // records say how.
    let resumed = executor.spawn({
        let hub = hub.clone();
        async move { hub.resume_tasks().await }
    });
    // A task of its own: the command's future is polled at every wake-up of the executor
    // (each message of each connection), and polling the listener is a system call.
    let accepting = daemon.clone();
    (executor.spawn(async move { accepting.accept(listener, stopped).await })).await;
    drop(resumed);
    hub.shutdown().await;
    Ok(Exit::Success)
}

impl Daemon {
    /// Takes connections until stopped or idle.
    async fn accept(
        self: &Arc<Self>,
        listener: async_net::unix::UnixListener,
        stopped: Receiver<()>,
    ) {
        loop {
            enum Wake {
                Connection(std::io::Result<async_net::unix::UnixStream>),
                Stop,
                Tick,
            }
            let deadline = self.idle_deadline();
            let accepted = async { Wake::Connection(listener.accept().await.map(|(s, _)| s)) };
            let stop = async {
                let _ = stopped.recv().await;
                Wake::Stop
            };
            let tick = async {
                async_io::Timer::at(deadline).await;
                Wake::Tick
            };
            match accepted.or(stop).or(tick).await {
                Wake::Connection(Ok(stream)) => self.serve(stream),
                Wake::Connection(Err(error)) => eprintln!("mcp-cli daemon: accept: {error}"),
                Wake::Stop => return eprintln!("mcp-cli daemon: stopped"),
                Wake::Tick if Instant::now() >= self.idle_deadline() => {
                    return eprintln!("mcp-cli daemon: idle for {:?}, exiting", self.idle);
                }
                Wake::Tick => {}
            }
        }
    }

    /// When the daemon may exit for idleness: `idle` after the last activity, and never while
    /// a connection is open or a question parked (it is looked at again then).
    fn idle_deadline(&self) -> Instant {
        let activity = self.activity();
        match activity.open {
            0 if self.parking.is_empty() => activity.last + self.idle,
            _ => Instant::now() + self.idle,
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn activity(&self) -> std::sync::MutexGuard<'_, Activity> {
        self.activity.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One host session: the gateway over the connection, for our own user only, and never
    /// for a process a hub sandboxed (see [`refusal`]). A refused one is closed at once.
    fn serve(self: &Arc<Self>, stream: async_net::unix::UnixStream) {
        if let Some(reason) = refusal(&stream) {
            eprintln!("mcp-cli daemon: refused a connection: {reason}");
            return;
        }
        {
            // Counted here, before the session's task runs, so that a burst is counted whole.
            let mut activity = self.activity();
            if activity.open >= MAX_CONNECTIONS {
                return eprintln!(
                    "mcp-cli daemon: refused a connection: {MAX_CONNECTIONS} are open already, \
                     the most it takes (the caller runs cold instead)"
                );
            }
            activity.open += 1;
        }
        let daemon = self.clone();
        self.executor
            .spawn(async move {
                let executor = &daemon.executor;
                let host = Host::connect(stream.clone(), stream, server_config(), executor).await;
                if let Some(host) = host {
                    let gateway = Arc::new(Gateway {
                        hub: daemon.hub.clone(),
                        named: Vec::new(),
                        mode: Mode::Tools,
                        relay: daemon.relay.clone(),
                        list_wait: crate::gateway::list_wait(&|key| std::env::var(key).ok()),
                        call_timeout: None,
                        extension: Some(daemon.clone()),
                        executor: daemon.executor.clone(),
                        results: daemon.state.results(),
                        handed: Default::default(),
                        replicas: None,
                    });
                    gateway.serve(host, None).await;
                }
                let mut activity = daemon.activity();
                activity.open -= 1;
                activity.last = Instant::now();
            })
            .detach();
    }

    /// Runs a command line against the warm hub, capturing what it prints. Answers
    /// `{"cold": why}` when it could not print what a cold run would.
    async fn run_command(&self, params: Value) -> Result<Value, RpcError> {
        let invalid = |message: &str| RpcError {
            code: RpcError::INVALID_PARAMS,
            message: message.to_owned(),
            data: None,
        };
        let args: Vec<String> = serde_json::from_value(params["args"].clone())
            .map_err(|_| invalid("args must be a list of strings"))?;
        let cwd = PathBuf::from(params["cwd"].as_str().unwrap_or("/"));
        let cli = Cli::try_parse_from(&args).map_err(|e| invalid(&e.to_string()))?;
        let park = params["park"] == true;
        if let Some(why) = self.cold_for(park) {
            return Ok(json!({ "cold": why }));
        }
        let mut command = cli.command;
        // A relative output file is the caller's, not ours.
        if let Command::Read {
            output: Some(file), ..
        } = &mut command
        {
            *file = cwd.join(&*file);
        }
        let mut ctx = Context {
            hub: self.hub.clone(),
            json: cli.json,
            state: self.state.clone(),
            // `call` limits what it prints by where the caller's output goes.
            out: Stdout::capturing_for(params["terminal"] == true),
            configs: cli.configs,
            // The daemon's own, which the commands it runs only talk to servers about.
            files: self.seen().watch.files().clone(),
            adhoc: None,
            naming: crate::hints::Naming::Configured,
            // The daemon runs no command that only the person may decide.
            yes: false,
            // Carried by each call's request, so the shared hub's servers are untouched. A
            // call that may wait on a person has the time for it.
            call_timeout: cli.timeout.or(park.then_some(parking::CALL_TIME)),
            executor: self.executor.clone(),
            stop: None,
            servers_outlive_command: true,
        };
        let parked_call = park
            .then(|| commands::call::target_of(&ctx, &command))
            .flatten();
        let person = params["person"] == true;
        let run = async move {
            let exit = match commands::dispatch_warm(&mut ctx, command).await {
                Ok(exit) => exit,
                Err(mut failure) => {
                    // As a cold run without a terminal does: a server that needs a login
                    // has one started, under --json, for the person to finish (the
                    // daemon's own stdin, checked there, is never a terminal).
                    if !person {
                        failure = commands::start_login_for(&ctx, failure).await;
                    }
                    ctx.report(&failure);
                    failure.exit
                }
            };
            json!({ "exit": exit.code(), "lines": ctx.out.take_captured() })
        };
        match parked_call {
            Some(call) => (self.parking.run(call, run, &self.relay, &self.executor)).await,
            None => Ok(run.await),
        }
    }

    /// Why a run (`park`: a call that parks its questions) must go cold, if it must.
    fn cold_for(&self, park: bool) -> Option<String> {
        self.refresh();
        let seen = self.seen();
        (seen.cold.clone()).or_else(|| (seen.asks && !park).then(ask_reason))
    }

    /// Applies config edits made since the last look; returns why runs must go cold, if
    /// they must (a config that no longer reads, a policy the hub cannot take on, `ask`
    /// rules).
    fn refresh(&self) -> Option<String> {
        let mut seen = self.seen();
        if seen.watch.look() {
            let env = crate::secrets::lookup;
            seen.cold = match seen.watch.files().load(&env) {
                Err(error) => Some(format!(
                    "the config does not read ({error}); runs are served warm again once it does"
                )),
                Ok(config) if config.policy != self.policy => Some(
                    "the policy changed since the daemon started; `mcp-cli daemon stop`, then \
                     `mcp-cli daemon start`, to serve runs warm under the new one"
                        .to_owned(),
                ),
                Ok(config) => {
                    seen.asks = has_ask_rules(&config);
                    self.hub.apply(config);
                    None
                }
            };
        }
        (seen.cold.clone()).or_else(|| seen.asks.then(ask_reason))
    }

    fn status(&self) -> Value {
        // What the next run would find: status is where one looks when runs are slow.
        let cold = self.refresh();
        let (open, idle) = {
            let activity = self.activity();
            (activity.open, activity.last.elapsed())
        };
        json!({
            "pid": std::process::id(),
            "socket": self.place.socket,
            "configs": self.place.files,
            "uptimeSeconds": self.started.elapsed().as_secs(),
            "idleSeconds": idle.as_secs(),
            "idleExitSeconds": self.idle.as_secs(),
            // This one, asking for the status, among them.
            "connections": open,
            // Why every run goes cold instead, if it does.
            "cold": cold,
            "servers": self.hub.status(),
            // As `servers` prints it, for `daemon status`.
            "table": commands::servers::table(&self.hub.status()),
        })
    }

    fn files_text(&self) -> String {
        let files: Vec<String> = (self.place.files.iter())
            .map(|file| file.display().to_string())
            .collect();
        match files.is_empty() {
            true => "no config files".to_owned(),
            false => files.join(", "),
        }
    }
}

fn has_ask_rules(config: &Config) -> bool {
    (config.policy.rules.iter()).any(|rule| rule.action == config::Action::Ask)
}

/// The daemon's answer to every `ask` rule, which only parked calls meet: the rule guards the
/// person's decision, which whoever answers parked questions (an agent, often) must not take,
/// unless the person's rule says `park = true`: then it is parked as a question of its own.
fn parked_asks(relay: &Relay) -> crate::hub::AskHandler {
    let parked = relay.ask_handler();
    crate::hub::AskHandler::new(move |ask: crate::hub::Ask| {
        let parked = parked.clone();
        async move {
            if !ask.rule.parkable {
                return Err(
                    "an ask rule is the person's to answer, and a call is never parked \
                            on one unless the rule says `park = true`: make the call on a \
                            terminal, where the person is asked"
                        .to_owned(),
                );
            }
            parked.decide(ask).await
        }
    })
}

fn ask_reason() -> String {
    "ask rules are answered on the caller's terminal, which the daemon has not; a daemon \
     started under a policy without them serves runs warm"
        .to_owned()
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
