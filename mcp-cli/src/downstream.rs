//! What a crate downstream of this one cannot do with its API, as doctests: each compiles as
//! a crate of its own, as an embedder's code does, and must fail with the error named.
//!
//! The enums an embedder matches are `#[non_exhaustive]`, so that a new variant is no
//! breaking change: a match that names every variant of today, and no `_`, does not compile
//! (E0004). Each match below names every variant there is, so E0004 is its only error: with
//! the attribute gone, it compiles, and the doctest fails.
//!
//! ```compile_fail,E0004
//! use mcp_client_cli::hub::HubError;
//! fn kind(error: &HubError) -> u8 {
//!     match error {
//!         HubError::UnknownServer { .. } => 0,
//!         HubError::AmbiguousServer { .. } => 1,
//!         HubError::Unavailable { .. } => 2,
//!         HubError::UnknownTool { .. } => 3,
//!         HubError::AmbiguousTool { .. } => 4,
//!         HubError::UnknownPrompt { .. } => 5,
//!         HubError::ToolFiltered { .. } => 6,
//!         HubError::ToolDenied { .. } => 7,
//!         HubError::ToolWithheld { .. } => 8,
//!         HubError::ToolFlagged { .. } => 9,
//!         HubError::AnotherServer { .. } => 10,
//!         HubError::FeatureFlagged { .. } => 11,
//!         HubError::ToolRejected { .. } => 12,
//!         HubError::ListingCapped { .. } => 13,
//!         HubError::NotApproved { .. } => 14,
//!         HubError::FormDeclined { .. } => 15,
//!         HubError::Server { .. } => 16,
//!         HubError::LauncherCacheRefused { .. } => 17,
//!         HubError::WrongProtocol { .. } => 18,
//!         HubError::TaskFailed { .. } => 19,
//!         HubError::TaskCancelled { .. } => 20,
//!         HubError::TaskLost { .. } => 21,
//!         HubError::TaskWaitTimedOut { .. } => 22,
//!         HubError::OutputMismatch { .. } => 23,
//!         HubError::ShuttingDown { .. } => 24,
//!     }
//! }
//! ```
//!
//! ```compile_fail,E0004
//! use mcp_client_cli::hub::HubEvent;
//! fn kind(event: &HubEvent) -> u8 {
//!     match event {
//!         HubEvent::ToolsChanged { .. } => 0,
//!         HubEvent::ResourcesChanged { .. } => 1,
//!         HubEvent::PromptsChanged { .. } => 2,
//!         HubEvent::ResourceUpdated { .. } => 3,
//!         HubEvent::ElicitationComplete { .. } => 4,
//!         HubEvent::Failed { .. } => 5,
//!         HubEvent::Lagged { .. } => 6,
//!     }
//! }
//! ```
//!
//! ```compile_fail,E0004
//! use mcp_client_cli::hub::State;
//! fn kind(state: State) -> u8 {
//!     match state {
//!         State::Stopped => 0,
//!         State::Starting => 1,
//!         State::Running => 2,
//!         State::Failed => 3,
//!         State::Restarting => 4,
//!         State::Disabled => 5,
//!         State::Denied => 6,
//!         State::Invalid => 7,
//!         State::NeedsAuth => 8,
//!         State::Pending => 9,
//!     }
//! }
//! ```
//!
//! ```compile_fail,E0004
//! use mcp_client_cli::config::Entry;
//! fn kind(entry: &Entry) -> u8 {
//!     match entry {
//!         Entry::Enabled(_) => 0,
//!         Entry::Disabled(_) => 1,
//!         Entry::Invalid { .. } => 2,
//!     }
//! }
//! ```
//!
//! ```compile_fail,E0004
//! use mcp_client_cli::config::Source;
//! fn kind(source: &Source) -> u8 {
//!     match source {
//!         Source::File(_) => 0,
//!         Source::Preset => 1,
//!         Source::Code => 2,
//!     }
//! }
//! ```
//!
//! ```compile_fail,E0004
//! use mcp_client_cli::config::Transport;
//! fn kind(transport: Transport) -> u8 {
//!     match transport {
//!         Transport::Auto => 0,
//!         Transport::Sse => 1,
//!     }
//! }
//! ```
//!
//! ```compile_fail,E0004
//! use mcp_client_cli::scan::Kind;
//! fn kind(kind: Kind) -> u8 {
//!     match kind {
//!         Kind::Invisible => 0,
//!         Kind::Instruction => 1,
//!         Kind::Shadowing => 2,
//!         Kind::Padding => 3,
//!         Kind::Unread => 4,
//!     }
//! }
//! ```
//!
//! ```compile_fail,E0004
//! use mcp_client_cli::auth::LoginPrompt;
//! fn kind(prompt: &LoginPrompt) -> u8 {
//!     match prompt {
//!         LoginPrompt::Opening { .. } => 0,
//!         LoginPrompt::NoBrowser { .. } => 1,
//!         LoginPrompt::Paste { .. } => 2,
//!         LoginPrompt::DeviceCode { .. } => 3,
//!     }
//! }
//! ```
