//! The integration tests of `shellward-policy`, one test binary: each file is a module (`cargo test -p shellward-policy --test it MODULE::`).

mod common;

mod cache;
mod cache_location;
mod components;
mod default_policy;
mod sandbox;
mod versions;
