//! The audit log's decision record (with the request, for replays, and the chain that decided); how a started
//! process ended is the runner's to record ([`crate::runner::Runner::audit_end`]).

use crate::{Decided, audit};
use serde_json::Value;
use shellward_exec::OnTimeout;
use shellward_policy::Outcome;

impl crate::SessionHandle {
    /// The audit record of a decision (the process id is added once it started).
    pub(crate) fn decision_record(&self, decided: &Decided) -> Value {
        let policies: Vec<Value> = self
            .sw
            .policies()
            .summaries()
            .iter()
            .map(|p| serde_json::json!({"name": p.name, "digest": p.digest}))
            .collect();
        let faults: Vec<Value> = decided
            .decision
            .faults
            .iter()
            .map(|f| serde_json::json!({"policy": f.policy, "kind": f.kind_name(), "error": f.message}))
            .collect();
        let mut record = serde_json::json!({
            "type": "decision",
            "v": audit::RECORD_VERSION,
            "surface": self.sw.inner.runner.surface,
            "session": decided.session,
            "tool": "execute",
            "command": decided.asked,
            "request": audit::request_json(&decided.request),
            "policies": policies,
            "faults": faults,
        });
        let outcome = &decided.decision.outcome;
        match (outcome.planned(), decided.plan(), outcome) {
            (Some(p), Some(plan), _) => {
                record["outcome"] = outcome.kind().into();
                if let Outcome::Ask(ask) = outcome {
                    record["question"] = serde_json::json!(ask.question);
                    record["rule"] = serde_json::json!(ask.rule);
                    record["asked_by"] = serde_json::json!(decided.decision.asked_by);
                }
                record["plan"] = serde_json::json!({
                    "command": plan.command,
                    "workdir": plan.workdir,
                    "mode": if plan.background { "background" } else { "foreground" },
                    "timeout_ms": plan.timeout.map(|t| t.as_millis() as u64),
                    "on_timeout": match plan.on_timeout {
                        OnTimeout::Kill => "kill",
                        _ => "background",
                    },
                    "confinement": audit::confinement_json(&p.confinement),
                    "startup_wait_ms": plan.startup_wait.map(|t| t.as_millis() as u64),
                });
                record["notes"] = serde_json::json!(p.notes);
                record["rules"] = serde_json::json!(p.rules);
            }
            (_, _, Outcome::Deny(denial)) => {
                record["outcome"] = "deny".into();
                record["reason"] = serde_json::json!(denial.reason);
                record["rule"] = serde_json::json!(denial.rule);
                record["denied_by"] = serde_json::json!(decided.decision.denied_by);
            }
            _ => record["outcome"] = "deny".into(),
        }
        record
    }
}
