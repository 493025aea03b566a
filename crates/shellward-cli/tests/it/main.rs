//! The integration tests of `shellward-cli`, one test binary: each file is a module (`cargo test -p shellward-cli --test it MODULE::`).

mod cli;

mod cli_audit;
mod cli_coder;
mod cli_compat;
mod cli_config;
mod cli_mcp;
mod cli_oci;
mod cli_policy;
mod cli_policy_kit;
mod cli_policy_new;
mod cli_portable;
mod cli_run;
mod cli_serve;
mod readme_examples;
