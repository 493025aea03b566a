//! Building blocks for shellward policies.
//!
//! This crate owns the pieces every policy needs and that must behave the same in every policy and in the host:
//!
//! - [`shell`]: a POSIX shell tokenizer (quotes, escapes, comments, operators, redirections, here-documents,
//!   subshells, command substitution) and a view of a command line as simple commands joined by operators;
//! - [`effective`]: the commands a line would actually run, wrappers (`timeout`, `sudo`, `xargs`, `find -exec`…) and
//!   nested shell strings (`bash -c`, `eval`, `$(…)`, `echo … | sh`) seen through, with run-time-only words marked;
//! - [`pattern`]: word patterns (`docker compose up !-d`) matched against tokenized simple commands;
//! - [`confine`]: what a command may touch — paths beneath paths, narrowing a writable list, allow-list matching (the
//!   host's own rules, for policies that decide a command's confinement);
//! - [`duration`]: parsing and formatting of human durations (`500ms`, `30s`, `5m`, `1m30s`, `2h`);
//! - [`alloc`]: a small-object allocator that makes a component's per-decision allocations cheap.
//!
//! It has no dependencies and builds both natively (where policies unit-test their logic) and for
//! `wasm32-wasip2` (where it runs inside policy components).

pub mod alloc;
pub mod confine;
pub mod duration;
pub mod effective;
pub mod pattern;
pub mod shell;

/// The Rust examples of the policy authoring guide (`policies/README.md`), compiled and run as doc tests so they stay
/// true. (Its component glue, which needs `wit-bindgen` and `wasm32-wasip2`, is built by the scaffold test.)
#[cfg(doctest)]
#[doc = include_str!("../../../policies/README.md")]
struct GuideExamples;
