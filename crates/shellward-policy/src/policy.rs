//! One loaded policy: instantiation, configuration, evaluation under the sandbox, recovery after faults.

use crate::bindings::{v0_1, v0_2, v0_3, v0_4};
use crate::compat::PolicyInfo;
use crate::engine_state::{EngineInner, InstanceMode, PolicyEngine};
use crate::error::{FaultKind, PolicyError};
use crate::host::{HostRefusal, HostState};
use crate::outside_async::outside_async_runtime;
use crate::types::{Outcome, Request, Rule};
use std::sync::{Arc, Mutex};
use wasmtime::component::Component;
use wasmtime::{Store, Trap};

/// A configured instance.
struct Live {
    store: Store<HostState>,
    bindings: Bindings,
}

/// A component pre-linked for the contract version it was built against.
enum Pre {
    /// The current contract.
    V0_4(v0_4::PolicyWorldPre<HostState>),
    /// `0.3.x`, adapted (see `bindings::v0_3`).
    V0_3(v0_3::PolicyWorldPre<HostState>),
    /// `0.2.x`, adapted (see `bindings::v0_2`).
    V0_2(v0_2::PolicyWorldPre<HostState>),
    /// `0.1.x`, adapted (see `bindings::v0_1`).
    V0_1(v0_1::PolicyWorldPre<HostState>),
}

/// An instance's exports, per contract version.
enum Bindings {
    V0_4(v0_4::PolicyWorld),
    V0_3(v0_3::PolicyWorld),
    V0_2(v0_2::PolicyWorld),
    V0_1(v0_1::PolicyWorld),
}

/// Most configured instances one policy has at once in reuse mode. Concurrent evaluations each take an idle one (or
/// configure a new one while fewer exist), so one slow or looping caller never makes the others wait for it; past
/// this many, a caller waits for one to come back (the engine's instance pool is finite).
const MAX_INSTANCES: usize = 8;

/// A loaded and configured policy; the type is `Send + Sync`. In reuse mode it keeps a small pool of configured
/// instances: evaluations run concurrently, each on an instance of its own.
pub struct Policy {
    name: Arc<str>,
    engine: PolicyEngine,
    pre: Pre,
    settings: String,
    info: PolicyInfo,
    /// The reuse-mode pool: idle configured instances (most recently used last) and how many exist.
    pool: Mutex<Pool>,
    /// Signalled when an instance comes back to the pool or one is dropped.
    returned: std::sync::Condvar,
}

#[derive(Default)]
struct Pool {
    idle: Vec<Live>,
    live: usize,
    /// Callers blocked in [`Policy::take`]: only then is a return signalled (a condition variable's notify is a
    /// system call even with nobody waiting, and an evaluation costs about two microseconds).
    waiting: usize,
}

impl Pool {
    /// Wakes one caller waiting for an instance, if any; call after changing the pool, with its lock released.
    fn wake_waiter(waiting: bool, returned: &std::sync::Condvar) {
        if waiting {
            returned.notify_one();
        }
    }
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("name", &self.name)
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl Policy {
    pub(crate) fn new(
        engine: PolicyEngine,
        name: &str,
        component: &Component,
        settings: &str,
    ) -> Result<Policy, PolicyError> {
        let inner = &engine.inner;
        let info = PolicyInfo::of(&inner.engine, component);
        info.check(name)?;
        let link_err = |e: wasmtime::Error| PolicyError::Link {
            name: name.to_string(),
            message: format!("{e:#}"),
        };
        let pre = inner.linker.instantiate_pre(component).map_err(link_err)?;
        let pre = match info.adapted_from() {
            Some("0.1.0") => Pre::V0_1(v0_1::PolicyWorldPre::new(pre).map_err(link_err)?),
            Some("0.2.0") => Pre::V0_2(v0_2::PolicyWorldPre::new(pre).map_err(link_err)?),
            Some("0.3.0") => Pre::V0_3(v0_3::PolicyWorldPre::new(pre).map_err(link_err)?),
            _ => Pre::V0_4(v0_4::PolicyWorldPre::new(pre).map_err(link_err)?),
        };
        let settings = if settings.trim().is_empty() {
            "{}".to_string()
        } else {
            settings.to_string()
        };
        let policy = Policy {
            name: name.into(),
            engine,
            pre,
            settings,
            info,
            pool: Mutex::new(Pool::default()),
            returned: std::sync::Condvar::new(),
        };
        // Configure once now so bad settings fail at load, and keep the instance for reuse.
        let live = outside_async_runtime(|| policy.instantiate())?;
        if policy.engine.inner.config.instance_mode == InstanceMode::Reuse {
            let mut pool = policy.pool.lock().unwrap_or_else(|p| p.into_inner());
            pool.idle.push(live);
            pool.live = 1;
        }
        Ok(policy)
    }

    /// The policy's name (its file path, or `default`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The settings it was configured with.
    pub fn settings(&self) -> &str {
        &self.settings
    }

    /// What the component declares.
    pub fn info(&self) -> &PolicyInfo {
        &self.info
    }

    fn inner(&self) -> &EngineInner {
        &self.engine.inner
    }

    /// Creates a new store and instance and calls `configure`.
    fn instantiate(&self) -> Result<Live, PolicyError> {
        let inner = self.inner();
        let _ticking = inner.ticker.enter();
        let mut store = Store::new(
            &inner.engine,
            HostState::new(self.name.clone(), inner.config.memory_limit),
        );
        store.limiter(|s| &mut s.limits);
        // Bounds what the host copies out of the guest per call (before the field-by-field check).
        store.set_hostcall_fuel(inner.config.outcome_limits.lift_budget());
        store.set_epoch_deadline(inner.deadline_ticks());
        let bindings = match &self.pre {
            Pre::V0_4(pre) => pre.instantiate(&mut store).map(Bindings::V0_4),
            Pre::V0_3(pre) => pre.instantiate(&mut store).map(Bindings::V0_3),
            Pre::V0_2(pre) => pre.instantiate(&mut store).map(Bindings::V0_2),
            Pre::V0_1(pre) => pre.instantiate(&mut store).map(Bindings::V0_1),
        }
        .map_err(|e| self.fault(&store, e, "instantiating"))?;
        store.set_epoch_deadline(inner.deadline_ticks());
        let configured = match &bindings {
            Bindings::V0_4(b) => b
                .shellward_policy_policy()
                .call_configure(&mut store, &self.settings),
            Bindings::V0_3(b) => b
                .shellward_policy_policy()
                .call_configure(&mut store, &self.settings),
            Bindings::V0_2(b) => b
                .shellward_policy_policy()
                .call_configure(&mut store, &self.settings),
            Bindings::V0_1(b) => b
                .shellward_policy_policy()
                .call_configure(&mut store, &self.settings),
        };
        match configured {
            Ok(Ok(())) => Ok(Live { store, bindings }),
            Ok(Err(message)) => Err(PolicyError::Settings {
                name: self.name.to_string(),
                message,
            }),
            Err(e) => Err(self.fault(&store, e, "configuring")),
        }
    }

    /// Evaluates one request under the sandbox.
    pub fn evaluate(&self, request: &Request) -> Result<Outcome, PolicyError> {
        outside_async_runtime(|| self.evaluate_here(request))
    }

    /// [`Policy::evaluate`] for a caller already outside the async runtime (the chain).
    pub(crate) fn evaluate_here(&self, request: &Request) -> Result<Outcome, PolicyError> {
        match self.inner().config.instance_mode {
            InstanceMode::Fresh => {
                let mut live = self.instantiate()?;
                self.call(&mut live, request)
            }
            InstanceMode::Reuse => {
                let mut live = self.take()?;
                let result = self.call(&mut live, request);
                // A trapped instance must not be used again (it is dropped); a healthy one goes back to the pool.
                let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
                if result.is_ok() {
                    pool.idle.push(live);
                } else {
                    pool.live -= 1;
                }
                let waiting = pool.waiting > 0;
                drop(pool);
                Pool::wake_waiter(waiting, &self.returned);
                result
            }
        }
    }

    /// An instance for one evaluation: an idle one, a new one while fewer than [`MAX_INSTANCES`] exist, else the next
    /// one returned.
    fn take(&self) -> Result<Live, PolicyError> {
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(live) = pool.idle.pop() {
                return Ok(live);
            }
            if pool.live < MAX_INSTANCES {
                pool.live += 1;
                drop(pool);
                return self.instantiate().inspect_err(|_| {
                    let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
                    pool.live -= 1;
                    let waiting = pool.waiting > 0;
                    drop(pool);
                    Pool::wake_waiter(waiting, &self.returned);
                });
            }
            pool.waiting += 1;
            pool = self.returned.wait(pool).unwrap_or_else(|p| p.into_inner());
            pool.waiting -= 1;
        }
    }

    /// The rules the policy may name (its `rules` export, called on a configured instance); empty for a policy built
    /// against a contract before 0.3, which names none. Ids that are not valid rule ids are a fault of the policy.
    pub fn rules(&self) -> Result<Vec<Rule>, PolicyError> {
        outside_async_runtime(|| {
            let mut live = self.instantiate()?;
            let _ticking = self.inner().ticker.enter();
            live.store.set_epoch_deadline(self.inner().deadline_ticks());
            let rules = match &live.bindings {
                Bindings::V0_4(b) => b
                    .shellward_policy_policy()
                    .call_rules(&mut live.store)
                    .map(v0_4::rules)
                    .map_err(|e| self.fault(&live.store, e, "listing its rules"))?,
                Bindings::V0_3(b) => b
                    .shellward_policy_policy()
                    .call_rules(&mut live.store)
                    .map(v0_3::rules)
                    .map_err(|e| self.fault(&live.store, e, "listing its rules"))?,
                Bindings::V0_2(_) | Bindings::V0_1(_) => Vec::new(),
            };
            let limits = &self.inner().config.outcome_limits;
            for r in &rules {
                let mut probe = crate::types::Plan::from_request(&Request::new("true"));
                probe.rules = vec![r.id.clone()];
                limits
                    .check(&Outcome::Run(probe))
                    .map_err(|detail| PolicyError::Fault {
                        name: self.name().to_string(),
                        kind: FaultKind::InvalidOutput,
                        during: "listing its rules",
                        detail,
                    })?;
            }
            Ok(rules)
        })
    }

    fn call(&self, live: &mut Live, request: &Request) -> Result<Outcome, PolicyError> {
        let _ticking = self.inner().ticker.enter();
        live.store.set_epoch_deadline(self.inner().deadline_ticks());
        let outcome = match &live.bindings {
            Bindings::V0_4(b) => b
                .shellward_policy_policy()
                .call_evaluate(&mut live.store, &v0_4::request(request))
                .map(v0_4::outcome),
            Bindings::V0_3(b) => b
                .shellward_policy_policy()
                .call_evaluate(&mut live.store, &v0_3::request(request))
                .map(v0_3::outcome),
            Bindings::V0_2(b) => b
                .shellward_policy_policy()
                .call_evaluate(&mut live.store, &v0_2::request(request))
                .map(|o| v0_2::outcome(o, request)),
            Bindings::V0_1(b) => b
                .shellward_policy_policy()
                .call_evaluate(&mut live.store, &v0_1::request(request))
                .map(|o| v0_1::outcome(o, request)),
        }
        .map_err(|e| self.fault(&live.store, e, "evaluating"))?;
        self.inner()
            .config
            .outcome_limits
            .check(&outcome)
            .map_err(|detail| PolicyError::Fault {
                name: self.name().to_string(),
                kind: FaultKind::InvalidOutput,
                during: "evaluating",
                detail,
            })?;
        if let Some(plan) = outcome.planned()
            && let Some(detail) = plan.confinement.beyond(&request.ceiling)
        {
            tracing::warn!(policy = &*self.name, "policy fault: {detail}");
            return Err(PolicyError::Fault {
                name: self.name().to_string(),
                kind: FaultKind::BeyondCeiling,
                during: "evaluating",
                detail,
            });
        }
        Ok(outcome)
    }

    fn fault(
        &self,
        store: &Store<HostState>,
        error: wasmtime::Error,
        during: &'static str,
    ) -> PolicyError {
        let config = &self.inner().config;
        let root = error.root_cause().to_string();
        let (kind, mut detail) = match error.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => (
                FaultKind::Deadline,
                format!(
                    "it ran past its deadline of {} ms and was stopped",
                    config.deadline.as_millis()
                ),
            ),
            Some(Trap::StackOverflow) => (FaultKind::Stack, "it overflowed its stack".to_string()),
            _ if store.data().limits.memory_refused => (
                FaultKind::Memory,
                format!(
                    "it tried to use more than its memory limit of {} MiB",
                    config.memory_limit >> 20
                ),
            ),
            Some(trap) => (FaultKind::Trap, format!("it trapped: {trap}")),
            None if error.chain().any(|e| e.is::<HostRefusal>()) => {
                (FaultKind::Trap, format!("it trapped: {root}"))
            }
            // Neither a trap nor a host function's refusal: wasmtime could not read what the policy returned (more
            // than the hostcall fuel allows, a string that is not UTF-8, a pointer outside its memory).
            None => (
                FaultKind::InvalidOutput,
                format!(
                    "it returned an outcome the host does not accept ({root}); the host reads at most {} bytes in \
                     all for the command, notes, deny reason and variables",
                    config.outcome_limits.lift_budget()
                ),
            ),
        };
        let stderr = store.data().stderr_text();
        if !stderr.is_empty() {
            detail.push_str("; it printed: ");
            detail.push_str(&stderr);
        }
        tracing::warn!(policy = &*self.name, during, "policy fault: {detail}");
        PolicyError::Fault {
            name: self.name.to_string(),
            kind,
            during,
            detail,
        }
    }
}
