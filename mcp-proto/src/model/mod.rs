//! The model: what the messages mean, as types.

pub(crate) mod error;
pub(crate) mod features;
pub(crate) mod headers;
pub(crate) mod listing;
pub(crate) mod params;
pub(crate) mod raw_result;
pub(crate) mod request;
pub(crate) mod result_members;
pub(crate) mod stateless;
pub(crate) mod tasks;
pub(crate) mod types;
pub(crate) mod versions;
