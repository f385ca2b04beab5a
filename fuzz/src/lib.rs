//! The checks behind the fuzz targets, shared with the stable corpus-replay tests.

pub mod checks;
pub mod config_check;
