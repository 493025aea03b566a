//! What the facade writes to the audit log: a decision record (with the request, for replays) and how a started
//! process ended.

use crate::shape::exit_fields;
use crate::{Decided, Shellward, audit};
use serde_json::Value;
use shellward_exec::{ExecResult, OnTimeout, ReadOptions, Session};
use shellward_policy::Outcome;

impl Shellward {
    /// The audit record of a decision (the process id is added once it started).
    pub(crate) fn decision_record(&self, decided: &Decided) -> Value {
        let policies: Vec<Value> = self
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
            "surface": self.inner.surface,
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

    /// Records how a started process ended: now when it already has, otherwise when it does (on a task of its own).
    pub(crate) fn audit_end(&self, r: &ExecResult, session: Option<String>) {
        let Some(audit) = &self.inner.audit else {
            return;
        };
        let include_output = audit.include_output;
        if !r.running {
            let (code, signal) = exit_fields(&r.exit);
            let mut record = serde_json::json!({
                "type": "end",
                "surface": self.inner.surface,
                "session": session,
                "process_id": r.id.as_str(),
                "exit_code": code,
                "signal": signal,
                "timed_out": r.timed_out,
                "duration_ms": r.wall_ms,
                "output_bytes": r.output.total_bytes,
                "leftover_processes": r.leftover_processes,
            });
            // What the sandbox refused it, as it saw it (not read from the output).
            if !r.refused_sockets.is_empty() {
                record["refused_sockets"] = serde_json::json!(r.refused_sockets);
            }
            if r.refused_unix_datagram {
                record["refused_unix_datagram"] = true.into();
            }
            if !r.refused_writes.is_empty() {
                record["refused_writes"] = serde_json::json!(r.refused_writes);
            }
            if !r.refused_network.is_empty() {
                record["refused_network"] = serde_json::json!(r.refused_network);
            }
            if include_output {
                record["output"] = serde_json::json!(r.output.text);
            }
            audit.record(record);
            return;
        }
        let this = self.clone();
        let id = r.id.clone();
        let (started, before) = (std::time::Instant::now(), r.wall_ms);
        let pending = audit.end_pending();
        tokio::spawn(async move {
            let _pending = pending;
            let exec_session = session.as_deref().map(Session::from);
            let Ok(info) = this
                .inner
                .runner
                .executor
                .wait_exit(exec_session.as_ref(), &id)
                .await
            else {
                return;
            };
            let (code, signal) = exit_fields(&info.exit);
            let mut record = serde_json::json!({
                "type": "end",
                "surface": this.inner.surface,
                "session": session,
                "process_id": id.as_str(),
                "exit_code": code,
                "signal": signal,
                "timed_out": false,
                "duration_ms": before + started.elapsed().as_millis() as u64,
                "output_bytes": info.output_bytes,
            });
            if include_output
                && let Ok(read) = this
                    .inner
                    .runner
                    .executor
                    .read_output(
                        exec_session.as_ref(),
                        &id,
                        &ReadOptions::view().max_bytes(64 * 1024),
                    )
                    .await
                && let Some(view) = read.view
            {
                record["output"] = serde_json::json!(view.text);
            }
            if let Some(audit) = &this.inner.audit {
                audit.record(record);
            }
        });
    }
}
