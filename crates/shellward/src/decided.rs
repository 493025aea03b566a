//! What the policy chain decided for one `execute` call ([`Decided`]) and the form every surface acts on
//! ([`Verdict`]).

use crate::shape::reason_text;
use shellward_exec::ExecPlan;
use shellward_policy::{Decision, Outcome, Request};

/// What the policy chain decided for an `execute` call: the [`Verdict`] (made once, with the plan the executor runs
/// inside it, so a denied decision has no plan to run), and what it was decided from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Decided {
    /// The command as the caller asked for it (before any policy rewrote it).
    pub asked: String,
    /// The caller's session.
    pub session: Option<String>,
    /// The chain's decision (outcome, who denied, faults): what the audit log and `policy check` show.
    pub decision: Decision,
    /// The request the chain decided (what a replay re-decides).
    pub request: Request,
    verdict: Verdict,
}

/// A decision as the caller acts on it: run this plan (with the policies' notes), or refuse (with the reason and the
/// policy that refused). Every surface reads decisions through this one type. Exhaustive on purpose, as the policy
/// crate's `Outcome` is: a new kind of verdict is one every surface must handle, not skip.
// One per decision, consumed at once: boxing the plan would cost an allocation per command for no saving.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Verdict {
    /// Run the plan.
    Run {
        /// What the executor runs.
        plan: ExecPlan,
        /// The policies' notes for the agent, in chain order.
        notes: Vec<String>,
    },
    /// Do not run it.
    Deny {
        /// Why, for the agent (never empty).
        reason: String,
        /// The policy that denied (`a policy` when unknown).
        by: String,
    },
    /// Run the plan only once someone approves it (see [`crate::approval`]).
    Ask {
        /// What the executor runs once approved.
        plan: ExecPlan,
        /// The policies' notes for the agent, in chain order.
        notes: Vec<String>,
        /// The question for the person.
        question: String,
        /// The rule that asked, when named.
        rule: Option<String>,
        /// The policy that asked (`a policy` when unknown).
        by: String,
    },
}

impl Decided {
    /// The decision of `request`: `plan` is the executor's plan for a run or an ask (`None`: refused, whatever the
    /// outcome said — a plan that could not be made is a deny).
    pub(crate) fn new(
        asked: String,
        session: Option<String>,
        decision: Decision,
        plan: Option<ExecPlan>,
        request: Request,
    ) -> Decided {
        let verdict = verdict_of(&decision, plan);
        Decided {
            asked,
            session,
            decision,
            request,
            verdict,
        }
    }

    /// What to do: run the plan, ask about it, or refuse.
    pub fn verdict(&self) -> &Verdict {
        &self.verdict
    }

    /// The plan the executor runs (for an ask: once approved); `None` for a refusal.
    pub fn plan(&self) -> Option<&ExecPlan> {
        match &self.verdict {
            Verdict::Run { plan, .. } | Verdict::Ask { plan, .. } => Some(plan),
            Verdict::Deny { .. } => None,
        }
    }

    /// The plan, to put the host's labels and deadline on it before it runs.
    pub(crate) fn plan_mut(&mut self) -> Option<&mut ExecPlan> {
        match &mut self.verdict {
            Verdict::Run { plan, .. } | Verdict::Ask { plan, .. } => Some(plan),
            Verdict::Deny { .. } => None,
        }
    }
}

/// The verdict of `decision` with the executor's `plan` (see [`Decided::new`]).
fn verdict_of(decision: &Decision, plan: Option<ExecPlan>) -> Verdict {
    match (plan, &decision.outcome) {
        (Some(plan), Outcome::Run(p)) => Verdict::Run {
            plan,
            notes: p.notes.clone(),
        },
        (Some(plan), Outcome::Ask(a)) => Verdict::Ask {
            plan,
            notes: a.plan.notes.clone(),
            question: a.question.clone(),
            rule: a.rule.clone(),
            by: decision
                .asked_by
                .clone()
                .unwrap_or_else(|| "a policy".into()),
        },
        (_, outcome) => Verdict::Deny {
            reason: reason_text(match outcome {
                Outcome::Deny(d) => d.reason.clone(),
                Outcome::Run(_) | Outcome::Ask(_) => String::new(),
            }),
            by: decision
                .denied_by
                .clone()
                .unwrap_or_else(|| "a policy".into()),
        },
    }
}
