//! shellward's default policy.
//!
//! The decision logic lives in [`decide`] and [`settings`] as plain Rust over plain types, unit-tested natively with
//! `cargo test`. On `wasm32` the `component` module binds it to the `shellward:policy` WIT world with wit-bindgen, and
//! `cargo build --target wasm32-wasip2` produces the component the host embeds. See README.md for what it decides.

pub mod decide;
pub mod settings;

#[cfg(target_arch = "wasm32")]
mod component;
