//! shellward's guard policy: denies commands that would harm the agent host or the user's machine.
//!
//! The rules live in [`rules`] (the paths they protect in [`paths`], the variables a line sets in [`vars`], the Windows reading of a
//! `cmd` or PowerShell line in [`windows`]) and the settings in [`settings`], as plain Rust unit-tested natively; on `wasm32` the
//! `component` module binds them to the `shellward:policy` WIT world. See README.md for the rules and settings.

pub mod paths;
pub mod rules;
pub mod settings;
pub mod vars;
pub mod windows;

#[cfg(target_arch = "wasm32")]
mod component;
