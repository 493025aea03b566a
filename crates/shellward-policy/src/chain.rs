//! A chain of policies run in order.

use crate::engine::FaultMode;
use crate::error::{FaultKind, PolicyError};
use crate::policy::Policy;
use crate::types::{Ask, Outcome, Plan, Request};

/// Policies in order. Each sees the previous one's plan as its request; the first deny stops the chain. A policy
/// that asks hands its plan on like a run, and the chain's outcome is then an ask (deny beats ask beats run).
#[derive(Debug)]
pub struct PolicyChain {
    policies: Vec<Policy>,
    /// The fault behaviour of each policy, in the same order.
    on_fault: Vec<FaultMode>,
}

/// A policy that failed while the chain decided: which, how, and the error's text.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Fault {
    /// The policy's name.
    pub policy: String,
    /// The kind of fault of the running policy; `None` for a failure that is not one (e.g. an instance could not be
    /// created).
    pub kind: Option<FaultKind>,
    /// The error, as the deny reason and the logs show it.
    pub message: String,
}

impl Fault {
    /// The kind as metrics and audit records name it: `deadline`, `memory`, `stack`, `trap`, `invalid_output`,
    /// `beyond_ceiling`, or `error`.
    pub fn kind_name(&self) -> &'static str {
        self.kind.map_or("error", FaultKind::as_str)
    }
}

/// The chain's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decision {
    /// The final outcome. For `run` and `ask`, the plan's notes and rules are every policy's, in chain order; an
    /// ask's question is every asking policy's, one per line.
    pub outcome: Outcome,
    /// The policy that denied, when the outcome is a deny.
    pub denied_by: Option<String>,
    /// The first policy that asked, when the outcome is an ask.
    pub asked_by: Option<String>,
    /// Policies that faulted and were skipped (fail-open) or caused the deny (fail-closed), in chain order.
    pub faults: Vec<Fault>,
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
        // What the next policy sees: the caller's request, then each plan as a request. Built only when another
        // policy follows (the last plan is the decision).
        let mut current = std::borrow::Cow::Borrowed(request);
        let last = self.policies.len().saturating_sub(1);
        let mut folded = Folded::default();
        for (i, (policy, on_fault)) in self.policies.iter().zip(&self.on_fault).enumerate() {
            let plan = match policy.evaluate_here(&current) {
                Ok(Outcome::Run(p)) => p,
                // An ask: its plan goes on through the chain as a run's would (later policies may narrow it or deny
                // it), and the question stays: nothing later turns an ask back into a run.
                Ok(Outcome::Ask(ask)) => {
                    folded
                        .asks
                        .push((policy.name().to_string(), ask.question, ask.rule));
                    ask.plan
                }
                Ok(Outcome::Deny(denial)) => {
                    return folded.denied(Outcome::Deny(denial), policy.name());
                }
                Err(e) => {
                    if let Some(deny) = folded.fault(policy.name(), &e, *on_fault) {
                        return deny;
                    }
                    continue;
                }
            };
            folded.take(policy.name(), &current, plan);
            if i < last {
                current = std::borrow::Cow::Owned(
                    request.after(folded.plan.as_ref().expect("just taken")),
                );
            }
        }
        folded.decided(&current)
    }
}

/// What the chain has decided so far: the last plan, every policy's notes and rules, the questions asked, faults.
#[derive(Default)]
struct Folded {
    plan: Option<Plan>,
    notes: Vec<String>,
    rules: Vec<String>,
    /// (policy, question, rule) for each policy that asked, in chain order.
    asks: Vec<(String, String, Option<String>)>,
    faults: Vec<Fault>,
    workdir_by: Option<String>,
    confinement_by: Option<String>,
}

impl Folded {
    /// A policy's plan (run, or asked) becomes the chain's, its notes and rules kept apart until the end.
    fn take(&mut self, by: &str, current: &Request, mut p: Plan) {
        if p.workdir != current.workdir {
            self.workdir_by = Some(by.to_string());
        }
        if p.confinement != current.confinement {
            self.confinement_by = Some(by.to_string());
        }
        self.notes.append(&mut p.notes);
        self.rules.append(&mut p.rules);
        self.plan = Some(p);
    }

    /// A policy failed: the deny that ends the chain (fail closed), or `None` when it is skipped (fail open).
    fn fault(&mut self, by: &str, e: &PolicyError, on_fault: FaultMode) -> Option<Decision> {
        let text = e.to_string();
        self.faults.push(Fault {
            policy: by.to_string(),
            kind: match e {
                PolicyError::Fault { kind, .. } => Some(*kind),
                _ => None,
            },
            message: text.clone(),
        });
        // Fail open skips only a policy that crashed or misbehaved; an answer beyond the operator's ceiling is
        // deliberate, and skipping it would also drop what it narrowed.
        let skip = on_fault == FaultMode::Skip
            && matches!(e, PolicyError::Fault { kind, .. } if *kind != FaultKind::BeyondCeiling);
        if skip {
            return None;
        }
        Some(self.denied(
            Outcome::deny(format!(
                "The command was not run because a policy failed (fail closed): {text}. Tell the operator; \
                 retrying the same command will fail the same way."
            )),
            by,
        ))
    }

    /// The chain's decision when `by` denied.
    fn denied(&mut self, outcome: Outcome, by: &str) -> Decision {
        Decision {
            outcome,
            denied_by: Some(by.to_string()),
            asked_by: None,
            faults: std::mem::take(&mut self.faults),
            workdir_by: self.workdir_by.take(),
            confinement_by: self.confinement_by.take(),
        }
    }

    /// The chain's decision when nobody denied: the last plan with every note and rule, asked if any policy asked
    /// (every question, in chain order; the first asking rule).
    fn decided(self, current: &Request) -> Decision {
        let mut plan = self.plan.unwrap_or_else(|| Plan::from_request(current));
        plan.notes = self.notes;
        plan.rules = self.rules;
        let asked_by = self.asks.first().map(|(by, _, _)| by.clone());
        let outcome = if self.asks.is_empty() {
            Outcome::Run(plan)
        } else {
            let question = self
                .asks
                .iter()
                .map(|(_, q, _)| q.as_str())
                .collect::<Vec<_>>()
                .join("\n");
            let rule = self.asks.iter().find_map(|(_, _, r)| r.clone());
            Outcome::Ask(Ask {
                plan,
                question,
                rule,
            })
        };
        Decision {
            outcome,
            denied_by: None,
            asked_by,
            faults: self.faults,
            workdir_by: self.workdir_by,
            confinement_by: self.confinement_by,
        }
    }
}
