//! What the policy host's integration tests share: an engine whose compiled components are cached in the test target
//! directory, and the plan of a decision that must be a run.

use shellward_policy::{InstanceMode, Outcome, Plan, PolicyEngine, SandboxConfig};

/// An engine with `mode`, caching compiled components under the test target directory.
pub fn engine(mode: InstanceMode) -> PolicyEngine {
    PolicyEngine::new(
        SandboxConfig::default()
            .instance_mode(mode)
            .cache_dir(Some(env!("CARGO_TARGET_TMPDIR").into())),
    )
    .unwrap()
}

/// The plan of `outcome`, which must be a run.
pub fn plan(outcome: Outcome) -> Plan {
    match outcome {
        Outcome::Run(p) => p,
        other => panic!("expected a run: {other:?}"),
    }
}
