//! The active policy chain: what is loaded (with a summary per policy for `GET /v1/policies` and `policy list`), its
//! load status (what the last attempt could not load), and atomic replacement on reload (the watcher that triggers
//! reloads is `watch`).
//!
//! A reload loads and configures the whole new chain first; only when every policy loaded does it replace the old
//! one, in one swap of an `Arc`. A call in flight keeps the chain it started with (it holds its own `Arc`). When
//! anything fails the old chain stays, and the error names the file and why.

use crate::config::{Config, ConfigError, PolicySource};
use serde::Serialize;
use sha2::{Digest, Sha256};
use shellward_policy::{PolicyChain, PolicyEngine};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

/// One policy of the active chain, as `GET /v1/policies` and `shellward policy list` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PolicySummary {
    /// The policy's name (in deny reasons, notes and logs).
    pub name: String,
    /// Where it came from: `builtin:default`, `builtin:guard`, or the component's path.
    pub source: String,
    /// `sha256:` digest of the component's bytes.
    pub digest: String,
    /// The WIT contract version the component targets.
    pub wit_version: Option<String>,
    /// `sha256:` digest of the settings JSON it was configured with.
    pub settings_digest: String,
    /// Skips the policy on a fault instead of denying.
    pub fail_open: bool,
    /// When this chain was loaded (seconds since the Unix epoch).
    pub loaded_at: u64,
}

fn sha256(bytes: &[u8]) -> String {
    // The built-ins' digests come from the build script.
    if let Some(hex) = shellward_policy::embedded::builtin_sha256(bytes) {
        return format!("sha256:{hex}");
    }
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// What a loaded chain is made of. The digests of the built-in components (immutable, embedded; hashing them is
/// about half a megabyte of SHA-256) are computed on first use, not at every start; a file's digest is taken at load,
/// so it describes the bytes that were loaded even if the file changes later.
pub(crate) struct Summaries {
    /// The summaries, built-ins' `digest` still empty.
    partial: Vec<PolicySummary>,
    /// Per policy: the embedded component whose digest is still to compute.
    builtin: Vec<Option<&'static [u8]>>,
    done: std::sync::OnceLock<Arc<Vec<PolicySummary>>>,
}

impl Summaries {
    /// Summaries given by the host (no sources to digest).
    pub(crate) fn given(summaries: Vec<PolicySummary>) -> Summaries {
        Summaries {
            builtin: vec![None; summaries.len()],
            partial: summaries,
            done: std::sync::OnceLock::new(),
        }
    }

    /// The summaries, digests complete (computed once).
    pub(crate) fn get(&self) -> Arc<Vec<PolicySummary>> {
        self.done
            .get_or_init(|| {
                let mut all = self.partial.clone();
                for (summary, bytes) in all.iter_mut().zip(&self.builtin) {
                    if let Some(bytes) = bytes {
                        summary.digest = sha256(bytes);
                    }
                }
                Arc::new(all)
            })
            .clone()
    }
}

/// A loaded chain and what it is made of.
pub(crate) struct Loaded {
    pub(crate) chain: Arc<PolicyChain>,
    pub(crate) summaries: Arc<Summaries>,
}

/// Loads the chain a configuration describes, with its summaries.
pub(crate) fn load(config: &Config, engine: &PolicyEngine) -> Result<Loaded, ConfigError> {
    // Read once: the summaries describe exactly the entries the chain was loaded from.
    let entries = config.policy_entries()?;
    let chain = config.load_entries(&entries, engine)?;
    let loaded_at = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut builtin = Vec::new();
    let partial = chain
        .policies()
        .iter()
        .zip(entries)
        .map(|(policy, (_, entry))| {
            let (source, embedded, digest) = match &entry.source {
                PolicySource::Default => (
                    "builtin:default".to_string(),
                    Some(shellward_policy::embedded::DEFAULT_POLICY_WASM),
                    String::new(),
                ),
                PolicySource::Guard => (
                    "builtin:guard".to_string(),
                    Some(shellward_policy::embedded::GUARD_POLICY_WASM),
                    String::new(),
                ),
                PolicySource::File(p) => (
                    p.display().to_string(),
                    None,
                    sha256(&shellward_policy::read_component(p).unwrap_or_default()),
                ),
                PolicySource::Oci(reference) => (
                    format!("oci:{reference}"),
                    None,
                    // A pinned reference is in the cache now (no network); a tag's digest is not recorded.
                    crate::oci::default_cache_dir()
                        .filter(|_| reference.contains("@sha256:"))
                        .and_then(|dir| crate::oci::pull(reference, &dir).ok())
                        .map(|p| sha256(&p.component))
                        .unwrap_or_else(|| sha256(&[])),
                ),
            };
            builtin.push(embedded);
            PolicySummary {
                name: policy.name().to_string(),
                source,
                digest,
                wit_version: policy.info().wit_version.clone(),
                settings_digest: sha256(policy.settings().as_bytes()),
                fail_open: entry.fail_open,
                loaded_at,
            }
        })
        .collect();
    Ok(Loaded {
        chain: Arc::new(chain),
        summaries: Arc::new(Summaries {
            partial,
            builtin,
            done: std::sync::OnceLock::new(),
        }),
    })
}

/// A policy the last load attempt could not load: the previous version (if any) keeps serving.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PolicyFailure {
    /// Where it is configured: `policy[N]` or `policies.dir/NAME.wasm` (a key of the configuration).
    pub source: String,
    /// Why it could not be loaded, and what to do.
    pub error: String,
}

/// The chain's load status, as `GET /v1/policies` and `policy list --server` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PolicyStatus {
    /// The policies in force (`state` of each is `loaded`).
    pub policies: Vec<PolicySummary>,
    /// What the last load attempt could not load (empty when it succeeded); the chain above kept serving.
    pub failed: Vec<PolicyFailure>,
    /// When the last load attempt was made (seconds since the Unix epoch), and whether it succeeded.
    pub last_attempt: u64,
    /// The last attempt replaced the chain.
    pub last_attempt_ok: bool,
}

/// The outcome of the last load attempt.
struct Attempt {
    at: u64,
    failed: Vec<PolicyFailure>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The chain in force and how to load it again.
pub(crate) struct Active {
    current: RwLock<(Arc<PolicyChain>, Arc<Summaries>)>,
    /// The configuration and engine to reload from; `None` when the host handed in a chain of its own.
    source: Option<(Mutex<Config>, PolicyEngine)>,
    /// The last load attempt (the build's, then each reload's).
    attempt: Mutex<Attempt>,
}

impl Active {
    pub(crate) fn new(loaded: Loaded, source: Option<(Config, PolicyEngine)>) -> Active {
        Active {
            current: RwLock::new((loaded.chain, loaded.summaries)),
            source: source.map(|(c, e)| (Mutex::new(c), e)),
            attempt: Mutex::new(Attempt {
                at: now_secs(),
                failed: Vec::new(),
            }),
        }
    }

    /// A chain the host loaded itself ([`crate::ShellwardBuilder::policy_chain`]), kept as it is: never reloaded.
    pub(crate) fn given(chain: PolicyChain) -> Active {
        let summaries = chain
            .policies()
            .iter()
            .map(|p| PolicySummary {
                name: p.name().to_string(),
                source: "host".into(),
                digest: String::new(),
                wit_version: p.info().wit_version.clone(),
                settings_digest: String::new(),
                fail_open: false,
                loaded_at: 0,
            })
            .collect();
        Active::new(
            Loaded {
                chain: Arc::new(chain),
                summaries: Arc::new(Summaries::given(summaries)),
            },
            None,
        )
    }

    pub(crate) fn chain(&self) -> Arc<PolicyChain> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .clone()
    }

    pub(crate) fn summaries(&self) -> Arc<Vec<PolicySummary>> {
        let summaries = self
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .clone();
        summaries.get()
    }

    /// The load status: the policies in force, and what the last attempt could not load.
    pub(crate) fn status(&self) -> PolicyStatus {
        let attempt = self.attempt.lock().unwrap_or_else(|p| p.into_inner());
        PolicyStatus {
            policies: self.summaries().as_ref().clone(),
            failed: attempt.failed.clone(),
            last_attempt: attempt.at,
            last_attempt_ok: attempt.failed.is_empty(),
        }
    }

    /// Where a reload looks: the drop-in directory and the configuration file, when there are any.
    pub(crate) fn watched(&self) -> Vec<PathBuf> {
        let Some((config, _)) = &self.source else {
            return Vec::new();
        };
        let config = config.lock().unwrap_or_else(|p| p.into_inner());
        config
            .policy_dir
            .iter()
            .chain(config.source_file.iter())
            .cloned()
            .collect()
    }

    /// Re-reads the configuration file's policy part (when there is a file) and the drop-in directory, loads the
    /// new chain, and swaps it in. On any failure the old chain stays.
    pub(crate) fn reload(&self) -> Result<usize, ConfigError> {
        let result = self.reload_inner();
        let failed = match &result {
            Ok(_) => Vec::new(),
            Err(e) => e
                .problems
                .iter()
                .map(|p| PolicyFailure {
                    source: match (&e.file, p.key.is_empty()) {
                        (Some(file), true) => file.display().to_string(),
                        _ => p.key.clone(),
                    },
                    error: p.message.clone(),
                })
                .collect(),
        };
        *self.attempt.lock().unwrap_or_else(|p| p.into_inner()) = Attempt {
            at: now_secs(),
            failed,
        };
        result
    }

    fn reload_inner(&self) -> Result<usize, ConfigError> {
        let Some((config, engine)) = &self.source else {
            return Err(ConfigError::plain(
                "this instance was built with a policy chain of the host's own; reload it by building a new one",
            ));
        };
        let mut config = config.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = match &config.source_file {
            Some(file) => {
                let mut fresh = Config::load(file)?;
                // Only the policies change while running; the rest of the file applies at the next start.
                let mut kept = config.clone();
                kept.policies = std::mem::take(&mut fresh.policies);
                kept.policy_dir = fresh.policy_dir.take();
                kept
            }
            None => config.clone(),
        };
        let loaded = load(&fresh, engine)?;
        let n = loaded.chain.policies().len();
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = (loaded.chain, loaded.summaries);
        *config = fresh;
        Ok(n)
    }
}
