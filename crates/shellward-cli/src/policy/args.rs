//! The options every command that loads a policy chain shares (`--policy`, `--settings`, the sandbox, `--fresh`,
//! `--fail-open`), and the chain they describe.

use anyhow::{Context, Result, bail};
use clap::Args;
use shellward_policy::{FaultMode, InstanceMode, PolicyChain, PolicyEngine, SandboxConfig};
use std::path::PathBuf;

/// Options shared by every command that loads policies.
#[derive(Args, Debug)]
pub struct PolicyArgs {
    /// A policy component (.wasm), or `default` / `guard` for a built-in, to run; repeat for a chain, run in the order
    /// given. Default: the built-in chain, the embedded default policy then the guard policy.
    #[arg(long = "policy", value_name = "FILE")]
    pub policies: Vec<PathBuf>,
    /// Settings (JSON) for the policies, one per --policy in the same order (without --policy: one, for the default
    /// policy).
    /// `@FILE` reads the JSON from FILE.
    #[arg(long = "settings", value_name = "JSON")]
    pub settings: Vec<String>,
    #[command(flatten)]
    pub sandbox: crate::policy::kit::SandboxArgs,
    /// Instantiate a fresh policy instance for every evaluation (strict isolation, slower).
    #[arg(long)]
    pub fresh: bool,
    /// Skip a policy that faults instead of denying the command (fail open).
    #[arg(long)]
    pub fail_open: bool,
}

fn read_settings(text: &str) -> Result<String> {
    match text.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read settings file {path}")),
        None => Ok(text.to_string()),
    }
}

impl PolicyArgs {
    /// The sandbox configuration these options describe.
    pub fn sandbox(&self) -> Result<SandboxConfig> {
        let mut config = self.sandbox.config()?;
        config.instance_mode = if self.fresh {
            InstanceMode::Fresh
        } else {
            InstanceMode::Reuse
        };
        config.on_fault = if self.fail_open {
            FaultMode::Skip
        } else {
            FaultMode::Deny
        };
        // A one-shot command evaluates a handful of times: reserving and releasing the pooling allocator's slots
        // would cost more (milliseconds) than it saves; it pays off only when every evaluation instantiates afresh.
        config.pooling = self.fresh;
        Ok(config)
    }

    /// Loads the chain these options name.
    pub fn chain(&self) -> Result<PolicyChain> {
        for p in &self.policies {
            crate::service::check_policy_arg(p)?;
        }
        let engine = PolicyEngine::new(self.sandbox()?)?;
        let expected = self.policies.len().max(1);
        if self.settings.len() > expected {
            bail!(
                "{} --settings given for {} polic{}: give at most one --settings per --policy, in the same order",
                self.settings.len(),
                expected,
                if expected == 1 { "y" } else { "ies" }
            );
        }
        let settings: Vec<String> = self
            .settings
            .iter()
            .map(|s| read_settings(s))
            .collect::<Result<_>>()?;
        let settings_for = |i: usize| settings.get(i).map(String::as_str).unwrap_or("");
        // Without --policy: the built-in chain, `default` then `guard` (--settings applies to `default`).
        let policies = if self.policies.is_empty() {
            vec![
                engine.load_default(settings_for(0))?,
                engine
                    .load_builtin(shellward_policy::embedded::GUARD_POLICY_NAME, "")
                    .expect("the guard is built in")?,
            ]
        } else {
            self.policies
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    // A built-in's name (`default`, `guard`) unless a file of that name exists.
                    let builtin = p
                        .to_str()
                        .filter(|_| !p.exists())
                        .and_then(|name| engine.load_builtin(name, settings_for(i)));
                    builtin.unwrap_or_else(|| engine.load_file(p, settings_for(i)))
                })
                .collect::<Result<_, _>>()?
        };
        Ok(PolicyChain::new(policies, engine.config().on_fault))
    }
}
