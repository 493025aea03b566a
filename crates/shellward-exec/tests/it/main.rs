//! The integration tests of `shellward-exec`, one test binary: each file is a module (`cargo test -p shellward-exec --test it MODULE::`).

#[cfg(unix)]
mod common;

mod confinement;
mod containment;
mod execute;
mod files_network;
mod interactive;
mod portable;
mod preview;
mod refused_writes;
mod session;
mod supervisor;
mod trust;
mod undo;
mod unix_sockets;
