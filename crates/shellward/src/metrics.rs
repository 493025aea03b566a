//! Prometheus metrics (`GET /metrics` on `serve`): what was decided, what ran, how long it took, reloads.
//!
//! Every series is documented in the manual (docs/src/operations.md). Counters and histograms are updated on the call path (an atomic add
//! each); the running-processes gauge is read from the executor when scraped.

use prometheus_client::encoding::{EncodeLabelSet, text::encode};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    outcome: &'static str,
    /// The denying policy; empty for a run.
    policy: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FaultLabels {
    policy: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModeLabels {
    mode: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SignalLabels {
    signal: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApprovalLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

/// The metric families of one [`crate::Shellward`].
pub(crate) struct Metrics {
    registry: Registry,
    decisions: Family<DecisionLabels, Counter>,
    faults: Family<FaultLabels, Counter>,
    chain_seconds: Histogram,
    executes: Family<ModeLabels, Counter>,
    timeouts: Counter,
    signals: Family<SignalLabels, Counter>,
    approvals: Family<ApprovalLabels, Counter>,
    running: Gauge,
    spawn_seconds: Histogram,
    reloads: Family<ResultLabels, Counter>,
    failed: Family<SourceLabels, Gauge>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: String,
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::default();
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "shellward_decisions",
            "Policy-chain decisions by outcome (run, deny, ask) and the denying or asking policy",
            decisions.clone(),
        );
        let faults = Family::<FaultLabels, Counter>::default();
        registry.register(
            "shellward_policy_faults",
            "Policy faults by policy and kind (deadline, memory, stack, trap, invalid_output, error)",
            faults.clone(),
        );
        // 50 µs .. ~0.8 s.
        let chain_seconds = Histogram::new(exponential_buckets(0.00005, 2.0, 15));
        registry.register(
            "shellward_policy_chain_seconds",
            "Time to evaluate the whole policy chain for one request",
            chain_seconds.clone(),
        );
        let executes = Family::<ModeLabels, Counter>::default();
        registry.register(
            "shellward_executes",
            "Commands started, by mode (foreground, background)",
            executes.clone(),
        );
        let timeouts = Counter::default();
        registry.register(
            "shellward_timeouts",
            "Foreground runs whose timeout expired",
            timeouts.clone(),
        );
        let signals = Family::<SignalLabels, Counter>::default();
        registry.register(
            "shellward_signals",
            "process_signal calls by signal (terminate, kill)",
            signals.clone(),
        );
        let approvals = Family::<ApprovalLabels, Counter>::default();
        registry.register(
            "shellward_approvals",
            "Asked commands by outcome (approved, denied, expired, unavailable, remembered, pending)",
            approvals.clone(),
        );
        let running = Gauge::default();
        registry.register(
            "shellward_running_processes",
            "Commands running now, over every session",
            running.clone(),
        );
        // 100 µs .. ~3 s.
        let spawn_seconds = Histogram::new(exponential_buckets(0.0001, 2.0, 15));
        registry.register(
            "shellward_spawn_seconds",
            "Time to start a command (its tree and leader) until it runs",
            spawn_seconds.clone(),
        );
        let reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "shellward_policy_reloads",
            "Policy-chain reloads by result (ok, error)",
            reloads.clone(),
        );
        let failed = Family::<SourceLabels, Gauge>::default();
        registry.register(
            "shellward_policy_load_failed",
            "Policies the last load attempt could not load (1 per source; the previous chain kept serving)",
            failed.clone(),
        );
        Metrics {
            registry,
            decisions,
            faults,
            chain_seconds,
            executes,
            timeouts,
            signals,
            approvals,
            running,
            spawn_seconds,
            reloads,
            failed,
        }
    }

    /// A chain's decision: `outcome` (`run`, `deny`, `ask`) and the policy that denied or asked.
    pub(crate) fn decision(&self, outcome: &'static str, by: Option<&str>, seconds: f64) {
        let labels = DecisionLabels {
            outcome,
            policy: by.unwrap_or_default().to_string(),
        };
        self.decisions.get_or_create(&labels).inc();
        self.chain_seconds.observe(seconds);
    }

    pub(crate) fn fault(&self, policy: &str, kind: &'static str) {
        self.faults
            .get_or_create(&FaultLabels {
                policy: policy.to_string(),
                kind,
            })
            .inc();
    }

    pub(crate) fn execute(&self, background: bool, spawn_micros: u64, timed_out: bool) {
        let mode = if background {
            "background"
        } else {
            "foreground"
        };
        self.executes.get_or_create(&ModeLabels { mode }).inc();
        self.spawn_seconds.observe(spawn_micros as f64 / 1e6);
        if timed_out {
            self.timeouts.inc();
        }
    }

    /// An asked command's outcome: `approved`, `denied`, `expired`, `unavailable`, `remembered`, `pending`.
    pub(crate) fn approval(&self, outcome: &'static str) {
        self.approvals
            .get_or_create(&ApprovalLabels { outcome })
            .inc();
    }

    pub(crate) fn signal(&self, signal: &'static str) {
        self.signals.get_or_create(&SignalLabels { signal }).inc();
    }

    pub(crate) fn reload(&self, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.reloads.get_or_create(&ResultLabels { result }).inc();
    }

    /// The policies the last load attempt could not load (1 each; the family is emptied when an attempt succeeds).
    pub(crate) fn failed_policies(&self, failed: &[crate::PolicyFailure]) {
        self.failed.clear();
        for f in failed {
            self.failed
                .get_or_create(&SourceLabels {
                    source: f.source.clone(),
                })
                .set(1);
        }
    }

    /// The Prometheus text exposition, with the running gauge set to `running`.
    pub(crate) fn encode(&self, running: usize) -> String {
        self.running.set(running as i64);
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry);
        out
    }
}
