//! `shellward:policy@0.3.0`, frozen in `wit/v0.3/`: the shape of 0.4 without the `ask` outcome, so every field maps
//! one to one and its policies simply never ask.

use crate::types::{Denial, Outcome};

wasmtime::component::bindgen!({
    path: "wit/v0.3",
    world: "policy-world",
});

use shellward::policy::types as g;

super::on_timeout_mapping!(g::OnTimeout);
super::shape_v0_3!();

super::host_impls!();

/// A 0.3 policy's outcome in the host's types.
pub(crate) fn outcome(o: g::Outcome) -> Outcome {
    match o {
        g::Outcome::Deny(d) => Outcome::Deny(Denial {
            reason: d.reason,
            rule: d.rule,
        }),
        g::Outcome::Run(p) => Outcome::Run(plan_from(p)),
    }
}
