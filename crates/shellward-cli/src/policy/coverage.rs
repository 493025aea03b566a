//! `policy test --coverage`: which of the policies' rules (their `rules` export, contract 0.3) a run of case files
//! exercised and which it never hit; for policies that name no rules, which kinds of outcome (deny, rewrite,
//! background, note, confinement) it produced.

use serde_json::json;
use shellward_policy::cases::{CaseResult, PolicyUnderTest};
use shellward_policy::{PolicyEngine, Rule};
use std::collections::BTreeMap;

/// The outcome kinds counted for policies that name no rules (see `cases::outcome_kinds`).
const OUTCOME_KINDS: &[&str] = &[
    "run",
    "deny",
    "rewrite",
    "background",
    "note",
    "confinement",
];

/// One rule (or outcome kind) and the cases that hit it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The rule id (or outcome kind).
    pub id: String,
    /// What it does (empty for outcome kinds and rules no policy declared).
    pub summary: String,
    /// The policy that declared it (empty for outcome kinds and undeclared rules).
    pub policy: String,
    /// How many cases hit it.
    pub cases: usize,
}

/// A coverage report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coverage {
    /// `rules` (the policies declare rules) or `outcomes` (none does: outcome kinds are counted instead).
    pub basis: &'static str,
    /// Every declared rule (or outcome kind), in the policies' order.
    pub entries: Vec<Entry>,
    /// Rule ids the decisions named that no policy declares (a policy's `rules` export is out of date).
    pub undeclared: Vec<String>,
}

impl Coverage {
    /// Computes coverage of `results` for `policies`, whose rules are listed after configuring each with
    /// `settings[i]` (falling back to no settings when those do not load).
    pub fn compute(
        engine: &PolicyEngine,
        policies: &[PolicyUnderTest],
        settings: &[String],
        results: &[CaseResult],
    ) -> anyhow::Result<Coverage> {
        let mut declared: Vec<(String, Rule)> = Vec::new();
        for (i, p) in policies.iter().enumerate() {
            let wanted = settings.get(i).map(String::as_str).unwrap_or("");
            let policy = match engine.load_bytes(&p.name, &p.bytes, wanted) {
                Ok(policy) => policy,
                Err(_) => engine.load_bytes(&p.name, &p.bytes, "")?,
            };
            for rule in policy.rules()? {
                if !declared.iter().any(|(_, r)| r.id == rule.id) {
                    declared.push((p.name.clone(), rule));
                }
            }
        }
        let mut hits: BTreeMap<&str, usize> = BTreeMap::new();
        if declared.is_empty() {
            for r in results {
                for kind in &r.outcomes {
                    *hits.entry(kind).or_default() += 1;
                }
            }
            let entries = OUTCOME_KINDS
                .iter()
                .map(|k| Entry {
                    id: k.to_string(),
                    summary: String::new(),
                    policy: String::new(),
                    cases: hits.get(k).copied().unwrap_or(0),
                })
                .collect();
            return Ok(Coverage {
                basis: "outcomes",
                entries,
                undeclared: Vec::new(),
            });
        }
        for r in results {
            let mut seen: Vec<&str> = r.rules.iter().map(String::as_str).collect();
            seen.sort_unstable();
            seen.dedup();
            for id in seen {
                *hits.entry(id).or_default() += 1;
            }
        }
        let undeclared = hits
            .keys()
            .filter(|id| !declared.iter().any(|(_, r)| r.id == **id))
            .map(|id| id.to_string())
            .collect();
        let entries = declared
            .into_iter()
            .map(|(policy, rule)| Entry {
                cases: hits.get(rule.id.as_str()).copied().unwrap_or(0),
                id: rule.id,
                summary: rule.summary,
                policy,
            })
            .collect();
        Ok(Coverage {
            basis: "rules",
            entries,
            undeclared,
        })
    }

    /// How many entries were hit.
    pub fn hit(&self) -> usize {
        self.entries.iter().filter(|e| e.cases > 0).count()
    }

    /// The share hit, in percent (100 when there is nothing to hit).
    pub fn percent(&self) -> f64 {
        if self.entries.is_empty() {
            100.0
        } else {
            self.hit() as f64 * 100.0 / self.entries.len() as f64
        }
    }

    /// The ids never hit.
    pub fn missed(&self) -> Vec<&str> {
        self.entries
            .iter()
            .filter(|e| e.cases == 0)
            .map(|e| e.id.as_str())
            .collect()
    }

    /// The report as JSON.
    pub fn json(&self) -> serde_json::Value {
        json!({
            "basis": self.basis,
            "hit": self.hit(),
            "total": self.entries.len(),
            "percent": (self.percent() * 10.0).round() / 10.0,
            "entries": self.entries.iter().map(|e| json!({
                "id": e.id, "summary": e.summary, "policy": e.policy, "cases": e.cases,
            })).collect::<Vec<_>>(),
            "missed": self.missed(),
            "undeclared": self.undeclared,
        })
    }

    /// The report as text, for people.
    pub fn text(&self) -> String {
        let what = if self.basis == "rules" {
            "rules"
        } else {
            "outcome kinds (the policies name no rules)"
        };
        let mut out = format!(
            "coverage: {}/{} {what} hit ({:.0}%)\n",
            self.hit(),
            self.entries.len(),
            self.percent()
        );
        let width = self.entries.iter().map(|e| e.id.len()).max().unwrap_or(0);
        for e in &self.entries {
            let mark = if e.cases > 0 {
                format!(
                    "{:>3} case{}",
                    e.cases,
                    if e.cases == 1 { " " } else { "s" }
                )
            } else {
                "  never ".to_string()
            };
            out.push_str(&format!("  {mark}  {:<width$}  {}\n", e.id, e.summary));
        }
        if !self.undeclared.is_empty() {
            out.push_str(&format!(
                "  named but not declared by the policy's rules export: {}\n",
                self.undeclared.join(", ")
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn result(rules: &[&str], outcomes: &[&'static str]) -> CaseResult {
        CaseResult {
            file: PathBuf::from("cases.toml"),
            name: "c".into(),
            mismatches: Vec::new(),
            rules: rules.iter().map(|r| r.to_string()).collect(),
            outcomes: outcomes.to_vec(),
        }
    }

    #[test]
    fn rules_hit_missed_and_undeclared_are_counted() {
        let engine =
            PolicyEngine::new(shellward_policy::SandboxConfig::default().cache_dir(None)).unwrap();
        let default = PolicyUnderTest {
            name: "default".into(),
            bytes: shellward_policy::embedded::DEFAULT_POLICY_WASM.to_vec(),
        };
        let results = [
            result(&["trailing-ampersand", "timeout-default"], &["run"]),
            result(&["trailing-ampersand", "made-up"], &["run"]),
        ];
        let c = Coverage::compute(&engine, &[default], &[], &results).unwrap();
        assert_eq!(c.basis, "rules");
        let amp = c
            .entries
            .iter()
            .find(|e| e.id == "trailing-ampersand")
            .unwrap();
        assert_eq!(amp.cases, 2);
        assert_eq!(c.hit(), 2);
        assert!(c.missed().contains(&"promotion"));
        assert_eq!(c.undeclared, ["made-up"]);
        assert!(c.percent() > 0.0 && c.percent() < 50.0, "{}", c.percent());
        assert!(c.text().contains("never"), "{}", c.text());
    }
}
