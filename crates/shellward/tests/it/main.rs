//! The integration tests of `shellward`, one test binary: each file is a module (`cargo test -p shellward --test it MODULE::`).

mod common;

mod agents;
mod approvals;
mod compat;
mod facade;
mod host_files;
mod oci_hostile;
mod policy_confinement;
mod preview;
mod undo;
