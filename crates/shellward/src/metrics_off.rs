//! The metrics of a build without the `metrics` feature: every update is a no-op and `GET /metrics` answers one
//! comment line saying why (no Prometheus client is compiled).

/// No metric families: every method does nothing.
pub(crate) struct Metrics;

impl Metrics {
    pub(crate) fn new() -> Metrics {
        Metrics
    }

    pub(crate) fn decision(&self, _outcome: &'static str, _by: Option<&str>, _seconds: f64) {}

    pub(crate) fn fault(&self, _policy: &str, _kind: &'static str) {}

    pub(crate) fn execute(&self, _background: bool, _spawn_micros: u64, _timed_out: bool) {}

    pub(crate) fn signal(&self, _signal: &'static str) {}

    pub(crate) fn approval(&self, _outcome: &'static str) {}

    pub(crate) fn reload(&self, _ok: bool) {}

    pub(crate) fn failed_policies(&self, _failed: &[crate::PolicyFailure]) {}

    /// One comment line in the Prometheus text format.
    pub(crate) fn encode(&self, _running: usize) -> String {
        "# shellward was built without the `metrics` feature: no metrics are kept\n".to_string()
    }
}
