//! `shellward:policy@0.4.0`, the current contract (`wit/v0.4/`): every field maps one to one.

use crate::types::{Ask, Denial, Outcome};

wasmtime::component::bindgen!({
    path: "wit/v0.4",
    world: "policy-world",
});

use shellward::policy::types as g;

super::on_timeout_mapping!(g::OnTimeout);
super::shape_v0_3!();

super::host_impls!();

/// A 0.4 policy's outcome in the host's types.
pub(crate) fn outcome(o: g::Outcome) -> Outcome {
    match o {
        g::Outcome::Deny(d) => Outcome::Deny(Denial {
            reason: d.reason,
            rule: d.rule,
        }),
        g::Outcome::Run(p) => Outcome::Run(plan_from(p)),
        g::Outcome::Ask(q) => Outcome::Ask(Ask {
            plan: plan_from(q.plan),
            question: q.text,
            rule: q.rule,
        }),
    }
}
