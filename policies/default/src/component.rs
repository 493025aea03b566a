//! Binds the default policy to the `shellward:policy` world.

use crate::decide::{self, Outcome, Request};
use crate::settings::{Network, OnTimeout, Settings};
use std::cell::RefCell;

wit_bindgen::generate!({ path: "../../wit/v0.4", world: "policy-world" });

use exports::shellward::policy::policy::Guest;
use shellward::policy::host::{Level, log};
use shellward::policy::types as wit;

thread_local! {
    /// Set by `configure` (the host calls it before the first evaluation). Not built until then: a fresh instance
    /// per evaluation would otherwise build the default settings and then replace them.
    static SETTINGS: RefCell<Option<Settings>> = const { RefCell::new(None) };
}

fn on_timeout_from(o: wit::OnTimeout) -> OnTimeout {
    match o {
        wit::OnTimeout::Kill => OnTimeout::Kill,
        wit::OnTimeout::Background => OnTimeout::Background,
    }
}

fn on_timeout_to(o: OnTimeout) -> wit::OnTimeout {
    match o {
        OnTimeout::Kill => wit::OnTimeout::Kill,
        OnTimeout::Background => wit::OnTimeout::Background,
    }
}

struct DefaultPolicy;

impl Guest for DefaultPolicy {
    fn configure(settings: String) -> Result<(), String> {
        let parsed = Settings::from_json(&settings)?;
        log(
            Level::Debug,
            &format!("configured: {} promotion patterns", parsed.promote.len()),
        );
        SETTINGS.with(|s| *s.borrow_mut() = Some(parsed));
        Ok(())
    }

    fn rules() -> Vec<wit::Rule> {
        decide::RULES
            .iter()
            .map(|(id, summary)| wit::Rule {
                id: id.to_string(),
                summary: summary.to_string(),
            })
            .collect()
    }

    fn evaluate(request: wit::Request) -> wit::Outcome {
        // Interactive starts are the caller's choice; this policy lets them through as asked.
        let (interactive, tty) = (request.interactive || request.tty, request.tty);
        let (mut confinement, startup_wait_ms) = (request.confinement, request.startup_wait_ms);
        let req = Request {
            command: request.command,
            workdir: request.workdir,
            timeout_ms: request.timeout_ms,
            background: request.background,
            on_timeout: request.on_timeout.map(on_timeout_from),
            env: request.env,
            context: request.context,
            shell: request.shell,
        };
        let outcome = SETTINGS.with(|s| {
            let mut settings = s.borrow_mut();
            decide::evaluate_owned(settings.get_or_insert_with(Settings::default), req)
        });
        match outcome {
            Outcome::Deny { reason, rule } => wit::Outcome::Deny(wit::Denial {
                reason,
                rule: Some(rule.to_string()),
            }),
            Outcome::Run(p) => wit::Outcome::Run(wit::Plan {
                command: p.command,
                workdir: p.workdir,
                background: p.background,
                timeout_ms: p.timeout_ms,
                on_timeout: on_timeout_to(p.on_timeout),
                env: p.env,
                notes: p.notes,
                interactive,
                tty,
                confinement: {
                    if let Some(n) = p.network {
                        confinement.network = match n {
                            Network::None => wit::Network::None,
                            Network::Loopback => wit::Network::Loopback,
                            Network::Host => wit::Network::Host,
                        };
                    }
                    confinement
                },
                startup_wait_ms: p.startup_wait_ms.or(startup_wait_ms),
                rules: p.rules.into_iter().map(str::to_string).collect(),
            }),
        }
    }
}

export!(DefaultPolicy);

/// Size-class free lists instead of dlmalloc for the decision's small allocations (see `shellward_kit::alloc`).
#[global_allocator]
static ALLOCATOR: shellward_kit::alloc::PolicyAllocator =
    shellward_kit::alloc::PolicyAllocator::new();
