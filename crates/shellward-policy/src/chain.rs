//! A chain of policies run in order.

use crate::engine::FaultMode;
use crate::error::{FaultKind, PolicyError};
use crate::policy::Policy;
use crate::types::{Outcome, Plan, Request};

/// Policies in order. Each sees the previous one's plan as its request; the first deny stops the chain.
#[derive(Debug)]
pub struct PolicyChain {
    policies: Vec<Policy>,
    /// The fault behaviour of each policy, in the same order.
    on_fault: Vec<FaultMode>,
}

/// The chain's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decision {
    /// The final outcome. For `run`, the plan's notes and rules are every policy's, in chain order.
    pub outcome: Outcome,
    /// The policy that denied, when the outcome is a deny.
    pub denied_by: Option<String>,
    /// Policies that faulted and were skipped (fail-open) or caused the deny (fail-closed), with the error text.
    pub faults: Vec<(String, String)>,
    /// The kind of each fault, in the order of `faults`: `deadline`, `memory`, `stack`, `trap`, `invalid_output`,
    /// or `error` for a failure that is not a fault of the running policy (e.g. an instance could not be created).
    pub fault_kinds: Vec<&'static str>,
    /// The last policy that changed the working directory, if any did (a directory that turns out not to exist is
    /// that policy's fault, not the caller's).
    pub workdir_by: Option<String>,
    /// The last policy that changed the confinement, if any did (a confinement the host cannot enforce is that
    /// policy's fault).
    pub confinement_by: Option<String>,
}

impl PolicyChain {
    /// A chain of `policies` (run in this order) with the given fault behaviour.
    pub fn new(policies: Vec<Policy>, on_fault: FaultMode) -> PolicyChain {
        let on_fault = vec![on_fault; policies.len()];
        PolicyChain { policies, on_fault }
    }

    /// A chain where each policy has its own fault behaviour (fail closed or fail open), run in this order.
    pub fn with_fault_modes(entries: Vec<(Policy, FaultMode)>) -> PolicyChain {
        let (policies, on_fault) = entries.into_iter().unzip();
        PolicyChain { policies, on_fault }
    }

    /// The policies, in order.
    pub fn policies(&self) -> &[Policy] {
        &self.policies
    }

    /// Runs the chain on `request`. Never fails: a faulting policy yields a deny (fail closed) or is skipped (fail
    /// open), as configured, and is reported in [`Decision::faults`].
    ///
    /// The whole chain runs in one step outside the async runtime (see `outside_async`): on a multi-threaded runtime
    /// leaving it hands the worker's tasks to another thread, which is worth doing once per decision, not once per
    /// policy.
    pub fn evaluate(&self, request: &Request) -> Decision {
        crate::outside_async::outside_async_runtime(|| self.evaluate_here(request))
    }

    fn evaluate_here(&self, request: &Request) -> Decision {
        let mut notes: Vec<String> = Vec::new();
        let mut rules: Vec<String> = Vec::new();
        // What the next policy sees: the caller's request, then each plan as a request. Built only when another
        // policy follows (the last plan is the decision).
        let mut current = std::borrow::Cow::Borrowed(request);
        let last = self.policies.len().saturating_sub(1);
        let mut plan: Option<Plan> = None;
        let mut faults = Vec::new();
        let mut fault_kinds = Vec::new();
        let mut workdir_by = None;
        let mut confinement_by = None;
        for (i, (policy, on_fault)) in self.policies.iter().zip(&self.on_fault).enumerate() {
            match policy.evaluate_here(&current) {
                Ok(Outcome::Run(mut p)) => {
                    if p.workdir != current.workdir {
                        workdir_by = Some(policy.name().to_string());
                    }
                    if p.confinement != current.confinement {
                        confinement_by = Some(policy.name().to_string());
                    }
                    notes.append(&mut p.notes);
                    rules.append(&mut p.rules);
                    if i < last {
                        current = std::borrow::Cow::Owned(request.after(&p));
                    }
                    plan = Some(p);
                }
                Ok(Outcome::Deny(denial)) => {
                    return Decision {
                        outcome: Outcome::Deny(denial),
                        denied_by: Some(policy.name().to_string()),
                        faults,
                        fault_kinds,
                        workdir_by,
                        confinement_by,
                    };
                }
                Err(e) => {
                    let text = e.to_string();
                    faults.push((policy.name().to_string(), text.clone()));
                    fault_kinds.push(match &e {
                        PolicyError::Fault { kind, .. } => kind.as_str(),
                        _ => "error",
                    });
                    // Fail open skips only a policy that crashed or misbehaved; an answer beyond the operator's
                    // ceiling is deliberate, and skipping it would also drop what it narrowed.
                    let skip = *on_fault == FaultMode::Skip
                        && matches!(&e, PolicyError::Fault { kind, .. } if *kind != FaultKind::BeyondCeiling);
                    if !skip {
                        return Decision {
                            outcome: Outcome::deny(format!(
                                "The command was not run because a policy failed (fail closed): {text}. Tell the \
                                 operator; retrying the same command will fail the same way."
                            )),
                            denied_by: Some(policy.name().to_string()),
                            faults,
                            fault_kinds,
                            workdir_by,
                            confinement_by,
                        };
                    }
                }
            }
        }
        let mut plan = plan.unwrap_or_else(|| Plan::from_request(&current));
        plan.notes = notes;
        plan.rules = rules;
        Decision {
            outcome: Outcome::Run(plan),
            denied_by: None,
            faults,
            fault_kinds,
            workdir_by,
            confinement_by,
        }
    }
}
