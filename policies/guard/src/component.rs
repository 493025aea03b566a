//! Binds the guard to the `shellward:policy` world.

use crate::rules::Guard;
use std::cell::RefCell;

wit_bindgen::generate!({ path: "../../wit/v0.4", world: "policy-world" });

use exports::shellward::policy::policy::Guest;
use shellward::policy::host::{Level, log};
use shellward::policy::types as wit;

thread_local! {
    static GUARD: RefCell<Guard> = RefCell::new(Guard::default());
}

struct GuardPolicy;

impl Guest for GuardPolicy {
    fn configure(settings: String) -> Result<(), String> {
        let guard = crate::settings::parse(&settings)?;
        log(
            Level::Debug,
            &format!(
                "configured: {} deny and {} allow patterns, {} rules disabled",
                guard.deny.len(),
                guard.allow.len(),
                guard.disabled.len()
            ),
        );
        GUARD.with(|g| *g.borrow_mut() = guard);
        Ok(())
    }

    fn rules() -> Vec<wit::Rule> {
        GUARD.with(|g| {
            let g = g.borrow();
            crate::rules::RULES
                .iter()
                .filter(|r| !g.disabled.iter().any(|d| d == *r))
                .map(|r| wit::Rule {
                    id: r.to_string(),
                    summary: crate::rules::summary(r).to_string(),
                })
                .chain((!g.deny.is_empty()).then(|| wit::Rule {
                    id: "deny-pattern".to_string(),
                    summary: "refuses commands matching the operator's deny patterns".to_string(),
                }))
                .collect()
        })
    }

    fn evaluate(request: wit::Request) -> wit::Outcome {
        let found = GUARD.with(|g| {
            g.borrow().check_request(
                &request.command,
                request.workdir.as_deref(),
                &request.os,
                &request.shell,
            )
        });
        match found {
            Some(d) if d.ask => wit::Outcome::Ask(wit::Question {
                plan: pass_through(request),
                text: d.reason,
                rule: Some(d.rule),
            }),
            Some(d) => wit::Outcome::Deny(wit::Denial {
                reason: d.reason,
                rule: Some(d.rule),
            }),
            None => wit::Outcome::Run(pass_through(request)),
        }
    }
}

/// The request, unchanged, as a plan. A pass-through must still state an on-timeout; it keeps an earlier policy's
/// choice and otherwise uses the default policy's default (keep running in background).
fn pass_through(request: wit::Request) -> wit::Plan {
    wit::Plan {
        command: request.command,
        workdir: request.workdir,
        background: request.background.unwrap_or(false),
        timeout_ms: request.timeout_ms,
        on_timeout: request.on_timeout.unwrap_or(wit::OnTimeout::Background),
        env: request.env,
        notes: Vec::new(),
        interactive: request.interactive,
        tty: request.tty,
        confinement: request.confinement,
        startup_wait_ms: request.startup_wait_ms,
        rules: Vec::new(),
    }
}

export!(GuardPolicy);

/// Size-class free lists instead of dlmalloc for the decision's small allocations (see `shellward_kit::alloc`).
#[global_allocator]
static ALLOCATOR: shellward_kit::alloc::PolicyAllocator =
    shellward_kit::alloc::PolicyAllocator::new();
