//! What the Unix systems share (Linux in `sys/linux`, macOS and FreeBSD in `sys/bsd`), written once against POSIX:
//!
//! - [`streams`]: a command's standard streams as the portable core reads and writes them (pipes, a terminal's
//!   master side), and the input sink;
//! - [`pty`]: opening a pseudo-terminal for a `tty` start;
//! - [`spawn_env`]: a command's environment, the executor's base prepared once;
//! - [`files`]: the executor's private directories and files.

pub(crate) mod exit;
pub(crate) mod files;
pub(crate) mod pty;
pub(crate) mod spawn_env;
pub(crate) mod streams;
